/* Names (zs.Name): interned, case-insensitive for ASCII letters, with a
 * number suffix split off (native/src/names.c does the interning).
 *
 * Each runtime keeps the decoded text of every name it has shown Python
 * (names outlive nothing: they stay until the runtime is freed, and close()
 * decodes them all first, so expired objects can still be named), and a
 * bounded cache from exact str to interned name, so that a name used as a
 * set element or map key costs a dict lookup, not a native call.
 *
 * A name is staged (phase 1) by interning it: the text of a str, or of a str
 * subclass, is its own data, never what a subclass's methods return, so the
 * name table only ever receives valid UTF-8.
 */
#include "value.h"

#include <structmember.h>

/* Exact strings remembered per runtime (cleared when full). */
#define INTERNED_LIMIT 4096

/* In front of that dict, the exact strs interned last, one per slot of
 * their hash (direct-mapped): a str object a loop uses again (a literal,
 * an interned key) is found by identity, with no dict lookup and no int
 * unpacked. Each slot holds its str strongly, so identity stays meaningful;
 * replacing one drops an exact str, which runs no Python code. */
#define ZPYV_NAME_MEMO 256u

typedef struct zpyv_name_memo {
    PyObject *text; /* an exact str (strong), or NULL */
    uint32_t index, number;
} zpyv_name_memo;

typedef struct zpy_name {
    PyObject_HEAD zpy_runtime_core *runtime; /* strong */
    uint32_t index, number;
} zpy_name;

/* =========================================================================
 * Interning and text
 * ========================================================================= */

/* The decoded base text of name `index` (borrowed), or NULL with an error. */
static PyObject *base_text(zpy_runtime_core *rt, uint32_t index) {
    if (index < rt->name_count && rt->names[index] != NULL) return rt->names[index];
    if (rt->native == NULL) {
        PyErr_Format(PyExc_IndexError, "no name #%u in this runtime", index);
        return NULL;
    }
    const char *raw = zs_name_base(rt->native, index);
    if (raw == NULL) {
        PyErr_Format(PyExc_IndexError, "no name #%u in this runtime", index);
        return NULL;
    }
    PyObject *text = PyUnicode_DecodeUTF8(raw, (Py_ssize_t)strlen(raw), "replace");
    if (text == NULL) return NULL;
    if (index >= rt->name_capacity) {
        uint32_t capacity = rt->name_capacity ? rt->name_capacity : 256;
        while (capacity <= index) capacity *= 2;
        PyObject **grown = PyMem_Realloc(rt->names, capacity * sizeof *grown);
        if (grown == NULL) {
            Py_DECREF(text);
            PyErr_NoMemory();
            return NULL;
        }
        memset(grown + rt->name_capacity, 0, (capacity - rt->name_capacity) * sizeof *grown);
        rt->names = grown;
        rt->name_capacity = capacity;
    }
    if (index >= rt->name_count) rt->name_count = index + 1;
    rt->names[index] = text;
    return text;
}

/* The displayed text of a name: base, or base_<number - 1>. New reference. */
static PyObject *name_text(zpy_runtime_core *rt, uint32_t index, uint32_t number) {
    PyObject *base = base_text(rt, index);
    if (base == NULL) return NULL;
    if (number == 0) return Py_NewRef(base);
    return PyUnicode_FromFormat("%U_%u", base, number - 1);
}

