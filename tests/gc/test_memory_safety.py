"""Memory-bug catchers: use after free through every accessor, stores of
expired objects, half-built objects, threads racing the collector, and
strong pointers finalised on other threads or by Python's cycle collector."""

from __future__ import annotations

import contextvars
import gc
import itertools
import random
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

import zsharp_py as zs
from classes import Actor, Hero, Item
from helpers import class_ptr, collect, runtime_ptr
from zsharp_py import _core
from zsharp_py.debug import GcStress

# ---- use after free ------------------------------------------------------------

# Every way of touching an expired object; each must raise ExpiredConjugateError.
ACCESSORS: dict[str, Callable[[Any, Any], Any]] = {
    "get scalar": lambda o, other: o.health,
    "get float": lambda o, other: o.speed,
    "get bool": lambda o, other: o.alive,
    "get uint64": lambda o, other: o.u64,
    "set scalar": lambda o, other: setattr(o, "health", 1),
    "set float": lambda o, other: setattr(o, "f32", 1.0),
    "set bool": lambda o, other: setattr(o, "alive", True),
    "get reference": lambda o, other: o.target,
    "set reference": lambda o, other: setattr(o, "target", other),
    "set reference to None": lambda o, other: setattr(o, "target", None),
    "get weak": lambda o, other: o.friend,
    "set weak": lambda o, other: setattr(o, "friend", other),
    "set weak to None": lambda o, other: setattr(o, "friend", None),
    "get subclass reference": lambda o, other: o.sidekick,
    "set subclass scalar": lambda o, other: setattr(o, "level", 3),
    "name": lambda o, other: o.name,
    "outer": lambda o, other: o.outer,
    "add_to_root": lambda o, other: o.add_to_root(),
    "remove_from_root": lambda o, other: o.remove_from_root(),
    "mark_as_garbage": lambda o, other: o.mark_as_garbage(),
    "is_rooted": lambda o, other: o.is_rooted,
    "is_garbage": lambda o, other: o.is_garbage,
    "WeakObjectPtr()": lambda o, other: zs.WeakObjectPtr(o),
    "StrongObjectPtr()": lambda o, other: zs.StrongObjectPtr(o),
    "as outer": lambda o, other: Actor(outer=o),
}


def _expire_by(how: str, rt: zs.Runtime) -> tuple[Hero, Actor]:
    """A Hero expired by ``how`` (its outer and references were set), and a live Actor."""
    parent = Actor()
    parent.add_to_root()
    live = Actor()
    live.add_to_root()
    victim = Hero(outer=parent, target=live, sidekick=live, friend=live, health=5)
    if how == "garbage":
        victim.add_to_root()
        victim.remove_from_root()
        victim.mark_as_garbage()
        parent.target = victim  # referenced, still dies
    if how == "closed":
        rt.close()
    else:
        collect(rt)
    assert victim.is_expired
    return victim, live


@pytest.mark.parametrize("how", ["unreachable", "garbage", "closed"])
@pytest.mark.parametrize("accessor", list(ACCESSORS), ids=list(ACCESSORS))
def test_every_accessor_of_an_expired_object_raises(
    rt: zs.Runtime, how: str, accessor: str
) -> None:
    victim, live = _expire_by(how, rt)
    with pytest.raises(zs.ExpiredConjugateError):
        ACCESSORS[accessor](victim, live)
    assert victim.is_expired
    if not rt.closed:
        # Nothing reached the heap: the live object is intact.
        assert live.health == 100 and not live.is_expired
        assert rt.live_objects() == 2
        collect(rt)
        assert rt.live_objects() == 2


@pytest.mark.parametrize("how", ["unreachable", "garbage", "closed"])
def test_is_expired_and_repr_never_raise(rt: zs.Runtime, how: str) -> None:
    victim, _ = _expire_by(how, rt)
    assert victim.is_expired is True
    text = repr(victim)
    assert "Hero" in text and "expired" in text
    # Identity-level attributes do not touch native memory and stay readable.
    assert victim.is_black is False
    assert isinstance(victim.handle, int)
    assert type(victim) is Hero


