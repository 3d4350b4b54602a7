"""Property types: the scalar markers (``zs.Int32`` ...) and the property
kinds that turn a class annotation into a C member plus a descriptor."""

from __future__ import annotations

import enum
import math
import operator
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from .. import _core
from .._base.errors import named
from .._base.generics import key_mentions
from .._base.layout import MemberType, size_align

__all__ = [
    "forget_kinds",
    "Scalar",
    "Bool",
    "Int8",
    "Int16",
    "Int32",
    "Int64",
    "UInt8",
    "UInt16",
    "UInt32",
    "UInt64",
    "Float32",
    "Float64",
    "PropertyKind",
    "ScalarKind",
    "EnumKind",
    "install_property",
]

_FLOAT32_MAX = 3.4028234663852886e38


class Scalar:
    """Base of the scalar property types. ``zs.Int32(5)`` range-checks and
    returns a plain Python value; as an annotation it declares a property."""

    c_type: ClassVar[str] = ""
    py_type: ClassVar[type] = int
    minimum: ClassVar[int] = 0
    maximum: ClassVar[int] = 0

    def __new__(cls, value: Any = 0) -> Any:
        return cls.convert(value)

    @classmethod
    def convert(cls, value: Any) -> Any:
        """Check ``value`` against the type; return the Python value stored."""
        result = operator.index(value)
        if not cls.minimum <= result <= cls.maximum:
            raise OverflowError(
                f"{result} is out of range for {cls.__name__} [{cls.minimum}, {cls.maximum}]"
            )
        return result


def _integer(name: str, c_type: str, bits: int, signed: bool) -> type[Scalar]:
    low = -(1 << (bits - 1)) if signed else 0
    high = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    doc = f"{'Signed' if signed else 'Unsigned'} {bits}-bit integer property ({c_type})."
    return type(
        name,
        (Scalar,),
        {
            "c_type": c_type,
            "minimum": low,
            "maximum": high,
            "__doc__": doc,
            "__module__": "zsharp_py",
        },
    )


class _Bool(Scalar):
    """Boolean property (C ``_Bool``); accepts ``True``/``False`` (or 0/1)."""

    c_type = "_Bool"
    py_type = bool

    @classmethod
    def convert(cls, value: Any) -> Any:
        """Accept bool, or the integers 0 and 1."""
        if value is True or value is False:
            return value
        result = operator.index(value)
        if result not in (0, 1):
            raise OverflowError(f"{result} is out of range for Bool (use True or False)")
        return bool(result)


if TYPE_CHECKING:
    # For type checkers a property annotated ``zs.Int32`` holds an ``int``.
    Int8: TypeAlias = int
    Int16: TypeAlias = int
    Int32: TypeAlias = int
    Int64: TypeAlias = int
    UInt8: TypeAlias = int
    UInt16: TypeAlias = int
    UInt32: TypeAlias = int
    UInt64: TypeAlias = int
else:
    Int8 = _integer("Int8", "int8_t", 8, True)
    Int16 = _integer("Int16", "int16_t", 16, True)
    Int32 = _integer("Int32", "int32_t", 32, True)
    Int64 = _integer("Int64", "int64_t", 64, True)
    UInt8 = _integer("UInt8", "uint8_t", 8, False)
    UInt16 = _integer("UInt16", "uint16_t", 16, False)
    UInt32 = _integer("UInt32", "uint32_t", 32, False)
    UInt64 = _integer("UInt64", "uint64_t", 64, False)


def _as_float(value: Any) -> float:
    """An exact float, as the C writes take it (``convert_real``,
    native/binding/scalar.c): a float or an int, or a subclass of either,
    through its base value (never a ``__float__`` the subclass overrides);
    any other number through its ``__float__``, once."""
    if type(value) is float:
        return value
    cls = type(value)
    if issubclass(cls, float):
        result: float = float.__float__(value)
        return result
    if issubclass(cls, int):  # bool too: as PyLong_AsDouble
        result = int.__float__(value)
        return result
    if issubclass(cls, (str, bytes, bytearray)) or not hasattr(value, "__float__"):
        raise TypeError(f"expected a real number, got {cls.__name__}")
    return float(value)


class _Float64(Scalar):
    """64-bit float property (C ``double``)."""

    c_type = "double"
    py_type = float

    @classmethod
    def convert(cls, value: Any) -> Any:
        """Accept int, float and objects with ``__float__`` (not strings)."""
        return _as_float(value)


