/*
 * value_stores.c -- writes of values into native memory: the checks every
 * mutating value and container call makes first (zs_begin_store), what a
 * write does after (sanitise, barrier, escape), and the value calls of the
 * API that write (assign, clear, store a reference, assign a string).
 *
 * Invariant relied on here: strong references inside values are live (or
 * null): the collector traces them, and copies from black values that are
 * not roots (where a reference may have gone stale) are sanitised on the
 * way in.
 */
#include "internal.h"

#include <string.h>

/* ======================================================================
 * After a write: sanitising and the barrier
 * ====================================================================== */

/* Copies from non-root black values may carry references to objects that
   died meanwhile: null them rather than plant a dangling handle. */
static void sanitise_one(void *context, zs_ref *slot, bool killable) {
    (void)killable;
    zs_runtime *rt = context;
    if (*slot == ZS_NULL_REF) return;
    zs_item *it = zs_item_of(rt, *slot);
    if (it == NULL || zs_item_dying(rt, it)) *slot = ZS_NULL_REF;
}

/* sanitise_one on one slot; true when it nulled the reference. */
static bool sanitise_ref(zs_runtime *rt, zs_ref *slot) {
    zs_ref before = *slot;
    sanitise_one(rt, slot, false);
    return *slot != before;
}

/* sanitise_one over every strong reference of a value; true when one was
   nulled. A set element or map key that changes belongs in another bucket,
   and may now equal another one: its set or map is re-indexed, duplicates
   dropped (zs_hash_reindex). */
static bool sanitise(zs_runtime *rt, const zs_type *type, void *value) {
    if (!(type->flags & ZS_TYPE_HAS_REFS)) return false;
    bool changed = false;
    switch (type->kind) {
    case ZS_TYPE_OBJECT:
        return sanitise_ref(rt, value);
    case ZS_TYPE_STRUCT:
        for (uint32_t i = 0; i < type->schema.strong_count; i++) {
            char *member = (char *)value + (type->schema.words[i] >> ZS_OP_SHIFT);
            if ((type->schema.words[i] & ZS_OP_MASK) == ZS_OP_OBJECT)
                changed |= sanitise_ref(rt, (zs_ref *)member);
            else changed |= sanitise(rt, type->schema.types[i], member);
        }
        return changed;
    case ZS_TYPE_ARRAY: {
        zs_array *array = value;
        for (uint32_t i = 0; i < array->count; i++)
            changed |= sanitise(rt, type->element,
                                (char *)array->data + (size_t)i * type->entry_size);
        return changed;
    }
    case ZS_TYPE_SET:
    case ZS_TYPE_MAP: {
        zs_hash *hash = value;
        bool keys = false;
        for (uint32_t i = 0; i < hash->entries.count; i++) {
            char *entry = (char *)hash->entries.data + (size_t)i * type->entry_size;
            keys |= sanitise(rt, type->element, entry);
            if (type->value != NULL)
                changed |= sanitise(rt, type->value, entry + type->value_offset);
        }
        if (keys) zs_hash_reindex(rt, type, hash);
        return changed || keys;
    }
    case ZS_TYPE_OPTIONAL:
        return ((uint8_t *)value)[type->value_offset] && sanitise(rt, type->element, value);
    default:
        return false;
    }
}

/* One reference slot through the write barrier (only called while marking;
   a null slot is counted as work too, so the count is the slots looked at). */
static void barrier_one(void *context, zs_ref *slot, bool killable) {
    (void)killable;
    zs_runtime *rt = context;
    if (*slot != ZS_NULL_REF) zs_gc_barrier(rt, zs_item_of(rt, *slot));
    else rt->stats.barrier_slots++;
}

/* Every reference inside a value through the write barrier (see internal.h). */
void zs_value_barrier(zs_runtime *rt, const zs_type *type, const void *value) {
    if (rt->phase != ZS_GC_MARKING || !(type->flags & ZS_TYPE_HAS_REFS)) return;
    zs_value_for_each_ref(type, (void *)value, false, barrier_one, rt);
}

/* The references of the entries a store wrote through the barrier (see internal.h). */
void zs_entries_barrier(zs_runtime *rt, const zs_type *type, zs_array *entries, uint32_t first,
                        uint32_t count) {
    if (rt->phase != ZS_GC_MARKING || !(type->flags & ZS_TYPE_HAS_REFS)) return;
    zs_entries_for_each_ref(type, entries, first, count, barrier_one, rt);
}

/* ======================================================================
 * Assignment and stores
 * ====================================================================== */

/* Answer zs_check_owner under the lock, for plain-data writes the managed side makes itself. */
zs_status zs_object_writable(zs_runtime *rt, zs_ref owner) {
    ZS_LOCK(rt);
    zs_status status = zs_check_owner(rt, owner);
    ZS_UNLOCK(rt);
    return status;
}

