/*
 * test_heap.c -- C-level tests of the zsharp native heap, through the public
 * headers only (zsharp.h, zsharp_managed.h, zsharp_debug.h).
 *
 * The runner, CHECK* macros and the Node/Leaf fixture live in test_support.h
 * (shared with test_gc_advanced.c). The last line printed is
 * "N passed, N failed" and the exit status is non-zero if any test failed.
 * Every collection (and purge) is followed by zs_heap_verify, checked to
 * return ZS_OK.
 *
 * Usage: test_heap [--threaded] [--list] [substring...]
 *   runs the tests whose name contains one of the substrings (every table);
 *   --threaded only those tagged THREADED_TEST (they start threads: the
 *   ThreadSanitizer smoke run); --list prints the names instead. A
 *   substring that matches no test, or an empty selection, exits with 2.
 */
#include "test_support.h"
#include "zsharp_debug.h"
#include "zsharp_managed.h"

/* ======================================================================
 * Runtime
 * ====================================================================== */

/* A runtime can be created with default or explicit options and freed; bad options are refused. */
static void test_runtime_create_free(runner *t) {
    zs_runtime_options options;
    zs_runtime_default_options(&options);
    CHECK_EQ(t, options.max_objects, ZS_DEFAULT_MAX_OBJECTS);
    CHECK_EQ(t, options.flags, 0);

    zs_runtime *rt = NULL;
    CHECK_OK(t, zs_runtime_new(NULL, &rt));
    CHECK(t, rt != NULL);
    if (rt != NULL) {
        CHECK_EQ(t, zs_live_objects(rt), 0);
        COLLECT(t, rt);
        zs_runtime_free(rt);
    }
    rt = NULL;
    CHECK_OK(t, zs_runtime_new(&options, &rt));
    zs_runtime_free(rt);

    options.max_objects = ZS_MAX_OBJECTS_LIMIT + 1;
    rt = (zs_runtime *)&options; /* must be reset to NULL on failure */
    CHECK_STATUS(t, zs_runtime_new(&options, &rt), ZS_E_INVALID);
    CHECK(t, rt == NULL);
    CHECK_STATUS(t, zs_runtime_new(NULL, NULL), ZS_E_INVALID);
    zs_runtime_free(NULL); /* a no-op */

    for (int s = ZS_OK; s <= ZS_E_CALL_FAILED; s++) {
        const char *message = zs_status_message((zs_status)s);
        CHECK(t, message != NULL && message[0] != '\0');
    }
    CHECK(t, strcmp(zs_status_message((zs_status)(ZS_E_CALL_FAILED + 1)), "unknown status") == 0);
}

/* Two runtimes never see each other's objects, classes, names or collections. */
static void test_runtimes_isolated(runner *t) {
    fixture a, b;
    if (!fixture_open(t, &a, 0, 0)) return;
    if (!fixture_open(t, &b, 0, 0)) {
        fixture_close(&a);
        return;
    }
    zs_ref in_a = MAKE(t, a.rt, a.node, ZS_NULL_REF);
    ROOT(t, a.rt, in_a);
    zs_object *object_a = zs_resolve(a.rt, in_a);
    CHECK(t, object_a != NULL);
    CHECK(t, zs_resolve(b.rt, in_a) == NULL); /* b has no objects yet */

    zs_ref in_b = MAKE(t, b.rt, b.node, ZS_NULL_REF);
    zs_object *seen_in_b = zs_resolve(b.rt, in_a);
    CHECK(t, seen_in_b == NULL || seen_in_b != object_a); /* at most an unrelated object */
    CHECK(t, seen_in_b == NULL || seen_in_b == zs_resolve(b.rt, in_b));

    /* Classes of a are foreign to b. */
    zs_ref out = ZS_NULL_REF;
    CHECK_STATUS(t, zs_object_new(b.rt, a.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, &out, NULL),
                 ZS_E_INVALID);
    const zs_class *child = NULL;
    zs_class_desc desc = {"Child", a.node, sizeof(node) + 8, 0, NULL, 0, NULL, 0, NULL, 0};
    CHECK_STATUS(t, zs_class_register(b.rt, &desc, &child), ZS_E_INVALID);
    CHECK(t, child == NULL);
    CHECK_OK(t, zs_class_register(a.rt, &desc, &child)); /* fine in its own runtime */

    /* Names are per runtime. */
    uint32_t names_b = zs_name_count(b.rt), index = 0, number = 0;
    CHECK_OK(t, zs_name_intern(a.rt, "OnlyInA", 7, &index, &number));
    CHECK_EQ(t, zs_name_count(b.rt), names_b);

    /* A collection in b leaves a alone: b's unrooted object dies, a's lives. */
    zs_ref unrooted_a = MAKE(t, a.rt, a.node, ZS_NULL_REF);
    COLLECT(t, b.rt);
    CHECK(t, !alive(b.rt, in_b));
    CHECK(t, zs_resolve(a.rt, in_a) == object_a);
    CHECK(t, alive(a.rt, unrooted_a));
    CHECK_EQ(t, zs_live_objects(a.rt), 2);
    CHECK_EQ(t, zs_live_objects(b.rt), 0);
    COLLECT(t, a.rt);
    CHECK_EQ(t, zs_live_objects(a.rt), 1);
    fixture_close(&a);
    fixture_close(&b);
}

/* zs_live_handles lists exactly the live objects, reports the full count when the buffer is short, and refuses bad arguments. */
static void test_live_handles(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    uint32_t count = 99;
    CHECK_OK(t, zs_live_handles(fx.rt, NULL, 0, &count));
    CHECK_EQ(t, count, 0);
    zs_ref kept = MAKE(t, fx.rt, fx.node, ZS_NULL_REF);
    ROOT(t, fx.rt, kept);
    zs_ref dropped = MAKE(t, fx.rt, fx.node, ZS_NULL_REF);
    zs_ref inner = MAKE(t, fx.rt, fx.node, kept); /* keeps its outer alive, not itself */
    zs_ref buffer[4] = {0, 0, 0, 0};
    CHECK_OK(t, zs_live_handles(fx.rt, buffer, 4, &count));
    CHECK_EQ(t, count, 3);
    CHECK(t, buffer[0] == kept && buffer[1] == dropped && buffer[2] == inner);
    CHECK_OK(t, zs_live_handles(fx.rt, buffer, 1, &count)); /* short buffer: full count */
    CHECK_EQ(t, count, 3);
    COLLECT(t, fx.rt);
    buffer[0] = ZS_NULL_REF;
    CHECK_OK(t, zs_live_handles(fx.rt, buffer, 4, &count));
    CHECK_EQ(t, count, 1);
    CHECK(t, buffer[0] == kept);
    CHECK_STATUS(t, zs_live_handles(fx.rt, NULL, 1, &count), ZS_E_INVALID);
    CHECK_STATUS(t, zs_live_handles(fx.rt, buffer, 4, NULL), ZS_E_INVALID);
    fixture_close(&fx);
}

/* ======================================================================
 * Classes
 * ====================================================================== */

/* A child's schema is its parent's plus its own members, and inherited members work on instances. */
static void test_class_schema_flattening(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    /* Base: strong at 32, weak at 40 (48 bytes). Child: array at 48, strong at 64 (72 bytes). */
    const zs_member base_members[] = {{ZS_MEMBER_OBJECT, 32, NULL},
                                      {ZS_MEMBER_WEAK_OBJECT, 40, NULL}};
    const zs_member child_members[] = {{ZS_MEMBER_OBJECT_ARRAY, 48, NULL},
                                       {ZS_MEMBER_OBJECT, 64, NULL}};
    const zs_class *base = NULL, *child = NULL, *grandchild = NULL, *unrelated = NULL;
    zs_class_desc base_desc = {"Base", NULL, 48, 0, base_members, 2, NULL, 0, NULL, 0};
    zs_class_desc child_desc = {"Child", NULL, 72, 0, child_members, 2, NULL, 0, NULL, 0};
    zs_class_desc grandchild_desc = {"Grandchild", NULL, 80, 0, NULL, 0, NULL, 0, NULL, 0};
    const zs_member unrelated_members[] = {{ZS_MEMBER_WEAK_OBJECT, 32, NULL}};
    zs_class_desc unrelated_desc = {"Unrelated", NULL, 40, 0,    unrelated_members,
                                    1,           NULL, 0,  NULL, 0};
    CHECK_OK(t, zs_class_register(rt, &base_desc, &base));
    child_desc.parent = base;
    CHECK_OK(t, zs_class_register(rt, &child_desc, &child));
    grandchild_desc.parent = child;
    CHECK_OK(t, zs_class_register(rt, &grandchild_desc, &grandchild));
    CHECK_OK(t, zs_class_register(rt, &unrelated_desc, &unrelated));
    if (base == NULL || child == NULL || grandchild == NULL || unrelated == NULL) {
        fixture_close(&fx);
        return;
    }
    CHECK_EQ(t, zs_class_schema_words(base), 2);
    CHECK_EQ(t, zs_class_schema_words(child), 4);
    CHECK_EQ(t, zs_class_schema_words(grandchild), 4);
    CHECK_EQ(t, zs_class_schema_words(unrelated), 1);
    CHECK_EQ(t, zs_class_schema_words(fx.node), 6);
    CHECK(t, zs_class_parent(child) == base);
    CHECK(t, zs_class_parent(base) == NULL);
    CHECK_EQ(t, zs_class_instance_size(grandchild), 80);
    CHECK(t, strcmp(zs_class_name(grandchild), "Grandchild") == 0);
    CHECK_EQ(t, zs_class_id(child), zs_class_id(base) + 1);

    CHECK(t, zs_class_is_a(base, base));
    CHECK(t, zs_class_is_a(child, base));
    CHECK(t, zs_class_is_a(grandchild, base));
    CHECK(t, zs_class_is_a(grandchild, child));
    CHECK(t, !zs_class_is_a(base, child));
    CHECK(t, !zs_class_is_a(unrelated, base));
    CHECK(t, !zs_class_is_a(base, unrelated));

    /* An instance of Grandchild accepts stores at every inherited member, by kind. */
    zs_ref holder = MAKE(t, rt, grandchild, ZS_NULL_REF);
    zs_ref a = MAKE(t, rt, fx.leaf, ZS_NULL_REF), b = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    zs_ref c = MAKE(t, rt, fx.leaf, ZS_NULL_REF), w = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    ROOT(t, rt, holder);
    CHECK_OK(t, zs_store_ref(rt, holder, 32, a));                        /* Base strong */
    CHECK_OK(t, zs_store_ref(rt, holder, 40, w));                        /* Base weak */
    CHECK_OK(t, zs_ref_array_push(rt, holder, 48, b));                   /* Child array */
    CHECK_OK(t, zs_store_ref(rt, holder, 64, c));                        /* Child strong */
    CHECK_STATUS(t, zs_store_ref(rt, holder, 48, a), ZS_E_INVALID);      /* array, not a ref */
    CHECK_STATUS(t, zs_ref_array_push(rt, holder, 32, a), ZS_E_INVALID); /* ref, not an array */
    CHECK_STATUS(t, zs_store_ref(rt, holder, 72, a), ZS_E_INVALID);      /* plain data */
    CHECK_STATUS(t, zs_store_ref(rt, holder, 16, a), ZS_E_INVALID);      /* header */
    COLLECT(t, rt);
    CHECK(t, alive(rt, a) && alive(rt, b) && alive(rt, c));
    CHECK(t, !alive(rt, w)); /* the weak member does not keep it */
    fixture_close(&fx);
}

/* Registering types and classes under every injected allocation limit keeps the
   block and byte counts exact: zs_runtime_free asserts both end at zero. Found
   by the fuzzer: a schema could grow one of its two arrays and not the other,
   and a half-built struct type freed its name by the length of an empty one. */
static void test_registration_failures_keep_memory_counts(runner *t) {
    enum { WORDS = 20 }; /* more than 16 schema words: the arrays grow twice */
    unsigned failures = 0, successes = 0;
    for (uint64_t extra = 0; extra < 4096; extra += 4) {
        zs_runtime_options options;
        zs_runtime_default_options(&options);
        zs_runtime *rt = NULL;
        CHECK_OK(t, zs_runtime_new(&options, &rt));
        if (rt == NULL) return;
        zs_memory_stats start;
        zs_runtime_memory(rt, &start);
        CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, start.live_bytes + extra));
        const zs_type *object = NULL, *record = NULL;
        zs_type_member fields[WORDS];
        zs_member members[WORDS];
        bool ok = zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &object) == ZS_OK;
        for (uint32_t i = 0; ok && i < WORDS; i++) fields[i] = (zs_type_member){object, 8 * i};
        ok = ok && zs_type_struct(rt, "Record", 8 * WORDS, 8, fields, WORDS, &record) == ZS_OK;
        const zs_class *base = NULL, *child = NULL;
        for (uint32_t i = 0; ok && i < WORDS; i++)
            members[i] = (zs_member){ZS_MEMBER_OBJECT, (uint32_t)sizeof(zs_object) + 8 * i, NULL};
        zs_class_desc base_desc = {
            "Base", NULL, (uint32_t)sizeof(zs_object) + 8 * WORDS, 0, members, WORDS, NULL, 0,
            NULL,   0};
        ok = ok && zs_class_register(rt, &base_desc, &base) == ZS_OK;
        zs_member child_member = {ZS_MEMBER_VALUE, base_desc.instance_size, record};
        zs_class_desc child_desc = {
            "Child", base, base_desc.instance_size + 8 * WORDS, 0, &child_member, 1, NULL, 0,
            NULL,    0};
        ok = ok && zs_class_register(rt, &child_desc, &child) == ZS_OK;
        if (ok) {
            CHECK_EQ(t, zs_class_schema_words(child), 2 * WORDS);
            successes++;
        } else {
            failures++;
        }
        zs_runtime_free(rt);
    }
    CHECK(t, failures > 0 && successes > 0); /* the limits covered both outcomes */
}

/* Bad members and sizes are refused with ZS_E_INVALID and consume no class id. */
static void test_class_invalid_members(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    const zs_member base_members[] = {{ZS_MEMBER_OBJECT, 32, NULL},
                                      {ZS_MEMBER_WEAK_OBJECT, 40, NULL}};
    zs_class_desc base_desc = {"Base", NULL, 48, 0, base_members, 2, NULL, 0, NULL, 0};
    const zs_class *base = NULL;
    CHECK_OK(t, zs_class_register(rt, &base_desc, &base));
    if (base == NULL) {
        fixture_close(&fx);
        return;
    }

    typedef struct bad_case {
        const char *why;
        bool derived; /* parent = Base */
        uint32_t size;
        zs_member members[2];
        uint32_t count;
    } bad_case;
    const bad_case cases[] = {
        {"unaligned", false, 48, {{ZS_MEMBER_OBJECT, 36, NULL}}, 1},
        {"unaligned array", false, 64, {{ZS_MEMBER_OBJECT_ARRAY, 44, NULL}}, 1},
        {"same offset",
         false,
         48,
         {{ZS_MEMBER_OBJECT, 32, NULL}, {ZS_MEMBER_WEAK_OBJECT, 32, NULL}},
         2},
        {"overlaps an array",
         false,
         64,
         {{ZS_MEMBER_OBJECT_ARRAY, 32, NULL}, {ZS_MEMBER_OBJECT, 40, NULL}},
         2},
        {"array overlapped",
         false,
         64,
         {{ZS_MEMBER_OBJECT, 40, NULL}, {ZS_MEMBER_OBJECT_ARRAY, 32, NULL}},
         2},
        {"inside the header", false, 48, {{ZS_MEMBER_OBJECT, 16, NULL}}, 1},
        {"header tail", false, 48, {{ZS_MEMBER_OBJECT, 24, NULL}}, 1},
        {"at offset 0", false, 48, {{ZS_MEMBER_OBJECT, 0, NULL}}, 1},
        {"beyond instance_size", false, 40, {{ZS_MEMBER_OBJECT, 40, NULL}}, 1},
        {"array past the end", false, 48, {{ZS_MEMBER_OBJECT_ARRAY, 40, NULL}}, 1},
        {"inside the parent", true, 64, {{ZS_MEMBER_OBJECT, 40, NULL}}, 1},
        {"unknown kind", false, 48, {{7, 32, NULL}}, 1},
        {"kind 0", false, 48, {{0, 32, NULL}}, 1},
        {"size below the header", false, 16, {{0, 0, NULL}}, 0},
        {"size below the parent", true, 40, {{0, 0, NULL}}, 0},
    };
    uint32_t classes_before = zs_class_id(fx.leaf);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        zs_class_desc desc = {
            c->why, c->derived ? base : NULL, c->size, 0, c->members, c->count, NULL, 0, NULL, 0};
        const zs_class *cls = NULL;
        zs_status status = zs_class_register(rt, &desc, &cls);
        CHECK_STATUS(t, status, ZS_E_INVALID);
        if (status != ZS_E_INVALID) fprintf(stderr, "  case: %s\n", c->why);
        CHECK(t, cls == NULL);
    }
    const zs_class *cls = NULL;
    zs_class_desc no_name = {NULL, NULL, 48, 0, NULL, 0, NULL, 0, NULL, 0};
    CHECK_STATUS(t, zs_class_register(rt, &no_name, &cls), ZS_E_INVALID);
    zs_class_desc null_members = {"NullMembers", NULL, 48, 0, NULL, 1, NULL, 0, NULL, 0};
    CHECK_STATUS(t, zs_class_register(rt, &null_members, &cls), ZS_E_INVALID);
    CHECK_STATUS(t, zs_class_register(rt, NULL, &cls), ZS_E_INVALID);
    CHECK_STATUS(t, zs_class_register(rt, &base_desc, NULL), ZS_E_INVALID);

    /* Boundary cases that are valid: last word of the instance, right after the parent. */
    const zs_member edge_members[] = {{ZS_MEMBER_OBJECT, 40, NULL}};
    zs_class_desc edge_desc = {"Edge", NULL, 48, 0, edge_members, 1, NULL, 0, NULL, 0};
    CHECK_OK(t, zs_class_register(rt, &edge_desc, &cls));
    const zs_member derived_members[] = {{ZS_MEMBER_OBJECT_ARRAY, 48, NULL}};
    zs_class_desc derived_desc = {"Derived", base, 64, 0, derived_members, 1, NULL, 0, NULL, 0};
    CHECK_OK(t, zs_class_register(rt, &derived_desc, &cls));
    /* Fixture classes are ids 0 and 1, Base 2, Edge 3, Derived 4: no id was burned. */
    CHECK_EQ(t, zs_class_id(base), classes_before + 1);
    CHECK(t, cls != NULL && zs_class_id(cls) == classes_before + 3);
    fixture_close(&fx);
}

/* ======================================================================
 * Objects and names
 * ====================================================================== */

/* New objects are zeroed past the header, whose fields name the slot, class and outer. */
static void test_object_header_and_zeroing(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    zs_ref outer = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, outer);
    static const unsigned char zeros[sizeof(node)];

    zs_ref ref = ZS_NULL_REF;
    zs_object *object = NULL;
    CHECK_OK(t, zs_object_new(rt, fx.node, outer, ZS_NAME_AUTO, 0, &ref, &object));
    if (object == NULL) {
        fixture_close(&fx);
        return;
    }
    ROOT(t, rt, ref);
    CHECK(t, memcmp((const char *)object + sizeof(zs_object), zeros,
                    sizeof(node) - sizeof(zs_object)) == 0);
    CHECK(t, object->cls == fx.node);
    CHECK(t, object->cls == fx.node);
    CHECK_EQ(t, object->index, ZS_REF_INDEX(ref));
    CHECK_EQ(t, object->outer, outer);
    CHECK(t, ZS_REF_SERIAL(ref) >= 1);
    CHECK(t, zs_resolve(rt, ref) == object);
    CHECK_EQ(t, zs_object_ref(rt, object), ref);
    CHECK_EQ(t, zs_object_ref(rt, NULL), ZS_NULL_REF);
    CHECK_EQ(t, node_of(rt, outer)->header.outer, ZS_NULL_REF);
    /* Another runtime's objects, whose indices reach this one's high-water
       mark and beyond: no handle (their index is never used to read an
       item past the table). */
    fixture other;
    if (fixture_open(t, &other, 0, 0)) {
        for (int i = 0; i < 6; i++) {
            zs_ref foreign = MAKE(t, other.rt, other.node, ZS_NULL_REF);
            zs_object *seen = zs_resolve(other.rt, foreign);
            if (seen != NULL && seen->index >= 2) CHECK_EQ(t, zs_object_ref(rt, seen), ZS_NULL_REF);
        }
        fixture_close(&other);
    }

    /* Dirty an object, free it, and the next object in its slot is zeroed again. */
    zs_ref dirty = MAKE(t, rt, fx.node, ZS_NULL_REF);
    node *n = node_of(rt, dirty);
    if (n != NULL) {
        n->payload = UINT64_MAX;
        LINK(t, rt, dirty, 0, outer);
        PUSH(t, rt, dirty, outer);
    }
    COLLECT(t, rt);
    CHECK(t, !alive(rt, dirty));
    zs_ref reused = ZS_NULL_REF;
    CHECK_OK(t, zs_object_new(rt, fx.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, &reused, &object));
    CHECK_EQ(t, ZS_REF_INDEX(reused), ZS_REF_INDEX(dirty));
    CHECK(t, object != NULL && memcmp((const char *)object + sizeof(zs_object), zeros,
                                      sizeof(node) - sizeof(zs_object)) == 0);

    /* Bad arguments. */
    zs_ref out = ZS_NULL_REF;
    CHECK_STATUS(t, zs_object_new(rt, NULL, ZS_NULL_REF, ZS_NAME_AUTO, 0, &out, NULL),
                 ZS_E_INVALID);
    CHECK_STATUS(t, zs_object_new(rt, fx.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, NULL, NULL),
                 ZS_E_INVALID);
    CHECK_STATUS(t, zs_object_new(rt, fx.node, ZS_NULL_REF, 1000000, 0, &out, NULL), ZS_E_INVALID);
    CHECK_STATUS(t, zs_object_new(rt, fx.node, dirty, ZS_NAME_AUTO, 0, &out, NULL), ZS_E_STALE);
    CHECK_EQ(t, zs_live_objects(rt), 3);
    fixture_close(&fx);
}

/* Name interning is case-insensitive, keeps the first spelling and splits "_<digits>" like FName. */
static void test_name_interning(runner *t) {
    zs_runtime *rt = NULL;
    CHECK_OK(t, zs_runtime_new(NULL, &rt));
    if (rt == NULL) return;
    uint32_t hero = 0, number = 0, index = 0;
    CHECK_OK(t, zs_name_intern(rt, "Hero_12", 7, &hero, &number));
    CHECK_EQ(t, number, 13);
    CHECK(t, strcmp(zs_name_base(rt, hero), "Hero") == 0);

    CHECK_OK(t, zs_name_intern(rt, "hERO", 4, &index, &number));
    CHECK_EQ(t, index, hero);
    CHECK_EQ(t, number, 0);
    CHECK(t, strcmp(zs_name_base(rt, index), "Hero") == 0); /* first spelling wins */

    CHECK_OK(t, zs_name_intern(rt, "HERO_0", 6, &index, &number));
    CHECK_EQ(t, index, hero);
    CHECK_EQ(t, number, 1);

    /* Not split: leading zero, no digits, nothing before the underscore, too many digits. */
    const char *unsplit[] = {"Hero_012", "Hero_", "_5", "Hero_1234567890", "Hero12"};
    for (size_t i = 0; i < sizeof unsplit / sizeof unsplit[0]; i++) {
        CHECK_OK(t, zs_name_intern(rt, unsplit[i], strlen(unsplit[i]), &index, &number));
        CHECK(t, index != hero);
        CHECK_EQ(t, number, 0);
        const char *base = zs_name_base(rt, index);
        CHECK(t, base != NULL && strcmp(base, unsplit[i]) == 0);
    }
    /* The length argument bounds the string. */
    CHECK_OK(t, zs_name_intern(rt, "Hero_7xyz", 6, &index, &number));
    CHECK_EQ(t, index, hero);
    CHECK_EQ(t, number, 8);

    uint32_t count = zs_name_count(rt);
    CHECK_OK(t, zs_name_intern(rt, "hero_99", 7, &index, &number));
    CHECK_EQ(t, zs_name_count(rt), count);     /* nothing new interned */
    CHECK(t, zs_name_base(rt, count) == NULL); /* out of range */
    CHECK_STATUS(t, zs_name_intern(rt, NULL, 0, &index, &number), ZS_E_INVALID);
    CHECK_STATUS(t, zs_name_intern(rt, "a\0b", 3, &index, &number), ZS_E_INVALID);

    /* Many distinct names survive table growth and stay findable. */
    char text[32];
    for (int i = 0; i < 500; i++) {
        int length = snprintf(text, sizeof text, "Name%dX", i);
        CHECK_OK(t, zs_name_intern(rt, text, (size_t)length, &index, &number));
    }
    CHECK_OK(t, zs_name_intern(rt, "NAME250x", 8, &index, &number));
    CHECK(t, strcmp(zs_name_base(rt, index), "Name250X") == 0);
    zs_runtime_free(rt);
}

