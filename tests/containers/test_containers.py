"""Native containers zs.Array[T], zs.Set[T], zs.Map[K, V], zs.Optional[T]:
creation from Python values, conversion and equality, the list / set /
dict protocols, element types of every kind, type and range errors that
leave the container unchanged, red views writing through, clones, and the
GC seen through containers (traced, killable, non-killable keys)."""

from __future__ import annotations

import contextlib
import copy
import math
import types
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import zsharp_py as zs
from helpers import collect, growth
from hostile_support import GcTrigger

# Arrays long enough that an iteration crosses what used to be copy-out
# chunks (iteration now reads each element from the array as it is then).
_ITER_CHUNK = 256


pytestmark = pytest.mark.usefixtures("no_leaked_values")


class Vec2(zs.Struct):
    x: zs.Float32
    y: zs.Float32


class Trooper(zs.Object):
    hp: zs.Int32
    ints: zs.Array[zs.Int32]
    units: zs.Array["Trooper"]
    weak_units: zs.Array[zs.WeakObjectPtr["Trooper"]]
    points: zs.Array[Vec2]
    words: zs.Array[zs.String]
    unit_set: zs.Set["Trooper"]
    by_name: zs.Map[zs.Name, "Trooper"]
    keyed_by_unit: zs.Map["Trooper", zs.Int32]
    spots: zs.Map[zs.Name, Vec2]
    maybe_text: zs.Optional[zs.String]
    maybe_point: zs.Optional[Vec2]


class Other(zs.Object):
    pass


class Tagged(zs.Struct):
    """A hashable struct that owns native memory (its string): as a set
    element or map key it is built natively for each lookup, add and
    removal, then cleared and freed."""

    tag: zs.String
    n: zs.Int32


class Defaulted(zs.Struct):
    """A struct with plain defaults (copied into every new value's storage)."""

    text: zs.String
    n: zs.Int32 = 7
    x: zs.Float32 = 0.5


class SetAndMapHolder(zs.Object):
    numbers: zs.Set[zs.Int32]
    scores: zs.Map[zs.Int32, zs.Int32]


Int32s = zs.Array[zs.Int32]

# Every container type used below is specialised once at import, so that no
# test is the first to specialise one while holding black values in its
# locals (the first specialisation snapshots its caller's locals: see
# values/test_value_lifetimes.py::test_first_specialisation_inside_a_function_...).
SPECIALISED = [
    zs.Array[Trooper],
    zs.Array[Vec2],
    zs.Array[bool],
    zs.Array[float],
    zs.Array[int],
    zs.Array[str],
    zs.Array[zs.AnsiString],
    zs.Array[zs.Array[zs.Array[zs.String]]],
    zs.Array[zs.Array[zs.Int32]],
    zs.Array[zs.Bool],
    zs.Array[zs.Float32],
    zs.Array[zs.Name],
    zs.Array[zs.String],
    zs.Array[zs.WeakObjectPtr[Trooper]],
    zs.Array[Defaulted],
    zs.Map[Tagged, zs.Int32],
    zs.Map[zs.Int32, Defaulted],
    zs.Map[zs.Int32, zs.Int32],
    zs.Map[Trooper, zs.Int32],
    zs.Map[zs.Int32, zs.String],
    zs.Map[zs.Int64, zs.Int64],
    zs.Map[zs.Name, Trooper],
    zs.Map[zs.Name, Vec2],
    zs.Map[zs.Name, zs.Int32],
    zs.Map[zs.String, zs.Array[zs.Int32]],
    zs.Optional[Defaulted],
    zs.Optional[Trooper],
    zs.Optional[Vec2],
    zs.Optional[zs.String],
    zs.Optional[zs.UInt8],
    zs.Set[Tagged],
    zs.Set[Trooper],
    zs.Set[zs.Int32],
    zs.Set[zs.Int64],
    zs.Set[zs.Name],
    zs.Set[zs.String],
] + [zs.Array[scalar] for scalar in (zs.Int8, zs.UInt8, zs.Int16, zs.UInt64, zs.Int64)]


# ---- specialisation ------------------------------------------------------------


def test_specialisations_are_cached_classes(rt: zs.Runtime) -> None:
    assert zs.Array[zs.Int32] is zs.Array[zs.Int32]
    assert zs.Map[zs.Name, zs.Int32] is zs.Map[zs.Name, zs.Int32]
    assert issubclass(zs.Array[zs.Int32], zs.Array)
    assert isinstance(Int32s(), zs.Array)


def test_bad_specialisations_are_refused(rt: zs.Runtime) -> None:
    with pytest.raises(TypeError):
        zs.Array()
    with pytest.raises(TypeError):
        zs.Array[zs.Int32, zs.Int32]
    with pytest.raises(TypeError):
        zs.Map[zs.Int32]
    with pytest.raises(TypeError):
        zs.Array[zs.Int32][zs.Int32]
    with pytest.raises(TypeError):
        zs.Set[zs.Array[zs.Int32]]()
    with pytest.raises(TypeError):
        zs.Array[object]()


def test_python_shorthands_as_element_types(rt: zs.Runtime) -> None:
    ints = zs.Array[int]([2**63 - 1])
    assert ints == [2**63 - 1]
    with pytest.raises(OverflowError):
        ints.append(2**63)
    assert zs.Array[float]([1]) == [1.0]
    assert zs.Array[bool]([True, 0]) == [True, False]
    words = zs.Array[str](["a", "é"])
    assert type(words[1]) is zs.String and words == ["a", "é"]


@pytest.mark.parametrize("kind", [zs.Array[zs.Int32], zs.Set[zs.Int32], zs.Map[zs.Int32, zs.Int32]])
@pytest.mark.parametrize("bad", ["text", 5, None])
def test_creation_from_a_non_collection_raises_type_error(
    rt: zs.Runtime, kind: type, bad: object
) -> None:
    before = rt.values_alive()
    with pytest.raises(TypeError):
        kind(bad)
    assert rt.values_alive() == before


def test_creation_takes_at_most_one_argument(rt: zs.Runtime) -> None:
    with pytest.raises(TypeError):
        Int32s([1], [2])


# ---- Array: scalar element types -----------------------------------------------


@pytest.mark.parametrize(
    "scalar, low, high",
    [
        (zs.Int8, -128, 127),
        (zs.UInt8, 0, 255),
        (zs.Int16, -(2**15), 2**15 - 1),
        (zs.Int32, -(2**31), 2**31 - 1),
        (zs.UInt64, 0, 2**64 - 1),
        (zs.Int64, -(2**63), 2**63 - 1),
    ],
)
def test_integer_arrays_store_their_whole_range(
    rt: zs.Runtime, scalar: type, low: int, high: int
) -> None:
    array = zs.Array[scalar]([low, 0, high])
    assert array == [low, 0, high]
    assert array.to_python() == [low, 0, high]
    for bad in (low - 1, high + 1):
        with pytest.raises(OverflowError):
            array.append(bad)
        with pytest.raises(OverflowError):
            array[0] = bad
        with pytest.raises(OverflowError):
            zs.Array[scalar]([0, bad])
    assert array == [low, 0, high]
    with pytest.raises(TypeError):
        array.append(1.5)
    with pytest.raises(TypeError):
        array.append("1")
    assert array == [low, 0, high]


def test_float32_array_rounds_and_range_checks(rt: zs.Runtime) -> None:
    array = zs.Array[zs.Float32]([1.5, 0.1, -2])
    assert array[0] == 1.5 and array[2] == -2.0
    assert array[1] != 0.1 and math.isclose(array[1], 0.1, rel_tol=1e-6)
    array.append(math.inf)
    assert array[-1] == math.inf
    array.append(math.nan)
    assert math.isnan(array[-1])
    with pytest.raises(OverflowError):
        array.append(1e39)
    with pytest.raises(TypeError):
        array.append("1.0")
    assert len(array) == 5


