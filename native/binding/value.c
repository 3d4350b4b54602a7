/* Value conjugates: red views and black values (value.h), their tables of
 * cached views, expiry, scopes, and the lifetime of black values.
 *
 * Nothing in this file runs Python code between finding a native address
 * and using it. Expiry clears addresses in place without allocating; the
 * housekeeping that may run Python code (dropping references) comes after.
 */
#include "value.h"

#include <structmember.h>

/* =========================================================================
 * Views tables
 * ========================================================================= */

/* The slot of a key's probe sequence start. */
static inline uint32_t table_home(const zpyv_table *table, Py_ssize_t key) {
    return (uint32_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 40) & table->mask;
}

/* The live view cached under `key`, or NULL. */
static zpyv_value *table_get(const zpyv_table *table, Py_ssize_t key) {
    if (table == NULL || table->count == 0) return NULL;
    for (uint32_t i = table_home(table, key);; i = (i + 1) & table->mask) {
        const zpyv_entry *entry = &table->entries[i];
        if (entry->view == NULL) return NULL;
        if (entry->key == key) return entry->view;
    }
}

/* A table of `capacity` (a power of two) empty entries, or NULL. */
static zpyv_table *table_new(uint32_t capacity) {
    zpyv_table *table = PyMem_Calloc(1, sizeof *table + capacity * sizeof(zpyv_entry));
    if (table != NULL) table->mask = capacity - 1;
    return table;
}

/* Insert an entry known to be absent (no growth). */
static void table_insert(zpyv_table *table, Py_ssize_t key, zpyv_value *view) {
    uint32_t i = table_home(table, key);
    while (table->entries[i].view != NULL) i = (i + 1) & table->mask;
    table->entries[i].key = key;
    table->entries[i].view = view;
    table->count++;
}

/* Cache `view` under `key` in *slot's table (made or grown as needed; the key
 * is absent). PyMem only: no Python code runs. -1 when out of memory. */
static int table_put(zpyv_table **slot, Py_ssize_t key, zpyv_value *view) {
    zpyv_table *table = *slot;
    if (table == NULL || (table->count + 1) * 4 > (table->mask + 1) * 3) {
        uint32_t capacity = table == NULL ? 4 : (table->mask + 1) * 2;
        zpyv_table *grown = table_new(capacity);
        if (grown == NULL) return -1;
        for (uint32_t i = 0; table != NULL && i <= table->mask; i++)
            if (table->entries[i].view != NULL)
                table_insert(grown, table->entries[i].key, table->entries[i].view);
        PyMem_Free(table);
        *slot = table = grown;
    }
    table_insert(table, key, view);
    return 0;
}

/* Remove the entry of `view` under `key`, if it is there (backward-shift
 * deletion keeps every probe sequence unbroken). */
static void table_remove(zpyv_table *table, Py_ssize_t key, const zpyv_value *view) {
    if (table == NULL || table->count == 0) return;
    uint32_t i = table_home(table, key);
    for (;; i = (i + 1) & table->mask) {
        if (table->entries[i].view == NULL) return;
        if (table->entries[i].key == key && table->entries[i].view == view) break;
    }
    uint32_t hole = i;
    for (uint32_t next = (hole + 1) & table->mask; table->entries[next].view != NULL;
         next = (next + 1) & table->mask) {
        uint32_t home = table_home(table, table->entries[next].key);
        /* Move next into the hole unless its home lies in (hole, next]. */
        int stays = hole <= next ? (home > hole && home <= next) : (home > hole || home <= next);
        if (!stays) {
            table->entries[hole] = table->entries[next];
            hole = next;
        }
    }
    table->entries[hole].view = NULL;
    table->count--;
}

zpyv_value *zpyv_table_lookup(const zpyv_table *table, Py_ssize_t key) {
    return table_get(table, key);
}

void zpyv_table_free(zpyv_table *table) {
    if (table == NULL) return;
    /* Its holder is being deallocated (or its table was expired): a live
       view would hold it, so what is left is parked. Detached first: the
       release runs Python code, which can reach neither the holder nor its
       table any more. */
    for (uint32_t i = 0; i <= table->mask && table->count > 0; i++) {
        zpyv_value *view = table->entries[i].view;
        if (view == NULL) continue;
        assert(view->flags & ZPYV_V_PARKED);
        table->entries[i].view = NULL;
        table->count--;
        view->flags &= ~(ZPYV_V_CACHED | ZPYV_V_PARKED);
        view->parent = NULL; /* borrowed while parked: the holder going */
        view->address = NULL;
        Py_DECREF(view); /* the table's reference */
    }
    PyMem_Free(table);
}

/* The table slot of a live holder (an object or value conjugate), or NULL. */
static zpyv_table **holder_table(zpy_core_state *state, PyObject *holder) {
    if (holder == NULL) return NULL;
    if (zpy_is_value(state, holder)) return &((zpyv_value *)holder)->views;
    if (zpy_is_conjugate(state, holder) && ZPY_CONJUGATE_IS_LIVE((zpy_conjugate *)holder))
        return &((zpy_conjugate *)holder)->u.views;
    return NULL;
}

/* =========================================================================
 * Expiry (in place: no Python code, no allocation)
 * ========================================================================= */

/* Mark one value expired, without touching its views. */
static void mark_expired(zpyv_value *value, PyObject *reason) {
    value->address = NULL;
    value->reason = Py_NewRef(reason); /* an interned module string: nothing runs */
}

/* An expired view that was parked has left its table, which owned it:
 * free it now if that runs no Python code (its kind, runtime and type are
 * held elsewhere, so dropping them frees nothing, and its class has no
 * finaliser), else queue it for zpyv_bury. Expiry calls this: no Python
 * code, no allocation. */
static void release_parked(zpyv_value *view) {
    assert((view->flags & ZPYV_V_PARKED) && !(view->flags & ZPYV_V_CACHED));
    assert(view->address == NULL && view->weakrefs == NULL);
    view->flags &= ~ZPYV_V_PARKED;
    view->parent = NULL; /* borrowed while parked */
    PyTypeObject *type = Py_TYPE(view);
    if (Py_REFCNT(view->kind) > 1 && Py_REFCNT(view->runtime) > 1 && Py_REFCNT(type) > 1 &&
        type->tp_finalize == NULL && type->tp_del == NULL &&
        (view->views == NULL || view->views->count == 0)) {
        Py_DECREF(view); /* frees memory and drops references only */
        return;
    }
    zpy_runtime_core *rt = view->runtime;
    view->next = rt->graveyard;
    rt->graveyard = view;
}

