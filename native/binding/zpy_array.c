/* Arrays: the C base of zs.Array (ArrayBase) and its iterator. Shared
 * container parts and the rule every write follows: zpy_containers.c.
 */
#include "zpy_containers.h"

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
    char *at = zpyv_container_of(self, ZPYV_ARRAY, &value);
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
    char *at = zpyv_container_of(self, ZPYV_ARRAY, &value);
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
    Py_ssize_t position = zpyv_position_of(index, ((zs_array *)at)->count, &error);
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
    if (!zpy_open(rt))
        return PyErr_SetString(rt->state->expired_exception, "the runtime has been closed"), -1;
    zs_array *array = (zs_array *)value->address;
    const zs_type *type = zpyv_container_type(value);
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
        /* Done or refused: a change that fails may have moved the storage first. */
        zpyv_structure_changed(value);
        if (packed != ZS_OK) return zpyv_container_refused(value, packed), -1;
        return 0;
    }
    zs_status status = zs_array_insert(rt->native, value->owner, type, array, (uint32_t)position,
                                       NULL, count);
    if (status != ZS_OK) zpyv_structure_changed(value); /* may have moved the storage first */
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
        zpyv_structure_changed(value);
    }
    if (status != ZS_OK) return zpyv_container_refused(value, status), -1;
    return 0;
}

/* append(value): add one element at the end. */
static PyObject *array_append(PyObject *self, PyObject *item) {
    zpyv_value *value;
    if (zpyv_container_of(self, ZPYV_ARRAY, &value) == NULL) return NULL;
    zpyv_staged staged = {0};
    if (zpyv_stage_element(value, item, &staged) < 0) return NULL;
    int result = array_insert_staged(value, 0, 1, &staged, 1);
    zpyv_release(value->kind->element, &staged);
    return result < 0 ? NULL : Py_NewRef(Py_None);
}

/* insert(index, value): before `index`, clamped like list.insert. */
static PyObject *array_insert(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    zpyv_value *value;
    if (zpyv_container_of(self, ZPYV_ARRAY, &value) == NULL) return NULL;
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "insert expected 2 arguments, got %zd", nargs);
    Py_ssize_t position = PyNumber_AsSsize_t(args[0], PyExc_OverflowError);
    if (position == -1 && PyErr_Occurred()) return NULL;
    zpyv_staged staged = {0};
    if (zpyv_stage_element(value, args[1], &staged) < 0) return NULL;
    int result = array_insert_staged(value, position, 0, &staged, 1);
    zpyv_release(value->kind->element, &staged);
    return result < 0 ? NULL : Py_NewRef(Py_None);
}

/* extend(iterable): every element at the end, all or nothing. */
static PyObject *array_extend(PyObject *self, PyObject *iterable) {
    zpyv_value *value;
    if (zpyv_container_of(self, ZPYV_ARRAY, &value) == NULL) return NULL;
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
    const zs_type *type = zpyv_container_type(value);
    if (type == NULL) return -1;
    zs_status status = zs_array_remove(rt->native, value->owner, type, (zs_array *)value->address,
                                       position, count);
    if (status != ZS_OK) return zpyv_container_refused(value, status), -1;
    zpyv_structure_changed(value);
    return 0;
}

/* pop(index=-1): remove and return an element (a plain copy: its slot goes). */
static PyObject *array_pop(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    zpyv_value *value;
    char *at = zpyv_container_of(self, ZPYV_ARRAY, &value);
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
    char *at = zpyv_container_of(self, ZPYV_ARRAY, &value);
    if (at == NULL || array_remove(value, 0, ((zs_array *)at)->count) < 0) return NULL;
    Py_RETURN_NONE;
}

/* Whether elements of this kind are written in place by a slice of the same
   length: once their references are valid nothing can refuse one of them
   halfway (no memory to allocate), so the write is whole or not at all, and
   costs what it writes instead of moving the array's tail twice. */
static int written_in_place(const zpyv_kind *element) {
    switch (element->code) {
    case ZPYV_SCALAR:
    case ZPYV_PLAIN:
    case ZPYV_NAME:
    case ZPYV_OBJECT:
    case ZPYV_WEAK:
        return 1;
    default:
        return 0;
    }
}

/* arr[i] = v, arr[a:b] = values, del arr[i], del arr[a:b]. */
static int array_ass_subscript(PyObject *self, PyObject *index, PyObject *item) {
    zpyv_value *value;
    char *at = zpyv_container_of(self, ZPYV_ARRAY, &value);
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
            if (step == 1 && !(item != NULL && (Py_ssize_t)staged.count == count &&
                               written_in_place(value->kind->element))) {
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
                /* Same length, written in place (an extended slice, or a
                   plain one of elements written_in_place): references
                   first, since a refusal after one write would keep it. */
                zs_status status = zpyv_references_valid(rt, value->kind, &staged);
                for (Py_ssize_t i = 0; status == ZS_OK && i < count; i++) {
                    Py_ssize_t p = start + i * step;
                    zpyv_staged scratch;
                    status = zpyv_emit(rt, value->kind->element,
                                       zpyv_element_at(value->kind, &staged, (uint32_t)i, &scratch),
                                       value->owner,
                                       (char *)array->data + (size_t)p * value->kind->entry_size);
                    zpyv_contents_changed(value, p);
                }
                result = status == ZS_OK ? 0 : (zpyv_container_refused(value, status), -1);
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
        Py_ssize_t position = zpyv_position_of(index, ((zs_array *)at)->count, &error);
        return error ? -1 : array_remove(value, (uint32_t)position, 1);
    }
    if (PyBool_Check(index) || !PyLong_Check(index)) {
        PyErr_Format(PyExc_TypeError, "indices must be integers, not %s", Py_TYPE(index)->tp_name);
        return -1;
    }
    zpyv_staged staged = {0};
    if (zpyv_stage_element(value, item, &staged) < 0) return -1;
    /* The index against the array as it is after the conversion. */
    int result = -1;
    if (zpyv_live(value) != NULL) {
        zs_array *array = (zs_array *)value->address;
        int error;
        Py_ssize_t position = zpyv_position_of(index, array->count, &error);
        if (!error) {
            zs_status status = zpyv_emit(rt, value->kind->element, &staged, value->owner,
                                         (char *)array->data +
                                             (size_t)position * value->kind->entry_size);
            zpyv_contents_changed(value, position); /* done or refused */
            if (status == ZS_OK) result = 0;
            else zpyv_container_refused(value, status);
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
    char *at = zpyv_container_of(self, ZPYV_ARRAY, &value);
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
    PyObject *plain = zpyv_probe_of(rt->state, probe);
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
        found = item == NULL ? -1 : zpyv_plain_equal(item, plain);
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

PyType_Spec zpyv_iterator_spec = {
    .name = "zsharp_py._core.ArrayIterator",
    .basicsize = sizeof(zpyv_iterator),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = iterator_slots,
};

static PyObject *array_iter(PyObject *self) {
    zpyv_value *value;
    char *at = zpyv_container_of(self, ZPYV_ARRAY, &value);
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
    char *at = zpyv_container_of(self, ZPYV_ARRAY, &value);
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
    char *at = zpyv_container_of(self, ZPYV_ARRAY, &value);
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

PyType_Slot zpyv_array_slots[] = {
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
