/* Python state on object conjugates: the StateProperty descriptor, and the
 * release of a conjugate's state when its object dies.
 *
 * A class declaring zs.state() attributes (zsharp_py/_model/state.py) is
 * stateful: ObjectMeta (zsharp_py/_model/object.py) makes each attribute a
 * slot of its conjugates and init_class records the flag
 * (zpy_class_object.stateful, core.h). A stateful conjugate is never
 * destroyed before its object: the conjugate table holds a strong
 * reference to it from the moment its entry is put
 * (zpy_conjugate_bind, core.h: creation in C, zpy_object_classes.c, and adoption alike)
 * until the conjugate expires, so the state lives exactly as long as the
 * object, even while only native references reach it. Expiry takes the
 * entry out of the table first and gives the reference to
 * zpy_state_release once the conjugate is fully expired: the values go
 * (their finalisers may run any Python code), then the table's reference.
 *
 * Python's cycle collector: a class with object slots has tracked
 * instances (CPython's subtype_traverse and subtype_clear see the slots), so
 * `hero.me = hero` is an ordinary cycle. The table's reference is invisible
 * to the collector, so a live stateful conjugate always counts as
 * referenced from outside and is never collected; once it has expired its
 * slots are empty and refuse stores, so it is freed by refcount. Allocating
 * a tracked object may run a collection on the spot before Python 3.12,
 * hence zpy_conjugate_alloc (zpy_conjugate_table.c) pauses the collector for it:
 * creation and adoption run no Python code between their checks and their
 * table entry.
 *
 * StateProperty replaces each slot's member descriptor: every access checks
 * that the conjugate is live (after expiry the state is gone:
 * ExpiredConjugateError, as for properties), and a read of an unset slot
 * applies the declared default or factory, once.
 */
#include "value.h"

#include <structmember.h>

typedef struct zpy_state_property {
    PyObject_HEAD PyTypeObject *owner; /* the class that declared the attribute */
    PyObject *name;                    /* the attribute's name */
    PyObject *what;                    /* "Class.name", for errors */
    PyObject *initial;                 /* the default, or NULL */
    PyObject *factory;                 /* called for the first value, or NULL */
    Py_ssize_t offset;                 /* of the slot in the conjugate */
} zpy_state_property;

static inline PyObject **state_slot(PyObject *obj, Py_ssize_t offset) {
    return (PyObject **)((char *)obj + offset);
}

/* The live conjugate the descriptor is given (NULL with an error: not an
 * instance of its class, or expired). */
static zpy_conjugate *state_checked(zpy_state_property *property, PyObject *obj) {
    if (!PyObject_TypeCheck(obj, property->owner)) {
        zpy_descriptor_misapplied(property->what, property->owner, obj);
        return NULL;
    }
    zpy_conjugate *conjugate = (zpy_conjugate *)obj;
    if (!ZPY_CONJUGATE_IS_LIVE(conjugate)) return zpy_raise_expired(conjugate), NULL;
    return conjugate;
}

/* AttributeError for state that is not set and has no default. */
static PyObject *state_unset(zpy_state_property *property, PyObject *obj) {
    PyErr_Format(PyExc_AttributeError,
                 "'%s' object has no attribute '%U': %U is Python state declared without a "
                 "default (zs.state()); assign it first",
                 Py_TYPE(obj)->tp_name, property->name, property->what);
    return NULL;
}

/* The first read of unset state: the default, or the factory's value. The
 * factory may run any Python code: the conjugate is checked again after it,
 * and a value stored meanwhile wins. */
static __attribute__((noinline)) PyObject *state_first(zpy_state_property *property,
                                                       PyObject *obj) {
    if (property->initial == NULL && property->factory == NULL) return state_unset(property, obj);
    PyObject *made;
    if (property->factory != NULL) {
        Py_INCREF(obj);
        PyObject *factory = Py_NewRef(property->factory);
        made = PyObject_CallNoArgs(factory);
        Py_DECREF(factory);
        if (made != NULL && state_checked(property, obj) == NULL) Py_CLEAR(made);
        Py_DECREF(obj); /* the caller holds it too */
        if (made == NULL) return NULL;
    } else {
        made = Py_NewRef(property->initial);
    }
    PyObject **slot = state_slot(obj, property->offset);
    if (*slot != NULL) { /* stored by the factory's code */
        Py_DECREF(made);
        return Py_NewRef(*slot);
    }
    *slot = Py_NewRef(made);
    return made;
}

