/*
 * test_support.h -- the runner, CHECK macros, the Node/Leaf fixture and the
 * small helpers shared by the C test files (test_heap.c, test_gc_advanced.c).
 *
 * A tiny self-contained runner: CHECK* macros record failures with file:line
 * into a runner struct passed to every test; a test passes when none of its
 * checks failed. Every collection (and purge) is followed by zs_heap_verify,
 * checked to return ZS_OK.
 *
 * main() lives in test_heap.c and runs its own table followed by every other
 * file's table declared here (advanced_tests[] from test_gc_advanced.c,
 * thread_tests[] from test_threads.c, fuzz_finding_tests[] from
 * test_fuzz_findings.c, engine_tests[] from test_engine.c, tick_tests[] from
 * test_ticks.c, broadcast_tests[] from test_broadcast.c).
 */
#ifndef ZSHARP_TEST_SUPPORT_H
#define ZSHARP_TEST_SUPPORT_H

#include "zsharp.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <time.h>

/* ======================================================================
 * Runner
 * ====================================================================== */

typedef struct runner {
    const char *test;  /* name of the running test */
    unsigned failures; /* failed checks in the running test */
    unsigned long checks;
    bool started_threads; /* the running test started a thread (start_thread, a parallel mark) */
} runner;

/* Failures printed per test; the rest are only counted. */
#define MAX_REPORTED_FAILURES 20u

/* Count a check; true when it failed and its message should be printed
   (the "file:line: [test] CHECK failed: " prefix is already written). */
bool report(runner *t, bool ok, const char *file, int line);
void check_at(runner *t, bool ok, const char *expr, const char *file, int line);
void check_eq_at(runner *t, uint64_t got, uint64_t want, const char *expr_got,
                 const char *expr_want, const char *file, int line);
void check_status_at(runner *t, zs_status got, zs_status want, const char *expr, const char *file,
                     int line);

