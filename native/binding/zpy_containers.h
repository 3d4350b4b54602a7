/* The containers' shared parts (zpy_containers.c, zpy_hash_base.c) and the
 * types each family file gives the registration (zpy_containers.c): the
 * header of the container files only.
 */
#ifndef ZSHARP_PY_CONTAINERS_H
#define ZSHARP_PY_CONTAINERS_H

#include "value.h"

/* The live container of `code` a method is given (its memory), or NULL with
 * an error set. */
char *zpyv_container_of(PyObject *self, uint8_t code, zpyv_value **out);
/* The native type of a live container's kind (registered when it was made). */
const zs_type *zpyv_container_type(zpyv_value *value);
/* Raise for a refused native call. */
PyObject *zpyv_container_refused(zpyv_value *value, zs_status status);
/* The container changed structure: every view below it expires. */
void zpyv_structure_changed(zpyv_value *value);
/* An element's contents were replaced: the views below its view expire. */
void zpyv_contents_changed(zpyv_value *value, Py_ssize_t key);
/* A Python index (int or __index__) as a position in [0, length): negative
 * counts from the end. -1 with IndexError or TypeError set. */
Py_ssize_t zpyv_position_of(PyObject *index, Py_ssize_t length, int *error);
/* Whether a plain element equals a probe as users compare them: a struct
 * (a dict) also equals the tuple of its members. */
int zpyv_plain_equal(PyObject *element, PyObject *probe);
/* The value users compare elements with: a conjugate's plain copy. */
PyObject *zpyv_probe_of(zpy_core_state *state, PyObject *value);
/* Stage one element (phase 1). */
int zpyv_stage_element(zpyv_value *value, PyObject *item, zpyv_staged *out);
/* The entry index of a staged key in a live hash (-1: absent), phase 2. */
int64_t zpyv_hash_find(zpyv_value *value, const zpyv_staged *staged, zs_status *status);
/* Stage a key; a value that cannot be a key (wrong type, out of range) is
 * 0 (absent) for lookups rather than an error. 1 staged, 0 not a key, -1. */
int zpyv_stage_lookup_key(zpyv_value *value, PyObject *key, zpyv_staged *out);
/* Add a staged key (and, for a map, write a staged value) to a live hash:
 * phase 2. A new map entry whose value cannot be written is removed again. */
int zpyv_hash_add(zpyv_value *value, const zpyv_staged *key_staged, const zpyv_staged *item);
/* Remove a staged key from a live hash (phase 2): 1 removed, 0 absent, -1. */
int zpyv_hash_remove(zpyv_value *value, const zpyv_staged *key_staged);
/* Add every staged element (a set) or key and value (a map) of a staged
 * set or map to a live hash: phase 2. Every object reference is checked
 * first, so that one whose object died while later elements were staged
 * is refused before anything is added. */
int zpyv_hash_add_all(zpyv_value *value, const zpyv_staged *staged);
Py_ssize_t zpyv_hash_length(PyObject *self);
int zpyv_hash_contains(PyObject *self, PyObject *key);
/* The keys, copied out (a list). */
PyObject *zpyv_hash_keys(PyObject *self, PyObject *unused);
PyObject *zpyv_hash_iter(PyObject *self);
/* clear(): remove every entry. */
PyObject *zpyv_hash_clear(PyObject *self, PyObject *unused);
extern PyType_Spec zpyv_iterator_spec;
extern PyType_Slot zpyv_array_slots[];
extern PyType_Slot zpyv_set_slots[];
extern PyType_Slot zpyv_map_slots[];
extern PyType_Slot zpyv_optional_slots[];

#endif
