"""Element views after a structural change that failed for want of memory.

A structural change (an insertion, an extension, a new key, a rehash, a
whole assignment) may move a container's storage before it fails: a map
that grows its entries and then cannot allocate its new buckets has
already moved every entry. Views taken before must not outlive that: after
the change, done or refused, every element view taken before it is
expired (and after a write replacing one element's value, every view below
that element) (reading one raises ``ExpiredConjugateError``, never freed
memory), the container holds what it held (or, for the changes that add
one element after another, what it held and some of what was added), the
heap verifies, and the container works again once memory is back.

Each test sweeps an injected allocation limit (``ZS_DEBUG_ALLOC_LIMIT``)
from the bytes in use upwards, in steps smaller than any allocation of the
change, until the change succeeds: so every allocation of it fails once,
in particular the one after the storage moved. Under ASan
(``bash tools/sanitize.sh -k views_after_failed``) a read through a view
left pointing into moved storage is reported as a use after free.
tools/mutate.py's "views" selection runs this file first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pytest

import zsharp_py as zs
from helpers import runtime_ptr
from zsharp_py._base.ffi import lib


class FailPoint(zs.Struct):
    x: zs.Float64
    y: zs.Float64


class FailLabel(zs.Struct):
    """Owns memory (its string): its array takes the element-by-element path."""

    text: zs.String
    n: zs.Int32


class Box(zs.Object):
    points: zs.Array[FailPoint]
    labels: zs.Array[FailLabel]
    grid: zs.Array[zs.Array[zs.Int32]]
    table: zs.Map[zs.Int32, FailPoint]
    named: zs.Map[zs.String, FailLabel]
    lists: zs.Map[zs.Int32, zs.Array[zs.Int32]]
    tracks: zs.Map[zs.Int32, zs.Array[FailPoint]]
    paths: zs.Array[zs.Array[FailPoint]]
    ids: zs.Set[zs.Int32]
    words: zs.Set[zs.String]
    maybe: zs.Optional[FailLabel]


ENTRIES = 8  # a hash of 8 entries rehashes (and grows its entries) at the 9th
ELEMENTS = 8  # an array of 8 elements (its capacity) grows at the next insertion


def fill(box: Box) -> None:
    for i in range(ELEMENTS):
        box.points.append(FailPoint(x=i, y=-i))
        box.labels.append(FailLabel(text=f"label {i}", n=i))
        box.grid.append([i, i + 1])
    for i in range(ENTRIES):
        box.table[i] = FailPoint(x=i, y=i)
        box.named[f"key {i}"] = FailLabel(text=f"value {i}", n=i)
        box.lists[i] = [i] * 3
        box.ids.add(i)
        box.words.add(f"word {i}")
    for i in range(3):
        box.tracks[i] = [FailPoint(x=i, y=j) for j in range(3)]
        box.paths.append([FailPoint(x=i, y=j) for j in range(3)])
    box.maybe.set(FailLabel(text="maybe", n=1))


def long(i: int) -> str:
    return f"a string long enough to need its own block {i}" * 3


def element_views(container: str, keys: Iterable[Any]) -> Callable[[Box], list[Any]]:
    """How a case takes its views: the box's `container`, read at each key."""
    keys = list(keys)
    return lambda box: [getattr(box, container)[key] for key in keys]


@dataclass(frozen=True)
class Case:
    """A container of the box, how to take its element views, and a change.
    New elements are plain dicts and lists: converted with no native
    allocation (a black ``FailLabel(...)`` would need one before the change
    even starts)."""

    container: str
    views: Callable[[Box], list[Any]]
    change: Callable[[Box], None]
    whole: bool  # all or nothing; else a prefix of what was added may stay


