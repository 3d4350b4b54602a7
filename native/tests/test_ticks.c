/*
 * test_ticks.c -- the tick manager (native/src/ticks.c) with no scripting
 * layer: group order, prerequisites (cycles refused, a later group moving
 * the dependent), intervals, enable and disable, and what a tick function
 * may do to the frame that calls it: destroy, mark as garbage or collect
 * other objects, register and unregister tick functions, free the runtime,
 * start another frame. Functions named on a described class run its
 * native entry; a plain call handler gets every named one; the managed
 * call handler only those of ZS_CLASS_SCRIPT classes. The heap is verified
 * after the frames that collect; `make sanitize` runs it all under
 * AddressSanitizer, UndefinedBehaviorSanitizer and LeakSanitizer.
 */
#include "test_support.h"
#include "zsharp_managed.h" /* the managed call handler, played by a test */

#include <math.h>
#include <threads.h>

/* ---- a log of what the frame called ------------------------------------ */

#define LOG_CAPACITY 4096u
#define ACTORS 16u

struct frame_log;
/* Something a tick function does once (before it logs itself). */
typedef void (*tick_action)(struct frame_log *log, zs_runtime *rt, zs_ref self);

typedef struct frame_log {
    uint32_t count;
    uint64_t ids[LOG_CAPACITY]; /* the payload of each object called, in order */
    double dts[LOG_CAPACITY];
    uint32_t groups[LOG_CAPACITY];
    zs_ref actors[ACTORS];    /* payload i is actors[i] */
    zs_tick ticks[ACTORS];    /* their tick functions, when the test keeps them */
    tick_action act[ACTORS];  /* run once by actor i's next tick */
    zs_status result[ACTORS]; /* what actor i's tick returns */
    zs_tick made;             /* registered by an action */
    zs_status status;         /* an action's result */
    const zs_class *node;
    runner *t; /* the running test, for an action that starts a thread */
} frame_log;

/* The native tick function of every test: run the object's action (a
   node's, by its payload), then, if the object is still there, log the
   payload (ACTORS for an object of another class), its dt and its group. */
static zs_status logged_tick(void *user, zs_runtime *rt, zs_ref self, void *params) {
    frame_log *log = user;
    const zs_tick_params *p = params;
    const zs_object *o = zs_resolve(rt, self);
    if (o == NULL) return ZS_E_STALE;
    uint64_t id = log->node != NULL && o->cls == log->node ? ((const node *)o)->payload : ACTORS;
    if (id < ACTORS && log->act[id] != NULL) {
        tick_action act = log->act[id];
        log->act[id] = NULL;
        act(log, rt, self); /* may free self */
        if (zs_resolve(rt, self) == NULL) return ZS_E_STALE;
    }
    if (log->count < LOG_CAPACITY) {
        log->ids[log->count] = id;
        log->dts[log->count] = p->delta_seconds;
        log->groups[log->count] = p->group;
        log->count++;
    }
    return id < ACTORS ? log->result[id] : ZS_OK;
}

/* `count` rooted nodes whose payloads are 0 .. count-1. */
static void make_actors(runner *t, fixture *fx, frame_log *log, uint32_t count) {
    memset(log, 0, sizeof *log);
    log->node = fx->node;
    for (uint32_t i = 0; i < count; i++) {
        log->actors[i] = MAKE(t, fx->rt, fx->node, ZS_NULL_REF);
        ROOT(t, fx->rt, log->actors[i]);
        node *n = node_of(fx->rt, log->actors[i]);
        if (n != NULL) n->payload = i;
    }
}

/* Register actor i's native tick function in `group` every `interval` s. */
static zs_tick add_tick(runner *t, zs_runtime *rt, frame_log *log, uint32_t i, uint32_t group,
                        double interval) {
    zs_tick_desc desc = {.object = log->actors[i],
                         .entry = logged_tick,
                         .user = log,
                         .group = group,
                         .interval = interval};
    zs_tick tick = 0;
    CHECK_OK(t, zs_tick_register(rt, &desc, &tick));
    CHECK(t, tick != 0);
    log->ticks[i] = tick;
    return tick;
}

/* Run one frame of `dt` (no collection), checking it ran. */
static zs_frame_stats frame(runner *t, zs_runtime *rt, double dt) {
    zs_frame_stats stats;
    CHECK_OK(t, zs_tick_frame(rt, dt, NULL, &stats));
    return stats;
}

/* Whether the log holds exactly the payloads `want` (count of them), in order. */
static bool logged(const frame_log *log, const uint64_t *want, uint32_t count) {
    if (log->count != count) return false;
    for (uint32_t i = 0; i < count; i++)
        if (log->ids[i] != want[i]) return false;
    return true;
}

/* ---- order ------------------------------------------------------------- */

