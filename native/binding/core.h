/* zsharp_py._core: the hot path of object conjugates, as a CPython extension.
 *
 * Python sees a native object through its conjugate. Everything a game loop
 * does on every frame goes through here, in C, with no Python frame: reading
 * and writing scalar properties, reading and storing object references (the
 * conjugate mapping), and creating an object with its conjugate. Everything
 * else (errors, names, value properties, collections) stays in Python and is
 * reached through the callbacks in zpy_core_state.
 *
 * This module links libzsharp.so (the library a host links) and calls
 * zsharp.h directly, with zsharp_managed.h (this module is the managed side
 * whose protocol that header is) and zsharp_debug.h (GcStress). It is the
 * Python package's one way into the library:
 * the package reaches the heap only through the `_heap_*` methods of
 * RuntimeCore (zpy_heap_calls.c, zpy_reflection.c), the hot paths here, and the
 * module's functions and constants (the C API's addresses for hosts, the
 * header's constants and C type layouts). The cffi module
 * zsharp_py._native_lib is the sample engine's, and the tests' and tools'.
 *
 * Thread safety (rule 10 of docs/design.md): every function here runs with the GIL held
 * and never releases it. A native call made from here therefore cannot be
 * interleaved with Python code on another thread, and Runtime.close() moves
 * the runtime's life to CLOSING (under the GIL) before it frees anything: a
 * fast path that sees it open (zpy_open) finishes before the heap can go away. The exceptions are the
 * native calls that may run long: a full collection (zpy_collection.c) releases
 * the GIL around the native mark and purge, and zpy_heap_calls.c around
 * incremental steps, clustering, verification, reference chains and the
 * like. Python makes them under the runtime's lock, so close() waits for
 * them, and they touch no Python object while the GIL is released.
 */
#ifndef ZSHARP_PY_CORE_H
#define ZSHARP_PY_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#if PY_VERSION_HEX < 0x030B0000
#include <longintrepr.h> /* zpy_compact_int: Python.h includes it from 3.11 */
#endif
#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "zsharp.h"
#include "zsharp_debug.h"   /* GcStress switches (zpy_heap_calls.c) */
#include "zsharp_managed.h" /* the managed side's protocol: this module is that side */
#include "zsharp_python.h"

/* ---- errors (zpy_errors.c) --------------------------------------------------------------------- */

/* The exception being raised, taken (a new reference; none left set), and
 * its restoration: the Python 3.12+ API where it exists. */
PyObject *zpy_error_take(void);
void zpy_error_give(PyObject *error);

/* A Python call into the host in progress on one thread (zpy_errors.c):
 * calls back into Python inside it keep their first error here instead of
 * reporting it as unraisable, and the call raises it when the host
 * returns. On the caller's C stack; linked, newest first, in the state. */
typedef struct zpy_entry {
    struct zpy_entry *outer; /* the entry opened before it (on any thread) */
    PyThreadState *thread;   /* the thread that opened it */
    PyObject *first;         /* the first error raised inside it (owned), or NULL */
    Py_ssize_t more;         /* errors raised inside it after the first */
} zpy_entry;

/* Open `entry` for a call into the host made now on this thread (GIL). */
struct zpy_core_state;
void zpy_entry_open(struct zpy_core_state *state, zpy_entry *entry);
/* Close it (whatever entries other threads opened since); its error stays. */
void zpy_entry_leave(struct zpy_core_state *state, zpy_entry *entry);
/* Raise what a closed entry kept: -1 with CallbackError naming `what` (the
 * original as __cause__), the original itself when it is no Exception
 * (KeyboardInterrupt, SystemExit) or a CallbackError already; 0 when none. */
int zpy_entry_raise(struct zpy_core_state *state, zpy_entry *entry, PyObject *what);
/* Report the error being raised by a call from native code into Python:
 * kept by this thread's innermost open entry, else to sys.unraisablehook
 * with `context` (repeats of one report folded: zpy_errors.c). */
void zpy_report_callback(struct zpy_core_state *state, PyObject *context);
/* Whether sys.unraisablehook runs now, on this thread, for an error that
 * zpy_report_callback reports (a host loop's callback's), not another. */
int zpy_reporting_callback(struct zpy_core_state *state);

/* Put "<what>: " before the message of the error being raised, when it is
 * TypeError, ValueError or OverflowError itself and does not start so yet.
 * Any other exception (a subclass may need other constructor arguments, a
 * hook's own exception must reach the caller unchanged) is left as it is.
 * Returns -1, for `return zpy_error_prefix(what);`. */
int zpy_error_prefix(PyObject *what);

/* ---- scalars ---------------------------------------------------------------------- */

/* The C type of a scalar (matches zsharp_py's scalar codes, _model/kinds.py). */
typedef enum zpy_scalar_kind {
    ZPY_SCALAR_BOOL,
    ZPY_SCALAR_I8,
    ZPY_SCALAR_I16,
    ZPY_SCALAR_I32,
    ZPY_SCALAR_I64,
    ZPY_SCALAR_U8,
    ZPY_SCALAR_U16,
    ZPY_SCALAR_U32,
    ZPY_SCALAR_U64,
    ZPY_SCALAR_F32,
    ZPY_SCALAR_F64,
    ZPY_SCALAR_KINDS
} zpy_scalar_kind;

/* A scalar's C value, ready to store. */
typedef union zpy_scalar_bits {
    _Bool b;
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    float f32;
    double f64;
    unsigned char bytes[8];
} zpy_scalar_bits;

/* Bounds of the integer scalars that fit a long long (Int8 to Int64, UInt8
 * to UInt32), by kind; zero for Bool, UInt64 and the floats. Tables, not a
 * switch: every scalar write and host function argument reads them. */
static const long long zpy_scalar_low[ZPY_SCALAR_KINDS] = {
    [ZPY_SCALAR_I8] = INT8_MIN,
    [ZPY_SCALAR_I16] = INT16_MIN,
    [ZPY_SCALAR_I32] = INT32_MIN,
    [ZPY_SCALAR_I64] = INT64_MIN,
};
static const long long zpy_scalar_high[ZPY_SCALAR_KINDS] = {
    [ZPY_SCALAR_I8] = INT8_MAX,    [ZPY_SCALAR_I16] = INT16_MAX, [ZPY_SCALAR_I32] = INT32_MAX,
    [ZPY_SCALAR_I64] = INT64_MAX,  [ZPY_SCALAR_U8] = UINT8_MAX,  [ZPY_SCALAR_U16] = UINT16_MAX,
    [ZPY_SCALAR_U32] = UINT32_MAX,
};

/* Whether `kind` is one of the integer scalars the tables above bound (they
 * are consecutive: Int8 to UInt32). */
static inline int zpy_scalar_is_ranged(zpy_scalar_kind kind) {
    return (unsigned)kind - ZPY_SCALAR_I8 <= (unsigned)(ZPY_SCALAR_U32 - ZPY_SCALAR_I8);
}

/* The range of an integer scalar that fits a long long: 1 and the bounds;
 * 0 for Bool, UInt64 and the floats. */
static inline int zpy_scalar_range(zpy_scalar_kind kind, long long *low, long long *high) {
    int ranged = zpy_scalar_is_ranged(kind);
    *low = ranged ? zpy_scalar_low[kind] : 0;
    *high = ranged ? zpy_scalar_high[kind] : 0;
    return ranged;
}

/* Store `v`, already within zpy_scalar_range(kind), as `kind`'s C value. */
static inline void zpy_scalar_set_integer(zpy_scalar_kind kind, long long v, zpy_scalar_bits *out) {
    switch (kind) {
    case ZPY_SCALAR_I8:
        out->i8 = (int8_t)v;
        break;
    case ZPY_SCALAR_I16:
        out->i16 = (int16_t)v;
        break;
    case ZPY_SCALAR_I32:
        out->i32 = (int32_t)v;
        break;
    case ZPY_SCALAR_U8:
        out->u8 = (uint8_t)v;
        break;
    case ZPY_SCALAR_U16:
        out->u16 = (uint16_t)v;
        break;
    case ZPY_SCALAR_U32:
        out->u32 = (uint32_t)v;
        break;
    default:
        out->i64 = v;
        break;
    }
}