void zpyv_bury(zpy_runtime_core *rt) {
    while (rt->graveyard != NULL) { /* releasing may queue more: taken too */
        zpyv_value *view = rt->graveyard;
        rt->graveyard = view->next;
        view->next = NULL;
        Py_DECREF(view);
    }
}

void zpyv_expire_table(zpyv_table *table, PyObject *reason) {
    if (table == NULL || table->count == 0) return;
    for (uint32_t i = 0; i <= table->mask && table->count > 0; i++) {
        zpyv_value *view = table->entries[i].view;
        if (view == NULL) continue;
        table->entries[i].view = NULL;
        table->count--;
        view->flags &= ~ZPYV_V_CACHED;
        zpyv_expire_in_place(view, reason);
        if (view->flags & ZPYV_V_PARKED) release_parked(view);
    }
    assert(table->count == 0);
}

void zpyv_expire_in_place(zpyv_value *value, PyObject *reason) {
    if (value->reason != NULL) return;
    mark_expired(value, reason);
    zpy_core_state *state = value->runtime->state;
    /* Below it, views expire because it did; a closed runtime is the reason
       of everything it held. */
    zpyv_expire_table(value->views, reason == state->reason_closed ? reason : state->reason_parent);
}

void zpyv_expire_key(zpyv_table *table, Py_ssize_t key, PyObject *reason) {
    zpyv_value *view = table_get(table, key);
    if (view == NULL) return;
    table_remove(table, key, view);
    view->flags &= ~ZPYV_V_CACHED;
    zpyv_expire_in_place(view, reason);
    if (view->flags & ZPYV_V_PARKED) release_parked(view);
}

/* _core.scope_opened() -> its serial: a zs.scope() opened (counted: while
 * none is open anywhere, views are not registered; the serial orders it
 * among call scopes, value.h). */
static PyObject *scope_opened(PyObject *module, PyObject *unused) {
    (void)unused;
    zpy_core_state *state = zpy_state_of_module(module);
    state->open_scopes++;
    return PyLong_FromUnsignedLongLong(++state->scope_serial);
}

/* _core.scope_closed(views): a zs.scope() ended; its views expire. */
static PyObject *scope_closed(PyObject *module, PyObject *views) {
    if (!PyList_CheckExact(views)) {
        PyErr_SetString(PyExc_TypeError, "scope_closed: a list of views");
        return NULL;
    }
    zpy_core_state *state = zpy_state_of_module(module);
    if (state->open_scopes > 0) state->open_scopes--;
    zpyv_expire_scope(state, views);
    Py_RETURN_NONE;
}

/* Two passes, so that a view obtained in the scope reports the scope as its
 * reason even when its parent was obtained there too. No Python code. */
void zpyv_expire_scope(zpy_core_state *state, PyObject *views) {
    Py_ssize_t count = PyList_GET_SIZE(views);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyList_GET_ITEM(views, i);
        if (!zpy_is_value(state, item)) continue;
        zpyv_value *view = (zpyv_value *)item;
        if (view->reason != NULL) continue;
        mark_expired(view, state->reason_scope);
        if (view->flags & ZPYV_V_CACHED) {
            zpyv_table **slot = holder_table(state, view->parent);
            if (slot != NULL) table_remove(*slot, view->key, view);
            view->flags &= ~ZPYV_V_CACHED;
        }
    }
    for (Py_ssize_t i = 0; i < count && i < PyList_GET_SIZE(views); i++) {
        PyObject *item = PyList_GET_ITEM(views, i);
        if (zpy_is_value(state, item))
            zpyv_expire_table(((zpyv_value *)item)->views, state->reason_parent);
    }
}

/* Raise ExpiredConjugateError for an expired value (or a pending view). */
PyObject *zpyv_raise_expired(zpyv_value *value) {
    zpy_core_state *state = value->runtime->state;
    PyObject *reason = value->reason ? value->reason : state->reason_structure;
    const char *colour = value->flags & ZPYV_V_WAS_BLACK ? "(black value)" : "(red view)";
    PyObject *name = ((PyHeapTypeObject *)Py_TYPE(value))->ht_name;
    PyObject *message = PyUnicode_FromFormat("%U %s has expired: %U", name, colour, reason);
    if (message != NULL) {
        PyErr_SetObject(state->expired_exception, message);
        Py_DECREF(message);
    }
    return NULL;
}

/* =========================================================================
 * Scopes
 * ========================================================================= */

int zpyv_call_scope_open(zpy_core_state *state, zpyv_call_scope *scope) {
    scope->views = NULL;
    scope->serial = ++state->scope_serial;
    scope->thread = PyThread_get_thread_ident();
    scope->newer = NULL;
    scope->older = state->call_scopes;
    if (scope->older != NULL) scope->older->newer = scope;
    state->call_scopes = scope;
    state->open_scopes++;
    return 0;
}

void zpyv_call_scope_close(zpy_core_state *state, zpyv_call_scope *scope) {
    /* Other threads' scopes may have opened since (the call ran Python
       code, which lets them run): unlinked wherever it is. */
    if (scope->newer != NULL) scope->newer->older = scope->older;
    else state->call_scopes = scope->older;
    if (scope->older != NULL) scope->older->newer = scope->newer;
    assert(state->open_scopes > 0);
    state->open_scopes--;
    if (scope->views != NULL) {
        zpyv_expire_scope(state, scope->views);
        Py_CLEAR(scope->views);
    }
}

/* This thread's innermost open call scope, or NULL. */
static zpyv_call_scope *innermost_call_scope(const zpy_core_state *state) {
    unsigned long thread = PyThread_get_thread_ident();
    zpyv_call_scope *scope = state->call_scopes;
    while (scope != NULL && scope->thread != thread) scope = scope->older;
    return scope;
}

/* Record a new view in the innermost open scope, if any: this thread's
 * innermost call scope unless a zs.scope() was opened inside it. */
