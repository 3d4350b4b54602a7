/*
 * object_stores.c -- what the API changes in a live object, each write
 * checked (the holder and target usable, the member of the right kind) and
 * told to the collector (the write barrier, a cluster's dissolution): its
 * reference members and reference arrays, roots and strong references,
 * marking it as garbage and destroying it (zs_destroy_object), and the
 * questions about its flags.
 */
#include "internal.h"

/* ======================================================================
 * Reference stores
 * ====================================================================== */

/* Common checks of a store: holder usable, member of the wanted opcode,
   target null or usable. */
static zs_status prepare_store(zs_runtime *rt, zs_ref holder, uint32_t offset, zs_ref target,
                               bool array, zs_item **out_holder, zs_item **out_target,
                               uint32_t *out_op) {
    zs_status status = ZS_OK;
    if (rt->in_destroy_hook) return ZS_E_BUSY;
    zs_item *h = zs_usable_item(rt, holder, &status);
    if (h == NULL) return status;
    uint32_t op = zs_class_member_op(h->object->cls, offset);
    if (array ? zs_class_member_type(h->object->cls, offset) != rt->object_array_type
              : (op != ZS_OP_OBJECT && op != ZS_OP_WEAK))
        return ZS_E_INVALID;
    zs_item *t = NULL;
    if (target != ZS_NULL_REF && (t = zs_usable_item(rt, target, &status)) == NULL) return status;
    /* A cluster's summary of its members' references would go stale. */
    if (op != ZS_OP_WEAK && h->cluster_index >= 0) zs_cluster_dissolve(rt, h->cluster_index);
    if (op != ZS_OP_WEAK) zs_gc_barrier(rt, t);
    *out_holder = h;
    *out_target = t;
    *out_op = op;
    return ZS_OK;
}

