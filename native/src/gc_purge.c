/*
 * gc_purge.c -- destruction of the gathered unreachable objects: the
 * expiring list for the managed side, BeginDestroy / FinishDestroy through
 * the host's hook, and freeing, optionally under a time budget.
 *
 * Invariant: no object that has a conjugate is freed while its handle is
 * still in rt->expiring; the managed side must take the list (and expire
 * its proxies) first. This is what keeps a Python proxy from ever pointing
 * at freed memory.
 */
#include "internal.h"

/* Objects per budget check: reading the clock costs about as much as
   freeing a few objects. */
#define PURGE_CLOCK_STRIDE 32u

/* A purge of at least PURGE_RELINK_MIN objects and at least 1/SHARE of the
   live ones unlinks them from the name index in one relink pass. */
/* How far ahead the purge loop asks for a dying object's memory, and how
   many cache lines of it (most objects' property block fits). */
#define PURGE_PREFETCH 4u
#define PURGE_PREFETCH_LINES 8u
/* The same for taking the expiring list, whose loop is much shorter. */
#define TAKE_PREFETCH 16u

/* Objects handed to the expiry handler per call. */
#define HAND_OVER_BATCH 256u

#define PURGE_RELINK_MIN 1024u
#define PURGE_RELINK_SHARE 8u

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

zs_status zs_gc_purge_bounded(zs_runtime *rt, uint64_t budget_ns, uint32_t max_objects,
                              int *out_done) {
    bool done = false, counted = false;
    ZS_LOCK(rt);
    zs_status status = rt->in_destroy_hook ? ZS_E_BUSY : ZS_OK;
    if (status == ZS_OK && rt->handing_over == 0)
        status = zs_gc_hand_over(rt, UINT32_MAX, &counted, NULL);
    if (status == ZS_OK || status == ZS_E_EXPIRY_PENDING)
        status = zs_gc_purge_locked(rt, budget_ns, max_objects, &done);
    ZS_UNLOCK(rt);
    if (counted) zs_call_leave(rt);
    if (out_done != NULL) *out_done = done;
    return status;
}

/* ======================================================================
 * The hand-over to the managed side's expiry handler
 * ====================================================================== */

zs_status zs_set_expiry_handler(zs_runtime *rt, zs_expiry_handler handler, void *user) {
    ZS_LOCK(rt);
    zs_status status = rt->handing_over > 0 || !zs_expiry_owner(rt, user) ? ZS_E_BUSY : ZS_OK;
    if (status == ZS_OK) {
        rt->expiry_handler = handler;
        rt->expiry_handler_user = handler != NULL ? user : NULL;
    }
    ZS_UNLOCK(rt);
    return status;
}

/* What the managed side is told of one item it takes: its packed name and
   whether it was marked as garbage (either may be NULL); its conjugate flag
   is cleared, since the managed side has it now. */
static void take_item(zs_item *it, uint64_t *name, uint8_t *garbage) {
    if (name != NULL) *name = it->object->name_index | ((uint64_t)it->object->name_number << 32);
    if (garbage != NULL) *garbage = (it->flags & ZS_ITEM_GARBAGE) != 0;
    it->flags &= ~ZS_ITEM_HAS_CONJUGATE;
}

/* Take up to `count` objects off the end of the expiring list into the
   three arrays (their conjugate flags cleared: the managed side has them). */
static void take_expiring(zs_runtime *rt, zs_ref *buffer, uint64_t *names, uint8_t *garbage,
                          uint32_t count) {
    assert(count <= rt->expiring.count);
    for (uint32_t i = 0; i < count; i++) {
        /* Names are read from the dying objects, cold: asked for a few
           ahead so that the misses overlap (a hint: nothing is read). */
        if (names != NULL && i + TAKE_PREFETCH < count) {
            const zs_item *ahead = zs_item_of(
                rt, rt->expiring.data[rt->expiring.count - 1 - TAKE_PREFETCH]);
            if (ahead != NULL) __builtin_prefetch(ahead->object);
        }
        zs_ref ref = rt->expiring.data[--rt->expiring.count];
        zs_item *it = zs_item_of(rt, ref);
        assert(it != NULL && (it->flags & ZS_ITEM_DYING));
        buffer[i] = ref;
        take_item(it, names != NULL ? &names[i] : NULL, garbage != NULL ? &garbage[i] : NULL);
    }
}

/* Whether the expiry handler can be called now: one is set, and this
   thread holds the lock once (it is released around the call). */
bool zs_can_hand_over(const zs_runtime *rt) {
    return rt->expiry_handler != NULL && rt->lock.depth == 1 && !rt->in_destroy_hook;
}

/* Call the expiry handler on one batch (zs_can_hand_over said yes): the lock
   released meanwhile, no purge running, the hand-over counted as a call in
   progress once (*counted). ZS_E_STALE when zs_runtime_free ran meanwhile.
   Invariant kept: an object handed over stays in memory (no purge runs
   while handing_over > 0) until the handler, which expires its proxies,
   has returned. The handler runs unlocked, so a thread holding the GIL
   and waiting for this lock never waits on a thread that holds this lock
   and waits for the GIL. */
static zs_status hand_over_batch(zs_runtime *rt, const zs_ref *objects, const uint64_t *names,
                                 const uint8_t *garbage, uint32_t count, bool *counted) {
    assert(zs_can_hand_over(rt));
    zs_expiry_handler handler = rt->expiry_handler;
    void *user = rt->expiry_handler_user;
    rt->handing_over++;
    zs_publish_dying(rt);
    if (!*counted) {
        zs_call_enter(rt); /* zs_runtime_free meanwhile waits for the caller */
        *counted = true;
    }
    ZS_UNLOCK(rt);
    handler(user, rt, objects, names, garbage, count);
    ZS_LOCK(rt);
    rt->handing_over--;
    zs_publish_dying(rt);
    return zs_free_pending(rt) ? ZS_E_STALE : ZS_OK;
}

