/* Object paths: what a soft object pointer resolves (SoftObjectPtr.get).
 *
 * A path names an object by its outers' names and its own, joined by dots
 * ("Level.Hero"). Resolving it reads the pointer's native UTF-8 string,
 * interns each segment and finds the object under the one before
 * (zs_find_object), with no Python code in between; then the conjugate of
 * what it found, if it is of the pointer's target class.
 */
#include "value.h"

/* The pointer's target class (new reference): `_zs_resolved` in its class's
 * own dictionary once resolved, else from the class's `_zs_target()` (which
 * resolves a forward reference, in Python, once). */
static PyObject *target_class(zpy_core_state *state, PyObject *self) {
    PyObject *resolved = PyDict_GetItemWithError(Py_TYPE(self)->tp_dict, state->str_zs_resolved);
    if (resolved == NULL && PyErr_Occurred()) return NULL;
    if (resolved != NULL && PyType_Check(resolved)) return Py_NewRef(resolved);
    PyObject *target = PyObject_CallMethod((PyObject *)Py_TYPE(self), "_zs_target", NULL);
    if (target != NULL && !PyType_Check(target)) {
        Py_DECREF(target);
        PyErr_SetString(PyExc_TypeError, "_zs_target() did not return a class");
        return NULL;
    }
    return target;
}

/* The live object at a UTF-8 path in `rt`, or ZS_NULL_REF. No Python code. */
static zs_ref find_by_path(zpy_runtime_core *rt, const char *path, size_t length) {
    zs_ref outer = ZS_NULL_REF;
    size_t start = 0;
    if (length == 0 || !zpy_open(rt)) return ZS_NULL_REF;
    while (start <= length) {
        size_t end = start;
        while (end < length && path[end] != '.') end++;
        uint32_t index, number;
        zs_ref found = ZS_NULL_REF;
        if (end == start ||
            zs_name_intern(rt->native, path + start, end - start, &index, &number) != ZS_OK ||
            zs_find_object(rt->native, outer, index, number, &found) != ZS_OK ||
            found == ZS_NULL_REF)
            return ZS_NULL_REF; /* an empty or invalid segment, or nothing there */
        outer = found;
        start = end + 1;
    }
    return outer;
}

PyObject *zpyv_soft_get(PyObject *self, PyObject *unused) {
    (void)unused;
    /* A method of the value type: `self` is a value conjugate. */
    zpyv_value *value = (zpyv_value *)self;
    if (value->kind->code != ZPYV_STRING || value->kind->unit != 1) {
        PyErr_SetString(PyExc_TypeError, "_soft_get() is for a soft object pointer");
        return NULL;
    }
    PyObject *target = target_class(value->runtime->state, self); /* may run Python code */
    if (target == NULL) return NULL;
    char *at = zpyv_live(value);
    PyObject *result = NULL;
    if (at != NULL) {
        const zs_string *path = (const zs_string *)at;
        zs_ref handle = find_by_path(value->runtime, path->data, path->length);
        result = zpy_conjugate_of(value->runtime, handle);
        if (result != NULL && result != Py_None &&
            !PyObject_TypeCheck(result, (PyTypeObject *)target))
            Py_SETREF(result, Py_NewRef(Py_None));
    }
    Py_DECREF(target);
    return result;
}
