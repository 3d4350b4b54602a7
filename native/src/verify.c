/*
 * verify.c -- the heap check: walks every item, object, class and reference
 * and reports the first inconsistency it finds. Used after every collection
 * in the test suites; cost is O(heap + references).
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

typedef struct checker {
    zs_runtime *rt;
    char *message;
    size_t capacity;
    bool failed;
} checker;

/* Record the first failure only; later ones are usually consequences. */
static bool fail(checker *c, const char *format, ...) {
    if (!c->failed && c->message != NULL && c->capacity > 0) {
        va_list args;
        va_start(args, format);
        vsnprintf(c->message, c->capacity, format, args);
        va_end(args);
    }
    c->failed = true;
    return false;
}

/* A strong or immutable reference held by a surviving holder must name a
   live slot that is not dying. */
static bool check_strong(checker *c, const zs_item *holder, zs_ref ref, const char *what) {
    /* A dying holder may already point at freed slots mid-purge; while
       gathering, an unmarked holder is dying but maybe not flagged yet. */
    if (ref == ZS_NULL_REF) return true;
    if (holder != NULL && ((holder->flags & ZS_ITEM_DYING) ||
                           (c->rt->phase == ZS_GC_GATHERING && !zs_item_reachable(c->rt, holder) &&
                            !(holder->flags & ZS_ITEM_PERMANENT))))
        return true;
    zs_item *target = zs_item_of(c->rt, ref);
    uint32_t index = holder ? holder->object->index : UINT32_MAX;
    if (holder == NULL) {
        if (target == NULL || (target->flags & ZS_ITEM_DYING))
            return fail(c, "black value: %s reference to a destroyed object %u", what,
                        ZS_REF_INDEX(ref));
        return true;
    }
    if (target == NULL)
        return fail(c, "object %u: %s reference to stale handle %u/%u", index, what,
                    ZS_REF_INDEX(ref), ZS_REF_SERIAL(ref));
    if (!(holder->flags & ZS_ITEM_DYING) && (target->flags & ZS_ITEM_DYING))
        return fail(c, "object %u: surviving object references dying object %u", index,
                    ZS_REF_INDEX(ref));
    if ((holder->flags & ZS_ITEM_PERMANENT) && !(holder->flags & ZS_ITEM_ESCAPED) &&
        !(target->flags & ZS_ITEM_PERMANENT))
        return fail(c,
                    "object %u: permanent object references collectable object %u "
                    "without being scanned as a root",
                    index, ZS_REF_INDEX(ref));
    return true;
}

static bool check_value(checker *c, const zs_item *holder, const zs_type *type, const void *value,
                        bool refs);

/* Every reference and value member of a schema laid out at base. */
static bool check_schema(checker *c, const zs_item *holder, const zs_schema *schema,
                         const char *base, bool refs) {
    for (uint32_t i = 0; i < schema->count; i++) {
        const char *member = base + (schema->words[i] >> ZS_OP_SHIFT);
        uint32_t op = schema->words[i] & ZS_OP_MASK;
        if (op == ZS_OP_OBJECT && refs &&
            !check_strong(c, holder, *(const zs_ref *)member, "member"))
            return false;
        if (op == ZS_OP_VALUE && !check_value(c, holder, schema->types[i], member, refs))
            return false;
    }
    return true;
}

static bool check_entries(checker *c, const zs_item *holder, const zs_type *type,
                          const zs_array *entries, bool refs) {
    if (entries->count > entries->capacity || (entries->capacity > 0 && entries->data == NULL))
        return fail(c, "container: count %u > capacity %u", entries->count, entries->capacity);
    for (uint32_t i = 0; i < entries->count; i++) {
        const char *entry = (const char *)entries->data + (size_t)i * type->entry_size;
        if (!check_value(c, holder, type->element, entry, refs)) return false;
        if (type->value && !check_value(c, holder, type->value, entry + type->value_offset, refs))
            return false;
    }
    return true;
}

