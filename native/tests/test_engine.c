/*
 * test_engine.c -- the sample engine (native/engine/sample_engine.c) in a
 * runtime with no scripting layer: installed through the API table, its
 * functions called by name (zs_call_function with no call handler runs the
 * native entries; an event with no native default does nothing) or through
 * zs_call_native, the heap verified after every step. A second part plays
 * a hostile "script" (a call handler) that collects, destroys and closes
 * the runtime from inside the engine's events, so the engine's rule (only
 * handles survive a call that may run script code) is exercised under the
 * sanitizers. Freeing the runtime runs the engine's cleanup (LeakSanitizer
 * in `make sanitize` reports its state if it does not).
 */
#include "test_support.h"

#include "sample_engine.h"
#include "zsharp_api.h"

/* The engine's classes in one runtime. */
typedef struct engine {
    zs_runtime *rt;
    const zs_class *world;
    const zs_class *actor;
    const zs_class *component;
    const zs_class *movement;
} engine;

/* A runtime with the engine installed; false (a failed check) otherwise. */
static bool engine_open(runner *t, engine *e) {
    memset(e, 0, sizeof *e);
    CHECK_OK(t, zs_runtime_new(NULL, &e->rt));
    if (e->rt == NULL) return false;
    CHECK_OK(t, zs_sample_engine_install(zs_api_table(), e->rt));
    CHECK_OK(t, zs_find_class(e->rt, "World", &e->world));
    CHECK_OK(t, zs_find_class(e->rt, "Actor", &e->actor));
    CHECK_OK(t, zs_find_class(e->rt, "Component", &e->component));
    CHECK_OK(t, zs_find_class(e->rt, "MovementComponent", &e->movement));
    if (e->world && e->actor && e->component && e->movement) return true;
    zs_runtime_free(e->rt);
    e->rt = NULL;
    return false;
}

/* A rooted World. */
static zs_ref new_world(runner *t, engine *e) {
    zs_ref world = MAKE(t, e->rt, e->world, ZS_NULL_REF);
    ROOT(t, e->rt, world);
    return world;
}

/* A SubclassOf value as a parameter block holds it: the class id + 1. */
static uint32_t subclass(const zs_class *cls) { return cls ? zs_class_id(cls) + 1 : 0; }

/* World.spawn by name; the new actor (or ZS_NULL_REF) in *out. */
static zs_status spawn(engine *e, zs_ref world, uint32_t cls, double x, zs_ref *out) {
    sample_spawn_params p = {0};
    p.cls = cls;
    p.at.location.x = x;
    p.at.yaw = 90;
    p.at.scale = 1;
    p.return_value = ZS_MAKE_REF(7, 7); /* overwritten on every path */
    zs_status status = zs_call_function(e->rt, world, "spawn", &p);
    *out = p.return_value;
    return status;
}

/* World.tick by name; the number of actors ticked in *out. */
static zs_status tick(engine *e, zs_ref world, double dt, int32_t *out) {
    sample_world_tick_params p = {dt, -1};
    zs_status status = zs_call_function(e->rt, world, "tick", &p);
    *out = p.return_value;
    return status;
}

/* World.find by name; the actor (or ZS_NULL_REF) in *out. */
static zs_status find_actor(engine *e, zs_ref world, int32_t index, zs_ref *out) {
    sample_find_params p = {index, ZS_MAKE_REF(7, 7)};
    zs_status status = zs_call_function(e->rt, world, "find", &p);
    *out = p.return_value;
    return status;
}

/* World.find by name, checked to succeed. */
static zs_ref find(runner *t, engine *e, zs_ref world, int32_t index) {
    zs_ref found = ZS_NULL_REF;
    CHECK_OK(t, find_actor(e, world, index, &found));
    return found;
}

/* World.destroy by name. */
static zs_status destroy(engine *e, zs_ref world, zs_ref actor) {
    sample_destroy_params p = {actor};
    return zs_call_function(e->rt, world, "destroy", &p);
}

static sample_world *world_at(engine *e, zs_ref ref) {
    return (sample_world *)zs_resolve(e->rt, ref);
}
static sample_actor *actor_at(engine *e, zs_ref ref) {
    return (sample_actor *)zs_resolve(e->rt, ref);
}

/* The named property of a description, or NULL. */
static const zs_property_desc *property_named(const zs_class_desc *desc, const char *name) {
    for (uint32_t i = 0; i < desc->property_count; i++)
        if (strcmp(desc->properties[i].name, name) == 0) return &desc->properties[i];
    return NULL;
}

