/* The value layer of zsharp_py._core: kinds, value conjugates and the
 * marshalling rule.
 *
 * Every non-object conjugate (a struct, a string, a name, a container, an
 * optional, a delegate, an object wrapper) is a value conjugate: a red view
 * into memory something else owns (a member of an object or of another
 * value, an element of a container), or a black value that Python owns.
 * Its type is described by a kind (zpyv_kind): how the value is laid out,
 * which native type it is in each runtime, and how it converts to and from
 * Python.
 *
 * THE RULE (docs/design.md, "Hostile values"). Converting a Python value
 * may run arbitrary Python code: __index__, __float__, __len__, __iter__,
 * __eq__/__hash__, a str subclass's methods, and CPython's cycle collector
 * firing __del__ or gc.callbacks on any allocation. That code may grow,
 * rehash, dispose, collect or close anything. So every write goes in three
 * phases:
 *
 *   1. stage:   the Python value is converted completely into a staged value
 *               (zpyv_staged): private memory of this module, no native
 *               address involved. Python code may run.
 *   2. commit:  the destination is resolved from live conjugates (the owner
 *               checked, indices re-checked against the container as it is
 *               now), the staged value is emitted into native memory, and the
 *               views the write invalidates are expired in place. No Python
 *               code runs: nothing here allocates a Python object or drops a
 *               reference.
 *   3. release: the staged value is freed and expired views are dropped from
 *               their caches. Python code may run again; nothing dangles.
 *
 * Reads that copy out follow the same rule backwards: capture the native
 * data into a staged value (no Python code), then build Python objects from
 * it. A view is created expired-pending, registered (cache, scope), and only
 * then given its address, after re-checking its parent.
 *
 * Expiry never allocates: a view is expired by clearing its address and
 * pointing its reason at one of the module's interned reason strings.
 */
#ifndef ZSHARP_PY_VALUE_H
#define ZSHARP_PY_VALUE_H

#include "core.h"

/* ---- kinds ------------------------------------------------------------------ */

typedef enum zpyv_code {
    ZPYV_SCALAR = 1, /* a number or bool: scalar_kind */
    ZPYV_OBJECT,     /* zs_ref, strong: reads as the conjugate (target: its class) */
    ZPYV_WEAK,       /* zs_ref, weak: reads through `decode` (a WeakObjectPtr) */
    ZPYV_NAME,       /* two uint32: name index, number: reads as zs.Name */
    ZPYV_STRING,     /* zs_string of unit-byte code units: a view of `cls` */
    ZPYV_STRUCT,     /* members: a view of `cls` */
    ZPYV_ARRAY,      /* zs_array of element */
    ZPYV_SET,        /* zs_hash of element */
    ZPYV_MAP,        /* zs_hash of element (key), value */
    ZPYV_OPTIONAL,   /* element, then a uint8 flag at value_offset */
    ZPYV_PLAIN,      /* plain bytes made by `encode`, read by `decode` (class ids, ids) */
    ZPYV_DELEGATE,   /* zs_binding */
    ZPYV_MULTICAST,  /* zs_array of zs_binding */
    ZPYV_SPARSE,     /* zs_array * */
    ZPYV_CODES
} zpyv_code;

/* Kind flags. */
#define ZPYV_VIEW 0x1u          /* reads make a view (red conjugate of `cls`), not a plain value */
#define ZPYV_BITWISE 0x2u       /* copy is memcpy, nothing to destroy, no references */
#define ZPYV_UTF16 0x4u         /* ZPYV_STRING: code units are UTF-16 (else UTF-8) */
#define ZPYV_ASCII 0x8u         /* ZPYV_STRING: ASCII only */
#define ZPYV_VALUE_CLASS 0x100u /* `cls` is a value class (set by Kind() itself) */

/* One member of a struct kind. */
typedef struct zpyv_member {
    PyObject *name;         /* str */
    struct zpyv_kind *kind; /* strong */
    uint32_t offset;
} zpyv_member;

/* A kind: one type of value, described once per process; its native type in
 * each runtime is registered on first use (zpyv_native_type). Immutable once
 * made, except `members` of a struct, set once by set_members (a struct may
 * hold arrays of itself, so its kind exists before its members). */
