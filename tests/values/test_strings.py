"""String conjugates: zs.String (UTF-16), zs.Utf8String, zs.AnsiString
(ASCII only), zs.Text (immutable) and zs.Name (interned, case-insensitive,
number suffix): creation, conversion, protocols, red views writing
through, clones, and errors."""

from __future__ import annotations

import copy

import pytest

import zsharp_py as zs
from helpers import collect

pytestmark = pytest.mark.usefixtures("no_leaked_values")


MUTABLE_KINDS = [zs.String, zs.Utf8String, zs.AnsiString]
ALL_KINDS = MUTABLE_KINDS + [zs.Text]
UNICODE_SAMPLES = ["héllo", "日本語", "a😀b", "Ωmega\u0301", "tab\tnew\nline"]


class Sign(zs.Object):
    wide: zs.String
    utf8: zs.Utf8String
    ansi: zs.AnsiString
    text: zs.Text
    tag: zs.Name
    short: str  # shorthand for zs.String


class Labelled(zs.Struct):
    label: zs.String
    tag: zs.Name


def _prop(kind: type) -> str:
    return {zs.String: "wide", zs.Utf8String: "utf8", zs.AnsiString: "ansi", zs.Text: "text"}[kind]


# ---- creation and conversion -------------------------------------------------


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_creation_from_str_is_black(rt: zs.Runtime, kind: type) -> None:
    s = kind("hello")
    assert type(s) is kind
    assert s.is_black is True and s.is_expired is False
    assert str(s) == "hello"
    assert s == "hello" and "hello" == s  # noqa: SIM300 (the reflected __eq__, on purpose)
    assert s != "Hello"
    assert len(s) == 5


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_default_is_empty(rt: zs.Runtime, kind: type) -> None:
    s = kind()
    assert str(s) == "" and len(s) == 0 and s == ""


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_creation_from_another_string_conjugate(rt: zs.Runtime, kind: type) -> None:
    source = zs.Utf8String("copy me")
    s = kind(source)
    assert s == "copy me"
    source.assign("changed")
    assert s == "copy me"


@pytest.mark.parametrize("kind", ALL_KINDS)
@pytest.mark.parametrize("bad", [b"bytes", 5, None, ["a"]])
def test_non_str_raises_type_error_and_allocates_nothing(
    rt: zs.Runtime, kind: type, bad: object
) -> None:
    before = rt.values_alive()
    with pytest.raises(TypeError):
        kind(bad)
    assert rt.values_alive() == before


@pytest.mark.parametrize("kind", [zs.String, zs.Utf8String, zs.Text])
@pytest.mark.parametrize("text", UNICODE_SAMPLES)
def test_unicode_round_trips(rt: zs.Runtime, kind: type, text: str) -> None:
    s = kind(text)
    assert str(s) == text
    assert len(s) == len(text)


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_embedded_nul_and_long_strings_round_trip(rt: zs.Runtime, kind: type) -> None:
    assert str(kind("a\x00b")) == "a\x00b"
    long = "xyz" * 50_000
    assert str(kind(long)) == long


def test_ansi_string_refuses_non_ascii(rt: zs.Runtime) -> None:
    before = rt.values_alive()
    with pytest.raises(ValueError, match="AnsiString"):
        zs.AnsiString("héllo")
    assert rt.values_alive() == before
    s = zs.AnsiString("plain")
    with pytest.raises(ValueError):
        s.assign("naïve")
    assert s == "plain"
    assert zs.AnsiString("\x7f~ ok") == "\x7f~ ok"


def test_ansi_property_refuses_non_ascii_and_keeps_its_value(rt: zs.Runtime) -> None:
    sign = Sign(ansi="ascii")
    with pytest.raises(ValueError):
        sign.ansi = "日本"
    assert sign.ansi == "ascii"
    with pytest.raises(ValueError):
        Sign(ansi="é")
    with pytest.raises(ValueError):
        sign.ansi.assign("é")
    assert sign.ansi == "ascii"


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_string_protocols(rt: zs.Runtime, kind: type) -> None:
    s = kind("hello world")
    assert "world" in s and "xyz" not in s
    assert s + "!" == "hello world!"
    assert ">" + s == ">hello world"
    assert s == kind("hello world")
    assert repr(s) == f"{kind.__name__}('hello world')"
    assert f"{s}" == "hello world"


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_strings_are_unhashable(rt: zs.Runtime, kind: type) -> None:
    with pytest.raises(TypeError):
        hash(kind("x"))


def test_strings_of_different_kinds_compare_by_text(rt: zs.Runtime) -> None:
    assert zs.String("same") == zs.Utf8String("same") == zs.AnsiString("same") == zs.Text("same")
    assert zs.String("a") != zs.Utf8String("b")
    assert zs.String("1") != 1


# ---- assign, Text immutability --------------------------------------------------


