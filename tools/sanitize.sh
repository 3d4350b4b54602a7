#!/usr/bin/env bash
# Build the native library with -fsanitize=address,undefined and run the C
# tests and the Python suite against it. Fails on any sanitizer report.
#
#   bash tools/sanitize.sh            # C tests + the whole Python suite
#   bash tools/sanitize.sh -k gc      # extra arguments go to pytest
#
# The build happens in a throwaway copy of the tree and a throwaway venv, so
# the normal in-place build of your checkout is left alone. Python itself is
# not instrumented, so libasan is preloaded; LeakSanitizer is on for the C
# tests and off for Python (CPython keeps interned objects until exit).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/zsharp-asan.XXXXXX")"
trap 'rm -rf "$work"' EXIT
python="${PYTHON:-python3}"

echo "== C tests under ASan/UBSan"
CFLAGS_SAN="-std=c11 -O1 -g -Wall -Wextra -Werror -pedantic -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
cc $CFLAGS_SAN -I"$here/native/include" -I"$here/native/src" \
    "$here"/native/src/*.c "$here"/native/tests/*.c -o "$work/test_native"
ASAN_OPTIONS=detect_leaks=1 "$work/test_native"

echo "== Python suite against the sanitized extension"
mkdir -p "$work/tree"
tar -C "$here" --exclude=.git --exclude='*.so' --exclude=build --exclude='.venv*' \
    --exclude=__pycache__ --exclude=.hypothesis -cf - . | tar -C "$work/tree" -xf -
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install -q cffi setuptools wheel pytest hypothesis typing-extensions
(cd "$work/tree" && ZSHARP_SANITIZE=1 "$work/venv/bin/pip" install -q --no-build-isolation -e .)
libasan="$(cc -print-file-name=libasan.so)"
libubsan="$(cc -print-file-name=libubsan.so)"
(cd "$work/tree" && \
    LD_PRELOAD="$libasan $libubsan" \
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$work/venv/bin/python" -m pytest -q -p no:cacheprovider -k "not mypy and not native_c" "$@")
echo "sanitizers: clean"
