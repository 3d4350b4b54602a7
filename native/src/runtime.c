/*
 * runtime.c -- a runtime's life: its options, zs_runtime_new, zs_runtime_free
 * (the deferred free while calls are in progress, the free handler, then the
 * teardown of every subsystem in order), the cleanups a host registers, and
 * the switches set once a runtime exists (destroy hook, disregard window).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ======================================================================
 * Cleanups a host registers for its per-runtime state
 * ====================================================================== */

zs_status zs_runtime_add_cleanup(zs_runtime *rt, void (*cleanup)(void *user), void *user) {
    if (cleanup == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = ZS_OK;
    if (rt->cleanup_count == rt->cleanup_capacity) {
        uint32_t capacity = rt->cleanup_capacity ? rt->cleanup_capacity * 2 : 8;
        zs_cleanup *grown = zs_realloc(rt, rt->cleanups, rt->cleanup_capacity * sizeof *grown,
                                       capacity * sizeof *grown);
        if (grown == NULL) status = ZS_E_NOMEM;
        else {
            rt->cleanups = grown;
            rt->cleanup_capacity = capacity;
        }
    }
    if (status == ZS_OK) rt->cleanups[rt->cleanup_count++] = (zs_cleanup){cleanup, user};
    ZS_UNLOCK(rt);
    return status;
}

/* Run the cleanups, latest first (a later registration may depend on an
   earlier one), and free their list. */
static void cleanups_run(zs_runtime *rt) {
    while (rt->cleanup_count > 0) {
        zs_cleanup cleanup = rt->cleanups[--rt->cleanup_count];
        cleanup.run(cleanup.user);
    }
    zs_free(rt, rt->cleanups, rt->cleanup_capacity * sizeof *rt->cleanups);
    rt->cleanups = NULL;
    rt->cleanup_capacity = 0;
}

/* Free the counts of the callables delegate bindings hold (delegates.c
   keeps them; every binding is gone with the objects and values). */
static void callables_release(zs_runtime *rt) {
    zs_free(rt, rt->callable_refs, rt->callable_capacity * sizeof(uint32_t));
    rt->callable_refs = NULL;
    rt->callable_capacity = 0;
    zs_u32_release(rt, &rt->released_callables);
}

/* ======================================================================
 * Runtime lifetime
 * ====================================================================== */

void zs_runtime_default_options(zs_runtime_options *out) {
    memset(out, 0, sizeof *out);
    out->max_objects = ZS_DEFAULT_MAX_OBJECTS;
    out->min_cluster_size = 16;
    out->mark_threads = 0;
}

zs_status zs_runtime_new(const zs_runtime_options *options, zs_runtime **out) {
    zs_runtime_options defaults;
    if (out == NULL) return ZS_E_INVALID;
    *out = NULL;
    if (options == NULL) {
        zs_runtime_default_options(&defaults);
        options = &defaults;
    }
    uint32_t max_objects = options->max_objects ? options->max_objects : ZS_DEFAULT_MAX_OBJECTS;
    if (max_objects > ZS_MAX_OBJECTS_LIMIT) return ZS_E_INVALID;

    zs_runtime *rt = calloc(1, sizeof *rt);
    if (rt == NULL) return ZS_E_NOMEM;
    if (!zs_lock_init(&rt->lock)) {
        free(rt);
        return ZS_E_NOMEM;
    }
    rt->mark_parity = ZS_ITEM_MARK;
    rt->min_cluster_size = options->min_cluster_size ? options->min_cluster_size : 16;
    rt->disregard_open = (options->flags & ZS_RUNTIME_DISREGARD_WINDOW) != 0;
    rt->black_roots = (options->flags & ZS_RUNTIME_BLACK_NOT_ROOTS) == 0;
    rt->mark_threads = options->mark_threads ? options->mark_threads : zs_default_mark_threads();
    rt->parallel_threshold = 65536; /* below this, thread start-up costs more than it saves */
    zs_status status = zs_heap_init(rt, max_objects);
    /* Name 0 is "None", so a zeroed name member reads as None (NAME_None). */
    uint32_t none_index = 0, none_number = 0;
    if (status == ZS_OK)
        status = zs_name_intern_locked(rt, "None", 4, false, &none_index, &none_number);
    assert(status != ZS_OK || none_index == 0);
    if (status != ZS_OK) {
        zs_runtime_free(rt);
        return status;
    }
    *out = rt;
    return ZS_OK;
}

void zs_runtime_free(zs_runtime *rt) {
    if (rt == NULL) return;
    ZS_LOCK(rt);
    /* Freed from inside a call into the managed side (the managed function
       closed its runtime): the native caller still runs on this runtime,
       so the last call to return frees it (calls.c). The flag is set and
       the count read in one atomic step: a call counted out at the same
       time either sees the flag (and frees) or was out before. */
    uint32_t calls = __atomic_fetch_or(&rt->calls_word, ZS_CALLS_FREE_PENDING, __ATOMIC_ACQ_REL);
    if (ZS_CALLS_COUNT(calls) > 0) {
        ZS_UNLOCK(rt);
        return;
    }
    /* The managed side lets go first, while the heap is whole: unlocked (it
       takes its own lock, a GIL), once. Calls are refused from now on, but
       one may have been counted in meanwhile (a hand-over started before the
       flag): then the last of them frees the runtime. */
    zs_free_handler freed = rt->free_handler;
    if (freed != NULL && rt->lock.depth == 1) {
        /* Read under the lock: zs_set_free_handler may run on another
           thread once it is released. */
        void *user = rt->free_handler_user;
        rt->free_handler = NULL;
        rt->free_handler_user = NULL;
        ZS_UNLOCK(rt);
        freed(user, rt);
        ZS_LOCK(rt);
        if (ZS_CALLS_COUNT(__atomic_load_n(&rt->calls_word, __ATOMIC_ACQUIRE)) > 0) {
            ZS_UNLOCK(rt);
            return;
        }
    }
    zs_gc_destroy_everything(rt);
    cleanups_run(rt); /* the host's cleanups, once its objects are gone */
    zs_reflection_release(rt);
    zs_ticks_release(rt);
    zs_values_release(rt);
    zs_gc_release(rt);
    zs_clusters_release(rt);
    zs_class_defaults_release(rt);
    zs_classes_release(rt);
    zs_types_release(rt);
    callables_release(rt);
    zs_names_release(rt);
    zs_u32_release(rt, &rt->root_list);
    zs_heap_release(rt);
    zs_slabs_release(rt);
    /* Invariant: every counted block has been returned. */
    assert(rt->live_blocks == 0 && rt->live_bytes == 0);
    ZS_UNLOCK(rt);
    zs_lock_destroy(&rt->lock);
    free(rt);
}

zs_status zs_set_free_handler(zs_runtime *rt, zs_free_handler handler, void *user) {
    ZS_LOCK(rt);
    /* Only the managed side that set one may replace or remove it. */
    zs_status status = rt->free_handler == NULL || user == rt->free_handler_user ? ZS_OK
                                                                                 : ZS_E_BUSY;
    if (status == ZS_OK) {
        rt->free_handler = handler;
        rt->free_handler_user = handler != NULL ? user : NULL;
    }
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_close_disregard_for_gc(zs_runtime *rt) {
    ZS_LOCK(rt);
    zs_status status = rt->disregard_open ? ZS_OK : ZS_E_INVALID;
    rt->disregard_open = false;
    ZS_UNLOCK(rt);
    return status;
}

void zs_set_destroy_hook(zs_runtime *rt, zs_destroy_hook hook, void *user) {
    ZS_LOCK(rt);
    rt->destroy_hook = hook;
    rt->destroy_hook_user = user;
    ZS_UNLOCK(rt);
}
