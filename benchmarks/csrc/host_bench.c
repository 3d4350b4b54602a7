/*
 * host_bench.c -- a small native host for the host_classes benchmark family
 * (benchmarks/host_classes.py): one class described in C and bound by
 * zsharp_py from its description (zs.native_class("BenchHost")), the same
 * members as nb_host.cpp's C++ class, which nanobind and pybind11 bind.
 *
 * Built apart from the library, as a user's host module is: it includes
 * zsharp_api.h and calls the C API through the table
 * zsharp_py.lowlevel.api_table() gives the address of.
 *
 *   class BenchHost:
 *       count: Int32
 *       speed: Float64
 *       def nop(self) -> None
 *       def add3(self, a: Int32, b: Int32, c: Int32) -> Int32
 *       event on_scalar(self, x: Float64)              (native default: counts)
 *       event on_struct(self, v: BenchVec3)            (native default: counts)
 *       event on_object(self, o: BenchHost | None)     (native default: counts)
 *   struct BenchVec3 { x, y, z: Float64 }
 *   class BenchActor:
 *       ref: BenchActor | None
 *       kids: Array[BenchActor]
 *       event tick(self, dt: Float64)                  (native default: counts)
 *
 * host_bench_call(api, rt, object, function, block, n) calls a function n
 * times in a C loop through zs_call_function, as an engine calls an event
 * (the nanobind peer calls its virtual from a C++ loop the same way).
 * host_bench_spawn creates BenchActors (or objects of a Python subclass,
 * by name) from C, into a holder's kids: objects Python has never seen;
 * host_bench_call_each_of calls a function once on each of them from one C
 * loop, host_bench_call_class through zs_call_each; host_bench_register_ticks
 * registers a function of each with the tick manager, and
 * host_bench_tick_frame runs one frame of it (zs_tick_frame).
 *
 *   class BenchEmitter:
 *       on_signal: MulticastDelegate                   (signature: (x: Float64))
 *
 * host_bench_broadcast(api, rt, emitter, x, n) broadcasts on_signal n times
 * from a C loop through zs_delegate_broadcast, as an engine broadcasts an
 * event to its listeners (the peers call each std::function of a vector).
 */
#include <stddef.h>
#include <stdlib.h>

#include "zsharp_api.h"

#define EXPORT __attribute__((visibility("default")))

typedef struct BenchVec3 {
    double x, y, z;
} BenchVec3;

typedef struct BenchHost {
    zs_object header;
    int32_t count;
    double speed;
    int64_t defaults; /* native default runs of the events (not described) */
} BenchHost;

typedef struct BenchActor {
    zs_object header;
    zs_ref ref;    /* ref: BenchActor | None */
    zs_array kids; /* kids: Array[BenchActor] */
    int64_t ticks; /* native default runs of tick (not described) */
} BenchActor;

typedef struct BenchEmitter {
    zs_object header;
    zs_array on_signal; /* on_signal: MulticastDelegate */
} BenchEmitter;

typedef struct add3_params {
    int32_t a, b, c, result;
} add3_params;
typedef struct scalar_params {
    double x;
} scalar_params;
typedef struct struct_params {
    BenchVec3 v;
} struct_params;
typedef struct object_params {
    zs_ref o;
} object_params;
typedef struct tick_params {
    double dt;
} tick_params;

/* Per-runtime state: the descriptions point into it (the struct's type). */
typedef struct host {
    const zs_api *api;
    const zs_type *vec3;
    zs_property_desc vec3_members[3];
    zs_property_desc properties[2];
    zs_property_desc add3_params[4], scalar_params[1], struct_params[1], object_params[1];
    zs_function_desc functions[5];
    zs_struct_desc vec3_desc;
    zs_class_desc class_desc;
    const zs_type *object, *kids; /* BenchActor | None, Array[BenchActor] */
    zs_property_desc actor_properties[2], tick_params[1];
    zs_function_desc actor_functions[1];
    zs_class_desc actor_desc;
    const zs_type *multicast; /* BenchEmitter.on_signal */
    zs_property_desc emitter_properties[1];
    zs_class_desc emitter_desc;
} host;

/* on_signal's signature: (x: Float64), the block a scalar_params. Static:
   the runtime keeps a signature by reference. */
static const zs_property_desc signal_params[] = {{"x", "Float64", 0, ZS_PARAM_IN, NULL}};
static const zs_function_desc signal_signature = {"on_signal",    NULL,          NULL, 0,
                                                  sizeof(double), signal_params, 1};

