/*
 * fuzz_api.c -- libFuzzer harness for the C API (native/include/zsharp.h,
 * with the managed side's protocol, zsharp_managed.h, and zsharp_debug.h).
 *
 * Each input is a program over one runtime: a header picks the runtime's
 * options and stress switches, then every following byte group is one
 * operation (see run_op) with its arguments. The harness registers a fixed
 * zoo of value types and classes covering every member kind (object, weak,
 * object arrays, values of every zs_type kind), and the program may add
 * more types and classes of its own. It then creates objects, stores
 * references, roots and strong references, marks as garbage, builds and
 * dissolves clusters, runs full and incremental collections, takes the
 * expiring list as the managed side does, operates on values in objects
 * and black values (assign, clear, strings, arrays, sets, maps, optionals,
 * delegates, multicast and sparse bindings), interns names, finds objects
 * and classes, asks for reference chains, calls into the "managed side"
 * (a call handler that runs a nested program: it may create, store,
 * collect, call again or free the runtime) and lets a destroy hook try to
 * mutate the heap (every such call must be refused with ZS_E_BUSY). It may
 * also register described classes (zs_class_desc with zs_function_desc
 * functions: an event with a native default, a plain function, an event
 * without one, a static function) whose C entry runs a nested program too,
 * and call them by name (zs_call_function, zs_call_each: the entry runs
 * when no handler is set), directly (zs_call_native), and from inside a
 * destroy hook, where every call is refused. The tick manager is driven
 * too: tick functions (a native entry running a nested program, or a
 * described function by name) registered on picked handles in fuzzed
 * groups, intervals, flags and prerequisites, changed and unregistered,
 * and frames (zs_tick_frame, with or without the collector's share) whose
 * tick functions may register, unregister, collect, start another frame
 * (refused) or free the runtime. Delegates are called from C
 * (zs_delegate_broadcast, zs_delegate_execute) with a described function's
 * signature or another: their object bindings reach the described entries,
 * the call handler, or a managed listener handler that runs a nested
 * program too (zs_set_managed_listener_handler).
 *
 * In expiry mode (a pattern of the header's flags) the program is the
 * managed side of the expiry protocol: it registers an expiry handler
 * (zs_set_expiry_handler) that expires its fake proxies of the objects
 * handed over, and may from inside try collections (refused), look the
 * objects up, hand more over (zs_gc_expire), run a nested program, or free
 * the runtime (the collection then returns ZS_E_STALE and the program
 * stops). The program switches the handler off (the old recipe, taking the
 * expiring list, works again) and on, and runs a native host's collections
 * while it holds proxies (some in bursts larger than a hand-over's batch):
 * full, incremental steps and purges (one between the mark and its
 * gather), mark and gather then purge, zs_gc_expire with a limit.
 *
 * Handles come from a table of every handle the program has seen (live,
 * freed, reused slots, dying), or are raw values from the input. The harness
 * only does what the API allows: it reads an object's memory only while its
 * handle resolves, passes the owner and type a value really has, never
 * writes a set element or map key, never uses the runtime after freeing it.
 * So anything that goes wrong is the library's fault. A finding is a crash,
 * a sanitizer report, a failed zs_heap_verify (checked after every
 * operation), a failed oracle below (check), or a non-zero block count when
 * the runtime is freed (asserted by the library itself).
 *
 * Oracles besides zs_heap_verify:
 *  - an object the program rooted or holds strong references to is never
 *    freed nor dying, and its strong count is what the program made it;
 *  - an object with a conjugate that the program has not taken from the
 *    expiring list, nor expired in its expiry handler (nor forgotten), is
 *    never freed: no live fake proxy names a freed object;
 *  - a write refused because its owner is gone, dying or a destroy hook is
 *    running changes no byte of the value;
 *  - every set and map entry is found again at its own index after a
 *    change, and equal values hash alike;
 *  - a store reads back as the handle stored;
 *  - zs_conjugates_dropped destroys only objects the program flagged as its
 *    conjugate's sole holder, which it made with zs_object_new_conjugate
 *    and whose handle no operation has used since (every handle an
 *    operation takes comes from pick_handle, which ends the freshness of
 *    the exact handle it returns);
 *  - a described function's entry runs only on a live object that is not
 *    dying (nor marked as garbage, from zs_call_each), with the call
 *    counted in progress, never inside a destroy hook, and its status is
 *    what zs_call_function, zs_call_each and zs_call_native return;
 *    without a handler, a function no class of the object describes gives
 *    ZS_E_INVALID;
 *  - the expiry handler is handed only objects that resolve, are dying,
 *    carry the name and garbage flag reported, are ones the program made a
 *    conjugate of, and were not handed over before (since their last
 *    conjugate); it runs counted as a call in progress, with the dying word
 *    set, never inside a destroy hook nor during the program's own
 *    zs_runtime_free, and its objects stay in memory until it returns;
 *    a collection from inside it (and zs_set_expiry_handler) gives
 *    ZS_E_BUSY; with a handler set, zs_gc_take_expiring(_ex) gives ZS_E_BUSY
 *    and takes nothing, no collection returns ZS_E_EXPIRY_PENDING, a full
 *    one leaves nothing pending, and zs_gc_expire hands over at most its
 *    limit (without one: ZS_E_INVALID); a call that collected while the
 *    handler freed the runtime returns ZS_E_STALE, and no other does;
 *  - the dying word is set while a gather is under way, the expiring list
 *    is not empty or a hand-over runs;
 *  - a tick function runs only on a live object that is neither dying nor
 *    marked as garbage, counted in progress, registered and enabled when it
 *    starts, given a finite time >= 0 and its own handle; a frame inside a
 *    frame is refused (ZS_E_BUSY), a bad delta too (ZS_E_INVALID); a
 *    registration of a stale, dying or garbage object, or a bad
 *    description, is refused; every call naming an unregistered tick
 *    function gives ZS_E_STALE;
 *  - a broadcast copies as many listeners as the delegate had non-empty
 *    bindings when it began, calls or skips each at most once, returns
 *    ZS_OK exactly when none it called failed, never runs a listener on a
 *    stale, dying or garbage object (the entry's and handlers' checks), and
 *    is refused inside a destroy hook; the listener handler is given
 *    exactly one of a callable and an object, the object's own memory as
 *    its target, its function's name, and a native function only when the
 *    class describes one of that name.
 *
 * Reproduce a finding: build with tools/cfuzz.sh and run the binary on the
 * input; FUZZ_TRACE=1 prints every operation.
 */
#include "zsharp.h"
#include "zsharp_debug.h"
#include "zsharp_managed.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Read once from the environment at start-up: the only static state. */
static bool trace_ops;

#define MAX_TYPES 64u
#define MAX_STRUCT_MEMBERS 10u
#define MAX_CLASSES 16u
#define MAX_CLASS_MEMBERS 48u /* Huge's members live in fz.huge_members */
#define HUGE_MEMBERS 260u
#define MAX_HANDLES 128u
#define MAX_VALUES 48u
#define MAX_PINS 64u
#define MAX_CONJ 1024u
#define MAX_NAMES 32u
#define MAX_DEPTH 3
#define TOP_OPS 600u
#define ALL_OPS 3000u
#define SCRATCH 512u /* bytes: larger than every value type the harness builds */
#define MAX_FN_CLASSES 4u
#define MAX_TICKS 64u /* tick functions remembered */
#define FN_FUNCTIONS 4u
#define FN_BLOCK 16u      /* bytes of a described function's parameter block */
#define MAX_HAD 4096u     /* objects the program made a conjugate of */
#define MAX_HANDED 512u   /* objects handed to the expiry handler (a ring) */
#define MAX_EXPIRY_NEST 4 /* expiry handlers running zs_gc_expire from inside, nested */

/* ======================================================================
 * The harness's view of types and classes
 * ====================================================================== */

/* A value type as the harness knows it: the API exposes a type's kind and
   sizes but not its element types or struct members, so the harness keeps
   them for every type it created. */
typedef struct htype {
    const zs_type *t;
    uint32_t kind, size, align, flags, entry_size, value_offset;
    const struct htype *element; /* ARRAY, SET, OPTIONAL element; MAP key */
    const struct htype *value;   /* MAP value */
    uint32_t member_count;       /* STRUCT */
    const struct htype *member_type[MAX_STRUCT_MEMBERS];
    uint32_t member_offset[MAX_STRUCT_MEMBERS];
} htype;

typedef struct hmember {
    uint32_t kind; /* zs_member_kind */
    uint32_t offset;
    const htype *type; /* the value type the member holds (OBJECT for ZS_MEMBER_OBJECT...) */
} hmember;

typedef struct hclass {
    const zs_class *cls;
    const zs_class_desc *described; /* its own or nearest ancestor's functions, or NULL */
    uint32_t size;
    uint32_t member_count; /* inherited ones included */
    uint32_t capacity;
    hmember *members; /* own, or the runtime's Huge list */
    hmember own[MAX_CLASS_MEMBERS];
} hclass;

/* Where a value lives: memory the harness may pass to the API, its type,
   and its owner (0: a black value). */
typedef struct loc {
    zs_ref owner;
    const htype *type;
    char *ptr;
    bool key; /* inside a set element or a map key: never written */
} loc;

typedef struct pin {
    zs_ref ref;
    bool rooted;
    uint32_t strong;
    bool destroyed; /* zs_destroy_object: unrooted, refused as dying, strong refs kept */
} pin;

typedef struct fz {
    const uint8_t *data;
    size_t size, pos;
    zs_runtime *rt;
    bool freed;   /* zs_runtime_free was called (inside a call: deferred) */
    bool gone;    /* the runtime no longer exists */
    int depth;    /* nested call-handler programs */
    int in_hook;  /* inside the destroy hook */
    uint32_t ops; /* operations run, nested ones included */
    bool black_roots;
    bool parallel; /* mark_threads > 1 */

    htype types[MAX_TYPES];
    uint32_t type_count;
    const htype *t_plain1, *t_plain4, *t_plain8, *t_obj, *t_weak, *t_str1, *t_str2, *t_deleg,
        *t_multi, *t_sparse, *t_inner, *t_arr_obj;

    hclass classes[MAX_CLASSES];
    uint32_t class_count;
    hmember huge_members[HUGE_MEMBERS];

    zs_ref handles[MAX_HANDLES];
    uint32_t handle_count, handle_next;

    struct {
        zs_ref handle;
        const htype *type;
    } values[MAX_VALUES];
    uint32_t value_count, value_next;

    pin pins[MAX_PINS];
    uint32_t pin_count;
    zs_ref conj[MAX_CONJ]; /* objects with a conjugate the program has not taken */
    uint32_t conj_count;
    bool conj_overflow;     /* a conjugate could not be recorded: that oracle is off */
    zs_ref fresh[MAX_CONJ]; /* made by zs_object_new_conjugate, handle not used since */
    uint32_t fresh_count;

    uint32_t names[MAX_NAMES];
    uint32_t name_count;

    /* the destroy hook's and call handler's behaviour */
    bool hook_set;
    uint32_t hook_mode, hook_calls;
    bool handler_set;
    uint32_t handler_mode;
    bool listener_set; /* a managed listener handler (zsharp_managed.h) is set */
    uint32_t listener_mode;
    uint64_t hook_seen_begin, hook_seen_finish;

    /* Described classes: their descriptions are kept by reference until the
       runtime is freed, so they live here. */
    zs_class_desc fn_descs[MAX_FN_CLASSES];
    zs_function_desc fn_functions[MAX_FN_CLASSES][FN_FUNCTIONS];
    zs_member fn_members[MAX_FN_CLASSES][1];
    uint32_t fn_class_count;
    uint64_t fn_calls;    /* entries run */
    zs_status fn_status;  /* what the last entry returned */
    uint32_t each_depths; /* bit d: a zs_call_each of depth d is calling */

    /* The tick manager: the tick functions the program registered (or
       raw handles), the frames running, the entries run. */
    zs_tick ticks[MAX_TICKS];
    uint32_t tick_count, tick_next;
    uint32_t frame_depths; /* bit d: a zs_tick_frame of depth d is ticking */
    uint64_t tick_calls;   /* tick entries run */

    /* The expiry protocol (expiry mode, from the header): the program is the
       managed side, its fake proxies are fz.conj (live) and fz.had (every
       object it ever made a conjugate of). */
    bool expiry_mode;        /* the program may set an expiry handler */
    bool expiry_set;         /* one is set now */
    uint8_t expiry_style;    /* what the handler does besides expiring (0 mod 4: nothing) */
    int in_expiry;           /* expiry handlers running */
    uint32_t expiry_calls;   /* handler calls */
    uint32_t expiry_active;  /* handler calls that used the API (beyond the checks) */
    uint64_t expiry_objects; /* objects handed over */
    bool tearing_down;       /* the program's own zs_runtime_free runs */
    zs_ref had[MAX_HAD];
    uint32_t had_count;
    bool had_overflow;         /* a conjugate could not be recorded: that check is off */
    zs_ref handed[MAX_HANDED]; /* handed over, and given no conjugate since */
    uint32_t handed_count, handed_next;
} fz;

/* ======================================================================
 * Failures and tracing
 * ====================================================================== */

static void fail(const char *format, ...) {
    va_list args;
    va_start(args, format);
    fprintf(stderr, "fuzz_api: FINDING: ");
    vfprintf(stderr, format, args);
    fprintf(stderr, "\n");
    va_end(args);
    abort();
}

#define check(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) fail(__VA_ARGS__);                                                            \
    } while (0)

static void trace(const fz *f, const char *format, ...) {
    if (!trace_ops) return;
    va_list args;
    va_start(args, format);
    fprintf(stderr, "[%u d%d%s] ", f->ops, f->depth, f->in_hook ? " hook" : "");
    vfprintf(stderr, format, args);
    fprintf(stderr, "\n");
    va_end(args);
}

/* ======================================================================
 * Reading the input
 * ====================================================================== */

static bool exhausted(const fz *f) { return f->pos >= f->size; }

static uint8_t u8(fz *f) { return f->pos < f->size ? f->data[f->pos++] : 0; }

static uint32_t u16(fz *f) {
    uint32_t low = u8(f);
    return low | (uint32_t)u8(f) << 8;
}

static uint32_t u32(fz *f) {
    uint32_t low = u16(f);
    return low | u16(f) << 16;
}

static uint64_t u64(fz *f) {
    uint64_t low = u32(f);
    return low | (uint64_t)u32(f) << 32;
}

static uint32_t below(fz *f, uint32_t n) { return n == 0 ? 0 : u8(f) % n; }

/* ======================================================================
 * Handles
 * ====================================================================== */

static void remember(fz *f, zs_ref ref) {
    if (ref == ZS_NULL_REF) return;
    for (uint32_t i = 0; i < f->handle_count; i++)
        if (f->handles[i] == ref) return;
    if (f->handle_count < MAX_HANDLES) f->handles[f->handle_count++] = ref;
    else f->handles[f->handle_next++ % MAX_HANDLES] = ref;
}

/* Whether `ref` is fresh (see fz.fresh); it no longer is when `used`. */
static bool fresh_take(fz *f, zs_ref ref, bool used) {
    for (uint32_t i = 0; i < f->fresh_count; i++) {
        if (f->fresh[i] != ref) continue;
        if (used) f->fresh[i] = f->fresh[--f->fresh_count];
        return true;
    }
    return false;
}

static zs_ref pick_handle_any(fz *f);

/* A handle for an operation: whatever the operation does with it, the
   object's handle is no longer its conjugate's alone. */
static zs_ref pick_handle(fz *f) {
    zs_ref ref = pick_handle_any(f);
    fresh_take(f, ref, true);
    return ref;
}

/* A handle: mostly one the program has seen (live, freed or dying), else
   null, a raw value, or a seen one with its index or serial bent. */
static zs_ref pick_handle_any(fz *f) {
    uint8_t b = u8(f);
    if (b < 200 && f->handle_count > 0) return f->handles[b % f->handle_count];
    zs_ref base = f->handle_count ? f->handles[u8(f) % f->handle_count] : ZS_MAKE_REF(0, 1);
    switch (b % 8) {
    case 0:
        return ZS_NULL_REF;
    case 1:
        return u64(f);
    case 2:
        return ZS_MAKE_REF(ZS_REF_INDEX(base), ZS_REF_SERIAL(base) + 1);
    case 3:
        return ZS_MAKE_REF(ZS_REF_INDEX(base) + 1, ZS_REF_SERIAL(base));
    case 4:
        return ZS_MAKE_REF(ZS_REF_INDEX(base), ZS_REF_SERIAL(base) - 1);
    case 5:
        return ZS_MAKE_REF(UINT32_MAX, 1);
    case 6:
        return f->value_count ? f->values[u8(f) % f->value_count].handle : base;
    default:
        return ZS_MAKE_REF(u8(f), 1);
    }
}

/* A handle that resolves now, with its object (NULL when none was found). */
static zs_object *pick_live(fz *f, zs_ref *out) {
    for (int tries = 0; tries < 4; tries++) {
        zs_ref ref = pick_handle(f);
        zs_object *object = zs_resolve(f->rt, ref);
        if (object != NULL) {
            *out = ref;
            return object;
        }
    }
    *out = ZS_NULL_REF;
    return NULL;
}

static const hclass *class_of(const fz *f, const zs_object *object) {
    for (uint32_t i = 0; i < f->class_count; i++)
        if (f->classes[i].cls == object->cls) return &f->classes[i];
    fail("an object's class %p is none of the runtime's classes", (const void *)object->cls);
    return NULL;
}

static const hclass *pick_class(fz *f) { return &f->classes[below(f, f->class_count)]; }

/* A name index: automatic, one the program interned, or out of range. */
static uint32_t pick_name(fz *f) {
    uint8_t b = u8(f);
    if (b < 64) return ZS_NAME_AUTO;
    if (b < 240 && f->name_count > 0) return f->names[b % f->name_count];
    if (b < 250) return b % 4; /* "None" and the first class names */
    return b == 250 ? zs_name_count(f->rt) : u32(f);
}

/* ======================================================================
 * Models: pins (roots, strong references) and conjugates
 * ====================================================================== */

static pin *pin_of(fz *f, zs_ref ref, bool create) {
    for (uint32_t i = 0; i < f->pin_count; i++)
        if (f->pins[i].ref == ref) return &f->pins[i];
    if (!create) return NULL;
    for (uint32_t i = 0; i < f->pin_count; i++) {
        if (!f->pins[i].rooted && f->pins[i].strong == 0) {
            f->pins[i] = (pin){ref, false, 0, false};
            return &f->pins[i];
        }
    }
    if (f->pin_count == MAX_PINS) return NULL;
    f->pins[f->pin_count] = (pin){ref, false, 0, false};
    return &f->pins[f->pin_count++];
}

static bool had_conjugate(const fz *f, zs_ref ref) {
    for (uint32_t i = 0; i < f->had_count; i++)
        if (f->had[i] == ref) return true;
    return false;
}

static bool handed_before(const fz *f, zs_ref ref) {
    for (uint32_t i = 0; i < f->handed_count; i++)
        if (f->handed[i] == ref) return true;
    return false;
}

/* The object's handle no longer names a proxy handed over: one made again
   is handed over again. */
static void handed_forget(fz *f, zs_ref ref) {
    for (uint32_t i = 0; i < f->handed_count; i++)
        if (f->handed[i] == ref) f->handed[i] = ZS_NULL_REF;
}

static void handed_add(fz *f, zs_ref ref) {
    if (f->handed_count < MAX_HANDED) f->handed[f->handed_count++] = ref;
    else f->handed[f->handed_next++ % MAX_HANDED] = ref; /* forgetting only misses duplicates */
}

/* The program made a conjugate (a fake proxy) of the object. */
static void conj_add(fz *f, zs_ref ref) {
    handed_forget(f, ref);
    if (!had_conjugate(f, ref)) {
        if (f->had_count == MAX_HAD) f->had_overflow = true;
        else f->had[f->had_count++] = ref;
    }
    for (uint32_t i = 0; i < f->conj_count; i++)
        if (f->conj[i] == ref) return;
    if (f->conj_count == MAX_CONJ) f->conj_overflow = true;
    else f->conj[f->conj_count++] = ref;
}

