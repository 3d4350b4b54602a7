/*
 * objects.c -- objects and their slots: the object array (chunked items,
 * handles, slot recycling), the name index (zs_find_object), creating an
 * object and destroying one, resolving handles, and the objects the managed
 * side frees when their conjugate goes ("Sharing"). The hot path of making
 * and dropping an object (zs_object_new_conjugate, flattened) is all here,
 * in one translation unit.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ======================================================================
 * Object array
 * ====================================================================== */

/* The items of a chunk: ZS_OBJECTS_PER_CHUNK, fewer for the last one. */
static size_t chunk_bytes(const zs_runtime *rt, uint32_t chunk) {
    uint32_t first = chunk * ZS_OBJECTS_PER_CHUNK;
    uint32_t items = rt->max_objects - first < ZS_OBJECTS_PER_CHUNK ? rt->max_objects - first
                                                                    : ZS_OBJECTS_PER_CHUNK;
    return (size_t)items * sizeof(zs_item);
}

/* Reserve the object array: one zeroed block for max_objects items, so an
   item is one index away from the array's start (the marker computes every
   reference's item with no table lookup). calloc leaves a large block's
   pages untouched until used; the runtime counts a chunk of it as a block
   when its first slot is handed out (zs_slot_alloc), as when chunks were
   allocated one by one. */
zs_status zs_heap_init(zs_runtime *rt, uint32_t max_objects) {
    rt->max_objects = max_objects;
    rt->chunk_count = 0;
    rt->items = calloc(max_objects, sizeof(zs_item));
    return rt->items ? ZS_OK : ZS_E_NOMEM;
}

void zs_heap_release(zs_runtime *rt) {
    zs_free(rt, rt->name_buckets, (size_t)rt->name_bucket_count * sizeof(uint32_t));
    rt->name_buckets = NULL;
    rt->name_bucket_count = 0;
    for (uint32_t c = 0; c < rt->chunk_count; c++) zs_uncount_block(rt, chunk_bytes(rt, c));
    rt->chunk_count = 0;
    free(rt->items);
    rt->items = NULL;
    zs_u32_release(rt, &rt->free_slots);
}

/* Take a free slot (most recently freed first) or the next fresh one. */
zs_status zs_slot_alloc(zs_runtime *rt, uint32_t *out_index) {
    if (rt->free_slots.count > 0) {
        *out_index = rt->free_slots.data[--rt->free_slots.count];
        return ZS_OK;
    }
    if (rt->high_water >= rt->max_objects) return ZS_E_CAPACITY;
    uint32_t chunk = rt->high_water / ZS_OBJECTS_PER_CHUNK;
    if (chunk == rt->chunk_count) {
        if (!zs_count_block(rt, chunk_bytes(rt, chunk))) return ZS_E_NOMEM;
        rt->chunk_count++;
    }
    *out_index = rt->high_water++;
    zs_item *it = zs_item_at(rt, *out_index);
    it->serial = 1;
    it->cluster_index = -1;
    return ZS_OK;
}

/* Empty a slot and bump its serial so every old handle to it goes stale;
   false when the serial would wrap: the slot is retired (never reused). */
static bool slot_empty(zs_item *it) {
    it->object = NULL;
    it->flags = 0;
    it->strong_refs = 0;
    it->cluster_index = -1;
    if (it->serial + 1 >= ZS_SERIAL_RETIRE) {
        it->serial = ZS_SERIAL_RETIRE;
        return false;
    }
    it->serial++;
    return true;
}

/* Return a slot to the free list (emptied, its serial bumped). */
/* Put an emptied slot on the free list; out of memory for the list, retire
   it (never reused). */
static void slot_release(zs_runtime *rt, uint32_t index) {
    if (!zs_u32_push(rt, &rt->free_slots, index)) zs_item_at(rt, index)->serial = ZS_SERIAL_RETIRE;
}

void zs_slot_free(zs_runtime *rt, uint32_t index) {
    if (slot_empty(zs_item_at(rt, index))) slot_release(rt, index);
}

/* ======================================================================
 * Objects by outer and name (StaticFindObject)
 * ====================================================================== */

/* An object's bucket: the seed of its outer and name (internal.h) plus its
   number. An object with no outer named after its class (every automatic
   name) takes its class's seed, mixed once when the class was registered,
   which takes the mix's two multiplications off the path of creation and
   destruction. */
static uint32_t name_hash(zs_ref outer, uint32_t name_index, uint32_t name_number) {
    return zs_name_seed(outer ? ZS_REF_INDEX(outer) : UINT32_MAX, name_index) + name_number;
}

