/*
 * sample_engine.c -- a sample game engine module (sample_engine.h): a World
 * that spawns, ticks and destroys Actors, which carry Components, all
 * described for scripts through zsharp.h's reflection.
 *
 * Written against the API table only (zsharp_api.h: every call is
 * api->zs_xxx), so it builds into zsharp_py's native library and, as is,
 * into a host's own shared library. No mutable globals: install allocates a
 * per-runtime state (the table, the registered classes and types, and the
 * descriptions that name them), which the runtime keeps by reference and
 * frees through the cleanup registered with it.
 *
 * Any call that may run script code (zs_call_function, zs_call_each: a
 * Python override may collect, destroy, or close the runtime) invalidates
 * every object pointer: only handles survive such a call, and each is
 * resolved again after it. A runtime is used from one thread at a time
 * here (a collection on another thread between two calls of a function
 * could free what it just resolved).
 */
#include "sample_engine.h"

#include "zsharp_api.h"

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The install function keeps default visibility when the package builds
   with -fvisibility=hidden, so a host can find it by name. */
#if defined(__GNUC__) || defined(__clang__)
#define SAMPLE_ENGINE_EXPORT __attribute__((visibility("default")))
#else
#define SAMPLE_ENGINE_EXPORT
#endif

#define COUNT(array) ((uint32_t)(sizeof(array) / sizeof((array)[0])))
#define OFFSET(type, member) ((uint32_t)offsetof(type, member))

/* Health of a freshly spawned actor (a zeroed one would begin play dead). */
#define SAMPLE_DEFAULT_MAX_HEALTH 100

/* Everything the engine keeps for one runtime; freed by its cleanup. */
typedef struct engine_state {
    const zs_api *api;
    const zs_class *world;
    const zs_class *actor;
    const zs_class *component;
    const zs_class *movement;
    const zs_type *object;       /* a strong reference */
    const zs_type *weak_object;  /* a weak reference */
    const zs_type *object_array; /* Array[Actor], Array[Component] */
    const zs_type *name_set;     /* Set[Name] */
    const zs_type *multicast;    /* MulticastDelegate */
    const zs_type *vec3;
    const zs_type *transform;
    /* Descriptions that name this runtime's types or this state. */
    zs_property_desc transform_members[3];
    zs_struct_desc transform_desc;
    zs_property_desc world_properties[5];
    zs_property_desc actor_properties[12];
    zs_property_desc component_properties[2];
    zs_property_desc movement_properties[1];
    zs_function_desc world_functions[6];
    zs_function_desc actor_functions[8];
    zs_class_desc world_desc;
    zs_class_desc actor_desc;
    zs_class_desc component_desc;
    zs_class_desc movement_desc;
} engine_state;

/* ---- descriptions that do not vary ------------------------------------- */

static const zs_enum_item team_items[] = {
    {"Neutral", SAMPLE_TEAM_NEUTRAL},
    {"Red", SAMPLE_TEAM_RED},
    {"Blue", SAMPLE_TEAM_BLUE},
};
static const zs_enum_desc team_desc = {"Team", "UInt8", team_items, COUNT(team_items)};

static const zs_property_desc vec3_members[] = {
    {"x", "Float64", OFFSET(sample_vec3, x), 0, NULL},
    {"y", "Float64", OFFSET(sample_vec3, y), 0, NULL},
    {"z", "Float64", OFFSET(sample_vec3, z), 0, NULL},
};
static const zs_struct_desc vec3_desc = {"Vec3", sizeof(sample_vec3), _Alignof(sample_vec3),
                                         vec3_members, COUNT(vec3_members)};

