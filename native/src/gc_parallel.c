/*
 * gc_parallel.c -- parallel marking for full collections of large heaps.
 *
 * Every worker (the collecting thread is worker 0) owns a local stack and
 * claims mark bits atomically, so each object is scanned by exactly one
 * worker (which also makes killable-reference nulling race-free). Workers
 * that have plenty of work move a batch to a shared pool; idle workers take
 * from it. Marking ends when every worker is idle and the pool is empty.
 * The survivors are exactly those of the serial marker: both mark the
 * closure of the roots.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_MARK_WORKERS 64u
#define SHARE_BATCH 128u /* objects moved to the pool at a time */

typedef struct zs_mark_pool {
    mtx_t lock;
    cnd_t wake;
    zs_object **items;
    uint32_t count;
    uint32_t capacity;
    uint32_t workers;
    uint32_t idle;
    bool done;
    bool failed; /* a pool push failed: the caller rescans */
    uint32_t wanted; /* idle workers waiting: a hint for sharing */
} zs_mark_pool;

/* Move a batch from the bottom of a busy worker's stack into the pool. */
static void share(zs_marker *m);

void zs_mark_maybe_share(zs_marker *m) {
    if (m->stack->count >= 2 * SHARE_BATCH && __atomic_load_n(&m->pool->wanted, __ATOMIC_RELAXED) > 0)
        share(m);
}

static void share(zs_marker *m) {
    zs_mark_pool *pool = m->pool;
    mtx_lock(&pool->lock);
    if (pool->count + SHARE_BATCH > pool->capacity) {
        uint32_t capacity = pool->capacity ? pool->capacity * 2 : 4096;
        zs_object **grown = realloc(pool->items, (size_t)capacity * sizeof(zs_object *));
        if (grown == NULL) {
            mtx_unlock(&pool->lock);
            return; /* keep the work local */
        }
        pool->items = grown;
        pool->capacity = capacity;
    }
    memcpy(pool->items + pool->count, m->stack->data, SHARE_BATCH * sizeof(zs_object *));
    pool->count += SHARE_BATCH;
    m->stack->count -= SHARE_BATCH;
    memmove(m->stack->data, m->stack->data + SHARE_BATCH, m->stack->count * sizeof(zs_object *));
    cnd_broadcast(&pool->wake);
    mtx_unlock(&pool->lock);
}

/* Take a batch from the pool; false when marking is over. */
static bool take(zs_marker *m) {
    zs_mark_pool *pool = m->pool;
    mtx_lock(&pool->lock);
    for (;;) {
        if (pool->count > 0) {
            uint32_t n = pool->count < SHARE_BATCH ? pool->count : SHARE_BATCH;
            for (uint32_t i = 0; i < n; i++)
                if (!zs_mark_push_object(m, pool->items[--pool->count])) break;
            mtx_unlock(&pool->lock);
            return true;
        }
        if (pool->done) break;
        pool->idle++;
        if (pool->idle == pool->workers) {
            pool->done = true;
            cnd_broadcast(&pool->wake);
            break;
        }
        __atomic_add_fetch(&pool->wanted, 1, __ATOMIC_RELAXED);
        cnd_wait(&pool->wake, &pool->lock);
        __atomic_sub_fetch(&pool->wanted, 1, __ATOMIC_RELAXED);
        if (!pool->done) pool->idle--;
    }
    mtx_unlock(&pool->lock);
    return false;
}

/* One worker: scan local work, share when others are idle, take when empty. */
static int worker(void *arg) {
    zs_marker *m = arg;
    do {
        zs_mark_drain(m, 0);
    } while (take(m));
    return 0;
}

static uint32_t default_workers(void) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores < 1 ? 1u : cores > (long)MAX_MARK_WORKERS ? MAX_MARK_WORKERS : (uint32_t)cores;
}

uint32_t zs_default_mark_threads(void) { return default_workers(); }

bool zs_mark_parallel(zs_runtime *rt, zs_marker *main) {
    uint32_t wanted = rt->mark_threads < MAX_MARK_WORKERS ? rt->mark_threads : MAX_MARK_WORKERS;
    if (wanted < 2) return false;
    zs_mark_pool pool;
    memset(&pool, 0, sizeof pool);
    if (mtx_init(&pool.lock, mtx_plain) != thrd_success) return false;
    if (cnd_init(&pool.wake) != thrd_success) {
        mtx_destroy(&pool.lock);
        return false;
    }
    zs_marker markers[MAX_MARK_WORKERS];
    zs_mark_stack stacks[MAX_MARK_WORKERS];
    thrd_t threads[MAX_MARK_WORKERS];
    memset(stacks, 0, sizeof stacks);
    /* Worker 0 is this thread and starts with the roots' work. */
    markers[0] = *main;
    markers[0].parallel = true;
    markers[0].pool = &pool;
    uint32_t started = 1;
    pool.workers = wanted; /* lowered below if a thread cannot start */
    for (uint32_t i = 1; i < wanted; i++) {
        zs_marker_init(&markers[i], rt, &stacks[i]);
        markers[i].parallel = true;
        markers[i].pool = &pool;
        if (thrd_create(&threads[i], worker, &markers[i]) != thrd_success) break;
        started++;
    }
    if (started < wanted) {
        mtx_lock(&pool.lock);
        pool.workers = started;
        mtx_unlock(&pool.lock);
    }
    worker(&markers[0]);
    for (uint32_t i = 1; i < started; i++) thrd_join(threads[i], NULL);

    /* Fold the workers' counters into the main marker. */
    *main = markers[0];
    main->parallel = false;
    main->pool = NULL;
    for (uint32_t i = 1; i < started; i++) {
        main->scanned += markers[i].scanned;
        main->marked += markers[i].marked;
        main->killed += markers[i].killed;
        main->clusters_marked += markers[i].clusters_marked;
        main->overflow |= markers[i].overflow;
        free(markers[i].clusters.data);
        zs_mark_stack_release(&stacks[i]);
    }
    rt->stats.mark_threads = started;
    free(pool.items);
    cnd_destroy(&pool.wake);
    mtx_destroy(&pool.lock);
    return true;
}
