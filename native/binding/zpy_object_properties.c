/* Property descriptors of object conjugate classes: scalars and object
 * references, read and written in C with no Python frame.
 *
 * Every access checks that the conjugate is live and that its native object
 * is of the descriptor's class (or a subclass) in its runtime: a descriptor
 * applied to another object, or a conjugate re-classed through
 * object.__class__, would otherwise read through the wrong layout. A write
 * converts its value before it looks at the native address (value.h, the
 * rule): a conversion may run Python code (__index__, __float__), which may
 * expire the conjugate.
 */
#include "value.h"

#include <float.h>
#include <stdbool.h>
#include <math.h>
#include <string.h>
#include <structmember.h>

int zpy_descriptor_misapplied(PyObject *what, PyTypeObject *owner, PyObject *obj) {
    PyErr_Format(PyExc_TypeError, "descriptor %U of '%s' objects does not apply to a '%s' object",
                 what, owner->tp_name, Py_TYPE(obj)->tp_name);
    return -1;
}

/* The live conjugate a descriptor of `owner` is given, checked (NULL with an
 * error: not a conjugate of that class, or expired). */
static inline zpy_conjugate *checked(PyTypeObject *owner, PyObject *obj, PyObject *what,
                                     zpy_core_state *state) {
    if (zpy_is_conjugate(state, obj)) {
        zpy_conjugate *conjugate = (zpy_conjugate *)obj;
        if (!ZPY_CONJUGATE_IS_LIVE(conjugate)) return zpy_raise_expired(conjugate), NULL;
        if (zpy_conjugate_is_a(conjugate, owner)) return conjugate;
    }
    zpy_descriptor_misapplied(what, owner, obj);
    return NULL;
}

/* =========================================================================
 * Scalars
 * ========================================================================= */

typedef struct zpy_scalar_property {
    PyObject_HEAD PyTypeObject *owner; /* the class whose layout `offset` belongs to */
    PyObject *doc;
    PyObject *name; /* "Class.name", for errors */
    Py_ssize_t offset;
    zpy_scalar_kind kind;
    zpy_core_state *state;
} zpy_scalar_property;

/* Read: liveness and class checks, one load. */
static PyObject *scalar_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    zpy_scalar_property *property = (zpy_scalar_property *)self;
    if (obj == NULL) return Py_NewRef(self);
    zpy_conjugate *conjugate = checked(property->owner, obj, property->name, property->state);
    if (conjugate == NULL) return NULL;
    return zpy_scalar_load(property->kind, conjugate->address + property->offset);
}

/* Write: convert first (maybe Python code), then check, then store. */
static int scalar_set(PyObject *self, PyObject *obj, PyObject *value) {
    zpy_scalar_property *property = (zpy_scalar_property *)self;
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "cannot delete property %U", property->name);
        return -1;
    }
    if (checked(property->owner, obj, property->name, property->state) == NULL) return -1;
    zpy_scalar_bits bits;
    if (!zpy_scalar_convert_exact(property->kind, value, &bits) &&
        zpy_scalar_convert(property->kind, value, &bits, property->name) < 0)
        return -1;
    zpy_conjugate *conjugate = checked(property->owner, obj, property->name, property->state);
    if (conjugate == NULL) return -1;
    zpy_runtime_core *rt = conjugate->runtime;
    if (zpy_dying_window(rt)) { /* the one rule for dying objects (value.h, zpyv_writable) */
        zs_status status = zpyv_writable(rt, conjugate->handle);
        if (status != ZS_OK) return zpyv_refused(rt, status, property->name), -1;
    }
    zpy_scalar_store(property->kind, &bits, conjugate->address + property->offset);
    return 0;
}

int zpy_scalar_property_info(PyObject *descriptor, PyTypeObject **owner, uint32_t *offset,
                             zpy_scalar_kind *kind, PyObject **what) {
    zpy_scalar_property *property = (zpy_scalar_property *)descriptor;
    *owner = property->owner;
    *offset = (uint32_t)property->offset;
    *kind = property->kind;
    *what = property->name;
    return 1;
}

