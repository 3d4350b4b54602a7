"""Game scripts checked by mypy and pyright, as a user's editor checks them:
the sample engine's stubs (src/zsharp_py/engines/sample.pyi) and the
typing of Python-declared classes (zs.Object's and zs.Struct's
dataclass_transform). A correct script is clean for both checkers, in
their strict modes; each marked line of the wrong ones is reported, by
message, and nothing else is. Both checkers run once per session over
every script (``reports``), each test reading its file's findings.

Also here: the committed stub is what the generator writes now (the
command and the API agree), it declares what the bound classes have at
run time, and it is package data. The scripts only type-check
``zsharp_py.engines.sample``; they never import it."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import zsharp_py as zs
from zsharp_py import sample_engine, stubs
from zsharp_py.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
STUB = ROOT / "src" / "zsharp_py" / "engines" / "sample.pyi"
COMMAND = "python -m zsharp_py stubs --engine sample -o src/zsharp_py/engines/sample.pyi"

# A correct game script: clean for mypy --strict and pyright's strict mode.
GAME = '''\
"""A game on the sample engine."""

from __future__ import annotations

import zsharp_py as zs
from zsharp_py.engines.sample import Actor, Component, Team, Transform, Vec3, World


class Guard(Actor):
    """A Python subclass of a host class: a property, Python state, overrides."""

    alertness: zs.Float32 = 0.5
    seen: list[float] = zs.state(factory=list[float])

    def begin_play(self) -> None:
        super().begin_play()
        self.speed = 2.0
        self.team = Team.Red

    def tick(self, dt: float) -> None:
        self.seen.append(self.transform.location.x)
        super().tick(dt)


class Squad(zs.Object):
    size: zs.Int32 = 0
    leader: Guard | None = None
    members: zs.Array[Guard] = zs.zero()
    motto: zs.String = zs.zero()


def play(world: World) -> float:
    guard = world.spawn(Guard, Transform(Vec3(0.0, 0.0, 0.0), 0.0, 1.0))
    assert isinstance(guard, Guard)
    frames: int = world.tick(0.5)
    left: float = guard.take_damage(30.0, None)
    where: Vec3 = guard.get_location()
    healed: int = guard.heal(5)
    guard.move(Vec3(1.0, z=2.0))
    guard.tags.add("hero")
    guard.team = Team.Blue
    team: Team = guard.team
    part = guard.add_component(Component)
    squad = Squad(size=1, leader=guard, members=[guard], motto="onward", name="Alpha")
    squad.members.append(guard)
    squad.motto = "hold"
    version: int = World.version()
    return left + where.x + healed + frames + team + version + (part is None) + squad.size
'''

# One error per marked line (``# error: KEY``, KEY naming the messages below).
GAME_ERRORS = '''\
"""A game on the sample engine, with mistakes."""

from __future__ import annotations

import enum

from zsharp_py.engines.sample import Actor, Team, Transform, World


class Mood(enum.IntEnum):
    Calm = 0
    Sad = 7


def play(world: World, actor: Actor) -> Team:
    actor.take_damage("ten", None)  # error: argument-type
    actor.helth = 5  # error: misspelled-member
    actor.team = Mood.Sad  # error: wrong-enum
    world.spawn(Actor, Transform(), 3)  # error: too-many-arguments
    return actor.team
'''

DECLARED_ERRORS = '''\
"""Constructors of Python-declared classes."""

from __future__ import annotations

import zsharp_py as zs


class Debris(zs.Object):
    heat: zs.Float32


class Field(zs.Object):
    pieces: zs.Array[Debris] = zs.zero()


class Point(zs.Struct):
    x: zs.Float64 = 0.0
    y: zs.Float64 = 0.0


def build() -> None:
    Debris(heat=1.0, name="rock")
    Field(pieces=[])
    Point(1.0, y=2.0)
    Debris(heat="hot")  # error: property-type
    Field(peices=[])  # error: unknown-property
    Point(1.0, "far")  # error: member-type
    Debris(1.0, heat=2.0)  # error: positional
    Debris()  # error: missing-property
'''

SCRIPTS = {"game.py": GAME, "game_errors.py": GAME_ERRORS, "declared_errors.py": DECLARED_ERRORS}

# What each checker says for each KEY: a regex its message must match.
MESSAGES = {
    "argument-type": {
        "mypy": r'Argument 1 to "take_damage" of "Actor" has incompatible type "str"; '
        r'expected "float"',
        "pyright": r'Argument of type "Literal\[\'ten\'\]" cannot be assigned to parameter '
        r'"amount" of type "Float64" in function "take_damage"',
    },
    "misspelled-member": {
        "mypy": r'"Actor" has no attribute "helth"; maybe "health"\?',
        "pyright": r'Cannot assign to attribute "helth" for class "Actor"',
    },
    "wrong-enum": {
        "mypy": r'Incompatible types in assignment \(expression has type "Mood", variable has '
        r'type "Team"\)',
        "pyright": r'Cannot assign to attribute "team" for class "Actor".*'
        r'"Literal\[Mood.Sad\]" is not assignable to "Team"',
    },
    "too-many-arguments": {
        "mypy": r'Too many arguments for "spawn" of "World"',
        "pyright": r"Expected 2 positional arguments",
    },
    "property-type": {
        "mypy": r'Argument "heat" to "Debris" has incompatible type "str"; expected "float"',
        "pyright": r'Argument of type "Literal\[\'hot\'\]" cannot be assigned to parameter '
        r'"heat" of type "Float32"',
    },
    "unknown-property": {
        "mypy": r'Unexpected keyword argument "peices" for "Field"; did you mean "pieces"\?',
        "pyright": r'No parameter named "peices"',
    },
    "member-type": {
        "mypy": r'Argument 2 to "Point" has incompatible type "str"; expected "float"',
        "pyright": r'Argument of type "Literal\[\'far\'\]" cannot be assigned to parameter "y"',
    },
    "positional": {
        "mypy": r'Too many positional arguments for "Debris"',
        "pyright": r"Expected 0 positional arguments",
    },
    "missing-property": {
        "mypy": r'Missing named argument "heat" for "Debris"',
        "pyright": r'Argument missing for parameter "heat"',
    },
}


@dataclass(frozen=True)
class Finding:
    """One error a checker reported."""

    line: int
    message: str


@pytest.fixture(scope="session")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[Finding]]]:
    """Both checkers, run once over every script, as a user runs them: from
    a folder of the user's own with no configuration of ours but the
    checkers' strict modes, so they find zsharp_py where it is installed
    (an editable install included). ``{checker: {file: errors}}``."""
    folder = tmp_path_factory.mktemp("scripts")
    for name, text in SCRIPTS.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "pyrightconfig.json").write_text('{"typeCheckingMode": "strict"}', encoding="utf-8")
    return {"mypy": _mypy(folder), "pyright": _pyright(folder)}


def _mypy(folder: Path) -> dict[str, list[Finding]]:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--show-error-codes"]
        + ["--cache-dir", str(folder / ".mypy_cache"), *SCRIPTS],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    assert "No module named mypy" not in result.stderr, result.stderr
    found: dict[str, list[Finding]] = {name: [] for name in SCRIPTS}
    for line in result.stdout.splitlines():
        match = re.match(r"([\w.]+):(\d+): (error|note): (.*)$", line)
        assert match, result.stdout + result.stderr
        if match[3] == "error":
            found[match[1]].append(Finding(int(match[2]), match[4]))
    return found


def _pyright(folder: Path) -> dict[str, list[Finding]]:
    """pyright's JSON report; its PyPI wheel carries pyright, and the
    ``nodejs`` extra of the test dependencies Node.js (pyproject.toml)."""
    result = subprocess.run(
        [sys.executable, "-m", "pyright", "--outputjson", "--pythonpath", sys.executable]
        + list(SCRIPTS),
        cwd=folder,
        capture_output=True,
        text=True,
    )
    assert result.stdout.startswith("{"), result.stdout + result.stderr
    report = json.loads(result.stdout)
    found: dict[str, list[Finding]] = {name: [] for name in SCRIPTS}
    for diagnostic in report["generalDiagnostics"]:
        name = Path(diagnostic["file"]).name
        rule = diagnostic.get("rule", "")
        if diagnostic["severity"] == "error":
            line = diagnostic["range"]["start"]["line"] + 1
            found[name].append(Finding(line, diagnostic["message"].replace("\n", " ")))
        else:
            # The stub has no module beside it until zsharp_py.engines.sample
            # is written; nothing else may warn.
            assert rule == "reportMissingModuleSource", diagnostic
    return found


def _marked(text: str) -> dict[int, str]:
    """The lines marked ``# error: KEY``, by number."""
    return {
        number: line.split("# error: ")[1].strip()
        for number, line in enumerate(text.splitlines(), 1)
        if "# error: " in line
    }


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_a_correct_game_script_is_clean(
    reports: dict[str, dict[str, list[Finding]]], checker: str
) -> None:
    assert reports[checker]["game.py"] == []


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
@pytest.mark.parametrize("script", ["game_errors.py", "declared_errors.py"])
def test_each_mistake_is_reported_and_nothing_else(
    reports: dict[str, dict[str, list[Finding]]], checker: str, script: str
) -> None:
    findings = reports[checker][script]
    marked = _marked(SCRIPTS[script])
    assert {f.line for f in findings} == set(marked), findings
    for line, key in marked.items():
        messages = [f.message for f in findings if f.line == line]
        assert any(re.search(MESSAGES[key][checker], m) for m in messages), (key, messages)