def test_repeated_access_to_an_expired_object_keeps_raising(rt: zs.Runtime) -> None:
    a = Actor()
    collect(rt)
    for _ in range(100):
        with pytest.raises(zs.ExpiredConjugateError):
            a.health
    new = [Actor(health=i) for i in range(10)]  # reuse the freed slot
    with pytest.raises(zs.ExpiredConjugateError):
        a.health = 123
    assert [o.health for o in new] == list(range(10))


def test_storing_an_expired_object_raises_and_keeps_the_old_value(rt: zs.Runtime) -> None:
    holder = Hero()
    holder.add_to_root()
    old = Actor(health=1)
    holder.target = old
    holder.sidekick = old
    holder.friend = old
    dead = Actor()
    collect(rt)
    assert dead.is_expired
    for field in ("target", "sidekick", "friend"):
        with pytest.raises(zs.ExpiredConjugateError):
            setattr(holder, field, dead)
    assert holder.target is old and holder.sidekick is old
    assert holder.friend.get() is old
    with pytest.raises(zs.ExpiredConjugateError):
        Actor(target=dead)
    collect(rt)
    assert not old.is_expired and old.health == 1


def test_object_whose_object_was_reused_by_a_new_one_stays_expired(rt: zs.Runtime) -> None:
    holder = Actor()
    holder.add_to_root()
    old = Actor()
    old_index = old.handle & 0xFFFFFFFF
    collect(rt)
    new = Actor(health=55)
    assert new.handle & 0xFFFFFFFF == old_index
    with pytest.raises(zs.ExpiredConjugateError):
        holder.target = old
    holder.target = new
    assert holder.target is new and holder.target is not old
    assert old.is_expired and not new.is_expired


class _Collecting:
    """A number whose conversion runs Python code that collects garbage: by
    the time the setter could write, the (unrooted) holder is destroyed."""

    def __init__(self, rt: zs.Runtime) -> None:
        self.rt = rt

    def __index__(self) -> int:
        self.rt.collect_garbage()
        return 1

    def __float__(self) -> float:
        self.rt.collect_garbage()
        return 1.0


class _Int(int):
    """An int subclass whose __index__ would collect, if anything called it."""

    def __index__(self) -> int:
        raise AssertionError("an int subclass is converted by value, in C")


@pytest.mark.parametrize("field", ["health", "u64", "i8", "speed", "f32", "alive"])
def test_a_conversion_that_destroys_the_holder_never_writes_to_it(
    rt: zs.Runtime, field: str
) -> None:
    holder = Actor(name="victim")  # a conjugate only: not a root
    with pytest.raises(zs.ExpiredConjugateError, match="victim"):
        setattr(holder, field, _Collecting(rt))
    assert holder.is_expired
    kept = Actor(name="kept")
    kept.add_to_root()
    setattr(kept, field, _Collecting(rt))  # survives the collection: stored after it
    assert getattr(kept, field) == 1


def test_int_subclasses_are_stored_by_value_without_running_python_code(rt: zs.Runtime) -> None:
    holder = Actor()
    holder.health = _Int(5)
    holder.u8 = _Int(255)
    assert (holder.health, holder.u8) == (5, 255)
    with pytest.raises(OverflowError, match=r"Actor\.u8"):
        holder.u8 = _Int(256)
    assert holder.u8 == 255


