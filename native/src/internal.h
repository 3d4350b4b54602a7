/*
 * internal.h -- what the files of native/src share: the runtime's data (one
 * struct, zs_runtime, holds everything; there are no mutable globals
 * anywhere in the library) and the records it holds, the inline helpers
 * every file uses, and the functions files share, declared by layer from
 * the bottom up (docs/native.md: the layers, and which file may use which).
 */
#ifndef ZSHARP_INTERNAL_H
#define ZSHARP_INTERNAL_H

#include "lock.h"
/* The library implements all three audiences' headers: the host's API, the
   managed side's protocol and the debug switches. */
#include "zsharp.h"
#include "zsharp_debug.h"
#include "zsharp_managed.h"

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <threads.h>

/* ==========================================================================
 * The data: the runtime and the records it holds
 * ========================================================================== */

/* ---- object array items ------------------------------------------------ */

/* One slot of the object array: 24 bytes. The GC reads flags from here
   without touching the object itself (one cache miss fewer per object). */
typedef struct zs_item {
    zs_object *object;     /* NULL while the slot is free */
    uint32_t flags;        /* ZS_ITEM_* */
    int32_t cluster_index; /* -1: not in a cluster (clusters come later) */
    uint32_t serial;       /* bumped on free; never 0 for a used slot */
    uint32_t strong_refs;  /* black conjugates and strong pointers */
} zs_item;

_Static_assert(sizeof(zs_item) <= 24, "an object-array item must fit in 24 bytes");
_Static_assert(offsetof(zs_item, cluster_index) == offsetof(zs_item, flags) + 4,
               "zs_item_word reads flags and cluster_index as one word");

/* An item's flags (low 32 bits) and cluster index (high 32 bits) in one
   load, so the collector's hot loops test flags, mark and "not in a
   cluster" (ZS_WORD_NO_CLUSTER, the index's sign bit) with one mask and
   one compare. */
static inline uint64_t zs_item_word(const zs_item *it) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t word;
    memcpy(&word, &it->flags, sizeof word);
    return word;
#else
    return it->flags | (uint64_t)(uint32_t)it->cluster_index << 32;
#endif
}
#define ZS_WORD_NO_CLUSTER (1ull << 63)

/* Item flags. */
#define ZS_ITEM_MARK 0x01u          /* compared with rt->mark_parity: equal means reachable */
#define ZS_ITEM_ROOT 0x02u          /* AddToRoot */
#define ZS_ITEM_GARBAGE 0x04u       /* MarkAsGarbage */
#define ZS_ITEM_PERMANENT 0x08u     /* allocated in the disregard-for-GC window */
#define ZS_ITEM_IN_ROOT_LIST 0x10u  /* present in rt->root_list */
#define ZS_ITEM_HAS_CONJUGATE 0x20u /* the managed side holds a proxy */
#define ZS_ITEM_DYING 0x40u         /* gathered as unreachable; waiting for purge */
#define ZS_ITEM_LEAF 0x80u /* class has no strong members: marking never reads the object */
#define ZS_ITEM_BEGUN_DESTROY 0x100u /* BeginDestroy already ran */
#define ZS_ITEM_CLUSTER_ROOT 0x400u  /* the root of the cluster in cluster_index */
#define ZS_ITEM_SHARED 0x800u        /* the heap handed the handle out (objects.c, "Sharing") */
/* zs_destroy_object: garbage, refused as dying, freed by the next
   collection that finds it unreachable. */
#define ZS_ITEM_DESTROYED 0x1000u
#define ZS_ITEM_ESCAPED                                                                            \
    0x200u /* permanent, but holds references to collectable objects: scanned as a root */

/* Colour helpers: the reachable-flag swap. Flipping rt->mark_parity turns
   every object "maybe unreachable" in O(1). */
#define item_is_marked(rt, it) ((((it)->flags ^ (rt)->mark_parity) & ZS_ITEM_MARK) == 0)
#define item_set_marked(rt, it) ((it)->flags = ((it)->flags & ~ZS_ITEM_MARK) | (rt)->mark_parity)
#define item_set_unmarked(rt, it)                                                                  \
    ((it)->flags = ((it)->flags & ~ZS_ITEM_MARK) | ((rt)->mark_parity ^ ZS_ITEM_MARK))
#define item_is_root(it)                                                                           \
    (((it)->flags & (ZS_ITEM_ROOT | ZS_ITEM_ESCAPED)) != 0 || (it)->strong_refs > 0)

/* Serial numbers start at 1; a slot whose serial reaches this is retired. */
#define ZS_SERIAL_RETIRE UINT32_MAX

/* ---- growable vectors -------------------------------------------------- */

typedef struct zs_u32_vec {
    uint32_t *data;
    uint32_t count;
    uint32_t capacity;
} zs_u32_vec;

typedef struct zs_ref_vec {
    zs_ref *data;
    uint32_t count;
    uint32_t capacity;
} zs_ref_vec;

/* ---- classes ----------------------------------------------------------- */

/* Schema stream opcodes: one word = opcode (low 8 bits) | offset << 8.
   Flattened once per class or struct type (nested structs inlined with
   their offsets added), interpreted linearly by the marker. A VALUE word's
   type (a container, string or delegate) is in the parallel types array. */
#define ZS_OP_OBJECT 1u /* killable zs_ref */
#define ZS_OP_VALUE 2u  /* a value of types[i] */
#define ZS_OP_WEAK 3u   /* not traced; kept for verify and store checks */
#define ZS_OP_SHIFT 8u
#define ZS_OP_MASK 0xFFu
#define ZS_OP_MAX_OFFSET 0x00FFFFFFu
#define ZS_NO_RUN UINT32_MAX

/* A flattened member list: words that the marker must follow first
   (strong_count of them: the object_count OBJECT words, then values with
   references), then the rest (weak refs, values without refs). */
typedef struct zs_schema {
    uint32_t count;
    uint32_t strong_count;
    uint32_t object_count; /* the first words, all ZS_OP_OBJECT (<= strong_count) */
    uint32_t object_run;   /* offset of the first when the OBJECT words are adjacent
                              references in order, else ZS_NO_RUN */
    uint32_t plain_count;  /* the marker's fast path: object_count when the strong
                              words are just that run (no strong values), else
                              ZS_NO_RUN */
    uint32_t plain_offset; /* the run's offset (0 when plain_count is 0) */
    uint32_t *words;
    const zs_type **types; /* per word; NULL except for ZS_OP_VALUE */
} zs_schema;

