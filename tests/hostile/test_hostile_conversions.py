"""The hostile suite: every entry point that turns a Python value into native
data, and every read that copies native data out, against Python code that
runs in the middle of it (FINDINGS.md, at the repository root, lists what it
found and is the specification these tests encode).

What may run in the middle: a value's conversion hooks (``__float__``,
``__index__``, ``__int__``, ``__bool__``, ``__len__``, ``__iter__``,
``__next__``, ``__eq__``, ``__hash__``, a str subclass's ``encode`` /
``__str__``, an int or float subclass's ``__index__`` / ``__float__``), a
``gc.callbacks`` entry of CPython's cycle collector, or the ``__del__`` of
cyclic garbage (``gc.set_threshold(1, 1, 1)``: the collector runs on nearly
every allocation). What it does (an *action*): grow, clear or replace the
very container being written (its storage moves or is freed), dispose the
black value, mark the owner as garbage and collect it, run a collection,
close the runtime, or raise.

Which moments exist: each *group* (an operation on a container kind and
colour, a property, a constructor, a read) runs once plain in its reach
test (``test_reach_of_*``), with a trigger in each mode that only counts
its calls: the operation succeeds, its result reads back, and the counts
must be those of tests/hostile/reach.json. The matrix's cases act at those
calls only (``moments``), and each case fails if its trigger did not fire:
no test id passes without its hook acting, and a group whose hooks never
run (the library reads a builtin subclass without calling its hooks) is
its one reach test, not a score of ids repeating a plain write. After a
session, a summary line says how many distinct behaviours the matrix
checks and how many cases of the run reached their trigger
(tests/hostile/conftest.py).

The contract, checked for every (entry point x action x moment) test id:

* no crash and no sanitizer report (``bash tools/sanitize.sh -k hostile``);
* the trigger fired at the case's moment (asserted first);
* a hook that raises: that very exception reaches the caller (not rebuilt),
  and the container is exactly as before the call (all or nothing);
* the target was disposed, collected or its runtime closed: the operation
  raises ``ExpiredConjugateError`` (or had completed before the hook ran);
  nothing is written anywhere;
* the target is still alive (grown, cleared, replaced, collected around):
  the value is converted first, then stored into the container *as it is
  after the hook*, and reads back; or a documented exception says why it
  could not be (``IndexError``: the index no longer exists; a view into
  moved storage expired: ``ExpiredConjugateError``), and then the container
  is exactly as the hook left it;
* afterwards the heap verifies (``rt.gc.verify()``) and the runtime closes.
"""

from __future__ import annotations

import contextlib
import gc
import json
import operator
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import zsharp_py as zs
from hostile_support import (
    MATRIX,
    NO_TRIGGER,
    DelTrigger,
    GcTrigger,
    HBool,
    HEq,
    HFloat,
    HFloatSub,
    HHeroHolder,
    HHolder,
    HIndex,
    HInt,
    HIter,
    HMapping,
    HookError,
    HOther,
    HRich,
    HSmall,
    HStr,
    HTiny,
    HVec,
    HWrapped,
    InvalidUtf8Str,
    IThing,
    LyingBytesBytes,
    LyingEncodeStr,
    LyingFloat,
    LyingInt,
    LyingStrStr,
    NotBytesEncodeStr,
    PickyTypeError,
    ShortEncodeStr,
    Trigger,
    counter,
)

DOCUMENTED = (
    TypeError,
    ValueError,
    OverflowError,
    IndexError,
    KeyError,
    zs.ExpiredConjugateError,
    RuntimeError,
    HookError,
)
EXPIRED = zs.ExpiredConjugateError


# The collector-driven cases (a gc.callbacks entry or a finaliser fires the
# action at an allocation: every case runs full collections) are most of the
# matrix's time. The default run takes a fixed sample of them: the first
# case of every entry point and one in SAMPLE_SHARE of the rest, chosen by a
# hash of the test id (the same cases on every machine and run); every
# group's reach test runs its operation under both collector triggers in the
# default run too. The others are marked slow: `python -m pytest -m slow`
# runs them (CI runs a rotating quarter each day: tests/README.md), `-m ""`
# runs the whole matrix.
SAMPLE_SHARE = 32


def _sampled(cases: list[Any]) -> list[Any]:
    """``cases`` (pytest params whose first value names the entry point),
    all but the sample marked slow."""
    seen: set[Any] = set()
    tiered = []
    for case in cases:
        first = case.values[0] not in seen
        seen.add(case.values[0])
        if first or zlib.crc32(case.id.encode()) % SAMPLE_SHARE == 0:
            tiered.append(case)
        else:
            tiered.append(
                pytest.param(*case.values, id=case.id, marks=(*case.marks, pytest.mark.slow))
            )
    return tiered


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------


CASE_CAPACITY = 1 << 16
"""Objects a case's runtime can hold: a case makes a few hundred. Under
the sanitizers (tools/sanitize.sh) the default capacity's 52 MB object
array costs 12 ms a runtime (its shadow poisoned at each allocation and
free), and the suite makes one runtime per case."""


@pytest.fixture
def hrt() -> Iterator[zs.Runtime]:
    """A runtime for one hostile test; afterwards (unless a hook closed it)
    the heap verifies and closing it raises nothing."""
    saved = gc.get_threshold()
    runtime = zs.Runtime(max_objects=CASE_CAPACITY)
    runtime.__enter__()
    try:
        yield runtime
    finally:
        gc.set_threshold(*saved)
        if not runtime.closed:
            runtime.gc.verify()
        runtime.__exit__(None, None, None)
        assert runtime.closed


class SneakyMethod:
    """A method whose lookup (``__get__``) runs the current trigger: delegate
    binding looks the method up between resolving its target and writing."""

    trigger: Trigger = NO_TRIGGER

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        SneakyMethod.trigger()
        if obj is None:
            return self
        return lambda *args: None


class HLookup(zs.Object):
    """An object whose method ``sneaky`` runs the trigger when looked up."""

    value: zs.Int32
    sneaky = SneakyMethod()

    def plain(self, *args: Any) -> None:
        self.value += 1


# ---------------------------------------------------------------------------
# Containers and values under test ("kinds")
# ---------------------------------------------------------------------------


def _snap(value: Any) -> Any:
    """A plain copy of a value conjugate (None once expired)."""
    if value.is_expired:
        return None
    if isinstance(value, zs.Struct):
        return value.to_python()
    if isinstance(value, (zs.String, zs.Utf8String, zs.AnsiString, zs.Text)):
        return str(value)
    if isinstance(value, zs.Delegate):
        return ("delegate", value.is_bound)
    if isinstance(value, (zs.MulticastDelegate, zs.SparseDelegate)):
        return ("multicast", len(value))
    return value.to_python()


@dataclass
class Kind:
    """A container or value type: how to make one (black, or red as the
    property ``prop`` of a rooted HHolder) and what each action does to it."""

    prop: str
    initial: Any
    black: Callable[[], Any]
    grow: Callable[[Any], None] | None = None
    clear: Callable[[Any], None] | None = None
    replacement: Any = None
    views: bool = False  # the op goes through a view that expires when storage moves

    def actions(self, colour: str) -> list[str]:
        names = ["collect", "close", "raise"]
        if self.grow is not None:
            names.append("grow")
        if self.clear is not None:
            names.append("clear")
        if colour == "red":
            names += ["replace", "collect_owner"]
        else:
            names.append("dispose")
        return names


def _grow_array(value: Any) -> None:
    sample = value[0] if len(value) else None
    if isinstance(sample, zs.Struct):
        value.extend([(1, 1.0)] * 3000)
    elif isinstance(sample, (zs.String, zs.Name)):
        value.extend(["grown"] * 3000)
    elif isinstance(sample, bool):
        value.extend([True] * 3000)
    elif isinstance(sample, int):
        value.extend([9] * 3000)
    else:
        value.extend([9.0] * 3000)


KINDS: dict[str, Kind] = {
    "floats": Kind(
        "floats",
        [1.0, 2.0, 3.0],
        lambda: zs.Array[zs.Float64]([1.0, 2.0, 3.0]),
        lambda v: v.extend([9.0] * 5000),
        lambda v: v.clear(),
        [5.0] * 40,
    ),
    "ints": Kind(
        "ints",
        [1, 2, 3],
        lambda: zs.Array[zs.Int32]([1, 2, 3]),
        lambda v: v.extend([9] * 5000),
        lambda v: v.clear(),
        list(range(40)),
    ),
    "flags": Kind(
        "flags",
        [False, False],
        lambda: zs.Array[zs.Bool]([False, False]),
        lambda v: v.extend([False] * 5000),
        lambda v: v.clear(),
        [True] * 40,
    ),
    "vecs": Kind(
        "vecs",
        [(1, 1.0), (2, 2.0)],
        lambda: zs.Array[HVec]([(1, 1.0), (2, 2.0)]),
        lambda v: v.extend([(7, 7.0)] * 3000),
        lambda v: v.clear(),
        [(5, 5.0)] * 40,
    ),
    "vec_views": Kind(
        "vecs",
        [(1, 1.0), (2, 2.0)],
        lambda: zs.Array[HVec]([(1, 1.0), (2, 2.0)]),
        lambda v: v.extend([(7, 7.0)] * 3000),
        lambda v: v.clear(),
        [(5, 5.0)] * 40,
        views=True,
    ),
    "words": Kind(
        "words",
        ["one", "two"],
        lambda: zs.Array[zs.String](["one", "two"]),
        lambda v: v.extend(["grown"] * 3000),
        lambda v: v.clear(),
        ["r"] * 40,
    ),
    "word_views": Kind(
        "words",
        ["one", "two"],
        lambda: zs.Array[zs.String](["one", "two"]),
        lambda v: v.extend(["grown"] * 3000),
        lambda v: v.clear(),
        ["r"] * 40,
        views=True,
    ),
    "names": Kind(
        "names",
        ["one", "two"],
        lambda: zs.Array[zs.Name](["one", "two"]),
        lambda v: v.extend(["grown"] * 3000),
        lambda v: v.clear(),
        ["r"] * 40,
    ),
    "fmap": Kind(
        "fmap",
        {1: 1.0, 2: 2.0},
        lambda: zs.Map[zs.Int32, zs.Float64]({1: 1.0, 2: 2.0}),
        lambda v: v.update(dict.fromkeys(range(100, 3100), 0.5)),
        lambda v: v.clear(),
        dict.fromkeys(range(200, 260), 3.0),
    ),
    "nmap": Kind(
        "nmap",
        {"a": 1, "b": 2},
        lambda: zs.Map[zs.Name, zs.Int32]({"a": 1, "b": 2}),
        lambda v: v.update({f"k{k}": k for k in range(2000)}),
        lambda v: v.clear(),
        {f"r{k}": k for k in range(60)},
    ),
    "vmap": Kind(
        "vmap",
        {1: (1, 1.0)},
        lambda: zs.Map[zs.Int32, HVec]({1: (1, 1.0)}),
        lambda v: v.update({k: (k, 0.0) for k in range(100, 2100)}),
        lambda v: v.clear(),
        {k: (k, 1.0) for k in range(300, 360)},
    ),
    "vmap_views": Kind(
        "vmap",
        {1: (1, 1.0)},
        lambda: zs.Map[zs.Int32, HVec]({1: (1, 1.0)}),
        lambda v: v.update({k: (k, 0.0) for k in range(100, 2100)}),
        lambda v: v.clear(),
        {1: (3, 3.0), **{k: (k, 1.0) for k in range(300, 360)}},
        views=True,
    ),
    "iset": Kind(
        "iset",
        {1, 2, 3},
        lambda: zs.Set[zs.Int32]({1, 2, 3}),
        lambda v: v.update(range(100, 3100)),
        lambda v: v.clear(),
        set(range(500, 560)),
    ),
    "nset": Kind(
        "nset",
        {"a", "b"},
        lambda: zs.Set[zs.Name]({"a", "b"}),
        lambda v: v.update(f"n{k}" for k in range(2000)),
        lambda v: v.clear(),
        {f"r{k}" for k in range(60)},
    ),
    "ofloat": Kind(
        "ofloat",
        1.0,
        lambda: zs.Optional[zs.Float64](1.0),
        lambda v: v.set(7.0),
        lambda v: v.reset(),
        3.0,
    ),
    "ovec": Kind(
        "ovec",
        (1, 1.0),
        lambda: zs.Optional[HVec]((1, 1.0)),
        lambda v: v.set((7, 7.0)),
        lambda v: v.reset(),
        (3, 3.0),
    ),
    "ovec_views": Kind(
        "ovec",
        (1, 1.0),
        lambda: zs.Optional[HVec]((1, 1.0)),
        lambda v: v.set((7, 7.0)),
        lambda v: v.reset(),
        (3, 3.0),
        views=True,
    ),
    "label": Kind(
        "label",
        "text",
        lambda: zs.String("text"),
        lambda v: v.assign("g" * 5000),
        lambda v: v.assign(""),
        "replaced" * 50,
    ),
    "utf8": Kind(
        "utf8",
        "text",
        lambda: zs.Utf8String("text"),
        lambda v: v.assign("g" * 5000),
        lambda v: v.assign(""),
        "replaced" * 50,
    ),
    "ansi": Kind(
        "ansi",
        "text",
        lambda: zs.AnsiString("text"),
        lambda v: v.assign("g" * 5000),
        lambda v: v.assign(""),
        "replaced" * 50,
    ),
    "pos": Kind("pos", (1, 1.0), lambda: HVec(1, 1.0), replacement=(3, 3.0)),
    "rich": Kind(
        "rich",
        {"label": "x", "tag": "t", "nums": [1], "count": 1},
        lambda: HRich("x", "t", [1], 1),
        replacement={"label": "r" * 100, "nums": [5] * 50},
    ),
    "rich_nums": Kind(
        "rich",
        {"label": "x", "tag": "t", "nums": [1], "count": 1},
        lambda: HRich("x", "t", [1], 1),
        lambda v: v.nums.extend([3] * 3000),
        lambda v: v.nums.clear(),
        {"label": "r" * 100, "nums": [5] * 50},
        views=True,
    ),
    "single": Kind(
        "single",
        None,
        lambda: zs.Delegate(),
        lambda v: v.bind(lambda *a: None),
        lambda v: v.unbind(),
        (lambda *a: None),
    ),
    "multi": Kind(
        "multi",
        None,
        lambda: zs.MulticastDelegate(),
        lambda v: [v.add(lambda *a: None) for _ in range(300)],
        lambda v: v.clear(),
        [(lambda *a: None)] * 20,
    ),
    "sparse": Kind(
        "sparse",
        None,
        lambda: zs.SparseDelegate(),
        lambda v: [v.add(lambda *a: None) for _ in range(300)],
        lambda v: v.clear(),
        [(lambda *a: None)] * 20,
    ),
}