typedef struct zpyv_kind {
    PyObject_HEAD uint32_t id; /* index of the runtimes' native type caches */
    uint8_t code;              /* zpyv_code */
    uint8_t scalar;            /* ZPYV_SCALAR: zpy_scalar_kind */
    uint8_t unit;              /* ZPYV_STRING: bytes per code unit */
    uint8_t native_kind;       /* zs_type_kind of the native type */
    uint32_t flags;            /* ZSV_* */
    uint32_t size, align;
    uint32_t value_offset;     /* ZPYV_MAP: the value in an entry; ZPYV_OPTIONAL: the flag */
    uint32_t entry_size;       /* containers: bytes per entry */
    struct zpyv_kind *element; /* containers: element (map: key) */
    struct zpyv_kind *value;   /* ZPYV_MAP: value */
    PyTypeObject *cls;         /* ZPYV_VIEW kinds: the conjugate class; ZPYV_OBJECT: the target */
    PyObject *what;            /* str: the type's name for messages ("Array[Int32]") */
    PyObject *encode;          /* Python (runtime, value) -> a form C stages (PLAIN: bytes;
                                   WEAK: an object or None; a soft pointer: its path;
                                   delegates: a list of (handle, name index, callable)); or NULL */
    PyObject *decode;          /* Python (runtime, raw) -> value: PLAIN (bytes), WEAK (handle) */
    PyObject *struct_name;     /* ZPYV_STRUCT: bytes, the native type's name */
    PyObject *image;           /* ZPYV_STRUCT: bytes of a new value's plain defaults, or NULL */
    zpyv_member *members;      /* ZPYV_STRUCT */
    uint32_t member_count;
    int members_set;
} zpyv_kind;

/* ---- staged values ------------------------------------------------------------ */

typedef enum zpyv_form {
    ZPYV_ABSENT = 0, /* a struct member left as it is */
    ZPYV_BITS,       /* u.bits: scalars, plain data, references, names */
    ZPYV_UNITS,      /* u.units: count code units of a string */
    ZPYV_BLOB,       /* the count bytes of a bitwise value: in u.bits up to 16, else u.units */
    ZPYV_ITEMS,      /* u.items: struct members (member_count), elements (count), map
                        keys and values alternating (2 x count), optional (count 0 or 1) */
    ZPYV_BINDINGS,   /* u.bindings: count delegate bindings */
    ZPYV_PACKED      /* u.units: the count elements of an array whose elements own nothing
                        (scalars, names, references: zpyv_packable), entry_size apart, as
                        they are stored natively */
} zpyv_form;

/* A staged binding: an object and a method name, or a callable (strong). */
typedef struct zpyv_binding {
    zs_ref object;
    uint32_t function_name;
    PyObject *callable;
} zpyv_binding;

/* A Python value converted into private memory (phase 1), or native data
 * captured for copying out. Never points into native memory. */
typedef struct zpyv_staged {
    uint8_t form; /* zpyv_form */
    uint32_t count;
    union {
        unsigned char bits[16];
        void *units;               /* PyMem */
        struct zpyv_staged *items; /* PyMem */
        zpyv_binding *bindings;    /* PyMem */
    } u;
} zpyv_staged;

/* The bytes of a ZPYV_BLOB staged value. */
static inline const char *zpyv_blob(const zpyv_staged *staged) {
    return staged->count > sizeof staged->u.bits ? (const char *)staged->u.units
                                                 : (const char *)staged->u.bits;
}

/* Whether an array kind's elements own nothing (scalars, names, plain
 * data, object and weak references): staged and captured packed, as they
 * are stored natively (ZPYV_PACKED). */
static inline int zpyv_packable(const zpyv_kind *kind) {
    if (kind->code != ZPYV_ARRAY) return 0;
    uint8_t code = kind->element->code;
    return code == ZPYV_SCALAR || code == ZPYV_NAME || code == ZPYV_PLAIN || code == ZPYV_OBJECT ||
           code == ZPYV_WEAK;
}

/* The i-th element of a staged array (ITEMS or PACKED); `scratch` holds a
 * packed one. */
static inline const zpyv_staged *zpyv_element_at(const zpyv_kind *kind, const zpyv_staged *staged,
                                                 uint32_t i, zpyv_staged *scratch) {
    if (staged->form != ZPYV_PACKED) return &staged->u.items[i];
    scratch->form = ZPYV_BITS;
    scratch->count = 0;
    memcpy(scratch->u.bits, (const char *)staged->u.units + (size_t)i * kind->entry_size,
           kind->element->size);
    return scratch;
}

