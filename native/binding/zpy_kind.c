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
        if (known == ZPYV_REGISTERING) {
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
    rt->types[kind->id] = ZPYV_REGISTERING;
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