/* A struct a host registered: its description and its type (reflection.c). */
typedef struct zs_registered_struct {
    const zs_struct_desc *desc;
    const zs_type *type;
} zs_registered_struct;

/* A function zs_runtime_free runs (zs_runtime_add_cleanup). */
typedef struct zs_cleanup {
    void (*run)(void *user);
    void *user;
} zs_cleanup;

/* Where the names of one outer and text start in the name index
   (objects.c): the outer (UINT32_MAX for none) and the name mixed. An object's
   number is added after mixing, so that objects named in sequence
   ("Actor_1", "Actor_2"...: every automatic name) land in neighbouring
   buckets: creating many of them touches the bucket array in order instead
   of at random (a cache miss per object once the array outgrows the
   cache). Names of other outers or texts start elsewhere at random. */
static inline uint32_t zs_name_seed(uint32_t outer_index, uint32_t name_index) {
    uint64_t h = ((uint64_t)outer_index * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)name_index << 20);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return (uint32_t)(h ^ (h >> 32));
}

struct zs_class {
    zs_class_head head; /* first: public (zsharp.h) */
    char *name;
    const zs_class *parent;
    uint32_t instance_size;
    uint32_t flags;
    zs_schema schema;
    uint32_t name_index;     /* interned class name, for auto object names */
    uint32_t auto_name_seed; /* zs_name_seed(no outer, name_index) */
    uint32_t next_name_number;
    /* The description it was registered with: a copy whose name is `name`
       and whose members are dropped (the schema holds them); its
       properties and functions are the host's, kept by reference. */
    zs_class_desc desc;
    /* The defaults its objects start with, however they are made
       (zs_class_set_defaults; objects.c apply_defaults): an image of plain
       data copied over the properties, then values copied, each from
       default_values (laid out as an object: instance_size bytes) at its
       offset. */
    char *default_image;
    uint32_t default_image_size;
    uint32_t default_count;
    zs_type_member *default_members; /* [default_count] */
    char *default_values;            /* NULL when default_count is 0 */
};

struct zs_type {
    uint32_t id;
    uint32_t kind; /* zs_type_kind */
    uint32_t size;
    uint32_t align;
    uint32_t flags;          /* ZS_TYPE_* */
    uint32_t unit;           /* STRING: bytes per code unit */
    const zs_type *element;  /* ARRAY/SET/OPTIONAL element; MAP key */
    const zs_type *value;    /* MAP value */
    uint32_t entry_size;     /* ARRAY/SET/MAP: bytes per entry */
    uint32_t value_offset;   /* MAP: value in entry; OPTIONAL: the flag */
    zs_schema schema;        /* STRUCT: flattened */
    zs_type_member *members; /* STRUCT: direct members (hashing, equality) */
    uint32_t member_count;
    char *name;
};

/* A black value block (the managed side owns it). */
typedef struct zs_value_slot {
    void *value; /* NULL when free */
    const zs_type *type;
    uint32_t serial;
    uint32_t next_free;
} zs_value_slot;

/* ---- names -------------------------------------------------------------- */

typedef struct zs_name_entry {
    char *text;
    uint32_t length;
    uint32_t hash;
} zs_name_entry;

typedef struct zs_name_table {
    zs_name_entry *entries;
    uint32_t count;
    uint32_t capacity;
    uint32_t *buckets; /* open addressing: entry index + 1, 0 = empty */
    uint32_t bucket_count;
} zs_name_table;

/* ---- clusters ------------------------------------------------------------ */

/* A cluster: a root and the objects it gathered, marked as one unit. Its
   outgoing references are summarised so members are never scanned. */
typedef struct zs_cluster {
    uint32_t root;                  /* object index; ZS_NO_CLUSTER_ROOT when the slot is free */
    zs_u32_vec objects;             /* members, root excluded */
    zs_u32_vec referenced_clusters; /* clusters its objects reference */
    zs_ref_vec mutable_objects;     /* objects outside any cluster that it references */
    zs_u32_vec referenced_by;       /* clusters that reference it */
} zs_cluster;

#define ZS_NO_CLUSTER_ROOT UINT32_MAX

/* ---- marking -------------------------------------------------------------- */

/* A mark stack: the objects marked and waiting to be scanned (pointers, not
   indices: popping one then needs no item lookup). */
typedef struct zs_mark_stack {
    zs_object **data;
    uint32_t base;   /* parallel: entries below it were stolen (data[base..count) are queued) */
    uint32_t shared; /* parallel: thieves may take data[base..shared); data[shared..count) is
                        the owner's alone (see gc_mark.c, drain_impl) */
    uint32_t count;
    uint32_t capacity;
} zs_mark_stack;

/* The state of one marker (the collector's own thread, or a parallel
   worker). Counters are merged into rt->stats when marking ends. */
typedef struct zs_marker {
    zs_runtime *rt;
    zs_mark_stack *stack;  /* objects to scan */
    zs_u32_vec clusters;   /* cluster ids to mark (serial marker only) */
    bool parallel;         /* mark bits are claimed atomically */
    uint32_t limit;        /* entries the stack may hold (stress switch) */
    uint32_t step_objects; /* objects a budgeted drain may scan (0: no bound);
                                 zs_gc_step_bounded's max_objects, else the stress switch */
    bool overflow;         /* a push failed: rescan marked objects later */
    uint64_t scanned, marked, killed, clusters_marked, barrier_marks;
    struct zs_mark_pool *pool;    /* parallel: the workers' shared state */
    mtx_t *lock;                  /* parallel: guards the stack against thieves (gc_parallel.c) */
    uint32_t worker;              /* parallel: this marker's number */
    const uint32_t *idle_waiting; /* parallel: how many workers wait for work (a hint) */
    bool claim_by_filter;         /* parallel: ordinary objects are claimed through the mark filter
                                 (gc_mark.c, claims_by_filter); else through their flags */
    uint64_t filter_claims, filter_ors; /* parallel, claim_by_filter: objects claimed through
                                 the filter, and the atomic ORs that claimed them */
} zs_marker;

/* Marker threads at most (parallel marking). */
#define ZS_MAX_MARK_WORKERS 64u

/* A worker's stack lock and stack, alone on their cache lines (each worker
   takes its lock once per batch: sharing a line would bounce it between
   the cores at every batch). */
typedef struct zs_mark_slot {
    _Alignas(64) mtx_t lock;
    zs_mark_stack stack; /* worker 0's is the runtime's, moved here while marking */
    char pad[64];
} zs_mark_slot;

/* The shared state of a parallel mark's workers (gc_parallel.c runs them;
   gc_mark.c's drain hands work over and wakes an idle one). */
