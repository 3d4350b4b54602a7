/*
 * test_broadcast.c -- delegates called from native code with no scripting
 * layer (zs_delegate_broadcast, zs_delegate_execute: native/src/broadcast.c).
 *
 * A Station owns a multicast, a sparse and a single-cast delegate; Hearers
 * bind their native function `hear(amount: Float64, tag: Int32)` to them.
 * What a hearer does when it hears is its `action` member: record only,
 * unbind everything, grow the binding list (its storage moves), destroy
 * the owner and collect, destroy the next hearer, collect, free the
 * runtime, fail. Each test checks who was called, in what order, and the
 * broadcast's report; under `make sanitize` a read of the delegate's freed
 * storage, or of the freed runtime, is a reported error.
 */
#include "test_support.h"

#include "zsharp_managed.h"

/* ---- the classes ------------------------------------------------------------- */

typedef struct station {
    zs_object header;
    zs_array on_signal; /* MulticastDelegate */
    void *sparse;       /* SparseDelegate */
    zs_binding single;  /* Delegate */
} station;

typedef struct hearer {
    zs_object header;
    int32_t action; /* what hear() does (enum action) */
    int32_t heard;  /* calls of hear() */
} hearer;

/* hear(amount: Float64, tag: Int32); ask(amount: Float64) -> Int32. */
typedef struct signal_params {
    double amount;
    int32_t tag;
} signal_params;
typedef struct ask_params {
    double amount;
    int32_t return_value;
} ask_params;

enum action {
    ACT_RECORD,
    ACT_CLEAR,         /* clear the station's multicast (its storage is freed) */
    ACT_GROW,          /* add 100 bindings to it (its storage moves) */
    ACT_DESTROY_OWNER, /* destroy the station, then collect: the delegate's memory goes */
    ACT_DESTROY_NEXT,  /* destroy the hearer after this one */
    ACT_COLLECT,       /* a full collection */
    ACT_FREE_RUNTIME,  /* zs_runtime_free: deferred to the broadcast's end */
    ACT_FAIL,          /* return ZS_E_NOMEM */
    ACT_UNBIND_SPARSE, /* clear the station's sparse delegate (its list is freed) */
    ACT_MARK_NEXT      /* mark the hearer after this one as garbage (not destroyed yet) */
};

#define HEARERS 8

static const zs_property_desc signal_members[] = {
    {"amount", "Float64", offsetof(signal_params, amount), ZS_PARAM_IN, NULL},
    {"tag", "Int32", offsetof(signal_params, tag), ZS_PARAM_IN, NULL},
};
static const zs_function_desc signal_signature = {"on_signal",           NULL,           NULL, 0,
                                                  sizeof(signal_params), signal_members, 2};
static const zs_property_desc ask_members[] = {
    {"amount", "Float64", offsetof(ask_params, amount), ZS_PARAM_IN, NULL},
    {"return_value", "Int32", offsetof(ask_params, return_value), ZS_PARAM_RETURN, NULL},
};
static const zs_function_desc ask_signature = {"on_ask",           NULL,        NULL, 0,
                                               sizeof(ask_params), ask_members, 2};
static const zs_property_desc other_members[] = {
    {"amount", "Float64", 0, ZS_PARAM_IN, NULL},
};

/* One test's runtime, classes, objects and what the hearers saw. */
typedef struct bench {
    runner *t;
    zs_runtime *rt;
    const zs_type *multicast, *sparse, *single;
    const zs_class *station_class, *hearer_class;
    zs_member station_members[3];
    zs_function_desc hearer_functions[4];
    zs_class_desc station_desc, hearer_desc;
    zs_ref station;
    zs_ref hearers[HEARERS];
    uint32_t hear_name, plain_name, ask_name, other_name, quiet_name, missing_name;
    int log[64]; /* the hearer index of each call, in order */
    uint32_t logged;
    double amount; /* what the last call read */
    int32_t tag;
    bool freed;            /* a hearer freed the runtime */
    zs_status hook_status; /* what a broadcast from the destroy hook returned */
} bench;

/* The hearer index of a handle, or -1. */
static int hearer_index(const bench *b, zs_ref self) {
    for (int i = 0; i < HEARERS; i++)
        if (b->hearers[i] == self) return i;
    return -1;
}