/* Bytes of a scalar of `kind`. */
static inline size_t zpy_scalar_size(zpy_scalar_kind kind) {
    switch (kind) {
    case ZPY_SCALAR_BOOL:
        return sizeof(_Bool);
    case ZPY_SCALAR_I8:
    case ZPY_SCALAR_U8:
        return 1;
    case ZPY_SCALAR_I16:
    case ZPY_SCALAR_U16:
        return 2;
    case ZPY_SCALAR_I32:
    case ZPY_SCALAR_U32:
    case ZPY_SCALAR_F32:
        return 4;
    default:
        assert(kind < ZPY_SCALAR_KINDS);
        return 8;
    }
}

/* Store a converted scalar at `at` (unaligned allowed): one fixed-size copy. */
static inline void zpy_scalar_store(zpy_scalar_kind kind, const zpy_scalar_bits *bits, char *at) {
    switch (zpy_scalar_size(kind)) {
    case 1:
        memcpy(at, bits, 1);
        break;
    case 2:
        memcpy(at, bits, 2);
        break;
    case 4:
        memcpy(at, bits, 4);
        break;
    default:
        memcpy(at, bits, 8);
        break;
    }
}

/* The value of an exact int that fits one digit (the ints game code passes
 * most), read from the object with no call: 1, or 0 for any other int. */
static inline int zpy_compact_int(PyObject *exact_int, long long *out) {
#if PY_VERSION_HEX >= 0x030C0000
    if (!PyUnstable_Long_IsCompact((PyLongObject *)exact_int)) return 0;
    *out = (long long)PyUnstable_Long_CompactValue((PyLongObject *)exact_int);
    return 1;
#else
    Py_ssize_t size = Py_SIZE(exact_int);
    if (size < -1 || size > 1) return 0;
    *out = (long long)size * (long long)((PyLongObject *)exact_int)->ob_digit[0];
    return 1;
#endif
}

/* Convert `value` to `kind` if it is of the exact Python type and in range:
 * 1 (converted), 0 (not such a value: use the Python conversion). Runs no
 * Python code and leaves no error set. Always inlined: the fast path of
 * every scalar write and host function argument (called, it cost a third
 * of its instructions in saving registers and setting up the call). */
__attribute__((always_inline)) static inline int zpy_scalar_convert_exact(zpy_scalar_kind kind,
                                                                          PyObject *value,
                                                                          zpy_scalar_bits *out) {
    long long v;
    if (zpy_scalar_is_ranged(kind)) { /* the common case first: an int of one digit */
        if (!PyLong_CheckExact(value)) return 0;
        if (!zpy_compact_int(value, &v)) {
            int overflow = 0;
            v = PyLong_AsLongLongAndOverflow(value, &overflow);
            if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
                PyErr_Clear();
                return 0;
            }
        }
        if (v < zpy_scalar_low[kind] || v > zpy_scalar_high[kind]) return 0;
        zpy_scalar_set_integer(kind, v, out);
        return 1;
    }
    if (kind == ZPY_SCALAR_BOOL) {
        if (value != Py_True && value != Py_False) return 0;
        out->b = value == Py_True;
        return 1;
    }
    if (kind == ZPY_SCALAR_F32 || kind == ZPY_SCALAR_F64) {
        if (!PyFloat_CheckExact(value)) return 0;
        double real = PyFloat_AS_DOUBLE(value);
        if (kind == ZPY_SCALAR_F64) {
            out->f64 = real;
            return 1;
        }
        if (isfinite(real) && fabs(real) > FLT_MAX)
            return 0; /* out of Float32's range: the conversion raises */
        out->f32 = (float)real;
        return 1;
    }
    if (kind != ZPY_SCALAR_U64 || !PyLong_CheckExact(value)) return 0;
    unsigned long long u = PyLong_AsUnsignedLongLong(value);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    out->u64 = u;
    return 1;
}

/* zpy_scalar.c */
const char *zpy_scalar_name(zpy_scalar_kind kind);
PyObject *zpy_scalar_load(zpy_scalar_kind kind, const char *at);
int zpy_scalar_convert(zpy_scalar_kind kind, PyObject *value, zpy_scalar_bits *out, PyObject *what);

/* ---- module state ---------------------------------------------------------- */

/* Why a conjugate expired: interned strings made at module creation, so
 * expiring costs no allocation (zsharp_py/_base/expiry.py re-exports them). */
#define ZPY_REASONS(X)                                                                             \
    X(collected, "it was unreachable and the garbage collector destroyed it")                      \
    X(garbage, "it was marked as garbage and the garbage collector destroyed it")                  \
    X(closed, "its runtime was closed")                                                            \
    X(disposed, "it was disposed")                                                                 \
    X(scope, "the scope it was obtained in has ended")                                             \
    X(structure, "the container it points into changed structure (it may have moved)")             \
    X(parent, "what it points into has expired")

/* What a type derives from among this module's conjugate and runtime bases,
 * remembered under the type's version tag: a tag names one type as it was
 * when the tag was given (CPython clears it when the type changes and never
 * gives it again), so a hit needs no walk of the type's MRO. */
#define ZPY_TYPE_MEMO_SIZE 64u
typedef struct zpy_type_memo {
    unsigned int tag;  /* a tp_version_tag; 0: empty */
    uint8_t conjugate; /* the type derives from ObjectConjugate */
    uint8_t value;     /* the type derives from ValueConjugate */
    uint8_t runtime;   /* the type derives from RuntimeCore */
} zpy_type_memo;

/* The value of the current-runtime ContextVar as last read, and the key of
 * the context it was read in: the thread, its context object and that
 * context's version, which CPython bumps whenever a thread enters or leaves
 * a context (its own ContextVar cache uses the same key). Setting or
 * resetting the variable does not bump it, so every set and reset goes
 * through zpy_context_var_set and zpy_context_var_reset (zpy_module.c), which
 * forget the memo. While the key holds, the context that holds the value is
 * the thread's current one, unchanged: `value` is borrowed from it. */
typedef struct zpy_current_memo {
    char valid;
    PyThreadState *thread;
    uint64_t thread_id;
    PyObject *context;
    uint64_t context_version;
    PyObject *value; /* NULL: unset */
    /* `value` when it is a runtime, else NULL: known when it was read, and
       true for as long as it lives (its class can only be swapped for one
       of the same layout, which derives from RuntimeCore too). */
    struct zpy_runtime_core *runtime;
} zpy_current_memo;

/* Everything the module shares: its types, the Python callbacks of the slow
 * paths, and the native API. One per module object; every conjugate class
 * and descriptor keeps a pointer to it (the module outlives them: the types
 * hold a reference to it). Guarded by the GIL, which this module releases
 * only around native calls that touch none of it; native code that calls
 * in without it (the managed call handler, the expiry and free handlers,
 * the class resolver, a host through python_api) takes the GIL before it
 * reads any member. Each group below says when its members are written,
 * after nanobind's nb_internals.h: "module exec" (core_exec and the
 * zs_add_*_types it calls, once; core_clear drops them at interpreter
 * shutdown), "configure" (configure() and configure_calls(), at the
 * package's import), or "GIL" (any time, by whoever holds the GIL). */
#define ZPY_NAME_KEYS 32       /* function names remembered by calls from native code */
#define ZPY_PLAN_CACHE 64      /* plans of calls from native code remembered by class and name */
#define ZPY_SIGNATURE_CACHE 16 /* plans of delegate signatures remembered by runtime and address */

