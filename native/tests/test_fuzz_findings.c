/*
 * test_fuzz_findings.c -- regression tests for the bugs the C API fuzzer
 * (native/fuzz/fuzz_api.c, tools/cfuzz.sh) found. Each test fails (or, for
 * a memory error, crashes or makes the sanitizer build of tools/sanitize.sh
 * report) without its fix; the input that found it is in
 * native/fuzz/corpus/ under the name given with each test.
 */
#include "test_support.h"
#include "zsharp_debug.h"
#include "zsharp_managed.h"

/* zs_array_insert with `value` pointing into the very array (allowed: "value
   may point into this array") read it after growing the storage, from the
   block realloc had just freed. The array is full and followed by another
   live block, so the growth must move it.
   Input: native/fuzz/corpus/finding-array-insert-from-itself. */
static void test_array_insert_from_itself(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    const zs_type *plain = NULL, *array_type = NULL, *string = NULL, *strings = NULL;
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_PLAIN, 8, 8, &plain));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_ARRAY, plain, NULL, &array_type));
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_STRING, 1, 1, &string));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_ARRAY, string, NULL, &strings));
    zs_ref handle = ZS_NULL_REF, blocker = ZS_NULL_REF, text_handle = ZS_NULL_REF;
    zs_array *array = NULL, *texts = NULL;
    void *ignored = NULL;
    CHECK_OK(t, zs_value_new(rt, array_type, &handle, (void **)&array));
    CHECK_OK(t, zs_value_new(rt, strings, &text_handle, (void **)&texts));
    if (array == NULL || texts == NULL) {
        fixture_close(&fx);
        return;
    }
    const uint64_t values[4] = {0x1111111111111111ull, 0x2222222222222222ull, 0x3333333333333333ull,
                                0x4444444444444444ull};
    for (uint32_t i = 0; i < 4; i++)
        CHECK_OK(t, zs_array_insert(rt, ZS_NULL_REF, array_type, array, i, &values[i], 1));
    CHECK_EQ(t, array->capacity, 4);
    CHECK_OK(t, zs_value_new(rt, plain, &blocker, &ignored)); /* no room to grow in place */
    /* Insert copies of the first element in front of it: the array grows. */
    CHECK_OK(t, zs_array_insert(rt, ZS_NULL_REF, array_type, array, 0, array->data, 3));
    CHECK_EQ(t, array->count, 7);
    const uint64_t *data = array->data;
    for (uint32_t i = 0; i < 3 && array->count == 7; i++) CHECK_EQ(t, data[i], values[0]);
    for (uint32_t i = 0; i < 4 && array->count == 7; i++) CHECK_EQ(t, data[3 + i], values[i]);

    /* The same with strings (their contents are copied through the element). */
    for (uint32_t i = 0; i < 4; i++) {
        CHECK_OK(t, zs_array_insert(rt, ZS_NULL_REF, strings, texts, i, NULL, 1));
        CHECK_OK(t, zs_string_assign(rt, ZS_NULL_REF, string, (zs_string *)texts->data + i,
                                     &"abcd"[i], 4 - i));
    }
    CHECK_OK(t,
             zs_array_insert(rt, ZS_NULL_REF, strings, texts, 4, (zs_string *)texts->data + 1, 2));
    CHECK_EQ(t, texts->count, 6);
    for (uint32_t i = 4; i < 6 && texts->count == 6; i++) {
        const zs_string *copy = (const zs_string *)texts->data + i;
        CHECK(t, copy->length == 3 && memcmp(copy->data, "bcd", 3) == 0);
    }
    VERIFY(t, rt);
    fixture_close(&fx);
}

typedef struct deferred_free {
    uint32_t hook_calls;
    zs_status hook_status; /* what zs_call_function said to the hook */
} deferred_free;

static zs_status closing_handler(void *user, zs_runtime *rt, zs_ref object, const char *function,
                                 void *params) {
    (void)user;
    (void)object;
    (void)function;
    (void)params;
    zs_runtime_free(rt); /* deferred: this call is still running */
    return ZS_OK;
}

static void calling_destroy_hook(void *user, zs_runtime *rt, zs_object *object,
                                 zs_destroy_phase phase) {
    (void)phase;
    deferred_free *d = user;
    if (d->hook_calls++ == 0)
        d->hook_status = zs_call_function(rt, zs_object_ref(rt, object), "tick", NULL);
}

