/*
 * zsharp.h -- the host's C API of the zsharp native object heap.
 *
 * Who includes it: a host, the C program that embeds the heap (a game
 * engine, a simulation, a test): it makes runtimes, registers classes,
 * structs and enums, creates and roots objects, builds values and
 * collections, collects garbage and calls into scripts. A host module
 * built apart from the library includes zsharp_api.h instead (the same
 * functions as one table of pointers) and calls through that.
 *
 * A zs_runtime owns an object heap with a precise tracing garbage collector
 * modelled on Unreal Engine's UObject GC: a chunked object array of items
 * (object pointer, flags, cluster index, serial, strong refcount), handles
 * made of index + serial, classes with a flattened reference schema, roots
 * (root flag, strong refcount, a disregard-for-GC start-up window), a
 * reachable-flag swap mark, killable references nulled when their target is
 * marked as garbage, and a purge that lets the managed side expire its
 * proxies before any memory is released.
 *
 * There is no global state: several runtimes can live in one process and
 * never see each other. Every function takes the runtime's own recursive
 * lock, so the API may be called from several threads.
 *
 * Conventions: functions return a zs_status (ZS_OK == 0). Output parameters
 * come last. A reference stored inside an object is a zs_ref: a 64-bit value
 * whose low 32 bits are the object index and whose high 32 bits are the
 * serial number of the slot. The all-zero value is the null reference
 * (serials start at 1), so zeroed memory holds only null references.
 *
 * Not here, and not for a host: the managed side's protocol, through which
 * a scripting layer (zsharp_py) keeps its proxies in step with the heap
 * (zsharp_managed.h: a host calling it could leave a proxy pointing at a
 * freed object), and the test and stress switches (zsharp_debug.h).
 */
#ifndef ZSHARP_H
#define ZSHARP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- basic types ------------------------------------------------------ */

typedef struct zs_runtime zs_runtime;
typedef struct zs_class zs_class;
typedef struct zs_type zs_type;

/* A handle: index into the object array + the serial the slot had. */
typedef uint64_t zs_ref;

#define ZS_NULL_REF ((zs_ref)0)
#define ZS_REF_INDEX(r) ((uint32_t)((r) & 0xFFFFFFFFu))
#define ZS_REF_SERIAL(r) ((uint32_t)((r) >> 32))
#define ZS_MAKE_REF(index, serial) ((zs_ref)(uint32_t)(index) | ((zs_ref)(uint32_t)(serial) << 32))

/* The header at the start of every native object. Members follow it. */
typedef struct zs_object {
    const zs_class *cls;  /* immutable */
    zs_ref outer;         /* immutable, traced, never killable */
    uint32_t index;       /* slot in the object array */
    uint32_t name_index;  /* entry in the runtime's name table */
    uint32_t name_number; /* 0: no suffix; n: suffix "_<n-1>" (UE convention) */
    uint32_t hash_next;   /* next object in the same by-name bucket (index + 1), internal */
} zs_object;

typedef enum zs_status {
    ZS_OK = 0,
    ZS_E_NOMEM = 1,    /* a native allocation failed (out of memory) */
    ZS_E_CAPACITY = 2, /* the object array is full (max_objects reached) */
    ZS_E_STALE = 3,    /* the object was destroyed: its handle names a freed or reused slot */
    ZS_E_INVALID = 4,  /* a bad argument (null, out of range, or of the wrong class) */
    ZS_E_BUSY = 5,     /* the heap cannot be changed now (inside a destroy hook or a collection) */
    ZS_E_EXPIRY_PENDING = 6, /* purge refused: the managed side has not taken the expiring list */
    ZS_E_DYING = 7,          /* the object is unreachable and about to be destroyed */
    ZS_E_CORRUPT = 8,        /* zs_heap_verify found the heap inconsistent */
    ZS_E_CALL_FAILED = 9     /* the managed (Python) function called from native code raised */
} zs_status;

/* The fixed English text of a status code: the only table of them (the
   Python package raises with it). Never NULL; "unknown status" for a value
   that is not a zs_status. */
const char *zs_status_message(zs_status status);

/* ---- runtime ---------------------------------------------------------- */

typedef struct zs_runtime_options {
    uint32_t max_objects;      /* capacity of the object array; 0: default (2,162,688) */
    uint32_t min_cluster_size; /* clusters smaller than this are not kept; 0: default (16) */
    uint32_t flags;            /* ZS_RUNTIME_* */
    uint32_t mark_threads;     /* full-collection marker threads; 0: one per core, 1: serial */
} zs_runtime_options;

#define ZS_DEFAULT_MAX_OBJECTS 2162688u
#define ZS_MAX_OBJECTS_LIMIT 33554432u /* 2^25: 512 chunks of 65,536 items */
#define ZS_OBJECTS_PER_CHUNK 65536u /* the object array is counted as blocks of this many items */

/* Open the disregard-for-GC window at creation: objects allocated until
   zs_close_disregard_for_gc are permanent and never scanned. */
#define ZS_RUNTIME_DISREGARD_WINDOW 0x1u
/* Black values are not GC roots: faster, no longer memory-safe for object
   references inside them (Z#'s ZSHARP_TREATS_BLACK_CONJUGATE_AS_GC_OBJECT off). */
#define ZS_RUNTIME_BLACK_NOT_ROOTS 0x2u

void zs_runtime_default_options(zs_runtime_options *out);
zs_status zs_runtime_new(const zs_runtime_options *options, zs_runtime **out);
/* Destroy every object (the destroy hook sees each one) and free the runtime. */
void zs_runtime_free(zs_runtime *rt);

/* Native memory blocks and bytes the runtime currently owns (leak checks). */
typedef struct zs_memory_stats {
    uint64_t live_blocks;
    uint64_t live_bytes;
    uint64_t peak_bytes;
    uint64_t item_bytes_per_object; /* sizeof the object-array item */
} zs_memory_stats;
void zs_runtime_memory(zs_runtime *rt, zs_memory_stats *out);

/* Close the start-up window; objects allocated so far stay forever. */
zs_status zs_close_disregard_for_gc(zs_runtime *rt);

/* ---- names ------------------------------------------------------------ */

/* Intern a UTF-8 name. Comparison is case-insensitive for ASCII letters; the
   first spelling seen is the one displayed. A trailing "_<digits>" suffix
   (without leading zeros) is split into the number, as FName does. */
zs_status zs_name_intern(zs_runtime *rt, const char *utf8, size_t length, uint32_t *out_index,
                         uint32_t *out_number);
/* The base string of an interned name (valid until the runtime is freed). */
const char *zs_name_base(zs_runtime *rt, uint32_t index);
uint32_t zs_name_count(zs_runtime *rt);

/* ---- classes and reference schemas ------------------------------------ */

typedef enum zs_member_kind {
    ZS_MEMBER_OBJECT = 1,       /* zs_ref, strong, killable */
    ZS_MEMBER_WEAK_OBJECT = 2,  /* zs_ref, not traced */
    ZS_MEMBER_OBJECT_ARRAY = 3, /* zs_ref_array, strong, killable elements */
    ZS_MEMBER_VALUE = 4         /* a value of `type` (struct, string, container...) */
} zs_member_kind;

typedef struct zs_member {
    uint32_t kind;       /* zs_member_kind */
    uint32_t offset;     /* from the start of the object (header included) */
    const zs_type *type; /* ZS_MEMBER_VALUE only */
} zs_member;

