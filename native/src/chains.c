/*
 * chains.c -- reference chains: why is an object alive? For each root that
 * reaches the target, the shortest chain of references from that root to
 * it, after Unreal's FReferenceChainSearch. A debugging tool: each call costs
 * O(heap + references) time and transient memory, and the collector never
 * uses it.
 *
 * The search reverses the reference graph once (for every object, who holds
 * a reference to it and through which member), then walks the reversed graph
 * breadth-first from the target. Every root met on the way starts a chain,
 * and the walk's links lead from that root to the target along a shortest
 * path; roots are met nearest first. The edges are exactly those the mark
 * follows: an object's outer, its strong members (references, and those
 * inside structs and containers), the references inside black values when
 * they are roots, and membership of a cluster that the next mark keeps
 * (marking one member marks all of it, its root included). A killable reference to an object marked as garbage is not
 * an edge (the mark nulls it), and dying objects (zs_item_dying) neither
 * hold nor are held.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define NO_NODE UINT32_MAX

/* The reversed graph in compressed rows. Nodes are the object slots
   (0 .. high_water), then the black value slots. The holders of node n are
   from[first[n] .. first[n + 1]), each holding it through member[...]. It is
   built in two scans of the heap: the first counts each node's holders into
   first[n + 1] (fill is NULL), the second writes them at fill[n]. */
typedef struct reversed_graph {
    zs_runtime *rt;
    uint32_t node_count;
    size_t *first;
    size_t *fill;
    uint32_t *from;
    uint32_t *member;
    uint32_t holder; /* the node being scanned */
    uint32_t at;     /* the member of it being scanned (ZS_CHAIN_*) */
    uint8_t *stale;  /* per cluster: the next mark dissolves it first */
} reversed_graph;

/* ======================================================================
 * Reversing the graph
 * ====================================================================== */

/* Record the edge from the node being scanned, through its member being
   scanned, to node `to`. */
static void record(reversed_graph *g, uint32_t to) {
    if (g->fill == NULL) {
        g->first[to + 1]++;
        return;
    }
    size_t at = g->fill[to]++;
    g->from[at] = g->holder;
    g->member[at] = g->at;
}

/* Record the edge holder -> *slot if the mark would follow it. */
static void add_edge(void *context, zs_ref *slot, bool killable) {
    reversed_graph *g = context;
    zs_item *it = zs_item_of(g->rt, *slot);
    if (it == NULL || zs_item_dying(g->rt, it) || (killable && (it->flags & ZS_ITEM_GARBAGE)))
        return;
    record(g, ZS_REF_INDEX(*slot));
}

/* Find the clusters the next mark dissolves before marking (as
   zs_clusters_dissolve_stale does): those that reference a mutable object
   marked as garbage, and, recursively, the clusters that reference one of
   them. False when out of memory. */
static bool find_stale_clusters(reversed_graph *g) {
    zs_runtime *rt = g->rt;
    uint32_t clusters = rt->cluster_capacity;
    g->stale = calloc(clusters ? clusters : 1, 1);
    uint32_t *work = malloc((clusters ? clusters : 1) * sizeof *work);
    if (g->stale == NULL || work == NULL) {
        free(work);
        return false;
    }
    uint32_t pending = 0;
    for (uint32_t id = 0; id < clusters; id++) {
        const zs_cluster *c = &rt->clusters[id];
        for (uint32_t i = 0; c->root != ZS_NO_CLUSTER_ROOT && i < c->mutable_objects.count; i++) {
            const zs_item *it = zs_item_of(rt, c->mutable_objects.data[i]);
            if (it != NULL && (it->flags & ZS_ITEM_GARBAGE)) {
                g->stale[id] = 1;
                work[pending++] = id;
                break;
            }
        }
    }
    while (pending > 0) {
        const zs_u32_vec *by = &rt->clusters[work[--pending]].referenced_by;
        for (uint32_t i = 0; i < by->count; i++) {
            if (g->stale[by->data[i]]) continue;
            g->stale[by->data[i]] = 1;
            work[pending++] = by->data[i]; /* each cluster is queued once */
        }
    }
    free(work);
    return true;
}