/* Intern the text of a str (or subclass: its own data) in `rt`. */
int zpyv_intern(zpy_runtime_core *rt, PyObject *text, uint32_t *index, uint32_t *number,
                const char *what) {
    if (rt->native == NULL) {
        PyErr_SetString(rt->state->expired_exception, "the runtime has been closed");
        return -1;
    }
    int exact = PyUnicode_CheckExact(text);
    zpyv_name_memo *memo = NULL;
    if (exact) {
        /* An exact str's hash is its own (cached) and runs no Python code. */
        Py_hash_t hash = PyObject_Hash(text);
        if (hash == -1) return -1;
        if (rt->name_memo == NULL) {
            rt->name_memo = PyMem_Calloc(ZPYV_NAME_MEMO, sizeof *rt->name_memo);
            if (rt->name_memo == NULL) return PyErr_NoMemory(), -1;
        }
        memo = &rt->name_memo[(size_t)hash & (ZPYV_NAME_MEMO - 1)];
        if (memo->text == text) {
            *index = memo->index;
            *number = memo->number;
            return 0;
        }
    }
    if (exact && rt->interned != NULL) {
        PyObject *packed = PyDict_GetItemWithError(rt->interned, text);
        if (packed != NULL) {
            unsigned long long both = PyLong_AsUnsignedLongLong(packed);
            *index = (uint32_t)both;
            *number = (uint32_t)(both >> 32);
            memo->index = *index;
            memo->number = *number;
            Py_XSETREF(memo->text, Py_NewRef(text));
            return 0;
        }
        if (PyErr_Occurred()) return -1;
    }
    Py_ssize_t length;
    const char *data = PyUnicode_AsUTF8AndSize(text, &length);
    if (data == NULL) {
        PyObject *error = zpy_error_take();
        PyObject *reason = error ? PyObject_Str(error) : NULL;
        if (reason != NULL) PyErr_Format(PyExc_ValueError, "invalid %s %R: %U", what, text, reason);
        Py_XDECREF(reason);
        Py_XDECREF(error);
        return -1;
    }
    if (zs_name_intern(rt->native, data, (size_t)length, index, number) != ZS_OK) {
        PyErr_Format(PyExc_ValueError, "invalid %s %R (NUL characters or over 1024 bytes)", what,
                     text);
        return -1;
    }
    if (exact) {
        if (rt->interned == NULL || PyDict_GET_SIZE(rt->interned) >= INTERNED_LIMIT) {
            Py_XSETREF(rt->interned, PyDict_New());
            if (rt->interned == NULL) return -1;
        }
        PyObject *packed = PyLong_FromUnsignedLongLong(*index | (unsigned long long)*number << 32);
        if (packed == NULL || PyDict_SetItem(rt->interned, text, packed) < 0) {
            Py_XDECREF(packed);
            return -1;
        }
        Py_DECREF(packed);
        memo->index = *index;
        memo->number = *number;
        Py_XSETREF(memo->text, Py_NewRef(text));
    }
    return 0;
}

/* =========================================================================
 * The Name type
 * ========================================================================= */

PyObject *zpyv_name_make(zpy_runtime_core *rt, uint32_t index, uint32_t number) {
    PyTypeObject *cls = (PyTypeObject *)rt->state->name_class;
    if (cls == NULL) return PyErr_Format(PyExc_SystemError, "zs.Name is not configured");
    zpy_name *name = (zpy_name *)cls->tp_alloc(cls, 0);
    if (name == NULL) return NULL;
    name->runtime = (zpy_runtime_core *)Py_NewRef((PyObject *)rt);
    name->index = index;
    name->number = number;
    return (PyObject *)name;
}

int zpyv_name_stage(zpy_runtime_core *rt, PyObject *value, zpyv_staged *out, PyObject *what) {
    uint32_t words[2];
    if (PyUnicode_CheckExact(value)) { /* the commonest: no subtype walk */
        if (zpyv_intern(rt, value, &words[0], &words[1], "name") < 0) return -1;
    } else if (PyObject_TypeCheck(value, rt->state->name_type)) {
        zpy_name *name = (zpy_name *)value;
        if (name->runtime == rt) {
            words[0] = name->index;
            words[1] = name->number;
        } else {
            PyObject *text = name_text(name->runtime, name->index, name->number);
            int result = text ? zpyv_intern(rt, text, &words[0], &words[1], "name") : -1;
            Py_XDECREF(text);
            if (result < 0) return -1;
        }
    } else if (PyUnicode_Check(value)) {
        if (zpyv_intern(rt, value, &words[0], &words[1], "name") < 0) return -1;
    } else {
        if (what != NULL)
            PyErr_Format(PyExc_TypeError, "%U expects a Name or a str, not %s", what,
                         Py_TYPE(value)->tp_name);
        else
            PyErr_Format(PyExc_TypeError, "expected a Name or a str, not %s",
                         Py_TYPE(value)->tp_name);
        return -1;
    }
    out->form = ZPYV_BITS;
    memcpy(out->u.bits, words, sizeof words);
    return 0;
}

