"""Native containers: ``zs.Array[T]``, ``zs.Set[T]``, ``zs.Map[K, V]`` and
``zs.Optional[T]``, for element types of every kind (scalars, object and
weak references, structs, strings, names, nested containers).

Elements live in native memory and the collector traces the references in
them. A container is black when created from Python
(``zs.Array[zs.Int32]([1, 2])``) or cloned, and a red view when read from a
property or element. Element views (a struct inside an array, say) expire
when the container changes structure (insert, remove, clear, growth, a
whole new value assigned), because the storage may move.

The protocols are C (native/binding/containers.c): every write converts
its Python values completely before it finds the container again and
writes, so no conversion hook can make it write into moved storage.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast, overload

from typing_extensions import Self

from .. import _core
from .._base.errors import named
from .._base.generics import TypeParameters, forget_cached
from .._base.layout import Layout, align_up, size_align
from .._model.hints import plural
from .._model.kinds import PropertyKind
from .._model.object import ObjectRefKind, declaring_scope, kind_of
from .._model.values import ValueConjugate

__all__ = ["Array", "Set", "Map", "Optional", "ArrayKind", "SetKind", "MapKind", "OptionalKind"]

_MISSING = object()
# How many times remove() searches again when its comparisons changed the array.
_SEARCHES = 8

# Type parameters (for type checkers: see _typing). Element reads are typed
# with them; writes take Any, because every element kind also accepts plain
# Python contents (a tuple for a struct, a str for a Name...), checked at run
# time.
T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")


class _Generic:
    """Shared ``Container[T]`` specialisation: one subclass per type argument
    (cached), whose element kind resolves on first use so forward references
    (``zs.Array["Actor"]``) work."""

    # No instance __dict__ for the containers: a mistyped attribute
    # (``numbers.apend = 2``) raises instead of being stored in Python.
    __slots__ = ()
    _zs_args: ClassVar[tuple[Any, ...]] = ()
    _zs_scope: ClassVar[Any] = None
    _zs_element_kinds: ClassVar[tuple[PropertyKind, ...] | None] = None
    _zs_arity: ClassVar[int] = 1
    _zs_cache: ClassVar[dict[tuple[Any, ...], type]]

    def __class_getitem__(cls, args: Any) -> Any:
        if cls._zs_args:
            raise TypeError(f"{cls.__name__} is already specialised")
        args = args if isinstance(args, tuple) else (args,)
        if len(args) != cls._zs_arity:
            raise TypeError(f"{cls.__name__}[...] takes {plural(cls._zs_arity, 'type argument')}")
        cache = cls.__dict__.get("_zs_cache")
        if cache is None:
            cache = {}
            type.__setattr__(cls, "_zs_cache", cache)
        # String arguments are forward references: the same text names
        # different classes in different modules, so the module is part of
        # the key.
        module = (
            sys._getframe(1).f_globals.get("__name__")
            if any(isinstance(a, str) for a in args)
            else None
        )
        cache_key = (args, module)
        try:
            found = cache.get(cache_key)
        except TypeError:
            found = None
        if found is not None:
            return found
        # Of the caller's locals only those the string arguments name are
        # kept: this specialisation is cached process-wide.
        named = {n for a in args if isinstance(a, str) for n in re.findall(r"[A-Za-z_]\w*", a)}
        scope = declaring_scope(1, named)
        shown = ", ".join(
            a if isinstance(a, str) else getattr(a, "__name__", repr(a)) for a in args
        )
        special = type(
            f"{cls.__name__}[{shown}]",
            (cls,),
            {
                "__slots__": (),
                "_zs_args": args,
                "_zs_scope": scope,
                "_zs_element_kinds": None,
                "__module__": "zsharp_py",
            },
        )
        with contextlib.suppress(TypeError):  # an unhashable argument: not cached
            cache[cache_key] = special
        return special

    @classmethod
    def _element_kinds(cls) -> tuple[PropertyKind, ...]:
        kinds = cls.__dict__.get("_zs_element_kinds")
        if kinds is None:
            if not cls._zs_args:
                raise TypeError(f"use {cls.__name__}[T]: a container needs its element type")
            holder = type("_Scope", (), {"_zs_scope": cls._zs_scope})
            kinds = tuple(kind_of(holder, arg, f"{cls.__name__} element") for arg in cls._zs_args)
            _check_element(cls, kinds[0])  # map values may be anything
            type.__setattr__(cls, "_zs_element_kinds", kinds)
        return kinds


def _check_element(cls: type, element: PropertyKind) -> None:
    if isinstance(element, ObjectRefKind) and cls.__name__.startswith(("Set", "Map")):
        return  # object keys: hashable by handle
    if cls.__name__.startswith(("Set", "Map")) and element.key[0] in ("array", "set", "map"):
        raise TypeError(f"{cls.__name__}: containers cannot be set elements or map keys")
    if cls.__name__.startswith(("Set", "Map")) and not getattr(element, "hashable", True):
        raise TypeError(
            f"{cls.__name__}: {element.describe()} values cannot be set elements or "
            "map keys (they are not hashable)"
        )


class _Container(_Generic):
    """Behaviour shared by the container conjugates (a mixin of the C bases)."""

    __slots__ = ()
    _zs_kind_code: ClassVar[int] = 0
    _zs_native_kind: ClassVar[int] = 0

    @classmethod
    def _zs_value_kind(cls, owner: type) -> PropertyKind:
        return cls._kind_class()(cls)

    @classmethod
    def _kind_class(cls) -> type[_ContainerKind]:
        raise NotImplementedError

    if TYPE_CHECKING:

        def __init__(self, contents: Any = ..., /) -> None: ...

        # The descriptor protocol, for type checkers only: a property
        # annotated ``squad: zs.Array[Unit]`` reads as the container (a red
        # view) and takes a Python container too, in assignments and in the
        # class call (zs.Object's dataclass_transform types a keyword by its
        # field's ``__set__``: Array, Set, Map and Optional give theirs).
        # The elements are checked at run time. At run time the class
        # installs its own descriptor (the container's kind).
        @overload
        def __get__(self, instance: None, owner: Any) -> Self: ...
        @overload
        def __get__(self, instance: object, owner: Any) -> Self: ...
        def __get__(self, instance: object, owner: Any) -> Self: ...
        def to_python(self) -> Any: ...
        @property
        def is_expired(self) -> bool: ...
        @property
        def is_black(self) -> bool: ...
        def _expired_repr(self) -> str: ...

    def __repr__(self) -> str:
        if self.is_expired:
            return self._expired_repr()
        colour = "black" if self.is_black else "red"
        return f"<{type(self).__name__} ({colour}) {self.to_python()!r}>"

    __hash__ = None  # type: ignore[assignment]  # mutable


class _ContainerKind(PropertyKind):
    """Kind of a container type (shared plumbing)."""

    __slots__ = ("cls", "_elements")

    def __init__(self, cls: type[_Container]) -> None:
        self.cls = cls
        self._elements: tuple[PropertyKind, ...] | None = None  # resolved on first use

    def is_zero(self, value: Any) -> bool:
        """An empty list, tuple, set or dict (an absent optional: ``None``):
        a zeroed container is empty."""
        if self.kind_name == "optional":
            return value is None
        return type(value) in (list, tuple, set, frozenset, dict) and not value

    @property
    def elements(self) -> tuple[PropertyKind, ...]:
        """The element kind(s)."""
        elements = self._elements
        if elements is None:
            elements = self._elements = self.cls._element_kinds()
        return elements

    @property
    def key(self) -> Any:
        """Structural identity: kind and element keys."""
        return (self.kind_name,) + tuple(element.key for element in self.elements)

    kind_name = "container"

    @property
    def kind(self) -> _core.Kind:
        """The kind of this container class (one per class: its views are of it)."""
        made: _core.Kind | None = self.cls.__dict__.get("_zs_kind")
        if made is None:
            made = self.make_kind()
            type.__setattr__(self.cls, "_zs_kind", made)
        return made

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ContainerKind) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def describe(self) -> str:
        """``Array[Int32]`` and so on."""
        return self.cls.__name__

    def _layout(self) -> tuple[int, int, int, int]:
        """(size, align, entry size, value offset) as the C side lays them out."""
        raise NotImplementedError

    def make_kind(self) -> _core.Kind:
        """The container's kind: its element kinds, its layout, its class."""
        size, align, entry_size, value_offset = self._layout()
        elements = [element.kind for element in self.elements]
        return _core.Kind(
            self.cls._zs_kind_code,
            size,
            align,
            self.cls._zs_native_kind,
            self.describe(),
            flags=_core.KIND_VIEW,
            element=elements[0],
            value=elements[1] if len(elements) > 1 else None,
            entry_size=entry_size,
            value_offset=value_offset,
            cls=self.cls,
        )

    def check(self, what: str, value: Any) -> None:
        """A container of this type or Python contents of the right shape."""
        if isinstance(value, self.cls):
            value.to_python() if value.is_expired else None  # raises with the reason
            return
        try:
            self.check_contents(value)
        except (TypeError, ValueError, OverflowError) as error:
            raise named(what, error) from None

    def check_contents(self, value: Any) -> None:
        """Validate Python contents without storing them."""
        raise NotImplementedError


