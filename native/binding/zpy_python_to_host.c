/* NativeFunction: a host's C function, called from Python, marshalled in C.
 *
 * A native host describes its functions (zsharp.h, "reflection": a
 * zs_function_desc names an entry, a user pointer and a parameter block
 * whose members each have an offset and a direction). The Python binder
 * installs one NativeFunction per function on the conjugate class, as a
 * method; this file makes the call, with no Python frame: the arguments
 * (the IN and INOUT members, in order, by position or by keyword) are
 * converted into a zeroed block of this module's own (on the C stack up
 * to 256 bytes), the host's entry runs on the object (run_entry: no lock
 * taken, the call counted in the runtime), and the results (the RETURN
 * member, then the OUT and INOUT members in order) are read back out of
 * the block: None, one value, or a tuple. A method whose members are all
 * scalars, called by position, takes invoke_plain: the same protocol with
 * nothing to stage.
 *
 * The protocol keeps the staging rule (value.h, docs/staging-rule.md):
 *
 *   1. convert: every argument, completely, while Python code may run (a
 *      scalar range-checked into the block; an object checked by its real
 *      type, liveness and runtime, its handle into the block; a struct or
 *      value staged into private memory). A hook may collect, dispose or
 *      close anything here.
 *   2. commit: with no Python code, `self` is checked again (live, not
 *      dying, of the owner's native class), the runtime (open, not
 *      closing) and every object argument (live, not dying); the staged
 *      values are emitted into the block (held by no object), and
 *      run_entry calls the entry. When the function has struct or value
 *      members, the entry is called through a trampoline that, still
 *      inside the call in progress and with no Python code, captures the
 *      outputs into private memory and clears every value that owns native
 *      memory in the block: the runtime cannot be freed under it (run_entry
 *      defers a free the entry caused until the call returns), and nothing
 *      native is left in the block afterwards.
 *   3. results: built from the block (ours: scalars, handles) and the
 *      captured values, trusting nothing else read before the call: the
 *      entry may have collected, destroyed its own object, called back
 *      into Python or closed the runtime. An object result is None when
 *      null or dead, and ExpiredConjugateError when the runtime closed; a
 *      struct result is a black copy (Python owns it).
 *
 * A status other than ZS_OK raises through the module's raise_status, as
 * every refused native call does. An event with no native default (entry
 * 0) converts and checks its arguments, calls nothing, and gives zeros.
 *
 * Two types: NativeFunction, a method descriptor (Py_TPFLAGS_METHOD_DESCRIPTOR:
 * `obj.f(a)` makes no bound method; `obj.f` is one), and its subtype
 * NativeStaticFunction for ZS_FUNCTION_STATIC, which takes no object and
 * is itself whether read from the class or from an instance (its runtime
 * is the current one, resolved before the arguments are converted).
 *
 * A function of a class that several runtimes share (a host's class
 * declared once, zsharp_py/_interop/reflection.py) is made with `bind`
 * and no runtime: its entry and user pointer are each runtime's own, given
 * by `_bind(runtime, entry, user)` when the class is bound there and
 * dropped by `_unbind(runtime)` when that runtime closes. A call in a
 * runtime it is not bound in asks `bind(runtime)` first (Python code, in
 * phase 1), which binds the class there or raises saying why it cannot.
 */
#include "value.h"

#include <stdalign.h>
#include <stddef.h>
#include <string.h>
#include <structmember.h>

#define FN_STACK_BLOCK 256    /* bytes of a parameter block on the C stack */
#define FN_STACK_ARGUMENTS 16 /* Python arguments bound on the C stack */
#define FN_STACK_SLOTS 8      /* members with per-call state on the C stack */
#define FN_PLAIN_BLOCK 64     /* bytes of the block of a plain function (invoke_plain) */

/* One member of the parameter block. */
typedef struct fn_member {
    zpy_plan_member plan; /* offset, mode, scalar, detail, what (zpy_host_to_python.c's) */
    PyObject *name;       /* interned: the member's name (an argument's keyword) */
    int direction;        /* zs_param_direction */
} fn_member;

/* A runtime a shared function is bound in, and its host's entry there. */
typedef struct fn_binding {
    zpy_runtime_core *rt; /* strong: dropped by _unbind when the runtime closes */
    zs_native_function entry;
    void *user;
} fn_binding;

/* A NativeFunction. Immutable once made, but for a shared one's bindings. */
typedef struct zpy_native_fn {
    PyObject_VAR_HEAD vectorcallfunc vectorcall;
    zpy_core_state *state;
    PyObject *name;            /* str */
    PyObject *qualname;        /* "Owner.name" */
    PyObject *what;            /* the signature as text, for errors */
    PyObject *doc;             /* str or None */
    PyObject *signature;       /* __signature__ (None: none) */
    PyTypeObject *owner;       /* strong; NULL once cleared (a cycle being collected) */
    zpy_runtime_core *runtime; /* strong or NULL: the runtime whose host gave the entry */
    zs_native_function entry;  /* NULL: an event with no native default */
    void *user;
    PyObject *bind;       /* shared (entries per runtime): bind(runtime), else NULL */
    fn_binding *bindings; /* PyMem [binding_count]: a shared function's runtimes */
    Py_ssize_t binding_count;
    uint32_t flags;     /* ZS_FUNCTION_* */
    Py_ssize_t size;    /* bytes of the block */
    Py_ssize_t count;   /* members filled (dealloc drops exactly those) */
    Py_ssize_t inputs;  /* IN and INOUT members: the Python arguments */
    Py_ssize_t outputs; /* RETURN, OUT and INOUT members: the results */
    int slotted;        /* a member needs per-call state (an object argument, a value) */
    int valued;         /* a member is a struct or value: the entry runs through settle */
    int plain;          /* a method whose members are all scalars, in FN_PLAIN_BLOCK bytes:
                           called by invoke_plain when given by position */
    Py_ssize_t *order;  /* PyMem [inputs + outputs]: member indices of the arguments,
                          then of the results (the RETURN member first) */
    fn_member members[];
} zpy_native_fn;

/* Per-call state of one member. */
typedef struct fn_slot {
    zpyv_staged in;      /* a struct or value argument, staged */
    zpyv_staged out;     /* a struct or value result, captured after the entry */
    const zs_type *type; /* a value that may own native memory: cleared after the call */
    PyObject *argument;  /* an object argument's conjugate (borrowed), NULL for None */
} fn_slot;

/* One call in progress (on the C stack of fn_invoke). */
typedef struct fn_call {
    zpy_native_fn *fn;
    zpy_runtime_core *rt;     /* held by the caller (self's, fn's) or by invoke */
    zs_native_function entry; /* the host's in rt (NULL: an event with no native default) */
    void *user;
    char *block;
    fn_slot *slots;     /* [count], or NULL when not slotted */
    zs_status status;   /* the entry's */
    int settled;        /* the block's values were captured and cleared */
    int capture_failed; /* out of memory while capturing */
    zpy_entry errors;   /* what calls back into Python raised inside the entry */
} fn_call;

