/* Containers: the C bases of zs.Array, zs.Set, zs.Map and zs.Optional.
 *
 * Every method checks the kind of what it is given (a conjugate re-classed
 * through object.__class__ gets a TypeError, never another layout), and
 * every write follows the rule of value.h: the Python values are staged
 * first; then, with no Python code in between, the container is found
 * again (it may have been disposed, collected, grown or cleared meanwhile),
 * indices are checked against it as it is now, the native call is made and
 * the views it invalidates are expired in place; then the staged values are
 * released. Element views expire when the container changes structure
 * (storage may move); a write that only replaces an element's contents
 * expires the views below that element.
 */
#include "value.h"

/* =========================================================================
 * Shared
 * ========================================================================= */

/* The live container of `code` a method is given (its memory), or NULL with
 * an error set. */
static char *container_of(PyObject *self, uint8_t code, zpyv_value **out) {
    zpyv_value *value = (zpyv_value *)self;
    if (value->kind->code != code) {
        PyErr_Format(PyExc_TypeError, "%U is not a container of this type", value->kind->what);
        return NULL;
    }
    *out = value;
    return zpyv_live(value);
}

/* The native type of a live container's kind (registered when it was made). */
static const zs_type *type_of(zpyv_value *value) {
    return zpyv_native_type(value->runtime, value->kind);
}

/* Raise for a refused native call. */
static PyObject *refused(zpyv_value *value, zs_status status) {
    return zpyv_refused(value->runtime, status, value->kind->what);
}

/* The container changed structure: every view below it expires. */
static void structure_changed(zpyv_value *value) {
    zpyv_expire_table(value->views, value->runtime->state->reason_structure);
}

/* An element's contents were replaced: the views below its view expire. */
static void contents_changed(zpyv_value *value, Py_ssize_t key) {
    zpyv_value *view = zpyv_table_lookup(value->views, key);
    if (view != NULL) zpyv_expire_table(view->views, value->runtime->state->reason_structure);
}

/* A Python index (int or __index__) as a position in [0, length): negative
 * counts from the end. -1 with IndexError or TypeError set. */
static Py_ssize_t position_of(PyObject *index, Py_ssize_t length, int *error) {
    *error = 0;
    if (PyBool_Check(index) || !PyLong_Check(index)) {
        PyErr_Format(PyExc_TypeError, "indices must be integers, not %s", Py_TYPE(index)->tp_name);
        *error = 1;
        return -1;
    }
    Py_ssize_t position = PyLong_AsSsize_t(index);
    if (position == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        position = PY_SSIZE_T_MAX;
    } else if (position < 0) {
        position += length;
    }
    if (position < 0 || position >= length) {
        PyErr_SetString(PyExc_IndexError, "index out of range");
        *error = 1;
        return -1;
    }
    return position;
}

/* Whether a plain element equals a probe as users compare them: a struct
 * (a dict) also equals the tuple of its members. */
static int plain_equal(PyObject *element, PyObject *probe) {
    if (PyDict_Check(element) && (PyTuple_Check(probe) || PyList_Check(probe))) {
        PyObject *values = PyDict_Values(element);
        if (values == NULL) return -1;
        PyObject *mine = PyList_AsTuple(values), *theirs = PySequence_Tuple(probe);
        Py_DECREF(values);
        int equal = mine && theirs ? PyObject_RichCompareBool(mine, theirs, Py_EQ) : -1;
        Py_XDECREF(mine);
        Py_XDECREF(theirs);
        return equal;
    }
    return PyObject_RichCompareBool(element, probe, Py_EQ);
}

/* The value users compare elements with: a conjugate's plain copy. */
static PyObject *probe_of(zpy_core_state *state, PyObject *value) {
    if (zpyv_check(state, value)) return PyObject_CallMethod(value, "to_python", NULL);
    return Py_NewRef(value);
}

/* =========================================================================
 * Array
 * ========================================================================= */

/* An element's address in an array as it is now (a zpyv_locator). */
static char *array_locator(PyObject *holder, Py_ssize_t index) {
    zpyv_value *value = (zpyv_value *)holder;
    char *at = zpyv_live(value);
    if (at == NULL) return NULL;
    const zs_array *array = (const zs_array *)at;
    if (index < 0 || (uint32_t)index >= array->count) {
        PyErr_SetString(PyExc_IndexError, "index out of range (the array changed)");
        return NULL;
    }
    return (char *)array->data + (size_t)index * value->kind->entry_size;
}

static Py_ssize_t array_length(PyObject *self) {
    zpyv_value *value;
    char *at = container_of(self, ZPYV_ARRAY, &value);
    return at == NULL ? -1 : (Py_ssize_t)((zs_array *)at)->count;
}

/* arr[i]: a scalar's value, or the element's view. */
static PyObject *array_item(zpyv_value *value, Py_ssize_t position) {
    zpyv_kind *element = value->kind->element;
    if (element->code == ZPYV_SCALAR) {
        const zs_array *array = (const zs_array *)value->address;
        return zpy_scalar_load((zpy_scalar_kind)element->scalar,
                               (const char *)array->data +
                                   (size_t)position * value->kind->entry_size);
    }
    return zpyv_read(value->runtime, element, (PyObject *)value, position, value->owner,
                     array_locator);
}

static PyObject *array_subscript(PyObject *self, PyObject *index) {
    zpyv_value *value;
    char *at = container_of(self, ZPYV_ARRAY, &value);
    if (at == NULL) return NULL;
    if (PySlice_Check(index)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(index, &start, &stop, &step) < 0) return NULL;
        PyObject *list = PyList_New(0);
        if (list == NULL) return NULL;
        /* The bounds' __index__, or the collector run by the list's
           allocation, may have grown, disposed or collected the array: its
           address again, as it is now. */
        if ((at = zpyv_live(value)) == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        Py_ssize_t count = PySlice_AdjustIndices(((zs_array *)at)->count, &start, &stop, step);
        for (Py_ssize_t i = 0, p = start; list != NULL && i < count; i++, p += step) {
            /* Each element from the array as it is now. */
            if (zpyv_live(value) == NULL || (uint32_t)p >= ((zs_array *)value->address)->count) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_RuntimeError, "the array changed size during slicing");
                Py_CLEAR(list);
                break;
            }
            PyObject *item = array_item(value, p);
            if (item == NULL || PyList_Append(list, item) < 0) Py_CLEAR(list);
            Py_XDECREF(item);
        }
        return list;
    }
    int error;
    Py_ssize_t position = position_of(index, ((zs_array *)at)->count, &error);
    return error ? NULL : array_item(value, position);
}

/* Insert staged elements at `position` (clamped to the array as it is now):
 * phase 2 and 3. All or nothing. Steals nothing: the caller releases. */
static int array_insert_staged(zpyv_value *value, Py_ssize_t position, int from_end,
                               const zpyv_staged *items, uint32_t count) {
    /* `items`: `count` staged elements, or (count 0) a staged array (ITEMS or
       PACKED) whose elements are inserted. */
    const zpyv_staged *whole = count == 0 ? items : NULL;
    if (whole != NULL) count = whole->count;
    zpy_runtime_core *rt = value->runtime;
    if (value->address == NULL) return zpyv_raise_expired(value), -1;
    if (rt->native == NULL || rt->closing)
        return PyErr_SetString(rt->state->expired_exception, "the runtime has been closed"), -1;
    zs_array *array = (zs_array *)value->address;
    const zs_type *type = type_of(value);
    if (type == NULL) return -1;
    Py_ssize_t length = array->count;
    if (from_end || position > length) position = length;
    if (position < 0) position = position + length < 0 ? 0 : position + length;
    if (zpyv_packable(value->kind) &&
        (whole != NULL ? whole->form == ZPYV_PACKED : count == 1 && items[0].form == ZPYV_BITS)) {
        /* Elements that own nothing (numbers, names, references) go in as
           their staged bytes, in one native call that checks references
           first: no zeroed slots to fill and undo, one lock. */
        assert(whole != NULL || value->kind->entry_size <= sizeof items[0].u.bits);
        const void *elements = whole != NULL ? whole->u.units : (const void *)items[0].u.bits;
        zs_status packed = zs_array_insert_packed(rt->native, value->owner, type, array,
                                                  (uint32_t)position, elements, count);
        if (packed != ZS_OK) return refused(value, packed), -1;
        structure_changed(value);
        return 0;
    }
    zs_status status = zs_array_insert(rt->native, value->owner, type, array, (uint32_t)position,
                                       NULL, count);
    if (status == ZS_OK) {
        for (uint32_t i = 0; status == ZS_OK && i < count; i++) {
            char *slot = (char *)array->data + ((size_t)position + i) * value->kind->entry_size;
            zpyv_staged scratch;
            zpyv_initialize(value->kind->element, slot);
            status = zpyv_emit(rt, value->kind->element,
                               whole ? zpyv_element_at(value->kind, whole, i, &scratch) : &items[i],
                               value->owner, slot);
        }
        if (status != ZS_OK) /* undo: the array as it was */
            zs_array_remove(rt->native, value->owner, type, array, (uint32_t)position, count);
        structure_changed(value);
    }
    if (status != ZS_OK) return refused(value, status), -1;
    return 0;
}