static zs_status nop(void *user, zs_runtime *rt, zs_ref self, void *params) {
    (void)user, (void)rt, (void)self, (void)params;
    return ZS_OK;
}

static zs_status add3(void *user, zs_runtime *rt, zs_ref self, void *params) {
    (void)user, (void)rt, (void)self;
    add3_params *p = params;
    p->result = p->a + p->b + p->c;
    return ZS_OK;
}

/* The events' native default: counts its runs on the object. */
static zs_status event_default(void *user, zs_runtime *rt, zs_ref self, void *params) {
    (void)params;
    host *h = user;
    BenchHost *object = (BenchHost *)h->api->zs_resolve(rt, self);
    if (object == NULL) return ZS_E_STALE;
    object->defaults++;
    return ZS_OK;
}

/* tick's native default: counts its runs on the actor. */
static zs_status tick_default(void *user, zs_runtime *rt, zs_ref self, void *params) {
    (void)params;
    host *h = user;
    BenchActor *actor = (BenchActor *)h->api->zs_resolve(rt, self);
    if (actor == NULL) return ZS_E_STALE;
    actor->ticks++;
    return ZS_OK;
}

static void host_free(void *user) { free(user); }

#define PROP(n, t, o) {n, t, o, ZS_PARAM_IN, NULL}
#define REF_PROP(n, t, o, native) {n, t, o, ZS_PARAM_IN, native}
#define PARAM(n, t, o, d) {n, t, o, d, NULL}

/* Register BenchVec3 and BenchHost in rt. */
EXPORT zs_status host_bench_install(const zs_api *api, zs_runtime *rt) {
    if (api->version != ZS_API_VERSION || api->size != sizeof(zs_api)) return ZS_E_INVALID;
    host *h = calloc(1, sizeof *h);
    if (h == NULL) return ZS_E_NOMEM;
    h->api = api;
    zs_status s = api->zs_runtime_add_cleanup(rt, host_free, h);
    if (s != ZS_OK) {
        free(h);
        return s;
    }
    h->vec3_members[0] = (zs_property_desc)PROP("x", "Float64", offsetof(BenchVec3, x));
    h->vec3_members[1] = (zs_property_desc)PROP("y", "Float64", offsetof(BenchVec3, y));
    h->vec3_members[2] = (zs_property_desc)PROP("z", "Float64", offsetof(BenchVec3, z));
    h->vec3_desc = (zs_struct_desc){"BenchVec3", sizeof(BenchVec3), _Alignof(BenchVec3),
                                    h->vec3_members, 3};
    if ((s = api->zs_struct_register(rt, &h->vec3_desc, &h->vec3)) != ZS_OK) return s;

    h->properties[0] = (zs_property_desc)PROP("count", "Int32", offsetof(BenchHost, count));
    h->properties[1] = (zs_property_desc)PROP("speed", "Float64", offsetof(BenchHost, speed));

    zs_property_desc *p = h->add3_params;
    p[0] = (zs_property_desc)PARAM("a", "Int32", offsetof(add3_params, a), ZS_PARAM_IN);
    p[1] = (zs_property_desc)PARAM("b", "Int32", offsetof(add3_params, b), ZS_PARAM_IN);
    p[2] = (zs_property_desc)PARAM("c", "Int32", offsetof(add3_params, c), ZS_PARAM_IN);
    p[3] = (zs_property_desc)PARAM("result", "Int32", offsetof(add3_params, result),
                                   ZS_PARAM_RETURN);
    h->scalar_params[0] = (zs_property_desc)PARAM("x", "Float64", 0, ZS_PARAM_IN);
    h->struct_params[0] = (zs_property_desc)PARAM("v", "BenchVec3", 0, ZS_PARAM_IN);
    h->object_params[0] = (zs_property_desc)PARAM("o", "BenchHost | None", 0, ZS_PARAM_IN);

    zs_function_desc *f = h->functions;
    f[0] = (zs_function_desc){"nop", nop, h, 0, 0, NULL, 0};
    f[1] = (zs_function_desc){"add3", add3, h, 0, sizeof(add3_params), h->add3_params, 4};
    f[2] = (zs_function_desc){"on_scalar",           event_default,    h, ZS_FUNCTION_EVENT,
                              sizeof(scalar_params), h->scalar_params, 1};
    f[3] = (zs_function_desc){"on_struct",           event_default,    h, ZS_FUNCTION_EVENT,
                              sizeof(struct_params), h->struct_params, 1};
    f[4] = (zs_function_desc){"on_object",           event_default,    h, ZS_FUNCTION_EVENT,
                              sizeof(object_params), h->object_params, 1};
    h->class_desc = (zs_class_desc){.name = "BenchHost",
                                    .instance_size = sizeof(BenchHost),
                                    .properties = h->properties,
                                    .property_count = 2,
                                    .functions = h->functions,
                                    .function_count = 5};
    const zs_class *cls = NULL;
    if ((s = api->zs_class_register(rt, &h->class_desc, &cls)) != ZS_OK) return s;

    if ((s = api->zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &h->object)) != ZS_OK ||
        (s = api->zs_type_container(rt, ZS_TYPE_ARRAY, h->object, NULL, &h->kids)) != ZS_OK)
        return s;
    h->actor_properties[0] = (zs_property_desc)REF_PROP("ref", "BenchActor | None",
                                                        offsetof(BenchActor, ref), h->object);
    h->actor_properties[1] = (zs_property_desc)REF_PROP("kids", "Array[BenchActor]",
                                                        offsetof(BenchActor, kids), h->kids);
    h->tick_params[0] = (zs_property_desc)PARAM("dt", "Float64", offsetof(tick_params, dt),
                                                ZS_PARAM_IN);
    h->actor_functions[0] = (zs_function_desc){
        "tick", tick_default, h, ZS_FUNCTION_EVENT, sizeof(tick_params), h->tick_params, 1};
    h->actor_desc = (zs_class_desc){.name = "BenchActor",
                                    .instance_size = sizeof(BenchActor),
                                    .properties = h->actor_properties,
                                    .property_count = 2,
                                    .functions = h->actor_functions,
                                    .function_count = 1};
    if ((s = api->zs_class_register(rt, &h->actor_desc, &cls)) != ZS_OK) return s;

    if ((s = api->zs_type_basic(rt, ZS_TYPE_MULTICAST, 0, 0, &h->multicast)) != ZS_OK) return s;
    h->emitter_properties[0] = (zs_property_desc)REF_PROP(
        "on_signal", "MulticastDelegate", offsetof(BenchEmitter, on_signal), h->multicast);
    h->emitter_desc = (zs_class_desc){.name = "BenchEmitter",
                                      .instance_size = sizeof(BenchEmitter),
                                      .properties = h->emitter_properties,
                                      .property_count = 1};
    return api->zs_class_register(rt, &h->emitter_desc, &cls);
}

