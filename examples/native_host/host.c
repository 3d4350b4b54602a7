/*
 * host.c -- a native host that embeds CPython and scripts its frames with
 * zsharp_py. The C side owns the frame loop and the clock; every frame it
 * calls each particle's Python `tick` through the heap's C API
 * (zs_call_each), calls frame_script.frame() to spawn and drop particles and
 * advance the garbage collector, and reads the collector's figures natively
 * (zs_gc_get_stats, zs_live_objects).
 *
 * The C API functions come from the zsharp_py the script imported:
 * zsharp_py.lowlevel.native_function(name) gives their addresses (the library inside the
 * extension module hides its symbols), Runtime.native_address the runtime.
 *
 * Usage: host [frames] [script-directory]
 * The interpreter's environment (a venv and its site-packages, where
 * zsharp_py is installed) is the one of the Python named by $ZS_HOST_PYTHON,
 * else the one the host was built with (HOST_PYTHON, set by build.sh).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zsharp.h"

#ifndef HOST_PYTHON
#error "build with -DHOST_PYTHON='\"/path/to/python\"' (see build.sh)"
#endif
#ifndef SCRIPT_DIR
#define SCRIPT_DIR "."
#endif

#define FRAME_DT (1.0 / 60.0)

/* Particle.tick's parameter block, as zsharp_py.lowlevel.function_layout(Particle, "tick")
   declares it (checked at start). */
struct Particle_tick_params { double dt; };
#define TICK_DECLARATION "struct Particle_tick_params { double dt; };"

/* The C API functions the host calls, with zsharp.h's signatures. */
typedef struct api {
    zs_status (*find_class)(zs_runtime *, const char *, const zs_class **);
    zs_status (*call_each)(zs_runtime *, const zs_class *, const char *, void *, uint32_t *);
    void (*gc_get_stats)(zs_runtime *, zs_gc_stats *);
    uint32_t (*live_objects)(zs_runtime *);
} api;

/* Start the interpreter as if it were HOST_PYTHON: CPython finds the venv
   (pyvenv.cfg beside that executable) and its site-packages from it. */
static int start_python(void) {
    const char *python = getenv("ZS_HOST_PYTHON");
    if (python == NULL || python[0] == '\0') python = HOST_PYTHON;
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, python);
    if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status)) {
        fprintf(stderr, "host: cannot start Python: %s\n",
                status.err_msg != NULL ? status.err_msg : "unknown error");
        return -1;
    }
    return 0;
}

/* Import the frame script from directory, with that directory first on sys.path. */
static PyObject *import_script(const char *directory) {
    PyObject *path = PySys_GetObject("path"); /* borrowed */
    PyObject *entry = PyUnicode_DecodeFSDefault(directory);
    if (path == NULL || entry == NULL || PyList_Insert(path, 0, entry) != 0) {
        Py_XDECREF(entry);
        return NULL;
    }
    Py_DECREF(entry);
    return PyImport_ImportModule("frame_script");
}

/* Call module.name(*args built from format); a new reference, or NULL with the error set. */
static PyObject *call(PyObject *module, const char *name, const char *format, ...) {
    PyObject *function = PyObject_GetAttrString(module, name);
    if (function == NULL) return NULL;
    va_list arguments;
    va_start(arguments, format);
    PyObject *args = Py_VaBuildValue(format, arguments);
    va_end(arguments);
    PyObject *result = args != NULL ? PyObject_CallObject(function, args) : NULL;
    Py_XDECREF(args);
    Py_DECREF(function);
    return result;
}

/* The address of a C API function, from zsharp_py.lowlevel.native_function(name); 0 with the error set. */
static uintptr_t api_address(const char *name) {
    PyObject *zs = PyImport_ImportModule("zsharp_py.lowlevel");
    if (zs == NULL) return 0;
    PyObject *address = call(zs, "native_function", "(s)", name);
    Py_DECREF(zs);
    if (address == NULL) return 0;
    uintptr_t value = (uintptr_t)PyLong_AsUnsignedLongLong(address);
    Py_DECREF(address);
    return PyErr_Occurred() ? 0 : value;
}

