"""The expiry handler's own duties (native/binding/zpy_expiry.c), whoever
collects: Python, a host's C code, ``close()``.

An expiry that fails still expires its conjugate, and its error goes where
someone sees it: raised by the Python call that collected (the first error
of that call; any later one to ``sys.unraisablehook``), to
``sys.unraisablehook`` when a host collected (never kept for some later
Python call to raise), raised by ``close()`` once the runtime is closed
(never a half-closed runtime). The Python state of a conjugate whose expiry
failed is released all the same. And an expiry frees every block it
allocates (the views tables of the conjugates it expires, its list of
stateful conjugates), which tracemalloc measures over many collections.

The one way an expiry fails is running out of memory for the expired
conjugate's record (its ``ExpiredPointer``: the name later errors give);
``rt.gc._debug_fail_expiries(n)`` makes the next ``n`` expiries fail that
way (test-only fault injection, docs/reliability.md, "Faults")."""

from __future__ import annotations

import weakref
from typing import Any

import pytest

import zsharp_py as zs
from helpers import collect, growth, runtime_ptr
from zsharp_py._base.ffi import lib

HAND_OVER_BATCH = 256  # objects per call of the expiry handler (native/src/expiry.c)


class Spot(zs.Struct):
    x: zs.Float64
    y: zs.Float64


class Crate(zs.Object):
    weight: zs.Int32
    where: Spot
    path: zs.Array[Spot]


class Note:
    """Python state a keeper holds; a weak reference tells when it went."""


class Keeper(Crate):
    """A crate with Python state: its conjugate lives in the table until it
    expires, and the expiry releases the state."""

    note: Any = zs.state()


def keepers_with_notes(count: int) -> tuple[list[Keeper], list[weakref.ref[Note]]]:
    """``count`` unreachable keepers, each with a note, and weak references
    to the notes."""
    keepers = [Keeper(weight=i) for i in range(count)]
    notes = []
    for keeper in keepers:
        note = Note()
        keeper.note = note
        notes.append(weakref.ref(note))
    return keepers, notes


def crates_with_views(count: int) -> list[Crate]:
    """``count`` unreachable crates, each with views cached in its
    conjugate's table (a struct member, an array and an element)."""
    crates = [Crate(weight=i) for i in range(count)]
    for crate in crates:
        crate.where.x = 1.0
        crate.path = [Spot(2.0, 3.0)]
        assert crate.path[0].y == 3.0
    return crates


def test_the_fault_injection_takes_a_count(rt: zs.Runtime) -> None:
    with pytest.raises(TypeError, match="count must be an int"):
        rt.gc._debug_fail_expiries(True)
    with pytest.raises(ValueError, match="count must be in"):
        rt.gc._debug_fail_expiries(-1)
    rt.gc._debug_fail_expiries(3)
    assert rt._expiry_faults == 3
    rt.gc._debug_fail_expiries(0)
    crates = crates_with_views(2)
    collect(rt)  # disarmed: nothing fails
    assert all(crate.is_expired for crate in crates)


