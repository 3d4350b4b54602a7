/*
 * gc_zsharp.c -- zsharp's collector on graphs built natively (building a
 * million objects from Python would take most of the run). Compiled at
 * benchmark time against the sources in native/src and native/include/zsharp.h.
 *
 *   gc_zsharp graph SHAPE N ROUNDS THREADS DROP_MASK EXPECT INCREMENTAL
 *       SHAPE tree|random; THREADS: options.mark_threads (0: one per core);
 *       DROP_MASK: tree root slots cleared to drop half (bit k: slot k);
 *       EXPECT: objects left after the drop; INCREMENTAL: incremental
 *       cycles to time (1 ms steps) on the live heap, 0 for none.
 *   gc_zsharp clusters N ROUNDS THREADS
 *       N objects in groups of 64 (a cluster-root class holding a 4-ary
 *       tree of 63 in-cluster objects), every group root in an object array
 *       of one rooted world object: full collections without clusters,
 *       then after zs_create_cluster on every group root.
 *   gc_zsharp barrier STORES ROUNDS
 *       the write barrier's cost with no collection pending: ROUNDS rounds
 *       of STORES zs_store_ref calls (1,024 rooted holders, 4 slots each,
 *       targets drawn from 1,024 live objects), the calling thread's CPU
 *       time per round. Built twice by the benchmarks: as is, and with
 *       -DZS_BENCH_NO_BARRIER (the barrier compiled out of every store).
 *   gc_zsharp capacity CONFIGURED
 *       fills a default runtime (zs_runtime_new(NULL)) with memberless
 *       objects until ZS_E_CAPACITY, then a runtime configured for
 *       CONFIGURED objects (0: skip) the same way, then one full collection
 *       of it (nothing is rooted: it frees every object).
 *
 * Prints one JSON object (times in ns).
 */
#include "graph.h"
#include "zsharp.h"

#include <stddef.h>

typedef struct node {
    zs_object header;
    zs_ref slot[4];
} node;
_Static_assert(sizeof(node) == sizeof(zs_object) + 4 * sizeof(zs_ref),
               "a node is the header + 4 references");

typedef struct world {
    zs_object header;
    zs_ref_array groups;
} world;

#define SLOT_OFFSET(k) ((uint32_t)(offsetof(node, slot) + (k) * sizeof(zs_ref)))
#define GROUP 64u
#define STEP_BUDGET_NS 1000000u

static void check(zs_status status, const char *what) {
    if (status != ZS_OK) {
        fprintf(stderr, "%s: %s\n", what, zs_status_message(status));
        exit(2);
    }
}

static const zs_class *node_class(zs_runtime *rt, const char *name, uint32_t flags) {
    zs_member members[4];
    for (uint32_t k = 0; k < 4; k++)
        members[k] = (zs_member){.kind = ZS_MEMBER_OBJECT, .offset = SLOT_OFFSET(k)};
    zs_class_desc desc = {.name = name,
                          .instance_size = sizeof(node),
                          .flags = flags,
                          .members = members,
                          .member_count = 4};
    const zs_class *cls = NULL;
    check(zs_class_register(rt, &desc, &cls), "zs_class_register");
    return cls;
}

static zs_ref new_object(zs_runtime *rt, const zs_class *cls) {
    zs_ref ref = ZS_NULL_REF;
    check(zs_object_new(rt, cls, ZS_NULL_REF, ZS_NAME_AUTO, 0, &ref, NULL), "zs_object_new");
    return ref;
}

static zs_runtime *new_runtime(uint32_t n, uint32_t threads) {
    zs_runtime_options options;
    zs_runtime_default_options(&options);
    uint64_t capacity = (uint64_t)n + 65536u;
    if (capacity < ZS_DEFAULT_MAX_OBJECTS) capacity = ZS_DEFAULT_MAX_OBJECTS;
    if (capacity > ZS_MAX_OBJECTS_LIMIT) die("heap too large");
    options.max_objects = (uint32_t)capacity;
    options.mark_threads = threads;
    options.min_cluster_size = 2;
    zs_runtime *rt = NULL;
    check(zs_runtime_new(&options, &rt), "zs_runtime_new");
    return rt;
}

typedef struct collection {
    uint64_t wall, mark, gather, purge, marked, freed, scanned, threads, clusters_marked, cpu;
} collection;

