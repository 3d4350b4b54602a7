/*
 * zsharp_api.h -- the host's C API (zsharp.h, and zsharp_debug.h's
 * switches) as one table of function pointers, for a host module compiled
 * apart from the library. Who includes it: such a module, instead of
 * linking; it includes zsharp.h and zsharp_debug.h. The managed side's
 * protocol (zsharp_managed.h) is not in the table: a host must not call it.
 *
 * A host that does not link libzsharp.so (a game module loaded as a shared
 * library, built apart from the installed package) gets this table instead,
 * from zs_api_table() (zsharp_py.lowlevel.api_table() gives its address),
 * and calls `api->zs_object_new(...)` where a linked host calls
 * `zs_object_new(...)`. Every slot has the type of the header's own
 * declaration (__typeof__, as GCC and Clang spell it), so the table cannot
 * drift from the header; `version` and `size` let a host check it was
 * built against this table.
 */
#ifndef ZSHARP_API_H
#define ZSHARP_API_H

#include "zsharp.h"
#include "zsharp_debug.h"

#define ZS_API_VERSION                                                                             \
    6u /* 3: zs_gc_stats.barrier_slots; 4: the managed side's calls left;
                             5: the tick manager (zs_tick_*); 6: zs_delegate_broadcast,
                             zs_delegate_execute */

/* Every function a host may call, in header order: those of zsharp.h but
   zs_api_table itself, then those of zsharp_debug.h. The managed side's
   own protocol, zsharp_managed.h, is listed apart (ZS_MANAGED_FUNCTIONS);
   tests/interop/test_reflection.py checks that each list holds exactly the
   functions of its headers. */
/* clang-format off */
#define ZS_API_FUNCTIONS(X) \
    X(zs_status_message) X(zs_runtime_default_options) X(zs_runtime_new) X(zs_runtime_free) \
    X(zs_runtime_memory) X(zs_close_disregard_for_gc) X(zs_name_intern) X(zs_name_base) \
    X(zs_name_count) X(zs_class_register) X(zs_class_id) X(zs_class_name) X(zs_class_parent) \
    X(zs_class_instance_size) X(zs_class_is_a) X(zs_find_class) X(zs_class_schema_words) \
    X(zs_class_count) X(zs_class_by_id) X(zs_class_describe) X(zs_find_function) \
    X(zs_set_class_resolver) X(zs_struct_register) X(zs_struct_count) X(zs_struct_at) \
    X(zs_find_struct) X(zs_enum_register) X(zs_enum_count) X(zs_enum_at) X(zs_find_enum) \
    X(zs_runtime_add_cleanup) X(zs_object_new) X(zs_resolve) \
    X(zs_find_object) X(zs_object_ref) \
    X(zs_store_ref) X(zs_ref_array_push) X(zs_ref_array_clear) X(zs_add_to_root) \
    X(zs_remove_from_root) X(zs_is_rooted) X(zs_add_strong_ref) X(zs_release_strong_ref) \
    X(zs_strong_ref_count) X(zs_mark_as_garbage) X(zs_destroy_object) X(zs_is_garbage) X(zs_is_permanent) \
    X(zs_live_objects) X(zs_live_handles) X(zs_type_basic) X(zs_type_struct) \
    X(zs_type_container) X(zs_type_size) X(zs_type_align) X(zs_type_flags) X(zs_type_kind_of) \
    X(zs_type_id) X(zs_type_value_offset) X(zs_type_entry_size) X(zs_value_assign) \
    X(zs_value_clear) X(zs_value_store_ref) X(zs_value_equal) X(zs_value_hash) \
    X(zs_object_writable) X(zs_string_assign) X(zs_array_insert) X(zs_array_remove) \
    X(zs_array_reserve) X(zs_array_assign) X(zs_array_insert_packed) X(zs_hash_find) X(zs_hash_add) X(zs_hash_remove) \
    X(zs_optional_set) X(zs_binding_set) X(zs_sparse_bindings) X(zs_multicast_add) \
    X(zs_multicast_remove) X(zs_take_released_callables) X(zs_callable_retain) \
    X(zs_callable_release) X(zs_value_new) X(zs_value_free) X(zs_value_resolve) \
    X(zs_value_count) X(zs_create_cluster) X(zs_dissolve_cluster) X(zs_object_cluster) \
    X(zs_cluster_get_info) X(zs_cluster_count) X(zs_set_destroy_hook) X(zs_gc_phase_of) \
    X(zs_gc_start_incremental) X(zs_gc_step) X(zs_gc_step_bounded) X(zs_collect_garbage) \
    X(zs_gc_mark_and_gather) \
    X(zs_gc_expiring_count) X(zs_dying_word) X(zs_gc_purge) X(zs_gc_purge_bounded) X(zs_gc_pending_purge) \
    X(zs_gc_get_stats) X(zs_heap_verify) X(zs_set_call_handler) X(zs_call_function) \
    X(zs_call_each) X(zs_calls_in_progress) X(zs_call_native) X(zs_tick_register) \
    X(zs_tick_unregister) X(zs_tick_unregister_object) X(zs_tick_set_enabled) \
    X(zs_tick_set_interval) X(zs_tick_set_group) X(zs_tick_add_prerequisite) \
    X(zs_tick_remove_prerequisite) X(zs_tick_get_info) X(zs_tick_count) \
    X(zs_frame_gc_defaults) X(zs_tick_frame) X(zs_delegate_broadcast) X(zs_delegate_execute) \
    X(zs_reference_chains) \
    X(zs_debug_check_failures) X(zs_debug_set) X(zs_debug_corrupt)

/* The managed side's protocol (every function of zsharp_managed.h): the
   scripting layer's own calls, not in the host's table. A host calling them could make the heap forget a proxy the
   scripting layer holds (zs_forget_conjugate, zs_conjugates_dropped), or
   take the dying objects whose proxies it must expire (zs_gc_take_expiring);
   collections a host starts hand those objects to the scripting layer's
   expiry handler instead (zs_set_expiry_handler). */
#define ZS_MANAGED_FUNCTIONS(X) \
    X(zs_object_new_conjugate) X(zs_resolve_for_conjugate) X(zs_forget_conjugate) \
    X(zs_conjugates_dropped) X(zs_gc_take_expiring) X(zs_gc_take_expiring_ex) \
    X(zs_set_expiry_handler) X(zs_set_free_handler) X(zs_gc_expire) \
    X(zs_set_managed_call_handler) X(zs_class_set_defaults) X(zs_set_managed_listener_handler)
/* clang-format on */

typedef struct zs_api {
    uint32_t version; /* ZS_API_VERSION */
    uint32_t size;    /* sizeof(zs_api) */
#ifdef __cplusplus
/* C++ names the function by its qualified name: a member declared with the
   name its own type used would change that name's meaning in the class. */
#define ZS_API_SLOT(name) decltype(&::name) name;
#else
#define ZS_API_SLOT(name) __typeof__(&name) name;
#endif
    ZS_API_FUNCTIONS(ZS_API_SLOT)
#undef ZS_API_SLOT
} zs_api;

#endif /* ZSHARP_API_H */
