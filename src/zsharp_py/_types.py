"""Property types: the scalar markers (``zs.Int32`` ...) and the property
kinds that turn a class annotation into a C member plus a descriptor."""
from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from typing_extensions import TypeAlias

__all__ = [
    "Scalar", "Bool", "Int8", "Int16", "Int32", "Int64",
    "UInt8", "UInt16", "UInt32", "UInt64", "Float32", "Float64",
    "PropertyKind", "ScalarKind",
]

_FLOAT32_MAX = 3.4028234663852886e38


class Scalar:
    """Base of the scalar property types. ``zs.Int32(5)`` range-checks and
    returns a plain Python value; as an annotation it declares a property."""

    c_type: ClassVar[str] = ""
    py_type: ClassVar[type] = int
    minimum: ClassVar[int] = 0
    maximum: ClassVar[int] = 0
    # A Python expression over ``value``: True when cffi may store the value
    # as it is (no Python code runs inside cffi's conversion of it, and cffi
    # refuses exactly what ``convert`` refuses, with OverflowError).
    fast_guard: ClassVar[str] = "type(value) is int"

    def __new__(cls, value: Any = 0) -> Any:
        return cls.convert(value)

    @classmethod
    def convert(cls, value: Any) -> Any:
        """Check ``value`` against the type; return the Python value stored."""
        result = operator.index(value)
        if not cls.minimum <= result <= cls.maximum:
            raise OverflowError(
                f"{result} is out of range for {cls.__name__} [{cls.minimum}, {cls.maximum}]")
        return result


def _integer(name: str, c_type: str, bits: int, signed: bool) -> type[Scalar]:
    low = -(1 << (bits - 1)) if signed else 0
    high = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    doc = f"{'Signed' if signed else 'Unsigned'} {bits}-bit integer property ({c_type})."
    return type(name, (Scalar,), {"c_type": c_type, "minimum": low, "maximum": high,
                                  "__doc__": doc, "__module__": "zsharp_py"})


class _Bool(Scalar):
    """Boolean property (C ``_Bool``); accepts ``True``/``False`` (or 0/1)."""

    c_type = "_Bool"
    py_type = bool
    fast_guard = "value is True or value is False"

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
    if type(value) is float:
        return value
    if isinstance(value, (str, bytes, bytearray)) or not hasattr(value, "__float__"):
        raise TypeError(f"expected a real number, got {type(value).__name__}")
    return float(value)


class _Float64(Scalar):
    """64-bit float property (C ``double``)."""

    c_type = "double"
    py_type = float
    fast_guard = "type(value) is float"

    @classmethod
    def convert(cls, value: Any) -> Any:
        """Accept int, float and objects with ``__float__`` (not strings)."""
        return _as_float(value)


class _Float32(Scalar):
    """32-bit float property (C ``float``); finite values beyond its range
    raise ``OverflowError`` instead of becoming infinity."""

    c_type = "float"
    py_type = float
    fast_guard = f"type(value) is float and -{_FLOAT32_MAX!r} <= value <= {_FLOAT32_MAX!r}"

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

# Python shorthands accepted in annotations.
PYTHON_SHORTHANDS: dict[Any, Any] = {int: Int64, float: Float64, bool: Bool}


class PropertyKind:
    """How one type is stored natively and seen from Python (a *value spec*).

    Every property type and every container element type is one: it gives
    the C member type of layouts (``c_type``), the native schema kind of an
    object member (``member_kind``, 0 for untraced plain data), the native
    ``zs_type`` in a runtime (``native``), and how to ``read``, ``write`` and
    convert (``to_python``) a value stored at an address. ``install`` puts
    the property descriptor on an owner class; ``check`` validates a value
    without storing it (constructors check every keyword before they
    allocate, so a bad keyword never leaves a half-built object behind).
    ``key`` identifies the type structurally (equal keys, same native type).
    """

    __slots__ = ()
    c_type: str = ""
    member_kind: int = 0

    @property
    def key(self) -> Any:
        """A hashable structural identity."""
        raise NotImplementedError

    def install(self, cls: type, name: str, cname: str, offset: int) -> None:
        """Put the property descriptor for ``name`` on ``cls``: by default a
        property that reads and writes through this spec (views cached in
        the owner). Scalars and object references install faster ones."""
        from ._object import install_value_property

        install_value_property(self, cls, name, cname, offset)

    def check(self, what: str, value: Any) -> None:
        """Raise ``TypeError``/``OverflowError``/... if ``value`` cannot be stored."""
        raise NotImplementedError

    def describe(self) -> str:
        """A short human name of the type (for errors and repr)."""
        raise NotImplementedError

    def native(self, runtime: Any) -> Any:
        """This type's ``zs_type *`` in ``runtime`` (registered on first use)."""
        raise NotImplementedError

    def read(self, runtime: Any, parent: Any, key: Any, owner: int, address: int) -> Any:
        """The Python value (or red view, cached in ``parent``) at ``address``."""
        raise NotImplementedError

    def write(self, runtime: Any, owner: int, address: int, value: Any) -> None:
        """Store (copy) ``value`` at ``address``; ``owner`` is the object
        holding the memory (0 inside black values). Caller holds the lock."""
        raise NotImplementedError

    def to_python(self, runtime: Any, address: int) -> Any:
        """A plain Python copy of the value at ``address`` (list, dict, str...)."""
        return self.read(runtime, None, None, 0, address)

    def address_of(self, pointer: Any) -> int:
        """The address held by a conjugate's native pointer of this type."""
        raise NotImplementedError

    def initialize(self, runtime: Any, owner: int, address: int) -> None:
        """Apply declared defaults to freshly zeroed memory (structs: their
        member defaults, recursively); nothing for other types."""

    def new_black(self, runtime: Any, pointer: Any, handle: int) -> Any:
        """Wrap a freshly allocated black block (``void *``) of this type."""
        raise TypeError(f"{self.describe()} values cannot be created on their own")