static collection collect(zs_runtime *rt) {
    uint64_t cpu = process_cpu_ns(), start = now_ns();
    check(zs_collect_garbage(rt), "zs_collect_garbage");
    uint64_t wall = now_ns() - start;
    cpu = process_cpu_ns() - cpu;
    zs_gc_stats stats;
    zs_gc_get_stats(rt, &stats);
    return (collection){wall,
                        stats.mark_ns,
                        stats.gather_ns,
                        stats.purge_ns,
                        stats.objects_marked,
                        stats.objects_freed,
                        stats.objects_scanned,
                        stats.mark_threads,
                        stats.clusters_marked,
                        cpu};
}

/* Median of one field over rounds (sorts a copy). */
static uint64_t median_of(const collection *c, size_t rounds, size_t field_offset) {
    uint64_t *values = malloc(rounds * sizeof *values);
    if (values == NULL) die("out of memory");
    for (size_t i = 0; i < rounds; i++)
        values[i] = *(const uint64_t *)((const char *)&c[i] + field_offset);
    qsort(values, rounds, sizeof *values, compare_u64);
    uint64_t median = rounds % 2 ? values[rounds / 2]
                                 : (values[rounds / 2 - 1] + values[rounds / 2]) / 2;
    free(values);
    return median;
}

/* Warm-up, then `rounds` timed full collections; writes "<prefix>_..." fields. */
static void live_collections(zs_runtime *rt, uint32_t rounds, uint64_t expect_marked,
                             const char *prefix, uint64_t *failures) {
    collection *c = calloc(rounds, sizeof *c);
    if (c == NULL) die("out of memory");
    collect(rt);
    for (uint32_t r = 0; r < rounds; r++) {
        c[r] = collect(rt);
        if (c[r].marked != expect_marked || c[r].freed != 0) (*failures)++;
    }
    uint64_t walls[4096];
    uint32_t kept = rounds < 4096 ? rounds : 4096;
    for (uint32_t r = 0; r < kept; r++) walls[r] = c[r].wall;
    char key[64];
#define FIELD(name, member)                                                                        \
    snprintf(key, sizeof key, "%s_%s", prefix, name);                                              \
    json_u64(key, median_of(c, rounds, offsetof(collection, member)));
    snprintf(key, sizeof key, "%s_walls", prefix);
    json_u64_array(key, walls, kept);
    FIELD("mark", mark)
    FIELD("gather", gather)
    FIELD("purge", purge)
    FIELD("scanned", scanned)
    FIELD("marked", marked)
    FIELD("threads", threads)
    FIELD("clusters_marked", clusters_marked)
    FIELD("cpu", cpu)
#undef FIELD
    free(c);
}

