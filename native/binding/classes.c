/* Conjugate classes: their metaclass, and creating an object with its
 * conjugate in one C call.
 *
 * `Actor(name=..., outer=..., health=5, target=other)`, in a runtime where
 * Actor's defaults are plain data, is the fast path: read and check the
 * keywords (scalar values of their exact Python type and in range, live
 * objects of the right class and runtime), find the runtime (the outer's,
 * the `with Runtime()` context variable's, else the default runtime), find
 * Actor's Creator in it, allocate the conjugate, make the native object (one
 * native call), record the conjugate, write the keywords. Anything else
 * (positional arguments, other kinds of properties, values that need a
 * Python conversion or would be refused, a first use, a class whose
 * defaults need Python, stress switches, native frees queued by finalisers,
 * a closing runtime) goes to the Python constructor, which gives the
 * precise errors and registers the Creator for next time.
 */
#include "core.h"

#include <structmember.h>

/* =========================================================================
 * Creators
 * ========================================================================= */

/* Creator(native_class_address, image) */
static PyObject *creator_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"native_class", "image", NULL};
    PyObject *address, *image;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!:Creator", keywords, &address,
                                     &PyBytes_Type, &image))
        return NULL;
    const zs_class *cls = PyLong_AsVoidPtr(address);
    if (cls == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "Creator: null native class");
        return NULL;
    }
    if (PyBytes_GET_SIZE(image) > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "Creator: image too large");
        return NULL;
    }
    zs_creator *creator = (zs_creator *)type->tp_alloc(type, 0);
    if (creator == NULL)
        return NULL;
    creator->cls = cls;
    creator->image = Py_NewRef(image);
    return (PyObject *)creator;
}

/* Free a Creator (its image; the native class belongs to the runtime). */
static void creator_dealloc(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    Py_CLEAR(((zs_creator *)self)->image);
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
    .basicsize = sizeof(zs_creator),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = creator_slots,
};

/* =========================================================================
 * The fast creation path
 * ========================================================================= */

/* The runtime creation would use, if the fast path may use it (borrowed),
 * else NULL with no error: the Python path decides (and makes the default
 * runtime, or raises). */
static zs_runtime_core *current_runtime(zs_core_state *state) {
    PyObject *value = NULL;
    if (PyContextVar_Get(state->current, NULL, &value) < 0) {
        PyErr_Clear();
        return NULL;
    }
    zs_runtime_core *rt = NULL;
    if (value != NULL && value != Py_None && PyObject_TypeCheck(value, state->runtime_type))
        rt = (zs_runtime_core *)value;
    /* Borrowed: the context variable keeps it while the context is current. */
    Py_XDECREF(value);
    if (rt != NULL && !rt->closing)
        return rt;
    if (PyList_GET_SIZE(state->default_runtime) == 0)
        return NULL;
    PyObject *fallback = PyList_GET_ITEM(state->default_runtime, 0);
    if (!PyObject_TypeCheck(fallback, state->runtime_type))
        return NULL;
    return (zs_runtime_core *)fallback;
}

/* Constructor keywords the C path takes at most (more: Python). */
#define ZS_FAST_KEYWORDS 16

/* What `Cls(name=..., outer=..., **properties)` asks for, read and checked
 * before anything is allocated. */
typedef struct zs_request {
    zs_runtime_core *rt;        /* borrowed */
    zs_ref outer;
    uint32_t name_index, name_number;
    PyObject *name;             /* borrowed str, or NULL: an automatic name */
    Py_ssize_t count;
    zs_prepared_store stores[ZS_FAST_KEYWORDS];
} zs_request;

/* Read the keywords: 1 when the C path can create the object, 0 when the
 * Python constructor must (no error set), -1 on error. Runs no Python code. */
static int read_request(zs_core_state *state, PyTypeObject *cls, PyObject *kwargs,
                        zs_request *request) {
    request->rt = NULL;
    request->outer = ZS_NULL_REF;
    request->name = NULL;
    request->count = 0;
    PyObject *outer = kwargs ? PyDict_GetItemWithError(kwargs, state->str_outer) : NULL;
    if (outer == NULL && PyErr_Occurred())
        return -1;
    if (outer != NULL && outer != Py_None) {
        if (!PyObject_TypeCheck(outer, state->conjugate_type))
            return 0;
        zs_conjugate *holder = (zs_conjugate *)outer;
        if (!ZS_CONJUGATE_IS_LIVE(holder))
            return 0;
        request->rt = holder->runtime;
        request->outer = holder->handle;
    } else {
        request->rt = current_runtime(state);
    }
    zs_runtime_core *rt = request->rt;
    if (rt == NULL || rt->closing || rt->native == NULL || rt->collect_every != 0 ||
        rt->flush_pending)
        return 0;
    if (kwargs == NULL)
        return 1;
    if (PyDict_GET_SIZE(kwargs) > ZS_FAST_KEYWORDS + 2)
        return 0;
    Py_ssize_t position = 0;
    PyObject *key, *value;
    while (PyDict_Next(kwargs, &position, &key, &value)) {
        if (!PyUnicode_CheckExact(key))
            return 0;
        if (PyUnicode_CompareWithASCIIString(key, "outer") == 0)
            continue;
        if (PyUnicode_CompareWithASCIIString(key, "name") == 0) {
            if (value != Py_None) {
                if (!PyUnicode_CheckExact(value))
                    return 0;
                request->name = value;
            }
            continue;
        }
        PyObject *descriptor = _PyType_Lookup(cls, key);  /* borrowed, no error */
        if (descriptor == NULL || request->count == ZS_FAST_KEYWORDS ||
            !zs_prepare_store(state, cls, descriptor, rt, value,
                             &request->stores[request->count]))
            return 0;
        request->count++;
    }
    return 1;
}