static void conj_remove(fz *f, zs_ref ref) {
    for (uint32_t i = 0; i < f->conj_count; i++) {
        if (f->conj[i] == ref) {
            f->conj[i] = f->conj[--f->conj_count];
            return;
        }
    }
}

/* The invariants every operation must leave: the heap verifies, pinned
   objects live on, conjugated objects are not freed behind the managed
   side's back. */
static void check_heap(fz *f, const char *after) {
    if (f->freed || f->gone) return;
    char message[512];
    zs_status status = zs_heap_verify(f->rt, message, sizeof message);
    check(status == ZS_OK, "zs_heap_verify after %s: %s", after, message);
    for (uint32_t i = 0; i < f->pin_count; i++) {
        const pin *p = &f->pins[i];
        if (!p->rooted && p->strong == 0) continue;
        check(zs_resolve(f->rt, p->ref) != NULL,
              "after %s: pinned object %u/%u was freed (rooted %d, strong %u)", after,
              ZS_REF_INDEX(p->ref), ZS_REF_SERIAL(p->ref), p->rooted, p->strong);
        check(p->destroyed || zs_object_writable(f->rt, p->ref) != ZS_E_DYING,
              "after %s: pinned object %u is dying", after, ZS_REF_INDEX(p->ref));
        uint32_t strong = 0;
        check(zs_strong_ref_count(f->rt, p->ref, &strong) == ZS_OK && strong == p->strong,
              "after %s: object %u has %u strong references, the program made %u", after,
              ZS_REF_INDEX(p->ref), strong, p->strong);
        int rooted = 0;
        check(zs_is_rooted(f->rt, p->ref, &rooted) == ZS_OK && (rooted != 0) == p->rooted,
              "after %s: object %u rooted %d, the program says %d", after, ZS_REF_INDEX(p->ref),
              rooted, p->rooted);
    }
    for (uint32_t i = 0; i < f->conj_count && !f->conj_overflow; i++)
        check(zs_resolve(f->rt, f->conj[i]) != NULL,
              "after %s: object %u/%u was freed while its conjugate was never expired", after,
              ZS_REF_INDEX(f->conj[i]), ZS_REF_SERIAL(f->conj[i]));
    /* A managed side reads the dying word without the lock to know when its
       own writes must ask first: it is set while a gather is under way, the
       expiring list is not empty or a hand-over runs. */
    if (__atomic_load_n(zs_dying_word(f->rt), __ATOMIC_RELAXED) == 0)
        check(zs_gc_phase_of(f->rt) != ZS_GC_GATHERING && zs_gc_expiring_count(f->rt) == 0 &&
                  f->in_expiry == 0,
              "after %s: the dying word is clear in phase %d with %u expiring (%d hand-overs)",
              after, (int)zs_gc_phase_of(f->rt), zs_gc_expiring_count(f->rt), f->in_expiry);
}

/* ======================================================================
 * Types and classes
 * ====================================================================== */

static const htype *htype_of(const fz *f, const zs_type *t) {
    for (uint32_t i = 0; i < f->type_count; i++)
        if (f->types[i].t == t) return &f->types[i];
    return NULL;
}

/* Record a type the API returned (types are cached: it may be known). */
static const htype *record_type(fz *f, const zs_type *t, const htype *element, const htype *value,
                                uint32_t member_count, const htype *const *member_type,
                                const uint32_t *member_offset) {
    const htype *known = htype_of(f, t);
    if (known != NULL || f->type_count == MAX_TYPES) return known;
    htype *h = &f->types[f->type_count++];
    memset(h, 0, sizeof *h);
    h->t = t;
    h->kind = zs_type_kind_of(t);
    h->size = zs_type_size(t);
    h->align = zs_type_align(t);
    h->flags = zs_type_flags(t);
    h->entry_size = zs_type_entry_size(t);
    h->value_offset = zs_type_value_offset(t);
    h->element = element;
    h->value = value;
    h->member_count = member_count;
    for (uint32_t i = 0; i < member_count; i++) {
        h->member_type[i] = member_type[i];
        h->member_offset[i] = member_offset[i];
    }
    check(h->size <= SCRATCH, "type size %u exceeds the harness's scratch", h->size);
    return h;
}

static const htype *basic(fz *f, zs_type_kind kind, uint32_t size, uint32_t align) {
    const zs_type *t = NULL;
    if (zs_type_basic(f->rt, kind, size, align, &t) != ZS_OK) return NULL;
    return record_type(f, t, NULL, NULL, 0, NULL, NULL);
}

static const htype *container(fz *f, zs_type_kind kind, const htype *element, const htype *value) {
    const zs_type *t = NULL;
    if (element == NULL ||
        zs_type_container(f->rt, kind, element->t, value ? value->t : NULL, &t) != ZS_OK)
        return NULL;
    return record_type(f, t, element, value, 0, NULL, NULL);
}

static uint32_t align_up(uint32_t value, uint32_t align) {
    return (value + align - 1) / align * align;
}

/* A struct of the given member types, laid out in order. */
static const htype *structure(fz *f, const char *name, uint32_t count,
                              const htype *const *members) {
    zs_type_member descs[MAX_STRUCT_MEMBERS];
    uint32_t offsets[MAX_STRUCT_MEMBERS];
    uint32_t at = 0, align = 1;
    for (uint32_t i = 0; i < count; i++) {
        if (members[i] == NULL) return NULL;
        at = align_up(at, members[i]->align);
        offsets[i] = at;
        descs[i] = (zs_type_member){members[i]->t, at};
        at += members[i]->size;
        if (members[i]->align > align) align = members[i]->align;
    }
    const zs_type *t = NULL;
    if (zs_type_struct(f->rt, name, align_up(at ? at : 1, align), align, descs, count, &t) != ZS_OK)
        return NULL;
    return record_type(f, t, NULL, NULL, count, members, offsets);
}

/* Start the next class, with a copy of its parent's members. */
static hclass *class_begin(fz *f, const hclass *parent, bool huge) {
    hclass *c = &f->classes[f->class_count];
    memset(c, 0, sizeof *c);
    c->members = huge ? f->huge_members : c->own;
    c->capacity = huge ? HUGE_MEMBERS : MAX_CLASS_MEMBERS;
    if (parent != NULL) {
        c->described = parent->described;
        memcpy(c->members, parent->members, parent->member_count * sizeof(hmember));
        c->member_count = parent->member_count;
        c->size = parent->size;
    }
    return c;
}

static void member_add(hclass *c, uint32_t kind, const htype *type, uint32_t *at) {
    uint32_t align = kind == ZS_MEMBER_VALUE ? type->align : 8;
    uint32_t size = kind == ZS_MEMBER_OBJECT_ARRAY ? (uint32_t)sizeof(zs_ref_array)
                    : kind == ZS_MEMBER_VALUE      ? type->size
                                                   : 8;
    *at = align_up(*at, align);
    if (c->member_count == c->capacity) fail("a class of more than %u members", c->capacity);
    c->members[c->member_count++] = (hmember){kind, *at, type};
    *at += size;
}

/* Register a class whose own members are c->members[first..]; on success
   c->cls is set and the class is counted. */
static bool register_class(fz *f, hclass *c, const char *name, const zs_class *parent,
                           uint32_t first, uint32_t size, uint32_t flags) {
    zs_member descs[HUGE_MEMBERS];
    for (uint32_t i = first; i < c->member_count; i++)
        descs[i - first] = (zs_member){c->members[i].kind, c->members[i].offset,
                                       c->members[i].kind == ZS_MEMBER_VALUE ? c->members[i].type->t
                                                                             : NULL};
    zs_class_desc desc = {name, parent, size, flags, descs, c->member_count - first,
                          NULL, 0,      NULL, 0};
    c->size = size;
    if (zs_class_register(f->rt, &desc, &c->cls) != ZS_OK) return false;
    f->class_count++;
    return true;
}

/* The fixed zoo: every zs_type kind, nested containers, and classes that
   take every path of the marker (short runs, long runs, scattered
   references in a huge class, strong values, leaves). */
static bool setup_types_and_classes(fz *f, bool with_huge) {
    f->t_plain1 = basic(f, ZS_TYPE_PLAIN, 1, 1);
    f->t_plain4 = basic(f, ZS_TYPE_PLAIN, 4, 4);
    f->t_plain8 = basic(f, ZS_TYPE_PLAIN, 8, 8);
    f->t_obj = basic(f, ZS_TYPE_OBJECT, 8, 8);
    f->t_weak = basic(f, ZS_TYPE_WEAK_OBJECT, 8, 8);
    f->t_str1 = basic(f, ZS_TYPE_STRING, 1, 1);
    f->t_str2 = basic(f, ZS_TYPE_STRING, 2, 2);
    f->t_deleg = basic(f, ZS_TYPE_DELEGATE, 0, 0);
    f->t_multi = basic(f, ZS_TYPE_MULTICAST, 0, 0);
    f->t_sparse = basic(f, ZS_TYPE_SPARSE, 0, 0);
    const htype *inner_members[] = {f->t_obj, f->t_plain4, f->t_str1};
    f->t_inner = structure(f, "Inner", 3, inner_members);
    f->t_arr_obj = container(f, ZS_TYPE_ARRAY, f->t_obj, NULL);
    const htype *arr_str = container(f, ZS_TYPE_ARRAY, f->t_str2, NULL);
    const htype *arr_inner = container(f, ZS_TYPE_ARRAY, f->t_inner, NULL);
    const htype *arr_arr = container(f, ZS_TYPE_ARRAY, f->t_arr_obj, NULL);
    const htype *set_obj = container(f, ZS_TYPE_SET, f->t_obj, NULL);
    const htype *set_str = container(f, ZS_TYPE_SET, f->t_str1, NULL);
    const htype *set_inner = container(f, ZS_TYPE_SET, f->t_inner, NULL);
    const htype *map_obj_obj = container(f, ZS_TYPE_MAP, f->t_obj, f->t_obj);
    const htype *map_str_arr = container(f, ZS_TYPE_MAP, f->t_str1, f->t_arr_obj);
    const htype *map_p4_inner = container(f, ZS_TYPE_MAP, f->t_plain4, f->t_inner);
    const htype *opt_obj = container(f, ZS_TYPE_OPTIONAL, f->t_obj, NULL);
    const htype *opt_str = container(f, ZS_TYPE_OPTIONAL, f->t_str2, NULL);
    const htype *opt_inner = container(f, ZS_TYPE_OPTIONAL, f->t_inner, NULL);
    const htype *set_opt = container(f, ZS_TYPE_SET, opt_obj, NULL);
    const htype *wobj_pair_members[] = {f->t_weak, f->t_plain1, f->t_obj};
    const htype *pair = structure(f, "Pair", 3, wobj_pair_members); /* bitwise, with padding */
    const htype *set_pair = container(f, ZS_TYPE_SET, pair, NULL);
    const htype *big_members[] = {f->t_obj,   f->t_weak,  f->t_arr_obj, f->t_inner,  opt_obj,
                                  f->t_multi, f->t_deleg, map_obj_obj,  f->t_sparse, set_str};
    const htype *big = structure(f, "Big", 10, big_members);
    const htype *arr_big = container(f, ZS_TYPE_ARRAY, big, NULL);
    const htype *map_obj_big = container(f, ZS_TYPE_MAP, f->t_obj, big);
    const htype *all[] = {f->t_plain1,  f->t_plain4,  f->t_plain8, f->t_obj,    f->t_weak,
                          f->t_str1,    f->t_str2,    f->t_deleg,  f->t_multi,  f->t_sparse,
                          f->t_inner,   f->t_arr_obj, arr_str,     arr_inner,   arr_arr,
                          set_obj,      set_str,      set_inner,   map_obj_obj, map_str_arr,
                          map_p4_inner, opt_obj,      opt_str,     opt_inner,   set_opt,
                          pair,         set_pair,     big,         arr_big,     map_obj_big};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] == NULL) return false;

    const uint32_t header = (uint32_t)sizeof(zs_object);
    uint32_t at;
    /* Node: a short run of references, a weak one, an object array, data. */
    hclass *node = class_begin(f, NULL, false);
    at = header;
    for (int i = 0; i < 3; i++) member_add(node, ZS_MEMBER_OBJECT, f->t_obj, &at);
    member_add(node, ZS_MEMBER_WEAK_OBJECT, f->t_weak, &at);
    member_add(node, ZS_MEMBER_OBJECT_ARRAY, f->t_arr_obj, &at);
    member_add(node, ZS_MEMBER_VALUE, f->t_plain8, &at);
    if (!register_class(f, node, "Node", NULL, 0, at, ZS_CLASS_CLUSTER_ROOT | ZS_CLASS_IN_CLUSTER))
        return false;
    /* Vals: a Node with a value of every kind, references after values. */
    hclass *vals = class_begin(f, node, false);
    at = node->size;
    const htype *value_members[] = {
        f->t_str1,  f->t_str2,   f->t_arr_obj, set_obj,     map_obj_obj, opt_obj,      f->t_deleg,
        f->t_multi, f->t_sparse, f->t_inner,   big,         arr_inner,   map_str_arr,  set_inner,
        arr_arr,    opt_inner,   set_opt,      opt_str,     set_str,     map_p4_inner, arr_str,
        arr_big,    f->t_plain4, set_pair,     map_obj_big, pair};
    for (size_t i = 0; i < sizeof value_members / sizeof value_members[0]; i++)
        member_add(vals, ZS_MEMBER_VALUE, value_members[i], &at);
    member_add(vals, ZS_MEMBER_WEAK_OBJECT, f->t_weak, &at);
    member_add(vals, ZS_MEMBER_OBJECT, f->t_obj, &at);
    if (!register_class(f, vals, "Vals", node->cls, node->member_count, at, ZS_CLASS_IN_CLUSTER))
        return false;
    /* Leaf: nothing the marker reads. */
    hclass *leaf = class_begin(f, NULL, false);
    at = header;
    member_add(leaf, ZS_MEMBER_WEAK_OBJECT, f->t_weak, &at);
    member_add(leaf, ZS_MEMBER_VALUE, f->t_plain8, &at);
    if (!register_class(f, leaf, "Leaf", NULL, 0, at, ZS_CLASS_IN_CLUSTER)) return false;
    /* Huge: more scattered references than a marker batch holds. Only in
       some runs: registering it costs milliseconds (zs_class_register
       checks every pair of members for overlap, see classes.c). */
    hclass *huge = class_begin(f, NULL, true);
    at = header;
    for (uint32_t i = 0; with_huge && i < HUGE_MEMBERS; i++) {
        member_add(huge, ZS_MEMBER_OBJECT, f->t_obj, &at);
        at += 8;
    }
    if (with_huge &&
        !register_class(f, huge, "Huge", NULL, 0, at, ZS_CLASS_CLUSTER_ROOT | ZS_CLASS_IN_CLUSTER))
        return false;
    /* Run6: a long adjacent run of references. */
    hclass *run = class_begin(f, NULL, false);
    at = header;
    for (int i = 0; i < 6; i++) member_add(run, ZS_MEMBER_OBJECT, f->t_obj, &at);
    member_add(run, ZS_MEMBER_VALUE, f->t_str2, &at);
    if (!register_class(f, run, "Run6", NULL, 0, at, ZS_CLASS_IN_CLUSTER)) return false;
    /* Plain: data only (zs_object_new_conjugate's init). */
    hclass *plain = class_begin(f, NULL, false);
    at = header;
    member_add(plain, ZS_MEMBER_VALUE, f->t_plain8, &at);
    member_add(plain, ZS_MEMBER_VALUE, f->t_plain4, &at);
    member_add(plain, ZS_MEMBER_VALUE, f->t_plain1, &at);
    return register_class(f, plain, "Plain", NULL, 0, align_up(at, 8), 0);
}

static const htype *pick_type(fz *f) { return &f->types[below(f, f->type_count)]; }

/* ======================================================================
 * Value locations
 * ====================================================================== */

/* A black value the program made that still resolves. */
static bool pick_black(fz *f, loc *out) {
    if (f->value_count == 0) return false;
    uint32_t i = below(f, f->value_count);
    void *ptr = zs_value_resolve(f->rt, f->values[i].handle);
    if (ptr == NULL) return false;
    *out = (loc){ZS_NULL_REF, f->values[i].type, ptr, false};
    return true;
}

/* A member of a live object (its handle resolves now). */
static bool pick_member(fz *f, loc *out) {
    zs_ref ref;
    zs_object *object = pick_live(f, &ref);
    if (object == NULL) return false;
    const hclass *c = class_of(f, object);
    if (c->member_count == 0) return false;
    const hmember *m = &c->members[below(f, c->member_count)];
    *out = (loc){ref, m->type, (char *)object + m->offset, false};
    return true;
}

/* Step into a value: a struct member, an array element, a set element or
   map key (read-only from there on), a map value, a set optional's value. */
static bool step_into(fz *f, loc *l) {
    const htype *t = l->type;
    switch (t->kind) {
    case ZS_TYPE_STRUCT: {
        if (t->member_count == 0) return false;
        uint32_t i = below(f, t->member_count);
        l->ptr += t->member_offset[i];
        l->type = t->member_type[i];
        return true;
    }
    case ZS_TYPE_ARRAY: {
        const zs_array *a = (const zs_array *)l->ptr;
        if (a->count == 0) return false;
        l->ptr = (char *)a->data + (size_t)(u8(f) % a->count) * t->entry_size;
        l->type = t->element;
        return true;
    }
    case ZS_TYPE_SET:
    case ZS_TYPE_MAP: {
        const zs_hash *h = (const zs_hash *)l->ptr;
        if (h->entries.count == 0) return false;
        char *entry = (char *)h->entries.data + (size_t)(u8(f) % h->entries.count) * t->entry_size;
        if (t->kind == ZS_TYPE_MAP && (u8(f) & 1)) {
            l->ptr = entry + t->value_offset;
            l->type = t->value;
        } else {
            l->ptr = entry;
            l->type = t->element;
            l->key = true;
        }
        return true;
    }
    case ZS_TYPE_OPTIONAL:
        if (!l->ptr[t->value_offset]) return false;
        l->type = t->element;
        return true;
    default:
        return false;
    }
}

static bool pick_loc(fz *f, loc *out) {
    bool found = (u8(f) & 3) == 0 ? pick_black(f, out) : pick_member(f, out);
    if (!found) return false;
    for (uint32_t steps = u8(f) % 4; steps > 0; steps--)
        if (!step_into(f, out)) break;
    return true;
}

/* ======================================================================
 * Source values: something valid of a type to copy from or look up
 * ====================================================================== */

typedef struct source {
    const void *ptr;
    zs_ref temp; /* a black value made for this source, freed by drop_source */
    _Alignas(16) char scratch[SCRATCH];
} source;

static void value_op(fz *f, loc l, int depth);

/* Fill the bitwise parts of a scratch value (zeroed elsewhere: zeroed
   memory is the empty value of every type) from the input. */
static void fill_bitwise(fz *f, const htype *t, char *p) {
    switch (t->kind) {
    case ZS_TYPE_PLAIN:
        for (uint32_t i = 0; i < t->size; i++) p[i] = (char)u8(f);
        break;
    case ZS_TYPE_OBJECT:
    case ZS_TYPE_WEAK_OBJECT: {
        zs_ref ref = pick_handle(f);
        memcpy(p, &ref, sizeof ref);
        break;
    }
    case ZS_TYPE_STRUCT:
        for (uint32_t i = 0; i < t->member_count; i++)
            fill_bitwise(f, t->member_type[i], p + t->member_offset[i]);
        break;
    case ZS_TYPE_OPTIONAL:
        if ((t->element->flags & ZS_TYPE_BITWISE) && (u8(f) & 1)) {
            p[t->value_offset] = 1;
            fill_bitwise(f, t->element, p);
        }
        break;
    default:
        break; /* strings, containers, delegates: left empty */
    }
}

