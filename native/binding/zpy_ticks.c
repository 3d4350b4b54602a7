/* The tick manager's Python face: the `_ticks_*` methods of RuntimeCore,
 * over the native tick manager (native/src/ticks.c; zsharp.h, "the tick
 * manager"). zsharp_py/_runtime/ticks.py is the front (rt.ticks): it
 * converts and checks every argument, so these take exact types only and
 * run no Python code before their native call, and raises the statuses
 * they return.
 *
 * A frame (`_ticks_frame`) is one native call with the GIL held, as a
 * host's function called from Python is (zpy_python_to_host.c, run_entry):
 * a host call in the runtime's life (ZPY_ACT_CALL_HOST, zpy_life.c), so a
 * close() from inside a tick function defers freeing the native runtime
 * until the frame returns. The
 * Python overrides it ticks go through the managed call handler
 * (zpy_host_to_python.c), which finds the GIL already held; native tick
 * functions run as they are, with no Python frame.
 *
 * An object given to the tick manager has its handle given out
 * (zpy_conjugate_share): the manager holds it, so dropping the proxy no
 * longer frees the object at once; the collector decides.
 */
#include "value.h"

/* The native runtime of an open runtime; NULL with ExpiredConjugateError. */
static zs_runtime *open_native(zpy_runtime_core *rt) { return zpy_rt_open(rt, 0); }

/* Check a fastcall method's argument count: 0, or -1 with TypeError. */
static int arity(const char *name, Py_ssize_t given, Py_ssize_t wanted) {
    if (given == wanted) return 0;
    PyErr_Format(PyExc_TypeError, "%s expected %zd arguments, got %zd", name, wanted, given);
    return -1;
}

