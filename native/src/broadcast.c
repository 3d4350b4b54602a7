/*
 * broadcast.c -- delegates called from native code (zsharp.h, "delegates
 * called from native code"): zs_delegate_broadcast, zs_delegate_execute,
 * and the managed side's listener handler (zsharp_managed.h).
 *
 * One critical section checks the call and copies the delegate's bindings
 * into a snapshot: each callable's id, each object binding's handle and
 * function name. While a broadcast runs the managed side is handed no
 * released callable ids (rt->broadcasts, delegates.c), so it keeps every
 * callable a snapshot names, and never reuses its id, even if a listener
 * unbinds it. The delegate's memory
 * is never read again, so a listener may free it (unbind, clear, destroy
 * its owner, collect). The call counts in as a call in progress (calls.c):
 * zs_runtime_free from a listener is deferred to its end. Then each
 * listener in turn is checked again under the lock (an object by handle
 * and serial: freed, dying or marked as garbage since is skipped) and run
 * without it. Last, the broadcast counts out of rt->broadcasts under the
 * lock, before the call counts out (which may free the runtime).
 *
 * Who runs a listener: the managed side's listener handler when one is
 * set (callables, and object bindings, whose method may be a script's
 * override); without one, object bindings go to a zs_call_handler, else
 * to the native entry of the function their class describes, which must
 * take exactly the signature's block (takes_signature); callables are
 * skipped (nothing can run them).
 *
 * A callable's turn takes no lock: the handler read with the snapshot is
 * still the one while the handler's generation (an atomic counter every
 * zs_set_managed_listener_handler bumps) is the one read with it, and the
 * runtime is not being freed (calls_word, atomic); otherwise the lock is
 * taken and the handler read again. An object's turn takes the lock (its
 * item is checked).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Listeners and name bytes a snapshot holds without allocating. */
#define SMALL_LISTENERS 8
#define SMALL_NAMES 256

/* One binding as copied: a callable (retained), or an object's handle and
   the offset of its function name in the snapshot's names. */
typedef struct listener_copy {
    zs_ref object;
    uint32_t callable;
    uint32_t name;
} listener_copy;

/* The bindings of one call, copied before any listener runs, with the
   listener handler read then (and its generation). */
typedef struct snapshot {
    listener_copy *listeners;
    uint32_t count;
    zs_managed_listener_handler managed;
    void *user;
    uint32_t generation;
    char *names;
    listener_copy small[SMALL_LISTENERS];
    char small_names[SMALL_NAMES];
} snapshot;

void zs_set_managed_listener_handler(zs_runtime *rt, zs_managed_listener_handler handler,
                                     void *user) {
    ZS_LOCK(rt);
    rt->listener_handler = handler;
    rt->listener_handler_user = handler != NULL ? user : NULL;
    __atomic_fetch_add(&rt->listener_generation, 1, __ATOMIC_RELEASE);
    ZS_UNLOCK(rt);
}

/* Whether a signature describes a block a delegate can be called with: a
   type text for every parameter, each starting inside the block, all
   passed in (ZS_PARAM_IN), and at most one result when `result` allows. */
static bool signature_valid(const zs_function_desc *signature, bool result) {
    if (signature == NULL || (signature->param_count > 0 && signature->params == NULL))
        return false;
    uint32_t results = 0;
    for (uint32_t i = 0; i < signature->param_count; i++) {
        const zs_property_desc *p = &signature->params[i];
        if (p->type == NULL || p->offset >= signature->block_size) return false;
        if (p->direction == ZS_PARAM_RETURN) results++;
        else if (p->direction != ZS_PARAM_IN) return false;
    }
    return results <= (result ? 1u : 0u);
}

/* Whether a native function takes exactly the signature's block: the same
   parameters (direction, type text, offset) in the same order, and a block
   no larger, so its entry reads and writes nothing the caller did not lay
   out. */