/* A destroy hook calling into the managed side during a deferred free (the
   managed function closed its runtime, the last call to return frees it)
   must be refused with ZS_E_BUSY. zs_call_function counted the refused call
   in and out, and counting it out was the last leave_call of the deferred
   free: the runtime was freed again from inside its own teardown (a use
   after free of every object and of the runtime).
   Input: native/fuzz/corpus/finding-call-in-hook-during-deferred-free. */
static void test_destroy_hook_call_during_deferred_free(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_ref a = MAKE(t, fx.rt, fx.node, ZS_NULL_REF);
    ROOT(t, fx.rt, a);
    MAKE(t, fx.rt, fx.node, a);
    deferred_free d = {0, ZS_OK};
    zs_set_destroy_hook(fx.rt, calling_destroy_hook, &d);
    zs_set_call_handler(fx.rt, closing_handler, NULL);
    CHECK_OK(t, zs_call_function(fx.rt, a, "tick", NULL));
    /* fx.rt is freed now: both objects got both phases, once. */
    CHECK_EQ(t, d.hook_calls, 4);
    CHECK_STATUS(t, d.hook_status, ZS_E_BUSY);
}

/* A set of references: the entries, each found at its own index. */
static void check_set_entries(runner *t, zs_runtime *rt, const zs_type *set, const zs_hash *hash) {
    for (uint32_t i = 0; i < hash->entries.count; i++) {
        int64_t found = -2;
        CHECK_OK(t, zs_hash_find(rt, set, hash, (const zs_ref *)hash->entries.data + i, &found));
        CHECK_EQ(t, found, i);
    }
}

/* zs_hash_add looked the key up, then inserted a copy whose references to
   destroyed objects zs_value_assign had nulled: adding a stale handle to a
   set that held null added null a second time and re-pointed the first
   null's bucket at the new entry (the first became unreachable; the heap
   check counted one bucket for two entries).
   Input: native/fuzz/corpus/finding-hash-add-stale-key. */
static void test_hash_add_stale_key(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, ZS_RUNTIME_BLACK_NOT_ROOTS)) return;
    zs_runtime *rt = fx.rt;
    const zs_type *object = NULL, *set = NULL;
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &object));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_SET, object, NULL, &set));
    zs_ref handle = ZS_NULL_REF, null = ZS_NULL_REF;
    zs_hash *hash = NULL;
    CHECK_OK(t, zs_value_new(rt, set, &handle, (void **)&hash));
    if (hash == NULL) {
        fixture_close(&fx);
        return;
    }
    zs_ref gone = MAKE(t, rt, fx.node, ZS_NULL_REF);
    COLLECT(t, rt); /* gone is stale now */
    CHECK(t, !alive(rt, gone));
    uint32_t index = 99;
    int added = -1;
    CHECK_OK(t, zs_hash_add(rt, ZS_NULL_REF, set, hash, &null, &index, &added));
    CHECK(t, index == 0 && added == 1);
    CHECK_OK(t, zs_hash_add(rt, ZS_NULL_REF, set, hash, &gone, &index, &added));
    CHECK(t, index == 0 && added == 0); /* it is null, which the set holds */
    CHECK_EQ(t, hash->entries.count, 1);
    check_set_entries(t, rt, set, hash);
    /* Full entries (8 of 8) and buckets as loaded as they may be (8 of 16:
       at most half used, and not grown before that). Finding the stale key
       there needs its copy and nothing more: no entry reserved, no rehash
       (each would need 64 bytes more than the copies allowed). */
    for (uint32_t i = 1; i < 8; i++) {
        zs_ref live = MAKE(t, rt, fx.node, ZS_NULL_REF);
        CHECK_OK(t, zs_hash_add(rt, ZS_NULL_REF, set, hash, &live, &index, &added));
        CHECK(t, index == i && added == 1);
    }
    CHECK(t, hash->entries.capacity == 8 && hash->bucket_count == 16);
    zs_memory_stats memory;
    zs_runtime_memory(rt, &memory);
    /* The key's copy, and zs_value_assign's scratch copy of it. */
    const uint64_t copies = zs_type_entry_size(set) + sizeof(zs_ref);
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, memory.live_bytes + copies));
    CHECK_OK(t, zs_hash_add(rt, ZS_NULL_REF, set, hash, &gone, &index, &added));
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
    CHECK(t, index == 0 && added == 0);
    CHECK(t, hash->entries.capacity == 8 && hash->bucket_count == 16);
    zs_ref ninth = MAKE(t, rt, fx.node, ZS_NULL_REF);
    /* A new key with no memory for its copy: refused, nothing changed. */
    zs_runtime_memory(rt, &memory);
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, memory.live_bytes));
    CHECK_STATUS(t, zs_hash_add(rt, ZS_NULL_REF, set, hash, &ninth, &index, &added), ZS_E_NOMEM);
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
    CHECK(t, added == 0 && hash->entries.count == 8);
    CHECK_OK(t, zs_hash_add(rt, ZS_NULL_REF, set, hash, &ninth, &index, &added));
    CHECK(t, index == 8 && added == 1 && hash->bucket_count == 32);
    check_set_entries(t, rt, set, hash);
    VERIFY(t, rt);
    fixture_close(&fx);
}

