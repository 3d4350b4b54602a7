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
 *
 * host_bench_call(api, rt, object, function, block, n) calls a function n
 * times in a C loop through zs_call_function, as an engine calls an event
 * (the nanobind peer calls its virtual from a C++ loop the same way).
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
} host;

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

static void host_free(void *user) { free(user); }

#define PROP(n, t, o) {n, t, o, ZS_PARAM_IN, NULL}
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
    return api->zs_class_register(rt, &h->class_desc, &cls);
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
