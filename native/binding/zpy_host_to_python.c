/* Calls from native code into Python: the zs_managed_call_handler of every runtime.
 *
 * A native host calls zs_call_function / zs_call_each (native/src/calls.c);
 * the heap calls this handler without holding its lock. Every call is made
 * here, in C, from the plan of the function on the object's class: a
 * CallPlan that zsharp_py/_interop/calls.py computes once per class and
 * function (function_layout, cached in the class's `_zs_functions`) and
 * that says where each parameter and the result sit in the host's block
 * and how each crosses (a scalar, an object reference, a struct or any
 * other value, seen as a red view into the block). Python
 * is asked only for the plan, on the first call of a function on a class.
 *
 * One call: the object's conjugate (from the table, else adopted by
 * Python), the plan, then, with the object's runtime current and inside a
 * call scope, the arguments from the block (a scalar loaded, an object
 * reference resolved to its conjugate and checked, a struct as a red view
 * into the block that the scope expires), the method, and the result
 * written back (converted or staged completely before anything is stored,
 * so a failed result leaves the block as it was). An exception cannot cross
 * the native frames: the host gets ZS_E_CALL_FAILED (ZS_E_INVALID when the
 * function cannot be called), and the error goes to the innermost call
 * into the host that Python made on this thread, which raises it when the
 * host returns (zpy_report_callback, zpy_errors.c), else, when no Python
 * code started the host's call, to sys.unraisablehook.
 *
 * The block belongs to the host for the whole call, so its address stays
 * valid whatever Python code runs; nothing else read before Python code
 * runs (a conjugate's address, the runtime's state) is trusted after it.
 *
 * A plan with an entry (CallPlan(..., entry=, user=): the class's function
 * is a host's NativeFunction that no Python class overrides, zpy_python_to_host.c)
 * makes no Python call: once the object and its runtime are checked again,
 * the host's C function runs on the host's block as it is.
 *
 * The handler takes the GIL itself: the host may call from any thread.
 */
#include "value.h"

#include <string.h>
#include <structmember.h>

/* Arguments passed from a stack array; a call with more takes a PyMem one. */
#define CALL_STACK_ARGUMENTS 8

/* A CallPlan: how to make one call of one function on one class. Immutable. */
typedef struct zpy_call_plan {
    PyObject_VAR_HEAD PyObject *name; /* the method's name (interned) */
    PyObject *what;                   /* "Owner.name", for errors */
    Py_ssize_t size;                  /* bytes of the block */
    Py_ssize_t count;                 /* parameters; the result, if any, follows them */
    int has_result;
    zs_native_function entry; /* set: the host's own C function runs instead of a method */
    void *user;               /*   (a NativeFunction the class did not override), with this */
    zpy_plan_member members[];
} zpy_call_plan;

/* Fill `member` from (offset, mode, detail, what). */
static int member_parse(zpy_core_state *state, PyObject *entry, Py_ssize_t block_size,
                        zpy_plan_member *member) {
    Py_ssize_t offset;
    int mode;
    PyObject *detail, *what;
    if (!PyTuple_Check(entry) ||
        !PyArg_ParseTuple(entry, "niOU:CallPlan member", &offset, &mode, &detail, &what)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "CallPlan: a member is (offset, mode, detail, what)");
        return -1;
    }
    return zpy_call_member_init(state, "CallPlan", offset, mode, detail, what, block_size,
                                ZPY_MEMBER_ACCEPT_VALUE, member);
}

/* An address handed over as an int (0: none): 0, or -1 with an error. */
static int address_of(PyObject *value, const char *what, uintptr_t *out) {
    unsigned long long address = PyLong_Check(value) ? PyLong_AsUnsignedLongLong(value) : 0;
    if (!PyLong_Check(value))
        PyErr_Format(PyExc_TypeError, "CallPlan: %s must be an int (an address)", what);
    if (PyErr_Occurred()) return -1;
    if (address > UINTPTR_MAX) {
        PyErr_Format(PyExc_OverflowError, "CallPlan: %s is not an address", what);
        return -1;
    }
    *out = (uintptr_t)address;
    return 0;
}

/* CallPlan(name, what, size, parameters, result, *, entry=0, user=0):
 * parameters a tuple of (offset, mode, detail, what), result one of those
 * or None; entry, when not 0, the address of a host's zs_native_function
 * that calls run instead of a Python method (with `user`, and the host's
 * block as it is). */
static PyObject *plan_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"name",   "what",  "size", "parameters",
                               "result", "entry", "user", NULL};
    zpy_core_state *state = zpy_state_of_type(type);
    PyObject *name, *what, *parameters, *result, *entry_int = NULL, *user_int = NULL;
    Py_ssize_t size;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UUnO!O|$OO:CallPlan", keywords, &name, &what,
                                     &size, &PyTuple_Type, &parameters, &result, &entry_int,
                                     &user_int))
        return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "CallPlan: negative size");
        return NULL;
    }
    uintptr_t entry = 0, user = 0;
    if ((entry_int != NULL && address_of(entry_int, "entry", &entry) < 0) ||
        (user_int != NULL && address_of(user_int, "user", &user) < 0))
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(parameters);
    int has_result = result != Py_None;
    zpy_call_plan *plan = (zpy_call_plan *)type->tp_alloc(type, count + has_result);
    if (plan == NULL) return NULL;
    Py_INCREF(name);
    PyUnicode_InternInPlace(&name);
    plan->name = name;
    plan->what = Py_NewRef(what);
    plan->size = size;
    plan->entry = (zs_native_function)entry;
    plan->user = (void *)user;
    for (Py_ssize_t i = 0; i < count + has_result; i++) {
        PyObject *entry = i < count ? PyTuple_GET_ITEM(parameters, i) : result;
        if (member_parse(state, entry, size, &plan->members[i]) < 0) {
            Py_DECREF(plan);
            return NULL;
        }
        /* Counted as they are filled: dealloc drops exactly those. */
        if (i < count) plan->count = i + 1;
        else plan->has_result = 1;
    }
    return (PyObject *)plan;
}