/* A tick handle: an exact int of 64 bits (no Python code runs). */
static int tick_arg(PyObject *value, zs_tick *out) {
    if (!PyLong_CheckExact(value)) {
        PyErr_SetString(PyExc_TypeError, "a tick function's id is an int");
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(value);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = (zs_tick)v;
    return 0;
}

/* A group: an exact int below ZS_TICK_GROUP_COUNT's range of uint32_t (the
 * heap refuses one out of range). */
static int group_arg(PyObject *value, uint32_t *out) {
    if (!PyLong_CheckExact(value)) {
        PyErr_SetString(PyExc_TypeError, "a tick group is an int");
        return -1;
    }
    unsigned long v = PyLong_AsUnsignedLong(value);
    if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
    *out = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
    return 0;
}

/* Seconds: an exact float (the heap refuses a negative or non-finite one). */
static int seconds_arg(PyObject *value, double *out) {
    if (!PyFloat_CheckExact(value)) {
        PyErr_SetString(PyExc_TypeError, "seconds are a float");
        return -1;
    }
    *out = PyFloat_AS_DOUBLE(value);
    return 0;
}

/* The live conjugate `obj` of an object of runtime `rt`, or NULL with an
 * error (TypeError, ExpiredConjugateError, ValueError). */
static zpy_conjugate *object_arg(zpy_runtime_core *rt, PyObject *obj) {
    if (!zpy_is_conjugate(rt->state, obj)) {
        PyErr_Format(PyExc_TypeError, "a tick function's object is a zs.Object, not %.200s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    zpy_conjugate *conjugate = (zpy_conjugate *)obj;
    if (!ZPY_CONJUGATE_IS_LIVE(conjugate)) {
        zpy_raise_expired(conjugate);
        return NULL;
    }
    if (conjugate->runtime != rt) {
        PyErr_SetString(PyExc_ValueError, "the object belongs to another runtime");
        return NULL;
    }
    return conjugate;
}

/* RuntimeCore._ticks_register(obj, function, group, interval, flags) ->
 * (status, tick): register a tick function of `obj` (a live object of this
 * runtime): the function named by `function` (bytes, UTF-8) of its class,
 * in `group` (int), every `interval` seconds (float), with `flags`
 * (ZS_TICK_*, int). */
PyObject *zpy_ticks_register(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (arity("_ticks_register", nargs, 5) < 0) return NULL;
    uint32_t group, flags;
    double interval;
    if (!PyBytes_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_ticks_register: the function's name is bytes");
        return NULL;
    }
    if (group_arg(args[2], &group) < 0 || seconds_arg(args[3], &interval) < 0 ||
        group_arg(args[4], &flags) < 0)
        return NULL;
    const char *function = PyBytes_AS_STRING(args[1]);
    if ((size_t)PyBytes_GET_SIZE(args[1]) != strlen(function)) {
        PyErr_SetString(PyExc_ValueError, "a function's name holds no NUL character");
        return NULL;
    }
    zs_runtime *native = open_native(rt);
    zpy_conjugate *conjugate = native != NULL ? object_arg(rt, args[0]) : NULL;
    if (conjugate == NULL) return NULL;
    /* No Python code from the checks to the call: the object is live. */
    zs_tick_desc desc = {.object = zpy_conjugate_share(conjugate),
                         .function = function,
                         .group = group,
                         .flags = flags,
                         .interval = interval};
    zs_tick tick = 0;
    zs_status status = zs_tick_register(native, &desc, &tick);
    return Py_BuildValue("(iK)", (int)status, (unsigned long long)tick);
}

/* RuntimeCore._ticks_unregister(tick) -> status. */
PyObject *zpy_ticks_unregister(PyObject *self, PyObject *tick_id) {
    zs_tick tick;
    if (tick_arg(tick_id, &tick) < 0) return NULL;
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    return native != NULL ? PyLong_FromLong(zs_tick_unregister(native, tick)) : NULL;
}

/* RuntimeCore._ticks_unregister_object(obj) -> count: unregister every tick
 * function of a live object of this runtime. */
PyObject *zpy_ticks_unregister_object(PyObject *self, PyObject *obj) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    zs_runtime *native = open_native(rt);
    zpy_conjugate *conjugate = native != NULL ? object_arg(rt, obj) : NULL;
    if (conjugate == NULL) return NULL;
    uint32_t count = 0;
    zs_tick_unregister_object(native, conjugate->handle, &count);
    return PyLong_FromUnsignedLong(count);
}

/* RuntimeCore._ticks_set_enabled(tick, enabled: bool) -> status. */
PyObject *zpy_ticks_set_enabled(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    zs_tick tick;
    if (arity("_ticks_set_enabled", nargs, 2) < 0 || tick_arg(args[0], &tick) < 0) return NULL;
    if (!PyBool_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "_ticks_set_enabled: enabled is a bool");
        return NULL;
    }
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    return native != NULL ? PyLong_FromLong(zs_tick_set_enabled(native, tick, args[1] == Py_True))
                          : NULL;
}

/* RuntimeCore._ticks_set_interval(tick, seconds: float) -> status. */
PyObject *zpy_ticks_set_interval(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    zs_tick tick;
    double seconds;
    if (arity("_ticks_set_interval", nargs, 2) < 0 || tick_arg(args[0], &tick) < 0 ||
        seconds_arg(args[1], &seconds) < 0)
        return NULL;
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    return native != NULL ? PyLong_FromLong(zs_tick_set_interval(native, tick, seconds)) : NULL;
}

/* RuntimeCore._ticks_set_group(tick, group: int) -> status. */
PyObject *zpy_ticks_set_group(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    zs_tick tick;
    uint32_t group;
    if (arity("_ticks_set_group", nargs, 2) < 0 || tick_arg(args[0], &tick) < 0 ||
        group_arg(args[1], &group) < 0)
        return NULL;
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    return native != NULL ? PyLong_FromLong(zs_tick_set_group(native, tick, group)) : NULL;
}

/* RuntimeCore._ticks_prerequisite(tick, prerequisite, add: bool) -> status:
 * add or remove a prerequisite. */
PyObject *zpy_ticks_prerequisite(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    zs_tick tick, prerequisite;
    if (arity("_ticks_prerequisite", nargs, 3) < 0 || tick_arg(args[0], &tick) < 0 ||
        tick_arg(args[1], &prerequisite) < 0)
        return NULL;
    if (!PyBool_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "_ticks_prerequisite: add is a bool");
        return NULL;
    }
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    if (native == NULL) return NULL;
    zs_status status = args[2] == Py_True ? zs_tick_add_prerequisite(native, tick, prerequisite)
                                          : zs_tick_remove_prerequisite(native, tick, prerequisite);
    return PyLong_FromLong(status);
}