/* ---- views tables ------------------------------------------------------------- */

/* The red views cached under one holder (an object or value conjugate), by
 * key (a member offset, an element index, ~index for a map value). Entries
 * are borrowed: a view removes itself when it is deallocated, so a holder
 * and its views never form a reference cycle. Open addressing, linear
 * probing, deletion by backward shift. Changed with no Python code run. */
typedef struct zpyv_entry {
    Py_ssize_t key;
    struct zpyv_value *view; /* NULL: empty */
} zpyv_entry;

typedef struct zpyv_table {
    uint32_t count, mask; /* capacity mask + 1 entries */
    zpyv_entry entries[];
} zpyv_table;

/* ---- value conjugates ------------------------------------------------------------- */

/* A value conjugate. Live while `reason` is NULL; `address` is set only once
 * a view is registered (its parent's table, its scope) and cleared by
 * expiry, so accessors test `address` alone. Black values sit in their
 * runtime's black list (close() expires them all) and are freed exactly
 * once: on dispose() or, queued (zpyv_flush), when Python finalises them.
 * An inline black value (a struct of plain data) keeps its bytes after the
 * fixed part of the object: nothing native to free. Not tracked by
 * CPython's cycle collector: a value refers to its parent, its kind and its
 * runtime, and nothing refers back to it but borrowed tables. */
typedef struct zpyv_value {
    PyObject_HEAD char *address; /* the value's memory; NULL when expired (or pending) */
    zpyv_kind *kind;             /* strong */
    zpy_runtime_core *runtime;   /* strong */
    PyObject *parent;            /* strong: what the view points into (NULL: black, or a block) */
    PyObject *reason;            /* NULL while live; else why it expired (an interned str) */
    PyObject *weakrefs;
    zpyv_table *views;              /* red views cached under this value (PyMem), or NULL */
    zs_ref owner;                   /* the object whose memory this is (0: black, or in a black) */
    zs_ref black;                   /* native black value handle (0: red, or inline) */
    Py_ssize_t key;                 /* this view's key in its parent's table */
    struct zpyv_value *prev, *next; /* the runtime's black list */
    uint32_t flags;                 /* ZSV_V_* */
} zpyv_value;

#define ZPYV_V_BLACK 0x1u     /* owned by Python (in the black list until expired) */
#define ZPYV_V_INLINE 0x2u    /* black, bytes inline after the fixed part */
#define ZPYV_V_CACHED 0x4u    /* in its parent's table under `key` */
#define ZPYV_V_WAS_BLACK 0x8u /* made black (its expiry message says so) */
#define ZPYV_V_PARKABLE 0x10u /* a member's view: may be parked when Python drops it */
#define ZPYV_V_PARKED 0x20u   /* parked (below) */

/* Parked views. A member's view (a struct member or a value property of an
 * object, zpyv_read_member) that Python drops while it is live and cached is
 * not freed: it stays in its parent's table, owned by the table (one
 * reference, the object's refcount set back to 1 in value_dealloc), and no
 * longer holds its parent (`parent` is borrowed while parked). The next read
 * of the same member takes it back instead of making a new view: the
 * table's reference becomes the reader's and the parent is held again.
 * Nothing else can reach a parked view, so parking is invisible to Python:
 * it expires exactly as a cached view does (its parent's expiry, a
 * restructure, a write replacing its contents), and is then released
 * (zsv_release_parked); a holder that is deallocated releases the views
 * parked in its table (zpyv_table_free). A member's address never changes
 * while its holder lives, so a parked view's address stays right. Parking is
 * off in builds that count references (Py_REF_DEBUG) or run without the GIL:
 * it changes the refcount of an object being deallocated by hand. */
#if !defined(Py_REF_DEBUG) && !defined(Py_GIL_DISABLED)
#define ZPYV_PARKING 1
#else
#define ZPYV_PARKING 0
#endif

/* Where inline bytes start (16-byte aligned). */
#define ZPYV_INLINE_OFFSET ((sizeof(zpyv_value) + 15u) & ~(size_t)15u)

/* ---- the value layer's API, for the files of native/binding ------------------------ */

