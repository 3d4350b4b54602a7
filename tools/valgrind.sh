#!/usr/bin/env bash
# valgrind memcheck over the C tests and a representative subset of the
# Python suite. Fails on any memcheck error, including definite or indirect
# leaks at exit.
#
#   bash tools/valgrind.sh              # C tests + the default Python subset
#   bash tools/valgrind.sh --smoke      # a small Python subset only (CI)
#   bash tools/valgrind.sh --all        # C tests + the whole Python suite (slow)
#   bash tools/valgrind.sh tests/values/test_strings.py -k ansi   # C tests + these
#                                       # pytest arguments instead of the subset
#
# The library is built normally (no sanitizers) with -O1 -g, its C asserts
# on and the object slabs compiled out, so memcheck sees every native object
# as its own malloc block (ZSHARP_DEBUG=1 ZSHARP_ASSERTS=1 ZSHARP_NO_SLAB=1;
# the C tests with -DZS_NO_OBJECT_SLAB) in a throwaway copy of the tree
# and a throwaway venv. Python runs with PYTHONMALLOC=malloc, so memcheck
# sees every Python allocation too; tools/valgrind-python.supp suppresses
# CPython's own noise only. Needs CPython >= 3.12 (3.11's _PyLong_New leaves
# the digit of a zero int uninitialised, and memcheck then reports every use
# of the small int it selects); set PYTHON to choose the interpreter.
# VALGRIND_FLAGS adds memcheck options (e.g. --track-origins=yes).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
mode=default
case "${1:-}" in
    --smoke|--all) mode="${1#--}"; shift ;;
esac

