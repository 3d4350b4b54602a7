/*
 * test_threads.c -- several threads using one runtime at once, as the
 * Python binding does (cffi releases the GIL in every native call): worker
 * threads grow, cut and check chains of objects, call into the "managed
 * side" and write strings and strong references, while another thread runs
 * full (parallel) and incremental collections, calls every object and
 * verifies the heap. The API serialises on the runtime's lock; calls into
 * the managed side run without it.
 *
 * The checks hold under any interleaving (nothing depends on timing or on
 * how many cycles run): a worker's chain hangs from its rooted anchor, so
 * no collection may free or change it. Workers record failures in their
 * own state (the runner is not thread-safe) and the main thread checks
 * them after joining. tools/tsan.sh runs this under ThreadSanitizer, which
 * checks that every access is ordered by the lock or is atomic.
 */
#include "../src/lock.h" /* white-box: the lock on its own */
#include "test_support.h"
#include "zsharp_debug.h"

#include <stdatomic.h>
#include <threads.h>

#define WORKERS 3u
#define ROUNDS 400u
#define MIN_CYCLES 8u /* workers go on until the collector finished this many */
#define CHAIN_MAX 24u

typedef struct shared {
    zs_runtime *rt;
    const zs_class *node;
    const zs_type *string;
    atomic_uint running; /* workers not finished yet */
    atomic_uint handled; /* calls the handler ran */
    atomic_uint cycles;  /* collection cycles finished */
} shared;

typedef struct worker {
    shared *s;
    uint64_t seed;
    unsigned failures;
    int first_line; /* of the first failed check */
    zs_ref anchor;  /* rooted; the chain hangs from its ref[0] */
    zs_ref chain[CHAIN_MAX];
    uint32_t length;
    uint32_t strong[CHAIN_MAX]; /* strong references this worker added */
    zs_ref text;                /* a black string value */
} worker;

#define WCHECK(w, cond)                                                                            \
    do {                                                                                           \
        if (!(cond) && (w)->failures++ == 0) (w)->first_line = __LINE__;                           \
    } while (0)

/* The managed side: store the object into its own weak slot (the object
   may be dying or gone by now: a call runs without the runtime's lock). */
static zs_status thread_handler(void *user, zs_runtime *rt, zs_ref object, const char *function,
                                void *params) {
    (void)function;
    (void)params;
    shared *s = user;
    atomic_fetch_add(&s->handled, 1);
    zs_status status = zs_store_ref(rt, object, NODE_WEAK, object);
    return status == ZS_OK || status == ZS_E_STALE || status == ZS_E_DYING ? ZS_OK
                                                                           : ZS_E_CALL_FAILED;
}

/* The holder of chain position k: the anchor, or the node before it. */
static zs_ref holder_of(const worker *w, uint32_t k) {
    return k == 0 ? w->anchor : w->chain[k - 1];
}

/* Walk the chain from the anchor: every node lives and links to the next. */
static void check_chain(worker *w) {
    zs_runtime *rt = w->s->rt;
    for (uint32_t k = 0; k <= w->length; k++) {
        node *n = node_of(rt, holder_of(w, k));
        WCHECK(w, n != NULL);
        if (n == NULL) return;
        WCHECK(w, n->ref[0] == (k < w->length ? w->chain[k] : ZS_NULL_REF));
    }
}