#define CHECK(t, cond) check_at((t), (cond) ? true : false, #cond, __FILE__, __LINE__)
#define CHECK_EQ(t, got, want)                                                                     \
    check_eq_at((t), (uint64_t)(got), (uint64_t)(want), #got, #want, __FILE__, __LINE__)
#define CHECK_STATUS(t, expr, want) check_status_at((t), (expr), (want), #expr, __FILE__, __LINE__)
#define CHECK_OK(t, expr) CHECK_STATUS(t, expr, ZS_OK)

/* A test: a name (used by the command-line filter), a function, and
   whether it starts threads (THREADED_TEST: the ThreadSanitizer smoke run,
   tools/tsan.sh --smoke, runs exactly those; the runner fails a test whose
   tag does not match what it did). */
typedef struct test_case {
    const char *name;
    void (*run)(runner *t);
    bool threaded;
} test_case;

#define TEST(fn) {#fn, fn, false}
#define THREADED_TEST(fn) {#fn, fn, true}

/* thrd_create, noted in the runner: tests start their threads through it
   (tests/tooling/test_native_c_suite.py checks that no other call does). */
int start_thread(runner *t, thrd_t *thread, thrd_start_t function, void *argument);

/* The tests of test_gc_advanced.c (clusters, incremental, parallel marking). */
extern const test_case advanced_tests[];
extern const size_t advanced_test_count;
/* test_threads.c: several threads on one runtime. */
extern const test_case thread_tests[];
extern const size_t thread_test_count;
/* test_fuzz_findings.c: regressions for what the C API fuzzer found. */
extern const test_case fuzz_finding_tests[];
extern const size_t fuzz_finding_test_count;
/* test_engine.c: the sample engine (native/engine) with no scripting layer. */
extern const test_case engine_tests[];
extern const size_t engine_test_count;
/* test_ticks.c: the tick manager with no scripting layer. */
extern const test_case tick_tests[];
extern const size_t tick_test_count;
/* test_broadcast.c: delegates called from native code with no scripting layer. */
extern const test_case broadcast_tests[];
extern const size_t broadcast_test_count;

/* ======================================================================
 * Heap helpers: verify after every collection
 * ====================================================================== */

/* zs_heap_verify, checked; a last mark that ran on several threads is
   noted in the runner (a parallel mark starts threads). */
void verify_at(runner *t, zs_runtime *rt, const char *file, int line);
void collect_at(runner *t, zs_runtime *rt, zs_status want, const char *file, int line);

#define VERIFY(t, rt) verify_at((t), (rt), __FILE__, __LINE__)
#define COLLECT(t, rt) collect_at((t), (rt), ZS_OK, __FILE__, __LINE__)
#define COLLECT_EXPECT(t, rt, want) collect_at((t), (rt), (want), __FILE__, __LINE__)

/* The test object: four strong slots, a weak slot, a reference array, data. */
typedef struct node {
    zs_object header;
    zs_ref ref[4];     /* ZS_MEMBER_OBJECT */
    zs_ref weak;       /* ZS_MEMBER_WEAK_OBJECT */
    zs_ref_array list; /* ZS_MEMBER_OBJECT_ARRAY */
    uint64_t payload;  /* plain data, never traced */
} node;

/* An object whose only member is weak: marking never reads it (a leaf).
   test_memberless_class covers classes with no members at all. */
typedef struct leaf {
    zs_object header;
    zs_ref weak; /* ZS_MEMBER_WEAK_OBJECT */
    uint64_t payload;
} leaf;

#define NODE_SLOTS 4u
#define NODE_REF(slot) ((uint32_t)(offsetof(node, ref) + (size_t)(slot) * sizeof(zs_ref)))
#define NODE_WEAK ((uint32_t)offsetof(node, weak))
#define NODE_LIST ((uint32_t)offsetof(node, list))

/* The members of the Node class (usable for other classes with node's layout). */
extern const zs_member node_members[6];

typedef struct fixture {
    zs_runtime *rt;
    const zs_class *node;
    const zs_class *leaf;
} fixture;

/* A runtime with the Node and Leaf classes registered; false on failure. */
bool fixture_open(runner *t, fixture *fx, uint32_t max_objects, uint32_t flags);
/* The same with explicit runtime options. */
bool fixture_open_options(runner *t, fixture *fx, const zs_runtime_options *options);
void fixture_close(fixture *fx);

zs_ref make_at(runner *t, zs_runtime *rt, const zs_class *cls, zs_ref outer, const char *file,
               int line);

/* New object with an auto name; a failed creation is a failed check. */
#define MAKE(t, rt, cls, outer) make_at((t), (rt), (cls), (outer), __FILE__, __LINE__)
#define ROOT(t, rt, ref) CHECK_OK(t, zs_add_to_root((rt), (ref)))
#define UNROOT(t, rt, ref) CHECK_OK(t, zs_remove_from_root((rt), (ref)))
#define LINK(t, rt, holder, slot, target)                                                          \
    CHECK_OK(t, zs_store_ref((rt), (holder), NODE_REF(slot), (target)))
#define PUSH(t, rt, holder, target)                                                                \
    CHECK_OK(t, zs_ref_array_push((rt), (holder), NODE_LIST, (target)))

static inline bool alive(zs_runtime *rt, zs_ref ref) { return zs_resolve(rt, ref) != NULL; }
static inline node *node_of(zs_runtime *rt, zs_ref ref) { return (node *)zs_resolve(rt, ref); }

static inline zs_gc_stats gc_stats(zs_runtime *rt) {
    zs_gc_stats stats;
    zs_gc_get_stats(rt, &stats);
    return stats;
}

/* xorshift64: a fixed-seed PRNG (state must be non-zero). */
static inline uint64_t xorshift64(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

static inline uint32_t rand_below(uint64_t *state, uint32_t bound) {
    return (uint32_t)(xorshift64(state) % bound);
}

#endif /* ZSHARP_TEST_SUPPORT_H */
