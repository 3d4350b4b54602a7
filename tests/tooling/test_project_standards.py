"""The package's own standards: mypy --strict clean, README commands in
sync with CI (README's examples run in tests/tooling/test_docs_examples.py, with
every docs page's), the layer rules, the installed package list."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from helpers import slice_of

ROOT = Path(__file__).resolve().parents[2]


def _readme_commands() -> list[str]:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from readme_command import readme_commands
    finally:
        sys.path.pop(0)
    return readme_commands(ROOT / "README.md")


def test_package_is_mypy_strict_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ci_runs_both_readme_commands_verbatim() -> None:
    """CI executes README's own text (read at run time, so it cannot drift):
    the first command with a plain install, the second with the
    development install, each in a fresh virtual environment."""
    install_and_demo, install_and_test = _readme_commands()
    assert "pip install . " in install_and_demo + " " and "-e" not in install_and_demo
    assert "python -m zsharp_py demo" in install_and_demo
    assert "python -m pytest" in install_and_test
    ci_script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for which in (1, 2):
        assert f'bash -euo pipefail -c "$(python3 tools/readme_command.py {which})"' in ci_script
    first, second = (
        ci_script.index(f'-c "$(python3 tools/readme_command.py {which})"') for which in (1, 2)
    )
    assert ci_script.index("fresh_venv .venv-ci-plain") < first
    assert first < ci_script.index("fresh_venv .venv-ci\n") < second


def test_ci_builds_the_docs_with_warnings_as_errors() -> None:
    """CI builds the documentation after the suite, in the development venv,
    with the command README and CONTRIBUTING.md document."""
    ci_script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    build = "python -m sphinx -W --keep-going -q -b html docs docs/_build/html"
    assert build in ci_script
    assert ci_script.index('readme_command.py 2)"') < ci_script.index(build)
    documented = (
        "pip install -e '.[docs]' && python -m sphinx -W --keep-going -b html docs docs/_build/html"
    )
    assert documented in (ROOT / "README.md").read_text(encoding="utf-8")


# A user's module: the generic container and object-wrapper types in
# annotations. No ``from __future__ import annotations``, so importing it
# also evaluates every annotation at run time. Lines ending ``# E: <code>``
# are the errors mypy must report (and no others); ``reveal_type`` lines
# pin element types (not Any).
_USER_MODULE = """\
import uuid

from typing_extensions import reveal_type

import zsharp_py as zs


class Vec(zs.Struct):
    x: zs.Float64
    y: zs.Float64


class IPoke(zs.Interface):
    __slots__ = ()

    def poke(self) -> None: ...


# Every property has a default (``zs.zero()`` where no literal has the
# declared type: nothing to apply at run time): for a type checker a
# property without one is a required keyword of the class call, and
# subclass_property calls ``kind()``.
class Unit(zs.Object, IPoke):
    health: zs.Int32 = 0
    squad: zs.Array["Unit"] = zs.zero()
    tags: zs.Set[zs.Name] = zs.zero()
    scores: zs.Map[str, zs.Float64] = zs.zero()
    home: zs.Optional[Vec] = zs.zero()
    weak: zs.WeakObjectPtr["Unit"] = zs.zero()
    kind: zs.SubclassOf["Unit"] = zs.zero()
    soft: zs.SoftObjectPtr["Unit"] = zs.zero()
    soft_class: zs.SoftClassPtr["Unit"] = zs.zero()
    lazy: zs.LazyObjectPtr["Unit"] = zs.zero()
    poker: zs.ScriptInterface[IPoke] = zs.zero()

    def poke(self) -> None:
        self.health += 1


def total(xs: zs.Array[zs.Int32]) -> int:
    first: int = xs[0]
    rest: list[int] = xs[1:]
    reveal_type(xs[0])  # R: int
    return first + sum(rest) + sum(x for x in xs)


def scored(items: zs.Map[str, zs.Float64]) -> float:
    reveal_type(items["a"])  # R: float
    for key, value in items.items():
        assert isinstance(key, str) and isinstance(value, float)
    return items["a"] + items.get("b", 0.0)


def home_x(unit: Unit) -> float:
    home: Vec | None = unit.home.get()
    return home.x if home is not None else -1.0


