/* Sets: the methods of zs.Set's C base (SetBase) over the hash base
 * (zpy_hash_base.c).
 */
#include "zpy_containers.h"

/* Set.add(value): add an element (no effect if an equal one is present). */
static PyObject *set_add(PyObject *self, PyObject *item) {
    zpyv_value *value;
    if (zpyv_container_of(self, ZPYV_SET, &value) == NULL) return NULL;
    zpyv_staged staged = {0};
    if (zpyv_stage_element(value, item, &staged) < 0) return NULL;
    int result = zpyv_hash_add(value, &staged, NULL);
    zpyv_release(value->kind->element, &staged);
    return result < 0 ? NULL : Py_NewRef(Py_None);
}

/* Set._discard(value) -> whether it was there. */
static PyObject *set_discard(PyObject *self, PyObject *item) {
    zpyv_value *value;
    if (zpyv_container_of(self, ZPYV_SET, &value) == NULL) return NULL;
    zpyv_staged staged = {0};
    int staged_ok = zpyv_stage_lookup_key(value, item, &staged);
    if (staged_ok <= 0) return staged_ok < 0 ? NULL : Py_NewRef(Py_False);
    int removed = zpyv_hash_remove(value, &staged);
    zpyv_release(value->kind->element, &staged);
    return removed < 0 ? NULL : PyBool_FromLong(removed);
}

/* Set.update(iterable): add every element (all staged first: a bad one
 * changes nothing). */
static PyObject *set_update(PyObject *self, PyObject *iterable) {
    zpyv_value *value;
    if (zpyv_container_of(self, ZPYV_SET, &value) == NULL) return NULL;
    zpyv_staged staged = {0};
    if (zpyv_stage(value->runtime, value->kind, iterable, &staged, value->kind->what) < 0)
        return NULL;
    int result = zpyv_hash_add_all(value, &staged);
    zpyv_release(value->kind, &staged);
    return result < 0 ? NULL : Py_NewRef(Py_None);
}

/* Set.pop(): remove and return an element (a plain copy). */
static PyObject *set_pop(PyObject *self, PyObject *unused) {
    (void)unused;
    zpyv_value *value;
    char *at = zpyv_container_of(self, ZPYV_SET, &value);
    if (at == NULL) return NULL;
    zs_hash *hash = (zs_hash *)at;
    if (hash->entries.count == 0) return PyErr_Format(PyExc_KeyError, "pop from an empty set");
    zpyv_staged captured = {0};
    if (zpyv_capture(value->runtime, value->kind->element,
                     (char *)hash->entries.data +
                         (size_t)(hash->entries.count - 1) * value->kind->entry_size,
                     &captured) < 0)
        return PyErr_NoMemory();
    int removed = zpyv_hash_remove(value, &captured);
    PyObject *result = removed < 0 ? NULL
                                   : zpyv_build(value->runtime, value->kind->element, &captured);
    zpyv_release(value->kind->element, &captured);
    return result;
}

static PyMethodDef set_methods[] = {
    {"add", set_add, METH_O, "Add an element (no effect if an equal one is present)."},
    {"_discard", set_discard, METH_O, "Remove an element if present: whether it was."},
    {"update", set_update, METH_O,
     "Add every element of an iterable (all checked first: a bad one leaves the set unchanged)."},
    {"pop", set_pop, METH_NOARGS, "Remove and return an arbitrary element (a plain copy)."},
    {"clear", zpyv_hash_clear, METH_NOARGS, "Remove every element."},
    {NULL, NULL, 0, NULL},
};

PyType_Slot zpyv_set_slots[] = {
    {Py_tp_doc, "The C base of zs.Set: a native hash set."},
    {Py_sq_length, zpyv_hash_length},
    {Py_sq_contains, zpyv_hash_contains},
    {Py_tp_iter, zpyv_hash_iter},
    {Py_tp_methods, set_methods},
    {0, NULL},
};
