/*
 * gc_cycle.c -- the collection's protocol: a cycle's phases (idle, marking,
 * gathering, purge pending) and the public calls that move it on, each
 * refused while another collection or a hand-over runs: a full collection
 * (mark and gather in one call, zs_collect_garbage with the hand-over and
 * the purge), the incremental cycle's start and bounded steps, the purge
 * calls, the phase and the statistics.
 */
#include "internal.h"

#include <stdlib.h>

/* Start a cycle: its statistics, stale clusters dissolved, then the mark
   of the roots (zs_mark_begin). */
static void begin_mark(zs_runtime *rt) {
    uint64_t cycle = rt->stats.cycle;
    rt->stats = (zs_gc_stats){0};
    rt->stats.cycle = cycle + 1;
    rt->stats.objects_freed_unshared = rt->freed_unshared;
    rt->freed_unshared = 0;
    rt->stats.permanent_objects = rt->permanent_count;
    zs_clusters_dissolve_stale(rt);
    zs_mark_begin(rt);
}

/* Finish a pending purge before a new cycle starts. */
static zs_status settle_purge(zs_runtime *rt) {
    if (rt->phase != ZS_GC_PURGE_PENDING) return ZS_OK;
    bool done = false;
    zs_status status = zs_gc_purge_locked(rt, 0, 0, &done);
    assert(status != ZS_OK || done);
    return status;
}

/* Whether to use worker threads for this mark. */
static bool wants_parallel(const zs_runtime *rt) {
    return rt->mark_threads > 1 && rt->live_objects >= rt->parallel_threshold;
}

/* Mark and gather in one call (a full collection's first half): hand a
   pending purge's objects over and finish that purge, start a cycle if
   none is pending, mark to the end (in parallel on a big heap), gather. */
zs_status zs_gc_mark_and_gather(zs_runtime *rt) {
    bool counted = false;
    ZS_LOCK(rt);
    zs_status status = ZS_OK;
    if (rt->in_destroy_hook || rt->collecting || rt->handing_over > 0) {
        status = ZS_E_BUSY;
        goto done;
    }
    /* A pending purge's objects go to the managed side first (called from
       zs_collect_garbage, the lock is held twice: that did it already). */
    if (rt->lock.depth == 1) status = zs_gc_hand_over(rt, UINT32_MAX, &counted, NULL);
    if (status == ZS_E_STALE) goto done;
    if (rt->collecting || rt->handing_over > 0) { /* started meanwhile, unlocked */
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
        if (!(wants_parallel(rt) && zs_mark_parallel(rt, &m))) zs_mark_drain(&m, 0);
        else if (m.overflow || rt->mark_overflow)
            zs_mark_drain(&m, 0); /* rescan what the workers could not queue (serially) */
        zs_marker_merge(rt, &m);
        rt->stats.mark_steps++;
        if (rt->check_marks) zs_check_mark(rt);
        rt->phase = ZS_GC_GATHERING;
        zs_publish_dying(rt);
    }
    uint64_t t1 = zs_now_ns();
    zs_gather(rt, 0);
    rt->stats.mark_ns += t1 - t0;
    rt->stats.gather_ns += zs_now_ns() - t1;
    rt->collecting = false;
done:
    ZS_UNLOCK(rt);
    if (counted) zs_call_leave(rt);
    return status;
}

/* Start an incremental cycle: settle a pending purge, flip the parity and
   mark the roots; the steps do the rest. */
zs_status zs_gc_start_incremental(zs_runtime *rt) {
    bool counted = false;
    ZS_LOCK(rt);
    zs_status status = ZS_OK;
    if (rt->in_destroy_hook || rt->collecting || rt->handing_over > 0) status = ZS_E_BUSY;
    else if (rt->phase == ZS_GC_PURGE_PENDING)
        status = zs_gc_hand_over(rt, UINT32_MAX, &counted, NULL); /* the lock released meanwhile */
    if (status == ZS_E_EXPIRY_PENDING) status = ZS_OK;            /* settle_purge says so */
    if (status == ZS_OK && (rt->collecting || rt->handing_over > 0)) status = ZS_E_BUSY;
    else if (status == ZS_OK && (rt->phase == ZS_GC_MARKING || rt->phase == ZS_GC_GATHERING))
        status = ZS_E_INVALID;
    else if (status == ZS_OK && (status = settle_purge(rt)) == ZS_OK) begin_mark(rt);
    ZS_UNLOCK(rt);
    if (counted) zs_call_leave(rt);
    return status;
}

/* One incremental step: mark (serially) within the time budget or up to
   max_objects, then gather as far as the budget allows; *out_done once the
   gather is complete (a purge may then be pending). */