def test_bool_array(rt: zs.Runtime) -> None:
    array = zs.Array[zs.Bool]([True, False, 1, 0])
    assert array == [True, False, True, False]
    assert all(type(item) is bool for item in array)
    with pytest.raises(OverflowError):
        array.append(2)
    with pytest.raises(TypeError):
        array.append("yes")
    assert len(array) == 4


# ---- Array: the list protocol -----------------------------------------------------


def test_len_iter_contains_index_count(rt: zs.Runtime) -> None:
    array = Int32s([3, 1, 4, 1, 5])
    assert len(array) == 5
    assert list(array) == [3, 1, 4, 1, 5]
    assert list(reversed(array)) == [5, 1, 4, 1, 3]
    assert 4 in array and 9 not in array and "4" not in array
    assert array.index(1) == 1
    assert array.count(1) == 2 and array.count(9) == 0
    with pytest.raises(ValueError):
        array.index(9)
    assert bool(Int32s()) is False and bool(array) is True


def test_iteration_crosses_chunks_and_sees_later_writes(rt: zs.Runtime) -> None:
    count = 3 * _ITER_CHUNK + 5  # scalars are read in chunks of _ITER_CHUNK
    array = zs.Array[zs.Int64](range(count))
    seen = []
    for position, value in enumerate(array):
        seen.append(value)
        if position == 0:
            array[count - 1] = -1  # a later chunk: read after the write
    assert seen == list(range(count - 1)) + [-1]
    assert list(zs.Array[zs.Bool]([True, False])) == [True, False]
    assert list(Int32s()) == []


@pytest.mark.parametrize(
    "change",
    [
        lambda array: array.append(1),
        lambda array: array.pop(),
        lambda array: array.clear(),
        lambda array: array.extend(range(5000)),
    ],
)
def test_iteration_raises_when_the_array_changes_size(rt: zs.Runtime, change) -> None:
    array = Int32s(range(2 * _ITER_CHUNK))
    iterator = iter(array)
    assert next(iterator) == 0
    change(array)
    with pytest.raises(RuntimeError, match="changed size during iteration"):
        list(iterator)


def test_iteration_raises_when_the_storage_moves(rt: zs.Runtime) -> None:
    unit = Trooper(ints=list(range(2 * _ITER_CHUNK)))
    unit.add_to_root()
    iterator = iter(unit.ints)
    next(iterator)
    unit.ints = [7] * (2 * _ITER_CHUNK + 9)  # new storage (may be elsewhere)
    with pytest.raises(RuntimeError, match="changed size during iteration"):
        list(iterator)
    unit.remove_from_root()


def test_iteration_raises_when_the_array_expires(rt: zs.Runtime) -> None:
    black = Int32s(range(2 * _ITER_CHUNK))
    iterator = iter(black)
    next(iterator)
    black.dispose()
    with pytest.raises(zs.ExpiredConjugateError):
        list(iterator)
    unit = Trooper(ints=list(range(2 * _ITER_CHUNK)))
    red = iter(unit.ints)
    assert next(red) == 0
    del unit
    collect(rt)  # the owner is destroyed: its array memory is freed
    with pytest.raises(zs.ExpiredConjugateError):
        list(red)


def test_indexing(rt: zs.Runtime) -> None:
    array = Int32s([10, 20, 30])
    assert (array[0], array[2], array[-1], array[-3]) == (10, 30, 30, 10)
    with pytest.raises(TypeError):
        array["0"]
    with pytest.raises(TypeError):
        array[1.0]
    # Past either end, and outside [-2**63, 2**63) where the index does not
    # fit a C index: out of range, never wrapped or clipped onto an element,
    # and no conversion error left pending. A bool is refused, as by every
    # path of arr[i].
    for bad in (3, -4, 100, 2**63, -(2**63) - 1, 2**100, -(2**100)):
        with pytest.raises(IndexError):
            array[bad]
        with pytest.raises(IndexError):
            array[bad] = 0
        with pytest.raises(IndexError):
            del array[bad]
    for flag in (True, False):
        with pytest.raises(TypeError, match="not bool"):
            array[flag]
        with pytest.raises(TypeError, match="not bool"):
            array[flag] = 0
        with pytest.raises(TypeError, match="not bool"):
            del array[flag]
    assert array == [10, 20, 30]
    array[-1] = 33
    assert array == [10, 20, 33]
    with pytest.raises(IndexError):
        Int32s()[0]


def test_slicing_reads(rt: zs.Runtime) -> None:
    array = Int32s(range(10))
    assert array[2:5] == [2, 3, 4]
    assert array[::3] == [0, 3, 6, 9]
    assert array[::-1] == list(range(9, -1, -1))
    assert array[-3:] == [7, 8, 9]
    assert array[20:] == []
    assert array[5:2] == []


@pytest.mark.parametrize(
    "index, value",
    [
        (slice(1, 3), [20, 30, 40]),
        (slice(0, 0), [-1, -2]),
        (slice(4, None), []),
        (slice(None), [7]),
        (slice(0, None, 2), [100, 200, 300]),
        (slice(None, None, -2), [9, 8, 7]),
        (slice(10, 20), [55]),
    ],
)
def test_slice_assignment_matches_list(rt: zs.Runtime, index: slice, value: list) -> None:
    expected = [0, 1, 2, 3, 4, 5]
    array = Int32s(expected)
    expected[index] = value
    array[index] = value
    assert array == expected


@pytest.mark.parametrize(
    "index", [slice(1, 3), slice(None, None, 2), slice(None, None, -1), slice(10, 20), slice(None)]
)
def test_slice_deletion_matches_list(rt: zs.Runtime, index: slice) -> None:
    expected = [0, 1, 2, 3, 4, 5]
    array = Int32s(expected)
    del expected[index]
    del array[index]
    assert array == expected


def test_extended_slice_assignment_of_the_wrong_size_raises(rt: zs.Runtime) -> None:
    array = Int32s([0, 1, 2, 3])
    with pytest.raises(ValueError):
        array[::2] = [1, 2, 3]
    assert array == [0, 1, 2, 3]


def test_append_extend_insert(rt: zs.Runtime) -> None:
    array = Int32s()
    array.append(1)
    array.extend([2, 3])
    array.extend(iter([4]))
    array.extend(Int32s([5]))
    array.extend([])
    array.insert(0, 0)
    array.insert(-1, 45)
    array.insert(100, 6)
    array.insert(-100, -1)
    assert array == [-1, 0, 1, 2, 3, 4, 45, 5, 6]
    same = array
    array += (7, 8)  # extend, in place, as a list
    assert array is same and array[-2:] == [7, 8]
    with pytest.raises(OverflowError):
        array += [9, 2**40]  # all or nothing
    assert len(array) == 11 and array[-1] == 8


def test_pop_remove_clear(rt: zs.Runtime) -> None:
    array = Int32s([1, 2, 3, 2, 4])
    assert array.pop() == 4
    assert array.pop(0) == 1
    assert array.pop(-2) == 3
    assert array == [2, 2]
    array.remove(2)
    assert array == [2]
    with pytest.raises(ValueError):
        array.remove(9)
    array.clear()
    assert array == [] and len(array) == 0
    with pytest.raises(IndexError):
        array.pop()
    array.clear()
    assert array == []


def test_equality(rt: zs.Runtime) -> None:
    array = Int32s([1, 2, 3])
    assert array == [1, 2, 3] and array == (1, 2, 3)
    assert array == Int32s([1, 2, 3])
    assert array != [1, 2] and array != [1, 2, 4] and array != [1, 2, 3, 4]
    assert array != {1, 2, 3} and array != "123"
    with pytest.raises(TypeError):
        hash(array)
    assert repr(array) == "<Array[Int32] (black) [1, 2, 3]>"