/* A live cluster is marked as one unit: reaching any member reaches its
   root and every other member. Each member and its root hold each other. */
static void add_cluster_edges(reversed_graph *g, uint32_t member, const zs_item *it) {
    if (g->stale[it->cluster_index]) return;
    uint32_t root = g->rt->clusters[it->cluster_index].root;
    assert(root != ZS_NO_CLUSTER_ROOT && root < g->rt->high_water);
    g->at = ZS_CHAIN_CLUSTER;
    g->holder = member;
    record(g, root);
    g->holder = root;
    record(g, member);
}

/* The edges out of the strong members of a schema laid out at base, each
   named by its member's offset. */
static void scan_schema(reversed_graph *g, const zs_schema *schema, char *base) {
    for (uint32_t i = 0; i < schema->strong_count; i++) {
        uint32_t offset = schema->words[i] >> ZS_OP_SHIFT;
        g->at = offset;
        if ((schema->words[i] & ZS_OP_MASK) == ZS_OP_OBJECT)
            add_edge(g, (zs_ref *)(base + offset), true);
        else zs_value_for_each_ref(schema->types[i], base + offset, true, add_edge, g);
    }
}

/* Every edge the mark follows, from every live object and black value. */
static void scan_heap(reversed_graph *g) {
    zs_runtime *rt = g->rt;
    for (uint32_t index = 0; index < rt->high_water; index++) {
        zs_item *it = zs_item_at(rt, index);
        if (it->object == NULL || zs_item_dying(rt, it)) continue;
        g->holder = index;
        g->at = ZS_CHAIN_OUTER;
        add_edge(g, &it->object->outer, false);
        scan_schema(g, &it->object->cls->schema, (char *)it->object);
        if (it->cluster_index >= 0 && !(it->flags & ZS_ITEM_CLUSTER_ROOT))
            add_cluster_edges(g, index, it);
    }
    if (!rt->black_roots) return; /* then the mark does not read black values */
    for (uint32_t i = 0; i < rt->value_capacity; i++) {
        const zs_value_slot *slot = &rt->values[i];
        if (slot->value == NULL || !(slot->type->flags & ZS_TYPE_HAS_REFS)) continue;
        g->holder = rt->high_water + i;
        if (slot->type->kind == ZS_TYPE_STRUCT) {
            scan_schema(g, &slot->type->schema, slot->value);
        } else {
            g->at = ZS_CHAIN_WHOLE;
            zs_value_for_each_ref(slot->type, slot->value, true, add_edge, g);
        }
    }
}

/* Build the reversed graph; false when out of memory. */
static bool reverse(reversed_graph *g) {
    size_t nodes = g->node_count;
    g->first = calloc(nodes + 1, sizeof *g->first);
    if (g->first == NULL || !find_stale_clusters(g)) return false;
    scan_heap(g);
    for (size_t n = 0; n < nodes; n++) g->first[n + 1] += g->first[n];
    size_t edges = g->first[nodes];
    g->from = malloc((edges ? edges : 1) * sizeof *g->from);
    g->member = malloc((edges ? edges : 1) * sizeof *g->member);
    g->fill = malloc((nodes ? nodes : 1) * sizeof *g->fill);
    if (g->from == NULL || g->member == NULL || g->fill == NULL) return false;
    memcpy(g->fill, g->first, nodes * sizeof *g->fill);
    scan_heap(g);
    /* Invariant: the second scan met exactly the edges the first counted. */
    assert(nodes == 0 || g->fill[nodes - 1] == edges);
    return true;
}

/* ======================================================================
 * The search
 * ====================================================================== */