static PyObject *state_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    if (obj == NULL) return Py_NewRef(self);
    zpy_state_property *property = (zpy_state_property *)self;
    if (state_checked(property, obj) == NULL) return NULL;
    PyObject *value = *state_slot(obj, property->offset);
    return value != NULL ? Py_NewRef(value) : state_first(property, obj);
}

/* A store or `del`: the old value is dropped after the slot changed (its
 * finaliser may run any Python code). `del` of state with a default puts
 * it back to the default (the next read applies it again). */
static int state_set(PyObject *self, PyObject *obj, PyObject *value) {
    zpy_state_property *property = (zpy_state_property *)self;
    if (state_checked(property, obj) == NULL) return -1;
    PyObject **slot = state_slot(obj, property->offset);
    PyObject *old = *slot;
    if (value == NULL && old == NULL) {
        if (property->initial != NULL || property->factory != NULL) return 0;
        state_unset(property, obj);
        return -1;
    }
    *slot = Py_XNewRef(value);
    Py_XDECREF(old);
    return 0;
}

/* StateProperty(owner, member, what, *, default=..., factory=...): replaces
 * `member`, the member descriptor of one of `owner`'s slots. */
static PyObject *state_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"owner", "member", "what", "default", "factory", NULL};
    PyTypeObject *owner;
    PyObject *member, *what, *initial = NULL, *factory = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OU|$OO:StateProperty", keywords, &PyType_Type,
                                     &owner, &member, &what, &initial, &factory))
        return NULL;
    zpy_core_state *state = zpy_state_of_type(type);
    if (!PyType_IsSubtype(owner, state->conjugate_type) ||
        !PyObject_TypeCheck((PyObject *)owner, state->class_type) || !zpy_class_stateful(owner)) {
        PyErr_SetString(PyExc_TypeError, "StateProperty: the owner is not a stateful object class");
        return NULL;
    }
    if (!Py_IS_TYPE(member, &PyMemberDescr_Type) || ((PyDescrObject *)member)->d_type != owner) {
        PyErr_SetString(PyExc_TypeError, "StateProperty: not a slot of the owner");
        return NULL;
    }
    PyMemberDef *slot = ((PyMemberDescrObject *)member)->d_member;
    if (slot->type != T_OBJECT_EX || (slot->flags & READONLY) ||
        slot->offset < state->conjugate_type->tp_basicsize ||
        slot->offset + (Py_ssize_t)sizeof(PyObject *) > owner->tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "StateProperty: not a slot of the owner");
        return NULL;
    }
    if (initial != NULL && factory != NULL) {
        PyErr_SetString(PyExc_TypeError, "StateProperty: a default or a factory, not both");
        return NULL;
    }
    if (factory != NULL && !PyCallable_Check(factory)) {
        PyErr_SetString(PyExc_TypeError, "StateProperty: the factory is not callable");
        return NULL;
    }
    zpy_state_property *property = (zpy_state_property *)type->tp_alloc(type, 0);
    if (property == NULL) return NULL;
    property->owner = (PyTypeObject *)Py_NewRef(owner);
    property->name = Py_NewRef(((PyDescrObject *)member)->d_name);
    property->what = Py_NewRef(what);
    property->initial = Py_XNewRef(initial);
    property->factory = Py_XNewRef(factory);
    property->offset = slot->offset;
    return (PyObject *)property;
}

/* A descriptor and its class refer to each other: the cycle collector's view. */
static int state_traverse(PyObject *self, visitproc visit, void *arg) {
    zpy_state_property *property = (zpy_state_property *)self;
    Py_VISIT(property->owner);
    Py_VISIT(property->initial);
    Py_VISIT(property->factory);
    Py_VISIT(Py_TYPE(self));
    return 0;
}

static int state_clear(PyObject *self) {
    zpy_state_property *property = (zpy_state_property *)self;
    Py_CLEAR(property->owner);
    Py_CLEAR(property->initial);
    Py_CLEAR(property->factory);
    return 0;
}