def test_to_python_is_a_plain_list(rt: zs.Runtime) -> None:
    array = Int32s([1, 2])
    plain = array.to_python()
    assert type(plain) is list and plain == [1, 2]
    plain.append(3)
    assert len(array) == 2


# ---- no half-changed container --------------------------------------------------


@pytest.mark.parametrize(
    "operation, expected",
    [
        (lambda a: a.extend([1, "x"]), TypeError),
        (lambda a: a.extend([1, 2**40]), OverflowError),
        (lambda a: a.append("x"), TypeError),
        (lambda a: a.insert(1, None), TypeError),
        (lambda a: a.__setitem__(0, "x"), TypeError),
        (lambda a: a.__setitem__(slice(0, 2), [7, "x"]), TypeError),
        (lambda a: a.__setitem__(slice(0, 3), [7, 8, 2**40]), OverflowError),
        (lambda a: a.__setitem__(slice(None, None, 2), [7, "x"]), TypeError),
    ],
    ids=[
        "extend-type",
        "extend-range",
        "append",
        "insert",
        "setitem",
        "slice-type",
        "slice-range",
        "extended-slice-type",
    ],
)
def test_failed_array_operation_leaves_the_array_unchanged(
    rt: zs.Runtime, operation, expected: type[Exception]
) -> None:
    array = Int32s([10, 20, 30])
    with pytest.raises(expected) as raised:
        operation(array)
    assert type(raised.value) is expected
    assert array == [10, 20, 30]


def test_failed_set_update_leaves_the_set_unchanged(rt: zs.Runtime) -> None:
    numbers = zs.Set[zs.Int64]([1, 2])
    with pytest.raises(TypeError):
        numbers.update([3, "x"])
    assert numbers == {1, 2}


def test_failed_map_update_leaves_the_map_unchanged(rt: zs.Runtime) -> None:
    scores = zs.Map[zs.Name, zs.Int32]({"a": 1})
    with pytest.raises(TypeError):
        scores.update({"b": 2, "c": "x"})
    assert scores == {"a": 1}
    with pytest.raises(OverflowError):
        scores.update([("a", 5), ("d", 2**40)])
    assert scores == {"a": 1}


def test_failed_property_assignment_leaves_the_container_unchanged(rt: zs.Runtime) -> None:
    unit = Trooper(ints=[1, 2])
    with pytest.raises(TypeError):
        unit.ints = [3, "x"]
    with pytest.raises(OverflowError):
        unit.ints = [3, 2**40]
    assert unit.ints == [1, 2]


# ---- Array element kinds ------------------------------------------------------------


def test_array_of_objects_with_none(rt: zs.Runtime) -> None:
    a, b = Trooper(), Trooper()
    units = zs.Array[Trooper]([a, None, b])
    assert units[0] is a and units[1] is None and units[2] is b
    assert units == [a, None, b]
    assert a in units and None in units
    assert units.index(b) == 2
    units[1] = a
    assert units.count(a) == 2
    with pytest.raises(TypeError):
        units.append(Other())
    with pytest.raises(TypeError):
        units.append("unit")
    assert len(units) == 3
    assert units.to_python() == [a, a, b]


def test_array_of_objects_refuses_an_expired_object(rt: zs.Runtime) -> None:
    units = zs.Array[Trooper]()
    dead = Trooper()
    collect(rt)
    assert dead.is_expired
    with pytest.raises(zs.ExpiredConjugateError):
        units.append(dead)
    with pytest.raises(zs.ExpiredConjugateError):
        zs.Array[Trooper]([dead])
    assert units == []


@pytest.mark.parametrize("index", [slice(1, 4), slice(1, 4, 1), slice(3, 0, -1)])
def test_a_same_length_slice_of_objects_is_written_whole_or_not_at_all(
    rt: zs.Runtime, index: slice
) -> None:
    """A plain slice of the same length is written in place (zpy_array.c,
    written_in_place): an expired object in the middle refuses it before any
    element changes; a written one replaces exactly the slice, and what it
    replaced is garbage at the next collection."""
    kept = [Trooper() for _ in range(6)]
    holder = Trooper()
    holder.add_to_root()
    holder.units = kept
    holder.ints = list(range(6))
    dead = Trooper()
    collect(rt)
    assert dead.is_expired
    new = [Trooper(), Trooper(), Trooper()]
    with pytest.raises(zs.ExpiredConjugateError):
        holder.units[index] = [new[0], dead, new[2]]
    assert holder.units.to_python() == kept
    ints = holder.ints
    ints[index] = [10, 11, 12]
    expected = list(range(6))
    expected[index] = [10, 11, 12]
    assert ints == expected
    holder.units[index] = new
    expected_units = list(kept)
    expected_units[index] = new
    assert holder.units.to_python() == expected_units
    collect(rt)  # the replaced objects are garbage; the new ones held by the array
    assert all(not t.is_expired for t in new)
    assert sum(t.is_expired for t in kept) == 3
    rt.gc.verify()


def test_array_of_weak_pointers(rt: zs.Runtime) -> None:
    keep, drop = Trooper(), Trooper()
    keep.add_to_root()
    weak = zs.Array[zs.WeakObjectPtr[Trooper]]([keep, zs.WeakObjectPtr(drop), None])
    assert isinstance(weak[0], zs.WeakObjectPtr)
    assert weak[0].get() is keep and weak[1].get() is drop and weak[2].get() is None
    collect(rt)  # weak elements keep nothing alive
    assert drop.is_expired and not keep.is_expired
    assert weak[0].get() is keep and weak[1].get() is None
    with pytest.raises(TypeError):
        weak.append(Other())


def test_array_of_structs(rt: zs.Runtime) -> None:
    points = zs.Array[Vec2]([(1, 2), Vec2(3, 4), {"y": 5}])
    assert points.to_python() == [{"x": 1.0, "y": 2.0}, {"x": 3.0, "y": 4.0}, {"x": 0.0, "y": 5.0}]
    first = points[0]
    assert type(first) is Vec2 and not first.is_black
    first.y = 20
    assert points[0] == {"x": 1.0, "y": 20.0}
    assert [p.x for p in points] == [1.0, 3.0, 0.0]
    assert points.pop(1) == {"x": 3.0, "y": 4.0}  # a plain copy
    with pytest.raises(TypeError):
        points.append((1, "y"))
    with pytest.raises(OverflowError):
        points.append((1e40, 0))
    assert len(points) == 2


def test_array_of_strings(rt: zs.Runtime) -> None:
    words = zs.Array[zs.String](["alpha", zs.Utf8String("béta")])
    assert words == ["alpha", "béta"]
    view = words[1]
    assert type(view) is zs.String and not view.is_black
    view.assign("gamma")
    assert words.to_python() == ["alpha", "gamma"]
    words[0] = "delta"
    assert words == ["delta", "gamma"]
    assert "gamma" in words and words.index("gamma") == 1
    assert words.pop() == "gamma"
    with pytest.raises(TypeError):
        words.append(5)
    assert words == ["delta"]


def test_array_of_ansi_strings_refuses_non_ascii(rt: zs.Runtime) -> None:
    words = zs.Array[zs.AnsiString](["ok"])
    with pytest.raises(ValueError):
        words.append("é")
    with pytest.raises(ValueError):
        words.extend(["fine", "naïve"])
    assert words == ["ok"]


def test_array_of_names(rt: zs.Runtime) -> None:
    names = zs.Array[zs.Name](["Alpha", zs.Name("Beta_2")])
    assert names == ["alpha", "BETA_2"]
    assert type(names[0]) is zs.Name
    assert "ALPHA" in names
    assert names[1].number == 3
    with pytest.raises(TypeError):
        names.append(3)


