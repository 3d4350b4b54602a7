"""Objects and their conjugates: creation, names, properties, type checks,
identity, and the operations a conjugate refuses."""

from __future__ import annotations

import copy
import math
import pickle

import pytest

import zsharp_py as zs
from classes import Actor, Hero, Item
from helpers import collect

# (property, scalar type, minimum, maximum) for every scalar type.
INTEGER_FIELDS = [
    ("i8", zs.Int8, -(2**7), 2**7 - 1),
    ("u8", zs.UInt8, 0, 2**8 - 1),
    ("i16", zs.Int16, -(2**15), 2**15 - 1),
    ("u16", zs.UInt16, 0, 2**16 - 1),
    ("health", zs.Int32, -(2**31), 2**31 - 1),
    ("u32", zs.UInt32, 0, 2**32 - 1),
    ("i64", zs.Int64, -(2**63), 2**63 - 1),
    ("u64", zs.UInt64, 0, 2**64 - 1),
]
FLOAT32_MAX = 3.4028234663852886e38


# ---- creation --------------------------------------------------------------


def test_name_outer_and_property_keywords_are_applied(rt: zs.Runtime) -> None:
    boss = Actor(name="Boss")
    a = Actor(name="Hero", outer=boss, health=7, speed=2.5, alive=True, i8=-3, u64=2**64 - 1)
    assert a.name == "Hero"
    assert a.outer is boss
    assert boss.outer is None
    assert (a.health, a.speed, a.alive, a.i8, a.u64) == (7, 2.5, True, -3, 2**64 - 1)


def test_unset_properties_take_declared_defaults_or_zero(rt: zs.Runtime) -> None:
    a = Actor()
    assert a.health == 100
    assert a.speed == 0.0
    assert a.alive is False
    assert (a.i8, a.u8, a.i16, a.u16, a.u32, a.i64, a.u64, a.f32) == (0,) * 8
    assert a.target is None
    assert a.friend.get() is None
    assert a.outer is None


class _Inner(zs.Struct):
    a: zs.UInt8 = 255
    b: zs.Float32 = -1.5


class _Outer(zs.Struct):
    inner: _Inner
    c: zs.Int16 = -7
    label: zs.String = "slow"  # not plain data: initialised after creation


class _Imaged(zs.Object):
    i8: zs.Int8 = -128
    u64: zs.UInt64 = 2**64 - 1
    f32: zs.Float32 = 0.25
    f64: zs.Float64 = -2.5
    flag: zs.Bool = True
    plain: _Inner
    mixed: _Outer
    other: "_Imaged | None" = None


class _ImagedChild(_Imaged):
    extra: zs.Int32 = 42


def test_plain_defaults_are_copied_in_by_the_creating_call(rt: zs.Runtime) -> None:
    from zsharp_py._model.object import class_layout

    layout = class_layout(_Imaged)
    # Scalars and the plain struct come from the image; the struct holding a
    # string needs the runtime; a None reference default is just zero.
    assert layout.image and [p.name for p in layout.initializers] == ["mixed"]
    assert layout.defaults == []
    for cls in (_Imaged, _ImagedChild):
        a = cls()
        assert (a.i8, a.u64, a.f32, a.f64, a.flag) == (-128, 2**64 - 1, 0.25, -2.5, True)
        assert (a.plain.a, a.plain.b) == (255, -1.5)
        assert (a.mixed.inner.a, a.mixed.inner.b, a.mixed.c, a.mixed.label) == (
            255,
            -1.5,
            -7,
            "slow",
        )
        assert a.other is None
    assert _ImagedChild().extra == 42
    b = _ImagedChild(i8=5, extra=-1, plain=(1, 2.0), other=_Imaged())
    assert (b.i8, b.extra, b.plain.a, b.plain.b, b.u64) == (5, -1, 1, 2.0, 2**64 - 1)
    assert class_layout(Item).defaults == [] and class_layout(zs.Object).image == b""