def test_a_python_collection_raises_the_first_expiry_error_and_reports_the_rest(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    """300 failing expiries in two hand-overs of one collection: the first
    hand-over's error is raised by collect_garbage(), the second's goes to
    sys.unraisablehook (not lost, not raised in its place); every keeper
    expired and its state was released."""
    keepers, notes = keepers_with_notes(300)
    rt.gc._debug_fail_expiries(300)
    with pytest.raises(MemoryError):
        rt.collect_garbage()
    assert rt._expiry_faults == 0  # every expiry ran, and failed
    hand_overs = -(-len(keepers) // HAND_OVER_BATCH)
    assert [type(report.exc_value) for report in unraisable] == [MemoryError] * (hand_overs - 1)
    assert all(report.object is rt for report in unraisable)
    assert all(keeper.is_expired for keeper in keepers)
    assert all(note() is None for note in notes)  # released by the expiry
    with pytest.raises(zs.ExpiredConjugateError, match="has expired"):
        keepers[0].weight
    assert rt.live_objects() == 0
    collect(rt)  # nothing pending: the error was raised once, not kept
    assert len(unraisable) == hand_overs - 1


def test_a_host_collection_reports_an_expiry_error_as_unraisable(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    """No Python call is there to raise it: it is reported at once, and a
    later collection from Python does not raise it as its own."""
    crates = crates_with_views(3)
    keepers, notes = keepers_with_notes(3)
    rt.gc._debug_fail_expiries(2)
    assert lib.zs_collect_garbage(runtime_ptr(rt)) == 0
    assert [type(report.exc_value) for report in unraisable] == [MemoryError]
    assert unraisable[0].object is rt
    assert all(obj.is_expired for obj in crates + keepers)
    assert all(note() is None for note in notes)
    assert rt.live_objects() == 0
    collect(rt)
    rt.gc.start_incremental()
    while not rt.gc.step(max_objects=1):
        pass
    assert len(unraisable) == 1


def test_an_incremental_step_raises_its_expiry_error(rt: zs.Runtime, unraisable: list[Any]) -> None:
    """A step's expiry runs through zpy_expire_dying (not a hand-over inside
    a native step): its error is raised by that step, once; the cycle then
    goes on to its end."""
    crates = crates_with_views(3)
    keepers, notes = keepers_with_notes(3)
    rt.gc._debug_fail_expiries(1)
    rt.gc.start_incremental()
    raised = 0
    done = False
    while not done:
        try:
            done = rt.gc.step(max_objects=1)
        except MemoryError:
            raised += 1
    assert raised == 1 and unraisable == []
    assert all(obj.is_expired for obj in crates + keepers)
    assert all(note() is None for note in notes)
    assert rt.live_objects() == 0
    rt.gc.verify()


def test_close_closes_when_an_expiry_fails_then_raises(unraisable: list[Any]) -> None:
    """close() expires everything, frees the heap and is closed; then it
    raises the expiry's error. A runtime left half-closed (conjugates
    expired, the heap still held) was the old behaviour."""
    rt = zs.Runtime()
    with rt.activate():
        crates = crates_with_views(3)
        keepers, notes = keepers_with_notes(3)
        for obj in crates + keepers:
            obj.add_to_root()
        copy = Spot(5.0, 6.0)  # a black value
    rt.gc._debug_fail_expiries(2)
    with pytest.raises(MemoryError):
        rt.close()
    assert rt.closed and rt.lifecycle == "closed"
    assert all(obj.is_expired for obj in crates + keepers) and copy.is_expired
    assert all(note() is None for note in notes)
    with pytest.raises(zs.ExpiredConjugateError):
        rt.native_address
    rt.close()  # closed: nothing to do
    assert unraisable == []


def expiry_round(rt: zs.Runtime, count: int) -> None:
    """Collect ``count`` crates with views and ``count`` keepers with state,
    two of whose expiries fail."""
    crates = crates_with_views(count)
    keepers, notes = keepers_with_notes(count)
    rt.gc._debug_fail_expiries(2)
    with pytest.raises(MemoryError):
        rt.collect_garbage()
    assert all(obj.is_expired for obj in crates + keepers)
    assert all(note() is None for note in notes)


def test_expiry_frees_what_it_allocates(rt: zs.Runtime) -> None:
    """Traced memory (tracemalloc sees the binding's PyMem blocks) stops
    growing once the caches are warm: over eight more rounds of 500
    expiries each it grows by less than a byte per expiry. A views table
    or a list of stateful conjugates left behind per expiry or per
    hand-over would grow it by kilobytes a round."""
    count = 250
    rounds = 8
    grown, _blocks = growth(rt, lambda: expiry_round(rt, count), times=rounds)
    assert grown < rounds * 2 * count, f"{grown} bytes more after {rounds} rounds"
    assert rt.live_objects() == 0