typedef struct zpy_core_state {
    /* ---- types: module exec (read-only after) ---- */
    PyTypeObject *conjugate_type; /* ObjectConjugate: base of zs.Object */
    PyTypeObject *runtime_type;   /* RuntimeCore: base of zs.Runtime */
    PyTypeObject *class_type;     /* ObjectClass: base of zs.ObjectMeta */
    PyTypeObject *scalar_type;    /* ScalarProperty descriptor */
    PyTypeObject *reference_type; /* ReferenceProperty descriptor */
    PyTypeObject *creator_type;   /* Creator: how a class is created in one runtime */
    PyTypeObject *kind_type;      /* Kind (zpy_kind.c) */
    PyTypeObject *value_type;     /* ValueConjugate: base of every value conjugate (zpy_views.c) */
    PyTypeObject *value_property_type; /* ValueProperty descriptor (zpy_value_properties.c) */
    PyTypeObject
        *member_type; /* MemberProperty: a scalar member of a struct (zpy_value_properties.c) */
    PyTypeObject *name_type;     /* Name (zpy_names.c) */
    PyTypeObject *array_type;    /* ArrayBase (zpy_containers.c) */
    PyTypeObject *set_type;      /* SetBase */
    PyTypeObject *map_type;      /* MapBase */
    PyTypeObject *optional_type; /* OptionalBase */
    PyTypeObject *iterator_type; /* ArrayIterator */
    PyTypeObject *delegate_type; /* DelegateBase (zpy_delegates.c) */
    PyTypeObject *weak_type;     /* WeakPointer, the base of zs.WeakObjectPtr (zpy_weak.c) */
    PyTypeObject *plan_type;     /* CallPlan (zpy_host_to_python.c) */
    /* NativeFunction, a host's C function, and its subtype NativeStaticFunction,
       one with no object (zpy_python_to_host.c). */
    PyTypeObject *function_type;
    PyTypeObject *static_function_type;

    /* ---- interned strings: module exec (str_zs_functions and str_plan:
       configure_calls, once) ---- */
    PyObject *str_outer;        /* "outer", interned (a constructor keyword) */
    PyObject *str_name;         /* "name", interned (a constructor keyword) */
    PyObject *str_zs_resolved;  /* "_zs_resolved", interned (a wrapper's target class) */
    PyObject *str_conjugate_of; /* "_conjugate_of_slow", interned (Runtime's binder) */
    PyObject *str_zs_kind;      /* "_zs_kind", interned (a value class's kind) */
    PyObject *str_zs_functions; /* "_zs_functions", interned (a class's call layouts) */
    PyObject *str_plan;         /* "_plan", interned (a layout's CallPlan) */
#define ZPY_REASON_SLOT(name, text) PyObject *reason_##name;
    ZPY_REASONS(ZPY_REASON_SLOT)
#undef ZPY_REASON_SLOT

    /* ---- the python_api table: module exec (read-only after; its
       functions need the GIL, which their caller holds) ---- */
    zs_python_api
        python_api; /* zsharp_python.h: handles and proxies for C code (zpy_conjugate_table.c) */

    /* ---- Python callbacks and objects of the slow paths: configure
       (NULL until then; replaced only by configuring again) ---- */
    PyObject *current;           /* the ContextVar of `with Runtime()` */
    PyObject *default_runtime;   /* list holding the default runtime (0 or 1 items) */
    PyObject *slow_create;       /* (cls, *args, **kwargs) -> conjugate */
    PyObject *init_create;       /* the same, for a class with a Python __init__ */
    PyObject *attribute_error;   /* (obj, name, error, action, value) -> better error or None */
    PyObject *expired_error;     /* (sentinel) -> ExpiredConjugateError */
    PyObject *raise_status;      /* (status, what, runtime) -> raises (expires first if dying) */
    PyObject *store_failed;      /* (holder, value, what) -> raises */
    PyObject *store_refused;     /* (runtime, status, what) -> raises */
    PyObject *expired_type;      /* the ExpiredPointer class (a tuple subclass) */
    PyObject *expired_exception; /* the ExpiredConjugateError class */
    PyObject *current_runtime;   /* () -> the current runtime (made on first use) */
    PyObject *name_class;        /* zs.Name: the class of names made here */
    int configured;              /* configure() ran (0 again once core_clear ran) */
    /* Calls from native code (zpy_host_to_python.c); set by configure_calls(). */
    PyObject *plan_of; /* (cls, name) -> the CallPlan of a function (lays it out) */
    PyObject *scopes;  /* the ContextVar of zs.scope() (a tuple of view lists) */
    /* (runtime, name, block_size, parameters) -> the CallPlan of a delegate's
       signature, whose parameters are (name, type text, offset, direction) */
    PyObject *signature_plan_of;
    PyObject
        *find_method; /* (obj, name) -> obj's method of that name (case-insensitive), or None */
    /* Errors of calls from native code (zpy_errors.c): module exec. */
    PyObject *callback_error;       /* the CallbackError class */
    zpy_entry *entries;             /* open calls into the host, every thread, newest first (GIL) */
    PyObject *reported;             /* {(type, message, context): times} of unraisable reports */
    PyObject *reported_hook;        /* the sys.unraisablehook they went to (another: forgotten) */
    int callback_errors_unraisable; /* set: entries keep no errors (raise_callback_errors) */
    PyThreadState *reporting_thread; /* the thread whose hook hears a callback's error now */

    /* ---- counters: GIL ---- */
    uint32_t kind_count;  /* kinds made so far: the next kind's id */
    uint32_t class_count; /* conjugate classes numbered so far (zpy_object_classes.c) */

    /* ---- scopes: GIL ---- */
    struct zpyv_call_scope *call_scopes; /* the open call scopes of every thread, newest
                                           first (value.h) */
    uint64_t scope_serial;               /* the serial of the last scope opened (value.h) */
    Py_ssize_t open_scopes;              /* scopes open in every thread and context (zs.scope() and
                                   call scopes): none, no view is registered anywhere. */

    /* ---- the open runtimes: GIL (the native handlers look their runtime
       up here once they hold it) ---- */
    /* Borrowed: each removes itself when detached or deallocated; a call
       from native code names its runtime by address. */
    struct zpy_runtime_core **open_runtimes;
    Py_ssize_t open_count;
    Py_ssize_t open_capacity;

    /* ---- memos: GIL (caches: a miss only costs the slow lookup) ---- */
    zpy_current_memo current_memo; /* the current-runtime ContextVar's value in the context it
                                     was read in (per thread: keyed by the thread state) */
    /* Answers of zpy_type_derives, by version tag modulo the size; `scratch`
       holds the answer for a type that has no tag. */
    zpy_type_memo type_memo[ZPY_TYPE_MEMO_SIZE];
    zpy_type_memo type_memo_scratch;
    /* The function names calls from native code used lately, by a hash of
       their text, each with its interned str (the key of a class's
       `_zs_functions`): a hit makes no string (zpy_host_to_python.c). */
    struct zpy_name_key {
        char *text;    /* PyMem copy of the name, NUL-terminated; NULL: empty */
        size_t length; /* strlen(text) */
        PyObject *key; /* the interned str of the same text */
    } name_keys[ZPY_NAME_KEYS];
    /* The plans of calls from native code lately made, by class and function
       name, each with the method it calls when that is a plain function: a
       hit skips the class's `_zs_functions` and the method's lookup. Valid
       while the class's version tag is (any change to the class or a base
       assigns a new one, and tags are never reused); emptied when a runtime
       closes (zpy_host_to_python.c). */
    struct zpy_plan_slot {
        unsigned int tag; /* the class's tp_version_tag; 0: empty */
        PyObject *key;    /* the function's interned name */
        PyObject *plan;   /* its CallPlan */
        PyObject *method; /* the class's function of that name, or NULL: looked up per call */
    } plan_cache[ZPY_PLAN_CACHE];
    /* The plans of the delegate signatures native broadcasts passed lately,
       by runtime and signature address (a signature is kept by reference
       until its runtime is freed: zsharp.h), each with what the signature
       said when it was read (a changed description misses); emptied with
       plan_cache (zpy_host_to_python.c). */
    struct zpy_signature_slot {
        struct zpy_runtime_core *runtime;  /* strong; NULL: empty */
        const zs_function_desc *signature; /* its address */
        const zs_property_desc *params;    /* and what it held then */
        uint32_t param_count, block_size;
        PyObject *plan; /* its CallPlan */
    } signature_cache[ZPY_SIGNATURE_CACHE];
} zpy_core_state;

/* The memo entry of `type` (made on a miss; zpy_module.c). */
const zpy_type_memo *zpy_type_memo_fill(zpy_core_state *state, PyTypeObject *type);

