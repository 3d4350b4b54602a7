/*
 * expiry.c -- the hand-over of dying objects to the managed side, which
 * expires their conjugates before the purge may free them: the expiry
 * handler (set, called on batches of the expiring list with the lock
 * released and the call counted in, or on one object zs_destroy_object
 * destroys), the expiring list taken by hand without a handler, and the
 * dying word the managed side reads with no lock.
 */
#include "internal.h"

/* How far ahead taking the expiring list asks for a dying object's name. */
#define TAKE_PREFETCH 16u

/* Objects handed to the expiry handler per call. */
#define HAND_OVER_BATCH 256u

/* Set or remove the expiry handler; only the side that set it may (zs_expiry_owner). */
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

/* The word the managed side reads with no lock (zs_publish_dying keeps it). */
const uint32_t *zs_dying_word(zs_runtime *rt) { return &rt->dying_word; }

uint32_t zs_gc_expiring_count(zs_runtime *rt) {
    ZS_LOCK(rt);
    uint32_t count = rt->expiring.count;
    ZS_UNLOCK(rt);
    return count;
}