@dataclass
class Env:
    """One test's world: the runtime, the rooted holder, the target."""

    rt: zs.Runtime
    kind: Kind
    colour: str
    holder: Any = None
    target: Any = None
    after: Any = "unset"  # the target's contents right after the action
    action_error: BaseException | None = None
    lookup: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def act(self, action: str) -> None:
        """Run the action (from inside a hook)."""
        try:
            self._act(action)
        except HookError:
            raise
        except BaseException as error:  # the action itself refused: recorded
            self.action_error = error
        try:
            self.after = _snap(self.target) if self.target is not None else None
        except BaseException as error:
            self.after = ("unreadable", error)

    def _act(self, action: str) -> None:
        kind, target = self.kind, self.target
        if action == "grow":
            assert kind.grow is not None
            kind.grow(target)
        elif action == "clear":
            assert kind.clear is not None
            kind.clear(target)
        elif action == "replace":
            setattr(self.holder, kind.prop, kind.replacement)
        elif action == "dispose":
            target.dispose()
        elif action == "collect_owner":
            self.holder.remove_from_root()
            self.holder.mark_as_garbage()
            self.rt.collect_garbage()
        elif action == "collect":
            self.rt.collect_garbage()
        elif action == "close":
            self.rt.close()
        elif action == "raise":
            raise HookError("raised by a hook")
        else:
            raise AssertionError(action)


def make_env(rt: zs.Runtime, kind_name: str, colour: str) -> Env:
    kind = KINDS[kind_name]
    env = Env(rt, kind, colour)
    env.holder = HHolder()
    env.holder.add_to_root()
    env.lookup = HLookup()
    env.lookup.add_to_root()
    if colour == "black":
        env.target = kind.black()
    else:
        if kind.initial is not None:
            setattr(env.holder, kind.prop, kind.initial)
        env.target = getattr(env.holder, kind.prop)
    return env


# ---------------------------------------------------------------------------
# Operations on a target: (name, kind names, run(env, trigger), check(env))
# ---------------------------------------------------------------------------


@dataclass
class Op:
    name: str
    kinds: tuple[str, ...]
    run: Callable[[Env, Trigger], Any]
    check: Callable[[Env, Any], bool] | None = None  # None: a read (no readback)
    # Exceptions acceptable when the hook emptied / replaced the container
    # (an index or key that no longer exists).
    gone: tuple[type[BaseException], ...] = ()
    # False: the op changes the target before the hook can run (it binds,
    # then calls), so an exception from the hook leaves those changes.
    atomic: bool = True


def _eq(a: Any, b: Any) -> bool:
    return bool(a == b)


def _setitem(index: Any, value: Any) -> Callable[[Env, Trigger], None]:
    def run(env: Env, t: Trigger) -> None:
        env.target[index(t) if callable(index) else index] = value(t)

    return run


