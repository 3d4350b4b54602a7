"""zs.FieldPath: parsing, resolution against a class, reads and writes
through objects and structs, clear errors for missing fields, and use as a
property and element type."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

import zsharp_py as zs
from helpers import collect
from zsharp_py.debug import FieldInfo

pytestmark = pytest.mark.usefixtures("no_leaked_values")


class FpVector(zs.Struct):
    x: zs.Float64
    y: zs.Float64


class FpTransform(zs.Struct):
    position: FpVector
    scale: zs.Float32 = 1.0


class FpShip(zs.Object):
    health: zs.Int32 = 100
    transform: FpTransform
    escort: "FpShip | None"
    label: zs.String
    path: zs.FieldPath
    paths: zs.Array[zs.FieldPath]


class FpCarrier(FpShip):
    planes: zs.Int32


# ---- parsing and value behaviour ---------------------------------------------------------


def test_parse_and_value_behaviour(rt: zs.Runtime) -> None:
    path = zs.FieldPath("FpShip.transform.position.x")
    assert str(path) == "FpShip.transform.position.x"
    assert path.owner_name == "FpShip" and path.fields == ("transform", "position", "x")
    built = zs.FieldPath(FpShip, "transform.position.x")
    assert built == path and hash(built) == hash(path) and built == "FpShip.transform.position.x"
    assert built.full_path == f"{__name__}.FpShip:transform.position.x"
    assert zs.FieldPath(built.full_path) == built
    assert zs.FieldPath(path) == path
    assert path.is_black and not path.is_expired and path.clone() is path
    assert copy.copy(path) is path and copy.deepcopy(path) is path
    path.dispose()
    assert pickle.loads(pickle.dumps(built)) == built
    assert repr(path) == "FieldPath('FpShip.transform.position.x')"
    with pytest.raises(AttributeError, match="immutable"):
        path._fields = ()
    assert {path, built} == {path}
    empty = zs.FieldPath()
    assert not empty and str(empty) == "" and empty.full_path == ""


@pytest.mark.parametrize(
    "bad", ["FpShip", "FpShip.", "FpShip..x", ".x", "FpShip.1x", "FpShip.a-b", "mod.FpShip:"]
)
def test_malformed_paths_raise_value_error(rt: zs.Runtime, bad: str) -> None:
    with pytest.raises(ValueError, match="malformed"):
        zs.FieldPath(bad)


def test_constructor_type_errors(rt: zs.Runtime) -> None:
    with pytest.raises(TypeError, match="needs a str"):
        zs.FieldPath(3)
    with pytest.raises(TypeError, match="not a zs.Object or zs.Struct"):
        zs.FieldPath(int, "real")
    with pytest.raises(TypeError, match="fields as a str"):
        zs.FieldPath(FpShip)
    with pytest.raises(TypeError, match="one argument"):
        zs.FieldPath("FpShip.health", "x")


# ---- resolution -----------------------------------------------------------------------------


def test_resolve_describes_the_field(rt: zs.Runtime) -> None:
    info = zs.FieldPath("FpShip.transform.position.x").resolve()
    assert isinstance(info, FieldInfo)
    assert (info.owner, info.name, info.type_name) == (FpVector, "x", "Float64")
    assert info.steps == ((FpShip, "transform"), (FpTransform, "position"), (FpVector, "x"))
    through_ref = zs.FieldPath("FpShip.escort.health").resolve()
    assert (through_ref.owner, through_ref.type_name) == (FpShip, "Int32")
    struct_root = zs.FieldPath("FpTransform.scale").resolve()
    assert (struct_root.owner, struct_root.type_name) == (FpTransform, "Float32")


def test_resolve_against_a_subclass_and_an_unrelated_class(rt: zs.Runtime) -> None:
    path = zs.FieldPath("FpShip.health")
    assert path.resolve(FpCarrier).owner is FpCarrier
    assert path.is_valid_for(FpCarrier) and not path.is_valid_for(FpVector)
    with pytest.raises(zs.FieldPathError, match="starts from FpShip, which FpVector is not"):
        path.resolve(FpVector)
    assert zs.FieldPath("FpCarrier.planes").resolve().owner is FpCarrier
    with pytest.raises(zs.FieldPathError, match="FpShip has no property 'planes'"):
        zs.FieldPath("FpShip.planes").resolve()


def test_missing_fields_are_reported_clearly(rt: zs.Runtime) -> None:
    with pytest.raises(zs.FieldPathError) as info:
        zs.FieldPath("FpShip.transform.position.w").resolve()
    message = str(info.value)
    assert "'FpShip.transform.position.w'" in message
    assert "FpVector has no property 'w'" in message and "x, y" in message
    assert isinstance(info.value, AttributeError)
    with pytest.raises(
        zs.FieldPathError, match="FpShip.health is Int32, which has no property 'bits'"
    ):
        zs.FieldPath("FpShip.health.bits").resolve()
    with pytest.raises(
        zs.FieldPathError, match="no zs.Object or zs.Struct class is named 'NoSuchClass'"
    ):
        zs.FieldPath("NoSuchClass.x").resolve()
    with pytest.raises(zs.FieldPathError, match="empty"):
        zs.FieldPath().resolve()


def test_ambiguous_class_names(rt: zs.Runtime) -> None:
    def declare() -> type:
        class FpTwin(zs.Object):
            value: zs.Int32

        return FpTwin

    first, second = declare(), declare()
    path = zs.FieldPath("FpTwin.value")
    with pytest.raises(zs.FieldPathError, match="several classes are named 'FpTwin'"):
        path.resolve()
    assert path.resolve(second).owner is second  # against a class: no ambiguity
    obj = first(value=4)  # only `first` is registered in this runtime now
    assert zs.FieldPath("FpTwin.value").get(obj) == 4
    assert zs.FieldPath("FpTwin.value").resolve().owner is first
    assert zs.FieldPath(second, "value").resolve().owner is second


# ---- reading and writing --------------------------------------------------------------------


def test_get_and_set_through_objects_and_structs(rt: zs.Runtime) -> None:
    ship = FpShip()
    x = zs.FieldPath(FpShip, "transform.position.x")
    x.set(ship, 2.5)
    assert ship.transform.position.x == 2.5 and x.get(ship) == 2.5
    zs.FieldPath("FpShip.health").set(ship, 7)
    assert ship.health == 7
    position = zs.FieldPath("FpShip.transform.position").get(ship)
    assert position.is_black is False and position.x == 2.5  # a red view, like a read
    zs.FieldPath("FpShip.transform.position").set(ship, (1.0, 2.0))
    assert ship.transform.position.to_python() == {"x": 1.0, "y": 2.0}
    transform = FpTransform()
    zs.FieldPath("FpTransform.position.y").set(transform, 9.0)
    assert zs.FieldPath("FpTransform.position.y").get(transform) == 9.0
    zs.FieldPath("FpShip.label").set(ship, "hello")
    assert str(zs.FieldPath("FpShip.label").get(ship)) == "hello"
    with pytest.raises(TypeError, match="FpShip.health"):
        zs.FieldPath("FpShip.health").set(ship, "lots")
    with pytest.raises(TypeError, match="zs.Object or zs.Struct"):
        x.get(object())
    with pytest.raises(zs.FieldPathError, match="starts from FpShip"):
        x.get(transform)
    transform.dispose()


def test_walking_object_references(rt: zs.Runtime) -> None:
    ship, escort = FpShip(), FpShip(health=50)
    path = zs.FieldPath("FpShip.escort.health")
    with pytest.raises(zs.FieldPathError, match="FpShip.escort is None"):
        path.get(ship)
    ship.escort = escort
    assert path.get(ship) == 50
    path.set(ship, 40)
    assert escort.health == 40
    carrier = FpCarrier(escort=escort)
    assert path.get(carrier) == 40  # a subclass of the path's class


def test_expired_objects_raise(rt: zs.Runtime) -> None:
    ship = FpShip()
    collect(rt)
    with pytest.raises(zs.ExpiredConjugateError):
        zs.FieldPath("FpShip.health").get(ship)


# ---- as property and element ------------------------------------------------------------


def test_field_path_property_round_trip(rt: zs.Runtime) -> None:
    ship = FpShip()
    assert ship.path == zs.FieldPath() and not ship.path
    ship.path = zs.FieldPath(FpShip, "transform.scale")
    stored = ship.path
    assert stored == "FpShip.transform.scale"
    assert stored.full_path == f"{__name__}.FpShip:transform.scale"  # the full form is stored
    ship.transform.scale = 1.5
    assert stored.get(ship) == 1.5
    ship.path = "FpShip.health"
    assert ship.path.get(ship) == 100
    ship.path = None
    assert not ship.path
    with pytest.raises(ValueError, match="FpShip.path.*malformed"):
        ship.path = "FpShip"
    with pytest.raises(TypeError, match="FpShip.path"):
        ship.path = 3
    with pytest.raises(TypeError):
        FpShip(path=3)


def test_field_paths_as_elements(rt: zs.Runtime) -> None:
    ship = FpShip(paths=["FpShip.health", zs.FieldPath(FpShip, "transform.position.x")])
    assert [p.get(ship) for p in ship.paths] == [100, 0.0]
    assert ship.paths.to_python() == ["FpShip.health", "FpShip.transform.position.x"]
    unique = zs.Set[zs.FieldPath](["FpShip.health", "FpShip.health", "FpShip.label"])
    assert len(unique) == 2 and zs.FieldPath("FpShip.label") in unique
    by_path = zs.Map[zs.FieldPath, zs.Int32]({"FpShip.health": 1})
    assert by_path["FpShip.health"] == 1
    unique.dispose()
    by_path.dispose()


# ---- the direct plans of get and set (native/binding/fieldpaths.c) ------------------------


class _Collecting:
    """A number whose conversion runs `action` first."""

    def __init__(self, action: Any, value: float) -> None:
        self.action, self.value = action, value

    def __float__(self) -> float:
        self.action()
        return self.value


def test_direct_plans_follow_the_class_of_each_root(rt: zs.Runtime) -> None:
    """One path, roots of the path's class and of a subclass, objects and
    structs: each reads and writes its own scalar."""
    x = zs.FieldPath(FpShip, "transform.position.x")
    ship, carrier = FpShip(), FpCarrier()
    for round_ in range(3):
        x.set(ship, float(round_))
        x.set(carrier, float(round_ + 10))
        assert (x.get(ship), x.get(carrier)) == (float(round_), float(round_ + 10))
        assert ship.transform.position.x == float(round_)
    scale = zs.FieldPath("FpTransform.scale")
    transform = FpTransform()
    scale.set(transform, 4.0)
    assert scale.get(transform) == 4.0 and transform.scale == 4.0
    assert scale.get(ship.transform) == 1.0  # a red view of the same struct kind
    vector = FpVector()
    with pytest.raises(zs.FieldPathError, match="starts from FpTransform"):
        scale.get(vector)  # another struct: refused, never read at its offset
    vector.dispose()
    transform.dispose()


def test_a_property_replaced_on_the_class_is_honoured(rt: zs.Runtime) -> None:
    """The plan is made once, and remade when a class walked changes: a
    property replaced after first use is what get and set see."""

    class Probe(zs.Object):
        depth: zs.Float64

    path = zs.FieldPath(Probe, "depth")
    probe = Probe(depth=3.0)
    assert path.get(probe) == 3.0
    original = Probe.__dict__["depth"]
    Probe.depth = property(lambda self: -1.0, lambda self, value: None)  # type: ignore[assignment]
    try:
        assert path.get(probe) == -1.0
        path.set(probe, 8.0)
        assert original.__get__(probe, Probe) == 3.0  # the property's setter ignored it
    finally:
        type.__setattr__(Probe, "depth", original)
    assert path.get(probe) == 3.0


def test_set_whose_conversion_collects_the_root(rt: zs.Runtime) -> None:
    """__float__ runs before the scalar is found: a root it lets the GC
    destroy raises ExpiredConjugateError, and nothing is written."""
    ship = FpShip()
    ship.add_to_root()
    x = zs.FieldPath(FpShip, "transform.position.x")
    x.get(ship)  # the plan exists

    def unroot() -> None:
        ship.remove_from_root()
        collect(rt)

    with pytest.raises(zs.ExpiredConjugateError):
        x.set(ship, _Collecting(unroot, 5.0))
    rt.gc.verify()


def test_set_whose_conversion_disposes_a_struct_root(rt: zs.Runtime) -> None:
    transform = FpTransform()
    path = zs.FieldPath("FpTransform.position.y")
    with pytest.raises(zs.ExpiredConjugateError):
        path.set(transform, _Collecting(transform.dispose, 1.0))
    assert transform.is_expired


def test_set_whose_conversion_replaces_the_property(rt: zs.Runtime) -> None:
    """The class changes during the conversion: the write goes through
    what the class holds now (the value converted again by its setter)."""

    class Gauge(zs.Object):
        level: zs.Float64

    gauge = Gauge()
    path = zs.FieldPath(Gauge, "level")
    path.get(gauge)
    original = Gauge.__dict__["level"]
    written: list[float] = []

    def replace() -> None:
        Gauge.level = property(
            lambda self: 0.0,  # type: ignore[assignment]
            lambda self, value: written.append(float(value)),
        )

    try:
        path.set(gauge, _Collecting(replace, 6.0))
    finally:
        type.__setattr__(Gauge, "level", original)
    assert written == [6.0]  # the new property's setter took the value
    assert original.__get__(gauge, Gauge) == 0.0  # the native scalar was not written