/* Name(text): intern `text` in the current runtime. */
static PyObject *name_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"text", NULL};
    PyObject *text;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:Name", keywords, &text)) return NULL;
    zpy_core_state *state = zpy_state_of_type(type);
    if (PyObject_TypeCheck(text, state->name_type)) {
        zpy_name *other = (zpy_name *)text;
        zpy_name *name = (zpy_name *)type->tp_alloc(type, 0);
        if (name != NULL) {
            name->runtime = (zpy_runtime_core *)Py_NewRef((PyObject *)other->runtime);
            name->index = other->index;
            name->number = other->number;
        }
        return (PyObject *)name;
    }
    if (!PyUnicode_Check(text))
        return PyErr_Format(PyExc_TypeError, "Name needs a str, not %s", Py_TYPE(text)->tp_name);
    PyObject *runtime = PyObject_CallNoArgs(state->current_runtime);
    if (runtime == NULL) return NULL;
    zpy_runtime_core *rt = (zpy_runtime_core *)runtime;
    uint32_t index, number;
    zpy_name *name = NULL;
    if (zpyv_intern(rt, text, &index, &number, "name") == 0 &&
        (name = (zpy_name *)type->tp_alloc(type, 0)) != NULL) {
        name->runtime = (zpy_runtime_core *)Py_NewRef(runtime);
        name->index = index;
        name->number = number;
    }
    Py_DECREF(runtime);
    return (PyObject *)name;
}

