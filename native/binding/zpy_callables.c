/* The callable registry of each runtime: delegate callables by id (a
 * binding to a plain callable stores its id), taken while staging,
 * released when no binding holds them.
 */
#include "value.h"

/* =========================================================================
 * Delegate callables
 * ========================================================================= */

/* Native delegate bindings name Python callables by id. The registry holds
 * each callable while some native binding does: an id is retained natively
 * once when registered (the registry's hold), each binding store retains it
 * again, and the registry's hold is released once the store is done. Ids
 * whose native count drops to zero are reported by the heap and dropped
 * here at a safe point (zpyv_callables_drain). */

/* Register a callable: its id, retained natively once; 0 when out of memory. */
uint32_t zpyv_callable_id(zpy_runtime_core *rt, PyObject *callable) {
    if (rt->native == NULL) return 0;
    if (rt->callable_free == 0) {
        uint32_t capacity = rt->callable_capacity ? rt->callable_capacity * 2 : 64;
        PyObject **grown = PyMem_Realloc(rt->callables, (size_t)capacity * sizeof *grown);
        if (grown == NULL) return 0;
        for (uint32_t i = capacity; i-- > rt->callable_capacity;) {
            /* A free slot holds the next free id, tagged as an odd integer. */
            grown[i] = (PyObject *)(uintptr_t)(((uintptr_t)rt->callable_free << 1) | 1u);
            rt->callable_free = i + 1;
        }
        rt->callables = grown;
        rt->callable_capacity = capacity;
    }
    uint32_t id = rt->callable_free;
    uintptr_t next = (uintptr_t)rt->callables[id - 1];
    if (zs_callable_retain(rt->native, id) != ZS_OK) return 0;
    rt->callable_free = (uint32_t)(next >> 1);
    rt->callables[id - 1] = Py_NewRef(callable);
    rt->callable_count++;
    return id;
}

/* Release the registry's hold on an id once its binding store is made. */
void zpyv_callable_done(zpy_runtime_core *rt, uint32_t id) {
    if (id != 0 && rt->native != NULL) zs_callable_release(rt->native, id);
}

/* The callable of an id (borrowed), or NULL for a free or unknown id. */
PyObject *zpyv_callable_get(zpy_runtime_core *rt, uint32_t id) {
    if (id == 0 || id > rt->callable_capacity) return NULL;
    PyObject *held = rt->callables[id - 1];
    return ((uintptr_t)held & 1u) ? NULL : held;
}

/* Drop the callables of ids no native binding holds any more. */
int zpyv_callables_drain(zpy_runtime_core *rt) {
    if (rt->callable_count == 0) return 0;
    uint32_t ids[256], count = 0;
    do {
        /* Checked on every round: a finaliser run by a drop below may have
           closed the runtime (close drops every callable itself). */
        if (!zpy_open(rt)) return 0;
        if (zs_take_released_callables(rt->native, ids, 256, &count) != ZS_OK) return -1;
        for (uint32_t i = 0; i < count && rt->native != NULL; i++) {
            uint32_t id = ids[i];
            PyObject *held = zpyv_callable_get(rt, id);
            if (held == NULL) continue;
            rt->callables[id - 1] = (PyObject *)(uintptr_t)(((uintptr_t)rt->callable_free << 1) |
                                                            1u);
            rt->callable_free = id;
            rt->callable_count--;
            Py_DECREF(held); /* may run Python code: the slot is consistent already */
        }
    } while (count == 256);
    return 0;
}

/* Drop every callable (close, dealloc): the registry is emptied first, so a
 * callable's finaliser finds it consistent. */
void zpyv_callables_free(zpy_runtime_core *rt) {
    PyObject **held = rt->callables;
    uint32_t capacity = rt->callable_capacity;
    rt->callables = NULL;
    rt->callable_capacity = rt->callable_count = rt->callable_free = 0;
    for (uint32_t i = 0; i < capacity; i++)
        if (held[i] != NULL && !((uintptr_t)held[i] & 1u)) Py_DECREF(held[i]);
    PyMem_Free(held);
}