static inline int is_value_mode(zpy_call_mode mode) {
    return mode == ZPY_CALL_STRUCT || mode == ZPY_CALL_VALUE;
}

/* =========================================================================
 * Binding the arguments
 * ========================================================================= */

/* The input (argument position) whose member is named `key`, or -1. */
static Py_ssize_t input_named(const zpy_native_fn *fn, PyObject *key) {
    for (Py_ssize_t i = 0; i < fn->inputs; i++)
        if (fn->members[fn->order[i]].name == key) return i;
    /* Not interned (a **kwargs dict's keys): compared as text, no Python code. */
    for (Py_ssize_t i = 0; PyUnicode_Check(key) && i < fn->inputs; i++)
        if (PyUnicode_Compare(key, fn->members[fn->order[i]].name) == 0) return i;
    return -1;
}

/* Bind positional arguments then keywords to the inputs, in `given`
 * (borrowed). Errors name the signature. */
static int bind_arguments(const zpy_native_fn *fn, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames, PyObject **given) {
    if (nargs > fn->inputs) {
        PyErr_Format(PyExc_TypeError, "%U takes %zd argument%s (%zd given)", fn->what, fn->inputs,
                     fn->inputs == 1 ? "" : "s", nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < fn->inputs; i++) given[i] = i < nargs ? args[i] : NULL;
    Py_ssize_t keywords = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < keywords; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t at = input_named(fn, key);
        if (at < 0) {
            PyErr_Format(PyExc_TypeError, "%U got an unexpected keyword argument %R", fn->what,
                         key);
            return -1;
        }
        if (given[at] != NULL) {
            PyErr_Format(PyExc_TypeError, "%U got multiple values for argument %R", fn->what, key);
            return -1;
        }
        given[at] = args[nargs + k];
    }
    for (Py_ssize_t i = 0; i < fn->inputs; i++) {
        if (given[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "%U missing required argument %R", fn->what,
                         fn->members[fn->order[i]].name);
            return -1;
        }
    }
    return 0;
}

/* =========================================================================
 * Phase 1: convert (Python code may run)
 * ========================================================================= */

/* Raise ExpiredConjugateError for an expired object argument, naming it. */
static int expired_argument(const fn_member *member, zpy_conjugate *conjugate) {
    zpy_raise_expired(conjugate);
    PyObject *error = zpy_error_take();
    if (error != NULL) {
        PyErr_Format((PyObject *)Py_TYPE(error), "%U: %S", member->plan.what, error);
        Py_DECREF(error);
    }
    return -1;
}

/* The handle of an object argument: None, or a live conjugate of the
 * target class (its real type: not a __class__ property) in `rt`. */