/* Stage one element (phase 1). */
static int stage_element(zpyv_value *value, PyObject *item, zpyv_staged *out) {
    return zpyv_stage_labelled(value->runtime, value->kind->element, item, out, "element");
}

/* append(value): add one element at the end. */
static PyObject *array_append(PyObject *self, PyObject *item) {
    zpyv_value *value;
    if (container_of(self, ZPYV_ARRAY, &value) == NULL) return NULL;
    zpyv_staged staged = {0};
    if (stage_element(value, item, &staged) < 0) return NULL;
    int result = array_insert_staged(value, 0, 1, &staged, 1);
    zpyv_release(value->kind->element, &staged);
    return result < 0 ? NULL : Py_NewRef(Py_None);
}

/* insert(index, value): before `index`, clamped like list.insert. */
static PyObject *array_insert(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    zpyv_value *value;
    if (container_of(self, ZPYV_ARRAY, &value) == NULL) return NULL;
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "insert expected 2 arguments, got %zd", nargs);
    Py_ssize_t position = PyNumber_AsSsize_t(args[0], PyExc_OverflowError);
    if (position == -1 && PyErr_Occurred()) return NULL;
    zpyv_staged staged = {0};
    if (stage_element(value, args[1], &staged) < 0) return NULL;
    int result = array_insert_staged(value, position, 0, &staged, 1);
    zpyv_release(value->kind->element, &staged);
    return result < 0 ? NULL : Py_NewRef(Py_None);
}

/* extend(iterable): every element at the end, all or nothing. */
static PyObject *array_extend(PyObject *self, PyObject *iterable) {
    zpyv_value *value;
    if (container_of(self, ZPYV_ARRAY, &value) == NULL) return NULL;
    zpyv_staged staged = {0};
    if (zpyv_stage(value->runtime, value->kind, iterable, &staged, value->kind->what) < 0)
        return NULL;
    int result = staged.count == 0 ? 0 : array_insert_staged(value, 0, 1, &staged, 0);
    zpyv_release(value->kind, &staged);
    return result < 0 ? NULL : Py_NewRef(Py_None);
}

/* Remove `count` elements at `position` of a live array (phase 2). */
static int array_remove(zpyv_value *value, uint32_t position, uint32_t count) {
    zpy_runtime_core *rt = value->runtime;
    const zs_type *type = type_of(value);
    if (type == NULL) return -1;
    zs_status status = zs_array_remove(rt->native, value->owner, type, (zs_array *)value->address,
                                       position, count);
    if (status != ZS_OK) return refused(value, status), -1;
    structure_changed(value);
    return 0;
}

/* pop(index=-1): remove and return an element (a plain copy: its slot goes). */
static PyObject *array_pop(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    zpyv_value *value;
    char *at = container_of(self, ZPYV_ARRAY, &value);
    if (at == NULL) return NULL;
    if (nargs > 1)
        return PyErr_Format(PyExc_TypeError, "pop expected at most 1 argument, got %zd", nargs);
    PyObject *index = nargs ? args[0] : NULL;
    Py_ssize_t wanted = -1;
    if (index != NULL) {
        if (PyBool_Check(index) || !PyLong_Check(index))
            return PyErr_Format(PyExc_TypeError, "indices must be integers, not %s",
                                Py_TYPE(index)->tp_name);
        wanted = PyLong_AsSsize_t(index);
        if (wanted == -1 && PyErr_Occurred()) return NULL;
    }
    zs_array *array = (zs_array *)at;
    if (array->count == 0)
        return PyErr_Format(PyExc_IndexError, "pop from an empty %U", value->kind->what);
    Py_ssize_t position = wanted < 0 ? wanted + (Py_ssize_t)array->count : wanted;
    if (position < 0 || position >= (Py_ssize_t)array->count)
        return PyErr_Format(PyExc_IndexError, "pop index out of range");
    zpyv_staged captured = {0};
    zpyv_kind *element = value->kind->element;
    if (zpyv_capture(value->runtime, element,
                     (char *)array->data + (size_t)position * value->kind->entry_size,
                     &captured) < 0)
        return PyErr_NoMemory();
    int removed = array_remove(value, (uint32_t)position, 1);
    PyObject *result = removed < 0 ? NULL : zpyv_build(value->runtime, element, &captured);
    zpyv_release(element, &captured);
    return result;
}

/* clear(): remove every element. */
static PyObject *array_clear(PyObject *self, PyObject *unused) {
    (void)unused;
    zpyv_value *value;
    char *at = container_of(self, ZPYV_ARRAY, &value);
    if (at == NULL || array_remove(value, 0, ((zs_array *)at)->count) < 0) return NULL;
    Py_RETURN_NONE;
}

/* arr[i] = v, arr[a:b] = values, del arr[i], del arr[a:b]. */
static int array_ass_subscript(PyObject *self, PyObject *index, PyObject *item) {
    zpyv_value *value;
    char *at = container_of(self, ZPYV_ARRAY, &value);
    if (at == NULL) return -1;
    zpy_runtime_core *rt = value->runtime;
    if (PySlice_Check(index)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(index, &start, &stop, &step) < 0) return -1;
        zpyv_staged staged = {0};
        if (item != NULL && zpyv_stage(rt, value->kind, item, &staged, value->kind->what) < 0)
            return -1;
        /* The array as it is now. */
        int result = -1;
        if (zpyv_live(value) != NULL) {
            zs_array *array = (zs_array *)value->address;
            Py_ssize_t count = PySlice_AdjustIndices(array->count, &start, &stop, step);
            if (step == 1) {
                /* Insert, then remove: a refused insertion is undone, the old elements kept. */
                result = 0;
                if (item != NULL && staged.count > 0)
                    result = array_insert_staged(value, start + count, 0, &staged, 0);
                if (result == 0) result = array_remove(value, (uint32_t)start, (uint32_t)count);
            } else if (item != NULL && (Py_ssize_t)staged.count != count) {
                PyErr_Format(PyExc_ValueError,
                             "attempt to assign sequence of size %u to "
                             "extended slice of size %zd",
                             staged.count, count);
            } else if (item != NULL) {
                /* References first: a refusal after one write would keep that write. */
                zs_status status = zpyv_references_valid(rt, value->kind, &staged);
                for (Py_ssize_t i = 0; status == ZS_OK && i < count; i++) {
                    Py_ssize_t p = start + i * step;
                    zpyv_staged scratch;
                    status = zpyv_emit(rt, value->kind->element,
                                       zpyv_element_at(value->kind, &staged, (uint32_t)i, &scratch),
                                       value->owner,
                                       (char *)array->data + (size_t)p * value->kind->entry_size);
                    contents_changed(value, p);
                }
                result = status == ZS_OK ? 0 : (refused(value, status), -1);
            } else {
                /* Extended slice deletion: the highest position first, so
                   the positions left to remove do not move. */
                result = 0;
                for (Py_ssize_t k = 0; result == 0 && k < count; k++) {
                    Py_ssize_t i = step > 0 ? count - 1 - k : k;
                    result = array_remove(value, (uint32_t)(start + i * step), 1);
                }
            }
        }
        if (item != NULL) zpyv_release(value->kind, &staged);
        return result;
    }
    if (item == NULL) {
        int error;
        Py_ssize_t position = position_of(index, ((zs_array *)at)->count, &error);
        return error ? -1 : array_remove(value, (uint32_t)position, 1);
    }
    if (PyBool_Check(index) || !PyLong_Check(index)) {
        PyErr_Format(PyExc_TypeError, "indices must be integers, not %s", Py_TYPE(index)->tp_name);
        return -1;
    }
    zpyv_staged staged = {0};
    if (stage_element(value, item, &staged) < 0) return -1;
    /* The index against the array as it is after the conversion. */
    int result = -1;
    if (zpyv_live(value) != NULL) {
        zs_array *array = (zs_array *)value->address;
        int error;
        Py_ssize_t position = position_of(index, array->count, &error);
        if (!error) {
            zs_status status = zpyv_emit(rt, value->kind->element, &staged, value->owner,
                                         (char *)array->data +
                                             (size_t)position * value->kind->entry_size);
            if (status == ZS_OK) {
                contents_changed(value, position);
                result = 0;
            } else {
                refused(value, status);
            }
        }
    }
    zpyv_release(value->kind->element, &staged);
    return result;
}