/* A dynamic array of references, as held in an object (ZS_MEMBER_OBJECT_ARRAY).
   Grow it only with zs_ref_array_push so its block is counted. */
typedef struct zs_ref_array {
    zs_ref *data;
    uint32_t count;
    uint32_t capacity;
} zs_ref_array;

#define ZS_CLASS_CLUSTER_ROOT 0x1u /* instances can root a cluster */
#define ZS_CLASS_IN_CLUSTER 0x2u   /* instances can join a cluster */
/* Declared by a scripting layer (zsharp_py sets it on every class a script
   declares): the tick manager calls a tick function named on such an
   object through the managed call handler, where a script may override
   it; on an object of any other class it runs the class's native entry
   directly (see "the tick manager" below). */
#define ZS_CLASS_SCRIPT 0x4u

/* ---- reflection: what a host tells scripts about its classes -------------
 *
 * A class description may name its properties and functions, so that a
 * scripting layer (zsharp_py) can bind the class with no declaration of its
 * own; a struct and an enum are described the same way (zs_struct_register,
 * zs_enum_register). Every description, and everything it points to, is
 * kept by reference, not copied: it must stay valid, unchanged, until the
 * runtime is freed (static tables, as Unreal's generated reflection data
 * is). docs/native-classes.md is the guide, with a complete host.
 *
 * Types are written as a script declares them (docs/native-classes.md
 * lists the language): "Int32", "Float64", "Bool", "Name", "String",
 * "Vector" (a registered struct), "ETeam" (a registered enum),
 * "Actor | None" (a strong reference), "WeakObjectPtr[Actor]",
 * "SubclassOf[Actor]", "Array[Actor]", "Map[Name, Int32]",
 * "MulticastDelegate"... A property or struct member whose value is not
 * plain data (it holds references or owns memory: every kind but scalars,
 * enums, names and class ids) also gives its native type (`native`, from
 * zs_type_basic, zs_type_container or zs_struct_register): the collector
 * traces and frees through it from registration on, before any script has
 * read the description. The binder checks that the two agree.
 *
 * How plain values sit in an object, a struct or a parameter block: the
 * scalars as their C types (Bool one byte, 0 or 1: C's _Bool), an enum as
 * its underlying integer, a Name as 8 bytes (its index in the runtime's
 * name table, then its number: two uint32_t), a SubclassOf[T] as a
 * uint32_t holding the class id + 1 (0: None), an object reference as a
 * zs_ref (ZS_NULL_REF: None).
 *
 * Registration refuses (ZS_E_INVALID) a description with a name missing or
 * given twice (properties and functions of a class share one namespace;
 * parameters, struct members and enum items each their own), a parameter
 * or member starting outside its block or struct, two results, or an enum
 * value its underlying type cannot hold. Plain data's extent and
 * alignment are the binder's to check against the type text (zsharp_py
 * refuses a property that does not fit or overlaps another). */

/* How a parameter of a function travels. */
typedef enum zs_param_direction {
    ZS_PARAM_IN = 0,    /* read by the function */
    ZS_PARAM_OUT = 1,   /* written by the function, given back to the caller */
    ZS_PARAM_INOUT = 2, /* read, then written back */
    ZS_PARAM_RETURN = 3 /* the result (at most one per function) */
} zs_param_direction;

/* A named, typed slot: a property of a class (offset from the object's
   start, header included), a member of a struct, or a parameter of a
   function (offset in its parameter block). */
typedef struct zs_property_desc {
    const char *name;
    const char *type; /* as a script writes it (see above) */
    uint32_t offset;
    uint32_t direction;    /* parameters only: zs_param_direction */
    const zs_type *native; /* properties and members: the native type unless plain data */
} zs_property_desc;

/* A native function's entry point. `self` is the object it is called on
   (ZS_NULL_REF for a static function); `params` is its parameter block,
   laid out as the description says, owned by the caller. The runtime lock
   is not held: the function may use the whole API, collect, destroy its
   own object, or call into scripts. A status other than ZS_OK reports a
   failure (the script gets an exception). */
typedef zs_status (*zs_native_function)(void *user, zs_runtime *rt, zs_ref self, void *params);

#define ZS_FUNCTION_STATIC 0x1u /* called on the class, with no object */
#define ZS_FUNCTION_EVENT                                                                          \
    0x2u /* overridable by scripts (BlueprintNativeEvent when it has an
                                   entry, BlueprintImplementableEvent when entry is NULL) */

typedef struct zs_function_desc {
    const char *name;
    zs_native_function entry;       /* NULL only for an event with no native default */
    void *user;                     /* passed to entry */
    uint32_t flags;                 /* ZS_FUNCTION_* */
    uint32_t block_size;            /* bytes of the parameter block (0: none) */
    const zs_property_desc *params; /* in order, the result among them (ZS_PARAM_RETURN) */
    uint32_t param_count;
} zs_function_desc;

typedef struct zs_class_desc {
    const char *name;
    const zs_class *parent;   /* NULL for a root class */
    uint32_t instance_size;   /* bytes, header included; >= parent's */
    uint32_t flags;           /* ZS_CLASS_* */
    const zs_member *members; /* this class's own members (parent's are inherited) */
    uint32_t member_count;
    /* Reflection (optional, kept by reference): this class's own properties
       (a property with a `native` type is also a member, so it need not be
       listed in `members` too) and functions. */
    const zs_property_desc *properties;
    uint32_t property_count;
    const zs_function_desc *functions;
    uint32_t function_count;
} zs_class_desc;

zs_status zs_class_register(zs_runtime *rt, const zs_class_desc *desc, const zs_class **out);

/* The head of every zs_class, public so that a binding can test an object's
   class on its hot paths without a call: ancestry[depth] is the class
   itself, ancestry[0] its root class. Read-only. */
typedef struct zs_class_head {
    const zs_class *const *ancestry;
    uint32_t depth;
    uint32_t id; /* zs_class_id */
} zs_class_head;
/* Non-zero when cls is base or derives from it (zs_class_is_a, inline). */
#define ZS_CLASS_DERIVES(cls, base)                                                                \
    (((const zs_class_head *)(const void *)(cls))->depth >=                                        \
         ((const zs_class_head *)(const void *)(base))->depth &&                                   \
     ((const zs_class_head *)(const void *)(cls))                                                  \
             ->ancestry[((const zs_class_head *)(const void *)(base))->depth] == (base))
uint32_t zs_class_id(const zs_class *cls);
const char *zs_class_name(const zs_class *cls);
const zs_class *zs_class_parent(const zs_class *cls);
uint32_t zs_class_instance_size(const zs_class *cls);
/* Non-zero when cls is base or derives from it. */
int zs_class_is_a(const zs_class *cls, const zs_class *base);
/* The first class registered under `name` (class names need not be unique),
   or ZS_E_INVALID when there is none: a Python class is registered in a
   runtime on its first use there. */
zs_status zs_find_class(zs_runtime *rt, const char *name, const zs_class **out);
/* Length in 32-bit words of the flattened schema stream (for tests). */
uint32_t zs_class_schema_words(const zs_class *cls);

/* Classes registered in the runtime: ids 0 .. zs_class_count - 1 (a class
   registered from any side: a host's, or one a script declared). */
uint32_t zs_class_count(zs_runtime *rt);
/* The class with that id, or NULL. */
const zs_class *zs_class_by_id(zs_runtime *rt, uint32_t id);
/* The description a class was registered with (kept by reference). */
const zs_class_desc *zs_class_describe(const zs_class *cls);
/* The function `name` of cls or of its nearest ancestor that has one;
   ZS_E_INVALID when none has. */
