"""GC clusters seen from Python: creation, whole-cluster marking and
destruction, dissolution (by garbage marks and by reference stores, recursive
through the clusters that reference a dissolved one), the minimum size, and
clusters under an incremental mark."""

from __future__ import annotations

import itertools
from collections import deque

import pytest

import zsharp_py as zs
from classes import Actor, Asset, Loose, Part
from helpers import collect, runtime_ptr

FIELDS = ("a", "b", "c")


def grow(root: Part, count: int, start: int = 0) -> list[Part]:
    """Attach ``count`` new Parts below ``root`` as a binary tree (through
    ``a`` and ``b``, breadth first); return them in creation order."""
    parts: list[Part] = []
    parents: deque[Part] = deque([root])
    for i in range(count):
        part = Part(value=start + i)
        parent = parents[0]
        if parent.a is None:
            parent.a = part
        else:
            parent.b = part
            parents.popleft()
        parents.append(part)
        parts.append(part)
    return parts


def snapshot(objects: list[Part]) -> dict[int, tuple[int, tuple[int | None, ...]]]:
    """Each live object's value and its references (as positions in ``objects``)."""
    position = {id(o): i for i, o in enumerate(objects)}
    state = {}
    for i, obj in enumerate(objects):
        if obj.is_expired:
            continue
        targets = tuple(
            None if getattr(obj, f) is None else position[id(getattr(obj, f))] for f in FIELDS
        )
        state[i] = (obj.value, targets)
    return state


def reachable(
    state: dict[int, tuple[int, tuple[int | None, ...]]], roots: set[int], garbage: set[int]
) -> set[int]:
    """Reachability model (no clusters): references to garbage are killed."""
    seen = set(roots)
    work = list(roots)
    while work:
        for t in state[work.pop()][1]:
            if t is not None and t not in garbage and t not in seen:
                seen.add(t)
                work.append(t)
    return seen


def members_of(objects: list[Part]) -> set[int]:
    """Positions of the objects that are in a cluster."""
    return {i for i, o in enumerate(objects) if not o.is_expired and o.cluster is not None}


# ---- creation ----------------------------------------------------------------


def test_create_cluster_gathers_everything_the_root_references(rt: zs.Runtime) -> None:
    root = Asset(value=-1)
    parts = grow(root, 40)
    size = root.create_cluster()
    assert size == 41
    info = root.cluster
    assert info is not None
    assert info.root is root
    assert (info.objects, info.referenced_clusters, info.mutable_objects, info.referenced_by) == (
        41,
        0,
        0,
        0,
    )
    for part in parts:
        member = part.cluster
        assert member is not None and member.root is root and member.objects == 41
    assert rt.gc.cluster_count() == 1
    rt.gc.verify()


def test_create_cluster_requires_a_cluster_root_class(rt: zs.Runtime) -> None:
    for cls in (Part, Loose):
        obj = cls()
        grow(obj, 20)
        with pytest.raises(TypeError, match="cluster_root"):
            obj.create_cluster()
        assert obj.cluster is None
    with pytest.raises(TypeError, match="cluster_root"):
        Actor().create_cluster()
    assert rt.gc.cluster_count() == 0


def test_cluster_below_the_minimum_size_is_not_kept() -> None:
    with zs.Runtime(min_cluster_size=10) as rt:
        root = Asset()
        parts = grow(root, 8)  # 9 objects with the root
        assert root.create_cluster() == 0
        assert root.cluster is None
        assert all(p.cluster is None for p in parts)
        assert rt.gc.cluster_count() == 0
        rt.gc.verify()
        parts += grow(parts[-1], 1, start=8)  # now 10: exactly the minimum
        assert root.create_cluster() == 10
        assert all(p.cluster is not None and p.cluster.root is root for p in parts)
        assert rt.gc.cluster_count() == 1
        rt.gc.verify()


def test_default_minimum_cluster_size_is_16(rt: zs.Runtime) -> None:
    small = Asset()
    grow(small, 14)
    assert small.create_cluster() == 0
    big = Asset()
    grow(big, 15)
    assert big.create_cluster() == 16
    assert small.cluster is None and big.cluster is not None
    assert rt.gc.cluster_count() == 1