static int register_in_scope(zpy_core_state *state, zpyv_value *view) {
    if (state->scopes == NULL || state->open_scopes == 0)
        return 0; /* no scope is open anywhere: none to register in */
    PyObject *scopes = NULL;
    if (PyContextVar_Get(state->scopes, NULL, &scopes) < 0) return -1;
    /* The context's innermost zs.scope(): an entry (views, serial), values.py. */
    PyObject *innermost = NULL;
    uint64_t serial = 0;
    if (scopes != NULL && PyTuple_CheckExact(scopes) && PyTuple_GET_SIZE(scopes) > 0) {
        PyObject *entry = PyTuple_GET_ITEM(scopes, PyTuple_GET_SIZE(scopes) - 1);
        if (PyTuple_CheckExact(entry) && PyTuple_GET_SIZE(entry) == 2 &&
            PyList_CheckExact(PyTuple_GET_ITEM(entry, 0)) &&
            PyLong_CheckExact(PyTuple_GET_ITEM(entry, 1))) {
            innermost = PyTuple_GET_ITEM(entry, 0);
            serial = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(entry, 1));
            if (serial == (uint64_t)-1 && PyErr_Occurred()) {
                Py_DECREF(scopes);
                return -1;
            }
        }
    }
    int result = 0;
    zpyv_call_scope *call = innermost_call_scope(state);
    if (call != NULL && (innermost == NULL || serial < call->serial)) {
        if (call->views == NULL) {
            /* The collector may run here, and its callbacks make the list first: keep theirs. */
            PyObject *views = PyList_New(0);
            if (views == NULL) result = -1;
            else if (call->views == NULL) call->views = views;
            else Py_DECREF(views); /* empty: frees nothing that runs code */
        }
        if (result == 0) result = PyList_Append(call->views, (PyObject *)view);
    } else if (innermost != NULL) {
        result = PyList_Append(innermost, (PyObject *)view);
    }
    Py_XDECREF(scopes);
    return result;
}

/* =========================================================================
 * Views
 * ========================================================================= */

/* A new value conjugate of `kind` with nothing set (address NULL). */
static zpyv_value *value_alloc(zpy_runtime_core *rt, zpyv_kind *kind, Py_ssize_t inline_bytes) {
    PyTypeObject *cls = kind->cls;
    if (!(kind->flags & ZPYV_VALUE_CLASS)) {
        PyErr_Format(PyExc_TypeError, "%U values have no conjugate class", kind->what);
        return NULL;
    }
    /* Value classes are not tracked by the cycle collector (value_class_init):
       this allocation cannot run it. */
    zpyv_value *value = (zpyv_value *)cls->tp_alloc(cls, inline_bytes);
    if (value == NULL) return NULL;
    value->kind = (zpyv_kind *)Py_NewRef((PyObject *)kind);
    value->runtime = (zpy_runtime_core *)Py_NewRef((PyObject *)rt);
    value->key = -1;
    return value;
}

PyObject *zpyv_copy_out(zpy_runtime_core *rt, zpyv_kind *kind, const char *at) {
    /* A scalar is the smallest capture: zpy_scalar_load copies its bytes into
       a C local before it makes the int or float. */
    if (kind->code == ZPYV_SCALAR) return zpy_scalar_load((zpy_scalar_kind)kind->scalar, at);
    zpyv_staged staged = {0};
    if (zpyv_capture(rt, kind, at, &staged) < 0) return PyErr_NoMemory();
    /* From here on the copy is private: building it may run Python code. */
    PyObject *result = zpyv_build(rt, kind, &staged);
    zpyv_release(kind, &staged);
    return result;
}

/* A new view of the place `find` finds in `parent`, cached there under
 * `key` (where it was found last; no view is cached there yet). `parkable`:
 * ZPYV_V_PARKABLE for a member's view, else 0. */
static PyObject *new_view(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *parent, zs_ref owner,
                          zpyv_finder find, const void *place, Py_ssize_t key, uint32_t parkable) {
    zpy_core_state *state = rt->state;
    zpyv_value *view = value_alloc(rt, kind, 0);
    if (view == NULL) return NULL;
    view->parent = Py_NewRef(parent);
    view->owner = owner;
    view->key = key;
    if (register_in_scope(state, view) < 0) {
        Py_DECREF(view);
        return NULL;
    }
    /* Found again (registering may run Python code that moves it); no Python code after. */
    char *at = find(parent, place, &key);
    zpyv_table **slot = at != NULL ? holder_table(state, parent) : NULL;
    if (at == NULL || slot == NULL) {
        if (at != NULL)
            PyErr_SetString(PyExc_SystemError, "the parent expired while its view was made");
        mark_expired(view, state->reason_parent);
        Py_DECREF(view);
        return NULL;
    }
    zpyv_value *found = table_get(*slot, key);
    if (found != NULL && (found->flags & ZPYV_V_PARKED)) {
        /* That Python code made the place's view and dropped it: this new
           one, registered in the scope, takes its place. */
        table_remove(*slot, key, found);
        found->flags &= ~ZPYV_V_CACHED;
        mark_expired(found, state->reason_parent);
        release_parked(found);
        found = NULL;
    }
    if (found != NULL) {
        /* That Python code made the place's view itself: it is the one. */
        mark_expired(view, state->reason_parent);
        Py_DECREF(view);
        return Py_NewRef((PyObject *)found);
    }
    if (table_put(slot, key, view) < 0) {
        mark_expired(view, state->reason_parent);
        Py_DECREF(view);
        return PyErr_NoMemory();
    }
    view->key = key;
    view->flags |= ZPYV_V_CACHED | parkable;
    view->address = at;
    return (PyObject *)view;
}

/* Take a parked view back for a reader: the table's reference becomes the
 * reader's, and the view holds its parent again. */
static inline void unpark(zpyv_value *view, PyObject *parent) {
    assert((view->flags & ZPYV_V_PARKED) && view->parent == parent && view->address != NULL);
    view->flags &= ~ZPYV_V_PARKED;
    Py_INCREF(parent);
}

/* The view of a place in `parent` under `key`: the cached one, taken back
 * if parked, else a new one. */