# ---------------------------------------------------------------------------
# Array
# ---------------------------------------------------------------------------


class Array(_core.ArrayBase, ValueConjugate, _Container, TypeParameters[T]):
    """A native dynamic array (``TArray``) with the ``list`` protocol.

    >>> import zsharp_py as zs
    >>> with zs.Runtime():
    ...     numbers = zs.Array[zs.Int32]([3, 1, 2])
    ...     numbers.append(7); numbers.insert(0, -1)
    ...     (numbers == [-1, 3, 1, 2, 7], numbers[1:3], numbers.pop(), len(numbers))
    (True, [3, 1], 7, 4)
    """

    __slots__ = ()
    _zs_kind_code = _core.KIND_ARRAY
    _zs_native_kind = _core.TYPE_ARRAY

    @classmethod
    def _kind_class(cls) -> type[_ContainerKind]:
        return ArrayKind

    if TYPE_CHECKING:

        def __len__(self) -> int: ...
        @overload
        def __getitem__(self, index: int) -> T: ...
        @overload
        def __getitem__(self, index: slice) -> list[T]: ...
        def __getitem__(self, index: Any) -> Any: ...
        def __setitem__(self, index: Any, value: Any) -> None: ...
        def __delitem__(self, index: int | slice) -> None: ...
        def __iter__(self) -> Iterator[T]: ...
        def __contains__(self, value: object) -> bool: ...
        def append(self, value: Any) -> None:
            """Add one element at the end."""

        def extend(self, values: Iterable[Any]) -> None:
            """Add every element of an iterable at the end (all or nothing)."""

        def __set__(self, instance: object, value: Iterable[Any]) -> None: ...

        def __iadd__(self, values: Iterable[Any]) -> Self:
            """``arr += values``: ``extend``, as a list does."""

        def insert(self, index: int, value: Any) -> None:
            """Insert before ``index`` (clamped like ``list.insert``)."""

        def pop(self, index: int = -1) -> T:
            """Remove and return an element (a plain copy: the slot goes away)."""

        def clear(self) -> None:
            """Remove every element."""

        def to_python(self) -> list[T]: ...

    def remove(self, value: Any) -> None:
        """Remove the first element equal to ``value`` (ValueError if none).

        The comparisons may run Python code that changes the array; the
        element found is removed only if the array kept its size and
        storage meanwhile, else the search starts again."""
        for _ in range(_SEARCHES):
            before = (self._data_address, len(self))
            position = self.index(value)
            if (self._data_address, len(self)) == before:
                del self[position]
                return
        raise RuntimeError(f"{type(self).__name__} changed during every search of remove()")

    def index(self, value: Any) -> int:
        """Position of the first element equal to ``value``."""
        for position, item in enumerate(self.to_python()):
            if _same(item, value):
                return position
        raise ValueError(f"{value!r} is not in the array")

    def count(self, value: Any) -> int:
        """How many elements equal ``value``."""
        return sum(1 for item in self.to_python() if _same(item, value))

    def __reversed__(self) -> Iterator[T]:
        for position in range(len(self) - 1, -1, -1):
            if position < len(self):
                yield self[position]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Array):
            return bool(self.to_python() == other.to_python())
        if isinstance(other, (list, tuple)):
            mine = self.to_python()
            return len(mine) == len(other) and all(
                _same(a, b) for a, b in zip(mine, other, strict=False)
            )
        return NotImplemented


