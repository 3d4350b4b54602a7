"""Errors raised by Python code that native code called back into: raised
to the Python call into the host that was running (zs.CallbackError, the
original as ``__cause__``), or, when no Python call started the host's,
reported to ``sys.unraisablehook`` with repeats folded (docs/errors.md,
"Debugging: errors in scripts"; native/binding/zpy_errors.c)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import zsharp_py as zs
import zsharp_py.debug
from helpers import runtime_ptr
from native_build import compile_host
from zsharp_py._base.errors import ZS_OK
from zsharp_py._base.ffi import ffi, lib
from zsharp_py.lowlevel import api_table


@pytest.fixture
def rt(engine_rt: zs.Runtime) -> zs.Runtime:
    """Every test here runs on the sample engine (conftest's engine_rt)."""
    return engine_rt


def engine() -> tuple[Any, Any, Any]:
    return zs.native_class("World"), zs.native_class("Actor"), zs.native_struct("Transform")


def rooted_world() -> Any:
    World = zs.native_class("World")
    world = World()
    world.add_to_root()
    return world


def host_tick(world: Any, dt: float) -> tuple[int, int]:
    """World.tick called as a C host's frame loop calls it: zs_call_function,
    no Python call into the host around it. (status, actors ticked)."""
    block = ffi.new("double[2]")  # sample_world_tick_params: dt, then the Int32 result
    block[0] = dt
    status = lib.zs_call_function(
        runtime_ptr(world.runtime), world.handle, b"tick", ffi.cast("void *", block)
    )
    return int(status), int(ffi.cast("int32_t *", block)[2])


# ---------------------------------------------------------------------------
# called from Python: the error reaches the caller
# ---------------------------------------------------------------------------


def test_the_first_error_is_raised_the_rest_counted(rt: zs.Runtime, unraisable: list[Any]) -> None:
    _, Actor, Transform = engine()
    raised = iter(range(100))

    class Buggy(Actor):  # type: ignore[misc,valid-type]
        def tick(self, dt):  # type: ignore[no-untyped-def]
            raise ValueError(f"bug {next(raised)}")

    world = rooted_world()
    for _ in range(3):
        world.spawn(Buggy, Transform())
    plain = world.spawn(Actor, Transform())
    with pytest.raises(zs.CallbackError) as e:
        world.tick(0.5)
    message = str(e.value)
    assert message.startswith("World.tick(") and "raised ValueError: bug 0 (and 2 more)" in message
    assert type(e.value.__cause__) is ValueError and str(e.value.__cause__) == "bug 0"
    assert e.value.__cause__.__traceback__ is not None  # the override's own frames
    assert isinstance(e.value, RuntimeError)
    assert plain.ticks == 1 and unraisable == []  # the engine went on; nothing reported
    rt.gc.verify()


def test_an_error_of_a_nested_call_belongs_to_it(rt: zs.Runtime, unraisable: list[Any]) -> None:
    """An override that calls the host itself gets its callbacks' errors
    from that call; caught there, the outer call raises nothing."""
    _, Actor, Transform = engine()
    caught: list[BaseException] = []

    class Fragile(Actor):  # type: ignore[misc,valid-type]
        def on_destroy(self) -> None:
            raise KeyError("fragile")

    class Breaker(Actor):  # type: ignore[misc,valid-type]
        def tick(self, dt):  # type: ignore[no-untyped-def]
            super().tick(dt)
            for victim in [a for a in world.actors if type(a) is Fragile]:
                try:
                    world.destroy(victim)
                except zs.CallbackError as error:
                    caught.append(error)

    world = rooted_world()
    world.spawn(Fragile, Transform())
    breaker = world.spawn(Breaker, Transform())
    world.tick(0.5)  # raises nothing: the inner call's error was handled
    assert len(caught) == 1 and str(caught[0]).startswith("World.destroy(")
    assert type(caught[0].__cause__) is KeyError
    assert breaker.ticks == 1 and unraisable == []
    rt.gc.verify()


def test_infinite_recursion_in_an_override(rt: zs.Runtime, unraisable: list[Any]) -> None:
    _, Actor, Transform = engine()
    deep = {"on": True}

    class Deep(Actor):  # type: ignore[misc,valid-type]
        def tick(self, dt):  # type: ignore[no-untyped-def]
            if deep["on"]:
                self.tick(dt)  # the override itself, forever
            else:
                super().tick(dt)

    world = rooted_world()
    actor = world.spawn(Deep, Transform())
    with pytest.raises(zs.CallbackError, match="raised RecursionError") as e:
        world.tick(0.5)
    assert type(e.value.__cause__) is RecursionError
    deep["on"] = False
    assert world.tick(0.5) == 1 and actor.ticks == 1  # the interpreter and the engine recovered
    assert unraisable == []


def test_reentering_world_tick_from_tick(rt: zs.Runtime, unraisable: list[Any]) -> None:
    """Each World.tick inside a tick is a call into the host of its own: the
    innermost one's RecursionError comes out of the outermost unchanged."""
    _, Actor, Transform = engine()
    depth = {"now": 0, "most": 0, "on": True}  # "now" may miss a decrement: no recursion left

    class Again(Actor):  # type: ignore[misc,valid-type]
        def tick(self, dt):  # type: ignore[no-untyped-def]
            super().tick(dt)
            if not depth["on"]:
                return
            depth["now"] += 1
            depth["most"] = max(depth["most"], depth["now"])
            try:
                world.tick(dt)
            finally:
                depth["now"] -= 1

    world = rooted_world()
    actor = world.spawn(Again, Transform())
    with pytest.raises(zs.CallbackError, match=r"^World\.tick\(.*raised RecursionError") as e:
        world.tick(0.5)
    assert type(e.value.__cause__) is RecursionError
    assert depth["most"] > 10  # it did recurse
    depth["on"] = False
    before = actor.ticks
    assert world.tick(0.5) == 1 and actor.ticks == before + 1
    assert unraisable == []
    rt.gc.verify()


def test_keyboard_interrupt_reaches_the_caller_as_itself(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    _, Actor, Transform = engine()

    class Buggy(Actor):  # type: ignore[misc,valid-type]
        def tick(self, dt):  # type: ignore[no-untyped-def]
            raise ValueError("first")

    class Stopped(Actor):  # type: ignore[misc,valid-type]
        def tick(self, dt):  # type: ignore[no-untyped-def]
            raise KeyboardInterrupt

    world = rooted_world()
    world.spawn(Stopped, Transform())
    with pytest.raises(KeyboardInterrupt):
        world.tick(0.5)
    world.spawn(Buggy, Transform())  # an ordinary error first does not hide it
    world.spawn(Stopped, Transform())
    with pytest.raises(KeyboardInterrupt):
        world.tick(0.5)
    assert unraisable == []


class Ticker(zs.Object):
    """A tick function of the tick manager that raises on demand."""

    count: zs.Int32

    def tick(self, dt: float) -> None:
        self.count += 1
        if FAIL:
            raise FAIL.pop(0)


FAIL: list[BaseException] = []


def test_tick_functions_called_by_rt_ticks_frame(unraisable: list[Any]) -> None:
    with zs.Runtime() as rt:
        tickers = [Ticker() for _ in range(3)]
        for ticker in tickers:
            ticker.add_to_root()
            rt.ticks.register(ticker)
        FAIL[:] = [LookupError("a"), ValueError("b")]
        with pytest.raises(
            zs.CallbackError,
            match=r"^rt\.ticks\.frame\(\): .*raised LookupError: a \(and 1 more\)$",
        ):
            rt.ticks.frame(0.1)
        assert [t.count for t in tickers] == [1, 1, 1]
        assert rt.ticks.frame(0.1).failed == 0  # the next frame runs as usual
        assert unraisable == []


# ---------------------------------------------------------------------------
# called by a host's own loop: sys.unraisablehook, repeats folded
# ---------------------------------------------------------------------------


def test_a_host_loop_reports_to_unraisablehook_folding_repeats(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    _, Actor, Transform = engine()

    class Buggy(Actor):  # type: ignore[misc,valid-type]
        def tick(self, dt):  # type: ignore[no-untyped-def]
            raise ZeroDivisionError("the same bug")

    world = rooted_world()
    world.spawn(Buggy, Transform())
    plain = world.spawn(Actor, Transform())
    for _ in range(25):
        assert host_tick(world, 0.1) == (ZS_OK, 2)  # the engine goes on
    assert plain.ticks == 25
    assert [type(u.exc_value) for u in unraisable] == [ZeroDivisionError] * 2  # the 1st, the 10th
    assert unraisable[0].object.__func__ is Buggy.tick
    assert str(unraisable[1].object).endswith("(the same error 10 times)")
    assert "Buggy.tick" in str(unraisable[1].object)


def test_a_host_loop_reports_each_different_error(rt: zs.Runtime, unraisable: list[Any]) -> None:
    _, Actor, Transform = engine()
    frame = iter(range(100))

    class Buggy(Actor):  # type: ignore[misc,valid-type]
        def tick(self, dt):  # type: ignore[no-untyped-def]
            raise ValueError(f"frame {next(frame)}")

    world = rooted_world()
    world.spawn(Buggy, Transform())
    for _ in range(5):
        host_tick(world, 0.1)
    assert [str(u.exc_value) for u in unraisable] == [f"frame {i}" for i in range(5)]


def test_a_host_loop_never_folds_an_interrupt(rt: zs.Runtime, unraisable: list[Any]) -> None:
    _, Actor, Transform = engine()

    class Stopped(Actor):  # type: ignore[misc,valid-type]
        def tick(self, dt):  # type: ignore[no-untyped-def]
            raise KeyboardInterrupt

    world = rooted_world()
    world.spawn(Stopped, Transform())
    for _ in range(3):
        host_tick(world, 0.1)
    assert [type(u.exc_value) for u in unraisable] == [KeyboardInterrupt] * 3


def test_a_host_tick_frame_reports_tick_functions(unraisable: list[Any]) -> None:
    with zs.Runtime() as rt:
        ticker = Ticker()
        ticker.add_to_root()
        rt.ticks.register(ticker)
        stats = ffi.new("zs_frame_stats *")
        FAIL[:] = [KeyError("k")]
        assert lib.zs_tick_frame(runtime_ptr(rt), 0.1, ffi.NULL, stats) == ZS_OK
        assert stats.failed == 1  # the host sees the failure
        assert len(unraisable) == 1 and type(unraisable[0].exc_value) is KeyError


def test_a_new_hook_hears_an_error_again(
    rt: zs.Runtime, unraisable: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, Actor, Transform = engine()

    class Buggy(Actor):  # type: ignore[misc,valid-type]
        def tick(self, dt):  # type: ignore[no-untyped-def]
            raise ZeroDivisionError("again")

    world = rooted_world()
    world.spawn(Buggy, Transform())
    host_tick(world, 0.1)
    host_tick(world, 0.1)
    assert len(unraisable) == 1
    other: list[Any] = []
    monkeypatch.setattr("sys.unraisablehook", other.append)
    host_tick(world, 0.1)
    assert len(other) == 1 and len(unraisable) == 1


# ---------------------------------------------------------------------------
# a host function's refusal names the arguments
# ---------------------------------------------------------------------------


def test_a_refused_call_names_its_arguments(rt: zs.Runtime) -> None:
    World, Actor, Transform = engine()
    world = World()
    with pytest.raises(ValueError, match=r"^World\.spawn\(.* with cls=None, at=Transform\(") as e:
        world.spawn(None, Transform())
    assert "invalid argument" in str(e.value)
    with pytest.raises(ValueError, match=r" with cls=None, at=Transform\("):
        world.spawn(at=Transform(), cls=None)  # by keyword: still in declaration order
    actor = world.spawn(Actor, Transform())
    with pytest.raises(ValueError, match=r"take_damage\(.* with amount=-1\.0, instigator=None:"):
        actor.take_damage(-1.0, None)
    assert actor.take_damage(1.0, None) >= 0  # a good call still works


def test_a_hostile_repr_leaves_the_plain_message(rt: zs.Runtime) -> None:
    """The arguments' reprs run after the call; one that raises gives the
    message without them, never its own error."""
    World, Actor, Transform = engine()
    actor = World().spawn(Actor, Transform())

    class Amount(float):
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    with pytest.raises(ValueError, match=r"^Actor\.take_damage\(.*-> Float64: invalid argument"):
        actor.take_damage(Amount(-1.0), None)


def test_raise_callback_errors_off_reports_every_error(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    _, Actor, Transform = engine()

    class Buggy(Actor):  # type: ignore[misc,valid-type]
        def tick(self, dt):  # type: ignore[no-untyped-def]
            raise ZeroDivisionError("same")

    world = rooted_world()
    world.spawn(Buggy, Transform())
    assert zs.debug.raise_callback_errors(False) is True
    try:
        for _ in range(3):
            assert world.tick(0.1) == 1  # returns: the error is reported instead
    finally:
        assert zs.debug.raise_callback_errors(True) is False
    assert [type(u.exc_value) for u in unraisable] == [ZeroDivisionError] * 3  # none folded
    with pytest.raises(zs.CallbackError):
        world.tick(0.1)


# ---------------------------------------------------------------------------
# overrides, listeners and tick functions, called from Python and from a
# host's own frame loop (tests/hosts/frame_loop_host.c)
# ---------------------------------------------------------------------------

LOOP_SOURCE = Path(__file__).resolve().parents[1] / "hosts" / "frame_loop_host.c"
LOOP_CDEF = """
typedef struct { int32_t frames, failed_ticks, failed_calls, ticked; } frame_loop_report;
int frame_loop_run(const void *api, void *rt, uint64_t world, int32_t frames, double dt,
                   frame_loop_report *report);
"""


class FrameLoop:
    """The compiled C frame loop: tick manager, then World.tick, per frame."""

    def __init__(self) -> None:
        self.ffi, self.lib, _ = compile_host(LOOP_SOURCE.read_text(), "frame_loop_host", LOOP_CDEF)

    def run(self, world: Any, frames: int, dt: float = 0.1) -> tuple[int, int, int]:
        """Run ``frames`` frames from plain C (the GIL released by cffi):
        (frames run, tick functions failed, World.tick calls failed)."""
        report = self.ffi.new("frame_loop_report *")
        status = self.lib.frame_loop_run(
            self.ffi.cast("void *", api_table()),
            self.ffi.cast("void *", world.runtime.native_address),
            world.handle,
            frames,
            dt,
            report,
        )
        assert status == ZS_OK
        return report.frames, report.failed_ticks, report.failed_calls


@pytest.fixture(scope="module")
def frame_loop() -> FrameLoop:
    return FrameLoop()


def recurse_forever() -> None:
    """Infinite recursion: RecursionError."""
    recurse_forever()


def raise_interrupt() -> None:
    raise KeyboardInterrupt


def raise_value_error() -> None:
    raise ValueError("the same bug every frame")


RAISERS: dict[str, Callable[[], None]] = {
    "ValueError": raise_value_error,
    "RecursionError": recurse_forever,
    "KeyboardInterrupt": raise_interrupt,
}


def install_raiser(kind: str, world: Any, raiser: Callable[[], None]) -> tuple[Any, list[str]]:
    """Make ``world`` call ``raiser`` from native code on every frame, as
    ``kind`` (an actor's tick override, a listener of the world's on_tick,
    a tick function of the tick manager), with a well-behaved callback of
    the same kind after it. Returns (what rt.ticks.frame / world.tick a
    Python caller calls, the list the well-behaved one appends to)."""
    _, Actor, Transform = engine()
    ran: list[str] = []
    if kind == "override":

        class Failing(Actor):  # type: ignore[misc,valid-type]
            def tick(self, dt):  # type: ignore[no-untyped-def]
                raiser()

        class Fine(Actor):  # type: ignore[misc,valid-type]
            def tick(self, dt):  # type: ignore[no-untyped-def]
                ran.append("fine")

        world.spawn(Failing, Transform())
        world.spawn(Fine, Transform())
        return world.tick, ran
    if kind == "listener":
        world.on_tick.add(lambda dt, frame: raiser())
        world.on_tick.add(lambda dt, frame: ran.append("fine"))
        return world.tick, ran
    assert kind == "tick"

    class Raising(zs.Object):
        def tick(self, dt: float) -> None:
            raiser()

    class Fine(zs.Object):
        def tick(self, dt: float) -> None:
            ran.append("fine")

    for cls in (Raising, Fine):
        obj = cls()
        obj.add_to_root()
        world.runtime.ticks.register(obj)
    return world.runtime.ticks.frame, ran


KINDS = ["override", "listener", "tick"]


@pytest.mark.parametrize("error", list(RAISERS))
@pytest.mark.parametrize("kind", KINDS)
def test_called_from_python_the_error_reaches_the_caller(
    rt: zs.Runtime, unraisable: list[Any], kind: str, error: str
) -> None:
    """world.tick / rt.ticks.frame raise what the callback raised: as the
    CallbackError's __cause__, a KeyboardInterrupt as itself; the callbacks
    after it still ran, nothing went to the hook."""
    world = rooted_world()
    call, ran = install_raiser(kind, world, RAISERS[error])
    name = r"rt\.ticks\.frame\(\)" if kind == "tick" else r"World\.tick\("
    for frame in range(3):  # every time: never folded, never silent
        if error == "KeyboardInterrupt":
            with pytest.raises(KeyboardInterrupt):
                call(0.1)
        else:
            with pytest.raises(zs.CallbackError, match=rf"^{name}.*raised {error}") as e:
                call(0.1)
            assert type(e.value.__cause__).__name__ == error
            assert e.value.__cause__.__traceback__ is not None
        assert ran == ["fine"] * (frame + 1)
    assert unraisable == []
    rt.gc.verify()


@pytest.mark.parametrize("error", list(RAISERS))
@pytest.mark.parametrize("kind", KINDS)
def test_from_a_host_loop_the_error_goes_to_the_hook(
    rt: zs.Runtime, unraisable: list[Any], frame_loop: FrameLoop, kind: str, error: str
) -> None:
    """A C frame loop goes on; the hook hears an ordinary error on the 1st
    and 10th of 25 frames (folded), a RecursionError or KeyboardInterrupt
    every frame."""
    world = rooted_world()
    _, ran = install_raiser(kind, world, RAISERS[error])
    frames, failed_ticks, failed_calls = frame_loop.run(world, 25)
    assert frames == 25 and ran == ["fine"] * 25
    # The host sees the failures: a tick function's in the frame's stats; a
    # World.tick's own status is the world's, whatever its actors did.
    assert failed_ticks == (25 if kind == "tick" else 0) and failed_calls == 0
    kinds = [type(report.exc_value).__name__ for report in unraisable]
    if error == "ValueError":
        assert kinds == ["ValueError"] * 2
        assert str(unraisable[1].object).endswith("(the same error 10 times)")
    else:
        assert kinds == [error] * 25
    rt.gc.verify()


def test_from_python_errors_of_every_kind_are_counted(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    """One world.tick whose override and listener both raise: the first (the
    actors tick before on_tick) is raised, the other counted."""
    world = rooted_world()
    install_raiser("override", world, raise_value_error)
    world.on_tick.add(lambda dt, frame: 1 / 0)
    with pytest.raises(zs.CallbackError, match=r"raised ValueError: .* \(and 1 more\)$") as e:
        world.tick(0.1)
    assert type(e.value.__cause__) is ValueError and unraisable == []


def test_a_listener_of_a_host_function_called_from_python(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    """Actor.take_damage broadcasts on_damaged: a listener's error comes out
    of take_damage once the damage is done and every listener ran."""
    _, Actor, Transform = engine()
    actor = rooted_world().spawn(Actor, Transform())
    heard: list[float] = []
    actor.on_damaged.add(lambda who, amount, instigator: 1 / 0)
    actor.on_damaged.add(lambda who, amount, instigator: heard.append(amount))
    before = actor.health
    with pytest.raises(zs.CallbackError, match=r"^Actor\.take_damage\(") as e:
        actor.take_damage(10.0, None)
    assert type(e.value.__cause__) is ZeroDivisionError
    assert heard == [10.0] and actor.health == before - 10 and unraisable == []


def test_a_listener_that_calls_the_host_owns_its_errors(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    """A listener of on_tick that calls take_damage, whose own listener
    raises, gets that error from take_damage; handled there, world.tick
    raises nothing."""
    _, Actor, Transform = engine()
    world = rooted_world()
    actor = world.spawn(Actor, Transform())
    actor.on_damaged.add(lambda who, amount, instigator: 1 / 0)
    caught: list[BaseException] = []

    def hurt(dt: float, frame: int) -> None:
        try:
            actor.take_damage(1.0, None)
        except zs.CallbackError as error:
            caught.append(error)

    world.on_tick.add(hurt)
    world.tick(0.1)
    assert len(caught) == 1 and type(caught[0].__cause__) is ZeroDivisionError
    assert unraisable == []