/* What `type` derives from: a memo hit, or a walk of its MRO. */
static inline const zpy_type_memo *zpy_type_derives(zpy_core_state *state, PyTypeObject *type) {
#ifdef Py_TPFLAGS_VALID_VERSION_TAG
    unsigned int tag = type->tp_version_tag;
    const zpy_type_memo *memo = &state->type_memo[tag % ZPY_TYPE_MEMO_SIZE];
    if (tag != 0 && memo->tag == tag && (type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG))
        return memo;
#endif
    return zpy_type_memo_fill(state, type);
}

/* Whether `object` is an object conjugate (of any class, live or expired). */
static inline int zpy_is_conjugate(zpy_core_state *state, PyObject *object) {
    return zpy_type_derives(state, Py_TYPE(object))->conjugate;
}

/* Whether `object` is a value conjugate. */
static inline int zpy_is_value(zpy_core_state *state, PyObject *object) {
    return zpy_type_derives(state, Py_TYPE(object))->value;
}

/* Whether `object` is a runtime (a zs.Runtime: a subclass, so
 * PyObject_TypeCheck would walk its MRO every time). */
static inline int zpy_is_runtime(zpy_core_state *state, PyObject *object) {
    return zpy_type_derives(state, Py_TYPE(object))->runtime;
}

/* ---- the current runtime's ContextVar --------------------------------------- */

/* Read the variable and remember it (zpy_module.c): 0, or -1 with an error. */
int zpy_current_read(zpy_core_state *state, PyObject **out);

/* The value of the current-runtime ContextVar in this thread's context,
 * borrowed (the context holds it), NULL when unset: 0, or -1 with an error.
 * A memo hit costs a few loads instead of PyContextVar_Get's call. */
static inline int zpy_current_get(zpy_core_state *state, PyObject **out) {
    const zpy_current_memo *memo = &state->current_memo;
    PyThreadState *thread = PyThreadState_Get();
    if (memo->valid && memo->thread == thread && memo->thread_id == thread->id &&
        memo->context == thread->context && memo->context_version == thread->context_ver) {
        *out = memo->value;
        return 0;
    }
    return zpy_current_read(state, out);
}

/* The current-runtime ContextVar's value when it is a runtime, else NULL
 * (borrowed): 0, or -1 with an error. A memo hit reads no type. */
static inline int zpy_current_get_runtime(zpy_core_state *state, struct zpy_runtime_core **out) {
    PyObject *value;
    if (zpy_current_get(state, &value) < 0) return -1;
    *out = state->current_memo.runtime;
    assert(state->current_memo.valid && state->current_memo.value == value);
    return 0;
}

/* Set or reset a ContextVar (the current runtime's or any other), then
 * forget the memo of the current runtime's (zpy_module.c). */
PyObject *zpy_context_var_set(zpy_core_state *state, PyObject *variable, PyObject *value);
int zpy_context_var_reset(zpy_core_state *state, PyObject *variable, PyObject *token);

/* ---- a runtime's life (zpy_life.c) ------------------------------------------- */

/* The one state machine of a runtime's life (docs/lifecycle.md): every side
 * (the fast paths here, the collection protocol, calls into the host, the
 * Python `Runtime`) asks it what may happen now, and only zpy_life.c changes
 * it. The phase moves one way: NEW -> OPEN (_core_open) -> CLOSING (close()
 * begins, or the host frees its runtime) -> CLOSED (_core_detach). While
 * OPEN, activities run and nest as the rules in zpy_life.c allow.
 * Invariant: `native` is set exactly in OPEN and CLOSING. Guarded by the
 * GIL (and, for collections and close(), by the Python runtime's lock). */
typedef enum zpy_phase {
    ZPY_PHASE_NEW,     /* made, not opened yet */
    ZPY_PHASE_OPEN,    /* everything may run, as the activities allow */
    ZPY_PHASE_CLOSING, /* close() is expiring and freeing: fast paths decline */
    ZPY_PHASE_CLOSED,  /* detached: every call raises ExpiredConjugateError */
} zpy_phase;

/* What may be asked to start (zpy_life_enter) and end (zpy_life_leave). */
typedef enum zpy_act {
    ZPY_ACT_COLLECT,   /* a collection: full, an incremental start or step */
    ZPY_ACT_CLOSE,     /* close() (Python's) */
    ZPY_ACT_HOST_FREE, /* the host frees its runtime: close() that cannot be refused */
    ZPY_ACT_ADOPT,     /* a section between a native conjugate record and its table entry */
    ZPY_ACT_EXPIRE,    /* the expiry handler expires handed-over objects' conjugates */
    ZPY_ACT_CALL_HOST, /* a host entry runs (Python called it) */
    ZPY_ACT_COUNT
} zpy_act;

typedef struct zpy_life {
    uint8_t phase;           /* zpy_phase */
    uint8_t collecting;      /* ZPY_ACT_COLLECT runs (they never nest) */
    uint8_t closing_here;    /* depth of ZPY_ACT_CLOSE and _HOST_FREE: a nested close() is
                                refused, a host's free inside one is not */
    uint32_t expiring;       /* depth of ZPY_ACT_EXPIRE */
    uint32_t adopting;       /* depth of ZPY_ACT_ADOPT: a keyword's hook in a constructor may
                                create or adopt another object */
    uint32_t native_calls;   /* depth of ZPY_ACT_CALL_HOST */
    PyObject *free_deferred; /* close()'s call freeing the native runtime, made while
                                native_calls > 0: the last call to return makes it */
} zpy_life;

/* ---- runtimes: the conjugate table ----------------------------------------- */

struct zpyv_value;
struct zpyv_name_memo;
struct zpyv_table;

/* Conjugate blocks a runtime keeps for reuse (zpy_runtime_core.spares).
 * Memory-safety tools must still see a kept block as freed: AddressSanitizer
 * is told so (ZPY_SPARE_HIDE poisons it until it is taken or freed), and the
 * valgrind build (-DZS_NO_OBJECT_SLAB without ASan: every block its own, as
 * the native objects, native/src/internal.h) keeps none. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) /* clang's spelling of __SANITIZE_ADDRESS__ */
#define ZPY_SPARES_POISONED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(ZPY_SPARES_POISONED)
#define ZPY_SPARES_POISONED 1
#endif
#define ZPY_SPARE_CONJUGATES 16
#if defined(ZPY_SPARES_POISONED)
#include <sanitizer/asan_interface.h>
#define ZPY_KEEP_SPARES 1
#define ZPY_SPARE_HIDE(block) ASAN_POISON_MEMORY_REGION((block), sizeof(zpy_conjugate))
#define ZPY_SPARE_SHOW(block) ASAN_UNPOISON_MEMORY_REGION((block), sizeof(zpy_conjugate))
#else
#if defined(ZS_NO_OBJECT_SLAB)
#define ZPY_KEEP_SPARES 0
#else
#define ZPY_KEEP_SPARES 1
#endif
#define ZPY_SPARE_HIDE(block) ((void)(block))
#define ZPY_SPARE_SHOW(block) ((void)(block))
#endif

/* The C part of zs.Runtime. The conjugate table maps a handle's slot index to
 * the live conjugate of the object in that slot; entries are borrowed: a
 * conjugate nobody holds is freed by refcount and clears its entry, and the
 * next read of a reference to the object makes a new one (identity cannot be
 * observed without holding both). The exception is a conjugate of a class
 * with Python state (zpy_class_object.stateful): its entry is a strong
 * reference, taken when the entry is put and given up when the conjugate
 * expires, so that conjugate (and its state) lives exactly as long as its
 * object (zpy_object_state.c). A table hit is checked against the whole
 * handle, serial included, so a stale handle never finds the conjugate of a
 * newer object in the same slot. Invariant: an entry is a live conjugate of
 * this runtime whose handle indexes that entry. Guarded by the GIL. */
