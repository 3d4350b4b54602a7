/*
 * test_gc_advanced.c -- C-level tests of the collector's newer features,
 * through the public headers only (zsharp.h, zsharp_managed.h,
 * zsharp_debug.h): GC clusters, incremental marking
 * (steps, the write barrier, the gathering phase, budgeted purges) and
 * parallel marking.
 *
 * Uses the runner and fixture of test_support.h; main() in test_heap.c runs
 * advanced_tests[] after its own table. Every collection, step and purge is
 * followed by zs_heap_verify (VERIFY / COLLECT).
 *
 * Random graphs are checked against an oracle (oracle_compute) that reads the
 * heap through the API and computes, independently of the collector, what a
 * full collection must keep: reachability from roots and strong refs, outers
 * always traced, killable references to garbage nulled, live clusters marked
 * as one unit, and clusters with a garbage mutable object (and, recursively,
 * the clusters that reference them) dissolved first.
 */
#include "test_support.h"
#include "zsharp_debug.h"
#include "zsharp_managed.h"

#define NONE UINT32_MAX

/* Upper bound on the steps of one incremental cycle in these tests (a few
   hundred are needed): a collector that stops making progress fails the
   test instead of hanging it. */
#define MAX_STEPS 20000u

/* ======================================================================
 * Cluster fixture
 * ====================================================================== */

/* The Node/Leaf fixture plus two classes with Node's layout: ClusterRoot
   (ZS_CLASS_CLUSTER_ROOT) and Part (ZS_CLASS_IN_CLUSTER). */
typedef struct cfix {
    fixture fx;
    zs_runtime *rt;
    const zs_class *croot;
    const zs_class *part;
} cfix;

static bool cfix_open_flags(runner *t, cfix *c, uint32_t min_cluster_size, uint32_t mark_threads,
                            uint32_t flags) {
    zs_runtime_options options;
    zs_runtime_default_options(&options);
    options.min_cluster_size = min_cluster_size;
    options.mark_threads = mark_threads;
    options.flags = flags;
    memset(c, 0, sizeof *c);
    if (!fixture_open_options(t, &c->fx, &options)) return false;
    c->rt = c->fx.rt;
    zs_class_desc root_desc = {"ClusterRoot", NULL, sizeof(node), ZS_CLASS_CLUSTER_ROOT,
                               node_members,  6,    NULL,         0,
                               NULL,          0};
    zs_class_desc part_desc = {
        "Part", NULL, sizeof(node), ZS_CLASS_IN_CLUSTER, node_members, 6, NULL, 0, NULL, 0};
    CHECK_OK(t, zs_class_register(c->rt, &root_desc, &c->croot));
    CHECK_OK(t, zs_class_register(c->rt, &part_desc, &c->part));
    if (c->croot == NULL || c->part == NULL) {
        fixture_close(&c->fx);
        c->rt = NULL;
        return false;
    }
    return true;
}

static bool cfix_open(runner *t, cfix *c, uint32_t min_cluster_size, uint32_t mark_threads) {
    return cfix_open_flags(t, c, min_cluster_size, mark_threads, 0);
}

static void cfix_close(cfix *c) {
    fixture_close(&c->fx);
    c->rt = NULL;
}

/* A ClusterRoot (out[0]) and count Parts (out[1..count]) in a 4-ary tree:
   member k > 0 hangs from member (k - 1) / 4 in slot (k - 1) % 4. Members
   k >= (count + 3) / 4 have no children, so their slots and lists are free. */
static void build_tree(runner *t, cfix *c, uint32_t count, zs_ref *out) {
    out[0] = MAKE(t, c->rt, c->croot, ZS_NULL_REF);
    for (uint32_t k = 1; k <= count; k++) {
        out[k] = MAKE(t, c->rt, c->part, ZS_NULL_REF);
        LINK(t, c->rt, out[(k - 1) / 4], (k - 1) % 4, out[k]);
    }
}

/* The cluster of an object (-1: none, -2: the query failed). */
static int32_t cluster_id(zs_runtime *rt, zs_ref ref) {
    int32_t id = -2;
    if (zs_object_cluster(rt, ref, &id) != ZS_OK) return -2;
    return id;
}

static uint32_t count_in_cluster(zs_runtime *rt, const zs_ref *refs, uint32_t n, int32_t id) {
    uint32_t count = 0;
    for (uint32_t i = 0; i < n; i++) count += cluster_id(rt, refs[i]) == id;
    return count;
}

static uint32_t count_alive(zs_runtime *rt, const zs_ref *refs, uint32_t n) {
    uint32_t count = 0;
    for (uint32_t i = 0; i < n; i++) count += alive(rt, refs[i]);
    return count;
}

static zs_cluster_info cluster_info(runner *t, zs_runtime *rt, int32_t id) {
    zs_cluster_info info;
    memset(&info, 0, sizeof info);
    CHECK_OK(t, zs_cluster_get_info(rt, id, &info));
    return info;
}

/* The first element of a node's reference array (ZS_NULL_REF when empty or dead). */
static zs_ref list_first(zs_runtime *rt, zs_ref ref) {
    node *n = node_of(rt, ref);
    return n != NULL && n->list.count > 0 ? n->list.data[0] : ZS_NULL_REF;
}

/* ======================================================================
 * Incremental helpers
 * ====================================================================== */

/* One budgeted step (1 ns: one stride of ~64 scans) that must not finish the mark. */
static void step_once(runner *t, zs_runtime *rt) {
    int done = 1;
    CHECK_OK(t, zs_gc_step(rt, 1, &done));
    VERIFY(t, rt);
    CHECK(t, !done);
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_MARKING);
}

/* Step the pending cycle until it is done, verifying after every step. */
static uint32_t run_steps(runner *t, zs_runtime *rt, uint64_t budget_ns) {
    int done = 0;
    uint32_t steps = 0;
    while (!done && steps < MAX_STEPS) {
        zs_status status = zs_gc_step(rt, budget_ns, &done);
        CHECK_OK(t, status);
        VERIFY(t, rt);
        steps++;
        if (status != ZS_OK) break;
    }
    CHECK(t, done);
    return steps;
}

/* Purge whatever the cycle gathered, then verify. */
static void purge_all(runner *t, zs_runtime *rt) {
    int done = 0;
    CHECK_OK(t, zs_gc_purge(rt, 0, &done));
    VERIFY(t, rt);
    CHECK(t, done);
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_IDLE);
}

/* A rooted node whose slot 0 leads down a chain of length nodes (each
   ref[0] names the next) and whose slot 1 holds the node H. The marker
   scans the root, then H, then the chain one node at a time, so after one
   1 ns step H is scanned and the chain's end is not. */
typedef struct chain_setup {
    zs_ref root, holder, last;
} chain_setup;

static chain_setup build_chain(runner *t, zs_runtime *rt, const zs_class *node_cls,
                               uint32_t length) {
    chain_setup s;
    s.root = MAKE(t, rt, node_cls, ZS_NULL_REF);
    s.holder = MAKE(t, rt, node_cls, ZS_NULL_REF);
    ROOT(t, rt, s.root);
    zs_ref previous = MAKE(t, rt, node_cls, ZS_NULL_REF);
    LINK(t, rt, s.root, 0, previous);
    LINK(t, rt, s.root, 1, s.holder);
    for (uint32_t i = 1; i < length; i++) {
        zs_ref next = MAKE(t, rt, node_cls, ZS_NULL_REF);
        LINK(t, rt, previous, 0, next);
        previous = next;
    }
    s.last = previous;
    return s;
}

#define CHAIN_LENGTH 2000u

/* ======================================================================
 * Clusters
 * ====================================================================== */

/* An object whose conjugate is dropped as its sole holder while it is a
   cluster's member is not destroyed at once: the cluster names it (the
   managed side stored its handle itself, so the heap never shared it).
   The first cluster of the runtime: its id is 0. */
static void test_cluster_member_outlives_its_dropped_conjugate(runner *t) {
    cfix c;
    if (!cfix_open(t, &c, 1, 1)) return;
    zs_runtime *rt = c.rt;
    zs_ref root = MAKE(t, rt, c.croot, ZS_NULL_REF);
    ROOT(t, rt, root);
    node *raw = NULL;
    zs_ref member = zs_object_new_conjugate(rt, c.part, ZS_NULL_REF, ZS_NAME_AUTO, 0, NULL, 0, &raw,
                                            NULL, 0, NULL);
    CHECK(t, member >= ZS_FIRST_REF);
    LINK(t, rt, root, 0, member);
    uint32_t size = 0;
    CHECK_OK(t, zs_create_cluster(rt, root, &size));
    CHECK_EQ(t, size, 2);
    CHECK_EQ(t, cluster_id(rt, member), 0);
    zs_dropped_conjugate dropped = {member, 1, 0};
    uint32_t destroyed = 99;
    CHECK_OK(t, zs_conjugates_dropped(rt, NULL, &dropped, 1, &destroyed));
    CHECK_EQ(t, destroyed, 0);
    CHECK(t, zs_resolve(rt, member) != NULL);
    VERIFY(t, rt);
    COLLECT(t, rt); /* the cluster keeps it, its conjugate gone */
    CHECK(t, zs_resolve(rt, member) != NULL);
    cfix_close(&c);
}

/* zs_create_cluster gathers the root's transitive IN_CLUSTER referents; info counts members, mutable objects and referenced clusters; small clusters are not kept. */
static void test_cluster_create_gathers(runner *t) {
    cfix c;
    if (!cfix_open(t, &c, 16, 1)) return;
    zs_runtime *rt = c.rt;
    zs_ref a[21], b[21], s[4], m[16];
    uint32_t size = 99;

    /* Cluster B first: its objects are taken, so A can only reference it. */
    build_tree(t, &c, 20, b);
    CHECK_OK(t, zs_create_cluster(rt, b[0], &size));
    CHECK_EQ(t, size, 21);

    build_tree(t, &c, 20, a);
    zs_ref n1 = MAKE(t, rt, c.fx.node, ZS_NULL_REF), l1 = MAKE(t, rt, c.fx.leaf, ZS_NULL_REF);
    zs_ref n2 = MAKE(t, rt, c.fx.node, ZS_NULL_REF), q = MAKE(t, rt, c.part, ZS_NULL_REF);
    zs_ref g = MAKE(t, rt, c.part, ZS_NULL_REF), x = MAKE(t, rt, c.part, n2);
    LINK(t, rt, n1, 0, q); /* Q (a Part) is only behind the mutable N1: not gathered */
    PUSH(t, rt, a[5], n1);
    PUSH(t, rt, a[6], n1); /* the same mutable object twice is recorded once */
    PUSH(t, rt, a[7], l1); /* a Leaf is not IN_CLUSTER: mutable */
    CHECK_OK(t, zs_mark_as_garbage(rt, g));
    PUSH(t, rt, a[8], g);     /* a garbage Part cannot join: mutable */
    PUSH(t, rt, a[9], b[7]);  /* into B through a member ... */
    PUSH(t, rt, a[10], b[0]); /* ... and through its root: one referenced cluster */
    PUSH(t, rt, a[11], x);    /* X joins; its outer N2 is a mutable object */
    CHECK_OK(t, zs_create_cluster(rt, a[0], &size));
    CHECK_EQ(t, size, 22);

    int32_t ida = cluster_id(rt, a[0]), idb = cluster_id(rt, b[0]);
    CHECK(t, ida >= 0 && idb >= 0 && ida != idb);
    CHECK_EQ(t, count_in_cluster(rt, a, 21, ida), 21);
    CHECK_EQ(t, cluster_id(rt, x), ida);
    CHECK_EQ(t, count_in_cluster(rt, b, 21, idb), 21);
    const zs_ref outside[] = {n1, l1, n2, q, g};
    CHECK_EQ(t, count_in_cluster(rt, outside, 5, -1), 5);

    zs_cluster_info info = cluster_info(t, rt, ida);
    CHECK_EQ(t, info.root, a[0]);
    CHECK_EQ(t, info.objects, 22);
    CHECK_EQ(t, info.mutable_objects, 4); /* N1, L1, G, N2 */
    CHECK_EQ(t, info.referenced_clusters, 1);
    CHECK_EQ(t, info.referenced_by, 0);
    info = cluster_info(t, rt, idb);
    CHECK_EQ(t, info.root, b[0]);
    CHECK_EQ(t, info.objects, 21);
    CHECK_EQ(t, info.mutable_objects, 0);
    CHECK_EQ(t, info.referenced_clusters, 0);
    CHECK_EQ(t, info.referenced_by, 1);
    CHECK_STATUS(t, zs_cluster_get_info(rt, 999, &info), ZS_E_INVALID);
    CHECK_STATUS(t, zs_cluster_get_info(rt, -1, &info), ZS_E_INVALID);
    CHECK_EQ(t, zs_cluster_count(rt), 2);

    /* Below min_cluster_size (4 < 16): not kept, nobody names a cluster. */
    build_tree(t, &c, 3, s);
    size = 99;
    CHECK_OK(t, zs_create_cluster(rt, s[0], &size));
    CHECK_EQ(t, size, 0);
    CHECK_EQ(t, count_in_cluster(rt, s, 4, -1), 4);
    CHECK_EQ(t, zs_cluster_count(rt), 2);
    /* Exactly min_cluster_size: kept. */
    build_tree(t, &c, 15, m);
    CHECK_OK(t, zs_create_cluster(rt, m[0], &size));
    CHECK_EQ(t, size, 16);
    CHECK_EQ(t, count_in_cluster(rt, m, 16, cluster_id(rt, m[0])), 16);
    CHECK_EQ(t, zs_cluster_count(rt), 3);
    VERIFY(t, rt);

    /* The garbage Part among A's mutable objects dissolves A at the next
       collection; B, referenced by A, stays a cluster. */
    ROOT(t, rt, a[0]);
    COLLECT(t, rt);
    zs_gc_stats stats = gc_stats(rt);
    CHECK(t, !alive(rt, g));
    CHECK_EQ(t, list_first(rt, a[8]), ZS_NULL_REF);
    CHECK_EQ(t, count_alive(rt, a, 21), 21);
    CHECK(t, alive(rt, x) && alive(rt, n1) && alive(rt, l1) && alive(rt, n2) && alive(rt, q));
    CHECK_EQ(t, count_alive(rt, b, 21), 21);
    CHECK_EQ(t, count_in_cluster(rt, a, 21, -1), 21);
    CHECK_EQ(t, count_in_cluster(rt, b, 21, idb), 21);
    CHECK_EQ(t, count_alive(rt, s, 4), 0);
    CHECK_EQ(t, count_alive(rt, m, 16), 0);
    CHECK_EQ(t, zs_cluster_count(rt), 1);
    CHECK_EQ(t, stats.clusters_dissolved, 1);
    CHECK_EQ(t, stats.clusters_marked, 1);
    CHECK_EQ(t, stats.references_killed, 1);
    cfix_close(&c);
}

/* A rooted 101-object cluster survives whole and is marked without scanning its members. */
static void test_cluster_kept_whole(runner *t) {
    cfix c;
    if (!cfix_open(t, &c, 16, 1)) return;
    zs_runtime *rt = c.rt;
    zs_ref p[101];
    uint32_t size = 0;
    build_tree(t, &c, 100, p);
    CHECK_OK(t, zs_create_cluster(rt, p[0], &size));
    CHECK_EQ(t, size, 101);
    int32_t id = cluster_id(rt, p[0]);
    ROOT(t, rt, p[0]);
    for (int round = 0; round < 2; round++) {
        COLLECT(t, rt);
        zs_gc_stats stats = gc_stats(rt);
        CHECK_EQ(t, count_alive(rt, p, 101), 101);
        CHECK_EQ(t, count_in_cluster(rt, p, 101, id), 101);
        CHECK_EQ(t, stats.clusters_marked, 1);
        CHECK_EQ(t, stats.objects_marked, 101);
        CHECK(t, stats.objects_scanned < 5); /* members are never read */
        CHECK_EQ(t, stats.objects_unreachable, 0);
        CHECK_EQ(t, stats.clusters, 1);
    }
    /* Without the cluster the same heap costs one scan per object. */
    CHECK_OK(t, zs_dissolve_cluster(rt, p[50]));
    CHECK_EQ(t, zs_cluster_count(rt), 0);
    CHECK_EQ(t, count_in_cluster(rt, p, 101, -1), 101);
    COLLECT(t, rt);
    zs_gc_stats stats = gc_stats(rt);
    CHECK_EQ(t, count_alive(rt, p, 101), 101);
    CHECK(t, stats.objects_scanned >= 101);
    CHECK_EQ(t, stats.clusters_marked, 0);
    cfix_close(&c);
}

/* Out of memory while gathering (the strict allocation limit also starves
   the collector's dying and expiring lists), at every limit of a sweep: an
   unreachable cluster (members created before their root, so the pass meets
   them first), the chain it references and conjugated objects either all die
   or all survive, never a survivor pointing at a freed object; once memory
   is back the next collection frees them all. */
static void test_gather_out_of_memory(runner *t) {
    uint32_t aborted = 0, gathered = 0;
    for (uint32_t run = 0; run < 2 * 51; run++) {
        uint32_t extra = (run % 51) * 24;
        bool incremental = run >= 51; /* gathered by 1 ns steps */
        cfix c;
        if (!cfix_open(t, &c, 16, 1)) return;
        zs_runtime *rt = c.rt;
        CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_POISON_FREED, 1));
        enum { PARTS = 100, CHAIN = 40, ALL = PARTS + 1 + CHAIN };
        zs_ref p[ALL];
        for (uint32_t k = 1; k <= PARTS; k++) p[k] = MAKE(t, rt, c.part, ZS_NULL_REF);
        p[0] = MAKE(t, rt, c.croot, ZS_NULL_REF);
        for (uint32_t k = 1; k <= PARTS; k++) LINK(t, rt, p[(k - 1) / 4], (k - 1) % 4, p[k]);
        for (uint32_t k = PARTS + 1; k < ALL; k++) {
            p[k] = MAKE(t, rt, c.fx.node, ZS_NULL_REF);
            LINK(t, rt, k == PARTS + 1 ? p[PARTS] : p[k - 1], 0, p[k]);
        }
        uint32_t size = 0;
        CHECK_OK(t, zs_create_cluster(rt, p[0], &size));
        CHECK_EQ(t, size, PARTS + 1);
        zs_object *ignored = NULL;
        for (uint32_t k = 0; k < ALL; k += 3)
            CHECK_OK(t, zs_resolve_for_conjugate(rt, p[k], &ignored));
        zs_memory_stats memory;
        zs_runtime_memory(rt, &memory);
        CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, memory.live_bytes + extra));
        CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_STRICT_ALLOC_LIMIT, 1));
        if (incremental) {
            CHECK_OK(t, zs_gc_start_incremental(rt));
            run_steps(t, rt, 1);
        } else {
            CHECK_OK(t, zs_gc_mark_and_gather(rt));
        }
        VERIFY(t, rt);
        uint32_t dying = zs_gc_pending_purge(rt);
        CHECK(t, dying == 0 || dying == ALL);
        CHECK_EQ(t, gc_stats(rt).gathers_aborted, dying == 0);
        aborted += dying == 0;
        gathered += dying != 0;
        zs_ref taken[ALL];
        uint32_t n = 0;
        CHECK_OK(t, zs_gc_take_expiring(rt, taken, ALL, &n));
        CHECK_EQ(t, n, dying == 0 ? 0 : (ALL + 2) / 3);
        int done = 0;
        CHECK_OK(t, zs_gc_purge(rt, 0, &done));
        CHECK(t, done);
        VERIFY(t, rt);
        CHECK_EQ(t, count_alive(rt, p, ALL), dying == 0 ? ALL : 0);
        CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
        CHECK_OK(t, zs_gc_mark_and_gather(rt));
        CHECK_OK(t, zs_gc_take_expiring(rt, taken, ALL, &n));
        CHECK_OK(t, zs_gc_purge(rt, 0, &done));
        VERIFY(t, rt);
        CHECK_EQ(t, count_alive(rt, p, ALL), 0);
        CHECK_EQ(t, zs_live_objects(rt), 0);
        cfix_close(&c);
    }
    CHECK(t, aborted > 6 && gathered > 6); /* the sweep covers both outcomes */
}

