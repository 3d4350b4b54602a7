/*
 * clusters.c -- GC clusters (Unreal's UObject clusters): a root and the
 * objects it references, marked reachable as one unit without scanning the
 * members. What the members reference outside the cluster is summarised as
 * referenced clusters and mutable objects. Here: their records, creating
 * one, dissolving them, and the questions about them.
 *
 * Invariants relied on here and in gc_mark.c (which marks a cluster):
 *  - A cluster is marked all or nothing: members are only marked by the
 *    marker's mark_cluster, which marks every one of them.
 *  - No member is garbage (marking a member as garbage dissolves the
 *    cluster), and members' references never change while the cluster lives
 *    (a store into a member dissolves it), so the summary stays exact.
 *  - A dissolved cluster's objects are ordinary objects; a cluster that
 *    referenced it is dissolved too, because its summary named the cluster,
 *    not the objects.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ======================================================================
 * Cluster records
 * ====================================================================== */

static zs_cluster *cluster_at(zs_runtime *rt, int32_t id) {
    assert(id >= 0 && (uint32_t)id < rt->cluster_capacity);
    return &rt->clusters[id];
}

static bool cluster_live(const zs_runtime *rt, int32_t id) {
    return id >= 0 && (uint32_t)id < rt->cluster_capacity &&
           rt->clusters[id].root != ZS_NO_CLUSTER_ROOT;
}

/* A fresh cluster record (its root still unset), or -1 when out of memory. */
static int32_t cluster_new(zs_runtime *rt) {
    if (rt->free_clusters.count > 0)
        return (int32_t)rt->free_clusters.data[--rt->free_clusters.count];
    if (rt->cluster_capacity >= (uint32_t)INT32_MAX) return -1;
    uint32_t capacity = rt->cluster_capacity ? rt->cluster_capacity * 2 : 16;
    zs_cluster *grown = zs_realloc(rt, rt->clusters, rt->cluster_capacity * sizeof *grown,
                                   capacity * sizeof *grown);
    if (grown == NULL) return -1;
    rt->clusters = grown;
    for (uint32_t i = rt->cluster_capacity; i < capacity; i++) {
        grown[i].root = ZS_NO_CLUSTER_ROOT;
    }
    /* Listed in reverse so low ids are reused first; a slot that cannot be
       listed (out of memory) is simply never used. */
    for (uint32_t i = capacity; i-- > rt->cluster_capacity + 1;)
        if (!zs_u32_push(rt, &rt->free_clusters, i)) break;
    int32_t id = (int32_t)rt->cluster_capacity;
    rt->cluster_capacity = capacity;
    return id;
}

/* Remove one occurrence of value from a vector (order not kept). */
static void u32_remove(zs_u32_vec *vec, uint32_t value) {
    for (uint32_t i = 0; i < vec->count; i++) {
        if (vec->data[i] == value) {
            vec->data[i] = vec->data[--vec->count];
            return;
        }
    }
}

static bool u32_contains(const zs_u32_vec *vec, uint32_t value) {
    for (uint32_t i = 0; i < vec->count; i++)
        if (vec->data[i] == value) return true;
    return false;
}

/* Free a record's vectors and return the slot; links to other clusters are
   removed first so no record ever names a free slot. */
static void cluster_free(zs_runtime *rt, int32_t id) {
    zs_cluster *c = cluster_at(rt, id);
    for (uint32_t i = 0; i < c->referenced_clusters.count; i++) {
        int32_t other = (int32_t)c->referenced_clusters.data[i];
        if (cluster_live(rt, other))
            u32_remove(&cluster_at(rt, other)->referenced_by, (uint32_t)id);
    }
    for (uint32_t i = 0; i < c->referenced_by.count; i++) {
        int32_t other = (int32_t)c->referenced_by.data[i];
        if (cluster_live(rt, other))
            u32_remove(&cluster_at(rt, other)->referenced_clusters, (uint32_t)id);
    }
    zs_u32_release(rt, &c->objects);
    zs_u32_release(rt, &c->referenced_clusters);
    zs_ref_release(rt, &c->mutable_objects);
    zs_u32_release(rt, &c->referenced_by);
    c->root = ZS_NO_CLUSTER_ROOT;
    rt->live_clusters--;
    if (!zs_u32_push(rt, &rt->free_clusters, (uint32_t)id)) {
        /* The slot is simply not reused. */
    }
}

