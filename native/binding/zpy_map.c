/* Maps: the methods of zs.Map's C base (MapBase) over the hash base
 * (zpy_hash_base.c).
 */
#include "zpy_containers.h"

/* How many times values() and items() of a view-valued map are made again
 * when it changes structure meanwhile (Python code changing it every time). */
#define MAP_READ_ATTEMPTS 8

/* The value of a staged key's entry in a map as it is now (a zpyv_finder:
 * the key is found again natively, so a view never gets the entry another
 * key moved into; cached under ~index). */
static char *map_finder(PyObject *holder, const void *place, Py_ssize_t *key) {
    zpyv_value *value = (zpyv_value *)holder;
    if (zpyv_live(value) == NULL) return NULL;
    zpy_runtime_core *rt = value->runtime;
    if (!zpy_open(rt))
        return PyErr_SetString(rt->state->expired_exception, "the runtime has been closed"), NULL;
    zs_status status;
    int64_t index = zpyv_hash_find(value, place, &status);
    if (status == ZS_E_STALE || status == ZS_E_DYING)
        return NULL; /* a key of an object destroyed since: no entry holds it now */
    if (status != ZS_OK) return zpyv_container_refused(value, status), NULL;
    if (index < 0) return NULL;
    *key = ~(Py_ssize_t)index;
    return (char *)((zs_hash *)value->address)->entries.data +
           (size_t)index * value->kind->entry_size + value->kind->value_offset;
}

/* The value of `key` (a plain value, or a view), `fallback` when it is
 * absent (a new reference), or KeyError when there is none. */
static PyObject *map_lookup(zpyv_value *value, PyObject *key, PyObject *fallback) {
    zpyv_staged staged = {0};
    int staged_ok = zpyv_stage_lookup_key(value, key, &staged);
    if (staged_ok < 0) return NULL;
    PyObject *result = NULL;
    zpyv_kind *item_kind = value->kind->value;
    if (staged_ok > 0 && item_kind->code == ZPYV_SCALAR) {
        /* A number: loaded where it is found (zpy_scalar_load copies it out
           before it makes the Python number). */
        Py_ssize_t cache_key;
        const char *at = map_finder((PyObject *)value, &staged, &cache_key);
        if (at != NULL) result = zpy_scalar_load((zpy_scalar_kind)item_kind->scalar, at);
    } else if (staged_ok > 0) {
        result = zpyv_read_at(value->runtime, item_kind, (PyObject *)value, value->owner,
                              map_finder, &staged);
    }
    zpyv_release(value->kind->element, &staged);
    if (result != NULL || PyErr_Occurred()) return result;
    if (fallback != NULL) return Py_NewRef(fallback);
    PyErr_SetObject(PyExc_KeyError, key);
    return NULL;
}

static PyObject *map_subscript(PyObject *self, PyObject *key) {
    zpyv_value *value;
    if (zpyv_container_of(self, ZPYV_MAP, &value) == NULL) return NULL;
    return map_lookup(value, key, NULL);
}

static int map_ass_subscript(PyObject *self, PyObject *key, PyObject *item) {
    zpyv_value *value;
    if (zpyv_container_of(self, ZPYV_MAP, &value) == NULL) return -1;
    zpyv_staged key_staged = {0}, item_staged = {0};
    if (item == NULL) {
        int staged_ok = zpyv_stage_lookup_key(value, key, &key_staged);
        int removed = staged_ok <= 0 ? staged_ok : zpyv_hash_remove(value, &key_staged);
        zpyv_release(value->kind->element, &key_staged);
        if (removed == 0) PyErr_SetObject(PyExc_KeyError, key);
        return removed > 0 ? 0 : -1;
    }
    if (zpyv_stage_labelled(value->runtime, value->kind->element, key, &key_staged, "key") < 0)
        return -1;
    if (zpyv_stage_labelled(value->runtime, value->kind->value, item, &item_staged, "value") < 0) {
        zpyv_release(value->kind->element, &key_staged);
        return -1;
    }
    int result = zpyv_hash_add(value, &key_staged, &item_staged);
    zpyv_release(value->kind->element, &key_staged);
    zpyv_release(value->kind->value, &item_staged);
    return result;
}