/* Cluster creation that runs out of memory part way (a sweep of allocation
   limits) either builds the whole cluster or leaves no object naming it;
   the heap verifies and collects normally afterwards. */
static void test_cluster_create_out_of_memory(runner *t) {
    uint32_t built = 0, refused = 0;
    for (uint32_t extra = 0; extra <= 2400; extra += 16) {
        cfix c;
        if (!cfix_open(t, &c, 16, 1)) return;
        zs_runtime *rt = c.rt;
        zs_ref p[101], q[21];
        build_tree(t, &c, 100, p);
        build_tree(t, &c, 20, q);
        uint32_t size = 0;
        CHECK_OK(t, zs_create_cluster(rt, q[0], &size));
        zs_ref outside = MAKE(t, rt, c.fx.node, ZS_NULL_REF);
        PUSH(t, rt, p[70], outside);
        PUSH(t, rt, p[71], q[3]);
        ROOT(t, rt, p[0]);
        zs_memory_stats memory;
        zs_runtime_memory(rt, &memory);
        CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, memory.live_bytes + extra));
        zs_status status = zs_create_cluster(rt, p[0], &size);
        CHECK(t, status == ZS_OK || status == ZS_E_NOMEM);
        VERIFY(t, rt);
        built += status == ZS_OK;
        refused += status == ZS_E_NOMEM;
        CHECK_EQ(t, count_in_cluster(rt, p, 101, status == ZS_OK ? cluster_id(rt, p[0]) : -1), 101);
        CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
        COLLECT(t, rt);
        CHECK_EQ(t, count_alive(rt, p, 101), 101);
        CHECK(t, alive(rt, outside) && count_alive(rt, q, 21) == 21);
        UNROOT(t, rt, p[0]);
        COLLECT(t, rt);
        CHECK_EQ(t, zs_live_objects(rt), 0);
        cfix_close(&c);
    }
    CHECK(t, built > 3 && refused > 3);
}

/* An unreachable cluster is destroyed whole, with the objects only it referenced. */
static void test_cluster_destroyed_whole(runner *t) {
    cfix c;
    if (!cfix_open(t, &c, 16, 1)) return;
    zs_runtime *rt = c.rt;
    zs_ref p[101];
    uint32_t size = 0;
    build_tree(t, &c, 100, p);
    zs_ref mut = MAKE(t, rt, c.fx.node, ZS_NULL_REF), lf = MAKE(t, rt, c.fx.leaf, ZS_NULL_REF);
    LINK(t, rt, mut, 0, lf);
    PUSH(t, rt, p[60], mut);
    CHECK_OK(t, zs_create_cluster(rt, p[0], &size));
    CHECK_EQ(t, size, 101);
    ROOT(t, rt, p[0]);
    COLLECT(t, rt);
    CHECK_EQ(t, count_alive(rt, p, 101), 101);
    CHECK(t, alive(rt, mut) && alive(rt, lf));

    UNROOT(t, rt, p[0]);
    COLLECT(t, rt);
    zs_gc_stats stats = gc_stats(rt);
    CHECK_EQ(t, count_alive(rt, p, 101), 0);
    CHECK(t, !alive(rt, mut) && !alive(rt, lf));
    CHECK_EQ(t, stats.objects_unreachable, 103);
    CHECK_EQ(t, stats.objects_freed, 103);
    CHECK_EQ(t, stats.clusters_marked, 0);
    CHECK_EQ(t, zs_cluster_count(rt), 0);
    CHECK_EQ(t, zs_live_objects(rt), 0);
    /* The freed cluster's record is reusable. */
    build_tree(t, &c, 20, p);
    CHECK_OK(t, zs_create_cluster(rt, p[0], &size));
    CHECK_EQ(t, size, 21);
    CHECK_EQ(t, zs_cluster_count(rt), 1);
    VERIFY(t, rt);
    cfix_close(&c);
}

/* Reaching any member (not the root) from outside marks the whole cluster, root included. */
static void test_cluster_member_reached_from_outside(runner *t) {
    cfix c;
    if (!cfix_open(t, &c, 16, 1)) return;
    zs_runtime *rt = c.rt;
    zs_ref p[31];
    uint32_t size = 0;
    build_tree(t, &c, 30, p);
    CHECK_OK(t, zs_create_cluster(rt, p[0], &size));
    CHECK_EQ(t, size, 31);
    int32_t id = cluster_id(rt, p[0]);
    zs_ref h = MAKE(t, rt, c.fx.node, ZS_NULL_REF);
    ROOT(t, rt, h);
    LINK(t, rt, h, 0, p[30]); /* a deepest member; a store into a non-member dissolves nothing */
    CHECK_EQ(t, zs_cluster_count(rt), 1);
    COLLECT(t, rt);
    zs_gc_stats stats = gc_stats(rt);
    CHECK_EQ(t, count_alive(rt, p, 31), 31);
    CHECK_EQ(t, count_in_cluster(rt, p, 31, id), 31);
    CHECK_EQ(t, stats.clusters_marked, 1);
    CHECK_EQ(t, stats.objects_marked, 32);

    LINK(t, rt, h, 0, ZS_NULL_REF);
    COLLECT(t, rt);
    CHECK_EQ(t, count_alive(rt, p, 31), 0);
    CHECK_EQ(t, zs_cluster_count(rt), 0);
    CHECK(t, alive(rt, h));
    cfix_close(&c);
}

/* A cluster keeps its mutable objects (and what they reference) and the clusters it references alive. */
static void test_cluster_references_keep_outside(runner *t) {
    cfix c;
    if (!cfix_open(t, &c, 16, 1)) return;
    zs_runtime *rt = c.rt;
    zs_ref a[21], b[21];
    uint32_t size = 0;
    build_tree(t, &c, 20, b);
    CHECK_OK(t, zs_create_cluster(rt, b[0], &size));
    CHECK_EQ(t, size, 21);
    build_tree(t, &c, 20, a);
    zs_ref m1 = MAKE(t, rt, c.fx.node, ZS_NULL_REF), m2 = MAKE(t, rt, c.fx.node, ZS_NULL_REF);
    zs_ref lf = MAKE(t, rt, c.fx.leaf, ZS_NULL_REF);
    LINK(t, rt, m1, 0, m2);
    LINK(t, rt, m2, 0, lf);
    PUSH(t, rt, a[15], m1);
    PUSH(t, rt, a[16], b[12]);
    CHECK_OK(t, zs_create_cluster(rt, a[0], &size));
    CHECK_EQ(t, size, 21);
    zs_cluster_info info = cluster_info(t, rt, cluster_id(rt, a[0]));
    CHECK_EQ(t, info.mutable_objects, 1);
    CHECK_EQ(t, info.referenced_clusters, 1);
    int32_t idb = cluster_id(rt, b[0]);
    ROOT(t, rt, a[0]);
    COLLECT(t, rt);
    zs_gc_stats stats = gc_stats(rt);
    CHECK_EQ(t, count_alive(rt, a, 21), 21);
    CHECK_EQ(t, count_alive(rt, b, 21), 21);
    CHECK_EQ(t, count_in_cluster(rt, b, 21, idb), 21);
    CHECK(t, alive(rt, m1) && alive(rt, m2) && alive(rt, lf));
    CHECK_EQ(t, stats.clusters_marked, 2);
    CHECK_EQ(t, stats.objects_marked, 45);
    CHECK(t, stats.objects_scanned >= 2 && stats.objects_scanned <= 4); /* M1, M2 (+ slack) */

    UNROOT(t, rt, a[0]);
    COLLECT(t, rt);
    CHECK_EQ(t, count_alive(rt, a, 21) + count_alive(rt, b, 21), 0);
    CHECK(t, !alive(rt, m1) && !alive(rt, m2) && !alive(rt, lf));
    CHECK_EQ(t, gc_stats(rt).objects_freed, 45);
    CHECK_EQ(t, zs_cluster_count(rt), 0);
    cfix_close(&c);
}

/* Marking a member as garbage dissolves its cluster and, recursively, the clusters referencing it (not those it references); the next collection frees it, nulls killable refs to it and loses nothing live. */
static void test_cluster_garbage_member_dissolves(runner *t) {
    cfix c;
    if (!cfix_open(t, &c, 16, 1)) return;
    zs_runtime *rt = c.rt;
    zs_ref a[21], b[21], cc[21], z[21];
    uint32_t size = 0;
    /* C <- B <- A (A references B, B references C); Z is independent. */
    build_tree(t, &c, 20, cc);
    CHECK_OK(t, zs_create_cluster(rt, cc[0], &size));
    build_tree(t, &c, 20, b);
    zs_ref g = b[10]; /* a childless member; its parent is b[2], slot 1 */
    zs_ref only_g = MAKE(t, rt, c.part, ZS_NULL_REF), shared = MAKE(t, rt, c.part, ZS_NULL_REF);
    PUSH(t, rt, g, only_g);
    PUSH(t, rt, g, shared);
    PUSH(t, rt, b[11], shared);
    PUSH(t, rt, b[13], cc[0]);
    CHECK_OK(t, zs_create_cluster(rt, b[0], &size));
    CHECK_EQ(t, size, 23);
    build_tree(t, &c, 20, a);
    PUSH(t, rt, a[3], b[0]);
    PUSH(t, rt, a[4], g);
    CHECK_OK(t, zs_create_cluster(rt, a[0], &size));
    CHECK_EQ(t, size, 21);
    build_tree(t, &c, 20, z);
    CHECK_OK(t, zs_create_cluster(rt, z[0], &size));
    ROOT(t, rt, a[0]);
    ROOT(t, rt, z[0]);
    int32_t idc = cluster_id(rt, cc[0]), idz = cluster_id(rt, z[0]);
    CHECK_EQ(t, zs_cluster_count(rt), 4);
    CHECK_EQ(t, cluster_info(t, rt, idc).referenced_by, 1);

    uint64_t dissolved_before = gc_stats(rt).clusters_dissolved;
    CHECK_OK(t, zs_mark_as_garbage(rt, g));
    CHECK_EQ(t, gc_stats(rt).clusters_dissolved, dissolved_before + 2); /* B and A */
    CHECK_EQ(t, zs_cluster_count(rt), 2);
    CHECK_EQ(t, count_in_cluster(rt, a, 21, -1), 21);
    CHECK_EQ(t, count_in_cluster(rt, b, 21, -1), 21);
    CHECK_EQ(t, cluster_id(rt, only_g), -1);
    CHECK_EQ(t, cluster_id(rt, shared), -1);
    CHECK_EQ(t, count_in_cluster(rt, cc, 21, idc), 21);
    CHECK_EQ(t, count_in_cluster(rt, z, 21, idz), 21);
    CHECK_EQ(t, cluster_info(t, rt, idc).referenced_by, 0);
    VERIFY(t, rt);

    COLLECT(t, rt);
    zs_gc_stats stats = gc_stats(rt);
    CHECK(t, !alive(rt, g));
    CHECK(t, !alive(rt, only_g)); /* reachable only through the garbage member */
    CHECK(t, alive(rt, shared));
    CHECK_EQ(t, count_alive(rt, a, 21), 21);
    CHECK_EQ(t, count_alive(rt, b, 21), 20); /* all but G */
    CHECK_EQ(t, count_alive(rt, cc, 21), 21);
    CHECK_EQ(t, count_alive(rt, z, 21), 21);
    CHECK_EQ(t, node_of(rt, b[2]) ? node_of(rt, b[2])->ref[1] : 1u, ZS_NULL_REF);
    CHECK_EQ(t, list_first(rt, a[4]), ZS_NULL_REF);
    CHECK_EQ(t, list_first(rt, a[3]), b[0]); /* live references are untouched */
    CHECK_EQ(t, stats.references_killed, 2);
    CHECK_EQ(t, stats.objects_freed, 2);
    CHECK_EQ(t, stats.clusters_marked, 2); /* C and Z */
    CHECK_EQ(t, zs_cluster_count(rt), 2);
    CHECK_EQ(t, count_in_cluster(rt, cc, 21, idc), 21);
    cfix_close(&c);
}

/* A garbage mutable object dissolves the cluster referencing it at the next collection; it is freed and the member's slot nulled (unless it is a member's outer). */
static void test_cluster_garbage_mutable_object(runner *t) {
    cfix c;
    if (!cfix_open(t, &c, 16, 1)) return;
    zs_runtime *rt = c.rt;
    zs_ref p[21], s[21];
    uint32_t size = 0;
    build_tree(t, &c, 20, p);
    zs_ref mut = MAKE(t, rt, c.fx.node, ZS_NULL_REF), behind = MAKE(t, rt, c.fx.node, ZS_NULL_REF);
    zs_ref other = MAKE(t, rt, c.fx.node, ZS_NULL_REF);
    LINK(t, rt, mut, 0, behind);
    PUSH(t, rt, p[5], mut);
    PUSH(t, rt, p[6], other);
    LINK(t, rt, p[7], 0, mut);
    CHECK_OK(t, zs_create_cluster(rt, p[0], &size));
    CHECK_EQ(t, size, 21);
    CHECK_EQ(t, cluster_info(t, rt, cluster_id(rt, p[0])).mutable_objects, 2);
    ROOT(t, rt, p[0]);
    /* Cluster S: a member X whose outer O is a mutable object. */
    build_tree(t, &c, 20, s);
    zs_ref o = MAKE(t, rt, c.fx.node, ZS_NULL_REF), x = MAKE(t, rt, c.part, o);
    PUSH(t, rt, s[7], x);
    CHECK_OK(t, zs_create_cluster(rt, s[0], &size));
    CHECK_EQ(t, size, 22);
    ROOT(t, rt, s[0]);
    int32_t idp = cluster_id(rt, p[0]);

    CHECK_OK(t, zs_mark_as_garbage(rt, mut));
    CHECK_OK(t, zs_mark_as_garbage(rt, o));
    CHECK_EQ(t, zs_cluster_count(rt), 2); /* not dissolved before the collection */
    CHECK_EQ(t, count_in_cluster(rt, p, 21, idp), 21);
    VERIFY(t, rt);

    COLLECT(t, rt);
    zs_gc_stats stats = gc_stats(rt);
    CHECK_EQ(t, zs_cluster_count(rt), 0);
    CHECK_EQ(t, stats.clusters_dissolved, 2);
    CHECK_EQ(t, count_in_cluster(rt, p, 21, -1), 21);
    CHECK(t, !alive(rt, mut));
    CHECK(t, !alive(rt, behind));
    CHECK(t, alive(rt, other));
    CHECK_EQ(t, count_alive(rt, p, 21), 21);
    CHECK_EQ(t, list_first(rt, p[5]), ZS_NULL_REF);
    CHECK_EQ(t, node_of(rt, p[7]) ? node_of(rt, p[7])->ref[0] : 1u, ZS_NULL_REF);
    CHECK_EQ(t, list_first(rt, p[6]), other);
    CHECK_EQ(t, stats.references_killed, 2);
    /* An outer is immutable: it keeps its garbage object alive. */
    CHECK(t, alive(rt, o) && alive(rt, x));
    CHECK_EQ(t, count_alive(rt, s, 21), 21);
    int garbage = 0;
    CHECK_OK(t, zs_is_garbage(rt, o, &garbage));
    CHECK(t, garbage);
    cfix_close(&c);
}

/* A strong store (slot, array push or clear, root included) into a member dissolves its cluster and the stored object survives; a weak store does not dissolve. */
static void test_cluster_store_dissolves(runner *t) {
    cfix c;
    if (!cfix_open(t, &c, 16, 1)) return;
    zs_runtime *rt = c.rt;
    zs_ref p[21], q[21], r[21];
    uint32_t size = 0;
    zs_ref h = MAKE(t, rt, c.fx.node, ZS_NULL_REF);
    ROOT(t, rt, h);

    build_tree(t, &c, 20, p);
    CHECK_OK(t, zs_create_cluster(rt, p[0], &size));
    LINK(t, rt, h, 0, p[0]);
    zs_ref x = MAKE(t, rt, c.fx.node, ZS_NULL_REF);
    uint64_t dissolved_before = gc_stats(rt).clusters_dissolved;
    LINK(t, rt, p[19], 0, x);
    CHECK_EQ(t, zs_cluster_count(rt), 0);
    CHECK_EQ(t, count_in_cluster(rt, p, 21, -1), 21);
    CHECK_EQ(t, gc_stats(rt).clusters_dissolved, dissolved_before + 1);
    COLLECT(t, rt);
    CHECK(t, alive(rt, x));
    CHECK_EQ(t, count_alive(rt, p, 21), 21);

    /* A weak store leaves the cluster alone; an array push dissolves it. */
    build_tree(t, &c, 20, q);
    CHECK_OK(t, zs_create_cluster(rt, q[0], &size));
    LINK(t, rt, h, 1, q[0]);
    zs_ref y = MAKE(t, rt, c.fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_store_ref(rt, q[3], NODE_WEAK, y));
    CHECK_EQ(t, zs_cluster_count(rt), 1);
    CHECK_EQ(t, count_in_cluster(rt, q, 21, cluster_id(rt, q[0])), 21);
    PUSH(t, rt, q[12], y);
    CHECK_EQ(t, zs_cluster_count(rt), 0);
    COLLECT(t, rt);
    CHECK(t, alive(rt, y));
    CHECK_EQ(t, count_alive(rt, q, 21), 21);
    CHECK_EQ(t, node_of(rt, q[3]) ? node_of(rt, q[3])->weak : 0u, y);

    /* A store into the root (even of the value it holds) and an array clear dissolve. */
    build_tree(t, &c, 20, r);
    CHECK_OK(t, zs_create_cluster(rt, r[0], &size));
    LINK(t, rt, h, 2, r[0]);
    LINK(t, rt, r[0], 0, r[1]);
    CHECK_EQ(t, zs_cluster_count(rt), 0);
    CHECK_OK(t, zs_create_cluster(rt, r[0], &size));
    CHECK_EQ(t, size, 21);
    CHECK_OK(t, zs_ref_array_clear(rt, r[9], NODE_LIST));
    CHECK_EQ(t, zs_cluster_count(rt), 0);
    COLLECT(t, rt);
    CHECK_EQ(t, count_alive(rt, r, 21), 21);
    cfix_close(&c);
}

/* The value calls (containers, value stores) take the same rule as slot
   stores: writing references into a cluster member dissolves its cluster
   (the first cluster made, id 0, too) and what was stored survives the
   next collection; writing plain data into a member, or references into
   an object outside any cluster (with no memory to spare), leaves the
   clusters alone. A type of the wrong kind or from another runtime is
   refused before anything is written or dissolved. */