class _Float32(Scalar):
    """32-bit float property (C ``float``); finite values beyond its range
    raise ``OverflowError`` instead of becoming infinity."""

    c_type = "float"
    py_type = float

    @classmethod
    def convert(cls, value: Any) -> Any:
        """Like Float64, plus the float32 range check."""
        result = _as_float(value)
        if abs(result) > _FLOAT32_MAX and math.isfinite(result):
            raise OverflowError(f"{result} is out of range for Float32")
        return result


if TYPE_CHECKING:
    Bool: TypeAlias = bool
    Float32: TypeAlias = float
    Float64: TypeAlias = float
else:
    Bool, Float32, Float64 = _Bool, _Float32, _Float64
    for _scalar in (Bool, Float32, Float64):
        _scalar.__name__ = _scalar.__qualname__ = _scalar.__name__.lstrip("_")
        _scalar.__module__ = "zsharp_py"

# Python shorthands accepted in annotations, and the zs type each stands for
# (``str`` is added by zsharp_py/_types/strings.py: register_shorthand).
PYTHON_SHORTHANDS: dict[Any, Any] = {int: Int64, float: Float64, bool: Bool}


def register_shorthand(python_type: type, zs_type: type) -> None:
    """Let annotations write ``python_type`` for ``zs_type`` (``str`` for
    ``zs.String``): the resolver (zsharp_py/_model/object.py kind_of)
    knows no type of the layers above it."""
    PYTHON_SHORTHANDS[python_type] = zs_type


class PropertyKind:
    """How one type is stored natively and seen from Python (every ``*Kind``).

    Every property type and every container element type is one: it gives
    its member type in layouts (``member_type``), the native schema kind of an
    object member (``member_kind``, 0 for untraced plain data), and its C
    kind (``kind``, a ``_core.Kind``: the layout, the native type in each
    runtime and the conversions, native/binding/kind.c). ``install`` puts the
    property descriptor on an owner class; ``check`` validates a value
    without storing it (constructors check every keyword before they
    allocate, so a bad keyword never leaves a half-built object behind).
    ``key`` identifies the type structurally (equal keys, same native type).
    """

    __slots__ = ("_kind",)
    member_kind: int = 0

    @property
    def member_type(self) -> MemberType:
        """The type of the C member holding a value of this kind in a layout
        (zsharp_py/_base/layout.py): a C type name, or the layout of a
        small struct (a ``zs.Struct``'s, an optional's...)."""
        raise NotImplementedError

    @property
    def key(self) -> Any:
        """A hashable structural identity."""
        raise NotImplementedError

    @property
    def kind(self) -> _core.Kind:
        """The C kind of this type (made on first use)."""
        made: _core.Kind | None = getattr(self, "_kind", None)
        if made is None:
            made = self._kind = _kinds.get(self.key)
            if made is None:
                made = self._kind = _kinds[self.key] = self.make_kind()
        return made

    def make_kind(self) -> _core.Kind:
        """Make the C kind (called once per structural type)."""
        raise NotImplementedError

    def install(self, cls: type, name: str, cname: str, offset: int) -> None:
        """Put the property descriptor for ``name`` on ``cls``: on an object
        class a ``ValueProperty``; on a struct class a ``ValueProperty`` bound
        to the struct's kind. Scalars and object references install faster
        ones."""
        install_property(self, cls, name, offset)

    def check(self, what: str, value: Any) -> None:
        """Raise ``TypeError``/``OverflowError``/... if ``value`` cannot be stored."""
        raise NotImplementedError

    def describe(self) -> str:
        """A short human name of the type (for errors and repr)."""
        raise NotImplementedError

    def is_zero(self, value: Any) -> bool:
        """Whether ``value``, as a property's declared default, is what a
        zeroed member already holds (``None`` for a pointer, ``[]`` for a
        container, ``""`` for a string): nothing to apply at creation, so
        such a default costs nothing. A default written only for a type
        checker (docs/writing-game-scripts.md, "Typing") is usually one of these."""
        return False

    def has_plain_defaults(self) -> bool:
        """Whether a zeroed value of this type is already initialised (no
        member defaults to apply after creation)."""
        return True

    def pack_initial(self, buffer: bytearray, offset: int) -> bool:
        """Write a fresh value's member defaults into an image at ``offset``;
        False when some need the runtime (``initialize_defaults``). Only a
        struct kind has member defaults: zeroed memory is every other
        kind's empty value."""
        return True

    def initialize_defaults(self, holder: Any, name: str) -> None:
        """Apply, after creation, the member defaults of ``holder.name`` that
        an image could not hold (a struct kind's; nothing for the others)."""


