/* The zsharp_py._core module: its state, configure() and init_class().
 *
 * Python calls configure() once at import (zsharp_py/_assembly.py) with the
 * callbacks of the slow paths and the addresses of the native functions, and
 * init_class() on every conjugate class it creates (zsharp_py/_model/object.py).
 */
#include "value.h"
#include "zsharp_api.h" /* ZS_API_FUNCTIONS, ZS_MANAGED_FUNCTIONS */

/* set_context_var(variable, value) -> Token: `variable.set(value)` for
 * zsharp_py/_base/context.py, which sets the current runtime through here. */
static PyObject *set_context_var(PyObject *module, PyObject *args) {
    PyObject *variable, *value;
    if (!PyArg_ParseTuple(args, "O!O:set_context_var", &PyContextVar_Type, &variable, &value))
        return NULL;
    return zpy_context_var_set(zpy_state_of_module(module), variable, value);
}

/* reset_context_var(variable, token): `variable.reset(token)`, likewise. */
static PyObject *reset_context_var(PyObject *module, PyObject *args) {
    PyObject *variable, *token;
    if (!PyArg_ParseTuple(args, "O!O!:reset_context_var", &PyContextVar_Type, &variable,
                          &PyContextToken_Type, &token))
        return NULL;
    if (zpy_context_var_reset(zpy_state_of_module(module), variable, token) < 0) return NULL;
    Py_RETURN_NONE;
}

/* The names of the managed side's own functions, from their X-macro. */
#define ZPY_NAME_TEXT(name) #name,
static const char *const managed_names[] = {ZS_MANAGED_FUNCTIONS(ZPY_NAME_TEXT)};
#undef ZPY_NAME_TEXT

/* A new list of `count` strs. */
static PyObject *name_list(const char *const *names, size_t count) {
    PyObject *list = PyList_New((Py_ssize_t)count);
    for (size_t i = 0; list != NULL && i < count; i++) {
        PyObject *text = PyUnicode_FromString(names[i]);
        if (text == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, text);
    }
    return list;
}

/* python_table() -> the address of the zsharp_python.h table. */
static PyObject *python_table(PyObject *module, PyObject *unused) {
    (void)unused;
    return PyLong_FromVoidPtr(&zpy_state_of_module(module)->python_api);
}

/* managed_functions() -> the names of the managed side's own protocol
 * (zsharp_api.h, ZS_MANAGED_FUNCTIONS), which a host is not given. */
static PyObject *managed_functions(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    return name_list(managed_names, sizeof managed_names / sizeof managed_names[0]);
}

/* api_table() -> the address of the host's table of the C API (struct
 * zs_api, zsharp_api.h): zs_api_table(). */
static PyObject *api_table(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    return PyLong_FromVoidPtr((void *)zs_api_table());
}

/* Add `name`'s address to `dict`: 0, or -1 with an error. */
static int add_function(PyObject *dict, const char *name, uintptr_t address) {
    PyObject *value = PyLong_FromUnsignedLongLong((unsigned long long)address);
    int added = value != NULL ? PyDict_SetItemString(dict, name, value) : -1;
    Py_XDECREF(value);
    return added;
}

/* api_functions() -> {name: address} of every function of the host's table
 * (zsharp_api.h, ZS_API_FUNCTIONS), and of zs_api_table itself: the
 * functions of zsharp.h a host may call (never the managed side's own). */