/* Find a value of type t somewhere else: a black value, or a member of a
   live object, or an element of the container `near` (aliasing cases). */
static const void *find_same_type(fz *f, const htype *t, const loc *near) {
    if (near != NULL && (near->type->kind == ZS_TYPE_ARRAY) && near->type->element == t) {
        const zs_array *a = (const zs_array *)near->ptr;
        if (a->count > 0)
            return (char *)a->data + (size_t)(u8(f) % a->count) * near->type->entry_size;
    }
    if (near != NULL && (near->type->kind == ZS_TYPE_SET || near->type->kind == ZS_TYPE_MAP) &&
        near->type->element == t) {
        const zs_hash *h = (const zs_hash *)near->ptr;
        if (h->entries.count > 0)
            return (char *)h->entries.data +
                   (size_t)(u8(f) % h->entries.count) * near->type->entry_size;
    }
    if (near != NULL && near->type->kind == ZS_TYPE_OPTIONAL && near->type->element == t &&
        near->ptr[near->type->value_offset] && (u8(f) & 1))
        return near->ptr; /* an optional's own value */
    if (near != NULL && near->type == t && (u8(f) & 1)) return near->ptr;
    for (uint32_t i = 0; i < f->value_count; i++) {
        if (f->values[i].type != t) continue;
        void *ptr = zs_value_resolve(f->rt, f->values[i].handle);
        if (ptr != NULL) return ptr;
    }
    for (uint32_t i = 0; i < f->handle_count; i++) {
        zs_object *object = zs_resolve(f->rt, f->handles[i]);
        if (object == NULL) continue;
        const hclass *c = class_of(f, object);
        for (uint32_t k = 0; k < c->member_count; k++)
            if (c->members[k].type == t) return (char *)object + c->members[k].offset;
    }
    return NULL;
}

/* A valid value of type t (read only by the callee). */
static void get_source(fz *f, const htype *t, const loc *near, source *s, int depth) {
    s->temp = ZS_NULL_REF;
    memset(s->scratch, 0, t->size);
    s->ptr = s->scratch;
    switch (u8(f) % 5) {
    case 0:
        return; /* the empty value */
    case 1:
    case 2: {
        const void *found = find_same_type(f, t, near);
        if (found != NULL) s->ptr = found;
        return;
    }
    case 3:
        fill_bitwise(f, t, s->scratch);
        return;
    default: {
        /* Built through the API in a black value of its own. */
        void *ptr = NULL;
        if (depth >= 2 || zs_value_new(f->rt, t->t, &s->temp, &ptr) != ZS_OK) {
            s->temp = ZS_NULL_REF;
            fill_bitwise(f, t, s->scratch);
            return;
        }
        for (uint32_t n = u8(f) % 4; n > 0; n--)
            value_op(f, (loc){ZS_NULL_REF, t, ptr, false}, depth + 1);
        s->ptr = zs_value_resolve(f->rt, s->temp);
        check(s->ptr == ptr, "a black value moved or vanished while the program built it");
        return;
    }
    }
}

static void drop_source(fz *f, source *s) {
    if (s->temp == ZS_NULL_REF) return;
    zs_status status = zs_value_free(f->rt, s->temp);
    check(status == ZS_OK, "freeing a live temporary black value: %d", (int)status);
    s->temp = ZS_NULL_REF;
}

/* ======================================================================
 * Operations on values
 * ====================================================================== */

/* Every entry of a set or map is found at its own index. */
static void check_hash(fz *f, const htype *t, const zs_hash *h) {
    for (uint32_t i = 0; i < h->entries.count; i++) {
        const char *entry = (const char *)h->entries.data + (size_t)i * t->entry_size;
        int64_t found = -2;
        zs_status status = zs_hash_find(f->rt, t->t, h, entry, &found);
        check(status == ZS_OK && found == (int64_t)i, "hash entry %u is found at %lld (status %d)",
              i, (long long)found, (int)status);
    }
}

/* Every set and map inside a value (nested ones too) passes check_hash. */
static void check_hashes(fz *f, const htype *t, const char *p, int depth) {
    if (depth > 4 || !(t->flags & ZS_TYPE_NEEDS_DTOR)) return;
    switch (t->kind) {
    case ZS_TYPE_STRUCT:
        for (uint32_t i = 0; i < t->member_count; i++)
            check_hashes(f, t->member_type[i], p + t->member_offset[i], depth + 1);
        break;
    case ZS_TYPE_ARRAY: {
        const zs_array *a = (const zs_array *)p;
        for (uint32_t i = 0; i < a->count; i++)
            check_hashes(f, t->element, (const char *)a->data + (size_t)i * t->entry_size,
                         depth + 1);
        break;
    }
    case ZS_TYPE_SET:
    case ZS_TYPE_MAP: {
        const zs_hash *h = (const zs_hash *)p;
        check_hash(f, t, h);
        for (uint32_t i = 0; i < h->entries.count; i++) {
            const char *entry = (const char *)h->entries.data + (size_t)i * t->entry_size;
            check_hashes(f, t->element, entry, depth + 1);
            if (t->value) check_hashes(f, t->value, entry + t->value_offset, depth + 1);
        }
        break;
    }
    case ZS_TYPE_OPTIONAL:
        if (p[t->value_offset]) check_hashes(f, t->element, p, depth + 1);
        break;
    default:
        break;
    }
}

static uint32_t pick_callable(fz *f) {
    uint8_t b = u8(f);
    if (b < 200) return b % 9; /* 0: none */
    return b < 250 ? 100u + b : UINT32_MAX;
}

static zs_array *bindings_of(fz *f, loc *l, bool *ok) {
    *ok = true;
    if (l->type->kind == ZS_TYPE_MULTICAST) return (zs_array *)l->ptr;
    zs_array *list = NULL;
    zs_status status = zs_sparse_bindings(f->rt, l->owner, l->ptr, u8(f) & 1, &list);
    *ok = status == ZS_OK;
    return list;
}

/* One operation on the value at l. Writes are refused, changing nothing,
   when the owner is dying (zs_object_writable says so first). */
static void value_op(fz *f, loc l, int depth) {
    if (f->freed || f->gone) return;
    zs_runtime *rt = f->rt;
    const htype *t = l.type;
    zs_status writable = zs_object_writable(rt, l.owner);
    char before[SCRATCH];
    memcpy(before, l.ptr, t->size);
    zs_status status = ZS_OK;
    bool wrote = false; /* the operation was a write (the refusal oracle applies) */
    bool hashed = false;
    uint8_t op = u8(f);
    if (op < 24) {
        /* Read-only: equality and hashing against another value. */
        source s;
        get_source(f, t, &l, &s, depth);
        int same = zs_value_equal(rt, t->t, l.ptr, s.ptr);
        check(same == ((t->flags & ZS_TYPE_HASHABLE) ? same : -1),
              "zs_value_equal on an unhashable type");
        if (same >= 0) {
            check(zs_value_equal(rt, t->t, l.ptr, l.ptr) == 1, "a value is not equal to itself");
            if (same == 1)
                check(zs_value_hash(rt, t->t, l.ptr) == zs_value_hash(rt, t->t, s.ptr),
                      "equal values hash apart");
        }
        drop_source(f, &s);
        trace(f, "value equal/hash kind %u -> %d", t->kind, same);
        return;
    }
    if (l.key) return; /* never write a set element or a map key */
    if (op < 48) {
        wrote = true;
        status = zs_value_clear(rt, l.owner, t->t, l.ptr);
        trace(f, "value clear kind %u -> %d", t->kind, (int)status);
    } else if (op < 80) {
        wrote = true;
        source s;
        get_source(f, t, &l, &s, depth);
        if (f->freed) return;
        writable = zs_object_writable(rt, l.owner); /* building the source may have changed it */
        memcpy(before, l.ptr, t->size);
        status = zs_value_assign(rt, l.owner, t->t, l.ptr, s.ptr);
        trace(f, "value assign kind %u -> %d", t->kind, (int)status);
        drop_source(f, &s);
    } else {
        wrote = true;
        switch (t->kind) {
        case ZS_TYPE_PLAIN:
            wrote = false;
            /* Scalars: the managed side writes them itself, after asking. */
            if (writable == ZS_OK)
                for (uint32_t i = 0; i < t->size; i++) l.ptr[i] = (char)u8(f);
            break;
        case ZS_TYPE_OBJECT:
        case ZS_TYPE_WEAK_OBJECT: {
            zs_ref target = pick_handle(f);
            /* The slot's own type, or one of another kind (refused); never
               the other reference kind: the layouts match, the semantics
               do not, and the API cannot tell them apart. */
            const htype *slot_type = t;
            if ((u8(f) & 7) == 0) {
                const htype *other = pick_type(f);
                if (other->kind != ZS_TYPE_OBJECT && other->kind != ZS_TYPE_WEAK_OBJECT)
                    slot_type = other;
            }
            bool target_usable = target == ZS_NULL_REF || (zs_resolve(rt, target) != NULL &&
                                                           zs_object_writable(rt, target) == ZS_OK);
            status = zs_value_store_ref(rt, l.owner, slot_type->t, (zs_ref *)l.ptr, target);
            trace(f, "value store ref -> %d", (int)status);
            if (slot_type->kind != ZS_TYPE_OBJECT && slot_type->kind != ZS_TYPE_WEAK_OBJECT)
                check(status != ZS_OK, "zs_value_store_ref accepted a slot of kind %u",
                      slot_type->kind);
            if (status == ZS_OK) {
                check(target_usable, "zs_value_store_ref stored a stale or dying target");
                zs_ref stored;
                memcpy(&stored, l.ptr, sizeof stored);
                check(stored == target, "a stored reference reads back differently");
            }
            break;
        }
        case ZS_TYPE_STRING: {
            char units[256];
            uint32_t length = u8(f) % 64,
                     unit = t == f->t_str2 ? 2u : 1u; /* string types are cached */
            const void *from = units;
            const zs_string *self = (const zs_string *)l.ptr;
            if ((u8(f) & 3) == 0 && self->length > 0) {
                /* Part of its own contents. */
                uint32_t start = u8(f) % self->length;
                from = (const char *)self->data + (size_t)start * unit;
                length = length % (self->length - start + 1);
            } else {
                for (uint32_t i = 0; i < length * unit; i++) units[i] = (char)u8(f);
            }
            status = zs_string_assign(rt, l.owner, t->t, (zs_string *)l.ptr, length ? from : NULL,
                                      length);
            trace(f, "string assign %u units -> %d", length, (int)status);
            break;
        }
        case ZS_TYPE_ARRAY: {
            zs_array *a = (zs_array *)l.ptr;
            uint8_t what = u8(f) % 4;
            if (what <= 1) {
                uint32_t index = u8(f) % (a->count + 2), count = u8(f) % 4;
                /* Too many: refused before anything is allocated. */
                if ((u8(f) & 15) == 0)
                    count = (u8(f) & 1) ? UINT32_MAX : (1u << 30) - a->count + 1 + u8(f) % 4;
                source s;
                bool null_value = (u8(f) & 3) == 0;
                get_source(f, t->element, &l, &s, depth);
                if (f->freed) return;
                writable = zs_object_writable(rt, l.owner);
                memcpy(before, l.ptr, t->size);
                status = zs_array_insert(rt, l.owner, t->t, a, index, null_value ? NULL : s.ptr,
                                         count);
                trace(f, "array insert at %u x%u -> %d", index, count, (int)status);
                drop_source(f, &s);
            } else if (what == 2) {
                uint32_t index = u8(f) % (a->count + 2), count = u8(f) % 5;
                status = zs_array_remove(rt, l.owner, t->t, a, index, count);
                trace(f, "array remove at %u x%u -> %d", index, count, (int)status);
            } else {
                uint32_t capacity = (u8(f) & 7) == 0 ? (1u << 30) + 1 : u8(f) % 40;
                status = zs_array_reserve(rt, l.owner, t->t, a, capacity);
                trace(f, "array reserve %u -> %d", capacity, (int)status);
            }
            break;
        }
        case ZS_TYPE_SET:
        case ZS_TYPE_MAP: {
            zs_hash *h = (zs_hash *)l.ptr;
            uint8_t what = u8(f) % 3;
            source s;
            get_source(f, t->element, &l, &s, depth);
            if (f->freed) return;
            writable = zs_object_writable(rt, l.owner);
            memcpy(before, l.ptr, t->size);
            hashed = true;
            if (what == 0) {
                wrote = false;
                int64_t found = -2;
                status = zs_hash_find(rt, t->t, h, s.ptr, &found);
                check(status == ZS_OK && found >= -1 && found < (int64_t)h->entries.count,
                      "zs_hash_find: %d, %lld", (int)status, (long long)found);
                trace(f, "hash find -> %lld", (long long)found);
            } else if (what == 1) {
                uint32_t index = UINT32_MAX;
                int added = -1;
                status = zs_hash_add(rt, l.owner, t->t, h, s.ptr, &index, &added);
                trace(f, "hash add kind %u element %u (%u bytes) -> %d (index %u, added %d)",
                      t->kind, t->element->kind, t->element->size, (int)status, index, added);
                if (status == ZS_OK)
                    check(index < h->entries.count, "zs_hash_add: index %u of %u", index,
                          h->entries.count);
            } else {
                int removed = -1;
                status = zs_hash_remove(rt, l.owner, t->t, h, s.ptr, &removed);
                trace(f, "hash remove -> %d (removed %d)", (int)status, removed);
            }
            drop_source(f, &s);
            break;
        }
        case ZS_TYPE_OPTIONAL: {
            source s;
            bool null_value = (u8(f) & 3) == 0;
            get_source(f, t->element, &l, &s, depth);
            if (f->freed) return;
            writable = zs_object_writable(rt, l.owner);
            memcpy(before, l.ptr, t->size);
            status = zs_optional_set(rt, l.owner, t->t, l.ptr, null_value ? NULL : s.ptr);
            trace(f, "optional set -> %d", (int)status);
            drop_source(f, &s);
            break;
        }
        case ZS_TYPE_DELEGATE: {
            zs_ref object = (u8(f) & 1) ? pick_handle(f) : ZS_NULL_REF;
            uint32_t name = pick_name(f);
            status = zs_binding_set(rt, l.owner, (zs_binding *)l.ptr, object,
                                    name == ZS_NAME_AUTO ? 0 : name, pick_callable(f));
            trace(f, "binding set -> %d", (int)status);
            break;
        }
        case ZS_TYPE_MULTICAST:
        case ZS_TYPE_SPARSE: {
            bool ok;
            zs_array *list = bindings_of(f, &l, &ok);
            if (!ok || list == NULL) {
                wrote = false;
                break;
            }
            if (u8(f) & 1) {
                zs_ref object = (u8(f) & 1) ? pick_handle(f) : ZS_NULL_REF;
                uint32_t name = pick_name(f);
                status = zs_multicast_add(rt, l.owner, list, object,
                                          name == ZS_NAME_AUTO ? 0 : name, pick_callable(f));
                trace(f, "multicast add -> %d", (int)status);
            } else {
                uint32_t index = u8(f) % (list->count + 2), count = u8(f) % 4;
                status = zs_multicast_remove(rt, l.owner, list, index, count);
                trace(f, "multicast remove at %u x%u -> %d", index, count, (int)status);
            }
            /* The sparse list is part of the value, not its first bytes. */
            if (t->kind == ZS_TYPE_SPARSE) wrote = false;
            break;
        }
        default: /* STRUCT: clear and assign above */
            wrote = false;
            break;
        }
    }
    if (f->freed) return;
    if (wrote && (writable == ZS_E_DYING || writable == ZS_E_STALE || writable == ZS_E_BUSY)) {
        check(status != ZS_OK,
              "a write into a value whose owner is refused (%d) succeeded (kind %u)", (int)writable,
              t->kind);
        check(memcmp(before, l.ptr, t->size) == 0,
              "a refused write (%d) changed the value (kind %u)", (int)status, t->kind);
    }
    if (hashed || (wrote && status == ZS_OK)) check_hashes(f, t, l.ptr, 0);
}

/* ======================================================================
 * Described functions: their entry runs a nested program
 * ====================================================================== */

static void run_ops(fz *f, uint32_t limit);

/* A zs_call_each or a tick frame of the current depth calls only objects
   that are not marked as garbage (checked when its turn comes, with
   nothing between). */
static void check_not_skipped(fz *f, zs_ref object) {
    if (f->depth >= 32 || !((f->each_depths | f->frame_depths) & (1u << f->depth))) return;
    int garbage = 0;
    check(zs_is_garbage(f->rt, object, &garbage) == ZS_OK && !garbage,
          "zs_call_each called an object marked as garbage (%u)", ZS_REF_INDEX(object));
}

/* Signatures besides the described functions': another parameter type
   (no described function takes it), and an out parameter (refused). */
static const zs_property_desc other_signature_params[] = {
    {"x", "Int32", 0, ZS_PARAM_IN, NULL},
};
static const zs_function_desc other_signature = {
    "other", NULL, NULL, 0, FN_BLOCK, other_signature_params, 1};
static const zs_property_desc out_signature_params[] = {
    {"x", "Int32", 0, ZS_PARAM_OUT, NULL},
};
static const zs_function_desc out_signature = {"out", NULL, NULL, 0, FN_BLOCK, out_signature_params,
                                               1};

/* The entry of every described function (user: the harness): checks what
   the API promises about the call, then runs a nested program (which may
   collect, destroy its own object, call again, or free the runtime), then
   reads and writes its block and returns a status from the input. */
static zs_status fn_entry(void *user, zs_runtime *rt, zs_ref self, void *params) {
    fz *f = user;
    check(rt == f->rt && !f->freed, "a described function got a freed or foreign runtime");
    check(f->in_hook == 0, "a described function ran inside a destroy hook");
    check(zs_calls_in_progress(rt) > 0, "a described function's call is not counted in progress");
    if (self != ZS_NULL_REF) {
        check(zs_resolve(rt, self) != NULL && zs_object_writable(rt, self) == ZS_OK,
              "a described function ran on a stale or dying object %u", ZS_REF_INDEX(self));
        check_not_skipped(f, self);
        remember(f, self);
    }
    f->fn_calls++;
    trace(f, "entry on %u", ZS_REF_INDEX(self));
    if (f->depth < MAX_DEPTH) {
        f->depth++;
        run_ops(f, u8(f) % 8);
        f->depth--;
    }
    if (params != NULL) { /* the block is the caller's for the whole call */
        double dt;
        memcpy(&dt, params, sizeof dt);
        int32_t result = (int32_t)(dt == dt ? 1 : 0);
        memcpy((char *)params + 8, &result, sizeof result);
    }
    uint8_t mode = u8(f) % 8;
    f->fn_status = mode == 0 ? ZS_E_INVALID : mode == 1 ? ZS_E_CALL_FAILED : ZS_OK;
    trace(f, "entry leave -> %d", (int)f->fn_status);
    return f->fn_status;
}

/* The entry of every tick function registered with an entry (user: the
   harness): checks what the tick manager promises about the call, then
   runs a nested program (which may register, unregister, collect, start a
   frame, destroy its own object or free the runtime) and returns a status
   from the input. */
static zs_status tick_entry(void *user, zs_runtime *rt, zs_ref self, void *params) {
    fz *f = user;
    const zs_tick_params *p = params;
    check(rt == f->rt && !f->freed, "a tick function got a freed or foreign runtime");
    check(f->in_hook == 0, "a tick function ran inside a destroy hook");
    check(zs_calls_in_progress(rt) > 0, "a tick function's call is not counted in progress");
    check(p != NULL && p->delta_seconds >= 0 && isfinite(p->delta_seconds) &&
              p->group < ZS_TICK_GROUP_COUNT && p->frame > 0,
          "a tick function's block");
    zs_tick_info info;
    check(p != NULL && zs_tick_get_info(rt, p->tick, &info) == ZS_OK && info.object == self &&
              info.enabled && !info.by_name && info.elapsed == 0,
          "a tick function ran unregistered, disabled or on another object");
    int garbage = 1;
    check(zs_resolve(rt, self) != NULL && zs_object_writable(rt, self) == ZS_OK &&
              zs_is_garbage(rt, self, &garbage) == ZS_OK && !garbage,
          "a tick function ran on a stale, dying or garbage object %u", ZS_REF_INDEX(self));
    check_not_skipped(f, self);
    remember(f, self);
    f->tick_calls++;
    trace(f, "tick on %u", ZS_REF_INDEX(self));
    if (f->depth < MAX_DEPTH) {
        f->depth++;
        run_ops(f, u8(f) % 8);
        f->depth--;
    }
    uint8_t mode = u8(f) % 8;
    return mode == 0 ? ZS_E_CALL_FAILED : mode == 1 ? ZS_E_STALE : ZS_OK;
}

