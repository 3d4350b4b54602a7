/* Copy out (value.h): capture native data into a staged value (no Python
 * code), then build Python objects from it; releasing a staged value; and
 * zpyv_copy_out, a view's plain copy.
 */
#include "value.h"
#include <structmember.h>

/* =========================================================================
 * Copy out: capture (no Python code), then build
 * ========================================================================= */

int zpyv_capture(zpy_runtime_core *rt, zpyv_kind *kind, const char *src, zpyv_staged *out) {
    (void)rt;
    switch (kind->code) {
    case ZPYV_SCALAR:
    case ZPYV_PLAIN:
    case ZPYV_NAME:
    case ZPYV_OBJECT:
    case ZPYV_WEAK:
        out->form = ZPYV_BITS;
        memcpy(out->u.bits, src, kind->size);
        return 0;
    case ZPYV_STRING: {
        const zs_string *string = (const zs_string *)src;
        size_t bytes = (size_t)string->length * kind->unit;
        void *copy = PyMem_Malloc(bytes ? bytes : 1);
        if (copy == NULL) return -1;
        if (bytes) memcpy(copy, string->data, bytes);
        out->form = ZPYV_UNITS;
        out->count = string->length;
        out->u.units = copy;
        return 0;
    }
    case ZPYV_STRUCT: {
        if (kind->flags & ZPYV_BITWISE) {
            out->form = ZPYV_BLOB;
            out->count = kind->size;
            char *bytes = (char *)out->u.bits;
            if (kind->size > sizeof out->u.bits) {
                out->u.units = PyMem_Malloc(kind->size);
                if (out->u.units == NULL) return out->form = ZPYV_ABSENT, -1;
                bytes = out->u.units;
            }
            memcpy(bytes, src, kind->size);
            return 0;
        }
        zpyv_staged *items = PyMem_Calloc(kind->member_count ? kind->member_count : 1,
                                          sizeof *items);
        if (items == NULL) return -1;
        out->form = ZPYV_ITEMS;
        out->count = kind->member_count;
        out->u.items = items;
        for (uint32_t i = 0; i < kind->member_count; i++)
            if (zpyv_capture(rt, kind->members[i].kind, src + kind->members[i].offset, &items[i]) <
                0)
                return zpyv_release(kind, out), -1;
        return 0;
    }
    case ZPYV_ARRAY:
    case ZPYV_SET:
    case ZPYV_MAP: {
        const zs_array *entries = kind->code == ZPYV_ARRAY ? (const zs_array *)src
                                                           : &((const zs_hash *)src)->entries;
        if (zpyv_packable(kind)) {
            size_t bytes = (size_t)entries->count * kind->entry_size;
            out->u.units = PyMem_Malloc(bytes ? bytes : 1);
            if (out->u.units == NULL) return -1;
            if (bytes) memcpy(out->u.units, entries->data, bytes);
            out->form = ZPYV_PACKED;
            out->count = entries->count;
            return 0;
        }
        uint32_t step = kind->code == ZPYV_MAP ? 2 : 1;
        zpyv_staged *items = PyMem_Calloc(entries->count ? (size_t)entries->count * step : 1,
                                          sizeof *items);
        if (items == NULL) return -1;
        out->form = ZPYV_ITEMS;
        out->count = entries->count;
        out->u.items = items;
        for (uint32_t i = 0; i < entries->count; i++) {
            const char *entry = (const char *)entries->data + (size_t)i * kind->entry_size;
            if (zpyv_capture(rt, kind->element, entry, &items[step * i]) < 0 ||
                (step == 2 &&
                 zpyv_capture(rt, kind->value, entry + kind->value_offset, &items[2 * i + 1]) < 0))
                return zpyv_release(kind, out), -1;
        }
        return 0;
    }
    case ZPYV_OPTIONAL: {
        out->form = ZPYV_ITEMS;
        out->count = 0;
        if (!src[kind->value_offset]) return 0;
        out->u.items = PyMem_Calloc(1, sizeof *out->u.items);
        if (out->u.items == NULL) return -1;
        out->count = 1;
        if (zpyv_capture(rt, kind->element, src, &out->u.items[0]) < 0)
            return zpyv_release(kind, out), -1;
        return 0;
    }
    case ZPYV_DELEGATE:
    case ZPYV_MULTICAST:
    case ZPYV_SPARSE: {
        const zs_binding *data = NULL;
        uint32_t count = 0;
        if (kind->code == ZPYV_DELEGATE) {
            const zs_binding *one = (const zs_binding *)src;
            if (one->object != ZS_NULL_REF || one->callable != 0) {
                data = one;
                count = 1;
            }
        } else {
            const zs_array *list = kind->code == ZPYV_MULTICAST ? (const zs_array *)src
                                                                : *(const zs_array *const *)src;
            if (list != NULL) {
                data = list->data;
                count = list->count;
            }
        }
        zpyv_binding *bindings = PyMem_Calloc(count ? count : 1, sizeof *bindings);
        if (bindings == NULL) return -1;
        for (uint32_t i = 0; i < count; i++) {
            bindings[i].object = data[i].object;
            bindings[i].function_name = data[i].function_name;
            PyObject *callable = data[i].callable ? zpyv_callable_get(rt, data[i].callable) : NULL;
            bindings[i].callable = callable ? Py_NewRef(callable) : NULL;
        }
        out->form = ZPYV_BINDINGS;
        out->count = count;
        out->u.bindings = bindings;
        return 0;
    }
    default:
        return -1;
    }
}

