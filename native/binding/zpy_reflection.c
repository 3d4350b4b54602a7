/* What Python asks of the heap outside the hot paths (the `_heap_*`
 * methods of RuntimeCore beside zpy_heap_calls.c's, whose helpers these share:
 * zpy_rt_open, zpy_rt_handle_arg), in C: a host's
 * descriptions of its classes, structs and enums, read into plain tuples
 * (zsharp_py/_interop/reflection.py binds them); an object's lifetime
 * controls (roots, strong references, garbage, clusters:
 * zsharp_py/_model/object.py, zsharp_py/_types/object_pointers.py); the
 * checks and queries of the lower layers and of zsharp_py.testing; the
 * status texts. With these and zpy_heap_calls.c, _core is the Python package's
 * one way into the native library.
 *
 * Every entry converts its arguments completely first (an __index__ may
 * run Python code that closes the runtime), then checks that the runtime
 * is open, then calls the heap, with no Python code in between (rule 12 of
 * docs/design.md); a description is read into tuples with Python's cycle
 * collector paused (reflection_read), so that no finaliser runs while the
 * native memory is being read. A runtime that is closing or closed raises
 * ExpiredConjugateError("the runtime has been closed") (zpy_rt_open with
 * while_closing 0: close() moves the life to CLOSING first, and these calls take no
 * Python lock to wait for it), and a native status is
 * raised by Python's `refused` (zpy_call_raise_status), as `check` raised
 * it. The GIL is held throughout: every call is short (rule 10; the heap
 * releases its own lock before it calls anything that may need the GIL,
 * native/src/expiry.c).
 */
#include "value.h"

/* A C string of a description as a str ("" for NULL); UnicodeDecodeError
 * for text that is not UTF-8, as bytes.decode("utf-8") raised. */
static PyObject *reflection_text(const char *text) {
    if (text == NULL) text = "";
    return PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "strict");
}

/* What an entry that reads a description does after the runtime check:
 * `read(rt, arg)` builds its answer, with Python's cycle collector paused
 * meanwhile, since allocating a tuple may start a collection, whose
 * finalisers may run any Python code (close the runtime, free the classes
 * and types being read). Nothing else the read calls runs Python code. */
static PyObject *reflection_read(zpy_runtime_core *rt, const void *arg,
                                 PyObject *(*read)(zpy_runtime_core *rt, const void *arg)) {
    int collecting = PyGC_Disable();
    PyObject *out = read(rt, arg);
    if (collecting) PyGC_Enable();
    return out;
}

/* ---- lifetime controls and queries ------------------------------------------ */

/* The heap calls that take one handle and answer a status. */
typedef zs_status (*handle_call)(zs_runtime *rt, zs_ref ref);

/* `call(native, handle)` on `self`'s heap for args (handle, what): None,
 * or the exception of its status (`what` names the call in it). */
static PyObject *reflection_handle_call(PyObject *self, PyObject *args, handle_call call,
                                        const char *format) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    PyObject *handle, *what;
    zs_ref ref;
    if (!PyArg_ParseTuple(args, format, &handle, &what) || zpy_rt_handle_arg(handle, &ref) < 0)
        return NULL;
    if (zpy_rt_open(rt, 0) == NULL) return NULL;
    zs_status status = call(rt->native, ref);
    if (status != ZS_OK) return zpy_call_raise_status(rt->state, status, what, rt);
    Py_RETURN_NONE;
}

/* RuntimeCore._heap_add_to_root(handle, what): Object.add_to_root. */
PyObject *zpy_rt_add_to_root(PyObject *self, PyObject *args) {
    return reflection_handle_call(self, args, zs_add_to_root, "OU:_heap_add_to_root");
}

/* RuntimeCore._heap_remove_from_root(handle, what): Object.remove_from_root. */
PyObject *zpy_rt_remove_from_root(PyObject *self, PyObject *args) {
    return reflection_handle_call(self, args, zs_remove_from_root, "OU:_heap_remove_from_root");
}

/* RuntimeCore._heap_mark_as_garbage(handle, what): Object.mark_as_garbage. */
PyObject *zpy_rt_mark_as_garbage(PyObject *self, PyObject *args) {
    return reflection_handle_call(self, args, zs_mark_as_garbage, "OU:_heap_mark_as_garbage");
}

