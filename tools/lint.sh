#!/usr/bin/env bash
# Lint the whole tree: ruff's linter and formatter check (Python), the
# import-linter contracts (layering of src/zsharp_py), the layering of
# native/binding (tools/check_binding_layers.py) and of native/src
# (tools/check_native_layers.py) and, when present,
# tools/lint_c.sh (clang-format on the C sources). Every step runs even after
# one fails; the exit status is non-zero if any failed.
#
#   pip install -e '.[lint]'      # ruff, import-linter (and clang-format)
#   bash tools/lint.sh
#
# To fix what it reports, from the repository root:
#
#   ruff format .                 # reformat (the formatter is never "wrong")
#   ruff check --fix .            # apply ruff's safe fixes; fix the rest by hand
#
# A finding that is deliberate gets `# noqa: CODE  reason` on its line, or an
# entry with a comment in [tool.ruff.lint.per-file-ignores] (pyproject.toml).
set -uo pipefail
cd "$(dirname "$0")/.."

failed=()

step() {
    local name="$1"
    shift
    echo "== $name: $*"
    if "$@"; then
        echo "-- $name: ok"
    else
        echo "-- $name: FAILED"
        failed+=("$name")
    fi
}

need() {
    if ! command -v "$1" >/dev/null 2>&1; then
        echo "== $1 not found: pip install -e '.[lint]'"
        failed+=("$1 (not installed)")
        return 1
    fi
}

if need ruff; then
    step "ruff check" ruff check .
    # The files to reformat, one a line ('ruff format --diff .' shows how).
    step "ruff format" ruff format --check --output-format concise .
fi

if grep -q '^\[tool\.importlinter' pyproject.toml; then
    if need lint-imports; then
        # No cache: the checkout is never written to.
        step "import-linter" lint-imports --no-cache
    fi
else
    echo "== import-linter: skipped (no [tool.importlinter] contract in pyproject.toml yet)"
fi

# native/binding's layers and prefix (docs/binding.md).
step "binding layers" python3 tools/check_binding_layers.py
# native/src's layers (docs/native.md).
step "native layers" python3 tools/check_native_layers.py

if [ -f tools/lint_c.sh ]; then
    step "C formatting" bash tools/lint_c.sh
fi

if [ "${#failed[@]}" -gt 0 ]; then
    echo "lint: FAILED: ${failed[*]}"
    echo "fix formatting with 'ruff format .' and safe findings with 'ruff check --fix .'"
    exit 1
fi
echo "lint: all clean"
