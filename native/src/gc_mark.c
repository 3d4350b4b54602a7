/*
 * gc_mark.c -- marking: the mark stacks and the marker (schema-driven,
 * batched, killable references to garbage nulled; serial or one of the
 * parallel workers), clusters marked as one, the roots (the root list, the
 * black values) and the reachable-flag swap that starts a mark, the write
 * barrier's slow path, and check-mark (a second, simple mark for stress).
 * The phases that call it are gc_cycle.c's.
 *
 * Invariants relied on here:
 *  - Outside a collection every live, non-dying item carries the current
 *    mark (survivors were marked, new objects are born marked), so flipping
 *    rt->mark_parity makes all of them "maybe unreachable" in O(1).
 *  - A strong reference held by a live object always names a live slot with
 *    the right serial (the whole unreachable set dies together, and killable
 *    references to garbage are nulled while marking).
 *  - Permanent objects are never marked nor scanned, unless ESCAPED.
 *  - While a mark is pending (ZS_GC_MARKING), every reference store, root
 *    and strong reference goes through zs_gc_barrier, which marks and queues
 *    the target (an insertion barrier): a marked object never gains an
 *    unmarked referent that nobody will scan.
 *  - Once marking is complete (ZS_GC_GATHERING) an unmarked object is dying
 *    even before the gather cursor reaches it; the API refuses to store or
 *    root it (ZS_E_DYING), so gathering can proceed in steps.
 *
 * Mark stacks are transient work memory, allocated with plain realloc and
 * not counted in the runtime's block accounting (parallel workers grow
 * theirs concurrently).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ======================================================================
 * Work stacks
 * ====================================================================== */

/* Grow a transient stack; false when it cannot. */
static bool stack_grow(zs_u32_vec *vec) {
    uint32_t capacity = vec->capacity ? vec->capacity * 2 : 256;
    if (capacity <= vec->capacity) return false;
    uint32_t *grown = realloc(vec->data, (size_t)capacity * sizeof(uint32_t));
    if (grown == NULL) return false;
    vec->data = grown;
    vec->capacity = capacity;
    return true;
}

/* Push onto a transient stack; false when it cannot grow. */
static inline bool stack_push(zs_u32_vec *vec, uint32_t value) {
    if (vec->count == vec->capacity && !stack_grow(vec)) return false;
    vec->data[vec->count++] = value;
    return true;
}

static void stack_release(zs_u32_vec *vec) {
    free(vec->data);
    memset(vec, 0, sizeof *vec);
}

/* Grow a mark stack (first sliding its entries over the part thieves took,
   when that is at least half of it); false when it cannot. */
static bool mark_stack_grow(zs_mark_stack *stack) {
    if (stack->base >= stack->capacity / 2 && stack->base > 0) {
        memmove(stack->data, stack->data + stack->base,
                (size_t)(stack->count - stack->base) * sizeof(zs_object *));
        stack->count -= stack->base;
        stack->shared -= stack->base;
        stack->base = 0;
        return true;
    }
    uint32_t capacity = stack->capacity ? stack->capacity * 2 : 256;
    if (capacity <= stack->capacity) return false;
    zs_object **grown = realloc(stack->data, (size_t)capacity * sizeof(zs_object *));
    if (grown == NULL) return false;
    stack->data = grown;
    stack->capacity = capacity;
    return true;
}

/* Push onto a mark stack (no limit); false when it cannot grow. */
static inline bool mark_stack_push(zs_mark_stack *stack, zs_object *object) {
    if (stack->count == stack->capacity && !mark_stack_grow(stack)) return false;
    stack->data[stack->count++] = object;
    return true;
}

/* Free a mark stack's storage and empty it. */
void zs_mark_stack_release(zs_mark_stack *stack) {
    free(stack->data);
    memset(stack, 0, sizeof *stack);
}

/* Push within the marker's limit; on failure the overflow rescan finds it. */
static inline bool push_fast(zs_marker *m, zs_object *object) {
    if (m->stack->count - m->stack->base < m->limit && mark_stack_push(m->stack, object))
        return true;
    m->overflow = true;
    return false;
}

/* Queue an object (already marked) for scanning. */
bool zs_mark_push_object(zs_marker *m, zs_object *object) { return push_fast(m, object); }

/* Queue the object of an index (already marked) for scanning. */
bool zs_mark_push(zs_marker *m, uint32_t index) {
    return push_fast(m, zs_item_at(m->rt, index)->object);
}

bool zs_mark_push_cluster(zs_marker *m, uint32_t cluster) {
    if (stack_push(&m->clusters, cluster)) return true;
    m->overflow = true; /* the rescan after an overflow marks what was missed */
    return false;
}

void zs_marker_init(zs_marker *m, zs_runtime *rt, zs_mark_stack *stack) {
    memset(m, 0, sizeof *m);
    m->rt = rt;
    m->stack = stack;
    m->limit = rt->mark_stack_limit ? rt->mark_stack_limit : UINT32_MAX;
}

/* Fold a marker's counters into the cycle's statistics. */
void zs_marker_merge(zs_runtime *rt, zs_marker *m) {
    rt->stats.objects_scanned += m->scanned;
    rt->stats.objects_marked += m->marked;
    rt->stats.references_killed += m->killed;
    rt->stats.clusters_marked += m->clusters_marked;
    rt->stats.barrier_marks += m->barrier_marks;
    if (m->overflow) rt->mark_overflow = true;
    m->scanned = m->marked = m->killed = m->clusters_marked = m->barrier_marks = 0;
    m->overflow = false;
    stack_release(&m->clusters);
}

