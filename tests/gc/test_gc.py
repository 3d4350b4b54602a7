"""The precise tracing GC seen from Python: what survives, what dies, how
conjugates expire, weak and strong pointers, statistics, and a model-based
property test of reachability."""

from __future__ import annotations

import copy
import dataclasses
import sys
from collections import deque

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zsharp_py as zs
from classes import Actor, Hero, Item
from helpers import collect, finish_cycle, runtime_ptr
from zsharp_py._base.ffi import ffi, lib

INDEX_MASK = 0xFFFFFFFF


# ---- reachability ----------------------------------------------------------


def test_unrooted_object_is_collected_and_its_conjugate_expires(rt: zs.Runtime) -> None:
    a = Actor(name="Lonely", health=3)
    assert not a.is_expired
    stats = collect(rt)
    assert a.is_expired
    assert stats.objects_freed == 1
    assert rt.live_objects() == 0
    with pytest.raises(zs.ExpiredConjugateError) as info:
        a.health
    message = str(info.value)
    assert "Actor" in message and "Lonely" in message and "unreachable" in message


def test_stats_have_every_field_of_the_native_figures(rt: zs.Runtime) -> None:
    stats = collect(rt)
    assert set(vars(stats)) == {field.name for field in dataclasses.fields(zs.collector.GcStats)}
    assert stats == rt.gc.stats() and hash(stats) == hash(rt.gc.stats())
    assert stats.cycle == 1 and stats.mark_steps == 1 and stats.mark_seconds > 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.cycle = 2  # type: ignore[misc]


def test_stats_fields_have_their_types_and_agree_with_the_heap(rt: zs.Runtime) -> None:
    """collect_garbage() builds its GcStats in C (native/binding/collection.c):
    counts are ints, the ``*_seconds`` fields floats converted from the
    heap's nanoseconds, and ``conjugates_expired`` the cycle's count."""
    keep = Actor()
    keep.add_to_root()
    doomed = [Actor() for _ in range(3)]
    stats = collect(rt)
    for field in dataclasses.fields(zs.collector.GcStats):
        value = getattr(stats, field.name)
        expected = float if field.name.endswith("_seconds") else int
        assert type(value) is expected, (field.name, value)
    assert stats.live_objects == rt.live_objects() == 1
    assert stats.conjugates_expired == len(doomed) == stats.objects_freed
    assert all(o.is_expired for o in doomed)
    assert 0 < stats.mark_seconds < 60 and stats.purge_seconds >= 0


def test_a_finalisers_queued_release_is_flushed_by_the_next_collection(rt: zs.Runtime) -> None:
    """A StrongObjectPtr finalised only queues its native release (a finaliser
    may run inside a collection); the next full collection releases it first,
    so its object dies in that same collection."""
    a = Actor()
    pointer = zs.StrongObjectPtr(a)
    collect(rt)
    assert not a.is_expired
    del pointer  # queued, not released yet
    stats = collect(rt)
    assert a.is_expired
    assert stats.objects_freed == 1 and rt.live_objects() == 0


@pytest.mark.parametrize("entry", ["collect", "start_incremental", "step"])
def test_every_collection_entry_point_carries_out_queued_releases(
    rt: zs.Runtime, entry: str
) -> None:
    """Each way into the collector is a safe point that carries out the
    strong-reference releases finalisers queued: the native strong count
    (``zs_strong_ref_count``, read by a host through zsharp.h) drops when a
    ``gc.step()`` runs, even with no cycle pending, not
    only at the next full collection."""
    a = Actor()
    a.add_to_root()  # alive either way: only the count is watched
    out = ffi.new("uint32_t *")

    def strong_count() -> int:
        assert lib.zs_strong_ref_count(runtime_ptr(rt), a.handle, out) == lib.ZS_OK
        return int(out[0])

    pointers = [zs.StrongObjectPtr(a) for _ in range(3)]
    assert strong_count() == 3
    del pointers  # finalised: the releases are queued, not carried out
    assert strong_count() == 3
    run = {
        "collect": rt.collect_garbage,
        "start_incremental": rt.gc.start_incremental,
        "step": lambda: rt.gc.step(max_objects=1),
    }[entry]
    run()
    assert strong_count() == 0
    finish_cycle(rt)
    assert not a.is_expired and strong_count() == 0


