/* ValueConjugate, the base of every value conjugate: the type, its
 * methods, and creation (Cls(...) for value classes); the module's scope
 * functions.
 */
#include "value.h"
#include <structmember.h>

/* Conjugates are made by this module only: a bare one has no memory. */
static PyObject *value_new(PyTypeObject *type, PyObject *args, PyObject *kwargs);

/* A value conjugate goes: out of its parent's table, out of the black list
 * (its native block queued for the next safe point). */
static void value_dealloc(PyObject *self) {
    zpyv_value *value = (zpyv_value *)self;
    PyTypeObject *type = Py_TYPE(self);
#if ZPYV_PARKING
    if ((value->flags & (ZPYV_V_PARKABLE | ZPYV_V_CACHED | ZPYV_V_PARKED | ZPYV_V_BLACK)) ==
            (ZPYV_V_PARKABLE | ZPYV_V_CACHED) &&
        value->address != NULL && value->weakrefs == NULL && type->tp_dealloc == value_dealloc) {
        /* Park it (value.h): it stays in its parent's table, which takes the
           reference Python gave up; it stops holding its parent. Nothing
           ran, nothing was freed: the object is as it was, at refcount 1.
           Only for a class value_class_init made ready (its dealloc is this
           one: untracked, no finaliser), so no CPython dealloc wraps this
           call and sees the object again afterwards. */
        assert(value->parent != NULL && value->reason == NULL);
        value->flags |= ZPYV_V_PARKED;
        Py_SET_REFCNT(self, 1);
        /* May free the parent, whose table then releases this view: not
           touched after. */
        Py_DECREF(value->parent);
        return;
    }
#endif
    zpy_core_state *state = value->runtime ? value->runtime->state : NULL;
    /* Out of every place Python code could find it before anything runs
       (a weakref callback below): its parent's table, the black list. */
    if (state != NULL && (value->flags & ZPYV_V_CACHED)) {
        zpyv_table **slot = zpyv_holder_table(state, value->parent);
        if (slot != NULL) zpyv_table_remove(*slot, value->key, value);
        value->flags &= ~ZPYV_V_CACHED;
    }
    zpyv_table *views = value->views;
    value->views = NULL;
    if (value->runtime != NULL && (value->flags & ZPYV_V_BLACK)) zpyv_black_free(value, 0);
    value->address = NULL;
    if (value->weakrefs != NULL) PyObject_ClearWeakRefs(self);
    /* A live view holds its parent: only parked views are left in the
       table, and they go with it. */
    zpyv_table_free(views);
    Py_CLEAR(value->parent);
    Py_CLEAR(value->reason);
    Py_CLEAR(value->kind);
    Py_CLEAR(value->runtime);
    type->tp_free(self);
    Py_DECREF(type);
}

/* `is_black`: owned by Python (created from Python or cloned), until disposed. */
static PyObject *value_get_black(PyObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong((((zpyv_value *)self)->flags & ZPYV_V_BLACK) != 0);
}

/* `is_expired`: True once the memory may be gone; never raises. */
static PyObject *value_get_expired(PyObject *self, void *closure) {
    (void)closure;
    zpyv_value *value = (zpyv_value *)self;
    return PyBool_FromLong(value->address == NULL);
}

/* `_expired_reason`: why it expired (None while live). */
static PyObject *value_get_reason(PyObject *self, void *closure) {
    (void)closure;
    zpyv_value *value = (zpyv_value *)self;
    if (value->address != NULL) Py_RETURN_NONE;
    return Py_NewRef(value->reason ? value->reason : value->runtime->state->reason_structure);
}

/* `_kind`: the value's kind. */
static PyObject *value_get_kind(PyObject *self, void *closure) {
    (void)closure;
    return Py_NewRef((PyObject *)((zpyv_value *)self)->kind);
}

/* `_rt`: the runtime. */
static PyObject *value_get_runtime(PyObject *self, void *closure) {
    (void)closure;
    return Py_NewRef((PyObject *)((zpyv_value *)self)->runtime);
}

/* dispose(): free a black value now (its views expire); no-op once expired.
 * A red view cannot be disposed. */
static PyObject *value_dispose(PyObject *self, PyObject *unused) {
    (void)unused;
    zpyv_value *value = (zpyv_value *)self;
    if (!(value->flags & ZPYV_V_BLACK)) {
        if (value->address == NULL) Py_RETURN_NONE;
        PyErr_Format(PyExc_TypeError,
                     "%U is a red view (owned natively) and cannot be disposed; clone() it to "
                     "get a black copy you own",
                     ((PyHeapTypeObject *)Py_TYPE(self))->ht_name);
        return NULL;
    }
    zpyv_expire_in_place(value, value->runtime->state->reason_disposed);
    zpyv_black_free(value, 1);
    Py_RETURN_NONE;
}

