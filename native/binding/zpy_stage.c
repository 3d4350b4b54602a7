/* Phase 1 of the marshalling rule (value.h): stage a Python value, of any
 * kind, completely into private memory (zpyv_staged). Runs Python code;
 * touches no native memory except the runtime's name table.
 */
#include "value.h"
#include <structmember.h>

/* The most entries a container may stage (the heap's own limit). */
#define MAX_ENTRIES (1u << 30)

/* =========================================================================
 * Phase 1: stage
 * ========================================================================= */

/* Where the value being staged sits, for error messages only: a chain on
 * the C stack from the innermost value outwards, made into text
 * ("Actor.pos.x", "element") only when an error is raised, so that staging
 * a value that converts allocates no message. */
typedef struct where {
    const struct where *outer; /* the value this one is a member of, or NULL */
    PyObject *text;            /* borrowed: a member name (outer set) or the whole context */
    const char *label;         /* or the whole context as C text ("element"), outer NULL */
} where;

/* The context of `at` as text (new reference), or NULL with no error set
 * when there is none; NULL with an error when out of memory. */
static PyObject *where_text(const where *at) {
    if (at == NULL) return NULL;
    if (at->label != NULL) return PyUnicode_FromString(at->label);
    if (at->outer == NULL) return at->text ? Py_NewRef(at->text) : NULL;
    PyObject *outer = where_text(at->outer);
    if (outer == NULL) return PyErr_Occurred() ? NULL : Py_NewRef(at->text);
    PyObject *text = PyUnicode_FromFormat("%U.%U", outer, at->text);
    Py_DECREF(outer);
    return text;
}

/* Whether `at` names a context. */
static int where_known(const where *at) {
    return at != NULL && (at->label != NULL || at->text != NULL);
}

/* Raise `type` with "<where>: <message>" (the message alone where there is
 * no context). */
static int fail(PyObject *type, const where *at, const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    PyObject *message = PyUnicode_FromFormatV(format, arguments);
    va_end(arguments);
    if (message == NULL) return -1;
    PyObject *what = where_text(at);
    if (what != NULL) PyErr_Format(type, "%U: %U", what, message);
    else if (!PyErr_Occurred()) PyErr_SetObject(type, message);
    Py_XDECREF(what);
    Py_DECREF(message);
    return -1;
}

/* Name `at` before the message of the conversion error being raised
 * (zpy_error_prefix's rule); returns -1. */
static int prefix_at(const where *at) {
    if (!where_known(at)) return -1;
    PyObject *error = zpy_error_take();
    PyObject *what = where_text(at);
    if (what == NULL) {
        Py_XDECREF(error);
        return -1;
    }
    zpy_error_give(error);
    zpy_error_prefix(what);
    Py_DECREF(what);
    return -1;
}

/* The context of `at`, or the kind's name where there is none (new
 * reference; NULL only when out of memory). */
static PyObject *what_or_kind(const where *at, zpyv_kind *kind) {
    PyObject *what = where_text(at);
    return what != NULL || PyErr_Occurred() ? what : Py_NewRef(kind->what);
}

static int stage(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, zpyv_staged *out,
                 const where *at);

/* A tuple of the items of an iterable, taken without trusting a builtin
 * subclass: a list's or tuple's own storage, a set's base iterator, a
 * dict's keys; anything else through its own protocol. New reference. */
static PyObject *snapshot(PyObject *iterable) {
    if (PyTuple_CheckExact(iterable)) return Py_NewRef(iterable);
    if (PyTuple_Check(iterable)) return PyTuple_GetSlice(iterable, 0, PyTuple_GET_SIZE(iterable));
    if (PyList_Check(iterable)) return PyList_AsTuple(iterable);
    getiterfunc base = NULL;
    if (PyAnySet_Check(iterable)) base = PySet_Type.tp_iter;
    else if (PyDict_Check(iterable)) base = PyDict_Type.tp_iter;
    PyObject *iterator = base ? base(iterable) : PyObject_GetIter(iterable);
    if (iterator == NULL) return NULL;
    PyObject *list = PySequence_List(iterator);
    Py_DECREF(iterator);
    if (list == NULL) return NULL;
    PyObject *tuple = PyList_AsTuple(list);
    Py_DECREF(list);
    return tuple;
}

/* The (key, value) pairs of a mapping or an iterable of pairs, as a tuple of
 * 2-tuples, read as dict.update reads its argument: a dict (or subclass)
 * from its own storage; an object with keys() through keys() and
 * __getitem__; anything else as an iterable of pairs. New reference. */
