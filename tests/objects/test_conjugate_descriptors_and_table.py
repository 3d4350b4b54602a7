"""The C hot path of object conjugates (zsharp_py._core, native/binding/):
descriptors applied to the wrong objects, conversions that run Python code
and expire the object meanwhile, the conjugate table under refcount drops
and slot reuse, creation racing close() on other threads, and the memory
shape of a conjugate."""

from __future__ import annotations

import gc
import math
import sys
import threading
from typing import Any

import pytest

import zsharp_py as zs
from classes import Actor, Hero, Item
from helpers import collect
from zsharp_py._base.expiry import ExpiredPointer
from zsharp_py.debug import GcStress

# ---- descriptors -------------------------------------------------------------


@pytest.mark.parametrize("name", ["health", "target"])
def test_a_descriptor_refuses_objects_of_another_class(rt: zs.Runtime, name: str) -> None:
    item, plain = Item(), object()
    Actor()  # descriptors are installed at a class's first use
    descriptor = Actor.__dict__[name]
    for other in (item, plain):
        with pytest.raises(TypeError, match=f"Actor.{name}.*does not apply"):
            descriptor.__get__(other, type(other))
        with pytest.raises(TypeError, match="does not apply"):
            descriptor.__set__(other, None if name == "target" else 1)
    assert item.weight == 1.5  # nothing written through the wrong layout


def test_descriptors_on_the_class_and_on_subclasses(rt: zs.Runtime) -> None:
    Actor()
    assert Actor.health is Actor.__dict__["health"]
    assert "Int32" in Actor.health.__doc__ and "Actor" in Actor.target.__doc__
    hero = Hero(level=3)
    hero.health, hero.target = 7, hero  # inherited descriptors take subclass instances
    assert (hero.health, hero.level, hero.target) == (7, 3, hero)


@pytest.mark.parametrize("name", ["health", "target"])
def test_properties_cannot_be_deleted(rt: zs.Runtime, name: str) -> None:
    actor = Actor()
    with pytest.raises(AttributeError, match=f"cannot delete property Actor.{name}"):
        delattr(actor, name)


@pytest.mark.parametrize(
    "name, value, stored",
    [
        ("health", -(2**31), -(2**31)),
        ("health", 2**31 - 1, 2**31 - 1),
        ("health", True, 1),
        ("i8", -128, -128),
        ("u8", 255, 255),
        ("i16", -(2**15), -(2**15)),
        ("u16", 65535, 65535),
        ("u32", 2**32 - 1, 2**32 - 1),
        ("i64", -(2**63), -(2**63)),
        ("u64", 2**64 - 1, 2**64 - 1),
        ("speed", 1, 1.0),
        ("speed", -0.5, -0.5),
        ("f32", 0.5, 0.5),
        ("alive", True, True),
        ("alive", 1, True),
        ("alive", 0, False),
    ],
)
def test_scalar_stores_convert_exactly(rt: zs.Runtime, name: str, value: Any, stored: Any) -> None:
    actor = Actor()
    setattr(actor, name, value)
    got = getattr(actor, name)
    assert got == stored and type(got) is type(stored)


@pytest.mark.parametrize(
    "name, value, error",
    [
        ("health", 2**31, OverflowError),
        ("i8", 128, OverflowError),
        ("u8", -1, OverflowError),
        ("u32", 2**32, OverflowError),
        ("i64", 2**63, OverflowError),
        ("u64", -1, OverflowError),
        ("u64", 2**64, OverflowError),
        ("health", 1.5, TypeError),
        ("health", "1", TypeError),
        ("speed", "1.0", TypeError),
        ("f32", 1e39, OverflowError),
        ("alive", 2, OverflowError),
        ("alive", None, TypeError),
    ],
)
def test_bad_scalar_stores_raise_and_change_nothing(
    rt: zs.Runtime, name: str, value: Any, error: type[Exception]
) -> None:
    actor = Actor()
    before = getattr(actor, name)
    with pytest.raises(error, match=f"^Actor.{name}: "):
        setattr(actor, name, value)
    assert getattr(actor, name) == before


def test_float32_keeps_infinities_and_nan(rt: zs.Runtime) -> None:
    actor = Actor()
    actor.f32 = math.inf
    assert actor.f32 == math.inf
    actor.f32 = math.nan
    assert math.isnan(actor.f32)


class _ExpiringIndex:
    """An int-like whose conversion drops the object's last root and collects
    it: by the time the store happens, the object is freed (and poisoned)."""

    def __init__(self, rt: zs.Runtime, victim: Actor) -> None:
        self.rt, self.victim = rt, victim

    def __index__(self) -> int:
        self.victim.remove_from_root()
        self.rt.collect_garbage()
        return 5

    def __float__(self) -> float:
        self.__index__()
        return 5.0