/* clone(): a black deep copy (always black, independent of this one). */
static PyObject *value_clone(PyObject *self, PyObject *unused) {
    (void)unused;
    zpyv_value *value = (zpyv_value *)self;
    zpy_runtime_core *rt = value->runtime;
    if (zpyv_live(value) == NULL) return NULL;
    zpyv_value *copy = zpyv_new_black(rt, value->kind);
    if (copy == NULL) return NULL;
    /* zpyv_new_black may have run Python code (a finaliser, dropping a
       delegate callable): the source may have been disposed meanwhile. */
    if (zpyv_live(value) == NULL) {
        Py_DECREF(copy);
        return NULL;
    }
    if (value->kind->flags & ZPYV_BITWISE) {
        memcpy(copy->address, value->address, value->kind->size);
        return (PyObject *)copy;
    }
    const zs_type *type = zpyv_native_type(rt, value->kind);
    zs_status status = type == NULL ? ZS_E_INVALID
                                    : zs_value_assign(rt->native, ZS_NULL_REF, type, copy->address,
                                                      value->address);
    if (status != ZS_OK) {
        zpyv_black_free(copy, 1);
        zpyv_expire_in_place(copy, rt->state->reason_disposed);
        Py_DECREF(copy);
        return type == NULL ? NULL : zpyv_refused(rt, status, value->kind->what);
    }
    return (PyObject *)copy;
}

/* __enter__: the value itself. */
static PyObject *value_enter(PyObject *self, PyObject *unused) {
    (void)unused;
    return Py_NewRef(self);
}

/* __exit__: dispose(). */
static PyObject *value_exit(PyObject *self, PyObject *args) {
    (void)args;
    PyObject *done = value_dispose(self, NULL);
    if (done == NULL) return NULL;
    Py_DECREF(done);
    Py_RETURN_FALSE;
}

/* __copy__ and __deepcopy__: clone(). */
static PyObject *value_copy(PyObject *self, PyObject *unused) {
    (void)unused;
    return value_clone(self, NULL);
}

static PyObject *value_deepcopy(PyObject *self, PyObject *memo) {
    (void)memo;
    return value_clone(self, NULL);
}

/* Values are native memory: not picklable (convert to a Python value first). */
static PyObject *value_reduce(PyObject *self, PyObject *protocol) {
    (void)protocol;
    PyErr_Format(PyExc_TypeError,
                 "%U conjugates cannot be pickled; convert to a Python value first",
                 ((PyHeapTypeObject *)Py_TYPE(self))->ht_name);
    return NULL;
}

/* str(): a string's text; any other value's repr. */
static PyObject *value_str(PyObject *self) {
    zpyv_value *value = (zpyv_value *)self;
    if (value->kind->code != ZPYV_STRING || value->kind->decode != NULL) return PyObject_Repr(self);
    char *at = zpyv_live(value);
    return at ? zpyv_string_text(value->kind, at) : NULL;
}

/* to_python(): a plain Python copy (dict, list, set, str...), copied out
 * under the rule (captured natively first, then built). */
static PyObject *value_to_python(PyObject *self, PyObject *unused) {
    (void)unused;
    zpyv_value *value = (zpyv_value *)self;
    char *at = zpyv_live(value);
    if (at == NULL) return NULL;
    return zpyv_copy_out(value->runtime, value->kind, at);
}

/* _assign(value): replace the whole value (stage, then write): a black
 * value or a red view alike. */
static PyObject *value_assign(PyObject *self, PyObject *argument) {
    zpyv_value *value = (zpyv_value *)self;
    zpy_runtime_core *rt = value->runtime;
    if (zpyv_live(value) == NULL) return NULL;
    zpyv_staged staged = {0};
    if (zpyv_stage(rt, value->kind, argument, &staged, value->kind->what) < 0) return NULL;
    zs_status status = ZS_E_STALE;
    if (value->address != NULL && zpy_open(rt)) {
        status = zpyv_emit(rt, value->kind, &staged, value->owner, value->address);
        if (status == ZS_OK) zpyv_expire_table(value->views, rt->state->reason_structure);
    }
    int expired = value->address == NULL;
    zpyv_release(value->kind, &staged);
    if (expired) return zpyv_raise_expired(value);
    if (status != ZS_OK) return zpyv_refused(rt, status, value->kind->what);
    Py_RETURN_NONE;
}

