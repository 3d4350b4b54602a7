/* A full collection in one call, and the collector's figures as a GcStats.
 *
 * The protocol is the one zsharp_py/_runtime/collector.py states for every
 * path (GarbageCollector): flush what finalisers queued, expire the
 * conjugates of dying objects before any memory goes, then let the purge
 * free them (the native purge hands what it would free to the expiry
 * handler first, so objects gathered meanwhile expire too). The
 * incremental paths run it step by step in Python; collect_garbage(), which
 * a game may call every frame, runs it here, where a collection of a small
 * heap costs a few microseconds instead of tens in Python.
 *
 * The caller holds the runtime's lock and has refused re-entry
 * (Runtime._begin_collection), so no collection or close() starts while
 * Python code runs inside this one (a finaliser or gc callback on an
 * allocation of the expiry).
 */
#include "value.h"

/* The two native collector steps a full collection makes. */
typedef enum collector_step { STEP_MARK_AND_GATHER, STEP_PURGE } collector_step;

/* Whether the runtime is still open; 0 with RuntimeError once closed. */
static int runtime_open(const zpy_runtime_core *rt) {
    if (rt->native != NULL) return 1;
    PyErr_SetString(PyExc_RuntimeError, "the runtime is closed");
    return 0;
}

/* Expire the conjugates of every dying object the heap has gathered (the
 * expiry counts them in rt->cycle_expired); *out_taken: how many objects
 * were taken. -1 with an exception. */
static int expire_pending(zpy_runtime_core *rt, uint32_t *out_taken) {
    *out_taken = 0;
    for (;;) {
        uint32_t taken, expired;
        if (zpy_expire_dying(rt, UINT32_MAX, &taken, &expired) < 0) return -1;
        *out_taken += taken;
        if (taken == 0) return 0;
    }
}

/* Run one native step with the GIL released (as the incremental paths'
 * steps do, zpy_heap_calls.c: a long mark or purge lets other Python threads
 * run). The step hands the dying objects it would free to the expiry
 * handler first (zs_gc_hand_over), which takes the GIL on this thread and
 * expires their conjugates; an error of that expiry is raised here.
 * Returns its status, or -1 with an exception. */
static long run_step(zpy_runtime_core *rt, collector_step step) {
    if (!runtime_open(rt)) return -1;
    zs_runtime *native = rt->native;
    zs_status status;
    zpy_expiry_reporting(rt, 1);
    Py_BEGIN_ALLOW_THREADS;
    status = step == STEP_MARK_AND_GATHER ? zs_gc_mark_and_gather(native)
                                          : zs_gc_purge(native, 0, NULL);
    Py_END_ALLOW_THREADS;
    if (zpy_expiry_reporting(rt, 0) < 0) return -1;
    return (long)status;
}

/* Raise for a failed step as every native failure is raised
 * (zsharp_py/_base/errors.py, refused). */
static PyObject *raise_step(zpy_runtime_core *rt, long status) {
    PyObject *what = PyUnicode_FromString("collect_garbage");
    Py_XDECREF(what ? zpy_call_raise_status(rt->state, (zs_ref)status, what, rt) : NULL);
    Py_XDECREF(what);
    return NULL;
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
    /* Both checked before anything is collected. */
    if (!stats_layout_valid(layout) || !runtime_open(rt)) return NULL;
    /* Dropped conjugates first, so the mark need not gather their objects. */
    if (zpy_flush_values(rt) < 0) return NULL;
    /* What a pending cycle gathered is counted in that cycle. */
    uint32_t taken;
    if (expire_pending(rt, &taken) < 0) return NULL;
    /* Its last expiry found the runtime open and took nothing: no Python
       code ran after that check. */
    assert(rt->native != NULL);
    zs_gc_phase phase = zs_gc_phase_of(rt->native);
    if (phase == ZS_GC_IDLE || phase == ZS_GC_PURGE_PENDING)
        rt->cycle_expired = 0; /* the mark below begins a new cycle */
    long status = run_step(rt, STEP_MARK_AND_GATHER);
    if (status < 0) return NULL;
    if (status != ZS_OK) return raise_step(rt, status);
    status = run_step(rt, STEP_PURGE);
    if (status < 0) return NULL;
    if (status != ZS_OK) return raise_step(rt, status);
    return gc_stats_object(rt, layout);
}