@pytest.mark.parametrize("name", ["health", "u64", "speed", "f32"])
def test_a_conversion_that_expires_the_object_never_writes_freed_memory(name: str) -> None:
    with zs.Runtime(stress=GcStress(poison_freed=True)) as rt:
        victim = Actor()
        victim.add_to_root()
        with pytest.raises(zs.ExpiredConjugateError, match="Actor 'Actor_0' has expired"):
            setattr(victim, name, _ExpiringIndex(rt, victim))
        assert victim.is_expired
        rt.gc.verify()


def test_expired_reads_and_writes_raise_with_the_reason(rt: zs.Runtime) -> None:
    actor, other = Actor(name="Bob"), Actor()
    other.add_to_root()
    actor.mark_as_garbage()
    collect(rt)
    for action in (
        lambda: actor.health,
        lambda: setattr(actor, "health", 1),
        lambda: actor.target,
        lambda: setattr(actor, "target", None),
        lambda: setattr(other, "target", actor),
        lambda: actor.name,
    ):
        with pytest.raises(
            zs.ExpiredConjugateError, match="Actor 'Bob' has expired: it was marked as garbage"
        ):
            action()
    assert type(actor._expired) is ExpiredPointer and actor._address == 0


# ---- reference stores ----------------------------------------------------------


def test_reference_stores_check_class_runtime_and_liveness(rt: zs.Runtime) -> None:
    actor = Actor()
    with pytest.raises(TypeError, match="expects an object of its declared class"):
        actor.target = Item()
    with pytest.raises(TypeError, match="not int"):
        actor.target = 3
    with zs.Runtime():
        stranger = Actor()
        with pytest.raises(ValueError, match="another runtime"):
            actor.target = stranger
    with pytest.raises(zs.ExpiredConjugateError):
        actor.target = stranger  # its runtime is closed: expired first
    assert actor.target is None


def test_a_store_into_an_object_of_a_closed_runtime_raises() -> None:
    with zs.Runtime() as rt:
        actor = Actor()
    with pytest.raises(zs.ExpiredConjugateError, match="runtime was closed"):
        actor.target = None
    assert rt.closed


# ---- the conjugate table -----------------------------------------------------------


def test_a_dropped_conjugate_leaves_the_table_and_the_object_lives_on(rt: zs.Runtime) -> None:
    holder = Actor()
    holder.add_to_root()
    holder.target = Actor(health=9)
    handle = holder.target.handle
    assert rt._conjugate_get(handle) is None  # the temporary conjugate was freed
    collect(rt)
    assert holder.target.health == 9 and rt._conjugate_get(handle) is holder.target


def test_a_slot_reused_by_a_new_object_never_finds_the_old_conjugate(rt: zs.Runtime) -> None:
    old = Actor(health=1)
    handle = old.handle
    collect(rt)
    assert old.is_expired
    new = Actor(health=2)
    assert new.handle & 0xFFFFFFFF == handle & 0xFFFFFFFF and new.handle != handle
    assert rt._conjugate_get(handle) is None and rt._conjugate_get(new.handle) is new
    assert old.is_expired and new.health == 2


def test_a_freed_conjugates_memory_serves_the_next_one_clean(rt: zs.Runtime) -> None:
    """A freed conjugate's memory waits in its runtime for the next
    conjugate, of any class (zs_runtime_core.spares, native/binding/core.h):
    each starts clean (live, no views, its own object) and each class keeps
    the count of references its instances hold."""
    Actor(health=0).mark_as_garbage(), Item(), Holder().where.x  # first uses: caches
    collect(rt)
    Holder()  # the class last made (the runtime remembers it) is the same at both counts
    counts = {cls: sys.getrefcount(cls) for cls in (Actor, Item, Holder)}
    expired = Actor(health=1)
    expired.mark_as_garbage()
    collect(rt)
    assert type(expired._expired) is ExpiredPointer
    del expired  # its block, sentinel released, is kept for the next
    mob = Holder()
    mob.where.x = 2.5  # a cached view in the conjugate's table
    del mob
    for size in range(1, 40):  # up to more at once than the runtime keeps
        batch = [Actor(health=i) if i % 3 else Item() if i % 2 else Holder() for i in range(size)]
        for i, made in enumerate(batch):
            assert type(made) is (Actor if i % 3 else Item if i % 2 else Holder)
            assert not made.is_expired and made._expired is None
            assert rt._conjugate_get(made.handle) is made
            if type(made) is Actor:
                assert made.health == i
            elif type(made) is Holder:
                assert made.where.x == 0.0
        del batch, made
    Holder()
    assert {cls: sys.getrefcount(cls) for cls in counts} == counts


