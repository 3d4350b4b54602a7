/* The members of a parameter block (value.h): how a parameter or result
 * sits in a host's block, shared by calls from the host into Python
 * (zpy_host_to_python.c) and calls from Python into host functions
 * (zpy_python_to_host.c).
 */
#include "value.h"
#include <string.h>
#include <structmember.h>

/* =========================================================================
 * Plans
 * ========================================================================= */

int zpy_call_member_init(zpy_core_state *state, const char *who, Py_ssize_t offset, int mode,
                         PyObject *detail, PyObject *what, Py_ssize_t block_size, unsigned accept,
                         zpy_plan_member *member) {
    size_t size, align;
    zpy_scalar_kind scalar = ZPY_SCALAR_BOOL;
    if (mode == ZPY_CALL_SCALAR) {
        long code = PyLong_Check(detail) ? PyLong_AsLong(detail) : -1;
        if (code < 0 || code >= ZPY_SCALAR_KINDS) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s: a scalar member needs a scalar kind", who);
            return -1;
        }
        scalar = (zpy_scalar_kind)code;
        size = align = zpy_scalar_size(scalar);
    } else if (mode == ZPY_CALL_OBJECT) {
        if (detail == Py_None && (accept & ZPY_MEMBER_ACCEPT_ANY_OBJECT)) {
            detail = (PyObject *)state->conjugate_type;
        } else if (!PyType_Check(detail) ||
                   !PyType_IsSubtype((PyTypeObject *)detail, state->conjugate_type)) {
            PyErr_Format(PyExc_TypeError, "%s: an object member needs an object conjugate class",
                         who);
            return -1;
        }
        size = align = sizeof(zs_ref);
    } else if (mode == ZPY_CALL_STRUCT ||
               (mode == ZPY_CALL_VALUE && (accept & ZPY_MEMBER_ACCEPT_VALUE))) {
        if (!zpyv_is_kind(state, detail) ||
            (mode == ZPY_CALL_STRUCT && ((zpyv_kind *)detail)->code != ZPYV_STRUCT)) {
            PyErr_Format(PyExc_TypeError, "%s: a %s member needs a %s", who,
                         mode == ZPY_CALL_STRUCT ? "struct" : "value",
                         mode == ZPY_CALL_STRUCT ? "struct kind" : "kind");
            return -1;
        }
        size = ((zpyv_kind *)detail)->size;
        align = ((zpyv_kind *)detail)->align ? ((zpyv_kind *)detail)->align : 1;
    } else {
        PyErr_Format(PyExc_ValueError, "%s: unknown member mode", who);
        return -1;
    }
    if (offset < 0 || offset % (Py_ssize_t)align != 0 || offset > block_size ||
        size > (size_t)(block_size - offset)) {
        PyErr_Format(PyExc_ValueError, "%s: %U is outside the %zd-byte block", who, what,
                     block_size);
        return -1;
    }
    member->offset = offset;
    member->mode = (zpy_call_mode)mode;
    member->scalar = scalar;
    member->detail = mode == ZPY_CALL_SCALAR ? NULL : Py_NewRef(detail);
    member->what = Py_NewRef(what);
    return 0;
}
