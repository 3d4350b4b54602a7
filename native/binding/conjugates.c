/* Object conjugates and the conjugate table of each runtime.
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
       waits for this one allocation (state.c). */
    int enabled = PyGC_Disable();
    zpy_conjugate *conjugate = (zpy_conjugate *)cls->tp_alloc(cls, 0);
    if (enabled) PyGC_Enable();
    return conjugate;
}

/* Drop a conjugate's entry if it is the one recorded (the reference a
 * stateful conjugate's entry held is the caller's to give up). Returns
 * whether the conjugate was its object's sole holder. */
static int table_forget(zpy_runtime_core *rt, zpy_conjugate *conjugate) {
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
static void dropped_add(zpy_runtime_core *rt, zs_ref handle, int sole) {
    if (rt->native == NULL || rt->closing) return; /* closing frees everything anyway */
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
    if (rt->native != NULL && !rt->closing && zpy_dropped_ready(rt) > 0)
        (void)zs_conjugates_dropped(rt->native, rt->state, rt->dropped, rt->dropped_count, NULL);
    rt->dropped_count = 0;
}

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
    table_forget(rt, conjugate);
    conjugate->address = NULL;
    Py_INCREF(conjugate); /* the allocations below may drop the last reference */
    PyObject *name = PyLong_FromUnsignedLongLong(packed_name);
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
 * stay in memory until this returns: gc_purge.c, zs_gc_hand_over). -1 with
 * an exception (each expired all the same). */
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
    char outer = rt->expiring;
    rt->expiring = 1;
    for (uint32_t i = 0; i < count; i++) {
        zpy_conjugate *conjugate = zpy_table_get(rt, objects[i]);
        if (conjugate == NULL) continue; /* no conjugate now (freed by refcount, or never made) */
        failed |= expire_one(conjugate, rt->describe, names[i],
                             garbage[i] ? rt->state->reason_garbage : rt->state->reason_collected,
                             &released);
        expired++;
    }
    rt->expiring = outer;
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

/* Runtime._expire_dying_batch(limit) -> (taken, expired): have the heap
 * hand up to `limit` dying objects from its expiring list to the expiry
 * handler, which expires the conjugates they have (expired counts those). */
static PyObject *runtime_expire_dying_batch(PyObject *self, PyObject *args) {
    unsigned int limit;
    if (!PyArg_ParseTuple(args, "I:_expire_dying_batch", &limit)) return NULL;
    uint32_t taken, expired;
    if (zpy_expire_dying((zpy_runtime_core *)self, limit, &taken, &expired) < 0) return NULL;
    return Py_BuildValue("(II)", taken, expired);
}

/* Runtime._expire_all(describe, keep_heap=False): expire every conjugate in
 * the table and every black value (close()). Names are read from the native
 * headers, still there. With keep_heap (Python lets go of a runtime a host
 * owns and keeps), the heap is told too: the black values' blocks are freed
 * and no object keeps its conjugate flag, so the host's later collections
 * need no managed side. */
static PyObject *runtime_expire_all(PyObject *self, PyObject *args) {
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
    if (failed) return NULL;
    Py_RETURN_NONE;
}

/* =========================================================================
 * Class checks and resolution
 * ========================================================================= */

PyObject *zpy_conjugate_of(zpy_runtime_core *rt, zs_ref handle) {
    if (handle == ZS_NULL_REF) Py_RETURN_NONE;
    zpy_conjugate *found = zpy_table_get(rt, handle);
    if (found != NULL) return Py_NewRef((PyObject *)found);
    if (rt->native == NULL || rt->closing) Py_RETURN_NONE;
    return zpy_resolve_conjugate(rt, handle);
}

/* Runtime._set_native_class(cls, address): `cls`'s native class in this
 * runtime (the class checks of every accessor read it). */
static PyObject *runtime_set_native_class(PyObject *self, PyObject *args) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    PyObject *cls, *address;
    if (!PyArg_ParseTuple(args, "OO:_set_native_class", &cls, &address)) return NULL;
    if (!PyObject_TypeCheck(cls, rt->state->class_type) || ((zpy_class_object *)cls)->number == 0) {
        PyErr_SetString(PyExc_TypeError, "_set_native_class: not a conjugate class");
        return NULL;
    }
    const zs_class *native = PyLong_AsVoidPtr(address);
    if (native == NULL)
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "null native class");
    uint32_t number = ((zpy_class_object *)cls)->number;
    if (number >= rt->native_count) {
        uint32_t count = rt->native_count ? rt->native_count : 64;
        while (count <= number) count *= 2;
        const zs_class **grown = PyMem_Realloc(rt->natives, count * sizeof *grown);
        if (grown == NULL) return PyErr_NoMemory();
        memset(grown + rt->native_count, 0, (count - rt->native_count) * sizeof *grown);
        rt->natives = grown;
        rt->native_count = count;
    }
    rt->natives[number] = native;
    /* And the other way: the class of a native class id, for proxies made in C. */
    uint32_t id = zs_class_id(native);
    if (id >= rt->class_capacity) {
        uint32_t count = rt->class_capacity ? rt->class_capacity : 64;
        while (count <= id) count *= 2;
        PyObject **grown = PyMem_Realloc(rt->classes, count * sizeof *grown);
        if (grown == NULL) return PyErr_NoMemory();
        memset(grown + rt->class_capacity, 0, (count - rt->class_capacity) * sizeof *grown);
        rt->classes = grown;
        rt->class_capacity = count;
    }
    Py_XSETREF(rt->classes[id], Py_NewRef(cls));
    Py_RETURN_NONE;
}

/* Forget the classes of native class ids (close, dealloc, cycle collection). */
static void classes_clear(zpy_runtime_core *rt) {
    PyObject **classes = rt->classes;
    uint32_t count = rt->class_capacity;
    rt->classes = NULL;
    rt->class_capacity = 0;
    for (uint32_t i = 0; i < count; i++) Py_XDECREF(classes[i]);
    PyMem_Free(classes);
}