static PyObject *snapshot_pairs(PyObject *mapping, const where *at) {
    PyObject *pairs = NULL;
    if (PyDict_Check(mapping)) {
        PyObject *items = PyDict_Items(mapping); /* base storage: no method of a subclass */
        pairs = items ? PyList_AsTuple(items) : NULL;
        Py_XDECREF(items);
        return pairs;
    }
    PyObject *keys_method = PyObject_GetAttrString(mapping, "keys");
    if (keys_method == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
        PyErr_Clear();
    }
    if (keys_method != NULL) {
        PyObject *listed = PyObject_CallNoArgs(keys_method);
        Py_DECREF(keys_method);
        PyObject *keys = listed ? snapshot(listed) : NULL;
        Py_XDECREF(listed);
        if (keys == NULL) return NULL;
        Py_ssize_t count = PyTuple_GET_SIZE(keys);
        pairs = PyTuple_New(count);
        for (Py_ssize_t i = 0; pairs != NULL && i < count; i++) {
            PyObject *key = PyTuple_GET_ITEM(keys, i);
            PyObject *item = PyObject_GetItem(mapping, key);
            PyObject *pair = item ? PyTuple_Pack(2, key, item) : NULL;
            Py_XDECREF(item);
            if (pair == NULL) Py_CLEAR(pairs);
            else PyTuple_SET_ITEM(pairs, i, pair);
        }
        Py_DECREF(keys);
        return pairs;
    }
    PyObject *seq = snapshot(mapping);
    if (seq == NULL) return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(seq);
    pairs = PyTuple_New(count);
    for (Py_ssize_t i = 0; pairs != NULL && i < count; i++) {
        PyObject *pair = PyTuple_GET_ITEM(seq, i);
        PyObject *both = PyTuple_Check(pair) || PyList_Check(pair) ? snapshot(pair) : NULL;
        if (both == NULL || PyTuple_GET_SIZE(both) != 2) {
            Py_XDECREF(both);
            PyErr_Clear();
            fail(PyExc_TypeError, at, "expected (key, value) pairs, got %s",
                 Py_TYPE(pair)->tp_name);
            Py_CLEAR(pairs);
            break;
        }
        PyTuple_SET_ITEM(pairs, i, both);
    }
    Py_DECREF(seq);
    return pairs;
}

static int stage_handle(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, const where *at,
                        zs_ref *out);

/* An object reference: None, or a live conjugate of the target class in
 * `rt`; for a weak reference also a weak pointer (its object, or None). */
static int stage_reference(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, zpyv_staged *out,
                           const where *at) {
    zs_ref handle = ZS_NULL_REF;
    PyObject *pointed = NULL;
    if (kind->code == ZPYV_WEAK && PyObject_TypeCheck(value, rt->state->weak_type)) {
        /* A weak pointer stores what it points to now (None once gone). */
        if ((pointed = zpy_weak_get(value)) == NULL) return -1;
        value = pointed;
    }
    int result = stage_handle(rt, kind, value, at, &handle);
    Py_XDECREF(pointed);
    if (result < 0) return -1;
    out->form = ZPYV_BITS;
    memcpy(out->u.bits, &handle, sizeof handle);
    return 0;
}

/* The handle of an object reference value: None, or a live conjugate of the
 * target class in `rt`. */
static int stage_handle(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, const where *at,
                        zs_ref *out) {
    zs_ref handle = ZS_NULL_REF;
    if (value != Py_None) {
        PyTypeObject *target = kind->cls;
        if (target == NULL || !PyObject_TypeCheck(value, target)) {
            PyObject *what = what_or_kind(at, kind);
            if (what != NULL) {
                fail(PyExc_TypeError, NULL, "%U expects %s%s or None, not %s", what,
                     target ? target->tp_name : "an object",
                     kind->code == ZPYV_WEAK ? ", WeakObjectPtr" : "", Py_TYPE(value)->tp_name);
                Py_DECREF(what);
            }
            return -1;
        }
        zpy_conjugate *conjugate = (zpy_conjugate *)value;
        if (!ZPY_CONJUGATE_IS_LIVE(conjugate)) {
            zpy_raise_expired(conjugate);
            PyObject *error = zpy_error_take();
            PyObject *text = error ? PyObject_Str(error) : NULL;
            PyObject *what = text ? what_or_kind(at, kind) : NULL;
            Py_XDECREF(error);
            if (what != NULL)
                PyErr_Format(rt->state->expired_exception, "cannot store into %U: %U", what, text);
            Py_XDECREF(what);
            Py_XDECREF(text);
            return -1;
        }
        if (conjugate->runtime != rt)
            return fail(PyExc_ValueError, at, "the object belongs to another runtime");
        /* Not this object's own class check: a reference holds any object of
           the target class; the native store validates the handle itself. */
        handle = zpy_conjugate_share(conjugate);
    }
    *out = handle;
    return 0;
}

/* The code units of a str for each string kind, from its own storage (a
 * subclass's methods are never called; no codec is looked up): a PyMem
 * block in *copy and its unit count, 0; or 0 with *bad the position of the
 * first code point the kind cannot hold (nothing allocated); or -1 with
 * MemoryError. */