static void test_cluster_value_stores_dissolve(runner *t) {
    cfix c;
    if (!cfix_open(t, &c, 4, 1)) return;
    zs_runtime *rt = c.rt;
    const zs_type *object = NULL, *objects = NULL, *plain = NULL, *plains = NULL, *set = NULL;
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &object));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_ARRAY, object, NULL, &objects));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_SET, object, NULL, &set));
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_PLAIN, 4, 4, &plain));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_ARRAY, plain, NULL, &plains));
    zs_ref h = MAKE(t, rt, c.fx.node, ZS_NULL_REF);
    ROOT(t, rt, h);
    zs_ref p[6];
    uint32_t size = 0;
    build_tree(t, &c, 5, p);
    CHECK_OK(t, zs_create_cluster(rt, p[0], &size));
    LINK(t, rt, h, 0, p[0]);
    CHECK_EQ(t, cluster_id(rt, p[5]), 0);
    node *member = node_of(rt, p[5]), *outside = node_of(rt, h);
    if (member == NULL || outside == NULL) {
        cfix_close(&c);
        return;
    }
    zs_array *list = (zs_array *)&member->list; /* laid out as a zs_array */
    zs_ref x = MAKE(t, rt, c.fx.node, ZS_NULL_REF);

    /* Refused: nothing written, nothing dissolved. */
    CHECK_STATUS(t, zs_array_reserve(rt, p[5], set, list, 4), ZS_E_INVALID);
    CHECK_STATUS(t, zs_array_insert_packed(rt, p[5], set, list, 0, &x, 1), ZS_E_INVALID);
    cfix other;
    if (cfix_open(t, &other, 4, 1)) {
        const zs_type *foreign_object = NULL, *foreign = NULL;
        CHECK_OK(t, zs_type_basic(other.rt, ZS_TYPE_OBJECT, 8, 8, &foreign_object));
        CHECK_OK(t, zs_type_container(other.rt, ZS_TYPE_ARRAY, foreign_object, NULL, &foreign));
        CHECK_STATUS(t, zs_array_reserve(rt, p[5], foreign, list, 4), ZS_E_INVALID);
        CHECK_STATUS(t, zs_array_insert(rt, p[5], foreign, list, 0, &x, 1), ZS_E_INVALID);
        CHECK_STATUS(t, zs_value_clear(rt, p[5], foreign, list), ZS_E_INVALID);
        cfix_close(&other);
    }
    CHECK(t, list->count == 0 && zs_cluster_count(rt) == 1);

    /* Plain data into a member: the cluster stays. */
    zs_array numbers = {0};
    const uint32_t values[2] = {7, 8};
    CHECK_OK(t, zs_array_insert_packed(rt, p[5], plains, &numbers, 0, values, 2));
    CHECK_EQ(t, zs_cluster_count(rt), 1);
    CHECK_OK(t, zs_value_clear(rt, p[5], plains, &numbers));

    /* References into an object outside any cluster, with no memory to
       spare (its list has room): the cluster stays. */
    CHECK_OK(t, zs_array_reserve(rt, h, objects, (zs_array *)&outside->list, 4));
    zs_memory_stats memory;
    zs_runtime_memory(rt, &memory);
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, memory.live_bytes));
    CHECK_OK(t, zs_array_insert_packed(rt, h, objects, (zs_array *)&outside->list, 0, &x, 1));
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
    CHECK_EQ(t, zs_cluster_count(rt), 1);

    /* References into a member: dissolved, and what it references lives. */
    zs_ref y = MAKE(t, rt, c.fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_array_insert_packed(rt, p[5], objects, list, 0, &y, 1));
    CHECK_EQ(t, zs_cluster_count(rt), 0);
    CHECK_EQ(t, count_in_cluster(rt, p, 6, -1), 6);
    COLLECT(t, rt);
    CHECK(t, alive(rt, x) && alive(rt, y));
    CHECK_EQ(t, count_alive(rt, p, 6), 6);
    VERIFY(t, rt);
    cfix_close(&c);
}

/* zs_create_cluster refuses non-CLUSTER_ROOT classes, clustered/garbage/stale/dying roots, and a pending mark (BUSY); it works again once the cycle is over. */
static void test_cluster_create_refused(runner *t) {
    cfix c;
    if (!cfix_open(t, &c, 4, 1)) return;
    zs_runtime *rt = c.rt;
    zs_ref a[6], b[6], e[6];
    uint32_t size = 99;
    zs_ref n = MAKE(t, rt, c.fx.node, ZS_NULL_REF), p = MAKE(t, rt, c.part, ZS_NULL_REF);
    ROOT(t, rt, n);
    ROOT(t, rt, p);
    CHECK_STATUS(t, zs_create_cluster(rt, n, &size), ZS_E_INVALID);
    CHECK_EQ(t, size, 0);
    CHECK_STATUS(t, zs_create_cluster(rt, p, &size), ZS_E_INVALID);
    build_tree(t, &c, 5, a);
    ROOT(t, rt, a[0]);
    CHECK_OK(t, zs_create_cluster(rt, a[0], &size));
    CHECK_EQ(t, size, 6);
    CHECK_STATUS(t, zs_create_cluster(rt, a[0], &size), ZS_E_INVALID); /* already a root */
    zs_ref g = MAKE(t, rt, c.croot, ZS_NULL_REF);
    ROOT(t, rt, g);
    CHECK_OK(t, zs_mark_as_garbage(rt, g));
    CHECK_STATUS(t, zs_create_cluster(rt, g, &size), ZS_E_INVALID);
    zs_ref gone = MAKE(t, rt, c.croot, ZS_NULL_REF);
    COLLECT(t, rt);
    CHECK_STATUS(t, zs_create_cluster(rt, gone, &size), ZS_E_STALE);
    CHECK_STATUS(t, zs_create_cluster(rt, ZS_NULL_REF, &size), ZS_E_STALE);
    CHECK_EQ(t, zs_cluster_count(rt), 1);

    /* During a pending incremental mark. */
    build_tree(t, &c, 5, b);
    ROOT(t, rt, b[0]);
    CHECK_OK(t, zs_gc_start_incremental(rt));
    VERIFY(t, rt);
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_MARKING);
    size = 99;
    CHECK_STATUS(t, zs_create_cluster(rt, b[0], &size), ZS_E_BUSY);
    CHECK_EQ(t, size, 0);
    CHECK_EQ(t, count_in_cluster(rt, b, 6, -1), 6);
    run_steps(t, rt, 0);
    purge_all(t, rt);
    CHECK_OK(t, zs_create_cluster(rt, b[0], &size));
    CHECK_EQ(t, size, 6);

    /* While a purge is pending: allowed for a live root, refused for a dying one. */
    build_tree(t, &c, 5, e);
    ROOT(t, rt, e[0]);
    zs_ref dying = MAKE(t, rt, c.croot, ZS_NULL_REF);
    CHECK_OK(t, zs_gc_mark_and_gather(rt));
    VERIFY(t, rt);
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_PURGE_PENDING);
    CHECK_STATUS(t, zs_create_cluster(rt, dying, &size), ZS_E_DYING);
    CHECK_OK(t, zs_create_cluster(rt, e[0], &size));
    CHECK_EQ(t, size, 6);
    VERIFY(t, rt);
    purge_all(t, rt);
    CHECK(t, !alive(rt, dying));
    CHECK_EQ(t, zs_cluster_count(rt), 3);
    COLLECT(t, rt);
    CHECK_EQ(t, count_alive(rt, e, 6) + count_alive(rt, a, 6) + count_alive(rt, b, 6), 18);
    cfix_close(&c);
}

/* Permanent objects (disregard window) never join a cluster nor count as its mutable objects; a permanent ClusterRoot cannot root one; an escaped permanent holder keeps a cluster alive. */
static void test_cluster_permanent_objects(runner *t) {
    cfix c;
    if (!cfix_open_flags(t, &c, 4, 1, ZS_RUNTIME_DISREGARD_WINDOW)) return;
    zs_runtime *rt = c.rt;
    zs_ref perm_part = MAKE(t, rt, c.part, ZS_NULL_REF),
           perm_node = MAKE(t, rt, c.fx.node, ZS_NULL_REF);
    zs_ref perm_root = MAKE(t, rt, c.croot, ZS_NULL_REF),
           perm_holder = MAKE(t, rt, c.fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_close_disregard_for_gc(rt));
    zs_ref p[11];
    uint32_t size = 99;
    CHECK_STATUS(t, zs_create_cluster(rt, perm_root, &size), ZS_E_INVALID);
    CHECK_EQ(t, size, 0);
    build_tree(t, &c, 10, p);
    PUSH(t, rt, p[4], perm_part);
    PUSH(t, rt, p[5], perm_node);
    zs_ref mut = MAKE(t, rt, c.fx.node, ZS_NULL_REF);
    PUSH(t, rt, p[6], mut);
    CHECK_OK(t, zs_create_cluster(rt, p[0], &size));
    CHECK_EQ(t, size, 11);
    int32_t id = cluster_id(rt, p[0]);
    CHECK_EQ(t, cluster_id(rt, perm_part), -1);
    CHECK_EQ(t, cluster_info(t, rt, id).mutable_objects, 1);
    LINK(t, rt, perm_holder, 0, p[9]); /* the permanent holder escapes: scanned as a root */
    COLLECT(t, rt);
    CHECK_EQ(t, count_alive(rt, p, 11), 11);
    CHECK(t, alive(rt, mut) && alive(rt, perm_part) && alive(rt, perm_node));
    CHECK_EQ(t, count_in_cluster(rt, p, 11, id), 11);
    CHECK_EQ(t, gc_stats(rt).clusters_marked, 1);
    LINK(t, rt, perm_holder, 0, ZS_NULL_REF);
    COLLECT(t, rt);
    CHECK_EQ(t, count_alive(rt, p, 11), 0);
    CHECK(t, !alive(rt, mut));
    CHECK(t, alive(rt, perm_part) && alive(rt, perm_node) && alive(rt, perm_root));
    CHECK_EQ(t, zs_cluster_count(rt), 0);
    cfix_close(&c);
}

/* During an incremental mark the barrier marks a stored cluster member's whole cluster, and a store into a marked member dissolves it without losing the new target. */
static void test_cluster_incremental_barrier(runner *t) {
    cfix c;
    if (!cfix_open(t, &c, 16, 1)) return;
    zs_runtime *rt = c.rt;
    zs_ref a[21];
    uint32_t size = 0;
    chain_setup s = build_chain(t, rt, c.fx.node, CHAIN_LENGTH);
    build_tree(t, &c, 20, a);
    CHECK_OK(t, zs_create_cluster(rt, a[0], &size));
    LINK(t, rt, s.last, 0, a[0]); /* the cluster is only at the chain's end */
    int32_t id = cluster_id(rt, a[0]);

    CHECK_OK(t, zs_gc_start_incremental(rt));
    step_once(t, rt); /* H is scanned; the chain's end is not */
    LINK(t, rt, s.holder, 0, a[15]);
    LINK(t, rt, s.last, 0, ZS_NULL_REF);
    run_steps(t, rt, 1);
    purge_all(t, rt);
    zs_gc_stats stats = gc_stats(rt);
    CHECK_EQ(t, count_alive(rt, a, 21), 21);
    CHECK_EQ(t, count_in_cluster(rt, a, 21, id), 21);
    CHECK(t, stats.barrier_marks >= 1);
    CHECK_EQ(t, stats.clusters_marked, 1);

    /* Now the cluster is marked in the first step (through H); a store of an
       unmarked object into a member dissolves it during the mark. */
    zs_ref x = MAKE(t, rt, c.fx.node, ZS_NULL_REF);
    LINK(t, rt, s.last, 0, x);
    CHECK_OK(t, zs_gc_start_incremental(rt));
    step_once(t, rt);
    LINK(t, rt, a[7], 0, x);
    CHECK_EQ(t, zs_cluster_count(rt), 0);
    LINK(t, rt, s.last, 0, ZS_NULL_REF);
    run_steps(t, rt, 1);
    purge_all(t, rt);
    CHECK(t, alive(rt, x));
    CHECK_EQ(t, count_alive(rt, a, 21), 21); /* marked as a unit this cycle */
    /* Next cycle the former members are plain: only what H reaches stays. */
    COLLECT(t, rt);
    CHECK(t, alive(rt, a[15]));
    CHECK(t, !alive(rt, a[0]) && !alive(rt, a[7]) && !alive(rt, x));
    cfix_close(&c);
}

/* ======================================================================
 * Incremental marking: the write barrier and objects born during a mark
 * ====================================================================== */

/* One write-barrier scenario: X is only at the end of a long chain; after
   H has been scanned, X is stored into H and the chain is cut. Returns
   whether X survived the cycle. With the barrier disabled the heap is left
   with a dangling reference in H, which verify must notice; it is then
   repaired. */
static bool barrier_scenario(runner *t, bool disable_barrier) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return !disable_barrier;
    zs_runtime *rt = fx.rt;
    chain_setup s = build_chain(t, rt, fx.node, CHAIN_LENGTH);
    zs_ref x = MAKE(t, rt, fx.node, ZS_NULL_REF);
    LINK(t, rt, s.last, 0, x);
    if (disable_barrier) CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_DISABLE_BARRIER, 1));
    CHECK_OK(t, zs_gc_start_incremental(rt));
    step_once(t, rt);
    zs_gc_stats stats = gc_stats(rt);
    CHECK(t, stats.objects_scanned >= 2 && stats.objects_scanned < CHAIN_LENGTH);
    LINK(t, rt, s.holder, 0, x);
    LINK(t, rt, s.last, 0, ZS_NULL_REF);
    int done = 0;
    uint32_t steps = 1;
    while (!done && steps < MAX_STEPS) {
        CHECK_OK(t, zs_gc_step(rt, 1, &done));
        if (!done || !disable_barrier) VERIFY(t, rt);
        steps++;
    }
    CHECK(t, done);
    CHECK(t, steps > 2);
    /* Without the barrier, H (a survivor) now names a dying object. */
    if (disable_barrier) CHECK_STATUS(t, zs_heap_verify(rt, NULL, 0), ZS_E_CORRUPT);
    CHECK_OK(t, zs_gc_purge(rt, 0, &done));
    bool survived = alive(rt, x);
    if (!disable_barrier) {
        VERIFY(t, rt);
        CHECK(t, gc_stats(rt).barrier_marks >= 1);
        CHECK_EQ(t, node_of(rt, s.holder) ? node_of(rt, s.holder)->ref[0] : 0u, x);
    } else {
        /* H now names a freed slot: the collector lost a live object. */
        CHECK_STATUS(t, zs_heap_verify(rt, NULL, 0), ZS_E_CORRUPT);
        CHECK_EQ(t, gc_stats(rt).barrier_marks, 0);
        LINK(t, rt, s.holder, 0, ZS_NULL_REF); /* repair before anything traces H */
        VERIFY(t, rt);
        CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_DISABLE_BARRIER, 0));
        COLLECT(t, rt);
    }
    CHECK(t, alive(rt, s.holder) && alive(rt, s.last));
    fixture_close(&fx);
    return survived;
}

/* A store into an already-scanned holder during the mark keeps the target (the write barrier); with the barrier disabled the same scenario loses it, so the test detects a missing barrier. */
static void test_incremental_write_barrier(runner *t) {
    CHECK(t, barrier_scenario(t, false));
    CHECK(t, !barrier_scenario(t, true));
}

/* Objects created during a pending mark are born reachable: an unreferenced one survives that cycle and dies in the next. */
static void test_incremental_born_reachable(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    chain_setup s = build_chain(t, rt, fx.node, CHAIN_LENGTH);
    zs_ref before = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_gc_start_incremental(rt));
    VERIFY(t, rt);
    zs_ref at_start = MAKE(t, rt, fx.node, ZS_NULL_REF); /* before any step */
    step_once(t, rt);
    zs_ref mid = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref mid_leaf = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    LINK(t, rt, mid, 0, mid_leaf); /* a reference stored into a new object */
    VERIFY(t, rt);
    run_steps(t, rt, 1);
    purge_all(t, rt);
    CHECK(t, !alive(rt, before));
    CHECK(t, alive(rt, at_start) && alive(rt, mid) && alive(rt, mid_leaf));
    COLLECT(t, rt);
    CHECK(t, !alive(rt, at_start) && !alive(rt, mid) && !alive(rt, mid_leaf));
    CHECK(t, alive(rt, s.last));
    fixture_close(&fx);
}

/* An object created during the mark keeps its outer alive even when the outer's only path (a chain) is cut afterwards: the barrier marks the outer. Without the barrier the outer is lost. */
static void test_incremental_new_object_keeps_outer(runner *t) {
    for (int disable = 0; disable < 2; disable++) {
        fixture fx;
        if (!fixture_open(t, &fx, 0, 0)) return;
        zs_runtime *rt = fx.rt;
        chain_setup s = build_chain(t, rt, fx.node, CHAIN_LENGTH);
        zs_ref outer = MAKE(t, rt, fx.node, ZS_NULL_REF);
        LINK(t, rt, s.last, 0, outer);
        if (disable) CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_DISABLE_BARRIER, 1));
        CHECK_OK(t, zs_gc_start_incremental(rt));
        step_once(t, rt);
        zs_ref inner = MAKE(t, rt, fx.node, outer);
        LINK(t, rt, s.last, 0, ZS_NULL_REF);
        int done = 0;
        for (uint32_t steps = 0; !done && steps < MAX_STEPS; steps++) {
            if (zs_gc_step(rt, 1, &done) != ZS_OK) break;
            if (!done || !disable) VERIFY(t, rt);
        }
        CHECK(t, done);
        if (disable) CHECK_STATUS(t, zs_heap_verify(rt, NULL, 0), ZS_E_CORRUPT);
        CHECK_OK(t, zs_gc_purge(rt, 0, &done));
        CHECK(t, alive(rt, inner));
        if (!disable) {
            VERIFY(t, rt);
            CHECK(t, alive(rt, outer));
            CHECK_EQ(t, zs_resolve(rt, inner) ? zs_resolve(rt, inner)->outer : 0u, outer);
        } else {
            CHECK(t, !alive(rt, outer)); /* the inner's outer dangles */
            CHECK_STATUS(t, zs_heap_verify(rt, NULL, 0), ZS_E_CORRUPT);
            CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_DISABLE_BARRIER, 0));
        }
        /* Next cycle: nothing references the inner; both go. */
        COLLECT(t, rt);
        CHECK(t, !alive(rt, inner) && !alive(rt, outer));
        fixture_close(&fx);
    }
}

/* zs_add_to_root and zs_add_strong_ref during a pending mark keep objects whose only path (a chain) is then cut. */
static void test_incremental_root_and_strong_ref_barrier(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    chain_setup s = build_chain(t, rt, fx.node, CHAIN_LENGTH);
    zs_ref rooted = MAKE(t, rt, fx.node, ZS_NULL_REF), strong = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref below = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    LINK(t, rt, rooted, 0, below); /* and what they reference */
    LINK(t, rt, s.last, 0, rooted);
    LINK(t, rt, s.last, 1, strong);
    CHECK_OK(t, zs_gc_start_incremental(rt));
    step_once(t, rt);
    ROOT(t, rt, rooted);
    CHECK_OK(t, zs_add_strong_ref(rt, strong));
    LINK(t, rt, s.last, 0, ZS_NULL_REF);
    LINK(t, rt, s.last, 1, ZS_NULL_REF);
    run_steps(t, rt, 1);
    purge_all(t, rt);
    CHECK(t, alive(rt, rooted) && alive(rt, strong) && alive(rt, below));
    CHECK(t, gc_stats(rt).barrier_marks >= 2);
    COLLECT(t, rt); /* the next full collection agrees */
    CHECK(t, alive(rt, rooted) && alive(rt, strong) && alive(rt, below));
    UNROOT(t, rt, rooted);
    CHECK_OK(t, zs_release_strong_ref(rt, strong));
    COLLECT(t, rt);
    CHECK(t, !alive(rt, rooted) && !alive(rt, strong) && !alive(rt, below));
    fixture_close(&fx);
}

