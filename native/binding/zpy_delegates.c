/* Delegates: the C base of zs.Delegate, zs.MulticastDelegate and
 * zs.SparseDelegate, with the binding-list primitives their Python methods
 * use (zsharp_py/_types/delegates.py). A binding is staged as (object handle,
 * method name index, callable or None), parsed in Python (which may run
 * Python code: method lookups); each primitive then finds the delegate
 * again and makes its native call with no Python code in between.
 *
 * The registry of the Python callables that native bindings name by id
 * (zsv_callable_*) is here too.
 */
#include "value.h"

/* =========================================================================
 * Delegate values
 * ========================================================================= */

/* The live delegate value a method is given (its memory), or NULL. */
static char *delegate_of(PyObject *self, zpyv_value **out) {
    zpyv_value *value = (zpyv_value *)self;
    uint8_t code = value->kind->code;
    if (code != ZPYV_DELEGATE && code != ZPYV_MULTICAST && code != ZPYV_SPARSE) {
        PyErr_Format(PyExc_TypeError, "%U is not a delegate", value->kind->what);
        return NULL;
    }
    *out = value;
    return zpyv_live(value);
}

/* _raw() -> [(object handle, name index, callable or None), ...]: the
 * bindings, copied out. */
static PyObject *delegate_raw(PyObject *self, PyObject *unused) {
    (void)unused;
    zpyv_value *value;
    char *at = delegate_of(self, &value);
    if (at == NULL) return NULL;
    zpyv_staged staged = {0};
    if (zpyv_capture(value->runtime, value->kind, at, &staged) < 0) return PyErr_NoMemory();
    PyObject *list = PyList_New(staged.count);
    for (uint32_t i = 0; list != NULL && i < staged.count; i++) {
        const zpyv_binding *binding = &staged.u.bindings[i];
        PyObject *row = Py_BuildValue("(KIO)", (unsigned long long)binding->object,
                                      binding->function_name,
                                      binding->callable ? binding->callable : Py_None);
        if (row == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, row);
    }
    zpyv_release(value->kind, &staged);
    return list;
}

/* The native binding list of a live multicast or sparse delegate (NULL for
 * an unallocated sparse one unless `create`); *status on failure. */
static zs_array *binding_list(zpyv_value *value, int create, zs_status *status) {
    *status = ZS_OK;
    if (value->kind->code == ZPYV_MULTICAST) return (zs_array *)value->address;
    zpy_runtime_core *rt = value->runtime;
    zs_array *list = NULL;
    *status = zs_sparse_bindings(rt->native, value->owner, value->address, create, &list);
    return list;
}

/* _add(handle, name, callable): append one binding (multicast, sparse). */
static PyObject *delegate_add(PyObject *self, PyObject *args) {
    unsigned long long handle;
    unsigned int name;
    PyObject *callable;
    if (!PyArg_ParseTuple(args, "KIO:_add", &handle, &name, &callable)) return NULL;
    zpyv_value *value;
    if (delegate_of(self, &value) == NULL) return NULL;
    if (value->kind->code == ZPYV_DELEGATE)
        return PyErr_Format(PyExc_TypeError, "a Delegate holds one binding: use bind()");
    zpy_runtime_core *rt = value->runtime;
    if (!zpy_open(rt))
        return PyErr_Format(rt->state->expired_exception, "the runtime has been closed");
    /* Nothing ran Python code since delegate_of: the address is current. */
    zs_status status;
    zs_array *list = binding_list(value, 1, &status);
    uint32_t id = 0;
    if (status == ZS_OK && callable != Py_None && (id = zpyv_callable_id(rt, callable)) == 0)
        status = ZS_E_NOMEM;
    if (status == ZS_OK)
        status = zs_multicast_add(rt->native, value->owner, list,
                                  callable != Py_None ? ZS_NULL_REF : handle,
                                  callable != Py_None ? 0 : name, id);
    zpyv_callable_done(rt, id);
    if (status != ZS_OK) return zpyv_refused(rt, status, value->kind->what);
    Py_RETURN_NONE;
}

