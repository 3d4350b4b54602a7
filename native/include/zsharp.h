/*
 * zsharp.h -- the whole C API of the zsharp native object heap.
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
 * never see each other. Every function locks the runtime's own (recursive)
 * mutex, so the API may be called from several threads.
 *
 * Conventions: functions return a zs_status (ZS_OK == 0). Output parameters
 * come last. A reference stored inside an object is a zs_ref: a 64-bit value
 * whose low 32 bits are the object index and whose high 32 bits are the
 * serial number of the slot. The all-zero value is the null reference
 * (serials start at 1), so zeroed memory holds only null references.
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

/* A handle: index into the object array + the serial the slot had. */
typedef uint64_t zs_ref;

#define ZS_NULL_REF ((zs_ref)0)
#define ZS_REF_INDEX(r) ((uint32_t)((r) & 0xFFFFFFFFu))
#define ZS_REF_SERIAL(r) ((uint32_t)((r) >> 32))
#define ZS_MAKE_REF(index, serial) \
    ((zs_ref)(uint32_t)(index) | ((zs_ref)(uint32_t)(serial) << 32))

/* The header at the start of every native object. Members follow it. */
typedef struct zs_object {
    const zs_class *cls;  /* immutable */
    zs_ref outer;         /* immutable, traced, never killable */
    uint32_t index;       /* slot in the object array */
    uint32_t name_index;  /* entry in the runtime's name table */
    uint32_t name_number; /* 0: no suffix; n: suffix "_<n-1>" (UE convention) */
    uint32_t class_id;    /* runtime-local id of cls */
} zs_object;

typedef enum zs_status {
    ZS_OK = 0,
    ZS_E_NOMEM = 1,          /* a native allocation failed */
    ZS_E_CAPACITY = 2,       /* the object array is full (max_objects) */
    ZS_E_STALE = 3,          /* a handle names a freed or reused slot */
    ZS_E_INVALID = 4,        /* a bad argument (null, out of range, wrong class) */
    ZS_E_BUSY = 5,           /* not allowed now (e.g. heap mutation inside a destroy hook) */
    ZS_E_EXPIRY_PENDING = 6, /* purge refused: the managed side has not taken the expiring list */
    ZS_E_DYING = 7,          /* the object is unreachable and waiting to be destroyed */
    ZS_E_CORRUPT = 8         /* zs_heap_verify found an inconsistency */
} zs_status;

/* A fixed English description of a status code. */
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
#define ZS_OBJECTS_PER_CHUNK 65536u

/* Open the disregard-for-GC window at creation: objects allocated until
   zs_close_disregard_for_gc are permanent and never scanned. */
#define ZS_RUNTIME_DISREGARD_WINDOW 0x1u

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
zs_status zs_name_intern(zs_runtime *rt, const char *utf8, size_t length,
                         uint32_t *out_index, uint32_t *out_number);
/* The base string of an interned name (valid until the runtime is freed). */
const char *zs_name_base(zs_runtime *rt, uint32_t index);
uint32_t zs_name_count(zs_runtime *rt);

/* ---- classes and reference schemas ------------------------------------ */

typedef enum zs_member_kind {
    ZS_MEMBER_OBJECT = 1,       /* zs_ref, strong, killable */
    ZS_MEMBER_WEAK_OBJECT = 2,  /* zs_ref, not traced */
    ZS_MEMBER_OBJECT_ARRAY = 3  /* zs_ref_array, strong, killable elements */
} zs_member_kind;

typedef struct zs_member {
    uint32_t kind;   /* zs_member_kind */
    uint32_t offset; /* from the start of the object (header included) */
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

typedef struct zs_class_desc {
    const char *name;
    const zs_class *parent; /* NULL for a root class */
    uint32_t instance_size; /* bytes, header included; >= parent's */
    uint32_t flags;         /* ZS_CLASS_* */
    const zs_member *members; /* this class's own members (parent's are inherited) */
    uint32_t member_count;
} zs_class_desc;

zs_status zs_class_register(zs_runtime *rt, const zs_class_desc *desc,
                            const zs_class **out);
uint32_t zs_class_id(const zs_class *cls);
const char *zs_class_name(const zs_class *cls);
const zs_class *zs_class_parent(const zs_class *cls);
uint32_t zs_class_instance_size(const zs_class *cls);
/* Non-zero when cls is base or derives from it. */
int zs_class_is_a(const zs_class *cls, const zs_class *base);
/* Length in 32-bit words of the flattened schema stream (for tests). */
uint32_t zs_class_schema_words(const zs_class *cls);

/* ---- objects ---------------------------------------------------------- */

#define ZS_NAME_AUTO UINT32_MAX /* name_index: "<ClassName>_<n>" */

/* Allocate a zeroed object. outer may be ZS_NULL_REF. While an incremental
   mark is pending the new object is born reachable. */
zs_status zs_object_new(zs_runtime *rt, const zs_class *cls, zs_ref outer,
                        uint32_t name_index, uint32_t name_number,
                        zs_ref *out_ref, zs_object **out_object);

/* The object a handle names, or NULL when the handle is null or stale. */
zs_object *zs_resolve(zs_runtime *rt, zs_ref ref);
/* Resolve for the managed side: also records that a conjugate now exists, so
   the object will appear in the expiring list before it is freed. Fails with
   ZS_E_STALE or ZS_E_DYING. */
zs_status zs_resolve_for_conjugate(zs_runtime *rt, zs_ref ref, zs_object **out);
/* The managed side dropped its conjugate early (e.g. on runtime close). */
zs_status zs_forget_conjugate(zs_runtime *rt, zs_ref ref);

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
zs_status zs_is_garbage(zs_runtime *rt, zs_ref ref, int *out);
zs_status zs_is_permanent(zs_runtime *rt, zs_ref ref, int *out);

uint32_t zs_live_objects(zs_runtime *rt);

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
    uint32_t objects;             /* root included */
    uint32_t referenced_clusters;
    uint32_t mutable_objects;
    uint32_t referenced_by;
} zs_cluster_info;
zs_status zs_cluster_get_info(zs_runtime *rt, int32_t cluster, zs_cluster_info *out);
uint32_t zs_cluster_count(zs_runtime *rt);