/* Create a `cls` object and its conjugate in C, or return NULL: with an
 * error set on failure, without one when the Python path must decide. */
static PyObject *fast_create(zs_core_state *state, PyTypeObject *cls, PyObject *kwargs) {
    zs_request request;
    int readable = read_request(state, cls, kwargs, &request);
    if (readable <= 0)
        return NULL;
    zs_runtime_core *rt = request.rt;
    PyObject *found = rt->last_creator;
    if (rt->last_class != (PyObject *)cls) {
        found = rt->creators ? PyDict_GetItemWithError(rt->creators, (PyObject *)cls) : NULL;
        if (found == NULL || !PyObject_TypeCheck(found, state->creator_type))
            return NULL;  /* first use here, or not plain: Python (error or not) */
        Py_XSETREF(rt->last_class, Py_NewRef((PyObject *)cls));
        Py_XSETREF(rt->last_creator, Py_NewRef(found));
    }
    zs_creator *creator = (zs_creator *)found;
    uint32_t name_index = ZS_NAME_AUTO, name_number = 0;
    if (request.name != NULL) {
        Py_ssize_t length;
        const char *text = PyUnicode_AsUTF8AndSize(request.name, &length);
        if (text == NULL) {
            PyErr_Clear();  /* not encodable: Python raises the precise error */
            return NULL;
        }
        if (state->api.zs_name_intern(rt->native, text, (size_t)length, &name_index,
                                   &name_number) != ZS_OK)
            return NULL;  /* NUL characters or too long: likewise */
    }
    /* Allocated first. Not tracked by the cycle collector, so no collection
       (and no finaliser) can run here; from the native call to the last
       store no Python code runs at all. */
    zs_conjugate *conjugate = (zs_conjugate *)cls->tp_alloc(cls, 0);
    if (conjugate == NULL)
        return NULL;
    Py_INCREF(creator);
    void *object = NULL;
    zs_ref handle = state->api.zs_object_new_conjugate(
        rt->native, creator->cls, request.outer, name_index, name_number,
        PyBytes_AS_STRING(creator->image), (uint32_t)PyBytes_GET_SIZE(creator->image), &object);
    Py_DECREF(creator);
    zs_status failed = handle < ZS_FIRST_REF ? (zs_status)handle : ZS_OK;
    if (failed == ZS_OK) {
        if (zs_conjugate_bind(rt, conjugate, handle, object) < 0) {
            state->api.zs_mark_as_garbage(rt->native, handle);  /* unreachable: goes next time */
            Py_DECREF(conjugate);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < request.count && failed == ZS_OK; i++)
            failed = zs_apply_store(rt, conjugate, &request.stores[i]);
        if (failed == ZS_OK)
            return (PyObject *)conjugate;
        /* A target died on another thread since it was checked: leave no
           half-built object reachable; it goes at the next collection. */
        state->api.zs_mark_as_garbage(rt->native, handle);
    }
    Py_DECREF(conjugate);
    PyObject *what = PyUnicode_FromFormat("%s()", cls->tp_name);
    if (what != NULL) {
        Py_XDECREF(zs_call_raise_status(state, failed, what, rt));
        Py_DECREF(what);
    }
    return NULL;
}

/* Calling a conjugate class: the C path for keywords it can take, else Python. */
static PyObject *class_call(PyObject *cls, PyObject *args, PyObject *kwargs) {
    zs_core_state *state = ((zs_class_object *)cls)->state;
    if (state == NULL || !state->configured) {
        PyErr_Format(PyExc_TypeError, "%s is not a ready conjugate class",
                     ((PyTypeObject *)cls)->tp_name);
        return NULL;
    }
    /* A class with a Python __init__ (flag set when it is declared, see
       ObjectMeta in zsharp_py/_object.py): Python creates the object, then
       runs __init__ with the arguments. */
    char python_init = ((zs_class_object *)cls)->python_init;
    if (PyTuple_GET_SIZE(args) == 0 && !python_init) {
        PyObject *made = fast_create(state, (PyTypeObject *)cls, kwargs);
        if (made != NULL || PyErr_Occurred())
            return made;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(args);
    PyObject *full = PyTuple_New(count + 1);
    if (full == NULL)
        return NULL;
    PyTuple_SET_ITEM(full, 0, Py_NewRef(cls));
    for (Py_ssize_t i = 0; i < count; i++)
        PyTuple_SET_ITEM(full, i + 1, Py_NewRef(PyTuple_GET_ITEM(args, i)));
    PyObject *made = PyObject_Call(python_init ? state->init_create : state->slow_create, full,
                                   kwargs);
    Py_DECREF(full);
    return made;
}

static PyMemberDef class_members[] = {
    {"_zs_python_init", T_BOOL, offsetof(zs_class_object, python_init), 0,
     "The class has a Python __init__: creating one runs it (no C fast path)."},
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
    .basicsize = sizeof(zs_class_object),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = class_slots,
};

/* Create the metaclass and Creator types and add them to the module. */
int zs_add_class_types(PyObject *module, zs_core_state *state) {
    PyObject *bases = PyTuple_Pack(1, (PyObject *)&PyType_Type);
    if (bases == NULL)
        return -1;
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