def test_a_runtime_outlived_by_conjugates_frees_their_kept_memory() -> None:
    """The last conjugate of a closed runtime, freed after it, holds the
    runtime object: its memory goes to the runtime's kept blocks, then the
    runtime object, freed, frees them all."""
    runtime = zs.Runtime()
    with runtime:
        survivor = Actor(health=5)
        for _ in range(20):
            Actor()
            Item()
    runtime.close()
    del runtime
    gc.collect()
    assert survivor.is_expired
    del survivor  # the runtime object goes with it
    gc.collect()
    with zs.Runtime():
        assert Actor(health=3).health == 3 and Item().weight == 1.5


def test_conjugates_of_a_big_heap_grow_the_table_and_all_expire(rt: zs.Runtime) -> None:
    actors = [Actor(health=i % 1000) for i in range(5000)]
    assert all(rt._conjugate_get(a.handle) is a for a in actors[::97])
    stats = collect(rt)
    assert stats.conjugates_expired == 5000 and all(a.is_expired for a in actors)
    assert rt._live_conjugates() == []


def test_views_keep_their_owner_conjugate_until_it_expires(rt: zs.Runtime) -> None:
    mob = Holder()
    mob.add_to_root()
    view = mob.where
    handle = mob.handle
    del mob
    assert rt._conjugate_get(handle) is not None  # held by its view cache
    owner = rt._conjugate_get(handle)
    owner.remove_from_root()
    del owner
    collect(rt)
    assert view.is_expired


class Spot(zs.Struct):
    x: zs.Float64


class Holder(zs.Object):
    where: Spot


# ---- conjugate classes and instances --------------------------------------------------


@pytest.mark.parametrize("slots", [("x",), ("__weakref__",), ("__dict__",)])
def test_native_classes_cannot_have_python_instance_attributes(slots: tuple[str, ...]) -> None:
    with pytest.raises(TypeError, match="cannot have instance attributes"):
        type("Bad", (zs.Object,), {"__slots__": slots})


def test_conjugates_are_made_by_calling_the_class_only(rt: zs.Runtime) -> None:
    with pytest.raises(TypeError, match="made by calling the class"):
        Actor.__new__(Actor)
    with pytest.raises(TypeError):
        object.__new__(Actor)
    with pytest.raises(AttributeError):
        Actor()._h = 5  # read-only


def test_a_conjugate_is_small_and_not_tracked_by_the_cycle_collector(rt: zs.Runtime) -> None:
    actor = Actor()
    assert not gc.is_tracked(actor)
    assert sys.getsizeof(actor) == 48  # header, address, handle, runtime, views/sentinel
    assert actor._expired is None  # live: the slot holds its table of views
    actor.mark_as_garbage()
    collect(rt)
    assert type(actor._expired) is ExpiredPointer


def test_a_finaliser_added_to_a_class_later_still_runs(rt: zs.Runtime) -> None:
    """A class without Python state frees its conjugates with the
    conjugate's own dealloc (init_class): a ``__del__`` given to the class
    afterwards runs all the same, and may even keep the conjugate."""

    class Mortal(zs.Object):
        health: zs.Int32

    seen: list[int] = []
    kept: list[Any] = []
    Mortal(health=1)
    Mortal.__del__ = lambda self: seen.append(self.health)  # type: ignore[attr-defined]
    Mortal(health=2)
    assert seen == [2]
    Mortal.__del__ = lambda self: kept.append(self)  # type: ignore[attr-defined]
    Mortal(health=3)
    assert [m.health for m in kept] == [3]  # resurrected: a live conjugate still
    del Mortal.__del__
    kept.clear()
    Mortal(health=4)
    assert seen == [2]
    collect(rt)


def test_creation_takes_the_python_path_when_it_must(rt: zs.Runtime) -> None:
    Actor()  # registers Actor's creator: plain defaults only
    assert Actor in rt._fast_creators
    assert Hero not in rt._fast_creators or Hero() is not None
    rt._flush_pending = True
    Actor()  # the Python path flushes (a safe point) and clears the flag
    assert rt._flush_pending is False


# ---- threads ----------------------------------------------------------------------


