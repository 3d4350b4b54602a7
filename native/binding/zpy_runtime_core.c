/* RuntimeCore, the C part of zs.Runtime: opening and detaching, native
 * classes, the methods Python's runtime calls, and the method table that
 * also lists the heap calls (zpy_heap_calls.c, zpy_reflection.c).
 */
#include "value.h"
#include <structmember.h>

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
    if (rt->life.phase != ZPY_PHASE_NEW || native == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_core_open: opened before, or a null runtime");
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
    zpy_life_opened(rt);
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

/* Runtime._core_detach(): forget the native runtime (close() frees it
 * next); inside close() only, which moved the life to CLOSING. */
static PyObject *runtime_core_detach(PyObject *self, PyObject *unused) {
    (void)unused;
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (rt->life.phase != ZPY_PHASE_CLOSING) {
        PyErr_SetString(PyExc_RuntimeError, "_core_detach: only close() detaches");
        return NULL;
    }
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
    zpy_life_closed(rt);
    Py_RETURN_NONE;
}

/* Runtime._core_free_native(free): call free() (close()'s freeing of the
 * detached native runtime) now, or, when host entries of this runtime are
 * running (the close came from Python code one of them called back into),
 * when the last of them returns (zpy_python_to_host.c): they still run on it. */
static PyObject *runtime_core_free_native(PyObject *self, PyObject *free) {
    if (zpy_life_free_native((zpy_runtime_core *)self, free) < 0) return NULL;
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
    Py_VISIT(((zpy_runtime_core *)self)->life.free_deferred);
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
    Py_CLEAR(((zpy_runtime_core *)self)->life.free_deferred);
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
    assert(rt->life.native_calls == 0 && rt->life.free_deferred == NULL);
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

/* ---- the runtime's life, as Python asks it (zpy_life.c) ---- */

/* The act of an int argument that Python may begin and end itself (the
 * expiry handler and host entries are C's own); ZPY_ACT_COUNT with
 * ValueError if not one. */
static zpy_act python_act(PyObject *value) {
    long act = PyLong_AsLong(value);
    if (act == ZPY_ACT_COLLECT || act == ZPY_ACT_CLOSE || act == ZPY_ACT_HOST_FREE ||
        act == ZPY_ACT_ADOPT)
        return (zpy_act)act;
    if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "not an act Python begins: %R", value);
    return ZPY_ACT_COUNT;
}

/* Runtime._life_enter(act, what) -> bool: begin `act` (a LIFE_ constant),
 * False for a close of a closed runtime, or the refusal raised. */
static PyObject *runtime_life_enter(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_life_enter(act, what: str)");
        return NULL;
    }
    zpy_act act = python_act(args[0]);
    if (act == ZPY_ACT_COUNT) return NULL;
    int entered = zpy_life_enter((zpy_runtime_core *)self, act, args[1]);
    return entered < 0 ? NULL : PyBool_FromLong(entered);
}

/* Runtime._life_check(act, what): raise what _life_enter would refuse,
 * beginning nothing (a call that must not run where `act` may not). */
static PyObject *runtime_life_check(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_life_check(act, what: str)");
        return NULL;
    }
    zpy_act act = python_act(args[0]);
    if (act == ZPY_ACT_COUNT) return NULL;
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    zpy_refusal why = zpy_life_may(rt, act);
    if (why != ZPY_ALLOWED && why != ZPY_NOTHING_TO_DO)
        return zpy_life_refuse(rt, act, why, args[1]), NULL;
    Py_RETURN_NONE;
}

/* Runtime._life_leave(act): end `act`, which _life_enter began. */
static PyObject *runtime_life_leave(PyObject *self, PyObject *value) {
    zpy_act act = python_act(value);
    if (act == ZPY_ACT_COUNT) return NULL;
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    int running = act == ZPY_ACT_COLLECT ? rt->life.collecting
                  : act == ZPY_ACT_ADOPT ? rt->life.adopting > 0
                                         : rt->life.closing_here;
    if (!running) return PyErr_Format(PyExc_RuntimeError, "_life_leave: %R is not running", value);
    zpy_life_leave(rt, act);
    Py_RETURN_NONE;
}

static PyObject *life_closed(PyObject *self, void *unused) {
    (void)unused;
    zpy_phase phase = ((zpy_runtime_core *)self)->life.phase;
    return PyBool_FromLong(phase == ZPY_PHASE_CLOSED || phase == ZPY_PHASE_NEW);
}

