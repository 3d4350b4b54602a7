/* The hash base sets and maps share: keys staged and made native, lookups,
 * adds, removes, and the methods both types have (len, in, iter, clear).
 */
#include "zpy_containers.h"

/* =========================================================================
 * Set and Map
 * ========================================================================= */

/* A staged key as native code reads it (phase 2). Keys that own nothing
 * (scalars, names, plain data: staged as their native bytes) and strings
 * (a zs_string over the staged code units) are read where they are staged:
 * zs_hash_find, _add and _remove only read a key, and zs_hash_add copies a
 * new one natively, so no native temporary is built, cleared and freed (two
 * runtime locks, an allocation). Any other key is built into a temporary. */
typedef struct hash_key {
    const char *at;  /* the key, or NULL when it could not be built */
    char *temporary; /* a native value built for this lookup (PyMem), or NULL */
    zs_string text;  /* a string key: borrows the staged units */
} hash_key;

/* Make `out` the native form of a staged key: its status (a refusal, or
 * ZS_E_NOMEM). No Python code. Free with hash_key_free. */
static zs_status native_key(zpyv_value *value, const zpyv_staged *staged, hash_key *out) {
    zpyv_kind *key_kind = value->kind->element;
    zpy_runtime_core *rt = value->runtime;
    out->at = NULL;
    out->temporary = NULL;
    if (!zpy_open(rt)) return ZS_E_STALE; /* as zpyv_emit refuses */
    uint8_t code = key_kind->code;
    if ((code == ZPYV_SCALAR || code == ZPYV_NAME || code == ZPYV_PLAIN) &&
        staged->form == ZPYV_BITS) {
        assert(key_kind->size <= sizeof staged->u.bits);
        out->at = (const char *)staged->u.bits;
        return ZS_OK;
    }
    if (code == ZPYV_STRING && staged->form == ZPYV_UNITS) {
        /* Read only: capacity equals length, and nothing frees `data`. */
        out->text.data = staged->u.units;
        out->text.length = out->text.capacity = staged->count;
        out->at = (const char *)&out->text;
        return ZS_OK;
    }
    char *key = PyMem_Calloc(1, key_kind->size ? key_kind->size : 1);
    if (key == NULL) return ZS_E_NOMEM;
    out->temporary = key;
    zs_status status = zpyv_emit(rt, key_kind, staged, ZS_NULL_REF, key);
    if (status == ZS_OK) out->at = key;
    return status;
}

/* Free a native key (its temporary, if one was built). */
static void hash_key_free(zpyv_value *value, hash_key *key) {
    if (key->temporary == NULL) return;
    zpy_runtime_core *rt = value->runtime;
    const zs_type *type = zpyv_native_type(rt, value->kind->element);
    if (type != NULL && rt->native != NULL)
        zs_value_clear(rt->native, ZS_NULL_REF, type, key->temporary);
    PyMem_Free(key->temporary);
    key->temporary = NULL;
}

/* The entry index of a staged key in a live hash (-1: absent), phase 2. */
int64_t zpyv_hash_find(zpyv_value *value, const zpyv_staged *staged, zs_status *status) {
    hash_key key;
    *status = native_key(value, staged, &key);
    int64_t index = -1;
    if (*status == ZS_OK) {
        const zs_type *type = zpyv_container_type(value);
        *status = type == NULL ? ZS_E_INVALID
                               : zs_hash_find(value->runtime->native, type,
                                              (zs_hash *)value->address, key.at, &index);
    }
    hash_key_free(value, &key);
    return index;
}

/* Stage a key; a value that cannot be a key (wrong type, out of range) is
 * 0 (absent) for lookups rather than an error. 1 staged, 0 not a key, -1. */
