/*
 * types.c -- value types: their registry, flattened schemas, and the
 * operations every value supports (destroy, deep copy, equality, hashing,
 * reference iteration), driven by the type, never by the caller.
 *
 * Invariants relied on here:
 *  - Zeroed memory is a valid, empty value of every type, and destroying a
 *    value leaves it zeroed. So a failed copy can always be unwound by
 *    destroying the destination.
 *  - Strong references inside values are live (or null): the collector
 *    traces them, and copies from black values that are not roots (where
 *    a reference may have gone stale) are sanitised on the way in.
 *  - Set elements and map keys are never nulled by the collector (that
 *    would break the hash); only array elements, map values, struct
 *    members and optionals are killable.
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

static bool type_valid(const zs_runtime *rt, const zs_type *type) {
    return type != NULL && type->id < rt->type_count && rt->types[type->id] == type;
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
        if (!type_valid(rt, t) || members[i].offset % t->align != 0 || t->align > align ||
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
    if (!type_valid(rt, element) || (kind == ZS_TYPE_MAP) != (value != NULL)) goto done;
    if (value != NULL && !type_valid(rt, value)) goto done;
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
    zs_free(rt, rt->callable_refs, rt->callable_capacity * sizeof(uint32_t));
    rt->callable_refs = NULL;
    rt->callable_capacity = 0;
    zs_u32_release(rt, &rt->released_callables);
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

/* ======================================================================
 * Destroy
 * ====================================================================== */

static void value_release(zs_runtime *rt, const zs_type *type, void *value);

/* Whether a value of a NEEDS_DTOR type owns nothing: no storage, no
   callable, an unset optional. A new object's containers and strings are
   all such, so destroying an object that never grew them makes no call
   per member (an object with a dozen value members, made and dropped in a
   loop, spent a quarter of its time releasing nothing). A struct is never
   reported empty: value_release checks its members. Relies on a string's
   or container's storage pointer being NULL only while nothing is
   allocated: set by its first growth, never reset until released. */
static inline bool value_owns_nothing(const zs_type *type, const void *value) {
    switch (type->kind) {
    case ZS_TYPE_STRING:
        return ((const zs_string *)value)->data == NULL;
    case ZS_TYPE_ARRAY:
    case ZS_TYPE_MULTICAST:
        return ((const zs_array *)value)->data == NULL;
    case ZS_TYPE_SET:
    case ZS_TYPE_MAP:
        return ((const zs_hash *)value)->entries.data == NULL &&
               ((const zs_hash *)value)->buckets == NULL;
    case ZS_TYPE_OPTIONAL:
        return ((const uint8_t *)value)[type->value_offset] == 0;
    case ZS_TYPE_DELEGATE:
        return ((const zs_binding *)value)->callable == 0; /* an object binding is weak */
    case ZS_TYPE_SPARSE:
        return *(zs_array *const *)value == NULL;
    default:
        return false;
    }
}

void zs_schema_destroy(zs_runtime *rt, const zs_schema *schema, char *base) {
    for (uint32_t i = 0; i < schema->count; i++) {
        if ((schema->words[i] & ZS_OP_MASK) != ZS_OP_VALUE) continue;
        const zs_type *type = schema->types[i];
        char *value = base + (schema->words[i] >> ZS_OP_SHIFT);
        if ((type->flags & ZS_TYPE_NEEDS_DTOR) && !value_owns_nothing(type, value))
            value_release(rt, type, value);
    }
}

/* Release the entries of an array or hash and their storage. */
static void entries_release(zs_runtime *rt, const zs_type *type, zs_array *entries) {
    const zs_type *element = type->element, *value = type->value;
    bool element_dtor = (element->flags & ZS_TYPE_NEEDS_DTOR) != 0;
    bool value_dtor = value != NULL && (value->flags & ZS_TYPE_NEEDS_DTOR);
    for (uint32_t i = 0; (element_dtor || value_dtor) && i < entries->count; i++) {
        char *entry = (char *)entries->data + (size_t)i * type->entry_size;
        if (element_dtor) value_release(rt, element, entry);
        if (value_dtor) value_release(rt, value, entry + type->value_offset);
    }
    zs_free(rt, entries->data, (size_t)entries->capacity * type->entry_size);
}

void zs_value_destroy(zs_runtime *rt, const zs_type *type, void *value) {
    if (type->flags & ZS_TYPE_NEEDS_DTOR) value_release(rt, type, value);
    memset(value, 0, type->size);
}

