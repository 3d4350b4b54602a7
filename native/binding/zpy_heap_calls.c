/* The native heap calls of zs.Runtime and rt.gc, as methods of RuntimeCore,
 * and the header's constants and C type layouts Python reads.
 *
 * zsharp_py/_runtime/runtime.py, collector.py and chains.py reach the heap
 * through these (the `_heap_*` methods) and the collection protocol
 * (zpy_collection.c: full collections, incremental steps): creating and
 * freeing a native runtime, registering a class, creating and resolving
 * objects, the collector's phase, clusters, figures, the stress switches
 * and reference chains. Each method converts all its Python arguments first
 * (an __index__ may run Python code that closes the runtime), then reads
 * rt->native (zpy_rt_open, which zpy_reflection.c's methods share), raising
 * ExpiredConjugateError once the runtime is closed, and returns Python
 * values instead of out-parameters. Statuses are returned for Python to
 * raise with check()/refused().
 *
 * The GIL (rule 10 of docs/design.md) is held for short calls and released
 * around the ones that may run long (verifying the heap, clustering,
 * reference chains, closing the disregard window, freeing a runtime; the
 * collector's steps are zpy_collection.c's). Python holds the runtime's
 * lock around each of them, so close() on another thread waits.
 */
#include "value.h"

/* The native runtime of a runtime that is open or closing: what the
 * methods of zs.Runtime and rt.gc, which close() calls too, work on. */
static zs_runtime *open_native(zpy_runtime_core *rt) { return zpy_rt_open(rt, 1); }

/* An unsigned integer argument no larger than `high`, through __index__ (as
 * cffi converted integer arguments): 0, or -1 with OverflowError. */
static int unsigned_arg(PyObject *value, unsigned long long high, unsigned long long *out) {
    PyObject *index = PyNumber_Index(value);
    if (index == NULL) return -1;
    unsigned long long v = PyLong_AsUnsignedLongLong(index);
    Py_DECREF(index);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    if (v > high) {
        PyErr_SetString(PyExc_OverflowError, "integer out of range for the native argument");
        return -1;
    }
    *out = v;
    return 0;
}

/* A handle (zs_ref) argument. */
int zpy_rt_handle_arg(PyObject *value, zs_ref *out) {
    unsigned long long v;
    if (unsigned_arg(value, UINT64_MAX, &v) < 0) return -1;
    *out = (zs_ref)v;
    return 0;
}

/* A uint32_t argument. */
static int u32_arg(PyObject *value, uint32_t *out) {
    unsigned long long v;
    if (unsigned_arg(value, UINT32_MAX, &v) < 0) return -1;
    *out = (uint32_t)v;
    return 0;
}

/* A pointer argument given as its address (an int; 0 for NULL). */
static int address_arg(PyObject *value, void **out) {
    unsigned long long v;
    if (unsigned_arg(value, UINTPTR_MAX, &v) < 0) return -1;
    *out = (void *)(uintptr_t)v;
    return 0;
}

/* Check a fastcall method's argument count: 0, or -1 with TypeError. */
static int arity(const char *name, Py_ssize_t given, Py_ssize_t wanted) {
    if (given == wanted) return 0;
    PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", name, wanted, given);
    return -1;
}

/* =========================================================================
 * The native runtime itself
 * ========================================================================= */

/* RuntimeCore._heap_new_runtime(max_objects, min_cluster_size, mark_threads,
 * flags) -> (status, address): a new native runtime (zero keeps an option's
 * default; flags are ZS_RUNTIME_*). Static: the Python runtime opens on it
 * afterwards (_core_open). */
PyObject *zpy_rt_new_runtime(PyObject *unused, PyObject *const *args, Py_ssize_t nargs) {
    (void)unused;
    uint32_t values[4];
    if (arity("_heap_new_runtime", nargs, 4) < 0) return NULL;
    for (int i = 0; i < 4; i++)
        if (u32_arg(args[i], &values[i]) < 0) return NULL;
    zs_runtime_options options;
    zs_runtime_default_options(&options);
    if (values[0] != 0) options.max_objects = values[0];
    if (values[1] != 0) options.min_cluster_size = values[1];
    if (values[2] != 0) options.mark_threads = values[2];
    options.flags |= values[3];
    zs_runtime *native = NULL;
    zs_status status = zs_runtime_new(&options, &native);
    return Py_BuildValue("(iN)", (int)status, PyLong_FromVoidPtr(native));
}