zs_status zs_find_function(const zs_class *cls, const char *name, const zs_function_desc **out);

/* Find a class that is not registered yet: zs_find_class asks the resolver
   (a scripting layer registers the script class of that name) before it
   gives up, without holding the runtime lock. One per runtime. */
typedef zs_status (*zs_class_resolver)(void *user, zs_runtime *rt, const char *name);
void zs_set_class_resolver(zs_runtime *rt, zs_class_resolver resolver, void *user);

/* Native structs: a struct type (as zs_type_struct makes, from the members
   with a `native` type) whose description names every member. */
typedef struct zs_struct_desc {
    const char *name;
    uint32_t size;
    uint32_t align;
    const zs_property_desc *members; /* offsets inside the struct */
    uint32_t member_count;
} zs_struct_desc;
zs_status zs_struct_register(zs_runtime *rt, const zs_struct_desc *desc, const zs_type **out);
uint32_t zs_struct_count(zs_runtime *rt);
/* The i-th registered struct's description (and type, if out_type), or NULL. */
const zs_struct_desc *zs_struct_at(zs_runtime *rt, uint32_t i, const zs_type **out_type);
zs_status zs_find_struct(zs_runtime *rt, const char *name, const zs_struct_desc **out_desc,
                         const zs_type **out_type);

/* Native enums: named integer values stored as `underlying` ("UInt8",
   "Int32"...: an integer scalar type). */
typedef struct zs_enum_item {
    const char *name;
    int64_t value;
} zs_enum_item;
typedef struct zs_enum_desc {
    const char *name;
    const char *underlying;
    const zs_enum_item *items;
    uint32_t item_count;
} zs_enum_desc;
zs_status zs_enum_register(zs_runtime *rt, const zs_enum_desc *desc);
uint32_t zs_enum_count(zs_runtime *rt);
const zs_enum_desc *zs_enum_at(zs_runtime *rt, uint32_t i);
zs_status zs_find_enum(zs_runtime *rt, const char *name, const zs_enum_desc **out);

/* Run cleanup(user) when the runtime is freed, after every object is
   destroyed, latest registered first (a host frees its per-runtime state). */
zs_status zs_runtime_add_cleanup(zs_runtime *rt, void (*cleanup)(void *user), void *user);

/* Every function of this header and of zsharp_debug.h as one table
   (zsharp_api.h declares it): what a host module compiled apart from the
   library calls through, since the library's symbols are not exported. */
struct zs_api;
const struct zs_api *zs_api_table(void);

/* ---- objects ---------------------------------------------------------- */

#define ZS_NAME_AUTO UINT32_MAX /* name_index: "<ClassName>_<n>" */

/* Allocate a zeroed object. outer may be ZS_NULL_REF. While an incremental
   mark is pending the new object is born reachable. */
zs_status zs_object_new(zs_runtime *rt, const zs_class *cls, zs_ref outer, uint32_t name_index,
                        uint32_t name_number, zs_ref *out_ref, zs_object **out_object);

/* The object a handle names, or NULL when the handle is null or stale. */
zs_object *zs_resolve(zs_runtime *rt, zs_ref ref);

/* Find a live, non-dying object by outer (ZS_NULL_REF: top level) and name
   (StaticFindObject): O(1) on average. *out is ZS_NULL_REF when none. */
zs_status zs_find_object(zs_runtime *rt, zs_ref outer, uint32_t name_index, uint32_t name_number,
                         zs_ref *out);

/* The handle of a live object. */
zs_ref zs_object_ref(zs_runtime *rt, const zs_object *object);

/* Store a reference into a member of kind OBJECT or WEAK_OBJECT (offset from
   the object start). Checks that the offset is such a member, that the target
   is live and not dying, and applies the write barrier. */
zs_status zs_store_ref(zs_runtime *rt, zs_ref holder, uint32_t offset, zs_ref target);
/* Append to / clear a ZS_MEMBER_OBJECT_ARRAY member. */
zs_status zs_ref_array_push(zs_runtime *rt, zs_ref holder, uint32_t offset, zs_ref target);
zs_status zs_ref_array_clear(zs_runtime *rt, zs_ref holder, uint32_t offset);

zs_status zs_add_to_root(zs_runtime *rt, zs_ref ref);
zs_status zs_remove_from_root(zs_runtime *rt, zs_ref ref);
zs_status zs_is_rooted(zs_runtime *rt, zs_ref ref, int *out);
/* Strong refcount (black conjugates, strong pointers): > 0 keeps it alive. */
zs_status zs_add_strong_ref(zs_runtime *rt, zs_ref ref);
zs_status zs_release_strong_ref(zs_runtime *rt, zs_ref ref);
zs_status zs_strong_ref_count(zs_runtime *rt, zs_ref ref, uint32_t *out);
/* Destroy at the next collection even if referenced; killable references to
   it are set to null while marking. Roots, strong refs and the outer chain
   (immutable references) still keep it. */
zs_status zs_mark_as_garbage(zs_runtime *rt, zs_ref ref);
/* Destroy an object now (Unreal's DestroyActor): marked as garbage and
   taken off the root set; from now on every call naming it is refused as
   for a dying object (ZS_E_DYING: stores, roots, calls, new proxies), and
   the managed side's proxies of it have expired when this returns (handed
   to the expiry handler; with none set, at the purge as usual). Its memory
   is freed by the next collection: the mark nulls killable references to
   it first (strong references and the outer chain keep the memory, never
   the object usable). ZS_E_INVALID for a permanent object. */
zs_status zs_destroy_object(zs_runtime *rt, zs_ref ref);
zs_status zs_is_garbage(zs_runtime *rt, zs_ref ref, int *out);
zs_status zs_is_permanent(zs_runtime *rt, zs_ref ref, int *out);

uint32_t zs_live_objects(zs_runtime *rt);
/* Copy up to capacity handles of live objects (index order) into buffer;
   *out_count gets how many live objects there are, so a caller whose buffer
   was too small can retry. O(high-water mark): for leak reports and
   debugging. Objects gathered but not yet destroyed are included. */
zs_status zs_live_handles(zs_runtime *rt, zs_ref *buffer, uint32_t capacity, uint32_t *out_count);

/* ---- value types --------------------------------------------------------
 *
 * Everything an object member, a struct member or a container element can
 * be is a zs_type: plain data, object references, strings, structs, arrays,
 * sets, maps, optionals and delegates. Types are registered per runtime and
 * never freed before it. The collector traces, and destruction frees,
 * through them. All memory layouts below are fixed: zeroed memory is always
 * a valid, empty value of any type.
 */

typedef enum zs_type_kind {
    ZS_TYPE_PLAIN = 1,       /* bytes: scalars, names, class ids, persistent ids */
    ZS_TYPE_OBJECT = 2,      /* zs_ref: strong; killable except as a set element or map key */
    ZS_TYPE_WEAK_OBJECT = 3, /* zs_ref: not traced */
    ZS_TYPE_STRING = 4,      /* zs_string of 1- or 2-byte code units */
    ZS_TYPE_STRUCT = 5,      /* members at offsets */
    ZS_TYPE_ARRAY = 6,       /* zs_array of elements */
    ZS_TYPE_SET = 7,         /* zs_hash of unique elements */
    ZS_TYPE_MAP = 8,         /* zs_hash of key/value entries */
    ZS_TYPE_OPTIONAL = 9,    /* a value, then a uint8_t "is set" flag */
    ZS_TYPE_DELEGATE = 10,   /* one zs_binding */
    ZS_TYPE_MULTICAST = 11,  /* zs_array of zs_binding */
    ZS_TYPE_SPARSE = 12      /* zs_array * allocated on first bind */
} zs_type_kind;

