/*
 * reflection.c -- what a host tells scripts about its structs and enums,
 * and the checks class descriptions share with them (the members a class's
 * reflected properties stand for, names listed once).
 *
 * Descriptions are kept by reference (zsharp.h, "reflection"): registering
 * one checks it and records a pointer, nothing is copied. Class
 * descriptions are recorded by classes.c, which also looks functions up.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Grow a registry array of `each`-byte entries to hold one more. */
static bool registry_reserve(zs_runtime *rt, void **entries, uint32_t count, uint32_t *capacity,
                             size_t each) {
    if (count < *capacity) return true;
    uint32_t grown_capacity = *capacity ? *capacity * 2 : 8;
    void *grown = zs_realloc(rt, *entries, *capacity * each, grown_capacity * each);
    if (grown == NULL) return false;
    *entries = grown;
    *capacity = grown_capacity;
    return true;
}

bool zs_property_member(const zs_property_desc *property, zs_member *out) {
    const zs_type *type = property->native;
    if (type == NULL || zs_type_kind_of(type) == ZS_TYPE_PLAIN) return false;
    out->offset = property->offset;
    out->type = NULL;
    switch (zs_type_kind_of(type)) {
    case ZS_TYPE_OBJECT:
        out->kind = ZS_MEMBER_OBJECT;
        break;
    case ZS_TYPE_WEAK_OBJECT:
        out->kind = ZS_MEMBER_WEAK_OBJECT;
        break;
    default:
        out->kind = ZS_MEMBER_VALUE;
        out->type = type;
        break;
    }
    return true;
}

/* The descriptions named in a list all begin with their name. */
static_assert(offsetof(zs_property_desc, name) == 0, "a property's name comes first");
static_assert(offsetof(zs_function_desc, name) == 0, "a function's name comes first");
static_assert(offsetof(zs_enum_item, name) == 0, "an item's name comes first");

bool zs_name_listed(const void *rows, size_t stride, uint32_t count, const char *name) {
    for (uint32_t j = 0; j < count; j++) {
        const char *listed = *(const char *const *)((const char *)rows + j * stride);
        if (strcmp(listed, name) == 0) return true;
    }
    return false;
}

/* ---- structs ------------------------------------------------------------- */

zs_status zs_struct_register(zs_runtime *rt, const zs_struct_desc *desc, const zs_type **out) {
    if (desc == NULL || out == NULL || desc->name == NULL || desc->size == 0 || desc->align == 0 ||
        (desc->align & (desc->align - 1)) != 0 || (desc->member_count > 0 && desc->members == NULL))
        return ZS_E_INVALID;
    uint32_t typed = 0;
    for (uint32_t i = 0; i < desc->member_count; i++) {
        const zs_property_desc *m = &desc->members[i];
        if (m->name == NULL || m->type == NULL || m->offset >= desc->size ||
            ZS_NAME_LISTED_BEFORE(desc->members, i))
            return ZS_E_INVALID;
        typed += m->native != NULL;
    }
    zs_type_member *members = malloc((typed ? typed : 1) * sizeof *members);
    if (members == NULL) return ZS_E_NOMEM;
    uint32_t filled = 0;
    for (uint32_t i = 0; i < desc->member_count; i++)
        if (desc->members[i].native != NULL)
            members[filled++] = (zs_type_member){desc->members[i].native, desc->members[i].offset};
    const zs_type *type = NULL;
    /* zs_type_struct checks each member's type, alignment and extent. */
    zs_status status = zs_type_struct(rt, desc->name, desc->size, desc->align, members, filled,
                                      &type);
    free(members);
    if (status != ZS_OK) return status;
    ZS_LOCK(rt);
    if (registry_reserve(rt, (void **)&rt->structs, rt->struct_count, &rt->struct_capacity,
                         sizeof *rt->structs)) {
        rt->structs[rt->struct_count++] = (zs_registered_struct){desc, type};
        *out = type;
    } else {
        status = ZS_E_NOMEM;
    }
    ZS_UNLOCK(rt);
    return status;
}

uint32_t zs_struct_count(zs_runtime *rt) {
    ZS_LOCK(rt);
    uint32_t count = rt->struct_count;
    ZS_UNLOCK(rt);
    return count;
}

