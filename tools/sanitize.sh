#!/usr/bin/env bash
# Build the native library with -fsanitize=address,undefined and run the C
# tests and the Python suite against it. Fails on any sanitizer report.
#
#   bash tools/sanitize.sh            # C tests + the whole Python suite
#   bash tools/sanitize.sh -k gc      # extra arguments go to pytest
#
# The build happens in a throwaway copy of the tree and a throwaway venv
# (tools/_sanitized_venv.sh), so the normal in-place build of your checkout
# is left alone. LeakSanitizer is on for the C tests and off for Python
# (CPython keeps interned objects until exit).
set -euo pipefail
# shellcheck source=tools/_sanitized_venv.sh
. "$(dirname "$0")/_sanitized_venv.sh"

echo "== C tests under ASan/UBSan"
CFLAGS_SAN="-std=c11 -O1 -g -Wall -Wextra -Werror -pedantic -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
cc $CFLAGS_SAN -I"$here/native/include" -I"$here/native/src" -I"$here/native/engine" \
    "$here"/native/src/*.c "$here"/native/engine/*.c "$here"/native/tests/*.c -o "$work/test_native"
ASAN_OPTIONS=detect_leaks=1 "$work/test_native"

echo "== Python suite against the sanitized extension"
sanitized_venv
# Not mypy (not installed here) nor the C tests' own build (run above); by
# node id rather than -k, so that a -k among the arguments still composes.
(cd "$tree" && run_sanitized \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider --ignore=tests/test_native_c.py \
    --deselect tests/test_tooling.py::test_package_is_mypy_strict_clean \
    --deselect tests/test_tooling.py::test_generic_value_types_type_check_in_user_code "$@")
echo "sanitizers: clean"
