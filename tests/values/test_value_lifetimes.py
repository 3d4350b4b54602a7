"""Lifetimes of value conjugates (rules 3 to 5 of docs/design.md): black values are
freed exactly once (dispose, ``with``, finalisation flushed at the next safe
point); red views expire at the first of their three triggers (owner
expired, scope ended, container structure changed) with a message naming
it; black values are GC roots unless the runtime says otherwise."""

from __future__ import annotations

import gc
import itertools
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

import zsharp_py as zs
from helpers import CLOSED, DISPOSED, PARENT, SCOPE, STRUCTURE, collect


class Vec(zs.Struct):
    x: zs.Float64
    y: zs.Float64


class Pair(zs.Struct):
    a: Vec
    b: Vec


class Carrier(zs.Struct):
    """A struct with an object member, a string and a container."""

    who: "Mob | None"
    note: zs.String
    bag: zs.Array[zs.Int32]


class Mob(zs.Object):
    spot: Vec
    pair: Pair
    label: zs.String
    path: zs.Array[Vec]
    grid: zs.Array[zs.Array[zs.Int32]]
    places: zs.Map[zs.Name, Vec]
    tags: zs.Set[zs.Name]
    maybe: zs.Optional[Vec]
    carrier: Carrier


# Every container type used below is specialised once at import, so that no
# test is the first to specialise one while holding black values in its
# locals (the first specialisation snapshots its caller's locals: see
# test_first_specialisation_inside_a_function_does_not_keep_its_locals).
SPECIALISED = [
    zs.Array[Carrier],
    zs.Array[Mob],
    zs.Array[Vec],
    zs.Array[zs.Array[zs.Int32]],
    zs.Array[zs.Int32],
    zs.Array[zs.String],
    zs.Map[zs.Name, Mob],
    zs.Map[zs.Name, Pair],
    zs.Map[zs.Name, Vec],
    zs.Map[zs.String, zs.String],
    zs.Optional[Mob],
    zs.Optional[Vec],
    zs.Optional[zs.String],
    zs.Set[Mob],
    zs.Set[zs.Int64],
    zs.Set[zs.String],
]


pytestmark = pytest.mark.usefixtures("no_leaked_values")


def _settle(rt: zs.Runtime) -> tuple[int, int]:
    if rt.values_alive():
        gc.collect()  # values with cached views sit in reference cycles
    collect(rt)
    return rt.values_alive(), rt.native_memory()["live_blocks"]


def _warm_up(rt: zs.Runtime) -> None:
    """Register every type used below (one-off native blocks) before a baseline."""
    for make in MAKERS.values():
        make().dispose()
    zs.Name("k")
    collect(rt)
    collect(rt)


MAKERS: dict[str, Callable[[], Any]] = {
    "struct": lambda: Vec(1.0, 2.0),
    "nested struct": lambda: Pair((1, 2), (3, 4)),
    "struct with members": lambda: Carrier(
        None, "a note that is long enough to allocate", [1, 2, 3]
    ),
    "String": lambda: zs.String("wide string contents"),
    "Utf8String": lambda: zs.Utf8String("utf-8 contents"),
    "AnsiString": lambda: zs.AnsiString("ansi contents"),
    "Text": lambda: zs.Text("text contents"),
    "Array[Int32]": lambda: zs.Array[zs.Int32](range(100)),
    "Array[String]": lambda: zs.Array[zs.String](["a", "bb", "ccc"]),
    "Array[Array[Int32]]": lambda: zs.Array[zs.Array[zs.Int32]]([[1, 2], [3]]),
    "Array[Vec]": lambda: zs.Array[Vec]([(1, 2)] * 10),
    "Set[Int64]": lambda: zs.Set[zs.Int64](range(50)),
    "Map[Name, Vec]": lambda: zs.Map[zs.Name, Vec]({"k": (1, 2)}),
    "Map[String, String]": lambda: zs.Map[zs.String, zs.String]({"key": "value"}),
    "Optional[String]": lambda: zs.Optional[zs.String]("maybe"),
    "Optional[Vec]": lambda: zs.Optional[Vec]((1, 2)),
}


# The makers of black values that live inline (structs of plain data).
INLINE_MAKERS = {"struct", "nested struct"}


# ---- black values: freed exactly once ------------------------------------------


@pytest.mark.parametrize("kind", list(MAKERS), ids=list(MAKERS))
def test_dispose_frees_once_and_twice_is_a_no_op(rt: zs.Runtime, kind: str) -> None:
    _warm_up(rt)
    values, blocks = _settle(rt)
    value = MAKERS[kind]()
    assert value.is_black and not value.is_expired
    assert rt.values_alive() == values + 1
    # A struct of plain data keeps its bytes in its conjugate (no native
    # block); every other black value owns native memory.
    inline = kind in INLINE_MAKERS
    assert (
        rt.native_memory()["live_blocks"] == blocks
        if inline
        else rt.native_memory()["live_blocks"] > blocks
    )
    value.dispose()
    assert value.is_expired
    assert rt.values_alive() == values
    assert rt.native_memory()["live_blocks"] == blocks
    value.dispose()
    value.dispose()
    assert _settle(rt) == (values, blocks)
    with pytest.raises(zs.ExpiredConjugateError, match=DISPOSED):
        value.clone()
    assert DISPOSED in repr(value)