# One C kind per structural type, process-wide (kinds are immutable).
_kinds: dict[Any, _core.Kind] = {}


def forget_kinds(mentions: Callable[[Any], bool]) -> None:
    """Drop the cached kinds whose key mentions a type ``mentions`` names
    (the classes a closed runtime's host registered: this process-wide
    cache would otherwise keep them, and all they hold, alive)."""
    for key in [key for key in _kinds if key_mentions(key, mentions)]:
        del _kinds[key]


def install_property(prop: PropertyKind, cls: type, name: str, offset: int) -> None:
    """A ``ValueProperty`` for ``name`` at ``offset`` of ``cls``: an object
    class, or a struct class (``_zs_kind`` set before its members install)."""
    what = f"{cls.__name__}.{name}"
    doc = f"{prop.describe()} property."
    owner_kind = cls.__dict__.get("_zs_kind")
    if owner_kind is None:
        setattr(cls, name, _core.ValueProperty(cls, prop.kind, what, offset, doc))
    else:
        setattr(cls, name, _core.ValueProperty(cls, prop.kind, what, offset, doc, owner_kind))


# The scalar codes of native/binding (zs_scalar_kind), by C type.
_SCALAR_CODES = {
    "_Bool": _core.SCALAR_BOOL,
    "int8_t": _core.SCALAR_I8,
    "int16_t": _core.SCALAR_I16,
    "int32_t": _core.SCALAR_I32,
    "int64_t": _core.SCALAR_I64,
    "uint8_t": _core.SCALAR_U8,
    "uint16_t": _core.SCALAR_U16,
    "uint32_t": _core.SCALAR_U32,
    "uint64_t": _core.SCALAR_U64,
    "float": _core.SCALAR_F32,
    "double": _core.SCALAR_F64,
}


class ScalarKind(PropertyKind):
    """A scalar property: a C descriptor on object classes and on structs."""

    __slots__ = ("scalar",)

    def __init__(self, scalar: type[Scalar]) -> None:
        self.scalar = scalar

    @property
    def member_type(self) -> MemberType:
        """The scalar's C type."""
        return self.scalar.c_type

    @property
    def c_type(self) -> str:
        """The scalar's C type (``int32_t``, ``_Bool``...)."""
        return self.scalar.c_type

    @property
    def key(self) -> Any:
        """``("scalar", Int32)``."""
        return ("scalar", self.scalar)

    @property
    def code(self) -> int:
        """The scalar's code in native/binding (zs_scalar_kind)."""
        return _SCALAR_CODES[self.scalar.c_type]

    def make_kind(self) -> _core.Kind:
        """A plain kind of the scalar's size."""
        size, align = size_align(self.member_type)
        return _core.Kind(
            _core.KIND_SCALAR,
            size,
            align,
            _core.TYPE_PLAIN,
            self.scalar.__name__,
            scalar=self.code,
            flags=_core.KIND_BITWISE,
        )

    def install(self, cls: type, name: str, cname: str, offset: int) -> None:
        """On an object class a ``ScalarProperty``; on a struct a ``MemberProperty``."""
        doc = f"{self.scalar.__name__} property (native offset {offset})."
        what = f"{cls.__name__}.{name}"
        owner_kind = cls.__dict__.get("_zs_kind")
        if owner_kind is None:
            setattr(cls, name, _core.ScalarProperty(cls, what, offset, self.code, doc))
        else:
            setattr(cls, name, _core.MemberProperty(cls, owner_kind, self.kind, what, offset, doc))

    def check(self, what: str, value: Any) -> None:
        """Run the scalar conversion."""
        self.convert(what, value)

    def convert(self, what: str, value: Any) -> Any:
        """The value to store: an exact int, float or bool, range-checked
        (subclasses of int and float through their base value, any other
        number through its ``__index__`` or ``__float__``, once). Errors name
        ``what``."""
        try:
            return self.scalar.convert(value)
        except (TypeError, OverflowError) as error:
            raise named(what, error) from None

    def describe(self) -> str:
        """The scalar type's name."""
        return self.scalar.__name__


