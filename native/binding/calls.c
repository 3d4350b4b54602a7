/* Calls from native code into Python: the zs_call_handler of every runtime.
 *
 * A native host calls zs_call_function / zs_call_each (native/src/calls.c);
 * the heap calls this handler without holding its lock. Most calls a game
 * loop makes are tick(dt): a method whose parameters are all scalars and that
 * returns nothing. For those (a layout's `_fast` plan, made by
 * zsharp_py/_interop/calls.py) the whole call is made here: the conjugate from the
 * table, the arguments from the block, the object's runtime made current and
 * a scope opened around the call, failures reported through
 * sys.unraisablehook. Everything else (an object without a conjugate yet,
 * object and struct parameters, results, unknown functions, errors) goes to
 * Python's slow path, zsharp_py._interop.calls._call_from_address, which behaves the
 * same.
 *
 * The handler takes the GIL itself: the host may call from any thread.
 */
#include "value.h"

/* Most arguments a fast call passes (more go through Python). */
#define FAST_MAX_ARGUMENTS 8

/* =========================================================================
 * The open runtimes
 * ========================================================================= */

/* Record an open runtime (borrowed: it removes itself when detached or freed). */
int zs_open_runtime_add(zs_core_state *state, zs_runtime_core *rt) {
    if (state->open_count == state->open_capacity) {
        Py_ssize_t capacity = state->open_capacity ? state->open_capacity * 2 : 8;
        zs_runtime_core **grown = PyMem_Realloc(state->open_runtimes,
                                                (size_t)capacity * sizeof *grown);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        state->open_runtimes = grown;
        state->open_capacity = capacity;
    }
    state->open_runtimes[state->open_count++] = rt;
    return 0;
}

/* Forget a runtime (no-op if it is not recorded). */
void zs_open_runtime_remove(zs_core_state *state, zs_runtime_core *rt) {
    for (Py_ssize_t i = 0; i < state->open_count; i++) {
        if (state->open_runtimes[i] == rt) {
            state->open_runtimes[i] = state->open_runtimes[--state->open_count];
            return;
        }
    }
}

/* The open runtime core of a native runtime, or NULL (borrowed). */
static zs_runtime_core *open_runtime(const zs_core_state *state, const zs_runtime *native) {
    for (Py_ssize_t i = 0; i < state->open_count; i++)
        if (state->open_runtimes[i]->native == native) return state->open_runtimes[i];
    return NULL;
}

/* =========================================================================
 * The handler
 * ========================================================================= */

/* The slow path: Python's handler, for everything the fast path does not do. */
static zs_status slow_call(zs_core_state *state, zs_runtime_core *rt, zs_ref object,
                           const char *function, void *params) {
    PyObject *status = PyObject_CallFunction(state->slow_call, "OKyK", (PyObject *)rt,
                                             (unsigned long long)object, function,
                                             (unsigned long long)(uintptr_t)params);
    if (status == NULL) {
        PyErr_WriteUnraisable(state->slow_call);
        return ZS_E_CALL_FAILED;
    }
    long value = PyLong_AsLong(status);
    Py_DECREF(status);
    if (value == -1 && PyErr_Occurred()) {
        PyErr_WriteUnraisable(state->slow_call);
        return ZS_E_CALL_FAILED;
    }
    return (zs_status)value;
}

/* The fast plan of `function` on the conjugate's class: a new reference to
 * the tuple (method name, ((offset, scalar kind), ...)), or NULL (no error
 * set) when the call must take the slow path. Held through the call: the
 * method may change the class. */
static PyObject *fast_plan(zs_core_state *state, zs_conjugate *conjugate, const char *function) {
    PyObject *dict = Py_TYPE(conjugate)->tp_dict;
    PyObject *functions = dict ? PyDict_GetItemWithError(dict, state->str_zs_functions) : NULL;
    if (functions == NULL || !PyDict_Check(functions)) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *key = PyUnicode_FromString(function); /* not UTF-8: Python's path reports it */
    PyObject *layout = key ? PyDict_GetItemWithError(functions, key) : NULL;
    Py_XDECREF(key);
    if (layout == NULL) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *plan = PyObject_GetAttr(layout, state->str_fast);
    if (plan == NULL) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) != 2 ||
        !PyUnicode_CheckExact(PyTuple_GET_ITEM(plan, 0)) ||
        !PyTuple_CheckExact(PyTuple_GET_ITEM(plan, 1)) ||
        PyTuple_GET_SIZE(PyTuple_GET_ITEM(plan, 1)) > FAST_MAX_ARGUMENTS) {
        Py_DECREF(plan); /* None: the method takes the slow path */
        return NULL;
    }
    return plan;
}

/* Call `plan`'s method on the conjugate with the block's scalars, inside a
 * scope with its runtime current. Python errors are reported, not raised. */
