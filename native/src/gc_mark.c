/*
 * gc_mark.c -- reachability: the reachable-flag swap, root marking, the
 * schema-driven worklist marker with killable-reference nulling, clusters,
 * incremental steps with a write barrier, and gathering the unreachable.
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

/* Push onto a transient stack; false when it cannot grow. */
static bool stack_push(zs_u32_vec *vec, uint32_t value) {
    if (vec->count == vec->capacity) {
        uint32_t capacity = vec->capacity ? vec->capacity * 2 : 256;
        if (capacity <= vec->capacity) return false;
        uint32_t *grown = realloc(vec->data, (size_t)capacity * sizeof(uint32_t));
        if (grown == NULL) return false;
        vec->data = grown;
        vec->capacity = capacity;
    }
    vec->data[vec->count++] = value;
    return true;
}

static void stack_release(zs_u32_vec *vec) {
    free(vec->data);
    memset(vec, 0, sizeof *vec);
}

bool zs_mark_push(zs_marker *m, uint32_t index) {
    if (stack_push(m->stack, index)) return true;
    m->overflow = true;
    return false;
}

bool zs_mark_push_cluster(zs_marker *m, uint32_t cluster) {
    if (stack_push(&m->clusters, cluster)) return true;
    m->overflow = true; /* the rescan after an overflow marks what was missed */
    return false;
}

void zs_marker_init(zs_marker *m, zs_runtime *rt, zs_u32_vec *stack) {
    memset(m, 0, sizeof *m);
    m->rt = rt;
    m->stack = stack;
}

