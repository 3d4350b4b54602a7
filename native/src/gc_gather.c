/*
 * gc_gather.c -- gathering: once the mark is complete (ZS_GC_GATHERING),
 * one pass over the object array lists every unmarked object as dying
 * (rt->dying, for the purge) and those with a conjugate as expiring
 * (rt->expiring, for the managed side), in steps under a time budget; a
 * dying cluster root releases its cluster. Out of memory gives the cycle up.
 */
#include "internal.h"

/* Out of memory while recording an unreachable object: give the cycle up,
   every object survives it. Keeping just that object alive would be unsafe
   (what it references may be gathered and freed), but the unreachable set
   is closed under references (a cluster's members are in it with their
   root), so resurrecting all of it never leaves a survivor pointing at a
   freed object. Needs no allocation. The expiring list is dropped; proxies
   the managed side already expired only make their objects unreachable
   from Python sooner. */
static void gather_abort(zs_runtime *rt) {
    for (uint32_t index = 0; index < rt->high_water; index++) {
        zs_item *it = zs_item_at(rt, index);
        if (it->object == NULL || (it->flags & ZS_ITEM_PERMANENT)) continue;
        it->flags &= ~ZS_ITEM_DYING;
        item_set_marked(rt, it); /* a live cluster's root included: the cluster lives */
    }
    rt->dying.count = 0;
    rt->expiring.count = 0;
    rt->stats.gathers_aborted++;
}

#define GATHER_CLOCK_STRIDE 4096u
_Static_assert(ZS_OBJECTS_PER_CHUNK % GATHER_CLOCK_STRIDE == 0,
               "a clock stride never spans two chunks");

/* Gather the unmarked objects from the cursor on, until the deadline. One
   sequential pass over the items, a chunk (and a clock stride) at a time;
   a marked, ordinary item is skipped with one load and one compare, and an
   item whose mark-filter bit is set without reading it at all, 64 such
   items at once: a live heap's gather then reads the filter (1 bit per
   object) instead of every item. A set bit still names a survivor while
   gathering, between steps too: bits are only set while marking, for
   marked (or permanent) objects outside clusters; a mark is not taken back
   before the purge (but for the members of a dying cluster, which have no
   bit), nor does an object with a bit leave its slot (objects are freed by
   the purge); clusters are not created while a cycle is pending, and the
   members of one dissolved meanwhile never had bits; marking an object as
   garbage clears its bit.
   When an object cannot be recorded (out of memory) the whole cycle is
   given up (gather_abort). True when the pass is complete. */
bool zs_gather(zs_runtime *rt, uint64_t deadline_ns) {
    const uint64_t *filter = rt->mark_filter;
    int32_t cached_cluster = -1; /* releasing a dying root resets the cache */
    bool cached_reachable = false;
    /* Marked, not permanent, not dying, not in a cluster: survives. A free
       slot (flags 0) may match too: skipping it is right as well. */
    const uint64_t survivor_mask = ZS_ITEM_MARK | ZS_ITEM_PERMANENT | ZS_ITEM_DYING |
                                   ZS_WORD_NO_CLUSTER;
    const uint64_t survivor = rt->mark_parity | ZS_WORD_NO_CLUSTER;
    rt->collector_allocating++;
    uint32_t index = rt->gather_cursor;
    while (index < rt->high_water) {
        if (deadline_ns != 0 && index != rt->gather_cursor && zs_now_ns() >= deadline_ns) {
            rt->gather_cursor = index;
            rt->collector_allocating--;
            return false;
        }
        uint32_t end = (index / GATHER_CLOCK_STRIDE + 1) * GATHER_CLOCK_STRIDE;
        if (end > rt->high_water) end = rt->high_water;
        zs_item *it = zs_item_at(rt, index);
        for (; index < end; index++, it++) {
            if (filter != NULL) {
                uint64_t bits = filter[index >> 6] >> (index & 63);
                if (bits == UINT64_MAX >> (index & 63) && (index & 63) == 0 && end - index >= 64) {
                    index += 63; /* 64 survivors */
                    it += 63;
                    continue;
                }
                if (bits & 1) continue;
            }
            if ((zs_item_word(it) & survivor_mask) == survivor) continue;
            if (it->object == NULL || (it->flags & (ZS_ITEM_PERMANENT | ZS_ITEM_DYING))) continue;
            if (it->cluster_index >= 0 && !(it->flags & ZS_ITEM_CLUSTER_ROOT)) {
                /* A member lives and dies with its root (members of one cluster
                   are mostly adjacent: the root's answer is cached). */
                if (it->cluster_index != cached_cluster) {
                    cached_cluster = it->cluster_index;
                    cached_reachable = zs_item_reachable(rt, it);
                }
                if (cached_reachable) continue;
            } else if (item_is_marked(rt, it)) {
                continue;
            }
            assert(!item_is_root(it) && !(it->flags & ZS_ITEM_IN_ROOT_LIST));
            /* The handle from the slot index, which is the object's own
               (zs_item_ref reads it from the object: a cache miss per dead
               object, whose memory nothing else here touches). */
            assert(it->object->index == index);
            if (!zs_u32_push(rt, &rt->dying, index) ||
                ((it->flags & ZS_ITEM_HAS_CONJUGATE) &&
                 !zs_ref_push(rt, &rt->expiring, ZS_MAKE_REF(index, it->serial)))) {
                gather_abort(rt);
                index = rt->high_water;
                break;
            }
            it->flags |= ZS_ITEM_DYING;
            if (it->flags & ZS_ITEM_CLUSTER_ROOT) {
                zs_cluster_release_dying(rt, it->cluster_index);
                cached_cluster = -1; /* the id may be reused */
            }
        }
    }
    rt->collector_allocating--;
    rt->gather_cursor = 0;
    rt->stats.objects_unreachable = rt->dying.count;
    rt->stats.clusters = rt->live_clusters;
    rt->stats.live_objects = rt->live_objects;
    rt->phase = rt->dying.count > 0 ? ZS_GC_PURGE_PENDING : ZS_GC_IDLE;
    zs_publish_dying(rt);
    return true;
}
