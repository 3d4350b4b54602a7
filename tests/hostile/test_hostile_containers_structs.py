"""Regressions for the open points of docs/staging-rule.md section 5
(containers, structs, re-classing).

F: a map entry found by its key is used only as the map is when its address
is taken (a view is found again by its key once it is registered; items()
captures keys and values in one pass); an array element's view, found
again by its index, is never of a slot past the end. G: a write of several elements is
all or nothing when the native side refuses one (an object that died while
later elements were staged, or one found dying by an incremental collection
whose bounded expiry has not reached its proxy yet). H1: a struct from a dict subclass is read from
the dict's own storage. I: no value or object class can be re-classed,
whatever its body assigns to ``__class__``.

The dangerous moment is reached deterministically: a hook of the value
written, or ``gc.callbacks`` with ``gc.set_threshold(1, 1, 1)`` (restored
afterwards) through ``hostile_support.GcTrigger``.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest

import zsharp_py as zs
from helpers import awaiting_expiry, finish_cycle
from hostile_support import GcTrigger, Trigger

set_class = object.__dict__["__class__"].__set__


class MVec(zs.Struct):
    x: zs.Int32
    y: zs.Float64


class Thing(zs.Object):
    n: zs.Int32


class Slot(zs.Struct):
    ref: "Thing | None"
    n: zs.Int32


class PosHolder(zs.Object):
    pos: MVec


def _vec_map() -> Any:
    return zs.Map[zs.Int32, MVec]({1: (10, 1.0), 2: (20, 2.0), 3: (30, 3.0)})


_SPARE: list[Any] = [None] * 4


def _armed_after_collection(trigger: Trigger, spare: int) -> None:
    """Arm ``trigger`` (installed by GcTrigger) right after a full
    collection, then make ``spare`` tracked allocations that stay alive.
    With gc.set_threshold(1, 1, 1) a collection starts when a second tracked
    object is alive since the last one, so the trigger runs at the
    (2 - spare)-th tracked allocation after this returns. Tests try spare =
    0, 1, 2 and check the attempts where it ran inside the operation."""
    for index in range(len(_SPARE)):
        _SPARE[index] = None
    gc.collect()
    trigger.arm()
    for index in range(spare):
        _SPARE[index] = []


def _collected_inside(
    setup: Callable[[], tuple[Callable[[], None], Callable[[], Any]]], *, in_a_call: bool = False
) -> list[tuple[Any, BaseException | None]]:
    """The outcomes (result, error) of an operation during which the
    collector ran an action: ``setup()`` makes fresh state and returns
    (action, operation); each attempt places the collection at another of
    the operation's allocations, and only those where the action ran inside
    the operation are returned (at least one is required). In a delegate
    call if asked: a call scope, whose first view makes the scope's list."""
    outcomes = []
    for spare in range(3):
        action, operation = setup()
        trigger = Trigger(action, armed=False)
        done: dict[str, Any] = {}

        def attempt(*args: Any) -> None:
            with GcTrigger(trigger):
                _armed_after_collection(trigger, spare)
                if trigger.fired:
                    return
                try:
                    done["result"] = operation()
                except Exception as error:  # the outcome, checked by the test
                    done["error"] = error
                done["inside"] = trigger.fired

        if in_a_call:
            delegate = zs.Delegate()
            delegate.bind(attempt)
            delegate.execute()
        else:
            attempt()
        for index in range(len(_SPARE)):
            _SPARE[index] = None
        if done.get("inside"):
            outcomes.append((done.get("result"), done.get("error")))
    assert outcomes, "the collector never ran inside the operation"
    return outcomes


