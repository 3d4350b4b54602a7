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