@pytest.mark.parametrize("kind", list(MAKERS), ids=list(MAKERS))
def test_with_block_disposes(rt: zs.Runtime, kind: str) -> None:
    _warm_up(rt)
    values, blocks = _settle(rt)
    with MAKERS[kind]() as value:
        assert not value.is_expired
        assert rt.values_alive() == values + 1
    assert value.is_expired
    assert (rt.values_alive(), rt.native_memory()["live_blocks"]) == (values, blocks)


def test_with_block_disposes_on_an_exception(rt: zs.Runtime) -> None:
    with pytest.raises(RuntimeError), Vec(1, 2) as v:
        raise RuntimeError("boom")
    assert v.is_expired


@pytest.mark.parametrize("kind", list(MAKERS), ids=list(MAKERS))
def test_finalised_value_is_freed_at_the_next_collection(rt: zs.Runtime, kind: str) -> None:
    _warm_up(rt)
    values, blocks = _settle(rt)
    value = MAKERS[kind]()
    del value  # finalised now (refcount), freed at the next safe point
    collect(rt)
    assert (rt.values_alive(), rt.native_memory()["live_blocks"]) == (values, blocks)


@pytest.mark.parametrize(
    "allocate",
    [lambda: Vec(), lambda: zs.String("x"), lambda: Mob(), lambda: zs.Array[zs.Int32]()],
    ids=["struct", "string", "object", "array"],
)
def test_finalised_value_is_freed_at_the_next_allocation(rt: zs.Runtime, allocate) -> None:
    _warm_up(rt)
    Mob()
    values, blocks = _settle(rt)
    for _ in range(10):
        MAKERS["struct with members"]()  # each one dropped at once
    extra = allocate()
    alive = rt.values_alive()
    assert alive == values + (1 if isinstance(extra, zs.Struct | zs.String | zs.Array) else 0)
    del extra
    assert _settle(rt) == (values, blocks)


def test_value_in_a_python_reference_cycle_is_freed(rt: zs.Runtime) -> None:
    _warm_up(rt)
    values, blocks = _settle(rt)

    class Node:
        pass

    node = Node()
    node.self = node  # type: ignore[attr-defined]
    node.value = Carrier(None, "cycle", [1])  # type: ignore[attr-defined]
    del node
    gc.collect()  # the cycle collector finalises the value (queues the free)
    collect(rt)
    assert (rt.values_alive(), rt.native_memory()["live_blocks"]) == (values, blocks)