/* Hearer.hear: log the call, then do the hearer's action. */
static zs_status hear_entry(void *user, zs_runtime *rt, zs_ref self, void *params) {
    bench *b = user;
    const signal_params *p = params;
    hearer *h = (hearer *)zs_resolve(rt, self);
    if (h == NULL || p == NULL) return ZS_E_INVALID;
    h->heard++;
    if (b->logged < 64) b->log[b->logged++] = hearer_index(b, self);
    b->amount = p->amount;
    b->tag = p->tag;
    station *st = (station *)zs_resolve(rt, b->station);
    switch ((enum action)h->action) {
    case ACT_RECORD:
        return ZS_OK;
    case ACT_CLEAR:
        return st ? zs_value_clear(rt, b->station, b->multicast, &st->on_signal) : ZS_E_STALE;
    case ACT_GROW:
        for (int i = 0; st != NULL && i < 100; i++)
            CHECK_OK(b->t,
                     zs_multicast_add(rt, b->station, &st->on_signal, self, b->plain_name, 0));
        return ZS_OK;
    case ACT_DESTROY_OWNER:
        CHECK_OK(b->t, zs_destroy_object(rt, b->station));
        CHECK_OK(b->t, zs_collect_garbage(rt));
        CHECK(b->t, zs_resolve(rt, b->station) == NULL);
        return ZS_OK;
    case ACT_DESTROY_NEXT: {
        int next = hearer_index(b, self) + 1;
        CHECK_OK(b->t, zs_destroy_object(rt, b->hearers[next]));
        return ZS_OK;
    }
    case ACT_COLLECT:
        CHECK_OK(b->t, zs_collect_garbage(rt));
        return ZS_OK;
    case ACT_FREE_RUNTIME:
        zs_runtime_free(rt);
        b->freed = true;
        return ZS_OK;
    case ACT_FAIL:
        return ZS_E_NOMEM;
    case ACT_MARK_NEXT:
        CHECK_OK(b->t, zs_mark_as_garbage(rt, b->hearers[hearer_index(b, self) + 1]));
        return ZS_OK;
    case ACT_UNBIND_SPARSE:
        return st ? zs_value_clear(rt, b->station, b->sparse, &st->sparse) : ZS_E_STALE;
    }
    return ZS_E_INVALID;
}

/* Hearer.ask: the amount, doubled, as an Int32. */
static zs_status ask_entry(void *user, zs_runtime *rt, zs_ref self, void *params) {
    bench *b = user;
    ask_params *p = params;
    if (b->logged < 64) b->log[b->logged++] = hearer_index(b, self);
    (void)rt;
    p->return_value = (int32_t)(p->amount * 2);
    return ZS_OK;
}

/* Hearer.other(amount: Float64): another signature. */
static zs_status other_entry(void *user, zs_runtime *rt, zs_ref self, void *params) {
    (void)user;
    (void)rt;
    (void)self;
    (void)params;
    return ZS_OK;
}

/* An interned name's index. */
static uint32_t intern(runner *t, zs_runtime *rt, const char *text) {
    uint32_t index = 0, number = 0;
    CHECK_OK(t, zs_name_intern(rt, text, strlen(text), &index, &number));
    CHECK_EQ(t, number, 0);
    return index;
}

/* A runtime with Station and Hearer, a rooted station and HEARERS rooted
   hearers; false (a failed check) otherwise. */