def _generated(command: str = COMMAND) -> str:
    with zs.Runtime() as runtime:
        sample_engine.install(runtime)
        return stubs.host_stub(
            runtime, title="The sample engine's classes, structs and enums", command=command
        )


def test_the_committed_stub_is_what_the_generator_writes() -> None:
    """Regenerate with the command in the stub's docstring when this fails."""
    assert STUB.read_text(encoding="utf-8") == _generated(), f"run: {COMMAND}"


def test_the_command_writes_the_same_stub(tmp_path: Path) -> None:
    target = tmp_path / "sample.pyi"
    assert main(["stubs", "--engine", "sample", "-o", str(target)]) == 0
    written = target.read_text(encoding="utf-8")
    assert written == _generated(f"python -m zsharp_py stubs --engine sample -o {target}")


def test_the_command_takes_any_host_installer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["stubs", "--install", "zsharp_py.sample_engine:install"]) == 0
    printed = capsys.readouterr().out
    assert "class Actor(zs.Object):" in printed and "class Team(enum.IntEnum):" in printed
    for wrong, said in (
        ("nope", "expected MODULE:FUNCTION"),
        ("zsharp_py.sample_engine:nope", "nope"),
        ("no_such_module_here:install", "no_such_module_here"),
    ):
        with pytest.raises(SystemExit) as stopped:
            main(["stubs", "--install", wrong])
        assert stopped.value.code == 2
        assert said in capsys.readouterr().err