def test_nested_arrays(rt: zs.Runtime) -> None:
    grid = zs.Array[zs.Array[zs.Int32]]([[1], [2, 3], []])
    assert grid == [[1], [2, 3], []]
    row = grid[1]
    assert type(row) is zs.Array[zs.Int32] and not row.is_black
    row.append(4)
    grid[2].extend([5, 6])
    assert grid.to_python() == [[1], [2, 3, 4], [5, 6]]
    grid[0] = [9, 9]
    assert grid[0] == [9, 9]
    with pytest.raises(TypeError):
        grid.append([1, "x"])
    with pytest.raises(TypeError):
        grid[0].append("x")
    assert grid == [[9, 9], [2, 3, 4], [5, 6]]
    deep = zs.Array[zs.Array[zs.Array[zs.String]]]([[["a"]], [["b", "c"], []]])
    assert deep == [[["a"]], [["b", "c"], []]]
    deep[1][0][1].assign("C")
    assert deep.to_python() == [[["a"]], [["b", "C"], []]]


def test_array_property_of_an_object(rt: zs.Runtime) -> None:
    unit = Trooper(ints=[1, 2])
    ints = unit.ints
    assert not ints.is_black and unit.ints is ints
    ints.append(3)
    assert unit.ints == [1, 2, 3]
    unit.ints = (7, 8)
    assert ints == [7, 8]  # the view is of the property, not of the old contents
    unit.ints = Int32s([9])
    assert unit.ints == [9]
    unit.ints = unit.ints
    assert unit.ints == [9]
    unit.ints = []
    assert ints == []


# ---- Set ----------------------------------------------------------------------------


def test_set_of_int64(rt: zs.Runtime) -> None:
    numbers = zs.Set[zs.Int64]([3, 1, 3, 2**63 - 1])
    assert len(numbers) == 3
    assert numbers == {1, 3, 2**63 - 1} and numbers == frozenset({1, 3, 2**63 - 1})
    assert numbers != {1, 3} and numbers != [1, 3, 2**63 - 1]
    assert 3 in numbers and 4 not in numbers and "3" not in numbers
    numbers.add(4)
    numbers.add(4)
    assert len(numbers) == 4
    numbers.discard(4)
    numbers.discard(4)
    numbers.remove(1)
    with pytest.raises(KeyError):
        numbers.remove(1)
    numbers.update([10, 11])
    assert set(numbers) == {3, 2**63 - 1, 10, 11}
    assert numbers.to_python() == {3, 2**63 - 1, 10, 11}
    popped = numbers.pop()
    assert popped in {3, 2**63 - 1, 10, 11} and popped not in numbers and len(numbers) == 3
    numbers.clear()
    assert len(numbers) == 0 and numbers == set()
    with pytest.raises(KeyError):
        numbers.pop()
    with pytest.raises(OverflowError):
        numbers.add(2**63)
    with pytest.raises(TypeError):
        numbers.add("x")
    assert numbers == set()
    assert "Set[Int64]" in repr(numbers)


def test_set_survives_growth_and_many_removals(rt: zs.Runtime) -> None:
    numbers = zs.Set[zs.Int64](range(500))
    for value in range(0, 500, 2):
        numbers.remove(value)
    assert numbers == set(range(1, 500, 2))
    assert all(v in numbers for v in range(1, 500, 2))
    assert not any(v in numbers for v in range(0, 500, 2))


def test_set_of_names_is_case_insensitive(rt: zs.Runtime) -> None:
    tags = zs.Set[zs.Name](["Enemy", "boss"])
    tags.add("ENEMY")
    assert len(tags) == 2 and "BOSS" in tags
    tags.remove("enemy")
    assert tags == {"Boss"}


def test_set_of_strings_elements_are_plain(rt: zs.Runtime) -> None:
    words = zs.Set[zs.String](["a", "b"])
    assert all(type(w) is str for w in words)
    assert words == {"a", "b"}


def test_set_of_objects(rt: zs.Runtime) -> None:
    a, b = Trooper(), Trooper()
    units = zs.Set[Trooper]([a, b, a])
    assert len(units) == 2 and a in units and b in units
    assert units == {a, b}
    assert set(units) == {a, b}
    units.remove(a)
    assert a not in units
    with pytest.raises(TypeError):
        units.add(Other())
    assert units == {b}


def test_set_property_of_an_object(rt: zs.Runtime) -> None:
    owner, a = Trooper(), Trooper()
    owner.unit_set.add(a)
    assert a in owner.unit_set
    owner.unit_set = [owner]
    assert owner.unit_set == {owner}


# ---- Map ------------------------------------------------------------------------------


def test_map_dict_protocol(rt: zs.Runtime) -> None:
    scores = zs.Map[zs.Name, zs.Int32]({"alice": 3, "bob": 5})
    assert len(scores) == 2
    assert scores["ALICE"] == 3
    assert "Bob" in scores and "carol" not in scores and 5 not in scores
    assert set(scores) == {"alice", "bob"} and all(type(k) is zs.Name for k in scores)
    assert scores.keys() == ["alice", "bob"]
    assert sorted(scores.values()) == [3, 5]
    assert sorted((str(k), v) for k, v in scores.items()) == [("alice", 3), ("bob", 5)]
    scores["carol"] = 1
    scores["alice"] += 10
    assert scores == {"alice": 13, "bob": 5, "carol": 1}
    assert scores.get("dave") is None and scores.get("dave", 0) == 0 and scores.get("bob") == 5
    assert scores.setdefault("bob", 99) == 5
    assert scores.setdefault("dave", 7) == 7 and scores["dave"] == 7
    scores.update({"erin": 1}, frank=2)
    scores.update([("gina", 3)])
    assert len(scores) == 7
    assert scores.pop("frank") == 2 and "frank" not in scores
    assert scores.pop("frank", None) is None
    with pytest.raises(KeyError):
        scores.pop("frank")
    del scores["gina"]
    with pytest.raises(KeyError):
        del scores["gina"]
    with pytest.raises(KeyError):
        scores["nobody"]
    with pytest.raises(KeyError):
        scores[12]  # a key of the wrong type is simply missing
    scores.clear()
    assert scores == {} and len(scores) == 0


def test_map_type_errors_leave_the_map_unchanged(rt: zs.Runtime) -> None:
    scores = zs.Map[zs.Name, zs.Int32]({"a": 1})
    with pytest.raises(TypeError):
        scores["b"] = "x"
    with pytest.raises(OverflowError):
        scores["b"] = 2**31
    with pytest.raises(TypeError):
        scores[5] = 1
    with pytest.raises(OverflowError):
        scores["a"] = 2**31
    assert scores == {"a": 1}
    with pytest.raises(TypeError):
        zs.Map[zs.Name, zs.Int32]({"a": "x"})
    with pytest.raises(TypeError, match="expected \\(key, value\\) pairs"):
        zs.Map[zs.Name, zs.Int32]([("a",)])


def test_map_equality(rt: zs.Runtime) -> None:
    m = zs.Map[zs.Int32, zs.String]({1: "one", 2: "two"})
    assert m == {1: "one", 2: "two"}
    assert m == {2: "two", 1: "one"}
    assert m != {1: "one"} and m != {1: "one", 2: "TWO"} and m != {1: "one", 3: "two"}
    assert m == zs.Map[zs.Int32, zs.String]({2: "two", 1: "one"})
    assert m != [1, 2]
    assert m.to_python() == {1: "one", 2: "two"}


def test_map_of_name_to_struct(rt: zs.Runtime) -> None:
    spots = zs.Map[zs.Name, Vec2]({"home": (1, 2)})
    spots["Away"] = Vec2(3, 4)
    home = spots["HOME"]
    assert type(home) is Vec2 and not home.is_black
    home.x = 10
    assert spots["home"] == {"x": 10.0, "y": 2.0}
    assert spots == {"home": {"x": 10.0, "y": 2.0}, "away": Vec2(3, 4)}
    spots["home"] = {"y": -1}
    assert spots["home"] == {"x": 10.0, "y": -1.0}
    assert spots.pop("away") == {"x": 3.0, "y": 4.0}