def test_cluster_does_not_take_garbage_or_other_clusters_members(rt: zs.Runtime) -> None:
    inner = Asset(value=1)
    grow(inner, 20)
    assert inner.create_cluster() == 21
    outer = Asset(value=2)
    parts = grow(outer, 20)
    doomed = Part()
    parts[3].c = doomed
    doomed.mark_as_garbage()
    parts[4].c = inner
    assert outer.create_cluster() == 21  # neither doomed nor inner's objects
    info = outer.cluster
    assert info is not None
    assert (info.referenced_clusters, info.mutable_objects) == (1, 1)
    assert doomed.cluster is None
    assert inner.cluster is not None and inner.cluster.root is inner
    assert inner.cluster.referenced_by == 1
    # An object already in a cluster cannot root another one.
    with pytest.raises(ValueError):
        inner.create_cluster()
    rt.gc.verify()


def test_create_cluster_out_of_memory_builds_all_or_nothing(rt: zs.Runtime) -> None:
    from zsharp_py._base.ffi import lib

    outcomes = set()
    for extra in range(0, 6_000, 150):
        root = Asset(value=-1)
        root.add_to_root()
        parts = grow(root, 100)
        used = rt.native_memory()["live_bytes"]
        lib.zs_debug_set(runtime_ptr(rt), lib.ZS_DEBUG_ALLOC_LIMIT, used + extra)
        try:
            root.create_cluster()
            outcomes.add("built")
        except MemoryError:
            outcomes.add("refused")
        finally:
            lib.zs_debug_set(runtime_ptr(rt), lib.ZS_DEBUG_ALLOC_LIMIT, 0)
        rt.gc.verify()  # no object names a cluster that was not built
        built = root.cluster is not None
        assert all((p.cluster is not None) == built for p in parts)
        collect(rt)
        assert not any(p.is_expired for p in parts)
        root.remove_from_root()
        collect(rt)
        assert all(p.is_expired for p in parts)
    assert outcomes == {"built", "refused"}


def test_create_cluster_during_a_pending_incremental_mark_raises(rt: zs.Runtime) -> None:
    root = Asset()
    root.add_to_root()
    parts = grow(root, 30)
    rt.gc.start_incremental()
    assert rt.gc.phase == "marking"
    with pytest.raises(RuntimeError):
        root.create_cluster()
    assert root.cluster is None and rt.gc.cluster_count() == 0
    rt.gc.verify()
    while not rt.gc.step(0.01):
        rt.gc.verify()
    rt.gc.verify()
    assert rt.gc.phase == "idle"
    assert root.create_cluster() == 31
    assert all(p.cluster is not None for p in parts)
    rt.gc.verify()


# ---- marking and destruction -------------------------------------------------


def test_cluster_is_kept_whole_while_its_root_is_reachable(rt: zs.Runtime) -> None:
    root = Asset(value=-1)
    root.add_to_root()
    parts = grow(root, 2000)
    assert root.create_cluster() == 2001
    for _ in range(3):
        stats = collect(rt)
        assert stats.clusters_marked == 1
        assert stats.objects_marked == 2001
        assert stats.objects_scanned < 2001 // 100  # the members are not read
        assert (stats.objects_unreachable, stats.objects_freed) == (0, 0)
        assert stats.clusters == 1 == rt.gc.cluster_count()
    assert rt.live_objects() == 2001
    assert [p.value for p in parts] == list(range(2000))
    assert root.cluster is not None and root.cluster.objects == 2001


def test_unreachable_cluster_is_destroyed_whole(rt: zs.Runtime) -> None:
    keep = Loose(value=7)
    keep.add_to_root()
    root = Asset(value=-1)
    root.add_to_root()
    parts = grow(root, 500)
    assert root.create_cluster() == 501
    collect(rt)
    root.remove_from_root()
    stats = collect(rt)
    assert root.is_expired
    assert all(p.is_expired for p in parts)  # after one collection
    assert stats.objects_freed == 501 == stats.objects_unreachable
    assert stats.conjugates_expired == 501
    assert stats.clusters_marked == 0
    assert stats.clusters == 0 == rt.gc.cluster_count()
    assert rt.live_objects() == 1 and keep.value == 7