static int run_graph(int argc, char **argv) {
    if (argc != 9)
        die("usage: gc_zsharp graph SHAPE N ROUNDS THREADS DROP_MASK EXPECT INCREMENTAL");
    const char *shape = argv[2];
    uint32_t n = (uint32_t)strtoul(argv[3], NULL, 10);
    uint32_t rounds = (uint32_t)strtoul(argv[4], NULL, 10);
    uint32_t threads = (uint32_t)strtoul(argv[5], NULL, 10);
    uint32_t drop_mask = (uint32_t)strtoul(argv[6], NULL, 10);
    uint64_t expect = strtoull(argv[7], NULL, 10);
    uint32_t incremental = (uint32_t)strtoul(argv[8], NULL, 10);
    int random = strcmp(shape, "random") == 0;
    if (!random && strcmp(shape, "tree") != 0) die("shape must be tree or random");
    if (n < 8 || rounds < 1) die("n >= 8 and rounds >= 1");

    long rss_before = proc_status_kb("VmRSS");
    zs_runtime *rt = new_runtime(n, threads);
    const zs_class *cls = node_class(rt, "Node", 0);
    zs_ref *refs = malloc((size_t)n * sizeof *refs);
    if (refs == NULL) die("out of memory");

    /* ---- build ---- */
    uint64_t checksum = 14695981039346656037ULL;
    uint64_t state = GRAPH_SEED;
    uint64_t start = now_ns();
    for (uint32_t i = 0; i < n; i++) {
        zs_ref ref = new_object(rt, cls);
        refs[i] = ref;
        if (i == 0) continue;
        if (!random) {
            check(zs_store_ref(rt, refs[(i - 1) / 4], SLOT_OFFSET((i - 1) % 4), ref), "store");
            continue;
        }
        check(zs_store_ref(rt, ref, SLOT_OFFSET(0), refs[i - 1]), "store");
        for (uint32_t k = 1; k < 4; k++) {
            uint32_t pick = graph_pick(&state, i);
            checksum = graph_fold(checksum, pick);
            check(zs_store_ref(rt, ref, SLOT_OFFSET(k), refs[pick]), "store");
        }
    }
    zs_ref root = random ? refs[n - 1] : refs[0];
    zs_ref middle = refs[n / 2 - 1];
    check(zs_add_to_root(rt, root), "zs_add_to_root");
    uint64_t build_ns = now_ns() - start;
    free(refs);
    long rss_built = proc_status_kb("VmRSS");

    zs_memory_stats memory;
    zs_runtime_memory(rt, &memory);

    json_begin();
    json_str("peer", "zsharp");
    json_str("shape", shape);
    json_u64("n", n);
    json_u64("checksum", random ? checksum : 0);
    json_u64("build", build_ns);
    json_u64("live_bytes", memory.live_bytes);
    json_u64("live_blocks", memory.live_blocks);
    json_u64("item_bytes", memory.item_bytes_per_object);
    json_u64("header_bytes", sizeof(zs_object));
    json_u64("object_bytes", sizeof(node));
    json_u64("rss_before_kb", (uint64_t)rss_before);
    json_u64("rss_built_kb", (uint64_t)rss_built);

    /* ---- full collections, everything live ---- */
    uint64_t failures = 0;
    live_collections(rt, rounds, n, "live", &failures);

    /* ---- incremental cycles on the live heap, 1 ms steps ---- */
    if (incremental > 0) {
        size_t capacity = 1024, count = 0;
        uint64_t *steps = malloc(capacity * sizeof *steps);
        uint64_t *cpu = malloc(capacity * sizeof *cpu);
        uint64_t *totals = malloc(incremental * sizeof *totals);
        uint64_t *starts = malloc(incremental * sizeof *starts);
        if (steps == NULL || cpu == NULL || totals == NULL || starts == NULL) die("out of memory");
        for (uint32_t cycle = 0; cycle < incremental; cycle++) {
            uint64_t t0 = now_ns();
            check(zs_gc_start_incremental(rt), "zs_gc_start_incremental");
            starts[cycle] = now_ns() - t0;
            totals[cycle] = starts[cycle];
            int done = 0;
            while (!done) {
                uint64_t c = thread_cpu_ns(), s = now_ns();
                check(zs_gc_step(rt, STEP_BUDGET_NS, &done), "zs_gc_step");
                uint64_t step = now_ns() - s;
                uint64_t step_cpu = thread_cpu_ns() - c;
                totals[cycle] += step;
                if (count == capacity) {
                    capacity *= 2;
                    steps = realloc(steps, capacity * sizeof *steps);
                    cpu = realloc(cpu, capacity * sizeof *cpu);
                    if (steps == NULL || cpu == NULL) die("out of memory");
                }
                cpu[count] = step_cpu;
                steps[count++] = step;
            }
            zs_gc_stats stats;
            zs_gc_get_stats(rt, &stats);
            if (stats.objects_marked != n || zs_gc_phase_of(rt) != ZS_GC_IDLE) failures++;
        }
        json_u64_array("incremental_steps", steps, count);
        json_u64_array("incremental_steps_cpu", cpu, count);
        json_u64_array("incremental_totals", totals, incremental);
        json_u64_array("incremental_starts", starts, incremental);
        json_u64("incremental_budget", STEP_BUDGET_NS);
        free(steps);
        free(cpu);
        free(totals);
        free(starts);
    }

    /* ---- drop half, one collection ---- */
    start = now_ns();
    if (random) {
        check(zs_add_to_root(rt, middle), "zs_add_to_root");
        check(zs_remove_from_root(rt, root), "zs_remove_from_root");
    } else {
        for (uint32_t k = 0; k < 4; k++)
            if (drop_mask >> k & 1)
                check(zs_store_ref(rt, root, SLOT_OFFSET(k), ZS_NULL_REF), "store");
    }
    uint64_t drop_ns = now_ns() - start;
    collection dropped = collect(rt);
    uint32_t live_after = zs_live_objects(rt);
    if (live_after != expect || dropped.freed != n - expect) failures++;
    char message[256] = "";
    if (zs_heap_verify(rt, message, sizeof message) != ZS_OK) {
        fprintf(stderr, "zs_heap_verify: %s\n", message);
        failures++;
    }
    json_u64("drop_mutation", drop_ns);
    json_u64("drop_wall", dropped.wall);
    json_u64("drop_mark", dropped.mark);
    json_u64("drop_gather", dropped.gather);
    json_u64("drop_purge", dropped.purge);
    json_u64("drop_freed", dropped.freed);
    json_u64("live_after_drop", live_after);
    json_u64("failures", failures);
    json_u64("peak_rss_kb", (uint64_t)proc_status_kb("VmHWM"));
    json_end();
    zs_runtime_free(rt);
    return 0;
}