/* zpy_names.c */
int zpyv_add_name_type(PyObject *module, zpy_core_state *state);
/* Intern the text of a str (or subclass: its own data) in `rt`; `what`
 * names it in errors ("name", "object name"). */
int zpyv_intern(zpy_runtime_core *rt, PyObject *text, uint32_t *index, uint32_t *number,
                const char *what);
PyObject *zpyv_name_make(zpy_runtime_core *rt, uint32_t index, uint32_t number);
int zpyv_name_stage(zpy_runtime_core *rt, PyObject *value, zpyv_staged *out, PyObject *what);
PyObject *zpyv_runtime_name_text(PyObject *self, PyObject *args);
PyObject *zpyv_runtime_intern(PyObject *self, PyObject *text);
PyObject *zpyv_runtime_keep_names(PyObject *self, PyObject *count);
void zpyv_names_free(zpy_runtime_core *rt);

/* zpy_field_paths.c */
int zpyv_add_field_path_type(PyObject *module, zpy_core_state *state);

/* zpy_soft_paths.c */
/* SoftObjectPtr.get(): the live object at the pointer's path if it is of
 * the pointer's target class, else None. */
PyObject *zpyv_soft_get(PyObject *self, PyObject *unused);

/* The delegate base (zpy_delegates.c) and the callable registry (zpy_callables.c). */
int zpyv_add_delegate_type(PyObject *module, zpy_core_state *state);
/* Delegate callables: an id for a callable, retained natively once (the
 * registry's hold, released by zpyv_callable_done once the binding store is
 * made), 0 when out of memory; the callable of an id (borrowed) or NULL;
 * dropping those no binding holds any more (a safe point); all of them. */
uint32_t zpyv_callable_id(zpy_runtime_core *rt, PyObject *callable);
void zpyv_callable_done(zpy_runtime_core *rt, uint32_t id);
PyObject *zpyv_callable_get(zpy_runtime_core *rt, uint32_t id);
int zpyv_callables_drain(zpy_runtime_core *rt);
void zpyv_callables_free(zpy_runtime_core *rt);

/* The container types (zpy_container_types.c). */
int zpyv_add_container_types(PyObject *module, zpy_core_state *state);

/* zpy_value_properties.c */
int zpyv_add_member_types(PyObject *module, zpy_core_state *state);
/* Whether `descriptor` is a ValueProperty of an object class that `cls` is
 * or derives from; if so, its kind, offset and name for errors (borrowed). */
int zpyv_object_value_property(zpy_core_state *state, PyTypeObject *cls, PyObject *descriptor,
                               zpyv_kind **kind, uint32_t *offset, PyObject **what);
/* The parts of a ValueProperty or MemberProperty (borrowed): 1, or 0 when
 * `descriptor` is neither. `owner_kind` is NULL for an object's property. */
int zpyv_property_info(zpy_core_state *state, PyObject *descriptor, PyTypeObject **owner,
                       zpyv_kind **owner_kind, zpyv_kind **kind, uint32_t *offset, PyObject **what);
/* The struct kind a member descriptor belongs to: 1, or 0 when it is not a
 * struct's member. */
int zpyv_member_owner_kind(zpy_core_state *state, PyObject *descriptor, zpyv_kind **owner_kind);

/* Kinds (zpy_kind.c), staging (zpy_stage.c), emitting (zpy_emit.c), copying out
 * and releasing (zpy_copy_out.c), the write checks (zpy_errors.c). */
/* The type slot of a kind while its native type is being registered
 * (zpyv_native_type; emitting reads it as no type yet). */
#define ZPYV_REGISTERING ((const zs_type *)(uintptr_t)1)
int zpyv_add_kind_type(PyObject *module, zpy_core_state *state);
/* Runtime._preset_native_type(kind, address): a host's struct type for a kind. */
PyObject *zpyv_runtime_preset_native_type(PyObject *self, PyObject *args);
/* Whether `object` is a kind. */
int zpyv_is_kind(zpy_core_state *state, PyObject *object);
/* The native type of a kind in a runtime (registered on first use), or NULL
 * with an exception set. */
const zs_type *zpyv_native_type(zpy_runtime_core *rt, zpyv_kind *kind);
/* Phase 1: convert `value` into `out` (zeroed by the caller), naming `what`
 * in errors. Runs Python code; on failure returns -1 with an exception set
 * and `out` released. */