/* RuntimeCore._heap_free_runtime(address): free a native runtime this side
 * made (zs_runtime_free: every object destroyed), with the GIL released.
 * A class method: weakref.finalize calls it without the Runtime, once
 * Python's cycle collector found the Runtime unreachable and unclosed. That
 * Runtime is still in memory, and other garbage's finalisers may still use
 * it (or make a runtime whose heap gets this one's address), so its core
 * lets go of the heap first: it is taken off the open runtimes, where the
 * handlers would find it by that address, and closed (its calls raise
 * ExpiredConjugateError instead of reaching freed memory). No conjugate of
 * it is live (each holds the Runtime) and its black values are garbage too:
 * nothing else is expired. */
PyObject *zpy_rt_free_runtime(PyObject *cls, PyObject *address) {
    void *native;
    if (address_arg(address, &native) < 0) return NULL;
    if (native == NULL) {
        PyErr_SetString(PyExc_ValueError, "_heap_free_runtime: a null runtime");
        return NULL;
    }
    zpy_core_state *state = zpy_state_of_type((PyTypeObject *)cls);
    zpy_runtime_core *rt = state != NULL ? zpy_open_runtime_of(state, native) : NULL;
    if (rt != NULL) {
        zpy_open_runtime_remove(state, rt);
        rt->native = NULL;
        rt->dying_word = NULL;
        zpy_life_closed(rt);
    }
    Py_BEGIN_ALLOW_THREADS;
    zs_runtime_free(native);
    Py_END_ALLOW_THREADS;
    Py_RETURN_NONE;
}

/* The zs_class_resolver of every runtime Python opened (`user`: the
 * module's state): zs_find_class missed `name`, so Runtime._resolve_class
 * registers the Python class of that name if exactly one is declared. A
 * Python exception cannot cross into C: it is reported as unraisable and
 * the lookup fails. */
static zs_status resolve_class(void *user, zs_runtime *native, const char *name) {
    zpy_core_state *state = user;
    PyGILState_STATE gil = PyGILState_Ensure();
    zs_status status = ZS_E_INVALID;
    zpy_runtime_core *rt = zpy_open_runtime_of(state, native);
    if (rt != NULL && zpy_open(rt)) {
        Py_INCREF(rt);
        PyObject *text = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace");
        PyObject *found = text ? PyObject_CallMethod((PyObject *)rt, "_resolve_class", "O", text)
                               : NULL;
        int truth = found ? PyObject_IsTrue(found) : -1;
        if (truth < 0) {
            PyErr_WriteUnraisable((PyObject *)rt);
            status = ZS_E_CALL_FAILED;
        } else status = truth ? ZS_OK : ZS_E_INVALID;
        Py_XDECREF(found);
        Py_XDECREF(text);
        Py_DECREF(rt);
    }
    PyGILState_Release(gil);
    return status;
}

/* RuntimeCore._heap_set_handlers(install): set this module's managed call
 * and listener handlers and class resolver on the heap (install true), or
 * remove them:
 * the heap calls Python through them. */
PyObject *zpy_rt_set_handlers(PyObject *self, PyObject *install) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    int on = PyObject_IsTrue(install);
    if (on < 0) return NULL;
    zs_managed_call_handler handler = on ? zpy_call_handler_of(rt->state) : NULL;
    if (on && handler == NULL) return NULL;
    zs_managed_listener_handler listeners = on ? zpy_listener_handler_of(rt->state) : NULL;
    if (on && listeners == NULL) return NULL;
    zs_runtime *native = open_native(rt);
    if (native == NULL) return NULL;
    zs_set_managed_call_handler(native, handler, on ? rt->state : NULL);
    zs_set_managed_listener_handler(native, listeners, on ? rt->state : NULL);
    zs_set_class_resolver(native, on ? resolve_class : NULL, on ? rt->state : NULL);
    Py_RETURN_NONE;
}

/* RuntimeCore._heap_memory() -> (live_blocks, live_bytes, peak_bytes,
 * item_bytes_per_object): the native memory the runtime owns. */
PyObject *zpy_rt_memory(PyObject *self, PyObject *unused) {
    (void)unused;
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    if (native == NULL) return NULL;
    zs_memory_stats raw;
    zs_runtime_memory(native, &raw);
    return Py_BuildValue("(KKKK)", (unsigned long long)raw.live_blocks,
                         (unsigned long long)raw.live_bytes, (unsigned long long)raw.peak_bytes,
                         (unsigned long long)raw.item_bytes_per_object);
}

