"""zs.Struct subclasses: creation (positional, keyword, defaults), conversion
and equality, red views writing through, clones, nesting (structs in
structs, object references, strings and containers as members), type and
range errors, and structs as container elements and map values."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

import zsharp_py as zs
from helpers import collect

pytestmark = pytest.mark.usefixtures("no_leaked_values")


class Vec3(zs.Struct):
    x: zs.Float64
    y: zs.Float64
    z: zs.Float64


class Point(zs.Struct):
    """Same member names as Vec3 but another type."""

    x: zs.Float64
    y: zs.Float64
    z: zs.Float64


class Color(zs.Struct):
    r: zs.UInt8
    g: zs.UInt8
    b: zs.UInt8
    a: zs.UInt8 = 255


class Bounds(zs.Struct):
    """``lo`` lives at the struct's own address (rule 8 of docs/design.md)."""

    lo: Vec3
    hi: Vec3


class Rich(zs.Struct):
    """A struct holding every kind of member."""

    where: Vec3
    target: "Pawn | None"
    friend: zs.WeakObjectPtr["Pawn"]
    label: zs.String
    tag: zs.Name
    numbers: zs.Array[zs.Int32]
    scores: zs.Map[zs.Name, zs.Int32]
    maybe: zs.Optional[zs.Float64]
    count: zs.Int16


class Pawn(zs.Object):
    position: Vec3
    box: Bounds
    rich: Rich
    tint: Color
    path: zs.Array[Vec3]
    named: zs.Map[zs.Name, Vec3]


# Every container type used below is specialised once at import, so that no
# test is the first to specialise one while holding black values in its
# locals (the first specialisation snapshots its caller's locals: see
# test_value_lifetimes.py::test_first_specialisation_inside_a_function_...).
SPECIALISED = [
    zs.Array[Color],
    zs.Array[Vec3],
    zs.Map[zs.Int32, Color],
    zs.Map[zs.Name, Vec3],
    zs.Optional[Color],
]


# ---- creation --------------------------------------------------------------


def test_positional_creation_in_declaration_order(rt: zs.Runtime) -> None:
    v = Vec3(1.0, 2.0, 3.0)
    assert (v.x, v.y, v.z) == (1.0, 2.0, 3.0)
    assert v.is_black is True and v.is_expired is False
    assert type(v) is Vec3


def test_keyword_and_mixed_creation(rt: zs.Runtime) -> None:
    assert Vec3(z=3.0, x=1.0) == (1.0, 0.0, 3.0)
    assert Vec3(1.0, z=5.0) == {"x": 1.0, "y": 0.0, "z": 5.0}


def test_missing_members_are_zeroed_or_take_their_default(rt: zs.Runtime) -> None:
    assert Vec3() == (0.0, 0.0, 0.0)
    assert Color() == (0, 0, 0, 255)
    assert Color(1, 2, 3) == (1, 2, 3, 255)
    assert Color(a=0) == (0, 0, 0, 0)


def test_ints_are_accepted_for_float_members(rt: zs.Runtime) -> None:
    v = Vec3(1, 2, 3)
    assert v.x == 1.0 and isinstance(v.x, float)


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        ((1.0, 2.0, 3.0, 4.0), {}, "at most 3 positional"),
        ((), {"w": 1.0}, "unknown member"),
        ((1.0,), {"x": 2.0}, "multiple values"),
    ],
)
def test_bad_arguments_raise_type_error_and_allocate_nothing(
    rt: zs.Runtime, args: tuple, kwargs: dict, message: str
) -> None:
    before = rt.values_alive()
    with pytest.raises(TypeError, match=message):
        Vec3(*args, **kwargs)
    assert rt.values_alive() == before


def test_wrong_member_type_raises_type_error_naming_the_member(rt: zs.Runtime) -> None:
    before = rt.values_alive()
    with pytest.raises(TypeError, match="Vec3.y"):
        Vec3(1.0, "two", 3.0)
    with pytest.raises(TypeError):
        Color(r=1.5)
    assert rt.values_alive() == before


def test_out_of_range_member_raises_overflow_error(rt: zs.Runtime) -> None:
    before = rt.values_alive()
    with pytest.raises(OverflowError):
        Color(256)
    with pytest.raises(OverflowError):
        Color(g=-1)
    assert rt.values_alive() == before