static int worker_main(void *arg) {
    worker *w = arg;
    zs_runtime *rt = w->s->rt;
    /* Counted, not timed: the work overlaps MIN_CYCLES collections on any machine. */
    for (uint32_t round = 0; round < ROUNDS || atomic_load(&w->s->cycles) < MIN_CYCLES; round++) {
        uint32_t what = rand_below(&w->seed, 6);
        if (what <= 1 && w->length < CHAIN_MAX) {
            zs_ref fresh = ZS_NULL_REF;
            zs_status status = zs_object_new(rt, w->s->node, ZS_NULL_REF, ZS_NAME_AUTO, 0, &fresh,
                                             NULL);
            /* The workers may outrun the collector (a busy machine) and fill the heap. */
            WCHECK(w, status == ZS_OK || status == ZS_E_CAPACITY);
            if (status != ZS_OK) continue;
            /* Linked at once: until then a collection may free it. */
            status = zs_store_ref(rt, holder_of(w, w->length), NODE_REF(0), fresh);
            WCHECK(w, status == ZS_OK || status == ZS_E_STALE || status == ZS_E_DYING);
            if (status == ZS_OK) w->chain[w->length++] = fresh;
        } else if (what == 2 && w->length > 0) {
            uint32_t k = rand_below(&w->seed, w->length);
            for (uint32_t i = k; i < w->length; i++)
                for (; w->strong[i] > 0; w->strong[i]--)
                    WCHECK(w, zs_release_strong_ref(rt, w->chain[i]) == ZS_OK);
            WCHECK(w, zs_store_ref(rt, holder_of(w, k), NODE_REF(0), ZS_NULL_REF) == ZS_OK);
            w->length = k;
        } else if (what == 3) {
            uint32_t k = w->length ? rand_below(&w->seed, w->length) : 0;
            zs_ref target = w->length ? w->chain[k] : w->anchor;
            WCHECK(w, zs_call_function(rt, target, "tick", NULL) == ZS_OK);
        } else if (what == 4) {
            char units[32];
            uint32_t length = rand_below(&w->seed, sizeof units);
            memset(units, 'a' + (int)(round % 26), length);
            zs_string *text = zs_value_resolve(rt, w->text);
            WCHECK(w, text != NULL && zs_string_assign(rt, ZS_NULL_REF, w->s->string, text, units,
                                                       length) == ZS_OK);
            WCHECK(w, text != NULL && text->length == length);
        } else if (w->length > 0) {
            uint32_t k = rand_below(&w->seed, w->length);
            WCHECK(w, zs_add_strong_ref(rt, w->chain[k]) == ZS_OK);
            w->strong[k]++;
        }
        check_chain(w);
    }
    for (uint32_t i = 0; i < w->length; i++)
        for (; w->strong[i] > 0; w->strong[i]--)
            WCHECK(w, zs_release_strong_ref(rt, w->chain[i]) == ZS_OK);
    WCHECK(w, zs_remove_from_root(rt, w->anchor) == ZS_OK);
    WCHECK(w, zs_value_free(rt, w->text) == ZS_OK);
    atomic_fetch_sub(&w->s->running, 1);
    return 0;
}

/* Workers mutate while this thread collects (parallel marks, incremental
   cycles in one-object steps so their stores meet the write barrier),
   calls every object and verifies the heap. */
static void test_threads_share_a_runtime(runner *t) {
    zs_runtime_options options;
    zs_runtime_default_options(&options);
    options.max_objects = 65536;
    options.mark_threads = 2;
    fixture fx;
    if (!fixture_open_options(t, &fx, &options)) return;
    zs_runtime *rt = fx.rt;
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_PARALLEL_THRESHOLD, 0));
    shared s = {.rt = rt, .node = fx.node};
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_STRING, 1, 1, &s.string));
    zs_set_call_handler(rt, thread_handler, &s);
    worker workers[WORKERS];
    thrd_t threads[WORKERS];
    atomic_store(&s.running, WORKERS);
    for (uint32_t i = 0; i < WORKERS; i++) {
        workers[i] = (worker){.s = &s, .seed = 0x9E3779B97F4A7C15ull * (i + 1)};
        workers[i].anchor = MAKE(t, rt, fx.node, ZS_NULL_REF);
        ROOT(t, rt, workers[i].anchor);
        void *value = NULL;
        CHECK_OK(t, zs_value_new(rt, s.string, &workers[i].text, &value));
    }
    uint32_t started = 0;
    for (; started < WORKERS; started++)
        if (start_thread(t, &threads[started], worker_main, &workers[started]) != thrd_success)
            break;
    CHECK_EQ(t, started, WORKERS);
    atomic_fetch_sub(&s.running, WORKERS - started);
    uint64_t cycles = 0;
    do { /* at least one cycle, however fast the workers are */
        if (cycles % 2 == 0) {
            CHECK_OK(t, zs_collect_garbage(rt));
        } else {
            CHECK_OK(t, zs_gc_start_incremental(rt));
            int done = 0;
            for (uint32_t step = 0; !done && step < 1000000; step++)
                CHECK_OK(t, zs_gc_step_bounded(rt, 0, 1, &done));
            CHECK(t, done);
            CHECK_OK(t, zs_gc_purge(rt, 0, &done));
        }
        uint32_t called = 0;
        zs_status status = zs_call_each(rt, fx.node, "tick", NULL, &called);
        CHECK(t, status == ZS_OK);
        VERIFY(t, rt);
        cycles++;
        atomic_fetch_add(&s.cycles, 1);
    } while (atomic_load(&s.running) > 0);
    for (uint32_t i = 0; i < started; i++) thrd_join(threads[i], NULL);
    for (uint32_t i = 0; i < WORKERS; i++) {
        if (workers[i].failures > 0)
            fprintf(stderr, "worker %u: %u failed checks, the first at line %d\n", i,
                    workers[i].failures, workers[i].first_line);
        CHECK_EQ(t, workers[i].failures, 0);
    }
    CHECK(t, cycles >= MIN_CYCLES && atomic_load(&s.handled) > 0);
    COLLECT(t, rt);
    CHECK_EQ(t, zs_live_objects(rt), 0);
    CHECK_EQ(t, zs_calls_in_progress(rt), 0);
    fixture_close(&fx);
}