/* The counters of the heap a method returns as an int. */
typedef enum heap_count {
    COUNT_LIVE_OBJECTS,
    COUNT_VALUES,
    COUNT_NAMES,
    COUNT_CLUSTERS,
    COUNT_GC_PHASE
} heap_count;

/* One counter of an open runtime's heap, as an int. */
static PyObject *heap_count_of(PyObject *self, heap_count which) {
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    if (native == NULL) return NULL;
    unsigned long value = 0;
    switch (which) {
    case COUNT_LIVE_OBJECTS:
        value = zs_live_objects(native);
        break;
    case COUNT_VALUES:
        value = zs_value_count(native);
        break;
    case COUNT_NAMES:
        value = zs_name_count(native);
        break;
    case COUNT_CLUSTERS:
        value = zs_cluster_count(native);
        break;
    case COUNT_GC_PHASE:
        value = (unsigned long)zs_gc_phase_of(native);
        break;
    }
    return PyLong_FromUnsignedLong(value);
}

/* RuntimeCore._heap_live_objects() -> live native objects. */
PyObject *zpy_rt_live_objects(PyObject *self, PyObject *unused) {
    (void)unused;
    return heap_count_of(self, COUNT_LIVE_OBJECTS);
}

/* RuntimeCore._heap_value_count() -> black values with a native block. */
PyObject *zpy_rt_value_count(PyObject *self, PyObject *unused) {
    (void)unused;
    return heap_count_of(self, COUNT_VALUES);
}

/* RuntimeCore._heap_name_count() -> names in the native table (close()
 * decodes them first). */
PyObject *zpy_rt_name_count(PyObject *self, PyObject *unused) {
    (void)unused;
    return heap_count_of(self, COUNT_NAMES);
}

/* RuntimeCore._heap_cluster_count() -> live clusters. */
PyObject *zpy_rt_cluster_count(PyObject *self, PyObject *unused) {
    (void)unused;
    return heap_count_of(self, COUNT_CLUSTERS);
}

/* RuntimeCore._heap_gc_phase() -> the collector's phase (GC_IDLE...). */
PyObject *zpy_rt_gc_phase(PyObject *self, PyObject *unused) {
    (void)unused;
    return heap_count_of(self, COUNT_GC_PHASE);
}

/* RuntimeCore._heap_expire_gathered() -> taken: hand every dying object to
 * the expiry handler (close() of a host's runtime, before the handler goes;
 * its errors are reported as unraisable, as before). */
PyObject *zpy_rt_expire_gathered(PyObject *self, PyObject *unused) {
    (void)unused;
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    if (native == NULL) return NULL;
    uint32_t taken = 0;
    zs_gc_expire(native, UINT32_MAX, &taken);
    return PyLong_FromUnsignedLong(taken);
}

/* RuntimeCore._heap_close_disregard() -> status: end the disregard-for-GC
 * window (it may scan what it made permanent: the GIL is released). */
PyObject *zpy_rt_close_disregard(PyObject *self, PyObject *unused) {
    (void)unused;
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    if (native == NULL) return NULL;
    zs_status status;
    Py_BEGIN_ALLOW_THREADS;
    status = zs_close_disregard_for_gc(native);
    Py_END_ALLOW_THREADS;
    return PyLong_FromLong((long)status);
}

/* RuntimeCore._heap_debug_set(what, value) -> status: a ZS_DEBUG_* switch. */
PyObject *zpy_rt_debug_set(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    uint32_t what;
    unsigned long long value;
    if (arity("_heap_debug_set", nargs, 2) < 0 || u32_arg(args[0], &what) < 0 ||
        unsigned_arg(args[1], UINT64_MAX, &value) < 0)
        return NULL;
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    if (native == NULL) return NULL;
    return PyLong_FromLong((long)zs_debug_set(native, what, (uint64_t)value));
}

/* RuntimeCore._heap_verify() -> None, or the message of the inconsistency
 * zs_heap_verify found (it walks the whole heap: the GIL is released). */
PyObject *zpy_rt_verify(PyObject *self, PyObject *unused) {
    (void)unused;
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    if (native == NULL) return NULL;
    char message[512] = {0};
    zs_status status;
    Py_BEGIN_ALLOW_THREADS;
    status = zs_heap_verify(native, message, sizeof message);
    Py_END_ALLOW_THREADS;
    if (status == ZS_OK) Py_RETURN_NONE;
    message[sizeof message - 1] = '\0';
    return PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message), "replace");
}

/* =========================================================================
 * Classes and objects
 * ========================================================================= */

/* The bytes of a property description block: `count` zs_property_desc
 * followed by their names and type texts, each NUL-terminated. */
