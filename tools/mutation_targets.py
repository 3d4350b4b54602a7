"""What tools/mutate.py mutates, and which tests each mutant runs.

TARGETS names the functions that decide memory safety, file by file, each
with the test selection its mutants run: SELECTIONS, the files most likely
to kill a mutant of that code, then CORE, the rest of the heap's tests
(pytest -x: the first failure ends the run, so a killed mutant costs a few
seconds). A native/src mutant runs the C test program (native/tests)
first.
Functions are named, never lines: when a file is split or a function
moves, change its `path` here; the mutants' ids stay the same.

SMOKE is the fixed sample CI runs (`python tools/mutate.py --smoke`, in
.ci/run): one mutant of each kind of decision, each of which a test must
kill.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """Functions of one file and the selection their mutants run."""

    path: str
    functions: tuple[str, ...]
    selection: str


def _files(*names: str) -> list[str]:
    return [f"tests/{name}.py" for name in names]


# Tests every mutant runs after its selection's own: the heap, its
# conjugates, views and collections, as Python and native hosts see them
# (about 30 s in all).
CORE: list[str] = _files(
    "objects/test_objects",
    "objects/test_object_wrappers",
    "objects/test_conjugate_descriptors_and_table",
    "objects/test_runtime",
    "objects/test_lifecycle",
    "gc/test_gc",
    "gc/test_incremental",
    "gc/test_expiry_handler",
    "gc/test_unshared_objects",
    "gc/test_gc_stress",
    "gc/test_memory_safety",
    "gc/test_write_barrier_work",
    "gc/test_clusters",
    "gc/test_reference_chains",
    "gc/test_phase_edge_lookups",
    "values/test_value_lifetimes",
    "values/test_parked_views",
    "values/test_fast_value_writes",
    "values/test_structs",
    "values/test_strings",
    "values/test_delegates",
    "values/test_fieldpath",
    "containers/test_containers",
    "containers/test_container_fast_paths",
    "containers/test_views_after_failed_changes",
    "hosts/test_host_collections",
    "hosts/test_host_handles",
    "hosts/test_host_owned",
    "interop/test_native_calls",
    "interop/test_native_functions",
    "interop/test_runtime_heap_calls",
)

# Each selection: the files most likely to kill a mutant of that code, run
# first and on their own (a killed mutant costs a few seconds); CORE follows.
SELECTIONS: dict[str, list[str]] = {
    # Lookups by name and by handle, at every phase of a collection.
    "lookups": _files(
        "gc/test_phase_edge_lookups", "objects/test_object_wrappers", "hosts/test_host_handles"
    ),
    # Expiry, the hand-over to the managed side, the purge.
    "expiry": _files(
        "gc/test_expiry_handler",
        "hosts/test_host_collections",
        "hosts/test_host_owned",
        "gc/test_phase_edge_lookups",
        "gc/test_incremental",
        "gc/test_gc",
    ),
    # Views, their tables and their invalidation; container structure.
    "views": _files(
        "containers/test_views_after_failed_changes",
        "values/test_value_lifetimes",
        "values/test_parked_views",
        "containers/test_containers",
        "containers/test_container_fast_paths",
        "hostile/test_hostile_containers_structs",
    ),
    # Stores: the write barrier, refusals of dying owners, escapes.
    "stores": [
        *_files(
            "gc/test_write_barrier_work",
            "gc/test_incremental",
            "gc/test_gc_stress",
            "hostile/test_hostile_slices_finalisers_creation",
        ),
        "tests/gc/test_reachability_model.py",
    ],
    # The value layer's staging rule: convert, then resolve and write.
    "staging": _files(
        "containers/test_views_after_failed_changes",
        "values/test_fast_value_writes",
        "hostile/test_hostile_containers_structs",
        "hostile/test_hostile_python_layer",
        "hostile/test_hostile_slices_finalisers_creation",
    ),
    # Runtimes: closing, re-entry, the Python side of collections.
    "runtime": _files(
        "objects/test_lifecycle",
        "objects/test_runtime",
        "gc/test_phase_edge_lookups",
        "gc/test_memory_safety",
        "hostile/test_hostile_python_layer",
        # Closing inside host calls and frames (the deferred native free),
        # and what refuses while close() runs.
        "interop/test_native_functions",
        "interop/test_tick_manager",
    ),
}


TARGETS: tuple[Target, ...] = (
    # ---- the native heap ---------------------------------------------------
    Target(
        "native/src/internal.h",
        (
            "zs_item_reachable",
            "zs_item_dying",
            "zs_expiry_owner",
            "zs_publish_dying",
            "zs_item_of",
            "zs_usable_item",
            "zs_check_owner",
            "zs_gc_barrier",
        ),
        "expiry",
    ),
    Target(
        "native/src/objects.c",
        (
            "name_index_add",
            "name_index_remove",
            "zs_name_index_drop_dying",
            "name_matches",
            "zs_find_object",
            "zs_resolve_for_conjugate",
            "zs_forget_conjugate",
            "zs_object_ref",
        ),
        "lookups",
    ),
    Target(
        "native/src/objects.c",
        (
            "object_destroy",
            "destroy_now_allowed",
            "conjugates_dropped_locked",
            "zs_conjugates_dropped",
            "zs_note_escape",
        ),
        "expiry",
    ),
    Target(
        "native/src/object_stores.c",
        ("prepare_store", "zs_store_ref", "zs_add_to_root", "zs_add_strong_ref"),
        "stores",
    ),
    Target("native/src/object_stores.c", ("zs_destroy_object",), "expiry"),
    Target("native/src/gc_purge.c", ("zs_gc_purge_locked",), "expiry"),
    Target("native/src/gc_cycle.c", ("zs_gc_purge_bounded", "zs_collect_garbage"), "expiry"),
    Target(
        "native/src/expiry.c",
        (
            "zs_set_expiry_handler",
            "take_expiring",
            "zs_can_hand_over",
            "hand_over_batch",
            "zs_gc_hand_over",
            "zs_gc_expire",
            "zs_gc_take_expiring_ex",
        ),
        "expiry",
    ),
    Target("native/src/gc_mark.c", ("zs_gc_barrier_slow",), "stores"),
    Target("native/src/gc_gather.c", ("zs_gather",), "stores"),
    Target("native/src/gc_cycle.c", ("settle_purge",), "stores"),
    Target("native/src/memory.c", ("zs_entries_reserve",), "views"),
    Target("native/src/hash_index.c", ("zs_hash_rehash",), "views"),
    Target(
        "native/src/containers.c",
        (
            "written",
            "zs_array_insert_packed",
            "zs_array_insert",
            "zs_array_remove",
            "zs_hash_add",
            "zs_optional_set",
        ),
        "views",
    ),
    Target(
        "native/src/value_stores.c",
        (
            "zs_begin_store",
            "zs_escape_owner",
            "end_store",
            "zs_value_assign",
            "zs_value_store_ref",
            "sanitise_ref",
            "zs_value_barrier",
            "zs_entries_barrier",
        ),
        "stores",
    ),
    # ---- the binding (zsharp_py._core) ---------------------------------------
    Target(
        "native/binding/zpy_conjugate_table.c",
        ("zpy_dropped_flush", "zpy_conjugate_of", "zpy_resolve_conjugate", "zpy_make_conjugate"),
        "lookups",
    ),
    Target("native/binding/zpy_python_api.c", ("python_proxy_of", "python_handle_of"), "lookups"),
    Target("native/binding/zpy_soft_paths.c", ("find_by_path", "zpyv_soft_get"), "lookups"),
    Target(
        "native/binding/zpy_expiry.c",
        ("expire_one", "expire_handed", "zpy_expire_handed_over", "zpy_expire_dying"),
        "expiry",
    ),
    Target(
        "native/binding/zpy_collection.c",
        ("expire_pending",),
        "expiry",
    ),
    Target(
        "native/binding/zpy_views.c",
        (
            "zpyv_holder_table",
            "zpyv_expire_table",
            "zpyv_expire_in_place",
            "zpyv_expire_scope",
            "zpyv_expire_blacks",
        ),
        "views",
    ),
    Target(
        "native/binding/zpy_containers.c",
        ("zpyv_structure_changed", "zpyv_contents_changed", "zpyv_position_of"),
        "views",
    ),
    Target(
        "native/binding/zpy_array.c",
        ("array_locator", "array_insert_staged", "array_remove"),
        "views",
    ),
    Target(
        "native/binding/zpy_hash_base.c",
        ("zpyv_hash_add", "zpyv_hash_remove", "zpyv_hash_add_all", "zpyv_hash_clear"),
        "views",
    ),
    Target("native/binding/zpy_optional.c", ("optional_locator", "optional_set"), "views"),
    Target("native/binding/core.h", ("zpy_life_may",), "runtime"),
    Target(
        "native/binding/zpy_life.c",
        ("zpy_life_enter", "zpy_life_leave", "zpy_life_free_native", "zpy_rt_open"),
        "runtime",
    ),
    Target("native/binding/zpy_errors.c", ("zpyv_writable",), "staging"),
    Target("native/binding/zpy_emit.c", ("zpyv_references_valid",), "staging"),
    # ---- the Python layers that decide lifetimes -----------------------------
    Target(
        "src/zsharp_py/_runtime/runtime.py",
        (
            "Runtime.close",
            "Runtime._close_now",
            "Runtime.object_from_handle",
            "Runtime._refuse_reentry",
            "Runtime._collection",
            "Runtime._conjugate_of_slow",
        ),
        "runtime",
    ),
    Target(
        "src/zsharp_py/_runtime/collector.py",
        ("GarbageCollector.collect", "GarbageCollector.step", "GarbageCollector._expire_refused"),
        "runtime",
    ),
    Target(
        "src/zsharp_py/_runtime/runtime.py",
        ("Runtime._release_deferred", "Runtime._host_freed"),
        "runtime",
    ),
    Target(
        "src/zsharp_py/_model/object.py",
        ("Object._live_address", "Object.add_to_root", "Object.mark_as_garbage"),
        "runtime",
    ),
    Target("src/zsharp_py/_base/errors.py", ("check", "refused"), "runtime"),
    Target(
        "src/zsharp_py/_types/pointers.py",
        ("_lookup", "LazyObjectPtr.get", "LazyObjectPtr.bind"),
        "lookups",
    ),
    Target("src/zsharp_py/_types/delegates.py", ("_plain", "_live_binding"), "lookups"),
)


# The fixed CI sample: one mutant of each kind of decision, each of which a
# test must kill (`python tools/mutate.py --smoke`, .ci/run).
SMOKE: tuple[str, ...] = (
    # a lookup by name finds a dying object (unmarked mid-gather, or destroyed)
    "name_matches:drop-condition:178e8162",
    # the write barrier gone (native/src/internal.h: a header's users rebuilt)
    "zs_gc_barrier:remove-call:435cf4c7",
    # the host API: a side that did not set the expiry handler replaces it
    "zs_expiry_owner:drop-condition:78de13f4",
    # the handler replaced from inside a hand-over
    "zs_set_expiry_handler:drop-condition:f7791c41",
    # a purge while an incremental cycle still marks
    "zs_gc_purge_locked:drop-condition:4bae42d1",
    # a bounds check of zs_array_remove moved by one
    "zs_array_remove:off-by-one:e8a675e0",
    # a lookup by handle hands out a held proxy of a dying object
    "zpy_conjugate_of:negate-compare:0cf8aacf",
    # element views left live after a map insertion that failed after growing
    "zpyv_hash_add:drop-condition:66fc28e3",
    # element views left live after an array insertion that failed
    "array_insert_staged:remove-call:2187e3ee",
    # a Python index one past the end accepted
    "zpyv_position_of:off-by-one:b1b45c21",
    # Python: a refused call no longer expires the pending conjugates first
    "refused:remove-call:1314c57c",
    # Python: close() that closes nothing
    "Runtime.close:remove-call:d30fa6bb",
)