def test_auto_names_count_per_class_from_zero(rt: zs.Runtime) -> None:
    a0, a1 = Actor(), Actor()
    h0 = Hero()
    a2 = Actor()
    assert [a0.name, a1.name, a2.name] == ["Actor_0", "Actor_1", "Actor_2"]
    assert h0.name == "Hero_0"


def test_conjugate_type_is_the_declared_class(rt: zs.Runtime) -> None:
    a, h = Actor(), Hero()
    assert type(a) is Actor
    assert type(h) is Hero
    assert isinstance(h, Actor) and isinstance(a, zs.Object)


def test_subclass_inherits_properties_and_defaults(rt: zs.Runtime) -> None:
    h = Hero(health=5, level=9, speed=1.25)
    assert (h.health, h.level, h.speed) == (5, 9, 1.25)
    assert Hero().health == 100 and Hero().level == 1
    target = Actor()
    h.target = target
    h.sidekick = h
    assert h.target is target and h.sidekick is h
    # A Hero is an Actor, so it fits Actor references.
    a = Actor(target=h)
    assert a.target is h


def test_unknown_keyword_raises_typeerror_and_leaks_nothing(rt: zs.Runtime) -> None:
    with pytest.raises(TypeError, match="colour"):
        Actor(colour=3)
    with pytest.raises(TypeError, match="level"):
        Actor(level=3)  # a Hero property, not an Actor one
    collect(rt)
    assert rt.live_objects() == 0