static const zs_property_desc spawn_params[] = {
    {"cls", "SubclassOf[Actor]", OFFSET(sample_spawn_params, cls), ZS_PARAM_IN, NULL},
    {"at", "Transform", OFFSET(sample_spawn_params, at), ZS_PARAM_IN, NULL},
    {"return_value", "Actor | None", OFFSET(sample_spawn_params, return_value), ZS_PARAM_RETURN,
     NULL},
};
static const zs_property_desc destroy_params[] = {
    {"actor", "Actor | None", OFFSET(sample_destroy_params, actor), ZS_PARAM_IN, NULL},
};
static const zs_property_desc find_params[] = {
    {"index", "Int32", OFFSET(sample_find_params, index), ZS_PARAM_IN, NULL},
    {"return_value", "Actor | None", OFFSET(sample_find_params, return_value), ZS_PARAM_RETURN,
     NULL},
};
static const zs_property_desc world_tick_params[] = {
    {"dt", "Float64", OFFSET(sample_world_tick_params, dt), ZS_PARAM_IN, NULL},
    {"return_value", "Int32", OFFSET(sample_world_tick_params, return_value), ZS_PARAM_RETURN,
     NULL},
};
static const zs_property_desc version_params[] = {
    {"return_value", "Int32", OFFSET(sample_version_params, return_value), ZS_PARAM_RETURN, NULL},
};
static const zs_property_desc take_damage_params[] = {
    {"amount", "Float64", OFFSET(sample_take_damage_params, amount), ZS_PARAM_IN, NULL},
    {"instigator", "Actor | None", OFFSET(sample_take_damage_params, instigator), ZS_PARAM_IN,
     NULL},
    {"return_value", "Float64", OFFSET(sample_take_damage_params, return_value), ZS_PARAM_RETURN,
     NULL},
};
static const zs_property_desc get_location_params[] = {
    {"location", "Vec3", OFFSET(sample_get_location_params, location), ZS_PARAM_OUT, NULL},
};
static const zs_property_desc heal_params[] = {
    {"amount", "Int32", OFFSET(sample_heal_params, amount), ZS_PARAM_INOUT, NULL},
};
static const zs_property_desc move_params[] = {
    {"delta", "Vec3", OFFSET(sample_move_params, delta), ZS_PARAM_IN, NULL},
};
static const zs_property_desc add_component_params[] = {
    {"cls", "SubclassOf[Component]", OFFSET(sample_add_component_params, cls), ZS_PARAM_IN, NULL},
    {"return_value", "Component | None", OFFSET(sample_add_component_params, return_value),
     ZS_PARAM_RETURN, NULL},
};
static const zs_property_desc actor_tick_params[] = {
    {"dt", "Float64", OFFSET(sample_actor_tick_params, dt), ZS_PARAM_IN, NULL},
};

/* The events' signatures (sample_engine.h): static, as zs_delegate_broadcast
   keeps a signature by reference. */
static const zs_property_desc on_tick_params[] = {
    {"dt", "Float64", OFFSET(sample_on_tick_params, dt), ZS_PARAM_IN, NULL},
    {"frame", "Int64", OFFSET(sample_on_tick_params, frame), ZS_PARAM_IN, NULL},
};
static const zs_function_desc on_tick_signature = {
    "on_tick", NULL, NULL, 0, sizeof(sample_on_tick_params), on_tick_params, COUNT(on_tick_params)};
static const zs_property_desc on_damaged_params[] = {
    {"actor", "Actor | None", OFFSET(sample_on_damaged_params, actor), ZS_PARAM_IN, NULL},
    {"amount", "Float64", OFFSET(sample_on_damaged_params, amount), ZS_PARAM_IN, NULL},
    {"instigator", "Actor | None", OFFSET(sample_on_damaged_params, instigator), ZS_PARAM_IN, NULL},
};
static const zs_function_desc on_damaged_signature = {"on_damaged",
                                                      NULL,
                                                      NULL,
                                                      0,
                                                      sizeof(sample_on_damaged_params),
                                                      on_damaged_params,
                                                      COUNT(on_damaged_params)};

/* The signature of an event by name (sample_engine.h). */
SAMPLE_ENGINE_EXPORT const zs_function_desc *zs_sample_engine_event(const char *name) {
    if (name == NULL) return NULL;
    if (strcmp(name, on_tick_signature.name) == 0) return &on_tick_signature;
    if (strcmp(name, on_damaged_signature.name) == 0) return &on_damaged_signature;
    return NULL;
}

/* ---- helpers ------------------------------------------------------------ */

/* The engine state a native function's `user` is. */
static engine_state *state_of(void *user) {
    assert(user != NULL);
    return user;
}

/* The object of class `cls` (or a subclass) a handle names, or NULL when the
   handle is null or stale or the object of another class. Valid until the
   next call that may run script code. */