def test_never_rooted_cluster_is_destroyed_at_the_first_collection(rt: zs.Runtime) -> None:
    root = Asset()
    parts = grow(root, 100)
    assert root.create_cluster() == 101
    collect(rt)
    assert root.is_expired and all(p.is_expired for p in parts)
    assert rt.gc.cluster_count() == 0 and rt.live_objects() == 0


@pytest.mark.parametrize("how", ["reference", "root", "strong", "outer"])
def test_reaching_a_member_from_outside_keeps_the_whole_cluster(rt: zs.Runtime, how: str) -> None:
    root = Asset(value=-1)
    parts = grow(root, 300)
    assert root.create_cluster() == 301
    deep = parts[250]
    holder = Loose()
    holder.add_to_root()
    pointer = None
    inner: Loose | None = None
    if how == "reference":
        holder.a = deep  # holder is not a member: no dissolution
    elif how == "root":
        deep.add_to_root()
    elif how == "strong":
        pointer = zs.StrongObjectPtr(deep)
    else:
        inner = Loose(outer=deep)  # an immutable reference to the member
        holder.a = inner
    assert root.cluster is not None
    stats = collect(rt)
    assert not root.is_expired and not any(p.is_expired for p in parts)
    assert stats.clusters_marked == 1
    assert stats.objects_scanned <= 2  # the holder (and inner) at most
    assert root.cluster is not None and root.cluster.objects == 301
    assert [p.value for p in parts] == list(range(300))
    # Let go of the member: the whole cluster goes at once.
    if how in ("reference", "outer"):
        holder.a = None
    elif how == "root":
        deep.remove_from_root()
    else:
        assert pointer is not None
        pointer.dispose()
    stats = collect(rt)
    assert root.is_expired and all(p.is_expired for p in parts)
    assert stats.objects_freed == 301 + (inner is not None)
    assert rt.gc.cluster_count() == 0


def test_references_from_a_cluster_keep_outside_objects_alive(rt: zs.Runtime) -> None:
    root = Asset(value=-1)
    root.add_to_root()
    parts = grow(root, 30)
    outside = [Loose(value=1000 + i) for i in range(5)]
    beyond = [Loose(value=2000 + i) for i in range(5)]
    for o, b in zip(outside, beyond, strict=True):
        o.a = b
    for i in range(10):
        parts[i].c = outside[i % 5]
    assert root.create_cluster() == 31
    info = root.cluster
    assert info is not None and info.mutable_objects == 5
    stats = collect(rt)
    assert not any(o.is_expired for o in outside + beyond)
    assert stats.clusters_marked == 1
    assert stats.objects_scanned == 10  # only the outside objects are read
    assert stats.objects_marked == 41
    # Outside objects stay mutable: a store into one does not dissolve the cluster.
    fresh = Loose(value=3000)
    outside[0].b = fresh
    assert root.cluster is not None
    collect(rt)
    assert not fresh.is_expired and outside[0].b is fresh and fresh.value == 3000
    assert root.cluster is not None
    # Marking an outside object as garbage dissolves the cluster at the next
    # collection, and the references to it are killed.
    outside[1].mark_as_garbage()
    stats = collect(rt)
    assert outside[1].is_expired and beyond[1].is_expired
    assert stats.references_killed == 2  # parts[1].c and parts[6].c
    assert parts[1].c is None and parts[6].c is None
    assert stats.clusters_dissolved >= 1
    assert rt.gc.cluster_count() == 0
    assert all(p.cluster is None for p in parts) and root.cluster is None
    assert [p.value for p in parts] == list(range(30))
    assert not any(o.is_expired for i, o in enumerate(outside) if i != 1)
    assert not fresh.is_expired


def test_cluster_keeps_referenced_cluster_alive(rt: zs.Runtime) -> None:
    inner = Asset(value=1)
    inner_parts = grow(inner, 20)
    assert inner.create_cluster() == 21
    outer = Asset(value=2)
    outer.add_to_root()
    outer_parts = grow(outer, 20)
    outer_parts[-1].c = inner
    assert outer.create_cluster() == 21
    stats = collect(rt)
    assert stats.clusters_marked == 2
    assert stats.objects_scanned == 0 and stats.objects_marked == 42
    assert not inner.is_expired and not any(p.is_expired for p in inner_parts)
    outer.remove_from_root()
    stats = collect(rt)
    assert stats.objects_freed == 42
    assert rt.gc.cluster_count() == 0


