"""Parked views (native/binding/value.h): a member's red view that Python
drops stays in its holder's table and is taken back by the next read of the
member. Parking must be invisible: a view read again after its owner
expired, its holder was deallocated, its container restructured, its value
was replaced or a scope ended behaves exactly as a new view would, and no
parked view outlives its holder (each holds a reference to its class, which
the leak checks below count)."""

from __future__ import annotations

import gc
import sys
import weakref
from typing import Any

import pytest

import zsharp_py as zs
from helpers import PARENT, SCOPE, STRUCTURE, collect


class PVec(zs.Struct):
    x: zs.Float64
    y: zs.Float64


class PPair(zs.Struct):
    a: PVec
    b: PVec


class PNote(zs.Struct):
    text: zs.String
    at: PVec


class PMob(zs.Object):
    spot: PVec
    pair: PPair
    label: zs.String
    maybe: zs.Optional[zs.Float64]
    notes: zs.Array[PNote]


class PHolder(zs.Object):
    mob: "PMob | None"


SPECIALISED = [zs.Array[PNote], zs.Optional[zs.Float64]]

pytestmark = pytest.mark.usefixtures("no_leaked_values")


def _class_references() -> tuple[int, ...]:
    """References to the view classes: every view holds one to its class."""
    gc.collect()
    return tuple(sys.getrefcount(cls) for cls in (PVec, PPair, zs.String, zs.Array[PNote]))


def test_a_member_read_again_is_live_and_reads_the_member(rt: zs.Runtime) -> None:
    mob = PMob()
    mob.spot = (1.0, 2.0)
    mob.label = "first"
    for i in range(3):
        assert mob.spot.x == 1.0 + i
        mob.spot.x = 2.0 + i
        assert str(mob.label) == "first"
        assert not mob.spot.is_expired and mob.spot.is_black is False
    assert mob.spot == {"x": 4.0, "y": 2.0}
    mob.maybe = 2.5
    assert mob.maybe.get() == 2.5 and mob.maybe.get() == 2.5


def test_a_member_read_after_its_owner_is_collected_raises(rt: zs.Runtime) -> None:
    mob = PMob()
    assert mob.spot.x == 0.0 and mob.pair.a.y == 0.0 and str(mob.label) == ""
    collect(rt)  # unreachable: collected while its conjugate is held
    assert mob.is_expired
    for member in ("spot", "pair", "label"):
        with pytest.raises(zs.ExpiredConjugateError):
            getattr(mob, member)
    # The slot is reused by a new object: nothing of the old one shows.
    fresh = PMob()
    fresh.add_to_root()
    assert fresh.spot.x == 0.0 and fresh.pair.a.y == 0.0


def test_a_view_held_across_its_owners_collection_expires(rt: zs.Runtime) -> None:
    mob = PMob()
    mob.spot.x  # parked
    spot = mob.spot  # taken back
    a = mob.pair.a
    collect(rt)
    for view in (spot, a):
        assert view.is_expired and PARENT in repr(view)
        with pytest.raises(zs.ExpiredConjugateError, match=PARENT):
            view.x


def test_dropping_the_holder_releases_its_parked_views(rt: zs.Runtime) -> None:
    holder = PHolder()
    holder.add_to_root()
    holder.mob = PMob()
    before = _class_references()
    for _ in range(50):
        mob = holder.mob  # a new conjugate each time: the last one went
        assert mob is not None
        mob.spot.x = 3.0
        assert mob.pair.b.y == 0.0 and str(mob.label) == "" and len(mob.notes) == 0
        del mob  # the conjugate goes, and the views parked in its table
        PMob().spot.x  # a temporary holder: its only reference is the view's
    collect(rt)
    assert _class_references() == before


def test_a_parked_view_under_a_black_value_expires_with_it(rt: zs.Runtime) -> None:
    before = _class_references()
    pair = PPair((1.0, 2.0), (3.0, 4.0))
    assert pair.a.x == 1.0 and pair.b.y == 4.0  # parked under the black value
    held = pair.b
    pair.dispose()
    assert held.is_expired
    with pytest.raises(zs.ExpiredConjugateError):
        pair.a
    del held, pair
    assert _class_references() == before