static PyObject *api_functions(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    PyObject *dict = PyDict_New();
    if (dict == NULL) return NULL;
#define ZPY_API_ADDRESS(name)                                                                      \
    if (add_function(dict, #name, (uintptr_t)&name) < 0) goto fail;
    ZS_API_FUNCTIONS(ZPY_API_ADDRESS)
    ZPY_API_ADDRESS(zs_api_table)
#undef ZPY_API_ADDRESS
    return dict;
fail:
    Py_DECREF(dict);
    return NULL;
}

/* configure(current, default_runtime, slow_create, init_create, expired_error,
 *           raise_status, store_failed, store_refused, expired_type,
 *           expired_exception, current_runtime, name_class, attribute_error) */
static PyObject *configure(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"current",         "default_runtime",
                               "slow_create",     "init_create",
                               "expired_error",   "raise_status",
                               "store_failed",    "store_refused",
                               "expired_type",    "expired_exception",
                               "current_runtime", "name_class",
                               "attribute_error", NULL};
    zpy_core_state *state = zpy_state_of_module(module);
    PyObject *current, *default_runtime, *slow_create, *init_create, *expired_error;
    PyObject *raise_status, *store_failed, *store_refused, *expired_type, *expired_exception;
    PyObject *current_runtime, *name_class, *attribute_error;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwargs, "OO!OOOOOOO!O!OO!O:configure", keywords, &current, &PyList_Type,
            &default_runtime, &slow_create, &init_create, &expired_error, &raise_status,
            &store_failed, &store_refused, &PyType_Type, &expired_type, &PyType_Type,
            &expired_exception, &current_runtime, &PyType_Type, &name_class, &attribute_error))
        return NULL;
    if (!PyContextVar_CheckExact(current)) {
        PyErr_SetString(PyExc_TypeError, "configure: current must be a ContextVar");
        return NULL;
    }
    if (!PyType_IsSubtype((PyTypeObject *)expired_type, &PyTuple_Type) ||
        !PyType_IsSubtype((PyTypeObject *)name_class, state->name_type)) {
        PyErr_SetString(PyExc_TypeError, "configure: expired_type must subclass tuple and "
                                         "name_class NameBase");
        return NULL;
    }
    Py_XSETREF(state->current, Py_NewRef(current));
    state->current_memo.valid = 0;
    Py_XSETREF(state->default_runtime, Py_NewRef(default_runtime));
    Py_XSETREF(state->slow_create, Py_NewRef(slow_create));
    Py_XSETREF(state->init_create, Py_NewRef(init_create));
    Py_XSETREF(state->expired_error, Py_NewRef(expired_error));
    Py_XSETREF(state->raise_status, Py_NewRef(raise_status));
    Py_XSETREF(state->store_failed, Py_NewRef(store_failed));
    Py_XSETREF(state->store_refused, Py_NewRef(store_refused));
    Py_XSETREF(state->expired_type, Py_NewRef(expired_type));
    Py_XSETREF(state->expired_exception, Py_NewRef(expired_exception));
    Py_XSETREF(state->current_runtime, Py_NewRef(current_runtime));
    Py_XSETREF(state->name_class, Py_NewRef(name_class));
    Py_XSETREF(state->attribute_error, Py_NewRef(attribute_error));
    Py_XSETREF(state->init_create, Py_NewRef(init_create));
    state->configured = 1;
    Py_RETURN_NONE;
}

/* init_class(cls, stateful=False): make a freshly created conjugate class
 * ready. Without Python state its instances are not tracked by the cycle
 * collector (Python makes every class it creates tracked): a conjugate
 * refers only to its runtime and to its own views, so it cannot be part of
 * an uncollected cycle for long (expiry breaks the views'), and it saves 16
 * bytes per conjugate; a class adding instance slots is refused. A stateful
 * class (zs.state() attributes, its own or inherited: zpy_object_state.c) keeps
 * Python's tracking, and its instances may have the slots of that state
 * only. Must run before the class has instances. */
static PyObject *init_class(PyObject *module, PyObject *args) {
    zpy_core_state *state = zpy_state_of_module(module);
    PyObject *arg;
    int stateful = 0;
    if (!PyArg_ParseTuple(args, "O|p:init_class", &arg, &stateful)) return NULL;
    if (!PyObject_TypeCheck(arg, state->class_type) ||
        !PyType_IsSubtype((PyTypeObject *)arg, state->conjugate_type)) {
        PyErr_SetString(PyExc_TypeError, "init_class: not a conjugate class");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)arg;
    if (((zpy_class_object *)cls)->number != 0) { /* its instances depend on the first call */
        PyErr_Format(PyExc_TypeError, "init_class: %s is ready already", cls->tp_name);
        return NULL;
    }
    if (stateful) {
        if (zpy_state_check_class(state, cls) < 0) return NULL;
    } else if (cls->tp_basicsize != state->conjugate_type->tp_basicsize ||
               cls->tp_dictoffset != 0 || cls->tp_weaklistoffset != 0) {
        PyErr_Format(PyExc_TypeError,
                     "%s: a native class cannot have instance attributes of its own "
                     "(__slots__, __dict__ or __weakref__): its state lives in native "
                     "properties, or in Python state declared with zs.state()",
                     cls->tp_name);
        return NULL;
    } else {
        cls->tp_flags &= ~Py_TPFLAGS_HAVE_GC;
        cls->tp_free = PyObject_Free;
        cls->tp_traverse = NULL;
        cls->tp_clear = NULL;
        /* Nothing of the instance is Python's to clear (no slots, dict or
           weak references): the conjugate's own dealloc, with no walk up
           the bases to find it. It runs a __del__ the class gains later. */
        if (cls->tp_finalize == NULL && cls->tp_del == NULL)
            cls->tp_dealloc = state->conjugate_type->tp_dealloc;
    }
    ((zpy_class_object *)cls)->stateful = (char)(stateful != 0);
    ((zpy_class_object *)cls)->state = state;
    /* The number that indexes each runtime's native classes (zpy_conjugate_is_a). */
    ((zpy_class_object *)cls)->number = ++state->class_count;
    if (zpy_class_enable_vectorcall(cls) < 0) return NULL;
    Py_RETURN_NONE;
}

