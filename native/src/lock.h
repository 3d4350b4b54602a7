/*
 * lock.h -- the runtime lock: recursive, taken by every public function.
 *
 * A pthread recursive mutex (C11's mtx_recursive) costs about 90
 * instructions, two of them locked, in a chain of calls per lock and
 * unlock, and every object Python makes takes the lock once
 * (docs/performance.md, "Creating a host object"). This lock costs one
 * compare-and-swap to take and one plain release store to give back.
 *
 * The price of the plain store: a thread that finds the lock held sleeps
 * on a condition variable, and the owner's release wakes it only if it
 * sees the sleeper counted. The owner's read of that count may pass its
 * own store (x86 and most other machines reorder a load before an earlier
 * store to another address), so a sleeper that counted itself just then
 * misses the wake-up. Sleepers therefore wait with a timeout
 * (ZS_LOCK_NAP_NS) and try again: a missed wake-up costs at most one nap,
 * never a hang. Contention is rare: host threads calling in while the
 * managed side runs, or waiting out a collection (whose marking takes
 * milliseconds, so a nap is small beside it).
 *
 * Members: `owner` is atomic (read by any thread); `depth` is the
 * owner's alone; `sleepers` is atomic; `nap` and `wake` guard sleeping.
 */
#ifndef ZSHARP_LOCK_H
#define ZSHARP_LOCK_H

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <threads.h>

/* Longest a waiting thread sleeps before it looks at the lock again. */
#define ZS_LOCK_NAP_NS 1000000L

typedef struct zs_lock {
    uintptr_t owner;   /* the owning thread's identity (zs_lock_self), 0: free */
    uint32_t depth;    /* times the owner took it (recursion) */
    uint32_t sleepers; /* threads waiting on `wake` */
    mtx_t nap;         /* guards sleeping on `wake` (never held with the lock's work) */
    cnd_t wake;
} zs_lock;

/* Threads are told apart by an identity unique among live threads and
   never 0: the thread pointer where the compiler reads it in one
   instruction (x86-64 and AArch64; it addresses the thread's control
   block, as thrd_current() does through a call), else thrd_current(), a
   thread's own handle (glibc and musl give that same address). */
_Static_assert(sizeof(thrd_t) <= sizeof(uintptr_t), "a thread handle must fit a uintptr_t");
#if defined(__has_builtin) && (defined(__x86_64__) || defined(__aarch64__))
#if __has_builtin(__builtin_thread_pointer)
#define ZS_HAS_THREAD_POINTER 1
#endif
#endif
#ifndef ZS_HAS_THREAD_POINTER
#define ZS_HAS_THREAD_POINTER 0
#endif
static inline uintptr_t zs_lock_self(void) {
#if ZS_HAS_THREAD_POINTER
    return (uintptr_t)__builtin_thread_pointer();
#else
    return (uintptr_t)thrd_current();
#endif
}

bool zs_lock_init(zs_lock *lock);
void zs_lock_destroy(zs_lock *lock);
void zs_lock_wait(zs_lock *lock, uintptr_t self); /* the contended path of zs_lock_take */
void zs_lock_wake(zs_lock *lock);                 /* wake the sleepers (zs_lock_give) */

/* Take a free lock for `self` with one compare-and-swap; false when it
   is held. */
static inline bool zs_lock_try_take(zs_lock *lock, uintptr_t self) {
    uintptr_t free_owner = 0;
    return __atomic_compare_exchange_n(&lock->owner, &free_owner, self, false, __ATOMIC_ACQUIRE,
                                       __ATOMIC_RELAXED);
}

/* Take the lock: again at once if this thread owns it, else free it now,
   else wait for it. */
static inline void zs_lock_take(zs_lock *lock) {
    uintptr_t self = zs_lock_self();
    /* Only this thread ever stores `self`: equal means it owns the lock. */
    if (__atomic_load_n(&lock->owner, __ATOMIC_RELAXED) == self) {
        lock->depth++;
        return;
    }
    if (!zs_lock_try_take(lock, self)) zs_lock_wait(lock, self);
    assert(lock->depth == 0);
    lock->depth = 1;
}

/* Give the lock back once; the last give frees it and wakes any sleeper. */
static inline void zs_lock_give(zs_lock *lock) {
    assert(__atomic_load_n(&lock->owner, __ATOMIC_RELAXED) == zs_lock_self());
    assert(lock->depth > 0);
    if (--lock->depth > 0) return;
    __atomic_store_n(&lock->owner, 0, __ATOMIC_RELEASE);
    if (__atomic_load_n(&lock->sleepers, __ATOMIC_RELAXED) != 0) zs_lock_wake(lock);
}

#endif /* ZSHARP_LOCK_H */