typedef struct zs_mark_pool {
    mtx_t lock; /* guards idle, done */
    cnd_t wake;
    uint32_t workers;
    uint32_t idle;
    bool done;
    uint32_t wanted; /* idle workers waiting: a hint for busy ones to wake one */
    zs_marker *markers;
    zs_mark_slot slots[ZS_MAX_MARK_WORKERS];
} zs_mark_pool;

/* ---- object slabs --------------------------------------------------------- */

/* Objects of up to ZS_SLAB_MAX_SIZE bytes are carved from 64-byte-aligned
   slabs (memory.c), one free list per 16-byte size class, instead of one
   malloc block each: a 64-byte object then fills exactly one cache line
   (malloc's 16-byte alignment and 16-byte chunk header make it straddle
   two), so marking reads one line per object, and malloc's per-chunk
   overhead goes. Memory-safety tools must see every object as its own block
   (a use after free inside a slab is invisible to them), so the slabs are
   compiled out, every object malloc'ed, under AddressSanitizer and with
   -DZS_NO_OBJECT_SLAB (the sanitizer and valgrind builds). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) /* clang's spelling of __SANITIZE_ADDRESS__ */
#define ZS_NO_OBJECT_SLAB 1
#endif
#endif
#if !defined(ZS_NO_OBJECT_SLAB) && !defined(__SANITIZE_ADDRESS__)
#define ZS_OBJECT_SLAB 1
#else
#define ZS_OBJECT_SLAB 0
#endif
#define ZS_SLAB_GRANULE 16u
#define ZS_SLAB_MAX_SIZE 512u
#define ZS_SLAB_CLASSES (ZS_SLAB_MAX_SIZE / ZS_SLAB_GRANULE)
/* A size class's first slab is ZS_SLAB_MIN_BYTES, each next one twice the
   last up to ZS_SLAB_MAX_BYTES (a small runtime stays small); slabs of the
   largest size are aligned to it and offered to the kernel as a transparent
   huge page (fewer TLB misses when marking a big heap). */
#define ZS_SLAB_MIN_BYTES (64u * 1024u)
#define ZS_SLAB_MAX_BYTES (2048u * 1024u)
#define ZS_SLAB_ALIGN 64u

/* One size class: freed objects (linked through their first word), then
   the untouched rest of its newest slab. */
typedef struct zs_slab_class {
    void *free;
    char *next;
    char *end;
    uint32_t slab_bytes; /* the size of its next slab (0: none yet) */
} zs_slab_class;

/* ---- the runtime -------------------------------------------------------- */

/* Everything one heap owns. Its members are grouped by subsystem, and each
   group says who owns it and what guards it (a member that differs says so
   itself), after nanobind's nb_internals.h:

   - ZS_LOCK: the runtime lock (lock.h). Every public function takes it
     (recursive: a destroy hook's calls take it again), so whoever holds it
     reads and writes these freely. The heap lets go of it only to call
     out, and a member below fences each such window: calls into the
     managed side and host functions (calls_word), the hand-over to the
     expiry handler (handing_over), the free handler (calls_word's
     ZS_CALLS_FREE_PENDING); the class resolver's (classes.c) needs none,
     as zs_find_class only looks again after it. The handlers are read
     under the lock and called after it is released (the destroy hook
     excepted: it runs with the lock held).
   - markers: during a parallel mark (gc_parallel.c) worker threads read
     what the collecting thread, which holds the lock for them, marks
     through: the object array, the clusters, the mark parity and filter.
     They write only item flags and mark-filter words (atomically, relaxed)
     and the killable references of objects they claimed (one claimer per
     object), and count into their own zs_marker, merged after they join.
   - atomic: read and written with __atomic builtins, from any thread.
   - set once: written by zs_runtime_new before the runtime is handed out,
     and never again.

   Nothing depends on the members' order or offsets (the runtime is
   calloc'ed and every access names its member); the lock comes first and
   the object array next, as every call reads them. */
struct zs_runtime {
    zs_lock lock; /* recursive; every public function holds it (lock.h). Its `depth` is
                     the owner's: depth 1 tells the hand-over and zs_runtime_free that
                     they may release it for a handler (expiry.c, runtime.c) */

    /* ---- objects and roots (objects.c): ZS_LOCK; markers read `items` and
       `high_water` ---- */
    zs_item *items;       /* max_objects items in one block (zeroed pages, so only the
                         slots handed out take memory); never moves. The pointer is set
                         once; the items are ZS_LOCK's (flags atomic while markers run) */
    uint32_t chunk_count; /* chunks of ZS_OBJECTS_PER_CHUNK items in use (each counted) */
    uint32_t max_objects; /* set once */
    uint32_t high_water;  /* slots ever handed out */
    uint32_t live_objects;
    zs_u32_vec free_slots;      /* LIFO: a freed slot is the next one reused */
    uint32_t *name_buckets;     /* by (outer, name): object index + 1, chained through hash_next */
    uint32_t name_bucket_count; /* 0 until the first lookup by name builds the index */
    zs_u32_vec root_list;       /* candidates: rooted, strong-ref'd, escaped permanent */
    bool disregard_open;        /* disregard-for-GC window (zs_close_disregard_for_gc) */
    uint32_t permanent_count;

    /* ---- names (names.c): ZS_LOCK ---- */
    zs_name_table names;

    /* ---- classes, types and reflection (classes.c, types.c, reflection.c):
       ZS_LOCK for the registries; a class or type, once registered, never
       changes, so its getters (zs_class_*, zs_type_*) take no lock ---- */
    zs_class **classes;
    uint32_t class_count;
    uint32_t class_capacity;
    zs_type **types;
    uint32_t type_count;
    uint32_t type_capacity;
    const zs_type *object_array_type; /* ZS_MEMBER_OBJECT_ARRAY members; made on first use */
    /* descriptions kept by reference (reflection.c) */
    zs_registered_struct *structs;
    uint32_t struct_count, struct_capacity;
    const zs_enum_desc **enums;
    uint32_t enum_count, enum_capacity;

    /* ---- black values (black_values.c) and the managed callables that delegate
       bindings reference (delegates.c): ZS_LOCK ---- */
    zs_value_slot *values;
    uint32_t value_capacity;
    uint32_t value_live;
    uint32_t value_free_head; /* index + 1; 0 = none */
    bool black_roots;         /* set once (not ZS_RUNTIME_BLACK_NOT_ROOTS) */
    uint32_t *callable_refs;
    uint32_t callable_capacity;
    zs_u32_vec released_callables;
    uint32_t broadcasts; /* broadcasts in progress (broadcast.c): the callables released meanwhile
                            are not handed to the managed side until the last one ends */

