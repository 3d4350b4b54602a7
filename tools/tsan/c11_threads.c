/*
 * c11_threads.c -- C11 <threads.h> on top of POSIX threads, for the
 * ThreadSanitizer builds only (tools/tsan.sh).
 *
 * glibc (2.34 and later) implements thrd_create, mtx_lock, cnd_wait and
 * the rest by calling its internal pthread entry points directly, so
 * ThreadSanitizer's pthread interceptors never see them: a thread started
 * with thrd_create has no TSan state and crashes on its first instrumented
 * access, and a mtx_lock would be invisible (every access the runtime lock
 * orders would be reported as a race). Neither gcc's nor clang's TSan
 * runtime intercepts the C11 names. Linked into the test program, or
 * preloaded next to the TSan runtime for Python, these definitions take
 * the place of glibc's and go through the intercepted pthread functions.
 *
 * glibc lays mtx_t, cnd_t and thrd_t out as pthread_mutex_t,
 * pthread_cond_t and pthread_t (checked below).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>
#include <time.h>

_Static_assert(sizeof(mtx_t) == sizeof(pthread_mutex_t), "mtx_t is a pthread_mutex_t");
_Static_assert(sizeof(cnd_t) == sizeof(pthread_cond_t), "cnd_t is a pthread_cond_t");
_Static_assert(sizeof(thrd_t) == sizeof(pthread_t), "thrd_t is a pthread_t");

static int status_of(int error) {
    switch (error) {
    case 0:
        return thrd_success;
    case ETIMEDOUT:
        return thrd_timedout;
    case EBUSY:
        return thrd_busy;
    case ENOMEM:
        return thrd_nomem;
    default:
        return thrd_error;
    }
}

typedef struct start {
    thrd_start_t function;
    void *argument;
} start;

static void *trampoline(void *boxed) {
    start s = *(start *)boxed;
    free(boxed);
    return (void *)(intptr_t)s.function(s.argument);
}

int thrd_create(thrd_t *thread, thrd_start_t function, void *argument) {
    start *boxed = malloc(sizeof *boxed);
    if (boxed == NULL) return thrd_nomem;
    boxed->function = function;
    boxed->argument = argument;
    int error = pthread_create((pthread_t *)thread, NULL, trampoline, boxed);
    if (error != 0) free(boxed);
    return status_of(error);
}

int thrd_join(thrd_t thread, int *result) {
    void *value = NULL;
    int error = pthread_join((pthread_t)thread, &value);
    if (error == 0 && result != NULL) *result = (int)(intptr_t)value;
    return status_of(error);
}

int mtx_init(mtx_t *mutex, int type) {
    pthread_mutexattr_t attributes;
    if (pthread_mutexattr_init(&attributes) != 0) return thrd_error;
    if (type & mtx_recursive) pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_RECURSIVE);
    int error = pthread_mutex_init((pthread_mutex_t *)mutex, &attributes);
    pthread_mutexattr_destroy(&attributes);
    return status_of(error);
}

int mtx_lock(mtx_t *mutex) { return status_of(pthread_mutex_lock((pthread_mutex_t *)mutex)); }
int mtx_trylock(mtx_t *mutex) { return status_of(pthread_mutex_trylock((pthread_mutex_t *)mutex)); }
int mtx_timedlock(mtx_t *restrict mutex, const struct timespec *restrict until) {
    return status_of(pthread_mutex_timedlock((pthread_mutex_t *)mutex, until));
}
int mtx_unlock(mtx_t *mutex) { return status_of(pthread_mutex_unlock((pthread_mutex_t *)mutex)); }
void mtx_destroy(mtx_t *mutex) { pthread_mutex_destroy((pthread_mutex_t *)mutex); }

int cnd_init(cnd_t *condition) {
    return status_of(pthread_cond_init((pthread_cond_t *)condition, NULL));
}
int cnd_signal(cnd_t *condition) {
    return status_of(pthread_cond_signal((pthread_cond_t *)condition));
}
int cnd_broadcast(cnd_t *condition) {
    return status_of(pthread_cond_broadcast((pthread_cond_t *)condition));
}
int cnd_wait(cnd_t *condition, mtx_t *mutex) {
    return status_of(pthread_cond_wait((pthread_cond_t *)condition, (pthread_mutex_t *)mutex));
}
/* C11 deadlines are TIME_UTC, pthread's (default clock) CLOCK_REALTIME: the same clock. */
int cnd_timedwait(cnd_t *restrict condition, mtx_t *restrict mutex,
                  const struct timespec *restrict until) {
    return status_of(
        pthread_cond_timedwait((pthread_cond_t *)condition, (pthread_mutex_t *)mutex, until));
}
void cnd_destroy(cnd_t *condition) { pthread_cond_destroy((pthread_cond_t *)condition); }