static const zs_property_desc fn_tick_params[] = {
    {"dt", "Float64", 0, ZS_PARAM_IN, NULL},
};
static const zs_property_desc fn_ping_params[] = {
    {"dt", "Float64", 0, ZS_PARAM_IN, NULL},
    {"result", "Int32", 8, ZS_PARAM_RETURN, NULL},
};
static const char *const fn_names[] = {"tick", "ping", "on_event", "make", "nope", ""};

/* Register a described class (a root one, or a child of a picked class):
   one reference member, and the functions "tick" (an event with a native
   default), "ping" (a function with a result), "on_event" (an event
   without one) and the static "make". */
static void new_described_class(fz *f) {
    if (f->class_count == MAX_CLASSES || f->fn_class_count == MAX_FN_CLASSES) return;
    const hclass *parent = (u8(f) & 3) == 0 ? pick_class(f) : NULL;
    if (parent != NULL && parent->member_count + 1 > MAX_CLASS_MEMBERS) parent = NULL;
    uint32_t k = f->fn_class_count;
    hclass *c = class_begin(f, parent, false);
    uint32_t first = c->member_count;
    uint32_t at = parent ? parent->size : (uint32_t)sizeof(zs_object);
    member_add(c, ZS_MEMBER_OBJECT, f->t_obj, &at);
    zs_function_desc *fns = f->fn_functions[k];
    fns[0] = (zs_function_desc){"tick",   fn_entry,       f, ZS_FUNCTION_EVENT,
                                FN_BLOCK, fn_tick_params, 1};
    fns[1] = (zs_function_desc){"ping", fn_entry, f, 0, FN_BLOCK, fn_ping_params, 2};
    fns[2] = (zs_function_desc){"on_event", NULL, NULL, ZS_FUNCTION_EVENT, 0, NULL, 0};
    fns[3] = (zs_function_desc){"make", fn_entry, f, ZS_FUNCTION_STATIC, 0, NULL, 0};
    uint32_t count = FN_FUNCTIONS;
    if ((u8(f) & 15) == 0) {
        /* A malformed function: refused as a whole. */
        uint8_t how = u8(f) % 3;
        if (how == 0) fns[2].flags = 0; /* no entry, not an event */
        else if (how == 1) fns[3].name = NULL;
        else count = 0, fns[0].params = NULL; /* (count 0: still fine) */
    }
    zs_member *member = &f->fn_members[k][0];
    *member = (zs_member){ZS_MEMBER_OBJECT, c->members[first].offset, NULL};
    c->size = align_up(at, 8);
    f->fn_descs[k] = (zs_class_desc){
        "Described", parent ? parent->cls : NULL, c->size, 0, member, 1, NULL, 0, fns, count};
    zs_status status = zs_class_register(f->rt, &f->fn_descs[k], &c->cls);
    trace(f, "new described class (parent %s) -> %d", parent ? zs_class_name(parent->cls) : "-",
          (int)status);
    if (status != ZS_OK) {
        memset(c, 0, sizeof *c);
        return;
    }
    if (count > 0) c->described = &f->fn_descs[k];
    f->class_count++;
    f->fn_class_count++;
}

/* Whether a class (or an ancestor) describes `name`, as the harness made it. */
static bool describes(const hclass *c, const char *name) {
    if (c->described == NULL) return false;
    for (uint32_t i = 0; i < FN_FUNCTIONS; i++)
        if (strcmp(fn_names[i], name) == 0) return true;
    return false;
}

/* zs_call_native on a handle the program picks: refused for a stale or
   dying object (the entry does not run), else the entry's status. */
static void call_native(fz *f) {
    zs_ref self = (u8(f) & 3) == 0 ? ZS_NULL_REF : pick_handle(f);
    char params[FN_BLOCK] = {0};
    bool no_entry = (u8(f) & 15) == 0;
    bool stale = self != ZS_NULL_REF && zs_resolve(f->rt, self) == NULL;
    bool dying = self != ZS_NULL_REF && !stale && zs_object_writable(f->rt, self) == ZS_E_DYING;
    uint64_t calls = f->fn_calls;
    zs_status status = zs_call_native(f->rt, no_entry ? NULL : fn_entry, f, self,
                                      (u8(f) & 3) ? params : NULL);
    trace(f, "call native on %u -> %d", ZS_REF_INDEX(self), (int)status);
    if (f->freed) {
        f->gone = f->depth == 0;
        return;
    }
    if (no_entry) check(status == ZS_E_INVALID, "zs_call_native without an entry: %d", (int)status);
    else if (stale)
        check(status == ZS_E_STALE, "zs_call_native on a stale object: %d", (int)status);
    else if (dying)
        check(status == ZS_E_DYING, "zs_call_native on a dying object: %d", (int)status);
    if (no_entry || stale || dying) {
        check(f->fn_calls == calls, "zs_call_native ran its entry after refusing");
        return;
    }
    check(f->fn_calls > calls && status == f->fn_status, "zs_call_native returned %d, its entry %d",
          (int)status, (int)f->fn_status);
}

/* ======================================================================
 * The destroy hook: every mutation it attempts must be refused
 * ====================================================================== */

static void expect_busy(zs_status status, const char *what) {
    check(status == ZS_E_BUSY, "%s inside a destroy hook returned %d, not ZS_E_BUSY", what,
          (int)status);
}

static void destroy_hook(void *user, zs_runtime *rt, zs_object *object, zs_destroy_phase phase) {
    fz *f = user;
    check(rt == f->rt, "the destroy hook got another runtime");
    check(phase == ZS_BEGIN_DESTROY || phase == ZS_FINISH_DESTROY, "destroy phase %d", (int)phase);
    if (phase == ZS_BEGIN_DESTROY) f->hook_seen_begin++;
    else f->hook_seen_finish++;
    f->in_hook++;
    zs_ref self = zs_object_ref(rt, object);
    check(self != ZS_NULL_REF, "the destroy hook's object has no handle");
    const hclass *c = class_of(f, object);
    if (f->hook_mode == 0) {
        f->in_hook--;
        return;
    }
    /* A member of the object itself, to try to write. */
    const hmember *m = c->member_count ? &c->members[f->hook_calls % c->member_count] : NULL;
    char *member = m ? (char *)object + m->offset : NULL;
    char before[SCRATCH];
    if (m) memcpy(before, member, m->type->size);
    zs_ref other = f->handle_count ? f->handles[f->hook_calls % f->handle_count] : self;
    uint32_t attempt = (f->hook_calls++ + f->hook_mode) % 30;
    zs_ref ref = ZS_NULL_REF;
    zs_object *made = NULL;
    switch (attempt) {
    case 0:
        expect_busy(zs_object_new(rt, f->classes[0].cls, ZS_NULL_REF, ZS_NAME_AUTO, 0, &ref, NULL),
                    "zs_object_new");
        break;
    case 1: {
        zs_ref r = zs_object_new_conjugate(rt, f->classes[0].cls, ZS_NULL_REF, ZS_NAME_AUTO, 0,
                                           NULL, 0, &made, NULL, 0, NULL);
        check(r == (zs_ref)ZS_E_BUSY, "zs_object_new_conjugate inside a destroy hook: %llu",
              (unsigned long long)r);
        break;
    }
    case 2:
        expect_busy(zs_add_to_root(rt, self), "zs_add_to_root");
        break;
    case 3:
        expect_busy(zs_add_strong_ref(rt, other), "zs_add_strong_ref");
        break;
    case 4:
        expect_busy(zs_mark_as_garbage(rt, self), "zs_mark_as_garbage");
        break;
    case 5:
        expect_busy(zs_resolve_for_conjugate(rt, self, &made), "zs_resolve_for_conjugate");
        break;
    case 6: {
        zs_ref h;
        void *p;
        expect_busy(zs_value_new(rt, f->t_obj->t, &h, &p), "zs_value_new");
        break;
    }
    case 7:
        expect_busy(zs_collect_garbage(rt), "zs_collect_garbage");
        break;
    case 8:
        expect_busy(zs_gc_start_incremental(rt), "zs_gc_start_incremental");
        break;
    case 9: {
        int done;
        uint32_t taken = 99;
        expect_busy(zs_gc_step(rt, 0, &done), "zs_gc_step");
        expect_busy(zs_gc_purge(rt, 0, &done), "zs_gc_purge");
        zs_status status = zs_gc_expire(rt, UINT32_MAX, &taken);
        check(status == (f->expiry_set ? ZS_E_BUSY : ZS_E_INVALID) && taken == 0,
              "zs_gc_expire inside a destroy hook: %d, %u taken (handler set %d)", (int)status,
              taken, f->expiry_set);
        break;
    }
    case 10:
        expect_busy(zs_gc_mark_and_gather(rt), "zs_gc_mark_and_gather");
        break;
    case 11:
        expect_busy(zs_create_cluster(rt, self, NULL), "zs_create_cluster");
        break;
    case 12:
        expect_busy(zs_dissolve_cluster(rt, self), "zs_dissolve_cluster");
        break;
    case 13:
        expect_busy(zs_call_function(rt, self, "tick", NULL), "zs_call_function");
        break;
    case 14:
        expect_busy(zs_call_each(rt, f->classes[0].cls, "tick", NULL, NULL), "zs_call_each");
        break;
    case 24: {
        uint64_t calls = f->fn_calls;
        char params[FN_BLOCK] = {0};
        expect_busy(zs_call_native(rt, fn_entry, f, self, params), "zs_call_native");
        expect_busy(zs_call_native(rt, fn_entry, f, ZS_NULL_REF, params),
                    "zs_call_native (static)");
        if (f->fn_class_count > 0)
            expect_busy(zs_call_function(rt, self, "ping", params), "zs_call_function (described)");
        zs_array none = {NULL, 0, 0};
        zs_binding unbound = {0, 0, 0};
        expect_busy(zs_delegate_broadcast(rt, ZS_NULL_REF, f->t_multi->t, &none, &other_signature,
                                          params, NULL),
                    "zs_delegate_broadcast");
        expect_busy(zs_delegate_execute(rt, ZS_NULL_REF, &unbound, &other_signature, params, NULL),
                    "zs_delegate_execute");
        check(f->fn_calls == calls, "a described function ran inside a destroy hook");
        break;
    }
    case 15: {
        zs_member member_desc = {ZS_MEMBER_OBJECT, sizeof(zs_object), NULL};
        zs_class_desc desc = {"Late", NULL, sizeof(zs_object) + 8, 0, &member_desc, 1, NULL, 0,
                              NULL,   0};
        const zs_class *cls = NULL;
        expect_busy(zs_class_register(rt, &desc, &cls), "zs_class_register");
        break;
    }
    case 16:
        expect_busy(zs_object_writable(rt, self), "zs_object_writable");
        break;
    case 17:
        if (m == NULL) break;
        expect_busy(zs_value_clear(rt, self, m->type->t, member), "zs_value_clear");
        break;
    case 18:
        if (m == NULL || m->kind != ZS_MEMBER_OBJECT) break;
        expect_busy(zs_store_ref(rt, self, m->offset, ZS_NULL_REF), "zs_store_ref");
        break;
    case 19:
        if (m == NULL || m->kind != ZS_MEMBER_OBJECT_ARRAY) break;
        expect_busy(zs_ref_array_push(rt, self, m->offset, ZS_NULL_REF), "zs_ref_array_push");
        expect_busy(zs_ref_array_clear(rt, self, m->offset), "zs_ref_array_clear");
        break;
    case 20:
        if (m == NULL) break;
        if (m->type->kind == ZS_TYPE_STRING)
            expect_busy(zs_string_assign(rt, self, m->type->t, (zs_string *)member, "x", 1),
                        "zs_string_assign");
        else if (m->type->kind == ZS_TYPE_ARRAY)
            expect_busy(zs_array_insert(rt, self, m->type->t, (zs_array *)member, 0, NULL, 1),
                        "zs_array_insert");
        else if (m->type->kind == ZS_TYPE_MULTICAST)
            expect_busy(zs_multicast_add(rt, self, (zs_array *)member, ZS_NULL_REF, 0, 1),
                        "zs_multicast_add");
        else if (m->type->kind == ZS_TYPE_SPARSE) {
            zs_array *list = NULL;
            expect_busy(zs_sparse_bindings(rt, self, member, 1, &list), "zs_sparse_bindings");
        } else if (m->type->kind == ZS_TYPE_DELEGATE)
            expect_busy(zs_binding_set(rt, self, (zs_binding *)member, ZS_NULL_REF, 0, 2),
                        "zs_binding_set");
        else if (m->type->kind == ZS_TYPE_OPTIONAL)
            expect_busy(zs_optional_set(rt, self, m->type->t, member, NULL), "zs_optional_set");
        break;
    case 21: {
        /* A black value the program holds. */
        for (uint32_t i = 0; i < f->value_count; i++) {
            if (zs_value_resolve(rt, f->values[i].handle) == NULL) continue;
            expect_busy(zs_value_free(rt, f->values[i].handle), "zs_value_free");
            break;
        }
        break;
    }
    case 22:
        expect_busy(zs_release_strong_ref(rt, other), "zs_release_strong_ref");
        break;
    case 23:
        expect_busy(zs_remove_from_root(rt, other), "zs_remove_from_root");
        break;
    case 25: {
        zs_tick_desc desc = {.object = other, .entry = tick_entry, .user = f};
        zs_tick made = 0;
        expect_busy(zs_tick_register(rt, &desc, &made), "zs_tick_register");
        expect_busy(zs_tick_frame(rt, 0.0, NULL, NULL), "zs_tick_frame");
        break;
    }
    default: {
        /* Reading is allowed. */
        zs_ref found = ZS_NULL_REF;
        uint32_t count = 0;
        zs_ref buffer[8];
        (void)zs_find_object(rt, object->outer, object->name_index, object->name_number, &found);
        (void)zs_live_handles(rt, buffer, 8, &count);
        (void)zs_resolve(rt, other);
        (void)zs_gc_phase_of(rt);
        zs_chain_link links[8];
        (void)zs_reference_chains(rt, other, 2, links, 8, &count);
        int flag;
        (void)zs_is_rooted(rt, self, &flag);
        (void)zs_gc_pending_purge(rt);
        (void)zs_gc_expiring_count(rt);
        int32_t cluster = -1;
        zs_cluster_info info;
        if (zs_object_cluster(rt, self, &cluster) == ZS_OK && cluster >= 0)
            check(zs_cluster_get_info(rt, cluster, &info) == ZS_OK,
                  "a destroyed object's cluster has no info");
        /* Taking the expiring list is the managed side's business, not a
           mutation of the heap: allowed here too. */
        uint64_t names[8];
        uint8_t garbage[8];
        zs_status status = zs_gc_take_expiring_ex(rt, buffer, names, garbage, 8, &count);
        if (status == ZS_OK)
            for (uint32_t i = 0; i < count; i++) conj_remove(f, buffer[i]);
        if (f->expiry_set)
            check(status == ZS_E_BUSY && count == 0,
                  "zs_gc_take_expiring_ex inside a destroy hook with an expiry handler: %d, %u",
                  (int)status, count);
        char message[64];
        (void)zs_heap_verify(rt, message,
                             sizeof message); /* mid-purge it may disagree; it must not crash */
        break;
    }
    }
    if (m)
        check(memcmp(before, member, m->type->size) == 0,
              "a refused write inside a destroy hook changed a member");
    f->in_hook--;
}

/* ======================================================================
 * The call handler: a nested program
 * ====================================================================== */

static zs_status call_handler(void *user, zs_runtime *rt, zs_ref object, const char *function,
                              void *params) {
    fz *f = user;
    (void)params;
    check(rt == f->rt && !f->freed, "the call handler got a freed or foreign runtime");
    check(f->in_hook == 0, "the call handler ran inside a destroy hook");
    check(function != NULL, "the call handler got no function name");
    check(zs_resolve(rt, object) != NULL && zs_object_writable(rt, object) == ZS_OK,
          "the call handler got a stale or dying object %u", ZS_REF_INDEX(object));
    check(zs_calls_in_progress(rt) > 0, "a call is not counted in progress");
    check_not_skipped(f, object);
    remember(f, object);
    trace(f, "handler enter %s on %u", function, ZS_REF_INDEX(object));
    if (f->depth < MAX_DEPTH) {
        f->depth++;
        run_ops(f, u8(f) % 8);
        f->depth--;
    }
    trace(f, "handler leave");
    switch (f->handler_mode % 4) {
    case 1:
        return ZS_E_CALL_FAILED;
    case 2:
        return (u8(f) & 1) ? ZS_E_INVALID : ZS_OK;
    default:
        return ZS_OK;
    }
}

/* ======================================================================
 * Delegates called from C: a managed listener handler, and the broadcast
 * ====================================================================== */

/* The managed side's listener handler (zs_set_managed_listener_handler):
   checks what the API promises about the listener, then runs a nested
   program, and returns a status from the input. */
static zs_status listener_handler(void *user, zs_runtime *rt, const zs_listener *listener,
                                  const zs_function_desc *signature, void *params) {
    fz *f = user;
    (void)params;
    check(rt == f->rt && !f->freed, "the listener handler got a freed or foreign runtime");
    check(f->in_hook == 0, "the listener handler ran inside a destroy hook");
    check(zs_calls_in_progress(rt) > 0, "a listener is not counted in progress");
    check(signature != NULL, "the listener handler got no signature");
    check((listener->callable != 0) != (listener->object != ZS_NULL_REF),
          "a listener is both or neither a callable and an object");
    if (listener->object != ZS_NULL_REF) {
        zs_object *object = zs_resolve(rt, listener->object);
        int garbage = 1;
        check(object != NULL && object == listener->target &&
                  zs_object_writable(rt, listener->object) == ZS_OK,
              "the listener handler got a stale or dying object %u",
              ZS_REF_INDEX(listener->object));
        check(zs_is_garbage(rt, listener->object, &garbage) == ZS_OK && !garbage,
              "the listener handler got an object marked as garbage");
        check(listener->function != NULL, "an object listener has no function name");
        if (listener->native != NULL && listener->function != NULL)
            check(strcmp(listener->native->name, listener->function) == 0,
                  "a listener's native function is named %s, not %s", listener->native->name,
                  listener->function);
        remember(f, listener->object);
    } else {
        check(listener->target == NULL && listener->function == NULL && listener->native == NULL,
              "a callable listener carries an object's fields");
    }
    trace(f, "listener enter (callable %u, object %u)", listener->callable,
          ZS_REF_INDEX(listener->object));
    if (f->depth < MAX_DEPTH) {
        f->depth++;
        run_ops(f, u8(f) % 8);
        f->depth--;
    }
    trace(f, "listener leave");
    switch (f->listener_mode % 4) {
    case 1:
        return ZS_E_CALL_FAILED;
    case 2:
        return (u8(f) & 1) ? ZS_E_INVALID : ZS_E_STALE;
    default:
        return ZS_OK;
    }
}

/* The non-empty bindings of a delegate value (what a broadcast copies). */
static uint32_t live_bindings(const loc *l) {
    const zs_binding *data = NULL;
    uint32_t count = 0;
    if (l->type->kind == ZS_TYPE_DELEGATE) {
        data = (const zs_binding *)l->ptr;
        count = 1;
    } else {
        const zs_array *list = l->type->kind == ZS_TYPE_MULTICAST
                                   ? (const zs_array *)l->ptr
                                   : *(zs_array *const *)(const void *)l->ptr;
        if (list != NULL) data = list->data, count = list->count;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < count; i++)
        n += data[i].callable != 0 || data[i].object != ZS_NULL_REF;
    return n;
}