CASES: dict[str, Case] = {
    "array append": Case(
        "points",
        element_views("points", range(ELEMENTS)),
        lambda b: b.points.append({"x": 9, "y": 9}),
        True,
    ),
    "array insert": Case(
        "points",
        element_views("points", range(ELEMENTS)),
        lambda b: b.points.insert(0, {"x": 9, "y": 9}),
        True,
    ),
    "array extend": Case(
        "points",
        element_views("points", range(ELEMENTS)),
        lambda b: b.points.extend({"x": i, "y": i} for i in range(40)),
        True,
    ),
    "array +=": Case(
        "points",
        element_views("points", range(ELEMENTS)),
        lambda b: b.points.__iadd__([{"x": i, "y": i} for i in range(40)]),
        True,
    ),
    "array slice insert": Case(
        "points",
        element_views("points", range(ELEMENTS)),
        lambda b: b.points.__setitem__(slice(2, 2), [{"x": 7, "y": 7}] * 30),
        True,
    ),
    "array slice replace": Case(
        "points",
        element_views("points", range(ELEMENTS)),
        lambda b: b.points.__setitem__(slice(1, 4), [{"x": 7, "y": 7}] * 30),
        True,
    ),
    "array resize (whole assignment)": Case(
        "points",
        element_views("points", range(ELEMENTS)),
        lambda b: setattr(b, "points", [{"x": i, "y": i} for i in range(60)]),
        True,
    ),
    "array of owners append": Case(
        "labels",
        element_views("labels", range(ELEMENTS)),
        lambda b: b.labels.append({"text": long(1), "n": 9}),
        True,
    ),
    "array of owners insert": Case(
        "labels",
        element_views("labels", range(ELEMENTS)),
        lambda b: b.labels.insert(3, {"text": long(1), "n": 9}),
        True,
    ),
    "array of owners extend": Case(
        "labels",
        element_views("labels", range(ELEMENTS)),
        lambda b: b.labels.extend({"text": long(i), "n": i} for i in range(12)),
        True,
    ),
    "array of arrays append": Case(
        "grid",
        element_views("grid", range(ELEMENTS)),
        lambda b: b.grid.append(list(range(50))),
        True,
    ),
    "map insert (rehash)": Case(
        "table",
        element_views("table", range(ENTRIES)),
        lambda b: b.table.__setitem__(100, {"x": 1, "y": 2}),
        True,
    ),
    "map update": Case(
        "table",
        element_views("table", range(ENTRIES)),
        lambda b: b.table.update({100 + i: {"x": i, "y": i} for i in range(30)}),
        False,
    ),
    "map of owners insert": Case(
        "named",
        element_views("named", (f"key {i}" for i in range(ENTRIES))),
        lambda b: b.named.__setitem__(long(0), {"text": long(1), "n": 9}),
        True,
    ),
    "map of arrays insert": Case(
        "lists",
        element_views("lists", range(ENTRIES)),
        lambda b: b.lists.__setitem__(100, list(range(40))),
        True,
    ),
    "set add (rehash)": Case("ids", lambda b: [], lambda b: b.ids.add(100), True),
    "set update": Case("ids", lambda b: [], lambda b: b.ids.update(range(100, 140)), False),
    "set of strings add": Case("words", lambda b: [], lambda b: b.words.add(long(2)), True),
    "map value replace": Case(
        "tracks",
        lambda b: [b.tracks[0][j] for j in range(3)],
        lambda b: b.tracks.__setitem__(0, [{"x": 9, "y": j} for j in range(40)]),
        True,
    ),
    "array element replace": Case(
        "paths",
        lambda b: [b.paths[0][j] for j in range(3)],
        lambda b: b.paths.__setitem__(0, [{"x": 9, "y": j} for j in range(40)]),
        True,
    ),
    "optional set": Case(
        "maybe",
        lambda b: [b.maybe.get()],
        lambda b: b.maybe.set({"text": long(3), "n": 3}),
        True,
    ),
}


def contents(box: Box, container: str) -> Any:
    """A plain copy of one container (sets and maps as sorted items)."""
    value = getattr(box, container)
    if container == "maybe":
        got = value.get()
        return None if got is None else got.to_python()
    plain = value.to_python()
    if isinstance(plain, dict):
        return sorted(plain.items(), key=repr)
    if isinstance(plain, (set, frozenset)):
        return sorted(plain, key=repr)
    return plain


def attempt(case: Case, extra: int) -> tuple[bool, list[str]]:
    """One change under a limit of `extra` bytes above what is in use, in a
    fresh runtime: whether it succeeded, and how it broke the contract. The
    sweep goes on past a break, so that under ASan it reaches the limits
    where the storage moved: a view left pointing there reports the use
    after free when it is read."""
    problems: list[str] = []
    with zs.Runtime() as rt:
        box = Box()
        box.add_to_root()
        fill(box)
        before = contents(box, case.container)
        views = case.views(box)
        used = rt.native_memory()["live_bytes"]
        lib.zs_debug_set(runtime_ptr(rt), lib.ZS_DEBUG_ALLOC_LIMIT, used + extra)
        try:
            case.change(box)
            done = True
        except MemoryError:
            done = False
        finally:
            lib.zs_debug_set(runtime_ptr(rt), lib.ZS_DEBUG_ALLOC_LIMIT, 0)
        what = f"+{extra} bytes, {'done' if done else 'failed'}"
        for view in views:  # done or refused, the storage may have moved
            try:
                view.to_python()  # under ASan, a stale view reports here
                problems.append(f"{what}: a view outlived the change")
            except zs.ExpiredConjugateError:
                pass
            if not view.is_expired:
                problems.append(f"{what}: a view reads as live")
        after = contents(box, case.container)
        if not done and case.whole and after != before:
            problems.append(f"{what}: the failed change left part of itself")
        elif not done and case.container != "maybe" and not all(x in after for x in before):
            problems.append(f"{what}: the failed change lost elements")
        rt.gc.verify()
        case.change(box)  # memory is back: the container works
        rt.gc.verify()
        if contents(box, case.container) == before:
            problems.append(f"{what}: the change did nothing once memory was back")
        return done, problems


@pytest.mark.parametrize("name", CASES)
def test_views_expire_after_a_failed_structural_change(name: str) -> None:
    case = CASES[name]
    outcomes: list[bool] = []
    problems: list[str] = []
    for extra in range(0, 16_384, 8):
        done, found = attempt(case, extra)
        outcomes.append(done)
        problems += found
        if done:
            break
    assert outcomes[0] is False and outcomes[-1] is True, "the sweep missed a failure or success"
    assert problems == []
