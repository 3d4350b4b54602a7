"""Re-classing through the base descriptor (FINDINGS.md, class 3):
``object.__dict__['__class__'].__set__(obj, Other)`` skips the ``__class__``
property that refuses ``obj.__class__ = Other`` (zsharp_py/_base/expiry.py
FIXED_CLASS). zsharp_py._core refuses it through an audit hook
(native/binding/conjugates.c), so no descriptor ever reads or writes a
native object through another class's layout."""

from __future__ import annotations

from typing import Any

import pytest

import zsharp_py as zs

set_class = object.__dict__["__class__"].__set__


class Tiny(zs.Object):
    b: zs.UInt8


class Big(zs.Object):
    numbers: zs.Array[zs.Int64]
    label: zs.String
    total: zs.Float64


class BigChild(Big):
    extra: zs.Int32


class Wide(zs.Struct):
    a: zs.Int64
    b: zs.Int64
    c: zs.String


class Narrow(zs.Struct):
    a: zs.UInt8


@pytest.mark.parametrize(
    "source, target", [(Tiny, Big), (Big, Tiny), (Big, BigChild), (BigChild, Big)]
)
def test_object_conjugates_refuse_the_base_descriptor(
    rt: zs.Runtime, source: type, target: type
) -> None:
    target()  # laid out: its descriptors exist
    obj = source()
    with pytest.raises(TypeError, match="cannot change the class"):
        set_class(obj, target)
    assert type(obj) is source
    if source is Tiny:
        assert obj.b == 0
        with pytest.raises(TypeError):
            Big.__dict__["total"].__set__(obj, 1.0)  # and its descriptors still refuse it
    rt.gc.verify()


@pytest.mark.parametrize(
    "make, target",
    [
        (lambda: zs.Utf8String("abcd"), zs.String),
        (lambda: zs.String("abcd"), zs.AnsiString),
        (lambda: zs.Array[zs.Int8]([1, 2]), zs.Array[zs.Int64]),
        (lambda: Narrow(1), Wide),
        (lambda: zs.Set[zs.Int32]({1}), zs.Map[zs.Int32, zs.String]),
    ],
)
def test_value_conjugates_refuse_the_base_descriptor(
    rt: zs.Runtime, make: Any, target: type
) -> None:
    value = make()
    kind = type(value)
    with pytest.raises(TypeError, match="cannot change the class"):
        set_class(value, target)
    assert type(value) is kind
    value.dispose()


def test_a_plain_object_may_still_change_class() -> None:
    """The hook refuses conjugates only."""

    class A:
        pass

    class B:
        pass

    a = A()
    set_class(a, B)
    assert type(a) is B
    a.__class__ = A
    assert type(a) is A


def test_a_plain_object_cannot_become_a_conjugate() -> None:
    class Plain:
        __slots__ = ()

    with pytest.raises(TypeError):
        set_class(Plain(), Tiny)


def test_class_checks_hold_across_many_and_changing_types(rt: zs.Runtime) -> None:
    """Descriptors and value methods remember, per type version tag, whether
    a type is a conjugate class (native/binding/core.h, zs_type_derives):
    hundreds of types through the same memo slots, and types changed
    between two checks, never make a foreign instance pass for a conjugate
    nor a conjugate fail."""
    tiny = Tiny()
    big = Big()
    strangers = []
    for index in range(300):  # more types than memo slots: every slot reused
        stranger = type(f"Stranger{index}", (), {"b": 0, "total": 0.0})
        strangers.append(stranger())
        if index % 50 == 0:
            stranger.extra = index  # a changed type gets a new tag
    for stranger in strangers:
        with pytest.raises(TypeError):
            Tiny.b.__get__(stranger)
        with pytest.raises(TypeError):
            Big.label.__set__(stranger, "x")
        with pytest.raises(TypeError):
            Big.numbers.__get__(stranger)
        tiny.b = 7
        assert Tiny.b.__get__(tiny) == 7
        Big.label.__set__(big, "ok")
        assert str(big.label) == "ok"
    Tiny.note = "changed"  # the conjugate class's own tag changes too
    assert tiny.b == 7
    with pytest.raises(TypeError):
        Tiny.b.__get__(strangers[0])
