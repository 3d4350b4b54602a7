/*
 * names.c -- the runtime's name table: interned, case-insensitive (ASCII)
 * strings with an FName-style number suffix kept outside the string.
 */
#include "internal.h"

#include <string.h>

static unsigned char lower_ascii(unsigned char c) {
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + ('a' - 'A')) : c;
}

/* FNV-1a over the lower-cased bytes, so "Hero" and "HERO" share a bucket. */
static uint32_t hash_name(const char *text, size_t length) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < length; i++) {
        h ^= lower_ascii((unsigned char)text[i]);
        h *= 16777619u;
    }
    return h;
}

static bool same_name(const zs_name_entry *e, const char *text, size_t length) {
    if (e->length != length) return false;
    for (size_t i = 0; i < length; i++)
        if (lower_ascii((unsigned char)e->text[i]) != lower_ascii((unsigned char)text[i]))
            return false;
    return true;
}

/* Split "Base_12" into ("Base", 13); "Base_012" and "Base_" are not split. */
static size_t split_number(const char *text, size_t length, uint32_t *number) {
    size_t end = length;
    while (end > 0 && text[end - 1] >= '0' && text[end - 1] <= '9') end--;
    size_t digits = length - end;
    *number = 0;
    if (digits == 0 || digits > 9 || end < 2 || text[end - 1] != '_') return length;
    if (digits > 1 && text[end] == '0') return length;
    uint32_t value = 0;
    for (size_t i = end; i < length; i++) value = value * 10 + (uint32_t)(text[i] - '0');
    *number = value + 1;
    return end - 1;
}

/* Re-insert every entry into a doubled bucket array. */
static bool rehash(zs_runtime *rt, zs_name_table *t) {
    uint32_t count = t->bucket_count ? t->bucket_count * 2 : 64;
    uint32_t *buckets = zs_alloc(rt, (size_t)count * sizeof(uint32_t));
    if (buckets == NULL) return false;
    for (uint32_t i = 0; i < t->count; i++) {
        uint32_t slot = t->entries[i].hash & (count - 1);
        while (buckets[slot] != 0) slot = (slot + 1) & (count - 1);
        buckets[slot] = i + 1;
    }
    zs_free(rt, t->buckets, (size_t)t->bucket_count * sizeof(uint32_t));
    t->buckets = buckets;
    t->bucket_count = count;
    return true;
}

zs_status zs_name_intern_locked(zs_runtime *rt, const char *utf8, size_t length, bool split,
                                uint32_t *out_index, uint32_t *out_number) {
    zs_name_table *t = &rt->names;
    uint32_t number = 0;
    if (utf8 == NULL || length > 1024) return ZS_E_INVALID;
    if (memchr(utf8, '\0', length) != NULL) return ZS_E_INVALID;
    if (split) length = split_number(utf8, length, &number);
    if ((t->count + 1) * 2 > t->bucket_count && !rehash(rt, t)) return ZS_E_NOMEM;
    uint32_t hash = hash_name(utf8, length);
    uint32_t slot = hash & (t->bucket_count - 1);
    for (; t->buckets[slot] != 0; slot = (slot + 1) & (t->bucket_count - 1)) {
        zs_name_entry *e = &t->entries[t->buckets[slot] - 1];
        if (e->hash == hash && same_name(e, utf8, length)) {
            *out_index = t->buckets[slot] - 1;
            *out_number = number;
            return ZS_OK;
        }
    }
    if (t->count == t->capacity) {
        uint32_t capacity = t->capacity ? t->capacity * 2 : 64;
        zs_name_entry *grown = zs_realloc(rt, t->entries, t->capacity * sizeof *grown,
                                          capacity * sizeof *grown);
        if (grown == NULL) return ZS_E_NOMEM;
        t->entries = grown;
        t->capacity = capacity;
    }
    char *copy = zs_alloc(rt, length + 1);
    if (copy == NULL) return ZS_E_NOMEM;
    memcpy(copy, utf8, length);
    t->entries[t->count] = (zs_name_entry){copy, (uint32_t)length, hash};
    t->buckets[slot] = ++t->count;
    *out_index = t->count - 1;
    *out_number = number;
    return ZS_OK;
}

zs_status zs_name_intern(zs_runtime *rt, const char *utf8, size_t length, uint32_t *out_index,
                         uint32_t *out_number) {
    if (out_index == NULL || out_number == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = zs_name_intern_locked(rt, utf8, length, true, out_index, out_number);
    ZS_UNLOCK(rt);
    return status;
}

const char *zs_name_base(zs_runtime *rt, uint32_t index) {
    ZS_LOCK(rt);
    const char *text = index < rt->names.count ? rt->names.entries[index].text : NULL;
    ZS_UNLOCK(rt);
    return text;
}

uint32_t zs_name_count(zs_runtime *rt) {
    ZS_LOCK(rt);
    uint32_t count = rt->names.count;
    ZS_UNLOCK(rt);
    return count;
}

void zs_names_release(zs_runtime *rt) {
    zs_name_table *t = &rt->names;
    for (uint32_t i = 0; i < t->count; i++)
        zs_free(rt, t->entries[i].text, t->entries[i].length + 1);
    zs_free(rt, t->entries, t->capacity * sizeof *t->entries);
    zs_free(rt, t->buckets, (size_t)t->bucket_count * sizeof(uint32_t));
    memset(t, 0, sizeof *t);
}