    /* ---- clusters (clusters.c): ZS_LOCK; markers read `clusters` ---- */
    zs_cluster *clusters;
    uint32_t cluster_capacity;
    uint32_t live_clusters;
    zs_u32_vec free_clusters;
    bool cluster_oom;          /* a dissolution could not queue a referencing cluster */
    uint32_t min_cluster_size; /* set once */

    /* ---- the collector, across phases (gc_cycle.c, which drives gc_mark.c,
       gc_gather.c and gc_purge.c): ZS_LOCK ---- */
    zs_gc_phase phase;       /* read by the write barrier's inline test at every store */
    bool collecting;         /* a mark or gather step is running (with the lock held): a
                                collection entered again meanwhile is refused */
    zs_gc_stats stats;       /* markers count into their own zs_marker, merged after */
    uint64_t freed_unshared; /* objects zs_conjugates_dropped destroyed since the cycle
                                began (zs_gc_stats.objects_freed_unshared) */

    /* ---- marking (ZS_GC_MARKING, and a full collection's mark; gc_mark.c,
       gc_parallel.c): ZS_LOCK; markers read mark_parity and mark_filter ---- */
    uint32_t mark_parity;       /* ZS_ITEM_MARK or 0 */
    zs_mark_stack mark_stack;   /* transient work: allocated uncounted (see gc_mark.c); the
                                      write barrier pushes onto it between incremental steps;
                                      moved to worker 0 during a parallel mark */
    uint64_t *mark_filter;      /* 1 bit per slot of max_objects (uncounted, see gc_mark.c);
                                      NULL when it could not be allocated (marking then reads
                                      every item). The pointer is ZS_LOCK's; its bits are
                                      set by markers atomically */
    bool mark_overflow;         /* a push onto mark_stack failed: rescan before gathering */
    uint32_t filter_claims_off; /* parallel marks left that claim through item flags: the
                                      last one through the filter claimed too few objects per
                                      atomic OR (read and written by the collecting thread) */
    uint32_t mark_threads;      /* set once: full-collection marker threads */

    /* ---- gathering and purging (ZS_GC_GATHERING, ZS_GC_PURGE_PENDING;
       gc_gather.c, gc_purge.c): ZS_LOCK ---- */
    uint32_t gather_cursor; /* incremental gather progress */
    zs_u32_vec dying;       /* gathered unreachable, waiting for purge */
    uint32_t dying_cursor;  /* purge progress in dying */
    bool dying_unhashed;    /* the dying objects are already out of the name index */
    bool tearing_down;      /* zs_gc_destroy_everything: objects are freed without unlinking,
                               so a lookup finds nothing and builds no index */
    bool in_destroy_hook;   /* the destroy hook runs (with the lock held): mutation refused */

    /* ---- the managed side's expiry (expiry.c): ZS_LOCK, but for the
       dying word ---- */
    zs_ref_vec expiring;   /* dying objects with conjugates, for the managed side */
    uint32_t handing_over; /* hand-overs to expiry_handler in progress (the lock released
                              meanwhile): the objects handed over are off `expiring` but
                              their conjugates may still be live, so no purge runs and the
                              dying word stays set */
    uint32_t dying_word;   /* zs_dying_word: (phase GATHERING, expiring not empty or a
                              hand-over running). Atomic: stored under the lock by
                              zs_publish_dying whenever one changes, read by the managed
                              side with no lock */

    /* ---- calls and handlers (calls.c, expiry.c, runtime.c, classes.c):
       ZS_LOCK, set by their zs_set_* and read under the lock;
       each is called after the lock is released, but the destroy hook ---- */
    uint32_t calls_word;          /* calls in progress (ZS_CALLS_COUNT) | ZS_CALLS_FREE_PENDING
                          (zs_runtime_free ran during a call: the last call frees).
                          Atomic: counted in under the lock, out without it (calls.c) */
    zs_destroy_hook destroy_hook; /* called with the lock held (in_destroy_hook) */
    void *destroy_hook_user;
    zs_call_handler call_handler;                 /* the managed side's entry point (calls.c) */
    zs_managed_call_handler managed_call_handler; /* or this one (never both set) */
    void *call_handler_user;                      /* the `user` of either */
    zs_managed_listener_handler listener_handler; /* delegates' listeners (broadcast.c) */
    void *listener_handler_user;
    uint32_t listener_generation;     /* +1 at every zs_set_managed_listener_handler. Atomic:
                                     a broadcast reads it with no lock to know that the
                                     handler it read under the lock is still the one */
    zs_expiry_handler expiry_handler; /* the managed side's expiry (expiry.c) */
    void *expiry_handler_user;
    zs_free_handler free_handler; /* the managed side lets go first (runtime.c) */
    void *free_handler_user;      /* read once more after the lock is released to call the handler
                                (runtime.c, zs_runtime_free) */
    zs_class_resolver class_resolver; /* zs_find_class's fallback (classes.c) */
    void *class_resolver_user;
    zs_cleanup *cleanups; /* run by zs_runtime_free, last first (runtime.c) */
    uint32_t cleanup_count, cleanup_capacity;

    /* ---- the tick manager (ticks.c): ZS_LOCK; NULL until the first
       registration or frame ---- */
    struct zs_ticks *ticks;

    /* ---- memory (memory.c): ZS_LOCK (no marker allocates: its stacks are
       plain, uncounted realloc) ---- */
    /* object slabs (ZS_OBJECT_SLAB): the allocator's own memory, like
       malloc's arena it is not counted; the objects in it are, one block each */
    zs_slab_class slab_classes[ZS_SLAB_CLASSES];
    void **slabs;
    uint32_t slab_count;
    uint32_t slab_capacity;
    /* native memory accounting */
    uint64_t live_blocks;
    uint64_t live_bytes;
    uint64_t peak_bytes;
    /* the allocation limit: stress and fault injection (zs_debug_set) */
    uint64_t alloc_limit;          /* live native bytes allowed (0: no limit) */
    bool strict_alloc_limit;       /* test: alloc_limit applies to the collector's bookkeeping
                                      too */
    uint32_t collector_allocating; /* > 0: the collector's own bookkeeping ignores alloc_limit */