static uint32_t *bucket_of(zs_runtime *rt, const zs_object *object) {
    uint32_t hash = object->outer == ZS_NULL_REF && object->name_index == object->cls->name_index
                        ? object->cls->auto_name_seed + object->name_number
                        : name_hash(object->outer, object->name_index, object->name_number);
    assert(hash == name_hash(object->outer, object->name_index, object->name_number));
    return &rt->name_buckets[hash & (rt->name_bucket_count - 1)];
}

/* Relink every live object into fresh, empty buckets; DYING objects are
   left out when their unlinking was done in bulk (rt->dying_unhashed). */
static void name_index_relink(zs_runtime *rt) {
    memset(rt->name_buckets, 0, (size_t)rt->name_bucket_count * sizeof(uint32_t));
    for (uint32_t i = 0; i < rt->high_water; i++) {
        const zs_item *it = zs_item_at(rt, i);
        zs_object *other = it->object;
        if (other == NULL || (rt->dying_unhashed && (it->flags & ZS_ITEM_DYING))) continue;
        uint32_t *bucket = bucket_of(rt, other);
        other->hash_next = *bucket;
        *bucket = i + 1;
    }
}

/* Give the index `count` buckets and link every live object into them.
   False, with the index as it was, when out of memory. */
static bool name_index_resize(zs_runtime *rt, uint32_t count) {
    uint32_t *buckets = zs_alloc(rt, (size_t)count * sizeof(uint32_t));
    if (buckets == NULL) return false;
    zs_free(rt, rt->name_buckets, (size_t)rt->name_bucket_count * sizeof(uint32_t));
    rt->name_buckets = buckets;
    rt->name_bucket_count = count;
    name_index_relink(rt);
    return true;
}

/* Build the index at the first lookup by name (zs_find_object). Until
   then no creation or destruction touches it, which spares a program that
   never looks an object up by name a sixth of the native cost of making
   and dropping one (two bucket walks). Once built it is kept up to date.
   False, with no index still, when out of memory. */
static bool name_index_build(zs_runtime *rt) {
    assert(rt->name_bucket_count == 0);
    uint32_t count = 1024;
    while (count <= rt->live_objects && count < (UINT32_C(1) << 31)) count *= 2;
    return name_index_resize(rt, count);
}

/* Link a new object into its bucket, if the index is built, doubling the
   table when it is full (a full rehash, which links the new object too, is
   the rare, amortised case). False when out of memory: the object is then
   simply not findable by name. */
static bool name_index_add(zs_runtime *rt, zs_object *object) {
    if (rt->name_bucket_count == 0) return true; /* built, with it, at the first lookup */
    if (rt->live_objects >= rt->name_bucket_count)
        return name_index_resize(rt, rt->name_bucket_count * 2);
    uint32_t *bucket = bucket_of(rt, object);
    object->hash_next = *bucket;
    *bucket = object->index + 1;
    return true;
}

/* Unlink one object. Links are compared by index before any object on the
   chain is read, so an object at the head of its bucket costs one load. */
static void name_index_remove(zs_runtime *rt, zs_object *object) {
    if (rt->name_bucket_count == 0) return;
    uint32_t *link = bucket_of(rt, object);
    const uint32_t self = object->index + 1;
    while (*link != 0) {
        if (*link == self) {
            *link = object->hash_next;
            return;
        }
        link = &zs_item_at(rt, *link - 1)->object->hash_next;
    }
}

void zs_name_index_drop_dying(zs_runtime *rt) {
    if (rt->name_bucket_count == 0 || rt->dying_unhashed) return;
    rt->dying_unhashed = true;
    name_index_relink(rt);
}

void zs_name_index_clear(zs_runtime *rt) {
    if (rt->name_bucket_count > 0)
        memset(rt->name_buckets, 0, (size_t)rt->name_bucket_count * sizeof(uint32_t));
}

const char *zs_name_index_fault(zs_runtime *rt, uint32_t *out_index) {
    uint32_t links = 0;
    for (uint32_t b = 0; b < rt->name_bucket_count; b++) {
        for (uint32_t link = rt->name_buckets[b]; link != 0; links++) {
            *out_index = link - 1;
            if (links >= rt->live_objects)
                return "more links than live objects (a cycle, or twice)";
            if (link - 1 >= rt->high_water || zs_item_at(rt, link - 1)->object == NULL)
                return "a link names a free slot";
            const zs_object *object = zs_item_at(rt, link - 1)->object;
            if (bucket_of(rt, object) != &rt->name_buckets[b])
                return "an object is linked in another name's bucket";
            link = object->hash_next;
        }
    }
    return NULL;
}

