#!/usr/bin/env bash
# Build the native library with -fsanitize=address,undefined and run the C
# tests and the Python suite against it. Fails on any sanitizer report.
#
#   bash tools/sanitize.sh            # C tests + the whole Python suite
#   bash tools/sanitize.sh --smoke    # C tests + the memory-safety files (CI)
#   bash tools/sanitize.sh -k gc      # extra arguments go to pytest
#
# The smoke run takes the files whose tests attack the heap: hostile values
# and collector-driven mutation, use after free and expiry, the objects
# freed at once, views and their lifetimes (after failed structural
# changes too), native functions, overrides and tick functions that collect
# or destroy, host-owned heaps and host lookups, the expiry handler's
# errors, the collector itself and the model test: about 2
# minutes of tests after 2 of building, on 2 cores, where the whole suite
# takes 3.5 (CI keeps its 20 minutes' margin with the smoke run). Run the
# whole suite after changing the native code or the binding.
#
# The build happens in a throwaway copy of the tree and a throwaway venv
# (tools/_sanitized_venv.sh), so the normal in-place build of your checkout
# is left alone. LeakSanitizer is on for the C tests and off for Python
# (CPython keeps interned objects until exit).
set -euo pipefail
tests=()
if [ "${1:-}" = --smoke ]; then
    shift
    tests=(tests/hostile/test_hostile_conversions.py tests/hostile/test_hostile_slices_finalisers_creation.py tests/hostile/test_hostile_containers_structs.py
        tests/hostile/test_hostile_python_layer.py tests/gc/test_memory_safety.py tests/gc/test_unshared_objects.py
        tests/values/test_value_lifetimes.py tests/values/test_parked_views.py tests/objects/test_conjugate_descriptors_and_table.py
        tests/interop/test_native_functions.py tests/interop/test_native_calls.py tests/interop/test_sample_engine.py
        tests/interop/test_tick_manager.py
        tests/interop/test_native_broadcast.py tests/interop/test_callback_errors.py tests/interop/test_enums.py
        tests/hosts/test_host_collections.py tests/hosts/test_host_owned.py tests/hosts/test_host_handles.py
        tests/objects/test_lifecycle.py tests/containers/test_views_after_failed_changes.py
        tests/gc/test_gc.py tests/gc/test_incremental.py tests/gc/test_expiry_handler.py
        tests/gc/test_reachability_model.py)
fi
# shellcheck source=tools/_sanitized_venv.sh
. "$(dirname "$0")/_sanitized_venv.sh"

echo "== C tests under ASan/UBSan"
CFLAGS_SAN="-std=c11 -O1 -g -Wall -Wextra -Werror -pedantic -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
cc $CFLAGS_SAN -I"$here/native/include" -I"$here/native/src" -I"$here/native/engine" \
    "$here"/native/src/*.c "$here"/native/engine/*.c "$here"/native/tests/*.c -o "$work/test_native"
ASAN_OPTIONS=detect_leaks=1 "$work/test_native"

echo "== Python suite against the sanitized extension"
sanitized_venv
# Not the type checkers (mypy and pyright are not installed here) nor the C
# tests' own build (run above); by node id rather than -k, so that a -k
# among the arguments still composes.
(cd "$tree" && run_sanitized \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider --ignore=tests/tooling/test_native_c_suite.py \
    --deselect tests/tooling/test_project_standards.py::test_package_is_mypy_strict_clean \
    --deselect tests/tooling/test_project_standards.py::test_generic_value_types_type_check_in_user_code \
    --deselect tests/tooling/test_type_checkers.py::test_a_correct_game_script_is_clean \
    --deselect tests/tooling/test_type_checkers.py::test_each_mistake_is_reported_and_nothing_else \
    ${tests[@]+"${tests[@]}"} "$@")
echo "sanitizers: clean"