# ---------------------------------------------------------------------------
# F. A map entry found by its key
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("read", ["subscript", "get"])
def test_f_a_map_view_is_never_another_keys_value(rt: zs.Runtime, read: str) -> None:
    """``m[1]`` and ``m.get(1)`` inside a call, while the collector (run by
    the scope's first allocation) deletes key 1: the removal moves key 3's
    entry into key 1's place. The view is key 1's value, or key 1 is
    absent; it was key 3's value."""
    maps: list[Any] = []

    def setup() -> tuple[Callable[[], None], Callable[[], Any]]:
        m = _vec_map()
        maps.append(m)

        def operation() -> Any:
            view = m[1] if read == "subscript" else m.get(1, "absent")
            return view if view == "absent" else view.to_python()

        return (lambda: m.__delitem__(1)), operation

    for result, error in _collected_inside(setup, in_a_call=True):
        if read == "subscript" and error is not None:
            assert isinstance(error, KeyError), error
        else:
            assert error is None, error
            assert result in ("absent", {"x": 10, "y": 1.0}), result
    for m in maps:
        assert m.to_python() == {2: {"x": 20, "y": 2.0}, 3: {"x": 30, "y": 3.0}}
    rt.gc.verify()


@pytest.mark.parametrize("shrink", ["pop", "clear"])
def test_f_an_array_view_is_never_past_the_end(rt: zs.Runtime, shrink: str) -> None:
    """``arr[2]`` of a 3-element struct array inside a call, while the
    collector (run by the scope's first allocation) pops the last element
    or clears the array: the element's place, found again by its index
    once the view is registered, is gone: IndexError, never a view of the
    slot past the end (it read the removed element). A collection later in
    the read expires the view made before it."""
    arrays: list[Any] = []

    def setup() -> tuple[Callable[[], None], Callable[[], Any]]:
        arr = zs.Array[MVec]([(10, 1.0), (20, 2.0), (30, 3.0)])
        arrays.append(arr)

        def operation() -> Any:
            return arr[2].to_python()

        return (arr.pop if shrink == "pop" else arr.clear), operation

    outcomes = _collected_inside(setup, in_a_call=True)
    for result, error in outcomes:
        assert isinstance(error, (IndexError, zs.ExpiredConjugateError)), (result, error)
    # The collection ran between the index's check and the view's place.
    assert any(isinstance(error, IndexError) for _, error in outcomes), outcomes
    for arr in arrays:
        assert arr.to_python() == (
            [{"x": 10, "y": 1.0}, {"x": 20, "y": 2.0}] if shrink == "pop" else []
        )
    rt.gc.verify()


def test_f_a_view_made_meanwhile_is_the_one_returned(rt: zs.Runtime) -> None:
    """The collector's callback reads ``m[1]`` itself while ``m[1]``
    registers its new view: both get the one view cached for that place
    (never two views cached under one key), and it expires with the call's
    scope like any other."""
    maps: list[Any] = []
    seen: list[Any] = []

    def setup() -> tuple[Callable[[], None], Callable[[], Any]]:
        m = _vec_map()
        maps.append(m)
        seen.clear()

        def operation() -> Any:
            view = m[1]
            return view, view is seen[0], view.to_python()

        return (lambda: seen.append(m[1])), operation

    for result, error in _collected_inside(setup, in_a_call=True):
        assert error is None, error
        view, same, plain = result
        assert same, "two views cached for one place"
        assert plain == {"x": 10, "y": 1.0}
        assert view.is_expired and seen[0].is_expired  # the call's scope ended
    for m in maps:
        assert m[1].to_python() == {"x": 10, "y": 1.0}
    rt.gc.verify()


def test_f_items_pairs_each_key_with_its_own_view(rt: zs.Runtime) -> None:
    """``items()`` of a view-valued map while the collector deletes a key:
    every pair is a key and its own value, or items() raises RuntimeError
    (the map changed under it). It paired key 1 with key 3's value."""

    def setup() -> tuple[Callable[[], None], Callable[[], Any]]:
        m = _vec_map()
        return (lambda: m.__delitem__(1)), m.items

    for result, error in _collected_inside(setup):
        if error is not None:
            assert isinstance(error, RuntimeError) and "changed" in str(error), error
        else:
            for key, view in result:
                assert view.to_python() == {"x": key * 10, "y": float(key)}, (key, view)
    rt.gc.verify()