/* Call a delegate value from C: bind a described function of an object to
   it first (sometimes), then broadcast it (execute a single-cast one) with
   a signature the program picks and a block of input bytes. */
static void broadcast(fz *f) {
    zs_runtime *rt = f->rt;
    loc l;
    if (!pick_loc(f, &l)) return;
    uint32_t kind = l.type->kind;
    if (kind != ZS_TYPE_DELEGATE && kind != ZS_TYPE_MULTICAST && kind != ZS_TYPE_SPARSE) return;
    if ((u8(f) & 1) != 0) {
        static const char *const names[] = {"tick()", "tick", "ping()", "on_event()", "nope()"};
        const char *text = names[below(f, 5)];
        uint32_t name = 0, number = 0;
        zs_ref object = pick_handle(f);
        if (object != ZS_NULL_REF &&
            zs_name_intern(rt, text, strlen(text), &name, &number) == ZS_OK) {
            zs_status status;
            if (kind == ZS_TYPE_DELEGATE) {
                status = zs_binding_set(rt, l.owner, (zs_binding *)l.ptr, object, name, 0);
            } else {
                bool ok;
                zs_array *list = bindings_of(f, &l, &ok);
                status = ok && list != NULL ? zs_multicast_add(rt, l.owner, list, object, name, 0)
                                            : ZS_E_INVALID;
            }
            trace(f, "bind %s of %u -> %d", text, ZS_REF_INDEX(object), (int)status);
        }
    }
    const zs_function_desc *signature = &other_signature;
    uint8_t which = u8(f) % 8;
    if (which < 4 && f->fn_class_count > 0)
        signature = &f->fn_functions[which % f->fn_class_count][which < 2 ? 0 : 1]; /* tick, ping */
    else if (which == 7) signature = &out_signature;
    char params[FN_BLOCK];
    for (uint32_t i = 0; i < FN_BLOCK; i++) params[i] = (char)u8(f);
    bool no_block = (u8(f) & 15) == 0;
    uint32_t expected = live_bindings(&l);
    uint32_t bit = f->depth < 32 ? 1u << f->depth : 0, saved = f->each_depths;
    f->each_depths |= bit; /* a broadcast skips objects marked as garbage, as zs_call_each */
    zs_broadcast_report report = {99, 99, 99, 99};
    int called = 99;
    zs_status status;
    if (kind == ZS_TYPE_DELEGATE)
        status = zs_delegate_execute(rt, l.owner, (const zs_binding *)l.ptr, signature,
                                     no_block ? NULL : params, &called);
    else
        status = zs_delegate_broadcast(rt, l.owner, l.type->t, l.ptr, signature,
                                       no_block ? NULL : params, &report);
    if (f->freed) {
        f->gone = f->depth == 0;
        return;
    }
    f->each_depths = saved;
    trace(f, "broadcast kind %u (%s) -> %d: %u listeners, %u called, %u failed, %u skipped", kind,
          signature->name, (int)status, report.listeners, report.called, report.failed,
          report.skipped);
    if (kind == ZS_TYPE_DELEGATE) {
        check(called == 0 || called == 1, "zs_delegate_execute: out_called %d", called);
        check(called == 0 || expected == 1, "zs_delegate_execute called an empty binding");
        return;
    }
    check(report.listeners == 0 || report.listeners == expected,
          "a broadcast copied %u listeners of %u bindings", report.listeners, expected);
    check(report.called + report.skipped <= report.listeners && report.failed <= report.called,
          "a broadcast's report: %u listeners, %u called, %u failed, %u skipped", report.listeners,
          report.called, report.failed, report.skipped);
    if (report.listeners > 0)
        check((status == ZS_OK) == (report.failed == 0), "a broadcast returned %d with %u failures",
              (int)status, report.failed);
    if (signature == &out_signature || no_block)
        check(status == ZS_E_INVALID && report.called == 0,
              "a broadcast with an out parameter or no block: %d", (int)status);
}

/* ======================================================================
 * The expiry handler: the managed side expiring its proxies
 * ====================================================================== */

static void take_expiring(fz *f, uint32_t capacity);

static void expect_busy_in_handler(zs_status status, const char *what) {
    check(status == ZS_E_BUSY, "%s inside the expiry handler returned %d, not ZS_E_BUSY", what,
          (int)status);
}

/* Lookups of an object handed over: it still resolves, and is dying to
   every function that asks. */
static void expiry_lookups(fz *f, zs_ref ref) {
    zs_runtime *rt = f->rt;
    zs_object *object = zs_resolve(rt, ref), *again = NULL;
    check(object != NULL, "an object handed over does not resolve inside the handler");
    zs_ref found = ZS_NULL_REF;
    zs_status status = zs_find_object(rt, object->outer, object->name_index, object->name_number,
                                      &found);
    check(status != ZS_OK || found != ref, "zs_find_object found the dying object %u",
          ZS_REF_INDEX(ref));
    if (status == ZS_OK && found != ZS_NULL_REF) remember(f, found);
    check(zs_resolve_for_conjugate(rt, ref, &again) == ZS_E_DYING,
          "zs_resolve_for_conjugate of an object handed over is not refused as dying");
    check(zs_object_writable(rt, ref) == ZS_E_DYING, "an object handed over is writable");
    uint64_t calls = f->fn_calls;
    status = zs_call_function(rt, ref, "tick", NULL);
    check(status == ZS_E_DYING && f->fn_calls == calls,
          "zs_call_function on an object handed over: %d", (int)status);
    zs_chain_link links[4];
    uint32_t count = 0;
    check(zs_reference_chains(rt, ref, 1, links, 4, &count) != ZS_OK,
          "zs_reference_chains answered for an object handed over");
    zs_ref buffer[8];
    check(zs_live_handles(rt, buffer, 8, &count) == ZS_OK, "zs_live_handles in the handler");
    int flag = -1;
    check(zs_is_rooted(rt, ref, &flag) == ZS_OK && !flag, "an object handed over is rooted");
    (void)zs_gc_phase_of(rt);
    (void)zs_gc_pending_purge(rt);
    (void)zs_gc_expiring_count(rt);
    trace(f, "expiry lookups on %u", ZS_REF_INDEX(ref));
}

/* The managed side's expiry handler (expiry mode). It checks what the API
   promises about every object handed over (it still resolves, is dying,
   has the name and garbage flag reported, is one the program made a
   conjugate of, and was not handed over before), expires the program's
   proxies of them, then, as the input says, calls the API from inside:
   collections (each refused with ZS_E_BUSY, as are zs_set_expiry_handler
   and taking the list), lookups, a nested zs_gc_expire, a nested program,
   or zs_runtime_free (deferred: the call that collected returns
   ZS_E_STALE). The objects stay in memory until it returns. */
static void expiry_handler(void *user, zs_runtime *rt, const zs_ref *objects, const uint64_t *names,
                           const uint8_t *garbage, uint32_t count) {
    fz *f = user;
    check(rt == f->rt && !f->freed && !f->tearing_down,
          "the expiry handler got a freed or foreign runtime");
    check(f->expiry_set, "the expiry handler ran while none is set");
    check(f->in_hook == 0, "the expiry handler ran inside a destroy hook");
    check(count > 0 && objects != NULL && names != NULL && garbage != NULL,
          "the expiry handler was handed %u objects", count);
    check(zs_calls_in_progress(rt) > 0, "a hand-over is not counted as a call in progress");
    check(__atomic_load_n(zs_dying_word(rt), __ATOMIC_RELAXED) != 0,
          "the dying word is clear during a hand-over");
    f->expiry_calls++;
    f->expiry_objects += count;
    for (uint32_t i = 0; i < count; i++) {
        zs_ref ref = objects[i];
        zs_object *object = zs_resolve(rt, ref);
        check(object != NULL, "object %u/%u was handed over freed", ZS_REF_INDEX(ref),
              ZS_REF_SERIAL(ref));
        check(zs_object_writable(rt, ref) == ZS_E_DYING, "object %u was handed over not dying",
              ZS_REF_INDEX(ref));
        check(names[i] == (object->name_index | (uint64_t)object->name_number << 32),
              "object %u was handed over with another name", ZS_REF_INDEX(ref));
        int flag = -1;
        check(zs_is_garbage(rt, ref, &flag) == ZS_OK && (flag != 0) == (garbage[i] != 0),
              "object %u was handed over with garbage %u, it says %d", ZS_REF_INDEX(ref),
              garbage[i], flag);
        check(f->had_overflow || had_conjugate(f, ref),
              "object %u/%u was handed over, the program never made a conjugate of it",
              ZS_REF_INDEX(ref), ZS_REF_SERIAL(ref));
        check(!handed_before(f, ref), "object %u/%u was handed over twice", ZS_REF_INDEX(ref),
              ZS_REF_SERIAL(ref));
        handed_add(f, ref);
        conj_remove(f, ref); /* its proxies expire */
        fresh_take(f, ref, true);
        remember(f, ref);
    }
    trace(f, "expiry handler: %u objects", count);
    f->in_expiry++;
    uint32_t action = (f->expiry_style & 3) == 0 ? 0 : u8(f) % 8;
    if (action >= 3) f->expiry_active++;
    switch (action) {
    case 3: {
        /* Collections, and what would let the purge go on, are refused. */
        int done = -1;
        expect_busy_in_handler(zs_collect_garbage(rt), "zs_collect_garbage");
        expect_busy_in_handler(zs_gc_mark_and_gather(rt), "zs_gc_mark_and_gather");
        expect_busy_in_handler(zs_gc_start_incremental(rt), "zs_gc_start_incremental");
        expect_busy_in_handler(zs_gc_purge(rt, 0, &done), "zs_gc_purge");
        expect_busy_in_handler(zs_gc_purge_bounded(rt, 0, 1, &done), "zs_gc_purge_bounded");
        expect_busy_in_handler(zs_set_expiry_handler(rt, NULL, NULL),
                               "zs_set_expiry_handler(NULL)");
        expect_busy_in_handler(zs_set_expiry_handler(rt, expiry_handler, f),
                               "zs_set_expiry_handler");
        take_expiring(f, 8);
        trace(f, "expiry handler: collections refused");
        break;
    }
    case 4:
        expiry_lookups(f, objects[u8(f) % count]);
        break;
    case 5:
        /* The rest of the list, handed over from inside (nested). */
        if (f->in_expiry <= MAX_EXPIRY_NEST) {
            uint32_t taken = 0, limit = (u8(f) & 1) ? UINT32_MAX : u8(f) % 4;
            zs_status status = zs_gc_expire(rt, limit, &taken);
            trace(f, "expiry handler: expire %u -> %d (%u)", limit, (int)status, taken);
            check(status == (f->freed ? ZS_E_STALE : ZS_OK) && taken <= limit,
                  "zs_gc_expire inside the expiry handler: %d, %u of %u", (int)status, taken,
                  limit);
        }
        break;
    case 6:
        if (f->depth < MAX_DEPTH) {
            f->depth++;
            run_ops(f, u8(f) % 8);
            f->depth--;
        }
        break;
    case 7:
        if ((u8(f) & 3) == 0) {
            trace(f, "runtime free inside the expiry handler");
            f->freed = true;
            zs_runtime_free(rt);
        }
        break;
    default:
        break;
    }
    /* No purge ran meanwhile: every object handed over is still there. */
    for (uint32_t i = 0; i < count && !f->freed; i++)
        check(zs_resolve(rt, objects[i]) != NULL,
              "object %u was freed before the expiry handler it was handed to returned",
              ZS_REF_INDEX(objects[i]));
    f->in_expiry--;
    trace(f, "expiry handler leave");
}

/* ======================================================================
 * Operations
 * ====================================================================== */

enum {
    OP_NEW,
    OP_NEW_CONJUGATE,
    OP_STORE,
    OP_ARRAY_PUSH,
    OP_ARRAY_CLEAR,
    OP_ROOT,
    OP_UNROOT,
    OP_STRONG,
    OP_UNSTRONG,
    OP_GARBAGE,
    OP_QUERY,
    OP_RESOLVE_CONJUGATE,
    OP_FORGET_CONJUGATE,
    OP_FIND_OBJECT,
    OP_LIVE_HANDLES,
    OP_COLLECT,
    OP_MARK_GATHER,
    OP_TAKE_EXPIRING,
    OP_PURGE,
    OP_START_INCREMENTAL,
    OP_STEP,
    OP_FINISH_CYCLE,
    OP_CLUSTER_CREATE,
    OP_CLUSTER_DISSOLVE,
    OP_CLUSTER_INFO,
    OP_DEBUG_SET,
    OP_CLOSE_DISREGARD,
    OP_VALUE_NEW,
    OP_VALUE_FREE,
    OP_VALUE_OP,
    OP_VALUE_OP2,
    OP_VALUE_OP3,
    OP_CALLABLES,
    OP_NAME_INTERN,
    OP_NAME_QUERY,
    OP_FIND_CLASS,
    OP_TYPE_NEW,
    OP_CLASS_NEW,
    OP_CHAINS,
    OP_CALL_FUNCTION,
    OP_CALL_EACH,
    OP_SET_HANDLER,
    OP_SET_HOOK,
    OP_FREE_IN_CALL,
    OP_OTHER_RUNTIME,
    OP_STATS,
    OP_ALLOC_LIMIT,
    OP_STALE_WRITE,
    OP_NEW2,
    OP_STORE2,
    OP_DESCRIBED_CLASS,
    OP_CALL_NATIVE,
    OP_CALL_FUNCTION2,
    OP_CALL_EACH2,
    OP_DROP_CONJUGATES,
    OP_TICK_REGISTER,
    OP_TICK_CHANGE,
    OP_TICK_FRAME,
    OP_TICK_FRAME2,
    OP_BROADCAST,
    OP_BROADCAST2,
    OP_SET_LISTENER_HANDLER,
    OP_COUNT, /* the operations of every program; an expiry-mode program's also: */
    OP_SET_EXPIRY = OP_COUNT,
    OP_HOST_COLLECT,
    OP_HOST_COLLECT2,
    OP_EXPIRE,
    OP_DESTROY,
    OP_COUNT_EXPIRY
};

static void new_object(fz *f, bool conjugate) {
    const hclass *c = pick_class(f);
    const zs_class *cls = (u8(f) & 31) == 0 ? NULL : c->cls;
    zs_ref outer = (u8(f) & 1) ? pick_handle(f) : ZS_NULL_REF;
    uint32_t name = pick_name(f), number = u8(f) % 4;
    zs_ref ref = ZS_NULL_REF;
    zs_status status;
    zs_object *object = NULL;
    if (!conjugate) {
        status = zs_object_new(f->rt, cls, outer, name, number, &ref, &object);
    } else {
        /* Plain data only: every member that holds references stays zero. */
        _Alignas(16) char init[8192];
        uint32_t room = c->size - (uint32_t)sizeof(zs_object);
        uint32_t size = (u8(f) & 7) == 0 ? room + 1 + u8(f) % 8 : u8(f) % (room + 1);
        if (size > sizeof init) size = sizeof init;
        memset(init, 0, sizeof init);
        for (uint32_t i = 0; i < c->member_count; i++) {
            const hmember *m = &c->members[i];
            if (m->kind != ZS_MEMBER_VALUE || m->type->kind != ZS_TYPE_PLAIN) continue;
            for (uint32_t k = 0; k < m->type->size; k++) {
                uint32_t at = m->offset - (uint32_t)sizeof(zs_object) + k;
                if (at < sizeof init) init[at] = (char)u8(f);
            }
        }
        ref = zs_object_new_conjugate(f->rt, cls, outer, name, number, (u8(f) & 15) ? init : NULL,
                                      size, &object, NULL, 0, NULL);
        status = ref >= ZS_FIRST_REF ? ZS_OK : (zs_status)ref;
        if (ref < ZS_FIRST_REF) ref = ZS_NULL_REF;
    }
    trace(f, "new%s class %s outer %u -> %d (%u/%u)", conjugate ? " conjugate" : "",
          cls ? zs_class_name(cls) : "-", ZS_REF_INDEX(outer), (int)status, ZS_REF_INDEX(ref),
          ZS_REF_SERIAL(ref));
    if (status != ZS_OK) return;
    check(cls != NULL, "an object was made without a class");
    check(zs_resolve(f->rt, ref) == object && object->cls == cls,
          "a new object does not resolve to itself");
    check(object->outer == ZS_NULL_REF || object->outer == outer,
          "a new object's outer is not the one given");
    remember(f, ref);
    if (conjugate) conj_add(f, ref);
    if (conjugate && f->fresh_count < MAX_CONJ) f->fresh[f->fresh_count++] = ref;
}

/* The schema leaf at an offset of a value laid out at base: what the
   class's flattened schema holds there (references, and values that hold
   references or own memory; nested structs are inlined), or NULL. */
static const htype *leaf_in(const htype *t, uint32_t base, uint32_t offset) {
    if (t->kind == ZS_TYPE_STRUCT) {
        for (uint32_t i = 0; i < t->member_count; i++) {
            const htype *leaf = leaf_in(t->member_type[i], base + t->member_offset[i], offset);
            if (leaf != NULL) return leaf;
        }
        return NULL;
    }
    if (t->kind == ZS_TYPE_PLAIN || base != offset) return NULL;
    if (t->kind == ZS_TYPE_OBJECT || t->kind == ZS_TYPE_WEAK_OBJECT) return t;
    return (t->flags & (ZS_TYPE_HAS_REFS | ZS_TYPE_NEEDS_DTOR)) ? t : NULL;
}

static const htype *leaf_at(const hclass *c, uint32_t offset) {
    for (uint32_t i = 0; i < c->member_count; i++) {
        const htype *leaf = leaf_in(c->members[i].type, c->members[i].offset, offset);
        if (leaf != NULL) return leaf;
    }
    return NULL;
}

/* A store into a member (holder and offset from the program), checked
   against the flattened layout: zs_store_ref takes a reference slot (a
   member, or one inside a struct member), zs_ref_array_push and _clear an
   array of references. */
static void store(fz *f, int kind) {
    zs_ref holder = pick_handle(f);
    zs_object *object = zs_resolve(f->rt, holder);
    uint32_t offset = u16(f);
    const htype *leaf = NULL;
    if (object != NULL) {
        const hclass *c = class_of(f, object);
        if (c->member_count > 0 && (u8(f) & 7) != 0)
            offset = c->members[u8(f) % c->member_count].offset;
        leaf = leaf_at(c, offset);
    }
    bool holder_usable = object != NULL && zs_object_writable(f->rt, holder) == ZS_OK;
    zs_ref target = kind == 2 ? ZS_NULL_REF : pick_handle(f);
    bool target_usable = target == ZS_NULL_REF || (zs_resolve(f->rt, target) != NULL &&
                                                   zs_object_writable(f->rt, target) == ZS_OK);
    bool fits = kind == 0 ? leaf != NULL &&
                                (leaf->kind == ZS_TYPE_OBJECT || leaf->kind == ZS_TYPE_WEAK_OBJECT)
                          : leaf != NULL && leaf == f->t_arr_obj;
    zs_status status;
    if (kind == 0) status = zs_store_ref(f->rt, holder, offset, target);
    else if (kind == 1) status = zs_ref_array_push(f->rt, holder, offset, target);
    else status = zs_ref_array_clear(f->rt, holder, offset);
    trace(f, "store(%d) %u+%u <- %u -> %d", kind, ZS_REF_INDEX(holder), offset,
          ZS_REF_INDEX(target), (int)status);
    if (status == ZS_OK) {
        check(holder_usable && target_usable,
              "a store with a stale or dying holder or target succeeded");
        check(fits, "store(%d) accepted offset %u of a %s, %s (kind %u)", kind, offset,
              zs_class_name(object->cls), leaf ? "a slot of another kind" : "no slot",
              leaf ? leaf->kind : 0);
        if (kind == 0) {
            zs_ref stored;
            memcpy(&stored, (char *)object + offset, sizeof stored);
            check(stored == target, "a stored reference reads back differently");
        }
    } else if (holder_usable && target_usable && fits) {
        check(status == ZS_E_NOMEM, "store(%d) of a usable target into a usable slot refused: %d",
              kind, (int)status);
    }
}

