/* The collection protocol: a full collection in one call, the incremental
 * cycle's start and steps, the expiry a refused call asks for, and the
 * collector's figures as a GcStats.
 *
 * One protocol for every path (zsharp_py/_runtime/collector.py is a front
 * over it: argument checks, settings, the per-frame tick): flush what
 * finalisers queued, expire the conjugates of dying objects before any
 * memory goes, then let the purge free them (the native purge hands what it
 * would free to the expiry handler first, so objects gathered meanwhile
 * expire too). collect_garbage(), which a game may call every frame, runs
 * the whole sequence in one call, where a collection of a small heap costs
 * a few microseconds instead of tens in Python; an incremental step runs it
 * within a time budget (CLOCK_MONOTONIC), a work budget, or both.
 *
 * The caller holds the runtime's lock and, for a collection or a step, has
 * begun a collection in the runtime's life (zpy_life.c), so no collection or close()
 * starts while Python code runs inside this one (a finaliser or gc callback
 * on an allocation of the expiry), and has released the strong references
 * finalisers queued (Runtime._release_deferred, a Python queue).
 */
#include "value.h"
#include <time.h>

/* The native collector steps, each run with the GIL released. */
typedef enum collector_step {
    STEP_MARK_AND_GATHER, /* the whole mark and gather (a full collection) */
    STEP_PURGE,           /* the whole purge */
    STEP_START,           /* begin an incremental cycle (finishing a pending purge) */
    STEP_MARK_BOUNDED,    /* advance a pending mark, then gather, within bounds */
    STEP_PURGE_BOUNDED,   /* destroy gathered objects within bounds */
} collector_step;

/* Conjugates expired per native call by a step with a deadline: the clock
 * is read between batches, so a step overruns by at most one batch (~50 us). */
#define EXPIRY_BATCH 256u

/* Whether the runtime is still open; 0 with RuntimeError once closed. */
static int runtime_open(const zpy_runtime_core *rt) {
    if (rt->native != NULL) return 1;
    PyErr_SetString(PyExc_RuntimeError, "the runtime is closed");
    return 0;
}

/* CLOCK_MONOTONIC in nanoseconds: the clock of an incremental step's deadline. */
static uint64_t monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Expire the conjugates of the dying objects the heap has gathered (the
 * expiry counts them in rt->cycle_expired): every one, or, with a
 * `deadline` (CLOCK_MONOTONIC ns; 0: none), in batches of EXPIRY_BATCH until
 * the clock passes it, and, with a `limit` (0: none), at most that many.
 * *out_taken: how many objects were taken. -1 with an exception. */
static int expire_pending(zpy_runtime_core *rt, uint64_t deadline, uint32_t limit,
                          uint32_t *out_taken) {
    *out_taken = 0;
    for (;;) {
        uint32_t batch = deadline == 0 ? UINT32_MAX : EXPIRY_BATCH;
        if (limit != 0 && limit - *out_taken < batch) batch = limit - *out_taken;
        uint32_t taken, expired;
        if (zpy_expire_dying(rt, batch, &taken, &expired) < 0) return -1;
        *out_taken += taken;
        if (taken == 0 || (limit != 0 && *out_taken >= limit) ||
            (deadline != 0 && monotonic_ns() >= deadline))
            return 0;
    }
}

/* Run one native step with the GIL released (a long mark or purge lets
 * other Python threads run). The step may hand the dying objects it would
 * free to the expiry handler first (zs_gc_hand_over), which takes the GIL
 * on this thread and expires their conjugates; an error of that expiry is
 * raised here. The bounded steps set *out_done. Returns the status, or -1
 * with an exception. */
static long run_step(zpy_runtime_core *rt, collector_step step, uint64_t budget_ns,
                     uint32_t max_objects, int *out_done) {
    if (!runtime_open(rt)) return -1;
    zs_runtime *native = rt->native;
    zs_status status;
    zpy_expiry_reporting(rt, 1);
    Py_BEGIN_ALLOW_THREADS;
    switch (step) {
    case STEP_MARK_AND_GATHER:
        status = zs_gc_mark_and_gather(native);
        break;
    case STEP_PURGE:
        status = zs_gc_purge(native, 0, NULL);
        break;
    case STEP_START:
        status = zs_gc_start_incremental(native);
        break;
    case STEP_MARK_BOUNDED:
        status = zs_gc_step_bounded(native, budget_ns, max_objects, out_done);
        break;
    default:
        status = zs_gc_purge_bounded(native, budget_ns, max_objects, out_done);
        break;
    }
    Py_END_ALLOW_THREADS;
    if (zpy_expiry_reporting(rt, 0) < 0) return -1;
    return (long)status;
}

/* Raise for a failed step as every native failure is raised
 * (zsharp_py/_base/errors.py, refused), `what` naming the call. */
static PyObject *raise_step(zpy_runtime_core *rt, long status, const char *what) {
    PyObject *name = PyUnicode_FromString(what);
    Py_XDECREF(name ? zpy_call_raise_status(rt->state, (zs_ref)status, name, rt) : NULL);
    Py_XDECREF(name);
    return NULL;
}

