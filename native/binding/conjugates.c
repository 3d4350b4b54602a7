/* Object conjugates and the conjugate table of each runtime.
 *
 * A conjugate is created (zs_conjugate_bind) when Python first needs one for an
 * object, and expired (address := NULL, extra := the ExpiredPointer) when the
 * collector gathers the object, before the purge frees it, or when the
 * runtime closes. Nothing reads native memory through an expired conjugate.
 */
#include "core.h"

#include <structmember.h>

/* =========================================================================
 * The conjugate table
 * ========================================================================= */

/* Grow the table so that `index` fits: doubling, so that n puts cost O(n). */
static int table_reserve(zs_runtime_core *rt, uint32_t index) {
    if (index < rt->capacity)
        return 0;
    uint64_t wanted = rt->capacity ? (uint64_t)rt->capacity * 2 : 1024;
    while (wanted <= index)
        wanted *= 2;
    if (wanted > (uint64_t)UINT32_MAX)
        wanted = (uint64_t)UINT32_MAX;
    PyObject **grown = PyMem_Realloc(rt->table, (size_t)wanted * sizeof(PyObject *));
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(grown + rt->capacity, 0, (size_t)(wanted - rt->capacity) * sizeof(PyObject *));
    rt->table = grown;
    rt->capacity = (uint32_t)wanted;
    return 0;
}

/* Record a new live conjugate (borrowed). Runs no Python code. */
static int table_put(zs_runtime_core *rt, zs_conjugate *conjugate) {
    uint32_t index = ZS_REF_INDEX(conjugate->handle);
    if (table_reserve(rt, index) < 0)
        return -1;
    /* Invariant: a slot's previous conjugate expired (and left the table)
       before the native slot could be reused. */
    assert(rt->table[index] == NULL);
    rt->table[index] = (PyObject *)conjugate;
    return 0;
}

/* Bind a freshly allocated conjugate to its object and record it in the
 * table. On failure (out of memory) it stays in no table: freeing it is
 * safe. Runs no Python code. */
int zs_conjugate_bind(zs_runtime_core *rt, zs_conjugate *conjugate, zs_ref handle,
                      void *address) {
    conjugate->address = address;
    conjugate->handle = handle;
    conjugate->runtime = (zs_runtime_core *)Py_NewRef((PyObject *)rt);
    return table_put(rt, conjugate);
}

/* The live conjugate of `handle`, or NULL (borrowed). */
zs_conjugate *zs_table_get(zs_runtime_core *rt, zs_ref handle) {
    uint32_t index = ZS_REF_INDEX(handle);
    if (index >= rt->capacity)
        return NULL;
    zs_conjugate *found = (zs_conjugate *)rt->table[index];
    return found != NULL && found->handle == handle ? found : NULL;
}

/* Drop a conjugate's entry if it is the one recorded. */
static void table_forget(zs_runtime_core *rt, zs_conjugate *conjugate) {
    uint32_t index = ZS_REF_INDEX(conjugate->handle);
    if (index < rt->capacity && rt->table[index] == (PyObject *)conjugate)
        rt->table[index] = NULL;
}

/* =========================================================================
 * Expiry
 * ========================================================================= */

/* Expire one live conjugate: it leaves the table, its address goes, and its
 * extra becomes ExpiredPointer(kind, describe, packed name, reason). Its
 * views cache (if not empty) is appended to `views`, for Python to expire.
 * Its allocations may run Python code, which may change the table: callers
 * re-read the table after each call. */