static int properties_size(PyObject *properties, Py_ssize_t count, size_t *out) {
    size_t size = (size_t)count * sizeof(zs_property_desc);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *row = PyTuple_GET_ITEM(properties, i);
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 3 ||
            !PyBytes_CheckExact(PyTuple_GET_ITEM(row, 0)) ||
            !PyBytes_CheckExact(PyTuple_GET_ITEM(row, 1))) {
            PyErr_SetString(PyExc_TypeError, "a property row is (name bytes, type bytes, offset)");
            return -1;
        }
        size += (size_t)PyBytes_GET_SIZE(PyTuple_GET_ITEM(row, 0)) + 1;
        size += (size_t)PyBytes_GET_SIZE(PyTuple_GET_ITEM(row, 1)) + 1;
    }
    *out = size;
    return 0;
}

/* Copy `text` (bytes) to `*cursor`, NUL-terminated; its start. */
static const char *copy_text(PyObject *text, char **cursor) {
    char *start = *cursor;
    Py_ssize_t length = PyBytes_GET_SIZE(text);
    memcpy(start, PyBytes_AS_STRING(text), (size_t)length);
    start[length] = '\0';
    *cursor = start + length + 1;
    return start;
}

/* The description's properties as one bytes object (the heap keeps them
 * by reference: the caller keeps the object as long as the runtime), with
 * its zs_property_desc array at the start; NULL with an error. */
static PyObject *properties_block(PyObject *properties, Py_ssize_t count) {
    size_t size;
    if (properties_size(properties, count, &size) < 0) return NULL;
    PyObject *block = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(size ? size : 1));
    if (block == NULL) return NULL;
    zs_property_desc *descs = (zs_property_desc *)(void *)PyBytes_AS_STRING(block);
    char *cursor = PyBytes_AS_STRING(block) + (size_t)count * sizeof(zs_property_desc);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *row = PyTuple_GET_ITEM(properties, i);
        uint32_t offset;
        if (u32_arg(PyTuple_GET_ITEM(row, 2), &offset) < 0) {
            Py_DECREF(block);
            return NULL;
        }
        descs[i].name = copy_text(PyTuple_GET_ITEM(row, 0), &cursor);
        descs[i].type = copy_text(PyTuple_GET_ITEM(row, 1), &cursor);
        descs[i].offset = offset;
        descs[i].direction = 0;
        descs[i].native = NULL;
    }
    return block;
}

/* The members of a class description, from rows (kind, offset, type
 * address), into `out` (PyMem, freed by the caller). */
static int members_of(PyObject *rows, Py_ssize_t count, zs_member **out) {
    *out = PyMem_Calloc((size_t)(count ? count : 1), sizeof(zs_member));
    if (*out == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *row = PyTuple_GET_ITEM(rows, i);
        void *type;
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 3) {
            PyErr_SetString(PyExc_TypeError, "a member row is (kind, offset, type address)");
            return -1;
        }
        if (u32_arg(PyTuple_GET_ITEM(row, 0), &(*out)[i].kind) < 0 ||
            u32_arg(PyTuple_GET_ITEM(row, 1), &(*out)[i].offset) < 0 ||
            address_arg(PyTuple_GET_ITEM(row, 2), &type) < 0)
            return -1;
        (*out)[i].type = type;
    }
    return 0;
}

/* RuntimeCore._heap_register_class(name, parent, instance_size, flags,
 * members, properties) -> (status, class address, class id, keep): register
 * a class described from Python. `name` is bytes, `parent` a native class's
 * address or 0, `members` a list of (kind, offset, type address),
 * `properties` a list of (name bytes, type text bytes, offset). `keep` holds
 * the property descriptions the heap points into: keep it with the runtime.
 * The class is flagged ZS_CLASS_SCRIPT (a script declared it). */
