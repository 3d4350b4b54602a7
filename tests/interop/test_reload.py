"""Reloading a game script in place (``zs.reload``, ``importlib.reload``):
the classes a module declares stay the same objects and take the new code,
so live objects run it at once from Python and from C (the sample engine's
``World.tick`` loop, a host's ``zs_call_function`` by name, a host creating
an object by class name); a failing reload (a syntax error, an exception
while the module runs, a refused change of a class's native layout) leaves
every class and the module as they were. Scripts are written to
``tmp_path`` and imported through ``sys.path``."""

from __future__ import annotations

import gc
import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cffi
import pytest

import zsharp_py as zs
from helpers import made_by_class_name, runtime_ptr
from zsharp_py import sample_engine
from zsharp_py._base.ffi import ffi as zs_ffi
from zsharp_py._base.ffi import lib as zs_lib
from zsharp_py.engines.sample import Transform, World
from zsharp_py.lowlevel import function_layout

_counter = iter(range(1_000_000))


class Scripts:
    """Game scripts in a folder on ``sys.path``: ``load`` writes and imports
    one, ``edit`` rewrites it for a reload. Bytecode is not written, so a
    rewrite within the same second is always read again."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.names: list[str] = []

    def load(self, source: str) -> Any:
        name = f"reload_script_{next(_counter)}"
        self.names.append(name)
        self.edit(name, source)
        return importlib.import_module(name)

    def edit(self, module: Any, source: str) -> None:
        name = module if isinstance(module, str) else module.__name__
        (self.folder / f"{name}.py").write_text(textwrap.dedent(source))
        importlib.invalidate_caches()


@pytest.fixture
def scripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Scripts]:
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    made = Scripts(tmp_path)
    yield made
    for name in made.names:
        sys.modules.pop(name, None)
    gc.collect()  # the reloads' statement classes


GUARD = """
import zsharp_py as zs
from zsharp_py.engines.sample import Actor

VERSION = {version}

class RGuard(Actor):
    seen: list = zs.state(factory=list)
    bonus: zs.Int32 = 3

    def tick(self, dt: float) -> None:          # World.tick's C loop calls it
        self.seen.append(("tick", {version}))
        super().tick(dt)

    def score(self, base: zs.Int32) -> zs.Int32:  # a host calls it by name
        return base * {version} + self.bonus

    def describe(self) -> str:
        return "guard v{version}"

class RElite(RGuard):
    def describe(self) -> str:
        return "elite of " + super().describe()