static int utf16_of(PyObject *text, void **copy, size_t *units, Py_ssize_t *bad) {
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    int width = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    size_t count = (size_t)length;
    for (Py_ssize_t i = 0; width != PyUnicode_1BYTE_KIND && i < length; i++) {
        Py_UCS4 point = PyUnicode_READ(width, data, i);
        if (point >= 0xD800 && point <= 0xDFFF) {
            *bad = i; /* a lone surrogate: no UTF-16 for it */
            return 0;
        }
        count += point > 0xFFFF;
    }
    uint16_t *out = PyMem_Malloc(count ? count * sizeof *out : 1);
    if (out == NULL) return PyErr_NoMemory(), -1;
    size_t at = 0;
    for (Py_ssize_t i = 0; i < length; i++) {
        Py_UCS4 point = PyUnicode_READ(width, data, i);
        if (point > 0xFFFF) {
            point -= 0x10000;
            out[at++] = (uint16_t)(0xD800 | (point >> 10));
            out[at++] = (uint16_t)(0xDC00 | (point & 0x3FF));
        } else {
            out[at++] = (uint16_t)point;
        }
    }
    assert(at == count);
    *copy = out;
    *units = count;
    return 0;
}

static int ascii_of(PyObject *text, void **copy, size_t *units, Py_ssize_t *bad) {
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    if (!PyUnicode_IS_ASCII(text)) {
        int width = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
        for (Py_ssize_t i = 0; i < length; i++)
            if (PyUnicode_READ(width, data, i) > 0x7F) {
                *bad = i;
                return 0;
            }
    }
    char *out = PyMem_Malloc(length ? (size_t)length : 1);
    if (out == NULL) return PyErr_NoMemory(), -1;
    memcpy(out, PyUnicode_DATA(text), (size_t)length);
    *copy = out;
    *units = (size_t)length;
    return 0;
}

static int utf8_of(PyObject *text, void **copy, size_t *units, Py_ssize_t *bad) {
    Py_ssize_t length = 0;
    const char *data = PyUnicode_AsUTF8AndSize(text, &length);
    if (data == NULL) {
        /* Only a lone surrogate makes a str not encodable as UTF-8. */
        PyObject *error = zpy_error_take();
        if (error == NULL || !PyObject_TypeCheck(error, (PyTypeObject *)PyExc_UnicodeEncodeError)) {
            zpy_error_give(error);
            return -1;
        }
        Py_ssize_t start = 0;
        PyUnicodeEncodeError_GetStart(error, &start);
        Py_DECREF(error);
        *bad = start;
        return 0;
    }
    char *out = PyMem_Malloc(length ? (size_t)length : 1);
    if (out == NULL) return PyErr_NoMemory(), -1;
    memcpy(out, data, (size_t)length);
    *copy = out;
    *units = (size_t)length;
    return 0;
}

/* A string: the code units of a str (its own data: a subclass's methods are
 * never called), or of a string conjugate's text. */
static int stage_string(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, zpyv_staged *out,
                        const where *at) {
    PyObject *text = NULL;
    if (PyUnicode_Check(value)) {
        text = Py_NewRef(value);
    } else if (zpyv_check(rt->state, value) && ((zpyv_value *)value)->kind->code == ZPYV_STRING) {
        zpyv_value *string = (zpyv_value *)value;
        char *at = zpyv_live(string);
        if (at == NULL) return -1;
        zpyv_staged captured = {0};
        if (zpyv_capture(rt, string->kind, at, &captured) < 0) return PyErr_NoMemory(), -1;
        text = zpyv_build(rt, string->kind, &captured);
        zpyv_release(string->kind, &captured);
        if (text == NULL) return -1;
    } else {
        return fail(PyExc_TypeError, at, "%U needs a str, not %s", kind->what,
                    Py_TYPE(value)->tp_name);
    }
    void *copy = NULL;
    size_t units = 0;
    Py_ssize_t bad = -1; /* the first code point the kind cannot hold */
    int result = 0;
    if (kind->flags & ZPYV_UTF16) result = utf16_of(text, &copy, &units, &bad);
    else if (kind->flags & ZPYV_ASCII) result = ascii_of(text, &copy, &units, &bad);
    else result = utf8_of(text, &copy, &units, &bad);
    if (result == 0 && bad >= 0) {
        fail(PyExc_ValueError, at, "%U cannot hold %R: %s (position %zd)", kind->what, text,
             kind->flags & ZPYV_ASCII ? "ordinal not in range(128)" : "surrogates not allowed",
             bad);
        result = -1;
    } else if (result == 0 && units > MAX_ENTRIES) {
        PyMem_Free(copy);
        result = fail(PyExc_ValueError, at, "%U: string too long", kind->what);
    }
    Py_DECREF(text);
    if (result < 0) return -1;
    out->form = ZPYV_UNITS;
    out->count = (uint32_t)units;
    out->u.units = copy;
    return 0;
}

/* Staged items: count of them, zeroed (absent), or NULL with MemoryError. */
static zpyv_staged *new_items(size_t count) {
    zpyv_staged *items = PyMem_Calloc(count ? count : 1, sizeof *items);
    if (items == NULL) PyErr_NoMemory();
    return items;
}

/* A value conjugate of the same kind in the same runtime, copied whole
 * (captured): 1 if it was one, 0 if not, -1 on error. */
