/* A runtime's life: the one state machine of what may happen now.
 *
 * core.h declares the phases (NEW, OPEN, CLOSING, CLOSED), the acts and the
 * rules (zpy_life_may); this file makes every change of state and words
 * every refusal. The Python `Runtime` asks through RuntimeCore's
 * `_life_enter`/`_life_leave` and reads `_closed`, `_closing`,
 * `_collecting`, `_adopting` and `lifecycle` (zpy_runtime_core.c); the C paths
 * call the functions below. docs/lifecycle.md draws the machine.
 */
#include "core.h"

/* The ExpiredConjugateError message of a closed runtime (runtime.py, _CLOSED). */
#define CLOSED_MESSAGE "the runtime has been closed"

/* Raise the error of refusal `why` of `act` for `what`; -1. */
int zpy_life_refuse(const zpy_runtime_core *rt, zpy_act act, zpy_refusal why, PyObject *what) {
    assert(why != ZPY_ALLOWED && why != ZPY_NOTHING_TO_DO);
    switch (why) {
    case ZPY_REFUSED_CLOSED: {
        PyObject *type = rt->state->expired_exception;
        if (type == NULL) type = PyExc_RuntimeError;
        /* A host entry names itself, as its other errors do. */
        if (act == ZPY_ACT_CALL_HOST && what != NULL)
            PyErr_Format(type, "%U: " CLOSED_MESSAGE, what);
        else PyErr_SetString(type, CLOSED_MESSAGE);
        return -1;
    }
    case ZPY_REFUSED_ADOPTING:
        PyErr_Format(PyExc_RuntimeError,
                     "%U cannot run while an object conjugate is being created or adopted "
                     "(called from a finaliser or signal handler on the same thread)",
                     what);
        return -1;
    case ZPY_REFUSED_IN_COLLECTION:
        PyErr_Format(PyExc_RuntimeError,
                     "%U cannot run inside a collection or close() of this runtime (called from "
                     "a finaliser, a gc callback or a signal handler on the same thread)",
                     what);
        return -1;
    case ZPY_REFUSED_EXPIRING:
        PyErr_Format(PyExc_RuntimeError,
                     "%U cannot run while the collector expires conjugates (called from a gc "
                     "callback or a finaliser): a native collection now would free objects whose "
                     "conjugates are still live; call it after the collection",
                     what);
        return -1;
    case ZPY_ALLOWED:
    case ZPY_NOTHING_TO_DO:
        break;
    }
    assert(0 && "not a refusal");
    return -1;
}

/* Begin `act`: the one place each activity's mark is set. */
void zpy_life_begin(zpy_runtime_core *rt, zpy_act act) {
    zpy_life *life = &rt->life;
    assert(zpy_life_may(rt, act) == ZPY_ALLOWED);
    switch (act) {
    case ZPY_ACT_COLLECT:
        life->collecting = 1;
        break;
    case ZPY_ACT_CLOSE:
    case ZPY_ACT_HOST_FREE:
        /* First: the fast paths decline from now on, and nothing
           re-entered from here may collect or close. */
        assert(life->closing_here < UINT8_MAX);
        life->phase = ZPY_PHASE_CLOSING;
        life->closing_here++;
        break;
    case ZPY_ACT_ADOPT:
        life->adopting++;
        break;
    case ZPY_ACT_EXPIRE:
        life->expiring++;
        break;
    case ZPY_ACT_CALL_HOST:
        life->native_calls++;
        break;
    case ZPY_ACT_COUNT:
        assert(0 && "not an act");
    }
}

/* Ask, then begin: 1, 0 (nothing to do) or -1 with the refusal raised. */
int zpy_life_enter(zpy_runtime_core *rt, zpy_act act, PyObject *what) {
    zpy_refusal why = zpy_life_may(rt, act);
    if (why == ZPY_NOTHING_TO_DO) return 0;
    if (why != ZPY_ALLOWED) return zpy_life_refuse(rt, act, why, what);
    zpy_life_begin(rt, act);
    return 1;
}