/* Type flags (read with zs_type_flags). */
#define ZS_TYPE_HAS_REFS 0x1u   /* holds strong object references: traced */
#define ZS_TYPE_NEEDS_DTOR 0x2u /* owns native memory: must be destroyed */
#define ZS_TYPE_BITWISE 0x4u    /* copy, hash and equality are byte-wise */
#define ZS_TYPE_HASHABLE 0x8u   /* may be a set element or a map key */

typedef struct zs_string {
    void *data;        /* code units, not terminated */
    uint32_t length;   /* in code units */
    uint32_t capacity; /* in code units */
} zs_string;

typedef struct zs_array {
    void *data;
    uint32_t count;
    uint32_t capacity;
} zs_array;

typedef struct zs_hash {
    zs_array entries;  /* elements (set) or key/value entries (map), dense */
    uint32_t *buckets; /* open addressing: entry index + 1, 0 = empty */
    uint32_t bucket_count;
    uint32_t reserved;
} zs_hash;

/* A delegate binding: a Python callable (an id the managed side owns), or
   an object plus a function name. Object bindings are weak. */
typedef struct zs_binding {
    zs_ref object;          /* weak */
    uint32_t function_name; /* name index (with object) */
    uint32_t callable;      /* managed callable id; 0 = none */
} zs_binding;

typedef struct zs_type_member {
    const zs_type *type;
    uint32_t offset;
} zs_type_member;

/* Built-in types: PLAIN (with size/align), OBJECT, WEAK_OBJECT, DELEGATE,
   MULTICAST, SPARSE and STRING (unit_size 1 or 2). Cached: the same
   arguments give the same type. */
zs_status zs_type_basic(zs_runtime *rt, zs_type_kind kind, uint32_t size, uint32_t align,
                        const zs_type **out);
/* A struct type: members at offsets inside size bytes. */
zs_status zs_type_struct(zs_runtime *rt, const char *name, uint32_t size, uint32_t align,
                         const zs_type_member *members, uint32_t member_count, const zs_type **out);
/* ARRAY, SET, OPTIONAL (element) or MAP (element = key, value). Cached. */
zs_status zs_type_container(zs_runtime *rt, zs_type_kind kind, const zs_type *element,
                            const zs_type *value, const zs_type **out);
uint32_t zs_type_size(const zs_type *type);
uint32_t zs_type_align(const zs_type *type);
uint32_t zs_type_flags(const zs_type *type);
uint32_t zs_type_kind_of(const zs_type *type);
uint32_t zs_type_id(const zs_type *type);
/* MAP: offset of the value inside an entry; OPTIONAL: of the flag. */
uint32_t zs_type_value_offset(const zs_type *type);
/* Bytes of one container entry (element, or key/value pair). */
uint32_t zs_type_entry_size(const zs_type *type);

/* Value operations. `owner` is the object holding the value (0 for a black
   value): a store into a clustered object dissolves its cluster. Every
   reference written goes through the write barrier. Values must be valid
   (zeroed or previously built by these functions).
   Every call below that writes (assign, clear, store, string, array, set,
   map, optional, binding and sparse-list creation) takes the owner and is
   refused, changing nothing, with ZS_E_STALE when the owner is gone and
   ZS_E_DYING when it is dying: gathered as unreachable, or unmarked once an
   incremental mark is complete. */
zs_status zs_value_assign(zs_runtime *rt, zs_ref owner, const zs_type *type, void *dst,
                          const void *src);
zs_status zs_value_clear(zs_runtime *rt, zs_ref owner, const zs_type *type, void *value);
/* Store a reference into an OBJECT or WEAK_OBJECT slot of a value. */
zs_status zs_value_store_ref(zs_runtime *rt, zs_ref owner, const zs_type *slot_type, zs_ref *slot,
                             zs_ref target);
int zs_value_equal(zs_runtime *rt, const zs_type *type, const void *a, const void *b);
uint64_t zs_value_hash(zs_runtime *rt, const zs_type *type, const void *value);

/* Whether a write into owner's memory would be accepted now (ZS_OK; owner 0
   always is): ZS_E_STALE, ZS_E_DYING as above, ZS_E_BUSY inside a destroy
   hook. For plain data the managed side writes itself (names, class ids,
   persistent ids, a struct member by member), checked first under the
   managed side's lock, which no collection step runs without. */
zs_status zs_object_writable(zs_runtime *rt, zs_ref owner);

/* Strings: replace the contents with `length` code units. */
zs_status zs_string_assign(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_string *string,
                           const void *units, uint32_t length);

/* Arrays: insert `count` copies of `value` (zeroed elements if NULL) at
   index; remove `count` elements at index; reserve capacity. */
zs_status zs_array_insert(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_array *array,
                          uint32_t index, const void *value, uint32_t count);
zs_status zs_array_remove(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_array *array,
                          uint32_t index, uint32_t count);
zs_status zs_array_reserve(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_array *array,
                           uint32_t capacity);
/* Replace all the elements of an array whose elements own nothing (PLAIN,
   OBJECT, WEAK_OBJECT) with `count` elements packed at `elements`
   (entry_size apart; may not point into the array). All or nothing: every
   object reference is checked first (ZS_E_STALE, ZS_E_DYING) and the
   storage grown before any element changes. */
zs_status zs_array_assign(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_array *array,
                          const void *elements, uint32_t count);
/* Insert `count` elements packed at `elements` (entry_size apart; may not
   point into the array) at index, into an array whose elements own nothing
   (PLAIN, OBJECT, WEAK_OBJECT). All or nothing, as zs_array_assign: every
   object reference is checked first and the storage grown before any
   element moves. */
zs_status zs_array_insert_packed(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_array *array,
                                 uint32_t index, const void *elements, uint32_t count);

/* Sets and maps. find: *out_index = -1 when absent. add: the entry of an
   existing key is reused (*out_added = 0); a new map value is zeroed.
   remove: the last entry moves into the hole. */
zs_status zs_hash_find(zs_runtime *rt, const zs_type *type, const zs_hash *hash, const void *key,
                       int64_t *out_index);
zs_status zs_hash_add(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_hash *hash,
                      const void *key, uint32_t *out_index, int *out_added);
zs_status zs_hash_remove(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_hash *hash,
                         const void *key, int *out_removed);

/* Optionals: set to a copy of value (zeroed if NULL), or reset. */
zs_status zs_optional_set(zs_runtime *rt, zs_ref owner, const zs_type *type, void *optional,
                          const void *value);

/* Delegates: write a binding into memory owner holds (callable ids are
   reference-counted natively; ids whose count drops to zero are reported by
   zs_take_released_callables). */
zs_status zs_binding_set(zs_runtime *rt, zs_ref owner, zs_binding *binding, zs_ref object,
                         uint32_t function_name, uint32_t callable);
/* Sparse delegates: the array, allocated on first use (NULL if none and
   create is 0). With create, a write: refused as above for the owner. */
zs_status zs_sparse_bindings(zs_runtime *rt, zs_ref owner, void *sparse, int create,
                             zs_array **out);