@pytest.mark.parametrize("kind", MUTABLE_KINDS)
def test_assign_replaces_the_contents(rt: zs.Runtime, kind: type) -> None:
    s = kind("first")
    s.assign("second, longer than the first")
    assert s == "second, longer than the first"
    s.assign(zs.String("from a conjugate"))
    assert s == "from a conjugate"
    s.assign("")
    assert s == ""
    with pytest.raises(TypeError):
        s.assign(42)
    assert s == ""


def test_text_has_no_assign(rt: zs.Runtime) -> None:
    t = zs.Text("display")
    assert not hasattr(t, "assign")
    with pytest.raises(AttributeError):
        t.assign("changed")  # type: ignore[attr-defined]
    assert t == "display"


def test_text_property_is_replaced_by_assignment(rt: zs.Runtime) -> None:
    sign = Sign(text="before")
    view = sign.text
    assert type(view) is zs.Text and not view.is_black
    sign.text = "after"
    assert sign.text == "after"
    assert view == "after"  # the view is of the property: it sees the new text


# ---- red views ------------------------------------------------------------------


@pytest.mark.parametrize("kind", MUTABLE_KINDS)
def test_string_property_view_writes_through(rt: zs.Runtime, kind: type) -> None:
    sign = Sign()
    name = _prop(kind)
    assert getattr(sign, name) == ""
    view = getattr(sign, name)
    assert type(view) is kind and view.is_black is False
    assert getattr(sign, name) is view
    view.assign("written through the view")
    assert getattr(sign, name) == "written through the view"
    setattr(sign, name, "assigned to the property")
    assert view == "assigned to the property"


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_string_property_takes_str_and_any_string_conjugate(rt: zs.Runtime, kind: type) -> None:
    sign = Sign()
    name = _prop(kind)
    setattr(sign, name, zs.Utf8String("from utf8"))
    assert getattr(sign, name) == "from utf8"
    setattr(sign, name, zs.Text("from text"))
    assert getattr(sign, name) == "from text"
    other = Sign(wide="from another object")
    setattr(sign, name, other.wide)
    assert getattr(sign, name) == "from another object"
    with pytest.raises(TypeError):
        setattr(sign, name, 3)
    assert getattr(sign, name) == "from another object"


def test_python_str_annotation_is_a_wide_string(rt: zs.Runtime) -> None:
    sign = Sign(short="shorthand")
    assert type(sign.short) is zs.String
    assert sign.short == "shorthand"


def test_string_property_self_assignment(rt: zs.Runtime) -> None:
    sign = Sign(wide="self")
    sign.wide = sign.wide
    assert sign.wide == "self"
    sign.wide.assign(sign.wide)
    assert sign.wide == "self"


@pytest.mark.parametrize("kind", MUTABLE_KINDS)
def test_clone_of_a_string_view_is_black_and_independent(rt: zs.Runtime, kind: type) -> None:
    sign = Sign()
    name = _prop(kind)
    setattr(sign, name, "original")
    view = getattr(sign, name)
    c = view.clone()
    assert type(c) is kind and c.is_black
    c.assign("clone changed")
    assert getattr(sign, name) == "original"
    view.assign("original changed")
    assert c == "clone changed"
    for other in (copy.copy(view), copy.deepcopy(view)):
        assert other.is_black and other == "original changed"


def test_clone_of_a_black_string_is_independent(rt: zs.Runtime) -> None:
    s = zs.String("a")
    c = s.clone()
    c.assign("b")
    assert s == "a"
    s.assign("c")
    assert c == "b"
    t = zs.Text("text")
    assert t.clone() == "text" and t.clone().is_black


def test_string_view_inside_a_struct_member(rt: zs.Runtime) -> None:
    class Board(zs.Object):
        info: Labelled

    board = Board()
    board.info.label = "on the struct"
    assert board.info.label == "on the struct"
    board.info.label.assign("through the view")
    assert board.info.to_python()["label"] == "through the view"


def test_string_view_expires_with_its_object(rt: zs.Runtime) -> None:
    sign = Sign(wide="bye")
    view = sign.wide
    collect(rt)
    assert sign.is_expired and view.is_expired
    with pytest.raises(zs.ExpiredConjugateError, match="expired"):
        str(view)
    with pytest.raises(zs.ExpiredConjugateError):
        view.assign("x")
    with pytest.raises(zs.ExpiredConjugateError):
        view == "bye"  # noqa: B015 (the comparison must raise)
    with pytest.raises(zs.ExpiredConjugateError):
        view.clone()
    assert "expired" in repr(view)


def test_disposed_black_string_raises(rt: zs.Runtime) -> None:
    s = zs.Utf8String("gone")
    s.dispose()
    assert s.is_expired
    with pytest.raises(zs.ExpiredConjugateError, match="disposed"):
        len(s)
    s.dispose()
    assert "disposed" in repr(s)