static int stage_whole(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, zpyv_staged *out) {
    if (!zpyv_check(rt->state, value)) return 0;
    zpyv_value *source = (zpyv_value *)value;
    if (source->kind != kind) return 0;
    char *at = zpyv_live(source);
    if (at == NULL) return -1;
    if (source->runtime != rt) {
        /* Another runtime: through its Python value, so every reference in
           it is checked again (an object of another runtime is refused). */
        PyObject *plain = PyObject_CallMethod(value, "to_python", NULL);
        if (plain == NULL) return -1;
        where whole = {NULL, kind->what, NULL};
        int result = stage(rt, kind, plain, out, &whole);
        Py_DECREF(plain);
        return result < 0 ? -1 : 1;
    }
    if (zpyv_capture(rt, kind, at, out) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 1;
}

/* The index of the member named `key` (a str), or -1. Interned names
 * match by identity first: the keywords of a call are interned. */
static int member_index(const zpyv_kind *kind, PyObject *key) {
    for (uint32_t i = 0; i < kind->member_count; i++)
        if (kind->members[i].name == key) return (int)i;
    for (uint32_t i = 0; PyUnicode_Check(key) && i < kind->member_count; i++)
        if (PyUnicode_Compare(key, kind->members[i].name) == 0) return (int)i;
    return -1;
}

/* Stage a struct's members: the first `given` from `positional`, the others
 * from `by_name` (a dict this module owns, its keys checked) where it holds
 * them; members given neither way are left absent. */
static int stage_members(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *const *positional,
                         Py_ssize_t given, PyObject *by_name, zpyv_staged *out, const where *at) {
    zpyv_staged *items = new_items(kind->member_count);
    if (items == NULL) return -1;
    out->form = ZPYV_ITEMS;
    out->count = kind->member_count;
    out->u.items = items;
    where self = where_known(at) ? *at
                                 : (where){NULL, ((PyHeapTypeObject *)kind->cls)->ht_name, NULL};
    int result = 0;
    for (uint32_t i = 0; result == 0 && i < kind->member_count; i++) {
        zpyv_member *member = &kind->members[i];
        PyObject *item = (Py_ssize_t)i < given ? positional[i] : NULL;
        if (item == NULL && by_name != NULL) item = PyDict_GetItemWithError(by_name, member->name);
        if (item == NULL) {
            result = PyErr_Occurred() ? -1 : 0;
            continue;
        }
        Py_INCREF(item); /* staging may run code that drops the container's */
        where inner = {&self, member->name, NULL};
        result = stage(rt, member->kind, item, &items[i], &inner);
        Py_DECREF(item);
    }
    if (result < 0) zpyv_release(kind, out);
    return result;
}

/* A struct: a tuple or list of its members in order, or a dict by name. */
static int stage_struct(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, zpyv_staged *out,
                        const where *at) {
    PyObject *shown = ((PyHeapTypeObject *)kind->cls)->ht_name;
    if (PyTuple_Check(value) || PyList_Check(value)) {
        PyObject *args = snapshot(value);
        if (args == NULL) return -1;
        int result;
        if ((uint32_t)PyTuple_GET_SIZE(args) > kind->member_count)
            result = fail(PyExc_TypeError, at, "too many values for %U", shown);
        else
            result = stage_members(rt, kind, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args),
                                   NULL, out, at);
        Py_DECREF(args);
        return result;
    }
    if (!PyDict_Check(value)) {
        PyObject *what = what_or_kind(at, kind);
        if (what != NULL) {
            fail(PyExc_TypeError, NULL, "%U expects %U, a tuple or a dict, not %s", what, shown,
                 Py_TYPE(value)->tp_name);
            Py_DECREF(what);
        }
        return -1;
    }
    /* Its own storage: PyDict_Copy calls a subclass's keys() and __getitem__. */
    PyObject **by_member = PyMem_Calloc(kind->member_count ? kind->member_count : 1,
                                        sizeof *by_member);
    if (by_member == NULL) return PyErr_NoMemory(), -1;
    Py_ssize_t position = 0;
    PyObject *key, *item, *unknown = NULL;
    int repeated = -1;
    while (unknown == NULL && repeated < 0 && PyDict_Next(value, &position, &key, &item)) {
        int index = member_index(kind, key);
        if (index < 0) unknown = Py_NewRef(key);
        else if (by_member[index] != NULL)
            repeated = index; /* two keys of equal text (a str subclass's own hash) */
        else by_member[index] = Py_NewRef(item);
    }
    int result;
    if (unknown != NULL) result = fail(PyExc_TypeError, at, "%U has no member %R", shown, unknown);
    else if (repeated >= 0)
        result = fail(PyExc_TypeError, at, "%U got multiple values for member %R", shown,
                      kind->members[repeated].name);
    else result = stage_members(rt, kind, by_member, (Py_ssize_t)kind->member_count, NULL, out, at);
    Py_XDECREF(unknown);
    for (uint32_t i = 0; i < kind->member_count; i++) Py_XDECREF(by_member[i]);
    PyMem_Free(by_member);
    return result;
}