/* ASCII letters folded to lower case, as the native name table compares. */
static PyObject *folded(PyObject *text) {
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    int changes = 0;
    for (Py_ssize_t i = 0; i < length && !changes; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        changes = c >= 'A' && c <= 'Z';
    }
    if (!changes) return Py_NewRef(text);
    PyObject *copy = PyUnicode_New(length, PyUnicode_MAX_CHAR_VALUE(text));
    if (copy == NULL) return NULL;
    int copy_kind = PyUnicode_KIND(copy);
    void *copy_data = PyUnicode_DATA(copy);
    for (Py_ssize_t i = 0; i < length; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        PyUnicode_WRITE(copy_kind, copy_data, i, c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    return copy;
}

static PyObject *name_str(PyObject *self) {
    zpy_name *name = (zpy_name *)self;
    return name_text(name->runtime, name->index, name->number);
}

static PyObject *name_repr(PyObject *self) {
    PyObject *text = name_str(self);
    if (text == NULL) return NULL;
    PyObject *result = PyUnicode_FromFormat("Name(%R)", text);
    Py_DECREF(text);
    return result;
}

/* Names of one runtime compare by their interned entry; otherwise (another
 * runtime, a str) by their ASCII-folded text. */
static PyObject *name_richcompare(PyObject *self, PyObject *other, int op) {
    if (op != Py_EQ && op != Py_NE) Py_RETURN_NOTIMPLEMENTED;
    zpy_name *name = (zpy_name *)self;
    zpy_core_state *state = name->runtime->state;
    int equal;
    if (PyObject_TypeCheck(other, state->name_type) &&
        ((zpy_name *)other)->runtime == name->runtime) {
        equal = ((zpy_name *)other)->index == name->index &&
                ((zpy_name *)other)->number == name->number;
    } else if (PyObject_TypeCheck(other, state->name_type) || PyUnicode_Check(other)) {
        PyObject *mine = name_str(self);
        PyObject *theirs = PyUnicode_Check(other) ? Py_NewRef(other) : name_str(other);
        PyObject *a = mine ? folded(mine) : NULL, *b = theirs ? folded(theirs) : NULL;
        equal = a != NULL && b != NULL ? PyUnicode_Compare(a, b) == 0 : -1;
        Py_XDECREF(mine);
        Py_XDECREF(theirs);
        Py_XDECREF(a);
        Py_XDECREF(b);
        if (equal < 0 || PyErr_Occurred()) return NULL;
    } else {
        Py_RETURN_NOTIMPLEMENTED;
    }
    return PyBool_FromLong(op == Py_EQ ? equal : !equal);
}

static Py_hash_t name_hash(PyObject *self) {
    PyObject *text = name_str(self);
    PyObject *key = text ? folded(text) : NULL;
    Py_XDECREF(text);
    if (key == NULL) return -1;
    Py_hash_t hash = PyObject_Hash(key);
    Py_DECREF(key);
    return hash;
}

static void name_dealloc(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    Py_CLEAR(((zpy_name *)self)->runtime);
    type->tp_free(self);
    Py_DECREF(type);
}

/* `number`: the number part (0: none; n: displayed suffix _<n-1>). */
static PyObject *name_get_number(PyObject *self, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLong(((zpy_name *)self)->number);
}

static PyObject *name_get_true(PyObject *self, void *closure) {
    (void)self;
    (void)closure;
    Py_RETURN_TRUE;
}

static PyObject *name_get_false(PyObject *self, void *closure) {
    (void)self;
    (void)closure;
    Py_RETURN_FALSE;
}

static PyObject *name_itself(PyObject *self, PyObject *unused) {
    (void)unused;
    return Py_NewRef(self);
}

static PyObject *name_nothing(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    Py_RETURN_NONE;
}

static PyObject *name_reduce(PyObject *self, PyObject *protocol) {
    (void)protocol;
    PyObject *text = name_str(self);
    if (text == NULL) return NULL;
    PyObject *result = Py_BuildValue("(O(N))", (PyObject *)Py_TYPE(self), text);
    return result;
}

static PyGetSetDef name_getset[] = {
    {"number", name_get_number, NULL, "The number part (0: none; n: displayed suffix _<n-1>).",
     NULL},
    {"is_black", name_get_true, NULL, "Always True: a name is a value Python owns.", NULL},
    {"is_expired", name_get_false, NULL, "Never: names stay until their runtime is freed.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef name_members[] = {
    {"_index", T_UINT, offsetof(zpy_name, index), READONLY, "The native name index."},
    {"_number", T_UINT, offsetof(zpy_name, number), READONLY, "The native number."},
    {"_rt", T_OBJECT, offsetof(zpy_name, runtime), READONLY, "The runtime."},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef name_methods[] = {
    {"clone", name_itself, METH_NOARGS, "Immutable: the clone is the name itself."},
    {"__copy__", name_itself, METH_NOARGS, NULL},
    {"__deepcopy__", (PyCFunction)(void (*)(void))name_itself, METH_O, NULL},
    {"dispose", name_nothing, METH_NOARGS, "Nothing to free."},
    {"__reduce_ex__", name_reduce, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot name_slots[] = {
    {Py_tp_doc, "An interned name: compared and hashed case-insensitively (ASCII)."},
    {Py_tp_new, name_new},
    {Py_tp_dealloc, name_dealloc},
    {Py_tp_str, name_str},
    {Py_tp_repr, name_repr},
    {Py_tp_richcompare, name_richcompare},
    {Py_tp_hash, name_hash},
    {Py_tp_getset, name_getset},
    {Py_tp_members, name_members},
    {Py_tp_methods, name_methods},
    {0, NULL},
};

static PyType_Spec name_spec = {
    .name = "zsharp_py._core.NameBase",
    .basicsize = sizeof(zpy_name),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = name_slots,
};

/* =========================================================================
 * Runtime methods
 * ========================================================================= */

/* Runtime._name_text(index, number) -> the displayed text of a name. */
PyObject *zpyv_runtime_name_text(PyObject *self, PyObject *args) {
    unsigned int index, number;
    if (!PyArg_ParseTuple(args, "II:_name_text", &index, &number)) return NULL;
    return name_text((zpy_runtime_core *)self, index, number);
}

/* Runtime._intern(text) -> (index, number) (object names). */
PyObject *zpyv_runtime_intern(PyObject *self, PyObject *text) {
    if (!PyUnicode_Check(text))
        return PyErr_Format(PyExc_TypeError, "name must be a str, not %s", Py_TYPE(text)->tp_name);
    uint32_t index, number;
    if (zpyv_intern((zpy_runtime_core *)self, text, &index, &number, "object name") < 0)
        return NULL;
    return Py_BuildValue("(II)", index, number);
}

/* Runtime._keep_names(count): decode names 0..count-1 before the native
 * table goes (close: expired conjugates name their objects lazily). */
PyObject *zpyv_runtime_keep_names(PyObject *self, PyObject *count) {
    unsigned long n = PyLong_AsUnsignedLong(count);
    if (n == (unsigned long)-1 && PyErr_Occurred()) return NULL;
    for (unsigned long i = 0; i < n; i++)
        if (base_text((zpy_runtime_core *)self, (uint32_t)i) == NULL) return NULL;
    Py_RETURN_NONE;
}

/* Free a runtime's name caches (runtime dealloc). */
void zpyv_names_free(zpy_runtime_core *rt) {
    for (uint32_t i = 0; i < rt->name_count; i++) Py_CLEAR(rt->names[i]);
    PyMem_Free(rt->names);
    rt->names = NULL;
    rt->name_count = rt->name_capacity = 0;
    Py_CLEAR(rt->interned);
    if (rt->name_memo != NULL) {
        for (uint32_t i = 0; i < ZPYV_NAME_MEMO; i++) Py_CLEAR(rt->name_memo[i].text);
        PyMem_Free(rt->name_memo);
        rt->name_memo = NULL;
    }
}

int zpyv_add_name_type(PyObject *module, zpy_core_state *state) {
    state->name_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &name_spec, NULL);
    if (state->name_type == NULL ||
        PyModule_AddObjectRef(module, "NameBase", (PyObject *)state->name_type) < 0)
        return -1;
    return 0;
}