    /* ---- debug and stress switches (debug.c, zsharp_debug.h): ZS_LOCK,
       set by zs_debug_set ---- */
    bool barrier_disabled;       /* test-only */
    bool check_marks;            /* stress: verify each mark with a simple second one */
    bool poison_freed;           /* stress: clobber freed memory */
    uint32_t step_objects;       /* stress: objects per incremental step (0: no limit) */
    uint32_t mark_stack_limit;   /* stress: entries per mark stack (0: no limit) */
    uint64_t parallel_threshold; /* live objects before a full mark goes parallel (65,536
                                    from zs_runtime_new) */
    uint64_t check_failures;     /* found by check_marks (gc_mark.c) */
};

/* ==========================================================================
 * Inline helpers every file uses (defined here)
 * ========================================================================== */

/* The item of an index below high_water (no checks). */
static inline zs_item *zs_item_at(const zs_runtime *rt, uint32_t index) {
    assert(index < rt->high_water);
    return &rt->items[index];
}

/* Whether an item is reachable in the current (or last) mark. A cluster is
   marked as one unit through its root's mark bit (Unreal's way): members'
   own bits are not kept up to date while they are in a cluster. */
static inline bool zs_item_reachable(const zs_runtime *rt, const zs_item *it) {
    /* Parallel markers call this while others claim cluster roots with
       atomic read-modify-writes of their flags (gc_mark.c, claim_flags):
       relaxed atomic loads (plain loads on x86-64) keep those reads
       race-free. A stale "unmarked" only sends the caller to the atomic
       claim, which decides. */
    if (it->cluster_index >= 0 &&
        !(__atomic_load_n(&it->flags, __ATOMIC_RELAXED) & ZS_ITEM_CLUSTER_ROOT))
        it = zs_item_at(rt, rt->clusters[it->cluster_index].root);
    return ((__atomic_load_n(&it->flags, __ATOMIC_RELAXED) ^ rt->mark_parity) & ZS_ITEM_MARK) == 0;
}

/* Whether an item is dying: gathered as unreachable, or (once marking is
   complete) unmarked and so doomed before the gather step reaches it. Every
   write into such an object, and every new reference to it, is refused
   with ZS_E_DYING. */
static inline bool zs_item_dying(const zs_runtime *rt, const zs_item *it) {
    return (it->flags & (ZS_ITEM_DYING | ZS_ITEM_DESTROYED)) ||
           (rt->phase == ZS_GC_GATHERING && !zs_item_reachable(rt, it) &&
            !(it->flags & ZS_ITEM_PERMANENT));
}

/* Whether `user` is the managed side that owns the expiry protocol now:
   no expiry handler is set, or it was set with `user`; with the lock held.
   Only that side may replace or remove the handler (expiry.c) or say its
   conjugates were dropped (objects.c): while a handler is set, its proxies are
   known by the conjugate flag alone, and anyone else clearing it would
   leave a proxy behind its object. */
static inline bool zs_expiry_owner(const zs_runtime *rt, const void *user) {
    return rt->expiry_handler == NULL || user == rt->expiry_handler_user;
}

/* calls_word: the count of calls in progress, and the flag of a deferred
   zs_runtime_free (calls.c, runtime.c). */
#define ZS_CALLS_FREE_PENDING 0x80000000u
#define ZS_CALLS_COUNT(word) ((word) & ~ZS_CALLS_FREE_PENDING)

/* Publish whether objects may be dying whose conjugates the managed side
   has not expired yet (zs_dying_word); with the lock held, after every
   change of the phase or of the expiring list's length. Atomic: the
   managed side reads the word with no lock. */
static inline void zs_publish_dying(zs_runtime *rt) {
    uint32_t dying = rt->phase == ZS_GC_GATHERING || rt->expiring.count > 0 || rt->handing_over > 0;
    __atomic_store_n(&rt->dying_word, dying, __ATOMIC_RELAXED);
}

/* The item a handle names, or NULL when it is null, out of range or stale. */
static inline zs_item *zs_item_of(const zs_runtime *rt, zs_ref ref) {
    uint32_t index = ZS_REF_INDEX(ref);
    if (ref == ZS_NULL_REF || index >= rt->high_water) return NULL;
    zs_item *it = zs_item_at(rt, index);
    if (it->object == NULL || it->serial != ZS_REF_SERIAL(ref)) return NULL;
    return it;
}

/* The one rule for an object a call names: its live item, or NULL
   with *status set to ZS_E_STALE (freed, or its slot reused) or ZS_E_DYING
   (zs_item_dying: found dead, destruction pending), *status untouched on
   success. Every store, call, cluster and chain query asks this, so a
   dying object is refused the same way wherever it is named. */
static inline zs_item *zs_usable_item(const zs_runtime *rt, zs_ref ref, zs_status *status) {
    zs_item *it = zs_item_of(rt, ref);
    if (it == NULL) {
        *status = ZS_E_STALE;
        return NULL;
    }
    if (zs_item_dying(rt, it)) {
        *status = ZS_E_DYING;
        return NULL;
    }
    return it;
}

/* Whether a write into owner's memory is allowed now: mutation allowed
   (ZS_E_BUSY in a destroy hook), owner null or live (ZS_E_STALE) and not
   dying (ZS_E_DYING). The owner part of zs_begin_store (value_stores.c),
   and all that a delegate binding's write asks (delegates.c). */
static inline zs_status zs_check_owner(const zs_runtime *rt, zs_ref owner) {
    if (rt->in_destroy_hook) return ZS_E_BUSY;
    if (owner == ZS_NULL_REF) return ZS_OK;
    zs_status status = ZS_OK;
    zs_usable_item(rt, owner, &status);
    return status;
}

/* The handle of a live item. */
static inline zs_ref zs_item_ref(const zs_item *it) {
    return ZS_MAKE_REF(it->object->index, it->serial);
}

/* The handle of a live item, handed to a caller that did not name the
   object: from now on the object may be reachable from anywhere, so
   zs_conjugates_dropped never destroys it early (objects.c, "Sharing"). */
static inline zs_ref zs_item_share(zs_item *it) {
    it->flags |= ZS_ITEM_SHARED;
    return zs_item_ref(it);
}

/* Every public function holds the runtime lock (recursive: a destroy hook
   may call read-only API functions; mutating ones return ZS_E_BUSY there). */
#define ZS_LOCK(rt) zs_lock_take(&(rt)->lock)
#define ZS_UNLOCK(rt) zs_lock_give(&(rt)->lock)

/* The mark filter, valid while marking: a set bit promises that a reference
   to that slot needs nothing from the marker (the target is marked, or
   claimed by a parallel marker that marks and scans it, and not garbage;
   or permanent; and not a cluster member), so the marker skips it
   without reading the item (a cache miss on a big heap). A clear bit
   promises nothing. Bits are only set by the marker and cleared when a cycle
   starts and when an object is marked as garbage. */
