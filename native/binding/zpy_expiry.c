/* Expiry: the expiry handler the heap hands dying objects to, expiring
 * their conjugates (and their views) in place; the batches the collection
 * protocol asks for (zpy_expire_dying, zpy_collection.c); and the safe
 * point (zpy_flush_values).
 */
#include "value.h"
#include <structmember.h>

/* The stateful conjugates an expiry took out of the table, each with the
 * table's reference: their state is released once the expiry is over
 * (zpy_state_release), since a value's finaliser may run any Python code. */
typedef struct zpy_released {
    zpy_conjugate **items;
    size_t count, capacity;
} zpy_released;

/* Keep an expired stateful conjugate for release_all; with no room left,
 * release it now (it has fully expired: safe, only earlier). */
static void released_add(zpy_released *released, zpy_conjugate *conjugate) {
    if (released->count < released->capacity) {
        released->items[released->count++] = conjugate;
        return;
    }
    PyObject *error = zpy_error_take();
    zpy_state_release(conjugate);
    if (error != NULL) zpy_error_give(error);
}

/* Release what an expiry kept: the exception being raised, if any, waits. */
static void release_all(zpy_released *released) {
    if (released->count == 0) return;
    PyObject *error = zpy_error_take();
    for (size_t i = 0; i < released->count; i++) zpy_state_release(released->items[i]);
    released->count = 0;
    if (error != NULL) zpy_error_give(error);
}

/* =========================================================================
 * Expiry
 * ========================================================================= */

/* Test-only fault injection (rt->expiry_faults, set by
 * GarbageCollector._debug_fail_expiries): fail this expiry as running out
 * of memory for its sentinel would, while faults are armed. One load
 * when they are not. */
static int expiry_fault(zpy_runtime_core *rt) {
    if (rt->expiry_faults == 0) return 0;
    rt->expiry_faults--;
    PyErr_NoMemory();
    return 1;
}

/* Expire one live conjugate: its views expire in place first (no Python
 * code), then it leaves the table, its address goes, and u.expired becomes
 * ExpiredPointer(kind, describe, packed name, reason). The sentinel's
 * allocation may run Python code (a cycle collection), which may change the
 * table: callers re-read the table after each call. The object's memory is
 * still there until the purge, which runs after every expiry. */
static int expire_one(zpy_conjugate *conjugate, PyObject *describe, uint64_t packed_name,
                      PyObject *reason, zpy_released *released) {
    zpy_runtime_core *rt = conjugate->runtime;
    /* A stateful conjugate's entry was a strong reference: it keeps the
       conjugate alive through the allocations below, and goes to
       `released` once the conjugate has expired. */
    int stateful = zpy_class_stateful(Py_TYPE(conjugate));
    zpy_core_state *state = rt->state;
    PyTypeObject *expired_type = (PyTypeObject *)state->expired_type;
    zpyv_table *views = conjugate->u.views;
    conjugate->u.views = NULL;
    zpyv_expire_table(views, reason == state->reason_closed ? reason : state->reason_parent);
    zpyv_table_free(views);
    zpy_table_forget(rt, conjugate);
    conjugate->address = NULL;
    Py_INCREF(conjugate); /* the allocations below may drop the last reference */
    PyObject *name = expiry_fault(rt) ? NULL : PyLong_FromUnsignedLongLong(packed_name);
    PyObject *sentinel = name ? expired_type->tp_alloc(expired_type, 4) : NULL;
    if (sentinel == NULL) {
        Py_XDECREF(name);
        Py_DECREF(conjugate);
        if (stateful) released_add(released, conjugate);
        return -1; /* expired all the same: its errors have no name */
    }
    PyObject *kind = ((PyHeapTypeObject *)Py_TYPE(conjugate))->ht_name;
    PyTuple_SET_ITEM(sentinel, 0, Py_NewRef(kind));
    PyTuple_SET_ITEM(sentinel, 1, Py_NewRef(describe));
    PyTuple_SET_ITEM(sentinel, 2, name);
    PyTuple_SET_ITEM(sentinel, 3, Py_NewRef(reason));
    Py_XSETREF(conjugate->u.expired, sentinel);
    Py_DECREF(conjugate);
    if (stateful) released_add(released, conjugate);
    return 0;
}

/* Expire the conjugates of the objects the heap handed over (the objects
 * stay in memory until this returns: native/src/expiry.c, zs_gc_hand_over).
 * -1 with an exception (each expired all the same). */
static int expire_handed(zpy_runtime_core *rt, const zs_ref *objects, const uint64_t *names,
                         const uint8_t *garbage, uint32_t count) {
    zpy_released released = {NULL, 0, 0};
    if (count > 0 && (released.items = PyMem_Malloc(count * sizeof(zpy_conjugate *))) != NULL)
        released.capacity = count; /* else each is released as it expires */
    int failed = 0;
    uint32_t expired = 0;
    /* Until the last of them has expired, no host function may run (Python
       code here is a gc callback or finaliser on an allocation): its
       collection would be refused, and its calls on them must be. */
    zpy_life_begin(rt, ZPY_ACT_EXPIRE); /* never refused: the heap decides when */
    for (uint32_t i = 0; i < count; i++) {
        zpy_conjugate *conjugate = zpy_table_get(rt, objects[i]);
        if (conjugate == NULL) continue; /* no conjugate now (freed by refcount, or never made) */
        failed |= expire_one(conjugate, rt->describe, names[i],
                             garbage[i] ? rt->state->reason_garbage : rt->state->reason_collected,
                             &released);
        expired++;
    }
    zpy_life_leave(rt, ZPY_ACT_EXPIRE);
    release_all(&released);
    PyMem_Free(released.items);
    zpyv_bury(rt); /* the parked views expiry could not free on the spot */
    rt->cycle_expired += expired;
    return failed ? -1 : 0;
}