@pytest.mark.parametrize("read", ["items", "values"])
def test_f_plain_values_are_one_state_of_the_map(rt: zs.Runtime, read: str) -> None:
    """``items()`` and ``values()`` of a map of plain values capture keys
    and values in one pass before they make any Python object: the pairs
    are the map before the collector's deletion, or after it, never a mix
    (items() paired key 1 with key 3's value)."""
    states: list[tuple[Any, Any]] = []

    def setup() -> tuple[Callable[[], None], Callable[[], Any]]:
        m = zs.Map[zs.Int32, zs.Float64]({1: 1.0, 2: 2.0, 3: 3.0})
        states.append((m, m.to_python()))
        return (lambda: m.__delitem__(1)), getattr(m, read)

    outcomes = _collected_inside(setup)
    # Not strict: outcomes holds only the attempts whose action ran inside.
    for (m, before), (result, error) in zip(states, outcomes, strict=False):
        assert error is None, error
        after = m.to_python()
        if read == "items":
            assert all(value == float(key) for key, value in result), result
            assert dict(result) in (before, after)
        else:
            assert result in (list(before.values()), list(after.values()))
    rt.gc.verify()


@pytest.mark.parametrize("action", ["dispose", "reset"])
def test_f_an_optional_value_read_while_the_optional_goes(rt: zs.Runtime, action: str) -> None:
    """``opt.get()`` of a struct inside a call, while the collector (run by
    the scope's first allocation) disposes the optional or resets it: the
    view's place is found again after registering, and there is none, so
    the read raises ExpiredConjugateError or ValueError (the optional was
    reset), never reads a place that is gone."""

    def setup() -> tuple[Callable[[], None], Callable[[], Any]]:
        maybe = zs.Optional[MVec]((10, 1.0))
        return getattr(maybe, action), lambda: maybe.get().to_python()

    expected = zs.ExpiredConjugateError if action == "dispose" else ValueError
    for result, error in _collected_inside(setup, in_a_call=True):
        assert isinstance(error, expected), (result, error)
    rt.gc.verify()


# ---------------------------------------------------------------------------
# G. Multi-element writes refused by the native side: all or nothing
# ---------------------------------------------------------------------------


class _Late:
    """An integer (``__index__``) whose conversion runs ``action`` once: a
    later element's hook, after an earlier element was staged."""

    def __init__(self, action: Callable[[], None], value: int) -> None:
        self.action: Callable[[], None] | None = action
        self.value = value

    def __index__(self) -> int:
        action, self.action = self.action, None
        if action is not None:
            action()
        return self.value


def _objects(rt: zs.Runtime) -> tuple[Any, Any, Callable[[], None]]:
    """A rooted object, an unrooted one, and an action destroying the latter."""
    kept = Thing()
    kept.add_to_root()
    doomed = Thing()

    def destroy() -> None:
        doomed.mark_as_garbage()
        rt.collect_garbage()

    return kept, doomed, destroy


class GHolder(zs.Object):
    """Red containers: properties of an object (the owner every write checks)."""

    slots: zs.Array[Slot]
    things: zs.Map[zs.Int32, Thing]
    slot_map: zs.Map[zs.Int32, Slot]
    keyed: zs.Map[Thing, zs.Int32]
    slot_set: zs.Set[Slot]


def _slots(kept: Any) -> list[Any]:
    return [(kept, 1), (kept, 2), (kept, 3), (kept, 4)]


