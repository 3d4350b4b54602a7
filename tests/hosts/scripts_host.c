/* Native hosts for tests/interop/test_game_scripts.py, built as a user's host
 * module is (tests/native_build.py), against the API table only:
 *
 * - scripts_host_install_refused: classes the binder must refuse: `Broken`
 *   describes a String property without its native type (the collector
 *   would never free what a script wrote there), `Misplaced` a property
 *   past the end of its object, and `Holder` is sound but names `Broken`
 *   (a reference, and a function returning one).
 * - scripts_host_install_other_actor: a class named `Actor`, as the sample
 *   engine's is, described otherwise (another engine: its `health` is an
 *   Int64 at another offset).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "zsharp_api.h"

typedef struct Broken {
    zs_object header;
    zs_string label; /* described as "String" with no native type */
} Broken;

typedef struct Misplaced {
    zs_object header;
    int32_t hp;
} Misplaced;

typedef struct Holder {
    zs_object header;
    zs_ref broken; /* Broken | None */
} Holder;

typedef struct OtherActor {
    zs_object header;
    int64_t padding;
    int64_t health;
} OtherActor;

typedef struct get_params {
    zs_ref result;
} get_params;

/* Per-runtime state: the descriptions name the runtime's reference type. */
typedef struct refused_host {
    const zs_type *object;
    zs_property_desc holder_properties[1];
    zs_property_desc get_params[1];
    zs_function_desc holder_functions[1];
    zs_class_desc holder_desc;
} refused_host;

static const zs_property_desc broken_properties[] = {
    {"label", "String", offsetof(Broken, label), ZS_PARAM_IN, NULL},
};
static const zs_class_desc broken_desc = {.name = "Broken",
                                          .instance_size = sizeof(Broken),
                                          .properties = broken_properties,
                                          .property_count = 1};

static const zs_property_desc misplaced_properties[] = {
    {"hp", "Int32", sizeof(Misplaced) + 8, ZS_PARAM_IN, NULL},
};
static const zs_class_desc misplaced_desc = {.name = "Misplaced",
                                             .instance_size = sizeof(Misplaced),
                                             .properties = misplaced_properties,
                                             .property_count = 1};

static const zs_property_desc other_actor_properties[] = {
    {"health", "Int64", offsetof(OtherActor, health), ZS_PARAM_IN, NULL},
};
static const zs_class_desc other_actor_desc = {.name = "Actor",
                                               .instance_size = sizeof(OtherActor),
                                               .properties = other_actor_properties,
                                               .property_count = 1};

/* Holder.get: the Broken the holder holds (never reached: the class is refused). */
static zs_status holder_get(void *user, zs_runtime *rt, zs_ref self, void *params) {
    (void)user;
    (void)rt;
    (void)self;
    ((get_params *)params)->result = ZS_NULL_REF;
    return ZS_OK;
}

/* The cleanup the runtime runs when freed. */
static void refused_free(void *user) { free(user); }

/* Register Broken, Misplaced and Holder in rt. */
__attribute__((visibility("default"))) zs_status scripts_host_install_refused(const zs_api *api,
                                                                              zs_runtime *rt) {
    if (api->version != ZS_API_VERSION || api->size != sizeof(zs_api)) return ZS_E_INVALID;
    refused_host *h = calloc(1, sizeof *h);
    if (h == NULL) return ZS_E_NOMEM;
    zs_status s = api->zs_runtime_add_cleanup(rt, refused_free, h);
    if (s != ZS_OK) {
        free(h);
        return s;
    }
    if ((s = api->zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &h->object)) != ZS_OK) return s;
    h->holder_properties[0] = (zs_property_desc){"broken", "Broken | None",
                                                 offsetof(Holder, broken), ZS_PARAM_IN, h->object};
    h->get_params[0] = (zs_property_desc){"result", "Broken | None", 0, ZS_PARAM_RETURN, NULL};
    h->holder_functions[0] = (zs_function_desc){"get",     holder_get, NULL, 0, sizeof(get_params),
                                                h->get_params, 1};
    h->holder_desc = (zs_class_desc){.name = "Holder",
                                     .instance_size = sizeof(Holder),
                                     .properties = h->holder_properties,
                                     .property_count = 1,
                                     .functions = h->holder_functions,
                                     .function_count = 1};
    const zs_class *out = NULL;
    if ((s = api->zs_class_register(rt, &broken_desc, &out)) != ZS_OK ||
        (s = api->zs_class_register(rt, &misplaced_desc, &out)) != ZS_OK)
        return s;
    return api->zs_class_register(rt, &h->holder_desc, &out);
}

/* Register another engine's Actor in rt. */
__attribute__((visibility("default"))) zs_status scripts_host_install_other_actor(
    const zs_api *api, zs_runtime *rt) {
    if (api->version != ZS_API_VERSION || api->size != sizeof(zs_api)) return ZS_E_INVALID;
    const zs_class *out = NULL;
    return api->zs_class_register(rt, &other_actor_desc, &out);
}
