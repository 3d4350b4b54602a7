/*
 * classes.c -- class registration and the flattened reference schema.
 *
 * A class's schema is built once, at registration: the parent's words, then
 * the class's own members (nested structs inlined). Strong words come first
 * so the marker stops after strong_count words and never looks at weak
 * members or values without references.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* The value type a member describes (resolving the legacy kinds), or NULL
   when the kind is unknown or the type is not one of this runtime's. */
static const zs_type *member_type(zs_runtime *rt, const zs_member *m) {
    const zs_type *type = NULL;
    switch (m->kind) {
    case ZS_MEMBER_OBJECT:
        return zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &type) == ZS_OK ? type : NULL;
    case ZS_MEMBER_WEAK_OBJECT:
        return zs_type_basic(rt, ZS_TYPE_WEAK_OBJECT, 8, 8, &type) == ZS_OK ? type : NULL;
    case ZS_MEMBER_OBJECT_ARRAY:
        return rt->object_array_type;
    case ZS_MEMBER_VALUE:
        type = m->type;
        return type != NULL && zs_type_id(type) < rt->type_count &&
                       rt->types[zs_type_id(type)] == type
                   ? type
                   : NULL;
    default:
        return NULL;
    }
}

/* Check a member: known type, aligned, inside the instance, past the header
   and the parent's members, not overlapping another member. */
static bool member_ok(zs_runtime *rt, const zs_class_desc *desc, const zs_member *members,
                      uint32_t start, uint32_t i) {
    const zs_member *m = &members[i];
    const zs_type *type = member_type(rt, m);
    if (type == NULL || m->offset % zs_type_align(type) != 0 || m->offset < start) return false;
    if ((uint64_t)m->offset + zs_type_size(type) > desc->instance_size) return false;
    if (m->offset > ZS_OP_MAX_OFFSET) return false;
    for (uint32_t j = 0; j < i; j++) {
        const zs_member *o = &members[j];
        uint64_t o_end = (uint64_t)o->offset + zs_type_size(member_type(rt, o));
        uint64_t m_end = (uint64_t)m->offset + zs_type_size(type);
        if (m->offset < o_end && o->offset < m_end) return false;
    }
    return true;
}

/* Whether a function description is well formed: a name, an entry (or an
   event without a native default), parameters inside the block, named
   (each name once), with a known direction, at most one result. Their
   types are the scripting layer's to check. */
static bool function_ok(const zs_function_desc *f) {
    if (f->name == NULL || (f->entry == NULL && !(f->flags & ZS_FUNCTION_EVENT))) return false;
    if (f->param_count > 0 && f->params == NULL) return false;
    uint32_t results = 0;
    for (uint32_t i = 0; i < f->param_count; i++) {
        const zs_property_desc *p = &f->params[i];
        if (p->name == NULL || p->type == NULL || p->offset >= f->block_size ||
            p->direction > ZS_PARAM_RETURN || ZS_NAME_LISTED_BEFORE(f->params, i))
            return false;
        results += p->direction == ZS_PARAM_RETURN;
    }
    return results <= 1;
}

/* Whether the reflection part of a class description is well formed: its
   properties and functions named, each name once among both (a script
   reaches both as attributes). */
static bool reflection_ok(const zs_class_desc *desc) {
    if ((desc->property_count > 0 && desc->properties == NULL) ||
        (desc->function_count > 0 && desc->functions == NULL))
        return false;
    for (uint32_t i = 0; i < desc->property_count; i++) {
        const zs_property_desc *p = &desc->properties[i];
        if (p->name == NULL || p->type == NULL || ZS_NAME_LISTED_BEFORE(desc->properties, i))
            return false;
    }
    for (uint32_t i = 0; i < desc->function_count; i++) {
        if (!function_ok(&desc->functions[i]) || ZS_NAME_LISTED_BEFORE(desc->functions, i) ||
            zs_name_listed(desc->properties, sizeof *desc->properties, desc->property_count,
                           desc->functions[i].name))
            return false;
    }
    return true;
}

/* The class's members: the listed ones, then those its properties stand
   for (malloc'd; *out_count of them), or NULL when out of memory. */
static zs_member *gather_members(const zs_class_desc *desc, uint32_t *out_count) {
    uint32_t count = desc->member_count;
    for (uint32_t i = 0; i < desc->property_count; i++) {
        zs_member ignored;
        count += zs_property_member(&desc->properties[i], &ignored);
    }
    zs_member *members = malloc((count ? count : 1) * sizeof *members);
    if (members == NULL) return NULL;
    if (desc->member_count > 0)
        memcpy(members, desc->members, desc->member_count * sizeof *members);
    uint32_t filled = desc->member_count;
    for (uint32_t i = 0; i < desc->property_count; i++)
        filled += zs_property_member(&desc->properties[i], &members[filled]);
    assert(filled == count);
    *out_count = count;
    return members;
}

