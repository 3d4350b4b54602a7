/*
 * lock.c -- the runtime lock's slow paths: waiting for it, waking waiters
 * (the fast paths and the protocol are in lock.h).
 */
#include "lock.h"

#include <time.h>

/* Tries (each after a yield) before a waiting thread goes to sleep: a lock
   held for one API call is usually free again within a few of them. */
#define ZS_LOCK_SPINS 64

/* The moment ZS_LOCK_NAP_NS from now, as cnd_timedwait takes it. */
static struct timespec nap_end(void) {
    struct timespec until;
    if (timespec_get(&until, TIME_UTC) != TIME_UTC) {
        until.tv_sec = 0; /* no clock: a deadline in the past, so the wait is a yield */
        until.tv_nsec = 0;
        return until;
    }
    until.tv_nsec += ZS_LOCK_NAP_NS;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec += 1;
        until.tv_nsec -= 1000000000L;
    }
    return until;
}

bool zs_lock_init(zs_lock *lock) {
    lock->owner = 0;
    lock->depth = 0;
    lock->sleepers = 0;
    if (mtx_init(&lock->nap, mtx_plain) != thrd_success) return false;
    if (cnd_init(&lock->wake) != thrd_success) {
        mtx_destroy(&lock->nap);
        return false;
    }
    return true;
}

void zs_lock_destroy(zs_lock *lock) {
    assert(lock->owner == 0 && lock->sleepers == 0);
    cnd_destroy(&lock->wake);
    mtx_destroy(&lock->nap);
}

/* Wait until `self` takes the lock: a few yields, then sleep in naps.
   Counted in `sleepers` before the first look that may lead to sleep, so
   an owner that gives the lock back after that look sees the count (or,
   lock.h, the nap ends). */
void zs_lock_wait(zs_lock *lock, uintptr_t self) {
    for (int spin = 0; spin < ZS_LOCK_SPINS; spin++) {
        thrd_yield();
        if (zs_lock_try_take(lock, self)) return;
    }
    mtx_lock(&lock->nap);
    __atomic_add_fetch(&lock->sleepers, 1, __ATOMIC_SEQ_CST);
    while (!zs_lock_try_take(lock, self)) {
        struct timespec until = nap_end();
        cnd_timedwait(&lock->wake, &lock->nap, &until);
    }
    __atomic_sub_fetch(&lock->sleepers, 1, __ATOMIC_RELAXED);
    mtx_unlock(&lock->nap);
}

/* Wake every sleeper: each tries for the lock, the losers sleep again. */
void zs_lock_wake(zs_lock *lock) {
    mtx_lock(&lock->nap);
    cnd_broadcast(&lock->wake);
    mtx_unlock(&lock->nap);
}