/* ZS_NAME_AUTO names objects "<Class>_<n>" with a per-class counter; explicit names are kept. */
static void test_auto_names(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    char expected[32], actual[64];
    for (int i = 0; i < 3; i++) {
        zs_ref ref = ZS_NULL_REF;
        zs_object *object = NULL;
        CHECK_OK(t, zs_object_new(rt, fx.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, &ref, &object));
        if (object == NULL) continue;
        const char *base = zs_name_base(rt, object->name_index);
        CHECK(t, base != NULL && object->name_number > 0);
        if (base == NULL || object->name_number == 0) continue;
        snprintf(actual, sizeof actual, "%s_%" PRIu32, base, object->name_number - 1);
        snprintf(expected, sizeof expected, "Node_%d", i);
        CHECK(t, strcmp(actual, expected) == 0);
    }
    /* Another class has its own counter. */
    zs_object *object = NULL;
    zs_ref ref = ZS_NULL_REF;
    CHECK_OK(t, zs_object_new(rt, fx.leaf, ZS_NULL_REF, ZS_NAME_AUTO, 0, &ref, &object));
    if (object != NULL) {
        CHECK(t, strcmp(zs_name_base(rt, object->name_index), "Leaf") == 0);
        CHECK_EQ(t, object->name_number, 1);
    }
    /* An explicit interned name is stored as given. */
    uint32_t index = 0, number = 0;
    CHECK_OK(t, zs_name_intern(rt, "Boss_3", 6, &index, &number));
    CHECK_OK(t, zs_object_new(rt, fx.node, ZS_NULL_REF, index, number, &ref, &object));
    if (object != NULL) {
        CHECK_EQ(t, object->name_index, index);
        CHECK_EQ(t, object->name_number, 4);
        CHECK(t, strcmp(zs_name_base(rt, object->name_index), "Boss") == 0);
    }
    fixture_close(&fx);
}

/* A freed slot is reused LIFO with a bumped serial; old handles go stale everywhere. */
static void test_handle_reuse(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    zs_ref a = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref b = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref c = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, b);
    ROOT(t, rt, c);
    COLLECT(t, rt);
    CHECK(t, !alive(rt, a));

    zs_ref d = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_EQ(t, ZS_REF_INDEX(d), ZS_REF_INDEX(a));
    CHECK_EQ(t, ZS_REF_SERIAL(d), ZS_REF_SERIAL(a) + 1);
    CHECK(t, zs_resolve(rt, a) == NULL);
    CHECK(t, zs_resolve(rt, d) != NULL);
    ROOT(t, rt, d);

    /* Free b, then c, in two collections: c's slot comes back first. */
    UNROOT(t, rt, b);
    COLLECT(t, rt);
    UNROOT(t, rt, c);
    COLLECT(t, rt);
    zs_ref e = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref f = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_EQ(t, ZS_REF_INDEX(e), ZS_REF_INDEX(c));
    CHECK_EQ(t, ZS_REF_INDEX(f), ZS_REF_INDEX(b));
    CHECK(t, !alive(rt, b) && !alive(rt, c));
    CHECK(t, alive(rt, e) && alive(rt, f));

    /* Every handle-taking call refuses a stale handle. */
    int flag = 0;
    uint32_t count = 0;
    zs_object *object = NULL;
    CHECK_STATUS(t, zs_add_to_root(rt, a), ZS_E_STALE);
    CHECK_STATUS(t, zs_remove_from_root(rt, a), ZS_E_STALE);
    CHECK_STATUS(t, zs_add_strong_ref(rt, a), ZS_E_STALE);
    CHECK_STATUS(t, zs_mark_as_garbage(rt, a), ZS_E_STALE);
    CHECK_STATUS(t, zs_is_rooted(rt, a, &flag), ZS_E_STALE);
    CHECK_STATUS(t, zs_strong_ref_count(rt, a, &count), ZS_E_STALE);
    CHECK_STATUS(t, zs_resolve_for_conjugate(rt, a, &object), ZS_E_STALE);
    CHECK_STATUS(t, zs_store_ref(rt, a, NODE_REF(0), ZS_NULL_REF), ZS_E_STALE);
    CHECK_STATUS(t, zs_store_ref(rt, d, NODE_REF(0), a), ZS_E_STALE);
    CHECK_STATUS(t, zs_ref_array_push(rt, d, NODE_LIST, a), ZS_E_STALE);
    CHECK(t, zs_resolve(rt, ZS_NULL_REF) == NULL);
    CHECK(t, zs_resolve(rt, ZS_MAKE_REF(1000000, 1)) == NULL);
    CHECK(t, zs_resolve(rt, ZS_MAKE_REF(ZS_REF_INDEX(d), 0)) == NULL);

    /* A free slot named with the serial it has now (bumped when it was
       freed: a handle nobody was given, forged by a host or read from
       freed memory) is as stale as the handle it had. */
    zs_ref g = MAKE(t, rt, fx.node, ZS_NULL_REF);
    COLLECT(t, rt);
    zs_ref forged = ZS_MAKE_REF(ZS_REF_INDEX(g), ZS_REF_SERIAL(g) + 1);
    CHECK(t, zs_resolve(rt, forged) == NULL);
    CHECK_STATUS(t, zs_add_to_root(rt, forged), ZS_E_STALE);
    CHECK_STATUS(t, zs_add_strong_ref(rt, forged), ZS_E_STALE);
    CHECK_STATUS(t, zs_store_ref(rt, d, NODE_REF(0), forged), ZS_E_STALE);
    CHECK_STATUS(t, zs_resolve_for_conjugate(rt, forged, &object), ZS_E_STALE);
    VERIFY(t, rt);
    fixture_close(&fx);
}

/* ======================================================================
 * Collection
 * ====================================================================== */

/* Unrooted objects die; roots and strong refs keep objects until removed/released. */
static void test_roots_and_strong_refs(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    zs_ref unrooted = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref rooted = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref strong = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    ROOT(t, rt, rooted);
    ROOT(t, rt, rooted); /* idempotent */
    CHECK_OK(t, zs_add_strong_ref(rt, strong));
    CHECK_OK(t, zs_add_strong_ref(rt, strong));
    int flag = 0;
    uint32_t count = 0;
    CHECK_OK(t, zs_is_rooted(rt, rooted, &flag));
    CHECK_EQ(t, flag, 1);
    CHECK_OK(t, zs_strong_ref_count(rt, strong, &count));
    CHECK_EQ(t, count, 2);

    COLLECT(t, rt);
    CHECK(t, !alive(rt, unrooted));
    CHECK(t, alive(rt, rooted) && alive(rt, strong));

    UNROOT(t, rt, rooted);
    CHECK_OK(t, zs_is_rooted(rt, rooted, &flag));
    CHECK_EQ(t, flag, 0);
    CHECK_OK(t, zs_release_strong_ref(rt, strong));
    COLLECT(t, rt);
    CHECK(t, !alive(rt, rooted));
    CHECK(t, alive(rt, strong)); /* one strong ref left */
    CHECK_OK(t, zs_release_strong_ref(rt, strong));
    CHECK_STATUS(t, zs_release_strong_ref(rt, strong), ZS_E_INVALID);
    COLLECT(t, rt);
    CHECK(t, !alive(rt, strong));
    CHECK_EQ(t, zs_live_objects(rt), 0);

    /* Root, unroot, root again before a collection: still a root. */
    zs_ref flip = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, flip);
    UNROOT(t, rt, flip);
    ROOT(t, rt, flip);
    COLLECT(t, rt);
    CHECK(t, alive(rt, flip));
    fixture_close(&fx);
}

/* Strong members and reference-array elements keep their targets, transitively. */
static void test_references_keep_objects(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    zs_ref root = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref by_member = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref by_array = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref transitive = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    zs_ref array_transitive = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    ROOT(t, rt, root);
    LINK(t, rt, root, 3, by_member);
    PUSH(t, rt, root, ZS_NULL_REF); /* null elements are allowed */
    PUSH(t, rt, root, by_array);
    LINK(t, rt, by_member, 1, transitive);
    for (int i = 0; i < 9; i++) PUSH(t, rt, by_array, array_transitive); /* grows the array */
    COLLECT(t, rt);
    CHECK_EQ(t, zs_live_objects(rt), 5);
    node *n = node_of(rt, by_array);
    CHECK(t, n != NULL && n->list.count == 9 && n->list.data[8] == array_transitive);

    LINK(t, rt, root, 3, ZS_NULL_REF);
    COLLECT(t, rt);
    CHECK(t, !alive(rt, by_member) && !alive(rt, transitive));
    CHECK(t, alive(rt, by_array) && alive(rt, array_transitive));

    CHECK_OK(t, zs_ref_array_clear(rt, root, NODE_LIST));
    CHECK_STATUS(t, zs_ref_array_clear(rt, root, NODE_REF(0)), ZS_E_INVALID);
    COLLECT(t, rt);
    CHECK(t, !alive(rt, by_array) && !alive(rt, array_transitive));
    CHECK_EQ(t, zs_live_objects(rt), 1);
    UNROOT(t, rt, root);
    COLLECT(t, rt);
    CHECK_EQ(t, zs_live_objects(rt), 0);
    fixture_close(&fx);
}

/* Unreachable cycles (self loops, rings, via arrays) are collected; a rooted ring is kept. */
static void test_unreachable_cycles(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    enum { RING = 10 };
    zs_ref free_ring[RING], kept_ring[RING];
    for (int i = 0; i < RING; i++) {
        free_ring[i] = MAKE(t, rt, fx.node, ZS_NULL_REF);
        kept_ring[i] = MAKE(t, rt, fx.node, ZS_NULL_REF);
    }
    for (int i = 0; i < RING; i++) {
        LINK(t, rt, free_ring[i], 0, free_ring[(i + 1) % RING]);
        PUSH(t, rt, free_ring[i], free_ring[(i + RING - 1) % RING]);
        LINK(t, rt, kept_ring[i], 0, kept_ring[(i + 1) % RING]);
    }
    zs_ref self = MAKE(t, rt, fx.node, ZS_NULL_REF);
    LINK(t, rt, self, 2, self);
    ROOT(t, rt, kept_ring[4]);
    COLLECT(t, rt);
    CHECK(t, !alive(rt, self));
    for (int i = 0; i < RING; i++) {
        CHECK(t, !alive(rt, free_ring[i]));
        CHECK(t, alive(rt, kept_ring[i]));
    }
    CHECK_EQ(t, gc_stats(rt).objects_freed, RING + 1);
    UNROOT(t, rt, kept_ring[4]);
    COLLECT(t, rt);
    CHECK_EQ(t, zs_live_objects(rt), 0);
    fixture_close(&fx);
}

/* Weak members keep nothing alive; their stored value goes stale, even after slot reuse. */
static void test_weak_members(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    zs_ref holder = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref weak_only = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref also_strong = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref other = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, holder);
    ROOT(t, rt, other);
    CHECK_OK(t, zs_store_ref(rt, holder, NODE_WEAK, weak_only));
    CHECK_OK(t, zs_store_ref(rt, other, NODE_WEAK, also_strong));
    LINK(t, rt, other, 0, also_strong);
    COLLECT(t, rt);
    node *h = node_of(rt, holder), *o = node_of(rt, other);
    CHECK(t, h != NULL && o != NULL);
    if (h == NULL || o == NULL) {
        fixture_close(&fx);
        return;
    }
    CHECK(t, !alive(rt, weak_only));
    CHECK_EQ(t, h->weak, weak_only);           /* not cleared ... */
    CHECK(t, zs_resolve(rt, h->weak) == NULL); /* ... but stale */
    CHECK(t, zs_resolve(rt, o->weak) == zs_resolve(rt, also_strong));

    zs_ref reuse = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_EQ(t, ZS_REF_INDEX(reuse), ZS_REF_INDEX(weak_only));
    CHECK(t, zs_resolve(rt, h->weak) == NULL);
    /* Storing a stale handle into a weak member is refused. */
    CHECK_STATUS(t, zs_store_ref(rt, holder, NODE_WEAK, weak_only), ZS_E_STALE);
    fixture_close(&fx);
}

/* The outer reference is traced: an otherwise unreferenced outer chain stays alive. */
static void test_outer_is_traced(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    zs_ref top = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref middle = MAKE(t, rt, fx.node, top);
    zs_ref inner = MAKE(t, rt, fx.node, middle);
    zs_ref leaf_outer = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    zs_ref leaf_inner = MAKE(t, rt, fx.leaf, leaf_outer); /* no members, but an outer */
    ROOT(t, rt, inner);
    ROOT(t, rt, leaf_inner);
    COLLECT(t, rt);
    CHECK(t, alive(rt, top) && alive(rt, middle) && alive(rt, inner));
    CHECK(t, alive(rt, leaf_outer) && alive(rt, leaf_inner));
    node *n = node_of(rt, inner);
    CHECK(t, n != NULL && n->header.outer == middle);

    UNROOT(t, rt, inner);
    UNROOT(t, rt, leaf_inner);
    COLLECT(t, rt);
    CHECK_EQ(t, zs_live_objects(rt), 0);
    fixture_close(&fx);
}

/* A garbage-marked object dies although referenced, and killable references to it read null. */
static void test_mark_as_garbage_kills_references(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    zs_ref holder = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref doomed = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref keep = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    zs_ref behind = MAKE(t, rt, fx.leaf, ZS_NULL_REF); /* only reachable through doomed */
    ROOT(t, rt, holder);
    LINK(t, rt, holder, 0, doomed);
    LINK(t, rt, holder, 2, doomed);
    PUSH(t, rt, holder, doomed);
    PUSH(t, rt, holder, keep);
    CHECK_OK(t, zs_store_ref(rt, holder, NODE_WEAK, doomed)); /* weak: not killed */
    LINK(t, rt, doomed, 0, behind);
    CHECK_OK(t, zs_mark_as_garbage(rt, doomed));
    int flag = 0;
    CHECK_OK(t, zs_is_garbage(rt, doomed, &flag));
    CHECK_EQ(t, flag, 1);
    CHECK_OK(t, zs_is_garbage(rt, holder, &flag));
    CHECK_EQ(t, flag, 0);

    COLLECT(t, rt);
    zs_gc_stats stats = gc_stats(rt);
    CHECK(t, !alive(rt, doomed) && !alive(rt, behind));
    CHECK(t, alive(rt, keep));
    CHECK_EQ(t, stats.references_killed, 3);
    CHECK_EQ(t, stats.objects_freed, 2);
    node *h = node_of(rt, holder);
    if (h != NULL) {
        CHECK_EQ(t, h->ref[0], ZS_NULL_REF);
        CHECK_EQ(t, h->ref[2], ZS_NULL_REF);
        CHECK_EQ(t, h->list.count, 2);
        CHECK_EQ(t, h->list.data[0], ZS_NULL_REF);
        CHECK_EQ(t, h->list.data[1], keep);
        CHECK_EQ(t, h->weak, doomed);
        CHECK(t, zs_resolve(rt, h->weak) == NULL);
    }
    COLLECT(t, rt);
    CHECK_EQ(t, gc_stats(rt).references_killed, 0);
    fixture_close(&fx);
}

/* A garbage object survives while it is a live object's outer, or rooted; member refs still die. */
static void test_garbage_kept_by_outer_and_roots(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    zs_ref holder = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref garbage_outer = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref inner = MAKE(t, rt, fx.node, garbage_outer);
    zs_ref garbage_root = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref garbage_strong = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    zs_ref behind = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    ROOT(t, rt, holder);
    ROOT(t, rt, inner);
    ROOT(t, rt, garbage_root);
    CHECK_OK(t, zs_add_strong_ref(rt, garbage_strong));
    LINK(t, rt, holder, 0, garbage_outer);
    LINK(t, rt, holder, 1, garbage_root);
    PUSH(t, rt, holder, garbage_strong);
    LINK(t, rt, garbage_outer, 0, behind); /* a surviving garbage object is still scanned */
    CHECK_OK(t, zs_mark_as_garbage(rt, garbage_outer));
    CHECK_OK(t, zs_mark_as_garbage(rt, garbage_root));
    CHECK_OK(t, zs_mark_as_garbage(rt, garbage_strong));

    COLLECT(t, rt);
    CHECK(t, alive(rt, garbage_outer) && alive(rt, garbage_root) && alive(rt, garbage_strong));
    CHECK(t, alive(rt, behind));
    CHECK_EQ(t, gc_stats(rt).references_killed, 3);
    CHECK_EQ(t, gc_stats(rt).objects_freed, 0);
    node *h = node_of(rt, holder), *i = node_of(rt, inner);
    if (h != NULL && i != NULL) {
        CHECK_EQ(t, h->ref[0], ZS_NULL_REF);
        CHECK_EQ(t, h->ref[1], ZS_NULL_REF);
        CHECK_EQ(t, h->list.data[0], ZS_NULL_REF);
        CHECK_EQ(t, i->header.outer, garbage_outer); /* outer is never killed */
    }
    int flag = 0;
    CHECK_OK(t, zs_is_garbage(rt, garbage_outer, &flag));
    CHECK_EQ(t, flag, 1);

    /* Once nothing immutable holds them, they die. */
    UNROOT(t, rt, inner);
    UNROOT(t, rt, garbage_root);
    CHECK_OK(t, zs_release_strong_ref(rt, garbage_strong));
    COLLECT(t, rt);
    CHECK(t, !alive(rt, garbage_outer) && !alive(rt, garbage_root) && !alive(rt, garbage_strong));
    CHECK(t, !alive(rt, inner) && !alive(rt, behind));
    CHECK_EQ(t, zs_live_objects(rt), 1);
    fixture_close(&fx);
}

/* ======================================================================
 * Destroy hook
 * ====================================================================== */

typedef struct hook_event {
    zs_destroy_phase phase;
    uint32_t index;
    uint64_t payload;      /* the object's payload, read inside the hook */
    uint64_t next_payload; /* BEGIN only: payload of the node ref[0] names (0 if none) */
} hook_event;

#define HOOK_EVENTS 32u

typedef struct hook_log {
    hook_event events[HOOK_EVENTS];
    uint32_t count;       /* calls; may exceed the array */
    const zs_class *node; /* instances of this class are read as nodes */
    bool probe;           /* try every mutating call inside the hook */
    uint32_t probes;
    uint32_t probes_not_busy;
} hook_log;

static void probe_expect_busy(hook_log *log, zs_status status) {
    log->probes++;
    if (status != ZS_E_BUSY) log->probes_not_busy++;
}

static void recording_hook(void *user, zs_runtime *rt, zs_object *object, zs_destroy_phase phase) {
    hook_log *log = user;
    hook_event event = {phase, object->index, 0, 0};
    if (object->cls == log->node) {
        const node *n = (const node *)object;
        event.payload = n->payload;
        const node *next = phase == ZS_BEGIN_DESTROY ? (const node *)zs_resolve(rt, n->ref[0])
                                                     : NULL;
        if (next != NULL && next->header.cls == log->node) event.next_payload = next->payload;
    }
    if (log->count < HOOK_EVENTS) log->events[log->count] = event;
    log->count++;
    if (!log->probe) return;

    zs_ref self = zs_object_ref(rt, object), out = ZS_NULL_REF;
    probe_expect_busy(log, zs_object_new(rt, log->node, ZS_NULL_REF, ZS_NAME_AUTO, 0, &out, NULL));
    probe_expect_busy(log, zs_add_to_root(rt, self));
    probe_expect_busy(log, zs_remove_from_root(rt, self));
    probe_expect_busy(log, zs_add_strong_ref(rt, self));
    probe_expect_busy(log, zs_mark_as_garbage(rt, self));
    probe_expect_busy(log, zs_collect_garbage(rt));
    probe_expect_busy(log, zs_gc_mark_and_gather(rt));
    probe_expect_busy(log, zs_gc_purge(rt, 0, NULL));
    if (object->cls == log->node) {
        probe_expect_busy(log, zs_store_ref(rt, self, NODE_REF(0), ZS_NULL_REF));
        probe_expect_busy(log, zs_ref_array_push(rt, self, NODE_LIST, ZS_NULL_REF));
        probe_expect_busy(log, zs_ref_array_clear(rt, self, NODE_LIST));
    }
    static const zs_member members[] = {{ZS_MEMBER_WEAK_OBJECT, 32, NULL}};
    zs_class_desc desc = {"MadeInHook", NULL, 40, 0, members, 1, NULL, 0, NULL, 0};
    const zs_class *cls = NULL;
    probe_expect_busy(log, zs_class_register(rt, &desc, &cls));
}

/* How many recorded events have this phase and object index. */
static uint32_t count_events(const hook_log *log, zs_destroy_phase phase, uint32_t index) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < log->count && i < HOOK_EVENTS; i++)
        n += log->events[i].phase == phase && log->events[i].index == index;
    return n;
}

/* True when no BEGIN_DESTROY event follows a FINISH_DESTROY one. */
static bool begins_before_finishes(const hook_log *log) {
    bool finished = false;
    for (uint32_t i = 0; i < log->count && i < HOOK_EVENTS; i++) {
        if (log->events[i].phase == ZS_FINISH_DESTROY) finished = true;
        else if (finished) return false;
    }
    return true;
}

/* A new conjugate object, its conjugate the sole holder of the handle. */
static zs_ref make_sole(runner *t, zs_runtime *rt, const zs_class *cls) {
    node *raw = NULL;
    zs_ref ref = zs_object_new_conjugate(rt, cls, ZS_NULL_REF, ZS_NAME_AUTO, 0, NULL, 0, &raw, NULL,
                                         0, NULL);
    CHECK(t, ref >= ZS_FIRST_REF);
    return ref >= ZS_FIRST_REF ? ref : ZS_NULL_REF;
}

/* Tell the heap one conjugate was dropped; returns how many it destroyed. */
static uint32_t drop(zs_runtime *rt, zs_ref ref, bool sole) {
    zs_dropped_conjugate dropped = {ref, sole, 0};
    uint32_t destroyed = UINT32_MAX;
    zs_status status = zs_conjugates_dropped(rt, NULL, &dropped, 1, &destroyed);
    return status == ZS_OK ? destroyed : UINT32_MAX;
}

/* A destroy hook that tells the heap a conjugate was dropped (a managed
   side whose finaliser runs in it) destroys nothing from inside the hook:
   the object stays, whole and still referenced, for the collector. */
typedef struct dropping_hook {
    zs_ref victim;
    uint32_t destroyed;
    zs_status status;
    int calls;
} dropping_hook;

static void dropping_in_hook(void *user, zs_runtime *rt, zs_object *object,
                             zs_destroy_phase phase) {
    (void)object;
    dropping_hook *hook = user;
    if (phase != ZS_FINISH_DESTROY || hook->calls++ > 0) return;
    zs_dropped_conjugate dropped = {hook->victim, 1, 0};
    hook->status = zs_conjugates_dropped(rt, NULL, &dropped, 1, &hook->destroyed);
}