/* Free what a value of a type that NEEDS_DTOR owns (string storage,
   entries, bindings), leaving its bytes as they are: the memory around it
   is zeroed or freed whole next (zs_value_destroy, zs_schema_destroy). */
static void value_release(zs_runtime *rt, const zs_type *type, void *value) {
    switch (type->kind) {
    case ZS_TYPE_STRING: {
        zs_string *string = value;
        zs_free(rt, string->data, (size_t)string->capacity * type->unit);
        break;
    }
    case ZS_TYPE_STRUCT:
        zs_schema_destroy(rt, &type->schema, value);
        break;
    case ZS_TYPE_ARRAY:
        entries_release(rt, type, value);
        break;
    case ZS_TYPE_SET:
    case ZS_TYPE_MAP: {
        zs_hash *hash = value;
        entries_release(rt, type, &hash->entries);
        zs_free(rt, hash->buckets, (size_t)hash->bucket_count * sizeof(uint32_t));
        break;
    }
    case ZS_TYPE_OPTIONAL:
        if (((uint8_t *)value)[type->value_offset] && (type->element->flags & ZS_TYPE_NEEDS_DTOR))
            value_release(rt, type->element, value);
        break;
    case ZS_TYPE_DELEGATE:
        zs_binding_drop(rt, value);
        break;
    case ZS_TYPE_MULTICAST:
        zs_bindings_destroy(rt, value);
        break;
    case ZS_TYPE_SPARSE: {
        zs_array *array = *(zs_array **)value;
        if (array != NULL) {
            zs_bindings_destroy(rt, array);
            zs_free(rt, array, sizeof *array);
        }
        break;
    }
    default:
        break;
    }
}

/* ======================================================================
 * Deep copy (dst must be empty; on failure it is left empty)
 * ====================================================================== */

static bool value_copy(zs_runtime *rt, const zs_type *type, void *dst, const void *src);

/* Copy count entries of an array or hash. */
static bool entries_copy(zs_runtime *rt, const zs_type *type, zs_array *dst, const zs_array *src) {
    if (src->count == 0) return true;
    size_t bytes = (size_t)src->count * type->entry_size;
    dst->data = zs_alloc(rt, bytes);
    if (dst->data == NULL) return false;
    dst->capacity = src->count;
    const zs_type *element = type->element, *value = type->value;
    bool bitwise = (element->flags & ZS_TYPE_BITWISE) &&
                   (value == NULL || (value->flags & ZS_TYPE_BITWISE));
    if (bitwise) {
        memcpy(dst->data, src->data, bytes);
        dst->count = src->count;
        return true;
    }
    for (uint32_t i = 0; i < src->count; i++) {
        char *d = (char *)dst->data + (size_t)i * type->entry_size;
        const char *s = (const char *)src->data + (size_t)i * type->entry_size;
        dst->count = i + 1; /* the entry is valid (zeroed) from here on */
        if (!value_copy(rt, element, d, s)) return false;
        if (value != NULL && !value_copy(rt, value, d + type->value_offset, s + type->value_offset))
            return false;
    }
    return true;
}