/* Installing describes every class, struct and enum; a second install and
   a table of another version are refused. */
static void test_engine_install_describes(runner *t) {
    engine e;
    if (!engine_open(t, &e)) return;
    CHECK_STATUS(t, zs_sample_engine_install(zs_api_table(), e.rt), ZS_E_INVALID);
    CHECK_STATUS(t, zs_sample_engine_install(NULL, e.rt), ZS_E_INVALID);
    zs_api other = *zs_api_table();
    other.version = ZS_API_VERSION + 1;
    zs_runtime *fresh = NULL;
    CHECK_OK(t, zs_runtime_new(NULL, &fresh));
    CHECK_STATUS(t, zs_sample_engine_install(&other, fresh), ZS_E_INVALID);
    other.version = ZS_API_VERSION;
    other.size = sizeof other - 1;
    CHECK_STATUS(t, zs_sample_engine_install(&other, fresh), ZS_E_INVALID);
    CHECK_EQ(t, zs_class_count(fresh), 0);
    zs_runtime_free(fresh);

    CHECK(t, zs_class_parent(e.movement) == e.component);
    CHECK(t, zs_class_parent(e.actor) == NULL && zs_class_parent(e.world) == NULL);
    const zs_class_desc *world = zs_class_describe(e.world);
    const zs_class_desc *actor = zs_class_describe(e.actor);
    CHECK_EQ(t, world->property_count, 5);
    CHECK_EQ(t, world->function_count, 6);
    CHECK_EQ(t, actor->property_count, 12);
    CHECK_EQ(t, actor->function_count, 8);
    CHECK_EQ(t, zs_class_describe(e.component)->property_count, 2);
    CHECK_EQ(t, zs_class_describe(e.movement)->property_count, 1);
    const zs_property_desc *actors = property_named(world, "actors");
    CHECK(t, actors != NULL && strcmp(actors->type, "Array[Actor]") == 0);
    CHECK(t, actors != NULL && zs_type_kind_of(actors->native) == ZS_TYPE_ARRAY);
    const zs_property_desc *tags = property_named(actor, "tags");
    CHECK(t, tags != NULL && zs_type_kind_of(tags->native) == ZS_TYPE_SET);
    const zs_property_desc *target = property_named(actor, "target");
    CHECK(t, target != NULL && zs_type_kind_of(target->native) == ZS_TYPE_WEAK_OBJECT);
    const zs_property_desc *team = property_named(actor, "team");
    CHECK(t, team != NULL && team->native == NULL && strcmp(team->type, "Team") == 0);

    const zs_function_desc *f = NULL;
    CHECK_OK(t, zs_find_function(e.actor, "on_destroy", &f));
    CHECK(t, f != NULL && f->entry == NULL && f->flags == ZS_FUNCTION_EVENT);
    CHECK_OK(t, zs_find_function(e.actor, "tick", &f));
    CHECK(t, f != NULL && f->entry != NULL && f->flags == ZS_FUNCTION_EVENT);
    CHECK_OK(t, zs_find_function(e.world, "version", &f));
    CHECK(t, f != NULL && f->flags == ZS_FUNCTION_STATIC && f->param_count == 1 &&
                 f->params[0].direction == ZS_PARAM_RETURN);
    CHECK_OK(t, zs_find_function(e.actor, "heal", &f));
    CHECK(t, f != NULL && f->params[0].direction == ZS_PARAM_INOUT);
    CHECK_OK(t, zs_find_function(e.actor, "get_location", &f));
    CHECK(t, f != NULL && f->params[0].direction == ZS_PARAM_OUT);
    CHECK_STATUS(t, zs_find_function(e.movement, "take_damage", &f), ZS_E_INVALID);

    const zs_struct_desc *transform = NULL;
    const zs_type *transform_type = NULL;
    CHECK_OK(t, zs_find_struct(e.rt, "Transform", &transform, &transform_type));
    CHECK(t, transform != NULL && transform->member_count == 3 &&
                 transform->size == sizeof(sample_transform));
    CHECK(t, transform != NULL && transform->members[0].native != NULL);
    CHECK(t, zs_type_flags(transform_type) & ZS_TYPE_BITWISE);
    const zs_enum_desc *team_desc = NULL;
    CHECK_OK(t, zs_find_enum(e.rt, "Team", &team_desc));
    CHECK(t, team_desc != NULL && team_desc->item_count == 3 &&
                 strcmp(team_desc->items[2].name, "Blue") == 0 && team_desc->items[2].value == 2);
    zs_runtime_free(e.rt);
}

