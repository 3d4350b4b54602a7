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

typedef struct zpyv_property {
    PyObject_HEAD PyTypeObject *owner; /* the class whose layout `offset` belongs to */
    zpyv_kind *owner_kind; /* struct owners: the struct's kind; NULL for object owners */
    zpyv_kind *kind;       /* the property's kind (MemberProperty: a scalar) */
    PyObject *what;        /* "Class.name", for errors */
    PyObject *doc;
    zpy_core_state *state; /* the module's (outlives the descriptor: its type holds it) */
    uint32_t offset;
} zpyv_property;

/* =========================================================================
 * Holders
 * ========================================================================= */

/* What a descriptor is given, checked: the holder's memory (NULL with an
 * error when it is not a live holder of the descriptor's class), its
 * runtime, the object whose memory it is and, if `views` is not NULL, the
 * slot of its views table. */
static char *holder_memory(zpyv_property *property, PyObject *obj, zpy_runtime_core **rt,
                           zs_ref *owner, zpyv_table ***views) {
    zpy_core_state *state = property->state;
    if (property->owner_kind == NULL) {
        if (zpy_is_conjugate(state, obj)) {
            zpy_conjugate *conjugate = (zpy_conjugate *)obj;
            if (!ZPY_CONJUGATE_IS_LIVE(conjugate)) return zpy_raise_expired(conjugate), NULL;
            if (zpy_conjugate_is_a(conjugate, property->owner)) {
                *rt = conjugate->runtime;
                *owner = conjugate->handle;
                if (views != NULL) *views = &conjugate->u.views;
                return conjugate->address;
            }
        }
    } else if (zpyv_check(state, obj) && ((zpyv_value *)obj)->kind == property->owner_kind) {
        zpyv_value *value = (zpyv_value *)obj;
        char *at = zpyv_live(value);
        *rt = value->runtime;
        *owner = value->owner;
        if (views != NULL) *views = &value->views;
        return at;
    }
    zpy_descriptor_misapplied(property->what, property->owner, obj);
    return NULL;
}

/* The address of a member in a holder as it is now (a zpyv_locator). */
static char *member_locator(PyObject *holder, Py_ssize_t offset) {
    PyTypeObject *type = Py_TYPE(holder);
    zpy_core_state *state = zpy_state_of_type(type);
    if (zpy_is_conjugate(state, holder)) {
        zpy_conjugate *conjugate = (zpy_conjugate *)holder;
        if (!ZPY_CONJUGATE_IS_LIVE(conjugate)) return zpy_raise_expired(conjugate), NULL;
        return conjugate->address + offset;
    }
    char *at = zpyv_live((zpyv_value *)holder);
    return at ? at + offset : NULL;
}

/* The views table of a live holder (objects and values alike). */
static zpyv_table *holder_views(zpy_core_state *state, PyObject *holder) {
    if (zpy_is_conjugate(state, holder)) return ((zpy_conjugate *)holder)->u.views;
    return ((zpyv_value *)holder)->views;
}

/* =========================================================================
 * ValueProperty
 * ========================================================================= */

static PyObject *property_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    zpyv_property *property = (zpyv_property *)self;
    if (obj == NULL) return Py_NewRef(self);
    zpy_runtime_core *rt;
    zs_ref owner;
    zpyv_table **views;
    if (holder_memory(property, obj, &rt, &owner, &views) == NULL) return NULL;
    return zpyv_read_member(rt, property->kind, obj, views, property->offset, owner,
                            member_locator);
}

/* The member at `offset` of `holder` was written: the views below its view
 * expire (the view itself stays: its contents were replaced). No Python
 * code. */
static void written(zpy_core_state *state, PyObject *holder, uint32_t offset) {
    zpyv_value *view = zpyv_table_lookup(holder_views(state, holder), offset);
    if (view != NULL) zpyv_expire_table(view->views, state->reason_structure);
}