static bool value_copy(zs_runtime *rt, const zs_type *type, void *dst, const void *src) {
    if (type->flags & ZS_TYPE_BITWISE) {
        memcpy(dst, src, type->size);
        return true;
    }
    bool ok = true;
    switch (type->kind) {
    case ZS_TYPE_STRING: {
        const zs_string *s = src;
        zs_string *d = dst;
        if (s->length > 0) {
            d->data = zs_alloc(rt, (size_t)s->length * type->unit);
            ok = d->data != NULL;
            if (ok) {
                memcpy(d->data, s->data, (size_t)s->length * type->unit);
                d->length = d->capacity = s->length;
            }
        }
        break;
    }
    case ZS_TYPE_STRUCT: {
        /* Plain bytes and references first, then every owned member on its
           own (zeroed before, so a failure leaves no alias to free twice). */
        memcpy(dst, src, type->size);
        for (uint32_t i = 0; i < type->schema.count; i++)
            if ((type->schema.words[i] & ZS_OP_MASK) == ZS_OP_VALUE)
                memset((char *)dst + (type->schema.words[i] >> ZS_OP_SHIFT), 0,
                       type->schema.types[i]->size);
        for (uint32_t i = 0; ok && i < type->schema.count; i++) {
            if ((type->schema.words[i] & ZS_OP_MASK) != ZS_OP_VALUE) continue;
            uint32_t offset = type->schema.words[i] >> ZS_OP_SHIFT;
            ok = value_copy(rt, type->schema.types[i], (char *)dst + offset,
                            (const char *)src + offset);
        }
        break;
    }
    case ZS_TYPE_ARRAY:
        ok = entries_copy(rt, type, dst, src);
        break;
    case ZS_TYPE_SET:
    case ZS_TYPE_MAP: {
        const zs_hash *s = src;
        zs_hash *d = dst;
        ok = entries_copy(rt, type, &d->entries, &s->entries);
        if (ok && s->bucket_count > 0) {
            d->buckets = zs_alloc(rt, (size_t)s->bucket_count * sizeof(uint32_t));
            ok = d->buckets != NULL;
            if (ok) {
                memcpy(d->buckets, s->buckets, (size_t)s->bucket_count * sizeof(uint32_t));
                d->bucket_count = s->bucket_count;
            }
        }
        break;
    }
    case ZS_TYPE_OPTIONAL:
        if (((const uint8_t *)src)[type->value_offset]) {
            ((uint8_t *)dst)[type->value_offset] = 1;
            ok = value_copy(rt, type->element, dst, src);
        }
        break;
    case ZS_TYPE_DELEGATE:
        ok = zs_binding_copy(rt, dst, src);
        break;
    case ZS_TYPE_MULTICAST:
        ok = zs_bindings_copy(rt, dst, src);
        break;
    case ZS_TYPE_SPARSE: {
        const zs_array *s = *(zs_array *const *)src;
        if (s != NULL && s->count > 0) {
            zs_array *d = zs_alloc(rt, sizeof *d);
            ok = d != NULL;
            if (ok) {
                *(zs_array **)dst = d;
                ok = zs_bindings_copy(rt, d, s);
            }
        }
        break;
    }
    default:
        memcpy(dst, src, type->size);
        break;
    }
    if (!ok) zs_value_destroy(rt, type, dst);
    return ok;
}

/* ======================================================================
 * Reference iteration (clusters, verification, sanitising, barrier)
 * ====================================================================== */

typedef void (*ref_visitor)(void *context, zs_ref *slot, bool killable);

static void visit_refs(const zs_type *type, void *value, bool killable, ref_visitor fn, void *ctx);

/* Visit the references of a container's entries [first, end). */
static void visit_entry_range(const zs_type *type, zs_array *entries, uint32_t first, uint32_t end,
                              ref_visitor fn, void *ctx) {
    assert(first <= end && end <= entries->count);
    const zs_type *element = type->element, *value = type->value;
    bool keys = (element->flags & ZS_TYPE_HAS_REFS) != 0;
    bool values = value != NULL && (value->flags & ZS_TYPE_HAS_REFS);
    /* Set elements and map keys are not killable: nulling them breaks the hash. */
    bool key_killable = type->kind == ZS_TYPE_ARRAY;
    for (uint32_t i = first; (keys || values) && i < end; i++) {
        char *entry = (char *)entries->data + (size_t)i * type->entry_size;
        if (keys) visit_refs(element, entry, key_killable, fn, ctx);
        if (values) visit_refs(value, entry + type->value_offset, true, fn, ctx);
    }
}

static void visit_entries(const zs_type *type, zs_array *entries, ref_visitor fn, void *ctx) {
    visit_entry_range(type, entries, 0, entries->count, fn, ctx);
}

static void visit_refs(const zs_type *type, void *value, bool killable, ref_visitor fn, void *ctx) {
    if (!(type->flags & ZS_TYPE_HAS_REFS)) return;
    switch (type->kind) {
    case ZS_TYPE_OBJECT:
        fn(ctx, value, killable);
        break;
    case ZS_TYPE_STRUCT:
        for (uint32_t i = 0; i < type->schema.strong_count; i++) {
            char *member = (char *)value + (type->schema.words[i] >> ZS_OP_SHIFT);
            if ((type->schema.words[i] & ZS_OP_MASK) == ZS_OP_OBJECT)
                fn(ctx, (zs_ref *)member, killable);
            else visit_refs(type->schema.types[i], member, killable, fn, ctx);
        }
        break;
    case ZS_TYPE_ARRAY:
        visit_entries(type, value, fn, ctx);
        break;
    case ZS_TYPE_SET:
    case ZS_TYPE_MAP:
        visit_entries(type, &((zs_hash *)value)->entries, fn, ctx);
        break;
    case ZS_TYPE_OPTIONAL:
        if (((uint8_t *)value)[type->value_offset])
            visit_refs(type->element, value, killable, fn, ctx);
        break;
    default:
        break;
    }
}