static void test_conjugates_dropped_in_a_destroy_hook(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    zs_ref holder = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, holder);
    zs_ref victim = make_sole(t, rt, fx.node); /* reachable, its handle never shared */
    LINK(t, rt, holder, 0, victim);
    (void)MAKE(t, rt, fx.node, ZS_NULL_REF); /* dies at the next collection: runs the hook */
    dropping_hook hook = {victim, 99, ZS_E_INVALID, 0};
    zs_set_destroy_hook(rt, dropping_in_hook, &hook);
    COLLECT(t, rt);
    zs_set_destroy_hook(rt, NULL, NULL);
    CHECK(t, hook.calls > 0);
    CHECK_OK(t, hook.status);
    CHECK_EQ(t, hook.destroyed, 0);
    CHECK(t, alive(rt, victim));
    VERIFY(t, rt);
    /* Its conjugate was forgotten all the same: collected with no expiry. */
    UNROOT(t, rt, holder);
    COLLECT(t, rt);
    CHECK(t, !alive(rt, victim));
    /* Nothing dropped, nothing to read: a null list is fine. */
    uint32_t destroyed = 99;
    CHECK_OK(t, zs_conjugates_dropped(rt, NULL, NULL, 0, &destroyed));
    CHECK_EQ(t, destroyed, 0);
    fixture_close(&fx);
}

/* A purge of exactly as many objects as the dying list holds (its
   capacity doubles from 16): the purge's look-ahead reads no entry past
   the list (AddressSanitizer reports one, make -C native sanitize). */
static void test_purge_of_a_full_dying_list(runner *t) {
    for (uint32_t count = 16; count <= 64; count *= 2) {
        fixture fx;
        if (!fixture_open(t, &fx, 0, 0)) return;
        zs_runtime *rt = fx.rt;
        zs_ref keep = MAKE(t, rt, fx.node, ZS_NULL_REF);
        ROOT(t, rt, keep);
        for (uint32_t i = 0; i < count; i++) (void)MAKE(t, rt, fx.leaf, ZS_NULL_REF);
        COLLECT(t, rt);
        CHECK_EQ(t, gc_stats(rt).objects_freed, count);
        CHECK_EQ(t, zs_live_objects(rt), 1);
        fixture_close(&fx);
    }
}

/* A slot whose serial would wrap is retired when its object dies: never
   reused, and the object's block freed all the same, whichever path
   destroys it (a collection; its dropped conjugate, at once; its dropped
   conjugate as the next object is made, which otherwise takes the block). */
static void test_retired_slot_frees_its_block(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    for (int path = 0; path < 3; path++) {
        zs_ref sole = make_sole(t, rt, fx.node);
        const uint32_t index = ZS_REF_INDEX(sole);
        CHECK_OK(t, zs_debug_corrupt(rt, sole, 3)); /* its slot's last serial */
        sole = ZS_MAKE_REF(index, UINT32_MAX - 1);
        CHECK(t, alive(rt, sole));
        zs_memory_stats before, after;
        zs_runtime_memory(rt, &before);
        zs_ref next = ZS_NULL_REF;
        if (path == 0) {
            CHECK_EQ(t, drop(rt, sole, false), 0); /* not the sole holder: left to the collector */
            COLLECT(t, rt);
        } else if (path == 1) {
            CHECK_EQ(t, drop(rt, sole, true), 1);
        } else {
            zs_dropped_conjugate dropped = {sole, 1, 0};
            node *raw = NULL;
            next = zs_object_new_conjugate(rt, fx.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, NULL, 0, &raw,
                                           &dropped, 1, NULL);
            CHECK(t, next >= ZS_FIRST_REF);
        }
        CHECK(t, !alive(rt, sole));
        zs_runtime_memory(rt, &after);
        /* Without a collection (whose own lists may grow): one block less,
           or one freed and one made. Every path: fixture_close asserts that
           no block is left. */
        if (path > 0) CHECK_EQ(t, after.live_blocks + (path == 1 ? 1 : 0), before.live_blocks);
        zs_ref fresh = MAKE(t, rt, fx.node, ZS_NULL_REF);
        CHECK(t, ZS_REF_INDEX(fresh) != index); /* retired: never reused */
        if (path == 2) CHECK(t, ZS_REF_INDEX(next) != index);
        VERIFY(t, rt);
    }
    fixture_close(&fx);
}

/* zs_conjugates_dropped: an object only its dropped conjugate held is destroyed
   at once (both hook phases, slot reused under a new serial); one the heap
   handed out, or that anything keeps, is not; a dropped conjugate no longer
   sends its object through the expiring list. */
static void test_conjugates_dropped(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    hook_log log = {.node = fx.node};
    zs_set_destroy_hook(rt, recording_hook, &log);

    zs_ref sole = make_sole(t, rt, fx.node);
    uint32_t index = ZS_REF_INDEX(sole);
    CHECK_EQ(t, drop(rt, sole, true), 1);
    CHECK(t, !alive(rt, sole));
    CHECK_EQ(t, count_events(&log, ZS_BEGIN_DESTROY, index), 1);
    CHECK_EQ(t, count_events(&log, ZS_FINISH_DESTROY, index), 1);
    CHECK_EQ(t, zs_live_objects(rt), 0);
    VERIFY(t, rt);
    /* The slot goes to the next object, under another serial: the old handle stays stale. */
    zs_ref next = make_sole(t, rt, fx.node);
    CHECK_EQ(t, ZS_REF_INDEX(next), index);
    CHECK(t, next != sole && !alive(rt, sole) && alive(rt, next));
    CHECK_EQ(t, drop(rt, sole, true), 0); /* stale: skipped */
    CHECK(t, alive(rt, next));

    /* Creation takes the dropped first, under the same lock. */
    zs_dropped_conjugate dropped = {next, 1, 0};
    node *raw = NULL;
    zs_ref after = zs_object_new_conjugate(rt, fx.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, NULL, 0, &raw,
                                           &dropped, 1, NULL);
    CHECK(t, after >= ZS_FIRST_REF && !alive(rt, next) && alive(rt, after));
    CHECK_EQ(t, ZS_REF_INDEX(after), index);
    CHECK(t,
          (char *)raw == (char *)node_of(rt, after) && raw->payload == 0 && raw->list.count == 0);
    VERIFY(t, rt);
    /* A dropped object of another size frees its block; the new one gets its own. */
    zs_ref small = make_sole(t, rt, fx.leaf);
    dropped = (zs_dropped_conjugate){small, 1, 0};
    zs_ref big = zs_object_new_conjugate(rt, fx.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, NULL, 0, &raw,
                                         &dropped, 1, NULL);
    CHECK(t, big >= ZS_FIRST_REF && !alive(rt, small) && alive(rt, big));
    CHECK_EQ(t, zs_live_objects(rt), 2);
    VERIFY(t, rt);
    CHECK_EQ(t, drop(rt, big, true), 1);
    CHECK_EQ(t,
             zs_object_new_conjugate(rt, fx.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, NULL, 0, &raw, NULL,
                                     1, NULL),
             ZS_E_INVALID);

    /* Not its sole holder: only forgotten; the next collection frees it
       without waiting for an expiry. */
    CHECK_EQ(t, drop(rt, after, false), 0);
    CHECK(t, alive(rt, after));
    CHECK_OK(t, zs_gc_mark_and_gather(rt));
    CHECK_EQ(t, zs_gc_expiring_count(rt), 0);
    CHECK_OK(t, zs_gc_purge(rt, 0, NULL));
    CHECK(t, !alive(rt, after));
    CHECK_EQ(t, gc_stats(rt).objects_freed_unshared, 4); /* since the previous cycle began */

    /* Kept objects stay: a root, a strong reference, a permanent object,
       a cluster's root and member. */
    zs_ref rooted = make_sole(t, rt, fx.node), strong = make_sole(t, rt, fx.node);
    ROOT(t, rt, rooted);
    CHECK_OK(t, zs_add_strong_ref(rt, strong));
    CHECK_EQ(t, drop(rt, rooted, true) + drop(rt, strong, true), 0);
    CHECK(t, alive(rt, rooted) && alive(rt, strong));
    UNROOT(t, rt, rooted);
    CHECK_OK(t, zs_release_strong_ref(rt, strong));
    CHECK_EQ(t, drop(rt, rooted, true) + drop(rt, strong, true), 0); /* once kept, still shared */
    COLLECT(t, rt);
    CHECK(t, !alive(rt, rooted) && !alive(rt, strong));

    /* Handed out by the heap: found by name, by address, listed, as a
       cluster's root. */
    zs_ref found = make_sole(t, rt, fx.node), by_address = make_sole(t, rt, fx.node);
    const zs_object *header = zs_resolve(rt, found);
    zs_ref out = ZS_NULL_REF;
    CHECK_OK(t, zs_find_object(rt, ZS_NULL_REF, header->name_index, header->name_number, &out));
    CHECK_EQ(t, out, found);
    CHECK_EQ(t, zs_object_ref(rt, zs_resolve(rt, by_address)), by_address);
    CHECK_EQ(t, drop(rt, found, true) + drop(rt, by_address, true), 0);
    CHECK(t, alive(rt, found) && alive(rt, by_address));
    zs_ref listed = make_sole(t, rt, fx.node), handles[16];
    uint32_t count = 0;
    CHECK_OK(t, zs_live_handles(rt, handles, 16, &count));
    CHECK_EQ(t, drop(rt, listed, true), 0);
    CHECK(t, alive(rt, listed));
    /* Made natively: its maker holds the handle. */
    zs_ref native = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_EQ(t, drop(rt, native, true), 0);
    CHECK(t, alive(rt, native));
    COLLECT(t, rt);
    CHECK_EQ(t, zs_live_objects(rt), 0);
    CHECK_EQ(t, gc_stats(rt).objects_freed_unshared, 0);
    zs_set_destroy_hook(rt, NULL, NULL);
    fixture_close(&fx);
}

/* Make a conjugate object of `cls` after `dropped` (its conjugate the sole
   holder), with `payload` in a node's image. */
static zs_ref renew(runner *t, zs_runtime *rt, const zs_class *cls, zs_ref dropped,
                    uint64_t payload, node **out) {
    node image = {0};
    image.payload = payload;
    const uint32_t image_size = (uint32_t)(sizeof image - sizeof image.header);
    zs_dropped_conjugate entry = {dropped, 1, 0};
    zs_ref ref = zs_object_new_conjugate(rt, cls, ZS_NULL_REF, ZS_NAME_AUTO, 0,
                                         (const char *)&image + sizeof image.header, image_size,
                                         out, &entry, 1, NULL);
    CHECK(t, ref >= ZS_FIRST_REF);
    return ref >= ZS_FIRST_REF ? ref : ZS_NULL_REF;
}

/* `Cls()` right after the sole conjugate of an object of the same class was
   dropped takes the fused path (renew_locked, objects.c). What it leaves must be
   what destroying the old object and making a new one leave: the old handle
   stale, both hook phases seen with the old memory intact, what the old
   properties owned freed, the new properties the image's, the old name gone
   and the new one findable, the counts right. The conditions it must not
   take are checked too: a kept object, another class, during marking. */
/* An object with a default image and default values (zs_class_set_defaults). */
typedef struct defaulted {
    zs_object header;
    int32_t level;
    zs_string label;
    uint64_t tail;
} defaulted;

/* A class's defaults reach every creation: a host's zs_object_new, the
   managed side's zs_object_new_conjugate (its own init image first), never
   the renewal of a dropped object; the values are deep copies (the source
   may change or go), freed with each object and with the runtime; a bad
   description is refused and changes nothing; out of memory, a creation
   fails whole. */
static void test_class_defaults_reach_every_creation(runner *t) {
    zs_runtime *rt = NULL;
    CHECK_OK(t, zs_runtime_new(NULL, &rt));
    if (rt == NULL) return;
    const zs_type *string = NULL, *object_type = NULL;
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_STRING, 1, 0, &string));
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &object_type));
    const zs_member members[] = {{ZS_MEMBER_VALUE, offsetof(defaulted, label), string}};
    const zs_class_desc desc = {.name = "Defaulted",
                                .instance_size = sizeof(defaulted),
                                .members = members,
                                .member_count = 1};
    const zs_class *cls = NULL;
    CHECK_OK(t, zs_class_register(rt, &desc, &cls));
    if (cls == NULL) return;
    /* The source: an object written as the managed side would. */
    zs_ref source_ref = ZS_NULL_REF;
    defaulted *source = NULL;
    CHECK_OK(t, zs_object_new(rt, cls, ZS_NULL_REF, ZS_NAME_AUTO, 0, &source_ref,
                              (zs_object **)&source));
    if (source == NULL) return;
    CHECK_OK(t, zs_string_assign(rt, source_ref, string, &source->label, "hello", 5));
    const int32_t level = 800;
    const zs_type_member values[] = {{string, offsetof(defaulted, label)}};
    const uint32_t image_size = (uint32_t)(offsetof(defaulted, level) + sizeof level -
                                           sizeof(zs_object));
    char image[sizeof(defaulted)] = {0};
    memcpy(image + offsetof(defaulted, level) - sizeof(zs_object), &level, sizeof level);
    /* Refused, changing nothing: a type with references, a value over the
       header or past the end, an image past the end, a class of no runtime. */
    const zs_type_member with_refs[] = {{object_type, offsetof(defaulted, tail)}};
    const zs_type_member over_header[] = {{string, 0}};
    const zs_type_member past_end[] = {{string, sizeof(defaulted) - 8}};
    CHECK_STATUS(t, zs_class_set_defaults(rt, cls, image, image_size, with_refs, 1, source),
                 ZS_E_INVALID);
    CHECK_STATUS(t, zs_class_set_defaults(rt, cls, image, image_size, over_header, 1, source),
                 ZS_E_INVALID);
    CHECK_STATUS(t, zs_class_set_defaults(rt, cls, image, image_size, past_end, 1, source),
                 ZS_E_INVALID);
    CHECK_STATUS(t, zs_class_set_defaults(rt, cls, image, sizeof(defaulted), NULL, 0, NULL),
                 ZS_E_INVALID);
    CHECK_STATUS(t, zs_class_set_defaults(rt, cls, NULL, 4, NULL, 0, NULL), ZS_E_INVALID);
    zs_ref plain_ref = ZS_NULL_REF;
    defaulted *plain = NULL;
    CHECK_OK(
        t, zs_object_new(rt, cls, ZS_NULL_REF, ZS_NAME_AUTO, 0, &plain_ref, (zs_object **)&plain));
    CHECK(t, plain != NULL && plain->level == 0 && plain->label.length == 0);
    /* Set: a host's creation starts from them. */
    CHECK_OK(t, zs_class_set_defaults(rt, cls, image, image_size, values, 1, source));
    CHECK_OK(t, zs_string_assign(rt, source_ref, string, &source->label, "changed", 7));
    zs_ref made_ref = ZS_NULL_REF;
    defaulted *made = NULL;
    CHECK_OK(t,
             zs_object_new(rt, cls, ZS_NULL_REF, ZS_NAME_AUTO, 0, &made_ref, (zs_object **)&made));
    CHECK(t, made != NULL && made->level == 800 && made->label.length == 5 &&
                 memcmp(made->label.data, "hello", 5) == 0 && made->label.data != NULL &&
                 made->tail == 0);
    /* The managed side's creation: its init first, then the values. */
    const int32_t other = 3;
    zs_ref conjugate_ref = zs_object_new_conjugate(rt, cls, ZS_NULL_REF, ZS_NAME_AUTO, 0,
                                                   (const char *)&other, sizeof other, &made, NULL,
                                                   0, NULL);
    CHECK(t, conjugate_ref >= ZS_FIRST_REF);
    CHECK(t, made->level == 3 && made->label.length == 5);
    /* A creation that cannot copy the values fails whole, nothing left. */
    zs_memory_stats before, after;
    zs_runtime_memory(rt, &before);
    uint32_t live = zs_live_objects(rt);
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, before.live_bytes + 8));
    zs_ref failed = ZS_NULL_REF;
    CHECK_STATUS(t, zs_object_new(rt, cls, ZS_NULL_REF, ZS_NAME_AUTO, 0, &failed, NULL),
                 ZS_E_NOMEM);
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
    zs_runtime_memory(rt, &after);
    CHECK_EQ(t, zs_live_objects(rt), live);
    CHECK_EQ(t, after.live_bytes, before.live_bytes);
    /* Replaced: the old copies go, the new ones come. */
    CHECK_OK(t, zs_class_set_defaults(rt, cls, NULL, 0, values, 1, source));
    CHECK_OK(t,
             zs_object_new(rt, cls, ZS_NULL_REF, ZS_NAME_AUTO, 0, &made_ref, (zs_object **)&made));
    CHECK(t, made->level == 0 && made->label.length == 7);
    CHECK_OK(t, zs_forget_conjugate(rt, conjugate_ref)); /* no managed side here */
    COLLECT(t, rt); /* every object, and its copy of the string, freed */
    CHECK_EQ(t, zs_live_objects(rt), 0);
    zs_runtime_free(rt); /* the class's copies freed with it: the leak check */
}

static void test_creation_renews_a_dropped_object(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    hook_log log = {.node = fx.node};
    zs_set_destroy_hook(rt, recording_hook, &log);
    zs_ref keep = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, keep);

    zs_ref old = make_sole(t, rt, fx.node);
    zs_memory_stats fresh, after;
    zs_runtime_memory(rt, &fresh);
    node *n = node_of(rt, old);
    if (n == NULL) return;
    n->payload = 77;
    LINK(t, rt, old, 0, keep);
    for (int i = 0; i < 9; i++) PUSH(t, rt, old, keep); /* its list owns a block */
    const uint32_t index = ZS_REF_INDEX(old), old_number = n->header.name_number;
    const uint32_t name_index = n->header.name_index, live = zs_live_objects(rt);

    node *raw = NULL;
    zs_ref renewed = renew(t, rt, fx.node, old, 5, &raw);
    CHECK_EQ(t, ZS_REF_INDEX(renewed), index);
    CHECK(t, renewed != old && !alive(rt, old) && alive(rt, renewed));
    CHECK(t, raw == node_of(rt, renewed) && raw->payload == 5 && raw->ref[0] == ZS_NULL_REF &&
                 raw->list.count == 0 && raw->list.data == NULL);
    CHECK(t, raw->header.outer == ZS_NULL_REF && raw->header.cls == fx.node &&
                 raw->header.index == index);
    CHECK_EQ(t, raw->header.name_index, name_index);
    CHECK_EQ(t, raw->header.name_number, old_number + 1);
    CHECK_EQ(t, zs_live_objects(rt), live);
    CHECK_EQ(t, count_events(&log, ZS_BEGIN_DESTROY, index), 1);
    CHECK_EQ(t, count_events(&log, ZS_FINISH_DESTROY, index), 1);
    CHECK_EQ(t, log.events[0].payload, 77); /* the hook saw the old object */
    CHECK(t, begins_before_finishes(&log));
    zs_runtime_memory(rt, &after);
    CHECK_EQ(t, after.live_bytes, fresh.live_bytes); /* the list's block went */
    CHECK_EQ(t, drop(rt, old, true), 0);             /* stale: skipped */
    CHECK(t, alive(rt, renewed));
    VERIFY(t, rt);
    zs_ref found = ZS_NULL_REF;
    CHECK_OK(t, zs_find_object(rt, ZS_NULL_REF, name_index, old_number, &found));
    CHECK_EQ(t, found, ZS_NULL_REF);

    /* Again and again in the same slot, each under a new serial. */
    zs_ref previous = renewed;
    for (uint64_t i = 0; i < 100; i++) {
        zs_ref next = renew(t, rt, fx.node, previous, i, &raw);
        CHECK(t, ZS_REF_INDEX(next) == index && next != previous && !alive(rt, previous));
        CHECK_EQ(t, raw->payload, i);
        previous = next;
    }
    /* With no image, the properties are zeroed. */
    node_of(rt, previous)->payload = 55;
    zs_dropped_conjugate entry = {previous, 1, 0};
    zs_ref bare = zs_object_new_conjugate(rt, fx.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, NULL, 0, &raw,
                                          &entry, 1, NULL);
    CHECK(t, ZS_REF_INDEX(bare) == index && !alive(rt, previous) && raw->payload == 0);
    previous = bare;
    CHECK_OK(t, zs_find_object(rt, ZS_NULL_REF, name_index, old_number + 102, &found));
    CHECK_EQ(t, found, previous);
    CHECK_EQ(t, zs_live_objects(rt), live);
    VERIFY(t, rt);

    /* Not taken: a rooted object stays, and the new one gets another slot. */
    zs_ref rooted = make_sole(t, rt, fx.node);
    ROOT(t, rt, rooted);
    zs_ref beside = renew(t, rt, fx.node, rooted, 1, &raw);
    CHECK(t,
          alive(rt, rooted) && alive(rt, beside) && ZS_REF_INDEX(beside) != ZS_REF_INDEX(rooted));
    UNROOT(t, rt, rooted);
    /* Not taken: an object of another class goes, the new one is made whole. */
    zs_ref small = make_sole(t, rt, fx.leaf);
    zs_ref big = renew(t, rt, fx.node, small, 3, &raw);
    CHECK(t, !alive(rt, small) && alive(rt, big) && raw->payload == 3);
    CHECK(t, raw->header.cls == fx.node);
    VERIFY(t, rt);
    /* An object that had an outer: the new one has none, and its old name
       in that outer is gone. */
    zs_ref inner = zs_object_new_conjugate(rt, fx.node, keep, ZS_NAME_AUTO, 0, NULL, 0, &raw, NULL,
                                           0, NULL);
    CHECK(t, inner >= ZS_FIRST_REF);
    const uint32_t inner_number = raw->header.name_number;
    zs_ref outside = renew(t, rt, fx.node, inner, 4, &raw);
    CHECK(t, !alive(rt, inner) && raw->header.outer == ZS_NULL_REF && raw->payload == 4);
    CHECK_OK(t, zs_find_object(rt, keep, name_index, inner_number, &found));
    CHECK_EQ(t, found, ZS_NULL_REF);
    VERIFY(t, rt);
    /* Every renewed object has its conjugate: a collection sends it to be
       expired, never frees it under the conjugate. */
    CHECK_OK(t, zs_gc_mark_and_gather(rt));
    CHECK_EQ(t, zs_gc_expiring_count(rt), 4); /* previous, beside, big, outside */
    zs_ref taken[8];
    uint32_t count = 0;
    CHECK_OK(t, zs_gc_take_expiring(rt, taken, 8, &count));
    CHECK_EQ(t, count, 4);
    CHECK_OK(t, zs_gc_purge(rt, 0, NULL));
    CHECK(t, !alive(rt, previous) && !alive(rt, outside) && !alive(rt, rooted) && alive(rt, keep));
    /* Each renewal counted as an object freed at once, as the general path
       counts them: 103 renewals, and the Leaf. */
    CHECK_EQ(t, gc_stats(rt).objects_freed_unshared, 104);

    /* During marking: the renewed object is born marked and survives the
       cycle once a root holds it; the one before it is gone. */
    zs_ref before_cycle = make_sole(t, rt, fx.node);
    CHECK_OK(t, zs_gc_start_incremental(rt));
    zs_ref in_cycle = renew(t, rt, fx.node, before_cycle, 9, &raw);
    LINK(t, rt, keep, 1, in_cycle);
    int done = 0;
    for (int steps = 0; steps < 1000 && !done; steps++)
        CHECK_OK(t, zs_gc_step_bounded(rt, 0, 1, &done));
    CHECK_OK(t, zs_gc_purge(rt, 0, NULL));
    CHECK(t,
          alive(rt, in_cycle) && !alive(rt, before_cycle) && node_of(rt, in_cycle)->payload == 9);
    VERIFY(t, rt);
    zs_set_destroy_hook(rt, NULL, NULL);
    fixture_close(&fx);
}

/* Dropped sole objects are destroyed at once while an incremental cycle is
   pending, marking or purging, and the cycle completes with a consistent
   heap: none of its lists names them, and an object born in a freed slot
   survives. */