static int object_argument(zpy_runtime_core *rt, const fn_member *member, PyObject *value,
                           zs_ref *out) {
    *out = ZS_NULL_REF;
    if (value == Py_None) return 0;
    PyTypeObject *target = (PyTypeObject *)member->plan.detail;
    if (!PyObject_TypeCheck(value, target)) {
        PyErr_Format(PyExc_TypeError, "%U expects %s or None, not %s", member->plan.what,
                     target == rt->state->conjugate_type ? "an object" : target->tp_name,
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    zpy_conjugate *conjugate = (zpy_conjugate *)value;
    if (!ZPY_CONJUGATE_IS_LIVE(conjugate)) return expired_argument(member, conjugate);
    if (conjugate->runtime != rt) {
        PyErr_Format(PyExc_ValueError, "%U: the object belongs to another runtime",
                     member->plan.what);
        return -1;
    }
    *out = zpy_conjugate_share(conjugate);
    return 0;
}

/* Convert every argument: scalars and handles into the block, structs and
 * values staged; the native types of the value members registered. */
static int convert_arguments(fn_call *call, PyObject *const *given) {
    zpy_native_fn *fn = call->fn;
    zpy_runtime_core *rt = call->rt;
    for (Py_ssize_t i = 0; fn->valued && i < fn->count; i++) {
        const fn_member *member = &fn->members[i];
        if (!is_value_mode(member->plan.mode)) continue;
        zpyv_kind *kind = (zpyv_kind *)member->plan.detail;
        if (!zpy_open(rt)) {
            PyErr_Format(rt->state->expired_exception, "%U: the runtime has been closed", fn->what);
            return -1;
        }
        const zs_type *type = zpyv_native_type(rt, kind);
        if (type == NULL) return -1;
        if (!(kind->flags & ZPYV_BITWISE)) call->slots[i].type = type;
        if (member->direction != ZS_PARAM_OUT && member->direction != ZS_PARAM_RETURN)
            zpyv_initialize(kind, call->block + member->plan.offset); /* its plain defaults */
    }
    for (Py_ssize_t a = 0; a < fn->inputs; a++) {
        Py_ssize_t i = fn->order[a];
        const fn_member *member = &fn->members[i];
        char *at = call->block + member->plan.offset;
        PyObject *value = given[a];
        switch (member->plan.mode) {
        case ZPY_CALL_SCALAR: {
            zpy_scalar_bits bits;
            if (!zpy_scalar_convert_exact(member->plan.scalar, value, &bits) &&
                zpy_scalar_convert(member->plan.scalar, value, &bits, member->plan.what) < 0)
                return -1;
            zpy_scalar_store(member->plan.scalar, &bits, at);
            break;
        }
        case ZPY_CALL_OBJECT: {
            zs_ref handle;
            if (object_argument(rt, member, value, &handle) < 0) return -1;
            memcpy(at, &handle, sizeof handle);
            call->slots[i].argument = value != Py_None ? value : NULL;
            break;
        }
        default:
            if (zpyv_stage(rt, (zpyv_kind *)member->plan.detail, value, &call->slots[i].in,
                           member->plan.what) < 0)
                return -1;
            break;
        }
    }
    return 0;
}

/* =========================================================================
 * Phase 2: commit and call (no Python code)
 * ========================================================================= */

/* After the entry (or instead of it), still inside the call in progress:
 * capture the struct and value results into private memory, then clear
 * every value in the block that may own native memory. No Python code. */
static void settle(fn_call *call, zs_runtime *native, int capture) {
    zpy_native_fn *fn = call->fn;
    call->settled = 1;
    for (Py_ssize_t i = 0; i < fn->count; i++) {
        const fn_member *member = &fn->members[i];
        if (!is_value_mode(member->plan.mode)) continue;
        fn_slot *slot = &call->slots[i];
        char *at = call->block + member->plan.offset;
        if (capture && member->direction != ZS_PARAM_IN &&
            zpyv_capture(call->rt, (zpyv_kind *)member->plan.detail, at, &slot->out) < 0)
            call->capture_failed = 1;
        if (slot->type != NULL) zs_value_clear(native, ZS_NULL_REF, slot->type, at);
    }
}

/* The entry of a function with struct or value members: the host's, then
 * settle, before run_entry counts the call out (and frees the runtime if
 * the entry closed it). */
static zs_status trampoline(void *user, zs_runtime *native, zs_ref self, void *params) {
    fn_call *call = user;
    call->status = call->entry(call->user, native, self, params);
    settle(call, native, call->status == ZS_OK);
    return call->status;
}

/* Run a host entry, counted in the runtime's native calls: a close() from
 * inside it (the entry called back into Python) detaches the native
 * runtime and leaves freeing it to the last call to return, since the
 * entry still runs on it. No lock: the count is guarded by the GIL, and
 * the object was checked under it by the rules every plain property write
 * keeps (a live conjugate; a dying object refused while a cycle has found
 * dying ones, zpyv_writable). The first error of a call back into Python
 * made inside it is kept in `errors`, for the caller to raise. */
static inline zs_status run_entry(zpy_runtime_core *rt, zs_native_function entry, void *user,
                                  zs_ref self, void *params, zpy_entry *errors) {
    zs_runtime *native = rt->native;
    zpy_core_state *state = rt->state;
    zpy_life_begin(rt, ZPY_ACT_CALL_HOST); /* commit_checks asked zpy_life_may */
    zpy_entry_open(state, errors);         /* calls back into Python keep their errors in it */
    zs_status status = entry(user, native, self, params);
    zpy_entry_leave(state, errors);
    zpy_life_leave(rt, ZPY_ACT_CALL_HOST); /* the last to return makes a deferred free */
    return status;
}

/* commit_checks' slow path: raise for what refuses the call, or 0 when
 * only the dying window was open and the object is not dying. */
static int commit_refused(zpy_native_fn *fn, zpy_runtime_core *rt, PyObject *self, zs_ref handle) {
    if (self != NULL && !ZPY_CONJUGATE_IS_LIVE((zpy_conjugate *)self))
        return zpy_raise_expired((zpy_conjugate *)self), -1;
    zpy_refusal why = zpy_life_may(rt, ZPY_ACT_CALL_HOST);
    if (why != ZPY_ALLOWED) return zpy_life_refuse(rt, ZPY_ACT_CALL_HOST, why, fn->what);
    zs_status usable = zpyv_writable(rt, handle); /* a dying object: refused */
    if (usable != ZS_OK) return zpy_call_raise_status(fn->state, usable, fn->what, rt), -1;
    return 0;
}

/* The checks of phase 2 that every call makes, with no Python code after
 * them: `self` still live (and not dying), the runtime open, not closing
 * and not expiring conjugates. 0 with self's handle (null for a static
 * function), or -1 with the error. Still live, `self` is still the object
 * self_fits checked: an object never changes class, nor a runtime its
 * classes. */
static inline int commit_checks(zpy_native_fn *fn, zpy_runtime_core *rt, PyObject *self,
                                zs_ref *handle) {
    int live = self == NULL || ZPY_CONJUGATE_IS_LIVE((zpy_conjugate *)self);
    /* The host entry gets the handle: it may keep it anywhere. */
    *handle = self != NULL && live ? zpy_conjugate_share((zpy_conjugate *)self) : ZS_NULL_REF;
    if (live && zpy_life_may(rt, ZPY_ACT_CALL_HOST) == ZPY_ALLOWED && !zpy_dying_window(rt))
        return 0;
    return commit_refused(fn, rt, self, *handle);
}

/* Check `self`, the runtime and every object argument again, emit the
 * staged values, call. 0 (the entry's status in call->status), or -1 with
 * an error and nothing native left in the block. */
static int commit_and_call(fn_call *call, PyObject *self) {
    zpy_native_fn *fn = call->fn;
    zpy_runtime_core *rt = call->rt;
    zs_ref handle;
    if (commit_checks(fn, rt, self, &handle) < 0) return -1;
    for (Py_ssize_t a = 0; fn->slotted && a < fn->inputs; a++) {
        Py_ssize_t i = fn->order[a];
        zpy_conjugate *argument = (zpy_conjugate *)call->slots[i].argument;
        if (argument == NULL) continue;
        if (!ZPY_CONJUGATE_IS_LIVE(argument)) return expired_argument(&fn->members[i], argument);
        zs_status usable = zpyv_writable(rt, argument->handle); /* dying: refused */
        if (usable != ZS_OK) return zpyv_refused(rt, usable, fn->members[i].plan.what), -1;
    }
    /* From here to the entry, no Python code. */
    zs_runtime *native = rt->native;
    for (Py_ssize_t a = 0; fn->valued && a < fn->inputs; a++) {
        Py_ssize_t i = fn->order[a];
        const fn_member *member = &fn->members[i];
        if (!is_value_mode(member->plan.mode)) continue;
        zs_status status = zpyv_emit(rt, (zpyv_kind *)member->plan.detail, &call->slots[i].in,
                                     ZS_NULL_REF, call->block + member->plan.offset);
        if (status != ZS_OK) {
            settle(call, native, 0);
            return zpyv_refused(rt, status, member->plan.what), -1;
        }
    }
    if (call->entry == NULL) { /* an event with no native default: nothing runs */
        call->status = ZS_OK;
        if (fn->valued) settle(call, native, 1);
    } else if (!fn->valued) {
        call->status = run_entry(rt, call->entry, call->user, handle, call->block, &call->errors);
    } else {
        call->status = run_entry(rt, trampoline, call, handle, call->block, &call->errors);
        assert(call->settled);
    }
    return 0;
}

/* =========================================================================
 * Phase 3: results (Python code may run)
 * ========================================================================= */

/* A black copy of a captured struct: Python owns it. */
static PyObject *black_struct(zpy_runtime_core *rt, zpyv_kind *kind, const zpyv_staged *captured,
                              PyObject *what) {
    if (kind->flags & ZPYV_BITWISE) {
        zpyv_value *value = zpyv_new_black(rt, kind); /* inline: its own bytes */
        if (value != NULL) memcpy(value->address, zpyv_blob(captured), kind->size);
        return (PyObject *)value;
    }
    /* References inside: through their Python values, so that one whose
       object died during the call reads as None, and the copy holds only
       live ones (a black value is a root). */
    PyObject *plain = zpyv_build(rt, kind, captured);
    if (plain == NULL) return NULL;
    zpyv_staged staged = {0};
    int failed = zpyv_native_type(rt, kind) == NULL ||
                 zpyv_stage(rt, kind, plain, &staged, what) < 0;
    Py_DECREF(plain);
    zpyv_value *value = failed ? NULL : zpyv_new_black(rt, kind);
    zs_status status = ZS_E_STALE;
    if (value != NULL && value->address != NULL && zpy_open(rt))
        status = zpyv_emit(rt, kind, &staged, ZS_NULL_REF, value->address);
    zpyv_release(kind, &staged);
    if (value == NULL) return NULL;
    if (status != ZS_OK) {
        Py_DECREF(value);
        return zpyv_refused(rt, status, what);
    }
    return (PyObject *)value;
}

/* The Python value of one result. */
static PyObject *result_of(fn_call *call, Py_ssize_t i) {
    const fn_member *member = &call->fn->members[i];
    zpy_runtime_core *rt = call->rt;
    const char *at = call->block + member->plan.offset;
    switch (member->plan.mode) {
    case ZPY_CALL_SCALAR:
        return zpy_scalar_load(member->plan.scalar, at);
    case ZPY_CALL_OBJECT: {
        zs_ref handle;
        memcpy(&handle, at, sizeof handle);
        if (handle == ZS_NULL_REF) Py_RETURN_NONE;
        if (!zpy_open(rt))
            return PyErr_Format(rt->state->expired_exception,
                                "%U: the runtime was closed during the call", member->plan.what);
        return zpy_conjugate_of(rt, handle); /* None for a dead object */
    }
    default: {
        if (call->capture_failed) return PyErr_NoMemory();
        zpyv_kind *kind = (zpyv_kind *)member->plan.detail;
        const zpyv_staged *captured = &call->slots[i].out;
        if (kind->code == ZPYV_STRUCT) return black_struct(rt, kind, captured, member->plan.what);
        return zpyv_build(rt, kind, captured);
    }
    }
}

/* None, the one result, or a tuple of them. */
static PyObject *results_of(fn_call *call) {
    zpy_native_fn *fn = call->fn;
    if (fn->outputs == 0) Py_RETURN_NONE;
    if (fn->outputs == 1) return result_of(call, fn->order[fn->inputs]);
    PyObject *tuple = PyTuple_New(fn->outputs);
    for (Py_ssize_t r = 0; tuple != NULL && r < fn->outputs; r++) {
        PyObject *item = result_of(call, fn->order[fn->inputs + r]);
        if (item == NULL) Py_CLEAR(tuple);
        else PyTuple_SET_ITEM(tuple, r, item);
    }
    return tuple;
}

/* =========================================================================
 * The call
 * ========================================================================= */

/* The entry and user `fn` calls in `rt`: 1 with them, or 0 (no error) when
 * it is not bound there (a shared function) or belongs to another runtime. */
static inline int entry_in(const zpy_native_fn *fn, const zpy_runtime_core *rt,
                           zs_native_function *entry, void **user) {
    if (fn->bind == NULL) {
        if (fn->runtime != NULL && fn->runtime != rt) return 0;
        *entry = fn->entry;
        *user = fn->user;
        return 1;
    }
    for (Py_ssize_t i = 0; i < fn->binding_count; i++) {
        if (fn->bindings[i].rt != rt) continue;
        *entry = fn->bindings[i].entry;
        *user = fn->bindings[i].user;
        return 1;
    }
    return 0;
}

/* The entry and user of `fn` in the open runtime `rt`, binding a shared
 * function's class there first if needed (bind(runtime): Python code,
 * which raises when the class cannot be bound there). 0, or -1 with the
 * error. */
static int entry_for_call(zpy_native_fn *fn, zpy_runtime_core *rt, zs_native_function *entry,
                          void **user) {
    if (entry_in(fn, rt, entry, user)) return 0;
    if (fn->bind == NULL) {
        PyErr_Format(PyExc_TypeError,
                     "%U belongs to another runtime: the object's class was bound in the runtime "
                     "whose host registered it",
                     fn->what);
        return -1;
    }
    PyObject *bound = PyObject_CallOneArg(fn->bind, (PyObject *)rt);
    if (bound == NULL) return -1;
    Py_DECREF(bound);
    if (entry_in(fn, rt, entry, user)) return 0;
    PyErr_Format(PyExc_TypeError, "%U: its class could not be bound in this runtime", fn->what);
    return -1;
}

/* Raise for a status the host's entry returned; for ZS_E_INVALID (the host
 * refused an argument, and cannot say which) the message names every
 * argument with its value ("World.spawn(...) with cls=None, at=..."), so
 * the caller sees the wrong one. Returns NULL. Python code runs (reprs):
 * after the call. */
static PyObject *raise_refused(zpy_native_fn *fn, zs_status status, zpy_runtime_core *rt,
                               PyObject *const *given) {
    if (status != ZS_E_INVALID || fn->inputs == 0)
        return zpy_call_raise_status(fn->state, status, fn->what, rt);
    PyObject *parts = PyList_New(0);
    for (Py_ssize_t a = 0; parts != NULL && a < fn->inputs; a++) {
        PyObject *part = PyUnicode_FromFormat("%U=%R", fn->members[fn->order[a]].name, given[a]);
        if (part == NULL || PyList_Append(parts, part) < 0) Py_CLEAR(parts);
        Py_XDECREF(part);
    }
    PyObject *comma = parts != NULL ? PyUnicode_FromString(", ") : NULL;
    PyObject *joined = comma != NULL ? PyUnicode_Join(comma, parts) : NULL;
    PyObject *what = joined != NULL ? PyUnicode_FromFormat("%U with %U", fn->what, joined) : NULL;
    Py_XDECREF(comma);
    Py_XDECREF(joined);
    Py_XDECREF(parts);
    if (what == NULL) { /* a repr failed: the plain message */
        PyErr_Clear();
        return zpy_call_raise_status(fn->state, status, fn->what, rt);
    }
    zpy_call_raise_status(fn->state, status, what, rt);
    Py_DECREF(what);
    return NULL;
}

/* One call: `self` checked already (a live conjugate of the owner's class),
 * NULL for a static function. */
static PyObject *invoke(zpy_native_fn *fn, PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames) {
    PyObject *bound_small[FN_STACK_ARGUMENTS];
    PyObject **bound = NULL;
    PyObject *const *given = args;
    if (kwnames != NULL || nargs != fn->inputs) {
        bound = fn->inputs <= FN_STACK_ARGUMENTS ? bound_small
                                                 : PyMem_Malloc((size_t)fn->inputs * sizeof *bound);
        if (bound == NULL) return PyErr_NoMemory();
        if (bind_arguments(fn, args, nargs, kwnames, bound) < 0) {
            if (bound != bound_small) PyMem_Free(bound);
            return NULL;
        }
        given = bound;
    }
    /* The runtime first: the object's; a static function's is the one
       whose host registered it, else the current one. Borrowed from self
       or fn (the caller holds both), else owned (`current`). */
    zpy_runtime_core *current = self == NULL && fn->runtime == NULL ? zpy_current_runtime(fn->state)
                                                                    : NULL;
    zpy_runtime_core *rt = self != NULL          ? ((zpy_conjugate *)self)->runtime
                           : fn->runtime != NULL ? fn->runtime
                                                 : current;
    alignas(max_align_t) char block_small[FN_STACK_BLOCK];
    fn_slot slots_small[FN_STACK_SLOTS];
    fn_call call = {.fn = fn, .rt = rt};
    PyObject *result = NULL;
    if (rt == NULL) goto done;
    if (!zpy_open(rt)) {
        /* The host's entry and user may belong to a closed runtime's state. */
        PyErr_SetString(fn->state->expired_exception, "the runtime has been closed");
        goto done;
    }
    /* Python code may run (a shared function binding its class): still
       phase 1, and commit_checks checks the runtime again. */
    if (entry_for_call(fn, rt, &call.entry, &call.user) < 0) goto done;
    call.block = fn->size <= FN_STACK_BLOCK ? block_small : PyMem_Calloc(1, (size_t)fn->size);
    if (call.block == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (call.block == block_small && fn->size > 0) memset(block_small, 0, (size_t)fn->size);
    if (fn->slotted) {
        call.slots = fn->count <= FN_STACK_SLOTS
                         ? slots_small
                         : PyMem_Malloc((size_t)fn->count * sizeof *call.slots);
        if (call.slots == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        memset(call.slots, 0, (size_t)fn->count * sizeof *call.slots);
    }
    if (convert_arguments(&call, given) < 0 || commit_and_call(&call, self) < 0) goto done;
    if (zpy_entry_raise(fn->state, &call.errors, fn->what) < 0) goto done;
    if (call.status != ZS_OK) raise_refused(fn, call.status, rt, given);
    else result = results_of(&call);
done:
    /* Private memory only (Python code may run: a staged delegate's callables). */
    for (Py_ssize_t i = 0; call.slots != NULL && i < fn->count; i++) {
        if (!is_value_mode(fn->members[i].plan.mode)) continue;
        zpyv_release((zpyv_kind *)fn->members[i].plan.detail, &call.slots[i].in);
        zpyv_release((zpyv_kind *)fn->members[i].plan.detail, &call.slots[i].out);
    }
    if (call.slots != NULL && call.slots != slots_small) PyMem_Free(call.slots);
    if (call.block != NULL && call.block != block_small) PyMem_Free(call.block);
    if (bound != NULL && bound != bound_small) PyMem_Free(bound);
    Py_XDECREF(current);
    return result;
}

/* One call of a plain function (scalar members only, a method, its
 * arguments by position): invoke's protocol with nothing to stage, no
 * per-member state and nothing to settle. Anything unusual (another
 * runtime, a closed one) goes to invoke, which raises for it. */
static PyObject *invoke_plain(zpy_native_fn *fn, PyObject *self, PyObject *const *args) {
    zpy_runtime_core *rt = ((zpy_conjugate *)self)->runtime; /* the caller holds self */
    zs_native_function entry;
    void *user;
    if (!zpy_open(rt) || !entry_in(fn, rt, &entry, &user))
        return invoke(fn, self, args, fn->inputs, NULL);
    alignas(max_align_t) char block[FN_PLAIN_BLOCK] = {0};
    for (Py_ssize_t a = 0; a < fn->inputs; a++) { /* phase 1: Python code may run */
        const fn_member *member = &fn->members[fn->order[a]];
        zpy_scalar_bits bits;
        if (!zpy_scalar_convert_exact(member->plan.scalar, args[a], &bits) &&
            zpy_scalar_convert(member->plan.scalar, args[a], &bits, member->plan.what) < 0)
            return NULL;
        zpy_scalar_store(member->plan.scalar, &bits, block + member->plan.offset);
    }
    zs_ref handle;
    if (commit_checks(fn, rt, self, &handle) < 0) return NULL; /* phase 2: no Python code */
    zpy_entry errors = {0};
    zs_status status = entry != NULL ? run_entry(rt, entry, user, handle, block, &errors)
                                     : ZS_OK; /* an event with no native default */
    if (zpy_entry_raise(fn->state, &errors, fn->what) < 0) return NULL;
    if (status != ZS_OK) return raise_refused(fn, status, rt, args);
    if (fn->outputs == 0) Py_RETURN_NONE; /* phase 3 */
    if (fn->outputs == 1) {
        const fn_member *result = &fn->members[fn->order[fn->inputs]];
        return zpy_scalar_load(result->plan.scalar, block + result->plan.offset);
    }
    fn_call call = {.fn = fn, .rt = rt, .block = block};
    return results_of(&call);
}

/* Raise for a function whose references were cleared (a cycle being collected). */
static PyObject *cleared(zpy_native_fn *fn) {
    return PyErr_Format(PyExc_ReferenceError, "%U: the function has been cleared", fn->name);
}

/* The object a method is called on: a live conjugate of the owner's class. */
static int self_fits(zpy_native_fn *fn, PyObject *self) {
    if (Py_IS_TYPE(self, fn->owner) || zpy_is_conjugate(fn->state, self)) {
        zpy_conjugate *conjugate = (zpy_conjugate *)self;
        if (!ZPY_CONJUGATE_IS_LIVE(conjugate)) return zpy_raise_expired(conjugate), 0;
        if (zpy_conjugate_is_a(conjugate, fn->owner)) return 1;
    }
    zpy_descriptor_misapplied(fn->qualname, fn->owner, self);
    return 0;
}

/* fn(obj, *args, **kwargs), obj.f(*args, **kwargs) (the method descriptor
 * protocol passes obj first), or, static, fn(*args, **kwargs). */
static PyObject *fn_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames) {
    zpy_native_fn *fn = (zpy_native_fn *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (fn->owner == NULL) return cleared(fn);
    if (fn->flags & ZS_FUNCTION_STATIC) return invoke(fn, NULL, args, nargs, kwnames);
    if (nargs < 1)
        return PyErr_Format(PyExc_TypeError, "%U needs the %s object it is called on", fn->what,
                            fn->owner->tp_name);
    if (!self_fits(fn, args[0])) return NULL;
    if (fn->plain && kwnames == NULL && nargs - 1 == fn->inputs)
        return invoke_plain(fn, args[0], args + 1);
    return invoke(fn, args[0], args + 1, nargs - 1, kwnames);
}

/* =========================================================================
 * The types
 * ========================================================================= */

/* NativeFunction(name, what, owner, entry, user, flags, size, members,
 * signature=None, doc=None, runtime=None, bind=None): members a tuple of
 * (name, direction, offset, mode, detail, what) in declaration order;
 * with `bind` (a callable), a shared function: no runtime, and entry and
 * user given per runtime by _bind. */
static PyObject *fn_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"name",    "what",      "owner", "entry",   "user", "flags", "size",
                               "members", "signature", "doc",   "runtime", "bind", NULL};
    zpy_core_state *state = zpy_state_of_type(type);
    PyObject *name, *what, *owner, *entry_int, *user_int, *members;
    PyObject *signature = Py_None, *doc = Py_None, *runtime = Py_None, *bind = Py_None;
    long flags;
    Py_ssize_t size;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UUOO!O!lnO!|OOOO:NativeFunction", keywords,
                                     &name, &what, &owner, &PyLong_Type, &entry_int, &PyLong_Type,
                                     &user_int, &flags, &size, &PyTuple_Type, &members, &signature,
                                     &doc, &runtime, &bind))
        return NULL;
    if (bind != Py_None && (!PyCallable_Check(bind) || runtime != Py_None))
        return PyErr_Format(PyExc_TypeError,
                            "NativeFunction: bind must be a callable, and then runtime None");
    if (runtime != Py_None && !PyObject_TypeCheck(runtime, state->runtime_type))
        return PyErr_Format(PyExc_TypeError, "NativeFunction: runtime must be a Runtime or None");
    if (!PyObject_TypeCheck(owner, state->class_type) ||
        !PyType_IsSubtype((PyTypeObject *)owner, state->conjugate_type) ||
        ((zpy_class_object *)owner)->number == 0)
        return PyErr_Format(PyExc_TypeError,
                            "NativeFunction: owner must be an object conjugate class, not %R",
                            owner);
    if (flags < 0 || (flags & ~(long)(ZS_FUNCTION_STATIC | ZS_FUNCTION_EVENT)) != 0)
        return PyErr_Format(PyExc_ValueError, "NativeFunction: unknown flags %ld", flags);
    if (size < 0 || (unsigned long long)size > UINT32_MAX)
        return PyErr_Format(PyExc_ValueError, "NativeFunction: the block size %zd is out of range",
                            size);
    if (doc != Py_None && !PyUnicode_Check(doc))
        return PyErr_Format(PyExc_TypeError, "NativeFunction: doc must be a str or None");
    unsigned long long entry = PyLong_AsUnsignedLongLong(entry_int);
    unsigned long long user = PyErr_Occurred() ? 0 : PyLong_AsUnsignedLongLong(user_int);
    if (PyErr_Occurred() || entry > UINTPTR_MAX || user > UINTPTR_MAX) {
        PyErr_Clear();
        return PyErr_Format(PyExc_OverflowError,
                            "NativeFunction: entry and user must be addresses (ints >= 0)");
    }
    if (entry == 0 && bind == Py_None && !(flags & ZS_FUNCTION_EVENT))
        return PyErr_Format(PyExc_ValueError,
                            "NativeFunction: %U has no entry (only an event may have none)", what);
    Py_ssize_t count = PyTuple_GET_SIZE(members);
    /* One type per flavour, whichever was called: a static function is no
       method descriptor. */
    PyTypeObject *made = flags & ZS_FUNCTION_STATIC ? state->static_function_type
                                                    : state->function_type;
    zpy_native_fn *fn = (zpy_native_fn *)made->tp_alloc(made, count);
    if (fn == NULL) return NULL;
    fn->vectorcall = fn_vectorcall;
    fn->state = state;
    fn->name = Py_NewRef(name);
    PyUnicode_InternInPlace(&fn->name);
    fn->qualname = PyUnicode_FromFormat("%U.%U", ((PyHeapTypeObject *)owner)->ht_qualname, name);
    fn->what = Py_NewRef(what);
    fn->doc = Py_NewRef(doc);
    fn->signature = Py_NewRef(signature);
    fn->owner = (PyTypeObject *)Py_NewRef(owner);
    fn->runtime = runtime != Py_None ? (zpy_runtime_core *)Py_NewRef(runtime) : NULL;
    fn->entry = (zs_native_function)(uintptr_t)entry;
    fn->user = (void *)(uintptr_t)user;
    fn->bind = bind != Py_None ? Py_NewRef(bind) : NULL;
    fn->flags = (uint32_t)flags;
    fn->size = size;
    fn->order = PyMem_Malloc((size_t)(2 * count + 1) * sizeof *fn->order);
    if (fn->qualname == NULL || fn->order == NULL) {
        if (fn->order == NULL) PyErr_NoMemory();
        Py_DECREF(fn);
        return NULL;
    }
    int returns = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *entry_tuple = PyTuple_GET_ITEM(members, i), *member_name, *detail, *member_what;
        int direction, mode;
        Py_ssize_t offset;
        if (!PyTuple_Check(entry_tuple) ||
            !PyArg_ParseTuple(entry_tuple, "UiniOU:NativeFunction member", &member_name, &direction,
                              &offset, &mode, &detail, &member_what)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "NativeFunction: a member is (name, direction, "
                                                 "offset, mode, detail, what)");
            Py_DECREF(fn);
            return NULL;
        }
        const char *problem = NULL;
        if (direction < ZS_PARAM_IN || direction > ZS_PARAM_RETURN) problem = "has no direction";
        else if (direction == ZS_PARAM_RETURN && returns++ > 0) problem = "is a second result";
        for (Py_ssize_t j = 0; problem == NULL && j < i; j++)
            if (PyUnicode_Compare(fn->members[j].name, member_name) == 0)
                problem = "is named twice";
        if (problem != NULL) {
            PyErr_Format(PyExc_ValueError, "NativeFunction: %U %s", member_what, problem);
            Py_DECREF(fn);
            return NULL;
        }
        fn_member *member = &fn->members[i];
        if (zpy_call_member_init(state, "NativeFunction", offset, mode, detail, member_what, size,
                                 ZPY_MEMBER_ACCEPT_VALUE | ZPY_MEMBER_ACCEPT_ANY_OBJECT,
                                 &member->plan) < 0) {
            Py_DECREF(fn);
            return NULL;
        }
        member->name = Py_NewRef(member_name);
        PyUnicode_InternInPlace(&member->name);
        member->direction = direction;
        fn->count = i + 1; /* counted as filled: dealloc drops exactly those */
    }
    /* The arguments in order, then the results: the RETURN member first. */
    for (Py_ssize_t i = 0; i < count; i++) {
        int direction = fn->members[i].direction;
        if (direction == ZS_PARAM_IN || direction == ZS_PARAM_INOUT) fn->order[fn->inputs++] = i;
        if (fn->members[i].plan.mode != ZPY_CALL_SCALAR) fn->slotted = 1;
        if (is_value_mode(fn->members[i].plan.mode)) fn->valued = 1;
    }
    for (Py_ssize_t i = 0; i < count; i++)
        if (fn->members[i].direction == ZS_PARAM_RETURN) fn->order[fn->inputs + fn->outputs++] = i;
    for (Py_ssize_t i = 0; i < count; i++) {
        int direction = fn->members[i].direction;
        if (direction == ZS_PARAM_OUT || direction == ZS_PARAM_INOUT)
            fn->order[fn->inputs + fn->outputs++] = i;
    }
    fn->plain = !fn->slotted && !(fn->flags & ZS_FUNCTION_STATIC) && size <= FN_PLAIN_BLOCK;
    return (PyObject *)fn;
}