/* Call a deferred free of the native runtime (its last host entry returned). */
static void free_deferred_now(zpy_runtime_core *rt) {
    assert(rt->native == NULL);
    PyObject *free = rt->life.free_deferred; /* frees the old native runtime: nothing uses it */
    rt->life.free_deferred = NULL;
    PyObject *freed = PyObject_CallNoArgs(free);
    if (freed == NULL) PyErr_WriteUnraisable(free);
    Py_XDECREF(freed);
    Py_DECREF(free);
}

/* End `act`. A close that failed half-way leaves the phase CLOSING: the
 * runtime is not usable again, and close() may be called again to finish. */
void zpy_life_leave(zpy_runtime_core *rt, zpy_act act) {
    zpy_life *life = &rt->life;
    switch (act) {
    case ZPY_ACT_COLLECT:
        assert(life->collecting);
        life->collecting = 0;
        break;
    case ZPY_ACT_CLOSE:
    case ZPY_ACT_HOST_FREE:
        assert(life->closing_here > 0);
        life->closing_here--;
        break;
    case ZPY_ACT_ADOPT:
        assert(life->adopting > 0);
        life->adopting--;
        break;
    case ZPY_ACT_EXPIRE:
        assert(life->expiring > 0);
        life->expiring--;
        break;
    case ZPY_ACT_CALL_HOST:
        assert(life->native_calls > 0);
        if (--life->native_calls == 0 && life->free_deferred != NULL) free_deferred_now(rt);
        break;
    case ZPY_ACT_COUNT:
        assert(0 && "not an act");
    }
}

/* NEW -> OPEN: the native runtime is attached. */
void zpy_life_opened(zpy_runtime_core *rt) {
    assert(rt->life.phase == ZPY_PHASE_NEW && rt->native != NULL);
    rt->life.phase = ZPY_PHASE_OPEN;
}

/* -> CLOSED: the native runtime is detached (from CLOSING, or from OPEN
 * when a failed open is undone). */
void zpy_life_closed(zpy_runtime_core *rt) {
    assert(rt->native == NULL);
    rt->life.phase = ZPY_PHASE_CLOSED;
}

/* Free the detached native runtime now, or when the last host entry
 * running on it returns (the close came from Python code one of them
 * called back into): they still run on it. */
int zpy_life_free_native(zpy_runtime_core *rt, PyObject *free) {
    if (rt->native != NULL || rt->life.free_deferred != NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "_core_free_native: detach first, and free a runtime once");
        return -1;
    }
    if (rt->life.native_calls > 0) {
        rt->life.free_deferred = Py_NewRef(free);
        return 0;
    }
    PyObject *freed = PyObject_CallNoArgs(free);
    Py_XDECREF(freed);
    return freed == NULL ? -1 : 0;
}

/* The state a reader sees, the most telling first. */
const char *zpy_life_state_name(const zpy_runtime_core *rt) {
    const zpy_life *life = &rt->life;
    if (life->phase == ZPY_PHASE_NEW || life->phase == ZPY_PHASE_CLOSED) return "closed";
    if (life->phase == ZPY_PHASE_CLOSING) return "closing";
    if (life->expiring) return "expiring";
    if (life->collecting) return "collecting";
    return "open";
}

/* The native runtime of an open runtime, or NULL with ExpiredConjugateError
 * once it is closed, and, unless `while_closing`, once close() has begun
 * (its heap may be going; close() itself still calls the heap then). */
zs_runtime *zpy_rt_open(zpy_runtime_core *rt, int while_closing) {
    if (zpy_open(rt) || (while_closing && rt->life.phase == ZPY_PHASE_CLOSING)) return rt->native;
    PyObject *type = rt->state->expired_exception;
    PyErr_SetString(type != NULL ? type : PyExc_RuntimeError, CLOSED_MESSAGE);
    return NULL;
}