/* Runtime._flush_values(): free the native blocks of black values Python
 * finalised, and drop delegate callables no binding holds (a safe point). */
int zpy_flush_values(zpy_runtime_core *rt) {
    zpyv_flush(rt);
    zpy_dropped_flush(rt); /* before a collection: it need not gather them */
    zpyv_bury(rt);
    return zpyv_callables_drain(rt);
}

static PyObject *runtime_flush_values(PyObject *self, PyObject *unused) {
    (void)unused;
    if (zpy_flush_values((zpy_runtime_core *)self) < 0) return NULL;
    Py_RETURN_NONE;
}

/* Runtime._native_type(kind): the address of a kind's native type in this
 * runtime (registered on first use), for class registration. */
static PyObject *runtime_native_type(PyObject *self, PyObject *kind) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (!zpyv_is_kind(rt->state, kind)) {
        PyErr_SetString(PyExc_TypeError, "_native_type: a Kind");
        return NULL;
    }
    const zs_type *type = zpyv_native_type(rt, (zpyv_kind *)kind);
    return type == NULL ? NULL : PyLong_FromVoidPtr((void *)type);
}

/* Runtime._object_bytes(handle) -> the bytes of a native object while it
 * exists (dying ones included, until the purge): a testing aid, for tests
 * that prove a refused write changed nothing. */
static PyObject *runtime_object_bytes(PyObject *self, PyObject *handle) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    zs_ref ref = PyLong_AsUnsignedLongLong(handle);
    if (ref == (zs_ref)-1 && PyErr_Occurred()) return NULL;
    const zs_object *object = rt->native ? zs_resolve(rt->native, ref) : NULL;
    if (object == NULL)
        return PyErr_Format(rt->state->expired_exception, "no native object for that handle");
    uint32_t size = zs_class_instance_size(object->cls);
    return PyBytes_FromStringAndSize((const char *)object, size);
}

/* Runtime._black_values() -> every live black value (leak reports). */
static PyObject *runtime_black_values(PyObject *self, PyObject *unused) {
    (void)unused;
    PyObject *list = PyList_New(0);
    for (zpyv_value *value = ((zpy_runtime_core *)self)->blacks; list != NULL && value != NULL;
         value = value->next)
        if (PyList_Append(list, (PyObject *)value) < 0) Py_CLEAR(list);
    return list;
}

/* Runtime._black_of(handle) -> the black value of a native value handle, or None. */
static PyObject *runtime_black_of(PyObject *self, PyObject *handle) {
    zs_ref wanted = PyLong_AsUnsignedLongLong(handle);
    if (wanted == (zs_ref)-1 && PyErr_Occurred()) return NULL;
    for (zpyv_value *value = ((zpy_runtime_core *)self)->blacks; value != NULL; value = value->next)
        if (value->black == wanted && wanted != ZS_NULL_REF) return Py_NewRef((PyObject *)value);
    Py_RETURN_NONE;
}

/* Runtime._has_native_type(kind): whether the kind is registered here. */
static PyObject *runtime_has_native_type(PyObject *self, PyObject *kind) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (!zpyv_is_kind(rt->state, kind)) {
        PyErr_SetString(PyExc_TypeError, "_has_native_type: a Kind");
        return NULL;
    }
    uint32_t id = ((zpyv_kind *)kind)->id;
    return PyBool_FromLong(id < rt->type_capacity && rt->types[id] != NULL &&
                           rt->types[id] != (const zs_type *)(uintptr_t)1);
}

/* Runtime._callable_get(id): the callable a native binding names, or None. */
static PyObject *runtime_callable_get(PyObject *self, PyObject *id) {
    unsigned long number = PyLong_AsUnsignedLong(id);
    if (number == (unsigned long)-1 && PyErr_Occurred()) return NULL;
    PyObject *callable = zpyv_callable_get((zpy_runtime_core *)self, (uint32_t)number);
    return Py_NewRef(callable ? callable : Py_None);
}

/* Runtime._callable_count(): callables native bindings hold (after a drain). */
static PyObject *runtime_callable_count(PyObject *self, PyObject *unused) {
    (void)unused;
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (rt->native != NULL && zpyv_callables_drain(rt) < 0) return NULL;
    return PyLong_FromUnsignedLong(rt->callable_count);
}

/* =========================================================================
 * Runtime core (the base of zs.Runtime)
 * ========================================================================= */

/* The zs_free_handler of a runtime a host owns (Runtime.attach): the host
 * is freeing it, so the Python runtime closes as close() does and leaves
 * the freeing to the host (Runtime._host_freed). */
static void runtime_freed_by_host(void *user, zs_runtime *native) {
    zpy_core_state *state = user;
    PyGILState_STATE gil = PyGILState_Ensure();
    zpy_runtime_core *rt = zpy_open_runtime_of(state, native);
    if (rt != NULL) {
        Py_INCREF(rt);
        PyObject *closed = PyObject_CallMethod((PyObject *)rt, "_host_freed", NULL);
        if (closed == NULL) PyErr_WriteUnraisable((PyObject *)rt);
        Py_XDECREF(closed);
        Py_DECREF(rt);
    }
    PyGILState_Release(gil);
}

/* Runtime._core_open(address, describe, owned): the native runtime, once
 * created (owned) or handed over by the host that owns it; its dying
 * objects' conjugates are expired, whoever collects, by the expiry handler
 * registered here, with describe naming them, and a host freeing its own
 * runtime closes the Python side first (the free handler). */
static PyObject *runtime_core_open(PyObject *self, PyObject *args) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    PyObject *address, *describe;
    int owned = 1;
    if (!PyArg_ParseTuple(args, "OO|p:_core_open", &address, &describe, &owned)) return NULL;
    void *native = PyLong_AsVoidPtr(address);
    if (native == NULL && PyErr_Occurred()) return NULL;
    if (rt->native != NULL || native == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_core_open: already open, or a null runtime");
        return NULL;
    }
    if (zpy_open_runtime_add(rt->state, rt) < 0) return NULL;
    zs_status status = zs_set_expiry_handler(native, zpy_expire_handed_over, rt->state);
    if (status == ZS_OK && !owned)
        status = zs_set_free_handler(native, runtime_freed_by_host, rt->state);
    if (status != ZS_OK) {
        zpy_open_runtime_remove(rt->state, rt);
        PyErr_Format(PyExc_RuntimeError, "_core_open: the expiry handler was refused (%d)",
                     (int)status);
        return NULL;
    }
    rt->native = native;
    rt->dying_word = zs_dying_word(native);
    Py_XSETREF(rt->describe, Py_NewRef(describe));
    Py_RETURN_NONE;
}