# Specialised at import: the first specialisation snapshots its caller's
# locals (see test_value_lifetimes.py::test_first_specialisation_...).
SPECIALISED = [zs.Map[zs.Name, zs.Int32], zs.Set[zs.Name]]


# ---- Name ------------------------------------------------------------------------


def test_name_compares_and_hashes_case_insensitively(rt: zs.Runtime) -> None:
    a, b = zs.Name("Player"), zs.Name("PLAYER")
    assert a == b
    assert hash(a) == hash(b)
    assert a == "player" and "pLaYeR" == a  # noqa: SIM300 (the reflected __eq__, on purpose)
    assert a != zs.Name("Players")
    assert a != 5
    assert len({a, b, zs.Name("player")}) == 1
    assert {a: 1}[zs.Name("PlAyEr")] == 1


def test_name_keeps_the_first_spelling(rt: zs.Runtime) -> None:
    first = zs.Name("MixedCase")
    later = zs.Name("MIXEDCASE")
    assert str(first) == "MixedCase"
    assert str(later) == "MixedCase"
    assert repr(later) == "Name('MixedCase')"


@pytest.mark.parametrize(
    "text, base, number",
    [
        ("Actor_3", "Actor", 4),
        ("Actor_0", "Actor", 1),
        ("Actor", "Actor", 0),
        ("Actor_", "Actor_", 0),
        ("Actor_03", "Actor_03", 0),
        ("_3", "_3", 0),
        ("Actor3", "Actor3", 0),
        ("A_B_12", "A_B", 13),
    ],
)
def test_name_number_suffix(rt: zs.Runtime, text: str, base: str, number: int) -> None:
    name = zs.Name(text)
    assert name.number == number
    assert str(name) == text
    assert name == zs.Name(text.upper())


def test_names_with_different_numbers_differ(rt: zs.Runtime) -> None:
    assert zs.Name("Actor_3") != zs.Name("Actor_4")
    assert zs.Name("Actor_3") != zs.Name("Actor")
    assert zs.Name("Actor_3") != "Actor"
    assert zs.Name("actor_3") == zs.Name("ACTOR_3")


def test_name_is_an_immutable_value_without_lifetime(rt: zs.Runtime) -> None:
    name = zs.Name("Forever")
    assert name.is_black is True and name.is_expired is False
    assert name.clone() == name
    name.dispose()
    assert str(name) == "Forever" and not name.is_expired
    assert zs.Name(name) == name


@pytest.mark.parametrize(
    "bad, error",
    [
        (5, TypeError),
        (b"x", TypeError),
        (None, TypeError),
        ("nul\x00inside", ValueError),
        ("x" * 2000, ValueError),
    ],
)
def test_bad_names_are_refused(rt: zs.Runtime, bad: object, error: type) -> None:
    with pytest.raises(error):
        zs.Name(bad)  # type: ignore[arg-type]


def test_name_property_on_objects_and_structs(rt: zs.Runtime) -> None:
    sign = Sign(tag="Door_7")
    assert type(sign.tag) is zs.Name
    assert sign.tag == "door_7" and sign.tag.number == 8
    sign.tag = zs.Name("Window")
    assert sign.tag == "WINDOW"
    with pytest.raises(TypeError):
        sign.tag = 3
    assert sign.tag == "window"
    label = Labelled(tag="Key")
    assert label.tag == "key"
    assert label.to_python()["tag"] == "KEY"


def test_name_from_another_runtime_compares_by_text(rt: zs.Runtime) -> None:
    here = zs.Name("Shared_2")
    with zs.Runtime():
        zs.Name("padding")  # different table indices in the other runtime
        there = zs.Name("SHARED_2")
        sign = Sign(tag=here)
        assert sign.tag == "shared_2"
    assert here == there
    assert hash(here) == hash(there)


def test_non_ascii_name_equality_is_consistent(rt: zs.Runtime) -> None:
    # Name == Name and Name == str must agree (and hash must follow ==).
    upper, lower = zs.Name("Ärger"), zs.Name("ärger")
    assert (upper == lower) == (upper == "ärger")


def test_names_as_container_keys_and_elements(rt: zs.Runtime) -> None:
    counts = zs.Map[zs.Name, zs.Int32]({"Actor_1": 1, "Actor_2": 2, "Actor": 0})
    assert len(counts) == 3
    assert counts["ACTOR_1"] == 1 and counts["actor_2"] == 2 and counts["aCtOr"] == 0
    assert "Actor_3" not in counts
    keys = counts.keys()
    assert all(type(k) is zs.Name for k in keys)
    assert sorted(k.number for k in keys) == [0, 2, 3]
    tags = zs.Set[zs.Name](["Tag_0", "TAG_0", "tag"])
    assert len(tags) == 2