/* Groups tick in order; within a group, in registration order. */
static void test_ticks_group_order(runner *t) {
    fixture fx;
    frame_log log;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    make_actors(t, &fx, &log, 6);
    add_tick(t, rt, &log, 0, ZS_TICK_POST_UPDATE_WORK, 0);
    add_tick(t, rt, &log, 1, ZS_TICK_PRE_PHYSICS, 0);
    add_tick(t, rt, &log, 2, ZS_TICK_POST_PHYSICS, 0);
    add_tick(t, rt, &log, 3, ZS_TICK_PRE_PHYSICS, 0);
    add_tick(t, rt, &log, 4, ZS_TICK_DURING_PHYSICS, 0);
    add_tick(t, rt, &log, 5, ZS_TICK_POST_PHYSICS, 0);
    CHECK_EQ(t, zs_tick_count(rt), 6);
    zs_frame_stats stats = frame(t, rt, 0.5);
    const uint64_t want[] = {1, 3, 4, 2, 5, 0};
    CHECK(t, logged(&log, want, 6));
    CHECK_EQ(t, log.groups[0], ZS_TICK_PRE_PHYSICS);
    CHECK_EQ(t, log.groups[5], ZS_TICK_POST_UPDATE_WORK);
    CHECK_EQ(t, stats.frame, 1);
    CHECK_EQ(t, stats.ticked, 6);
    CHECK(t, stats.time == 0.5 && log.dts[0] == 0.5);
    CHECK_EQ(t, stats.failed + stats.waiting + stats.disabled + stats.skipped, 0);

    /* moving one: from the next frame */
    CHECK_OK(t, zs_tick_set_group(rt, log.ticks[0], ZS_TICK_PRE_PHYSICS));
    log.count = 0;
    stats = frame(t, rt, 0.25);
    const uint64_t moved[] = {0, 1, 3, 4, 2, 5}; /* registration order within the group */
    CHECK(t, logged(&log, moved, 6));
    CHECK_EQ(t, stats.frame, 2);
    CHECK(t, stats.time == 0.75);
    CHECK_STATUS(t, zs_tick_set_group(rt, log.ticks[0], ZS_TICK_GROUP_COUNT), ZS_E_INVALID);
    fixture_close(&fx);
}

/* A function ticks after its prerequisites; one in a later group moves the
   dependent there; cycles are refused; a prerequisite that does not tick
   holds nothing back; an unregistered one is forgotten. */
static void test_ticks_prerequisites(runner *t) {
    fixture fx;
    frame_log log;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    make_actors(t, &fx, &log, 5);
    zs_tick a = add_tick(t, rt, &log, 0, ZS_TICK_PRE_PHYSICS, 0);
    zs_tick b = add_tick(t, rt, &log, 1, ZS_TICK_PRE_PHYSICS, 0);
    zs_tick c = add_tick(t, rt, &log, 2, ZS_TICK_PRE_PHYSICS, 0);
    zs_tick d = add_tick(t, rt, &log, 3, ZS_TICK_POST_PHYSICS, 0);
    zs_tick e = add_tick(t, rt, &log, 4, ZS_TICK_DURING_PHYSICS, 0);
    CHECK_OK(t, zs_tick_add_prerequisite(rt, a, c)); /* a after c */
    CHECK_OK(t, zs_tick_add_prerequisite(rt, c, b)); /* c after b */
    CHECK_OK(t, zs_tick_add_prerequisite(rt, a, c)); /* twice: nothing more */
    zs_tick_info info;
    CHECK_OK(t, zs_tick_get_info(rt, a, &info));
    CHECK_EQ(t, info.prerequisite_count, 1);
    /* cycles: itself, directly, through a chain */
    CHECK_STATUS(t, zs_tick_add_prerequisite(rt, a, a), ZS_E_INVALID);
    CHECK_STATUS(t, zs_tick_add_prerequisite(rt, c, a), ZS_E_INVALID);
    CHECK_STATUS(t, zs_tick_add_prerequisite(rt, b, a), ZS_E_INVALID);
    CHECK_OK(t, zs_tick_add_prerequisite(rt, b, e)); /* b after e, which is later: b, c, a move */
    frame(t, rt, 0.1);
    const uint64_t want[] = {4, 1, 2, 0, 3};
    CHECK(t, logged(&log, want, 5));
    CHECK_OK(t, zs_tick_get_info(rt, a, &info));
    CHECK_EQ(t, info.group, ZS_TICK_PRE_PHYSICS);
    CHECK_EQ(t, info.actual_group, ZS_TICK_DURING_PHYSICS);
    CHECK_EQ(t, log.groups[3], ZS_TICK_DURING_PHYSICS); /* a is told where it ticks */

    /* a prerequisite that does not tick (disabled) holds nothing back */
    CHECK_OK(t, zs_tick_set_enabled(rt, e, 0));
    log.count = 0;
    zs_frame_stats stats = frame(t, rt, 0.1);
    const uint64_t without_e[] = {1, 2, 0, 3};
    CHECK(t, logged(&log, without_e, 4));
    CHECK_EQ(t, stats.disabled, 1);

    /* removed and unregistered prerequisites: the order goes back */
    CHECK_OK(t, zs_tick_remove_prerequisite(rt, b, e));
    CHECK_STATUS(t, zs_tick_remove_prerequisite(rt, b, e), ZS_E_INVALID);
    CHECK_OK(t, zs_tick_unregister(rt, c));
    CHECK_STATUS(t, zs_tick_unregister(rt, c), ZS_E_STALE);
    CHECK_STATUS(t, zs_tick_add_prerequisite(rt, a, c), ZS_E_STALE);
    log.count = 0;
    frame(t, rt, 0.1);
    const uint64_t back[] = {0, 1, 3};
    CHECK(t, logged(&log, back, 3));
    CHECK_OK(t, zs_tick_get_info(rt, a, &info));
    CHECK_EQ(t, info.prerequisite_count, 0);
    CHECK_EQ(t, info.actual_group, ZS_TICK_PRE_PHYSICS);
    /* a dependent of a later group's function, and the reverse */
    CHECK_OK(t, zs_tick_add_prerequisite(rt, d, a)); /* d (post) after a (pre): stays */
    CHECK_STATUS(t, zs_tick_add_prerequisite(rt, a, d), ZS_E_INVALID);
    log.count = 0;
    frame(t, rt, 0.1);
    CHECK(t, logged(&log, back, 3));
    fixture_close(&fx);
}

/* Many functions, random groups and random prerequisites (each on an
   older one, so no cycle): every function ticks once, after each of its
   prerequisites, in non-decreasing actual groups. */