zs_status zs_gc_step_bounded(zs_runtime *rt, uint64_t budget_ns, uint32_t max_objects,
                             int *out_done) {
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
        /* A step that starts in the gathering phase always gathers a chunk,
           however small the budget, so every step makes progress. */
        bool gathering_at_start = rt->phase == ZS_GC_GATHERING;
        if (rt->phase == ZS_GC_MARKING) {
            zs_marker m;
            zs_marker_init(&m, rt, &rt->mark_stack);
            m.step_objects = max_objects != 0 ? max_objects : deadline != 0 ? rt->step_objects : 0;
            bool marked = zs_mark_drain(&m, deadline);
            zs_marker_merge(rt, &m);
            rt->stats.mark_threads = 1;
            rt->stats.mark_ns += zs_now_ns() - start;
            if (marked && rt->check_marks) zs_check_mark(rt);
            if (marked) {
                rt->phase = ZS_GC_GATHERING;
                zs_publish_dying(rt);
            }
        }
        /* The gather is bounded by time only: a work-bounded step that
           completes the mark gathers to the end, so it stays deterministic. */
        if (rt->phase == ZS_GC_GATHERING &&
            (gathering_at_start || deadline == 0 || zs_now_ns() < deadline)) {
            uint64_t t = zs_now_ns();
            done = zs_gather(rt, deadline);
            rt->stats.gather_ns += zs_now_ns() - t;
        }
        rt->stats.mark_steps++;
        rt->collecting = false;
    }
    ZS_UNLOCK(rt);
    if (out_done != NULL) *out_done = done;
    return status;
}

/* zs_gc_step_bounded with no object bound. */
zs_status zs_gc_step(zs_runtime *rt, uint64_t budget_ns, int *out_done) {
    return zs_gc_step_bounded(rt, budget_ns, 0, out_done);
}

/* The cycle's phase now. */
zs_gc_phase zs_gc_phase_of(zs_runtime *rt) {
    ZS_LOCK(rt);
    zs_gc_phase phase = rt->phase;
    ZS_UNLOCK(rt);
    return phase;
}

/* Hand the expiring list over and purge, within a time and object budget. */
zs_status zs_gc_purge_bounded(zs_runtime *rt, uint64_t budget_ns, uint32_t max_objects,
                              int *out_done) {
    bool done = false, counted = false;
    ZS_LOCK(rt);
    zs_status status = rt->in_destroy_hook ? ZS_E_BUSY : ZS_OK;
    if (status == ZS_OK && rt->handing_over == 0)
        status = zs_gc_hand_over(rt, UINT32_MAX, &counted, NULL);
    if (status == ZS_OK || status == ZS_E_EXPIRY_PENDING)
        status = zs_gc_purge_locked(rt, budget_ns, max_objects, &done);
    ZS_UNLOCK(rt);
    if (counted) zs_call_leave(rt);
    if (out_done != NULL) *out_done = done;
    return status;
}

/* zs_gc_purge_bounded with no object bound. */
zs_status zs_gc_purge(zs_runtime *rt, uint64_t budget_ns, int *out_done) {
    return zs_gc_purge_bounded(rt, budget_ns, 0, out_done);
}

/* A full collection in one call: a pending purge's objects handed over,
   mark and gather, hand the dying over, purge. */
zs_status zs_collect_garbage(zs_runtime *rt) {
    bool done = false, counted = false;
    ZS_LOCK(rt);
    zs_status status = rt->in_destroy_hook || rt->handing_over > 0 ? ZS_E_BUSY : ZS_OK;
    /* A pending purge first (zs_gc_mark_and_gather would finish it, but
       could not hand its objects over with the lock taken twice). */
    if (status == ZS_OK) status = zs_gc_hand_over(rt, UINT32_MAX, &counted, NULL);
    if (status == ZS_OK || status == ZS_E_EXPIRY_PENDING) status = zs_gc_mark_and_gather(rt);
    if (status == ZS_OK) status = zs_gc_hand_over(rt, UINT32_MAX, &counted, NULL);
    if (status == ZS_OK || status == ZS_E_EXPIRY_PENDING)
        status = zs_gc_purge_locked(rt, 0, 0, &done);
    ZS_UNLOCK(rt);
    if (counted) zs_call_leave(rt);
    return status;
}

/* The statistics of the current (or last) cycle. */
void zs_gc_get_stats(zs_runtime *rt, zs_gc_stats *out) {
    ZS_LOCK(rt);
    *out = rt->stats;
    ZS_UNLOCK(rt);
}

/* Free the collector's lists and transient work memory (runtime teardown). */
void zs_gc_release(zs_runtime *rt) {
    zs_mark_stack_release(&rt->mark_stack);
    free(rt->mark_filter);
    rt->mark_filter = NULL;
    zs_u32_release(rt, &rt->dying);
    zs_ref_release(rt, &rt->expiring);
    rt->dying_cursor = 0;
}
