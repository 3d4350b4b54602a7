/* The module state's lookups (core.h): the state of a module or a type,
 * the type memo, the current-runtime ContextVar and its memo, and the
 * open runtimes the native handlers look their runtime up in.
 */
#include "value.h"

/* The state of this module object. */
zpy_core_state *zpy_state_of_module(PyObject *module) {
    return (zpy_core_state *)PyModule_GetState(module);
}

/* The state of the module that defined `type` or one of its bases. */
zpy_core_state *zpy_state_of_type(PyTypeObject *type) {
    for (PyTypeObject *base = type; base != NULL; base = base->tp_base) {
        if (!(base->tp_flags & Py_TPFLAGS_HEAPTYPE)) continue;
        PyObject *module = ((PyHeapTypeObject *)base)->ht_module;
        if (module != NULL && PyModule_GetDef(module) == &zpy_core_module)
            return zpy_state_of_module(module);
    }
    return NULL;
}

const zpy_type_memo *zpy_type_memo_fill(zpy_core_state *state, PyTypeObject *type) {
    zpy_type_memo answer = {
        .conjugate = (uint8_t)PyType_IsSubtype(type, state->conjugate_type),
        .value = (uint8_t)PyType_IsSubtype(type, state->value_type),
        .runtime = (uint8_t)PyType_IsSubtype(type, state->runtime_type),
    };
#ifdef Py_TPFLAGS_VALID_VERSION_TAG
    unsigned int tag = type->tp_version_tag;
    if (tag != 0 && (type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) {
        answer.tag = tag;
        zpy_type_memo *memo = &state->type_memo[tag % ZPY_TYPE_MEMO_SIZE];
        *memo = answer;
        return memo;
    }
#endif
    state->type_memo_scratch = answer;
    return &state->type_memo_scratch;
}

int zpy_current_read(zpy_core_state *state, PyObject **out) {
    PyObject *value = NULL;
    if (PyContextVar_Get(state->current, NULL, &value) < 0) return -1;
    /* Borrowed: the context holds it (the key below names that context). */
    Py_XDECREF(value);
    /* Read after the call, which may have run Python code (a finaliser
       setting the variable: then the memo was forgotten, and this value is
       the new one). */
    PyThreadState *thread = PyThreadState_Get();
    state->current_memo = (zpy_current_memo){
        .valid = 1,
        .thread = thread,
        .thread_id = thread->id,
        .context = thread->context,
        .context_version = thread->context_ver,
        .value = value,
        .runtime = value != NULL && zpy_is_runtime(state, value) ? (zpy_runtime_core *)value : NULL,
    };
    *out = value;
    return 0;
}

PyObject *zpy_context_var_set(zpy_core_state *state, PyObject *variable, PyObject *value) {
    PyObject *token = PyContextVar_Set(variable, value);
    /* Nothing allocates between the set and this: code a collection ran
       during the set read the old value, still right then. */
    state->current_memo.valid = 0;
    return token;
}

int zpy_context_var_reset(zpy_core_state *state, PyObject *variable, PyObject *token) {
    int status = PyContextVar_Reset(variable, token);
    state->current_memo.valid = 0;
    return status;
}

/* =========================================================================
 * The open runtimes
 * ========================================================================= */

/* Record an open runtime (borrowed: it removes itself when detached or freed). */
int zpy_open_runtime_add(zpy_core_state *state, zpy_runtime_core *rt) {
    if (state->open_count == state->open_capacity) {
        Py_ssize_t capacity = state->open_capacity ? state->open_capacity * 2 : 8;
        zpy_runtime_core **grown = PyMem_Realloc(state->open_runtimes,
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
void zpy_open_runtime_remove(zpy_core_state *state, zpy_runtime_core *rt) {
    for (Py_ssize_t i = 0; i < state->open_count; i++) {
        if (state->open_runtimes[i] == rt) {
            state->open_runtimes[i] = state->open_runtimes[--state->open_count];
            return;
        }
    }
}

/* The open runtime core of a native runtime, or NULL (borrowed). */
zpy_runtime_core *zpy_open_runtime_of(const zpy_core_state *state, const zs_runtime *native) {
    for (Py_ssize_t i = 0; i < state->open_count; i++)
        if (state->open_runtimes[i]->native == native) return state->open_runtimes[i];
    return NULL;
}