class EnumKind(PropertyKind):
    """An enum property, member or element (``team: Team``, a host's enum
    or a Python ``enum.IntEnum``/``enum.IntFlag``): stored as its
    underlying integer scalar (a host's enum says which, ``Int32``
    otherwise), read as the enum's member.

    Writes take a member of that enum, or a plain ``int`` that is the value
    of one (an ``IntFlag`` takes any combination of its flags); a member of
    another enum raises ``TypeError``, and an ``int`` that is no member's
    value ``ValueError``. A stored number that is no member's value (the
    host wrote it) reads as the plain ``int``. The conversion runs in
    Python (a plain kind's encode and decode, native/binding/zpy_copy_out.c),
    before any native address is resolved."""

    __slots__ = ("enum", "scalar", "_members", "_flags")
    bitwise = True

    def __init__(self, enum_class: type[enum.Enum], scalar: type[Scalar]) -> None:
        self.enum = enum_class
        self.scalar = scalar
        self._members: dict[int, Any] = dict(enum_class._value2member_map_)
        self._flags = issubclass(enum_class, enum.Flag)
        for value, member in self._members.items():
            if not scalar.minimum <= value <= scalar.maximum:
                raise TypeError(
                    f"{enum_class.__name__}.{member.name} = {value} does not fit the enum's "
                    f"storage, {scalar.__name__} [{scalar.minimum}, {scalar.maximum}]"
                )

    @property
    def member_type(self) -> MemberType:
        """The underlying scalar's C type."""
        return self.scalar.c_type

    @property
    def key(self) -> Any:
        """``("enum", Team)``: two enums are two kinds."""
        return ("enum", self.enum, self.scalar)

    def describe(self) -> str:
        """The enum's name."""
        return self.enum.__name__

    def check(self, what: str, value: Any) -> None:
        """Run the conversion of a write."""
        self.number(what, value)

    def number(self, what: str | None, value: Any) -> int:
        """The integer stored for ``value``: a member of this enum, or the
        int value of one. Errors name ``what`` (``None``: the caller
        prefixes its own, as the C writes do)."""
        expects = f"{what} expects" if what else "expected"
        cls = type(value)  # the real type: isinstance would believe a __class__ property
        if issubclass(cls, enum.Enum):
            if not issubclass(cls, self.enum):
                raise TypeError(f"{expects} {self.enum.__name__}, not {cls.__name__}.{value.name}")
            number = int.__index__(value)
        elif issubclass(cls, int) and not issubclass(cls, bool):
            number = int.__index__(value)  # an int subclass through its base value
            if number not in self._members and not self._flag_value(number):
                shown = f"{what}: " if what else ""
                raise ValueError(f"{shown}{number} is not a value of {self.enum.__name__}")
        else:
            raise TypeError(
                f"{expects} {self.enum.__name__} (a member, or the int value of one), "
                f"not {cls.__name__}"
            )
        return number

    def _flag_value(self, number: int) -> bool:
        """Whether ``number`` is a combination of an ``IntFlag``'s flags."""
        if not self._flags:
            return False
        every = 0
        for value in self._members:
            every |= value
        return number >= 0 and number & ~every == 0

    def member(self, number: int) -> Any:
        """What a stored ``number`` reads as: the member, a combination of
        an ``IntFlag``'s flags, or the plain ``int``."""
        found = self._members.get(number)
        if found is not None:
            return found
        if self._flag_value(number):
            return self.enum(number)
        return number

    def make_kind(self) -> _core.Kind:
        """A plain kind of the scalar's size, converted by Python."""
        size, align = size_align(self.member_type)
        signed = self.scalar.minimum < 0
        what = self.describe()

        def encode(runtime: Any, value: Any) -> bytes:
            return self.number(None, value).to_bytes(size, sys.byteorder, signed=signed)

        def decode(runtime: Any, raw: bytes) -> Any:
            return self.member(int.from_bytes(raw, sys.byteorder, signed=signed))

        return _core.Kind(
            _core.KIND_PLAIN,
            size,
            align,
            _core.TYPE_PLAIN,
            what,
            flags=_core.KIND_BITWISE,
            encode=encode,
            decode=decode,
        )