def test_base_struct_and_struct_inheritance_are_refused(rt: zs.Runtime) -> None:
    with pytest.raises(TypeError):
        zs.Struct()

    class Derived(Vec3):
        w: zs.Float64

    with pytest.raises(TypeError, match="inherit"):
        Derived()


def test_reserved_member_names_are_refused(rt: zs.Runtime) -> None:
    class Bad(zs.Struct):
        clone: zs.Int32

    with pytest.raises(TypeError, match="reserved"):
        Bad()


def test_struct_containing_itself_is_refused(rt: zs.Runtime) -> None:
    class Loop(zs.Struct):
        inner: "Loop"

    with pytest.raises(TypeError, match="itself"):
        Loop()


# ---- conversion, equality, repr -------------------------------------------


def test_to_python_is_a_plain_dict(rt: zs.Runtime) -> None:
    v = Vec3(1.0, 2.0, 3.0)
    plain = v.to_python()
    assert plain == {"x": 1.0, "y": 2.0, "z": 3.0}
    assert type(plain) is dict
    plain["x"] = 99.0
    assert v.x == 1.0


def test_equality_with_structs_dicts_and_tuples(rt: zs.Runtime) -> None:
    v = Vec3(1.0, 2.0, 3.0)
    assert v == Vec3(1.0, 2.0, 3.0)
    assert v != Vec3(1.0, 2.0, 4.0)
    assert v == (1.0, 2.0, 3.0)
    assert v != (1.0, 2.0)
    assert v == {"x": 1.0, "y": 2.0, "z": 3.0}
    assert v != {"x": 1.0}
    assert v != "Vec3(1, 2, 3)"
    assert v != 5


def test_structs_of_different_types_are_never_equal(rt: zs.Runtime) -> None:
    assert Vec3(1.0, 2.0, 3.0) != Point(1.0, 2.0, 3.0)


def test_struct_unpacks_like_a_tuple(rt: zs.Runtime) -> None:
    x, y, z = Vec3(1.0, 2.0, 3.0)
    assert (x, y, z) == (1.0, 2.0, 3.0)
    assert list(Color(1, 2, 3)) == [1, 2, 3, 255]


def test_structs_are_unhashable(rt: zs.Runtime) -> None:
    with pytest.raises(TypeError):
        hash(Vec3())


def test_repr_shows_type_and_members(rt: zs.Runtime) -> None:
    assert repr(Vec3(1.0, 2.0, 3.0)) == "Vec3(x=1.0, y=2.0, z=3.0)"
    assert repr(Bounds((1, 2, 3), (4, 5, 6))) == (
        "Bounds(lo={'x': 1.0, 'y': 2.0, 'z': 3.0}, hi={'x': 4.0, 'y': 5.0, 'z': 6.0})"
    )


def test_pickle_is_refused(rt: zs.Runtime) -> None:
    with pytest.raises(TypeError):
        pickle.dumps(Vec3())


# ---- member writes ------------------------------------------------------------


def test_black_member_writes_and_checks(rt: zs.Runtime) -> None:
    v = Vec3()
    v.x = 4
    assert v.x == 4.0
    with pytest.raises(TypeError, match="x"):
        v.x = "four"
    assert v.x == 4.0
    c = Color()
    with pytest.raises(OverflowError):
        c.r = 300
    assert c.r == 0


def test_unknown_attribute_cannot_be_set(rt: zs.Runtime) -> None:
    v = Vec3()
    with pytest.raises(AttributeError):
        v.w = 1.0  # type: ignore[attr-defined]


# ---- red views into an object -----------------------------------------------


def test_object_member_is_a_red_view_that_writes_through(rt: zs.Runtime) -> None:
    p = Pawn()
    view = p.position
    assert view.is_black is False and view.is_expired is False
    assert type(view) is Vec3
    view.x = 5.0
    view.z = -1.0
    assert p.position == (5.0, 0.0, -1.0)
    assert p.position is view  # one live view per member


def test_assigning_a_struct_copies_it(rt: zs.Runtime) -> None:
    p = Pawn()
    v = Vec3(1.0, 2.0, 3.0)
    p.position = v
    v.x = 100.0
    assert p.position.x == 1.0
    p.position.y = 50.0
    assert v.y == 2.0


def test_assigning_a_tuple_or_a_partial_dict(rt: zs.Runtime) -> None:
    p = Pawn()
    p.position = (1.0, 2.0, 3.0)
    assert p.position == (1.0, 2.0, 3.0)
    p.position = {"y": 9.0}  # unlisted members keep their values
    assert p.position == (1.0, 9.0, 3.0)