def made() -> zs.Array[zs.Int32]:
    numbers = zs.Array[zs.Int32]([1, 2, 3])
    reveal_type(numbers)  # R: zsharp_py._types.containers.Array[int]
    return numbers


def wrappers(unit: Unit) -> int:
    reveal_type(unit.squad[0])  # R: __user__.Unit
    reveal_type(zs.SubclassOf[Unit](Unit).new())  # R: __user__.Unit
    reveal_type(unit.lazy.get())  # R: __user__.Unit | None
    reveal_type(unit.soft_class.load())  # R: type[__user__.Unit]
    reveal_type(zs.SubclassOf(Unit))  # R: zsharp_py._types.pointers.SubclassOf[__user__.Unit]
    reveal_type(zs.LazyObjectPtr.bind(unit, uuid.uuid4()))  # R: zsharp_py._types.pointers.LazyObjectPtr[zsharp_py._model.object.Object]
    poker: IPoke | None = unit.poker.get()
    soft: Unit | None = unit.soft.get()
    friend: Unit | None = unit.weak.get()
    tag_count = sum(1 for tag in unit.tags if isinstance(tag, zs.Name))
    return tag_count + (poker is not None) + (soft is not None) + (friend is not None)


def wrong_element(xs: zs.Array[zs.Int32]) -> str:
    return xs[0]  # E: return-value


def wrong_value(items: zs.Map[str, zs.Float64]) -> None:
    name: str = items["a"]  # E: assignment


def wrong_optional(vector: zs.Optional[Vec]) -> int:
    return vector.value  # E: return-value


def wrong_class(unit: Unit) -> zs.SubclassOf[Unit]:
    return zs.SubclassOf[zs.Object](zs.Object)  # E: return-value


def wrong_interface(unit: Unit) -> Unit | None:
    return unit.poker.get()  # E: return-value


class Loadout(zs.Struct):
    weapon: zs.SubclassOf[Unit]


class Plain:
    kind: zs.SubclassOf[Unit]

    def __init__(self) -> None:
        self.kind = zs.SubclassOf[Unit](Unit)


def subclass_property(unit: Unit, loadout: Loadout) -> Unit | None:
    reveal_type(unit.kind)  # R: type[__user__.Unit] | None
    reveal_type(loadout.weapon)  # R: type[__user__.Unit] | None
    reveal_type(Plain().kind)  # R: zsharp_py._types.pointers.SubclassOf[__user__.Unit]
    unit.kind = zs.SubclassOf[Unit](Unit)
    unit.kind = None
    unit.kind = Unit
    loadout.weapon = unit.kind
    kind = loadout.weapon
    return kind() if kind is not None else None


def wrong_subclass_new(unit: Unit) -> None:
    unit.kind.new()  # E: union-attr


def wrong_subclass_class(unit: Unit) -> None:
    unit.kind = zs.Object  # E: assignment


def plain_class(plain: Plain) -> None:
    # Accepted: SubclassOf's __set__ is one signature (zs.Object's
    # dataclass_transform types the class call's keyword by it).
    plain.kind = Unit