PyObject *zpy_rt_register_class(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    void *parent;
    uint32_t instance_size, flags;
    if (arity("_heap_register_class", nargs, 6) < 0) return NULL;
    PyObject *name = args[0], *rows = args[4], *properties = args[5];
    if (!PyBytes_CheckExact(name) || !PyList_CheckExact(rows) || !PyList_CheckExact(properties)) {
        PyErr_SetString(PyExc_TypeError,
                        "_heap_register_class(name bytes, parent, size, flags, list, list)");
        return NULL;
    }
    if (address_arg(args[1], &parent) < 0 || u32_arg(args[2], &instance_size) < 0 ||
        u32_arg(args[3], &flags) < 0)
        return NULL;
    /* Snapshots of the lists (tuples of exact tuples of ints and bytes): an
       int subclass's __index__, the only Python code their conversion may
       run, cannot change what was sized and copied. */
    PyObject *member_rows = PyList_AsTuple(rows);
    PyObject *property_rows = member_rows ? PyList_AsTuple(properties) : NULL;
    if (property_rows == NULL) {
        Py_XDECREF(member_rows);
        return NULL;
    }
    Py_ssize_t member_count = PyTuple_GET_SIZE(member_rows);
    Py_ssize_t property_count = PyTuple_GET_SIZE(property_rows);
    zs_member *members = NULL;
    PyObject *keep = members_of(member_rows, member_count, &members) < 0
                         ? NULL
                         : properties_block(property_rows, property_count);
    Py_DECREF(member_rows);
    Py_DECREF(property_rows);
    if (keep == NULL) {
        PyMem_Free(members);
        return NULL;
    }
    zs_class_desc desc = {
        .name = PyBytes_AS_STRING(name),
        .parent = parent,
        .instance_size = instance_size,
        .flags = flags | ZS_CLASS_SCRIPT, /* a script's class: the tick manager calls its
                                             functions through the managed call handler */
        .members = members,
        .member_count = (uint32_t)member_count,
        .properties = (const zs_property_desc *)(const void *)PyBytes_AS_STRING(keep),
        .property_count = (uint32_t)property_count,
    };
    zs_runtime *native = open_native(rt);
    if (native == NULL) {
        Py_DECREF(keep);
        PyMem_Free(members);
        return NULL;
    }
    const zs_class *cls = NULL;
    zs_status status = zs_class_register(native, &desc, &cls);
    PyMem_Free(members); /* copied by the heap; the properties are kept by reference */
    uint32_t class_id = status == ZS_OK ? zs_class_id(cls) : 0;
    return Py_BuildValue("(iNIN)", (int)status, PyLong_FromVoidPtr((void *)cls), class_id, keep);
}

/* RuntimeCore._heap_new_object(cls, outer, name_index, name_number, image)
 * -> (status, handle, address): allocate an object of the native class at
 * address `cls`, its plain defaults copied from `image` (bytes), recorded
 * as having a conjugate (zs_object_new_conjugate); status 0 on success. */
PyObject *zpy_rt_new_object(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    void *cls;
    zs_ref outer;
    uint32_t name_index, name_number;
    if (arity("_heap_new_object", nargs, 5) < 0 || address_arg(args[0], &cls) < 0 ||
        zpy_rt_handle_arg(args[1], &outer) < 0 || u32_arg(args[2], &name_index) < 0 ||
        u32_arg(args[3], &name_number) < 0)
        return NULL;
    PyObject *image = args[4];
    if (!PyBytes_CheckExact(image) || PyBytes_GET_SIZE(image) > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_TypeError, "_heap_new_object: the image is bytes");
        return NULL;
    }
    if (cls == NULL) {
        PyErr_SetString(PyExc_ValueError, "_heap_new_object: a null class");
        return NULL;
    }
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    if (native == NULL) return NULL;
    void *address = NULL;
    zs_ref handle = zs_object_new_conjugate(
        native, cls, outer, name_index, name_number, PyBytes_AS_STRING(image),
        (uint32_t)PyBytes_GET_SIZE(image), (void *)&address, NULL, 0, NULL);
    if (handle < ZS_FIRST_REF) /* a status, not a handle (say, a dying outer) */
        return Py_BuildValue("(iii)", (int)handle, 0, 0);
    return Py_BuildValue("(iKN)", 0, (unsigned long long)handle, PyLong_FromVoidPtr(address));
}

/* RuntimeCore._heap_release_strong_ref(handle) -> status. */
PyObject *zpy_rt_release_strong_ref(PyObject *self, PyObject *handle) {
    zs_ref ref;
    if (zpy_rt_handle_arg(handle, &ref) < 0) return NULL;
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    if (native == NULL) return NULL;
    return PyLong_FromLong((long)zs_release_strong_ref(native, ref));
}

/* RuntimeCore._heap_resolve_class(handle) -> the class id of the object
 * the handle names, or None when it names none (null or stale). */
PyObject *zpy_rt_resolve_class(PyObject *self, PyObject *handle) {
    zs_ref ref;
    if (zpy_rt_handle_arg(handle, &ref) < 0) return NULL;
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    if (native == NULL) return NULL;
    const zs_object *object = zs_resolve(native, ref);
    if (object == NULL) Py_RETURN_NONE;
    return PyLong_FromUnsignedLong(zs_class_id(object->cls));
}