/* Binding lists (a MULTICAST value's zs_array, or the array a SPARSE value
   points to, from zs_sparse_bindings): append a binding that is exactly one
   of an object plus a function name or a callable (the callable is
   retained), or remove `count` bindings at index (their callables are
   released; later bindings move down, so the order is kept). Refused with
   ZS_E_BUSY inside a destroy hook, and as above for the owner. Emptying a SPARSE value's list does not
   free it: zs_value_clear does. (zsharp_py interns the function names of
   object bindings as "method()", so that no "_<digits>" suffix is split off.) */
zs_status zs_multicast_add(zs_runtime *rt, zs_ref owner, zs_array *bindings, zs_ref object,
                           uint32_t function_name, uint32_t callable);
zs_status zs_multicast_remove(zs_runtime *rt, zs_ref owner, zs_array *bindings, uint32_t index,
                              uint32_t count);
/* The callable ids no binding holds any more (up to capacity, *out_count
   of them), for the managed side to drop their callables. None while a
   broadcast runs (zs_delegate_broadcast, below): a listener may unbind a
   callable the broadcast still has to call, which stays until it ends. */
zs_status zs_take_released_callables(zs_runtime *rt, uint32_t *buffer, uint32_t capacity,
                                     uint32_t *out_count);
/* Retain a new managed callable id once (it starts with no native users). */
zs_status zs_callable_retain(zs_runtime *rt, uint32_t callable);
zs_status zs_callable_release(zs_runtime *rt, uint32_t callable);

/* Black values: native blocks owned by the managed side. A block whose
   type holds references is a GC root unless the runtime was created with
   ZS_RUNTIME_BLACK_NOT_ROOTS. */
zs_status zs_value_new(zs_runtime *rt, const zs_type *type, zs_ref *out_handle, void **out_value);
zs_status zs_value_free(zs_runtime *rt, zs_ref handle);
void *zs_value_resolve(zs_runtime *rt, zs_ref handle);
uint32_t zs_value_count(zs_runtime *rt);

/* ---- clusters ----------------------------------------------------------- */

/* Gather, from a root whose class has ZS_CLASS_CLUSTER_ROOT, every object it
   references (transitively) whose class has ZS_CLASS_IN_CLUSTER and that is
   not in a cluster, not garbage and not permanent. References leaving the
   cluster are recorded as referenced clusters and mutable objects. A cluster
   smaller than min_cluster_size is not kept (*out_size gets 0). While a
   cluster lives, marking any of its objects marks all of them and what the
   cluster references, without reading the members. Storing a reference into
   a member, or marking a member or a referenced mutable object as garbage,
   dissolves the cluster and, recursively, the clusters that reference it.
   Refused with ZS_E_BUSY while an incremental mark is pending. */
zs_status zs_create_cluster(zs_runtime *rt, zs_ref root, uint32_t *out_size);
zs_status zs_dissolve_cluster(zs_runtime *rt, zs_ref member);
/* The cluster of an object: *out_cluster = -1 when it is in none. */
zs_status zs_object_cluster(zs_runtime *rt, zs_ref ref, int32_t *out_cluster);

typedef struct zs_cluster_info {
    zs_ref root;
    uint32_t objects; /* root included */
    uint32_t referenced_clusters;
    uint32_t mutable_objects;
    uint32_t referenced_by;
} zs_cluster_info;
zs_status zs_cluster_get_info(zs_runtime *rt, int32_t cluster, zs_cluster_info *out);
uint32_t zs_cluster_count(zs_runtime *rt);

/* ---- garbage collection ---------------------------------------------- */

typedef enum zs_destroy_phase {
    ZS_BEGIN_DESTROY = 1, /* every dying object sees this first, memory intact */
    ZS_FINISH_DESTROY = 2 /* then this, just before its memory is released */
} zs_destroy_phase;

/* Called for every destroyed object. It must not mutate the heap: API calls
   that would return ZS_E_BUSY. */
typedef void (*zs_destroy_hook)(void *user, zs_runtime *rt, zs_object *object,
                                zs_destroy_phase phase);
void zs_set_destroy_hook(zs_runtime *rt, zs_destroy_hook hook, void *user);

typedef struct zs_gc_stats {
    uint64_t cycle;           /* number of completed mark phases */
    uint64_t objects_scanned; /* objects whose references were read */
    uint64_t objects_marked;  /* objects found reachable this cycle */
    uint64_t objects_unreachable;
    uint64_t objects_freed;     /* freed by the purge(s) of this cycle */
    uint64_t references_killed; /* killable references nulled (garbage targets) */
    uint64_t roots;             /* root-set, strong-ref and escaped permanent objects */
    uint64_t permanent_objects;
    uint64_t clusters;        /* live clusters */
    uint64_t clusters_marked; /* clusters marked reachable in one step each */
    uint64_t clusters_dissolved;
    uint64_t live_objects; /* after the purge */
    uint64_t mark_ns;      /* incremental: the sum of the steps */
    uint64_t gather_ns;
    uint64_t purge_ns;
    uint64_t mark_steps;      /* incremental steps (1 for a full collection) */
    uint64_t barrier_marks;   /* objects marked by the write barrier */
    uint64_t mark_threads;    /* threads used by the last mark */
    uint64_t gathers_aborted; /* out of memory while gathering: every object survived the cycle */
    uint64_t objects_freed_unshared; /* destroyed by zs_conjugates_dropped since the previous
                                        cycle began (not counted in objects_freed) */
    uint64_t barrier_slots;          /* reference slots the write barrier looked at while
                                        marking: a store adds the references it wrote */
} zs_gc_stats;

/* Collector phases. */
typedef enum zs_gc_phase {
    ZS_GC_IDLE = 0,          /* nothing pending */
    ZS_GC_MARKING = 1,       /* an incremental mark is pending: the write barrier is on */
    ZS_GC_PURGE_PENDING = 2, /* unreachable objects gathered, waiting to be destroyed */
    ZS_GC_GATHERING = 3      /* marking is complete; gathering the unreachable in steps.
                                Unmarked objects count as dying already. */
} zs_gc_phase;
zs_gc_phase zs_gc_phase_of(zs_runtime *rt);

/* Start an incremental mark (finishing a pending purge first; fails with
   ZS_E_EXPIRY_PENDING if that purge still waits for the managed side).
   Objects created while it is pending are born reachable; every reference
   store, root and strong reference added meanwhile goes through the write
   barrier. */
zs_status zs_gc_start_incremental(zs_runtime *rt);
/* Advance the pending mark for about budget_ns (0: to the end). When the
   mark completes, gather the unreachable objects and set *out_done. */
zs_status zs_gc_step(zs_runtime *rt, uint64_t budget_ns, int *out_done);
/* zs_gc_step, also bounded by work: the mark scans at most max_objects
   objects (0: no bound). A step bounded by work alone (budget_ns 0) is
   deterministic: the same heap and the same calls make the same steps on
   any machine, under any load (replays, lockstep games, demos); once its
   mark completes it gathers to the end. */
zs_status zs_gc_step_bounded(zs_runtime *rt, uint64_t budget_ns, uint32_t max_objects,
                             int *out_done);

/* Full stop-the-world collection: mark, gather and purge. Dying objects
   that have conjugates (zs_resolve_for_conjugate) are handed to the
   managed side's expiry handler before any is freed (see
   zs_set_expiry_handler, zsharp_managed.h); with no handler set the purge
   stops with ZS_E_EXPIRY_PENDING until they are taken (zs_gc_take_expiring). */
