/* A small native host for tests/interop/test_reflection.py: a struct, an enum and
 * two classes described with every kind of property, functions of each
 * direction, and events with and without a native default. Built by the
 * tests as a user's host module is (tests/native_build.py), against the
 * API table only. */
#include <stddef.h>
#include <stdlib.h>

#include "zsharp_api.h"

typedef struct Vec2 {
    double x, y;
} Vec2;

typedef struct Thing {
    zs_object header;
    int32_t hp;
    float speed;
    uint8_t mood;
    Vec2 pos;
    zs_ref friend_;
    zs_ref weak;
    zs_string label;
    zs_array kids;
    zs_hash scores;
    zs_array on_hit;
    int32_t hits; /* counts native default runs of hit */
} Thing;

typedef struct BigThing {
    Thing base;
    int64_t extra;
} BigThing;

typedef struct add_params {
    int32_t a, b, result;
} add_params;
typedef struct hit_params {
    int32_t damage;
} hit_params;
typedef struct version_params {
    int32_t result;
} version_params;
typedef struct split_params {
    Vec2 in;
    double scale;    /* inout: doubled */
    double x;        /* out */
    Vec2 result;     /* the vector scaled */
} split_params;
typedef struct befriend_params {
    zs_ref other;
    zs_ref result;
} befriend_params;

/* Per-runtime state: descriptions point into it (they need the runtime's types). */
typedef struct host {
    const zs_api *api;
    const zs_type *vec2, *object, *weak, *string, *kids, *scores, *multicast;
    zs_property_desc vec2_members[2];
    zs_property_desc thing_properties[10];
    zs_property_desc big_properties[1];
    zs_property_desc add_params[3], hit_params[1], version_params[1], split_params[4],
        befriend_params[2];
    zs_function_desc thing_functions[6];
    zs_struct_desc vec2_desc;
    zs_class_desc thing_desc, big_desc;
} host;

static const zs_enum_item mood_items[] = {{"Calm", 0}, {"Angry", 1}, {"Sad", 7}};
static const zs_enum_desc mood_desc = {"Mood", "UInt8", mood_items, 3};

static Thing *self_of(host *h, zs_runtime *rt, zs_ref self) {
    return (Thing *)h->api->zs_resolve(rt, self);
}

static zs_status add(void *user, zs_runtime *rt, zs_ref self, void *params) {
    (void)user, (void)rt, (void)self;
    add_params *p = params;
    p->result = p->a + p->b;
    return p->result == 666 ? ZS_E_INVALID : ZS_OK;
}

static zs_status hit(void *user, zs_runtime *rt, zs_ref self, void *params) {
    Thing *t = self_of(user, rt, self);
    if (t == NULL) return ZS_E_STALE;
    t->hp -= ((hit_params *)params)->damage;
    t->hits++;
    return ZS_OK;
}

static zs_status version(void *user, zs_runtime *rt, zs_ref self, void *params) {
    (void)user, (void)rt, (void)self;
    ((version_params *)params)->result = 3;
    return ZS_OK;
}

static zs_status split(void *user, zs_runtime *rt, zs_ref self, void *params) {
    (void)user, (void)rt, (void)self;
    split_params *p = params;
    p->x = p->in.x;
    p->result = (Vec2){p->in.x * p->scale, p->in.y * p->scale};
    p->scale *= 2;
    return ZS_OK;
}

static zs_status befriend(void *user, zs_runtime *rt, zs_ref self, void *params) {
    host *h = user;
    befriend_params *p = params;
    zs_status status = h->api->zs_store_ref(rt, self, offsetof(Thing, friend_), p->other);
    p->result = self;
    return status;
}

static void host_free(void *user) { free(user); }

#define PROP(n, t, o, native) {n, t, o, ZS_PARAM_IN, native}
#define PARAM(n, t, o, d) {n, t, o, d, NULL}

