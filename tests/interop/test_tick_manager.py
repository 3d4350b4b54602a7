"""The tick manager from Python (``rt.ticks``; native/src/ticks.c,
native/binding/zpy_ticks.c): group order, intervals, prerequisites and
cycles, enable and disable, objects destroyed or collected in the middle
of a frame, registration and removal during a tick, ``close()`` and
collections from inside a tick function, a tick function that raises,
hostile arguments, the host's own tick functions run in C with no proxy
made, and a frame driven by a native host (``zs_tick_frame`` through the
library) whose collections expire Python's proxies first."""

from __future__ import annotations

import gc
from typing import Any

import pytest

import zsharp_py as zs
from helpers import runtime_ptr
from zsharp_py import sample_engine
from zsharp_py._base.ffi import ffi, lib
from zsharp_py.ticks import FrameStats, TickFunction


class Ticker(zs.Object):
    """Logs every tick into a list the test holds (by id, per runtime)."""

    ident: zs.Int32
    total: zs.Float64
    count: zs.Int32

    def tick(self, dt: float) -> None:
        self.count += 1
        self.total += dt
        LOG.append((self.ident, dt))
        action = ACTIONS.pop(self.ident, None)
        if action is not None:
            action(self)


class Quiet(zs.Object):
    """A tick function with no dt, and functions that cannot tick."""

    count: zs.Int32

    def tick(self) -> None:
        self.count += 1

    def score(self) -> zs.Int32:
        return 1

    def two(self, a: float, b: float) -> None:
        pass

    def named(self, dt: zs.Int32) -> None:
        pass


LOG: list[tuple[int, float]] = []
ACTIONS: dict[int, Any] = {}


@pytest.fixture(autouse=True)
def _clean_log() -> Any:
    LOG.clear()
    ACTIONS.clear()
    yield
    LOG.clear()
    ACTIONS.clear()


def tickers(count: int) -> list[Ticker]:
    """``count`` rooted tickers with idents 0 .. count-1."""
    made = [Ticker(ident=i) for i in range(count)]
    for ticker in made:
        ticker.add_to_root()
    return made


def order() -> list[int]:
    """The idents logged since the last call, in order (the log emptied)."""
    idents = [ident for ident, _ in LOG]
    LOG.clear()
    return idents


# ---------------------------------------------------------------------------
# order and time
# ---------------------------------------------------------------------------


def test_groups_tick_in_order_and_registration_order_within_a_group(rt: zs.Runtime) -> None:
    t = tickers(5)
    rt.ticks.register(t[0], group="post_update_work")
    rt.ticks.register(t[1], group="post_physics")
    rt.ticks.register(t[2])  # pre_physics, the default
    moved = rt.ticks.register(t[3], group="during_physics")
    rt.ticks.register(t[4])
    stats = rt.ticks.frame(1 / 60)
    assert order() == [2, 4, 3, 1, 0]
    assert isinstance(stats, FrameStats)
    assert (stats.frame, stats.ticked, stats.failed, stats.gc) == (1, 5, 0, None)
    assert len(rt.ticks) == 5
    moved.group = "post_update_work"  # from the next frame
    assert moved.group == "post_update_work"
    rt.ticks.frame(1 / 60)
    assert order() == [2, 4, 1, 0, 3]
    assert moved.actual_group == "post_update_work"


def test_prerequisites_order_a_group_and_move_a_dependent_to_a_later_group(
    rt: zs.Runtime,
) -> None:
    t = tickers(4)
    a = rt.ticks.register(t[0])
    b = rt.ticks.register(t[1])
    c = rt.ticks.register(t[2])
    late = rt.ticks.register(t[3], group="post_physics")
    a.add_prerequisite(c)
    c.add_prerequisite(b)
    a.add_prerequisite(c)  # twice: nothing more
    assert a.prerequisite_count == 1
    rt.ticks.frame(0.1)
    assert order() == [1, 2, 0, 3]
    b.add_prerequisite(late)  # b, c and a follow it into post_physics
    rt.ticks.frame(0.1)
    assert order() == [3, 1, 2, 0]
    assert (a.group, a.actual_group) == ("pre_physics", "post_physics")
    # cycles, direct or not, and itself
    for dependent, prerequisite in ((c, a), (late, a), (a, a), (late, b)):
        with pytest.raises(ValueError, match="cycle"):
            dependent.add_prerequisite(prerequisite)
    b.remove_prerequisite(late)
    with pytest.raises(ValueError, match="not a prerequisite"):
        b.remove_prerequisite(late)
    c.unregister()  # a's prerequisite goes with it
    rt.ticks.frame(0.1)
    assert order() == [0, 1, 3]
    assert a.prerequisite_count == 0
    with pytest.raises(TypeError):
        a.add_prerequisite(t[1])  # type: ignore[arg-type]
    with zs.Runtime() as other:
        foreign = other.ticks.register(Ticker())
        with pytest.raises(ValueError, match="another runtime"):
            a.add_prerequisite(foreign)


