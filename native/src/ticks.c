/*
 * ticks.c -- the tick manager (zsharp.h, "the tick manager"; the guide is
 * docs/ticking.md): tick functions registered per object in ordered
 * groups, with intervals, prerequisites and an enabled flag, ticked by one
 * call per frame (zs_tick_frame), which may end with the collector's share
 * of the frame. After Unreal's FTickFunction and its tick task manager.
 *
 * Records: one array, its free slots reused through a free list, and a
 * list in registration order through them. A tick function's handle is its
 * record's index and serial (bumped when it is unregistered), as an
 * object's is, so a stale handle never names a newer registration; a
 * record holds its object's handle, never a pointer, and its function's
 * name as an entry of the manager's own name pool, whose strings are never
 * freed before the runtime: a name handed to a call handler stays valid
 * whatever the call unregisters.
 *
 * The order: when registrations, prerequisites or groups changed, the
 * start of the next frame computes it (build_order): each function's
 * actual group (its own, or its latest prerequisite's), then, group by
 * group, the functions in registration order, each after its
 * prerequisites in the same group (a depth-first walk). The order is an
 * array of tick handles that only the start of a frame writes, so a frame
 * reads it with the lock released.
 *
 * The frame: the lock is taken once per tick function to check it (still
 * registered, its object live and neither dying nor garbage, enabled,
 * due), count its time and find what runs, then released for the call:
 * the function may use the whole API (register, unregister, collect,
 * destroy objects, free the runtime) and nothing read under the lock is
 * trusted after it. The frame is one call in progress (calls.c), so
 * zs_runtime_free from inside it is deferred to its end.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

/* Record flags. */
#define TICK_IN_USE 0x1u   /* registered */
#define TICK_ENABLED 0x2u  /* ticks when due */
#define TICK_VISITED 0x4u  /* build_order: entered */
#define TICK_DONE 0x8u     /* build_order: actual group known */
#define TICK_EMITTED 0x10u /* build_order: placed in the order */

/* An interval is reached within this fraction of it (six frames of 1/60 s
   reach 0.1 s although their sum is a little less). */
#define INTERVAL_SLACK 1e-9

typedef struct tick_record {
    zs_ref object;
    zs_native_function entry;       /* a native entry called directly, or NULL */
    void *user;                     /* entry's */
    const zs_function_desc *native; /* a named function's description, once found */
    double interval;                /* seconds; 0: every frame */
    double elapsed;                 /* enabled game time since the last tick */
    uint64_t calls;
    zs_tick *prerequisites; /* handles; stale ones are ignored and pruned */
    uint32_t prerequisite_count, prerequisite_capacity;
    uint32_t name;         /* the function's name: pool index + 1; 0: an entry */
    uint32_t serial;       /* of the slot: bumped when unregistered (from 1) */
    uint32_t flags;        /* TICK_* */
    uint32_t group;        /* as registered */
    uint32_t actual_group; /* in the current order */
    uint32_t next_free;    /* free list: index + 1 (0: none) */
    uint32_t older, newer; /* registration order: index + 1 (0: none) */
    uint32_t seen;         /* the cycle check's epoch */
} tick_record;

/* A runtime's tick manager (rt->ticks), made on first use. */
typedef struct zs_ticks {
    tick_record *records;
    uint32_t high_water, capacity; /* slots ever used, slots allocated */
    uint32_t free_head;            /* index + 1 */
    uint32_t live;                 /* registered */
    uint32_t oldest, newest;       /* the registration-order list: index + 1 */
    char **names;                  /* the name pool: never freed before the runtime */
    uint32_t name_count, name_capacity;
    zs_tick *order; /* the frame's order: written only when no frame runs */
    uint32_t order_count, order_capacity;
    uint32_t epoch;  /* the cycle check's */
    bool dirty;      /* the order must be built again */
    bool in_frame;   /* a frame runs */
    uint64_t frame;  /* frames started */
    double time;     /* game time: the sum of the frames' deltas */
    double since_gc; /* frames' time since the collector's last cycle began here */
} zs_ticks;

/* What one due tick function runs, found under the lock. */
typedef enum tick_kind {
    KIND_NONE,    /* nothing: not due, or cannot tick */
    KIND_ENTRY,   /* a native entry */
    KIND_HANDLER, /* the plain call handler */
    KIND_MANAGED, /* the managed call handler */
    KIND_NOTHING, /* an event nobody implements: ticked, nothing runs */
    KIND_REFUSED  /* the function cannot be called (status) */
} tick_kind;

