/*
 * runtime.c -- runtime lifetime, counted native allocation, small vectors.
 */
#define _DEFAULT_SOURCE /* madvise */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#if ZS_OBJECT_SLAB
#include <sys/mman.h>
#endif

/* ======================================================================
 * Status codes
 * ====================================================================== */

/* The one table of status texts: zsharp.h documents the codes, and the
   Python package shows these texts after its own context ("insert: ..."),
   so each must read well to a Python user who never saw the C API. */
const char *zs_status_message(zs_status status) {
    switch (status) {
    case ZS_OK:
        return "ok";
    case ZS_E_NOMEM:
        return "native allocation failed (out of memory)";
    case ZS_E_CAPACITY:
        return "the object array is full (max_objects reached)";
    case ZS_E_STALE:
        return "the object was destroyed (its handle is stale)";
    case ZS_E_INVALID:
        return "invalid argument (null, out of range, or of the wrong class)";
    case ZS_E_BUSY:
        return "the heap cannot be changed now (inside a destroy hook or a collection)";
    case ZS_E_EXPIRY_PENDING:
        return "purge refused: dying objects still have conjugates to expire";
    case ZS_E_DYING:
        return "the object is unreachable and about to be destroyed";
    case ZS_E_CORRUPT:
        return "heap verification failed: the native heap is inconsistent";
    case ZS_E_CALL_FAILED:
        return "the Python (managed) function called from native code raised an exception";
    }
    return "unknown status";
}

/* ======================================================================
 * Counted allocation: the runtime knows every block it owns, so a leak is
 * a non-zero count after zs_runtime_free's final sweep.
 * ====================================================================== */

static void account(zs_runtime *rt, int64_t blocks, int64_t bytes) {
    rt->live_blocks = (uint64_t)((int64_t)rt->live_blocks + blocks);
    rt->live_bytes = (uint64_t)((int64_t)rt->live_bytes + bytes);
    if (rt->live_bytes > rt->peak_bytes) rt->peak_bytes = rt->live_bytes;
}

/* Would an allocation of size bytes break the injected limit? */
static bool over_limit(const zs_runtime *rt, size_t size) {
    /* The injected limit models the program running out of memory; the
       collector's bookkeeping (dying and expiring lists, free list) is
       exempt, so a collection can still free memory under it (unless the
       strict test switch models a real out-of-memory, which exempts nothing). */
    return rt->alloc_limit != 0 && (rt->collector_allocating == 0 || rt->strict_alloc_limit) &&
           rt->live_bytes + size > rt->alloc_limit;
}

/* Count carved-out memory as a block, unless the injected limit refuses it. */
bool zs_count_block(zs_runtime *rt, size_t size) {
    if (over_limit(rt, size)) return false;
    account(rt, 1, (int64_t)size);
    return true;
}

/* Uncount memory counted by zs_count_block. */
void zs_uncount_block(zs_runtime *rt, size_t size) { account(rt, -1, -(int64_t)size); }

void *zs_alloc(zs_runtime *rt, size_t size) {
    if (over_limit(rt, size)) return NULL;
    void *block = calloc(1, size);
    if (block != NULL) account(rt, 1, (int64_t)size);
    return block;
}

void *zs_realloc(zs_runtime *rt, void *block, size_t old_size, size_t new_size) {
    if (new_size > old_size && over_limit(rt, new_size - old_size)) return NULL;
    void *grown = realloc(block, new_size);
    if (grown == NULL) return NULL;
    if (new_size > old_size) memset((char *)grown + old_size, 0, new_size - old_size);
    account(rt, block == NULL ? 1 : 0, (int64_t)new_size - (int64_t)old_size);
    return grown;
}

void zs_free(zs_runtime *rt, void *block, size_t size) {
    if (block == NULL) return;
    if (rt->poison_freed) memset(block, 0xDD, size);
    free(block);
    account(rt, -1, -(int64_t)size);
}

/* The size class of an object size (1..ZS_SLAB_MAX_SIZE bytes). */
static inline uint32_t slab_class_of(size_t size) {
    assert(size > 0 && size <= ZS_SLAB_MAX_SIZE);
    return (uint32_t)((size + ZS_SLAB_GRANULE - 1) / ZS_SLAB_GRANULE - 1);
}

/* Take a block of a size class: a freed one, else the next of the newest
   slab, else from a new slab; NULL when out of memory. Slabs are plain
   (uncounted) allocations, freed with the runtime. */