/* The classes and kinds a plan holds: a class holds its plans (through
 * its `_zs_functions`), a plan may name that class. */
static int plan_traverse(PyObject *self, visitproc visit, void *arg) {
    zpy_call_plan *plan = (zpy_call_plan *)self;
    for (Py_ssize_t i = 0; i < plan->count + plan->has_result; i++)
        Py_VISIT(plan->members[i].detail);
    Py_VISIT(Py_TYPE(self));
    return 0;
}

/* Break those cycles. */
static int plan_clear(PyObject *self) {
    zpy_call_plan *plan = (zpy_call_plan *)self;
    for (Py_ssize_t i = 0; i < plan->count + plan->has_result; i++)
        Py_CLEAR(plan->members[i].detail);
    return 0;
}

/* Free a plan. */
static void plan_dealloc(PyObject *self) {
    zpy_call_plan *plan = (zpy_call_plan *)self;
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    plan_clear(self);
    for (Py_ssize_t i = 0; i < plan->count + plan->has_result; i++) Py_CLEAR(plan->members[i].what);
    Py_CLEAR(plan->name);
    Py_CLEAR(plan->what);
    type->tp_free(self);
    Py_DECREF(type);
}

/* repr(plan): what it calls, for debugging. */
static PyObject *plan_repr(PyObject *self) {
    zpy_call_plan *plan = (zpy_call_plan *)self;
    return PyUnicode_FromFormat("<CallPlan %U: %zd parameters%s, %zd bytes%s>", plan->what,
                                plan->count, plan->has_result ? " and a result" : "", plan->size,
                                plan->entry != NULL ? ", a native entry" : "");
}

static PyMemberDef plan_members[] = {
    {"name", T_OBJECT, offsetof(zpy_call_plan, name), READONLY, "The method's name."},
    {"size", T_PYSSIZET, offsetof(zpy_call_plan, size), READONLY, "Bytes of the block."},
    {NULL, 0, 0, 0, NULL},
};

/* plan.entry: the address of the host's C function (0: a Python method). */
static PyObject *plan_get_entry(PyObject *self, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLongLong((uintptr_t)((zpy_call_plan *)self)->entry);
}

/* plan.user: what that function is passed. */
static PyObject *plan_get_user(PyObject *self, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLongLong((uintptr_t)((zpy_call_plan *)self)->user);
}