def test_register_after_sets_prerequisites_all_or_nothing(rt: zs.Runtime) -> None:
    t = tickers(3)
    first = rt.ticks.register(t[0])
    second = rt.ticks.register(t[1], after=[first])
    rt.ticks.register(t[2], after=(second,))
    rt.ticks.frame(0.1)
    assert order() == [0, 1, 2]
    gone = rt.ticks.register(t[2])
    gone.unregister()
    with pytest.raises(zs.ExpiredConjugateError, match="not registered"):
        rt.ticks.register(t[0], after=[second, gone])
    assert len(rt.ticks) == 3  # the half-made registration is gone
    with pytest.raises(TypeError, match="TickFunction"):
        rt.ticks.register(t[0], after=[t[1]])  # type: ignore[list-item]


def test_intervals_count_enabled_game_time_and_hand_it_over(rt: zs.Runtime) -> None:
    slow, fast, every = tickers(3)
    half = rt.ticks.register(slow, interval=0.5)
    rt.ticks.register(fast, interval=0.1)
    rt.ticks.register(every)
    waiting = 0
    for _ in range(60):
        waiting += rt.ticks.frame(1 / 60).waiting
    assert (slow.count, fast.count, every.count) == (2, 10, 60)
    assert waiting == 58 + 50
    for ticker in (slow, fast, every):
        assert ticker.total == pytest.approx(1.0, abs=1e-9)  # the times given add up
    half.enabled = False  # disabled time does not count
    for _ in range(4):
        rt.ticks.frame(0.25)
    half.enabled = True
    half.interval = 0.25
    assert (half.interval, half.elapsed, half.calls) == (0.25, 0.0, 2)
    LOG.clear()
    rt.ticks.frame(0.25)
    assert LOG[0] == (0, 0.25)


def test_enable_and_disable_at_any_time(rt: zs.Runtime) -> None:
    t = tickers(3)
    ticks = [rt.ticks.register(x) for x in t[:2]]
    ticks.append(rt.ticks.register(t[2], enabled=False))
    assert [x.enabled for x in ticks] == [True, True, False]
    stats = rt.ticks.frame(0.1)
    assert order() == [0, 1] and stats.disabled == 1

    def disable_one(me: Ticker) -> None:
        ticks[1].enabled = False  # at once: later in this very frame

    def enable_two(me: Ticker) -> None:
        ticks[2].enabled = True  # when the frame reaches it: this one

    ACTIONS[0] = disable_one
    rt.ticks.frame(0.1)
    assert order() == [0]
    ACTIONS[0] = enable_two
    rt.ticks.frame(0.1)
    assert order() == [0, 2]


def test_a_tick_function_without_dt_and_functions_that_cannot_tick(rt: zs.Runtime) -> None:
    quiet = Quiet()
    quiet.add_to_root()
    rt.ticks.register(quiet)
    rt.ticks.frame(0.1)
    assert quiet.count == 1
    for name in ("score", "two", "named"):
        with pytest.raises(TypeError, match="cannot be a tick function"):
            rt.ticks.register(quiet, name)
    with pytest.raises(AttributeError):
        rt.ticks.register(quiet, "missing")
    with pytest.raises(TypeError, match="not a plain method"):
        rt.ticks.register(quiet, "count")
    assert len(rt.ticks) == 1


# ---------------------------------------------------------------------------
# the host's own tick functions: C, with no Python frame
# ---------------------------------------------------------------------------


def test_a_host_function_ticks_in_c_and_a_python_override_through_the_handler(
    rt: zs.Runtime,
) -> None:
    sample_engine.install()
    world_class, actor_class = zs.native_class("World"), zs.native_class("Actor")
    at = zs.native_struct("Transform")()

    class Guard(actor_class):  # type: ignore[misc,valid-type]
        def tick(self, dt: float) -> None:
            LOG.append((7, dt))
            super().tick(dt)

    class Plain(actor_class):  # type: ignore[misc,valid-type]
        """A script class that does not override tick: the handler runs the host's."""

    world = world_class()
    world.add_to_root()
    host, guard, plain = (world.spawn(cls, at) for cls in (actor_class, Guard, Plain))
    for actor in (host, guard, plain):
        rt.ticks.register(actor)
    handles = [actor.handle for actor in (host, guard, plain)]
    del host, guard, plain, actor
    gc.collect()
    rt._flush_values()
    assert all(rt._conjugate_get(h) is None for h in handles)
    stats = rt.ticks.frame(0.5)
    assert stats.ticked == 3 and stats.failed == 0
    assert LOG == [(7, 0.5)]
    # the host's actor ticked in C: no proxy of it was made; the script
    # classes' went through the handler, which made theirs
    assert rt._conjugate_get(handles[0]) is None
    assert [rt.object_from_handle(h).ticks for h in handles] == [1, 1, 1]