def test_reference_reads_go_through_the_mapping_and_never_see_a_stale_slot(rt: zs.Runtime) -> None:
    holder = Actor()
    holder.add_to_root()
    target = Actor(health=1)
    holder.target = target
    handle = target.handle
    del target
    gc.collect()
    # The conjugate nobody held is gone; the read makes a new one of the same object.
    assert rt._conjugate_get(handle) is None
    assert holder.target.handle == handle and holder.target.health == 1
    holder.target = None
    assert holder.target is None
    collect(rt)  # the old target dies; its slot is free for reuse
    assert rt._conjugate_get(handle) is None
    assert rt._conjugate_of(handle) is None  # stale: resolves nothing
    assert rt._conjugate_of(0) is None
    reused = Actor(health=2)
    assert reused.handle & 0xFFFFFFFF == handle & 0xFFFFFFFF and reused.handle != handle
    assert rt._conjugate_of(handle) is None and rt._conjugate_of(reused.handle) is reused
    assert rt._conjugate_get(handle) is None and rt._conjugate_get(reused.handle) is reused
    holder.target = reused
    assert holder.target is reused


def _native_object_into(rt: zs.Runtime, holder: Any, field: str) -> int:
    """Create an object from native code (as a host would: no conjugate) of
    the holder's class and store it into ``holder.field``, Python's cycle
    collector paused in between (cffi's calls allocate: a callback that
    collects could take it first); return its handle."""
    from zsharp_py._base.ffi import ffi, lib
    from zsharp_py._model.object import class_layout

    offset = next(p.offset for p in class_layout(type(holder)).properties if p.name == field)
    native_class, out = class_ptr(rt, type(holder)), ffi.new("zs_ref *")
    pointer, holder_handle = runtime_ptr(rt), holder.handle
    collecting = gc.isenabled()
    gc.disable()
    try:
        assert lib.zs_object_new(pointer, native_class, 0, lib.ZS_NAME_AUTO, 0, out, ffi.NULL) == 0
        assert lib.zs_store_ref(pointer, holder_handle, offset, out[0]) == 0
    finally:
        if collecting:
            gc.enable()
    assert rt._conjugate_get(out[0]) is None
    return int(out[0])


def test_a_reference_to_an_object_without_a_conjugate_gets_one(rt: zs.Runtime) -> None:
    holder = Actor()
    holder.add_to_root()
    handle = _native_object_into(rt, holder, "target")
    adopted = holder.target  # adopted on the mapping miss
    assert type(adopted) is Actor and adopted.handle == handle
    assert holder.target is adopted and rt._conjugate_get(handle) is adopted
    adopted.health = 3
    holder.target = None
    collect(rt)
    assert adopted.is_expired  # the adopted conjugate expires like any other


def test_cycle_collector_callbacks_that_collect_while_objects_are_created_and_adopted(
    rt: zs.Runtime,
) -> None:
    """Python's cycle collector may run at any allocation, with callbacks and
    finalisers that call back into the runtime: here, one that collects
    garbage at (almost) every allocation, including those made while
    creating or adopting a conjugate."""
    stress_rt = zs.Runtime(stress=GcStress(poison_freed=True))
    log: list[str] = []

    def collect_too(phase: str, info: dict) -> None:
        if phase == "start" and not stress_rt.closed:
            try:
                stress_rt.collect_garbage()
                log.append("collected")
            except RuntimeError as error:
                log.append(str(error))

    threshold = gc.get_threshold()
    with stress_rt:
        holder = Actor(health=7)
        holder.add_to_root()
        made: list[Actor] = []
        gc.set_threshold(1)
        gc.callbacks.append(collect_too)
        try:
            for i in range(300):
                made.append(Actor(health=i) if i % 2 else Actor())  # image only / keywords
                try:
                    holder.target = made[-1]
                except zs.ExpiredConjugateError:  # collected before it was linked: legal
                    assert made[-1].is_expired
                if i % 3 == 0:  # an object from native code, adopted on the read
                    _native_object_into(stress_rt, holder, "target")
                    assert holder.target.health == 100  # the class's default, made natively too
        finally:
            gc.callbacks.remove(collect_too)
            gc.set_threshold(*threshold)
        # No conjugate ever points at freed (poisoned) memory.
        for i, actor in enumerate(made):
            assert actor.is_expired or actor.health == (i if i % 2 else 100)
        stress_rt.gc.verify()
    assert log.count("collected") > 100