static void test_ticks_random_order(runner *t) {
    enum { N = 300 };
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    frame_log *log = calloc(1, sizeof *log);
    zs_tick *ticks = calloc(N, sizeof *ticks);
    uint32_t (*edges)[2] = calloc(N * 3, sizeof *edges);
    uint32_t *position = calloc(N, sizeof *position);
    if (log == NULL || ticks == NULL || edges == NULL || position == NULL) goto done;
    log->node = fx.node;
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    uint32_t edge_count = 0;
    for (uint32_t i = 0; i < N; i++) {
        zs_ref obj = MAKE(t, rt, fx.node, ZS_NULL_REF);
        ROOT(t, rt, obj);
        node_of(rt, obj)->payload = i;
        zs_tick_desc desc = {.object = obj,
                             .entry = logged_tick,
                             .user = log,
                             .group = rand_below(&seed, ZS_TICK_GROUP_COUNT)};
        CHECK_OK(t, zs_tick_register(rt, &desc, &ticks[i]));
        for (uint32_t k = 0; i > 0 && k < 3; k++) {
            uint32_t p = rand_below(&seed, i);
            CHECK_OK(t, zs_tick_add_prerequisite(rt, ticks[i], ticks[p]));
            edges[edge_count][0] = p;
            edges[edge_count][1] = i;
            edge_count++;
            /* the reverse would close a cycle */
            CHECK_STATUS(t, zs_tick_add_prerequisite(rt, ticks[p], ticks[i]), ZS_E_INVALID);
        }
    }
    frame(t, rt, 1.0 / 60);
    CHECK_EQ(t, log->count, N);
    for (uint32_t k = 0; k < log->count; k++) position[log->ids[k]] = k + 1;
    for (uint32_t i = 0; i < N; i++) CHECK(t, position[i] != 0);
    for (uint32_t k = 0; k < edge_count; k++)
        CHECK(t, position[edges[k][0]] < position[edges[k][1]]);
    for (uint32_t k = 1; k < log->count; k++) CHECK(t, log->groups[k - 1] <= log->groups[k]);
done:
    free(position);
    free(edges);
    free(ticks);
    free(log);
    fixture_close(&fx);
}

/* ---- time -------------------------------------------------------------- */

/* A function with an interval ticks once its enabled time reaches it, and
   is given that time: the times given add up to the time it was enabled. */
static void test_ticks_intervals(runner *t) {
    fixture fx;
    frame_log log;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    make_actors(t, &fx, &log, 3);
    add_tick(t, rt, &log, 0, ZS_TICK_PRE_PHYSICS, 0.5);
    add_tick(t, rt, &log, 1, ZS_TICK_PRE_PHYSICS, 0.1);
    add_tick(t, rt, &log, 2, ZS_TICK_PRE_PHYSICS, 0);
    uint32_t ticks[3] = {0};
    double given[3] = {0};
    uint32_t waiting = 0;
    for (int f = 0; f < 60; f++) { /* one second of frames of 1/60 s */
        log.count = 0;
        zs_frame_stats stats = frame(t, rt, 1.0 / 60);
        waiting += stats.waiting;
        for (uint32_t k = 0; k < log.count; k++) {
            ticks[log.ids[k]]++;
            given[log.ids[k]] += log.dts[k];
        }
    }
    CHECK_EQ(t, ticks[0], 2);  /* at 0.5 s and 1.0 s */
    CHECK_EQ(t, ticks[1], 10); /* every six frames: 0.1 s within a billionth */
    CHECK_EQ(t, ticks[2], 60);
    CHECK_EQ(t, waiting, 58 + 50);
    CHECK(t, fabs(given[0] - 1.0) < 1e-9 && fabs(given[1] - 1.0) < 1e-9);
    CHECK(t, fabs(given[2] - 1.0) < 1e-9);

    /* disabled time does not count; a new interval applies at once */
    CHECK_OK(t, zs_tick_set_enabled(rt, log.ticks[0], 0));
    for (int f = 0; f < 3; f++) frame(t, rt, 0.25);
    CHECK_OK(t, zs_tick_set_enabled(rt, log.ticks[0], 1));
    CHECK_OK(t, zs_tick_set_interval(rt, log.ticks[0], 0.25));
    zs_tick_info info;
    CHECK_OK(t, zs_tick_get_info(rt, log.ticks[0], &info));
    CHECK(t, info.elapsed == 0 && info.interval == 0.25 && info.enabled && info.calls == 2);
    log.count = 0;
    frame(t, rt, 0.25);
    CHECK(t, log.count >= 1 && log.ids[0] == 0 && log.dts[0] == 0.25);
    CHECK_STATUS(t, zs_tick_set_interval(rt, log.ticks[0], -1), ZS_E_INVALID);
    CHECK_STATUS(t, zs_tick_set_interval(rt, log.ticks[0], NAN), ZS_E_INVALID);
    CHECK_STATUS(t, zs_tick_set_interval(rt, log.ticks[0], INFINITY), ZS_E_INVALID);
    zs_frame_stats stats;
    CHECK_STATUS(t, zs_tick_frame(rt, -0.1, NULL, &stats), ZS_E_INVALID);
    CHECK_STATUS(t, zs_tick_frame(rt, NAN, NULL, &stats), ZS_E_INVALID);
    CHECK_STATUS(t, zs_tick_frame(rt, INFINITY, NULL, NULL), ZS_E_INVALID);
    CHECK_OK(t, zs_tick_frame(rt, 0, NULL, NULL)); /* a frame of no time: every-frame ones tick */
    fixture_close(&fx);
}

/* ---- changes during a frame -------------------------------------------- */

static void disable_actor_3(frame_log *log, zs_runtime *rt, zs_ref self) {
    (void)self;
    log->status = zs_tick_set_enabled(rt, log->ticks[3], 0);
}

static void enable_actor_3(frame_log *log, zs_runtime *rt, zs_ref self) {
    (void)self;
    log->status = zs_tick_set_enabled(rt, log->ticks[3], 1);
}

