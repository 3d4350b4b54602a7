"""Objects Python makes and drops without ever giving their handle out are
destroyed when their conjugate goes (native/src/objects.c, "Sharing";
docs/garbage-collector.md, "Objects freed at once"): a temporary costs no
collection. Every way of giving the handle out (a reference, a container, a
value, a delegate, a pointer, a root, a host function, the ``handle``
property, the heap's own lookups) keeps the object for the collector, which
is what these tests check first: an object freed while something still
names it would be a use after free."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import zsharp_py as zs
from classes import Actor
from helpers import collect
from zsharp_py import sample_engine
from zsharp_py.debug import GcStress


class Holder(zs.Object):
    """Everything that can hold an Actor."""

    target: Actor | None
    items: zs.Array[Actor]
    by_name: zs.Map[zs.Name, Actor]
    on_hit: zs.MulticastDelegate


class Pair(zs.Struct):
    first: Actor | None
    weight: zs.Float64


class Bag(zs.Object):
    """Owns native memory: a string and an array."""

    label: zs.String
    numbers: zs.Array[zs.Int32]
    count: zs.Int32 = 7


@pytest.fixture
def warm(rt: zs.Runtime) -> zs.Runtime:
    """``rt`` with Actor and Holder made once there: a class's first object
    is made by the Python constructor, every later one by the C path,
    whose objects start unshared."""
    Actor()
    Holder()
    collect(rt)
    assert rt.live_objects() == 0
    return rt


def made_and_dropped(count: int = 1) -> None:
    for _ in range(count):
        Actor()


def test_a_dropped_object_is_freed_by_the_next_creation(warm: zs.Runtime) -> None:
    Actor(health=1)
    assert warm.live_objects() == 1  # dropped, not freed yet: nothing ran since
    Actor(health=2)  # frees the first, then is dropped in turn
    assert warm.live_objects() == 1
    made_and_dropped(1000)
    assert warm.live_objects() == 1
    stats = collect(warm)  # takes the last one dropped before it marks
    assert stats.objects_freed_unshared == 1002  # since the previous cycle began
    assert stats.objects_freed == 0 and warm.live_objects() == 0
    assert collect(warm).objects_freed_unshared == 0


def test_a_creation_right_after_a_drop_takes_the_dropped_objects_place(
    warm: zs.Runtime,
) -> None:
    """``Bag()`` right after the one conjugate dropped since was the sole
    holder of a Bag destroys that object and makes the new one in its slot
    and memory in one step (renew_locked, native/src/objects.c). Nothing of the
    old object may show through: what it owned is freed, the new one has the
    class's defaults, and the old one's path names nothing."""
    Bag()
    collect(warm)
    first = Bag()
    soft = zs.SoftObjectPtr[Bag](first)  # its path, read without sharing it
    fresh = warm.native_memory()["live_bytes"]
    first.label = "x" * 1000
    first.numbers.extend(range(1000))
    first.count = 3
    assert warm.native_memory()["live_bytes"] > fresh
    del first
    second = Bag()
    assert (second.label, list(second.numbers), second.count) == ("", [], 7)
    assert warm.live_objects() == 1
    assert warm.native_memory()["live_bytes"] == fresh
    assert soft.get() is None
    assert zs.SoftObjectPtr[Bag](second).get() is second
    warm.gc.verify()
    del second
    stats = collect(warm)
    # The first freed at once; the second, found by its path, by the collector.
    assert (stats.objects_freed_unshared, stats.objects_freed) == (1, 1)
    assert warm.live_objects() == 0


def test_a_live_unshared_object_is_collected_as_usual(warm: zs.Runtime) -> None:
    kept = Actor(health=7)
    made_and_dropped(3)
    assert kept.health == 7 and not kept.is_expired
    collect(warm)
    assert kept.is_expired  # its conjugate never kept it: unreachable, collected


def test_named_objects_and_objects_in_an_outer_wait_for_the_collector(warm: zs.Runtime) -> None:
    outer = Holder()
    outer.add_to_root()
    Actor(name="Boss")
    Actor(outer=outer)
    made_and_dropped(2)
    found = zs.SoftObjectPtr[Actor]("Boss").get()  # findable by path until collected
    assert found is not None and found.name == "Boss"
    assert warm.live_objects() == 4  # outer, Boss, its inner, the last dropped
    del found
    collect(warm)
    assert warm.live_objects() == 1


# ---- every way of giving the handle out keeps the object ----------------------


def share_by_reference(holder: Any, obj: Any) -> Callable[[], Any]:
    holder.target = obj
    return lambda: holder.target


def share_by_keyword(holder: Any, obj: Any) -> Callable[[], Any]:
    made = Holder(target=obj)  # the C constructor stores the reference
    made.add_to_root()
    return lambda: made.target


def share_by_array(holder: Any, obj: Any) -> Callable[[], Any]:
    holder.items.append(obj)
    return lambda: holder.items[0]


def share_by_array_from_list(holder: Any, obj: Any) -> Callable[[], Any]:
    holder.items = [obj, obj]
    return lambda: holder.items[1]


def share_by_map(holder: Any, obj: Any) -> Callable[[], Any]:
    holder.by_name["it"] = obj
    return lambda: holder.by_name["it"]


def share_by_black_struct(holder: Any, obj: Any) -> Callable[[], Any]:
    pair = Pair(first=obj, weight=1.0)  # a black value: a root while it lives
    return lambda: pair.first


def share_by_strong_pointer(holder: Any, obj: Any) -> Callable[[], Any]:
    pointer = zs.StrongObjectPtr(obj)
    return pointer.get


def share_by_root(holder: Any, obj: Any) -> Callable[[], Any]:
    obj.add_to_root()
    weak = zs.WeakObjectPtr(obj)
    return weak.get


def share_as_outer(holder: Any, obj: Any) -> Callable[[], Any]:
    inner = Actor(outer=obj)  # the inner references its outer
    holder.target = inner
    return lambda: holder.target.outer


SHARING_AND_KEEPING = [
    share_by_reference,
    share_by_keyword,
    share_by_array,
    share_by_array_from_list,
    share_by_map,
    share_by_black_struct,
    share_by_strong_pointer,
    share_by_root,
    share_as_outer,
]


@pytest.mark.parametrize("share", SHARING_AND_KEEPING, ids=lambda f: f.__name__)
def test_a_shared_object_outlives_its_dropped_conjugate(
    warm: zs.Runtime, share: Callable[[Any, Any], Callable[[], Any]]
) -> None:
    holder = Holder()
    holder.add_to_root()
    obj = Actor(health=41)
    read_back = share(holder, obj)
    del obj  # the conjugate goes: the object is queued as dropped
    made_and_dropped(2)  # frees the dropped unshared objects
    for _ in range(2):
        found = read_back()
        assert found is not None and found.health == 41  # the same native object, intact
        found.health += 1
        found.health -= 1
        del found
        warm.gc.verify()
        collect(warm)  # kept by what shared it


def share_by_weak_pointer(obj: Any) -> Callable[[], Any]:
    return zs.WeakObjectPtr(obj).get


def share_by_handle(obj: Any) -> Callable[[], Any]:
    handle = obj.handle
    rt = zs.current_runtime()
    return lambda: rt._conjugate_of(handle)


def share_by_delegate(obj: Any) -> Callable[[], Any]:
    holder = Holder()
    holder.add_to_root()
    holder.on_hit.add(obj, "remove_from_root")  # a binding does not keep its object

    def bound() -> Any:
        bindings = holder.on_hit.to_python()
        return bindings[0][0] if bindings else None

    return bound


def share_by_path_lookup(obj: Any) -> Callable[[], Any]:
    soft = zs.SoftObjectPtr[Actor](obj)  # by path: not shared yet
    assert soft.get() is obj  # resolved by the heap's name lookup: shared by the heap
    return soft.get


@pytest.mark.parametrize(
    "share",
    [share_by_weak_pointer, share_by_handle, share_by_delegate, share_by_path_lookup],
    ids=lambda f: f.__name__,
)
def test_a_handle_given_out_keeps_the_object_for_the_collector(
    warm: zs.Runtime, share: Callable[[Any], Callable[[], Any]]
) -> None:
    obj = Actor(health=5)
    find = share(obj)
    del obj
    made_and_dropped(2)
    found = find()
    assert found is not None and found.health == 5
    del found
    collect(warm)  # nothing keeps it: the collector frees it, as before
    assert find() is None


def test_host_functions_share_their_object_and_arguments(rt: zs.Runtime) -> None:
    sample_engine.install()
    host_actor = zs.native_class("Actor")
    host_actor()
    collect(rt)
    target, instigator = host_actor(), host_actor()
    target.health = instigator.health = 50
    assert target.take_damage(10.0, instigator) == 40.0  # the host had both handles
    del target, instigator
    host_actor()  # a flush: neither may be freed at once
    assert rt.live_objects() == 3
    stats = collect(rt)  # the last one made was never shared
    assert stats.objects_freed == 2 and stats.objects_freed_unshared == 1


def test_dropping_objects_inside_a_conversion_hook(warm: zs.Runtime) -> None:
    """A hook run while a constructor converts its keywords drops the last
    conjugates of other objects (one shared by that constructor, one not):
    the creation frees only the unshared one."""
    alone = [Actor(health=1)]
    target = [Actor(health=2)]

    class Dropping:
        def __float__(self) -> float:
            alone.clear()
            target.clear()
            gc.collect()
            return 1.5

    holder = Holder(target=target[0])
    holder.add_to_root()
    actor = Actor(speed=Dropping())  # type: ignore[arg-type]
    assert actor.speed == 1.5 and not alone and not target
    made_and_dropped(1)  # the next creation frees the lone one, not the shared one
    assert holder.target is not None and holder.target.health == 2
    assert warm.live_objects() == 4  # holder, its target, actor, the one just dropped
    warm.gc.verify()


def test_conjugates_dropped_on_another_thread(warm: zs.Runtime) -> None:
    shared = Holder()
    shared.add_to_root()
    objects: list[Any] = [Actor(health=i) for i in range(100)]
    for obj in objects[::2]:
        shared.items.append(obj)

    def drop() -> None:
        objects.clear()

    thread = threading.Thread(target=drop)
    thread.start()
    thread.join()
    made_and_dropped(1)
    assert [a.health for a in shared.items] == list(range(0, 100, 2))
    assert warm.live_objects() == 1 + 50 + 1  # the holder, the shared half, the last dropped
    collect(warm)
    assert warm.live_objects() == 51


@pytest.fixture
def stressed() -> Iterator[zs.Runtime]:
    with zs.Runtime(stress=GcStress(poison_freed=True, check_marks=True)) as rt:
        yield rt


def test_freed_memory_is_poisoned_and_never_read(stressed: zs.Runtime) -> None:
    Actor()
    holder = Holder()
    holder.add_to_root()
    for i in range(200):
        obj = Actor(health=i)
        if i % 3 == 0:
            holder.items.append(obj)
        del obj
    assert [a.health for a in holder.items] == list(range(0, 200, 3))
    stressed.gc.verify()
    collect(stressed)
    assert [a.health for a in holder.items] == list(range(0, 200, 3))