static void test_conjugates_dropped_during_incremental_cycle(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    zs_ref root = MAKE(t, rt, fx.node, ZS_NULL_REF), garbage[3];
    ROOT(t, rt, root);
    for (int i = 0; i < 3; i++) LINK(t, rt, root, i, MAKE(t, rt, fx.node, ZS_NULL_REF));
    for (int i = 0; i < 3; i++) garbage[i] = MAKE(t, rt, fx.node, ZS_NULL_REF); /* gathered */
    zs_ref old = make_sole(t, rt, fx.node); /* made before the cycle */
    CHECK_OK(t, zs_gc_start_incremental(rt));
    CHECK_EQ(t, drop(rt, old, true), 1);
    zs_ref born = ZS_NULL_REF;
    bool seen[4] = {false};
    uint32_t steps = 0, destroyed = 0;
    for (; steps < 1000 && zs_gc_phase_of(rt) != ZS_GC_IDLE; steps++) {
        zs_gc_phase phase = zs_gc_phase_of(rt);
        seen[phase] = true;
        zs_ref sole = make_sole(t, rt, fx.node);
        destroyed += drop(rt, sole, true);
        CHECK(t, !alive(rt, sole));
        if (phase == ZS_GC_PURGE_PENDING && born == ZS_NULL_REF) {
            born = MAKE(t, rt, fx.node, ZS_NULL_REF); /* takes the freed slot: must survive */
            LINK(t, rt, root, 3, born);
        }
        VERIFY(t, rt);
        int done = 0;
        if (phase != ZS_GC_PURGE_PENDING) {
            CHECK_OK(t, zs_gc_step_bounded(rt, 0, 1, &done));
        } else {
            CHECK_OK(t, zs_gc_purge_bounded(rt, 0, 1, &done));
        }
    }
    CHECK(t, seen[ZS_GC_MARKING] && seen[ZS_GC_PURGE_PENDING]);
    CHECK_EQ(t, destroyed, steps);
    CHECK(t, born != ZS_NULL_REF && alive(rt, born));
    CHECK(t, !alive(rt, old) && alive(rt, root));
    for (int i = 0; i < 3; i++) CHECK(t, !alive(rt, garbage[i]));
    VERIFY(t, rt);
    COLLECT(t, rt);
    CHECK_EQ(t, zs_live_objects(rt), 5);
    fixture_close(&fx);
}

/* Every dying object gets BEGIN before any FINISH, with its memory (and its targets') intact. */
static void test_destroy_hook_phases(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    hook_log log = {.node = fx.node};
    zs_set_destroy_hook(rt, recording_hook, &log);
    enum { DYING = 5 };
    zs_ref survivor = MAKE(t, rt, fx.node, ZS_NULL_REF), dying[DYING];
    ROOT(t, rt, survivor);
    for (int i = 0; i < DYING; i++) {
        dying[i] = MAKE(t, rt, fx.node, ZS_NULL_REF);
        node *n = node_of(rt, dying[i]);
        if (n != NULL) n->payload = 1000 + (uint64_t)i;
        if (i > 0) LINK(t, rt, dying[i - 1], 0, dying[i]);
    }
    PUSH(t, rt, dying[2], survivor);
    COLLECT(t, rt);
    CHECK_EQ(t, log.count, 2 * DYING);
    CHECK(t, begins_before_finishes(&log));
    for (uint32_t e = 0; e < log.count && e < HOOK_EVENTS; e++) {
        const hook_event *event = &log.events[e];
        int i = -1;
        for (int k = 0; k < DYING; k++)
            if (event->index == ZS_REF_INDEX(dying[k])) i = k;
        CHECK(t, i >= 0);
        if (i < 0) continue;
        CHECK_EQ(t, event->payload, 1000 + (uint64_t)i);
        if (event->phase == ZS_BEGIN_DESTROY)
            CHECK_EQ(t, event->next_payload, i + 1 < DYING ? 1000 + (uint64_t)i + 1 : 0);
    }
    for (int i = 0; i < DYING; i++) {
        CHECK_EQ(t, count_events(&log, ZS_BEGIN_DESTROY, ZS_REF_INDEX(dying[i])), 1);
        CHECK_EQ(t, count_events(&log, ZS_FINISH_DESTROY, ZS_REF_INDEX(dying[i])), 1);
        CHECK(t, !alive(rt, dying[i]));
    }
    /* A collection with nothing to free calls nothing; clearing the hook stops calls. */
    log.count = 0;
    COLLECT(t, rt);
    CHECK_EQ(t, log.count, 0);
    zs_set_destroy_hook(rt, NULL, NULL);
    MAKE(t, rt, fx.node, ZS_NULL_REF);
    COLLECT(t, rt);
    CHECK_EQ(t, log.count, 0);
    fixture_close(&fx);
}

/* Heap mutation from inside the destroy hook is refused with ZS_E_BUSY, and allowed again after. */
static void test_destroy_hook_refuses_mutation(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    hook_log log = {.node = fx.node, .probe = true};
    zs_set_destroy_hook(rt, recording_hook, &log);
    zs_ref survivor = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, survivor);
    MAKE(t, rt, fx.node, ZS_NULL_REF);
    MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    COLLECT(t, rt);
    CHECK_EQ(t, log.count, 4);
    CHECK(t, log.probes >= 4 * 10);
    CHECK_EQ(t, log.probes_not_busy, 0);
    CHECK_EQ(t, zs_live_objects(rt), 1);

    /* Outside the hook everything works again. */
    zs_ref later = MAKE(t, rt, fx.node, ZS_NULL_REF);
    LINK(t, rt, survivor, 0, later);
    COLLECT(t, rt);
    CHECK(t, alive(rt, later));
    fixture_close(&fx);
}

/* zs_runtime_free destroys every remaining object (rooted and permanent too) through the hook. */
static void test_runtime_free_calls_hook(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, ZS_RUNTIME_DISREGARD_WINDOW)) return;
    zs_runtime *rt = fx.rt;
    hook_log log = {.node = fx.node, .probe = true};
    zs_ref objects[5];
    objects[0] = MAKE(t, rt, fx.node, ZS_NULL_REF); /* permanent */
    CHECK_OK(t, zs_close_disregard_for_gc(rt));
    objects[1] = MAKE(t, rt, fx.node, ZS_NULL_REF); /* rooted */
    objects[2] = MAKE(t, rt, fx.node, objects[1]);  /* referenced via outer */
    objects[3] = MAKE(t, rt, fx.leaf, ZS_NULL_REF); /* unrooted, never collected */
    objects[4] = MAKE(t, rt, fx.node, ZS_NULL_REF); /* strong-ref'd */
    ROOT(t, rt, objects[1]);
    CHECK_OK(t, zs_add_strong_ref(rt, objects[4]));
    LINK(t, rt, objects[1], 0, objects[4]);
    for (int i = 0; i < 5; i++) {
        node *n = objects[i] != ZS_NULL_REF && i != 3 ? node_of(rt, objects[i]) : NULL;
        if (n != NULL) n->payload = 7000 + (uint64_t)i;
    }
    uint32_t indices[5];
    for (int i = 0; i < 5; i++) indices[i] = ZS_REF_INDEX(objects[i]);
    zs_set_destroy_hook(rt, recording_hook, &log);
    fixture_close(&fx);

    CHECK_EQ(t, log.count, 10);
    CHECK(t, begins_before_finishes(&log));
    CHECK_EQ(t, log.probes_not_busy, 0);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(t, count_events(&log, ZS_BEGIN_DESTROY, indices[i]), 1);
        CHECK_EQ(t, count_events(&log, ZS_FINISH_DESTROY, indices[i]), 1);
    }
    for (uint32_t e = 0; e < log.count && e < HOOK_EVENTS; e++) {
        if (log.events[e].index == indices[3]) continue; /* the leaf has no payload read */
        for (int i = 0; i < 5; i++)
            if (log.events[e].index == indices[i])
                CHECK_EQ(t, log.events[e].payload, 7000 + (uint64_t)i);
    }
}

/* ======================================================================
 * Conjugates (the managed side's proxies)
 * ====================================================================== */

/* A dying object with a conjugate is not freed until its handle has been taken from the expiring list. */
static void test_conjugate_expiry(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    hook_log log = {.node = fx.node};
    zs_set_destroy_hook(rt, recording_hook, &log);
    zs_ref holder = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref with_conjugate = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref plain = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref live_conjugate = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, holder);
    ROOT(t, rt, live_conjugate);
    zs_object *object = NULL;
    CHECK_OK(t, zs_resolve_for_conjugate(rt, with_conjugate, &object));
    CHECK(t, object == zs_resolve(rt, with_conjugate));
    CHECK_OK(t, zs_resolve_for_conjugate(rt, live_conjugate, &object));
    CHECK_STATUS(t, zs_resolve_for_conjugate(rt, plain, NULL), ZS_E_INVALID);
    const uint32_t *dying = zs_dying_word(rt);
    CHECK_EQ(t, __atomic_load_n(dying, __ATOMIC_RELAXED), 0);

    COLLECT_EXPECT(t, rt, ZS_E_EXPIRY_PENDING);
    CHECK(t, __atomic_load_n(dying, __ATOMIC_RELAXED) != 0); /* a conjugate to expire */
    CHECK(t, alive(rt, with_conjugate) && alive(rt, plain)); /* nothing freed yet */
    CHECK_EQ(t, log.count, 0);                               /* not even BEGIN */
    CHECK_EQ(t, zs_gc_expiring_count(rt), 1);
    CHECK_EQ(t, zs_gc_pending_purge(rt), 2);

    /* Dying objects cannot be stored, rooted, re-resolved or used as an outer. */
    zs_ref out = ZS_NULL_REF;
    CHECK_STATUS(t, zs_store_ref(rt, holder, NODE_REF(0), with_conjugate), ZS_E_DYING);
    CHECK_STATUS(t, zs_store_ref(rt, holder, NODE_WEAK, plain), ZS_E_DYING);
    CHECK_STATUS(t, zs_ref_array_push(rt, holder, NODE_LIST, plain), ZS_E_DYING);
    CHECK_STATUS(t, zs_store_ref(rt, plain, NODE_REF(0), ZS_NULL_REF), ZS_E_DYING);
    CHECK_STATUS(t, zs_add_to_root(rt, with_conjugate), ZS_E_DYING);
    CHECK_STATUS(t, zs_add_strong_ref(rt, plain), ZS_E_DYING);
    CHECK_STATUS(t, zs_resolve_for_conjugate(rt, with_conjugate, &object), ZS_E_DYING);
    CHECK_STATUS(t, zs_object_new(rt, fx.node, plain, ZS_NAME_AUTO, 0, &out, NULL), ZS_E_DYING);

    /* Purging or collecting again is refused while the list has not been taken. */
    int done = 1;
    CHECK_STATUS(t, zs_gc_purge(rt, 0, &done), ZS_E_EXPIRY_PENDING);
    CHECK_EQ(t, done, 0);
    VERIFY(t, rt);
    COLLECT_EXPECT(t, rt, ZS_E_EXPIRY_PENDING);
    CHECK(t, alive(rt, with_conjugate));

    zs_ref taken[4] = {0};
    uint32_t count = 99;
    CHECK_OK(t, zs_gc_take_expiring(rt, taken, 0, &count)); /* capacity 0 takes nothing */
    CHECK_EQ(t, count, 0);
    CHECK_OK(t, zs_gc_take_expiring(rt, taken, 4, &count));
    CHECK_EQ(t, count, 1);
    CHECK_EQ(t, taken[0], with_conjugate);
    CHECK_EQ(t, zs_gc_expiring_count(rt), 0);
    CHECK_EQ(t, __atomic_load_n(dying, __ATOMIC_RELAXED), 0); /* taken: none left live */
    CHECK_OK(t, zs_gc_purge(rt, 0, &done));
    VERIFY(t, rt);
    CHECK_EQ(t, done, 1);
    CHECK(t, !alive(rt, with_conjugate) && !alive(rt, plain));
    CHECK(t, alive(rt, live_conjugate));
    CHECK_EQ(t, log.count, 4);
    CHECK_EQ(t, gc_stats(rt).objects_freed, 2);
    CHECK_EQ(t, zs_gc_pending_purge(rt), 0);

    /* A conjugate forgotten early does not hold up the purge. */
    zs_ref forgotten = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_resolve_for_conjugate(rt, forgotten, &object));
    CHECK_OK(t, zs_forget_conjugate(rt, forgotten));
    COLLECT(t, rt);
    CHECK(t, !alive(rt, forgotten));
    CHECK_STATUS(t, zs_forget_conjugate(rt, forgotten), ZS_E_STALE);

    /* The split protocol by hand: mark and gather, take, purge. */
    zs_ref split = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_resolve_for_conjugate(rt, split, &object));
    CHECK_OK(t, zs_gc_mark_and_gather(rt));
    VERIFY(t, rt);
    CHECK_OK(t, zs_gc_take_expiring(rt, taken, 4, &count));
    CHECK_EQ(t, count, 1);
    CHECK_EQ(t, taken[0], split);
    CHECK_OK(t, zs_gc_purge(rt, 0, &done));
    VERIFY(t, rt);
    CHECK(t, done == 1 && !alive(rt, split));
    fixture_close(&fx);
}

/* zs_object_new_conjugate: one call copies the initial bytes over the properties and records the
   conjugate (the object is in the expiring list when it dies); bad initial bytes are refused. */
static void test_object_new_conjugate(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    node image = {0};
    image.payload = 0x1122334455667788u;
    const char *init = (const char *)&image + sizeof(zs_object);
    uint32_t init_size = (uint32_t)(sizeof(node) - sizeof(zs_object));
    node *raw = NULL;
    zs_ref ref = zs_object_new_conjugate(rt, fx.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, init, init_size,
                                         &raw, NULL, 0, NULL);
    CHECK(t, ref >= ZS_FIRST_REF);
    CHECK(t, raw != NULL && (zs_object *)raw == zs_resolve(rt, ref));
    if (raw != NULL) CHECK(t, raw->payload == image.payload);
    zs_ref plain = zs_object_new_conjugate(rt, fx.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, NULL, 0, &raw,
                                           NULL, 0, NULL);
    CHECK(t, plain >= ZS_FIRST_REF && raw != NULL && raw->payload == 0);

    CHECK_EQ(t,
             zs_object_new_conjugate(rt, fx.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, init, init_size + 1,
                                     &raw, NULL, 0, NULL),
             ZS_E_INVALID);
    CHECK_EQ(t,
             zs_object_new_conjugate(rt, fx.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, NULL, 8, &raw, NULL,
                                     0, NULL),
             ZS_E_INVALID);
    CHECK_EQ(t,
             zs_object_new_conjugate(rt, fx.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, NULL, 0, NULL, NULL,
                                     0, NULL),
             ZS_E_INVALID);
    CHECK_EQ(t,
             zs_object_new_conjugate(rt, NULL, ZS_NULL_REF, ZS_NAME_AUTO, 0, NULL, 0, &raw, NULL, 0,
                                     NULL),
             ZS_E_INVALID);
    CHECK_EQ(t, zs_live_objects(rt), 2);

    /* Both have conjugates: the purge waits until the managed side takes them. */
    COLLECT_EXPECT(t, rt, ZS_E_EXPIRY_PENDING);
    CHECK_EQ(t, zs_gc_expiring_count(rt), 2);
    zs_ref taken[4] = {0};
    uint32_t count = 0;
    int done = 0;
    CHECK_OK(t, zs_gc_take_expiring(rt, taken, 4, &count));
    CHECK_EQ(t, count, 2);
    CHECK(t, (taken[0] == ref && taken[1] == plain) || (taken[0] == plain && taken[1] == ref));
    CHECK_OK(t, zs_gc_purge(rt, 0, &done));
    VERIFY(t, rt);
    CHECK(t, done == 1 && !alive(rt, ref) && !alive(rt, plain));
    /* A stale outer is refused with its status. */
    CHECK_EQ(
        t, zs_object_new_conjugate(rt, fx.node, ref, ZS_NAME_AUTO, 0, NULL, 0, &raw, NULL, 0, NULL),
        ZS_E_STALE);
    fixture_close(&fx);
}

/* ======================================================================
 * Disregard-for-GC window
 * ====================================================================== */

/* Objects from the start-up window are permanent; escaping references from them keep objects alive. */
static void test_disregard_window(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, ZS_RUNTIME_DISREGARD_WINDOW)) return;
    zs_runtime *rt = fx.rt;
    zs_ref perm = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref perm_child = MAKE(t, rt, fx.node, perm);
    zs_ref perm_leaf = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    LINK(t, rt, perm, 0, perm_leaf); /* permanent to permanent: no escape */
    CHECK_OK(t, zs_close_disregard_for_gc(rt));
    CHECK_STATUS(t, zs_close_disregard_for_gc(rt), ZS_E_INVALID); /* already closed */

    int flag = 0;
    CHECK_OK(t, zs_is_permanent(rt, perm, &flag));
    CHECK_EQ(t, flag, 1);
    zs_ref normal = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_is_permanent(rt, normal, &flag));
    CHECK_EQ(t, flag, 0);
    LINK(t, rt, normal, 0, perm); /* normal to permanent is fine */

    /* A weak reference from a permanent object is no escape: never traced,
       it keeps nothing, and the holder stays off the root list. */
    zs_ref weakly = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_store_ref(rt, perm, NODE_WEAK, weakly));

    COLLECT(t, rt);
    CHECK(t, alive(rt, perm) && alive(rt, perm_child) && alive(rt, perm_leaf));
    CHECK(t, !alive(rt, normal) && !alive(rt, weakly));
    CHECK_EQ(t, gc_stats(rt).permanent_objects, 3);
    CHECK_EQ(t, gc_stats(rt).roots, 0);

    /* Escape: a permanent holder now references normal objects (member and array). */
    zs_ref escaped = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref escaped_behind = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    zs_ref in_array = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    zs_ref doomed = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    LINK(t, rt, escaped, 1, escaped_behind);
    LINK(t, rt, perm, 1, escaped);
    PUSH(t, rt, perm_child, in_array);
    LINK(t, rt, perm, 2, doomed);
    CHECK_OK(t, zs_mark_as_garbage(rt, doomed));
    COLLECT(t, rt);
    COLLECT(t, rt);
    CHECK(t, alive(rt, escaped) && alive(rt, escaped_behind) && alive(rt, in_array));
    CHECK(t, !alive(rt, doomed));
    node *p = node_of(rt, perm);
    CHECK(t, p != NULL && p->ref[2] == ZS_NULL_REF && p->ref[0] == perm_leaf);
    CHECK_EQ(t, gc_stats(rt).roots, 2);

    /* Permanent objects cannot be marked as garbage. */
    CHECK_STATUS(t, zs_mark_as_garbage(rt, perm), ZS_E_INVALID);
    CHECK_STATUS(t, zs_mark_as_garbage(rt, perm_leaf), ZS_E_INVALID);

    /* Dropping the escaping references frees the normal objects; permanent ones stay. */
    LINK(t, rt, perm, 1, ZS_NULL_REF);
    CHECK_OK(t, zs_ref_array_clear(rt, perm_child, NODE_LIST));
    COLLECT(t, rt);
    CHECK(t, !alive(rt, escaped) && !alive(rt, escaped_behind) && !alive(rt, in_array));
    CHECK_EQ(t, zs_live_objects(rt), 3);
    fixture_close(&fx);
}

/* A write of plain data into a permanent object lists nothing: only an
   owner taking references is scanned as a root from then on, and only it
   needs a root-list entry first (zs_begin_store). With no memory to spare
   for the root list, plain writes into any number of permanent objects
   all succeed (more of them than the list's first 16 entries, so a list
   that grew for them would have needed memory), while a write of a
   reference into one of them is refused whole; the next mark finds no
   root among them. */
static void test_plain_writes_into_permanent_objects_need_no_root_entry(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, ZS_RUNTIME_DISREGARD_WINDOW)) return;
    zs_runtime *rt = fx.rt;
    enum { PERMANENT = 40 };
    zs_ref permanent[PERMANENT];
    for (int i = 0; i < PERMANENT; i++) permanent[i] = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_close_disregard_for_gc(rt));
    const zs_type *word = NULL, *object = NULL;
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_PLAIN, 8, 8, &word));
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &object));
    zs_ref target = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_memory_stats memory;
    zs_runtime_memory(rt, &memory);
    /* Room for zs_value_assign's staging copy of one word, and no more. */
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, memory.live_bytes + sizeof(uint64_t)));
    for (int i = 0; i < PERMANENT; i++) {
        node *n = node_of(rt, permanent[i]);
        if (n == NULL) continue;
        const uint64_t value = 1000 + (uint64_t)i;
        CHECK_OK(t, zs_value_assign(rt, permanent[i], word, &n->payload, &value));
        CHECK_EQ(t, n->payload, value);
    }
    node *holder = node_of(rt, permanent[0]);
    if (holder != NULL) {
        CHECK_STATUS(t, zs_value_store_ref(rt, permanent[0], object, &holder->ref[0], target),
                     ZS_E_NOMEM);
        CHECK(t, holder->ref[0] == ZS_NULL_REF);
    }
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
    COLLECT(t, rt);
    CHECK_EQ(t, gc_stats(rt).roots, 0);
    CHECK_EQ(t, gc_stats(rt).permanent_objects, PERMANENT);
    CHECK(t, !alive(rt, target));
    VERIFY(t, rt);
    fixture_close(&fx);
}

/* ======================================================================
 * Statistics, capacity, memory
 * ====================================================================== */

/* Collection statistics count marked, unreachable and freed objects, roots and cycles. */
static void test_gc_stats(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    uint64_t cycle = gc_stats(rt).cycle;
    zs_ref root = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref a = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref b = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    zs_ref u1 = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref u2 = MAKE(t, rt, fx.node, ZS_NULL_REF);
    MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    ROOT(t, rt, root);
    LINK(t, rt, root, 0, a);
    PUSH(t, rt, a, b);
    LINK(t, rt, u1, 0, u2);
    LINK(t, rt, u2, 0, u1);

    COLLECT(t, rt);
    zs_gc_stats stats = gc_stats(rt);
    CHECK_EQ(t, stats.cycle, cycle + 1);
    CHECK_EQ(t, stats.objects_marked, 3);
    CHECK_EQ(t, stats.objects_unreachable, 3);
    CHECK_EQ(t, stats.objects_freed, 3);
    CHECK_EQ(t, stats.live_objects, 3);
    CHECK_EQ(t, stats.roots, 1);
    CHECK_EQ(t, stats.references_killed, 0);
    CHECK_EQ(t, stats.permanent_objects, 0);
    CHECK_EQ(t, zs_live_objects(rt), 3);

    COLLECT(t, rt);
    stats = gc_stats(rt);
    CHECK_EQ(t, stats.cycle, cycle + 2);
    CHECK_EQ(t, stats.objects_marked, 3);
    CHECK_EQ(t, stats.objects_unreachable, 0);
    CHECK_EQ(t, stats.objects_freed, 0);
    CHECK_EQ(t, stats.live_objects, 3);

    UNROOT(t, rt, root);
    COLLECT(t, rt);
    stats = gc_stats(rt);
    CHECK_EQ(t, stats.cycle, cycle + 3);
    CHECK_EQ(t, stats.objects_marked, 0);
    CHECK_EQ(t, stats.objects_unreachable, 3);
    CHECK_EQ(t, stats.objects_freed, 3);
    CHECK_EQ(t, stats.live_objects, 0);
    CHECK_EQ(t, stats.roots, 0);
    fixture_close(&fx);
}

/* With max_objects=100 the 101st live object is refused, and slots freed by a collection are usable. */
static void test_capacity(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 100, 0)) return;
    zs_runtime *rt = fx.rt;
    for (int i = 0; i < 100; i++) {
        zs_ref ref = MAKE(t, rt, i % 2 ? fx.node : fx.leaf, ZS_NULL_REF);
        if (i < 40) ROOT(t, rt, ref);
    }
    zs_ref out = ZS_NULL_REF;
    CHECK_STATUS(t, zs_object_new(rt, fx.node, ZS_NULL_REF, ZS_NAME_AUTO, 0, &out, NULL),
                 ZS_E_CAPACITY);
    CHECK_EQ(t, zs_live_objects(rt), 100);
    VERIFY(t, rt);
    COLLECT(t, rt);
    CHECK_EQ(t, zs_live_objects(rt), 40);
    for (int i = 0; i < 60; i++) MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_STATUS(t, zs_object_new(rt, fx.leaf, ZS_NULL_REF, ZS_NAME_AUTO, 0, &out, NULL),
                 ZS_E_CAPACITY);
    CHECK_EQ(t, zs_live_objects(rt), 100);
    COLLECT(t, rt);
    CHECK_EQ(t, zs_live_objects(rt), 40);
    fixture_close(&fx);
}

