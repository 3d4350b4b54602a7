"""The layering rule of native/binding (docs/binding.md) and its check,
tools/check_binding_layers.py: the tree keeps the rule, and an arrow
against it, an unlisted file or a binding name with the heap's prefix, in
a temporary copy, is reported."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_check() -> ModuleType:
    """tools/check_binding_layers.py as a module."""
    spec = importlib.util.spec_from_file_location(
        "check_binding_layers", ROOT / "tools" / "check_binding_layers.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def copy_tree(tmp_path: Path) -> Path:
    """The binding, the public headers and the rule, copied under tmp_path."""
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "binding.md", tmp_path / "docs" / "binding.md")
    for part in ("binding", "include"):
        shutil.copytree(ROOT / "native" / part, tmp_path / "native" / part)
    return tmp_path


def test_the_binding_keeps_its_layers() -> None:
    assert load_check().check(ROOT) == []


def test_an_upward_call_is_reported(tmp_path: Path) -> None:
    root = copy_tree(tmp_path)
    scalar = root / "native" / "binding" / "zpy_scalar.c"
    scalar.write_text(
        scalar.read_text()
        + "\n/* A bad arrow. */\nvoid zpy_bad(void) { zpy_expire_dying(0, 0, 0, 0); }\n"
    )
    problems = load_check().check(root)
    assert any(
        "zpy_scalar.c (base) uses zpy_expiry.c" in p and "zpy_expire_dying" in p for p in problems
    ), problems


def test_a_cycle_within_a_layer_is_reported(tmp_path: Path) -> None:
    root = copy_tree(tmp_path)
    kind = root / "native" / "binding" / "zpy_kind.c"
    kind.write_text(
        kind.read_text()
        + "\n/* A bad arrow. */\nvoid zpy_bad(void) { zpyv_stage(0, 0, 0, 0, 0); }\n"
    )
    problems = load_check().check(root)
    assert any(
        p.startswith("a cycle within a layer") and "zpy_kind.c -> zpy_stage.c" in p
        for p in problems
    ), problems


def test_an_unlisted_file_and_a_zs_name_are_reported(tmp_path: Path) -> None:
    root = copy_tree(tmp_path)
    (root / "native" / "binding" / "zpy_new.c").write_text(
        '#include "core.h"\n/* Bad. */\nint zs_mine(void) { return 0; }\n'
    )
    problems = load_check().check(root)
    assert "zpy_new.c: in no layer of docs/binding.md" in problems
    assert any(p.startswith("zs_mine:") for p in problems), problems


def test_the_command_fails_on_a_bad_arrow(tmp_path: Path, capsys: object) -> None:
    root = copy_tree(tmp_path)
    errors = root / "native" / "binding" / "zpy_errors.c"
    errors.write_text(
        errors.read_text() + "\n/* Bad. */\nvoid zpy_bad(void) { zpy_add_weak_type(0, 0); }\n"
    )
    assert load_check().main([str(root)]) == 1