/* ---- garbage collection ---------------------------------------------- */

typedef enum zs_destroy_phase {
    ZS_BEGIN_DESTROY = 1,  /* every dying object sees this first, memory intact */
    ZS_FINISH_DESTROY = 2  /* then this, just before its memory is released */
} zs_destroy_phase;

/* Called for every destroyed object. It must not mutate the heap: API calls
   that would return ZS_E_BUSY. */
typedef void (*zs_destroy_hook)(void *user, zs_runtime *rt, zs_object *object,
                                zs_destroy_phase phase);
void zs_set_destroy_hook(zs_runtime *rt, zs_destroy_hook hook, void *user);

typedef struct zs_gc_stats {
    uint64_t cycle;            /* number of completed mark phases */
    uint64_t objects_scanned;  /* objects whose references were read */
    uint64_t objects_marked;   /* objects found reachable this cycle */
    uint64_t objects_unreachable;
    uint64_t objects_freed;    /* freed by the purge(s) of this cycle */
    uint64_t references_killed; /* killable references nulled (garbage targets) */
    uint64_t roots;            /* root-set, strong-ref and escaped permanent objects */
    uint64_t permanent_objects;
    uint64_t clusters;         /* live clusters */
    uint64_t clusters_marked;  /* clusters marked reachable in one step each */
    uint64_t clusters_dissolved;
    uint64_t live_objects;     /* after the purge */
    uint64_t mark_ns;          /* incremental: the sum of the steps */
    uint64_t gather_ns;
    uint64_t purge_ns;
    uint64_t mark_steps;       /* incremental steps (1 for a full collection) */
    uint64_t barrier_marks;    /* objects marked by the write barrier */
    uint64_t mark_threads;     /* threads used by the last mark */
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

/* Full stop-the-world collection: mark, gather and purge. If conjugates
   exist for dying objects (see zs_resolve_for_conjugate) the purge stops
   with ZS_E_EXPIRY_PENDING until they are taken: the managed side calls
   zs_gc_mark_and_gather, zs_gc_take_expiring, then zs_gc_purge. */
zs_status zs_collect_garbage(zs_runtime *rt);
/* Mark from the roots and gather the unreachable objects (pending purge).
   Finishes a pending incremental mark instead of starting a new one. */
zs_status zs_gc_mark_and_gather(zs_runtime *rt);
/* Copy up to capacity handles of dying objects that have conjugates and
   remove them from the list; *out_count gets how many were copied. */
zs_status zs_gc_take_expiring(zs_runtime *rt, zs_ref *buffer, uint32_t capacity,
                              uint32_t *out_count);
/* The same, also reporting for each object its name (name_index in the low
   32 bits of names[i], name_number in the high 32) and whether it was marked
   as garbage; names and garbage may be NULL. */
zs_status zs_gc_take_expiring_ex(zs_runtime *rt, zs_ref *buffer, uint64_t *names, uint8_t *garbage,
                                 uint32_t capacity, uint32_t *out_count);
uint32_t zs_gc_expiring_count(zs_runtime *rt);
/* Destroy and free pending objects. budget_ns == 0: all of them. */
zs_status zs_gc_purge(zs_runtime *rt, uint64_t budget_ns, int *out_done);
uint32_t zs_gc_pending_purge(zs_runtime *rt);
void zs_gc_get_stats(zs_runtime *rt, zs_gc_stats *out);

/* Walk every item, object, class and reference; on failure write a message
   into message (if non-NULL) and return ZS_E_CORRUPT. */
zs_status zs_heap_verify(zs_runtime *rt, char *message, size_t message_capacity);

/* Test-only switches (zs_debug_set): prove that tests fail without the
   mechanism they cover. */
#define ZS_DEBUG_DISABLE_BARRIER 1u /* the write barrier does nothing */
#define ZS_DEBUG_PARALLEL_THRESHOLD 2u /* objects needed before marking goes parallel */
zs_status zs_debug_set(zs_runtime *rt, uint32_t what, uint64_t value);

/* Test-only: mutate raw state so tests can prove zs_heap_verify notices. */
zs_status zs_debug_corrupt(zs_runtime *rt, zs_ref ref, uint32_t what);

#ifdef __cplusplus
}
#endif
#endif /* ZSHARP_H */
