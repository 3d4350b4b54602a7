/* Kinds: the types of values (value.h). A kind says how a value is laid
 * out, which native type it is in each runtime, and how it is staged from
 * Python, emitted into native memory, captured from it and built back into
 * Python: the four operations of the marshalling rule.
 *
 * stage (phase 1) runs Python code and touches no native memory except the
 * runtime's name table (names are permanent). emit and capture run no
 * Python code: they allocate with PyMem only and call the native heap.
 * build runs Python code on private copies.
 */
#include "value.h"

#include <stdbool.h>
#include <structmember.h>

/* The most entries a container may stage (the heap's own limit). */
#define MAX_ENTRIES (1u << 30)

/* =========================================================================
 * The Kind type
 * ========================================================================= */

int zpyv_is_kind(zpy_core_state *state, PyObject *object) {
    return Py_IS_TYPE(object, state->kind_type);
}

/* Kind(code, size, align, native_kind, what, *, scalar, unit, flags, element,
 *      value, value_offset, entry_size, cls, encode, decode, struct_name, image) */
static PyObject *kind_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"code",         "size",       "align", "native_kind", "what",
                               "scalar",       "unit",       "flags", "element",     "value",
                               "value_offset", "entry_size", "cls",   "encode",      "decode",
                               "struct_name",  "image",      NULL};
    unsigned int code, size, align, native_kind, scalar = 0, unit = 0, flags = 0;
    unsigned int value_offset = 0, entry_size = 0;
    PyObject *what, *element = Py_None, *value = Py_None, *cls = Py_None, *encode = Py_None;
    PyObject *decode = Py_None, *struct_name = Py_None, *image = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "IIIIU|$IIIOOIIOOOOO:Kind", keywords, &code,
                                     &size, &align, &native_kind, &what, &scalar, &unit, &flags,
                                     &element, &value, &value_offset, &entry_size, &cls, &encode,
                                     &decode, &struct_name, &image))
        return NULL;
    zpy_core_state *state = zpy_state_of_type(type);
    if (code == 0 || code >= ZPYV_CODES || align == 0 || (align & (align - 1)) != 0 || align > 16 ||
        (size % align) != 0 || size > (1u << 24) ||
        (code == ZPYV_SCALAR && scalar >= ZPY_SCALAR_KINDS) || (code == ZPYV_PLAIN && size > 16) ||
        (code == ZPYV_STRING && unit != 1 && unit != 2)) {
        PyErr_SetString(PyExc_ValueError, "Kind: inconsistent layout");
        return NULL;
    }
    if ((element != Py_None && !zpyv_is_kind(state, element)) ||
        (value != Py_None && !zpyv_is_kind(state, value)) ||
        (cls != Py_None && !PyType_Check(cls)) ||
        (struct_name != Py_None && !PyBytes_Check(struct_name)) ||
        (image != Py_None && (!PyBytes_Check(image) || (size_t)PyBytes_GET_SIZE(image) > size))) {
        PyErr_SetString(PyExc_TypeError, "Kind: bad element, value, cls, struct_name or image");
        return NULL;
    }
    int container = code == ZPYV_ARRAY || code == ZPYV_SET || code == ZPYV_MAP ||
                    code == ZPYV_OPTIONAL;
    if (container != (element != Py_None) || (code == ZPYV_MAP) != (value != Py_None) ||
        ((flags & ZPYV_VIEW) && cls == Py_None) ||
        (code == ZPYV_STRUCT && struct_name == Py_None)) {
        PyErr_SetString(PyExc_ValueError, "Kind: element, value, cls or struct_name missing");
        return NULL;
    }
    zpyv_kind *kind = (zpyv_kind *)type->tp_alloc(type, 0);
    if (kind == NULL) return NULL;
    kind->id = state->kind_count++;
    kind->code = (uint8_t)code;
    kind->scalar = (uint8_t)scalar;
    kind->unit = (uint8_t)unit;
    kind->native_kind = (uint8_t)native_kind;
    kind->flags = flags;
    kind->size = size;
    kind->align = align;
    kind->value_offset = value_offset;
    kind->entry_size = entry_size;
    kind->element = element != Py_None ? (zpyv_kind *)Py_NewRef(element) : NULL;
    kind->value = value != Py_None ? (zpyv_kind *)Py_NewRef(value) : NULL;
    kind->cls = cls != Py_None ? (PyTypeObject *)Py_NewRef(cls) : NULL;
    kind->flags &= ~ZPYV_VALUE_CLASS; /* decided here, never taken from the caller */
    if (kind->cls != NULL && PyType_IsSubtype(kind->cls, state->value_type))
        kind->flags |= ZPYV_VALUE_CLASS;
    kind->what = Py_NewRef(what);
    kind->encode = encode != Py_None ? Py_NewRef(encode) : NULL;
    kind->decode = decode != Py_None ? Py_NewRef(decode) : NULL;
    kind->struct_name = struct_name != Py_None ? Py_NewRef(struct_name) : NULL;
    kind->image = image != Py_None ? Py_NewRef(image) : NULL;
    return (PyObject *)kind;
}