/* ======================================================================
 * Creation
 * ====================================================================== */

/* Whether an object may join a cluster being built. */
static bool can_join(const zs_item *it) {
    const uint32_t refuse = ZS_ITEM_GARBAGE | ZS_ITEM_PERMANENT | ZS_ITEM_DYING;
    return (it->object->cls->flags & ZS_CLASS_IN_CLUSTER) && it->cluster_index < 0 &&
           !(it->flags & refuse);
}

static int compare_refs(const void *a, const void *b) {
    zs_ref x = *(const zs_ref *)a, y = *(const zs_ref *)b;
    return x < y ? -1 : x > y;
}

/* Record one outgoing reference of a member while building cluster id. */
static bool gather_reference(zs_runtime *rt, int32_t id, zs_u32_vec *work, zs_ref ref) {
    if (ref == ZS_NULL_REF) return true;
    zs_item *it = zs_item_of(rt, ref);
    assert(it != NULL);
    zs_cluster *c = cluster_at(rt, id);
    if ((it->flags & ZS_ITEM_PERMANENT) || it->cluster_index == id) return true;
    if (can_join(it)) {
        /* Recorded before it names the cluster: an abandoned cluster resets
           exactly the members it recorded, so no object is left naming a
           freed cluster record when memory runs out here. */
        if (!zs_u32_push(rt, &c->objects, it->object->index)) return false;
        it->cluster_index = id;
        return zs_u32_push(rt, work, it->object->index);
    }
    if (it->cluster_index >= 0) {
        uint32_t other = (uint32_t)it->cluster_index;
        if (u32_contains(&c->referenced_clusters, other)) return true;
        return zs_u32_push(rt, &c->referenced_clusters, other) &&
               zs_u32_push(rt, &cluster_at(rt, (int32_t)other)->referenced_by, (uint32_t)id);
    }
    return zs_ref_push(rt, &c->mutable_objects, ref);
}

typedef struct gather_context {
    zs_runtime *rt;
    int32_t id;
    zs_u32_vec *work;
    bool ok;
} gather_context;

static void gather_slot(void *context, zs_ref *slot, bool killable) {
    (void)killable;
    gather_context *g = context;
    if (g->ok) g->ok = gather_reference(g->rt, g->id, g->work, *slot);
}

/* Visit every strong reference of one object for cluster building. */
static bool gather_object(zs_runtime *rt, int32_t id, zs_u32_vec *work, zs_object *object) {
    const zs_class *cls = object->cls;
    if (!gather_reference(rt, id, work, object->outer)) return false;
    gather_context g = {rt, id, work, true};
    for (uint32_t i = 0; g.ok && i < cls->schema.strong_count; i++) {
        char *member = (char *)object + (cls->schema.words[i] >> ZS_OP_SHIFT);
        if ((cls->schema.words[i] & ZS_OP_MASK) == ZS_OP_OBJECT)
            g.ok = gather_reference(rt, id, work, *(zs_ref *)member);
        else zs_value_for_each_ref(cls->schema.types[i], member, true, gather_slot, &g);
    }
    return g.ok;
}

/* Undo a cluster that is too small or could not be built. */
static void cluster_abandon(zs_runtime *rt, int32_t id) {
    zs_cluster *c = cluster_at(rt, id);
    zs_item *root = zs_item_at(rt, c->root);
    root->cluster_index = -1;
    root->flags &= ~ZS_ITEM_CLUSTER_ROOT;
    for (uint32_t i = 0; i < c->objects.count; i++)
        zs_item_at(rt, c->objects.data[i])->cluster_index = -1;
    cluster_free(rt, id);
}

/* Runtime teardown, before the first destroy hook: every cluster goes, its
   objects ordinary again (they all die anyway). Objects are freed in slot
   order, so a record kept to the end could name a freed root to a hook
   that asks (zs_cluster_get_info). */
void zs_clusters_abandon_all(zs_runtime *rt) {
    for (uint32_t id = 0; id < rt->cluster_capacity; id++)
        if (rt->clusters[id].root != ZS_NO_CLUSTER_ROOT) cluster_abandon(rt, (int32_t)id);
}

