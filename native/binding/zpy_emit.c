/* Phase 2 of the marshalling rule (value.h): emit a staged value into
 * native memory, with no Python code; and the check of a staged value's
 * object references before a commit.
 */
#include "value.h"
#include <stdbool.h>
#include <structmember.h>

/* =========================================================================
 * Phase 2: emit (no Python code)
 * ========================================================================= */

/* Build a value of `kind` from a staged one in zeroed memory at `tmp`, held by
 * no owner (a temporary): no Python code. On failure `tmp` is left valid
 * (the caller clears it). */
static zs_status build_native(zpy_runtime_core *rt, zpyv_kind *kind, const zpyv_staged *staged,
                              char *tmp);

/* A zeroed temporary of `kind`'s size (PyMem; aligned for any kind). */
static char *temporary(zpyv_kind *kind) { return PyMem_Calloc(1, kind->size ? kind->size : 1); }

/* Clear and free a temporary. */
static void temporary_free(zpy_runtime_core *rt, const zs_type *type, char *tmp) {
    if (tmp == NULL) return;
    if (type != NULL) zs_value_clear(rt->native, ZS_NULL_REF, type, tmp);
    PyMem_Free(tmp);
}

/* The native type of a kind already registered in `rt` (staging or the
 * destination's own creation registered it), else NULL: no Python code. */
static const zs_type *known_type(zpy_runtime_core *rt, zpyv_kind *kind) {
    if (kind->id < rt->type_capacity) {
        const zs_type *type = rt->types[kind->id];
        return type == ZPYV_REGISTERING ? NULL : type;
    }
    return NULL;
}

/* Emit into a struct: members staged one by one (absent ones kept). */
static zs_status emit_members(zpy_runtime_core *rt, zpyv_kind *kind, const zpyv_staged *staged,
                              zs_ref owner, char *dst) {
    for (uint32_t i = 0; i < kind->member_count && i < staged->count; i++) {
        const zpyv_staged *item = &staged->u.items[i];
        if (item->form == ZPYV_ABSENT) continue;
        zs_status status = zpyv_emit(rt, kind->members[i].kind, item, owner,
                                     dst + kind->members[i].offset);
        if (status != ZS_OK) return status;
    }
    return ZS_OK;
}

/* Whether a staged value gives every member of its struct, recursively: an
 * ABSENT member (or one of a nested struct) keeps the destination's value. */
static bool staged_whole(const zpyv_kind *kind, const zpyv_staged *staged) {
    if (kind->code != ZPYV_STRUCT) return staged->form != ZPYV_ABSENT;
    if (staged->form == ZPYV_BLOB) return true;
    if (staged->form != ZPYV_ITEMS || staged->count < kind->member_count) return false;
    for (uint32_t i = 0; i < kind->member_count; i++)
        if (!staged_whole(kind->members[i].kind, &staged->u.items[i])) return false;
    return true;
}

/* Emit into a zs_binding list (a MULTICAST array, or a sparse's). */
static zs_status emit_binding_list(zpy_runtime_core *rt, const zpyv_staged *staged, zs_ref owner,
                                   zs_array *list) {
    for (uint32_t i = 0; i < staged->count; i++) {
        const zpyv_binding *binding = &staged->u.bindings[i];
        uint32_t id = binding->callable ? zpyv_callable_id(rt, binding->callable) : 0;
        if (binding->callable != NULL && id == 0) return ZS_E_NOMEM;
        zs_status status = zs_multicast_add(rt->native, owner, list,
                                            binding->callable ? ZS_NULL_REF : binding->object,
                                            binding->callable ? 0 : binding->function_name, id);
        zpyv_callable_done(rt, id);
        if (status != ZS_OK) return status;
    }
    return ZS_OK;
}