/* set_members([(name, offset, kind), ...]): a struct kind's members, once. */
static PyObject *kind_set_members(PyObject *self, PyObject *list) {
    zpyv_kind *kind = (zpyv_kind *)self;
    zpy_core_state *state = zpy_state_of_type(Py_TYPE(self));
    if (kind->code != ZPYV_STRUCT || kind->members_set || !PyList_CheckExact(list)) {
        PyErr_SetString(PyExc_TypeError, "set_members: once, on a struct kind, with a list");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(list);
    zpyv_member *members = PyMem_Calloc(count ? (size_t)count : 1, sizeof *members);
    if (members == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *row = PyList_GET_ITEM(list, i), *name, *member;
        unsigned int offset;
        if (!PyTuple_CheckExact(row) || !PyArg_ParseTuple(row, "UIO", &name, &offset, &member) ||
            !zpyv_is_kind(state, member) || offset + ((zpyv_kind *)member)->size > kind->size ||
            offset % ((zpyv_kind *)member)->align != 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "set_members: a member outside the struct");
            for (Py_ssize_t k = 0; k < i; k++) {
                Py_DECREF(members[k].name);
                Py_DECREF(members[k].kind);
            }
            PyMem_Free(members);
            return NULL;
        }
        members[i].name = Py_NewRef(name);
        members[i].kind = (zpyv_kind *)Py_NewRef(member);
        members[i].offset = offset;
    }
    kind->members = members;
    kind->member_count = (uint32_t)count;
    kind->members_set = 1;
    Py_RETURN_NONE;
}

static int kind_traverse(PyObject *self, visitproc visit, void *arg) {
    zpyv_kind *kind = (zpyv_kind *)self;
    Py_VISIT(kind->element);
    Py_VISIT(kind->value);
    Py_VISIT(kind->cls);
    Py_VISIT(kind->encode);
    Py_VISIT(kind->decode);
    for (uint32_t i = 0; i < kind->member_count; i++) Py_VISIT(kind->members[i].kind);
    Py_VISIT(Py_TYPE(self));
    return 0;
}

static int kind_clear(PyObject *self) {
    zpyv_kind *kind = (zpyv_kind *)self;
    Py_CLEAR(kind->element);
    Py_CLEAR(kind->value);
    Py_CLEAR(kind->cls);
    Py_CLEAR(kind->encode);
    Py_CLEAR(kind->decode);
    for (uint32_t i = 0; i < kind->member_count; i++) {
        Py_CLEAR(kind->members[i].name);
        Py_CLEAR(kind->members[i].kind);
    }
    return 0;
}