static void take_expiring(fz *f, uint32_t capacity) {
    zs_ref buffer[64];
    uint64_t names[64];
    uint8_t garbage[64];
    uint32_t count = 0;
    if (capacity > 64) capacity = 64;
    bool ex = u8(f) & 1;
    uint32_t before = zs_gc_expiring_count(f->rt);
    zs_status status = ex ? zs_gc_take_expiring_ex(f->rt, buffer, (u8(f) & 1) ? names : NULL,
                                                   (u8(f) & 1) ? garbage : NULL, capacity, &count)
                          : zs_gc_take_expiring(f->rt, buffer, capacity, &count);
    if (f->expiry_set) {
        /* The list is the handler's. */
        check(status == ZS_E_BUSY && count == 0 && zs_gc_expiring_count(f->rt) == before,
              "zs_gc_take_expiring with an expiry handler set: %d, %u taken", (int)status, count);
        trace(f, "take expiring %u -> busy", capacity);
        return;
    }
    check(status == ZS_OK && count <= capacity, "zs_gc_take_expiring: %d, %u of %u", (int)status,
          count, capacity);
    for (uint32_t i = 0; i < count; i++) {
        check(zs_resolve(f->rt, buffer[i]) != NULL, "an expiring object is already freed");
        check(zs_object_writable(f->rt, buffer[i]) == ZS_E_DYING,
              "an expiring object is not dying");
        remember(f, buffer[i]);
        conj_remove(f, buffer[i]);
    }
    trace(f, "take expiring %u -> %u", capacity, count);
}

/* After a call that may hand objects over (a collection, zs_gc_expire):
   false when the expiry handler freed the runtime, which the call must
   report as ZS_E_STALE (nothing uses the runtime after). A collection
   (`collection`) is refused inside the handler, and with one set never
   waits for the managed side (ZS_E_EXPIRY_PENDING). */
static bool collection_returned(fz *f, const char *what, zs_status status, bool collection) {
    if (f->freed) {
        check(status == ZS_E_STALE, "%s returned %d after the runtime was freed from inside", what,
              (int)status);
        f->gone = f->depth == 0;
        return false;
    }
    check(status != ZS_E_STALE, "%s returned ZS_E_STALE with the runtime open", what);
    if (collection && f->in_expiry > 0)
        check(status == ZS_E_BUSY, "%s inside the expiry handler returned %d, not ZS_E_BUSY", what,
              (int)status);
    else if (collection && f->expiry_set)
        check(status != ZS_E_EXPIRY_PENDING,
              "%s with an expiry handler set waited for the managed side", what);
    return true;
}

/* Run a pending cycle to its end the way the managed side does: steps,
   then (with no expiry handler) take the expiring list, then purge. Inside
   the expiry handler the purge is refused: the steps only. */
static void finish_cycle(fz *f) {
    int done = 0;
    for (int i = 0; i < 100000 && zs_gc_phase_of(f->rt) != ZS_GC_IDLE; i++) {
        zs_gc_phase phase = zs_gc_phase_of(f->rt);
        zs_status status;
        if (phase == ZS_GC_MARKING || phase == ZS_GC_GATHERING) {
            status = zs_gc_step_bounded(f->rt, 0, 1 + u8(f) % 16, &done);
        } else {
            while (!f->expiry_set && zs_gc_expiring_count(f->rt) > 0) take_expiring(f, 64);
            status = zs_gc_purge_bounded(f->rt, 0, u8(f) % 8, &done);
            if (!collection_returned(f, "zs_gc_purge_bounded", status, true)) return;
            if (f->in_expiry > 0) return;
        }
        check(status == ZS_OK, "finishing a cycle: %d in phase %d", (int)status, (int)phase);
    }
    check(zs_gc_phase_of(f->rt) == ZS_GC_IDLE, "a cycle did not finish");
    trace(f, "finish cycle");
}

/* With an expiry handler set, a full collection leaves nothing pending: no
   cycle, no expiring list, nothing to purge (the checks after every
   operation then find every live proxy's object in memory). */
static void check_collected(fz *f, const char *what) {
    if (!f->expiry_set || f->in_expiry > 0) return;
    zs_gc_phase phase = zs_gc_phase_of(f->rt);
    uint32_t expiring = zs_gc_expiring_count(f->rt), pending = zs_gc_pending_purge(f->rt);
    check(phase == ZS_GC_IDLE && expiring == 0 && pending == 0,
          "after %s with an expiry handler: phase %d, %u expiring, %u to purge", what, (int)phase,
          expiring, pending);
}

/* After each call of a host's collection: the heap checks (no live proxy
   names a freed object), and the list is not the program's to take while
   a handler is set. False when the runtime is gone. */
static bool host_after(fz *f, const char *what, zs_status status, bool collection) {
    if (!collection_returned(f, what, status, collection)) return false;
    check_heap(f, what);
    if (f->expiry_set) take_expiring(f, 1 + u8(f) % 8);
    return true;
}

/* Purge to the end as a host does (bounded in work, or not); with no
   handler set, the old recipe: the managed side takes the list first. */
static bool host_purge(fz *f) {
    for (int i = 0; i < 1000 && zs_gc_phase_of(f->rt) == ZS_GC_PURGE_PENDING; i++) {
        while (!f->expiry_set && zs_gc_expiring_count(f->rt) > 0) take_expiring(f, 64);
        int done = -1;
        uint32_t max_objects = u8(f) % 8;
        zs_status status = max_objects ? zs_gc_purge_bounded(f->rt, 0, max_objects, &done)
                                       : zs_gc_purge(f->rt, 0, &done);
        trace(f, "host purge (%u) -> %d (done %d)", max_objects, (int)status, done);
        if (!host_after(f, "a host's zs_gc_purge", status, true)) return false;
        if (f->in_expiry > 0) return true;
        check(status == ZS_OK, "a host's purge of a gathered cycle: %d", (int)status);
    }
    check(f->in_expiry > 0 || zs_gc_phase_of(f->rt) != ZS_GC_PURGE_PENDING,
          "a host's purges did not finish");
    return true;
}

/* Steps of a pending mark until it has gathered, bounded in work; or
   (`until` ZS_GC_GATHERING) by a 1 ns budget until the mark is complete
   and its gather not yet begun (a step bounded by work alone gathers to
   the end once its mark completes). */
static void host_steps(fz *f, zs_gc_phase until) {
    for (int i = 0; i < 1000; i++) {
        zs_gc_phase phase = zs_gc_phase_of(f->rt);
        if (phase == until || (phase != ZS_GC_MARKING && phase != ZS_GC_GATHERING)) return;
        int done = -1;
        zs_status status = until == ZS_GC_GATHERING
                               ? zs_gc_step(f->rt, 1, &done)
                               : zs_gc_step_bounded(f->rt, 0, 1 + u8(f) % 16, &done);
        check(status == ZS_OK, "a host's step: %d in phase %d", (int)status, (int)phase);
        check_heap(f, "a host's step");
    }
}

/* zs_gc_expire with a limit from the input: without a handler refused
   (ZS_E_INVALID); with one, at most `limit` objects handed over, and when
   the handler calls nothing (so the list changes only by the hand-over)
   exactly the first min(limit, listed). */
static void expire(fz *f) {
    uint8_t b = u8(f);
    uint32_t limit = b < 32 ? 0 : b < 192 ? b % 8 : b < 224 ? 250u + b % 16 : UINT32_MAX;
    bool out = (u8(f) & 31) != 0, set = f->expiry_set;
    uint32_t before = zs_gc_expiring_count(f->rt), taken = 99, active = f->expiry_active;
    uint64_t handed = f->expiry_objects;
    zs_status status = zs_gc_expire(f->rt, limit, out ? &taken : NULL);
    trace(f, "expire %u of %u -> %d (%u)", limit, before, (int)status, taken);
    if (!collection_returned(f, "zs_gc_expire", status, false)) return;
    if (!out || !set) {
        check(status == ZS_E_INVALID && f->expiry_objects == handed, "zs_gc_expire without %s: %d",
              out ? "a handler" : "out_taken", (int)status);
        if (out) check(taken == 0, "zs_gc_expire without a handler took %u", taken);
        return;
    }
    check(status == ZS_OK && taken <= limit && f->expiry_objects - handed >= taken,
          "zs_gc_expire: %d, %u of %u taken, %llu handed over", (int)status, taken, limit,
          (unsigned long long)(f->expiry_objects - handed));
    uint32_t after = zs_gc_expiring_count(f->rt);
    if (limit == UINT32_MAX) check(after == 0, "zs_gc_expire of every one left %u", after);
    if (f->expiry_active == active) {
        uint32_t want = limit < before ? limit : before;
        check(taken == want && after == before - taken,
              "zs_gc_expire(%u) of %u listed took %u, left %u", limit, before, taken, after);
    }
}

/* A native host's collection while the program holds proxies (it may make
   some first): a full one; an incremental cycle of steps and purges; the
   old recipe (mark and gather, purge); mark and gather, then the managed
   side's own budgeted zs_gc_expire, then purge; an incremental cycle with
   a purge between its mark and its gather (refused: it waits for the
   gather). Every call is checked as host_after says. */
static void host_collect(fz *f) {
    zs_runtime *rt = f->rt;
    /* Proxies: of new objects nothing references (this collection's dead),
       and of objects the program has seen; or a burst of new ones, more than
       one hand-over's batch (256). */
    uint32_t n = u8(f);
    const zs_class *burst = n >= 248 ? pick_class(f)->cls : NULL;
    for (n = burst ? 250u + n : n % 8u; n > 0; n--) {
        zs_ref ref = ZS_NULL_REF;
        zs_object *object = NULL;
        if (burst || (u8(f) & 1)) {
            ref = zs_object_new_conjugate(rt, burst ? burst : pick_class(f)->cls, ZS_NULL_REF,
                                          ZS_NAME_AUTO, 0, NULL, 0, &object, NULL, 0, NULL);
            if (ref < ZS_FIRST_REF) continue;
            remember(f, ref);
            if (f->fresh_count < MAX_CONJ) f->fresh[f->fresh_count++] = ref;
        } else {
            ref = pick_handle(f);
            if (zs_resolve_for_conjugate(rt, ref, &object) != ZS_OK) continue;
        }
        conj_add(f, ref);
    }
    uint8_t how = u8(f) % 5;
    trace(f, "host collection %u (handler %d, %u proxies)", how, f->expiry_set, f->conj_count);
    zs_status status;
    switch (how) {
    case 0:
        status = zs_collect_garbage(rt);
        if (!host_after(f, "a host's zs_collect_garbage", status, true)) return;
        if (status == ZS_OK) check_collected(f, "a host's zs_collect_garbage");
        break;
    case 1:
    case 4:
        status = zs_gc_start_incremental(rt);
        trace(f, "host start incremental -> %d", (int)status);
        if (!host_after(f, "a host's zs_gc_start_incremental", status, true)) return;
        host_steps(f, how == 4 ? ZS_GC_GATHERING : ZS_GC_IDLE);
        if (how == 4 && zs_gc_phase_of(rt) == ZS_GC_GATHERING) {
            /* Purged between the mark and the gather: what is listed is
               handed over (nothing, unless the gather ran out of time in
               the middle: more objects than fuzzed runtimes hold), and the
               purge waits for the gather. */
            int done = -1;
            bool listed = zs_gc_expiring_count(rt) > 0;
            status = zs_gc_purge(rt, 0, &done);
            trace(f, "host purge mid-gather -> %d", (int)status);
            if (!host_after(f, "a host's zs_gc_purge mid-gather", status, true)) return;
            check(listed || status == ZS_E_BUSY, "a purge before the gather: %d", (int)status);
            host_steps(f, ZS_GC_IDLE);
        }
        host_purge(f);
        break;
    case 2:
    case 3:
        status = zs_gc_mark_and_gather(rt);
        trace(f, "host mark and gather -> %d", (int)status);
        if (!host_after(f, "a host's zs_gc_mark_and_gather", status, true)) return;
        if (how == 3) {
            expire(f);
            if (f->freed) return;
            check_heap(f, "zs_gc_expire");
        }
        host_purge(f);
        break;
    default:
        break;
    }
}

static void debug_set(fz *f) {
    static const uint32_t switches[] = {ZS_DEBUG_CHECK_MARKS,
                                        ZS_DEBUG_STEP_OBJECTS,
                                        ZS_DEBUG_POISON_FREED,
                                        ZS_DEBUG_MARK_STACK_LIMIT,
                                        ZS_DEBUG_PARALLEL_THRESHOLD,
                                        ZS_DEBUG_STRICT_ALLOC_LIMIT,
                                        0,
                                        99};
    uint32_t what = switches[below(f, sizeof switches / sizeof switches[0])];
    uint64_t value = u8(f) % 6;
    if (what == ZS_DEBUG_MARK_STACK_LIMIT && (u8(f) & 1)) value = 0;
    zs_status status = zs_debug_set(f->rt, what, value);
    check((status == ZS_OK) == (what != 0 && what != 99), "zs_debug_set(%u): %d", what,
          (int)status);
    trace(f, "debug set %u = %llu", what, (unsigned long long)value);
}

static void set_alloc_limit(fz *f) {
    zs_memory_stats memory;
    zs_runtime_memory(f->rt, &memory);
    uint8_t b = u8(f);
    uint64_t limit = b < 64 ? 0
                            : memory.live_bytes + (uint64_t)(b % 32) * (uint64_t)(1 + u8(f) % 64);
    zs_status status = zs_debug_set(f->rt, ZS_DEBUG_ALLOC_LIMIT, limit);
    check(status == ZS_OK, "zs_debug_set(ZS_DEBUG_ALLOC_LIMIT): %d", (int)status);
    trace(f, "alloc limit %llu (live %llu)", (unsigned long long)limit,
          (unsigned long long)memory.live_bytes);
}

static void new_type(fz *f) {
    uint8_t which = u8(f) % 3;
    const zs_type *t = NULL;
    zs_status status;
    if (which == 0) {
        zs_type_kind kind = (zs_type_kind)(u8(f) % 14);
        uint32_t size = u8(f) % 20, align = 1u << (u8(f) % 6);
        status = zs_type_basic(f->rt, kind, size, align, &t);
        if (status == ZS_OK) record_type(f, t, NULL, NULL, 0, NULL, NULL);
    } else if (which == 1) {
        zs_type_kind kind = (zs_type_kind)(u8(f) % 14);
        const htype *element = (u8(f) & 15) ? pick_type(f) : NULL;
        const htype *value = (u8(f) & 1) ? pick_type(f) : NULL;
        status = zs_type_container(f->rt, kind, element ? element->t : NULL,
                                   value ? value->t : NULL, &t);
        if (status == ZS_OK) {
            check(element != NULL, "a container without an element type");
            const htype *h = record_type(f, t, element, value, 0, NULL, NULL);
            if (h)
                check(h->element == element && h->value == value,
                      "a cached container type changed its elements");
        }
    } else {
        uint32_t count = u8(f) % 5;
        const htype *members[MAX_STRUCT_MEMBERS];
        zs_type_member descs[MAX_STRUCT_MEMBERS];
        uint32_t offsets[MAX_STRUCT_MEMBERS];
        uint32_t at = 0, align = 1;
        for (uint32_t i = 0; i < count; i++) {
            members[i] = pick_type(f);
            at = align_up(at, members[i]->align);
            if ((u8(f) & 15) == 0) at += u8(f) % 9; /* misaligned or overlapping: refused */
            offsets[i] = at;
            descs[i] = (zs_type_member){members[i]->t, at};
            at += members[i]->size;
            if (members[i]->align > align) align = members[i]->align;
        }
        uint32_t size = align_up(at ? at : 1, align) + ((u8(f) & 7) == 0 ? u8(f) % 5 : 0);
        if (size > SCRATCH) return;
        status = zs_type_struct(f->rt, "Dyn", size, align, descs, count, &t);
        if (status == ZS_OK) record_type(f, t, NULL, NULL, count, members, offsets);
    }
    trace(f, "new type (%u) -> %d", which, (int)status);
}

static void new_class(fz *f) {
    if (f->class_count == MAX_CLASSES) return;
    const hclass *parent = (u8(f) & 1) ? pick_class(f) : NULL;
    if (parent != NULL && parent->member_count + 8 > MAX_CLASS_MEMBERS) parent = NULL;
    hclass *c = class_begin(f, parent, false);
    uint32_t at = parent ? parent->size : (uint32_t)sizeof(zs_object);
    uint32_t first = c->member_count;
    uint32_t count = u8(f) % 7;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t kind = 1 + u8(f) % 4;
        const htype *type = kind == ZS_MEMBER_OBJECT         ? f->t_obj
                            : kind == ZS_MEMBER_WEAK_OBJECT  ? f->t_weak
                            : kind == ZS_MEMBER_OBJECT_ARRAY ? f->t_arr_obj
                                                             : pick_type(f);
        member_add(c, kind, type, &at);
        if ((u8(f) & 31) == 0) {
            /* A bad member: refused as a whole. */
            hmember *bad = &c->members[c->member_count - 1];
            bad->offset += u8(f) % 12;
            if (u8(f) & 1) {
                /* Another kind, with the type that kind means (accepted when it fits). */
                bad->kind = u8(f) % 8;
                if (bad->kind == ZS_MEMBER_OBJECT) bad->type = f->t_obj;
                else if (bad->kind == ZS_MEMBER_WEAK_OBJECT) bad->type = f->t_weak;
                else if (bad->kind == ZS_MEMBER_OBJECT_ARRAY) bad->type = f->t_arr_obj;
            }
        }
    }
    uint32_t size = align_up(at, 8) + ((u8(f) & 7) == 0 ? u8(f) % 24 : 0);
    if ((u8(f) & 31) == 0) size = u8(f); /* maybe too small */
    zs_status status = register_class(f, c, "Dyn", parent ? parent->cls : NULL, first, size,
                                      u8(f) % 4)
                           ? ZS_OK
                           : ZS_E_INVALID;
    if (status != ZS_OK) memset(c, 0, sizeof *c);
    trace(f, "new class (%u members) -> %d", count, (int)status);
}

static void chains(fz *f) {
    zs_ref target = pick_handle(f);
    zs_chain_link links[64];
    uint32_t capacity = u8(f) % 65, count = 0;
    bool usable = zs_resolve(f->rt, target) != NULL && zs_object_writable(f->rt, target) == ZS_OK;
    zs_status status = zs_reference_chains(f->rt, target, u8(f) % 4, capacity ? links : NULL,
                                           capacity, &count);
    trace(f, "chains of %u -> %d (%u links)", ZS_REF_INDEX(target), (int)status, count);
    if (status != ZS_OK) {
        check(!usable || status == ZS_E_NOMEM, "zs_reference_chains refused a live target: %d",
              (int)status);
        return;
    }
    check(usable, "zs_reference_chains answered for a stale or dying target");
    for (uint32_t i = 0; i < count && i < capacity; i++) {
        if (links[i].member == ZS_CHAIN_END)
            check(links[i].holder == target, "a chain ends elsewhere than its target");
        if (zs_resolve(f->rt, links[i].holder) != NULL) remember(f, links[i].holder);
    }
}

