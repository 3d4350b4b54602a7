/* Tables of cached views (value.h): the red views a holder (an object
 * conjugate or a value) has given out, by key, so that reading a member
 * twice gives the same view and a write can expire the views below it.
 * Held by object conjugates and value conjugates alike.
 */
#include "value.h"

/* =========================================================================
 * Views tables
 * ========================================================================= */

/* The slot of a key's probe sequence start. */
static inline uint32_t table_home(const zpyv_table *table, Py_ssize_t key) {
    return (uint32_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 40) & table->mask;
}

/* The live view cached under `key`, or NULL. */
zpyv_value *zpyv_table_get(const zpyv_table *table, Py_ssize_t key) {
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
int zpyv_table_put(zpyv_table **slot, Py_ssize_t key, zpyv_value *view) {
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
void zpyv_table_remove(zpyv_table *table, Py_ssize_t key, const zpyv_value *view) {
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
    return zpyv_table_get(table, key);
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