zs_status zs_store_ref(zs_runtime *rt, zs_ref holder, uint32_t offset, zs_ref target) {
    zs_item *h = NULL, *t = NULL;
    uint32_t op = 0;
    ZS_LOCK(rt);
    zs_status status = prepare_store(rt, holder, offset, target, false, &h, &t, &op);
    if (status == ZS_OK && op == ZS_OP_OBJECT && !zs_note_escape(rt, h, t)) status = ZS_E_NOMEM;
    /* target was validated (live slot, matching serial): store it as is, without
       reading the target's object header (a cache miss per store). */
    if (status == ZS_OK) *(zs_ref *)((char *)h->object + offset) = t ? target : ZS_NULL_REF;
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_ref_array_push(zs_runtime *rt, zs_ref holder, uint32_t offset, zs_ref target) {
    zs_item *h = NULL, *t = NULL;
    uint32_t op = 0;
    ZS_LOCK(rt);
    zs_status status = prepare_store(rt, holder, offset, target, true, &h, &t, &op);
    if (status == ZS_OK && !zs_note_escape(rt, h, t)) status = ZS_E_NOMEM;
    if (status == ZS_OK) {
        zs_ref_array *array = (zs_ref_array *)((char *)h->object + offset);
        if (array->count == array->capacity) {
            uint32_t capacity = array->capacity ? array->capacity * 2 : 4;
            zs_ref *grown = capacity > array->capacity
                                ? zs_realloc(rt, array->data, array->capacity * sizeof(zs_ref),
                                             capacity * sizeof(zs_ref))
                                : NULL;
            if (grown == NULL) status = ZS_E_NOMEM;
            else {
                array->data = grown;
                array->capacity = capacity;
            }
        }
        if (status == ZS_OK) array->data[array->count++] = t ? target : ZS_NULL_REF;
    }
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_ref_array_clear(zs_runtime *rt, zs_ref holder, uint32_t offset) {
    zs_item *h = NULL, *t = NULL;
    uint32_t op = 0;
    ZS_LOCK(rt);
    zs_status status = prepare_store(rt, holder, offset, ZS_NULL_REF, true, &h, &t, &op);
    if (status == ZS_OK) ((zs_ref_array *)((char *)h->object + offset))->count = 0;
    ZS_UNLOCK(rt);
    return status;
}

/* ======================================================================
 * Roots, strong references, garbage
 * ====================================================================== */

/* Look up a usable item under the lock for a root-style mutation. */
#define WITH_ITEM(rt, ref, it, status, body)                                                       \
    do {                                                                                           \
        ZS_LOCK(rt);                                                                               \
        zs_item *it = NULL;                                                                        \
        if ((rt)->in_destroy_hook) (status) = ZS_E_BUSY;                                           \
        else if ((it = zs_usable_item((rt), (ref), &(status))) != NULL) {                          \
            body                                                                                   \
        }                                                                                          \
        ZS_UNLOCK(rt);                                                                             \
    } while (0)

zs_status zs_add_to_root(zs_runtime *rt, zs_ref ref) {
    zs_status status = ZS_OK;
    WITH_ITEM(rt, ref, it, status, {
        if (!zs_root_list_add(rt, it)) status = ZS_E_NOMEM;
        else {
            it->flags |= ZS_ITEM_ROOT;
            zs_gc_barrier(rt, it);
        }
    });
    return status;
}

zs_status zs_remove_from_root(zs_runtime *rt, zs_ref ref) {
    zs_status status = ZS_OK;
    WITH_ITEM(rt, ref, it, status, { it->flags &= ~ZS_ITEM_ROOT; });
    return status;
}

zs_status zs_add_strong_ref(zs_runtime *rt, zs_ref ref) {
    zs_status status = ZS_OK;
    WITH_ITEM(rt, ref, it, status, {
        if (it->strong_refs == UINT32_MAX) status = ZS_E_INVALID;
        else if (!zs_root_list_add(rt, it)) status = ZS_E_NOMEM;
        else {
            it->strong_refs++;
            zs_gc_barrier(rt, it);
        }
    });
    return status;
}

zs_status zs_release_strong_ref(zs_runtime *rt, zs_ref ref) {
    zs_status status = ZS_OK;
    WITH_ITEM(rt, ref, it, status, {
        if (it->strong_refs == 0) status = ZS_E_INVALID;
        else it->strong_refs--;
    });
    return status;
}

/* Mark a live item as garbage: the next mark kills references to it. */
static void mark_garbage(zs_runtime *rt, zs_item *it) {
    it->flags |= ZS_ITEM_GARBAGE;
    zs_filter_clear(rt->mark_filter, it->object->index); /* references to it get killed */
    if (it->cluster_index >= 0) zs_cluster_dissolve(rt, it->cluster_index);
}

zs_status zs_mark_as_garbage(zs_runtime *rt, zs_ref ref) {
    zs_status status = ZS_OK;
    WITH_ITEM(rt, ref, it, status, {
        if (it->flags & ZS_ITEM_PERMANENT) status = ZS_E_INVALID;
        else mark_garbage(rt, it);
    });
    return status;
}

/* Unreal's DestroyActor: garbage, no longer a root, refused from now on as
   a dying object is (zs_item_dying), its proxies expired before this
   returns; its memory goes with the next collection that finds it
   unreachable (its killable references are nulled by that collection's
   mark). Freeing it here would leave handles to it in objects the mark has
   not visited. */
zs_status zs_destroy_object(zs_runtime *rt, zs_ref ref) {
    bool counted = false;
    ZS_LOCK(rt);
    zs_status status = rt->in_destroy_hook ? ZS_E_BUSY : ZS_OK;
    zs_item *it = status == ZS_OK ? zs_usable_item(rt, ref, &status) : NULL;
    if (it != NULL && (it->flags & ZS_ITEM_PERMANENT)) {
        status = ZS_E_INVALID;
        it = NULL;
    }
    if (it != NULL) {
        mark_garbage(rt, it);
        it->flags |= ZS_ITEM_DESTROYED;
        it->flags &= ~ZS_ITEM_ROOT; /* a destroyed root would never be freed */
        /* Without a handler now (none set, or the lock taken twice), its
           proxies expire with the collection that frees it, as any dying
           object's do. */
        if ((it->flags & ZS_ITEM_HAS_CONJUGATE) && zs_can_hand_over(rt) && !zs_free_pending(rt))
            status = zs_hand_over_item(rt, ref, it, &counted);
    }
    ZS_UNLOCK(rt);
    if (counted) zs_call_leave(rt);
    return status;
}

/* Read one flag-derived fact of a live item. */
static zs_status query(zs_runtime *rt, zs_ref ref, int *out, uint32_t what) {
    if (out == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_item *it = zs_item_of(rt, ref);
    if (it != NULL) *out = what == 0 ? (int)it->strong_refs : (it->flags & what) != 0;
    ZS_UNLOCK(rt);
    return it ? ZS_OK : ZS_E_STALE;
}

zs_status zs_is_rooted(zs_runtime *rt, zs_ref ref, int *out) {
    return query(rt, ref, out, ZS_ITEM_ROOT);
}
zs_status zs_is_garbage(zs_runtime *rt, zs_ref ref, int *out) {
    return query(rt, ref, out, ZS_ITEM_GARBAGE);
}
zs_status zs_is_permanent(zs_runtime *rt, zs_ref ref, int *out) {
    return query(rt, ref, out, ZS_ITEM_PERMANENT);
}

zs_status zs_strong_ref_count(zs_runtime *rt, zs_ref ref, uint32_t *out) {
    int count = 0;
    zs_status status = query(rt, ref, &count, 0);
    if (status == ZS_OK && out != NULL) *out = (uint32_t)count;
    return status;
}
