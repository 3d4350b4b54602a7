/* Field paths: the C base of zs.FieldPath, whose get() and set() read and
 * write a scalar at a fixed offset when the path allows it.
 *
 * A path such as "Actor.pos.x" walks inline struct members down to a
 * scalar: the scalar then sits at one byte offset from the start of any
 * Actor (or subclass), so get() and set() check the root (live, of the
 * path's class in its runtime: the same checks as the descriptors) and read
 * or write there, with no view made for `pos`. A plan is made once per root
 * class (from the descriptors the Python side resolves, zsharp_py/
 * _types/fieldpath.py) and kept while none of the classes walked changes (their
 * version tags: a property replaced on a class makes the plan stale). Any
 * other path (through an object reference, into a container, to a value
 * that is not a scalar) takes the Python walk, _get_slow and _set_slow.
 */
#include "value.h"

/* The steps a plan can check; longer paths take the Python walk. */
#define ZPY_PATH_STEPS 8
/* Plans kept per path (root classes it is used with); round robin. */
#define ZPY_PATH_PLANS 2

typedef struct zpy_path_plan {
    PyTypeObject *root;        /* strong; NULL: an empty slot */
    unsigned int root_version; /* its version tag when the plan was made */
    PyTypeObject *owner;       /* strong: an object root's class the first step belongs to */
    zpyv_kind *owner_kind;     /* strong: a struct root's kind */
    PyObject *what;            /* strong: the last step's "Class.name", for errors */
    PyTypeObject *classes[ZPY_PATH_STEPS]; /* borrowed (the descriptors hold them) */
    unsigned int versions[ZPY_PATH_STEPS];
    PyObject *descriptors; /* strong: the tuple of descriptors, which hold the classes */
    uint32_t offset;
    uint8_t steps;
    zpy_scalar_kind kind;
} zpy_path_plan;

typedef struct zpy_field_path {
    PyObject_HEAD zpy_path_plan plans[ZPY_PATH_PLANS];
    uint8_t next; /* the slot the next plan replaces */
} zpy_field_path;

/* =========================================================================
 * Plans
 * ========================================================================= */

static void plan_clear(zpy_path_plan *plan) {
    Py_CLEAR(plan->root);
    Py_CLEAR(plan->owner);
    Py_CLEAR(plan->owner_kind);
    Py_CLEAR(plan->what);
    Py_CLEAR(plan->descriptors);
    plan->steps = 0;
}

/* Whether a class still has the version tag it had when the plan was made. */
static inline int unchanged(PyTypeObject *cls, unsigned int version) {
    return (cls->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) && cls->tp_version_tag == version;
}

/* The current plan for roots of `root`'s class, or NULL. */
static zpy_path_plan *plan_for(zpy_field_path *path, PyTypeObject *root) {
    for (int i = 0; i < ZPY_PATH_PLANS; i++) {
        zpy_path_plan *plan = &path->plans[i];
        if (plan->root != root || !unchanged(root, plan->root_version)) continue;
        for (uint8_t s = 0; s < plan->steps; s++)
            if (!unchanged(plan->classes[s], plan->versions[s])) return NULL;
        return plan;
    }
    return NULL;
}

/* The scalar kind, offset and owner a descriptor of one step gives: 1 for a
 * scalar (the last step), 2 for an inline struct (the walk goes on), 0 for
 * anything else. `struct_kind`: the struct the step is in (NULL: an object
 * class). */
static int step_of(zpy_core_state *state, PyObject *descriptor, zpyv_kind *struct_kind,
                   zpy_scalar_kind *scalar, uint32_t *offset, zpyv_kind **inner,
                   PyTypeObject **owner, PyObject **what) {
    if (struct_kind == NULL && Py_TYPE(descriptor) == state->scalar_type)
        return zpy_scalar_property_info(descriptor, owner, offset, scalar, what);
    zpyv_kind *kind;
    zpyv_kind *held_by;
    if (!zpyv_property_info(state, descriptor, owner, &held_by, &kind, offset, what) ||
        held_by != struct_kind)
        return 0;
    if (kind->code == ZPYV_SCALAR && struct_kind != NULL) {
        *scalar = (zpy_scalar_kind)kind->scalar;
        return 1;
    }
    if (kind->code == ZPYV_STRUCT) {
        *inner = kind;
        return 2;
    }
    return 0;
}

/* _compile(root_class, steps): make the direct plan for roots of
 * `root_class` from the path's steps, a tuple of (class, descriptor); True
 * if the path allows one (then get and set use it). */