zs_status zs_collect_garbage(zs_runtime *rt);
/* Mark from the roots and gather the unreachable objects (pending purge).
   Finishes a pending incremental mark instead of starting a new one. */
zs_status zs_gc_mark_and_gather(zs_runtime *rt);
/* Dying objects that have conjugates, not yet handed to the managed side
   (the expiring list: zsharp_managed.h). */
uint32_t zs_gc_expiring_count(zs_runtime *rt);
/* A word that is non-zero while objects may be dying whose conjugates the
   managed side has not expired yet: a gather is under way, or the expiring
   list is not empty. A managed side reads it with no lock, as
   __atomic_load_n(word, __ATOMIC_RELAXED), to know when a plain write it
   makes itself must ask zs_object_writable first (however the collection
   started: a native host collecting included). Valid until zs_runtime_free. */
const uint32_t *zs_dying_word(zs_runtime *rt);
/* Destroy and free pending objects. budget_ns == 0: all of them. Objects
   still on the expiring list are handed to the expiry handler first
   (ZS_E_EXPIRY_PENDING when there is none); ZS_E_BUSY while another
   thread's hand-over is in progress. */
zs_status zs_gc_purge(zs_runtime *rt, uint64_t budget_ns, int *out_done);
/* zs_gc_purge, also bounded by work: at most max_objects objects (0: no bound). */
zs_status zs_gc_purge_bounded(zs_runtime *rt, uint64_t budget_ns, uint32_t max_objects,
                              int *out_done);
uint32_t zs_gc_pending_purge(zs_runtime *rt);
void zs_gc_get_stats(zs_runtime *rt, zs_gc_stats *out);

/* Walk every item, object, class and reference; on failure write a message
   into message (if non-NULL) and return ZS_E_CORRUPT. */
zs_status zs_heap_verify(zs_runtime *rt, char *message, size_t message_capacity);

/* ---- calls into the managed side ---------------------------------------- */

/* The managed side's entry point (one per runtime): run the overridable
   function named `function` (UTF-8) of `object`, reading its arguments from
   and writing its result into `params`, a block laid out as the managed side
   declares that function. Returns ZS_OK, ZS_E_CALL_FAILED when the function
   raised, ZS_E_INVALID when the object has no such function or params is
   NULL while it takes arguments, ZS_E_STALE when the object is gone. */
typedef zs_status (*zs_call_handler)(void *user, zs_runtime *rt, zs_ref object,
                                     const char *function, void *params);
void zs_set_call_handler(zs_runtime *rt, zs_call_handler handler, void *user);
/* Call an overridable function of a live object (Unreal's ProcessEvent).
   The runtime lock is not held during the call: the managed function may
   use the whole API (create, store, collect). ZS_E_STALE or ZS_E_DYING for
   a freed or dying object, ZS_E_BUSY inside a destroy hook; else the
   handler's status. Without a handler, the native entry of the function
   the object's class describes runs (zs_find_function: ZS_E_INVALID when
   there is none; an event with no native default does nothing). */
zs_status zs_call_function(zs_runtime *rt, zs_ref object, const char *function, void *params);
/* Call it on every object of `cls` (subclasses included) that was live and
   not marked as garbage when the call began, in slot order (a destroyed
   actor takes no more ticks); one destroyed or marked meanwhile (say by a
   call before it) is skipped, never called, and one created meanwhile is
   not called. *out_called (if not NULL) counts the calls made.
   Returns the first failure among the calls (every call is still made), or
   ZS_E_NOMEM before any call. */
zs_status zs_call_each(zs_runtime *rt, const zs_class *cls, const char *function, void *params,
                       uint32_t *out_called);
/* Calls from zs_call_function / zs_call_each still running. zs_runtime_free
   during one (the managed function closed its runtime) is deferred: the
   last call to return frees the runtime, and the calls left in a
   zs_call_each are skipped. */
uint32_t zs_calls_in_progress(zs_runtime *rt);
/* Call a native function's entry (zs_function_desc) as a call in progress:
   `self`, unless ZS_NULL_REF, must be live and not dying (else ZS_E_STALE,
   ZS_E_DYING, and entry is not called); the runtime lock is not held during
   the call, and zs_runtime_free from inside it is deferred as above. A
   scripting layer calls a host function through this. */
zs_status zs_call_native(zs_runtime *rt, zs_native_function entry, void *user, zs_ref self,
                         void *params);

/* ---- the tick manager --------------------------------------------------- *
 *
 * After Unreal's FTickFunction: an object registers tick functions, each in
 * one of the ordered tick groups, with an optional interval, prerequisites
 * (this one ticks after that one) and an enabled flag; zs_tick_frame, once
 * per frame, calls every one that is due, group by group, then may give
 * the collector a budget. docs/ticking.md is the guide.
 *
 * A tick function is one of:
 * - a native entry (zs_tick_desc.entry), called directly with its user
 *   pointer, the object and a zs_tick_params block;
 * - a function of the object's class named by zs_tick_desc.function, called
 *   as zs_call_function calls it, with a zs_tick_params block (whose first
 *   member is its one Float64 parameter, `dt`): with a plain call handler
 *   set (zs_set_call_handler) it goes to that handler; with the managed
 *   call handler set and an object of a ZS_CLASS_SCRIPT class, to the
 *   managed side (a Python override, or the host's default it did not
 *   override); otherwise the native entry the object's class describes
 *   (zs_find_function) runs directly, with no call into the managed side.
 *   Registration checks a described function takes (dt: Float64) or
 *   nothing and returns nothing; a script class's function is the managed
 *   side's to check (zsharp_py's rt.ticks does), as for zs_call_function.
 *
 * The frame's rules:
 * - Groups tick in order (ZS_TICK_PRE_PHYSICS first); within a group, in
 *   registration order, except that a function ticks after its
 *   prerequisites. A prerequisite in a later group moves the dependent to
 *   that group (its actual group, zs_tick_info.actual_group), after it; a
 *   prerequisite that is disabled, waiting for its interval or whose
 *   object cannot tick does not hold the dependent back. A prerequisite
 *   that would close a cycle is refused (ZS_E_INVALID).
 * - Interval: a function with interval > 0 ticks once the game time it has
 *   been enabled for since its last tick reaches the interval (within a
 *   billionth of it); every function is given that time as its
 *   delta_seconds (the frame's delta for one that ticks every frame), so
 *   the times a function is given add up to the game time it was enabled.
 * - Changes during a frame (from a tick function, another thread, a
 *   destroy hook's caller): unregistering and disabling take effect at
 *   once (a function not yet reached this frame is not called);
 *   enabling and interval changes take effect when the frame reaches the
 *   function; registering, prerequisites and groups take effect from the
 *   next frame (the frame's order is fixed when it starts).
 * - Objects: a registration does not keep its object alive. An object that
 *   is dying, destroyed (zs_destroy_object) or marked as garbage is not
 *   ticked; once the collector has freed it, its tick functions are
 *   unregistered (by the next frame, or the next call that names them,
 *   which then gets ZS_E_STALE). Handles never name another object: a
 *   tick function and its object are both index + serial.
 * - Failures: a call that fails (a Python override that raised: the
 *   managed side reports it, as an exception in a call from native code)
 *   is counted, and the remaining functions still tick.
 * - zs_runtime_free from inside a tick function is deferred until the
 *   frame returns; the functions left are not called.
 */

