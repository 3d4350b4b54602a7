/*
 * memory.c -- the runtime's memory: counted allocation (every block the
 * runtime owns, so a leak is a non-zero count at zs_runtime_free), the
 * object slabs, growable vectors and entry storage, the injected
 * allocation limit, and the monotonic clock of the collector's budgets.
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
 * Counted allocation: the runtime knows every block it owns, so a leak is
 * a non-zero count after zs_runtime_free's final sweep.
 * ====================================================================== */

/* Count blocks and bytes in (or out, negative), keeping the peak. */
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

/* A zeroed block, counted; NULL when out of memory or over the injected limit. */
void *zs_alloc(zs_runtime *rt, size_t size) {
    if (over_limit(rt, size)) return NULL;
    void *block = calloc(1, size);
    if (block != NULL) account(rt, 1, (int64_t)size);
    return block;
}

/* Resize a counted block (NULL: a new one), the new bytes zeroed; NULL, the
   block unchanged, when out of memory or over the injected limit. */
void *zs_realloc(zs_runtime *rt, void *block, size_t old_size, size_t new_size) {
    if (new_size > old_size && over_limit(rt, new_size - old_size)) return NULL;
    void *grown = realloc(block, new_size);
    if (grown == NULL) return NULL;
    if (new_size > old_size) memset((char *)grown + old_size, 0, new_size - old_size);
    account(rt, block == NULL ? 1 : 0, (int64_t)new_size - (int64_t)old_size);
    return grown;
}

/* Free a counted block of `size` bytes (poisoned first under the stress switch). */
void zs_free(zs_runtime *rt, void *block, size_t size) {
    if (block == NULL) return;
    if (rt->poison_freed) memset(block, 0xDD, size);
    free(block);
    account(rt, -1, -(int64_t)size);
}

/* ======================================================================
 * Object slabs (internal.h, "object slabs")
 * ====================================================================== */

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

/* ======================================================================
 * Growable vectors and entry storage
 * ====================================================================== */

/* Append to a vector of indices; false when out of memory. */
bool zs_u32_push(zs_runtime *rt, zs_u32_vec *vec, uint32_t value) {
    if (vec->count == vec->capacity &&
        !grow(rt, (void **)&vec->data, &vec->capacity, sizeof(uint32_t)))
        return false;
    vec->data[vec->count++] = value;
    return true;
}

/* Free a vector of indices and empty it. */
void zs_u32_release(zs_runtime *rt, zs_u32_vec *vec) {
    zs_free(rt, vec->data, (size_t)vec->capacity * sizeof(uint32_t));
    memset(vec, 0, sizeof *vec);
}

/* Append to a vector of handles; false when out of memory. */
bool zs_ref_push(zs_runtime *rt, zs_ref_vec *vec, zs_ref value) {
    if (vec->count == vec->capacity &&
        !grow(rt, (void **)&vec->data, &vec->capacity, sizeof(zs_ref)))
        return false;
    vec->data[vec->count++] = value;
    return true;
}

/* Free a vector of handles and empty it. */
void zs_ref_release(zs_runtime *rt, zs_ref_vec *vec) {
    zs_free(rt, vec->data, (size_t)vec->capacity * sizeof(zs_ref));
    memset(vec, 0, sizeof *vec);
}

/* Grow entry storage to hold at least `wanted` entries (new space zeroed). */
bool zs_entries_reserve(zs_runtime *rt, zs_array *array, uint32_t entry_size, uint32_t wanted) {
    if (wanted <= array->capacity) return true;
    if (wanted > ZS_MAX_ENTRIES) return false;
    uint32_t capacity = array->capacity < 4 ? 4 : array->capacity;
    while (capacity < wanted)
        capacity = capacity > ZS_MAX_ENTRIES / 2 ? ZS_MAX_ENTRIES : capacity * 2;
    void *grown = zs_realloc(rt, array->data, (size_t)array->capacity * entry_size,
                             (size_t)capacity * entry_size);
    if (grown == NULL) return false;
    array->data = grown;
    array->capacity = capacity;
    return true;
}

/* ======================================================================
 * The clock and the figures
 * ====================================================================== */

/* The monotonic clock, for the collector's time budgets. */
uint64_t zs_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The memory figures of zs_runtime_memory: counted blocks and bytes, the peak. */
void zs_runtime_memory(zs_runtime *rt, zs_memory_stats *out) {
    ZS_LOCK(rt);
    out->live_blocks = rt->live_blocks;
    out->live_bytes = rt->live_bytes;
    out->peak_bytes = rt->peak_bytes;
    out->item_bytes_per_object = sizeof(zs_item);
    ZS_UNLOCK(rt);
}