/* Why a node is a root (ZS_CHAIN_ROOT_*), or 0. */
static uint32_t root_reasons(const zs_runtime *rt, uint32_t node) {
    if (node >= rt->high_water) return ZS_CHAIN_ROOT_VALUE;
    const zs_item *it = zs_item_at(rt, node);
    return ((it->flags & ZS_ITEM_ROOT) ? ZS_CHAIN_ROOT_ADDED : 0) |
           (it->strong_refs > 0 ? ZS_CHAIN_ROOT_STRONG : 0) |
           ((it->flags & ZS_ITEM_PERMANENT) ? ZS_CHAIN_ROOT_PERMANENT : 0);
}

/* The handle of a node: an object's, or a black value's. */
static zs_ref node_ref(zs_runtime *rt, uint32_t node) {
    if (node < rt->high_water) return zs_item_share(zs_item_at(rt, node));
    uint32_t value = node - rt->high_water;
    return ZS_MAKE_REF(value, rt->values[value].serial);
}

typedef struct chain_output {
    zs_chain_link *links;
    uint32_t capacity;
    uint32_t count; /* links needed so far (saturating) */
} chain_output;

/* Write the chain from a root to the target: follow `toward` until the
   target's link (member ZS_CHAIN_END). */
static void emit_chain(chain_output *out, zs_runtime *rt, uint32_t root, uint32_t why,
                       const uint32_t *toward, const uint32_t *via) {
    for (uint32_t node = root;; node = toward[node]) {
        if (out->count < out->capacity)
            out->links[out->count] = (zs_chain_link){node_ref(rt, node), via[node],
                                                     node == root ? why : 0};
        if (out->count < UINT32_MAX) out->count++;
        if (via[node] == ZS_CHAIN_END) break;
    }
}

/* Breadth-first over the holders, from the target: `toward[n]` is the next
   node on a shortest path from n to the target, `via[n]` the member of n
   holding it. */
static bool search(const reversed_graph *g, uint32_t target, uint32_t max_chains,
                   chain_output *out) {
    uint32_t nodes = g->node_count;
    uint32_t *toward = malloc((size_t)nodes * sizeof *toward);
    uint32_t *via = malloc((size_t)nodes * sizeof *via);
    uint32_t *queue = malloc((size_t)nodes * sizeof *queue);
    bool ok = toward != NULL && via != NULL && queue != NULL;
    if (ok) {
        memset(toward, 0xFF, (size_t)nodes * sizeof *toward); /* NO_NODE everywhere */
        toward[target] = target;
        via[target] = ZS_CHAIN_END;
        queue[0] = target;
        uint32_t head = 0, tail = 1, found = 0;
        while (head < tail && found < max_chains) {
            uint32_t node = queue[head++];
            uint32_t why = root_reasons(g->rt, node);
            if (why != 0) {
                emit_chain(out, g->rt, node, why, toward, via);
                found++;
            }
            for (size_t e = g->first[node]; e < g->first[node + 1]; e++) {
                uint32_t holder = g->from[e];
                if (toward[holder] != NO_NODE) continue;
                toward[holder] = node;
                via[holder] = g->member[e];
                queue[tail++] = holder; /* each node is queued once: tail <= nodes */
            }
        }
    }
    free(toward);
    free(via);
    free(queue);
    return ok;
}

zs_status zs_reference_chains(zs_runtime *rt, zs_ref target, uint32_t max_chains,
                              zs_chain_link *links, uint32_t capacity, uint32_t *out_count) {
    if (out_count == NULL || (links == NULL && capacity > 0)) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = ZS_OK;
    zs_item *it = zs_usable_item(rt, target, &status);
    uint64_t nodes = (uint64_t)rt->high_water + (rt->black_roots ? rt->value_capacity : 0);
    reversed_graph g = {.rt = rt, .node_count = (uint32_t)nodes};
    chain_output out = {links, capacity, 0};
    if (it != NULL &&
        (nodes >= NO_NODE || !reverse(&g) ||
         !search(&g, ZS_REF_INDEX(target), max_chains ? max_chains : UINT32_MAX, &out)))
        status = ZS_E_NOMEM;
    free(g.first);
    free(g.fill);
    free(g.from);
    free(g.member);
    free(g.stale);
    *out_count = out.count;
    ZS_UNLOCK(rt);
    return status;
}