static inline bool zs_filter_test(const uint64_t *filter, uint32_t index) {
    return (__atomic_load_n(&filter[index >> 6], __ATOMIC_RELAXED) >> (index & 63)) & 1u;
}

/* Set a filter bit from a parallel marker that claims ordinary objects
   through their filter bits (gc_mark.c, claims_by_filter): atomically, as a
   bit lost to a racing write could let a second marker claim the same
   object. */
static inline void zs_filter_set(uint64_t *filter, uint32_t index) {
    __atomic_fetch_or(&filter[index >> 6], 1ull << (index & 63), __ATOMIC_RELAXED);
}

/* Set a filter bit from a parallel marker that claims through item flags:
   a racing write may lose the bit, which is harmless then (a clear bit
   promises nothing), and no locked instruction is needed. */
static inline void zs_filter_set_racy(uint64_t *filter, uint32_t index) {
    uint64_t word = __atomic_load_n(&filter[index >> 6], __ATOMIC_RELAXED);
    __atomic_store_n(&filter[index >> 6], word | (1ull << (index & 63)), __ATOMIC_RELAXED);
}

/* Clear a filter bit (a no-op when the filter could not be allocated). */
static inline void zs_filter_clear(uint64_t *filter, uint32_t index) {
    if (filter != NULL) filter[index >> 6] &= ~(1ull << (index & 63));
}

/* ==========================================================================
 * Functions shared between files, by layer from the bottom up (the rule and
 * the map: docs/native.md; tools/check_native_layers.py checks that a file
 * uses only its own layer and the layers below). One section per file that
 * shares any; the files of the top layer (runtime.c, api.c, debug.c,
 * verify.c, chains.c) share none, and calls.c's functions are public but
 * for the call count's.
 * ========================================================================== */

/* ==== layer 0, base ====================================================== */

/* ---- memory.c: counted allocation, object slabs, vectors, clock -------- */

/* Counted allocation: every native block the runtime owns goes through these. */
void *zs_alloc(zs_runtime *rt, size_t size);
void *zs_realloc(zs_runtime *rt, void *block, size_t old_size, size_t new_size);
void zs_free(zs_runtime *rt, void *block, size_t size);
/* Count memory the runtime carves out of a block it already holds as one
   more block (false: the injected allocation limit refuses it), and give
   it back. */
bool zs_count_block(zs_runtime *rt, size_t size);
void zs_uncount_block(zs_runtime *rt, size_t size);
/* An object's zeroed block (from a slab when ZS_OBJECT_SLAB), counted as one
   block like zs_alloc's; zs_object_free returns it. */
void *zs_object_alloc(zs_runtime *rt, size_t size);
void zs_object_free(zs_runtime *rt, void *block, size_t size);
/* Free every slab (all objects are gone). */
void zs_slabs_release(zs_runtime *rt);
bool zs_u32_push(zs_runtime *rt, zs_u32_vec *vec, uint32_t value);
void zs_u32_release(zs_runtime *rt, zs_u32_vec *vec);
bool zs_ref_push(zs_runtime *rt, zs_ref_vec *vec, zs_ref value);
void zs_ref_release(zs_runtime *rt, zs_ref_vec *vec);
/* Hard cap on container entries: keeps byte counts far from overflow. */
#define ZS_MAX_ENTRIES (1u << 30)
/* Grow entry storage (an array's, a hash's or a binding list's) to hold at
   least `wanted` entries, new space zeroed; false beyond ZS_MAX_ENTRIES or
   when out of memory. */
bool zs_entries_reserve(zs_runtime *rt, zs_array *array, uint32_t entry_size, uint32_t wanted);
/* A monotonic clock, for the collector's time budgets. */
uint64_t zs_now_ns(void);

/* ---- names.c: the name table ------------------------------------------- */

void zs_names_release(zs_runtime *rt);
zs_status zs_name_intern_locked(zs_runtime *rt, const char *utf8, size_t length, bool split_number,
                                uint32_t *out_index, uint32_t *out_number);

/* ==== layer 1, descriptions ================================================ */

/* ---- types.c: the type registry, flattened schemas -------------------- */

/* Whether `type` is one of this runtime's registered types. */
static inline bool zs_type_valid(const zs_runtime *rt, const zs_type *type) {
    return type != NULL && type->id < rt->type_count && rt->types[type->id] == type;
}
/* Append a member's flattened words (nested structs inlined) at base. */
bool zs_schema_add(zs_runtime *rt, zs_schema *schema, const zs_type *type, uint32_t base);
/* Sort strong words first and count them; false when out of memory. */
void zs_schema_finish(zs_schema *schema);
void zs_schema_release(zs_runtime *rt, zs_schema *schema);
bool zs_schema_copy(zs_runtime *rt, zs_schema *dst, const zs_schema *src);
void zs_types_release(zs_runtime *rt);

/* ---- reflection.c: structs and enums, description checks --------------- */

/* The member a reflected property or struct member stands for (its native
   type's member kind); false for plain data. */
bool zs_property_member(const zs_property_desc *property, zs_member *out);
/* Whether one of the first `count` rows of a description list (properties,
   parameters, functions, enum items: each begins with its name, `stride`
   bytes apart) is named `name`. Quadratic over a list, as descriptions are
   small and registered once. */
bool zs_name_listed(const void *rows, size_t stride, uint32_t count, const char *name);
/* Whether rows[i]'s name was given already by an earlier row. */
#define ZS_NAME_LISTED_BEFORE(rows, i) zs_name_listed((rows), sizeof *(rows), (i), (rows)[i].name)
/* Forget the registered structs and enums. */
void zs_reflection_release(zs_runtime *rt);

/* ---- classes.c: class registration ------------------------------------- */

void zs_classes_release(zs_runtime *rt);
/* The schema word at a member offset, or 0 when there is none. */
uint32_t zs_class_member_op(const zs_class *cls, uint32_t offset);
/* The value type of a VALUE member at an offset, or NULL. */
const zs_type *zs_class_member_type(const zs_class *cls, uint32_t offset);

/* ==== layer 2, values ====================================================== */

/* ---- value_ops.c: destroy, copy, equality, hashing, references --------- */

/* Free what a value owns and zero it (no barrier, no cluster logic). */
void zs_value_destroy(zs_runtime *rt, const zs_type *type, void *value);
/* Free what every VALUE member of a schema laid out at base owns, leaving
   the bytes as they are: the memory is freed or zeroed whole next. */