/* Broadcast an emitter's on_signal(x) n times from a C loop, as an engine
 * broadcasts an event (the emitter resolved again before each: a listener
 * may destroy it); stops at the first failure and returns its status. */
EXPORT zs_status host_bench_broadcast(const zs_api *api, zs_runtime *rt, zs_ref emitter, double x,
                                      int n) {
    const zs_type *multicast = NULL;
    zs_status status = api->zs_type_basic(rt, ZS_TYPE_MULTICAST, 0, 0, &multicast);
    double block = x;
    for (int i = 0; i < n && status == ZS_OK; i++) {
        BenchEmitter *e = (BenchEmitter *)api->zs_resolve(rt, emitter);
        if (e == NULL) return ZS_E_STALE;
        status = api->zs_delegate_broadcast(rt, emitter, multicast, &e->on_signal,
                                            &signal_signature, &block, NULL);
    }
    return status;
}

/* Call `function` on `object` n times from a C loop, as an engine calls an
 * event; stops at the first failure and returns its status. */
EXPORT zs_status host_bench_call(const zs_api *api, zs_runtime *rt, zs_ref object,
                                 const char *function, void *block, int n) {
    zs_status status = ZS_OK;
    for (int i = 0; i < n && status == ZS_OK; i++)
        status = api->zs_call_function(rt, object, function, block);
    return status;
}

/* The native default runs counted on an object (0 when it is gone). */
EXPORT int64_t host_bench_defaults(const zs_api *api, zs_runtime *rt, zs_ref object) {
    BenchHost *h = (BenchHost *)api->zs_resolve(rt, object);
    return h != NULL ? h->defaults : 0;
}

/* A live BenchActor (or an object of a subclass) a handle names, or NULL. */
static BenchActor *actor_of(const zs_api *api, zs_runtime *rt, zs_ref ref) {
    const zs_class *base = NULL;
    zs_object *object = api->zs_resolve(rt, ref);
    if (object == NULL || api->zs_find_class(rt, "BenchActor", &base) != ZS_OK ||
        !api->zs_class_is_a(object->cls, base))
        return NULL;
    return (BenchActor *)object;
}

