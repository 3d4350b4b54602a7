/*
 * gc_purge.c -- destroying what the gather listed as dying: BeginDestroy
 * for all of them first, then FinishDestroy through the host's hook and
 * freeing, one by one, optionally under a time or object budget; and at
 * runtime teardown, every object.
 *
 * Invariant: no object that has a conjugate is freed while its handle is
 * still in rt->expiring; the managed side must take the list (and expire
 * its proxies) first (expiry.c). This is what keeps a Python proxy from
 * ever pointing at freed memory.
 */
#include "internal.h"

/* Objects per budget check: reading the clock costs about as much as
   freeing a few objects. */
#define PURGE_CLOCK_STRIDE 32u

/* How far ahead the purge loop asks for a dying object's memory, and how
   many cache lines of it (most objects' property block fits). */
#define PURGE_PREFETCH 4u
#define PURGE_PREFETCH_LINES 8u

/* A purge of at least PURGE_RELINK_MIN objects and at least 1/SHARE of the
   live ones unlinks them from the name index in one relink pass. */
#define PURGE_RELINK_MIN 1024u
#define PURGE_RELINK_SHARE 8u

/* Destroy the dying objects, with the lock held (see internal.h). */
zs_status zs_gc_purge_locked(zs_runtime *rt, uint64_t budget_ns, uint32_t max_objects,
                             bool *out_done) {
    *out_done = false;
    /* A hand-over in progress (another thread's, or this one's handler
       collecting): its objects are off the expiring list with their
       conjugates maybe still live. */
    if (rt->in_destroy_hook || rt->handing_over > 0) return ZS_E_BUSY;
    /* Only a completed gather hands objects to the purge. */
    if (rt->phase == ZS_GC_MARKING || rt->phase == ZS_GC_GATHERING) return ZS_E_BUSY;
    if (rt->expiring.count > 0) return ZS_E_EXPIRY_PENDING;
    uint64_t start = zs_now_ns();
    rt->collector_allocating++; /* the free list may grow */
    /* BeginDestroy for every dying object before any is freed, so a hook may
       still read the objects that a dying object references. Entries before
       dying_cursor are already freed (a budgeted purge stopped after them). */
    for (uint32_t i = rt->dying_cursor; i < rt->dying.count && rt->destroy_hook; i++) {
        zs_item *it = zs_item_at(rt, rt->dying.data[i]);
        if (!(it->flags & ZS_ITEM_BEGUN_DESTROY)) zs_begin_destroy(rt, it);
    }
    /* Many deaths: one sequential relink of the survivors costs less than
       a chain walk (a few cache misses) per freed object. */
    if (rt->dying_cursor == 0 && rt->dying.count >= PURGE_RELINK_MIN &&
        (uint64_t)rt->dying.count * PURGE_RELINK_SHARE >= rt->live_objects)
        zs_name_index_drop_dying(rt);
    uint32_t freed = 0;
    while (rt->dying_cursor < rt->dying.count) {
        /* Dying objects are cold (made long ago, not touched by the mark):
           their memory is asked for a few objects ahead, so that its cache
           misses overlap the destruction of the ones before instead of
           stalling each in turn. Hints only: nothing is read. */
        if (rt->dying_cursor + PURGE_PREFETCH < rt->dying.count) {
            const zs_item *ahead = zs_item_at(rt,
                                              rt->dying.data[rt->dying_cursor + PURGE_PREFETCH]);
            const char *object = (const char *)ahead->object;
            for (uint32_t line = 0; line < PURGE_PREFETCH_LINES; line++)
                __builtin_prefetch(object + line * 64u);
        }
        zs_item *it = zs_item_at(rt, rt->dying.data[rt->dying_cursor++]);
        assert((it->flags & ZS_ITEM_DYING) && !(it->flags & ZS_ITEM_IN_ROOT_LIST));
        zs_call_destroy_hook(rt, it, ZS_FINISH_DESTROY);
        zs_object_destroy(rt, it, !rt->dying_unhashed);
        freed++;
        if (budget_ns != 0 && freed % PURGE_CLOCK_STRIDE == 0 && zs_now_ns() - start >= budget_ns)
            break;
        if (freed == max_objects) /* max_objects 0 never matches: no bound */
            break;
    }
    rt->collector_allocating--;
    rt->stats.objects_freed += freed;
    rt->stats.purge_ns += zs_now_ns() - start;
    rt->stats.live_objects = rt->live_objects;
    if (rt->dying_cursor == rt->dying.count) {
        rt->dying.count = 0;
        rt->dying_cursor = 0;
        rt->dying_unhashed = false;
        if (rt->phase == ZS_GC_PURGE_PENDING) rt->phase = ZS_GC_IDLE;
        *out_done = true;
    }
    return ZS_OK;
}

/* Dying objects not freed yet: a purge is pending while any is left. */
uint32_t zs_gc_pending_purge(zs_runtime *rt) {
    ZS_LOCK(rt);
    uint32_t pending = rt->dying.count - rt->dying_cursor;
    ZS_UNLOCK(rt);
    return pending;
}

/* Runtime teardown: every object, permanent ones included, gets both hook
   phases and is freed. The managed side expired its proxies before. */
void zs_gc_destroy_everything(zs_runtime *rt) {
    /* Before the first hook runs: objects are freed in slot order, so the
       expiring list and a cluster's record could name a freed object to a
       hook that asks (zs_gc_take_expiring, zs_cluster_get_info). Every
       object dies, and the managed side expired its proxies already. */
    rt->expiring.count = 0;
    zs_clusters_abandon_all(rt);
    for (uint32_t index = 0; index < rt->high_water; index++) {
        zs_item *it = zs_item_at(rt, index);
        if (it->object != NULL && !(it->flags & ZS_ITEM_BEGUN_DESTROY)) zs_begin_destroy(rt, it);
    }
    /* Everything dies: empty the name index at once instead of unlinking
       each object (a chain walk, cache misses, per object). A hook's lookup
       from here on finds nothing, and builds no index of doomed objects. */
    zs_name_index_clear(rt);
    rt->tearing_down = true;
    for (uint32_t index = 0; index < rt->high_water; index++) {
        zs_item *it = zs_item_at(rt, index);
        if (it->object == NULL) continue;
        zs_call_destroy_hook(rt, it, ZS_FINISH_DESTROY);
        zs_object_destroy(rt, it, false);
    }
    rt->dying.count = rt->dying_cursor = 0;
    rt->dying_unhashed = false;
    rt->phase = ZS_GC_IDLE;
    zs_publish_dying(rt);
    rt->root_list.count = 0;
    rt->permanent_count = 0;
}
