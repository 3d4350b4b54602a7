/* Optionals: the C base of zs.Optional (OptionalBase).
 */
#include "zpy_containers.h"

/* =========================================================================
 * Optional
 * ========================================================================= */

/* The value's address in an optional as it is now (a zpyv_locator, key 0). */
static char *optional_locator(PyObject *holder, Py_ssize_t key) {
    (void)key;
    zpyv_value *value = (zpyv_value *)holder;
    char *at = zpyv_live(value);
    if (at != NULL && !at[value->kind->value_offset]) {
        PyErr_SetString(PyExc_ValueError, "the optional was reset");
        return NULL;
    }
    return at;
}

/* `is_set`: whether a value is present. */
static PyObject *optional_is_set(PyObject *self, void *closure) {
    (void)closure;
    zpyv_value *value;
    char *at = zpyv_container_of(self, ZPYV_OPTIONAL, &value);
    return at == NULL ? NULL : PyBool_FromLong(at[value->kind->value_offset] != 0);
}

/* get(default=None): the value (a view for structs, containers, strings). */
static PyObject *optional_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    zpyv_value *value;
    char *at = zpyv_container_of(self, ZPYV_OPTIONAL, &value);
    if (at == NULL) return NULL;
    if (nargs > 1)
        return PyErr_Format(PyExc_TypeError, "get expected at most 1 argument, got %zd", nargs);
    if (!at[value->kind->value_offset]) return Py_NewRef(nargs ? args[0] : Py_None);
    zpyv_kind *element = value->kind->element;
    /* A scalar is read straight from the live storage (its element sits
       first): making an int or a float runs no Python code. */
    if (element->code == ZPYV_SCALAR) return zpy_scalar_load((zpy_scalar_kind)element->scalar, at);
    return zpyv_read(value->runtime, element, self, 0, value->owner, optional_locator);
}

/* set(value): store a value (replacing any). */
static PyObject *optional_set(PyObject *self, PyObject *item) {
    zpyv_value *value;
    if (zpyv_container_of(self, ZPYV_OPTIONAL, &value) == NULL) return NULL;
    zpyv_staged staged = {0};
    zpyv_staged *item_staged = PyMem_Calloc(1, sizeof *item_staged);
    if (item_staged == NULL) return PyErr_NoMemory();
    staged.form = ZPYV_ITEMS;
    staged.u.items = item_staged;
    if (zpyv_stage_labelled(value->runtime, value->kind->element, item, item_staged, "value") < 0) {
        zpyv_release(value->kind, &staged);
        return NULL;
    }
    staged.count = 1;
    zs_status status = ZS_E_STALE;
    if (zpyv_live(value) != NULL) {
        status = zpyv_emit(value->runtime, value->kind, &staged, value->owner, value->address);
        zpyv_structure_changed(value); /* done or refused: as every structural change */
    }
    zpyv_release(value->kind, &staged);
    if (value->address == NULL) return zpyv_raise_expired(value);
    if (status != ZS_OK) return zpyv_container_refused(value, status);
    Py_RETURN_NONE;
}

/* reset(): remove the value. */
static PyObject *optional_reset(PyObject *self, PyObject *unused) {
    (void)unused;
    zpyv_value *value;
    char *at = zpyv_container_of(self, ZPYV_OPTIONAL, &value);
    if (at == NULL) return NULL;
    const zs_type *type = zpyv_container_type(value);
    if (type == NULL) return NULL;
    zpy_runtime_core *rt = value->runtime;
    zs_status status = zs_value_clear(rt->native, value->owner, type, at);
    if (status != ZS_OK) return zpyv_container_refused(value, status);
    zpyv_structure_changed(value);
    Py_RETURN_NONE;
}

static int optional_bool(PyObject *self) {
    PyObject *set = optional_is_set(self, NULL);
    int result = set == NULL ? -1 : set == Py_True;
    Py_XDECREF(set);
    return result;
}

static PyGetSetDef optional_getset[] = {
    {"is_set", optional_is_set, NULL, "Whether a value is present.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef optional_methods[] = {
    {"get", (PyCFunction)(void (*)(void))optional_get, METH_FASTCALL,
     "The value (a view for structs, containers and strings), or default."},
    {"set", optional_set, METH_O, "Store a value (replacing any)."},
    {"reset", optional_reset, METH_NOARGS, "Remove the value."},
    {NULL, NULL, 0, NULL},
};

PyType_Slot zpyv_optional_slots[] = {
    {Py_tp_doc, "The C base of zs.Optional: a value or nothing."},
    {Py_nb_bool, optional_bool},
    {Py_tp_getset, optional_getset},
    {Py_tp_methods, optional_methods},
    {0, NULL},
};
