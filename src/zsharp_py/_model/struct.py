"""Native structs declared from Python (``class Vector(zs.Struct)``).

A struct is a value type laid out like a C struct; its conjugate is black
(``Vector(1.0, 2.0, 3.0)``, ``clone()``) or a red view into an object, a
container element or another value (``actor.position``). Reads and writes of
a view go straight to native memory (C descriptors, native/binding/members.c);
assigning a struct copies it, as a C++ value type would. A struct of plain
data (scalars, names, plain wrappers, such structs) is *bitwise*: a black one
keeps its bytes inside its conjugate, with nothing native to free.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from typing_extensions import dataclass_transform

from .. import _core
from .._base.layout import Layout, member_name
from .kinds import PropertyKind, ScalarKind
from .object import (
    _RESERVED_STRUCT,
    Described,
    PropertyInfo,
    _annotations_of,
    check_annotations,
    declaring_scope,
    described_properties,
    pack_default,
    previous_declaration,
    redeclared,
    resolve_kind,
    take_defaults,
)
from .state import StateField
from .values import ValueConjugate

__all__ = ["Struct", "StructMeta", "StructKind", "StructLayout", "struct_layout"]


@dataclass
class StructLayout:
    """The native shape of a Python-declared struct."""

    cls: type[Struct]
    c_struct: Layout  # the member type of the struct in other layouts
    size: int
    align: int
    properties: list[PropertyInfo]
    kind: _core.Kind
    bitwise: bool


# For type checkers, a zs.Struct subclass is a dataclass whose fields are its
# annotated members, given by position in declaration order or by keyword
# (``Vec(1.0, y=2.0)``), as the class call takes them. eq_default=False: a
# struct's own __eq__ also compares with a dict or a tuple.
@dataclass_transform(eq_default=False)
class StructMeta(type):
    """Metaclass of ``zs.Struct``: records the annotated members. For type
    checkers it is a ``dataclass_transform``: the class call takes the
    members, by position or keyword, with their types."""

    def __new__(
        mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any
    ) -> StructMeta:

        for key, value in namespace.items():
            if isinstance(value, StateField):
                raise TypeError(
                    f"{name}.{key}: a struct holds native members only; zs.state() "
                    "declares Python state of a native class (a zs.Object subclass)"
                )
        namespace.setdefault("__slots__", ())
        # A reload of its module: the struct declared before is updated in
        # place (zsharp_py/_interop/reload.py), as an object class is.
        previous = previous_declaration(StructMeta, name, namespace)
        cell = namespace.get("__classcell__")
        annotations = namespace.get("__annotations__", {})
        namespace["_zs_defaults"] = take_defaults(namespace, annotations)
        namespace["_zs_scope"] = declaring_scope(1)
        cls = super().__new__(mcls, name, bases, namespace, **kwargs)
        if previous is not None:  # only read, even when a check below refuses it
            type.__setattr__(cls, "_zs_staged", True)
        if any(isinstance(base, StructMeta) for base in bases):  # not zs.Struct itself
            check_annotations(cls)
        if previous is not None:
            return typing.cast("StructMeta", redeclared(previous, cls, cell, namespace))
        return cls


class Struct(ValueConjugate, metaclass=StructMeta):
    """Base of native structs declared from Python.

    Created positionally in declaration order or by keyword; members not
    given keep their declared defaults (zero when none).

    >>> import zsharp_py as zs
    >>> class Vector(zs.Struct):
    ...     x: zs.Float64
    ...     y: zs.Float64
    >>> class Ship(zs.Object):
    ...     position: Vector
    >>> with zs.Runtime():
    ...     ship = Ship()
    ...     ship.position = Vector(1.0, 2.0)     # copied into the object
    ...     p = ship.position                    # a red view into the ship
    ...     p.x = 5.0                            # writes the object's memory
    ...     c = p.clone()                        # a black copy
    ...     c.y = -1.0
    ...     (ship.position, c, p.is_black, c.is_black)
    (Vector(x=5.0, y=2.0), Vector(x=5.0, y=-1.0), False, True)
    """

    __slots__ = ()
    _zs_defaults: ClassVar[dict[str, Any]]

    @classmethod
    def _zs_prepare(cls) -> _core.Kind:
        """Lay the struct out (first use): its kind."""
        return struct_layout(cls).kind

    @classmethod
    def _zs_value_kind(cls, owner: type) -> StructKind:
        return StructKind(cls)

    # ---- value semantics -------------------------------------------------------
    if TYPE_CHECKING:

        def to_python(self) -> dict[str, Any]:
            """The members as a plain dict (nested values converted too)."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Struct):
            if type(other) is not type(self):
                return NotImplemented
            return bool(self.to_python() == other.to_python())
        if isinstance(other, dict):
            return bool(self.to_python() == other)
        if isinstance(other, tuple):
            return tuple(self.to_python().values()) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable value

    def __iter__(self) -> Any:
        return iter(self.to_python().values())

    def __repr__(self) -> str:
        if self.is_expired:
            return self._expired_repr()
        fields = ", ".join(f"{k}={v!r}" for k, v in self.to_python().items())
        return f"{type(self).__name__}({fields})"