static zs_object *object_of(const engine_state *s, zs_runtime *rt, zs_ref ref,
                            const zs_class *cls) {
    zs_object *object = s->api->zs_resolve(rt, ref);
    return object != NULL && s->api->zs_class_is_a(object->cls, cls) ? object : NULL;
}

/* The World `self` names, or NULL (see object_of). */
static sample_world *world_of(const engine_state *s, zs_runtime *rt, zs_ref self) {
    return (sample_world *)object_of(s, rt, self, s->world);
}

/* The Actor a handle names, or NULL (see object_of). */
static sample_actor *actor_of(const engine_state *s, zs_runtime *rt, zs_ref ref) {
    return (sample_actor *)object_of(s, rt, ref, s->actor);
}

/* Why a handle that should name an object of `cls` does not: ZS_E_INVALID
   when it is null or names another class's object, ZS_E_STALE when gone. */
static zs_status missing(const engine_state *s, zs_runtime *rt, zs_ref ref) {
    return ref != ZS_NULL_REF && s->api->zs_resolve(rt, ref) == NULL ? ZS_E_STALE : ZS_E_INVALID;
}

/* The class a SubclassOf value names (class id + 1, 0: None) if it derives
   from base; NULL for None, an unknown id or an unrelated class. */
static const zs_class *subclass_of(const engine_state *s, zs_runtime *rt, uint32_t stored,
                                   const zs_class *base) {
    if (stored == 0) return NULL;
    const zs_class *cls = s->api->zs_class_by_id(rt, stored - 1);
    return cls != NULL && s->api->zs_class_is_a(cls, base) ? cls : NULL;
}

/* Whether a live object was marked as garbage (destroyed, not yet freed). */
static bool is_garbage(const engine_state *s, zs_runtime *rt, zs_ref ref) {
    int garbage = 0;
    return s->api->zs_is_garbage(rt, ref, &garbage) == ZS_OK && garbage;
}

/* Create an object of cls with outer `outer` and append it to the object
   array at `array_offset` in outer (the owner), so it is reachable before
   anything else runs; on failure the half-made object is marked garbage.
   *out_object is valid until the next call that may run script code. */
static zs_status new_child(const engine_state *s, zs_runtime *rt, const zs_class *cls, zs_ref outer,
                           uint32_t array_offset, zs_ref *out_ref, zs_object **out_object) {
    const zs_api *api = s->api;
    zs_status status = api->zs_object_new(rt, cls, outer, ZS_NAME_AUTO, 0, out_ref, out_object);
    if (status != ZS_OK) return status;
    zs_object *holder = api->zs_resolve(rt, outer);
    assert(holder != NULL); /* object_new checked it, and nothing ran since */
    zs_array *array = (zs_array *)(void *)((char *)holder + array_offset);
    status = api->zs_array_insert(rt, outer, s->object_array, array, array->count, out_ref, 1);
    if (status != ZS_OK) api->zs_mark_as_garbage(rt, *out_ref);
    return status;
}

/* ---- World -------------------------------------------------------------- */

/* World.spawn: create an actor of cls in this world at `at`, then run its
   begin_play event (a script's override or the native default). */
static zs_status world_spawn(void *user, zs_runtime *rt, zs_ref self, void *params) {
    const engine_state *s = state_of(user);
    const zs_api *api = s->api;
    sample_spawn_params *p = params;
    if (p == NULL) return ZS_E_INVALID;
    p->return_value = ZS_NULL_REF;
    const zs_class *cls = subclass_of(s, rt, p->cls, s->actor);
    if (cls == NULL) return ZS_E_INVALID;
    if (world_of(s, rt, self) == NULL) return missing(s, rt, self);
    zs_ref actor = ZS_NULL_REF;
    zs_object *object = NULL;
    zs_status status = new_child(s, rt, cls, self, OFFSET(sample_world, actors), &actor, &object);
    if (status != ZS_OK) return status;
    sample_actor *a = (sample_actor *)object;
    a->transform = p->at;
    a->max_health = SAMPLE_DEFAULT_MAX_HEALTH;
    status = api->zs_store_ref(rt, actor, OFFSET(sample_actor, world), self);
    if (status != ZS_OK) {
        api->zs_mark_as_garbage(rt, actor);
        return status;
    }
    /* Script code may run: a, and the world, may be gone after this. A
       script's failure (ZS_E_CALL_FAILED) was reported by the scripting
       layer already; the actor is spawned all the same, as a game engine
       keeps running past a script error. */
    status = api->zs_call_function(rt, actor, "begin_play", NULL);
    if (actor_of(s, rt, actor) != NULL && !is_garbage(s, rt, actor)) p->return_value = actor;
    return status == ZS_E_CALL_FAILED ? ZS_OK : status;
}