# The default subset: a few tests of every area (objects; full, incremental
# and cluster collection; purge; containers; strings; structs; delegates;
# object wrappers; value lifetimes and scopes; faults and allocation limits;
# runtime close), then the model test with ZSHARP_MODEL_EXAMPLES examples.
# Memcheck costs about a second per test on top of the test itself.
t=tests
SUBSET=(
    $t/objects/test_objects.py::test_name_outer_and_property_keywords_are_applied
    $t/objects/test_objects.py::test_subclass_inherits_properties_and_defaults
    $t/objects/test_objects.py::test_unknown_keyword_raises_typeerror_and_leaks_nothing
    $t/objects/test_objects.py::test_reference_rejects_an_expired_object
    $t/objects/test_objects.py::test_conjugate_identity_while_held_and_a_dropped_conjugate_is_remade
    $t/objects/test_conjugate_descriptors_and_table.py::test_a_descriptor_refuses_objects_of_another_class
    $t/objects/test_conjugate_descriptors_and_table.py::test_a_conversion_that_expires_the_object_never_writes_freed_memory
    $t/objects/test_conjugate_descriptors_and_table.py::test_expired_reads_and_writes_raise_with_the_reason
    $t/objects/test_conjugate_descriptors_and_table.py::test_conjugates_of_a_big_heap_grow_the_table_and_all_expire
    $t/objects/test_conjugate_descriptors_and_table.py::test_views_keep_their_owner_conjugate_until_it_expires
    $t/objects/test_conjugate_descriptors_and_table.py::test_a_collection_re_entered_from_a_gc_callback_during_expiry_is_refused
    $t/objects/test_objects.py::test_non_ascii_property_names_work
    $t/gc/test_gc.py::test_unrooted_object_is_collected_and_its_conjugate_expires
    $t/gc/test_gc.py::test_dropped_strong_pointer_is_released_by_its_finaliser
    $t/gc/test_gc.py::test_chain_of_100_from_a_root_survives_and_cutting_it_frees_the_tail
    $t/gc/test_gc.py::test_unreachable_three_cycle_with_a_self_loop_is_collected
    $t/gc/test_gc.py::test_marked_garbage_referenced_by_several_holders_nulls_every_reference
    $t/gc/test_gc.py::test_weak_property_does_not_keep_alive_and_reads_none_after_collection
    $t/gc/test_gc.py::test_stale_handles_across_many_slot_reuses_stay_dead
    $t/gc/test_incremental.py::test_write_barrier_keeps_an_object_stored_into_a_scanned_holder
    $t/gc/test_incremental.py::test_barrier_applies_to_roots_and_strong_pointers_added_mid_cycle
    $t/gc/test_incremental.py::test_objects_created_during_a_pending_mark_are_born_reachable
    $t/gc/test_incremental.py::test_expiry_steps_stop_between_small_batches
    $t/hosts/test_host_collections.py
    $t/hosts/test_host_handles.py::test_c_maps_handles_to_proxies_and_back
    $t/hosts/test_host_owned.py
    $t/gc/test_clusters.py::test_create_cluster_gathers_everything_the_root_references
    $t/gc/test_clusters.py::test_unreachable_cluster_is_destroyed_whole
    $t/gc/test_clusters.py::test_reaching_a_member_from_outside_keeps_the_whole_cluster
    $t/gc/test_clusters.py::test_garbage_member_dissolves_the_clusters_that_reference_it
    $t/gc/test_clusters.py::test_storing_into_a_member_dissolves_the_cluster_and_keeps_the_new_target
    $t/gc/test_clusters.py::test_cluster_reached_mid_cycle_only_through_the_barrier_survives
    $t/containers/test_containers.py::test_slice_assignment_matches_list
    $t/containers/test_containers.py::test_append_extend_insert
    $t/containers/test_containers.py::test_pop_remove_clear
    $t/containers/test_containers.py::test_failed_array_operation_leaves_the_array_unchanged
    $t/containers/test_containers.py::test_array_of_strings
    $t/containers/test_containers.py::test_nested_arrays
    $t/containers/test_containers.py::test_set_survives_growth_and_many_removals
    $t/containers/test_containers.py::test_map_survives_growth
    $t/containers/test_containers.py::test_map_with_object_values_and_keys
    $t/containers/test_containers.py::test_optional_struct
    $t/containers/test_containers.py::test_objects_in_nested_containers_and_structs_are_traced
    $t/containers/test_containers.py::test_storing_a_view_of_the_container_being_changed
    $t/values/test_strings.py::test_unicode_round_trips
    $t/values/test_strings.py::test_embedded_nul_and_long_strings_round_trip
    $t/values/test_strings.py::test_ansi_property_refuses_non_ascii_and_keeps_its_value
    $t/values/test_strings.py::test_string_property_view_writes_through
    $t/values/test_strings.py::test_string_view_expires_with_its_object
    $t/values/test_strings.py::test_names_as_container_keys_and_elements
    $t/values/test_structs.py::test_missing_members_are_zeroed_or_take_their_default
    $t/values/test_structs.py::test_object_member_is_a_red_view_that_writes_through
    $t/values/test_structs.py::test_bad_struct_assignment_raises_and_leaves_the_member_unchanged
    $t/values/test_structs.py::test_array_of_structs_elements_are_views
    $t/values/test_structs.py::test_struct_views_of_a_black_struct_expire_with_it
    $t/values/test_structs.py::test_struct_in_another_runtime_is_copied_by_value
    $t/values/test_delegates.py::test_object_binding_is_weak_and_dropped_when_target_dies
    $t/values/test_delegates.py::test_black_delegates_are_freed_exactly_once
    $t/values/test_delegates.py::test_multicast_skips_and_drops_destroyed_targets
    $t/values/test_delegates.py::test_owner_collected_during_broadcast
    $t/values/test_delegates.py::test_target_destroyed_during_broadcast_is_not_called
    $t/values/test_delegates.py::test_delegates_as_container_elements
    $t/values/test_delegates.py::test_failed_native_allocation_leaves_delegates_consistent
    $t/objects/test_object_wrappers.py::test_soft_pointers_are_freed_exactly_once
    $t/objects/test_object_wrappers.py::test_script_interface_freed_exactly_once
    $t/objects/test_object_wrappers.py::test_lazy_object_ptr_survives_destroy_and_recreate
    $t/values/test_value_lifetimes.py::test_dispose_frees_once_and_twice_is_a_no_op
    $t/values/test_value_lifetimes.py::test_finalised_value_is_freed_at_the_next_collection
    $t/values/test_value_lifetimes.py::test_value_in_a_python_reference_cycle_is_freed
    $t/values/test_value_lifetimes.py::test_values_finalised_on_other_threads_are_freed
    $t/values/test_value_lifetimes.py::test_runtime_close_with_finalised_values_pending
    $t/values/test_value_lifetimes.py::test_array_structure_change_expires_element_views
    $t/values/test_value_lifetimes.py::test_key_test_append_until_reallocation_expires_every_old_view
    $t/values/test_value_lifetimes.py::test_map_add_and_remove_expire_value_views
    $t/values/test_value_lifetimes.py::test_scope_ended_by_an_exception_still_expires_its_views
    $t/gc/test_gc_stress.py::test_allocation_limit_raises_memory_error_and_keeps_the_heap_consistent
    $t/gc/test_gc_stress.py::test_poisoned_frees_change_nothing_observable
    $t/gc/test_gc_stress.py::test_a_tiny_mark_stack_still_marks_everything
    $t/gc/test_memory_safety.py::test_failed_constructor_leaves_an_object_collected_at_the_next_collection
    $t/gc/test_memory_safety.py::test_listener_raising_mid_incremental_cycle_leaves_the_heap_consistent
    $t/gc/test_memory_safety.py::test_strong_pointer_finalised_by_the_python_cycle_collector
    $t/gc/test_memory_safety.py::test_many_strong_pointers_finalised_on_threads_are_all_released
    $t/objects/test_runtime.py::test_closing_a_runtime_expires_every_conjugate_and_pointer
    $t/objects/test_runtime.py::test_a_thousand_linked_objects_leave_no_native_block_behind
    $t/objects/test_runtime.py::test_closing_a_runtime_destroys_permanent_objects_too
    $t/gc/test_reachability_model.py
)
# The CI smoke: one test per area and the model test.
SMOKE=(
    $t/objects/test_objects.py::test_unknown_keyword_raises_typeerror_and_leaks_nothing
    $t/objects/test_conjugate_descriptors_and_table.py::test_expired_reads_and_writes_raise_with_the_reason
    $t/gc/test_gc.py::test_chain_of_100_from_a_root_survives_and_cutting_it_frees_the_tail
    $t/gc/test_incremental.py::test_expiry_steps_stop_between_small_batches
    $t/gc/test_clusters.py::test_garbage_member_dissolves_the_clusters_that_reference_it
    $t/containers/test_containers.py::test_map_with_object_values_and_keys
    $t/values/test_strings.py::test_string_view_expires_with_its_object
    $t/values/test_structs.py::test_struct_views_of_a_black_struct_expire_with_it
    $t/values/test_delegates.py::test_owner_collected_during_broadcast
    $t/values/test_value_lifetimes.py::test_runtime_close_with_finalised_values_pending
    $t/gc/test_gc_stress.py::test_poisoned_frees_change_nothing_observable
    $t/gc/test_reachability_model.py
)
model_examples=5            # --smoke: 3