"""  # noqa: E501 (reveal_type lines hold mypy's output verbatim)


def test_generic_value_types_type_check_in_user_code(tmp_path: Path) -> None:
    """``zs.Array[zs.Int32]``, ``zs.Map[str, zs.Float64]``, the object
    wrappers... are generic classes for mypy --strict in a user's module:
    correct code passes, element types are kept (``xs[0]`` is an ``int``,
    not Any), and a wrong element type is an error. The same module runs."""
    module = tmp_path / "__user__.py"
    module.write_text(_USER_MODULE, encoding="utf-8")
    # Run as a user would: from a folder of their own, with no configuration
    # of ours, so mypy finds zsharp_py where it is installed (an editable
    # install included) and never in a source tree beside the module.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--show-error-codes",
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            str(module),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert "Cannot find implementation or library stub" not in result.stdout, result.stdout
    assert "No module named mypy" not in result.stderr, result.stderr
    errors: set[tuple[int, str]] = set()
    revealed: dict[int, str] = {}
    for line in result.stdout.splitlines():
        found = re.match(r".*__user__\.py:(\d+): (error|note): (.*)$", line)
        assert found, result.stdout + result.stderr
        number, kind, text = int(found[1]), found[2], found[3]
        if kind == "error":
            code = re.search(r"\[([a-z-]+)\]$", text)
            errors.add((number, code[1] if code else text))
        elif text.startswith("Revealed type is"):
            revealed[number] = text.split('"')[1].replace("builtins.", "")
    lines = _USER_MODULE.splitlines()
    expected_errors = {
        (n, line.split("# E: ")[1]) for n, line in enumerate(lines, 1) if "# E: " in line
    }
    expected_reveals = {
        n: line.split("# R: ")[1] for n, line in enumerate(lines, 1) if "# R: " in line
    }
    assert errors == expected_errors, result.stdout
    assert revealed == expected_reveals, result.stdout
    assert result.returncode == 1  # the wrong_* functions

    # At run time: the annotations evaluate, and the functions work.
    script = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        "import zsharp_py as zs, __user__ as u\n"
        "with zs.Runtime():\n"
        "    unit = u.Unit(); unit.squad.append(u.Unit()); unit.scores['a'] = 2.5\n"
        "    made = zs.SubclassOf[u.Unit](u.Unit).new()\n"
        "    print(u.total(u.made()), u.scored(unit.scores), u.home_x(unit),\n"
        "          type(made).__name__, u.wrong_element(u.made()),\n"
        "          type(u.subclass_property(unit, u.Loadout())).__name__)\n"
        "    try:\n"
        "        u.wrong_subclass_new(unit)\n"
        "    except AttributeError as error:\n"
        "        print(type(error).__name__)\n"
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    # What mypy rejected fails at run time too: the property is the class.
    assert ran.stdout.split() == ["12", "2.5", "-1.0", "Unit", "1", "Unit", "AttributeError"]


def test_one_path_raises_for_refused_dying_objects() -> None:
    """A call refused with ZS_E_DYING must expire the pending conjugates
    before raising; ``_native.refused`` (through ``check``) is the only code
    that does it, and every status check names its runtime."""
    package = ROOT / "src" / "zsharp_py"
    ffi, errors, runtime = "_base/ffi.py", "_base/errors.py", "_runtime/runtime.py"
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix()
        text = path.read_text(encoding="utf-8")
        if name not in (ffi, errors):
            assert "ZS_E_DYING" not in text, name
        if name not in (ffi, runtime):  # the call, the definition
            assert "_expire_refused_dying" not in text, name
        if name not in (ffi, errors, runtime, "_assembly.py"):
            assert "raise_status" not in text, name
    runtime_text = (package / runtime).read_text(encoding="utf-8")
    # The composition root (_assembly.py) hands ffi.refused to the C
    # extension as its raise_status; the runtime calls raise_status nowhere.
    assert "raise_status(" not in runtime_text


def test_one_path_sets_the_current_runtime() -> None:
    """The C creation path remembers the current runtime's value per thread
    context and forgets it when the variable is set or reset
    (``zpy_current_memo``, native/binding/core.h): every set and reset goes
    through ``zpy_context_var_set`` and ``zpy_context_var_reset``
    (native/binding/zpy_module_state.c), from Python through ``context.set_current``
    and ``context.reset_current``. A direct ``current.set()`` would leave
    the memo stale; every C read goes through the memo (``zpy_current_get``),
    so ``zpy_current_read`` is the one place that calls PyContextVar_Get."""
    package = ROOT / "src" / "zsharp_py"
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\bcurrent\.(set|reset)\(", text), path.name
    for path in sorted((ROOT / "native" / "binding").glob("*.[ch]")):
        text = path.read_text(encoding="utf-8")
        changes = len(re.findall(r"PyContextVar_(Set|Reset)\(", text))
        reads = len(re.findall(r"PyContextVar_Get\(state->current\b", text))
        expected = 1 if path.name == "zpy_module_state.c" else 0
        assert (changes, reads) == (2 * expected, expected), path.name


def _package_modules() -> list[tuple[str, ast.Module]]:
    package = ROOT / "src" / "zsharp_py"
    return [
        (path.relative_to(package).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
        for path in sorted(package.rglob("*.py"))
    ]


def test_no_import_inside_a_function() -> None:
    """The layers import each other at the top, downward only (the
    import-linter contract in pyproject.toml, run by tools/lint.sh): no
    import is deferred into a function to break a cycle."""
    deferred = [
        f"{name}:{node.lineno}"
        for name, tree in _package_modules()
        for function in ast.walk(tree)
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(function)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    ]
    assert deferred == []


def test_layers_import_only_the_compiled_modules_from_the_package_itself() -> None:
    """``from .. import X`` inside a layer reads, to import-linter, as an
    import of the package (which imports every layer), so the contract
    ignores those: this checks that X is one of the compiled modules."""
    wrong = []
    for name, tree in _package_modules():
        depth = name.count("/")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module is None
                and depth > 0
                and node.level == depth + 1
            ):
                wrong += [
                    f"{name}:{node.lineno} {a.name}"
                    for a in node.names
                    if a.name not in ("_core", "_native_lib")
                ]
            if isinstance(node, ast.ImportFrom) and node.module == "zsharp_py" and depth > 0:
                wrong.append(f"{name}:{node.lineno}")
    assert wrong == []


def test_only_the_layers_below_the_runtime_type_against_runtime_like() -> None:
    """``RuntimeLike`` (zsharp_py/_base/context.py) is the runtime as
    ``_base/`` and ``_model/`` see it; every layer above ``_runtime/``
    imports ``Runtime`` itself, so the protocol stays as small as what the
    two lowest layers use."""
    users = sorted(
        name
        for name, tree in _package_modules()
        if any(isinstance(node, ast.Name) and node.id == "RuntimeLike" for node in ast.walk(tree))
    )
    assert users, "no module uses RuntimeLike: this test no longer checks anything"
    assert [u for u in users if not u.startswith(("_base/", "_model/"))] == []


def test_one_capture_of_a_declaring_scope() -> None:
    """A caller's locals are captured in one place (``declaring_scope`` in
    zsharp_py/_model/object.py), which decides what a snapshot may keep
    alive; class declarations and type arguments all go through it."""
    readers = sorted(
        name
        for name, tree in _package_modules()
        if any(
            isinstance(node, ast.Attribute) and node.attr == "f_locals" for node in ast.walk(tree)
        )
    )
    assert readers == ["_model/object.py"]


def test_no_module_sets_another_modules_globals() -> None:
    """No ``other_module.name = value`` at module level: a layer offers a
    registration function instead (register_shorthand, add_declaration_check,
    set_default_factory)."""
    injected = []
    for name, tree in _package_modules():
        modules = {
            alias.asname or alias.name
            for node in tree.body
            if isinstance(node, ast.Import)
            or (isinstance(node, ast.ImportFrom) and node.module is None)
            for alias in node.names
        }
        injected += [
            f"{name}:{node.lineno}"
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id in modules
        ]
    assert injected == []


def test_every_package_folder_is_installed() -> None:
    """A plain install (pip install .) ships exactly the folders the source
    has: a layer folder missing from pyproject.toml's list would install a
    package that cannot import."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    packages = re.search(
        r"^\[tool\.setuptools\]\n(?:#[^\n]*\n)*packages = \[(.*?)\]", text, re.S | re.M
    )
    assert packages is not None
    listed = set(re.findall(r'"([\w.]+)"', packages.group(1)))
    package = ROOT / "src" / "zsharp_py"
    folders = {"zsharp_py"} | {
        "zsharp_py." + init.parent.relative_to(package).as_posix().replace("/", ".")
        for init in package.rglob("__init__.py")
        if init.parent != package
    }
    assert listed == folders


def test_ci_runs_the_slow_tier_on_a_rotating_schedule() -> None:
    """CI runs one of four slices of the slow tier a day (tests/README.md),
    after the default suite, in its development venv; the four slices split
    the tier without overlap."""
    ci_script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'slow_slice="$((10#$(date -u +%j) % 4))/4"' in ci_script
    run = 'python -m pytest -q -p no:cacheprovider -m slow --slice "$slow_slice"'
    assert ci_script.index('readme_command.py 2)"') < ci_script.index(run)
    readme = (ROOT / "tests" / "README.md").read_text(encoding="utf-8")
    assert "--slice" in readme and "day of the year" in readme
    ids = [f"tests/x.py::test_{n}" for n in range(400)]
    slices = [[i for i in ids if slice_of(i, 4) == k] for k in range(4)]
    assert sorted(i for part in slices for i in part) == sorted(ids)
    assert all(len(part) > 50 for part in slices), [len(part) for part in slices]