static PyObject *path_compile(PyObject *self, PyObject *args) {
    PyTypeObject *root;
    PyObject *steps;
    if (!PyArg_ParseTuple(args, "O!O!:_compile", &PyType_Type, &root, &PyTuple_Type, &steps))
        return NULL;
    zpy_core_state *state = zpy_state_of_type(Py_TYPE(self));
    Py_ssize_t count = PyTuple_GET_SIZE(steps);
    if (count == 0 || count > ZPY_PATH_STEPS) Py_RETURN_FALSE;
    int object_root = PyType_IsSubtype(root, state->conjugate_type);
    zpyv_kind *in_struct = NULL, *root_kind = NULL;
    PyTypeObject *root_owner = NULL;
    PyObject *what = NULL;
    uint32_t total = 0;
    zpy_scalar_kind scalar = ZPY_SCALAR_BOOL;
    zpy_path_plan made = {0};
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *step = PyTuple_GET_ITEM(steps, i);
        if (!PyTuple_Check(step) || PyTuple_GET_SIZE(step) != 2 ||
            !PyType_Check(PyTuple_GET_ITEM(step, 0)))
            return PyErr_Format(PyExc_TypeError, "_compile: steps are (class, descriptor)");
        PyTypeObject *cls = (PyTypeObject *)PyTuple_GET_ITEM(step, 0);
        PyTypeObject *owner = NULL;
        uint32_t offset = 0;
        zpyv_kind *inner = NULL;
        if (i == 0 && !object_root) {
            /* A struct root: its kind is the kind of the struct the first
               step's member is in. */
            if (!zpyv_member_owner_kind(state, PyTuple_GET_ITEM(step, 1), &root_kind))
                Py_RETURN_FALSE;
            in_struct = root_kind;
        }
        int found = step_of(state, PyTuple_GET_ITEM(step, 1), in_struct, &scalar, &offset, &inner,
                            &owner, &what);
        if (found == 0 || (found == 1) != (i == count - 1))
            Py_RETURN_FALSE; /* not a scalar at the end of inline structs */
        if (i == 0) root_owner = owner;
        /* The class's version tag: looking a name up assigns one. */
        (void)_PyType_Lookup(cls, state->str_name);
        if (!(cls->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)) Py_RETURN_FALSE;
        made.classes[i] = cls;
        made.versions[i] = cls->tp_version_tag;
        total += offset;
        in_struct = inner;
    }
    (void)_PyType_Lookup(root, state->str_name);
    if (!(root->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ||
        (object_root && (root_owner == NULL || !PyType_IsSubtype(root, root_owner))))
        Py_RETURN_FALSE;
    zpy_field_path *path = (zpy_field_path *)self;
    zpy_path_plan *plan = &path->plans[path->next];
    path->next = (uint8_t)((path->next + 1) % ZPY_PATH_PLANS);
    plan_clear(plan);
    *plan = made;
    plan->root = (PyTypeObject *)Py_NewRef((PyObject *)root);
    plan->root_version = root->tp_version_tag;
    plan->owner = object_root ? (PyTypeObject *)Py_NewRef((PyObject *)root_owner) : NULL;
    plan->owner_kind = object_root ? NULL : (zpyv_kind *)Py_NewRef((PyObject *)root_kind);
    plan->what = Py_NewRef(what);
    plan->descriptors = Py_NewRef(steps);
    plan->offset = total;
    plan->steps = (uint8_t)count;
    plan->kind = scalar;
    Py_RETURN_TRUE;
}

/* The scalar's address in a live root the plan applies to, with the
 * runtime and the object whose memory it is; NULL with the descriptors'
 * error otherwise (expired, or not of the path's class). */
static char *scalar_in(zpy_core_state *state, const zpy_path_plan *plan, PyObject *root,
                       zpy_runtime_core **rt, zs_ref *owner) {
    if (plan->owner != NULL) {
        zpy_conjugate *conjugate = (zpy_conjugate *)root;
        if (!ZPY_CONJUGATE_IS_LIVE(conjugate)) return zpy_raise_expired(conjugate), NULL;
        if (!zpy_conjugate_is_a(conjugate, plan->owner))
            return zpy_descriptor_misapplied(plan->what, plan->owner, root), NULL;
        *rt = conjugate->runtime;
        *owner = conjugate->handle;
        return conjugate->address + plan->offset;
    }
    zpyv_value *value = (zpyv_value *)root;
    if (!zpyv_check(state, root) || value->kind != plan->owner_kind)
        return zpy_descriptor_misapplied(plan->what, Py_TYPE(root), root), NULL;
    char *at = zpyv_live(value);
    *rt = value->runtime;
    *owner = value->owner;
    return at ? at + plan->offset : NULL;
}

/* The plan for `root`, made on first use (by the Python side); NULL when
 * the path takes the Python walk for it (no error), or with an error. */