def test_a_malformed_stats_layout_is_refused_before_anything_is_collected(
    rt: zs.Runtime,
) -> None:
    """The C collection checks its GcStats layout first: a bad one raises
    TypeError with the heap untouched, not after a collection ran."""
    a = Actor()
    for layout in [None, (zs.collector.GcStats,), (zs.collector.GcStats, ("cycle",)), (1, ())]:
        with pytest.raises(TypeError, match="GcStats layout"):
            rt._collect_full(layout)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="GcStats layout"):
            rt._gc_stats(layout)  # type: ignore[arg-type]
    assert not a.is_expired and rt.live_objects() == 1
    collect(rt)
    assert a.is_expired


def test_expired_error_is_a_reference_error(rt: zs.Runtime) -> None:
    a = Actor()
    collect(rt)
    with pytest.raises(ReferenceError):
        a.name


def test_rooted_object_survives_collections(rt: zs.Runtime) -> None:
    a = Actor(health=11)
    a.add_to_root()
    assert a.is_rooted
    for _ in range(3):
        collect(rt)
    assert not a.is_expired
    assert a.health == 11
    assert rt.live_objects() == 1


def test_object_removed_from_root_is_collected(rt: zs.Runtime) -> None:
    a = Actor()
    a.add_to_root()
    collect(rt)
    a.remove_from_root()
    assert not a.is_rooted
    assert not a.is_expired  # nothing happens before the next collection
    collect(rt)
    assert a.is_expired


def test_strong_pointer_keeps_object_alive_until_disposed(rt: zs.Runtime) -> None:
    a = Actor(health=5)
    p = zs.StrongObjectPtr(a)
    assert p.is_black is True and p.is_expired is False
    collect(rt)
    collect(rt)
    assert not a.is_expired
    assert p.get() is a
    p.dispose()
    assert p.is_expired
    with pytest.raises(zs.ExpiredConjugateError):
        p.get()
    p.dispose()  # a second dispose does nothing
    collect(rt)
    assert a.is_expired


def test_strong_pointer_as_context_manager_releases_at_block_end(rt: zs.Runtime) -> None:
    a = Actor()
    with zs.StrongObjectPtr(a) as p:
        collect(rt)
        assert not a.is_expired
        assert p.get() is a
    assert p.is_expired
    collect(rt)
    assert a.is_expired


def test_strong_pointers_count_references(rt: zs.Runtime) -> None:
    a = Actor()
    p1, p2 = zs.StrongObjectPtr(a), zs.StrongObjectPtr(a)
    p1.dispose()
    collect(rt)
    assert not a.is_expired
    p2.dispose()
    collect(rt)
    assert a.is_expired


def test_dropped_strong_pointer_is_released_by_its_finaliser(rt: zs.Runtime) -> None:
    a = Actor()
    p = zs.StrongObjectPtr(a)
    collect(rt)
    assert not a.is_expired
    del p
    collect(rt)
    assert a.is_expired


def test_copying_a_strong_pointer_never_drops_a_reference_it_does_not_own(rt: zs.Runtime) -> None:
    a = Actor()
    original = zs.StrongObjectPtr(a)
    keeper = zs.StrongObjectPtr(a)
    try:
        duplicate = copy.copy(original)  # refusing (TypeError) is fine too
    except TypeError:
        duplicate = None
    if duplicate is not None:
        duplicate.dispose()
    original.dispose()
    collect(rt)
    # keeper was never disposed, so its object must still be alive.
    assert not keeper.is_expired
    assert not a.is_expired
    assert keeper.get().health == 100