static PyObject *read_place(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *parent, zs_ref owner,
                            zpyv_finder find, const void *place, Py_ssize_t key,
                            uint32_t parkable) {
    zpyv_table **slot = holder_table(rt->state, parent);
    if (slot == NULL) return PyErr_Format(PyExc_SystemError, "no views table");
    zpyv_value *found = table_get(*slot, key);
    if (found == NULL) return new_view(rt, kind, parent, owner, find, place, key, parkable);
    assert(found->address != NULL);
    if (!(found->flags & ZPYV_V_PARKED)) return Py_NewRef((PyObject *)found);
    /* Parked: the table's reference becomes the reader's, and the view
       holds its parent again. Then, as a new view, it goes in the current
       scope. */
    unpark(found, parent);
    zpy_core_state *state = rt->state;
    if (state->open_scopes == 0) return (PyObject *)found;
    if (register_in_scope(state, found) < 0) {
        Py_DECREF(found);
        return NULL;
    }
    if (found->address != NULL) return (PyObject *)found;
    /* Registering ran Python code that expired it: the place as it is now. */
    Py_DECREF(found);
    char *at = find(parent, place, &key);
    return at == NULL ? NULL : read_place(rt, kind, parent, owner, find, place, key, parkable);
}

/* A place at a fixed key, found by a zpyv_locator (a zpyv_finder's place). */
typedef struct fixed_place {
    zpyv_locator locate;
    Py_ssize_t key;
} fixed_place;

static char *find_fixed(PyObject *parent, const void *place, Py_ssize_t *key) {
    const fixed_place *fixed = place;
    *key = fixed->key;
    return fixed->locate(parent, fixed->key);
}

/* zpyv_read, with a new view `parkable` or not. */
static PyObject *read_fixed(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *parent, Py_ssize_t key,
                            zs_ref owner, zpyv_locator locate, uint32_t parkable) {
    if (!(kind->flags & ZPYV_VIEW)) {
        char *at = locate(parent, key);
        return at == NULL ? NULL : zpyv_copy_out(rt, kind, at);
    }
    if (holder_table(rt->state, parent) == NULL)
        return locate(parent, key) == NULL ? NULL
                                           : PyErr_Format(PyExc_SystemError, "no views table");
    fixed_place place = {locate, key};
    return read_place(rt, kind, parent, owner, find_fixed, &place, key, parkable);
}

PyObject *zpyv_read(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *parent, Py_ssize_t key,
                    zs_ref owner, zpyv_locator locate) {
    return read_fixed(rt, kind, parent, key, owner, locate, 0);
}

PyObject *zpyv_read_member(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *parent,
                           zpyv_table **views, Py_ssize_t key, zs_ref owner, zpyv_locator locate) {
    assert(views == holder_table(rt->state, parent));
    if (rt->graveyard != NULL) {
        zpyv_bury(rt);                           /* nothing located yet: Python code may run */
        views = holder_table(rt->state, parent); /* and may have expired the parent */
    }
    if (kind->flags & ZPYV_VIEW) {
        /* The hot path: the member's view is cached, or parked with no scope
           open to register it in (read_place does the rest). */
        zpyv_value *found = views != NULL ? table_get(*views, key) : NULL;
        if (found != NULL && !(found->flags & ZPYV_V_PARKED)) return Py_NewRef((PyObject *)found);
        if (found != NULL && rt->state->open_scopes == 0) {
            unpark(found, parent);
            return (PyObject *)found;
        }
    }
    return read_fixed(rt, kind, parent, key, owner, locate, ZPYV_PARKING ? ZPYV_V_PARKABLE : 0);
}

PyObject *zpyv_read_at(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *parent, zs_ref owner,
                       zpyv_finder find, const void *place) {
    Py_ssize_t key;
    char *at = find(parent, place, &key);
    if (at == NULL) return NULL;
    if (!(kind->flags & ZPYV_VIEW)) return zpyv_copy_out(rt, kind, at);
    return read_place(rt, kind, parent, owner, find, place, key, 0);
}

PyObject *zpyv_block_view(zpy_runtime_core *rt, zpyv_kind *kind, char *address) {
    zpyv_value *view = value_alloc(rt, kind, 0);
    if (view != NULL) view->address = address;
    return (PyObject *)view;
}

/* =========================================================================
 * Black values
 * ========================================================================= */

/* Link a new black value into its runtime's black list. */
static void black_link(zpyv_value *value) {
    zpy_runtime_core *rt = value->runtime;
    value->prev = NULL;
    value->next = rt->blacks;
    if (rt->blacks != NULL) rt->blacks->prev = value;
    rt->blacks = value;
}

/* Unlink a black value (it stops being black). */
static void black_unlink(zpyv_value *value) {
    if (!(value->flags & ZPYV_V_BLACK)) return;
    zpy_runtime_core *rt = value->runtime;
    if (value->prev != NULL) value->prev->next = value->next;
    else rt->blacks = value->next;
    if (value->next != NULL) value->next->prev = value->prev;
    value->prev = value->next = NULL;
    value->flags &= ~ZPYV_V_BLACK;
    if (value->flags & ZPYV_V_INLINE) {
        assert(rt->inline_blacks > 0);
        rt->inline_blacks--;
    }
}

/* Raise for a closed runtime; returns NULL. */
static void *closed_error(zpy_runtime_core *rt) {
    PyErr_SetString(rt->state->expired_exception, "the runtime has been closed");
    return NULL;
}

zpyv_value *zpyv_new_black(zpy_runtime_core *rt, zpyv_kind *kind) {
    if (rt->native == NULL || rt->closing) return closed_error(rt);
    if (rt->deferred_count > 0) zpyv_flush(rt); /* a safe point: the frees finalisers queued */
    if (kind->flags & ZPYV_BITWISE) {           /* inline: nothing native to allocate */
        zpyv_value *value = value_alloc(
            rt, kind, (Py_ssize_t)(ZPYV_INLINE_OFFSET - sizeof(zpyv_value) + kind->size));
        if (value == NULL) return NULL;
        value->address = (char *)value + ZPYV_INLINE_OFFSET; /* zeroed by tp_alloc */
        value->flags = ZPYV_V_BLACK | ZPYV_V_INLINE | ZPYV_V_WAS_BLACK;
        rt->inline_blacks++;
        black_link(value);
        return value;
    }
    /* Also drop the callables no binding holds any more (dropping one may
       run Python code: before anything native is held). */
    if (rt->callable_count > 0 && zpyv_callables_drain(rt) < 0) return NULL;
    /* A finaliser the drain ran may have closed the runtime. From here to
       zs_value_new, no Python code runs. */
    if (rt->native == NULL || rt->closing) return closed_error(rt);
    const zs_type *type = zpyv_native_type(rt, kind);
    if (type == NULL) return NULL;
    zpyv_value *value = value_alloc(rt, kind, 0);
    if (value == NULL) return NULL;
    zs_ref handle = ZS_NULL_REF;
    void *block = NULL;
    zs_status status = zs_value_new(rt->native, type, &handle, &block);
    if (status != ZS_OK) {
        Py_DECREF(value);
        return (zpyv_value *)zpyv_refused(rt, status, kind->what);
    }
    value->address = block;
    value->black = handle;
    value->flags = ZPYV_V_BLACK | ZPYV_V_WAS_BLACK;
    black_link(value);
    return value;
}