zs_status zs_create_cluster(zs_runtime *rt, zs_ref root_ref, uint32_t *out_size) {
    zs_status status = ZS_OK;
    uint32_t size = 0;
    ZS_LOCK(rt);
    zs_item *root = NULL;
    if (rt->in_destroy_hook || rt->phase == ZS_GC_MARKING || rt->phase == ZS_GC_GATHERING) {
        status = ZS_E_BUSY;
    } else if ((root = zs_usable_item(rt, root_ref, &status)) == NULL) {
        /* status says why */
    } else if (!(root->object->cls->flags & ZS_CLASS_CLUSTER_ROOT) || root->cluster_index >= 0 ||
               (root->flags & (ZS_ITEM_GARBAGE | ZS_ITEM_PERMANENT))) {
        status = ZS_E_INVALID;
    } else {
        int32_t id = cluster_new(rt);
        zs_u32_vec work = {0};
        if (id < 0) {
            status = ZS_E_NOMEM;
            goto done;
        }
        zs_cluster *c = cluster_at(rt, id);
        memset(c, 0, sizeof *c);
        c->root = root->object->index;
        rt->live_clusters++;
        root->cluster_index = id;
        root->flags |= ZS_ITEM_CLUSTER_ROOT;
        bool ok = zs_u32_push(rt, &work, c->root);
        while (ok && work.count > 0) {
            zs_object *object = zs_item_at(rt, work.data[--work.count])->object;
            ok = gather_object(rt, id, &work, object);
        }
        zs_u32_release(rt, &work);
        c = cluster_at(rt, id);
        if (ok && c->mutable_objects.count > 1) {
            /* Several members may reference the same outside object. */
            qsort(c->mutable_objects.data, c->mutable_objects.count, sizeof(zs_ref), compare_refs);
            uint32_t kept = 1;
            for (uint32_t i = 1; i < c->mutable_objects.count; i++)
                if (c->mutable_objects.data[i] != c->mutable_objects.data[kept - 1])
                    c->mutable_objects.data[kept++] = c->mutable_objects.data[i];
            c->mutable_objects.count = kept;
        }
        if (!ok) status = ZS_E_NOMEM;
        if (!ok || 1 + c->objects.count < rt->min_cluster_size) cluster_abandon(rt, id);
        else size = 1 + c->objects.count;
    }
done:
    ZS_UNLOCK(rt);
    if (out_size != NULL) *out_size = size;
    return status;
}

/* ======================================================================
 * Dissolution
 * ====================================================================== */

/* Turn one cluster's objects back into ordinary objects. While a mark is
   pending, members already marked were never scanned: queue them. */
static void dissolve_one(zs_runtime *rt, int32_t id, zs_u32_vec *pending) {
    zs_cluster *c = cluster_at(rt, id);
    bool marking = rt->phase == ZS_GC_MARKING;
    /* Members take their own mark bits back from the root's. */
    bool marked = item_is_marked(rt, zs_item_at(rt, c->root));
    for (uint32_t i = 0; i <= c->objects.count; i++) {
        uint32_t index = i < c->objects.count ? c->objects.data[i] : c->root;
        zs_item *it = zs_item_at(rt, index);
        it->cluster_index = -1;
        it->flags &= ~ZS_ITEM_CLUSTER_ROOT;
        if (marked) item_set_marked(rt, it);
        else item_set_unmarked(rt, it);
        if (marking && marked && !(it->flags & ZS_ITEM_LEAF)) zs_gc_requeue(rt, index);
    }
    for (uint32_t i = 0; i < c->referenced_by.count; i++)
        if (!zs_u32_push(rt, pending, c->referenced_by.data[i])) rt->cluster_oom = true;
    rt->stats.clusters_dissolved++;
    cluster_free(rt, id);
}

/* Out of memory while queueing the clusters that reference a dissolved
   one: their summaries may now miss objects, so dissolve every cluster
   (correct, only slower; needs no allocation to make progress). */
static void dissolve_all(zs_runtime *rt) {
    zs_u32_vec ignored = {0};
    for (uint32_t id = 0; id < rt->cluster_capacity; id++)
        if (rt->clusters[id].root != ZS_NO_CLUSTER_ROOT) dissolve_one(rt, (int32_t)id, &ignored);
    zs_u32_release(rt, &ignored);
    rt->cluster_oom = false;
}

