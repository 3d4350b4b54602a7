"""Value property writes staged with no Python code (zsv_stage_quick in
native/binding/kind.c): exact scalars into optionals, exact strs into
string kinds, a live value of the same bitwise struct kind. They must
store exactly what the general staging stores, expire the same views, and
leave every other value (and every error) to the general staging."""

from __future__ import annotations

import pytest

import zsharp_py as zs
from helpers import STRUCTURE, collect


class QVec(zs.Struct):
    x: zs.Float64
    y: zs.Float64


class QPair(zs.Struct):
    a: QVec
    b: QVec


class QMob(zs.Object):
    wide: zs.String
    utf8: zs.Utf8String
    ansi: zs.AnsiString
    maybe: zs.Optional[zs.Float64]
    count: zs.Optional[zs.Int32]
    spot: QVec
    pair: QPair


TEXTS = ["", "abc", "x" * 128, "x" * 129, "é à", "€ and ✓", "😀 wide", "x" * 200 + "é"]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_strings_store_what_they_are_given(rt: zs.Runtime, text: str) -> None:
    mob = QMob()
    mob.wide = text
    mob.utf8 = text
    assert str(mob.wide) == text and str(mob.utf8) == text
    if text.isascii():
        mob.ansi = text
        assert str(mob.ansi) == text


def test_strings_the_kind_cannot_hold_raise_as_before(rt: zs.Runtime) -> None:
    mob = QMob()
    mob.wide = mob.ansi = mob.utf8 = "kept"
    with pytest.raises(ValueError, match=r"QMob.ansi: AnsiString cannot hold 'é'"):
        mob.ansi = "é"
    with pytest.raises(ValueError, match="surrogates not allowed"):
        mob.wide = "\ud800"
    with pytest.raises(ValueError, match="surrogates not allowed"):
        mob.utf8 = "a\udfff"
    with pytest.raises(TypeError, match="QMob.wide: String needs a str, not bytes"):
        mob.wide = b"abc"  # type: ignore[assignment]
    assert str(mob.wide) == str(mob.ansi) == str(mob.utf8) == "kept"


def test_a_str_subclass_is_stored_by_its_own_text(rt: zs.Runtime) -> None:
    class Sneaky(str):
        def __str__(self) -> str:
            return "lie"

        def encode(self, *args: object, **kwargs: object) -> bytes:
            return b"lie"

    mob = QMob()
    mob.wide = Sneaky("truth")
    mob.utf8 = Sneaky("truth")
    assert str(mob.wide) == str(mob.utf8) == "truth"


def test_optionals_store_and_reset(rt: zs.Runtime) -> None:
    mob = QMob()
    mob.maybe = 1.5
    mob.count = 7
    assert mob.maybe.get() == 1.5 and mob.count.get() == 7
    mob.maybe = 2  # an int into Optional[Float64]: the general conversion
    mob.count = True  # a bool is an int
    assert mob.maybe.get() == 2.0 and mob.count.get() == 1
    mob.maybe = None
    mob.count = None
    assert not mob.maybe.is_set and not mob.count.is_set
    with pytest.raises(OverflowError):
        mob.count = 2**40
    with pytest.raises(TypeError):
        mob.maybe = "1.5"  # type: ignore[assignment]
    assert not mob.count.is_set and not mob.maybe.is_set


def test_a_struct_copied_from_a_value_expires_the_views_below(rt: zs.Runtime) -> None:
    mob = QMob()
    v = QVec(3.0, 4.0)
    mob.spot = v
    assert mob.spot == {"x": 3.0, "y": 4.0}
    mob.spot = mob.spot  # onto itself
    assert mob.spot.y == 4.0
    pair = QPair((1.0, 2.0), (3.0, 4.0))
    held = mob.pair.a
    mob.pair = pair
    assert held.is_expired and STRUCTURE in repr(held)
    assert mob.pair.b.y == 4.0 and mob.pair.a.x == 1.0
    pair.dispose()
    with pytest.raises(zs.ExpiredConjugateError):
        mob.pair = pair
    assert mob.pair.a.x == 1.0
    v.dispose()


def test_a_struct_of_another_runtime_is_staged_through_python(rt: zs.Runtime) -> None:
    mob = QMob()
    with zs.Runtime() as other:
        v = QVec(5.0, 6.0)
        assert v._rt is other
        mob.spot = v
        v.dispose()
    assert mob.spot.x == 5.0


def test_a_write_to_an_expired_holder_raises(rt: zs.Runtime) -> None:
    mob = QMob()
    collect(rt)
    for name, value in (("wide", "a"), ("maybe", 1.5), ("spot", (1.0, 2.0))):
        with pytest.raises(zs.ExpiredConjugateError):
            setattr(mob, name, value)


class QMixed(zs.Struct):
    f: zs.Float32 = 0.5
    n: zs.Int16 = 3
    on: zs.Bool = True
    big: zs.UInt64 = 7


class QNamed(zs.Struct):
    x: zs.Float64
    name: zs.Name


def test_a_struct_of_scalars_made_from_exact_numbers(rt: zs.Runtime) -> None:
    assert QVec(1.0, 2.0) == {"x": 1.0, "y": 2.0}
    assert QVec(1, 2) == {"x": 1.0, "y": 2.0}  # ints: the general conversion
    assert QVec(1.0) == {"x": 1.0, "y": 0.0} and QVec() == {"x": 0.0, "y": 0.0}
    assert QMixed() == {"f": 0.5, "n": 3, "on": True, "big": 7}
    assert QMixed(1.5) == {"f": 1.5, "n": 3, "on": True, "big": 7}  # defaults kept
    assert QMixed(1.5, -2, False, 2**64 - 1) == {"f": 1.5, "n": -2, "on": False, "big": 2**64 - 1}
    assert QMixed(n=4) == {"f": 0.5, "n": 4, "on": True, "big": 7}
    assert QNamed(1.0, "who").name == "who"  # not all scalars: the general path
    v = QVec(1.0, 2.0)
    assert v.is_black and not v.is_expired
    v.dispose()
    assert v.is_expired


def test_a_struct_of_scalars_refuses_as_before(rt: zs.Runtime) -> None:
    with pytest.raises(OverflowError, match="QMixed.f"):
        QMixed(1e300)
    with pytest.raises(OverflowError, match="QMixed.n"):
        QMixed(0.0, 2**15)
    with pytest.raises(
        TypeError, match=r"QVec\(\) takes at most 2 positional arguments \(3 given\)"
    ):
        QVec(1.0, 2.0, 3.0)
    with pytest.raises(TypeError):
        QVec("1.0", 2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got multiple values for"):
        QVec(1.0, x=2.0)