/* Remove `actor`, and the null entries a collection left, from a world's
   actors. */
static zs_status forget_actor(const engine_state *s, zs_runtime *rt, zs_ref self, zs_ref actor) {
    sample_world *w = world_of(s, rt, self);
    if (w == NULL) return ZS_OK; /* the world went first */
    zs_status status = ZS_OK;
    for (uint32_t i = w->actors.count; i-- > 0 && status == ZS_OK;) {
        zs_ref entry = ((const zs_ref *)w->actors.data)[i];
        if (entry == actor || entry == ZS_NULL_REF)
            status = s->api->zs_array_remove(rt, self, s->object_array, &w->actors, i, 1);
    }
    return status;
}

/* World.destroy: run the actor's on_destroy event, then take it out of the
   world and mark it, and its components, as garbage (freed by the next
   collection). on_destroy's failure is reported after the actor is gone. */
static zs_status world_destroy(void *user, zs_runtime *rt, zs_ref self, void *params) {
    const engine_state *s = state_of(user);
    const zs_api *api = s->api;
    const sample_destroy_params *p = params;
    if (p == NULL) return ZS_E_INVALID;
    zs_ref actor = p->actor;
    if (actor_of(s, rt, actor) == NULL) return missing(s, rt, actor);
    if (world_of(s, rt, self) == NULL) return missing(s, rt, self);
    /* Script code may run: resolve everything again after it. */
    zs_status status = api->zs_call_function(rt, actor, "on_destroy", NULL);
    if (status == ZS_E_STALE || status == ZS_E_DYING) status = ZS_OK; /* already going */
    zs_status removed = forget_actor(s, rt, self, actor);
    if (status == ZS_OK) status = removed;
    const sample_actor *a = actor_of(s, rt, actor);
    if (a == NULL) return status;
    for (uint32_t i = 0; i < a->components.count; i++) {
        zs_ref component = ((const zs_ref *)a->components.data)[i];
        if (component != ZS_NULL_REF) api->zs_mark_as_garbage(rt, component);
    }
    api->zs_mark_as_garbage(rt, actor);
    return status;
}

/* World.find: the index-th actor of the world still alive (not destroyed),
   or None. */
static zs_status world_find(void *user, zs_runtime *rt, zs_ref self, void *params) {
    const engine_state *s = state_of(user);
    sample_find_params *p = params;
    if (p == NULL) return ZS_E_INVALID;
    p->return_value = ZS_NULL_REF;
    const sample_world *w = world_of(s, rt, self);
    if (w == NULL) return missing(s, rt, self);
    int32_t seen = 0;
    for (uint32_t i = 0; i < w->actors.count && p->index >= 0; i++) {
        zs_ref entry = ((const zs_ref *)w->actors.data)[i];
        if (actor_of(s, rt, entry) == NULL || is_garbage(s, rt, entry)) continue;
        if (seen++ == p->index) {
            p->return_value = entry;
            break;
        }
    }
    return ZS_OK;
}

/* World.tick: advance the clock, then call every actor's tick event (a
   script's override or the native default); returns how many were called.
   zs_call_each calls every Actor of the runtime, so with several worlds
   each world's tick ticks them all. */
static zs_status world_tick(void *user, zs_runtime *rt, zs_ref self, void *params) {
    const engine_state *s = state_of(user);
    sample_world_tick_params *p = params;
    if (p == NULL) return ZS_E_INVALID;
    p->return_value = 0;
    sample_world *w = world_of(s, rt, self);
    if (w == NULL) return missing(s, rt, self);
    w->frame += 1;
    w->time += p->dt;
    sample_actor_tick_params tick = {p->dt};
    uint32_t called = 0;
    /* Script code may run: w may be gone after this. */
    zs_status status = s->api->zs_call_each(rt, s->actor, "tick", &tick, &called);
    p->return_value = called > INT32_MAX ? INT32_MAX : (int32_t)called;
    if (status == ZS_E_CALL_FAILED) status = ZS_OK; /* reported already, as in spawn */
    /* Then the world's on_tick event, if the world is still there: its
       listeners may destroy it, collect or close the runtime (the
       broadcast copies the bindings first, and w is not used after it). */
    w = world_of(s, rt, self);
    if (status != ZS_OK || w == NULL) return status;
    sample_on_tick_params event = {p->dt, w->frame};
    zs_status broadcast = s->api->zs_delegate_broadcast(rt, self, s->multicast, &w->on_tick,
                                                        &on_tick_signature, &event, NULL);
    /* A listener's failure was its own (reported by the scripting layer);
       the engine's frame goes on, as after a failed tick. */
    return broadcast == ZS_E_NOMEM ? broadcast : ZS_OK;
}

