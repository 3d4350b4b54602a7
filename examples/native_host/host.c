/*
 * host.c -- a native host that embeds CPython and scripts its frames with
 * zsharp_py: the C side owns the frame loop and the clock, calls
 * frame_script.frame() once per frame and reports what the garbage
 * collector did.
 *
 * Usage: host [frames] [script-directory]
 * The interpreter's environment (a venv and its site-packages, where
 * zsharp_py is installed) is the one of the Python named by $ZS_HOST_PYTHON,
 * else the one the host was built with (HOST_PYTHON, set by build.sh).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HOST_PYTHON
#error "build with -DHOST_PYTHON='\"/path/to/python\"' (see build.sh)"
#endif
#ifndef SCRIPT_DIR
#define SCRIPT_DIR "."
#endif

#define FRAME_DT (1.0 / 60.0)

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

/* The frame loop: the host decides how many particles each frame spawns. */
static int run(PyObject *script, long frames) {
    PyObject *result = call(script, "start", "(d)", 0.1);
    if (result == NULL) return -1;
    printf("host: scene ready, %ld live objects\n", PyLong_AsLong(result));
    Py_DECREF(result);
    long cycles = 0, freed = 0, peak = 0;
    for (long index = 0; index < frames; index++) {
        int spawn = 20 + (int)(index % 7) * 5;
        result = call(script, "frame", "(ldi)", index, FRAME_DT, spawn);
        const char *action = NULL;
        long live = 0, cycle_freed = 0;
        if (result == NULL || !PyArg_ParseTuple(result, "sll", &action, &live, &cycle_freed)) {
            Py_XDECREF(result);
            return -1;
        }
        if (live > peak) peak = live;
        if (strcmp(action, "finished") == 0) {
            cycles++;
            freed += cycle_freed;
            printf("host: frame %3ld: GC cycle %ld finished, %ld objects freed, %ld live\n",
                   index, cycles, cycle_freed, live);
        }
        Py_DECREF(result);
    }
    result = call(script, "finish", "()");
    long spawned = 0, final_freed = 0, final_live = 0;
    if (result == NULL || !PyArg_ParseTuple(result, "lll", &spawned, &final_freed, &final_live)) {
        Py_XDECREF(result);
        return -1;
    }
    Py_DECREF(result);
    printf("host: %ld frames, %ld particles spawned, peak %ld live objects\n", frames, spawned,
           peak);
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
    if (status != 0) PyErr_Print();
    Py_XDECREF(script);
    /* Finalising runs Python's exit handlers: zsharp_py closes its runtimes there. */
    if (Py_FinalizeEx() < 0) status = -1;
    return status == 0 ? 0 : 1;
}
