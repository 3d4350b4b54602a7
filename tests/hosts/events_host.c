/* A native host with events, the example of docs/events.md: built by
 * tests/interop/test_native_broadcast.py as a user's host module is
 * (tests/native_build.py), against the API table only.
 *
 * An Announcer has a multicast event, on_announce(value: Int32, source:
 * Announcer | None), which its function announce(value) broadcasts from C,
 * an event with a struct, on_moved(at: Spot), which move(x, y) broadcasts,
 * and a single-cast delegate, on_query(value: Int32) -> Int32, which
 * query(value) executes. A Counter's native function count(value, source)
 * takes on_announce's parameters: bound to the event, it is a native
 * listener. events_host_announce broadcasts on_announce from plain C, as a
 * host's own loop would. */
#include <stddef.h>
#include <stdlib.h>

#include "zsharp_api.h"

#define EXPORT __attribute__((visibility("default")))

/* [objects] */
typedef struct Spot {
    double x, y;
} Spot;

typedef struct Announcer {
    zs_object header;
    zs_array on_announce; /* MulticastDelegate */
    zs_array on_moved;    /* MulticastDelegate */
    zs_binding on_query;  /* Delegate */
    int32_t announced;    /* announce() calls */
} Announcer;

typedef struct Counter {
    zs_object header;
    int64_t total; /* the values counted */
    int32_t calls;
} Counter;

/* The parameter blocks of the events (their signatures below). */
typedef struct announce_params {
    int32_t value;
    zs_ref source;
} announce_params;
typedef struct moved_params {
    Spot at;
} moved_params;
typedef struct query_params {
    int32_t value;
    int32_t return_value;
} query_params;
/* [objects] */

typedef struct move_params {
    double x, y;
} move_params;

/* [signatures] */
/* A delegate's signature is a function description: the parameters'
   types, offsets and directions, and the block's size. Static: the
   runtime keeps it by reference. */
static const zs_property_desc announce_members[] = {
    {"value", "Int32", offsetof(announce_params, value), ZS_PARAM_IN, NULL},
    {"source", "Announcer | None", offsetof(announce_params, source), ZS_PARAM_IN, NULL},
};
static const zs_function_desc on_announce = {
    "on_announce", NULL, NULL, 0, sizeof(announce_params), announce_members, 2};
static const zs_property_desc moved_members[] = {
    {"at", "Spot", offsetof(moved_params, at), ZS_PARAM_IN, NULL},
};
static const zs_function_desc on_moved = {
    "on_moved", NULL, NULL, 0, sizeof(moved_params), moved_members, 1};
static const zs_property_desc query_members[] = {
    {"value", "Int32", offsetof(query_params, value), ZS_PARAM_IN, NULL},
    {"return_value", "Int32", offsetof(query_params, return_value), ZS_PARAM_RETURN, NULL},
};
static const zs_function_desc on_query = {
    "on_query", NULL, NULL, 0, sizeof(query_params), query_members, 2};
/* [signatures] */

/* Per-runtime state: the descriptions name the runtime's types. */
typedef struct host {
    const zs_api *api;
    const zs_type *multicast, *single, *spot;
    zs_property_desc spot_members[2];
    zs_struct_desc spot_desc;
    zs_property_desc announcer_properties[3], counter_properties[2], move_members[2];
    zs_function_desc announcer_functions[3], counter_functions[1];
    zs_class_desc announcer_desc, counter_desc;
} host;

/* [broadcast] */
/* Announcer.announce(value: Int32): broadcast on_announce(value, self).
   The listeners may destroy the announcer, collect or close the runtime:
   the broadcast copied the bindings first, and `a` is not used after it. A
   listener's failure is its own (a Python listener's exception went to
   sys.unraisablehook): the announcement itself succeeded. */
static zs_status announce(void *user, zs_runtime *rt, zs_ref self, void *params) {
    const host *h = user;
    Announcer *a = (Announcer *)h->api->zs_resolve(rt, self);
    if (a == NULL) return ZS_E_STALE;
    a->announced++;
    announce_params event = {*(const int32_t *)params, self};
    zs_status status = h->api->zs_delegate_broadcast(rt, self, h->multicast, &a->on_announce,
                                                     &on_announce, &event, NULL);
    return status == ZS_E_NOMEM ? status : ZS_OK;
}

/* Announcer.query(value: Int32) -> Int32: what on_query answers, or -1
   when nothing is bound. */
static zs_status query(void *user, zs_runtime *rt, zs_ref self, void *params) {
    const host *h = user;
    Announcer *a = (Announcer *)h->api->zs_resolve(rt, self);
    if (a == NULL) return ZS_E_STALE;
    query_params block = {((query_params *)params)->value, -1};
    int called = 0;
    zs_status status = h->api->zs_delegate_execute(rt, self, &a->on_query, &on_query, &block,
                                                   &called);
    ((query_params *)params)->return_value = block.return_value;
    return status == ZS_E_NOMEM ? status : ZS_OK;
}
/* [broadcast] */

/* Announcer.move(x, y: Float64): broadcast on_moved(Spot{x, y}). */
static zs_status move(void *user, zs_runtime *rt, zs_ref self, void *params) {
    const host *h = user;
    Announcer *a = (Announcer *)h->api->zs_resolve(rt, self);
    if (a == NULL) return ZS_E_STALE;
    const move_params *p = params;
    moved_params event = {{p->x, p->y}};
    zs_status status = h->api->zs_delegate_broadcast(rt, self, h->multicast, &a->on_moved,
                                                     &on_moved, &event, NULL);
    return status == ZS_E_NOMEM ? status : ZS_OK;
}