static bool bench_open(runner *t, bench *b) {
    memset(b, 0, sizeof *b);
    b->t = t;
    CHECK_OK(t, zs_runtime_new(NULL, &b->rt));
    if (b->rt == NULL) return false;
    CHECK_OK(t, zs_type_basic(b->rt, ZS_TYPE_MULTICAST, 0, 0, &b->multicast));
    CHECK_OK(t, zs_type_basic(b->rt, ZS_TYPE_SPARSE, 0, 0, &b->sparse));
    CHECK_OK(t, zs_type_basic(b->rt, ZS_TYPE_DELEGATE, 0, 0, &b->single));
    b->station_members[0] = (zs_member){ZS_MEMBER_VALUE, offsetof(station, on_signal),
                                        b->multicast};
    b->station_members[1] = (zs_member){ZS_MEMBER_VALUE, offsetof(station, sparse), b->sparse};
    b->station_members[2] = (zs_member){ZS_MEMBER_VALUE, offsetof(station, single), b->single};
    b->station_desc = (zs_class_desc){.name = "Station",
                                      .instance_size = sizeof(station),
                                      .members = b->station_members,
                                      .member_count = 3};
    b->hearer_functions[0] = (zs_function_desc){
        "hear", hear_entry, b, 0, sizeof(signal_params), signal_members, 2};
    b->hearer_functions[1] = (zs_function_desc){"ask",       ask_entry, b, 0, sizeof(ask_params),
                                                ask_members, 2};
    b->hearer_functions[2] = (zs_function_desc){"other", other_entry, b, 0, 8, other_members, 1};
    /* An event with the signal's signature and no native default. */
    b->hearer_functions[3] = (zs_function_desc){
        "quiet", NULL, NULL, ZS_FUNCTION_EVENT, sizeof(signal_params), signal_members, 2};
    b->hearer_desc = (zs_class_desc){.name = "Hearer",
                                     .instance_size = sizeof(hearer),
                                     .functions = b->hearer_functions,
                                     .function_count = 4};
    CHECK_OK(t, zs_class_register(b->rt, &b->station_desc, &b->station_class));
    CHECK_OK(t, zs_class_register(b->rt, &b->hearer_desc, &b->hearer_class));
    if (b->station_class == NULL || b->hearer_class == NULL) {
        zs_runtime_free(b->rt);
        return false;
    }
    b->station = MAKE(t, b->rt, b->station_class, ZS_NULL_REF);
    ROOT(t, b->rt, b->station);
    for (int i = 0; i < HEARERS; i++) {
        b->hearers[i] = MAKE(t, b->rt, b->hearer_class, ZS_NULL_REF);
        ROOT(t, b->rt, b->hearers[i]);
    }
    /* zsharp_py interns object bindings' names as "method()"; a host may
       intern the bare name too: both are read alike. */
    b->hear_name = intern(t, b->rt, "hear()");
    b->plain_name = intern(t, b->rt, "hear");
    b->ask_name = intern(t, b->rt, "ask()");
    b->other_name = intern(t, b->rt, "other()");
    b->quiet_name = intern(t, b->rt, "quiet()");
    b->missing_name = intern(t, b->rt, "missing()");
    return true;
}

/* Free the runtime unless a hearer did; the heap verified first. */
static void bench_close(bench *b) {
    if (b->freed) return;
    VERIFY(b->t, b->rt);
    zs_runtime_free(b->rt);
}

static station *station_of(bench *b) { return (station *)zs_resolve(b->rt, b->station); }
static hearer *hearer_of(bench *b, int i) { return (hearer *)zs_resolve(b->rt, b->hearers[i]); }

/* Bind hearer i's function `name` to the station's multicast. */
static void bind(bench *b, int i, uint32_t name) {
    CHECK_OK(b->t, zs_multicast_add(b->rt, b->station, &station_of(b)->on_signal, b->hearers[i],
                                    name, 0));
}

/* Broadcast the station's multicast with amount and tag. */
static zs_status broadcast(bench *b, double amount, int32_t tag, zs_broadcast_report *report) {
    signal_params p = {amount, tag};
    b->logged = 0;
    return zs_delegate_broadcast(b->rt, b->station, b->multicast, &station_of(b)->on_signal,
                                 &signal_signature, &p, report);
}

/* Whether the log holds exactly `want` (count entries). */
static bool logged(const bench *b, const int *want, uint32_t count) {
    if (b->logged != count) return false;
    for (uint32_t i = 0; i < count; i++)
        if (b->log[i] != want[i]) return false;
    return true;
}

#define REPORT(t, r, l, c, f, s)                                                                   \
    do {                                                                                           \
        CHECK_EQ(t, (r).listeners, l);                                                             \
        CHECK_EQ(t, (r).called, c);                                                                \
        CHECK_EQ(t, (r).failed, f);                                                                \
        CHECK_EQ(t, (r).skipped, s);                                                               \
    } while (0)

/* ---- tests ---------------------------------------------------------------------- */

/* Every native listener runs in bind order with the block, the names read
   with or without "()"; a sparse delegate the same, and an unallocated one
   has no listener. The report counts them. */