def test_map_of_string_to_int_arrays(rt: zs.Runtime) -> None:
    lists = zs.Map[zs.String, zs.Array[zs.Int32]]({"a": [1, 2]})
    lists["b"] = Int32s([3])
    lists["a"].append(9)
    assert lists == {"a": [1, 2, 9], "b": [3]}
    assert lists.to_python() == {"a": [1, 2, 9], "b": [3]}
    assert lists.setdefault("c", []) == []
    lists["c"].extend([4, 5])
    assert lists["c"] == [4, 5]
    with pytest.raises(TypeError):
        lists["d"] = [1, "x"]
    assert "d" not in lists


def test_map_with_object_values_and_keys(rt: zs.Runtime) -> None:
    a, b = Trooper(), Trooper()
    by_name = zs.Map[zs.Name, Trooper]({"a": a, "none": None})
    assert by_name["A"] is a and by_name["none"] is None
    with pytest.raises(TypeError):
        by_name["o"] = Other()
    by_unit = zs.Map[Trooper, zs.Int32]({a: 1})
    by_unit[b] = 2
    assert by_unit[a] == 1 and by_unit[b] == 2
    assert set(by_unit.keys()) == {a, b}


def test_map_survives_growth(rt: zs.Runtime) -> None:
    squares = zs.Map[zs.Int64, zs.Int64]({i: i * i for i in range(300)})
    for i in range(0, 300, 3):
        del squares[i]
    assert squares == {i: i * i for i in range(300) if i % 3}


def test_map_property_of_an_object(rt: zs.Runtime) -> None:
    unit = Trooper()
    unit.spots["a"] = (1, 1)
    unit.spots["a"].y = 5
    assert unit.spots == {"a": {"x": 1.0, "y": 5.0}}
    unit.spots = {"b": (2, 2)}
    assert unit.spots == {"b": {"x": 2.0, "y": 2.0}}


# ---- what sets and maps share ------------------------------------------------------

# A long tag: the native string owns a block of its own.
_TAG = "tag-" + "x" * 60


def _tagged_set_churn() -> Callable[[], None]:
    tags = zs.Set[Tagged]([("kept", 1)])

    def churn() -> None:
        tags.add((_TAG, 1))  # new
        tags.add((_TAG, 1))  # present
        assert (_TAG, 1) in tags
        tags.discard((_TAG, 1))  # present
        tags.discard((_TAG, 2))  # absent
        tags.update([(_TAG, 3)])
        tags.remove((_TAG, 3))

    return churn


def _tagged_map_churn() -> Callable[[], None]:
    counts = zs.Map[Tagged, zs.Int32]({("kept", 1): 1})

    def churn() -> None:
        counts[(_TAG, 1)] = 1  # new
        counts[(_TAG, 1)] = 2  # replaced
        assert counts[(_TAG, 1)] == 2 and counts.get((_TAG, 2)) is None
        del counts[(_TAG, 1)]
        counts.update({(_TAG, 3): 3})
        assert counts.pop((_TAG, 3)) == 3 and counts.pop((_TAG, 3), None) is None

    return churn


def _object_set_churn() -> Callable[[], None]:
    a, b = Trooper(), Trooper()
    units = zs.Set[Trooper]([a])

    def churn() -> None:
        units.add(b)
        assert b in units
        units.discard(b)
        units.discard(b)

    return churn


KEY_CHURNS = {
    "struct-set": _tagged_set_churn,
    "struct-map": _tagged_map_churn,
    "object-set": _object_set_churn,
}


@pytest.mark.parametrize("case", list(KEY_CHURNS), ids=list(KEY_CHURNS))
def test_keys_built_for_a_lookup_add_or_removal_are_freed(rt: zs.Runtime, case: str) -> None:
    """A key that is not read where it is staged (a struct, an object
    reference) is built into a temporary for each lookup, add and removal
    (native/binding/zpy_hash_base.c, native_key): the temporary and what it
    owns (a struct's string, in native memory) are freed every time, on
    every path (present, absent, new, replaced)."""
    python_bytes, native_blocks = growth(rt, KEY_CHURNS[case](), times=500)
    assert native_blocks == 0, f"{native_blocks} native blocks left by 500 rounds"
    assert python_bytes < 500, f"{python_bytes} bytes left by 500 rounds"


_HASH_WRITES: dict[str, Callable[[Any, Any], Any]] = {
    "set.add": lambda s, key: s.add(key),
    "set.discard": lambda s, key: s.discard(key),
    "set.remove": lambda s, key: s.remove(key),
    "set.update": lambda s, key: s.update([key]),
    "set.contains": lambda s, key: key in s,
    "map.setitem": lambda m, key: m.__setitem__(key, 5),
    "map.delitem": lambda m, key: m.__delitem__(key),
    "map.update": lambda m, key: m.update([(key, 5)]),
    "map.pop": lambda m, key: m.pop(key),
    "map.setdefault": lambda m, key: m.setdefault(key, 5),
    "map.get": lambda m, key: m.get(key),
}


class _ExpiringKey:
    """The integer 1 through ``__index__``, whose first conversion runs ``action``."""

    def __init__(self, action: Callable[[], None]) -> None:
        self.action: Callable[[], None] | None = action

    def __index__(self) -> int:
        action, self.action = self.action, None
        if action is not None:
            action()
        return 1


@pytest.mark.parametrize("how", ["dispose", "collect_owner", "close"])
@pytest.mark.parametrize("op", list(_HASH_WRITES), ids=list(_HASH_WRITES))
def test_a_set_or_map_expired_while_its_key_converts_raises(
    rt: zs.Runtime, op: str, how: str
) -> None:
    """The key's conversion (phase 1) disposes the set or map, collects
    the object it is a property of, or closes the runtime: every method
    raises ExpiredConjugateError, none reports success (a write silently
    lost), an absent key (KeyError) or a result with the error pending
    (SystemError)."""
    is_set = op.startswith("set.")
    if how == "dispose":
        target: Any = zs.Set[zs.Int32]({1}) if is_set else zs.Map[zs.Int32, zs.Int32]({1: 1})
        action: Callable[[], None] = target.dispose
    else:
        holder = SetAndMapHolder(numbers={1}, scores={1: 1})
        holder.add_to_root()
        target = holder.numbers if is_set else holder.scores

        def action() -> None:
            if how == "close":
                rt.close()
                return
            holder.remove_from_root()
            holder.mark_as_garbage()
            collect(rt)

    with pytest.raises(zs.ExpiredConjugateError):
        _HASH_WRITES[op](target, _ExpiringKey(action))
    assert target.is_expired


# ---- Optional ------------------------------------------------------------------------


def test_optional_string(rt: zs.Runtime) -> None:
    empty = zs.Optional[zs.String]()
    assert not empty.is_set and not empty and empty.get() is None and empty.get("d") == "d"
    assert empty == None  # noqa: E711
    assert empty.to_python() is None
    with pytest.raises(ValueError):
        empty.value
    full = zs.Optional[zs.String]("text")
    assert full.is_set and full
    assert full.value == "text" and type(full.value) is zs.String
    assert full == "text" and full != "other" and full != None  # noqa: E711
    full.value.assign("changed")
    assert full.to_python() == "changed"
    full.set("again")
    assert full == "again"
    full.reset()
    assert not full.is_set and full.get() is None
    full.reset()
    assert not full.is_set
    with pytest.raises(TypeError):
        full.set(5)
    assert not full.is_set
    assert zs.Optional[zs.String]("a") == zs.Optional[zs.String]("a")