/* ScalarProperty(owner, name, offset, kind, doc) */
static PyObject *scalar_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"owner", "name", "offset", "kind", "doc", NULL};
    PyTypeObject *owner;
    PyObject *name, *doc;
    Py_ssize_t offset;
    int kind;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!UniO:ScalarProperty", keywords, &PyType_Type,
                                     &owner, &name, &offset, &kind, &doc))
        return NULL;
    zpy_core_state *state = zpy_state_of_type(type);
    if (!PyType_IsSubtype(owner, state->conjugate_type) ||
        !PyObject_TypeCheck((PyObject *)owner, state->class_type)) {
        PyErr_SetString(PyExc_TypeError,
                        "ScalarProperty: the owner is not an object conjugate class");
        return NULL;
    }
    if (kind < 0 || kind >= ZPY_SCALAR_KINDS || offset < (Py_ssize_t)sizeof(zs_object)) {
        PyErr_SetString(PyExc_ValueError, "ScalarProperty: bad kind or offset");
        return NULL;
    }
    zpy_scalar_property *property = (zpy_scalar_property *)type->tp_alloc(type, 0);
    if (property == NULL) return NULL;
    property->owner = (PyTypeObject *)Py_NewRef(owner);
    property->name = Py_NewRef(name);
    property->doc = Py_NewRef(doc);
    property->offset = offset;
    property->kind = (zpy_scalar_kind)kind;
    property->state = state;
    return (PyObject *)property;
}

/* A descriptor and its class refer to each other: the cycle collector's view. */
static int scalar_traverse(PyObject *self, visitproc visit, void *arg) {
    zpy_scalar_property *property = (zpy_scalar_property *)self;
    Py_VISIT(property->owner);
    Py_VISIT(property->doc);
    Py_VISIT(Py_TYPE(self));
    return 0;
}

/* Break that cycle. */
static int scalar_clear(PyObject *self) {
    zpy_scalar_property *property = (zpy_scalar_property *)self;
    Py_CLEAR(property->owner);
    Py_CLEAR(property->doc);
    return 0;
}