/* Runtime._core_remove_handler(which): remove this module's "expiry" or
 * "free" handler from the native runtime (Python lets go of a host's
 * runtime); only the managed side that set a handler may remove it. */
static PyObject *runtime_core_remove_handler(PyObject *self, PyObject *which) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (rt->native == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_core_remove_handler: the runtime is detached");
        return NULL;
    }
    zs_status status;
    if (PyUnicode_Check(which) && PyUnicode_CompareWithASCIIString(which, "expiry") == 0)
        status = zs_set_expiry_handler(rt->native, NULL, rt->state);
    else if (PyUnicode_Check(which) && PyUnicode_CompareWithASCIIString(which, "free") == 0)
        status = zs_set_free_handler(rt->native, NULL, rt->state);
    else return PyErr_Format(PyExc_ValueError, "_core_remove_handler: %R", which);
    if (status != ZS_OK)
        return PyErr_Format(PyExc_RuntimeError, "_core_remove_handler: refused (%d)", (int)status);
    Py_RETURN_NONE;
}

/* Runtime._core_detach(): forget the native runtime (close() frees it next). */
static PyObject *runtime_core_detach(PyObject *self, PyObject *unused) {
    (void)unused;
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    rt->closing = 1;
    zpyv_expire_blacks(rt, rt->state->reason_closed, 0);
    zpyv_callables_free(rt);
    rt->dropped_count = 0; /* freeing the runtime destroys those objects too */
    rt->native = NULL;
    rt->dying_word = NULL;
    zpy_open_runtime_remove(rt->state, rt); /* the expiry handler finds it no more */
    Py_CLEAR(rt->describe);
    classes_clear(rt);
    zpy_plan_cache_clear(rt->state); /* plans may name its host's entries and types */
    zpyv_bury(rt);
    Py_RETURN_NONE;
}

/* Runtime._core_free_native(free): call free() (close()'s freeing of the
 * detached native runtime) now, or, when host entries of this runtime are
 * running (the close came from Python code one of them called back into),
 * when the last of them returns (functions.c): they still run on it. */
static PyObject *runtime_core_free_native(PyObject *self, PyObject *free) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (rt->native != NULL || rt->free_deferred != NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "_core_free_native: detach first, and free a runtime once");
        return NULL;
    }
    if (rt->native_calls == 0) return PyObject_CallNoArgs(free);
    rt->free_deferred = Py_NewRef(free);
    Py_RETURN_NONE;
}

/* The live conjugate of a handle, or a new reference to None. */
static PyObject *runtime_conjugate_get(PyObject *self, PyObject *handle) {
    zs_ref ref = PyLong_AsUnsignedLongLong(handle);
    if (ref == (zs_ref)-1 && PyErr_Occurred()) return NULL;
    zpy_conjugate *found = zpy_table_get((zpy_runtime_core *)self, ref);
    return Py_NewRef(found ? (PyObject *)found : Py_None);
}

/* Every live conjugate, as a list (close(), tests). */
static PyObject *runtime_live_conjugates(PyObject *self, PyObject *unused) {
    (void)unused;
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    PyObject *out = PyList_New(0);
    for (uint32_t i = 0; out != NULL && i < rt->capacity; i++)
        if (rt->table[i] != NULL && PyList_Append(out, rt->table[i]) < 0) Py_CLEAR(out);
    return out;
}

/* Runtime._adopt(cls, handle, address) -> a new conjugate for an object that
 * has none (the caller resolved it for a conjugate natively, under the lock). */
static PyObject *runtime_adopt(PyObject *self, PyObject *args) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    PyTypeObject *cls;
    unsigned long long handle;
    PyObject *address;
    if (!PyArg_ParseTuple(args, "O!KO:_adopt", &PyType_Type, &cls, &handle, &address)) return NULL;
    if (!PyType_IsSubtype(cls, rt->state->conjugate_type) ||
        !PyObject_TypeCheck((PyObject *)cls, rt->state->class_type)) {
        PyErr_SetString(PyExc_TypeError, "_adopt: not an object conjugate class");
        return NULL;
    }
    char *native = PyLong_AsVoidPtr(address);
    if (native == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "_adopt: null object");
        return NULL;
    }
    if (zpy_table_get(rt, handle) != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_adopt: the object already has a conjugate");
        return NULL;
    }
    zpy_conjugate *conjugate = zpy_conjugate_alloc(rt, cls);
    if (conjugate == NULL) return NULL;
    if (zpy_conjugate_bind(rt, conjugate, handle, native) < 0) {
        Py_DECREF(conjugate);
        return NULL;
    }
    return (PyObject *)conjugate;
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
    if (rt->native == NULL || rt->closing) Py_RETURN_NONE; /* no new proxy while closing */
    zs_object *object = NULL;
    if (zs_resolve_for_conjugate(rt->native, handle, &object) != ZS_OK) Py_RETURN_NONE;
    return zpy_make_conjugate(rt, handle, object);
}