def test_replacing_a_struct_expires_the_views_parked_below_it(rt: zs.Runtime) -> None:
    mob = PMob()
    mob.pair = ((1.0, 2.0), (3.0, 4.0))
    assert mob.pair.a.x == 1.0  # pair and pair.a parked
    held = mob.pair.b
    mob.pair = ((5.0, 6.0), (7.0, 8.0))
    assert held.is_expired and STRUCTURE in repr(held)
    assert mob.pair.a.x == 5.0 and mob.pair.b.y == 8.0


def test_a_restructure_expires_the_views_parked_under_an_element(rt: zs.Runtime) -> None:
    mob = PMob()
    mob.add_to_root()
    mob.notes = [("one", (1.0, 1.0))]
    assert len(mob.notes) == 1  # the view of `notes` parks under the object, which lives on
    before = _class_references()
    first = mob.notes[0]
    assert str(first.text) == "one" and first.at.x == 1.0  # parked under the element view
    notes = mob.notes
    while not first.is_expired:  # until the array moves
        notes.append(("more", (0.0, 0.0)))
    assert STRUCTURE in repr(first)
    for member in ("text", "at"):
        with pytest.raises(zs.ExpiredConjugateError, match=STRUCTURE):
            getattr(first, member)
    assert str(mob.notes[0].text) == "one"
    notes.clear()
    del first, notes
    collect(rt)
    assert _class_references() == before


def test_a_parked_view_read_in_a_scope_expires_with_the_scope(rt: zs.Runtime) -> None:
    mob = PMob()
    mob.add_to_root()
    assert mob.spot.x == 0.0 and str(mob.label) == ""  # parked outside any scope
    with zs.scope():
        spot, label = mob.spot, mob.label
        assert not spot.is_expired and mob.spot is spot
    for view in (spot, label):
        assert view.is_expired and SCOPE in repr(view)
    with pytest.raises(zs.ExpiredConjugateError, match=SCOPE):
        spot.x
    again = mob.spot
    assert again is not spot and not again.is_expired and again.x == 0.0
    with zs.scope():
        mob.spot.x = 5.0  # taken back in the scope, dropped there
    assert mob.spot.x == 5.0


def test_a_weakref_callback_reading_the_member_gets_a_new_view(rt: zs.Runtime) -> None:
    # The view is out of its holder's table before the callback runs: the
    # callback's read of the same member must make a new view, never hand
    # out the one being freed.
    mob = PMob()
    mob.add_to_root()
    mob.spot = (7.0, 8.0)
    seen: list[Any] = []

    def callback(_: Any) -> None:
        view = mob.spot
        seen.append((view.x, view.is_expired))

    spot = mob.spot
    ref = weakref.ref(spot, callback)
    del spot
    assert ref() is None and seen == [(7.0, False)]
    assert mob.spot.y == 8.0


def test_closing_the_runtime_expires_parked_views(rt: zs.Runtime) -> None:
    mob = PMob()
    mob.add_to_root()
    assert mob.spot.x == 0.0
    held = mob.label
    rt.close()
    assert held.is_expired
    with pytest.raises(zs.ExpiredConjugateError):
        mob.spot


def test_a_dropped_member_view_is_parked_once_and_reused(rt: zs.Runtime) -> None:
    # A parked view holds a reference to its class: one more after the first
    # read, and no more after many (parking is off in builds that count
    # references, sys.gettotalrefcount).
    parked = 0 if hasattr(sys, "gettotalrefcount") else 1
    mob = PMob()
    mob.add_to_root()
    before = sys.getrefcount(PVec)
    assert mob.spot.x == 0.0
    assert sys.getrefcount(PVec) == before + parked
    for i in range(20):
        mob.spot.x = float(i)
    assert sys.getrefcount(PVec) == before + parked
    del mob  # the conjugate goes: so does the view parked in its table
    assert sys.getrefcount(PVec) == before