OPS: list[Op] = [
    # ---- Array[Float64]
    Op(
        "setitem_float",
        ("floats",),
        _setitem(0, lambda t: HFloat(t, 42.0)),
        lambda e, r: e.target[0] == 42.0,
        (IndexError,),
    ),
    Op(
        "setitem_float_last",
        ("floats",),
        _setitem(-1, lambda t: HFloat(t, 42.0)),
        lambda e, r: e.target[-1] == 42.0,
        (IndexError,),
    ),
    Op(
        "setitem_float_subclass",
        ("floats",),
        _setitem(1, lambda t: HFloatSub(42.5, t)),
        lambda e, r: e.target[1] == 42.5,
        (IndexError,),
    ),
    Op(
        "setitem_float_int_index",
        ("floats",),
        _setitem(lambda t: HInt(0, t), lambda t: 42.0),
        lambda e, r: e.target[0] == 42.0,
        (IndexError,),
    ),
    Op(
        "slice_float",
        ("floats",),
        lambda e, t: e.target.__setitem__(slice(0, 2), [HFloat(t, 42.0), HFloat(t, 43.0)]),
        lambda e, r: e.target[0] == 42.0 and e.target[1] == 43.0,
    ),
    Op(
        "slice_float_iter",
        ("floats",),
        lambda e, t: e.target.__setitem__(slice(0, 1), HIter(t, [HFloat(t, 42.0)])),
        lambda e, r: e.target[0] == 42.0,
    ),
    Op(
        "extended_slice_float",
        ("floats",),
        lambda e, t: e.target.__setitem__(slice(0, 3, 2), [HFloat(t, 42.0), HFloat(t, 43.0)]),
        lambda e, r: e.target[0] == 42.0 and e.target[2] == 43.0,
        (ValueError, IndexError),
    ),
    Op(
        "append_float",
        ("floats",),
        lambda e, t: e.target.append(HFloat(t, 42.0)),
        lambda e, r: e.target[-1] == 42.0,
    ),
    Op(
        "insert_float",
        ("floats",),
        lambda e, t: e.target.insert(0, HFloat(t, 42.0)),
        lambda e, r: e.target[0] == 42.0,
    ),
    Op(
        "insert_float_int_index",
        ("floats",),
        lambda e, t: e.target.insert(HInt(1, t), 42.0),
        lambda e, r: 42.0 in e.target.to_python(),
    ),
    Op(
        "extend_float",
        ("floats",),
        lambda e, t: e.target.extend(HIter(t, [HFloat(t, 42.0), HFloat(t, 43.0)])),
        lambda e, r: e.target.to_python()[-2:] == [42.0, 43.0],
    ),
    Op(
        "iadd_float",
        ("floats",),
        lambda e, t: operator.iadd(e.target, [HFloat(t, 42.0)]),
        lambda e, r: e.target[-1] == 42.0,
    ),
    Op("index_float", ("floats",), lambda e, t: e.target.index(HEq(t, 2.0)), None, (ValueError,)),
    Op("count_float", ("floats",), lambda e, t: e.target.count(HEq(t, 2.0))),
    Op("contains_float", ("floats",), lambda e, t: HEq(t, 2.0) in e.target),
    Op("remove_float", ("floats",), lambda e, t: e.target.remove(HEq(t, 2.0)), None, (ValueError,)),
    Op("pop_float", ("floats",), lambda e, t: e.target.pop(HInt(0, t)), None, (IndexError,)),
    Op(
        "delitem_float",
        ("floats",),
        lambda e, t: e.target.__delitem__(HInt(0, t)),
        None,
        (IndexError,),
    ),
    Op("eq_float", ("floats",), lambda e, t: e.target == [HEq(t, 1.0), 2.0, 3.0]),
    # ---- Array[Int32]
    Op(
        "setitem_index",
        ("ints",),
        _setitem(0, lambda t: HIndex(t, 42)),
        lambda e, r: e.target[0] == 42,
        (IndexError,),
    ),
    Op(
        "setitem_int_subclass",
        ("ints",),
        _setitem(0, lambda t: HInt(42, t)),
        lambda e, r: e.target[0] == 42,
        (IndexError,),
    ),
    Op(
        "setitem_int_index_value",
        ("ints",),
        _setitem(lambda t: HInt(1, t), lambda t: HInt(42, t)),
        lambda e, r: e.target[1] == 42,
        (IndexError,),
    ),
    Op(
        "append_index",
        ("ints",),
        lambda e, t: e.target.append(HIndex(t, 42)),
        lambda e, r: e.target[-1] == 42,
    ),
    Op(
        "insert_index",
        ("ints",),
        lambda e, t: e.target.insert(1, HIndex(t, 42)),
        lambda e, r: 42 in e.target.to_python(),
    ),
    Op(
        "extend_index",
        ("ints",),
        lambda e, t: e.target.extend(HIter(t, [HIndex(t, 42), 43])),
        lambda e, r: e.target.to_python()[-2:] == [42, 43],
    ),
    Op(
        "slice_index",
        ("ints",),
        lambda e, t: e.target.__setitem__(slice(1, None), [HInt(42, t), HIndex(t, 43)]),
        lambda e, r: e.target.to_python()[-2:] == [42, 43],
    ),
    Op("index_int", ("ints",), lambda e, t: e.target.index(HInt(2, t)), None, (ValueError,)),
    Op("remove_int", ("ints",), lambda e, t: e.target.remove(HInt(2, t)), None, (ValueError,)),
    # ---- Array[Bool]
    Op(
        "setitem_bool",
        ("flags",),
        _setitem(0, lambda t: HBool(t, True)),
        lambda e, r: e.target[0] is True,
        (IndexError,),
    ),
    Op(
        "append_bool",
        ("flags",),
        lambda e, t: e.target.append(HBool(t, True)),
        lambda e, r: e.target[-1] is True,
    ),
    # ---- Array[HVec] (struct elements from tuples and dicts)
    Op(
        "setitem_tuple",
        ("vecs",),
        _setitem(0, lambda t: (HIndex(t, 42), HFloat(t, 4.5))),
        lambda e, r: e.target[0].to_python() == {"x": 42, "y": 4.5},
        (IndexError,),
    ),
    Op(
        "setitem_dict",
        ("vecs",),
        _setitem(1, lambda t: {"x": HIndex(t, 42), "y": HFloat(t, 4.5)}),
        lambda e, r: e.target[1].to_python() == {"x": 42, "y": 4.5},
        (IndexError,),
    ),
    Op(
        "append_tuple",
        ("vecs",),
        lambda e, t: e.target.append((HIndex(t, 42), HFloat(t, 4.5))),
        lambda e, r: e.target[-1].to_python() == {"x": 42, "y": 4.5},
    ),
    Op(
        "extend_tuples",
        ("vecs",),
        lambda e, t: e.target.extend(HIter(t, [(HIndex(t, 42), 4.5), (43, HFloat(t, 5.5))])),
        lambda e, r: (
            [v.to_python() for v in e.target][-2:] == [{"x": 42, "y": 4.5}, {"x": 43, "y": 5.5}]
        ),
    ),
    Op("to_python_vecs", ("vecs",), lambda e, t: (t(), e.target.to_python())[1]),
    Op(
        "element_view_x",
        ("vec_views",),
        lambda e, t: setattr(e.target[0], "x", HIndex(t, 42)),
        lambda e, r: e.target[0].x == 42,
        (IndexError, EXPIRED),
    ),
    Op(
        "element_view_y",
        ("vec_views",),
        lambda e, t: setattr(e.target[1], "y", HFloat(t, 4.5)),
        lambda e, r: e.target[1].y == 4.5,
        (IndexError, EXPIRED),
    ),
    Op(
        "element_view_assign",
        ("vec_views",),
        lambda e, t: e.extra.setdefault("view", e.target[0]).__setattr__("x", HInt(42, t)),
        lambda e, r: e.target[0].x == 42,
        (IndexError, EXPIRED),
    ),
    # ---- Array[String]
    Op(
        "setitem_str",
        ("words",),
        _setitem(0, lambda t: HStr("forty-two", t)),
        lambda e, r: str(e.target[0]) == "forty-two",
        (IndexError,),
    ),
    Op(
        "append_str",
        ("words",),
        lambda e, t: e.target.append(HStr("forty-two", t)),
        lambda e, r: str(e.target[-1]) == "forty-two",
    ),
    Op("contains_str", ("words",), lambda e, t: HStr("two", t) in e.target),
    Op("index_str", ("words",), lambda e, t: e.target.index(HStr("two", t)), None, (ValueError,)),
    Op(
        "element_string_assign",
        ("word_views",),
        lambda e, t: e.target[0].assign(HStr("forty-two", t)),
        lambda e, r: str(e.target[0]) == "forty-two",
        (IndexError, EXPIRED),
    ),
    Op(
        "held_string_view_assign",
        ("word_views",),
        lambda e, t: e.extra.setdefault("view", e.target[1]).assign(HStr("forty-two", t)),
        lambda e, r: str(e.target[1]) == "forty-two",
        (IndexError, EXPIRED),
    ),
    # ---- Array[Name]
    Op(
        "setitem_name",
        ("names",),
        _setitem(0, lambda t: HStr("FortyTwo", t)),
        lambda e, r: e.target[0] == "fortytwo",
        (IndexError,),
    ),
    Op(
        "append_name",
        ("names",),
        lambda e, t: e.target.append(HStr("FortyTwo", t)),
        lambda e, r: e.target[-1] == "fortytwo",
    ),
    Op("contains_name", ("names",), lambda e, t: HStr("one", t) in e.target),
    # ---- Map[Int32, Float64]
    Op(
        "map_set_value",
        ("fmap",),
        _setitem(1, lambda t: HFloat(t, 42.0)),
        lambda e, r: e.target[1] == 42.0,
    ),
    Op(
        "map_set_new_key",
        ("fmap",),
        _setitem(lambda t: HInt(7, t), lambda t: HFloat(t, 42.0)),
        lambda e, r: e.target[7] == 42.0,
    ),
    Op(
        "map_set_index_key",
        ("fmap",),
        _setitem(lambda t: HEq(t, 8), lambda t: 42.0),
        lambda e, r: e.target[8] == 42.0,
    ),
    Op(
        "map_setdefault",
        ("fmap",),
        lambda e, t: e.target.setdefault(HInt(9, t), HFloat(t, 42.0)),
        lambda e, r: e.target[9] == 42.0,
    ),
    Op(
        "map_update_mapping",
        ("fmap",),
        lambda e, t: e.target.update(HMapping(t, {10: HFloat(t, 42.0)})),
        lambda e, r: e.target[10] == 42.0,
    ),
    Op(
        "map_update_pairs",
        ("fmap",),
        lambda e, t: e.target.update(HIter(t, [(HInt(11, t), HFloat(t, 42.0))])),
        lambda e, r: e.target[11] == 42.0,
    ),
    Op("map_getitem", ("fmap",), lambda e, t: e.target[HInt(1, t)], None, (KeyError,)),
    Op("map_get", ("fmap",), lambda e, t: e.target.get(HInt(2, t))),
    Op("map_contains", ("fmap",), lambda e, t: HInt(2, t) in e.target),
    Op("map_pop", ("fmap",), lambda e, t: e.target.pop(HInt(1, t)), None, (KeyError,)),
    Op("map_delitem", ("fmap",), lambda e, t: e.target.__delitem__(HInt(2, t)), None, (KeyError,)),
    Op("map_eq", ("fmap",), lambda e, t: e.target == {1: HEq(t, 1.0), 2: 2.0}),
    # ---- Map[Name, Int32]
    Op(
        "name_map_set",
        ("nmap",),
        _setitem(lambda t: HStr("Alpha", t), lambda t: HIndex(t, 42)),
        lambda e, r: e.target["alpha"] == 42,
    ),
    Op(
        "name_map_set_existing",
        ("nmap",),
        _setitem(lambda t: HStr("A", t), lambda t: HInt(42, t)),
        lambda e, r: e.target["a"] == 42,
    ),
    Op("name_map_get", ("nmap",), lambda e, t: e.target.get(HStr("a", t))),
    Op(
        "name_map_setdefault",
        ("nmap",),
        lambda e, t: e.target.setdefault(HStr("Zed", t), HIndex(t, 42)),
        lambda e, r: e.target["zed"] == 42,
    ),
    Op("name_map_keys", ("nmap",), lambda e, t: (t(), e.target.keys())[1]),
    # ---- Map[Int32, HVec]
    Op(
        "struct_map_set",
        ("vmap",),
        _setitem(1, lambda t: (HIndex(t, 42), HFloat(t, 4.5))),
        lambda e, r: e.target[1].to_python() == {"x": 42, "y": 4.5},
    ),
    Op("struct_map_items", ("vmap",), lambda e, t: (t(), e.target.items())[1]),
    Op(
        "struct_map_value_view",
        ("vmap_views",),
        lambda e, t: setattr(e.target[1], "x", HIndex(t, 42)),
        lambda e, r: e.target[1].x == 42,
        (KeyError, EXPIRED),
    ),
    # ---- Set[Int32], Set[Name]
    Op(
        "set_add_int",
        ("iset",),
        lambda e, t: e.target.add(HInt(42, t)),
        lambda e, r: 42 in e.target,
    ),
    Op(
        "set_add_index",
        ("iset",),
        lambda e, t: e.target.add(HIndex(t, 42)),
        lambda e, r: 42 in e.target,
    ),
    Op(
        "set_update",
        ("iset",),
        lambda e, t: e.target.update(HIter(t, [HInt(42, t), 43])),
        lambda e, r: 42 in e.target and 43 in e.target,
    ),
    Op("set_discard", ("iset",), lambda e, t: e.target.discard(HInt(1, t))),
    Op("set_remove", ("iset",), lambda e, t: e.target.remove(HInt(2, t)), None, (KeyError,)),
    Op("set_contains", ("iset",), lambda e, t: HInt(3, t) in e.target),
    Op("set_eq", ("iset",), lambda e, t: e.target == {HInt(1, t), 2, 3}),
    Op(
        "name_set_add",
        ("nset",),
        lambda e, t: e.target.add(HStr("Alpha", t)),
        lambda e, r: "alpha" in e.target,
    ),
    Op("name_set_contains", ("nset",), lambda e, t: HStr("a", t) in e.target),
    # ---- Optional
    Op(
        "optional_set",
        ("ofloat",),
        lambda e, t: e.target.set(HFloat(t, 42.0)),
        lambda e, r: e.target.value == 42.0,
    ),
    Op("optional_get_default", ("ofloat",), lambda e, t: e.target.get(HFloat(t, 1.0))),
    Op("optional_eq", ("ofloat",), lambda e, t: e.target == HEq(t, 1.0)),
    Op(
        "optional_set_struct",
        ("ovec",),
        lambda e, t: e.target.set((HIndex(t, 42), HFloat(t, 4.5))),
        lambda e, r: e.target.value.to_python() == {"x": 42, "y": 4.5},
    ),
    Op(
        "optional_value_view",
        ("ovec_views",),
        lambda e, t: setattr(e.target.value, "x", HIndex(t, 42)),
        lambda e, r: e.target.value.x == 42,
        (ValueError, EXPIRED),
    ),
    # ---- strings
    Op(
        "string_assign",
        ("label", "utf8", "ansi"),
        lambda e, t: e.target.assign(HStr("forty-two", t)),
        lambda e, r: str(e.target) == "forty-two",
    ),
    Op("string_eq", ("label", "utf8", "ansi"), lambda e, t: e.target == HStr("text", t)),
    Op("string_contains", ("label", "utf8", "ansi"), lambda e, t: HStr("ex", t) in e.target),
    Op("string_add", ("label", "utf8", "ansi"), lambda e, t: e.target + HStr("!", t)),
    Op("string_radd", ("label", "utf8", "ansi"), lambda e, t: HStr("!", t) + e.target),
    Op("string_str", ("label", "utf8", "ansi"), lambda e, t: (t(), str(e.target))[1]),
    # ---- structs
    Op(
        "member_int",
        ("pos",),
        lambda e, t: setattr(e.target, "x", HIndex(t, 42)),
        lambda e, r: e.target.x == 42,
    ),
    Op(
        "member_int_subclass",
        ("pos",),
        lambda e, t: setattr(e.target, "x", HInt(42, t)),
        lambda e, r: e.target.x == 42,
    ),
    Op(
        "member_float",
        ("pos",),
        lambda e, t: setattr(e.target, "y", HFloat(t, 4.5)),
        lambda e, r: e.target.y == 4.5,
    ),
    Op("struct_eq", ("pos",), lambda e, t: e.target == (HEq(t, 1), 1.0)),
    Op("struct_iter", ("pos",), lambda e, t: (t(), list(e.target))[1]),
    Op(
        "member_string",
        ("rich",),
        lambda e, t: setattr(e.target, "label", HStr("forty-two", t)),
        lambda e, r: e.target.label == "forty-two",
    ),
    Op(
        "member_name",
        ("rich",),
        lambda e, t: setattr(e.target, "tag", HStr("FortyTwo", t)),
        lambda e, r: e.target.tag == "fortytwo",
    ),
    Op(
        "member_array",
        ("rich",),
        lambda e, t: setattr(e.target, "nums", HIter(t, [HIndex(t, 42), HInt(43, t)])),
        lambda e, r: e.target.nums == [42, 43],
    ),
    Op(
        "member_scalar_rich",
        ("rich",),
        lambda e, t: setattr(e.target, "count", HIndex(t, 42)),
        lambda e, r: e.target.count == 42,
    ),
    Op(
        "member_array_append",
        ("rich_nums",),
        lambda e, t: e.target.nums.append(HIndex(t, 42)),
        lambda e, r: e.target.nums[-1] == 42,
        (EXPIRED,),
    ),
    Op(
        "member_array_setitem",
        ("rich_nums",),
        lambda e, t: e.target.nums.__setitem__(0, HIndex(t, 42)),
        lambda e, r: e.target.nums[0] == 42,
        (IndexError, EXPIRED),
    ),
    # ---- delegates
    Op(
        "bind_sneaky",
        ("single",),
        lambda e, t: e.target.bind(e.lookup, "sneaky"),
        lambda e, r: e.target.is_bound,
    ),
    Op(
        "bind_hstr_name",
        ("single",),
        lambda e, t: e.target.bind(e.lookup, HStr("plain", t)),
        lambda e, r: e.target.is_bound,
    ),
    Op(
        "bind_callable",
        ("single",),
        lambda e, t: e.target.bind(lambda *a: t()),
        lambda e, r: e.target.is_bound,
    ),
    Op(
        "execute_hostile",
        ("single",),
        lambda e, t: (e.target.bind(lambda *a: t()), e.target.execute()),
        None,
        (RuntimeError,),
        atomic=False,
    ),
    Op(
        "add_sneaky",
        ("multi", "sparse"),
        lambda e, t: e.target.add(e.lookup, "sneaky"),
        lambda e, r: e.target.is_bound,
    ),
    Op(
        "add_hstr_name",
        ("multi", "sparse"),
        lambda e, t: e.target.add(e.lookup, HStr("plain", t)),
        lambda e, r: e.target.is_bound,
    ),
    Op(
        "add_unique_sneaky",
        ("multi", "sparse"),
        lambda e, t: e.target.add_unique(e.lookup, "sneaky"),
    ),
    Op(
        "remove_sneaky",
        ("multi", "sparse"),
        lambda e, t: (e.target.add(e.lookup, "plain"), e.target.remove(e.lookup, "sneaky")),
    ),
    Op(
        "broadcast_hostile",
        ("multi", "sparse"),
        lambda e, t: ([e.target.add(lambda *a: t()) for _ in range(3)], e.target.broadcast(1)),
        atomic=False,
    ),
    Op("contains_callable", ("multi", "sparse"), lambda e, t: HEq(t, 0) in e.target),
]

OPS_BY_NAME = {op.name: op for op in OPS}


# ---------------------------------------------------------------------------
# Reach: how many times each group's trigger runs (tests/hostile/reach.json)
# ---------------------------------------------------------------------------

REACH_FILE = Path(__file__).with_name("reach.json")
REACH_COMMAND = (
    'python -m pytest tests/hostile/test_hostile_conversions.py -m "" -k test_reach_of '
    "--update-hostile-reach"
)
THIS_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def _load_reach() -> tuple[str, dict[str, dict[str, int]]]:
    """The reach table: for every group (an operation on a kind and colour,
    a property, a constructor, a read), how many times its trigger runs in
    each mode when it never acts; and the Python it was measured on (the
    cycle collector's moments depend on the interpreter's allocations)."""
    if not REACH_FILE.exists():
        return "", {}
    data = json.loads(REACH_FILE.read_text())
    return str(data["python"]), dict(data["groups"])


REACH_PYTHON, REACH = _load_reach()


GC_SLACK = 1
"""How far below the table the number of cycle collections inside one
operation may fall. It is not a property of the operation alone: the
collector runs on a count of allocations net of frees, so an object made
before the call and freed during it, or a cache the call fills the first
time the process uses a type, moves it. Measured over ten orders of the
matrix (forward, reverse, four shuffled, each family alone): the count was
off the table in 54 of 3,619 measurements, by -1 (45), +1 (7) or +2 (2), in
18 of 517 groups. So the matrix acts at none of a group's last ``GC_SLACK``
collections, and a reach test requires at least the table's count less
``GC_SLACK`` (more collections leave every case's moment in reach). Hook
and finaliser counts never varied and are checked exactly."""