@pytest.mark.parametrize(
    "bad, error",
    [
        ("xyz", TypeError),
        (5, TypeError),
        (Point(1.0, 2.0, 3.0), TypeError),
        ((1.0, 2.0, 3.0, 4.0), TypeError),
        ({"w": 1.0}, TypeError),
        ((1.0, "y"), TypeError),
    ],
)
def test_bad_struct_assignment_raises_and_leaves_the_member_unchanged(
    rt: zs.Runtime, bad: object, error: type
) -> None:
    p = Pawn(position=Vec3(7.0, 8.0, 9.0))
    with pytest.raises(error):
        p.position = bad
    assert p.position == (7.0, 8.0, 9.0)


def test_out_of_range_in_a_tuple_assignment_leaves_the_member_unchanged(rt: zs.Runtime) -> None:
    p = Pawn(tint=Color(1, 2, 3, 4))
    with pytest.raises(OverflowError):
        p.tint = (10, 20, 300)
    assert p.tint == (1, 2, 3, 4)


def test_self_assignment_through_a_view(rt: zs.Runtime) -> None:
    p = Pawn(position=(1.0, 2.0, 3.0))
    p.position = p.position
    assert p.position == (1.0, 2.0, 3.0)


def test_object_keyword_takes_a_struct(rt: zs.Runtime) -> None:
    p = Pawn(position=Vec3(1.0, 2.0, 3.0), tint=(9, 8, 7))
    assert p.position == (1.0, 2.0, 3.0)
    assert (p.tint.r, p.tint.g, p.tint.b) == (9, 8, 7)


def test_a_tuple_converts_to_the_same_struct_everywhere(rt: zs.Runtime) -> None:
    # Color(1, 2, 3) takes the declared default a=255; the same tuple stored
    # as a container element or optional value should give the same struct.
    expected = Color(1, 2, 3)
    assert expected == (1, 2, 3, 255)
    assert zs.Array[Color]([(1, 2, 3)])[0] == expected
    assert zs.Optional[Color]((1, 2, 3)).value == expected
    assert zs.Map[zs.Int32, Color]({1: (1, 2, 3)})[1] == expected


def test_unset_struct_member_of_an_object_is_zero(rt: zs.Runtime) -> None:
    p = Pawn()
    assert p.position == (0.0, 0.0, 0.0)
    assert p.box == {"lo": {"x": 0.0, "y": 0.0, "z": 0.0}, "hi": {"x": 0.0, "y": 0.0, "z": 0.0}}


# ---- clones -----------------------------------------------------------------


def test_clone_of_a_black_struct_is_independent(rt: zs.Runtime) -> None:
    v = Vec3(1.0, 2.0, 3.0)
    c = v.clone()
    assert c == v and c is not v
    assert c.is_black
    c.x = 10.0
    assert v.x == 1.0
    v.y = 20.0
    assert c.y == 2.0


def test_clone_of_a_red_view_is_black_and_independent(rt: zs.Runtime) -> None:
    p = Pawn(position=(1.0, 2.0, 3.0))
    view = p.position
    c = view.clone()
    assert c.is_black and not view.is_black
    c.x = 10.0
    assert p.position.x == 1.0
    view.y = 20.0
    assert c.y == 2.0


def test_copy_and_deepcopy_give_black_clones(rt: zs.Runtime) -> None:
    p = Pawn(position=(1.0, 2.0, 3.0))
    for c in (copy.copy(p.position), copy.deepcopy(p.position)):
        assert c.is_black and c == (1.0, 2.0, 3.0)
        c.x = -1.0
        assert p.position.x == 1.0


def test_clone_deep_copies_strings_and_containers(rt: zs.Runtime) -> None:
    r = Rich(label="hello", numbers=[1, 2], scores={"a": 1}, maybe=2.5)
    c = r.clone()
    c.label.assign("changed")
    c.numbers.append(3)
    c.scores["b"] = 2
    c.maybe.reset()
    assert r.label == "hello"
    assert r.numbers == [1, 2]
    assert r.scores == {"a": 1}
    assert r.maybe == 2.5
    r.numbers[0] = 100
    assert c.numbers == [1, 2, 3]


# ---- nesting ------------------------------------------------------------------