/* Map.get(key, default=None). */
static PyObject *map_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    zpyv_value *value;
    if (zpyv_container_of(self, ZPYV_MAP, &value) == NULL) return NULL;
    if (nargs < 1 || nargs > 2)
        return PyErr_Format(PyExc_TypeError, "get expected 1 or 2 arguments, got %zd", nargs);
    return map_lookup(value, args[0], nargs == 2 ? args[1] : Py_None);
}

/* Map._take(key) -> (found, plain value): remove an entry, its value copied out. */
static PyObject *map_take(PyObject *self, PyObject *key) {
    zpyv_value *value;
    if (zpyv_container_of(self, ZPYV_MAP, &value) == NULL) return NULL;
    zpyv_staged key_staged = {0};
    int staged_ok = zpyv_stage_lookup_key(value, key, &key_staged);
    if (staged_ok <= 0) return staged_ok < 0 ? NULL : Py_BuildValue("(OO)", Py_False, Py_None);
    PyObject *result = NULL;
    zpyv_staged captured = {0};
    if (zpyv_live(value) != NULL) {
        zs_status status;
        int64_t index = zpyv_hash_find(value, &key_staged, &status);
        if (status != ZS_OK) {
            zpyv_container_refused(value, status);
        } else if (index < 0) {
            result = Py_BuildValue("(OO)", Py_False, Py_None);
        } else {
            zs_hash *hash = (zs_hash *)value->address;
            if (zpyv_capture(value->runtime, value->kind->value,
                             (char *)hash->entries.data + (size_t)index * value->kind->entry_size +
                                 value->kind->value_offset,
                             &captured) < 0) {
                PyErr_NoMemory();
            } else if (zpyv_hash_remove(value, &key_staged) >= 0) {
                PyObject *plain = zpyv_build(value->runtime, value->kind->value, &captured);
                result = plain ? Py_BuildValue("(ON)", Py_True, plain) : NULL;
            }
        }
    }
    zpyv_release(value->kind->value, &captured);
    zpyv_release(value->kind->element, &key_staged);
    return result;
}

/* Map.update(other): set every key/value of a mapping or of pairs (all
 * staged first: a bad pair changes nothing). */
static PyObject *map_update_from(PyObject *self, PyObject *other) {
    zpyv_value *value;
    if (zpyv_container_of(self, ZPYV_MAP, &value) == NULL) return NULL;
    zpyv_staged staged = {0};
    if (zpyv_stage(value->runtime, value->kind, other, &staged, value->kind->what) < 0) return NULL;
    int result = zpyv_hash_add_all(value, &staged);
    zpyv_release(value->kind, &staged);
    return result < 0 ? NULL : Py_NewRef(Py_None);
}

/* One try of map_entries: NULL with no exception set when the map changed
 * structure while its views were made (*changed set). */