static PyGetSetDef value_getset[] = {
    {"is_black", value_get_black, NULL,
     "True for values owned by Python (created from Python or cloned), until disposed.", NULL},
    {"is_expired", value_get_expired, NULL, "True once the memory may be gone; never raises.",
     NULL},
    {"_expired_reason", value_get_reason, NULL, "Why it expired (None while live).", NULL},
    {"_kind", value_get_kind, NULL, "The value's kind.", NULL},
    {"_rt", value_get_runtime, NULL, "The runtime.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef value_methods[] = {
    {"dispose", value_dispose, METH_NOARGS,
     "Free a black value now (views into it expire); no-op if already disposed. Red views "
     "cannot be disposed: TypeError."},
    {"clone", value_clone, METH_NOARGS,
     "A black deep copy (always black, independent of this one)."},
    {"to_python", value_to_python, METH_NOARGS,
     "A plain Python copy (dict, list, set, str...), nested values converted."},
    {"_assign", value_assign, METH_O, "Replace the whole value (a copy of `value`)."},
    {"_soft_get", zpyv_soft_get, METH_NOARGS,
     "The live object at the path if it is a T, else None (SoftObjectPtr.get)."},
    {"__enter__", value_enter, METH_NOARGS, NULL},
    {"__exit__", value_exit, METH_VARARGS, NULL},
    {"__copy__", value_copy, METH_NOARGS, NULL},
    {"__deepcopy__", value_deepcopy, METH_O, NULL},
    {"__reduce_ex__", value_reduce, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef value_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(zpyv_value, weakrefs), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot value_slots[] = {
    {Py_tp_doc, "Base of every non-object conjugate (a red view or a black value)."},
    {Py_tp_new, value_new},
    {Py_tp_dealloc, value_dealloc},
    {Py_tp_str, value_str},
    {Py_tp_getset, value_getset},
    {Py_tp_methods, value_methods},
    {Py_tp_members, value_members},
    {Py_tp_setattro, zpy_explained_setattro},
    {0, NULL},
};

static PyType_Spec value_spec = {
    .name = "zsharp_py._core.ValueConjugate",
    .basicsize = sizeof(zpyv_value),
    .itemsize = 1, /* inline black values keep their bytes after the fixed part */
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = value_slots,
};

/* =========================================================================
 * Creation: Cls(...) for value classes
 * ========================================================================= */

/* The kind of a value class, or NULL (no error) when it has none yet. */
static zpyv_kind *class_kind(zpy_core_state *state, PyTypeObject *cls) {
    PyObject *kind = _PyType_Lookup(cls, state->str_zs_kind); /* borrowed, no error */
    return kind != NULL && zpyv_is_kind(state, kind) ? (zpyv_kind *)kind : NULL;
}

zpy_runtime_core *zpy_current_runtime(zpy_core_state *state) {
    PyObject *value = NULL;
    if (!state->configured) {
        PyErr_SetString(PyExc_RuntimeError, "zsharp_py._core is not configured");
        return NULL;
    }
    if (zpy_current_get(state, &value) < 0) return NULL; /* borrowed */
    if (value != NULL && zpy_is_runtime(state, value) && zpy_open((zpy_runtime_core *)value))
        return (zpy_runtime_core *)Py_NewRef(value);
    PyObject *made = PyObject_CallNoArgs(state->current_runtime);
    if (made != NULL && !PyObject_TypeCheck(made, state->runtime_type)) {
        Py_DECREF(made);
        PyErr_SetString(PyExc_TypeError, "current_runtime() did not return a runtime");
        return NULL;
    }
    return (zpy_runtime_core *)made;
}

/* The most members quick_struct converts. */
#define QUICK_MEMBERS 16

/* A struct of plain data whose first `given` members are scalars, from exact
 * ints, floats and bools in order (`V(1.0, 2.0)`): converted with no Python
 * code into C locals, then written straight into the new inline value, where
 * the general path stages items in PyMem and emits them. 1 when it was such
 * a call (*made: the value, or NULL with an error), else 0 with nothing done
 * (the general path gives every other call and every error). */
static int quick_struct(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *const *positional,
                        Py_ssize_t given, zpyv_value **made) {
    if (kind->code != ZPYV_STRUCT || kind->encode != NULL || !(kind->flags & ZPYV_BITWISE) ||
        !kind->members_set || given > QUICK_MEMBERS || (uint32_t)given > kind->member_count)
        return 0;
    zpy_scalar_bits bits[QUICK_MEMBERS];
    for (Py_ssize_t i = 0; i < given; i++) {
        const zpyv_kind *member = kind->members[i].kind;
        if (member->code != ZPYV_SCALAR || member->encode != NULL ||
            !zpy_scalar_convert_exact((zpy_scalar_kind)member->scalar, positional[i], &bits[i]))
            return 0;
    }
    zpyv_value *value = zpyv_new_black(rt, kind);
    if (value != NULL) {
        assert(value->flags & ZPYV_V_INLINE); /* bitwise: its bytes are its own */
        zpyv_initialize(kind, value->address);
        for (Py_ssize_t i = 0; i < given; i++)
            memcpy(value->address + kind->members[i].offset, &bits[i], kind->members[i].kind->size);
    }
    *made = value;
    return 1;
}

/* A new black value of `kind` from call arguments: stage them (Python code
 * may run), then allocate the black value and write (none runs). */
static PyObject *create_value(zpy_core_state *state, zpyv_kind *kind, PyObject *const *positional,
                              Py_ssize_t given, PyObject *kwargs) {
    zpy_runtime_core *rt = zpy_current_runtime(state);
    if (rt == NULL) return NULL;
    zpyv_value *quick = NULL;
    if ((kwargs == NULL || PyDict_GET_SIZE(kwargs) == 0) &&
        quick_struct(rt, kind, positional, given, &quick)) {
        Py_DECREF(rt);
        return (PyObject *)quick;
    }
    zpyv_staged staged = {0};
    int has_value = 0;
    if (kind->code == ZPYV_STRUCT && kind->encode == NULL) {
        if (zpyv_stage_members(rt, kind, positional, given, kwargs, &staged) < 0) {
            Py_DECREF(rt);
            return NULL;
        }
        has_value = 1;
    } else {
        if ((kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0) || given > 1) {
            PyErr_Format(PyExc_TypeError, "%U() takes at most one positional argument", kind->what);
            Py_DECREF(rt);
            return NULL;
        }
        if (given == 1) {
            if (zpyv_stage(rt, kind, positional[0], &staged, kind->what) < 0) {
                Py_DECREF(rt);
                return NULL;
            }
            has_value = 1;
        }
    }
    zpyv_value *value = zpyv_new_black(rt, kind);
    zs_status status = ZS_OK;
    if (value != NULL) {
        if (kind->image != NULL)
            memcpy(value->address, PyBytes_AS_STRING(kind->image),
                   (size_t)PyBytes_GET_SIZE(kind->image));
        if (has_value) status = zpyv_emit(rt, kind, &staged, ZS_NULL_REF, value->address);
    }
    zpyv_release(kind, &staged);
    if (value != NULL && status != ZS_OK) {
        PyObject *done = value_dispose((PyObject *)value, NULL);
        Py_XDECREF(done);
        Py_CLEAR(value);
        zpyv_refused(rt, status, kind->what);
    }
    Py_DECREF(rt);
    return (PyObject *)value;
}

/* Cls(value) / Struct(*members, **members). The class's own __new__
 * (Python) prepares the kind on first use and delegates here. */
static PyObject *value_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    zpy_core_state *state = zpy_state_of_type(type);
    zpyv_kind *kind = state ? class_kind(state, type) : NULL;
    if (state != NULL && (kind == NULL || kind->cls != type)) {
        /* First use: the class lays itself out (resolving what it names). */
        PyObject *prepared = PyObject_CallMethod((PyObject *)type, "_zs_prepare", NULL);
        if (prepared == NULL) return NULL;
        Py_DECREF(prepared);
        if (type->tp_new != value_new) /* laying out gave the class a constructor of its own */
            return type->tp_new(type, args, kwargs);
        kind = class_kind(state, type);
    }
    if (kind == NULL || kind->cls != type) {
        PyErr_Format(PyExc_TypeError, "%s values cannot be created directly", type->tp_name);
        return NULL;
    }
    return create_value(state, kind, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), kwargs);
}

/* Cls(...) by vectorcall: no argument tuple. Taken only while nothing of the
 * class's own stands in the way (a metaclass __call__, a constructor or an
 * initialiser of its own, a kind not laid out yet); otherwise the
 * metaclass's tp_call, with a tuple and a dict, as any call. */
static PyObject *value_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
    PyTypeObject *type = (PyTypeObject *)callable;
    Py_ssize_t given = PyVectorcall_NARGS(nargsf);
    Py_ssize_t named = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *kwargs = NULL;
    if (named > 0) { /* the call's own dict: nothing else holds it */
        if ((kwargs = PyDict_New()) == NULL) return NULL;
        for (Py_ssize_t i = 0; i < named; i++)
            if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[given + i]) < 0) {
                Py_DECREF(kwargs);
                return NULL;
            }
    }
    zpy_core_state *state = zpy_state_of_type(type);
    zpyv_kind *kind = state != NULL ? class_kind(state, type) : NULL;
    PyObject *made;
    if (kind != NULL && kind->cls == type && type->tp_new == value_new &&
        type->tp_init == state->value_type->tp_init &&
        Py_TYPE(type)->tp_call == PyType_Type.tp_call) {
        made = create_value(state, kind, args, given, kwargs);
    } else {
        PyObject *tuple = PyTuple_New(given);
        for (Py_ssize_t i = 0; tuple != NULL && i < given; i++)
            PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
        made = tuple != NULL ? Py_TYPE(type)->tp_call(callable, tuple, kwargs) : NULL;
        Py_XDECREF(tuple);
    }
    Py_XDECREF(kwargs);
    return made;
}