/* Spawn, tick (the native defaults run), damage, heal, locate, move, add
   components, destroy and collect, with no scripting layer. */
static void test_engine_plays_natively(runner *t) {
    engine e;
    if (!engine_open(t, &e)) return;
    zs_runtime *rt = e.rt;
    zs_ref world = new_world(t, &e);
    VERIFY(t, rt);

    /* spawn: by class id; anything but an Actor class is refused */
    zs_ref hero = ZS_NULL_REF, foe = ZS_NULL_REF, none = ZS_NULL_REF;
    CHECK_OK(t, spawn(&e, world, subclass(e.actor), 1.0, &hero));
    CHECK_OK(t, spawn(&e, world, subclass(e.actor), -4.0, &foe));
    CHECK_STATUS(t, spawn(&e, world, 0, 0, &none), ZS_E_INVALID);
    CHECK(t, none == ZS_NULL_REF);
    CHECK_STATUS(t, spawn(&e, world, subclass(e.world), 0, &none), ZS_E_INVALID);
    CHECK_STATUS(t, spawn(&e, world, subclass(e.movement), 0, &none), ZS_E_INVALID);
    CHECK_STATUS(t, spawn(&e, world, 999, 0, &none), ZS_E_INVALID);
    const zs_function_desc *spawn_desc = NULL;
    CHECK_OK(t, zs_find_function(e.world, "spawn", &spawn_desc));
    sample_spawn_params on_actor = {subclass(e.actor), {{0, 0, 0}, 0, 1}, ZS_NULL_REF};
    CHECK_STATUS(t, zs_call_native(rt, spawn_desc->entry, spawn_desc->user, hero, &on_actor),
                 ZS_E_INVALID); /* called on an object that is not a World */
    CHECK_STATUS(t, zs_call_native(rt, spawn_desc->entry, spawn_desc->user, ZS_NULL_REF, &on_actor),
                 ZS_E_INVALID);
    CHECK(t, none == ZS_NULL_REF && on_actor.return_value == ZS_NULL_REF);
    VERIFY(t, rt);
    sample_actor *a = actor_at(&e, hero);
    CHECK(t, a != NULL && a->alive && a->health == 100 && a->max_health == 100);
    CHECK(t, a != NULL && a->world == world && a->header.outer == world);
    CHECK(t, a != NULL && a->transform.location.x == 1.0 && a->transform.yaw == 90);
    CHECK_EQ(t, world_at(&e, world)->actors.count, 2);
    CHECK(t, find(t, &e, world, 0) == hero && find(t, &e, world, 1) == foe);
    CHECK(t, find(t, &e, world, 2) == ZS_NULL_REF && find(t, &e, world, -1) == ZS_NULL_REF);

    /* tick: every actor's native tick runs */
    actor_at(&e, hero)->speed = 2.0;
    int32_t ticked = 0;
    CHECK_OK(t, tick(&e, world, 0.5, &ticked));
    CHECK_EQ(t, ticked, 2);
    CHECK_EQ(t, world_at(&e, world)->frame, 1);
    CHECK(t, world_at(&e, world)->time == 0.5);
    CHECK_EQ(t, actor_at(&e, hero)->ticks, 1);
    CHECK_EQ(t, actor_at(&e, foe)->ticks, 1);
    CHECK(t, actor_at(&e, hero)->transform.location.x == 2.0);
    CHECK(t, actor_at(&e, foe)->transform.location.x == -4.0);
    VERIFY(t, rt);

    /* take_damage: clamped at 0, alive while health > 0 */
    sample_take_damage_params damage = {30.5, foe, -1};
    CHECK_OK(t, zs_call_function(rt, hero, "take_damage", &damage));
    CHECK(t, damage.return_value == 69.0);
    CHECK_EQ(t, actor_at(&e, hero)->health, 69);
    damage.amount = -1;
    CHECK_STATUS(t, zs_call_function(rt, hero, "take_damage", &damage), ZS_E_INVALID);
    damage = (sample_take_damage_params){1000, ZS_NULL_REF, -1};
    CHECK_OK(t, zs_call_function(rt, foe, "take_damage", &damage));
    CHECK(t, damage.return_value == 0.0 && !actor_at(&e, foe)->alive);
    CHECK_STATUS(t, zs_call_function(rt, world, "take_damage", &damage), ZS_E_INVALID);

    /* heal (inout): what was actually healed comes back */
    sample_heal_params heal = {25};
    CHECK_OK(t, zs_call_function(rt, hero, "heal", &heal));
    CHECK_EQ(t, heal.amount, 25);
    CHECK_EQ(t, actor_at(&e, hero)->health, 94);
    heal.amount = 25;
    CHECK_OK(t, zs_call_function(rt, hero, "heal", &heal));
    CHECK_EQ(t, heal.amount, 6);
    CHECK_EQ(t, actor_at(&e, hero)->health, 100);
    heal.amount = -3;
    CHECK_STATUS(t, zs_call_function(rt, hero, "heal", &heal), ZS_E_INVALID);
    heal.amount = 40;
    CHECK_OK(t, zs_call_function(rt, foe, "heal", &heal)); /* healing revives */
    CHECK(t, heal.amount == 40 && actor_at(&e, foe)->alive);

    /* move, then get_location (out) */
    sample_move_params move = {{0.5, 2.0, -1.0}};
    CHECK_OK(t, zs_call_function(rt, hero, "move", &move));
    sample_get_location_params where = {{-1, -1, -1}};
    CHECK_OK(t, zs_call_function(rt, hero, "get_location", &where));
    CHECK(t, where.location.x == 2.5 && where.location.y == 2.0 && where.location.z == -1.0);

    /* add_component: owned by, and inside, the actor */
    sample_add_component_params add = {subclass(e.movement), ZS_NULL_REF};
    CHECK_OK(t, zs_call_function(rt, hero, "add_component", &add));
    zs_ref movement = add.return_value;
    const sample_movement_component *m = (const sample_movement_component *)zs_resolve(rt,
                                                                                       movement);
    CHECK(t, m != NULL && m->base.owner == hero && m->base.enabled && m->base.header.outer == hero);
    CHECK(t, m != NULL && m->base.header.cls == e.movement);
    add.cls = subclass(e.component);
    CHECK_OK(t, zs_call_function(rt, hero, "add_component", &add));
    zs_ref plain = add.return_value;
    CHECK_EQ(t, actor_at(&e, hero)->components.count, 2);
    add.cls = subclass(e.actor);
    CHECK_STATUS(t, zs_call_function(rt, hero, "add_component", &add), ZS_E_INVALID);
    CHECK(t, add.return_value == ZS_NULL_REF);
    VERIFY(t, rt);

    /* version (static): no object */
    const zs_function_desc *version = NULL;
    CHECK_OK(t, zs_find_function(e.world, "version", &version));
    sample_version_params v = {0};
    CHECK_OK(t, zs_call_native(rt, version->entry, version->user, ZS_NULL_REF, &v));
    CHECK_EQ(t, v.return_value, 1);

    /* destroy: on_destroy has no native default; the actor leaves the world
       and is garbage, its components too; references to it die with it */
    CHECK_OK(t, zs_store_ref(rt, foe, (uint32_t)offsetof(sample_actor, target), hero));
    CHECK_OK(t, destroy(&e, world, hero));
    CHECK_EQ(t, world_at(&e, world)->actors.count, 1);
    CHECK(t, find(t, &e, world, 0) == foe && find(t, &e, world, 1) == ZS_NULL_REF);
    int garbage = 0;
    CHECK_OK(t, zs_is_garbage(rt, hero, &garbage));
    CHECK(t, garbage);
    CHECK_OK(t, zs_is_garbage(rt, movement, &garbage));
    CHECK(t, garbage);
    CHECK_STATUS(t, destroy(&e, world, ZS_NULL_REF), ZS_E_INVALID);
    CHECK_STATUS(t, destroy(&e, world, world), ZS_E_INVALID);
    VERIFY(t, rt);

    /* collect from inside a native function */
    CHECK_EQ(t, zs_live_objects(rt), 5);
    CHECK_OK(t, zs_call_function(rt, world, "collect", NULL));
    VERIFY(t, rt);
    CHECK_EQ(t, zs_live_objects(rt), 2);
    CHECK(t, !alive(rt, hero) && !alive(rt, movement) && !alive(rt, plain));
    CHECK(t, alive(rt, world) && alive(rt, foe));
    CHECK(t, zs_resolve(rt, actor_at(&e, foe)->target) == NULL); /* weak: stale, not dangling */
    CHECK(t, actor_at(&e, foe)->world == world);
    CHECK_STATUS(t, destroy(&e, world, hero), ZS_E_STALE);
    CHECK_STATUS(t, zs_call_function(rt, hero, "heal", &heal), ZS_E_STALE);

    CHECK_OK(t, tick(&e, world, 0.25, &ticked));
    CHECK_EQ(t, ticked, 1);
    CHECK_EQ(t, actor_at(&e, foe)->ticks, 2);
    CHECK_EQ(t, world_at(&e, world)->frame, 2);

    /* the world gone: its actors go with it (their outer is not a root) */
    UNROOT(t, rt, world);
    COLLECT(t, rt);
    CHECK_EQ(t, zs_live_objects(rt), 0);
    zs_runtime_free(rt); /* runs the engine's cleanup */
}