/* A str from staged code units. */
static PyObject *build_string(zpyv_kind *kind, const zpyv_staged *staged) {
    Py_ssize_t bytes = (Py_ssize_t)staged->count * kind->unit;
    if (kind->flags & ZPYV_UTF16) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* With no surrogate, UTF-16 code units are the code points: the str
           is made from them directly, without the codec (which gives the
           same str, and is kept for pairs and the errors of lone ones). */
        const uint16_t *units = staged->u.units;
        uint32_t i = 0;
        while (i < staged->count && (units[i] < 0xD800 || units[i] > 0xDFFF)) i++;
        if (i == staged->count)
            return PyUnicode_FromKindAndData(PyUnicode_2BYTE_KIND, units, staged->count);
#endif
        int order = -1; /* little endian */
        return PyUnicode_DecodeUTF16(staged->u.units, bytes, "strict", &order);
    }
    if (kind->flags & ZPYV_ASCII) return PyUnicode_DecodeASCII(staged->u.units, bytes, "strict");
    return PyUnicode_DecodeUTF8(staged->u.units, bytes, "strict");
}

PyObject *zpyv_string_text(zpyv_kind *kind, const char *at) {
    const zs_string *string = (const zs_string *)at;
    size_t bytes = (size_t)string->length * kind->unit;
    char small[256]; /* most strings: no allocation for the copy */
    void *copy = bytes <= sizeof small ? small : PyMem_Malloc(bytes);
    if (copy == NULL) return PyErr_NoMemory();
    if (bytes) memcpy(copy, string->data, bytes);
    /* From here on the copy is private: making the str may run Python code. */
    zpyv_staged staged = {.form = ZPYV_UNITS, .count = string->length, .u.units = copy};
    PyObject *text = build_string(kind, &staged);
    if (copy != small) PyMem_Free(copy);
    return text;
}

/* A hashable form of a built key (a struct key, a dict, becomes the tuple of its values). */
static PyObject *hashable(PyObject *key) {
    if (PyDict_CheckExact(key)) {
        PyObject *values = PyDict_Values(key);
        PyObject *tuple = values ? PyList_AsTuple(values) : NULL;
        Py_XDECREF(values);
        return tuple;
    }
    return Py_NewRef(key);
}