/* ======================================================================
 * The runtime lock (native/src/lock.h) on its own
 * ====================================================================== */

#define LOCK_THREADS 4u
#define LOCK_ROUNDS 20000u

typedef struct lock_shared {
    zs_lock lock;
    uint64_t counter; /* plain: only ever touched under the lock */
    uint32_t inside;  /* plain: threads inside; not 0 on entry means exclusion broke */
    atomic_uint clashes;
    atomic_uint got; /* the sleeper took the lock */
} lock_shared;

/* Take the lock, then again (recursion), bump the plain counter, give both. */
static int lock_worker(void *arg) {
    lock_shared *s = arg;
    for (uint32_t i = 0; i < LOCK_ROUNDS; i++) {
        zs_lock_take(&s->lock);
        if (s->inside++ != 0) atomic_fetch_add(&s->clashes, 1);
        zs_lock_take(&s->lock);
        s->counter++;
        zs_lock_give(&s->lock);
        s->inside--;
        zs_lock_give(&s->lock);
    }
    return 0;
}

/* Threads taking the lock (recursively) in turn never overlap and lose no
   update of a plain counter; under tools/tsan.sh every access is ordered. */
static void test_lock_excludes_and_recurses(runner *t) {
    lock_shared s = {.counter = 0};
    CHECK(t, zs_lock_init(&s.lock));
    thrd_t threads[LOCK_THREADS];
    uint32_t started = 0;
    for (; started < LOCK_THREADS; started++)
        if (start_thread(t, &threads[started], lock_worker, &s) != thrd_success) break;
    CHECK_EQ(t, started, LOCK_THREADS);
    for (uint32_t i = 0; i < started; i++) thrd_join(threads[i], NULL);
    CHECK_EQ(t, s.counter, (uint64_t)started * LOCK_ROUNDS);
    CHECK_EQ(t, atomic_load(&s.clashes), 0);
    CHECK_EQ(t, s.lock.owner, 0);
    CHECK_EQ(t, s.lock.depth, 0);
    zs_lock_destroy(&s.lock);
}

static int lock_sleeper(void *arg) {
    lock_shared *s = arg;
    zs_lock_take(&s->lock);
    atomic_store(&s->got, 1);
    zs_lock_give(&s->lock);
    return 0;
}

/* A thread that finds the lock held goes to sleep (counted in sleepers),
   does not get it while it is held, and gets it once it is given back. */
static void test_lock_sleeper_waits_for_the_owner(runner *t) {
    lock_shared s = {.counter = 0};
    CHECK(t, zs_lock_init(&s.lock));
    zs_lock_take(&s.lock);
    zs_lock_take(&s.lock); /* held twice: one give must not free it */
    thrd_t sleeper;
    if (start_thread(t, &sleeper, lock_sleeper, &s) != thrd_success) {
        CHECK(t, false);
        zs_lock_give(&s.lock);
        zs_lock_give(&s.lock);
        zs_lock_destroy(&s.lock);
        return;
    }
    /* Its spins end while the lock is held; then it counts itself asleep. */
    while (__atomic_load_n(&s.lock.sleepers, __ATOMIC_SEQ_CST) == 0) thrd_yield();
    CHECK_EQ(t, atomic_load(&s.got), 0);
    zs_lock_give(&s.lock);
    CHECK_EQ(t, atomic_load(&s.got), 0); /* still held once */
    zs_lock_give(&s.lock);
    thrd_join(sleeper, NULL);
    CHECK_EQ(t, atomic_load(&s.got), 1);
    CHECK_EQ(t, s.lock.sleepers, 0);
    CHECK_EQ(t, s.lock.owner, 0);
    zs_lock_destroy(&s.lock);
}

const test_case thread_tests[] = {
    THREADED_TEST(test_threads_share_a_runtime),
    THREADED_TEST(test_lock_excludes_and_recurses),
    THREADED_TEST(test_lock_sleeper_waits_for_the_owner),
};
const size_t thread_test_count = sizeof thread_tests / sizeof thread_tests[0];