/* Fill the table of C API functions; -1 with the error set. */
static int load_api(api *out) {
    uintptr_t find_class = api_address("zs_find_class");
    uintptr_t call_each = find_class ? api_address("zs_call_each") : 0;
    uintptr_t gc_get_stats = call_each ? api_address("zs_gc_get_stats") : 0;
    uintptr_t live_objects = gc_get_stats ? api_address("zs_live_objects") : 0;
    if (live_objects == 0) return -1;
    out->find_class = (zs_status (*)(zs_runtime *, const char *, const zs_class **))find_class;
    out->call_each = (zs_status (*)(zs_runtime *, const zs_class *, const char *, void *,
                                    uint32_t *))call_each;
    out->gc_get_stats = (void (*)(zs_runtime *, zs_gc_stats *))gc_get_stats;
    out->live_objects = (uint32_t (*)(zs_runtime *))live_objects;
    return 0;
}

/* The frame loop: the host decides how many particles each frame spawns and ticks them. */
static int run(PyObject *script, long frames) {
    api zs;
    if (load_api(&zs) != 0) return -1;
    PyObject *result = call(script, "start", "(d)", 0.1);
    unsigned long long address = 0;
    const char *declaration = NULL;
    if (result == NULL || !PyArg_ParseTuple(result, "Ks", &address, &declaration)) {
        Py_XDECREF(result);
        return -1;
    }
    if (strcmp(declaration, TICK_DECLARATION) != 0) {
        fprintf(stderr, "host: Particle.tick's block is now %s, not %s\n", declaration,
                TICK_DECLARATION);
        Py_DECREF(result);
        return -2;
    }
    Py_DECREF(result);
    zs_runtime *rt = (zs_runtime *)(uintptr_t)address;
    const zs_class *particle = NULL;
    zs_status status = zs.find_class(rt, "Particle", &particle);
    if (status != ZS_OK) {
        fprintf(stderr, "host: zs_find_class(\"Particle\") failed: %d\n", (int)status);
        return -2;
    }
    printf("host: scene ready, Particle.tick's block is %s\n", declaration);
    long cycles = 0, freed = 0, peak = 0, ticks = 0;
    for (long index = 0; index < frames; index++) {
        struct Particle_tick_params params = {FRAME_DT};
        uint32_t called = 0;
        status = zs.call_each(rt, particle, "tick", &params, &called);
        if (status != ZS_OK) {
            fprintf(stderr, "host: zs_call_each(tick) failed: %d\n", (int)status);
            return -2;
        }
        ticks += called;
        int spawn = 20 + (int)(index % 7) * 5;
        result = call(script, "frame", "(ldi)", index, FRAME_DT, spawn);
        if (result == NULL) return -1;
        int finished = PyUnicode_CompareWithASCIIString(result, "finished") == 0;
        Py_DECREF(result);
        long live = (long)zs.live_objects(rt);
        if (live > peak) peak = live;
        if (finished) {
            zs_gc_stats stats;
            zs.gc_get_stats(rt, &stats);
            cycles++;
            freed += (long)stats.objects_freed;
            printf("host: frame %3ld: GC cycle %ld finished (%llu mark steps, %llu objects "
                   "marked), %llu objects freed, %ld live\n", index, cycles,
                   (unsigned long long)stats.mark_steps,
                   (unsigned long long)stats.objects_marked,
                   (unsigned long long)stats.objects_freed, live);
        }
    }
    result = call(script, "finish", "()");
    long spawned = 0, final_freed = 0, final_live = 0;
    if (result == NULL || !PyArg_ParseTuple(result, "lll", &spawned, &final_freed, &final_live)) {
        Py_XDECREF(result);
        return -1;
    }
    Py_DECREF(result);
    printf("host: %ld frames, %ld particles spawned, %ld tick calls from C, peak %ld live "
           "objects\n", frames, spawned, ticks, peak);
    printf("host: %ld incremental GC cycles freed %ld objects during play\n", cycles, freed);
    printf("host: final collection freed %ld, %ld live objects left\n", final_freed, final_live);
    return 0;
}

int main(int argc, char **argv) {
    long frames = argc > 1 ? strtol(argv[1], NULL, 10) : 120;
    const char *directory = argc > 2 ? argv[2] : SCRIPT_DIR;
    if (frames <= 0) {
        fprintf(stderr, "usage: %s [frames > 0] [script-directory]\n", argv[0]);
        return 2;
    }
    if (start_python() != 0) return 1;
    PyObject *script = import_script(directory);
    int status = script != NULL ? run(script, frames) : -1;
    if (status == -1) PyErr_Print();
    Py_XDECREF(script);
    /* Finalising runs Python's exit handlers: zsharp_py closes its runtimes there. */
    if (Py_FinalizeEx() < 0) status = -1;
    return status == 0 ? 0 : 1;
}