static bool takes_signature(const zs_function_desc *function, const zs_function_desc *signature) {
    if (function == signature) return true;
    if (function->block_size > signature->block_size ||
        function->param_count != signature->param_count ||
        (function->param_count > 0 && function->params == NULL))
        return false;
    for (uint32_t i = 0; i < function->param_count; i++) {
        const zs_property_desc *f = &function->params[i], *s = &signature->params[i];
        if (f->direction != s->direction || f->offset != s->offset || f->type == NULL ||
            strcmp(f->type, s->type) != 0)
            return false;
    }
    return true;
}

/* Whether `type` is a type of this runtime. */
static bool type_of(const zs_runtime *rt, const zs_type *type) {
    return type != NULL && type->id < rt->type_count && rt->types[type->id] == type;
}

/* Whether a call may begin (the lock held): not from a destroy hook, not
   once zs_runtime_free ran, and the owner (if any) not freed. A dying
   owner is read as it is: its memory stays until it is purged. */
static zs_status may_begin(const zs_runtime *rt, zs_ref owner) {
    if (rt->in_destroy_hook) return ZS_E_BUSY;
    if (zs_free_pending(rt)) return ZS_E_STALE;
    if (owner != ZS_NULL_REF && zs_item_of(rt, owner) == NULL) return ZS_E_STALE;
    return ZS_OK;
}

/* The text of an object binding's function name (the lock held), its
   length without a trailing "()" in *length; "" for an unknown index. */
static const char *function_text(const zs_runtime *rt, uint32_t name, size_t *length) {
    const char *text = name < rt->names.count ? rt->names.entries[name].text : "";
    size_t n = strlen(text);
    if (n >= 2 && text[n - 2] == '(' && text[n - 1] == ')') n -= 2;
    *length = n;
    return text;
}

/* Free a snapshot's storage. */
static void snapshot_free(snapshot *s) {
    if (s->listeners != s->small) free(s->listeners);
    if (s->names != s->small_names) free(s->names);
    s->listeners = NULL;
    s->names = NULL;
    s->count = 0;
}

/* Copy `count` bindings into a snapshot (the lock held): empty bindings
   dropped. ZS_E_NOMEM on failure. */
static zs_status snapshot_take(zs_runtime *rt, snapshot *s, const zs_binding *bindings,
                               uint32_t count) {
    uint32_t listeners = 0;
    size_t bytes = 0, length;
    for (uint32_t i = 0; i < count; i++) {
        if (bindings[i].callable != 0) listeners++;
        else if (bindings[i].object != ZS_NULL_REF) {
            function_text(rt, bindings[i].function_name, &length);
            bytes += length + 1;
            listeners++;
        }
    }
    s->listeners = listeners <= SMALL_LISTENERS ? s->small
                                                : malloc(listeners * sizeof *s->listeners);
    s->names = bytes <= SMALL_NAMES ? s->small_names : malloc(bytes);
    if (s->listeners == NULL || s->names == NULL) {
        snapshot_free(s);
        return ZS_E_NOMEM;
    }
    size_t used = 0;
    for (uint32_t i = 0; i < count; i++) {
        const zs_binding *b = &bindings[i];
        listener_copy *copy = &s->listeners[s->count];
        if (b->callable != 0) {
            *copy = (listener_copy){ZS_NULL_REF, b->callable, 0};
        } else if (b->object != ZS_NULL_REF) {
            const char *text = function_text(rt, b->function_name, &length);
            memcpy(s->names + used, text, length);
            s->names[used + length] = '\0';
            *copy = (listener_copy){b->object, 0, (uint32_t)used};
            used += length + 1;
        } else continue;
        s->count++;
    }
    assert(s->count == listeners && used == bytes);
    s->managed = rt->listener_handler;
    s->user = rt->listener_handler_user;
    s->generation = __atomic_load_n(&rt->listener_generation, __ATOMIC_ACQUIRE);
    return ZS_OK;
}

