#!/usr/bin/env bash
# Check that every C, C++ and header file we own is formatted as .clang-format
# says: the files under native/, benchmarks/csrc/, examples/ and tools/ that
# git tracks or would track (new files too, before their first commit: CI
# checks them once they land; ignored build outputs never). Exits non-zero
# on any difference, or when the clang-format found is not the version
# pinned in pyproject.toml's `lint` extra (versions format differently).
#
#   pip install -e '.[lint]'     # the pinned clang-format
#   tools/lint_c.sh              # check
#   tools/lint_c.sh --fix        # reformat the same files in place
set -euo pipefail
cd "$(dirname "$0")/.."

clang_format=${CLANG_FORMAT:-clang-format}
if ! command -v "$clang_format" >/dev/null; then
    echo "lint_c.sh: $clang_format not found; pip install -e '.[lint]'" >&2
    exit 2
fi
pinned=$(sed -n 's/.*"clang-format==\([0-9.]*\)".*/\1/p' pyproject.toml | head -n 1)
found=$("$clang_format" --version | sed -n 's/.*clang-format version \([0-9.]*\).*/\1/p')
if [ -z "$pinned" ] || [ "$found" != "$pinned" ]; then
    echo "lint_c.sh: clang-format $found found, pyproject.toml pins ${pinned:-nothing}" >&2
    exit 2
fi

mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
    'native/*.c' 'native/*.h' \
    'benchmarks/csrc/*.c' 'benchmarks/csrc/*.h' 'benchmarks/csrc/*.cpp' \
    'examples/*.c' 'examples/*.h' \
    'tools/*.c')

if [ "${1:-}" = "--fix" ]; then
    "$clang_format" -i --style=file "${files[@]}"
else
    "$clang_format" --dry-run --Werror --style=file "${files[@]}"
    echo "lint_c.sh: ${#files[@]} files formatted as .clang-format says"
fi
