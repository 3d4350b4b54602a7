"""String conjugates: ``zs.String`` (UTF-16), ``zs.Utf8String``,
``zs.AnsiString`` (ASCII only), ``zs.Text`` (immutable display text) and
``zs.Name`` (interned, case-insensitive, with a number suffix).

The string kinds own a native buffer: black when created from Python
(``zs.String("héllo")``), red views when read from a property or element.
Each converts to and from ``str`` and compares with ``str``. The text of a
``str`` subclass is taken from its own data, never from what its methods
return (native/binding/kind.c, stage_string).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, overload

from typing_extensions import Self

from .. import _core
from .._base.layout import size_align
from .._model.kinds import PropertyKind, register_shorthand
from .._model.values import ValueConjugate

__all__ = ["String", "Utf8String", "AnsiString", "Text", "Name", "StringKind", "NameKind"]


class _StringBase(ValueConjugate):
    """Shared behaviour of the native string kinds."""

    __slots__ = ()
    _unit: ClassVar[int] = 1
    _flags: ClassVar[int] = 0

    if False:  # pragma: no cover - construction is C (native/binding/value.c)

        def __init__(self, value: Any = "") -> None: ...

    if TYPE_CHECKING:
        # The descriptor protocol, for type checkers only: a property
        # annotated ``label: zs.String`` reads as the string conjugate and
        # takes a ``str`` too, in assignments and in the class call (the
        # dataclass_transform of zs.Object and zs.Struct types a keyword by
        # its field's ``__set__``). At run time the class installs its own
        # descriptor (StringKind).
        @overload
        def __get__(self, instance: None, owner: Any) -> Self: ...
        @overload
        def __get__(self, instance: object, owner: Any) -> Self: ...
        def __get__(self, instance: object, owner: Any) -> Self: ...
        def __set__(self, instance: object, value: str | _StringBase) -> None: ...

    @classmethod
    def _zs_value_kind(cls, owner: type) -> StringKind:
        return StringKind(cls)

    # str(): the text, copied out in C (native/binding/value.c, value_str).

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (str, _StringBase)):
            return str(self) == str(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __len__(self) -> int:
        return len(str(self))

    def __iter__(self) -> Iterator[str]:
        """The characters (of a copy of the text)."""
        return iter(str(self))

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
        self._assign(value)


class String(_MutableString):
    """Wide string (UTF-16 code units), like Unreal's ``FString``."""

    __slots__ = ()
    _unit = 2
    _flags = _core.KIND_UTF16


class Utf8String(_MutableString):
    """UTF-8 string (``FUtf8String``)."""

    __slots__ = ()


class AnsiString(_MutableString):
    """ASCII-only string (``FAnsiString``): non-ASCII input raises ValueError."""

    __slots__ = ()
    _flags = _core.KIND_ASCII


class Text(_StringBase):
    """Immutable display text (``FText``): no in-place mutation; a Text
    property is replaced as a whole by assignment."""

    __slots__ = ()


register_shorthand(str, String)  # `label: str` declares a zs.String


class StringKind(PropertyKind):
    """A string member, element or black value of one of the string kinds."""

    __slots__ = ("cls",)
    member_type = "zs_string"

    def __init__(self, cls: type[_StringBase]) -> None:
        self.cls = cls

    def is_zero(self, value: Any) -> bool:
        """``""``: a zeroed string is empty."""
        return type(value) is str and not value

    @property
    def key(self) -> Any:
        """``("string", cls)``."""
        return ("string", self.cls)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StringKind) and other.cls is self.cls

    def __hash__(self) -> int:
        return hash(self.key)

    def describe(self) -> str:
        """The string kind's name."""
        return self.cls.__name__

    def make_kind(self) -> _core.Kind:
        """A native string of the kind's code units, read as a view."""
        cls = self.cls
        return _core.Kind(
            _core.KIND_STRING,
            *size_align(self.member_type),
            _core.TYPE_STRING,
            cls.__name__,
            unit=cls._unit,
            flags=_core.KIND_VIEW | cls._flags,
            cls=cls,
        )

    def check(self, what: str, value: Any) -> None:
        """A str (or string conjugate) this kind can hold."""
        if isinstance(value, _StringBase):
            str(value)  # live, or ExpiredConjugateError
            return
        if not isinstance(value, str):
            raise TypeError(f"{what}: {self.cls.__name__} needs a str, not {type(value).__name__}")
        codec = (
            "utf-16-le"
            if self.cls._flags & _core.KIND_UTF16
            else "ascii"
            if self.cls._flags & _core.KIND_ASCII
            else "utf-8"
        )
        try:
            str.encode(value, codec)  # the base behaviour, never a subclass's encode
        except UnicodeEncodeError as error:
            raise ValueError(
                f"{what}: {self.cls.__name__} cannot hold {value!r}: "
                f"{error.reason} (position {error.start})"
            ) from None


for _string_class in (String, Utf8String, AnsiString, Text):
    type.__setattr__(_string_class, "_zs_kind", StringKind(_string_class).kind)


# ---------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------


class Name(_core.NameBase):
    """An interned name (``FName``): compared and hashed case-insensitively,
    with a number suffix split off (``"Actor_3"`` is base ``"Actor"``, number
    4, displayed ``Actor_3``). Names live in the runtime's name table and
    never go away, so a Name has no lifetime of its own.

    >>> import zsharp_py as zs
    >>> with zs.Runtime():
    ...     (zs.Name("Hero_2") == "hero_2", zs.Name("Hero_2").number, str(zs.Name("X")))
    (True, 3, 'X')
    """

    __slots__ = ()

    if TYPE_CHECKING:
        # As for the strings: ``tag: zs.Name`` reads as a Name and takes a str.
        @overload
        def __get__(self, instance: None, owner: Any) -> Self: ...
        @overload
        def __get__(self, instance: object, owner: Any) -> Self: ...
        def __get__(self, instance: object, owner: Any) -> Self: ...
        def __set__(self, instance: object, value: str | Name) -> None: ...

    @classmethod
    def _zs_value_kind(cls, owner: type) -> NameKind:
        return NameKind()


class NameKind(PropertyKind):
    """A name member or element: 8 bytes (table index, number)."""

    __slots__ = ()
    member_type = "uint64_t"
    bitwise = True

    @property
    def key(self) -> Any:
        """``("name",)``."""
        return ("name",)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NameKind)

    def __hash__(self) -> int:
        return hash(self.key)

    def describe(self) -> str:
        """``Name``."""
        return "Name"

    def make_kind(self) -> _core.Kind:
        """Two 32-bit words: the interned index and the number."""
        return _core.Kind(
            _core.KIND_NAME,
            *size_align(self.member_type),
            _core.TYPE_PLAIN,
            "Name",
            flags=_core.KIND_BITWISE,
        )

    def check(self, what: str, value: Any) -> None:
        """A Name or a str."""
        if not isinstance(value, (Name, str)):
            raise TypeError(f"{what} expects a Name or a str, not {type(value).__name__}")
