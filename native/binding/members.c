/* Property descriptors for values: ValueProperty (a property of any value
 * kind, on an object class or a struct class) and MemberProperty (a scalar
 * member of a struct class: the hot path of `a.pos.x`).
 *
 * Every access first checks what it is given: an object's native class must
 * be (or derive from) the descriptor's class in that runtime, a struct
 * value's kind must be the descriptor's struct kind. So no descriptor
 * applied to a foreign instance, and no conjugate re-classed through
 * object.__class__, can read or write outside its memory. Writes follow the
 * rule of value.h: stage, then resolve and write with no Python code
 * between, then release.
 */
#include "value.h"

#include <structmember.h>

typedef struct zsv_property {
    PyObject_HEAD PyTypeObject *owner; /* the class whose layout `offset` belongs to */
    zsv_kind *owner_kind; /* struct owners: the struct's kind; NULL for object owners */
    zsv_kind *kind;       /* the property's kind (MemberProperty: a scalar) */
    PyObject *what;       /* "Class.name", for errors */
    PyObject *doc;
    zs_core_state *state; /* the module's (outlives the descriptor: its type holds it) */
    uint32_t offset;
} zsv_property;

/* =========================================================================
 * Holders
 * ========================================================================= */

/* What a descriptor is given, checked: the holder's memory (NULL with an
 * error when it is not a live holder of the descriptor's class), its
 * runtime, the object whose memory it is and, if `views` is not NULL, the
 * slot of its views table. */
static char *holder_memory(zsv_property *property, PyObject *obj, zs_runtime_core **rt,
                           zs_ref *owner, zsv_table ***views) {
    zs_core_state *state = property->state;
    if (property->owner_kind == NULL) {
        if (zs_is_conjugate(state, obj)) {
            zs_conjugate *conjugate = (zs_conjugate *)obj;
            if (!ZS_CONJUGATE_IS_LIVE(conjugate)) return zs_raise_expired(conjugate), NULL;
            if (zs_conjugate_is_a(conjugate, property->owner)) {
                *rt = conjugate->runtime;
                *owner = conjugate->handle;
                if (views != NULL) *views = &conjugate->u.views;
                return conjugate->address;
            }
        }
    } else if (zsv_check(state, obj) && ((zsv_value *)obj)->kind == property->owner_kind) {
        zsv_value *value = (zsv_value *)obj;
        char *at = zsv_live(value);
        *rt = value->runtime;
        *owner = value->owner;
        if (views != NULL) *views = &value->views;
        return at;
    }
    zs_descriptor_misapplied(property->what, property->owner, obj);
    return NULL;
}

/* The address of a member in a holder as it is now (a zsv_locator). */
static char *member_locator(PyObject *holder, Py_ssize_t offset) {
    PyTypeObject *type = Py_TYPE(holder);
    zs_core_state *state = zs_state_of_type(type);
    if (zs_is_conjugate(state, holder)) {
        zs_conjugate *conjugate = (zs_conjugate *)holder;
        if (!ZS_CONJUGATE_IS_LIVE(conjugate)) return zs_raise_expired(conjugate), NULL;
        return conjugate->address + offset;
    }
    char *at = zsv_live((zsv_value *)holder);
    return at ? at + offset : NULL;
}

/* The views table of a live holder (objects and values alike). */
static zsv_table *holder_views(zs_core_state *state, PyObject *holder) {
    if (zs_is_conjugate(state, holder)) return ((zs_conjugate *)holder)->u.views;
    return ((zsv_value *)holder)->views;
}

/* =========================================================================
 * ValueProperty
 * ========================================================================= */

static PyObject *property_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    zsv_property *property = (zsv_property *)self;
    if (obj == NULL) return Py_NewRef(self);
    zs_runtime_core *rt;
    zs_ref owner;
    zsv_table **views;
    if (holder_memory(property, obj, &rt, &owner, &views) == NULL) return NULL;
    return zsv_read_member(rt, property->kind, obj, views, property->offset, owner, member_locator);
}