/* Remove bindings of a live delegate (a Delegate: unbind); later ones move
 * down, and an emptied sparse delegate frees its storage. No Python code. */
static zs_status remove_at(zpyv_value *value, uint32_t index, uint32_t count) {
    zpy_runtime_core *rt = value->runtime;
    if (value->kind->code == ZPYV_DELEGATE)
        return zs_binding_set(rt->native, value->owner, (zs_binding *)value->address, 0, 0, 0);
    zs_status status;
    zs_array *list = binding_list(value, 0, &status);
    if (status == ZS_OK && list != NULL)
        status = zs_multicast_remove(rt->native, value->owner, list, index, count);
    if (status == ZS_OK && value->kind->code == ZPYV_SPARSE && list != NULL && list->count == 0) {
        const zs_type *type = zpyv_native_type(rt, value->kind);
        status = type == NULL ? ZS_E_INVALID
                              : zs_value_clear(rt->native, value->owner, type, value->address);
    }
    return status;
}

/* _remove(index, count): remove bindings (later ones move down). */
static PyObject *delegate_remove(PyObject *self, PyObject *args) {
    unsigned int index, count;
    if (!PyArg_ParseTuple(args, "II:_remove", &index, &count)) return NULL;
    zpyv_value *value;
    if (delegate_of(self, &value) == NULL) return NULL;
    zs_status status = remove_at(value, index, count);
    if (status != ZS_OK) return zpyv_refused(value->runtime, status, value->kind->what);
    Py_RETURN_NONE;
}

/* =========================================================================
 * Calls (the hot paths: execute, broadcast) and callable bindings
 *
 * Bindings to plain callables are called here; a delegate holding an
 * object binding (a method looked up by name on a conjugate, which may
 * have to be made) takes the Python implementation, _<method>_slow in
 * zsharp_py/_types/delegates.py, with the same arguments.
 * ========================================================================= */

/* self._<name>_slow(*args, **kwargs): the Python implementation. */
static PyObject *slow_path(PyObject *self, const char *name, PyObject *const *args,
                           Py_ssize_t count, PyObject *kwnames) {
    PyObject *method = PyUnicode_FromFormat("_%s_slow", name);
    if (method == NULL) return NULL;
    Py_ssize_t named = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject **stack = PyMem_Malloc((size_t)(1 + count + named) * sizeof *stack);
    PyObject *result = NULL;
    if (stack == NULL) {
        PyErr_NoMemory();
    } else {
        stack[0] = self;
        for (Py_ssize_t i = 0; i < count + named; i++) stack[1 + i] = args[i];
        result = PyObject_VectorcallMethod(method, stack, (size_t)(1 + count), kwnames);
        PyMem_Free(stack);
    }
    Py_DECREF(method);
    return result;
}

/* Call `callable` inside a scope of its own (the views it obtains expire
 * when it returns, as every native -> Python call). New reference, or NULL
 * with the callee's exception (or the scope's). */
static PyObject *call_in_scope(zpy_core_state *state, PyObject *callable, PyObject *const *args,
                               Py_ssize_t count, PyObject *kwnames) {
    zpyv_call_scope scope;
    if (zpyv_call_scope_open(state, &scope) < 0) return NULL;
    PyObject *result = PyObject_Vectorcall(callable, args, (size_t)count, kwnames);
    zpyv_call_scope_close(state, &scope); /* no Python code: the error stays set */
    return result;
}

/* The callable a single delegate is bound to (new reference), NULL with no
 * error when it holds no callable binding (unbound, or an object binding). */
static PyObject *single_callable(zpyv_value *value, const char *at) {
    zs_binding binding;
    memcpy(&binding, at, sizeof binding);
    PyObject *callable = zpyv_callable_get(value->runtime, binding.callable);
    return callable ? Py_NewRef(callable) : NULL;
}