static void state_dealloc(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    state_clear(self);
    Py_CLEAR(((zpy_state_property *)self)->name);
    Py_CLEAR(((zpy_state_property *)self)->what);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyObject *state_repr(PyObject *self) {
    return PyUnicode_FromFormat("<zs.state %U>", ((zpy_state_property *)self)->what);
}

/* `default` and `factory`: as declared (AttributeError when not declared). */
static PyObject *state_get_declared(PyObject *self, void *closure) {
    zpy_state_property *property = (zpy_state_property *)self;
    PyObject *declared = closure != NULL ? property->factory : property->initial;
    if (declared == NULL)
        return PyErr_Format(PyExc_AttributeError, "%U has no %s", property->what,
                            closure != NULL ? "factory" : "default");
    return Py_NewRef(declared);
}

static PyGetSetDef state_getset[] = {
    {"default", state_get_declared, NULL, "The declared default (AttributeError: none).", NULL},
    {"factory", state_get_declared, NULL, "The declared factory (AttributeError: none).",
     (void *)1},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef state_members[] = {
    {"__name__", T_OBJECT, offsetof(zpy_state_property, name), READONLY, NULL},
    {"what", T_OBJECT, offsetof(zpy_state_property, what), READONLY, "\"Class.name\"."},
    {"offset", T_PYSSIZET, offsetof(zpy_state_property, offset), READONLY,
     "Offset of the slot in the conjugate."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot state_slots[] = {
    {Py_tp_doc, "Python state of a native class (zs.state()): a slot of its conjugates."},
    {Py_tp_new, state_new},
    {Py_tp_dealloc, state_dealloc},
    {Py_tp_traverse, state_traverse},
    {Py_tp_clear, state_clear},
    {Py_tp_repr, state_repr},
    {Py_tp_descr_get, state_get},
    {Py_tp_descr_set, state_set},
    {Py_tp_getset, state_getset},
    {Py_tp_members, state_members},
    {0, NULL},
};

static PyType_Spec state_spec = {
    .name = "zsharp_py._core.StateProperty",
    .basicsize = sizeof(zpy_state_property),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = state_slots,
};

/* =========================================================================
 * Classes and release
 * ========================================================================= */

int zpy_state_check_class(zpy_core_state *state, PyTypeObject *cls) {
    Py_ssize_t start = state->conjugate_type->tp_basicsize, end = cls->tp_basicsize;
    Py_ssize_t slots = 0;
    /* Every slot of every class between cls and ObjectConjugate, each an
       object slot in the range (type_new lays them out one after another). */
    PyObject *mro = cls->tp_mro;
    for (Py_ssize_t i = 0; mro != NULL && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *base = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (base == state->conjugate_type) break;
        if (!(base->tp_flags & Py_TPFLAGS_HEAPTYPE) || base->tp_members == NULL) continue;
        for (PyMemberDef *member = base->tp_members; member->name != NULL; member++) {
            if (member->offset < start || member->offset >= end) continue;
            if (member->type != T_OBJECT_EX) slots = -1;
            else if (slots >= 0) slots++;
        }
    }
    if (cls->tp_dictoffset != 0 || cls->tp_weaklistoffset != 0 || cls->tp_itemsize != 0 ||
        !(cls->tp_flags & Py_TPFLAGS_HAVE_GC) || slots < 0 ||
        (end - start) != slots * (Py_ssize_t)sizeof(PyObject *)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: a native class's conjugates hold only its zs.state() attributes "
                     "(no other __slots__, __dict__ or __weakref__)",
                     cls->tp_name);
        return -1;
    }
    return 0;
}

void zpy_state_release(zpy_conjugate *conjugate) {
    assert(!ZPY_CONJUGATE_IS_LIVE(conjugate));
    PyTypeObject *type = Py_TYPE(conjugate);
    Py_ssize_t start = ((zpy_class_object *)type)->state->conjugate_type->tp_basicsize;
    /* One slot at a time, each emptied before its value is dropped: a
       finaliser run by the drop finds the slots it reads empty (and an
       expired conjugate refuses stores). */
    for (Py_ssize_t offset = start; offset + (Py_ssize_t)sizeof(PyObject *) <= type->tp_basicsize;
         offset += (Py_ssize_t)sizeof(PyObject *)) {
        PyObject **slot = state_slot((PyObject *)conjugate, offset);
        PyObject *value = *slot;
        if (value == NULL) continue;
        *slot = NULL;
        Py_DECREF(value);
    }
    Py_DECREF(conjugate);
}

/* Create the StateProperty type and add it to the module. */
int zpy_add_state_types(PyObject *module, zpy_core_state *state) {
    (void)state;
    PyObject *type = PyType_FromModuleAndSpec(module, &state_spec, NULL);
    if (type == NULL) return -1;
    int result = PyModule_AddObjectRef(module, "StateProperty", type);
    Py_DECREF(type);
    return result;
}
