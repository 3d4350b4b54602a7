/*
 * zsharp_managed.h -- the managed side's protocol: what a scripting layer
 * needs of the zsharp heap beyond the host's API (zsharp.h, included).
 *
 * Who includes it: the scripting layer attached to a runtime (zsharp_py's
 * binding, native/binding/), which holds proxies (conjugates) of native
 * objects and must expire each one before its object is freed; and the
 * library itself and its tests.
 *
 * What it offers: conjugate records (an object made or resolved for a
 * proxy is recorded as having one: zs_object_new_conjugate,
 * zs_resolve_for_conjugate; and forgotten: zs_forget_conjugate,
 * zs_conjugates_dropped), the expiring list (zs_gc_take_expiring), the
 * expiry and free handlers through which every collection, whoever starts
 * it, hands the dying objects to the managed side before it frees any, and
 * the managed call handler. zs_dying_word and zs_gc_expiring_count, which
 * read this protocol's state, are in zsharp.h (a host's table has them).
 *
 * What it must not be used for: a host's own calls. A host calling these
 * could make the heap forget a proxy the scripting layer holds, or take
 * the dying objects whose proxies it must expire: a proxy would be left
 * pointing at freed memory. None is in the host's table (zsharp_api.h
 * lists them apart as ZS_MANAGED_FUNCTIONS), and
 * zsharp_py.lowlevel.native_function refuses them. A host collects with
 * zs_collect_garbage, or zs_gc_step and zs_gc_purge, and leaves the expiry
 * to the scripting layer. One managed side per runtime: each handler is
 * one, and only the `user` that set it replaces or removes it.
 */
#ifndef ZSHARP_MANAGED_H
#define ZSHARP_MANAGED_H

#include "zsharp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- conjugates: objects the managed side holds a proxy of ------------- */

/* zs_object_new for the managed side, in one call: init_size bytes of init
   (plain data only: every reference-bearing member must be zero in it) are
   copied over the zeroed properties, just after the zs_object header, and
   the object is recorded as having a conjugate (as zs_resolve_for_conjugate
   does), so the new conjugate is adopted with no second call. out_object is
   a pointer-sized slot of any object-pointer type (the binding passes one
   typed as its own layout of the class, so no cast is needed). The new
   object's handle is its conjugate's alone (see zs_conjugates_dropped).
   Returns the new handle, or on failure the zs_status, which is below
   ZS_FIRST_REF: no handle is (serials start at 1). The dropped conjugates
   (may be NULL with 0) are taken first, under the same lock, as
   zs_conjugates_dropped takes them: an object they destroy leaves its slot
   and memory, still in cache, to the new one; `owner` is checked as
   zs_conjugates_dropped checks it (ZS_E_BUSY, nothing made) when any are
   given. */
#define ZS_FIRST_REF ((zs_ref)1 << 32)
typedef struct zs_dropped_conjugate zs_dropped_conjugate;
zs_ref zs_object_new_conjugate(zs_runtime *rt, const zs_class *cls, zs_ref outer,
                               uint32_t name_index, uint32_t name_number, const char *init,
                               uint32_t init_size, void *out_object,
                               const zs_dropped_conjugate *dropped, uint32_t dropped_count,
                               const void *owner);

/* zs_resolve for the managed side: also records that a conjugate now exists, so
   the object will appear in the expiring list before it is freed. Fails with
   ZS_E_STALE or ZS_E_DYING. */
zs_status zs_resolve_for_conjugate(zs_runtime *rt, zs_ref ref, zs_object **out);
/* The managed side dropped its conjugate early (e.g. on runtime close).
   ZS_E_BUSY while an expiry handler is set (the managed side removes it
   first): a proxy the flag no longer named would outlive its object. */
zs_status zs_forget_conjugate(zs_runtime *rt, zs_ref ref);

/* A conjugate the managed side dropped (its Python proxy was freed), told
   to the heap at the next safe point, in batches (zs_conjugates_dropped). */
struct zs_dropped_conjugate {
    zs_ref ref;
    /* Nonzero when the conjugate was the only holder of the handle: made by
       zs_object_new_conjugate, and the managed side never gave the handle
       to anyone (stored it, passed it to a host function, showed it to
       Python code). */
    uint32_t sole_holder;
    uint32_t reserved; /* zero */
};