/* Whether zs_runtime_free has run since the call began (no lock: the flag
   is set atomically, calls.c). */
static bool freeing(const zs_runtime *rt) {
    return (__atomic_load_n(&rt->calls_word, __ATOMIC_ACQUIRE) & ZS_CALLS_FREE_PENDING) != 0;
}

/* What runs one listener, decided under the lock. */
typedef enum run_kind {
    RUN_SKIP,    /* gone, or nothing can run it */
    RUN_STOP,    /* the runtime is being freed: this and the rest are skipped */
    RUN_INVALID, /* it cannot take the block: a failure */
    RUN_MANAGED, /* the listener handler */
    RUN_HANDLER, /* a zs_call_handler, with the object and the function name */
    RUN_NATIVE,  /* the native entry of the object's function */
} run_kind;

typedef struct listener_run {
    run_kind kind;
    zs_listener listener;
    zs_managed_listener_handler managed;
    zs_call_handler handler;
    void *user;
    const zs_function_desc *native;
} listener_run;

/* Check listener i again and decide what runs it (the lock held). */
static void prepare(zs_runtime *rt, const snapshot *s, uint32_t i,
                    const zs_function_desc *signature, listener_run *run) {
    const listener_copy *copy = &s->listeners[i];
    memset(run, 0, sizeof *run);
    if (zs_free_pending(rt)) {
        run->kind = RUN_STOP;
        return;
    }
    run->managed = rt->listener_handler;
    run->user = rt->listener_handler_user;
    if (copy->callable != 0) {
        run->kind = run->managed != NULL ? RUN_MANAGED : RUN_SKIP;
        run->listener.callable = copy->callable;
        return;
    }
    zs_status status = ZS_OK;
    zs_item *it = zs_usable_item(rt, copy->object, &status);
    if (it == NULL || (it->flags & ZS_ITEM_GARBAGE)) {
        run->kind = RUN_SKIP; /* destroyed, or marked as garbage, before its turn */
        return;
    }
    const char *name = s->names + copy->name;
    const zs_function_desc *found = NULL;
    if (zs_find_function(it->object->cls, name, &found) == ZS_OK &&
        takes_signature(found, signature))
        run->native = found;
    if (run->managed != NULL) {
        /* Recorded under this lock, so the handler may make the conjugate
           from `target` with no second lock (as zs_call_function does). */
        it->flags |= ZS_ITEM_HAS_CONJUGATE;
        run->listener = (zs_listener){0, copy->object, it->object, name, run->native};
        run->kind = RUN_MANAGED;
    } else if (rt->call_handler != NULL) {
        run->handler = rt->call_handler;
        run->user = rt->call_handler_user;
        run->listener.object = copy->object;
        run->listener.function = name;
        run->kind = RUN_HANDLER;
    } else {
        run->listener.object = copy->object;
        run->kind = run->native != NULL ? RUN_NATIVE : RUN_INVALID;
    }
}

/* Run every listener of a snapshot in order, counting into the report;
   the first failure, or ZS_OK. The caller has counted the call in. */
