/* Delegates: the C base of zs.Delegate, zs.MulticastDelegate and
 * zs.SparseDelegate, with the binding-list primitives their Python methods
 * use (zsharp_py/_delegates.py). A binding is staged as (object handle,
 * method name index, callable or None), parsed in Python (which may run
 * Python code: method lookups); each primitive then finds the delegate
 * again and makes its native call with no Python code in between.
 */
#include "value.h"

/* The live delegate value a method is given (its memory), or NULL. */
static char *delegate_of(PyObject *self, zsv_value **out) {
    zsv_value *value = (zsv_value *)self;
    uint8_t code = value->kind->code;
    if (code != ZSV_DELEGATE && code != ZSV_MULTICAST && code != ZSV_SPARSE) {
        PyErr_Format(PyExc_TypeError, "%U is not a delegate", value->kind->what);
        return NULL;
    }
    *out = value;
    return zsv_live(value);
}

/* _raw() -> [(object handle, name index, callable or None), ...]: the
 * bindings, copied out. */
static PyObject *delegate_raw(PyObject *self, PyObject *unused) {
    (void)unused;
    zsv_value *value;
    char *at = delegate_of(self, &value);
    if (at == NULL)
        return NULL;
    zsv_staged staged = {0};
    if (zsv_capture(value->runtime, value->kind, at, &staged) < 0)
        return PyErr_NoMemory();
    PyObject *list = PyList_New(staged.count);
    for (uint32_t i = 0; list != NULL && i < staged.count; i++) {
        const zsv_binding *binding = &staged.u.bindings[i];
        PyObject *row = Py_BuildValue("(KIO)", (unsigned long long)binding->object,
                                      binding->function_name,
                                      binding->callable ? binding->callable : Py_None);
        if (row == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, row);
    }
    zsv_release(value->kind, &staged);
    return list;
}

/* The native binding list of a live multicast or sparse delegate (NULL for
 * an unallocated sparse one unless `create`); *status on failure. */
static zs_array *binding_list(zsv_value *value, int create, zs_status *status) {
    *status = ZS_OK;
    if (value->kind->code == ZSV_MULTICAST)
        return (zs_array *)value->address;
    zs_runtime_core *rt = value->runtime;
    zs_array *list = NULL;
    *status = rt->state->api.zs_sparse_bindings(rt->native, value->owner, value->address, create,
                                                &list);
    return list;
}

/* _add(handle, name, callable): append one binding (multicast, sparse). */
static PyObject *delegate_add(PyObject *self, PyObject *args) {
    unsigned long long handle;
    unsigned int name;
    PyObject *callable;
    if (!PyArg_ParseTuple(args, "KIO:_add", &handle, &name, &callable))
        return NULL;
    zsv_value *value;
    if (delegate_of(self, &value) == NULL)
        return NULL;
    if (value->kind->code == ZSV_DELEGATE)
        return PyErr_Format(PyExc_TypeError, "a Delegate holds one binding: use bind()");
    zs_runtime_core *rt = value->runtime;
    if (rt->native == NULL || rt->closing)
        return PyErr_Format(rt->state->expired_exception, "the runtime has been closed");
    /* Nothing ran Python code since delegate_of: the address is current. */
    zs_status status;
    zs_array *list = binding_list(value, 1, &status);
    uint32_t id = 0;
    if (status == ZS_OK && callable != Py_None && (id = zsv_callable_id(rt, callable)) == 0)
        status = ZS_E_NOMEM;
    if (status == ZS_OK)
        status = rt->state->api.zs_multicast_add(rt->native, value->owner, list,
                                                 callable != Py_None ? ZS_NULL_REF : handle,
                                                 callable != Py_None ? 0 : name, id);
    zsv_callable_done(rt, id);
    if (status != ZS_OK)
        return zsv_refused(rt, status, value->kind->what);
    Py_RETURN_NONE;
}

/* _remove(index, count): remove bindings (later ones move down). */
static PyObject *delegate_remove(PyObject *self, PyObject *args) {
    unsigned int index, count;
    if (!PyArg_ParseTuple(args, "II:_remove", &index, &count))
        return NULL;
    zsv_value *value;
    if (delegate_of(self, &value) == NULL)
        return NULL;
    zs_runtime_core *rt = value->runtime;
    if (value->kind->code == ZSV_DELEGATE) {
        zs_status status = rt->state->api.zs_binding_set(rt->native, value->owner,
                                                         (zs_binding *)value->address, 0, 0, 0);
        if (status != ZS_OK)
            return zsv_refused(rt, status, value->kind->what);
        Py_RETURN_NONE;
    }
    zs_status status;
    zs_array *list = binding_list(value, 0, &status);
    if (status == ZS_OK && list != NULL)
        status = rt->state->api.zs_multicast_remove(rt->native, value->owner, list, index, count);
    if (status == ZS_OK && value->kind->code == ZSV_SPARSE && list != NULL && list->count == 0) {
        /* An emptied sparse delegate frees its storage. */
        const zs_type *type = zsv_native_type(rt, value->kind);
        status = type == NULL ? ZS_E_INVALID
                              : rt->state->api.zs_value_clear(rt->native, value->owner, type,
                                                              value->address);
    }
    if (status != ZS_OK)
        return zsv_refused(rt, status, value->kind->what);
    Py_RETURN_NONE;
}

/* `_allocated`: a sparse delegate's storage exists (only while bound). */
static PyObject *delegate_allocated(PyObject *self, void *closure) {
    (void)closure;
    zsv_value *value;
    char *at = delegate_of(self, &value);
    if (at == NULL)
        return NULL;
    if (value->kind->code != ZSV_SPARSE)
        Py_RETURN_TRUE;
    return PyBool_FromLong(*(void **)at != NULL);
}

static PyGetSetDef delegate_getset[] = {
    {"_allocated", delegate_allocated, NULL, "A sparse delegate's storage exists.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef delegate_methods[] = {
    {"_raw", delegate_raw, METH_NOARGS,
     "The bindings: (object handle, name index, callable or None), copied out."},
    {"_add", delegate_add, METH_VARARGS, "Append one binding."},
    {"_remove", delegate_remove, METH_VARARGS, "Remove bindings (a Delegate: unbind)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot delegate_slots[] = {
    {Py_tp_doc, "The C base of the delegates: binding-list primitives."},
    {Py_tp_methods, delegate_methods},
    {Py_tp_getset, delegate_getset},
    {0, NULL},
};

int zsv_add_delegate_type(PyObject *module, zs_core_state *state) {
    PyType_Spec spec = {
        .name = "zsharp_py._core.DelegateBase",
        .basicsize = 0,
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
        .slots = delegate_slots,
    };
    PyObject *bases = PyTuple_Pack(1, (PyObject *)state->value_type);
    PyObject *type = bases ? PyType_FromModuleAndSpec(module, &spec, bases) : NULL;
    Py_XDECREF(bases);
    if (type == NULL)
        return -1;
    state->delegate_type = (PyTypeObject *)type;
    return PyModule_AddObjectRef(module, "DelegateBase", type);
}