def test_nested_struct_members_are_views_of_the_right_type(rt: zs.Runtime) -> None:
    p = Pawn()
    box = p.box
    lo = box.lo
    # lo lives at box's own address: both views exist, each of its own type
    assert type(box) is Bounds and type(lo) is Vec3
    assert lo is not box
    assert p.box is box and p.box.lo is lo
    lo.x = 1.0
    box.hi.z = 2.0
    assert p.box == {"lo": {"x": 1.0, "y": 0.0, "z": 0.0}, "hi": {"x": 0.0, "y": 0.0, "z": 2.0}}
    assert p.box.lo == (1.0, 0.0, 0.0)


def test_nested_struct_creation_and_assignment(rt: zs.Runtime) -> None:
    b = Bounds(Vec3(1.0, 2.0, 3.0), (4.0, 5.0, 6.0))
    assert b.lo == (1.0, 2.0, 3.0) and b.hi == (4.0, 5.0, 6.0)
    b.lo = {"z": 30.0}
    assert b.lo == (1.0, 2.0, 30.0)
    b.hi = Vec3(7.0, 8.0, 9.0)
    assert b == {"lo": {"x": 1.0, "y": 2.0, "z": 30.0}, "hi": {"x": 7.0, "y": 8.0, "z": 9.0}}
    assert b.lo.is_black is False  # a view into the black struct


def test_struct_with_every_kind_of_member(rt: zs.Runtime) -> None:
    target = Pawn()
    target.add_to_root()
    r = Rich(
        where=(1.0, 2.0, 3.0),
        target=target,
        friend=target,
        label="héllo",
        tag="Boss_2",
        numbers=[1, 2, 3],
        scores={"a": 1},
        maybe=1.5,
        count=-7,
    )
    assert r.where == (1.0, 2.0, 3.0)
    assert r.target is target
    assert r.friend.get() is target
    assert type(r.label) is zs.String and r.label == "héllo"
    assert r.tag == "boss_2" and r.tag.number == 3
    assert r.numbers == [1, 2, 3]
    assert r.scores == {"A": 1}
    assert r.maybe == 1.5 and r.maybe.is_set
    assert r.count == -7
    plain = r.to_python()
    assert plain["label"] == "héllo" and plain["numbers"] == [1, 2, 3]
    assert plain["target"] is target
    assert plain["maybe"] == 1.5


def test_members_of_a_struct_view_write_through_to_the_object(rt: zs.Runtime) -> None:
    p = Pawn()
    target = Pawn()
    p.rich.label.assign("abc")
    p.rich.numbers.extend([4, 5])
    p.rich.scores["x"] = 3
    p.rich.maybe.set(9.0)
    p.rich.target = target
    p.rich.tag = "Tag"
    assert p.rich.to_python()["label"] == "abc"
    assert p.rich.numbers == [4, 5]
    assert p.rich.scores == {"x": 3}
    assert p.rich.maybe == 9.0
    assert p.rich.target is target
    assert p.rich.tag == "TAG"
    p.rich.label = "def"
    assert p.rich.label == "def"


def test_wrong_object_type_in_a_struct_member(rt: zs.Runtime) -> None:
    class Other(zs.Object):
        pass

    r = Rich()
    with pytest.raises(TypeError):
        r.target = Other()
    with pytest.raises(TypeError):
        Rich(target=Other())
    assert r.target is None


def test_object_reference_in_an_object_struct_member_is_traced_and_killable(rt: zs.Runtime) -> None:
    holder = Pawn()
    holder.add_to_root()
    target = Pawn()
    holder.rich.target = target
    holder.rich.friend = target
    collect(rt)
    assert not target.is_expired
    assert holder.rich.target is target
    target.mark_as_garbage()
    collect(rt)
    assert target.is_expired
    assert holder.rich.target is None
    assert holder.rich.friend.get() is None


def test_weak_member_of_a_struct_does_not_keep_an_object_alive(rt: zs.Runtime) -> None:
    holder = Pawn()
    holder.add_to_root()
    target = Pawn()
    holder.rich.friend = target
    collect(rt)
    assert target.is_expired
    assert holder.rich.friend.get() is None


# ---- structs in containers ----------------------------------------------------


