"""Errors raised by Python code that native code called back into: raised
to the Python call into the host that was running (zs.CallbackError, the
original as ``__cause__``), or, when no Python call started the host's,
reported to ``sys.unraisablehook`` with repeats folded (docs/errors.md,
"Debugging: errors in scripts"; native/binding/zpy_errors.c)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

import zsharp_py as zs
import zsharp_py.debug
from helpers import runtime_ptr
from zsharp_py import sample_engine
from zsharp_py._base.errors import ZS_OK
from zsharp_py._base.ffi import ffi, lib


@pytest.fixture
def rt() -> Iterator[zs.Runtime]:
    with zs.Runtime() as runtime:
        sample_engine.install()
        yield runtime
    gc.collect()


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