/* Take dropped conjugates: each object no longer has one (as
   zs_forget_conjugate), so it dies without passing through the expiring
   list. An object whose conjugate was its sole holder is destroyed now
   (both destroy hook phases, then freed, its slot's serial bumped) when
   nothing else can reach it either: the heap never handed its handle out
   (zs_find_object, zs_object_ref, zs_live_handles, zs_call_each,
   zs_reference_chains, zs_cluster_get_info, or zs_object_new made it), it
   is no root, has no strong reference, is in no cluster and is not
   permanent (an incremental cycle may be pending: none of its lists can
   name such an object). Stale handles are skipped. *out_destroyed (may be
   NULL): the number of objects destroyed (zs_gc_stats.objects_freed_unshared).
   While an expiry handler is set, only its managed side knows which of its
   proxies are gone: `owner` must be the `user` it set the handler with, or
   the call is refused with ZS_E_BUSY and changes nothing (anyone else
   clearing the flag would leave a proxy behind its object). With no
   handler set, `owner` is not checked. */
zs_status zs_conjugates_dropped(zs_runtime *rt, const void *owner,
                                const zs_dropped_conjugate *dropped, uint32_t count,
                                uint32_t *out_destroyed);

/* ---- the expiring list ---------------------------------------------------- */

/* Copy up to capacity handles of dying objects that have conjugates and
   remove them from the list; *out_count gets how many were copied. For a
   runtime with no expiry handler only: while one is set, the handler is
   given the list and these refuse with ZS_E_BUSY, taking nothing (nobody
   else may take objects whose proxies the managed side must expire). */
zs_status zs_gc_take_expiring(zs_runtime *rt, zs_ref *buffer, uint32_t capacity,
                              uint32_t *out_count);
/* The same, also reporting for each object its name (name_index in the low
   32 bits of names[i], name_number in the high 32) and whether it was marked
   as garbage; names and garbage may be NULL. */
zs_status zs_gc_take_expiring_ex(zs_runtime *rt, zs_ref *buffer, uint64_t *names, uint8_t *garbage,
                                 uint32_t capacity, uint32_t *out_count);

/* ---- the managed side's expiry ------------------------------------------ */

/* The managed side's expiry handler (one per runtime; a scripting layer
   sets it when it attaches, beside its call handler). Whoever starts a
   collection (the host, a host function, another thread), the collector
   hands the handler the dying objects that have conjugates before it
   frees any of them: their handles, names (as zs_gc_take_expiring_ex
   reports them) and garbage flags, `count` of each. The handler expires
   every proxy of those objects before it returns; it must not keep the
   arrays. It runs without the runtime lock, counted as a call in progress
   (zs_calls_in_progress), on the thread that collects; meanwhile no purge
   runs (another thread's is refused with ZS_E_BUSY) and the objects stay
   dying. It may call the API, but a collection from inside it is refused
   with ZS_E_BUSY. */
typedef void (*zs_expiry_handler)(void *user, zs_runtime *rt, const zs_ref *objects,
                                  const uint64_t *names, const uint8_t *garbage, uint32_t count);
/* Set (or with NULL remove) the expiry handler. ZS_E_BUSY while a
   hand-over is in progress, and when another handler is set with another
   `user`: only the managed side that set it replaces or removes it. */
zs_status zs_set_expiry_handler(zs_runtime *rt, zs_expiry_handler handler, void *user);
/* The managed side's free handler: zs_runtime_free calls it first, once,
   without the runtime lock and before anything is freed, so the managed
   side expires every proxy and value of a runtime a host owns and lets go
   of it (its own calls are refused from then on: zs_runtime_free has
   begun). A call or hand-over still in progress after it returns defers
   the free to its end, as usual. */
typedef void (*zs_free_handler)(void *user, zs_runtime *rt);
/* Set (or with NULL remove) the free handler; ZS_E_BUSY when another is set
   with another `user` (only its managed side replaces or removes it). */