def _plain(value: Any) -> Any:
    """A Python value comparable with ``to_python`` output."""
    if isinstance(value, ValueConjugate):
        return value.to_python()
    return value


def _same(item: Any, value: Any) -> bool:
    """Compare a plain element (``to_python`` output) with a user value:
    structs convert to dicts, which also match tuples of their members."""
    value = _plain(value)
    if isinstance(item, dict) and isinstance(value, (tuple, list)):
        return len(item) == len(value) and all(
            _same(a, b) for a, b in zip(item.values(), value, strict=False)
        )
    if isinstance(item, dict) and isinstance(value, dict):
        return item.keys() == value.keys() and all(_same(item[k], value[k]) for k in item)
    if isinstance(item, list) and isinstance(value, (tuple, list)):
        return len(item) == len(value) and all(
            _same(a, b) for a, b in zip(item, value, strict=False)
        )
    return bool(item == value)


def _size_align(element: PropertyKind) -> tuple[int, int]:
    return size_align(element.member_type)


class ArrayKind(_ContainerKind):
    """Kind of ``zs.Array[T]``."""

    __slots__ = ()
    member_type = "zs_array"
    kind_name = "array"

    def _layout(self) -> tuple[int, int, int, int]:
        """A zs_array of elements of their own size."""
        return *size_align(self.member_type), _size_align(self.elements[0])[0], 0

    def check_contents(self, value: Any) -> None:
        """Any iterable of valid elements."""
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
            raise TypeError(
                f"{self.describe()} needs an iterable of elements, not {type(value).__name__}"
            )
        element = self.elements[0]
        for item in value:
            element.check("element", item)