static void *slab_take(zs_runtime *rt, uint32_t class_index) {
    zs_slab_class *c = &rt->slab_classes[class_index];
    const size_t stride = ((size_t)class_index + 1) * ZS_SLAB_GRANULE;
    if (c->free != NULL) {
        void *block = c->free;
        memcpy(&c->free, block, sizeof(void *));
        return block;
    }
    if (c->next == NULL || (size_t)(c->end - c->next) < stride) {
        if (rt->slab_count == rt->slab_capacity) {
            uint32_t capacity = rt->slab_capacity ? rt->slab_capacity * 2 : 16;
            void **grown = capacity > rt->slab_capacity
                               ? realloc(rt->slabs, (size_t)capacity * sizeof(void *))
                               : NULL;
            if (grown == NULL) return NULL;
            rt->slabs = grown;
            rt->slab_capacity = capacity;
        }
        size_t bytes = c->slab_bytes ? c->slab_bytes : ZS_SLAB_MIN_BYTES;
        char *slab = aligned_alloc(bytes == ZS_SLAB_MAX_BYTES ? ZS_SLAB_MAX_BYTES : ZS_SLAB_ALIGN,
                                   bytes);
        if (slab == NULL) return NULL;
#if defined(MADV_HUGEPAGE)
        if (bytes == ZS_SLAB_MAX_BYTES)
            (void)madvise(slab, bytes, MADV_HUGEPAGE); /* a hint: failure is fine */
#endif
        rt->slabs[rt->slab_count++] = slab;
        c->next = slab;
        c->end = slab + bytes;
        c->slab_bytes = bytes < ZS_SLAB_MAX_BYTES ? (uint32_t)bytes * 2 : ZS_SLAB_MAX_BYTES;
    }
    void *block = c->next;
    c->next += stride;
    return block;
}

/* An object's zeroed block: from its size class's slab, else (large, or slabs
   compiled out) zs_alloc; counted as one block either way. */
void *zs_object_alloc(zs_runtime *rt, size_t size) {
    if (!ZS_OBJECT_SLAB || size > ZS_SLAB_MAX_SIZE) return zs_alloc(rt, size);
    if (over_limit(rt, size)) return NULL;
    void *block = slab_take(rt, slab_class_of(size));
    if (block == NULL) return NULL;
    memset(block, 0, size);
    account(rt, 1, (int64_t)size);
    return block;
}

/* Return an object's block to its size class's free list (or to free). */
void zs_object_free(zs_runtime *rt, void *block, size_t size) {
    if (!ZS_OBJECT_SLAB || size > ZS_SLAB_MAX_SIZE) {
        zs_free(rt, block, size);
        return;
    }
    assert(block != NULL);
    zs_slab_class *c = &rt->slab_classes[slab_class_of(size)];
    if (rt->poison_freed) memset(block, 0xDD, size);
    memcpy(block, &c->free, sizeof(void *));
    c->free = block;
    account(rt, -1, -(int64_t)size);
}

/* Free every slab at runtime teardown (no object is left in them). */
void zs_slabs_release(zs_runtime *rt) {
    for (uint32_t i = 0; i < rt->slab_count; i++) free(rt->slabs[i]);
    free(rt->slabs);
    rt->slabs = NULL;
    rt->slab_count = rt->slab_capacity = 0;
    memset(rt->slab_classes, 0, sizeof rt->slab_classes);
}

/* Grow a vector's storage geometrically; false when out of memory. */
static bool grow(zs_runtime *rt, void **data, uint32_t *capacity, size_t element) {
    uint32_t wanted = *capacity < 16 ? 16 : *capacity * 2;
    if (wanted <= *capacity) return false; /* overflow */
    void *grown = zs_realloc(rt, *data, (size_t)*capacity * element, (size_t)wanted * element);
    if (grown == NULL) return false;
    *data = grown;
    *capacity = wanted;
    return true;
}

bool zs_u32_push(zs_runtime *rt, zs_u32_vec *vec, uint32_t value) {
    if (vec->count == vec->capacity &&
        !grow(rt, (void **)&vec->data, &vec->capacity, sizeof(uint32_t)))
        return false;
    vec->data[vec->count++] = value;
    return true;
}

void zs_u32_release(zs_runtime *rt, zs_u32_vec *vec) {
    zs_free(rt, vec->data, (size_t)vec->capacity * sizeof(uint32_t));
    memset(vec, 0, sizeof *vec);
}

bool zs_ref_push(zs_runtime *rt, zs_ref_vec *vec, zs_ref value) {
    if (vec->count == vec->capacity &&
        !grow(rt, (void **)&vec->data, &vec->capacity, sizeof(zs_ref)))
        return false;
    vec->data[vec->count++] = value;
    return true;
}

void zs_ref_release(zs_runtime *rt, zs_ref_vec *vec) {
    zs_free(rt, vec->data, (size_t)vec->capacity * sizeof(zs_ref));
    memset(vec, 0, sizeof *vec);
}

uint64_t zs_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ======================================================================
 * Runtime lifetime
 * ====================================================================== */

void zs_runtime_default_options(zs_runtime_options *out) {
    memset(out, 0, sizeof *out);
    out->max_objects = ZS_DEFAULT_MAX_OBJECTS;
    out->min_cluster_size = 16;
    out->mark_threads = 0;
}