typedef struct tick_call {
    tick_kind kind;
    zs_ref object;
    zs_native_function entry;
    zs_call_handler handler;
    zs_managed_call_handler managed;
    void *user;
    zs_object *target;    /* KIND_MANAGED: the object, recorded as having a conjugate */
    const char *function; /* from the name pool */
    zs_status status;     /* KIND_REFUSED */
} tick_call;

/* ======================================================================
 * Records and names
 * ====================================================================== */

/* The tick manager of rt, made when `create` (NULL when out of memory or
   not made yet); with the lock held. */
static zs_ticks *ticks_of(zs_runtime *rt, bool create) {
    if (rt->ticks == NULL && create) rt->ticks = zs_alloc(rt, sizeof(zs_ticks));
    return rt->ticks;
}

/* The registered record a handle names, or NULL (stale, or never made). */
static tick_record *live_record(zs_ticks *t, zs_tick tick) {
    uint32_t index = ZS_REF_INDEX(tick);
    if (t == NULL || tick == 0 || index >= t->high_water) return NULL;
    tick_record *r = &t->records[index];
    return (r->flags & TICK_IN_USE) && r->serial == ZS_REF_SERIAL(tick) ? r : NULL;
}

/* The handle of a registered record. */
static zs_tick handle_of(const zs_ticks *t, const tick_record *r) {
    return ZS_MAKE_REF((uint32_t)(r - t->records), r->serial);
}

/* Unregister a record: its memory freed, its serial bumped (a slot whose
   serial is used up is retired), its slot freed for reuse. */
static void release_record(zs_runtime *rt, zs_ticks *t, tick_record *r) {
    uint32_t index = (uint32_t)(r - t->records);
    zs_free(rt, r->prerequisites, (size_t)r->prerequisite_capacity * sizeof(zs_tick));
    if (r->older != 0) t->records[r->older - 1].newer = r->newer;
    else t->oldest = r->newer;
    if (r->newer != 0) t->records[r->newer - 1].older = r->older;
    else t->newest = r->older;
    uint32_t serial = r->serial + 1;
    memset(r, 0, sizeof *r);
    r->serial = serial;
    if (serial != ZS_SERIAL_RETIRE) {
        r->next_free = t->free_head;
        t->free_head = index + 1;
    }
    t->live--;
    t->dirty = true;
}

/* The registered record a handle names, checked as every call that names
   one checks it: a record whose object the collector freed is unregistered
   now. NULL with *status ZS_E_STALE when there is none. */
static tick_record *record_of(zs_runtime *rt, zs_tick tick, zs_status *status) {
    zs_ticks *t = rt->ticks;
    tick_record *r = live_record(t, tick);
    if (r != NULL && zs_item_of(rt, r->object) == NULL) {
        release_record(rt, t, r);
        r = NULL;
    }
    if (r == NULL) *status = ZS_E_STALE;
    return r;
}

/* A free slot (its serial kept), or NULL when out of memory. */
static tick_record *new_record(zs_runtime *rt, zs_ticks *t) {
    if (t->free_head != 0) {
        tick_record *r = &t->records[t->free_head - 1];
        t->free_head = r->next_free;
        r->next_free = 0;
        return r;
    }
    if (t->high_water == t->capacity) {
        if (t->capacity >= ZS_MAX_OBJECTS_LIMIT) return NULL;
        uint32_t capacity = t->capacity ? t->capacity * 2 : 16;
        tick_record *grown = zs_realloc(rt, t->records, (size_t)t->capacity * sizeof *grown,
                                        (size_t)capacity * sizeof *grown);
        if (grown == NULL) return NULL;
        t->records = grown;
        t->capacity = capacity;
    }
    tick_record *r = &t->records[t->high_water++];
    r->serial = 1;
    return r;
}

/* The pool index + 1 of a function's name, added when new; 0 when out of
   memory. The pool is searched in full: a runtime ticks few names. */
static uint32_t pool_name(zs_runtime *rt, zs_ticks *t, const char *name) {
    for (uint32_t i = 0; i < t->name_count; i++)
        if (strcmp(t->names[i], name) == 0) return i + 1;
    if (t->name_count == t->name_capacity) {
        uint32_t capacity = t->name_capacity ? t->name_capacity * 2 : 4;
        char **grown = zs_realloc(rt, t->names, (size_t)t->name_capacity * sizeof *grown,
                                  (size_t)capacity * sizeof *grown);
        if (grown == NULL) return 0;
        t->names = grown;
        t->name_capacity = capacity;
    }
    size_t size = strlen(name) + 1;
    char *copy = zs_alloc(rt, size);
    if (copy == NULL) return 0;
    memcpy(copy, name, size);
    t->names[t->name_count++] = copy;
    return t->name_count;
}