/* Free a black value's native block now (dispose) or at the next safe
 * point (finalisation: rule 9 of docs/design.md, a finaliser only queues). */
static void black_free(zpyv_value *value, int now) {
    zpy_runtime_core *rt = value->runtime;
    zs_ref handle = value->black;
    value->black = ZS_NULL_REF;
    black_unlink(value);
    if (handle == ZS_NULL_REF || rt->native == NULL)
        return; /* inline, or the runtime freed everything when it closed */
    if (now) {
        zs_value_free(rt->native, handle);
        return;
    }
    if (rt->deferred_count == rt->deferred_capacity) {
        uint32_t capacity = rt->deferred_capacity ? rt->deferred_capacity * 2 : 64;
        zs_ref *grown = PyMem_Realloc(rt->deferred, capacity * sizeof *grown);
        if (grown == NULL) return; /* out of memory in a finaliser: the block lives until close */
        rt->deferred = grown;
        rt->deferred_capacity = capacity;
    }
    rt->deferred[rt->deferred_count++] = handle;
    rt->flush_pending = 1;
}

void zpyv_flush(zpy_runtime_core *rt) {
    rt->flush_pending = 0;
    if (rt->native == NULL) {
        rt->deferred_count = 0;
        return;
    }
    while (rt->deferred_count > 0) zs_value_free(rt->native, rt->deferred[--rt->deferred_count]);
}

void zpyv_expire_blacks(zpy_runtime_core *rt, PyObject *reason, int free_blocks) {
    while (rt->blacks != NULL) {
        zpyv_value *value = rt->blacks;
        zpyv_expire_in_place(value, reason);
        /* Freed with the runtime, unless the runtime stays (a host's). */
        if (free_blocks && value->black != ZS_NULL_REF) zs_value_free(rt->native, value->black);
        value->black = ZS_NULL_REF;
        black_unlink(value);
    }
    rt->deferred_count = 0;
    rt->flush_pending = 0;
}

/* =========================================================================
 * The ValueConjugate type
 * ========================================================================= */

int zpyv_check(zpy_core_state *state, PyObject *object) { return zpy_is_value(state, object); }

/* Conjugates are made by this module only: a bare one has no memory. */
static PyObject *value_new(PyTypeObject *type, PyObject *args, PyObject *kwargs);

/* A value conjugate goes: out of its parent's table, out of the black list
 * (its native block queued for the next safe point). */
static void value_dealloc(PyObject *self) {
    zpyv_value *value = (zpyv_value *)self;
    PyTypeObject *type = Py_TYPE(self);
#if ZPYV_PARKING
    if ((value->flags & (ZPYV_V_PARKABLE | ZPYV_V_CACHED | ZPYV_V_PARKED | ZPYV_V_BLACK)) ==
            (ZPYV_V_PARKABLE | ZPYV_V_CACHED) &&
        value->address != NULL && value->weakrefs == NULL && type->tp_dealloc == value_dealloc) {
        /* Park it (value.h): it stays in its parent's table, which takes the
           reference Python gave up; it stops holding its parent. Nothing
           ran, nothing was freed: the object is as it was, at refcount 1.
           Only for a class value_class_init made ready (its dealloc is this
           one: untracked, no finaliser), so no CPython dealloc wraps this
           call and sees the object again afterwards. */
        assert(value->parent != NULL && value->reason == NULL);
        value->flags |= ZPYV_V_PARKED;
        Py_SET_REFCNT(self, 1);
        /* May free the parent, whose table then releases this view: not
           touched after. */
        Py_DECREF(value->parent);
        return;
    }
#endif
    zpy_core_state *state = value->runtime ? value->runtime->state : NULL;
    /* Out of every place Python code could find it before anything runs
       (a weakref callback below): its parent's table, the black list. */
    if (state != NULL && (value->flags & ZPYV_V_CACHED)) {
        zpyv_table **slot = holder_table(state, value->parent);
        if (slot != NULL) table_remove(*slot, value->key, value);
        value->flags &= ~ZPYV_V_CACHED;
    }
    zpyv_table *views = value->views;
    value->views = NULL;
    if (value->runtime != NULL && (value->flags & ZPYV_V_BLACK)) black_free(value, 0);
    value->address = NULL;
    if (value->weakrefs != NULL) PyObject_ClearWeakRefs(self);
    /* A live view holds its parent: only parked views are left in the
       table, and they go with it. */
    zpyv_table_free(views);
    Py_CLEAR(value->parent);
    Py_CLEAR(value->reason);
    Py_CLEAR(value->kind);
    Py_CLEAR(value->runtime);
    type->tp_free(self);
    Py_DECREF(type);
}

/* `is_black`: owned by Python (created from Python or cloned), until disposed. */
static PyObject *value_get_black(PyObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong((((zpyv_value *)self)->flags & ZPYV_V_BLACK) != 0);
}

/* `is_expired`: True once the memory may be gone; never raises. */
static PyObject *value_get_expired(PyObject *self, void *closure) {
    (void)closure;
    zpyv_value *value = (zpyv_value *)self;
    return PyBool_FromLong(value->address == NULL);
}

/* `_expired_reason`: why it expired (None while live). */
static PyObject *value_get_reason(PyObject *self, void *closure) {
    (void)closure;
    zpyv_value *value = (zpyv_value *)self;
    if (value->address != NULL) Py_RETURN_NONE;
    return Py_NewRef(value->reason ? value->reason : value->runtime->state->reason_structure);
}

/* `_kind`: the value's kind. */
static PyObject *value_get_kind(PyObject *self, void *closure) {
    (void)closure;
    return Py_NewRef((PyObject *)((zpyv_value *)self)->kind);
}

/* `_rt`: the runtime. */
static PyObject *value_get_runtime(PyObject *self, void *closure) {
    (void)closure;
    return Py_NewRef((PyObject *)((zpyv_value *)self)->runtime);
}