static zpy_path_plan *plan_of(PyObject *self, PyObject *root) {
    zpy_field_path *path = (zpy_field_path *)self;
    zpy_path_plan *plan = plan_for(path, Py_TYPE(root));
    if (plan != NULL) return plan;
    PyObject *made = PyObject_CallMethod(self, "_plan", "O", (PyObject *)Py_TYPE(root));
    if (made == NULL) return NULL;
    Py_DECREF(made);
    return plan_for(path, Py_TYPE(root));
}

/* get(root) */
static PyObject *path_get(PyObject *self, PyObject *root) {
    zpy_path_plan *plan = plan_of(self, root);
    if (plan == NULL)
        return PyErr_Occurred() ? NULL : PyObject_CallMethod(self, "_get_slow", "O", root);
    zpy_runtime_core *rt;
    zs_ref owner;
    char *at = scalar_in(zpy_state_of_type(Py_TYPE(self)), plan, root, &rt, &owner);
    return at ? zpy_scalar_load(plan->kind, at) : NULL;
}

/* set(root, value): convert first (maybe Python code), then find the
 * scalar again and write it. */
static PyObject *path_set(PyObject *self, PyObject *const *args, Py_ssize_t count) {
    if (count != 2)
        return PyErr_Format(PyExc_TypeError, "set() takes a root and a value (%zd given)", count);
    PyObject *root = args[0], *value = args[1];
    zpy_path_plan *plan = plan_of(self, root);
    if (plan == NULL)
        return PyErr_Occurred() ? NULL : PyObject_CallMethod(self, "_set_slow", "OO", root, value);
    zpy_core_state *state = zpy_state_of_type(Py_TYPE(self));
    zpy_runtime_core *rt;
    zs_ref owner;
    if (scalar_in(state, plan, root, &rt, &owner) == NULL) return NULL;
    zpy_scalar_kind kind = plan->kind;
    PyObject *what = Py_NewRef(plan->what); /* the plan may be replaced meanwhile */
    zpy_scalar_bits bits;
    int converted = zpy_scalar_convert(kind, value, &bits, what);
    Py_DECREF(what);
    if (converted < 0) return NULL;
    /* Python code may have run: the plan and the root again. */
    plan = plan_for((zpy_field_path *)self, Py_TYPE(root));
    if (plan == NULL || plan->kind != kind)
        return PyObject_CallMethod(self, "_set_slow", "OO", root, value);
    char *at = scalar_in(state, plan, root, &rt, &owner);
    if (at == NULL) return NULL;
    zs_status status = zpyv_writable(rt, owner); /* the one rule for dying objects */
    if (status != ZS_OK) return zpyv_refused(rt, status, plan->what);
    zpy_scalar_store(kind, &bits, at);
    Py_RETURN_NONE;
}

/* =========================================================================
 * The type
 * ========================================================================= */

static int path_traverse(PyObject *self, visitproc visit, void *arg) {
    zpy_field_path *path = (zpy_field_path *)self;
    for (int i = 0; i < ZPY_PATH_PLANS; i++) {
        Py_VISIT(path->plans[i].root);
        Py_VISIT(path->plans[i].owner);
        Py_VISIT(path->plans[i].owner_kind);
        Py_VISIT(path->plans[i].descriptors);
    }
    Py_VISIT(Py_TYPE(self));
    return 0;
}

static int path_clear(PyObject *self) {
    zpy_field_path *path = (zpy_field_path *)self;
    for (int i = 0; i < ZPY_PATH_PLANS; i++) plan_clear(&path->plans[i]);
    return 0;
}

static void path_dealloc(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    path_clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyMethodDef path_methods[] = {
    {"_compile", path_compile, METH_VARARGS,
     "Make the direct plan for roots of a class from (class, descriptor) steps."},
    {"_get", path_get, METH_O,
     "Read the property the path names, starting from `root` (an object or struct of the "
     "path's class). Struct and container values come back as red views, as a property read "
     "would give them."},
    {"_set", (PyCFunction)(void (*)(void))path_set, METH_FASTCALL,
     "Write the property the path names (through struct views)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot path_slots[] = {
    {Py_tp_doc, "The C base of zs.FieldPath: direct plans for get() and set()."},
    {Py_tp_dealloc, path_dealloc},
    {Py_tp_traverse, path_traverse},
    {Py_tp_clear, path_clear},
    {Py_tp_methods, path_methods},
    {0, NULL},
};

static PyType_Spec path_spec = {
    .name = "zsharp_py._core.FieldPathBase",
    .basicsize = sizeof(zpy_field_path),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = path_slots,
};

int zpyv_add_field_path_type(PyObject *module, zpy_core_state *state) {
    (void)state;
    PyObject *type = PyType_FromModuleAndSpec(module, &path_spec, NULL);
    if (type == NULL) return -1;
    int result = PyModule_AddObjectRef(module, "FieldPathBase", type);
    Py_DECREF(type);
    return result;
}