/* ---- a hostile script -------------------------------------------------- */

/* What the script does from inside the engine's events. */
typedef struct script {
    engine *e;
    zs_ref world;
    unsigned begin_plays;
    unsigned ticks;
    unsigned destroys;
    bool kill_in_begin_play; /* begin_play destroys its own actor and collects */
    bool destroy_in_tick;    /* the first tick destroys every other actor, then collects */
    bool drop_world_in_tick; /* the first tick unroots the world and collects */
    bool close_in_tick;      /* the first tick frees the runtime (deferred) */
    bool destroy_in_destroy; /* the next on_destroy destroys its actor again, then collects */
} script;

/* The scripting layer's call handler: run the "override" of an event, then
   the native entry (as a script calling its super would), or the native
   entry alone for the other functions. */
static zs_status script_call(void *user, zs_runtime *rt, zs_ref object, const char *function,
                             void *params) {
    script *sc = user;
    const zs_object *o = zs_resolve(rt, object);
    const zs_function_desc *f = NULL;
    if (o == NULL) return ZS_E_STALE;
    if (zs_find_function(o->cls, function, &f) != ZS_OK) return ZS_E_INVALID;
    bool actor = zs_class_is_a(o->cls, sc->e->actor);
    o = NULL; /* may be freed below */
    if (actor && strcmp(function, "begin_play") == 0) {
        sc->begin_plays++;
        if (sc->kill_in_begin_play) { /* and no call of the native default */
            zs_mark_as_garbage(rt, object);
            return zs_collect_garbage(rt);
        }
    } else if (actor && strcmp(function, "tick") == 0) {
        if (sc->ticks++ == 0) {
            if (sc->destroy_in_tick) {
                zs_ref other = ZS_NULL_REF;
                while (find_actor(sc->e, sc->world, 1, &other) == ZS_OK && other != ZS_NULL_REF)
                    if (destroy(sc->e, sc->world, other) != ZS_OK) return ZS_E_CALL_FAILED;
                if (zs_collect_garbage(rt) != ZS_OK) return ZS_E_CALL_FAILED;
            }
            if (sc->drop_world_in_tick) {
                zs_remove_from_root(rt, sc->world);
                if (zs_collect_garbage(rt) != ZS_OK) return ZS_E_CALL_FAILED;
            }
            if (sc->close_in_tick) zs_runtime_free(rt);
        }
    } else if (actor && strcmp(function, "on_destroy") == 0) {
        sc->destroys++;
        if (sc->destroy_in_destroy) {
            sc->destroy_in_destroy = false; /* once */
            if (destroy(sc->e, sc->world, object) != ZS_OK) return ZS_E_CALL_FAILED;
            zs_status status = zs_collect_garbage(rt);
            if (status != ZS_OK) return status;
        }
    }
    return f->entry != NULL ? f->entry(f->user, rt, object, params) : ZS_OK;
}

