#!/usr/bin/env bash
# Coverage-guided fuzzing of the public API (atheris) against the library
# built with -fsanitize=address,undefined. Fails on any finding: a crash, a
# sanitizer report, an undocumented exception, a failed heap check, native
# objects, values or blocks left after closing a runtime.
#
#   bash tools/fuzz.sh                 # 60 seconds
#   bash tools/fuzz.sh 1800            # a long campaign
#   bash tools/fuzz.sh 60 -seed=1      # extra arguments go to libFuzzer
#
# The seed corpus (tools/fuzz/corpus) is copied into the throwaway work
# directory, so runs never write to the checkout. FUZZ_CORPUS=DIR fuzzes
# with DIR as the (growing) corpus instead; FUZZ_ARTIFACTS=DIR keeps crash
# inputs there (default: the current directory). Replay an input with
# `python tools/fuzz/harness.py crash-...` (against an extension built with
# ZSHARP_SANITIZE=1 or ZSHARP_ASSERTS=1 for native reports and the runtime's
# block-count assert).
set -euo pipefail
seconds="${1:-60}"
shift || true
# shellcheck source=tools/_sanitized_venv.sh
. "$(dirname "$0")/_sanitized_venv.sh"

echo "== building the sanitized extension and installing atheris"
# atheris's libFuzzer needs its own (clang) ASan runtime, which also carries
# UBSan; gcc's libasan would take over libFuzzer's coverage hooks.
sanitizer_link=no
sanitized_venv atheris
sanitizer_preload="$("$venv/bin/python" -c 'import atheris; print(atheris.path())')/asan_with_fuzzer.so"
corpus="${FUZZ_CORPUS:-$work/corpus}"
mkdir -p "$corpus"
if [ -z "${FUZZ_CORPUS:-}" ]; then cp "$here"/tools/fuzz/corpus/* "$corpus"/; fi
mkdir -p "${FUZZ_ARTIFACTS:-.}"
artifacts="$(cd "${FUZZ_ARTIFACTS:-.}" && pwd)/"

echo "== fuzzing for ${seconds}s"
(cd "$tree" && run_sanitized "$venv/bin/python" tools/fuzz/fuzz_api.py \
    -max_total_time="$seconds" -max_len=4096 -timeout=30 -detect_leaks=0 -print_final_stats=1 \
    -artifact_prefix="$artifacts" "$@" "$corpus")
echo "fuzzing: no findings"