int zpyv_stage_members(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *const *positional,
                       Py_ssize_t given, PyObject *kwargs, zpyv_staged *out) {
    PyObject *shown = ((PyHeapTypeObject *)kind->cls)->ht_name;
    if ((uint32_t)given > kind->member_count)
        return fail(PyExc_TypeError, NULL,
                    "%U() takes at most %u positional argument%s (%zd given)", shown,
                    kind->member_count, kind->member_count == 1 ? "" : "s", given);
    Py_ssize_t position = 0;
    PyObject *key, *item;
    while (kwargs != NULL && PyDict_Next(kwargs, &position, &key, &item)) {
        int known = member_index(kind, key);
        const char *problem = known < 0       ? "got an unknown member"
                              : known < given ? "got multiple values for"
                                              : NULL;
        if (problem != NULL) return fail(PyExc_TypeError, NULL, "%U() %s %R", shown, problem, key);
    }
    /* The call's own keyword dict: no one else holds it, so staging code
       cannot change it. */
    return stage_members(rt, kind, given ? positional : NULL, given,
                         kwargs != NULL && PyDict_GET_SIZE(kwargs) ? kwargs : NULL, out, NULL);
}

/* How many leading `items` of a packable array the inline cases convert
 * (an exact float into Float64 elements, a live object of exactly the
 * target class in this runtime into references), written into `packed`,
 * entry_size apart. No Python code: nothing here calls out or allocates. */
static Py_ssize_t packed_prefix(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *const *items,
                                Py_ssize_t count, char *packed) {
    size_t entry = kind->entry_size;
    Py_ssize_t i = 0;
    if (kind->element->code == ZPYV_SCALAR && kind->element->scalar == ZPY_SCALAR_F64) {
        for (; i < count && PyFloat_CheckExact(items[i]); i++) {
            double real = PyFloat_AS_DOUBLE(items[i]);
            memcpy(packed + (size_t)i * entry, &real, sizeof real);
        }
    } else if (kind->element->code == ZPYV_OBJECT) {
        PyTypeObject *target = kind->element->cls;
        for (; i < count; i++) {
            zpy_conjugate *item = (zpy_conjugate *)items[i];
            if (Py_TYPE(item) != target || !ZPY_CONJUGATE_IS_LIVE(item) || item->runtime != rt)
                break;
            zs_ref handle = zpy_conjugate_share(item);
            memcpy(packed + (size_t)i * entry, &handle, sizeof handle);
        }
    }
    return i;
}

/* A list or tuple (or a subclass: its own storage, as snapshot takes it)
 * staged packed straight from its storage when every element takes an
 * inline case: no tuple snapshot made, filled and dropped. 1 staged, 0 when
 * the general path must decide (nothing staged, no error), -1. */
static int stage_packed_direct(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value,
                               zpyv_staged *out) {
    Py_ssize_t count = PySequence_Fast_GET_SIZE(value);
    if (count == 0 || (size_t)count > MAX_ENTRIES) return 0;
    char *packed = PyMem_Calloc((size_t)count, kind->entry_size);
    if (packed == NULL) return PyErr_NoMemory(), -1;
    /* No Python code runs from the size read above to the last element read
       (PyMem allocates no Python object), so this is the list as a snapshot
       taken first would hold it. */
    if (packed_prefix(rt, kind, PySequence_Fast_ITEMS(value), count, packed) < count) {
        PyMem_Free(packed);
        return 0;
    }
    out->form = ZPYV_PACKED;
    out->count = (uint32_t)count;
    out->u.units = packed;
    return 1;
}

/* An array or set: a conjugate of the same kind, or an iterable. */
static int stage_sequence(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, zpyv_staged *out,
                          const where *at) {
    if (PyUnicode_Check(value) || PyBytes_Check(value) || PyByteArray_Check(value) ||
        (kind->code == ZPYV_ARRAY && PyDict_Check(value)))
        return fail(PyExc_TypeError, at, "%U needs an iterable of elements, not %s", kind->what,
                    Py_TYPE(value)->tp_name);
    if (Py_TYPE(value)->tp_iter == NULL && !PySequence_Check(value))
        return fail(PyExc_TypeError, at, "%U needs an iterable of elements, not %s", kind->what,
                    Py_TYPE(value)->tp_name);
    if (zpyv_packable(kind) && (PyList_Check(value) || PyTuple_Check(value))) {
        int direct = stage_packed_direct(rt, kind, value, out);
        if (direct != 0) return direct < 0 ? -1 : 0;
    }
    PyObject *items = snapshot(value); /* an iterable's own errors propagate as they are */
    if (items == NULL) return -1;
    Py_ssize_t count = PyTuple_GET_SIZE(items);
    if ((size_t)count > MAX_ENTRIES) {
        Py_DECREF(items);
        return fail(PyExc_ValueError, at, "too many elements (%zd)", count);
    }
    where element = {NULL, NULL, "element"};
    int result = 0;
    if (zpyv_packable(kind)) {
        /* Each element converted into its native bytes, side by side. */
        char *packed = PyMem_Malloc(count ? (size_t)count * kind->entry_size : 1);
        if (packed == NULL) {
            Py_DECREF(items);
            return PyErr_NoMemory(), -1;
        }
        memset(packed, 0, count ? (size_t)count * kind->entry_size : 1);
        out->form = ZPYV_PACKED;
        out->count = (uint32_t)count;
        out->u.units = packed;
        zpy_scalar_kind scalar = (zpy_scalar_kind)kind->element->scalar;
        int floats = kind->element->code == ZPYV_SCALAR && scalar == ZPY_SCALAR_F64;
        PyTypeObject *target = kind->element->code == ZPYV_OBJECT ? kind->element->cls : NULL;
        for (Py_ssize_t i = 0; result == 0 && i < count; i++) {
            PyObject *item = PyTuple_GET_ITEM(items, i);
            /* The common cases, inline: a float, a live object of exactly the
               target class in this runtime. */
            if (floats && PyFloat_CheckExact(item)) {
                double real = PyFloat_AS_DOUBLE(item);
                memcpy(packed + (size_t)i * kind->entry_size, &real, sizeof real);
                continue;
            }
            if (target != NULL && Py_TYPE(item) == target &&
                ZPY_CONJUGATE_IS_LIVE((zpy_conjugate *)item) &&
                ((zpy_conjugate *)item)->runtime == rt) {
                zs_ref handle = zpy_conjugate_share((zpy_conjugate *)item);
                memcpy(packed + (size_t)i * kind->entry_size, &handle, sizeof handle);
                continue;
            }
            zpyv_staged one = {0};
            result = stage(rt, kind->element, item, &one, &element);
            if (result == 0) {
                assert(one.form == ZPYV_BITS);
                memcpy(packed + (size_t)i * kind->entry_size, one.u.bits, kind->element->size);
            }
        }
        Py_DECREF(items);
        if (result < 0) zpyv_release(kind, out);
        return result;
    }
    zpyv_staged *staged = new_items((size_t)count);
    result = staged == NULL ? -1 : 0;
    out->form = ZPYV_ITEMS;
    out->count = (uint32_t)count;
    out->u.items = staged;
    for (Py_ssize_t i = 0; result == 0 && i < count; i++)
        result = stage(rt, kind->element, PyTuple_GET_ITEM(items, i), &staged[i], &element);
    Py_DECREF(items);
    if (result < 0) zpyv_release(kind, out);
    return result;
}