/* Create n objects of the class registered as `class_name` (BenchActor or
 * a subclass; a Python subclass is registered on the spot by zs_find_class's
 * resolver), as an engine spawns actors: each is appended to the holder's
 * kids as it is made (reachable before anything else runs), the holder's
 * ref is set to the last one, and the handles go to out (when not NULL).
 * Python sees none of them: no proxy is made. */
EXPORT zs_status host_bench_spawn(const zs_api *api, zs_runtime *rt, zs_ref holder,
                                  const char *class_name, int n, zs_ref *out) {
    const zs_class *cls = NULL, *base = NULL;
    const zs_type *object_type = NULL, *kids_type = NULL;
    zs_status s;
    if ((s = api->zs_find_class(rt, class_name, &cls)) != ZS_OK ||
        (s = api->zs_find_class(rt, "BenchActor", &base)) != ZS_OK ||
        (s = api->zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &object_type)) != ZS_OK ||
        (s = api->zs_type_container(rt, ZS_TYPE_ARRAY, object_type, NULL, &kids_type)) != ZS_OK)
        return s;
    if (!api->zs_class_is_a(cls, base) || actor_of(api, rt, holder) == NULL) return ZS_E_INVALID;
    zs_ref last = ZS_NULL_REF;
    for (int i = 0; i < n; i++) {
        zs_object *made = NULL;
        if ((s = api->zs_object_new(rt, cls, ZS_NULL_REF, ZS_NAME_AUTO, 0, &last, &made)) != ZS_OK)
            return s;
        BenchActor *h = actor_of(api, rt, holder); /* nothing ran since: still there */
        if (h == NULL) return ZS_E_STALE;
        s = api->zs_array_insert(rt, holder, kids_type, &h->kids, h->kids.count, &last, 1);
        if (s != ZS_OK) {
            api->zs_mark_as_garbage(rt, last);
            return s;
        }
        if (out != NULL) out[i] = last;
    }
    return n > 0 ? api->zs_store_ref(rt, holder, offsetof(BenchActor, ref), last) : ZS_OK;
}

/* One host frame calling `function` once on each of n objects, one
 * zs_call_function each, as an engine ticks its actors; stops at the first
 * failure and returns its status. */
EXPORT zs_status host_bench_call_each_of(const zs_api *api, zs_runtime *rt, const zs_ref *objects,
                                         int n, const char *function, void *block) {
    zs_status status = ZS_OK;
    for (int i = 0; i < n && status == ZS_OK; i++)
        status = api->zs_call_function(rt, objects[i], function, block);
    return status;
}

/* The class registered as `name`, or NULL (for host_bench_call_class). */
EXPORT const zs_class *host_bench_find_class(const zs_api *api, zs_runtime *rt, const char *name) {
    const zs_class *cls = NULL;
    return api->zs_find_class(rt, name, &cls) == ZS_OK ? cls : NULL;
}

/* `function` on every live object of cls (subclasses included) through
 * zs_call_each; *out_called (when not NULL) counts the calls. */
EXPORT zs_status host_bench_call_class(const zs_api *api, zs_runtime *rt, const zs_class *cls,
                                       const char *function, void *block, uint32_t *out_called) {
    return api->zs_call_each(rt, cls, function, block, out_called);
}

/* The native default runs of tick counted on n actors (the gone ones count 0). */
EXPORT int64_t host_bench_ticks(const zs_api *api, zs_runtime *rt, const zs_ref *objects, int n) {
    int64_t ticks = 0;
    for (int i = 0; i < n; i++) {
        BenchActor *actor = actor_of(api, rt, objects[i]);
        if (actor != NULL) ticks += actor->ticks;
    }
    return ticks;
}

/* Register `function` of each of n objects with the tick manager (every
 * frame, in the first group); stops at the first failure and returns it. */
EXPORT zs_status host_bench_register_ticks(const zs_api *api, zs_runtime *rt, const zs_ref *objects,
                                           int n, const char *function) {
    zs_status status = ZS_OK;
    for (int i = 0; i < n && status == ZS_OK; i++) {
        zs_tick_desc desc = {.object = objects[i], .function = function};
        zs_tick tick = 0;
        status = api->zs_tick_register(rt, &desc, &tick);
    }
    return status;
}

/* One frame of the tick manager (no collection): the tick functions called,
 * or -1 when the frame failed or one of them did. */
EXPORT int64_t host_bench_tick_frame(const zs_api *api, zs_runtime *rt, double dt) {
    zs_frame_stats stats;
    zs_status status = api->zs_tick_frame(rt, dt, NULL, &stats);
    return status == ZS_OK && stats.failed == 0 ? (int64_t)stats.ticked : -1;
}