/* RuntimeCore._heap_dissolve_cluster(handle, what): Object.dissolve_cluster. */
PyObject *zpy_rt_dissolve_cluster(PyObject *self, PyObject *args) {
    return reflection_handle_call(self, args, zs_dissolve_cluster, "OU:_heap_dissolve_cluster");
}

/* RuntimeCore._heap_add_strong_ref(handle, what): a strong reference Python holds
 * (StrongObjectPtr, an object whose Python __init__ runs). */
PyObject *zpy_rt_add_strong_ref(PyObject *self, PyObject *args) {
    return reflection_handle_call(self, args, zs_add_strong_ref, "OU:_heap_add_strong_ref");
}

/* RuntimeCore._heap_object_writable(owner, what): refuse, as the heap refuses a
 * native write, a write Python code would make itself into a stale or dying
 * owner (the binding's own writes check in C: zpy_errors.c). */
PyObject *zpy_rt_object_writable(PyObject *self, PyObject *args) {
    return reflection_handle_call(self, args, zs_object_writable, "OU:_heap_object_writable");
}

/* RuntimeCore._heap_abandon(handle): take an object Python was building out of the
 * root set and mark it as garbage (its Python __init__ raised), statuses
 * ignored (it may not be rooted); nothing once the runtime is closed (its
 * object went with it). */
PyObject *zpy_rt_abandon(PyObject *self, PyObject *handle) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    zs_ref ref;
    if (zpy_rt_handle_arg(handle, &ref) < 0) return NULL;
    if (zpy_open(rt)) {
        (void)zs_remove_from_root(rt->native, ref);
        (void)zs_mark_as_garbage(rt->native, ref);
    }
    Py_RETURN_NONE;
}

/* The heap's yes/no questions about one object. */
typedef zs_status (*handle_query)(zs_runtime *rt, zs_ref ref, int *out);

/* `query(native, handle)` on `self`'s heap: True or False, or the
 * exception of its status, named "query". */
static PyObject *reflection_query(PyObject *self, PyObject *handle, handle_query query) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    zs_ref ref;
    if (zpy_rt_handle_arg(handle, &ref) < 0 || zpy_rt_open(rt, 0) == NULL) return NULL;
    int answer = 0;
    zs_status status = query(rt->native, ref, &answer);
    if (status == ZS_OK) return PyBool_FromLong(answer);
    PyObject *what = PyUnicode_FromString("query");
    if (what != NULL) zpy_call_raise_status(rt->state, status, what, rt);
    Py_XDECREF(what);
    return NULL;
}

/* RuntimeCore._heap_is_rooted(handle): Object.is_rooted. */
PyObject *zpy_rt_is_rooted(PyObject *self, PyObject *handle) {
    return reflection_query(self, handle, zs_is_rooted);
}

/* RuntimeCore._heap_is_garbage(handle): Object.is_garbage. */
PyObject *zpy_rt_is_garbage(PyObject *self, PyObject *handle) {
    return reflection_query(self, handle, zs_is_garbage);
}

/* RuntimeCore._heap_is_permanent(handle): made permanent by disregard_for_gc (a
 * leak report leaves it out). */
PyObject *zpy_rt_is_permanent(PyObject *self, PyObject *handle) {
    return reflection_query(self, handle, zs_is_permanent);
}

/* RuntimeCore._heap_live_handles(what) -> the handles of every live object, in
 * index order (zsharp_py.testing's leak report). */
PyObject *zpy_rt_live_handles(PyObject *self, PyObject *what) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (!PyUnicode_Check(what)) {
        PyErr_SetString(PyExc_TypeError, "_heap_live_handles: what must be a str");
        return NULL;
    }
    if (zpy_rt_open(rt, 0) == NULL) return NULL;
    uint32_t count = zs_live_objects(rt->native), found = 0;
    zs_ref *handles = NULL;
    for (;;) { /* another thread may create objects between the count and the copy */
        zs_ref *grown = PyMem_Realloc(handles, ((size_t)count + 1) * sizeof *grown);
        if (grown == NULL) {
            PyMem_Free(handles);
            return PyErr_NoMemory();
        }
        handles = grown;
        zs_status status = zs_live_handles(rt->native, handles, count, &found);
        if (status != ZS_OK) {
            PyMem_Free(handles);
            return zpy_call_raise_status(rt->state, status, what, rt);
        }
        if (found <= count) break;
        count = found;
    }
    PyObject *list = PyList_New((Py_ssize_t)found);
    for (uint32_t i = 0; list != NULL && i < found; i++) {
        PyObject *handle = PyLong_FromUnsignedLongLong(handles[i]);
        if (handle == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, handle);
    }
    PyMem_Free(handles);
    return list;
}

