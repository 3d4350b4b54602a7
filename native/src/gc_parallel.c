/*
 * gc_parallel.c -- parallel marking for full collections of large heaps.
 *
 * Every worker (the collecting thread is worker 0) owns a stack and claims
 * mark bits atomically (gc_mark.c: through the mark filter, a word at a
 * time), so each object is scanned by exactly one worker (which also makes
 * killable-reference nulling race-free). A worker takes its next batch from
 * the top of its stack under the stack's lock, once per batch; an idle
 * worker steals the bottom half of another's stack under the same lock, so
 * a worker preempted by another process (a busy second core) does not hold
 * its backlog up. Idle workers wait a little, or until a busy one wakes
 * them, and look again. Marking ends when every worker is idle at once.
 * The survivors are exactly those of the serial marker: both mark the
 * closure of the roots.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STEAL_MAX 512u        /* objects taken from a victim at a time */
#define IDLE_RETRY_NS 100000u /* an idle worker looks for work again after this */
#define FILTER_CLAIMS_OFF 8u  /* parallel marks claiming through flags after a poor filter one */

/* Take up to half of the objects another worker handed over (the oldest:
   the bottom of its stack, usually the roots of big subtrees) onto this
   worker's empty stack; false when every other stack is empty. The victim
   need not be running: a worker preempted by another process loses its
   backlog to the idle one instead of holding up the mark. */
static bool steal(zs_marker *m) {
    zs_mark_pool *pool = m->pool;
    zs_object *loot[STEAL_MAX];
    for (uint32_t k = 1; k < pool->workers; k++) {
        zs_marker *victim = &pool->markers[(m->worker + k) % pool->workers];
        mtx_lock(victim->lock);
        zs_mark_stack *stack = victim->stack;
        uint32_t queued = stack->shared - stack->base; /* only the part its owner handed over */
        uint32_t n = queued < 2 ? queued : queued / 2;
        if (n > STEAL_MAX) n = STEAL_MAX;
        if (n > 0) memcpy(loot, stack->data + stack->base, (size_t)n * sizeof(zs_object *));
        stack->base += n;
        mtx_unlock(victim->lock);
        if (n == 0) continue;
        mtx_lock(m->lock);
        for (uint32_t i = 0; i < n; i++)
            zs_mark_push_object(m, loot[i]); /* a failure sets overflow */
        mtx_unlock(m->lock);
        return true;
    }
    return false;
}

/* Find more work for an idle worker: steal, else wait (a while, then look
   again); false when marking is over (every worker idle at once: no stack
   holds work, and nobody is scanning). */
static bool take(zs_marker *m) {
    zs_mark_pool *pool = m->pool;
    for (;;) {
        if (steal(m)) return true;
        mtx_lock(&pool->lock);
        if (pool->done) break;
        pool->idle++;
        if (pool->idle == pool->workers) {
            pool->done = true;
            cnd_broadcast(&pool->wake);
            break;
        }
        __atomic_add_fetch(&pool->wanted, 1, __ATOMIC_RELAXED);
        struct timespec until;
        timespec_get(&until, TIME_UTC);
        until.tv_nsec += IDLE_RETRY_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        cnd_timedwait(&pool->wake, &pool->lock, &until);
        __atomic_sub_fetch(&pool->wanted, 1, __ATOMIC_RELAXED);
        bool done = pool->done;
        if (!done) pool->idle--;
        mtx_unlock(&pool->lock);
        if (done) return false;
    }
    mtx_unlock(&pool->lock);
    return false;
}

/* One worker: scan its own work, steal or wait when it runs out. */
static int worker(void *arg) {
    zs_marker *m = arg;
    do {
        zs_mark_drain(m, 0);
    } while (take(m));
    return 0;
}

static uint32_t default_workers(void) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores<1 ? 1u : cores>(long) ZS_MAX_MARK_WORKERS ? ZS_MAX_MARK_WORKERS : (uint32_t)cores;
}

uint32_t zs_default_mark_threads(void) { return default_workers(); }