/* The member at `offset` of `holder` was written: the views below its view
 * expire (the view itself stays: its contents were replaced). No Python
 * code. */
static void written(zs_core_state *state, PyObject *holder, uint32_t offset) {
    zsv_value *view = zsv_table_lookup(holder_views(state, holder), offset);
    if (view != NULL) zsv_expire_table(view->views, state->reason_structure);
}

/* Stage, then write with no Python code between resolving and writing. */
static int property_set(PyObject *self, PyObject *obj, PyObject *value) {
    zsv_property *property = (zsv_property *)self;
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "cannot delete property %U", property->what);
        return -1;
    }
    zs_runtime_core *rt;
    zs_ref owner;
    char *base = holder_memory(property, obj, &rt, &owner, NULL);
    if (base == NULL) return -1;
    zsv_staged staged = {0};
    zsv_quick quick;
    /* A value staged with no Python code (zsv_stage_quick; zsv_native_type
       runs none either): the holder is as just checked, so the write goes
       there with nothing run in between. */
    if (zsv_native_type(rt, property->kind) == NULL) return zs_error_prefix(property->what);
    if (zsv_stage_quick(rt, property->kind, value, &staged, &quick)) {
        zs_status status = zsv_emit(rt, property->kind, &staged, owner, base + property->offset);
        if (status != ZS_OK) return zsv_refused(rt, status, property->what), -1;
        written(rt->state, obj, property->offset);
        return 0; /* nothing to release: `staged` borrows */
    }
    Py_INCREF(rt);
    if (zsv_stage(rt, property->kind, value, &staged, property->what) < 0) {
        zs_error_prefix(property->what);
        Py_DECREF(rt);
        return -1;
    }
    /* Phase 2: the holder again, as it is now (the staging may have run
       anything); then the write; then the views it invalidates. */
    zs_status status = ZS_OK;
    zs_runtime_core *now = NULL;
    base = holder_memory(property, obj, &now, &owner, NULL);
    if (base != NULL && now == rt) {
        status = zsv_emit(rt, property->kind, &staged, owner, base + property->offset);
        if (status == ZS_OK) written(rt->state, obj, property->offset);
    }
    zsv_release(property->kind, &staged);
    int result = 0;
    if (base == NULL) result = -1; /* the holder expired during the staging: its error is set */
    else if (status != ZS_OK) result = (zsv_refused(rt, status, property->what), -1);
    Py_DECREF(rt);
    return result;
}

/* ValueProperty(owner, kind, what, offset, doc, owner_kind=None) */
static PyObject *property_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"owner", "kind", "what", "offset", "doc", "owner_kind", NULL};
    PyTypeObject *owner;
    PyObject *kind, *what, *doc, *owner_kind = Py_None;
    unsigned int offset;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OUIO|O:ValueProperty", keywords, &PyType_Type,
                                     &owner, &kind, &what, &offset, &doc, &owner_kind))
        return NULL;
    zs_core_state *state = zs_state_of_type(type);
    int object_owner = PyType_IsSubtype(owner, state->conjugate_type) &&
                       PyObject_TypeCheck((PyObject *)owner, state->class_type);
    if (!zsv_is_kind(state, kind) || (owner_kind != Py_None && !zsv_is_kind(state, owner_kind)) ||
        (owner_kind == Py_None) != object_owner ||
        (owner_kind != Py_None && !PyType_IsSubtype(owner, state->value_type))) {
        PyErr_SetString(PyExc_TypeError, "ValueProperty: an object class without owner_kind, or "
                                         "a value class with its kind");
        return NULL;
    }
    zsv_kind *member = (zsv_kind *)kind;
    uint32_t limit = owner_kind != Py_None ? ((zsv_kind *)owner_kind)->size : UINT32_MAX;
    if ((object_owner && offset < sizeof(zs_object)) || offset % member->align != 0 ||
        offset + member->size > limit) {
        PyErr_SetString(PyExc_ValueError, "ValueProperty: bad offset");
        return NULL;
    }
    zsv_property *property = (zsv_property *)type->tp_alloc(type, 0);
    if (property == NULL) return NULL;
    property->owner = (PyTypeObject *)Py_NewRef(owner);
    property->owner_kind = owner_kind != Py_None ? (zsv_kind *)Py_NewRef(owner_kind) : NULL;
    property->kind = (zsv_kind *)Py_NewRef(kind);
    property->what = Py_NewRef(what);
    property->doc = Py_NewRef(doc);
    property->state = state;
    property->offset = offset;
    return (PyObject *)property;
}