def test_destroyed_cluster_objects_raise_expired_errors(rt: zs.Runtime) -> None:
    root = Asset()
    parts = grow(root, 20)
    assert root.create_cluster() == 21
    collect(rt)
    for obj in (root, parts[7]):
        with pytest.raises(zs.ExpiredConjugateError):
            obj.cluster
        with pytest.raises(zs.ExpiredConjugateError):
            obj.dissolve_cluster()
    with pytest.raises(zs.ExpiredConjugateError):
        root.create_cluster()


def test_clusters_and_permanent_objects() -> None:
    with zs.Runtime(disregard_for_gc=True) as rt:
        permanent = Loose(value=1)
        rt.close_disregard_for_gc()
        root = Asset(value=-1)
        parts = grow(root, 20)
        parts[5].c = permanent
        assert root.create_cluster() == 21
        info = root.cluster
        assert info is not None and info.mutable_objects == 0  # never marked anyway
        assert permanent.cluster is None
        # A permanent object that references a member keeps the cluster.
        permanent.b = parts[10]
        stats = collect(rt)
        assert not root.is_expired and stats.clusters_marked == 1
        assert stats.objects_marked == 21
        permanent.b = None
        stats = collect(rt)
        assert root.is_expired and all(p.is_expired for p in parts)
        assert stats.objects_freed == 21
        assert not permanent.is_expired and permanent.value == 1


# ---- dissolution -------------------------------------------------------------


def build_nested_clusters(rt: zs.Runtime) -> tuple[list[Asset], list[list[Part]]]:
    """Three clusters: A's member references B's root, B's member references
    C's root (C then B built first, so each is a referenced cluster)."""
    roots: list[Asset] = []
    parts: list[list[Part]] = []
    below: Asset | None = None
    for level in range(3):
        root = Asset(value=-1 - level)
        members = grow(root, 25, start=100 * level)
        if below is not None:
            members[10].c = below
        assert root.create_cluster() == 26
        roots.append(root)
        parts.append(members)
        below = root
    roots[-1].add_to_root()  # A, the outermost
    rt.gc.verify()
    return roots, parts


@pytest.mark.parametrize("victim_at", [("C", 4), ("C", None), ("B", 7)])
def test_garbage_member_dissolves_the_clusters_that_reference_it(
    rt: zs.Runtime, victim_at: tuple[str, int | None]
) -> None:
    roots, parts = build_nested_clusters(rt)
    c_root, b_root, a_root = roots
    assert a_root.cluster is not None and a_root.cluster.referenced_clusters == 1
    assert b_root.cluster is not None
    assert (b_root.cluster.referenced_clusters, b_root.cluster.referenced_by) == (1, 1)
    assert c_root.cluster is not None and c_root.cluster.referenced_by == 1
    stats = collect(rt)
    assert stats.clusters_marked == 3 and stats.objects_scanned == 0
    objects: list[Part] = [*roots, *(p for level in parts for p in level)]
    state = snapshot(objects)
    level = "CBA".index(victim_at[0])
    victim = roots[level] if victim_at[1] is None else parts[level][victim_at[1]]
    victim.mark_as_garbage()
    # Dissolved at once: the victim's cluster and every cluster above it.
    for lvl in range(level, 3):
        assert roots[lvl].cluster is None
        assert all(p.cluster is None for p in parts[lvl])
    for lvl in range(level):
        assert roots[lvl].cluster is not None  # below the victim: untouched
    assert rt.gc.cluster_count() == level
    rt.gc.verify()
    garbage = {objects.index(victim)}
    expected = reachable(state, {objects.index(a_root)}, garbage)
    stats = collect(rt)
    assert {i for i, o in enumerate(objects) if not o.is_expired} == expected
    assert stats.references_killed == 1
    assert victim.is_expired
    # Nothing live was lost: every survivor keeps its values and references,
    # except the one reference to the victim.
    after = snapshot(objects)
    for i in expected:
        value, targets = state[i]
        assert after[i][0] == value
        assert after[i][1] == tuple(None if t in garbage else t for t in targets)
    assert rt.gc.cluster_count() == level
    assert members_of(objects) == {
        i
        for i, o in enumerate(objects)
        if any(o is x for lvl in range(level) for x in [roots[lvl], *parts[lvl]])
    }