def test_values_finalised_on_other_threads_are_freed(rt: zs.Runtime) -> None:
    _warm_up(rt)
    values, blocks = _settle(rt)
    made = [zs.String(f"string {i}") for i in range(200)]
    chunks = [made[i::4] for i in range(4)]
    del made

    def drop(chunk: list) -> None:
        chunk.clear()

    threads = [threading.Thread(target=drop, args=(chunk,)) for chunk in chunks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    del chunks
    assert _settle(rt) == (values, blocks)


def test_many_values_leave_no_native_memory_behind(rt: zs.Runtime) -> None:
    _warm_up(rt)
    values, blocks = _settle(rt)
    kept = [make() for make in MAKERS.values() for _ in range(20)]
    assert rt.values_alive() == values + len(kept)
    for value in kept[::2]:
        value.dispose()
    del kept
    assert _settle(rt) == (values, blocks)


def test_a_view_keeps_its_black_parent_alive(rt: zs.Runtime) -> None:
    lo = Pair((1, 2), (3, 4)).a
    bag = Carrier(None, "n", [5, 6]).bag
    gc.collect()
    collect(rt)
    assert lo == (1.0, 2.0) and bag == [5, 6]
    lo.x = 10.0
    assert lo.x == 10.0
    assert rt.values_alive() == 2
    del lo, bag
    gc.collect()
    collect(rt)
    assert rt.values_alive() == 0


def test_first_specialisation_inside_a_function_does_not_keep_its_locals(rt: zs.Runtime) -> None:
    class Fresh(zs.Struct):
        value: zs.Int32

    def specialise() -> type:
        local = zs.String("only referenced by this frame")
        assert local == "only referenced by this frame"
        return zs.Array[Fresh]  # first specialisation of Array[Fresh]

    specialise()
    gc.collect()
    collect(rt)
    # the frame is gone, so its black String must have been freed
    assert rt.values_alive() == 0


def test_a_type_argument_inside_a_function_keeps_none_of_its_locals(rt: zs.Runtime) -> None:
    """Specialising with classes (no string to resolve) reads none of the
    caller's locals: before Python 3.13, reading a running function's
    ``f_locals`` leaves a dict of all its locals on the frame, so a
    conjugate deleted after the subscription would live on until the
    function returns."""

    class Fresh(zs.Struct):
        value: zs.Int32

    def body() -> int:
        mob = Mob()
        before = sys.getrefcount(mob)
        assert zs.Array[Fresh] is zs.Array[Fresh]  # made, then cached
        assert zs.SoftObjectPtr[Mob] is zs.SoftObjectPtr[Mob]
        zs.Map[zs.Name, zs.WeakObjectPtr[Mob]]
        return sys.getrefcount(mob) - before

    assert body() == 0


def test_red_view_cannot_be_disposed(rt: zs.Runtime) -> None:
    mob = Mob()
    view = mob.spot
    with pytest.raises(TypeError, match="clone"):
        view.dispose()
    with pytest.raises(TypeError), mob.label:
        pass
    assert not view.is_expired
    collect(rt)
    assert view.is_expired
    view.dispose()  # an expired red view: nothing to do


def test_disposing_a_black_value_expires_its_views(rt: zs.Runtime) -> None:
    pair = Pair((1, 2), (3, 4))
    a = pair.a
    points = zs.Array[Vec]([(1, 2), (3, 4)])
    first = points[0]
    nested = zs.Array[zs.Array[zs.Int32]]([[1, 2]])
    row = nested[0]
    carrier = Carrier(None, "x", [1])
    note, bag = carrier.note, carrier.bag
    places = zs.Map[zs.Name, Vec]({"k": (1, 2)})
    place = places["k"]
    maybe = zs.Optional[zs.String]("s")
    text = maybe.value
    for black in (pair, points, nested, carrier, places, maybe):
        black.dispose()
    for view in (a, first, row, note, bag, place, text):
        assert view.is_expired
        with pytest.raises(zs.ExpiredConjugateError, match=PARENT):
            view.clone()
        assert "expired" in repr(view)


# ---- red views: owner expired -----------------------------------------------------


def _views_of(mob: Mob) -> dict[str, Any]:
    mob.path = [(1, 2), (3, 4)]
    mob.grid = [[1], [2, 3]]
    mob.places["home"] = (5, 6)
    mob.maybe = (7, 8)
    mob.label = "label"
    mob.carrier = {"note": "note", "bag": [1]}
    return {
        "struct member": mob.spot,
        "nested struct member": mob.pair.b,
        "string property": mob.label,
        "array property": mob.path,
        "array of structs element": mob.path[1],
        "nested array element": mob.grid[1],
        "map property": mob.places,
        "map value": mob.places["home"],
        "set property": mob.tags,
        "optional value": mob.maybe.value,
        "string in a struct": mob.carrier.note,
        "array in a struct": mob.carrier.bag,
    }


def _expire_owner(rt: zs.Runtime, mob: Mob, how: str) -> None:
    if how == "collected":
        collect(rt)
    elif how == "garbage":
        holder = Mob()
        holder.add_to_root()
        holder.carrier.who = mob
        mob.mark_as_garbage()
        collect(rt)
    else:
        rt.close()
    assert mob.is_expired


def _empty_like(value: Any) -> Any:
    if isinstance(value, zs.Struct):
        return {}
    if isinstance(value, zs.Array):
        return []
    if isinstance(value, zs.Map):
        return {}
    if isinstance(value, zs.Set):
        return set()
    return ""


ACCESSES: dict[str, Callable[[Any], Any]] = {
    "repr is safe": lambda v: None,
    "to_python or str": lambda v: v.to_python() if hasattr(v, "to_python") else str(v),
    "equality": lambda v: v == _empty_like(v),
    "clone": lambda v: v.clone(),
    "len or member": lambda v: len(v) if hasattr(v, "__len__") else v.x,
}


@pytest.mark.parametrize(
    "how, reason", [("collected", PARENT), ("garbage", PARENT), ("closed", CLOSED)]
)
def test_every_view_expires_with_its_owner(rt: zs.Runtime, how: str, reason: str) -> None:
    mob = Mob()
    views = _views_of(mob)
    assert not any(view.is_expired for view in views.values())
    _expire_owner(rt, mob, how)
    for what, view in views.items():
        assert view.is_expired is True, what
        text = repr(view)
        assert "expired" in text and reason in text, what
        for access, call in ACCESSES.items():
            if access == "repr is safe":
                continue
            with pytest.raises(zs.ExpiredConjugateError, match=reason):
                call(view)


def test_expired_struct_view_refuses_member_reads_and_writes(rt: zs.Runtime) -> None:
    mob = Mob()
    spot, b = mob.spot, mob.pair.b
    collect(rt)
    for view in (spot, b):
        with pytest.raises(zs.ExpiredConjugateError):
            view.x
        with pytest.raises(zs.ExpiredConjugateError):
            view.x = 1.0
        with pytest.raises(zs.ExpiredConjugateError):
            list(view)
        with pytest.raises(zs.ExpiredConjugateError):
            Mob(spot=view)


def test_expired_container_views_refuse_every_operation(rt: zs.Runtime) -> None:
    mob = Mob()
    path, places, tags, maybe = mob.path, mob.places, mob.tags, mob.maybe
    collect(rt)
    operations: list[Callable[[], Any]] = [
        lambda: path[0],
        lambda: path.append((1, 2)),
        lambda: list(path),
        lambda: path.pop(),
        lambda: path.clear(),
        lambda: (1, 2) in path,
        lambda: path[0:1],
        lambda: places["k"],
        lambda: places.__setitem__("k", (1, 2)),
        lambda: "k" in places,
        lambda: places.keys(),
        lambda: places.get("k"),
        lambda: len(places),
        lambda: tags.add("a"),
        lambda: "a" in tags,
        lambda: list(tags),
        lambda: len(tags),
        lambda: maybe.is_set,
        lambda: maybe.get(),
        lambda: maybe.set((1, 2)),
        lambda: maybe.reset(),
    ]
    for operation in operations:
        with pytest.raises(zs.ExpiredConjugateError):
            operation()


def test_views_of_a_collected_object_do_not_see_the_object_that_reuses_its_slot(
    rt: zs.Runtime,
) -> None:
    mob = Mob(spot=(1, 2))
    spot = mob.spot
    collect(rt)
    others = [Mob(spot=(9, 9)) for _ in range(20)]
    with pytest.raises(zs.ExpiredConjugateError):
        spot.x
    with pytest.raises(zs.ExpiredConjugateError):
        spot.x = 5.0
    assert all(o.spot == (9.0, 9.0) for o in others)


def test_runtime_close_expires_black_values_and_their_views(rt: zs.Runtime) -> None:
    pair = Pair((1, 2), (3, 4))
    a = pair.a
    words = zs.Array[zs.String](["w"])
    word = words[0]
    rt.close()
    for value in (pair, a, words, word):
        assert value.is_expired
        assert CLOSED in repr(value)
    with pytest.raises(zs.ExpiredConjugateError, match=CLOSED):
        pair.a
    with pytest.raises(zs.ExpiredConjugateError, match=CLOSED):
        word.assign("x")
    pair.dispose()  # after close: nothing to free, no error
    words.dispose()


def test_runtime_close_with_finalised_values_pending(rt: zs.Runtime) -> None:
    for _ in range(5):
        Vec()
    rt.close()
    assert rt.closed


# ---- red views: scope ended ---------------------------------------------------------


def test_view_obtained_in_a_scope_expires_at_its_end(rt: zs.Runtime) -> None:
    mob = Mob()
    path = mob.path  # obtained outside the scope
    path.append((1, 2))
    with zs.scope():
        spot = mob.spot
        first = path[0]
        label = mob.label
        spot.x = 3.0
        assert not spot.is_expired
    for view in (spot, first, label):
        assert view.is_expired
        assert SCOPE in repr(view)
    with pytest.raises(zs.ExpiredConjugateError, match=SCOPE):
        spot.x
    with pytest.raises(zs.ExpiredConjugateError, match=SCOPE):
        first.y = 1.0
    with pytest.raises(zs.ExpiredConjugateError, match=SCOPE):
        str(label)
    assert not path.is_expired and path[0] == {"x": 1.0, "y": 2.0}
    again = mob.spot  # a fresh view after the scope
    assert again is not spot and not again.is_expired and again.x == 3.0
    assert not mob.is_expired


def test_views_under_a_scoped_view_say_the_scope_ended(rt: zs.Runtime) -> None:
    # Both views were obtained in the scope, whose end is the trigger: the
    # element's message must say so, not that its owner expired (the owner
    # object is alive).
    mob = Mob()
    mob.path = [(1, 2)]
    with zs.scope():
        first = mob.path[0]
        inner = mob.pair.a
    assert not mob.is_expired
    for view in (first, inner):
        assert view.is_expired
        with pytest.raises(zs.ExpiredConjugateError, match=SCOPE):
            view.x


def test_nested_scopes(rt: zs.Runtime) -> None:
    mob = Mob()
    with zs.scope():
        outer = mob.pair
        with zs.scope():
            inner = mob.spot
            child = outer.a  # obtained in the inner scope, a child of an outer view
            same = mob.pair  # cached: the outer view, still owned by the outer scope
            assert same is outer
        assert inner.is_expired and child.is_expired
        assert SCOPE in repr(child)
        assert not outer.is_expired
        outer.b.x = 4.0  # the outer view survives the inner scope
        later = outer.a
        assert later is not child and not later.is_expired
    assert outer.is_expired and later.is_expired
    assert mob.pair.b.x == 4.0


def test_view_obtained_outside_any_scope_survives_scopes(rt: zs.Runtime) -> None:
    mob = Mob()
    spot = mob.spot
    with zs.scope():
        assert mob.spot is spot
        with zs.scope():
            spot.x = 1.0
    assert not spot.is_expired and spot.x == 1.0


def test_scope_ended_by_an_exception_still_expires_its_views(rt: zs.Runtime) -> None:
    mob = Mob()
    with pytest.raises(KeyError), zs.scope():
        spot = mob.spot
        raise KeyError("boom")
    assert spot.is_expired


def test_runtime_closed_inside_a_scope(rt: zs.Runtime) -> None:
    mob = Mob()
    with zs.scope():
        spot = mob.spot
        black = Vec(1, 2)
        rt.close()
    assert spot.is_expired and black.is_expired
    assert CLOSED in repr(spot) and CLOSED in repr(black)


def test_clone_and_black_values_outlive_the_scope(rt: zs.Runtime) -> None:
    mob = Mob(spot=(1, 2))
    pair = Pair((1, 2), (3, 4))
    with zs.scope():
        kept = mob.spot.clone()
        black = Vec(5, 6)
        child = pair.a
    assert not kept.is_expired and kept == (1.0, 2.0) and kept.is_black
    assert not black.is_expired and black == (5.0, 6.0)
    assert not pair.is_expired
    assert child.is_expired  # a view into a black value is still a view
    assert pair.a == (1.0, 2.0)


def test_scope_views_of_many_elements_expire_together(rt: zs.Runtime) -> None:
    points = zs.Array[Vec]([(i, i) for i in range(200)])
    with zs.scope():
        views = list(points)
    assert all(view.is_expired for view in views)
    assert points[199] == (199.0, 199.0)


def test_scopes_are_per_thread(rt: zs.Runtime) -> None:
    mob = Mob()
    mob.add_to_root()
    got: list[Any] = []
    with zs.scope():
        thread = threading.Thread(target=lambda: got.append(mob.pair))
        thread.start()
        thread.join()
    # The thread obtained its view outside any scope of its own.
    assert not got[0].is_expired


def test_a_view_below_a_scoped_view_expires_with_it_though_no_scope_holds_it(
    rt: zs.Runtime,
) -> None:
    # The views under an element view obtained in the scope were obtained in
    # another thread, outside any scope of its own: no scope holds them, but
    # the scope's end expires their parent, and so everything below it.
    # Left live they would keep addresses into the array's storage, which
    # its growth below frees.
    carriers = zs.Array[Carrier]([(None, "first", [1])])
    got: list[Any] = []
    with zs.scope():
        first = carriers[0]
        thread = threading.Thread(target=lambda: got.append((first.note, first.bag)))
        thread.start()
        thread.join()
        note, bag = got[0]
        assert str(note) == "first" and list(bag) == [1]
    assert first.is_expired and SCOPE in repr(first)
    for view in (note, bag):
        assert view.is_expired and PARENT in repr(view)
    carriers.extend([(None, "more", [2])] * 64)  # the storage moves
    with pytest.raises(zs.ExpiredConjugateError, match=PARENT):
        str(note)
    with pytest.raises(zs.ExpiredConjugateError, match=PARENT):
        bag.append(3)
    assert str(carriers[0].note) == "first" and list(carriers[0].bag) == [1]


# ---- red views: container structure changed -----------------------------------------


def _array_views(mob: Mob) -> list[Any]:
    mob.path = [(1, 2), (3, 4), (5, 6)]
    return list(mob.path)


STRUCTURE_CHANGES: dict[str, Callable[[Mob], Any]] = {
    "append": lambda m: m.path.append((0, 0)),
    "extend": lambda m: m.path.extend([(0, 0)]),
    "insert": lambda m: m.path.insert(0, (0, 0)),
    "pop": lambda m: m.path.pop(),
    "pop first": lambda m: m.path.pop(0),
    "remove": lambda m: m.path.remove({"x": 3.0, "y": 4.0}),
    "del": lambda m: m.path.__delitem__(2),
    "del slice": lambda m: m.path.__delitem__(slice(0, 1)),
    "slice assign": lambda m: m.path.__setitem__(slice(0, 1), [(0, 0), (0, 0)]),
    "clear": lambda m: m.path.clear(),
    "assign a whole new value": lambda m: setattr(m, "path", [(9, 9)] * 3),
    "assign the same length": lambda m: setattr(m, "path", [(9, 9)] * 3),
}


@pytest.mark.parametrize("change", list(STRUCTURE_CHANGES), ids=list(STRUCTURE_CHANGES))
def test_array_structure_change_expires_element_views(rt: zs.Runtime, change: str) -> None:
    mob = Mob()
    views = _array_views(mob)
    path = mob.path
    STRUCTURE_CHANGES[change](mob)
    for view in views:
        assert view.is_expired
        assert STRUCTURE in repr(view)
        with pytest.raises(zs.ExpiredConjugateError, match=STRUCTURE):
            view.x
        with pytest.raises(zs.ExpiredConjugateError, match=STRUCTURE):
            view.x = 1.0
    assert not path.is_expired  # the array itself is still the property
    assert all(not v.is_expired for v in path)  # fresh element views


def test_element_write_keeps_the_element_view(rt: zs.Runtime) -> None:
    mob = Mob()
    views = _array_views(mob)
    mob.path[0] = (10, 10)
    assert not views[0].is_expired and views[0] == (10.0, 10.0)
    views[1].x = 30.0
    assert mob.path[1].x == 30.0


def test_key_test_append_until_reallocation_expires_every_old_view(rt: zs.Runtime) -> None:
    mob = Mob()
    mob.add_to_root()
    mob.path = [(i, -i) for i in range(4)]
    path = mob.path
    views = list(path)
    data_before = path._data_address
    for i in range(4, 1004):
        path.append((i, -i))
    assert path._data_address != data_before  # the storage moved
    for view in views:
        assert view.is_expired
        with pytest.raises(zs.ExpiredConjugateError, match=STRUCTURE):
            view.x
        with pytest.raises(zs.ExpiredConjugateError, match=STRUCTURE):
            view.y = 0.0
    assert len(path) == 1004
    assert path.to_python() == [{"x": float(i), "y": float(-i)} for i in range(1004)]
    assert mob.path[1003] == {"x": 1003.0, "y": -1003.0}
    collect(rt)
    assert mob.path[500].y == -500.0


def test_black_array_append_until_reallocation(rt: zs.Runtime) -> None:
    points = zs.Array[Vec]([(0, 0)])
    first = points[0]
    strings = zs.Array[zs.String](["s0"])
    word = strings[0]
    for i in range(1, 1000):
        points.append((i, i))
        strings.append(f"s{i}")
    assert first.is_expired and word.is_expired
    assert points[999] == {"x": 999.0, "y": 999.0}
    assert strings[999] == "s999" and strings[0] == "s0"


def test_nested_array_structure_change_expires_inner_views(rt: zs.Runtime) -> None:
    mob = Mob()
    mob.grid = [[1], [2]]
    row = mob.grid[0]
    row.append(5)  # the row's own elements are scalars: no views, the row stays
    assert not row.is_expired and mob.grid[0] == [1, 5]
    mob.grid.append([3])  # the outer array grows: rows may have moved
    assert row.is_expired
    with pytest.raises(zs.ExpiredConjugateError, match=STRUCTURE):
        row.append(6)
    assert mob.grid == [[1, 5], [2], [3]]


def test_map_add_and_remove_expire_value_views(rt: zs.Runtime) -> None:
    mob = Mob()
    mob.places["a"] = (1, 2)
    a = mob.places["a"]
    mob.places["a"] = (3, 4)  # existing key: the value is written in place
    assert not a.is_expired and a == (3.0, 4.0)
    mob.places["b"] = (5, 6)  # a new key: entries may move
    assert a.is_expired and STRUCTURE in repr(a)
    b = mob.places["b"]
    del mob.places["a"]
    assert b.is_expired
    b = mob.places["b"]
    mob.places.pop("b")
    assert b.is_expired
    mob.places["c"] = (1, 1)
    c = mob.places["c"]
    mob.places.clear()
    assert c.is_expired
    mob.places["d"] = (1, 1)
    d = mob.places["d"]
    mob.places.setdefault("e", (2, 2))
    assert d.is_expired
    d = mob.places["d"]
    mob.places.update({"f": (3, 3)})
    assert d.is_expired
    d = mob.places["d"]
    mob.places = {"d": (4, 4)}
    assert d.is_expired
    with pytest.raises(zs.ExpiredConjugateError, match=STRUCTURE):
        d.x
    assert mob.places == {"d": {"x": 4.0, "y": 4.0}}


def test_map_value_views_survive_lookups_and_failed_adds(rt: zs.Runtime) -> None:
    places = zs.Map[zs.Name, Vec]({"a": (1, 2)})
    a = places["a"]
    assert "b" not in places and places.get("b") is None
    with pytest.raises(TypeError):
        places["b"] = "bad"
    assert places["A"] is a and not a.is_expired


def test_set_add_and_remove_hand_out_no_views_to_expire(rt: zs.Runtime) -> None:
    # Set elements are read as plain copies, so there is nothing that a
    # later add or remove (which may move the entries) could leave dangling.
    words = zs.Set[zs.String](["a", "b"])
    elements = list(words)
    assert all(type(e) is str for e in elements)
    for i in range(100):
        words.add(f"w{i}")
    words.remove("a")
    assert sorted(elements) == ["a", "b"]
    mob = Mob()
    tags = mob.tags
    tags.add("x")
    tags.discard("x")
    mob.tags = ["y"]
    assert not tags.is_expired and tags == {"y"}


def test_optional_set_and_reset_expire_the_value_view(rt: zs.Runtime) -> None:
    mob = Mob()
    mob.maybe = (1, 2)
    value = mob.maybe.value
    mob.maybe.set((3, 4))
    assert value.is_expired and STRUCTURE in repr(value)
    value = mob.maybe.value
    mob.maybe.reset()
    assert value.is_expired
    with pytest.raises(zs.ExpiredConjugateError, match=STRUCTURE):
        value.x
    mob.maybe = (5, 6)
    value = mob.maybe.get()
    mob.maybe = None  # a whole new value for the property
    assert value.is_expired
    assert mob.maybe.get() is None
    black = zs.Optional[zs.String]("a")
    text = black.value
    black.set("b")
    assert text.is_expired and black == "b"


def test_structure_change_expires_grandchildren(rt: zs.Runtime) -> None:
    mob = Mob()
    mob.maybe = (1, 2)
    grid = zs.Map[zs.Name, Pair]({"k": ((1, 2), (3, 4))})
    inner = grid["k"].a
    grid["other"] = ((0, 0), (0, 0))
    assert inner.is_expired
    carriers = zs.Array[Carrier]([{"note": "n", "bag": [1]}])
    bag = carriers[0].bag
    note = carriers[0].note
    carriers.insert(0, {})
    assert bag.is_expired and note.is_expired
    assert carriers[1].bag == [1] and carriers[1].note == "n"


def test_struct_property_assignment_keeps_the_view_and_values_right(rt: zs.Runtime) -> None:
    mob = Mob()
    spot = mob.spot
    mob.spot = (7, 8)
    assert not spot.is_expired and spot == (7.0, 8.0)


def test_is_expired_and_repr_never_raise(rt: zs.Runtime) -> None:
    mob = Mob()
    views = _views_of(mob)
    black = [make() for make in MAKERS.values()]
    for value in black:
        value.dispose()
    collect(rt)
    for value in list(views.values()) + black:
        assert value.is_expired is True
        assert "expired" in repr(value)
        assert isinstance(value.is_black, bool)


# ---- black values as GC roots ---------------------------------------------------------


def _hold(kind: str, target: Mob) -> Any:
    if kind == "array":
        return zs.Array[Mob]([target])
    if kind == "struct":
        return Carrier(who=target)
    if kind == "map value":
        return zs.Map[zs.Name, Mob]({"t": target})
    if kind == "set element":
        return zs.Set[Mob]([target])
    if kind == "optional":
        return zs.Optional[Mob](target)
    raise AssertionError(kind)


def _read(kind: str, holder: Any) -> Any:
    if kind == "array":
        return holder[0]
    if kind == "struct":
        return holder.who
    if kind == "map value":
        return holder["t"]
    if kind == "set element":
        return next(iter(holder), None)
    return holder.value


HOLDERS = ["array", "struct", "map value", "set element", "optional"]


@pytest.mark.parametrize("kind", HOLDERS)
def test_black_value_keeps_its_objects_alive(rt: zs.Runtime, kind: str) -> None:
    target = Mob(spot=(1, 2))
    holder = _hold(kind, target)
    collect(rt)
    collect(rt)
    assert not target.is_expired
    assert _read(kind, holder) is target
    holder.dispose()
    collect(rt)
    assert target.is_expired


@pytest.mark.parametrize("kind", HOLDERS)
def test_finalised_black_value_stops_keeping_its_objects(rt: zs.Runtime, kind: str) -> None:
    target = Mob()
    holder = _hold(kind, target)
    collect(rt)
    assert not target.is_expired
    del holder
    collect(rt)  # flushes the queued free, then marks without it
    assert target.is_expired


@pytest.mark.parametrize("kind", HOLDERS)
def test_black_values_are_not_roots_when_switched_off(kind: str) -> None:
    with zs.Runtime(black_conjugates_are_roots=False) as runtime:
        assert runtime.black_conjugates_are_roots is False
        target = Mob(spot=(1, 2))
        holder = _hold(kind, target)
        collect(runtime)
        assert target.is_expired
        # The reference is stale: reading it gives None, never a crash.
        assert _read(kind, holder) is None
        for _ in range(20):
            Mob()  # reuse the slot: the stale reference must not resolve to a new object
        assert _read(kind, holder) is None
        holder.to_python()
        repr(holder)
        holder.dispose()
        collect(runtime)
        assert runtime.values_alive() == 0


def test_black_value_kills_references_to_garbage(rt: zs.Runtime) -> None:
    target = Mob()
    units = zs.Array[Mob]([target, target])
    carrier = Carrier(who=target)
    target.mark_as_garbage()
    collect(rt)
    assert target.is_expired
    assert units == [None, None]
    assert carrier.who is None


@pytest.mark.parametrize(
    "take",
    [lambda m: m.carrier, lambda m: m.carrier.bag, lambda m: m.path],
    ids=["struct view", "array in a struct view", "array view"],
)
def test_clone_of_a_red_view_is_black_and_a_root(rt: zs.Runtime, take) -> None:
    mob, target = Mob(), Mob()
    mob.carrier = Carrier(who=target, bag=[1, 2])
    mob.path = [(1, 2)]
    clone = take(mob).clone()
    assert clone.is_black
    clone_of_carrier = mob.carrier.clone()
    collect(rt)
    assert mob.is_expired
    assert not clone.is_expired and not clone_of_carrier.is_expired
    assert not target.is_expired and clone_of_carrier.who is target
    clone_of_carrier.dispose()
    if isinstance(clone, Carrier):
        collect(rt)
        assert not target.is_expired and clone.who is target  # the clone holds it too
        clone.dispose()
    else:
        assert clone.to_python() in ([1, 2], [{"x": 1.0, "y": 2.0}])
    collect(rt)
    assert target.is_expired


def test_storing_an_expired_view_raises_and_changes_nothing(rt: zs.Runtime) -> None:
    dead = Mob(spot=(1, 2), label="dead", path=[(1, 1)])
    spot, label, path = dead.spot, dead.label, dead.path
    collect(rt)
    live = Mob(spot=(5, 6), label="live", path=[(2, 2)])
    live.add_to_root()
    points = zs.Array[Vec]([(3, 3)])
    for store in (
        lambda: setattr(live, "spot", spot),
        lambda: setattr(live, "label", label),
        lambda: setattr(live, "path", path),
        lambda: points.append(spot),
        lambda: points.__setitem__(0, spot),
        lambda: Vec(*spot),
        lambda: live.places.__setitem__("k", spot),
        lambda: live.maybe.set(spot),
        lambda: zs.String(label),
        lambda: zs.Array[Vec](path),
    ):
        with pytest.raises(zs.ExpiredConjugateError):
            store()
    assert live.spot == (5.0, 6.0) and live.label == "live" and live.path == [Vec(2, 2)]
    assert points == [Vec(3, 3)] and len(live.places) == 0 and not live.maybe.is_set


def test_black_struct_view_inside_an_object_is_not_a_root(rt: zs.Runtime) -> None:
    # Red views are not roots: the object that owns them decides.
    mob, target = Mob(), Mob()
    mob.carrier.who = target
    view = mob.carrier
    collect(rt)
    assert mob.is_expired and target.is_expired and view.is_expired


# ---- black values during an incremental cycle ----------------------------------------


class Link(zs.Object):
    next: "Link | None"
    carrier: Carrier


def _mid_mark_scenario(rt: zs.Runtime) -> tuple[list[Link], Mob]:
    """Start a cycle with X reachable only through the far end of a long
    rooted chain, and step until marking is under way but the chain is not
    yet scanned; return (chain, X). The caller copies X into a black value
    and cuts the chain: only the write barrier can then keep X."""
    head = Link()
    head.add_to_root()
    chain = [Link() for _ in range(20_000)]
    head.next = chain[0]
    for one, two in itertools.pairwise(chain):
        one.next = two
    x = Mob(spot=(4, 2))
    chain[-1].carrier.who = x
    rt.gc.start_incremental()
    for _ in range(3):
        assert not rt.gc.step(1e-6)
        rt.gc.verify()
    assert rt.gc.phase == "marking"
    assert rt.gc.stats().objects_scanned < 10_000
    return chain, x


@pytest.mark.parametrize(
    "how",
    ["new black array", "black array scanned empty", "black map value", "clone of a red view"],
)
def test_reference_copied_into_a_black_value_mid_cycle_survives(rt: zs.Runtime, how: str) -> None:
    early = zs.Array[Mob]()
    places = zs.Map[zs.Name, Mob]()
    chain, x = _mid_mark_scenario(rt)
    if how == "new black array":
        kept = zs.Array[Mob]([x])
    elif how == "black array scanned empty":
        early.append(x)  # scanned as a root at the start of the cycle, when empty
        kept = early
    elif how == "black map value":
        places["x"] = x
        kept = places
    else:
        kept = chain[-1].carrier.clone()  # read from the not yet scanned object
    chain[-1].carrier.who = None
    while not rt.gc.step(0.01):
        rt.gc.verify()
    rt.gc.verify()
    assert not x.is_expired and x.spot == (4.0, 2.0)
    collect(rt)
    assert not x.is_expired
    kept.dispose()
    collect(rt)
    assert x.is_expired