typedef struct zpy_runtime_core {
    PyObject_HEAD zs_runtime *native; /* NULL before open and after close */
    zpy_core_state *state;
    PyObject **table; /* [capacity] conjugates: borrowed, strong for stateful classes */
    uint8_t *sole;    /* [capacity] 1: the entry's conjugate is the only holder of its
                         object's handle (zpy_conjugate_share) */
    uint32_t capacity;
    zs_dropped_conjugate *dropped; /* [dropped_capacity] live conjugates freed by refcount, told
                                      to the heap at the next safe point (zpy_dropped_flush) */
    uint32_t dropped_count, dropped_capacity;
    uint32_t collect_every;     /* GcStress.collect_every: creation takes the slow path */
    zpy_life life;              /* the runtime's life: read through zpy_open and the
                                    zpy_life_ calls, changed only by zpy_life.c */
    char flush_pending;         /* finalisers queued native frees: flush at the next safe point */
    const uint32_t *dying_word; /* the native runtime's zs_dying_word while open, else NULL
                                   (zpy_dying_window) */
    uint64_t cycle_expired;     /* conjugates expired in the current collection cycle, whichever
                                   path expired them (zpy_expire_dying; GcStats.conjugates_expired) */
    PyObject **classes;         /* [class_capacity] the conjugate class of each native class id
                                   (strong; Runtime._record_class): a proxy is made in C */
    uint32_t class_capacity;
    PyObject *describe;        /* Runtime._describe (names expired objects' messages): what the
                                   expiry handler expires with; cleared at detach */
    uint32_t expiry_reporters; /* Python paths running native expiry that raise its error
                                   themselves (zpy_expire_dying, zpy_collection.c); with none, the
                                   handler reports an error as unraisable */
    PyObject *expiry_error;    /* the first error of the handler's expiry for those paths */
    uint32_t expiry_faults;    /* test-only fault injection (GarbageCollector._debug_fail_expiries):
                                   the next this many conjugate expiries fail as out of memory */
    PyObject *creators;        /* dict: class -> Creator (fast creation in this runtime) */
    PyObject *last_class;      /* the class last created here, and its Creator: */
    PyObject *last_creator;    /*   a loop creating one class skips the dict */
    /* The value layer (value.h). */
    const zs_type **types; /* [type_capacity]: native types by kind id (NULL: none yet) */
    uint32_t type_capacity;
    uint32_t inline_blacks;       /* live inline black values (no native block) */
    struct zpyv_value *blacks;    /* the black list: live black values (borrowed) */
    struct zpyv_value *graveyard; /* expired parked views to release at a safe point
                                    (value.h), linked by `next`: strong */
    zs_ref *deferred;             /* native black blocks whose conjugates Python finalised */
    uint32_t deferred_count, deferred_capacity;
    const zs_class *
        *natives; /* [native_count]: native classes by class number (zpy_object_classes.c) */
    uint32_t native_count;
    PyObject **names; /* [name_count]: decoded base strings by name index (zpy_names.c) */
    uint32_t name_count, name_capacity;
    PyObject *interned; /* dict: exact str -> packed name (index | number << 32) */
    struct zpyv_name_memo
        *name_memo;       /* [ZPYV_NAME_MEMO] the strs last interned, by hash (zpy_names.c) */
    PyObject **callables; /* [callable_capacity]: delegate callables by id - 1 (zpy_names.c);
                                    a free slot holds the next free id, tagged odd */
    uint32_t callable_capacity, callable_count, callable_free;
    /* Freed conjugates' memory, kept for the next ones (zpy_conjugate_alloc):
       a loop making and dropping objects skips Python's allocator. Raw
       blocks of sizeof(zpy_conjugate) bytes, no object in them (no type, no
       reference held); freed with the runtime object. */
    PyObject *spares[ZPY_SPARE_CONJUGATES];
    uint32_t spare_count;
} zpy_runtime_core;

/* Whether objects may be dying whose conjugates have not expired yet (a
 * gather under way, or an expiring list not yet taken, however the
 * collection started): plain writes then ask the heap first (zpyv_writable),
 * and cost one load otherwise. */
static inline int zpy_dying_window(const zpy_runtime_core *rt) {
    return rt->dying_word != NULL && __atomic_load_n(rt->dying_word, __ATOMIC_RELAXED) != 0;
}

/* Whether the runtime is open and not closing: what every fast path asks
 * before it touches the heap (rt->native is then set). */
static inline int zpy_open(const zpy_runtime_core *rt) {
    assert(rt->life.phase != ZPY_PHASE_OPEN || rt->native != NULL);
    return rt->life.phase == ZPY_PHASE_OPEN;
}

/* Why an act may not start now. */
typedef enum zpy_refusal {
    ZPY_ALLOWED,
    ZPY_NOTHING_TO_DO,         /* a close of a closed runtime */
    ZPY_REFUSED_CLOSED,        /* ExpiredConjugateError: the runtime is closing or closed */
    ZPY_REFUSED_ADOPTING,      /* RuntimeError: re-entered inside an adoption */
    ZPY_REFUSED_IN_COLLECTION, /* RuntimeError: re-entered inside a collection or close() */
    ZPY_REFUSED_EXPIRING,      /* RuntimeError: re-entered inside the expiry handler */
} zpy_refusal;

/* The rules of a runtime's life: whether `act` may start now, and if not,
 * why. Re-entry is the danger every rule guards: Python code runs inside
 * every activity (expiry and allocation run finalisers and gc callbacks,
 * a host entry may call back into Python) on the same thread.
 * - A collection needs an open runtime; it is refused inside an adoption
 *   (the expiry would miss the conjugate the table does not hold yet, and
 *   the purge free the object under it), inside a collection or close()
 *   (a nested purge would free objects whose conjugates the outer expiry
 *   has not reached) and inside the expiry handler (likewise).
 * - close() of a closed runtime does nothing; otherwise it is refused where
 *   a collection is, since it expires and frees everything. The host's
 *   free is never refused (the host frees all the same); it does nothing
 *   on a closed runtime.
 * - An adoption needs an open runtime, and nests in anything.
 * - The expiry handler runs whenever the heap calls it (the heap decides).
 * - A host entry needs an open runtime and is refused inside the expiry
 *   handler (its native collection would free the objects not reached
 *   yet); it nests in anything else: a close() from inside one defers the
 *   native free to the last entry to return (zpy_life_free_native).
 * Inline: a host call asks on every call. */
static inline zpy_refusal zpy_life_may(const zpy_runtime_core *rt, zpy_act act) {
    const zpy_life *life = &rt->life;
    int gone = life->phase == ZPY_PHASE_NEW || life->phase == ZPY_PHASE_CLOSED;
    switch (act) {
    case ZPY_ACT_COLLECT:
        if (gone) return ZPY_REFUSED_CLOSED;
        if (life->adopting) return ZPY_REFUSED_ADOPTING;
        if (life->collecting || life->phase == ZPY_PHASE_CLOSING) return ZPY_REFUSED_IN_COLLECTION;
        if (life->expiring) return ZPY_REFUSED_EXPIRING;
        return ZPY_ALLOWED;
    case ZPY_ACT_CLOSE:
        if (gone && !life->closing_here) return ZPY_NOTHING_TO_DO;
        if (life->adopting) return ZPY_REFUSED_ADOPTING;
        if (life->collecting || life->closing_here) return ZPY_REFUSED_IN_COLLECTION;
        return ZPY_ALLOWED;
    case ZPY_ACT_HOST_FREE:
        return gone ? ZPY_NOTHING_TO_DO : ZPY_ALLOWED;
    case ZPY_ACT_ADOPT:
        return life->phase == ZPY_PHASE_OPEN ? ZPY_ALLOWED : ZPY_REFUSED_CLOSED;
    case ZPY_ACT_EXPIRE:
        return ZPY_ALLOWED;
    case ZPY_ACT_CALL_HOST:
        if (life->phase != ZPY_PHASE_OPEN) return ZPY_REFUSED_CLOSED;
        return life->expiring ? ZPY_REFUSED_EXPIRING : ZPY_ALLOWED;
    case ZPY_ACT_COUNT:
        break;
    }
    assert(0 && "not an act");
    return ZPY_REFUSED_CLOSED;
}

/* Raise the error of refusal `why` (not ZPY_ALLOWED or ZPY_NOTHING_TO_DO)
 * for `what` (the caller's name, a str) and return -1. */