/* The classes, kinds and objects a function holds: its owner class holds
 * it (a method), and it may name that class. */
static int fn_traverse(PyObject *self, visitproc visit, void *arg) {
    zpy_native_fn *fn = (zpy_native_fn *)self;
    Py_VISIT(fn->owner);
    Py_VISIT(fn->runtime);
    Py_VISIT(fn->bind);
    for (Py_ssize_t i = 0; i < fn->binding_count; i++) Py_VISIT(fn->bindings[i].rt);
    Py_VISIT(fn->signature);
    Py_VISIT(fn->doc);
    for (Py_ssize_t i = 0; i < fn->count; i++) Py_VISIT(fn->members[i].plan.detail);
    Py_VISIT(Py_TYPE(self));
    return 0;
}

/* Break those cycles (a call afterwards raises ReferenceError). */
static int fn_clear(PyObject *self) {
    zpy_native_fn *fn = (zpy_native_fn *)self;
    Py_CLEAR(fn->owner);
    Py_CLEAR(fn->runtime);
    Py_CLEAR(fn->bind);
    Py_ssize_t bindings = fn->binding_count;
    fn->binding_count = 0; /* first: a runtime's dealloc may call in */
    for (Py_ssize_t i = 0; i < bindings; i++) Py_CLEAR(fn->bindings[i].rt);
    Py_CLEAR(fn->signature);
    Py_CLEAR(fn->doc);
    for (Py_ssize_t i = 0; i < fn->count; i++) Py_CLEAR(fn->members[i].plan.detail);
    return 0;
}