static int expire_one(zs_conjugate *conjugate, PyObject *describe, uint64_t packed_name,
                      PyObject *reason, PyObject *views) {
    zs_core_state *state = conjugate->runtime->state;
    PyTypeObject *expired_type = (PyTypeObject *)state->expired_type;
    /* The allocations below may run Python's cycle collector, its callbacks
       and finalisers, which may drop the last reference to the conjugate:
       hold it. (Collections and close() re-entered from there are refused,
       see Runtime._refuse_reentry.) */
    Py_INCREF(conjugate);
    PyObject *name = PyLong_FromUnsignedLongLong(packed_name);
    PyObject *sentinel = name ? expired_type->tp_alloc(expired_type, 4) : NULL;
    if (sentinel == NULL) {
        Py_XDECREF(name);
        Py_DECREF(conjugate);
        return -1;
    }
    PyObject *kind = ((PyHeapTypeObject *)Py_TYPE(conjugate))->ht_name;
    PyTuple_SET_ITEM(sentinel, 0, Py_NewRef(kind));
    PyTuple_SET_ITEM(sentinel, 1, Py_NewRef(describe));
    PyTuple_SET_ITEM(sentinel, 2, name);
    PyTuple_SET_ITEM(sentinel, 3, Py_NewRef(reason));
    if (!ZS_CONJUGATE_IS_LIVE(conjugate)) {  /* expired meanwhile: keep that sentinel */
        Py_DECREF(sentinel);
        Py_DECREF(conjugate);
        return 0;
    }
    PyObject *old = conjugate->extra;
    PyObject *cache = NULL;
    if (old != NULL) {
        if (PyDict_CheckExact(old))
            cache = old;
        else if (PyTuple_CheckExact(old))
            cache = PyTuple_GET_ITEM(old, 0);
    }
    if (cache != NULL && PyDict_GET_SIZE(cache) > 0 && PyList_Append(views, cache) < 0) {
        Py_DECREF(sentinel);
        Py_DECREF(conjugate);
        return -1;
    }
    /* From here to the end no Python code runs: the old extra's views (if
       any) are held by `views`, so dropping it frees only an empty dict, a
       pair or a cdata. */
    table_forget(conjugate->runtime, conjugate);
    conjugate->address = NULL;
    conjugate->extra = sentinel;
    Py_XDECREF(old);
    Py_DECREF(conjugate);
    return 0;
}

/* Runtime._expire_dying_batch(limit, describe, reason_collected,
 * reason_garbage) -> (taken, views): take up to `limit` dying objects from
 * the native expiring list and expire their conjugates. `views` lists the
 * caches whose red views Python must expire. */
static PyObject *runtime_expire_dying_batch(PyObject *self, PyObject *args) {
    zs_runtime_core *rt = (zs_runtime_core *)self;
    unsigned int limit;
    PyObject *describe, *reason_collected, *reason_garbage;
    if (!PyArg_ParseTuple(args, "IOUU:_expire_dying_batch", &limit, &describe,
                          &reason_collected, &reason_garbage))
        return NULL;
    if (rt->native == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the runtime is closed");
        return NULL;
    }
    zs_native_api *api = &rt->state->api;
    uint32_t pending = api->expiring_count(rt->native);
    uint32_t count = pending < limit ? pending : limit;
    PyObject *views = PyList_New(0);
    if (views == NULL)
        return NULL;
    if (count == 0)
        return Py_BuildValue("(IN)", 0u, views);
    size_t each = sizeof(zs_ref) + sizeof(uint64_t) + sizeof(uint8_t);
    char *buffer = PyMem_Malloc((size_t)count * each);
    if (buffer == NULL) {
        Py_DECREF(views);
        return PyErr_NoMemory();
    }
    zs_ref *refs = (zs_ref *)buffer;
    uint64_t *names = (uint64_t *)(buffer + (size_t)count * sizeof(zs_ref));
    uint8_t *garbage = (uint8_t *)(buffer + (size_t)count * (sizeof(zs_ref) + sizeof(uint64_t)));
    uint32_t taken = 0;
    zs_status status = api->take_expiring(rt->native, refs, names, garbage, count, &taken);
    if (status != ZS_OK) {
        PyMem_Free(buffer);
        Py_DECREF(views);
        PyObject *what = PyUnicode_FromString("collect_garbage");
        PyObject *result = what ? zs_call_raise_status(rt->state, status, what, rt) : NULL;
        Py_XDECREF(what);
        return result;
    }
    for (uint32_t i = 0; i < taken; i++) {
        zs_conjugate *conjugate = zs_table_get(rt, refs[i]);
        if (conjugate == NULL)
            continue;  /* no conjugate now (freed by refcount, or never made) */
        if (expire_one(conjugate, describe, names[i],
                       garbage[i] ? reason_garbage : reason_collected, views) < 0) {
            PyMem_Free(buffer);
            Py_DECREF(views);
            return NULL;
        }
    }
    PyMem_Free(buffer);
    return Py_BuildValue("(IN)", taken, views);
}