int zpy_life_refuse(const zpy_runtime_core *rt, zpy_act act, zpy_refusal why, PyObject *what);
/* Begin `act` if the runtime's life allows it now: 1, or 0 for a close of
 * a runtime already closed (nothing to do), or -1 with the error that says
 * why not (`what` names the caller in it). zpy_life.c has the rules. */
int zpy_life_enter(zpy_runtime_core *rt, zpy_act act, PyObject *what);
/* Begin `act`, which zpy_life_may allowed with no Python code run since. */
void zpy_life_begin(zpy_runtime_core *rt, zpy_act act);
/* End `act`, begun by zpy_life_enter. */
void zpy_life_leave(zpy_runtime_core *rt, zpy_act act);
/* The phase moves: OPEN once the native runtime is attached, CLOSED once detached. */
void zpy_life_opened(zpy_runtime_core *rt);
void zpy_life_closed(zpy_runtime_core *rt);
/* Call free() (close()'s freeing of the detached native runtime) now, or
 * when the last host entry running on it returns: 0, or -1 with an error. */
int zpy_life_free_native(zpy_runtime_core *rt, PyObject *free);
/* The state a reader sees ("open", "collecting", "expiring", "closing",
 * "closed"): Runtime.lifecycle. */
const char *zpy_life_state_name(const zpy_runtime_core *rt);

/* ---- object conjugates ---------------------------------------------------- */

/* An object conjugate: 48 bytes, not tracked by Python's cycle collector.
 * Live: `address` is the native object and `u.views` its table of cached red
 * views (value.h), or NULL. Expired: `address` is NULL and `u.expired` is
 * the ExpiredPointer describing why. A conjugate of a stateful class has its
 * state's slots after these members and is tracked (zpy_object_state.c). */
typedef struct zpy_conjugate {
    PyObject_HEAD char *address;
    zs_ref handle;
    zpy_runtime_core *runtime; /* strong: a conjugate keeps its runtime alive */
    union {
        struct zpyv_table *views; /* while live */
        PyObject *expired;        /* once expired (strong) */
    } u;
} zpy_conjugate;

/* The class object of a conjugate class: a heap type plus the module state
 * and the number that indexes every runtime's native classes. */
typedef struct zpy_class_object {
    PyHeapTypeObject heap;
    zpy_core_state *state;
    uint32_t number;  /* an index of zpy_runtime_core.natives (init_class) */
    char python_init; /* the class has a Python __init__: creation goes to init_create */
    char stateful;    /* the class has Python state (zs.state()): its conjugates are
                         tracked, have slots after zpy_conjugate, and the conjugate
                         table holds them strongly (init_class sets it; zpy_object_state.c) */
} zpy_class_object;

/* Whether conjugates of `cls` (a conjugate class: ObjectClass is its
 * metaclass) hold Python state. */
static inline int zpy_class_stateful(PyTypeObject *cls) {
    return ((zpy_class_object *)cls)->stateful;
}

/* How one class is created in one runtime, when its defaults are all plain
 * data: the native class and the image of the bytes after the header. */
typedef struct zpy_creator {
    PyObject_HEAD const zs_class *cls;
    PyObject *image; /* bytes */
} zpy_creator;

/* ---- shared between the files ----------------------------------------------- */

#define ZPY_CONJUGATE_IS_LIVE(c) ((c)->address != NULL)

/* The handle of a live conjugate's object, given out: stored in a
 * reference, a container or a value, passed to a host function, or shown
 * to Python code (`_h`). The conjugate stops being its sole holder, so
 * dropping it no longer destroys the object at once (zpy_dropped_flush).
 * Read `handle` directly only to name the object itself: a write into its
 * own memory, a comparison, the table. */
static inline zs_ref zpy_conjugate_share(const zpy_conjugate *conjugate) {
    zpy_runtime_core *rt = conjugate->runtime;
    uint32_t index = ZS_REF_INDEX(conjugate->handle);
    if (index < rt->capacity) rt->sole[index] = 0;
    return conjugate->handle;
}

/* The conjugate table (zpy_conjugate_table.c), expiry (zpy_expiry.c),
 * zsharp_python.h (zpy_python_api.c), ObjectConjugate (zpy_object_conjugate.c). */
/* A new conjugate of `cls` from Python's allocator (zpy_conjugate_alloc's
 * other path). */
zpy_conjugate *zpy_conjugate_alloc_new(PyTypeObject *cls);

/* A new conjugate of `cls` (a conjugate class) for `rt`, not bound yet, or
 * NULL with MemoryError: allocating it runs no Python code (zpy_object_state.c says
 * why that needs care). An untracked class's takes a block the runtime
 * kept (zpy_runtime_core.spares), and is made as PyType_GenericAlloc makes
 * one after its allocation. */
static inline zpy_conjugate *zpy_conjugate_alloc(zpy_runtime_core *rt, PyTypeObject *cls) {
    if (rt->spare_count == 0 || zpy_class_stateful(cls)) return zpy_conjugate_alloc_new(cls);
    /* Untracked classes all have ObjectConjugate's size (init_class). */
    assert(cls->tp_basicsize == (Py_ssize_t)sizeof(zpy_conjugate) && cls->tp_itemsize == 0);
    zpy_conjugate *conjugate = (zpy_conjugate *)rt->spares[--rt->spare_count];
    ZPY_SPARE_SHOW(conjugate);
    /* Cleared field by field: a memset of the whole block, inlined into
       zpy_object_classes.c's plain_create, compiled to `rep stos`, whose start-up was
       a third of that function's time. */
    memset(conjugate, 0, sizeof(PyObject));
    conjugate->address = NULL;
    conjugate->handle = ZS_NULL_REF;
    conjugate->runtime = NULL;
    conjugate->u.views = NULL;
    return (zpy_conjugate *)PyObject_Init((PyObject *)conjugate, cls);
}

/* Grow the table so that `index` fits; -1 with MemoryError (zpy_conjugate_table.c). */
int zpy_table_reserve(zpy_runtime_core *rt, uint32_t index);

/* Bind a freshly allocated conjugate to its object and record it in the
 * table: borrowed, or strong for a stateful class (given up at expiry).
 * On failure (out of memory) it stays in no table: freeing it is safe.
 * Runs no Python code. */
static inline int zpy_conjugate_bind(zpy_runtime_core *rt, zpy_conjugate *conjugate, zs_ref handle,
                                     void *address) {
    conjugate->address = address;
    conjugate->handle = handle;
    conjugate->runtime = (zpy_runtime_core *)Py_NewRef((PyObject *)rt);
    uint32_t index = ZS_REF_INDEX(handle);
    if (index >= rt->capacity && zpy_table_reserve(rt, index) < 0) return -1;
    /* Invariant: a slot's previous conjugate expired (and left the table)
       before the native slot could be reused. */
    assert(rt->table[index] == NULL);
    rt->table[index] = (PyObject *)conjugate;
    if (zpy_class_stateful(Py_TYPE(conjugate))) Py_INCREF(conjugate);
    return 0;
}
/* Record a conjugate just made with its object (zs_object_new_conjugate)
 * as the sole holder of the handle. */
static inline void zpy_conjugate_set_sole(zpy_runtime_core *rt, const zpy_conjugate *conjugate) {
    rt->sole[ZS_REF_INDEX(conjugate->handle)] = 1; /* bound: the table has the entry */
}
/* The live conjugate of `handle`, or NULL (borrowed). */
static inline zpy_conjugate *zpy_table_get(zpy_runtime_core *rt, zs_ref handle) {
    uint32_t index = ZS_REF_INDEX(handle);
    if (index >= rt->capacity) return NULL;
    zpy_conjugate *found = (zpy_conjugate *)rt->table[index];
    return found != NULL && found->handle == handle ? found : NULL;
}

/* The conjugates dropped since the last safe point, ready for the heap:
 * those whose object has a new conjugate since are left out. Returns how
 * many stay in rt->dropped; the caller passes them to the heap with no
 * Python code in between (GIL held: no conjugate can be made meanwhile),
 * then empties the queue. */