/* Delegate.execute(*args, **kwargs): call the binding, return its result. */
static PyObject *delegate_execute(PyObject *self, PyObject *const *args, Py_ssize_t count,
                                  PyObject *kwnames) {
    zpyv_value *value;
    char *at = delegate_of(self, &value);
    if (at == NULL) return NULL;
    if (value->kind->code != ZPYV_DELEGATE)
        return PyErr_Format(PyExc_TypeError, "execute() is for a Delegate; broadcast() a %U",
                            value->kind->what);
    PyObject *callable = single_callable(value, at);
    if (callable == NULL) return slow_path(self, "execute", args, count, kwnames);
    PyObject *result = call_in_scope(value->runtime->state, callable, args, count, kwnames);
    Py_DECREF(callable);
    return result;
}

/* Delegate.execute_if_bound(*args, **kwargs): call it if bound. */
static PyObject *delegate_execute_if_bound(PyObject *self, PyObject *const *args, Py_ssize_t count,
                                           PyObject *kwnames) {
    zpyv_value *value;
    char *at = delegate_of(self, &value);
    if (at == NULL) return NULL;
    if (value->kind->code != ZPYV_DELEGATE)
        return PyErr_Format(PyExc_TypeError, "execute_if_bound() is for a Delegate");
    PyObject *callable = single_callable(value, at);
    if (callable == NULL) return slow_path(self, "execute_if_bound", args, count, kwnames);
    PyObject *result = call_in_scope(value->runtime->state, callable, args, count, kwnames);
    Py_DECREF(callable);
    if (result == NULL) return NULL;
    Py_DECREF(result);
    Py_RETURN_TRUE;
}

/* broadcast(*args, **kwargs) of a multicast or sparse delegate whose
 * bindings are all callables: snapshot them, call each in its own scope;
 * an Exception does not stop the others (raised afterwards: itself, or an
 * ExceptionGroup through _broadcast_failed); any other BaseException stops
 * the broadcast at once. zsharp_py/_types/delegates.py documents the contract. */
static PyObject *delegate_broadcast(PyObject *self, PyObject *const *args, Py_ssize_t count,
                                    PyObject *kwnames) {
    zpyv_value *value;
    char *at = delegate_of(self, &value);
    if (at == NULL) return NULL;
    if (value->kind->code == ZPYV_DELEGATE)
        return PyErr_Format(PyExc_TypeError, "broadcast() is for a multicast delegate; "
                                             "execute() a Delegate");
    zpy_runtime_core *rt = value->runtime;
    zpyv_staged staged = {0};
    if (zpyv_capture(rt, value->kind, at, &staged) < 0) return PyErr_NoMemory();
    for (uint32_t i = 0; i < staged.count; i++)
        if (staged.u.bindings[i].callable == NULL) { /* an object binding (or a hole) */
            zpyv_release(value->kind, &staged);
            return slow_path(self, "broadcast", args, count, kwnames);
        }
    /* The captured bindings hold their callables: listeners may change the
       delegate (or dispose it) without changing this broadcast. */
    PyObject *errors = NULL;
    int stopped = 0;
    for (uint32_t i = 0; i < staged.count && !stopped; i++) {
        PyObject *result = call_in_scope(rt->state, staged.u.bindings[i].callable, args, count,
                                         kwnames);
        if (result != NULL) {
            Py_DECREF(result);
            continue;
        }
        if (!PyErr_ExceptionMatches(PyExc_Exception)) {
            stopped = 1; /* KeyboardInterrupt, SystemExit...: at once */
            break;
        }
        PyObject *error = zpy_error_take();
        if (errors == NULL) errors = PyList_New(0);
        if (errors == NULL || PyList_Append(errors, error) < 0) {
            Py_DECREF(error);
            stopped = 1;
            break;
        }
        Py_DECREF(error);
    }
    zpyv_release(value->kind, &staged);
    if (stopped) {
        Py_XDECREF(errors);
        return NULL;
    }
    if (errors == NULL) Py_RETURN_NONE;
    if (PyList_GET_SIZE(errors) == 1) {
        PyObject *error = Py_NewRef(PyList_GET_ITEM(errors, 0));
        Py_DECREF(errors);
        zpy_error_give(error);
        return NULL;
    }
    PyObject *raised = PyObject_CallMethod(self, "_broadcast_failed", "O", errors);
    Py_DECREF(errors);
    Py_XDECREF(raised); /* it raises */
    return NULL;
}