static zs_status fast_call(zs_core_state *state, zs_runtime_core *rt, zs_conjugate *conjugate,
                           PyObject *plan, const char *params) {
    PyObject *name = PyTuple_GET_ITEM(plan, 0), *arguments = PyTuple_GET_ITEM(plan, 1);
    Py_ssize_t count = PyTuple_GET_SIZE(arguments);
    PyObject *stack[1 + FAST_MAX_ARGUMENTS];
    stack[0] = (PyObject *)conjugate;
    Py_ssize_t made = 0;
    for (; made < count; made++) {
        PyObject *entry = PyTuple_GET_ITEM(arguments, made);
        Py_ssize_t offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 0));
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(entry, 1));
        if (PyErr_Occurred() || kind < 0 || kind >= ZS_SCALAR_KINDS ||
            (stack[1 + made] = zs_scalar_load((zs_scalar_kind)kind, params + offset)) == NULL)
            break;
    }
    zs_status status = ZS_OK;
    PyObject *current = NULL, *result = NULL;
    zsv_call_scope scope;
    int scoped = made == count && zsv_call_scope_open(state, &scope) == 0;
    if (scoped && (current = PyContextVar_Set(state->current, (PyObject *)rt)) != NULL) {
        result = PyObject_VectorcallMethod(name, stack, (size_t)(1 + count), NULL);
        if (result == NULL) {
            /* Name the bound method, as Python's path does: look it up with
               the method's exception put aside. */
#if PY_VERSION_HEX >= 0x030C0000
            PyObject *raised = PyErr_GetRaisedException();
            PyObject *bound = PyObject_GetAttr((PyObject *)conjugate, name);
            PyErr_Clear();
            PyErr_SetRaisedException(raised);
#else
            PyObject *type, *value, *traceback;
            PyErr_Fetch(&type, &value, &traceback);
            PyObject *bound = PyObject_GetAttr((PyObject *)conjugate, name);
            PyErr_Clear();
            PyErr_Restore(type, value, traceback);
#endif
            PyErr_WriteUnraisable(bound != NULL ? bound : name);
            Py_XDECREF(bound);
            status = ZS_E_CALL_FAILED;
        }
        Py_XDECREF(result);
    }
    if (current != NULL && PyContextVar_Reset(state->current, current) < 0)
        status = ZS_E_CALL_FAILED;
    if (scoped) zsv_call_scope_close(state, &scope);
    if (PyErr_Occurred()) { /* building the call, or ending it, failed */
        PyErr_WriteUnraisable(name);
        status = ZS_E_CALL_FAILED;
    }
    Py_XDECREF(current);
    for (Py_ssize_t i = 0; i < made; i++) Py_DECREF(stack[1 + i]);
    return status;
}

/* The zs_call_handler: `user` is this module's state. */
static zs_status call_handler(void *user, zs_runtime *native, zs_ref object, const char *function,
                              void *params) {
    zs_core_state *state = user;
    PyGILState_STATE gil = PyGILState_Ensure();
    zs_status status = ZS_OK;
    zs_runtime_core *rt = open_runtime(state, native);
    if (rt == NULL || rt->closing) {
        status = ZS_E_STALE; /* closing: its objects are gone for Python */
    } else {
        Py_INCREF(rt);
        zs_conjugate *conjugate = zs_table_get(rt, object);
        int called = 0;
        if (conjugate != NULL && ZS_CONJUGATE_IS_LIVE(conjugate)) {
            Py_INCREF(conjugate);
            PyObject *plan = fast_plan(state, conjugate, function);
            /* Arguments but no block: Python's path reports it. */
            if (plan != NULL &&
                (params != NULL || PyTuple_GET_SIZE(PyTuple_GET_ITEM(plan, 1)) == 0)) {
                status = fast_call(state, rt, conjugate, plan, params);
                called = 1;
            }
            Py_XDECREF(plan);
            Py_DECREF(conjugate);
        }
        if (!called) status = slow_call(state, rt, object, function, params);
        Py_DECREF(rt);
    }
    PyGILState_Release(gil);
    return status;
}

/* configure_calls(slow_call, scopes): hand over the Python side of calls
 * from native code (once, at import). */
PyObject *zs_configure_calls(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"slow_call", "scopes", NULL};
    zs_core_state *state = zs_state_of_module(module);
    PyObject *slow, *scopes;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:configure_calls", keywords, &slow, &scopes))
        return NULL;
    if (!PyContextVar_CheckExact(scopes)) {
        PyErr_SetString(PyExc_TypeError, "configure_calls: scopes must be a ContextVar");
        return NULL;
    }
    if (state->str_zs_functions == NULL)
        state->str_zs_functions = PyUnicode_InternFromString("_zs_functions");
    if (state->str_fast == NULL) state->str_fast = PyUnicode_InternFromString("_fast");
    if (state->str_zs_functions == NULL || state->str_fast == NULL) return NULL;
    Py_XSETREF(state->slow_call, Py_NewRef(slow));
    Py_XSETREF(state->scopes, Py_NewRef(scopes));
    Py_RETURN_NONE;
}

/* call_handler() -> (handler address, user address): what Python passes to
 * zs_set_call_handler for every runtime. */
PyObject *zs_call_handler_addresses(PyObject *module, PyObject *unused) {
    (void)unused;
    zs_core_state *state = zs_state_of_module(module);
    if (state->slow_call == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "call_handler: configure_calls() first");
        return NULL;
    }
    zs_call_handler handler = call_handler;
    return Py_BuildValue("KK", (unsigned long long)(uintptr_t)handler,
                         (unsigned long long)(uintptr_t)state);
}