PyObject *zpy_make_conjugate(zpy_runtime_core *rt, zs_ref handle, zs_object *object) {
    assert(zpy_table_get(rt, handle) == NULL && rt->native != NULL && !rt->closing);
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

/* =========================================================================
 * zsharp_python.h: handles and proxies for C code
 * ========================================================================= */

static PyObject *python_proxy_of(const zs_python_api *api, zs_runtime *native, zs_ref handle) {
    zpy_core_state *state = api->state;
    zpy_runtime_core *rt = native != NULL ? zpy_open_runtime_of(state, native) : NULL;
    if (rt == NULL || rt->closing) {
        PyErr_SetString(PyExc_RuntimeError,
                        "proxy_of: no open zs.Runtime runs on this zs_runtime (Python created "
                        "none on it, or closed it)");
        return NULL;
    }
    return zpy_conjugate_of(rt, handle);
}

static int python_handle_of(const zs_python_api *api, PyObject *proxy, zs_runtime **out_rt,
                            zs_ref *out_handle) {
    zpy_core_state *state = api->state;
    if (proxy == NULL || !PyObject_TypeCheck(proxy, state->conjugate_type)) {
        PyErr_Format(PyExc_TypeError, "handle_of: expected a zs.Object, not %.100s",
                     proxy != NULL ? Py_TYPE(proxy)->tp_name : "NULL");
        return -1;
    }
    zpy_conjugate *conjugate = (zpy_conjugate *)proxy;
    if (!ZPY_CONJUGATE_IS_LIVE(conjugate)) {
        zpy_raise_expired(conjugate);
        return -1;
    }
    if (out_rt != NULL) *out_rt = conjugate->runtime->native;
    zs_ref handle = zpy_conjugate_share(conjugate);
    if (out_handle != NULL) *out_handle = handle;
    return 0;
}

void zpy_python_api_init(zpy_core_state *state) {
    state->python_api = (zs_python_api){
        .version = ZS_PYTHON_API_VERSION,
        .size = sizeof(zs_python_api),
        .proxy_of = python_proxy_of,
        .handle_of = python_handle_of,
        .state = state,
    };
}

/* Runtime._conjugate_of(handle): the conjugate of a handle (the table's,
 * or a new one), or None for a null, dead or dying handle, or once closing. */
static PyObject *runtime_conjugate_of(PyObject *self, PyObject *handle) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    zs_ref ref = PyLong_AsUnsignedLongLong(handle);
    if (ref == (zs_ref)-1 && PyErr_Occurred()) return NULL;
    return zpy_conjugate_of(rt, ref);
}

/* The Python objects a runtime core holds (the cycle collector's view). */
static int runtime_core_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((zpy_runtime_core *)self)->creators);
    Py_VISIT(((zpy_runtime_core *)self)->last_class);
    Py_VISIT(((zpy_runtime_core *)self)->last_creator);
    Py_VISIT(((zpy_runtime_core *)self)->free_deferred);
    Py_VISIT(((zpy_runtime_core *)self)->describe);
    Py_VISIT(((zpy_runtime_core *)self)->expiry_error);
    for (uint32_t i = 0; i < ((zpy_runtime_core *)self)->class_capacity; i++)
        Py_VISIT(((zpy_runtime_core *)self)->classes[i]);
    Py_VISIT(Py_TYPE(self));
    return 0;
}

/* Drop them (cycle collection, dealloc). The table's strong entries are
 * not the collector's to see: each stateful conjugate holds the runtime
 * (conjugate->runtime), so while any is in the table the runtime is alive. */
static int runtime_core_clear(PyObject *self) {
    Py_CLEAR(((zpy_runtime_core *)self)->creators);
    Py_CLEAR(((zpy_runtime_core *)self)->last_class);
    Py_CLEAR(((zpy_runtime_core *)self)->last_creator);
    Py_CLEAR(((zpy_runtime_core *)self)->free_deferred);
    Py_CLEAR(((zpy_runtime_core *)self)->describe);
    Py_CLEAR(((zpy_runtime_core *)self)->expiry_error);
    classes_clear((zpy_runtime_core *)self);
    return 0;
}

/* A closed-looking core (no native runtime) until Runtime.__init__ opens it. */
static PyObject *runtime_core_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    (void)args;
    (void)kwargs;
    zpy_runtime_core *rt = (zpy_runtime_core *)type->tp_alloc(type, 0);
    if (rt == NULL) return NULL;
    rt->state = zpy_state_of_type(type);
    rt->creators = PyDict_New();
    if (rt->creators == NULL) {
        Py_DECREF(rt);
        return NULL;
    }
    return (PyObject *)rt;
}

/* The table is freed with the runtime object: conjugates and values hold a
 * reference to it, so none is left to clear its entry afterwards. */
static void runtime_core_dealloc(PyObject *self) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    assert(rt->graveyard == NULL); /* a view waiting there holds its runtime */
    /* Invariant: a running host entry holds its runtime, and makes a
       deferred free when it returns. */
    assert(rt->native_calls == 0 && rt->free_deferred == NULL);
    if (rt->state != NULL)
        zpy_open_runtime_remove(rt->state, rt); /* an unclosed runtime Python collects */
    runtime_core_clear(self);
    zpyv_names_free(rt);
    zpyv_callables_free(rt);
    PyMem_Free(rt->table);
    PyMem_Free(rt->sole);
    PyMem_Free(rt->dropped);
    PyMem_Free((void *)rt->types);
    PyMem_Free((void *)rt->natives);
    PyMem_Free(rt->deferred);
    rt->table = NULL;
    rt->capacity = 0;
    while (rt->spare_count > 0) {
        PyObject *block = rt->spares[--rt->spare_count];
        ZPY_SPARE_SHOW(block);
        PyObject_Free(block);
    }
    type->tp_free(self);
    Py_DECREF(type);
}