# ---------------------------------------------------------------------------
# what a tick function may do to its frame
# ---------------------------------------------------------------------------


def test_objects_destroyed_or_collected_during_a_frame_are_not_ticked(rt: zs.Runtime) -> None:
    t = tickers(5)
    for ticker in t:
        rt.ticks.register(ticker)
    late = rt.ticks.register(t[3], group="post_physics")

    def destroy_others(me: Ticker) -> None:
        t[1].mark_as_garbage()
        t[3].remove_from_root()
        t[2].remove_from_root()
        rt.collect_garbage()  # frees 2 and 3 in the middle of the frame

    ACTIONS[0] = destroy_others
    stats = rt.ticks.frame(0.1)
    assert order() == [0, 4]
    assert t[2].is_expired and t[3].is_expired and not t[1].is_expired  # garbage, rooted
    assert (stats.skipped, stats.unregistered) == (1, 3)
    assert not late.registered and late.target is None
    with pytest.raises(zs.ExpiredConjugateError, match="not registered"):
        late.interval = 1.0
    assert late.unregister() is False
    rt.gc.verify()
    rt.ticks.frame(0.1)
    assert order() == [0, 4]
    assert len(rt.ticks) == 3  # t[1] waits, marked as garbage but rooted
    t[1].remove_from_root()
    rt.collect_garbage()
    rt.ticks.frame(0.1)
    assert len(rt.ticks) == 2


def test_a_tick_function_that_collects_everything_and_itself(rt: zs.Runtime) -> None:
    t = tickers(3)
    for ticker in t:
        rt.ticks.register(ticker)

    def collect_all(me: Ticker) -> None:
        for ticker in t:
            ticker.remove_from_root()
        rt.collect_garbage()

    ACTIONS[1] = collect_all
    stats = rt.ticks.frame(0.1)
    assert order() == [0, 1]
    assert all(ticker.is_expired for ticker in t)
    assert stats.unregistered == 1
    rt.gc.verify()
    rt.ticks.frame(0.1)
    assert len(rt.ticks) == 0


def test_incremental_collection_during_a_frame(rt: zs.Runtime) -> None:
    t = tickers(4)
    for ticker in t:
        rt.ticks.register(ticker)

    def drop_two(me: Ticker) -> None:
        t[2].remove_from_root()
        t[3].remove_from_root()
        rt.gc.start_incremental()
        while not rt.gc.step(max_objects=1):
            pass

    ACTIONS[1] = drop_two
    rt.ticks.frame(0.1)
    assert order() == [0, 1]
    assert t[2].is_expired and t[3].is_expired
    rt.gc.verify()


def test_registration_and_removal_during_a_tick(rt: zs.Runtime) -> None:
    t = tickers(5)
    ticks = [rt.ticks.register(x) for x in t[:4]]
    made: list[TickFunction] = []

    def change(me: Ticker) -> None:
        ticks[2].unregister()  # at once
        made.append(rt.ticks.register(t[4]))  # from the next frame (maybe 2's slot)
        assert rt.ticks.unregister_all(t[3]) == 1

    ACTIONS[0] = change
    stats = rt.ticks.frame(0.1)
    assert order() == [0, 1]
    assert stats.skipped == 2
    assert made[0].id != ticks[2].id and not ticks[2].registered
    rt.ticks.frame(0.1)
    assert order() == [0, 1, 4]

    def unregister_self(me: Ticker) -> None:
        ticks[0].unregister()

    ACTIONS[0] = unregister_self
    rt.ticks.frame(0.1)
    assert order() == [0, 1, 4]  # its own call had begun
    rt.ticks.frame(0.1)
    assert order() == [1, 4]


def test_a_frame_inside_a_tick_is_refused(rt: zs.Runtime) -> None:
    (ticker,) = tickers(1)
    rt.ticks.register(ticker)
    seen: list[BaseException] = []

    def nested(me: Ticker) -> None:
        try:
            rt.ticks.frame(0.1)
        except RuntimeError as error:
            seen.append(error)

    ACTIONS[0] = nested
    rt.ticks.frame(0.1)
    assert len(seen) == 1 and "running already" in str(seen[0])
    assert rt.ticks.frame(0.1).frame == 2