int zpyv_stage_lookup_key(zpyv_value *value, PyObject *key, zpyv_staged *out) {
    if (zpyv_stage_labelled(value->runtime, value->kind->element, key, out, "key") == 0) return 1;
    if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError) ||
        PyErr_ExceptionMatches(PyExc_OverflowError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

/* Add a staged key (and, for a map, write a staged value) to a live hash:
 * phase 2. A new map entry whose value cannot be written is removed again. */
int zpyv_hash_add(zpyv_value *value, const zpyv_staged *key_staged, const zpyv_staged *item) {
    zpy_runtime_core *rt = value->runtime;
    if (zpyv_live(value) == NULL) return -1;
    if (!zpy_open(rt))
        return PyErr_SetString(rt->state->expired_exception, "the runtime has been closed"), -1;
    const zs_type *type = zpyv_container_type(value);
    if (type == NULL) return -1;
    hash_key key;
    zs_status status = native_key(value, key_staged, &key);
    uint32_t index = 0;
    int added = 0;
    zs_hash *hash = (zs_hash *)value->address;
    if (status == ZS_OK)
        status = zs_hash_add(rt->native, value->owner, type, hash, key.at, &index, &added);
    /* The entries may have moved: an entry was added, or the add failed
       after growing them (zs_hash_add grows the entries, then rehashes). */
    if (added || status != ZS_OK) zpyv_structure_changed(value);
    if (status == ZS_OK && item != NULL) {
        char *slot = (char *)hash->entries.data + (size_t)index * value->kind->entry_size +
                     value->kind->value_offset;
        if (added) zpyv_initialize(value->kind->value, slot);
        status = zpyv_emit(rt, value->kind->value, item, value->owner, slot);
        if (!added) zpyv_contents_changed(value, ~(Py_ssize_t)index); /* done or refused */
        if (status != ZS_OK && added)
            zs_hash_remove(rt->native, value->owner, type, hash, key.at, NULL);
    }
    hash_key_free(value, &key);
    if (status != ZS_OK) return zpyv_container_refused(value, status), -1;
    return 0;
}

/* Remove a staged key from a live hash (phase 2): 1 removed, 0 absent, -1. */
int zpyv_hash_remove(zpyv_value *value, const zpyv_staged *key_staged) {
    zpy_runtime_core *rt = value->runtime;
    if (zpyv_live(value) == NULL) return -1;
    const zs_type *type = zpyv_container_type(value);
    if (type == NULL) return -1;
    hash_key key;
    zs_status status = native_key(value, key_staged, &key);
    int removed = 0;
    if (status == ZS_OK)
        status = zs_hash_remove(rt->native, value->owner, type, (zs_hash *)value->address, key.at,
                                &removed);
    if (removed) zpyv_structure_changed(value);
    hash_key_free(value, &key);
    if (status != ZS_OK) return zpyv_container_refused(value, status), -1;
    return removed;
}

/* Add every staged element (a set) or key and value (a map) of a staged
 * set or map to a live hash: phase 2. Every object reference is checked
 * first, so that one whose object died while later elements were staged
 * is refused before anything is added. */
int zpyv_hash_add_all(zpyv_value *value, const zpyv_staged *staged) {
    if (staged->count == 0) return 0;
    zpy_runtime_core *rt = value->runtime;
    if (zpyv_live(value) == NULL) return -1;
    zs_status status = zpyv_references_valid(rt, value->kind, staged);
    if (status != ZS_OK) return zpyv_container_refused(value, status), -1;
    uint32_t step = value->kind->code == ZPYV_MAP ? 2 : 1;
    int result = 0;
    for (uint32_t i = 0; result == 0 && i < staged->count; i++)
        result = zpyv_hash_add(value, &staged->u.items[step * i],
                               step == 2 ? &staged->u.items[2 * i + 1] : NULL);
    return result;
}

/* The entry index of `key` in a hash: -1 absent (or not a key), -2 error. */
static int64_t hash_lookup(zpyv_value *value, PyObject *key) {
    zpyv_staged staged = {0};
    int staged_ok = zpyv_stage_lookup_key(value, key, &staged);
    if (staged_ok <= 0) return staged_ok < 0 ? -2 : -1;
    int64_t index = -2;
    if (zpyv_live(value) != NULL) {
        zs_status status;
        index = zpyv_hash_find(value, &staged, &status);
        if (status != ZS_OK) {
            zpyv_container_refused(value, status);
            index = -2;
        }
    }
    zpyv_release(value->kind->element, &staged);
    return index;
}

Py_ssize_t zpyv_hash_length(PyObject *self) {
    zpyv_value *value = (zpyv_value *)self;
    uint8_t code = value->kind->code;
    if (code != ZPYV_SET && code != ZPYV_MAP) {
        PyErr_Format(PyExc_TypeError, "%U is not a set or map", value->kind->what);
        return -1;
    }
    char *at = zpyv_live(value);
    return at == NULL ? -1 : (Py_ssize_t)((zs_hash *)at)->entries.count;
}

int zpyv_hash_contains(PyObject *self, PyObject *key) {
    if (zpyv_hash_length(self) < 0) return -1;
    int64_t index = hash_lookup((zpyv_value *)self, key);
    return index == -2 ? -1 : index >= 0;
}

/* The keys, copied out (a list). */
PyObject *zpyv_hash_keys(PyObject *self, PyObject *unused) {
    (void)unused;
    if (zpyv_hash_length(self) < 0) return NULL;
    zpyv_value *value = (zpyv_value *)self;
    zs_hash *hash = (zs_hash *)value->address;
    uint32_t count = hash->entries.count;
    zpyv_staged *keys = PyMem_Calloc(count ? count : 1, sizeof *keys);
    if (keys == NULL) return PyErr_NoMemory();
    int failed = 0;
    for (uint32_t i = 0; i < count && !failed; i++)
        failed = zpyv_capture(value->runtime, value->kind->element,
                              (char *)hash->entries.data + (size_t)i * value->kind->entry_size,
                              &keys[i]) < 0;
    /* Private copies from here on: building them may run Python code. */
    PyObject *list = failed ? PyErr_NoMemory() : PyList_New(count);
    for (uint32_t i = 0; list != NULL && i < count; i++) {
        PyObject *key = zpyv_build(value->runtime, value->kind->element, &keys[i]);
        if (key == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, key);
    }
    for (uint32_t i = 0; i < count; i++) zpyv_release(value->kind->element, &keys[i]);
    PyMem_Free(keys);
    return list;
}

PyObject *zpyv_hash_iter(PyObject *self) {
    PyObject *keys = zpyv_hash_keys(self, NULL);
    if (keys == NULL) return NULL;
    PyObject *it = PyObject_GetIter(keys);
    Py_DECREF(keys);
    return it;
}

/* clear(): remove every entry. */
PyObject *zpyv_hash_clear(PyObject *self, PyObject *unused) {
    (void)unused;
    if (zpyv_hash_length(self) < 0) return NULL;
    zpyv_value *value = (zpyv_value *)self;
    zpy_runtime_core *rt = value->runtime;
    const zs_type *type = zpyv_container_type(value);
    if (type == NULL) return NULL;
    zs_status status = zs_value_clear(rt->native, value->owner, type, value->address);
    if (status != ZS_OK) return zpyv_container_refused(value, status);
    zpyv_structure_changed(value);
    Py_RETURN_NONE;
}