def moments(mode: str, reach: int, gc_last: int = 4) -> tuple[int, ...]:
    """The calls of a trigger at which a case runs its action, given how
    many times the trigger runs in a plain run (``reach``): a hook's first
    three; the cycle collector's first and its ``gc_last``-th (or the last
    it surely reaches, ``GC_SLACK``); a finaliser's first (the doomed
    objects die in one collection). None when the trigger never runs:
    every such case would be the same plain operation, which the group's
    reach test checks once."""
    if mode == "gc":
        reach -= GC_SLACK
    if reach <= 0:
        return ()
    if mode == "hook":
        return tuple(range(1, min(reach, 3) + 1))
    if mode == "gc":
        return tuple(sorted({1, min(reach, gc_last)}))
    return (1,)


def _reach_of(group: str, mode: str) -> int:
    return REACH.get(group, {}).get(mode, 0)


def _check_reach(group: str, measured: dict[str, int]) -> None:
    """A group's plain run against the table: its hooks and finalisers run
    exactly as often as the table says, the cycle collector at least as
    often less ``GC_SLACK``, so its cases fire where they act (else they
    would pass without their hook ever acting)."""
    MATRIX.groups.add(group)  # also for a group new to the table
    if MATRIX.measured is not None:
        MATRIX.measured[group] = measured
        return
    recorded = REACH.get(group)
    assert recorded is not None, (
        f"{group} is not in tests/hostile/reach.json (new?): measure it with {REACH_COMMAND}"
    )
    other = (
        f" (the table was measured on Python {REACH_PYTHON}, this is {THIS_PYTHON})"
        if REACH_PYTHON != THIS_PYTHON
        else ""
    )
    assert recorded.keys() == measured.keys() and all(
        measured[mode] >= count - GC_SLACK if mode == "gc" else measured[mode] == count
        for mode, count in recorded.items()
    ), (
        f"{group}: its triggers ran {measured} times, tests/hostile/reach.json says "
        f"{recorded}{other}; the matrix's cases of this group no longer fire where it "
        f"says: if the change is meant, re-measure with {REACH_COMMAND}"
    )
    MATRIX.plain += 1


def _attempt(
    mode: str, trigger: Trigger, run: Callable[[], Any]
) -> tuple[Any, BaseException | None, int, bool]:
    """``run()`` with ``mode``'s trigger installed: its result or its
    exception, and the trigger's calls and whether it fired, read as soon
    as ``run`` returns (a finaliser trigger's exit collects what is left,
    which may call it again: that is after the operation)."""
    result: Any = None
    error: BaseException | None = None
    with _trigger_context(mode, trigger):
        try:
            result = run()
        except BaseException as raised:  # judged by the caller
            error = raised
        calls, fired = trigger.calls, trigger.fired
    return result, error, calls, fired


def _reached(group: str, mode: str, when: int, calls: int, fired: bool, refused: bool) -> None:
    """A case exists because its trigger fires at call ``when``: it fails if
    it did not (the reach table is out of date), and is counted."""
    assert fired, (
        f"{group}: the {mode} trigger ran {calls} times, never reaching call {when} where "
        f"this case acts (tests/hostile/reach.json says {_reach_of(group, mode)}): "
        f"re-measure with {REACH_COMMAND}"
    )
    MATRIX.reached[mode] += 1
    MATRIX.refused += refused


def _register(params: list[Any], mode_at: int) -> list[Any]:
    """Count a family's cases in the matrix's totals (by their mode, the
    ``mode_at``-th value of each param)."""
    for param in params:
        MATRIX.cases[param.values[mode_at]] += 1
    return params


def _write_group(op_name: str, kind_name: str, colour: str) -> str:
    return f"write:{op_name}-{kind_name}-{colour}"


def _write_groups() -> list[Any]:
    groups = []
    for op in OPS:
        for kind_name in op.kinds:
            for colour in ("black", "red"):
                MATRIX.groups.add(_write_group(op.name, kind_name, colour))
                groups.append(
                    pytest.param(op.name, kind_name, colour, id=f"{op.name}-{kind_name}-{colour}")
                )
    return groups


def _cases(modes: tuple[str, ...]) -> list[Any]:
    """(operation, kind, colour, action, mode, moment): every moment at
    which the group's trigger runs in that mode (``moments``)."""
    cases = []
    for op in OPS:
        for kind_name in op.kinds:
            kind = KINDS[kind_name]
            for colour in ("black", "red"):
                group = _write_group(op.name, kind_name, colour)
                for action in kind.actions(colour):
                    for mode in modes:
                        if mode != "hook" and action == "raise":
                            continue  # a gc callback's or finaliser's exception is unraisable
                        for when in moments(mode, _reach_of(group, mode)):
                            cases.append(
                                pytest.param(
                                    op.name,
                                    kind_name,
                                    colour,
                                    action,
                                    mode,
                                    when,
                                    id=f"{op.name}-{kind_name}-{colour}-{action}-{mode}{when}",
                                )
                            )
    return _register(cases, 4)


def _trigger_context(mode: str, trigger: Trigger) -> contextlib.AbstractContextManager[Any]:
    if mode == "gc":
        return GcTrigger(trigger)
    if mode == "del":
        return DelTrigger(trigger)
    return contextlib.nullcontext()


def _short(value: Any) -> str:
    """A repr short enough for an assertion message."""
    text = repr(value)
    return text if len(text) < 200 else text[:200] + f"... ({len(text)} characters)"


def _same_state(a: Any, b: Any) -> bool:
    """Equality that never prints the (possibly huge) operands."""
    return bool(a == b)


def _alive(value: Any) -> bool:
    return value is not None and not value.is_expired


MOVES_STORAGE = ("grow", "clear", "replace")
"""Actions after which a view into the target's storage may have expired
(the storage moved or was freed); after any other action a live target's
views stay valid."""


def judge(
    env: Env,
    op: Op,
    action: str,
    before: Any,
    result: Any,
    error: BaseException | None,
) -> None:
    """The contract of the module docstring, for a case whose trigger fired."""
    if error is not None and not isinstance(error, DOCUMENTED):
        raise AssertionError(f"undocumented exception {type(error).__name__}: {error}") from error
    if error is not None:
        assert str(error), f"{type(error).__name__} without a message"
    if env.action_error is not None:
        return  # the action was refused (documented): invariants only
    if action == "raise":
        assert isinstance(error, HookError), f"the hook's exception was lost: {error!r}"
        assert error.args == ("raised by a hook",)
        if _alive(env.target) and op.atomic:
            assert _same_state(_snap(env.target), before), (
                "a write interrupted by an exception left changes"
            )
        return
    if action in ("dispose", "collect_owner", "close"):
        if error is not None:
            allowed_dead = (EXPIRED,) + (op.gone if op.check is None else ())
            assert isinstance(error, allowed_dead), f"expected ExpiredConjugateError, got {error!r}"
        assert env.target.is_expired
        return
    # The target is still alive (unless it is a view of moved storage).
    if error is None:
        if op.check is not None and _alive(env.target):
            try:
                ok = op.check(env, result)
            except EXPIRED:
                ok = False
            assert ok, (
                f"the value written does not read back after the hook's {action}: "
                f"{_short(_snap(env.target))}"
            )
        return
    allowed: tuple[type[BaseException], ...] = op.gone if action in ("clear", "replace") else ()
    if env.kind.views and action in MOVES_STORAGE:
        allowed += (EXPIRED,)
    assert isinstance(error, allowed), (
        f"{type(error).__name__}: {error} after the hook's {action} (the target is alive)"
    )
    if _alive(env.target) and op.check is not None:
        assert _same_state(_snap(env.target), env.after), "refused, yet the container changed"


@pytest.mark.parametrize("op_name, kind_name, colour", _write_groups())
def test_reach_of_write(hrt: zs.Runtime, op_name: str, kind_name: str, colour: str) -> None:
    """The group's operation with plain moments: a counting trigger in each
    mode (the value's hooks; the cycle collector's callback; the doomed
    objects' finalisers) that never acts. The operation succeeds and what
    it wrote reads back, and each trigger ran as many times as
    tests/hostile/reach.json says, which is where the group's cases act."""
    op = OPS_BY_NAME[op_name]
    measured: dict[str, int] = {}
    for mode in ("hook", "gc", "del"):
        env = make_env(hrt, kind_name, colour)
        count = counter()
        value_trigger = count if mode == "hook" else NO_TRIGGER
        SneakyMethod.trigger = value_trigger
        try:
            result, error, calls, _ = _attempt(mode, count, partial(op.run, env, value_trigger))
        finally:
            SneakyMethod.trigger = NO_TRIGGER
        if error is not None:
            raise AssertionError(f"{mode}: {error!r} although nothing acted") from error
        if op.check is not None:
            assert op.check(env, result), f"{mode}: the value written does not read back"
        measured[mode] = calls
        _still_sound(hrt, env)
    _check_reach(_write_group(op_name, kind_name, colour), measured)


@pytest.mark.parametrize("op_name, kind_name, colour, action, mode, when", _cases(("hook",)))
def test_hook_mutates_during_write(
    hrt: zs.Runtime, op_name: str, kind_name: str, colour: str, action: str, mode: str, when: int
) -> None:
    """A conversion hook of the value being written runs the action."""
    _run_case(hrt, op_name, kind_name, colour, action, mode, when)


@pytest.mark.parametrize(
    "op_name, kind_name, colour, action, mode, when", _sampled(_cases(("gc", "del")))
)
def test_collector_mutates_during_call(
    hrt: zs.Runtime,
    op_name: str,
    kind_name: str,
    colour: str,
    action: str,
    mode: str,
    when: int,
    unraisable: list[Any],
) -> None:
    """CPython's cycle collector (gc.callbacks, or a finaliser) runs the
    action at an allocation inside the call; the values are plain."""
    _run_case(hrt, op_name, kind_name, colour, action, mode, when)
    assert not [u for u in unraisable if not isinstance(u.exc_value, HookError)], unraisable


def _run_case(
    rt: zs.Runtime, op_name: str, kind_name: str, colour: str, action: str, mode: str, when: int
) -> None:
    op = OPS_BY_NAME[op_name]
    env = make_env(rt, kind_name, colour)
    trigger = Trigger(lambda: env.act(action), when)
    value_trigger = trigger if mode == "hook" else NO_TRIGGER
    before = _snap(env.target)
    SneakyMethod.trigger = value_trigger
    try:
        result, error, calls, fired = _attempt(mode, trigger, partial(op.run, env, value_trigger))
    finally:
        SneakyMethod.trigger = NO_TRIGGER
    group = _write_group(op_name, kind_name, colour)
    _reached(group, mode, when, calls, fired, env.action_error is not None)
    judge(env, op, action, before, result, error)
    _still_sound(rt, env)


def _still_sound(rt: zs.Runtime, env: Env | None = None) -> None:
    """The heap verifies, what is alive reads, and the runtime closes cleanly."""
    if rt.closed:
        return
    rt.gc.verify()
    if env is not None:
        if _alive(env.target):
            _snap(env.target)
            repr(env.target)
        if env.holder is not None and not env.holder.is_expired:
            env.holder.name
    rt.collect_garbage()
    rt.gc.verify()


# ---------------------------------------------------------------------------
# Object property setters (the holder is the target)
# ---------------------------------------------------------------------------


@dataclass
class PropCase:
    name: str
    prop: str
    value: Callable[[Trigger, Env], Any]
    check: Callable[[Any], bool]
    cls: type = HHolder


