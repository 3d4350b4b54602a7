/*
 * gc_boehm.c -- the same graphs as C objects under the Boehm-Demers-Weiser
 * collector (Debian libgc-dev), timed with GC_gcollect(). Run with
 * GC_MARKERS=1 for one marker thread, GC_MARKERS=2 for parallel marking.
 *
 *   gc_boehm graph SHAPE N ROUNDS DROP_MASK EXPECT
 *
 * Nodes are GC_MALLOC(64) blocks: four pointers and 32 bytes of padding,
 * the size of a zsharp node (header + four references). The root is a
 * global (the collector scans the data segment); the table of nodes used
 * while building is plain malloc memory (not scanned) and freed before any
 * measurement. The stack is scrubbed before collections whose survivors
 * matter (see scrub_stack). Prints one JSON object (times in ns).
 */
#include "graph.h"

#define GC_THREADS
#include <gc.h>

typedef struct node {
    struct node *slot[4];
    char padding[32];
} node;
_Static_assert(sizeof(node) == 64, "a node is 64 bytes");

static node *volatile root;   /* the root (data segment) */
static node *volatile middle; /* random graph: the root after the drop */

static uint64_t checksum = 14695981039346656037ULL;

/* Every SAMPLE-th node that the drop makes unreachable, hidden from the
   collector (plain malloc memory, complemented): just before the drop a
   disappearing link is registered on each, so the run can tell how many of
   the dropped nodes the collector really freed (its byte counters are
   approximate under lazy sweeping). */
#define SAMPLE 97u
static uintptr_t *sampled;
static uint32_t sampled_count;

static int dropped_by(int random, uint32_t n, uint32_t drop_mask, uint32_t i) {
    if (random) return i >= n / 2;
    if (i == 0) return 0;
    uint32_t ancestor = i;
    while ((ancestor - 1) / 4 != 0) ancestor = (ancestor - 1) / 4;
    return (drop_mask >> (ancestor - 1)) & 1;
}

static __attribute__((noinline)) void build(int random, uint32_t n, uint32_t drop_mask) {
    if (n < 2) die("n >= 2");
    node **nodes = malloc((size_t)n * sizeof *nodes);
    sampled = malloc(((size_t)n / SAMPLE + 1) * sizeof *sampled);
    if (nodes == NULL || sampled == NULL) die("out of memory");
    uint64_t state = GRAPH_SEED;
    for (uint32_t i = 0; i < n; i++) {
        node *fresh = GC_MALLOC(sizeof(node)); /* zeroed */
        if (fresh == NULL) die("GC_MALLOC failed");
        nodes[i] = fresh;
        if (i == 0) {
            root = fresh;
            continue;
        }
        if (!random) {
            nodes[(i - 1) / 4]->slot[(i - 1) % 4] = fresh;
            continue;
        }
        fresh->slot[0] = nodes[i - 1];
        for (uint32_t k = 1; k < 4; k++) {
            uint32_t pick = graph_pick(&state, i);
            checksum = graph_fold(checksum, pick);
            fresh->slot[k] = nodes[pick];
        }
        root = fresh; /* the last node roots the chain */
    }
    if (random) middle = nodes[n / 2 - 1];
    for (uint32_t i = 0; i < n; i += SAMPLE)
        if (dropped_by(random, n, drop_mask, i)) sampled[sampled_count++] = ~(uintptr_t)nodes[i];
    memset(nodes, 0, (size_t)n * sizeof *nodes);
    free(nodes);
}

/* Zero the stack below main's frame: dead frames of the build and of the
   collector's own previous marking still hold node pointers, which a
   conservative collector would take for roots when a later call's frame
   covers them (one stale pointer to the last node of the random graph keeps
   all of it). */
static __attribute__((noinline)) void scrub_stack(void) {
    volatile uintptr_t buffer[1 << 13];
    for (size_t i = 0; i < sizeof buffer / sizeof buffer[0]; i++) buffer[i] = 0;
}

static uint64_t last_cpu; /* process CPU time of the last timed collection */