# The scalar kinds of native/binding/properties.c (zs_scalar_kind), by C type.
_SCALAR_CODES = {c_type: code for code, c_type in enumerate(
    ("_Bool", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t",
     "uint64_t", "float", "double"))}


def _prefixed(what: str, convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``convert``, with the property's name put before its error messages."""
    prefix = what + ": "

    def convert_for(value: Any) -> Any:
        try:
            return convert(value)
        except (TypeError, OverflowError) as error:
            raise type(error)(prefix + str(error)) from None

    return convert_for


def make_setter(what: str, cname: str, convert: Callable[[Any], Any],
                fast_guard: str = "False") -> Callable[[Any, Any], None]:
    """A setter that converts first (user code may run there), then stores.

    The conversion runs before ``self._p`` is read, so no Python code can run
    between fetching the native pointer and writing through it. Values that
    pass ``fast_guard`` (exact ints, floats, bools) skip the conversion: cffi
    converts them in C, running no Python code, and range-checks them; its
    OverflowError falls back to ``convert`` for the message. Conversion
    errors are re-raised with the property's name (``try`` costs nothing
    when no exception is raised).
    """
    namespace: dict[str, Any] = {"convert": convert, "what": what + ": "}
    exec(  # noqa: S102 - generated once per property
        f"def setter(self, value):\n"
        f"    if {fast_guard}:\n"
        f"        try:\n"
        f"            self._p.{cname} = value\n"
        f"            return\n"
        f"        except OverflowError:\n"
        f"            pass\n"
        f"    try:\n"
        f"        value = convert(value)\n"
        f"    except (TypeError, OverflowError) as error:\n"
        f"        raise type(error)(what + str(error)) from None\n"
        f"    self._p.{cname} = value\n",
        namespace,
    )
    setter: Callable[[Any, Any], None] = namespace["setter"]
    return setter


class ScalarKind(PropertyKind):
    """A scalar property: a C descriptor on object classes, a C-level
    ``attrgetter('_p.<member>')`` on structs."""

    __slots__ = ("scalar", "_pointer", "_cast")

    def __init__(self, scalar: type[Scalar]) -> None:
        self.scalar = scalar
        from ._native import ffi

        self._pointer = ffi.typeof(scalar.c_type + " *")
        self._cast = ffi.cast  # element reads and writes are hot: no import per call

    @property
    def c_type(self) -> str:  # type: ignore[override]
        return self.scalar.c_type

    @property
    def key(self) -> Any:
        """``("scalar", Int32)``."""
        return ("scalar", self.scalar)

    def install(self, cls: type, name: str, cname: str, offset: int) -> None:
        """Install the property: on an object class, a C descriptor
        (native/binding/properties.c); on a struct, an attrgetter on the
        view's cdata and a generated setter."""
        from ._core import ScalarProperty
        from ._object import Object

        doc = f"{self.scalar.__name__} property (native offset {offset})."
        what = f"{cls.__name__}.{name}"
        if issubclass(cls, Object):
            setattr(cls, name, ScalarProperty(cls, what, offset, _SCALAR_CODES[self.scalar.c_type],
                                              _prefixed(what, self.scalar.convert), doc))
            return
        setter = make_setter(what, cname, self.scalar.convert, self.scalar.fast_guard)
        prop = property(operator.attrgetter(f"_p.{cname}"), setter, None, doc)
        setattr(cls, name, prop)

    def check(self, what: str, value: Any) -> None:
        """Run the scalar conversion."""
        try:
            self.scalar.convert(value)
        except (TypeError, OverflowError) as error:
            raise type(error)(f"{what}: {error}") from None

    def describe(self) -> str:
        """The scalar type's name."""
        return self.scalar.__name__

    def native(self, runtime: Any) -> Any:
        """A plain type of the scalar's size."""
        from ._native import ffi

        size = ffi.sizeof(self.scalar.c_type)
        return runtime._basic_type(1, size, size)  # ZS_TYPE_PLAIN

    def read(self, runtime: Any, parent: Any, key: Any, owner: int, address: int) -> Any:
        """The scalar's Python value."""
        return self._cast(self._pointer, address)[0]

    def write(self, runtime: Any, owner: int, address: int, value: Any) -> None:
        """Convert, then store."""
        value = self.scalar.convert(value)
        self._cast(self._pointer, address)[0] = value