void zs_cluster_dissolve(zs_runtime *rt, int32_t cluster) {
    zs_u32_vec pending = {0};
    if (!zs_u32_push(rt, &pending, (uint32_t)cluster)) {
        rt->cluster_oom = true;
    }
    while (pending.count > 0) {
        int32_t id = (int32_t)pending.data[--pending.count];
        if (cluster_live(rt, id)) dissolve_one(rt, id, &pending);
    }
    zs_u32_release(rt, &pending);
    if (rt->cluster_oom) dissolve_all(rt);
}

zs_status zs_dissolve_cluster(zs_runtime *rt, zs_ref member) {
    ZS_LOCK(rt);
    zs_item *it = zs_item_of(rt, member);
    zs_status status = it == NULL ? ZS_E_STALE : rt->in_destroy_hook ? ZS_E_BUSY : ZS_OK;
    if (status == ZS_OK && it->cluster_index >= 0) zs_cluster_dissolve(rt, it->cluster_index);
    ZS_UNLOCK(rt);
    return status;
}

void zs_clusters_dissolve_stale(zs_runtime *rt) {
    for (uint32_t id = 0; id < rt->cluster_capacity; id++) {
        zs_cluster *c = &rt->clusters[id];
        if (c->root == ZS_NO_CLUSTER_ROOT) continue;
        for (uint32_t i = 0; i < c->mutable_objects.count; i++) {
            zs_item *it = zs_item_of(rt, c->mutable_objects.data[i]);
            assert(it != NULL);
            if (it->flags & ZS_ITEM_GARBAGE) {
                zs_cluster_dissolve(rt, (int32_t)id);
                break;
            }
        }
    }
}

void zs_cluster_release_dying(zs_runtime *rt, int32_t cluster) {
    zs_cluster *c = cluster_at(rt, cluster);
    /* Members not gathered yet are found unmarked by the rest of the pass
       (their own bits were stale while they were members). */
    for (uint32_t i = 0; i < c->objects.count; i++) {
        zs_item *it = zs_item_at(rt, c->objects.data[i]);
        it->cluster_index = -1;
        item_set_unmarked(rt, it);
    }
    zs_item *root = zs_item_at(rt, c->root);
    root->cluster_index = -1;
    root->flags &= ~ZS_ITEM_CLUSTER_ROOT;
    cluster_free(rt, cluster);
}

void zs_clusters_release(zs_runtime *rt) {
    for (uint32_t id = 0; id < rt->cluster_capacity; id++)
        if (rt->clusters[id].root != ZS_NO_CLUSTER_ROOT) cluster_free(rt, (int32_t)id);
    zs_free(rt, rt->clusters, rt->cluster_capacity * sizeof *rt->clusters);
    rt->clusters = NULL;
    rt->cluster_capacity = 0;
    zs_u32_release(rt, &rt->free_clusters);
}

/* ======================================================================
 * Queries
 * ====================================================================== */

zs_status zs_object_cluster(zs_runtime *rt, zs_ref ref, int32_t *out_cluster) {
    if (out_cluster == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_item *it = zs_item_of(rt, ref);
    if (it != NULL) *out_cluster = it->cluster_index;
    ZS_UNLOCK(rt);
    return it ? ZS_OK : ZS_E_STALE;
}

zs_status zs_cluster_get_info(zs_runtime *rt, int32_t cluster, zs_cluster_info *out) {
    if (out == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = cluster_live(rt, cluster) ? ZS_OK : ZS_E_INVALID;
    if (status == ZS_OK) {
        zs_cluster *c = cluster_at(rt, cluster);
        out->root = zs_item_share(zs_item_at(rt, c->root));
        out->objects = 1 + c->objects.count;
        out->referenced_clusters = c->referenced_clusters.count;
        out->mutable_objects = c->mutable_objects.count;
        out->referenced_by = c->referenced_by.count;
    }
    ZS_UNLOCK(rt);
    return status;
}

uint32_t zs_cluster_count(zs_runtime *rt) {
    ZS_LOCK(rt);
    uint32_t count = rt->live_clusters;
    ZS_UNLOCK(rt);
    return count;
}