PyObject *zpyv_build(zpy_runtime_core *rt, zpyv_kind *kind, const zpyv_staged *staged) {
    switch (kind->code) {
    case ZPYV_SCALAR:
        return zpy_scalar_load((zpy_scalar_kind)kind->scalar, (const char *)staged->u.bits);
    case ZPYV_OBJECT: {
        zs_ref handle;
        memcpy(&handle, staged->u.bits, sizeof handle);
        return zpy_conjugate_of(rt, handle);
    }
    case ZPYV_NAME: {
        uint32_t words[2];
        memcpy(words, staged->u.bits, sizeof words);
        return zpyv_name_make(rt, words[0], words[1]);
    }
    case ZPYV_WEAK:
    case ZPYV_PLAIN: {
        if (kind->code == ZPYV_WEAK && kind->decode != NULL && PyType_Check(kind->decode) &&
            PyType_IsSubtype((PyTypeObject *)kind->decode, rt->state->weak_type)) {
            /* The pointer class itself: made here, no Python call. */
            zs_ref handle;
            memcpy(&handle, staged->u.bits, sizeof handle);
            return zpy_weak_new((PyTypeObject *)kind->decode, rt, handle);
        }
        if (kind->decode == NULL)
            return PyErr_Format(PyExc_SystemError, "%U has no decoder", kind->what);
        PyObject *raw = kind->code == ZPYV_PLAIN
                            ? PyBytes_FromStringAndSize((const char *)staged->u.bits, kind->size)
                            : PyLong_FromUnsignedLongLong(
                                  *(const zs_ref *)(const void *)staged->u.bits);
        PyObject *result = raw ? PyObject_CallFunctionObjArgs(kind->decode, (PyObject *)rt, raw,
                                                              NULL)
                               : NULL;
        Py_XDECREF(raw);
        return result;
    }
    case ZPYV_STRING: {
        PyObject *text = build_string(kind, staged);
        if (text == NULL || kind->decode == NULL) return text;
        PyObject *result = PyObject_CallFunctionObjArgs(kind->decode, (PyObject *)rt, text, NULL);
        Py_DECREF(text);
        return result;
    }
    case ZPYV_STRUCT: {
        PyObject *dict = PyDict_New();
        for (uint32_t i = 0; dict != NULL && i < kind->member_count; i++) {
            PyObject *item;
            if (staged->form == ZPYV_BLOB) {
                zpyv_staged member = {0};
                const char *bytes = zpyv_blob(staged) + kind->members[i].offset;
                item = zpyv_capture(rt, kind->members[i].kind, bytes, &member) < 0
                           ? PyErr_NoMemory()
                           : zpyv_build(rt, kind->members[i].kind, &member);
                zpyv_release(kind->members[i].kind, &member);
            } else {
                item = zpyv_build(rt, kind->members[i].kind, &staged->u.items[i]);
            }
            if (item == NULL || PyDict_SetItem(dict, kind->members[i].name, item) < 0)
                Py_CLEAR(dict);
            Py_XDECREF(item);
        }
        if (dict == NULL || kind->decode == NULL) return dict;
        PyObject *result = PyObject_CallFunctionObjArgs(kind->decode, (PyObject *)rt, dict, NULL);
        Py_DECREF(dict);
        return result;
    }
    case ZPYV_ARRAY:
    case ZPYV_SET: {
        PyObject *list = PyList_New(staged->count);
        int scalars = staged->form == ZPYV_PACKED && kind->element->code == ZPYV_SCALAR;
        if (list != NULL && scalars && kind->element->scalar == ZPY_SCALAR_F64) {
            /* The common case, one loop: floats made straight from the doubles. */
            for (uint32_t i = 0; i < staged->count; i++) {
                double real;
                memcpy(&real, (const char *)staged->u.units + (size_t)i * sizeof real, sizeof real);
                PyObject *item = PyFloat_FromDouble(real);
                if (item == NULL) {
                    Py_DECREF(list);
                    return NULL;
                }
                PyList_SET_ITEM(list, i, item);
            }
            return list;
        }
        for (uint32_t i = 0; list != NULL && i < staged->count; i++) {
            zpyv_staged scratch;
            PyObject *item = scalars ? zpy_scalar_load((zpy_scalar_kind)kind->element->scalar,
                                                       (const char *)staged->u.units +
                                                           (size_t)i * kind->entry_size)
                                     : zpyv_build(rt, kind->element,
                                                  zpyv_element_at(kind, staged, i, &scratch));
            if (item == NULL) Py_CLEAR(list);
            else PyList_SET_ITEM(list, i, item);
        }
        if (list == NULL || kind->code == ZPYV_ARRAY) return list;
        PyObject *set = PySet_New(list);
        if (set == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear(); /* unhashable elements in Python: a list */
            return list;
        }
        Py_DECREF(list);
        return set;
    }
    case ZPYV_MAP: {
        PyObject *dict = PyDict_New();
        for (uint32_t i = 0; dict != NULL && i < staged->count; i++) {
            PyObject *key = zpyv_build(rt, kind->element, &staged->u.items[2 * i]);
            PyObject *usable = key ? hashable(key) : NULL;
            PyObject *item = usable ? zpyv_build(rt, kind->value, &staged->u.items[2 * i + 1])
                                    : NULL;
            if (item == NULL || PyDict_SetItem(dict, usable, item) < 0) Py_CLEAR(dict);
            Py_XDECREF(key);
            Py_XDECREF(usable);
            Py_XDECREF(item);
        }
        return dict;
    }
    case ZPYV_OPTIONAL:
        if (staged->count == 0) Py_RETURN_NONE;
        return zpyv_build(rt, kind->element, &staged->u.items[0]);
    case ZPYV_DELEGATE:
    case ZPYV_MULTICAST:
    case ZPYV_SPARSE: {
        PyObject *list = PyList_New(0);
        for (uint32_t i = 0; list != NULL && i < staged->count; i++) {
            const zpyv_binding *binding = &staged->u.bindings[i];
            PyObject *row = binding->callable
                                ? Py_BuildValue("(KIO)", 0ull, 0u, binding->callable)
                                : Py_BuildValue("(KIO)", (unsigned long long)binding->object,
                                                binding->function_name, Py_None);
            if (row == NULL || PyList_Append(list, row) < 0) Py_CLEAR(list);
            Py_XDECREF(row);
        }
        if (list == NULL || kind->decode == NULL) return list;
        PyObject *result = PyObject_CallFunctionObjArgs(kind->decode, (PyObject *)rt, list, NULL);
        Py_DECREF(list);
        return result;
    }
    default:
        return PyErr_Format(PyExc_SystemError, "unknown kind");
    }
}