PROP_CASES: list[PropCase] = [
    PropCase("f64", "f64", lambda t, e: HFloat(t, 42.0), lambda v: v == 42.0),
    PropCase("f64_float_subclass", "f64", lambda t, e: HFloatSub(42.5, t), lambda v: v == 42.5),
    PropCase("f32", "f32", lambda t, e: HFloat(t, 4.5), lambda v: v == 4.5),
    PropCase("i32", "i32", lambda t, e: HIndex(t, 42), lambda v: v == 42),
    PropCase("i32_int_subclass", "i32", lambda t, e: HInt(42, t), lambda v: v == 42),
    PropCase("i8", "i8", lambda t, e: HIndex(t, -5), lambda v: v == -5),
    PropCase("u64", "u64", lambda t, e: HInt(2**63, t), lambda v: v == 2**63),
    PropCase("i64", "i64", lambda t, e: HIndex(t, -(2**40)), lambda v: v == -(2**40)),
    PropCase("flag", "flag", lambda t, e: HBool(t, True), lambda v: v is True),
    PropCase("string", "label", lambda t, e: HStr("forty-two", t), lambda v: v == "forty-two"),
    PropCase("utf8", "utf8", lambda t, e: HStr("héllo", t), lambda v: v == "héllo"),
    PropCase("ansi", "ansi", lambda t, e: HStr("plain", t), lambda v: v == "plain"),
    PropCase("text", "text", lambda t, e: HStr("shown", t), lambda v: v == "shown"),
    PropCase("name", "tag", lambda t, e: HStr("FortyTwo", t), lambda v: v == "fortytwo"),
    PropCase(
        "array_float",
        "floats",
        lambda t, e: HIter(t, [HFloat(t, 42.0), 1.0]),
        lambda v: v == [42.0, 1.0],
    ),
    PropCase("array_int", "ints", lambda t, e: HIter(t, [HIndex(t, 42)]), lambda v: v == [42]),
    PropCase("array_bool", "flags", lambda t, e: [HBool(t, True)], lambda v: v == [True]),
    PropCase(
        "array_struct",
        "vecs",
        lambda t, e: HIter(t, [(HIndex(t, 42), HFloat(t, 4.5))]),
        lambda v: [x.to_python() for x in v] == [{"x": 42, "y": 4.5}],
    ),
    PropCase("array_string", "words", lambda t, e: HIter(t, [HStr("w", t)]), lambda v: v == ["w"]),
    PropCase("array_name", "names", lambda t, e: [HStr("N", t)], lambda v: v == ["n"]),
    PropCase(
        "map",
        "fmap",
        lambda t, e: HMapping(t, {HInt(1, t): HFloat(t, 42.0)}),
        lambda v: v == {1: 42.0},
    ),
    PropCase("map_dict", "fmap", lambda t, e: {1: HFloat(t, 42.0)}, lambda v: v == {1: 42.0}),
    PropCase(
        "name_map", "nmap", lambda t, e: {HStr("K", t): HIndex(t, 42)}, lambda v: v == {"k": 42}
    ),
    PropCase("struct_map", "vmap", lambda t, e: {1: (HIndex(t, 42), 1.0)}, lambda v: v[1].x == 42),
    PropCase("set", "iset", lambda t, e: HIter(t, [HInt(42, t)]), lambda v: v == {42}),
    PropCase("name_set", "nset", lambda t, e: [HStr("Q", t)], lambda v: v == {"q"}),
    PropCase("optional", "ofloat", lambda t, e: HFloat(t, 42.0), lambda v: v == 42.0),
    PropCase(
        "optional_struct",
        "ovec",
        lambda t, e: (HIndex(t, 42), HFloat(t, 4.5)),
        lambda v: v.value.x == 42,
    ),
    PropCase(
        "struct_tuple",
        "pos",
        lambda t, e: (HIndex(t, 42), HFloat(t, 4.5)),
        lambda v: v.to_python() == {"x": 42, "y": 4.5},
    ),
    PropCase(
        "struct_dict",
        "pos",
        lambda t, e: {"y": HFloat(t, 4.5), "x": HInt(42, t)},
        lambda v: v.to_python() == {"x": 42, "y": 4.5},
    ),
    PropCase(
        "struct_rich",
        "rich",
        lambda t, e: {
            "label": HStr("L", t),
            "tag": HStr("T", t),
            "nums": HIter(t, [HIndex(t, 1)]),
            "count": HIndex(t, 2),
        },
        lambda v: v.label == "L" and v.tag == "t" and v.nums == [1] and v.count == 2,
    ),
    PropCase("delegate_sneaky", "single", lambda t, e: (e.lookup, "sneaky"), lambda v: v.is_bound),
    PropCase(
        "delegate_hstr", "single", lambda t, e: (e.lookup, HStr("plain", t)), lambda v: v.is_bound
    ),
    PropCase(
        "multicast",
        "multi",
        lambda t, e: HIter(t, [(e.lookup, "sneaky"), (e.lookup, HStr("plain", t))]),
        lambda v: len(v) == 2,
    ),
    PropCase(
        "sparse",
        "sparse",
        lambda t, e: HIter(t, [(e.lookup, HStr("plain", t))]),
        lambda v: len(v) == 1,
    ),
    PropCase(
        "field_path", "path", lambda t, e: HStr("HHolder.i32", t), lambda v: str(v) == "HHolder.i32"
    ),
    PropCase(
        "soft",
        "soft",
        lambda t, e: HStr("Outer.Thing", t),
        lambda v: v.path == "Outer.Thing",
        HWrapped,
    ),
    PropCase(
        "soft_class",
        "soft_class",
        lambda t, e: HStr("hostile_support.HHolder", t),
        lambda v: v.path == "hostile_support.HHolder",
        HWrapped,
    ),
    PropCase("wrapped_count", "count", lambda t, e: HIndex(t, 42), lambda v: v == 42, HWrapped),
]

PROP_ACTIONS = ("collect", "close", "raise", "collect_owner", "reassign")


def _prop_group(name: str) -> str:
    return f"property:{name}"


def _prop_groups() -> list[str]:
    MATRIX.groups.update(_prop_group(case.name) for case in PROP_CASES)
    return [case.name for case in PROP_CASES]


def _prop_cases(modes: tuple[str, ...]) -> list[Any]:
    cases = []
    for case in PROP_CASES:
        for action in PROP_ACTIONS:
            for mode in modes:
                if mode != "hook" and action == "raise":
                    continue
                for when in moments(mode, _reach_of(_prop_group(case.name), mode)):
                    cases.append(
                        pytest.param(
                            case.name, action, mode, when, id=f"{case.name}-{action}-{mode}{when}"
                        )
                    )
    return _register(cases, 2)


PROP_BY_NAME = {case.name: case for case in PROP_CASES}


def _prop_snapshot(value: Any) -> Any:
    if isinstance(value, (zs.String, zs.Utf8String, zs.AnsiString, zs.Text)):
        return str(value)
    if hasattr(value, "is_expired") and hasattr(value, "to_python") and not isinstance(value, type):
        try:
            return _snap(value)
        except TypeError:
            return repr(value)
    return value if not isinstance(value, (zs.Name, zs.FieldPath)) else str(value)


def _prop_env(rt: zs.Runtime, case: PropCase) -> Env:
    env = Env(rt, KINDS["floats"], "red")
    env.lookup = HLookup()
    env.lookup.add_to_root()
    env.holder = case.cls()
    env.holder.add_to_root()
    return env


def _set_prop(
    env: Env, case: PropCase, mode: str, trigger: Trigger
) -> tuple[BaseException | None, int, bool]:
    """``holder.prop = value``, the value made first (its hooks counted from
    the write on), with ``mode``'s trigger installed."""
    value_trigger = trigger if mode == "hook" else NO_TRIGGER
    value = case.value(value_trigger, env)
    trigger.arm()
    SneakyMethod.trigger = value_trigger
    try:
        _, error, calls, fired = _attempt(
            mode, trigger, partial(setattr, env.holder, case.prop, value)
        )
    finally:
        SneakyMethod.trigger = NO_TRIGGER
    return error, calls, fired


@pytest.mark.parametrize("name", _prop_groups())
def test_reach_of_property_setter(hrt: zs.Runtime, name: str) -> None:
    """The property written with plain moments in each mode (as
    ``test_reach_of_write``): it reads back, and the triggers ran as many
    times as tests/hostile/reach.json says."""
    case = PROP_BY_NAME[name]
    measured: dict[str, int] = {}
    for mode in ("hook", "gc", "del"):
        env = _prop_env(hrt, case)
        error, calls, _ = _set_prop(env, case, mode, counter(armed=False))
        if error is not None:
            raise AssertionError(f"{mode}: {error!r} although nothing acted") from error
        assert case.check(getattr(env.holder, case.prop)), f"{mode}: it does not read back"
        measured[mode] = calls
        _still_sound(hrt, env)
    _check_reach(_prop_group(name), measured)


def _run_prop_case(rt: zs.Runtime, name: str, action: str, mode: str, when: int) -> None:
    case = PROP_BY_NAME[name]
    env = _prop_env(rt, case)
    holder = env.holder

    def act() -> None:
        try:
            if action == "collect":
                rt.collect_garbage()
            elif action == "close":
                rt.close()
            elif action == "raise":
                raise HookError("raised by a hook")
            elif action == "collect_owner":
                holder.remove_from_root()
                holder.mark_as_garbage()
                rt.collect_garbage()
            elif action == "reassign":  # the same property, written from inside the write
                setattr(holder, case.prop, getattr(holder, case.prop))
        except HookError:
            raise
        except BaseException as error:
            env.action_error = error

    trigger = Trigger(act, when, armed=False)
    before = _prop_snapshot(getattr(holder, case.prop))
    error, calls, fired = _set_prop(env, case, mode, trigger)
    _reached(_prop_group(name), mode, when, calls, fired, env.action_error is not None)
    if error is not None and not isinstance(error, DOCUMENTED):
        raise AssertionError(f"undocumented {type(error).__name__}: {error}") from error
    if env.action_error is not None or action in ("collect", "reassign"):
        if error is not None and env.action_error is None:
            raise AssertionError(f"{error!r} although the holder is alive") from error
        if error is None:
            assert case.check(getattr(holder, case.prop)), "the value written does not read back"
    elif action == "raise":
        assert isinstance(error, HookError), f"the hook's exception was lost: {error!r}"
        assert _prop_snapshot(getattr(holder, case.prop)) == before, "a refused write left changes"
    else:  # close, collect_owner
        assert error is None or isinstance(error, EXPIRED), error
        assert holder.is_expired
    _still_sound(rt, env)


@pytest.mark.parametrize("name, action, mode, when", _prop_cases(("hook",)))
def test_property_setter_hook(
    hrt: zs.Runtime, name: str, action: str, mode: str, when: int
) -> None:
    """``holder.prop = value`` whose conversion runs the action."""
    _run_prop_case(hrt, name, action, mode, when)


@pytest.mark.parametrize("name, action, mode, when", _sampled(_prop_cases(("gc", "del"))))
def test_property_setter_collector(
    hrt: zs.Runtime, name: str, action: str, mode: str, when: int, unraisable: list[Any]
) -> None:
    """``holder.prop = value`` while CPython's collector runs the action."""
    _run_prop_case(hrt, name, action, mode, when)
    assert not unraisable, unraisable


# ---------------------------------------------------------------------------
# Constructors
# ---------------------------------------------------------------------------

CTORS: dict[str, tuple[Callable[[Trigger, Any], Any], Callable[[Any], bool]]] = {
    "object_kwargs": (
        lambda t, lk: HHolder(
            f64=HFloat(t, 42.0),
            i32=HIndex(t, 42),
            label=HStr("L", t),
            floats=HIter(t, [HFloat(t, 1.0)]),
            pos=(HIndex(t, 1), 2.0),
            tag=HStr("T", t),
        ),
        lambda v: (
            v.f64 == 42.0
            and v.i32 == 42
            and v.label == "L"
            and v.floats == [1.0]
            and v.pos.x == 1
            and v.tag == "t"
        ),
    ),
    "object_scalar_kwargs": (
        lambda t, lk: HHolder(f64=HFloatSub(4.5, t), flag=HBool(t, True)),
        lambda v: v.f64 == 4.5 and v.flag is True,
    ),
    "object_name_kwarg": (
        lambda t, lk: HHolder(name=HStr("Named", t)),
        lambda v: v.name == "Named",
    ),
    "object_outer": (
        lambda t, lk: HHolder(outer=lk, ints=HIter(t, [HIndex(t, 3)])),
        lambda v: v.ints == [3],
    ),
    "struct_args": (
        lambda t, lk: HVec(HIndex(t, 42), HFloat(t, 4.5)),
        lambda v: v.to_python() == {"x": 42, "y": 4.5},
    ),
    "struct_kwargs": (
        lambda t, lk: HRich(
            label=HStr("L", t), tag=HStr("T", t), nums=HIter(t, [HIndex(t, 1)]), count=HInt(2, t)
        ),
        lambda v: v.label == "L" and v.nums == [1] and v.count == 2,
    ),
    "array": (
        lambda t, lk: zs.Array[zs.Float64](HIter(t, [HFloat(t, 42.0), 1.0])),
        lambda v: v == [42.0, 1.0],
    ),
    "array_structs": (
        lambda t, lk: zs.Array[HVec](HIter(t, [(HIndex(t, 1), HFloat(t, 2.0))])),
        lambda v: v[0].to_python() == {"x": 1, "y": 2.0},
    ),
    "array_strings": (
        lambda t, lk: zs.Array[zs.String]([HStr("a", t), HStr("b", t)]),
        lambda v: v == ["a", "b"],
    ),
    "map": (
        lambda t, lk: zs.Map[zs.Int32, zs.Float64](HMapping(t, {HInt(1, t): HFloat(t, 2.0)})),
        lambda v: v == {1: 2.0},
    ),
    "map_names": (
        lambda t, lk: zs.Map[zs.Name, zs.Int32]({HStr("A", t): HIndex(t, 1)}),
        lambda v: v == {"a": 1},
    ),
    "set": (
        lambda t, lk: zs.Set[zs.Int32](HIter(t, [HInt(1, t), HIndex(t, 2)])),
        lambda v: v == {1, 2},
    ),
    "set_names": (lambda t, lk: zs.Set[zs.Name](HIter(t, [HStr("A", t)])), lambda v: v == {"a"}),
    "optional": (lambda t, lk: zs.Optional[zs.Float64](HFloat(t, 42.0)), lambda v: v == 42.0),
    "optional_struct": (
        lambda t, lk: zs.Optional[HVec]((HIndex(t, 4), 1.0)),
        lambda v: v.value.x == 4,
    ),
    "string": (lambda t, lk: zs.String(HStr("héllo", t)), lambda v: str(v) == "héllo"),
    "utf8": (lambda t, lk: zs.Utf8String(HStr("héllo", t)), lambda v: str(v) == "héllo"),
    "ansi": (lambda t, lk: zs.AnsiString(HStr("plain", t)), lambda v: str(v) == "plain"),
    "text": (lambda t, lk: zs.Text(HStr("shown", t)), lambda v: str(v) == "shown"),
    "name": (lambda t, lk: zs.Name(HStr("Named_3", t)), lambda v: str(v) == "Named_3"),
    "field_path": (
        lambda t, lk: zs.FieldPath(HStr("HHolder.pos.x", t)),
        lambda v: str(v) == "HHolder.pos.x",
    ),
    "field_path_class": (
        lambda t, lk: zs.FieldPath(HHolder, HStr("pos.x", t)),
        lambda v: str(v) == "HHolder.pos.x",
    ),
    "delegate": (lambda t, lk: zs.Delegate(lk, "sneaky"), lambda v: v.is_bound),
    "delegate_hstr": (lambda t, lk: zs.Delegate(lk, HStr("plain", t)), lambda v: v.is_bound),
    "multicast": (
        lambda t, lk: zs.MulticastDelegate(HIter(t, [(lk, HStr("plain", t))])),
        lambda v: len(v) == 1,
    ),
    "soft": (
        lambda t, lk: zs.SoftObjectPtr[HHolder](HStr("Outer.Thing", t)),
        lambda v: v.path == "Outer.Thing",
    ),
    "soft_class": (
        lambda t, lk: zs.SoftClassPtr[HHolder](HStr("hostile_support.HHolder", t)),
        lambda v: v.path == "hostile_support.HHolder",
    ),
    "strong_ptr": (lambda t, lk: (t(), zs.StrongObjectPtr(lk))[1], lambda v: v.get() is not None),
    "weak_ptr": (
        lambda t, lk: (t(), zs.WeakObjectPtr(lk))[1],
        lambda v: isinstance(v.get(), HLookup),
    ),
    "script_interface": (
        lambda t, lk: (t(), zs.ScriptInterface[IThing](HHolder()))[1],
        lambda v: v.is_valid and isinstance(v.get(), HHolder) and v.interface is IThing,
    ),
}