def test_collections_and_close_refuse_to_run_inside_an_adoption(rt: zs.Runtime) -> None:
    # As seen by a finaliser or signal handler on the adopting thread.
    rt._life_enter(_core.LIFE_ADOPT, "an adoption")
    try:
        for run in (rt.collect_garbage, lambda: rt.gc.step(0.001), rt.close):
            with pytest.raises(RuntimeError, match="being created or adopted"):
                run()
    finally:
        rt._life_leave(_core.LIFE_ADOPT)
    assert not rt.closed and rt._adopting == 0
    collect(rt)


# ---- half-built objects -------------------------------------------------------------


@pytest.mark.parametrize(
    ("keywords", "error"),
    [
        ({"health": "x"}, TypeError),
        ({"speed": "fast"}, TypeError),
        ({"u8": 256}, OverflowError),
        ({"target": 5}, TypeError),
        ({"health": 3, "target": "nope"}, TypeError),
    ],
)
def test_failed_constructor_leaves_an_object_collected_at_the_next_collection(
    rt: zs.Runtime, keywords: dict, error: type
) -> None:
    keep = Actor()
    keep.add_to_root()
    before = rt.live_objects()
    with pytest.raises(error):
        Actor(**keywords)
    collect(rt)
    assert rt.live_objects() == before


def test_failed_constructor_with_outer_and_reference_does_not_disturb_them(rt: zs.Runtime) -> None:
    parent = Actor()
    parent.add_to_root()
    other = Actor(health=8)
    parent.target = other
    before = rt.live_objects()
    with pytest.raises(TypeError):
        Actor(outer=parent, target=other, speed="x")
    # Keywords are validated before allocation: nothing was created.
    assert rt.live_objects() == before
    stats = collect(rt)
    assert stats.objects_freed == 0
    assert stats.references_killed == 0
    assert parent.target is other and other.health == 8
    assert rt.live_objects() == 2


class Emitter(zs.Object):
    """Owns a multicast delegate (fault tests)."""

    on_hit: zs.MulticastDelegate


def test_listener_raising_mid_incremental_cycle_leaves_the_heap_consistent() -> None:
    """A delegate listener that rewires the graph and then raises, between two
    one-object slices of an incremental mark, loses no live object (the write
    barrier saw its store) and the objects it dropped die in the next cycle."""
    with zs.Runtime(stress=GcStress(objects_per_step=1, check_marks=True)) as rt:
        root = Actor()
        root.add_to_root()
        e = Emitter()
        e.add_to_root()
        chain = [Actor(health=i) for i in range(200)]
        root.target = chain[0]
        for a, b in itertools.pairwise(chain):
            a.target = b
        dropped = Actor()
        chain[-1].target = dropped

        def relink_and_fail(*args: Any) -> None:
            # Hide the tail behind the already-scanned root, cut the chain
            # ahead of the mark front, then fail.
            root.target = chain[-1]
            chain[-1].target = None
            chain[100].target = None
            raise RuntimeError("listener failed mid-cycle")

        e.on_hit.add(relink_and_fail)
        rt.gc.start_incremental()
        for _ in range(5):  # the roots and the head of the chain are scanned
            assert not rt.gc.step(1.0)
        with pytest.raises(RuntimeError, match="mid-cycle"):
            e.on_hit.broadcast()
        while not rt.gc.step(1.0):
            pass
        rt.gc.verify()
        assert not chain[-1].is_expired and chain[-1].health == 199
        assert root.target is chain[-1]
        collect(rt)
        assert dropped.is_expired and all(a.is_expired for a in chain[:-1])
        assert chain[-1].health == 199


# ---- threads ----------------------------------------------------------------------


