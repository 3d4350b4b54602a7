/*
 * delegates.c -- delegate bindings: the callables they reference (counted
 * here, owned by the managed side), the destroy and copy of single-cast
 * bindings and binding lists (called from value_ops.c for every delegate
 * value), and the structural operations on them (set, add, remove).
 *
 * Invariant: every non-zero callable id stored in a live binding holds one
 * count in rt->callable_refs; an id whose count drops to zero is listed in
 * rt->released_callables until the managed side takes it, which it cannot
 * while a broadcast runs (rt->broadcasts).
 */
#include "internal.h"

#include <string.h>

/* ======================================================================
 * Callables referenced by delegate bindings
 * ====================================================================== */

/* Take one more reference to a callable id (0: none, nothing to do); false
   when out of memory or its count would overflow. */
static bool callable_retain(zs_runtime *rt, uint32_t callable) {
    if (callable == 0) return true;
    if (callable >= rt->callable_capacity) {
        uint32_t capacity = rt->callable_capacity ? rt->callable_capacity : 64;
        while (capacity <= callable) {
            if (capacity > UINT32_MAX / 2) return false;
            capacity *= 2;
        }
        uint32_t *grown = zs_realloc(rt, rt->callable_refs,
                                     rt->callable_capacity * sizeof(uint32_t),
                                     capacity * sizeof(uint32_t));
        if (grown == NULL) return false;
        rt->callable_refs = grown;
        rt->callable_capacity = capacity;
    }
    if (rt->callable_refs[callable] == UINT32_MAX) return false;
    rt->callable_refs[callable]++;
    return true;
}

/* Drop one reference to a callable id; at zero it is listed for the managed
   side to take (zs_take_released_callables). Unknown ids are ignored. */
static void callable_release(zs_runtime *rt, uint32_t callable) {
    if (callable == 0 || callable >= rt->callable_capacity || rt->callable_refs[callable] == 0)
        return;
    if (--rt->callable_refs[callable] == 0 && !zs_u32_push(rt, &rt->released_callables, callable)) {
        /* Out of memory: the managed side keeps the callable (a leak, not a crash). */
    }
}

/* Release a binding's callable and zero the binding. */
void zs_binding_drop(zs_runtime *rt, zs_binding *binding) {
    callable_release(rt, binding->callable);
    memset(binding, 0, sizeof *binding);
}

/* The public retain: ZS_E_INVALID for id 0. */
zs_status zs_callable_retain(zs_runtime *rt, uint32_t callable) {
    ZS_LOCK(rt);
    zs_status status = callable == 0                   ? ZS_E_INVALID
                       : callable_retain(rt, callable) ? ZS_OK
                                                       : ZS_E_NOMEM;
    ZS_UNLOCK(rt);
    return status;
}

/* The public release: ZS_E_INVALID for an id nobody holds. */
zs_status zs_callable_release(zs_runtime *rt, uint32_t callable) {
    ZS_LOCK(rt);
    zs_status status = callable != 0 && callable < rt->callable_capacity &&
                               rt->callable_refs[callable]
                           ? ZS_OK
                           : ZS_E_INVALID;
    if (status == ZS_OK) callable_release(rt, callable);
    ZS_UNLOCK(rt);
    return status;
}

/* Hand the managed side the ids no binding holds any more, so it can drop
   their callables; none while a broadcast runs (broadcast.c copied ids that
   a listener may unbind: each stays the managed side's until it ends). */
zs_status zs_take_released_callables(zs_runtime *rt, uint32_t *buffer, uint32_t capacity,
                                     uint32_t *out_count) {
    if (out_count == NULL || (buffer == NULL && capacity > 0)) return ZS_E_INVALID;
    ZS_LOCK(rt);
    uint32_t n = 0;
    while (rt->broadcasts == 0 && n < capacity && rt->released_callables.count > 0) {
        uint32_t callable = rt->released_callables.data[--rt->released_callables.count];
        /* Retained again since it was listed: still in use. */
        if (rt->callable_refs[callable] == 0) buffer[n++] = callable;
    }
    *out_count = n;
    ZS_UNLOCK(rt);
    return ZS_OK;
}

/* ======================================================================
 * Destroy and copy (value_ops.c, for DELEGATE, MULTICAST and SPARSE values)
 * ====================================================================== */

/* Release every binding of a binding list and free its storage (the list
   header itself belongs to the caller). */
void zs_bindings_destroy(zs_runtime *rt, zs_array *array) {
    zs_binding *bindings = array->data;
    for (uint32_t i = 0; i < array->count; i++) callable_release(rt, bindings[i].callable);
    zs_free(rt, array->data, (size_t)array->capacity * sizeof(zs_binding));
}