/* World.version (static): the engine's version, 1. */
static zs_status world_version(void *user, zs_runtime *rt, zs_ref self, void *params) {
    (void)user;
    (void)rt;
    (void)self;
    sample_version_params *p = params;
    if (p == NULL) return ZS_E_INVALID;
    p->return_value = 1;
    return ZS_OK;
}

/* World.collect: a full collection from inside a native function. One that
   stops for the scripting layer's conjugates (ZS_E_EXPIRY_PENDING) is a
   success: that layer finishes the purge. */
static zs_status world_collect(void *user, zs_runtime *rt, zs_ref self, void *params) {
    (void)self;
    (void)params;
    zs_status status = state_of(user)->api->zs_collect_garbage(rt);
    return status == ZS_E_EXPIRY_PENDING ? ZS_OK : status;
}

/* ---- Actor -------------------------------------------------------------- */

/* Actor.take_damage: lose `amount` health (clamped at 0; a fraction of a
   point costs the whole point); alive while health > 0. Returns the health
   left. A negative or NaN amount is refused. */
static zs_status actor_take_damage(void *user, zs_runtime *rt, zs_ref self, void *params) {
    const engine_state *s = state_of(user);
    sample_take_damage_params *p = params;
    if (p == NULL || !(p->amount >= 0)) return ZS_E_INVALID;
    sample_actor *a = actor_of(s, rt, self);
    if (a == NULL) return missing(s, rt, self);
    double left = (double)a->health - p->amount;
    a->health = left > 0 ? (int32_t)left : 0; /* left <= health: it fits */
    a->alive = a->health > 0;
    p->return_value = a->health;
    /* Then the actor's on_damaged event: its listeners may destroy the
       actor or close the runtime (a is not used after the broadcast). */
    zs_ref instigator = s->api->zs_resolve(rt, p->instigator) != NULL ? p->instigator : ZS_NULL_REF;
    sample_on_damaged_params event = {self, p->amount, instigator};
    zs_status broadcast = s->api->zs_delegate_broadcast(rt, self, s->multicast, &a->on_damaged,
                                                        &on_damaged_signature, &event, NULL);
    return broadcast == ZS_E_NOMEM ? broadcast : ZS_OK; /* listeners' failures are theirs */
}

/* Actor.get_location: the location, as an out parameter. */
static zs_status actor_get_location(void *user, zs_runtime *rt, zs_ref self, void *params) {
    const engine_state *s = state_of(user);
    sample_get_location_params *p = params;
    if (p == NULL) return ZS_E_INVALID;
    const sample_actor *a = actor_of(s, rt, self);
    if (a == NULL) return missing(s, rt, self);
    p->location = a->transform.location;
    return ZS_OK;
}

/* Actor.heal: gain up to `amount` health, never past max_health, and write
   back (inout) what was actually healed. A negative amount is refused. */
static zs_status actor_heal(void *user, zs_runtime *rt, zs_ref self, void *params) {
    const engine_state *s = state_of(user);
    sample_heal_params *p = params;
    if (p == NULL || p->amount < 0) return ZS_E_INVALID;
    sample_actor *a = actor_of(s, rt, self);
    if (a == NULL) return missing(s, rt, self);
    int64_t room = (int64_t)a->max_health - a->health;
    int64_t healed = room <= 0 ? 0 : room < p->amount ? room : p->amount;
    a->health = (int32_t)(a->health + healed); /* at most max_health */
    a->alive = a->health > 0;
    p->amount = (int32_t)healed;
    return ZS_OK;
}