def _chain_values(head: Actor) -> list[tuple[int, float]]:
    values, walk = [], head.target
    while walk is not None:
        values.append((walk.health, walk.speed))
        walk = walk.target
    return values


@pytest.mark.parametrize("driver", ["full", "incremental"])
def test_threads_building_chains_while_the_main_thread_collects(
    rt: zs.Runtime, driver: str
) -> None:
    """Four threads grow and cut chains while the main thread runs full
    collections, or incremental cycles in short slices (so the workers' stores
    go through the write barrier mid-mark); nothing live is lost.

    The test counts work, not time: it runs until the main thread finished
    ``least_collections`` cycles and every thread made ``least_appended``
    links, so a slow build (the sanitizers) or a busy machine makes it
    longer, not weaker. The cap (a hundred times the cycles wanted) only
    stops a run that starves one side for good."""
    thread_count, least_collections, least_appended = 4, 300, 10_000
    cap_collections = 100 * least_collections
    heads = [Actor(name=f"Head{t}") for t in range(thread_count)]
    for head in heads:
        head.add_to_root()
    chains: list[list[Actor]] = [[] for _ in range(thread_count)]
    models: list[list[tuple[int, float]]] = [[] for _ in range(thread_count)]
    errors: list[BaseException] = []
    retries = [0] * thread_count
    refused: list[list[Actor]] = [[] for _ in range(thread_count)]
    appended = [0] * thread_count
    stop = threading.Event()

    def worker(t: int) -> None:
        rng = random.Random(t)
        head, nodes, model = heads[t], chains[t], models[t]
        counter = 0
        try:
            while not stop.is_set():
                if len(nodes) < 40 and rng.random() < 0.75:
                    counter += 1
                    value = (t * 1_000_000 + counter, counter / 4)
                    holder = nodes[-1] if nodes else head
                    node = Actor(health=value[0], speed=value[1])
                    try:
                        holder.target = node
                    except zs.ExpiredConjugateError:
                        # A cycle started between creating and linking: the
                        # new object was unreachable, so it dies (its
                        # conjugate expires once the gather reaches it).
                        refused[t].append(node)
                        retries[t] += 1
                        continue
                    nodes.append(node)
                    model.append(value)
                    appended[t] += 1
                elif nodes:
                    cut = rng.randrange(len(nodes))
                    (nodes[cut - 1] if cut else head).target = None
                    del nodes[cut:]
                    del model[cut:]
                assert _chain_values(head) == model
                assert not any(n.is_expired for n in nodes)
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [
        threading.Thread(target=contextvars.copy_context().run, args=(worker, t))
        for t in range(thread_count)
    ]
    # The workers' creations and stores are C calls that keep the GIL, so
    # the main thread, whose every native call releases it (cffi), would get
    # it back only once per switch interval per worker: hand it over more
    # often, or a second of stepping completes only a cycle or two.
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    for thread in threads:
        thread.start()
    collections = 0

    def enough() -> bool:
        return collections >= cap_collections or (
            collections >= least_collections and min(appended) >= least_appended
        )

    try:
        while not errors and not enough():
            if driver == "full":
                collect(rt)
                collections += 1
                continue
            if rt.gc.phase == "idle":
                rt.gc.start_incremental()
            if rt.gc.step(budget_s=0.0002):
                rt.gc.verify()
                collections += 1
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
        sys.setswitchinterval(switch_interval)
    assert not any(thread.is_alive() for thread in threads)
    assert not errors, errors
    assert collections >= least_collections
    assert min(appended) >= least_appended, appended  # every thread made progress
    collect(rt)  # finishes a pending cycle: what was born during it survives it
    collect(rt)  # a whole cycle
    assert all(node.is_expired for nodes in refused for node in nodes)
    for t in range(thread_count):
        assert _chain_values(heads[t]) == models[t]
        walk, expected = heads[t].target, chains[t]
        for node in expected:
            assert walk is node and not node.is_expired
            walk = walk.target
        assert walk is None
    assert rt.live_objects() == thread_count + sum(len(c) for c in chains)