/* ---- classes ------------------------------------------------------------------- */

/* RuntimeCore._heap_class_id_of(cls) -> the native class id of a conjugate class in
 * this runtime (SubclassOf stores it), once Runtime._native_class(cls) has
 * registered it there. */
PyObject *zpy_rt_class_id_of(PyObject *self, PyObject *cls) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (!PyObject_TypeCheck(cls, rt->state->class_type)) {
        PyErr_SetString(PyExc_TypeError, "_heap_class_id_of: not a conjugate class");
        return NULL;
    }
    if (zpy_rt_open(rt, 0) == NULL) return NULL;
    uint32_t number = ((zpy_class_object *)cls)->number;
    if (number == 0 || number >= rt->native_count || rt->natives[number] == NULL)
        return PyErr_Format(PyExc_ValueError, "%s has no native class in this runtime",
                            ((PyTypeObject *)cls)->tp_name);
    return PyLong_FromUnsignedLong(zs_class_id(rt->natives[number]));
}

/* The names of every class of an open runtime, by id (reflection_read). */
static PyObject *class_names_now(zpy_runtime_core *rt, const void *unused) {
    (void)unused;
    uint32_t count = zs_class_count(rt->native);
    PyObject *names = PyTuple_New((Py_ssize_t)count);
    for (uint32_t i = 0; names != NULL && i < count; i++) {
        PyObject *name = reflection_text(zs_class_name(zs_class_by_id(rt->native, i)));
        if (name == NULL) Py_CLEAR(names);
        else PyTuple_SET_ITEM(names, (Py_ssize_t)i, name);
    }
    return names;
}

/* RuntimeCore._heap_class_names() -> the name of every class registered here, by
 * class id (a host's and Python's). */
PyObject *zpy_rt_class_names(PyObject *self, PyObject *unused) {
    (void)unused;
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (zpy_rt_open(rt, 0) == NULL) return NULL;
    return reflection_read(rt, NULL, class_names_now);
}

/* The names of every struct and enum a host registered in an open runtime
 * (reflection_read): a pair of tuples, in registration order. */
static PyObject *type_names_now(zpy_runtime_core *rt, const void *unused) {
    (void)unused;
    uint32_t structs = zs_struct_count(rt->native), enums = zs_enum_count(rt->native);
    PyObject *struct_names = PyTuple_New((Py_ssize_t)structs);
    PyObject *enum_names = struct_names != NULL ? PyTuple_New((Py_ssize_t)enums) : NULL;
    for (uint32_t i = 0; enum_names != NULL && i < structs; i++) {
        const zs_struct_desc *desc = zs_struct_at(rt->native, i, NULL);
        PyObject *name = reflection_text(desc != NULL ? desc->name : NULL);
        if (name == NULL) Py_CLEAR(enum_names);
        else PyTuple_SET_ITEM(struct_names, (Py_ssize_t)i, name);
    }
    for (uint32_t i = 0; enum_names != NULL && i < enums; i++) {
        const zs_enum_desc *desc = zs_enum_at(rt->native, i);
        PyObject *name = reflection_text(desc != NULL ? desc->name : NULL);
        if (name == NULL) Py_CLEAR(enum_names);
        else PyTuple_SET_ITEM(enum_names, (Py_ssize_t)i, name);
    }
    PyObject *out = enum_names != NULL ? PyTuple_Pack(2, struct_names, enum_names) : NULL;
    Py_XDECREF(struct_names);
    Py_XDECREF(enum_names);
    return out;
}