# ---------------------------------------------------------------------------
# Set and Map
# ---------------------------------------------------------------------------


class Set(_core.SetBase, ValueConjugate, _Container, TypeParameters[T]):
    """A native hash set (``TSet``) with the ``set`` protocol.

    >>> import zsharp_py as zs
    >>> with zs.Runtime():
    ...     tags = zs.Set[zs.Name](["Enemy", "boss"])
    ...     tags.add("ENEMY")                 # names compare case-insensitively
    ...     (len(tags), "Boss" in tags, tags == {"enemy", "boss"})
    (2, True, True)
    """

    __slots__ = ()
    _zs_kind_code = _core.KIND_SET
    _zs_native_kind = _core.TYPE_SET

    @classmethod
    def _kind_class(cls) -> type[_ContainerKind]:
        return SetKind

    if TYPE_CHECKING:

        def __len__(self) -> int: ...
        def __iter__(self) -> Iterator[T]:
            """The elements (plain copies)."""

        def __contains__(self, value: object) -> bool: ...
        def add(self, value: Any) -> None:
            """Add an element (no effect if an equal one is present)."""

        def __set__(self, instance: object, value: Iterable[Any]) -> None: ...
        def update(self, values: Iterable[Any]) -> None:
            """Add every element of an iterable (all checked first)."""

        def pop(self) -> T:
            """Remove and return an arbitrary element (a plain copy)."""

        def clear(self) -> None:
            """Remove every element."""

        def _discard(self, value: Any) -> bool: ...

    def discard(self, value: Any) -> None:
        """Remove an element if present."""
        self._discard(value)

    def remove(self, value: Any) -> None:
        """Remove an element (KeyError if absent)."""
        if not self._discard(value):
            raise KeyError(value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Set, set, frozenset)):
            mine = list(self)
            theirs = list(other)
            return len(mine) == len(theirs) and all(
                any(a == _plain(b) for a in mine) for b in theirs
            )
        return NotImplemented