static PyMethodDef runtime_core_methods[] = {
    {"_core_open", runtime_core_open, METH_VARARGS,
     "Attach the native runtime (an address) and its describe callable."},
    {"_core_detach", runtime_core_detach, METH_NOARGS,
     "Forget the native runtime: every fast path declines from now on."},
    {"_core_free_native", runtime_core_free_native, METH_O,
     "Call free() (freeing the detached native runtime) once no host entry runs on it."},
    {"_conjugate_get", runtime_conjugate_get, METH_O,
     "The live conjugate of a handle, or None (no resolution)."},
    {"_live_conjugates", runtime_live_conjugates, METH_NOARGS, "Every live conjugate."},
    {"_adopt", runtime_adopt, METH_VARARGS, "A new conjugate for a resolved object."},
    {"_conjugate_of", runtime_conjugate_of, METH_O,
     "The conjugate of a handle (existing or new), or None."},
    {"_core_remove_handler", runtime_core_remove_handler, METH_O,
     "Remove this module's expiry or free handler (letting go of a host's runtime)."},
    {"_expire_dying_batch", runtime_expire_dying_batch, METH_VARARGS,
     "Expire the conjugates of up to `limit` dying objects: (taken, expired)."},
    {"_collect_full", zpy_runtime_collect_full, METH_O,
     "A full collection, its dead objects' conjugates expired first: its GcStats."},
    {"_gc_stats", zpy_runtime_gc_stats, METH_O, "The last cycle's figures as a GcStats."},
    {"_expire_all", runtime_expire_all, METH_VARARGS,
     "Expire every conjugate and black value (close)."},
    {"_set_native_class", runtime_set_native_class, METH_VARARGS,
     "A conjugate class's native class in this runtime."},
    {"_flush_values", runtime_flush_values, METH_NOARGS,
     "Free finalised black values' blocks; drop unbound callables (a safe point)."},
    {"_callable_get", runtime_callable_get, METH_O, "The callable of a delegate binding id."},
    {"_black_values", runtime_black_values, METH_NOARGS, "Every live black value."},
    {"_object_bytes", runtime_object_bytes, METH_O,
     "The bytes of a native object while it exists (a testing aid)."},
    {"_black_of", runtime_black_of, METH_O, "The black value of a native value handle."},
    {"_has_native_type", runtime_has_native_type, METH_O, "Whether a kind is registered here."},
    {"_native_type", runtime_native_type, METH_O,
     "The address of a kind's native type in this runtime."},
    {"_preset_native_type", zpyv_runtime_preset_native_type, METH_VARARGS,
     "Make a struct kind use a host's native struct type in this runtime."},
    {"_callable_count", runtime_callable_count, METH_NOARGS,
     "Callables native delegate bindings hold."},
    {"_name_text", zpyv_runtime_name_text, METH_VARARGS, "The displayed text of a name."},
    {"_intern", zpyv_runtime_intern, METH_O, "Intern an object name: (index, number)."},
    {"_keep_names", zpyv_runtime_keep_names, METH_O,
     "Decode the first `count` names (before the native table goes)."},
    /* ---- the heap calls (`_heap_*`): heap_calls.c, then reflection.c */
    {"_heap_new_runtime", (PyCFunction)(void (*)(void))zpy_rt_new_runtime,
     METH_FASTCALL | METH_STATIC, "A new native runtime: (status, address)."},
    {"_heap_free_runtime", zpy_rt_free_runtime, METH_O | METH_STATIC,
     "Free a native runtime this side made (its address)."},
    {"_heap_set_handlers", (PyCFunction)(void (*)(void))zpy_rt_set_handlers, METH_FASTCALL,
     "Set the call handler and the class resolver (or remove them)."},
    {"_heap_memory", zpy_rt_memory, METH_NOARGS, "The native memory figures, as a tuple."},
    {"_heap_live_objects", zpy_rt_live_objects, METH_NOARGS, "Live native objects."},
    {"_heap_value_count", zpy_rt_value_count, METH_NOARGS, "Black values with a native block."},
    {"_heap_name_count", zpy_rt_name_count, METH_NOARGS, "Names in the native table."},
    {"_heap_cluster_count", zpy_rt_cluster_count, METH_NOARGS, "Live clusters."},
    {"_heap_gc_phase", zpy_rt_gc_phase, METH_NOARGS, "The collector's phase (GC_*)."},
    {"_heap_gc_expiring_count", zpy_rt_gc_expiring_count, METH_NOARGS,
     "Dying objects not taken yet."},
    {"_heap_gc_pending_purge", zpy_rt_gc_pending_purge, METH_NOARGS,
     "Gathered objects awaiting the purge."},
    {"_heap_expire_gathered", zpy_rt_expire_gathered, METH_NOARGS,
     "Hand every dying object to the expiry handler: how many were taken."},
    {"_heap_close_disregard", zpy_rt_close_disregard, METH_NOARGS,
     "End the disregard-for-GC window: the status."},
    {"_heap_debug_set", (PyCFunction)(void (*)(void))zpy_rt_debug_set, METH_FASTCALL,
     "Set a ZS_DEBUG_* switch: the status."},
    {"_heap_verify", zpy_rt_verify, METH_NOARGS, "None, or what zs_heap_verify found wrong."},
    {"_heap_register_class", (PyCFunction)(void (*)(void))zpy_rt_register_class, METH_FASTCALL,
     "Register a class: (status, address, id, kept description)."},
    {"_heap_new_object", (PyCFunction)(void (*)(void))zpy_rt_new_object, METH_FASTCALL,
     "A new object with a conjugate record: (status, handle, address)."},
    {"_heap_release_strong_ref", zpy_rt_release_strong_ref, METH_O,
     "Release a strong reference: the status."},
    {"_heap_resolve_class", zpy_rt_resolve_class, METH_O,
     "The class id of a live object, or None."},
    {"_heap_resolve_for_conjugate", zpy_rt_resolve_for_conjugate, METH_O,
     "The address of an object recorded as having a conjugate, or None."},
    {"_heap_create_cluster", zpy_rt_create_cluster, METH_O, "Cluster an object: (status, size)."},
    {"_heap_cluster_info", zpy_rt_cluster_info, METH_O, "(status, cluster info or None)."},
    {"_heap_gc_start", zpy_rt_gc_start, METH_NOARGS, "Begin an incremental cycle: the status."},
    {"_heap_gc_step", (PyCFunction)(void (*)(void))zpy_rt_gc_step, METH_FASTCALL,
     "Advance the pending mark: (status, done)."},
    {"_heap_gc_purge", (PyCFunction)(void (*)(void))zpy_rt_gc_purge, METH_FASTCALL,
     "Destroy gathered objects: (status, done)."},
    {"_heap_reference_chains", (PyCFunction)(void (*)(void))zpy_rt_reference_chains, METH_FASTCALL,
     "Why an object is alive: (status, [(holder, member, root)])."},
    {"_heap_add_to_root", zpy_rt_add_to_root, METH_VARARGS, "Add an object to the root set."},
    {"_heap_remove_from_root", zpy_rt_remove_from_root, METH_VARARGS,
     "Remove an object from the root set."},
    {"_heap_mark_as_garbage", zpy_rt_mark_as_garbage, METH_VARARGS,
     "Destroy an object at the next collection."},
    {"_heap_dissolve_cluster", zpy_rt_dissolve_cluster, METH_VARARGS,
     "Dissolve the cluster an object belongs to."},
    {"_heap_add_strong_ref", zpy_rt_add_strong_ref, METH_VARARGS,
     "Take a strong reference to an object."},
    {"_heap_object_writable", zpy_rt_object_writable, METH_VARARGS,
     "Refuse a write into a stale or dying owner, as the heap would."},
    {"_heap_abandon", zpy_rt_abandon, METH_O,
     "Unroot and mark as garbage an object whose construction failed (no error)."},
    {"_heap_is_rooted", zpy_rt_is_rooted, METH_O, "Whether an object is in the root set."},
    {"_heap_is_garbage", zpy_rt_is_garbage, METH_O, "Whether an object is marked as garbage."},
    {"_heap_is_permanent", zpy_rt_is_permanent, METH_O,
     "Whether an object was made permanent (disregard_for_gc)."},
    {"_heap_live_handles", zpy_rt_live_handles, METH_O, "The handles of every live object."},
    {"_heap_class_id_of", zpy_rt_class_id_of, METH_O,
     "The native class id of a conjugate class registered here."},
    {"_heap_class_names", zpy_rt_class_names, METH_NOARGS,
     "The name of every registered class, by class id."},
    {"_heap_find_class", zpy_rt_find_class, METH_O,
     "The id of the first class of a (UTF-8) name, or None."},
    {"_heap_describe_class", zpy_rt_describe_class, METH_O,
     "A class's registered description, as tuples."},
    {"_heap_find_struct", zpy_rt_find_struct, METH_O,
     "A host's struct description of a (UTF-8) name, as tuples, or None."},
    {"_heap_find_enum", zpy_rt_find_enum, METH_O,
     "A host's enum description of a (UTF-8) name, as tuples, or None."},
    {"_heap_native_type_traits", zpy_rt_native_type_traits, METH_O,
     "(address, kind, size, flags) of a kind's native type here."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef runtime_core_members[] = {
    {"_closing", T_BOOL, offsetof(zpy_runtime_core, closing), 0,
     "Set first thing by close(): the C fast paths decline from then on."},
    {"_adopting", T_UINT, offsetof(zpy_runtime_core, adopting), 0,
     "Depth of the sections between a native conjugate record and its table entry "
     "(collections and close() refuse while it is not 0)."},
    {"_flush_pending", T_BOOL, offsetof(zpy_runtime_core, flush_pending), 0,
     "Finalisers queued native frees: creation takes the Python path (a safe point)."},
    {"_cycle_expired", T_ULONGLONG, offsetof(zpy_runtime_core, cycle_expired), 0,
     "Conjugates expired in the current collection cycle (GcStats.conjugates_expired)."},
    {"_collect_every", T_UINT, offsetof(zpy_runtime_core, collect_every), 0,
     "GcStress.collect_every (creation takes the Python path when set)."},
    {"_inline_blacks", T_UINT, offsetof(zpy_runtime_core, inline_blacks), READONLY,
     "Live black values with no native block (values_alive counts them)."},
    {"_callable_capacity", T_UINT, offsetof(zpy_runtime_core, callable_capacity), READONLY,
     "Slots of the delegate callable registry (ids are reused: it stays small)."},
    {"_fast_creators", T_OBJECT, offsetof(zpy_runtime_core, creators), READONLY,
     "class -> Creator, for the C creation path."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot runtime_core_slots[] = {
    {Py_tp_doc, "The C part of a runtime: its native pointer and its conjugate table."},
    {Py_tp_new, runtime_core_new},
    {Py_tp_dealloc, runtime_core_dealloc},
    {Py_tp_traverse, runtime_core_traverse},
    {Py_tp_clear, runtime_core_clear},
    {Py_tp_methods, runtime_core_methods},
    {Py_tp_members, runtime_core_members},
    {0, NULL},
};

static PyType_Spec runtime_core_spec = {
    .name = "zsharp_py._core.RuntimeCore",
    .basicsize = sizeof(zpy_runtime_core),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = runtime_core_slots,
};

/* =========================================================================
 * Object conjugates (the base of zs.Object)
 * ========================================================================= */

/* ---- attribute errors that say how to fix them ---------------------------
 *
 * Conjugates have no instance dict: an attribute is a declared property (a
 * data descriptor on the class) or an error. A store is still
 * PyObject_GenericSetAttr's; only when it raises AttributeError for a name
 * the class does not have at all does Python (zsharp_py/_model/hints.py,
 * attribute_error) write a better message: what native objects and structs
 * can hold, and "Did you mean 'health'?". Errors raised by a descriptor of
 * the class (a read-only property...) are left as they are.
 *
 * Reads are not wrapped the same way: CPython's specialising interpreter
 * only specialises attribute loads (method calls, slot reads) on types whose
 * tp_getattro is PyObject_GenericGetAttr itself, so any wrapper would make
 * every method call on a conjugate markedly slower. */

enum { ZS_ATTRIBUTE_WRITE = 1, ZS_ATTRIBUTE_DELETE = 2 }; /* zsharp_py/_model/hints.py */

/* Called with an exception set by the generic lookup of `name` on `self`:
 * replace an AttributeError for a name the class lacks by Python's better
 * one. Always returns with an exception set. Cold and out of line: the
 * store that succeeds stays a call and a test. */
static __attribute__((cold, noinline)) void explain_missing(PyObject *self, PyObject *name,
                                                            int action, PyObject *value) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError) || !PyUnicode_Check(name) ||
        _PyType_Lookup(Py_TYPE(self), name) != NULL)
        return;
    zpy_core_state *state = zpy_state_of_type(Py_TYPE(self));
    if (state == NULL || state->attribute_error == NULL) return;
    PyObject *error = zpy_error_take();
    if (error == NULL) return;
    PyObject *better = PyObject_CallFunction(state->attribute_error, "OOOiO", self, name, error,
                                             action, value != NULL ? value : Py_None);
    if (better == NULL) { /* a bug in the helper: its error, the original as context */
        PyObject *failure = zpy_error_take();
        if (failure == NULL) {
            zpy_error_give(error);
            return;
        }
        PyException_SetContext(failure, error); /* steals error */
        zpy_error_give(failure);
        return;
    }
    if (PyExceptionInstance_Check(better)) {
        Py_DECREF(error);
        zpy_error_give(better);
        return;
    }
    Py_DECREF(better);
    zpy_error_give(error);
}

/* tp_setattro of object and value conjugates: the generic store (a
 * property's descriptor), explained when it fails. */
int zpy_explained_setattro(PyObject *self, PyObject *name, PyObject *value) {
    /* PyObject_GenericSetAttr's own body (one call less on every store). */
    int status = _PyObject_GenericSetAttrWithDict(self, name, value, NULL);
    if (__builtin_expect(status < 0, 0))
        explain_missing(self, name, value != NULL ? ZS_ATTRIBUTE_WRITE : ZS_ATTRIBUTE_DELETE,
                        value);
    return status;
}

/* Raise the ExpiredConjugateError of an expired conjugate; returns NULL. */
PyObject *zpy_raise_expired(zpy_conjugate *conjugate) {
    zpy_core_state *state = conjugate->runtime ? conjugate->runtime->state : NULL;
    if (state == NULL || state->expired_error == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the conjugate was never bound to an object");
        return NULL;
    }
    if (conjugate->u.expired == NULL) {
        PyErr_SetString(state->expired_exception, "the object has expired");
        return NULL;
    }
    PyObject *error = PyObject_CallOneArg(state->expired_error, conjugate->u.expired);
    if (error != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(error), error);
        Py_DECREF(error);
    }
    return NULL;
}

