#!/usr/bin/env bash
# ThreadSanitizer: the C tests (native/tests + native/src) built with
# -fsanitize=thread, then the Python tests that use threads (-k thread)
# against the extension built with ZSHARP_SANITIZE=thread in a throwaway
# copy of the tree and a throwaway venv. Fails on any report.
#
#   bash tools/tsan.sh            # every C test, then the Python thread tests
#   bash tools/tsan.sh --smoke    # CI: only the C tests that start threads (--threaded)
#   bash tools/tsan.sh --c        # the C tests only
#   bash tools/tsan.sh --python   # the Python thread tests only
#   bash tools/tsan.sh --python -k safety   # extra arguments go to pytest
#
# Why tools/tsan/c11_threads.c: glibc implements C11 <threads.h>
# (thrd_create, mtx_lock, cnd_wait...) by calling its internal pthread entry
# points, which ThreadSanitizer (gcc's and clang's runtimes alike) does not
# intercept: a thread from thrd_create then crashes at its first
# instrumented access (the "crash at thread start"; address-space
# randomisation is not the cause here, and setarch -R does not help), and
# every mtx_lock would be invisible. The shim defines those functions over
# the intercepted pthread ones; it is linked into the C test program and
# preloaded after libtsan for Python.
#
# Suppressions: tools/tsan.supp (each entry explained there). CC picks the
# compiler (default cc); its libtsan is the one preloaded.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cc="${CC:-cc}"
python="${PYTHON:-python3}"
run_c=yes
run_python=yes
smoke=no
while [ $# -gt 0 ]; do
    case "$1" in
    --smoke) smoke=yes ;;
    --c) run_python=no ;;
    --python) run_c=no ;;
    *) break ;;
    esac
    shift
done
work="$(mktemp -d "${TMPDIR:-/tmp}/zsharp-tsan.XXXXXX")"
trap 'rm -rf "$work"' EXIT

libtsan="$("$cc" -print-file-name=libtsan.so)"
if [ ! -e "$libtsan" ]; then
    echo "tsan.sh: $cc has no ThreadSanitizer runtime (libtsan.so)" >&2
    exit 1
fi
# Reports do not stop the run (all of them are printed); any report makes
# the exit status 66.
export TSAN_OPTIONS="${TSAN_OPTIONS:-second_deadlock_stack=1 exitcode=66 suppressions=$here/tools/tsan.supp}"

if [ "$run_c" = yes ]; then
    echo "== C tests under ThreadSanitizer"
    "$cc" -std=c11 -O1 -g -Wall -Wextra -Werror -pedantic -fsanitize=thread -fno-omit-frame-pointer \
        -I"$here/native/include" -I"$here/native/src" -I"$here/native/engine" "$here"/native/src/*.c \
        "$here"/native/engine/*.c "$here"/native/tests/*.c \
        "$here/tools/tsan/c11_threads.c" -o "$work/test_native_tsan" -pthread
    if [ "$smoke" = yes ]; then
        # The tests that start threads (parallel marks, threads sharing a
        # runtime, the runtime lock): those tagged THREADED_TEST, a tag the
        # C runner checks against what each test does.
        "$work/test_native_tsan" --threaded
    else
        "$work/test_native_tsan"
    fi
fi

if [ "$run_python" = yes ]; then
    echo "== building the extension with ZSHARP_SANITIZE=thread"
    "$cc" -shared -fPIC -O1 -g "$here/tools/tsan/c11_threads.c" -o "$work/libc11threads.so" -pthread
    tree="$work/tree"
    mkdir -p "$tree"
    tar -C "$here" --exclude=.git --exclude='*.so' --exclude=build --exclude='.venv*' \
        --exclude=__pycache__ --exclude=.hypothesis -cf - . | tar -C "$tree" -xf -
    "$python" -m venv "$work/venv"
    "$work/venv/bin/pip" install -q cffi "setuptools>=77" wheel pytest hypothesis typing-extensions
    (cd "$tree" && CC="$cc" ZSHARP_SANITIZE=thread "$work/venv/bin/pip" install -q --no-build-isolation -e .)
    echo "== Python thread tests under ThreadSanitizer"
    (cd "$tree" && LD_PRELOAD="$libtsan $work/libc11threads.so" \
        "$work/venv/bin/python" -m pytest -q -p no:cacheprovider -k thread "$@")
fi
echo "tsan: clean"
