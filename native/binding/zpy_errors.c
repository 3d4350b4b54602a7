/* Errors: the exception being raised taken and given back, message
 * prefixes, a heap status raised as Python's exception (Python's
 * raise_status callback), and whether a dying window refuses a write.
 */
#include "value.h"

/* Let Python raise the exception of a native status of a call on `rt`'s
 * heap (it expires pending conjugates first when the status is DYING);
 * returns NULL. */
PyObject *zpy_call_raise_status(zpy_core_state *state, zs_ref status, PyObject *what,
                                zpy_runtime_core *rt) {
    PyObject *result = PyObject_CallFunction(state->raise_status, "KOO", (unsigned long long)status,
                                             what, rt ? (PyObject *)rt : Py_None);
    if (result != NULL) {
        Py_DECREF(result);
        PyErr_Format(PyExc_RuntimeError, "%U failed with native status %llu", what,
                     (unsigned long long)status);
    }
    return NULL;
}

PyObject *zpy_error_take(void) {
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (type == NULL) return NULL;
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != NULL && value != NULL) PyException_SetTraceback(value, traceback);
    Py_XDECREF(type);
    Py_XDECREF(traceback);
    return value;
#endif
}

void zpy_error_give(PyObject *error) {
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(error);
#else
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(error)), error, PyException_GetTraceback(error));
#endif
}

int zpy_error_prefix(PyObject *what) {
    PyObject *type = PyErr_Occurred();
    if (what == NULL ||
        (type != PyExc_TypeError && type != PyExc_ValueError && type != PyExc_OverflowError))
        return -1;
    PyObject *error = zpy_error_take();
    PyObject *text = PyObject_Str(error);
    if (text == NULL) {
        Py_DECREF(error);
        return -1;
    }
    if (PyUnicode_Tailmatch(text, what, 0, PY_SSIZE_T_MAX, -1) == 1) zpy_error_give(error);
    else {
        PyErr_Format(type, "%U: %U", what, text);
        Py_DECREF(error);
    }
    Py_DECREF(text);
    return -1;
}

zs_status zpyv_writable(zpy_runtime_core *rt, zs_ref owner) {
    if (owner == ZS_NULL_REF || !zpy_dying_window(rt)) return ZS_OK;
    return zs_object_writable(rt->native, owner);
}

PyObject *zpyv_refused(zpy_runtime_core *rt, zs_status status, PyObject *what) {
    return zpy_call_raise_status(rt->state, status, what, rt);
}

/* =========================================================================
 * Errors of calls from native code into Python
 * ========================================================================= */

/* Distinct unraisable reports remembered for folding; more: forgotten. */
#define REPORTS_REMEMBERED 256

void zpy_entry_open(zpy_core_state *state, zpy_entry *entry) {
    entry->thread = PyThreadState_Get();
    entry->first = NULL;
    entry->more = 0;
    entry->outer = state->entries;
    state->entries = entry;
}

void zpy_entry_leave(zpy_core_state *state, zpy_entry *entry) {
    zpy_entry **link = &state->entries;
    while (*link != NULL && *link != entry) link = &(*link)->outer;
    assert(*link == entry);
    if (*link == entry) *link = entry->outer;
    entry->outer = NULL;
}

/* Whether `error` must win over an ordinary first error: it is no
 * Exception (KeyboardInterrupt, SystemExit), or a RecursionError. */
static int never_silent(PyObject *error) {
    return !PyObject_TypeCheck(error, (PyTypeObject *)PyExc_Exception) ||
           PyObject_TypeCheck(error, (PyTypeObject *)PyExc_RecursionError);
}

int zpy_entry_raise(zpy_core_state *state, zpy_entry *entry, PyObject *what) {
    PyObject *first = entry->first;
    if (first == NULL) return 0;
    entry->first = NULL;
    if (!PyObject_TypeCheck(first, (PyTypeObject *)PyExc_Exception) ||
        (state->callback_error != NULL &&
         PyObject_TypeCheck(first, (PyTypeObject *)state->callback_error))) {
        zpy_error_give(first); /* as it is: an interrupt, or an inner call's report */
        return -1;
    }
    PyObject *more = entry->more == 0 ? PyUnicode_FromString("")
                                      : PyUnicode_FromFormat(" (and %zd more)", entry->more);
    if (more != NULL)
        PyErr_Format(state->callback_error,
                     "%U: a call from native code into Python raised %s: %S%U", what,
                     Py_TYPE(first)->tp_name, first, more);
    Py_XDECREF(more);
    PyObject *raised = zpy_error_take();
    if (raised == NULL) { /* unreachable: PyErr_Format always sets one */
        zpy_error_give(first);
        return -1;
    }
    if (PyObject_TypeCheck(raised, (PyTypeObject *)state->callback_error)) {
        PyException_SetCause(raised, first); /* steals */
        PyException_SetContext(raised, Py_NewRef(first));
    } else Py_DECREF(first); /* the message itself failed: that error instead */
    zpy_error_give(raised);
    return -1;
}