static void fn_dealloc(PyObject *self) {
    zpy_native_fn *fn = (zpy_native_fn *)self;
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    fn_clear(self);
    for (Py_ssize_t i = 0; i < fn->count; i++) {
        Py_CLEAR(fn->members[i].plan.what);
        Py_CLEAR(fn->members[i].name);
    }
    PyMem_Free(fn->order);
    PyMem_Free(fn->bindings);
    Py_CLEAR(fn->name);
    Py_CLEAR(fn->qualname);
    Py_CLEAR(fn->what);
    type->tp_free(self);
    Py_DECREF(type);
}

/* Cls.f: the function itself; obj.f: a bound method (checked: a foreign
 * instance raises TypeError, as a method descriptor's __get__ does). */
static PyObject *fn_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)type;
    zpy_native_fn *fn = (zpy_native_fn *)self;
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    if (fn->owner == NULL) return cleared(fn);
    if (!PyObject_TypeCheck(obj, fn->owner)) {
        zpy_descriptor_misapplied(fn->qualname, fn->owner, obj);
        return NULL;
    }
    return PyMethod_New(self, obj);
}

/* A static function is itself, read from the class or from an instance. */
static PyObject *static_get(PyObject *self, PyObject *obj, PyObject *type) {
    (void)obj;
    (void)type;
    return Py_NewRef(self);
}