int zpyv_stage(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, zpyv_staged *out,
               PyObject *what);
/* What a quick staging may borrow: an optional's value, the bytes of a
 * struct or of a string's code units. Lives on the caller's stack. */
#define ZPYV_QUICK_BYTES 256u
typedef struct zpyv_quick {
    zpyv_staged item;
    union {
        unsigned char bytes[ZPYV_QUICK_BYTES];
        uint16_t units[ZPYV_QUICK_BYTES / 2];
        double align;
    } u;
} zpyv_quick;
/* Phase 1 for the values that convert with no Python code and no
 * allocation: an exact int, float or bool for a scalar or an optional of
 * one (or None), an exact str for a string kind, a live value of the same
 * bitwise struct kind in `rt`. 1 when staged into `out` (zeroed), which
 * then borrows `quick` or the str's own storage: emitted while the value is
 * held, never released. 0 when the value needs zpyv_stage (nothing set, no
 * error). Since nothing runs, a caller that resolved its destination
 * before may write there without resolving it again. */
int zpyv_stage_quick(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, zpyv_staged *out,
                     zpyv_quick *quick);
/* The same, naming the value by a C text ("element", "key"). */
int zpyv_stage_labelled(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *value, zpyv_staged *out,
                        const char *label);
/* Phase 2: write a staged value over the valid value of `kind` at `dst`, in
 * memory `owner` holds (0: a black value). No Python code; a refusal
 * returns its status and leaves the destination unchanged. */
zs_status zpyv_emit(zpy_runtime_core *rt, zpyv_kind *kind, const zpyv_staged *staged, zs_ref owner,
                    char *dst);
/* Phase 2, before a write of several elements: ZS_OK if the native store
 * would take every object reference in a staged value now, else the status
 * it would refuse one with (an object destroyed or dying since it was
 * staged). No Python code. */
zs_status zpyv_references_valid(zpy_runtime_core *rt, zpyv_kind *kind, const zpyv_staged *staged);
/* Copy out, phase 1: capture the value at `src` into `out` (zeroed). No
 * Python code; -1 (nothing set) when a buffer cannot be allocated. */
int zpyv_capture(zpy_runtime_core *rt, zpyv_kind *kind, const char *src, zpyv_staged *out);
/* Copy out, phase 2: a plain Python value of a captured value. */
PyObject *zpyv_build(zpy_runtime_core *rt, zpyv_kind *kind, const zpyv_staged *staged);
/* The text of the string of `kind` at `at` (copied first: making the str
 * may run Python code). */
PyObject *zpyv_string_text(zpyv_kind *kind, const char *at);
/* Free what a staged value holds (drops references: may run Python code). */
void zpyv_release(zpyv_kind *kind, zpyv_staged *staged);
/* Phase 1 of creating a struct: its members from `given` positional
 * arguments and a keyword dict the caller owns (or NULL), in declaration
 * order (unknown, repeated or too many raise TypeError); members not given
 * are left absent. */
int zpyv_stage_members(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *const *positional,
                       Py_ssize_t given, PyObject *kwargs, zpyv_staged *out);
/* A new value of `kind` in zeroed memory takes its plain defaults (a
 * struct's image); no Python code. */
void zpyv_initialize(const zpyv_kind *kind, char *dst);
/* Whether a plain write into `owner`'s memory is allowed now (the one rule
 * for dying objects, also for the writes this module makes itself). */
zs_status zpyv_writable(zpy_runtime_core *rt, zs_ref owner);
/* Raise the exception for a refused native call on `rt`; returns NULL. */
PyObject *zpyv_refused(zpy_runtime_core *rt, zs_status status, PyObject *what);

/* zpy_call_block.c: the members of a parameter block, shared by the
 * two directions of a call between native code and Python (a CallPlan:
 * native code calls a Python method; a NativeFunction: Python calls a
 * host's C function). */

/* How a block member crosses (CALL_SCALAR... in Python). */
typedef enum zpy_call_mode {
    ZPY_CALL_SCALAR, /* detail: none (`scalar` says which) */
    ZPY_CALL_OBJECT, /* a zs_ref; detail: the target conjugate class */
    ZPY_CALL_STRUCT, /* a struct in place; detail: its kind */
    ZPY_CALL_VALUE   /* any value in place (strings, containers...); detail: its kind.
                       NativeFunction only: staged into the block, cleared after the call */
} zpy_call_mode;

