/* Conjugate classes: their metaclass, and creating an object with its
 * conjugate in one C call.
 *
 * `Actor(name=..., outer=..., health=5, target=other, label="x")`, in a
 * runtime where Actor's defaults are plain data, is the fast path: read and
 * check the keywords (scalar values of their exact Python type and in
 * range, live objects of the right class and runtime), find the runtime
 * (the outer's, the `with Runtime()` context variable's, else the default
 * runtime), find Actor's Creator in it; stage the keywords of value
 * properties (strings, structs, containers...: value.h's phase 1, which may
 * run Python code) and, if it ran any, read and check the others again as
 * they are now; then allocate the conjugate, make the native object (one
 * native call), record the conjugate, write the keywords. Anything else
 * (positional arguments, unknown keywords, scalars that need a Python
 * conversion or would be refused, a first use, a class whose defaults need
 * Python, stress switches, native frees queued by finalisers, a closing
 * runtime) goes to the Python constructor, which gives the precise errors
 * and registers the Creator for next time.
 */
#include "value.h"

#include <structmember.h>

/* =========================================================================
 * Creators
 * ========================================================================= */

/* Creator(native_class_address, image) */
static PyObject *creator_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"native_class", "image", NULL};
    PyObject *address, *image;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!:Creator", keywords, &address, &PyBytes_Type,
                                     &image))
        return NULL;
    const zs_class *cls = PyLong_AsVoidPtr(address);
    if (cls == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Creator: null native class");
        return NULL;
    }
    if (PyBytes_GET_SIZE(image) > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "Creator: image too large");
        return NULL;
    }
    zpy_creator *creator = (zpy_creator *)type->tp_alloc(type, 0);
    if (creator == NULL) return NULL;
    creator->cls = cls;
    creator->image = Py_NewRef(image);
    return (PyObject *)creator;
}