def test_optional_struct(rt: zs.Runtime) -> None:
    maybe = zs.Optional[Vec2]((1, 2))
    view = maybe.value
    assert type(view) is Vec2 and not view.is_black
    view.x = 7
    assert maybe == {"x": 7.0, "y": 2.0}
    maybe.set(Vec2(3, 4))
    assert maybe.value == Vec2(3, 4)
    with pytest.raises(TypeError):
        maybe.set("no")
    with pytest.raises(OverflowError):
        maybe.set((1e40, 0))
    maybe.reset()
    assert maybe.get() is None


def test_optional_scalars_and_objects(rt: zs.Runtime) -> None:
    maybe = zs.Optional[zs.UInt8](200)
    assert maybe == 200
    with pytest.raises(OverflowError):
        maybe.set(256)
    unit = Trooper()
    holder = zs.Optional[Trooper](unit)
    assert holder.value is unit
    holder.set(None)
    assert holder.is_set and holder.value is None
    holder.reset()
    assert not holder.is_set


class ScalarOptionals(zs.Object):
    flag: zs.Optional[zs.Bool]
    small: zs.Optional[zs.Int8]
    big: zs.Optional[zs.UInt64]
    half: zs.Optional[zs.Float32]
    real: zs.Optional[zs.Float64]


@pytest.mark.parametrize(
    "member, value",
    [("flag", True), ("small", -128), ("big", 2**64 - 1), ("half", 0.5), ("real", -1.25)],
)
def test_optional_get_reads_each_scalar_kind_from_its_storage(
    rt: zs.Runtime, member: str, value: object
) -> None:
    """``get()`` of a scalar optional reads the element straight from the
    live storage (native/binding/containers.c): the exact value and type
    set, the default while unset, and ExpiredConjugateError once the holder
    is gone, never a read of freed memory."""
    holder = ScalarOptionals()
    optional = getattr(holder, member)
    assert optional.get() is None and optional.get(7) == 7
    setattr(holder, member, value)
    got = optional.get()
    assert got == value and type(got) is type(value)
    optional.reset()
    assert optional.get("unset") == "unset"
    setattr(holder, member, value)
    del holder
    collect(rt)
    with pytest.raises(zs.ExpiredConjugateError):
        optional.get()


def test_optional_property_of_an_object(rt: zs.Runtime) -> None:
    unit = Trooper()
    assert not unit.maybe_text.is_set
    unit.maybe_text = "hello"
    assert unit.maybe_text == "hello"
    unit.maybe_text.set("bye")
    assert unit.maybe_text.value == "bye"
    unit.maybe_text = None
    assert not unit.maybe_text.is_set
    unit.maybe_point = (1, 2)
    unit.maybe_point.value.y = 9
    assert unit.maybe_point == {"x": 1.0, "y": 9.0}


# ---- clones ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, mutate",
    [
        (lambda: Int32s([1, 2]), lambda c: c.append(3)),
        (lambda: zs.Array[zs.String](["a"]), lambda c: c[0].assign("z")),
        (lambda: zs.Array[Vec2]([(1, 2)]), lambda c: setattr(c[0], "x", 9)),
        (lambda: zs.Array[zs.Array[zs.Int32]]([[1]]), lambda c: c[0].append(2)),
        (lambda: zs.Set[zs.Int64]([1]), lambda c: c.add(2)),
        (lambda: zs.Map[zs.Name, Vec2]({"a": (1, 2)}), lambda c: setattr(c["a"], "y", 5)),
        (lambda: zs.Map[zs.String, zs.Array[zs.Int32]]({"a": [1]}), lambda c: c["a"].append(2)),
        (lambda: zs.Optional[zs.String]("x"), lambda c: c.value.assign("y")),
        (lambda: zs.Optional[Vec2]((1, 2)), lambda c: c.reset()),
    ],
    ids=[
        "Array[Int32]",
        "Array[String]",
        "Array[Vec2]",
        "Array[Array[Int32]]",
        "Set[Int64]",
        "Map[Name, Vec2]",
        "Map[String, Array[Int32]]",
        "Optional[String]",
        "Optional[Vec2]",
    ],
)
def test_clone_is_black_and_independent_both_ways(rt: zs.Runtime, make, mutate) -> None:
    original = make()
    plain = original.to_python()
    clone = original.clone()
    assert clone.is_black and clone == original
    mutate(clone)
    assert original.to_python() == plain
    assert clone.to_python() != plain
    again = original.clone()
    mutate(original)
    assert again.to_python() == plain
    for other in (copy.copy(again), copy.deepcopy(again)):
        assert other.is_black and other.to_python() == plain


def test_clone_of_a_red_container_view_is_black(rt: zs.Runtime) -> None:
    unit = Trooper(ints=[1, 2], words=["a"])
    ints = unit.ints.clone()
    assert ints.is_black and type(ints) is Int32s
    ints.append(3)
    assert unit.ints == [1, 2]
    unit.ints.append(4)
    assert ints == [1, 2, 3]
    word = unit.words[0].clone()
    assert word.is_black
    word.assign("b")
    assert unit.words == ["a"]


# ---- GC through containers -------------------------------------------------------------


def test_objects_in_an_object_array_are_traced_and_killable(rt: zs.Runtime) -> None:
    owner = Trooper()
    owner.add_to_root()
    a, b = Trooper(), Trooper()
    owner.units = [a, None, b]
    collect(rt)
    assert not a.is_expired and not b.is_expired
    b.mark_as_garbage()
    collect(rt)
    assert b.is_expired and not a.is_expired
    assert owner.units == [a, None, None]
    assert len(owner.units) == 3  # the slot is nulled, not removed


def test_objects_in_nested_containers_and_structs_are_traced(rt: zs.Runtime) -> None:
    class Slot(zs.Struct):
        unit: Trooper | None

    class Deep(zs.Object):
        grid: zs.Array[zs.Array[Trooper]]
        slots: zs.Map[zs.Int32, Slot]
        maybe: zs.Optional[Trooper]

    deep = Deep()
    deep.add_to_root()
    a, b, c = Trooper(), Trooper(), Trooper()
    deep.grid = [[a]]
    deep.slots[1] = Slot(b)
    deep.maybe = c
    collect(rt)
    assert not any(u.is_expired for u in (a, b, c))
    for u in (a, b, c):
        u.mark_as_garbage()
    collect(rt)
    assert all(u.is_expired for u in (a, b, c))
    assert deep.grid == [[None]]
    assert deep.slots[1].unit is None
    assert deep.maybe.is_set and deep.maybe.value is None


def test_map_values_are_killable(rt: zs.Runtime) -> None:
    owner = Trooper()
    owner.add_to_root()
    a = Trooper()
    owner.by_name["a"] = a
    collect(rt)
    assert owner.by_name["a"] is a
    a.mark_as_garbage()
    collect(rt)
    assert a.is_expired
    assert "a" in owner.by_name and owner.by_name["a"] is None


def test_set_elements_and_map_keys_keep_garbage_objects_alive(rt: zs.Runtime) -> None:
    # Documented: set elements and map keys are not killable (nulling them
    # would break the hash), so they keep even a garbage-marked object alive.
    owner = Trooper()
    owner.add_to_root()
    in_set, as_key = Trooper(), Trooper()
    owner.unit_set.add(in_set)
    owner.keyed_by_unit[as_key] = 1
    in_set.mark_as_garbage()
    as_key.mark_as_garbage()
    collect(rt)
    assert not in_set.is_expired and not as_key.is_expired
    assert in_set in owner.unit_set
    assert owner.keyed_by_unit[as_key] == 1
    owner.unit_set.remove(in_set)
    del owner.keyed_by_unit[as_key]
    collect(rt)
    assert in_set.is_expired and as_key.is_expired