/* dispose(): free a black value now (its views expire); no-op once expired.
 * A red view cannot be disposed. */
static PyObject *value_dispose(PyObject *self, PyObject *unused) {
    (void)unused;
    zpyv_value *value = (zpyv_value *)self;
    if (!(value->flags & ZPYV_V_BLACK)) {
        if (value->address == NULL) Py_RETURN_NONE;
        PyErr_Format(PyExc_TypeError,
                     "%U is a red view (owned natively) and cannot be disposed; clone() it to "
                     "get a black copy you own",
                     ((PyHeapTypeObject *)Py_TYPE(self))->ht_name);
        return NULL;
    }
    zpyv_expire_in_place(value, value->runtime->state->reason_disposed);
    black_free(value, 1);
    Py_RETURN_NONE;
}

/* clone(): a black deep copy (always black, independent of this one). */
static PyObject *value_clone(PyObject *self, PyObject *unused) {
    (void)unused;
    zpyv_value *value = (zpyv_value *)self;
    zpy_runtime_core *rt = value->runtime;
    if (zpyv_live(value) == NULL) return NULL;
    zpyv_value *copy = zpyv_new_black(rt, value->kind);
    if (copy == NULL) return NULL;
    /* zpyv_new_black may have run Python code (a finaliser, dropping a
       delegate callable): the source may have been disposed meanwhile. */
    if (zpyv_live(value) == NULL) {
        Py_DECREF(copy);
        return NULL;
    }
    if (value->kind->flags & ZPYV_BITWISE) {
        memcpy(copy->address, value->address, value->kind->size);
        return (PyObject *)copy;
    }
    const zs_type *type = zpyv_native_type(rt, value->kind);
    zs_status status = type == NULL ? ZS_E_INVALID
                                    : zs_value_assign(rt->native, ZS_NULL_REF, type, copy->address,
                                                      value->address);
    if (status != ZS_OK) {
        black_free(copy, 1);
        zpyv_expire_in_place(copy, rt->state->reason_disposed);
        Py_DECREF(copy);
        return type == NULL ? NULL : zpyv_refused(rt, status, value->kind->what);
    }
    return (PyObject *)copy;
}

/* __enter__: the value itself. */
static PyObject *value_enter(PyObject *self, PyObject *unused) {
    (void)unused;
    return Py_NewRef(self);
}

/* __exit__: dispose(). */
static PyObject *value_exit(PyObject *self, PyObject *args) {
    (void)args;
    PyObject *done = value_dispose(self, NULL);
    if (done == NULL) return NULL;
    Py_DECREF(done);
    Py_RETURN_FALSE;
}

/* __copy__ and __deepcopy__: clone(). */
static PyObject *value_copy(PyObject *self, PyObject *unused) {
    (void)unused;
    return value_clone(self, NULL);
}

static PyObject *value_deepcopy(PyObject *self, PyObject *memo) {
    (void)memo;
    return value_clone(self, NULL);
}

/* Values are native memory: not picklable (convert to a Python value first). */
static PyObject *value_reduce(PyObject *self, PyObject *protocol) {
    (void)protocol;
    PyErr_Format(PyExc_TypeError,
                 "%U conjugates cannot be pickled; convert to a Python value first",
                 ((PyHeapTypeObject *)Py_TYPE(self))->ht_name);
    return NULL;
}

/* str(): a string's text; any other value's repr. */
static PyObject *value_str(PyObject *self) {
    zpyv_value *value = (zpyv_value *)self;
    if (value->kind->code != ZPYV_STRING || value->kind->decode != NULL) return PyObject_Repr(self);
    char *at = zpyv_live(value);
    return at ? zpyv_string_text(value->kind, at) : NULL;
}

/* to_python(): a plain Python copy (dict, list, set, str...), copied out
 * under the rule (captured natively first, then built). */
static PyObject *value_to_python(PyObject *self, PyObject *unused) {
    (void)unused;
    zpyv_value *value = (zpyv_value *)self;
    char *at = zpyv_live(value);
    if (at == NULL) return NULL;
    return zpyv_copy_out(value->runtime, value->kind, at);
}

/* _assign(value): replace the whole value (stage, then write): a black
 * value or a red view alike. */
static PyObject *value_assign(PyObject *self, PyObject *argument) {
    zpyv_value *value = (zpyv_value *)self;
    zpy_runtime_core *rt = value->runtime;
    if (zpyv_live(value) == NULL) return NULL;
    zpyv_staged staged = {0};
    if (zpyv_stage(rt, value->kind, argument, &staged, value->kind->what) < 0) return NULL;
    zs_status status = ZS_E_STALE;
    if (value->address != NULL && rt->native != NULL && !rt->closing) {
        status = zpyv_emit(rt, value->kind, &staged, value->owner, value->address);
        if (status == ZS_OK) zpyv_expire_table(value->views, rt->state->reason_structure);
    }
    int expired = value->address == NULL;
    zpyv_release(value->kind, &staged);
    if (expired) return zpyv_raise_expired(value);
    if (status != ZS_OK) return zpyv_refused(rt, status, value->kind->what);
    Py_RETURN_NONE;
}