/* ======================================================================
 * Marking one reference
 * ====================================================================== */

static void mark_cluster(zs_marker *m, int32_t cluster);

/* Claim an item's mark through its flags: true when this call marked it.
   Parallel markers race for the bit with an atomic operation; only the
   winner scans the object. */
static inline bool claim_flags(zs_marker *m, zs_item *it) {
    zs_runtime *rt = m->rt;
    if (!m->parallel) {
        if (item_is_marked(rt, it)) return false;
        item_set_marked(rt, it);
        return true;
    }
    if (rt->mark_parity)
        return (__atomic_fetch_or(&it->flags, ZS_ITEM_MARK, __ATOMIC_RELAXED) & ZS_ITEM_MARK) == 0;
    return (__atomic_fetch_and(&it->flags, ~ZS_ITEM_MARK, __ATOMIC_RELAXED) & ZS_ITEM_MARK) != 0;
}

/* Whether parallel markers claim an item (of these flags) through its
   mark-filter bit rather than its flags: an ordinary object (not garbage,
   permanent nor in a cluster) while the filter exists. Each item is claimed
   by one of the two mechanisms only, so exactly one marker wins it; a set
   filter bit is then exactly the filter's promise (marked, not garbage, not
   in a cluster). Through the filter, a batch claims the adjacent objects it
   reached (a parent's children, allocated together) with one atomic
   operation per 64 indices (claim_run) instead of one per object. */
static inline bool claims_by_filter(const zs_marker *m, const zs_item *it, uint32_t flags) {
    return m->claim_by_filter && !(flags & (ZS_ITEM_GARBAGE | ZS_ITEM_PERMANENT)) &&
           it->cluster_index < 0;
}

/* Claim the item of an index for this marker: true when this call marked it
   (through the filter bit or the flags, see claims_by_filter). */
static inline bool claim_item(zs_marker *m, zs_item *it, uint32_t index) {
    uint32_t flags = __atomic_load_n(&it->flags, __ATOMIC_RELAXED);
    if (!claims_by_filter(m, it, flags)) return claim_flags(m, it);
    if (((flags ^ m->rt->mark_parity) & ZS_ITEM_MARK) == 0)
        return false; /* marked (claimed) already */
    uint64_t bit = 1ull << (index & 63);
    if (__atomic_fetch_or(&m->rt->mark_filter[index >> 6], bit, __ATOMIC_RELAXED) & bit)
        return false;
    /* Only the winner writes an ordinary item's flags while marking. */
    __atomic_store_n(&it->flags, flags ^ ZS_ITEM_MARK, __ATOMIC_RELAXED);
    return true;
}

/* Claim a cluster root's mark (clusters are claimed through their flags). */
bool zs_mark_claim(zs_marker *m, zs_item *it) {
    assert(it->cluster_index >= 0);
    return claim_flags(m, it);
}

/* Mark the item of an index reached through a reference (clusters as a whole). */
static inline void mark_reached(zs_marker *m, zs_item *it, uint32_t index) {
    if (it->cluster_index >= 0) {
        if (!zs_item_reachable(m->rt, it)) mark_cluster(m, it->cluster_index);
        return;
    }
    if (claim_item(m, it, index)) {
        m->marked++;
        /* Other parallel markers may be claiming this item's mark bit (an
           atomic read-modify-write of the same word) right now: read the
           (unchanging) leaf bit with an atomic load too. */
        if (!(__atomic_load_n(&it->flags, __ATOMIC_RELAXED) & ZS_ITEM_LEAF))
            push_fast(m, it->object);
    }
}

static inline void visit_fast(zs_marker *m, zs_ref *slot, bool killable) {
    zs_ref ref = *slot;
    if (ref == ZS_NULL_REF) return;
    uint32_t index = ZS_REF_INDEX(ref);
    zs_item *it = zs_item_at(m->rt, index);
    assert(it->object != NULL && it->serial == ZS_REF_SERIAL(ref));
    uint32_t flags = __atomic_load_n(&it->flags, __ATOMIC_RELAXED);
    if (flags & ZS_ITEM_PERMANENT) return;
    if (killable && (flags & ZS_ITEM_GARBAGE)) {
        /* Only the marker that claimed the holder scans it: no race here. */
        *slot = ZS_NULL_REF;
        m->killed++;
        return;
    }
    mark_reached(m, it, index);
}

void zs_mark_visit(zs_marker *m, zs_ref *slot, bool killable) { visit_fast(m, slot, killable); }

void zs_mark_ref(zs_marker *m, zs_ref ref) { zs_mark_visit(m, &ref, false); }

/* Read every strong reference of one object by interpreting its class's
   schema stream (used by rescans; the hot loop is zs_mark_drain's). */
void zs_mark_scan(zs_marker *m, zs_object *object) {
    const zs_class *cls = object->cls;
    char *base = (char *)object;
    m->scanned++;
    visit_fast(m, &object->outer, false);
    for (uint32_t i = 0; i < cls->schema.strong_count; i++) {
        uint32_t word = cls->schema.words[i];
        char *member = base + (word >> ZS_OP_SHIFT);
        if ((word & ZS_OP_MASK) == ZS_OP_OBJECT) visit_fast(m, (zs_ref *)member, true);
        else zs_mark_value(m, cls->schema.types[i], member, true);
    }
}