def _stub_classes() -> Iterator[ast.ClassDef]:
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    yield from (node for node in tree.body if isinstance(node, ast.ClassDef))


def test_the_stub_declares_what_the_bound_types_have(rt: zs.Runtime) -> None:
    """Every class, struct and enum the engine registers is declared, each
    with exactly its bound properties (or members, or items) and functions,
    static functions as static methods."""
    sample_engine.install(rt)
    declared = {node.name: node for node in _stub_classes()}
    assert set(declared) == set(zs.native_classes()) | {"Vec3", "Transform", "Team"}
    for name, node in declared.items():
        fields = [ast.unparse(s.target) for s in node.body if isinstance(s, ast.AnnAssign)]
        functions = {s.name: s for s in node.body if isinstance(s, ast.FunctionDef)}
        if name == "Team":
            items = [ast.unparse(s.targets[0]) for s in node.body if isinstance(s, ast.Assign)]
            assert items == [m.name for m in zs.native_enum(name)]
            continue
        if name in ("Vec3", "Transform"):
            members = zs.native_struct(name).__dict__["_zs_description"].properties
            assert fields == [m.name for m in members]
            continue
        cls = zs.native_class(name)
        described = cls.__dict__["_zs_description"]
        assert fields == [p.name for p in described.properties]
        assert list(functions) == [f.name for f in described.functions]
        for function in described.functions:
            assert callable(getattr(cls, function.name))
            static = any(
                isinstance(d, ast.Name) and d.id == "staticmethod"
                for d in functions[function.name].decorator_list
            )
            assert static == function.is_static, function.name


def test_the_stub_is_package_data() -> None:
    """A plain install ships the stub beside its package (pyproject.toml)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"zsharp_py.engines" = ["*.pyi"]' in text
    assert (STUB.parent / "__init__.py").is_file()


def test_python_classes_are_left_out_and_names_must_be_identifiers(rt: zs.Runtime) -> None:
    """A class a script declared is registered in the runtime too, but its
    source is its declaration: the stub declares the host's types only."""
    sample_engine.install(rt)

    class Scout(zs.native_class("Actor")):  # type: ignore[misc]
        pass

    Scout()
    assert "Scout" in zs.native_classes()
    described = stubs.host_descriptions(rt)
    assert "Scout" not in described.names and "Actor" in described.names
    # The same declarations as in a runtime with the engine alone (after the
    # module's docstring, which names no command here).
    assert stubs.host_stub(rt).split('"""', 2)[2] == _generated().split('"""', 2)[2]
    with pytest.raises(ValueError, match="'class' is not a Python identifier"):
        stubs._identifier("class", "the member")