/* RuntimeCore._heap_type_names() -> (struct names, enum names): every struct
 * and enum registered here (zs_struct_register, zs_enum_register), in
 * registration order; a stub generator lists a host's types with it. */
PyObject *zpy_rt_type_names(PyObject *self, PyObject *unused) {
    (void)unused;
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (zpy_rt_open(rt, 0) == NULL) return NULL;
    return reflection_read(rt, NULL, type_names_now);
}

/* RuntimeCore._heap_find_class(name: bytes) -> the id of the first class
 * registered under that UTF-8 name, or None (the resolver is not asked: a
 * script class not registered yet is not the host's). */
PyObject *zpy_rt_find_class(PyObject *self, PyObject *name) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (!PyBytes_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "_heap_find_class: the name must be bytes");
        return NULL;
    }
    if (zpy_rt_open(rt, 0) == NULL) return NULL;
    size_t length = (size_t)PyBytes_GET_SIZE(name);
    uint32_t count = zs_class_count(rt->native);
    for (uint32_t i = 0; i < count; i++) {
        const char *text = zs_class_name(zs_class_by_id(rt->native, i));
        if (text != NULL && strlen(text) == length &&
            memcmp(text, PyBytes_AS_STRING(name), length) == 0)
            return PyLong_FromUnsignedLong(i);
    }
    Py_RETURN_NONE;
}

/* What a description's native type is: (kind, size, flags), or None for
 * plain data described without one. */
static PyObject *reflection_type_traits(const zs_type *type) {
    if (type == NULL) Py_RETURN_NONE;
    return Py_BuildValue("(kkk)", (unsigned long)zs_type_kind_of(type),
                         (unsigned long)zs_type_size(type), (unsigned long)zs_type_flags(type));
}

/* One property, member or parameter: (name, type, offset, direction,
 * native type's address or 0, its traits or None). */
static PyObject *reflection_property(const zs_property_desc *row) {
    PyObject *name = reflection_text(row->name);
    PyObject *type = name ? reflection_text(row->type) : NULL;
    PyObject *traits = type ? reflection_type_traits(row->native) : NULL;
    PyObject *out = traits ? Py_BuildValue("(OOkkKO)", name, type, (unsigned long)row->offset,
                                           (unsigned long)row->direction,
                                           (unsigned long long)(uintptr_t)row->native, traits)
                           : NULL;
    Py_XDECREF(name);
    Py_XDECREF(type);
    Py_XDECREF(traits);
    return out;
}

/* A tuple of `count` rows (reflection_property each). */
static PyObject *reflection_properties(const zs_property_desc *rows, uint32_t count) {
    PyObject *out = PyTuple_New((Py_ssize_t)(rows != NULL ? count : 0));
    for (uint32_t i = 0; out != NULL && rows != NULL && i < count; i++) {
        PyObject *row = reflection_property(&rows[i]);
        if (row == NULL) Py_CLEAR(out);
        else PyTuple_SET_ITEM(out, (Py_ssize_t)i, row);
    }
    return out;
}

/* One function: (name, entry's address, user, flags, block size,
 * parameters). */
static PyObject *reflection_function(const zs_function_desc *function) {
    PyObject *name = reflection_text(function->name);
    PyObject *params = name ? reflection_properties(function->params, function->param_count) : NULL;
    PyObject *out = params ? Py_BuildValue("(OKKkkO)", name,
                                           (unsigned long long)(uintptr_t)function->entry,
                                           (unsigned long long)(uintptr_t)function->user,
                                           (unsigned long)function->flags,
                                           (unsigned long)function->block_size, params)
                           : NULL;
    Py_XDECREF(name);
    Py_XDECREF(params);
    return out;
}

/* The description of class `*arg` (a uint64_t id) of an open runtime
 * (reflection_read). */
