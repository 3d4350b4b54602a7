/*
 * game.c -- a game host that owns its zsharp runtime and scripts it in Python.
 *
 * The C program is in charge: it creates the runtime, registers its own
 * class (Actor: health, a tick event with a native default), starts
 * CPython and hands Python the runtime (zs.Runtime.attach), and then runs
 * a fixed number of frames. Each frame it ticks every actor from C
 * (zs_call_each: a Python override where the script subclassed Actor),
 * spawns a guard of the script's class by name, destroys the oldest actor
 * from C while the script still holds it (zs_destroy_object: the script's
 * proxy expires at once), and gives the collector a budget of work from C
 * (an incremental step, then a bounded purge). At the end Python lets go
 * (rt.close()), CPython finishes, and the host frees its runtime.
 *
 * Built with the flags the installed package prints, nothing else:
 *   cc game.c $(python -m zsharp_py config --cflags --libs) \
 *      $(python3-config --includes --embed --ldflags) -o game
 * (build.sh does that, docs/embedding.md says why each flag is there).
 * Run: ./game [frames] [script-directory]
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "zsharp.h"

#define ACTORS 16
#define MAX_ACTORS 64

/* The host's Actor: the zs_object header, then its properties. */
typedef struct actor {
    zs_object header;
    float health;
    int32_t ticks;
} actor;

typedef struct tick_params {
    float dt;
} tick_params;

static const zs_property_desc actor_properties[] = {
    {"health", "Float32", offsetof(actor, health), 0, NULL},
    {"ticks", "Int32", offsetof(actor, ticks), 0, NULL},
};
static const zs_property_desc tick_parameters[] = {
    {"dt", "Float32", offsetof(tick_params, dt), ZS_PARAM_IN, NULL},
};

/* Actor.tick's native default: count the tick (a script's override may call it). */
static zs_status actor_tick(void *user, zs_runtime *rt, zs_ref self, void *params) {
    (void)user;
    (void)params;
    actor *me = (actor *)zs_resolve(rt, self);
    if (me == NULL) return ZS_E_STALE;
    me->ticks++;
    return ZS_OK;
}

static const zs_function_desc actor_functions[] = {
    {"tick", actor_tick, NULL, ZS_FUNCTION_EVENT, sizeof(tick_params), tick_parameters, 1},
};

/* Start CPython, with the script's directory first on sys.path; -1 on failure. */
static int start_python(const char *directory) {
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    const char *python = getenv("ZS_HOST_PYTHON"); /* a venv's python: its site-packages */
    PyStatus status = python != NULL && python[0] != '\0'
                          ? PyConfig_SetBytesString(&config, &config.program_name, python)
                          : PyStatus_Ok();
    if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status)) {
        fprintf(stderr, "game: cannot start Python: %s\n",
                status.err_msg != NULL ? status.err_msg : "?");
        return -1;
    }
    PyObject *path = PySys_GetObject("path"); /* borrowed */
    PyObject *entry = PyUnicode_DecodeFSDefault(directory);
    int failed = path == NULL || entry == NULL || PyList_Insert(path, 0, entry) != 0;
    Py_XDECREF(entry);
    return failed ? -1 : 0;
}

/* script.<name>(*args), taking the args tuple; 0, or -1 with the Python error printed. */
static int call_script(PyObject *script, const char *name, PyObject *args) {
    PyObject *function = args != NULL ? PyObject_GetAttrString(script, name) : NULL;
    PyObject *result = function != NULL ? PyObject_CallObject(function, args) : NULL;
    Py_XDECREF(function);
    Py_XDECREF(args);
    if (result == NULL) {
        PyErr_Print();
        return -1;
    }
    Py_DECREF(result);
    return 0;
}

/* A new rooted actor of `cls` at full health; ZS_OK or the failure. */
static zs_status spawn(zs_runtime *rt, const zs_class *cls, zs_ref *out) {
    zs_object *object = NULL;
    zs_status status = zs_object_new(rt, cls, ZS_NULL_REF, ZS_NAME_AUTO, 0, out, &object);
    if (status == ZS_OK) ((actor *)object)->health = 100.0f;
    return status == ZS_OK ? zs_add_to_root(rt, *out) : status;
}