def test_outside_references_to_a_garbage_member_are_killed(rt: zs.Runtime) -> None:
    root = Asset(value=-1)
    root.add_to_root()
    parts = grow(root, 30)
    assert root.create_cluster() == 31
    holders = [Loose(value=100 + i) for i in range(3)]
    for holder in holders:
        holder.add_to_root()
        holder.a = parts[29]  # a leaf of the tree
    parts[29].mark_as_garbage()
    assert root.cluster is None
    stats = collect(rt)
    assert parts[29].is_expired
    assert stats.references_killed == 4  # three holders and its parent in the tree
    assert all(h.a is None for h in holders)
    assert not root.is_expired and not any(p.is_expired for p in parts[:29])
    assert [p.value for p in parts[:29]] == list(range(29))


def test_every_cluster_object_is_ordinary_after_recursive_dissolution(rt: zs.Runtime) -> None:
    roots, parts = build_nested_clusters(rt)
    parts[0][20].mark_as_garbage()  # a member of the innermost cluster
    everything = [*roots, *(p for level in parts for p in level)]
    assert all(o.cluster is None for o in everything)
    assert rt.gc.cluster_count() == 0
    stats = collect(rt)
    assert stats.clusters_marked == 0
    assert stats.objects_scanned == stats.objects_marked == 77
    assert parts[0][20].is_expired
    assert sum(o.is_expired for o in everything) == 1


def test_storing_into_a_member_dissolves_the_cluster_and_keeps_the_new_target(
    rt: zs.Runtime,
) -> None:
    root = Asset(value=-1)
    root.add_to_root()
    parts = grow(root, 40)
    assert root.create_cluster() == 41
    target = Part(value=99)
    beyond = Part(value=100)
    target.a = beyond
    parts[30].c = target
    assert root.cluster is None and all(p.cluster is None for p in parts)
    assert rt.gc.cluster_count() == 0
    stats = collect(rt)
    assert not target.is_expired and not beyond.is_expired
    assert parts[30].c is target and target.a is beyond
    assert (target.value, beyond.value) == (99, 100)
    assert not any(p.is_expired for p in parts)
    assert stats.objects_freed == 0


def test_cutting_a_reference_inside_a_cluster_frees_what_it_held(rt: zs.Runtime) -> None:
    root = Asset(value=-1)
    root.add_to_root()
    parts = grow(root, 40)
    assert root.create_cluster() == 41
    objects: list[Part] = [root, *parts]
    state = snapshot(objects)
    cut = parts[2]
    cut.a = None
    cut.b = None
    assert rt.gc.cluster_count() == 0
    state[objects.index(cut)] = (cut.value, (None, None, None))
    expected = reachable(state, {0}, set())
    assert len(expected) < 41
    collect(rt)
    assert {i for i, o in enumerate(objects) if not o.is_expired} == expected
    assert [o.value for i, o in enumerate(objects) if i in expected] == [
        state[i][0] for i in sorted(expected)
    ]


def test_weak_store_into_a_member_keeps_the_cluster(rt: zs.Runtime) -> None:
    root = Asset()
    root.add_to_root()
    parts = grow(root, 20)
    assert root.create_cluster() == 21
    stranger = Part(value=5)
    parts[5].link = stranger  # weak: not traced, no dissolution
    assert root.cluster is not None
    collect(rt)
    assert stranger.is_expired
    assert parts[5].link.get() is None
    assert root.cluster is not None and rt.gc.cluster_count() == 1


def test_dissolve_cluster_turns_members_into_ordinary_objects(rt: zs.Runtime) -> None:
    root = Asset(value=-1)
    root.add_to_root()
    parts = grow(root, 50)
    assert root.create_cluster() == 51
    parts[17].dissolve_cluster()
    assert root.cluster is None and all(p.cluster is None for p in parts)
    stats = collect(rt)
    assert stats.clusters_marked == 0
    assert stats.objects_scanned == stats.objects_marked == 51
    assert not any(p.is_expired for p in parts)
    # A cluster can be built again from the same root.
    assert root.create_cluster() == 51
    parts[17].dissolve_cluster()
    parts[17].dissolve_cluster()  # dissolving an ordinary object does nothing
    rt.gc.verify()


