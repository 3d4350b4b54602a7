"""What the typing of declared classes changes at run time: ``zs.zero()`` as
a declared default (no default at all), defaults equal to the zeroed value
left out of creation, the class call's keywords as before, and the
``dataclass_transform`` markers type checkers read
(zsharp_py/_model/object.py, zsharp_py/_model/struct.py;
tests/tooling/test_type_checkers.py runs the checkers)."""

from __future__ import annotations

import pytest

import zsharp_py as zs
from zsharp_py._model.object import ObjectMeta, class_layout
from zsharp_py._model.struct import StructMeta, struct_layout


class Part(zs.Struct):
    size: zs.Int32 = zs.zero()
    weight: zs.Float64 = 2.0


class Crate(zs.Object):
    count: zs.Int32 = zs.zero()
    label: zs.String = zs.zero()
    parts: zs.Array[Part] = []
    tags: zs.Set[zs.Name] = set()
    scores: zs.Map[zs.Name, zs.Int32] = {}
    spare: zs.Optional[Part] = None
    other: Crate | None = None
    kind: zs.SubclassOf[Crate] = None
    weak: zs.WeakObjectPtr[Crate] = None
    on_open: zs.MulticastDelegate = None
    title: zs.String = ""
    filled: zs.String = "full"


def test_zero_and_zeroed_defaults_apply_nothing_at_creation(rt: zs.Runtime) -> None:
    layout = class_layout(Crate)
    assert [p.name for p in layout.properties if p.has_default] == [
        "parts", "tags", "scores", "spare", "other", "kind", "weak", "on_open", "title", "filled"
    ]  # fmt: skip
    # Only the one default that is not the zeroed value runs after creation.
    assert [p.name for p in layout.defaults] == ["filled"] and layout.image == b""
    crate = Crate()
    assert (crate.count, str(crate.label), len(crate.parts), len(crate.tags)) == (0, "", 0, 0)
    assert (crate.spare.get(), crate.other, crate.kind, crate.weak.get()) == (None,) * 4
    assert (str(crate.title), str(crate.filled), len(crate.on_open)) == ("", "full", 0)
    assert "_zs_defaults" in Crate.__dict__ and "count" not in Crate._zs_defaults
    assert [(p.name, p.has_default) for p in struct_layout(Part).properties] == [
        ("size", False),
        ("weight", True),
    ]
    assert (Part().size, Part().weight, Part(3).size) == (0, 2.0, 3)


def test_the_class_call_takes_the_same_keywords(rt: zs.Runtime) -> None:
    crate = Crate(count=3, label="box", parts=[Part(1)], name="c", other=Crate())
    assert (crate.count, str(crate.label), crate.parts[0].size, crate.name) == (3, "box", 1, "c")
    with pytest.raises(TypeError, match="unknown property: cuont"):
        Crate(cuont=1)
    with pytest.raises(TypeError, match="takes no arguments"):
        zs.Object.__init__(crate, name="again")
    with pytest.raises(TypeError, match="expected a real number"):
        Part(1, zs.zero())


def test_checkers_see_dataclass_transforms() -> None:
    """The markers ``typing_extensions.dataclass_transform`` leaves for type
    checkers: keyword-only properties of objects (with name= and outer= by
    the library's field specifier), positional members of structs, and no
    synthesized __eq__ for either (identity for objects, the struct's own)."""
    objects = ObjectMeta.__dataclass_transform__  # type: ignore[attr-defined]
    structs = StructMeta.__dataclass_transform__  # type: ignore[attr-defined]
    assert objects["kw_only_default"] is True and objects["eq_default"] is False
    assert [f.__name__ for f in objects["field_specifiers"]] == ["library_keyword"]
    assert structs["kw_only_default"] is False and structs["eq_default"] is False
    with pytest.raises(TypeError, match="only describes"):
        objects["field_specifiers"][0](default=None, alias="name")
    assert repr(zs.zero()) == "zs.zero()" and zs.zero() is zs.zero()