static void test_broadcast_native_listeners_in_order(runner *t) {
    bench b;
    if (!bench_open(t, &b)) return;
    bind(&b, 2, b.hear_name);
    bind(&b, 0, b.plain_name);
    bind(&b, 1, b.hear_name);
    bind(&b, 2, b.hear_name); /* bound twice: called twice */
    zs_broadcast_report r;
    CHECK_OK(t, broadcast(&b, 2.5, 7, &r));
    const int order[] = {2, 0, 1, 2};
    CHECK(t, logged(&b, order, 4));
    CHECK(t, b.amount == 2.5 && b.tag == 7);
    REPORT(t, r, 4, 4, 0, 0);
    CHECK_EQ(t, hearer_of(&b, 2)->heard, 2);
    CHECK_EQ(t, zs_calls_in_progress(b.rt), 0);

    /* The sparse delegate: no list yet, then one. */
    signal_params p = {1.0, 1};
    b.logged = 0;
    CHECK_OK(t, zs_delegate_broadcast(b.rt, b.station, b.sparse, &station_of(&b)->sparse,
                                      &signal_signature, &p, &r));
    REPORT(t, r, 0, 0, 0, 0);
    zs_array *list = NULL;
    CHECK_OK(t, zs_sparse_bindings(b.rt, b.station, &station_of(&b)->sparse, 1, &list));
    CHECK_OK(t, zs_multicast_add(b.rt, b.station, list, b.hearers[4], b.hear_name, 0));
    CHECK_OK(t, zs_multicast_add(b.rt, b.station, list, b.hearers[3], b.hear_name, 0));
    CHECK_OK(t, zs_delegate_broadcast(b.rt, b.station, b.sparse, &station_of(&b)->sparse,
                                      &signal_signature, &p, &r));
    const int sparse_order[] = {4, 3};
    CHECK(t, logged(&b, sparse_order, 2));
    REPORT(t, r, 2, 2, 0, 0);
    bench_close(&b);
}

/* A listener that clears the delegate (its storage freed) or grows it (its
   storage moved) changes the next broadcast, not this one: the bindings
   were copied first. */
static void test_broadcast_survives_unbinding_and_growth(runner *t) {
    bench b;
    if (!bench_open(t, &b)) return;
    for (int i = 0; i < 4; i++) bind(&b, i, b.hear_name);
    hearer_of(&b, 1)->action = ACT_GROW;
    zs_broadcast_report r;
    CHECK_OK(t, broadcast(&b, 1, 1, &r));
    const int all[] = {0, 1, 2, 3};
    CHECK(t, logged(&b, all, 4));
    CHECK_EQ(t, station_of(&b)->on_signal.count, 104);
    hearer_of(&b, 1)->action = ACT_RECORD;
    hearer_of(&b, 0)->action = ACT_CLEAR; /* frees the 104 bindings' storage */
    CHECK_OK(t, broadcast(&b, 1, 2, &r));
    CHECK_EQ(t, r.called, 104);
    CHECK_EQ(t, hearer_of(&b, 1)->heard, 2 + 100);
    CHECK(t, station_of(&b)->on_signal.data == NULL && station_of(&b)->on_signal.count == 0);
    CHECK_OK(t, broadcast(&b, 1, 3, &r));
    REPORT(t, r, 0, 0, 0, 0);

    /* A sparse delegate whose list a listener frees. */
    zs_array *list = NULL;
    CHECK_OK(t, zs_sparse_bindings(b.rt, b.station, &station_of(&b)->sparse, 1, &list));
    hearer_of(&b, 2)->action = ACT_UNBIND_SPARSE;
    CHECK_OK(t, zs_multicast_add(b.rt, b.station, list, b.hearers[2], b.hear_name, 0));
    CHECK_OK(t, zs_multicast_add(b.rt, b.station, list, b.hearers[3], b.hear_name, 0));
    signal_params p = {1.0, 1};
    b.logged = 0;
    CHECK_OK(t, zs_delegate_broadcast(b.rt, b.station, b.sparse, &station_of(&b)->sparse,
                                      &signal_signature, &p, &r));
    const int sparse_order[] = {2, 3};
    CHECK(t, logged(&b, sparse_order, 2));
    CHECK(t, station_of(&b)->sparse == NULL);
    bench_close(&b);
}

/* A listener destroyed or marked as garbage by an earlier one is skipped;
   one that destroys the owner and collects (the delegate's memory freed)
   lets the rest run; a collection mid-broadcast frees an unrooted
   listener, which is skipped. */