def test_array_of_structs_elements_are_views(rt: zs.Runtime) -> None:
    p = Pawn(path=[(1.0, 2.0, 3.0), Vec3(4.0, 5.0, 6.0), {"z": 9.0}])
    path = p.path
    assert path.to_python() == [
        {"x": 1.0, "y": 2.0, "z": 3.0},
        {"x": 4.0, "y": 5.0, "z": 6.0},
        {"x": 0.0, "y": 0.0, "z": 9.0},
    ]
    first = path[0]
    assert type(first) is Vec3 and not first.is_black
    first.x = -1.0
    assert p.path[0].x == -1.0
    assert p.path[0] is first
    path[1] = Vec3(0.5, 0.5, 0.5)
    assert p.path[1] == (0.5, 0.5, 0.5)
    assert Vec3(0.5, 0.5, 0.5) in path
    assert path.index(Vec3(0.0, 0.0, 9.0)) == 2
    assert path.index({"x": 0.0, "y": 0.0, "z": 9.0}) == 2


def test_array_of_structs_equals_a_list_of_tuples_like_its_elements_do(rt: zs.Runtime) -> None:
    path = zs.Array[Vec3]([(1.0, 2.0, 3.0)])
    assert path[0] == (1.0, 2.0, 3.0)
    assert path == [Vec3(1.0, 2.0, 3.0)]
    assert path == [{"x": 1.0, "y": 2.0, "z": 3.0}]
    # a struct equals the tuple of its members, so containers of structs
    # should too (elementwise), as list/dict equality would
    assert path == [(1.0, 2.0, 3.0)]
    assert (1.0, 2.0, 3.0) in path
    assert path.index((1.0, 2.0, 3.0)) == 0
    m = zs.Map[zs.Name, Vec3]({"a": (1.0, 2.0, 3.0)})
    assert m["a"] == (1.0, 2.0, 3.0)
    assert m == {"a": (1.0, 2.0, 3.0)}


def test_struct_as_map_value_is_a_view_that_writes_through(rt: zs.Runtime) -> None:
    p = Pawn()
    p.named["Start"] = Vec3(1.0, 2.0, 3.0)
    p.named["end"] = (4.0, 5.0, 6.0)
    start = p.named["START"]
    assert type(start) is Vec3 and not start.is_black
    start.y = 20.0
    assert p.named["start"] == (1.0, 20.0, 3.0)
    assert p.named == {"start": Vec3(1.0, 20.0, 3.0), "END": {"x": 4.0, "y": 5.0, "z": 6.0}}
    values = p.named.values()
    assert all(type(v) is Vec3 for v in values)


def test_map_of_name_to_struct_as_black_value(rt: zs.Runtime) -> None:
    m = zs.Map[zs.Name, Vec3]({"a": (1.0, 2.0, 3.0)})
    m["a"].x = 5.0
    assert m["A"] == (5.0, 2.0, 3.0)
    with pytest.raises(TypeError):
        m["b"] = "not a vector"
    assert "b" not in m and len(m) == 1


def test_struct_views_of_a_black_struct_expire_with_it(rt: zs.Runtime) -> None:
    b = Bounds((1, 2, 3), (4, 5, 6))
    lo = b.lo
    b.dispose()
    assert lo.is_expired
    with pytest.raises(zs.ExpiredConjugateError):
        lo.x
    assert "expired" in repr(lo)


def test_struct_in_another_runtime_is_copied_by_value(rt: zs.Runtime) -> None:
    v = Vec3(1.0, 2.0, 3.0)
    with zs.Runtime() as other:
        p = Pawn()
        p.position = v
        assert p.position == (1.0, 2.0, 3.0)
        assert p.runtime is other
    assert v == (1.0, 2.0, 3.0)


def test_creation_keeps_python_init_and_metaclass_call(rt: zs.Runtime) -> None:
    """Struct classes are called by vectorcall (native/binding/value.c,
    value_vectorcall) only while nothing of the class's own stands in the
    way: a Python __init__ still runs, a metaclass __call__ still decides."""
    seen: list[Any] = []

    class Initialised(zs.Struct):
        x: zs.Float64

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            seen.append((args, kwargs))

    class Meta(type(zs.Struct)):  # type: ignore[misc]
        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            seen.append("meta")
            return super().__call__(*args, **kwargs)

    class Called(zs.Struct, metaclass=Meta):
        x: zs.Float64

    assert Initialised(2.0).x == 2.0 and Initialised(x=3.0).x == 3.0
    assert seen == [((2.0,), {}), ((), {"x": 3.0})]
    seen.clear()
    assert Called(4.0).x == 4.0
    assert seen == ["meta"]
    with pytest.raises(TypeError, match="at most 1 positional"):
        Called(1.0, 2.0)
    with pytest.raises(TypeError, match="unknown member 'z'"):
        Initialised(z=1.0)