/* Free a scalar descriptor. */
static void scalar_dealloc(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    scalar_clear(self);
    Py_CLEAR(((zpy_scalar_property *)self)->name);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyMemberDef scalar_members[] = {
    {"__doc__", T_OBJECT, offsetof(zpy_scalar_property, doc), READONLY, NULL},
    {"offset", T_PYSSIZET, offsetof(zpy_scalar_property, offset), READONLY,
     "Offset of the member in the native object."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot scalar_slots[] = {
    {Py_tp_new, scalar_new},           {Py_tp_dealloc, scalar_dealloc},
    {Py_tp_traverse, scalar_traverse}, {Py_tp_clear, scalar_clear},
    {Py_tp_descr_get, scalar_get},     {Py_tp_descr_set, scalar_set},
    {Py_tp_members, scalar_members},   {0, NULL},
};

static PyType_Spec scalar_spec = {
    .name = "zsharp_py._core.ScalarProperty",
    .basicsize = sizeof(zpy_scalar_property),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = scalar_slots,
};

/* =========================================================================
 * Object references
 * ========================================================================= */

typedef struct zpy_reference_property {
    PyObject_HEAD PyTypeObject *owner;
    PyTypeObject *target; /* the declared class of the referenced objects */
    PyObject *what;       /* "Class.name", for errors */
    PyObject *doc;
    uint32_t offset;
} zpy_reference_property;

/* The referenced object's conjugate (from the table, else made by Python), or None. */
static PyObject *reference_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    zpy_reference_property *property = (zpy_reference_property *)self;
    if (obj == NULL) return Py_NewRef(self);
    zpy_conjugate *conjugate = checked(property->owner, obj, property->what,
                                       zpy_state_of_type(Py_TYPE(self)));
    if (conjugate == NULL) return NULL;
    zs_ref ref;
    memcpy(&ref, conjugate->address + property->offset, sizeof ref);
    if (ref == ZS_NULL_REF) Py_RETURN_NONE;
    zpy_conjugate *found = zpy_table_get(conjugate->runtime, ref);
    if (found != NULL) return Py_NewRef((PyObject *)found);
    return zpy_resolve_conjugate(conjugate->runtime, ref);
}

/* The handle a reference property of an object of `rt` may store for
 * `value` (None: the null handle): false when `value` is not a live object
 * of the declared class in that runtime. */
static bool reference_target(const zpy_reference_property *property, const zpy_runtime_core *rt,
                             PyObject *value, zs_ref *out) {
    if (value == Py_None) {
        *out = ZS_NULL_REF;
        return true;
    }
    if (!PyObject_TypeCheck(value, property->target)) return false;
    const zpy_conjugate *target = (const zpy_conjugate *)value;
    if (!ZPY_CONJUGATE_IS_LIVE(target) || target->runtime != rt) return false;
    *out = zpy_conjugate_share(target);
    return true;
}

/* Let Python raise the precise error for a store that cannot happen. */
static int reference_store_failed(zpy_reference_property *property, PyObject *obj,
                                  PyObject *value) {
    zpy_core_state *state = zpy_state_of_type(Py_TYPE(property));
    PyObject *result = PyObject_CallFunctionObjArgs(state->store_failed, obj, value, property->what,
                                                    NULL);
    if (result != NULL) {
        Py_DECREF(result);
        PyErr_Format(PyExc_TypeError, "cannot store into %U", property->what);
    }
    return -1;
}

/* Store through zs_store_ref (checks, write barrier), under the GIL. */
static int reference_set(PyObject *self, PyObject *obj, PyObject *value) {
    zpy_reference_property *property = (zpy_reference_property *)self;
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "cannot delete property %U", property->what);
        return -1;
    }
    zpy_core_state *state = zpy_state_of_type(Py_TYPE(self));
    if (zpy_is_conjugate(state, obj) && ZPY_CONJUGATE_IS_LIVE((zpy_conjugate *)obj) &&
        !zpy_conjugate_is_a((zpy_conjugate *)obj, property->owner))
        return zpy_descriptor_misapplied(property->what, property->owner, obj);
    if (!zpy_is_conjugate(state, obj))
        return zpy_descriptor_misapplied(property->what, property->owner, obj);
    zpy_conjugate *holder = (zpy_conjugate *)obj;
    zpy_runtime_core *rt = holder->runtime;
    zs_ref ref;
    if (!reference_target(property, rt, value, &ref) || !ZPY_CONJUGATE_IS_LIVE(holder) ||
        !zpy_open(rt))
        return reference_store_failed(property, obj, value);
    zs_status status = zs_store_ref(rt->native, holder->handle, property->offset, ref);
    if (status == ZS_OK) return 0;
    PyObject *result = PyObject_CallFunction(rt->state->store_refused, "OiO", (PyObject *)rt,
                                             (int)status, property->what);
    Py_XDECREF(result);
    if (result != NULL)
        PyErr_Format(PyExc_RuntimeError, "%U: the store was refused", property->what);
    return -1;
}

/* ReferenceProperty(owner, target, what, offset, doc) */
static PyObject *reference_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"owner", "target", "what", "offset", "doc", NULL};
    PyTypeObject *owner, *target;
    PyObject *what, *doc;
    unsigned int offset;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!UIO:ReferenceProperty", keywords,
                                     &PyType_Type, &owner, &PyType_Type, &target, &what, &offset,
                                     &doc))
        return NULL;
    zpy_core_state *state = zpy_state_of_type(type);
    if (!PyType_IsSubtype(owner, state->conjugate_type) ||
        !PyType_IsSubtype(target, state->conjugate_type)) {
        PyErr_SetString(PyExc_TypeError, "ReferenceProperty: owner and target must be object "
                                         "conjugate classes");
        return NULL;
    }
    if (offset < sizeof(zs_object) || offset % sizeof(zs_ref) != 0) {
        PyErr_SetString(PyExc_ValueError, "ReferenceProperty: bad offset");
        return NULL;
    }
    zpy_reference_property *property = (zpy_reference_property *)type->tp_alloc(type, 0);
    if (property == NULL) return NULL;
    property->owner = (PyTypeObject *)Py_NewRef(owner);
    property->target = (PyTypeObject *)Py_NewRef(target);
    property->what = Py_NewRef(what);
    property->doc = Py_NewRef(doc);
    property->offset = offset;
    return (PyObject *)property;
}

/* A descriptor and its classes refer to each other: the cycle collector's view. */
static int reference_traverse(PyObject *self, visitproc visit, void *arg) {
    zpy_reference_property *property = (zpy_reference_property *)self;
    Py_VISIT(property->owner);
    Py_VISIT(property->target);
    Py_VISIT(property->doc);
    Py_VISIT(Py_TYPE(self));
    return 0;
}

