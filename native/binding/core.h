/* zsharp_py._core: the hot path of object conjugates, as a CPython extension.
 *
 * Python sees a native object through its conjugate. Everything a game loop
 * does on every frame goes through here, in C, with no Python frame: reading
 * and writing scalar properties, reading and storing object references (the
 * conjugate mapping), and creating an object with its conjugate. Everything
 * else (errors, names, value properties, collections) stays in Python and is
 * reached through the callbacks in zs_core_state.
 *
 * The native heap is the cffi extension zsharp_py._native_lib; this module
 * does not link against it. Python hands over the addresses of the few native
 * functions it calls (zs_native_api), taken from the cffi module itself, so
 * there is exactly one copy of the heap code in the process.
 *
 * Thread safety (design rule 10): every function here runs with the GIL held
 * and never releases it. A native call made from here therefore cannot be
 * interleaved with Python code on another thread, and Runtime.close() sets
 * `closing` (under the GIL) before it frees anything: a fast path that sees
 * `closing == 0` finishes before the heap can go away.
 */
#ifndef ZSHARP_PY_CORE_H
#define ZSHARP_PY_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "zsharp.h"

/* ---- the native functions this module calls ---------------------------- */

/* Addresses taken from the cffi module by Python (see zsharp_py/_runtime.py); their
 * types are checked against the public header at compile time (module.c). */
typedef zs_ref (*zs_object_new_conjugate_fn)(zs_runtime *, const zs_class *, zs_ref, uint32_t,
                                             uint32_t, const char *, uint32_t, void *);
typedef zs_status (*zs_store_ref_fn)(zs_runtime *, zs_ref, uint32_t, zs_ref);
typedef zs_status (*zs_mark_as_garbage_fn)(zs_runtime *, zs_ref);
typedef zs_status (*zs_gc_take_expiring_ex_fn)(zs_runtime *, zs_ref *, uint64_t *, uint8_t *,
                                               uint32_t, uint32_t *);
typedef uint32_t (*zs_gc_expiring_count_fn)(zs_runtime *);
typedef zs_status (*zs_name_intern_fn)(zs_runtime *, const char *, size_t, uint32_t *, uint32_t *);

typedef struct zs_native_api {
    zs_object_new_conjugate_fn object_new_conjugate;
    zs_store_ref_fn store_ref;
    zs_mark_as_garbage_fn mark_as_garbage;
    zs_gc_take_expiring_ex_fn take_expiring;
    zs_gc_expiring_count_fn expiring_count;
    zs_name_intern_fn name_intern;
} zs_native_api;

/* ---- module state ---------------------------------------------------------- */

/* Everything the module shares: its types, the Python callbacks of the slow
 * paths, and the native API. One per module object; every conjugate class
 * and descriptor keeps a pointer to it (the module outlives them: the types
 * hold a reference to it). */
typedef struct zs_core_state {
    PyTypeObject *conjugate_type;  /* ObjectConjugate: base of zs.Object */
    PyTypeObject *runtime_type;    /* RuntimeCore: base of zs.Runtime */
    PyTypeObject *class_type;      /* ObjectClass: base of zs.ObjectMeta */
    PyTypeObject *scalar_type;     /* ScalarProperty descriptor */
    PyTypeObject *reference_type;  /* ReferenceProperty descriptor */
    PyTypeObject *creator_type;    /* Creator: how a class is created in one runtime */
    PyObject *str_outer;           /* "outer", interned (a constructor keyword) */
    PyObject *str_conjugate_of;    /* "_conjugate_of", interned (Runtime's resolver) */
    /* Set by configure(); NULL until then. */
    PyObject *current;          /* the ContextVar of `with Runtime()` */
    PyObject *default_runtime;  /* list holding the default runtime (0 or 1 items) */
    PyObject *slow_create;      /* (cls, *args, **kwargs) -> conjugate */
    PyObject *expired_error;    /* (conjugate) -> ExpiredConjugateError */
    PyObject *raise_status;     /* (status, what, runtime) -> raises (expires first if dying) */
    PyObject *store_failed;     /* (holder, value, what) -> raises */
    PyObject *store_refused;    /* (runtime, status, what) -> raises */
    PyObject *make_pointer;     /* (conjugate) -> its layout cdata pointer */
    PyObject *expired_type;     /* the ExpiredPointer class (a tuple subclass) */
    zs_native_api api;
    int configured;
    /* Calls from native code (calls.c); set by configure_calls(). */
    PyObject *slow_call;        /* (runtime, handle, function, params address) -> status */
    PyObject *scopes;           /* the ContextVar of zs.scope() (a tuple of view lists) */
    PyObject *expire_scope;     /* (views) -> None: expire the views of an ended scope */
    PyObject *str_zs_functions; /* "_zs_functions", interned (a class's call layouts) */
    PyObject *str_fast;         /* "_fast", interned (a layout's C call plan) */
    /* The open runtimes (borrowed: each removes itself when detached or
       deallocated): a call from native code names its runtime by address. */
    struct zs_runtime_core **open_runtimes;
    Py_ssize_t open_count;
    Py_ssize_t open_capacity;
} zs_core_state;

/* ---- runtimes: the conjugate table ----------------------------------------- */