static void unregister_actor_2_and_register_5(frame_log *log, zs_runtime *rt, zs_ref self) {
    (void)self;
    log->status = zs_tick_unregister(rt, log->ticks[2]);
    /* the new one takes actor 2's slot: its old handle stays stale */
    zs_tick_desc desc = {.object = log->actors[5], .entry = logged_tick, .user = log};
    if (log->status == ZS_OK) log->status = zs_tick_register(rt, &desc, &log->made);
}

static void unregister_self(frame_log *log, zs_runtime *rt, zs_ref self) {
    uint32_t count = 0;
    log->status = zs_tick_unregister_object(rt, self, &count);
    if (count != 1) log->status = ZS_E_CORRUPT;
}

static void nested_frame(frame_log *log, zs_runtime *rt, zs_ref self) {
    (void)self;
    zs_frame_stats stats;
    log->status = zs_tick_frame(rt, 1.0, NULL, &stats);
}

/* Disabling and unregistering take effect at once, enabling when the frame
   reaches the function, registering from the next frame; a frame inside
   a tick is refused. */
static void test_ticks_changed_during_a_frame(runner *t) {
    fixture fx;
    frame_log log;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    make_actors(t, &fx, &log, 6);
    for (uint32_t i = 0; i < 5; i++) add_tick(t, rt, &log, i, ZS_TICK_PRE_PHYSICS, 0);

    log.act[0] = disable_actor_3;
    frame(t, rt, 0.1);
    const uint64_t without_3[] = {0, 1, 2, 4};
    CHECK(t, logged(&log, without_3, 4));
    CHECK_OK(t, log.status);

    log.count = 0;
    log.act[1] = enable_actor_3;
    zs_frame_stats stats = frame(t, rt, 0.1);
    const uint64_t all[] = {0, 1, 2, 3, 4};
    CHECK(t, logged(&log, all, 5));
    CHECK_EQ(t, stats.disabled, 0);

    log.count = 0;
    log.act[1] = unregister_actor_2_and_register_5;
    stats = frame(t, rt, 0.1);
    const uint64_t without_2[] = {0, 1, 3, 4};
    CHECK(t, logged(&log, without_2, 4));
    CHECK_OK(t, log.status);
    CHECK_EQ(t, ZS_REF_INDEX(log.made), ZS_REF_INDEX(log.ticks[2])); /* the slot reused */
    CHECK(t, log.made != log.ticks[2]);
    CHECK_EQ(t, stats.skipped, 1);
    CHECK_STATUS(t, zs_tick_set_enabled(rt, log.ticks[2], 1), ZS_E_STALE);

    log.count = 0;
    log.act[0] = unregister_self;
    log.act[3] = nested_frame;
    stats = frame(t, rt, 0.1);
    const uint64_t next[] = {0, 1, 3, 4, 5}; /* 0 unregistered itself after its call began */
    CHECK(t, logged(&log, next, 5));
    CHECK_STATUS(t, log.status, ZS_E_BUSY);
    CHECK_EQ(t, zs_tick_count(rt), 4);

    log.count = 0;
    frame(t, rt, 0.1);
    const uint64_t last[] = {1, 3, 4, 5};
    CHECK(t, logged(&log, last, 4));
    fixture_close(&fx);
}

static void destroy_actor_1(frame_log *log, zs_runtime *rt, zs_ref self) {
    (void)self;
    log->status = zs_destroy_object(rt, log->actors[1]);
}

static void garbage_actor_2(frame_log *log, zs_runtime *rt, zs_ref self) {
    (void)self;
    log->status = zs_mark_as_garbage(rt, log->actors[2]);
}

static void free_actor_3(frame_log *log, zs_runtime *rt, zs_ref self) {
    (void)self;
    zs_remove_from_root(rt, log->actors[3]);
    log->status = zs_collect_garbage(rt);
}

/* An object another tick function destroyed, marked as garbage or had the
   collector free is not ticked; a freed one's functions are unregistered;
   the heap stays whole. */
static void test_ticks_objects_gone_during_a_frame(runner *t) {
    fixture fx;
    frame_log log;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    make_actors(t, &fx, &log, 5);
    for (uint32_t i = 0; i < 5; i++) add_tick(t, rt, &log, i, ZS_TICK_PRE_PHYSICS, 0);
    zs_tick first3 = log.ticks[3];
    add_tick(t, rt, &log, 3, ZS_TICK_POST_PHYSICS, 0); /* a second one on actor 3 */
    log.act[0] = destroy_actor_1;
    zs_frame_stats stats = frame(t, rt, 0.1);
    const uint64_t first[] = {0, 2, 3, 4, 3};
    CHECK(t, logged(&log, first, 5));
    CHECK_OK(t, log.status);
    CHECK_EQ(t, stats.skipped, 1);

    log.count = 0;
    log.act[0] = garbage_actor_2;
    log.act[4] = free_actor_3; /* after actor 3's first function, before its second */
    stats = frame(t, rt, 0.1);
    const uint64_t second[] = {0, 3, 4};
    CHECK(t, logged(&log, second, 3));
    CHECK_OK(t, log.status);
    VERIFY(t, rt);
    CHECK(t, !alive(rt, log.actors[3]));
    CHECK_EQ(t, stats.skipped, 2);
    CHECK_EQ(t, stats.unregistered, 1); /* actor 3's second, reached after the collection */
    CHECK_EQ(t, zs_tick_count(rt), 5);
    zs_tick_info info;
    CHECK_STATUS(t, zs_tick_get_info(rt, log.ticks[3], &info), ZS_E_STALE); /* gone */
    CHECK_STATUS(t, zs_tick_get_info(rt, first3, &info), ZS_E_STALE);       /* dropped now */
    CHECK_EQ(t, zs_tick_count(rt), 4);

    /* the destroyed actor went with that collection; the garbage one goes
       with the next one once unrooted */
    CHECK(t, !alive(rt, log.actors[1]) && alive(rt, log.actors[2]));
    UNROOT(t, rt, log.actors[2]);
    COLLECT(t, rt);
    CHECK(t, !alive(rt, log.actors[2]));
    log.count = 0;
    stats = frame(t, rt, 0.1);
    const uint64_t third[] = {0, 4};
    CHECK(t, logged(&log, third, 2));
    CHECK_EQ(t, stats.unregistered, 2);
    CHECK_EQ(t, zs_tick_count(rt), 2);

    /* a slot reused by a new object: the old registration never ticks it */
    zs_ref reborn = MAKE(t, rt, fx.node, ZS_NULL_REF);
    uint32_t slot = ZS_REF_INDEX(reborn);
    CHECK(t, slot == ZS_REF_INDEX(log.actors[1]) || slot == ZS_REF_INDEX(log.actors[2]) ||
                 slot == ZS_REF_INDEX(log.actors[3]));
    node_of(rt, reborn)->payload = 7;
    ROOT(t, rt, reborn);
    log.count = 0;
    frame(t, rt, 0.1);
    CHECK(t, logged(&log, third, 2));
    fixture_close(&fx);
}