/* A registered tick function: index + serial, as a zs_ref (0: none). */
typedef uint64_t zs_tick;

/* The tick groups, in the order a frame ticks them. */
typedef enum zs_tick_group {
    ZS_TICK_PRE_PHYSICS = 0,     /* before the physics step (Unreal's default) */
    ZS_TICK_DURING_PHYSICS = 1,  /* beside it */
    ZS_TICK_POST_PHYSICS = 2,    /* after it: read its results */
    ZS_TICK_POST_UPDATE_WORK = 3 /* last: cameras, UI, what follows everything else */
} zs_tick_group;
#define ZS_TICK_GROUP_COUNT 4u

/* The block every tick function is called with. */
typedef struct zs_tick_params {
    double delta_seconds; /* game time since this function last ticked (`dt`) */
    uint64_t frame;       /* the frame's number (1 for the first zs_tick_frame) */
    zs_tick tick;         /* the tick function being called */
    uint32_t group;       /* the group it ticks in (its actual group) */
    uint32_t reserved;
} zs_tick_params;

#define ZS_TICK_DISABLED 0x1u /* zs_tick_desc.flags: registered disabled */

typedef struct zs_tick_desc {
    zs_ref object;            /* live, not dying or marked as garbage */
    const char *function;     /* UTF-8 name of a function of its class (copied), or NULL */
    zs_native_function entry; /* or a native entry, called directly (function NULL) */
    void *user;               /* entry's user pointer */
    uint32_t group;           /* zs_tick_group */
    uint32_t flags;           /* ZS_TICK_* */
    double interval;          /* seconds of game time between ticks; 0: every frame */
} zs_tick_desc;

/* Register a tick function; it ticks from the next frame that starts.
   ZS_E_INVALID for a bad description (both or neither of function and
   entry, a group out of range, a negative or non-finite interval, unknown
   flags) or a function the object's class lacks or cannot tick with (see
   above); ZS_E_STALE, ZS_E_DYING for the object; ZS_E_BUSY inside a
   destroy hook. */
zs_status zs_tick_register(zs_runtime *rt, const zs_tick_desc *desc, zs_tick *out);
/* Unregister (at once: not called again, even later in this frame).
   ZS_E_STALE when it is not registered. */
zs_status zs_tick_unregister(zs_runtime *rt, zs_tick tick);
/* Unregister every tick function of an object; *out_count (may be NULL)
   counts them. */
zs_status zs_tick_unregister_object(zs_runtime *rt, zs_ref object, uint32_t *out_count);
/* Enable or disable (at once). */
zs_status zs_tick_set_enabled(zs_runtime *rt, zs_tick tick, int enabled);
/* Change the interval (seconds, finite, >= 0; the time already counted stays). */
zs_status zs_tick_set_interval(zs_runtime *rt, zs_tick tick, double seconds);
/* Move to another group (from the next frame). */
zs_status zs_tick_set_group(zs_runtime *rt, zs_tick tick, uint32_t group);
/* `tick` ticks after `prerequisite` (from the next frame): ZS_E_INVALID
   for itself, or when prerequisite already ticks after tick (a cycle);
   adding one twice does nothing. */
zs_status zs_tick_add_prerequisite(zs_runtime *rt, zs_tick tick, zs_tick prerequisite);
/* Remove it; ZS_E_INVALID when it was not one. */
zs_status zs_tick_remove_prerequisite(zs_runtime *rt, zs_tick tick, zs_tick prerequisite);

typedef struct zs_tick_info {
    zs_ref object;
    uint32_t group;              /* as registered */
    uint32_t actual_group;       /* where it ticks: after a later prerequisite (from the order
                                    the last frame fixed; its group until a frame started) */
    double interval;             /* seconds */
    double elapsed;              /* game time counted towards its next tick */
    uint64_t calls;              /* times it was called */
    uint32_t enabled;            /* 1 or 0 */
    uint32_t prerequisite_count; /* registered prerequisites */
    uint32_t by_name;            /* 1: a function named; 0: a native entry */
    uint32_t reserved;
} zs_tick_info;
/* What a registered tick function is; ZS_E_STALE when it is not registered. */
zs_status zs_tick_get_info(zs_runtime *rt, zs_tick tick, zs_tick_info *out);
/* Tick functions registered (a freed object's count until they are unregistered). */
uint32_t zs_tick_count(zs_runtime *rt);

/* The collector's share of a frame, after rt.gc.tick's rules (zsharp_py's
   GcSettings): once seconds_between_cycles of frames have passed with no
   cycle pending, an incremental cycle starts; while one is pending, each
   frame advances it by one step: marking and gathering within
   mark_budget_ns (the purge within purge_budget_ns when only the purge is
   left), or, when objects_per_frame is not 0, by that much work instead
   (deterministic). The purge hands the dying objects to the managed
   side's expiry handler first, as every collection a host starts does. */
typedef struct zs_frame_gc {
    double seconds_between_cycles; /* GcSettings.time_between_collections (1.0) */
    uint64_t mark_budget_ns;       /* GcSettings.reachability_budget (2 ms) */
    uint64_t purge_budget_ns;      /* GcSettings.purge_budget (2 ms) */
    uint32_t objects_per_frame;    /* GcSettings.objects_per_tick (0: time budgets) */
    uint32_t reserved;
} zs_frame_gc;
/* GcSettings' defaults. */
void zs_frame_gc_defaults(zs_frame_gc *out);

/* What a frame's collector step did (rt.gc.tick's results). */
typedef enum zs_frame_gc_result {
    ZS_FRAME_GC_NONE = 0,     /* no zs_frame_gc given, or the runtime is being freed */
    ZS_FRAME_GC_IDLE = 1,     /* nothing due */
    ZS_FRAME_GC_STARTED = 2,  /* a cycle began and is still pending */
    ZS_FRAME_GC_ADVANCED = 3, /* a pending cycle progressed */
    ZS_FRAME_GC_FINISHED = 4  /* the cycle completed in this frame */
} zs_frame_gc_result;

typedef struct zs_frame_stats {
    uint64_t frame;          /* this frame's number (1 for the first) */
    double time;             /* game time after it: the sum of the deltas */
    uint32_t ticked;         /* tick functions called (failed ones included) */
    uint32_t failed;         /* calls that failed, and named functions nothing could run
                                (no handler for a script's class, no native entry) */
    uint32_t waiting;        /* enabled, their interval not reached */
    uint32_t disabled;       /* disabled when the frame reached them */
    uint32_t skipped;        /* objects dying, destroyed or marked as garbage, and functions
                                 unregistered during the frame before it reached them */
    uint32_t unregistered;   /* tick functions of freed objects, unregistered by this frame */
    zs_status first_failure; /* the first failed call's status (ZS_OK: none) */
    uint32_t gc;             /* zs_frame_gc_result */
    zs_status gc_status;     /* the collector step's status (ZS_OK unless it failed) */
    uint32_t reserved;
    uint64_t tick_ns; /* time spent ticking */
    uint64_t gc_ns;   /* time spent collecting */
} zs_frame_stats;

/* One frame: advance the game time by delta_seconds, tick every due tick
   function, group by group (rules above), then, when gc is not NULL, give
   the collector its share. Returns ZS_OK once the frame ran, whatever its
   tick functions did (*out, which may be NULL, says); ZS_E_INVALID for a
   negative or non-finite delta; ZS_E_BUSY while a frame runs (from a tick
   function, or another thread) or inside a destroy hook; ZS_E_NOMEM when
   the frame's order could not be built (nothing ticked). */