/* A runtime with the engine, a rooted world, the script as call handler
   and `actors` actors spawned (handles in out, at most 4). */
static bool script_open(runner *t, engine *e, script *sc, zs_ref *out, uint32_t actors) {
    if (!engine_open(t, e)) return false;
    sc->e = e;
    sc->world = new_world(t, e);
    zs_set_call_handler(e->rt, script_call, sc);
    for (uint32_t i = 0; i < actors; i++)
        CHECK_OK(t, spawn(e, sc->world, subclass(e->actor), i, &out[i]));
    return true;
}

/* begin_play destroys its own actor and collects: spawn returns None, and
   the world keeps no reference to the freed actor. */
static void test_engine_spawn_survives_begin_play(runner *t) {
    engine e;
    script sc = {0};
    zs_ref actors[2];
    if (!script_open(t, &e, &sc, actors, 1)) return;
    zs_runtime *rt = e.rt;
    sc.kill_in_begin_play = true;
    zs_ref gone = ZS_MAKE_REF(1, 1);
    CHECK_OK(t, spawn(&e, sc.world, subclass(e.actor), 0, &gone));
    CHECK(t, gone == ZS_NULL_REF);
    CHECK_EQ(t, sc.begin_plays, 2);
    VERIFY(t, rt);
    CHECK_EQ(t, zs_live_objects(rt), 2);
    CHECK(t, find(t, &e, sc.world, 0) == actors[0] && find(t, &e, sc.world, 1) == ZS_NULL_REF);
    sc.kill_in_begin_play = false;
    CHECK_OK(t, spawn(&e, sc.world, subclass(e.actor), 0, &actors[1]));
    CHECK(t, actors[1] != ZS_NULL_REF && find(t, &e, sc.world, 1) == actors[1]);
    CHECK_EQ(t, world_at(&e, sc.world)->actors.count, 3); /* the null entry is still there */
    CHECK_OK(t, destroy(&e, sc.world, actors[1]));
    CHECK_EQ(t, world_at(&e, sc.world)->actors.count, 1); /* ...until a destroy sweeps it */
    COLLECT(t, rt);
    zs_runtime_free(rt);
}