static int run_clusters(int argc, char **argv) {
    if (argc != 5) die("usage: gc_zsharp clusters N ROUNDS THREADS");
    uint32_t n = (uint32_t)strtoul(argv[2], NULL, 10);
    uint32_t rounds = (uint32_t)strtoul(argv[3], NULL, 10);
    uint32_t threads = (uint32_t)strtoul(argv[4], NULL, 10);
    uint32_t groups = n / GROUP;
    if (groups < 1 || rounds < 1) die("n >= 64 and rounds >= 1");
    n = groups * GROUP;

    zs_runtime *rt = new_runtime(n + 1, threads);
    const zs_class *root_class = node_class(rt, "GroupRoot", ZS_CLASS_CLUSTER_ROOT);
    const zs_class *member_class = node_class(rt, "GroupMember", ZS_CLASS_IN_CLUSTER);
    zs_member array_member = {.kind = ZS_MEMBER_OBJECT_ARRAY,
                              .offset = (uint32_t)offsetof(world, groups)};
    zs_class_desc world_desc = {.name = "World",
                                .instance_size = sizeof(world),
                                .members = &array_member,
                                .member_count = 1};
    const zs_class *world_class = NULL;
    check(zs_class_register(rt, &world_desc, &world_class), "zs_class_register");
    zs_ref world_ref = new_object(rt, world_class);
    check(zs_add_to_root(rt, world_ref), "zs_add_to_root");

    zs_ref *roots = malloc((size_t)groups * sizeof *roots);
    if (roots == NULL) die("out of memory");
    zs_ref group[GROUP];
    uint64_t start = now_ns();
    for (uint32_t g = 0; g < groups; g++) {
        for (uint32_t j = 0; j < GROUP; j++) {
            group[j] = new_object(rt, j == 0 ? root_class : member_class);
            if (j > 0)
                check(zs_store_ref(rt, group[(j - 1) / 4], SLOT_OFFSET((j - 1) % 4), group[j]),
                      "store");
        }
        roots[g] = group[0];
        check(zs_ref_array_push(rt, world_ref, (uint32_t)offsetof(world, groups), group[0]),
              "push");
    }
    uint64_t build_ns = now_ns() - start;

    json_begin();
    json_str("peer", "zsharp");
    json_str("shape", "groups");
    json_u64("n", n);
    json_u64("groups", groups);
    json_u64("group_size", GROUP);
    json_u64("build", build_ns);
    uint64_t failures = 0;
    live_collections(rt, rounds, (uint64_t)n + 1, "plain", &failures);

    start = now_ns();
    uint64_t clustered = 0;
    for (uint32_t g = 0; g < groups; g++) {
        uint32_t size = 0;
        check(zs_create_cluster(rt, roots[g], &size), "zs_create_cluster");
        clustered += size;
    }
    json_u64("create_clusters", now_ns() - start);
    json_u64("clustered_objects", clustered);
    json_u64("clusters", zs_cluster_count(rt));
    if (clustered != n) failures++;
    live_collections(rt, rounds, (uint64_t)n + 1, "clustered", &failures);
    char message[256] = "";
    if (zs_heap_verify(rt, message, sizeof message) != ZS_OK) {
        fprintf(stderr, "zs_heap_verify: %s\n", message);
        failures++;
    }
    json_u64("failures", failures);
    json_u64("peak_rss_kb", (uint64_t)proc_status_kb("VmHWM"));
    json_end();
    free(roots);
    zs_runtime_free(rt);
    return 0;
}

