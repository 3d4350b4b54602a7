/*
 * hash_index.c -- the bucket index of a set or map: open addressing with
 * linear probing over its entries (bucket = entry index + 1, 0 = empty),
 * probing, rehashing at a new size, and re-indexing in place after keys
 * changed. Sets and maps are changed through containers.c; re-indexing is
 * also what sanitising a copied key needs (value_stores.c).
 */
#include "internal.h"

#include <string.h>

/* Whether two bitwise keys of `size` bytes are equal (zs_value_equal of a
   bitwise type): the common sizes (a name, a 32- or 64-bit number, a
   reference) compared as one word, with no call to memcmp. */
static inline bool bitwise_equal(const void *a, const void *b, uint32_t size) {
    if (size == 8) {
        uint64_t x, y;
        memcpy(&x, a, sizeof x);
        memcpy(&y, b, sizeof y);
        return x == y;
    }
    if (size == 4) {
        uint32_t x, y;
        memcpy(&x, a, sizeof x);
        memcpy(&y, b, sizeof y);
        return x == y;
    }
    return memcmp(a, b, size) == 0;
}

/* The bucket holding `key`, or the empty bucket where it would go (*found
   says which). */
uint32_t zs_hash_probe(zs_runtime *rt, const zs_type *type, const zs_hash *hash, const void *key,
                       bool *found) {
    uint32_t mask = hash->bucket_count - 1;
    uint32_t slot = (uint32_t)zs_value_hash(rt, type->element, key) & mask;
    uint32_t bitwise = ZS_TYPE_BITWISE | ZS_TYPE_HASHABLE;
    if ((type->element->flags & bitwise) == bitwise) {
        /* Equality is the bytes' (value_equal, value_ops.c): compared inline. */
        uint32_t size = type->element->size;
        for (;; slot = (slot + 1) & mask) {
            uint32_t held = hash->buckets[slot];
            if (held == 0 || bitwise_equal(zs_hash_entry(type, hash, held - 1), key, size)) {
                *found = held != 0;
                return slot;
            }
        }
    }
    if (type->element->kind == ZS_TYPE_STRING) {
        /* Equality is the code units' (value_equal, value_ops.c): compared inline. */
        const zs_string *wanted = key;
        size_t bytes = (size_t)wanted->length * type->element->unit;
        for (;; slot = (slot + 1) & mask) {
            uint32_t held = hash->buckets[slot];
            const zs_string *entry = held ? (const zs_string *)zs_hash_entry(type, hash, held - 1)
                                          : NULL;
            if (entry == NULL || (entry->length == wanted->length &&
                                  (bytes == 0 || memcmp(entry->data, wanted->data, bytes) == 0))) {
                *found = entry != NULL;
                return slot;
            }
        }
    }
    for (;; slot = (slot + 1) & mask) {
        uint32_t held = hash->buckets[slot];
        if (held == 0) {
            *found = false;
            return slot;
        }
        if (zs_value_equal(rt, type->element, zs_hash_entry(type, hash, held - 1), key) == 1) {
            *found = true;
            return slot;
        }
    }
}

/* Rebuild the bucket index at a new size (power of two, > 2 x entries);
   false, the index as it was, when out of memory. */
bool zs_hash_rehash(zs_runtime *rt, const zs_type *type, zs_hash *hash, uint32_t bucket_count) {
    uint32_t *buckets = zs_alloc(rt, (size_t)bucket_count * sizeof(uint32_t));
    if (buckets == NULL) return false;
    zs_free(rt, hash->buckets, (size_t)hash->bucket_count * sizeof(uint32_t));
    hash->buckets = buckets;
    hash->bucket_count = bucket_count;
    for (uint32_t i = 0; i < hash->entries.count; i++) {
        bool found;
        uint32_t slot = zs_hash_probe(rt, type, hash, zs_hash_entry(type, hash, i), &found);
        assert(!found);
        hash->buckets[slot] = i + 1;
    }
    return true;
}

/* Rebuild the buckets in place after keys changed (references to
   destroyed objects nulled by value_stores.c, sanitise): an entry equal to an
   earlier one is destroyed and the last entry moves into its place (it is
   indexed later in the pass). Needs no allocation: entries only go. */
void zs_hash_reindex(zs_runtime *rt, const zs_type *type, zs_hash *hash) {
    if (hash->bucket_count == 0) return; /* then there are no entries */
    memset(hash->buckets, 0, (size_t)hash->bucket_count * sizeof(uint32_t));
    for (uint32_t i = 0; i < hash->entries.count;) {
        bool found;
        uint32_t slot = zs_hash_probe(rt, type, hash, zs_hash_entry(type, hash, i), &found);
        if (!found) {
            hash->buckets[slot] = ++i;
            continue;
        }
        char *victim = zs_hash_entry(type, hash, i);
        zs_value_destroy(rt, type->element, victim);
        if (type->value) zs_value_destroy(rt, type->value, victim + type->value_offset);
        uint32_t last = hash->entries.count - 1;
        if (i != last) memcpy(victim, zs_hash_entry(type, hash, last), type->entry_size);
        memset(zs_hash_entry(type, hash, last), 0, type->entry_size);
        hash->entries.count--;
    }
}