zs_status zs_set_free_handler(zs_runtime *rt, zs_free_handler handler, void *user);
/* Hand up to `limit` objects of the expiring list to the expiry handler
   now (the managed side's own, budgeted expiry; UINT32_MAX: every one);
   *out_taken counts them. ZS_E_INVALID without a handler, ZS_E_BUSY from
   inside a destroy hook or while the lock is held. */
zs_status zs_gc_expire(zs_runtime *rt, uint32_t limit, uint32_t *out_taken);

/* ---- class defaults ---------------------------------------------------------- */

/* The defaults every new object of `cls` starts with, however it is made
   (a host's zs_object_new too, not only the managed side's creations):
   image_size bytes of `image` (plain data only, as zs_object_new_conjugate's
   init: every reference-bearing member zero in it) copied over the
   properties, just after the zs_object header (a creation that passes an
   init of its own copies that instead), then a deep copy of each of the
   member_count values `members` describe (their offsets from the object's
   start, and types of this runtime holding no references: strings,
   containers and structs of plain data...), read now from `source`,
   memory laid out as an object of the class (the managed side passes an
   object it made and initialised). The heap keeps its own copies (freed
   with the runtime) and replaces any defaults set before. ZS_E_INVALID for
   a class or type of another runtime, an image or value outside the
   object or over its header, a type holding references, or a NULL pointer
   with a count; ZS_E_NOMEM. A class with default values is never made by
   zs_object_new_conjugate's renewal of a dropped object. */
zs_status zs_class_set_defaults(zs_runtime *rt, const zs_class *cls, const char *image,
                                uint32_t image_size, const zs_type_member *members,
                                uint32_t member_count, const void *source);

/* ---- calls into the managed side ---------------------------------------- */

/* The managed side's handler, as zs_call_handler with `target`: the object
   itself, recorded as having a conjugate (as zs_resolve_for_conjugate
   records it) under the lock that checked the call, so that the managed
   side makes its proxy with no second lock. The object is not freed before
   the managed side has seen it die (its expiry handler, or
   zs_gc_take_expiring), so `target` stays valid while the handler runs on
   a thread that has held, since before the call, whatever that needs (for
   Python, the GIL). Setting either handler (zs_set_call_handler, zsharp.h)
   replaces the other. */
typedef zs_status (*zs_managed_call_handler)(void *user, zs_runtime *rt, zs_ref object,
                                             zs_object *target, const char *function, void *params);
void zs_set_managed_call_handler(zs_runtime *rt, zs_managed_call_handler handler, void *user);

/* ---- delegates called from native code ----------------------------------- */

/* One listener of zs_delegate_broadcast or zs_delegate_execute (zsharp.h),
   as the managed side is handed it: a callable, or an object binding. */
typedef struct zs_listener {
    uint32_t callable;    /* the managed callable id; 0: an object binding */
    zs_ref object;        /* the object binding's object (live, not dying, not garbage when
                             checked), else ZS_NULL_REF */
    zs_object *target;    /* that object, recorded as having a conjugate under the lock that
                             checked it (as zs_managed_call_handler's target) */
    const char *function; /* the binding's function name, a trailing "()" dropped; NULL for a
                             callable. Valid during the call only */
    const zs_function_desc *native; /* the object's class's native function of that name when it
                                       takes exactly the signature's parameters, else NULL */
} zs_listener;
/* The managed side's handler of listeners (one per runtime): run one
   listener with `params`, a block laid out as `signature` says. Called
   without the runtime lock, as a call in progress; the object, if any,
   stays valid as zs_managed_call_handler's target does. Returns ZS_OK, or
   the listener's failure (ZS_E_CALL_FAILED when it raised, ZS_E_INVALID
   when it cannot take the block, ZS_E_STALE when it is gone). */
typedef zs_status (*zs_managed_listener_handler)(void *user, zs_runtime *rt,
                                                 const zs_listener *listener,
                                                 const zs_function_desc *signature, void *params);
/* Set (or with NULL remove) the listener handler. Without one, callables
   are skipped and object bindings run natively (zsharp.h). */
void zs_set_managed_listener_handler(zs_runtime *rt, zs_managed_listener_handler handler,
                                     void *user);

#ifdef __cplusplus
}
#endif
#endif /* ZSHARP_MANAGED_H */