/* Copy a single-cast binding, retaining its callable; false (dst untouched)
   when the callable cannot be retained. */
bool zs_binding_copy(zs_runtime *rt, zs_binding *dst, const zs_binding *src) {
    if (!callable_retain(rt, src->callable)) return false;
    *dst = *src;
    return true;
}

/* Copy a binding list into an empty one, retaining every callable; on
   failure dst holds the bindings copied so far (the caller destroys it). */
bool zs_bindings_copy(zs_runtime *rt, zs_array *dst, const zs_array *src) {
    if (src->count == 0) return true;
    dst->data = zs_alloc(rt, (size_t)src->count * sizeof(zs_binding));
    if (dst->data == NULL) return false;
    dst->capacity = src->count;
    const zs_binding *from = src->data;
    zs_binding *to = dst->data;
    for (uint32_t i = 0; i < src->count; i++) {
        if (!callable_retain(rt, from[i].callable)) return false;
        to[i] = from[i];
        dst->count = i + 1;
    }
    return true;
}

/* ======================================================================
 * Structural operations
 * ====================================================================== */

/* Replace a single-cast binding; refused when its owner is dying. */
zs_status zs_binding_set(zs_runtime *rt, zs_ref owner, zs_binding *binding, zs_ref object,
                         uint32_t function_name, uint32_t callable) {
    if (binding == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = zs_check_owner(rt, owner);
    if (status == ZS_OK && object != ZS_NULL_REF && function_name >= rt->names.count)
        status = ZS_E_INVALID;
    if (status == ZS_OK && callable != 0 && zs_callable_retain(rt, callable) != ZS_OK)
        status = ZS_E_NOMEM;
    if (status == ZS_OK) {
        zs_binding_drop(rt, binding);
        binding->object = object;
        binding->function_name = object != ZS_NULL_REF ? function_name : 0;
        binding->callable = callable;
    }
    ZS_UNLOCK(rt);
    return status;
}

/* A sparse delegate's binding list; asking to create it is a write (refused
   when the owner is dying, even if the list exists already). */
zs_status zs_sparse_bindings(zs_runtime *rt, zs_ref owner, void *sparse, int create,
                             zs_array **out) {
    if (sparse == NULL || out == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_array **slot = sparse;
    zs_status status = create ? zs_check_owner(rt, owner) : ZS_OK;
    if (status == ZS_OK && *slot == NULL && create &&
        (*slot = zs_alloc(rt, sizeof(zs_array))) == NULL)
        status = ZS_E_NOMEM;
    *out = status == ZS_OK ? *slot : NULL;
    ZS_UNLOCK(rt);
    return status;
}

/* Append a binding to a binding list; refused when its owner is dying. */
zs_status zs_multicast_add(zs_runtime *rt, zs_ref owner, zs_array *bindings, zs_ref object,
                           uint32_t function_name, uint32_t callable) {
    if (bindings == NULL || (object == ZS_NULL_REF) == (callable == 0)) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = zs_check_owner(rt, owner);
    if (status == ZS_OK && object != ZS_NULL_REF && function_name >= rt->names.count)
        status = ZS_E_INVALID;
    if (status == ZS_OK && bindings->count >= ZS_MAX_ENTRIES) status = ZS_E_INVALID;
    if (status == ZS_OK &&
        !zs_entries_reserve(rt, bindings, sizeof(zs_binding), bindings->count + 1))
        status = ZS_E_NOMEM;
    if (status == ZS_OK && callable != 0 && zs_callable_retain(rt, callable) != ZS_OK)
        status = ZS_E_NOMEM;
    if (status == ZS_OK) {
        zs_binding *slot = (zs_binding *)bindings->data + bindings->count;
        slot->object = object;
        slot->function_name = object != ZS_NULL_REF ? function_name : 0;
        slot->callable = callable;
        bindings->count++;
    }
    ZS_UNLOCK(rt);
    return status;
}

/* Remove bindings from a binding list, keeping the order; refused when its owner is dying. */
zs_status zs_multicast_remove(zs_runtime *rt, zs_ref owner, zs_array *bindings, uint32_t index,
                              uint32_t count) {
    if (bindings == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = zs_check_owner(rt, owner);
    if (status == ZS_OK && (index > bindings->count || count > bindings->count - index))
        status = ZS_E_INVALID;
    if (status == ZS_OK && count > 0) {
        zs_binding *base = bindings->data;
        for (uint32_t i = 0; i < count; i++) zs_binding_drop(rt, &base[index + i]);
        memmove(base + index, base + index + count,
                (size_t)(bindings->count - index - count) * sizeof *base);
        bindings->count -= count;
        memset(base + bindings->count, 0, (size_t)count * sizeof *base);
    }
    ZS_UNLOCK(rt);
    return status;
}