/* Build a rooted hub with 500 nodes holding reference arrays, then drop it all. */
static void churn(runner *t, fixture *fx) {
    zs_runtime *rt = fx->rt;
    zs_ref hub = MAKE(t, rt, fx->node, ZS_NULL_REF);
    ROOT(t, rt, hub);
    zs_ref previous[3] = {ZS_NULL_REF, ZS_NULL_REF, ZS_NULL_REF};
    for (int i = 0; i < 500; i++) {
        zs_ref n = MAKE(t, rt, fx->node, i % 7 ? ZS_NULL_REF : hub);
        PUSH(t, rt, hub, n);
        for (int k = 0; k < 3; k++)
            if (previous[k] != ZS_NULL_REF) PUSH(t, rt, n, previous[k]);
        CHECK_OK(t, zs_store_ref(rt, n, NODE_WEAK, previous[0]));
        previous[2] = previous[1];
        previous[1] = previous[0];
        previous[0] = n;
    }
    COLLECT(t, rt);
    CHECK_EQ(t, zs_live_objects(rt), 501);
    UNROOT(t, rt, hub);
    COLLECT(t, rt);
    CHECK_EQ(t, zs_live_objects(rt), 0);
}

/* Native memory returns to its baseline once objects and their ref arrays are freed; items stay small. */
static void test_memory_accounting(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_memory_stats before, baseline, during, after;
    zs_runtime_memory(fx.rt, &before);
    CHECK(t, before.item_bytes_per_object > 0 && before.item_bytes_per_object <= 24);
    CHECK(t, before.live_blocks > 0 && before.live_bytes > 0);

    /* The first round also grows the runtime's own vectors (free list, mark stack, dying
       list, root list) and its first chunk; those stay, so measure the baseline after it. */
    churn(t, &fx);
    zs_runtime_memory(fx.rt, &baseline);
    CHECK(t, baseline.live_blocks - before.live_blocks <= 8);

    zs_ref keep = MAKE(t, fx.rt, fx.node, ZS_NULL_REF);
    PUSH(t, fx.rt, keep, keep);
    zs_runtime_memory(fx.rt, &during);
    CHECK_EQ(t, during.live_blocks, baseline.live_blocks + 2); /* object + its array block */
    CHECK(t, during.live_bytes >= baseline.live_bytes + sizeof(node) + sizeof(zs_ref));
    COLLECT(t, fx.rt);

    for (int round = 0; round < 2; round++) {
        churn(t, &fx);
        zs_runtime_memory(fx.rt, &after);
        CHECK_EQ(t, after.live_blocks, baseline.live_blocks);
        CHECK_EQ(t, after.live_bytes, baseline.live_bytes);
        CHECK(t, after.peak_bytes >= baseline.live_bytes + 500 * sizeof(node));
    }
    fixture_close(&fx);
}

/* zs_heap_verify reports a header/index mismatch and a lost mark as ZS_E_CORRUPT with a message. */
static void test_verify_detects_corruption(runner *t) {
    for (uint32_t what = 1; what <= 2; what++) {
        fixture fx;
        if (!fixture_open(t, &fx, 0, 0)) return;
        zs_runtime *rt = fx.rt;
        zs_ref a = MAKE(t, rt, fx.node, ZS_NULL_REF);
        zs_ref b = MAKE(t, rt, fx.node, ZS_NULL_REF);
        ROOT(t, rt, a);
        LINK(t, rt, a, 0, b);
        COLLECT(t, rt);

        char message[256] = "untouched";
        CHECK_OK(t, zs_debug_corrupt(rt, b, what));
        CHECK_STATUS(t, zs_heap_verify(rt, message, sizeof message), ZS_E_CORRUPT);
        CHECK(t, message[0] != '\0' && strcmp(message, "untouched") != 0);
        CHECK_STATUS(t, zs_heap_verify(rt, NULL, 0), ZS_E_CORRUPT);
        CHECK_OK(t, zs_debug_corrupt(rt, b, what)); /* an XOR: flip it back */
        VERIFY(t, rt);
        COLLECT(t, rt);
        CHECK(t, alive(rt, a) && alive(rt, b));

        CHECK_STATUS(t, zs_debug_corrupt(rt, a, 99), ZS_E_INVALID);
        CHECK_STATUS(t, zs_debug_corrupt(rt, ZS_MAKE_REF(12345, 1), what), ZS_E_STALE);
        fixture_close(&fx);
    }
}

/* ======================================================================
 * Scale
 * ====================================================================== */

typedef struct link_obj {
    zs_object header;
    zs_ref next;
} link_obj;

/* A rooted chain of 1,000,000 objects is kept whole, and freed whole once
   unrooted. Two markers whatever the machine's cores (a chain leaves the
   second nothing to steal: the parallel mark's worst case), so the test
   always starts threads and the ThreadSanitizer smoke run takes it. */
static void test_million_object_chain(runner *t) {
    enum { COUNT = 1000000 };
    zs_runtime *rt = NULL;
    zs_runtime_options options;
    zs_runtime_default_options(&options);
    options.mark_threads = 2;
    CHECK_OK(t, zs_runtime_new(&options, &rt));
    if (rt == NULL) return;
    const zs_member members[] = {{ZS_MEMBER_OBJECT, (uint32_t)offsetof(link_obj, next), NULL}};
    zs_class_desc desc = {"Link", NULL, sizeof(link_obj), 0, members, 1, NULL, 0, NULL, 0};
    const zs_class *cls = NULL;
    CHECK_OK(t, zs_class_register(rt, &desc, &cls));
    if (cls == NULL) {
        zs_runtime_free(rt);
        return;
    }
    zs_ref head = ZS_NULL_REF, tail = ZS_NULL_REF;
    uint32_t failures = 0;
    for (uint32_t i = 0; i < COUNT; i++) {
        zs_ref ref = ZS_NULL_REF;
        if (zs_object_new(rt, cls, ZS_NULL_REF, ZS_NAME_AUTO, 0, &ref, NULL) != ZS_OK) {
            failures++;
            break;
        }
        if (i == 0) head = ref;
        else if (zs_store_ref(rt, tail, (uint32_t)offsetof(link_obj, next), ref) != ZS_OK)
            failures++;
        tail = ref;
    }
    CHECK_EQ(t, failures, 0);
    ROOT(t, rt, head);
    COLLECT(t, rt);
    zs_gc_stats stats = gc_stats(rt);
    CHECK_EQ(t, stats.objects_marked, COUNT);
    CHECK_EQ(t, stats.objects_unreachable, 0);
    CHECK_EQ(t, zs_live_objects(rt), COUNT);
    CHECK(t, alive(rt, tail));

    UNROOT(t, rt, head);
    COLLECT(t, rt);
    stats = gc_stats(rt);
    CHECK_EQ(t, stats.objects_freed, COUNT);
    CHECK_EQ(t, zs_live_objects(rt), 0);
    CHECK(t, !alive(rt, head) && !alive(rt, tail));
    zs_runtime_free(rt);
}

/* ======================================================================
 * Random graphs against a model
 * ====================================================================== */

#define RG_INITIAL 2000u
#define RG_CYCLES 6u
#define RG_NEW_PER_CYCLE 100u
#define RG_CAPACITY (RG_INITIAL + RG_CYCLES * RG_NEW_PER_CYCLE)
#define RG_NONE UINT32_MAX

typedef struct rg_object {
    zs_ref ref;                /* kept after death, to check it stays stale */
    uint32_t edge[NODE_SLOTS]; /* model index of each strong slot's target, RG_NONE = null */
    uint32_t outer;            /* model index of the outer, RG_NONE = none */
    bool alive, rooted, strong, garbage, reached;
} rg_object;

typedef struct rg_model {
    runner *t;
    fixture fx;
    uint64_t rng;
    rg_object obj[RG_CAPACITY];
    uint32_t count;             /* objects ever created */
    uint32_t live[RG_CAPACITY]; /* model indices of live objects */
    uint32_t live_count;
    uint32_t queue[RG_CAPACITY];
} rg_model;

static uint32_t rg_pick_live(rg_model *m) { return m->live[rand_below(&m->rng, m->live_count)]; }

static void rg_set_edge(rg_model *m, uint32_t holder, uint32_t slot, uint32_t target) {
    zs_ref ref = target == RG_NONE ? ZS_NULL_REF : m->obj[target].ref;
    CHECK_OK(m->t, zs_store_ref(m->fx.rt, m->obj[holder].ref, NODE_REF(slot), ref));
    m->obj[holder].edge[slot] = target;
}

/* A new node; some get an outer, a root or a strong ref. Edges are set by the caller. */
static uint32_t rg_new_object(rg_model *m) {
    runner *t = m->t;
    uint32_t i = m->count++;
    rg_object *o = &m->obj[i];
    *o = (rg_object){.outer = RG_NONE, .alive = true};
    for (uint32_t s = 0; s < NODE_SLOTS; s++) o->edge[s] = RG_NONE;
    if (m->live_count > 0 && rand_below(&m->rng, 8) == 0) o->outer = rg_pick_live(m);
    o->ref = MAKE(t, m->fx.rt, m->fx.node,
                  o->outer == RG_NONE ? ZS_NULL_REF : m->obj[o->outer].ref);
    if (rand_below(&m->rng, 40) == 0) {
        o->rooted = true;
        ROOT(t, m->fx.rt, o->ref);
    }
    if (rand_below(&m->rng, 80) == 0) {
        o->strong = true;
        CHECK_OK(t, zs_add_strong_ref(m->fx.rt, o->ref));
    }
    m->live[m->live_count++] = i;
    return i;
}

static void rg_random_edges(rg_model *m, uint32_t holder) {
    for (uint32_t s = 0; s < NODE_SLOTS; s++)
        if (rand_below(&m->rng, 2) == 0) rg_set_edge(m, holder, s, rg_pick_live(m));
}

/* Mutate between collections: rewrite edges, toggle roots and strong refs, mark garbage, add objects. */
static void rg_mutate(rg_model *m) {
    runner *t = m->t;
    zs_runtime *rt = m->fx.rt;
    if (m->live_count == 0) return;
    for (int i = 0; i < 300; i++) {
        uint32_t holder = rg_pick_live(m), slot = rand_below(&m->rng, NODE_SLOTS);
        rg_set_edge(m, holder, slot, rand_below(&m->rng, 4) == 0 ? RG_NONE : rg_pick_live(m));
    }
    for (int i = 0; i < 20; i++) {
        rg_object *o = &m->obj[rg_pick_live(m)];
        CHECK_OK(t, o->rooted ? zs_remove_from_root(rt, o->ref) : zs_add_to_root(rt, o->ref));
        o->rooted = !o->rooted;
    }
    for (int i = 0; i < 10; i++) {
        rg_object *o = &m->obj[rg_pick_live(m)];
        CHECK_OK(t, o->strong ? zs_release_strong_ref(rt, o->ref) : zs_add_strong_ref(rt, o->ref));
        o->strong = !o->strong;
    }
    for (int i = 0; i < 10; i++) {
        rg_object *o = &m->obj[rg_pick_live(m)];
        CHECK_OK(t, zs_mark_as_garbage(rt, o->ref));
        o->garbage = true;
    }
    for (uint32_t i = 0; i < RG_NEW_PER_CYCLE; i++) rg_random_edges(m, rg_new_object(m));
}

/* Model reachability: from roots and strong refs along outers (always) and along strong
   slots whose target is not garbage (those slots are nulled instead). */
static void rg_compute_reachable(rg_model *m, uint32_t *out_reached, uint64_t *out_killed,
                                 uint32_t *out_pinned) {
    uint32_t head = 0, tail = 0, pinned = 0;
    uint64_t killed = 0;
    for (uint32_t k = 0; k < m->live_count; k++) {
        rg_object *o = &m->obj[m->live[k]];
        o->reached = o->rooted || o->strong;
        if (o->reached) m->queue[tail++] = m->live[k];
    }
    pinned = tail;
    while (head < tail) {
        rg_object *o = &m->obj[m->queue[head++]];
        if (o->outer != RG_NONE && !m->obj[o->outer].reached) {
            m->obj[o->outer].reached = true;
            m->queue[tail++] = o->outer;
        }
        for (uint32_t s = 0; s < NODE_SLOTS; s++) {
            uint32_t target = o->edge[s];
            if (target == RG_NONE) continue;
            if (m->obj[target].garbage) {
                killed++;
                continue;
            }
            if (!m->obj[target].reached) {
                m->obj[target].reached = true;
                m->queue[tail++] = target;
            }
        }
    }
    *out_reached = tail;
    *out_killed = killed;
    *out_pinned = pinned;
}

/* Collect, then check that exactly the model's reachable objects survive with the expected contents. */
static void rg_collect_and_check(rg_model *m) {
    runner *t = m->t;
    zs_runtime *rt = m->fx.rt;
    uint32_t reached = 0, pinned = 0;
    uint64_t killed = 0;
    rg_compute_reachable(m, &reached, &killed, &pinned);
    COLLECT(t, rt);
    zs_gc_stats stats = gc_stats(rt);
    CHECK_EQ(t, stats.objects_marked, reached);
    CHECK_EQ(t, stats.objects_unreachable, m->live_count - reached);
    CHECK_EQ(t, stats.objects_freed, m->live_count - reached);
    CHECK_EQ(t, stats.references_killed, killed);
    CHECK_EQ(t, stats.roots, pinned);
    CHECK_EQ(t, zs_live_objects(rt), reached);

    uint32_t wrong_liveness = 0, wrong_contents = 0, kept = 0;
    for (uint32_t k = 0; k < m->live_count; k++) {
        uint32_t i = m->live[k];
        rg_object *o = &m->obj[i];
        node *n = node_of(rt, o->ref);
        if ((n != NULL) != o->reached) {
            if (wrong_liveness++ == 0)
                fprintf(stderr, "  object %u (index %u): alive=%d, model says %d\n", i,
                        ZS_REF_INDEX(o->ref), n != NULL, o->reached);
        }
        if (!o->reached) {
            o->alive = false;
            continue;
        }
        m->live[kept++] = i;
        if (n == NULL) continue;
        for (uint32_t s = 0; s < NODE_SLOTS; s++) {
            if (o->edge[s] != RG_NONE && m->obj[o->edge[s]].garbage) o->edge[s] = RG_NONE;
            zs_ref expect = o->edge[s] == RG_NONE ? ZS_NULL_REF : m->obj[o->edge[s]].ref;
            wrong_contents += n->ref[s] != expect;
        }
        zs_ref expect_outer = o->outer == RG_NONE ? ZS_NULL_REF : m->obj[o->outer].ref;
        int garbage = 0;
        uint32_t strong = 0;
        wrong_contents += n->header.outer != expect_outer;
        wrong_contents += zs_is_garbage(rt, o->ref, &garbage) != ZS_OK || garbage != o->garbage;
        wrong_contents += zs_strong_ref_count(rt, o->ref, &strong) != ZS_OK || strong != o->strong;
    }
    m->live_count = kept;
    uint32_t dead_resolving = 0;
    for (uint32_t i = 0; i < m->count; i++)
        dead_resolving += !m->obj[i].alive && zs_resolve(rt, m->obj[i].ref) != NULL;
    CHECK_EQ(t, wrong_liveness, 0);
    CHECK_EQ(t, wrong_contents, 0);
    CHECK_EQ(t, dead_resolving, 0);
}

/* Random graphs of ~2,000 nodes: exactly the model-reachable objects survive each collection. */
static void test_random_graphs(runner *t) {
    static const uint64_t seeds[] = {0x9E3779B97F4A7C15u, 1u, 42u, 0xDEADBEEFu, 20240611u};
    rg_model *m = malloc(sizeof *m);
    CHECK(t, m != NULL);
    if (m == NULL) return;
    for (size_t k = 0; k < sizeof seeds / sizeof seeds[0]; k++) {
        memset(m, 0, sizeof *m);
        m->t = t;
        m->rng = seeds[k];
        if (!fixture_open(t, &m->fx, 0, 0)) break;
        for (uint32_t i = 0; i < RG_INITIAL; i++) rg_new_object(m);
        for (uint32_t i = 0; i < RG_INITIAL; i++) rg_random_edges(m, i);
        rg_collect_and_check(m);
        for (uint32_t cycle = 0; cycle < RG_CYCLES; cycle++) {
            rg_mutate(m);
            rg_collect_and_check(m);
        }
        /* Unpin everything: the whole graph must go. */
        for (uint32_t j = 0; j < m->live_count; j++) {
            rg_object *o = &m->obj[m->live[j]];
            if (o->rooted) CHECK_OK(t, zs_remove_from_root(m->fx.rt, o->ref));
            if (o->strong) CHECK_OK(t, zs_release_strong_ref(m->fx.rt, o->ref));
            o->rooted = o->strong = false;
        }
        rg_collect_and_check(m);
        CHECK_EQ(t, zs_live_objects(m->fx.rt), 0);
        fixture_close(&m->fx);
    }
    free(m);
}

/* Regression: a class with no members at all registers (classes.c once
   passed a NULL schema to qsort, which UBSan rejects) and its objects work. */
static void test_memberless_class(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    const zs_class *empty = NULL;
    zs_class_desc desc = {"Empty", NULL, sizeof(zs_object), 0, NULL, 0, NULL, 0, NULL, 0};
    CHECK_OK(t, zs_class_register(fx.rt, &desc, &empty));
    CHECK(t, empty != NULL && zs_class_schema_words(empty) == 0);
    zs_ref kept = MAKE(t, fx.rt, empty, ZS_NULL_REF);
    zs_ref dropped = MAKE(t, fx.rt, empty, ZS_NULL_REF);
    ROOT(t, fx.rt, kept);
    COLLECT(t, fx.rt);
    CHECK(t, alive(fx.rt, kept));
    CHECK(t, !alive(fx.rt, dropped));
    fixture_close(&fx);
}

/* Objects come from 64-byte-aligned slabs unless those are compiled out for
   the memory-safety tools (as internal.h decides): a 64-byte object fills one
   cache line; a freed object's block is reused and comes back zeroed; each
   object is counted as its own block either way. */
static void test_object_slabs(runner *t) {
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_NO_SLAB 1
#endif
#endif
#if !defined(ZS_NO_OBJECT_SLAB) && !defined(__SANITIZE_ADDRESS__) && !defined(TEST_NO_SLAB)
    const bool slabs = true;
#else
    const bool slabs = false;
#endif
    enum { COUNT = 3000, SIZE = 64 };
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_class_desc desc = {"Line", NULL, SIZE, 0, NULL, 0, NULL, 0, NULL, 0};
    const zs_class *line = NULL;
    CHECK_OK(t, zs_class_register(fx.rt, &desc, &line));
    if (line == NULL) {
        fixture_close(&fx);
        return;
    }
    static uintptr_t first[COUNT];
    zs_memory_stats before = {0}, during, after;
    for (int round = 0; round < 2; round++) {
        bool reused = false;
        for (uint32_t i = 0; i < COUNT; i++) {
            zs_object *object = zs_resolve(fx.rt, MAKE(t, fx.rt, line, ZS_NULL_REF));
            if (object == NULL) break;
            uintptr_t address = (uintptr_t)object;
            if (slabs) CHECK_EQ(t, address % 64, 0);
            const unsigned char *body = (const unsigned char *)(object + 1);
            bool zeroed = true;
            for (size_t b = 0; b < SIZE - sizeof(zs_object); b++) zeroed = zeroed && body[b] == 0;
            CHECK(t, zeroed);
            memset(object + 1, 0xAB,
                   SIZE - sizeof(zs_object)); /* must not show in the next round */
            if (round == 0) first[i] = address;
            for (uint32_t j = 0; slabs && round == 1 && !reused && j < COUNT; j += 97)
                reused = first[j] == address;
        }
        zs_runtime_memory(fx.rt, &during);
        if (round == 1) { /* round 0 also grew the runtime's tables and vectors */
            CHECK_EQ(t, during.live_blocks, before.live_blocks + COUNT);
            CHECK_EQ(t, during.live_bytes, before.live_bytes + COUNT * SIZE);
        }
        COLLECT(t, fx.rt); /* nothing is rooted: all of them die */
        CHECK_EQ(t, zs_live_objects(fx.rt), 0);
        zs_runtime_memory(fx.rt, &after);
        if (round == 1) CHECK_EQ(t, after.live_blocks, before.live_blocks);
        before = after;
        if (round == 1 && slabs) CHECK(t, reused);
    }
    fixture_close(&fx);
}

/* A class with more reference members than the marker batches at once
   (600): every target survives through a chain of such objects, plain and
   in 1-object incremental steps, and garbage targets are killed. */
static void test_huge_class(runner *t) {
    enum { SLOTS = 600, HOLDERS = 40 };
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_member *members = calloc(SLOTS, sizeof *members);
    zs_ref *targets = calloc((size_t)SLOTS * HOLDERS, sizeof *targets);
    zs_ref holders[HOLDERS];
    const zs_class *big = NULL;
    if (members == NULL || targets == NULL) goto done;
    for (uint32_t i = 0; i < SLOTS; i++)
        members[i] = (zs_member){.kind = ZS_MEMBER_OBJECT,
                                 .offset = (uint32_t)(sizeof(zs_object) + i * sizeof(zs_ref))};
    zs_class_desc desc = {.name = "Big",
                          .instance_size = (uint32_t)(sizeof(zs_object) + SLOTS * sizeof(zs_ref)),
                          .members = members,
                          .member_count = SLOTS};
    CHECK_OK(t, zs_class_register(fx.rt, &desc, &big));
    if (big == NULL) goto done;
    for (uint32_t h = 0; h < HOLDERS; h++) {
        holders[h] = MAKE(t, fx.rt, big, ZS_NULL_REF);
        if (h == 0) ROOT(t, fx.rt, holders[h]);
        else
            CHECK_OK(t, zs_store_ref(fx.rt, holders[h - 1], members[SLOTS - 1].offset, holders[h]));
        for (uint32_t i = 0; i + 1 < SLOTS; i++) {
            zs_ref target = MAKE(t, fx.rt, fx.node, ZS_NULL_REF);
            targets[h * SLOTS + i] = target;
            CHECK_OK(t, zs_store_ref(fx.rt, holders[h], members[i].offset, target));
        }
    }
    CHECK_OK(t, zs_mark_as_garbage(fx.rt, targets[7]));
    COLLECT(t, fx.rt);
    CHECK(t, !alive(fx.rt, targets[7]));
    CHECK_EQ(t, zs_live_objects(fx.rt), HOLDERS * SLOTS - 1u);
    CHECK_OK(t, zs_debug_set(fx.rt, ZS_DEBUG_STEP_OBJECTS, 1));
    CHECK_OK(t, zs_gc_start_incremental(fx.rt));
    int done = 0;
    for (uint32_t step = 0; !done && step < 100000; step++)
        CHECK_OK(t, zs_gc_step(fx.rt, 1000000000u, &done));
    CHECK(t, done);
    CHECK_EQ(t, gc_stats(fx.rt).objects_marked, HOLDERS * SLOTS - 1u);
    VERIFY(t, fx.rt);
done:
    free(members);
    free(targets);
    fixture_close(&fx);
}

/* Regression: a purge stopped by its time budget leaves dying objects that
   point at already-freed ones; the heap is still consistent (verify passes
   at every step) and the next purge steps finish the job. */
static void test_partial_purge_verifies(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_ref previous = ZS_NULL_REF;
    for (uint32_t i = 0; i < 1000; i++) {
        zs_ref next = MAKE(t, fx.rt, fx.node, ZS_NULL_REF);
        if (previous != ZS_NULL_REF) LINK(t, fx.rt, next, 0, previous);
        previous = next;
    }
    CHECK_OK(t, zs_gc_mark_and_gather(fx.rt));
    VERIFY(t, fx.rt);
    int done = 0;
    uint32_t steps = 0;
    while (!done && steps < 100000) {
        CHECK_OK(t, zs_gc_purge(fx.rt, 1, &done));
        VERIFY(t, fx.rt);
        steps++;
    }
    CHECK(t, done);
    CHECK(t, steps > 1); /* a 1 ns budget frees one stride per step */
    CHECK_EQ(t, zs_live_objects(fx.rt), 0u);
    CHECK_EQ(t, zs_gc_pending_purge(fx.rt), 0u);
    fixture_close(&fx);
}

/* Objects stay findable by name across purges of every size, budgeted or
   not, with objects created (and the name index grown) between the steps;
   freed objects are never found. One marker: the heap outgrows the
   parallel threshold, and the test is about purges, not threads. */