void zpyv_release(zpyv_kind *kind, zpyv_staged *staged) {
    switch (staged->form) {
    case ZPYV_UNITS:
    case ZPYV_PACKED:
        PyMem_Free(staged->u.units);
        break;
    case ZPYV_BLOB:
        if (staged->count > sizeof staged->u.bits) PyMem_Free(staged->u.units);
        break;
    case ZPYV_ITEMS: {
        uint32_t count = staged->count;
        zpyv_kind *first = kind->element, *second = kind->value;
        if (kind->code == ZPYV_STRUCT)
            count = kind->member_count < staged->count ? kind->member_count : staged->count;
        for (uint32_t i = 0; staged->u.items != NULL && i < count; i++) {
            if (kind->code == ZPYV_STRUCT) {
                zpyv_release(kind->members[i].kind, &staged->u.items[i]);
            } else if (kind->code == ZPYV_MAP) {
                zpyv_release(first, &staged->u.items[2 * i]);
                zpyv_release(second, &staged->u.items[2 * i + 1]);
            } else {
                zpyv_release(first, &staged->u.items[i]);
            }
        }
        PyMem_Free(staged->u.items);
        break;
    }
    case ZPYV_BINDINGS:
        for (uint32_t i = 0; i < staged->count; i++) Py_XDECREF(staged->u.bindings[i].callable);
        PyMem_Free(staged->u.bindings);
        break;
    default:
        break;
    }
    memset(staged, 0, sizeof *staged);
}

PyObject *zpyv_copy_out(zpy_runtime_core *rt, zpyv_kind *kind, const char *at) {
    /* A scalar is the smallest capture: zpy_scalar_load copies its bytes into
       a C local before it makes the int or float. */
    if (kind->code == ZPYV_SCALAR) return zpy_scalar_load((zpy_scalar_kind)kind->scalar, at);
    zpyv_staged staged = {0};
    if (zpyv_capture(rt, kind, at, &staged) < 0) return PyErr_NoMemory();
    /* From here on the copy is private: building it may run Python code. */
    PyObject *result = zpyv_build(rt, kind, &staged);
    zpyv_release(kind, &staged);
    return result;
}
