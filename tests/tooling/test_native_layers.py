"""The layering rule of native/src (docs/native.md) and its check,
tools/check_native_layers.py: the tree keeps the rule, and in a temporary
copy an arrow against it (called directly, or hidden in a header's inline
function or macro), a cycle within a layer, a file the table does not place,
a file it places that is gone, a stale exception or an exported name without
zs_ is reported, and the command fails on it."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_check() -> ModuleType:
    """tools/check_native_layers.py as a module."""
    spec = importlib.util.spec_from_file_location(
        "check_native_layers", ROOT / "tools" / "check_native_layers.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def copy_tree(tmp_path: Path) -> Path:
    """The native library, the public headers and the rule, copied under tmp_path."""
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "native.md", tmp_path / "docs" / "native.md")
    for part in ("src", "include"):
        shutil.copytree(ROOT / "native" / part, tmp_path / "native" / part)
    return tmp_path


def append(path: Path, code: str) -> None:
    """Add C code at the end of a file of the copy."""
    path.write_text(path.read_text() + "\n" + code + "\n")


def test_native_src_keeps_its_layers() -> None:
    assert load_check().check(ROOT) == []


def test_every_file_is_placed_and_the_one_exception_is_the_deferred_free() -> None:
    check = load_check()
    layer_of, names, exceptions = check.read_rule(ROOT / "docs" / "native.md")
    files = {p.name for p in (ROOT / "native" / "src").glob("*.[ch]")}
    assert files == set(layer_of)
    assert exceptions == {("calls.c", "runtime.c")}
    uses, _ = check.arrows(ROOT)
    assert "zs_runtime_free" in uses["calls.c", "runtime.c"]
    # The files other engineers change in parallel keep their code; they are
    # placed, not split (docs/native.md).
    assert names[layer_of["delegates.c"]] == "values"
    assert names[layer_of["calls.c"]] == "calls out"


def test_an_upward_call_is_reported(tmp_path: Path) -> None:
    root = copy_tree(tmp_path)
    append(
        root / "native" / "src" / "names.c",
        "/* A bad arrow. */\nvoid zs_bad(zs_runtime *rt) { zs_gc_destroy_everything(rt); }",
    )
    problems = load_check().check(root)
    assert any(
        "names.c (base) uses gc_purge.c (collection), a layer above" in p
        and "zs_gc_destroy_everything" in p
        for p in problems
    ), problems


def test_an_arrow_through_a_header_inline_function_is_reported(tmp_path: Path) -> None:
    # zs_gc_barrier is inline in internal.h; what it calls (the marker's
    # slow path) is an arrow of the file that uses it.
    root = copy_tree(tmp_path)
    append(
        root / "native" / "src" / "types.c",
        "/* A bad arrow. */\nvoid zs_bad(zs_runtime *rt, zs_item *it) { zs_gc_barrier(rt, it); }",
    )
    problems = load_check().check(root)
    assert any(
        "types.c (descriptions) uses gc_mark.c (reachability)" in p and "zs_gc_barrier_slow" in p
        for p in problems
    ), problems


def test_an_arrow_through_a_header_macro_is_reported(tmp_path: Path) -> None:
    root = copy_tree(tmp_path)
    header = root / "native" / "src" / "internal.h"
    header.write_text(
        header.read_text().replace(
            "#endif /* ZSHARP_INTERNAL_H */",
            "#define ZS_BAD(rt) zs_gc_release(rt)\n#endif /* ZSHARP_INTERNAL_H */",
        )
    )
    append(
        root / "native" / "src" / "memory.c",
        "/* A bad arrow. */\nvoid zs_bad(zs_runtime *rt) { ZS_BAD(rt); }",
    )
    problems = load_check().check(root)
    assert any(
        "memory.c (base) uses gc_cycle.c (collection)" in p and "zs_gc_release" in p
        for p in problems
    ), problems


def test_a_cycle_within_a_layer_is_reported(tmp_path: Path) -> None:
    # classes.c uses types.c; types.c using classes.c closes a circle.
    root = copy_tree(tmp_path)
    append(
        root / "native" / "src" / "types.c",
        "/* A bad arrow. */\n"
        "uint32_t zs_bad(const zs_class *cls) { return zs_class_member_op(cls, 0); }",
    )
    problems = load_check().check(root)
    assert any(
        p.startswith("a cycle within a layer") and "types.c -> classes.c" in p for p in problems
    ), problems


def test_an_unplaced_file_is_named_with_what_to_do(tmp_path: Path) -> None:
    root = copy_tree(tmp_path)
    (root / "native" / "src" / "tick.c").write_text(
        '#include "internal.h"\n/* A new file. */\nvoid zs_tick(zs_runtime *rt) { (void)rt; }\n'
    )
    problems = load_check().check(root)
    assert (
        "native/src/tick.c: in no layer of docs/native.md: add it to the row of the layer it"
        " belongs to (and say what it owns)"
    ) in problems


def test_a_placed_file_that_is_gone_is_reported(tmp_path: Path) -> None:
    root = copy_tree(tmp_path)
    (root / "native" / "src" / "debug.c").unlink()
    problems = load_check().check(root)
    assert "docs/native.md places debug.c, which native/src does not have" in problems


def test_an_exception_no_arrow_needs_is_reported(tmp_path: Path) -> None:
    root = copy_tree(tmp_path)
    rule = root / "docs" / "native.md"
    rule.write_text(
        rule.read_text().replace(
            "| `calls.c` -> `runtime.c` |",
            "| `names.c` -> `runtime.c` | none |\n| `calls.c` -> `runtime.c` |",
        )
    )
    problems = load_check().check(root)
    assert problems == [
        "the exception names.c -> runtime.c is listed, but names.c no longer uses runtime.c"
    ]


def test_without_its_exception_the_deferred_free_is_reported(tmp_path: Path) -> None:
    root = copy_tree(tmp_path)
    rule = root / "docs" / "native.md"
    text = rule.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `calls.c` -> "))
    rule.write_text(text.replace(row + "\n", ""))
    problems = load_check().check(root)
    assert problems == [
        "calls.c (calls out) uses runtime.c (runtime and tools), a layer above: zs_runtime_free"
    ]


def test_an_export_without_the_prefix_is_reported(tmp_path: Path) -> None:
    root = copy_tree(tmp_path)
    append(root / "native" / "src" / "names.c", "/* Bad. */\nint names_helper(void) { return 0; }")
    problems = load_check().check(root)
    assert "names.c: names_helper is exported without the zs_ prefix" in problems


@pytest.mark.parametrize("bad", [False, True])
def test_the_command_exits_on_what_it_finds(
    tmp_path: Path, bad: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    root = copy_tree(tmp_path)
    if bad:
        append(
            root / "native" / "src" / "memory.c",
            "/* Bad. */\nvoid zs_bad(zs_runtime *rt) { zs_heap_release(rt); }",
        )
    assert load_check().main([str(root)]) == (1 if bad else 0)
    out = capsys.readouterr().out
    assert ("native/src layering: 1 problem(s)" in out) == bad
    assert ("native/src layering: ok" in out) == (not bad)