/* The C part of zs.Runtime. The conjugate table maps a handle's slot index to
 * the live conjugate of the object in that slot; entries are borrowed: a
 * conjugate nobody holds is freed by refcount and clears its entry, and the
 * next read of a reference to the object makes a new one (identity cannot be
 * observed without holding both). A table hit is checked against the whole
 * handle, serial included, so a stale handle never finds the conjugate of a
 * newer object in the same slot. Invariant: an entry is a live conjugate of
 * this runtime whose handle indexes that entry. */
typedef struct zs_runtime_core {
    PyObject_HEAD
    zs_runtime *native;          /* NULL before open and after close */
    zs_core_state *state;
    PyObject **table;            /* [capacity] borrowed conjugates */
    uint32_t capacity;
    uint32_t collect_every;      /* GcStress.collect_every: creation takes the slow path */
    char closing;                /* set first thing by close(): fast paths decline */
    char adopting;               /* between a native conjugate record and its table entry */
    char flush_pending;          /* finalisers queued native frees: flush at the next creation */
    PyObject *creators;          /* dict: class -> Creator (fast creation in this runtime) */
    PyObject *last_class;        /* the class last created here, and its Creator: */
    PyObject *last_creator;      /*   a loop creating one class skips the dict */
} zs_runtime_core;

/* ---- object conjugates ---------------------------------------------------- */

/* An object conjugate: 48 bytes, not tracked by Python's cycle collector.
 * Live: `address` is the native object and `extra` is NULL, the cache of red
 * views (a dict) or the cached cdata pointer (anything else), or a 2-tuple
 * (views, pointer) when both exist. Expired: `address` is NULL and `extra` is
 * the ExpiredPointer describing why. */
typedef struct zs_conjugate {
    PyObject_HEAD
    char *address;
    zs_ref handle;
    zs_runtime_core *runtime;  /* strong: a conjugate keeps its runtime alive */
    PyObject *extra;
} zs_conjugate;

/* The class object of a conjugate class: a heap type plus the module state. */
typedef struct zs_class_object {
    PyHeapTypeObject heap;
    zs_core_state *state;
} zs_class_object;

/* How one class is created in one runtime, when its defaults are all plain
 * data: the native class and the image of the bytes after the header. */
typedef struct zs_creator {
    PyObject_HEAD
    const zs_class *cls;
    PyObject *image;  /* bytes */
} zs_creator;

/* ---- shared between the files ----------------------------------------------- */

#define ZS_CONJUGATE_IS_LIVE(c) ((c)->address != NULL)

/* conjugates.c */
int zs_conjugate_bind(zs_runtime_core *rt, zs_conjugate *conjugate, zs_ref handle,
                      void *address);
zs_conjugate *zs_table_get(zs_runtime_core *rt, zs_ref handle);
PyObject *zs_raise_expired(zs_conjugate *conjugate);
int zs_add_conjugate_types(PyObject *module, zs_core_state *state);
PyObject *zs_resolve_conjugate(zs_runtime_core *rt, zs_ref handle);
PyObject *zs_refuse_reclassing(PyObject *module, PyObject *marker);

/* properties.c */
int zs_add_property_types(PyObject *module, zs_core_state *state);

/* The C type of a scalar property (matches zsharp_py._types._SCALAR_CODES). */
typedef enum zs_scalar_kind {
    ZS_SCALAR_BOOL, ZS_SCALAR_I8, ZS_SCALAR_I16, ZS_SCALAR_I32, ZS_SCALAR_I64,
    ZS_SCALAR_U8, ZS_SCALAR_U16, ZS_SCALAR_U32, ZS_SCALAR_U64, ZS_SCALAR_F32, ZS_SCALAR_F64,
    ZS_SCALAR_KINDS
} zs_scalar_kind;
/* The Python value of the scalar of `kind` at `at`. */
PyObject *zs_scalar_load(zs_scalar_kind kind, const char *at);

/* A constructor keyword for a scalar or reference property, converted and
 * checked before anything is allocated, written once the object exists. */
typedef struct zs_prepared_store {
    uint32_t offset;
    uint32_t size;            /* bytes of a scalar; 0 for a reference */
    zs_ref ref;
    unsigned char bits[8];    /* the scalar's C value */
} zs_prepared_store;
int zs_prepare_store(zs_core_state *state, PyTypeObject *cls, PyObject *descriptor,
                     zs_runtime_core *rt, PyObject *value, zs_prepared_store *out);
zs_status zs_apply_store(zs_runtime_core *rt, zs_conjugate *conjugate,
                         const zs_prepared_store *store);

/* classes.c */
int zs_add_class_types(PyObject *module, zs_core_state *state);

/* calls.c */
int zs_open_runtime_add(zs_core_state *state, zs_runtime_core *rt);
void zs_open_runtime_remove(zs_core_state *state, zs_runtime_core *rt);
PyObject *zs_configure_calls(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *zs_call_handler_addresses(PyObject *module, PyObject *unused);

/* module.c */
zs_core_state *zs_state_of_module(PyObject *module);
zs_core_state *zs_state_of_type(PyTypeObject *type);
PyObject *zs_call_raise_status(zs_core_state *state, zs_ref status, PyObject *what,
                               zs_runtime_core *rt);

#endif