static void free_runtime(frame_log *log, zs_runtime *rt, zs_ref self) {
    (void)log, (void)self;
    zs_runtime_free(rt);
}

/* A tick function frees the runtime: the frame returns, the functions left
   are not called, and the runtime is freed then (LeakSanitizer checks). */
static void test_ticks_runtime_freed_during_a_frame(runner *t) {
    fixture fx;
    frame_log log;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    make_actors(t, &fx, &log, 3);
    for (uint32_t i = 0; i < 3; i++) add_tick(t, rt, &log, i, ZS_TICK_PRE_PHYSICS, 0);
    log.act[1] = free_runtime;
    zs_frame_gc gc;
    zs_frame_gc_defaults(&gc);
    gc.seconds_between_cycles = 0;
    zs_frame_stats stats;
    CHECK_OK(t, zs_tick_frame(rt, 0.1, &gc, &stats)); /* rt is freed on return */
    const uint64_t want[] = {0, 1};
    CHECK(t, logged(&log, want, 2));
    CHECK_EQ(t, stats.ticked, 2);
    CHECK_EQ(t, stats.gc, ZS_FRAME_GC_NONE); /* no collection of a runtime being freed */
}

static void collect_everything(frame_log *log, zs_runtime *rt, zs_ref self) {
    (void)self;
    for (uint32_t i = 0; i < 4; i++) zs_remove_from_root(rt, log->actors[i]);
    log->status = zs_collect_garbage(rt);
}

static void step_the_collector(frame_log *log, zs_runtime *rt, zs_ref self) {
    (void)self;
    zs_remove_from_root(rt, log->actors[2]);
    int done = 0;
    log->status = zs_gc_start_incremental(rt);
    while (log->status == ZS_OK && !done) log->status = zs_gc_step_bounded(rt, 0, 1, &done);
    if (log->status == ZS_OK) log->status = zs_gc_purge_bounded(rt, 0, 1, &done);
}

/* Collections from inside tick functions: a full one that frees every
   actor, the ticking one included, and incremental steps. */
static void test_ticks_collect_during_a_frame(runner *t) {
    fixture fx;
    frame_log log;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    make_actors(t, &fx, &log, 4);
    for (uint32_t i = 0; i < 4; i++) add_tick(t, rt, &log, i, ZS_TICK_PRE_PHYSICS, 0);
    log.act[1] = step_the_collector;
    zs_frame_stats stats = frame(t, rt, 0.1);
    CHECK_OK(t, log.status);
    VERIFY(t, rt);
    const uint64_t without_2[] = {0, 1, 3};
    CHECK(t, logged(&log, without_2, 3));
    CHECK(t, !alive(rt, log.actors[2]));
    CHECK_EQ(t, stats.unregistered, 1);

    log.count = 0;
    log.act[0] = collect_everything;
    stats = frame(t, rt, 0.1);
    CHECK_OK(t, log.status);
    VERIFY(t, rt);
    CHECK_EQ(t, log.count, 0); /* actor 0's own call returned ZS_E_STALE: skipped */
    CHECK_EQ(t, stats.ticked, 0);
    CHECK_EQ(t, stats.skipped, 1);
    CHECK_EQ(t, stats.unregistered, 2);
    CHECK_EQ(t, zs_live_objects(rt), 0);
    frame(t, rt, 0.1);
    CHECK_EQ(t, zs_tick_count(rt), 0);
    fixture_close(&fx);
}

/* ---- failures and refusals --------------------------------------------- */

static void refuse_in_hook(void *user, zs_runtime *rt, zs_object *object, zs_destroy_phase phase) {
    frame_log *log = user;
    if (phase != ZS_BEGIN_DESTROY) return;
    zs_tick_desc desc = {.object = log->actors[0], .entry = logged_tick, .user = log};
    zs_tick made = 0;
    if (zs_tick_register(rt, &desc, &made) != ZS_E_BUSY || made != 0) log->status = ZS_E_CORRUPT;
    if (zs_tick_frame(rt, 0.1, NULL, NULL) != ZS_E_BUSY) log->status = ZS_E_CORRUPT;
    (void)object;
}

/* Failing functions are counted and the rest still tick; bad descriptions
   and handles are refused; a destroy hook may neither register nor run a
   frame. */