void zs_schema_destroy(zs_runtime *rt, const zs_schema *schema, char *base);
/* Deep-copy a value into an empty one; false (dst left empty) when out of memory. */
bool zs_value_copy(zs_runtime *rt, const zs_type *type, void *dst, const void *src);
/* Free every class's defaults (objects.c: zs_class_set_defaults). */
void zs_class_defaults_release(zs_runtime *rt);
/* Call fn on every strong reference slot inside a value. */
void zs_value_for_each_ref(const zs_type *type, void *value, bool killable,
                           void (*fn)(void *context, zs_ref *slot, bool killable), void *context);
/* Call fn on every strong reference slot of entries [first, first + count)
   of a container of `type` (an array's storage or a hash's entries). */
void zs_entries_for_each_ref(const zs_type *type, zs_array *entries, uint32_t first, uint32_t count,
                             void (*fn)(void *context, zs_ref *slot, bool killable), void *context);

/* ---- hash_index.c: the bucket index of sets and maps ------------------- */

/* Entry `index` of a set or map. */
static inline char *zs_hash_entry(const zs_type *type, const zs_hash *hash, uint32_t index) {
    return (char *)hash->entries.data + (size_t)index * type->entry_size;
}
/* The bucket holding `key`, or the empty bucket where it would go (*found
   says which); the index has buckets. */
uint32_t zs_hash_probe(zs_runtime *rt, const zs_type *type, const zs_hash *hash, const void *key,
                       bool *found);
/* Rebuild the index with `bucket_count` buckets (a power of two, more than
   twice the entries); false, the index unchanged, when out of memory. */
bool zs_hash_rehash(zs_runtime *rt, const zs_type *type, zs_hash *hash, uint32_t bucket_count);
/* Re-index a set or map whose keys changed, dropping duplicate entries. */
void zs_hash_reindex(zs_runtime *rt, const zs_type *type, zs_hash *hash);

/* ---- delegates.c: delegate bindings and the callables they hold ------- */

/* Release the callable of a binding being destroyed, and zero the binding. */
void zs_binding_drop(zs_runtime *rt, zs_binding *binding);
/* Copy a single-cast binding, retaining its callable; false when out of memory. */
bool zs_binding_copy(zs_runtime *rt, zs_binding *dst, const zs_binding *src);
/* Destroy a binding list (MULTICAST, or a SPARSE delegate's list): release
   every binding and free the storage. */
void zs_bindings_destroy(zs_runtime *rt, zs_array *array);
/* Copy a binding list into an empty one; on failure dst holds what was
   copied so far, for the caller to destroy. */
bool zs_bindings_copy(zs_runtime *rt, zs_array *dst, const zs_array *src);

/* ---- black_values.c: values the managed side owns ---------------------- */

void zs_values_release(zs_runtime *rt);

/* ==== layer 3, reachability =============================================== */

/* ---- gc_mark.c: marking, the write barrier, check-mark ----------------- */

void zs_marker_init(zs_marker *m, zs_runtime *rt, zs_mark_stack *stack);
/* Fold a marker's counters into the cycle's statistics. */
void zs_marker_merge(zs_runtime *rt, zs_marker *m);
void zs_mark_visit(zs_marker *m, zs_ref *slot, bool killable);
void zs_mark_ref(zs_marker *m, zs_ref ref);
void zs_mark_scan(zs_marker *m, zs_object *object);
/* Follow every strong reference inside a value (marker-side, recursive by
   type depth only). */
void zs_mark_value(zs_marker *m, const zs_type *type, void *value, bool killable);
/* Set the current mark on a cluster root's item; true when this call set it. */
bool zs_mark_claim(zs_marker *m, zs_item *it);
bool zs_mark_push(zs_marker *m, uint32_t index);
/* Queue an object for scanning; false (and overflow set) when it cannot. */
bool zs_mark_push_object(zs_marker *m, zs_object *object);
bool zs_mark_push_cluster(zs_marker *m, uint32_t cluster);
/* Free a mark stack's storage. */
void zs_mark_stack_release(zs_mark_stack *stack);
/* Scan until the stack and queues are empty (true) or the deadline passes
   (false; queued work is put back on the stack). deadline_ns 0: no limit. */
bool zs_mark_drain(zs_marker *m, uint64_t deadline_ns);
/* Start a mark: flip the parity, reset the filter, mark the roots (the
   root list and, when they are roots, the black values). */
void zs_mark_begin(zs_runtime *rt);
/* Stress (ZS_DEBUG_CHECK_MARKS): mark again, simply, from the same roots,
   and count in rt->check_failures what the real mark left unmarked. */
void zs_check_mark(zs_runtime *rt);
/* Queue a marked object for scanning (a dissolved cluster's members). */
void zs_gc_requeue(zs_runtime *rt, uint32_t index);
/* Write barrier, out of line: mark and queue a newly stored target. */
void zs_gc_barrier_slow(zs_runtime *rt, zs_item *target);
/* Write barrier (its inline fast path, defined here): while a mark is
   pending, mark a newly stored target. With no mark pending it is one load
   and one compare, inlined at every store (ZS_BENCH_NO_BARRIER compiles it
   out: the benchmarks' barrier-free build). */
static inline void zs_gc_barrier(zs_runtime *rt, zs_item *target) {
#ifdef ZS_BENCH_NO_BARRIER
    (void)rt;
    (void)target;
#else
    if (__builtin_expect(rt->phase == ZS_GC_MARKING, 0)) zs_gc_barrier_slow(rt, target);
#endif
}

/* ---- gc_parallel.c: parallel marking ------------------------------------ */

/* Drain the marker's stack with worker threads; false when not worth it. */
bool zs_mark_parallel(zs_runtime *rt, zs_marker *m);
/* Marker threads a runtime uses by default: one per online core. */
uint32_t zs_default_mark_threads(void);

/* ---- clusters.c: GC clusters --------------------------------------------- */

void zs_clusters_release(zs_runtime *rt);
void zs_cluster_dissolve(zs_runtime *rt, int32_t cluster);
/* Dissolve clusters whose mutable objects are garbage; run before marking. */
void zs_clusters_dissolve_stale(zs_runtime *rt);
/* Runtime teardown: drop every cluster before any object is destroyed. */
void zs_clusters_abandon_all(zs_runtime *rt);
/* A dying cluster root releases its cluster record (members die with it). */
void zs_cluster_release_dying(zs_runtime *rt, int32_t cluster);

/* ---- gc_gather.c: the unreachable listed as dying ------------------------ */