/* Whether `target` is bound as a callable (not an object's method, nor a
 * binding spelled another way) without looking at more than its type. */
static int plain_callable(zpy_core_state *state, PyObject *target) {
    return PyCallable_Check(target) && !PyMethod_Check(target) && !PyTuple_Check(target) &&
           !zpy_is_conjugate(state, target) && !zpyv_check(state, target);
}

/* The binding list of a live multicast or sparse delegate (NULL: an
 * unallocated sparse one, unless `create`) and whether every binding in it
 * is a callable (no object binding to prune or compare); -1 with an error. */
static int callable_bindings(zpyv_value *value, int create, zs_array **list, int *all_callables) {
    zs_status status;
    *list = binding_list(value, create, &status);
    if (status != ZS_OK) return zpyv_refused(value->runtime, status, value->kind->what), -1;
    *all_callables = 1;
    const zs_binding *data = *list ? (const zs_binding *)(*list)->data : NULL;
    for (uint32_t i = 0; *list != NULL && i < (*list)->count && *all_callables; i++)
        *all_callables = data[i].callable != 0;
    return 0;
}

/* add(target, function=None): a plain callable appended here, anything
 * else (an object and a method name, a delegate, pruning to do) by
 * _add_slow. */
static PyObject *delegate_add_binding(PyObject *self, PyObject *const *args, Py_ssize_t count,
                                      PyObject *kwnames) {
    zpyv_value *value;
    if (delegate_of(self, &value) == NULL) return NULL;
    if (value->kind->code == ZPYV_DELEGATE)
        return PyErr_Format(PyExc_TypeError, "a Delegate holds one binding: use bind()");
    zpy_runtime_core *rt = value->runtime;
    if (count != 1 || kwnames != NULL || !plain_callable(rt->state, args[0]) || !zpy_open(rt))
        return slow_path(self, "add", args, count, kwnames);
    zs_array *list;
    int all_callables;
    if (callable_bindings(value, 1, &list, &all_callables) < 0) return NULL;
    if (!all_callables) return slow_path(self, "add", args, count, kwnames);
    /* No Python code ran since delegate_of: the list is current. */
    uint32_t id = zpyv_callable_id(rt, args[0]);
    zs_status status = id == 0
                           ? ZS_E_NOMEM
                           : zs_multicast_add(rt->native, value->owner, list, ZS_NULL_REF, 0, id);
    zpyv_callable_done(rt, id);
    if (status != ZS_OK) return zpyv_refused(rt, status, value->kind->what);
    Py_RETURN_NONE;
}

/* remove(target, function=None): a plain function is matched here when ==
 * between it and every binding before its match is identity (functions);
 * anything else by _remove_slow. Returns whether one was removed. */
