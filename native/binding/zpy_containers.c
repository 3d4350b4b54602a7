/* Containers: the C bases of zs.Array, zs.Set, zs.Map and zs.Optional.
 *
 * Every method checks the kind of what it is given (a conjugate re-classed
 * through object.__class__ gets a TypeError, never another layout), and
 * every write follows the rule of value.h: the Python values are staged
 * first; then, with no Python code in between, the container is found
 * again (it may have been disposed, collected, grown or cleared meanwhile),
 * indices are checked against it as it is now, the native call is made and
 * the views it invalidates are expired in place; then the staged values are
 * released. Element views expire when the container changes structure
 * (storage may move); a write that only replaces an element's contents
 * expires the views below that element. Done or refused alike: a write that
 * fails expires the views it would have expired had it succeeded (a hash
 * insertion may grow the entries, moving them, before it runs out of memory).
 */
#include "zpy_containers.h"

/* =========================================================================
 * Shared
 * ========================================================================= */

/* The live container of `code` a method is given (its memory), or NULL with
 * an error set. */
char *zpyv_container_of(PyObject *self, uint8_t code, zpyv_value **out) {
    zpyv_value *value = (zpyv_value *)self;
    if (value->kind->code != code) {
        PyErr_Format(PyExc_TypeError, "%U is not a container of this type", value->kind->what);
        return NULL;
    }
    *out = value;
    return zpyv_live(value);
}

/* The native type of a live container's kind (registered when it was made). */
const zs_type *zpyv_container_type(zpyv_value *value) {
    return zpyv_native_type(value->runtime, value->kind);
}

/* Raise for a refused native call. */
PyObject *zpyv_container_refused(zpyv_value *value, zs_status status) {
    return zpyv_refused(value->runtime, status, value->kind->what);
}

/* The container changed structure: every view below it expires. */
void zpyv_structure_changed(zpyv_value *value) {
    zpyv_expire_table(value->views, value->runtime->state->reason_structure);
}

/* An element's contents were replaced: the views below its view expire. */
void zpyv_contents_changed(zpyv_value *value, Py_ssize_t key) {
    zpyv_value *view = zpyv_table_lookup(value->views, key);
    if (view != NULL) zpyv_expire_table(view->views, value->runtime->state->reason_structure);
}

/* A Python index (an int or int subclass, not a bool; __index__ is not
 * called, so no Python code runs) as a position in [0, length): negative
 * counts from the end. -1 with IndexError or TypeError set. */
Py_ssize_t zpyv_position_of(PyObject *index, Py_ssize_t length, int *error) {
    *error = 0;
    if (PyBool_Check(index) || !PyLong_Check(index)) {
        PyErr_Format(PyExc_TypeError, "indices must be integers, not %s", Py_TYPE(index)->tp_name);
        *error = 1;
        return -1;
    }
    Py_ssize_t position = PyLong_AsSsize_t(index);
    if (position == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        position = PY_SSIZE_T_MAX;
    } else if (position < 0) {
        position += length;
    }
    if (position < 0 || position >= length) {
        PyErr_SetString(PyExc_IndexError, "index out of range");
        *error = 1;
        return -1;
    }
    return position;
}

/* Whether a plain element equals a probe as users compare them: a struct
 * (a dict) also equals the tuple of its members. */
int zpyv_plain_equal(PyObject *element, PyObject *probe) {
    if (PyDict_Check(element) && (PyTuple_Check(probe) || PyList_Check(probe))) {
        PyObject *values = PyDict_Values(element);
        if (values == NULL) return -1;
        PyObject *mine = PyList_AsTuple(values), *theirs = PySequence_Tuple(probe);
        Py_DECREF(values);
        int equal = mine && theirs ? PyObject_RichCompareBool(mine, theirs, Py_EQ) : -1;
        Py_XDECREF(mine);
        Py_XDECREF(theirs);
        return equal;
    }
    return PyObject_RichCompareBool(element, probe, Py_EQ);
}

/* The value users compare elements with: a conjugate's plain copy. */
PyObject *zpyv_probe_of(zpy_core_state *state, PyObject *value) {
    if (zpyv_check(state, value)) return PyObject_CallMethod(value, "to_python", NULL);
    return Py_NewRef(value);
}

/* Stage one element (phase 1). */
int zpyv_stage_element(zpyv_value *value, PyObject *item, zpyv_staged *out) {
    return zpyv_stage_labelled(value->runtime, value->kind->element, item, out, "element");
}