def test_threads_reading_rooted_objects_while_the_main_thread_collects(rt: zs.Runtime) -> None:
    """Three threads read rooted objects (and make garbage for the
    collector) while the main thread collects: every read sees the values
    written. The test counts work, not time: it runs until every reader has
    read every object ``least_rounds`` times and ``least_collections``
    collections ran while all of them were reading, however slow or busy
    the machine (a window of wall time could check almost nothing under
    load). The cap only stops a run in which a reader never gets going."""
    least_rounds, least_collections, cap = 2000, 1000, 1_000_000
    roots = [Hero(level=i, health=i) for i in range(8)]
    for r in roots:
        r.add_to_root()
        r.sidekick = Actor(u8=r.level)
        r.target = Actor(speed=float(r.level))
    errors: list[BaseException] = []
    stop = threading.Event()
    rounds = [0, 0, 0]

    def reader(index: int) -> None:
        try:
            while not stop.is_set():
                for r in roots:
                    assert r.health == r.level
                    assert r.target.speed == float(r.level)
                    assert r.sidekick.u8 == r.level
                    Item()  # garbage for the collector (the copied context makes rt current)
                rounds[index] += 1
        except BaseException as error:
            errors.append(error)

    threads = [
        threading.Thread(target=contextvars.copy_context().run, args=(reader, index))
        for index in range(len(rounds))
    ]
    for thread in threads:
        thread.start()
    collections = overlapped = 0
    try:
        while not errors and collections < cap:
            if overlapped >= least_collections and min(rounds) >= least_rounds:
                break
            reading = min(rounds) > 0  # every reader is inside its loop
            collect(rt)
            collections += 1
            overlapped += reading
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    assert not any(thread.is_alive() for thread in threads)
    assert not errors, errors
    assert min(rounds) >= least_rounds, (rounds, collections)
    assert overlapped >= least_collections, (overlapped, collections)
    collect(rt)
    assert rt.live_objects() == 8 * 3


def test_strong_pointer_dropped_on_another_thread_is_released_at_next_collection(
    rt: zs.Runtime,
) -> None:
    a = Actor()
    box = [zs.StrongObjectPtr(a)]
    collect(rt)
    assert not a.is_expired
    finaliser_thread: list[int] = []

    def drop() -> None:
        finaliser_thread.append(threading.get_ident())
        box.clear()  # the last reference: the finaliser runs on this thread

    thread = threading.Thread(target=drop)
    thread.start()
    thread.join()
    assert box == [] and finaliser_thread[0] != threading.get_ident()
    assert not a.is_expired  # only queued so far
    collect(rt)
    assert a.is_expired
    assert rt.live_objects() == 0


def test_strong_pointer_finalised_by_the_python_cycle_collector(rt: zs.Runtime) -> None:
    a = Actor()

    class Cycle:
        pass

    cycle = Cycle()
    cycle.self = cycle  # type: ignore[attr-defined]
    cycle.pointer = zs.StrongObjectPtr(a)  # type: ignore[attr-defined]
    del cycle
    collect(rt)
    assert not a.is_expired  # the cycle has not been collected by Python yet
    gc.collect()
    collect(rt)
    assert a.is_expired


def test_many_strong_pointers_finalised_on_threads_are_all_released(rt: zs.Runtime) -> None:
    objects = [Actor() for _ in range(200)]
    pointers = [zs.StrongObjectPtr(o) for o in objects]
    collect(rt)
    assert not any(o.is_expired for o in objects)
    chunks = [pointers[i::4] for i in range(4)]
    del pointers
    threads = [threading.Thread(target=chunk.clear) for chunk in chunks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    collect(rt)
    assert all(o.is_expired for o in objects)
    assert rt.live_objects() == 0