/* Actor.move: add delta to the location. */
static zs_status actor_move(void *user, zs_runtime *rt, zs_ref self, void *params) {
    const engine_state *s = state_of(user);
    const sample_move_params *p = params;
    if (p == NULL) return ZS_E_INVALID;
    sample_actor *a = actor_of(s, rt, self);
    if (a == NULL) return missing(s, rt, self);
    a->transform.location.x += p->delta.x;
    a->transform.location.y += p->delta.y;
    a->transform.location.z += p->delta.z;
    return ZS_OK;
}

/* Actor.add_component: create an enabled component of cls owned by (and
   inside) this actor, appended to its components. */
static zs_status actor_add_component(void *user, zs_runtime *rt, zs_ref self, void *params) {
    const engine_state *s = state_of(user);
    const zs_api *api = s->api;
    sample_add_component_params *p = params;
    if (p == NULL) return ZS_E_INVALID;
    p->return_value = ZS_NULL_REF;
    const zs_class *cls = subclass_of(s, rt, p->cls, s->component);
    if (cls == NULL) return ZS_E_INVALID;
    if (actor_of(s, rt, self) == NULL) return missing(s, rt, self);
    zs_ref component = ZS_NULL_REF;
    zs_object *object = NULL;
    zs_status status = new_child(s, rt, cls, self, OFFSET(sample_actor, components), &component,
                                 &object);
    if (status != ZS_OK) return status;
    ((sample_component *)object)->enabled = true;
    status = api->zs_store_ref(rt, component, OFFSET(sample_component, owner), self);
    if (status != ZS_OK) {
        api->zs_mark_as_garbage(rt, component);
        return status;
    }
    p->return_value = component;
    return ZS_OK;
}

/* Actor.begin_play's native default: come alive with full health. */
static zs_status actor_begin_play(void *user, zs_runtime *rt, zs_ref self, void *params) {
    (void)params;
    const engine_state *s = state_of(user);
    sample_actor *a = actor_of(s, rt, self);
    if (a == NULL) return missing(s, rt, self);
    a->alive = true;
    a->health = a->max_health;
    return ZS_OK;
}

/* Actor.tick's native default: count the tick and move along x at speed. */
static zs_status actor_tick(void *user, zs_runtime *rt, zs_ref self, void *params) {
    const engine_state *s = state_of(user);
    const sample_actor_tick_params *p = params;
    if (p == NULL) return ZS_E_INVALID;
    sample_actor *a = actor_of(s, rt, self);
    if (a == NULL) return missing(s, rt, self);
    a->ticks += 1;
    a->transform.location.x += a->speed * p->dt;
    return ZS_OK;
}

/* ---- install ------------------------------------------------------------ */

/* The cleanup the runtime runs when freed: release the engine's state. */
static void free_state(void *user) { free(user); }

/* Whether this engine is installed in rt already (a class of rt describes
   World.spawn). */
static bool installed(const zs_api *api, zs_runtime *rt) {
    uint32_t count = api->zs_class_count(rt);
    for (uint32_t id = 0; id < count; id++) {
        const zs_class_desc *desc = api->zs_class_describe(api->zs_class_by_id(rt, id));
        for (uint32_t i = 0; desc != NULL && i < desc->function_count; i++)
            if (desc->functions[i].entry == world_spawn) return true;
    }
    return false;
}

/* The runtime's types the descriptions name: references, containers,
   delegates, and the structs Vec3 and Transform; and the enum Team. */