/* zs_gc_step and zs_gc_start_incremental refuse calls that do not fit the phase. */
static void test_incremental_phase_errors(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    int done = 7;
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_IDLE);
    CHECK_STATUS(t, zs_gc_step(rt, 0, &done), ZS_E_INVALID); /* nothing pending */
    CHECK(t, !done);
    zs_ref kept = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, kept);
    CHECK_OK(t, zs_gc_start_incremental(rt));
    CHECK_STATUS(t, zs_gc_start_incremental(rt), ZS_E_INVALID);
    /* No purge while the cycle marks: nothing is gathered yet. */
    done = 7;
    CHECK_STATUS(t, zs_gc_purge(rt, 0, &done), ZS_E_BUSY);
    CHECK(t, !done && zs_gc_phase_of(rt) == ZS_GC_MARKING);
    CHECK_EQ(t, run_steps(t, rt, 0), 1);         /* budget 0: to the end in one step */
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_IDLE); /* nothing died: no purge pending */
    CHECK(t, alive(rt, kept));
    fixture_close(&fx);
}

/* ======================================================================
 * Incremental: the gathering phase, budgeted purges, step counts
 * ====================================================================== */

/* Every value write naming `owner` (dying) is refused with ZS_E_DYING and
   changes nothing; the same writes with a live owner succeed. The values are
   locals: the owner check does not depend on where the memory is. */
static void check_value_writes_refused(runner *t, zs_runtime *rt, zs_ref owner, zs_ref live) {
    const zs_type *u32 = NULL, *string = NULL, *array = NULL, *set = NULL, *optional = NULL;
    const zs_type *delegate = NULL;
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_PLAIN, 4, 4, &u32));
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_STRING, 2, 2, &string));
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_DELEGATE, 0, 0, &delegate));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_ARRAY, u32, NULL, &array));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_SET, u32, NULL, &set));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_OPTIONAL, u32, NULL, &optional));
    if (u32 == NULL || string == NULL || array == NULL || set == NULL || optional == NULL ||
        delegate == NULL)
        return;
    uint32_t name = 0, number = 0;
    CHECK_OK(t, zs_name_intern(rt, "fn()", 4, &name, &number));
    const uint16_t units[2] = {'h', 'i'};
    uint32_t plain = 7, index = 0;
    int added = 0, removed = 0;
    zs_string text = {0};
    zs_array list = {0}, bindings = {0}, *sparse = NULL, *sparse_out = NULL;
    zs_hash hash = {0};
    struct {
        uint32_t value;
        uint8_t set;
    } maybe = {0, 0};
    zs_binding binding = {0};
    CHECK_OK(t, zs_callable_retain(rt, 1));
    CHECK_STATUS(t, zs_object_writable(rt, owner), ZS_E_DYING);
    CHECK_STATUS(t, zs_string_assign(rt, owner, string, &text, units, 2), ZS_E_DYING);
    CHECK_STATUS(t, zs_value_assign(rt, owner, u32, &index, &plain), ZS_E_DYING);
    CHECK_STATUS(t, zs_array_insert(rt, owner, array, &list, 0, &plain, 1), ZS_E_DYING);
    CHECK_STATUS(t, zs_array_reserve(rt, owner, array, &list, 16), ZS_E_DYING);
    CHECK_STATUS(t, zs_hash_add(rt, owner, set, &hash, &plain, &index, &added), ZS_E_DYING);
    CHECK_STATUS(t, zs_optional_set(rt, owner, optional, &maybe, &plain), ZS_E_DYING);
    CHECK_STATUS(t, zs_binding_set(rt, owner, &binding, ZS_NULL_REF, 0, 1), ZS_E_DYING);
    CHECK_STATUS(t, zs_multicast_add(rt, owner, &bindings, ZS_NULL_REF, 0, 1), ZS_E_DYING);
    CHECK_STATUS(t, zs_multicast_add(rt, owner, &bindings, live, name, 0), ZS_E_DYING);
    CHECK_STATUS(t, zs_sparse_bindings(rt, owner, &sparse, 1, &sparse_out), ZS_E_DYING);
    CHECK(t, text.data == NULL && text.length == 0 && index == 0 && list.data == NULL &&
                 hash.entries.count == 0 && !maybe.set && binding.callable == 0 &&
                 bindings.data == NULL && sparse == NULL && sparse_out == NULL);
    /* With a live owner the same calls succeed; removals are refused for the dying one. */
    CHECK_OK(t, zs_object_writable(rt, live));
    CHECK_OK(t, zs_string_assign(rt, live, string, &text, units, 2));
    CHECK_OK(t, zs_array_insert(rt, live, array, &list, 0, &plain, 1));
    CHECK_OK(t, zs_array_reserve(rt, live, array, &list, 16));
    CHECK_OK(t, zs_hash_add(rt, live, set, &hash, &plain, &index, &added));
    CHECK_OK(t, zs_optional_set(rt, live, optional, &maybe, &plain));
    CHECK_OK(t, zs_binding_set(rt, live, &binding, ZS_NULL_REF, 0, 1));
    CHECK_OK(t, zs_multicast_add(rt, live, &bindings, ZS_NULL_REF, 0, 1));
    CHECK_OK(t, zs_sparse_bindings(rt, live, &sparse, 1, &sparse_out));
    CHECK(t, text.length == 2 && list.count == 1 && hash.entries.count == 1 && maybe.set &&
                 binding.callable == 1 && bindings.count == 1 && sparse != NULL &&
                 sparse_out == sparse);
    CHECK_STATUS(t, zs_string_assign(rt, owner, string, &text, units, 1), ZS_E_DYING);
    CHECK_STATUS(t, zs_value_clear(rt, owner, string, &text), ZS_E_DYING);
    CHECK_STATUS(t, zs_array_remove(rt, owner, array, &list, 0, 1), ZS_E_DYING);
    CHECK_STATUS(t, zs_hash_remove(rt, owner, set, &hash, &plain, &removed), ZS_E_DYING);
    CHECK_STATUS(t, zs_binding_set(rt, owner, &binding, ZS_NULL_REF, 0, 0), ZS_E_DYING);
    CHECK_STATUS(t, zs_multicast_remove(rt, owner, &bindings, 0, 1), ZS_E_DYING);
    CHECK(t, text.length == 2 && list.count == 1 && hash.entries.count == 1 && !removed &&
                 binding.callable == 1 && bindings.count == 1);
    /* Reading a sparse list is not a write. */
    CHECK_OK(t, zs_sparse_bindings(rt, owner, &sparse, 0, &sparse_out));
    CHECK(t, sparse_out == sparse);
    /* Release everything with owner 0 (as a black value would). */
    CHECK_OK(t, zs_value_clear(rt, ZS_NULL_REF, string, &text));
    CHECK_OK(t, zs_value_clear(rt, ZS_NULL_REF, array, &list));
    CHECK_OK(t, zs_value_clear(rt, ZS_NULL_REF, set, &hash));
    CHECK_OK(t, zs_value_clear(rt, ZS_NULL_REF, optional, &maybe));
    CHECK_OK(t, zs_binding_set(rt, ZS_NULL_REF, &binding, ZS_NULL_REF, 0, 0));
    CHECK_OK(t, zs_multicast_remove(rt, ZS_NULL_REF, &bindings, 0, 1));
    const zs_type *multicast = NULL, *sparse_type = NULL;
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_MULTICAST, 0, 0, &multicast));
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_SPARSE, 0, 0, &sparse_type));
    if (multicast != NULL) CHECK_OK(t, zs_value_clear(rt, ZS_NULL_REF, multicast, &bindings));
    if (sparse_type != NULL) CHECK_OK(t, zs_value_clear(rt, ZS_NULL_REF, sparse_type, &sparse));
    CHECK_OK(t, zs_callable_release(rt, 1));
    uint32_t released[4] = {0}, released_count = 0;
    CHECK_OK(t, zs_take_released_callables(rt, released, 4, &released_count));
    CHECK(t, released_count == 1 && released[0] == 1);
}

/* While ZS_GC_GATHERING, unmarked objects count as dying: they cannot be stored, rooted, given a strong ref, used as an outer or resolved; marked ones still can. */
static void test_gathering_refuses_unmarked(runner *t) {
    enum { GARBAGE_LEAVES = 100000 };
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    zs_ref holder = MAKE(t, rt, fx.node, ZS_NULL_REF), marked = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, holder);
    LINK(t, rt, holder, 0, marked);
    uint32_t failures = 0;
    for (uint32_t i = 0; i < GARBAGE_LEAVES; i++) {
        zs_ref ref = ZS_NULL_REF;
        failures += zs_object_new(rt, fx.leaf, ZS_NULL_REF, ZS_NAME_AUTO, 0, &ref, NULL) != ZS_OK;
    }
    CHECK_EQ(t, failures, 0);
    zs_ref unmarked = MAKE(t, rt, fx.node, ZS_NULL_REF);

    /* A 1 ns step marks this tiny live set, then gathers at most one stride
       of the 100,000 dead items per step: GATHERING lasts many steps. Retry
       whole cycles a few times in case a step ever does it all at once. */
    bool observed = false;
    for (int attempt = 0; attempt < 20 && !observed; attempt++) {
        CHECK_OK(t, zs_gc_start_incremental(rt));
        int done = 0;
        for (uint32_t steps = 0; !done && steps < MAX_STEPS; steps++) {
            CHECK_OK(t, zs_gc_step(rt, 1, &done));
            VERIFY(t, rt);
            if (!done && zs_gc_phase_of(rt) == ZS_GC_GATHERING) break;
        }
        observed = !done && zs_gc_phase_of(rt) == ZS_GC_GATHERING;
        if (!done) break; /* observed, or stuck (a failure) */
        /* Everything died at once: start over with a fresh dead heap. */
        purge_all(t, rt);
        for (uint32_t i = 0; i < GARBAGE_LEAVES; i++) {
            zs_ref ref = ZS_NULL_REF;
            failures += zs_object_new(rt, fx.leaf, ZS_NULL_REF, ZS_NAME_AUTO, 0, &ref, NULL) !=
                        ZS_OK;
        }
        unmarked = MAKE(t, rt, fx.node, ZS_NULL_REF);
    }
    CHECK(t, observed);
    CHECK_EQ(t, failures, 0);
    if (!observed) {
        fixture_close(&fx);
        return;
    }
    zs_object *object = NULL;
    zs_ref out = ZS_NULL_REF;
    /* Published for lock-free readers: a gather under way. */
    CHECK(t, __atomic_load_n(zs_dying_word(rt), __ATOMIC_RELAXED) != 0);
    CHECK_STATUS(t, zs_store_ref(rt, holder, NODE_REF(1), unmarked), ZS_E_DYING);
    CHECK_STATUS(t, zs_ref_array_push(rt, holder, NODE_LIST, unmarked), ZS_E_DYING);
    CHECK_STATUS(t, zs_store_ref(rt, unmarked, NODE_REF(0), marked), ZS_E_DYING); /* as holder */
    CHECK_STATUS(t, zs_add_to_root(rt, unmarked), ZS_E_DYING);
    CHECK_STATUS(t, zs_add_strong_ref(rt, unmarked), ZS_E_DYING);
    CHECK_STATUS(t, zs_resolve_for_conjugate(rt, unmarked, &object), ZS_E_DYING);
    CHECK_STATUS(t, zs_object_new(rt, fx.node, unmarked, ZS_NAME_AUTO, 0, &out, NULL), ZS_E_DYING);
    CHECK_STATUS(t, zs_mark_as_garbage(rt, unmarked), ZS_E_DYING);
    check_value_writes_refused(t, rt, unmarked, marked);
    /* Marked objects stay usable; new objects are born marked. */
    CHECK_OK(t, zs_store_ref(rt, holder, NODE_REF(1), marked));
    zs_ref born = MAKE(t, rt, fx.node, marked);
    LINK(t, rt, marked, 0, born);
    CHECK_OK(t, zs_add_strong_ref(rt, born));
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_GATHERING);
    VERIFY(t, rt);

    /* Gathering proceeds in bounded chunks, and every step makes progress
       however small its budget (a step that starts in GATHERING gathers). */
    uint32_t gather_steps = run_steps(t, rt, 1);
    CHECK(t, gather_steps > 1 && gather_steps < 1000);
    CHECK_EQ(t, gc_stats(rt).objects_unreachable, GARBAGE_LEAVES + 1);
    check_value_writes_refused(t, rt, unmarked, marked); /* gathered: DYING now */
    purge_all(t, rt);
    CHECK(t, !alive(rt, unmarked));
    CHECK(t, alive(rt, holder) && alive(rt, marked) && alive(rt, born));
    CHECK_EQ(t, zs_live_objects(rt), 3);
    CHECK_OK(t, zs_release_strong_ref(rt, born));
    COLLECT(t, rt);
    CHECK(t, alive(rt, born)); /* still referenced by marked */
    fixture_close(&fx);
}

/* A gather step stops at its deadline and nowhere else: a step whose
   budget is far from spent (an hour) marks and gathers every stride of a
   heap of several strides (4,096 items each, native/src/gc_gather.c) in
   that one step. Gathered with nothing to expire, the dying word is clear
   again (zsharp.h: a managed side's writes take their fast path), and
   stays clear through the purge. */
static void test_gather_stops_only_at_its_deadline(runner *t) {
    enum { GARBAGE = 3 * 4096 + 5 };
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    zs_ref holder = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, holder);
    for (uint32_t i = 0; i < GARBAGE; i++) (void)MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    const uint32_t *word = zs_dying_word(rt);
    CHECK_OK(t, zs_gc_start_incremental(rt));
    int done = 0;
    CHECK_OK(t, zs_gc_step(rt, 3600ull * 1000000000ull, &done));
    CHECK(t, done);
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_PURGE_PENDING);
    CHECK_EQ(t, gc_stats(rt).objects_unreachable, GARBAGE);
    CHECK_EQ(t, __atomic_load_n(word, __ATOMIC_RELAXED), 0);
    purge_all(t, rt);
    CHECK_EQ(t, __atomic_load_n(word, __ATOMIC_RELAXED), 0);
    CHECK_EQ(t, zs_live_objects(rt), 1);
    VERIFY(t, rt);
    fixture_close(&fx);
}

/* Clusters cannot be created while gathering either (ZS_E_BUSY). */
static void test_gathering_refuses_cluster(runner *t) {
    enum { GARBAGE_LEAVES = 50000 };
    cfix c;
    if (!cfix_open(t, &c, 4, 1)) return;
    zs_runtime *rt = c.rt;
    zs_ref a[6];
    build_tree(t, &c, 5, a);
    ROOT(t, rt, a[0]);
    for (uint32_t i = 0; i < GARBAGE_LEAVES; i++) MAKE(t, rt, c.fx.leaf, ZS_NULL_REF);
    CHECK_OK(t, zs_gc_start_incremental(rt));
    int done = 0;
    for (uint32_t steps = 0; !done && zs_gc_phase_of(rt) != ZS_GC_GATHERING && steps < MAX_STEPS;
         steps++) {
        CHECK_OK(t, zs_gc_step(rt, 1, &done));
        VERIFY(t, rt);
    }
    uint32_t size = 99;
    CHECK(t, !done && zs_gc_phase_of(rt) == ZS_GC_GATHERING);
    if (!done) {
        CHECK_STATUS(t, zs_create_cluster(rt, a[0], &size), ZS_E_BUSY);
        CHECK_EQ(t, size, 0);
        run_steps(t, rt, 1);
    }
    purge_all(t, rt);
    CHECK_OK(t, zs_create_cluster(rt, a[0], &size));
    CHECK_EQ(t, size, 6);
    cfix_close(&c);
}

typedef struct hook_counts {
    uint32_t begins, finishes;
    bool finish_before_begin; /* a BEGIN_DESTROY after some FINISH_DESTROY */
} hook_counts;

static void counting_hook(void *user, zs_runtime *rt, zs_object *object, zs_destroy_phase phase) {
    hook_counts *counts = user;
    (void)rt;
    (void)object;
    if (phase == ZS_BEGIN_DESTROY) {
        counts->begins++;
        if (counts->finishes > 0) counts->finish_before_begin = true;
    } else {
        counts->finishes++;
    }
}

/* A budgeted purge frees the gathered objects a few at a time (BeginDestroy for all first), verifying in between; a new incremental start finishes a pending purge first, after the expiring list is taken. */
static void test_incremental_purge(runner *t) {
    enum { DYING = 10000, KEPT = 100 };
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    hook_counts counts = {0, 0, false};
    zs_set_destroy_hook(rt, counting_hook, &counts);
    zs_ref keeper = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, keeper);
    for (uint32_t i = 0; i < KEPT; i++) PUSH(t, rt, keeper, MAKE(t, rt, fx.leaf, ZS_NULL_REF));
    for (uint32_t i = 0; i < DYING; i++) MAKE(t, rt, fx.node, ZS_NULL_REF);

    CHECK_OK(t, zs_gc_mark_and_gather(rt));
    VERIFY(t, rt);
    CHECK_EQ(t, zs_gc_pending_purge(rt), DYING);
    uint32_t pending = DYING, calls = 0;
    int done = 0;
    while (!done && calls < MAX_STEPS) {
        CHECK_OK(t, zs_gc_purge(rt, 1, &done));
        VERIFY(t, rt);
        calls++;
        uint32_t now = zs_gc_pending_purge(rt);
        CHECK(t, now < pending); /* every call frees some */
        pending = now;
        if (calls == 1) {
            CHECK_EQ(t, counts.begins, DYING); /* BeginDestroy for all before freeing any */
            CHECK_EQ(t, counts.finishes, DYING - now);
            CHECK(t, now > 0);
        }
    }
    CHECK(t, done);
    CHECK(t, calls > 3);
    CHECK_EQ(t, zs_gc_pending_purge(rt), 0);
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_IDLE);
    CHECK_EQ(t, counts.begins, DYING);
    CHECK_EQ(t, counts.finishes, DYING);
    CHECK(t, !counts.finish_before_begin);
    CHECK_EQ(t, gc_stats(rt).objects_freed, DYING);
    CHECK_EQ(t, zs_live_objects(rt), KEPT + 1);

    /* A pending purge with one conjugate: the next start waits for the
       expiring list, then finishes the purge before marking. */
    zs_ref conj = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_object *object = NULL;
    CHECK_OK(t, zs_resolve_for_conjugate(rt, conj, &object));
    for (uint32_t i = 0; i < DYING; i++) MAKE(t, rt, fx.node, ZS_NULL_REF);
    counts = (hook_counts){0, 0, false};
    CHECK_OK(t, zs_gc_mark_and_gather(rt));
    VERIFY(t, rt);
    CHECK_STATUS(t, zs_gc_purge(rt, 1, &done), ZS_E_EXPIRY_PENDING);
    CHECK_STATUS(t, zs_gc_start_incremental(rt), ZS_E_EXPIRY_PENDING);
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_PURGE_PENDING);
    zs_ref taken[4];
    uint32_t taken_count = 0;
    CHECK_OK(t, zs_gc_take_expiring(rt, taken, 4, &taken_count));
    CHECK_EQ(t, taken_count, 1);
    CHECK_EQ(t, taken[0], conj);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(t, zs_gc_purge(rt, 1, &done));
        VERIFY(t, rt);
    }
    CHECK(t, !done);
    CHECK(t, zs_gc_pending_purge(rt) > 0 && zs_gc_pending_purge(rt) < DYING + 1);
    CHECK_OK(t, zs_gc_start_incremental(rt));
    VERIFY(t, rt);
    CHECK_EQ(t, zs_gc_pending_purge(rt), 0);
    CHECK_EQ(t, counts.finishes, DYING + 1);
    CHECK_EQ(t, zs_live_objects(rt), KEPT + 1);
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_MARKING);
    CHECK(t, !alive(rt, conj));
    run_steps(t, rt, 1);
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_IDLE); /* nothing else died */
    CHECK_EQ(t, zs_live_objects(rt), KEPT + 1);
    zs_set_destroy_hook(rt, NULL, NULL);
    fixture_close(&fx);
}