/* The frames: tick every actor from C, spawn, destroy from C, collect from C. */
static int play(zs_runtime *rt, const zs_class *actor_class, PyObject *script, int frames) {
    const zs_class *guard_class = NULL;
    zs_status status = zs_find_class(rt, "Guard", &guard_class); /* the script's subclass */
    if (status != ZS_OK) {
        fprintf(stderr, "game: no Guard class: %s\n", zs_status_message(status));
        return -1;
    }
    zs_ref actors[MAX_ACTORS];
    int count = 0, oldest = 0, destroyed = 0;
    for (; count < ACTORS; count++)
        if (spawn(rt, count % 2 ? guard_class : actor_class, &actors[count]) != ZS_OK) return -1;
    if (call_script(script, "meet",
                    Py_BuildValue("(KK)", (unsigned long long)actors[0],
                                  (unsigned long long)actors[ACTORS - 1])) != 0)
        return -1;
    for (int frame = 0; frame < frames; frame++) {
        tick_params params = {1.0f / 60.0f};
        uint32_t ticked = 0;
        if (zs_call_each(rt, actor_class, "tick", &params, &ticked) != ZS_OK) return -1;
        /* Every third frame, destroy the oldest actor while the script may
           hold it, and spawn a guard. */
        if (frame % 3 != 2) goto collect;
        if (zs_destroy_object(rt, actors[oldest]) == ZS_OK) {
            oldest++;
            destroyed++;
        }
        if (count < MAX_ACTORS && spawn(rt, guard_class, &actors[count]) == ZS_OK) count++;
    collect:;
        /* The collector's budget for this frame, from C: 64 objects marked,
           then 64 freed (the script's proxies of what it frees expire first). */
        int done = 0;
        if (zs_gc_phase_of(rt) == ZS_GC_IDLE) zs_gc_start_incremental(rt);
        if (zs_gc_step_bounded(rt, 0, 64, &done) == ZS_OK && done)
            zs_gc_purge_bounded(rt, 0, 64, &done);
        if (call_script(script, "frame", Py_BuildValue("(ii)", frame, (int)ticked)) != 0) return -1;
    }
    zs_collect_garbage(rt);
    zs_gc_stats stats;
    zs_gc_get_stats(rt, &stats);
    printf("game: %d frames, %d actors spawned, %d destroyed from C, %u live at the end\n", frames,
           count, destroyed, zs_live_objects(rt));
    return 0;
}

int main(int argc, char **argv) {
    int frames = argc > 1 ? atoi(argv[1]) : 30;
    const char *directory = argc > 2 ? argv[2] : ".";
    if (frames <= 0) {
        fprintf(stderr, "usage: %s [frames > 0] [script-directory]\n", argv[0]);
        return 2;
    }
    /* The host's runtime and class, before any Python. */
    zs_runtime_options options;
    zs_runtime_default_options(&options);
    zs_runtime *rt = NULL;
    const zs_class *actor_class = NULL;
    zs_class_desc desc = {"Actor",          NULL, sizeof(actor),   0, NULL, 0,
                          actor_properties, 2,    actor_functions, 1};
    if (zs_runtime_new(&options, &rt) != ZS_OK ||
        zs_class_register(rt, &desc, &actor_class) != ZS_OK) {
        fprintf(stderr, "game: cannot create the runtime\n");
        return 1;
    }
    int status = start_python(directory);
    PyObject *script = NULL;
    if (status == 0) {
        /* Hand Python the runtime: the script attaches to it and subclasses Actor. */
        script = PyImport_ImportModule("game_script");
        status = script != NULL
                     ? call_script(script, "attach",
                                   Py_BuildValue("(K)", (unsigned long long)(uintptr_t)rt))
                     : (PyErr_Print(), -1);
    }
    if (status == 0) status = play(rt, actor_class, script, frames);
    if (script != NULL && call_script(script, "finish", PyTuple_New(0)) != 0) status = -1;
    Py_XDECREF(script);
    if (Py_FinalizeEx() < 0) status = -1;
    printf("game: Python finished; %u objects left to the host\n", zs_live_objects(rt));
    zs_runtime_free(rt); /* the host's runtime, freed by the host */
    return status == 0 ? 0 : 1;
}