/* raise_callback_errors(enabled) -> the previous setting: whether errors of
 * calls back into Python made inside a Python call into the host are raised
 * by that call (the default) or reported as unraisable (zpy_errors.c). */
static PyObject *raise_callback_errors(PyObject *module, PyObject *enabled) {
    zpy_core_state *state = zpy_state_of_module(module);
    int truth = PyObject_IsTrue(enabled);
    if (truth < 0) return NULL;
    int before = !state->callback_errors_unraisable;
    state->callback_errors_unraisable = !truth;
    return PyBool_FromLong(before);
}

/* reporting_callback_error() -> whether sys.unraisablehook is being called,
 * on this thread, with an error of a call from native code into Python
 * that no Python call into the host was there to raise (zpy_errors.c): the
 * pytest plugin's hook tells those from other unraisable reports. */
static PyObject *reporting_callback_error(PyObject *module, PyObject *unused) {
    (void)unused;
    return PyBool_FromLong(zpy_reporting_callback(zpy_state_of_module(module)));
}

static PyMethodDef core_functions[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Hand over the slow-path callbacks and the native API (once, at import)."},
    {"init_class", init_class, METH_VARARGS,
     "Make a new conjugate class ready (untracked instances unless it has Python state)."},
    {"configure_calls", (PyCFunction)(void (*)(void))zpy_configure_calls,
     METH_VARARGS | METH_KEYWORDS, "Hand over the Python side of calls from native code."},
    {"refuse_reclassing", zpy_refuse_reclassing, METH_O,
     "Refuse object.__dict__['__class__'].__set__ on conjugates (an audit hook, once)."},
    {"set_context_var", set_context_var, METH_VARARGS,
     "variable.set(value) -> Token, told to the memo of the current runtime."},
    {"reset_context_var", reset_context_var, METH_VARARGS,
     "variable.reset(token), told to the memo of the current runtime."},
    {"python_table", python_table, METH_NOARGS,
     "The address of the zsharp_python.h table (handles and proxies for C code)."},
    {"managed_functions", managed_functions, METH_NOARGS,
     "The names of the managed side's own protocol, which hosts are not given."},
    {"api_table", api_table, METH_NOARGS,
     "The address of the C API as one table of function pointers (struct zs_api)."},
    {"api_functions", api_functions, METH_NOARGS,
     "{name: address} of the C API functions a host may call (and zs_api_table)."},
    {"raise_callback_errors", raise_callback_errors, METH_O,
     "Set whether callbacks' errors are raised by the Python call into the host; the previous."},
    {"reporting_callback_error", reporting_callback_error, METH_NOARGS,
     "Whether sys.unraisablehook runs now, on this thread, for a callback's error."},
    /* zpy_reflection.c */
    {"status_message", zpy_module_status_message, METH_O,
     "The C library's text for a native status."},
    {"object_header", zpy_module_object_header, METH_O,
     "(name index, name number, outer handle) of a live object's native header."},
    {NULL, NULL, 0, NULL},
};