static PyGetSetDef value_getset[] = {
    {"is_black", value_get_black, NULL,
     "True for values owned by Python (created from Python or cloned), until disposed.", NULL},
    {"is_expired", value_get_expired, NULL, "True once the memory may be gone; never raises.",
     NULL},
    {"_expired_reason", value_get_reason, NULL, "Why it expired (None while live).", NULL},
    {"_kind", value_get_kind, NULL, "The value's kind.", NULL},
    {"_rt", value_get_runtime, NULL, "The runtime.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef value_methods[] = {
    {"dispose", value_dispose, METH_NOARGS,
     "Free a black value now (views into it expire); no-op if already disposed. Red views "
     "cannot be disposed: TypeError."},
    {"clone", value_clone, METH_NOARGS,
     "A black deep copy (always black, independent of this one)."},
    {"to_python", value_to_python, METH_NOARGS,
     "A plain Python copy (dict, list, set, str...), nested values converted."},
    {"_assign", value_assign, METH_O, "Replace the whole value (a copy of `value`)."},
    {"_soft_get", zpyv_soft_get, METH_NOARGS,
     "The live object at the path if it is a T, else None (SoftObjectPtr.get)."},
    {"__enter__", value_enter, METH_NOARGS, NULL},
    {"__exit__", value_exit, METH_VARARGS, NULL},
    {"__copy__", value_copy, METH_NOARGS, NULL},
    {"__deepcopy__", value_deepcopy, METH_O, NULL},
    {"__reduce_ex__", value_reduce, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef value_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(zpyv_value, weakrefs), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot value_slots[] = {
    {Py_tp_doc, "Base of every non-object conjugate (a red view or a black value)."},
    {Py_tp_new, value_new},
    {Py_tp_dealloc, value_dealloc},
    {Py_tp_str, value_str},
    {Py_tp_getset, value_getset},
    {Py_tp_methods, value_methods},
    {Py_tp_members, value_members},
    {Py_tp_setattro, zpy_explained_setattro},
    {0, NULL},
};

static PyType_Spec value_spec = {
    .name = "zsharp_py._core.ValueConjugate",
    .basicsize = sizeof(zpyv_value),
    .itemsize = 1, /* inline black values keep their bytes after the fixed part */
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = value_slots,
};

/* =========================================================================
 * Creation: Cls(...) for value classes
 * ========================================================================= */

/* The kind of a value class, or NULL (no error) when it has none yet. */
static zpyv_kind *class_kind(zpy_core_state *state, PyTypeObject *cls) {
    PyObject *kind = _PyType_Lookup(cls, state->str_zs_kind); /* borrowed, no error */
    return kind != NULL && zpyv_is_kind(state, kind) ? (zpyv_kind *)kind : NULL;
}

zpy_runtime_core *zpy_current_runtime(zpy_core_state *state) {
    PyObject *value = NULL;
    if (!state->configured) {
        PyErr_SetString(PyExc_RuntimeError, "zsharp_py._core is not configured");
        return NULL;
    }
    if (zpy_current_get(state, &value) < 0) return NULL; /* borrowed */
    if (value != NULL && zpy_is_runtime(state, value) &&
        ((zpy_runtime_core *)value)->native != NULL && !((zpy_runtime_core *)value)->closing)
        return (zpy_runtime_core *)Py_NewRef(value);
    PyObject *made = PyObject_CallNoArgs(state->current_runtime);
    if (made != NULL && !PyObject_TypeCheck(made, state->runtime_type)) {
        Py_DECREF(made);
        PyErr_SetString(PyExc_TypeError, "current_runtime() did not return a runtime");
        return NULL;
    }
    return (zpy_runtime_core *)made;
}

/* The most members quick_struct converts. */
#define QUICK_MEMBERS 16

/* A struct of plain data whose first `given` members are scalars, from exact
 * ints, floats and bools in order (`V(1.0, 2.0)`): converted with no Python
 * code into C locals, then written straight into the new inline value, where
 * the general path stages items in PyMem and emits them. 1 when it was such
 * a call (*made: the value, or NULL with an error), else 0 with nothing done
 * (the general path gives every other call and every error). */
static int quick_struct(zpy_runtime_core *rt, zpyv_kind *kind, PyObject *const *positional,
                        Py_ssize_t given, zpyv_value **made) {
    if (kind->code != ZPYV_STRUCT || kind->encode != NULL || !(kind->flags & ZPYV_BITWISE) ||
        !kind->members_set || given > QUICK_MEMBERS || (uint32_t)given > kind->member_count)
        return 0;
    zpy_scalar_bits bits[QUICK_MEMBERS];
    for (Py_ssize_t i = 0; i < given; i++) {
        const zpyv_kind *member = kind->members[i].kind;
        if (member->code != ZPYV_SCALAR || member->encode != NULL ||
            !zpy_scalar_convert_exact((zpy_scalar_kind)member->scalar, positional[i], &bits[i]))
            return 0;
    }
    zpyv_value *value = zpyv_new_black(rt, kind);
    if (value != NULL) {
        assert(value->flags & ZPYV_V_INLINE); /* bitwise: its bytes are its own */
        zpyv_initialize(kind, value->address);
        for (Py_ssize_t i = 0; i < given; i++)
            memcpy(value->address + kind->members[i].offset, &bits[i], kind->members[i].kind->size);
    }
    *made = value;
    return 1;
}

/* A new black value of `kind` from call arguments: stage them (Python code
 * may run), then allocate the black value and write (none runs). */
static PyObject *create_value(zpy_core_state *state, zpyv_kind *kind, PyObject *const *positional,
                              Py_ssize_t given, PyObject *kwargs) {
    zpy_runtime_core *rt = zpy_current_runtime(state);
    if (rt == NULL) return NULL;
    zpyv_value *quick = NULL;
    if ((kwargs == NULL || PyDict_GET_SIZE(kwargs) == 0) &&
        quick_struct(rt, kind, positional, given, &quick)) {
        Py_DECREF(rt);
        return (PyObject *)quick;
    }
    zpyv_staged staged = {0};
    int has_value = 0;
    if (kind->code == ZPYV_STRUCT && kind->encode == NULL) {
        if (zpyv_stage_members(rt, kind, positional, given, kwargs, &staged) < 0) {
            Py_DECREF(rt);
            return NULL;
        }
        has_value = 1;
    } else {
        if ((kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0) || given > 1) {
            PyErr_Format(PyExc_TypeError, "%U() takes at most one positional argument", kind->what);
            Py_DECREF(rt);
            return NULL;
        }
        if (given == 1) {
            if (zpyv_stage(rt, kind, positional[0], &staged, kind->what) < 0) {
                Py_DECREF(rt);
                return NULL;
            }
            has_value = 1;
        }
    }
    zpyv_value *value = zpyv_new_black(rt, kind);
    zs_status status = ZS_OK;
    if (value != NULL) {
        if (kind->image != NULL)
            memcpy(value->address, PyBytes_AS_STRING(kind->image),
                   (size_t)PyBytes_GET_SIZE(kind->image));
        if (has_value) status = zpyv_emit(rt, kind, &staged, ZS_NULL_REF, value->address);
    }
    zpyv_release(kind, &staged);
    if (value != NULL && status != ZS_OK) {
        PyObject *done = value_dispose((PyObject *)value, NULL);
        Py_XDECREF(done);
        Py_CLEAR(value);
        zpyv_refused(rt, status, kind->what);
    }
    Py_DECREF(rt);
    return (PyObject *)value;
}

/* Cls(value) / Struct(*members, **members). The class's own __new__
 * (Python) prepares the kind on first use and delegates here. */
static PyObject *value_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    zpy_core_state *state = zpy_state_of_type(type);
    zpyv_kind *kind = state ? class_kind(state, type) : NULL;
    if (state != NULL && (kind == NULL || kind->cls != type)) {
        /* First use: the class lays itself out (resolving what it names). */
        PyObject *prepared = PyObject_CallMethod((PyObject *)type, "_zs_prepare", NULL);
        if (prepared == NULL) return NULL;
        Py_DECREF(prepared);
        if (type->tp_new != value_new) /* laying out gave the class a constructor of its own */
            return type->tp_new(type, args, kwargs);
        kind = class_kind(state, type);
    }
    if (kind == NULL || kind->cls != type) {
        PyErr_Format(PyExc_TypeError, "%s values cannot be created directly", type->tp_name);
        return NULL;
    }
    return create_value(state, kind, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), kwargs);
}

/* Cls(...) by vectorcall: no argument tuple. Taken only while nothing of the
 * class's own stands in the way (a metaclass __call__, a constructor or an
 * initialiser of its own, a kind not laid out yet); otherwise the
 * metaclass's tp_call, with a tuple and a dict, as any call. */
static PyObject *value_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames) {
    PyTypeObject *type = (PyTypeObject *)callable;
    Py_ssize_t given = PyVectorcall_NARGS(nargsf);
    Py_ssize_t named = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *kwargs = NULL;
    if (named > 0) { /* the call's own dict: nothing else holds it */
        if ((kwargs = PyDict_New()) == NULL) return NULL;
        for (Py_ssize_t i = 0; i < named; i++)
            if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[given + i]) < 0) {
                Py_DECREF(kwargs);
                return NULL;
            }
    }
    zpy_core_state *state = zpy_state_of_type(type);
    zpyv_kind *kind = state != NULL ? class_kind(state, type) : NULL;
    PyObject *made;
    if (kind != NULL && kind->cls == type && type->tp_new == value_new &&
        type->tp_init == state->value_type->tp_init &&
        Py_TYPE(type)->tp_call == PyType_Type.tp_call) {
        made = create_value(state, kind, args, given, kwargs);
    } else {
        PyObject *tuple = PyTuple_New(given);
        for (Py_ssize_t i = 0; tuple != NULL && i < given; i++)
            PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
        made = tuple != NULL ? Py_TYPE(type)->tp_call(callable, tuple, kwargs) : NULL;
        Py_XDECREF(tuple);
    }
    Py_XDECREF(kwargs);
    return made;
}