/* Follow the references inside a value: containers loop over their
   entries; set elements and map keys are never killed (hash integrity). */
void zs_mark_value(zs_marker *m, const zs_type *type, void *value, bool killable) {
    if (!(type->flags & ZS_TYPE_HAS_REFS)) return;
    switch (type->kind) {
    case ZS_TYPE_OBJECT:
        visit_fast(m, value, killable);
        return;
    case ZS_TYPE_STRUCT:
        for (uint32_t i = 0; i < type->schema.strong_count; i++) {
            char *member = (char *)value + (type->schema.words[i] >> ZS_OP_SHIFT);
            if ((type->schema.words[i] & ZS_OP_MASK) == ZS_OP_OBJECT)
                visit_fast(m, (zs_ref *)member, killable);
            else zs_mark_value(m, type->schema.types[i], member, killable);
        }
        return;
    case ZS_TYPE_OPTIONAL:
        if (((uint8_t *)value)[type->value_offset])
            zs_mark_value(m, type->element, value, killable);
        return;
    default:
        break;
    }
    /* ARRAY, SET, MAP */
    zs_array *entries = type->kind == ZS_TYPE_ARRAY ? value : &((zs_hash *)value)->entries;
    const zs_type *element = type->element, *mapped = type->value;
    bool key_killable = type->kind == ZS_TYPE_ARRAY;
    char *entry = entries->data;
    if (element->kind == ZS_TYPE_OBJECT && mapped == NULL) {
        for (uint32_t i = 0; i < entries->count; i++, entry += type->entry_size)
            visit_fast(m, (zs_ref *)entry, key_killable);
        return;
    }
    for (uint32_t i = 0; i < entries->count; i++, entry += type->entry_size) {
        zs_mark_value(m, element, entry, key_killable);
        if (mapped != NULL) zs_mark_value(m, mapped, entry + type->value_offset, true);
    }
}

/* ======================================================================
 * Marking a cluster
 * ====================================================================== */

/* Mark a whole cluster (clusters.c) and everything it references. Kept out
   of line: the hot loop reaches it rarely, through a member. */
__attribute__((noinline)) static void mark_cluster(zs_marker *m, int32_t cluster) {
    zs_runtime *rt = m->rt;
    uint32_t start = m->clusters.count;
    if (!zs_mark_push_cluster(m, (uint32_t)cluster)) return;
    while (m->clusters.count > start) {
        const uint32_t id = m->clusters.data[--m->clusters.count];
        assert(id < rt->cluster_capacity);
        zs_cluster *c = &rt->clusters[id];
        if (!zs_mark_claim(m, zs_item_at(rt, c->root))) continue;
        /* The members are reachable through the root's mark: their own
           bits are never written (zs_item_reachable reads the root's). */
        m->marked += 1 + c->objects.count;
        m->clusters_marked++;
        for (uint32_t i = 0; i < c->referenced_clusters.count; i++)
            if (!zs_mark_push_cluster(m, c->referenced_clusters.data[i])) return;
        for (uint32_t i = 0; i < c->mutable_objects.count; i++)
            zs_mark_ref(m, c->mutable_objects.data[i]);
    }
}

/* ======================================================================
 * Draining the work stack
 * ====================================================================== */

/* After a failed push some marked objects were never scanned: scan every
   marked, non-clustered object again, and finish every marked cluster's
   references (idempotent, only slower). */
static void rescan_marked(zs_marker *m) {
    zs_runtime *rt = m->rt;
    for (uint32_t id = 0; id < rt->cluster_capacity; id++) {
        const zs_cluster *c = &rt->clusters[id];
        if (c->root == ZS_NO_CLUSTER_ROOT || !item_is_marked(rt, zs_item_at(rt, c->root))) continue;
        for (uint32_t i = 0; i < c->referenced_clusters.count; i++) {
            const zs_cluster *other = &rt->clusters[c->referenced_clusters.data[i]];
            if (!item_is_marked(rt, zs_item_at(rt, other->root)))
                mark_cluster(m, (int32_t)c->referenced_clusters.data[i]);
        }
        for (uint32_t i = 0; i < c->mutable_objects.count; i++)
            zs_mark_ref(m, c->mutable_objects.data[i]);
    }
    for (uint32_t index = 0; index < rt->high_water; index++) {
        zs_item *it = zs_item_at(rt, index);
        if (it->object == NULL || (it->flags & ZS_ITEM_LEAF) || it->cluster_index >= 0) continue;
        bool scannable = (it->flags & ZS_ITEM_PERMANENT) ? (it->flags & ZS_ITEM_ESCAPED) != 0
                                                         : item_is_marked(rt, it);
        if (scannable) zs_mark_scan(m, it->object);
    }
}

/* The marker's hot state, kept in locals so stores to items (uint32) do not
   force the compiler to reload it; synced with the zs_marker around the
   rare calls that use the marker's stack (clusters, sharing, growth). */
typedef struct hot_state {
    zs_marker *m;
    zs_item *items;    /* rt->items */
    uint64_t *filter;  /* rt->mark_filter (NULL: none) */
    uint64_t unmarked; /* (rt->mark_parity ^ ZS_ITEM_MARK) | ZS_WORD_NO_CLUSTER: see HOT_MASK */
    zs_object **data;  /* m->stack's storage */
    uint32_t count;
    uint32_t capacity;
    uint32_t shared; /* parallel: m->stack->shared (only the owner moves it) */
    uint64_t scanned, marked, killed;
} hot_state;