CTOR_ACTIONS = ("collect", "close", "raise", "collect_everything")
USES_LOOKUP = {"delegate", "delegate_hstr", "multicast", "object_outer", "strong_ptr", "weak_ptr"}
"""The constructors that take the rooted HLookup (``lk``): collecting it
mid-construction may make them raise ExpiredConjugateError; the others must
not notice."""


def _ctor_group(name: str) -> str:
    return f"constructor:{name}"


def _ctor_groups() -> list[str]:
    MATRIX.groups.update(_ctor_group(name) for name in CTORS)
    return list(CTORS)


def _ctor_cases(modes: tuple[str, ...]) -> list[Any]:
    return _register(
        [
            pytest.param(name, action, mode, when, id=f"{name}-{action}-{mode}{when}")
            for name in CTORS
            for action in CTOR_ACTIONS
            for mode in modes
            if not (mode != "hook" and action == "raise")
            for when in moments(mode, _reach_of(_ctor_group(name), mode))
        ],
        2,
    )


def _construct(
    name: str, lookup: Any, mode: str, trigger: Trigger
) -> tuple[Any, BaseException | None, int, bool]:
    """The constructor ``name`` with ``mode``'s trigger installed."""
    make, _ = CTORS[name]
    value_trigger = trigger if mode == "hook" else NO_TRIGGER
    SneakyMethod.trigger = value_trigger
    try:
        return _attempt(mode, trigger, partial(make, value_trigger, lookup))
    finally:
        SneakyMethod.trigger = NO_TRIGGER


@pytest.mark.parametrize("name", _ctor_groups())
def test_reach_of_constructor(hrt: zs.Runtime, name: str) -> None:
    """The constructor with plain moments in each mode (as
    ``test_reach_of_write``): what it made reads back, and the triggers ran
    as many times as tests/hostile/reach.json says."""
    _, check = CTORS[name]
    measured: dict[str, int] = {}
    for mode in ("hook", "gc", "del"):
        lookup = HLookup()
        lookup.add_to_root()
        made, error, calls, _ = _construct(name, lookup, mode, counter())
        if error is not None:
            raise AssertionError(f"{mode}: {error!r} although nothing acted") from error
        assert check(made), f"{mode}: what was made does not read back"
        measured[mode] = calls
        made = None
        _still_sound(hrt)
    _check_reach(_ctor_group(name), measured)


def _run_ctor(rt: zs.Runtime, name: str, action: str, mode: str, when: int) -> None:
    _, check = CTORS[name]
    lookup = HLookup()
    lookup.add_to_root()
    action_error: list[BaseException] = []
    values_before = rt.values_alive()
    objects_before = rt.live_objects()

    def act() -> None:
        try:
            if action == "collect":
                rt.collect_garbage()
            elif action == "close":
                rt.close()
            elif action == "raise":
                raise HookError("raised by a hook")
            elif action == "collect_everything":
                lookup.remove_from_root()
                lookup.mark_as_garbage()
                rt.collect_garbage()
        except HookError:
            raise
        except BaseException as error:
            action_error.append(error)

    made, error, calls, fired = _construct(name, lookup, mode, Trigger(act, when))
    _reached(_ctor_group(name), mode, when, calls, fired, bool(action_error))
    if error is not None and not isinstance(error, DOCUMENTED):
        raise AssertionError(f"undocumented {type(error).__name__}: {error}") from error
    if action_error or action == "collect":
        if error is not None and not action_error:
            raise AssertionError(f"{error!r} although nothing was destroyed") from error
        if error is None and not rt.closed:
            assert check(made), "the value made does not read back"
    elif action == "raise":
        assert isinstance(error, HookError), f"the hook's exception was lost: {error!r}"
        gc.collect()
        rt.collect_garbage()
        assert rt.values_alive() == values_before, "a refused constructor leaked a value"
        assert rt.live_objects() <= objects_before + 1
    elif action == "close":
        assert error is None or isinstance(error, EXPIRED), error
        if made is not None and hasattr(made, "is_expired"):
            # alive only if made after the close (the hook ran while the test
            # built the arguments), on the runtime current then
            assert (
                made.is_expired is True
                or isinstance(made, (zs.Name, zs.FieldPath, zs.WeakObjectPtr))
                or (made._rt is not rt and not made._rt.closed)
            )
    elif name in USES_LOOKUP:  # collect_everything: the object it takes went away
        assert error is None or isinstance(error, EXPIRED), error
    else:  # collect_everything, and nothing made depends on what went away
        assert error is None, error
        assert check(made), "the value made does not read back"
    made = None
    _still_sound(rt)


@pytest.mark.parametrize("name, action, mode, when", _ctor_cases(("hook",)))
def test_constructor_hook(hrt: zs.Runtime, name: str, action: str, mode: str, when: int) -> None:
    """Constructors whose arguments' hooks run the action."""
    _run_ctor(hrt, name, action, mode, when)


@pytest.mark.parametrize("name, action, mode, when", _sampled(_ctor_cases(("gc", "del"))))
def test_constructor_collector(
    hrt: zs.Runtime, name: str, action: str, mode: str, when: int, unraisable: list[Any]
) -> None:
    """Constructors while CPython's collector runs the action."""
    _run_ctor(hrt, name, action, mode, when)
    assert not unraisable, unraisable


# ---------------------------------------------------------------------------
# Reads that copy out, while the collector mutates
# ---------------------------------------------------------------------------

READS: dict[str, Callable[[Any], Any]] = {
    "to_python": lambda v: v.to_python(),
    "iterate": lambda v: list(iter(v)),
    "repr": repr,
    "str": str,
    "eq_self_copy": lambda v: v == v.to_python(),
    "len": len,
}
READ_KINDS = (
    "floats",
    "ints",
    "vecs",
    "words",
    "names",
    "fmap",
    "nmap",
    "vmap",
    "iset",
    "nset",
    "ofloat",
    "ovec",
    "label",
    "utf8",
    "pos",
    "rich",
    "multi",
)
READ_ACTIONS = ("grow", "clear", "replace", "collect_owner", "dispose", "collect", "close")


def _read_group(kind_name: str, read: str, colour: str) -> str:
    return f"read:{read}-{kind_name}-{colour}"


def _read_groups() -> list[Any]:
    groups = []
    for kind_name in READ_KINDS:
        for read in READS:
            if read == "len" and kind_name in ("pos", "rich", "ofloat", "ovec"):
                continue
            for colour in ("black", "red"):
                MATRIX.groups.add(_read_group(kind_name, read, colour))
                groups.append(
                    pytest.param(kind_name, read, colour, id=f"{read}-{kind_name}-{colour}")
                )
    return groups


def _read_cases() -> list[Any]:
    cases = []
    for kind_name, read, colour in (group.values for group in _read_groups()):
        kind = KINDS[kind_name]
        group = _read_group(kind_name, read, colour)
        for action in kind.actions(colour):
            if action not in READ_ACTIONS:
                continue
            for mode in ("gc", "del"):
                for when in moments(mode, _reach_of(group, mode), gc_last=3):
                    cases.append(
                        pytest.param(
                            kind_name,
                            read,
                            colour,
                            action,
                            mode,
                            when,
                            id=f"{read}-{kind_name}-{colour}-{action}-{mode}{when}",
                        )
                    )
    return _register(cases, 4)


@pytest.mark.parametrize("kind_name, read, colour", _read_groups())
def test_reach_of_read(
    hrt: zs.Runtime, kind_name: str, read: str, colour: str, unraisable: list[Any]
) -> None:
    """The read with plain moments (the cycle collector's callback, the
    doomed objects' finalisers, counting and never acting): it copies out
    what the target holds, and the triggers ran as many times as
    tests/hostile/reach.json says."""
    measured: dict[str, int] = {"hook": 0}  # a read converts no Python value
    for mode in ("gc", "del"):
        env = make_env(hrt, kind_name, colour)
        before = _snap(env.target)
        result, error, calls, _ = _attempt(mode, counter(), partial(READS[read], env.target))
        if error is not None:
            raise AssertionError(f"{mode}: {error!r} although nothing acted") from error
        if read == "to_python":
            if isinstance(env.target, (zs.MulticastDelegate, zs.SparseDelegate)):
                result = ("multicast", len(result))
            assert _same_state(result, before), f"{mode}: {_short(result)}"
        measured[mode] = calls
        _still_sound(hrt, env)
    assert not unraisable, unraisable
    _check_reach(_read_group(kind_name, read, colour), measured)


@pytest.mark.parametrize("kind_name, read, colour, action, mode, when", _sampled(_read_cases()))
def test_read_while_collector_mutates(
    hrt: zs.Runtime,
    kind_name: str,
    read: str,
    colour: str,
    action: str,
    mode: str,
    when: int,
    unraisable: list[Any],
) -> None:
    """A copy out (to_python, iteration, repr, str, ==, len) is either a
    consistent copy (the contents before or after the action, never a mix
    read from freed storage) or raises ExpiredConjugateError (the target
    went away: disposed, its owner collected, its runtime closed; never
    while it lives) or, iterating, RuntimeError (it changed size)."""
    env = make_env(hrt, kind_name, colour)
    trigger = Trigger(lambda: env.act(action), when)
    before = _snap(env.target)
    result, error, calls, fired = _attempt(mode, trigger, partial(READS[read], env.target))
    group = _read_group(kind_name, read, colour)
    _reached(group, mode, when, calls, fired, env.action_error is not None)
    if error is not None and action in ("close", "collect_owner", "dispose"):
        assert isinstance(error, EXPIRED), f"{type(error).__name__}: {error}"
        assert env.target.is_expired
    elif error is not None:  # a live target: only an iteration may stop, its size changed
        assert isinstance(error, RuntimeError), f"{type(error).__name__}: {error}"
        assert read == "iterate" and "changed size during iteration" in str(error), error
        assert action in MOVES_STORAGE, action
    elif read in ("to_python",) and env.action_error is None:
        if isinstance(env.target, (zs.MulticastDelegate, zs.SparseDelegate)):
            result = ("multicast", len(result))  # compared as _snap sees it
        assert _same_state(result, before) or _same_state(result, env.after), (
            f"a torn copy: {_short(result)}"
        )
    assert not unraisable, unraisable
    _still_sound(hrt, env)


# ---------------------------------------------------------------------------
# Iteration while the array changes size (class 7)
# ---------------------------------------------------------------------------

ITER_ARRAYS: dict[str, tuple[Callable[[int], Any], Any]] = {
    "float": (lambda n: zs.Array[zs.Float64]([0.5] * n), 1.0),
    "int": (lambda n: zs.Array[zs.Int32](range(n)), 1),
    "bool": (lambda n: zs.Array[zs.Bool]([True] * n), False),
    "struct": (lambda n: zs.Array[HVec]([(1, 1.0)] * n), (2, 2.0)),
    "string": (lambda n: zs.Array[zs.String](["s"] * n), "t"),
    "name": (lambda n: zs.Array[zs.Name](["s"] * n), "t"),
}