static PyGetSetDef plan_getset[] = {
    {"entry", plan_get_entry, NULL,
     "The address of the host's C function calls run instead of a method (0: none).", NULL},
    {"user", plan_get_user, NULL, "The user pointer that entry is passed.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot plan_slots[] = {
    {Py_tp_new, plan_new},
    {Py_tp_dealloc, plan_dealloc},
    {Py_tp_traverse, plan_traverse},
    {Py_tp_clear, plan_clear},
    {Py_tp_repr, plan_repr},
    {Py_tp_members, plan_members},
    {Py_tp_getset, plan_getset},
    {Py_tp_doc, "How the handler of calls from native code calls one function of one class."},
    {0, NULL},
};

static PyType_Spec plan_spec = {
    .name = "zsharp_py._core.CallPlan",
    .basicsize = offsetof(zpy_call_plan, members),
    .itemsize = sizeof(zpy_plan_member),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = plan_slots,
};

/* =========================================================================
 * Reporting: as CPython reports an exception raised in __del__
 * ========================================================================= */

/* Report the error being raised, naming a call to `self` that could not be
 * made ("a call from native code to <Mob ...>"). */
static void report_call_to(zpy_core_state *state, PyObject *self) {
    PyObject *error = zpy_error_take();
    PyObject *context = PyUnicode_FromFormat("a call from native code to %R", self);
    if (context == NULL) PyErr_Clear(); /* the repr failed: name nothing rather than lose it */
    if (error != NULL) zpy_error_give(error);
    zpy_report_callback(state, context);
    Py_XDECREF(context);
}

/* Report the error being raised in or around the method itself, naming the
 * bound method (looked up with the error put aside). */
static void report_method(zpy_core_state *state, PyObject *self, PyObject *name) {
    PyObject *error = zpy_error_take();
    PyObject *bound = PyObject_GetAttr(self, name);
    PyErr_Clear();
    if (error != NULL) zpy_error_give(error);
    zpy_report_callback(state, bound != NULL ? bound : name);
    Py_XDECREF(bound);
}

/* =========================================================================
 * The handler
 * ========================================================================= */

/* The plan of `function` on a conjugate class, from the class's cache;
 * NULL (no error set) on a miss or on anything unexpected: Python decides. */
static zpy_call_plan *cached_plan(zpy_core_state *state, PyTypeObject *type, PyObject *key) {
    PyObject *dict = type->tp_dict;
    PyObject *functions = dict ? PyDict_GetItemWithError(dict, state->str_zs_functions) : NULL;
    if (functions == NULL || !PyDict_CheckExact(functions)) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *layout = PyDict_GetItemWithError(functions, key);
    if (layout == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_INCREF(layout); /* a getattr may run Python code, which may drop it from the cache */
    PyObject *plan = PyObject_GetAttr(layout, state->str_plan);
    Py_DECREF(layout);
    if (plan == NULL || !Py_IS_TYPE(plan, state->plan_type)) {
        PyErr_Clear();
        Py_XDECREF(plan);
        return NULL;
    }
    return (zpy_call_plan *)plan;
}

/* Empty the plan cache, and the signatures' (each slot emptied before what
 * it held is released, so a deallocation finds the cache consistent). */
void zpy_plan_cache_clear(zpy_core_state *state) {
    for (Py_ssize_t i = 0; i < ZPY_PLAN_CACHE; i++) {
        struct zpy_plan_slot *slot = &state->plan_cache[i];
        slot->tag = 0;
        Py_CLEAR(slot->key);
        Py_CLEAR(slot->plan);
        Py_CLEAR(slot->method);
    }
    PyObject *held[2 * ZPY_SIGNATURE_CACHE];
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < ZPY_SIGNATURE_CACHE; i++) {
        struct zpy_signature_slot *slot = &state->signature_cache[i];
        if (slot->runtime != NULL) held[count++] = (PyObject *)slot->runtime;
        if (slot->plan != NULL) held[count++] = slot->plan;
        memset(slot, 0, sizeof *slot);
    }
    while (count > 0) Py_DECREF(held[--count]);
}

/* The class's version tag when it is valid (a cache key), else 0. */
static unsigned int version_tag(PyTypeObject *type) {
    return (type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ? type->tp_version_tag : 0;
}

/* The plan cache's slot for (class tag, name). */
static struct zpy_plan_slot *plan_slot(zpy_core_state *state, unsigned int tag, PyObject *key) {
    uintptr_t hash = ((uintptr_t)tag * 2654435761u) ^ ((uintptr_t)key >> 4);
    return &state->plan_cache[hash % ZPY_PLAN_CACHE];
}

/* Remember `plan` for (self's class, key), with the method it calls when
 * that can be called directly: a plain function found on the class, on
 * objects with no instance dict and the generic attribute lookup (so
 * nothing can shadow it but a change to the class, which changes its tag).
 * No Python code. */
static void remember_plan(zpy_core_state *state, PyTypeObject *type, PyObject *key,
                          zpy_call_plan *plan) {
    PyObject *method = _PyType_Lookup(type, plan->name); /* borrowed; assigns a tag */
    unsigned int tag = version_tag(type);
    if (tag == 0) return;
    if (method == NULL || !PyFunction_Check(method) || type->tp_dictoffset != 0 ||
        type->tp_getattro != PyObject_GenericGetAttr)
        method = NULL;
    struct zpy_plan_slot *slot = plan_slot(state, tag, key);
    PyObject *old_key = slot->key, *old_plan = slot->plan, *old_method = slot->method;
    slot->tag = tag;
    slot->key = Py_NewRef(key);
    slot->plan = Py_NewRef((PyObject *)plan);
    slot->method = Py_XNewRef(method);
    Py_XDECREF(old_key); /* a str */
    Py_XDECREF(old_plan);
    Py_XDECREF(old_method);
}

/* Drop the remembered function names. */
void zpy_name_keys_clear(zpy_core_state *state) {
    for (Py_ssize_t i = 0; i < ZPY_NAME_KEYS; i++) {
        PyMem_Free(state->name_keys[i].text);
        state->name_keys[i].text = NULL;
        state->name_keys[i].length = 0;
        Py_CLEAR(state->name_keys[i].key);
    }
}

/* The interned str of a function's name (a new reference), or NULL with an
 * error (not UTF-8). The names called lately are remembered by a hash of
 * their text and compared by their text (never by address: the host's
 * buffer may hold another name next time), so a call with a known name
 * makes no string and looks its class's `_zs_functions` up by identity. */
static PyObject *name_key(zpy_core_state *state, const char *function) {
    uint32_t hash = 2166136261u; /* FNV-1a, which also measures the text */
    size_t length = 0;
    for (const unsigned char *c = (const unsigned char *)function; *c != 0; c++, length++)
        hash = (hash ^ *c) * 16777619u;
    struct zpy_name_key *slot = &state->name_keys[hash % ZPY_NAME_KEYS];
    if (slot->text != NULL && slot->length == length && memcmp(slot->text, function, length) == 0)
        return Py_NewRef(slot->key);
    PyObject *key = PyUnicode_FromString(function);
    if (key == NULL) return NULL;
    PyUnicode_InternInPlace(&key);
    char *text = PyMem_Malloc(length + 1);
    if (text == NULL) return key; /* not remembered: a key all the same */
    memcpy(text, function, length + 1);
    PyMem_Free(slot->text);
    slot->text = text;
    slot->length = length;
    Py_XSETREF(slot->key, Py_NewRef(key)); /* a str: its deallocation runs no Python code */
    return key;
}

/* The plan of `function` on a conjugate class (a new reference), and in
 * *method the function it calls when that can be called directly (a new
 * reference, or NULL: look the method up); else NULL with *status set
 * (ZS_E_INVALID when the function cannot be called from native code: its
 * name, its signature) and the failure reported as a call to `self`, or,
 * when self is NULL, cleared (the caller has another way). */
static zpy_call_plan *find_plan(zpy_core_state *state, PyTypeObject *type, PyObject *self,
                                const char *function, zs_status *status, PyObject **method) {
    *method = NULL;
    PyObject *key = name_key(state, function);
    if (key == NULL) goto failed;
    unsigned int tag = version_tag(type);
    struct zpy_plan_slot *slot = tag != 0 ? plan_slot(state, tag, key) : NULL;
    if (slot != NULL && slot->tag == tag && slot->key == key) { /* the usual case */
        Py_DECREF(key);
        *method = Py_XNewRef(slot->method);
        return (zpy_call_plan *)Py_NewRef(slot->plan);
    }
    zpy_call_plan *plan = cached_plan(state, type, key);
    if (plan == NULL) { /* first call on this class: Python lays it out */
        PyObject *made = PyObject_CallFunctionObjArgs(state->plan_of, (PyObject *)type, key, NULL);
        if (made != NULL && !Py_IS_TYPE(made, state->plan_type)) {
            PyErr_Format(PyExc_TypeError, "plan_of returned %R, not a CallPlan", made);
            Py_CLEAR(made);
        }
        plan = (zpy_call_plan *)made;
    }
    if (plan != NULL) {
        remember_plan(state, type, key, plan); /* Python code ran: the tag is read again */
        Py_DECREF(key);
        return plan;
    }
    Py_DECREF(key);
failed:
    *status = PyErr_ExceptionMatches(PyExc_AttributeError) ||
                      PyErr_ExceptionMatches(PyExc_TypeError) ||
                      PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)
                  ? ZS_E_INVALID
                  : ZS_E_CALL_FAILED;
    if (self != NULL) report_call_to(state, self);
    else zpy_report_callback(state, NULL);
    return NULL;
}

/* The name of a class, for messages (a new reference). */
static PyObject *class_name(PyTypeObject *type) {
    return PyObject_GetAttrString((PyObject *)type, "__name__");
}

/* Whether a member is loaded as a red view into the host's block (which
 * call_method expires when the call returns) rather than as a plain
 * Python value: a struct or a value with a conjugate class. A value
 * without one (an enum, a class id) is copied out, as a property read
 * gives it: an IntEnum member or a class, never a view. */
static int loads_a_view(const zpy_plan_member *member) {
    return (member->mode == ZPY_CALL_STRUCT || member->mode == ZPY_CALL_VALUE) &&
           (((const zpyv_kind *)member->detail)->flags & ZPYV_VALUE_CLASS);
}

/* Argument `member` from the block: a new reference, or NULL with an error.
 * An object reference naming an object that is gone fails the call of an
 * override (the host named it); for a delegate's listener (`gone_is_none`)
 * it is None, as a killable reference to it reads once it is collected:
 * an earlier listener may have destroyed it (the broadcast's owner, say). */
static PyObject *load_argument(zpy_runtime_core *rt, const zpy_plan_member *member, char *params,
                               int gone_is_none) {
    char *at = params + member->offset;
    if (member->mode == ZPY_CALL_SCALAR) return zpy_scalar_load(member->scalar, at);
    if (member->mode == ZPY_CALL_STRUCT || member->mode == ZPY_CALL_VALUE) {
        zpyv_kind *kind = (zpyv_kind *)member->detail;
        if (zpy_rt_open(rt, 0) == NULL || zpyv_native_type(rt, kind) == NULL) return NULL;
        if (!loads_a_view(member)) return zpyv_copy_out(rt, kind, at);
        return zpyv_block_view(rt, kind, at); /* call_method expires it */
    }
    zs_ref ref;
    memcpy(&ref, at, sizeof ref);
    PyObject *obj = zpy_conjugate_of(rt, ref); /* may adopt: Python code */
    if (obj == NULL || ref == ZS_NULL_REF) return obj;
    PyTypeObject *target = (PyTypeObject *)member->detail;
    if (obj == Py_None && gone_is_none) return obj;
    if (obj == Py_None) {
        Py_DECREF(obj);
        PyErr_Format(rt->state->expired_exception, "%U names a destroyed object", member->what);
        return NULL;
    }
    if (!PyObject_TypeCheck(obj, target)) {
        PyObject *want = class_name(target), *got = class_name(Py_TYPE(obj));
        if (want != NULL && got != NULL)
            PyErr_Format(PyExc_TypeError, "%U expects %U, got %U", member->what, want, got);
        Py_XDECREF(want);
        Py_XDECREF(got);
        Py_DECREF(obj);
        return NULL;
    }
    return obj;
}

/* The handle an object result stores, checked as a reference property's
 * store checks it: 0 with an error when `value` is neither None nor a live
 * object of the target class in `rt`. */
static int object_result(zpy_runtime_core *rt, const zpy_plan_member *member, PyObject *value,
                         zs_ref *out) {
    *out = ZS_NULL_REF;
    if (value == Py_None) return 1;
    PyTypeObject *target = (PyTypeObject *)member->detail;
    if (!PyObject_TypeCheck(value, target)) { /* the real type: not a __class__ property */
        PyObject *want = class_name(target), *got = class_name(Py_TYPE(value));
        if (want != NULL && got != NULL)
            PyErr_Format(PyExc_TypeError, "%U expects %U or None, not %U", member->what, want, got);
        Py_XDECREF(want);
        Py_XDECREF(got);
        return 0;
    }
    zpy_conjugate *conjugate = (zpy_conjugate *)value;
    if (!ZPY_CONJUGATE_IS_LIVE(conjugate)) {
        zpy_raise_expired(conjugate);
        PyObject *expired = zpy_error_take();
        if (expired != NULL)
            PyErr_Format(rt->state->expired_exception, "cannot store into %U: %S", member->what,
                         expired);
        Py_XDECREF(expired);
        return 0;
    }
    if (conjugate->runtime != rt) {
        PyErr_Format(PyExc_ValueError, "%U: the object belongs to another runtime", member->what);
        return 0;
    }
    *out = zpy_conjugate_share(conjugate);
    return 1;
}

/* Write the result into the block: converted or staged completely first
 * (Python code may run), then stored with none; -1 with an error and the
 * block unchanged when it cannot be. */
static int write_result(zpy_runtime_core *rt, const zpy_plan_member *member, PyObject *value,
                        char *params) {
    char *at = params + member->offset;
    if (member->mode == ZPY_CALL_SCALAR) { /* as the scalar property setters convert */
        zpy_scalar_bits bits;
        if (zpy_scalar_convert(member->scalar, value, &bits, member->what) < 0) return -1;
        zpy_scalar_store(member->scalar, &bits, at);
        return 0;
    }
    if (member->mode == ZPY_CALL_OBJECT) {
        zs_ref ref;
        if (!object_result(rt, member, value, &ref)) return -1;
        memcpy(at, &ref, sizeof ref);
        return 0;
    }
    zpyv_kind *kind = (zpyv_kind *)member->detail;
    if (zpy_rt_open(rt, 0) == NULL || zpyv_native_type(rt, kind) == NULL) return -1;
    zpyv_staged staged = {0};
    if (zpyv_stage(rt, kind, value, &staged, member->what) < 0) return -1;
    /* Staging ran Python code, which may have closed the runtime; a
       reference staged before another member's conversion destroyed its
       object is refused by the emit, before anything is written. Owned by
       no object: the block is the host's. */
    zs_status status = zpy_rt_open(rt, 0) == NULL ? ZS_OK
                                                  : zpyv_emit(rt, kind, &staged, ZS_NULL_REF, at);
    int failed = PyErr_Occurred() != NULL;
    zpyv_release(kind, &staged);
    if (failed) return -1;
    if (status != ZS_OK) return zpyv_refused(rt, status, member->what), -1;
    return 0;
}

/* Report the error being raised by a call made from `plan`: naming the
 * bound method of `self` (an object's function), or the callable itself (a
 * delegate's listener, self NULL). */
static void report_call(zpy_core_state *state, PyObject *self, zpy_call_plan *plan,
                        PyObject *callable) {
    if (self != NULL) report_method(state, self, plan->name);
    else zpy_report_callback(state, callable);
}

/* Load the arguments, make the call, write the result; the runtime is
 * current and the call scope open. With `self`, the call is self's method
 * (`method` directly when given, else looked up by the plan's name) with
 * self first; without, `method` is called with the arguments alone (a
 * delegate's listener). Failures are reported here. */
static zs_status call_method(zpy_runtime_core *rt, PyObject *self, zpy_call_plan *plan,
                             PyObject *method, char *params) {
    zpy_core_state *state = rt->state;
    PyObject *small[1 + CALL_STACK_ARGUMENTS];
    PyObject **stack = small;
    if (plan->count > CALL_STACK_ARGUMENTS &&
        (stack = PyMem_Malloc((size_t)(1 + plan->count) * sizeof *stack)) == NULL) {
        PyErr_NoMemory();
        report_call(state, self, plan, method);
        return ZS_E_CALL_FAILED;
    }
    stack[0] = self;
    Py_ssize_t loaded = 0;
    while (loaded < plan->count && (stack[1 + loaded] = load_argument(
                                        rt, &plan->members[loaded], params, self == NULL)) != NULL)
        loaded++;
    PyObject *result = NULL;
    if (loaded == plan->count && self == NULL) /* stack[0] may be used: the offset flag */
        result = PyObject_Vectorcall(method, stack + 1,
                                     (size_t)plan->count | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    else if (loaded == plan->count)
        result = method != NULL
                     ? PyObject_Vectorcall(method, stack, (size_t)(1 + plan->count), NULL)
                     : PyObject_VectorcallMethod(plan->name, stack, (size_t)(1 + plan->count),
                                                 NULL);
    int written = result != NULL &&
                  (!plan->has_result ||
                   write_result(rt, &plan->members[plan->count], result, params) == 0);
    if (!written) report_call(state, self, plan, method);
    Py_XDECREF(result);
    /* The views of the host's block expire with the call, as its scope's
       would (kept past it, they raise ExpiredConjugateError). */
    for (Py_ssize_t i = 0; i < loaded; i++) {
        if (loads_a_view(&plan->members[i]))
            zpyv_expire_in_place((zpyv_value *)stack[1 + i], rt->state->reason_scope);
        Py_DECREF(stack[1 + i]);
    }
    if (stack != small) PyMem_Free(stack);
    return written ? ZS_OK : ZS_E_CALL_FAILED;
}

/* Make `current` (the runtime that was current before a call, and that the
 * call did not set) current again if the call left another one current:
 * 0, or -1 with an error. */
static int keep_current(zpy_core_state *state, PyObject *current) {
    PyObject *now = NULL;
    if (zpy_current_get(state, &now) < 0) return -1; /* borrowed: compared only */
    if (now == current) return 0;
    PyObject *token = zpy_context_var_set(state, state->current, current);
    Py_XDECREF(token);
    return token != NULL ? 0 : -1;
}

/* Make one call from a plan (call_method: self's method, or a listener
 * when self is NULL) with the object's runtime current (a native thread's
 * context would otherwise name the default one), inside a call scope of
 * its own. When the runtime is current already (a host called from code
 * inside `with rt:`), the variable is not set anew: it is only put back if
 * the call left another runtime current, as resetting it would. */
static zs_status call_in_context(zpy_core_state *state, zpy_runtime_core *rt, PyObject *self,
                                 zpy_call_plan *plan, PyObject *method, char *params) {
    zs_status status;
    PyObject *before = NULL, *token = NULL;
    int ready = zpy_current_get(state, &before) == 0;
    Py_XINCREF(before); /* held: the method may change the variable */
    if (ready && before != (PyObject *)rt) {
        token = zpy_context_var_set(state, state->current, (PyObject *)rt);
        ready = token != NULL;
    }
    zpyv_call_scope scope;
    if (!ready || zpyv_call_scope_open(state, &scope) < 0) {
        report_call(state, self, plan, method);
        status = ZS_E_CALL_FAILED;
    } else {
        status = call_method(rt, self, plan, method, params);
        zpyv_call_scope_close(state, &scope);
    }
    int restored = token != NULL ? zpy_context_var_reset(state, state->current, token) == 0
                                 : before != (PyObject *)rt || keep_current(state, before) == 0;
    if (!restored) {
        report_call(state, self, plan, method);
        status = ZS_E_CALL_FAILED;
    }
    Py_XDECREF(token);
    Py_XDECREF(before);
    return status;
}

/* The conjugate a call from native code runs on: from the table, else made
 * from `target` (the object the heap recorded as having one under the
 * call's own lock, zs_set_managed_call_handler), else resolved and made (a
 * second lock). A new reference, None when the object is gone, or NULL. */
static PyObject *callee_of(zpy_runtime_core *rt, zs_ref object, zs_object *target) {
    zpy_conjugate *found = zpy_table_get(rt, object);
    if (found != NULL) return Py_NewRef((PyObject *)found);
    if (!zpy_open(rt)) Py_RETURN_NONE;
    return target != NULL ? zpy_make_conjugate(rt, object, target)
                          : zpy_resolve_conjugate(rt, object); /* may adopt: Python code */
}

/* One call on a live object of an open runtime (`rt` held by the caller);
 * `target`, when not NULL, is the object itself (callee_of). */
static zs_status call_object(zpy_core_state *state, zpy_runtime_core *rt, zs_ref object,
                             zs_object *target, const char *function, char *params) {
    PyObject *self = callee_of(rt, object, target);
    if (self == NULL) {
        zs_status status = !zpy_open(rt) ? ZS_E_STALE : ZS_E_CALL_FAILED;
        zpy_report_callback(state, NULL);
        return status;
    }
    if (!zpy_is_conjugate(state, self) || !ZPY_CONJUGATE_IS_LIVE((zpy_conjugate *)self)) {
        Py_DECREF(self); /* None: the object is gone (or its runtime closing) */
        return ZS_E_STALE;
    }
    zs_status status = ZS_OK;
    /* Held through the call: the method may change its class's cache. */
    PyObject *method;
    zpy_call_plan *plan = find_plan(state, Py_TYPE(self), self, function, &status, &method);
    if (plan != NULL && plan->size != 0 && params == NULL) {
        PyErr_Format(PyExc_ValueError, "%U called from native code without its parameter block",
                     plan->what);
        report_call_to(state, self);
        status = ZS_E_INVALID;
    } else if (plan != NULL && plan->entry != NULL) {
        /* The host's own function (a NativeFunction no Python class
           overrode): called as it is, on the host's block. Python code ran
           since the heap checked the object (adoption, the plan): the
           object and the runtime are checked again, then nothing runs in
           between. */
        if (!ZPY_CONJUGATE_IS_LIVE((zpy_conjugate *)self) || !zpy_open(rt)) status = ZS_E_STALE;
        else if ((status = zpyv_writable(rt, object)) == ZS_OK) /* dying meanwhile: refused */
            status = plan->entry(plan->user, rt->native, object, params);
    } else if (plan != NULL) {
        status = call_in_context(state, rt, self, plan, method, params);
    }
    Py_XDECREF(method);
    Py_XDECREF(plan);
    Py_DECREF(self);
    return status;
}

/* Whether this thread holds the GIL now: its own thread state is the
 * current one (compared, never read, so another thread's state is never
 * touched). A host calling from Python code, or from a loop that keeps the
 * GIL, then pays no PyGILState_Ensure/Release per call. */
static int gil_held_here(void) {
    PyThreadState *mine = PyGILState_GetThisThreadState();
#if PY_VERSION_HEX >= 0x030D0000
    return mine != NULL && mine == PyThreadState_GetUnchecked();
#else
    return mine != NULL && mine == _PyThreadState_UncheckedGet();
#endif
}

/* The zs_managed_call_handler: `user` is this module's state. `target` is
 * used only when this thread held the GIL since before the call: the
 * expiry that must precede the object's free needs the GIL, so it cannot
 * have run since the heap checked the object. Otherwise the object is
 * resolved again. */
static zs_status call_handler(void *user, zs_runtime *native, zs_ref object, zs_object *target,
                              const char *function, void *params) {
    zpy_core_state *state = user;
    int held = gil_held_here();
    PyGILState_STATE gil = held ? PyGILState_LOCKED : PyGILState_Ensure();
    zs_status status = ZS_E_STALE; /* closing: its objects are gone for Python */
    zpy_runtime_core *rt = zpy_open_runtime_of(state, native);
    if (rt != NULL && zpy_open(rt)) {
        Py_INCREF(rt);
        status = call_object(state, rt, object, held ? target : NULL, function, params);
        Py_DECREF(rt);
    }
    if (!held) PyGILState_Release(gil);
    return status;
}

/* =========================================================================
 * Delegates broadcast from native code: the zs_managed_listener_handler
 *
 * zs_delegate_broadcast and zs_delegate_execute (native/src/broadcast.c)
 * hand each listener to this handler with the delegate's signature, a
 * host's description of the parameter block. Its plan (the same CallPlan
 * as a function's) is made by Python once per runtime and signature
 * (signature_plan_of, zsharp_py/_interop/reflection.py) and remembered here; a
 * callable is called with the block's members as arguments, an object
 * binding's method (looked up by name on the object's conjugate, which may
 * be made now; a host's function is a NativeFunction, which marshals them
 * back) the same way: each in a call scope of its own, its runtime current.
 * An exception never crosses the native frames: the listener's status is
 * ZS_E_CALL_FAILED, the broadcast goes on to the next listener, and the
 * error goes where an override's does (zpy_report_callback, zpy_errors.c):
 * to the Python call into the host that made the broadcast, else to
 * sys.unraisablehook.
 * ========================================================================= */

/* A description's text as a str (NULL: ""), invalid UTF-8 replaced. */
static PyObject *text_of(const char *text) {
    if (text == NULL) text = "";
    return PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
}

/* The plan Python makes of a signature: a new reference, or NULL with an
 * error. */
static zpy_call_plan *make_signature_plan(zpy_core_state *state, zpy_runtime_core *rt,
                                          const zs_function_desc *signature) {
    PyObject *parameters = PyTuple_New(signature->param_count);
    for (uint32_t i = 0; parameters != NULL && i < signature->param_count; i++) {
        const zs_property_desc *p = &signature->params[i];
        PyObject *name = text_of(p->name), *type = text_of(p->type);
        PyObject *row = name != NULL && type != NULL
                            ? Py_BuildValue("(OOII)", name, type, p->offset, p->direction)
                            : NULL;
        Py_XDECREF(name);
        Py_XDECREF(type);
        if (row == NULL) Py_CLEAR(parameters);
        else PyTuple_SET_ITEM(parameters, i, row);
    }
    PyObject *name = parameters != NULL ? text_of(signature->name) : NULL;
    PyObject *made = name != NULL ? PyObject_CallFunction(state->signature_plan_of, "OOIO", rt,
                                                          name, signature->block_size, parameters)
                                  : NULL;
    Py_XDECREF(name);
    Py_XDECREF(parameters);
    if (made != NULL && (!Py_IS_TYPE(made, state->plan_type) ||
                         ((zpy_call_plan *)made)->size != (Py_ssize_t)signature->block_size)) {
        PyErr_Format(PyExc_TypeError, "signature_plan_of returned %R, not the signature's plan",
                     made);
        Py_CLEAR(made);
    }
    return (zpy_call_plan *)made;
}

/* The plan of a signature in `rt` (a new reference), remembered by runtime
 * and address; NULL with an error when it cannot be made. */
static zpy_call_plan *signature_plan(zpy_core_state *state, zpy_runtime_core *rt,
                                     const zs_function_desc *signature) {
    uintptr_t hash = ((uintptr_t)signature >> 3) ^ ((uintptr_t)rt >> 5);
    struct zpy_signature_slot *slot = &state->signature_cache[hash % ZPY_SIGNATURE_CACHE];
    if (slot->runtime == rt && slot->signature == signature && slot->params == signature->params &&
        slot->param_count == signature->param_count && slot->block_size == signature->block_size)
        return (zpy_call_plan *)Py_NewRef(slot->plan);
    zpy_call_plan *plan = make_signature_plan(state, rt, signature); /* Python code */
    if (plan == NULL) return NULL;
    PyObject *old_runtime = (PyObject *)slot->runtime, *old_plan = slot->plan;
    slot->runtime = (zpy_runtime_core *)Py_NewRef((PyObject *)rt);
    slot->signature = signature;
    slot->params = signature->params;
    slot->param_count = signature->param_count;
    slot->block_size = signature->block_size;
    slot->plan = Py_NewRef((PyObject *)plan);
    Py_XDECREF(old_runtime); /* the slot is consistent: a deallocation may run anything */
    Py_XDECREF(old_plan);
    return plan;
}

/* The method `function` of an object listener's conjugate (a new
 * reference): getattr, else Python's case-insensitive lookup (names are
 * interned case-insensitively, zsharp_py/_types/delegates.py); NULL with an
 * error (AttributeError when it has none). */
static PyObject *listener_method(zpy_core_state *state, PyObject *self, const char *function) {
    PyObject *name = name_key(state, function);
    if (name == NULL) return NULL;
    PyObject *method = PyObject_GetAttr(self, name);
    if (method != NULL && PyCallable_Check(method)) {
        Py_DECREF(name);
        return method;
    }
    if (method == NULL && !PyErr_ExceptionMatches(PyExc_AttributeError)) {
        Py_DECREF(name);
        return NULL;
    }
    PyErr_Clear();
    Py_XDECREF(method);
    method = state->find_method != NULL
                 ? PyObject_CallFunctionObjArgs(state->find_method, self, name, NULL)
                 : Py_NewRef(Py_None);
    if (method == Py_None) {
        Py_DECREF(method);
        method = NULL;
        PyErr_Format(PyExc_AttributeError, "%s has no method %R", Py_TYPE(self)->tp_name, name);
    }
    Py_DECREF(name);
    return method;
}

/* Report that a signature has no plan (the error being raised), naming
 * the delegate. */
static void report_signature(zpy_core_state *state, const zs_function_desc *signature) {
    PyObject *error = zpy_error_take();
    PyObject *context = PyUnicode_FromFormat("a broadcast of %s from native code (its signature)",
                                             signature->name != NULL ? signature->name
                                                                     : "a delegate");
    if (context == NULL) PyErr_Clear();
    if (error != NULL) zpy_error_give(error);
    zpy_report_callback(state, context);
    Py_XDECREF(context);
}

/* An object listener whose function is the host's native function taking
 * the signature's block (listener->native), unless a Python class
 * overrides it: 1 with *status from its entry, called on the host's block
 * as it is (no conjugate made, no Python frame: a handle the block holds
 * reaches it even if that object is gone), or 0 when Python's way decides
 * (an override, an event with no native default). The object's class is
 * the runtime's conjugate class of its native class, if Python has one:
 * its plan for the function runs the same entry when nothing overrides it
 * (zsharp_py/_interop/calls.py); a class Python never bound has no
 * override. */
static int call_native_listener(zpy_core_state *state, zpy_runtime_core *rt,
                                const zs_listener *listener, zs_object *target, char *params,
                                zs_status *status) {
    const zs_function_desc *native = listener->native;
    if (native == NULL || native->entry == NULL || listener->object == ZS_NULL_REF) return 0;
    zs_object *object = target != NULL ? target : zs_resolve(rt->native, listener->object);
    if (object == NULL) {
        *status = ZS_E_STALE;
        return 1;
    }
    uint32_t id = zs_class_id(object->cls);
    PyObject *cls = id < rt->class_capacity ? Py_XNewRef(rt->classes[id]) : NULL;
    if (cls != NULL) {
        PyObject *method = NULL;
        zs_status unused;
        zpy_call_plan *plan = find_plan(state, (PyTypeObject *)cls, NULL, listener->function,
                                        &unused, &method);
        int runs_entry = plan != NULL && plan->entry == native->entry && plan->user == native->user;
        Py_XDECREF(plan);
        Py_XDECREF(method);
        Py_DECREF(cls);
        if (!runs_entry) return 0;
        /* Python code may have run (the plan laid out): checked again. */
        if (!zpy_open(rt)) {
            *status = ZS_E_STALE;
            return 1;
        }
    }
    /* Freed or dying since the heap checked it (another thread ran while
       this one took the GIL, or the plan's Python code ran): refused. */
    *status = zs_object_writable(rt->native, listener->object);
    if (*status == ZS_OK)
        *status = native->entry(native->user, rt->native, listener->object, params);
    return 1;
}

/* Run one listener of an open runtime (`rt` held by the caller); `target`,
 * when not NULL, is an object listener's object (callee_of). */
static zs_status call_listener(zpy_core_state *state, zpy_runtime_core *rt,
                               const zs_listener *listener, zs_object *target,
                               const zs_function_desc *signature, char *params) {
    zs_status status = ZS_OK;
    if (call_native_listener(state, rt, listener, target, params, &status)) return status;
    zpy_call_plan *plan = signature_plan(state, rt, signature);
    if (plan == NULL) {
        status = PyErr_ExceptionMatches(PyExc_TypeError) ||
                         PyErr_ExceptionMatches(PyExc_AttributeError)
                     ? ZS_E_INVALID
                     : ZS_E_CALL_FAILED;
        report_signature(state, signature);
        return status;
    }
    PyObject *self = NULL, *function = NULL;
    if (listener->callable != 0) {
        function = Py_XNewRef(zpyv_callable_get(rt, listener->callable));
        if (function == NULL) status = ZS_E_STALE; /* its runtime let go of it (closed) */
    } else if ((self = callee_of(rt, listener->object, target)) == NULL) {
        status = !zpy_open(rt) ? ZS_E_STALE : ZS_E_CALL_FAILED;
        zpy_report_callback(state, NULL);
    } else if (!zpy_is_conjugate(state, self) || !ZPY_CONJUGATE_IS_LIVE((zpy_conjugate *)self)) {
        status = ZS_E_STALE; /* None: the object is gone (or its runtime closing) */
    } else if ((function = listener_method(state, self, listener->function)) == NULL) {
        status = PyErr_ExceptionMatches(PyExc_AttributeError) ||
                         PyErr_ExceptionMatches(PyExc_TypeError) ||
                         PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)
                     ? ZS_E_INVALID
                     : ZS_E_CALL_FAILED;
        report_call_to(state, self);
    }
    /* Python code may have run (an adoption, the lookup): the runtime is
       checked again before the arguments are read. */
    if (status == ZS_OK && !zpy_open(rt)) status = ZS_E_STALE;
    if (status == ZS_OK) status = call_in_context(state, rt, NULL, plan, function, params);
    Py_XDECREF(function);
    Py_XDECREF(self);
    Py_DECREF(plan);
    return status;
}

/* The zs_managed_listener_handler: `user` is this module's state. As
 * call_handler, `target` is used only when this thread held the GIL since
 * before the call. */
static zs_status listener_handler(void *user, zs_runtime *native, const zs_listener *listener,
                                  const zs_function_desc *signature, void *params) {
    zpy_core_state *state = user;
    int held = gil_held_here();
    PyGILState_STATE gil = held ? PyGILState_LOCKED : PyGILState_Ensure();
    zs_status status = ZS_E_STALE; /* closing: its listeners are gone for Python */
    zpy_runtime_core *rt = zpy_open_runtime_of(state, native);
    if (rt != NULL && zpy_open(rt) && state->signature_plan_of != NULL) {
        Py_INCREF(rt);
        status = call_listener(state, rt, listener, held ? listener->target : NULL, signature,
                               params);
        Py_DECREF(rt);
    }
    if (!held) PyGILState_Release(gil);
    return status;
}

/* The zs_managed_listener_handler of every runtime this module opens, or
 * NULL with RuntimeError before configure_calls(signature_plan_of=...). */
zs_managed_listener_handler zpy_listener_handler_of(const zpy_core_state *state) {
    if (state->signature_plan_of != NULL) return listener_handler;
    PyErr_SetString(PyExc_RuntimeError,
                    "listener_handler: configure_calls(signature_plan_of=...) first");
    return NULL;
}

/* configure_calls(plan_of, scopes, *, signature_plan_of=None, find_method=None):
 * hand over the Python side of calls from native code (once, at import):
 * plan_of(cls, name) lays a function out, signature_plan_of(runtime, name,
 * block_size, parameters) a delegate's signature, find_method(obj, name)
 * finds a listener's method. */
PyObject *zpy_configure_calls(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"plan_of", "scopes", "signature_plan_of", "find_method", NULL};
    zpy_core_state *state = zpy_state_of_module(module);
    PyObject *plan_of, *scopes, *signature_plan_of = NULL, *find_method = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$OO:configure_calls", keywords, &plan_of,
                                     &scopes, &signature_plan_of, &find_method))
        return NULL;
    if (!PyContextVar_CheckExact(scopes)) {
        PyErr_SetString(PyExc_TypeError, "configure_calls: scopes must be a ContextVar");
        return NULL;
    }
    if (state->str_zs_functions == NULL)
        state->str_zs_functions = PyUnicode_InternFromString("_zs_functions");
    if (state->str_plan == NULL) state->str_plan = PyUnicode_InternFromString("_plan");
    if (state->str_zs_functions == NULL || state->str_plan == NULL) return NULL;
    Py_XSETREF(state->plan_of, Py_NewRef(plan_of));
    Py_XSETREF(state->scopes, Py_NewRef(scopes));
    if (signature_plan_of != NULL && signature_plan_of != Py_None)
        Py_XSETREF(state->signature_plan_of, Py_NewRef(signature_plan_of));
    if (find_method != NULL && find_method != Py_None)
        Py_XSETREF(state->find_method, Py_NewRef(find_method));
    Py_RETURN_NONE;
}

/* The zs_managed_call_handler of every runtime this module opens (its
 * `user` is the module's state), or NULL with RuntimeError before
 * configure_calls(). */
zs_managed_call_handler zpy_call_handler_of(const zpy_core_state *state) {
    if (state->plan_of != NULL) return call_handler;
    PyErr_SetString(PyExc_RuntimeError, "call_handler: configure_calls() first");
    return NULL;
}

/* Create the CallPlan type and the mode constants, and add them to the module. */
int zpy_add_call_types(PyObject *module, zpy_core_state *state) {
    state->plan_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &plan_spec, NULL);
    if (state->plan_type == NULL ||
        PyModule_AddObjectRef(module, "CallPlan", (PyObject *)state->plan_type) < 0 ||
        PyModule_AddIntConstant(module, "CALL_SCALAR", ZPY_CALL_SCALAR) < 0 ||
        PyModule_AddIntConstant(module, "CALL_OBJECT", ZPY_CALL_OBJECT) < 0 ||
        PyModule_AddIntConstant(module, "CALL_STRUCT", ZPY_CALL_STRUCT) < 0)
        return -1;
    return 0;
}