/* A map: a conjugate of the same kind, a mapping, or pairs. */
static int stage_map(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, zpyv_staged *out,
                     const where *at) {
    if (PyUnicode_Check(value) || PyBytes_Check(value))
        return fail(PyExc_TypeError, at, "%U needs a mapping, not %s", kind->what,
                    Py_TYPE(value)->tp_name);
    if (!PyDict_Check(value) && Py_TYPE(value)->tp_iter == NULL && !PySequence_Check(value) &&
        !PyObject_HasAttrString(value, "keys"))
        return fail(PyExc_TypeError, at, "%U needs a mapping, not %s", kind->what,
                    Py_TYPE(value)->tp_name);
    PyObject *pairs = snapshot_pairs(value, at);
    if (pairs == NULL) return -1;
    Py_ssize_t count = PyTuple_GET_SIZE(pairs);
    zpyv_staged *staged = new_items((size_t)count * 2);
    int result = staged == NULL ? -1 : 0;
    out->form = ZPYV_ITEMS;
    out->count = (uint32_t)count;
    out->u.items = staged;
    where key = {NULL, NULL, "key"}, item = {NULL, NULL, "value"};
    for (Py_ssize_t i = 0; result == 0 && i < count; i++) {
        PyObject *pair = PyTuple_GET_ITEM(pairs, i);
        result = stage(rt, kind->element, PyTuple_GET_ITEM(pair, 0), &staged[2 * i], &key);
        if (result == 0)
            result = stage(rt, kind->value, PyTuple_GET_ITEM(pair, 1), &staged[2 * i + 1], &item);
    }
    Py_DECREF(pairs);
    if (result < 0) zpyv_release(kind, out);
    return result;
}

/* Delegate bindings from the kind's encode: a list of (object handle,
 * method name index, callable or None). */
static int stage_bindings(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, zpyv_staged *out,
                          const where *at) {
    (void)rt;
    if (!PyList_CheckExact(value)) return fail(PyExc_TypeError, at, "bindings must be a list");
    Py_ssize_t count = PyList_GET_SIZE(value);
    if (kind->code == ZPYV_DELEGATE && count > 1)
        return fail(PyExc_TypeError, at, "a Delegate holds one binding");
    zpyv_binding *bindings = PyMem_Calloc(count ? (size_t)count : 1, sizeof *bindings);
    if (bindings == NULL) return PyErr_NoMemory(), -1;
    out->form = ZPYV_BINDINGS;
    out->u.bindings = bindings;
    out->count = 0;
    for (Py_ssize_t i = 0; i < count && i < PyList_GET_SIZE(value); i++) {
        PyObject *row = PyList_GET_ITEM(value, i), *callable;
        unsigned long long handle;
        unsigned int name;
        if (!PyTuple_CheckExact(row) || !PyArg_ParseTuple(row, "KIO", &handle, &name, &callable)) {
            zpyv_release(kind, out);
            if (!PyErr_Occurred())
                fail(PyExc_TypeError, at, "a binding is (handle, name, callable)");
            return -1;
        }
        bindings[i].object = handle;
        bindings[i].function_name = name;
        bindings[i].callable = callable != Py_None ? Py_NewRef(callable) : NULL;
        out->count++;
    }
    return 0;
}

