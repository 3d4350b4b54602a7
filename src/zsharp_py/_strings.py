"""String conjugates: ``zs.String`` (UTF-16), ``zs.Utf8String``,
``zs.AnsiString`` (ASCII only), ``zs.Text`` (immutable display text) and
``zs.Name`` (interned, case-insensitive, with a number suffix).

The string kinds own a native buffer: black when created from Python
(``zs.String("héllo")``), red views when read from a property or element.
Each converts to and from ``str`` and compares with ``str``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ._native import api_address, check, check_writable, ffi, lib
from ._types import PropertyKind
from ._values import ImmutableValue, ValueConjugate, make_black, make_view

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["String", "Utf8String", "AnsiString", "Text", "Name", "StringSpec", "NameSpec"]

_STRING_POINTER = ffi.typeof("zs_string *")
_MAX_UNITS = 1 << 30


class _StringBase(ValueConjugate):
    """Shared behaviour of the native string kinds."""

    __slots__ = ()
    _unit: ClassVar[int] = 1
    _codec: ClassVar[str] = "utf-8"

    def __new__(cls, value: Any = "") -> Any:
        from ._runtime import current_runtime

        text = cls._text_of(value)
        string = current_runtime()._new_value(StringSpec(cls))
        try:
            string._store(text)
        except BaseException:
            string.dispose()
            raise
        return string

    @classmethod
    def _zs_value_spec(cls, owner: type) -> StringSpec:
        return StringSpec(cls)

    @classmethod
    def _text_of(cls, value: Any) -> str:
        if isinstance(value, _StringBase):
            return str(value)
        if not isinstance(value, str):
            raise TypeError(f"{cls.__name__} needs a str, not {type(value).__name__}")
        cls._encode(value)  # validates (AnsiString: ASCII only)
        return value

    @classmethod
    def _encode(cls, text: str) -> bytes:
        try:
            data = text.encode(cls._codec)
        except UnicodeEncodeError as error:
            raise ValueError(f"{cls.__name__} cannot hold {text!r}: {error.reason} "
                             f"(position {error.start})") from None
        if len(data) // cls._unit > _MAX_UNITS:
            raise ValueError(f"{cls.__name__}: string too long")
        return data

    def _store(self, text: str) -> None:
        data = self._encode(text)
        runtime = self._rt
        with runtime._lock:
            pointer = self._live()
            check(lib.zs_string_assign(runtime._live_ptr(), self._owner,
                                       runtime._native_type(self._spec), pointer, data,
                                       len(data) // self._unit), "string", runtime)

    def __str__(self) -> str:
        pointer = self._live()
        length = pointer.length
        if length == 0:
            return ""
        return bytes(ffi.buffer(pointer.data, length * self._unit)).decode(self._codec)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (str, _StringBase)):
            return str(self) == str(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __len__(self) -> int:
        return len(str(self))

    def __contains__(self, item: str) -> bool:
        return item in str(self)

    def __add__(self, other: str) -> str:
        return str(self) + str(other)

    def __radd__(self, other: str) -> str:
        return str(other) + str(self)

    def __repr__(self) -> str:
        if self.is_expired:
            return self._expired_repr()
        return f"{type(self).__name__}({str(self)!r})"


class _MutableString(_StringBase):
    __slots__ = ()

    def assign(self, value: Any) -> None:
        """Replace the contents (a red view writes through to native memory)."""
        self._store(self._text_of(value))


class String(_MutableString):
    """Wide string (UTF-16 code units), like Unreal's ``FString``."""

    __slots__ = ()
    _unit = 2
    _codec = "utf-16-le"


class Utf8String(_MutableString):
    """UTF-8 string (``FUtf8String``)."""

    __slots__ = ()


class AnsiString(_MutableString):
    """ASCII-only string (``FAnsiString``): non-ASCII input raises ValueError."""

    __slots__ = ()
    _codec = "ascii"


class Text(_StringBase):
    """Immutable display text (``FText``): no in-place mutation; a Text
    property is replaced as a whole by assignment."""

    __slots__ = ()