static void kind_dealloc(PyObject *self) {
    zpyv_kind *kind = (zpyv_kind *)self;
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    kind_clear(self);
    PyMem_Free(kind->members);
    Py_CLEAR(kind->what);
    Py_CLEAR(kind->struct_name);
    Py_CLEAR(kind->image);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyObject *kind_repr(PyObject *self) {
    return PyUnicode_FromFormat("<Kind %U>", ((zpyv_kind *)self)->what);
}

static PyMemberDef kind_members[] = {
    {"id", T_UINT, offsetof(zpyv_kind, id), READONLY, "Index of the runtimes' native type caches."},
    {"code", T_UBYTE, offsetof(zpyv_kind, code), READONLY, "The kind's code (zpyv_code)."},
    {"size", T_UINT, offsetof(zpyv_kind, size), READONLY, "Bytes of a value."},
    {"align", T_UINT, offsetof(zpyv_kind, align), READONLY, "Alignment of a value."},
    {"entry_size", T_UINT, offsetof(zpyv_kind, entry_size), READONLY,
     "Containers: bytes per entry."},
    {"value_offset", T_UINT, offsetof(zpyv_kind, value_offset), READONLY,
     "Maps: the value in an entry; optionals: the flag."},
    {"flags", T_UINT, offsetof(zpyv_kind, flags), READONLY, "ZSV_* flags."},
    {"what", T_OBJECT, offsetof(zpyv_kind, what), READONLY, "The type's name for messages."},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef kind_methods[] = {
    {"set_members", kind_set_members, METH_O, "A struct kind's members, once."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot kind_slots[] = {
    {Py_tp_doc, "One type of value: layout, native type, and conversion to and from Python."},
    {Py_tp_new, kind_new},
    {Py_tp_dealloc, kind_dealloc},
    {Py_tp_traverse, kind_traverse},
    {Py_tp_clear, kind_clear},
    {Py_tp_repr, kind_repr},
    {Py_tp_members, kind_members},
    {Py_tp_methods, kind_methods},
    {0, NULL},
};

static PyType_Spec kind_spec = {
    .name = "zsharp_py._core.Kind",
    .basicsize = sizeof(zpyv_kind),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = kind_slots,
};

int zpyv_add_kind_type(PyObject *module, zpy_core_state *state) {
    state->kind_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &kind_spec, NULL);
    if (state->kind_type == NULL ||
        PyModule_AddObjectRef(module, "Kind", (PyObject *)state->kind_type) < 0)
        return -1;
    /* The codes and flags of kinds, for Python to describe its types with. */
    static const struct {
        const char *name;
        long value;
    } constants[] = {
        {"KIND_SCALAR", ZPYV_SCALAR},
        {"KIND_OBJECT", ZPYV_OBJECT},
        {"KIND_WEAK", ZPYV_WEAK},
        {"KIND_NAME", ZPYV_NAME},
        {"KIND_STRING", ZPYV_STRING},
        {"KIND_STRUCT", ZPYV_STRUCT},
        {"KIND_ARRAY", ZPYV_ARRAY},
        {"KIND_SET", ZPYV_SET},
        {"KIND_MAP", ZPYV_MAP},
        {"KIND_OPTIONAL", ZPYV_OPTIONAL},
        {"KIND_PLAIN", ZPYV_PLAIN},
        {"KIND_DELEGATE", ZPYV_DELEGATE},
        {"KIND_MULTICAST", ZPYV_MULTICAST},
        {"KIND_SPARSE", ZPYV_SPARSE},
        {"KIND_VIEW", ZPYV_VIEW},
        {"KIND_BITWISE", ZPYV_BITWISE},
        {"KIND_UTF16", ZPYV_UTF16},
        {"KIND_ASCII", ZPYV_ASCII},
        {"SCALAR_BOOL", ZPY_SCALAR_BOOL},
        {"SCALAR_I8", ZPY_SCALAR_I8},
        {"SCALAR_I16", ZPY_SCALAR_I16},
        {"SCALAR_I32", ZPY_SCALAR_I32},
        {"SCALAR_I64", ZPY_SCALAR_I64},
        {"SCALAR_U8", ZPY_SCALAR_U8},
        {"SCALAR_U16", ZPY_SCALAR_U16},
        {"SCALAR_U32", ZPY_SCALAR_U32},
        {"SCALAR_U64", ZPY_SCALAR_U64},
        {"SCALAR_F32", ZPY_SCALAR_F32},
        {"SCALAR_F64", ZPY_SCALAR_F64},
    };
    for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++)
        if (PyModule_AddIntConstant(module, constants[i].name, constants[i].value) < 0) return -1;
    return 0;
}

/* =========================================================================
 * Native types and refusals
 * ========================================================================= */

#define REGISTERING ((const zs_type *)(uintptr_t)1)

/* Grow the runtime's types-by-kind table so that `id` fits. */
static int types_reserve(zpy_runtime_core *rt, uint32_t id) {
    if (id < rt->type_capacity) return 0;
    uint32_t capacity = rt->type_capacity ? rt->type_capacity : 64;
    while (capacity <= id) capacity *= 2;
    const zs_type **grown = PyMem_Realloc(rt->types, capacity * sizeof *grown);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memset(grown + rt->type_capacity, 0, (capacity - rt->type_capacity) * sizeof *grown);
    rt->types = grown;
    rt->type_capacity = capacity;
    return 0;
}

const zs_type *zpyv_native_type(zpy_runtime_core *rt, zpyv_kind *kind) {
    if (kind->id < rt->type_capacity) {
        const zs_type *known = rt->types[kind->id];
        if (known == REGISTERING) {
            PyErr_Format(PyExc_TypeError,
                         "%U contains itself (through a container): values cannot be "
                         "recursive; refer to an object (an object reference) instead",
                         kind->what);
            return NULL;
        }
        if (known != NULL) return known;
    }
    if (rt->native == NULL) {
        PyErr_SetString(rt->state->expired_exception, "the runtime has been closed");
        return NULL;
    }
    if (types_reserve(rt, kind->id) < 0) return NULL;
    rt->types[kind->id] = REGISTERING;
    const zs_type *out = NULL;
    zs_status status = ZS_OK;
    switch (kind->code) {
    case ZPYV_STRUCT: {
        if (!kind->members_set) {
            PyErr_Format(PyExc_TypeError, "%U is not laid out yet", kind->what);
            rt->types[kind->id] = NULL;
            return NULL;
        }
        zs_type_member *members = PyMem_Calloc(kind->member_count + 1, sizeof *members);
        if (members == NULL) {
            rt->types[kind->id] = NULL;
            PyErr_NoMemory();
            return NULL;
        }
        for (uint32_t i = 0; i < kind->member_count; i++) {
            members[i].offset = kind->members[i].offset;
            members[i].type = zpyv_native_type(rt, kind->members[i].kind);
            if (members[i].type == NULL) {
                PyMem_Free(members);
                rt->types[kind->id] = NULL;
                return NULL;
            }
        }
        status = zs_type_struct(rt->native, PyBytes_AS_STRING(kind->struct_name), kind->size,
                                kind->align, members, kind->member_count, &out);
        PyMem_Free(members);
        break;
    }
    case ZPYV_ARRAY:
    case ZPYV_SET:
    case ZPYV_MAP:
    case ZPYV_OPTIONAL: {
        const zs_type *element = zpyv_native_type(rt, kind->element);
        const zs_type *value = element && kind->value ? zpyv_native_type(rt, kind->value) : NULL;
        if (element == NULL || (kind->value != NULL && value == NULL)) {
            rt->types[kind->id] = NULL;
            return NULL;
        }
        status = zs_type_container(rt->native, (zs_type_kind)kind->native_kind, element, value,
                                   &out);
        /* The kind's layout is written in place by this file (optionals of
           bitwise values, zpyv_emit): it must be the native one. */
        if (status == ZS_OK && (zs_type_size(out) != kind->size ||
                                (kind->code != ZPYV_ARRAY && kind->code != ZPYV_SET &&
                                 zs_type_value_offset(out) != kind->value_offset))) {
            rt->types[kind->id] = NULL;
            PyErr_Format(PyExc_SystemError, "%U: layout differs from the native library's",
                         kind->what);
            return NULL;
        }
        break;
    }
    case ZPYV_STRING:
        status = zs_type_basic(rt->native, ZS_TYPE_STRING, kind->unit, 0, &out);
        break;
    default:
        status = zs_type_basic(rt->native, (zs_type_kind)kind->native_kind, kind->size, kind->align,
                               &out);
        break;
    }
    rt->types[kind->id] = status == ZS_OK ? out : NULL;
    if (status != ZS_OK) {
        zpyv_refused(rt, status, kind->what);
        return NULL;
    }
    return out;
}

void zpyv_initialize(const zpyv_kind *kind, char *dst) {
    if (kind->code == ZPYV_STRUCT && kind->image != NULL)
        memcpy(dst, PyBytes_AS_STRING(kind->image), (size_t)PyBytes_GET_SIZE(kind->image));
}

zs_status zpyv_writable(zpy_runtime_core *rt, zs_ref owner) {
    if (owner == ZS_NULL_REF || !zpy_dying_window(rt)) return ZS_OK;
    return zs_object_writable(rt->native, owner);
}

PyObject *zpyv_refused(zpy_runtime_core *rt, zs_status status, PyObject *what) {
    return zpy_call_raise_status(rt->state, status, what, rt);
}

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

/* =========================================================================
 * Phase 2: emit (no Python code)
 * ========================================================================= */

/* Build a value of `kind` from a staged one in zeroed memory at `tmp`, held by
 * no owner (a temporary): no Python code. On failure `tmp` is left valid
 * (the caller clears it). */
static zs_status build_native(zpy_runtime_core *rt, zpyv_kind *kind, const zpyv_staged *staged,
                              char *tmp);

/* A zeroed temporary of `kind`'s size (PyMem; aligned for any kind). */
static char *temporary(zpyv_kind *kind) { return PyMem_Calloc(1, kind->size ? kind->size : 1); }

/* Clear and free a temporary. */
static void temporary_free(zpy_runtime_core *rt, const zs_type *type, char *tmp) {
    if (tmp == NULL) return;
    if (type != NULL) zs_value_clear(rt->native, ZS_NULL_REF, type, tmp);
    PyMem_Free(tmp);
}

/* The native type of a kind already registered in `rt` (staging or the
 * destination's own creation registered it), else NULL: no Python code. */
static const zs_type *known_type(zpy_runtime_core *rt, zpyv_kind *kind) {
    if (kind->id < rt->type_capacity) {
        const zs_type *type = rt->types[kind->id];
        return type == REGISTERING ? NULL : type;
    }
    return NULL;
}

/* Emit into a struct: members staged one by one (absent ones kept). */
static zs_status emit_members(zpy_runtime_core *rt, zpyv_kind *kind, const zpyv_staged *staged,
                              zs_ref owner, char *dst) {
    for (uint32_t i = 0; i < kind->member_count && i < staged->count; i++) {
        const zpyv_staged *item = &staged->u.items[i];
        if (item->form == ZPYV_ABSENT) continue;
        zs_status status = zpyv_emit(rt, kind->members[i].kind, item, owner,
                                     dst + kind->members[i].offset);
        if (status != ZS_OK) return status;
    }
    return ZS_OK;
}

/* Whether a staged value gives every member of its struct, recursively: an
 * ABSENT member (or one of a nested struct) keeps the destination's value. */
static bool staged_whole(const zpyv_kind *kind, const zpyv_staged *staged) {
    if (kind->code != ZPYV_STRUCT) return staged->form != ZPYV_ABSENT;
    if (staged->form == ZPYV_BLOB) return true;
    if (staged->form != ZPYV_ITEMS || staged->count < kind->member_count) return false;
    for (uint32_t i = 0; i < kind->member_count; i++)
        if (!staged_whole(kind->members[i].kind, &staged->u.items[i])) return false;
    return true;
}

/* Emit into a zs_binding list (a MULTICAST array, or a sparse's). */
static zs_status emit_binding_list(zpy_runtime_core *rt, const zpyv_staged *staged, zs_ref owner,
                                   zs_array *list) {
    for (uint32_t i = 0; i < staged->count; i++) {
        const zpyv_binding *binding = &staged->u.bindings[i];
        uint32_t id = binding->callable ? zpyv_callable_id(rt, binding->callable) : 0;
        if (binding->callable != NULL && id == 0) return ZS_E_NOMEM;
        zs_status status = zs_multicast_add(rt->native, owner, list,
                                            binding->callable ? ZS_NULL_REF : binding->object,
                                            binding->callable ? 0 : binding->function_name, id);
        zpyv_callable_done(rt, id);
        if (status != ZS_OK) return status;
    }
    return ZS_OK;
}

static zs_status build_native(zpy_runtime_core *rt, zpyv_kind *kind, const zpyv_staged *staged,
                              char *tmp) {
    const zs_type *type = known_type(rt, kind);
    if (type == NULL) return ZS_E_INVALID;
    switch (kind->code) {
    case ZPYV_STRUCT:
        return emit_members(rt, kind, staged, ZS_NULL_REF, tmp);
    case ZPYV_ARRAY: {
        zs_array *array = (zs_array *)tmp;
        if (staged->form == ZPYV_PACKED)
            return zs_array_assign(rt->native, ZS_NULL_REF, type, array, staged->u.units,
                                   staged->count);
        zs_status status = zs_array_insert(rt->native, ZS_NULL_REF, type, array, 0, NULL,
                                           staged->count);
        for (uint32_t i = 0; status == ZS_OK && i < staged->count; i++) {
            char *slot = (char *)array->data + (size_t)i * kind->entry_size;
            zpyv_initialize(kind->element, slot);
            status = zpyv_emit(rt, kind->element, &staged->u.items[i], ZS_NULL_REF, slot);
        }
        return status;
    }
    case ZPYV_SET:
    case ZPYV_MAP: {
        zs_hash *hash = (zs_hash *)tmp;
        const zs_type *key_type = known_type(rt, kind->element);
        char *key = temporary(kind->element);
        zs_status status = key == NULL || key_type == NULL ? ZS_E_NOMEM : ZS_OK;
        uint32_t step = kind->code == ZPYV_MAP ? 2 : 1;
        for (uint32_t i = 0; status == ZS_OK && i < staged->count; i++) {
            status = zpyv_emit(rt, kind->element, &staged->u.items[step * i], ZS_NULL_REF, key);
            uint32_t index = 0;
            int added = 0;
            if (status == ZS_OK)
                status = zs_hash_add(rt->native, ZS_NULL_REF, type, hash, key, &index, &added);
            if (status == ZS_OK && step == 2) {
                char *slot = (char *)hash->entries.data + (size_t)index * kind->entry_size +
                             kind->value_offset;
                if (added) zpyv_initialize(kind->value, slot);
                status = zpyv_emit(rt, kind->value, &staged->u.items[2 * i + 1], ZS_NULL_REF, slot);
            }
            if (key_type != NULL && key != NULL)
                zs_value_clear(rt->native, ZS_NULL_REF, key_type, key);
        }
        PyMem_Free(key);
        return status;
    }
    case ZPYV_OPTIONAL: {
        if (staged->count == 0) return ZS_OK;
        zs_status status = zs_optional_set(rt->native, ZS_NULL_REF, type, tmp, NULL);
        if (status == ZS_OK) zpyv_initialize(kind->element, tmp);
        return status != ZS_OK
                   ? status
                   : zpyv_emit(rt, kind->element, &staged->u.items[0], ZS_NULL_REF, tmp);
    }
    case ZPYV_DELEGATE: {
        if (staged->count == 0) return ZS_OK;
        const zpyv_binding *binding = &staged->u.bindings[0];
        uint32_t id = binding->callable ? zpyv_callable_id(rt, binding->callable) : 0;
        if (binding->callable != NULL && id == 0) return ZS_E_NOMEM;
        zs_status status = zs_binding_set(rt->native, ZS_NULL_REF, (zs_binding *)tmp,
                                          binding->callable ? ZS_NULL_REF : binding->object,
                                          binding->callable ? 0 : binding->function_name, id);
        zpyv_callable_done(rt, id);
        return status;
    }
    case ZPYV_MULTICAST:
        return emit_binding_list(rt, staged, ZS_NULL_REF, (zs_array *)tmp);
    case ZPYV_SPARSE: {
        if (staged->count == 0) return ZS_OK;
        zs_array *list = NULL;
        zs_status status = zs_sparse_bindings(rt->native, ZS_NULL_REF, tmp, 1, &list);
        return status != ZS_OK ? status : emit_binding_list(rt, staged, ZS_NULL_REF, list);
    }
    default:
        return zpyv_emit(rt, kind, staged, ZS_NULL_REF, tmp);
    }
}

zs_status zpyv_emit(zpy_runtime_core *rt, zpyv_kind *kind, const zpyv_staged *staged, zs_ref owner,
                    char *dst) {
    if (rt->native == NULL || rt->closing) return ZS_E_STALE;
    switch (kind->code) {
    case ZPYV_SCALAR:
    case ZPYV_PLAIN:
    case ZPYV_NAME: {
        assert(staged->form == ZPYV_BITS);
        zs_status status = zpyv_writable(rt, owner);
        if (status == ZS_OK) memcpy(dst, staged->u.bits, kind->size);
        return status;
    }
    case ZPYV_OBJECT:
    case ZPYV_WEAK: {
        zs_ref handle;
        memcpy(&handle, staged->u.bits, sizeof handle);
        const zs_type *type = known_type(rt, kind);
        if (type == NULL) return ZS_E_INVALID;
        return zs_value_store_ref(rt->native, owner, type, (zs_ref *)dst, handle);
    }
    case ZPYV_STRING: {
        const zs_type *type = known_type(rt, kind);
        if (type == NULL) return ZS_E_INVALID;
        return zs_string_assign(rt->native, owner, type, (zs_string *)dst, staged->u.units,
                                staged->count);
    }
    default:
        break;
    }
    if (staged->form == ZPYV_PACKED) { /* an array of elements that own nothing: in one call */
        const zs_type *type = known_type(rt, kind);
        return type == NULL ? ZS_E_INVALID
                            : zs_array_assign(rt->native, owner, type, (zs_array *)dst,
                                              staged->u.units, staged->count);
    }
    /* An optional of a value that owns nothing is written in place, as a
       scalar is: the value, then its "is set" flag (zsharp.h). */
    if (kind->code == ZPYV_OPTIONAL && (kind->element->flags & ZPYV_BITWISE) &&
        (staged->count == 0 || staged->u.items[0].form == ZPYV_BITS ||
         staged->u.items[0].form == ZPYV_BLOB)) {
        const zs_type *type = known_type(rt, kind);
        zs_status status = type == NULL ? ZS_E_INVALID : zpyv_writable(rt, owner);
        if (status != ZS_OK) return status;
        const zpyv_staged *item = &staged->u.items[0];
        if (staged->count == 0) memset(dst, 0, kind->element->size);
        else
            memcpy(dst, item->form == ZPYV_BLOB ? zpyv_blob(item) : (const char *)item->u.bits,
                   kind->element->size);
        dst[kind->value_offset] = staged->count != 0;
        return ZS_OK;
    }
    /* Everything else: built whole in a temporary, then assigned in one
       native call (all or nothing); a bitwise struct is written in place. */
    if (kind->code == ZPYV_STRUCT && (kind->flags & ZPYV_BITWISE)) {
        zs_status status = zpyv_writable(rt, owner);
        if (status == ZS_OK && staged->form == ZPYV_BLOB)
            memcpy(dst, zpyv_blob(staged), kind->size);
        else if (status == ZS_OK) status = emit_members(rt, kind, staged, ZS_NULL_REF, dst);
        return status;
    }
    const zs_type *type = known_type(rt, kind);
    if (type == NULL) return ZS_E_INVALID;
    char *tmp = temporary(kind);
    if (tmp == NULL) return ZS_E_NOMEM;
    zs_status status = ZS_OK;
    /* Members not staged keep their values, so the temporary starts as a
       copy of the destination; only then, because the copy passes the
       write barrier: during a mark it would mark every object the old value
       names, and an object unreachable but for its own old value would
       survive the cycle. */
    if (kind->code == ZPYV_STRUCT && !staged_whole(kind, staged))
        status = zs_value_assign(rt->native, ZS_NULL_REF, type, tmp, dst);
    if (status == ZS_OK) status = build_native(rt, kind, staged, tmp);
    if (status == ZS_OK) status = zs_value_assign(rt->native, owner, type, dst, tmp);
    temporary_free(rt, type, tmp);
    return status;
}

/* The status the native store gives one object reference now. */
static zs_status reference_status(zpy_runtime_core *rt, zs_ref handle) {
    if (handle == ZS_NULL_REF) return ZS_OK;
    /* Exists and is not dying: what zs_value_store_ref asks of a target too. */
    return zs_object_writable(rt->native, handle);
}

zs_status zpyv_references_valid(zpy_runtime_core *rt, zpyv_kind *kind, const zpyv_staged *staged) {
    if (rt->native == NULL || rt->closing) return ZS_E_STALE;
    if (kind->flags & ZPYV_BITWISE) return ZS_OK; /* no references */
    zs_status status = ZS_OK;
    switch (kind->code) {
    case ZPYV_OBJECT:
    case ZPYV_WEAK: {
        zs_ref handle;
        memcpy(&handle, staged->u.bits, sizeof handle);
        return reference_status(rt, handle);
    }
    case ZPYV_STRUCT:
        for (uint32_t i = 0; staged->form == ZPYV_ITEMS && status == ZS_OK &&
                             i < kind->member_count && i < staged->count;
             i++)
            if (staged->u.items[i].form != ZPYV_ABSENT)
                status = zpyv_references_valid(rt, kind->members[i].kind, &staged->u.items[i]);
        return status;
    case ZPYV_ARRAY:
    case ZPYV_SET:
    case ZPYV_MAP:
    case ZPYV_OPTIONAL: {
        if (staged->form == ZPYV_PACKED) {
            uint8_t code = kind->element->code;
            for (uint32_t i = 0;
                 (code == ZPYV_OBJECT || code == ZPYV_WEAK) && status == ZS_OK && i < staged->count;
                 i++) {
                zs_ref handle;
                memcpy(&handle, (const char *)staged->u.units + (size_t)i * kind->entry_size,
                       sizeof handle);
                status = reference_status(rt, handle);
            }
            return status;
        }
        if (staged->form != ZPYV_ITEMS) return ZS_OK;
        uint32_t step = kind->code == ZPYV_MAP ? 2 : 1;
        for (uint32_t i = 0; status == ZS_OK && i < staged->count; i++) {
            status = zpyv_references_valid(rt, kind->element, &staged->u.items[step * i]);
            if (status == ZS_OK && step == 2)
                status = zpyv_references_valid(rt, kind->value, &staged->u.items[2 * i + 1]);
        }
        return status;
    }
    default:
        return ZS_OK; /* delegate bindings: the native side takes any object handle */
    }
}

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

/* Runtime._preset_native_type(kind, address): make `kind` (a struct kind)
 * use a native type the host registered (zs_struct_register) in this
 * runtime, instead of registering its own: values of a host's struct, and
 * containers of them, are then of the very types the host's classes hold.
 * Refused when the kind already has a type here or the sizes differ. */
PyObject *zpyv_runtime_preset_native_type(PyObject *self, PyObject *args) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    PyObject *kind_object;
    unsigned long long address;
    if (!PyArg_ParseTuple(args, "OK:_preset_native_type", &kind_object, &address)) return NULL;
    if (!zpyv_is_kind(rt->state, kind_object) || ((zpyv_kind *)kind_object)->code != ZPYV_STRUCT) {
        PyErr_SetString(PyExc_TypeError, "_preset_native_type: a struct Kind");
        return NULL;
    }
    zpyv_kind *kind = (zpyv_kind *)kind_object;
    const zs_type *type = (const zs_type *)(uintptr_t)address;
    if (rt->native == NULL) {
        PyErr_SetString(rt->state->expired_exception, "the runtime has been closed");
        return NULL;
    }
    if (zs_type_size(type) != kind->size) {
        PyErr_Format(PyExc_TypeError, "%U: the native struct is %u bytes, its description says %zd",
                     kind->what, zs_type_size(type), (Py_ssize_t)kind->size);
        return NULL;
    }
    if (kind->id < rt->type_capacity && rt->types[kind->id] != NULL) {
        if (rt->types[kind->id] == type) Py_RETURN_NONE;
        PyErr_Format(PyExc_TypeError, "%U already has a native type in this runtime", kind->what);
        return NULL;
    }
    if (types_reserve(rt, kind->id) < 0) return NULL;
    rt->types[kind->id] = type;
    Py_RETURN_NONE;
}