def test_name_and_outer_arguments_are_type_checked(rt: zs.Runtime) -> None:
    with pytest.raises(TypeError):
        Actor(name=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Actor(outer="not an object")  # type: ignore[arg-type]
    collect(rt)
    assert rt.live_objects() == 0


# ---- scalar properties -----------------------------------------------------


@pytest.mark.parametrize(
    ("field", "scalar", "low", "high"), INTEGER_FIELDS, ids=[f[0] for f in INTEGER_FIELDS]
)
def test_integer_property_accepts_both_bounds_and_rejects_beyond(
    rt: zs.Runtime, field: str, scalar: type, low: int, high: int
) -> None:
    a = Actor()
    setattr(a, field, high)
    assert getattr(a, field) == high
    with pytest.raises(OverflowError):
        setattr(a, field, high + 1)
    assert getattr(a, field) == high  # a failed store changes nothing
    setattr(a, field, low)
    assert getattr(a, field) == low
    with pytest.raises(OverflowError):
        setattr(a, field, low - 1)
    assert getattr(a, field) == low
    # The marker type itself range-checks the same way.
    assert scalar(high) == high and scalar(low) == low
    with pytest.raises(OverflowError):
        scalar(high + 1)
    with pytest.raises(OverflowError):
        scalar(low - 1)


@pytest.mark.parametrize("field", [f[0] for f in INTEGER_FIELDS])
@pytest.mark.parametrize("bad", ["7", 1.5, 2.0, None, b"1"], ids=repr)
def test_integer_property_rejects_non_integers_with_typeerror(
    rt: zs.Runtime, field: str, bad: object
) -> None:
    a = Actor()
    setattr(a, field, 3)
    with pytest.raises(TypeError):
        setattr(a, field, bad)
    assert getattr(a, field) == 3


@pytest.mark.parametrize("field", ["speed", "f32"])
def test_float_property_accepts_ints_and_rejects_strings(rt: zs.Runtime, field: str) -> None:
    a = Actor()
    setattr(a, field, 3)
    assert getattr(a, field) == 3.0 and type(getattr(a, field)) is float
    setattr(a, field, -0.5)
    assert getattr(a, field) == -0.5
    for bad in ("1.0", b"1.0", None, object()):
        with pytest.raises(TypeError):
            setattr(a, field, bad)
    assert getattr(a, field) == -0.5


def test_float32_rejects_finite_values_beyond_its_range(rt: zs.Runtime) -> None:
    a = Actor()
    a.f32 = FLOAT32_MAX
    assert a.f32 == FLOAT32_MAX
    a.f32 = -FLOAT32_MAX
    assert a.f32 == -FLOAT32_MAX
    for bad in (3.5e38, -3.5e38, 1e300):
        with pytest.raises(OverflowError, match=r"Actor\.f32"):
            a.f32 = bad
    assert a.f32 == -FLOAT32_MAX
    with pytest.raises(OverflowError):
        zs.Float32(1e39)
    # Infinities are representable, so they are stored as such.
    a.f32 = math.inf
    assert a.f32 == math.inf


def test_float64_keeps_full_precision(rt: zs.Runtime) -> None:
    a = Actor(speed=0.1)
    assert a.speed == 0.1
    a.speed = 1e300
    assert a.speed == 1e300


@pytest.mark.parametrize(
    ("value", "expected"), [(True, True), (False, False), (1, True), (0, False)]
)
def test_bool_accepts_true_false_one_and_zero(
    rt: zs.Runtime, value: object, expected: bool
) -> None:
    a = Actor(alive=not expected)
    a.alive = value
    assert a.alive is expected


@pytest.mark.parametrize("value", [2, -1, 256])
def test_bool_rejects_other_integers_with_overflowerror(rt: zs.Runtime, value: int) -> None:
    a = Actor(alive=True)
    with pytest.raises(OverflowError, match=r"Actor\.alive"):
        a.alive = value
    assert a.alive is True
    with pytest.raises(OverflowError):
        zs.Bool(value)


def test_bool_rejects_strings_with_typeerror(rt: zs.Runtime) -> None:
    a = Actor()
    with pytest.raises(TypeError):
        a.alive = "yes"


def test_scalar_errors_name_the_class_and_the_property(rt: zs.Runtime) -> None:
    a = Actor()
    with pytest.raises(OverflowError, match=r"Actor\.health"):
        a.health = 2**31
    with pytest.raises(TypeError, match=r"Actor\.health"):
        a.health = "x"
    with pytest.raises(TypeError, match=r"Actor\.speed"):
        a.speed = "fast"
    h = Hero()
    with pytest.raises(OverflowError, match=r"Hero\.level"):
        h.level = -(2**31) - 1


def test_scalar_types_convert_plain_values() -> None:
    assert zs.Int32(5) == 5
    assert type(zs.Int32(5)) is int
    assert zs.UInt8(255) == 255
    assert zs.Float64(2) == 2.0 and type(zs.Float64(2)) is float
    assert zs.Bool(1) is True
    with pytest.raises(OverflowError):
        zs.Int8(300)
    with pytest.raises(OverflowError):
        zs.UInt64(-1)
    with pytest.raises(TypeError):
        zs.Int32("5")


def test_constructor_keyword_out_of_range_raises_overflowerror(rt: zs.Runtime) -> None:
    with pytest.raises(OverflowError, match=r"Actor\.u8"):
        Actor(u8=256)


# ---- object references -----------------------------------------------------


def test_reference_rejects_an_object_of_an_unrelated_class(rt: zs.Runtime) -> None:
    a, b = Actor(), Actor()
    a.target = b
    with pytest.raises(TypeError, match=r"Actor\.target"):
        a.target = Item()  # type: ignore[assignment]
    with pytest.raises(TypeError):
        a.target = 5  # type: ignore[assignment]
    with pytest.raises(TypeError):
        a.friend = Item()  # type: ignore[assignment]
    assert a.target is b


def test_reference_rejects_an_object_of_another_runtime(rt: zs.Runtime) -> None:
    a = Actor()
    a.add_to_root()
    with zs.Runtime() as other:
        stranger = Actor()
        assert stranger.runtime is other
        with pytest.raises(ValueError, match="another runtime"):
            a.target = stranger
        with pytest.raises(ValueError, match="another runtime"):
            a.friend = stranger
        with pytest.raises(ValueError):
            stranger.target = a
        other.gc.verify()
    assert a.target is None
    assert a.friend.get() is None


def test_reference_rejects_an_expired_object(rt: zs.Runtime) -> None:
    a = Actor()
    a.add_to_root()
    dead = Actor()
    collect(rt)
    assert dead.is_expired
    with pytest.raises(zs.ExpiredConjugateError):
        a.target = dead
    with pytest.raises(zs.ExpiredConjugateError):
        a.friend = dead
    assert a.target is None


def test_reading_a_reference_twice_gives_the_same_conjugate(rt: zs.Runtime) -> None:
    a = Actor()
    b = Actor(outer=a)
    a.target = b
    assert a.target is b
    assert a.target is a.target
    assert b.outer is a
    assert b.outer is b.outer
    assert a.friend.get() is None
    a.friend = b
    assert a.friend.get() is b


def test_conjugate_identity_while_held_and_a_dropped_conjugate_is_remade(rt: zs.Runtime) -> None:
    a = Actor()
    a.add_to_root()
    a.target = Actor(health=42)
    first = a.target
    assert a.target is first and a.target is a.target
    handle = first.handle
    collect(rt)
    assert a.target is first  # still the one conjugate while Python holds it
    del first  # nobody holds it: freed by refcount, its table entry goes with it
    assert rt._conjugate_get(handle) is None
    again = a.target  # a new conjugate of the same object
    assert again.handle == handle and again.health == 42 and a.target is again
    collect(rt)
    assert a.target is again and not again.is_expired


@pytest.mark.parametrize(
    "operation", [copy.copy, copy.deepcopy, pickle.dumps], ids=["copy", "deepcopy", "pickle"]
)
def test_object_conjugates_cannot_be_copied_or_pickled(rt: zs.Runtime, operation) -> None:
    a = Actor()
    with pytest.raises(TypeError):
        operation(a)
    if operation is not copy.copy:  # deep operations reach the conjugate inside a list too
        with pytest.raises(TypeError):
            operation([a])


def test_object_conjugates_are_red(rt: zs.Runtime) -> None:
    a = Actor()
    assert a.is_black is False
    assert a.is_expired is False


def test_handle_holds_index_and_a_nonzero_serial(rt: zs.Runtime) -> None:
    a, b = Actor(), Actor()
    assert a.handle & 0xFFFFFFFF != b.handle & 0xFFFFFFFF
    assert a.handle >> 32 >= 1 and b.handle >> 32 >= 1


# ---- class declarations ----------------------------------------------------


def test_unsupported_annotation_raises_typeerror_at_declaration(rt: zs.Runtime) -> None:
    with pytest.raises(
        TypeError,
        match=r"Bad\.x: unsupported property type list; "
        r"use zs\.Array\[T\]",
    ):

        class Bad(zs.Object):
            x: list

    collect(rt)
    assert rt.live_objects() == 0


class _DeclaredBeforeItsType(zs.Object):
    x: "_LaterList"  # a forward reference: checked at first use


_LaterList = list


def test_unsupported_forward_reference_raises_typeerror_at_first_instantiation(
    rt: zs.Runtime,
) -> None:
    with pytest.raises(
        TypeError,
        match=r"_DeclaredBeforeItsType\.x: unsupported property "
        r"type _LaterList; use zs\.Array",
    ):
        _DeclaredBeforeItsType()
    with pytest.raises(TypeError):  # and it keeps failing, without a half-made class
        _DeclaredBeforeItsType()
    collect(rt)
    assert rt.live_objects() == 0


def test_unresolvable_annotation_raises_typeerror(rt: zs.Runtime) -> None:
    class Dangling(zs.Object):
        other: "NoSuchClass | None"  # noqa: F821

    with pytest.raises(TypeError):
        Dangling()


def test_property_named_name_raises_typeerror(rt: zs.Runtime) -> None:
    class Named(zs.Object):
        name: zs.Int32

    with pytest.raises(TypeError, match="name"):
        Named()


def test_property_shadowing_a_parent_property_raises_typeerror(rt: zs.Runtime) -> None:
    class Shadow(Actor):
        health: zs.Int64

    with pytest.raises(TypeError, match="health"):
        Shadow()


def test_python_shorthand_annotations_map_to_scalars(rt: zs.Runtime) -> None:
    class Plain(zs.Object):
        count: int = 3
        ratio: float
        flag: bool

    p = Plain()
    assert (p.count, p.ratio, p.flag) == (3, 0.0, False)
    p.count = 2**63 - 1
    with pytest.raises(OverflowError):
        p.count = 2**63  # int is a shorthand for Int64
    with pytest.raises(OverflowError):
        p.flag = 2


def test_local_classes_resolve_string_annotations_in_their_scope(rt: zs.Runtime) -> None:
    class Leaf(zs.Object):
        value: zs.Int16

    class Node(zs.Object):
        next: "Node | None"
        leaf: "Leaf | None"

    node = Node(next=Node(), leaf=Leaf(value=-4))
    assert type(node.next) is Node
    assert node.leaf.value == -4
    with pytest.raises(TypeError):
        node.leaf = Node()  # type: ignore[assignment]


def test_property_names_that_are_c_keywords_work(rt: zs.Runtime) -> None:
    class Keywords(zs.Object):
        default: zs.Int32
        static: zs.Int8
        struct: "Keywords | None"

    k = Keywords(default=5, static=-1)
    k.struct = k
    assert (k.default, k.static) == (5, -1)
    assert k.struct is k


# ---- property names the C layout must not trip over --------------------------------


def test_property_named_like_the_layout_header_member_works(rt: zs.Runtime) -> None:
    # "hdr" is the name the C layout gives the object header; a property
    # with that name is a valid declaration and must not collide with it.
    class Packet(zs.Object):
        hdr: zs.Int16
        body: zs.Int32

    p = Packet(hdr=7, body=9)
    assert (p.hdr, p.body) == (7, 9)
    assert p.name == "Packet_0"


def test_property_names_differing_by_a_trailing_underscore_work(rt: zs.Runtime) -> None:
    # "default" is a C keyword, so its C member is renamed; that renaming
    # must not collide with a property that really is called "default_".
    class Config(zs.Object):
        default: zs.Int32
        default_: zs.Int8

    c = Config(default=1, default_=2)
    assert (c.default, c.default_) == (1, 2)
    c.default = 300
    assert (c.default, c.default_) == (300, 2)


def test_property_named_cls_can_be_set_by_keyword(rt: zs.Runtime) -> None:
    class Classified(zs.Object):
        cls: zs.UInt8

    c = Classified(cls=3)
    assert c.cls == 3


def test_non_ascii_class_names_work(rt: zs.Runtime) -> None:
    class Héros(zs.Object):
        vie: zs.Int32 = 3

    h = Héros()
    assert h.vie == 3
    assert h.name == "Héros_0"


def test_non_ascii_property_names_work(rt: zs.Runtime) -> None:
    class Acteur(zs.Object):
        santé: zs.Int32 = 3

    a = Acteur(santé=4)
    assert a.santé == 4


# ---- names -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "Hero",
        "Foo_3",
        "Foo_03",
        "Foo_",
        "_5",
        "Foo_999999999",
        "Foo_1234567890",
        "héros",
        "a b",
        "x" * 1024,
    ],
)
def test_object_names_round_trip(rt: zs.Runtime, name: str) -> None:
    assert Actor(name=name).name == name


@pytest.mark.parametrize("name", ["a\0b", "\ud800", "x" * 1025])
def test_invalid_object_names_raise_valueerror(rt: zs.Runtime, name: str) -> None:
    with pytest.raises(ValueError):
        Actor(name=name)
    collect(rt)
    assert rt.live_objects() == 0


def test_names_compare_case_insensitively_and_keep_the_first_spelling(rt: zs.Runtime) -> None:
    assert Actor(name="Hero").name == "Hero"
    assert Actor(name="HERO").name == "Hero"  # FName semantics: one entry per name
    with zs.Runtime():  # every runtime has its own name table
        assert Actor(name="HERO").name == "HERO"