/* An unreachable cluster whose PARTS members come before 10,000 dead fillers
   and whose root comes after them, plus a rooted node; an incremental cycle
   is then stepped into GATHERING and one stride further, so the members are
   gathered (dying) and the root is not yet. */
enum { MID_FILLERS = 10000, MID_PARTS = 20 };
typedef struct mid_gather {
    zs_ref parts[MID_PARTS];
    zs_ref root, keep;
    uint32_t live_before;
} mid_gather;

static void step_into_gathering(runner *t, cfix *c, mid_gather *s) {
    zs_runtime *rt = c->rt;
    for (uint32_t i = 0; i < MID_PARTS; i++) {
        s->parts[i] = MAKE(t, rt, c->part, ZS_NULL_REF);
        if (i > 0) LINK(t, rt, s->parts[i - 1], 0, s->parts[i]);
    }
    for (uint32_t i = 0; i < MID_FILLERS; i++) MAKE(t, rt, c->fx.leaf, ZS_NULL_REF);
    s->root = MAKE(t, rt, c->croot, ZS_NULL_REF);
    LINK(t, rt, s->root, 0, s->parts[0]);
    uint32_t size = 0;
    CHECK_OK(t, zs_create_cluster(rt, s->root, &size));
    CHECK_EQ(t, size, MID_PARTS + 1);
    s->keep = MAKE(t, rt, c->fx.node, ZS_NULL_REF);
    ROOT(t, rt, s->keep);
    s->live_before = zs_live_objects(rt);

    CHECK_OK(t, zs_gc_start_incremental(rt));
    int done = 0;
    for (uint32_t steps = 0; !done && zs_gc_phase_of(rt) != ZS_GC_GATHERING && steps < MAX_STEPS;
         steps++) {
        CHECK_OK(t, zs_gc_step(rt, 1, &done));
        VERIFY(t, rt);
    }
    CHECK_OK(t, zs_gc_step(rt, 1, &done)); /* gathers the first stride: the members */
    VERIFY(t, rt);
    CHECK(t, !done);
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_GATHERING);
    uint32_t pending = zs_gc_pending_purge(rt);
    CHECK(t, pending > 0 && pending < MID_FILLERS);
}

/* zs_gc_purge during ZS_GC_GATHERING frees nothing (the cycle's dying set is incomplete), so BeginDestroy still runs for every dying object before any is freed. */
static void test_purge_waits_for_gathering(runner *t) {
    /* Freeing the objects gathered so far would call FinishDestroy before
       BeginDestroy reached the rest, and free a dying cluster's members
       before its root is gathered (zs_cluster_release_dying would then walk
       freed slots: an assertion, or stale cluster_index writes). */
    cfix c;
    if (!cfix_open(t, &c, 4, 1)) return;
    zs_runtime *rt = c.rt;
    hook_counts counts = {0, 0, false};
    zs_set_destroy_hook(rt, counting_hook, &counts);
    mid_gather s;
    step_into_gathering(t, &c, &s);
    int done = 0;
    zs_status status = zs_gc_purge(rt, 0, &done);
    uint32_t freed = s.live_before - zs_live_objects(rt);
    CHECK_EQ(t, freed, 0);
    CHECK_EQ(t, counts.finishes, 0);
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_GATHERING);
    if (freed != 0) {
        fprintf(stderr,
                "  zs_gc_purge returned %d and freed %u objects during GATHERING "
                "(BeginDestroy ran for %u of %u dying objects); not finishing the cycle\n",
                (int)status, freed, counts.begins, MID_FILLERS + MID_PARTS + 1);
        zs_set_destroy_hook(rt, NULL, NULL);
        cfix_close(&c);
        return;
    }
    VERIFY(t, rt);
    /* Mid-gather, a dying object has no chains to ask for; a live one has. */
    zs_chain_link links[4];
    uint32_t count = 0;
    CHECK_STATUS(t, zs_reference_chains(rt, s.parts[0], 0, links, 4, &count), ZS_E_DYING);
    CHECK_OK(t, zs_reference_chains(rt, s.keep, 0, links, 4, &count));
    CHECK(t, count == 1 && links[0].holder == s.keep && links[0].root == ZS_CHAIN_ROOT_ADDED);
    run_steps(t, rt, 1);
    purge_all(t, rt);
    CHECK_EQ(t, count_alive(rt, s.parts, MID_PARTS), 0);
    CHECK(t, !alive(rt, s.root) && alive(rt, s.keep));
    CHECK_EQ(t, counts.begins, MID_FILLERS + MID_PARTS + 1);
    CHECK_EQ(t, counts.finishes, MID_FILLERS + MID_PARTS + 1);
    CHECK(t, !counts.finish_before_begin);
    zs_set_destroy_hook(rt, NULL, NULL);
    cfix_close(&c);
}

/* Dissolving a dying cluster whose members are already gathered (its root not yet) is harmless: the heap verifies and the whole cluster still dies. */
static void test_dissolve_dying_cluster_while_gathering(runner *t) {
    cfix c;
    if (!cfix_open(t, &c, 4, 1)) return;
    zs_runtime *rt = c.rt;
    mid_gather s;
    step_into_gathering(t, &c, &s);
    CHECK_EQ(t, zs_cluster_count(rt), 1);
    CHECK_OK(t, zs_dissolve_cluster(rt, s.parts[5]));
    CHECK_EQ(t, zs_cluster_count(rt), 0);
    CHECK_EQ(t, cluster_id(rt, s.root), -1);
    VERIFY(t, rt);
    /* Mid-gather, a dying object has no chains to ask for; a live one has. */
    zs_chain_link links[4];
    uint32_t count = 0;
    CHECK_STATUS(t, zs_reference_chains(rt, s.parts[0], 0, links, 4, &count), ZS_E_DYING);
    CHECK_OK(t, zs_reference_chains(rt, s.keep, 0, links, 4, &count));
    CHECK(t, count == 1 && links[0].holder == s.keep && links[0].root == ZS_CHAIN_ROOT_ADDED);
    run_steps(t, rt, 1);
    purge_all(t, rt);
    CHECK_EQ(t, count_alive(rt, s.parts, MID_PARTS), 0);
    CHECK(t, !alive(rt, s.root) && alive(rt, s.keep));
    CHECK_EQ(t, zs_live_objects(rt), 1);
    cfix_close(&c);
}

/* Freeing a runtime in the middle of a cycle (marking, gathering with a half-gathered dying cluster, or a partial purge) destroys every object exactly once: one BeginDestroy and one FinishDestroy each (LeakSanitizer checks the memory). */
static void test_runtime_free_mid_cycle(runner *t) {
    for (int stop = 0; stop < 3; stop++) {
        cfix c;
        if (!cfix_open(t, &c, 4, 1)) return;
        zs_runtime *rt = c.rt;
        hook_counts counts = {0, 0, false};
        zs_set_destroy_hook(rt, counting_hook, &counts);
        mid_gather s;
        step_into_gathering(t, &c, &s); /* stop 1: here */
        uint32_t total = s.live_before;
        if (stop == 0) { /* finish this cycle; stop one step into the next mark */
            run_steps(t, rt, 0);
            purge_all(t, rt);
            build_chain(t, rt, c.fx.node, CHAIN_LENGTH);
            total += CHAIN_LENGTH + 2;
            CHECK_OK(t, zs_gc_start_incremental(rt));
            step_once(t, rt);
        } else if (stop == 2) { /* gathered; one budgeted purge call */
            run_steps(t, rt, 1);
            int done = 1;
            CHECK_OK(t, zs_gc_purge(rt, 1, &done));
            VERIFY(t, rt);
            CHECK(t, !done && zs_gc_pending_purge(rt) > 0);
        }
        zs_runtime_free(rt);
        c.rt = c.fx.rt = NULL;
        CHECK_EQ(t, counts.begins, total);
        CHECK_EQ(t, counts.finishes, total);
    }
}

/* What a teardown hook saw of the name index. */
typedef struct name_probe {
    uint32_t name;
    uint32_t found_in_begin, found_in_finish;
} name_probe;

/* Destroy hook: look every probed name up (numbers 1..64). */
static void probing_hook(void *user, zs_runtime *rt, zs_object *object, zs_destroy_phase phase) {
    (void)object;
    name_probe *p = user;
    for (uint32_t number = 1; number <= 64; number++) {
        zs_ref found = ZS_NULL_REF;
        if (zs_find_object(rt, ZS_NULL_REF, p->name, number, &found) == ZS_OK &&
            found != ZS_NULL_REF) {
            if (phase == ZS_BEGIN_DESTROY) p->found_in_begin++;
            else p->found_in_finish++;
        }
    }
}

/* Runtime teardown empties the name index at once (no per-object unlinking):
   BeginDestroy hooks still find objects by name, FinishDestroy hooks find
   none (and never read a freed object through the index). */
static void test_teardown_name_index(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 1024, 0)) return;
    name_probe probe = {0, 0, 0};
    uint32_t number = 0;
    CHECK_OK(t, zs_name_intern(fx.rt, "Probe", 5, &probe.name, &number));
    for (uint32_t i = 1; i <= 64; i++) {
        zs_ref ref = ZS_NULL_REF;
        CHECK_OK(t, zs_object_new(fx.rt, fx.node, ZS_NULL_REF, probe.name, i, &ref, NULL));
        if (i % 2) ROOT(t, fx.rt, ref);
    }
    zs_set_destroy_hook(fx.rt, probing_hook, &probe);
    zs_runtime_free(fx.rt);
    fx.rt = NULL;
    CHECK_EQ(t, probe.found_in_begin, 64u * 64u);
    CHECK_EQ(t, probe.found_in_finish, 0);
}

/* The write barrier's work (zs_gc_stats.barrier_slots) one store adds while
   a mark is pending. */
static uint64_t barrier_work(zs_runtime *rt, uint64_t *mark) {
    uint64_t now = gc_stats(rt).barrier_slots, work = now - *mark;
    *mark = now;
    return work;
}

/* A store during a mark barriers the references it writes, never the rest
   of the container it writes into: into containers already holding 4,096
   references, each insertion costs the barrier exactly the references
   inserted and a removal none. A whole-value copy writes every element, and
   the barrier sees every one of them (the counter measures real work). */
static void test_barrier_work_is_what_a_store_writes(runner *t) {
    enum { HELD = 4096 };
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    const zs_type *object = NULL, *array = NULL, *set = NULL, *map = NULL, *optional = NULL;
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &object));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_ARRAY, object, NULL, &array));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_SET, object, NULL, &set));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_MAP, object, object, &map));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_OPTIONAL, object, NULL, &optional));
    zs_ref handles[5] = {0};
    zs_array *list = NULL, *copy = NULL;
    zs_hash *hash_set = NULL, *hash_map = NULL;
    void *maybe = NULL;
    CHECK_OK(t, zs_value_new(rt, array, &handles[0], (void **)&list));
    CHECK_OK(t, zs_value_new(rt, array, &handles[1], (void **)&copy));
    CHECK_OK(t, zs_value_new(rt, set, &handles[2], (void **)&hash_set));
    CHECK_OK(t, zs_value_new(rt, map, &handles[3], (void **)&hash_map));
    CHECK_OK(t, zs_value_new(rt, optional, &handles[4], &maybe));
    if (list == NULL || copy == NULL || hash_set == NULL || hash_map == NULL || maybe == NULL) {
        fixture_close(&fx);
        return;
    }
    zs_ref x = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, x);
    uint32_t failures = 0, index = 0;
    for (uint32_t i = 0; i < HELD; i++) { /* black values are roots: they keep these */
        zs_ref held = MAKE(t, rt, fx.node, ZS_NULL_REF);
        failures += zs_array_insert_packed(rt, ZS_NULL_REF, array, list, i, &held, 1) != ZS_OK;
        failures += zs_hash_add(rt, ZS_NULL_REF, set, hash_set, &held, &index, NULL) != ZS_OK;
        failures += zs_hash_add(rt, ZS_NULL_REF, map, hash_map, &held, &index, NULL) != ZS_OK;
    }
    CHECK_EQ(t, failures, 0);
    CHECK_OK(t, zs_gc_start_incremental(rt));
    int done = 1;
    CHECK_OK(t, zs_gc_step_bounded(rt, 0, 1, &done)); /* one object: the mark stays pending */
    CHECK(t, !done);
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_MARKING);
    uint64_t mark = gc_stats(rt).barrier_slots;
    zs_ref two[2] = {x, x};
    CHECK_OK(t, zs_array_insert_packed(rt, ZS_NULL_REF, array, list, 0, &x, 1));
    CHECK_EQ(t, barrier_work(rt, &mark), 1);
    CHECK_OK(t, zs_array_insert_packed(rt, ZS_NULL_REF, array, list, list->count, two, 2));
    CHECK_EQ(t, barrier_work(rt, &mark), 2);
    CHECK_OK(t, zs_array_insert(rt, ZS_NULL_REF, array, list, HELD / 2, &x, 1));
    CHECK_EQ(t, barrier_work(rt, &mark), 1);
    CHECK_OK(t, zs_array_remove(rt, ZS_NULL_REF, array, list, 0, 1));
    CHECK_EQ(t, barrier_work(rt, &mark), 0);
    int added = 0, removed = 0;
    CHECK_OK(t, zs_hash_add(rt, ZS_NULL_REF, set, hash_set, &x, &index, &added));
    CHECK(t, added == 1);
    CHECK_EQ(t, barrier_work(rt, &mark), 1);
    CHECK_OK(t, zs_hash_remove(rt, ZS_NULL_REF, set, hash_set, &x, &removed));
    CHECK(t, removed == 1);
    CHECK_EQ(t, barrier_work(rt, &mark), 0);
    CHECK_OK(t, zs_hash_add(rt, ZS_NULL_REF, map, hash_map, &x, &index, &added));
    CHECK(t, added == 1);
    CHECK_EQ(t, barrier_work(rt, &mark), 1);
    zs_ref *value = (zs_ref *)((char *)hash_map->entries.data +
                               (size_t)index * zs_type_entry_size(map) + zs_type_value_offset(map));
    CHECK_OK(t, zs_value_store_ref(rt, ZS_NULL_REF, object, value, x));
    CHECK_EQ(t, barrier_work(rt, &mark), 1);
    CHECK_OK(t, zs_optional_set(rt, ZS_NULL_REF, optional, maybe, &x));
    CHECK_EQ(t, barrier_work(rt, &mark), 1);
    /* The control: a whole-value copy writes, and barriers, every element. */
    CHECK_OK(t, zs_value_assign(rt, ZS_NULL_REF, array, copy, list));
    CHECK_EQ(t, copy->count, list->count);
    CHECK(t, barrier_work(rt, &mark) >= list->count);
    run_steps(t, rt, 0);
    purge_all(t, rt);
    CHECK(t, alive(rt, x));
    /* Outside a mark the barrier does no work at all. */
    (void)barrier_work(rt, &mark);
    CHECK_OK(t, zs_value_store_ref(rt, ZS_NULL_REF, object, value, ZS_NULL_REF));
    CHECK_OK(t, zs_value_assign(rt, ZS_NULL_REF, array, copy, list));
    CHECK_EQ(t, barrier_work(rt, &mark), 0);
    for (size_t i = 0; i < sizeof handles / sizeof handles[0]; i++)
        CHECK_OK(t, zs_value_free(rt, handles[i]));
    fixture_close(&fx);
}

/* ======================================================================
 * The hand-over to the managed side's expiry handler
 * ====================================================================== */

/* A fake managed side: it records what it is handed, checks that every
   object is still in memory and dying, and can act from inside. */
typedef struct expiry_probe {
    runner *t;
    uint32_t calls, objects, still_there;
    zs_ref seen[64];
    zs_status collect_inside;  /* what a collection from inside the handler returned */
    zs_status purge_inside;    /* what a purge from inside the handler returned */
    uint32_t gone_after_purge; /* handed-over objects a purge from inside freed */
    bool collect_from_inside, free_from_inside, purge_from_inside;
    zs_ref destroy_after_free; /* destroyed from inside, once the runtime's free is pending */
    zs_status destroy_inside;
    zs_status set_inside;       /* replacing the handler from inside it */
    uint32_t depth, max_depth;  /* handler calls nested in one another */
    uint32_t word_clear_inside; /* calls that found the dying word 0 (zsharp.h: never) */
} expiry_probe;

static void probe_expiry(void *user, zs_runtime *rt, const zs_ref *objects, const uint64_t *names,
                         const uint8_t *garbage, uint32_t count) {
    (void)names;
    (void)garbage;
    expiry_probe *probe = user;
    probe->calls++;
    if (++probe->depth > probe->max_depth) probe->max_depth = probe->depth;
    for (uint32_t i = 0; i < count; i++) {
        if (zs_resolve(rt, objects[i]) != NULL) probe->still_there++;
        if (probe->objects < 64) probe->seen[probe->objects] = objects[i];
        probe->objects++;
    }
    /* Counted as a call in progress: zs_runtime_free meanwhile is deferred. */
    CHECK(probe->t, zs_calls_in_progress(rt) >= 1);
    /* The proxies of these objects are not expired yet: a managed side's
       plain write now must ask the heap first (zs_dying_word, zsharp.h). */
    if (__atomic_load_n(zs_dying_word(rt), __ATOMIC_RELAXED) == 0) probe->word_clear_inside++;
    if (probe->collect_from_inside) {
        probe->collect_inside = zs_collect_garbage(rt);
        probe->set_inside = zs_set_expiry_handler(rt, probe_expiry, probe);
    }
    if (probe->purge_from_inside) {
        /* These objects are off the expiring list, their proxies not yet
           expired: a purge now would free them under the managed side. */
        probe->purge_inside = zs_gc_purge(rt, 0, NULL);
        for (uint32_t i = 0; i < count; i++)
            probe->gone_after_purge += zs_resolve(rt, objects[i]) == NULL;
    }
    if (probe->free_from_inside) {
        zs_runtime_free(rt); /* deferred until the collection returns */
        /* The free is pending: no second hand-over starts (a nested call of
           this handler) for an object destroyed now. */
        if (probe->destroy_after_free != ZS_NULL_REF)
            probe->destroy_inside = zs_destroy_object(rt, probe->destroy_after_free);
    }
    probe->depth--;
}

/* Objects with conjugates are handed to the expiry handler before any is
   freed, by every call that purges (a full collection, a purge after an
   incremental cycle, a new cycle finishing a pending purge); while a
   handler is set nobody else can take the list; a collection from inside
   the handler is refused; a runtime freed from inside it is freed when
   the collection returns. */