/* Whether `it` is the live object of that outer (its item, or NULL for
   none) and name that a lookup may return: not dying (zs_item_dying: gathered,
   left unreachable by a cycle that is gathering, or destroyed by a host). */
static bool name_matches(const zs_runtime *rt, const zs_item *it, const zs_item *outer_item,
                         uint32_t name_index, uint32_t name_number) {
    const zs_object *object = it->object;
    return object->outer == (outer_item ? zs_item_ref(outer_item) : ZS_NULL_REF) &&
           object->name_index == name_index && object->name_number == name_number &&
           !zs_item_dying(rt, it);
}

zs_status zs_find_object(zs_runtime *rt, zs_ref outer, uint32_t name_index, uint32_t name_number,
                         zs_ref *out) {
    if (out == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    *out = ZS_NULL_REF;
    zs_item *outer_item = outer ? zs_item_of(rt, outer) : NULL;
    zs_status status = outer != ZS_NULL_REF && outer_item == NULL ? ZS_E_STALE : ZS_OK;
    if (rt->tearing_down) {
        /* FinishDestroy hooks of zs_gc_destroy_everything: nothing to find. */
    } else if (status == ZS_OK && (rt->name_bucket_count > 0 || name_index_build(rt))) {
        uint32_t link = rt->name_buckets[name_hash(outer, name_index, name_number) &
                                         (rt->name_bucket_count - 1)];
        while (link != 0) {
            zs_item *it = zs_item_at(rt, link - 1);
            if (name_matches(rt, it, outer_item, name_index, name_number)) {
                *out = zs_item_share(it);
                break;
            }
            link = it->object->hash_next;
        }
    } else if (status == ZS_OK) {
        /* No memory for the index: every object is looked at instead. */
        for (uint32_t i = 0; i < rt->high_water; i++) {
            zs_item *it = zs_item_at(rt, i);
            if (it->object != NULL && name_matches(rt, it, outer_item, name_index, name_number)) {
                *out = zs_item_share(it);
                break;
            }
        }
    }
    ZS_UNLOCK(rt);
    return status;
}

/* Put an item on the root candidate list once. */
bool zs_root_list_add(zs_runtime *rt, zs_item *it) {
    if (it->flags & ZS_ITEM_IN_ROOT_LIST) return true;
    if (!zs_u32_push(rt, &rt->root_list, it->object->index)) return false;
    it->flags |= ZS_ITEM_IN_ROOT_LIST;
    return true;
}

/* A destroyed object's emptied slot and its counted block, kept for the
   object made next under the same lock (zs_object_new_conjugate after
   dropped conjugates), which takes both without a trip through the free
   lists; `block` is NULL when none is kept. */
typedef struct zs_recycled {
    uint32_t index;
    uint32_t size; /* the block's bytes: an instance size */
    zs_object *block;
} zs_recycled;

/* Give what nobody took back to the free lists. */
static void recycled_release(zs_runtime *rt, zs_recycled *recycled) {
    if (recycled->block == NULL) return;
    zs_object_free(rt, recycled->block, recycled->size);
    slot_release(rt, recycled->index); /* emptied when the object was destroyed */
    recycled->block = NULL;
}

/* Destroy an object (after the destroy hook has run): free what its
   members own, then its memory and its slot; or, when `recycled` (may be
   NULL) wants a block of its size and the slot can be reused, keep both
   there, the slot emptied, for the object made next. */
static void object_destroy(zs_runtime *rt, zs_item *it, bool unhash, zs_recycled *recycled) {
    zs_object *object = it->object;
    const zs_class *cls = object->cls;
    zs_schema_destroy(rt, &cls->schema, (char *)object);
    if (unhash) name_index_remove(rt, object);
    uint32_t index = object->index;
    rt->live_objects--;
    if (recycled != NULL && recycled->block == NULL && recycled->size == cls->instance_size) {
        if (slot_empty(it)) {
            recycled->index = index;
            recycled->block = object;
        } else {
            zs_object_free(rt, object, cls->instance_size); /* retired: the block goes back alone */
        }
        return;
    }
    zs_object_free(rt, object, cls->instance_size);
    zs_slot_free(rt, index);
}

void zs_object_destroy(zs_runtime *rt, zs_item *it, bool unhash) {
    object_destroy(rt, it, unhash, NULL);
}

/* ======================================================================
 * Object creation and resolution
 * ====================================================================== */

/* A permanent holder that now points at a collectable object becomes a root,
   because permanent objects are otherwise never scanned. */
bool zs_note_escape(zs_runtime *rt, zs_item *holder, const zs_item *target) {
    if (!(holder->flags & ZS_ITEM_PERMANENT) || target == NULL ||
        (target->flags & ZS_ITEM_PERMANENT))
        return true;
    if (!zs_root_list_add(rt, holder)) return false;
    holder->flags |= ZS_ITEM_ESCAPED;
    holder->flags &= ~ZS_ITEM_LEAF;
    return true;
}

/* Whether `cls` is one of this runtime's classes and `init` fits its
   properties: what every creation checks first. */
static inline bool creation_valid(const zs_runtime *rt, const zs_class *cls, const char *init,
                                  uint32_t init_size) {
    return cls->head.id < rt->class_count && rt->classes[cls->head.id] == cls &&
           init_size <= cls->instance_size - sizeof(zs_object) && (init_size == 0 || init != NULL);
}

/* Copy a class's image of `size` bytes. Most are small: copied inline in
   two overlapping moves of the widest size that fits, instead of entering
   libc's memcpy, which took a sixth of the time of a renewal (renew_locked)
   of a 24-byte image. */
static inline void copy_image(char *to, const char *from, size_t size) {
    if (size > 32 && size <= 64) {
        memcpy(to, from, 32);
        memcpy(to + size - 32, from + size - 32, 32);
    } else if (size >= 16 && size <= 32) {
        memcpy(to, from, 16);
        memcpy(to + size - 16, from + size - 16, 16);
    } else if (size >= 8 && size < 16) {
        memcpy(to, from, 8);
        memcpy(to + size - 8, from + size - 8, 8);
    } else if (size > 0) {
        memcpy(to, from, size);
    }
}

/* Write a new object of `cls` into `object` (a fresh block, or a destroyed
   object's), every byte but hash_next (the caller's, when it links the
   object in the name index): its header, with its name (an automatic one,
   ZS_NAME_AUTO, is the class's name and next number), then `init` over the
   properties and zeros after it. Returns the flags its item starts with:
   born reachable (the current mark), and a leaf when it holds no strong
   reference (no outer, none in its class). */
static uint32_t object_fill(const zs_runtime *rt, const zs_class *cls, zs_object *object,
                            uint32_t index, zs_ref outer, uint32_t name_index, uint32_t name_number,
                            const char *init, uint32_t init_size) {
    ((zs_class *)cls)->next_name_number += name_index == ZS_NAME_AUTO;
    object->cls = cls;
    object->outer = outer;
    object->index = index;
    object->name_index = name_index == ZS_NAME_AUTO ? cls->name_index : name_index;
    object->name_number = name_index == ZS_NAME_AUTO ? cls->next_name_number : name_number;
    char *properties = (char *)(object + 1);
    copy_image(properties, init, init_size);
    const size_t rest = cls->instance_size - sizeof(zs_object) - init_size; /* 0: init is whole */
    if (rest) memset(properties + init_size, 0, rest);
    return rt->mark_parity |
           (cls->schema.strong_count == 0 && outer == ZS_NULL_REF ? ZS_ITEM_LEAF : 0);
}

/* ======================================================================
 * Class defaults: what every new object of a class starts with
 * ====================================================================== */

/* Drop a class's defaults (its values destroyed through their types). */
static void defaults_release(zs_runtime *rt, zs_class *cls) {
    for (uint32_t i = 0; i < cls->default_count; i++)
        zs_value_destroy(rt, cls->default_members[i].type,
                         cls->default_values + cls->default_members[i].offset);
    zs_free(rt, cls->default_values, cls->default_count ? cls->instance_size : 0);
    zs_free(rt, cls->default_members, cls->default_count * sizeof *cls->default_members);
    zs_free(rt, cls->default_image, cls->default_image_size);
    cls->default_values = NULL;
    cls->default_members = NULL;
    cls->default_image = NULL;
    cls->default_count = cls->default_image_size = 0;
}

/* Whether a default value fits: a type of this runtime holding no
   references, aligned inside the object past its header. (That it is the
   class's member there, which its objects' destruction frees, is the
   managed side's to keep, as an init image's plain data is.) */
static bool default_ok(const zs_runtime *rt, const zs_class *cls, const zs_type_member *member) {
    const zs_type *type = member->type;
    return zs_type_valid(rt, type) && !(type->flags & ZS_TYPE_HAS_REFS) &&
           member->offset >= sizeof(zs_object) && member->offset % zs_type_align(type) == 0 &&
           (uint64_t)member->offset + zs_type_size(type) <= cls->instance_size;
}

zs_status zs_class_set_defaults(zs_runtime *rt, const zs_class *cls, const char *image,
                                uint32_t image_size, const zs_type_member *members,
                                uint32_t member_count, const void *source) {
    if (cls == NULL || (image_size > 0 && image == NULL) ||
        (member_count > 0 && (members == NULL || source == NULL)))
        return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = ZS_E_INVALID;
    zs_class *mutable_cls = NULL;
    if (cls->head.id >= rt->class_count || rt->classes[cls->head.id] != cls ||
        image_size > cls->instance_size - sizeof(zs_object))
        goto done;
    mutable_cls = rt->classes[cls->head.id];
    for (uint32_t i = 0; i < member_count; i++)
        if (!default_ok(rt, cls, &members[i])) goto done;
    status = ZS_E_NOMEM;
    char *copied_image = image_size ? zs_alloc(rt, image_size) : NULL;
    zs_type_member *copied_members = member_count
                                         ? zs_alloc(rt, member_count * sizeof *copied_members)
                                         : NULL;
    char *values = member_count ? zs_alloc(rt, cls->instance_size) : NULL;
    uint32_t copied = 0;
    bool ok = (image_size == 0 || copied_image != NULL) &&
              (member_count == 0 || (copied_members != NULL && values != NULL));
    if (ok && values != NULL) memset(values, 0, cls->instance_size);
    for (; ok && copied < member_count; copied++)
        ok = zs_value_copy(rt, members[copied].type, values + members[copied].offset,
                           (const char *)source + members[copied].offset);
    if (!ok) {
        for (uint32_t i = 0; values != NULL && i < copied; i++)
            zs_value_destroy(rt, members[i].type, values + members[i].offset);
        zs_free(rt, values, values ? cls->instance_size : 0);
        zs_free(rt, copied_members, copied_members ? member_count * sizeof *copied_members : 0);
        zs_free(rt, copied_image, copied_image ? image_size : 0);
        goto done;
    }
    defaults_release(rt, mutable_cls);
    if (image_size) memcpy(copied_image, image, image_size);
    if (member_count) memcpy(copied_members, members, member_count * sizeof *copied_members);
    mutable_cls->default_image = copied_image;
    mutable_cls->default_image_size = image_size;
    mutable_cls->default_members = copied_members;
    mutable_cls->default_values = values;
    mutable_cls->default_count = member_count;
    status = ZS_OK;
done:
    ZS_UNLOCK(rt);
    return status;
}

/* Copy a class's default values into a new object's zeroed properties;
   false, with every value it copied destroyed, when out of memory. */
static bool class_copy_defaults(zs_runtime *rt, const zs_class *cls, zs_object *object) {
    char *properties = (char *)object;
    for (uint32_t i = 0; i < cls->default_count; i++) {
        const zs_type_member *member = &cls->default_members[i];
        if (zs_value_copy(rt, member->type, properties + member->offset,
                          cls->default_values + member->offset))
            continue;
        while (i-- > 0) /* the ones copied so far go, the object back to zeros */
            zs_value_destroy(rt, cls->default_members[i].type,
                             properties + cls->default_members[i].offset);
        return false;
    }
    return true;
}

/* Drop every class's defaults (zs_runtime_free, before the classes and the
   types their values need go). */
void zs_class_defaults_release(zs_runtime *rt) {
    for (uint32_t i = 0; i < rt->class_count; i++) defaults_release(rt, rt->classes[i]);
}

/* Allocate and link a new object (caller holds the lock): the body shared by
   zs_object_new and zs_object_new_conjugate. init_size bytes of init are
   copied over the properties, zeros after them (object_fill), or with none
   given the class's default image; then the class's default values
   (zs_class_set_defaults); conjugate marks it as having one. A recycled
   slot and block of the class's size are taken when given. */
static zs_status object_new_locked(zs_runtime *rt, const zs_class *cls, zs_ref outer,
                                   uint32_t name_index, uint32_t name_number, const char *init,
                                   uint32_t init_size, bool conjugate, zs_recycled *recycled,
                                   zs_ref *out_ref, zs_object **out_object) {
    zs_status status = ZS_E_INVALID;
    zs_item *outer_item = NULL;
    if (init_size == 0 && cls->default_image_size > 0) {
        init = cls->default_image;
        init_size = cls->default_image_size;
    }
    if (!creation_valid(rt, cls, init, init_size)) return status;
    if (name_index != ZS_NAME_AUTO && name_index >= rt->names.count) return status;
    if (rt->in_destroy_hook) return ZS_E_BUSY;
    if (outer != ZS_NULL_REF && (outer_item = zs_usable_item(rt, outer, &status)) == NULL)
        return status;
    uint32_t index;
    zs_object *object;
    if (recycled != NULL && recycled->block != NULL && recycled->size == cls->instance_size) {
        index = recycled->index;
        object = recycled->block;
        recycled->block = NULL;
    } else {
        if ((status = zs_slot_alloc(rt, &index)) != ZS_OK) return status;
        if ((object = zs_object_alloc(rt, cls->instance_size)) == NULL) {
            zs_slot_free(rt, index);
            return ZS_E_NOMEM;
        }
    }
    zs_item *it = zs_item_at(rt, index);
    /* outer validated: the live handle */
    it->flags = object_fill(rt, cls, object, index, outer_item ? outer : ZS_NULL_REF, name_index,
                            name_number, init, init_size);
    it->object = object;
    if (rt->disregard_open) {
        it->flags |= ZS_ITEM_PERMANENT;
        rt->permanent_count++;
    }
    rt->live_objects++;
    if (!name_index_add(rt, object)) object->hash_next = 0; /* not findable by name */
    zs_gc_barrier(rt, outer_item); /* the new object is born marked but never scanned */
    if (!zs_note_escape(rt, it, outer_item) ||
        (cls->default_count > 0 && !class_copy_defaults(rt, cls, object))) {
        zs_object_destroy(rt, it, true);
        rt->permanent_count -= rt->disregard_open;
        return ZS_E_NOMEM;
    }
    /* Made for a conjugate: its handle is the caller's alone. Made
       natively: the caller holds the handle, anywhere. */
    it->flags |= conjugate ? ZS_ITEM_HAS_CONJUGATE : ZS_ITEM_SHARED;
    *out_ref = ZS_MAKE_REF(index, it->serial);
    if (out_object != NULL) *out_object = object;
    return ZS_OK;
}

zs_status zs_object_new(zs_runtime *rt, const zs_class *cls, zs_ref outer, uint32_t name_index,
                        uint32_t name_number, zs_ref *out_ref, zs_object **out_object) {
    if (cls == NULL || out_ref == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = object_new_locked(rt, cls, outer, name_index, name_number, NULL, 0, false,
                                         NULL, out_ref, out_object);
    ZS_UNLOCK(rt);
    return status;
}

static uint32_t conjugates_dropped_locked(zs_runtime *rt, const zs_dropped_conjugate *dropped,
                                          uint32_t count, zs_recycled *recycled);
static bool destroy_now_allowed(const zs_runtime *rt, const zs_item *it);

/* `Cls()` in a loop that makes and drops temporaries, fused: the one
   conjugate dropped since the last creation was the sole holder of an
   object of `cls`, and the new object has an automatic name and no outer.
   The dropped object is destroyed as conjugates_dropped_locked and
   object_destroy would, and the new one made in its slot and block as
   object_new_locked would: the serial moves on (the old handle goes
   stale), the properties are destroyed and rewritten from `init`, and the
   object moves to its new name in the name index. The same steps without
   the free lists or the checks the general path makes for what cannot
   happen here. False, with nothing changed, when the general path must
   run. */
static bool renew_locked(zs_runtime *rt, const zs_class *cls, const char *init, uint32_t init_size,
                         const zs_dropped_conjugate *dropped, zs_ref *out_ref,
                         zs_object **out_object) {
    zs_item *it = zs_item_of(rt, dropped->ref);
    /* The poisoning stress switch wants the old block freed and poisoned,
       as conjugates_dropped_locked's caller does. */
    if (it == NULL || it->object->cls != cls || !dropped->sole_holder || cls->default_count > 0 ||
        !destroy_now_allowed(rt, it) || it->serial + 1 >= ZS_SERIAL_RETIRE || rt->poison_freed ||
        !creation_valid(rt, cls, init, init_size))
        return false;
    /* Objects made while the disregard window is open are permanent, and
       destroy_now_allowed refuses those: none is renewed as a collectable one. */
    assert(!rt->disregard_open);
    zs_object *object = it->object;
    /* The dropped object goes. */
    it->flags &= ~ZS_ITEM_HAS_CONJUGATE;
    zs_begin_destroy(rt, it);
    zs_call_destroy_hook(rt, it, ZS_FINISH_DESTROY);
    zs_schema_destroy(rt, &cls->schema, (char *)object);
    name_index_remove(rt, object);
    rt->freed_unshared++;
    /* The new one takes its slot and block, its conjugate's alone
       (live_objects is unchanged: one went, one came). */
    it->serial++;
    it->cluster_index = -1;
    it->flags = object_fill(rt, cls, object, object->index, ZS_NULL_REF, ZS_NAME_AUTO, 0, init,
                            init_size) |
                ZS_ITEM_HAS_CONJUGATE;
    if (!name_index_add(rt, object)) object->hash_next = 0; /* not findable by name */
    *out_ref = ZS_MAKE_REF(object->index, it->serial);
    *out_object = object;
    return true;
}

/* Flattened (object_new_locked, and the destruction of dropped objects,
   compiled into it): a loop making and dropping objects calls it per
   object, and the calls' argument passing and saved registers were about
   100 of its 435 instructions. */
__attribute__((flatten)) zs_ref zs_object_new_conjugate(zs_runtime *rt, const zs_class *cls,
                                                        zs_ref outer, uint32_t name_index,
                                                        uint32_t name_number, const char *init,
                                                        uint32_t init_size, void *out_object,
                                                        const zs_dropped_conjugate *dropped,
                                                        uint32_t dropped_count, const void *owner) {
    if (cls == NULL || out_object == NULL || (dropped == NULL && dropped_count > 0))
        return ZS_E_INVALID;
    ZS_LOCK(rt);
    if (dropped_count > 0 && !zs_expiry_owner(rt, owner)) {
        ZS_UNLOCK(rt);
        return ZS_E_BUSY;
    }
    zs_object *object = NULL;
    zs_ref ref = ZS_NULL_REF;
    zs_status status = ZS_OK;
    if (dropped_count != 1 || outer != ZS_NULL_REF || name_index != ZS_NAME_AUTO ||
        !renew_locked(rt, cls, init, init_size, dropped, &ref, &object)) {
        /* A dropped object of the same size leaves its slot and block, still
           in cache, to the new one. */
        zs_recycled recycled = {0, cls->instance_size, NULL};
        if (dropped_count > 0) /* the poisoning stress switch wants every freed block poisoned */
            conjugates_dropped_locked(rt, dropped, dropped_count,
                                      rt->poison_freed ? NULL : &recycled);
        status = object_new_locked(rt, cls, outer, name_index, name_number, init, init_size, true,
                                   &recycled, &ref, &object);
        recycled_release(rt, &recycled);
    }
    if (status == ZS_OK) memcpy(out_object, &object, sizeof object);
    ZS_UNLOCK(rt);
    assert(status != ZS_OK || ref >= ZS_FIRST_REF);
    return status == ZS_OK ? ref : (zs_ref)status;
}

zs_object *zs_resolve(zs_runtime *rt, zs_ref ref) {
    ZS_LOCK(rt);
    zs_item *it = zs_item_of(rt, ref);
    zs_object *object = it ? it->object : NULL;
    ZS_UNLOCK(rt);
    return object;
}

zs_status zs_resolve_for_conjugate(zs_runtime *rt, zs_ref ref, zs_object **out) {
    zs_status status = ZS_OK;
    if (out == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_item *it = rt->in_destroy_hook ? NULL : zs_usable_item(rt, ref, &status);
    if (rt->in_destroy_hook) status = ZS_E_BUSY;
    if (it != NULL) {
        it->flags |= ZS_ITEM_HAS_CONJUGATE;
        *out = it->object;
    }
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_forget_conjugate(zs_runtime *rt, zs_ref ref) {
    ZS_LOCK(rt);
    /* While an expiry handler is set, its managed side's proxies are known
       by the flag alone: nobody may clear it (the managed side removes its
       handler first). */
    zs_item *it = rt->expiry_handler == NULL ? zs_item_of(rt, ref) : NULL;
    if (it != NULL) it->flags &= ~ZS_ITEM_HAS_CONJUGATE;
    zs_status status = rt->expiry_handler != NULL ? ZS_E_BUSY : it ? ZS_OK : ZS_E_STALE;
    ZS_UNLOCK(rt);
    return status;
}

/* ======================================================================
 * Sharing: objects the managed side may free when their conjugate goes
 *
 * An object made by zs_object_new_conjugate starts with its handle known
 * to its conjugate alone. Nothing can reach it but through that conjugate
 * until the handle is handed out: by the managed side (which then tells
 * zs_conjugates_dropped so), or by the heap itself, whose every function
 * that gives out handles of objects the caller did not name sets
 * ZS_ITEM_SHARED (zs_item_share). An object neither side shared, whose
 * conjugate is gone, is unreachable for good, and is destroyed at once
 * instead of at the next collection (CPython's refcount freeing, for the
 * objects Python makes and drops: the common case of a temporary).
 * ====================================================================== */

/* Whether an object whose conjugate was its sole holder can be destroyed
   now: the heap never shared it, and nothing roots or clusters it. An
   incremental cycle may be pending: no list of the collector can name such
   an object (the mark stacks hold roots and referenced objects, the barrier
   queues stored ones, the dying list gathered ones, which are DYING), and a
   new object that takes the slot is born marked, so the cycle keeps it. */
static bool destroy_now_allowed(const zs_runtime *rt, const zs_item *it) {
    const uint32_t kept = ZS_ITEM_ROOT | ZS_ITEM_PERMANENT | ZS_ITEM_IN_ROOT_LIST | ZS_ITEM_DYING |
                          ZS_ITEM_BEGUN_DESTROY | ZS_ITEM_CLUSTER_ROOT | ZS_ITEM_ESCAPED |
                          ZS_ITEM_SHARED;
    return !(it->flags & kept) && it->strong_refs == 0 && it->cluster_index < 0 &&
           !rt->collecting && !rt->in_destroy_hook;
}

/* zs_conjugates_dropped with the lock held. The first destroyed object of
   recycled->size bytes leaves its emptied slot and block in `recycled`
   (may be NULL) instead of the free lists. */
static uint32_t conjugates_dropped_locked(zs_runtime *rt, const zs_dropped_conjugate *dropped,
                                          uint32_t count, zs_recycled *recycled) {
    uint32_t destroyed = 0;
    for (uint32_t i = 0; i < count; i++) {
        zs_item *it = zs_item_of(rt, dropped[i].ref);
        if (it == NULL || (it->flags & ZS_ITEM_DYING))
            continue; /* freed, or on the expiring list */
        it->flags &= ~ZS_ITEM_HAS_CONJUGATE;
        if (!dropped[i].sole_holder || !destroy_now_allowed(rt, it)) continue;
        zs_begin_destroy(rt, it);
        zs_call_destroy_hook(rt, it, ZS_FINISH_DESTROY);
        object_destroy(rt, it, true, recycled);
        destroyed++;
    }
    rt->freed_unshared += destroyed;
    return destroyed;
}

zs_status zs_conjugates_dropped(zs_runtime *rt, const void *owner,
                                const zs_dropped_conjugate *dropped, uint32_t count,
                                uint32_t *out_destroyed) {
    if (out_destroyed != NULL) *out_destroyed = 0;
    if (dropped == NULL && count > 0) return ZS_E_INVALID;
    ZS_LOCK(rt);
    bool allowed = zs_expiry_owner(rt, owner);
    uint32_t destroyed = allowed ? conjugates_dropped_locked(rt, dropped, count, NULL) : 0;
    ZS_UNLOCK(rt);
    if (out_destroyed != NULL) *out_destroyed = destroyed;
    return allowed ? ZS_OK : ZS_E_BUSY;
}

zs_ref zs_object_ref(zs_runtime *rt, const zs_object *object) {
    ZS_LOCK(rt);
    zs_ref ref = ZS_NULL_REF;
    if (object != NULL && object->index < rt->high_water) {
        zs_item *it = zs_item_at(rt, object->index);
        if (it->object == object) ref = zs_item_share(it);
    }
    ZS_UNLOCK(rt);
    return ref;
}

uint32_t zs_live_objects(zs_runtime *rt) {
    ZS_LOCK(rt);
    uint32_t count = rt->live_objects;
    ZS_UNLOCK(rt);
    return count;
}

/* Every live object's handle, in index order (leak reports name what a test
   left alive): a debugging aid, O(high-water mark). */
zs_status zs_live_handles(zs_runtime *rt, zs_ref *buffer, uint32_t capacity, uint32_t *out_count) {
    if (out_count == NULL || (buffer == NULL && capacity > 0)) return ZS_E_INVALID;
    ZS_LOCK(rt);
    uint32_t count = 0;
    for (uint32_t index = 0; index < rt->high_water; index++) {
        const zs_item *it = zs_item_at(rt, index);
        if (it->object == NULL) continue;
        if (count < capacity) buffer[count] = zs_item_share(zs_item_at(rt, index));
        count++;
    }
    ZS_UNLOCK(rt);
    *out_count = count;
    return ZS_OK;
}