/* Runtime._expire_all(describe, reason) -> caches: expire every conjugate in
 * the table (close()). Names are read from the native headers, still there. */
static PyObject *runtime_expire_all(PyObject *self, PyObject *args) {
    zs_runtime_core *rt = (zs_runtime_core *)self;
    PyObject *describe, *reason;
    if (!PyArg_ParseTuple(args, "OU:_expire_all", &describe, &reason))
        return NULL;
    PyObject *views = PyList_New(0);
    if (views == NULL)
        return NULL;
    for (uint32_t i = 0; i < rt->capacity; i++) {
        zs_conjugate *conjugate = (zs_conjugate *)rt->table[i];
        if (conjugate == NULL)
            continue;
        const zs_object *header = (const zs_object *)conjugate->address;
        uint64_t packed = header->name_index | (uint64_t)header->name_number << 32;
        if (expire_one(conjugate, describe, packed, reason, views) < 0) {
            Py_DECREF(views);
            return NULL;
        }
    }
    return views;
}

/* =========================================================================
 * Runtime core (the base of zs.Runtime)
 * ========================================================================= */

/* Runtime._core_open(address): the native runtime, once created. */
static PyObject *runtime_core_open(PyObject *self, PyObject *address) {
    zs_runtime_core *rt = (zs_runtime_core *)self;
    void *native = PyLong_AsVoidPtr(address);
    if (native == NULL && PyErr_Occurred())
        return NULL;
    if (rt->native != NULL || native == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_core_open: already open, or a null runtime");
        return NULL;
    }
    if (zs_open_runtime_add(rt->state, rt) < 0)
        return NULL;
    rt->native = native;
    Py_RETURN_NONE;
}

/* Runtime._core_detach(): forget the native runtime (close() frees it next). */
static PyObject *runtime_core_detach(PyObject *self, PyObject *unused) {
    (void)unused;
    zs_runtime_core *rt = (zs_runtime_core *)self;
    rt->closing = 1;
    rt->native = NULL;
    zs_open_runtime_remove(rt->state, rt);
    Py_RETURN_NONE;
}

/* The live conjugate of a handle, or a new reference to None. */
static PyObject *runtime_conjugate_get(PyObject *self, PyObject *handle) {
    zs_ref ref = PyLong_AsUnsignedLongLong(handle);
    if (ref == (zs_ref)-1 && PyErr_Occurred())
        return NULL;
    zs_conjugate *found = zs_table_get((zs_runtime_core *)self, ref);
    return Py_NewRef(found ? (PyObject *)found : Py_None);
}

/* Every live conjugate, as a list (close(), tests). */
static PyObject *runtime_live_conjugates(PyObject *self, PyObject *unused) {
    (void)unused;
    zs_runtime_core *rt = (zs_runtime_core *)self;
    PyObject *out = PyList_New(0);
    for (uint32_t i = 0; out != NULL && i < rt->capacity; i++)
        if (rt->table[i] != NULL && PyList_Append(out, rt->table[i]) < 0)
            Py_CLEAR(out);
    return out;
}

/* Runtime._adopt(cls, handle, address) -> a new conjugate for an object that
 * has none (the caller resolved it for a conjugate natively, under the lock). */