/* Register the host's struct, enum and classes in rt. */
__attribute__((visibility("default"))) zs_status reflect_host_install(const zs_api *api,
                                                                      zs_runtime *rt) {
    if (api->version != ZS_API_VERSION || api->size != sizeof(zs_api)) return ZS_E_INVALID;
    host *h = calloc(1, sizeof *h);
    if (h == NULL) return ZS_E_NOMEM;
    h->api = api;
    zs_status s = api->zs_runtime_add_cleanup(rt, host_free, h);
    if (s != ZS_OK) {
        free(h);
        return s;
    }
    h->vec2_members[0] = (zs_property_desc)PROP("x", "Float64", offsetof(Vec2, x), NULL);
    h->vec2_members[1] = (zs_property_desc)PROP("y", "Float64", offsetof(Vec2, y), NULL);
    h->vec2_desc = (zs_struct_desc){"Vec2", sizeof(Vec2), _Alignof(Vec2), h->vec2_members, 2};
    const zs_type *name_type = NULL, *int32_type = NULL;
    if ((s = api->zs_struct_register(rt, &h->vec2_desc, &h->vec2)) != ZS_OK ||
        (s = api->zs_enum_register(rt, &mood_desc)) != ZS_OK ||
        (s = api->zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &h->object)) != ZS_OK ||
        (s = api->zs_type_basic(rt, ZS_TYPE_WEAK_OBJECT, 8, 8, &h->weak)) != ZS_OK ||
        (s = api->zs_type_basic(rt, ZS_TYPE_STRING, 2, 0, &h->string)) != ZS_OK ||
        (s = api->zs_type_basic(rt, ZS_TYPE_PLAIN, 8, 8, &name_type)) != ZS_OK ||
        (s = api->zs_type_basic(rt, ZS_TYPE_PLAIN, 4, 4, &int32_type)) != ZS_OK ||
        (s = api->zs_type_basic(rt, ZS_TYPE_MULTICAST, 16, 8, &h->multicast)) != ZS_OK ||
        (s = api->zs_type_container(rt, ZS_TYPE_ARRAY, h->object, NULL, &h->kids)) != ZS_OK ||
        (s = api->zs_type_container(rt, ZS_TYPE_MAP, name_type, int32_type, &h->scores)) != ZS_OK)
        return s;
    zs_property_desc *p = h->thing_properties;
    p[0] = (zs_property_desc)PROP("hp", "Int32", offsetof(Thing, hp), NULL);
    p[1] = (zs_property_desc)PROP("speed", "Float32", offsetof(Thing, speed), NULL);
    p[2] = (zs_property_desc)PROP("mood", "Mood", offsetof(Thing, mood), NULL);
    p[3] = (zs_property_desc)PROP("pos", "Vec2", offsetof(Thing, pos), h->vec2);
    p[4] = (zs_property_desc)PROP("friend", "Thing | None", offsetof(Thing, friend_), h->object);
    p[5] = (zs_property_desc)PROP("weak", "WeakObjectPtr[Thing]", offsetof(Thing, weak), h->weak);
    p[6] = (zs_property_desc)PROP("label", "String", offsetof(Thing, label), h->string);
    p[7] = (zs_property_desc)PROP("kids", "Array[Thing]", offsetof(Thing, kids), h->kids);
    p[8] = (zs_property_desc)PROP("scores", "Map[Name, Int32]", offsetof(Thing, scores),
                                  h->scores);
    p[9] = (zs_property_desc)PROP("on_hit", "MulticastDelegate", offsetof(Thing, on_hit),
                                  h->multicast);
    h->add_params[0] = (zs_property_desc)PARAM("a", "Int32", offsetof(add_params, a), ZS_PARAM_IN);
    h->add_params[1] = (zs_property_desc)PARAM("b", "Int32", offsetof(add_params, b), ZS_PARAM_IN);
    h->add_params[2] = (zs_property_desc)PARAM("result", "Int32", offsetof(add_params, result),
                                               ZS_PARAM_RETURN);
    h->hit_params[0] = (zs_property_desc)PARAM("damage", "Int32", 0, ZS_PARAM_IN);
    h->version_params[0] = (zs_property_desc)PARAM("result", "Int32", 0, ZS_PARAM_RETURN);
    h->split_params[0] = (zs_property_desc)PARAM("v", "Vec2", offsetof(split_params, in),
                                                 ZS_PARAM_IN);
    h->split_params[1] = (zs_property_desc)PARAM("scale", "Float64",
                                                 offsetof(split_params, scale), ZS_PARAM_INOUT);
    h->split_params[2] = (zs_property_desc)PARAM("x", "Float64", offsetof(split_params, x),
                                                 ZS_PARAM_OUT);
    h->split_params[3] = (zs_property_desc)PARAM("result", "Vec2", offsetof(split_params, result),
                                                 ZS_PARAM_RETURN);
    h->befriend_params[0] = (zs_property_desc)PARAM("other", "Thing | None",
                                                    offsetof(befriend_params, other), ZS_PARAM_IN);
    h->befriend_params[1] = (zs_property_desc)PARAM("result", "Thing | None",
                                                    offsetof(befriend_params, result),
                                                    ZS_PARAM_RETURN);
    zs_function_desc *f = h->thing_functions;
    f[0] = (zs_function_desc){"add", add, h, 0, sizeof(add_params), h->add_params, 3};
    f[1] = (zs_function_desc){"hit", hit, h, ZS_FUNCTION_EVENT, sizeof(hit_params), h->hit_params,
                              1};
    f[2] = (zs_function_desc){"on_spawn", NULL, h, ZS_FUNCTION_EVENT, 0, NULL, 0};
    f[3] = (zs_function_desc){"version", version, h, ZS_FUNCTION_STATIC, sizeof(version_params),
                              h->version_params, 1};
    f[4] = (zs_function_desc){"split", split, h, 0, sizeof(split_params), h->split_params, 4};
    f[5] = (zs_function_desc){"befriend", befriend, h, 0, sizeof(befriend_params),
                              h->befriend_params, 2};
    h->thing_desc = (zs_class_desc){.name = "Thing",
                                    .instance_size = sizeof(Thing),
                                    .properties = h->thing_properties,
                                    .property_count = 10,
                                    .functions = h->thing_functions,
                                    .function_count = 6};
    const zs_class *thing = NULL, *big = NULL;
    if ((s = api->zs_class_register(rt, &h->thing_desc, &thing)) != ZS_OK) return s;
    h->big_properties[0] = (zs_property_desc)PROP("extra", "Int64", offsetof(BigThing, extra),
                                                  NULL);
    h->big_desc = (zs_class_desc){.name = "BigThing",
                                  .parent = thing,
                                  .instance_size = sizeof(BigThing),
                                  .properties = h->big_properties,
                                  .property_count = 1};
    return api->zs_class_register(rt, &h->big_desc, &big);
}