static void test_dying_objects_are_handed_to_the_expiry_handler(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    expiry_probe probe = {.t = t};
    CHECK_OK(t, zs_set_expiry_handler(rt, probe_expiry, &probe));
    zs_ref keeper = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, keeper);
    zs_object *object = NULL;
    zs_ref doomed[3];
    for (int i = 0; i < 3; i++) {
        doomed[i] = MAKE(t, rt, fx.node, ZS_NULL_REF);
        CHECK_OK(t, zs_resolve_for_conjugate(rt, doomed[i], &object));
    }
    zs_ref plain = MAKE(t, rt, fx.node, ZS_NULL_REF); /* no conjugate: not handed over */
    /* The old recipe: the list is the handler's. */
    CHECK_OK(t, zs_gc_mark_and_gather(rt));
    zs_ref taken[4];
    uint32_t count = 99;
    CHECK_STATUS(t, zs_gc_take_expiring(rt, taken, 4, &count), ZS_E_BUSY);
    CHECK_EQ(t, count, 0);
    CHECK_EQ(t, zs_gc_expiring_count(rt), 3);
    int done = 0;
    CHECK_OK(t, zs_gc_purge(rt, 0, &done));
    CHECK(t, done);
    CHECK_EQ(t, zs_calls_in_progress(rt), 0); /* the hand-over was counted out */
    CHECK_EQ(t, probe.calls, 1);
    CHECK_EQ(t, probe.objects, 3);
    CHECK_EQ(t, probe.still_there, 3); /* every one in memory while handed over */
    for (int i = 0; i < 3; i++) CHECK(t, !alive(rt, doomed[i]));
    CHECK(t, !alive(rt, plain) && alive(rt, keeper));
    VERIFY(t, rt);

    /* A full collection, and from inside the handler a collection, a
       purge (the rest of the expiring list waits: more than one batch) and
       a new handler: each refused. */
    zs_ref more = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_resolve_for_conjugate(rt, more, &object));
    for (int i = 0; i < 300; i++) {
        zs_ref extra = MAKE(t, rt, fx.node, ZS_NULL_REF);
        CHECK_OK(t, zs_resolve_for_conjugate(rt, extra, &object));
    }
    probe.collect_from_inside = true;
    probe.purge_from_inside = true;
    CHECK_OK(t, zs_collect_garbage(rt));
    CHECK(t, probe.calls >= 3);               /* more than one batch */
    CHECK_EQ(t, zs_calls_in_progress(rt), 0); /* its hand-overs were counted out */
    CHECK_EQ(t, probe.max_depth, 1);          /* never one inside another */
    const uint32_t calls = probe.calls;
    CHECK_EQ(t, probe.collect_inside, ZS_E_BUSY);
    CHECK_EQ(t, probe.purge_inside, ZS_E_BUSY);
    CHECK_EQ(t, probe.set_inside, ZS_E_BUSY);
    CHECK_EQ(t, probe.gone_after_purge, 0);
    CHECK(t, !alive(rt, more));
    CHECK_EQ(t, probe.word_clear_inside, 0);
    CHECK_EQ(t, __atomic_load_n(zs_dying_word(rt), __ATOMIC_RELAXED), 0); /* all expired */
    probe.collect_from_inside = false;
    probe.purge_from_inside = false;

    /* An incremental cycle: the new cycle finishes the pending purge. */
    more = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_resolve_for_conjugate(rt, more, &object));
    CHECK_OK(t, zs_gc_start_incremental(rt));
    run_steps(t, rt, 0);
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_PURGE_PENDING);
    CHECK(t, alive(rt, more));
    CHECK_OK(t, zs_gc_start_incremental(rt));
    CHECK_EQ(t, probe.calls, calls + 1);
    CHECK(t, !alive(rt, more));
    run_steps(t, rt, 0);
    purge_all(t, rt);
    CHECK_EQ(t, probe.still_there, probe.objects);
    VERIFY(t, rt);

    /* Freed from inside the handler: the collection stops, and its return
       frees the runtime (LeakSanitizer sees nothing left). */
    more = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_resolve_for_conjugate(rt, more, &object));
    zs_ref spared = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, spared);
    CHECK_OK(t, zs_resolve_for_conjugate(rt, spared, &object));
    probe.free_from_inside = true;
    probe.destroy_after_free = spared;
    CHECK_STATUS(t, zs_collect_garbage(rt), ZS_E_STALE);
    CHECK_EQ(t, probe.calls, calls + 2);
    CHECK_OK(t, probe.destroy_inside);
}

/* zs_destroy_object: the proxy is handed over at once, the object is refused
   as dying and unrooted, and the next collection nulls the references to it
   and frees it. Without a handler its proxy waits for the purge. */
static void test_destroy_object(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    expiry_probe probe = {.t = t};
    CHECK_OK(t, zs_set_expiry_handler(rt, probe_expiry, &probe));
    zs_ref holder = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, holder);
    zs_ref victim = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, victim);
    LINK(t, rt, holder, 0, victim);
    zs_object *object = NULL;
    CHECK_OK(t, zs_resolve_for_conjugate(rt, victim, &object));
    CHECK_EQ(t, __atomic_load_n(zs_dying_word(rt), __ATOMIC_RELAXED), 0);
    CHECK_OK(t, zs_destroy_object(rt, victim));
    CHECK(t, probe.calls == 1 && probe.objects == 1 && probe.seen[0] == victim);
    /* Handed over with no collection under way: the word said so during
       the hand-over, and is clear again once the proxy is expired (a
       managed side's writes take the fast path again). */
    CHECK_EQ(t, probe.word_clear_inside, 0);
    CHECK_EQ(t, __atomic_load_n(zs_dying_word(rt), __ATOMIC_RELAXED), 0);
    CHECK_EQ(t, zs_calls_in_progress(rt), 0); /* the hand-over was counted out */
    CHECK(t, alive(rt, victim)); /* still in memory: the mark has not nulled holder's slot */
    CHECK_STATUS(t, zs_destroy_object(rt, victim), ZS_E_DYING);
    CHECK_STATUS(t, zs_store_ref(rt, holder, NODE_REF(1), victim), ZS_E_DYING);
    CHECK_STATUS(t, zs_add_to_root(rt, victim), ZS_E_DYING);
    CHECK_STATUS(t, zs_resolve_for_conjugate(rt, victim, &object), ZS_E_DYING);
    int rooted = 1;
    CHECK_OK(t, zs_is_rooted(rt, victim, &rooted));
    CHECK(t, !rooted);
    VERIFY(t, rt);
    COLLECT(t, rt);
    CHECK(t, !alive(rt, victim) && alive(rt, holder));
    CHECK_EQ(t, node_of(rt, holder)->ref[0], ZS_NULL_REF);
    CHECK_EQ(t, probe.calls, 1); /* its proxy was handed over once */
    /* No conjugate, nothing to hand over. */
    zs_ref plain = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, plain);
    CHECK_OK(t, zs_destroy_object(rt, plain));
    CHECK_EQ(t, probe.calls, 1);
    COLLECT(t, rt);
    CHECK(t, !alive(rt, plain));
    /* Without a handler: the proxy waits on the expiring list. */
    CHECK_OK(t, zs_set_expiry_handler(rt, NULL, &probe));
    zs_ref other = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_resolve_for_conjugate(rt, other, &object));
    CHECK_OK(t, zs_destroy_object(rt, other));
    COLLECT_EXPECT(t, rt, ZS_E_EXPIRY_PENDING);
    CHECK(t, alive(rt, other) && zs_gc_expiring_count(rt) == 1);
    CHECK_OK(t, zs_set_expiry_handler(rt, probe_expiry, &probe));
    int done = 0;
    CHECK_OK(t, zs_gc_purge(rt, 0, &done));
    CHECK(t, done && !alive(rt, other) && probe.calls == 2);
    VERIFY(t, rt);
    fixture_close(&fx);
}

/* A purge with a generous budget finishes in one call; one whose handler
   frees the runtime stops and says so (ZS_E_STALE), the runtime freed as
   the call returns. */
static void test_purge_budget_and_free_from_the_handler(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    for (int i = 0; i < 200; i++) (void)MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_gc_mark_and_gather(rt));
    int done = 0;
    CHECK_OK(t, zs_gc_purge(rt, 1000000000u, &done)); /* a second: far more than 200 need */
    CHECK(t, done);
    CHECK_EQ(t, zs_live_objects(rt), 0);
    expiry_probe probe = {.t = t, .free_from_inside = true};
    CHECK_OK(t, zs_set_expiry_handler(rt, probe_expiry, &probe));
    zs_object *object = NULL;
    for (int i = 0; i < 300; i++) { /* more than one batch: the second is never handed over */
        zs_ref doomed = MAKE(t, rt, fx.node, ZS_NULL_REF);
        CHECK_OK(t, zs_resolve_for_conjugate(rt, doomed, &object));
    }
    CHECK_OK(t, zs_gc_mark_and_gather(rt));
    CHECK_STATUS(t, zs_gc_purge(rt, 0, &done), ZS_E_STALE); /* rt is freed now */
    CHECK(t, !done);
    CHECK_EQ(t, probe.calls, 1);
}

/* With no handler the list waits for whoever takes it, as before; a
   handler can be removed, and zs_gc_expire needs one. */
static void test_expiry_without_a_handler(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    uint32_t taken = 7;
    CHECK_STATUS(t, zs_gc_expire(rt, 10, &taken), ZS_E_INVALID);
    CHECK_EQ(t, taken, 0);
    expiry_probe probe = {.t = t};
    CHECK_OK(t, zs_set_expiry_handler(rt, probe_expiry, &probe));
    /* Only the managed side that set it removes it (a host cannot). */
    CHECK_STATUS(t, zs_set_expiry_handler(rt, NULL, NULL), ZS_E_BUSY);
    zs_ref held = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_object *object = NULL;
    CHECK_OK(t, zs_resolve_for_conjugate(rt, held, &object));
    CHECK_STATUS(t, zs_forget_conjugate(rt, held), ZS_E_BUSY); /* its flag is the handler's */
    CHECK_OK(t, zs_set_expiry_handler(rt, NULL, &probe));
    CHECK_OK(t, zs_forget_conjugate(rt, held));
    zs_ref doomed = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_resolve_for_conjugate(rt, doomed, &object));
    COLLECT_EXPECT(t, rt, ZS_E_EXPIRY_PENDING);
    CHECK(t, alive(rt, doomed));
    zs_ref list[2];
    uint32_t count = 0;
    /* Bad arguments take nothing; an empty buffer takes nothing and is fine. */
    CHECK_STATUS(t, zs_gc_take_expiring(rt, list, 2, NULL), ZS_E_INVALID);
    CHECK_STATUS(t, zs_gc_take_expiring(rt, NULL, 2, &count), ZS_E_INVALID);
    count = 99;
    CHECK_OK(t, zs_gc_take_expiring(rt, NULL, 0, &count));
    CHECK_EQ(t, count, 0);
    CHECK_EQ(t, zs_gc_expiring_count(rt), 1);
    CHECK_OK(t, zs_gc_take_expiring(rt, list, 2, &count));
    CHECK(t, count == 1 && list[0] == doomed);
    int done = 0;
    CHECK_OK(t, zs_gc_purge(rt, 0, &done));
    CHECK(t, done && !alive(rt, doomed) && probe.calls == 0);
    /* zs_gc_expire hands over in batches bounded by its limit. */
    CHECK_OK(t, zs_set_expiry_handler(rt, probe_expiry, &probe));
    for (int i = 0; i < 5; i++) {
        zs_ref one = MAKE(t, rt, fx.node, ZS_NULL_REF);
        CHECK_OK(t, zs_resolve_for_conjugate(rt, one, &object));
    }
    CHECK_OK(t, zs_gc_mark_and_gather(rt));
    CHECK_OK(t, zs_gc_expire(rt, 2, &taken));
    CHECK(t, taken == 2 && probe.objects == 2 && zs_gc_expiring_count(rt) == 3);
    CHECK_EQ(t, zs_calls_in_progress(rt), 0); /* the hand-over was counted out */
    CHECK_OK(t, zs_gc_expire(rt, UINT32_MAX, &taken));
    CHECK(t, taken == 3 && probe.objects == 5 && zs_gc_expiring_count(rt) == 0);
    purge_all(t, rt);
    fixture_close(&fx);
}

/* A 200,000-object live heap takes more than one 100 us step to mark, and the steps keep it all. */
static void test_incremental_step_count(runner *t) {
    enum { COUNT = 200000 };
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    zs_ref *refs = malloc(COUNT * sizeof *refs);
    CHECK(t, refs != NULL);
    if (refs == NULL) {
        fixture_close(&fx);
        return;
    }
    uint32_t failures = 0;
    for (uint32_t i = 0; i < COUNT; i++) { /* a 4-ary tree: i hangs from (i - 1) / 4 */
        failures += zs_object_new(rt, fx.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, &refs[i], NULL) !=
                    ZS_OK;
        if (i > 0)
            failures += zs_store_ref(rt, refs[(i - 1) / 4], NODE_REF((i - 1) % 4), refs[i]) !=
                        ZS_OK;
    }
    CHECK_EQ(t, failures, 0);
    ROOT(t, rt, refs[0]);
    CHECK_OK(t, zs_gc_start_incremental(rt));
    VERIFY(t, rt);
    /* Verifying 200,000 objects costs ~100 steps' worth of marking, so this
       test verifies every 16th step and at the end (the other incremental
       tests verify after every step). */
    int done = 0;
    uint32_t steps = 0;
    while (!done && steps < MAX_STEPS) {
        zs_status status = zs_gc_step(rt, 100000, &done);
        CHECK_OK(t, status);
        if (status != ZS_OK) break;
        if (++steps % 16 == 0 || done) VERIFY(t, rt);
    }
    CHECK(t, done);
    zs_gc_stats stats = gc_stats(rt);
    CHECK(t, steps > 1);
    CHECK_EQ(t, stats.mark_steps, steps);
    CHECK_EQ(t, stats.objects_marked, COUNT);
    CHECK_EQ(t, stats.objects_scanned, COUNT);
    CHECK_EQ(t, stats.objects_unreachable, 0);
    CHECK_EQ(t, stats.mark_threads, 1);
    CHECK_EQ(t, zs_gc_phase_of(rt), ZS_GC_IDLE);
    CHECK_EQ(t, zs_live_objects(rt), COUNT);
    CHECK(t, alive(rt, refs[COUNT - 1]));
    free(refs);
    fixture_close(&fx);
}

/* ======================================================================
 * Random graphs with clusters
 * ====================================================================== */

enum { K_NODE, K_LEAF, K_CROOT, K_PART };

/* Recorded when a cluster is created: the cluster rooted at heap index root
   (with this creation stamp) referenced the cluster rooted at target. The
   collector dissolves a cluster when one it references is dissolved. */
typedef struct link_rec {
    uint32_t root, stamp, target;
} link_rec;

/* A random graph built by the same sequence of API calls for a given seed,
   so two runtimes built from one seed hold identical heaps (same indices,
   same serials). Graph index i is the i-th object created. */
typedef struct graph {
    runner *t;
    cfix c;
    zs_runtime *rt;
    uint64_t rng;
    uint32_t count, capacity;
    zs_ref *refs;    /* graph index -> handle (kept after death) */
    uint8_t *kinds;  /* graph index -> K_* */
    bool *conj;      /* graph index -> given a conjugate */
    bool conjugates; /* give some new objects a conjugate */
    uint32_t *stamp; /* heap index -> stamp of the last cluster created with that root */
    uint32_t *visit; /* heap index -> scratch epoch */
    zs_ref *scratch;
    uint32_t epoch, next_stamp;
    link_rec *links;
    uint32_t link_count, link_capacity;
} graph;

static void graph_close(graph *g) {
    if (g->rt != NULL) cfix_close(&g->c);
    g->rt = NULL;
    free(g->refs);
    free(g->kinds);
    free(g->conj);
    free(g->stamp);
    free(g->visit);
    free(g->scratch);
    free(g->links);
    g->refs = NULL;
    g->kinds = NULL;
    g->conj = NULL;
    g->stamp = g->visit = NULL;
    g->scratch = NULL;
    g->links = NULL;
}

static bool graph_open(runner *t, graph *g, uint64_t seed, uint32_t capacity,
                       uint32_t min_cluster_size, uint32_t mark_threads) {
    memset(g, 0, sizeof *g);
    g->t = t;
    g->rng = seed;
    g->capacity = capacity;
    g->refs = calloc(capacity, sizeof *g->refs);
    g->kinds = calloc(capacity, sizeof *g->kinds);
    g->conj = calloc(capacity, sizeof *g->conj);
    g->stamp = calloc(capacity, sizeof *g->stamp);
    g->visit = calloc(capacity, sizeof *g->visit);
    g->scratch = calloc(capacity, sizeof *g->scratch);
    bool ok = g->refs && g->kinds && g->conj && g->stamp && g->visit && g->scratch;
    CHECK(t, ok);
    if (ok && cfix_open(t, &g->c, min_cluster_size, mark_threads)) {
        g->rt = g->c.rt;
        return true;
    }
    graph_close(g);
    return false;
}

/* The k-th reference an object holds: 0 is the outer (not killable), 1..4
   the strong slots, then the array's elements; NULL past the last. */
static zs_ref *edge_at(const graph *g, zs_object *o, uint32_t k, bool *killable) {
    *killable = k > 0;
    if (k == 0) return &o->outer;
    if (o->cls == g->c.fx.leaf) return NULL;
    node *n = (node *)o;
    if (k <= NODE_SLOTS) return &n->ref[k - 1];
    return k - 1 - NODE_SLOTS < n->list.count ? &n->list.data[k - 1 - NODE_SLOTS] : NULL;
}

static bool graph_alive(const graph *g, uint32_t i) { return alive(g->rt, g->refs[i]); }

/* A random live object, or NONE. */
static uint32_t graph_pick(graph *g) {
    for (int tries = 0; tries < 64 && g->count > 0; tries++) {
        uint32_t i = rand_below(&g->rng, g->count);
        if (graph_alive(g, i)) return i;
    }
    return NONE;
}

/* A live target for an edge from i: mostly near i (so clusters stay
   small and many), sometimes anywhere. */
static uint32_t graph_target(graph *g, uint32_t i) {
    uint32_t j;
    if (rand_below(&g->rng, 8) != 0) {
        int64_t k = (int64_t)i + (int64_t)rand_below(&g->rng, 129) - 64;
        j = k < 0 ? 0 : k >= (int64_t)g->count ? g->count - 1 : (uint32_t)k;
    } else {
        j = rand_below(&g->rng, g->count);
    }
    return graph_alive(g, j) ? j : graph_pick(g);
}

/* A new object of a random kind; some get an outer, a root, a strong ref or a conjugate. */
static uint32_t graph_add(graph *g) {
    runner *t = g->t;
    if (g->count == g->capacity) return NONE;
    uint32_t r = rand_below(&g->rng, 100);
    uint8_t kind = r < 8 ? K_CROOT : r < 45 ? K_PART : r < 85 ? K_NODE : K_LEAF;
    const zs_class *cls = kind == K_CROOT  ? g->c.croot
                          : kind == K_PART ? g->c.part
                          : kind == K_NODE ? g->c.fx.node
                                           : g->c.fx.leaf;
    zs_ref outer = ZS_NULL_REF;
    if (rand_below(&g->rng, 16) == 0) {
        uint32_t o = graph_pick(g);
        if (o != NONE) outer = g->refs[o];
    }
    uint32_t i = g->count;
    zs_ref ref = ZS_NULL_REF;
    zs_status status = zs_object_new(g->rt, cls, outer, ZS_NAME_AUTO, 0, &ref, NULL);
    CHECK_OK(t, status);
    if (status != ZS_OK) return NONE;
    g->refs[i] = ref;
    g->kinds[i] = kind;
    g->count++;
    if (rand_below(&g->rng, 10) == 0) ROOT(t, g->rt, ref);
    if (rand_below(&g->rng, 50) == 0) CHECK_OK(t, zs_add_strong_ref(g->rt, ref));
    if (g->conjugates && rand_below(&g->rng, 16) == 0) {
        zs_object *object = NULL;
        CHECK_OK(t, zs_resolve_for_conjugate(g->rt, ref, &object));
        g->conj[i] = true;
    }
    return i;
}

