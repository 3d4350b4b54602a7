/*
 * calls.c -- calls from the native side into the managed one. A native host
 * calls an overridable function of an object by name (Unreal's
 * ProcessEvent), with a parameter block laid out as the managed side
 * declares that function; the managed side registered one handler per
 * runtime to run it.
 *
 * With no handler (no managed side), the native entry the object's class
 * describes for the function runs instead (zs_find_function); zs_call_native
 * calls such an entry directly, as a call in progress too.
 *
 * The runtime lock is never held across the handler: the managed function
 * may use the whole API, from this thread or by waiting on another one that
 * needs the lock. So nothing read under the lock is trusted after the
 * handler returns: zs_call_each keeps handles, never pointers, and resolves
 * each one again (index and serial) just before its call. The runtime
 * itself stays: zs_runtime_free from inside a call (the managed function
 * closed its runtime) only marks it, and the last call to return frees it.
 */
#include "internal.h"

#include <stdlib.h>

void zs_set_call_handler(zs_runtime *rt, zs_call_handler handler, void *user) {
    ZS_LOCK(rt);
    rt->call_handler = handler;
    rt->call_handler_user = user;
    ZS_UNLOCK(rt);
}

uint32_t zs_calls_in_progress(zs_runtime *rt) {
    ZS_LOCK(rt);
    uint32_t calls = rt->calls_in_progress;
    ZS_UNLOCK(rt);
    return calls;
}

/* Whether calls may start now; with the lock held. A runtime without a
   handler still calls the native entries of described functions. */
static zs_status may_call(const zs_runtime *rt) { return rt->in_destroy_hook ? ZS_E_BUSY : ZS_OK; }

/* Count a call in; with the lock held. */
static void enter_call(zs_runtime *rt) { rt->calls_in_progress++; }

/* Count a call out, and free the runtime if zs_runtime_free ran during the
   calls and this was the last one. Takes the lock; rt may be gone after. */
static void leave_call(zs_runtime *rt) {
    ZS_LOCK(rt);
    assert(rt->calls_in_progress > 0);
    bool free_now = --rt->calls_in_progress == 0 && rt->free_pending;
    ZS_UNLOCK(rt);
    if (free_now) zs_runtime_free(rt);
}

/* Call the handler on one object if it is still live and not dying; with
   no handler, the native entry its class describes for the function. The
   caller has counted itself in calls_in_progress. */
static zs_status call_one(zs_runtime *rt, zs_ref object, const char *function, void *params) {
    ZS_LOCK(rt);
    zs_status status = may_call(rt);
    if (status == ZS_OK && rt->free_pending) status = ZS_E_STALE;
    const zs_item *item = status == ZS_OK ? zs_usable_item(rt, object, &status) : NULL;
    zs_call_handler handler = rt->call_handler;
    void *user = rt->call_handler_user;
    const zs_function_desc *native = NULL;
    if (status == ZS_OK && handler == NULL &&
        zs_find_function(item->object->cls, function, &native) != ZS_OK)
        status = ZS_E_INVALID;
    ZS_UNLOCK(rt);
    if (status != ZS_OK) return status;
    if (handler == NULL) /* an event nobody implements does nothing */
        return native->entry != NULL ? native->entry(native->user, rt, object, params) : ZS_OK;
    return handler(user, rt, object, function, params);
}
zs_status zs_call_function(zs_runtime *rt, zs_ref object, const char *function, void *params) {
    if (function == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    /* A call refused outright is not counted in: counting it out could be
       the last leave_call of a deferred free, which would free the runtime
       again from inside its own teardown (a destroy hook calling here). */
    zs_status status = may_call(rt);
    if (status == ZS_OK) enter_call(rt);
    ZS_UNLOCK(rt);
    if (status != ZS_OK) return status;
    status = call_one(rt, object, function, params);
    leave_call(rt);
    return status;
}

/* Whether the item in slot `index` is a live object of cls (subclasses
   included), neither dying nor marked as garbage. */
static bool callable_object(const zs_runtime *rt, uint32_t index, const zs_class *cls) {
    const zs_item *it = zs_item_at(rt, index);
    return it->object != NULL && !(it->flags & ZS_ITEM_GARBAGE) && !zs_item_dying(rt, it) &&
           zs_class_is_a(it->object->cls, cls);
}

/* The handles of the live, not dying objects of cls (subclasses included),
   in slot order; NULL when out of memory. */
static zs_ref *objects_of(zs_runtime *rt, const zs_class *cls, uint32_t *out_count) {
    uint32_t count = 0;
    for (uint32_t index = 0; index < rt->high_water; index++)
        count += callable_object(rt, index, cls);
    zs_ref *refs = malloc((count ? count : 1) * sizeof *refs);
    if (refs == NULL) return NULL;
    uint32_t filled = 0;
    for (uint32_t index = 0; index < rt->high_water && filled < count; index++)
        if (callable_object(rt, index, cls)) refs[filled++] = zs_item_ref(zs_item_at(rt, index));
    *out_count = filled;
    return refs;
}

zs_status zs_call_each(zs_runtime *rt, const zs_class *cls, const char *function, void *params,
                       uint32_t *out_called) {
    if (out_called != NULL) *out_called = 0;
    if (cls == NULL || function == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = may_call(rt);
    if (status == ZS_OK && (cls->head.id >= rt->class_count || rt->classes[cls->head.id] != cls))
        status = ZS_E_INVALID; /* not a class of this runtime */
    uint32_t count = 0;
    zs_ref *refs = status == ZS_OK ? objects_of(rt, cls, &count) : NULL;
    if (status == ZS_OK && refs == NULL) status = ZS_E_NOMEM;
    if (status == ZS_OK) enter_call(rt);
    ZS_UNLOCK(rt);
    if (status != ZS_OK) return status;
    zs_status first_failure = ZS_OK;
    uint32_t called = 0;
    for (uint32_t i = 0; i < count; i++) {
        ZS_LOCK(rt);
        const zs_item *marked = zs_item_of(rt, refs[i]);
        bool skip = marked != NULL && (marked->flags & ZS_ITEM_GARBAGE);
        ZS_UNLOCK(rt);
        if (skip) continue; /* marked as garbage by an earlier call */
        zs_status one = call_one(rt, refs[i], function, params);
        if (one == ZS_E_STALE || one == ZS_E_DYING) continue; /* destroyed by an earlier call */
        called++;
        if (one != ZS_OK && first_failure == ZS_OK) first_failure = one;
    }
    free(refs);
    leave_call(rt);
    if (out_called != NULL) *out_called = called;
    return first_failure;
}

zs_status zs_call_native(zs_runtime *rt, zs_native_function entry, void *user, zs_ref self,
                         void *params) {
    if (entry == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = may_call(rt);
    if (status == ZS_OK && rt->free_pending) status = ZS_E_STALE;
    if (status == ZS_OK && self != ZS_NULL_REF) zs_usable_item(rt, self, &status);
    if (status == ZS_OK) enter_call(rt);
    ZS_UNLOCK(rt);
    if (status != ZS_OK) return status;
    status = entry(user, rt, self, params);
    leave_call(rt);
    return status;
}