static PyObject *runtime_adopt(PyObject *self, PyObject *args) {
    zs_runtime_core *rt = (zs_runtime_core *)self;
    PyTypeObject *cls;
    unsigned long long handle;
    PyObject *address;
    if (!PyArg_ParseTuple(args, "O!KO:_adopt", &PyType_Type, &cls, &handle, &address))
        return NULL;
    if (!PyType_IsSubtype(cls, rt->state->conjugate_type)) {
        PyErr_SetString(PyExc_TypeError, "_adopt: not an object conjugate class");
        return NULL;
    }
    char *native = PyLong_AsVoidPtr(address);
    if (native == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "_adopt: null object");
        return NULL;
    }
    if (zs_table_get(rt, handle) != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_adopt: the object already has a conjugate");
        return NULL;
    }
    zs_conjugate *conjugate = (zs_conjugate *)cls->tp_alloc(cls, 0);
    if (conjugate == NULL)
        return NULL;
    if (zs_conjugate_bind(rt, conjugate, handle, native) < 0) {
        Py_DECREF(conjugate);
        return NULL;
    }
    return (PyObject *)conjugate;
}

/* The conjugate of a handle for a reference read that missed the table:
 * Runtime._conjugate_of (Python) resolves it under the runtime lock. */
PyObject *zs_resolve_conjugate(zs_runtime_core *rt, zs_ref handle) {
    PyObject *number = PyLong_FromUnsignedLongLong(handle);
    if (number == NULL)
        return NULL;
    PyObject *result = PyObject_CallMethodOneArg((PyObject *)rt, rt->state->str_conjugate_of,
                                                 number);
    Py_DECREF(number);
    return result;
}

/* The Python objects a runtime core holds (the cycle collector's view). */
static int runtime_core_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((zs_runtime_core *)self)->creators);
    Py_VISIT(((zs_runtime_core *)self)->last_class);
    Py_VISIT(((zs_runtime_core *)self)->last_creator);
    Py_VISIT(Py_TYPE(self));
    return 0;
}

/* Drop them (cycle collection, dealloc); the table holds no references. */
static int runtime_core_clear(PyObject *self) {
    Py_CLEAR(((zs_runtime_core *)self)->creators);
    Py_CLEAR(((zs_runtime_core *)self)->last_class);
    Py_CLEAR(((zs_runtime_core *)self)->last_creator);
    return 0;
}

/* A closed-looking core (no native runtime) until Runtime.__init__ opens it. */
static PyObject *runtime_core_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    (void)args;
    (void)kwargs;
    zs_runtime_core *rt = (zs_runtime_core *)type->tp_alloc(type, 0);
    if (rt == NULL)
        return NULL;
    rt->state = zs_state_of_type(type);
    rt->creators = PyDict_New();
    if (rt->creators == NULL) {
        Py_DECREF(rt);
        return NULL;
    }
    return (PyObject *)rt;
}

/* The table is freed with the runtime object: conjugates hold a reference to
 * it, so none is left to clear its entry afterwards. */
static void runtime_core_dealloc(PyObject *self) {
    zs_runtime_core *rt = (zs_runtime_core *)self;
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (rt->state != NULL)
        zs_open_runtime_remove(rt->state, rt);  /* an unclosed runtime Python collects */
    runtime_core_clear(self);
    PyMem_Free(rt->table);
    rt->table = NULL;
    rt->capacity = 0;
    type->tp_free(self);
    Py_DECREF(type);
}

