/*
 * zsharp_debug.h -- the test and stress switches of the zsharp heap, and
 * their checks (zs_debug_*).
 *
 * Who includes it: tests (native/tests, the fuzzers), the scripting
 * layer's stress options (zsharp_py's GcStress), and a host chasing a
 * collector bug. It includes zsharp.h.
 *
 * What it offers: per-runtime switches (zs_debug_set) that turn a
 * mechanism off, to prove that the tests covering it fail without it, or
 * make bugs loud (a second mark that must agree, poisoned freed memory,
 * small mark stacks and steps, an allocation limit); the failures the
 * mark check found; a deliberate corruption that zs_heap_verify must
 * notice. The functions are in the host's table (zsharp_api.h), so a host
 * module built apart can run its own tests with them.
 *
 * What it must not be used for: production. The test-only switches
 * (ZS_DEBUG_DISABLE_BARRIER, ZS_DEBUG_STRICT_ALLOC_LIMIT) and
 * zs_debug_corrupt break the heap's guarantees on purpose; the stress
 * switches cost time. zs_heap_verify and zs_reference_chains, the checks a
 * host may run any time, are in zsharp.h.
 */
#ifndef ZSHARP_DEBUG_H
#define ZSHARP_DEBUG_H

#include "zsharp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Test-only switches (zs_debug_set): prove that tests fail without the
   mechanism they cover. */
#define ZS_DEBUG_DISABLE_BARRIER 1u    /* the write barrier does nothing */
#define ZS_DEBUG_PARALLEL_THRESHOLD 2u /* objects needed before marking goes parallel */
#define ZS_DEBUG_STRICT_ALLOC_LIMIT                                                                \
    8u /* the allocation limit applies to the collector's own
                                          bookkeeping too (as real out-of-memory would) */

/* Stress switches (runtime options in all builds, documented in README):
   like V8's --verify-heap, Go's gccheckmark / clobberfree and Unreal's
   gc.VerifyNoUnreachableObjects, they make bugs loud. */
#define ZS_DEBUG_CHECK_MARKS 3u      /* after marking, a second simple mark must agree */
#define ZS_DEBUG_STEP_OBJECTS 4u     /* incremental steps scan at most this many objects */
#define ZS_DEBUG_POISON_FREED 5u     /* fill freed objects and values with 0xDD */
#define ZS_DEBUG_MARK_STACK_LIMIT 6u /* mark stacks hold at most this many entries */
#define ZS_DEBUG_ALLOC_LIMIT 7u      /* native allocations fail past this many live bytes */

/* Failures found by ZS_DEBUG_CHECK_MARKS so far (also reported by
   zs_heap_verify). */
uint64_t zs_debug_check_failures(zs_runtime *rt);
/* Set one ZS_DEBUG_* switch of a runtime; ZS_E_INVALID for an unknown one. */
zs_status zs_debug_set(zs_runtime *rt, uint32_t what, uint64_t value);

/* Test-only: mutate raw state so tests can prove zs_heap_verify notices
   (what 1: the object's header index, 2: its mark bit), or (what 3) age
   the object's slot: its serial becomes UINT32_MAX - 1, the last before
   the slot retires, so the object's handle is then
   ZS_MAKE_REF(index, UINT32_MAX - 1) (every copy of the old one is stale:
   for an object nothing references) and its death retires the slot. */
zs_status zs_debug_corrupt(zs_runtime *rt, zs_ref ref, uint32_t what);

#ifdef __cplusplus
}
#endif
#endif /* ZSHARP_DEBUG_H */