static int run_barrier(int argc, char **argv) {
    if (argc != 4) die("usage: gc_zsharp barrier STORES ROUNDS");
    uint32_t stores = (uint32_t)strtoul(argv[2], NULL, 10);
    uint32_t rounds = (uint32_t)strtoul(argv[3], NULL, 10);
    if (stores < 1 || rounds < 1) die("stores >= 1 and rounds >= 1");
    enum { K = 1024 };
    zs_runtime *rt = new_runtime(2 * K, 1);
    const zs_class *cls = node_class(rt, "Node", 0);
    zs_ref *holders = malloc(K * sizeof *holders), *targets = malloc(K * sizeof *targets);
    uint64_t *cpu = malloc(rounds * sizeof *cpu);
    if (holders == NULL || targets == NULL || cpu == NULL) die("out of memory");
    for (uint32_t i = 0; i < K; i++) {
        holders[i] = new_object(rt, cls);
        targets[i] = new_object(rt, cls);
        check(zs_add_to_root(rt, holders[i]), "zs_add_to_root");
    }
    uint64_t state = GRAPH_SEED, failures = 0;
    for (uint32_t r = 0; r <= rounds; r++) { /* round 0: warm-up */
        uint64_t start = thread_cpu_ns();
        for (uint32_t i = 0; i < stores; i++) {
            uint32_t pick = graph_next(&state);
            failures += zs_store_ref(rt, holders[pick % K], SLOT_OFFSET((pick >> 10) & 3),
                                     targets[(pick >> 12) % K]) != ZS_OK;
        }
        if (r > 0) cpu[r - 1] = thread_cpu_ns() - start;
    }
    if (zs_gc_phase_of(rt) != ZS_GC_IDLE) failures++;
    json_begin();
    json_str("peer", "zsharp");
#ifdef ZS_BENCH_NO_BARRIER
    json_u64("barrier", 0);
#else
    json_u64("barrier", 1);
#endif
    json_u64("stores", stores);
    json_u64_array("round_cpu", cpu, rounds);
    json_u64("failures", failures);
    json_end();
    free(holders);
    free(targets);
    free(cpu);
    zs_runtime_free(rt);
    return 0;
}

/* Objects a runtime holds: allocate memberless objects until it refuses. */
static uint64_t fill(zs_runtime *rt, const zs_class *cls, zs_status *last) {
    uint64_t count = 0;
    for (;;) {
        zs_ref ref = ZS_NULL_REF;
        zs_status status = zs_object_new(rt, cls, ZS_NULL_REF, ZS_NAME_AUTO, 0, &ref, NULL);
        if (status != ZS_OK) {
            *last = status;
            return count;
        }
        count++;
    }
}

static int run_capacity(int argc, char **argv) {
    if (argc != 3) die("usage: gc_zsharp capacity CONFIGURED");
    uint32_t configured = (uint32_t)strtoul(argv[2], NULL, 10);
    zs_class_desc empty = {.name = "Empty", .instance_size = sizeof(zs_object)};
    json_begin();
    json_str("peer", "zsharp");
    json_u64("default_max_objects", ZS_DEFAULT_MAX_OBJECTS);
    json_u64("max_objects_limit", ZS_MAX_OBJECTS_LIMIT);

    zs_runtime *rt = NULL;
    const zs_class *cls = NULL;
    check(zs_runtime_new(NULL, &rt), "zs_runtime_new");
    check(zs_class_register(rt, &empty, &cls), "zs_class_register");
    zs_status last = ZS_OK;
    uint64_t start = now_ns();
    json_u64("default_held", fill(rt, cls, &last));
    json_u64("default_fill_ns", now_ns() - start);
    json_str("default_refusal", last == ZS_E_CAPACITY ? "capacity" : "other");
    zs_runtime_free(rt);

    if (configured > 0) {
        zs_runtime_options options;
        zs_runtime_default_options(&options);
        options.max_objects = configured;
        options.mark_threads = 1;
        rt = NULL;
        zs_status status = zs_runtime_new(&options, &rt);
        json_str("configured_status", status == ZS_OK ? "ok" : zs_status_message(status));
        if (status == ZS_OK) {
            check(zs_class_register(rt, &empty, &cls), "zs_class_register");
            start = now_ns();
            uint64_t held = fill(rt, cls, &last);
            json_u64("configured_held", held);
            json_u64("configured_fill_ns", now_ns() - start);
            json_str("configured_refusal", last == ZS_E_CAPACITY ? "capacity" : "other");
            /* Everything unreachable: one collection frees the whole heap. */
            collection c = collect(rt);
            json_u64("configured_collect_ns", c.wall);
            json_u64("configured_freed", c.freed);
            json_u64("configured_live_after", zs_live_objects(rt));
            zs_runtime_free(rt);
        }
    }
    json_u64("peak_rss_kb", (uint64_t)proc_status_kb("VmHWM"));
    json_end();
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "graph") == 0) return run_graph(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "clusters") == 0) return run_clusters(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "barrier") == 0) return run_barrier(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "capacity") == 0) return run_capacity(argc, argv);
    die("usage: gc_zsharp graph|clusters|barrier|capacity ...");
    return 2;
}