/* The same family, found while fixing the one above: copying a set whose
   elements went stale (a black value that is not a root keeps references
   to objects that die) nulled the copy's elements in place and kept their
   buckets. The copy held null twice, under the stale handles' buckets: null
   was not found in it, and growing it tripped rehash's assert (or indexed
   an entry twice). Sanitising now re-indexes such a set or map and drops
   the duplicates. */
static void test_copy_of_set_with_stale_elements(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, ZS_RUNTIME_BLACK_NOT_ROOTS)) return;
    zs_runtime *rt = fx.rt;
    const zs_type *object = NULL, *set = NULL, *map = NULL;
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &object));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_SET, object, NULL, &set));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_MAP, object, object, &map));
    zs_ref source_handle = ZS_NULL_REF, copy_handle = ZS_NULL_REF, map_handle = ZS_NULL_REF,
           map_copy_handle = ZS_NULL_REF;
    zs_hash *source = NULL, *copy = NULL, *source_map = NULL, *map_copy = NULL;
    CHECK_OK(t, zs_value_new(rt, set, &source_handle, (void **)&source));
    CHECK_OK(t, zs_value_new(rt, set, &copy_handle, (void **)&copy));
    CHECK_OK(t, zs_value_new(rt, map, &map_handle, (void **)&source_map));
    CHECK_OK(t, zs_value_new(rt, map, &map_copy_handle, (void **)&map_copy));
    if (source == NULL || copy == NULL || source_map == NULL || map_copy == NULL) {
        fixture_close(&fx);
        return;
    }
    zs_ref kept = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, kept);
    for (int i = 0; i < 3; i++) {
        zs_ref doomed = MAKE(t, rt, fx.node, ZS_NULL_REF);
        uint32_t index = 0;
        CHECK_OK(t, zs_hash_add(rt, ZS_NULL_REF, set, source, &doomed, &index, NULL));
        CHECK_OK(t, zs_hash_add(rt, ZS_NULL_REF, map, source_map, &doomed, &index, NULL));
        CHECK_OK(t, zs_value_store_ref(rt, ZS_NULL_REF, object,
                                       (zs_ref *)((char *)source_map->entries.data +
                                                  (size_t)index * zs_type_entry_size(map) +
                                                  zs_type_value_offset(map)),
                                       kept));
    }
    uint32_t index = 0;
    CHECK_OK(t, zs_hash_add(rt, ZS_NULL_REF, set, source, &kept, &index, NULL));
    COLLECT(t, rt); /* the three die: the black values are not roots */
    CHECK_OK(t, zs_value_assign(rt, ZS_NULL_REF, set, copy, source));
    CHECK_EQ(t, copy->entries.count, 2); /* kept and null */
    check_set_entries(t, rt, set, copy);
    /* Growing it rehashes every entry. */
    for (int i = 0; i < 12; i++) {
        zs_ref more = MAKE(t, rt, fx.node, ZS_NULL_REF);
        ROOT(t, rt, more);
        CHECK_OK(t, zs_hash_add(rt, ZS_NULL_REF, set, copy, &more, &index, NULL));
    }
    check_set_entries(t, rt, set, copy);
    CHECK_OK(t, zs_value_assign(rt, ZS_NULL_REF, map, map_copy, source_map));
    CHECK_EQ(t, map_copy->entries.count, 1); /* one null key, its value kept */
    int64_t found = -2;
    zs_ref null = ZS_NULL_REF;
    CHECK_OK(t, zs_hash_find(rt, map, map_copy, &null, &found));
    CHECK_EQ(t, found, 0);
    if (map_copy->entries.count == 1) CHECK(t, ((zs_ref *)map_copy->entries.data)[1] == kept);
    VERIFY(t, rt);
    fixture_close(&fx);
}

