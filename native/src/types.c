/*
 * types.c -- value types: their registry (plain, object, string, delegate,
 * struct and container types, each registered once and never changed) and
 * the flattened schemas that lay out their references for the marker, the
 * destroyer and the copier (classes flatten theirs the same way).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ======================================================================
 * Registry
 * ====================================================================== */

static bool is_power_of_two(uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }

static uint32_t round_up(uint32_t value, uint32_t align) {
    return (value + align - 1) & ~(align - 1);
}

/* A new zeroed type appended to the runtime's registry. */
static zs_type *type_new(zs_runtime *rt, uint32_t kind) {
    if (rt->type_count == rt->type_capacity) {
        uint32_t capacity = rt->type_capacity ? rt->type_capacity * 2 : 32;
        zs_type **grown = zs_realloc(rt, rt->types, rt->type_capacity * sizeof *grown,
                                     capacity * sizeof *grown);
        if (grown == NULL) return NULL;
        rt->types = grown;
        rt->type_capacity = capacity;
    }
    zs_type *type = zs_alloc(rt, sizeof *type);
    if (type == NULL) return NULL;
    type->id = rt->type_count;
    type->kind = kind;
    rt->types[rt->type_count++] = type;
    return type;
}

zs_status zs_type_basic(zs_runtime *rt, zs_type_kind kind, uint32_t size, uint32_t align,
                        const zs_type **out) {
    if (out == NULL) return ZS_E_INVALID;
    uint32_t flags = 0, unit = 0;
    switch (kind) {
    case ZS_TYPE_PLAIN:
        if (!is_power_of_two(align) || align > 16 || size == 0 || size % align != 0)
            return ZS_E_INVALID;
        flags = ZS_TYPE_BITWISE | ZS_TYPE_HASHABLE;
        break;
    case ZS_TYPE_OBJECT:
        size = align = 8;
        flags = ZS_TYPE_HAS_REFS | ZS_TYPE_BITWISE | ZS_TYPE_HASHABLE;
        break;
    case ZS_TYPE_WEAK_OBJECT:
        size = align = 8;
        flags = ZS_TYPE_BITWISE | ZS_TYPE_HASHABLE;
        break;
    case ZS_TYPE_STRING:
        if (size != 1 && size != 2) return ZS_E_INVALID;
        unit = size;
        size = sizeof(zs_string);
        align = 8;
        flags = ZS_TYPE_NEEDS_DTOR | ZS_TYPE_HASHABLE;
        break;
    case ZS_TYPE_DELEGATE:
        size = sizeof(zs_binding);
        align = 8;
        flags = ZS_TYPE_NEEDS_DTOR;
        break;
    case ZS_TYPE_MULTICAST:
        size = sizeof(zs_array);
        align = 8;
        flags = ZS_TYPE_NEEDS_DTOR;
        break;
    case ZS_TYPE_SPARSE:
        size = sizeof(zs_array *);
        align = 8;
        flags = ZS_TYPE_NEEDS_DTOR;
        break;
    default:
        return ZS_E_INVALID;
    }
    ZS_LOCK(rt);
    zs_status status = ZS_OK;
    for (uint32_t i = 0; i < rt->type_count; i++) {
        const zs_type *t = rt->types[i];
        if (t->kind == (uint32_t)kind && t->size == size && t->align == align && t->unit == unit) {
            *out = t;
            goto done;
        }
    }
    zs_type *type = type_new(rt, kind);
    if (type == NULL) {
        status = ZS_E_NOMEM;
        goto done;
    }
    type->size = size;
    type->align = align;
    type->flags = flags;
    type->unit = unit;
    *out = type;
done:
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_type_struct(zs_runtime *rt, const char *name, uint32_t size, uint32_t align,
                         const zs_type_member *members, uint32_t member_count,
                         const zs_type **out) {
    if (out == NULL || name == NULL || (member_count > 0 && members == NULL)) return ZS_E_INVALID;
    if (!is_power_of_two(align) || align > 16 || size == 0 || size % align != 0 ||
        size > ZS_OP_MAX_OFFSET)
        return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = ZS_E_INVALID;
    uint32_t flags = ZS_TYPE_BITWISE | ZS_TYPE_HASHABLE;
    for (uint32_t i = 0; i < member_count; i++) {
        const zs_type *t = members[i].type;
        if (!zs_type_valid(rt, t) || members[i].offset % t->align != 0 || t->align > align ||
            (uint64_t)members[i].offset + t->size > size)
            goto done;
        for (uint32_t j = 0; j < i; j++) {
            uint64_t a0 = members[i].offset, a1 = a0 + t->size;
            uint64_t b0 = members[j].offset, b1 = b0 + members[j].type->size;
            if (a0 < b1 && b0 < a1) goto done;
        }
        flags |= t->flags & (ZS_TYPE_HAS_REFS | ZS_TYPE_NEEDS_DTOR);
        if (!(t->flags & ZS_TYPE_BITWISE)) flags &= ~ZS_TYPE_BITWISE;
        if (!(t->flags & ZS_TYPE_HASHABLE)) flags &= ~ZS_TYPE_HASHABLE;
    }
    status = ZS_E_NOMEM;
    zs_type *type = type_new(rt, ZS_TYPE_STRUCT);
    if (type == NULL) goto done;
    type->size = size;
    type->align = align;
    type->flags = flags;
    /* Each block is filled in as soon as it exists: zs_types_release frees
       the name by its length and the members by member_count, so either
       may be freed when the other's allocation failed. */
    size_t name_length = strlen(name);
    type->name = zs_alloc(rt, name_length + 1);
    if (type->name != NULL) memcpy(type->name, name, name_length);
    type->members = member_count ? zs_alloc(rt, member_count * sizeof *members) : NULL;
    if (type->members != NULL) {
        memcpy(type->members, members, member_count * sizeof *members);
        type->member_count = member_count;
    }
    bool ok = type->name != NULL && (member_count == 0 || type->members != NULL);
    if (ok) {
        for (uint32_t i = 0; ok && i < member_count; i++)
            ok = zs_schema_add(rt, &type->schema, members[i].type, members[i].offset);
        zs_schema_finish(&type->schema);
    }
    /* A half-built type stays registered (registries never shrink) but is
       not returned; it is released with the runtime. */
    if (ok) {
        *out = type;
        status = ZS_OK;
    }
done:
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_type_container(zs_runtime *rt, zs_type_kind kind, const zs_type *element,
                            const zs_type *value, const zs_type **out) {
    if (out == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = ZS_E_INVALID;
    if (!zs_type_valid(rt, element) || (kind == ZS_TYPE_MAP) != (value != NULL)) goto done;
    if (value != NULL && !zs_type_valid(rt, value)) goto done;
    if ((kind == ZS_TYPE_SET || kind == ZS_TYPE_MAP) && !(element->flags & ZS_TYPE_HASHABLE))
        goto done;
    if (kind != ZS_TYPE_ARRAY && kind != ZS_TYPE_SET && kind != ZS_TYPE_MAP &&
        kind != ZS_TYPE_OPTIONAL)
        goto done;
    status = ZS_OK;
    for (uint32_t i = 0; i < rt->type_count; i++) {
        const zs_type *t = rt->types[i];
        if (t->kind == (uint32_t)kind && t->element == element && t->value == value) {
            *out = t;
            goto done;
        }
    }
    status = ZS_E_NOMEM;
    zs_type *type = type_new(rt, kind);
    if (type == NULL) goto done;
    type->element = element;
    type->value = value;
    uint32_t inner = element->flags | (value ? value->flags : 0);
    switch (kind) {
    case ZS_TYPE_ARRAY:
        type->size = sizeof(zs_array);
        type->align = 8;
        type->entry_size = round_up(element->size, element->align);
        type->flags = ZS_TYPE_NEEDS_DTOR | (inner & ZS_TYPE_HAS_REFS);
        break;
    case ZS_TYPE_SET:
    case ZS_TYPE_MAP: {
        uint32_t entry_align = value && value->align > element->align ? value->align
                                                                      : element->align;
        type->size = sizeof(zs_hash);
        type->align = 8;
        type->value_offset = value ? round_up(element->size, value->align) : 0;
        type->entry_size = round_up(value ? type->value_offset + value->size : element->size,
                                    entry_align);
        type->flags = ZS_TYPE_NEEDS_DTOR | (inner & ZS_TYPE_HAS_REFS);
        break;
    }
    default: /* ZS_TYPE_OPTIONAL: the value, then a flag byte */
        type->align = element->align;
        type->value_offset = element->size;
        type->size = round_up(element->size + 1, element->align);
        type->flags = element->flags &
                      (ZS_TYPE_HAS_REFS | ZS_TYPE_NEEDS_DTOR | ZS_TYPE_BITWISE | ZS_TYPE_HASHABLE);
        break;
    }
    *out = type;
    status = ZS_OK;
done:
    ZS_UNLOCK(rt);
    return status;
}

uint32_t zs_type_size(const zs_type *type) { return type->size; }
uint32_t zs_type_align(const zs_type *type) { return type->align; }
uint32_t zs_type_flags(const zs_type *type) { return type->flags; }
uint32_t zs_type_kind_of(const zs_type *type) { return type->kind; }
uint32_t zs_type_id(const zs_type *type) { return type->id; }
uint32_t zs_type_value_offset(const zs_type *type) { return type->value_offset; }
uint32_t zs_type_entry_size(const zs_type *type) { return type->entry_size; }

void zs_types_release(zs_runtime *rt) {
    for (uint32_t i = 0; i < rt->type_count; i++) {
        zs_type *type = rt->types[i];
        zs_schema_release(rt, &type->schema);
        zs_free(rt, type->members, type->member_count * sizeof *type->members);
        if (type->name != NULL) zs_free(rt, type->name, strlen(type->name) + 1);
        zs_free(rt, type, sizeof *type);
    }
    zs_free(rt, rt->types, rt->type_capacity * sizeof *rt->types);
    rt->types = NULL;
    rt->type_count = rt->type_capacity = 0;
}

/* ======================================================================
 * Schemas
 * ====================================================================== */

/* Append a word; grows both arrays or neither (zs_schema_release frees them
   by the capacity derived from count, so they must never differ). */
static bool schema_push(zs_runtime *rt, zs_schema *schema, uint32_t word, const zs_type *type) {
    if (schema->count % 16 == 0) {
        uint32_t old = schema->count, grown = schema->count + 16;
        const zs_type **types = zs_alloc(rt, grown * sizeof(zs_type *));
        if (types == NULL) return false;
        uint32_t *words = zs_realloc(rt, schema->words, old * sizeof(uint32_t),
                                     grown * sizeof(uint32_t));
        if (words == NULL) {
            zs_free(rt, (void *)types, grown * sizeof(zs_type *));
            return false;
        }
        if (old != 0) memcpy((void *)types, schema->types, old * sizeof(zs_type *));
        zs_free(rt, (void *)schema->types, old * sizeof(zs_type *));
        schema->words = words;
        schema->types = types;
    }
    schema->words[schema->count] = word;
    schema->types[schema->count] = type;
    schema->count++;
    return true;
}

bool zs_schema_add(zs_runtime *rt, zs_schema *schema, const zs_type *type, uint32_t base) {
    switch (type->kind) {
    case ZS_TYPE_PLAIN:
        return true;
    case ZS_TYPE_OBJECT:
        return schema_push(rt, schema, ZS_OP_OBJECT | (base << ZS_OP_SHIFT), NULL);
    case ZS_TYPE_WEAK_OBJECT:
        return schema_push(rt, schema, ZS_OP_WEAK | (base << ZS_OP_SHIFT), NULL);
    case ZS_TYPE_STRUCT:
        /* Inline the nested struct's words with their offsets moved. */
        for (uint32_t i = 0; i < type->schema.count; i++) {
            uint32_t word = type->schema.words[i];
            uint32_t offset = (word >> ZS_OP_SHIFT) + base;
            if (!schema_push(rt, schema, (word & ZS_OP_MASK) | (offset << ZS_OP_SHIFT),
                             type->schema.types[i]))
                return false;
        }
        return true;
    default:
        if (!(type->flags & (ZS_TYPE_HAS_REFS | ZS_TYPE_NEEDS_DTOR))) return true;
        return schema_push(rt, schema, ZS_OP_VALUE | (base << ZS_OP_SHIFT), type);
    }
}

/* Strong words first: OBJECT, and VALUE words whose type holds references. */
static bool word_is_strong(const zs_schema *schema, uint32_t i) {
    uint32_t op = schema->words[i] & ZS_OP_MASK;
    return op == ZS_OP_OBJECT ||
           (op == ZS_OP_VALUE && (schema->types[i]->flags & ZS_TYPE_HAS_REFS));
}

/* Rank of a word in the marker's order: OBJECT, strong VALUE, the rest. */
static uint32_t word_rank(const zs_schema *schema, uint32_t i) {
    if ((schema->words[i] & ZS_OP_MASK) == ZS_OP_OBJECT) return 0;
    return word_is_strong(schema, i) ? 1 : 2;
}

void zs_schema_finish(zs_schema *schema) {
    /* Stable partition by insertion (schemas are short, built once): the
       marker reads the OBJECT words as one run, then the strong values. */
    uint32_t filled = 0;
    for (uint32_t rank = 0; rank < 2; rank++) {
        for (uint32_t i = filled; i < schema->count; i++) {
            if (word_rank(schema, i) != rank) continue;
            uint32_t word = schema->words[i];
            const zs_type *type = schema->types[i];
            for (uint32_t j = i; j > filled; j--) {
                schema->words[j] = schema->words[j - 1];
                schema->types[j] = schema->types[j - 1];
            }
            schema->words[filled] = word;
            schema->types[filled] = type;
            filled++;
        }
        if (rank == 0) schema->object_count = filled;
    }
    schema->strong_count = filled;
    schema->object_run = schema->object_count > 0 ? schema->words[0] >> ZS_OP_SHIFT : ZS_NO_RUN;
    for (uint32_t i = 1; i < schema->object_count; i++)
        if ((schema->words[i] >> ZS_OP_SHIFT) != schema->object_run + i * sizeof(zs_ref))
            schema->object_run = ZS_NO_RUN;
    bool plain = schema->strong_count == schema->object_count &&
                 (schema->object_count == 0 || schema->object_run != ZS_NO_RUN);
    schema->plain_count = plain ? schema->object_count : ZS_NO_RUN;
    schema->plain_offset = plain && schema->object_count > 0 ? schema->object_run : 0;
}

void zs_schema_release(zs_runtime *rt, zs_schema *schema) {
    uint32_t capacity = (schema->count + 15) / 16 * 16;
    zs_free(rt, schema->words, capacity * sizeof(uint32_t));
    zs_free(rt, (void *)schema->types, capacity * sizeof(zs_type *));
    memset(schema, 0, sizeof *schema);
}

bool zs_schema_copy(zs_runtime *rt, zs_schema *dst, const zs_schema *src) {
    for (uint32_t i = 0; i < src->count; i++)
        if (!schema_push(rt, dst, src->words[i], src->types[i])) return false;
    return true;
}
