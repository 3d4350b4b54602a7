"""The write barrier costs what a store writes, never the container it
writes into (docs/garbage-collector.md, "The write barrier's cost").

Every store path runs on two holders of one runtime, one whose containers
hold 4 references and one whose containers hold 3,000, while an
incremental mark is pending and while the collector gathers. The barrier's
work is read from ``GcStats.barrier_slots`` (reference slots it looked
at), so the tests count work, not time: the same store must cost the
same on both holders, at least the references it wrote while marking, and
nothing while gathering (the barrier is off once the mark is complete).
native/tests/test_gc_advanced.c (test_barrier_work_is_what_a_store_writes)
checks the same of the C API."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import zsharp_py as zs

SMALL, BIG = 4, 3_000


class Marker(zs.Struct):
    x: zs.Int32
    other: "Holder | None"


class Holder(zs.Object):
    items: zs.Array["Holder"]
    markers: zs.Array[Marker]
    by_id: zs.Map[zs.Int32, "Holder"]
    marker_by_id: zs.Map[zs.Int32, Marker]
    members: zs.Set["Holder"]
    maybe: zs.Optional[Marker]
    pos: Marker
    label: zs.String
    target: "Holder | None"
    on_hit: zs.MulticastDelegate

    def hit(self) -> None:
        """A listener for ``on_hit``."""


def fill(holder: Holder, count: int) -> None:
    """Give every container of ``holder`` ``count`` references."""
    kids = [Holder() for _ in range(count)]
    holder.items = kids
    holder.markers = [Marker(i, kid) for i, kid in enumerate(kids)]
    holder.by_id = dict(enumerate(kids))
    holder.marker_by_id = {i: Marker(i, kid) for i, kid in enumerate(kids)}
    holder.members = set(kids)
    for kid in kids[:32]:  # delegates are lists of weak bindings: a few suffice
        holder.on_hit.add(kid.hit)


Store = Callable[[Holder, Holder], object]

# name -> (the store, the references it writes)
STORES: dict[str, tuple[Store, int]] = {
    "array append": (lambda h, x: h.items.append(x), 1),
    "array insert at 0": (lambda h, x: h.items.insert(0, x), 1),
    "array extend": (lambda h, x: h.items.extend([x, x]), 2),
    "array slice assignment": (lambda h, x: h.items.__setitem__(slice(1, 3), [x, x]), 2),
    "array element store": (lambda h, x: h.items.__setitem__(1, x), 1),
    "array pop": (lambda h, x: h.items.pop(0), 0),
    "array remove": (lambda h, x: h.items.remove(h.items[2]), 0),
    "array of structs append": (lambda h, x: h.markers.append(Marker(1, x)), 1),
    "array of structs element store": (lambda h, x: h.markers.__setitem__(1, Marker(1, x)), 1),
    "struct element member store": (lambda h, x: setattr(h.markers[1], "other", x), 1),
    "map insert": (lambda h, x: h.by_id.__setitem__(-1, x), 1),
    "map store to a key held": (lambda h, x: h.by_id.__setitem__(1, x), 1),
    "map update": (lambda h, x: h.by_id.update({-1: x, -2: x}), 2),
    "map pop": (lambda h, x: h.by_id.pop(1), 0),
    "map struct value member store": (lambda h, x: setattr(h.marker_by_id[1], "other", x), 1),
    "set add": (lambda h, x: h.members.add(x), 1),
    "set update": (lambda h, x: h.members.update([x, h.target]), 1),
    "set discard": (lambda h, x: h.members.discard(h.items[0]), 0),
    "optional set": (lambda h, x: h.maybe.set(Marker(1, x)), 1),
    "struct member store": (lambda h, x: setattr(h.pos, "other", x), 1),
    "string member": (lambda h, x: setattr(h, "label", "written"), 0),
    "delegate add": (lambda h, x: h.on_hit.add(x.hit), 0),
    "delegate remove": (lambda h, x: h.on_hit.remove(h.items[0].hit), 0),
    "reference property": (lambda h, x: setattr(h, "target", x), 1),
    "whole struct from a dict": (lambda h, x: setattr(h, "pos", {"x": 1, "other": x}), 1),
    "whole array replacing the held one": (lambda h, x: setattr(h, "items", [x, x]), 2),
    "whole map replacing the held one": (lambda h, x: setattr(h, "by_id", {7: x}), 1),
    "whole set replacing the held one": (lambda h, x: setattr(h, "members", {x}), 1),
}
# The most slots one written reference may cost: a value built from Python
# (Marker(1, x)) is a black value that passes the barrier as it is made and
# again as it is copied in. A removal may cost one reference's worth too: the
# key it looks up is staged in a temporary, which is a store.
SLOTS_PER_REFERENCE = 5


def barrier_slots(rt: zs.Runtime) -> int:
    """The barrier's work so far in this cycle."""
    return rt.gc.stats().barrier_slots


