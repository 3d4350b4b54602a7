/*
 * value_ops.c -- what every value supports, driven by its type, never by
 * the caller: destroy, deep copy, equality, hashing, and iterating the
 * references inside it (for clusters, verification, the barrier and
 * sanitising).
 *
 * Invariants relied on here:
 *  - Zeroed memory is a valid, empty value of every type, and destroying a
 *    value leaves it zeroed. So a failed copy can always be unwound by
 *    destroying the destination.
 *  - Set elements and map keys are never nulled by the collector (that
 *    would break the hash); only array elements, map values, struct
 *    members and optionals are killable.
 */
#include "internal.h"

#include <string.h>

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

/* Deep-copy a value into an empty one; false (dst left empty) when out of memory. */
bool zs_value_copy(zs_runtime *rt, const zs_type *type, void *dst, const void *src) {
    return value_copy(rt, type, dst, src);
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

/* Call fn on every strong reference slot inside a value. */
void zs_value_for_each_ref(const zs_type *type, void *value, bool killable,
                           void (*fn)(void *context, zs_ref *slot, bool killable), void *context) {
    visit_refs(type, value, killable, fn, context);
}

/* Call fn on every strong reference slot of entries [first, first + count)
   of a container of `type`. */
void zs_entries_for_each_ref(const zs_type *type, zs_array *entries, uint32_t first, uint32_t count,
                             void (*fn)(void *context, zs_ref *slot, bool killable),
                             void *context) {
    visit_entry_range(type, entries, first, first + count, fn, context);
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