void zpy_expire_handed_over(void *user, zs_runtime *native, const zs_ref *objects,
                            const uint64_t *names, const uint8_t *garbage, uint32_t count) {
    zpy_core_state *state = user;
    PyGILState_STATE gil = PyGILState_Ensure();
    /* A runtime Python closed expired every conjugate already. */
    zpy_runtime_core *rt = zpy_open_runtime_of(state, native);
    if (rt != NULL && rt->describe != NULL) {
        Py_INCREF(rt);
        PyObject *before = zpy_error_take(); /* a caller's pending error waits */
        if (expire_handed(rt, objects, names, garbage, count) < 0) {
            if (rt->expiry_reporters > 0 && rt->expiry_error == NULL)
                rt->expiry_error = zpy_error_take();
            else PyErr_WriteUnraisable((PyObject *)rt);
        }
        if (before != NULL) zpy_error_give(before);
        Py_DECREF(rt);
    }
    PyGILState_Release(gil);
}

int zpy_expiry_reporting(zpy_runtime_core *rt, int in) {
    if (in) {
        rt->expiry_reporters++;
        return 0;
    }
    assert(rt->expiry_reporters > 0);
    rt->expiry_reporters--;
    PyObject *error = rt->expiry_error;
    if (error == NULL || rt->expiry_reporters > 0) return 0;
    rt->expiry_error = NULL;
    zpy_error_give(error);
    return -1;
}

int zpy_expire_dying(zpy_runtime_core *rt, uint32_t limit, uint32_t *out_taken,
                     uint32_t *out_expired) {
    *out_taken = *out_expired = 0;
    if (rt->native == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the runtime is closed");
        return -1;
    }
    uint64_t before = rt->cycle_expired;
    zpy_expiry_reporting(rt, 1);
    zs_status status = zs_gc_expire(rt->native, limit, out_taken);
    int failed = zpy_expiry_reporting(rt, 0);
    *out_expired = (uint32_t)(rt->cycle_expired - before);
    if (failed < 0) return -1;
    if (status != ZS_OK) {
        PyObject *what = PyUnicode_FromString("collect_garbage");
        Py_XDECREF(what ? zpy_call_raise_status(rt->state, status, what, rt) : NULL);
        Py_XDECREF(what);
        return -1;
    }
    return 0;
}

/* Runtime._flush_values(): free the native blocks of black values Python
 * finalised, and drop delegate callables no binding holds (a safe point). */
int zpy_flush_values(zpy_runtime_core *rt) {
    zpyv_flush(rt);
    zpy_dropped_flush(rt); /* before a collection: it need not gather them */
    zpyv_bury(rt);
    return zpyv_callables_drain(rt);
}

/* Runtime._expire_all(describe, keep_heap=False) -> None, or the error of
 * an expiry: expire every conjugate in the table and every black value
 * (close()). Names are read from the native headers, still there. With
 * keep_heap (Python lets go of a runtime a host owns and keeps), the heap is
 * told too: the black values' blocks are freed and no object keeps its
 * conjugate flag, so the host's later collections need no managed side. An
 * expiry that failed (MemoryError for its sentinel) expired its conjugate
 * all the same, so its error is returned, not raised: close() finishes
 * closing, then raises it. Raised: a failure before anything expired. */
PyObject *zpy_runtime_expire_all(PyObject *self, PyObject *args) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    PyObject *describe;
    int keep_heap = 0;
    if (!PyArg_ParseTuple(args, "O|p:_expire_all", &describe, &keep_heap)) return NULL;
    PyObject *reason = rt->state->reason_closed;
    if (keep_heap) {
        if (rt->native == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "_expire_all: the runtime is detached");
            return NULL;
        }
        if (zpy_flush_values(rt) < 0) return NULL; /* queued frees and dropped conjugates */
    }
    zpyv_expire_blacks(rt, reason, keep_heap);
    /* Room for every stateful conjugate now in the table (none can be added
       while closing; one that is all the same is released on the spot). */
    zpy_released released = {NULL, 0, 0};
    for (uint32_t i = 0; i < rt->capacity; i++)
        if (rt->table[i] != NULL && zpy_class_stateful(Py_TYPE(rt->table[i]))) released.capacity++;
    if (released.capacity > 0 &&
        (released.items = PyMem_Malloc(released.capacity * sizeof(zpy_conjugate *))) == NULL)
        released.capacity = 0; /* out of memory: each is released as it expires */
    int failed = 0;
    for (uint32_t i = 0; i < rt->capacity; i++) {
        zpy_conjugate *conjugate = (zpy_conjugate *)rt->table[i];
        if (conjugate == NULL) continue;
        const zs_object *header = (const zs_object *)conjugate->address;
        uint64_t packed = header->name_index | (uint64_t)header->name_number << 32;
        if (keep_heap) zs_forget_conjugate(rt->native, conjugate->handle);
        failed |= expire_one(conjugate, describe, packed, reason, &released);
    }
    release_all(&released);
    PyMem_Free(released.items);
    zpyv_bury(rt); /* the parked views expiry could not free on the spot */
    if (failed) return zpy_error_take();
    Py_RETURN_NONE;
}