static zs_status register_types(engine_state *s, zs_runtime *rt) {
    const zs_api *api = s->api;
    const zs_type *name = NULL;
    zs_status status = api->zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &s->object);
    if (status == ZS_OK)
        status = api->zs_type_basic(rt, ZS_TYPE_WEAK_OBJECT, 8, 8, &s->weak_object);
    if (status == ZS_OK) status = api->zs_type_basic(rt, ZS_TYPE_MULTICAST, 0, 0, &s->multicast);
    /* A Name: its index in the name table and its number, 8 bytes. */
    if (status == ZS_OK) status = api->zs_type_basic(rt, ZS_TYPE_PLAIN, 8, 8, &name);
    if (status == ZS_OK)
        status = api->zs_type_container(rt, ZS_TYPE_ARRAY, s->object, NULL, &s->object_array);
    if (status == ZS_OK) status = api->zs_type_container(rt, ZS_TYPE_SET, name, NULL, &s->name_set);
    if (status == ZS_OK) status = api->zs_enum_register(rt, &team_desc);
    if (status == ZS_OK) status = api->zs_struct_register(rt, &vec3_desc, &s->vec3);
    if (status != ZS_OK) return status;
    s->transform_members[0] = (zs_property_desc){"location", "Vec3",
                                                 OFFSET(sample_transform, location), 0, s->vec3};
    s->transform_members[1] = (zs_property_desc){"yaw", "Float64", OFFSET(sample_transform, yaw), 0,
                                                 NULL};
    s->transform_members[2] = (zs_property_desc){"scale", "Float64",
                                                 OFFSET(sample_transform, scale), 0, NULL};
    s->transform_desc = (zs_struct_desc){"Transform", sizeof(sample_transform),
                                         _Alignof(sample_transform), s->transform_members,
                                         COUNT(s->transform_members)};
    return api->zs_struct_register(rt, &s->transform_desc, &s->transform);
}

/* A property description (a class's, at an offset in its instance). */
static zs_property_desc property(const char *name, const char *type, uint32_t offset,
                                 const zs_type *native) {
    return (zs_property_desc){name, type, offset, 0, native};
}

/* A function description whose entry gets the engine state. */
static zs_function_desc function(engine_state *s, const char *name, zs_native_function entry,
                                 uint32_t flags, uint32_t block_size,
                                 const zs_property_desc *params, uint32_t param_count) {
    return (zs_function_desc){name, entry, s, flags, block_size, params, param_count};
}

/* Describe and register World. */
static zs_status register_world(engine_state *s, zs_runtime *rt) {
    zs_property_desc *p = s->world_properties;
    p[0] = property("frame", "Int64", OFFSET(sample_world, frame), NULL);
    p[1] = property("time", "Float64", OFFSET(sample_world, time), NULL);
    p[2] = property("actors", "Array[Actor]", OFFSET(sample_world, actors), s->object_array);
    p[3] = property("gravity", "Float64", OFFSET(sample_world, gravity), NULL);
    p[4] = property("on_tick", "MulticastDelegate", OFFSET(sample_world, on_tick), s->multicast);
    zs_function_desc *f = s->world_functions;
    f[0] = function(s, "spawn", world_spawn, 0, sizeof(sample_spawn_params), spawn_params,
                    COUNT(spawn_params));
    f[1] = function(s, "destroy", world_destroy, 0, sizeof(sample_destroy_params), destroy_params,
                    COUNT(destroy_params));
    f[2] = function(s, "find", world_find, 0, sizeof(sample_find_params), find_params,
                    COUNT(find_params));
    f[3] = function(s, "tick", world_tick, 0, sizeof(sample_world_tick_params), world_tick_params,
                    COUNT(world_tick_params));
    f[4] = function(s, "version", world_version, ZS_FUNCTION_STATIC, sizeof(sample_version_params),
                    version_params, COUNT(version_params));
    f[5] = function(s, "collect", world_collect, 0, 0, NULL, 0);
    s->world_desc = (zs_class_desc){.name = "World",
                                    .instance_size = sizeof(sample_world),
                                    .properties = p,
                                    .property_count = COUNT(s->world_properties),
                                    .functions = f,
                                    .function_count = COUNT(s->world_functions)};
    return s->api->zs_class_register(rt, &s->world_desc, &s->world);
}