static zs_status build_native(zpy_runtime_core *rt, zpyv_kind *kind, const zpyv_staged *staged,
                              char *tmp) {
    const zs_type *type = known_type(rt, kind);
    if (type == NULL) return ZS_E_INVALID;
    switch (kind->code) {
    case ZPYV_STRUCT:
        return emit_members(rt, kind, staged, ZS_NULL_REF, tmp);
    case ZPYV_ARRAY: {
        zs_array *array = (zs_array *)tmp;
        if (staged->form == ZPYV_PACKED)
            return zs_array_assign(rt->native, ZS_NULL_REF, type, array, staged->u.units,
                                   staged->count);
        zs_status status = zs_array_insert(rt->native, ZS_NULL_REF, type, array, 0, NULL,
                                           staged->count);
        for (uint32_t i = 0; status == ZS_OK && i < staged->count; i++) {
            char *slot = (char *)array->data + (size_t)i * kind->entry_size;
            zpyv_initialize(kind->element, slot);
            status = zpyv_emit(rt, kind->element, &staged->u.items[i], ZS_NULL_REF, slot);
        }
        return status;
    }
    case ZPYV_SET:
    case ZPYV_MAP: {
        zs_hash *hash = (zs_hash *)tmp;
        const zs_type *key_type = known_type(rt, kind->element);
        char *key = temporary(kind->element);
        zs_status status = key == NULL || key_type == NULL ? ZS_E_NOMEM : ZS_OK;
        uint32_t step = kind->code == ZPYV_MAP ? 2 : 1;
        for (uint32_t i = 0; status == ZS_OK && i < staged->count; i++) {
            status = zpyv_emit(rt, kind->element, &staged->u.items[step * i], ZS_NULL_REF, key);
            uint32_t index = 0;
            int added = 0;
            if (status == ZS_OK)
                status = zs_hash_add(rt->native, ZS_NULL_REF, type, hash, key, &index, &added);
            if (status == ZS_OK && step == 2) {
                char *slot = (char *)hash->entries.data + (size_t)index * kind->entry_size +
                             kind->value_offset;
                if (added) zpyv_initialize(kind->value, slot);
                status = zpyv_emit(rt, kind->value, &staged->u.items[2 * i + 1], ZS_NULL_REF, slot);
            }
            if (key_type != NULL && key != NULL)
                zs_value_clear(rt->native, ZS_NULL_REF, key_type, key);
        }
        PyMem_Free(key);
        return status;
    }
    case ZPYV_OPTIONAL: {
        if (staged->count == 0) return ZS_OK;
        zs_status status = zs_optional_set(rt->native, ZS_NULL_REF, type, tmp, NULL);
        if (status == ZS_OK) zpyv_initialize(kind->element, tmp);
        return status != ZS_OK
                   ? status
                   : zpyv_emit(rt, kind->element, &staged->u.items[0], ZS_NULL_REF, tmp);
    }
    case ZPYV_DELEGATE: {
        if (staged->count == 0) return ZS_OK;
        const zpyv_binding *binding = &staged->u.bindings[0];
        uint32_t id = binding->callable ? zpyv_callable_id(rt, binding->callable) : 0;
        if (binding->callable != NULL && id == 0) return ZS_E_NOMEM;
        zs_status status = zs_binding_set(rt->native, ZS_NULL_REF, (zs_binding *)tmp,
                                          binding->callable ? ZS_NULL_REF : binding->object,
                                          binding->callable ? 0 : binding->function_name, id);
        zpyv_callable_done(rt, id);
        return status;
    }
    case ZPYV_MULTICAST:
        return emit_binding_list(rt, staged, ZS_NULL_REF, (zs_array *)tmp);
    case ZPYV_SPARSE: {
        if (staged->count == 0) return ZS_OK;
        zs_array *list = NULL;
        zs_status status = zs_sparse_bindings(rt->native, ZS_NULL_REF, tmp, 1, &list);
        return status != ZS_OK ? status : emit_binding_list(rt, staged, ZS_NULL_REF, list);
    }
    default:
        return zpyv_emit(rt, kind, staged, ZS_NULL_REF, tmp);
    }
}