static inline void hot_sync_out(hot_state *h) { h->m->stack->count = h->count; }

static inline void hot_sync_in(hot_state *h) {
    h->shared = h->m->stack->shared;
    h->data = h->m->stack->data;
    h->count = h->m->stack->count;
    h->capacity = h->m->stack->capacity < h->m->limit ? h->m->stack->capacity : h->m->limit;
}

/* Before the marker's stack is used outside the hot loop: store the hot
   copy back, and (parallel) take the stack's lock, which thieves take too. */
static inline void hot_leave(hot_state *h, bool parallel) {
    if (parallel) mtx_lock(h->m->lock);
    hot_sync_out(h);
}

/* After hot_leave: release the lock and reload the hot copy. */
static inline void hot_enter(hot_state *h, bool parallel) {
    hot_sync_in(h);
    if (parallel) mtx_unlock(h->m->lock);
}

/* Push a marked object: in place while there is room (a parallel marker's
   pushes above its published count are its own: thieves only take below
   it), else through push_fast (growth, limit, overflow). */
static inline __attribute__((always_inline)) void hot_push(hot_state *h, zs_object *object,
                                                           bool parallel) {
    if (h->count < h->capacity) {
        h->data[h->count++] = object;
        return;
    }
    hot_leave(h, parallel);
    push_fast(h->m, object);
    hot_enter(h, parallel);
}

/* Set a mark-filter bit from a marker: a plain read-modify-write for the
   serial marker (nobody else touches the filter then), an atomic one for
   parallel ones claiming through the filter (a lost bit could be a claim,
   see claims_by_filter), a racy one for those claiming through flags. */
static inline __attribute__((always_inline)) void hot_filter_set(hot_state *h, uint32_t index,
                                                                 bool parallel) {
    if (parallel && h->m->claim_by_filter) zs_filter_set(h->filter, index);
    else if (parallel) zs_filter_set_racy(h->filter, index);
    else h->filter[index >> 6] |= 1ull << (index & 63);
}

/* Flags (and the cluster bit) that send a reference off the fast path:
   (word & HOT_MASK) == h->unmarked (the unmarked mark bit | ZS_WORD_NO_CLUSTER)
   means an unmarked, ordinary object (not garbage, permanent, leaf nor a
   cluster member). */
#define HOT_MASK                                                                                   \
    ((uint64_t)(ZS_ITEM_MARK | ZS_ITEM_GARBAGE | ZS_ITEM_PERMANENT | ZS_ITEM_LEAF) |               \
     ZS_WORD_NO_CLUSTER)

/* Visit one reference slot whose target's item is `it` (prefetched when
   batched): mark the target and queue it, prefetching its object for the
   scan that will pop it. `killable` (false only for outer), `parallel` and
   `filtered` (the mark filter exists) are compile-time constants. */
static inline __attribute__((always_inline)) void visit_slot(hot_state *h, zs_item *it,
                                                             zs_ref *slot, bool killable,
                                                             bool parallel, bool filtered) {
    uint64_t word = parallel ? (__atomic_load_n(&it->flags, __ATOMIC_RELAXED) |
                                (uint64_t)(uint32_t)it->cluster_index << 32)
                             : zs_item_word(it);
    uint32_t index = ZS_REF_INDEX(*slot);
    if (__builtin_expect((word & HOT_MASK) == h->unmarked, 1)) {
        /* The common case: an unmarked, ordinary object. */
        if (parallel) {
            if (!claim_item(h->m, it, index)) return; /* through the filter: its bit is set */
            if (filtered && !h->m->claim_by_filter) hot_filter_set(h, index, true);
        } else {
            it->flags = (uint32_t)word ^ ZS_ITEM_MARK;
            if (filtered) hot_filter_set(h, index, false);
        }
        h->marked++;
        zs_object *object = it->object;
        __builtin_prefetch(object);
        hot_push(h, object, parallel);
        return;
    }
    uint32_t flags = (uint32_t)word;
    if (it->cluster_index >= 0 && !(flags & (ZS_ITEM_PERMANENT | ZS_ITEM_GARBAGE))) {
        /* A cluster member's own mark bit is stale: the root's decides. */
        if (!zs_item_reachable(h->m->rt, it)) {
            hot_leave(h, parallel);
            mark_cluster(h->m, it->cluster_index);
            hot_enter(h, parallel);
        }
        return;
    }
    bool marked = ((flags ^ h->unmarked) & ZS_ITEM_MARK) != 0;
    if (marked && !(killable && (flags & ZS_ITEM_GARBAGE))) return;
    if (flags & ZS_ITEM_PERMANENT) {
        if (filtered) hot_filter_set(h, index, parallel); /* never garbage, never marked */
        return;
    }
    if (killable && (flags & ZS_ITEM_GARBAGE)) {
        *slot = ZS_NULL_REF; /* only the marker that claimed the holder scans it */
        h->killed++;
        return;
    }
    if (parallel) {
        if (!claim_item(h->m, it, index)) return; /* an ordinary one's filter bit included */
        if (filtered && !h->m->claim_by_filter && !(flags & ZS_ITEM_GARBAGE))
            hot_filter_set(h, index, true);
    } else {
        it->flags = flags ^ ZS_ITEM_MARK;
        if (filtered && !(flags & ZS_ITEM_GARBAGE)) hot_filter_set(h, index, false);
    }
    h->marked++;
    if (!(flags & ZS_ITEM_LEAF)) hot_push(h, it->object, parallel);
}