static PyMethodDef runtime_core_methods[] = {
    {"_core_open", runtime_core_open, METH_O, "Attach the native runtime (an address)."},
    {"_core_detach", runtime_core_detach, METH_NOARGS,
     "Forget the native runtime: every fast path declines from now on."},
    {"_conjugate_get", runtime_conjugate_get, METH_O,
     "The live conjugate of a handle, or None (no resolution)."},
    {"_live_conjugates", runtime_live_conjugates, METH_NOARGS, "Every live conjugate."},
    {"_adopt", runtime_adopt, METH_VARARGS, "A new conjugate for a resolved object."},
    {"_expire_dying_batch", runtime_expire_dying_batch, METH_VARARGS,
     "Expire the conjugates of up to `limit` dying objects."},
    {"_expire_all", runtime_expire_all, METH_VARARGS, "Expire every conjugate (close)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef runtime_core_members[] = {
    {"_closing", T_BOOL, offsetof(zs_runtime_core, closing), 0,
     "Set first thing by close(): the C fast paths decline from then on."},
    {"_adopting", T_BOOL, offsetof(zs_runtime_core, adopting), 0,
     "Between a native conjugate record and its table entry (collections refuse)."},
    {"_flush_pending", T_BOOL, offsetof(zs_runtime_core, flush_pending), 0,
     "Finalisers queued native frees: creation takes the Python path (a safe point)."},
    {"_collect_every", T_UINT, offsetof(zs_runtime_core, collect_every), 0,
     "GcStress.collect_every (creation takes the Python path when set)."},
    {"_fast_creators", T_OBJECT, offsetof(zs_runtime_core, creators), READONLY,
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
    .basicsize = sizeof(zs_runtime_core),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = runtime_core_slots,
};

/* =========================================================================
 * Object conjugates (the base of zs.Object)
 * ========================================================================= */

/* Raise the ExpiredConjugateError of an expired conjugate; returns NULL. */
PyObject *zs_raise_expired(zs_conjugate *conjugate) {
    zs_core_state *state = conjugate->runtime ? conjugate->runtime->state : NULL;
    if (state == NULL || state->expired_error == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the conjugate was never bound to an object");
        return NULL;
    }
    PyObject *error = PyObject_CallOneArg(state->expired_error, (PyObject *)conjugate);
    if (error != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(error), error);
        Py_DECREF(error);
    }
    return NULL;
}

/* The views cache inside `extra` (borrowed), or NULL. */
static PyObject *extra_views(zs_conjugate *conjugate) {
    PyObject *extra = conjugate->extra;
    if (extra == NULL || !ZS_CONJUGATE_IS_LIVE(conjugate))
        return NULL;
    if (PyDict_CheckExact(extra))
        return extra;
    if (PyTuple_CheckExact(extra))
        return PyTuple_GET_ITEM(extra, 0);
    return NULL;
}

/* The cached cdata pointer inside `extra` (borrowed), or NULL. */
static PyObject *extra_pointer(zs_conjugate *conjugate) {
    PyObject *extra = conjugate->extra;
    if (extra == NULL || !ZS_CONJUGATE_IS_LIVE(conjugate) || PyDict_CheckExact(extra))
        return NULL;
    if (PyTuple_CheckExact(extra))
        return PyTuple_GET_ITEM(extra, 1);
    return extra;
}

/* Store views (dict or NULL) and pointer (or NULL) in a live conjugate. */
static int extra_set(zs_conjugate *conjugate, PyObject *views, PyObject *pointer) {
    PyObject *fresh;
    if (views != NULL && pointer != NULL)
        fresh = PyTuple_Pack(2, views, pointer);
    else
        fresh = Py_XNewRef(views != NULL ? views : pointer);
    if (fresh == NULL && (views != NULL || pointer != NULL))
        return -1;
    Py_XSETREF(conjugate->extra, fresh);
    return 0;
}

/* `_v`: the red views cached under this object (None when none or expired). */
static PyObject *conjugate_get_views(PyObject *self, void *closure) {
    (void)closure;
    PyObject *views = extra_views((zs_conjugate *)self);
    return Py_NewRef(views ? views : Py_None);
}

/* Set `_v` (a dict, or None to drop the cache); refused once expired. */
static int conjugate_set_views(PyObject *self, PyObject *value, void *closure) {
    (void)closure;
    zs_conjugate *conjugate = (zs_conjugate *)self;
    if (value == NULL || value == Py_None)
        value = NULL;
    else if (!PyDict_CheckExact(value)) {
        PyErr_SetString(PyExc_TypeError, "_v must be a dict or None");
        return -1;
    }
    if (!ZS_CONJUGATE_IS_LIVE(conjugate)) {
        if (value == NULL)
            return 0;  /* expiry already dropped the views */
        zs_raise_expired(conjugate);
        return -1;
    }
    return extra_set(conjugate, value, extra_pointer(conjugate));
}

/* `_p`: the native pointer as a cdata typed as the class's layout (made on
 * first use, then cached), or the ExpiredPointer once expired. */
static PyObject *conjugate_get_pointer(PyObject *self, void *closure) {
    (void)closure;
    zs_conjugate *conjugate = (zs_conjugate *)self;
    if (!ZS_CONJUGATE_IS_LIVE(conjugate)) {
        if (conjugate->extra == NULL)
            return zs_raise_expired(conjugate);
        return Py_NewRef(conjugate->extra);
    }
    PyObject *cached = extra_pointer(conjugate);
    if (cached != NULL)
        return Py_NewRef(cached);
    PyObject *pointer = PyObject_CallOneArg(conjugate->runtime->state->make_pointer, self);
    if (pointer == NULL)
        return NULL;
    /* make_pointer is Python code: the conjugate may have expired meanwhile. */
    if (!ZS_CONJUGATE_IS_LIVE(conjugate)) {
        Py_DECREF(pointer);
        return Py_NewRef(conjugate->extra);
    }
    if (extra_pointer(conjugate) == NULL &&
        extra_set(conjugate, extra_views(conjugate), pointer) < 0) {
        Py_DECREF(pointer);
        return NULL;
    }
    return pointer;
}

/* `_address`: the native object's address, 0 once expired. */
static PyObject *conjugate_get_address(PyObject *self, void *closure) {
    (void)closure;
    return PyLong_FromVoidPtr(((zs_conjugate *)self)->address);
}

/* `is_expired`: True once the native object may be gone; never raises. */
static PyObject *conjugate_get_expired(PyObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(!ZS_CONJUGATE_IS_LIVE((zs_conjugate *)self));
}

/* Conjugates come from creation or adoption only: a bare one has no object. */
static PyObject *conjugate_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    (void)args;
    (void)kwargs;
    PyErr_Format(PyExc_TypeError,
                 "%s conjugates are made by calling the class, not %s.__new__",
                 type->tp_name, type->tp_name);
    return NULL;
}