def test_pointer_wrappers_reject_non_objects(rt: zs.Runtime) -> None:
    with pytest.raises(TypeError):
        zs.StrongObjectPtr(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        zs.StrongObjectPtr(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        zs.WeakObjectPtr("x")  # type: ignore[arg-type]
    assert zs.WeakObjectPtr(None).get() is None
    assert zs.WeakObjectPtr().get() is None


def test_object_referenced_from_a_root_survives(rt: zs.Runtime) -> None:
    root = Actor()
    root.add_to_root()
    root.target = Actor(health=77)
    child = root.target
    collect(rt)
    assert not child.is_expired
    assert root.target is child and child.health == 77


def test_chain_of_100_from_a_root_survives_and_cutting_it_frees_the_tail(rt: zs.Runtime) -> None:
    root = Actor()
    root.add_to_root()
    nodes = [root]
    for i in range(100):
        node = Actor(health=i)
        nodes[-1].target = node
        nodes.append(node)
    collect(rt)
    assert not any(n.is_expired for n in nodes)
    walk, values = root.target, []
    while walk is not None:
        values.append(walk.health)
        walk = walk.target
    assert values == list(range(100))
    nodes[50].target = None  # keeps nodes[0..50]
    stats = collect(rt)
    assert stats.objects_freed == 50
    assert not any(n.is_expired for n in nodes[:51])
    assert all(n.is_expired for n in nodes[51:])


def test_references_declared_at_every_level_of_a_class_hierarchy_are_traced(rt: zs.Runtime) -> None:
    class Minion(Hero):  # no fields of its own
        pass

    class SuperHero(Minion):
        rival: "Actor | None"
        weak_rival: zs.WeakObjectPtr["Actor"]

    s = SuperHero()
    s.add_to_root()
    by_target, by_sidekick, by_rival, weakly = Actor(), Actor(), Actor(), Actor()
    s.target, s.sidekick, s.rival, s.weak_rival = by_target, by_sidekick, by_rival, weakly
    collect(rt)
    assert not by_target.is_expired and not by_sidekick.is_expired and not by_rival.is_expired
    assert weakly.is_expired and s.weak_rival.get() is None
    assert (s.level, s.health) == (1, 100)
    m = Minion(target=by_rival)
    m.add_to_root()
    s.target = s.sidekick = s.rival = None
    collect(rt)
    assert by_target.is_expired and by_sidekick.is_expired
    assert not by_rival.is_expired and m.target is by_rival


def test_class_with_many_references_traces_all_of_them(rt: zs.Runtime) -> None:
    annotations = {f"r{i}": "Wide | None" for i in range(40)}
    annotations.update({f"s{i}": zs.Int8 for i in range(40)})
    Wide = type("Wide", (zs.Object,), {"__annotations__": annotations})
    holder = Wide()
    holder.add_to_root()
    targets = [Wide() for _ in range(40)]
    for i, t in enumerate(targets):
        setattr(holder, f"r{i}", t)
        setattr(holder, f"s{i}", i - 20)
    collect(rt)
    assert not any(t.is_expired for t in targets)
    assert [getattr(holder, f"s{i}") for i in range(40)] == [i - 20 for i in range(40)]
    for i in range(0, 40, 2):
        setattr(holder, f"r{i}", None)
    collect(rt)
    assert [t.is_expired for t in targets] == [i % 2 == 0 for i in range(40)]


def test_unreachable_two_cycle_is_collected(rt: zs.Runtime) -> None:
    a, b = Actor(), Actor()
    a.target, b.target = b, a
    stats = collect(rt)
    assert a.is_expired and b.is_expired
    assert stats.objects_freed == 2


def test_unreachable_three_cycle_with_a_self_loop_is_collected(rt: zs.Runtime) -> None:
    a, b, c = Hero(), Hero(), Hero()
    a.target, b.target, c.target = b, c, a
    b.sidekick = b
    keep = Actor()
    keep.add_to_root()
    stats = collect(rt)
    assert a.is_expired and b.is_expired and c.is_expired
    assert stats.objects_freed == 3
    assert not keep.is_expired


def test_cycle_reachable_from_a_root_survives(rt: zs.Runtime) -> None:
    a, b = Actor(), Actor()
    a.target, b.target = b, a
    root = Hero(sidekick=a)
    root.add_to_root()
    collect(rt)
    assert not a.is_expired and not b.is_expired
    root.sidekick = None
    collect(rt)
    assert a.is_expired and b.is_expired


# ---- mark_as_garbage and outers -------------------------------------------


def test_marked_garbage_dies_even_when_referenced_and_the_reference_reads_none(
    rt: zs.Runtime,
) -> None:
    holder = Actor()
    holder.add_to_root()
    victim = Actor(name="Victim")
    holder.target = victim
    victim.mark_as_garbage()
    assert victim.is_garbage
    assert holder.target is victim  # nothing changes before the collection
    stats = collect(rt)
    assert victim.is_expired
    assert holder.target is None
    assert stats.references_killed == 1
    with pytest.raises(zs.ExpiredConjugateError, match="marked as garbage") as info:
        victim.name
    assert "Victim" in str(info.value)


def test_marked_garbage_referenced_by_several_holders_nulls_every_reference(rt: zs.Runtime) -> None:
    holders = [Hero() for _ in range(3)]
    victim = Actor()
    for h in holders:
        h.add_to_root()
        h.target = victim
        h.sidekick = victim
    victim.mark_as_garbage()
    stats = collect(rt)
    assert victim.is_expired
    assert stats.references_killed == 6
    assert all(h.target is None and h.sidekick is None for h in holders)


def test_marked_garbage_that_is_an_outer_of_a_live_object_survives(rt: zs.Runtime) -> None:
    x = Actor(name="X")
    inner = Actor(outer=x)
    inner.add_to_root()
    x.mark_as_garbage()
    collect(rt)
    assert not x.is_expired
    assert inner.outer is x
    assert x.name == "X"


def test_outer_keeps_its_outer_alive(rt: zs.Runtime) -> None:
    grand = Actor()
    parent = Actor(outer=grand)
    inner = Actor(outer=parent)
    inner.add_to_root()
    collect(rt)
    assert not parent.is_expired and not grand.is_expired
    assert inner.outer is parent and parent.outer is grand
    inner.remove_from_root()
    collect(rt)
    assert inner.is_expired and parent.is_expired and grand.is_expired


def test_deep_outer_chain_is_kept_by_its_innermost_object(rt: zs.Runtime) -> None:
    chain = [Item()]
    for _ in range(5000):
        chain.append(Item(outer=chain[-1]))
    chain[-1].add_to_root()
    stats = collect(rt)
    assert stats.objects_marked == len(chain)
    assert not any(o.is_expired for o in chain)
    chain[-1].remove_from_root()
    assert collect(rt).objects_freed == len(chain)


def test_outer_does_not_keep_its_inner_objects_alive(rt: zs.Runtime) -> None:
    outer = Actor()
    outer.add_to_root()
    inner = Actor(outer=outer)
    collect(rt)
    assert inner.is_expired
    assert not outer.is_expired


def test_rooted_garbage_survives_but_references_to_it_are_nulled(rt: zs.Runtime) -> None:
    g = Actor()
    g.add_to_root()
    holder = Actor(target=g)
    holder.add_to_root()
    g.mark_as_garbage()
    collect(rt)
    assert not g.is_expired
    assert holder.target is None


# ---- weak pointers -----------------------------------------------------------


def test_weak_pointer_does_not_keep_alive_and_reads_none_after_collection(rt: zs.Runtime) -> None:
    a = Actor()
    w = zs.WeakObjectPtr(a)
    assert w.get() is a and w.is_valid
    collect(rt)
    assert a.is_expired
    assert w.get() is None
    assert not w.is_valid


def test_weak_property_does_not_keep_alive_and_reads_none_after_collection(rt: zs.Runtime) -> None:
    holder = Actor()
    holder.add_to_root()
    friend = Actor()
    holder.friend = friend
    assert holder.friend.get() is friend
    collect(rt)
    assert friend.is_expired
    assert holder.friend.get() is None


def test_weak_property_accepts_a_weak_pointer(rt: zs.Runtime) -> None:
    holder, other = Actor(), Actor()
    holder.add_to_root()
    other.add_to_root()
    holder.friend = zs.WeakObjectPtr(other)
    assert holder.friend.get() is other
    holder.friend = None
    assert holder.friend.get() is None


def test_weak_pointer_to_live_object_keeps_resolving(rt: zs.Runtime) -> None:
    a = Actor()
    a.add_to_root()
    w = zs.WeakObjectPtr(a)
    collect(rt)
    assert w.get() is a


def test_stale_weak_pointer_never_resolves_to_the_object_reusing_its_slot(rt: zs.Runtime) -> None:
    holder = Actor()
    holder.add_to_root()
    x = Actor()
    old_handle = x.handle
    old_index = x.handle & INDEX_MASK
    weak = zs.WeakObjectPtr(x)
    holder.friend = x
    collect(rt)
    assert x.is_expired
    new = Actor(name="Newcomer")
    new.add_to_root()
    assert new.handle & INDEX_MASK == old_index  # the slot was reused...
    assert new.handle != old_handle  # ...with a new serial
    assert weak.get() is None
    assert holder.friend.get() is None
    collect(rt)
    assert weak.get() is None
    assert holder.friend.get() is None


def test_weak_pointers_compare_by_object_identity(rt: zs.Runtime) -> None:
    holder, a, b = Actor(), Actor(), Actor()
    holder.add_to_root()
    holder.friend = a
    assert zs.WeakObjectPtr(a) == zs.WeakObjectPtr(a) == holder.friend
    assert hash(zs.WeakObjectPtr(a)) == hash(holder.friend)
    assert zs.WeakObjectPtr(a) != zs.WeakObjectPtr(b)
    old = zs.WeakObjectPtr(a)
    collect(rt)
    new = Actor()
    new.add_to_root()
    assert old != zs.WeakObjectPtr(new)  # same slot, different serial


def test_stale_handles_across_many_slot_reuses_stay_dead(rt: zs.Runtime) -> None:
    weaks, handles = [], set()
    for _ in range(20):
        x = Actor()
        handles.add(x.handle)
        weaks.append(zs.WeakObjectPtr(x))
        collect(rt)
    survivor = Actor()
    survivor.add_to_root()
    assert len({h & INDEX_MASK for h in handles}) == 1  # one slot...
    assert len(handles) == 20  # ...20 distinct serials
    assert all(w.get() is None for w in weaks)


# ---- statistics --------------------------------------------------------------


def test_gc_stats_on_a_known_graph(rt: zs.Runtime) -> None:
    # root -> a -> b survive; root.sidekick -> g (garbage) -> e; c -> d unreachable.
    root = Hero()
    root.add_to_root()
    a, b, c, d, g, e = (Actor() for _ in range(6))
    root.target = a
    a.target = b
    c.target = d
    root.sidekick = g
    g.target = e
    g.mark_as_garbage()
    conjugates = [a, b, c, d, g, e]
    before = rt.gc.stats().cycle
    stats = collect(rt)
    assert stats.cycle == before + 1
    assert stats.objects_marked == 3
    assert stats.objects_unreachable == 4
    assert stats.objects_freed == 4
    assert stats.references_killed == 1
    assert stats.live_objects == 3 == rt.live_objects()
    assert stats.conjugates_expired == 4
    assert stats.roots == 1
    assert stats.permanent_objects == 0
    assert [o.is_expired for o in conjugates] == [False, False, True, True, True, True]
    assert rt.gc.stats() == stats
    again = collect(rt)
    assert (
        again.objects_freed,
        again.objects_unreachable,
        again.references_killed,
        again.conjugates_expired,
        again.objects_marked,
    ) == (0, 0, 0, 0, 3)


def test_ten_thousand_conjugates_all_expire_in_one_collection(rt: zs.Runtime) -> None:
    keep = Actor()
    keep.add_to_root()
    k = 10_000
    doomed = [Actor() for _ in range(k)]
    for first, second in zip(doomed[::2], doomed[1::2], strict=True):
        first.target = second
    stats = collect(rt)
    assert stats.conjugates_expired == k
    assert stats.objects_freed == k
    assert all(o.is_expired for o in doomed)
    assert rt.live_objects() == 1


def test_classes_without_references_are_collected_too(rt: zs.Runtime) -> None:
    items = [Item(weight=float(i)) for i in range(10)]
    items[3].add_to_root()
    collect(rt)
    assert [i.is_expired for i in items] == [n != 3 for n in range(10)]
    assert items[3].weight == 3.0


# ---- model-based property test -----------------------------------------------


@st.composite
def graphs(draw: st.DrawFn) -> dict[str, list]:
    """A random small object graph: outers (to earlier objects), two
    killable references per object, roots, strong pointers, garbage marks."""
    n = draw(st.integers(1, 12))
    maybe = st.one_of(st.none(), st.integers(0, n - 1))
    outers = [draw(st.one_of(st.none(), st.integers(0, i - 1))) if i else None for i in range(n)]
    return {
        "outer": outers,
        "target": [draw(maybe) for _ in range(n)],
        "sidekick": [draw(maybe) for _ in range(n)],
        "rooted": [draw(st.booleans()) for _ in range(n)],
        "strong": [draw(st.integers(0, 2)) for _ in range(n)],
        "garbage": [draw(st.booleans()) for _ in range(n)],
    }


def reachable(graph: dict[str, list]) -> set[int]:
    """Reachability model: roots and strong pointers are marked even when
    garbage; outers are immutable references (followed even to garbage);
    killable references to garbage objects are not followed."""
    n = len(graph["outer"])
    seen = {i for i in range(n) if graph["rooted"][i] or graph["strong"][i]}
    work = deque(seen)
    while work:
        i = work.popleft()
        nexts = [graph["outer"][i]]
        nexts += [
            t
            for t in (graph["target"][i], graph["sidekick"][i])
            if t is not None and not graph["garbage"][t]
        ]
        for t in nexts:
            if t is not None and t not in seen:
                seen.add(t)
                work.append(t)
    return seen


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(graphs())
def test_survivors_match_the_reachability_model(graph: dict[str, list]) -> None:
    n = len(graph["outer"])
    with zs.Runtime() as rt:
        objects: list[Hero] = []
        for i in range(n):
            outer = graph["outer"][i]
            objects.append(Hero(level=i, outer=objects[outer] if outer is not None else None))
        pointers = []
        for i, obj in enumerate(objects):
            if graph["target"][i] is not None:
                obj.target = objects[graph["target"][i]]
            if graph["sidekick"][i] is not None:
                obj.sidekick = objects[graph["sidekick"][i]]
            if graph["rooted"][i]:
                obj.add_to_root()
            pointers += [zs.StrongObjectPtr(obj) for _ in range(graph["strong"][i])]
            if graph["garbage"][i]:
                obj.mark_as_garbage()
        alive = reachable(graph)
        stats = collect(rt)
        assert {i for i, o in enumerate(objects) if not o.is_expired} == alive
        assert rt.live_objects() == len(alive) == stats.live_objects
        assert stats.objects_freed == n - len(alive)
        killed = 0
        for i in sorted(alive):
            obj = objects[i]
            assert obj.level == i
            outer = graph["outer"][i]
            assert obj.outer is (objects[outer] if outer is not None else None)
            for field in ("target", "sidekick"):
                t = graph[field][i]
                if t is None:
                    assert getattr(obj, field) is None
                elif graph["garbage"][t]:
                    killed += 1
                    assert getattr(obj, field) is None
                else:
                    assert getattr(obj, field) is objects[t]
        assert stats.references_killed == killed
        # A second collection with nothing changed frees nothing.
        assert collect(rt).objects_freed == 0
        for p in pointers:
            p.dispose()
        for o in objects:
            if not o.is_expired:
                o.remove_from_root()
        collect(rt)
        assert rt.live_objects() == 0


class Labelled(zs.Struct):
    """A struct that owns native storage through its string."""

    text: zs.String


class Owner(zs.Object):
    """One member of each kind that owns native storage once filled."""

    label: zs.String
    tags: zs.Set[zs.Name]
    scores: zs.Map[zs.Name, zs.Int32]
    floats: zs.Array[zs.Float64]
    maybe: zs.Optional[zs.String]
    on_hit: zs.Delegate
    on_event: zs.MulticastDelegate
    badge: Labelled


def _listener() -> None:
    """What the delegates of ``Owner`` are bound to."""


_FILL = {
    "label": lambda o: setattr(o, "label", "x" * 40),
    "tags": lambda o: o.tags.add("T1"),
    "tags emptied": lambda o: (o.tags.add("T1"), o.tags.clear()),
    "scores": lambda o: o.scores.__setitem__("k", 1),
    "floats": lambda o: o.floats.extend([1.0, 2.0]),
    "maybe": lambda o: setattr(o, "maybe", "text"),
    "on_hit": lambda o: o.on_hit.bind(_listener),
    "on_event": lambda o: o.on_event.add(_listener),
    "badge": lambda o: setattr(o.badge, "text", "y" * 40),
}


@pytest.mark.parametrize("members", [(), *[(name,) for name in _FILL], tuple(_FILL)])
def test_destroying_an_object_frees_what_each_member_owns(
    rt: zs.Runtime, members: tuple[str, ...]
) -> None:
    # Destruction skips the members that own nothing (native/src/value_ops.c,
    # value_owns_nothing): each member filled alone, none and all, must
    # leave the native heap's block count where it was.
    warm = Owner()
    for member in members:  # names interned, callable ids: the runtime's for good
        _FILL[member](warm)
    del warm
    rt.collect_garbage()
    rt.collect_garbage()  # released callables are handed back at the next one
    baseline = rt.native_memory()["live_blocks"]
    listener_refs = sys.getrefcount(_listener)
    owner = Owner()
    for member in members:
        _FILL[member](owner)
    bound = {"on_hit", "on_event"} & set(members)
    assert (sys.getrefcount(_listener) > listener_refs) == bool(bound)
    grown = rt.native_memory()["live_blocks"]
    if set(members) - {"tags emptied", "on_hit"}:
        assert grown > baseline + 1  # the object's block and the members' storage
    del owner
    stats = rt.collect_garbage()
    assert stats.objects_freed + stats.objects_freed_unshared >= 1
    assert rt.native_memory()["live_blocks"] == baseline
    rt.collect_garbage()
    # A bound delegate owns no block but a callable: released with the object.
    assert sys.getrefcount(_listener) == listener_refs