void zs_value_for_each_ref(const zs_type *type, void *value, bool killable,
                           void (*fn)(void *context, zs_ref *slot, bool killable), void *context) {
    visit_refs(type, value, killable, fn, context);
}

/* Copies from non-root black values may carry references to objects that
   died meanwhile: null them rather than plant a dangling handle. */
static void sanitise_one(void *context, zs_ref *slot, bool killable) {
    (void)killable;
    zs_runtime *rt = context;
    if (*slot == ZS_NULL_REF) return;
    zs_item *it = zs_item_of(rt, *slot);
    if (it == NULL || zs_item_dying(rt, it)) *slot = ZS_NULL_REF;
}

static bool sanitise_ref(zs_runtime *rt, zs_ref *slot) {
    zs_ref before = *slot;
    sanitise_one(rt, slot, false);
    return *slot != before;
}

/* sanitise_one over every strong reference of a value; true when one was
   nulled. A set element or map key that changes belongs in another bucket,
   and may now equal another one: its set or map is re-indexed, duplicates
   dropped (zs_hash_reindex). */
static bool sanitise(zs_runtime *rt, const zs_type *type, void *value) {
    if (!(type->flags & ZS_TYPE_HAS_REFS)) return false;
    bool changed = false;
    switch (type->kind) {
    case ZS_TYPE_OBJECT:
        return sanitise_ref(rt, value);
    case ZS_TYPE_STRUCT:
        for (uint32_t i = 0; i < type->schema.strong_count; i++) {
            char *member = (char *)value + (type->schema.words[i] >> ZS_OP_SHIFT);
            if ((type->schema.words[i] & ZS_OP_MASK) == ZS_OP_OBJECT)
                changed |= sanitise_ref(rt, (zs_ref *)member);
            else changed |= sanitise(rt, type->schema.types[i], member);
        }
        return changed;
    case ZS_TYPE_ARRAY: {
        zs_array *array = value;
        for (uint32_t i = 0; i < array->count; i++)
            changed |= sanitise(rt, type->element,
                                (char *)array->data + (size_t)i * type->entry_size);
        return changed;
    }
    case ZS_TYPE_SET:
    case ZS_TYPE_MAP: {
        zs_hash *hash = value;
        bool keys = false;
        for (uint32_t i = 0; i < hash->entries.count; i++) {
            char *entry = (char *)hash->entries.data + (size_t)i * type->entry_size;
            keys |= sanitise(rt, type->element, entry);
            if (type->value != NULL)
                changed |= sanitise(rt, type->value, entry + type->value_offset);
        }
        if (keys) zs_hash_reindex(rt, type, hash);
        return changed || keys;
    }
    case ZS_TYPE_OPTIONAL:
        return ((uint8_t *)value)[type->value_offset] && sanitise(rt, type->element, value);
    default:
        return false;
    }
}

/* One reference slot through the write barrier (only called while marking;
   a null slot is counted as work too, so the count is the slots looked at). */
static void barrier_one(void *context, zs_ref *slot, bool killable) {
    (void)killable;
    zs_runtime *rt = context;
    if (*slot != ZS_NULL_REF) zs_gc_barrier(rt, zs_item_of(rt, *slot));
    else rt->stats.barrier_slots++;
}

void zs_value_barrier(zs_runtime *rt, const zs_type *type, const void *value) {
    if (rt->phase != ZS_GC_MARKING || !(type->flags & ZS_TYPE_HAS_REFS)) return;
    visit_refs(type, (void *)value, false, barrier_one, rt);
}

void zs_entries_barrier(zs_runtime *rt, const zs_type *type, zs_array *entries, uint32_t first,
                        uint32_t count) {
    if (rt->phase != ZS_GC_MARKING || !(type->flags & ZS_TYPE_HAS_REFS)) return;
    visit_entry_range(type, entries, first, first + count, barrier_one, rt);
}

/* ======================================================================
 * Equality and hashing (hashable types only)
 * ====================================================================== */