bool zs_mark_parallel(zs_runtime *rt, zs_marker *main) {
    uint32_t wanted = rt->mark_threads < ZS_MAX_MARK_WORKERS ? rt->mark_threads
                                                             : ZS_MAX_MARK_WORKERS;
    if (wanted < 2) return false;
    zs_mark_pool pool;
    memset(&pool, 0, sizeof pool);
    if (mtx_init(&pool.lock, mtx_plain) != thrd_success) return false;
    if (cnd_init(&pool.wake) != thrd_success) {
        mtx_destroy(&pool.lock);
        return false;
    }
    uint32_t locks = 0;
    while (locks < wanted && mtx_init(&pool.slots[locks].lock, mtx_plain) == thrd_success) locks++;
    if (locks < wanted) wanted = locks;
    zs_marker markers[ZS_MAX_MARK_WORKERS];
    thrd_t threads[ZS_MAX_MARK_WORKERS];
    pool.markers = markers;
    /* Every marker exists (with an empty stack) before any thread starts, so
       thieves may look at all of them; worker 0 is this thread and starts
       with the roots' work. */
    for (uint32_t i = 0; i < wanted; i++) {
        if (i == 0) {
            markers[0] = *main;
            pool.slots[0].stack = *main->stack; /* moved back below */
            markers[0].stack = &pool.slots[0].stack;
        } else {
            zs_marker_init(&markers[i], rt, &pool.slots[i].stack);
        }
        markers[i].parallel = true;
        markers[i].pool = &pool;
        markers[i].lock = &pool.slots[i].lock;
        markers[i].worker = i;
        markers[i].idle_waiting = &pool.wanted;
    }
    /* Claim through the mark filter (a word of adjacent objects per atomic
       OR) unless the last parallel mark that did found too few objects per
       OR: then contention on the filter's lines costs more than it saves
       (a random graph), and the next FILTER_CLAIMS_OFF marks claim through
       item flags. The choice holds for the whole mark: each object is
       claimed by one mechanism. */
    const bool by_filter = rt->mark_filter != NULL && rt->filter_claims_off == 0;
    if (rt->filter_claims_off > 0) rt->filter_claims_off--;
    for (uint32_t i = 0; i < wanted; i++) markers[i].claim_by_filter = by_filter;
    pool.workers = wanted;
    uint32_t started = 1;
    for (uint32_t i = 1; i < wanted; i++) {
        if (thrd_create(&threads[i], worker, &markers[i]) != thrd_success) break;
        started++;
    }
    if (started < wanted) {
        /* The markers that did not start hold no work: count them idle. */
        mtx_lock(&pool.lock);
        pool.idle += wanted - started;
        mtx_unlock(&pool.lock);
    }
    worker(&markers[0]);
    for (uint32_t i = 1; i < started; i++) thrd_join(threads[i], NULL);
    assert(pool.done);

    uint64_t claims = 0, ors = 0;
    for (uint32_t i = 0; i < wanted; i++) {
        claims += markers[i].filter_claims;
        ors += markers[i].filter_ors;
    }
    if (by_filter && ors > 0 && claims * 2 < ors * 3) rt->filter_claims_off = FILTER_CLAIMS_OFF;

    /* Fold the workers' counters into the main marker. */
    zs_mark_stack *main_stack = main->stack;
    *main_stack = pool.slots[0].stack; /* empty, its storage kept for the next cycle */
    *main = markers[0];
    main->stack = main_stack;
    main->parallel = false;
    main->pool = NULL;
    main->lock = NULL;
    main->worker = 0;
    main->idle_waiting = NULL;
    main->claim_by_filter = false;
    main->filter_claims = main->filter_ors = 0;
    assert(main->stack->count == 0 && main->stack->base == 0 && main->stack->shared == 0);
    for (uint32_t i = 1; i < wanted; i++) {
        main->scanned += markers[i].scanned;
        main->marked += markers[i].marked;
        main->killed += markers[i].killed;
        main->clusters_marked += markers[i].clusters_marked;
        main->overflow |= markers[i].overflow;
        free(markers[i].clusters.data);
        zs_mark_stack_release(&pool.slots[i].stack);
    }
    rt->stats.mark_threads = started;
    for (uint32_t i = 0; i < wanted; i++) mtx_destroy(&pool.slots[i].lock);
    cnd_destroy(&pool.wake);
    mtx_destroy(&pool.lock);
    return true;
}