def test_a_tick_function_that_raises_reaches_the_caller_and_the_rest_tick(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    t = tickers(3)
    for ticker in t:
        rt.ticks.register(ticker)

    def boom(me: Ticker) -> None:
        raise KeyError("boom")

    ACTIONS[1] = boom
    with pytest.raises(zs.CallbackError, match=r"rt\.ticks\.frame\(\): .* raised KeyError") as e:
        rt.ticks.frame(0.1)
    assert isinstance(e.value.__cause__, KeyError) and str(e.value.__cause__) == "'boom'"
    assert order() == [0, 1, 2]  # the others ticked
    assert unraisable == []  # raised to the caller, not reported
    stats = rt.ticks.frame(0.1)  # the action ran once
    assert (stats.frame, stats.ticked, stats.failed) == (2, 3, 0)


def test_close_from_inside_a_tick(unraisable: list[Any]) -> None:
    runtime = zs.Runtime()
    with runtime.activate():
        t = tickers(3)
        ticking = [runtime.ticks.register(x) for x in t]

        def close(me: Ticker) -> None:
            runtime.close()

        ACTIONS[1] = close
        stats = runtime.ticks.frame(0.1)
    assert order() == [0, 1]  # the third is not called: its runtime is closed
    assert stats.ticked == 2
    assert runtime.closed and all(x.is_expired for x in t)
    assert not ticking[0].registered and ticking[0].unregister() is False
    with pytest.raises(zs.ExpiredConjugateError):
        runtime.ticks.frame(0.1)
    with pytest.raises(zs.ExpiredConjugateError):
        ticking[0].enabled = False
    assert unraisable == []


class Released:
    """Runs ``action`` when released."""

    def __init__(self, action: Any) -> None:
        self.action = action

    def __del__(self) -> None:
        self.action()


class Holder(zs.Object):
    """Python state released when close() expires the object."""

    held: Any = zs.state(default=None)


def test_the_tick_manager_refuses_once_close_has_begun() -> None:
    """Python code close() runs (a finaliser of state it releases) finds
    the tick manager refusing, as after the close: counting, registering
    or changing a tick function would read or change a heap close() is
    expiring and about to free."""
    runtime = zs.Runtime()
    outcomes: list[tuple[str, str]] = []

    def attempt(what: str, action: Any) -> None:
        try:
            action()
        except zs.ExpiredConjugateError:
            outcomes.append((what, "ExpiredConjugateError"))
        else:
            outcomes.append((what, "runs"))

    with runtime.activate():
        (ticker,) = tickers(1)
        ticking = runtime.ticks.register(ticker)

        def inside_close() -> None:
            assert runtime.lifecycle == "closing"
            attempt("count", lambda: len(runtime.ticks))
            attempt("interval", lambda: setattr(ticking, "interval", 0.5))
            attempt("enabled", lambda: setattr(ticking, "enabled", False))
            attempt("frame", lambda: runtime.ticks.frame(0.1))

        holder = Holder(held=Released(inside_close))
        holder.add_to_root()
        del holder
        assert len(runtime.ticks) == 1
        runtime.close()
    assert outcomes == [
        ("count", "ExpiredConjugateError"),
        ("interval", "ExpiredConjugateError"),
        ("enabled", "ExpiredConjugateError"),
        ("frame", "ExpiredConjugateError"),
    ]
    assert LOG == []  # no frame ran


def test_collect_ends_the_frame_with_gc_tick(rt: zs.Runtime) -> None:
    (keeper,) = tickers(1)
    rt.ticks.register(keeper)
    rt.gc.settings.time_between_collections = 0.2
    rt.gc.settings.objects_per_tick = 4
    doomed = [Ticker(ident=99) for _ in range(10)]
    for one in doomed:
        rt.ticks.register(one)
    del one
    results = []
    for _ in range(12):
        results.append(rt.ticks.frame(0.1, collect=True).gc)
    assert results[0] == "idle" and "started" in results and "finished" in results
    assert all(one.is_expired for one in doomed)
    assert len(rt.ticks) == 1


# ---------------------------------------------------------------------------
# hostile and wrong arguments
# ---------------------------------------------------------------------------


def test_wrong_arguments_are_refused_with_clear_errors(rt: zs.Runtime) -> None:
    (ticker,) = tickers(1)
    with pytest.raises(TypeError, match="zs.Object"):
        rt.ticks.register("actor")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rt.ticks.register(ticker, 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="method's name"):
        rt.ticks.register(ticker, "ti\0ck")
    with pytest.raises(ValueError, match="group must be one of"):
        rt.ticks.register(ticker, group="physics")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="group"):
        rt.ticks.register(ticker, group=0)  # type: ignore[arg-type]
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="interval"):
            rt.ticks.register(ticker, interval=bad)
    with pytest.raises(TypeError, match="interval"):
        rt.ticks.register(ticker, interval=True)
    with pytest.raises(ValueError, match="dt"):
        rt.ticks.frame(-0.1)
    with pytest.raises(TypeError, match="dt"):
        rt.ticks.frame("0.1")  # type: ignore[arg-type]
    dead = Ticker()
    dead.mark_as_garbage()
    with pytest.raises(zs.ExpiredConjugateError):
        rt.ticks.register(dead)
    with zs.Runtime() as other, pytest.raises(ValueError, match="another runtime"):
        rt.ticks.register(_made_in(other))
    assert len(rt.ticks) == 0