# ---- clusters under an incremental mark --------------------------------------


def test_cluster_reached_mid_cycle_only_through_the_barrier_survives(rt: zs.Runtime) -> None:
    chain_root = Loose()
    chain_root.add_to_root()  # first in the root list: scanned after the holder
    holder = Loose()
    holder.add_to_root()
    root = Asset(value=-1)
    parts = grow(root, 100)
    assert root.create_cluster() == 101
    # The cluster hangs at the end of a long chain of ordinary objects.
    chain = [Loose() for _ in range(5000)]
    chain_root.a = chain[0]
    for first, second in itertools.pairwise(chain):
        first.a = second
    chain[-1].a = parts[60]
    rt.gc.start_incremental()
    for _ in range(3):
        assert not rt.gc.step(1e-6)
        rt.gc.verify()
    assert rt.gc.phase == "marking"
    holder.b = parts[60]  # the holder was scanned already: only the barrier sees this
    chain[-1].a = None  # the chain no longer leads to the cluster
    while not rt.gc.step(0.01):
        rt.gc.verify()
    rt.gc.verify()
    assert not root.is_expired and not any(p.is_expired for p in parts)
    assert root.cluster is not None and root.cluster.objects == 101
    assert rt.gc.stats().barrier_marks >= 1
    stats = collect(rt)
    assert not root.is_expired and stats.clusters_marked == 1


def test_storing_into_a_marked_member_mid_cycle_keeps_the_new_target(rt: zs.Runtime) -> None:
    root = Asset(value=-1)
    root.add_to_root()
    parts = grow(root, 100)
    assert root.create_cluster() == 101
    stray = Part(value=7)  # unreachable when the cycle starts
    stray_child = Part(value=8)
    stray.a = stray_child
    padding = Loose()
    padding.add_to_root()
    chain = [Loose() for _ in range(3000)]
    padding.a = chain[0]
    for first, second in itertools.pairwise(chain):
        first.a = second
    rt.gc.start_incremental()  # the cluster is marked with the roots
    assert not rt.gc.step(1e-6)
    rt.gc.verify()
    assert rt.gc.phase == "marking"
    parts[99].c = stray  # dissolves the (already marked) cluster
    assert root.cluster is None
    parts[0].a = None  # cut a subtree: floating garbage for this cycle only
    while not rt.gc.step(0.01):
        rt.gc.verify()
    rt.gc.verify()
    assert not stray.is_expired and not stray_child.is_expired
    assert not any(p.is_expired for p in parts)
    assert parts[99].c is stray and stray.a is stray_child
    stats = collect(rt)
    assert not stray.is_expired and not stray_child.is_expired
    assert stats.objects_freed > 0  # the cut subtree goes now
    assert not root.is_expired and not parts[99].is_expired


def test_a_store_outside_any_cluster_leaves_the_clusters_out_of_memory(rt: zs.Runtime) -> None:
    """A reference store into an object of no cluster has no cluster to
    dissolve, and needs no memory for it: with none to spare, the store
    goes ahead and every cluster stays (dissolving one it does not touch,
    or all of them for want of memory, would throw away the collector's
    work for nothing)."""
    from zsharp_py._base.ffi import lib

    root = Asset(value=-1)
    root.add_to_root()
    grow(root, 40)
    assert root.create_cluster() > 0
    holder, target = Actor(), Actor()
    holder.add_to_root()
    clusters = rt.gc.cluster_count()
    used = rt.native_memory()["live_bytes"]
    lib.zs_debug_set(runtime_ptr(rt), lib.ZS_DEBUG_ALLOC_LIMIT, used)
    try:
        holder.target = target
    finally:
        lib.zs_debug_set(runtime_ptr(rt), lib.ZS_DEBUG_ALLOC_LIMIT, 0)
    assert holder.target is target
    assert rt.gc.cluster_count() == clusters and root.cluster is not None
    rt.gc.verify()