@pytest.mark.parametrize("size", [1, 2, 255, 256, 257, 1000])
@pytest.mark.parametrize("element", list(ITER_ARRAYS))
@pytest.mark.parametrize("change", ["append", "pop", "clear", "extend"])
def test_iteration_raises_when_the_size_changes(
    hrt: zs.Runtime, element: str, size: int, change: str
) -> None:
    """Like ``list`` would not, but like ``dict`` does: an array whose size
    changes while it is iterated raises RuntimeError at the next step,
    whatever its size (the scalar path read the whole of an array of 256
    elements or fewer in one chunk and never noticed)."""
    make, extra = ITER_ARRAYS[element]
    array = make(size)
    seen = 0
    with pytest.raises(RuntimeError, match="changed size during iteration"):
        for _ in array:
            seen += 1
            if seen > size + 5:
                break
            if seen == 1:
                if change == "append":
                    array.append(extra)
                elif change == "pop":
                    array.pop()
                elif change == "clear":
                    array.clear()
                else:
                    array.extend([extra] * 10)
    array.dispose()


# ---------------------------------------------------------------------------
# Descriptors applied to an instance of another class (class 2)
# ---------------------------------------------------------------------------

PROPERTY_VALUES: dict[str, Any] = {
    "f64": 1.5,
    "f32": 1.5,
    "i32": 3,
    "i8": 3,
    "u64": 3,
    "i64": 3,
    "flag": True,
    "label": "x",
    "utf8": "x",
    "ansi": "x",
    "text": "x",
    "tag": "x",
    "ref": None,
    "weak": None,
    "floats": [1.0] * 64,
    "ints": [1] * 64,
    "flags": [True] * 64,
    "vecs": [(1, 1.0)] * 8,
    "words": ["w"] * 8,
    "names": ["n"] * 8,
    "fmap": {1: 1.0},
    "nmap": {"k": 1},
    "vmap": {1: (1, 1.0)},
    "iset": {1, 2},
    "nset": {"q"},
    "ofloat": 2.0,
    "ovec": (1, 1.0),
    "pos": (7, 7.5),
    "rich": {"label": "L" * 40, "count": 9},
    "single": None,
    "multi": None,
    "sparse": None,
    "path": "HHolder.i32",
    "level": 4,
}
WRAPPED_VALUES: dict[str, Any] = {
    "kind": None,
    "soft": "Outer.Name",
    "soft_class": None,
    "lazy": None,
    "iface": None,
    "count": 3,
}


def _foreign_targets(rt: zs.Runtime) -> dict[str, Any]:
    other = zs.Runtime()
    other.__enter__()
    try:
        foreign_small = HSmall()
        foreign_small.add_to_root()
    finally:
        other.__exit__(None, None, None)
    expired = HSmall()
    hrt_collect(rt)
    return {
        "small": HSmall(b=7),
        "other_class": HOther(weight=2.5),
        "wrapped": HWrapped(),
        "plain_object": object(),
        "int": 5,
        "str": "text",
        "struct_view": HHolder().pos,
        "black_struct": HTiny(1),
        "array": zs.Array[zs.Int32]([1]),
        "other_runtime_closed": foreign_small,
        "expired": expired,
    }


def hrt_collect(rt: zs.Runtime) -> None:
    rt.collect_garbage()


def _descriptor_cases() -> list[Any]:
    cases = []
    names = list(PROPERTY_VALUES)
    for name in names:
        owner = "HHeroHolder" if name == "level" else "HHolder"
        for target in (
            "small",
            "other_class",
            "wrapped",
            "plain_object",
            "int",
            "str",
            "struct_view",
            "black_struct",
            "array",
            "other_runtime_closed",
            "expired",
        ):
            for how in ("get", "set"):
                cases.append(
                    pytest.param(owner, name, target, how, id=f"{owner}.{name}-{how}-{target}")
                )
    for name in WRAPPED_VALUES:
        for target in ("small", "other_class", "plain_object", "struct_view", "expired"):
            for how in ("get", "set"):
                cases.append(
                    pytest.param(
                        "HWrapped", name, target, how, id=f"HWrapped.{name}-{how}-{target}"
                    )
                )
    return cases


def _call_descriptor(descriptor: Any, instance: Any, how: str, value: Any) -> Any:
    if how == "get":
        if isinstance(descriptor, property):
            return descriptor.fget(instance)  # type: ignore[misc]
        return descriptor.__get__(instance, type(instance))
    if isinstance(descriptor, property):
        return descriptor.fset(instance, value)  # type: ignore[misc]
    return descriptor.__set__(instance, value)


@pytest.mark.parametrize("owner, name, target, how", _descriptor_cases())
def test_descriptor_refuses_an_instance_of_another_class(
    hrt: zs.Runtime, owner: str, name: str, target: str, how: str
) -> None:
    """``Big.prop.fget(tiny)``, ``.fset``, ``.__get__``, ``.__set__`` with an
    instance that is not of the descriptor's class (or a subclass): a
    TypeError naming the property, never a read or write through the
    other object's memory. An expired instance (collected, or of a closed
    runtime) raises ExpiredConjugateError: its expiry is checked first,
    and nothing of it is read either way."""
    cls = {"HHolder": HHolder, "HHeroHolder": HHeroHolder, "HWrapped": HWrapped}[owner]
    cls()  # lay the class out
    descriptor = cls.__dict__[name]
    targets = _foreign_targets(hrt)
    instance = targets[target]
    values = WRAPPED_VALUES if cls is HWrapped else PROPERTY_VALUES
    small_before = targets["small"].b
    if target == "wrapped" and cls is HWrapped:
        return
    expected = EXPIRED if target in ("expired", "other_runtime_closed") else TypeError
    with pytest.raises(expected) as info:
        _call_descriptor(descriptor, instance, how, values[name])
    if expected is TypeError:
        assert name in str(info.value), info.value
    assert targets["small"].b == small_before
    _still_sound(hrt)


STRUCT_MEMBERS = ("label", "tag", "nums", "count")


@pytest.mark.parametrize("how", ["get", "set"])
@pytest.mark.parametrize(
    "target", ["tiny_black", "tiny_view", "vec_black", "object", "plain", "disposed_tiny"]
)
@pytest.mark.parametrize("member", STRUCT_MEMBERS + ("x", "y"))
def test_struct_member_descriptor_refuses_another_struct(
    hrt: zs.Runtime, member: str, target: str, how: str
) -> None:
    """A struct member's descriptor (``HRich.label``) applied to a value of
    another struct class (``HTiny``), an object or anything else: TypeError."""
    struct_cls = HVec if member in ("x", "y") else HRich
    struct_layout_made = struct_cls() if struct_cls is HVec else HRich()
    descriptor = struct_cls.__dict__[member]
    holder = HHolder()
    disposed = HTiny(1)
    disposed.dispose()
    instance = {
        "tiny_black": HTiny(1),
        "tiny_view": None,
        "vec_black": HVec(1, 2.0),
        "object": holder,
        "plain": object(),
        "disposed_tiny": disposed,
    }[target]
    if target == "tiny_view":

        class HTinyHolder(zs.Object):
            tiny: HTiny

        instance = HTinyHolder().tiny
    if target == "vec_black" and struct_cls is HVec:
        instance = HTiny(1)
    value = {"label": "x" * 50, "tag": "t", "nums": [1] * 50, "count": 5, "x": 5, "y": 2.5}[member]
    with pytest.raises(TypeError):  # a disposed one too: the class is checked first
        _call_descriptor(descriptor, instance, how, value)
    struct_layout_made.dispose()
    _still_sound(hrt)


# ---------------------------------------------------------------------------
# Re-classing through the base descriptor (class 3)
# ---------------------------------------------------------------------------

OBJECT_RECLASS = [
    ("HSmall", "HHolder"),
    ("HSmall", "HOther"),
    ("HHolder", "HSmall"),
    ("HHolder", "HHeroHolder"),
    ("HHeroHolder", "HHolder"),
    ("HSmall", "HWrapped"),
    ("HOther", "HHolder"),
    ("HWrapped", "HHolder"),
]
CLASSES = {
    "HSmall": HSmall,
    "HHolder": HHolder,
    "HOther": HOther,
    "HHeroHolder": HHeroHolder,
    "HWrapped": HWrapped,
}


@pytest.mark.parametrize("how", ["object_dict_set", "object_setattr", "setattr", "super"])
@pytest.mark.parametrize("source, dest", OBJECT_RECLASS)
def test_object_conjugates_cannot_be_reclassed(
    hrt: zs.Runtime, source: str, dest: str, how: str
) -> None:
    """``object.__dict__['__class__'].__set__(obj, Other)`` (and every other
    spelling) is refused with TypeError: the conjugate keeps its class, so
    no descriptor of another layout ever applies to its native object."""
    obj = CLASSES[source]()
    new = CLASSES[dest]
    with pytest.raises(TypeError):
        if how == "object_dict_set":
            object.__dict__["__class__"].__set__(obj, new)
        elif how == "object_setattr":
            object.__setattr__(obj, "__class__", new)
        elif how == "setattr":
            setattr(obj, "__class__", new)  # noqa: B010 (the setattr() spelling is the case)
        else:
            super(zs.Object, obj).__setattr__("__class__", new)
    assert type(obj) is CLASSES[source]
    for name in ("b", "weight", "f64", "label", "pos", "floats", "count"):
        if hasattr(type(obj), name):
            getattr(obj, name)
    _still_sound(hrt)


def test_reclassed_object_conjugate_is_never_accessed_through_another_layout(
    hrt: zs.Runtime,
) -> None:
    """The brief's reproducer: a small object re-classed as a big one would
    be written past its end by the big class's setters."""
    small = HSmall(b=1)
    with pytest.raises(TypeError):
        object.__dict__["__class__"].__set__(small, HHolder)
    assert type(small) is HSmall
    for name, value in PROPERTY_VALUES.items():
        if name == "level":
            continue
        try:
            setattr(small, name, value)
        except (TypeError, AttributeError):
            continue
        raise AssertionError(f"a re-classed HSmall accepted {name} = {value!r}")
    assert HSmall.__dict__["b"].__get__(small, HSmall) == 1
    assert small.b == 1
    _still_sound(hrt)


VALUE_RECLASS: dict[str, tuple[Callable[[], Any], Any]] = {
    "utf8_as_string": (lambda: zs.Utf8String("abcdef"), zs.String),
    "ansi_as_string": (lambda: zs.AnsiString("abcdef"), zs.String),
    "string_as_utf8": (lambda: zs.String("abcdef"), zs.Utf8String),
    "int8s_as_int64s": (lambda: zs.Array[zs.Int8]([1, 2, 3]), zs.Array[zs.Int64]),
    "ints_as_floats": (lambda: zs.Array[zs.Int32]([1, 2]), zs.Array[zs.Float64]),
    "ints_as_strings": (lambda: zs.Array[zs.Int32]([1, 2]), zs.Array[zs.String]),
    "tiny_as_rich": (lambda: HTiny(1), HRich),
    "vec_as_rich": (lambda: HVec(1, 2.0), HRich),
    "set_as_map": (lambda: zs.Set[zs.Int32]({1}), zs.Map[zs.Int32, zs.Float64]),
    "map_as_set": (lambda: zs.Map[zs.Int32, zs.String]({1: "x"}), zs.Set[zs.Int32]),
    "optional_as_array": (lambda: zs.Optional[zs.Int8](1), zs.Array[zs.Int8]),
    "delegate_as_multicast": (lambda: zs.Delegate(), zs.MulticastDelegate),
    "multicast_as_sparse": (lambda: zs.MulticastDelegate(), zs.SparseDelegate),
    "soft_as_string": (lambda: zs.SoftObjectPtr[HHolder]("A.B"), zs.String),
    "string_view_as_utf8": (lambda: _view("label", "abc"), zs.Utf8String),
    "array_view_as_floats": (lambda: _view("ints", [1, 2]), zs.Array[zs.Float64]),
    "struct_view_as_rich": (lambda: _view("pos", (1, 1.0)), HRich),
}


def _view(prop: str, value: Any) -> Any:
    holder = HHolder()
    holder.add_to_root()
    setattr(holder, prop, value)
    return getattr(holder, prop)


@pytest.mark.parametrize("how", ["object_dict_set", "object_setattr"])
@pytest.mark.parametrize("case", list(VALUE_RECLASS))
def test_value_conjugates_cannot_be_reclassed(hrt: zs.Runtime, case: str, how: str) -> None:
    """The same for value conjugates (black values and red views): refused
    with TypeError, the value keeps its class and still reads correctly."""
    make, new = VALUE_RECLASS[case]
    value = make()
    before = _snap(value) if not isinstance(value, zs.SoftObjectPtr) else value.path
    with pytest.raises(TypeError):
        if how == "object_dict_set":
            object.__dict__["__class__"].__set__(value, new)
        else:
            object.__setattr__(value, "__class__", new)
    assert type(value) is not new
    after = _snap(value) if not isinstance(value, zs.SoftObjectPtr) else value.path
    assert after == before
    _still_sound(hrt)


# ---------------------------------------------------------------------------
# Lying builtin subclasses (class 4) and broken state (class 5)
# ---------------------------------------------------------------------------