/* Counter.count(value: Int32, source: Announcer | None): on_announce's
   parameters, so a Counter can listen natively. */
static zs_status count(void *user, zs_runtime *rt, zs_ref self, void *params) {
    const host *h = user;
    Counter *c = (Counter *)h->api->zs_resolve(rt, self);
    if (c == NULL) return ZS_E_STALE;
    c->total += ((const announce_params *)params)->value;
    c->calls++;
    return ZS_OK;
}

/* Broadcast an announcer's on_announce from plain C (no Python frame below
   it; a cffi call in ABI mode releases the GIL, so the scripting layer
   takes it per Python listener), with the report. */
EXPORT zs_status events_host_announce(const zs_api *api, zs_runtime *rt, zs_ref announcer,
                                      int32_t value, zs_broadcast_report *report) {
    const zs_type *multicast = NULL;
    zs_status status = api->zs_type_basic(rt, ZS_TYPE_MULTICAST, 0, 0, &multicast);
    Announcer *a = (Announcer *)api->zs_resolve(rt, announcer);
    if (status != ZS_OK || a == NULL) return status != ZS_OK ? status : ZS_E_STALE;
    announce_params event = {value, announcer};
    return api->zs_delegate_broadcast(rt, announcer, multicast, &a->on_announce, &on_announce,
                                      &event, report);
}

/* The signature of an event by name ("on_announce", "on_moved",
   "on_query"), for a test calling zs_delegate_broadcast itself. */
EXPORT const zs_function_desc *events_host_signature(const char *name) {
    const zs_function_desc *all[] = {&on_announce, &on_moved, &on_query};
    for (size_t i = 0; i < 3; i++) {
        const char *a = all[i]->name, *b = name;
        while (*a != '\0' && *a == *b) a++, b++;
        if (*a == *b) return all[i];
    }
    return NULL;
}

static void host_free(void *user) { free(user); }

/* Register Spot, Announcer and Counter in rt. */
EXPORT zs_status events_host_install(const zs_api *api, zs_runtime *rt) {
    if (api->version != ZS_API_VERSION || api->size != sizeof(zs_api)) return ZS_E_INVALID;
    host *h = calloc(1, sizeof *h);
    if (h == NULL) return ZS_E_NOMEM;
    h->api = api;
    zs_status s = api->zs_runtime_add_cleanup(rt, host_free, h);
    if (s != ZS_OK) {
        free(h);
        return s;
    }
    h->spot_members[0] = (zs_property_desc){"x", "Float64", offsetof(Spot, x), 0, NULL};
    h->spot_members[1] = (zs_property_desc){"y", "Float64", offsetof(Spot, y), 0, NULL};
    h->spot_desc = (zs_struct_desc){"Spot", sizeof(Spot), _Alignof(Spot), h->spot_members, 2};
    if ((s = api->zs_struct_register(rt, &h->spot_desc, &h->spot)) != ZS_OK ||
        (s = api->zs_type_basic(rt, ZS_TYPE_MULTICAST, 0, 0, &h->multicast)) != ZS_OK ||
        (s = api->zs_type_basic(rt, ZS_TYPE_DELEGATE, 0, 0, &h->single)) != ZS_OK)
        return s;
    h->announcer_properties[0] = (zs_property_desc){
        "on_announce", "MulticastDelegate", offsetof(Announcer, on_announce), 0, h->multicast};
    h->announcer_properties[1] = (zs_property_desc){
        "on_moved", "MulticastDelegate", offsetof(Announcer, on_moved), 0, h->multicast};
    h->announcer_properties[2] = (zs_property_desc){"on_query", "Delegate",
                                                    offsetof(Announcer, on_query), 0, h->single};
    static const zs_property_desc announce_args[] = {{"value", "Int32", 0, ZS_PARAM_IN, NULL}};
    h->move_members[0] = (zs_property_desc){"x", "Float64", offsetof(move_params, x), 0, NULL};
    h->move_members[1] = (zs_property_desc){"y", "Float64", offsetof(move_params, y), 0, NULL};
    h->announcer_functions[0] = (zs_function_desc){
        "announce", announce, h, 0, sizeof(int32_t), announce_args, 1};
    h->announcer_functions[1] = (zs_function_desc){
        "query", query, h, 0, sizeof(query_params), query_members, 2};
    h->announcer_functions[2] = (zs_function_desc){
        "move", move, h, 0, sizeof(move_params), h->move_members, 2};
    h->announcer_desc = (zs_class_desc){.name = "Announcer",
                                        .instance_size = sizeof(Announcer),
                                        .properties = h->announcer_properties,
                                        .property_count = 3,
                                        .functions = h->announcer_functions,
                                        .function_count = 3};
    h->counter_properties[0] = (zs_property_desc){"total", "Int64", offsetof(Counter, total), 0,
                                                  NULL};
    h->counter_properties[1] = (zs_property_desc){"calls", "Int32", offsetof(Counter, calls), 0,
                                                  NULL};
    /* count takes on_announce's block as it is: its parameters are the
       signature's own. */
    h->counter_functions[0] = (zs_function_desc){
        "count", count, h, 0, sizeof(announce_params), announce_members, 2};
    h->counter_desc = (zs_class_desc){.name = "Counter",
                                      .instance_size = sizeof(Counter),
                                      .properties = h->counter_properties,
                                      .property_count = 2,
                                      .functions = h->counter_functions,
                                      .function_count = 1};
    const zs_class *announcer = NULL, *counter = NULL;
    if ((s = api->zs_class_register(rt, &h->announcer_desc, &announcer)) != ZS_OK) return s;
    return api->zs_class_register(rt, &h->counter_desc, &counter);
}
