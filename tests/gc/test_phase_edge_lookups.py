"""Lookups by name and by handle at the edges of a collection's phases.

An object the collector has found unreachable is *dying* before it is
freed: once an incremental mark is complete (gathering) every unmarked
object is, and every gathered one until the purge frees it, while its
conjugate waits for a bounded expiry. A lookup must never hand one out,
whatever path it takes, whether or not Python still holds its proxy:
``SoftObjectPtr.get()`` (a black pointer, a red view, a path of several
segments), ``rt.object_from_handle``, ``WeakObjectPtr.get()`` (black and
red), ``LazyObjectPtr.get()``; and it must still find everything alive
(objects not marked *yet* while the mark is pending, objects born during
the cycle, a live object sharing a dying one's name, permanent objects the
mark never visits, members of a reachable cluster). Each test probes at
one phase: the mark pending, gathering, expiring (gathered, conjugates not
yet reached by the bounded expiry), inside the expiry itself (a
``gc.callbacks`` entry run by the expiry's allocations) and after the
cycle. tools/mutate.py's "lookups" selection runs this file first: the
mutants of ``name_matches`` (native/src/heap.c) and ``zpy_conjugate_of``
(native/binding/zpy_conjugate_table.c) that hand out dying objects die
here.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import zsharp_py as zs
from classes import Actor, Asset, Part
from helpers import runtime_ptr
from zsharp_py._base.ffi import lib


class Keeper(zs.Object):
    """Rooted: holds what must stay alive, and red pointers to every subject."""

    kept: zs.Array[zs.Object]
    scratch: zs.Array[zs.Object]
    softs: zs.Array[zs.SoftObjectPtr[zs.Object]]
    weaks: zs.Array[zs.WeakObjectPtr[zs.Object]]


FILLER = 20_000  # unreachable objects: a gather of many steps
HELD_FILLER = 300  # of which Python holds proxies: an expiry of several bounded steps


def filler(keeper: Keeper, count: int) -> list[Actor]:
    """`count` unreachable objects that stay until a collection frees them
    (stored once, so the heap has shared their handles: never freed at
    once with their proxies, docs/garbage-collector.md)."""
    made = [Actor() for _ in range(count)]
    keeper.scratch.extend(made)
    keeper.scratch.clear()
    return made


@dataclass
class Scene:
    """Subjects under ``Level.Room`` (and one under a doomed room), by name:
    which must stay alive and which are doomed, with their handles, black
    pointers and red views made while every one was alive."""

    rt: zs.Runtime
    keeper: Keeper
    handles: dict[str, int]
    live: set[str]
    held: dict[str, zs.Object] = field(default_factory=dict)
    filler: list[Actor] = field(default_factory=list)  # held, before "Late"
    black_soft: dict[str, Any] = field(default_factory=dict)
    black_weak: dict[str, Any] = field(default_factory=dict)
    lazy: dict[str, Any] = field(default_factory=dict)
    index: dict[str, int] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)


def build(rt: zs.Runtime, hold: bool) -> Scene:
    """The subjects: "Kept" (referenced), "Early" and "Late" (unreachable,
    made before and after the filler, so the gather reaches one first and
    the other last), "Twin" twice (a live one, then a doomed one whose
    name-index link comes first), and "Inner" under the unreachable room
    "Gone". With `hold`, Python keeps a proxy of every subject."""
    keeper = Keeper(name="Keeper")
    keeper.add_to_root()
    level = Actor(name="Level")
    level.add_to_root()
    room = Actor(name="Room", outer=level)
    keeper.kept.append(room)
    subjects: dict[str, zs.Object] = {}
    paths: dict[str, str] = {}

    def add(key: str, name: str, outer: zs.Object, path: str) -> zs.Object:
        obj = Actor(name=name, outer=outer)
        subjects[key] = obj
        paths[key] = path
        return obj

    keeper.kept.append(add("Kept", "Kept", room, "Level.Room.Kept"))
    keeper.kept.append(add("Twin", "Twin", room, "Level.Room.Twin"))
    add("Early", "Early", room, "Level.Room.Early")
    add("DoomedTwin", "Twin", room, "Level.Room.Twin")
    gone = Actor(name="Gone", outer=level)
    add("Inner", "Inner", gone, "Level.Gone.Inner")
    doomed_filler = filler(keeper, FILLER)
    add("Late", "Late", room, "Level.Room.Late")
    scene = Scene(
        rt,
        keeper,
        {key: obj.handle for key, obj in subjects.items()},
        {"Kept", "Twin"},
        paths=paths,
    )
    scene.filler = doomed_filler[-HELD_FILLER:] if hold else []
    del doomed_filler
    for i, (key, obj) in enumerate(subjects.items()):
        scene.index[key] = i
        keeper.softs.append(paths[key])
        keeper.weaks.append(obj)
        scene.black_soft[key] = zs.SoftObjectPtr[zs.Object](paths[key])
        scene.black_weak[key] = zs.WeakObjectPtr[zs.Object](obj)
        scene.lazy[key] = zs.LazyObjectPtr(obj)
    if hold:
        scene.held = subjects
    return scene


# Each lookup: (scene, subject key) -> what it finds. By name, a twin's
# path names both twins; by handle, each its own object.
LOOKUPS: dict[str, Callable[[Scene, str], Any]] = {
    "soft": lambda s, key: s.black_soft[key].get(),
    "soft view": lambda s, key: s.keeper.softs[s.index[key]].get(),
    "handle": lambda s, key: s.rt.object_from_handle(s.handles[key]),
    "weak": lambda s, key: s.black_weak[key].get(),
    "weak view": lambda s, key: s.keeper.weaks[s.index[key]].get(),
    "lazy": lambda s, key: s.lazy[key].get(),
}
BY_NAME = {"soft", "soft view"}


def found(scene: Scene, lookup: str, key: str) -> int | None:
    """The handle of what a lookup returns (None for None); a returned
    proxy must be live."""
    result = LOOKUPS[lookup](scene, key)
    if result is None:
        return None
    assert not result.is_expired, f"{lookup}({key}) returned an expired proxy"
    if scene.held and result.handle in scene.handles.values():
        held = next(o for o in scene.held.values() if o.handle == result.handle)
        assert result is held, "a second proxy of an object Python holds one of"
    return int(result.handle)


def expected_live(scene: Scene, lookup: str, key: str) -> set[int]:
    """The handles a lookup of a live subject may return: its own; by
    name, a twin's path may name either twin while both live."""
    if lookup in BY_NAME and key in ("Twin", "DoomedTwin"):
        return {scene.handles["Twin"], scene.handles["DoomedTwin"]}
    return {scene.handles[key]}