command -v valgrind >/dev/null || { echo "valgrind not found (apt-get install valgrind)" >&2; exit 2; }
python=""
for cand in ${PYTHON:-python3 python3.12 python3.13 $(pyenv root 2>/dev/null || echo /nonexistent)/versions/3.1[2-9]*/bin/python3}; do
    if "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
        python="$cand"; break
    fi
done
[ -n "$python" ] || { echo "valgrind.sh needs CPython >= 3.12 (set PYTHON)" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/zsharp-valgrind.XXXXXX")"
trap 'rm -rf "$work"' EXIT
memcheck=(valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect
          --errors-for-leak-kinds=definite,indirect --error-exitcode=99 --num-callers=40
          --show-error-list=yes ${VALGRIND_FLAGS:-})

# Run "$@" under memcheck with its log in $work/$name.log; print the summary,
# and the whole log if memcheck found anything.
run_memcheck() {
    local name="$1"; shift
    local status=0
    "${memcheck[@]}" --log-file="$work/$name.log" "$@" || status=$?
    grep -E "ERROR SUMMARY|definitely lost:|indirectly lost:|no leaks are possible|used_suppression" \
        "$work/$name.log" \
        | sed -E 's/^(==|--)[0-9]*(==|--) *(used_suppression: *)?/  /' | awk '!seen[$0]++'
    if [ "$status" -ne 0 ]; then
        cat "$work/$name.log"
        echo "valgrind memcheck: FAILED ($name, exit $status)" >&2
        exit 1
    fi
}

if [ "$mode" != smoke ]; then
    echo "== C tests under memcheck"
    cc -std=c11 -O1 -g -Wall -Wextra -Werror -pedantic -DZS_NO_OBJECT_SLAB -I"$here/native/include" \
        -I"$here/native/src" -I"$here/native/engine" "$here"/native/src/*.c "$here"/native/engine/*.c \
        "$here"/native/tests/*.c -pthread \
        -o "$work/test_native"
    run_memcheck c-tests "$work/test_native" | grep -vE "^ok  "
fi

echo "== Python suite under memcheck ($("$python" -V), PYTHONMALLOC=malloc)"
mkdir -p "$work/tree"
tar -C "$here" --exclude=.git --exclude='*.so' --exclude=build --exclude='.venv*' \
    --exclude=__pycache__ --exclude=.hypothesis --exclude='*.egg-info' -cf - . \
    | tar -C "$work/tree" -xf -
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install -q cffi "setuptools>=77" wheel pytest hypothesis typing-extensions
(cd "$work/tree" && ZSHARP_DEBUG=1 ZSHARP_ASSERTS=1 ZSHARP_NO_SLAB=1 \
    "$work/venv/bin/pip" install -q --no-build-isolation -e .)
if [ "$#" -gt 0 ]; then
    selection=("$@")
elif [ "$mode" = all ]; then
    selection=(-k "not mypy and not native_c and not project_standards and not command_line")
elif [ "$mode" = smoke ]; then
    selection=("${SMOKE[@]}")
    model_examples=3
else
    selection=("${SUBSET[@]}")
fi
cd "$work/tree"
PYTHONMALLOC=malloc ZSHARP_MODEL_EXAMPLES="${ZSHARP_MODEL_EXAMPLES:-$model_examples}" \
    run_memcheck python --suppressions="$here/tools/valgrind-python.supp" \
    "$work/venv/bin/python" -m pytest -q -p no:cacheprovider "${selection[@]}"
echo "valgrind memcheck: clean"
