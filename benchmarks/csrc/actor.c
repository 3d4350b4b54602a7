/* actor.c -- see actor.h. */
#include "actor.h"

#include <stdlib.h>
#include <string.h>

ACTOR_BODIES(Actor, actor)

void actor_init(Actor *actor) {
    memset(actor, 0, sizeof *actor);
    actor->health = 100;
}

Actor *actor_new(void) {
    Actor *actor = malloc(sizeof *actor);
    if (actor != NULL) actor_init(actor);
    return actor;
}

void actor_free(Actor *actor) { free(actor); }

Actor *actor_get_target(const Actor *actor) { return actor->target; }
void actor_set_target(Actor *actor, Actor *target) { actor->target = target; }

size_t actor_sizeof(void) { return sizeof(Actor); }
size_t int_array_sizeof(void) { return sizeof(IntArray); }

void int_array_init(IntArray *array) {
    for (int32_t i = 0; i < ACTOR_ARRAY_LENGTH; i++) array->values[i] = i;
}

IntArray *int_array_new(void) {
    IntArray *array = malloc(sizeof *array);
    if (array != NULL) int_array_init(array);
    return array;
}

void int_array_free(IntArray *array) { free(array); }

void actor_call_tick(actor_tick_fn tick, void *self, double dt) { tick(self, dt); }