static void test_broadcast_survives_destroy_and_collect(runner *t) {
    bench b;
    if (!bench_open(t, &b)) return;
    for (int i = 0; i < HEARERS; i++) bind(&b, i, b.hear_name);
    hearer_of(&b, 0)->action = ACT_DESTROY_NEXT; /* hearer 1 */
    hearer_of(&b, 2)->action = ACT_COLLECT;      /* frees hearer 1, and hearer 3 (unrooted) */
    UNROOT(t, b.rt, b.hearers[3]);
    hearer_of(&b, 4)->action = ACT_DESTROY_OWNER;
    hearer_of(&b, 5)->action = ACT_MARK_NEXT; /* hearer 6 */
    zs_broadcast_report r;
    CHECK_OK(t, broadcast(&b, 1, 1, &r));
    const int order[] = {0, 2, 4, 5, 7};
    CHECK(t, logged(&b, order, 5));
    REPORT(t, r, HEARERS, 5, 0, 3);
    CHECK(t, !alive(b.rt, b.hearers[1]) && !alive(b.rt, b.hearers[3]));
    CHECK(t, !alive(b.rt, b.station));
    /* The owner is gone: refused before any call. */
    signal_params p = {1.0, 1};
    station gone = {0};
    CHECK_STATUS(t,
                 zs_delegate_broadcast(b.rt, b.station, b.multicast, &gone.on_signal,
                                       &signal_signature, &p, &r),
                 ZS_E_STALE);
    bench_close(&b);
}

/* A listener that frees the runtime: the free waits for the broadcast,
   whose remaining listeners are skipped; the runtime is freed as it
   returns (LeakSanitizer reports it otherwise). */
static void test_broadcast_survives_runtime_free(runner *t) {
    bench b;
    if (!bench_open(t, &b)) return;
    for (int i = 0; i < 3; i++) bind(&b, i, b.hear_name);
    hearer_of(&b, 1)->action = ACT_FREE_RUNTIME;
    zs_broadcast_report r;
    CHECK_OK(t, broadcast(&b, 1, 1, &r));
    CHECK(t, b.freed);
    const int order[] = {0, 1};
    CHECK(t, logged(&b, order, 2));
    REPORT(t, r, 3, 2, 0, 1);
    bench_close(&b);
}

/* Failing listeners do not stop the others: the first failure is returned.
   A function of another signature, or none of that name, fails with
   ZS_E_INVALID; an event with no native default does nothing. */
static void test_broadcast_reports_failures(runner *t) {
    bench b;
    if (!bench_open(t, &b)) return;
    hearer_of(&b, 1)->action = ACT_FAIL;
    bind(&b, 0, b.other_name);   /* another signature: refused */
    bind(&b, 1, b.hear_name);    /* fails with ZS_E_NOMEM */
    bind(&b, 2, b.missing_name); /* no such function */
    bind(&b, 3, b.quiet_name);   /* no native default: nothing runs */
    bind(&b, 4, b.hear_name);
    zs_broadcast_report r;
    CHECK_STATUS(t, broadcast(&b, 1, 1, &r), ZS_E_INVALID);
    const int order[] = {1, 4};
    CHECK(t, logged(&b, order, 2));
    REPORT(t, r, 5, 5, 3, 0);
    bench_close(&b);
}

/* A destroy hook that tries to broadcast (refused: ZS_E_BUSY). */
static void broadcasting_hook(void *user, zs_runtime *rt, zs_object *object,
                              zs_destroy_phase phase) {
    bench *b = user;
    (void)object;
    if (phase != ZS_BEGIN_DESTROY) return;
    station local = {0};
    signal_params p = {0};
    b->hook_status = zs_delegate_broadcast(rt, ZS_NULL_REF, b->multicast, &local.on_signal,
                                           &signal_signature, &p, NULL);
}