static inline uint32_t zpy_dropped_ready(zpy_runtime_core *rt) {
    uint32_t kept = 0;
    /* An object given a new conjugate since (adopted back from a handle the
       heap or Python shared) still has one: it must stay on the way to the
       expiring list. */
    for (uint32_t i = 0; i < rt->dropped_count; i++)
        if (zpy_table_get(rt, rt->dropped[i].ref) == NULL) rt->dropped[kept++] = rt->dropped[i];
    rt->dropped_count = kept;
    return kept;
}
/* zpy_dropped_ready, then zs_conjugates_dropped (a safe point). */
void zpy_dropped_flush(zpy_runtime_core *rt);
/* A safe point: free the blocks of black values Python finalised, tell the
 * heap of dropped conjugates, release buried views and drop callables no
 * binding holds (Runtime._flush_values). -1 with an exception. */
int zpy_flush_values(zpy_runtime_core *rt);
/* Have the heap hand up to `limit` dying objects off its expiring list to
 * the expiry handler, which expires their conjugates (counted in
 * rt->cycle_expired): how many were taken and expired. -1 with an
 * exception (each taken one expired all the same). */
int zpy_expire_dying(zpy_runtime_core *rt, uint32_t limit, uint32_t *out_taken,
                     uint32_t *out_expired);
/* Count a Python path in (1) or out (0) of those that raise the expiry
 * handler's error themselves; counting out raises it (-1) if there was one. */
int zpy_expiry_reporting(zpy_runtime_core *rt, int in);
/* The zs_expiry_handler of every runtime (`user`: the module's state). */
void zpy_expire_handed_over(void *user, zs_runtime *native, const zs_ref *objects,
                            const uint64_t *names, const uint8_t *garbage, uint32_t count);
/* The open runtime core of a native runtime, or NULL (borrowed; zpy_host_to_python.c). */
zpy_runtime_core *zpy_open_runtime_of(const zpy_core_state *state, const zs_runtime *native);
PyObject *zpy_raise_expired(zpy_conjugate *conjugate);
/* Fill the state's zsharp_python.h table (module initialisation). */
void zpy_python_api_init(zpy_core_state *state);
int zpy_add_conjugate_types(PyObject *module, zpy_core_state *state);
PyObject *zpy_resolve_conjugate(zpy_runtime_core *rt, zs_ref handle);
/* The new conjugate of `object` (handle `handle`, which has none in the
 * table), already recorded by the heap as having one: a new reference, or
 * NULL with an error. The runtime is open and not closing. */
PyObject *zpy_make_conjugate(zpy_runtime_core *rt, zs_ref handle, zs_object *object);
/* The conjugate of a handle (from the table, else adopted by Python), None
 * for a null, dead or dying handle: a new reference, or NULL with an error. */
PyObject *zpy_conjugate_of(zpy_runtime_core *rt, zs_ref handle);
/* tp_setattro of conjugates: the generic store, with an error that says how
 * to fix a store into a name the class does not have. */
int zpy_explained_setattro(PyObject *self, PyObject *name, PyObject *value);
/* Whether the object of a live conjugate is of `cls`'s native class (or a
 * subclass) in the conjugate's runtime: the check every accessor makes, so
 * that neither a descriptor applied to a foreign instance nor a re-classed
 * conjugate can read or write outside the native object. Inline: every
 * accessor and host function call makes it. */
static inline int zpy_conjugate_is_a(const zpy_conjugate *conjugate, PyTypeObject *cls) {
    const zpy_runtime_core *rt = conjugate->runtime;
    uint32_t number = ((const zpy_class_object *)cls)->number;
    if (number == 0 || number >= rt->native_count || rt->natives[number] == NULL)
        return 0; /* the class has no native class in that runtime: no object is one */
    const zs_class *have = ((const zs_object *)conjugate->address)->cls;
    return ZS_CLASS_DERIVES(have, rt->natives[number]);
}
/* refuse_reclassing(marker): an audit hook, installed once, that refuses
 * object.__dict__['__class__'].__set__ on conjugates (zpy_conjugate_table.c). */
PyObject *zpy_refuse_reclassing(PyObject *module, PyObject *marker);

/* Drop a conjugate's entry if it is the one recorded (the reference a
 * stateful conjugate's entry held is the caller's to give up). Returns
 * whether the conjugate was its object's sole holder. */
int zpy_table_forget(zpy_runtime_core *rt, zpy_conjugate *conjugate);
/* Queue a live conjugate being freed, for the heap (zpy_dropped_flush). A
 * finaliser's context: allocates with PyMem only (no Python code runs),
 * and out of memory simply leaves the object to the collector. */
void zpy_dropped_add(zpy_runtime_core *rt, zs_ref handle, int sole);
/* Runtime._expire_all(describe, keep_heap=False): expire every conjugate in
 * the table and every black value (close()). Names are read from the native
 * headers, still there. With keep_heap (Python lets go of a runtime a host
 * owns and keeps), the heap is told too: the black values' blocks are freed
 * and no object keeps its conjugate flag, so the host's later collections
 * need no managed side. */
PyObject *zpy_runtime_expire_all(PyObject *self, PyObject *args);
/* ObjectConjugate's type (zpy_object_conjugate.c), made with RuntimeCore's
 * (zpy_add_conjugate_types, zpy_runtime_core.c). */
extern PyType_Spec zpy_conjugate_spec;

/* zpy_object_properties.c */
int zpy_add_property_types(PyObject *module, zpy_core_state *state);
/* Raise TypeError: descriptor `what` applied to an object it does not fit. */
int zpy_descriptor_misapplied(PyObject *what, PyTypeObject *owner, PyObject *obj);

/* A constructor keyword for a scalar or reference property, converted and
 * checked before anything is allocated, written once the object exists. */
typedef struct zpy_prepared_store {
    uint32_t offset;
    uint32_t size; /* bytes of a scalar; 0 for a reference */
    zs_ref ref;
    unsigned char bits[8]; /* the scalar's C value */
} zpy_prepared_store;
/* What a ScalarProperty reads: its class, offset, scalar kind and name
 * (borrowed). `descriptor` must be one. Returns 1. */
int zpy_scalar_property_info(PyObject *descriptor, PyTypeObject **owner, uint32_t *offset,
                             zpy_scalar_kind *kind, PyObject **what);
int zpy_prepare_store(zpy_core_state *state, PyTypeObject *cls, PyObject *descriptor,
                      zpy_runtime_core *rt, PyObject *value, zpy_prepared_store *out);
zs_status zpy_apply_store(zpy_runtime_core *rt, zpy_conjugate *conjugate,
                          const zpy_prepared_store *store);

/* zpy_object_classes.c */
int zpy_add_class_types(PyObject *module, zpy_core_state *state);
/* Let calls of a conjugate class take the vectorcall path (init_class). */
int zpy_class_enable_vectorcall(PyTypeObject *cls);

/* zpy_object_state.c */
int zpy_add_state_types(PyObject *module, zpy_core_state *state);
/* Check a class declared stateful before it has instances: the bytes its
 * instances have after zpy_conjugate are object slots only. */
int zpy_state_check_class(zpy_core_state *state, PyTypeObject *cls);
/* Release an expired stateful conjugate's state, then the reference the
 * table held (given here). Runs Python code (the values' finalisers). */
void zpy_state_release(zpy_conjugate *conjugate);

/* zpy_weak.c */
/* A weak object pointer: never keeps its object alive, never resolves to
 * another object reusing the slot. */
typedef struct zpy_weak {
    PyObject_HEAD zpy_runtime_core *runtime; /* strong; NULL for a null pointer */
    zs_ref handle;
} zpy_weak;
int zpy_add_weak_type(PyObject *module, zpy_core_state *state);
/* A new weak pointer of `type` (WeakPointer or a subclass) to `handle`. */
PyObject *zpy_weak_new(PyTypeObject *type, zpy_runtime_core *rt, zs_ref handle);
/* Its object's conjugate while the object lives, else None. */
PyObject *zpy_weak_get(PyObject *weak);

/* The current runtime (zpy_value_type.c), the open runtimes
 * (zpy_module_state.c), calls from the host into Python (zpy_host_to_python.c). */