static zs_status run_all(zs_runtime *rt, const snapshot *s, const zs_function_desc *signature,
                         void *params, zs_broadcast_report *report) {
    zs_status first = ZS_OK;
    report->listeners = s->count;
    for (uint32_t i = 0; i < s->count; i++) {
        listener_run run;
        if (s->listeners[i].callable != 0 && !freeing(rt) &&
            __atomic_load_n(&rt->listener_generation, __ATOMIC_ACQUIRE) == s->generation) {
            /* A callable, the handler unchanged: no lock (the file's head). */
            run.managed = s->managed;
            run.user = s->user;
            run.kind = run.managed != NULL ? RUN_MANAGED : RUN_SKIP;
            run.listener = (zs_listener){s->listeners[i].callable, ZS_NULL_REF, NULL, NULL, NULL};
        } else {
            ZS_LOCK(rt);
            prepare(rt, s, i, signature, &run);
            ZS_UNLOCK(rt);
        }
        zs_status status = ZS_OK;
        switch (run.kind) {
        case RUN_STOP:
            report->skipped += s->count - i;
            return first;
        case RUN_SKIP:
            report->skipped++;
            continue;
        case RUN_INVALID:
            status = ZS_E_INVALID;
            break;
        case RUN_MANAGED:
            status = run.managed(run.user, rt, &run.listener, signature, params);
            break;
        case RUN_HANDLER:
            status = run.handler(run.user, rt, run.listener.object, run.listener.function, params);
            break;
        case RUN_NATIVE: /* an event with no native default does nothing */
            status = run.native->entry != NULL
                         ? run.native->entry(run.native->user, rt, run.listener.object, params)
                         : ZS_OK;
            break;
        }
        if (status == ZS_E_STALE || status == ZS_E_DYING) { /* gone meanwhile */
            report->skipped++;
            continue;
        }
        report->called++;
        if (status != ZS_OK) {
            report->failed++;
            if (first == ZS_OK) first = status;
        }
    }
    return first;
}

/* Take the snapshot of `count` bindings (the checks done, the lock held
   by the caller through `begun`), run it, release it, count the call out. */
static zs_status call_bindings(zs_runtime *rt, zs_status begun, const zs_binding *bindings,
                               uint32_t count, const zs_function_desc *signature, void *params,
                               zs_broadcast_report *report) {
    snapshot s;
    s.listeners = NULL;
    s.names = NULL;
    s.count = 0;
    zs_status status = begun;
    if (status == ZS_OK) status = snapshot_take(rt, &s, bindings, count);
    if (status == ZS_OK) {
        rt->broadcasts++;
        zs_call_enter(rt);
    }
    ZS_UNLOCK(rt);
    if (status != ZS_OK) return status;
    status = run_all(rt, &s, signature, params, report);
    ZS_LOCK(rt);
    assert(rt->broadcasts > 0);
    rt->broadcasts--;
    ZS_UNLOCK(rt);
    snapshot_free(&s);
    zs_call_leave(rt); /* may free the runtime */
    return status;
}

zs_status zs_delegate_broadcast(zs_runtime *rt, zs_ref owner, const zs_type *type,
                                const void *delegate, const zs_function_desc *signature,
                                void *params, zs_broadcast_report *out) {
    zs_broadcast_report report = {0, 0, 0, 0};
    if (out != NULL) *out = report;
    if (rt == NULL || delegate == NULL || !signature_valid(signature, false) ||
        (signature->block_size > 0 && params == NULL))
        return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = may_begin(rt, owner);
    if (status == ZS_OK &&
        (!type_of(rt, type) || (type->kind != ZS_TYPE_MULTICAST && type->kind != ZS_TYPE_SPARSE)))
        status = ZS_E_INVALID;
    const zs_array *list = NULL;
    if (status == ZS_OK)
        list = type->kind == ZS_TYPE_MULTICAST ? (const zs_array *)delegate
                                               : *(zs_array *const *)delegate;
    status = call_bindings(rt, status, list != NULL ? list->data : NULL,
                           list != NULL ? list->count : 0, signature, params, &report);
    if (out != NULL) *out = report;
    return status;
}

zs_status zs_delegate_execute(zs_runtime *rt, zs_ref owner, const zs_binding *delegate,
                              const zs_function_desc *signature, void *params, int *out_called) {
    zs_broadcast_report report = {0, 0, 0, 0};
    if (out_called != NULL) *out_called = 0;
    if (rt == NULL || delegate == NULL || !signature_valid(signature, true) ||
        (signature->block_size > 0 && params == NULL))
        return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = call_bindings(rt, may_begin(rt, owner), delegate, 1, signature, params,
                                     &report);
    if (out_called != NULL) *out_called = report.called > 0;
    return status;
}