static void test_find_object_across_purges(runner *t) {
    static const uint32_t sizes[] = {30, 3000};
    for (uint32_t s = 0; s < 2; s++) {
        zs_runtime_options options;
        zs_runtime_default_options(&options);
        options.mark_threads = 1;
        fixture fx;
        if (!fixture_open_options(t, &fx, &options)) return;
        uint32_t n = sizes[s];
        zs_ref *refs = calloc(n, sizeof *refs);
        uint32_t *names = calloc(n, sizeof *names), *numbers = calloc(n, sizeof *numbers);
        if (refs == NULL || names == NULL || numbers == NULL) goto done;
        for (uint32_t i = 0; i < n; i++) {
            refs[i] = MAKE(t, fx.rt, fx.node, ZS_NULL_REF);
            zs_object *object = zs_resolve(fx.rt, refs[i]);
            names[i] = object->name_index;
            numbers[i] = object->name_number;
            if (i % 3 == 0) ROOT(t, fx.rt, refs[i]);
        }
        CHECK_OK(t, zs_gc_mark_and_gather(fx.rt));
        int done = 0;
        for (uint32_t step = 0; !done && step < 100000; step++) {
            CHECK_OK(t, zs_gc_purge(fx.rt, s == 0 ? 0 : 1, &done));
            for (uint32_t k = 0; k < 2 * n / 3 + 8; k++) (void)MAKE(t, fx.rt, fx.node, ZS_NULL_REF);
            for (uint32_t i = 0; i < n; i++) {
                zs_ref found = 1;
                CHECK_OK(t, zs_find_object(fx.rt, ZS_NULL_REF, names[i], numbers[i], &found));
                CHECK_EQ(t, found, i % 3 == 0 ? refs[i] : ZS_NULL_REF);
            }
            VERIFY(t, fx.rt);
        }
        CHECK(t, done);
        COLLECT(t, fx.rt);
        for (uint32_t i = 0; i < n; i++) {
            zs_ref found = 1;
            CHECK_OK(t, zs_find_object(fx.rt, ZS_NULL_REF, names[i], numbers[i], &found));
            CHECK_EQ(t, found, i % 3 == 0 ? refs[i] : ZS_NULL_REF);
        }
    done:
        free(refs);
        free(names);
        free(numbers);
        fixture_close(&fx);
    }
}

/* ======================================================================
 * Reference chains (why is an object alive?)
 * ====================================================================== */

/* The chains of target, at most max_chains (0: all) and 16 links; returns the link count. */
static uint32_t chains_of(runner *t, zs_runtime *rt, zs_ref target, uint32_t max_chains,
                          zs_chain_link *links) {
    uint32_t count = UINT32_MAX;
    CHECK_OK(t, zs_reference_chains(rt, target, max_chains, links, 16, &count));
    CHECK(t, count <= 16);
    return count;
}

/* Each root that reaches an object gives its shortest chain, nearest root
   first, naming the member at every link (a slot, an array, the outer); a
   root target is a chain of itself; an unreachable one has none. */
static void test_reference_chains(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    zs_ref a = MAKE(t, rt, fx.node, ZS_NULL_REF), b = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref c = MAKE(t, rt, fx.node, ZS_NULL_REF), stray = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, a);
    LINK(t, rt, a, 2, b);
    LINK(t, rt, a, 3, b); /* a second, equally short path: one chain per root */
    PUSH(t, rt, b, c);
    LINK(t, rt, stray, 0, c); /* an unreachable holder gives no chain */
    zs_chain_link links[16];
    CHECK_EQ(t, chains_of(t, rt, c, 0, links), 3);
    CHECK(t, links[0].holder == a && links[0].root == ZS_CHAIN_ROOT_ADDED);
    CHECK(t, links[0].member == NODE_REF(2) || links[0].member == NODE_REF(3));
    CHECK(t, links[1].holder == b && links[1].member == NODE_LIST && links[1].root == 0);
    CHECK(t, links[2].holder == c && links[2].member == ZS_CHAIN_END);
    CHECK_EQ(t, chains_of(t, rt, stray, 0, links), 0);

    /* A strong reference on b: b's chain is nearer and comes first. */
    CHECK_OK(t, zs_add_strong_ref(rt, b));
    CHECK_EQ(t, chains_of(t, rt, c, 0, links), 5);
    CHECK(t, links[0].holder == b && links[0].root == ZS_CHAIN_ROOT_STRONG);
    CHECK(t, links[1].holder == c && links[2].holder == a && links[4].holder == c);
    CHECK_EQ(t, chains_of(t, rt, c, 1, links), 2); /* max_chains: the nearest only */
    /* Too small a buffer: the count says how many links are needed. */
    uint32_t needed = 0;
    CHECK_OK(t, zs_reference_chains(rt, c, 0, links, 1, &needed));
    CHECK_EQ(t, needed, 5);
    CHECK(t, links[0].holder == b);
    CHECK_OK(t, zs_reference_chains(rt, c, 0, NULL, 0, &needed));
    CHECK_EQ(t, needed, 5);
    CHECK_OK(t, zs_release_strong_ref(rt, b));

    /* A root target is a chain of itself alone (nearest), then the others. */
    ROOT(t, rt, c);
    CHECK_OK(t, zs_add_strong_ref(rt, c));
    CHECK_EQ(t, chains_of(t, rt, c, 0, links), 4);
    CHECK(t, links[0].holder == c && links[0].member == ZS_CHAIN_END);
    CHECK_EQ(t, links[0].root, ZS_CHAIN_ROOT_ADDED | ZS_CHAIN_ROOT_STRONG);
    CHECK_OK(t, zs_release_strong_ref(rt, c));
    UNROOT(t, rt, c);

    /* Garbage: the killable references to it are no edges; an outer is. */
    zs_ref inner = MAKE(t, rt, fx.node, c);
    ROOT(t, rt, inner);
    CHECK_OK(t, zs_mark_as_garbage(rt, c));
    CHECK_EQ(t, chains_of(t, rt, c, 0, links), 2);
    CHECK(t, links[0].holder == inner && links[0].member == ZS_CHAIN_OUTER);
    CHECK(t, links[1].holder == c);
    UNROOT(t, rt, inner);
    CHECK_EQ(t, chains_of(t, rt, c, 0, links), 0);

    /* Freed, stale or bad arguments are refused. */
    COLLECT(t, rt);
    CHECK(t, !alive(rt, c) && !alive(rt, stray) && alive(rt, b));
    CHECK_STATUS(t, zs_reference_chains(rt, c, 0, links, 16, &needed), ZS_E_STALE);
    CHECK_STATUS(t, zs_reference_chains(rt, ZS_NULL_REF, 0, links, 16, &needed), ZS_E_STALE);
    CHECK_STATUS(t, zs_reference_chains(rt, b, 0, NULL, 4, &needed), ZS_E_INVALID);
    CHECK_STATUS(t, zs_reference_chains(rt, b, 0, links, 16, NULL), ZS_E_INVALID);
    VERIFY(t, rt);
    fixture_close(&fx);
}

/* ======================================================================
 * Calls into the managed side
 * ====================================================================== */

typedef struct call_log {
    uint32_t calls;
    zs_ref seen[8];
    uint32_t in_progress[8]; /* zs_calls_in_progress seen by each call */
    zs_ref doomed;           /* the first call unroots it and collects */
    zs_ref born;             /* the first call creates an object of the class */
    const zs_class *cls;
    zs_ref failing; /* calls on it fail */
} call_log;

/* A handler standing in for the managed side: counts calls in params (a
   uint64_t), and on the first call runs a collection that frees `doomed`. */
static zs_status logging_handler(void *user, zs_runtime *rt, zs_ref object, const char *function,
                                 void *params) {
    call_log *log = user;
    if (log->calls < 8) {
        log->seen[log->calls] = object;
        log->in_progress[log->calls] = zs_calls_in_progress(rt);
    }
    log->calls++;
    if (strcmp(function, "tick") != 0 || params == NULL) return ZS_E_INVALID;
    *(uint64_t *)params += 1;
    if (log->calls == 1 && log->doomed != ZS_NULL_REF) {
        zs_remove_from_root(rt, log->doomed);
        zs_object_new(rt, log->cls, ZS_NULL_REF, 0, 0, &log->born, NULL);
        zs_add_to_root(rt, log->born);
        zs_collect_garbage(rt);
    }
    return object == log->failing ? ZS_E_CALL_FAILED : ZS_OK;
}

typedef struct hook_call {
    zs_ref target;
    zs_status status;
} hook_call;

/* A destroy hook that tries to call into the managed side. */
static void calling_hook(void *user, zs_runtime *rt, zs_object *object, zs_destroy_phase phase) {
    (void)object;
    hook_call *h = user;
    uint64_t count = 0;
    if (phase == ZS_BEGIN_DESTROY) h->status = zs_call_function(rt, h->target, "tick", &count);
}

/* A native call reaches the handler with the object, the name and the
   parameter block; zs_call_each calls every object of a class (subclasses
   included) that was live when it began, skipping one a call's collection
   freed and one a call created; failures are reported after every call. */
static void test_calls_into_the_managed_side(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    uint64_t count = 0;
    zs_ref nodes[4];
    for (int i = 0; i < 4; i++) {
        nodes[i] = MAKE(t, rt, fx.node, ZS_NULL_REF);
        ROOT(t, rt, nodes[i]);
    }
    zs_ref leaf = MAKE(t, rt, fx.leaf, ZS_NULL_REF);
    ROOT(t, rt, leaf);
    CHECK_STATUS(t, zs_call_function(rt, nodes[0], "tick", &count), ZS_E_INVALID); /* no handler */
    const zs_class *found = NULL;
    CHECK_OK(t, zs_find_class(rt, zs_class_name(fx.node), &found));
    CHECK(t, found == fx.node);
    CHECK_STATUS(t, zs_find_class(rt, "NoSuchClass", &found), ZS_E_INVALID);
    CHECK(t, found == NULL);
    call_log log = {0};
    log.cls = fx.node;
    zs_set_call_handler(rt, logging_handler, &log);
    CHECK_OK(t, zs_call_function(rt, nodes[1], "tick", &count));
    CHECK(t, log.calls == 1 && log.seen[0] == nodes[1] && count == 1);
    CHECK_EQ(t, log.in_progress[0], 1);
    CHECK_EQ(t, zs_calls_in_progress(rt), 0);
    CHECK_STATUS(t, zs_call_function(rt, nodes[1], "jump", &count), ZS_E_INVALID);
    CHECK_STATUS(t, zs_call_function(rt, nodes[1], NULL, &count), ZS_E_INVALID);

    log = (call_log){.cls = fx.node, .doomed = nodes[2], .failing = nodes[1]};
    count = 0;
    uint32_t called = 99;
    CHECK_STATUS(t, zs_call_each(rt, fx.node, "tick", &count, &called), ZS_E_CALL_FAILED);
    CHECK_EQ(t, called, 3);
    CHECK_EQ(t, count, 3);
    CHECK(t, log.seen[0] == nodes[0] && log.seen[1] == nodes[1] && log.seen[2] == nodes[3]);
    CHECK(t, !alive(rt, nodes[2]) && alive(rt, log.born));
    CHECK_EQ(t, zs_calls_in_progress(rt), 0);
    VERIFY(t, rt);

    /* An object marked as garbage takes no more calls from zs_call_each
       (a destroyed actor is not ticked), though it is live until collected. */
    log = (call_log){.cls = fx.node};
    CHECK_OK(t, zs_mark_as_garbage(rt, nodes[3]));
    CHECK_OK(t, zs_call_each(rt, fx.node, "tick", &count, &called));
    CHECK_EQ(t, called, 3); /* nodes[0], nodes[1] and the one the first pass made */
    for (uint32_t i = 0; i < log.calls && i < 8; i++) CHECK(t, log.seen[i] != nodes[3]);
    CHECK(t, alive(rt, nodes[3]));

    /* Stale objects are never called; a class of no runtime is refused. */
    log = (call_log){.cls = fx.node};
    CHECK_STATUS(t, zs_call_function(rt, nodes[2], "tick", &count), ZS_E_STALE);
    CHECK_EQ(t, log.calls, 0);
    fixture other;
    if (fixture_open(t, &other, 0, 0)) {
        CHECK_STATUS(t, zs_call_each(rt, other.node, "tick", &count, &called), ZS_E_INVALID);
        CHECK_EQ(t, called, 0);
        fixture_close(&other);
    }

    /* A destroy hook may not call into the managed side. */
    hook_call hook = {nodes[0], ZS_OK};
    zs_set_destroy_hook(rt, calling_hook, &hook);
    UNROOT(t, rt, leaf);
    COLLECT(t, rt);
    CHECK_STATUS(t, hook.status, ZS_E_BUSY);
    zs_set_destroy_hook(rt, NULL, NULL);
    CHECK_EQ(t, log.calls, 0);
    fixture_close(&fx);
}

/* The managed call handler: handed the object it was called on, recorded
   as having a conjugate under the call's own lock; either handler replaces
   the other. */
typedef struct managed_log {
    uint32_t calls;
    zs_ref seen;
    zs_object *target;
} managed_log;
static zs_status managed_handler(void *user, zs_runtime *rt, zs_ref object, zs_object *target,
                                 const char *function, void *params) {
    (void)rt, (void)function, (void)params;
    managed_log *log = user;
    log->calls++;
    log->seen = object;
    log->target = target;
    return ZS_OK;
}
static void test_the_managed_call_handler_gets_the_object(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    zs_ref kept = MAKE(t, rt, fx.node, ZS_NULL_REF), dropped = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, kept);
    managed_log log = {0};
    zs_set_managed_call_handler(rt, managed_handler, &log);
    CHECK_OK(t, zs_call_function(rt, dropped, "tick", NULL));
    CHECK(t, log.calls == 1 && log.seen == dropped && log.target == zs_resolve(rt, dropped));
    uint32_t called = 0;
    CHECK_OK(t, zs_call_each(rt, fx.node, "tick", NULL, &called));
    CHECK(t, called == 2 && log.calls == 3);
    /* Recorded as having a conjugate: gathered onto the expiring list (no
       expiry handler is set), not freed behind the managed side's back. */
    CHECK_OK(t, zs_gc_mark_and_gather(rt));
    CHECK_EQ(t, zs_gc_expiring_count(rt), 1);
    CHECK(t, alive(rt, dropped));
    zs_ref taken[4];
    uint32_t count = 0;
    CHECK_OK(t, zs_gc_take_expiring(rt, taken, 4, &count));
    CHECK(t, count == 1 && taken[0] == dropped);
    CHECK_OK(t, zs_gc_purge(rt, 0, NULL));
    CHECK(t, !alive(rt, dropped) && alive(rt, kept));
    /* The plain handler replaces it, and the other way round. */
    call_log plain = {.cls = fx.node};
    uint64_t ticks = 0;
    zs_set_call_handler(rt, logging_handler, &plain);
    CHECK_OK(t, zs_call_function(rt, kept, "tick", &ticks));
    CHECK(t, plain.calls == 1 && log.calls == 3);
    zs_set_managed_call_handler(rt, managed_handler, &log);
    CHECK_OK(t, zs_call_function(rt, kept, "tick", &ticks));
    CHECK(t, plain.calls == 1 && log.calls == 4 && log.target == zs_resolve(rt, kept));
    zs_set_managed_call_handler(rt, NULL, NULL); /* none: the native entries run again */
    CHECK_STATUS(t, zs_call_function(rt, kept, "tick", &ticks), ZS_E_INVALID);
    UNROOT(t, rt, kept);
    fixture_close(&fx);
}

/* Registration refuses descriptions a script could not bind one way: a
   name given twice (properties and functions share one namespace), a
   parameter twice, a struct member or an enum item twice, an enum value its
   storage cannot hold. Nothing is registered by a refused call. */
static zs_status nothing(void *user, zs_runtime *rt, zs_ref self, void *params) {
    (void)user, (void)rt, (void)self, (void)params;
    return ZS_OK;
}
static void test_descriptions_refused(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    const uint32_t header = (uint32_t)sizeof(zs_object), size = header + 8;
    const zs_property_desc twice[] = {{"hp", "Int32", header, 0, NULL},
                                      {"hp", "Int32", header + 4, 0, NULL}};
    const zs_property_desc hp[] = {{"hp", "Int32", header, 0, NULL}};
    const zs_property_desc params[] = {{"a", "Int32", 0, ZS_PARAM_IN, NULL},
                                       {"a", "Int32", 4, ZS_PARAM_IN, NULL}};
    const zs_function_desc hp_function[] = {{"hp", nothing, NULL, 0, 0, NULL, 0}};
    const zs_function_desc two_f[] = {{"f", nothing, NULL, 0, 0, NULL, 0},
                                      {"f", nothing, NULL, 0, 0, NULL, 0}};
    const zs_function_desc bad_params[] = {{"f", nothing, NULL, 0, 8, params, 2}};
    const zs_class *out = NULL;
    uint32_t classes = zs_class_count(rt);
    zs_class_desc desc = {
        .name = "Dup", .instance_size = size, .properties = twice, .property_count = 2};
    CHECK_STATUS(t, zs_class_register(rt, &desc, &out), ZS_E_INVALID);
    desc = (zs_class_desc){.name = "Dup",
                           .instance_size = size,
                           .properties = hp,
                           .property_count = 1,
                           .functions = hp_function,
                           .function_count = 1};
    CHECK_STATUS(t, zs_class_register(rt, &desc, &out), ZS_E_INVALID);
    desc = (zs_class_desc){
        .name = "Dup", .instance_size = size, .functions = two_f, .function_count = 2};
    CHECK_STATUS(t, zs_class_register(rt, &desc, &out), ZS_E_INVALID);
    desc = (zs_class_desc){
        .name = "Dup", .instance_size = size, .functions = bad_params, .function_count = 1};
    CHECK_STATUS(t, zs_class_register(rt, &desc, &out), ZS_E_INVALID);
    CHECK_EQ(t, zs_class_count(rt), classes);
    desc = (zs_class_desc){.name = "Dup",
                           .instance_size = size,
                           .properties = hp,
                           .property_count = 1,
                           .functions = two_f,
                           .function_count = 1};
    CHECK_OK(t, zs_class_register(rt, &desc, &out)); /* the same names, once each */

    const zs_property_desc members[] = {{"x", "Float64", 0, 0, NULL}, {"x", "Float64", 8, 0, NULL}};
    const zs_struct_desc pair = {"Pair", 16, 8, members, 2};
    const zs_type *type = NULL;
    CHECK_STATUS(t, zs_struct_register(rt, &pair, &type), ZS_E_INVALID);
    CHECK_EQ(t, zs_struct_count(rt), 0);

    const zs_enum_item items[] = {{"A", 0}, {"A", 1}};
    const zs_enum_item big[] = {{"A", 0}, {"B", 256}};
    const zs_enum_item negative[] = {{"A", -1}};
    const zs_enum_item edges[] = {{"Low", INT8_MIN}, {"High", INT8_MAX}};
    CHECK_STATUS(t, zs_enum_register(rt, &(zs_enum_desc){"E", "Int32", items, 2}), ZS_E_INVALID);
    CHECK_STATUS(t, zs_enum_register(rt, &(zs_enum_desc){"E", "UInt8", big, 2}), ZS_E_INVALID);
    CHECK_STATUS(t, zs_enum_register(rt, &(zs_enum_desc){"E", "UInt64", negative, 1}),
                 ZS_E_INVALID);
    CHECK_STATUS(t, zs_enum_register(rt, &(zs_enum_desc){"E", "Float32", edges, 2}), ZS_E_INVALID);
    CHECK_EQ(t, zs_enum_count(rt), 0);
    const zs_enum_desc fits = {"E", "Int8", edges, 2};
    CHECK_OK(t, zs_enum_register(rt, &fits));
    CHECK_EQ(t, zs_enum_count(rt), 1);
    fixture_close(&fx);
}

/* A handler that frees the runtime on its second call. */
static zs_status freeing_handler(void *user, zs_runtime *rt, zs_ref object, const char *function,
                                 void *params) {
    (void)object;
    (void)function;
    (void)params;
    uint32_t *calls = user;
    if (++*calls == 2) zs_runtime_free(rt);
    return ZS_OK;
}

/* zs_runtime_free from inside a call (the managed side closed its runtime)
   is deferred: the calls left are skipped, and the last call to return
   frees the runtime (LeakSanitizer and ASan check both halves). */
static void test_runtime_freed_inside_a_call(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    for (int i = 0; i < 5; i++) ROOT(t, fx.rt, MAKE(t, fx.rt, fx.node, ZS_NULL_REF));
    uint32_t calls = 0, called = 0;
    zs_set_call_handler(fx.rt, freeing_handler, &calls);
    CHECK_OK(t, zs_call_each(fx.rt, fx.node, "tick", NULL, &called));
    CHECK_EQ(t, calls, 2);
    CHECK_EQ(t, called, 2);
    /* fx.rt is freed now: fixture_close must not free it again. */
}

/* Three black arrays for the packed-store tests: of object references, of
   4-byte plain data and of strings (elements that own memory). */
typedef struct three_arrays {
    const zs_type *objects, *plains, *strings;
    zs_array *array, *numbers, *texts;
} three_arrays;

/* Open a fixture and make them in its runtime; false (a check failed, the
   fixture closed) when one could not be made. */
static bool three_arrays_open(runner *t, fixture *fx, three_arrays *out) {
    if (!fixture_open(t, fx, 0, 0)) return false;
    zs_runtime *rt = fx->rt;
    const zs_type *object = NULL, *plain = NULL, *string = NULL;
    *out = (three_arrays){0};
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &object));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_ARRAY, object, NULL, &out->objects));
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_PLAIN, 4, 4, &plain));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_ARRAY, plain, NULL, &out->plains));
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_STRING, 1, 1, &string));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_ARRAY, string, NULL, &out->strings));
    zs_ref handle = ZS_NULL_REF;
    CHECK_OK(t, zs_value_new(rt, out->objects, &handle, (void **)&out->array));
    CHECK_OK(t, zs_value_new(rt, out->plains, &handle, (void **)&out->numbers));
    CHECK_OK(t, zs_value_new(rt, out->strings, &handle, (void **)&out->texts));
    if (out->array != NULL && out->numbers != NULL && out->texts != NULL) return true;
    fixture_close(fx);
    return false;
}

/* zs_array_assign: all or nothing. A stale or dying reference anywhere in
   the packed elements refuses the whole store and changes no element; a
   valid store replaces every element, traces what it references, and is
   refused for element types that own memory. */
/* The name index is built at the first lookup by name (objects.c,
   name_index_build): until then creation, renewal and destruction leave it
   alone, and the first lookup finds every live object made before it
   (renewed ones under their new names only, objects in an outer under that
   outer) and none that died. From then on it is kept up to date. Out of
   memory for it, a lookup looks at every object and still answers. */
