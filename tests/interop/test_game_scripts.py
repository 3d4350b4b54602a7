"""Game scripts as ordinary modules: a host's classes importable before any
runtime exists (``zsharp_py.engines.sample``), one Python class per host
description bound in every runtime whose host registered it, and Python
subclasses declared at import time (tests/scripts/arena.py) used in two
runtimes at once and by the pytest plugin's fixture. Also the held-out
checks of the feature: a refused description never yields a class, the
defaults of a Python class apply however its objects are made (by the host
too), an override of a host's function that is not a plain function is
refused at the class statement, and errors name the runtime and what to do."""

from __future__ import annotations

import gc
import re
from pathlib import Path
from typing import Any

import pytest
from cffi import FFI

import zsharp_py as zs
from helpers import made_by_class_name, runtime_ptr
from native_build import compile_host
from scripts.arena import Guard, Sniper, Squad, play
from zsharp_py import sample_engine
from zsharp_py._base.ffi import ffi as zs_ffi
from zsharp_py._base.ffi import lib as zs_lib
from zsharp_py.engines import sample
from zsharp_py.engines.sample import Actor, Team, Transform, Vec3, World
from zsharp_py.lowlevel import api_table

HOST_SOURCE = Path(__file__).resolve().parents[1] / "hosts" / "scripts_host.c"


@pytest.fixture(scope="module")
def host() -> Any:
    _, lib, _ = compile_host(
        HOST_SOURCE.read_text(),
        "scripts_host",
        "int scripts_host_install_refused(void *api, void *rt);"
        "int scripts_host_install_other_actor(void *api, void *rt);",
    )
    return lib


def install(function: Any, runtime: zs.Runtime) -> None:
    """Register one of the test hosts in ``runtime``."""
    status = function(
        FFI().cast("void *", api_table()), FFI().cast("void *", runtime.native_address)
    )
    assert status == 0


# ---------------------------------------------------------------------------
# The engine's module
# ---------------------------------------------------------------------------


def test_the_module_names_exactly_the_engines_classes_structs_and_enums() -> None:
    """``__all__`` is the engine's own list (a class the engine adds shows
    up here as a failure), each name the type of that name."""
    with zs.Runtime() as rt:
        sample_engine.install()
        structs, enums = rt._heap_type_names()
        names = {*rt._heap_class_names(), *structs, *enums}
    assert sorted(sample.__all__) == sorted(names)
    public = [name for name in vars(sample) if not name.startswith(("_", "@"))]
    assert sorted(public) == sorted(sample.__all__)  # ("@": pytest's assertion rewriting)
    for name in sample.__all__:
        made = getattr(sample, name)
        assert made.__name__ == name and made.__module__ == "zsharp_py.engines.sample"
    assert issubclass(Actor, zs.Object) and issubclass(Vec3, zs.Struct)
    assert [m.name for m in Team] == ["Neutral", "Red", "Blue"]
    assert Actor.take_damage.runtimes == ()  # the private runtime it was read from is closed


def test_the_same_classes_serve_every_runtime_the_engine_is_installed_in() -> None:
    """Two runtimes open at once, each with the engine: the module's classes
    and the script's subclasses work in both, with each runtime's own
    objects, entries and state; lookups by name give the same classes."""
    with zs.Runtime() as first:
        sample_engine.install()
        first_log = play(frames=3)
        world = World()
        guard = world.spawn(Guard, Transform(Vec3(5.0, 0.0, 0.0)))
        with zs.Runtime() as second:
            sample_engine.install()
            assert zs.native_class("Actor") is Actor and zs.native_struct("Vec3") is Vec3
            assert zs.native_enum("Team") is Team
            assert play(frames=2) == [("Guard", 0.0), ("Guard", 1.0), ("Sniper", 800, "eagle")]
            assert zs.native_class("Guard") is Guard  # registered there by the spawn
            other = World()
            theirs = other.spawn(Guard, Transform())
            assert theirs.runtime is second and guard.runtime is first
            assert set(World.spawn.runtimes) == {first, second}
            # The engine ticks every actor of its runtime, and only those.
            assert other.tick(1.0) >= 1 and theirs.seen == [0.0] and guard.seen == []
            with pytest.raises(ValueError, match="belongs to another runtime"):
                world.destroy(theirs)  # an actor of the second, to the first's world
            squad = Squad(leader=theirs)
            assert squad.leader is theirs
        assert world.tick(0.5) >= 1 and guard.seen == [5.0]
        assert World.spawn.runtimes == (first,)  # the second's entries are forgotten
    assert first_log == [("Guard", 0.0), ("Guard", 1.0), ("Guard", 2.0), ("Sniper", 800, "eagle")]


