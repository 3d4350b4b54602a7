/*
 * containers.c -- arrays, sets, maps and optionals: their structural
 * operations in the API (reserve, assign, insert, remove, add, find, set;
 * delegate binding lists are delegates.c's). Element storage is native;
 * every element is built, copied and destroyed through its type
 * (value_ops.c), every write checked and barriered as value_stores.c says,
 * and a set's or map's bucket index kept by hash_index.c.
 *
 * Invariants: entries [0, count) are valid values and [count, capacity) are
 * zeroed; a hash's buckets index exactly its entries (linear probing,
 * deletion by backward shift, so no tombstones).
 */
#include "internal.h"

#include <string.h>

/* Entries [first, first + count) of a container written into an owner:
   barrier those entries alone (a write costs what it writes, whatever the
   container holds), and escape a permanent owner. */
static void written(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_array *entries,
                    uint32_t first, uint32_t count) {
    zs_entries_barrier(rt, type, entries, first, count);
    zs_escape_owner(rt, owner, type);
}

/* ======================================================================
 * Arrays
 * ====================================================================== */

/* Grow an array's storage (contents unchanged); refused when its owner is dying. */
zs_status zs_array_reserve(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_array *array,
                           uint32_t capacity) {
    if (array == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = zs_begin_store(rt, owner, type, ZS_TYPE_ARRAY);
    if (status == ZS_OK && !zs_entries_reserve(rt, array, type->entry_size, capacity))
        status = capacity > ZS_MAX_ENTRIES ? ZS_E_INVALID : ZS_E_NOMEM;
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_array_assign(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_array *array,
                          const void *elements, uint32_t count) {
    if (array == NULL || (elements == NULL && count > 0) || type->kind != ZS_TYPE_ARRAY)
        return ZS_E_INVALID;
    uint32_t element_kind = type->element->kind;
    if (element_kind != ZS_TYPE_PLAIN && element_kind != ZS_TYPE_OBJECT &&
        element_kind != ZS_TYPE_WEAK_OBJECT)
        return ZS_E_INVALID; /* elements that own memory go through zs_value_assign */
    ZS_LOCK(rt);
    zs_status status = zs_begin_store(rt, owner, type, ZS_TYPE_ARRAY);
    size_t entry = type->entry_size;
    if (status == ZS_OK && count > ZS_MAX_ENTRIES) status = ZS_E_INVALID;
    /* References first: a stale or dying target refuses the whole store. */
    for (uint32_t i = 0; status == ZS_OK && element_kind != ZS_TYPE_PLAIN && i < count; i++) {
        zs_ref ref;
        memcpy(&ref, (const char *)elements + i * entry, sizeof ref);
        if (ref != ZS_NULL_REF) zs_usable_item(rt, ref, &status);
    }
    if (status == ZS_OK && !zs_entries_reserve(rt, array, (uint32_t)entry, count))
        status = ZS_E_NOMEM;
    if (status == ZS_OK) {
        assert(elements == NULL || (const char *)elements + count * entry <= (char *)array->data ||
               (const char *)elements >= (char *)array->data + array->capacity * entry);
        if (count > 0) memcpy(array->data, elements, (size_t)count * entry);
        if (array->count > count)
            memset((char *)array->data + (size_t)count * entry, 0,
                   (size_t)(array->count - count) * entry);
        array->count = count;
        written(rt, owner, type, array, 0, count);
    }
    ZS_UNLOCK(rt);
    return status;
}

/* Whether an array type's elements own nothing (packed stores take them). */
static bool packed_elements(const zs_type *type) {
    uint32_t kind = type->element->kind;
    return kind == ZS_TYPE_PLAIN || kind == ZS_TYPE_OBJECT || kind == ZS_TYPE_WEAK_OBJECT;
}

/* Every reference among `count` packed elements usable now (ZS_OK), or the
   status the first one that is not refuses the store with. */
static zs_status packed_references(zs_runtime *rt, const zs_type *type, const void *elements,
                                   uint32_t count) {
    if (type->element->kind == ZS_TYPE_PLAIN) return ZS_OK;
    zs_status status = ZS_OK;
    for (uint32_t i = 0; status == ZS_OK && i < count; i++) {
        zs_ref ref;
        memcpy(&ref, (const char *)elements + (size_t)i * type->entry_size, sizeof ref);
        if (ref != ZS_NULL_REF) zs_usable_item(rt, ref, &status);
    }
    return status;
}

zs_status zs_array_insert_packed(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_array *array,
                                 uint32_t index, const void *elements, uint32_t count) {
    if (array == NULL || type == NULL || (elements == NULL && count > 0) ||
        type->kind != ZS_TYPE_ARRAY || !packed_elements(type))
        return ZS_E_INVALID; /* elements that own memory go through zs_array_insert */
    ZS_LOCK(rt);
    zs_status status = zs_begin_store(rt, owner, type, ZS_TYPE_ARRAY);
    if (status == ZS_OK && (index > array->count || count > ZS_MAX_ENTRIES - array->count))
        status = ZS_E_INVALID;
    /* References first: a stale or dying target refuses the whole insertion. */
    if (status == ZS_OK) status = packed_references(rt, type, elements, count);
    if (status == ZS_OK && !zs_entries_reserve(rt, array, type->entry_size, array->count + count))
        status = ZS_E_NOMEM;
    if (status == ZS_OK && count > 0) {
        size_t entry = type->entry_size;
        char *base = array->data;
        assert((const char *)elements + count * entry <= base ||
               (const char *)elements >= base + (size_t)array->capacity * entry);
        memmove(base + (index + count) * entry, base + index * entry,
                (size_t)(array->count - index) * entry);
        memcpy(base + index * entry, elements, (size_t)count * entry);
        array->count += count;
        written(rt, owner, type, array, index, count);
    }
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_array_insert(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_array *array,
                          uint32_t index, const void *value, uint32_t count) {
    if (array == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = zs_begin_store(rt, owner, type, ZS_TYPE_ARRAY);
    if (status == ZS_OK && (index > array->count || count > ZS_MAX_ENTRIES - array->count))
        status = ZS_E_INVALID;
    /* value may point into this array: copy it out before the storage can
       move (zs_entries_reserve) or the entries shift. */
    void *source = NULL;
    if (status == ZS_OK && count > 0 && value != NULL) {
        source = zs_alloc(rt, type->entry_size);
        if (source == NULL) status = ZS_E_NOMEM;
        else memcpy(source, value, type->element->size);
    }
    if (status == ZS_OK && !zs_entries_reserve(rt, array, type->entry_size, array->count + count))
        status = ZS_E_NOMEM;
    if (status == ZS_OK && count > 0) {
        size_t entry = type->entry_size;
        char *base = array->data;
        memmove(base + (index + count) * entry, base + index * entry,
                (size_t)(array->count - index) * entry);
        memset(base + index * entry, 0, (size_t)count * entry);
        array->count += count;
        for (uint32_t i = 0; source != NULL && i < count; i++) {
            zs_status copied = zs_value_assign(rt, ZS_NULL_REF, type->element,
                                               base + (index + i) * entry, source);
            if (copied != ZS_OK) {
                /* Unwind: drop what was inserted, leave the array as before. */
                for (uint32_t k = 0; k < count; k++)
                    zs_value_destroy(rt, type->element, base + (index + k) * entry);
                memmove(base + index * entry, base + (index + count) * entry,
                        (size_t)(array->count - index - count) * entry);
                array->count -= count;
                memset(base + array->count * entry, 0, (size_t)count * entry);
                status = copied;
                break;
            }
        }
        /* Each copy passed the barrier as zs_value_assign wrote it. */
        if (status == ZS_OK) zs_escape_owner(rt, owner, type);
    }
    zs_free(rt, source, source ? type->entry_size : 0);
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_array_remove(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_array *array,
                          uint32_t index, uint32_t count) {
    if (array == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = zs_begin_store(rt, owner, type, ZS_TYPE_ARRAY);
    if (status == ZS_OK && (index > array->count || count > array->count - index))
        status = ZS_E_INVALID;
    if (status == ZS_OK && count > 0) {
        size_t entry = type->entry_size;
        char *base = array->data;
        for (uint32_t i = 0; i < count; i++)
            zs_value_destroy(rt, type->element, base + (index + i) * entry);
        memmove(base + index * entry, base + (index + count) * entry,
                (size_t)(array->count - index - count) * entry);
        array->count -= count;
        memset(base + array->count * entry, 0, (size_t)count * entry);
    }
    ZS_UNLOCK(rt);
    return status;
}

/* ======================================================================
 * Sets and maps
 * ====================================================================== */

zs_status zs_hash_find(zs_runtime *rt, const zs_type *type, const zs_hash *hash, const void *key,
                       int64_t *out_index) {
    if (hash == NULL || key == NULL || out_index == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = ZS_OK;
    if (type == NULL || type->id >= rt->type_count || rt->types[type->id] != type ||
        (type->kind != ZS_TYPE_SET && type->kind != ZS_TYPE_MAP))
        status = ZS_E_INVALID;
    *out_index = -1;
    if (status == ZS_OK && hash->bucket_count > 0) {
        bool found;
        uint32_t slot = zs_hash_probe(rt, type, hash, key, &found);
        if (found) *out_index = hash->buckets[slot] - 1;
    }
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_hash_add(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_hash *hash,
                      const void *key, uint32_t *out_index, int *out_added) {
    if (hash == NULL || key == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = zs_begin_store(rt, owner, type, type ? type->kind : 0);
    if (status == ZS_OK && type->kind != ZS_TYPE_SET && type->kind != ZS_TYPE_MAP)
        status = ZS_E_INVALID;
    int added = 0;
    uint32_t index = 0;
    if (status == ZS_OK) {
        bool found = false;
        uint32_t slot = 0;
        if (hash->bucket_count > 0) slot = zs_hash_probe(rt, type, hash, key, &found);
        if (found) {
            index = hash->buckets[slot] - 1;
        } else if (hash->entries.count >= ZS_MAX_ENTRIES) {
            status = ZS_E_INVALID;
        } else {
            /* Copy the key first: it may point into this very container. */
            void *copy = zs_alloc(rt, type->entry_size);
            if (copy == NULL) status = ZS_E_NOMEM;
            else if (zs_value_assign(rt, ZS_NULL_REF, type->element, copy, key) != ZS_OK)
                status = ZS_E_NOMEM;
            /* The copy's references to destroyed objects are null
               (zs_value_assign sanitises them): it may equal an entry the
               key did not, which must not be added twice. */
            bool existing = false;
            if (status == ZS_OK && hash->bucket_count > 0 &&
                (type->element->flags & ZS_TYPE_HAS_REFS)) {
                uint32_t held = zs_hash_probe(rt, type, hash, copy, &existing);
                if (existing) index = hash->buckets[held] - 1;
            }
            if (status == ZS_OK && !existing &&
                !zs_entries_reserve(rt, &hash->entries, type->entry_size, hash->entries.count + 1))
                status = ZS_E_NOMEM;
            if (status == ZS_OK && !existing &&
                (hash->entries.count + 1) * 2 > hash->bucket_count &&
                !zs_hash_rehash(rt, type, hash, hash->bucket_count ? hash->bucket_count * 2 : 16))
                status = ZS_E_NOMEM;
            if (status == ZS_OK && !existing) {
                index = hash->entries.count;
                memcpy(zs_hash_entry(type, hash, index), copy, type->element->size);
                hash->entries.count++;
                bool again;
                hash->buckets[zs_hash_probe(rt, type, hash, copy, &again)] = index + 1;
                added = 1;
                /* The key passed the barrier as zs_value_assign copied it. */
                zs_escape_owner(rt, owner, type);
            } else if (copy != NULL) {
                zs_value_destroy(rt, type->element, copy);
            }
            zs_free(rt, copy, copy ? type->entry_size : 0);
        }
    }
    if (out_index != NULL) *out_index = index;
    if (out_added != NULL) *out_added = added;
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_hash_remove(zs_runtime *rt, zs_ref owner, const zs_type *type, zs_hash *hash,
                         const void *key, int *out_removed) {
    if (hash == NULL || key == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = zs_begin_store(rt, owner, type, type ? type->kind : 0);
    if (status == ZS_OK && type->kind != ZS_TYPE_SET && type->kind != ZS_TYPE_MAP)
        status = ZS_E_INVALID;
    int removed = 0;
    if (status == ZS_OK && hash->bucket_count > 0) {
        bool found;
        uint32_t slot = zs_hash_probe(rt, type, hash, key, &found);
        if (found) {
            uint32_t index = hash->buckets[slot] - 1, mask = hash->bucket_count - 1;
            /* Backward-shift deletion keeps every probe chain unbroken. */
            uint32_t hole = slot;
            for (uint32_t next = (hole + 1) & mask; hash->buckets[next] != 0;
                 next = (next + 1) & mask) {
                uint32_t home = (uint32_t)zs_value_hash(
                                    rt, type->element,
                                    zs_hash_entry(type, hash, hash->buckets[next] - 1)) &
                                mask;
                /* Move next into the hole unless its home lies in (hole, next]. */
                bool stays = hole <= next ? (home > hole && home <= next)
                                          : (home > hole || home <= next);
                if (!stays) {
                    hash->buckets[hole] = hash->buckets[next];
                    hole = next;
                }
            }
            hash->buckets[hole] = 0;
            char *victim = zs_hash_entry(type, hash, index);
            zs_value_destroy(rt, type->element, victim);
            if (type->value) zs_value_destroy(rt, type->value, victim + type->value_offset);
            uint32_t last = hash->entries.count - 1;
            if (index != last) {
                /* The last entry fills the hole; repoint its bucket. */
                bool moved_found;
                uint32_t moved = zs_hash_probe(rt, type, hash, zs_hash_entry(type, hash, last),
                                               &moved_found);
                assert(moved_found && hash->buckets[moved] == last + 1);
                memcpy(victim, zs_hash_entry(type, hash, last), type->entry_size);
                hash->buckets[moved] = index + 1;
            }
            memset(zs_hash_entry(type, hash, last), 0, type->entry_size);
            hash->entries.count--;
            removed = 1;
        }
    }
    if (out_removed != NULL) *out_removed = removed;
    ZS_UNLOCK(rt);
    return status;
}

/* ======================================================================
 * Optionals
 * ====================================================================== */

zs_status zs_optional_set(zs_runtime *rt, zs_ref owner, const zs_type *type, void *optional,
                          const void *value) {
    if (optional == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = zs_begin_store(rt, owner, type, ZS_TYPE_OPTIONAL);
    if (status == ZS_OK) {
        void *copy = zs_alloc(rt, type->size);
        if (copy == NULL) status = ZS_E_NOMEM;
        else if (value != NULL)
            status = zs_value_assign(rt, ZS_NULL_REF, type->element, copy, value);
        if (status == ZS_OK) {
            zs_value_destroy(rt, type, optional);
            memcpy(optional, copy, type->element->size);
            ((uint8_t *)optional)[type->value_offset] = 1;
            /* The element passed the barrier as zs_value_assign copied it. */
            zs_escape_owner(rt, owner, type);
        } else if (copy != NULL) {
            zs_value_destroy(rt, type->element, copy);
        }
        zs_free(rt, copy, copy ? type->size : 0);
    }
    ZS_UNLOCK(rt);
    return status;
}
