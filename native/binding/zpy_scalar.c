/* Scalars: converting Python numbers to the C value of a scalar property or
 * element, and back.
 *
 * Conversion is the first phase of every scalar write (value.h, the rule):
 * it may run Python code, but only a user type's own __index__ or
 * __float__. The contents of int, float and bool (and of their subclasses)
 * are taken from the base value, never through a method a subclass may
 * override. Range errors raise OverflowError, wrong types TypeError, with
 * the same words as zsharp_py's Python layer (src/zsharp_py/_model/kinds.py).
 */
#include "core.h"

#include <float.h>
#include <math.h>
#include <string.h>

static const char *const scalar_names[ZPY_SCALAR_KINDS] = {
    "Bool",   "Int8",   "Int16",  "Int32",   "Int64",   "UInt8",
    "UInt16", "UInt32", "UInt64", "Float32", "Float64",
};

/* The zs.<Name> of a scalar kind ("Int32"). */
const char *zpy_scalar_name(zpy_scalar_kind kind) {
    assert(kind < ZPY_SCALAR_KINDS);
    return scalar_names[kind];
}

/* The Python value of the scalar of `kind` at `at`. */
PyObject *zpy_scalar_load(zpy_scalar_kind kind, const char *at) {
    switch (kind) {
    case ZPY_SCALAR_BOOL: {
        _Bool v;
        memcpy(&v, at, sizeof v);
        return PyBool_FromLong(v);
    }
    case ZPY_SCALAR_I8: {
        int8_t v;
        memcpy(&v, at, sizeof v);
        return PyLong_FromLong(v);
    }
    case ZPY_SCALAR_I16: {
        int16_t v;
        memcpy(&v, at, sizeof v);
        return PyLong_FromLong(v);
    }
    case ZPY_SCALAR_I32: {
        int32_t v;
        memcpy(&v, at, sizeof v);
        return PyLong_FromLong(v);
    }
    case ZPY_SCALAR_I64: {
        int64_t v;
        memcpy(&v, at, sizeof v);
        return PyLong_FromLongLong(v);
    }
    case ZPY_SCALAR_U8: {
        uint8_t v;
        memcpy(&v, at, sizeof v);
        return PyLong_FromLong(v);
    }
    case ZPY_SCALAR_U16: {
        uint16_t v;
        memcpy(&v, at, sizeof v);
        return PyLong_FromLong(v);
    }
    case ZPY_SCALAR_U32: {
        uint32_t v;
        memcpy(&v, at, sizeof v);
        return PyLong_FromUnsignedLong(v);
    }
    case ZPY_SCALAR_U64: {
        uint64_t v;
        memcpy(&v, at, sizeof v);
        return PyLong_FromUnsignedLongLong(v);
    }
    case ZPY_SCALAR_F32: {
        float v;
        memcpy(&v, at, sizeof v);
        return PyFloat_FromDouble(v);
    }
    case ZPY_SCALAR_F64: {
        double v;
        memcpy(&v, at, sizeof v);
        return PyFloat_FromDouble(v);
    }
    default:
        break;
    }
    PyErr_SetString(PyExc_SystemError, "unknown scalar kind");
    return NULL;
}

/* Prefix the error being raised with "<what>: " (what may be NULL). */
static int prefixed_error(PyObject *what, PyObject *type, PyObject *message) {
    if (message == NULL) return -1;
    if (what != NULL) PyErr_Format(type, "%U: %U", what, message);
    else PyErr_SetObject(type, message);
    Py_DECREF(message);
    return -1;
}

/* An exact int holding the integer value of `value`: the base value of an
 * int subclass (PyNumber_Index copies it without calling any method), else
 * the object's own __index__. New reference. */
static PyObject *integer_of(PyObject *value) {
    if (PyLong_CheckExact(value)) return Py_NewRef(value);
    return PyNumber_Index(value);
}