/* An operation on the API with a stale holder: refused with ZS_E_STALE. */
static void stale_write(fz *f) {
    zs_ref owner = pick_handle(f);
    if (owner == ZS_NULL_REF || zs_resolve(f->rt, owner) != NULL) return;
    const htype *t = pick_type(f);
    _Alignas(16) char scratch[SCRATCH];
    memset(scratch, 0, sizeof scratch);
    zs_status status;
    switch (t->kind) {
    case ZS_TYPE_STRING:
        status = zs_string_assign(f->rt, owner, t->t, (zs_string *)scratch, "ab", 1);
        break;
    case ZS_TYPE_ARRAY:
        status = zs_array_insert(f->rt, owner, t->t, (zs_array *)scratch, 0, NULL, 1);
        break;
    case ZS_TYPE_OPTIONAL:
        status = zs_optional_set(f->rt, owner, t->t, scratch, NULL);
        break;
    case ZS_TYPE_MULTICAST:
        status = zs_multicast_add(f->rt, owner, (zs_array *)scratch, ZS_NULL_REF, 0, 1);
        break;
    case ZS_TYPE_DELEGATE:
        status = zs_binding_set(f->rt, owner, (zs_binding *)scratch, ZS_NULL_REF, 0, 1);
        break;
    case ZS_TYPE_OBJECT:
        status = zs_value_store_ref(f->rt, owner, t->t, (zs_ref *)scratch, ZS_NULL_REF);
        break;
    case ZS_TYPE_SET:
    case ZS_TYPE_MAP: {
        _Alignas(16) char key[SCRATCH];
        memset(key, 0, sizeof key);
        status = zs_hash_add(f->rt, owner, t->t, (zs_hash *)scratch, key, NULL, NULL);
        break;
    }
    default:
        status = zs_value_clear(f->rt, owner, t->t, scratch);
        break;
    }
    check(status == ZS_E_STALE, "a write with the stale owner %u/%u returned %d",
          ZS_REF_INDEX(owner), ZS_REF_SERIAL(owner), (int)status);
    for (size_t i = 0; i < sizeof scratch; i++)
        check(scratch[i] == 0, "a refused write changed memory");
    trace(f, "stale write kind %u -> %d", t->kind, (int)status);
}

/* A second runtime: its classes, types and handles mean nothing to the first. */
static void other_runtime(fz *f) {
    zs_runtime_options options;
    zs_runtime_default_options(&options);
    options.max_objects = 16;
    options.mark_threads = 1;
    zs_runtime *other = NULL;
    if (zs_runtime_new(&options, &other) != ZS_OK) return;
    zs_member member = {ZS_MEMBER_OBJECT, sizeof(zs_object), NULL};
    zs_class_desc desc = {"Node", NULL, sizeof(zs_object) + 8, 0, &member, 1, NULL, 0, NULL, 0};
    const zs_class *cls = NULL;
    const zs_type *type = NULL;
    check(zs_class_register(other, &desc, &cls) == ZS_OK, "registering a class in a fresh runtime");
    check(zs_type_basic(other, ZS_TYPE_STRING, 1, 1, &type) == ZS_OK, "a type in a fresh runtime");
    zs_ref ref = ZS_NULL_REF, value = ZS_NULL_REF;
    void *ptr = NULL;
    check(zs_object_new(f->rt, cls, ZS_NULL_REF, ZS_NAME_AUTO, 0, &ref, NULL) == ZS_E_INVALID,
          "an object of another runtime's class");
    check(zs_value_new(f->rt, type, &value, &ptr) == ZS_E_INVALID,
          "a black value of another runtime's type");
    zs_class_desc child = {"Child", cls, sizeof(zs_object) + 8, 0, NULL, 0, NULL, 0, NULL, 0};
    const zs_class *child_cls = NULL;
    check(zs_class_register(f->rt, &child, &child_cls) == ZS_E_INVALID,
          "a class with another runtime's parent");
    check(zs_call_each(f->rt, cls, "tick", NULL, NULL) != ZS_OK,
          "zs_call_each with another runtime's class");
    const zs_type *arr = NULL;
    check(zs_type_container(f->rt, ZS_TYPE_ARRAY, type, NULL, &arr) == ZS_E_INVALID,
          "a container of another runtime's type");
    /* Handles of the first runtime in the second (and back). */
    zs_ref mine = pick_handle(f);
    (void)zs_resolve(other, mine);
    (void)zs_add_to_root(other, mine);
    zs_ref theirs = ZS_NULL_REF;
    if (zs_object_new(other, cls, ZS_NULL_REF, ZS_NAME_AUTO, 0, &theirs, NULL) == ZS_OK)
        remember(f, theirs);
    zs_runtime_free(other);
    trace(f, "other runtime");
}

/* One operation; false when the input is used up. */
/* ======================================================================
 * The tick manager
 * ====================================================================== */

/* A tick function the program registered, or a raw handle. */
static zs_tick pick_tick(fz *f) {
    if (f->tick_count == 0 || (u8(f) & 15) == 0) return (zs_tick)u64(f);
    return f->ticks[below(f, f->tick_count)];
}

/* Seconds from the input: mostly plausible, sometimes negative or NaN. */
static double pick_seconds(fz *f) {
    static const double seconds[] = {0.0, 0.0, 1.0 / 60, 0.25, 0.5, 1.0, -1.0, NAN, INFINITY};
    return seconds[below(f, sizeof seconds / sizeof seconds[0])];
}

/* zs_tick_register on a picked handle: a native entry, or a function by
   name (a described class's, through the handler when one is set), with
   a fuzzed group, interval and flags. A good description of a live object
   neither dying nor garbage is refused only by name (or out of memory). */
static void tick_register(fz *f) {
    zs_runtime *rt = f->rt;
    zs_ref object = pick_handle(f);
    bool by_name = (u8(f) & 3) == 0;
    zs_tick_desc desc = {.object = object,
                         .function = by_name ? fn_names[below(f, 6)] : NULL,
                         .entry = by_name ? NULL : tick_entry,
                         .user = f,
                         .group = u8(f) % (ZS_TICK_GROUP_COUNT + 1),
                         .interval = pick_seconds(f)};
    uint8_t flags = u8(f);
    desc.flags = (flags & 15) == 0 ? 0x80u : (flags & 1) ? ZS_TICK_DISABLED : 0u;
    bool bad = desc.group >= ZS_TICK_GROUP_COUNT || !(desc.interval >= 0) ||
               !isfinite(desc.interval) || desc.flags == 0x80u;
    int garbage = 0;
    bool stale = zs_resolve(rt, object) == NULL;
    bool dying = !stale && (zs_object_writable(rt, object) == ZS_E_DYING ||
                            (zs_is_garbage(rt, object, &garbage) == ZS_OK && garbage));
    zs_tick tick = 7;
    zs_status status = zs_tick_register(rt, &desc, &tick);
    trace(f, "tick register %s on %u -> %d", by_name ? desc.function : "entry",
          ZS_REF_INDEX(object), (int)status);
    check((status == ZS_OK) == (tick != 0), "zs_tick_register: status %d, handle %llu", (int)status,
          (unsigned long long)tick);
    if (bad) check(status == ZS_E_INVALID, "a bad tick description: %d", (int)status);
    else if (stale) check(status == ZS_E_STALE, "a tick of a stale object: %d", (int)status);
    else if (dying) check(status == ZS_E_DYING, "a tick of a dying object: %d", (int)status);
    else if (!by_name)
        check(status == ZS_OK || status == ZS_E_NOMEM, "a tick entry refused: %d", (int)status);
    if (status != ZS_OK) return;
    uint32_t at = f->tick_count < MAX_TICKS ? f->tick_count++ : f->tick_next++ % MAX_TICKS;
    f->ticks[at] = tick;
    zs_tick_info info;
    check(zs_tick_get_info(rt, tick, &info) == ZS_OK && info.object == object &&
              info.group == desc.group && info.by_name == by_name &&
              info.enabled == !(desc.flags & ZS_TICK_DISABLED) && info.calls == 0,
          "a new tick function's info");
}

/* Change a picked tick function: every call on an unregistered one gives
   ZS_E_STALE, and it stays unregistered. */
static void tick_change(fz *f) {
    zs_runtime *rt = f->rt;
    zs_tick tick = pick_tick(f);
    zs_tick_info info;
    bool registered = zs_tick_get_info(rt, tick, &info) == ZS_OK;
    uint32_t count = zs_tick_count(rt);
    uint8_t what = u8(f) % 8;
    zs_status status = ZS_OK;
    switch (what) {
    case 0:
        status = zs_tick_unregister(rt, tick);
        if (status == ZS_OK) {
            check(zs_tick_get_info(rt, tick, &info) == ZS_E_STALE, "unregistered, yet registered");
            check(zs_tick_count(rt) == count - 1, "zs_tick_count after unregister");
        }
        break;
    case 1: {
        uint32_t gone = 99;
        zs_ref object = pick_handle(f);
        status = zs_tick_unregister_object(rt, object, &gone);
        check(gone <= count, "zs_tick_unregister_object unregistered %u of %u", gone, count);
        check(object != ZS_NULL_REF || status == ZS_E_INVALID, "unregister of object 0");
        status = ZS_OK;
        break;
    }
    case 2:
        status = zs_tick_set_enabled(rt, tick, u8(f) & 1);
        break;
    case 3: {
        double seconds = pick_seconds(f);
        status = zs_tick_set_interval(rt, tick, seconds);
        if (!(seconds >= 0) || !isfinite(seconds))
            check(status == ZS_E_INVALID, "a bad interval: %d", (int)status);
        break;
    }
    case 4: {
        uint32_t group = u8(f) % (ZS_TICK_GROUP_COUNT + 1);
        status = zs_tick_set_group(rt, tick, group);
        if (group >= ZS_TICK_GROUP_COUNT)
            check(status == ZS_E_INVALID, "a bad group: %d", (int)status);
        break;
    }
    case 5:
    case 6: {
        zs_tick other = pick_tick(f);
        status = what == 5 ? zs_tick_add_prerequisite(rt, tick, other)
                           : zs_tick_remove_prerequisite(rt, tick, other);
        if (what == 5 && other == tick && registered)
            check(status == ZS_E_INVALID, "a tick function its own prerequisite: %d", (int)status);
        break;
    }
    default:
        status = zs_tick_get_info(rt, tick, &info);
        break;
    }
    trace(f, "tick change %u of %u -> %d", what, ZS_REF_INDEX(tick), (int)status);
    if (!registered && what != 1)
        check(status == ZS_E_STALE || status == ZS_E_INVALID,
              "a call on an unregistered tick function: %d", (int)status);
}

/* zs_tick_frame: a bad delta is refused, a frame inside a frame too;
   else it runs (ZS_E_NOMEM under an allocation limit). */
static void tick_frame(fz *f) {
    zs_runtime *rt = f->rt;
    double dt = pick_seconds(f);
    zs_frame_gc gc;
    zs_frame_gc_defaults(&gc);
    gc.seconds_between_cycles = (u8(f) & 1) ? 0.0 : 0.5;
    gc.mark_budget_ns = u8(f) % 3 == 0 ? 0 : 1000u * u8(f);
    gc.purge_budget_ns = gc.mark_budget_ns;
    gc.objects_per_frame = u8(f) % 4 == 0 ? 0 : 1u + u8(f) % 16;
    bool collect = (u8(f) & 3) == 0;
    bool nested = f->frame_depths != 0;
    uint32_t bit = f->depth < 32 ? 1u << f->depth : 0, saved = f->frame_depths;
    f->frame_depths |= bit;
    uint64_t calls = f->tick_calls;
    zs_frame_stats stats;
    zs_status status = zs_tick_frame(rt, dt, collect ? &gc : NULL, &stats);
    trace(f, "tick frame %g -> %d (%u ticked)", dt, (int)status, stats.ticked);
    if (f->freed) {
        f->gone = f->depth == 0;
        return;
    }
    f->frame_depths = saved;
    bool bad = !(dt >= 0) || !isfinite(dt);
    if (bad) check(status == ZS_E_INVALID, "zs_tick_frame(%g): %d", dt, (int)status);
    else if (nested) check(status == ZS_E_BUSY, "a frame inside a frame: %d", (int)status);
    else check(status == ZS_OK || status == ZS_E_NOMEM, "zs_tick_frame: %d", (int)status);
    if (status != ZS_OK) {
        check(f->tick_calls == calls && stats.frame == 0, "a refused frame ticked");
        return;
    }
    check(stats.frame > 0 && stats.failed <= stats.ticked + zs_tick_count(rt) + stats.unregistered,
          "a frame's figures");
    check(f->tick_calls - calls <= stats.ticked + stats.skipped, "tick entries beyond the count");
    zs_status g = stats.gc_status;
    check(g == ZS_OK || g == ZS_E_BUSY || g == ZS_E_EXPIRY_PENDING || g == ZS_E_STALE ||
              g == ZS_E_NOMEM,
          "a frame's collection: %d", (int)g);
    if (!collect) check(stats.gc == ZS_FRAME_GC_NONE, "a frame with no collection collected");
}