/* Bad calls are refused before anything runs. */
static void test_broadcast_refuses_bad_calls(runner *t) {
    bench b;
    if (!bench_open(t, &b)) return;
    bind(&b, 0, b.hear_name);
    station *st = station_of(&b);
    signal_params p = {1, 1};
    zs_broadcast_report r;
    zs_property_desc bad[2] = {signal_members[0], signal_members[1]};
    zs_function_desc sig = signal_signature;
    sig.params = bad;
    CHECK_STATUS(t, zs_delegate_broadcast(b.rt, b.station, b.multicast, NULL, &sig, &p, &r),
                 ZS_E_INVALID);
    CHECK_STATUS(t,
                 zs_delegate_broadcast(b.rt, b.station, b.multicast, &st->on_signal, NULL, &p, &r),
                 ZS_E_INVALID);
    CHECK_STATUS(
        t, zs_delegate_broadcast(b.rt, b.station, b.multicast, &st->on_signal, &sig, NULL, &r),
        ZS_E_INVALID); /* a block is needed */
    bad[1].direction = ZS_PARAM_OUT;
    CHECK_STATUS(t,
                 zs_delegate_broadcast(b.rt, b.station, b.multicast, &st->on_signal, &sig, &p, &r),
                 ZS_E_INVALID);
    bad[1].direction = ZS_PARAM_RETURN; /* a multicast delegate returns nothing */
    CHECK_STATUS(t,
                 zs_delegate_broadcast(b.rt, b.station, b.multicast, &st->on_signal, &sig, &p, &r),
                 ZS_E_INVALID);
    bad[1].direction = ZS_PARAM_IN;
    bad[1].offset = sizeof(signal_params); /* outside the block */
    CHECK_STATUS(t,
                 zs_delegate_broadcast(b.rt, b.station, b.multicast, &st->on_signal, &sig, &p, &r),
                 ZS_E_INVALID);
    bad[1].offset = signal_members[1].offset;
    bad[1].type = NULL;
    CHECK_STATUS(t,
                 zs_delegate_broadcast(b.rt, b.station, b.multicast, &st->on_signal, &sig, &p, &r),
                 ZS_E_INVALID);
    /* A single-cast delegate is executed, not broadcast; a type of no runtime. */
    CHECK_STATUS(
        t, zs_delegate_broadcast(b.rt, b.station, b.single, &st->single, &signal_signature, &p, &r),
        ZS_E_INVALID);
    zs_runtime *other = NULL;
    const zs_type *foreign = NULL;
    CHECK_OK(t, zs_runtime_new(NULL, &other));
    CHECK_OK(t, zs_type_basic(other, ZS_TYPE_SPARSE, 0, 0, &foreign));
    CHECK_OK(t, zs_type_basic(other, ZS_TYPE_MULTICAST, 0, 0, &foreign));
    CHECK_STATUS(
        t,
        zs_delegate_broadcast(b.rt, b.station, foreign, &st->on_signal, &signal_signature, &p, &r),
        ZS_E_INVALID);
    zs_runtime_free(other);
    CHECK_EQ(t, hearer_of(&b, 0)->heard, 0);
    /* From a destroy hook: busy. */
    zs_set_destroy_hook(b.rt, broadcasting_hook, &b);
    b.hook_status = ZS_OK;
    UNROOT(t, b.rt, b.hearers[5]);
    COLLECT(t, b.rt);
    CHECK_STATUS(t, b.hook_status, ZS_E_BUSY);
    zs_set_destroy_hook(b.rt, NULL, NULL);
    bench_close(&b);
}

/* zs_delegate_execute: the one binding's result in the block; nothing when
   unbound or its object is gone. */
