/*
 * test_support.c -- the shared runner checks and fixture (see test_support.h).
 */
#include "test_support.h"

/* ======================================================================
 * Runner
 * ====================================================================== */

bool report(runner *t, bool ok, const char *file, int line) {
    t->checks++;
    if (ok) return false;
    t->failures++;
    if (t->failures > MAX_REPORTED_FAILURES) return false;
    fprintf(stderr, "%s:%d: [%s] CHECK failed: ", file, line, t->test);
    return true;
}

void check_at(runner *t, bool ok, const char *expr, const char *file, int line) {
    if (report(t, ok, file, line)) fprintf(stderr, "%s\n", expr);
}

void check_eq_at(runner *t, uint64_t got, uint64_t want, const char *expr_got,
                 const char *expr_want, const char *file, int line) {
    if (report(t, got == want, file, line))
        fprintf(stderr, "%s == %s (got %" PRIu64 ", want %" PRIu64 ")\n", expr_got, expr_want, got,
                want);
}

void check_status_at(runner *t, zs_status got, zs_status want, const char *expr, const char *file,
                     int line) {
    if (report(t, got == want, file, line))
        fprintf(stderr, "%s returned %d (%s), want %d (%s)\n", expr, (int)got,
                zs_status_message(got), (int)want, zs_status_message(want));
}

/* ======================================================================
 * Heap helpers
 * ====================================================================== */

int start_thread(runner *t, thrd_t *thread, thrd_start_t function, void *argument) {
    t->started_threads = true;
    return thrd_create(thread, function, argument);
}

void verify_at(runner *t, zs_runtime *rt, const char *file, int line) {
    if (gc_stats(rt).mark_threads > 1) t->started_threads = true;
    char message[256];
    zs_status status = zs_heap_verify(rt, message, sizeof message);
    if (report(t, status == ZS_OK, file, line))
        fprintf(stderr, "zs_heap_verify returned %d: %s\n", (int)status, message);
}

void collect_at(runner *t, zs_runtime *rt, zs_status want, const char *file, int line) {
    check_status_at(t, zs_collect_garbage(rt), want, "zs_collect_garbage(rt)", file, line);
    verify_at(t, rt, file, line);
}

const zs_member node_members[6] = {
    {ZS_MEMBER_OBJECT, NODE_REF(0), NULL},    {ZS_MEMBER_OBJECT, NODE_REF(1), NULL},
    {ZS_MEMBER_OBJECT, NODE_REF(2), NULL},    {ZS_MEMBER_OBJECT, NODE_REF(3), NULL},
    {ZS_MEMBER_WEAK_OBJECT, NODE_WEAK, NULL}, {ZS_MEMBER_OBJECT_ARRAY, NODE_LIST, NULL},
};

bool fixture_open_options(runner *t, fixture *fx, const zs_runtime_options *options) {
    memset(fx, 0, sizeof *fx);
    CHECK_OK(t, zs_runtime_new(options, &fx->rt));
    if (fx->rt == NULL) return false;
    zs_class_desc node_desc = {"Node", NULL, sizeof(node), 0, node_members, 6, NULL, 0, NULL, 0};
    static const zs_member leaf_members[] = {
        {ZS_MEMBER_WEAK_OBJECT, (uint32_t)offsetof(leaf, weak), NULL},
    };
    zs_class_desc leaf_desc = {"Leaf", NULL, sizeof(leaf), 0, leaf_members, 1, NULL, 0, NULL, 0};
    CHECK_OK(t, zs_class_register(fx->rt, &node_desc, &fx->node));
    CHECK_OK(t, zs_class_register(fx->rt, &leaf_desc, &fx->leaf));
    if (fx->node == NULL || fx->leaf == NULL) {
        zs_runtime_free(fx->rt);
        fx->rt = NULL;
        return false;
    }
    return true;
}

bool fixture_open(runner *t, fixture *fx, uint32_t max_objects, uint32_t flags) {
    zs_runtime_options options;
    zs_runtime_default_options(&options);
    if (max_objects != 0) options.max_objects = max_objects;
    options.flags = flags;
    return fixture_open_options(t, fx, &options);
}

void fixture_close(fixture *fx) {
    zs_runtime_free(fx->rt);
    fx->rt = NULL;
}

zs_ref make_at(runner *t, zs_runtime *rt, const zs_class *cls, zs_ref outer, const char *file,
               int line) {
    zs_ref ref = ZS_NULL_REF;
    check_status_at(t, zs_object_new(rt, cls, outer, ZS_NAME_AUTO, 0, &ref, NULL), ZS_OK,
                    "zs_object_new", file, line);
    return ref;
}