zs_status zs_tick_frame(zs_runtime *rt, double delta_seconds, const zs_frame_gc *gc,
                        zs_frame_stats *out);

/* ---- delegates called from native code ---------------------------------
 *
 * A delegate value (DELEGATE, MULTICAST or SPARSE: in an object, a struct,
 * a container or a black value) holds bindings: an object and a function
 * name (a host's native function, or a script's method of that name), or
 * a callable of the managed side (for zsharp_py a Python function, lambda,
 * closure or bound method). Native code calls them (Unreal's Broadcast and
 * Execute) with one parameter block laid out as the delegate's signature
 * says: a zs_function_desc whose parameters (type texts, offsets,
 * directions) and block_size describe the block as a function's do; its
 * name names the delegate in messages; entry, user and flags are not read.
 * Like every description it is kept by reference: it must stay valid and
 * unchanged until the runtime is freed (a static table), since the
 * scripting layer remembers how to read the block by its address.
 *
 * Who runs each listener: a callable, the managed side (zsharp_py calls it
 * with the block's members as arguments, in a call scope of its own); an
 * object binding, the managed side when one is attached (the object's
 * method of that name, which may be a Python override, called the same
 * way), else a zs_call_handler if one is set, else the native entry of the
 * function the object's class describes (zs_find_function; an event with
 * no native default does nothing), which must take exactly the signature's
 * parameters (the same type texts at the same offsets, no larger block; a
 * result only for zs_delegate_execute, at the signature's result) or the
 * listener fails with ZS_E_INVALID. The name of an object binding is read
 * with a trailing "()" dropped (zsharp_py interns "method()": see
 * zs_multicast_add), so a host may intern either spelling.
 *
 * Safe against the listeners: the bindings are copied before the first
 * listener runs (and no callable is released to the managed side until the
 * broadcast ends: zs_take_released_callables), and the delegate's memory is
 * never read again, so a listener may bind, unbind, clear or free the
 * delegate, destroy its owner, collect, or free the runtime. Bindings
 * added or removed by a listener take effect from the next call (as
 * zsharp_py's broadcast()). An object binding's object is looked up again
 * (handle and serial, under the lock) just before its turn: one freed,
 * dying or marked as garbage by then is skipped, never called. The runtime
 * lock is not held while a listener runs; the broadcast counts as a call in
 * progress (zs_calls_in_progress), so zs_runtime_free from a listener is
 * deferred to its end and the listeners left are skipped.
 *
 * A listener that fails does not stop the others: each status is counted
 * in the report, and the first failure is returned once every listener
 * has run. A Python listener that raised gives ZS_E_CALL_FAILED, its
 * exception having gone to sys.unraisablehook (an exception never crosses
 * into C); ZS_E_INVALID when a listener cannot take the block (no such
 * method, a native function of another signature, the signature's types
 * unknown to the script). */

/* What one broadcast did. */
typedef struct zs_broadcast_report {
    uint32_t listeners; /* bindings copied when it began */
    uint32_t called;    /* listeners run, failed ones included */
    uint32_t failed;    /* of those, how many returned a status other than ZS_OK */
    uint32_t skipped;   /* not run: the object freed, dying or marked as garbage before its
                           turn, a callable with no managed side attached, or the runtime
                           freed by an earlier listener */
} zs_broadcast_report;

/* Call every binding of a MULTICAST or SPARSE delegate at `delegate` (memory
   `owner` holds; ZS_NULL_REF for a black value or the host's own memory),
   in bind order, each with `params` (the same block for all: a listener
   sees what earlier ones wrote into it). The signature takes parameters
   only (ZS_PARAM_IN): a multicast delegate returns nothing. Returns ZS_OK
   when every listener called returned ZS_OK, else the first failure;
   before any call: ZS_E_INVALID (a bad argument, type or signature),
   ZS_E_STALE (owner freed), ZS_E_BUSY (inside a destroy hook), ZS_E_NOMEM.
   `out` may be NULL. */
zs_status zs_delegate_broadcast(zs_runtime *rt, zs_ref owner, const zs_type *type,
                                const void *delegate, const zs_function_desc *signature,
                                void *params, zs_broadcast_report *out);
/* Call the binding of a single-cast DELEGATE at `delegate`, as
   zs_delegate_broadcast calls one listener (Unreal's ExecuteIfBound). The
   signature may have a result (one ZS_PARAM_RETURN parameter), which the
   listener writes into the block. *out_called (may be NULL) is 1 when it
   was called, 0 when the delegate is unbound or its object is gone (then
   ZS_OK). Returns the listener's status, or the errors of
   zs_delegate_broadcast before the call. */
zs_status zs_delegate_execute(zs_runtime *rt, zs_ref owner, const zs_binding *delegate,
                              const zs_function_desc *signature, void *params, int *out_called);

/* ---- debugging: why is an object alive? --------------------------------- */

/* One link of a reference chain. A chain starts at a root and ends at its
   target; each link's holder references the next link's through `member`. */
typedef struct zs_chain_link {
    zs_ref holder;   /* an object, or (root ZS_CHAIN_ROOT_VALUE) a black value's handle */
    uint32_t member; /* byte offset, in the holder, of the member that holds the next
                        link (a reference, or a struct or container holding it);
                        ZS_CHAIN_OUTER: the holder's outer; ZS_CHAIN_CLUSTER: both are
                        in one cluster (marked as a unit); ZS_CHAIN_WHOLE: the black
                        value as a whole (not a struct); ZS_CHAIN_END: the target */
    uint32_t root;   /* on the first link: why the holder is a root (ZS_CHAIN_ROOT_*) */
} zs_chain_link;
#define ZS_CHAIN_END 0xFFFFFFFFu
#define ZS_CHAIN_OUTER 0xFFFFFFFEu
#define ZS_CHAIN_WHOLE 0xFFFFFFFDu
#define ZS_CHAIN_CLUSTER 0xFFFFFFFCu
#define ZS_CHAIN_ROOT_ADDED 0x1u     /* zs_add_to_root */
#define ZS_CHAIN_ROOT_STRONG 0x2u    /* strong references (zs_add_strong_ref) */
#define ZS_CHAIN_ROOT_PERMANENT 0x4u /* permanent (allocated while disregarding the GC) */
#define ZS_CHAIN_ROOT_VALUE 0x8u     /* a black value (a root unless ZS_RUNTIME_BLACK_NOT_ROOTS) */

/* Why `target` is alive (after Unreal's FReferenceChainSearch): for each root
   that reaches it, nearest first, up to max_chains roots (0: all), the shortest chain
   of references from that root to it, along the edges the mark follows.
   Chains are written one after another (capacity links at most); *out_count
   gets the number of links all of them need, so a caller whose buffer was
   too small can retry. No chains: nothing keeps the target alive (the next
   collection destroys it). A root target gets a chain of itself alone.
   O(heap + references) time and transient memory: a debugging tool.
   ZS_E_STALE for a freed target, ZS_E_DYING for a dying one. */
zs_status zs_reference_chains(zs_runtime *rt, zs_ref target, uint32_t max_chains,
                              zs_chain_link *links, uint32_t capacity, uint32_t *out_count);

#ifdef __cplusplus
}
#endif
#endif /* ZSHARP_H */