static uint64_t timed_collect(void) {
    uint64_t cpu = process_cpu_ns(), start = now_ns();
    GC_gcollect();
    uint64_t wall = now_ns() - start;
    last_cpu = process_cpu_ns() - cpu;
    return wall;
}

int main(int argc, char **argv) {
    if (argc != 7 || strcmp(argv[1], "graph") != 0)
        die("usage: gc_boehm graph SHAPE N ROUNDS DROP_MASK EXPECT");
    const char *shape = argv[2];
    uint32_t n = (uint32_t)strtoul(argv[3], NULL, 10);
    uint32_t rounds = (uint32_t)strtoul(argv[4], NULL, 10);
    uint32_t drop_mask = (uint32_t)strtoul(argv[5], NULL, 10);
    int random = strcmp(shape, "random") == 0;
    if (!random && strcmp(shape, "tree") != 0) die("shape must be tree or random");
    if (n < 8 || rounds < 1) die("n >= 8 and rounds >= 1");

    GC_INIT();
    GC_start_mark_threads(); /* a single-threaded client starts them itself */
    long rss_before = proc_status_kb("VmRSS");
    uint64_t start = now_ns();
    build(random, n, drop_mask);
    uint64_t build_ns = now_ns() - start;
    scrub_stack();

    json_begin();
    json_str("peer", "boehm");
    json_str("shape", shape);
    json_u64("n", n);
    json_u64("checksum", random ? checksum : 0);
    json_u64("build", build_ns);
    json_u64("markers", (uint64_t)GC_get_parallel() + 1);
    json_u64("rss_before_kb", (uint64_t)rss_before);

    timed_collect(); /* warm-up: also finishes the sweeping left by the build */
    json_u64("rss_built_kb", (uint64_t)proc_status_kb("VmRSS"));
    json_u64("heap_bytes", GC_get_heap_size());
    json_u64("memory_use", GC_get_memory_use());
    uint64_t *walls = malloc(2 * (size_t)rounds * sizeof *walls);
    if (walls == NULL) die("out of memory");
    for (uint32_t r = 0; r < rounds; r++) {
        walls[r] = timed_collect();
        walls[rounds + r] = last_cpu;
    }
    json_u64_array("live_walls", walls, rounds);
    json_u64_array("live_cpus", walls + rounds, rounds);

    /* Registered before the drop: an allocation may collect. */
    void **links = GC_MALLOC_ATOMIC_UNCOLLECTABLE((sampled_count + 1) * sizeof *links);
    if (links == NULL) die("out of memory");
    for (uint32_t k = 0; k < sampled_count; k++) {
        links[k] = (void *)GC_HIDE_POINTER((void *)~sampled[k]);
        if (GC_general_register_disappearing_link(&links[k], (void *)~sampled[k]) != GC_SUCCESS)
            die("GC_general_register_disappearing_link");
    }
    start = now_ns();
    if (random) {
        root = middle;
    } else {
        for (uint32_t k = 0; k < 4; k++)
            if (drop_mask >> k & 1) root->slot[k] = NULL;
    }
    uint64_t drop_ns = now_ns() - start;
    scrub_stack(); /* the live collections left node pointers in dead frames */
    json_u64("drop_mutation", drop_ns);
    json_u64("drop_wall", timed_collect());
    struct GC_prof_stats_s stats;
    GC_get_prof_stats(&stats, sizeof stats);
    json_u64("drop_reclaimed_bytes", stats.bytes_reclaimed_since_gc);
    uint32_t cleared = 0;
    for (uint32_t k = 0; k < sampled_count; k++) cleared += links[k] == NULL;
    json_u64("drop_sampled", sampled_count);
    json_u64("drop_sampled_freed", cleared);
    json_u64("memory_use_after_drop", GC_get_memory_use());
    json_u64("failures", 0);
    json_u64("peak_rss_kb", (uint64_t)proc_status_kb("VmHWM"));
    json_end();
    free(walls);
    free(sampled);
    return 0;
}