def check_dying(scene: Scene, lookup: str, phase: str) -> None:
    """At a phase where the doomed subjects are dying: each lookup of one
    is None (a path naming a live twin finds the live twin), each of a
    live subject finds it."""
    for key in scene.handles:
        got = found(scene, lookup, key)
        if key in scene.live or (lookup in BY_NAME and key == "DoomedTwin"):
            want = "Twin" if key == "DoomedTwin" else key
            assert got == scene.handles[want], f"{phase}: {lookup}({key}) lost a live object"
        else:
            assert got is None, f"{phase}: {lookup}({key}) handed out a dying object"


@pytest.fixture(params=[True, False], ids=["proxies held", "no proxies"])
def hold(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.mark.parametrize("lookup", LOOKUPS)
def test_while_the_mark_is_pending_every_subject_is_found(
    rt: zs.Runtime, hold: bool, lookup: str
) -> None:
    """Not marked yet is not dying: the mark may still reach an object (or
    the write barrier will, if it is stored), so every lookup finds it."""
    scene = build(rt, hold)
    rt.gc.start_incremental()
    rt.gc.step(max_objects=1)
    assert rt.gc.phase == "marking"
    for key in scene.handles:
        assert found(scene, lookup, key) in expected_live(scene, lookup, key), key
    rt.gc.collect()
    rt.gc.verify()


def step_to_gathering(rt: zs.Runtime) -> None:
    """Complete the mark in tiny steps and stop at the first gather step."""
    rt.gc.start_incremental()
    while rt.gc.phase == "marking":
        rt.gc.step(1e-9)
    assert rt.gc.phase == "gathering", "the gather finished in one step"


@pytest.mark.parametrize("lookup", LOOKUPS)
def test_while_gathering_no_lookup_finds_a_dying_object(
    rt: zs.Runtime, hold: bool, lookup: str
) -> None:
    """Mid-gather: "Early" is gathered (dying), "Late" is left unmarked and
    not reached yet (dying all the same), "Inner" sits under a dying
    room; a path naming the twins finds the live one."""
    scene = build(rt, hold)
    step_to_gathering(rt)
    newborn = Actor(name="Newborn", outer=rt.object_from_handle(scene.handles["Kept"]))
    check_dying(scene, lookup, "gathering")
    if lookup == "soft":  # born reachable during the cycle: found by name
        assert zs.SoftObjectPtr[Actor]("Level.Room.Kept.Newborn").get() is newborn
    rt.gc.collect()
    check_dying(scene, lookup, "after the collection")
    rt.gc.verify()


def step_to_expiring(rt: zs.Runtime) -> None:
    """Complete mark and gather in steps bounded by work, so that the
    bounded expiry has left the held proxies of dying objects unexpired."""
    rt.gc.start_incremental()
    while rt.gc.phase in ("marking", "gathering"):
        rt.gc.step(max_objects=64)
    assert rt.gc.phase == "purging"


@pytest.mark.parametrize("lookup", LOOKUPS)
def test_while_expiring_no_lookup_finds_a_dying_object(
    rt: zs.Runtime, hold: bool, lookup: str
) -> None:
    """Gathered, waiting for the purge: the dying objects' proxies (when
    Python holds them) are not all expired yet; no lookup hands one out,
    held or not."""
    scene = build(rt, hold)
    step_to_expiring(rt)
    if hold:
        assert any(not scene.held[key].is_expired for key in scene.held if key not in scene.live), (
            "the bounded expiry reached every dying proxy: nothing is checked"
        )
    check_dying(scene, lookup, "expiring")
    while not rt.gc.step(0.01):
        pass
    check_dying(scene, lookup, "after the cycle")
    rt.gc.verify()


def collect_with_gc_callback(
    rt: zs.Runtime, callback: Callable[[str, dict[str, Any]], None]
) -> None:
    """A full collection with ``callback`` in ``gc.callbacks`` and a
    collection at nearly every allocation, so that it runs inside the
    expiry the collection hands over (as a finaliser or any hook may)."""
    threshold = gc.get_threshold()
    gc.set_threshold(1)
    gc.callbacks.append(callback)
    try:
        rt.gc.collect()
    finally:
        gc.callbacks.remove(callback)
        gc.set_threshold(*threshold)


@pytest.mark.parametrize("lookup", LOOKUPS)
def test_inside_the_expiry_no_lookup_finds_a_dying_object(rt: zs.Runtime, lookup: str) -> None:
    """The expiry allocates, so Python's cycle collector and its callbacks
    run in the middle of it, while some dying proxies are expired and
    others not yet: a lookup from there finds no dying object either."""
    scene = build(rt, hold=True)
    checked: list[str] = []
    failures: list[str] = []
    doomed = [o for key, o in scene.held.items() if key not in scene.live]

    def probe(phase: str, info: dict[str, Any]) -> None:
        # Inside the expiry: some dying proxies expired, the rest pending.
        inside = phase == "start" and rt._collecting and not rt.closed
        if inside and any(o.is_expired for o in [*doomed, *scene.filler]):
            try:
                check_dying(scene, lookup, "inside the expiry")
            except AssertionError as error:  # raised here, it would be unraisable
                failures.append(str(error))
            checked.append(phase)

    collect_with_gc_callback(rt, probe)
    assert checked, "no gc callback ran inside the expiry"
    assert failures == []
    check_dying(scene, lookup, "after the collection")
    rt.gc.verify()


def test_a_path_through_a_dying_outer_finds_nothing(rt: zs.Runtime) -> None:
    """Each segment is looked up under the one before: a dying outer stops
    the walk, while its live sibling's children are found."""
    scene = build(rt, hold=False)
    step_to_gathering(rt)
    assert zs.SoftObjectPtr[Actor]("Level.Gone").get() is None
    assert zs.SoftObjectPtr[Actor]("Level.Gone.Inner").get() is None
    assert zs.SoftObjectPtr[Actor]("Level.Room").get() is not None
    assert found(scene, "soft", "Kept") == scene.handles["Kept"]
    rt.gc.collect()


def test_without_memory_for_the_name_index_lookups_by_name_still_skip_the_dying(
    rt: zs.Runtime,
) -> None:
    """The name index is built at the first lookup by name; without memory
    for it every object is looked at instead, with the same rule: dying
    objects skipped, live ones (the live twin too) found."""
    scene = build(rt, hold=True)
    step_to_gathering(rt)
    used = rt.native_memory()["live_bytes"]
    lib.zs_debug_set(runtime_ptr(rt), lib.ZS_DEBUG_ALLOC_LIMIT, used + 64)
    try:
        for key in scene.handles:  # red views made before the limit
            got = found(scene, "soft view", key)
            want = "Twin" if key == "DoomedTwin" else key
            assert got == (scene.handles[want] if want in scene.live else None), key
        assert rt.native_memory()["live_bytes"] <= used + 64  # no index was built
    finally:
        lib.zs_debug_set(runtime_ptr(rt), lib.ZS_DEBUG_ALLOC_LIMIT, 0)
    rt.gc.collect()
    rt.gc.verify()


def test_permanent_objects_are_found_while_gathering() -> None:
    """Permanent objects (made in the disregard-for-GC window) are never
    marked, yet never dying: found mid-gather, by name and by handle."""
    with zs.Runtime(disregard_for_gc=True) as rt:
        level = Actor(name="Level")
        eternal = Actor(name="Eternal", outer=level)
        handle = eternal.handle
        rt.close_disregard_for_gc()
        del eternal
        keeper = Keeper()
        keeper.add_to_root()
        filler(keeper, FILLER)
        step_to_gathering(rt)
        found_by_name = zs.SoftObjectPtr[Actor]("Level.Eternal").get()
        assert found_by_name is not None and found_by_name.handle == handle
        assert rt.object_from_handle(handle) is found_by_name
        rt.gc.collect()
        assert zs.SoftObjectPtr[Actor]("Level.Eternal").get() is found_by_name
        del level
        rt.gc.verify()


def clustered(rt: zs.Runtime, name: str, members: int) -> Iterator[Part]:
    """A cluster rooted at an Asset called `name`, with named members."""
    root = Asset(name=name)
    parts = [Part(name=f"{name}{i}", outer=root) for i in range(members)]
    for a, b in itertools.pairwise(parts):
        a.a = b
    root.a = parts[0]
    assert root.create_cluster() > 0
    yield root
    yield from parts


def test_members_of_a_dying_cluster_are_not_found_while_gathering() -> None:
    """A cluster is marked as one unit, through its root's mark: mid-gather
    the members of an unreachable cluster are dying, those of a rooted one
    alive, whatever their own mark bits say."""
    with zs.Runtime(min_cluster_size=1) as rt:
        kept = list(clustered(rt, "Kept", 4))
        kept[0].add_to_root()
        doomed = [o.handle for o in clustered(rt, "Doomed", 4)]
        keeper = Keeper()
        keeper.add_to_root()
        filler(keeper, FILLER)
        late = [o.handle for o in clustered(rt, "Late", 4)]
        step_to_gathering(rt)
        for prefix, handles in (("Doomed", doomed), ("Late", late)):
            assert zs.SoftObjectPtr[Part](f"{prefix}.{prefix}1").get() is None
            assert all(rt.object_from_handle(h) is None for h in handles)
        assert zs.SoftObjectPtr[Part]("Kept.Kept1").get() is kept[2]
        assert all(rt.object_from_handle(o.handle) is o for o in kept)
        rt.gc.collect()
        rt.gc.verify()


def test_deaths_inside_name_index_chains_leave_every_chain_whole(rt: zs.Runtime) -> None:
    """The name index (built at the first lookup by name) links objects of
    one bucket in a chain, the newest first. Objects dying deep in their
    chains (made early, a few hundred at a time: each unlinked on its own)
    must leave every chain whole: the heap verifies (which walks the
    index), each survivor is still found by name, each dead one not."""
    level = Actor(name="Level")
    level.add_to_root()
    keeper = Keeper()
    keeper.add_to_root()
    objects = [Actor(name=f"N{i}", outer=level) for i in range(3000)]
    keeper.kept.extend(objects)
    assert zs.SoftObjectPtr[Actor]("Level.N0").get() is objects[0]  # builds the index
    handles = [o.handle for o in objects]
    del objects
    dead: set[int] = set()
    for start in (0, 1):  # 500 deaths per collection: no bulk relink
        for i in range(start, 1500, 3):
            keeper.kept[i] = None
            dead.add(i)
        rt.gc.collect()
        rt.gc.verify()
    for i in range(0, 3000, 7):
        got = zs.SoftObjectPtr[Actor](f"Level.N{i}").get()
        if i in dead:
            assert got is None, i
        else:
            assert got is not None and got.handle == handles[i], i


def test_inside_the_expiry_no_write_reaches_a_dying_object(rt: zs.Runtime) -> None:
    """While the expiry hands dying objects over (some proxies expired,
    the others next), a plain write Python makes itself (a scalar) into one
    whose proxy is not expired yet is refused as for any dying object: the
    runtime's dying window stays open for the whole hand-over."""
    scene = build(rt, hold=True)
    doomed = [o for key, o in scene.held.items() if key not in scene.live] + scene.filler
    attempts: list[int] = []
    written: list[int] = []

    def write(phase: str, info: dict[str, Any]) -> None:
        inside = phase == "start" and rt._collecting and not rt.closed
        if inside and any(o.is_expired for o in doomed):
            for obj in doomed:
                if obj.is_expired:
                    continue
                attempts.append(obj.handle)
                try:
                    obj.health = 7
                    written.append(obj.handle)
                except zs.ExpiredConjugateError:
                    pass

    collect_with_gc_callback(rt, write)
    assert attempts, "no write was tried inside the expiry"
    assert written == []
    assert all(o.is_expired for o in doomed)
    rt.gc.verify()