/* A plain number as `in` compares it with scalar elements natively: an
 * exact int, bool or float (a subclass's __eq__ could say anything, so
 * those take the generic search). */
typedef struct number_probe {
    enum { PROBE_NONE, PROBE_INT, PROBE_FLOAT } form;
    int negative; /* PROBE_INT: value < 0 (then in `signed_value`) */
    int64_t signed_value;
    uint64_t unsigned_value; /* PROBE_INT, not negative */
    double real;             /* PROBE_FLOAT */
} number_probe;

/* The probe, or PROBE_NONE when the generic search must decide. */
static number_probe number_of(PyObject *probe) {
    number_probe number = {PROBE_NONE, 0, 0, 0, 0.0};
    if (PyFloat_CheckExact(probe)) {
        number.form = PROBE_FLOAT;
        number.real = PyFloat_AS_DOUBLE(probe);
    } else if (PyLong_CheckExact(probe) || PyBool_Check(probe)) {
        int overflow = 0;
        long long value = PyLong_AsLongLongAndOverflow(probe, &overflow);
        if (overflow == 0 && value < 0) {
            number.form = PROBE_INT;
            number.negative = 1;
            number.signed_value = value;
        } else if (overflow == 0) {
            number.form = PROBE_INT;
            number.unsigned_value = (uint64_t)value;
        } else if (overflow > 0) {
            unsigned long long big = PyLong_AsUnsignedLongLong(probe);
            if (big == (unsigned long long)-1 && PyErr_Occurred())
                PyErr_Clear(); /* beyond 64 bits: equal to no integer element */
            else {
                number.form = PROBE_INT;
                number.unsigned_value = big;
            }
        }
        /* overflow < 0 (below INT64_MIN), or beyond UINT64_MAX: PROBE_NONE,
           the generic search (rare). */
    }
    return number;
}

/* The probe as an integer (sign and magnitude), when it is one: 0 for a
 * float that is not integral (or NaN, or infinite): equal to no integer. */
static int probe_integer(const number_probe *number, int *negative, int64_t *low, uint64_t *high) {
    if (number->form == PROBE_INT) {
        *negative = number->negative;
        *low = number->signed_value;
        *high = number->unsigned_value;
        return 1;
    }
    double real = number->real;
    if (real != real) return 0;
    if (real < 0.0) {
        if (real < -9223372036854775808.0 || (double)(int64_t)real != real) return 0;
        *negative = 1;
        *low = (int64_t)real;
        return 1;
    }
    if (real >= 18446744073709551616.0 || (double)(uint64_t)real != real) return 0;
    *negative = 0;
    *high = (uint64_t)real; /* -0.0 lands here, as 0 */
    return 1;
}

/* Search `count` scalar elements for the probe, as Python compares an int
 * or float with the elements (exactly, no rounding): 1 or 0; -1 when only
 * Python can tell (float elements against an int beyond 2**53). */
static int scalar_search(zpy_scalar_kind kind, const char *data, uint32_t count,
                         const number_probe *number) {
#define SEARCH(ctype, wanted)                                                                      \
    for (uint32_t i = 0; i < count; i++) {                                                         \
        ctype element;                                                                             \
        memcpy(&element, data + (size_t)i * sizeof element, sizeof element);                       \
        if (element == (wanted)) return 1;                                                         \
    }                                                                                              \
    return 0;
    if (kind == ZPY_SCALAR_F32 || kind == ZPY_SCALAR_F64) {
        double wanted = number->real;
        if (number->form == PROBE_INT) {
            const uint64_t exact = (uint64_t)1 << 53; /* every int up to 2**53 converts exactly */
            if (number->negative ? number->signed_value < -(int64_t)exact
                                 : number->unsigned_value > exact)
                return -1;
            wanted = number->negative ? (double)number->signed_value
                                      : (double)number->unsigned_value;
        }
        if (kind == ZPY_SCALAR_F64) {
            SEARCH(double, wanted)
        }
        SEARCH(float, wanted) /* the element widened to double: exact */
    }
    int negative = 0;
    int64_t low = 0;
    uint64_t high = 0;
    if (!probe_integer(number, &negative, &low, &high)) return 0;
    switch (kind) {
    case ZPY_SCALAR_BOOL:
        if (negative || high > 1) return 0;
        SEARCH(_Bool, (_Bool)high)
    case ZPY_SCALAR_I8:
        if (negative ? low < INT8_MIN : high > INT8_MAX) return 0;
        SEARCH(int8_t, negative ? (int8_t)low : (int8_t)high)
    case ZPY_SCALAR_I16:
        if (negative ? low < INT16_MIN : high > INT16_MAX) return 0;
        SEARCH(int16_t, negative ? (int16_t)low : (int16_t)high)
    case ZPY_SCALAR_I32:
        if (negative ? low < INT32_MIN : high > INT32_MAX) return 0;
        SEARCH(int32_t, negative ? (int32_t)low : (int32_t)high)
    case ZPY_SCALAR_I64:
        if (!negative && high > INT64_MAX) return 0;
        SEARCH(int64_t, negative ? low : (int64_t)high)
    case ZPY_SCALAR_U8:
        if (negative || high > UINT8_MAX) return 0;
        SEARCH(uint8_t, (uint8_t)high)
    case ZPY_SCALAR_U16:
        if (negative || high > UINT16_MAX) return 0;
        SEARCH(uint16_t, (uint16_t)high)
    case ZPY_SCALAR_U32:
        if (negative || high > UINT32_MAX) return 0;
        SEARCH(uint32_t, (uint32_t)high)
    default:
        if (negative) return 0;
        SEARCH(uint64_t, high)
    }
#undef SEARCH
}

/* The handle `in` looks for among object references, when the answer is
 * identity: None, or a conjugate whose class keeps object's ==. Returns 1
 * with *wanted set (ZS_NULL_REF for None; an expired conjugate's stale
 * handle matches no element), or 0 when the generic search must decide. */
static int reference_probe(zpy_core_state *state, PyObject *probe, zs_ref *wanted) {
    if (probe == Py_None) {
        *wanted = ZS_NULL_REF;
        return 1;
    }
    if (!zpy_is_conjugate(state, probe) ||
        Py_TYPE(probe)->tp_richcompare != PyBaseObject_Type.tp_richcompare)
        return 0;
    zpy_conjugate *conjugate = (zpy_conjugate *)probe;
    *wanted = ZPY_CONJUGATE_IS_LIVE(conjugate) ? conjugate->handle : ~(zs_ref)0;
    return 1;
}