def _is_bitwise(kind: PropertyKind) -> bool:
    """Whether values of ``kind`` are plain data (copied by memcpy, nothing
    to destroy, no references)."""
    if isinstance(kind, ScalarKind):
        return True
    if isinstance(kind, StructKind):
        return kind.layout.bitwise
    return bool(getattr(kind, "bitwise", False))


def _contains(kind: PropertyKind, cls: type, seen: set[Any]) -> bool:
    """Whether values of ``kind`` hold a ``cls`` struct, inline or through
    containers and other structs (their element types resolved as needed)."""
    if isinstance(kind, StructKind):
        if kind.cls is cls:
            return True
        if kind.cls in seen:
            return False
        seen.add(kind.cls)

        return any(
            _contains(resolve_kind(kind.cls, name, annotation), cls, seen)
            for name, annotation in _annotations_of(kind.cls).items()
        )
    elements = getattr(kind, "elements", None)
    if elements is not None:
        return any(_contains(element, cls, seen) for element in elements)
    return False


def _declared_members(cls: type[Struct]) -> tuple[list[PropertyInfo], Layout]:
    """The members a Python struct declares, laid out: (members, C struct)."""
    properties: list[PropertyInfo] = []
    defaults = cls.__dict__.get("_zs_defaults", {})
    for attribute, annotation in _annotations_of(cls).items():
        if attribute.startswith("_") or attribute in _RESERVED_STRUCT:
            raise TypeError(f"{cls.__name__}.{attribute}: this member name is reserved")
        kind = resolve_kind(cls, attribute, annotation)
        if _contains(kind, cls, set()):
            raise TypeError(
                f"{cls.__name__}.{attribute}: a struct cannot contain itself, even through a "
                "container (native copies, collections and destruction of values would "
                "recurse as deep as the data); hold the nested ones as objects instead "
                f'(a zs.Object class, referenced as zs.Array["Node"])'
            )
        info = PropertyInfo(attribute, member_name(len(properties), attribute), kind)
        if attribute in defaults:
            info.has_default, info.default = True, defaults[attribute]
            kind.check(f"{cls.__name__}.{attribute} (default)", info.default)
        properties.append(info)
    c_struct = Layout(cls.__name__, [(p.cname, p.kind.member_type) for p in properties])
    for info in properties:
        info.offset = c_struct.offsets[info.cname]
    return properties, c_struct


def struct_layout(cls: type[Struct]) -> StructLayout:
    """The layout of ``cls``, computed (its kind made and descriptors
    installed) on first use."""

    layout: StructLayout | None = cls.__dict__.get("_zs_layout")
    if layout is not None:
        return layout
    if cls is Struct:
        raise TypeError("zs.Struct itself cannot be instantiated; declare a subclass")
    parents = [b for b in cls.__bases__ if isinstance(b, StructMeta) and b is not Struct]
    if parents:
        raise TypeError(f"{cls.__name__}: structs cannot inherit from other structs")
    described: Described | None = cls.__dict__.get("_zs_description")
    if described is not None:  # a host's struct: its description says where each member is
        properties = described_properties(cls, described, 0)
        size, align = described.size, cls.__dict__["_zs_align"]
        c_struct = Layout.opaque(cls.__name__, size, align)
    else:
        properties, c_struct = _declared_members(cls)
        size, align = c_struct.size, c_struct.align
    bitwise = all(_is_bitwise(info.kind) for info in properties)
    image = bytearray(size)
    plain = True
    for info in properties:
        if info.has_default:
            plain = pack_default(info.kind, image, info.offset, info.default) and plain
        else:
            plain = info.kind.pack_initial(image, info.offset) and plain
    # The kind first, without members: a member may hold an array of this
    # very struct, whose element kind is this one (the native registration
    # then refuses the recursion with a TypeError).
    struct_kind = _core.Kind(
        _core.KIND_STRUCT,
        size,
        align,
        _core.TYPE_STRUCT,
        cls.__name__,
        flags=_core.KIND_VIEW | (_core.KIND_BITWISE if bitwise else 0),
        cls=cls,
        struct_name=cls.__name__.encode("utf-8"),
        image=bytes(image) if any(image) else None,
    )
    type.__setattr__(cls, "_zs_kind", struct_kind)
    layout = StructLayout(cls, c_struct, size, align, properties, struct_kind, bitwise)
    type.__setattr__(cls, "_zs_layout", layout)
    try:
        struct_kind.set_members([(info.name, info.offset, info.kind.kind) for info in properties])
        for info in properties:
            info.kind.install(cls, info.name, info.cname, info.offset)
    except BaseException:
        type.__delattr__(cls, "_zs_layout")
        type.__delattr__(cls, "_zs_kind")
        raise
    if not plain:
        _install_defaults(cls, properties)
    return layout