def test_the_script_runs_in_the_pytest_plugins_runtime(zs_runtime: zs.Runtime) -> None:
    """The plugin's fixture (zsharp_py.testing): its runtime is a runtime like
    any other; its leak check passes once the world is unrooted."""
    sample_engine.install(zs_runtime)
    assert play(frames=1) == [("Guard", 0.0), ("Sniper", 800, "eagle")]
    world = World()
    guard = world.spawn(Guard, Transform())
    assert type(guard) is Guard and guard.runtime is zs_runtime and guard.team == Team.Blue


def test_the_script_runs_in_the_suites_runtime(rt: zs.Runtime) -> None:
    sample_engine.install(rt)
    world = World()
    world.add_to_root()
    sniper = world.spawn(Sniper, Transform())
    assert sniper.team == Team.Red and world.find(0) is sniper


def test_a_runtime_without_the_engine_names_itself_and_what_to_do() -> None:
    with zs.Runtime():
        where = r"the runtime made at interop/test_game_scripts.py:\d+ \(the current one\)"
        message = (
            rf"World \(a class of a native host\) cannot be used in {where}: no class named "
            r"World is registered there; install the engine there first: "
            r"zsharp_py\.sample_engine\.install\(runtime\)"
        )
        with pytest.raises(TypeError, match=message):
            World()
        with pytest.raises(TypeError, match=message):
            World.version()  # a static function runs in the current runtime
        with pytest.raises(TypeError, match="no class named Actor"):
            Guard()  # its parent cannot be bound there
        assert World.version.runtimes == ()
        sample_engine.install()  # installed now: the same classes bind
        assert World.version() == 1 and type(Guard()) is Guard


def test_a_runtime_whose_host_describes_a_class_otherwise_is_refused(host: Any) -> None:
    """Another engine's ``Actor``: the runtime binds a class of its own for
    it, and the sample engine's (with its subclasses) is refused there with
    the difference."""
    with zs.Runtime() as other:
        install(host.scripts_host_install_other_actor, other)
        theirs = zs.native_class("Actor")
        assert theirs is not Actor and theirs(health=2**40).health == 2**40
        with pytest.raises(
            TypeError,
            match=r"Actor \(a class of a native host\) cannot be used in the runtime made at "
            r".*: its class Actor is \d+ bytes there, \d+ in the type; the host there "
            r"describes it otherwise",
        ):
            Guard()
    with zs.Runtime():
        sample_engine.install()
        assert zs.native_class("Actor") is Actor  # the sample engine's, as before


# ---------------------------------------------------------------------------
# (a) A refused description never yields a class
# ---------------------------------------------------------------------------


def test_a_refused_class_is_refused_at_every_lookup_and_never_handed_out(host: Any) -> None:
    """A property described without its native type, one past its object's
    end: the first lookup refuses, and every later one raises the same
    error (no half-bound class a script could write a string through that
    the collector would never free); a sound class naming a refused one is
    refused with it; a native object of a refused class never gets a proxy."""
    with zs.Runtime() as rt:
        install(host.scripts_host_install_refused, rt)
        broken = (
            "Broken.label: String is not plain data, so its description must give its native type"
        )
        misplaced = r"Misplaced\.hp: Int32 at offset \d+ does not fit the native layout"
        for _ in range(3):
            with pytest.raises(TypeError, match=re.escape(broken)):
                zs.native_class("Broken")
            with pytest.raises(TypeError, match=misplaced):
                zs.native_class("Misplaced")
            with pytest.raises(TypeError, match=re.escape(broken)):
                zs.native_class("Holder")  # sound, but it names Broken
        with pytest.raises(TypeError, match=re.escape(broken)):
            zs.native_classes()
        # An object the host made natively reads as no class either.
        found, ref = zs_ffi.new("zs_class **"), zs_ffi.new("zs_ref *")
        assert zs_lib.zs_find_class(runtime_ptr(rt), b"Broken", found) == 0
        status = zs_lib.zs_object_new(
            runtime_ptr(rt), found[0], 0, zs_lib.ZS_NAME_AUTO, 0, ref, zs_ffi.NULL
        )
        assert status == 0
        for _ in range(2):
            with pytest.raises(TypeError, match=re.escape(broken)):
                rt.object_from_handle(ref[0])
        assert not [c for c in rt._classes_by_id if c is not None and c.__name__ == "Broken"]
        assert rt.collect_garbage().objects_freed == 1
    # Closed: nothing was written that the runtime would not free (its leak
    # assertion, native/src/runtime.c zs_runtime_free, aborts a sanitized
    # build otherwise: tools/sanitize.sh).