/* Marking a big heap is bound by memory latency: every reference reads an
 * item at a random address, every queued object a random object. So marking
 * works in batches, as Unreal's reachability analysis does: up to BATCH_OBJECTS objects are
 * popped and scanned, each non-null reference slot is queued with its item
 * prefetched; then the batch's slots are visited, by which time their items
 * have arrived. A newly marked object has its object prefetched as it is
 * pushed; the next batch pops it. Many loads are then in flight at a cost of
 * a few instructions per reference. */
#define BATCH_OBJECTS 32u
#define BATCH_SLOTS 256u
#define SHORT_RUN 4u /* runs of up to this many references are queued unrolled */
/* Parallel markers (see drain_impl): a marker hands its older entries to
   thieves every PUBLISH_BATCHES batches (every other batch while a worker
   waits for work), keeping its newest KEEP_PRIVATE; takes back half of what
   is left (at least RECLAIM) when its own part runs out; and wakes an idle
   worker when it has WAKE_BACKLOG stealable entries. */
#define PUBLISH_BATCHES 64u
#define KEEP_PRIVATE 128u
#define RECLAIM 256u
#define WAKE_BACKLOG 64u

/* A batch's queued (killable) references: the slot, and the target's item
   (prefetched when queued). */
typedef struct batch_queue {
    zs_ref *slots[BATCH_SLOTS];
    zs_item *items[BATCH_SLOTS];
} batch_queue;

/* The item of an index (no checks). */
static inline __attribute__((always_inline)) zs_item *hot_item(const hot_state *h, uint32_t index) {
    return &h->items[index];
}

/* Parallel markers with a mark filter: visit a batch's queued slots,
   claiming the unmarked ordinary targets through their filter bits a word
   at a time: the targets of consecutive slots that share a filter word (the
   children of the batch's objects, allocated together) are claimed with one
   atomic OR, whose old value says which of them this marker won. Everything
   else goes through visit_slot. */
static void visit_batch_claiming(hot_state *h, const batch_queue *q, uint32_t count) {
    uint32_t claims[BATCH_SLOTS], n = 0;
    for (uint32_t i = 0; i < count; i++) {
        zs_item *it = q->items[i];
        uint64_t word = __atomic_load_n(&it->flags, __ATOMIC_RELAXED) |
                        (uint64_t)(uint32_t)it->cluster_index << 32;
        if ((word & HOT_MASK) == h->unmarked) claims[n++] = i;
        else visit_slot(h, it, q->slots[i], true, true, true);
    }
    for (uint32_t first = 0, end; first < n; first = end) {
        const uint32_t word_index = ZS_REF_INDEX(*q->slots[claims[first]]) >> 6;
        uint64_t wanted = 0;
        for (end = first; end < n; end++) {
            uint32_t index = ZS_REF_INDEX(*q->slots[claims[end]]);
            if (index >> 6 != word_index) break;
            wanted |= 1ull << (index & 63);
        }
        uint64_t won = ~__atomic_fetch_or(&h->filter[word_index], wanted, __ATOMIC_RELAXED) &
                       wanted;
        h->m->filter_ors++;
        h->m->filter_claims += (uint64_t)__builtin_popcountll(won);
        for (uint32_t k = first; won != 0 && k < end; k++) {
            const uint64_t bit = 1ull << (ZS_REF_INDEX(*q->slots[claims[k]]) & 63);
            if (!(won & bit)) continue; /* another marker's (or this batch's twice) */
            won &= ~bit;
            zs_item *it = q->items[claims[k]];
            /* Only the winner writes an ordinary item's flags while marking. */
            __atomic_store_n(&it->flags,
                             __atomic_load_n(&it->flags, __ATOMIC_RELAXED) ^ ZS_ITEM_MARK,
                             __ATOMIC_RELAXED);
            h->marked++;
            zs_object *object = it->object;
            __builtin_prefetch(object);
            hot_push(h, object, true);
        }
    }
}

/* Visit every queued slot of a batch. */
static inline __attribute__((always_inline)) void visit_batch(hot_state *h, const batch_queue *q,
                                                              uint32_t count, bool parallel,
                                                              bool filtered) {
    if (parallel && filtered && h->m->claim_by_filter) {
        visit_batch_claiming(h, q, count);
        return;
    }
    for (uint32_t i = 0; i < count; i++)
        visit_slot(h, q->items[i], q->slots[i], true, parallel, filtered);
}

/* Visit a slot at once (no batching) when it is not null and the mark
   filter does not say it needs nothing. */
static inline __attribute__((always_inline)) void visit_slot_if_set(hot_state *h, zs_ref *slot,
                                                                    bool killable, bool parallel,
                                                                    bool filtered) {
    zs_ref ref = *slot;
    if (ref == ZS_NULL_REF || (filtered && zs_filter_test(h->filter, ZS_REF_INDEX(ref)))) return;
    visit_slot(h, hot_item(h, ZS_REF_INDEX(ref)), slot, killable, parallel, filtered);
}