/* Convert an integer value for `kind`, range-checked. */
static int convert_integer(zpy_scalar_kind kind, PyObject *value, zpy_scalar_bits *out,
                           PyObject *what) {
    PyObject *number = integer_of(value);
    if (number == NULL) return zpy_error_prefix(what);
    int result = 0;
    if (kind == ZPY_SCALAR_BOOL) {
        int overflow = 0;
        long v = PyLong_AsLongAndOverflow(number, &overflow);
        if (overflow == 0 && (v == 0 || v == 1)) out->b = v == 1;
        else
            result = prefixed_error(what, PyExc_OverflowError,
                                    PyUnicode_FromFormat("%R is out of range for Bool (use True "
                                                         "or False)",
                                                         number));
    } else if (kind == ZPY_SCALAR_U64) {
        unsigned long long v = PyLong_AsUnsignedLongLong(number);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            result = prefixed_error(what, PyExc_OverflowError,
                                    PyUnicode_FromFormat("%R is out of range for UInt64 [0, %llu]",
                                                         number, (unsigned long long)UINT64_MAX));
        } else {
            out->u64 = v;
        }
    } else {
        long long low, high;
        int ranged = zpy_scalar_range(kind, &low, &high);
        assert(ranged); /* every other kind is handled above */
        (void)ranged;
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(number, &overflow);
        if (overflow != 0 || v < low || v > high) {
            result = prefixed_error(what, PyExc_OverflowError,
                                    PyUnicode_FromFormat("%R is out of range for %s [%lld, %lld]",
                                                         number, scalar_names[kind], low, high));
        } else {
            zpy_scalar_set_integer(kind, v, out);
        }
    }
    Py_DECREF(number);
    return result;
}

/* Convert a real value for a float kind. */
static int convert_real(zpy_scalar_kind kind, PyObject *value, zpy_scalar_bits *out,
                        PyObject *what) {
    double v;
    if (PyFloat_Check(value)) { /* float or a subclass: the base value */
        v = PyFloat_AS_DOUBLE(value);
    } else if (PyLong_Check(value)) {
        v = PyLong_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred()) return zpy_error_prefix(what);
    } else if (PyUnicode_Check(value) || PyBytes_Check(value) || PyByteArray_Check(value) ||
               Py_TYPE(value)->tp_as_number == NULL ||
               Py_TYPE(value)->tp_as_number->nb_float == NULL) {
        return prefixed_error(
            what, PyExc_TypeError,
            PyUnicode_FromFormat("expected a real number, got %s", Py_TYPE(value)->tp_name));
    } else {
        PyObject *number = PyNumber_Float(value); /* may run __float__; an exact float */
        if (number == NULL) return zpy_error_prefix(what);
        v = PyFloat_AS_DOUBLE(number);
        Py_DECREF(number);
    }
    if (kind == ZPY_SCALAR_F64) {
        out->f64 = v;
        return 0;
    }
    if (isfinite(v) && fabs(v) > FLT_MAX) {
        PyObject *shown = PyFloat_FromDouble(v);
        int result = shown == NULL ? -1
                                   : prefixed_error(what, PyExc_OverflowError,
                                                    PyUnicode_FromFormat(
                                                        "%R is out of range for Float32", shown));
        Py_XDECREF(shown);
        return result;
    }
    out->f32 = (float)v;
    return 0;
}

/* Convert `value` into the C value of `kind` (phase 1 of a write). Errors
 * name `what` ("Actor.health"), if given. */
int zpy_scalar_convert(zpy_scalar_kind kind, PyObject *value, zpy_scalar_bits *out,
                       PyObject *what) {
    if (kind == ZPY_SCALAR_BOOL && (value == Py_True || value == Py_False)) {
        out->b = value == Py_True;
        return 0;
    }
    if (kind == ZPY_SCALAR_F64 && PyFloat_CheckExact(value)) {
        out->f64 = PyFloat_AS_DOUBLE(value);
        return 0;
    }
    if (kind == ZPY_SCALAR_F32 || kind == ZPY_SCALAR_F64)
        return convert_real(kind, value, out, what);
    return convert_integer(kind, value, out, what);
}