static PyObject *life_closing(PyObject *self, void *unused) {
    (void)unused;
    return PyBool_FromLong(!zpy_open((zpy_runtime_core *)self));
}

static PyObject *life_collecting(PyObject *self, void *unused) {
    (void)unused;
    return PyBool_FromLong(((zpy_runtime_core *)self)->life.collecting);
}

static PyObject *life_adopting(PyObject *self, void *unused) {
    (void)unused;
    return PyLong_FromUnsignedLong(((zpy_runtime_core *)self)->life.adopting);
}

static PyObject *life_lifecycle(PyObject *self, void *unused) {
    (void)unused;
    return PyUnicode_InternFromString(zpy_life_state_name((zpy_runtime_core *)self));
}

static PyGetSetDef runtime_core_getset[] = {
    {"_closed", life_closed, NULL, "Whether the runtime is closed (or was never opened).", NULL},
    {"_closing", life_closing, NULL,
     "Whether close() has begun (or the runtime is closed): the C fast paths decline.", NULL},
    {"_collecting", life_collecting, NULL, "Whether a collection step is running.", NULL},
    {"_adopting", life_adopting, NULL,
     "Depth of the sections between a native conjugate record and its table entry "
     "(collections and close() refuse while it is not 0).",
     NULL},
    {"lifecycle", life_lifecycle, NULL,
     "Where the runtime is in its life: \"open\", \"collecting\" (a collection step "
     "runs), \"expiring\" (the collector expires conjugates), \"closing\" (close() "
     "runs) or \"closed\". What each allows: docs/lifecycle.md.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef runtime_core_methods[] = {
    {"_life_enter", (PyCFunction)(void (*)(void))runtime_life_enter, METH_FASTCALL,
     "Begin an act of the runtime's life (a LIFE_ constant) if its rules allow it now."},
    {"_life_check", (PyCFunction)(void (*)(void))runtime_life_check, METH_FASTCALL,
     "Raise what _life_enter would refuse, beginning nothing."},
    {"_life_leave", runtime_life_leave, METH_O, "End an act _life_enter began."},
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
    /* ---- the collection protocol: zpy_collection.c */
    {"_collect_full", zpy_runtime_collect_full, METH_O,
     "A full collection, its dead objects' conjugates expired first: its GcStats."},
    {"_gc_start_incremental", zpy_runtime_gc_start_incremental, METH_NOARGS,
     "Begin an incremental cycle (a pending purge finished first)."},
    {"_gc_step", (PyCFunction)(void (*)(void))zpy_runtime_gc_step, METH_FASTCALL,
     "Advance the pending cycle within (budget_ns, max_objects): whether it is complete."},
    {"_gc_expire_pending", zpy_runtime_gc_expire_pending, METH_NOARGS,
     "Expire the conjugates of every dying object gathered so far: how many were taken."},
    {"_gc_stats", zpy_runtime_gc_stats, METH_O, "The last cycle's figures as a GcStats."},
    /* ---- the tick manager: zpy_ticks.c */
    {"_ticks_register", (PyCFunction)(void (*)(void))zpy_ticks_register, METH_FASTCALL,
     "Register a tick function (obj, name, group, interval, flags): (status, tick)."},
    {"_ticks_unregister", zpy_ticks_unregister, METH_O, "Unregister a tick function: the status."},
    {"_ticks_unregister_object", zpy_ticks_unregister_object, METH_O,
     "Unregister every tick function of an object: how many."},
    {"_ticks_set_enabled", (PyCFunction)(void (*)(void))zpy_ticks_set_enabled, METH_FASTCALL,
     "Enable or disable a tick function: the status."},
    {"_ticks_set_interval", (PyCFunction)(void (*)(void))zpy_ticks_set_interval, METH_FASTCALL,
     "Set a tick function's interval: the status."},
    {"_ticks_set_group", (PyCFunction)(void (*)(void))zpy_ticks_set_group, METH_FASTCALL,
     "Move a tick function to another group: the status."},
    {"_ticks_prerequisite", (PyCFunction)(void (*)(void))zpy_ticks_prerequisite, METH_FASTCALL,
     "Add (True) or remove a prerequisite: the status."},
    {"_ticks_info", zpy_ticks_info, METH_O, "What a tick function is, as a tuple."},
    {"_ticks_count", zpy_ticks_count, METH_NOARGS, "Tick functions registered."},
    {"_ticks_frame", zpy_ticks_frame, METH_O, "One frame of the tick manager: its figures."},
    {"_expire_all", zpy_runtime_expire_all, METH_VARARGS,
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
    /* ---- the heap calls (`_heap_*`): zpy_heap_calls.c, then zpy_reflection.c */
    {"_heap_new_runtime", (PyCFunction)(void (*)(void))zpy_rt_new_runtime,
     METH_FASTCALL | METH_STATIC, "A new native runtime: (status, address)."},
    {"_heap_free_runtime", zpy_rt_free_runtime, METH_O | METH_CLASS,
     "Free a native runtime this side made (its address)."},
    {"_heap_set_handlers", zpy_rt_set_handlers, METH_O,
     "Set (True) or remove this module's call handler and class resolver."},
    {"_heap_memory", zpy_rt_memory, METH_NOARGS, "The native memory figures, as a tuple."},
    {"_heap_live_objects", zpy_rt_live_objects, METH_NOARGS, "Live native objects."},
    {"_heap_value_count", zpy_rt_value_count, METH_NOARGS, "Black values with a native block."},
    {"_heap_name_count", zpy_rt_name_count, METH_NOARGS, "Names in the native table."},
    {"_heap_cluster_count", zpy_rt_cluster_count, METH_NOARGS, "Live clusters."},
    {"_heap_gc_phase", zpy_rt_gc_phase, METH_NOARGS, "The collector's phase (GC_*)."},
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
    {"_heap_type_names", zpy_rt_type_names, METH_NOARGS,
     "(struct names, enum names): every struct and enum registered here."},
    {"_heap_find_class", zpy_rt_find_class, METH_O,
     "The id of the first class of a (UTF-8) name, or None."},
    {"_heap_describe_class", zpy_rt_describe_class, METH_O,
     "A class's registered description, as tuples."},
    {"_heap_find_struct", zpy_rt_find_struct, METH_O,
     "A host's struct description of a (UTF-8) name, as tuples, or None."},
    {"_heap_find_enum", zpy_rt_find_enum, METH_O,
     "A host's enum description of a (UTF-8) name, as tuples, or None."},
    {"_heap_class_defaults", zpy_rt_class_defaults, METH_VARARGS,
     "Set the defaults a native class's new objects start with; the members taken."},
    {"_heap_native_type_traits", zpy_rt_native_type_traits, METH_O,
     "(address, kind, size, flags) of a kind's native type here."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef runtime_core_members[] = {
    {"_flush_pending", T_BOOL, offsetof(zpy_runtime_core, flush_pending), 0,
     "Finalisers queued native frees: creation takes the Python path (a safe point)."},
    {"_cycle_expired", T_ULONGLONG, offsetof(zpy_runtime_core, cycle_expired), 0,
     "Conjugates expired in the current collection cycle (GcStats.conjugates_expired)."},
    {"_collect_every", T_UINT, offsetof(zpy_runtime_core, collect_every), 0,
     "GcStress.collect_every (creation takes the Python path when set)."},
    {"_expiry_faults", T_UINT, offsetof(zpy_runtime_core, expiry_faults), 0,
     "Test-only: the next this many conjugate expiries fail as out of memory "
     "(GarbageCollector._debug_fail_expiries)."},
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
    {Py_tp_getset, runtime_core_getset},
    {0, NULL},
};

static PyType_Spec runtime_core_spec = {
    .name = "zsharp_py._core.RuntimeCore",
    .basicsize = sizeof(zpy_runtime_core),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = runtime_core_slots,
};

/* Create the conjugate types and add them to the module. */
int zpy_add_conjugate_types(PyObject *module, zpy_core_state *state) {
    state->runtime_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &runtime_core_spec,
                                                                   NULL);
    if (state->runtime_type == NULL ||
        PyModule_AddObjectRef(module, "RuntimeCore", (PyObject *)state->runtime_type) < 0)
        return -1;
    state->conjugate_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &zpy_conjugate_spec,
                                                                     NULL);
    if (state->conjugate_type == NULL ||
        PyModule_AddObjectRef(module, "ObjectConjugate", (PyObject *)state->conjugate_type) < 0)
        return -1;
    return 0;
}