static void run_op(fz *f) {
    zs_runtime *rt = f->rt;
    uint8_t op = u8(f) % (f->expiry_mode ? OP_COUNT_EXPIRY : OP_COUNT);
    f->ops++;
    switch (op) {
    case OP_NEW:
    case OP_NEW2:
        new_object(f, false);
        break;
    case OP_NEW_CONJUGATE:
        new_object(f, true);
        break;
    case OP_STORE:
    case OP_STORE2:
        store(f, 0);
        break;
    case OP_ARRAY_PUSH:
        store(f, 1);
        break;
    case OP_ARRAY_CLEAR:
        store(f, 2);
        break;
    case OP_ROOT:
    case OP_UNROOT:
    case OP_STRONG:
    case OP_UNSTRONG: {
        zs_ref ref = pick_handle(f);
        zs_status status;
        pin *p = pin_of(f, ref, op == OP_ROOT || op == OP_STRONG);
        if (p == NULL && (op == OP_ROOT || op == OP_STRONG)) break; /* no room in the model */
        if (op == OP_ROOT) status = zs_add_to_root(rt, ref);
        else if (op == OP_UNROOT) status = zs_remove_from_root(rt, ref);
        else if (op == OP_STRONG) status = zs_add_strong_ref(rt, ref);
        else status = zs_release_strong_ref(rt, ref);
        if (status == ZS_OK) {
            check(p != NULL || op == OP_UNROOT,
                  "a release of a strong reference the program never added");
            if (p != NULL) {
                if (op == OP_ROOT) p->rooted = true;
                else if (op == OP_UNROOT) p->rooted = false;
                else if (op == OP_STRONG) p->strong++;
                else p->strong--;
            }
        } else if (op == OP_UNSTRONG && p != NULL && p->strong > 0) {
            check(status != ZS_E_INVALID, "zs_release_strong_ref refused a held reference");
        }
        trace(f, "root/strong op %d on %u -> %d", op, ZS_REF_INDEX(ref), (int)status);
        break;
    }
    case OP_GARBAGE: {
        zs_ref ref = pick_handle(f);
        zs_status status = zs_mark_as_garbage(rt, ref);
        trace(f, "mark as garbage %u -> %d", ZS_REF_INDEX(ref), (int)status);
        break;
    }
    case OP_QUERY: {
        zs_ref ref = pick_handle(f);
        int flag = -1;
        uint32_t count = 0;
        int32_t cluster = 0;
        zs_object *object = zs_resolve(rt, ref);
        zs_status a = zs_is_rooted(rt, ref, &flag), b = zs_is_garbage(rt, ref, &flag),
                  c = zs_is_permanent(rt, ref, &flag), d = zs_strong_ref_count(rt, ref, &count),
                  e = zs_object_cluster(rt, ref, &cluster);
        zs_status want = object ? ZS_OK : ZS_E_STALE;
        check(a == want && b == want && c == want && d == want && e == want,
              "queries disagree on %u", ZS_REF_INDEX(ref));
        if (object != NULL) {
            check(zs_object_ref(rt, object) == ref, "zs_object_ref of a resolved object");
            if (cluster >= 0) {
                zs_cluster_info info;
                check(zs_cluster_get_info(rt, cluster, &info) == ZS_OK && info.objects >= 1,
                      "an object's cluster has no info");
            }
        }
        check(zs_object_ref(rt, NULL) == ZS_NULL_REF, "zs_object_ref(NULL)");
        (void)zs_live_objects(rt);
        (void)zs_value_count(rt);
        break;
    }
    case OP_RESOLVE_CONJUGATE: {
        zs_ref ref = pick_handle(f);
        zs_object *object = NULL;
        zs_status status = zs_resolve_for_conjugate(rt, ref, &object);
        if (status == ZS_OK) {
            check(object == zs_resolve(rt, ref), "zs_resolve_for_conjugate gave another object");
            conj_add(f, ref);
        }
        trace(f, "resolve for conjugate %u -> %d", ZS_REF_INDEX(ref), (int)status);
        break;
    }
    case OP_FORGET_CONJUGATE: {
        zs_ref ref = pick_handle(f);
        bool handler_set = f->expiry_set;
        zs_status status = zs_forget_conjugate(rt, ref);
        /* While a handler is set the flag is the handler's: refused. */
        if (handler_set)
            check(status == ZS_E_BUSY, "zs_forget_conjugate with a handler: %d", (int)status);
        /* The model forgets it too (one already on the expiring list stays
           there, but the program cannot tell which were gathered). */
        if (status == ZS_OK) conj_remove(f, ref);
        trace(f, "forget conjugate %u -> %d", ZS_REF_INDEX(ref), (int)status);
        break;
    }
    case OP_DROP_CONJUGATES: {
        /* The managed side drops up to four conjugates, flagging the fresh
           ones as their objects' sole holders: told alone, or with a new
           object's creation. */
        zs_dropped_conjugate dropped[4];
        bool was_alive[4];
        uint32_t count = 0, sole = 0;
        for (uint32_t n = 1 + below(f, 4); count < n && f->conj_count > 0; count++) {
            zs_ref ref = f->conj[below(f, f->conj_count)];
            bool fresh = fresh_take(f, ref, true);
            dropped[count] = (zs_dropped_conjugate){ref, fresh, 0};
            was_alive[count] = zs_resolve(rt, ref) != NULL;
            sole += fresh;
            conj_remove(f, ref);
        }
        uint32_t destroyed = 0, live = zs_live_objects(rt);
        if (f->expiry_set && count > 0) {
            /* Told by anyone but the side that set the expiry handler (a
               host): refused, nothing changed (the flags are that side's
               only record of its proxies). */
            uint32_t none = 1;
            check(zs_conjugates_dropped(rt, dropped, dropped, count, &none) == ZS_E_BUSY &&
                      none == 0 && zs_live_objects(rt) == live,
                  "zs_conjugates_dropped by another owner was not refused");
            void *object = NULL;
            zs_ref made = zs_object_new_conjugate(rt, f->classes[0].cls, ZS_NULL_REF, ZS_NAME_AUTO,
                                                  0, NULL, 0, &object, dropped, count, dropped);
            check(made == (zs_ref)ZS_E_BUSY && zs_live_objects(rt) == live,
                  "zs_object_new_conjugate dropping for another owner was not refused");
        }
        if (u8(f) & 1) {
            check(zs_conjugates_dropped(rt, f, dropped, count, &destroyed) == ZS_OK,
                  "zs_conjugates_dropped refused its owner");
            check(destroyed == live - zs_live_objects(rt), "zs_conjugates_dropped miscounted");
        } else {
            void *object = NULL;
            zs_ref made = zs_object_new_conjugate(rt, f->classes[0].cls, ZS_NULL_REF, ZS_NAME_AUTO,
                                                  0, NULL, 0, &object, dropped, count, f);
            if (made >= ZS_FIRST_REF) {
                remember(f, made);
                conj_add(f, made);
                if (f->fresh_count < MAX_CONJ) f->fresh[f->fresh_count++] = made;
            }
            destroyed = live + (made >= ZS_FIRST_REF) - zs_live_objects(rt);
        }
        check(destroyed <= sole, "zs_conjugates_dropped destroyed %u objects, %u flagged sole",
              destroyed, sole);
        for (uint32_t i = 0; i < count; i++)
            check(dropped[i].sole_holder || !was_alive[i] || zs_resolve(rt, dropped[i].ref),
                  "zs_conjugates_dropped destroyed an object it was not told was unshared");
        trace(f, "drop %u conjugates (%u sole) -> %u destroyed", count, sole, destroyed);
        break;
    }
    case OP_FIND_OBJECT: {
        zs_ref outer = (u8(f) & 1) ? pick_handle(f) : ZS_NULL_REF, found = 1;
        uint32_t name = pick_name(f), number = u8(f) % 4;
        zs_status status = zs_find_object(rt, outer, name == ZS_NAME_AUTO ? 3 : name, number,
                                          &found);
        if (status == ZS_OK && found != ZS_NULL_REF) {
            zs_object *object = zs_resolve(rt, found);
            check(object != NULL && object->name_index == (name == ZS_NAME_AUTO ? 3 : name) &&
                      object->name_number == number,
                  "zs_find_object found the wrong object");
            check(zs_object_writable(rt, found) == ZS_OK, "zs_find_object found a dying object");
            remember(f, found);
        }
        trace(f, "find object -> %d", (int)status);
        break;
    }
    case OP_LIVE_HANDLES: {
        zs_ref buffer[32];
        uint32_t capacity = u8(f) % 33, count = 0;
        zs_status status = zs_live_handles(rt, capacity ? buffer : NULL, capacity, &count);
        check(status == ZS_OK && count == zs_live_objects(rt), "zs_live_handles: %d, %u",
              (int)status, count);
        for (uint32_t i = 0; i < count && i < capacity; i++) {
            check(zs_resolve(rt, buffer[i]) != NULL, "zs_live_handles gave a stale handle");
            remember(f, buffer[i]);
        }
        break;
    }
    case OP_COLLECT: {
        zs_status status = zs_collect_garbage(rt);
        trace(f, "collect -> %d", (int)status);
        if (!collection_returned(f, "zs_collect_garbage", status, true)) break;
        check(status == ZS_OK || status == ZS_E_EXPIRY_PENDING || status == ZS_E_NOMEM ||
                  status == ZS_E_BUSY,
              "zs_collect_garbage: %d", (int)status);
        if (status == ZS_OK) check_collected(f, "zs_collect_garbage");
        break;
    }
    case OP_MARK_GATHER: {
        zs_status status = zs_gc_mark_and_gather(rt);
        trace(f, "mark and gather -> %d", (int)status);
        collection_returned(f, "zs_gc_mark_and_gather", status, true);
        break;
    }
    case OP_TAKE_EXPIRING:
        take_expiring(f, u8(f) % 70);
        break;
    case OP_PURGE: {
        int done = -1;
        uint64_t budget = (u8(f) & 3) == 0 ? 1 : 0;
        uint32_t max_objects = u8(f) % 6;
        zs_status status = (u8(f) & 1) ? zs_gc_purge_bounded(rt, budget, max_objects, &done)
                                       : zs_gc_purge(rt, budget, &done);
        trace(f, "purge -> %d (done %d)", (int)status, done);
        collection_returned(f, "zs_gc_purge", status, true);
        break;
    }
    case OP_START_INCREMENTAL: {
        zs_status status = zs_gc_start_incremental(rt);
        trace(f, "start incremental -> %d", (int)status);
        collection_returned(f, "zs_gc_start_incremental", status, true);
        break;
    }
    case OP_STEP: {
        int done = -1;
        uint64_t budget = (u8(f) & 3) == 0 ? 1 : 0;
        uint32_t max_objects = u8(f) % 8;
        zs_status status = (u8(f) & 1) ? zs_gc_step_bounded(rt, budget, max_objects, &done)
                                       : zs_gc_step(rt, budget, &done);
        trace(f, "step -> %d (done %d)", (int)status, done);
        break;
    }
    case OP_FINISH_CYCLE:
        finish_cycle(f);
        break;
    case OP_CLUSTER_CREATE: {
        zs_ref root = pick_handle(f);
        uint32_t size = 99;
        zs_status status = zs_create_cluster(rt, root, (u8(f) & 7) ? &size : NULL);
        trace(f, "create cluster %u -> %d (%u)", ZS_REF_INDEX(root), (int)status, size);
        break;
    }
    case OP_CLUSTER_DISSOLVE: {
        zs_ref member = pick_handle(f);
        zs_status status = zs_dissolve_cluster(rt, member);
        trace(f, "dissolve cluster %u -> %d", ZS_REF_INDEX(member), (int)status);
        break;
    }
    case OP_CLUSTER_INFO: {
        zs_cluster_info info;
        int32_t id = (int32_t)(u8(f) % 20) - 2;
        if (zs_cluster_get_info(rt, id, &info) == ZS_OK) {
            check(zs_resolve(rt, info.root) != NULL, "a cluster's root is stale");
            remember(f, info.root);
        }
        (void)zs_cluster_count(rt);
        break;
    }
    case OP_DEBUG_SET:
        debug_set(f);
        break;
    case OP_CLOSE_DISREGARD:
        (void)zs_close_disregard_for_gc(rt);
        break;
    case OP_VALUE_NEW: {
        const htype *t = pick_type(f);
        zs_ref handle = ZS_NULL_REF;
        void *ptr = NULL;
        zs_status status = zs_value_new(rt, (u8(f) & 31) ? t->t : NULL, &handle, &ptr);
        trace(f, "value new kind %u -> %d", t->kind, (int)status);
        if (status != ZS_OK) break;
        check(zs_value_resolve(rt, handle) == ptr, "a new black value does not resolve");
        for (uint32_t i = 0; i < t->size; i++)
            check(((char *)ptr)[i] == 0, "a new black value is not zeroed");
        uint32_t at = f->value_count < MAX_VALUES ? f->value_count++ : f->value_next++ % MAX_VALUES;
        if (f->value_count == MAX_VALUES && zs_value_resolve(rt, f->values[at].handle) != NULL &&
            (u8(f) & 1))
            (void)zs_value_free(rt, f->values[at].handle);
        f->values[at].handle = handle;
        f->values[at].type = t;
        break;
    }
    case OP_VALUE_FREE: {
        zs_ref handle = f->value_count ? f->values[below(f, f->value_count)].handle : u64(f);
        if (u8(f) % 8 == 0) handle = pick_handle(f);
        bool live = zs_value_resolve(rt, handle) != NULL;
        zs_status status = zs_value_free(rt, handle);
        check(status == (live ? ZS_OK : ZS_E_STALE), "zs_value_free: %d (live %d)", (int)status,
              live);
        check(zs_value_resolve(rt, handle) == NULL, "a freed black value still resolves");
        trace(f, "value free -> %d", (int)status);
        break;
    }
    case OP_VALUE_OP:
    case OP_VALUE_OP2:
    case OP_VALUE_OP3: {
        loc l;
        if (pick_loc(f, &l)) value_op(f, l, 0);
        break;
    }
    case OP_CALLABLES: {
        uint32_t callable = pick_callable(f);
        uint8_t what = u8(f) % 3;
        if (what == 0) (void)zs_callable_retain(rt, callable);
        else if (what == 1) (void)zs_callable_release(rt, callable);
        else {
            uint32_t buffer[16], count = 99, capacity = u8(f) % 17;
            check(zs_take_released_callables(rt, capacity ? buffer : NULL, capacity, &count) ==
                          ZS_OK &&
                      count <= capacity,
                  "zs_take_released_callables");
        }
        break;
    }
    case OP_NAME_INTERN: {
        char text[80];
        uint32_t length = u8(f) % sizeof text;
        for (uint32_t i = 0; i < length; i++) text[i] = (char)u8(f);
        if ((u8(f) & 15) == 0) length = 1025;
        uint32_t index = 0, number = 0;
        zs_status status = zs_name_intern(rt, length <= sizeof text ? text : NULL, length, &index,
                                          &number);
        if (status == ZS_OK) {
            check(index < zs_name_count(rt) && zs_name_base(rt, index) != NULL,
                  "an interned name has no base");
            if (f->name_count < MAX_NAMES) f->names[f->name_count++] = index;
        }
        trace(f, "intern %u bytes -> %d (%u)", length, (int)status, index);
        break;
    }
    case OP_NAME_QUERY: {
        uint32_t count = zs_name_count(rt), index = u8(f) % (count + 2);
        const char *base = zs_name_base(rt, index);
        check((base != NULL) == (index < count), "zs_name_base(%u) of %u names", index, count);
        break;
    }
    case OP_FIND_CLASS: {
        static const char *names[] = {"Node",  "Vals", "Leaf", "Huge", "Run6",
                                      "Plain", "Dyn",  "node", ""};
        const zs_class *cls = NULL;
        const char *name = names[below(f, sizeof names / sizeof names[0])];
        zs_status status = zs_find_class(rt, name, &cls);
        if (status == ZS_OK)
            check(strcmp(zs_class_name(cls), name) == 0, "zs_find_class found another name");
        break;
    }
    case OP_TYPE_NEW:
        new_type(f);
        break;
    case OP_CLASS_NEW:
        new_class(f);
        break;
    case OP_CHAINS:
        chains(f);
        break;
    case OP_CALL_FUNCTION:
    case OP_CALL_FUNCTION2: {
        zs_ref object = pick_handle(f);
        char params[FN_BLOCK] = {0};
        const char *name = (u8(f) & 15) ? fn_names[below(f, 6)] : "";
        zs_object *target = zs_resolve(rt, object);
        bool live = target != NULL && zs_object_writable(rt, object) == ZS_OK;
        bool described = live && describes(class_of(f, target), name);
        bool handler = f->handler_set; /* the call's own program may change it */
        uint64_t calls = f->fn_calls;
        zs_status status = zs_call_function(rt, object, name, (u8(f) & 1) ? params : NULL);
        if (f->freed) {
            f->gone = f->depth == 0;
            break;
        }
        /* Without a handler the function the object's class describes runs:
           the entry's status (an event without one does nothing), else
           ZS_E_INVALID; a stale or dying object says so. */
        if (!handler && live && described) {
            if (strcmp(name, "on_event") == 0)
                check(status == ZS_OK && f->fn_calls == calls,
                      "an event without a native default: %d", (int)status);
            else
                check(f->fn_calls > calls && status == f->fn_status,
                      "zs_call_function of a described function: %d, its entry %d", (int)status,
                      (int)f->fn_status);
        } else if (!handler) {
            check(status == ZS_E_INVALID ||
                      (!live && (status == ZS_E_STALE || status == ZS_E_DYING)),
                  "zs_call_function without a handler: %d", (int)status);
        }
        if (!live)
            check(status == ZS_E_STALE || status == ZS_E_DYING ||
                      (!handler && status == ZS_E_INVALID),
                  "a call on a stale or dying object returned %d", (int)status);
        if (!live || (!handler && !described))
            check(f->fn_calls == calls, "an entry ran for a refused call");
        trace(f, "call function %s on %u -> %d", name, ZS_REF_INDEX(object), (int)status);
        break;
    }
    case OP_CALL_EACH:
    case OP_CALL_EACH2: {
        const hclass *c = pick_class(f);
        const char *name = fn_names[below(f, 6)];
        uint32_t called = 99, live = zs_live_objects(rt);
        char params[FN_BLOCK] = {0};
        uint32_t bit = f->depth < 32 ? 1u << f->depth : 0, saved = f->each_depths;
        f->each_depths |= bit;
        zs_status status = zs_call_each(rt, (u8(f) & 15) ? c->cls : NULL, name,
                                        (u8(f) & 3) ? params : NULL, (u8(f) & 1) ? &called : NULL);
        if (f->freed) {
            f->gone = f->depth == 0;
            break;
        }
        f->each_depths = saved;
        if (called != 99)
            check(called <= live, "zs_call_each called %u of %u objects", called, live);
        trace(f, "call each %s -> %d (%u)", name, (int)status, called);
        break;
    }
    case OP_SET_HANDLER: {
        f->handler_set = u8(f) % 4 != 0;
        f->handler_mode = u8(f);
        zs_set_call_handler(rt, f->handler_set ? call_handler : NULL, f);
        break;
    }
    case OP_SET_HOOK: {
        f->hook_set = u8(f) % 4 != 0;
        f->hook_mode = u8(f);
        zs_set_destroy_hook(rt, f->hook_set ? destroy_hook : NULL, f);
        break;
    }
    case OP_FREE_IN_CALL:
        /* Inside a call the managed function may close its runtime: the
           free waits for the last call to return. */
        if (f->depth > 0 && (u8(f) & 3) == 0) {
            trace(f, "runtime free inside a call");
            f->freed = true;
            zs_runtime_free(rt);
        }
        break;
    case OP_OTHER_RUNTIME:
        other_runtime(f);
        break;
    case OP_STATS: {
        zs_gc_stats stats;
        zs_memory_stats memory;
        zs_gc_get_stats(rt, &stats);
        zs_runtime_memory(rt, &memory);
        check(memory.live_blocks > 0 && memory.peak_bytes >= memory.live_bytes,
              "memory statistics");
        check(zs_gc_pending_purge(rt) <= zs_live_objects(rt),
              "more pending purges than live objects");
        (void)zs_calls_in_progress(rt);
        (void)zs_debug_check_failures(rt);
        break;
    }
    case OP_ALLOC_LIMIT:
        set_alloc_limit(f);
        break;
    case OP_STALE_WRITE:
        stale_write(f);
        break;
    case OP_DESCRIBED_CLASS:
        new_described_class(f);
        break;
    case OP_CALL_NATIVE:
        call_native(f);
        break;
    case OP_TICK_REGISTER:
        tick_register(f);
        break;
    case OP_TICK_CHANGE:
        tick_change(f);
        break;
    case OP_TICK_FRAME:
    case OP_TICK_FRAME2:
        tick_frame(f);
        break;
    case OP_BROADCAST:
    case OP_BROADCAST2:
        broadcast(f);
        break;
    case OP_SET_LISTENER_HANDLER:
        f->listener_set = u8(f) % 4 != 0;
        f->listener_mode = u8(f);
        zs_set_managed_listener_handler(rt, f->listener_set ? listener_handler : NULL, f);
        break;
    case OP_SET_EXPIRY: {
        /* Switched on or off (NULL: the old recipe, taking the list, again);
           refused while a hand-over runs. */
        bool on = u8(f) % 4 != 0;
        uint8_t style = u8(f);
        zs_status status = zs_set_expiry_handler(rt, on ? expiry_handler : NULL, f);
        trace(f, "set expiry handler %d (style %u) -> %d", on, style, (int)status);
        check(status == (f->in_expiry > 0 ? ZS_E_BUSY : ZS_OK), "zs_set_expiry_handler: %d",
              (int)status);
        if (status == ZS_OK) {
            f->expiry_set = on;
            f->expiry_style = style;
        }
        break;
    }
    case OP_HOST_COLLECT:
    case OP_HOST_COLLECT2:
        host_collect(f);
        break;
    case OP_EXPIRE:
        expire(f);
        break;
    case OP_DESTROY: {
        /* A host destroys an object (maybe one the program holds a proxy
           of): with a handler set, its proxy is handed over before the call
           returns (the handler's checks run then); from then on every call
           naming it is refused as for a dying object, until a collection
           frees it. */
        zs_ref ref = pick_handle(f);
        zs_status status = zs_destroy_object(rt, ref);
        pin *pinned = status == ZS_OK ? pin_of(f, ref, false) : NULL;
        if (pinned != NULL) {
            pinned->rooted = false; /* a destroyed root is unrooted */
            pinned->destroyed = true;
        }
        if (status == ZS_OK && !f->freed) {
            check(zs_resolve(rt, ref) != NULL, "a destroyed object left memory at once");
            check(zs_destroy_object(rt, ref) == ZS_E_DYING, "destroyed twice");
            check(zs_add_to_root(rt, ref) == ZS_E_DYING, "a destroyed object rooted");
            int garbage = 0;
            check(zs_is_garbage(rt, ref, &garbage) == ZS_OK && garbage,
                  "a destroyed object is not garbage");
        }
        trace(f, "destroy %u -> %d", ZS_REF_INDEX(ref), (int)status);
        break;
    }
    default:
        break;
    }
}

static void run_ops(fz *f, uint32_t limit) {
    for (uint32_t n = 0; n < limit && !exhausted(f) && !f->freed && f->ops < ALL_OPS; n++) {
        run_op(f);
        check_heap(f, "an operation");
    }
}

/* ======================================================================
 * Entry points
 * ====================================================================== */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *trace_env = getenv("FUZZ_TRACE");
    trace_ops = trace_env != NULL && trace_env[0] != '\0' && trace_env[0] != '0';
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* On the stack: a fresh heap block per input would fault its pages in
       every time (ASan's quarantine keeps handing out new memory). */
    fz state;
    memset(&state, 0, sizeof state);
    fz *f = &state;
    f->data = data;
    f->size = size;

    /* Header: the runtime's options and stress switches. */
    zs_runtime_options options;
    zs_runtime_default_options(&options);
    uint8_t shape = u8(f);
    options.max_objects = (shape & 3) == 0   ? 2u + u8(f) % 30u
                          : (shape & 3) == 1 ? 64u + u8(f) * 4u
                                             : 2048u;
    options.min_cluster_size = 1 + u8(f) % 4;
    uint8_t flags = u8(f);
    options.flags = (flags & 1 ? ZS_RUNTIME_DISREGARD_WINDOW : 0) |
                    (flags & 2 ? ZS_RUNTIME_BLACK_NOT_ROOTS : 0);
    /* Bits 5-7 were unused: one pattern of them (few of the older seeds have
       it) makes the program the managed side of the expiry protocol. */
    f->expiry_mode = (flags & 0xE0) == 0x60;
    options.mark_threads = flags & 4 ? 2 : 1;
    f->black_roots = !(flags & 2);
    f->parallel = options.mark_threads > 1;
    check(zs_runtime_new(&options, &f->rt) == ZS_OK, "zs_runtime_new");
    zs_runtime *rt = f->rt;
    if (!setup_types_and_classes(f, (flags & 0x18) == 0x18))
        fail("setting up the fixed types and classes");
    if (f->parallel)
        check(zs_debug_set(rt, ZS_DEBUG_PARALLEL_THRESHOLD, u8(f) % 8) == ZS_OK,
              "parallel threshold");
    uint8_t stress = u8(f);
    if (stress & 1) zs_debug_set(rt, ZS_DEBUG_CHECK_MARKS, 1);
    if (stress & 2) zs_debug_set(rt, ZS_DEBUG_STEP_OBJECTS, 1 + u8(f) % 4);
    if (stress & 4) zs_debug_set(rt, ZS_DEBUG_POISON_FREED, 1);
    if (stress & 8) zs_debug_set(rt, ZS_DEBUG_MARK_STACK_LIMIT, 1 + u8(f) % 4);
    if (stress & 16) zs_debug_set(rt, ZS_DEBUG_STRICT_ALLOC_LIMIT, 1);
    if (stress & 32) set_alloc_limit(f);
    if (stress & 64) {
        f->hook_set = true;
        f->hook_mode = u8(f);
        zs_set_destroy_hook(rt, destroy_hook, f);
    }
    if (stress & 128) {
        f->handler_set = true;
        f->handler_mode = u8(f);
        zs_set_call_handler(rt, call_handler, f);
    }
    if (f->expiry_mode) {
        /* The handler's style; bit 7: the program starts without one. */
        uint8_t expiry = u8(f);
        f->expiry_style = expiry;
        f->expiry_set = !(expiry & 0x80);
        if (f->expiry_set)
            check(zs_set_expiry_handler(rt, expiry_handler, f) == ZS_OK, "zs_set_expiry_handler");
    }
    trace(f, "runtime: max_objects %u, min cluster %u, flags %u, threads %u, stress %u%s",
          options.max_objects, options.min_cluster_size, options.flags, options.mark_threads,
          stress, f->expiry_mode ? (f->expiry_set ? ", expiry handler" : ", expiry mode") : "");
    check_heap(f, "setup");

    run_ops(f, TOP_OPS);

    if (!f->freed) {
        check_heap(f, "the program");
        trace(f, "runtime free (%u hand-overs, %llu objects)", f->expiry_calls,
              (unsigned long long)f->expiry_objects);
        f->tearing_down = true; /* the expiry handler is not called: every object dies */
        zs_runtime_free(rt);    /* asserts that every counted block was returned */
    }
    return 0;
}