/* Stage, then write with no Python code between resolving and writing. */
static int property_set(PyObject *self, PyObject *obj, PyObject *value) {
    zpyv_property *property = (zpyv_property *)self;
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "cannot delete property %U", property->what);
        return -1;
    }
    zpy_runtime_core *rt;
    zs_ref owner;
    char *base = holder_memory(property, obj, &rt, &owner, NULL);
    if (base == NULL) return -1;
    zpyv_staged staged = {0};
    zpyv_quick quick;
    /* A value staged with no Python code (zpyv_stage_quick; zpyv_native_type
       runs none either): the holder is as just checked, so the write goes
       there with nothing run in between. */
    if (zpyv_native_type(rt, property->kind) == NULL) return zpy_error_prefix(property->what);
    if (zpyv_stage_quick(rt, property->kind, value, &staged, &quick)) {
        zs_status status = zpyv_emit(rt, property->kind, &staged, owner, base + property->offset);
        written(rt->state, obj, property->offset); /* done or refused, as below */
        if (status != ZS_OK) return zpyv_refused(rt, status, property->what), -1;
        return 0; /* nothing to release: `staged` borrows */
    }
    Py_INCREF(rt);
    if (zpyv_stage(rt, property->kind, value, &staged, property->what) < 0) {
        zpy_error_prefix(property->what);
        Py_DECREF(rt);
        return -1;
    }
    /* Phase 2: the holder again, as it is now (the staging may have run
       anything); then the write; then the views it invalidates. */
    zs_status status = ZS_OK;
    zpy_runtime_core *now = NULL;
    base = holder_memory(property, obj, &now, &owner, NULL);
    if (base != NULL && now == rt) {
        status = zpyv_emit(rt, property->kind, &staged, owner, base + property->offset);
        /* Done or refused: the views below expire, as after any structural
           change (a change that fails may have moved the storage first). */
        written(rt->state, obj, property->offset);
    }
    zpyv_release(property->kind, &staged);
    int result = 0;
    if (base == NULL) result = -1; /* the holder expired during the staging: its error is set */
    else if (status != ZS_OK) result = (zpyv_refused(rt, status, property->what), -1);
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
    zpy_core_state *state = zpy_state_of_type(type);
    int object_owner = PyType_IsSubtype(owner, state->conjugate_type) &&
                       PyObject_TypeCheck((PyObject *)owner, state->class_type);
    if (!zpyv_is_kind(state, kind) || (owner_kind != Py_None && !zpyv_is_kind(state, owner_kind)) ||
        (owner_kind == Py_None) != object_owner ||
        (owner_kind != Py_None && !PyType_IsSubtype(owner, state->value_type))) {
        PyErr_SetString(PyExc_TypeError, "ValueProperty: an object class without owner_kind, or "
                                         "a value class with its kind");
        return NULL;
    }
    zpyv_kind *member = (zpyv_kind *)kind;
    uint32_t limit = owner_kind != Py_None ? ((zpyv_kind *)owner_kind)->size : UINT32_MAX;
    if ((object_owner && offset < sizeof(zs_object)) || offset % member->align != 0 ||
        offset + member->size > limit) {
        PyErr_SetString(PyExc_ValueError, "ValueProperty: bad offset");
        return NULL;
    }
    zpyv_property *property = (zpyv_property *)type->tp_alloc(type, 0);
    if (property == NULL) return NULL;
    property->owner = (PyTypeObject *)Py_NewRef(owner);
    property->owner_kind = owner_kind != Py_None ? (zpyv_kind *)Py_NewRef(owner_kind) : NULL;
    property->kind = (zpyv_kind *)Py_NewRef(kind);
    property->what = Py_NewRef(what);
    property->doc = Py_NewRef(doc);
    property->state = state;
    property->offset = offset;
    return (PyObject *)property;
}

static int property_traverse(PyObject *self, visitproc visit, void *arg) {
    zpyv_property *property = (zpyv_property *)self;
    Py_VISIT(property->owner);
    Py_VISIT(property->owner_kind);
    Py_VISIT(property->kind);
    Py_VISIT(property->doc);
    Py_VISIT(Py_TYPE(self));
    return 0;
}