void zs_ticks_release(zs_runtime *rt) {
    zs_ticks *t = rt->ticks;
    if (t == NULL) return;
    for (uint32_t i = 0; i < t->high_water; i++)
        zs_free(rt, t->records[i].prerequisites,
                (size_t)t->records[i].prerequisite_capacity * sizeof(zs_tick));
    for (uint32_t i = 0; i < t->name_count; i++) zs_free(rt, t->names[i], strlen(t->names[i]) + 1);
    zs_free(rt, t->names, (size_t)t->name_capacity * sizeof *t->names);
    zs_free(rt, t->records, (size_t)t->capacity * sizeof *t->records);
    zs_free(rt, t->order, (size_t)t->order_capacity * sizeof *t->order);
    zs_free(rt, t, sizeof *t);
    rt->ticks = NULL;
}

/* ======================================================================
 * What a named function runs
 * ====================================================================== */

/* Whether a described function can be a tick function: called on an
   object, with (dt: Float64) or nothing, and no result, in a block no
   larger than zs_tick_params. */
static bool tick_signature(const zs_function_desc *f) {
    if ((f->flags & ZS_FUNCTION_STATIC) || f->block_size > sizeof(zs_tick_params)) return false;
    if (f->param_count == 0) return true;
    const zs_property_desc *p = &f->params[0];
    return f->param_count == 1 && p->direction == ZS_PARAM_IN && p->offset == 0 &&
           p->type != NULL && strcmp(p->type, "Float64") == 0;
}

/* Whether a named function of cls is called through the managed call
   handler (a script's class, which a script may override); with the lock
   held. */
static bool goes_to_script(const zs_runtime *rt, const zs_class *cls) {
    return rt->managed_call_handler != NULL && (cls->flags & ZS_CLASS_SCRIPT) != 0;
}

/* The native description of a named function the frame calls directly:
   found and checked (NULL when cls has none it can tick with). */
static const zs_function_desc *native_function(const zs_class *cls, const char *name) {
    const zs_function_desc *f = NULL;
    if (zs_find_function(cls, name, &f) != ZS_OK || !tick_signature(f)) return NULL;
    return f;
}

/* Whether a function named on an object of cls can be registered now;
   with the lock held. Through a handler, the handler's side checks it. */
static bool can_register_named(const zs_runtime *rt, const zs_class *cls, const char *name) {
    return rt->call_handler != NULL || goes_to_script(rt, cls) || native_function(cls, name);
}

/* ======================================================================
 * Registration and changes
 * ====================================================================== */