static PyObject *describe_class_now(zpy_runtime_core *rt, const void *arg) {
    uint64_t id = *(const uint64_t *)arg;
    const zs_class *cls = id < zs_class_count(rt->native) ? zs_class_by_id(rt->native, (uint32_t)id)
                                                          : NULL;
    if (cls == NULL) {
        PyErr_Format(PyExc_ValueError, "_heap_describe_class: no class has id %llu",
                     (unsigned long long)id);
        return NULL;
    }
    const zs_class_desc *desc = zs_class_describe(cls);
    const zs_class *parent = zs_class_parent(cls);
    PyObject *name = reflection_text(desc != NULL ? desc->name : zs_class_name(cls));
    PyObject *parent_name = NULL, *parent_id = NULL, *properties = NULL, *functions = NULL;
    if (name != NULL) {
        parent_name = parent != NULL ? reflection_text(zs_class_name(parent)) : Py_NewRef(Py_None);
        parent_id = parent != NULL ? PyLong_FromUnsignedLong(zs_class_id(parent))
                                   : Py_NewRef(Py_None);
    }
    if (parent_name != NULL && parent_id != NULL)
        properties = desc != NULL ? reflection_properties(desc->properties, desc->property_count)
                                  : PyTuple_New(0);
    uint32_t function_count = desc != NULL && desc->functions != NULL ? desc->function_count : 0;
    if (properties != NULL) functions = PyTuple_New((Py_ssize_t)function_count);
    for (uint32_t i = 0; functions != NULL && i < function_count; i++) {
        PyObject *function = reflection_function(&desc->functions[i]);
        if (function == NULL) Py_CLEAR(functions);
        else PyTuple_SET_ITEM(functions, (Py_ssize_t)i, function);
    }
    PyObject *out = functions
                        ? Py_BuildValue("(OOOkKOO)", name, parent_name, parent_id,
                                        (unsigned long)zs_class_instance_size(cls),
                                        (unsigned long long)(uintptr_t)cls, properties, functions)
                        : NULL;
    Py_XDECREF(name);
    Py_XDECREF(parent_name);
    Py_XDECREF(parent_id);
    Py_XDECREF(properties);
    Py_XDECREF(functions);
    return out;
}

/* RuntimeCore._heap_describe_class(class_id) -> (name, parent's name or None,
 * parent's id or None, instance size, address, properties, functions):
 * the description the class was registered with, read whole. */
PyObject *zpy_rt_describe_class(PyObject *self, PyObject *class_id) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    uint64_t id;
    if (zpy_rt_handle_arg(class_id, &id) < 0 || zpy_rt_open(rt, 0) == NULL) return NULL;
    return reflection_read(rt, &id, describe_class_now);
}

/* ---- structs, enums and native types -------------------------------------------- */

/* The struct named `name` (UTF-8) of an open runtime (reflection_read). */
static PyObject *find_struct_now(zpy_runtime_core *rt, const void *name) {
    const zs_struct_desc *desc = NULL;
    const zs_type *type = NULL;
    if (zs_find_struct(rt->native, name, &desc, &type) != ZS_OK || desc == NULL) Py_RETURN_NONE;
    PyObject *text = reflection_text(desc->name);
    PyObject *members = text ? reflection_properties(desc->members, desc->member_count) : NULL;
    PyObject *out = members ? Py_BuildValue("(OkkOK)", text, (unsigned long)desc->size,
                                            (unsigned long)desc->align, members,
                                            (unsigned long long)(uintptr_t)type)
                            : NULL;
    Py_XDECREF(text);
    Py_XDECREF(members);
    return out;
}

/* RuntimeCore._heap_find_struct(name: bytes) -> (name, size, align, members, native
 * type's address) of the struct registered under that UTF-8 name, or None. */
PyObject *zpy_rt_find_struct(PyObject *self, PyObject *name) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (!PyBytes_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "_heap_find_struct: the name must be bytes");
        return NULL;
    }
    if (zpy_rt_open(rt, 0) == NULL) return NULL;
    return reflection_read(rt, PyBytes_AS_STRING(name), find_struct_now);
}