static void test_execute_single_cast(runner *t) {
    bench b;
    if (!bench_open(t, &b)) return;
    ask_params p = {21.0, -1};
    int called = -1;
    CHECK_OK(t, zs_delegate_execute(b.rt, b.station, &station_of(&b)->single, &ask_signature, &p,
                                    &called));
    CHECK_EQ(t, called, 0); /* unbound */
    CHECK_OK(t,
             zs_binding_set(b.rt, b.station, &station_of(&b)->single, b.hearers[3], b.ask_name, 0));
    CHECK_OK(t, zs_delegate_execute(b.rt, b.station, &station_of(&b)->single, &ask_signature, &p,
                                    &called));
    CHECK_EQ(t, called, 1);
    CHECK_EQ(t, p.return_value, 42);
    /* A listener whose signature differs (no result) is refused. */
    CHECK_OK(
        t, zs_binding_set(b.rt, b.station, &station_of(&b)->single, b.hearers[3], b.hear_name, 0));
    CHECK_STATUS(
        t,
        zs_delegate_execute(b.rt, b.station, &station_of(&b)->single, &ask_signature, &p, &called),
        ZS_E_INVALID);
    CHECK_EQ(t, called, 1);
    /* Its object destroyed: not called. */
    CHECK_OK(t,
             zs_binding_set(b.rt, b.station, &station_of(&b)->single, b.hearers[3], b.ask_name, 0));
    CHECK_OK(t, zs_destroy_object(b.rt, b.hearers[3]));
    p.return_value = -1;
    CHECK_OK(t, zs_delegate_execute(b.rt, b.station, &station_of(&b)->single, &ask_signature, &p,
                                    &called));
    CHECK_EQ(t, called, 0);
    CHECK_EQ(t, p.return_value, -1);
    /* Two results are refused. */
    zs_property_desc two[2] = {ask_members[1], ask_members[1]};
    zs_function_desc sig = ask_signature;
    sig.params = two;
    CHECK_STATUS(t, zs_delegate_execute(b.rt, b.station, &station_of(&b)->single, &sig, &p, NULL),
                 ZS_E_INVALID);
    bench_close(&b);
}

/* Callables with no managed side to run them are skipped; the broadcast's
   hold on each is released (the count the binding holds is left). */
static void test_broadcast_skips_callables_without_managed_side(runner *t) {
    bench b;
    if (!bench_open(t, &b)) return;
    CHECK_OK(t, zs_multicast_add(b.rt, b.station, &station_of(&b)->on_signal, ZS_NULL_REF, 0, 9));
    bind(&b, 0, b.hear_name);
    zs_broadcast_report r;
    CHECK_OK(t, broadcast(&b, 1, 1, &r));
    REPORT(t, r, 2, 1, 0, 1);
    uint32_t released[4], count = 0;
    CHECK_OK(t, zs_take_released_callables(b.rt, released, 4, &count));
    CHECK_EQ(t, count, 0); /* the binding still holds 9 */
    CHECK_OK(t, zs_multicast_remove(b.rt, b.station, &station_of(&b)->on_signal, 0, 1));
    CHECK_OK(t, zs_take_released_callables(b.rt, released, 4, &count));
    CHECK(t, count == 1 && released[0] == 9);
    bench_close(&b);
}

/* What the test's handlers saw. */
typedef struct seen {
    int calls;
    char function[32];
    uint32_t callable;
    zs_ref object;
    bool target_matches, native_found;
    void *params;
} seen;

/* A zs_call_handler: records the call. */
static zs_status recording_call_handler(void *user, zs_runtime *rt, zs_ref object,
                                        const char *function, void *params) {
    seen *s = user;
    (void)rt;
    s->calls++;
    s->object = object;
    snprintf(s->function, sizeof s->function, "%s", function);
    s->params = params;
    return ZS_OK;
}

/* A zs_managed_listener_handler: records the listener. */
static zs_status recording_listener_handler(void *user, zs_runtime *rt, const zs_listener *listener,
                                            const zs_function_desc *signature, void *params) {
    seen *s = user;
    s->calls++;
    s->callable = listener->callable;
    s->object = listener->object;
    s->target_matches = listener->object == ZS_NULL_REF ||
                        listener->target == zs_resolve(rt, listener->object);
    s->native_found = listener->native != NULL;
    snprintf(s->function, sizeof s->function, "%s", listener->function ? listener->function : "");
    s->params = params;
    return signature == &signal_signature ? ZS_OK : ZS_E_INVALID;
}

/* Without a managed side, a zs_call_handler takes object bindings (the
   name without "()"); a managed listener handler takes every listener,
   with the object, its native function when it fits, and callables. */