/* Break that cycle. */
static int reference_clear(PyObject *self) {
    zpy_reference_property *property = (zpy_reference_property *)self;
    Py_CLEAR(property->owner);
    Py_CLEAR(property->target);
    Py_CLEAR(property->doc);
    return 0;
}

/* Free a reference descriptor. */
static void reference_dealloc(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    reference_clear(self);
    Py_CLEAR(((zpy_reference_property *)self)->what);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyMemberDef reference_members[] = {
    {"__doc__", T_OBJECT, offsetof(zpy_reference_property, doc), READONLY, NULL},
    {"offset", T_UINT, offsetof(zpy_reference_property, offset), READONLY,
     "Offset of the member in the native object."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot reference_slots[] = {
    {Py_tp_new, reference_new},           {Py_tp_dealloc, reference_dealloc},
    {Py_tp_traverse, reference_traverse}, {Py_tp_clear, reference_clear},
    {Py_tp_descr_get, reference_get},     {Py_tp_descr_set, reference_set},
    {Py_tp_members, reference_members},   {0, NULL},
};

static PyType_Spec reference_spec = {
    .name = "zsharp_py._core.ReferenceProperty",
    .basicsize = sizeof(zpy_reference_property),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = reference_slots,
};

/* =========================================================================
 * Constructor keywords (Cls(health=5, target=other) in C, zpy_object_classes.c)
 * ========================================================================= */

/* Convert and check one keyword for `descriptor` with no Python code: 1 when
 * ready, 0 when the Python constructor must decide (another kind of
 * property, a value that needs a Python conversion, anything it would
 * refuse: it gives the precise error). Never sets an error. */
int zpy_prepare_store(zpy_core_state *state, PyTypeObject *cls, PyObject *descriptor,
                      zpy_runtime_core *rt, PyObject *value, zpy_prepared_store *out) {
    /* A descriptor of another class's layout (copied onto this one as a
       plain class attribute) would write out of bounds: Python refuses it. */
    if (Py_TYPE(descriptor) == state->scalar_type) {
        zpy_scalar_property *property = (zpy_scalar_property *)descriptor;
        zpy_scalar_bits bits;
        if (!PyType_IsSubtype(cls, property->owner) ||
            !zpy_scalar_convert_exact(property->kind, value, &bits))
            return 0;
        out->offset = (uint32_t)property->offset;
        out->size = (uint32_t)zpy_scalar_size(property->kind);
        memcpy(out->bits, &bits, out->size);
        return 1;
    }
    if (Py_TYPE(descriptor) == state->reference_type) {
        zpy_reference_property *property = (zpy_reference_property *)descriptor;
        zs_ref ref;
        if (!PyType_IsSubtype(cls, property->owner) || !reference_target(property, rt, value, &ref))
            return 0;
        out->offset = property->offset;
        out->size = 0;
        out->ref = ref;
        return 1;
    }
    return 0;
}

/* Write a prepared keyword into a new object; a reference goes through
 * zs_store_ref (its target may have died since, on another thread). */
zs_status zpy_apply_store(zpy_runtime_core *rt, zpy_conjugate *conjugate,
                          const zpy_prepared_store *store) {
    assert(ZPY_CONJUGATE_IS_LIVE(conjugate));
    if (store->size != 0) {
        memcpy(conjugate->address + store->offset, store->bits, store->size);
        return ZS_OK;
    }
    if (store->ref == ZS_NULL_REF) return ZS_OK; /* a new object's references start null */
    return zs_store_ref(rt->native, conjugate->handle, store->offset, store->ref);
}

/* Create the descriptor types and add them to the module. */
int zpy_add_property_types(PyObject *module, zpy_core_state *state) {
    state->scalar_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &scalar_spec, NULL);
    if (state->scalar_type == NULL ||
        PyModule_AddObjectRef(module, "ScalarProperty", (PyObject *)state->scalar_type) < 0)
        return -1;
    state->reference_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &reference_spec, NULL);
    if (state->reference_type == NULL ||
        PyModule_AddObjectRef(module, "ReferenceProperty", (PyObject *)state->reference_type) < 0)
        return -1;
    return 0;
}