/* The enum named `name` (UTF-8) of an open runtime (reflection_read). */
static PyObject *find_enum_now(zpy_runtime_core *rt, const void *name) {
    const zs_enum_desc *desc = NULL;
    if (zs_find_enum(rt->native, name, &desc) != ZS_OK || desc == NULL) Py_RETURN_NONE;
    uint32_t count = desc->items != NULL ? desc->item_count : 0;
    PyObject *items = PyTuple_New((Py_ssize_t)count);
    for (uint32_t i = 0; items != NULL && i < count; i++) {
        PyObject *text = reflection_text(desc->items[i].name);
        PyObject *item = text ? Py_BuildValue("(OL)", text, (long long)desc->items[i].value) : NULL;
        Py_XDECREF(text);
        if (item == NULL) Py_CLEAR(items);
        else PyTuple_SET_ITEM(items, (Py_ssize_t)i, item);
    }
    PyObject *text = items ? reflection_text(desc->name) : NULL;
    PyObject *underlying = text ? reflection_text(desc->underlying) : NULL;
    PyObject *out = underlying ? PyTuple_Pack(3, text, underlying, items) : NULL;
    Py_XDECREF(items);
    Py_XDECREF(text);
    Py_XDECREF(underlying);
    return out;
}

/* RuntimeCore._heap_find_enum(name: bytes) -> (name, underlying type's text, items
 * as (name, value)) of the enum registered under that UTF-8 name, or None. */
PyObject *zpy_rt_find_enum(PyObject *self, PyObject *name) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (!PyBytes_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "_heap_find_enum: the name must be bytes");
        return NULL;
    }
    if (zpy_rt_open(rt, 0) == NULL) return NULL;
    return reflection_read(rt, PyBytes_AS_STRING(name), find_enum_now);
}

/* Whether values of `kind` hold delegate bindings (their callables are
 * counted per binding: a class's default copy of them would keep the
 * callables for the runtime's life, so they are left to the managed side). */
static int holds_callables(const zpyv_kind *kind) {
    if (kind == NULL) return 0;
    if (kind->native_kind == ZS_TYPE_DELEGATE || kind->native_kind == ZS_TYPE_MULTICAST ||
        kind->native_kind == ZS_TYPE_SPARSE)
        return 1;
    if (kind->code == ZPYV_STRUCT) {
        for (uint32_t i = 0; i < kind->member_count; i++)
            if (holds_callables(kind->members[i].kind)) return 1;
        return 0;
    }
    return holds_callables(kind->element) || holds_callables(kind->value);
}

/* RuntimeCore._heap_class_defaults(cls, image, members, source) -> the
 * offsets of the members made defaults: the defaults every new object of
 * the native class at address `cls` starts with, however it is made
 * (zs_class_set_defaults): `image` (bytes of plain data after the header),
 * then each member (offset, kind) whose native type holds no references
 * and no delegate bindings, copied from the live object `source` (a handle, 0 when there is no
 * member), which the managed side made and initialised. */
PyObject *zpy_rt_class_defaults(PyObject *self, PyObject *args) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    unsigned long long address;
    PyObject *image, *members, *source_arg;
    if (!PyArg_ParseTuple(args, "KO!O!O:_heap_class_defaults", &address, &PyBytes_Type, &image,
                          &PyTuple_Type, &members, &source_arg))
        return NULL;
    zs_ref source = ZS_NULL_REF;
    if (zpy_rt_handle_arg(source_arg, &source) < 0) return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(members);
    if (PyBytes_GET_SIZE(image) > UINT32_MAX || count > UINT32_MAX)
        return PyErr_Format(PyExc_OverflowError, "_heap_class_defaults: too large");
    zs_type_member *rows = PyMem_Calloc((size_t)count + 1, sizeof *rows);
    PyObject *kinds = PyTuple_New(count); /* the members' kinds, checked */
    PyObject *taken = NULL;
    if (rows == NULL || kinds == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *row = PyTuple_GET_ITEM(members, i), *kind;
        unsigned int offset;
        if (!PyTuple_Check(row) ||
            !PyArg_ParseTuple(row, "IO:_heap_class_defaults member", &offset, &kind))
            goto done;
        if (!zpyv_is_kind(rt->state, kind)) {
            PyErr_SetString(PyExc_TypeError, "_heap_class_defaults: a member is (offset, Kind)");
            goto done;
        }
        rows[i].offset = offset;
        PyTuple_SET_ITEM(kinds, i, Py_NewRef(kind));
    }
    if (zpy_rt_open(rt, 0) == NULL) goto done;
    /* The native types first (registered on first use: no Python code). */
    uint32_t kept = 0;
    taken = PyTuple_New(count);
    for (Py_ssize_t i = 0; taken != NULL && i < count; i++) {
        const zpyv_kind *kind = (const zpyv_kind *)PyTuple_GET_ITEM(kinds, i);
        const zs_type *type = zpyv_native_type(rt, (zpyv_kind *)kind);
        if (type == NULL) goto fail;
        if ((zs_type_flags(type) & ZS_TYPE_HAS_REFS) || holds_callables(kind))
            continue; /* left to the managed side */
        PyObject *offset = PyLong_FromUnsignedLong(rows[i].offset);
        if (offset == NULL) goto fail;
        PyTuple_SET_ITEM(taken, (Py_ssize_t)kept, offset);
        rows[kept].offset = rows[i].offset;
        rows[kept++].type = type;
    }
    if (taken == NULL) goto fail;
    Py_SETREF(taken, PyTuple_GetSlice(taken, 0, (Py_ssize_t)kept));
    if (taken == NULL) goto fail;
    /* From here to the call, no Python code: the source resolved, used at once. */
    const zs_object *object = kept > 0 ? zs_resolve(rt->native, source) : NULL;
    if (kept > 0 && object == NULL) {
        PyErr_SetString(rt->state->expired_exception,
                        "_heap_class_defaults: the object the defaults are read from is gone");
        goto fail;
    }
    zs_status status = zs_class_set_defaults(rt->native, (const zs_class *)(uintptr_t)address,
                                             PyBytes_AS_STRING(image),
                                             (uint32_t)PyBytes_GET_SIZE(image), rows, kept, object);
    if (status == ZS_OK) goto done;
    PyObject *what = PyUnicode_FromString("setting a class's defaults");
    if (what != NULL) zpy_call_raise_status(rt->state, status, what, rt);
    Py_XDECREF(what);