/* Queue one killable slot of the batch when it is not null and the mark
   filter does not say it needs nothing, prefetching its item. The caller
   makes sure the batch has room. */
static inline __attribute__((always_inline)) void queue_slot(const hot_state *h, batch_queue *q,
                                                             uint32_t *n, zs_ref *slot,
                                                             bool filtered) {
    zs_ref ref = *slot;
    if (ref == ZS_NULL_REF) return;
    uint32_t index = ZS_REF_INDEX(ref);
    if (filtered && zs_filter_test(h->filter, index)) return;
    zs_item *it = hot_item(h, index);
    __builtin_prefetch(it);
    q->items[*n] = it;
    q->slots[*n] = slot;
    (*n)++;
}

/* Parallel: wake an idle worker (to steal) when this marker has plenty
   (gc_parallel.c's workers wait on the pool's condition). */
static void mark_maybe_wake(zs_marker *m) {
    zs_mark_pool *pool = m->pool;
    if (__atomic_load_n(&pool->wanted, __ATOMIC_RELAXED) == 0) return;
    mtx_lock(&pool->lock);
    cnd_signal(&pool->wake);
    mtx_unlock(&pool->lock);
}

/* Objects scanned between two reads of the clock in a budgeted step (read
   at the end of a batch: a step overruns by at most ~BATCH_OBJECTS + this
   many objects, a few microseconds). */
#define MARK_CLOCK_STRIDE 64u

/* Scan objects until the stack is empty, or the deadline passes. */
static inline __attribute__((always_inline)) bool drain_impl(zs_marker *m, uint64_t deadline_ns,
                                                             bool parallel, bool filtered) {
    hot_state h = {.m = m,
                   .items = m->rt->items,
                   .filter = m->rt->mark_filter,
                   .unmarked = (m->rt->mark_parity ^ ZS_ITEM_MARK) | ZS_WORD_NO_CLUSTER};
    assert(filtered == (h.filter != NULL));
    hot_sync_in(&h);
    batch_queue q;
    /* A work-bounded step (zs_gc_step_bounded), or the stress switch's
       bound on a time-budgeted one. */
    const uint32_t step_objects = m->step_objects;
    uint32_t left = step_objects;
    uint64_t clock_scanned = 0;
    uint32_t published = 0; /* parallel: batches since the last hand-over */
    bool finished = true;
    for (;;) {
        uint32_t batch, queued = 0;
        if (parallel) {
            /* The owner works on the top of its stack, data[shared..count),
               without locking; thieves take from the bottom of the rest,
               data[base..shared), under the stack's lock. The owner takes
               that lock only to move the boundary: every PUBLISH_BATCHES
               batches it hands all but its newest KEEP_PRIVATE entries over
               (a preempted worker's backlog stays stealable), and when its
               own part runs out it takes some back. A locked instruction per
               batch would cost more: it waits for the batch's stores, which
               wait for their cache misses. */
            if (h.count == h.shared) {
                mtx_lock(m->lock);
                const uint32_t base = m->stack->base;
                if (h.shared == base) {
                    m->stack->count = m->stack->shared = m->stack->base = h.count = h.shared = 0;
                    mtx_unlock(m->lock);
                    break;
                }
                const uint32_t reclaim = (h.shared - base) / 2 > RECLAIM ? (h.shared - base) / 2
                                                                         : RECLAIM;
                h.shared -= h.shared - base < reclaim ? h.shared - base : reclaim;
                m->stack->shared = h.shared;
                mtx_unlock(m->lock);
                published = 0;
            } else if ((++published >= PUBLISH_BATCHES ||
                        (published >= 2 &&
                         __atomic_load_n(m->idle_waiting, __ATOMIC_RELAXED) > 0)) &&
                       h.count - h.shared > KEEP_PRIVATE) {
                mtx_lock(m->lock);
                m->stack->count = h.count;
                m->stack->shared = h.shared = h.count - KEEP_PRIVATE;
                /* Thieves move base under the lock: read it there. */
                const bool wake = h.shared - m->stack->base >= WAKE_BACKLOG;
                mtx_unlock(m->lock);
                published = 0;
                if (wake) mark_maybe_wake(m);
            }
            batch = h.count - h.shared < BATCH_OBJECTS ? h.count - h.shared : BATCH_OBJECTS;
        } else {
            if (h.count == 0) break;
            batch = h.count < BATCH_OBJECTS ? h.count : BATCH_OBJECTS;
            if (step_objects != 0 && left < batch) batch = left;
        }
        /* Pop the batch and prefetch its objects (both lines: a 64-byte
           object straddles two when the allocator aligns it to 16 only). */
        zs_object *popped[BATCH_OBJECTS];
        for (uint32_t b = 0; b < batch; b++) {
            zs_object *object = h.data[--h.count];
            __builtin_prefetch(object);
            __builtin_prefetch((char *)object + 63);
            popped[b] = object;
        }
        for (uint32_t b = 0; b < batch; b++) {
            zs_object *object = popped[b];
            const zs_schema *schema = &object->cls->schema;
            char *base = (char *)object;
            h.scanned++;
            /* The outer is visited at once: it is not killable, and it is
               usually marked already (the filter skips it). */
            visit_slot_if_set(&h, &object->outer, false, parallel, filtered);
            uint32_t plain = schema->plain_count;
            if (__builtin_expect(plain <= SHORT_RUN && queued <= BATCH_SLOTS - SHORT_RUN, 1)) {
                /* A short run (a few reference members: most classes): no
                   loop to set up, one predictable test per member. */
                zs_ref *run = (zs_ref *)(base + schema->plain_offset);
                if (plain > 0) queue_slot(&h, &q, &queued, run, filtered);
                if (plain > 1) queue_slot(&h, &q, &queued, run + 1, filtered);
                if (plain > 2) queue_slot(&h, &q, &queued, run + 2, filtered);
                if (plain > 3) queue_slot(&h, &q, &queued, run + 3, filtered);
                continue;
            }
            if (plain < BATCH_SLOTS - queued) {
                /* The usual layout: the strong members are one run of
                   adjacent references, and the batch has room for them. */
                zs_ref *run = (zs_ref *)(base + schema->plain_offset), *const end = run + plain;
                for (; run + 2 <= end; run += 2) {
                    queue_slot(&h, &q, &queued, run, filtered);
                    queue_slot(&h, &q, &queued, run + 1, filtered);
                }
                if (run < end) queue_slot(&h, &q, &queued, run, filtered);
                continue;
            }
            const uint32_t *words = schema->words;
            const uint32_t objects = schema->object_count;
            if (queued + objects > BATCH_SLOTS) {
                visit_batch(&h, &q, queued, parallel, filtered);
                queued = 0;
            }
            if (objects > BATCH_SLOTS) {
                /* A huge class: its slots are visited without batching. */
                for (uint32_t i = 0; i < objects; i++)
                    visit_slot_if_set(&h, (zs_ref *)(base + (words[i] >> ZS_OP_SHIFT)), true,
                                      parallel, filtered);
            } else {
                for (uint32_t i = 0; i < objects; i++)
                    queue_slot(&h, &q, &queued, (zs_ref *)(base + (words[i] >> ZS_OP_SHIFT)),
                               filtered);
            }
            for (uint32_t i = objects; i < schema->strong_count; i++) {
                /* A container, optional or struct-with-references member:
                   followed outside the batch (its targets go on the stack). */
                hot_leave(&h, parallel);
                zs_mark_value(m, schema->types[i], base + (words[i] >> ZS_OP_SHIFT), true);
                hot_enter(&h, parallel);
            }
        }
        visit_batch(&h, &q, queued, parallel, filtered);

        if (step_objects != 0 && (left -= batch) == 0) {
            finished = h.count == 0;
            break;
        }
        if (deadline_ns != 0 && h.count > 0 && h.scanned - clock_scanned >= MARK_CLOCK_STRIDE) {
            clock_scanned = h.scanned;
            if (zs_now_ns() >= deadline_ns) {
                finished = false;
                break;
            }
        }
    }
    if (!parallel)
        hot_sync_out(&h); /* a parallel marker only leaves with its stack empty and published */
    m->scanned += h.scanned;
    m->marked += h.marked;
    m->killed += h.killed;
    return finished;
}