/* A value's own invariants (counts, buckets), then its references. */
static bool check_value(checker *c, const zs_item *holder, const zs_type *type, const void *value,
                        bool refs) {
    switch (type->kind) {
    case ZS_TYPE_OBJECT:
        return !refs || check_strong(c, holder, *(const zs_ref *)value, "value");
    case ZS_TYPE_STRING: {
        const zs_string *string = value;
        if (string->length > string->capacity || (string->capacity > 0 && string->data == NULL))
            return fail(c, "string: length %u > capacity %u", string->length, string->capacity);
        return true;
    }
    case ZS_TYPE_STRUCT:
        return check_schema(c, holder, &type->schema, value, refs);
    case ZS_TYPE_ARRAY:
        return check_entries(c, holder, type, value, refs);
    case ZS_TYPE_SET:
    case ZS_TYPE_MAP: {
        const zs_hash *hash = value;
        uint32_t used = 0;
        for (uint32_t b = 0; b < hash->bucket_count; b++) {
            if (hash->buckets[b] == 0) continue;
            used++;
            if (hash->buckets[b] > hash->entries.count)
                return fail(c, "hash: bucket names entry past the end");
        }
        if (used != hash->entries.count)
            return fail(c, "hash: %u buckets used for %u entries", used, hash->entries.count);
        return check_entries(c, holder, type, &hash->entries, refs);
    }
    case ZS_TYPE_OPTIONAL: {
        uint8_t set = ((const uint8_t *)value)[type->value_offset];
        if (set > 1) return fail(c, "optional: flag byte %u", set);
        return !set || check_value(c, holder, type->element, value, refs);
    }
    default:
        return true;
    }
}

static bool check_object(checker *c, uint32_t index, const zs_item *it) {
    zs_runtime *rt = c->rt;
    const zs_object *object = it->object;
    const zs_class *cls = object->cls;
    if (object->index != index)
        return fail(c, "object %u: header says index %u", index, object->index);
    if (it->serial == 0 || it->serial == ZS_SERIAL_RETIRE)
        return fail(c, "object %u: invalid serial %u", index, it->serial);
    if (cls == NULL || cls->head.id >= rt->class_count || rt->classes[cls->head.id] != cls ||
        cls->head.id != zs_class_id(cls))
        return fail(c, "object %u: class pointer is not a class of this runtime", index);
    if (object->name_index >= rt->names.count) return fail(c, "object %u: bad name index", index);
    bool dying = (it->flags & ZS_ITEM_DYING) != 0;
    bool mark_settled = !rt->collecting &&
                        (rt->phase == ZS_GC_IDLE || rt->phase == ZS_GC_PURGE_PENDING);
    if (mark_settled && !dying && !(it->flags & ZS_ITEM_PERMANENT) && !zs_item_reachable(rt, it))
        return fail(c, "object %u: live object without the current mark", index);
    if (item_is_root(it) && !(it->flags & ZS_ITEM_IN_ROOT_LIST))
        return fail(c, "object %u: root missing from the root list", index);
    if (dying && item_is_root(it)) return fail(c, "object %u: a root is dying", index);
    if ((it->flags & ZS_ITEM_LEAF) &&
        (cls->schema.strong_count > 0 || object->outer != ZS_NULL_REF))
        return fail(c, "object %u: leaf flag on an object with references", index);
    if (!check_strong(c, it, object->outer, "outer")) return false;
    return check_schema(c, it, &cls->schema, (const char *)object, true);
}

/* Every live cluster: its root and members name it back, no member dies
   without its root (members are reachable through the root's mark), and
   its links and mutable objects are live. Returns the number of clustered
   objects. */
static uint64_t check_clusters(checker *c) {
    zs_runtime *rt = c->rt;
    uint64_t clustered = 0, live = 0;
    for (uint32_t id = 0; id < rt->cluster_capacity && !c->failed; id++) {
        const zs_cluster *cl = &rt->clusters[id];
        if (cl->root == ZS_NO_CLUSTER_ROOT) continue;
        live++;
        if (cl->root >= rt->high_water || zs_item_at(rt, cl->root)->object == NULL) {
            fail(c, "cluster %u: root %u is not a live object", id, cl->root);
            break;
        }
        const zs_item *root = zs_item_at(rt, cl->root);
        if (root->cluster_index != (int32_t)id || !(root->flags & ZS_ITEM_CLUSTER_ROOT))
            fail(c, "cluster %u: root %u does not name its cluster", id, cl->root);
        for (uint32_t i = 0; i < cl->objects.count && !c->failed; i++) {
            uint32_t index = cl->objects.data[i];
            const zs_item *it = index < rt->high_water ? zs_item_at(rt, index) : NULL;
            if (it == NULL || it->object == NULL || it->cluster_index != (int32_t)id ||
                (it->flags & (ZS_ITEM_CLUSTER_ROOT | ZS_ITEM_GARBAGE)))
                fail(c, "cluster %u: member %u is not a live, non-garbage member", id, index);
            else if ((it->flags & ZS_ITEM_DYING) && !(root->flags & ZS_ITEM_DYING) &&
                     !(rt->phase == ZS_GC_GATHERING && !item_is_marked(rt, root)))
                fail(c, "cluster %u: member %u is dying, its root is not", id, index);
        }
        for (uint32_t i = 0; i < cl->mutable_objects.count && !c->failed; i++)
            if (zs_item_of(rt, cl->mutable_objects.data[i]) == NULL)
                fail(c, "cluster %u: mutable object %u is stale", id,
                     ZS_REF_INDEX(cl->mutable_objects.data[i]));
        for (uint32_t i = 0; i < cl->referenced_clusters.count && !c->failed; i++) {
            uint32_t other = cl->referenced_clusters.data[i];
            if (other >= rt->cluster_capacity || rt->clusters[other].root == ZS_NO_CLUSTER_ROOT)
                fail(c, "cluster %u: references freed cluster %u", id, other);
        }
        clustered += 1 + cl->objects.count;
    }
    if (!c->failed && live != rt->live_clusters)
        fail(c, "%llu live clusters, counter says %u", (unsigned long long)live, rt->live_clusters);
    return clustered;
}