/* value_class_init(cls): make a new value class ready: its instances are not
 * tracked by the cycle collector (value.h: a value refers only to its
 * parent, kind and runtime; nothing refers back to it but borrowed tables),
 * so allocating one never runs the collector; and a value class cannot
 * finalise its instances (__del__ would run Python code while a value is
 * being dropped from a table). Must run before the class has instances. */
static PyObject *value_class_init(PyObject *module, PyObject *arg) {
    zpy_core_state *state = zpy_state_of_module(module);
    if (!PyType_Check(arg) || !PyType_IsSubtype((PyTypeObject *)arg, state->value_type)) {
        PyErr_SetString(PyExc_TypeError, "value_class_init: not a value class");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)arg;
    if (cls->tp_basicsize != state->value_type->tp_basicsize || cls->tp_dictoffset != 0) {
        PyErr_Format(PyExc_TypeError,
                     "%s: a value class cannot have instance attributes of its own (__slots__ "
                     "or __dict__): its state lives in native memory",
                     cls->tp_name);
        return NULL;
    }
    if (cls->tp_finalize != NULL || cls->tp_del != NULL) {
        PyErr_Format(PyExc_TypeError, "%s: a value class cannot define __del__", cls->tp_name);
        return NULL;
    }
    cls->tp_flags &= ~Py_TPFLAGS_HAVE_GC;
    cls->tp_free = PyObject_Free;
    cls->tp_traverse = NULL;
    cls->tp_clear = NULL;
    /* Straight to the base's dealloc: for an untracked class with no slots,
       no __dict__ and no finaliser, CPython's subtype_dealloc would only find
       it and call it (the base is a heap type: value_dealloc drops the
       class's reference itself). */
    cls->tp_dealloc = value_dealloc;
    PyTypeObject *meta = Py_TYPE(cls);
    if (meta->tp_call == PyType_Type.tp_call) { /* else the metaclass's __call__ always */
        cls->tp_vectorcall = value_vectorcall;
        if (!(meta->tp_flags & Py_TPFLAGS_HAVE_VECTORCALL)) {
            /* A metaclass made in Python inherits neither the flag nor the
               offset before Python 3.12; both are type's. */
            meta->tp_vectorcall_offset = offsetof(PyTypeObject, tp_vectorcall);
            meta->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
        }
    }
    Py_RETURN_NONE;
}