def test_a_refusal_is_per_runtime_and_recorded_only_for_the_refused_class(host: Any) -> None:
    """The refusal belongs to the runtime that refused: another runtime with
    the same host refuses again by itself; the sample engine's classes in a
    runtime that refused another host's are untouched."""
    with zs.Runtime() as first:
        install(host.scripts_host_install_refused, first)
        sample_engine.install()
        with pytest.raises(TypeError, match="Broken.label"):
            zs.native_class("Holder")
        assert zs.native_class("World") is World and World().runtime is first
    with zs.Runtime() as second:
        install(host.scripts_host_install_refused, second)
        with pytest.raises(TypeError, match="Broken.label"):
            zs.native_class("Broken")


# ---------------------------------------------------------------------------
# (b) Defaults apply however an object is made
# ---------------------------------------------------------------------------


def test_defaults_apply_when_the_engine_spawns_the_object(engine_rt: zs.Runtime) -> None:
    made = Sniper()
    world = World()
    world.add_to_root()
    spawned = world.spawn(Sniper, Transform())
    for sniper in (made, spawned):
        assert sniper.range == 800 and str(sniper.callsign) == "eagle"
        assert (sniper.scope.x, sniper.scope.y, sniper.scope.z) == (0.0, 0.0, 2.0)
    spawned.callsign = "hawk"  # every object has its own copy
    assert str(world.spawn(Sniper, Transform()).callsign) == "eagle"
    assert str(Sniper().callsign) == "eagle" and str(spawned.callsign) == "hawk"


class LootCrate(zs.Object):
    """A Python class a host creates by name: defaults of every kind the
    heap can copy, and one (an object reference) it leaves to Python."""

    weight: zs.Float64 = 2.5
    label: zs.String = "crate"
    tag: zs.Name = "loot"
    slots: zs.Array[zs.Int32] = [1, 2, 3]
    spot: Vec3 = Vec3(1.0, 2.0, 3.0)
    owner: Actor | None = None


@pytest.mark.parametrize("stress", [False, True], ids=["plain", "collect_every_2"])
def test_defaults_apply_to_an_object_a_host_creates_by_name(stress: bool) -> None:
    options: dict[str, Any] = {"stress": zs.debug.GcStress(collect_every=2)} if stress else {}
    with zs.Runtime(**options) as rt:
        for crate in (made_by_class_name(rt, b"LootCrate"), LootCrate()):
            assert crate.weight == 2.5 and str(crate.label) == "crate"
            assert str(crate.tag) == "loot" and list(crate.slots) == [1, 2, 3]
            assert (crate.spot.x, crate.spot.y, crate.spot.z) == (1.0, 2.0, 3.0)
            assert crate.owner is None
        first = made_by_class_name(rt, b"LootCrate")
        first.slots.append(4)
        assert list(made_by_class_name(rt, b"LootCrate").slots) == [1, 2, 3]  # a copy each
        # Nothing of the defaults' copies leaks: every object and its
        # memory goes, the class's own copies with the runtime.
        for handle in rt._heap_live_handles("test")[: rt.live_objects()]:
            zs_lib.zs_remove_from_root(runtime_ptr(rt), handle)
        gc.collect()
        assert rt.collect_garbage().live_objects == 0