static PyObject *fn_repr(PyObject *self) {
    return PyUnicode_FromFormat("<native function %U>", ((zpy_native_fn *)self)->what);
}

/* fn.entry, fn.user: the addresses the function calls with. */
static PyObject *fn_get_entry(PyObject *self, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLongLong((uintptr_t)((zpy_native_fn *)self)->entry);
}

static PyObject *fn_get_user(PyObject *self, void *closure) {
    (void)closure;
    return PyLong_FromUnsignedLongLong((uintptr_t)((zpy_native_fn *)self)->user);
}

/* fn._bind(runtime, entry, user): a shared function's entry and user in
 * `runtime` (its class was bound there), replacing any it had. */
static PyObject *fn_bind(PyObject *self, PyObject *args) {
    zpy_native_fn *fn = (zpy_native_fn *)self;
    PyObject *runtime;
    unsigned long long entry, user;
    if (!PyArg_ParseTuple(args, "O!KK:_bind", fn->state->runtime_type, &runtime, &entry, &user))
        return NULL;
    if (fn->bind == NULL)
        return PyErr_Format(PyExc_TypeError, "%U is not shared: it has one runtime", fn->what);
    if (entry == 0 && !(fn->flags & ZS_FUNCTION_EVENT))
        return PyErr_Format(PyExc_ValueError, "%U has no entry (only an event may have none)",
                            fn->what);
    Py_ssize_t at = 0;
    while (at < fn->binding_count && fn->bindings[at].rt != (zpy_runtime_core *)runtime) at++;
    if (at == fn->binding_count) {
        fn_binding *grown = PyMem_Realloc(fn->bindings, (size_t)(at + 1) * sizeof *grown);
        if (grown == NULL) return PyErr_NoMemory();
        fn->bindings = grown;
        grown[at].rt = (zpy_runtime_core *)Py_NewRef(runtime);
        fn->binding_count = at + 1;
    }
    fn->bindings[at].entry = (zs_native_function)(uintptr_t)entry;
    fn->bindings[at].user = (void *)(uintptr_t)user;
    Py_RETURN_NONE;
}