static int property_clear(PyObject *self) {
    zpyv_property *property = (zpyv_property *)self;
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
    Py_CLEAR(((zpyv_property *)self)->what);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyMemberDef property_members[] = {
    {"__doc__", T_OBJECT, offsetof(zpyv_property, doc), READONLY, NULL},
    {"offset", T_UINT, offsetof(zpyv_property, offset), READONLY, "Offset of the member."},
    {"kind", T_OBJECT, offsetof(zpyv_property, kind), READONLY, "The member's kind."},
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
    .basicsize = sizeof(zpyv_property),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = property_slots,
};

int zpyv_property_info(zpy_core_state *state, PyObject *descriptor, PyTypeObject **owner,
                       zpyv_kind **owner_kind, zpyv_kind **kind, uint32_t *offset,
                       PyObject **what) {
    if (Py_TYPE(descriptor) != state->value_property_type &&
        Py_TYPE(descriptor) != state->member_type)
        return 0;
    zpyv_property *property = (zpyv_property *)descriptor;
    *owner = property->owner;
    *owner_kind = property->owner_kind;
    *kind = property->kind;
    *offset = property->offset;
    *what = property->what;
    return 1;
}

int zpyv_member_owner_kind(zpy_core_state *state, PyObject *descriptor, zpyv_kind **owner_kind) {
    PyTypeObject *owner;
    zpyv_kind *kind;
    uint32_t offset;
    PyObject *what;
    return zpyv_property_info(state, descriptor, &owner, owner_kind, &kind, &offset, &what) &&
           *owner_kind != NULL;
}

int zpyv_object_value_property(zpy_core_state *state, PyTypeObject *cls, PyObject *descriptor,
                               zpyv_kind **kind, uint32_t *offset, PyObject **what) {
    if (Py_TYPE(descriptor) != state->value_property_type) return 0;
    zpyv_property *property = (zpyv_property *)descriptor;
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
static inline zpyv_value *struct_of(zpyv_property *property, PyObject *obj) {
    zpy_core_state *state = property->state;
    if (zpyv_check(state, obj) && ((zpyv_value *)obj)->kind == property->owner_kind) {
        zpyv_value *value = (zpyv_value *)obj;
        return value->address != NULL ? value : (zpyv_raise_expired(value), NULL);
    }
    zpy_descriptor_misapplied(property->what, property->owner, obj);
    return NULL;
}

static PyObject *member_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    zpyv_property *property = (zpyv_property *)self;
    if (obj == NULL) return Py_NewRef(self);
    zpyv_value *value = struct_of(property, obj);
    if (value == NULL) return NULL;
    return zpy_scalar_load((zpy_scalar_kind)property->kind->scalar,
                           value->address + property->offset);
}

static int member_set(PyObject *self, PyObject *obj, PyObject *new_value) {
    zpyv_property *property = (zpyv_property *)self;
    if (new_value == NULL) {
        PyErr_Format(PyExc_AttributeError, "cannot delete member %U", property->what);
        return -1;
    }
    if (struct_of(property, obj) == NULL) return -1;
    zpy_scalar_bits bits;
    if (zpy_scalar_convert((zpy_scalar_kind)property->kind->scalar, new_value, &bits,
                           property->what) < 0)
        return -1;
    /* The conversion may have run Python code: the value again, then the write. */
    zpyv_value *value = struct_of(property, obj);
    if (value == NULL) return -1;
    zs_status status = zpyv_writable(value->runtime, value->owner);
    if (status != ZS_OK) return zpyv_refused(value->runtime, status, property->what), -1;
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
    zpy_core_state *state = zpy_state_of_type(type);
    if (!zpyv_is_kind(state, kind) || !zpyv_is_kind(state, owner_kind) ||
        ((zpyv_kind *)kind)->code != ZPYV_SCALAR ||
        ((zpyv_kind *)owner_kind)->code != ZPYV_STRUCT ||
        !PyType_IsSubtype(owner, state->value_type) ||
        offset + ((zpyv_kind *)kind)->size > ((zpyv_kind *)owner_kind)->size ||
        offset % ((zpyv_kind *)kind)->align != 0) {
        PyErr_SetString(PyExc_TypeError, "MemberProperty: a scalar member inside a struct kind");
        return NULL;
    }
    zpyv_property *property = (zpyv_property *)type->tp_alloc(type, 0);
    if (property == NULL) return NULL;
    property->owner = (PyTypeObject *)Py_NewRef(owner);
    property->owner_kind = (zpyv_kind *)Py_NewRef(owner_kind);
    property->kind = (zpyv_kind *)Py_NewRef(kind);
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
    .basicsize = sizeof(zpyv_property),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = member_slots,
};

int zpyv_add_member_types(PyObject *module, zpy_core_state *state) {
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