static PyObject *map_entries_once(zpyv_value *value, int with_keys, int *changed) {
    char *at = zpyv_live(value);
    if (at == NULL) return NULL;
    zpy_runtime_core *rt = value->runtime;
    zpyv_kind *key_kind = value->kind->element, *item_kind = value->kind->value;
    int views = (item_kind->flags & ZPYV_VIEW) != 0;
    const zs_hash *hash = (const zs_hash *)at;
    uint32_t count = hash->entries.count;
    /* One pass before any Python object is made (a view is found later by its key). */
    zpyv_staged *captured = PyMem_Calloc(count ? (size_t)count * 2 : 1, sizeof *captured);
    if (captured == NULL) return PyErr_NoMemory();
    int failed = 0;
    for (uint32_t i = 0; i < count && !failed; i++) {
        const char *entry = (const char *)hash->entries.data + (size_t)i * value->kind->entry_size;
        failed = zpyv_capture(rt, key_kind, entry, &captured[2 * i]) < 0 ||
                 (!views && zpyv_capture(rt, item_kind, entry + value->kind->value_offset,
                                         &captured[2 * i + 1]) < 0);
    }
    /* Private copies from here on: building them may run Python code. */
    PyObject *list = failed ? PyErr_NoMemory() : PyList_New(count);
    for (uint32_t i = 0; list != NULL && i < count; i++) {
        PyObject *key = with_keys ? zpyv_build(rt, key_kind, &captured[2 * i]) : NULL;
        PyObject *item = NULL;
        if (!with_keys || key != NULL)
            item = views ? zpyv_read_at(rt, item_kind, (PyObject *)value, value->owner, map_finder,
                                        &captured[2 * i])
                         : zpyv_build(rt, item_kind, &captured[2 * i + 1]);
        *changed = item == NULL && !PyErr_Occurred(); /* its key went meanwhile */
        PyObject *entry = item != NULL && with_keys ? PyTuple_Pack(2, key, item) : item;
        if (entry != item) Py_XDECREF(item);
        Py_XDECREF(key);
        if (entry == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, entry);
    }
    for (uint32_t i = 0; i < count; i++) {
        zpyv_release(key_kind, &captured[2 * i]);
        zpyv_release(item_kind, &captured[2 * i + 1]);
    }
    PyMem_Free(captured);
    if (!views || list == NULL) return list;
    /* No Python code from here: the views are of the map as it is now, or it changed. */
    if (zpyv_live(value) == NULL) {
        Py_DECREF(list);
        return NULL;
    }
    *changed = ((zs_hash *)value->address)->entries.count != count;
    for (uint32_t i = 0; !*changed && i < count; i++) {
        PyObject *entry = PyList_GET_ITEM(list, i);
        *changed = ((zpyv_value *)(with_keys ? PyTuple_GET_ITEM(entry, 1) : entry))->address ==
                   NULL;
    }
    if (*changed) Py_CLEAR(list);
    return list;
}

/* Map.values() and Map.items(): the values (views for struct, container
 * and string values), with their keys (plain copies) for items; all of one
 * state of the map (made again if it changed structure meanwhile). */
static PyObject *map_entries(PyObject *self, int with_keys) {
    zpyv_value *value;
    if (zpyv_container_of(self, ZPYV_MAP, &value) == NULL) return NULL;
    for (int attempt = 0; attempt < MAP_READ_ATTEMPTS; attempt++) {
        int changed = 0;
        PyObject *list = map_entries_once(value, with_keys, &changed);
        if (list != NULL || !changed) return list;
    }
    return PyErr_Format(PyExc_RuntimeError, "%U changed size during %s(), %d times",
                        value->kind->what, with_keys ? "items" : "values", MAP_READ_ATTEMPTS);
}

/* Map.values(): the values (views for struct, container and string values). */
static PyObject *map_values(PyObject *self, PyObject *unused) {
    (void)unused;
    return map_entries(self, 0);
}

/* Map.items(): (key, value) pairs (keys copied out, values as values()). */
static PyObject *map_items(PyObject *self, PyObject *unused) {
    (void)unused;
    return map_entries(self, 1);
}

static PyMethodDef map_methods[] = {
    {"get", (PyCFunction)(void (*)(void))map_get, METH_FASTCALL, "The value for key, or default."},
    {"_take", map_take, METH_O, "Remove an entry: (found, its value copied out)."},
    {"_update_from", map_update_from, METH_O,
     "Set every key/value of a mapping or pairs (all staged first)."},
    {"keys", zpyv_hash_keys, METH_NOARGS, "The keys (plain copies), in entry order."},
    {"values", map_values, METH_NOARGS,
     "The values (views for struct, container and string values)."},
    {"items", map_items, METH_NOARGS, "(key, value) pairs."},
    {"clear", zpyv_hash_clear, METH_NOARGS, "Remove every entry."},
    {NULL, NULL, 0, NULL},
};

PyType_Slot zpyv_map_slots[] = {
    {Py_tp_doc, "The C base of zs.Map: a native hash map with the dict protocol."},
    {Py_mp_length, zpyv_hash_length},
    {Py_sq_length, zpyv_hash_length},
    {Py_sq_contains, zpyv_hash_contains},
    {Py_mp_subscript, map_subscript},
    {Py_mp_ass_subscript, map_ass_subscript},
    {Py_tp_iter, zpyv_hash_iter},
    {Py_tp_methods, map_methods},
    {0, NULL},
};