def test_defaults_the_heap_refused_once_are_set_at_the_next_use() -> None:
    """Registering a class sets its native defaults; if that fails (here
    the native call, made to fail once), the creation that registered it
    fails, the class stays registered, and its next use sets them: a host
    creation after that reads them."""

    class Barrel(zs.Object):
        label: zs.String = "oil"

    with zs.Runtime() as rt:
        calls: list[int] = []
        real = rt._heap_class_defaults

        def failing_once(*args: Any) -> tuple[int, ...]:
            calls.append(1)
            if len(calls) == 1:
                raise MemoryError("no memory for the defaults")
            return real(*args)

        rt._heap_class_defaults = failing_once  # type: ignore[method-assign]
        with pytest.raises(MemoryError, match="no memory"):
            Barrel()
        assert str(Barrel().label) == "oil" and len(calls) == 2
        native = zs_ffi.cast("zs_class *", rt._native_class_address(Barrel))
        ref = zs_ffi.new("zs_ref *")
        made = zs_lib.zs_object_new(
            runtime_ptr(rt), native, 0, zs_lib.ZS_NAME_AUTO, 0, ref, zs_ffi.NULL
        )
        assert made == 0 and str(rt.object_from_handle(ref[0]).label) == "oil"


def test_a_default_holding_an_object_reference_is_left_to_python(engine_rt: zs.Runtime) -> None:
    """The heap's copy of a default is not traced, so a default holding an
    object reference is applied by Python's creations only (documented)."""
    world = World()
    world.add_to_root()
    keeper = world.spawn(Actor, Transform())

    class Escort(Actor):
        charge: Actor | None = keeper
        marks: zs.Array[zs.Int32] = [7]

    assert Escort().charge is keeper
    spawned = world.spawn(Escort, Transform())
    assert spawned.charge is None and list(spawned.marks) == [7]


# ---------------------------------------------------------------------------
# (c) An override that is not a plain function is refused at the class statement
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (42, "int"),
        (property(lambda self: None), "property"),
        (staticmethod(lambda dt: None), "staticmethod"),
        (classmethod(lambda cls, dt: None), "classmethod"),
        (print, "builtin_function_or_method"),
    ],
    ids=["int", "property", "staticmethod", "classmethod", "builtin"],
)
def test_an_override_that_is_no_plain_function_is_refused_at_the_class_statement(
    value: Any, shown: str
) -> None:
    message = (
        rf"Bad\.tick overrides the event Actor\.tick\(dt: Float64\) -> None, which native "
        rf"code calls with its parameters: it must be a plain function \(def tick\(self, "
        rf"\.\.\.\)\), not {shown}"
    )
    with pytest.raises(TypeError, match=message):
        type(Actor)("Bad", (Actor,), {"tick": value, "__module__": __name__})
    # Below a Python class that overrode it properly, too; a host's function
    # that is no event is refused the same; a static one may be shadowed.
    with pytest.raises(TypeError, match=r"Worse\.tick overrides the event Actor\.tick"):
        type(Actor)("Worse", (Guard,), {"tick": value, "__module__": __name__})
    with pytest.raises(TypeError, match=r"the function Actor\.take_damage\("):
        type(Actor)("Odd", (Actor,), {"take_damage": value, "__module__": __name__})
    type(Actor)("Fine", (World,), {"version": value, "__module__": __name__})


def test_plain_function_overrides_are_accepted_and_reach_native_callers(
    engine_rt: zs.Runtime,
) -> None:
    calls: list[float] = []

    class Counter(Actor):
        def tick(self, dt: float) -> None:
            calls.append(dt)

    world = World()
    world.add_to_root()
    world.spawn(Counter, Transform())
    assert world.tick(0.25) == 1 and calls == [0.25]


# ---------------------------------------------------------------------------
# (d) A closed runtime is never replaced silently
# ---------------------------------------------------------------------------


def test_after_close_nothing_is_made_in_a_hidden_runtime() -> None:
    with zs.Runtime() as rt:
        rt.close()
        for make in (Squad, lambda: Squad(leader=None), lambda: zs.Array[zs.Int32]([1])):
            with pytest.raises(zs.ExpiredConjugateError, match="never replaced"):
                make()
    level = zs.Runtime()
    with level.activate():
        level.close()
        with pytest.raises(zs.ExpiredConjugateError, match=r"made at .*test_game_scripts.py"):
            Squad()