def _made_in(runtime: zs.Runtime) -> Ticker:
    with runtime.activate():
        return Ticker()


def test_hostile_conversions_that_close_or_collect(rt: zs.Runtime) -> None:
    t = tickers(2)
    ticking = rt.ticks.register(t[0])

    class Collecting(float):
        def __float__(self) -> float:  # never called: read as a float
            raise AssertionError("a float subclass is read as a float")

    class ClosingBool:
        def __bool__(self) -> bool:
            t[1].remove_from_root()
            rt.collect_garbage()
            return True

    class Name(str):
        def __eq__(self, other: object) -> bool:
            raise AssertionError("a str subclass is read as a str")

        __hash__ = str.__hash__

    ticking.interval = Collecting(0.25)
    assert ticking.interval == 0.25
    with pytest.raises(zs.ExpiredConjugateError):
        rt.ticks.register(t[1], Name("tick"), enabled=ClosingBool())  # type: ignore[arg-type]
    assert len(rt.ticks) == 1
    other = zs.Runtime()
    with other.activate():
        victim = Ticker()

    class Closing:
        def __bool__(self) -> bool:
            other.close()
            return False

    with pytest.raises(zs.ExpiredConjugateError):
        other.ticks.register(victim, enabled=Closing())  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# a native host's frame
# ---------------------------------------------------------------------------


def test_a_native_frame_collects_and_expires_python_proxies_first(rt: zs.Runtime) -> None:
    t = tickers(3)
    for ticker in t:
        rt.ticks.register(ticker)
    t[2].remove_from_root()
    held = t[2]
    settings = ffi.new("zs_frame_gc *")
    lib.zs_frame_gc_defaults(settings)
    settings.seconds_between_cycles = 0
    settings.objects_per_frame = 1
    stats = ffi.new("zs_frame_stats *")
    results = []
    for _ in range(8):
        assert lib.zs_tick_frame(runtime_ptr(rt), 0.1, settings, stats) == lib.ZS_OK
        results.append(stats.gc)
        if held.is_expired:
            break
    assert held.is_expired  # expired by the handler before its memory went
    assert lib.ZS_FRAME_GC_FINISHED in results
    assert [ident for ident, _ in LOG[:3]] == [0, 1, 2]
    rt.gc.verify()
    LOG.clear()
    rt.ticks.frame(0.1)
    assert order() == [0, 1]


def test_a_host_owned_runtime_with_python_detached_mid_frame(unraisable: list[Any]) -> None:
    native = ffi.new("zs_runtime **")
    assert lib.zs_runtime_new(ffi.NULL, native) == lib.ZS_OK
    address = int(ffi.cast("uintptr_t", native[0]))
    runtime = zs.Runtime.attach(address)
    with runtime.activate():
        t = tickers(3)
        for ticker in t:
            runtime.ticks.register(ticker)

        def let_go(me: Ticker) -> None:
            runtime.close()  # the host keeps the heap

        ACTIONS[0] = let_go
        stats = runtime.ticks.frame(0.1)
    assert order() == [0]
    # Python let go: the script's functions can be called no more
    assert (stats.ticked, stats.failed) == (1, 2)
    assert runtime.closed
    # The host goes on with its frames: the script's objects have no
    # handler now, and no native entry either
    out = ffi.new("zs_frame_stats *")
    assert lib.zs_tick_frame(native[0], 0.1, ffi.NULL, out) == lib.ZS_OK
    assert out.failed == 3 and out.first_failure == lib.ZS_E_INVALID
    assert lib.zs_tick_count(native[0]) == 3
    lib.zs_runtime_free(native[0])
    assert LOG == [] and unraisable == []