/* Random strong slots, array elements and a weak slot for object i. */
static void graph_edges(graph *g, uint32_t i) {
    runner *t = g->t;
    if (i == NONE || g->kinds[i] == K_LEAF) return;
    zs_ref holder = g->refs[i];
    for (uint32_t s = 0; s < NODE_SLOTS; s++) {
        if (rand_below(&g->rng, 2) != 0) continue;
        uint32_t j = graph_target(g, i);
        if (j != NONE) LINK(t, g->rt, holder, s, g->refs[j]);
    }
    if (rand_below(&g->rng, 4) == 0) {
        uint32_t n = 1 + rand_below(&g->rng, 2);
        for (uint32_t e = 0; e < n; e++) {
            uint32_t j = graph_target(g, i);
            if (j != NONE) PUSH(t, g->rt, holder, g->refs[j]);
        }
    }
    if (rand_below(&g->rng, 8) == 0) {
        uint32_t j = graph_target(g, i);
        if (j != NONE) CHECK_OK(t, zs_store_ref(g->rt, holder, NODE_WEAK, g->refs[j]));
    }
}

/* After a cluster was created at root_ref: walk its members from the root
   (every member is reachable from it through members), check the count,
   and record which clusters it references. */
static void graph_record_links(graph *g, zs_ref root_ref, uint32_t size) {
    runner *t = g->t;
    zs_runtime *rt = g->rt;
    int32_t id = cluster_id(rt, root_ref);
    uint32_t root = ZS_REF_INDEX(root_ref), stamp = ++g->next_stamp;
    g->stamp[root] = stamp;
    g->epoch++;
    uint32_t top = 0, members = 0, broken = 0;
    g->scratch[top++] = root_ref;
    g->visit[root] = g->epoch;
    while (top > 0) {
        zs_object *o = zs_resolve(rt, g->scratch[--top]);
        if (o == NULL) {
            broken++;
            continue;
        }
        members++;
        bool killable;
        zs_ref *slot;
        for (uint32_t k = 0; (slot = edge_at(g, o, k, &killable)) != NULL; k++) {
            if (*slot == ZS_NULL_REF) continue;
            int32_t other = cluster_id(rt, *slot);
            uint32_t h = ZS_REF_INDEX(*slot);
            if (other == id) {
                if (g->visit[h] != g->epoch) {
                    g->visit[h] = g->epoch;
                    g->scratch[top++] = *slot;
                }
            } else if (other >= 0) {
                zs_cluster_info info;
                if (zs_cluster_get_info(rt, other, &info) != ZS_OK) {
                    broken++;
                    continue;
                }
                if (g->link_count == g->link_capacity) {
                    uint32_t capacity = g->link_capacity ? 2 * g->link_capacity : 256;
                    link_rec *grown = realloc(g->links, capacity * sizeof *grown);
                    if (grown == NULL) {
                        broken++;
                        continue;
                    }
                    g->links = grown;
                    g->link_capacity = capacity;
                }
                g->links[g->link_count++] = (link_rec){root, stamp, ZS_REF_INDEX(info.root)};
            }
        }
    }
    CHECK_EQ(t, broken, 0);
    CHECK_EQ(t, members, size);
}

/* Try to make object i (a ClusterRoot) the root of a cluster. */
static void graph_try_cluster(graph *g, uint32_t i) {
    runner *t = g->t;
    if (g->kinds[i] != K_CROOT || !graph_alive(g, i)) return;
    uint32_t size = 0;
    zs_status status = zs_create_cluster(g->rt, g->refs[i], &size);
    CHECK(t, status == ZS_OK || status == ZS_E_INVALID); /* INVALID: already a root, or garbage */
    if (status == ZS_OK && size > 0) graph_record_links(g, g->refs[i], size);
}

/* count objects, random edges, clusters on every ClusterRoot, then ~1% marked as garbage. */
static void graph_build(graph *g, uint32_t count) {
    for (uint32_t i = 0; i < count; i++) graph_add(g);
    for (uint32_t i = 0; i < g->count; i++) graph_edges(g, i);
    for (uint32_t i = 0; i < g->count; i++) graph_try_cluster(g, i);
    for (uint32_t k = 0; k < g->count / 100; k++) {
        uint32_t i = graph_pick(g);
        if (i != NONE) CHECK_OK(g->t, zs_mark_as_garbage(g->rt, g->refs[i]));
    }
}

/* Random mutations of about scale size: rewrite and cut edges, push to and
   clear arrays (into cluster members too, dissolving them), toggle roots and
   strong refs, mark garbage, add objects. Outside a mark, also create clusters; during one, check that
   creating a cluster is refused. */
static void graph_mutate(graph *g, bool during_mark, uint32_t scale) {
    runner *t = g->t;
    zs_runtime *rt = g->rt;
    for (uint32_t k = 0; k < 3 * scale; k++) {
        uint32_t h = graph_pick(g);
        if (h == NONE || g->kinds[h] == K_LEAF) continue;
        uint32_t slot = rand_below(&g->rng, NODE_SLOTS);
        uint32_t j = rand_below(&g->rng, 4) == 0 ? NONE : graph_target(g, h);
        LINK(t, rt, g->refs[h], slot, j == NONE ? ZS_NULL_REF : g->refs[j]);
    }
    for (uint32_t k = 0; k < scale / 2; k++) { /* array pushes and clears */
        uint32_t h = graph_pick(g);
        if (h == NONE || g->kinds[h] == K_LEAF) continue;
        if (rand_below(&g->rng, 8) == 0) {
            CHECK_OK(t, zs_ref_array_clear(rt, g->refs[h], NODE_LIST));
            continue;
        }
        uint32_t j = graph_target(g, h);
        if (j != NONE) PUSH(t, rt, g->refs[h], g->refs[j]);
    }
    for (uint32_t k = 0; k < scale / 5; k++) {
        uint32_t i = graph_pick(g);
        int rooted = 0;
        if (i == NONE) continue;
        CHECK_OK(t, zs_is_rooted(rt, g->refs[i], &rooted));
        CHECK_OK(t, rooted ? zs_remove_from_root(rt, g->refs[i]) : zs_add_to_root(rt, g->refs[i]));
    }
    for (uint32_t k = 0; k < scale / 10; k++) {
        uint32_t i = graph_pick(g), strong = 0;
        if (i == NONE) continue;
        CHECK_OK(t, zs_strong_ref_count(rt, g->refs[i], &strong));
        CHECK_OK(t, strong ? zs_release_strong_ref(rt, g->refs[i])
                           : zs_add_strong_ref(rt, g->refs[i]));
    }
    for (uint32_t k = 0; k < scale / 10; k++) {
        uint32_t i = graph_pick(g);
        if (i != NONE) CHECK_OK(t, zs_mark_as_garbage(rt, g->refs[i]));
    }
    for (uint32_t k = 0; k < 2 * scale; k++) graph_edges(g, graph_add(g));
    if (!during_mark) {
        for (uint32_t i = 0; i < g->count; i++) graph_try_cluster(g, i);
        return;
    }
    for (int tries = 0; tries < 64; tries++) {
        uint32_t i = graph_pick(g);
        if (i == NONE || g->kinds[i] != K_CROOT) continue;
        uint32_t size = 99;
        CHECK_STATUS(t, zs_create_cluster(rt, g->refs[i], &size), ZS_E_BUSY);
        CHECK_EQ(t, size, 0);
        break;
    }
}

/* Two graphs built from one seed must hold identical heaps. */
static void graph_compare(runner *t, const graph *a, const graph *b) {
    CHECK_EQ(t, a->count, b->count);
    CHECK_EQ(t, zs_live_objects(a->rt), zs_live_objects(b->rt));
    CHECK_EQ(t, zs_cluster_count(a->rt), zs_cluster_count(b->rt));
    uint32_t differences = 0;
    for (uint32_t i = 0; i < a->count && i < b->count; i++) {
        zs_object *x = zs_resolve(a->rt, a->refs[i]), *y = zs_resolve(b->rt, b->refs[i]);
        bool same = a->refs[i] == b->refs[i] && (x != NULL) == (y != NULL);
        if (same && x != NULL) {
            same = x->outer == y->outer &&
                   cluster_id(a->rt, a->refs[i]) == cluster_id(b->rt, b->refs[i]);
            bool killable;
            zs_ref *ex, *ey;
            uint32_t k = 0;
            for (; same && (ex = edge_at(a, x, k, &killable)) != NULL; k++) {
                ey = edge_at(b, y, k, &killable);
                same = ey != NULL && *ex == *ey;
            }
            if (same) same = edge_at(b, y, k, &killable) == NULL;
            if (same && x->cls != a->c.fx.leaf) same = ((node *)x)->weak == ((node *)y)->weak;
        }
        if (!same && differences++ == 0)
            fprintf(stderr, "  graph object %u differs between the runtimes\n", i);
    }
    CHECK_EQ(t, differences, 0);
}

/* ======================================================================
 * The reachability oracle
 * ====================================================================== */

#define O_LIVE 0x1u
#define O_GARBAGE 0x2u
#define O_PINNED 0x4u
#define O_REACHED 0x8u
#define C_STALE 0x1u
#define C_REACHED 0x2u

/* What a full collection must do, computed from the heap as read through
   the API (all arrays by heap index, or by cluster id). */
typedef struct oracle {
    uint32_t n, cluster_bound, graph_count;
    zs_ref *ref; /* the live handle at each heap index */
    zs_object **obj;
    uint8_t *state; /* O_* */
    int32_t *cl;    /* cluster, -1 for none */
    uint32_t *queue;
    uint32_t *croot;  /* cluster -> root heap index */
    uint8_t *cflags;  /* cluster -> C_* */
    uint32_t *mstart; /* cluster -> first entry in mlist (cluster_bound + 1 entries) */
    uint32_t *mlist;  /* members grouped by cluster */
    uint32_t head, tail;
    uint64_t live, reached, killed, clusters_reached, stale, broken;
} oracle;

static void oracle_free(oracle *o) {
    free(o->ref);
    free(o->obj);
    free(o->state);
    free(o->cl);
    free(o->queue);
    free(o->croot);
    free(o->cflags);
    free(o->mstart);
    free(o->mlist);
    memset(o, 0, sizeof *o);
}

static bool oracle_unit(const oracle *o, uint32_t h) {
    return o->cl[h] >= 0 && !(o->cflags[o->cl[h]] & C_STALE);
}

/* Reach one object: a member of a live cluster reaches the whole cluster. */
static void oracle_reach(oracle *o, uint32_t h) {
    if (o->state[h] & O_REACHED) return;
    if (oracle_unit(o, h)) {
        int32_t c = o->cl[h];
        o->cflags[c] |= C_REACHED;
        o->clusters_reached++;
        for (uint32_t k = o->mstart[c]; k < o->mstart[c + 1]; k++) {
            uint32_t m = o->mlist[k];
            o->state[m] |= O_REACHED;
            o->reached++;
            o->queue[o->tail++] = m;
        }
        return;
    }
    o->state[h] |= O_REACHED;
    o->reached++;
    o->queue[o->tail++] = h;
}

/* The heap index a reference names, or NONE (counted as broken) when it
   does not name a live object. */
static uint32_t oracle_target(oracle *o, zs_ref ref) {
    uint32_t h = ZS_REF_INDEX(ref);
    if (h < o->n && o->ref[h] == ref) return h;
    o->broken++;
    return NONE;
}

static bool oracle_compute(graph *g, oracle *o) {
    runner *t = g->t;
    zs_runtime *rt = g->rt;
    memset(o, 0, sizeof *o);
    uint32_t n = o->n = g->capacity;
    o->graph_count = g->count;
    o->ref = calloc(n, sizeof *o->ref);
    o->obj = calloc(n, sizeof *o->obj);
    o->state = calloc(n, sizeof *o->state);
    o->cl = calloc(n, sizeof *o->cl);
    o->queue = calloc(n, sizeof *o->queue);
    o->mlist = calloc(n, sizeof *o->mlist);
    if (!o->ref || !o->obj || !o->state || !o->cl || !o->queue || !o->mlist) {
        CHECK(t, !"oracle: out of memory");
        oracle_free(o);
        return false;
    }
    int32_t max_cluster = -1;
    for (uint32_t h = 0; h < n; h++) o->cl[h] = -1;
    for (uint32_t i = 0; i < g->count; i++) {
        zs_object *object = zs_resolve(rt, g->refs[i]);
        if (object == NULL) continue;
        uint32_t h = ZS_REF_INDEX(g->refs[i]);
        int garbage = 0, rooted = 0;
        uint32_t strong = 0;
        o->broken += zs_is_garbage(rt, g->refs[i], &garbage) != ZS_OK;
        o->broken += zs_is_rooted(rt, g->refs[i], &rooted) != ZS_OK;
        o->broken += zs_strong_ref_count(rt, g->refs[i], &strong) != ZS_OK;
        o->ref[h] = g->refs[i];
        o->obj[h] = object;
        o->state[h] = O_LIVE | (garbage ? O_GARBAGE : 0) | (rooted || strong ? O_PINNED : 0);
        o->cl[h] = cluster_id(rt, g->refs[i]);
        o->broken += o->cl[h] < -1;
        if (o->cl[h] > max_cluster) max_cluster = o->cl[h];
        o->live++;
    }
    uint32_t bound = o->cluster_bound = (uint32_t)(max_cluster + 1);
    o->croot = malloc((bound + 1) * sizeof *o->croot);
    o->cflags = calloc(bound + 1, 1);
    o->mstart = calloc(bound + 2, sizeof *o->mstart);
    uint32_t *cursor = calloc(bound + 1, sizeof *cursor);
    if (!o->croot || !o->cflags || !o->mstart || !cursor) {
        CHECK(t, !"oracle: out of memory");
        free(cursor);
        oracle_free(o);
        return false;
    }
    /* Members grouped by cluster, and each cluster's root. */
    for (uint32_t c = 0; c <= bound; c++) o->croot[c] = NONE;
    for (uint32_t h = 0; h < n; h++)
        if (o->cl[h] >= 0) o->mstart[o->cl[h] + 1]++;
    for (uint32_t c = 0; c < bound; c++) o->mstart[c + 1] += o->mstart[c];
    for (uint32_t h = 0; h < n; h++) {
        int32_t c = o->cl[h];
        if (c < 0) continue;
        o->mlist[o->mstart[c] + cursor[c]++] = h;
        if (o->croot[c] == NONE) {
            zs_cluster_info info;
            if (zs_cluster_get_info(rt, c, &info) == ZS_OK) o->croot[c] = ZS_REF_INDEX(info.root);
            else o->broken++;
        }
    }
    free(cursor);
    /* Stale clusters: a member references a garbage object outside any
       cluster (a garbage mutable object) ... */
    for (uint32_t h = 0; h < n; h++) {
        if (o->cl[h] < 0) continue;
        bool killable;
        zs_ref *slot;
        for (uint32_t k = 0; (slot = edge_at(g, o->obj[h], k, &killable)) != NULL; k++) {
            if (*slot == ZS_NULL_REF) continue;
            uint32_t target = oracle_target(o, *slot);
            if (target != NONE && o->cl[target] < 0 && (o->state[target] & O_GARBAGE))
                o->cflags[o->cl[h]] |= C_STALE;
        }
    }
    /* ... and, recursively, the clusters that reference a stale cluster. */
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t k = 0; k < g->link_count; k++) {
            const link_rec *l = &g->links[k];
            if (l->root >= n || l->target >= n || g->stamp[l->root] != l->stamp) continue;
            int32_t from = o->cl[l->root], to = o->cl[l->target];
            if (from < 0 || to < 0 || o->croot[from] != l->root || o->croot[to] != l->target)
                continue; /* not this incarnation of the clusters */
            if ((o->cflags[to] & C_STALE) && !(o->cflags[from] & C_STALE)) {
                o->cflags[from] |= C_STALE;
                changed = true;
            }
        }
    }
    for (uint32_t c = 0; c < bound; c++)
        o->stale += o->croot[c] != NONE && (o->cflags[c] & C_STALE);
    /* Breadth-first from the roots and strong refs. */
    for (uint32_t h = 0; h < n; h++)
        if (o->state[h] & O_PINNED) oracle_reach(o, h);
    while (o->head < o->tail) {
        uint32_t h = o->queue[o->head++];
        bool killable;
        zs_ref *slot;
        for (uint32_t k = 0; (slot = edge_at(g, o->obj[h], k, &killable)) != NULL; k++) {
            if (*slot == ZS_NULL_REF) continue;
            uint32_t target = oracle_target(o, *slot);
            if (target == NONE) continue;
            if (killable && (o->state[target] & O_GARBAGE) && !oracle_unit(o, h)) o->killed++;
            else oracle_reach(o, target);
        }
    }
    CHECK_EQ(t, o->broken, 0);
    return true;
}

/* After a collection: exactly the reached objects survive (or, with
   superset, at least them: an incremental cycle may keep floating garbage),
   no surviving scanned object still names a garbage object through a
   killable reference, and the statistics match. */
static void oracle_check(runner *t, graph *g, const oracle *o, bool superset) {
    zs_runtime *rt = g->rt;
    zs_gc_stats stats = gc_stats(rt);
    if (!superset) {
        CHECK_EQ(t, stats.objects_marked, o->reached);
        CHECK_EQ(t, stats.objects_unreachable, o->live - o->reached);
        CHECK_EQ(t, stats.references_killed, o->killed);
        CHECK_EQ(t, stats.clusters_marked, o->clusters_reached);
        CHECK_EQ(t, stats.clusters_dissolved, o->stale);
        CHECK_EQ(t, zs_live_objects(rt), o->reached);
    }
    uint32_t wrong_alive = 0, unkilled = 0;
    for (uint32_t i = 0; i < o->graph_count; i++) {
        uint32_t h = ZS_REF_INDEX(g->refs[i]);
        if (o->ref[h] != g->refs[i]) continue; /* not live when the oracle ran */
        zs_object *now = zs_resolve(rt, g->refs[i]);
        bool want = (o->state[h] & O_REACHED) != 0;
        if (superset ? (want && now == NULL) : (want != (now != NULL))) {
            if (wrong_alive++ == 0)
                fprintf(stderr,
                        "  graph object %u (index %u, cluster %d): alive=%d, oracle says %d\n", i,
                        h, o->cl[h], now != NULL, want);
        }
        if (superset || now == NULL) continue;
        bool killable;
        zs_ref *slot;
        for (uint32_t k = 1; (slot = edge_at(g, now, k, &killable)) != NULL; k++) {
            uint32_t target = ZS_REF_INDEX(*slot);
            if (*slot != ZS_NULL_REF && target < o->n && o->ref[target] == *slot &&
                (o->state[target] & O_GARBAGE) && unkilled++ == 0)
                fprintf(stderr, "  graph object %u still references garbage index %u\n", i, target);
        }
    }
    CHECK_EQ(t, wrong_alive, 0);
    CHECK_EQ(t, unkilled, 0);
}

/* Take the whole expiring list: every entry must be a dying object that was given a conjugate. */
static void take_expiring(runner *t, graph *g, const oracle *o, uint32_t expected) {
    zs_runtime *rt = g->rt;
    uint32_t count = zs_gc_expiring_count(rt), taken = 0, wrong = 0;
    CHECK_EQ(t, count, expected);
    zs_ref *buffer = malloc((count + 1) * sizeof *buffer);
    CHECK(t, buffer != NULL);
    if (buffer == NULL) return;
    CHECK_OK(t, zs_gc_take_expiring(rt, buffer, count, &taken));
    CHECK_EQ(t, taken, count);
    for (uint32_t k = 0; k < taken; k++) {
        uint32_t h = ZS_REF_INDEX(buffer[k]);
        wrong += h >= o->n || o->ref[h] != buffer[k] || (o->state[h] & O_REACHED);
    }
    CHECK_EQ(t, wrong, 0);
    CHECK_EQ(t, zs_gc_expiring_count(rt), 0);
    free(buffer);
}

/* Objects live at the oracle, given a conjugate, and not reached. */
static uint32_t expected_expiring(const graph *g, const oracle *o) {
    uint32_t count = 0;
    for (uint32_t i = 0; i < o->graph_count; i++) {
        uint32_t h = ZS_REF_INDEX(g->refs[i]);
        count += g->conj[i] && o->ref[h] == g->refs[i] && !(o->state[h] & O_REACHED);
    }
    return count;
}

