/*
 * classes.c -- class registration and the flattened reference schema.
 *
 * A class's schema is built once, at registration: the parent's words, then
 * the class's own members sorted by offset. Strong words come first so the
 * marker stops after strong_count words and never looks at weak members.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* The opcode a member kind flattens to, or 0 when the kind is unknown. */
static uint32_t op_of_kind(uint32_t kind) {
    switch (kind) {
    case ZS_MEMBER_OBJECT: return ZS_OP_OBJECT;
    case ZS_MEMBER_OBJECT_ARRAY: return ZS_OP_OBJECT_ARRAY;
    case ZS_MEMBER_WEAK_OBJECT: return ZS_OP_WEAK;
    default: return 0;
    }
}

static size_t member_size(uint32_t op) {
    return op == ZS_OP_OBJECT_ARRAY ? sizeof(zs_ref_array) : sizeof(zs_ref);
}

static int compare_words(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    bool weak_x = (x & ZS_OP_MASK) == ZS_OP_WEAK, weak_y = (y & ZS_OP_MASK) == ZS_OP_WEAK;
    if (weak_x != weak_y) return weak_x ? 1 : -1; /* strong words first */
    return (x >> ZS_OP_SHIFT) < (y >> ZS_OP_SHIFT) ? -1 : (x >> ZS_OP_SHIFT) > (y >> ZS_OP_SHIFT);
}

/* Check a member: known kind, aligned, inside the instance, past the header
   and the parent's members, not overlapping another member. */
static bool member_ok(const zs_class_desc *desc, uint32_t start, uint32_t i) {
    const zs_member *m = &desc->members[i];
    uint32_t op = op_of_kind(m->kind);
    if (op == 0 || m->offset % 8 != 0 || m->offset < start) return false;
    if ((uint64_t)m->offset + member_size(op) > desc->instance_size) return false;
    if (m->offset > ZS_OP_MAX_OFFSET) return false;
    for (uint32_t j = 0; j < i; j++) {
        const zs_member *o = &desc->members[j];
        uint64_t o_end = (uint64_t)o->offset + member_size(op_of_kind(o->kind));
        uint64_t m_end = (uint64_t)m->offset + member_size(op);
        if (m->offset < o_end && o->offset < m_end) return false;
    }
    return true;
}

zs_status zs_class_register(zs_runtime *rt, const zs_class_desc *desc, const zs_class **out) {
    if (desc == NULL || out == NULL || desc->name == NULL) return ZS_E_INVALID;
    if (desc->member_count > 0 && desc->members == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = ZS_E_INVALID;
    const zs_class *parent = desc->parent;
    uint32_t start = parent ? parent->instance_size : (uint32_t)sizeof(zs_object);
    if (parent != NULL && (parent->id >= rt->class_count || rt->classes[parent->id] != parent))
        goto done; /* a class of another runtime */
    if (desc->instance_size < start || desc->instance_size > ZS_OP_MAX_OFFSET) goto done;
    for (uint32_t i = 0; i < desc->member_count; i++)
        if (!member_ok(desc, start, i)) goto done;
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
    zs_class *cls = zs_alloc(rt, sizeof *cls);
    if (cls == NULL) goto done;
    size_t name_length = strlen(desc->name);
    uint32_t inherited = parent ? parent->schema_count : 0;
    cls->schema_count = inherited + desc->member_count;
    cls->name = zs_alloc(rt, name_length + 1);
    cls->schema = cls->schema_count ? zs_alloc(rt, cls->schema_count * sizeof(uint32_t)) : NULL;
    uint32_t ignored_number;
    if (cls->name == NULL || (cls->schema_count && cls->schema == NULL) ||
        zs_name_intern_locked(rt, desc->name, name_length, false, &cls->name_index,
                              &ignored_number) != ZS_OK) {
        zs_free(rt, cls->schema, cls->schema_count * sizeof(uint32_t));
        zs_free(rt, cls->name, cls->name ? name_length + 1 : 0);
        zs_free(rt, cls, sizeof *cls);
        goto done;
    }
    memcpy(cls->name, desc->name, name_length);
    if (inherited) memcpy(cls->schema, parent->schema, inherited * sizeof(uint32_t));
    for (uint32_t i = 0; i < desc->member_count; i++)
        cls->schema[inherited + i] =
            op_of_kind(desc->members[i].kind) | (desc->members[i].offset << ZS_OP_SHIFT);
    if (cls->schema_count > 1) qsort(cls->schema, cls->schema_count, sizeof(uint32_t), compare_words);
    while (cls->strong_count < cls->schema_count &&
           (cls->schema[cls->strong_count] & ZS_OP_MASK) != ZS_OP_WEAK)
        cls->strong_count++;
    cls->parent = parent;
    cls->id = rt->class_count;
    cls->instance_size = desc->instance_size;
    cls->flags = desc->flags;
    rt->classes[rt->class_count++] = cls;
    *out = cls;
    status = ZS_OK;
done:
    ZS_UNLOCK(rt);
    return status;
}

uint32_t zs_class_member_op(const zs_class *cls, uint32_t offset) {
    for (uint32_t i = 0; i < cls->schema_count; i++)
        if ((cls->schema[i] >> ZS_OP_SHIFT) == offset) return cls->schema[i] & ZS_OP_MASK;
    return 0;
}

uint32_t zs_class_id(const zs_class *cls) { return cls->id; }
const char *zs_class_name(const zs_class *cls) { return cls->name; }
const zs_class *zs_class_parent(const zs_class *cls) { return cls->parent; }
uint32_t zs_class_instance_size(const zs_class *cls) { return cls->instance_size; }
uint32_t zs_class_schema_words(const zs_class *cls) { return cls->schema_count; }

int zs_class_is_a(const zs_class *cls, const zs_class *base) {
    for (; cls != NULL; cls = cls->parent)
        if (cls == base) return 1;
    return 0;
}

void zs_classes_release(zs_runtime *rt) {
    for (uint32_t i = 0; i < rt->class_count; i++) {
        zs_class *cls = rt->classes[i];
        zs_free(rt, cls->schema, cls->schema_count * sizeof(uint32_t));
        zs_free(rt, cls->name, strlen(cls->name) + 1);
        zs_free(rt, cls, sizeof *cls);
    }
    zs_free(rt, rt->classes, rt->class_capacity * sizeof *rt->classes);
    rt->classes = NULL;
    rt->class_count = rt->class_capacity = 0;
}