zs_status zpyv_emit(zpy_runtime_core *rt, zpyv_kind *kind, const zpyv_staged *staged, zs_ref owner,
                    char *dst) {
    if (!zpy_open(rt)) return ZS_E_STALE;
    switch (kind->code) {
    case ZPYV_SCALAR:
    case ZPYV_PLAIN:
    case ZPYV_NAME: {
        assert(staged->form == ZPYV_BITS);
        zs_status status = zpyv_writable(rt, owner);
        if (status == ZS_OK) memcpy(dst, staged->u.bits, kind->size);
        return status;
    }
    case ZPYV_OBJECT:
    case ZPYV_WEAK: {
        zs_ref handle;
        memcpy(&handle, staged->u.bits, sizeof handle);
        const zs_type *type = known_type(rt, kind);
        if (type == NULL) return ZS_E_INVALID;
        return zs_value_store_ref(rt->native, owner, type, (zs_ref *)dst, handle);
    }
    case ZPYV_STRING: {
        const zs_type *type = known_type(rt, kind);
        if (type == NULL) return ZS_E_INVALID;
        return zs_string_assign(rt->native, owner, type, (zs_string *)dst, staged->u.units,
                                staged->count);
    }
    default:
        break;
    }
    if (staged->form == ZPYV_PACKED) { /* an array of elements that own nothing: in one call */
        const zs_type *type = known_type(rt, kind);
        return type == NULL ? ZS_E_INVALID
                            : zs_array_assign(rt->native, owner, type, (zs_array *)dst,
                                              staged->u.units, staged->count);
    }
    /* An optional of a value that owns nothing is written in place, as a
       scalar is: the value, then its "is set" flag (zsharp.h). */
    if (kind->code == ZPYV_OPTIONAL && (kind->element->flags & ZPYV_BITWISE) &&
        (staged->count == 0 || staged->u.items[0].form == ZPYV_BITS ||
         staged->u.items[0].form == ZPYV_BLOB)) {
        const zs_type *type = known_type(rt, kind);
        zs_status status = type == NULL ? ZS_E_INVALID : zpyv_writable(rt, owner);
        if (status != ZS_OK) return status;
        const zpyv_staged *item = &staged->u.items[0];
        if (staged->count == 0) memset(dst, 0, kind->element->size);
        else
            memcpy(dst, item->form == ZPYV_BLOB ? zpyv_blob(item) : (const char *)item->u.bits,
                   kind->element->size);
        dst[kind->value_offset] = staged->count != 0;
        return ZS_OK;
    }
    /* Everything else: built whole in a temporary, then assigned in one
       native call (all or nothing); a bitwise struct is written in place. */
    if (kind->code == ZPYV_STRUCT && (kind->flags & ZPYV_BITWISE)) {
        zs_status status = zpyv_writable(rt, owner);
        if (status == ZS_OK && staged->form == ZPYV_BLOB)
            memcpy(dst, zpyv_blob(staged), kind->size);
        else if (status == ZS_OK) status = emit_members(rt, kind, staged, ZS_NULL_REF, dst);
        return status;
    }
    const zs_type *type = known_type(rt, kind);
    if (type == NULL) return ZS_E_INVALID;
    char *tmp = temporary(kind);
    if (tmp == NULL) return ZS_E_NOMEM;
    zs_status status = ZS_OK;
    /* Members not staged keep their values, so the temporary starts as a
       copy of the destination; only then, because the copy passes the
       write barrier: during a mark it would mark every object the old value
       names, and an object unreachable but for its own old value would
       survive the cycle. */
    if (kind->code == ZPYV_STRUCT && !staged_whole(kind, staged))
        status = zs_value_assign(rt->native, ZS_NULL_REF, type, tmp, dst);
    if (status == ZS_OK) status = build_native(rt, kind, staged, tmp);
    if (status == ZS_OK) status = zs_value_assign(rt->native, owner, type, dst, tmp);
    temporary_free(rt, type, tmp);
    return status;
}

/* The status the native store gives one object reference now. */
static zs_status reference_status(zpy_runtime_core *rt, zs_ref handle) {
    if (handle == ZS_NULL_REF) return ZS_OK;
    /* Exists and is not dying: what zs_value_store_ref asks of a target too. */
    return zs_object_writable(rt->native, handle);
}

zs_status zpyv_references_valid(zpy_runtime_core *rt, zpyv_kind *kind, const zpyv_staged *staged) {
    if (!zpy_open(rt)) return ZS_E_STALE;
    if (kind->flags & ZPYV_BITWISE) return ZS_OK; /* no references */
    zs_status status = ZS_OK;
    switch (kind->code) {
    case ZPYV_OBJECT:
    case ZPYV_WEAK: {
        zs_ref handle;
        memcpy(&handle, staged->u.bits, sizeof handle);
        return reference_status(rt, handle);
    }
    case ZPYV_STRUCT:
        for (uint32_t i = 0; staged->form == ZPYV_ITEMS && status == ZS_OK &&
                             i < kind->member_count && i < staged->count;
             i++)
            if (staged->u.items[i].form != ZPYV_ABSENT)
                status = zpyv_references_valid(rt, kind->members[i].kind, &staged->u.items[i]);
        return status;
    case ZPYV_ARRAY:
    case ZPYV_SET:
    case ZPYV_MAP:
    case ZPYV_OPTIONAL: {
        if (staged->form == ZPYV_PACKED) {
            uint8_t code = kind->element->code;
            for (uint32_t i = 0;
                 (code == ZPYV_OBJECT || code == ZPYV_WEAK) && status == ZS_OK && i < staged->count;
                 i++) {
                zs_ref handle;
                memcpy(&handle, (const char *)staged->u.units + (size_t)i * kind->entry_size,
                       sizeof handle);
                status = reference_status(rt, handle);
            }
            return status;
        }
        if (staged->form != ZPYV_ITEMS) return ZS_OK;
        uint32_t step = kind->code == ZPYV_MAP ? 2 : 1;
        for (uint32_t i = 0; status == ZS_OK && i < staged->count; i++) {
            status = zpyv_references_valid(rt, kind->element, &staged->u.items[step * i]);
            if (status == ZS_OK && step == 2)
                status = zpyv_references_valid(rt, kind->value, &staged->u.items[2 * i + 1]);
        }
        return status;
    }
    default:
        return ZS_OK; /* delegate bindings: the native side takes any object handle */
    }
}