/* Free a Creator (its image; the native class belongs to the runtime). */
static void creator_dealloc(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    Py_CLEAR(((zpy_creator *)self)->image);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyType_Slot creator_slots[] = {
    {Py_tp_doc, "How a class is created in one runtime: its native class and default image."},
    {Py_tp_new, creator_new},
    {Py_tp_dealloc, creator_dealloc},
    {0, NULL},
};

static PyType_Spec creator_spec = {
    .name = "zsharp_py._core.Creator",
    .basicsize = sizeof(zpy_creator),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = creator_slots,
};

/* =========================================================================
 * The fast creation path
 * ========================================================================= */

/* The runtime creation would use, if the fast path may use it (borrowed),
 * else NULL with no error: the Python path decides (and makes the default
 * runtime, or raises). A closed current runtime is never replaced by the
 * default one (zsharp_py/_base/context.py current_runtime raises). */
static zpy_runtime_core *current_runtime(zpy_core_state *state) {
    zpy_runtime_core *rt = NULL;
    if (zpy_current_get_runtime(state, &rt) < 0) { /* borrowed: the context holds it */
        PyErr_Clear();
        return NULL;
    }
    if (rt != NULL) return zpy_open(rt) ? rt : NULL;
    if (PyList_GET_SIZE(state->default_runtime) == 0) return NULL;
    PyObject *fallback = PyList_GET_ITEM(state->default_runtime, 0);
    if (!zpy_is_runtime(state, fallback)) return NULL;
    return (zpy_runtime_core *)fallback;
}

/* Constructor keywords the C path takes at most (more: Python). */
#define ZPY_FAST_KEYWORDS 16

/* The keywords of a call, as the vectorcall protocol gives them: names
 * (exact or not: checked) and values, borrowed from the caller. */
typedef struct zpy_keywords {
    PyObject *const *names;
    PyObject *const *values;
    Py_ssize_t count;
} zpy_keywords;

/* The value of the keyword `interned` (borrowed), or NULL. */
static PyObject *keyword_value(const zpy_keywords *keywords, PyObject *interned);

/* A keyword for a value property: staged before anything is allocated,
 * emitted once the object exists. */
typedef struct zpy_value_keyword {
    zpyv_kind *kind; /* borrowed from the property */
    uint32_t offset;
    PyObject *what;  /* borrowed: "Class.name" */
    PyObject *value; /* borrowed from the keywords */
} zpy_value_keyword;

/* What `Cls(name=..., outer=..., **properties)` asks for, read and checked
 * before anything is allocated. */
typedef struct zpy_request {
    zpy_runtime_core *rt; /* borrowed */
    zs_ref outer;
    uint32_t name_index, name_number;
    PyObject *name;         /* borrowed str, or NULL: an automatic name */
    Py_ssize_t count;       /* scalar and reference keywords */
    Py_ssize_t value_count; /* value keywords */
    zpy_prepared_store stores[ZPY_FAST_KEYWORDS];
    zpy_value_keyword values[ZPY_FAST_KEYWORDS];
} zpy_request;

/* Whether the C path may create objects in `rt` now: open, no stress
 * switch, no native frees queued by finalisers (the Python path flushes). */
static inline int runtime_usable(const zpy_runtime_core *rt) {
    return zpy_open(rt) && rt->collect_every == 0 && !rt->flush_pending;
}

/* Whether the `outer` keyword still names the live object it named when
 * read (`outer`: its handle then, or none). */
static int outer_unchanged(zpy_core_state *state, const zpy_keywords *keywords, zs_ref outer) {
    PyObject *now = keyword_value(keywords, state->str_outer);
    if (now == NULL || now == Py_None) return outer == ZS_NULL_REF;
    return zpy_is_conjugate(state, now) && ZPY_CONJUGATE_IS_LIVE((zpy_conjugate *)now) &&
           ((zpy_conjugate *)now)->handle == outer;
}

/* Whether two exact strs hold the same text: keywords are interned, so
 * identity first; two distinct interned strs differ. */
static inline int same_text(PyObject *key, PyObject *interned) {
    if (key == interned) return 1;
    if (PyUnicode_CHECK_INTERNED(key) && PyUnicode_CHECK_INTERNED(interned)) return 0;
    return PyUnicode_GET_LENGTH(key) == PyUnicode_GET_LENGTH(interned) &&
           PyUnicode_Compare(key, interned) == 0;
}

static PyObject *keyword_value(const zpy_keywords *keywords, PyObject *interned) {
    for (Py_ssize_t i = 0; i < keywords->count; i++)
        if (PyUnicode_CheckExact(keywords->names[i]) && same_text(keywords->names[i], interned))
            return keywords->values[i];
    return NULL;
}

/* A request for an object in `rt` with no outer, an automatic name and no
 * keywords yet (its arrays are filled as keywords are read). */
static inline void request_start(zpy_request *request, zpy_runtime_core *rt) {
    request->rt = rt;
    request->outer = ZS_NULL_REF;
    request->name = NULL;
    request->count = 0;
    request->value_count = 0;
}

/* Read the keywords: 1 when the C path can create the object, 0 when the
 * Python constructor must (no error set). Runs no Python code. */
static int read_request(zpy_core_state *state, PyTypeObject *cls, const zpy_keywords *keywords,
                        zpy_request *request) {
    request_start(request, NULL);
    if (keywords->count > ZPY_FAST_KEYWORDS + 2) return 0;
    PyObject *outer = keyword_value(keywords, state->str_outer);
    if (outer != NULL && outer != Py_None) {
        if (!zpy_is_conjugate(state, outer)) return 0;
        zpy_conjugate *holder = (zpy_conjugate *)outer;
        if (!ZPY_CONJUGATE_IS_LIVE(holder)) return 0;
        request->rt = holder->runtime;
        request->outer = zpy_conjugate_share(holder);
    } else {
        request->rt = current_runtime(state);
    }
    zpy_runtime_core *rt = request->rt;
    if (rt == NULL || !runtime_usable(rt)) return 0;
    for (Py_ssize_t k = 0; k < keywords->count; k++) {
        PyObject *key = keywords->names[k], *value = keywords->values[k];
        if (!PyUnicode_CheckExact(key)) return 0;
        if (same_text(key, state->str_outer)) continue;
        if (same_text(key, state->str_name)) {
            if (value != Py_None) {
                if (!PyUnicode_CheckExact(value)) return 0;
                request->name = value;
            }
            continue;
        }
        PyObject *descriptor = _PyType_Lookup(cls, key); /* borrowed, no error */
        if (descriptor == NULL || request->count + request->value_count == ZPY_FAST_KEYWORDS)
            return 0;
        zpy_value_keyword *keyword = &request->values[request->value_count];
        if (zpyv_object_value_property(state, cls, descriptor, &keyword->kind, &keyword->offset,
                                       &keyword->what)) {
            keyword->value = value;
            request->value_count++;
            continue;
        }
        if (!zpy_prepare_store(state, cls, descriptor, rt, value, &request->stores[request->count]))
            return 0;
        request->count++;
    }
    return 1;
}

/* `cls`'s Creator in `rt` (borrowed), or NULL (no error) on its first use
 * there, or when its defaults need Python. */
static zpy_creator *find_creator(zpy_core_state *state, zpy_runtime_core *rt, PyTypeObject *cls) {
    if (rt->last_class != (PyObject *)cls) {
        PyObject *found = rt->creators ? PyDict_GetItemWithError(rt->creators, (PyObject *)cls)
                                       : NULL;
        if (found == NULL || !PyObject_TypeCheck(found, state->creator_type)) {
            PyErr_Clear();
            return NULL;
        }
        /* Both recorded before either old one is dropped: `found` is
           borrowed, and a drop may run Python code. */
        PyObject *old_class = rt->last_class, *old_creator = rt->last_creator;
        rt->last_class = Py_NewRef((PyObject *)cls);
        rt->last_creator = Py_NewRef(found);
        Py_XDECREF(old_class);
        Py_XDECREF(old_creator);
    }
    return (zpy_creator *)rt->last_creator;
}

/* Phase 1 for the value keywords: stage each (may run Python code). Those
 * staged quickly (zpyv_stage_quick: no Python code, nothing allocated)
 * borrow `quick` and are flagged in *borrowed, never released. */
static int stage_value_keywords(const zpy_request *request, zpyv_staged *staged, zpyv_quick *quick,
                                uint32_t *borrowed) {
    *borrowed = 0;
    for (Py_ssize_t i = 0; i < request->value_count; i++) {
        const zpy_value_keyword *keyword = &request->values[i];
        if (zpyv_native_type(request->rt, keyword->kind) == NULL)
            return zpy_error_prefix(keyword->what);
        if (zpyv_stage_quick(request->rt, keyword->kind, keyword->value, &staged[i], &quick[i])) {
            *borrowed |= 1u << i;
            continue;
        }
        Py_INCREF(keyword->value);
        int result = zpyv_stage(request->rt, keyword->kind, keyword->value, &staged[i],
                                keyword->what);
        Py_DECREF(keyword->value);
        if (result < 0) {
            zpy_error_prefix(keyword->what);
            return -1;
        }
    }
    return 0;
}

/* Create the object and its conjugate and write the keywords; no Python
 * code runs from the check of the runtime to the last write. NULL with no
 * error when the Python path must decide. */
static PyObject *create_now(zpy_core_state *state, PyTypeObject *cls, zpy_request *request,
                            zpy_creator *creator, const zpyv_staged *staged) {
    zpy_runtime_core *rt = request->rt;
    /* find_creator may have run Python code (a metaclass's __hash__ or
       __eq__, a dropped reference) that closed the runtime, which frees the
       creator's native class, or recorded another class's creator: the
       runtime must be open and the creator still the one of `cls` in it. */
    if (!runtime_usable(rt) || rt->last_class != (PyObject *)cls ||
        rt->last_creator != (PyObject *)creator)
        return NULL;
    uint32_t name_index = ZS_NAME_AUTO, name_number = 0;
    if (request->name != NULL) {
        Py_ssize_t length;
        const char *text = PyUnicode_AsUTF8AndSize(request->name, &length);
        if (text == NULL) {
            PyErr_Clear(); /* not encodable: Python raises the precise error */
            return NULL;
        }
        if (zs_name_intern(rt->native, text, (size_t)length, &name_index, &name_number) != ZS_OK)
            return NULL; /* NUL characters or too long: likewise */
    }
    /* Allocated first, running no Python code (zpy_conjugate_alloc: no
       collection, and no finaliser, can run here). */
    zpy_conjugate *conjugate = zpy_conjugate_alloc(rt, cls);
    if (conjugate == NULL) return NULL;
    /* Objects dropped since the last creation go first, under the same
       lock: an unshared one leaves its slot and memory, still in cache, to
       this one. */
    uint32_t dropped = rt->dropped_count > 0 ? zpy_dropped_ready(rt) : 0;
    void *object = NULL;
    zs_ref handle = zs_object_new_conjugate(rt->native, creator->cls, request->outer, name_index,
                                            name_number, PyBytes_AS_STRING(creator->image),
                                            (uint32_t)PyBytes_GET_SIZE(creator->image), &object,
                                            rt->dropped, dropped, rt->state);
    rt->dropped_count = 0;
    zs_status failed = handle < ZS_FIRST_REF ? (zs_status)handle : ZS_OK;
    if (failed == ZS_OK) {
        if (zpy_conjugate_bind(rt, conjugate, handle, object) < 0) {
            zs_mark_as_garbage(rt->native, handle); /* unreachable: goes next time */
            Py_DECREF(conjugate);
            return NULL;
        }
        /* Only the new conjugate has the handle. A named object, or one in
           an outer, can be found by its path: it waits for the collector. */
        if (request->name == NULL && request->outer == ZS_NULL_REF)
            zpy_conjugate_set_sole(rt, conjugate);
        for (Py_ssize_t i = 0; i < request->count && failed == ZS_OK; i++)
            failed = zpy_apply_store(rt, conjugate, &request->stores[i]);
        for (Py_ssize_t i = 0; i < request->value_count && failed == ZS_OK; i++)
            failed = zpyv_emit(rt, request->values[i].kind, &staged[i], handle,
                               (char *)object + request->values[i].offset);
        if (failed == ZS_OK) return (PyObject *)conjugate;
        /* A target died since it was checked: leave no half-built object
           reachable; it goes at the next collection. */
        zs_mark_as_garbage(rt->native, handle);
    }
    Py_DECREF(conjugate);
    PyObject *what = PyUnicode_FromFormat("%s()", cls->tp_name);
    if (what != NULL) {
        Py_XDECREF(zpy_call_raise_status(state, failed, what, rt));
        Py_DECREF(what);
    }
    return NULL;
}

/* Create a `cls` object and its conjugate in C, or return NULL: with an
 * error set on failure, without one when the Python path must decide. */
static PyObject *fast_create(zpy_core_state *state, PyTypeObject *cls,
                             const zpy_keywords *keywords) {
    zpy_request request;
    if (read_request(state, cls, keywords, &request) <= 0) return NULL;
    zpy_creator *creator = find_creator(state, request.rt, cls);
    if (creator == NULL) return NULL;
    if (request.value_count == 0) return create_now(state, cls, &request, creator, NULL);
    /* Staging may run Python code, which may drop the runtime from the
       context or a property from the class: held until the end. */
    zpyv_staged staged[ZPY_FAST_KEYWORDS];
    zpyv_quick quick[ZPY_FAST_KEYWORDS];
    uint32_t borrowed = 0; /* staged[i] borrows quick[i] or the keyword's value */
    zpy_value_keyword first[ZPY_FAST_KEYWORDS];
    Py_ssize_t value_count = request.value_count;
    /* Zeroed: those a failure leaves unstaged are released all the same. */
    memset(staged, 0, (size_t)value_count * sizeof staged[0]);
    memcpy(first, request.values, (size_t)value_count * sizeof first[0]);
    zpy_runtime_core *rt = (zpy_runtime_core *)Py_NewRef((PyObject *)request.rt);
    for (Py_ssize_t i = 0; i < value_count; i++) Py_INCREF(first[i].kind);
    /* The class as read: its version tag changes with any change to it or
       its bases (a property replaced or deleted). */
    unsigned int version = cls->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG ? cls->tp_version_tag : 0;
    PyObject *made = NULL;
    if (stage_value_keywords(&request, staged, quick, &borrowed) == 0) {
        /* Python code may have run. If the class and runtime are as they
           were, the keywords stand as read (the caller's, unchanged; a
           reference that died since is refused by its store); otherwise
           they are read and checked again as things are now. A runtime
           changed or closed, the outer gone or a property replaced goes to
           the Python constructor, which says why; it converts the values
           again. */
        int same = version != 0 && (cls->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) &&
                   cls->tp_version_tag == version && runtime_usable(rt) &&
                   outer_unchanged(state, keywords, request.outer);
        if (!same) {
            same = read_request(state, cls, keywords, &request) > 0 && request.rt == rt &&
                   request.value_count == value_count;
            for (Py_ssize_t i = 0; same && i < value_count; i++)
                same = request.values[i].kind == first[i].kind &&
                       request.values[i].offset == first[i].offset;
        }
        if (same && (creator = find_creator(state, rt, cls)) != NULL)
            made = create_now(state, cls, &request, creator, staged);
    }
    for (Py_ssize_t i = 0; i < value_count; i++) {
        if (!(borrowed & (1u << i))) zpyv_release(first[i].kind, &staged[i]);
        Py_DECREF(first[i].kind);
    }
    Py_DECREF(rt);
    return made;
}

/* `Cls()`, the commonest creation: fast_create with no keywords to read.
 * Flattened (current_runtime, find_creator and create_now compiled into it,
 * create_now's keyword loops gone with the empty request): 30 of the about
 * 1,000 instructions a `Cls()` made and dropped costs. */
__attribute__((flatten)) static PyObject *plain_create(zpy_core_state *state, PyTypeObject *cls) {
    zpy_request request;
    request_start(&request, current_runtime(state));
    if (request.rt == NULL || !runtime_usable(request.rt)) return NULL;
    zpy_creator *creator = find_creator(state, request.rt, cls);
    if (creator == NULL) return NULL;
    return create_now(state, cls, &request, creator, NULL);
}

/* The Python constructor: init_create for a class with a Python __init__
 * (flag set when it is declared, see ObjectMeta in zsharp_py/_model/object.py:
 * it creates the object, then runs __init__), else slow_create. */
static PyObject *python_create(zpy_core_state *state, PyObject *cls, PyObject *args,
                               PyObject *kwargs) {
    Py_ssize_t count = PyTuple_GET_SIZE(args);
    PyObject *full = PyTuple_New(count + 1);
    if (full == NULL) return NULL;
    PyTuple_SET_ITEM(full, 0, Py_NewRef(cls));
    for (Py_ssize_t i = 0; i < count; i++)
        PyTuple_SET_ITEM(full, i + 1, Py_NewRef(PyTuple_GET_ITEM(args, i)));
    PyObject *made = PyObject_Call(((zpy_class_object *)cls)->python_init ? state->init_create
                                                                          : state->slow_create,
                                   full, kwargs);
    Py_DECREF(full);
    return made;
}

/* The state of a class being called, or NULL with TypeError. */
static zpy_core_state *ready_state(PyObject *cls) {
    zpy_core_state *state = ((zpy_class_object *)cls)->state;
    if (state == NULL || !state->configured) {
        PyErr_Format(PyExc_TypeError, "%s is not a ready conjugate class",
                     ((PyTypeObject *)cls)->tp_name);
        return NULL;
    }
    return state;
}

/* Calling a conjugate class with a tuple and a dict: the C path for
 * keywords it can take, else Python. */
static PyObject *class_call(PyObject *cls, PyObject *args, PyObject *kwargs) {
    zpy_core_state *state = ready_state(cls);
    if (state == NULL) return NULL;
    if (PyTuple_GET_SIZE(args) == 0 && !((zpy_class_object *)cls)->python_init) {
        PyObject *names[ZPY_FAST_KEYWORDS + 2], *values[ZPY_FAST_KEYWORDS + 2];
        zpy_keywords keywords = {names, values, 0};
        Py_ssize_t position = 0;
        PyObject *key, *value;
        int fits = kwargs == NULL || PyDict_GET_SIZE(kwargs) <= ZPY_FAST_KEYWORDS + 2;
        while (fits && kwargs != NULL && PyDict_Next(kwargs, &position, &key, &value)) {
            names[keywords.count] = key;
            values[keywords.count++] = value;
        }
        PyObject *made = fits ? fast_create(state, (PyTypeObject *)cls, &keywords) : NULL;
        if (made != NULL || PyErr_Occurred()) return made;
    }
    return python_create(state, cls, args, kwargs);
}

static PyObject *class_vectorcall_slow(PyObject *cls, PyObject *const *args, size_t nargsf,
                                       PyObject *kwnames, zpy_core_state *state);

/* Calling a conjugate class through vectorcall (no tuple or dict made for
 * the C path). Set on every conjugate class by init_class; taken only while
 * the metaclass's __call__ is class_call. */
static PyObject *class_vectorcall(PyObject *cls, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
    zpy_core_state *state = NULL;
    if (Py_TYPE(cls)->tp_call == class_call) {
        if ((state = ready_state(cls)) == NULL) return NULL;
        if (PyVectorcall_NARGS(nargsf) == 0 && !((zpy_class_object *)cls)->python_init) {
            PyObject *made;
            if (kwnames == NULL) {
                made = plain_create(state, (PyTypeObject *)cls);
            } else {
                zpy_keywords keywords = {&PyTuple_GET_ITEM(kwnames, 0), args,
                                         PyTuple_GET_SIZE(kwnames)};
                made = fast_create(state, (PyTypeObject *)cls, &keywords);
            }
            if (made != NULL || PyErr_Occurred()) return made;
        }
    }
    return class_vectorcall_slow(cls, args, nargsf, kwnames, state);
}

/* class_vectorcall's other calls: a tuple and a dict, as the metaclass's
 * __call__ (ours, or an override when `state` is NULL) takes them. Out of
 * line: the creation above stays a short function. */
static __attribute__((noinline)) PyObject *class_vectorcall_slow(PyObject *cls,
                                                                 PyObject *const *args,
                                                                 size_t nargsf, PyObject *kwnames,
                                                                 zpy_core_state *state) {
    Py_ssize_t given = PyVectorcall_NARGS(nargsf);
    ternaryfunc call = Py_TYPE(cls)->tp_call;
    PyObject *tuple = PyTuple_New(given), *kwargs = NULL;
    if (tuple == NULL) return NULL;
    for (Py_ssize_t i = 0; i < given; i++) PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
    Py_ssize_t named = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (named > 0 && (kwargs = PyDict_New()) != NULL)
        for (Py_ssize_t i = 0; i < named; i++)
            if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[given + i]) < 0) {
                Py_CLEAR(kwargs);
                break;
            }
    PyObject *made = NULL;
    if (named == 0 || kwargs != NULL)
        made = state != NULL ? python_create(state, cls, tuple, kwargs) : call(cls, tuple, kwargs);
    Py_DECREF(tuple);
    Py_XDECREF(kwargs);
    return made;
}