class Map(_core.MapBase, ValueConjugate, _Container, TypeParameters[K, V]):
    """A native hash map (``TMap``) with the ``dict`` protocol.

    >>> import zsharp_py as zs
    >>> with zs.Runtime():
    ...     scores = zs.Map[zs.Name, zs.Int32]({"alice": 3})
    ...     scores["bob"] = 5
    ...     scores["ALICE"] += 1
    ...     (scores == {"alice": 4, "bob": 5}, scores.get("carol", 0), len(scores))
    (True, 0, 2)
    """

    __slots__ = ()
    _zs_kind_code = _core.KIND_MAP
    _zs_native_kind = _core.TYPE_MAP
    _zs_arity = 2

    @classmethod
    def _kind_class(cls) -> type[_ContainerKind]:
        return MapKind

    if TYPE_CHECKING:

        def __len__(self) -> int: ...
        def __getitem__(self, key: Any) -> V: ...
        def __set__(self, instance: object, value: Mapping[Any, Any]) -> None: ...
        def __setitem__(self, key: Any, value: Any) -> None: ...
        def __delitem__(self, key: Any) -> None: ...
        def __iter__(self) -> Iterator[K]:
            """The keys (plain copies), in entry order."""

        def __contains__(self, key: object) -> bool: ...
        @overload  # type: ignore[override]
        def get(self, key: Any) -> V | None: ...
        @overload
        def get(self, key: Any, default: D) -> V | D: ...
        def get(self, key: Any, default: Any = None) -> Any:
            """The value for ``key``, or ``default``."""

        def keys(self) -> list[K]:
            """The keys (plain copies), in entry order."""

        def values(self) -> list[V]:
            """The values (views for struct/container/string values)."""

        def items(self) -> list[tuple[K, V]]:
            """``(key, value)`` pairs."""

        def clear(self) -> None:
            """Remove every entry."""

        def _take(self, key: Any) -> tuple[bool, Any]: ...
        def _update_from(self, other: Any) -> None: ...

    def setdefault(self, key: Any, default: Any = None) -> V:
        """The value for ``key``, inserting ``default`` first if absent."""
        if key not in self:
            self[key] = default
        return self[key]

    @overload
    def pop(self, key: Any) -> V: ...
    @overload
    def pop(self, key: Any, default: D) -> V | D: ...
    def pop(self, key: Any, default: Any = _MISSING) -> Any:
        """Remove ``key`` and return its value (a plain copy)."""
        found, value = self._take(key)
        if found:
            return value
        if default is _MISSING:
            raise KeyError(key)
        return default

    def update(self, other: Any = (), **kwargs: Any) -> None:
        """Set every key/value of a mapping (or pairs), then of keywords; all
        converted first, so a bad pair changes nothing."""
        if kwargs:
            if issubclass(type(other), dict):
                # A dict subclass is read through the base storage, as without
                # keywords (snapshot_pairs, native/binding/kind.c): never
                # through an ``items`` it may override.
                pairs = list(dict.items(other))
            else:
                pairs = list(other.items() if hasattr(other, "items") else other)
            other = pairs + list(kwargs.items())
        self._update_from(other)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Map):
            other = dict(other.to_python())
        if isinstance(other, dict):
            mine = self.to_python()
            if len(mine) != len(other):
                return False
            for key, value in other.items():
                found = [v for k, v in mine.items() if _same(k, key)]
                if len(found) != 1 or not _same(found[0], value):
                    return False
            return True
        return NotImplemented


def _entry_layout(elements: tuple[PropertyKind, ...]) -> tuple[int, int, int]:
    """(entry size, value offset, entry alignment) of a set (one element)
    or map entry, as native/src/types.c lays them out."""
    key_size, key_align = _size_align(elements[0])
    if len(elements) == 1:
        return align_up(key_size, key_align), 0, key_align
    value_size, value_align = _size_align(elements[1])
    offset = align_up(key_size, value_align)
    align = max(key_align, value_align)
    return align_up(offset + value_size, align), offset, align