static void test_ticks_failures_and_refusals(runner *t) {
    fixture fx;
    frame_log log;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    make_actors(t, &fx, &log, 4);
    for (uint32_t i = 0; i < 3; i++) add_tick(t, rt, &log, i, ZS_TICK_PRE_PHYSICS, 0);
    log.result[0] = ZS_E_CALL_FAILED;
    log.result[1] = ZS_E_INVALID;
    zs_frame_stats stats = frame(t, rt, 0.1);
    CHECK_EQ(t, log.count, 3);
    CHECK_EQ(t, stats.ticked, 3);
    CHECK_EQ(t, stats.failed, 2);
    CHECK_STATUS(t, stats.first_failure, ZS_E_CALL_FAILED);

    zs_tick made = 7;
    zs_tick_desc desc = {.object = log.actors[3], .entry = logged_tick, .user = &log};
    zs_tick_desc bad = desc;
    bad.function = "tick"; /* both */
    CHECK_STATUS(t, zs_tick_register(rt, &bad, &made), ZS_E_INVALID);
    CHECK_EQ(t, made, 0);
    bad = desc;
    bad.entry = NULL; /* neither */
    CHECK_STATUS(t, zs_tick_register(rt, &bad, &made), ZS_E_INVALID);
    bad = desc;
    bad.group = ZS_TICK_GROUP_COUNT;
    CHECK_STATUS(t, zs_tick_register(rt, &bad, &made), ZS_E_INVALID);
    bad = desc;
    bad.interval = -1;
    CHECK_STATUS(t, zs_tick_register(rt, &bad, &made), ZS_E_INVALID);
    bad.interval = NAN;
    CHECK_STATUS(t, zs_tick_register(rt, &bad, &made), ZS_E_INVALID);
    bad = desc;
    bad.flags = 0x80;
    CHECK_STATUS(t, zs_tick_register(rt, &bad, &made), ZS_E_INVALID);
    CHECK_STATUS(t, zs_tick_register(rt, NULL, &made), ZS_E_INVALID);
    CHECK_STATUS(t, zs_tick_register(rt, &desc, NULL), ZS_E_INVALID);
    bad = desc;
    bad.object = ZS_MAKE_REF(ZS_REF_INDEX(log.actors[3]), ZS_REF_SERIAL(log.actors[3]) + 1);
    CHECK_STATUS(t, zs_tick_register(rt, &bad, &made), ZS_E_STALE);
    bad.object = ZS_NULL_REF;
    CHECK_STATUS(t, zs_tick_register(rt, &bad, &made), ZS_E_STALE);
    CHECK_OK(t, zs_mark_as_garbage(rt, log.actors[3]));
    CHECK_STATUS(t, zs_tick_register(rt, &desc, &made), ZS_E_DYING);
    CHECK_EQ(t, zs_tick_count(rt), 3);

    /* stale tick handles */
    zs_tick_info info;
    zs_tick stale = log.ticks[0] + ((zs_tick)1 << 32);
    CHECK_STATUS(t, zs_tick_unregister(rt, stale), ZS_E_STALE);
    CHECK_STATUS(t, zs_tick_unregister(rt, 0), ZS_E_STALE);
    CHECK_STATUS(t, zs_tick_set_enabled(rt, ZS_MAKE_REF(9999, 1), 1), ZS_E_STALE);
    CHECK_STATUS(t, zs_tick_get_info(rt, stale, &info), ZS_E_STALE);
    CHECK_STATUS(t, zs_tick_get_info(rt, log.ticks[0], NULL), ZS_E_INVALID);
    CHECK_STATUS(t, zs_tick_add_prerequisite(rt, log.ticks[0], stale), ZS_E_STALE);
    CHECK_STATUS(t, zs_tick_add_prerequisite(rt, stale, log.ticks[0]), ZS_E_STALE);
    CHECK_STATUS(t, zs_tick_unregister_object(rt, ZS_NULL_REF, NULL), ZS_E_INVALID);

    /* a destroy hook: refused */
    log.status = ZS_OK;
    zs_set_destroy_hook(rt, refuse_in_hook, &log);
    zs_remove_from_root(rt, log.actors[2]);
    COLLECT(t, rt);
    zs_set_destroy_hook(rt, NULL, NULL);
    CHECK_OK(t, log.status);
    fixture_close(&fx);

    /* a runtime with no frame yet and nothing registered */
    if (!fixture_open(t, &fx, 0, 0)) return;
    CHECK_EQ(t, zs_tick_count(fx.rt), 0);
    CHECK_STATUS(t, zs_tick_unregister(fx.rt, ZS_MAKE_REF(0, 1)), ZS_E_STALE);
    stats = frame(t, fx.rt, 0.1);
    CHECK_EQ(t, stats.ticked, 0);
    fixture_close(&fx);
}

/* ---- functions named on a class ---------------------------------------- */

/* A described class: tick(dt: Float64) with a native entry, an event with
   no native default, and functions that cannot tick. */
typedef struct ticker {
    zs_object header;
    double time;
    int64_t ticks;
} ticker;

typedef struct ticker_params {
    double dt;
} ticker_params;

static zs_status ticker_tick(void *user, zs_runtime *rt, zs_ref self, void *params) {
    (void)user;
    ticker *object = (ticker *)zs_resolve(rt, self);
    if (object == NULL) return ZS_E_STALE;
    object->time += ((ticker_params *)params)->dt;
    object->ticks++;
    return ZS_OK;
}

static const zs_property_desc ticker_dt[] = {{"dt", "Float64", 0, ZS_PARAM_IN, NULL}};
static const zs_property_desc ticker_int[] = {{"n", "Int32", 0, ZS_PARAM_IN, NULL}};
static const zs_property_desc ticker_result[] = {{"r", "Float64", 0, ZS_PARAM_RETURN, NULL}};
static const zs_function_desc ticker_functions[] = {
    {"tick", ticker_tick, NULL, ZS_FUNCTION_EVENT, sizeof(ticker_params), ticker_dt, 1},
    {"think", NULL, NULL, ZS_FUNCTION_EVENT, sizeof(ticker_params), ticker_dt, 1},
    {"count", ticker_tick, NULL, 0, 4, ticker_int, 1},
    {"read", ticker_tick, NULL, 0, 8, ticker_result, 1},
    {"make", ticker_tick, NULL, ZS_FUNCTION_STATIC, 0, NULL, 0},
    {"wide", ticker_tick, NULL, 0, 4096, ticker_dt, 1},
};