/* RuntimeCore._heap_resolve_for_conjugate(handle) -> the object's address,
 * recorded as having a conjugate, or None (stale or dying). */
PyObject *zpy_rt_resolve_for_conjugate(PyObject *self, PyObject *handle) {
    zs_ref ref;
    if (zpy_rt_handle_arg(handle, &ref) < 0) return NULL;
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    if (native == NULL) return NULL;
    zs_object *object = NULL;
    if (zs_resolve_for_conjugate(native, ref, &object) != ZS_OK) Py_RETURN_NONE;
    return PyLong_FromVoidPtr(object);
}

/* =========================================================================
 * Clusters
 * ========================================================================= */

/* RuntimeCore._heap_create_cluster(handle) -> (status, size): cluster the
 * object with what it references (a walk: the GIL is released). */
PyObject *zpy_rt_create_cluster(PyObject *self, PyObject *handle) {
    zs_ref ref;
    if (zpy_rt_handle_arg(handle, &ref) < 0) return NULL;
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    if (native == NULL) return NULL;
    uint32_t size = 0;
    zs_status status;
    Py_BEGIN_ALLOW_THREADS;
    status = zs_create_cluster(native, ref, &size);
    Py_END_ALLOW_THREADS;
    return Py_BuildValue("(iI)", (int)status, size);
}

/* RuntimeCore._heap_cluster_info(handle) -> (status, info): info is None
 * when the object is in no cluster (or a call failed), else (root handle,
 * objects, referenced_clusters, mutable_objects, referenced_by). */
PyObject *zpy_rt_cluster_info(PyObject *self, PyObject *handle) {
    zs_ref ref;
    if (zpy_rt_handle_arg(handle, &ref) < 0) return NULL;
    zs_runtime *native = open_native((zpy_runtime_core *)self);
    if (native == NULL) return NULL;
    int32_t index = -1;
    zs_status status = zs_object_cluster(native, ref, &index);
    if (status != ZS_OK || index < 0) return Py_BuildValue("(iO)", (int)status, Py_None);
    zs_cluster_info info;
    status = zs_cluster_get_info(native, index, &info);
    if (status != ZS_OK) return Py_BuildValue("(iO)", (int)status, Py_None);
    return Py_BuildValue("(i(KIIII))", 0, (unsigned long long)info.root, info.objects,
                         info.referenced_clusters, info.mutable_objects, info.referenced_by);
}

/* =========================================================================
 * Reference chains
 * ========================================================================= */

/* The links of a search as a list of (holder, member, root) tuples. */
static PyObject *links_list(const zs_chain_link *links, uint32_t count) {
    PyObject *list = PyList_New((Py_ssize_t)count);
    for (uint32_t i = 0; list != NULL && i < count; i++) {
        PyObject *link = Py_BuildValue("(KII)", (unsigned long long)links[i].holder,
                                       links[i].member, links[i].root);
        if (link == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, link);
    }
    return list;
}

/* RuntimeCore._heap_reference_chains(handle, max_chains) -> (status, links):
 * why the object is alive (zs_reference_chains, asked again with room for
 * every link when the first answer is larger); links as links_list makes
 * them. The search reads the whole heap: the GIL is released. */
PyObject *zpy_rt_reference_chains(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    zs_ref ref;
    uint32_t max_chains;
    if (arity("_heap_reference_chains", nargs, 2) < 0 || zpy_rt_handle_arg(args[0], &ref) < 0 ||
        u32_arg(args[1], &max_chains) < 0)
        return NULL;
    uint32_t capacity = 64, count = 0;
    zs_status status;
    for (;;) {
        zs_chain_link *links = PyMem_Malloc((size_t)capacity * sizeof *links);
        if (links == NULL) return PyErr_NoMemory();
        /* Read on every pass: no Python code runs here, but be exact. */
        zs_runtime *native = open_native(rt);
        if (native == NULL) {
            PyMem_Free(links);
            return NULL;
        }
        Py_BEGIN_ALLOW_THREADS;
        status = zs_reference_chains(native, ref, max_chains, links, capacity, &count);
        Py_END_ALLOW_THREADS;
        if (status != ZS_OK || count <= capacity) {
            PyObject *list = status == ZS_OK ? links_list(links, count) : PyList_New(0);
            PyMem_Free(links);
            return list ? Py_BuildValue("(iN)", (int)status, list) : NULL;
        }
        PyMem_Free(links);
        capacity = count;
    }
}

/* =========================================================================
 * The method table's block, and the constants
 * ========================================================================= */

