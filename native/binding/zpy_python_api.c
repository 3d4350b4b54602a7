/* zsharp_python.h: handles and proxies for C code beside Python (the
 * state's python_api table).
 */
#include "value.h"
#include <structmember.h>

/* =========================================================================
 * zsharp_python.h: handles and proxies for C code
 * ========================================================================= */

static PyObject *python_proxy_of(const zs_python_api *api, zs_runtime *native, zs_ref handle) {
    zpy_core_state *state = api->state;
    zpy_runtime_core *rt = native != NULL ? zpy_open_runtime_of(state, native) : NULL;
    if (rt == NULL || !zpy_open(rt)) {
        PyErr_SetString(PyExc_RuntimeError,
                        "proxy_of: no open zs.Runtime runs on this zs_runtime (Python created "
                        "none on it, or closed it)");
        return NULL;
    }
    return zpy_conjugate_of(rt, handle);
}

static int python_handle_of(const zs_python_api *api, PyObject *proxy, zs_runtime **out_rt,
                            zs_ref *out_handle) {
    zpy_core_state *state = api->state;
    if (proxy == NULL || !PyObject_TypeCheck(proxy, state->conjugate_type)) {
        PyErr_Format(PyExc_TypeError, "handle_of: expected a zs.Object, not %.100s",
                     proxy != NULL ? Py_TYPE(proxy)->tp_name : "NULL");
        return -1;
    }
    zpy_conjugate *conjugate = (zpy_conjugate *)proxy;
    if (!ZPY_CONJUGATE_IS_LIVE(conjugate)) {
        zpy_raise_expired(conjugate);
        return -1;
    }
    if (out_rt != NULL) *out_rt = conjugate->runtime->native;
    zs_ref handle = zpy_conjugate_share(conjugate);
    if (out_handle != NULL) *out_handle = handle;
    return 0;
}

void zpy_python_api_init(zpy_core_state *state) {
    state->python_api = (zs_python_api){
        .version = ZS_PYTHON_API_VERSION,
        .size = sizeof(zs_python_api),
        .proxy_of = python_proxy_of,
        .handle_of = python_handle_of,
        .state = state,
    };
}