/* RuntimeCore._ticks_info(tick) -> (status, object handle, group, actual
 * group, interval, elapsed, calls, enabled, prerequisites). */
PyObject *zpy_ticks_info(PyObject *self, PyObject *tick_id) {
    zs_tick tick;
    if (tick_arg(tick_id, &tick) < 0) return NULL;
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    if (native == NULL) return NULL;
    zs_tick_info info;
    zs_status status = zs_tick_get_info(native, tick, &info);
    return Py_BuildValue("(iKIIddKNI)", (int)status, (unsigned long long)info.object, info.group,
                         info.actual_group, info.interval, info.elapsed,
                         (unsigned long long)info.calls, PyBool_FromLong(info.enabled),
                         info.prerequisite_count);
}

/* RuntimeCore._ticks_count() -> the tick functions registered. */
PyObject *zpy_ticks_count(PyObject *self, PyObject *unused) {
    (void)unused;
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    return native != NULL ? PyLong_FromUnsignedLong(zs_tick_count(native)) : NULL;
}

/* RuntimeCore._ticks_frame(dt: float) -> (status, frame, time, ticked,
 * failed, waiting, disabled, skipped, unregistered, first_failure,
 * tick_seconds): one frame, the GIL held (the Python overrides find it
 * so), counted as a native call of this runtime. */
PyObject *zpy_ticks_frame(PyObject *self, PyObject *dt) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    double delta;
    if (seconds_arg(dt, &delta) < 0) return NULL;
    zs_runtime *native = open_native(rt);
    if (native == NULL) return NULL;
    /* A host call as the runtime's life counts one (zpy_life.c): refused
       while the collector expires conjugates (a tick function collecting
       then would free objects whose conjugates are still live); a close()
       from a tick function defers the native free to the frame's end. */
    PyObject *what = PyUnicode_FromString("rt.ticks.frame()");
    int entered = what != NULL ? zpy_life_enter(rt, ZPY_ACT_CALL_HOST, what) : -1;
    Py_XDECREF(what);
    if (entered <= 0) return NULL;
    zs_frame_stats stats;
    zpy_entry errors; /* what the tick functions raise: raised when the frame returns */
    zpy_entry_open(rt->state, &errors);
    zs_status status = zs_tick_frame(native, delta, NULL, &stats);
    zpy_entry_leave(rt->state, &errors);
    zpy_life_leave(rt, ZPY_ACT_CALL_HOST); /* the last to return makes a deferred free */
    PyObject *frame = PyUnicode_FromString("rt.ticks.frame()");
    int failed = frame != NULL ? zpy_entry_raise(rt->state, &errors, frame) : -1;
    Py_XDECREF(frame);
    if (failed < 0) {
        Py_CLEAR(errors.first); /* kept when the name could not be made */
        return NULL;
    }
    return Py_BuildValue("(iKdIIIIIIid)", (int)status, (unsigned long long)stats.frame, stats.time,
                         stats.ticked, stats.failed, stats.waiting, stats.disabled, stats.skipped,
                         stats.unregistered, (int)stats.first_failure, (double)stats.tick_ns / 1e9);
}

/* The tick manager's constants (TICK_*: the groups, their count, the
 * flags), as module constants. */
int zpy_add_tick_constants(PyObject *module) {
    if (PyModule_AddIntConstant(module, "TICK_PRE_PHYSICS", ZS_TICK_PRE_PHYSICS) < 0 ||
        PyModule_AddIntConstant(module, "TICK_DURING_PHYSICS", ZS_TICK_DURING_PHYSICS) < 0 ||
        PyModule_AddIntConstant(module, "TICK_POST_PHYSICS", ZS_TICK_POST_PHYSICS) < 0 ||
        PyModule_AddIntConstant(module, "TICK_POST_UPDATE_WORK", ZS_TICK_POST_UPDATE_WORK) < 0 ||
        PyModule_AddIntConstant(module, "TICK_GROUP_COUNT", ZS_TICK_GROUP_COUNT) < 0 ||
        PyModule_AddIntConstant(module, "TICK_DISABLED", ZS_TICK_DISABLED) < 0 ||
        PyModule_AddIntConstant(module, "CLASS_SCRIPT", ZS_CLASS_SCRIPT) < 0)
        return -1;
    return 0;
}