/* The sizes and alignments of the C types Python lays structs out with
 * (zsharp_py/_base/layout.py), as the module's C_LAYOUTS: {name: (size,
 * align)}. */
static int add_c_layouts(PyObject *module) {
#define ZPY_C_LAYOUT(type)                                                                         \
    {                                                                                              \
        #type, sizeof(type), _Alignof(type)                                                        \
    }
    static const struct {
        const char *name;
        size_t size, align;
    } layouts[] = {
        ZPY_C_LAYOUT(_Bool),    ZPY_C_LAYOUT(int8_t),    ZPY_C_LAYOUT(int16_t),
        ZPY_C_LAYOUT(int32_t),  ZPY_C_LAYOUT(int64_t),   ZPY_C_LAYOUT(uint8_t),
        ZPY_C_LAYOUT(uint16_t), ZPY_C_LAYOUT(uint32_t),  ZPY_C_LAYOUT(uint64_t),
        ZPY_C_LAYOUT(float),    ZPY_C_LAYOUT(double),    ZPY_C_LAYOUT(void *),
        ZPY_C_LAYOUT(zs_ref),   ZPY_C_LAYOUT(zs_object), ZPY_C_LAYOUT(zs_string),
        ZPY_C_LAYOUT(zs_array), ZPY_C_LAYOUT(zs_hash),   ZPY_C_LAYOUT(zs_binding),
    };
#undef ZPY_C_LAYOUT
    PyObject *dict = PyDict_New();
    for (size_t i = 0; dict != NULL && i < sizeof layouts / sizeof layouts[0]; i++) {
        PyObject *pair = Py_BuildValue("(nn)", (Py_ssize_t)layouts[i].size,
                                       (Py_ssize_t)layouts[i].align);
        if (pair == NULL || PyDict_SetItemString(dict, layouts[i].name, pair) < 0) Py_CLEAR(dict);
        Py_XDECREF(pair);
    }
    if (dict == NULL) return -1;
    int added = PyModule_AddObjectRef(module, "C_LAYOUTS", dict);
    Py_DECREF(dict);
    return added;
}

/* The constants Python needs of zsharp.h and zsharp_debug.h (statuses, limits, collector
 * phases, stress switches, chain markers, type, member and class kinds, the
 * header's size), GC_STATS_FIELDS and C_LAYOUTS, as module constants. */