/* `_expired`: the ExpiredPointer of an expired conjugate (None while live). */
static PyObject *conjugate_get_sentinel(PyObject *self, void *closure) {
    (void)closure;
    zpy_conjugate *conjugate = (zpy_conjugate *)self;
    if (ZPY_CONJUGATE_IS_LIVE(conjugate) || conjugate->u.expired == NULL) Py_RETURN_NONE;
    return Py_NewRef(conjugate->u.expired);
}

/* `_address`: the native object's address, 0 once expired. */
static PyObject *conjugate_get_address(PyObject *self, void *closure) {
    (void)closure;
    return PyLong_FromVoidPtr(((zpy_conjugate *)self)->address);
}

/* `_h`: the object's handle, given to Python code (zpy_conjugate_share). */
static PyObject *conjugate_get_handle(PyObject *self, void *closure) {
    (void)closure;
    zpy_conjugate *conjugate = (zpy_conjugate *)self;
    return PyLong_FromUnsignedLongLong(
        ZPY_CONJUGATE_IS_LIVE(conjugate) ? zpy_conjugate_share(conjugate) : conjugate->handle);
}

/* `is_expired`: True once the native object may be gone; never raises. */
static PyObject *conjugate_get_expired(PyObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(!ZPY_CONJUGATE_IS_LIVE((zpy_conjugate *)self));
}