def test_unreferenced_objects_in_containers_of_a_collected_owner_die_with_it(
    rt: zs.Runtime,
) -> None:
    owner = Trooper()
    a = Trooper()
    owner.units = [a]
    owner.unit_set.add(a)
    owner.by_name["a"] = a
    collect(rt)
    assert owner.is_expired and a.is_expired
    assert rt.live_objects() == 0


# ---- values taken from the container being changed ----------------------------------

SELF_COPIES = {
    "append an own element": (
        lambda: zs.Array[Vec2]([(1, 2)]),
        lambda a: a.append(a[0]),
        [{"x": 1.0, "y": 2.0}] * 2,
    ),
    "insert an own element": (
        lambda: zs.Array[Vec2]([(1, 2), (3, 4)]),
        lambda a: a.insert(0, a[1]),
        [{"x": 3.0, "y": 4.0}, {"x": 1.0, "y": 2.0}, {"x": 3.0, "y": 4.0}],
    ),
    "extend with itself": (
        lambda: zs.Array[Vec2]([(1, 2)]),
        lambda a: a.extend(a),
        [{"x": 1.0, "y": 2.0}] * 2,
    ),
    "slice-assign own elements": (
        lambda: zs.Array[Vec2]([(1, 2), (3, 4)]),
        lambda a: a.__setitem__(slice(0, 1), [a[1], a[1]]),
        [{"x": 3.0, "y": 4.0}] * 3,
    ),
    "append an own string": (
        lambda: zs.Array[zs.String](["a"]),
        lambda a: a.append(a[0]),
        ["a", "a"],
    ),
    "append an own row": (
        lambda: zs.Array[zs.Array[zs.Int32]]([[1]]),
        lambda a: a.append(a[0]),
        [[1], [1]],
    ),
    "copy a map value to a new key": (
        lambda: zs.Map[zs.Name, Vec2]({"a": (1, 2)}),
        lambda m: m.__setitem__("b", m["a"]),
        {"a": {"x": 1.0, "y": 2.0}, "b": {"x": 1.0, "y": 2.0}},
    ),
    "set an optional to its own value": (
        lambda: zs.Optional[Vec2]((1, 2)),
        lambda o: o.set(o.value),
        {"x": 1.0, "y": 2.0},
    ),
}


@pytest.mark.parametrize("case", list(SELF_COPIES), ids=list(SELF_COPIES))
def test_storing_a_view_of_the_container_being_changed(rt: zs.Runtime, case: str) -> None:
    # Like list.append(items[0]): the value is read before the storage moves.
    make, operation, expected = SELF_COPIES[case]
    container = make()
    try:
        operation(container)
    finally:
        state = container.to_python()
    assert container == expected, state


def test_optional_set_frees_what_it_staged(rt: zs.Runtime) -> None:
    """``set`` stages the value (a string's code units, a struct's members)
    in memory of its own, freed whether the set is done or its value is
    refused."""
    text = zs.Optional[zs.String]()
    point = zs.Optional[Defaulted]({"text": "kept"})

    def sets() -> None:
        text.set(_TAG)
        point.set({"text": _TAG, "n": 2})
        with pytest.raises(TypeError):
            point.set({"text": _TAG, "n": "not a number"})
        with pytest.raises(TypeError):
            text.set(5)

    python_bytes, native_blocks = growth(rt, sets, times=500)
    assert native_blocks == 0, f"{native_blocks} native blocks left by 500 rounds"
    assert python_bytes < 500, f"{python_bytes} bytes left by 500 rounds"
    assert text.get() == _TAG and point.get().to_python() == {"text": _TAG, "n": 2, "x": 0.5}


def test_failed_optional_set_keeps_the_old_value(rt: zs.Runtime) -> None:
    maybe = zs.Optional[Vec2]((1, 2))
    with pytest.raises(TypeError):
        maybe.set("bad")
    assert maybe == {"x": 1.0, "y": 2.0}
    with contextlib.suppress(zs.ExpiredConjugateError):
        maybe.set(maybe.value)  # whatever happens, no data may be lost
    assert maybe.is_set and maybe == {"x": 1.0, "y": 2.0}


# ---- declared defaults -----------------------------------------------------------------


class Defaults(zs.Struct):
    text: zs.String = "hi"
    numbers: zs.Array[zs.Int32] = [1, 2]
    tag: zs.Name = "Tag_1"
    maybe: zs.Optional[zs.Int32] = 5


class WithDefaults(zs.Object):
    numbers: zs.Array[zs.Int32] = [1, 2]
    label: zs.String = "label"
    spots: zs.Map[zs.Name, zs.Int32] = {"a": 1}
    maybe: zs.Optional[zs.Int32] = 5


def test_container_and_string_defaults_of_structs(rt: zs.Runtime) -> None:
    first, second = Defaults(), Defaults(text="other")
    assert first.to_python() == {"text": "hi", "numbers": [1, 2], "tag": "tag_1", "maybe": 5}
    assert second.text == "other" and second.numbers == [1, 2]
    first.numbers.append(3)
    assert second.numbers == [1, 2] and Defaults().numbers == [1, 2]


def test_container_and_string_defaults_of_objects(rt: zs.Runtime) -> None:
    first = WithDefaults()
    assert first.numbers == [1, 2] and first.label == "label"
    assert first.spots == {"a": 1} and first.maybe == 5
    first.numbers.append(3)
    first.spots["b"] = 2
    second = WithDefaults(numbers=[9])
    assert second.numbers == [9] and second.spots == {"a": 1}
    assert WithDefaults().numbers == [1, 2]


def _new_map_entry(write: Callable[[Any], Any]) -> Any:
    target = zs.Map[zs.Int32, Defaulted]({2: {"text": "old", "n": 1, "x": 1.0}})
    write(target)
    return target[1].to_python()


def _new_array_element(write: Callable[[Any], Any]) -> Any:
    target = zs.Array[Defaulted]([{"text": "old", "n": 1, "x": 1.0}])
    write(target)
    return target[-1].to_python()


# Every way a struct value gets new storage in a container, written from a
# dict that names only the member without a default.
NEW_STRUCT_SLOTS: dict[str, Callable[[], Any]] = {
    "map[key] =": lambda: _new_map_entry(lambda m: m.__setitem__(1, {"text": "t"})),
    "map.update": lambda: _new_map_entry(lambda m: m.update({1: {"text": "t"}})),
    "map.setdefault": lambda: _new_map_entry(lambda m: m.setdefault(1, {"text": "t"})),
    "Map(dict)": lambda: zs.Map[zs.Int32, Defaulted]({1: {"text": "t"}})[1].to_python(),
    "array.append": lambda: _new_array_element(lambda a: a.append({"text": "t"})),
    "array.extend": lambda: _new_array_element(lambda a: a.extend([{"text": "t"}])),
    "Array(list)": lambda: zs.Array[Defaulted]([{"text": "t"}])[0].to_python(),
    "optional.set": lambda: (o := zs.Optional[Defaulted](), o.set({"text": "t"}))[0].to_python(),
}


@pytest.mark.parametrize("case", list(NEW_STRUCT_SLOTS), ids=list(NEW_STRUCT_SLOTS))
def test_a_new_container_slot_of_a_struct_starts_from_its_plain_defaults(
    rt: zs.Runtime, case: str
) -> None:
    """A struct written into new storage (a new map entry, array element,
    optional value) from a dict that leaves members out starts from the
    struct's plain defaults, as ``Defaulted(text="t")`` does, not zeroes."""
    assert NEW_STRUCT_SLOTS[case]() == {"text": "t", "n": 7, "x": 0.5}
    assert Defaulted(text="t").to_python() == {"text": "t", "n": 7, "x": 0.5}


class Scored(zs.Struct):
    x: zs.Int32
    score: zs.Int32 = 7
    weight: zs.Float64 = 0.5