/* _core.black_count(runtime) -> inline black values alive (values_alive()). */
static PyObject *inline_blacks(PyObject *module, PyObject *runtime) {
    zpy_core_state *state = zpy_state_of_module(module);
    if (!PyObject_TypeCheck(runtime, state->runtime_type)) {
        PyErr_SetString(PyExc_TypeError, "inline_blacks: a runtime");
        return NULL;
    }
    return PyLong_FromUnsignedLong(((zpy_runtime_core *)runtime)->inline_blacks);
}

static PyMethodDef value_functions[] = {
    {"scope_opened", zpyv_scope_opened, METH_NOARGS, "Count a zs.scope() that opened."},
    {"scope_closed", zpyv_scope_closed, METH_O,
     "A zs.scope() ended: uncount it and expire the views obtained in it."},
    {"value_class_init", value_class_init, METH_O, "Make a new value class ready."},
    {"inline_blacks", inline_blacks, METH_O, "Inline black values alive in a runtime."},
    {NULL, NULL, 0, NULL},
};

int zpyv_add_value_type(PyObject *module, zpy_core_state *state) {
    state->value_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &value_spec, NULL);
    if (state->value_type == NULL ||
        PyModule_AddObjectRef(module, "ValueConjugate", (PyObject *)state->value_type) < 0)
        return -1;
    state->str_zs_kind = PyUnicode_InternFromString("_zs_kind");
    if (state->str_zs_kind == NULL) return -1;
    return PyModule_AddFunctions(module, value_functions);
}