bool zs_mark_drain(zs_marker *m, uint64_t deadline_ns) {
    for (;;) {
        bool emptied;
        if (m->rt->mark_filter != NULL)
            emptied = m->parallel ? drain_impl(m, deadline_ns, true, true)
                                  : drain_impl(m, deadline_ns, false, true);
        else
            emptied = m->parallel ? drain_impl(m, deadline_ns, true, false)
                                  : drain_impl(m, deadline_ns, false, false);
        if (!emptied) return false;
        zs_runtime *rt = m->rt;
        if (m->parallel || (!m->overflow && !rt->mark_overflow)) return true;
        m->overflow = rt->mark_overflow = false;
        rescan_marked(m);
    }
}

/* ======================================================================
 * Roots, and the start of a mark
 * ====================================================================== */

/* Mark every black value that holds references (black_values.c), when
   black values are roots. */
static void mark_values(zs_marker *m) {
    zs_runtime *rt = m->rt;
    if (!rt->black_roots) return;
    for (uint32_t i = 0; i < rt->value_capacity; i++) {
        zs_value_slot *slot = &rt->values[i];
        if (slot->value != NULL && (slot->type->flags & ZS_TYPE_HAS_REFS))
            zs_mark_value(m, slot->type, slot->value, true);
    }
}

/* Mark the root candidates, dropping list entries that are no longer roots. */
static void mark_roots(zs_marker *m) {
    zs_runtime *rt = m->rt;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < rt->root_list.count; i++) {
        uint32_t index = rt->root_list.data[i];
        zs_item *it = zs_item_at(rt, index);
        assert(it->object != NULL && (it->flags & ZS_ITEM_IN_ROOT_LIST));
        if (!item_is_root(it)) {
            it->flags &= ~ZS_ITEM_IN_ROOT_LIST;
            continue;
        }
        rt->root_list.data[kept++] = index;
        if (it->flags & ZS_ITEM_PERMANENT) zs_mark_push(m, index); /* escaped: scan only */
        else mark_reached(m, it, index);
    }
    rt->root_list.count = kept;
    rt->stats.roots = kept;
    mark_values(m); /* black values (when they are roots) */
}

/* Clear the mark filter for a new cycle (every object is unmarked now).
   Sized for max_objects once, so objects born during the mark need no
   bounds check; only the words below high_water were ever set. Transient
   work memory like the mark stacks: plain calloc, not counted. Without
   memory the marker simply reads every item. */