/* A tick destroys the other actors and collects, or drops the world and
   collects, while World.tick is calling every actor. */
static void test_engine_tick_survives_collections(runner *t) {
    engine e;
    script sc = {0};
    zs_ref actors[3];
    if (!script_open(t, &e, &sc, actors, 3)) return;
    sc.destroy_in_tick = true;
    int32_t ticked = -1;
    CHECK_OK(t, tick(&e, sc.world, 1.0, &ticked));
    CHECK_EQ(t, ticked, 1); /* the destroyed ones are skipped */
    CHECK_EQ(t, sc.destroys, 2);
    VERIFY(t, e.rt);
    CHECK(t, alive(e.rt, actors[0]) && !alive(e.rt, actors[1]) && !alive(e.rt, actors[2]));
    CHECK_EQ(t, actor_at(&e, actors[0])->ticks, 1);
    CHECK_EQ(t, world_at(&e, sc.world)->actors.count, 1);
    zs_runtime_free(e.rt);

    script dropping = {0};
    if (!script_open(t, &e, &dropping, actors, 3)) return;
    dropping.drop_world_in_tick = true;
    CHECK_OK(t, tick(&e, dropping.world, 1.0, &ticked));
    CHECK_EQ(t, ticked, 0); /* the first actor's tick freed them all, itself included */
    VERIFY(t, e.rt);
    CHECK_EQ(t, zs_live_objects(e.rt), 0);
    zs_runtime_free(e.rt);
}

/* on_destroy destroys its actor again and collects: the outer destroy finds
   it gone and is done. */
static void test_engine_destroy_survives_on_destroy(runner *t) {
    engine e;
    script sc = {0};
    zs_ref actors[2];
    if (!script_open(t, &e, &sc, actors, 2)) return;
    sc.destroy_in_destroy = true;
    CHECK_OK(t, destroy(&e, sc.world, actors[0]));
    CHECK_EQ(t, sc.destroys, 2);
    VERIFY(t, e.rt);
    CHECK(t, !alive(e.rt, actors[0]) && alive(e.rt, actors[1]));
    CHECK_EQ(t, world_at(&e, sc.world)->actors.count, 1);
    zs_runtime_free(e.rt);
}

/* A tick frees the runtime: the free waits for World.tick to return, then
   runs the engine's cleanup. */
static void test_engine_closed_from_a_tick(runner *t) {
    engine e;
    script sc = {0};
    zs_ref actors[2];
    if (!script_open(t, &e, &sc, actors, 2)) return;
    sc.close_in_tick = true;
    int32_t ticked = -1;
    CHECK_OK(t, tick(&e, sc.world, 1.0, &ticked)); /* the runtime is freed on return */
    CHECK_EQ(t, ticked, 1);                        /* the second actor's call is skipped */
    CHECK_EQ(t, sc.ticks, 1);
}

const test_case engine_tests[] = {
    TEST(test_engine_install_describes),           TEST(test_engine_plays_natively),
    TEST(test_engine_spawn_survives_begin_play),   TEST(test_engine_tick_survives_collections),
    TEST(test_engine_destroy_survives_on_destroy), TEST(test_engine_closed_from_a_tick),
};
const size_t engine_test_count = sizeof engine_tests / sizeof engine_tests[0];
