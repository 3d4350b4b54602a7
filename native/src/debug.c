/*
 * debug.c -- the test and stress switches of zsharp_debug.h (zs_debug_*): they
 * only set or read fields of the runtime, which the collector (gc_mark.c,
 * gc_cycle.c), the allocator (memory.c) and the heap check (verify.c) obey.
 */
#include "internal.h"

/* A switch's 64-bit value as a 32-bit limit (larger means "no limit" anyway). */
static uint32_t clamp_u32(uint64_t value) {
    return value > UINT32_MAX ? UINT32_MAX : (uint32_t)value;
}

/* Set one switch (ZS_DEBUG_*); ZS_E_INVALID for an unknown one. */
zs_status zs_debug_set(zs_runtime *rt, uint32_t what, uint64_t value) {
    ZS_LOCK(rt);
    zs_status status = ZS_OK;
    if (what == ZS_DEBUG_DISABLE_BARRIER) rt->barrier_disabled = value != 0;
    else if (what == ZS_DEBUG_PARALLEL_THRESHOLD) rt->parallel_threshold = value;
    else if (what == ZS_DEBUG_CHECK_MARKS) rt->check_marks = value != 0;
    else if (what == ZS_DEBUG_STEP_OBJECTS) rt->step_objects = clamp_u32(value);
    else if (what == ZS_DEBUG_POISON_FREED) rt->poison_freed = value != 0;
    else if (what == ZS_DEBUG_MARK_STACK_LIMIT) rt->mark_stack_limit = clamp_u32(value);
    else if (what == ZS_DEBUG_ALLOC_LIMIT) rt->alloc_limit = value;
    else if (what == ZS_DEBUG_STRICT_ALLOC_LIMIT) rt->strict_alloc_limit = value != 0;
    else status = ZS_E_INVALID;
    ZS_UNLOCK(rt);
    return status;
}

/* The check-mark failures counted so far (gc_mark.c, zs_check_mark). */
uint64_t zs_debug_check_failures(zs_runtime *rt) {
    ZS_LOCK(rt);
    uint64_t failures = rt->check_failures;
    ZS_UNLOCK(rt);
    return failures;
}

/* Break one invariant of a live object on purpose, so a test can prove that
   zs_heap_verify (verify.c) notices: 1 the index in its header, 2 its mark;
   or age its slot (3), so a test reaches the retirement of a slot without
   2^32 reuses of it. */
zs_status zs_debug_corrupt(zs_runtime *rt, zs_ref ref, uint32_t what) {
    ZS_LOCK(rt);
    zs_item *it = zs_item_of(rt, ref);
    zs_status status = it ? ZS_OK : ZS_E_STALE;
    if (it != NULL && what == 1) it->object->index ^= 1u;                /* header/index mismatch */
    else if (it != NULL && what == 2) it->flags ^= ZS_ITEM_MARK;         /* lost mark */
    else if (it != NULL && what == 3) it->serial = ZS_SERIAL_RETIRE - 1; /* its last serial */
    else if (it != NULL) status = ZS_E_INVALID;
    ZS_UNLOCK(rt);
    return status;
}