class SetKind(_ContainerKind):
    """Kind of ``zs.Set[T]``."""

    __slots__ = ()
    member_type = "zs_hash"
    kind_name = "set"

    def _layout(self) -> tuple[int, int, int, int]:
        """A zs_hash of entries laid out as native/src/types.c does."""
        entry, value_offset, _ = _entry_layout(self.elements)
        return *size_align(self.member_type), entry, value_offset

    def check_contents(self, value: Any) -> None:
        """An iterable of valid elements."""
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise TypeError(f"{self.describe()} needs an iterable, not {type(value).__name__}")
        for item in value:
            self.elements[0].check("element", item)


class MapKind(SetKind):
    """Kind of ``zs.Map[K, V]``."""

    __slots__ = ()
    kind_name = "map"

    def check_contents(self, value: Any) -> None:
        """A mapping (or pairs) of valid keys and values."""
        items = value.items() if hasattr(value, "items") else value
        if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
            raise TypeError(f"{self.describe()} needs a mapping, not {type(value).__name__}")
        for key, item in items:
            self.elements[0].check("key", key)
            self.elements[1].check("value", item)


# ---------------------------------------------------------------------------
# Optional
# ---------------------------------------------------------------------------


class Optional(_core.OptionalBase, ValueConjugate, _Container, TypeParameters[T]):
    """A native optional (``TOptional``): a value or nothing.

    >>> import zsharp_py as zs
    >>> with zs.Runtime():
    ...     maybe = zs.Optional[zs.Float64]()
    ...     empty = (maybe.is_set, maybe.get(), maybe == None)
    ...     maybe.set(2.5)
    ...     (empty, maybe.value, maybe == 2.5)
    ((False, None, True), 2.5, True)
    """

    __slots__ = ()
    _zs_kind_code = _core.KIND_OPTIONAL
    _zs_native_kind = _core.TYPE_OPTIONAL

    @classmethod
    def _kind_class(cls) -> type[_ContainerKind]:
        return OptionalKind

    if TYPE_CHECKING:

        @property
        def is_set(self) -> bool:
            """Whether a value is present."""

        @overload  # type: ignore[override]
        def get(self) -> T | None: ...
        @overload
        def get(self, default: D) -> T | D: ...
        def get(self, default: Any = None) -> Any:
            """The value (a view for structs and containers), or ``default``."""

        def set(self, value: Any) -> None:
            """Store a value (replacing any)."""

        def __set__(self, instance: object, value: Any) -> None: ...

        def reset(self) -> None:
            """Remove the value."""

    def __iter__(self) -> Iterator[T]:
        """The value, if set (zero or one items)."""
        if self.is_set:
            yield cast("T", self.get())

    @property
    def value(self) -> T:
        """The value; ``ValueError`` when unset."""
        if not self.is_set:
            raise ValueError(f"{type(self).__name__} is not set")
        return cast("T", self.get())

    def __eq__(self, other: object) -> bool:
        mine = self.to_python()
        if isinstance(other, Optional):
            return bool(mine == other.to_python())
        return bool(mine == _plain(other))


class OptionalKind(_ContainerKind):
    """Kind of ``zs.Optional[T]``: the value, then a flag byte."""

    __slots__ = ()
    kind_name = "optional"

    @property
    def member_type(self) -> Layout:
        """``struct {T value; uint8_t set;}``."""
        return Layout(
            self.describe(), [("value", self.elements[0].member_type), ("set", "uint8_t")]
        )

    def _layout(self) -> tuple[int, int, int, int]:
        """The value, then the flag byte."""
        c_struct = self.member_type
        return c_struct.size, c_struct.align, 0, c_struct.offsets["set"]

    def check_contents(self, value: Any) -> None:
        """None, or a valid value."""
        if value is not None:
            self.elements[0].check("value", value)


def forget_specialisations(mentions: Callable[[Any], bool]) -> None:
    """Drop the cached specialisations (``Array[...]``, ``Map[...]``...)
    that mention a type ``mentions`` names (``forget_cached``,
    zsharp_py/_base/generics.py)."""
    forget_cached(_Generic, mentions)