static void filter_reset(zs_runtime *rt) {
    size_t words = ((size_t)rt->max_objects + 63) / 64;
    if (rt->mark_filter == NULL) rt->mark_filter = calloc(words, sizeof(uint64_t));
    else memset(rt->mark_filter, 0, (((size_t)rt->high_water + 63) / 64) * sizeof(uint64_t));
}

/* Start a mark (the cycle's bookkeeping is done, gc_cycle.c): flip the
   parity (every object "maybe unreachable"), clear the filter and the
   stack, enter ZS_GC_MARKING and mark the roots. */
void zs_mark_begin(zs_runtime *rt) {
    rt->mark_parity ^= ZS_ITEM_MARK;
    filter_reset(rt);
    rt->mark_stack.count = 0;
    rt->mark_overflow = false;
    rt->phase = ZS_GC_MARKING;
    zs_publish_dying(rt);
    zs_marker m;
    zs_marker_init(&m, rt, &rt->mark_stack);
    mark_roots(&m);
    zs_marker_merge(rt, &m);
}

/* ======================================================================
 * Write barrier
 * ====================================================================== */

/* The write barrier's slow path: while marking, mark a newly stored target
   (and queue it for scanning), counting the barrier's work. */
void zs_gc_barrier_slow(zs_runtime *rt, zs_item *target) {
    if (rt->phase != ZS_GC_MARKING) return;
    rt->stats.barrier_slots++; /* the barrier's work, which tests count per store path */
    if (target == NULL || rt->barrier_disabled) return;
    if (target->flags & ZS_ITEM_PERMANENT) {
        /* An escaped permanent object is scanned as a root; nothing to mark. */
        return;
    }
    zs_marker m;
    zs_marker_init(&m, rt, &rt->mark_stack);
    uint32_t before = target->flags;
    mark_reached(&m, target, target->object->index);
    if (((before ^ target->flags) & ZS_ITEM_MARK) != 0 || m.clusters_marked) m.barrier_marks++;
    zs_marker_merge(rt, &m);
}

/* Queue a marked object for scanning on the runtime's stack (a dissolved
   cluster's members); overflow is noted for a rescan. */
void zs_gc_requeue(zs_runtime *rt, uint32_t index) {
    uint32_t limit = rt->mark_stack_limit ? rt->mark_stack_limit : UINT32_MAX;
    if (rt->mark_stack.count >= limit ||
        !mark_stack_push(&rt->mark_stack, zs_item_at(rt, index)->object))
        rt->mark_overflow = true;
}

/* ======================================================================
 * Check-mark (stress): a second, deliberately simple mark from the same
 * roots that reads every object's real references (cluster members
 * included) must find nothing the real mark left unmarked.
 * ====================================================================== */

typedef struct checkmark {
    zs_runtime *rt;
    uint8_t *seen;
    uint32_t *work;
    uint32_t count;
} checkmark;

static void check_reach(void *context, zs_ref *slot, bool killable) {
    checkmark *c = context;
    zs_ref ref = *slot;
    if (ref == ZS_NULL_REF) return;
    zs_item *it = zs_item_of(c->rt, ref);
    if (it == NULL || (it->flags & ZS_ITEM_PERMANENT)) return;
    if (killable && (it->flags & ZS_ITEM_GARBAGE)) return; /* the real mark nulls these */
    uint32_t index = ZS_REF_INDEX(ref);
    if (c->seen[index]) return;
    c->seen[index] = 1;
    c->work[c->count++] = index;
}

static void check_scan(checkmark *c, zs_object *object) {
    const zs_schema *schema = &object->cls->schema;
    check_reach(c, &object->outer, false);
    for (uint32_t i = 0; i < schema->strong_count; i++) {
        char *member = (char *)object + (schema->words[i] >> ZS_OP_SHIFT);
        if ((schema->words[i] & ZS_OP_MASK) == ZS_OP_OBJECT) check_reach(c, (zs_ref *)member, true);
        else zs_value_for_each_ref(schema->types[i], member, true, check_reach, c);
    }
}

/* Check the mark just finished: every object the simple mark reaches from
   the roots must be reachable (failures counted in rt->check_failures). */
void zs_check_mark(zs_runtime *rt) {
    checkmark c = {rt, calloc(rt->high_water + 1, 1),
                   malloc(((size_t)rt->high_water + 1) * sizeof(uint32_t)), 0};
    if (c.seen == NULL || c.work == NULL) goto done; /* no memory: skip the check */
    for (uint32_t i = 0; i < rt->root_list.count; i++) {
        uint32_t index = rt->root_list.data[i];
        zs_item *it = zs_item_at(rt, index);
        if (!item_is_root(it)) continue;
        if (it->flags & ZS_ITEM_PERMANENT) check_scan(&c, it->object);
        else if (!c.seen[index]) {
            c.seen[index] = 1;
            c.work[c.count++] = index;
        }
    }
    for (uint32_t i = 0; rt->black_roots && i < rt->value_capacity; i++)
        if (rt->values[i].value != NULL)
            zs_value_for_each_ref(rt->values[i].type, rt->values[i].value, true, check_reach, &c);
    while (c.count > 0) {
        uint32_t index = c.work[--c.count];
        zs_item *it = zs_item_at(rt, index);
        if (!zs_item_reachable(rt, it)) rt->check_failures++;
        check_scan(&c, it->object);
    }
done:
    free(c.seen);
    free(c.work);
}