const zs_struct_desc *zs_struct_at(zs_runtime *rt, uint32_t i, const zs_type **out_type) {
    ZS_LOCK(rt);
    const zs_struct_desc *desc = i < rt->struct_count ? rt->structs[i].desc : NULL;
    if (out_type != NULL) *out_type = desc != NULL ? rt->structs[i].type : NULL;
    ZS_UNLOCK(rt);
    return desc;
}

zs_status zs_find_struct(zs_runtime *rt, const char *name, const zs_struct_desc **out_desc,
                         const zs_type **out_type) {
    if (name == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = ZS_E_INVALID;
    for (uint32_t i = 0; i < rt->struct_count && status != ZS_OK; i++) {
        if (strcmp(rt->structs[i].desc->name, name) != 0) continue;
        if (out_desc != NULL) *out_desc = rt->structs[i].desc;
        if (out_type != NULL) *out_type = rt->structs[i].type;
        status = ZS_OK;
    }
    ZS_UNLOCK(rt);
    return status;
}

/* ---- enums --------------------------------------------------------------- */

/* The integer scalar types an enum may be stored as, and the values each
   holds (an item's value is an int64_t, so UInt64's top half is out). */
typedef struct enum_storage {
    const char *name;
    int64_t min, max;
} enum_storage;

/* The storage named `name`, or NULL. */
static const enum_storage *enum_storage_named(const char *name) {
    static const enum_storage storages[] = {
        {"Int8", INT8_MIN, INT8_MAX},    {"Int16", INT16_MIN, INT16_MAX},
        {"Int32", INT32_MIN, INT32_MAX}, {"Int64", INT64_MIN, INT64_MAX},
        {"UInt8", 0, UINT8_MAX},         {"UInt16", 0, UINT16_MAX},
        {"UInt32", 0, UINT32_MAX},       {"UInt64", 0, INT64_MAX},
    };
    for (size_t i = 0; i < sizeof storages / sizeof storages[0]; i++)
        if (strcmp(storages[i].name, name) == 0) return &storages[i];
    return NULL;
}

zs_status zs_enum_register(zs_runtime *rt, const zs_enum_desc *desc) {
    const enum_storage *storage = desc != NULL && desc->underlying != NULL
                                      ? enum_storage_named(desc->underlying)
                                      : NULL;
    if (storage == NULL || desc->name == NULL || (desc->item_count > 0 && desc->items == NULL))
        return ZS_E_INVALID;
    for (uint32_t i = 0; i < desc->item_count; i++) {
        const zs_enum_item *item = &desc->items[i];
        if (item->name == NULL || item->value < storage->min || item->value > storage->max ||
            ZS_NAME_LISTED_BEFORE(desc->items, i))
            return ZS_E_INVALID;
    }
    ZS_LOCK(rt);
    zs_status status = ZS_E_NOMEM;
    if (registry_reserve(rt, (void **)&rt->enums, rt->enum_count, &rt->enum_capacity,
                         sizeof *rt->enums)) {
        rt->enums[rt->enum_count++] = desc;
        status = ZS_OK;
    }
    ZS_UNLOCK(rt);
    return status;
}

uint32_t zs_enum_count(zs_runtime *rt) {
    ZS_LOCK(rt);
    uint32_t count = rt->enum_count;
    ZS_UNLOCK(rt);
    return count;
}

const zs_enum_desc *zs_enum_at(zs_runtime *rt, uint32_t i) {
    ZS_LOCK(rt);
    const zs_enum_desc *desc = i < rt->enum_count ? rt->enums[i] : NULL;
    ZS_UNLOCK(rt);
    return desc;
}

zs_status zs_find_enum(zs_runtime *rt, const char *name, const zs_enum_desc **out) {
    if (name == NULL || out == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    *out = NULL;
    for (uint32_t i = 0; i < rt->enum_count && *out == NULL; i++)
        if (strcmp(rt->enums[i]->name, name) == 0) *out = rt->enums[i];
    ZS_UNLOCK(rt);
    return *out != NULL ? ZS_OK : ZS_E_INVALID;
}

/* Forget the descriptions (kept by reference: the host frees its own). */
void zs_reflection_release(zs_runtime *rt) {
    zs_free(rt, rt->structs, rt->struct_capacity * sizeof *rt->structs);
    zs_free(rt, (void *)rt->enums, rt->enum_capacity * sizeof *rt->enums);
    rt->structs = NULL;
    rt->enums = NULL;
    rt->struct_count = rt->struct_capacity = 0;
    rt->enum_count = rt->enum_capacity = 0;
}