/* Conjugates come from creation or adoption only: a bare one has no object. */
static PyObject *conjugate_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    (void)args;
    (void)kwargs;
    PyErr_Format(PyExc_TypeError, "%s conjugates are made by calling the class, not %s.__new__",
                 type->tp_name, type->tp_name);
    return NULL;
}

/* A live conjugate leaves the table; the object itself lives on natively.
 * Its live views hold it: only parked ones (value.h) can be left in its
 * table, and they go with it. */
static void conjugate_dealloc(PyObject *self) {
    zpy_conjugate *conjugate = (zpy_conjugate *)self;
    PyTypeObject *type = Py_TYPE(self);
    /* Installed as the class's own dealloc (init_class), this runs in place
       of CPython's, which would have called a __del__ added since. */
    if (type->tp_finalize != NULL && type->tp_dealloc == conjugate_dealloc &&
        PyObject_CallFinalizerFromDealloc(self) < 0)
        return; /* resurrected */
    if (ZPY_CONJUGATE_IS_LIVE(conjugate)) {
        zpy_runtime_core *rt = conjugate->runtime;
        if (rt != NULL) dropped_add(rt, conjugate->handle, table_forget(rt, conjugate));
        /* Detached first: releasing the views parked there may run Python
           code, which then finds neither the conjugate nor its table. */
        zpyv_table *views = conjugate->u.views;
        conjugate->u.views = NULL;
        conjugate->address = NULL;
        zpyv_table_free(views);
    } else {
        Py_CLEAR(conjugate->u.expired);
    }
    conjugate->address = NULL;
    zpy_runtime_core *rt = conjugate->runtime;
    conjugate->runtime = NULL;
    /* An untracked conjugate's block waits in its runtime for the next one
       (zpy_conjugate_alloc); the runtime frees it if it goes first. */
    if (ZPY_KEEP_SPARES && rt != NULL && type->tp_free == PyObject_Free &&
        rt->spare_count < ZPY_SPARE_CONJUGATES) {
        ZPY_SPARE_HIDE(self);
        rt->spares[rt->spare_count++] = self;
    } else {
        type->tp_free(self);
    }
    Py_XDECREF(rt);
    Py_DECREF(type);
}

