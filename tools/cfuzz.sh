#!/usr/bin/env bash
# Coverage-guided fuzzing of the C API itself: libFuzzer drives
# native/fuzz/fuzz_api.c (each input a program of zsharp.h calls, see the
# file's header) built with -fsanitize=fuzzer,address,undefined, asserts
# kept, against native/src/*.c. Fails on any finding: a crash, a sanitizer
# report, a leak, a failed zs_heap_verify or harness oracle, a timeout, or a
# non-zero block count when a runtime is freed (the library asserts it).
#
#   bash tools/cfuzz.sh                      # 60 seconds
#   bash tools/cfuzz.sh 3600 -jobs=2 -workers=2   # a long campaign on 2 cores
#   bash tools/cfuzz.sh 60 -seed=1           # extra arguments go to libFuzzer
#
# Corpus: the committed seeds (native/fuzz/corpus) are read, never written;
# new inputs go to native/fuzz/corpus-local/ (gitignored), or to
# FUZZ_CORPUS=DIR. A finding's input is written to native/fuzz/artifacts/
# (gitignored), or to FUZZ_ARTIFACTS=DIR. Replay one (FUZZ_TRACE=1 prints
# every operation):
#   FUZZ_TRACE=1 native/fuzz/build/fuzz_api native/fuzz/artifacts/crash-...
# Needs clang with libFuzzer (Debian: clang and libclang-rt-<version>-dev);
# when it is missing and apt-get can be run, they are installed.
set -euo pipefail
seconds="${1:-60}"
shift || true
here="$(cd "$(dirname "$0")/.." && pwd)"
fuzz="$here/native/fuzz"
clang="${CLANG:-clang}"

# clang and its libFuzzer runtime.
fuzzer_ok() {
    command -v "$clang" > /dev/null &&
        echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { (void)d; (void)n; return 0; }' |
        "$clang" -x c -fsanitize=fuzzer -o /dev/null - 2> /dev/null
}
if ! fuzzer_ok; then
    if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
        echo "== installing clang with libFuzzer (apt-get)"
        apt-get update -qq > /dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang > /dev/null
        major="$("$clang" -dumpversion | cut -d. -f1)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "libclang-rt-$major-dev" > /dev/null 2>&1 || true
    fi
    fuzzer_ok || { echo "cfuzz.sh: $clang with -fsanitize=fuzzer is required" >&2; exit 1; }
fi

echo "== building native/fuzz/build/fuzz_api"
mkdir -p "$fuzz/build"
"$clang" -std=c11 -O1 -g -Wall -Wextra -Werror -pedantic \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -UNDEBUG \
    -I"$here/native/include" -I"$here/native/src" "$here"/native/src/*.c "$fuzz/fuzz_api.c" \
    -o "$fuzz/build/fuzz_api" -pthread

corpus="${FUZZ_CORPUS:-$fuzz/corpus-local}"
artifacts="${FUZZ_ARTIFACTS:-$fuzz/artifacts}"
mkdir -p "$corpus" "$artifacts"
artifacts="$(cd "$artifacts" && pwd)/"
logs="$(mktemp -d "${TMPDIR:-/tmp}/zsharp-cfuzz.XXXXXX")"
trap 'rm -rf "$logs"' EXIT
before="$(ls "$artifacts" | wc -l)"

echo "== fuzzing for ${seconds}s"
# Progress lines (NEW, REDUCE, pulse) are left out. With -jobs, each job
# writes fuzz-N.log in the working directory, and libFuzzer prints it here
# when the job ends; a job's finding shows as a new file in $artifacts.
set +e
(cd "$logs" && "$fuzz/build/fuzz_api" -max_total_time="$seconds" -max_len=1024 -len_control=0 \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts" "$@" \
    "$corpus" "$fuzz/corpus") 2>&1 | grep --line-buffered -v -E '^#[0-9]+.*(NEW|REDUCE|pulse)'
status="${PIPESTATUS[0]}"
set -e
after="$(ls "$artifacts" | wc -l)"
if [ "$status" != 0 ] || [ "$after" != "$before" ]; then
    echo "cfuzz: FINDING (exit $status); inputs in $artifacts" >&2
    exit 1
fi
echo "cfuzz: no findings"