int zpy_class_enable_vectorcall(PyTypeObject *cls) {
    PyTypeObject *meta = Py_TYPE(cls);
    if (meta->tp_call != class_call)
        return 0; /* a metaclass with a __call__ of its own: always through it */
    cls->tp_vectorcall = class_vectorcall;
    if (!(meta->tp_flags & Py_TPFLAGS_HAVE_VECTORCALL)) {
        /* A metaclass made in Python inherits neither the flag nor the
           offset before Python 3.12; both are ObjectClass's. */
        meta->tp_vectorcall_offset = offsetof(PyTypeObject, tp_vectorcall);
        meta->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
    }
    return 0;
}

static PyMemberDef class_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(PyTypeObject, tp_vectorcall), READONLY, NULL},
    {"_zs_python_init", T_BOOL, offsetof(zpy_class_object, python_init), 0,
     "The class has a Python __init__: creating one runs it (no C fast path)."},
    {"_zs_stateful", T_BOOL, offsetof(zpy_class_object, stateful), READONLY,
     "The class has Python state (zs.state()): the conjugate table holds its conjugates."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot class_slots[] = {
    {Py_tp_doc, "Metaclass base of conjugate classes: calling one creates a native object."},
    {Py_tp_call, class_call},
    {Py_tp_members, class_members},
    {0, NULL},
};

static PyType_Spec class_spec = {
    .name = "zsharp_py._core.ObjectClass",
    .basicsize = sizeof(zpy_class_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = class_slots,
};

/* Create the metaclass and Creator types and add them to the module. */
int zpy_add_class_types(PyObject *module, zpy_core_state *state) {
    PyObject *bases = PyTuple_Pack(1, (PyObject *)&PyType_Type);
    if (bases == NULL) return -1;
    state->class_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &class_spec, bases);
    Py_DECREF(bases);
    if (state->class_type == NULL ||
        PyModule_AddObjectRef(module, "ObjectClass", (PyObject *)state->class_type) < 0)
        return -1;
    state->creator_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &creator_spec, NULL);
    if (state->creator_type == NULL ||
        PyModule_AddObjectRef(module, "Creator", (PyObject *)state->creator_type) < 0)
        return -1;
    return 0;
}