/* Whether `in` over these object references needs Python after no handle
 * matched: an element whose conjugate is not made yet, or has an == of its
 * own, might still equal the probe. */
static int references_need_python(zpy_runtime_core *rt, const char *data, uint32_t count) {
    for (uint32_t i = 0; i < count; i++) {
        zs_ref handle;
        memcpy(&handle, data + (size_t)i * sizeof handle, sizeof handle);
        if (handle == ZS_NULL_REF) continue;
        zpy_conjugate *known = zpy_table_get(rt, handle);
        if (known == NULL || Py_TYPE(known)->tp_richcompare != PyBaseObject_Type.tp_richcompare)
            return 1;
    }
    return 0;
}

/* `value in arr`. Plain numbers against scalar elements, and None or an
 * object against references, are decided natively where that gives
 * Python's answer (an element whose conjugate keeps object's == equals the
 * probe only if it is the probe); otherwise element by element in Python,
 * each read as the array is then (a comparison may run Python code that
 * changes it). */
static int array_contains(PyObject *self, PyObject *probe) {
    zpyv_value *value;
    char *at = container_of(self, ZPYV_ARRAY, &value);
    if (at == NULL) return -1;
    zpy_runtime_core *rt = value->runtime;
    zpyv_kind *element = value->kind->element;
    const zs_array *array = (const zs_array *)at;
    if (element->code == ZPYV_SCALAR) {
        number_probe number = number_of(probe);
        int found = number.form == PROBE_NONE ? -1
                                              : scalar_search((zpy_scalar_kind)element->scalar,
                                                              array->data, array->count, &number);
        if (found >= 0) return found;
    } else if (element->code == ZPYV_OBJECT) {
        zs_ref wanted;
        if (reference_probe(rt->state, probe, &wanted)) {
            for (uint32_t i = 0; i < array->count; i++) {
                zs_ref handle;
                memcpy(&handle, (const char *)array->data + (size_t)i * sizeof handle,
                       sizeof handle);
                if (handle == wanted) return 1;
            }
            if (!references_need_python(rt, array->data, array->count)) return 0;
        }
    }
    PyObject *plain = probe_of(rt->state, probe);
    if (plain == NULL) return -1;
    int found = 0;
    for (uint32_t i = 0; found == 0; i++) {
        if (zpyv_live(value) == NULL) {
            found = -1;
            break;
        }
        array = (const zs_array *)value->address;
        if (i >= array->count) break;
        /* Python code may run from here to the next element. */
        PyObject *item = zpyv_copy_out(
            rt, element, (const char *)array->data + (size_t)i * value->kind->entry_size);
        found = item == NULL ? -1 : plain_equal(item, plain);
        Py_XDECREF(item);
    }
    Py_DECREF(plain);
    return found;
}

/* An iterator over an array: each element read from the array as it is
 * then; a change of size or storage raises RuntimeError, like a dict's. */
typedef struct zpyv_iterator {
    PyObject_HEAD zpyv_value *array; /* strong */
    uint32_t next, count;
    void *data;
} zpyv_iterator;

static PyObject *iterator_next(PyObject *self) {
    zpyv_iterator *it = (zpyv_iterator *)self;
    zpyv_value *value = it->array;
    if (value == NULL) return NULL;
    if (zpyv_live(value) == NULL) return NULL;
    zs_array *array = (zs_array *)value->address;
    if (array->count != it->count || array->data != it->data) {
        PyErr_Format(PyExc_RuntimeError, "%U changed size during iteration", value->kind->what);
        Py_CLEAR(it->array); /* last: it may be the last reference to the array */
        return NULL;
    }
    if (it->next >= it->count) {
        Py_CLEAR(it->array);
        return NULL;
    }
    return array_item(value, it->next++);
}

static void iterator_dealloc(PyObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    Py_CLEAR(((zpyv_iterator *)self)->array);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyType_Slot iterator_slots[] = {
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, iterator_next},
    {Py_tp_dealloc, iterator_dealloc},
    {0, NULL},
};

static PyType_Spec iterator_spec = {
    .name = "zsharp_py._core.ArrayIterator",
    .basicsize = sizeof(zpyv_iterator),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = iterator_slots,
};

static PyObject *array_iter(PyObject *self) {
    zpyv_value *value;
    char *at = container_of(self, ZPYV_ARRAY, &value);
    if (at == NULL) return NULL;
    PyTypeObject *type = value->runtime->state->iterator_type;
    zpyv_iterator *it = (zpyv_iterator *)type->tp_alloc(type, 0);
    if (it == NULL) return NULL;
    it->array = (zpyv_value *)Py_NewRef(self);
    it->count = ((zs_array *)at)->count;
    it->data = ((zs_array *)at)->data;
    return (PyObject *)it;
}

/* `_data_address`: where the elements are stored now (a testing aid: a test
 * can see that the storage moved). */
static PyObject *array_data_address(PyObject *self, void *closure) {
    (void)closure;
    zpyv_value *value;
    char *at = container_of(self, ZPYV_ARRAY, &value);
    return at == NULL ? NULL : PyLong_FromVoidPtr(((zs_array *)at)->data);
}