def test_threads_creating_and_storing_while_another_closes_the_runtime() -> None:
    """The C paths never release the GIL and close() sets `closing` first:
    whatever the interleaving, a thread either completes its operation or
    gets a clear error, and nothing touches the freed heap."""
    for _ in range(20):
        rt = zs.Runtime(stress=GcStress(poison_freed=True))
        errors: list[BaseException] = []
        start = threading.Barrier(3)

        def worker() -> None:
            start.wait()
            try:
                with rt:
                    holder = Actor()
                    holder.add_to_root()
                    for i in range(2000):
                        holder.target = Actor()
                        holder.health = i
                        assert holder.target is not None and holder.health == i
            except (zs.ExpiredConjugateError, RuntimeError):
                pass  # closed under us: a clean error
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=worker) for _ in range(2)]
        for thread in threads:
            thread.start()
        start.wait()
        rt.close()
        for thread in threads:
            thread.join()
        assert errors == [] and rt.closed


def test_a_collection_re_entered_from_a_gc_callback_during_expiry_is_refused() -> None:
    """Expiry allocates (each conjugate's sentinel), so Python's cycle
    collector, its callbacks and finalisers can run in the middle of it. A
    collection started from there would purge objects whose conjugates the
    outer expiry has not reached yet, and the callback could then read freed
    memory through them. It is refused; every read sees live memory or an
    expired conjugate."""
    with zs.Runtime(stress=GcStress(poison_freed=True)) as rt:
        doomed = [Actor(health=7) for _ in range(3000)]
        seen: list[str] = []
        bad_reads: list[int] = []

        def reenter(phase: str, info: dict[str, Any]) -> None:
            # Only inside a collection: just before one starts, a nested one is fine.
            if phase != "start" or rt.closed or not rt._collecting:
                return
            try:
                rt.collect_garbage()
                seen.append("collected")
            except RuntimeError as error:
                seen.append(str(error))
            for actor in doomed[::50]:
                try:
                    health = actor.health
                except zs.ExpiredConjugateError:
                    continue
                if health != 7:  # freed (poisoned) memory read through a live conjugate
                    bad_reads.append(health)

        threshold = gc.get_threshold()
        gc.set_threshold(1)
        gc.callbacks.append(reenter)
        try:
            rt.collect_garbage()
            refused_during = len(seen)
            for run in (rt.collect_garbage, lambda: rt.gc.step(0.001)):
                doomed[:] = [Actor(health=7) for _ in range(300)]
                rt.gc.start_incremental() if run is not rt.collect_garbage else None
                while not run():
                    pass
        finally:
            gc.callbacks.remove(reenter)
            gc.set_threshold(*threshold)
        assert bad_reads == []
        assert refused_during > 0 and "collected" not in seen
        assert any("inside a collection" in entry for entry in seen), set(seen)
        assert all(actor.is_expired for actor in doomed)
        rt.gc.verify()


def test_close_re_entered_from_a_gc_callback_during_close_is_refused() -> None:
    """close() expires every conjugate (allocating) before it frees the heap:
    a nested close() or collection from a gc callback would free the heap, or
    objects, under it."""
    seen: list[str] = []
    rt = zs.Runtime()
    close = rt.close  # bound now: only close()'s own allocations run the callback
    armed = False
    with rt:
        actors = [Actor() for _ in range(2000)]

        def reenter(phase: str, info: dict[str, Any]) -> None:
            # Only once close() is under way (a callback may also run just
            # before it starts, at `with self._lock`: a nested close is fine there).
            if phase == "start" and armed and rt._closing:
                for attempt in (rt.close, rt.collect_garbage):
                    try:
                        attempt()
                        seen.append("ran")
                    except (RuntimeError, zs.ExpiredConjugateError) as error:
                        seen.append(str(error))

        threshold = gc.get_threshold()
        gc.set_threshold(1)
        gc.callbacks.append(reenter)
        try:
            armed = True
            close()
        finally:
            armed = False
            gc.callbacks.remove(reenter)
            gc.set_threshold(*threshold)
    assert rt.closed and all(actor.is_expired for actor in actors)
    assert any("inside a collection or close()" in entry for entry in seen)
    assert "ran" not in seen


# ---- constructor keywords in C -------------------------------------------------------


def test_keywords_name_and_outer_are_applied_by_the_c_path(rt: zs.Runtime) -> None:
    Actor()  # the class's first use goes through Python and registers its creator
    holder = Actor()
    holder.add_to_root()
    made = Actor(
        name="Bob",
        outer=holder,
        health=-5,
        speed=2.5,
        alive=True,
        u64=2**64 - 1,
        f32=0.25,
        target=holder,
        friend=None,
    )  # friend: a weak pointer (Python path)
    hero = Actor(health=7, target=None)
    assert (made.name, made.outer, made.health, made.speed, made.alive) == (
        "Bob",
        holder,
        -5,
        2.5,
        True,
    )
    assert (made.u64, made.f32, made.target, made.i8) == (2**64 - 1, 0.25, holder, 0)
    assert (hero.health, hero.target, hero.speed) == (7, None, 0.0)
    made.add_to_root()
    collect(rt)
    assert not made.is_expired and made.target is holder and made.outer is holder
    assert hero.is_expired


