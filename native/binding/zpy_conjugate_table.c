/* The conjugate table of each runtime, and conjugates freed by refcount.
 *
 * A conjugate is created (zpy_conjugate_bind) when Python first needs one for an
 * object, and expired (address := NULL, u.expired := the ExpiredPointer) when
 * the collector gathers the object, before the purge frees it, or when the
 * runtime closes. Nothing reads native memory through an expired conjugate:
 * its views expire with it, in place, before anything else happens.
 */
#include "value.h"

#include <structmember.h>

/* =========================================================================
 * The conjugate table
 * ========================================================================= */

/* Grow the table so that `index` fits: doubling, so that n puts cost O(n). */
int zpy_table_reserve(zpy_runtime_core *rt, uint32_t index) {
    if (index < rt->capacity) return 0;
    uint64_t wanted = rt->capacity ? (uint64_t)rt->capacity * 2 : 1024;
    while (wanted <= index) wanted *= 2;
    if (wanted > (uint64_t)UINT32_MAX) wanted = (uint64_t)UINT32_MAX;
    uint8_t *sole = PyMem_Realloc(rt->sole, (size_t)wanted);
    if (sole == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(sole + rt->capacity, 0, (size_t)(wanted - rt->capacity));
    rt->sole = sole;
    PyObject **grown = PyMem_Realloc(rt->table, (size_t)wanted * sizeof(PyObject *));
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1; /* the longer `sole` is harmless: capacity bounds every use */
    }
    memset(grown + rt->capacity, 0, (size_t)(wanted - rt->capacity) * sizeof(PyObject *));
    rt->table = grown;
    rt->capacity = (uint32_t)wanted;
    return 0;
}

zpy_conjugate *zpy_conjugate_alloc_new(PyTypeObject *cls) {
    if (!zpy_class_stateful(cls)) /* untracked instances (init_class) */
        return (zpy_conjugate *)cls->tp_alloc(cls, 0);
    /* Tracked instances: before Python 3.12, allocating one may run a cycle
       collection on the spot (finalisers, gc callbacks), so the collector
       waits for this one allocation (zpy_object_state.c). */
    int enabled = PyGC_Disable();
    zpy_conjugate *conjugate = (zpy_conjugate *)cls->tp_alloc(cls, 0);
    if (enabled) PyGC_Enable();
    return conjugate;
}

/* Drop a conjugate's entry if it is the one recorded (the reference a
 * stateful conjugate's entry held is the caller's to give up). Returns
 * whether the conjugate was its object's sole holder. */
int zpy_table_forget(zpy_runtime_core *rt, zpy_conjugate *conjugate) {
    uint32_t index = ZS_REF_INDEX(conjugate->handle);
    if (index >= rt->capacity || rt->table[index] != (PyObject *)conjugate) return 0;
    rt->table[index] = NULL;
    int sole = rt->sole[index];
    rt->sole[index] = 0;
    return sole;
}

/* =========================================================================
 * Conjugates freed by refcount
 * ========================================================================= */

/* Most the queue holds: past it, objects wait for the collector. */
#define ZPY_DROPPED_MAX 65536u

/* Queue a live conjugate being freed, for the heap (zpy_dropped_flush). A
 * finaliser's context: allocates with PyMem only (no Python code runs),
 * and out of memory simply leaves the object to the collector. */
void zpy_dropped_add(zpy_runtime_core *rt, zs_ref handle, int sole) {
    if (!zpy_open(rt)) return; /* closing frees everything anyway */
    if (rt->dropped_count == rt->dropped_capacity) {
        uint32_t capacity = rt->dropped_capacity ? rt->dropped_capacity * 2 : 64;
        zs_dropped_conjugate *grown = capacity <= ZPY_DROPPED_MAX
                                          ? PyMem_Realloc(rt->dropped,
                                                          capacity * sizeof(zs_dropped_conjugate))
                                          : NULL;
        if (grown == NULL) return;
        rt->dropped = grown;
        rt->dropped_capacity = capacity;
    }
    rt->dropped[rt->dropped_count++] = (zs_dropped_conjugate){handle, (uint32_t)sole, 0};
}

void zpy_dropped_flush(zpy_runtime_core *rt) {
    if (zpy_open(rt) && zpy_dropped_ready(rt) > 0)
        (void)zs_conjugates_dropped(rt->native, rt->state, rt->dropped, rt->dropped_count, NULL);
    rt->dropped_count = 0;
}

/* =========================================================================
 * Class checks and resolution
 * ========================================================================= */

PyObject *zpy_conjugate_of(zpy_runtime_core *rt, zs_ref handle) {
    if (handle == ZS_NULL_REF) Py_RETURN_NONE;
    zpy_conjugate *found = zpy_table_get(rt, handle);
    if (found == NULL) return zpy_resolve_conjugate(rt, handle); /* None while closing */
    /* A proxy Python holds of a dying object (gathered, or left unmarked by
       a complete mark) that the bounded expiry has not reached yet is not
       handed out either, as zs_resolve_for_conjugate refuses a new one (the
       window is open only while the heap is attached). */
    if (zpy_dying_window(rt) && zs_object_writable(rt->native, handle) == ZS_E_DYING)
        Py_RETURN_NONE;
    return Py_NewRef((PyObject *)found);
}

/* The conjugate of a handle that missed the table, made here when Python
 * knows the object's class: the object is recorded as having a conjugate
 * first (from then on no purge frees it before the expiry handler, which
 * needs the GIL this thread holds, has seen it), then its class is read
 * and the conjugate made and bound, with no Python code in between
 * (zpy_conjugate_alloc runs none). A host's class Python has not bound yet
 * takes Runtime._conjugate_of_slow, which binds it. None for a dead or
 * dying object. */
PyObject *zpy_resolve_conjugate(zpy_runtime_core *rt, zs_ref handle) {
    assert(zpy_table_get(rt, handle) == NULL);
    if (!zpy_open(rt)) Py_RETURN_NONE; /* no new proxy while closing */
    zs_object *object = NULL;
    if (zs_resolve_for_conjugate(rt->native, handle, &object) != ZS_OK) Py_RETURN_NONE;
    return zpy_make_conjugate(rt, handle, object);
}

PyObject *zpy_make_conjugate(zpy_runtime_core *rt, zs_ref handle, zs_object *object) {
    assert(zpy_table_get(rt, handle) == NULL && zpy_open(rt));
    uint32_t id = zs_class_id(object->cls);
    PyObject *cls = id < rt->class_capacity ? rt->classes[id] : NULL;
    if (cls == NULL) {
        PyObject *number = PyLong_FromUnsignedLongLong(handle);
        if (number == NULL) return NULL;
        PyObject *result = PyObject_CallMethodOneArg((PyObject *)rt, rt->state->str_conjugate_of,
                                                     number);
        Py_DECREF(number);
        return result;
    }
    zpy_conjugate *conjugate = zpy_conjugate_alloc(rt, (PyTypeObject *)cls);
    if (conjugate == NULL) return NULL;
    if (zpy_conjugate_bind(rt, conjugate, handle, object) < 0) {
        Py_DECREF(conjugate);
        return NULL;
    }
    return (PyObject *)conjugate;
}