/* Module initialisation: create the types (configure() comes later). */
static int core_exec(PyObject *module) {
    zpy_core_state *state = zpy_state_of_module(module);
    memset(state, 0, sizeof *state);
    zpy_python_api_init(state);
    state->str_outer = PyUnicode_InternFromString("outer");
    state->str_name = PyUnicode_InternFromString("name");
    state->str_zs_resolved = PyUnicode_InternFromString("_zs_resolved");
    state->str_conjugate_of = PyUnicode_InternFromString("_conjugate_of_slow");
    if (state->str_outer == NULL || state->str_name == NULL || state->str_conjugate_of == NULL ||
        state->str_zs_resolved == NULL)
        return -1;
#define ZPY_REASON_MAKE(name, text)                                                                \
    if ((state->reason_##name = PyUnicode_InternFromString(text)) == NULL ||                       \
        PyModule_AddObjectRef(module, "REASON_" #name, state->reason_##name) < 0)                  \
        return -1;
    ZPY_REASONS(ZPY_REASON_MAKE)
#undef ZPY_REASON_MAKE
    if (zpy_add_conjugate_types(module, state) < 0 || zpy_add_property_types(module, state) < 0 ||
        zpy_add_class_types(module, state) < 0 || zpyv_add_kind_type(module, state) < 0 ||
        zpyv_add_value_type(module, state) < 0 || zpyv_add_member_types(module, state) < 0 ||
        zpyv_add_name_type(module, state) < 0 || zpyv_add_container_types(module, state) < 0 ||
        zpyv_add_delegate_type(module, state) < 0 || zpy_add_weak_type(module, state) < 0 ||
        zpyv_add_field_path_type(module, state) < 0 || zpy_add_call_types(module, state) < 0 ||
        zpy_add_function_types(module, state) < 0 || zpy_add_state_types(module, state) < 0 ||
        zpy_add_heap_constants(module) < 0 || zpy_add_tick_constants(module) < 0)
        return -1;
    state->callback_error = PyErr_NewExceptionWithDoc(
        "zsharp_py.CallbackError",
        "A call from native code into Python raised while Python was calling the host: the "
        "native function is named, the original exception is __cause__.",
        PyExc_RuntimeError, NULL);
    if (state->callback_error == NULL ||
        PyModule_AddObjectRef(module, "CallbackError", state->callback_error) < 0)
        return -1;
    return 0;
}

/* The module state's references, for the cycle collector. */
static int core_traverse(PyObject *module, visitproc visit, void *arg) {
    zpy_core_state *state = zpy_state_of_module(module);
    if (state == NULL) return 0;
    /* clang-format would read this X-macro list as one declaration and staircase it. */
    /* clang-format off */
#define ZPY_STATE_OBJECTS(X)                                                                  \
    X(conjugate_type) X(runtime_type) X(class_type) X(scalar_type) X(reference_type)        \
    X(creator_type) X(kind_type) X(value_type) X(value_property_type) X(member_type)         \
    X(name_type) X(array_type) X(set_type) X(map_type) X(optional_type) X(iterator_type)     \
    X(delegate_type) X(weak_type) X(str_outer) X(str_name) X(str_zs_resolved) X(str_conjugate_of) X(str_zs_kind) X(current)              \
    X(default_runtime) X(slow_create) X(init_create) X(attribute_error) X(expired_error)     \
    X(raise_status) X(store_failed) X(store_refused) X(expired_type) X(expired_exception)    \
    X(current_runtime) X(name_class) X(plan_of) X(scopes) X(str_zs_functions) X(str_plan) X(plan_type) \
    X(function_type) X(static_function_type) X(signature_plan_of) X(find_method) \
    X(callback_error) X(reported) X(reported_hook)
/* clang-format on */
#define ZPY_VISIT_FIELD(field) Py_VISIT(state->field);
    ZPY_STATE_OBJECTS(ZPY_VISIT_FIELD)
#undef ZPY_VISIT_FIELD
    return 0;
}

/* Drop them (interpreter shutdown); the fast paths decline from then on. */
static int core_clear(PyObject *module) {
    zpy_core_state *state = zpy_state_of_module(module);
    if (state == NULL) return 0;
    state->configured = 0;
    /* Calls from native code find no runtime from now on (the handler
       answers ZS_E_STALE); the list itself goes with the module. */
#define ZPY_CLEAR_FIELD(field) Py_CLEAR(state->field);
    ZPY_STATE_OBJECTS(ZPY_CLEAR_FIELD)
#undef ZPY_CLEAR_FIELD
#define ZPY_REASON_CLEAR(name, text) Py_CLEAR(state->reason_##name);
    ZPY_REASONS(ZPY_REASON_CLEAR)
#undef ZPY_REASON_CLEAR
    state->open_count = 0;
    zpy_name_keys_clear(state);
    zpy_plan_cache_clear(state);
    return 0;
}

/* Module deallocation. */
static void core_free(void *module) {
    core_clear((PyObject *)module);
    zpy_core_state *state = zpy_state_of_module((PyObject *)module);
    if (state != NULL) {
        PyMem_Free(state->open_runtimes);
        state->open_runtimes = NULL;
        state->open_capacity = 0;
    }
}

static PyModuleDef_Slot core_slots[] = {
    {Py_mod_exec, core_exec},
    {0, NULL},
};

struct PyModuleDef zpy_core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "zsharp_py._core",
    .m_doc = "The hot path of object conjugates (see native/binding/core.h).",
    .m_size = sizeof(zpy_core_state),
    .m_methods = core_functions,
    .m_slots = core_slots,
    .m_traverse = core_traverse,
    .m_clear = core_clear,
    .m_free = core_free,
};

/* The entry point (multi-phase initialisation). */
PyMODINIT_FUNC PyInit__core(void) { return PyModuleDef_Init(&zpy_core_module); }