static int stage(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, zpyv_staged *out,
                 const where *at) {
    assert(out->form == ZPYV_ABSENT);
    if (Py_EnterRecursiveCall(" while converting a value")) return -1;
    int result;
    PyObject *encoded = NULL;
    if (kind->encode != NULL) {
        encoded = PyObject_CallFunctionObjArgs(kind->encode, (PyObject *)rt, value, NULL);
        if (encoded == NULL) {
            Py_LeaveRecursiveCall();
            return -1;
        }
        value = encoded;
    }
    int whole = 0;
    switch (kind->code) {
    case ZPYV_STRUCT:
    case ZPYV_ARRAY:
    case ZPYV_SET:
    case ZPYV_MAP:
    case ZPYV_OPTIONAL:
        whole = stage_whole(rt, kind, value, out);
        break;
    default:
        break;
    }
    if (whole != 0) {
        result = whole < 0 ? -1 : 0;
    } else {
        switch (kind->code) {
        case ZPYV_SCALAR: {
            zpy_scalar_bits bits;
            result = zpy_scalar_convert((zpy_scalar_kind)kind->scalar, value, &bits, NULL);
            if (result < 0) prefix_at(at);
            else {
                out->form = ZPYV_BITS;
                memcpy(out->u.bits, &bits, sizeof bits);
            }
            break;
        }
        case ZPYV_OBJECT:
        case ZPYV_WEAK:
            result = stage_reference(rt, kind, value, out, at);
            break;
        case ZPYV_NAME:
            if (!PyObject_TypeCheck(value, rt->state->name_type) && !PyUnicode_Check(value)) {
                PyObject *what = where_text(at);
                if (what != NULL || !PyErr_Occurred())
                    zpyv_name_stage(rt, value, out, what); /* raises, naming `what` */
                Py_XDECREF(what);
                result = -1;
                break;
            }
            result = zpyv_name_stage(rt, value, out, NULL);
            if (result < 0) prefix_at(at);
            break;
        case ZPYV_STRING:
            result = stage_string(rt, kind, value, out, at);
            break;
        case ZPYV_STRUCT:
            result = stage_struct(rt, kind, value, out, at);
            break;
        case ZPYV_ARRAY:
        case ZPYV_SET:
            result = stage_sequence(rt, kind, value, out, at);
            break;
        case ZPYV_MAP:
            result = stage_map(rt, kind, value, out, at);
            break;
        case ZPYV_OPTIONAL: {
            if (value == Py_None) {
                out->form = ZPYV_ITEMS;
                out->count = 0;
                result = 0;
                break;
            }
            zpyv_staged *item = new_items(1);
            result = item == NULL ? -1 : 0;
            out->form = ZPYV_ITEMS;
            out->count = 0;
            out->u.items = item;
            if (result == 0) {
                result = stage(rt, kind->element, value, item, at);
                out->count = result == 0 ? 1 : 0;
            }
            if (result < 0) zpyv_release(kind, out);
            break;
        }
        case ZPYV_PLAIN:
            if (!PyBytes_CheckExact(value) || (size_t)PyBytes_GET_SIZE(value) != kind->size) {
                result = fail(PyExc_TypeError, at, "%U: its encoder returned %s, not %u bytes",
                              kind->what, Py_TYPE(value)->tp_name, kind->size);
                break;
            }
            out->form = ZPYV_BITS;
            memcpy(out->u.bits, PyBytes_AS_STRING(value), kind->size);
            result = 0;
            break;
        case ZPYV_DELEGATE:
        case ZPYV_MULTICAST:
        case ZPYV_SPARSE:
            result = stage_bindings(rt, kind, value, out, at);
            break;
        default:
            result = fail(PyExc_SystemError, at, "unknown kind");
            break;
        }
    }
    Py_XDECREF(encoded);
    Py_LeaveRecursiveCall();
    return result;
}

/* stage() of the commonest elements and keys, which hold nothing to recurse
 * into and have no encoder: a number from an exact int or float, a name or
 * a string from an exact str, a reference from a live object of exactly
 * the target class. The same conversions and errors as stage(), without
 * its recursion guard and dispatch. 1 staged, 0 not such a value, -1. */
static int stage_leaf(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, zpyv_staged *out,
                      const where *at) {
    assert(out->form == ZPYV_ABSENT);
    if (kind->encode != NULL) return 0;
    if (kind->code == ZPYV_SCALAR && (PyFloat_CheckExact(value) || PyLong_CheckExact(value))) {
        zpy_scalar_bits bits;
        if (zpy_scalar_convert((zpy_scalar_kind)kind->scalar, value, &bits, NULL) < 0)
            return prefix_at(at);
        out->form = ZPYV_BITS;
        memcpy(out->u.bits, &bits, sizeof bits);
        return 1;
    }
    if (kind->code == ZPYV_NAME && PyUnicode_CheckExact(value))
        return zpyv_name_stage(rt, value, out, NULL) < 0 ? prefix_at(at) : 1;
    if (kind->code == ZPYV_STRING && PyUnicode_CheckExact(value))
        return stage_string(rt, kind, value, out, at) < 0 ? -1 : 1;
    if (kind->code == ZPYV_OBJECT && Py_TYPE(value) == kind->cls &&
        ZPY_CONJUGATE_IS_LIVE((zpy_conjugate *)value) && ((zpy_conjugate *)value)->runtime == rt) {
        /* A live object of exactly the target class here: its handle, as
           stage_handle takes it (the native store validates it again). */
        zs_ref handle = zpy_conjugate_share((zpy_conjugate *)value);
        out->form = ZPYV_BITS;
        memcpy(out->u.bits, &handle, sizeof handle);
        return 1;
    }
    return 0;
}