zs_status zs_heap_verify(zs_runtime *rt, char *message, size_t message_capacity) {
    checker c = {rt, message, message_capacity, false};
    if (message != NULL && message_capacity > 0) message[0] = '\0';
    ZS_LOCK(rt);
    /* A check-mark failure is the root cause of what follows: say it first. */
    if (rt->check_failures > 0)
        fail(&c, "check-mark: %llu reachable objects were left unmarked",
             (unsigned long long)rt->check_failures);
    uint32_t live = 0, free_count = 0, retired = 0, in_root_list = 0, dying = 0, permanent = 0;
    uint64_t in_cluster = 0;
    for (uint32_t index = 0; index < rt->high_water && !c.failed; index++) {
        zs_item *it = zs_item_at(rt, index);
        if (it->object == NULL) {
            if (it->flags != 0 || it->strong_refs != 0)
                fail(&c, "free slot %u has flags %#x / refs %u", index, it->flags, it->strong_refs);
            if (it->serial == ZS_SERIAL_RETIRE) retired++;
            else free_count++;
            continue;
        }
        live++;
        in_cluster += it->cluster_index >= 0;
        in_root_list += (it->flags & ZS_ITEM_IN_ROOT_LIST) != 0;
        dying += (it->flags & ZS_ITEM_DYING) != 0;
        permanent += (it->flags & ZS_ITEM_PERMANENT) != 0;
        check_object(&c, index, it);
    }
    uint64_t clustered = c.failed ? 0 : check_clusters(&c);
    if (!c.failed && clustered != in_cluster)
        fail(&c, "%llu objects name a cluster, clusters hold %llu", (unsigned long long)in_cluster,
             (unsigned long long)clustered);
    if (!c.failed && live != rt->live_objects)
        fail(&c, "live count %u but %u objects found", rt->live_objects, live);
    if (!c.failed && free_count != rt->free_slots.count)
        fail(&c, "%u free slots but the free list holds %u", free_count, rt->free_slots.count);
    if (!c.failed && in_root_list != rt->root_list.count)
        fail(&c, "%u items flagged in the root list, list holds %u", in_root_list,
             rt->root_list.count);
    if (!c.failed && dying != rt->dying.count - rt->dying_cursor)
        fail(&c, "%u dying objects, %u pending purge", dying, rt->dying.count - rt->dying_cursor);
    if (!c.failed && permanent != rt->permanent_count)
        fail(&c, "%u permanent objects, counter says %u", permanent, rt->permanent_count);
    for (uint32_t i = 0; i < rt->free_slots.count && !c.failed; i++) {
        uint32_t index = rt->free_slots.data[i];
        if (index >= rt->high_water || zs_item_at(rt, index)->object != NULL)
            fail(&c, "free list entry %u names a used slot", index);
    }
    for (uint32_t i = 0; i < rt->root_list.count && !c.failed; i++) {
        uint32_t index = rt->root_list.data[i];
        if (index >= rt->high_water || zs_item_at(rt, index)->object == NULL)
            fail(&c, "root list entry %u names a free slot", index);
    }
    uint32_t named = 0;
    const char *fault = c.failed ? NULL : zs_name_index_fault(rt, &named);
    if (fault != NULL) fail(&c, "name index, object %u: %s", named, fault);
    for (uint32_t i = 0; i < rt->value_capacity && !c.failed; i++) {
        const zs_value_slot *slot = &rt->values[i];
        /* Non-root black values may hold stale references: structure only. */
        if (slot->value != NULL) check_value(&c, NULL, slot->type, slot->value, rt->black_roots);
    }
    for (uint32_t i = 0; i < rt->expiring.count && !c.failed; i++) {
        zs_item *it = zs_item_of(rt, rt->expiring.data[i]);
        if (it == NULL || !(it->flags & ZS_ITEM_DYING))
            fail(&c, "expiring entry %u is not a dying object", ZS_REF_INDEX(rt->expiring.data[i]));
    }
    ZS_UNLOCK(rt);
    return c.failed ? ZS_E_CORRUPT : ZS_OK;
}