/* fn._unbind(runtime): forget a shared function's entry in `runtime` (it
 * is closing: its host's state goes with it). */
static PyObject *fn_unbind(PyObject *self, PyObject *runtime) {
    zpy_native_fn *fn = (zpy_native_fn *)self;
    for (Py_ssize_t i = 0; i < fn->binding_count; i++) {
        if ((PyObject *)fn->bindings[i].rt != runtime) continue;
        zpy_runtime_core *gone = fn->bindings[i].rt;
        fn->bindings[i] = fn->bindings[--fn->binding_count];
        Py_DECREF(gone); /* last: its dealloc may run Python code */
        break;
    }
    Py_RETURN_NONE;
}

/* The entry a call plan runs for a shared function that no Python class
 * overrode, called from native code (zpy_host_to_python.c, with the GIL):
 * `user` is the function, and the host's entry run is its own in the
 * runtime the call is made in. ZS_E_INVALID when it is not bound there. */
static zs_status shared_entry(void *user, zs_runtime *native, zs_ref self, void *params) {
    const zpy_native_fn *fn = user;
    for (Py_ssize_t i = 0; i < fn->binding_count; i++) {
        const fn_binding *binding = &fn->bindings[i];
        if (binding->rt->native != native) continue;
        return binding->entry != NULL ? binding->entry(binding->user, native, self, params)
                                      : ZS_OK; /* an event with no native default */
    }
    return ZS_E_INVALID;
}

/* fn._plan_entry: (entry, user) for a CallPlan that runs a shared function
 * from native code (shared_entry, and this function: the plan's owner
 * class must hold the function as long as the plan). */
static PyObject *fn_get_plan_entry(PyObject *self, void *closure) {
    (void)closure;
    zpy_native_fn *fn = (zpy_native_fn *)self;
    if (fn->bind == NULL)
        return PyErr_Format(PyExc_TypeError, "%U is not shared: its plan takes its own entry",
                            fn->what);
    return Py_BuildValue("KK", (unsigned long long)(uintptr_t)shared_entry,
                         (unsigned long long)(uintptr_t)fn);
}

/* fn.runtimes: the runtimes a shared function is bound in (its own one, or
 * none, for another). */