"""


def call_score(obj: zs.Object, base: int) -> int:
    """``obj.score(base)`` called as a host calls a function by name
    (zs_call_function with the function's parameter block)."""
    layout = function_layout(type(obj), "score")
    host = cffi.FFI()
    host.cdef(layout.c_declaration)
    block: Any = host.new(f"struct {layout.owner.__name__}_score_params *")
    block.base = base
    pointer = zs_ffi.cast("void *", int(host.cast("uintptr_t", block)))
    status = zs_lib.zs_call_function(runtime_ptr(obj.runtime), obj.handle, b"score", pointer)
    assert status == 0
    return int(block.return_value)


def play(rt: zs.Runtime, module: Any) -> tuple[Any, Any, Any]:
    """A world with a guard and an elite spawned by the engine, ticked once."""
    world = World()
    world.add_to_root()
    guard = world.spawn(module.RGuard, Transform())
    elite = world.spawn(module.RElite, Transform())
    world.tick(0.5)
    return world, guard, elite


@pytest.mark.parametrize("how", ["zs.reload", "importlib.reload"])
def test_live_objects_run_the_new_code_from_python_and_from_c(scripts: Scripts, how: str) -> None:
    module = scripts.load(GUARD.format(version=1))
    guard_class, elite_class = module.RGuard, module.RElite
    with zs.Runtime() as rt:
        sample_engine.install()
        world, guard, elite = play(rt, module)
        assert guard.seen == [("tick", 1)] and call_score(guard, 10) == 13
        assert elite.describe() == "elite of guard v1"
        classes_before = zs_lib.zs_class_count(runtime_ptr(rt))

        scripts.edit(module, GUARD.format(version=2))
        reloaded = zs.reload(module) if how == "zs.reload" else importlib.reload(module)

        assert reloaded is module and module.VERSION == 2
        assert module.RGuard is guard_class and module.RElite is elite_class
        assert isinstance(guard, module.RGuard) and type(elite) is module.RElite
        assert zs.native_class("RGuard") is guard_class
        # From Python, from the engine's C tick loop, from a host's call by name.
        assert guard.describe() == "guard v2"
        assert elite.describe() == "elite of guard v2"  # super() in the new code
        world.tick(0.5)
        assert guard.seen == [("tick", 1), ("tick", 2)]
        assert elite.seen == [("tick", 1), ("tick", 2)]
        assert call_score(guard, 10) == 23 and call_score(elite, 1) == 5
        # A host making one by name gets the same class, running the new code.
        made = made_by_class_name(rt, b"RGuard")
        assert type(made) is guard_class and made.describe() == "guard v2"
        assert made.bonus == 3  # the class's defaults, unchanged
        assert zs_lib.zs_class_count(runtime_ptr(rt)) == classes_before  # no second class
        made.remove_from_root()
        world.remove_from_root()


def test_a_reload_keeps_one_class_of_each_name(scripts: Scripts) -> None:
    module = scripts.load(GUARD.format(version=1))
    for version in (2, 3, 4):
        scripts.edit(module, GUARD.format(version=version))
        zs.reload(module)
    from zsharp_py._runtime.runtime import _declared_classes

    found = [c for c in _declared_classes("RGuard") if c.__module__ == module.__name__]
    assert found == [module.RGuard]
    with zs.Runtime():
        sample_engine.install()
        world = World()
        guard = world.spawn(module.RGuard, Transform())
        assert guard.describe() == "guard v4"


def test_two_runtimes_and_the_fixtures_run_the_new_code(
    scripts: Scripts, zs_runtime: zs.Runtime
) -> None:
    module = scripts.load(GUARD.format(version=1))
    sample_engine.install(zs_runtime)
    world_here, guard_here, _ = play(zs_runtime, module)
    with zs.Runtime() as other:
        sample_engine.install()
        world_there, guard_there, _ = play(other, module)
        scripts.edit(module, GUARD.format(version=5))
        zs.reload(module)
        world_there.tick(0.5)
        assert guard_there.seen[-1] == ("tick", 5) and call_score(guard_there, 1) == 8
        world_there.remove_from_root()
    with zs_runtime.activate():
        world_here.tick(0.5)
    assert guard_here.seen == [("tick", 1), ("tick", 5)]
    assert call_score(guard_here, 2) == 13
    world_here.remove_from_root()


FAILURES = {
    "a syntax error": ("SyntaxError", "def broken(:\n", SyntaxError),
    "an exception while it runs": (
        "RuntimeError",
        "raise RuntimeError('not today')\n",
        RuntimeError,
    ),
    "a non-function override": (
        "TypeError",
        "class RBad(RGuard):\n    tick = 42\n",
        TypeError,
    ),
    "a non-function override, redeclared": (
        "TypeError",
        "class RElite(RGuard):\n    tick = 42\n",
        TypeError,
    ),
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_failing_reload_leaves_the_old_code_running(scripts: Scripts, failure: str) -> None:
    _, tail, error = FAILURES[failure]
    module = scripts.load(GUARD.format(version=1))
    before = dict(module.__dict__)
    with zs.Runtime() as rt:
        sample_engine.install()
        world, guard, elite = play(rt, module)
        # The new classes come first, the failure after them: nothing may change.
        scripts.edit(module, GUARD.format(version=2) + "\nLATE = 1\n" + tail)
        with pytest.raises(error) as raised:
            zs.reload(module)
        assert "nothing was changed" in "".join(getattr(raised.value, "__notes__", []))
        assert module.__dict__ == before and not hasattr(module, "LATE")
        # The refused statements' classes are never found by name.
        from zsharp_py._runtime.runtime import _declared_classes

        found = [c for c in _declared_classes("RElite") if c.__module__ == module.__name__]
        assert found == [module.RElite] and type(elite) is module.RElite
        assert module.VERSION == 1
        assert guard.describe() == "guard v1" and elite.describe() == "elite of guard v1"
        world.tick(0.5)
        assert guard.seen == [("tick", 1), ("tick", 1)] and call_score(guard, 10) == 13
        # The script fixed: the reload goes through.
        scripts.edit(module, GUARD.format(version=2))
        zs.reload(module)
        assert guard.describe() == "guard v2" and call_score(guard, 10) == 23
        world.remove_from_root()


LAYOUT = """
import zsharp_py as zs

class RCrate(zs.Object):
    {properties}

    def label(self) -> str:
        return "crate v{version}"

class RShelf(zs.Object):
    def label(self) -> str:
        return "shelf v{version}"
"""

CHANGES = {
    "removed": ("weight: zs.Int32 = 5", "RCrate.armor", "removes the property"),
    "retyped": (
        "weight: zs.Int32 = 5\n    armor: zs.Float64 = 2",
        "RCrate.armor",
        "changes the property's type",
    ),
    "reordered": (
        "armor: zs.Int32 = 2\n    weight: zs.Int32 = 5",
        "RCrate.weight",
        "moves the property",
    ),
    "added": (
        "weight: zs.Int32 = 5\n    armor: zs.Int32 = 2\n    dents: zs.Int32 = 1",
        "RCrate.dents",
        "adds the property",
    ),
    "default changed": (
        "weight: zs.Int32 = 6\n    armor: zs.Int32 = 2",
        "RCrate.weight",
        "changes the property's default",
    ),
}
FIRST = "weight: zs.Int32 = 5\n    armor: zs.Int32 = 2"


@pytest.mark.parametrize("how", ["zs.reload", "importlib.reload"])
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_layout_change_under_live_objects_is_refused(
    scripts: Scripts, change: str, how: str
) -> None:
    properties, named, what = CHANGES[change]
    module = scripts.load(LAYOUT.format(properties=FIRST, version=1))
    crate_class = module.RCrate
    with zs.Runtime():
        crate, shelf = module.RCrate(), module.RShelf()
        crate.add_to_root()
        scripts.edit(module, LAYOUT.format(properties=properties, version=2))
        with pytest.raises(TypeError) as raised:
            zs.reload(module) if how == "zs.reload" else importlib.reload(module)
        message = str(raised.value)
        assert f"{named}: the reload {what}" in message, message
        assert "the old RCrate keeps running" in message
        assert module.RCrate is crate_class and crate.label() == "crate v1"
        assert (crate.weight, crate.armor) == (5, 2) and module.RCrate().weight == 5
        if how == "zs.reload":  # atomic: RShelf, declared after RCrate, is unchanged too
            assert shelf.label() == "shelf v1"
        crate.remove_from_root()


def test_a_new_property_is_added_when_no_open_runtime_uses_the_class(scripts: Scripts) -> None:
    module = scripts.load(LAYOUT.format(properties=FIRST, version=1))
    crate_class = module.RCrate
    with zs.Runtime():
        assert module.RCrate().weight == 5  # laid out and registered there
    # That runtime is closed: the class can be laid out again.
    scripts.edit(module, LAYOUT.format(properties=CHANGES["added"][0], version=2))
    zs.reload(module)
    assert module.RCrate is crate_class
    with zs.Runtime() as rt:
        crate = module.RCrate()
        assert (crate.weight, crate.armor, crate.dents) == (5, 2, 1)
        crate.dents = 9
        assert crate.dents == 9 and crate.label() == "crate v2"
        made = made_by_class_name(rt, b"RCrate")  # the host's creation: the new defaults too
        assert (made.weight, made.armor, made.dents) == (5, 2, 1)
        made.remove_from_root()
        # Now in use: changing it again is refused.
        scripts.edit(module, LAYOUT.format(properties=FIRST, version=3))
        with pytest.raises(TypeError, match=r"RCrate\.dents: the reload removes the property"):
            zs.reload(module)
        assert crate.dents == 9 and crate.label() == "crate v2"


def test_a_class_never_used_takes_any_new_declaration(scripts: Scripts) -> None:
    module = scripts.load(LAYOUT.format(properties=FIRST, version=1))
    scripts.edit(module, LAYOUT.format(properties="size: zs.Float64 = 1.5", version=2))
    zs.reload(module)
    with zs.Runtime():
        crate = module.RCrate()
        assert crate.size == 1.5 and not hasattr(crate, "weight")


def test_a_change_of_base_class_is_refused(scripts: Scripts) -> None:
    source = """
    import zsharp_py as zs
    class RBase(zs.Object):
        pass
    class ROther(zs.Object):
        pass
    class RChild({base}):
        def who(self) -> str:
            return "{base}"
    """
    module = scripts.load(source.format(base="RBase"))
    scripts.edit(module, source.format(base="ROther"))
    with pytest.raises(TypeError, match="RChild: a reload cannot change the base classes"):
        zs.reload(module)
    assert module.RChild.__bases__ == (module.RBase,) and module.RChild().who() == "RBase"


def test_python_state_added_is_refused(scripts: Scripts) -> None:
    source = """
    import zsharp_py as zs
    class RNote(zs.Object):
        {state}
    """
    module = scripts.load(source.format(state="pass"))
    scripts.edit(module, source.format(state="memo: dict = zs.state(factory=dict)"))
    with pytest.raises(TypeError, match=r"RNote\.memo: a reload cannot add, remove or reorder"):
        zs.reload(module)


RUNTIME_OWNER = """
import zsharp_py as zs

class RDebris(zs.Object):
    heat: zs.Float32 = 1.0

    def glow(self) -> str:
        return "glow v{version}"

class RField(zs.Object):
    element: "RDebris | None" = None
    elements: zs.Array[RDebris] = zs.zero()

RUNTIME = zs.Runtime()                 # the module owns a runtime: run again by a reload
with RUNTIME.activate():
    FIELD = RField()
    FIELD.add_to_root()
    FIELD.element = RDebris()
"""


@pytest.mark.parametrize("how", ["zs.reload", "importlib.reload"])
def test_the_module_that_owns_the_runtime_reloads(scripts: Scripts, how: str) -> None:
    module = scripts.load(RUNTIME_OWNER.format(version=1))
    first_runtime, first_field = module.RUNTIME, module.FIELD
    try:
        scripts.edit(module, RUNTIME_OWNER.format(version=2))
        zs.reload(module) if how == "zs.reload" else importlib.reload(module)
        with first_runtime.activate():
            debris = module.RDebris()
            first_field.element = debris  # was: "element expects Debris or None, not Debris"
            first_field.elements.append(module.RDebris())
            assert first_field.element.glow() == "glow v2"
        with module.RUNTIME.activate():
            module.FIELD.elements.append(module.RDebris())
            assert type(module.FIELD.element) is module.RDebris
    finally:
        first_runtime.close()
        module.RUNTIME.close()


STRUCT = """
import zsharp_py as zs

class RPoint(zs.Struct):
    {members}

    def size(self) -> float:
        return (abs(self.x) + abs(self.y)) * {version}

class RMover(zs.Object):
    at: RPoint
    path: zs.Array[RPoint] = zs.zero()
"""


def test_a_struct_is_updated_in_place_and_its_members_kept(scripts: Scripts) -> None:
    members = "x: zs.Float64 = 0.0\n    y: zs.Float64 = 0.0"
    module = scripts.load(STRUCT.format(members=members, version=1))
    point_class = module.RPoint
    with zs.Runtime():
        mover = module.RMover()
        mover.add_to_root()
        mover.at = module.RPoint(1.0, -2.0)
        assert mover.at.size() == 3.0
        scripts.edit(module, STRUCT.format(members=members, version=2))
        zs.reload(module)
        assert module.RPoint is point_class
        assert mover.at.size() == 6.0  # a red view, running the new method
        mover.at = module.RPoint(2.0, 2.0)  # the same class: no "expects RPoint, not RPoint"
        mover.path.append(module.RPoint(1.0, 0.0))
        assert mover.at.size() == 8.0 and mover.path[0].size() == 2.0
        # A member added to a struct that is laid out: refused, nothing changed.
        more = members + "\n    z: zs.Float64 = 0.0"
        scripts.edit(module, STRUCT.format(members=more, version=3))
        with pytest.raises(TypeError, match=r"RPoint\.z: the reload adds the property"):
            zs.reload(module)
        assert mover.at.size() == 8.0 and not hasattr(module.RPoint(), "z")
        mover.remove_from_root()


SIGNALS = """
import zsharp_py as zs

LOG: list = []

class RDoor(zs.Object):
    on_open: zs.MulticastDelegate = zs.zero()

class RWatcher(zs.Object):
    def seen(self) -> None:
        LOG.append("v{version}")
"""


def test_delegates_bound_to_a_method_call_the_new_method(scripts: Scripts) -> None:
    module = scripts.load(SIGNALS.format(version=1))
    with zs.Runtime():
        door, watcher = module.RDoor(), module.RWatcher()
        door.on_open.add(watcher, "seen")  # by name: looked up at each broadcast
        door.on_open.add(watcher.seen)  # a method of an object: kept as (object, name) too
        door.on_open.add(lambda: module.LOG.append("lambda"))  # a plain callable
        door.on_open.broadcast()
        log = module.LOG
        assert log == ["v1", "v1", "lambda"]
        scripts.edit(module, SIGNALS.format(version=2))
        zs.reload(module)
        door.on_open.broadcast()
        # LOG was made again by the reload (module-level code runs again).
        assert log == ["v1", "v1", "lambda"] and module.LOG is not log
        assert module.LOG == ["v2", "v2", "lambda"]


PLAIN = """
import zsharp_py as zs
from zsharp_py.engines.sample import Actor

class RRunner(Actor):
    steps: zs.Int32 = 0
{body}
"""


def test_an_override_removed_falls_back_to_the_hosts_default(scripts: Scripts) -> None:
    tick = "    def tick(self, dt: float) -> None:\n        self.steps += 1\n"
    module = scripts.load(PLAIN.format(body=tick))
    with zs.Runtime():
        sample_engine.install()
        world = World()
        world.add_to_root()
        runner = world.spawn(module.RRunner, Transform())
        runner.speed = 2.0
        world.tick(1.0)  # the override: counts, does not move
        assert (runner.steps, runner.transform.location.x) == (1, 0.0)
        scripts.edit(module, PLAIN.format(body=""))
        zs.reload(module)
        assert "tick" not in vars(module.RRunner)
        world.tick(1.0)  # the engine's own tick, called from C: moves at speed
        assert (runner.steps, runner.transform.location.x) == (1, 2.0)
        world.remove_from_root()


def test_an_init_added_runs_for_new_objects_only(scripts: Scripts) -> None:
    module = scripts.load(PLAIN.format(body=""))
    init = "    def __init__(self, steps: int = 7) -> None:\n        self.steps = steps\n"
    with zs.Runtime():
        sample_engine.install()
        old = module.RRunner()  # made by the C fast path: no __init__
        assert old.steps == 0
        scripts.edit(module, PLAIN.format(body=init))
        zs.reload(module)
        assert module.RRunner().steps == 7 and module.RRunner(3).steps == 3
        assert old.steps == 0  # not made again
        scripts.edit(module, PLAIN.format(body=""))
        zs.reload(module)  # and removed again: the fast path takes no argument
        assert module.RRunner().steps == 0
        with pytest.raises(TypeError):
            module.RRunner(3)


def test_a_reload_from_inside_an_override_called_by_c(scripts: Scripts) -> None:
    """The engine's C tick loop calls an override that reloads its own
    module (and collects): the actors after it in the same loop run the new
    code, the one that reloaded finishes the old one."""
    source = """
import gc
import zsharp_py as zs
from zsharp_py.engines.sample import Actor

RELOAD: list = []

class RTicker(Actor):
    log: list = zs.state(factory=list)

    def tick(self, dt: float) -> None:
        self.log.append({version})
        if RELOAD:
            RELOAD.pop()()
            gc.collect()
            self.log.append("after {version}")
"""
    module = scripts.load(source.format(version=1))
    with zs.Runtime() as rt:
        sample_engine.install()
        world = World()
        world.add_to_root()
        tickers = [world.spawn(module.RTicker, Transform()) for _ in range(3)]
        scripts.edit(module, source.format(version=2))
        module.RELOAD.append(lambda: zs.reload(module))
        world.tick(0.5)
        rt.collect_garbage()
        world.tick(0.5)
        logs = sorted((t.log for t in tickers), key=len)
        assert logs[0] == [2, 2] and logs[1] == [2, 2]
        assert logs[2] == [1, "after 1", 2]
        world.remove_from_root()


def test_the_reloads_statement_classes_are_freed(scripts: Scripts) -> None:
    from zsharp_py.engines.sample import Actor

    module = scripts.load(GUARD.format(version=1))
    for version in (2, 3):
        scripts.edit(module, GUARD.format(version=version))
        zs.reload(module)
    gc.collect()
    staged = [c for c in type.__subclasses__(Actor) if "_zs_staged" in c.__dict__]
    assert staged == []
    assert [c for c in type.__subclasses__(Actor) if c.__name__ == "RGuard"] == [module.RGuard]


def test_a_new_parameter_block_for_a_method_native_code_calls_is_refused(
    scripts: Scripts,
) -> None:
    """A host holds a block laid out for ``score(base: Int32) -> Int32`` (8
    bytes): a reload making it ``score(base: Float64)`` would read and write
    16 bytes of it; refused. A method no host has laid out yet may change."""
    module = scripts.load(GUARD.format(version=1))
    with zs.Runtime() as rt:
        sample_engine.install()
        world, guard, _ = play(rt, module)
        assert call_score(guard, 1) == 4  # the block is laid out now
        changed = GUARD.format(version=2).replace("base: zs.Int32", "base: zs.Float64")
        scripts.edit(module, changed)
        with pytest.raises(TypeError) as raised:
            zs.reload(module)
        message = str(raised.value)
        assert "RGuard.score: the reload changes its parameter block" in message
        assert "(int32_t base) -> int32_t to (double base) -> int32_t" in message
        assert call_score(guard, 1) == 4 and guard.describe() == "guard v1"
        # describe() is not called from native code: its signature may change.
        scripts.edit(
            module, GUARD.format(version=2).replace("describe(self)", "describe(self, x=0)")
        )
        zs.reload(module)
        assert guard.describe() == "guard v2" and call_score(guard, 1) == 5
        world.remove_from_root()


def test_a_subclass_in_another_module_inherits_the_new_methods(scripts: Scripts) -> None:
    base_source = """
import zsharp_py as zs

class RBase(zs.Object):
    def greet(self) -> str:
        return "hello v{version}"
"""
    base = scripts.load(base_source.format(version=1))
    child = scripts.load(
        f"from {base.__name__} import RBase\n\n"
        "class RChild(RBase):\n"
        "    def greet(self) -> str:\n"
        "        return super().greet() + '!'\n"
    )
    with zs.Runtime():
        kid = child.RChild()
        assert kid.greet() == "hello v1!"
        scripts.edit(base, base_source.format(version=2))
        zs.reload(base)
        assert kid.greet() == "hello v2!" and child.RChild().greet() == "hello v2!"
        assert issubclass(child.RChild, base.RBase)
