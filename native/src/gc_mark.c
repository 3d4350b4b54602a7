/*
 * gc_mark.c -- reachability: the reachable-flag swap, root marking and the
 * schema-driven worklist marker, with killable-reference nulling.
 *
 * Invariants relied on here:
 *  - Outside a collection every live, non-dying item carries the current
 *    mark (survivors were marked, new objects are born marked), so flipping
 *    rt->mark_parity makes all of them "maybe unreachable" in O(1).
 *  - A strong reference held by a live object always names a live slot with
 *    the right serial (the whole unreachable set dies together, and killable
 *    references to garbage are nulled while marking).
 *  - Permanent objects are never marked nor scanned, unless ESCAPED.
 */
#include "internal.h"

/* Mark an item and queue it for scanning unless it has nothing to scan. If
   the stack cannot grow the item stays marked but unscanned, and
   rt_overflow tells the caller to rescan marked objects afterwards. */
static inline void mark_item(zs_runtime *rt, zs_item *it, uint32_t index, bool *overflow) {
    item_set_marked(rt, it);
    rt->stats.objects_marked++;
    if ((it->flags & ZS_ITEM_LEAF) == 0 && !zs_u32_push(rt, &rt->mark_stack, index))
        *overflow = true;
}

/* Follow one reference. Killable slots pointing at garbage are nulled. */
static inline void visit(zs_runtime *rt, zs_ref *slot, bool killable, bool *overflow) {
    zs_ref ref = *slot;
    if (ref == ZS_NULL_REF) return;
    uint32_t index = ZS_REF_INDEX(ref);
    zs_item *it = zs_item_at(rt, index);
    assert(it->object != NULL && it->serial == ZS_REF_SERIAL(ref));
    if (it->flags & ZS_ITEM_PERMANENT) return;
    if (killable && (it->flags & ZS_ITEM_GARBAGE)) {
        *slot = ZS_NULL_REF;
        rt->stats.references_killed++;
        return;
    }
    if (!item_is_marked(rt, it)) mark_item(rt, it, index, overflow);
}

/* Read every strong reference of one object by interpreting its class's
   schema stream: a flat loop, no recursion, no calls through pointers. */
static void scan_object(zs_runtime *rt, zs_object *object, bool *overflow) {
    const zs_class *cls = object->cls;
    char *base = (char *)object;
    rt->stats.objects_scanned++;
    visit(rt, &object->outer, false, overflow);
    for (uint32_t i = 0; i < cls->strong_count; i++) {
        uint32_t word = cls->schema[i];
        char *member = base + (word >> ZS_OP_SHIFT);
        switch (word & ZS_OP_MASK) {
        case ZS_OP_OBJECT:
            visit(rt, (zs_ref *)member, true, overflow);
            break;
        case ZS_OP_OBJECT_ARRAY: {
            zs_ref_array *array = (zs_ref_array *)member;
            for (uint32_t e = 0; e < array->count; e++) visit(rt, &array->data[e], true, overflow);
            break;
        }
        default:
            assert(!"weak words sort after strong_count");
        }
    }
}

/* Drain the mark stack; after an overflow, rescan every marked object until
   a pass completes without one (correct, only slower). */
static void drain(zs_runtime *rt, bool overflow) {
    for (;;) {
        while (rt->mark_stack.count > 0) {
            uint32_t index = rt->mark_stack.data[--rt->mark_stack.count];
            scan_object(rt, zs_item_at(rt, index)->object, &overflow);
        }
        if (!overflow) return;
        overflow = false;
        for (uint32_t index = 0; index < rt->high_water; index++) {
            zs_item *it = zs_item_at(rt, index);
            if (it->object == NULL || (it->flags & ZS_ITEM_LEAF)) continue;
            bool scannable = (it->flags & ZS_ITEM_PERMANENT) ? (it->flags & ZS_ITEM_ESCAPED) != 0
                                                              : item_is_marked(rt, it);
            if (scannable) scan_object(rt, it->object, &overflow);
        }
    }
}

/* Mark the root candidates, dropping list entries that are no longer roots. */
static bool mark_roots(zs_runtime *rt) {
    bool overflow = false;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < rt->root_list.count; i++) {
        uint32_t index = rt->root_list.data[i];
        zs_item *it = zs_item_at(rt, index);
        assert(it->object != NULL && (it->flags & ZS_ITEM_IN_ROOT_LIST));
        if (!item_is_root(it)) {
            it->flags &= ~ZS_ITEM_IN_ROOT_LIST;
            continue;
        }
        rt->root_list.data[kept++] = index;
        if (it->flags & ZS_ITEM_PERMANENT) {
            if (!zs_u32_push(rt, &rt->mark_stack, index)) overflow = true;
        } else if (!item_is_marked(rt, it)) {
            mark_item(rt, it, index, &overflow);
        }
    }
    rt->root_list.count = kept;
    rt->stats.roots = kept;
    return overflow;
}

/* Flip the parity and mark everything reachable from the roots. */
static void mark(zs_runtime *rt) {
    rt->mark_parity ^= ZS_ITEM_MARK;
    rt->mark_stack.count = 0;
    drain(rt, mark_roots(rt));
}

/* One sequential pass: every live, non-permanent, unmarked item is dying.
   An object we cannot record (out of memory) simply survives this cycle. */
static void gather(zs_runtime *rt) {
    for (uint32_t index = 0; index < rt->high_water; index++) {
        zs_item *it = zs_item_at(rt, index);
        if (it->object == NULL || (it->flags & ZS_ITEM_PERMANENT) || item_is_marked(rt, it))
            continue;
        assert(!item_is_root(it) && !(it->flags & ZS_ITEM_IN_ROOT_LIST));
        if (!zs_u32_push(rt, &rt->dying, index)) {
            item_set_marked(rt, it);
            continue;
        }
        if ((it->flags & ZS_ITEM_HAS_CONJUGATE) && !zs_ref_push(rt, &rt->expiring, zs_item_ref(it))) {
            rt->dying.count--;
            item_set_marked(rt, it);
            continue;
        }
        it->flags |= ZS_ITEM_DYING;
    }
    rt->stats.objects_unreachable = rt->dying.count;
}

zs_status zs_gc_mark_and_gather(zs_runtime *rt) {
    ZS_LOCK(rt);
    zs_status status = ZS_OK;
    if (rt->in_destroy_hook || rt->collecting) {
        status = ZS_E_BUSY;
        goto done;
    }
    /* A new cycle first finishes the previous cycle's purge. */
    bool purged = true;
    if (rt->dying.count > 0 && (status = zs_gc_purge_locked(rt, 0, &purged)) != ZS_OK) goto done;
    assert(purged && rt->dying.count == 0);
    rt->collecting = true;
    uint64_t cycle = rt->stats.cycle;
    rt->stats = (zs_gc_stats){0};
    rt->stats.cycle = cycle + 1;
    rt->stats.permanent_objects = rt->permanent_count;
    uint64_t t0 = zs_now_ns();
    mark(rt);
    uint64_t t1 = zs_now_ns();
    gather(rt);
    rt->stats.mark_ns = t1 - t0;
    rt->stats.gather_ns = zs_now_ns() - t1;
    rt->stats.live_objects = rt->live_objects;
    rt->collecting = false;
done:
    ZS_UNLOCK(rt);
    return status;
}

void zs_gc_release(zs_runtime *rt) {
    zs_u32_release(rt, &rt->mark_stack);
    zs_u32_release(rt, &rt->dying);
    zs_ref_release(rt, &rt->expiring);
    rt->dying_cursor = 0;
}