zs_status zs_runtime_new(const zs_runtime_options *options, zs_runtime **out) {
    zs_runtime_options defaults;
    if (out == NULL) return ZS_E_INVALID;
    *out = NULL;
    if (options == NULL) {
        zs_runtime_default_options(&defaults);
        options = &defaults;
    }
    uint32_t max_objects = options->max_objects ? options->max_objects : ZS_DEFAULT_MAX_OBJECTS;
    if (max_objects > ZS_MAX_OBJECTS_LIMIT) return ZS_E_INVALID;

    zs_runtime *rt = calloc(1, sizeof *rt);
    if (rt == NULL) return ZS_E_NOMEM;
    if (!zs_lock_init(&rt->lock)) {
        free(rt);
        return ZS_E_NOMEM;
    }
    rt->mark_parity = ZS_ITEM_MARK;
    rt->min_cluster_size = options->min_cluster_size ? options->min_cluster_size : 16;
    rt->disregard_open = (options->flags & ZS_RUNTIME_DISREGARD_WINDOW) != 0;
    rt->black_roots = (options->flags & ZS_RUNTIME_BLACK_NOT_ROOTS) == 0;
    rt->mark_threads = options->mark_threads ? options->mark_threads : zs_default_mark_threads();
    rt->parallel_threshold = 65536; /* below this, thread start-up costs more than it saves */
    zs_status status = zs_heap_init(rt, max_objects);
    /* Name 0 is "None", so a zeroed name member reads as None (NAME_None). */
    uint32_t none_index = 0, none_number = 0;
    if (status == ZS_OK)
        status = zs_name_intern_locked(rt, "None", 4, false, &none_index, &none_number);
    assert(status != ZS_OK || none_index == 0);
    if (status != ZS_OK) {
        zs_runtime_free(rt);
        return status;
    }
    *out = rt;
    return ZS_OK;
}

void zs_runtime_free(zs_runtime *rt) {
    if (rt == NULL) return;
    ZS_LOCK(rt);
    /* Freed from inside a call into the managed side (the managed function
       closed its runtime): the native caller still runs on this runtime,
       so the last call to return frees it (calls.c). The flag is set and
       the count read in one atomic step: a call counted out at the same
       time either sees the flag (and frees) or was out before. */
    uint32_t calls = __atomic_fetch_or(&rt->calls_word, ZS_CALLS_FREE_PENDING, __ATOMIC_ACQ_REL);
    if (ZS_CALLS_COUNT(calls) > 0) {
        ZS_UNLOCK(rt);
        return;
    }
    /* The managed side lets go first, while the heap is whole: unlocked (it
       takes its own lock, a GIL), once. Calls are refused from now on, but
       one may have been counted in meanwhile (a hand-over started before the
       flag): then the last of them frees the runtime. */
    zs_free_handler freed = rt->free_handler;
    if (freed != NULL && rt->lock.depth == 1) {
        /* Read under the lock: zs_set_free_handler may run on another
           thread once it is released. */
        void *user = rt->free_handler_user;
        rt->free_handler = NULL;
        rt->free_handler_user = NULL;
        ZS_UNLOCK(rt);
        freed(user, rt);
        ZS_LOCK(rt);
        if (ZS_CALLS_COUNT(__atomic_load_n(&rt->calls_word, __ATOMIC_ACQUIRE)) > 0) {
            ZS_UNLOCK(rt);
            return;
        }
    }
    zs_gc_destroy_everything(rt);
    zs_reflection_release(rt); /* the host's cleanups, once its objects are gone */
    zs_values_release(rt);
    zs_gc_release(rt);
    zs_clusters_release(rt);
    zs_classes_release(rt);
    zs_types_release(rt);
    zs_names_release(rt);
    zs_u32_release(rt, &rt->root_list);
    zs_heap_release(rt);
    zs_slabs_release(rt);
    /* Invariant: every counted block has been returned. */
    assert(rt->live_blocks == 0 && rt->live_bytes == 0);
    ZS_UNLOCK(rt);
    zs_lock_destroy(&rt->lock);
    free(rt);
}

zs_status zs_set_free_handler(zs_runtime *rt, zs_free_handler handler, void *user) {
    ZS_LOCK(rt);
    /* Only the managed side that set one may replace or remove it. */
    zs_status status = rt->free_handler == NULL || user == rt->free_handler_user ? ZS_OK
                                                                                 : ZS_E_BUSY;
    if (status == ZS_OK) {
        rt->free_handler = handler;
        rt->free_handler_user = handler != NULL ? user : NULL;
    }
    ZS_UNLOCK(rt);
    return status;
}

void zs_runtime_memory(zs_runtime *rt, zs_memory_stats *out) {
    ZS_LOCK(rt);
    out->live_blocks = rt->live_blocks;
    out->live_bytes = rt->live_bytes;
    out->peak_bytes = rt->peak_bytes;
    out->item_bytes_per_object = sizeof(zs_item);
    ZS_UNLOCK(rt);
}

zs_status zs_close_disregard_for_gc(zs_runtime *rt) {
    ZS_LOCK(rt);
    zs_status status = rt->disregard_open ? ZS_OK : ZS_E_INVALID;
    rt->disregard_open = false;
    ZS_UNLOCK(rt);
    return status;
}

void zs_set_destroy_hook(zs_runtime *rt, zs_destroy_hook hook, void *user) {
    ZS_LOCK(rt);
    rt->destroy_hook = hook;
    rt->destroy_hook_user = user;
    ZS_UNLOCK(rt);
}
