/*
 * sample_engine.h -- a sample game engine module: the native host that the
 * tests, the examples and the demo script from Python.
 *
 * sample_engine.c registers, in one runtime, the enum Team, the structs Vec3
 * and Transform and the classes World, Actor, Component and
 * MovementComponent, with their properties and functions described for
 * scripts (zsharp.h, "reflection"). It calls the library only through the
 * API table (zsharp_api.h), so the same source is compiled into zsharp_py's
 * native library and, standalone, into a user's shared library:
 *
 *     gcc -shared -fPIC -std=c11 -I <zsharp_py.lowlevel.include_dir()> sample_engine.c
 *
 * The layouts below are the objects' and parameter blocks' memory, as the
 * descriptions give them (offsetof); a C host or test reads them directly.
 * Conventions of the blocks: an object reference is a zs_ref handle
 * (ZS_NULL_REF: None); a SubclassOf[X] is a uint32_t holding the class id + 1
 * (0: None), as zsharp_py stores a SubclassOf; a function's result is the
 * member `return_value`. This header is also read by zsharp_py's build as
 * cffi declarations: plain declarations only (no function-like macros, no
 * conditionals but the include guard).
 */
#ifndef SAMPLE_ENGINE_H
#define SAMPLE_ENGINE_H

#include "zsharp.h"

/* Register everything in rt: call once per runtime, before any script uses
   it (ZS_E_INVALID when already installed there, or when api is not a
   table of this version). Per-runtime state is freed when rt is. */
zs_status zs_sample_engine_install(const struct zs_api *api, zs_runtime *rt);

/* ---- enum and structs ---------------------------------------------------- */

/* Team (stored as UInt8). */
enum sample_team { SAMPLE_TEAM_NEUTRAL = 0, SAMPLE_TEAM_RED = 1, SAMPLE_TEAM_BLUE = 2 };

/* Vec3 {x, y, z: Float64} */
typedef struct sample_vec3 {
    double x;
    double y;
    double z;
} sample_vec3;

/* Transform {location: Vec3, yaw: Float64, scale: Float64} */
typedef struct sample_transform {
    sample_vec3 location;
    double yaw;
    double scale;
} sample_transform;

/* ---- classes ------------------------------------------------------------- */

/* World (root class). */
typedef struct sample_world {
    zs_object header;
    int64_t frame;    /* frame: Int64, +1 per tick() */
    double time;      /* time: Float64, + dt per tick() */
    zs_array actors;  /* actors: Array[Actor], the spawned actors not destroyed */
    double gravity;   /* gravity: Float64 */
    zs_array on_tick; /* on_tick: MulticastDelegate, broadcast by tick() (sample_on_tick_params) */
} sample_world;

/* Actor (root class). */
typedef struct sample_actor {
    zs_object header;
    zs_ref world;               /* world: World | None */
    sample_transform transform; /* transform: Transform */
    zs_ref target;              /* target: WeakObjectPtr[Actor] */
    zs_array components;        /* components: Array[Component] */
    zs_hash tags;               /* tags: Set[Name] */
    zs_array on_damaged;        /* on_damaged: MulticastDelegate, broadcast by take_damage()
                                   (sample_on_damaged_params) */
    double speed;               /* speed: Float64 */
    int64_t ticks;              /* ticks: Int64, +1 per native tick */
    int32_t health;             /* health: Int32 */
    int32_t max_health;         /* max_health: Int32 */
    uint8_t team;               /* team: Team (enum sample_team) */
    _Bool alive;                /* alive: Bool */
} sample_actor;

/* Component (root class). */
typedef struct sample_component {
    zs_object header;
    zs_ref owner;  /* owner: Actor | None */
    _Bool enabled; /* enabled: Bool */
} sample_component;

/* MovementComponent(Component). */
typedef struct sample_movement_component {
    sample_component base;
    sample_vec3 velocity; /* velocity: Vec3 */
} sample_movement_component;

/* ---- parameter blocks ------------------------------------------------------ */

/* World.spawn(cls: SubclassOf[Actor], at: Transform) -> Actor | None */
typedef struct sample_spawn_params {
    uint32_t cls;
    sample_transform at;
    zs_ref return_value;
} sample_spawn_params;

/* World.destroy(actor: Actor | None) */
typedef struct sample_destroy_params {
    zs_ref actor;
} sample_destroy_params;

/* World.find(index: Int32) -> Actor | None */
typedef struct sample_find_params {
    int32_t index;
    zs_ref return_value;
} sample_find_params;

/* World.tick(dt: Float64) -> Int32 */
typedef struct sample_world_tick_params {
    double dt;
    int32_t return_value;
} sample_world_tick_params;

/* World.version() -> Int32 (static) */
typedef struct sample_version_params {
    int32_t return_value;
} sample_version_params;

/* Actor.take_damage(amount: Float64, instigator: Actor | None) -> Float64 */
typedef struct sample_take_damage_params {
    double amount;
    zs_ref instigator;
    double return_value;
} sample_take_damage_params;

/* Actor.get_location(out location: Vec3) */
typedef struct sample_get_location_params {
    sample_vec3 location;
} sample_get_location_params;

/* Actor.heal(inout amount: Int32) */
typedef struct sample_heal_params {
    int32_t amount;
} sample_heal_params;

/* Actor.move(delta: Vec3) */
typedef struct sample_move_params {
    sample_vec3 delta;
} sample_move_params;

/* Actor.add_component(cls: SubclassOf[Component]) -> Component | None */
typedef struct sample_add_component_params {
    uint32_t cls;
    zs_ref return_value;
} sample_add_component_params;

/* Actor.tick(dt: Float64), the event World.tick calls on every actor */
typedef struct sample_actor_tick_params {
    double dt;
} sample_actor_tick_params;

/* ---- events: the signatures of the delegates the engine broadcasts ------- */

/* World.on_tick(dt: Float64, frame: Int64): broadcast by World.tick once the
   actors have ticked, with the frame just counted. */
typedef struct sample_on_tick_params {
    double dt;
    int64_t frame;
} sample_on_tick_params;

/* Actor.on_damaged(actor: Actor | None, amount: Float64, instigator: Actor |
   None): broadcast by Actor.take_damage once the damage is taken. */
typedef struct sample_on_damaged_params {
    zs_ref actor;
    double amount;
    zs_ref instigator;
} sample_on_damaged_params;

/* The signature of the event `name` ("on_tick", "on_damaged"), as
   zs_delegate_broadcast takes it (static: valid for the process), or NULL. */
const zs_function_desc *zs_sample_engine_event(const char *name);

#endif /* SAMPLE_ENGINE_H */