/* A value store into a permanent object (allocated in the disregard-for-GC
   window) makes it a root (it is never scanned otherwise), after the
   store; when its root-list entry could not be allocated the store still
   happened, and the permanent object held a reference nothing scanned: its
   target could be collected under it. The entry is now made first, and
   the store refused (ZS_E_NOMEM, nothing written) when it cannot be.
   Input: native/fuzz/corpus/finding-permanent-owner-escape-out-of-memory. */
static void test_permanent_owner_value_store_out_of_memory(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, ZS_RUNTIME_DISREGARD_WINDOW)) return;
    zs_runtime *rt = fx.rt;
    const zs_type *object = NULL;
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &object));
    zs_ref permanent = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_close_disregard_for_gc(rt));
    zs_ref target = MAKE(t, rt, fx.node, ZS_NULL_REF);
    node *holder = node_of(rt, permanent);
    if (holder == NULL) {
        fixture_close(&fx);
        return;
    }
    zs_memory_stats memory;
    zs_runtime_memory(rt, &memory);
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT,
                             memory.live_bytes)); /* the root list cannot grow */
    CHECK_STATUS(t, zs_value_store_ref(rt, permanent, object, &holder->ref[0], target), ZS_E_NOMEM);
    CHECK(t, holder->ref[0] == ZS_NULL_REF);
    VERIFY(t, rt);
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
    CHECK_OK(t, zs_value_store_ref(rt, permanent, object, &holder->ref[0], target));
    COLLECT(t, rt);
    CHECK(t, alive(rt, target) && holder->ref[0] == target);
    fixture_close(&fx);
}

typedef struct teardown_queries {
    uint32_t finishes;
    uint32_t expiring_taken; /* handles zs_gc_take_expiring_ex gave the hook */
    uint32_t clustered;      /* objects the hook found in a cluster */
    uint32_t info_failures;
} teardown_queries;

/* Read-only queries from a destroy hook (allowed: only mutations are
   refused there). */
static void querying_hook(void *user, zs_runtime *rt, zs_object *object, zs_destroy_phase phase) {
    teardown_queries *q = user;
    if (phase != ZS_FINISH_DESTROY) return;
    q->finishes++;
    zs_ref buffer[8];
    uint64_t names[8];
    uint32_t count = 0;
    if (zs_gc_take_expiring_ex(rt, buffer, names, NULL, 8, &count) == ZS_OK)
        q->expiring_taken += count;
    int32_t cluster = -1;
    zs_cluster_info info;
    if (zs_object_cluster(rt, zs_object_ref(rt, object), &cluster) == ZS_OK && cluster >= 0) {
        q->clustered++;
        if (zs_cluster_get_info(rt, cluster, &info) != ZS_OK) q->info_failures++;
    }
}

/* zs_runtime_free frees the objects in slot order, and the expiring list
   and the cluster records still named the ones already freed: a destroy
   hook asking for the expiring list (zs_gc_take_expiring_ex) failed an
   assert, or read a freed slot's object through NULL; one asking for a
   cluster's info (zs_cluster_get_info) whose root was freed read through
   NULL. Both are dropped before the first hook now (every object dies,
   the managed side expired its proxies before closing). */