def _install_defaults(cls: type[Struct], properties: list[PropertyInfo]) -> None:
    """A struct whose defaults are not all plain data (a string, a name...):
    its constructor applies them after the C one (members given win)."""

    base_new = _core.ValueConjugate.__new__
    later = [
        info
        for info in properties
        if (info.has_default and not isinstance(info.kind, ScalarKind))
        or (not info.has_default and isinstance(info.kind, StructKind))
    ]
    names = [info.name for info in properties]

    def __new__(cls: type[Struct], *args: Any, **kwargs: Any) -> Any:
        value = base_new(cls, *args, **kwargs)
        given = set(names[: len(args)]) | set(kwargs)
        try:
            for info in later:
                if info.name in given:
                    continue
                if info.has_default:
                    setattr(value, info.name, info.default)
                else:
                    info.kind.initialize_defaults(value, info.name)
        except BaseException:
            value.dispose()
            raise
        return value

    type.__setattr__(cls, "__new__", __new__)


class StructKind(PropertyKind):
    """A struct member, element or black value of a ``zs.Struct`` class."""

    __slots__ = ("cls",)

    def __init__(self, cls: type[Struct]) -> None:
        self.cls = cls

    @property
    def layout(self) -> StructLayout:
        """The struct's layout (computed on first use)."""
        return struct_layout(self.cls)

    @property
    def kind(self) -> _core.Kind:
        """The struct's kind (also while its layout is being made)."""
        made: _core.Kind | None = self.cls.__dict__.get("_zs_kind")
        return made if made is not None else self.layout.kind

    @property
    def member_type(self) -> Layout:
        """The struct's layout, embedded by value."""
        return self.layout.c_struct

    @property
    def key(self) -> Any:
        """``("struct", cls)``."""
        return ("struct", self.cls)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StructKind) and other.cls is self.cls

    def __hash__(self) -> int:
        return hash(self.key)

    def describe(self) -> str:
        """The struct's name."""
        return self.cls.__name__

    def pack_initial(self, buffer: bytearray, offset: int) -> bool:
        """The members' defaults, and theirs below them, into the image."""
        plain = True
        for info in self.layout.properties:
            if info.has_default:
                plain = (
                    pack_default(info.kind, buffer, offset + info.offset, info.default) and plain
                )
            else:
                plain = info.kind.pack_initial(buffer, offset + info.offset) and plain
        return plain

    def initialize_defaults(self, holder: Any, name: str) -> None:
        """The members' defaults that are not plain data, after creation."""
        value = getattr(holder, name)
        for member in self.layout.properties:
            if member.has_default and not isinstance(member.kind, ScalarKind):
                setattr(value, member.name, member.default)
            elif not member.has_default:
                member.kind.initialize_defaults(value, member.name)

    def check(self, what: str, value: Any) -> None:
        """A struct of this class, a tuple or a dict of its members."""
        if isinstance(value, self.cls):
            if value.is_expired:
                value.to_python()  # raises ExpiredConjugateError with the reason
            return
        layout = self.layout
        if isinstance(value, (tuple, list)):
            items = dict(zip((p.name for p in layout.properties), value, strict=False))
            if len(value) > len(layout.properties):
                raise TypeError(f"{what}: too many values for {self.cls.__name__}")
        elif isinstance(value, dict):
            items = value
            unknown = set(items) - {p.name for p in layout.properties}
            if unknown:
                raise TypeError(f"{what}: {self.cls.__name__} has no member {sorted(unknown)[0]!r}")
        else:
            raise TypeError(
                f"{what} expects {self.cls.__name__}, a tuple or a dict, not {type(value).__name__}"
            )
        for info in layout.properties:
            if info.name in items:
                info.kind.check(f"{what}.{info.name}", items[info.name])

    def has_plain_defaults(self) -> bool:
        """Whether a zeroed struct is initialised (no member defaults)."""
        return not any(info.has_default for info in self.layout.properties)