/* Common prologue of every mutating value and container call (see internal.h). */
zs_status zs_begin_store(zs_runtime *rt, zs_ref owner, const zs_type *type, uint32_t kind) {
    if (rt->in_destroy_hook) return ZS_E_BUSY;
    if (!zs_type_valid(rt, type) || (kind != 0 && type->kind != kind)) return ZS_E_INVALID;
    zs_status status = zs_check_owner(rt, owner);
    if (status != ZS_OK || owner == ZS_NULL_REF) return status;
    zs_item *it = zs_item_of(rt, owner);
    assert(it != NULL);
    /* A permanent owner taking references is scanned as a root from then
       on (end_store, written): list it before anything is written, so that
       running out of memory refuses the write instead of leaving its new
       references unscanned (as zs_store_ref does, zs_note_escape). */
    if ((it->flags & ZS_ITEM_PERMANENT) && (type->flags & ZS_TYPE_HAS_REFS) &&
        !zs_root_list_add(rt, it))
        return ZS_E_NOMEM;
    if (it->cluster_index >= 0 && (type->flags & ZS_TYPE_HAS_REFS))
        zs_cluster_dissolve(rt, it->cluster_index);
    return ZS_OK;
}

/* References of `type` were written into owner: a permanent owner escapes
   (scanned as a root from then on; zs_begin_store listed it already). */
void zs_escape_owner(zs_runtime *rt, zs_ref owner, const zs_type *type) {
    if (!(type->flags & ZS_TYPE_HAS_REFS)) return;
    zs_item *it = owner ? zs_item_of(rt, owner) : NULL;
    if (it != NULL && (it->flags & ZS_ITEM_PERMANENT) && zs_root_list_add(rt, it)) {
        it->flags |= ZS_ITEM_ESCAPED;
        it->flags &= ~ZS_ITEM_LEAF;
    }
}

/* After new contents were written: clean references, mark them if a mark
   is pending, escape a permanent owner. */
static void end_store(zs_runtime *rt, zs_ref owner, const zs_type *type, void *value) {
    if (!(type->flags & ZS_TYPE_HAS_REFS)) return;
    sanitise(rt, type, value);
    zs_value_barrier(rt, type, value);
    zs_escape_owner(rt, owner, type);
}

zs_status zs_value_assign(zs_runtime *rt, zs_ref owner, const zs_type *type, void *dst,
                          const void *src) {
    if (dst == NULL || src == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = zs_begin_store(rt, owner, type, 0);
    if (status == ZS_OK && dst != src) {
        void *copy = zs_alloc(rt, type->size);
        if (copy == NULL || !zs_value_copy(rt, type, copy, src)) {
            status = ZS_E_NOMEM;
        } else {
            zs_value_destroy(rt, type, dst);
            memcpy(dst, copy, type->size);
            end_store(rt, owner, type, dst);
        }
        zs_free(rt, copy, copy ? type->size : 0);
    }
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_value_clear(zs_runtime *rt, zs_ref owner, const zs_type *type, void *value) {
    if (value == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = zs_begin_store(rt, owner, type, 0);
    if (status == ZS_OK) zs_value_destroy(rt, type, value);
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_value_store_ref(zs_runtime *rt, zs_ref owner, const zs_type *slot_type, zs_ref *slot,
                             zs_ref target) {
    if (slot == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = zs_begin_store(rt, owner, slot_type, 0);
    if (status == ZS_OK && slot_type->kind != ZS_TYPE_OBJECT &&
        slot_type->kind != ZS_TYPE_WEAK_OBJECT)
        status = ZS_E_INVALID;
    zs_item *it = NULL;
    if (status == ZS_OK && target != ZS_NULL_REF) it = zs_usable_item(rt, target, &status);
    if (status == ZS_OK) {
        *slot = it ? zs_item_ref(it) : ZS_NULL_REF;
        end_store(rt, owner, slot_type, slot);
    }
    ZS_UNLOCK(rt);
    return status;
}

/* ======================================================================
 * Strings
 * ====================================================================== */

/* Replace a string's contents: refused, like every value store, when its owner is dying. */
zs_status zs_string_assign(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_string *string,
                           const void *units, uint32_t length) {
    if (string == NULL || (units == NULL && length > 0)) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = length > (1u << 30) ? ZS_E_INVALID
                                           : zs_begin_store(rt, owner, type, ZS_TYPE_STRING);
    if (status == ZS_OK && length > string->capacity) {
        void *grown = zs_realloc(rt, string->data, (size_t)string->capacity * type->unit,
                                 (size_t)length * type->unit);
        if (grown == NULL) status = ZS_E_NOMEM;
        else {
            string->data = grown;
            string->capacity = length;
        }
    }
    if (status == ZS_OK) {
        /* units may be part of this very string (a substring of it). */
        if (length > 0) memmove(string->data, units, (size_t)length * type->unit);
        string->length = length;
    }
    ZS_UNLOCK(rt);
    return status;
}