int zpy_add_heap_constants(PyObject *module) {
    static const struct {
        const char *name;
        long long value;
    } constants[] = {
        {"OK", ZS_OK},
        {"E_NOMEM", ZS_E_NOMEM},
        {"E_CAPACITY", ZS_E_CAPACITY},
        {"E_STALE", ZS_E_STALE},
        {"E_INVALID", ZS_E_INVALID},
        {"E_BUSY", ZS_E_BUSY},
        {"E_EXPIRY_PENDING", ZS_E_EXPIRY_PENDING},
        {"E_DYING", ZS_E_DYING},
        {"E_CORRUPT", ZS_E_CORRUPT},
        {"E_CALL_FAILED", ZS_E_CALL_FAILED},
        {"TYPE_PLAIN", ZS_TYPE_PLAIN},
        {"TYPE_OBJECT", ZS_TYPE_OBJECT},
        {"TYPE_WEAK_OBJECT", ZS_TYPE_WEAK_OBJECT},
        {"TYPE_STRING", ZS_TYPE_STRING},
        {"TYPE_STRUCT", ZS_TYPE_STRUCT},
        {"TYPE_ARRAY", ZS_TYPE_ARRAY},
        {"TYPE_SET", ZS_TYPE_SET},
        {"TYPE_MAP", ZS_TYPE_MAP},
        {"TYPE_OPTIONAL", ZS_TYPE_OPTIONAL},
        {"TYPE_DELEGATE", ZS_TYPE_DELEGATE},
        {"TYPE_MULTICAST", ZS_TYPE_MULTICAST},
        {"TYPE_SPARSE", ZS_TYPE_SPARSE},
        {"MEMBER_OBJECT", ZS_MEMBER_OBJECT},
        {"MEMBER_WEAK_OBJECT", ZS_MEMBER_WEAK_OBJECT},
        {"MEMBER_OBJECT_ARRAY", ZS_MEMBER_OBJECT_ARRAY},
        {"MEMBER_VALUE", ZS_MEMBER_VALUE},
        {"CLASS_CLUSTER_ROOT", ZS_CLASS_CLUSTER_ROOT},
        {"CLASS_IN_CLUSTER", ZS_CLASS_IN_CLUSTER},
        {"OBJECT_HEADER_SIZE", (long long)sizeof(zs_object)},
        {"MAX_OBJECTS_LIMIT", ZS_MAX_OBJECTS_LIMIT},
        {"RUNTIME_DISREGARD_WINDOW", ZS_RUNTIME_DISREGARD_WINDOW},
        {"RUNTIME_BLACK_NOT_ROOTS", ZS_RUNTIME_BLACK_NOT_ROOTS},
        {"NAME_AUTO", ZS_NAME_AUTO},
        {"GC_IDLE", ZS_GC_IDLE},
        {"GC_MARKING", ZS_GC_MARKING},
        {"GC_PURGE_PENDING", ZS_GC_PURGE_PENDING},
        {"GC_GATHERING", ZS_GC_GATHERING},
        {"DEBUG_DISABLE_BARRIER", ZS_DEBUG_DISABLE_BARRIER},
        {"DEBUG_PARALLEL_THRESHOLD", ZS_DEBUG_PARALLEL_THRESHOLD},
        {"DEBUG_STRICT_ALLOC_LIMIT", ZS_DEBUG_STRICT_ALLOC_LIMIT},
        {"DEBUG_CHECK_MARKS", ZS_DEBUG_CHECK_MARKS},
        {"DEBUG_STEP_OBJECTS", ZS_DEBUG_STEP_OBJECTS},
        {"DEBUG_POISON_FREED", ZS_DEBUG_POISON_FREED},
        {"DEBUG_MARK_STACK_LIMIT", ZS_DEBUG_MARK_STACK_LIMIT},
        {"DEBUG_ALLOC_LIMIT", ZS_DEBUG_ALLOC_LIMIT},
        {"CHAIN_END", ZS_CHAIN_END},
        {"CHAIN_OUTER", ZS_CHAIN_OUTER},
        {"CHAIN_WHOLE", ZS_CHAIN_WHOLE},
        {"CHAIN_CLUSTER", ZS_CHAIN_CLUSTER},
        {"CHAIN_ROOT_ADDED", ZS_CHAIN_ROOT_ADDED},
        {"CHAIN_ROOT_STRONG", ZS_CHAIN_ROOT_STRONG},
        {"CHAIN_ROOT_PERMANENT", ZS_CHAIN_ROOT_PERMANENT},
        {"CHAIN_ROOT_VALUE", ZS_CHAIN_ROOT_VALUE},
        {"LIFE_COLLECT", ZPY_ACT_COLLECT},
        {"LIFE_CLOSE", ZPY_ACT_CLOSE},
        {"LIFE_HOST_FREE", ZPY_ACT_HOST_FREE},
        {"LIFE_ADOPT", ZPY_ACT_ADOPT},
    };
    for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++) {
        PyObject *value = PyLong_FromLongLong(constants[i].value);
        if (value == NULL || PyModule_AddObjectRef(module, constants[i].name, value) < 0) {
            Py_XDECREF(value);
            return -1;
        }
        Py_DECREF(value);
    }
    /* The zs_gc_stats fields in order (GcStats' layout, collector.py). */
    static const char *const stats_fields[] = {
        "cycle",
        "objects_scanned",
        "objects_marked",
        "objects_unreachable",
        "objects_freed",
        "references_killed",
        "roots",
        "permanent_objects",
        "clusters",
        "clusters_marked",
        "clusters_dissolved",
        "live_objects",
        "mark_ns",
        "gather_ns",
        "purge_ns",
        "mark_steps",
        "barrier_marks",
        "mark_threads",
        "gathers_aborted",
        "objects_freed_unshared",
        "barrier_slots",
    };
    _Static_assert(sizeof stats_fields / sizeof stats_fields[0] ==
                       sizeof(zs_gc_stats) / sizeof(uint64_t),
                   "a zs_gc_stats field is missing from stats_fields");
    size_t count = sizeof stats_fields / sizeof stats_fields[0];
    PyObject *names = PyTuple_New((Py_ssize_t)count);
    for (size_t i = 0; names != NULL && i < count; i++) {
        PyObject *name = PyUnicode_InternFromString(stats_fields[i]);
        if (name == NULL) Py_CLEAR(names);
        else PyTuple_SET_ITEM(names, (Py_ssize_t)i, name);
    }
    if (names == NULL) return -1;
    int added = PyModule_AddObjectRef(module, "GC_STATS_FIELDS", names);
    Py_DECREF(names);
    return added < 0 ? -1 : add_c_layouts(module);
}
