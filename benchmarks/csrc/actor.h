/*
 * actor.h -- the C struct and functions that every binding peer binds
 * (nanobind, pybind11, raw cffi, ctypes). zsharp_py declares the same
 * members as a zs.Object subclass; its methods call the same function bodies
 * compiled for its layout (zs_actor_*: the zs_object header, then the same
 * members), built into the raw cffi module (benchmarks/_build.py).
 */
#ifndef BENCH_ACTOR_H
#define BENCH_ACTOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ACTOR_ARRAY_LENGTH 1000

typedef struct Vec3 {
    double x, y, z;
} Vec3;

typedef struct Actor {
    int32_t health;
    double x, y, z;
    struct Actor *target;
    Vec3 velocity; /* a struct member, read as a view */
} Actor;

typedef struct IntArray {
    int32_t values[ACTOR_ARRAY_LENGTH];
} IntArray;

/* The method bodies, also compiled for zsharp_py's layout of the same
   members (zs_actor_* in the raw cffi module), so every peer runs the same
   code. */
#define ACTOR_BODIES(T, PREFIX)                                                                    \
    int32_t PREFIX##_get_health(const T *actor) { return actor->health; }                          \
    void PREFIX##_move(T *actor, double dx, double dy, double dz) {                                \
        actor->x += dx;                                                                            \
        actor->y += dy;                                                                            \
        actor->z += dz;                                                                            \
    }

void actor_init(Actor *actor);
Actor *actor_new(void);
void actor_free(Actor *actor);
int32_t actor_get_health(const Actor *actor);
void actor_move(Actor *actor, double dx, double dy, double dz);
Actor *actor_get_target(const Actor *actor);
void actor_set_target(Actor *actor, Actor *target);

/* Native code calling a managed override: tick(self, dt) through a function
   pointer (what raw cffi's and ctypes' callbacks are called through). */
typedef void (*actor_tick_fn)(void *self, double dt);
void actor_call_tick(actor_tick_fn tick, void *self, double dt);

/* The same through a C++ virtual function, overridden in Python through the
   trampolines of nanobind and pybind11 (nb_actor.cpp, pb_actor.cpp). */
#ifdef __cplusplus
}
struct Ticker {
    virtual ~Ticker() = default;
    virtual void tick(double dt) { (void)dt; }
};
extern "C" {
#endif

/* sizeof, for bindings that declare the struct themselves (ctypes). */
size_t actor_sizeof(void);
size_t int_array_sizeof(void);

void int_array_init(IntArray *array);
IntArray *int_array_new(void);
void int_array_free(IntArray *array);

#ifdef __cplusplus
}
#endif
#endif