/* The built-in array-of-references type behind ZS_MEMBER_OBJECT_ARRAY. */
static bool ensure_object_array_type(zs_runtime *rt) {
    if (rt->object_array_type != NULL) return true;
    const zs_type *object = NULL;
    return zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &object) == ZS_OK &&
           zs_type_container(rt, ZS_TYPE_ARRAY, object, NULL, &rt->object_array_type) == ZS_OK;
}

zs_status zs_class_register(zs_runtime *rt, const zs_class_desc *desc, const zs_class **out) {
    if (desc == NULL || out == NULL || desc->name == NULL) return ZS_E_INVALID;
    if (desc->member_count > 0 && desc->members == NULL) return ZS_E_INVALID;
    if (!reflection_ok(desc)) return ZS_E_INVALID;
    uint32_t member_count = 0;
    zs_member *members = gather_members(desc, &member_count);
    if (members == NULL) return ZS_E_NOMEM;
    ZS_LOCK(rt);
    zs_status status = ZS_E_INVALID;
    const zs_class *parent = desc->parent;
    uint32_t start = parent ? parent->instance_size : (uint32_t)sizeof(zs_object);
    if (parent != NULL &&
        (parent->head.id >= rt->class_count || rt->classes[parent->head.id] != parent))
        goto done; /* a class of another runtime */
    if (desc->instance_size < start || desc->instance_size > ZS_OP_MAX_OFFSET) goto done;
    if (!ensure_object_array_type(rt)) {
        status = ZS_E_NOMEM;
        goto done;
    }
    for (uint32_t i = 0; i < member_count; i++)
        if (!member_ok(rt, desc, members, start, i)) goto done;
    if (rt->in_destroy_hook) {
        status = ZS_E_BUSY;
        goto done;
    }

    status = ZS_E_NOMEM;
    if (rt->class_count == rt->class_capacity) {
        uint32_t capacity = rt->class_capacity ? rt->class_capacity * 2 : 16;
        zs_class **grown = zs_realloc(rt, rt->classes, rt->class_capacity * sizeof *grown,
                                      capacity * sizeof *grown);
        if (grown == NULL) goto done;
        rt->classes = grown;
        rt->class_capacity = capacity;
    }
    uint32_t depth = parent ? parent->head.depth + 1 : 0;
    const zs_class **ancestry = zs_alloc(rt, (depth + 1) * sizeof *ancestry);
    if (ancestry == NULL) goto done;
    zs_class *cls = zs_alloc(rt, sizeof *cls);
    if (cls == NULL) {
        zs_free(rt, ancestry, (depth + 1) * sizeof *ancestry);
        goto done;
    }
    memset(cls, 0, sizeof *cls);
    size_t name_length = strlen(desc->name);
    cls->name = zs_alloc(rt, name_length + 1);
    uint32_t ignored_number;
    bool ok = cls->name != NULL &&
              zs_name_intern_locked(rt, desc->name, name_length, false, &cls->name_index,
                                    &ignored_number) == ZS_OK &&
              (parent == NULL || zs_schema_copy(rt, &cls->schema, &parent->schema));
    cls->auto_name_seed = zs_name_seed(UINT32_MAX, cls->name_index);
    for (uint32_t i = 0; ok && i < member_count; i++)
        ok = zs_schema_add(rt, &cls->schema, member_type(rt, &members[i]), members[i].offset);
    if (!ok) {
        zs_schema_release(rt, &cls->schema);
        zs_free(rt, cls->name, cls->name ? name_length + 1 : 0);
        zs_free(rt, cls, sizeof *cls);
        zs_free(rt, ancestry, (depth + 1) * sizeof *ancestry);
        goto done;
    }
    memcpy(cls->name, desc->name, name_length);
    zs_schema_finish(&cls->schema);
    cls->parent = parent;
    cls->head.ancestry = ancestry;
    cls->head.depth = depth;
    memcpy(ancestry, parent ? parent->head.ancestry : ancestry, depth * sizeof *ancestry);
    ancestry[depth] = cls;
    cls->head.id = rt->class_count;
    cls->instance_size = desc->instance_size;
    cls->flags = desc->flags;
    cls->desc = *desc;
    cls->desc.name = cls->name;
    cls->desc.members = NULL;
    cls->desc.member_count = 0;
    rt->classes[rt->class_count++] = cls;
    *out = cls;
    status = ZS_OK;
done:
    ZS_UNLOCK(rt);
    free(members);
    return status;
}