static void test_name_index_built_at_first_lookup(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    enum { KEPT = 1500 }; /* more than the index's first 1,024 buckets */
    static zs_ref kept[KEPT];
    static uint32_t numbers[KEPT];
    for (uint32_t i = 0; i < KEPT; i++) {
        kept[i] = MAKE(t, rt, fx.node, i % 10 == 0 ? ZS_NULL_REF : kept[i - i % 10]);
        ROOT(t, rt, kept[i]);
        numbers[i] = node_of(rt, kept[i]) ? node_of(rt, kept[i])->header.name_number : 0;
    }
    const uint32_t name_index = node_of(rt, kept[0])->header.name_index;
    /* Renewals and deaths before any lookup. */
    zs_ref first = make_sole(t, rt, fx.node), latest = first;
    const uint32_t first_number = node_of(rt, first)->header.name_number;
    node *raw = NULL;
    for (int i = 0; i < 50; i++) latest = renew(t, rt, fx.node, latest, (uint64_t)i, &raw);
    const uint32_t latest_number = raw->header.name_number;
    ROOT(t, rt, latest); /* a conjugate's object, left alone by the collection */
    zs_ref dead = MAKE(t, rt, fx.node, ZS_NULL_REF);
    const uint32_t dead_number = node_of(rt, dead)->header.name_number;
    enum { STALE = 10000 };
    static zs_ref stale[STALE]; /* handles of objects that die: outers to look under */
    for (uint32_t i = 0; i < STALE; i++) stale[i] = MAKE(t, rt, fx.node, ZS_NULL_REF);
    for (uint32_t i = KEPT - 10; i < KEPT; i++) UNROOT(t, rt, kept[i]); /* the last ten die */
    COLLECT(t, rt);
    CHECK(t, !alive(rt, dead) && !alive(rt, kept[KEPT - 10]) && alive(rt, latest));
    VERIFY(t, rt);

    /* The first lookup allocates the index; later ones do not. */
    zs_memory_stats before, after;
    zs_runtime_memory(rt, &before);
    zs_ref found = ZS_NULL_REF;
    CHECK_OK(t, zs_find_object(rt, ZS_NULL_REF, name_index, numbers[0], &found));
    CHECK_EQ(t, found, kept[0]);
    zs_runtime_memory(rt, &after);
    CHECK(t, after.live_bytes >= before.live_bytes + 4 * 2048); /* buckets for 1,500 objects */
    const uint64_t built = after.live_bytes;
    for (uint32_t i = 0; i < KEPT; i++) {
        zs_ref outer = i % 10 == 0 ? ZS_NULL_REF : kept[i - i % 10];
        const bool lives = i < KEPT - 10;
        if (!lives) outer = ZS_NULL_REF; /* the dead outer's handle is stale: look outside */
        CHECK_OK(t, zs_find_object(rt, outer, name_index, numbers[i], &found));
        CHECK_EQ(t, found, lives ? kept[i] : ZS_NULL_REF);
    }
    CHECK_OK(t, zs_find_object(rt, ZS_NULL_REF, name_index, first_number, &found));
    CHECK_EQ(t, found, ZS_NULL_REF);
    CHECK_OK(t, zs_find_object(rt, ZS_NULL_REF, name_index, latest_number, &found));
    CHECK_EQ(t, found, latest);
    CHECK_OK(t, zs_find_object(rt, ZS_NULL_REF, name_index, dead_number, &found));
    CHECK_EQ(t, found, ZS_NULL_REF);
    /* A stale outer: refused, and nothing found, not even a top-level
       object of that name (a lookup that went on would walk the stale
       outer's bucket, where, for one stale outer in about 2,048 here, the
       top-level object of that name also sits). */
    uint32_t stale_found = 0, stale_refused = 0;
    for (uint32_t g = 0; g < STALE; g++) {
        found = kept[1];
        stale_refused += zs_find_object(rt, stale[g], name_index, numbers[0], &found) == ZS_E_STALE;
        stale_found += found != ZS_NULL_REF;
    }
    CHECK_EQ(t, stale_refused, STALE);
    CHECK_EQ(t, stale_found, 0);
    zs_runtime_memory(rt, &after);
    CHECK_EQ(t, after.live_bytes, built);
    VERIFY(t, rt);

    /* Built: kept up to date by creation, renewal and collection. */
    zs_ref fresh = MAKE(t, rt, fx.node, ZS_NULL_REF);
    const uint32_t fresh_number = node_of(rt, fresh)->header.name_number;
    CHECK_OK(t, zs_find_object(rt, ZS_NULL_REF, name_index, fresh_number, &found));
    CHECK_EQ(t, found, fresh);
    zs_ref sole = make_sole(t, rt, fx.node);
    const uint32_t sole_number = node_of(rt, sole)->header.name_number;
    zs_ref renewed = renew(t, rt, fx.node, sole, 7, &raw);
    ROOT(t, rt, renewed);
    CHECK_OK(t, zs_find_object(rt, ZS_NULL_REF, name_index, sole_number, &found));
    CHECK_EQ(t, found, ZS_NULL_REF);
    CHECK_OK(t, zs_find_object(rt, ZS_NULL_REF, name_index, raw->header.name_number, &found));
    CHECK_EQ(t, found, renewed);
    COLLECT(t, rt); /* `fresh` was shared by the lookup, and nothing keeps it */
    CHECK_OK(t, zs_find_object(rt, ZS_NULL_REF, name_index, fresh_number, &found));
    CHECK_EQ(t, found, ZS_NULL_REF);
    VERIFY(t, rt);
    fixture_close(&fx);

    /* No memory for the index: every object is looked at. */
    if (!fixture_open(t, &fx, 0, 0)) return;
    rt = fx.rt;
    zs_ref outer = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, outer);
    zs_ref inner = MAKE(t, rt, fx.node, outer);
    const uint32_t outer_number = node_of(rt, outer)->header.name_number;
    const uint32_t inner_number = node_of(rt, inner)->header.name_number;
    /* Free slots among the live ones: the scan must step over them. */
    zs_ref gone = MAKE(t, rt, fx.node, ZS_NULL_REF);
    const uint32_t gone_number = node_of(rt, gone)->header.name_number;
    zs_ref last = MAKE(t, rt, fx.node, ZS_NULL_REF);
    ROOT(t, rt, last);
    ROOT(t, rt, inner);
    COLLECT(t, rt);
    CHECK(t, !alive(rt, gone));
    zs_runtime_memory(rt, &before);
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, before.live_bytes + 64));
    CHECK_OK(t, zs_find_object(rt, ZS_NULL_REF, name_index, outer_number, &found));
    CHECK_EQ(t, found, outer);
    CHECK_OK(t, zs_find_object(rt, outer, name_index, inner_number, &found));
    CHECK_EQ(t, found, inner);
    CHECK_OK(t, zs_find_object(rt, ZS_NULL_REF, name_index, inner_number, &found));
    CHECK_EQ(t, found, ZS_NULL_REF); /* not outside its outer */
    CHECK_OK(t, zs_find_object(rt, ZS_NULL_REF, name_index, gone_number, &found));
    CHECK_EQ(t, found, ZS_NULL_REF); /* every slot looked at, the free one stepped over */
    CHECK_OK(t, zs_find_object(rt, ZS_NULL_REF, name_index, node_of(rt, last)->header.name_number,
                               &found));
    CHECK_EQ(t, found, last);
    zs_runtime_memory(rt, &after);
    CHECK_EQ(t, after.live_bytes, before.live_bytes); /* no index was made */
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
    CHECK_OK(t, zs_find_object(rt, outer, name_index, inner_number, &found));
    CHECK_EQ(t, found, inner);
    zs_runtime_memory(rt, &after);
    CHECK(t, after.live_bytes > before.live_bytes); /* built now */
    VERIFY(t, rt);
    fixture_close(&fx);
}

/* A FinishDestroy hook looking objects up while the runtime is freed,
   before any lookup built the name index: it finds nothing and builds no
   index of objects that are then freed without unlinking (which the next
   lookup walked into: a finding of the C API fuzzer). */
typedef struct lookup_hook {
    uint32_t name_index;
    uint32_t numbers[3];
    uint32_t lookups, found;
} lookup_hook;

static void looking_up_hook(void *user, zs_runtime *rt, zs_object *object, zs_destroy_phase phase) {
    (void)object;
    lookup_hook *hook = user;
    if (phase != ZS_FINISH_DESTROY) return;
    for (int i = 0; i < 3; i++) {
        zs_ref found = ZS_NULL_REF;
        if (zs_find_object(rt, ZS_NULL_REF, hook->name_index, hook->numbers[i], &found) == ZS_OK)
            hook->lookups++;
        hook->found += found != ZS_NULL_REF;
    }
}

static void test_lookups_while_the_runtime_is_freed(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    lookup_hook hook = {0};
    for (int i = 0; i < 3; i++) {
        zs_ref ref = MAKE(t, fx.rt, fx.node, ZS_NULL_REF);
        ROOT(t, fx.rt, ref);
        hook.name_index = node_of(fx.rt, ref)->header.name_index;
        hook.numbers[i] = node_of(fx.rt, ref)->header.name_number;
    }
    zs_set_destroy_hook(fx.rt, looking_up_hook, &hook);
    fixture_close(&fx); /* frees the runtime: every object's hooks run */
    CHECK_EQ(t, hook.lookups, 9);
    CHECK_EQ(t, hook.found, 0);
}

static void test_array_assign(runner *t) {
    fixture fx;
    three_arrays arrays;
    if (!three_arrays_open(t, &fx, &arrays)) return;
    zs_runtime *rt = fx.rt;
    const zs_type *objects = arrays.objects, *plains = arrays.plains, *strings = arrays.strings;
    zs_array *array = arrays.array, *numbers = arrays.numbers, *texts = arrays.texts;
    zs_ref a = MAKE(t, rt, fx.node, ZS_NULL_REF), b = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref doomed = MAKE(t, rt, fx.node, ZS_NULL_REF);
    const zs_ref first[3] = {a, ZS_NULL_REF, b};
    CHECK_OK(t, zs_array_assign(rt, ZS_NULL_REF, objects, array, first, 3));
    CHECK(t, array->count == 3 && memcmp(array->data, first, sizeof first) == 0);
    /* A black value is a root: a and b survive a collection through it. */
    COLLECT(t, rt);
    CHECK(t, alive(rt, a) && alive(rt, b) && !alive(rt, doomed));
    /* doomed's handle is stale now: the store is refused, nothing changes. */
    const zs_ref second[2] = {b, doomed};
    CHECK_STATUS(t, zs_array_assign(rt, ZS_NULL_REF, objects, array, second, 2), ZS_E_STALE);
    CHECK(t, array->count == 3 && memcmp(array->data, first, sizeof first) == 0);
    /* Shrinking clears what is left behind. */
    CHECK_OK(t, zs_array_assign(rt, ZS_NULL_REF, objects, array, &b, 1));
    CHECK(t, array->count == 1 && ((zs_ref *)array->data)[0] == b);
    CHECK(t, array->capacity < 3 || ((zs_ref *)array->data)[2] == ZS_NULL_REF);
    CHECK_OK(t, zs_array_assign(rt, ZS_NULL_REF, objects, array, NULL, 0));
    CHECK_EQ(t, array->count, 0);
    /* Plain elements: copied as they are, grown as needed. */
    uint32_t values[100];
    for (uint32_t i = 0; i < 100; i++) values[i] = i * 7;
    CHECK_OK(t, zs_array_assign(rt, ZS_NULL_REF, plains, numbers, values, 100));
    CHECK(t, numbers->count == 100 && memcmp(numbers->data, values, sizeof values) == 0);
    /* Elements that own memory are refused. */
    zs_string none = {0};
    CHECK_STATUS(t, zs_array_assign(rt, ZS_NULL_REF, strings, texts, &none, 1), ZS_E_INVALID);
    CHECK_EQ(t, texts->count, 0);
    VERIFY(t, rt);
    fixture_close(&fx);
}

/* zs_array_insert_packed: all or nothing, as zs_array_assign. Elements go
   in at any index (the later ones move up); a stale reference anywhere in
   the packed elements refuses the whole insertion and moves nothing; a dying
   owner refuses it; element types that own memory are refused. */
static void test_array_insert_packed(runner *t) {
    fixture fx;
    three_arrays arrays;
    if (!three_arrays_open(t, &fx, &arrays)) return;
    zs_runtime *rt = fx.rt;
    const zs_type *objects = arrays.objects, *plains = arrays.plains, *strings = arrays.strings;
    zs_array *array = arrays.array, *numbers = arrays.numbers, *texts = arrays.texts;
    zs_ref a = MAKE(t, rt, fx.node, ZS_NULL_REF), b = MAKE(t, rt, fx.node, ZS_NULL_REF);
    zs_ref doomed = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_array_insert_packed(rt, ZS_NULL_REF, objects, array, 0, &a, 1));
    CHECK_OK(t, zs_array_insert_packed(rt, ZS_NULL_REF, objects, array, 1, &b, 1));
    const zs_ref middle[2] = {ZS_NULL_REF, b};
    CHECK_OK(t, zs_array_insert_packed(rt, ZS_NULL_REF, objects, array, 1, middle, 2));
    const zs_ref expected[4] = {a, ZS_NULL_REF, b, b};
    CHECK(t, array->count == 4 && memcmp(array->data, expected, sizeof expected) == 0);
    /* A black value is a root: a and b survive a collection through it. */
    COLLECT(t, rt);
    CHECK(t, alive(rt, a) && alive(rt, b) && !alive(rt, doomed));
    /* doomed's handle is stale now: refused, nothing moves. */
    const zs_ref stale[2] = {a, doomed};
    CHECK_STATUS(t, zs_array_insert_packed(rt, ZS_NULL_REF, objects, array, 0, stale, 2),
                 ZS_E_STALE);
    CHECK(t, array->count == 4 && memcmp(array->data, expected, sizeof expected) == 0);
    /* Past the end, or too many: refused. */
    CHECK_STATUS(t, zs_array_insert_packed(rt, ZS_NULL_REF, objects, array, 5, &a, 1),
                 ZS_E_INVALID);
    CHECK_OK(t, zs_array_insert_packed(rt, ZS_NULL_REF, objects, array, 4, NULL, 0));
    CHECK_EQ(t, array->count, 4);
    /* Plain elements: grown as needed, the later ones moved up. */
    uint32_t values[100];
    for (uint32_t i = 0; i < 100; i++) values[i] = i * 7;
    CHECK_OK(t, zs_array_insert_packed(rt, ZS_NULL_REF, plains, numbers, 0, values + 50, 50));
    CHECK_OK(t, zs_array_insert_packed(rt, ZS_NULL_REF, plains, numbers, 0, values, 50));
    CHECK(t, numbers->count == 100 && memcmp(numbers->data, values, sizeof values) == 0);
    /* An owner that is gone refuses the insertion (the owner check of every store). */
    zs_ref gone = MAKE(t, rt, fx.node, ZS_NULL_REF);
    COLLECT(t, rt);
    CHECK_STATUS(t, zs_array_insert_packed(rt, gone, plains, numbers, 0, values, 1), ZS_E_STALE);
    CHECK_EQ(t, numbers->count, 100);
    /* Elements that own memory are refused. */
    zs_string none = {0};
    CHECK_STATUS(t, zs_array_insert_packed(rt, ZS_NULL_REF, strings, texts, 0, &none, 1),
                 ZS_E_INVALID);
    CHECK_EQ(t, texts->count, 0);
    VERIFY(t, rt);
    fixture_close(&fx);
}

/* The structural container calls refuse what they cannot do, with
   ZS_E_INVALID and nothing changed: missing arguments, a type of the wrong
   kind, an index past the end, more entries than a container may hold
   (ZS_MAX_ENTRIES, 2^30 in native/src/internal.h: the count is forged, the
   memory is never asked for), a remove past the end. Zero elements are
   fine anywhere up to the end; removing elements that own memory frees
   it; a failed insertion of copies unwinds whole (the slots past the count
   zeroed again, as every container keeps them). */
static void test_container_calls_refuse_bad_arguments(runner *t) {
    fixture fx;
    three_arrays arrays;
    if (!three_arrays_open(t, &fx, &arrays)) return;
    zs_runtime *rt = fx.rt;
    const zs_type *plains = arrays.plains, *strings = arrays.strings;
    zs_array *numbers = arrays.numbers, *texts = arrays.texts;
    const uint32_t max_entries = 1u << 30;
    const uint32_t values[3] = {1, 2, 3};
    CHECK_OK(t, zs_array_insert_packed(rt, ZS_NULL_REF, plains, numbers, 0, values, 3));
    /* zs_array_insert_packed */
    CHECK_STATUS(t, zs_array_insert_packed(rt, ZS_NULL_REF, plains, NULL, 0, values, 1),
                 ZS_E_INVALID);
    CHECK_STATUS(t, zs_array_insert_packed(rt, ZS_NULL_REF, NULL, numbers, 0, values, 1),
                 ZS_E_INVALID);
    CHECK_STATUS(t, zs_array_insert_packed(rt, ZS_NULL_REF, plains, numbers, 0, NULL, 1),
                 ZS_E_INVALID);
    const zs_type *plain = NULL;
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_PLAIN, 4, 4, &plain));
    CHECK_STATUS(t, zs_array_insert_packed(rt, ZS_NULL_REF, plain, numbers, 0, values, 1),
                 ZS_E_INVALID); /* not an array type */
    CHECK_OK(t, zs_array_insert_packed(rt, ZS_NULL_REF, plains, numbers, 3, NULL, 0));
    CHECK_STATUS(t, zs_array_insert_packed(rt, ZS_NULL_REF, plains, numbers, 4, values, 1),
                 ZS_E_INVALID); /* past the end */
    const uint32_t real_count = numbers->count;
    numbers->count = max_entries; /* forged: full */
    CHECK_STATUS(t, zs_array_insert_packed(rt, ZS_NULL_REF, plains, numbers, 0, values, 1),
                 ZS_E_INVALID);
    CHECK_STATUS(t, zs_array_insert(rt, ZS_NULL_REF, plains, numbers, 0, NULL, 1), ZS_E_INVALID);
    /* One short of full: the bounds let one more in, and only memory (an
       injected limit: 2^30 entries are never asked for) refuses it. */
    numbers->count = max_entries - 1;
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 1));
    CHECK_STATUS(t, zs_array_insert_packed(rt, ZS_NULL_REF, plains, numbers, 0, values, 1),
                 ZS_E_NOMEM);
    CHECK_STATUS(t, zs_array_insert(rt, ZS_NULL_REF, plains, numbers, 0, NULL, 1), ZS_E_NOMEM);
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
    numbers->count = real_count;
    CHECK(t, numbers->count == 3 && memcmp(numbers->data, values, sizeof values) == 0);
    /* A dying owner is refused as dying (a proxy's ExpiredConjugateError),
       whatever else is wrong with the call. */
    zs_ref doomed = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_destroy_object(rt, doomed));
    zs_array scratch = {0};
    CHECK_STATUS(t, zs_array_insert_packed(rt, doomed, plains, &scratch, 5, values, 1), ZS_E_DYING);
    CHECK_STATUS(t, zs_array_insert(rt, doomed, plains, &scratch, 5, NULL, 1), ZS_E_DYING);
    CHECK_STATUS(t, zs_array_remove(rt, doomed, plains, &scratch, 5, 1), ZS_E_DYING);
    zs_ref slot = ZS_NULL_REF; /* and a slot type of the wrong kind */
    CHECK_STATUS(t, zs_value_store_ref(rt, doomed, plains, &slot, ZS_NULL_REF), ZS_E_DYING);
    zs_memory_stats in_use;
    zs_runtime_memory(rt, &in_use); /* and no memory to spare: still ZS_E_DYING */
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, in_use.live_bytes));
    CHECK_STATUS(t, zs_array_insert(rt, doomed, plains, &scratch, 0, values, 1), ZS_E_DYING);
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
    CHECK(t, scratch.count == 0 && scratch.data == NULL);
    /* Nothing inserted or removed in an array with no storage: nothing
       touched (no copy of no bytes from no storage: UBSan), no storage. */
    CHECK_OK(t, zs_array_insert(rt, ZS_NULL_REF, plains, &scratch, 0, values, 0));
    CHECK_OK(t, zs_array_remove(rt, ZS_NULL_REF, plains, &scratch, 0, 0));
    CHECK(t, scratch.count == 0 && scratch.data == NULL);
    /* zs_array_insert */
    CHECK_STATUS(t, zs_array_insert(rt, ZS_NULL_REF, plains, NULL, 0, values, 1), ZS_E_INVALID);
    CHECK_STATUS(t, zs_array_insert(rt, ZS_NULL_REF, plains, numbers, 4, values, 1), ZS_E_INVALID);
    CHECK_OK(t, zs_array_insert(rt, ZS_NULL_REF, plains, numbers, 3, values, 0));
    CHECK(t, numbers->count == 3 && memcmp(numbers->data, values, sizeof values) == 0);
    /* zs_array_remove */
    CHECK_STATUS(t, zs_array_remove(rt, ZS_NULL_REF, plains, NULL, 0, 1), ZS_E_INVALID);
    CHECK_STATUS(t, zs_array_remove(rt, ZS_NULL_REF, plains, numbers, 4, 0), ZS_E_INVALID);
    CHECK_STATUS(t, zs_array_remove(rt, ZS_NULL_REF, plains, numbers, 2, 2), ZS_E_INVALID);
    CHECK_OK(t, zs_array_remove(rt, ZS_NULL_REF, plains, numbers, 3, 0));
    CHECK(t, numbers->count == 3 && memcmp(numbers->data, values, sizeof values) == 0);
    CHECK_OK(t, zs_array_remove(rt, ZS_NULL_REF, plains, numbers, 1, 2));
    CHECK(t, numbers->count == 1 && ((uint32_t *)numbers->data)[0] == 1);
    CHECK(t, ((uint32_t *)numbers->data)[1] == 0 && ((uint32_t *)numbers->data)[2] == 0);
    /* From the front: the rest moves down and the slot it left is zeroed
       (no stale copy of a moved element past the count). */
    CHECK_OK(t, zs_array_insert_packed(rt, ZS_NULL_REF, plains, numbers, 1, values + 1, 2));
    CHECK_OK(t, zs_array_remove(rt, ZS_NULL_REF, plains, numbers, 0, 1));
    CHECK(t, numbers->count == 2 && ((uint32_t *)numbers->data)[0] == 2);
    CHECK(t, ((uint32_t *)numbers->data)[1] == 3 && ((uint32_t *)numbers->data)[2] == 0);

    /* Strings own memory: removing them frees it; a failed insertion of
       copies leaves the array as it was, its free slots zeroed. */
    const zs_type *string = NULL;
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_STRING, 1, 1, &string));
    zs_memory_stats empty, full, after;
    zs_runtime_memory(rt, &empty);
    for (uint32_t i = 0; i < 3; i++) {
        CHECK_OK(t, zs_array_insert(rt, ZS_NULL_REF, strings, texts, i, NULL, 1));
        CHECK_OK(t, zs_string_assign(rt, ZS_NULL_REF, string, (zs_string *)texts->data + i,
                                     "a long enough string", 20));
    }
    zs_runtime_memory(rt, &full);
    CHECK_OK(t, zs_array_remove(rt, ZS_NULL_REF, strings, texts, 0, 3));
    zs_runtime_memory(rt, &after);
    CHECK(t, after.live_blocks < full.live_blocks);
    CHECK_EQ(t, after.live_bytes, empty.live_bytes + (uint64_t)texts->capacity * sizeof(zs_string));
    CHECK_OK(t, zs_array_insert(rt, ZS_NULL_REF, strings, texts, 0, NULL, 1));
    zs_string *first = (zs_string *)texts->data;
    CHECK_OK(t, zs_string_assign(rt, ZS_NULL_REF, string, first, "source", 6));
    /* zs_value_assign needs both ends. */
    CHECK_STATUS(t, zs_value_assign(rt, ZS_NULL_REF, string, NULL, first), ZS_E_INVALID);
    CHECK_STATUS(t, zs_value_assign(rt, ZS_NULL_REF, string, first, NULL), ZS_E_INVALID);
    /* Assigned to itself: nothing to copy, so no memory needed. */
    zs_runtime_memory(rt, &after);
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, after.live_bytes));
    CHECK_OK(t, zs_value_assign(rt, ZS_NULL_REF, string, first, first));
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
    CHECK(t, first->length == 6 && memcmp(first->data, "source", 6) == 0);
    /* Every limit from none to enough: a failed insertion in front of the
       element (some copies made, then out of memory) unwinds whole, the
       element moved back and its old place cleared. And inserting nothing
       needs no memory. */
    zs_runtime_memory(rt, &after);
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, after.live_bytes));
    CHECK_OK(t, zs_array_insert(rt, ZS_NULL_REF, strings, texts, 0, first, 0));
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
    uint32_t failed = 0;
    for (uint64_t extra = 0; extra < 512; extra += 4) {
        zs_runtime_memory(rt, &after);
        CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, after.live_bytes + extra));
        zs_status status = zs_array_insert(rt, ZS_NULL_REF, strings, texts, 0, first, 3);
        CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
        if (status == ZS_OK) {
            CHECK_OK(t, zs_array_remove(rt, ZS_NULL_REF, strings, texts, 0, 3));
            first = (zs_string *)texts->data;
            continue;
        }
        failed++;
        CHECK_EQ(t, status, ZS_E_NOMEM);
        CHECK_EQ(t, texts->count, 1);
        first = (zs_string *)texts->data; /* the storage may have grown */
        /* The element the copies went in front of is whole again (the
           unwind destroyed the copies only). */
        CHECK(t, first->length == 6 && memcmp(first->data, "source", 6) == 0);
        const char *bytes = (const char *)texts->data;
        bool zeroed = true;
        for (size_t b = sizeof(zs_string); b < (size_t)texts->capacity * sizeof(zs_string); b++)
            zeroed = zeroed && bytes[b] == 0;
        CHECK(t, zeroed);
    }
    CHECK(t, failed > 0);
    VERIFY(t, rt);
    fixture_close(&fx);
}