/* Gather the unmarked objects from the cursor on, until the deadline (0:
   none); true when the pass is complete (phase then PURGE_PENDING or IDLE). */
bool zs_gather(zs_runtime *rt, uint64_t deadline_ns);

/* ==== layer 4, objects ===================================================== */

/* ---- objects.c: the object array, the name index, create and destroy --- */

zs_status zs_heap_init(zs_runtime *rt, uint32_t max_objects);
void zs_heap_release(zs_runtime *rt);
zs_status zs_slot_alloc(zs_runtime *rt, uint32_t *out_index);
void zs_slot_free(zs_runtime *rt, uint32_t index);
bool zs_root_list_add(zs_runtime *rt, zs_item *it);
/* A permanent holder that now references a collectable target becomes a
   root (escaped); false when out of memory for the root list. */
bool zs_note_escape(zs_runtime *rt, zs_item *holder, const zs_item *target);
/* Run the destroy hook (if any) on an object with mutation locked out
   (gc_purge.c, and objects.c for objects freed at once). */
static inline void zs_call_destroy_hook(zs_runtime *rt, zs_item *it, zs_destroy_phase phase) {
    if (rt->destroy_hook == NULL) return;
    rt->in_destroy_hook = true;
    rt->destroy_hook(rt->destroy_hook_user, rt, it->object, phase);
    rt->in_destroy_hook = false;
}
/* BeginDestroy, and the flag that says it ran: FinishDestroy comes only
   after it, and a purge resumed later does not run it twice. */
static inline void zs_begin_destroy(zs_runtime *rt, zs_item *it) {
    zs_call_destroy_hook(rt, it, ZS_BEGIN_DESTROY);
    it->flags |= ZS_ITEM_BEGUN_DESTROY;
}
/* Free an object and its slot; unhash false: already out of the name index. */
void zs_object_destroy(zs_runtime *rt, zs_item *it, bool unhash);
/* Before a large purge: take every DYING object out of the name index in
   one sequential relink (instead of one chain walk per freed object). */
void zs_name_index_drop_dying(zs_runtime *rt);
/* Empty the name index (runtime teardown: every object is about to die;
   FinishDestroy hooks then find no object by name). */
void zs_name_index_clear(zs_runtime *rt);
/* What is wrong with the name index (for zs_heap_verify), or NULL: every
   link names a live object that hashes to its bucket, and none twice. */
const char *zs_name_index_fault(zs_runtime *rt, uint32_t *out_index);

/* ==== layer 5, calls out =================================================== */

/* ---- calls.c: calls into the managed side, the count of calls ---------- */

/* Count a call in progress in, with the lock held. */
void zs_call_enter(zs_runtime *rt);
/* Count it out, with no lock; frees the runtime if zs_runtime_free ran
   during the calls and this was the last one: rt may be gone after. */
void zs_call_leave(zs_runtime *rt);
/* Whether zs_runtime_free ran during the calls in progress (lock held). */
bool zs_free_pending(const zs_runtime *rt);

/* ---- expiry.c: the hand-over to the managed side's expiry handler ------ */

/* With the lock held once by this thread: hand the expiring list, up to
   `limit` objects, to the managed side's expiry handler (the lock released
   meanwhile, the hand-over counted as a call in progress: *counted is set
   and the caller calls zs_call_leave after its last unlock). ZS_OK when
   nothing is left to hand over; ZS_E_EXPIRY_PENDING when objects wait and
   no handler can take them now (none set, or the lock is held more than
   once); ZS_E_STALE when zs_runtime_free ran meanwhile (the caller stops:
   the runtime is freed by its zs_call_leave). *out_taken (may
   be NULL) counts the objects handed over. */
zs_status zs_gc_hand_over(zs_runtime *rt, uint32_t limit, bool *counted, uint32_t *out_taken);
/* Whether the expiry handler can be called now. */
bool zs_can_hand_over(const zs_runtime *rt);
/* Hand one item that has a conjugate, not on the expiring list, to the
   expiry handler (zs_can_hand_over said yes: zs_destroy_object); see
   zs_gc_hand_over for the lock, *counted and ZS_E_STALE. */
zs_status zs_hand_over_item(zs_runtime *rt, zs_ref ref, zs_item *it, bool *counted);

/* ==== layer 6, stores ====================================================== */

/* ---- value_stores.c: the checks and effects of a value write ----------- */

/* Checks shared by every mutating value and container call (no heap change
   when one fails): mutation allowed, type registered and of kind (0: any),
   owner (if any) live and not dying (zs_check_owner); a store into a
   clustered owner dissolves its cluster. */
zs_status zs_begin_store(zs_runtime *rt, zs_ref owner, const zs_type *type, uint32_t kind);
/* Mark, through the write barrier, every reference inside a value. */
void zs_value_barrier(zs_runtime *rt, const zs_type *type, const void *value);
/* Mark, through the write barrier, the references in entries [first,
   first + count) of a container of `type` (an array's storage or a hash's
   entries): a store barriers the slots it wrote, never the whole container,
   so a write during a mark costs what it writes (entries moved within the
   same container gain no new referent: the barrier is an insertion one). */
void zs_entries_barrier(zs_runtime *rt, const zs_type *type, zs_array *entries, uint32_t first,
                        uint32_t count);
/* After references of `type` were written into owner's memory: a permanent
   owner escapes. */
void zs_escape_owner(zs_runtime *rt, zs_ref owner, const zs_type *type);

/* ==== layer 7, collection ================================================== */

/* ---- gc_purge.c: destroying the dying ------------------------------------ */

/* Destroy the dying objects (BeginDestroy for all first), with the lock
   held, within a time budget (0: none) and up to max_objects (0: all);
   *out_done when none is left. ZS_E_EXPIRY_PENDING while the expiring list
   is not empty, ZS_E_BUSY during a mark, gather, hand-over or destroy hook. */
zs_status zs_gc_purge_locked(zs_runtime *rt, uint64_t budget_ns, uint32_t max_objects,
                             bool *out_done);
/* Runtime teardown: every object gets both hook phases and is freed. */
void zs_gc_destroy_everything(zs_runtime *rt);

/* ---- gc_cycle.c: the phases and the collection calls --------------------- */

/* Free the collector's lists and transient work memory (runtime teardown). */
void zs_gc_release(zs_runtime *rt);

/* ==== layer 8, runtime and tools =========================================== */

/* ---- ticks.c: the tick manager ------------------------------------------- */

/* Free the tick manager's records (zs_runtime_free, after every object). */
void zs_ticks_release(zs_runtime *rt);

#endif /* ZSHARP_INTERNAL_H */