/* Fold a marker's counters into the cycle's statistics. */
static void marker_merge(zs_runtime *rt, zs_marker *m) {
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

bool zs_mark_claim(zs_marker *m, zs_item *it) {
    zs_runtime *rt = m->rt;
    if (!m->parallel) {
        if (item_is_marked(rt, it)) return false;
        item_set_marked(rt, it);
        return true;
    }
    /* Parallel markers race for the mark bit; only the winner scans. */
    if (rt->mark_parity)
        return (__atomic_fetch_or(&it->flags, ZS_ITEM_MARK, __ATOMIC_RELAXED) & ZS_ITEM_MARK) == 0;
    return (__atomic_fetch_and(&it->flags, ~ZS_ITEM_MARK, __ATOMIC_RELAXED) & ZS_ITEM_MARK) != 0;
}

/* Mark an item reached through a reference (clusters as a whole). */
static inline void mark_reached(zs_marker *m, zs_item *it, uint32_t index) {
    if (it->cluster_index >= 0) {
        if (!item_is_marked(m->rt, it)) zs_mark_cluster(m, it->cluster_index);
        return;
    }
    if (zs_mark_claim(m, it)) {
        m->marked++;
        if (!(it->flags & ZS_ITEM_LEAF)) zs_mark_push(m, index);
    }
}

void zs_mark_visit(zs_marker *m, zs_ref *slot, bool killable) {
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

void zs_mark_ref(zs_marker *m, zs_ref ref) {
    zs_mark_visit(m, &ref, false);
}

/* Read every strong reference of one object by interpreting its class's
   schema stream: a flat loop, no recursion, no calls through pointers. */
void zs_mark_scan(zs_marker *m, zs_object *object) {
    const zs_class *cls = object->cls;
    char *base = (char *)object;
    m->scanned++;
    zs_mark_visit(m, &object->outer, false);
    for (uint32_t i = 0; i < cls->strong_count; i++) {
        uint32_t word = cls->schema[i];
        char *member = base + (word >> ZS_OP_SHIFT);
        switch (word & ZS_OP_MASK) {
        case ZS_OP_OBJECT:
            zs_mark_visit(m, (zs_ref *)member, true);
            break;
        case ZS_OP_OBJECT_ARRAY: {
            zs_ref_array *array = (zs_ref_array *)member;
            for (uint32_t e = 0; e < array->count; e++) zs_mark_visit(m, &array->data[e], true);
            break;
        }
        default:
            assert(!"weak words sort after strong_count");
        }
    }
}

/* ======================================================================
 * Draining the work stack
 * ====================================================================== */

/* Objects scanned between two reads of the clock in a budgeted step. */
#define MARK_CLOCK_STRIDE 64u

/* After a failed push some marked objects were never scanned: scan every
   marked, non-clustered object again (idempotent, only slower). */
static void rescan_marked(zs_marker *m) {
    zs_runtime *rt = m->rt;
    for (uint32_t index = 0; index < rt->high_water; index++) {
        zs_item *it = zs_item_at(rt, index);
        if (it->object == NULL || (it->flags & ZS_ITEM_LEAF) || it->cluster_index >= 0) continue;
        bool scannable = (it->flags & ZS_ITEM_PERMANENT) ? (it->flags & ZS_ITEM_ESCAPED) != 0
                                                          : item_is_marked(rt, it);
        if (scannable) zs_mark_scan(m, it->object);
    }
}

/* Scan until the stack is empty (true) or the deadline passes (false). */
static bool drain(zs_marker *m, uint64_t deadline_ns) {
    zs_runtime *rt = m->rt;
    uint32_t since_clock = 0;
    for (;;) {
        while (m->stack->count > 0) {
            uint32_t index = m->stack->data[--m->stack->count];
            zs_mark_scan(m, zs_item_at(rt, index)->object);
            if (deadline_ns != 0 && ++since_clock == MARK_CLOCK_STRIDE) {
                since_clock = 0;
                if (zs_now_ns() >= deadline_ns) return false;
            }
        }
        if (!m->overflow && !rt->mark_overflow) return true;
        m->overflow = rt->mark_overflow = false;
        rescan_marked(m);
    }
}

/* ======================================================================
 * Cycle phases
 * ====================================================================== */

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
}

/* Start a cycle: dissolve stale clusters, flip the parity, mark the roots. */
static void begin_mark(zs_runtime *rt) {
    uint64_t cycle = rt->stats.cycle;
    rt->stats = (zs_gc_stats){0};
    rt->stats.cycle = cycle + 1;
    rt->stats.permanent_objects = rt->permanent_count;
    zs_clusters_dissolve_stale(rt);
    rt->mark_parity ^= ZS_ITEM_MARK;
    rt->mark_stack.count = 0;
    rt->mark_overflow = false;
    rt->phase = ZS_GC_MARKING;
    rt->incremental_start_ns = zs_now_ns();
    zs_marker m;
    zs_marker_init(&m, rt, &rt->mark_stack);
    mark_roots(&m);
    marker_merge(rt, &m);
}

/* Gather the unmarked objects from the cursor on, until the deadline. One
   sequential pass over the items; an object we cannot record (out of
   memory) simply survives this cycle. True when the pass is complete. */
#define GATHER_CLOCK_STRIDE 4096u
static bool gather(zs_runtime *rt, uint64_t deadline_ns) {
    for (uint32_t index = rt->gather_cursor; index < rt->high_water; index++) {
        if (deadline_ns != 0 && index % GATHER_CLOCK_STRIDE == 0 && index != rt->gather_cursor &&
            zs_now_ns() >= deadline_ns) {
            rt->gather_cursor = index;
            return false;
        }
        zs_item *it = zs_item_at(rt, index);
        if (it->object == NULL || (it->flags & (ZS_ITEM_PERMANENT | ZS_ITEM_DYING)) ||
            item_is_marked(rt, it))
            continue;
        assert(!item_is_root(it) && !(it->flags & ZS_ITEM_IN_ROOT_LIST));
        if (!zs_u32_push(rt, &rt->dying, index)) {
            item_set_marked(rt, it);
            continue;
        }
        if ((it->flags & ZS_ITEM_HAS_CONJUGATE) && !zs_ref_push(rt, &rt->expiring, zs_item_ref(it))) {
            rt->dying.count--;
            item_set_marked(rt, it);
            continue;
        }
        it->flags |= ZS_ITEM_DYING;
        if (it->flags & ZS_ITEM_CLUSTER_ROOT) zs_cluster_release_dying(rt, it->cluster_index);
    }
    rt->gather_cursor = 0;
    rt->stats.objects_unreachable = rt->dying.count;
    rt->stats.clusters = rt->live_clusters;
    rt->stats.live_objects = rt->live_objects;
    rt->phase = rt->dying.count > 0 ? ZS_GC_PURGE_PENDING : ZS_GC_IDLE;
    return true;
}

/* Finish a pending purge before a new cycle starts. */
static zs_status settle_purge(zs_runtime *rt) {
    if (rt->phase != ZS_GC_PURGE_PENDING) return ZS_OK;
    bool done = false;
    zs_status status = zs_gc_purge_locked(rt, 0, &done);
    assert(status != ZS_OK || done);
    return status;
}

/* Whether to use worker threads for this mark. */
static bool wants_parallel(const zs_runtime *rt) {
    return rt->mark_threads > 1 && rt->live_objects >= rt->parallel_threshold;
}

zs_status zs_gc_mark_and_gather(zs_runtime *rt) {
    ZS_LOCK(rt);
    zs_status status = ZS_OK;
    if (rt->in_destroy_hook || rt->collecting) {
        status = ZS_E_BUSY;
        goto done;
    }
    if ((status = settle_purge(rt)) != ZS_OK) goto done;
    rt->collecting = true;
    uint64_t t0 = zs_now_ns();
    if (rt->phase == ZS_GC_IDLE) begin_mark(rt);
    if (rt->phase == ZS_GC_MARKING) {
        zs_marker m;
        zs_marker_init(&m, rt, &rt->mark_stack);
        rt->stats.mark_threads = 1;
        if (!(wants_parallel(rt) && zs_mark_parallel(rt, &m))) drain(&m, 0);
        else if (rt->mark_overflow) drain(&m, 0); /* rescan what the workers could not queue */
        marker_merge(rt, &m);
        rt->stats.mark_steps++;
        rt->phase = ZS_GC_GATHERING;
    }
    uint64_t t1 = zs_now_ns();
    gather(rt, 0);
    rt->stats.mark_ns += t1 - t0;
    rt->stats.gather_ns += zs_now_ns() - t1;
    rt->collecting = false;
done:
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_gc_start_incremental(zs_runtime *rt) {
    ZS_LOCK(rt);
    zs_status status = ZS_OK;
    if (rt->in_destroy_hook || rt->collecting) status = ZS_E_BUSY;
    else if (rt->phase == ZS_GC_MARKING || rt->phase == ZS_GC_GATHERING) status = ZS_E_INVALID;
    else if ((status = settle_purge(rt)) == ZS_OK) begin_mark(rt);
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_gc_step(zs_runtime *rt, uint64_t budget_ns, int *out_done) {
    ZS_LOCK(rt);
    zs_status status = ZS_OK;
    bool done = false;
    uint64_t start = zs_now_ns();
    uint64_t deadline = budget_ns ? start + budget_ns : 0;
    if (rt->in_destroy_hook || rt->collecting) {
        status = ZS_E_BUSY;
    } else if (rt->phase == ZS_GC_IDLE) {
        status = ZS_E_INVALID; /* no mark pending */
    } else if (rt->phase == ZS_GC_PURGE_PENDING) {
        done = true;
    } else {
        rt->collecting = true;
        if (rt->phase == ZS_GC_MARKING) {
            zs_marker m;
            zs_marker_init(&m, rt, &rt->mark_stack);
            bool marked = drain(&m, deadline);
            marker_merge(rt, &m);
            rt->stats.mark_threads = 1;
            rt->stats.mark_ns += zs_now_ns() - start;
            if (marked) rt->phase = ZS_GC_GATHERING;
        }
        if (rt->phase == ZS_GC_GATHERING && (deadline == 0 || zs_now_ns() < deadline)) {
            uint64_t t = zs_now_ns();
            done = gather(rt, deadline);
            rt->stats.gather_ns += zs_now_ns() - t;
        }
        rt->stats.mark_steps++;
        rt->collecting = false;
    }
    ZS_UNLOCK(rt);
    if (out_done != NULL) *out_done = done;
    return status;
}

zs_gc_phase zs_gc_phase_of(zs_runtime *rt) {
    ZS_LOCK(rt);
    zs_gc_phase phase = rt->phase;
    ZS_UNLOCK(rt);
    return phase;
}

/* ======================================================================
 * Write barrier
 * ====================================================================== */

void zs_gc_barrier(zs_runtime *rt, zs_item *target) {
    if (target == NULL || rt->phase != ZS_GC_MARKING || rt->barrier_disabled) return;
    if (target->flags & ZS_ITEM_PERMANENT) {
        /* An escaped permanent object is scanned as a root; nothing to mark. */
        return;
    }
    zs_marker m;
    zs_marker_init(&m, rt, &rt->mark_stack);
    uint32_t before = target->flags;
    mark_reached(&m, target, target->object->index);
    if (((before ^ target->flags) & ZS_ITEM_MARK) != 0 || m.clusters_marked) m.barrier_marks++;
    marker_merge(rt, &m);
}

void zs_gc_requeue(zs_runtime *rt, uint32_t index) {
    if (!stack_push(&rt->mark_stack, index)) rt->mark_overflow = true;
}

zs_status zs_debug_set(zs_runtime *rt, uint32_t what, uint64_t value) {
    ZS_LOCK(rt);
    zs_status status = ZS_OK;
    if (what == ZS_DEBUG_DISABLE_BARRIER) rt->barrier_disabled = value != 0;
    else if (what == ZS_DEBUG_PARALLEL_THRESHOLD) rt->parallel_threshold = value;
    else status = ZS_E_INVALID;
    ZS_UNLOCK(rt);
    return status;
}

void zs_gc_release(zs_runtime *rt) {
    stack_release(&rt->mark_stack);
    zs_u32_release(rt, &rt->dying);
    zs_ref_release(rt, &rt->expiring);
    rt->dying_cursor = 0;
}