def test_new_array_elements_from_partial_dicts_start_from_the_defaults(rt: zs.Runtime) -> None:
    """A struct element inserted from a dict naming some members starts
    from the struct's declared defaults (the members it does not name keep
    them), by every insertion, into a new array and into one whose
    elements were all removed."""
    made = {"x": 1, "score": 7, "weight": 0.5}
    arr = zs.Array[Scored]()
    arr.append({"x": 1})
    arr.insert(0, {"x": 1})
    arr.extend([{"x": 1}, {"x": 1, "score": 3}])
    arr += [{"x": 1}]
    arr[1:1] = [{"x": 1}]
    assert arr.to_python() == [made] * 4 + [{"x": 1, "score": 3, "weight": 0.5}, made]
    arr[:] = [(9, 9, 9.0)] * 8
    del arr[:]  # its storage kept: new slots start from the defaults, not old elements
    arr.append({"x": 2})
    arr.insert(0, {"weight": 1.5})
    assert arr.to_python() == [{"x": 0, "score": 7, "weight": 1.5}, {**made, "x": 2}]
    arr.dispose()


# ---- forward references ------------------------------------------------------------------

FORWARD_SOURCE = """
import zsharp_py as zs


class SquadMember(zs.Object):
    squad: zs.Array["SquadMember"]
"""


def _module_declaring_squad_member(name: str) -> type:
    module = types.ModuleType(name)
    exec(compile(FORWARD_SOURCE, f"<{name}>", "exec"), module.__dict__)  # noqa: S102
    return module.SquadMember  # type: ignore[no-any-return]


def test_same_forward_reference_in_two_modules_resolves_in_each_module(rt: zs.Runtime) -> None:
    # zs.Array["SquadMember"] written in two modules names two different
    # classes: each module's array must hold its own class.
    first = _module_declaring_squad_member("squad_module_a")
    second = _module_declaring_squad_member("squad_module_b")
    assert first is not second
    a = first()
    a.squad.append(first())
    b = second()
    b.squad.append(second())
    assert type(b.squad[0]) is second
    with pytest.raises(TypeError):
        b.squad.append(first())


# --- `in` compared natively: the same answers as Python's list ------------

_SCALAR_KINDS = [
    zs.Bool,
    zs.Int8,
    zs.Int16,
    zs.Int32,
    zs.Int64,
    zs.UInt8,
    zs.UInt16,
    zs.UInt32,
    zs.UInt64,
    zs.Float32,
    zs.Float64,
]


def _fits(kind: object, value: object) -> bool:
    try:
        zs.Array[kind]([value])  # type: ignore[index]
    except (TypeError, OverflowError, ValueError):
        return False
    return True


@pytest.mark.parametrize("kind", _SCALAR_KINDS, ids=lambda kind: kind.__name__)
def test_in_over_scalar_elements_answers_as_python_does(rt: zs.Runtime, kind: object) -> None:
    """Exact ints, bools and floats are compared with scalar elements in C;
    the answer must be Python's, with no rounding: 2**53 + 1 is not the
    float 2**53, 0.5 is no integer, NaN equals nothing, -0.0 equals 0."""
    candidates = [
        0,
        1,
        -1,
        2,
        7,
        127,
        -128,
        255,
        256,
        2**31 - 1,
        -(2**31),
        2**32,
        2**53,
        2**53 + 1,
        2**63 - 1,
        -(2**63),
        2**63,
        2**64 - 1,
        True,
        False,
        0.0,
        -0.0,
        0.5,
        1.0,
        -1.0,
        2.0**53,
        2.0**63,
        2.0**64,
        1e300,
        math.inf,
        -math.inf,
        math.nan,
        3.25,
    ]
    elements = [value for value in candidates if _fits(kind, value)]
    array = zs.Array[kind](elements)  # type: ignore[index]
    plain = array.to_python()
    probes = candidates + [2**64, -(2**63) - 1, 2**100, -(2**100), 1.5e-300, "1", None, (1,)]
    for probe in probes:
        assert (probe in array) == (probe in plain), (kind, probe, plain)
    empty = zs.Array[kind]()  # type: ignore[index]
    assert 0 not in empty and 0.0 not in empty


def test_in_over_scalar_elements_with_number_subclasses_asks_python(rt: zs.Runtime) -> None:
    """A subclass of int or float may define == as it likes: its answer
    decides, element by element."""

    class AlwaysEqual(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    class NeverEqual(float):
        def __eq__(self, other: object) -> bool:
            return False

        __hash__ = float.__hash__

    array = zs.Array[zs.Int32]([5, 6])
    assert AlwaysEqual(99) in array
    assert NeverEqual(5.0) not in zs.Array[zs.Float64]([5.0])


def test_in_over_object_references(rt: zs.Runtime) -> None:
    """Objects are found by handle; None finds a null element; an object
    that is not in the array, or has expired, is not found; other values
    are not objects and are not found."""
    holder = Trooper()
    holder.add_to_root()
    first, second, outsider = Trooper(outer=holder), Trooper(), Trooper()
    outsider.add_to_root()
    holder.units = [first, None, second]
    units = holder.units
    assert first in units and second in units and None in units
    assert outsider not in units
    assert 5 not in units and "first" not in units and holder not in units
    holder.units = [first]
    assert None not in holder.units
    doomed = Trooper()
    holder.units.append(doomed)
    holder.units.pop()
    collect(rt)
    assert doomed.is_expired
    assert doomed not in holder.units and first in holder.units


class Friendly(zs.Object):
    """An object class whose == is its own: equal to every Friendly."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Friendly)

    __hash__ = zs.Object.__hash__


class FriendlyHolder(zs.Object):
    friends: zs.Array[Friendly]


def test_in_over_objects_with_their_own_eq_asks_python(rt: zs.Runtime) -> None:
    """When the probe's or an element's class defines ==, that decides."""
    holder = FriendlyHolder()
    holder.add_to_root()
    member, other = Friendly(), Friendly()
    member.add_to_root()
    other.add_to_root()
    holder.friends = [member]
    assert other in holder.friends  # Friendly.__eq__ says so
    assert holder.friends.to_python() == [member]


@given(
    elements=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=8),
    probe=st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=True), st.booleans()),
)
@settings(max_examples=300, deadline=None)
def test_in_over_int64_and_float64_elements_matches_a_list(
    elements: list[int], probe: object
) -> None:
    """Random probes, ints of any size and floats of any value, against the
    same elements as a list: the native comparison never rounds."""
    with zs.Runtime():
        ints = zs.Array[zs.Int64](elements)
        assert (probe in ints) == (probe in elements)
        reals = [float(element) for element in elements]
        floats = zs.Array[zs.Float64](reals)
        assert (probe in floats) == (probe in reals)


def test_to_python_of_scalar_arrays_reads_the_array_as_it_is_after_the_list_is_made(
    rt: zs.Runtime,
) -> None:
    """Array.to_python() of scalars fills its list straight from the array
    once the list exists; a collection that the list's allocation runs (a
    gc callback here) and that changes the array is seen: the copy is of
    the array as it is then, never of freed memory."""
    floats = zs.Array[zs.Float64]([float(i) for i in range(64)])
    ints = zs.Array[zs.Int16]([1, -2, 3])
    assert ints.to_python() == [1, -2, 3]
    assert zs.Array[zs.Bool]([True, False]).to_python() == [True, False]

    def grow() -> None:
        if len(floats) < 4096:
            floats.extend([0.5] * 1000)  # reallocates the array's storage

    with GcTrigger(grow):
        listed = floats.to_python()
    assert listed[:64] == [float(i) for i in range(64)]
    assert listed[64:] == [0.5] * (len(listed) - 64)
    assert len(floats) >= len(listed)