# write: (property of GHolder, its type, initial contents, the write)
G_WRITES: dict[str, tuple[str, Any, Callable[[Any], Any], Callable[[Any, Any, Any, Any], None]]] = {
    # arr[a:b] = it: the old elements were removed before the new ones were refused
    "slice": (
        "slots",
        zs.Array[Slot],
        _slots,
        lambda t, kept, doomed, destroy: t.__setitem__(
            slice(0, 2), [(kept, 5), (doomed, 6), (kept, _Late(destroy, 7))]
        ),
    ),
    "slice_insert": (
        "slots",
        zs.Array[Slot],
        _slots,
        lambda t, kept, doomed, destroy: t.__setitem__(
            slice(2, 2), [(kept, 5), (doomed, 6), (kept, _Late(destroy, 7))]
        ),
    ),
    # arr[a:b:c] = it: element by element
    "extended_slice": (
        "slots",
        zs.Array[Slot],
        _slots,
        lambda t, kept, doomed, destroy: t.__setitem__(
            slice(None, None, -1), [(kept, 5), (kept, 6), (doomed, 7), (kept, _Late(destroy, 8))]
        ),
    ),
    "map_update": (
        "things",
        zs.Map[zs.Int32, Thing],
        lambda kept: {9: kept},
        lambda t, kept, doomed, destroy: t.update(
            [(0, kept), (1, doomed), (_Late(destroy, 2), kept)]
        ),
    ),
    "map_update_structs": (
        "slot_map",
        zs.Map[zs.Int32, Slot],
        lambda kept: {9: (kept, 9)},
        lambda t, kept, doomed, destroy: t.update(
            {0: (kept, 0), 1: (doomed, 1), 2: (kept, _Late(destroy, 2))}
        ),
    ),
    "map_update_keys": (
        "keyed",
        zs.Map[Thing, zs.Int32],
        lambda kept: {kept: 9},
        lambda t, kept, doomed, destroy: t.update(
            [(kept, 0), (doomed, 1), (kept, _Late(destroy, 2))]
        ),
    ),
    "set_update": (
        "slot_set",
        zs.Set[Slot],
        lambda kept: [(kept, 9)],
        lambda t, kept, doomed, destroy: t.update(
            [(kept, 0), (doomed, 1), (kept, _Late(destroy, 2))]
        ),
    ),
}


@pytest.mark.parametrize("colour", ["black", "red"])
@pytest.mark.parametrize("write", list(G_WRITES))
def test_g_a_refused_element_leaves_the_container_unchanged(
    rt: zs.Runtime, write: str, colour: str
) -> None:
    """An element referencing an object that a later element's hook
    destroyed is refused by the native store: ExpiredConjugateError, and
    the container is exactly as it was (a 4-element array of structs was
    left with 2 elements; update() left the earlier pairs added)."""
    prop, container, initial, op = G_WRITES[write]
    kept, doomed, destroy = _objects(rt)
    if colour == "black":
        target = container(initial(kept))
    else:
        holder = GHolder()
        holder.add_to_root()
        setattr(holder, prop, initial(kept))
        target = getattr(holder, prop)
    before = target.to_python()
    with pytest.raises(zs.ExpiredConjugateError, match="destroyed"):
        op(target, kept, doomed, destroy)
    assert doomed.is_expired
    assert target.to_python() == before
    if colour == "red":
        assert getattr(holder, prop).to_python() == before
    rt.gc.verify()


def test_g_slice_assignment_still_replaces_and_inserts(rt: zs.Runtime) -> None:
    """The new order (insert, then remove) gives what list does."""
    arr = zs.Array[zs.Int32](range(6))
    model = list(range(6))
    for where, items in [
        (slice(1, 3), [7, 8, 9]),
        (slice(4, 4), [5]),
        (slice(5, 1), [6]),
        (slice(0, 100), []),
        (slice(-2, None), [1, 2, 3, 4]),
        (slice(None, None), [0]),
    ]:
        arr[where] = items
        model[where] = items
        assert arr.to_python() == model, where
    arr.dispose()


class DyingHolder(zs.Object):
    """Red arrays of references: an object's, a weak pointer's, a struct's."""

    things: zs.Array[Thing]
    weaks: zs.Array[zs.WeakObjectPtr[Thing]]
    slots: zs.Array[Slot]


