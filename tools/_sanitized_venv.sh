# Sourced by tools/sanitize.sh and tools/fuzz.sh (not run on its own):
# a throwaway copy of the checkout whose extension is built with
# -fsanitize=address,undefined, in a throwaway venv, so the normal in-place
# build of the checkout is left alone.
#
#   . "$(dirname "$0")/_sanitized_venv.sh"
#   sanitized_venv [extra pip packages...]    # builds; sets $work, $tree, $venv
#   run_sanitized "$venv/bin/python" ...       # runs with the sanitizer runtimes
#
# Python itself is not instrumented, so the sanitizer runtimes are preloaded:
# gcc's libasan and libubsan by default. With sanitizer_link=no before
# sanitized_venv, the extension is instrumented but not linked against them
# (ZSHARP_SANITIZE=nolink) and the caller sets sanitizer_preload to the one
# runtime to load (tools/fuzz.sh: atheris's clang ASan+UBSan+libFuzzer;
# two ASan runtimes in one process refuse to start). LeakSanitizer is off
# for Python (CPython keeps interned objects until exit); native leaks are
# caught by the runtime's own block count, which zs_runtime_free asserts is
# zero (asserts are kept in this build). $work is removed when the sourcing
# script exits.

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/zsharp-asan.XXXXXX")"
trap 'rm -rf "$work"' EXIT
tree="$work/tree"
venv="$work/venv"
sanitizer_link=yes
sanitizer_preload="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"

# Copy the checkout, create the venv, build the sanitized extension into it.
sanitized_venv() {
    mkdir -p "$tree"
    tar -C "$here" --exclude=.git --exclude='*.so' --exclude=build --exclude='.venv*' \
        --exclude=__pycache__ --exclude=.hypothesis -cf - . | tar -C "$tree" -xf -
    "$python" -m venv "$venv"
    # setuptools>=77 as pyproject.toml's build-system requires: a new venv
    # comes with an older one, which plain `pip install setuptools` keeps.
    "$venv/bin/pip" install -q cffi "setuptools>=77" wheel pytest hypothesis typing-extensions "$@"
    local mode=1
    if [ "$sanitizer_link" = no ]; then mode=nolink; fi
    (cd "$tree" && ZSHARP_SANITIZE=$mode "$venv/bin/pip" install -q --no-build-isolation -e .)
}

# Run a command with the sanitizer runtimes preloaded; any report aborts it.
run_sanitized() {
    LD_PRELOAD="$sanitizer_preload" \
    ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}" \
    "$@"
}