zs_status zs_hand_over_item(zs_runtime *rt, zs_ref ref, zs_item *it, bool *counted) {
    assert(it->flags & ZS_ITEM_HAS_CONJUGATE);
    uint64_t name;
    uint8_t garbage;
    take_item(it, &name, &garbage);
    return hand_over_batch(rt, &ref, &name, &garbage, 1, counted);
}

zs_status zs_gc_hand_over(zs_runtime *rt, uint32_t limit, bool *counted, uint32_t *out_taken) {
    uint32_t taken = 0;
    zs_status status = ZS_OK;
    if (zs_free_pending(rt)) return ZS_E_STALE; /* zs_runtime_free has begun */
    while (status == ZS_OK && taken < limit && rt->expiring.count > 0) {
        if (!zs_can_hand_over(rt)) {
            status = ZS_E_EXPIRY_PENDING;
            break;
        }
        /* Batches on the stack: running out of memory never stops a purge. */
        zs_ref objects[HAND_OVER_BATCH];
        uint64_t names[HAND_OVER_BATCH];
        uint8_t garbage[HAND_OVER_BATCH];
        uint32_t count = rt->expiring.count < limit - taken ? rt->expiring.count : limit - taken;
        if (count > HAND_OVER_BATCH) count = HAND_OVER_BATCH;
        take_expiring(rt, objects, names, garbage, count);
        status = hand_over_batch(rt, objects, names, garbage, count, counted);
        taken += count;
    }
    if (out_taken != NULL) *out_taken = taken;
    return status;
}

zs_status zs_gc_expire(zs_runtime *rt, uint32_t limit, uint32_t *out_taken) {
    if (out_taken == NULL) return ZS_E_INVALID;
    *out_taken = 0;
    bool counted = false;
    ZS_LOCK(rt);
    zs_status status = rt->expiry_handler == NULL                   ? ZS_E_INVALID
                       : rt->in_destroy_hook || rt->lock.depth != 1 ? ZS_E_BUSY
                                                                    : ZS_OK;
    if (status == ZS_OK) status = zs_gc_hand_over(rt, limit, &counted, out_taken);
    if (status == ZS_E_EXPIRY_PENDING) status = ZS_OK; /* the handler went meanwhile */
    ZS_UNLOCK(rt);
    if (counted) zs_call_leave(rt);
    return status;
}

uint32_t zs_gc_pending_purge(zs_runtime *rt) {
    ZS_LOCK(rt);
    uint32_t pending = rt->dying.count - rt->dying_cursor;
    ZS_UNLOCK(rt);
    return pending;
}

zs_status zs_gc_take_expiring_ex(zs_runtime *rt, zs_ref *buffer, uint64_t *names, uint8_t *garbage,
                                 uint32_t capacity, uint32_t *out_count) {
    if (out_count == NULL || (buffer == NULL && capacity > 0)) return ZS_E_INVALID;
    *out_count = 0;
    ZS_LOCK(rt);
    /* With a handler set, the list is the handler's: taking it here would
       let the purge free objects whose proxies nobody expires. */
    zs_status status = rt->expiry_handler != NULL ? ZS_E_BUSY : ZS_OK;
    if (status == ZS_OK) {
        uint32_t n = rt->expiring.count < capacity ? rt->expiring.count : capacity;
        take_expiring(rt, buffer, names, garbage, n);
        zs_publish_dying(rt);
        *out_count = n;
    }
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_gc_take_expiring(zs_runtime *rt, zs_ref *buffer, uint32_t capacity,
                              uint32_t *out_count) {
    return zs_gc_take_expiring_ex(rt, buffer, NULL, NULL, capacity, out_count);
}

const uint32_t *zs_dying_word(zs_runtime *rt) { return &rt->dying_word; }

uint32_t zs_gc_expiring_count(zs_runtime *rt) {
    ZS_LOCK(rt);
    uint32_t count = rt->expiring.count;
    ZS_UNLOCK(rt);
    return count;
}

/* Runtime teardown frees clusters with their objects. */
zs_status zs_collect_garbage(zs_runtime *rt) {
    bool done = false, counted = false;
    ZS_LOCK(rt);
    zs_status status = rt->in_destroy_hook || rt->handing_over > 0 ? ZS_E_BUSY : ZS_OK;
    /* A pending purge first (zs_gc_mark_and_gather would finish it, but
       could not hand its objects over with the lock taken twice). */
    if (status == ZS_OK) status = zs_gc_hand_over(rt, UINT32_MAX, &counted, NULL);
    if (status == ZS_OK || status == ZS_E_EXPIRY_PENDING) status = zs_gc_mark_and_gather(rt);
    if (status == ZS_OK) status = zs_gc_hand_over(rt, UINT32_MAX, &counted, NULL);
    if (status == ZS_OK || status == ZS_E_EXPIRY_PENDING)
        status = zs_gc_purge_locked(rt, 0, 0, &done);
    ZS_UNLOCK(rt);
    if (counted) zs_call_leave(rt);
    return status;
}

void zs_gc_get_stats(zs_runtime *rt, zs_gc_stats *out) {
    ZS_LOCK(rt);
    *out = rt->stats;
    ZS_UNLOCK(rt);
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

zs_status zs_gc_purge(zs_runtime *rt, uint64_t budget_ns, int *out_done) {
    return zs_gc_purge_bounded(rt, budget_ns, 0, out_done);
}