# write: (property of DyingHolder, its type, the slice, the new elements
# given kept, dying); every element before the dying one names `kept`.
DYING_WRITES: dict[str, tuple[str, Any, slice, Callable[[Any, Any], list[Any]]]] = {
    "objects, same length": ("things", zs.Array[Thing], slice(0, 3), lambda k, d: [k, d, k]),
    "objects, extended": ("things", zs.Array[Thing], slice(None, None, -1), lambda k, d: [k, d, k]),
    "weak pointers, same length": (
        "weaks",
        zs.Array[zs.WeakObjectPtr[Thing]],
        slice(0, 3),
        lambda k, d: [k, d, k],
    ),
    "weak pointers, extended": (
        "weaks",
        zs.Array[zs.WeakObjectPtr[Thing]],
        slice(None, None, 2),
        lambda k, d: [k, d],
    ),
    "structs, extended": (
        "slots",
        zs.Array[Slot],
        slice(None, None, -1),
        lambda k, d: [(k, 5), (d, 6), (k, 7)],
    ),
}


def _contents(array: Any) -> list[Any]:
    """An array's elements as plain values: a weak pointer's target."""
    return [
        item.get() if isinstance(item, zs.WeakObjectPtr) else item for item in array.to_python()
    ]


@pytest.mark.parametrize("colour", ["black", "red"])
@pytest.mark.parametrize("write", list(DYING_WRITES))
def test_g_a_dying_element_leaves_the_array_unchanged(
    rt: zs.Runtime, write: str, colour: str
) -> None:
    """The same rule for an object that is dying rather than destroyed:
    between an incremental mark's gather and the purge its proxy may still
    be live (the expiry is bounded), so it stages like any live object, and
    only the heap's check before the write finds it dying. A write of
    several references made in place (a slice of the same length, an
    extended slice: object references, weak pointers, structs holding them)
    is refused whole, ExpiredConjugateError, however many live elements
    come before and after the dying one: the array keeps every element."""
    prop, container, where, elements = DYING_WRITES[write]
    kept = Thing()
    kept.add_to_root()
    initial = [(None, 1), (None, 2), (None, 3)] if prop == "slots" else [None, None, None]
    if colour == "black":
        target = container(initial)
    else:
        holder = DyingHolder()
        holder.add_to_root()
        setattr(holder, prop, initial)
        target = getattr(holder, prop)
    before = _contents(target)
    dying = awaiting_expiry(rt, [Thing() for _ in range(3000)])[-1]
    with pytest.raises(zs.ExpiredConjugateError, match="about to be destroyed"):
        target[where] = elements(kept, dying)
    assert dying.is_expired
    assert _contents(target) == before
    finish_cycle(rt)
    target[where] = elements(kept, None)  # the same write, nothing dying: done
    model = list(initial)
    model[where] = elements(kept, None)
    assert _contents(target) == _contents(container(model))


# ---------------------------------------------------------------------------
# H1. A struct from a dict subclass
# ---------------------------------------------------------------------------


class _LyingDict(dict):  # type: ignore[type-arg]
    """Overrides every way dict.update / PyDict_Copy could read it."""

    called: list[str] = []

    def __iter__(self) -> Any:
        self.called.append("__iter__")
        return iter(["x"])

    def keys(self) -> Any:  # type: ignore[override]
        self.called.append("keys")
        return ["x"]

    def __getitem__(self, key: Any) -> Any:
        self.called.append("__getitem__")
        return 99

    def items(self) -> Any:  # type: ignore[override]
        self.called.append("items")
        return [("x", 99)]

    def get(self, key: Any, default: Any = None) -> Any:
        self.called.append("get")
        return 99


class _OtherHash(str):
    """A str whose hash differs from its text's: a dict holds it and an
    exact str of the same text as two keys."""

    def __hash__(self) -> int:
        return str.__hash__(self) ^ 1

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)


H1_SINKS: dict[str, Callable[[Any], Any]] = {
    "array_ctor": lambda d: zs.Array[MVec]([d])[0].to_python(),
    "append": lambda d: (arr := zs.Array[MVec]()).append(d) or arr[0].to_python(),
    "setitem": lambda d: (
        (arr := zs.Array[MVec]([(0, 0.0)])).__setitem__(0, d) or arr[0].to_python()
    ),
    "property": lambda d: (obj := PosHolder()).__setattr__("pos", d) or obj.pos.to_python(),
    "map_value": lambda d: zs.Map[zs.Int32, MVec]({1: d})[1].to_python(),
    "optional": lambda d: zs.Optional[MVec](d).get().to_python(),
}