/* A handler that counts the calls it is given. */
typedef struct handled {
    uint32_t plain, managed;
    zs_ref last;
    zs_object *target;
    char function[16];
} handled;

static zs_status count_plain(void *user, zs_runtime *rt, zs_ref object, const char *function,
                             void *params) {
    handled *h = user;
    (void)rt, (void)params;
    h->plain++;
    h->last = object;
    snprintf(h->function, sizeof h->function, "%s", function);
    return ZS_OK;
}

static zs_status count_managed(void *user, zs_runtime *rt, zs_ref object, zs_object *target,
                               const char *function, void *params) {
    handled *h = user;
    (void)rt, (void)params;
    h->managed++;
    h->last = object;
    h->target = target;
    snprintf(h->function, sizeof h->function, "%s", function);
    return ZS_OK;
}

/* By name: the class's native entry runs directly (no handler), an event
   with no default does nothing, a function that cannot tick is refused; a
   plain handler gets every named one; the managed handler those of script
   classes only; an entry is always called directly. */
static void test_ticks_named_functions(runner *t) {
    zs_runtime *rt = NULL;
    CHECK_OK(t, zs_runtime_new(NULL, &rt));
    if (rt == NULL) return;
    zs_class_desc desc = {.name = "Ticker",
                          .instance_size = sizeof(ticker),
                          .functions = ticker_functions,
                          .function_count = 6};
    const zs_class *cls = NULL, *script = NULL;
    CHECK_OK(t, zs_class_register(rt, &desc, &cls));
    zs_class_desc script_desc = {.name = "ScriptTicker",
                                 .parent = cls,
                                 .instance_size = sizeof(ticker),
                                 .flags = ZS_CLASS_SCRIPT};
    CHECK_OK(t, zs_class_register(rt, &script_desc, &script));
    if (cls == NULL || script == NULL) {
        zs_runtime_free(rt);
        return;
    }
    zs_ref host = MAKE(t, rt, cls, ZS_NULL_REF), scripted = MAKE(t, rt, script, ZS_NULL_REF);
    ROOT(t, rt, host);
    ROOT(t, rt, scripted);
    zs_tick_desc named = {.object = host, .function = "tick"};
    zs_tick tick = 0, think = 0, on_script = 0, made = 0;
    CHECK_OK(t, zs_tick_register(rt, &named, &tick));
    named.function = "think";
    CHECK_OK(t, zs_tick_register(rt, &named, &think));
    const char *refused[] = {"count", "read", "make", "wide", "missing"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        named.function = refused[i];
        CHECK_STATUS(t, zs_tick_register(rt, &named, &made), ZS_E_INVALID);
    }
    named = (zs_tick_desc){.object = scripted, .function = "tick"};
    CHECK_OK(t, zs_tick_register(rt, &named, &on_script)); /* no handler: the inherited entry */
    zs_frame_stats stats = frame(t, rt, 0.5);
    CHECK_EQ(t, stats.ticked, 3);
    const ticker *h = (const ticker *)zs_resolve(rt, host);
    const ticker *s = (const ticker *)zs_resolve(rt, scripted);
    CHECK(t, h->ticks == 1 && h->time == 0.5 && s->ticks == 1);
    zs_tick_info info;
    CHECK_OK(t, zs_tick_get_info(rt, tick, &info));
    CHECK(t, info.by_name && info.object == host && info.calls == 1);

    /* the managed handler: script classes go to it, host classes do not */
    handled calls = {0};
    zs_set_managed_call_handler(rt, count_managed, &calls);
    frame(t, rt, 0.5);
    CHECK_EQ(t, calls.managed, 1);
    CHECK(t, calls.last == scripted && calls.target == zs_resolve(rt, scripted));
    CHECK(t, strcmp(calls.function, "tick") == 0);
    CHECK(t, h->ticks == 2 && s->ticks == 1);

    /* the plain handler: every named one; entries still direct */
    frame_log log;
    memset(&log, 0, sizeof log);
    zs_tick_desc entry = {.object = host, .entry = logged_tick, .user = &log};
    zs_set_call_handler(rt, count_plain, &calls);
    CHECK_OK(t, zs_tick_register(rt, &entry, &made));
    named = (zs_tick_desc){.object = host, .function = "anything"}; /* the handler's to check */
    zs_tick anything = 0;
    CHECK_OK(t, zs_tick_register(rt, &named, &anything));
    calls = (handled){0};
    stats = frame(t, rt, 0.5);
    CHECK_EQ(t, calls.plain, 4); /* tick, think, scripted's tick, anything */
    CHECK_EQ(t, calls.managed, 0);
    CHECK_EQ(t, log.count, 1);
    CHECK(t, strcmp(calls.function, "anything") == 0);
    CHECK(t, h->ticks == 2);

    /* no handler again: "anything" cannot be called, and fails each frame */
    zs_set_call_handler(rt, NULL, NULL);
    stats = frame(t, rt, 0.5);
    CHECK_EQ(t, stats.failed, 1);
    CHECK_STATUS(t, stats.first_failure, ZS_E_INVALID);
    CHECK(t, h->ticks == 3 && s->ticks == 2);
    zs_runtime_free(rt);
}

/* ---- the collector's share ---------------------------------------------- */