/* Describe and register Actor. */
static zs_status register_actor(engine_state *s, zs_runtime *rt) {
    zs_property_desc *p = s->actor_properties;
    p[0] = property("world", "World | None", OFFSET(sample_actor, world), s->object);
    p[1] = property("transform", "Transform", OFFSET(sample_actor, transform), s->transform);
    p[2] = property("team", "Team", OFFSET(sample_actor, team), NULL);
    p[3] = property("health", "Int32", OFFSET(sample_actor, health), NULL);
    p[4] = property("max_health", "Int32", OFFSET(sample_actor, max_health), NULL);
    p[5] = property("speed", "Float64", OFFSET(sample_actor, speed), NULL);
    p[6] = property("alive", "Bool", OFFSET(sample_actor, alive), NULL);
    p[7] = property("ticks", "Int64", OFFSET(sample_actor, ticks), NULL);
    p[8] = property("target", "WeakObjectPtr[Actor]", OFFSET(sample_actor, target), s->weak_object);
    p[9] = property("components", "Array[Component]", OFFSET(sample_actor, components),
                    s->object_array);
    p[10] = property("tags", "Set[Name]", OFFSET(sample_actor, tags), s->name_set);
    p[11] = property("on_damaged", "MulticastDelegate", OFFSET(sample_actor, on_damaged),
                     s->multicast);
    zs_function_desc *f = s->actor_functions;
    f[0] = function(s, "take_damage", actor_take_damage, 0, sizeof(sample_take_damage_params),
                    take_damage_params, COUNT(take_damage_params));
    f[1] = function(s, "get_location", actor_get_location, 0, sizeof(sample_get_location_params),
                    get_location_params, COUNT(get_location_params));
    f[2] = function(s, "heal", actor_heal, 0, sizeof(sample_heal_params), heal_params,
                    COUNT(heal_params));
    f[3] = function(s, "move", actor_move, 0, sizeof(sample_move_params), move_params,
                    COUNT(move_params));
    f[4] = function(s, "add_component", actor_add_component, 0, sizeof(sample_add_component_params),
                    add_component_params, COUNT(add_component_params));
    f[5] = function(s, "begin_play", actor_begin_play, ZS_FUNCTION_EVENT, 0, NULL, 0);
    f[6] = function(s, "tick", actor_tick, ZS_FUNCTION_EVENT, sizeof(sample_actor_tick_params),
                    actor_tick_params, COUNT(actor_tick_params));
    f[7] = function(s, "on_destroy", NULL, ZS_FUNCTION_EVENT, 0, NULL, 0);
    s->actor_desc = (zs_class_desc){.name = "Actor",
                                    .instance_size = sizeof(sample_actor),
                                    .properties = p,
                                    .property_count = COUNT(s->actor_properties),
                                    .functions = f,
                                    .function_count = COUNT(s->actor_functions)};
    return s->api->zs_class_register(rt, &s->actor_desc, &s->actor);
}

/* Describe and register Component and MovementComponent. */
static zs_status register_components(engine_state *s, zs_runtime *rt) {
    zs_property_desc *p = s->component_properties;
    p[0] = property("owner", "Actor | None", OFFSET(sample_component, owner), s->object);
    p[1] = property("enabled", "Bool", OFFSET(sample_component, enabled), NULL);
    s->component_desc = (zs_class_desc){.name = "Component",
                                        .instance_size = sizeof(sample_component),
                                        .properties = p,
                                        .property_count = COUNT(s->component_properties)};
    zs_status status = s->api->zs_class_register(rt, &s->component_desc, &s->component);
    if (status != ZS_OK) return status;
    s->movement_properties[0] = property("velocity", "Vec3",
                                         OFFSET(sample_movement_component, velocity), s->vec3);
    s->movement_desc = (zs_class_desc){.name = "MovementComponent",
                                       .parent = s->component,
                                       .instance_size = sizeof(sample_movement_component),
                                       .properties = s->movement_properties,
                                       .property_count = COUNT(s->movement_properties)};
    return s->api->zs_class_register(rt, &s->movement_desc, &s->movement);
}

/* Register the engine in rt (sample_engine.h): the entry point a host calls. */
SAMPLE_ENGINE_EXPORT zs_status zs_sample_engine_install(const struct zs_api *api, zs_runtime *rt) {
    if (api == NULL || rt == NULL || api->version != ZS_API_VERSION || api->size < sizeof *api)
        return ZS_E_INVALID;
    if (installed(api, rt)) return ZS_E_INVALID;
    engine_state *s = calloc(1, sizeof *s);
    if (s == NULL) return ZS_E_NOMEM;
    s->api = api;
    /* The cleanup first: from here on the runtime owns the state, which its
       descriptions point into even if a later registration fails. */
    zs_status status = api->zs_runtime_add_cleanup(rt, free_state, s);
    if (status != ZS_OK) {
        free(s);
        return status;
    }
    status = register_types(s, rt);
    if (status == ZS_OK) status = register_world(s, rt);
    if (status == ZS_OK) status = register_actor(s, rt);
    if (status == ZS_OK) status = register_components(s, rt);
    return status;
}