@pytest.mark.parametrize("sink", list(H1_SINKS))
def test_h1_a_struct_from_a_dict_subclass_reads_its_own_storage(rt: zs.Runtime, sink: str) -> None:
    """A dict subclass holding x=1, y=2.0 whose overrides say {'x': 99} is
    stored as x=1, y=2.0 (it was x=99, y=0.0), and no override is called."""
    value = _LyingDict(x=1, y=2.0)
    _LyingDict.called = []
    assert H1_SINKS[sink](value) == {"x": 1, "y": 2.0}
    assert _LyingDict.called == []


def test_h1_two_keys_for_one_member_are_refused(rt: zs.Runtime) -> None:
    """A dict whose storage holds two keys of one member's name (one a str
    subclass with its own hash) is ambiguous: TypeError, as for keywords."""
    value = {"x": 1, _OtherHash("x"): 5}
    assert len(value) == 2
    with pytest.raises(TypeError, match="multiple values for member 'x'"):
        zs.Array[MVec]([value])
    with pytest.raises(TypeError, match="has no member"):
        zs.Array[MVec]([{"x": 1, "z": 2}])
    assert zs.Array[MVec]([{_OtherHash("y"): 2.5}])[0].to_python() == {"x": 0, "y": 2.5}


# ---------------------------------------------------------------------------
# I. Re-classing a class that assigns __class__ in its body
# ---------------------------------------------------------------------------


class OwnTiny(zs.Struct):
    __class__ = property(lambda self: type(self))  # type: ignore[assignment]
    a: zs.UInt8


class OwnBig(zs.Struct):
    __class__ = property(lambda self: type(self))  # type: ignore[assignment]
    label: zs.String
    n: zs.Int64


class OwnObject(zs.Object):
    __class__ = property(lambda self: type(self))  # type: ignore[assignment]
    b: zs.UInt8


class OwnOtherObject(zs.Object):
    __class__ = property(lambda self: type(self))  # type: ignore[assignment]
    numbers: zs.Array[zs.Int64]


class OwnInts(zs.Array[zs.Int32]):
    __slots__ = ()
    __class__ = property(lambda self: type(self))  # type: ignore[assignment]


class OwnLongs(zs.Array[zs.Int64]):
    __slots__ = ()
    __class__ = property(lambda self: type(self))  # type: ignore[assignment]


I_CASES: dict[str, tuple[Callable[[], Any], type, Callable[[Any], Any]]] = {
    "struct_to_struct": (lambda: OwnTiny(7), OwnBig, lambda v: v.to_python()),
    "struct_back": (lambda: OwnBig("x", 2), OwnTiny, lambda v: v.to_python()),
    "plain_struct_to_own": (lambda: MVec(1, 2.0), OwnTiny, lambda v: v.to_python()),
    "own_struct_to_plain": (lambda: OwnTiny(7), MVec, lambda v: v.to_python()),
    "object_to_object": (lambda: OwnObject(b=3), OwnOtherObject, lambda v: v.b),
    "array_to_array": (lambda: OwnInts([1, 2]), OwnLongs, lambda v: v.to_python()),
}


@pytest.mark.parametrize("case", list(I_CASES))
def test_i_a_class_assigning_class_in_its_body_cannot_be_reclassed(
    rt: zs.Runtime, case: str
) -> None:
    """``object.__dict__['__class__'].__set__(obj, Other)`` is refused for
    every value and object class, decided by C base type: assigning
    ``__class__`` in the class body no longer hides FIXED_CLASS from the
    check (OwnTiny became OwnBig)."""
    make, target, read = I_CASES[case]
    target()  # laid out: its descriptors exist
    value = make()
    kind = type(value)
    expected = read(value)
    with pytest.raises(TypeError, match="cannot change the class"):
        set_class(value, target)
    with pytest.raises(TypeError):
        object.__setattr__(value, "__class__", target)
    assert type(value) is kind
    assert read(value) == expected
    rt.gc.verify()