/* A live conjugate leaves the table; the object itself lives on natively. */
static void conjugate_dealloc(PyObject *self) {
    zs_conjugate *conjugate = (zs_conjugate *)self;
    PyTypeObject *type = Py_TYPE(self);
    if (conjugate->runtime != NULL && ZS_CONJUGATE_IS_LIVE(conjugate))
        table_forget(conjugate->runtime, conjugate);
    conjugate->address = NULL;
    Py_CLEAR(conjugate->extra);
    Py_CLEAR(conjugate->runtime);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyGetSetDef conjugate_getset[] = {
    {"_v", conjugate_get_views, conjugate_set_views, "Cached red views (None if none).", NULL},
    {"_p", conjugate_get_pointer, NULL,
     "The native pointer as a layout cdata, or the ExpiredPointer once expired.", NULL},
    {"_address", conjugate_get_address, NULL, "The native address (0 once expired).", NULL},
    {"is_expired", conjugate_get_expired, NULL,
     "True once the native object may be gone; never raises.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef conjugate_members[] = {
    {"_h", T_ULONGLONG, offsetof(zs_conjugate, handle), READONLY, "The object's handle."},
    {"_rt", T_OBJECT, offsetof(zs_conjugate, runtime), READONLY, "The runtime."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot conjugate_slots[] = {
    {Py_tp_doc, "The C part of an object conjugate (native address, handle, runtime)."},
    {Py_tp_new, conjugate_new},
    {Py_tp_dealloc, conjugate_dealloc},
    {Py_tp_getset, conjugate_getset},
    {Py_tp_members, conjugate_members},
    {0, NULL},
};

static PyType_Spec conjugate_spec = {
    .name = "zsharp_py._core.ObjectConjugate",
    .basicsize = sizeof(zs_conjugate),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = conjugate_slots,
};

/* Create the two types and add them to the module. */
int zs_add_conjugate_types(PyObject *module, zs_core_state *state) {
    state->runtime_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &runtime_core_spec, NULL);
    if (state->runtime_type == NULL || PyModule_AddObjectRef(module, "RuntimeCore",
                                                             (PyObject *)state->runtime_type) < 0)
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
 * value conjugates' base (zsharp_py/_conjugate.py FIXED_CLASS), which
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
    PyTypeObject *conjugate_type;  /* ObjectConjugate: every object conjugate */
    PyObject *marker;              /* FIXED_CLASS: in the MRO of every fixed class */
    PyObject *str_class;           /* "__class__", interned */
    int installed;
} reclass_guard;

/* Whether instances of `type` must keep their class. */
static int class_is_fixed(PyTypeObject *type) {
    if (reclass_guard.conjugate_type != NULL && PyType_IsSubtype(type, reclass_guard.conjugate_type))
        return 1;
    PyObject *mro = type->tp_mro;
    if (reclass_guard.marker == NULL || reclass_guard.str_class == NULL || mro == NULL ||
        !PyTuple_Check(mro))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *base = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        PyObject *dict = base->tp_dict;  /* heap types (ours) always have one */
        if (dict == NULL || !(base->tp_flags & Py_TPFLAGS_HEAPTYPE))
            continue;
        PyObject *found = PyDict_GetItemWithError(dict, reclass_guard.str_class);
        if (found == NULL && PyErr_Occurred())
            return -1;
        if (found != NULL)
            return found == reclass_guard.marker;
    }
    return 0;
}

/* The audit hook: refuse object_set_class on a fixed class (either side). */
static int reclass_hook(const char *event, PyObject *args, void *user) {
    (void)user;
    if (event[0] != 'o' || strcmp(event, "object.__setattr__") != 0)
        return 0;
    if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) != 3)
        return 0;
    PyObject *name = PyTuple_GET_ITEM(args, 1);
    if (!PyUnicode_Check(name) || PyUnicode_CompareWithASCIIString(name, "__class__") != 0)
        return 0;
    PyObject *obj = PyTuple_GET_ITEM(args, 0), *value = PyTuple_GET_ITEM(args, 2);
    if (PyType_Check(obj))
        return 0;  /* a class attribute named __class__: type_setattro's event */
    int fixed = class_is_fixed(Py_TYPE(obj));
    if (fixed == 0 && value != NULL && PyType_Check(value))
        fixed = class_is_fixed((PyTypeObject *)value);
    if (fixed < 0)
        return -1;
    if (fixed) {
        PyErr_Format(PyExc_TypeError, "cannot change the class of a %s conjugate "
                     "(its native memory is laid out for its own class)",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    return 0;
}

/* refuse_reclassing(marker): install the hook (once per process). */
PyObject *zs_refuse_reclassing(PyObject *module, PyObject *marker) {
    zs_core_state *state = zs_state_of_module(module);
    if (reclass_guard.conjugate_type == NULL && state->conjugate_type != NULL)
        reclass_guard.conjugate_type = (PyTypeObject *)Py_NewRef(state->conjugate_type);
    if (reclass_guard.marker == NULL)
        reclass_guard.marker = Py_NewRef(marker);
    if (reclass_guard.str_class == NULL &&
        (reclass_guard.str_class = PyUnicode_InternFromString("__class__")) == NULL)
        return NULL;
    if (!reclass_guard.installed) {
        if (PySys_AddAuditHook(reclass_hook, NULL) < 0)
            return NULL;
        reclass_guard.installed = 1;
    }
    Py_RETURN_NONE;
}