static PyGetSetDef conjugate_getset[] = {
    {"_expired", conjugate_get_sentinel, NULL,
     "The ExpiredPointer of an expired conjugate (None while live).", NULL},
    {"_address", conjugate_get_address, NULL, "The native address (0 once expired).", NULL},
    {"_h", conjugate_get_handle, NULL, "The object's handle.", NULL},
    {"is_expired", conjugate_get_expired, NULL,
     "True once the native object may be gone; never raises.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef conjugate_members[] = {
    {"_rt", T_OBJECT, offsetof(zpy_conjugate, runtime), READONLY, "The runtime."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot conjugate_slots[] = {
    {Py_tp_doc, "The C part of an object conjugate (native address, handle, runtime)."},
    {Py_tp_new, conjugate_new},
    {Py_tp_dealloc, conjugate_dealloc},
    {Py_tp_getset, conjugate_getset},
    {Py_tp_members, conjugate_members},
    {Py_tp_setattro, zpy_explained_setattro},
    {0, NULL},
};

static PyType_Spec conjugate_spec = {
    .name = "zsharp_py._core.ObjectConjugate",
    .basicsize = sizeof(zpy_conjugate),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = conjugate_slots,
};

/* Create the conjugate types and add them to the module. */
int zpy_add_conjugate_types(PyObject *module, zpy_core_state *state) {
    state->runtime_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &runtime_core_spec,
                                                                   NULL);
    if (state->runtime_type == NULL ||
        PyModule_AddObjectRef(module, "RuntimeCore", (PyObject *)state->runtime_type) < 0)
        return -1;
    state->conjugate_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &conjugate_spec, NULL);
    if (state->conjugate_type == NULL ||
        PyModule_AddObjectRef(module, "ObjectConjugate", (PyObject *)state->conjugate_type) < 0)
        return -1;
    return 0;
}

/* =========================================================================
 * Re-classing
 * ========================================================================= */

/* A conjugate's class is its native memory's layout: object conjugates
 * (and value conjugates) must never change class. `obj.__class__ = X` and
 * object.__setattr__ reach the `__class__` property of zs.Object and of the
 * value conjugates' base (zsharp_py/_base/expiry.py FIXED_CLASS), which
 * refuses; but object.__dict__['__class__'].__set__(obj, X) calls CPython's
 * object_set_class directly, which accepts any class of the same C layout
 * (every conjugate class has one). That function raises the audit event
 * "object.__setattr__" (obj, "__class__", X) before it changes anything, so
 * an audit hook refuses it there: no descriptor ever sees a re-classed
 * conjugate, and the accessors pay nothing (an audit hook runs only on
 * audited events, none of which is on a property access path).
 *
 * The hook is process-wide and cannot be removed: it holds strong
 * references to what it compares with (never released, like the hook). */
static struct {
    PyTypeObject *conjugate_type; /* ObjectConjugate: every object conjugate */
    PyTypeObject *value_type;     /* ValueConjugate: every value conjugate */
    PyObject *marker;             /* FIXED_CLASS: in the MRO of every fixed class */
    PyObject *str_class;          /* "__class__", interned */
    int installed;
} reclass_guard;

/* Whether instances of `type` must keep their class. */
static int class_is_fixed(PyTypeObject *type) {
    /* By C base type: what a class body assigns to __class__ cannot unfix it. */
    if (reclass_guard.conjugate_type != NULL &&
        PyType_IsSubtype(type, reclass_guard.conjugate_type))
        return 1;
    if (reclass_guard.value_type != NULL && PyType_IsSubtype(type, reclass_guard.value_type))
        return 1;
    PyObject *mro = type->tp_mro;
    if (reclass_guard.marker == NULL || reclass_guard.str_class == NULL || mro == NULL ||
        !PyTuple_Check(mro))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *base = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        PyObject *dict = base->tp_dict; /* heap types (ours) always have one */
        if (dict == NULL || !(base->tp_flags & Py_TPFLAGS_HEAPTYPE)) continue;
        PyObject *found = PyDict_GetItemWithError(dict, reclass_guard.str_class);
        if (found == NULL && PyErr_Occurred()) return -1;
        if (found != NULL) return found == reclass_guard.marker;
    }
    return 0;
}

/* The audit hook: refuse object_set_class on a fixed class (either side). */
static int reclass_hook(const char *event, PyObject *args, void *user) {
    (void)user;
    if (event[0] != 'o' || strcmp(event, "object.__setattr__") != 0) return 0;
    if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) != 3) return 0;
    PyObject *name = PyTuple_GET_ITEM(args, 1);
    if (!PyUnicode_Check(name) || PyUnicode_CompareWithASCIIString(name, "__class__") != 0)
        return 0;
    PyObject *obj = PyTuple_GET_ITEM(args, 0), *value = PyTuple_GET_ITEM(args, 2);
    if (PyType_Check(obj)) return 0; /* a class attribute named __class__: type_setattro's event */
    int fixed = class_is_fixed(Py_TYPE(obj));
    if (fixed == 0 && value != NULL && PyType_Check(value))
        fixed = class_is_fixed((PyTypeObject *)value);
    if (fixed < 0) return -1;
    if (fixed) {
        PyErr_Format(PyExc_TypeError,
                     "cannot change the class of a %s conjugate "
                     "(its native memory is laid out for its own class)",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

/* refuse_reclassing(marker): install the hook (once per process). */
PyObject *zpy_refuse_reclassing(PyObject *module, PyObject *marker) {
    zpy_core_state *state = zpy_state_of_module(module);
    if (reclass_guard.conjugate_type == NULL && state->conjugate_type != NULL)
        reclass_guard.conjugate_type = (PyTypeObject *)Py_NewRef(state->conjugate_type);
    if (reclass_guard.value_type == NULL && state->value_type != NULL)
        reclass_guard.value_type = (PyTypeObject *)Py_NewRef(state->value_type);
    if (reclass_guard.marker == NULL) reclass_guard.marker = Py_NewRef(marker);
    if (reclass_guard.str_class == NULL &&
        (reclass_guard.str_class = PyUnicode_InternFromString("__class__")) == NULL)
        return NULL;
    if (!reclass_guard.installed) {
        if (PySys_AddAuditHook(reclass_hook, NULL) < 0) return NULL;
        reclass_guard.installed = 1;
    }
    Py_RETURN_NONE;
}