/* A frame with a zs_frame_gc runs gc.tick's rules: a cycle starts once
   seconds_between_cycles have passed; a work budget steps it over frames
   until it finishes; the freed objects' tick functions go. */
static void test_ticks_frame_collects(runner *t) {
    fixture fx;
    frame_log log;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    make_actors(t, &fx, &log, 4);
    for (uint32_t i = 0; i < 4; i++) add_tick(t, rt, &log, i, ZS_TICK_PRE_PHYSICS, 0);
    for (int i = 0; i < 40; i++) MAKE(t, rt, fx.node, ZS_NULL_REF); /* garbage */
    UNROOT(t, rt, log.actors[3]);
    zs_frame_gc gc;
    zs_frame_gc_defaults(&gc);
    CHECK(t, gc.seconds_between_cycles == 1.0 && gc.mark_budget_ns == 2000000u);
    gc.seconds_between_cycles = 0.5;
    gc.objects_per_frame = 8;
    zs_frame_stats stats;
    CHECK_OK(t, zs_tick_frame(rt, 0.25, &gc, &stats));
    CHECK_EQ(t, stats.gc, ZS_FRAME_GC_IDLE);
    CHECK_OK(t, zs_tick_frame(rt, 0.25, &gc, &stats));
    CHECK_EQ(t, stats.gc, ZS_FRAME_GC_STARTED);
    CHECK_OK(t, stats.gc_status);
    uint32_t frames = 2, advanced = 0, unregistered = 0;
    while (stats.gc != ZS_FRAME_GC_FINISHED && frames < 100) {
        CHECK_OK(t, zs_tick_frame(rt, 0.25, &gc, &stats));
        CHECK_OK(t, stats.gc_status);
        advanced += stats.gc == ZS_FRAME_GC_ADVANCED;
        unregistered += stats.unregistered;
        frames++;
        VERIFY(t, rt);
    }
    CHECK_EQ(t, stats.gc, ZS_FRAME_GC_FINISHED);
    CHECK(t, advanced >= 3); /* 44 objects, 8 a step */
    CHECK_EQ(t, zs_live_objects(rt), 3);
    CHECK(t, !alive(rt, log.actors[3]));
    CHECK_OK(t, zs_tick_frame(rt, 0.25, &gc, &stats));
    CHECK_EQ(t, unregistered + stats.unregistered, 1); /* by the frame after its purge */
    CHECK_EQ(t, zs_tick_count(rt), 3);
    CHECK_EQ(t, stats.ticked, 3);
    CHECK(t, stats.gc != ZS_FRAME_GC_NONE);

    /* time budgets, long enough for a small heap whatever the machine's load */
    zs_frame_gc_defaults(&gc);
    gc.seconds_between_cycles = 0;
    gc.mark_budget_ns = gc.purge_budget_ns = 10000000000u;
    for (int i = 0; i < 4; i++) CHECK_OK(t, zs_tick_frame(rt, 0.25, &gc, &stats));
    CHECK_EQ(t, stats.gc, ZS_FRAME_GC_FINISHED);
    gc.seconds_between_cycles = NAN;
    CHECK_STATUS(t, zs_tick_frame(rt, 0.25, &gc, &stats), ZS_E_INVALID);
    fixture_close(&fx);
}

/* ---- threads ------------------------------------------------------------- */

typedef struct registrar {
    zs_runtime *rt;
    frame_log *log;
    zs_status status;
} registrar;

/* Another thread registers and unregisters while a tick function waits for
   it: the frame holds no lock during calls. */
static int register_from_thread(void *arg) {
    registrar *r = arg;
    zs_tick_desc desc = {.object = r->log->actors[2], .entry = logged_tick, .user = r->log};
    zs_tick made = 0;
    r->status = zs_tick_register(r->rt, &desc, &made);
    if (r->status == ZS_OK) r->status = zs_tick_unregister(r->rt, r->log->ticks[1]);
    return 0;
}

static void join_registrar(frame_log *log, zs_runtime *rt, zs_ref self) {
    (void)self;
    registrar r = {rt, log, ZS_E_CORRUPT};
    thrd_t thread;
    if (start_thread(log->t, &thread, register_from_thread, &r) != thrd_success) return;
    thrd_join(thread, NULL);
    log->status = r.status;
}

static void test_ticks_other_thread_during_a_frame(runner *t) {
    fixture fx;
    frame_log log;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    make_actors(t, &fx, &log, 3);
    log.t = t;
    add_tick(t, rt, &log, 0, ZS_TICK_PRE_PHYSICS, 0);
    add_tick(t, rt, &log, 1, ZS_TICK_PRE_PHYSICS, 0);
    log.act[0] = join_registrar;
    log.status = ZS_E_CORRUPT;
    frame(t, rt, 0.1);
    CHECK_OK(t, log.status);
    const uint64_t first[] = {0};
    CHECK(t, logged(&log, first, 1));
    log.count = 0;
    frame(t, rt, 0.1);
    const uint64_t second[] = {0, 2};
    CHECK(t, logged(&log, second, 2));
    fixture_close(&fx);
}

const test_case tick_tests[] = {
    TEST(test_ticks_group_order),
    TEST(test_ticks_prerequisites),
    TEST(test_ticks_random_order),
    TEST(test_ticks_intervals),
    TEST(test_ticks_changed_during_a_frame),
    TEST(test_ticks_objects_gone_during_a_frame),
    TEST(test_ticks_runtime_freed_during_a_frame),
    TEST(test_ticks_collect_during_a_frame),
    TEST(test_ticks_failures_and_refusals),
    TEST(test_ticks_named_functions),
    TEST(test_ticks_frame_collects),
    THREADED_TEST(test_ticks_other_thread_during_a_frame),
};
const size_t tick_test_count = sizeof tick_tests / sizeof tick_tests[0];