/* The safe point every path begins with: free the blocks of black values
 * Python finalised and tell the heap of dropped conjugates (so the mark
 * need not gather their objects). 0, or -1 with an exception. */
static int flush_before_collecting(zpy_runtime_core *rt) {
    if (!runtime_open(rt) || zpy_flush_values(rt) < 0) return -1;
    return runtime_open(rt) ? 0 : -1;
}

/* =========================================================================
 * GcStats
 * ========================================================================= */

#define STATS_FIELDS (sizeof(zs_gc_stats) / sizeof(uint64_t))
/* The fields in nanoseconds, shown in seconds. */
#define STATS_IS_NS(i)                                                                             \
    ((i) == offsetof(zs_gc_stats, mark_ns) / sizeof(uint64_t) ||                                   \
     (i) == offsetof(zs_gc_stats, gather_ns) / sizeof(uint64_t) ||                                 \
     (i) == offsetof(zs_gc_stats, purge_ns) / sizeof(uint64_t))

/* Whether `layout` is a GcStats layout; 0 with TypeError if not. */
static int stats_layout_valid(PyObject *layout) {
    if (PyTuple_CheckExact(layout) && PyTuple_GET_SIZE(layout) == 2 &&
        PyType_Check(PyTuple_GET_ITEM(layout, 0)) &&
        PyTuple_CheckExact(PyTuple_GET_ITEM(layout, 1)) &&
        PyTuple_GET_SIZE(PyTuple_GET_ITEM(layout, 1)) == (Py_ssize_t)STATS_FIELDS + 1)
        return 1;
    PyErr_SetString(PyExc_TypeError, "a GcStats layout: (class, field names)");
    return 0;
}

/* A GcStats of the heap's figures and rt->cycle_expired. `layout` is
 * (GcStats, names): the class, and the name of each zs_gc_stats field in
 * order followed by "conjugates_expired" (collector.py, _STATS_LAYOUT). The
 * instance is made as object.__new__ makes it and its __dict__ filled
 * directly, as the frozen dataclass's own constructor would. */
static PyObject *gc_stats_object(zpy_runtime_core *rt, PyObject *layout) {
    if (!stats_layout_valid(layout) || !runtime_open(rt)) return NULL;
    zs_gc_stats raw;
    zs_gc_get_stats(rt->native, &raw);
    uint64_t fields[STATS_FIELDS];
    memcpy(fields, &raw, sizeof fields);
    PyTypeObject *cls = (PyTypeObject *)PyTuple_GET_ITEM(layout, 0);
    PyObject *names = PyTuple_GET_ITEM(layout, 1);
    PyObject *empty = PyTuple_New(0);
    PyObject *stats = empty ? PyBaseObject_Type.tp_new(cls, empty, NULL) : NULL;
    Py_XDECREF(empty);
    PyObject *dict = stats ? PyObject_GenericGetDict(stats, NULL) : NULL;
    if (dict == NULL) {
        Py_XDECREF(stats);
        return NULL;
    }
    for (size_t i = 0; i <= STATS_FIELDS; i++) {
        PyObject *value = i == STATS_FIELDS ? PyLong_FromUnsignedLongLong(rt->cycle_expired)
                          : STATS_IS_NS(i)  ? PyFloat_FromDouble((double)fields[i] / 1e9)
                                            : PyLong_FromUnsignedLongLong(fields[i]);
        if (value == NULL || PyDict_SetItem(dict, PyTuple_GET_ITEM(names, i), value) < 0) {
            Py_XDECREF(value);
            Py_DECREF(dict);
            Py_DECREF(stats);
            return NULL;
        }
        Py_DECREF(value);
    }
    Py_DECREF(dict);
    return stats;
}

/* Runtime._gc_stats(layout) -> GcStats: the last cycle's figures. */
PyObject *zpy_runtime_gc_stats(PyObject *self, PyObject *layout) {
    return gc_stats_object((zpy_runtime_core *)self, layout);
}

/* =========================================================================
 * The full collection
 * ========================================================================= */

/* Runtime._collect_full(layout) -> GcStats: a stop-the-world collection (a
 * pending incremental cycle is finished, not restarted), the conjugates of
 * its dead objects expired before the purge frees them. */
PyObject *zpy_runtime_collect_full(PyObject *self, PyObject *layout) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    /* Checked before anything is collected; then dropped conjugates
       first, so the mark need not gather their objects. */
    if (!stats_layout_valid(layout) || flush_before_collecting(rt) < 0) return NULL;
    /* What a pending cycle gathered is counted in that cycle. */
    uint32_t taken;
    if (expire_pending(rt, 0, 0, &taken) < 0) return NULL;
    /* Its last expiry found the runtime open and took nothing: no Python
       code ran after that check. */
    assert(rt->native != NULL);
    zs_gc_phase phase = zs_gc_phase_of(rt->native);
    if (phase == ZS_GC_IDLE || phase == ZS_GC_PURGE_PENDING)
        rt->cycle_expired = 0; /* the mark below begins a new cycle */
    long status = run_step(rt, STEP_MARK_AND_GATHER, 0, 0, NULL);
    if (status < 0) return NULL;
    if (status != ZS_OK) return raise_step(rt, status, "collect_garbage");
    status = run_step(rt, STEP_PURGE, 0, 0, NULL);
    if (status < 0) return NULL;
    if (status != ZS_OK) return raise_step(rt, status, "collect_garbage");
    return gc_stats_object(rt, layout);
}