static void test_destroy_hook_queries_during_teardown(runner *t) {
    zs_runtime_options options;
    zs_runtime_default_options(&options);
    options.min_cluster_size = 1;
    fixture fx;
    if (!fixture_open_options(t, &fx, &options)) return;
    zs_runtime *rt = fx.rt;
    zs_class_desc desc = {
        "Clustered",  NULL, sizeof(node), ZS_CLASS_CLUSTER_ROOT | ZS_CLASS_IN_CLUSTER,
        node_members, 6,    NULL,         0,
        NULL,         0};
    const zs_class *clustered = NULL;
    CHECK_OK(t, zs_class_register(rt, &desc, &clustered));
    if (clustered == NULL) {
        fixture_close(&fx);
        return;
    }
    zs_ref root = MAKE(t, rt, clustered, ZS_NULL_REF);
    for (int i = 0; i < 3; i++) PUSH(t, rt, root, MAKE(t, rt, clustered, ZS_NULL_REF));
    ROOT(t, rt, root);
    uint32_t size = 0;
    CHECK_OK(t, zs_create_cluster(rt, root, &size));
    CHECK_EQ(t, size, 4);
    /* Two unreachable objects with conjugates: gathered, not taken. */
    for (int i = 0; i < 2; i++) {
        node *made = NULL;
        CHECK(t, zs_object_new_conjugate(rt, fx.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, NULL, 0, &made,
                                         NULL, 0, NULL) >= ZS_FIRST_REF);
    }
    CHECK_OK(t, zs_gc_mark_and_gather(rt));
    CHECK_EQ(t, zs_gc_expiring_count(rt), 2);
    teardown_queries q = {0, 0, 0, 0};
    zs_set_destroy_hook(rt, querying_hook, &q);
    fixture_close(&fx);
    CHECK_EQ(t, q.finishes, 6);
    CHECK_EQ(t, q.expiring_taken, 0);
    CHECK_EQ(t, q.clustered, 0);
    CHECK_EQ(t, q.info_failures, 0);
}

/* zs_string_assign from part of the string itself (a host taking a
   substring in place) copied overlapping memory with memcpy: undefined
   behaviour, reported by the sanitizer build (tools/sanitize.sh runs this
   file under ASan: memcpy-param-overlap); glibc's memcpy happens to get it
   right, so the plain build only checks the result.
   Inputs: native/fuzz/corpus/finding-string-assign-from-itself-*. */
static void test_string_assign_from_itself(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    const zs_type *narrow = NULL, *wide = NULL;
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_STRING, 1, 1, &narrow));
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_STRING, 2, 2, &wide));
    zs_ref handle = ZS_NULL_REF, wide_handle = ZS_NULL_REF;
    zs_string *text = NULL, *wide_text = NULL;
    CHECK_OK(t, zs_value_new(rt, narrow, &handle, (void **)&text));
    CHECK_OK(t, zs_value_new(rt, wide, &wide_handle, (void **)&wide_text));
    if (text == NULL || wide_text == NULL) {
        fixture_close(&fx);
        return;
    }
    CHECK_OK(t, zs_string_assign(rt, ZS_NULL_REF, narrow, text, "abcdefgh", 8));
    CHECK_OK(t, zs_string_assign(rt, ZS_NULL_REF, narrow, text, (const char *)text->data + 2, 5));
    CHECK(t, text->length == 5 && memcmp(text->data, "cdefg", 5) == 0);
    const uint16_t units[6] = {'u', 'v', 'w', 'x', 'y', 'z'};
    CHECK_OK(t, zs_string_assign(rt, ZS_NULL_REF, wide, wide_text, units, 6));
    CHECK_OK(t, zs_string_assign(rt, ZS_NULL_REF, wide, wide_text,
                                 (const uint16_t *)wide_text->data + 1, 4));
    CHECK(t, wide_text->length == 4 && memcmp(wide_text->data, units + 1, 8) == 0);
    VERIFY(t, rt);
    fixture_close(&fx);
}

const test_case fuzz_finding_tests[] = {
    TEST(test_array_insert_from_itself),
    TEST(test_destroy_hook_call_during_deferred_free),
    TEST(test_hash_add_stale_key),
    TEST(test_copy_of_set_with_stale_elements),
    TEST(test_permanent_owner_value_store_out_of_memory),
    TEST(test_destroy_hook_queries_during_teardown),
    TEST(test_string_assign_from_itself),
};
const size_t fuzz_finding_test_count = sizeof fuzz_finding_tests / sizeof fuzz_finding_tests[0];