def work_of(rt: zs.Runtime, store: Store, holder: Holder, x: Holder) -> int:
    """Run one store; return the barrier's work it added."""
    before = barrier_slots(rt)
    with zs.scope():
        store(holder, x)
    return barrier_slots(rt) - before


@pytest.mark.parametrize("phase", ["marking", "gathering"])
@pytest.mark.parametrize("path", list(STORES))
def test_a_store_costs_the_barrier_what_it_writes(rt: zs.Runtime, path: str, phase: str) -> None:
    store, written = STORES[path]
    small, big, x = Holder(), Holder(), Holder()
    for holder in (small, big):
        holder.add_to_root()
        holder.target = x  # every store writes a reachable object: legal while gathering
    fill(small, SMALL)
    fill(big, BIG)
    rt.gc.start_incremental()
    if phase == "marking":
        rt.gc.step(max_objects=1)  # bounded by work: the mark stays pending
    else:
        while rt.gc.phase == "marking":  # stop as the mark completes, before gathering
            rt.gc.step(1e-9)
    assert rt.gc.phase == phase

    on_small = work_of(rt, store, small, x)
    on_big = work_of(rt, store, big, x)

    assert rt.gc.phase == phase
    assert on_big == on_small, f"{path}: the barrier's work grew with the container"
    if phase == "marking":
        assert written <= on_big <= max(written, 1) * SLOTS_PER_REFERENCE
    else:
        assert on_big == 0  # the barrier is off once the mark is complete
    while not rt.gc.step(0.01):
        pass
    rt.gc.verify()
    assert not x.is_expired and not big.is_expired


def test_the_counter_sees_a_whole_container_written(rt: zs.Runtime) -> None:
    """The control: copying a held array into another writes every element,
    and the barrier's count says so (it measures real work, not a constant)."""
    holder, copy = Holder(), Holder()
    holder.add_to_root()
    copy.add_to_root()
    fill(holder, BIG)
    rt.gc.start_incremental()
    rt.gc.step(max_objects=1)
    assert rt.gc.phase == "marking"
    assert work_of(rt, lambda h, x: setattr(x, "items", h.items), holder, copy) >= BIG
    while not rt.gc.step(0.01):
        pass
    assert len(copy.items) == BIG


def test_only_new_references_are_barriered_yet_nothing_live_is_lost(rt: zs.Runtime) -> None:
    """Entries an insertion shifts, and a map's or set's entries a removal
    moves, are not barriered again (they gained no new holder): the objects
    they name, reachable only through the scanned-or-not holder, survive the
    cycle all the same, and the objects the stores dropped die with it."""
    holder = Holder()
    holder.add_to_root()
    kept = [Holder() for _ in range(200)]
    dropped = Holder()
    holder.items = [dropped, *kept]
    holder.by_id = dict(enumerate(kept))
    holder.members = set(kept)
    rt.gc.start_incremental()
    rt.gc.step(max_objects=1)
    assert rt.gc.phase == "marking"
    late = Holder()  # born marked
    del holder.items[0]  # every kept entry shifts
    holder.items.insert(0, late)
    holder.by_id.pop(0)  # the last entry moves into the hole
    holder.members.discard(kept[0])
    while not rt.gc.step(0.01):
        pass
    rt.gc.verify()
    assert not any(kid.is_expired for kid in kept)
    assert not late.is_expired
    assert holder.items[1:] == kept
    stats = rt.collect_garbage()  # dropped was unreachable from this cycle on
    assert dropped.is_expired and stats.objects_freed >= 1