/* The current runtime: `with Runtime()`'s, else the default one (made by
 * Python's current_runtime()). New reference, or NULL with an error
 * (zpy_views.c; zpy_object_classes.c's fast creation path has its own borrowed lookup,
 * which declines instead of making the default runtime). */
zpy_runtime_core *zpy_current_runtime(zpy_core_state *state);
int zpy_open_runtime_add(zpy_core_state *state, zpy_runtime_core *rt);
void zpy_open_runtime_remove(zpy_core_state *state, zpy_runtime_core *rt);
PyObject *zpy_configure_calls(PyObject *module, PyObject *args, PyObject *kwargs);
/* The managed call handler (zpy_host_to_python.c), or NULL with an error
 * before configure_calls(). */
zs_managed_call_handler zpy_call_handler_of(const zpy_core_state *state);
/* The managed listener handler of delegates broadcast from native code
 * (zpy_host_to_python.c), or NULL with an error before configure_calls()
 * gave it signature_plan_of. */
zs_managed_listener_handler zpy_listener_handler_of(const zpy_core_state *state);
/* Drop the function names the handler remembers (module clear). */
void zpy_name_keys_clear(zpy_core_state *state);
void zpy_plan_cache_clear(zpy_core_state *state);
int zpy_add_call_types(PyObject *module, zpy_core_state *state);

/* zpy_collection.c: the collection protocol (Runtime._collect_full,
 * _gc_start_incremental, _gc_step, _gc_expire_pending) and Runtime._gc_stats */
PyObject *zpy_runtime_collect_full(PyObject *self, PyObject *layout);
PyObject *zpy_runtime_gc_start_incremental(PyObject *self, PyObject *unused);
PyObject *zpy_runtime_gc_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *zpy_runtime_gc_expire_pending(PyObject *self, PyObject *unused);
PyObject *zpy_runtime_gc_stats(PyObject *self, PyObject *layout);

/* zpy_ticks.c: the tick manager (Runtime._ticks_*, rt.ticks) and its constants */
PyObject *zpy_ticks_register(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *zpy_ticks_unregister(PyObject *self, PyObject *tick_id);
PyObject *zpy_ticks_unregister_object(PyObject *self, PyObject *obj);
PyObject *zpy_ticks_set_enabled(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *zpy_ticks_set_interval(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *zpy_ticks_set_group(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *zpy_ticks_prerequisite(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *zpy_ticks_info(PyObject *self, PyObject *tick_id);
PyObject *zpy_ticks_count(PyObject *self, PyObject *unused);
PyObject *zpy_ticks_frame(PyObject *self, PyObject *dt);
int zpy_add_tick_constants(PyObject *module);

/* ---- zpy_heap_calls.c and zpy_reflection.c: the heap calls of Python ------------------ */

/* Methods of RuntimeCore (`_heap_*`, the end of runtime_core_methods in
 * zpy_conjugate_table.c): the only way the Python package reaches the heap.
 * zpy_heap_calls.c has zs.Runtime's and rt.gc's (statuses returned, for
 * check()); zpy_reflection.c the lifetime controls, queries and hosts'
 * descriptions of the lower layers (statuses raised). Each file says what
 * each takes and returns. */
PyObject *zpy_rt_new_runtime(PyObject *unused, PyObject *const *args, Py_ssize_t nargs);
PyObject *zpy_rt_free_runtime(PyObject *cls, PyObject *address);
PyObject *zpy_rt_set_handlers(PyObject *self, PyObject *install);
PyObject *zpy_rt_memory(PyObject *self, PyObject *unused);
PyObject *zpy_rt_live_objects(PyObject *self, PyObject *unused);
PyObject *zpy_rt_value_count(PyObject *self, PyObject *unused);
PyObject *zpy_rt_name_count(PyObject *self, PyObject *unused);
PyObject *zpy_rt_cluster_count(PyObject *self, PyObject *unused);
PyObject *zpy_rt_gc_phase(PyObject *self, PyObject *unused);
PyObject *zpy_rt_expire_gathered(PyObject *self, PyObject *unused);
PyObject *zpy_rt_close_disregard(PyObject *self, PyObject *unused);
PyObject *zpy_rt_debug_set(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *zpy_rt_verify(PyObject *self, PyObject *unused);
PyObject *zpy_rt_register_class(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *zpy_rt_new_object(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *zpy_rt_release_strong_ref(PyObject *self, PyObject *handle);
PyObject *zpy_rt_resolve_class(PyObject *self, PyObject *handle);
PyObject *zpy_rt_resolve_for_conjugate(PyObject *self, PyObject *handle);
PyObject *zpy_rt_create_cluster(PyObject *self, PyObject *handle);
PyObject *zpy_rt_cluster_info(PyObject *self, PyObject *handle);
PyObject *zpy_rt_reference_chains(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *zpy_rt_add_to_root(PyObject *self, PyObject *args);
PyObject *zpy_rt_remove_from_root(PyObject *self, PyObject *args);
PyObject *zpy_rt_mark_as_garbage(PyObject *self, PyObject *args);
PyObject *zpy_rt_dissolve_cluster(PyObject *self, PyObject *args);
PyObject *zpy_rt_add_strong_ref(PyObject *self, PyObject *args);
PyObject *zpy_rt_object_writable(PyObject *self, PyObject *args);
PyObject *zpy_rt_abandon(PyObject *self, PyObject *handle);
PyObject *zpy_rt_is_rooted(PyObject *self, PyObject *handle);
PyObject *zpy_rt_is_garbage(PyObject *self, PyObject *handle);
PyObject *zpy_rt_is_permanent(PyObject *self, PyObject *handle);
PyObject *zpy_rt_live_handles(PyObject *self, PyObject *what);
PyObject *zpy_rt_class_id_of(PyObject *self, PyObject *cls);
PyObject *zpy_rt_class_names(PyObject *self, PyObject *unused);
PyObject *zpy_rt_type_names(PyObject *self, PyObject *unused);
PyObject *zpy_rt_find_class(PyObject *self, PyObject *name);
PyObject *zpy_rt_describe_class(PyObject *self, PyObject *class_id);
PyObject *zpy_rt_find_struct(PyObject *self, PyObject *name);
PyObject *zpy_rt_find_enum(PyObject *self, PyObject *name);
PyObject *zpy_rt_class_defaults(PyObject *self, PyObject *args);
PyObject *zpy_rt_native_type_traits(PyObject *self, PyObject *kind);
/* What every heap call and every call from the host into Python start with
 * (zpy_module_state.c): the native runtime of an open runtime, or NULL with
 * ExpiredConjugateError once it is closed and, unless `while_closing`,
 * once close() has begun. */
zs_runtime *zpy_rt_open(zpy_runtime_core *rt, int while_closing);
/* A handle (or other uint64) argument, converted as cffi converted it
 * (__index__; OverflowError outside uint64): 0, or -1 with an error. May
 * run Python code: convert every argument before zpy_rt_open. */
int zpy_rt_handle_arg(PyObject *value, zs_ref *out);
/* Module functions (core_functions, zpy_module.c; zpy_reflection.c). */
PyObject *zpy_module_status_message(PyObject *module, PyObject *status);
PyObject *zpy_module_object_header(PyObject *module, PyObject *obj);
/* Add the zsharp.h constants Python needs (statuses, MAX_OBJECTS_LIMIT,
 * GC_*, DEBUG_*, CHAIN_*, TYPE_*, MEMBER_*...), GC_STATS_FIELDS and
 * C_LAYOUTS to the module. */
int zpy_add_heap_constants(PyObject *module);

/* The module state (zpy_module_state.c), a status raised (zpy_errors.c), the
 * module (zpy_module.c). */
/* The module's definition (its state: zpy_state_of_type). */
extern struct PyModuleDef zpy_core_module;
zpy_core_state *zpy_state_of_module(PyObject *module);
zpy_core_state *zpy_state_of_type(PyTypeObject *type);
PyObject *zpy_call_raise_status(zpy_core_state *state, zs_ref status, PyObject *what,
                                zpy_runtime_core *rt);

#endif