static int property_traverse(PyObject *self, visitproc visit, void *arg) {
    zsv_property *property = (zsv_property *)self;
    Py_VISIT(property->owner);
    Py_VISIT(property->owner_kind);
    Py_VISIT(property->kind);
    Py_VISIT(property->doc);
    Py_VISIT(Py_TYPE(self));
    return 0;
}

static int property_clear(PyObject *self) {
    zsv_property *property = (zsv_property *)self;
    Py_CLEAR(property->owner);
    Py_CLEAR(property->owner_kind);
    Py_CLEAR(property->kind);
    Py_CLEAR(property->doc);
    return 0;
}

static void property_dealloc(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    property_clear(self);
    Py_CLEAR(((zsv_property *)self)->what);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyMemberDef property_members[] = {
    {"__doc__", T_OBJECT, offsetof(zsv_property, doc), READONLY, NULL},
    {"offset", T_UINT, offsetof(zsv_property, offset), READONLY, "Offset of the member."},
    {"kind", T_OBJECT, offsetof(zsv_property, kind), READONLY, "The member's kind."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot property_slots[] = {
    {Py_tp_new, property_new},           {Py_tp_dealloc, property_dealloc},
    {Py_tp_traverse, property_traverse}, {Py_tp_clear, property_clear},
    {Py_tp_descr_get, property_get},     {Py_tp_descr_set, property_set},
    {Py_tp_members, property_members},   {0, NULL},
};

static PyType_Spec property_spec = {
    .name = "zsharp_py._core.ValueProperty",
    .basicsize = sizeof(zsv_property),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = property_slots,
};

int zsv_property_info(zs_core_state *state, PyObject *descriptor, PyTypeObject **owner,
                      zsv_kind **owner_kind, zsv_kind **kind, uint32_t *offset, PyObject **what) {
    if (Py_TYPE(descriptor) != state->value_property_type &&
        Py_TYPE(descriptor) != state->member_type)
        return 0;
    zsv_property *property = (zsv_property *)descriptor;
    *owner = property->owner;
    *owner_kind = property->owner_kind;
    *kind = property->kind;
    *offset = property->offset;
    *what = property->what;
    return 1;
}

int zsv_member_owner_kind(zs_core_state *state, PyObject *descriptor, zsv_kind **owner_kind) {
    PyTypeObject *owner;
    zsv_kind *kind;
    uint32_t offset;
    PyObject *what;
    return zsv_property_info(state, descriptor, &owner, owner_kind, &kind, &offset, &what) &&
           *owner_kind != NULL;
}

int zsv_object_value_property(zs_core_state *state, PyTypeObject *cls, PyObject *descriptor,
                              zsv_kind **kind, uint32_t *offset, PyObject **what) {
    if (Py_TYPE(descriptor) != state->value_property_type) return 0;
    zsv_property *property = (zsv_property *)descriptor;
    if (property->owner_kind != NULL || !PyType_IsSubtype(cls, property->owner)) return 0;
    *kind = property->kind;
    *offset = property->offset;
    *what = property->what;
    return 1;
}

/* =========================================================================
 * MemberProperty: a scalar member of a struct
 * ========================================================================= */

/* The live struct value a member descriptor is given, or NULL (error set). */
static inline zsv_value *struct_of(zsv_property *property, PyObject *obj) {
    zs_core_state *state = property->state;
    if (zsv_check(state, obj) && ((zsv_value *)obj)->kind == property->owner_kind) {
        zsv_value *value = (zsv_value *)obj;
        return value->address != NULL ? value : (zsv_raise_expired(value), NULL);
    }
    zs_descriptor_misapplied(property->what, property->owner, obj);
    return NULL;
}

static PyObject *member_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    zsv_property *property = (zsv_property *)self;
    if (obj == NULL) return Py_NewRef(self);
    zsv_value *value = struct_of(property, obj);
    if (value == NULL) return NULL;
    return zs_scalar_load((zs_scalar_kind)property->kind->scalar,
                          value->address + property->offset);
}

static int member_set(PyObject *self, PyObject *obj, PyObject *new_value) {
    zsv_property *property = (zsv_property *)self;
    if (new_value == NULL) {
        PyErr_Format(PyExc_AttributeError, "cannot delete member %U", property->what);
        return -1;
    }
    if (struct_of(property, obj) == NULL) return -1;
    zs_scalar_bits bits;
    if (zs_scalar_convert((zs_scalar_kind)property->kind->scalar, new_value, &bits,
                          property->what) < 0)
        return -1;
    /* The conversion may have run Python code: the value again, then the write. */
    zsv_value *value = struct_of(property, obj);
    if (value == NULL) return -1;
    zs_status status = zsv_writable(value->runtime, value->owner);
    if (status != ZS_OK) return zsv_refused(value->runtime, status, property->what), -1;
    memcpy(value->address + property->offset, &bits, property->kind->size);
    return 0;
}

/* MemberProperty(owner, owner_kind, kind, what, offset, doc) */
static PyObject *member_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"owner", "owner_kind", "kind", "what", "offset", "doc", NULL};
    PyTypeObject *owner;
    PyObject *owner_kind, *kind, *what, *doc;
    unsigned int offset;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OOUIO:MemberProperty", keywords, &PyType_Type,
                                     &owner, &owner_kind, &kind, &what, &offset, &doc))
        return NULL;
    zs_core_state *state = zs_state_of_type(type);
    if (!zsv_is_kind(state, kind) || !zsv_is_kind(state, owner_kind) ||
        ((zsv_kind *)kind)->code != ZSV_SCALAR || ((zsv_kind *)owner_kind)->code != ZSV_STRUCT ||
        !PyType_IsSubtype(owner, state->value_type) ||
        offset + ((zsv_kind *)kind)->size > ((zsv_kind *)owner_kind)->size ||
        offset % ((zsv_kind *)kind)->align != 0) {
        PyErr_SetString(PyExc_TypeError, "MemberProperty: a scalar member inside a struct kind");
        return NULL;
    }
    zsv_property *property = (zsv_property *)type->tp_alloc(type, 0);
    if (property == NULL) return NULL;
    property->owner = (PyTypeObject *)Py_NewRef(owner);
    property->owner_kind = (zsv_kind *)Py_NewRef(owner_kind);
    property->kind = (zsv_kind *)Py_NewRef(kind);
    property->what = Py_NewRef(what);
    property->doc = Py_NewRef(doc);
    property->state = state;
    property->offset = offset;
    return (PyObject *)property;
}

static PyType_Slot member_slots[] = {
    {Py_tp_new, member_new},
    {Py_tp_dealloc, property_dealloc},
    {Py_tp_traverse, property_traverse},
    {Py_tp_clear, property_clear},
    {Py_tp_descr_get, member_get},
    {Py_tp_descr_set, member_set},
    {Py_tp_members, property_members},
    {0, NULL},
};

static PyType_Spec member_spec = {
    .name = "zsharp_py._core.MemberProperty",
    .basicsize = sizeof(zsv_property),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = member_slots,
};

int zsv_add_member_types(PyObject *module, zs_core_state *state) {
    state->value_property_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &property_spec,
                                                                          NULL);
    if (state->value_property_type == NULL ||
        PyModule_AddObjectRef(module, "ValueProperty", (PyObject *)state->value_property_type) < 0)
        return -1;
    state->member_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &member_spec, NULL);
    if (state->member_type == NULL ||
        PyModule_AddObjectRef(module, "MemberProperty", (PyObject *)state->member_type) < 0)
        return -1;
    return 0;
}
