/* Value conjugates: red views and black values (value.h), their tables of
 * cached views, expiry, scopes, and the lifetime of black values.
 *
 * Nothing in this file runs Python code between finding a native address
 * and using it. Expiry clears addresses in place without allocating; the
 * housekeeping that may run Python code (dropping references) comes after.
 */
#include "value.h"

#include <structmember.h>

/* The table slot of a live holder (an object or value conjugate), or NULL. */
zpyv_table **zpyv_holder_table(zpy_core_state *state, PyObject *holder) {
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

/* _core.scope_opened() -> its serial: a zs.scope() opened (counted: while
 * none is open anywhere, views are not registered; the serial orders it
 * among call scopes, value.h). */
PyObject *zpyv_scope_opened(PyObject *module, PyObject *unused) {
    (void)unused;
    zpy_core_state *state = zpy_state_of_module(module);
    state->open_scopes++;
    return PyLong_FromUnsignedLongLong(++state->scope_serial);
}

/* _core.scope_closed(views): a zs.scope() ended; its views expire. */
PyObject *zpyv_scope_closed(PyObject *module, PyObject *views) {
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
            zpyv_table **slot = zpyv_holder_table(state, view->parent);
            if (slot != NULL) zpyv_table_remove(*slot, view->key, view);
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
    zpyv_table **slot = at != NULL ? zpyv_holder_table(state, parent) : NULL;
    if (at == NULL || slot == NULL) {
        if (at != NULL)
            PyErr_SetString(PyExc_SystemError, "the parent expired while its view was made");
        mark_expired(view, state->reason_parent);
        Py_DECREF(view);
        return NULL;
    }
    zpyv_value *found = zpyv_table_get(*slot, key);
    if (found != NULL && (found->flags & ZPYV_V_PARKED)) {
        /* That Python code made the place's view and dropped it: this new
           one, registered in the scope, takes its place. */
        zpyv_table_remove(*slot, key, found);
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
    if (zpyv_table_put(slot, key, view) < 0) {
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
    zpyv_table **slot = zpyv_holder_table(rt->state, parent);
    if (slot == NULL) return PyErr_Format(PyExc_SystemError, "no views table");
    zpyv_value *found = zpyv_table_get(*slot, key);
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
    if (zpyv_holder_table(rt->state, parent) == NULL)
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
    assert(views == zpyv_holder_table(rt->state, parent));
    if (rt->graveyard != NULL) {
        zpyv_bury(rt);                                /* nothing located yet: Python code may run */
        views = zpyv_holder_table(rt->state, parent); /* and may have expired the parent */
    }
    if (kind->flags & ZPYV_VIEW) {
        /* The hot path: the member's view is cached, or parked with no scope
           open to register it in (read_place does the rest). */
        zpyv_value *found = views != NULL ? zpyv_table_get(*views, key) : NULL;
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
    if (!zpy_open(rt)) return closed_error(rt);
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
    if (!zpy_open(rt)) return closed_error(rt);
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
void zpyv_black_free(zpyv_value *value, int now) {
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