int zpyv_stage(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, zpyv_staged *out,
               PyObject *what) {
    where at = {NULL, what, NULL};
    return stage(rt, kind, value, out, &at);
}

/* A string kind's code units of an exact str, when they can be had with no
 * allocation: the str's own storage (ASCII text for UTF-8 and ASCII kinds)
 * or `quick` (UTF-16 of up to ZPYV_QUICK_BYTES / 2 code points from the
 * Basic Multilingual Plane, no surrogates). 1 when staged, else 0. */
static int quick_string(zpyv_kind *kind, PyObject *value, zpyv_staged *out, zpyv_quick *quick) {
    if (!PyUnicode_CheckExact(value)) return 0;
    Py_ssize_t length = PyUnicode_GET_LENGTH(value);
    const void *data = PyUnicode_DATA(value);
    if (kind->flags & ZPYV_UTF16) {
        if ((size_t)length > sizeof quick->u.units / sizeof quick->u.units[0]) return 0;
        int width = PyUnicode_KIND(value);
        if (width == PyUnicode_1BYTE_KIND) {
            for (Py_ssize_t i = 0; i < length; i++) quick->u.units[i] = ((const Py_UCS1 *)data)[i];
        } else if (width == PyUnicode_2BYTE_KIND) {
            for (Py_ssize_t i = 0; i < length; i++) {
                Py_UCS2 unit = ((const Py_UCS2 *)data)[i];
                if (unit >= 0xD800 && unit <= 0xDFFF) return 0; /* zpyv_stage raises */
                quick->u.units[i] = unit;
            }
        } else {
            return 0; /* may need surrogate pairs: zpyv_stage */
        }
        out->u.units = quick->u.units;
    } else {
        /* ASCII is its own UTF-8; other text needs an encoding (zpyv_stage). */
        if (kind->unit != 1 || !PyUnicode_IS_ASCII(value) || (size_t)length > MAX_ENTRIES) return 0;
        out->u.units = (void *)data; /* the str is immutable and held by the caller */
    }
    out->form = ZPYV_UNITS;
    out->count = (uint32_t)length;
    return 1;
}

int zpyv_stage_quick(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, zpyv_staged *out,
                     zpyv_quick *quick) {
    assert(out->form == ZPYV_ABSENT);
    if (kind->encode != NULL) return 0;
    zpy_scalar_bits bits;
    switch (kind->code) {
    case ZPYV_SCALAR:
        if (!zpy_scalar_convert_exact((zpy_scalar_kind)kind->scalar, value, &bits)) return 0;
        out->form = ZPYV_BITS;
        memcpy(out->u.bits, &bits, sizeof bits);
        return 1;
    case ZPYV_OPTIONAL:
        /* As stage() makes it: no items for None, else one. */
        if (kind->element->code != ZPYV_SCALAR || kind->element->encode != NULL) return 0;
        memset(&quick->item, 0, sizeof quick->item);
        if (value != Py_None) {
            if (!zpy_scalar_convert_exact((zpy_scalar_kind)kind->element->scalar, value, &bits))
                return 0;
            quick->item.form = ZPYV_BITS;
            memcpy(quick->item.u.bits, &bits, sizeof bits);
        }
        out->form = ZPYV_ITEMS;
        out->count = value != Py_None;
        out->u.items = &quick->item;
        return 1;
    case ZPYV_STRING:
        return quick_string(kind, value, out, quick);
    case ZPYV_STRUCT: {
        /* A copy of a live value of the same bitwise kind (stage_whole's
           capture, into `quick`). */
        if (!(kind->flags & ZPYV_BITWISE) || kind->size > ZPYV_QUICK_BYTES ||
            !zpyv_check(rt->state, value))
            return 0;
        zpyv_value *source = (zpyv_value *)value;
        if (source->kind != kind || source->runtime != rt || source->address == NULL) return 0;
        out->form = ZPYV_BLOB;
        out->count = kind->size;
        if (kind->size > sizeof out->u.bits) {
            out->u.units = quick->u.bytes;
            memcpy(quick->u.bytes, source->address, kind->size);
        } else {
            memcpy(out->u.bits, source->address, kind->size);
        }
        return 1;
    }
    default:
        return 0;
    }
}

int zpyv_stage_labelled(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, zpyv_staged *out,
                        const char *label) {
    where at = {NULL, NULL, label};
    int leaf = stage_leaf(rt, kind, value, out, &at);
    if (leaf != 0) return leaf < 0 ? -1 : 0;
    return stage(rt, kind, value, out, &at);
}