static uint64_t hash_bytes(const void *data, size_t length, uint64_t h) {
    const unsigned char *bytes = data;
    for (size_t i = 0; i < length; i++) {
        h ^= bytes[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t value_hash(const zs_type *type, const void *value, uint64_t h) {
    if (type->flags & ZS_TYPE_BITWISE) return hash_bytes(value, type->size, h);
    switch (type->kind) {
    case ZS_TYPE_STRING: {
        const zs_string *s = value;
        return hash_bytes(s->data, (size_t)s->length * type->unit, h ^ s->length);
    }
    case ZS_TYPE_STRUCT:
        for (uint32_t i = 0; i < type->member_count; i++)
            h = value_hash(type->members[i].type, (const char *)value + type->members[i].offset, h);
        return h;
    case ZS_TYPE_OPTIONAL:
        if (!((const uint8_t *)value)[type->value_offset]) return h ^ 0x9e3779b97f4a7c15ull;
        return value_hash(type->element, value, h);
    default:
        return h;
    }
}

static bool value_equal(const zs_type *type, const void *a, const void *b) {
    if (type->flags & ZS_TYPE_BITWISE) return memcmp(a, b, type->size) == 0;
    switch (type->kind) {
    case ZS_TYPE_STRING: {
        const zs_string *x = a, *y = b;
        return x->length == y->length &&
               (x->length == 0 || memcmp(x->data, y->data, (size_t)x->length * type->unit) == 0);
    }
    case ZS_TYPE_STRUCT:
        for (uint32_t i = 0; i < type->member_count; i++) {
            uint32_t offset = type->members[i].offset;
            if (!value_equal(type->members[i].type, (const char *)a + offset,
                             (const char *)b + offset))
                return false;
        }
        return true;
    case ZS_TYPE_OPTIONAL: {
        uint8_t set_a = ((const uint8_t *)a)[type->value_offset];
        if (set_a != ((const uint8_t *)b)[type->value_offset]) return false;
        return !set_a || value_equal(type->element, a, b);
    }
    default:
        return false;
    }
}

int zs_value_equal(zs_runtime *rt, const zs_type *type, const void *a, const void *b) {
    (void)rt;
    if (!(type->flags & ZS_TYPE_HASHABLE)) return -1;
    return value_equal(type, a, b) ? 1 : 0;
}

uint64_t zs_value_hash(zs_runtime *rt, const zs_type *type, const void *value) {
    (void)rt;
    uint64_t h;
    if ((type->flags & ZS_TYPE_BITWISE) && (type->size == 8 || type->size == 4)) {
        /* One word (a name, a number, a reference): the finaliser below
           mixes it whole, where the byte loop would take a multiply per
           byte, one after the other. Equal bytes still hash alike. */
        uint64_t word = 0;
        if (type->size == 8) memcpy(&word, value, 8);
        else {
            uint32_t half;
            memcpy(&half, value, 4);
            word = half;
        }
        h = word ^ 14695981039346656037ull;
    } else {
        h = value_hash(type, value, 14695981039346656037ull);
    }
    /* Finalise (splitmix64) so low bits are usable as bucket indices. */
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

/* ======================================================================
 * Assignment and stores
 * ====================================================================== */

/* Whether a write into owner's memory is allowed now (see internal.h). */
zs_status zs_check_owner(zs_runtime *rt, zs_ref owner) {
    if (rt->in_destroy_hook) return ZS_E_BUSY;
    if (owner == ZS_NULL_REF) return ZS_OK;
    zs_status status = ZS_OK;
    zs_usable_item(rt, owner, &status);
    return status;
}

/* Answer zs_check_owner under the lock, for plain-data writes the managed side makes itself. */
zs_status zs_object_writable(zs_runtime *rt, zs_ref owner) {
    ZS_LOCK(rt);
    zs_status status = zs_check_owner(rt, owner);
    ZS_UNLOCK(rt);
    return status;
}

/* Common prologue of every mutating value and container call (see internal.h). */
zs_status zs_begin_store(zs_runtime *rt, zs_ref owner, const zs_type *type, uint32_t kind) {
    if (rt->in_destroy_hook) return ZS_E_BUSY;
    if (!type_valid(rt, type) || (kind != 0 && type->kind != kind)) return ZS_E_INVALID;
    zs_status status = zs_check_owner(rt, owner);
    if (status != ZS_OK || owner == ZS_NULL_REF) return status;
    zs_item *it = zs_item_of(rt, owner);
    assert(it != NULL);
    /* A permanent owner taking references is scanned as a root from then
       on (end_store, written): list it before anything is written, so that
       running out of memory refuses the write instead of leaving its new
       references unscanned (as zs_store_ref does, heap.c note_escape). */
    if ((it->flags & ZS_ITEM_PERMANENT) && (type->flags & ZS_TYPE_HAS_REFS) &&
        !zs_root_list_add(rt, it))
        return ZS_E_NOMEM;
    if (it->cluster_index >= 0 && (type->flags & ZS_TYPE_HAS_REFS))
        zs_cluster_dissolve(rt, it->cluster_index);
    return ZS_OK;
}

/* References of `type` were written into owner: a permanent owner escapes
   (scanned as a root from then on; zs_begin_store listed it already). */
void zs_escape_owner(zs_runtime *rt, zs_ref owner, const zs_type *type) {
    if (!(type->flags & ZS_TYPE_HAS_REFS)) return;
    zs_item *it = owner ? zs_item_of(rt, owner) : NULL;
    if (it != NULL && (it->flags & ZS_ITEM_PERMANENT) && zs_root_list_add(rt, it)) {
        it->flags |= ZS_ITEM_ESCAPED;
        it->flags &= ~ZS_ITEM_LEAF;
    }
}

/* After new contents were written: clean references, mark them if a mark
   is pending, escape a permanent owner. */
static void end_store(zs_runtime *rt, zs_ref owner, const zs_type *type, void *value) {
    if (!(type->flags & ZS_TYPE_HAS_REFS)) return;
    sanitise(rt, type, value);
    zs_value_barrier(rt, type, value);
    zs_escape_owner(rt, owner, type);
}

zs_status zs_value_assign(zs_runtime *rt, zs_ref owner, const zs_type *type, void *dst,
                          const void *src) {
    if (dst == NULL || src == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = zs_begin_store(rt, owner, type, 0);
    if (status == ZS_OK && dst != src) {
        void *copy = zs_alloc(rt, type->size);
        if (copy == NULL || !value_copy(rt, type, copy, src)) {
            status = ZS_E_NOMEM;
        } else {
            zs_value_destroy(rt, type, dst);
            memcpy(dst, copy, type->size);
            end_store(rt, owner, type, dst);
        }
        zs_free(rt, copy, copy ? type->size : 0);
    }
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_value_clear(zs_runtime *rt, zs_ref owner, const zs_type *type, void *value) {
    if (value == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = zs_begin_store(rt, owner, type, 0);
    if (status == ZS_OK) zs_value_destroy(rt, type, value);
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_value_store_ref(zs_runtime *rt, zs_ref owner, const zs_type *slot_type, zs_ref *slot,
                             zs_ref target) {
    if (slot == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = zs_begin_store(rt, owner, slot_type, 0);
    if (status == ZS_OK && slot_type->kind != ZS_TYPE_OBJECT &&
        slot_type->kind != ZS_TYPE_WEAK_OBJECT)
        status = ZS_E_INVALID;
    zs_item *it = NULL;
    if (status == ZS_OK && target != ZS_NULL_REF) it = zs_usable_item(rt, target, &status);
    if (status == ZS_OK) {
        *slot = it ? zs_item_ref(it) : ZS_NULL_REF;
        end_store(rt, owner, slot_type, slot);
    }
    ZS_UNLOCK(rt);
    return status;
}

/* ======================================================================
 * Strings
 * ====================================================================== */

/* Replace a string's contents: refused, like every value store, when its owner is dying. */
zs_status zs_string_assign(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_string *string,
                           const void *units, uint32_t length) {
    if (string == NULL || (units == NULL && length > 0)) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = length > (1u << 30) ? ZS_E_INVALID
                                           : zs_begin_store(rt, owner, type, ZS_TYPE_STRING);
    if (status == ZS_OK && length > string->capacity) {
        void *grown = zs_realloc(rt, string->data, (size_t)string->capacity * type->unit,
                                 (size_t)length * type->unit);
        if (grown == NULL) status = ZS_E_NOMEM;
        else {
            string->data = grown;
            string->capacity = length;
        }
    }
    if (status == ZS_OK) {
        /* units may be part of this very string (a substring of it). */
        if (length > 0) memmove(string->data, units, (size_t)length * type->unit);
        string->length = length;
    }
    ZS_UNLOCK(rt);
    return status;
}