static PyObject *fn_get_runtimes(PyObject *self, void *closure) {
    (void)closure;
    zpy_native_fn *fn = (zpy_native_fn *)self;
    if (fn->bind == NULL)
        return fn->runtime != NULL ? PyTuple_Pack(1, (PyObject *)fn->runtime) : PyTuple_New(0);
    PyObject *tuple = PyTuple_New(fn->binding_count);
    for (Py_ssize_t i = 0; tuple != NULL && i < fn->binding_count; i++)
        PyTuple_SET_ITEM(tuple, i, Py_NewRef((PyObject *)fn->bindings[i].rt));
    return tuple;
}

/* fn.members: (name, direction, offset, mode, detail, what) per member, as given. */
static PyObject *fn_get_members(PyObject *self, void *closure) {
    (void)closure;
    zpy_native_fn *fn = (zpy_native_fn *)self;
    PyObject *tuple = PyTuple_New(fn->count);
    for (Py_ssize_t i = 0; tuple != NULL && i < fn->count; i++) {
        const fn_member *member = &fn->members[i];
        PyObject *detail = member->plan.mode == ZPY_CALL_SCALAR
                               ? PyLong_FromLong((long)member->plan.scalar)
                               : Py_NewRef(member->plan.detail ? member->plan.detail : Py_None);
        PyObject *item = detail == NULL ? NULL
                                        : Py_BuildValue("OiniOO", member->name, member->direction,
                                                        member->plan.offset, (int)member->plan.mode,
                                                        detail, member->plan.what);
        Py_XDECREF(detail);
        if (item == NULL) Py_CLEAR(tuple);
        else PyTuple_SET_ITEM(tuple, i, item);
    }
    return tuple;
}

static PyGetSetDef fn_getset[] = {
    {"entry", fn_get_entry, NULL, "The address of the host's C function (0: an event with none).",
     NULL},
    {"user", fn_get_user, NULL, "The user pointer the entry is passed.", NULL},
    {"runtimes", fn_get_runtimes, NULL, "The runtimes the function is bound in.", NULL},
    {"_plan_entry", fn_get_plan_entry, NULL,
     "A shared function's (entry, user) for a call plan run from native code.", NULL},
    {"members", fn_get_members, NULL,
     "The parameter block's members: (name, direction, offset, mode, detail, what) each.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef fn_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(zpy_native_fn, vectorcall), READONLY, NULL},
    {"__name__", T_OBJECT, offsetof(zpy_native_fn, name), READONLY, NULL},
    {"__qualname__", T_OBJECT, offsetof(zpy_native_fn, qualname), READONLY, NULL},
    {"__objclass__", T_OBJECT, offsetof(zpy_native_fn, owner), READONLY,
     "The class the function belongs to."},
    {"__signature__", T_OBJECT, offsetof(zpy_native_fn, signature), READONLY,
     "The signature help() and inspect.signature() show (the binder's)."},
    {"__doc__", T_OBJECT, offsetof(zpy_native_fn, doc), READONLY, NULL},
    {"what", T_OBJECT, offsetof(zpy_native_fn, what), READONLY,
     "The signature as text, which every error message names."},
    {"flags", T_UINT, offsetof(zpy_native_fn, flags), READONLY,
     "ZS_FUNCTION_STATIC (1), ZS_FUNCTION_EVENT (2)."},
    {"size", T_PYSSIZET, offsetof(zpy_native_fn, size), READONLY, "Bytes of the parameter block."},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef fn_methods[] = {
    {"_bind", fn_bind, METH_VARARGS,
     "Bind a shared function in a runtime: (runtime, entry, user)."},
    {"_unbind", fn_unbind, METH_O, "Forget a shared function's entry in a runtime."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot fn_slots[] = {
    {Py_tp_new, fn_new},
    {Py_tp_dealloc, fn_dealloc},
    {Py_tp_traverse, fn_traverse},
    {Py_tp_clear, fn_clear},
    {Py_tp_repr, fn_repr},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, fn_get},
    {Py_tp_members, fn_members},
    {Py_tp_getset, fn_getset},
    {Py_tp_methods, fn_methods},
    {0, NULL},
};

static PyType_Spec fn_spec = {
    .name = "zsharp_py._core.NativeFunction",
    .basicsize = offsetof(zpy_native_fn, members),
    .itemsize = sizeof(fn_member),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
             Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_BASETYPE,
    .slots = fn_slots,
};

static PyType_Slot static_slots[] = {
    {Py_tp_dealloc, fn_dealloc},
    {Py_tp_traverse, fn_traverse},
    {Py_tp_clear, fn_clear},
    {Py_tp_repr, fn_repr},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, static_get}, /* its own: the method descriptor flag is not inherited */
    {Py_tp_members, fn_members},
    {0, NULL},
};

static PyType_Spec static_spec = {
    .name = "zsharp_py._core.NativeStaticFunction",
    .basicsize = offsetof(zpy_native_fn, members),
    .itemsize = sizeof(fn_member),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
             Py_TPFLAGS_IMMUTABLETYPE,
    .slots = static_slots,
};

/* Create NativeFunction and NativeStaticFunction, and add them to the module. */
int zpy_add_function_types(PyObject *module, zpy_core_state *state) {
    state->function_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &fn_spec, NULL);
    if (state->function_type == NULL) return -1;
    state->static_function_type = (PyTypeObject *)PyType_FromModuleAndSpec(
        module, &static_spec, (PyObject *)state->function_type);
    if (state->static_function_type == NULL) return -1;
    /* Only the static flavour derives from it: Python subclasses could not
       keep the layout's promises. */
    state->function_type->tp_flags &= ~Py_TPFLAGS_BASETYPE;
    state->static_function_type->tp_flags &= ~Py_TPFLAGS_BASETYPE;
    if (PyModule_AddObjectRef(module, "NativeFunction", (PyObject *)state->function_type) < 0 ||
        PyModule_AddObjectRef(module, "NativeStaticFunction",
                              (PyObject *)state->static_function_type) < 0 ||
        PyModule_AddIntConstant(module, "CALL_VALUE", ZPY_CALL_VALUE) < 0 ||
        PyModule_AddIntConstant(module, "FUNCTION_STATIC", ZS_FUNCTION_STATIC) < 0 ||
        PyModule_AddIntConstant(module, "FUNCTION_EVENT", ZS_FUNCTION_EVENT) < 0 ||
        PyModule_AddIntConstant(module, "PARAM_IN", ZS_PARAM_IN) < 0 ||
        PyModule_AddIntConstant(module, "PARAM_OUT", ZS_PARAM_OUT) < 0 ||
        PyModule_AddIntConstant(module, "PARAM_INOUT", ZS_PARAM_INOUT) < 0 ||
        PyModule_AddIntConstant(module, "PARAM_RETURN", ZS_PARAM_RETURN) < 0)
        return -1;
    return 0;
}