zs_status zs_tick_register(zs_runtime *rt, const zs_tick_desc *desc, zs_tick *out) {
    if (out != NULL) *out = 0;
    if (desc == NULL || out == NULL || (desc->function == NULL) == (desc->entry == NULL) ||
        desc->group >= ZS_TICK_GROUP_COUNT || !(desc->interval >= 0) || !isfinite(desc->interval) ||
        (desc->flags & ~ZS_TICK_DISABLED) != 0)
        return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = rt->in_destroy_hook ? ZS_E_BUSY : zs_free_pending(rt) ? ZS_E_STALE : ZS_OK;
    zs_item *it = status == ZS_OK ? zs_usable_item(rt, desc->object, &status) : NULL;
    if (it != NULL && (it->flags & ZS_ITEM_GARBAGE)) status = ZS_E_DYING;
    if (status == ZS_OK && desc->function != NULL &&
        !can_register_named(rt, it->object->cls, desc->function))
        status = ZS_E_INVALID;
    zs_ticks *t = status == ZS_OK ? ticks_of(rt, true) : NULL;
    if (status == ZS_OK && t == NULL) status = ZS_E_NOMEM;
    uint32_t name = status == ZS_OK && desc->function != NULL ? pool_name(rt, t, desc->function)
                                                              : 0;
    if (status == ZS_OK && desc->function != NULL && name == 0) status = ZS_E_NOMEM;
    tick_record *r = status == ZS_OK ? new_record(rt, t) : NULL;
    if (status == ZS_OK && r == NULL) status = ZS_E_NOMEM;
    if (status == ZS_OK) {
        uint32_t index = (uint32_t)(r - t->records);
        r->object = desc->object;
        r->entry = desc->entry;
        r->user = desc->entry != NULL ? desc->user : NULL;
        r->interval = desc->interval;
        r->name = name;
        r->flags = TICK_IN_USE | ((desc->flags & ZS_TICK_DISABLED) ? 0u : TICK_ENABLED);
        r->group = r->actual_group = desc->group;
        r->older = t->newest;
        if (t->newest != 0) t->records[t->newest - 1].newer = index + 1;
        else t->oldest = index + 1;
        t->newest = index + 1;
        t->live++;
        t->dirty = true;
        *out = handle_of(t, r);
    }
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_tick_unregister(zs_runtime *rt, zs_tick tick) {
    zs_status status = ZS_OK;
    ZS_LOCK(rt);
    tick_record *r = record_of(rt, tick, &status);
    if (r != NULL) release_record(rt, rt->ticks, r);
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_tick_unregister_object(zs_runtime *rt, zs_ref object, uint32_t *out_count) {
    uint32_t count = 0;
    ZS_LOCK(rt);
    zs_ticks *t = rt->ticks;
    for (uint32_t i = 0; t != NULL && object != ZS_NULL_REF && i < t->high_water; i++)
        if ((t->records[i].flags & TICK_IN_USE) && t->records[i].object == object) {
            release_record(rt, t, &t->records[i]);
            count++;
        }
    ZS_UNLOCK(rt);
    if (out_count != NULL) *out_count = count;
    return object == ZS_NULL_REF ? ZS_E_INVALID : ZS_OK;
}

zs_status zs_tick_set_enabled(zs_runtime *rt, zs_tick tick, int enabled) {
    zs_status status = ZS_OK;
    ZS_LOCK(rt);
    tick_record *r = record_of(rt, tick, &status);
    if (r != NULL) r->flags = enabled ? r->flags | TICK_ENABLED : r->flags & ~TICK_ENABLED;
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_tick_set_interval(zs_runtime *rt, zs_tick tick, double seconds) {
    if (!(seconds >= 0) || !isfinite(seconds)) return ZS_E_INVALID;
    zs_status status = ZS_OK;
    ZS_LOCK(rt);
    tick_record *r = record_of(rt, tick, &status);
    if (r != NULL) r->interval = seconds;
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_tick_set_group(zs_runtime *rt, zs_tick tick, uint32_t group) {
    if (group >= ZS_TICK_GROUP_COUNT) return ZS_E_INVALID;
    zs_status status = ZS_OK;
    ZS_LOCK(rt);
    tick_record *r = record_of(rt, tick, &status);
    if (r != NULL && r->group != group) {
        r->group = group;
        rt->ticks->dirty = true;
    }
    ZS_UNLOCK(rt);
    return status;
}

/* Whether `from` ticks after `to`, through prerequisites (its own, theirs,
   and so on; stale ones ignored): a walk with a stack of at most `live`
   entries, each record entered once (its `seen` set to a new epoch).
   *status ZS_E_NOMEM when the stack cannot be had. */
static bool depends_on(zs_runtime *rt, zs_ticks *t, tick_record *from, const tick_record *to,
                       zs_status *status) {
    uint32_t *stack = zs_alloc(rt, (size_t)t->live * sizeof *stack);
    if (stack == NULL) {
        *status = ZS_E_NOMEM;
        return false;
    }
    if (++t->epoch == 0) { /* wrapped: forget every old epoch */
        for (uint32_t i = 0; i < t->high_water; i++) t->records[i].seen = 0;
        t->epoch = 1;
    }
    uint32_t depth = 0;
    bool found = false;
    from->seen = t->epoch;
    stack[depth++] = (uint32_t)(from - t->records);
    while (depth > 0 && !found) {
        const tick_record *r = &t->records[stack[--depth]];
        for (uint32_t i = 0; i < r->prerequisite_count && !found; i++) {
            tick_record *p = live_record(t, r->prerequisites[i]);
            if (p == NULL || p->seen == t->epoch) continue;
            found = p == to;
            p->seen = t->epoch;
            assert(depth < t->live);
            stack[depth++] = (uint32_t)(p - t->records);
        }
    }
    zs_free(rt, stack, (size_t)t->live * sizeof *stack);
    return found;
}

zs_status zs_tick_add_prerequisite(zs_runtime *rt, zs_tick tick, zs_tick prerequisite) {
    zs_status status = ZS_OK;
    ZS_LOCK(rt);
    tick_record *r = record_of(rt, tick, &status);
    tick_record *p = r != NULL ? record_of(rt, prerequisite, &status) : NULL;
    r = p != NULL ? live_record(rt->ticks, tick) : NULL; /* p's check may have dropped r */
    if (p != NULL && r == NULL) status = ZS_E_STALE;
    bool known = false;
    for (uint32_t i = 0; r != NULL && i < r->prerequisite_count; i++)
        known |= r->prerequisites[i] == prerequisite;
    zs_ticks *t = rt->ticks;
    if (r != NULL && !known) {
        if (r == p || depends_on(rt, t, p, r, &status)) status = ZS_E_INVALID;
        if (status == ZS_OK && r->prerequisite_count == r->prerequisite_capacity) {
            uint32_t capacity = r->prerequisite_capacity ? r->prerequisite_capacity * 2 : 2;
            zs_tick *grown = zs_realloc(rt, r->prerequisites,
                                        (size_t)r->prerequisite_capacity * sizeof *grown,
                                        (size_t)capacity * sizeof *grown);
            if (grown == NULL) status = ZS_E_NOMEM;
            else {
                r->prerequisites = grown;
                r->prerequisite_capacity = capacity;
            }
        }
        if (status == ZS_OK) {
            r->prerequisites[r->prerequisite_count++] = prerequisite;
            t->dirty = true;
        }
    }
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_tick_remove_prerequisite(zs_runtime *rt, zs_tick tick, zs_tick prerequisite) {
    zs_status status = ZS_OK;
    ZS_LOCK(rt);
    tick_record *r = record_of(rt, tick, &status);
    uint32_t at = UINT32_MAX;
    for (uint32_t i = 0; r != NULL && i < r->prerequisite_count && at == UINT32_MAX; i++)
        if (r->prerequisites[i] == prerequisite) at = i;
    if (r != NULL && at == UINT32_MAX) status = ZS_E_INVALID;
    if (at != UINT32_MAX) {
        memmove(&r->prerequisites[at], &r->prerequisites[at + 1],
                (size_t)(r->prerequisite_count - at - 1) * sizeof *r->prerequisites);
        r->prerequisite_count--;
        rt->ticks->dirty = true;
    }
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_tick_get_info(zs_runtime *rt, zs_tick tick, zs_tick_info *out) {
    if (out == NULL) return ZS_E_INVALID;
    memset(out, 0, sizeof *out);
    zs_status status = ZS_OK;
    ZS_LOCK(rt);
    tick_record *r = record_of(rt, tick, &status);
    if (r != NULL) {
        uint32_t live = 0;
        for (uint32_t i = 0; i < r->prerequisite_count; i++)
            live += live_record(rt->ticks, r->prerequisites[i]) != NULL;
        out->object = r->object;
        out->group = r->group;
        out->actual_group = r->actual_group;
        out->interval = r->interval;
        out->elapsed = r->elapsed;
        out->calls = r->calls;
        out->enabled = (r->flags & TICK_ENABLED) != 0;
        out->prerequisite_count = live;
        out->by_name = r->name != 0;
    }
    ZS_UNLOCK(rt);
    return status;
}

uint32_t zs_tick_count(zs_runtime *rt) {
    ZS_LOCK(rt);
    uint32_t live = rt->ticks != NULL ? rt->ticks->live : 0;
    ZS_UNLOCK(rt);
    return live;
}

void zs_frame_gc_defaults(zs_frame_gc *out) {
    memset(out, 0, sizeof *out);
    out->seconds_between_cycles = 1.0;
    out->mark_budget_ns = 2000000u;
    out->purge_budget_ns = 2000000u;
}

/* ======================================================================
 * The order
 * ====================================================================== */

/* One entry of build_order's walks: a record and the next of its
   prerequisites to look at. */
typedef struct walk_entry {
    uint32_t index;
    uint32_t next;
} walk_entry;

/* Set the actual group of every record reachable from `start` through
   prerequisites (post-order: a record's after its prerequisites'). The
   graph has no cycle: zs_tick_add_prerequisite refuses one. */
static void settle_groups(zs_ticks *t, uint32_t start, walk_entry *stack) {
    uint32_t depth = 0;
    t->records[start].flags |= TICK_VISITED;
    stack[depth++] = (walk_entry){start, 0};
    while (depth > 0) {
        walk_entry *top = &stack[depth - 1];
        tick_record *r = &t->records[top->index];
        if (top->next < r->prerequisite_count) {
            tick_record *p = live_record(t, r->prerequisites[top->next++]);
            if (p == NULL) continue;
            if (!(p->flags & TICK_VISITED)) {
                p->flags |= TICK_VISITED;
                stack[depth++] = (walk_entry){(uint32_t)(p - t->records), 0};
            } else {
                assert(p->flags & TICK_DONE); /* visited but not done: a cycle */
            }
            continue;
        }
        r->actual_group = r->group;
        for (uint32_t i = 0; i < r->prerequisite_count; i++) {
            const tick_record *p = live_record(t, r->prerequisites[i]);
            if (p != NULL && p->actual_group > r->actual_group) r->actual_group = p->actual_group;
        }
        r->flags |= TICK_DONE;
        depth--;
    }
}

/* Append `start` to the order after its not yet placed prerequisites of
   the same actual group (post-order), each once. */
static void emit(zs_ticks *t, uint32_t start, walk_entry *stack) {
    uint32_t depth = 0;
    uint32_t group = t->records[start].actual_group;
    t->records[start].flags |= TICK_EMITTED;
    stack[depth++] = (walk_entry){start, 0};
    while (depth > 0) {
        walk_entry *top = &stack[depth - 1];
        tick_record *r = &t->records[top->index];
        if (top->next < r->prerequisite_count) {
            tick_record *p = live_record(t, r->prerequisites[top->next++]);
            if (p != NULL && !(p->flags & TICK_EMITTED) && p->actual_group == group) {
                p->flags |= TICK_EMITTED;
                stack[depth++] = (walk_entry){(uint32_t)(p - t->records), 0};
            }
            continue;
        }
        t->order[t->order_count++] = handle_of(t, r);
        depth--;
    }
}

/* Build the frame's order (no frame runs): first unregister the records
   whose object was freed (counted in *unregistered) and drop stale
   prerequisites. ZS_E_NOMEM leaves the old order (and dirty set). */
static zs_status build_order(zs_runtime *rt, zs_ticks *t, uint32_t *unregistered) {
    assert(!t->in_frame);
    for (uint32_t i = 0; i < t->high_water; i++) {
        tick_record *r = &t->records[i];
        if (!(r->flags & TICK_IN_USE)) continue;
        if (zs_item_of(rt, r->object) == NULL) {
            release_record(rt, t, r);
            (*unregistered)++;
        }
    }
    for (uint32_t i = 0; i < t->high_water; i++) {
        tick_record *r = &t->records[i];
        uint32_t kept = 0;
        for (uint32_t k = 0; k < r->prerequisite_count; k++)
            if (live_record(t, r->prerequisites[k]) != NULL)
                r->prerequisites[kept++] = r->prerequisites[k];
        r->prerequisite_count = kept;
        r->flags &= ~(TICK_VISITED | TICK_DONE | TICK_EMITTED);
    }
    if (t->live > t->order_capacity) {
        zs_tick *grown = zs_realloc(rt, t->order, (size_t)t->order_capacity * sizeof *grown,
                                    (size_t)t->live * sizeof *grown);
        if (grown == NULL) return ZS_E_NOMEM;
        t->order = grown;
        t->order_capacity = t->live;
    }
    size_t stack_size = (size_t)(t->live ? t->live : 1) * sizeof(walk_entry);
    walk_entry *stack = zs_alloc(rt, stack_size);
    if (stack == NULL) return ZS_E_NOMEM;
    for (uint32_t at = t->oldest; at != 0; at = t->records[at - 1].newer)
        if (!(t->records[at - 1].flags & TICK_VISITED)) settle_groups(t, at - 1, stack);
    t->order_count = 0;
    for (uint32_t group = 0; group < ZS_TICK_GROUP_COUNT; group++)
        for (uint32_t at = t->oldest; at != 0; at = t->records[at - 1].newer) {
            const tick_record *r = &t->records[at - 1];
            if (r->actual_group == group && !(r->flags & TICK_EMITTED)) emit(t, at - 1, stack);
        }
    assert(t->order_count == t->live);
    zs_free(rt, stack, stack_size);
    t->dirty = false;
    return ZS_OK;
}

/* ======================================================================
 * The frame
 * ====================================================================== */

/* zs_free_pending (calls.c) inline, with the lock held: the frame asks it
   before each function. */
static inline bool free_pending(const zs_runtime *rt) {
    return (__atomic_load_n(&rt->calls_word, __ATOMIC_RELAXED) & ZS_CALLS_FREE_PENDING) != 0;
}

/* Check one tick function of the frame's order and find what runs (lock
   held): KIND_NONE, counted in `stats`, when it does not tick now. A due
   function's time is handed to it in `params` and counted from 0 again. */
static void visit(zs_runtime *rt, zs_ticks *t, zs_tick tick, double delta, zs_tick_params *params,
                  tick_call *call, zs_frame_stats *stats) {
    call->kind = KIND_NONE;
    tick_record *r = live_record(t, tick);
    if (r == NULL) { /* unregistered during the frame */
        stats->skipped++;
        return;
    }
    zs_item *it = zs_item_of(rt, r->object);
    if (it == NULL) { /* freed: unregistered now */
        release_record(rt, t, r);
        stats->unregistered++;
        return;
    }
    if ((it->flags & ZS_ITEM_GARBAGE) || zs_item_dying(rt, it)) {
        stats->skipped++;
        return;
    }
    if (!(r->flags & TICK_ENABLED)) {
        stats->disabled++;
        return;
    }
    r->elapsed += delta;
    if (r->interval > 0 && r->elapsed < r->interval * (1.0 - INTERVAL_SLACK)) {
        stats->waiting++;
        return;
    }
    *params = (zs_tick_params){r->elapsed, t->frame, tick, r->actual_group, 0};
    r->elapsed = 0;
    r->calls++;
    call->object = r->object;
    call->function = r->name != 0 ? t->names[r->name - 1] : NULL;
    if (r->entry != NULL) {
        call->kind = KIND_ENTRY;
        call->entry = r->entry;
        call->user = r->user;
    } else if (rt->call_handler != NULL) {
        call->kind = KIND_HANDLER;
        call->handler = rt->call_handler;
        call->user = rt->call_handler_user;
    } else if (goes_to_script(rt, it->object->cls)) {
        /* As zs_call_function: the object is recorded as having a
           conjugate under the lock that checked it. */
        it->flags |= ZS_ITEM_HAS_CONJUGATE;
        call->kind = KIND_MANAGED;
        call->managed = rt->managed_call_handler;
        call->user = rt->call_handler_user;
        call->target = it->object;
    } else {
        if (r->native == NULL) r->native = native_function(it->object->cls, call->function);
        call->kind = r->native == NULL          ? KIND_REFUSED
                     : r->native->entry == NULL ? KIND_NOTHING
                                                : KIND_ENTRY;
        call->status = ZS_E_INVALID;
        if (call->kind == KIND_ENTRY) {
            call->entry = r->native->entry;
            call->user = r->native->user;
        }
    }
}

/* Make the call visit found, with no lock. */
static zs_status run(zs_runtime *rt, const tick_call *call, zs_tick_params *params) {
    switch (call->kind) {
    case KIND_ENTRY:
        return call->entry(call->user, rt, call->object, params);
    case KIND_HANDLER:
        return call->handler(call->user, rt, call->object, call->function, params);
    case KIND_MANAGED:
        return call->managed(call->user, rt, call->object, call->target, call->function, params);
    case KIND_REFUSED:
        return call->status;
    default:
        return ZS_OK;
    }
}

/* Advance the pending incremental cycle by one step (no lock held), as
   zsharp_py's gc.step does: the mark (and gather) within the budget; once
   it is complete, the purge, which hands the dying objects to the expiry
   handler first, with what the budget leaves (a step that did nothing
   else purges a few objects all the same). *out_done: the cycle is
   complete. */
static zs_status gc_step(zs_runtime *rt, uint64_t budget_ns, uint32_t max_objects, bool *out_done) {
    *out_done = false;
    uint64_t deadline = budget_ns != 0 ? zs_now_ns() + budget_ns : 0;
    zs_gc_phase phase = zs_gc_phase_of(rt);
    bool progressed = false;
    if (phase == ZS_GC_MARKING || phase == ZS_GC_GATHERING) {
        int done = 0;
        zs_status status = zs_gc_step_bounded(rt, budget_ns, max_objects, &done);
        if (status != ZS_OK || !done) return status;
        progressed = true;
    }
    if (zs_gc_phase_of(rt) != ZS_GC_PURGE_PENDING) {
        *out_done = true;
        return ZS_OK;
    }
    uint64_t remaining = budget_ns;
    if (deadline != 0) {
        uint64_t now = zs_now_ns();
        if (now < deadline) remaining = deadline - now;
        else if (progressed) return ZS_OK;
        else remaining = 1;
    }
    int done = 0;
    zs_status status = zs_gc_purge_bounded(rt, remaining, max_objects, &done);
    if (status == ZS_E_EXPIRY_PENDING) return ZS_OK; /* no handler took them: the next step */
    *out_done = done != 0;
    return status;
}

/* The collector's share of a frame, after gc.tick's rules (no lock held). */
static zs_frame_gc_result frame_gc(zs_runtime *rt, double delta, const zs_frame_gc *gc,
                                   zs_status *out_status) {
    ZS_LOCK(rt);
    zs_ticks *t = rt->ticks;
    bool idle = rt->phase == ZS_GC_IDLE;
    t->since_gc += delta;
    bool due = idle && t->since_gc >= gc->seconds_between_cycles;
    if (due) t->since_gc = 0;
    bool purging = rt->phase == ZS_GC_PURGE_PENDING;
    ZS_UNLOCK(rt);
    if (idle && !due) return ZS_FRAME_GC_IDLE;
    if (idle) {
        *out_status = zs_gc_start_incremental(rt);
        if (*out_status != ZS_OK) return ZS_FRAME_GC_NONE;
    }
    bool done = false;
    uint64_t budget = gc->objects_per_frame != 0 ? 0
                      : purging                  ? gc->purge_budget_ns
                                                 : gc->mark_budget_ns;
    *out_status = gc_step(rt, budget, gc->objects_per_frame, &done);
    return done ? ZS_FRAME_GC_FINISHED : idle ? ZS_FRAME_GC_STARTED : ZS_FRAME_GC_ADVANCED;
}

zs_status zs_tick_frame(zs_runtime *rt, double delta_seconds, const zs_frame_gc *gc,
                        zs_frame_stats *out) {
    zs_frame_stats stats;
    memset(&stats, 0, sizeof stats);
    if (out != NULL) *out = stats;
    if (!(delta_seconds >= 0) || !isfinite(delta_seconds)) return ZS_E_INVALID;
    if (gc != NULL && (!(gc->seconds_between_cycles >= 0) || isnan(gc->seconds_between_cycles)))
        return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = rt->in_destroy_hook ? ZS_E_BUSY : zs_free_pending(rt) ? ZS_E_STALE : ZS_OK;
    zs_ticks *t = status == ZS_OK ? ticks_of(rt, true) : NULL;
    if (status == ZS_OK && t == NULL) status = ZS_E_NOMEM;
    if (status == ZS_OK && t->in_frame) status = ZS_E_BUSY;
    if (status == ZS_OK && t->dirty) status = build_order(rt, t, &stats.unregistered);
    if (status == ZS_OK) {
        t->in_frame = true;
        t->frame++;
        t->time += delta_seconds;
        stats.frame = t->frame;
        zs_call_enter(rt); /* zs_runtime_free meanwhile waits for the frame */
    }
    uint32_t count = status == ZS_OK ? t->order_count : 0;
    ZS_UNLOCK(rt);
    if (status != ZS_OK) {
        if (out != NULL) *out = stats;
        return status;
    }
    uint64_t start = zs_now_ns();
    bool freeing = false;
    /* Filled by visit for each function (made once: a frame's hot loop). */
    zs_tick_params params = {0};
    tick_call call = {.kind = KIND_NONE};
    for (uint32_t i = 0; i < count; i++) {
        ZS_LOCK(rt);
        freeing = free_pending(rt); /* the functions left are not called */
        if (!freeing) visit(rt, t, t->order[i], delta_seconds, &params, &call, &stats);
        ZS_UNLOCK(rt);
        if (freeing) break;
        if (call.kind == KIND_NONE) continue;
        zs_status one = run(rt, &call, &params);
        if (one == ZS_E_STALE || one == ZS_E_DYING) { /* gone before its call */
            stats.skipped++;
            continue;
        }
        stats.ticked += call.kind != KIND_REFUSED;
        if (one != ZS_OK) {
            stats.failed++;
            if (stats.first_failure == ZS_OK) stats.first_failure = one;
        }
    }
    uint64_t ticked_at = zs_now_ns();
    stats.tick_ns = ticked_at - start;
    ZS_LOCK(rt);
    freeing = zs_free_pending(rt);
    ZS_UNLOCK(rt);
    if (gc != NULL && !freeing) {
        stats.gc = frame_gc(rt, delta_seconds, gc, &stats.gc_status);
        stats.gc_ns = zs_now_ns() - ticked_at;
    }
    ZS_LOCK(rt);
    t->in_frame = false;
    stats.time = t->time;
    ZS_UNLOCK(rt);
    if (out != NULL) *out = stats;
    zs_call_leave(rt); /* may free rt: a zs_runtime_free ran during the frame */
    return ZS_OK;
}