/* This thread's innermost open entry, or NULL. */
static zpy_entry *entry_here(zpy_core_state *state) {
    if (state->entries == NULL) return NULL;
    PyThreadState *thread = PyThreadState_Get();
    for (zpy_entry *entry = state->entries; entry != NULL; entry = entry->outer)
        if (entry->thread == thread) return entry;
    return NULL;
}

/* The times this report was made, counting this one (0: unknown); Python
 * code runs (str of the error and the context), any error of its cleared. */
static Py_ssize_t times_reported(zpy_core_state *state, PyObject *error, PyObject *context) {
    if (state->reported == NULL && (state->reported = PyDict_New()) == NULL)
        return PyErr_Clear(), 0;
    PyObject *hook = PySys_GetObject("unraisablehook"); /* borrowed */
    if (hook != state->reported_hook) {                 /* a new hook hears everything anew */
        PyDict_Clear(state->reported);
        Py_XSETREF(state->reported_hook, Py_XNewRef(hook));
    }
    PyObject *message = PyObject_Str(error);
    PyObject *where = context != NULL ? PyObject_Str(context) : PyUnicode_FromString("");
    PyObject *key = message != NULL && where != NULL
                        ? PyTuple_Pack(3, (PyObject *)Py_TYPE(error), message, where)
                        : NULL;
    Py_XDECREF(message);
    Py_XDECREF(where);
    Py_ssize_t times = 0;
    PyObject *count = key != NULL ? PyDict_GetItemWithError(state->reported, key) : NULL;
    if (key != NULL && !PyErr_Occurred()) {
        times = count != NULL ? PyLong_AsSsize_t(count) + 1 : 1;
        if (times > 0 && PyDict_GET_SIZE(state->reported) >= REPORTS_REMEMBERED && count == NULL)
            PyDict_Clear(state->reported);
        PyObject *now = times > 0 ? PyLong_FromSsize_t(times) : NULL;
        if (now == NULL || PyDict_SetItem(state->reported, key, now) < 0) times = 0;
        Py_XDECREF(now);
    }
    Py_XDECREF(key);
    PyErr_Clear();
    return times;
}

/* Whether report number `times` of one error is made: the first, then the
 * 10th, 100th, 1000th... (a frame loop failing the same way every frame
 * reports it a handful of times, each with its count). */
static int worth_reporting(Py_ssize_t times) {
    while (times >= 10 && times % 10 == 0) times /= 10;
    return times == 1;
}

void zpy_report_callback(zpy_core_state *state, PyObject *context) {
    PyObject *error = zpy_error_take();
    if (error == NULL) return;
    zpy_entry *entry = state->callback_errors_unraisable ? NULL : entry_here(state);
    if (entry != NULL) {
        if (entry->first == NULL) entry->first = error;
        else if (never_silent(error) && !never_silent(entry->first)) {
            Py_SETREF(entry->first, error); /* an interrupt reaches the caller */
            entry->more++;
        } else {
            Py_DECREF(error);
            entry->more++;
        }
        return;
    }
    Py_ssize_t times = state->callback_errors_unraisable ? 1
                                                         : times_reported(state, error, context);
    if (times > 1 && !worth_reporting(times) && !never_silent(error)) {
        Py_DECREF(error);
        return;
    }
    PyObject *folded = times > 1 ? PyUnicode_FromFormat("%S (the same error %zd times)",
                                                        context != NULL ? context : Py_None, times)
                                 : NULL;
    PyErr_Clear();
    zpy_error_give(error);
    /* The hook may ask whether this is such a report (the pytest plugin,
       zsharp_py/testing.py): this thread's, while it runs. */
    PyThreadState *outer = state->reporting_thread;
    state->reporting_thread = PyThreadState_Get();
    PyErr_WriteUnraisable(folded != NULL ? folded : context);
    state->reporting_thread = outer;
    Py_XDECREF(folded);
}

int zpy_reporting_callback(zpy_core_state *state) {
    return state->reporting_thread != NULL && state->reporting_thread == PyThreadState_Get();
}