class StringSpec(PropertyKind):
    """A string member, element or black value of one of the string kinds."""

    __slots__ = ("cls",)
    c_type = "zs_string"

    def __init__(self, cls: type[_StringBase]) -> None:
        self.cls = cls

    @property
    def key(self) -> Any:
        """``("string", cls)``."""
        return ("string", self.cls)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StringSpec) and other.cls is self.cls

    def __hash__(self) -> int:
        return hash(self.key)

    def describe(self) -> str:
        """The string kind's name."""
        return self.cls.__name__

    def address_of(self, pointer: Any) -> int:
        """Address of the ``zs_string``."""
        return api_address(pointer)


    def check(self, what: str, value: Any) -> None:
        """A str (or string conjugate) this kind can hold."""
        try:
            self.cls._text_of(value)
        except (TypeError, ValueError) as error:
            raise type(error)(f"{what}: {error}") from None

    def native(self, runtime: Runtime) -> Any:
        """STRING of the kind's code unit size."""
        return runtime._basic_type(4, self.cls._unit, 0)  # ZS_TYPE_STRING

    def read(self, runtime: Runtime, parent: Any, key: Any, owner: int, address: int) -> Any:
        """A red view cached in ``parent`` (a str when there is none)."""
        pointer = ffi.cast(_STRING_POINTER, address)
        if parent is None:
            return self._decode(pointer)
        return make_view(self.cls, runtime, self, pointer, parent, key, owner)

    def _decode(self, pointer: Any) -> str:
        length = pointer.length
        if length == 0:
            return ""
        return bytes(ffi.buffer(pointer.data, length * self.cls._unit)).decode(self.cls._codec)

    def write(self, runtime: Runtime, owner: int, address: int, value: Any) -> None:
        """Encode and store."""
        data = self.cls._encode(self.cls._text_of(value))
        check(lib.zs_string_assign(runtime._ptr, owner, runtime._native_type(self),
                                   ffi.cast(_STRING_POINTER, address), data,
                                   len(data) // self.cls._unit), "string", runtime)

    def to_python(self, runtime: Runtime, address: int) -> str:
        """The text as ``str``."""
        return self._decode(ffi.cast(_STRING_POINTER, address))

    def new_black(self, runtime: Runtime, pointer: Any, handle: int) -> Any:
        """Wrap a black string block."""
        return make_black(self.cls, runtime, self, ffi.cast(_STRING_POINTER, pointer), handle)


# ---------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------

class Name(ImmutableValue):
    """An interned name (``FName``): compared and hashed case-insensitively,
    with a number suffix split off (``"Actor_3"`` is base ``"Actor"``, number
    4, displayed ``Actor_3``). Names live in the runtime's name table and
    never go away, so a Name has no lifetime of its own."""

    __slots__ = ("_rt", "_index", "_number")
    _rt: Runtime
    _index: int
    _number: int

    def __init__(self, text: Any) -> None:
        from ._runtime import current_runtime

        if isinstance(text, Name):
            self._rt, self._index, self._number = text._rt, text._index, text._number
            return
        if not isinstance(text, str):
            raise TypeError(f"Name needs a str, not {type(text).__name__}")
        runtime = current_runtime()
        self._rt = runtime
        self._index, self._number = runtime._intern(text)

    @classmethod
    def _zs_value_spec(cls, owner: type) -> NameSpec:
        return NameSpec()

    @classmethod
    def _from_native(cls, runtime: Runtime, index: int, number: int) -> Name:
        name = object.__new__(cls)
        name._rt, name._index, name._number = runtime, index, number
        return name

    @property
    def number(self) -> int:
        """The number part (0: none; n: displayed suffix ``_{n-1}``)."""
        return self._number

    def __str__(self) -> str:
        return self._rt._name_text(self._index, self._number)

    def __repr__(self) -> str:
        return f"Name({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Name):
            if other._rt is self._rt:
                return other._index == self._index and other._number == self._number
            return _fold(str(other)) == _fold(str(self))
        if isinstance(other, str):
            return _fold(other) == _fold(str(self))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(_fold(str(self)))


_NAME_POINTER = ffi.typeof("uint32_t *")
_ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _fold(text: str) -> str:
    """Case-fold ASCII letters only, exactly as the native name table does
    (so ``Name("Ärger") != Name("ärger")`` both natively and here)."""
    return text.translate(_ASCII_FOLD)


class NameSpec(PropertyKind):
    """A name member or element: 8 bytes (table index, number)."""

    __slots__ = ()
    c_type = "uint64_t"

    @property
    def key(self) -> Any:
        """``("name",)``."""
        return ("name",)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NameSpec)

    def __hash__(self) -> int:
        return hash(self.key)

    def describe(self) -> str:
        """``Name``."""
        return "Name"


    def check(self, what: str, value: Any) -> None:
        """A Name or a str."""
        if not isinstance(value, (Name, str)):
            raise TypeError(f"{what} expects a Name or a str, not {type(value).__name__}")

    def native(self, runtime: Runtime) -> Any:
        """PLAIN 8 bytes."""
        return runtime._basic_type(1, 8, 8)

    def read(self, runtime: Runtime, parent: Any, key: Any, owner: int, address: int) -> Name:
        """The Name stored at ``address``."""
        words = ffi.cast(_NAME_POINTER, address)
        return Name._from_native(runtime, words[0], words[1])

    def write(self, runtime: Runtime, owner: int, address: int, value: Any) -> None:
        """Intern (if needed) and store."""
        self.check("Name", value)
        check_writable(runtime, owner, "Name")
        if isinstance(value, Name) and value._rt is runtime:
            index, number = value._index, value._number
        else:
            index, number = runtime._intern(str(value))
        words = ffi.cast(_NAME_POINTER, address)
        words[0], words[1] = index, number

    def to_python(self, runtime: Runtime, address: int) -> Name:
        """The Name (immutable)."""
        return self.read(runtime, None, None, 0, address)
