"""Runtimes: isolation, closing, native memory, the current runtime,
options, and the disregard-for-GC start-up window."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import itertools
import subprocess
import sys
import textwrap
import threading
import tracemalloc
import weakref
from collections.abc import Callable

import pytest

import zsharp_py as zs
from classes import Actor, Hero, Item
from helpers import collect, runtime_ptr, warm_up
from zsharp_py._base import context
from zsharp_py._base.ffi import ffi, lib
from zsharp_py._types import object_pointers

# ---- isolation -----------------------------------------------------------------


def test_two_runtimes_are_isolated() -> None:
    with zs.Runtime() as rt1:
        a1 = Actor(health=1)
        a1.add_to_root()
        with zs.Runtime() as rt2:
            a2 = Actor(health=2)  # rt2 is current in the inner block
            extra = [Actor() for _ in range(4)]
            assert a1.runtime is rt1 and a2.runtime is rt2
            assert rt1.live_objects() == 1
            assert rt2.live_objects() == 5
            # Same first slot and serial in both heaps, yet two distinct objects.
            assert a1.handle == a2.handle
            assert a1 is not a2
            assert (a1.health, a2.health) == (1, 2)
            assert a1.name == a2.name == "Actor_0"
            # Collecting rt1 does not touch rt2's unrooted objects.
            stats = collect(rt1)
            assert stats.live_objects == 1
            assert not a2.is_expired and not any(o.is_expired for o in extra)
            assert rt2.live_objects() == 5
            # Objects created with an outer go to the outer's runtime.
            b1 = Actor(outer=a1)
            assert b1.runtime is rt1
            assert rt1.live_objects() == 2 and rt2.live_objects() == 5
            # Collecting rt2 frees only rt2's objects.
            a2.add_to_root()
            stats = collect(rt2)
            assert stats.objects_freed == 4
            assert all(o.is_expired for o in extra)
            assert not b1.is_expired and not a1.is_expired
            assert rt1.live_objects() == 2
        assert rt2.closed and a2.is_expired
        assert not a1.is_expired and a1.health == 1
        collect(rt1)
        assert b1.is_expired
        assert rt1.live_objects() == 1


def test_weak_pointer_into_one_runtime_is_unaffected_by_another(rt: zs.Runtime) -> None:
    a = Actor()
    a.add_to_root()
    w = zs.WeakObjectPtr(a)
    with zs.Runtime() as other:
        for _ in range(3):
            Actor()
        collect(other)
    assert w.get() is a


# ---- closing ---------------------------------------------------------------------


def test_closing_a_runtime_expires_every_conjugate_and_pointer() -> None:
    rt = zs.Runtime()
    with rt:
        rooted = Actor(name="Rooted")
        rooted.add_to_root()
        loose = Actor(name="Loose")
        inner = Hero(outer=rooted)
        inner.add_to_root()
        held = Item()
        strong = zs.StrongObjectPtr(held)
        weak = zs.WeakObjectPtr(rooted)
        rooted.target = loose
        collect(rt)
        assert not any(o.is_expired for o in (rooted, loose, inner, held))
    assert rt.closed
    for obj in (rooted, loose, inner, held):
        assert obj.is_expired
        with pytest.raises(zs.ExpiredConjugateError, match="closed"):
            obj.name
        with pytest.raises(zs.ExpiredConjugateError, match="closed"):
            obj.health if not isinstance(obj, Item) else obj.weight
    assert strong.is_expired
    with pytest.raises(zs.ExpiredConjugateError):
        strong.get()
    strong.dispose()  # harmless after close
    assert weak.get() is None and not weak.is_valid
    with pytest.raises(zs.ExpiredConjugateError):
        rt.live_objects()
    with pytest.raises(zs.ExpiredConjugateError):
        rt.collect_garbage()
    with pytest.raises(zs.ExpiredConjugateError):
        rt.gc.verify()
    with pytest.raises(zs.ExpiredConjugateError):
        rt.native_memory()
    with pytest.raises(zs.ExpiredConjugateError):
        Actor(outer=rooted)
    rt.close()  # closing twice does nothing
    assert "closed" in repr(rt)


def test_expired_objects_name_themselves_after_close_with_names_python_never_read() -> None:
    """An expired proxy formats its message when it is raised or shown,
    long after close() freed the native name table: close() keeps the text
    of every name first, an automatic one ("Actor_<n>", whose base Python
    never interned) and one a host interned (cffi, as C would) included."""
    with zs.Runtime() as rt:
        auto = Actor()
        native = runtime_ptr(rt)
        index, number = ffi.new("uint32_t *"), ffi.new("uint32_t *")
        assert lib.zs_name_intern(native, b"Rex_7", 5, index, number) == 0
        found, ref = ffi.new("zs_class **"), ffi.new("zs_ref *")
        assert lib.zs_find_class(native, b"Actor", found) == 0
        assert lib.zs_object_new(native, found[0], 0, index[0], number[0], ref, ffi.NULL) == 0
        named = rt.object_from_handle(ref[0])
    with pytest.raises(
        zs.ExpiredConjugateError, match=r"^Actor 'Actor_\d+' has expired: its runtime"
    ):
        auto.health
    assert repr(named) == "<Actor 'Rex_7' expired: its runtime was closed>"


def test_explicit_close_inside_the_with_block(rt: zs.Runtime) -> None:
    a = Actor()
    rt.close()
    assert rt.closed
    assert a.is_expired
    with pytest.raises(zs.ExpiredConjugateError, match="closed"):
        a.health = 1
    # The closed runtime is still the current one, never replaced silently:
    # nothing can be made in the block any more.
    with pytest.raises(zs.ExpiredConjugateError, match="never replaced"):
        zs.current_runtime()
    with pytest.raises(zs.ExpiredConjugateError, match="never replaced"):
        Actor()
    with pytest.raises(zs.ExpiredConjugateError, match="never replaced"):
        zs.Array[zs.Int32]([1])


def test_strong_pointer_finalised_after_its_runtime_closed_is_harmless() -> None:
    with zs.Runtime() as rt:
        p = zs.StrongObjectPtr(Actor())
    del p
    assert rt.closed


def _queued_release_bytes(snapshot: tracemalloc.Snapshot) -> int:
    """Bytes still allocated by StrongObjectPtr's module (its finaliser
    queues each release it cannot make on the spot)."""
    traces = snapshot.filter_traces([tracemalloc.Filter(True, object_pointers.__file__)])
    return sum(stat.size for stat in traces.statistics("filename"))


def test_a_closed_runtime_keeps_no_release_its_strong_pointers_queued() -> None:
    """Finalisers only queue a StrongObjectPtr's release (it may run on any
    thread, inside a collection); closing the runtime frees everything, so
    close() drops the queue, and a pointer finalised once its runtime is
    closing or closed queues nothing: a closed runtime (which expired
    proxies keep alive, for their messages) holds no memory for its
    pointers, whether they went before close() or after. (The queue, a
    deque, may keep a few spare blocks of storage: less than a byte for
    each of the pointers, where each queued release costs eight.)"""
    count = 20_000
    for before_close in (True, False):
        with zs.Runtime() as rt:
            target = Actor()
            target.add_to_root()
            pointers = [zs.StrongObjectPtr(target) for _ in range(count)]
            tracemalloc.start()
            try:
                if before_close:
                    del pointers  # queued: no safe point runs before close()
                rt.close()
                if not before_close:
                    del pointers
                kept = _queued_release_bytes(tracemalloc.take_snapshot())
            finally:
                tracemalloc.stop()
        assert rt.closed and target.is_expired
        assert kept < count, (before_close, kept)


def test_feature_state_is_closed_and_let_go_when_the_runtime_closes() -> None:
    """``rt.feature_state(key, make)``: made once per runtime and key; when
    the runtime closes, each state's close() runs once and the runtime lets
    go of it (a closed runtime, kept alive by expired proxies, holds none of
    the states of the features it served)."""

    class State:
        def __init__(self, closes: list[str], name: str) -> None:
            self.closes, self.name = closes, name

        def close(self) -> None:
            self.closes.append(self.name)

    closes: list[str] = []
    rt = zs.Runtime()
    first = rt.feature_state("first", lambda: State(closes, "first"))
    assert rt.feature_state("first", lambda: State(closes, "again")) is first
    second = rt.feature_state(State, lambda: State(closes, "second"))
    states = [weakref.ref(first), weakref.ref(second)]
    del first, second
    assert all(ref() is not None for ref in states)  # the runtime holds them
    with rt.activate():
        kept = Actor()
    rt.close()
    assert sorted(closes) == ["first", "second"]
    assert kept.is_expired and kept._rt is rt  # the closed runtime lives on
    assert [ref() for ref in states] == [None, None]
    rt.close()
    assert sorted(closes) == ["first", "second"]  # once


# ---- native memory -----------------------------------------------------------------


def test_native_blocks_return_to_the_baseline_after_objects_are_collected(rt: zs.Runtime) -> None:
    warm_up(rt)
    baseline = rt.native_memory()["live_blocks"]
    n = 200
    objects = [Actor() for _ in range(n)]
    grown = rt.native_memory()["live_blocks"]
    assert grown >= baseline + n  # at least one native block per object
    for first, second in itertools.pairwise(objects):
        first.target = second
    objects[0].add_to_root()
    collect(rt)
    assert rt.live_objects() == n
    objects[0].remove_from_root()
    stats = collect(rt)
    assert stats.objects_freed == n
    assert rt.live_objects() == 0
    assert rt.native_memory()["live_blocks"] == baseline


def test_a_thousand_linked_objects_leave_no_native_block_behind(rt: zs.Runtime) -> None:
    warm_up(rt)
    memory = rt.native_memory()
    baseline_blocks, baseline_bytes = memory["live_blocks"], memory["live_bytes"]
    heroes = [Hero(level=i) for i in range(1000)]
    for i, h in enumerate(heroes):
        h.target = heroes[(i * 7 + 1) % 1000]
        h.sidekick = heroes[(i * 13 + 5) % 1000]
        h.friend = heroes[(i + 500) % 1000]
    inner = [Item(outer=heroes[i]) for i in range(0, 1000, 10)]
    for h in heroes[::100]:
        h.add_to_root()
    keeper = zs.StrongObjectPtr(heroes[1])
    heroes[2].mark_as_garbage()
    collect(rt)
    assert not heroes[0].is_expired
    for h in heroes[::100]:
        h.remove_from_root()
    keeper.dispose()
    collect(rt)
    assert rt.live_objects() == 0
    assert all(o.is_expired for o in heroes + inner)
    memory = rt.native_memory()
    assert memory["live_blocks"] == baseline_blocks
    # What remains is the capacity of the collector's bookkeeping lists (free
    # slots, dying and expiring lists): a few bytes per object ever created,
    # far less than the objects themselves would take.
    assert memory["live_bytes"] - baseline_bytes <= 32 * (len(heroes) + len(inner))


# ---- current runtime ------------------------------------------------------------------


def test_current_runtime_is_the_with_runtime_inside_and_a_default_outside() -> None:
    outside = zs.current_runtime()
    assert isinstance(outside, zs.Runtime) and not outside.closed
    assert zs.current_runtime() is outside  # the default runtime is created once
    with zs.Runtime() as rt:
        assert zs.current_runtime() is rt
        a = Actor()
        assert a.runtime is rt
    assert zs.current_runtime() is outside
    b = Actor()
    assert b.runtime is outside
    assert not outside.closed


def test_nested_with_restores_the_outer_runtime() -> None:
    with zs.Runtime() as outer_rt:
        with zs.Runtime() as inner_rt:
            assert zs.current_runtime() is inner_rt
            with zs.Runtime() as innermost:
                assert zs.current_runtime() is innermost
            assert zs.current_runtime() is inner_rt
        assert inner_rt.closed
        assert zs.current_runtime() is outer_rt
        assert Actor().runtime is outer_rt
    assert outer_rt.closed


def _made_in(expected: zs.Runtime) -> None:
    """Make objects by the C path (no arguments, and keywords) and check
    each is in ``expected``, the runtime Python itself reads as current."""
    assert zs.current_runtime() is expected
    assert Actor().runtime is expected and Actor(health=2).runtime is expected


def test_creation_follows_the_current_runtime_across_contexts_threads_and_tasks() -> None:
    """The C creation path remembers the current runtime per thread context
    (zs_current_memo, native/binding/core.h): whatever enters or leaves a
    runtime, switches context, thread or task, each object is made in the
    runtime current where it is made."""
    first, second = zs.Runtime(), zs.Runtime()
    in_copy = second.activate()
    with first.activate():
        _made_in(first)
        with second.activate():
            _made_in(second)
        _made_in(first)
        copied = contextvars.copy_context()  # first is current in it
        with second.activate():
            copied.run(_made_in, first)  # another context, and back
            _made_in(second)
            copied.run(in_copy.__enter__)
            copied.run(_made_in, second)  # entered in that context: still there
            _made_in(second)
        _made_in(first)
        copied.run(in_copy.__exit__, None, None, None)
        copied.run(_made_in, first)
    first.close()
    second.close()

    runtimes = [zs.Runtime() for _ in range(2)]
    barrier = threading.Barrier(2)
    failures: list[BaseException] = []

    def in_thread(runtime: zs.Runtime) -> None:
        try:
            with runtime:
                for _ in range(200):
                    barrier.wait()  # the other thread made objects meanwhile
                    _made_in(runtime)
        except BaseException as error:  # reported below
            failures.append(error)
            barrier.abort()

    threads = [threading.Thread(target=in_thread, args=(r,)) for r in runtimes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []

    async def in_task(runtime: zs.Runtime) -> None:
        with runtime:
            for _ in range(50):
                await asyncio.sleep(0)  # the other task runs in between
                _made_in(runtime)

    async def both() -> None:
        await asyncio.gather(*(in_task(zs.Runtime()) for _ in range(2)))

    asyncio.run(both())


def test_creation_from_a_gc_callback_while_runtimes_are_entered_and_left() -> None:
    """The memo of the current runtime is forgotten after each set and reset
    with nothing allocated in between (zs_context_var_set, module.c): code
    the cycle collector runs while a runtime is entered or left, creating
    objects, makes them where Python reads the current runtime then."""
    wrong: list[tuple[object, object]] = []
    checked = 0

    def on_collection(phase: str, info: dict[str, int]) -> None:
        nonlocal checked
        current = context.current.get()
        # A runtime closing while still current is left out: the C path
        # then makes objects in the default runtime, Python's in the
        # closing one (a known difference, not the memo's).
        if phase == "start" and (current is None or not current._closing):
            made, expected = Actor(), zs.current_runtime()
            checked += 1
            if made.runtime is not expected:
                wrong.append((made.runtime, expected))

    thresholds = gc.get_threshold()
    gc.callbacks.append(on_collection)
    gc.set_threshold(1)  # a collection at almost every allocation
    try:
        for _ in range(30):
            with zs.Runtime() as outer:
                with zs.Runtime():
                    Actor()
                Actor()
                assert zs.current_runtime() is outer
    finally:
        gc.callbacks.remove(on_collection)
        gc.set_threshold(*thresholds)
    assert wrong == [] and checked > 100


# ---- options --------------------------------------------------------------------------


def test_max_objects_limits_live_objects_and_collection_frees_room() -> None:
    with zs.Runtime(max_objects=10) as rt:
        first = [Actor() for _ in range(10)]
        with pytest.raises(MemoryError):
            Actor()
        assert rt.live_objects() == 10
        first[0].add_to_root()
        stats = collect(rt)
        assert stats.objects_freed == 9
        second = [Actor(health=i) for i in range(9)]
        assert [o.health for o in second] == list(range(9))
        with pytest.raises(MemoryError):
            Item()
        assert rt.live_objects() == 10
        first[0].remove_from_root()
        collect(rt)
        assert rt.live_objects() == 0
        again = [Item() for _ in range(10)]
        assert rt.live_objects() == 10 and not any(o.is_expired for o in again)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"max_objects": 0}, ValueError),
        ({"max_objects": -1}, ValueError),
        ({"max_objects": 2**40}, ValueError),
        ({"max_objects": "x"}, TypeError),
        ({"max_objects": 10.0}, TypeError),
        ({"max_objects": True}, TypeError),
        ({"min_cluster_size": 0}, ValueError),
        ({"min_cluster_size": "x"}, TypeError),
    ],
)
def test_invalid_runtime_options_are_rejected(options: dict, error: type) -> None:
    with pytest.raises(error):
        zs.Runtime(**options)


@pytest.mark.parametrize("max_objects", [1, 33_554_432])
def test_max_objects_bounds_are_accepted(max_objects: int) -> None:
    with zs.Runtime(max_objects=max_objects) as rt:
        Actor()
        if max_objects == 1:
            with pytest.raises(MemoryError):
                Actor()
        else:
            Actor()
        collect(rt)
    with pytest.raises(ValueError):
        zs.Runtime(max_objects=33_554_433)


def test_positional_runtime_options_are_rejected() -> None:
    with pytest.raises(TypeError):
        zs.Runtime(True)  # type: ignore[misc]


# ---- disregard for GC -----------------------------------------------------------------


def test_objects_created_in_the_disregard_window_are_permanent() -> None:
    with zs.Runtime(disregard_for_gc=True) as rt:
        permanent = [Actor(health=i) for i in range(3)]
        rt.close_disregard_for_gc()
        normal = Actor()
        stats = collect(rt)
        assert stats.permanent_objects == 3
        assert normal.is_expired
        collect(rt)
        assert not any(p.is_expired for p in permanent)
        assert [p.health for p in permanent] == [0, 1, 2]
        assert rt.live_objects() == 3


def test_permanent_object_referencing_a_normal_object_keeps_it_alive() -> None:
    with zs.Runtime(disregard_for_gc=True) as rt:
        permanent = Actor()
        rt.close_disregard_for_gc()
        normal = Actor(health=9)
        permanent.target = normal
        collect(rt)
        collect(rt)
        assert not normal.is_expired and normal.health == 9
        assert permanent.target is normal
        permanent.target = None
        collect(rt)
        assert normal.is_expired
        assert not permanent.is_expired


def test_mark_as_garbage_on_a_permanent_object_raises_valueerror() -> None:
    with zs.Runtime(disregard_for_gc=True) as rt:
        permanent = Actor()
        rt.close_disregard_for_gc()
        with pytest.raises(ValueError):
            permanent.mark_as_garbage()
        collect(rt)
        assert not permanent.is_expired


def test_failed_constructor_in_the_disregard_window_leaves_no_object_behind() -> None:
    with zs.Runtime(disregard_for_gc=True) as rt:
        permanent = Actor()
        with pytest.raises(TypeError):
            Actor(health="x")
        rt.close_disregard_for_gc()
        collect(rt)
        # Only the object that was built completely may stay forever.
        assert rt.live_objects() == 1
        assert not permanent.is_expired


def test_closing_a_runtime_destroys_permanent_objects_too() -> None:
    with zs.Runtime(disregard_for_gc=True) as rt:
        permanent = Actor()
        rt.close_disregard_for_gc()
    assert permanent.is_expired


# ---- interpreter exit ------------------------------------------------------------


def test_runtimes_left_open_are_freed_at_interpreter_exit() -> None:
    """Regression (found by valgrind memcheck): a runtime still open at exit,
    the default one included, is closed by an atexit hook, but its native heap
    was leaked: weakref.finalize's own atexit hook ran first, after which
    calling the runtime's finalizer did nothing."""
    script = textwrap.dedent("""
        import zsharp_py as zs
        from zsharp_py._runtime import runtime as _runtime
        free_native = _runtime._free_native
        def recording(pointer):
            print("zs_runtime_free", flush=True)
            free_native(pointer)
        _runtime._free_native = recording
        explicit = zs.Runtime()
        default_runtime_value = zs.Array[zs.Int32]([1, 2, 3])
        print("exiting", flush=True)
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["exiting", "zs_runtime_free", "zs_runtime_free"]


# ---- a runtime Python collects unclosed ------------------------------------------


class _Finaliser:
    """Runs ``action`` when Python's cycle collector finalises it."""

    def __init__(self, action: Callable[[], None]) -> None:
        self.action = action

    def __del__(self) -> None:
        self.action()


def _collect_unclosed(action: Callable[[zs.Runtime], None]) -> None:
    """Drop a runtime unclosed, in one garbage cycle with a finaliser that
    runs ``action`` on it, and collect the cycle: weakref.finalize frees the
    heap first (Python clears weak references before it finalises), then
    the finaliser runs while the Runtime is still in memory."""

    def make() -> None:
        runtime = zs.Runtime()
        with runtime.activate():
            Actor()
        runtime._finaliser = _Finaliser(lambda: action(runtime))  # type: ignore[attr-defined]

    make()
    gc.collect()


def test_a_finaliser_using_a_runtime_python_collects_unclosed_finds_it_closed() -> None:
    """Regression: the finaliser's calls reached the freed heap (a collection
    waited forever on the freed heap's lock). Its heap freed, the runtime
    is closed: every call raises ExpiredConjugateError."""
    seen: list[object] = []

    def use(runtime: zs.Runtime) -> None:
        seen.append(runtime.closed)
        if not runtime.closed:
            return  # its heap is freed: the calls below would reach freed memory
        for call in (runtime.live_objects, runtime.collect_garbage, runtime.gc.verify):
            try:
                call()
                seen.append("ran")
            except zs.ExpiredConjugateError as error:
                seen.append(str(error))

    _collect_unclosed(use)
    assert seen == [True] + ["the runtime has been closed"] * 3


def test_a_runtime_made_while_python_collects_an_unclosed_one_expires_its_own() -> None:
    """Regression: the collected runtime stayed among the open runtimes,
    where the expiry handler finds a runtime by its heap's address, until
    its core was freed; a runtime made meanwhile (here by a finaliser of
    the same garbage) whose heap got the freed one's address (malloc gives
    it back at once) had its expiries sent to the collected core, and its
    proxies outlived their objects: reads of freed memory."""
    seen: dict[str, object] = {}

    def make_another(_collected: zs.Runtime) -> None:
        with zs.Runtime() as runtime:
            actors = [Actor() for _ in range(5)]
            collect(runtime)
            seen["expired"] = [actor.is_expired for actor in actors]
            seen["live"] = runtime.live_objects()

    _collect_unclosed(make_another)
    assert seen == {"expired": [True] * 5, "live": 0}