/* One member of a parameter block: a parameter or the result. */
typedef struct zpy_plan_member {
    Py_ssize_t offset; /* in the block */
    zpy_call_mode mode;
    zpy_scalar_kind scalar; /* ZPY_CALL_SCALAR */
    PyObject *detail;       /* strong: the target class (OBJECT), the kind (STRUCT, VALUE) */
    PyObject *what;         /* str: names the member in errors ("Mob.damage: argument 'source'") */
} zpy_plan_member;

/* What zpy_call_member_init accepts besides scalars, objects and structs. */
#define ZPY_MEMBER_ACCEPT_VALUE 0x1u      /* ZPY_CALL_VALUE members */
#define ZPY_MEMBER_ACCEPT_ANY_OBJECT 0x2u /* an object member whose detail is None: any class */

/* Fill `member` from its parts, checked against the block's size: a member
 * can never make a call read or write outside its block, whatever Python
 * hands over. `who` starts the errors ("CallPlan"). 0, or -1 with an error
 * and `member` untouched. */
int zpy_call_member_init(zpy_core_state *state, const char *who, Py_ssize_t offset, int mode,
                         PyObject *detail, PyObject *what, Py_ssize_t block_size, unsigned accept,
                         zpy_plan_member *member);

/* zpy_python_to_host.c */
int zpy_add_function_types(PyObject *module, zpy_core_state *state);

/* Views, scopes and black values (zpy_views.c); ValueConjugate (zpy_value_type.c). */
int zpyv_add_value_type(PyObject *module, zpy_core_state *state);
/* Whether `object` is a value conjugate. */
int zpyv_check(zpy_core_state *state, PyObject *object);
/* Raise ExpiredConjugateError for an expired value; returns NULL. */
PyObject *zpyv_raise_expired(zpyv_value *value);
/* A plain Python copy of the value of `kind` at `at`: captured first,
 * then built (building may run Python code; the capture is private). */
PyObject *zpyv_copy_out(zpy_runtime_core *rt, zpyv_kind *kind, const char *at);
/* Read the value of `kind` inside `parent` (an object or value conjugate,
 * live) at `key`: a plain value, or the cached or a new red view. `locate`
 * gives the address from the parent as it is now (checked again once a new
 * view is registered); it returns NULL with an exception set when the
 * place is gone. */
typedef char *(*zpyv_locator)(PyObject *parent, Py_ssize_t key);
PyObject *zpyv_read(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *parent, Py_ssize_t key,
                    zs_ref owner, zpyv_locator locate);
/* zpyv_read of a member of `parent` (key: its offset, which never moves while
 * the parent lives): a new view is parkable (parked views, above). `views`
 * is the slot of the parent's views table, as the caller just found it. */
PyObject *zpyv_read_member(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *parent,
                           zpyv_table **views, Py_ssize_t key, zs_ref owner, zpyv_locator locate);
/* Release the parked views that expiry could not free on the spot (a safe
 * point: may run Python code). */
void zpyv_bury(zpy_runtime_core *rt);
/* Where a place is in `parent` as it is now: its address, and in *key the
 * key its view is cached under (a map value found by its key: ~ its entry
 * index now). NULL with an exception set when the parent is gone, or with
 * none when the place is not there (absent). No Python code. */
typedef char *(*zpyv_finder)(PyObject *parent, const void *place, Py_ssize_t *key);
/* zpyv_read of a place whose key may change (an entry found by its map key,
 * `place`): found again once a new view is registered, and cached under the
 * key found then. NULL with no exception set when the place is absent. */
PyObject *zpyv_read_at(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *parent, zs_ref owner,
                       zpyv_finder find, const void *place);
/* A new red view with no parent (a parameter block of a call from native
 * code), in no scope: the caller expires it (zpyv_expire_in_place) when the
 * call returns, as the call's scope would, without a scope's list. */
PyObject *zpyv_block_view(zpy_runtime_core *rt, zpyv_kind *kind, char *address);
/* A new black value of `kind` (zeroed), in the black list; NULL with an
 * exception set. May run Python code first (dropping delegate callables no
 * binding holds): a caller reads its own addresses again afterwards. */
