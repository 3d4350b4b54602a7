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
 *
 * A call is counted in under the lock, with its checks (one critical
 * section), and out with one atomic decrement and no lock: the count and
 * the deferred-free flag share one word (calls_word), so exactly one side
 * frees the runtime, and a call that is not the last never touches it
 * again.
 */
#include "internal.h"

#include <stdlib.h>

void zs_set_call_handler(zs_runtime *rt, zs_call_handler handler, void *user) {
    ZS_LOCK(rt);
    rt->call_handler = handler;
    rt->managed_call_handler = NULL;
    rt->call_handler_user = user;
    ZS_UNLOCK(rt);
}

void zs_set_managed_call_handler(zs_runtime *rt, zs_managed_call_handler handler, void *user) {
    ZS_LOCK(rt);
    rt->call_handler = NULL;
    rt->managed_call_handler = handler;
    rt->call_handler_user = user;
    ZS_UNLOCK(rt);
}

uint32_t zs_calls_in_progress(zs_runtime *rt) {
    return ZS_CALLS_COUNT(__atomic_load_n(&rt->calls_word, __ATOMIC_ACQUIRE));
}

/* Whether calls may start now; with the lock held. A runtime without a
   handler still calls the native entries of described functions. */
static zs_status may_call(const zs_runtime *rt) { return rt->in_destroy_hook ? ZS_E_BUSY : ZS_OK; }

/* Whether zs_runtime_free ran during the calls in progress; with the lock
   held (it sets the flag under the lock). */
bool zs_free_pending(const zs_runtime *rt) {
    return (__atomic_load_n(&rt->calls_word, __ATOMIC_RELAXED) & ZS_CALLS_FREE_PENDING) != 0;
}

/* Count a call in; with the lock held. */
void zs_call_enter(zs_runtime *rt) { __atomic_fetch_add(&rt->calls_word, 1, __ATOMIC_ACQ_REL); }

/* Count a call out, with no lock, and free the runtime if zs_runtime_free
   ran during the calls and this was the last one; rt may be gone after. */
void zs_call_leave(zs_runtime *rt) {
    uint32_t before = __atomic_fetch_sub(&rt->calls_word, 1, __ATOMIC_ACQ_REL);
    assert(ZS_CALLS_COUNT(before) > 0);
    if (before == (ZS_CALLS_FREE_PENDING | 1u)) zs_runtime_free(rt);
}

/* What calling `function` on `object` runs, checked with the lock held:
   the handler, or with no handler the native entry the object's class
   describes (NULL entry: an event nobody implements). */
typedef struct call_target {
    zs_call_handler handler;
    zs_managed_call_handler managed;
    void *user;
    zs_object *object; /* for the managed handler */
    const zs_function_desc *native;
} call_target;

/* Check one object (live, not dying) and find what runs; with the lock held.
   For the managed handler, the object is recorded as having a conjugate
   now, under this lock (zs_set_managed_call_handler). */
static zs_status find_target(zs_runtime *rt, zs_ref object, const char *function,
                             call_target *target) {
    zs_status status = may_call(rt);
    if (status == ZS_OK && zs_free_pending(rt)) status = ZS_E_STALE;
    zs_item *item = status == ZS_OK ? zs_usable_item(rt, object, &status) : NULL;
    target->handler = rt->call_handler;
    target->managed = rt->managed_call_handler;
    target->user = rt->call_handler_user;
    target->object = NULL;
    target->native = NULL;
    if (status != ZS_OK) return status;
    if (target->managed != NULL) {
        item->flags |= ZS_ITEM_HAS_CONJUGATE;
        target->object = item->object;
    } else if (target->handler == NULL &&
               zs_find_function(item->object->cls, function, &target->native) != ZS_OK)
        status = ZS_E_INVALID;
    return status;
}

/* Run what find_target found, with no lock. */
static zs_status run_target(const call_target *target, zs_runtime *rt, zs_ref object,
                            const char *function, void *params) {
    if (target->managed != NULL)
        return target->managed(target->user, rt, object, target->object, function, params);
    if (target->handler == NULL) /* an event nobody implements does nothing */
        return target->native->entry != NULL
                   ? target->native->entry(target->native->user, rt, object, params)
                   : ZS_OK;
    return target->handler(target->user, rt, object, function, params);
}

/* Call on one object if it is still live, not dying and not marked as
   garbage (*garbage set, nothing called: an earlier call of the same
   zs_call_each marked it). One critical section checks it all. The caller
   has counted itself in. */
static zs_status call_one(zs_runtime *rt, zs_ref object, const char *function, void *params,
                          bool *garbage) {
    call_target target;
    ZS_LOCK(rt);
    const zs_item *it = zs_item_of(rt, object);
    *garbage = it != NULL && (it->flags & ZS_ITEM_GARBAGE);
    zs_status status = *garbage ? ZS_OK : find_target(rt, object, function, &target);
    ZS_UNLOCK(rt);
    if (*garbage || status != ZS_OK) return status;
    return run_target(&target, rt, object, function, params);
}

zs_status zs_call_function(zs_runtime *rt, zs_ref object, const char *function, void *params) {
    if (function == NULL) return ZS_E_INVALID;
    /* One critical section checks and counts the call in. A call refused
       is not counted in: counting it out could be the last zs_call_leave of
       a deferred free, which would free the runtime again from inside its
       own teardown (a destroy hook calling here). */
    call_target target;
    ZS_LOCK(rt);
    zs_status status = find_target(rt, object, function, &target);
    if (status == ZS_OK) zs_call_enter(rt);
    ZS_UNLOCK(rt);
    if (status != ZS_OK) return status;
    status = run_target(&target, rt, object, function, params);
    zs_call_leave(rt);
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
        if (callable_object(rt, index, cls)) refs[filled++] = zs_item_share(zs_item_at(rt, index));
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
    if (status == ZS_OK) zs_call_enter(rt);
    ZS_UNLOCK(rt);
    if (status != ZS_OK) return status;
    zs_status first_failure = ZS_OK;
    uint32_t called = 0;
    for (uint32_t i = 0; i < count; i++) {
        bool garbage = false;
        zs_status one = call_one(rt, refs[i], function, params, &garbage);
        if (garbage) continue; /* marked as garbage by an earlier call */
        if (one == ZS_E_STALE || one == ZS_E_DYING) continue; /* destroyed by an earlier call */
        called++;
        if (one != ZS_OK && first_failure == ZS_OK) first_failure = one;
    }
    free(refs);
    zs_call_leave(rt);
    if (out_called != NULL) *out_called = called;
    return first_failure;
}

zs_status zs_call_native(zs_runtime *rt, zs_native_function entry, void *user, zs_ref self,
                         void *params) {
    if (entry == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = may_call(rt);
    if (status == ZS_OK && zs_free_pending(rt)) status = ZS_E_STALE;
    if (status == ZS_OK && self != ZS_NULL_REF) zs_usable_item(rt, self, &status);
    if (status == ZS_OK) zs_call_enter(rt);
    ZS_UNLOCK(rt);
    if (status != ZS_OK) return status;
    status = entry(user, rt, self, params);
    zs_call_leave(rt);
    return status;
}