/* ======================================================================
 * Incremental and parallel marking on random graphs
 * ====================================================================== */

/* The oracle itself on a random graph with clusters: full collections over several mutation rounds keep exactly what it predicts. */
static void test_random_graph_clusters(runner *t) {
    static const uint64_t seeds[] = {3u, 0x5EEDu};
    uint64_t stale = 0;
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        graph g;
        if (!graph_open(t, &g, seeds[s], 12000, 4, 1)) return;
        graph_build(&g, 10000);
        CHECK(t, zs_cluster_count(g.rt) >= 40);
        for (int cycle = 0; cycle < 4; cycle++) {
            oracle o;
            if (!oracle_compute(&g, &o)) break;
            CHECK(t, o.clusters_reached > 0 && o.killed > 0 && o.reached < o.live);
            stale += o.stale;
            COLLECT(t, g.rt);
            oracle_check(t, &g, &o, false);
            oracle_free(&o);
            graph_mutate(&g, false, 100);
            VERIFY(t, g.rt);
        }
        graph_close(&g);
    }
    CHECK(t, stale > 0); /* some clusters were dissolved by their garbage mutable objects */
}

/* Whether a chain link's holder references `next` through the link's member
   along an edge the mark follows (a killable one not to a garbage object). */
static bool chain_link_holds(const graph *g, const zs_chain_link *link, zs_ref next) {
    zs_runtime *rt = g->rt;
    zs_object *holder = zs_resolve(rt, link->holder);
    if (holder == NULL) return false;
    if (link->member == ZS_CHAIN_OUTER) return holder->outer == next;
    if (link->member == ZS_CHAIN_CLUSTER) {
        int32_t a = cluster_id(rt, link->holder), b = cluster_id(rt, next);
        return a >= 0 && a == b;
    }
    int garbage = 1;
    if (holder->cls == g->c.fx.leaf || zs_is_garbage(rt, next, &garbage) != ZS_OK || garbage)
        return false;
    node *n = (node *)holder;
    for (uint32_t k = 0; k < NODE_SLOTS; k++)
        if (link->member == NODE_REF(k)) return n->ref[k] == next;
    for (uint32_t i = 0; link->member == NODE_LIST && i < n->list.count; i++)
        if (n->list.data[i] == next) return true;
    return false;
}

/* The chains of one object: some exactly when the oracle reaches it, each
   from a real root along real edges to it, nearest roots first. Returns the
   number of faults found (the first is described on stderr). */
static uint32_t check_chains(runner *t, graph *g, const oracle *o, zs_ref target) {
    zs_runtime *rt = g->rt;
    uint32_t count = 0, again = 0, faults = 0;
    CHECK_OK(t, zs_reference_chains(rt, target, 0, NULL, 0, &count));
    zs_chain_link *links = malloc((count ? count : 1) * sizeof *links);
    if (links == NULL) return 1;
    CHECK_OK(t, zs_reference_chains(rt, target, 0, links, count, &again));
    CHECK_EQ(t, again, count);
    bool reached = (o->state[ZS_REF_INDEX(target)] & O_REACHED) != 0;
    const char *fault = (count > 0) != reached ? "chains iff reachable" : NULL;
    uint32_t shortest = 0;
    for (uint32_t start = 0, i = 0; fault == NULL && i < count; start = ++i) {
        int rooted = 0;
        uint32_t strong = 0;
        CHECK_OK(t, zs_is_rooted(rt, links[start].holder, &rooted));
        CHECK_OK(t, zs_strong_ref_count(rt, links[start].holder, &strong));
        uint32_t want = (rooted ? ZS_CHAIN_ROOT_ADDED : 0) | (strong ? ZS_CHAIN_ROOT_STRONG : 0);
        if (links[start].root != want) fault = "root reasons";
        while (fault == NULL && links[i].member != ZS_CHAIN_END) {
            if (i + 1 >= count) fault = "chain without an end";
            else if (!chain_link_holds(g, &links[i], links[i + 1].holder)) fault = "link";
            else if (links[i + 1].root != 0) fault = "root reasons inside a chain";
            else i++;
        }
        if (fault == NULL && links[i].holder != target) fault = "chain ends elsewhere";
        if (fault == NULL && i - start + 1 < shortest) fault = "nearest roots first";
        shortest = i - start + 1;
    }
    if (fault != NULL) {
        faults++;
        fprintf(stderr, "  chains of index %u (%u links, reached %d): %s\n", ZS_REF_INDEX(target),
                count, reached, fault);
    }
    free(links);
    return faults;
}

/* On random graphs with roots, strong refs, garbage, clusters (stale ones
   included) and outers, every live object's reference chains agree with
   the oracle's reachability and follow real references from real roots. */
static void test_reference_chains_random(runner *t) {
    static const uint64_t seeds[] = {11u, 0xC4A1u};
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        graph g;
        if (!graph_open(t, &g, seeds[s], 4000, 4, 1)) return;
        graph_build(&g, 3000);
        uint32_t faults = 0, reached = 0, checked = 0, clustered = 0;
        for (int cycle = 0; cycle < 3; cycle++) {
            oracle o;
            if (!oracle_compute(&g, &o)) break;
            for (uint32_t i = cycle; i < g.count;
                 i += 53) { /* a sample: each search reads the heap */
                uint32_t h = ZS_REF_INDEX(g.refs[i]);
                if (o.ref[h] != g.refs[i]) continue; /* dead */
                faults += check_chains(t, &g, &o, g.refs[i]);
                checked++;
                reached += (o.state[h] & O_REACHED) != 0;
                clustered += o.cl[h] >= 0;
            }
            oracle_free(&o);
            COLLECT(t, g.rt);
            graph_mutate(&g, false, 100);
        }
        CHECK_EQ(t, faults, 0);
        CHECK(t, reached > 20 && reached < checked && clustered > 10);
        graph_close(&g);
    }
}

/* An incremental cycle stepped 1 ns at a time (expiring list taken, then purged) keeps exactly what a full collection of an identical heap keeps. */
static void test_incremental_same_survivors(runner *t) {
    static const uint64_t seeds[] = {7u, 0xC0FFEEu};
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        graph full, inc;
        if (!graph_open(t, &full, seeds[s], 11000, 4, 1)) return;
        if (!graph_open(t, &inc, seeds[s], 11000, 4, 1)) {
            graph_close(&full);
            return;
        }
        full.conjugates = inc.conjugates = true;
        graph_build(&full, 10000);
        graph_build(&inc, 10000);
        for (int cycle = 0; cycle < 2; cycle++) {
            oracle of, oi;
            if (!oracle_compute(&full, &of)) break;
            if (!oracle_compute(&inc, &oi)) {
                oracle_free(&of);
                break;
            }
            CHECK_EQ(t, of.reached, oi.reached);
            uint32_t expiring = expected_expiring(&full, &of);
            CHECK(t, expiring > 0);

            CHECK_OK(t, zs_gc_mark_and_gather(full.rt));
            VERIFY(t, full.rt);
            take_expiring(t, &full, &of, expiring);
            purge_all(t, full.rt);
            oracle_check(t, &full, &of, false);

            CHECK_OK(t, zs_gc_start_incremental(inc.rt));
            VERIFY(t, inc.rt);
            uint32_t steps = run_steps(t, inc.rt, 1);
            CHECK(t, steps > 10);
            CHECK_EQ(t, gc_stats(inc.rt).mark_steps, steps);
            CHECK_EQ(t, zs_gc_phase_of(inc.rt), ZS_GC_PURGE_PENDING);
            int done = 1;
            CHECK_STATUS(t, zs_gc_purge(inc.rt, 0, &done), ZS_E_EXPIRY_PENDING);
            CHECK(t, !done);
            take_expiring(t, &inc, &oi, expiring);
            purge_all(t, inc.rt);
            oracle_check(t, &inc, &oi, false);

            graph_compare(t, &full, &inc);
            oracle_free(&of);
            oracle_free(&oi);
            graph_mutate(&full, false, 100);
            graph_mutate(&inc, false, 100);
        }
        graph_close(&full);
        graph_close(&inc);
    }
}

/* zs_collect_garbage during a pending incremental mark (finished by parallel marking), or during its gathering, finishes that cycle (one cycle, same survivors as a plain full collection). */
static void test_collect_during_incremental(runner *t) {
    graph a, b; /* a: incremental, then finished by a (parallel) full collection */
    if (!graph_open(t, &a, 99u, 11000, 4, 4)) return;
    if (!graph_open(t, &b, 99u, 11000, 4, 1)) {
        graph_close(&a);
        return;
    }
    CHECK_OK(t, zs_debug_set(a.rt, ZS_DEBUG_PARALLEL_THRESHOLD, 0));
    graph_build(&a, 10000);
    graph_build(&b, 10000);
    for (int cycle = 0; cycle < 2; cycle++) {
        oracle oa, ob;
        if (!oracle_compute(&a, &oa)) break;
        if (!oracle_compute(&b, &ob)) {
            oracle_free(&oa);
            break;
        }
        CHECK_OK(t, zs_gc_start_incremental(a.rt));
        VERIFY(t, a.rt);
        uint32_t steps = 0;
        if (cycle == 0) {
            for (; steps < 5; steps++) step_once(t, a.rt); /* still marking */
        } else {
            int done = 0; /* on to the gathering phase, and one stride into it */
            while (!done && zs_gc_phase_of(a.rt) != ZS_GC_GATHERING && steps < MAX_STEPS) {
                CHECK_OK(t, zs_gc_step(a.rt, 1, &done));
                VERIFY(t, a.rt);
                steps++;
            }
            CHECK(t, !done);
            CHECK_OK(t, zs_gc_step(a.rt, 1, &done));
            VERIFY(t, a.rt);
            steps++;
            CHECK(t, !done);
            CHECK_EQ(t, zs_gc_phase_of(a.rt), ZS_GC_GATHERING);
        }
        COLLECT(t, a.rt);
        COLLECT(t, b.rt);
        oracle_check(t, &a, &oa, false);
        oracle_check(t, &b, &ob, false);
        zs_gc_stats sa = gc_stats(a.rt), sb = gc_stats(b.rt);
        CHECK_EQ(t, sa.cycle, sb.cycle);
        CHECK_EQ(t, sa.mark_steps, steps + (cycle == 0 ? 1 : 0));
        if (cycle == 0) CHECK(t, sa.mark_threads > 1); /* the pending mark went parallel */
        CHECK_EQ(t, zs_gc_phase_of(a.rt), ZS_GC_IDLE);
        graph_compare(t, &a, &b);
        oracle_free(&oa);
        oracle_free(&ob);
        graph_mutate(&a, false, 100);
        graph_mutate(&b, false, 100);
    }
    graph_close(&a);
    graph_close(&b);
}

/* Mutating a random clustered graph between 1 ns steps (stores, cuts, roots, strong refs, garbage, new objects, stores into members) never loses an object reachable at the end of the mark, and the next full collection is exact again. */
static void test_incremental_random_mutation(runner *t) {
    static const uint64_t seeds[] = {5u, 0xFEEDu};
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        graph g;
        if (!graph_open(t, &g, seeds[s], 60000, 4, 1)) return;
        graph_build(&g, 6000);
        for (int cycle = 0; cycle < 3; cycle++) {
            CHECK_OK(t, zs_gc_start_incremental(g.rt));
            VERIFY(t, g.rt);
            int done = 0;
            uint32_t steps = 0, mutations = 0;
            while (!done && steps < MAX_STEPS) {
                if (zs_gc_step(g.rt, 1, &done) != ZS_OK) break;
                VERIFY(t, g.rt);
                steps++;
                if (!done && zs_gc_phase_of(g.rt) == ZS_GC_MARKING) {
                    graph_mutate(&g, true, 10);
                    VERIFY(t, g.rt);
                    mutations++;
                }
            }
            CHECK(t, done);
            CHECK(t, mutations > 5);
            oracle o; /* the heap as it was when the mark completed */
            if (!oracle_compute(&g, &o)) break;
            purge_all(t, g.rt);
            oracle_check(t, &g, &o, true);
            oracle_free(&o);

            if (!oracle_compute(&g, &o)) break;
            COLLECT(t, g.rt);
            oracle_check(t, &g, &o, false);
            oracle_free(&o);
            graph_mutate(&g, false, 100);
        }
        graph_close(&g);
    }
}

/* Parallel marking (4 threads, threshold 0) keeps exactly the same objects and nulls exactly the same killable slots as serial marking on identical clustered graphs, over several seeds; the first cycle claims through the mark filter, the second (random edges: too few claims per atomic OR) through item flags. */
static void test_parallel_mark_matches_serial(runner *t) {
    static const uint64_t seeds[] = {11u, 0xABCDEFu, 31337u};
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        graph serial, par;
        if (!graph_open(t, &serial, seeds[s], 51000, 4, 1)) return;
        if (!graph_open(t, &par, seeds[s], 51000, 4, 4)) {
            graph_close(&serial);
            return;
        }
        CHECK_OK(t, zs_debug_set(serial.rt, ZS_DEBUG_PARALLEL_THRESHOLD, 0));
        CHECK_OK(t, zs_debug_set(par.rt, ZS_DEBUG_PARALLEL_THRESHOLD, 0));
        graph_build(&serial, 50000);
        graph_build(&par, 50000);
        graph_compare(t, &serial, &par);
        CHECK(t, zs_cluster_count(par.rt) >= 50);
        for (int cycle = 0; cycle < 2; cycle++) {
            oracle os, op;
            if (!oracle_compute(&serial, &os)) break;
            if (!oracle_compute(&par, &op)) {
                oracle_free(&os);
                break;
            }
            COLLECT(t, serial.rt);
            COLLECT(t, par.rt);
            oracle_check(t, &serial, &os, false);
            oracle_check(t, &par, &op, false);
            zs_gc_stats ss = gc_stats(serial.rt), sp = gc_stats(par.rt);
            CHECK_EQ(t, ss.mark_threads, 1);
            CHECK(t, sp.mark_threads > 1);
            CHECK_EQ(t, sp.objects_marked, ss.objects_marked);
            CHECK_EQ(t, sp.objects_scanned, ss.objects_scanned);
            CHECK_EQ(t, sp.references_killed, ss.references_killed);
            CHECK_EQ(t, sp.clusters_marked, ss.clusters_marked);
            CHECK(t, sp.references_killed > 0 && sp.clusters_marked > 0);
            graph_compare(t, &serial, &par);
            oracle_free(&os);
            oracle_free(&op);
            graph_mutate(&serial, false, 100);
            graph_mutate(&par, false, 100);
        }
        graph_close(&serial);
        graph_close(&par);
    }
}

/* Parallel marking whose stacks overflow (a limit of a few entries) still
   keeps exactly what the oracle predicts: the workers' failed pushes are
   rescanned before gathering, and check-mark finds nothing missed. */
static void test_parallel_mark_overflow(runner *t) {
    cfix c; /* one root (its push fits), then a wide tree that overflows */
    if (!cfix_open(t, &c, 16, 4)) return;
    CHECK_OK(t, zs_debug_set(c.rt, ZS_DEBUG_PARALLEL_THRESHOLD, 0));
    CHECK_OK(t, zs_debug_set(c.rt, ZS_DEBUG_MARK_STACK_LIMIT, 3));
    CHECK_OK(t, zs_debug_set(c.rt, ZS_DEBUG_CHECK_MARKS, 1));
    enum { WIDE = 2000 };
    static zs_ref kids[WIDE], grandkids[WIDE];
    zs_ref top = MAKE(t, c.rt, c.fx.node, ZS_NULL_REF);
    ROOT(t, c.rt, top);
    for (uint32_t i = 0; i < WIDE; i++) {
        kids[i] = MAKE(t, c.rt, c.fx.node, ZS_NULL_REF);
        grandkids[i] = MAKE(t, c.rt, c.fx.node, ZS_NULL_REF);
        PUSH(t, c.rt, top, kids[i]);
        LINK(t, c.rt, kids[i], 0, grandkids[i]);
    }
    COLLECT(t, c.rt);
    CHECK(t, gc_stats(c.rt).mark_threads > 1);
    CHECK_EQ(t, count_alive(c.rt, kids, WIDE), WIDE);
    CHECK_EQ(t, count_alive(c.rt, grandkids, WIDE), WIDE);
    CHECK_EQ(t, zs_debug_check_failures(c.rt), 0);
    cfix_close(&c);

    graph g;
    if (!graph_open(t, &g, 77u, 21000, 4, 4)) return;
    CHECK_OK(t, zs_debug_set(g.rt, ZS_DEBUG_PARALLEL_THRESHOLD, 0));
    CHECK_OK(t, zs_debug_set(g.rt, ZS_DEBUG_MARK_STACK_LIMIT, 3));
    CHECK_OK(t, zs_debug_set(g.rt, ZS_DEBUG_CHECK_MARKS, 1));
    graph_build(&g, 20000);
    for (int cycle = 0; cycle < 3; cycle++) {
        oracle o;
        if (!oracle_compute(&g, &o)) break;
        COLLECT(t, g.rt);
        oracle_check(t, &g, &o, false);
        oracle_free(&o);
        CHECK(t, gc_stats(g.rt).mark_threads > 1);
        CHECK_EQ(t, zs_debug_check_failures(g.rt), 0);
        graph_mutate(&g, false, 100);
    }
    graph_close(&g);
}

/* ======================================================================
 * Table
 * ====================================================================== */

const test_case advanced_tests[] = {
    TEST(test_cluster_member_outlives_its_dropped_conjugate),
    TEST(test_cluster_create_gathers),
    TEST(test_cluster_kept_whole),
    TEST(test_cluster_destroyed_whole),
    TEST(test_gather_out_of_memory),
    TEST(test_cluster_create_out_of_memory),
    TEST(test_cluster_member_reached_from_outside),
    TEST(test_cluster_references_keep_outside),
    TEST(test_cluster_garbage_member_dissolves),
    TEST(test_cluster_garbage_mutable_object),
    TEST(test_cluster_store_dissolves),
    TEST(test_cluster_value_stores_dissolve),
    TEST(test_cluster_create_refused),
    TEST(test_cluster_permanent_objects),
    TEST(test_cluster_incremental_barrier),
    TEST(test_incremental_write_barrier),
    TEST(test_incremental_born_reachable),
    TEST(test_incremental_new_object_keeps_outer),
    TEST(test_incremental_root_and_strong_ref_barrier),
    TEST(test_incremental_phase_errors),
    TEST(test_gathering_refuses_unmarked),
    TEST(test_gather_stops_only_at_its_deadline),
    TEST(test_gathering_refuses_cluster),
    TEST(test_incremental_purge),
    TEST(test_purge_waits_for_gathering),
    TEST(test_dissolve_dying_cluster_while_gathering),
    TEST(test_runtime_free_mid_cycle),
    TEST(test_teardown_name_index),
    TEST(test_incremental_step_count),
    TEST(test_barrier_work_is_what_a_store_writes),
    TEST(test_dying_objects_are_handed_to_the_expiry_handler),
    TEST(test_purge_budget_and_free_from_the_handler),
    TEST(test_expiry_without_a_handler),
    TEST(test_destroy_object),
    TEST(test_random_graph_clusters),
    TEST(test_reference_chains_random),
    TEST(test_incremental_same_survivors),
    THREADED_TEST(test_collect_during_incremental),
    TEST(test_incremental_random_mutation),
    THREADED_TEST(test_parallel_mark_matches_serial),
    THREADED_TEST(test_parallel_mark_overflow),
};

const size_t advanced_test_count = sizeof advanced_tests / sizeof advanced_tests[0];