fail:
    Py_CLEAR(taken);
done:
    PyMem_Free(rows);
    Py_XDECREF(kinds);
    return taken;
}

/* RuntimeCore._heap_native_type_traits(kind) -> (address, kind, size, flags) of the
 * kind's native type in this runtime (registered on first use), to compare
 * with a description's (the binder refuses a disagreement). */
PyObject *zpy_rt_native_type_traits(PyObject *self, PyObject *kind) {
    zpy_runtime_core *rt = (zpy_runtime_core *)self;
    if (!zpyv_is_kind(rt->state, kind)) {
        PyErr_SetString(PyExc_TypeError, "_heap_native_type_traits: a Kind");
        return NULL;
    }
    /* Checked first: a closed runtime's types are gone. */
    if (zpy_rt_open(rt, 0) == NULL) return NULL;
    const zs_type *type = zpyv_native_type(rt, (zpyv_kind *)kind);
    if (type == NULL) return NULL;
    return Py_BuildValue("(Kkkk)", (unsigned long long)(uintptr_t)type,
                         (unsigned long)zs_type_kind_of(type), (unsigned long)zs_type_size(type),
                         (unsigned long)zs_type_flags(type));
}

/* ---- module functions --------------------------------------------------------- */

/* status_message(status) -> the C library's text for a status. */
PyObject *zpy_module_status_message(PyObject *module, PyObject *status) {
    (void)module;
    long value = PyLong_AsLong(status);
    if (value == -1 && PyErr_Occurred()) return NULL;
    if (value < INT_MIN || value > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "status_message: not a status (out of range)");
        return NULL;
    }
    return PyUnicode_FromString(zs_status_message((zs_status)value));
}

/* object_header(obj) -> (name index, name number, outer handle) of a live
 * object conjugate's native header; its expiry error once expired. */
PyObject *zpy_module_object_header(PyObject *module, PyObject *obj) {
    zpy_core_state *state = zpy_state_of_module(module);
    if (!zpy_is_conjugate(state, obj)) {
        PyErr_Format(PyExc_TypeError, "object_header: a zs.Object, not %s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    zpy_conjugate *conjugate = (zpy_conjugate *)obj;
    if (!ZPY_CONJUGATE_IS_LIVE(conjugate)) return zpy_raise_expired(conjugate);
    const zs_object *header = (const zs_object *)conjugate->address;
    return Py_BuildValue("(kkK)", (unsigned long)header->name_index,
                         (unsigned long)header->name_number, (unsigned long long)header->outer);
}