@pytest.mark.parametrize(
    "keywords, error, message",
    [
        ({"health": 2**31}, OverflowError, "Actor.health"),
        ({"health": 1.5}, TypeError, "Actor.health"),
        ({"nope": 1}, TypeError, "got an unknown property: nope"),
        ({"target": "x"}, TypeError, "Actor.target"),
        ({"name": 5}, TypeError, "name must be a str"),
        ({"name": "a\0b"}, ValueError, "invalid object name"),
        ({"outer": 3}, TypeError, "outer must be a zs.Object"),
    ],
)
def test_bad_keywords_raise_the_python_paths_errors_and_make_nothing(
    rt: zs.Runtime, keywords: dict[str, Any], error: type[Exception], message: str
) -> None:
    Actor()
    live = rt.live_objects()
    with pytest.raises(error, match=message):
        Actor(**keywords)
    assert rt.live_objects() == live


def test_keywords_naming_an_expired_or_foreign_object_raise(rt: zs.Runtime) -> None:
    Actor()
    anchor = Actor()
    anchor.add_to_root()
    gone = Actor()
    collect(rt)
    live = rt.live_objects()
    with pytest.raises(zs.ExpiredConjugateError):
        Actor(target=gone)
    with pytest.raises(zs.ExpiredConjugateError):
        Actor(outer=gone)
    with zs.Runtime():
        stranger = Actor()
        with pytest.raises(ValueError, match="another runtime"):
            Actor(outer=anchor, target=stranger)  # made in anchor's runtime
    assert rt.live_objects() == live


def test_which_constructions_take_the_c_path(rt: zs.Runtime) -> None:
    Actor()  # first use: Python
    anchor = Actor()
    calls: list[dict[str, Any]] = []
    python_path = rt._new_object

    def spy(cls: type, layout: Any, name: Any, outer: Any, properties: dict[str, Any]) -> Any:
        calls.append(dict(properties, name=name))
        return python_path(cls, layout, name, outer, properties)

    rt._new_object = spy  # type: ignore[method-assign]
    try:
        Actor(), Actor(name="A", outer=anchor, health=1, speed=1.0, target=anchor)
        befriended = Actor(friend=anchor)  # a value property (a weak pointer): staged in C
        assert calls == []
        assert befriended.friend.get() is anchor
        Actor(health=True)  # a bool for an Int32: converted in Python
        Actor(speed=1)  # an int for a Float64: likewise
    finally:
        del rt._new_object
    assert [call.get("health", call.get("speed")) for call in calls] == [True, 1]


def test_a_store_refused_mid_gather_never_links_the_doomed_object(rt: zs.Runtime) -> None:
    """Between incremental steps, after the mark but before the gather has
    reached it, an unmarked object is already refused as dying (linking it
    would resurrect it after its targets may have been gathered). Its
    conjugate expires when the gather reaches it, at the latest with the
    cycle; the store never happens."""
    holder = Actor()
    holder.add_to_root()
    doomed = Actor(health=3)  # never linked: unreachable at the next mark
    filler = [Actor() for _ in range(20_000)]  # a gather of many steps
    del filler
    rt.gc.start_incremental()
    while rt.gc.phase == "marking":
        rt.gc.step(1e-9)
    assert rt.gc.phase == "gathering" and not doomed.is_expired
    with pytest.raises(zs.ExpiredConjugateError, match="unreachable"):
        holder.target = doomed
    assert holder.target is None
    while not rt.gc.step(0.001):
        pass
    assert doomed.is_expired
    rt.gc.verify()


def test_a_descriptor_copied_onto_another_class_never_writes_through_it(rt: zs.Runtime) -> None:
    Actor()
    Item()
    stolen = Item.__dict__["weight"]

    class Thief(zs.Object):
        small: zs.Int8

    Thief.weight = stolen  # type: ignore[attr-defined]  # a plain class attribute
    Thief()
    with pytest.raises(TypeError):
        Thief(weight=2.0)  # not a property of Thief: refused before any write
    thief = Thief()
    with pytest.raises(TypeError, match="does not apply"):
        thief.weight = 2.0  # type: ignore[attr-defined]
    rt.gc.verify()
