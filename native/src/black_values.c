/*
 * black_values.c -- black values: native blocks (structs, strings,
 * containers, delegates) owned by the managed side, addressed by handles
 * (index + serial, like objects): their table, made, resolved and freed.
 * When their type holds references they are GC roots (unless the runtime
 * was created with ZS_RUNTIME_BLACK_NOT_ROOTS): gc_mark.c marks them.
 */
#include "internal.h"

#include <string.h>

static zs_value_slot *value_slot(zs_runtime *rt, zs_ref handle) {
    uint32_t index = ZS_REF_INDEX(handle);
    if (handle == ZS_NULL_REF || index >= rt->value_capacity) return NULL;
    zs_value_slot *slot = &rt->values[index];
    return slot->value != NULL && slot->serial == ZS_REF_SERIAL(handle) ? slot : NULL;
}

zs_status zs_value_new(zs_runtime *rt, const zs_type *type, zs_ref *out_handle, void **out_value) {
    if (type == NULL || out_handle == NULL) return ZS_E_INVALID;
    ZS_LOCK(rt);
    zs_status status = ZS_OK;
    if (rt->in_destroy_hook) status = ZS_E_BUSY;
    else if (type->id >= rt->type_count || rt->types[type->id] != type) status = ZS_E_INVALID;
    if (status == ZS_OK && rt->value_free_head == 0) {
        uint32_t capacity = rt->value_capacity ? rt->value_capacity * 2 : 64;
        zs_value_slot *grown = capacity > rt->value_capacity && capacity < (1u << 30)
                                   ? zs_realloc(rt, rt->values, rt->value_capacity * sizeof *grown,
                                                capacity * sizeof *grown)
                                   : NULL;
        if (grown == NULL) {
            status = ZS_E_NOMEM;
        } else {
            for (uint32_t i = capacity; i-- > rt->value_capacity;) {
                grown[i].serial = 1;
                grown[i].next_free = rt->value_free_head;
                rt->value_free_head = i + 1;
            }
            rt->values = grown;
            rt->value_capacity = capacity;
        }
    }
    if (status == ZS_OK) {
        uint32_t index = rt->value_free_head - 1;
        zs_value_slot *slot = &rt->values[index];
        void *value = zs_alloc(rt, type->size);
        if (value == NULL) {
            status = ZS_E_NOMEM;
        } else {
            rt->value_free_head = slot->next_free;
            slot->value = value;
            slot->type = type;
            rt->value_live++;
            *out_handle = ZS_MAKE_REF(index, slot->serial);
            if (out_value != NULL) *out_value = value;
        }
    }
    ZS_UNLOCK(rt);
    return status;
}

zs_status zs_value_free(zs_runtime *rt, zs_ref handle) {
    ZS_LOCK(rt);
    zs_value_slot *slot = value_slot(rt, handle);
    zs_status status = slot == NULL ? ZS_E_STALE : rt->in_destroy_hook ? ZS_E_BUSY : ZS_OK;
    if (status == ZS_OK) {
        zs_value_destroy(rt, slot->type, slot->value);
        zs_free(rt, slot->value, slot->type->size);
        slot->value = NULL;
        slot->type = NULL;
        rt->value_live--;
        /* Bump the serial so stale handles fail; retire a slot about to wrap. */
        if (++slot->serial != ZS_SERIAL_RETIRE) {
            slot->next_free = rt->value_free_head;
            rt->value_free_head = ZS_REF_INDEX(handle) + 1;
        }
    }
    ZS_UNLOCK(rt);
    return status;
}

void *zs_value_resolve(zs_runtime *rt, zs_ref handle) {
    ZS_LOCK(rt);
    zs_value_slot *slot = value_slot(rt, handle);
    void *value = slot ? slot->value : NULL;
    ZS_UNLOCK(rt);
    return value;
}

uint32_t zs_value_count(zs_runtime *rt) {
    ZS_LOCK(rt);
    uint32_t count = rt->value_live;
    ZS_UNLOCK(rt);
    return count;
}

void zs_values_release(zs_runtime *rt) {
    for (uint32_t i = 0; i < rt->value_capacity; i++) {
        zs_value_slot *slot = &rt->values[i];
        if (slot->value == NULL) continue;
        zs_value_destroy(rt, slot->type, slot->value);
        zs_free(rt, slot->value, slot->type->size);
    }
    zs_free(rt, rt->values, rt->value_capacity * sizeof *rt->values);
    rt->values = NULL;
    rt->value_capacity = rt->value_live = rt->value_free_head = 0;
}