LIARS: dict[str, Callable[[], Any]] = {
    "lying_encode": lambda: LyingEncodeStr("ab"),
    "short_encode": lambda: ShortEncodeStr("abcdef"),
    "not_bytes_encode": lambda: NotBytesEncodeStr("abc"),
    "lying_str": lambda: LyingStrStr("abc"),
    "invalid_utf8": lambda: InvalidUtf8Str("abc"),
}

TEXT_SINKS: dict[str, Callable[[Any], str]] = {
    "string_ctor": lambda v: str(zs.String(v)),
    "utf8_ctor": lambda v: str(zs.Utf8String(v)),
    "ansi_ctor": lambda v: str(zs.AnsiString(v)),
    "text_ctor": lambda v: str(zs.Text(v)),
    "name_ctor": lambda v: str(zs.Name(v)),
    "string_assign": lambda v: (lambda s: (s.assign(v), str(s))[1])(zs.String("")),
    "string_property": lambda v: (lambda h: (setattr(h, "label", v), str(h.label))[1])(HHolder()),
    "utf8_property": lambda v: (lambda h: (setattr(h, "utf8", v), str(h.utf8))[1])(HHolder()),
    "ansi_property": lambda v: (lambda h: (setattr(h, "ansi", v), str(h.ansi))[1])(HHolder()),
    "text_property": lambda v: (lambda h: (setattr(h, "text", v), str(h.text))[1])(HHolder()),
    "name_property": lambda v: (lambda h: (setattr(h, "tag", v), str(h.tag))[1])(HHolder()),
    "object_name": lambda v: HHolder(name=v).name,
    "struct_string_member": lambda v: str(HRich(label=v).label),
    "struct_name_member": lambda v: str(HRich(tag=v).tag),
    "array_string_element": lambda v: str(zs.Array[zs.String]([v])[0]),
    "array_name_element": lambda v: str(zs.Array[zs.Name]([v])[0]),
    "map_name_key": lambda v: str(zs.Map[zs.Name, zs.Int32]({v: 1}).keys()[0]),
    "set_name_element": lambda v: str(list(zs.Set[zs.Name]([v]))[0]),  # noqa: RUF015 (list() reads it)
    "string_element_write": lambda v: (lambda a: (a.__setitem__(0, v), str(a[0]))[1])(
        zs.Array[zs.String](["z"])
    ),
    "soft_path": lambda v: zs.SoftObjectPtr[HHolder](v).path,
}


@pytest.mark.parametrize("sink", list(TEXT_SINKS))
@pytest.mark.parametrize("liar", list(LIARS))
def test_str_subclass_contents_are_taken_exactly(hrt: zs.Runtime, liar: str, sink: str) -> None:
    """A str subclass is stored as the text it *is* (``str.__str__``,
    ``str.encode`` of the base), whatever its overridden ``encode``,
    ``__str__`` or ``__len__`` claim: no read past a buffer, no other text,
    nothing invalid in the name table. (An AnsiString refuses non-ASCII
    with ValueError as for a plain str.)"""
    value = LIARS[liar]()
    exact = str.__str__(value)
    try:
        stored = TEXT_SINKS[sink](value)
    except ValueError as error:
        raise AssertionError(f"refused {exact!r}: {error}") from error
    if sink in (
        "name_ctor",
        "name_property",
        "struct_name_member",
        "array_name_element",
        "map_name_key",
        "set_name_element",
    ):
        assert stored.lower() == exact.lower()
    elif sink == "object_name":
        assert stored == exact
    else:
        assert stored == exact, f"stored {stored!r} for {exact!r}"
    _still_sound(hrt)
    hrt.close()  # the name table is still sound: closing frees everything


NUMBER_SINKS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "int_property": (lambda v: (lambda h: (setattr(h, "i32", v), h.i32)[1])(HHolder()), "int"),
    "int64_property": (lambda v: (lambda h: (setattr(h, "i64", v), h.i64)[1])(HHolder()), "int"),
    "float_property": (lambda v: (lambda h: (setattr(h, "f64", v), h.f64)[1])(HHolder()), "float"),
    "float32_property": (
        lambda v: (lambda h: (setattr(h, "f32", v), h.f32)[1])(HHolder()),
        "float",
    ),
    "struct_int_member": (lambda v: HVec(x=v).x, "int"),
    "struct_float_member": (lambda v: HVec(y=v).y, "float"),
    "int_element": (lambda v: zs.Array[zs.Int32]([v])[0], "int"),
    "float_element": (lambda v: zs.Array[zs.Float64]([v])[0], "float"),
    "int_key": (lambda v: zs.Map[zs.Int32, zs.Int32]({v: 1}).keys()[0], "int"),
    "optional_int": (lambda v: zs.Optional[zs.Int32](v).value, "int"),
    "int_scalar": (lambda v: zs.Int32(v), "int"),
}


@pytest.mark.parametrize("sink", list(NUMBER_SINKS))
def test_int_and_float_subclasses_are_taken_exactly(hrt: zs.Runtime, sink: str) -> None:
    """An int subclass is stored as the int it is (its lying ``__index__`` /
    ``__int__`` are not consulted), a float subclass as the float it is."""
    make, family = NUMBER_SINKS[sink]
    value = LyingInt(5) if family == "int" else LyingFloat(2.5)
    assert make(value) == (5 if family == "int" else 2.5)
    _still_sound(hrt)


@pytest.mark.parametrize(
    "sink", ["string_ctor", "name_ctor", "string_property", "soft_path", "field_path"]
)
def test_bytes_subclasses_are_refused(hrt: zs.Runtime, sink: str) -> None:
    """bytes (a lying subclass too) are not text: TypeError, nothing read."""
    value = LyingBytesBytes(b"ab")
    makers: dict[str, Callable[[Any], Any]] = {
        "string_ctor": zs.String,
        "name_ctor": zs.Name,
        "string_property": lambda v: setattr(HHolder(), "label", v),
        "soft_path": zs.SoftObjectPtr[HHolder],
        "field_path": zs.FieldPath,
    }
    with pytest.raises(TypeError):
        makers[sink](value)
    _still_sound(hrt)


@pytest.mark.parametrize(
    "where",
    [
        "name_ctor",
        "name_property",
        "object_name",
        "map_key",
        "set_element",
        "struct_member",
        "array_element",
    ],
)
def test_invalid_utf8_never_enters_the_name_table(where: str) -> None:
    """Class 5: a name whose encoding claims invalid UTF-8 is stored as the
    text it is (or refused with ValueError); every name stays readable and
    every later close() succeeds, so the runtime is freed."""
    rt = zs.Runtime()
    with rt:
        holder = HHolder()
        value = InvalidUtf8Str("weird")
        try:
            if where == "name_ctor":
                assert str(zs.Name(value)) == "weird"
            elif where == "name_property":
                holder.tag = value
                assert holder.tag == "weird"
            elif where == "object_name":
                assert HHolder(name=value).name == "weird"
            elif where == "map_key":
                assert zs.Map[zs.Name, zs.Int32]({value: 1}) == {"weird": 1}
            elif where == "set_element":
                assert zs.Set[zs.Name]([value]) == {"weird"}
            elif where == "struct_member":
                assert HRich(tag=value).tag == "weird"
            else:
                assert zs.Array[zs.Name]([value]) == ["weird"]
        except ValueError:
            pass
        holder.name
        for obj in (holder, HHolder()):
            obj.name
        rt.collect_garbage()
    assert rt.closed
    rt.close()  # again: still fine


# ---------------------------------------------------------------------------
# Errors (class 7)
# ---------------------------------------------------------------------------


def test_field_path_error_names_the_property(hrt: zs.Runtime) -> None:
    """An unencodable field path stored into a property: ValueError naming
    the property and the path, not 'function takes exactly 5 arguments'
    (the UnicodeEncodeError was rebuilt with type(error)(message))."""
    holder = HHolder()
    with pytest.raises(ValueError) as info:
        holder.path = "\ud800.x"
    assert "HHolder.path" in str(info.value)
    assert "takes exactly" not in str(info.value)
    assert str(holder.path) == ""


PICKY_SINKS: dict[str, Callable[[Any], None]] = {
    "scalar_property": lambda v: setattr(HHolder(), "f64", v),
    "struct_member": lambda v: setattr(HVec(), "y", v),
    "struct_view_member": lambda v: setattr(HHolder().pos, "y", v),
    "struct_property": lambda v: setattr(HHolder(), "pos", (1, v)),
    "array_element": lambda v: zs.Array[zs.Float64]([1.0]).__setitem__(0, v),
    "array_append": lambda v: zs.Array[zs.Float64]().append(v),
    "array_property": lambda v: setattr(HHolder(), "floats", [v]),
    "map_value": lambda v: zs.Map[zs.Int32, zs.Float64]().__setitem__(1, v),
    "optional_set": lambda v: zs.Optional[zs.Float64]().set(v),
    "optional_property": lambda v: setattr(HHolder(), "ofloat", v),
    "struct_ctor": lambda v: HVec(1, v),
    "object_ctor": lambda v: HHolder(f64=v),
    "scalar_convert": lambda v: zs.Float64(v),
}


class PickyFloat:
    """``__float__`` raises a TypeError subclass with a 3-argument constructor."""

    def __float__(self) -> float:
        raise PickyTypeError(7, "PickyFloat.__float__", "refused")


@pytest.mark.parametrize("sink", list(PICKY_SINKS))
def test_a_hooks_exception_reaches_the_caller_unchanged(hrt: zs.Runtime, sink: str) -> None:
    """An exception raised by a conversion hook is not rebuilt with
    ``type(error)(message)`` (which fails for exception classes with
    another constructor, or loses their attributes): the caller gets that
    exception (or one chained from it, ``__cause__``/``__context__``)."""
    with pytest.raises(TypeError) as info:
        PICKY_SINKS[sink](PickyFloat())
    error: BaseException | None = info.value
    chain = []
    while error is not None and len(chain) < 5:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert any(isinstance(e, PickyTypeError) and e.code == 7 for e in chain), chain
    assert "takes exactly" not in str(info.value)
    _still_sound(hrt)


def _self_containing_structs() -> dict[str, type]:
    """Structs that hold themselves: through a container's out-of-line
    storage, through a map's values, and inline (an optional)."""

    class Tree(zs.Struct):
        value: zs.Int32
        kids: zs.Array["Tree"]

    class Graph(zs.Struct):
        id: zs.Int32
        edges: zs.Map[zs.Int32, "Graph"]

    class Loop(zs.Struct):
        again: zs.Optional["Loop"]

    return {"array": Tree, "map": Graph, "optional": Loop}


@pytest.mark.parametrize("through", ["array", "map", "optional"])
def test_a_struct_containing_itself_is_refused_at_first_use(hrt: zs.Runtime, through: str) -> None:
    """A struct holding itself, even through a container, would make native
    copies, collections and destruction recurse as deep as the data (a
    chain built one view at a time could overflow the C stack): its first
    use raises a TypeError naming the member and the fix, never a
    RecursionError, and the heap is untouched."""
    struct = _self_containing_structs()[through]
    with pytest.raises(
        TypeError, match=f"{struct.__name__}\\.\\w+: a struct cannot contain itself"
    ):
        struct()
    with pytest.raises(TypeError, match="a struct cannot contain itself"):
        struct()
    _still_sound(hrt)


def test_the_object_alternative_to_a_self_containing_struct(hrt: zs.Runtime) -> None:
    """The fix the refusal names: nested nodes as objects."""

    class Node(zs.Object):
        value: zs.Int32
        kids: zs.Array["Node"]

    root = Node(value=1)
    child = Node(value=2)
    root.kids.append(child)
    child.kids.append(Node(value=3))
    assert root.kids[0].kids[0].value == 3
    _still_sound(hrt)


NEW_WITHOUT_INIT: dict[str, Any] = {
    "string": zs.String,
    "utf8": zs.Utf8String,
    "text": zs.Text,
    "struct": HVec,
    "rich": HRich,
    "array": zs.Array[zs.Int32],
    "map": zs.Map[zs.Int32, zs.Float64],
    "set": zs.Set[zs.Int32],
    "optional": zs.Optional[zs.Float64],
    "delegate": zs.Delegate,
    "multicast": zs.MulticastDelegate,
    "sparse": zs.SparseDelegate,
    "soft": zs.SoftObjectPtr[HHolder],
    "script_interface": zs.ScriptInterface[IThing],
}


@pytest.mark.parametrize("case", list(NEW_WITHOUT_INIT))
def test_object_new_of_a_value_class_is_refused(hrt: zs.Runtime, case: str) -> None:
    """``object.__new__(SomeValueClass)`` would make a conjugate with no
    native memory behind it; value classes are C types, so Python refuses
    it with TypeError, and the heap is untouched."""
    with pytest.raises(TypeError):
        object.__new__(NEW_WITHOUT_INIT[case])
    _still_sound(hrt)


def test_object_new_of_an_object_class_is_refused(hrt: zs.Runtime) -> None:
    """Object conjugates are made by calling the class."""
    with pytest.raises(TypeError):
        object.__new__(HHolder)
    with pytest.raises(TypeError):
        zs.Object.__new__(HHolder)
