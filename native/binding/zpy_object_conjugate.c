/* ObjectConjugate, the base of zs.Object: attribute errors that say how to
 * fix them, the expired error, the type itself, and the audit hook that
 * refuses re-classing a conjugate.
 */
#include "value.h"
#include <structmember.h>

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
        if (rt != NULL) zpy_dropped_add(rt, conjugate->handle, zpy_table_forget(rt, conjugate));
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

PyType_Spec zpy_conjugate_spec = {
    .name = "zsharp_py._core.ObjectConjugate",
    .basicsize = sizeof(zpy_conjugate),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = conjugate_slots,
};

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