zpyv_value *zpyv_new_black(zpy_runtime_core *rt, zpyv_kind *kind);
/* Expire, in place, every view in a table and theirs (no Python code, no
 * allocation): each is detached from the table, which is left empty. */
void zpyv_expire_table(zpyv_table *table, PyObject *reason);
/* Expire one value and its views in place (no Python code). */
void zpyv_expire_in_place(zpyv_value *value, PyObject *reason);
/* The live view cached under `key`, or NULL. */
zpyv_value *zpyv_table_lookup(const zpyv_table *table, Py_ssize_t key);
/* Free a table whose views are detached or parked (its holder is being
 * deallocated: live views would hold it). Releasing a parked view may run
 * Python code. */
void zpyv_table_free(zpyv_table *table);
/* A scope ended: expire the views it lists (no Python code). */
void zpyv_expire_scope(zpy_core_state *state, PyObject *views);

/* The scope of a call from native code or of a delegate's call (the views
 * obtained inside expire when it returns). It lives on the C stack of the
 * call, in one list of the module's open call scopes, newest first, each
 * marked with its thread (calls nest strictly on a thread, so a thread's
 * first scope in the list is its innermost). Opening and closing one reads
 * and changes no ContextVar, touches no thread-specific storage and
 * allocates nothing; its list of views is made by the first view
 * registered in it. Call scopes and zs.scope()s draw their serials from
 * one counter (zpy_core_state.scope_serial), so a zs.scope() of the current
 * context with a later serial than the call scope was opened inside the
 * call, and is innermost while it is open. The list is guarded by the GIL. */
typedef struct zpyv_call_scope {
    struct zpyv_call_scope *newer, *older; /* neighbours in the module's list */
    unsigned long thread;                  /* PyThread_get_thread_ident() of its call */
    uint64_t serial;                       /* when it opened (scope_serial) */
    PyObject *views;                       /* a list, or NULL while none registered */
} zpyv_call_scope;
int zpyv_call_scope_open(zpy_core_state *state, zpyv_call_scope *scope);
/* Close `scope`, the innermost call scope of this thread: its views
 * expire. Never fails. */
void zpyv_call_scope_close(zpy_core_state *state, zpyv_call_scope *scope);
/* Free the native blocks of black values Python finalised (a safe point). */
void zpyv_flush(zpy_runtime_core *rt);
/* Expire every black value of a runtime (close). */
void zpyv_expire_blacks(zpy_runtime_core *rt, PyObject *reason, int free_blocks);
/* The address of a live value, or NULL with ExpiredConjugateError set. */
static inline char *zpyv_live(zpyv_value *value) {
    if (value->address != NULL) return value->address;
    zpyv_raise_expired(value);
    return NULL;
}

/* zpy_view_tables.c, for the views (zpy_views.c) */
/* The live view cached under `key`, or NULL. */
zpyv_value *zpyv_table_get(const zpyv_table *table, Py_ssize_t key);
/* Cache `view` under `key` in *slot's table (made or grown as needed; the key
 * is absent). PyMem only: no Python code runs. -1 when out of memory. */
int zpyv_table_put(zpyv_table **slot, Py_ssize_t key, zpyv_value *view);
/* zpy_views.c, for the ValueConjugate type (zpy_value_type.c) */
/* Remove the entry of `view` under `key`, if it is there (backward-shift
 * deletion keeps every probe sequence unbroken). */
void zpyv_table_remove(zpyv_table *table, Py_ssize_t key, const zpyv_value *view);
/* The table slot of a live holder (an object or value conjugate), or NULL. */
zpyv_table **zpyv_holder_table(zpy_core_state *state, PyObject *holder);
/* _core.scope_opened() -> its serial: a zs.scope() opened (counted: while
 * none is open anywhere, views are not registered; the serial orders it
 * among call scopes, value.h). */
PyObject *zpyv_scope_opened(PyObject *module, PyObject *unused);
/* _core.scope_closed(views): a zs.scope() ended; its views expire. */
PyObject *zpyv_scope_closed(PyObject *module, PyObject *views);
/* Free a black value's native block now (dispose) or at the next safe
 * point (finalisation: rule 9 of docs/design.md, a finaliser only queues). */
void zpyv_black_free(zpyv_value *value, int now);

#endif