/* An array's storage grows by doubling from 4 entries to the first
   capacity that holds what is asked, never twice that; a request it holds
   already allocates nothing and moves nothing: an empty array asked for no
   elements has no storage, and a full one keeps its storage where it is
   (under ASan any realloc moves it: a move here would strand the element
   views a managed side took before, as it is told of no change). */
static void test_array_storage_grows_by_doubling(runner *t) {
    fixture fx;
    three_arrays arrays;
    if (!three_arrays_open(t, &fx, &arrays)) return;
    zs_runtime *rt = fx.rt;
    const zs_type *plains = arrays.plains;
    zs_array *numbers = arrays.numbers;
    zs_memory_stats before, after;
    zs_runtime_memory(rt, &before);
    CHECK_OK(t, zs_array_insert(rt, ZS_NULL_REF, plains, numbers, 0, NULL, 0));
    CHECK_OK(t, zs_array_reserve(rt, ZS_NULL_REF, plains, numbers, 0));
    zs_runtime_memory(rt, &after);
    CHECK(t, numbers->data == NULL && numbers->capacity == 0);
    CHECK_EQ(t, after.live_blocks, before.live_blocks);
    for (uint32_t n = 1; n <= 100; n++) {
        const uint32_t value = n;
        CHECK_OK(t, zs_array_insert_packed(rt, ZS_NULL_REF, plains, numbers, n - 1, &value, 1));
        CHECK(t, numbers->capacity >= n && (numbers->capacity == 4 || numbers->capacity < 2 * n));
    }
    CHECK_OK(t, zs_array_reserve(rt, ZS_NULL_REF, plains, numbers, 128));
    CHECK_EQ(t, numbers->capacity, 128);
    /* Asked for exactly a doubling's capacity: that, not the next one. */
    zs_array *refs = arrays.array;
    CHECK_OK(t, zs_array_reserve(rt, ZS_NULL_REF, arrays.objects, refs, 8));
    CHECK_EQ(t, refs->capacity, 8);
    CHECK_OK(t, zs_array_insert(rt, ZS_NULL_REF, arrays.objects, refs, 0, NULL, 16));
    CHECK(t, refs->capacity == 16 && refs->count == 16);
    for (uint32_t n = 101; n <= 128; n++)
        CHECK_OK(t, zs_array_insert_packed(rt, ZS_NULL_REF, plains, numbers, n - 1, &n, 1));
    const void *storage = numbers->data;
    zs_runtime_memory(rt, &before);
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, before.live_bytes)); /* not a byte more */
    CHECK_OK(t, zs_array_reserve(rt, ZS_NULL_REF, plains, numbers, 128));
    CHECK_OK(t, zs_array_insert(rt, ZS_NULL_REF, plains, numbers, 128, NULL, 0));
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
    CHECK(t, numbers->data == storage && numbers->capacity == 128 && numbers->count == 128);
    for (uint32_t i = 0; i < 128; i++) CHECK_EQ(t, ((const uint32_t *)numbers->data)[i], i + 1);
    VERIFY(t, rt);
    fixture_close(&fx);
}

/* An array may hold exactly ZS_MAX_ENTRIES entries (2^30,
   native/src/internal.h): reserving that many, and inserting the last of
   them, is allowed; one more is refused as invalid. The memory is asked
   for as address space only: an array of one-byte entries whose capacity
   is forged one short of the limit, with no storage, grows by one
   allocation of 1 GiB of which only the last byte is touched (new space is
   zeroed from the old capacity on), and the capacity is then put back to
   what the runtime counted for it (one entry), so the block is freed with
   the value and the counts balance. Where the system refuses even that
   address space (malloc, asked first, says so), the reservation must be
   refused as out of memory and change nothing. */
static void test_an_array_may_hold_exactly_max_entries(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, 0)) return;
    zs_runtime *rt = fx.rt;
    const uint32_t max_entries = 1u << 30;
    const zs_type *byte = NULL, *bytes = NULL;
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_PLAIN, 1, 1, &byte));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_ARRAY, byte, NULL, &bytes));
    zs_ref handle = ZS_NULL_REF;
    zs_array *array = NULL;
    CHECK_OK(t, zs_value_new(rt, bytes, &handle, (void **)&array));
    if (array == NULL) {
        fixture_close(&fx);
        return;
    }
    CHECK_STATUS(t, zs_array_reserve(rt, ZS_NULL_REF, bytes, array, max_entries + 1), ZS_E_INVALID);
    CHECK(t, array->data == NULL && array->capacity == 0);
    void *probe = malloc(max_entries);
    const bool room = probe != NULL;
    free(probe);
    zs_memory_stats before, after;
    zs_runtime_memory(rt, &before);
    array->capacity = max_entries - 1; /* forged: no storage behind it */
    zs_status status = zs_array_reserve(rt, ZS_NULL_REF, bytes, array, max_entries);
    if (!room) {
        CHECK_STATUS(t, status, ZS_E_NOMEM);
        CHECK(t, array->data == NULL && array->capacity == max_entries - 1);
    } else {
        CHECK_OK(t, status);
        CHECK(t, array->data != NULL && array->capacity == max_entries);
    }
    if (status == ZS_OK && array->data != NULL) {
        unsigned char *storage = array->data;
        CHECK_EQ(t, storage[max_entries - 1], 0);
        zs_runtime_memory(rt, &after);
        CHECK_EQ(t, after.live_blocks, before.live_blocks + 1);
        CHECK_EQ(t, after.live_bytes, before.live_bytes + 1);
        /* Full but for one: the last entry goes in, then nothing more. */
        array->count = max_entries - 1; /* forged: the entries are never read */
        const unsigned char last = 0x5A;
        CHECK_OK(t,
                 zs_array_insert_packed(rt, ZS_NULL_REF, bytes, array, max_entries - 1, &last, 1));
        CHECK(t, array->count == max_entries && storage[max_entries - 1] == last);
        CHECK(t, array->data == storage);
        CHECK_STATUS(t, zs_array_insert_packed(rt, ZS_NULL_REF, bytes, array, 0, &last, 1),
                     ZS_E_INVALID);
        CHECK_STATUS(t, zs_array_insert(rt, ZS_NULL_REF, bytes, array, max_entries, NULL, 1),
                     ZS_E_INVALID);
        CHECK_EQ(t, array->count, max_entries);
        storage[0] = 0; /* the one entry counted, empty (ASan fills new blocks) */
        array->count = 0;
        array->capacity = 1;
    } else {
        array->capacity = 0;
    }
    CHECK_OK(t, zs_value_free(rt, handle));
    VERIFY(t, rt);
    fixture_close(&fx);
}

/* Sets, maps and optionals refuse what they cannot do and leak nothing
   (the block count is asserted zero when the runtime is freed): a missing
   hash or key, a type from another runtime or of another kind, a hash
   already holding the most entries it may (forged); a key already there
   (its copy freed), an optional set twice (the old value freed) or out of
   memory at every step of the way. A permanent owner that takes references
   through a container escapes (scanned as a root): what it references lives. */
static void test_container_refusals_and_owners(runner *t) {
    fixture fx;
    if (!fixture_open(t, &fx, 0, ZS_RUNTIME_DISREGARD_WINDOW)) return;
    zs_runtime *rt = fx.rt;
    zs_ref permanent = MAKE(t, rt, fx.node, ZS_NULL_REF);
    enum { WRITERS = 6 };
    zs_ref owners[WRITERS]; /* permanent too: one for each call that writes references */
    for (int i = 0; i < WRITERS; i++) owners[i] = MAKE(t, rt, fx.node, ZS_NULL_REF);
    CHECK_OK(t, zs_close_disregard_for_gc(rt));
    const zs_type *object = NULL, *objects = NULL, *string = NULL, *words = NULL, *maybe = NULL;
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_OBJECT, 8, 8, &object));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_ARRAY, object, NULL, &objects));
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_STRING, 1, 1, &string));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_SET, string, NULL, &words));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_OPTIONAL, string, NULL, &maybe));
    zs_ref handle = ZS_NULL_REF;
    zs_hash *set = NULL;
    char *optional = NULL;
    CHECK_OK(t, zs_value_new(rt, words, &handle, (void **)&set));
    CHECK_OK(t, zs_value_new(rt, maybe, &handle, (void **)&optional));
    node *holder = node_of(rt, permanent);
    if (set == NULL || optional == NULL || holder == NULL) {
        fixture_close(&fx);
        return;
    }
    zs_string key = {(void *)"a key of some length", 20, 20};
    uint32_t index = 99;
    int added = -1;
    CHECK_STATUS(t, zs_hash_add(rt, ZS_NULL_REF, words, NULL, &key, &index, &added), ZS_E_INVALID);
    CHECK_STATUS(t, zs_hash_add(rt, ZS_NULL_REF, words, set, NULL, &index, &added), ZS_E_INVALID);
    CHECK_STATUS(t, zs_hash_add(rt, ZS_NULL_REF, objects, set, &key, &index, &added),
                 ZS_E_INVALID); /* an array type for a set */
    fixture other;
    if (fixture_open(t, &other, 0, 0)) {
        const zs_type *foreign_string = NULL, *foreign = NULL;
        CHECK_OK(t, zs_type_basic(other.rt, ZS_TYPE_STRING, 1, 1, &foreign_string));
        CHECK_OK(t, zs_type_container(other.rt, ZS_TYPE_SET, foreign_string, NULL, &foreign));
        CHECK_STATUS(t, zs_hash_add(rt, ZS_NULL_REF, foreign, set, &key, &index, &added),
                     ZS_E_INVALID); /* another runtime's type */
        fixture_close(&other);
    }
    CHECK_STATUS(t, zs_hash_add(rt, ZS_NULL_REF, NULL, set, &key, &index, &added), ZS_E_INVALID);
    CHECK_OK(t, zs_hash_add(rt, ZS_NULL_REF, words, set, &key, &index, &added));
    CHECK(t, added == 1 && index == 0);
    CHECK_OK(t, zs_hash_add(rt, ZS_NULL_REF, words, set, &key, &index, &added)); /* there */
    CHECK(t, added == 0 && index == 0 && set->entries.count == 1);
    const uint32_t real_count = set->entries.count;
    set->entries.count = 1u << 30; /* forged: as full as a hash may be */
    zs_string other_key = {(void *)"another", 7, 7};
    uint32_t *buckets = set->buckets;
    const uint32_t bucket_count = set->bucket_count;
    set->buckets = NULL;
    set->bucket_count = 0; /* no probe: straight to the size check */
    CHECK_STATUS(t, zs_hash_add(rt, ZS_NULL_REF, words, set, &other_key, &index, &added),
                 ZS_E_INVALID);
    set->entries.count = real_count;
    set->buckets = buckets;
    set->bucket_count = bucket_count;
    /* An optional set twice, then at every limit: the old value and any
       failed copy freed. */
    CHECK_OK(t, zs_optional_set(rt, ZS_NULL_REF, maybe, optional, &key));
    CHECK_OK(t, zs_optional_set(rt, ZS_NULL_REF, maybe, optional, &other_key));
    for (uint64_t extra = 0; extra < 128; extra += 4) {
        zs_memory_stats memory;
        zs_runtime_memory(rt, &memory);
        CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, memory.live_bytes + extra));
        (void)zs_optional_set(rt, ZS_NULL_REF, maybe, optional, &key);
        (void)zs_hash_add(rt, ZS_NULL_REF, words, set, &other_key, &index, &added);
        CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
    }
    /* A failed add adds nothing: at every limit from none to enough, a new
       long key into a full set (8 of 8 entries, 8 of 16 buckets) goes in,
       or leaves the entries and the buckets as they were; the entries'
       storage may have grown (the rehash after it failed), but never for
       a key that could not even be copied (fewer bytes than its text). */
    zs_hash *spare = NULL;
    CHECK_OK(t, zs_value_new(rt, words, &handle, (void **)&spare));
    char texts[8][2] = {"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"};
    for (uint32_t i = 0; spare != NULL && i < 8; i++) {
        zs_string short_key = {texts[i], 2, 2};
        CHECK_OK(t, zs_hash_add(rt, ZS_NULL_REF, words, spare, &short_key, &index, &added));
    }
    char long_text[200];
    memset(long_text, 'x', sizeof long_text);
    zs_string long_key = {long_text, sizeof long_text, sizeof long_text};
    uint32_t refused = 0;
    for (uint64_t extra = 0; spare != NULL && extra < 2048; extra += 8) {
        const uint32_t capacity = spare->entries.capacity, buckets = spare->bucket_count;
        CHECK(t, spare->entries.count == 8 && buckets == 16);
        zs_memory_stats in_use;
        zs_runtime_memory(rt, &in_use);
        CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, in_use.live_bytes + extra));
        zs_status status = zs_hash_add(rt, ZS_NULL_REF, words, spare, &long_key, &index, &added);
        CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
        if (status == ZS_OK) break;
        refused++;
        CHECK_EQ(t, status, ZS_E_NOMEM);
        CHECK_EQ(t, spare->entries.count, 8);
        zs_memory_stats after;
        zs_runtime_memory(rt, &after); /* the key's copy freed, its text too */
        CHECK_EQ(t, after.live_blocks, in_use.live_blocks);
        CHECK(t, spare->entries.capacity == capacity || extra >= sizeof long_text);
        CHECK_EQ(t, spare->bucket_count, buckets);
    }
    CHECK(t, refused > 0 && spare != NULL && spare->entries.count == 9);
    /* Plain data into a permanent object needs no memory more than its
       storage: nothing to scan, so it is not listed as a root (the root
       list, never used yet in this runtime, would have to be allocated). */
    const zs_type *plain = NULL, *plains = NULL;
    CHECK_OK(t, zs_type_basic(rt, ZS_TYPE_PLAIN, 4, 4, &plain));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_ARRAY, plain, NULL, &plains));
    zs_array numbers = {0};
    const uint32_t values[2] = {1, 2};
    CHECK_OK(t, zs_array_reserve(rt, permanent, plains, &numbers, 2));
    zs_memory_stats in_use;
    zs_runtime_memory(rt, &in_use);
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, in_use.live_bytes));
    CHECK_OK(t, zs_array_insert_packed(rt, permanent, plains, &numbers, 0, values, 2));
    CHECK_OK(t, zs_debug_set(rt, ZS_DEBUG_ALLOC_LIMIT, 0));
    CHECK(t, numbers.count == 2 && ((const uint32_t *)numbers.data)[1] == 2);
    CHECK_OK(t, zs_value_clear(rt, permanent, plains, &numbers));
    /* Writing no references does not escape it (counted below: the roots). */
    zs_array *own = (zs_array *)&holder->list; /* laid out as a zs_array */
    CHECK_OK(t, zs_array_insert(rt, permanent, objects, own, 0, NULL, 0));
    CHECK_OK(t, zs_array_insert_packed(rt, permanent, objects, own, 0, NULL, 0));
    CHECK_OK(t, zs_array_remove(rt, permanent, objects, own, 0, 0));
    /* References written into a permanent object's values: it escapes
       (scanned as a root from then on: listed and kept in the root list),
       whichever call writes them. Each call has an owner of its own: one
       call's escape covers no other. The first three write into the
       owner's own list, whose targets the collection must then keep; the
       others into values outside the object, which no mark reads, so
       only the owner's escape is seen (the count of roots kept). */
    const zs_type *refs = NULL, *maybe_ref = NULL;
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_SET, object, NULL, &refs));
    CHECK_OK(t, zs_type_container(rt, ZS_TYPE_OPTIONAL, object, NULL, &maybe_ref));
    zs_ref targets[WRITERS];
    for (int i = 0; i < WRITERS; i++) targets[i] = MAKE(t, rt, fx.node, ZS_NULL_REF);
    node *lists[3] = {node_of(rt, owners[0]), node_of(rt, owners[1]), node_of(rt, owners[2])};
    if (lists[0] == NULL || lists[1] == NULL || lists[2] == NULL || zs_type_size(maybe_ref) > 64) {
        fixture_close(&fx);
        return;
    }
    CHECK_OK(
        t, zs_array_insert(rt, owners[0], objects, (zs_array *)&lists[0]->list, 0, &targets[0], 1));
    CHECK_OK(t, zs_array_insert_packed(rt, owners[1], objects, (zs_array *)&lists[1]->list, 0,
                                       &targets[1], 1));
    CHECK_OK(t,
             zs_array_assign(rt, owners[2], objects, (zs_array *)&lists[2]->list, &targets[2], 1));
    zs_hash held = {0};
    CHECK_OK(t, zs_hash_add(rt, owners[3], refs, &held, &targets[3], &index, &added));
    _Alignas(16) char maybe_memory[64] = {0};
    CHECK_OK(t, zs_optional_set(rt, owners[4], maybe_ref, maybe_memory, &targets[4]));
    zs_ref slot = ZS_NULL_REF;
    CHECK_OK(t, zs_value_store_ref(rt, owners[5], object, &slot, targets[5]));
    COLLECT(t, rt);
    for (int i = 0; i < 3; i++) CHECK(t, alive(rt, targets[i]));
    CHECK_EQ(t, gc_stats(rt).roots, WRITERS);
    CHECK_EQ(t, slot, targets[5]);
    VERIFY(t, rt);
    CHECK_OK(t, zs_value_clear(rt, owners[3], refs, &held));
    CHECK_OK(t, zs_value_clear(rt, owners[4], maybe_ref, maybe_memory));
    fixture_close(&fx);
}

/* ======================================================================
 * Main
 * ====================================================================== */

static const test_case tests[] = {
    TEST(test_runtime_create_free),
    TEST(test_purge_of_a_full_dying_list),
    TEST(test_conjugates_dropped_in_a_destroy_hook),
    TEST(test_retired_slot_frees_its_block),
    TEST(test_conjugates_dropped),
    TEST(test_conjugates_dropped_during_incremental_cycle),
    TEST(test_class_defaults_reach_every_creation),
    TEST(test_creation_renews_a_dropped_object),
    TEST(test_name_index_built_at_first_lookup),
    TEST(test_lookups_while_the_runtime_is_freed),
    TEST(test_array_assign),
    TEST(test_array_insert_packed),
    TEST(test_container_calls_refuse_bad_arguments),
    TEST(test_container_refusals_and_owners),
    TEST(test_array_storage_grows_by_doubling),
    TEST(test_an_array_may_hold_exactly_max_entries),
    TEST(test_runtimes_isolated),
    TEST(test_live_handles),
    TEST(test_class_schema_flattening),
    TEST(test_class_invalid_members),
    TEST(test_registration_failures_keep_memory_counts),
    TEST(test_object_header_and_zeroing),
    TEST(test_name_interning),
    TEST(test_auto_names),
    TEST(test_handle_reuse),
    TEST(test_roots_and_strong_refs),
    TEST(test_references_keep_objects),
    TEST(test_unreachable_cycles),
    TEST(test_weak_members),
    TEST(test_outer_is_traced),
    TEST(test_mark_as_garbage_kills_references),
    TEST(test_garbage_kept_by_outer_and_roots),
    TEST(test_destroy_hook_phases),
    TEST(test_destroy_hook_refuses_mutation),
    TEST(test_runtime_free_calls_hook),
    TEST(test_conjugate_expiry),
    TEST(test_object_new_conjugate),
    TEST(test_disregard_window),
    TEST(test_plain_writes_into_permanent_objects_need_no_root_entry),
    TEST(test_gc_stats),
    TEST(test_capacity),
    TEST(test_memory_accounting),
    TEST(test_verify_detects_corruption),
    THREADED_TEST(test_million_object_chain),
    TEST(test_random_graphs),
    TEST(test_memberless_class),
    TEST(test_partial_purge_verifies),
    TEST(test_find_object_across_purges),
    TEST(test_huge_class),
    TEST(test_object_slabs),
    TEST(test_reference_chains),
    TEST(test_calls_into_the_managed_side),
    TEST(test_the_managed_call_handler_gets_the_object),
    TEST(test_descriptions_refused),
    TEST(test_runtime_freed_inside_a_call),
};

static double now_ms(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* What to run: the tests whose name contains one of the filters (all when
   there is none), only the THREADED_TEST ones with --threaded; --list
   prints their names instead of running them. */
typedef struct selection {
    const char **filters;
    unsigned *matched; /* per filter: how many tests it selected */
    int filter_count;
    bool threaded_only;
    bool list;
} selection;

/* Whether the selection takes test; counts the filters that match it. */
static bool selected(selection *sel, const test_case *test) {
    if (sel->threaded_only && !test->threaded) return false;
    if (sel->filter_count == 0) return true;
    bool any = false;
    for (int f = 0; f < sel->filter_count; f++) {
        if (strstr(test->name, sel->filters[f]) == NULL) continue;
        sel->matched[f]++;
        any = true;
    }
    return any;
}

/* Run (or list) the selected tests of one table. A test whose THREADED_TEST
   tag does not match what it did fails: the ThreadSanitizer smoke run
   (tools/tsan.sh --smoke) runs the tagged tests and only those. */
static void run_table(const test_case *table, size_t count, selection *sel, unsigned *passed,
                      unsigned *failed) {
    runner t = {0};
    for (size_t i = 0; i < count; i++) {
        if (!selected(sel, &table[i])) continue;
        if (sel->list) {
            printf("%s%s\n", table[i].name, table[i].threaded ? " (threaded)" : "");
            (*passed)++;
            continue;
        }
        t.test = table[i].name;
        t.failures = 0;
        t.started_threads = false;
        double start = now_ms();
        table[i].run(&t);
        double elapsed = now_ms() - start;
        if (t.started_threads != table[i].threaded) {
            t.failures++;
            fprintf(stderr, "[%s] %s\n", table[i].name,
                    t.started_threads ? "started threads but is not a THREADED_TEST: "
                                        "tools/tsan.sh --smoke would not run it"
                                      : "is a THREADED_TEST but started no thread");
        }
        if (t.failures == 0) (*passed)++;
        else (*failed)++;
        printf("%s %s (%.0f ms)%s\n", t.failures == 0 ? "ok  " : "FAIL", table[i].name, elapsed,
               t.failures > MAX_REPORTED_FAILURES ? " (some failures not shown)" : "");
        fflush(stdout);
    }
}

/* Usage: test_heap [--threaded] [--list] [substring...]. Exit status 0
   when every selected test passed, 1 when one failed, 2 when the selection
   is empty or a filter matches no test (a typo must not pass as "0 failed"). */
int main(int argc, char **argv) {
    selection sel = {0};
    sel.filters = calloc((size_t)argc, sizeof *sel.filters);
    sel.matched = calloc((size_t)argc, sizeof *sel.matched);
    bool usage_ok = sel.filters != NULL && sel.matched != NULL;
    for (int i = 1; usage_ok && i < argc; i++) {
        if (strcmp(argv[i], "--threaded") == 0) sel.threaded_only = true;
        else if (strcmp(argv[i], "--list") == 0) sel.list = true;
        else if (strncmp(argv[i], "--", 2) == 0) {
            fprintf(stderr,
                    "unknown option %s (usage: test_heap [--threaded] [--list] [name...])\n",
                    argv[i]);
            usage_ok = false;
        } else sel.filters[sel.filter_count++] = argv[i];
    }
    if (!usage_ok) {
        free(sel.filters);
        free(sel.matched);
        return 2;
    }
    unsigned passed = 0, failed = 0;
    run_table(tests, sizeof tests / sizeof tests[0], &sel, &passed, &failed);
    run_table(advanced_tests, advanced_test_count, &sel, &passed, &failed);
    run_table(thread_tests, thread_test_count, &sel, &passed, &failed);
    run_table(fuzz_finding_tests, fuzz_finding_test_count, &sel, &passed, &failed);
    run_table(engine_tests, engine_test_count, &sel, &passed, &failed);
    run_table(tick_tests, tick_test_count, &sel, &passed, &failed);
    run_table(broadcast_tests, broadcast_test_count, &sel, &passed, &failed);
    int status = failed == 0 ? 0 : 1;
    for (int f = 0; f < sel.filter_count; f++) {
        if (sel.matched[f] > 0) continue;
        fprintf(stderr, "no test matches \"%s\"%s\n", sel.filters[f],
                sel.threaded_only ? " among the threaded ones" : "");
        status = 2;
    }
    if (passed + failed == 0) {
        fprintf(stderr, "no test selected\n");
        status = 2;
    }
    if (sel.list) printf("%u listed\n", passed);
    else printf("%u passed, %u failed\n", passed, failed);
    free(sel.filters);
    free(sel.matched);
    return status;
}