/* value_class_init(cls): make a new value class ready: its instances are not
 * tracked by the cycle collector (value.h: a value refers only to its
 * parent, kind and runtime; nothing refers back to it but borrowed tables),
 * so allocating one never runs the collector; and a value class cannot
 * finalise its instances (__del__ would run Python code while a value is
 * being dropped from a table). Must run before the class has instances. */
static PyObject *value_class_init(PyObject *module, PyObject *arg) {
    zpy_core_state *state = zpy_state_of_module(module);
    if (!PyType_Check(arg) || !PyType_IsSubtype((PyTypeObject *)arg, state->value_type)) {
        PyErr_SetString(PyExc_TypeError, "value_class_init: not a value class");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)arg;
    if (cls->tp_basicsize != state->value_type->tp_basicsize || cls->tp_dictoffset != 0) {
        PyErr_Format(PyExc_TypeError,
                     "%s: a value class cannot have instance attributes of its own (__slots__ "
                     "or __dict__): its state lives in native memory",
                     cls->tp_name);
        return NULL;
    }
    if (cls->tp_finalize != NULL || cls->tp_del != NULL) {
        PyErr_Format(PyExc_TypeError, "%s: a value class cannot define __del__", cls->tp_name);
        return NULL;
    }
    cls->tp_flags &= ~Py_TPFLAGS_HAVE_GC;
    cls->tp_free = PyObject_Free;
    cls->tp_traverse = NULL;
    cls->tp_clear = NULL;
    /* Straight to the base's dealloc: for an untracked class with no slots,
       no __dict__ and no finaliser, CPython's subtype_dealloc would only find
       it and call it (the base is a heap type: value_dealloc drops the
       class's reference itself). */
    cls->tp_dealloc = value_dealloc;
    PyTypeObject *meta = Py_TYPE(cls);
    if (meta->tp_call == PyType_Type.tp_call) { /* else the metaclass's __call__ always */
        cls->tp_vectorcall = value_vectorcall;
        if (!(meta->tp_flags & Py_TPFLAGS_HAVE_VECTORCALL)) {
            /* A metaclass made in Python inherits neither the flag nor the
               offset before Python 3.12; both are type's. */
            meta->tp_vectorcall_offset = offsetof(PyTypeObject, tp_vectorcall);
            meta->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
        }
    }
    Py_RETURN_NONE;
}

/* _core.black_count(runtime) -> inline black values alive (values_alive()). */
static PyObject *inline_blacks(PyObject *module, PyObject *runtime) {
    zpy_core_state *state = zpy_state_of_module(module);
    if (!PyObject_TypeCheck(runtime, state->runtime_type)) {
        PyErr_SetString(PyExc_TypeError, "inline_blacks: a runtime");
        return NULL;
    }
    return PyLong_FromUnsignedLong(((zpy_runtime_core *)runtime)->inline_blacks);
}

static PyMethodDef value_functions[] = {
    {"scope_opened", scope_opened, METH_NOARGS, "Count a zs.scope() that opened."},
    {"scope_closed", scope_closed, METH_O,
     "A zs.scope() ended: uncount it and expire the views obtained in it."},
    {"value_class_init", value_class_init, METH_O, "Make a new value class ready."},
    {"inline_blacks", inline_blacks, METH_O, "Inline black values alive in a runtime."},
    {NULL, NULL, 0, NULL},
};

int zpyv_add_value_type(PyObject *module, zpy_core_state *state) {
    state->value_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &value_spec, NULL);
    if (state->value_type == NULL ||
        PyModule_AddObjectRef(module, "ValueConjugate", (PyObject *)state->value_type) < 0)
        return -1;
    state->str_zs_kind = PyUnicode_InternFromString("_zs_kind");
    if (state->str_zs_kind == NULL) return -1;
    return PyModule_AddFunctions(module, value_functions);
}
