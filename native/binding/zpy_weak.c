/* Weak object pointers: the C base of zs.WeakObjectPtr.
 *
 * A weak pointer is a runtime and a handle (slot index + serial). It never
 * keeps its object alive, and never resolves to another object that reuses
 * the slot: the serial no longer matches, so the conjugate table has no
 * entry and the native resolver refuses the handle. Reading a weak property
 * makes one here (zpy_kind.c, without a Python call); storing one into a weak
 * property reads its object here (zpy_kind.c, stage_reference).
 */
#include "core.h"

#include <structmember.h>

/* WeakObjectPtr(obj=None) */
static PyObject *weak_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"obj", NULL};
    PyObject *target = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:WeakObjectPtr", keywords, &target))
        return NULL;
    zpy_core_state *state = zpy_state_of_type(type);
    if (target != Py_None && !zpy_is_conjugate(state, target))
        return PyErr_Format(PyExc_TypeError, "WeakObjectPtr needs a zs.Object or None, not %s",
                            Py_TYPE(target)->tp_name);
    if (target != Py_None && !ZPY_CONJUGATE_IS_LIVE((zpy_conjugate *)target))
        return zpy_raise_expired((zpy_conjugate *)target);
    zpy_conjugate *conjugate = target != Py_None ? (zpy_conjugate *)target : NULL;
    return zpy_weak_new(type, conjugate ? conjugate->runtime : NULL,
                        conjugate ? zpy_conjugate_share(conjugate) : ZS_NULL_REF);
}

PyObject *zpy_weak_new(PyTypeObject *type, zpy_runtime_core *rt, zs_ref handle) {
    zpy_weak *weak = (zpy_weak *)type->tp_alloc(type, 0);
    if (weak == NULL) return NULL;
    weak->runtime = handle != ZS_NULL_REF ? (zpy_runtime_core *)Py_XNewRef((PyObject *)rt) : NULL;
    weak->handle = weak->runtime != NULL ? handle : ZS_NULL_REF;
    return (PyObject *)weak;
}

PyObject *zpy_weak_get(PyObject *self) {
    zpy_weak *weak = (zpy_weak *)self;
    if (weak->runtime == NULL) Py_RETURN_NONE;
    return zpy_conjugate_of(weak->runtime, weak->handle);
}

static PyObject *weak_get(PyObject *self, PyObject *unused) {
    (void)unused;
    return zpy_weak_get(self);
}

/* `is_valid`: get() would return an object. */
static PyObject *weak_is_valid(PyObject *self, void *closure) {
    (void)closure;
    PyObject *target = zpy_weak_get(self);
    if (target == NULL) return NULL;
    int valid = target != Py_None;
    Py_DECREF(target);
    return PyBool_FromLong(valid);
}

static int weak_bool(PyObject *self) {
    PyObject *target = zpy_weak_get(self);
    if (target == NULL) return -1;
    int valid = target != Py_None;
    Py_DECREF(target);
    return valid;
}

/* Equal when they name the same handle in the same runtime. */
static PyObject *weak_richcompare(PyObject *self, PyObject *other, int op) {
    zpy_core_state *state = zpy_state_of_type(Py_TYPE(self));
    if ((op != Py_EQ && op != Py_NE) || !PyObject_TypeCheck(other, state->weak_type))
        Py_RETURN_NOTIMPLEMENTED;
    zpy_weak *a = (zpy_weak *)self, *b = (zpy_weak *)other;
    int equal = a->runtime == b->runtime && a->handle == b->handle;
    return PyBool_FromLong(op == Py_EQ ? equal : !equal);
}

static Py_hash_t weak_hash(PyObject *self) {
    zpy_weak *weak = (zpy_weak *)self;
    Py_uhash_t hash = ((Py_uhash_t)(uintptr_t)weak->runtime >> 4) * 1000003u ^
                      (Py_uhash_t)weak->handle;
    return hash == (Py_uhash_t)-1 ? -2 : (Py_hash_t)hash;
}

static PyObject *weak_repr(PyObject *self) {
    PyObject *target = zpy_weak_get(self);
    if (target == NULL) return NULL;
    PyObject *text = PyUnicode_FromFormat("WeakObjectPtr(%R)", target);
    Py_DECREF(target);
    return text;
}

static int weak_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(((zpy_weak *)self)->runtime);
    Py_VISIT(Py_TYPE(self));
    return 0;
}

static int weak_clear(PyObject *self) {
    Py_CLEAR(((zpy_weak *)self)->runtime);
    return 0;
}

static void weak_dealloc(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    weak_clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyMethodDef weak_methods[] = {
    {"get", weak_get, METH_NOARGS, "The object if it is still alive, else None."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef weak_getset[] = {
    {"is_valid", weak_is_valid, NULL, "Whether get() would return an object.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot weak_slots[] = {
    {Py_tp_doc, "The C base of zs.WeakObjectPtr: a runtime and a handle."},
    {Py_tp_new, weak_new},
    {Py_tp_dealloc, weak_dealloc},
    {Py_tp_traverse, weak_traverse},
    {Py_tp_clear, weak_clear},
    {Py_tp_richcompare, weak_richcompare},
    {Py_tp_hash, weak_hash},
    {Py_tp_repr, weak_repr},
    {Py_nb_bool, weak_bool},
    {Py_tp_methods, weak_methods},
    {Py_tp_getset, weak_getset},
    {0, NULL},
};

static PyType_Spec weak_spec = {
    .name = "zsharp_py._core.WeakPointer",
    .basicsize = sizeof(zpy_weak),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = weak_slots,
};

int zpy_add_weak_type(PyObject *module, zpy_core_state *state) {
    state->weak_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &weak_spec, NULL);
    if (state->weak_type == NULL) return -1;
    return PyModule_AddObjectRef(module, "WeakPointer", (PyObject *)state->weak_type);
}
