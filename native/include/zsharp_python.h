/*
 * zsharp_python.h -- handles and Python proxies, both ways, for C code that
 * embeds or extends Python beside zsharp_py (a host, a C extension).
 *
 * A zs_ref names a native object (zsharp.h); Python code sees the object
 * through its proxy, a zs.Object. This table turns one into the other. Its
 * address is zsharp_py.lowlevel.python_table(); the functions take the
 * table itself first. Every call needs the GIL (the caller holds it).
 *
 *     const zs_python_api *py = (const zs_python_api *)address;
 *     PyObject *actor = py->proxy_of(py, rt, handle);   // new reference
 *     zs_runtime *owner; zs_ref back;
 *     if (py->handle_of(py, actor, &owner, &back) == 0) ...
 *
 * In Python, obj.handle and rt.object_from_handle(handle) do the same.
 */
#ifndef ZSHARP_PYTHON_H
#define ZSHARP_PYTHON_H

#include <Python.h>

#include "zsharp.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZS_PYTHON_API_VERSION 1u

typedef struct zs_python_api zs_python_api;
struct zs_python_api {
    uint32_t version; /* ZS_PYTHON_API_VERSION */
    uint32_t size;    /* sizeof(zs_python_api) */
    /* The proxy of `handle` in the Python runtime open on `rt`: a new
       reference (the proxy Python holds, or one made now), Py_None (a new
       reference) for a null, freed or dying handle, or NULL with
       RuntimeError when no open Python runtime runs on `rt`. */
    PyObject *(*proxy_of)(const zs_python_api *api, zs_runtime *rt, zs_ref handle);
    /* The runtime and handle of a live proxy: 0, or -1 with TypeError (not
       a zs.Object) or ExpiredConjugateError (its object is gone). The
       handle is given out: the object is left to the collector (never
       freed early with its proxy), as obj.handle does. */
    int (*handle_of)(const zs_python_api *api, PyObject *proxy, zs_runtime **out_rt,
                     zs_ref *out_handle);
    void *state; /* private: the binding's own state */
};

#ifdef __cplusplus
}
#endif

#endif /* ZSHARP_PYTHON_H */