static PyGetSetDef array_getset[] = {
    {"_data_address", array_data_address, NULL, "Where the elements are stored now.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* arr.to_python(): a list. An array of scalars is read straight into the
 * list once the list exists (making it may run a collection, and so any
 * Python code: the array is checked again after), since making an int or
 * a float runs none; other arrays take the general copy (captured, then
 * built: zpyv_copy_out). */
static PyObject *array_to_python(PyObject *self, PyObject *unused) {
    (void)unused;
    zpyv_value *value;
    char *at = container_of(self, ZPYV_ARRAY, &value);
    if (at == NULL) return NULL;
    zpyv_kind *element = value->kind->element;
    if (element->code != ZPYV_SCALAR) return zpyv_copy_out(value->runtime, value->kind, at);
    uint32_t count = ((const zs_array *)at)->count;
    PyObject *list = PyList_New((Py_ssize_t)count);
    if (list == NULL) return NULL;
    at = zpyv_live(value);
    if (at == NULL || ((const zs_array *)at)->count != count) {
        Py_DECREF(list); /* empty slots: nothing to release */
        return at == NULL ? NULL : zpyv_copy_out(value->runtime, value->kind, at);
    }
    /* No Python code from here. */
    const char *data = ((const zs_array *)at)->data;
    size_t step = value->kind->entry_size;
    zpy_scalar_kind scalar = (zpy_scalar_kind)element->scalar;
    PyObject **items = ((PyListObject *)list)->ob_item;
    uint32_t made = 0;
    if (scalar == ZPY_SCALAR_F64 && step == sizeof(double)) { /* the common case: one tight loop */
        for (; made < count; made++) {
            double real;
            memcpy(&real, data + (size_t)made * sizeof real, sizeof real);
            if ((items[made] = PyFloat_FromDouble(real)) == NULL) break;
        }
    } else {
        for (; made < count; made++)
            if ((items[made] = zpy_scalar_load(scalar, data + (size_t)made * step)) == NULL) break;
    }
    if (made < count) {
        Py_DECREF(list); /* ints and floats: their release runs nothing */
        return NULL;
    }
    return list;
}

static PyMethodDef array_methods[] = {
    {"append", array_append, METH_O, "Add one element at the end."},
    {"insert", (PyCFunction)(void (*)(void))array_insert, METH_FASTCALL,
     "Insert before index (clamped like list.insert)."},
    {"extend", array_extend, METH_O,
     "Add every element of an iterable at the end (all or nothing)."},
    {"pop", (PyCFunction)(void (*)(void))array_pop, METH_FASTCALL,
     "Remove and return an element (a plain copy: the slot goes away)."},
    {"clear", array_clear, METH_NOARGS, "Remove every element."},
    {"to_python", array_to_python, METH_NOARGS, "A plain list copy of the elements."},
    {NULL, NULL, 0, NULL},
};

/* arr += iterable: extend, as a list does (all or nothing), then arr. */
static PyObject *array_inplace_extend(PyObject *self, PyObject *iterable) {
    PyObject *done = array_extend(self, iterable);
    if (done == NULL) return NULL;
    Py_DECREF(done);
    return Py_NewRef(self);
}

static PyType_Slot array_slots[] = {
    {Py_tp_doc, "The C base of zs.Array: a native dynamic array with the list protocol."},
    {Py_sq_length, array_length},
    {Py_mp_length, array_length},
    {Py_mp_subscript, array_subscript},
    {Py_mp_ass_subscript, array_ass_subscript},
    {Py_sq_contains, array_contains},
    {Py_sq_inplace_concat, array_inplace_extend},
    {Py_tp_iter, array_iter},
    {Py_tp_methods, array_methods},
    {Py_tp_getset, array_getset},
    {0, NULL},
};

/* =========================================================================
 * Set and Map
 * ========================================================================= */

/* A staged key as native code reads it (phase 2). Keys that own nothing
 * (scalars, names, plain data: staged as their native bytes) and strings
 * (a zs_string over the staged code units) are read where they are staged:
 * zs_hash_find, _add and _remove only read a key, and zs_hash_add copies a
 * new one natively, so no native temporary is built, cleared and freed (two
 * runtime locks, an allocation). Any other key is built into a temporary. */
typedef struct hash_key {
    const char *at;  /* the key, or NULL when it could not be built */
    char *temporary; /* a native value built for this lookup (PyMem), or NULL */
    zs_string text;  /* a string key: borrows the staged units */
} hash_key;

/* Make `out` the native form of a staged key: its status (a refusal, or
 * ZS_E_NOMEM). No Python code. Free with hash_key_free. */
static zs_status native_key(zpyv_value *value, const zpyv_staged *staged, hash_key *out) {
    zpyv_kind *key_kind = value->kind->element;
    zpy_runtime_core *rt = value->runtime;
    out->at = NULL;
    out->temporary = NULL;
    if (rt->native == NULL || rt->closing) return ZS_E_STALE; /* as zpyv_emit refuses */
    uint8_t code = key_kind->code;
    if ((code == ZPYV_SCALAR || code == ZPYV_NAME || code == ZPYV_PLAIN) &&
        staged->form == ZPYV_BITS) {
        assert(key_kind->size <= sizeof staged->u.bits);
        out->at = (const char *)staged->u.bits;
        return ZS_OK;
    }
    if (code == ZPYV_STRING && staged->form == ZPYV_UNITS) {
        /* Read only: capacity equals length, and nothing frees `data`. */
        out->text.data = staged->u.units;
        out->text.length = out->text.capacity = staged->count;
        out->at = (const char *)&out->text;
        return ZS_OK;
    }
    char *key = PyMem_Calloc(1, key_kind->size ? key_kind->size : 1);
    if (key == NULL) return ZS_E_NOMEM;
    out->temporary = key;
    zs_status status = zpyv_emit(rt, key_kind, staged, ZS_NULL_REF, key);
    if (status == ZS_OK) out->at = key;
    return status;
}

/* Free a native key (its temporary, if one was built). */
static void hash_key_free(zpyv_value *value, hash_key *key) {
    if (key->temporary == NULL) return;
    zpy_runtime_core *rt = value->runtime;
    const zs_type *type = zpyv_native_type(rt, value->kind->element);
    if (type != NULL && rt->native != NULL)
        zs_value_clear(rt->native, ZS_NULL_REF, type, key->temporary);
    PyMem_Free(key->temporary);
    key->temporary = NULL;
}

/* The entry index of a staged key in a live hash (-1: absent), phase 2. */
static int64_t hash_find(zpyv_value *value, const zpyv_staged *staged, zs_status *status) {
    hash_key key;
    *status = native_key(value, staged, &key);
    int64_t index = -1;
    if (*status == ZS_OK) {
        const zs_type *type = type_of(value);
        *status = type == NULL ? ZS_E_INVALID
                               : zs_hash_find(value->runtime->native, type,
                                              (zs_hash *)value->address, key.at, &index);
    }
    hash_key_free(value, &key);
    return index;
}

/* Stage a key; a value that cannot be a key (wrong type, out of range) is
 * 0 (absent) for lookups rather than an error. 1 staged, 0 not a key, -1. */
static int stage_lookup_key(zpyv_value *value, PyObject *key, zpyv_staged *out) {
    if (zpyv_stage_labelled(value->runtime, value->kind->element, key, out, "key") == 0) return 1;
    if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError) ||
        PyErr_ExceptionMatches(PyExc_OverflowError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

/* Add a staged key (and, for a map, write a staged value) to a live hash:
 * phase 2. A new map entry whose value cannot be written is removed again. */
static int hash_add(zpyv_value *value, const zpyv_staged *key_staged, const zpyv_staged *item) {
    zpy_runtime_core *rt = value->runtime;
    if (zpyv_live(value) == NULL) return -1;
    if (rt->native == NULL || rt->closing)
        return PyErr_SetString(rt->state->expired_exception, "the runtime has been closed"), -1;
    const zs_type *type = type_of(value);
    if (type == NULL) return -1;
    hash_key key;
    zs_status status = native_key(value, key_staged, &key);
    uint32_t index = 0;
    int added = 0;
    zs_hash *hash = (zs_hash *)value->address;
    if (status == ZS_OK)
        status = zs_hash_add(rt->native, value->owner, type, hash, key.at, &index, &added);
    if (added) structure_changed(value); /* entries may have moved */
    if (status == ZS_OK && item != NULL) {
        char *slot = (char *)hash->entries.data + (size_t)index * value->kind->entry_size +
                     value->kind->value_offset;
        if (added) zpyv_initialize(value->kind->value, slot);
        status = zpyv_emit(rt, value->kind->value, item, value->owner, slot);
        if (status == ZS_OK && !added) contents_changed(value, ~(Py_ssize_t)index);
        if (status != ZS_OK && added)
            zs_hash_remove(rt->native, value->owner, type, hash, key.at, NULL);
    }
    hash_key_free(value, &key);
    if (status != ZS_OK) return refused(value, status), -1;
    return 0;
}

/* Remove a staged key from a live hash (phase 2): 1 removed, 0 absent, -1. */
static int hash_remove(zpyv_value *value, const zpyv_staged *key_staged) {
    zpy_runtime_core *rt = value->runtime;
    if (zpyv_live(value) == NULL) return -1;
    const zs_type *type = type_of(value);
    if (type == NULL) return -1;
    hash_key key;
    zs_status status = native_key(value, key_staged, &key);
    int removed = 0;
    if (status == ZS_OK)
        status = zs_hash_remove(rt->native, value->owner, type, (zs_hash *)value->address, key.at,
                                &removed);
    if (removed) structure_changed(value);
    hash_key_free(value, &key);
    if (status != ZS_OK) return refused(value, status), -1;
    return removed;
}

/* Add every staged element (a set) or key and value (a map) of a staged
 * set or map to a live hash: phase 2. Every object reference is checked
 * first, so that one whose object died while later elements were staged
 * is refused before anything is added. */
static int hash_add_all(zpyv_value *value, const zpyv_staged *staged) {
    if (staged->count == 0) return 0;
    zpy_runtime_core *rt = value->runtime;
    if (zpyv_live(value) == NULL) return -1;
    zs_status status = zpyv_references_valid(rt, value->kind, staged);
    if (status != ZS_OK) return refused(value, status), -1;
    uint32_t step = value->kind->code == ZPYV_MAP ? 2 : 1;
    int result = 0;
    for (uint32_t i = 0; result == 0 && i < staged->count; i++)
        result = hash_add(value, &staged->u.items[step * i],
                          step == 2 ? &staged->u.items[2 * i + 1] : NULL);
    return result;
}

/* The entry index of `key` in a hash: -1 absent (or not a key), -2 error. */
static int64_t hash_lookup(zpyv_value *value, PyObject *key) {
    zpyv_staged staged = {0};
    int staged_ok = stage_lookup_key(value, key, &staged);
    if (staged_ok <= 0) return staged_ok < 0 ? -2 : -1;
    int64_t index = -2;
    if (zpyv_live(value) != NULL) {
        zs_status status;
        index = hash_find(value, &staged, &status);
        if (status != ZS_OK) {
            refused(value, status);
            index = -2;
        }
    }
    zpyv_release(value->kind->element, &staged);
    return index;
}

static Py_ssize_t hash_length(PyObject *self) {
    zpyv_value *value = (zpyv_value *)self;
    uint8_t code = value->kind->code;
    if (code != ZPYV_SET && code != ZPYV_MAP) {
        PyErr_Format(PyExc_TypeError, "%U is not a set or map", value->kind->what);
        return -1;
    }
    char *at = zpyv_live(value);
    return at == NULL ? -1 : (Py_ssize_t)((zs_hash *)at)->entries.count;
}

static int hash_contains(PyObject *self, PyObject *key) {
    if (hash_length(self) < 0) return -1;
    int64_t index = hash_lookup((zpyv_value *)self, key);
    return index == -2 ? -1 : index >= 0;
}

/* The keys, copied out (a list). */
static PyObject *hash_keys(PyObject *self, PyObject *unused) {
    (void)unused;
    if (hash_length(self) < 0) return NULL;
    zpyv_value *value = (zpyv_value *)self;
    zs_hash *hash = (zs_hash *)value->address;
    uint32_t count = hash->entries.count;
    zpyv_staged *keys = PyMem_Calloc(count ? count : 1, sizeof *keys);
    if (keys == NULL) return PyErr_NoMemory();
    int failed = 0;
    for (uint32_t i = 0; i < count && !failed; i++)
        failed = zpyv_capture(value->runtime, value->kind->element,
                              (char *)hash->entries.data + (size_t)i * value->kind->entry_size,
                              &keys[i]) < 0;
    /* Private copies from here on: building them may run Python code. */
    PyObject *list = failed ? PyErr_NoMemory() : PyList_New(count);
    for (uint32_t i = 0; list != NULL && i < count; i++) {
        PyObject *key = zpyv_build(value->runtime, value->kind->element, &keys[i]);
        if (key == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, key);
    }
    for (uint32_t i = 0; i < count; i++) zpyv_release(value->kind->element, &keys[i]);
    PyMem_Free(keys);
    return list;
}

static PyObject *hash_iter(PyObject *self) {
    PyObject *keys = hash_keys(self, NULL);
    if (keys == NULL) return NULL;
    PyObject *it = PyObject_GetIter(keys);
    Py_DECREF(keys);
    return it;
}

/* clear(): remove every entry. */
static PyObject *hash_clear(PyObject *self, PyObject *unused) {
    (void)unused;
    if (hash_length(self) < 0) return NULL;
    zpyv_value *value = (zpyv_value *)self;
    zpy_runtime_core *rt = value->runtime;
    const zs_type *type = type_of(value);
    if (type == NULL) return NULL;
    zs_status status = zs_value_clear(rt->native, value->owner, type, value->address);
    if (status != ZS_OK) return refused(value, status);
    structure_changed(value);
    Py_RETURN_NONE;
}

/* Set.add(value): add an element (no effect if an equal one is present). */
static PyObject *set_add(PyObject *self, PyObject *item) {
    zpyv_value *value;
    if (container_of(self, ZPYV_SET, &value) == NULL) return NULL;
    zpyv_staged staged = {0};
    if (stage_element(value, item, &staged) < 0) return NULL;
    int result = hash_add(value, &staged, NULL);
    zpyv_release(value->kind->element, &staged);
    return result < 0 ? NULL : Py_NewRef(Py_None);
}

/* Set._discard(value) -> whether it was there. */
static PyObject *set_discard(PyObject *self, PyObject *item) {
    zpyv_value *value;
    if (container_of(self, ZPYV_SET, &value) == NULL) return NULL;
    zpyv_staged staged = {0};
    int staged_ok = stage_lookup_key(value, item, &staged);
    if (staged_ok <= 0) return staged_ok < 0 ? NULL : Py_NewRef(Py_False);
    int removed = hash_remove(value, &staged);
    zpyv_release(value->kind->element, &staged);
    return removed < 0 ? NULL : PyBool_FromLong(removed);
}

/* Set.update(iterable): add every element (all staged first: a bad one
 * changes nothing). */
static PyObject *set_update(PyObject *self, PyObject *iterable) {
    zpyv_value *value;
    if (container_of(self, ZPYV_SET, &value) == NULL) return NULL;
    zpyv_staged staged = {0};
    if (zpyv_stage(value->runtime, value->kind, iterable, &staged, value->kind->what) < 0)
        return NULL;
    int result = hash_add_all(value, &staged);
    zpyv_release(value->kind, &staged);
    return result < 0 ? NULL : Py_NewRef(Py_None);
}

/* Set.pop(): remove and return an element (a plain copy). */
static PyObject *set_pop(PyObject *self, PyObject *unused) {
    (void)unused;
    zpyv_value *value;
    char *at = container_of(self, ZPYV_SET, &value);
    if (at == NULL) return NULL;
    zs_hash *hash = (zs_hash *)at;
    if (hash->entries.count == 0) return PyErr_Format(PyExc_KeyError, "pop from an empty set");
    zpyv_staged captured = {0};
    if (zpyv_capture(value->runtime, value->kind->element,
                     (char *)hash->entries.data +
                         (size_t)(hash->entries.count - 1) * value->kind->entry_size,
                     &captured) < 0)
        return PyErr_NoMemory();
    int removed = hash_remove(value, &captured);
    PyObject *result = removed < 0 ? NULL
                                   : zpyv_build(value->runtime, value->kind->element, &captured);
    zpyv_release(value->kind->element, &captured);
    return result;
}

static PyMethodDef set_methods[] = {
    {"add", set_add, METH_O, "Add an element (no effect if an equal one is present)."},
    {"_discard", set_discard, METH_O, "Remove an element if present: whether it was."},
    {"update", set_update, METH_O,
     "Add every element of an iterable (all checked first: a bad one leaves the set unchanged)."},
    {"pop", set_pop, METH_NOARGS, "Remove and return an arbitrary element (a plain copy)."},
    {"clear", hash_clear, METH_NOARGS, "Remove every element."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot set_slots[] = {
    {Py_tp_doc, "The C base of zs.Set: a native hash set."},
    {Py_sq_length, hash_length},
    {Py_sq_contains, hash_contains},
    {Py_tp_iter, hash_iter},
    {Py_tp_methods, set_methods},
    {0, NULL},
};

/* How many times values() and items() of a view-valued map are made again
 * when it changes structure meanwhile (Python code changing it every time). */
#define MAP_READ_ATTEMPTS 8

/* The value of a staged key's entry in a map as it is now (a zpyv_finder:
 * the key is found again natively, so a view never gets the entry another
 * key moved into; cached under ~index). */
static char *map_finder(PyObject *holder, const void *place, Py_ssize_t *key) {
    zpyv_value *value = (zpyv_value *)holder;
    if (zpyv_live(value) == NULL) return NULL;
    zpy_runtime_core *rt = value->runtime;
    if (rt->native == NULL || rt->closing)
        return PyErr_SetString(rt->state->expired_exception, "the runtime has been closed"), NULL;
    zs_status status;
    int64_t index = hash_find(value, place, &status);
    if (status == ZS_E_STALE || status == ZS_E_DYING)
        return NULL; /* a key of an object destroyed since: no entry holds it now */
    if (status != ZS_OK) return refused(value, status), NULL;
    if (index < 0) return NULL;
    *key = ~(Py_ssize_t)index;
    return (char *)((zs_hash *)value->address)->entries.data +
           (size_t)index * value->kind->entry_size + value->kind->value_offset;
}

/* The value of `key` (a plain value, or a view), `fallback` when it is
 * absent (a new reference), or KeyError when there is none. */
static PyObject *map_lookup(zpyv_value *value, PyObject *key, PyObject *fallback) {
    zpyv_staged staged = {0};
    int staged_ok = stage_lookup_key(value, key, &staged);
    if (staged_ok < 0) return NULL;
    PyObject *result = NULL;
    zpyv_kind *item_kind = value->kind->value;
    if (staged_ok > 0 && item_kind->code == ZPYV_SCALAR) {
        /* A number: loaded where it is found (zpy_scalar_load copies it out
           before it makes the Python number). */
        Py_ssize_t cache_key;
        const char *at = map_finder((PyObject *)value, &staged, &cache_key);
        if (at != NULL) result = zpy_scalar_load((zpy_scalar_kind)item_kind->scalar, at);
    } else if (staged_ok > 0) {
        result = zpyv_read_at(value->runtime, item_kind, (PyObject *)value, value->owner,
                              map_finder, &staged);
    }
    zpyv_release(value->kind->element, &staged);
    if (result != NULL || PyErr_Occurred()) return result;
    if (fallback != NULL) return Py_NewRef(fallback);
    PyErr_SetObject(PyExc_KeyError, key);
    return NULL;
}

static PyObject *map_subscript(PyObject *self, PyObject *key) {
    zpyv_value *value;
    if (container_of(self, ZPYV_MAP, &value) == NULL) return NULL;
    return map_lookup(value, key, NULL);
}

static int map_ass_subscript(PyObject *self, PyObject *key, PyObject *item) {
    zpyv_value *value;
    if (container_of(self, ZPYV_MAP, &value) == NULL) return -1;
    zpyv_staged key_staged = {0}, item_staged = {0};
    if (item == NULL) {
        int staged_ok = stage_lookup_key(value, key, &key_staged);
        int removed = staged_ok <= 0 ? staged_ok : hash_remove(value, &key_staged);
        zpyv_release(value->kind->element, &key_staged);
        if (removed == 0) PyErr_SetObject(PyExc_KeyError, key);
        return removed > 0 ? 0 : -1;
    }
    if (zpyv_stage_labelled(value->runtime, value->kind->element, key, &key_staged, "key") < 0)
        return -1;
    if (zpyv_stage_labelled(value->runtime, value->kind->value, item, &item_staged, "value") < 0) {
        zpyv_release(value->kind->element, &key_staged);
        return -1;
    }
    int result = hash_add(value, &key_staged, &item_staged);
    zpyv_release(value->kind->element, &key_staged);
    zpyv_release(value->kind->value, &item_staged);
    return result;
}

/* Map.get(key, default=None). */
static PyObject *map_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    zpyv_value *value;
    if (container_of(self, ZPYV_MAP, &value) == NULL) return NULL;
    if (nargs < 1 || nargs > 2)
        return PyErr_Format(PyExc_TypeError, "get expected 1 or 2 arguments, got %zd", nargs);
    return map_lookup(value, args[0], nargs == 2 ? args[1] : Py_None);
}

/* Map._take(key) -> (found, plain value): remove an entry, its value copied out. */
static PyObject *map_take(PyObject *self, PyObject *key) {
    zpyv_value *value;
    if (container_of(self, ZPYV_MAP, &value) == NULL) return NULL;
    zpyv_staged key_staged = {0};
    int staged_ok = stage_lookup_key(value, key, &key_staged);
    if (staged_ok <= 0) return staged_ok < 0 ? NULL : Py_BuildValue("(OO)", Py_False, Py_None);
    PyObject *result = NULL;
    zpyv_staged captured = {0};
    if (zpyv_live(value) != NULL) {
        zs_status status;
        int64_t index = hash_find(value, &key_staged, &status);
        if (status != ZS_OK) {
            refused(value, status);
        } else if (index < 0) {
            result = Py_BuildValue("(OO)", Py_False, Py_None);
        } else {
            zs_hash *hash = (zs_hash *)value->address;
            if (zpyv_capture(value->runtime, value->kind->value,
                             (char *)hash->entries.data + (size_t)index * value->kind->entry_size +
                                 value->kind->value_offset,
                             &captured) < 0) {
                PyErr_NoMemory();
            } else if (hash_remove(value, &key_staged) >= 0) {
                PyObject *plain = zpyv_build(value->runtime, value->kind->value, &captured);
                result = plain ? Py_BuildValue("(ON)", Py_True, plain) : NULL;
            }
        }
    }
    zpyv_release(value->kind->value, &captured);
    zpyv_release(value->kind->element, &key_staged);
    return result;
}

/* Map.update(other): set every key/value of a mapping or of pairs (all
 * staged first: a bad pair changes nothing). */
static PyObject *map_update_from(PyObject *self, PyObject *other) {
    zpyv_value *value;
    if (container_of(self, ZPYV_MAP, &value) == NULL) return NULL;
    zpyv_staged staged = {0};
    if (zpyv_stage(value->runtime, value->kind, other, &staged, value->kind->what) < 0) return NULL;
    int result = hash_add_all(value, &staged);
    zpyv_release(value->kind, &staged);
    return result < 0 ? NULL : Py_NewRef(Py_None);
}

/* One try of map_entries: NULL with no exception set when the map changed
 * structure while its views were made (*changed set). */
static PyObject *map_entries_once(zpyv_value *value, int with_keys, int *changed) {
    char *at = zpyv_live(value);
    if (at == NULL) return NULL;
    zpy_runtime_core *rt = value->runtime;
    zpyv_kind *key_kind = value->kind->element, *item_kind = value->kind->value;
    int views = (item_kind->flags & ZPYV_VIEW) != 0;
    const zs_hash *hash = (const zs_hash *)at;
    uint32_t count = hash->entries.count;
    /* One pass before any Python object is made (a view is found later by its key). */
    zpyv_staged *captured = PyMem_Calloc(count ? (size_t)count * 2 : 1, sizeof *captured);
    if (captured == NULL) return PyErr_NoMemory();
    int failed = 0;
    for (uint32_t i = 0; i < count && !failed; i++) {
        const char *entry = (const char *)hash->entries.data + (size_t)i * value->kind->entry_size;
        failed = zpyv_capture(rt, key_kind, entry, &captured[2 * i]) < 0 ||
                 (!views && zpyv_capture(rt, item_kind, entry + value->kind->value_offset,
                                         &captured[2 * i + 1]) < 0);
    }
    /* Private copies from here on: building them may run Python code. */
    PyObject *list = failed ? PyErr_NoMemory() : PyList_New(count);
    for (uint32_t i = 0; list != NULL && i < count; i++) {
        PyObject *key = with_keys ? zpyv_build(rt, key_kind, &captured[2 * i]) : NULL;
        PyObject *item = NULL;
        if (!with_keys || key != NULL)
            item = views ? zpyv_read_at(rt, item_kind, (PyObject *)value, value->owner, map_finder,
                                        &captured[2 * i])
                         : zpyv_build(rt, item_kind, &captured[2 * i + 1]);
        *changed = item == NULL && !PyErr_Occurred(); /* its key went meanwhile */
        PyObject *entry = item != NULL && with_keys ? PyTuple_Pack(2, key, item) : item;
        if (entry != item) Py_XDECREF(item);
        Py_XDECREF(key);
        if (entry == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, entry);
    }
    for (uint32_t i = 0; i < count; i++) {
        zpyv_release(key_kind, &captured[2 * i]);
        zpyv_release(item_kind, &captured[2 * i + 1]);
    }
    PyMem_Free(captured);
    if (!views || list == NULL) return list;
    /* No Python code from here: the views are of the map as it is now, or it changed. */
    if (zpyv_live(value) == NULL) {
        Py_DECREF(list);
        return NULL;
    }
    *changed = ((zs_hash *)value->address)->entries.count != count;
    for (uint32_t i = 0; !*changed && i < count; i++) {
        PyObject *entry = PyList_GET_ITEM(list, i);
        *changed = ((zpyv_value *)(with_keys ? PyTuple_GET_ITEM(entry, 1) : entry))->address ==
                   NULL;
    }
    if (*changed) Py_CLEAR(list);
    return list;
}

/* Map.values() and Map.items(): the values (views for struct, container
 * and string values), with their keys (plain copies) for items; all of one
 * state of the map (made again if it changed structure meanwhile). */
static PyObject *map_entries(PyObject *self, int with_keys) {
    zpyv_value *value;
    if (container_of(self, ZPYV_MAP, &value) == NULL) return NULL;
    for (int attempt = 0; attempt < MAP_READ_ATTEMPTS; attempt++) {
        int changed = 0;
        PyObject *list = map_entries_once(value, with_keys, &changed);
        if (list != NULL || !changed) return list;
    }
    return PyErr_Format(PyExc_RuntimeError, "%U changed size during %s(), %d times",
                        value->kind->what, with_keys ? "items" : "values", MAP_READ_ATTEMPTS);
}

/* Map.values(): the values (views for struct, container and string values). */
static PyObject *map_values(PyObject *self, PyObject *unused) {
    (void)unused;
    return map_entries(self, 0);
}

/* Map.items(): (key, value) pairs (keys copied out, values as values()). */
static PyObject *map_items(PyObject *self, PyObject *unused) {
    (void)unused;
    return map_entries(self, 1);
}

static PyMethodDef map_methods[] = {
    {"get", (PyCFunction)(void (*)(void))map_get, METH_FASTCALL, "The value for key, or default."},
    {"_take", map_take, METH_O, "Remove an entry: (found, its value copied out)."},
    {"_update_from", map_update_from, METH_O,
     "Set every key/value of a mapping or pairs (all staged first)."},
    {"keys", hash_keys, METH_NOARGS, "The keys (plain copies), in entry order."},
    {"values", map_values, METH_NOARGS,
     "The values (views for struct, container and string values)."},
    {"items", map_items, METH_NOARGS, "(key, value) pairs."},
    {"clear", hash_clear, METH_NOARGS, "Remove every entry."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot map_slots[] = {
    {Py_tp_doc, "The C base of zs.Map: a native hash map with the dict protocol."},
    {Py_mp_length, hash_length},
    {Py_sq_length, hash_length},
    {Py_sq_contains, hash_contains},
    {Py_mp_subscript, map_subscript},
    {Py_mp_ass_subscript, map_ass_subscript},
    {Py_tp_iter, hash_iter},
    {Py_tp_methods, map_methods},
    {0, NULL},
};

/* =========================================================================
 * Optional
 * ========================================================================= */

/* The value's address in an optional as it is now (a zpyv_locator, key 0). */
static char *optional_locator(PyObject *holder, Py_ssize_t key) {
    (void)key;
    zpyv_value *value = (zpyv_value *)holder;
    char *at = zpyv_live(value);
    if (at != NULL && !at[value->kind->value_offset]) {
        PyErr_SetString(PyExc_ValueError, "the optional was reset");
        return NULL;
    }
    return at;
}

/* `is_set`: whether a value is present. */
static PyObject *optional_is_set(PyObject *self, void *closure) {
    (void)closure;
    zpyv_value *value;
    char *at = container_of(self, ZPYV_OPTIONAL, &value);
    return at == NULL ? NULL : PyBool_FromLong(at[value->kind->value_offset] != 0);
}

/* get(default=None): the value (a view for structs, containers, strings). */
static PyObject *optional_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    zpyv_value *value;
    char *at = container_of(self, ZPYV_OPTIONAL, &value);
    if (at == NULL) return NULL;
    if (nargs > 1)
        return PyErr_Format(PyExc_TypeError, "get expected at most 1 argument, got %zd", nargs);
    if (!at[value->kind->value_offset]) return Py_NewRef(nargs ? args[0] : Py_None);
    zpyv_kind *element = value->kind->element;
    /* A scalar is read straight from the live storage (its element sits
       first): making an int or a float runs no Python code. */
    if (element->code == ZPYV_SCALAR) return zpy_scalar_load((zpy_scalar_kind)element->scalar, at);
    return zpyv_read(value->runtime, element, self, 0, value->owner, optional_locator);
}

/* set(value): store a value (replacing any). */
static PyObject *optional_set(PyObject *self, PyObject *item) {
    zpyv_value *value;
    if (container_of(self, ZPYV_OPTIONAL, &value) == NULL) return NULL;
    zpyv_staged staged = {0};
    zpyv_staged *item_staged = PyMem_Calloc(1, sizeof *item_staged);
    if (item_staged == NULL) return PyErr_NoMemory();
    staged.form = ZPYV_ITEMS;
    staged.u.items = item_staged;
    if (zpyv_stage_labelled(value->runtime, value->kind->element, item, item_staged, "value") < 0) {
        zpyv_release(value->kind, &staged);
        return NULL;
    }
    staged.count = 1;
    zs_status status = ZS_E_STALE;
    if (zpyv_live(value) != NULL) {
        status = zpyv_emit(value->runtime, value->kind, &staged, value->owner, value->address);
        if (status == ZS_OK) structure_changed(value);
    }
    zpyv_release(value->kind, &staged);
    if (value->address == NULL) return zpyv_raise_expired(value);
    if (status != ZS_OK) return refused(value, status);
    Py_RETURN_NONE;
}

/* reset(): remove the value. */
static PyObject *optional_reset(PyObject *self, PyObject *unused) {
    (void)unused;
    zpyv_value *value;
    char *at = container_of(self, ZPYV_OPTIONAL, &value);
    if (at == NULL) return NULL;
    const zs_type *type = type_of(value);
    if (type == NULL) return NULL;
    zpy_runtime_core *rt = value->runtime;
    zs_status status = zs_value_clear(rt->native, value->owner, type, at);
    if (status != ZS_OK) return refused(value, status);
    structure_changed(value);
    Py_RETURN_NONE;
}

static int optional_bool(PyObject *self) {
    PyObject *set = optional_is_set(self, NULL);
    int result = set == NULL ? -1 : set == Py_True;
    Py_XDECREF(set);
    return result;
}

static PyGetSetDef optional_getset[] = {
    {"is_set", optional_is_set, NULL, "Whether a value is present.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef optional_methods[] = {
    {"get", (PyCFunction)(void (*)(void))optional_get, METH_FASTCALL,
     "The value (a view for structs, containers and strings), or default."},
    {"set", optional_set, METH_O, "Store a value (replacing any)."},
    {"reset", optional_reset, METH_NOARGS, "Remove the value."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot optional_slots[] = {
    {Py_tp_doc, "The C base of zs.Optional: a value or nothing."},
    {Py_nb_bool, optional_bool},
    {Py_tp_getset, optional_getset},
    {Py_tp_methods, optional_methods},
    {0, NULL},
};

/* =========================================================================
 * Registration
 * ========================================================================= */

/* A container base type deriving from ValueConjugate. */
static int add_base(PyObject *module, zpy_core_state *state, const char *name, PyType_Slot *slots,
                    PyTypeObject **out) {
    PyType_Spec spec = {
        .name = name,
        .basicsize = 0, /* the base's */
        .itemsize = 0,
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
        .slots = slots,
    };
    PyObject *bases = PyTuple_Pack(1, (PyObject *)state->value_type);
    if (bases == NULL) return -1;
    PyObject *type = PyType_FromModuleAndSpec(module, &spec, bases);
    Py_DECREF(bases);
    if (type == NULL) return -1;
    *out = (PyTypeObject *)type;
    const char *short_name = strrchr(name, '.') + 1;
    return PyModule_AddObjectRef(module, short_name, type);
}

int zpyv_add_container_types(PyObject *module, zpy_core_state *state) {
    state->iterator_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &iterator_spec, NULL);
    if (state->iterator_type == NULL) return -1;
    return add_base(module, state, "zsharp_py._core.ArrayBase", array_slots, &state->array_type) ||
                   add_base(module, state, "zsharp_py._core.SetBase", set_slots,
                            &state->set_type) ||
                   add_base(module, state, "zsharp_py._core.MapBase", map_slots,
                            &state->map_type) ||
                   add_base(module, state, "zsharp_py._core.OptionalBase", optional_slots,
                            &state->optional_type)
               ? -1
               : 0;
}