/* =========================================================================
 * The incremental cycle
 * ========================================================================= */

/* Runtime._gc_start_incremental(): begin an incremental cycle, expiring
 * what a pending one gathered first (counted in that cycle) and finishing
 * its purge; RuntimeError while a mark or gather is pending. */
PyObject *zpy_runtime_gc_start_incremental(PyObject *self, PyObject *unused) {
    (void)unused;
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (flush_before_collecting(rt) < 0) return NULL;
    zs_gc_phase phase = zs_gc_phase_of(rt->native);
    if (phase == ZS_GC_MARKING || phase == ZS_GC_GATHERING) {
        PyErr_SetString(PyExc_RuntimeError,
                        "an incremental cycle is already in progress; advance it with "
                        "rt.gc.step() or finish it with rt.collect_garbage()");
        return NULL;
    }
    uint32_t taken;
    if (expire_pending(rt, 0, 0, &taken) < 0) return NULL;
    long status = run_step(rt, STEP_START, 0, 0, NULL);
    if (status < 0) return NULL;
    if (status != ZS_OK) return raise_step(rt, status, "start_incremental");
    rt->cycle_expired = 0;
    Py_RETURN_NONE;
}

/* Runtime._gc_step(budget_ns, max_objects) -> done: advance the pending
 * cycle by one step bounded by time (budget_ns from now, CLOCK_MONOTONIC;
 * 0: none), by work (at most max_objects objects marked, expired and
 * destroyed; 0: none) or both (the caller gives at least one). The mark
 * (and gather) first; once it is complete, the gathered objects'
 * conjugates expire in batches, and the purge destroys what it can with
 * the budget left. Every step makes progress: one that did nothing else
 * purges at least a few objects, however small its budget. True when the
 * cycle is complete (also when none was pending). Bounded by work alone,
 * steps are deterministic: no clock bounds them. */
PyObject *zpy_runtime_gc_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "_gc_step expected 2 arguments, got %zd", nargs);
        return NULL;
    }
    unsigned long long budget_ns = PyLong_AsUnsignedLongLong(args[0]);
    if (budget_ns == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    unsigned long objects = PyLong_AsUnsignedLong(args[1]);
    if (objects == (unsigned long)-1 && PyErr_Occurred()) return NULL;
    if (objects > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "_gc_step: max_objects out of range");
        return NULL;
    }
    uint32_t max_objects = (uint32_t)objects;
    uint64_t deadline = budget_ns == 0 ? 0 : monotonic_ns() + budget_ns;
    if (flush_before_collecting(rt) < 0) return NULL;
    int progressed = 0;
    zs_gc_phase phase = zs_gc_phase_of(rt->native);
    if (phase == ZS_GC_MARKING || phase == ZS_GC_GATHERING) {
        int done = 0;
        long status = run_step(rt, STEP_MARK_BOUNDED, budget_ns, max_objects, &done);
        if (status < 0) return NULL;
        if (status != ZS_OK) return raise_step(rt, status, "gc.step");
        if (!done) Py_RETURN_FALSE;
        progressed = 1;
    }
    uint32_t taken;
    if (expire_pending(rt, deadline, max_objects, &taken) < 0 || !runtime_open(rt)) return NULL;
    if (zs_gc_expiring_count(rt->native) != 0) Py_RETURN_FALSE;
    progressed |= taken > 0;
    if (zs_gc_pending_purge(rt->native) == 0) Py_RETURN_TRUE;
    uint64_t remaining_ns = budget_ns;
    if (deadline != 0) {
        uint64_t now = monotonic_ns();
        if (now < deadline) remaining_ns = deadline - now;
        else if (progressed) Py_RETURN_FALSE;
        else remaining_ns = 1; /* nothing done yet: a few objects all the same */
    }
    int done = 0;
    long status = run_step(rt, STEP_PURGE_BOUNDED, remaining_ns, max_objects, &done);
    if (status < 0) return NULL;
    /* Gathered since the expiry above (a native collection run by Python
       code meanwhile): the next step expires them. */
    if (status == ZS_E_EXPIRY_PENDING) Py_RETURN_FALSE;
    if (status != ZS_OK) return raise_step(rt, status, "gc.step");
    return PyBool_FromLong(done);
}

/* Runtime._gc_expire_pending() -> taken: expire the conjugates of every
 * dying object gathered so far (a call was refused because an object it
 * names is dying: _base/errors.py, refused). The caller holds the lock
 * only: the refused call may itself run inside a collection. */
PyObject *zpy_runtime_gc_expire_pending(PyObject *self, PyObject *unused) {
    (void)unused;
    uint32_t taken;
    if (expire_pending((zpy_runtime_core *)self, 0, 0, &taken) < 0) return NULL;
    return PyLong_FromUnsignedLong(taken);
}