uint32_t zs_class_member_op(const zs_class *cls, uint32_t offset) {
    for (uint32_t i = 0; i < cls->schema.count; i++)
        if ((cls->schema.words[i] >> ZS_OP_SHIFT) == offset)
            return cls->schema.words[i] & ZS_OP_MASK;
    return 0;
}

/* The value type of a VALUE member at an offset, or NULL. */
const zs_type *zs_class_member_type(const zs_class *cls, uint32_t offset) {
    for (uint32_t i = 0; i < cls->schema.count; i++)
        if ((cls->schema.words[i] >> ZS_OP_SHIFT) == offset) return cls->schema.types[i];
    return NULL;
}

uint32_t zs_class_id(const zs_class *cls) { return cls->head.id; }
const char *zs_class_name(const zs_class *cls) { return cls->name; }
const zs_class *zs_class_parent(const zs_class *cls) { return cls->parent; }
uint32_t zs_class_instance_size(const zs_class *cls) { return cls->instance_size; }
uint32_t zs_class_schema_words(const zs_class *cls) { return cls->schema.count; }

int zs_class_is_a(const zs_class *cls, const zs_class *base) {
    return cls != NULL && base != NULL && ZS_CLASS_DERIVES(cls, base);
}

/* The first class registered under `name`, or NULL; with the lock held. */
static const zs_class *class_named(const zs_runtime *rt, const char *name) {
    for (uint32_t i = 0; i < rt->class_count; i++)
        if (strcmp(rt->classes[i]->name, name) == 0) return rt->classes[i];
    return NULL;
}

zs_status zs_find_class(zs_runtime *rt, const char *name, const zs_class **out) {
    if (name == NULL || out == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    *out = class_named(rt, name);
    zs_class_resolver resolver = *out == NULL && !rt->in_destroy_hook ? rt->class_resolver : NULL;
    void *user = rt->class_resolver_user;
    ZS_UNLOCK(rt);
    if (resolver == NULL) return *out != NULL ? ZS_OK : ZS_E_INVALID;
    /* Not registered yet: the resolver may register it (running script
       code, which may use the whole API), so the lock is not held. */
    if (resolver(user, rt, name) != ZS_OK) return ZS_E_INVALID;
    ZS_LOCK(rt);
    *out = class_named(rt, name);
    ZS_UNLOCK(rt);
    return *out != NULL ? ZS_OK : ZS_E_INVALID;
}

void zs_set_class_resolver(zs_runtime *rt, zs_class_resolver resolver, void *user) {
    ZS_LOCK(rt);
    rt->class_resolver = resolver;
    rt->class_resolver_user = user;
    ZS_UNLOCK(rt);
}

uint32_t zs_class_count(zs_runtime *rt) {
    ZS_LOCK(rt);
    uint32_t count = rt->class_count;
    ZS_UNLOCK(rt);
    return count;
}

const zs_class *zs_class_by_id(zs_runtime *rt, uint32_t id) {
    ZS_LOCK(rt);
    const zs_class *cls = id < rt->class_count ? rt->classes[id] : NULL;
    ZS_UNLOCK(rt);
    return cls;
}

const zs_class_desc *zs_class_describe(const zs_class *cls) {
    return cls != NULL ? &cls->desc : NULL;
}

zs_status zs_find_function(const zs_class *cls, const char *name, const zs_function_desc **out) {
    if (out != NULL) *out = NULL;
    if (name == NULL || out == NULL) return ZS_E_INVALID;
    for (; cls != NULL; cls = cls->parent) {
        const zs_class_desc *desc = &cls->desc;
        for (uint32_t i = 0; i < desc->function_count; i++) {
            if (strcmp(desc->functions[i].name, name) == 0) {
                *out = &desc->functions[i];
                return ZS_OK;
            }
        }
    }
    return ZS_E_INVALID;
}

void zs_classes_release(zs_runtime *rt) {
    for (uint32_t i = 0; i < rt->class_count; i++) {
        zs_class *cls = rt->classes[i];
        assert(cls->default_count == 0 && cls->default_image == NULL); /* released first */
        zs_schema_release(rt, &cls->schema);
        zs_free(rt, cls->name, strlen(cls->name) + 1);
        zs_free(rt, (void *)cls->head.ancestry, (cls->head.depth + 1) * sizeof *cls->head.ancestry);
        zs_free(rt, cls, sizeof *cls);
    }
    zs_free(rt, rt->classes, rt->class_capacity * sizeof *rt->classes);
    rt->classes = NULL;
    rt->class_count = rt->class_capacity = 0;
}