static void test_broadcast_through_handlers(runner *t) {
    bench b;
    if (!bench_open(t, &b)) return;
    bind(&b, 2, b.hear_name);
    seen s = {0};
    zs_set_call_handler(b.rt, recording_call_handler, &s);
    signal_params p = {1, 1};
    zs_broadcast_report r;
    CHECK_OK(t, zs_delegate_broadcast(b.rt, b.station, b.multicast, &station_of(&b)->on_signal,
                                      &signal_signature, &p, &r));
    CHECK(t, s.calls == 1 && s.object == b.hearers[2] && strcmp(s.function, "hear") == 0);
    CHECK(t, s.params == &p);
    CHECK_EQ(t, hearer_of(&b, 2)->heard, 0); /* the handler ran instead */
    zs_set_call_handler(b.rt, NULL, NULL);

    memset(&s, 0, sizeof s);
    zs_set_managed_listener_handler(b.rt, recording_listener_handler, &s);
    CHECK_OK(t, broadcast(&b, 1, 1, &r));
    CHECK(t, s.calls == 1 && s.object == b.hearers[2] && s.target_matches && s.native_found);
    CHECK(t, strcmp(s.function, "hear") == 0 && s.callable == 0);
    CHECK_OK(t, zs_multicast_add(b.rt, b.station, &station_of(&b)->on_signal, ZS_NULL_REF, 0, 5));
    bind(&b, 1, b.other_name); /* another signature: native is NULL, the handler decides */
    memset(&s, 0, sizeof s);
    CHECK_OK(t, broadcast(&b, 1, 1, &r));
    REPORT(t, r, 3, 3, 0, 0);
    CHECK(t, s.calls == 3 && s.object == b.hearers[1] && !s.native_found);
    zs_set_managed_listener_handler(b.rt, NULL, NULL);
    bench_close(&b);
}

/* What the unbinding handler saw. */
typedef struct unbinder {
    bench *b;
    uint32_t called[4]; /* callable ids, in call order */
    uint32_t calls;
    uint32_t released_during; /* ids zs_take_released_callables gave during the broadcast */
} unbinder;

/* A listener handler whose first listener removes every binding of the
   station's multicast (their callables' counts drop to zero) and asks for
   the released ids at once. */
static zs_status unbinding_handler(void *user, zs_runtime *rt, const zs_listener *listener,
                                   const zs_function_desc *signature, void *params) {
    unbinder *u = user;
    (void)signature;
    (void)params;
    if (u->calls < 4) u->called[u->calls] = listener->callable;
    if (u->calls++ == 0) {
        station *st = (station *)zs_resolve(rt, u->b->station);
        CHECK_OK(u->b->t, zs_value_clear(rt, u->b->station, u->b->multicast, &st->on_signal));
        uint32_t ids[4], count = 0;
        CHECK_OK(u->b->t, zs_take_released_callables(rt, ids, 4, &count));
        u->released_during = count;
    }
    return ZS_OK;
}

/* A listener that unbinds the callables after it: each is still called
   (the managed side is handed no released id while the broadcast runs, so
   it cannot have dropped one), and the ids are released once it ends. */
static void test_broadcast_keeps_unbound_callables_until_it_ends(runner *t) {
    bench b;
    if (!bench_open(t, &b)) return;
    for (uint32_t id = 11; id <= 13; id++)
        CHECK_OK(t,
                 zs_multicast_add(b.rt, b.station, &station_of(&b)->on_signal, ZS_NULL_REF, 0, id));
    unbinder u = {&b, {0}, 0, 99};
    zs_set_managed_listener_handler(b.rt, unbinding_handler, &u);
    zs_broadcast_report r;
    CHECK_OK(t, broadcast(&b, 1, 1, &r));
    REPORT(t, r, 3, 3, 0, 0);
    CHECK(t, u.calls == 3 && u.called[0] == 11 && u.called[1] == 12 && u.called[2] == 13);
    CHECK_EQ(t, u.released_during, 0);
    uint32_t ids[4], count = 0;
    CHECK_OK(t, zs_take_released_callables(b.rt, ids, 4, &count));
    CHECK_EQ(t, count, 3);
    zs_set_managed_listener_handler(b.rt, NULL, NULL);
    bench_close(&b);
}

const test_case broadcast_tests[] = {
    TEST(test_broadcast_native_listeners_in_order),
    TEST(test_broadcast_survives_unbinding_and_growth),
    TEST(test_broadcast_survives_destroy_and_collect),
    TEST(test_broadcast_survives_runtime_free),
    TEST(test_broadcast_reports_failures),
    TEST(test_broadcast_refuses_bad_calls),
    TEST(test_execute_single_cast),
    TEST(test_broadcast_skips_callables_without_managed_side),
    TEST(test_broadcast_through_handlers),
    TEST(test_broadcast_keeps_unbound_callables_until_it_ends),
};
const size_t broadcast_test_count = sizeof broadcast_tests / sizeof broadcast_tests[0];