static PyObject *delegate_remove_binding(PyObject *self, PyObject *const *args, Py_ssize_t count,
                                         PyObject *kwnames) {
    zpyv_value *value;
    if (delegate_of(self, &value) == NULL) return NULL;
    if (value->kind->code == ZPYV_DELEGATE)
        return PyErr_Format(PyExc_TypeError, "a Delegate holds one binding: use unbind()");
    zpy_runtime_core *rt = value->runtime;
    if (count != 1 || kwnames != NULL || Py_TYPE(args[0]) != &PyFunction_Type || !zpy_open(rt))
        return slow_path(self, "remove", args, count, kwnames);
    zs_array *list;
    int all_callables;
    if (callable_bindings(value, 0, &list, &all_callables) < 0) return NULL;
    if (!all_callables) return slow_path(self, "remove", args, count, kwnames);
    const zs_binding *data = list ? (const zs_binding *)list->data : NULL;
    for (uint32_t i = 0; list != NULL && i < list->count; i++) {
        PyObject *held = zpyv_callable_get(rt, data[i].callable);
        if (held == args[0]) {
            /* Nothing ran Python code since delegate_of: i is current. */
            zs_status status = remove_at(value, i, 1);
            if (status != ZS_OK) return zpyv_refused(rt, status, value->kind->what);
            Py_RETURN_TRUE;
        }
        if (held == NULL || Py_TYPE(held) != &PyFunction_Type)
            return slow_path(self, "remove", args, count, kwnames); /* == could say yes */
    }
    Py_RETURN_FALSE;
}

/* `_allocated`: a sparse delegate's storage exists (only while bound). */
static PyObject *delegate_allocated(PyObject *self, void *closure) {
    (void)closure;
    zpyv_value *value;
    char *at = delegate_of(self, &value);
    if (at == NULL) return NULL;
    if (value->kind->code != ZPYV_SPARSE) Py_RETURN_TRUE;
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
    {"_execute", (PyCFunction)(void (*)(void))delegate_execute, METH_FASTCALL | METH_KEYWORDS,
     "Call the binding and return its result (RuntimeError when unbound, or when its object "
     "has been destroyed). Exceptions of the callee propagate; the delegate is unchanged by "
     "them."},
    {"_execute_if_bound", (PyCFunction)(void (*)(void))delegate_execute_if_bound,
     METH_FASTCALL | METH_KEYWORDS,
     "Call the binding if there is one; return whether it was called."},
    {"_broadcast", (PyCFunction)(void (*)(void))delegate_broadcast, METH_FASTCALL | METH_KEYWORDS,
     "Call every binding, in the order they were added.\n\n"
     "The bindings are snapshotted first: bindings added or removed by a listener take effect "
     "from the next broadcast. A binding whose object has been destroyed (before or during "
     "the broadcast) is skipped and dropped from the delegate. Each call runs in its own "
     "zs.scope().\n\n"
     "A listener that raises does not stop the broadcast (the others still run, exactly once) "
     "and leaves the delegate as it was; afterwards the error is raised to the broadcaster: "
     "the exception itself when one listener raised, an ExceptionGroup of them when several "
     "did. KeyboardInterrupt and other BaseExceptions that are not Exceptions stop the "
     "broadcast at once."},
    {"_add_binding", (PyCFunction)(void (*)(void))delegate_add_binding,
     METH_FASTCALL | METH_KEYWORDS,
     "Append a binding: a callable, or an object and a method name (add(actor, \"on_hit\")). "
     "Duplicates are allowed (see add_unique)."},
    {"_remove_binding", (PyCFunction)(void (*)(void))delegate_remove_binding,
     METH_FASTCALL | METH_KEYWORDS,
     "Remove the first binding equal to the one given (a callable is matched by identity or "
     "==); return whether one was removed."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot delegate_slots[] = {
    {Py_tp_doc, "The C base of the delegates: binding-list primitives."},
    {Py_tp_methods, delegate_methods},
    {Py_tp_getset, delegate_getset},
    {0, NULL},
};

int zpyv_add_delegate_type(PyObject *module, zpy_core_state *state) {
    PyType_Spec spec = {
        .name = "zsharp_py._core.DelegateBase",
        .basicsize = 0,
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
        .slots = delegate_slots,
    };
    PyObject *bases = PyTuple_Pack(1, (PyObject *)state->value_type);
    PyObject *type = bases ? PyType_FromModuleAndSpec(module, &spec, bases) : NULL;
    Py_XDECREF(bases);
    if (type == NULL) return -1;
    state->delegate_type = (PyTypeObject *)type;
    return PyModule_AddObjectRef(module, "DelegateBase", type);
}
