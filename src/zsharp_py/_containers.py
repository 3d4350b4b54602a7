"""Native containers: ``zs.Array[T]``, ``zs.Set[T]``, ``zs.Map[K, V]`` and
``zs.Optional[T]``, for element types of every kind (scalars, object and
weak references, structs, strings, names, nested containers).

Elements live in native memory and the collector traces the references in
them. A container is black when created from Python
(``zs.Array[zs.Int32]([1, 2])``) or cloned, and a red view when read from a
property or element. Element views (a struct inside an array, say) expire
when the container changes structure (insert, remove, clear, growth, a
whole new value assigned), because the storage may move.
"""
from __future__ import annotations

import sys
from itertools import chain
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Iterator, TypeVar, cast, overload

from typing_extensions import Self

from ._hints import plural
from ._native import api_address, check, declare_struct, ffi, layout_address, layout_ffi, lib
from ._types import PropertyKind, ScalarKind
from ._typing import TypeParameters
from ._values import ValueConjugate, invalidate_children, make_black, make_view

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["Array", "Set", "Map", "Optional", "ArraySpec", "SetSpec", "MapSpec", "OptionalSpec"]

_ARRAY_POINTER = ffi.typeof("zs_array *")
_HASH_POINTER = ffi.typeof("zs_hash *")
_MISSING = object()
_chain = chain.from_iterable
_ITER_CHUNK = 256  # scalars copied out per native read while iterating

# zs_type_kind values
_ARRAY, _SET, _MAP, _OPTIONAL = 6, 7, 8, 9

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
    (cached), whose element spec resolves on first use so forward references
    (``zs.Array["Actor"]``) work."""

    # No instance __dict__ for the containers: a mistyped attribute
    # (``numbers.apend = 2``) raises instead of being stored in Python.
    __slots__ = ()
    _zs_args: ClassVar[tuple[Any, ...]] = ()
    _zs_scope: ClassVar[Any] = None
    _zs_specs: ClassVar[tuple[PropertyKind, ...] | None] = None
    _zs_arity: ClassVar[int] = 1
    _zs_cache: ClassVar[dict[tuple[Any, ...], type]]

    def __class_getitem__(cls, args: Any) -> Any:
        if cls._zs_args:
            raise TypeError(f"{cls.__name__} is already specialised")
        args = args if isinstance(args, tuple) else (args,)
        if len(args) != cls._zs_arity:
            raise TypeError(f"{cls.__name__}[...] takes "
                            f"{plural(cls._zs_arity, 'type argument')}")
        cache = cls.__dict__.get("_zs_cache")
        if cache is None:
            cache = {}
            type.__setattr__(cls, "_zs_cache", cache)
        frame = sys._getframe(1)
        # String arguments are forward references: the same text names
        # different classes in different modules, so the module is part of
        # the key. Only classes are kept from a function's locals (keeping
        # every local alive for ever would leak).
        module = frame.f_globals.get("__name__") if any(isinstance(a, str) for a in args) else None
        cache_key = (args, module)
        try:
            found = cache.get(cache_key)
        except TypeError:
            found = None
        if found is not None:
            return found
        scope_locals = ({k: v for k, v in frame.f_locals.items() if isinstance(v, type)}
                        if frame.f_locals is not frame.f_globals else {})
        scope = (frame.f_globals, scope_locals)
        shown = ", ".join(a if isinstance(a, str) else getattr(a, "__name__", repr(a)) for a in args)
        special = type(f"{cls.__name__}[{shown}]", (cls,), {
            "__slots__": (), "_zs_args": args, "_zs_scope": scope, "_zs_specs": None,
            "__module__": "zsharp_py"})
        try:
            cache[cache_key] = special
        except TypeError:
            pass
        return special

    @classmethod
    def _element_specs(cls) -> tuple[PropertyKind, ...]:
        specs = cls.__dict__.get("_zs_specs")
        if specs is None:
            if not cls._zs_args:
                raise TypeError(f"use {cls.__name__}[T]: a container needs its element type")
            from ._object import spec_of

            holder = type("_Scope", (), {"_zs_scope": cls._zs_scope})
            specs = tuple(spec_of(holder, arg, f"{cls.__name__} element") for arg in cls._zs_args)
            _check_element(cls, specs[0])  # map values may be anything
            type.__setattr__(cls, "_zs_specs", specs)
        return specs


def _check_element(cls: type, spec: PropertyKind) -> None:
    from ._object import ObjectRefKind

    if isinstance(spec, ObjectRefKind) and cls.__name__.startswith(("Set", "Map")):
        return  # object keys: hashable by handle
    if cls.__name__.startswith(("Set", "Map")) and spec.key[0] in ("array", "set", "map"):
        raise TypeError(f"{cls.__name__}: containers cannot be set elements or map keys")
    if cls.__name__.startswith(("Set", "Map")) and not getattr(spec, "hashable", True):
        raise TypeError(f"{cls.__name__}: {spec.describe()} values cannot be set elements or "
                        "map keys (they are not hashable)")


class _Container(ValueConjugate, _Generic):
    """Behaviour shared by the container conjugates."""

    __slots__ = ()
    _zs_kind: ClassVar[int] = 0
    if TYPE_CHECKING:
        _spec: Any  # the concrete _ContainerSpec subclass of the container

    @classmethod
    def _zs_value_spec(cls, owner: type) -> PropertyKind:
        return cls._spec_class()(cls)

    @classmethod
    def _spec_class(cls) -> type[_ContainerSpec]:
        raise NotImplementedError

    def __new__(cls, *args: Any) -> Self:
        from ._runtime import current_runtime

        cls._element_specs()
        if len(args) > 1:
            raise TypeError(f"{cls.__name__}() takes at most one argument")
        spec = cls._spec_class()(cls)
        value = current_runtime()._new_value(spec)
        if args:
            try:
                with value._rt._lock:
                    spec.fill(value._rt, 0, value._address(), args[0])
            except BaseException:
                value.dispose()
                raise
        made: Self = value
        return made

    def __init__(self, *args: Any) -> None:
        """Construction happens in ``__new__``."""

    def _structure_changes(self) -> None:
        """About to change structure: element views expire first (under the
        GIL, before any memory can move)."""
        if self._v:
            invalidate_children(self)

    def to_python(self) -> Any:
        """A plain Python copy (list, set, dict...), nested values converted."""
        with self._rt._lock:
            return self._spec.to_python(self._rt, self._address())

    def __repr__(self) -> str:
        if self.is_expired:
            return self._expired_repr()
        colour = "black" if self.is_black else "red"
        return f"<{type(self).__name__} ({colour}) {self.to_python()!r}>"

    __hash__ = None  # type: ignore[assignment]  # mutable


class _ContainerSpec(PropertyKind):
    """Spec of a container type (shared plumbing)."""

    __slots__ = ("cls", "_elements", "_entry_size")

    def __init__(self, cls: type[_Container]) -> None:
        self.cls = cls
        self._elements: tuple[PropertyKind, ...] | None = None  # resolved on first use
        self._entry_size = 0  # computed on first use (every element read needs it)

    @property
    def elements(self) -> tuple[PropertyKind, ...]:
        """The element spec(s)."""
        elements = self._elements
        if elements is None:
            elements = self._elements = self.cls._element_specs()
        return elements

    @property
    def entry_size(self) -> int:
        """Bytes per entry, as the C side lays them out (cached)."""
        size = self._entry_size
        if not size:
            size = self._entry_size = self._compute_entry_size()
        return size

    def _compute_entry_size(self) -> int:
        raise NotImplementedError

    @property
    def key(self) -> Any:
        """Structural identity: kind and element keys."""
        return (self.kind_name,) + tuple(spec.key for spec in self.elements)

    kind_name = "container"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ContainerSpec) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def describe(self) -> str:
        """``Array[Int32]`` and so on."""
        return self.cls.__name__


    def native(self, runtime: Runtime) -> Any:
        """Register the container type (element types first)."""
        natives = [runtime._native_type(spec) for spec in self.elements]
        out = ffi.new("zs_type **")
        value = natives[1] if len(natives) > 1 else ffi.NULL
        check(lib.zs_type_container(runtime._ptr, self.cls._zs_kind, natives[0], value, out),
              f"registering {self.describe()}", runtime)
        return out[0]

    def read(self, runtime: Runtime, parent: Any, key: Any, owner: int, address: int) -> Any:
        """A red view cached in ``parent`` (a plain copy when there is none)."""
        if parent is None:
            return self.to_python(runtime, address)
        return make_view(self.cls, runtime, self, self.pointer(address), parent, key, owner)

    def pointer(self, address: int) -> Any:
        """The conjugate's native pointer for a value at ``address``."""
        raise NotImplementedError

    def new_black(self, runtime: Runtime, pointer: Any, handle: int) -> Any:
        """Wrap a black container block."""
        return make_black(self.cls, runtime, self, self.pointer(api_address(pointer)), handle)

    def fill(self, runtime: Runtime, owner: int, address: int, value: Any) -> None:
        """Add Python contents to an empty container at ``address``."""
        raise NotImplementedError

    def write(self, runtime: Runtime, owner: int, address: int, value: Any) -> None:
        """Replace the contents: a native copy of a container conjugate, or
        built from Python contents in a temporary first (all or nothing)."""
        native = runtime._native_type(self)
        if isinstance(value, self.cls) and value._rt is runtime:
            source = value._address()
        else:
            temporary = runtime._new_value(self)
            try:
                self.fill(runtime, 0, temporary._address(), value)
                check(lib.zs_value_assign(runtime._ptr, owner, native, ffi.cast("void *", address),
                                          ffi.cast("void *", temporary._address())),
              "assign", runtime)
            finally:
                temporary.dispose()
            return
        check(lib.zs_value_assign(runtime._ptr, owner, native, ffi.cast("void *", address),
                                  ffi.cast("void *", source)), "assign", runtime)

    def check(self, what: str, value: Any) -> None:
        """A container of this type or Python contents of the right shape."""
        if isinstance(value, self.cls):
            value._live()
            return
        try:
            self.check_contents(value)
        except (TypeError, ValueError, OverflowError) as error:
            raise type(error)(f"{what}: {error}") from None

    def check_contents(self, value: Any) -> None:
        """Validate Python contents without storing them."""
        raise NotImplementedError

    def address_of(self, pointer: Any) -> int:
        """Address of the container header."""
        return api_address(pointer)


# ---------------------------------------------------------------------------
# Element helpers
# ---------------------------------------------------------------------------

class _Temporary:
    """A zeroed native buffer holding one element value built from Python,
    destroyed (its strings and containers freed) on exit."""

    __slots__ = ("runtime", "spec", "buffer", "address")

    def __init__(self, runtime: Runtime, spec: PropertyKind, value: Any) -> None:
        self.runtime, self.spec = runtime, spec
        size = layout_ffi.sizeof(spec.c_type) if spec.c_type else 8
        self.buffer = ffi.new("char[]", max(size, 1) + 16)
        self.address = (api_address(self.buffer) + 15) & ~15  # 16-byte aligned
        spec.initialize(runtime, 0, self.address)
        spec.write(runtime, 0, self.address, value)

    def __enter__(self) -> int:
        return self.address

    def __exit__(self, *exc: object) -> None:
        check(lib.zs_value_clear(self.runtime._ptr, 0, self.runtime._native_type(self.spec),
                                 ffi.cast("void *", self.address)), "temporary", self.runtime)


def _index(length: int, index: Any) -> int:
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"indices must be integers, not {type(index).__name__}")
    if index < 0:
        index += length
    if not 0 <= index < length:
        raise IndexError("index out of range")
    position: int = index
    return position


# ---------------------------------------------------------------------------
# Array
# ---------------------------------------------------------------------------

class Array(_Container, TypeParameters[T]):
    """A native dynamic array (``TArray``) with the ``list`` protocol.

    >>> import zsharp_py as zs
    >>> with zs.Runtime():
    ...     numbers = zs.Array[zs.Int32]([3, 1, 2])
    ...     numbers.append(7); numbers.insert(0, -1)
    ...     (numbers == [-1, 3, 1, 2, 7], numbers[1:3], numbers.pop(), len(numbers))
    (True, [3, 1], 7, 4)
    """

    __slots__ = ()
    _zs_kind = _ARRAY

    @classmethod
    def _spec_class(cls) -> type[_ContainerSpec]:
        return ArraySpec

    def __len__(self) -> int:
        count: int = self._live().count
        return count

    def _element_address(self, index: int) -> int:
        pointer = self._live()
        return api_address(pointer.data) + index * int(self._spec.entry_size)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        with self._rt._lock:
            pointer = self._live()
            position = _index(pointer.count, index)
            element = self._spec.elements[0]
            if type(element) is ScalarKind:  # no view to cache: index the C array directly
                return element._cast(element._pointer, pointer.data)[position]
            cache = self._v
            if cache is not None and position in cache:
                return cache[position]
            return element.read(self._rt, self, position, self._owner, self._element_address(position))

    @overload
    def __setitem__(self, index: int, value: Any) -> None: ...
    @overload
    def __setitem__(self, index: slice, value: Iterable[Any]) -> None: ...
    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(index, slice):
            items = list(value)
            with self._rt._lock:
                positions = range(*index.indices(len(self)))
                if index.step not in (None, 1) and len(items) != len(positions):
                    raise ValueError(f"attempt to assign sequence of size {len(items)} to extended "
                                     f"slice of size {len(positions)}")
                if index.step in (None, 1):
                    start = positions.start if positions else min(max(index.indices(len(self))[0], 0), len(self))
                    self._replace(start, len(positions), items)
                    return
            element = self._spec.elements[0]
            for item in items:
                element.check("element", item)
            for position, item in zip(positions, _detached(items)):
                self[position] = item
            return
        with self._rt._lock:
            position = _index(len(self), index)
            element = self._spec.elements[0]
            element.check("element", value)
            cache = self._v
            if cache is not None and position in cache:
                invalidate_children(cache[position])
            element.write(self._rt, self._owner, self._element_address(position), value)

    def __delitem__(self, index: int | slice) -> None:
        with self._rt._lock:
            if isinstance(index, slice):
                positions = sorted(range(*index.indices(len(self))), reverse=True)
                self._structure_changes()
                for position in positions:
                    self._remove_at(position, 1)
                return
            self._structure_changes()
            self._remove_at(_index(len(self), index), 1)

    def _remove_at(self, position: int, count: int) -> None:
        runtime = self._rt
        check(lib.zs_array_remove(runtime._live_ptr(), self._owner, runtime._native_type(self._spec),
                                  self._live(), position, count), "remove", runtime)

    def _insert_values(self, position: int, items: list[Any]) -> None:
        """Insert zeroed elements, then write each; on any failure remove
        them again (the array is left as it was)."""
        runtime = self._rt
        element = self._spec.elements[0]
        for item in items:
            element.check("element", item)
        items = _detached(items)
        self._structure_changes()
        check(lib.zs_array_insert(runtime._live_ptr(), self._owner, runtime._native_type(self._spec),
                                  self._live(), position, ffi.NULL, len(items)), "insert", runtime)
        try:
            for offset, item in enumerate(items):
                address = self._element_address(position + offset)
                element.initialize(runtime, self._owner, address)
                element.write(runtime, self._owner, address, item)
        except BaseException:
            self._remove_at(position, len(items))
            raise

    def _replace(self, start: int, count: int, items: list[Any]) -> None:
        element = self._spec.elements[0]
        for item in items:
            element.check("element", item)
        items = _detached(items)
        self._structure_changes()
        if count:
            self._remove_at(start, count)
        if items:
            self._insert_values(start, items)

    def append(self, value: Any) -> None:
        """Add one element at the end."""
        with self._rt._lock:
            self._insert_values(len(self), [value])

    def extend(self, values: Iterable[Any]) -> None:
        """Add every element of an iterable at the end."""
        items = list(values)
        if items:
            with self._rt._lock:
                self._insert_values(len(self), items)

    def insert(self, index: int, value: Any) -> None:
        """Insert before ``index`` (clamped like ``list.insert``)."""
        with self._rt._lock:
            length = len(self)
            if index < 0:
                index = max(length + index, 0)
            self._insert_values(min(index, length), [value])

    def pop(self, index: int = -1) -> T:
        """Remove and return an element (a plain copy: the slot goes away)."""
        with self._rt._lock:
            position = _index(len(self), index)
            element = self._spec.elements[0]
            value: T = element.to_python(self._rt, self._element_address(position))
            self._structure_changes()
            self._remove_at(position, 1)
            return value

    def remove(self, value: Any) -> None:
        """Remove the first element equal to ``value`` (ValueError if none)."""
        with self._rt._lock:
            del self[self.index(value)]

    def clear(self) -> None:
        """Remove every element."""
        with self._rt._lock:
            self._structure_changes()
            self._remove_at(0, len(self))

    def index(self, value: Any) -> int:
        """Position of the first element equal to ``value``."""
        for position, item in enumerate(self.to_python()):
            if item == value or _same(item, value):
                return position
        raise ValueError(f"{value!r} is not in the array")

    def count(self, value: Any) -> int:
        """How many elements equal ``value``."""
        return sum(1 for item in self.to_python() if item == value or _same(item, value))

    def __contains__(self, value: object) -> bool:
        return any(item == value or _same(item, value) for item in self.to_python())

    def __iter__(self) -> Iterator[T]:
        element = self._spec.elements[0]
        pointer_type = getattr(element, "_pointer", None)
        if pointer_type is None:  # views, strings, references: one element at a time
            return self._iter_elements()
        return _chain(self._scalar_chunks(pointer_type))

    def _iter_elements(self) -> Iterator[T]:
        for position in range(len(self)):
            if position >= len(self):
                return
            yield self[position]

    def _scalar_chunks(self, pointer_type: Any) -> Iterator[list[Any]]:
        """Scalars in chunks (lists, chained by ``__iter__``): each chunk is copied out by one ``ffi.unpack``
        under the lock (no other thread is inside a native call that could
        move the storage), so the loop body never runs while native memory
        is being read. Like ``dict`` iteration, a change of size or storage
        between chunks raises ``RuntimeError``, and expiry raises
        ``ExpiredConjugateError``; values written meanwhile are seen from
        the next chunk on."""
        lock = self._rt._lock
        unpack, cast = ffi.unpack, ffi.cast
        position = 0
        with lock:
            pointer = self._live()
            count, data = pointer.count, pointer.data
        while position < count:
            with lock:
                pointer = self._live()
                if pointer.count != count or pointer.data != data:
                    raise RuntimeError(f"{type(self).__name__} changed size during iteration")
                taken = min(count - position, _ITER_CHUNK)
                chunk = unpack(cast(pointer_type, data) + position, taken)
            position += taken
            yield chunk

    def __reversed__(self) -> Iterator[T]:
        for position in range(len(self) - 1, -1, -1):
            yield self[position]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Array):
            return bool(self.to_python() == other.to_python())
        if isinstance(other, (list, tuple)):
            mine = self.to_python()
            return len(mine) == len(other) and all(_same(a, b) for a, b in zip(mine, other))
        return NotImplemented


def _detached(items: list[Any]) -> list[Any]:
    """Red views among ``items`` as plain Python values: a structural change
    expires views into the container being changed, and one of them may be
    the very value being stored (``a.append(a[0])``)."""
    return [item.to_python() if isinstance(item, ValueConjugate) and item._black == 0
            and hasattr(item, "to_python") else str(item)
            if isinstance(item, ValueConjugate) and item._black == 0 else item
            for item in items]


def _plain(value: Any) -> Any:
    """A Python value comparable with ``to_python`` output."""
    if isinstance(value, ValueConjugate) and hasattr(value, "to_python"):
        return value.to_python()
    if isinstance(value, ValueConjugate):
        return str(value)
    return value


def _same(item: Any, value: Any) -> bool:
    """Compare a plain element (``to_python`` output) with a user value:
    structs convert to dicts, which also match tuples of their members."""
    value = _plain(value)
    if isinstance(item, dict) and isinstance(value, (tuple, list)):
        return len(item) == len(value) and all(
            _same(a, b) for a, b in zip(item.values(), value))
    if isinstance(item, dict) and isinstance(value, dict):
        return item.keys() == value.keys() and all(_same(item[k], value[k]) for k in item)
    if isinstance(item, list) and isinstance(value, (tuple, list)):
        return len(item) == len(value) and all(_same(a, b) for a, b in zip(item, value))
    return bool(item == value)


class ArraySpec(_ContainerSpec):
    """Spec of ``zs.Array[T]``."""

    __slots__ = ()
    c_type = "zs_array"
    kind_name = "array"

    def _compute_entry_size(self) -> int:
        """Bytes per element (its size rounded to its alignment)."""
        element = self.elements[0]
        return int(layout_ffi.sizeof(element.c_type))

    def pointer(self, address: int) -> Any:
        """A ``zs_array *``."""
        return ffi.cast(_ARRAY_POINTER, address)

    def check_contents(self, value: Any) -> None:
        """Any iterable of valid elements."""
        if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
            raise TypeError(f"{self.describe()} needs an iterable of elements, "
                            f"not {type(value).__name__}")
        element = self.elements[0]
        for item in value:
            element.check("element", item)

    def fill(self, runtime: Runtime, owner: int, address: int, value: Any) -> None:
        """Append Python contents."""
        if isinstance(value, Array):
            value = value.to_python()
        items = list(value) if not isinstance(value, (str, bytes, dict)) else None
        if items is None:
            raise TypeError(f"{self.describe()} needs an iterable of elements, not {type(value).__name__}")
        element = self.elements[0]
        for item in items:
            element.check("element", item)
        array = ffi.cast(_ARRAY_POINTER, address)
        check(lib.zs_array_insert(runtime._ptr, owner, runtime._native_type(self), array,
                                  array.count, ffi.NULL, len(items)), "insert", runtime)
        base = api_address(array.data) if items else 0
        for position, item in enumerate(items):
            element.initialize(runtime, owner, base + position * self.entry_size)
            element.write(runtime, owner, base + position * self.entry_size, item)

    def to_python(self, runtime: Runtime, address: int) -> list[Any]:
        """A list of plain element values."""
        array = ffi.cast(_ARRAY_POINTER, address)
        count = array.count
        if count == 0:
            return []
        element = self.elements[0]
        pointer_type = getattr(element, "_pointer", None)
        if pointer_type is not None:  # scalars: one native unpack
            values: list[Any] = ffi.unpack(ffi.cast(pointer_type, array.data), count)
            return values
        base, size = api_address(array.data), self.entry_size
        return [element.to_python(runtime, base + i * size) for i in range(count)]


# ---------------------------------------------------------------------------
# Set and Map
# ---------------------------------------------------------------------------

class _HashContainer(_Container):
    __slots__ = ()

    def __len__(self) -> int:
        count: int = self._live().entries.count
        return count

    def _entry_address(self, index: int) -> int:
        return api_address(self._live().entries.data) + index * int(self._spec.entry_size)

    def _find(self, key: Any) -> int:
        """Entry index of ``key``, or -1."""
        runtime = self._rt
        spec = self._spec.elements[0]
        try:
            spec.check("key", key)
        except (TypeError, ValueError, OverflowError):
            return -1
        found = ffi.new("int64_t *")
        with _Temporary(runtime, spec, key) as address:
            check(lib.zs_hash_find(runtime._live_ptr(), runtime._native_type(self._spec), self._live(),
                                   ffi.cast("void *", address), found), "find", runtime)
        return int(found[0])

    def _add(self, key: Any) -> tuple[int, bool]:
        runtime = self._rt
        spec = self._spec.elements[0]
        spec.check("key", key)
        (key,) = _detached([key])
        index, added = ffi.new("uint32_t *"), ffi.new("int *")
        with _Temporary(runtime, spec, key) as address:
            if self._find(key) < 0:
                self._structure_changes()
            check(lib.zs_hash_add(runtime._live_ptr(), self._owner, runtime._native_type(self._spec),
                                  self._live(), ffi.cast("void *", address), index, added),
                  "add", runtime)
        return int(index[0]), bool(added[0])

    def _discard(self, key: Any) -> bool:
        runtime = self._rt
        if self._find(key) < 0:
            return False
        spec = self._spec.elements[0]
        removed = ffi.new("int *")
        self._structure_changes()
        with _Temporary(runtime, spec, key) as address:
            check(lib.zs_hash_remove(runtime._live_ptr(), self._owner, runtime._native_type(self._spec),
                                     self._live(), ffi.cast("void *", address), removed),
                  "remove", runtime)
        return bool(removed[0])

    def _key_at(self, index: int) -> Any:
        return self._spec.elements[0].to_python(self._rt, self._entry_address(index))

    def clear(self) -> None:
        """Remove every entry."""
        runtime = self._rt
        with runtime._lock:
            self._structure_changes()
            check(lib.zs_value_clear(runtime._live_ptr(), self._owner, runtime._native_type(self._spec),
                                     self._live()), "clear", runtime)

    def __contains__(self, key: object) -> bool:
        with self._rt._lock:
            return self._find(key) >= 0

    def __iter__(self) -> Iterator[Any]:
        with self._rt._lock:
            keys = [self._key_at(i) for i in range(len(self))]
        return iter(keys)


class Set(_HashContainer, TypeParameters[T]):
    """A native hash set (``TSet``) with the ``set`` protocol.

    >>> import zsharp_py as zs
    >>> with zs.Runtime():
    ...     tags = zs.Set[zs.Name](["Enemy", "boss"])
    ...     tags.add("ENEMY")                 # names compare case-insensitively
    ...     (len(tags), "Boss" in tags, tags == {"enemy", "boss"})
    (2, True, True)
    """

    __slots__ = ()
    _zs_kind = _SET

    @classmethod
    def _spec_class(cls) -> type[_ContainerSpec]:
        return SetSpec

    def add(self, value: Any) -> None:
        """Add an element (no effect if an equal one is present)."""
        with self._rt._lock:
            self._add(value)

    def discard(self, value: Any) -> None:
        """Remove an element if present."""
        with self._rt._lock:
            self._discard(value)

    def remove(self, value: Any) -> None:
        """Remove an element (KeyError if absent)."""
        with self._rt._lock:
            if not self._discard(value):
                raise KeyError(value)

    def pop(self) -> T:
        """Remove and return an arbitrary element (a plain copy)."""
        with self._rt._lock:
            if len(self) == 0:
                raise KeyError("pop from an empty set")
            value: T = self._key_at(len(self) - 1)
            self._discard(value)
            return value

    def update(self, values: Iterable[Any]) -> None:
        """Add every element of an iterable (all checked first: a bad one
        leaves the set unchanged)."""
        items = _detached(list(values))
        spec = self._spec.elements[0]
        for item in items:
            spec.check("element", item)
        with self._rt._lock:
            for item in items:
                self._add(item)

    if TYPE_CHECKING:
        def __iter__(self) -> Iterator[T]:
            """The elements (plain copies)."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Set, set, frozenset)):
            mine = list(self)
            theirs = list(other)
            return len(mine) == len(theirs) and all(
                any(a == _plain(b) for a in mine) for b in theirs)
        return NotImplemented


class Map(_HashContainer, TypeParameters[K, V]):
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
    _zs_kind = _MAP
    _zs_arity = 2

    @classmethod
    def _spec_class(cls) -> type[_ContainerSpec]:
        return MapSpec

    def _value_at(self, index: int) -> Any:
        cache = self._v
        key = ("value", index)
        if cache is not None and key in cache:
            return cache[key]
        spec = self._spec.elements[1]
        address = self._entry_address(index) + self._spec.value_offset
        return spec.read(self._rt, self, key, self._owner, address)

    def __getitem__(self, key: Any) -> V:
        with self._rt._lock:
            index = self._find(key)
            if index < 0:
                raise KeyError(key)
            value: V = self._value_at(index)
            return value

    def __setitem__(self, key: Any, value: Any) -> None:
        runtime = self._rt
        with runtime._lock:
            spec = self._spec.elements[1]
            spec.check("value", value)
            (value,) = _detached([value])
            index, added = self._add(key)
            try:
                cache = self._v
                if cache is not None and ("value", index) in cache:
                    invalidate_children(cache[("value", index)])
                address = self._entry_address(index) + self._spec.value_offset
                if added:
                    spec.initialize(runtime, self._owner, address)
                spec.write(runtime, self._owner, address, value)
            except BaseException:
                if added:
                    self._discard(key)
                raise

    def __delitem__(self, key: Any) -> None:
        with self._rt._lock:
            if not self._discard(key):
                raise KeyError(key)

    @overload
    def get(self, key: Any) -> V | None: ...
    @overload
    def get(self, key: Any, default: D) -> V | D: ...
    def get(self, key: Any, default: Any = None) -> Any:
        """The value for ``key``, or ``default``."""
        with self._rt._lock:
            index = self._find(key)
            return self._value_at(index) if index >= 0 else default

    def setdefault(self, key: Any, default: Any = None) -> V:
        """The value for ``key``, inserting ``default`` first if absent."""
        with self._rt._lock:
            if self._find(key) < 0:
                self[key] = default
            return self[key]

    @overload
    def pop(self, key: Any) -> V: ...
    @overload
    def pop(self, key: Any, default: D) -> V | D: ...
    def pop(self, key: Any, default: Any = _MISSING) -> Any:
        """Remove ``key`` and return its value (a plain copy)."""
        with self._rt._lock:
            index = self._find(key)
            if index < 0:
                if default is _MISSING:
                    raise KeyError(key)
                return default
            spec = self._spec.elements[1]
            value = spec.to_python(self._rt, self._entry_address(index) + self._spec.value_offset)
            self._discard(key)
            return value

    def update(self, other: Any = (), **kwargs: Any) -> None:
        """Set every key/value of a mapping (or pairs), then of keywords."""
        items = list(other.items() if hasattr(other, "items") else other) + list(kwargs.items())
        key_spec, value_spec = self._spec.elements
        for key, value in items:  # all checked first: a bad pair changes nothing
            key_spec.check("key", key)
            value_spec.check("value", value)
        with self._rt._lock:
            for key, value in items:
                self[key] = value

    def keys(self) -> list[K]:
        """The keys (plain copies), in entry order."""
        return list(self)

    if TYPE_CHECKING:
        def __iter__(self) -> Iterator[K]:
            """The keys (plain copies), in entry order."""

    def values(self) -> list[V]:
        """The values (views for struct/container/string values)."""
        with self._rt._lock:
            return [self._value_at(i) for i in range(len(self))]

    def items(self) -> list[tuple[K, V]]:
        """``(key, value)`` pairs."""
        with self._rt._lock:
            return [(self._key_at(i), self._value_at(i)) for i in range(len(self))]

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


class SetSpec(_ContainerSpec):
    """Spec of ``zs.Set[T]``."""

    __slots__ = ()
    c_type = "zs_hash"
    kind_name = "set"

    def _compute_entry_size(self) -> int:
        """Bytes per entry (laid out as the C side does: key, then value at
        its alignment, the whole rounded to the larger alignment)."""
        return _entry_layout(self.elements)[0]

    def pointer(self, address: int) -> Any:
        """A ``zs_hash *``."""
        return ffi.cast(_HASH_POINTER, address)

    def check_contents(self, value: Any) -> None:
        """An iterable of valid elements."""
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise TypeError(f"{self.describe()} needs an iterable, not {type(value).__name__}")
        for item in value:
            self.elements[0].check("element", item)

    def fill(self, runtime: Runtime, owner: int, address: int, value: Any) -> None:
        """Add every element."""
        items = list(value)
        self.check_contents(items)
        target = make_black(self.cls, runtime, self, self.pointer(address), 0)
        target._owner = owner
        for item in items:
            target._add(item)

    def to_python(self, runtime: Runtime, address: int) -> Any:
        """A set (or a list when elements are unhashable in Python)."""
        hash_ = ffi.cast(_HASH_POINTER, address)
        size = self.entry_size
        base = api_address(hash_.entries.data) if hash_.entries.count else 0
        items = [self.elements[0].to_python(runtime, base + i * size)
                 for i in range(hash_.entries.count)]
        try:
            return set(items)
        except TypeError:
            return items


class MapSpec(SetSpec):
    """Spec of ``zs.Map[K, V]``."""

    __slots__ = ()
    kind_name = "map"

    @property
    def value_offset(self) -> int:
        """Offset of the value inside an entry."""
        return _entry_layout(self.elements)[1]

    def check_contents(self, value: Any) -> None:
        """A mapping (or pairs) of valid keys and values."""
        items = value.items() if hasattr(value, "items") else value
        if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
            raise TypeError(f"{self.describe()} needs a mapping, not {type(value).__name__}")
        for key, item in items:
            self.elements[0].check("key", key)
            self.elements[1].check("value", item)

    def fill(self, runtime: Runtime, owner: int, address: int, value: Any) -> None:
        """Set every key/value."""
        self.check_contents(value)
        items = _detached(list(value.items() if hasattr(value, "items") else value))
        target = make_black(self.cls, runtime, self, self.pointer(address), 0)
        target._owner = owner
        for key, item in items:
            target[key] = item

    def to_python(self, runtime: Runtime, address: int) -> Any:
        """A dict of plain keys and values."""
        hash_ = ffi.cast(_HASH_POINTER, address)
        size, offset = _entry_layout(self.elements)
        base = api_address(hash_.entries.data) if hash_.entries.count else 0
        result = {}
        for i in range(hash_.entries.count):
            key = self.elements[0].to_python(runtime, base + i * size)
            result[_hashable(key)] = self.elements[1].to_python(runtime, base + i * size + offset)
        return result


def _round_up(value: int, align: int) -> int:
    return (value + align - 1) // align * align


def _entry_layout(elements: tuple[PropertyKind, ...]) -> tuple[int, int]:
    """(entry size, value offset) of a set (one element) or map entry."""
    key_size = layout_ffi.sizeof(elements[0].c_type)
    key_align = layout_ffi.alignof(elements[0].c_type)
    if len(elements) == 1:
        return _round_up(key_size, key_align), 0
    value_size = layout_ffi.sizeof(elements[1].c_type)
    value_align = layout_ffi.alignof(elements[1].c_type)
    offset = _round_up(key_size, value_align)
    return _round_up(offset + value_size, max(key_align, value_align)), offset


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(value.values())
    return value


# ---------------------------------------------------------------------------
# Optional
# ---------------------------------------------------------------------------

class Optional(_Container, TypeParameters[T]):
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
    _zs_kind = _OPTIONAL

    @classmethod
    def _spec_class(cls) -> type[_ContainerSpec]:
        return OptionalSpec

    def _flag_address(self) -> int:
        return self._address() + int(self._spec.flag_offset)

    @property
    def is_set(self) -> bool:
        """Whether a value is present."""
        return bool(ffi.cast("uint8_t *", self._flag_address())[0])

    def __bool__(self) -> bool:
        return self.is_set

    @overload
    def get(self) -> T | None: ...
    @overload
    def get(self, default: D) -> T | D: ...
    def get(self, default: Any = None) -> Any:
        """The value (a view for structs and containers), or ``default``."""
        with self._rt._lock:
            if not self.is_set:
                return default
            cache = self._v
            if cache is not None and "value" in cache:
                return cache["value"]
            spec = self._spec.elements[0]
            return spec.read(self._rt, self, "value", self._owner, self._address())

    @property
    def value(self) -> T:
        """The value; ``ValueError`` when unset."""
        with self._rt._lock:
            if not self.is_set:
                raise ValueError(f"{type(self).__name__} is not set")
            return cast("T", self.get())

    def set(self, value: Any) -> None:
        """Store a value (replacing any)."""
        runtime = self._rt
        with runtime._lock:
            spec = self._spec.elements[0]
            spec.check("value", value)
            (value,) = _detached([value])
            self._structure_changes()
            native = runtime._native_type(self._spec)
            check(lib.zs_optional_set(runtime._live_ptr(), self._owner, native,
                                      ffi.cast("void *", self._address()), ffi.NULL), "set", runtime)
            try:
                spec.initialize(runtime, self._owner, self._address())
                spec.write(runtime, self._owner, self._address(), value)
            except BaseException:
                self.reset()
                raise

    def reset(self) -> None:
        """Remove the value."""
        runtime = self._rt
        with runtime._lock:
            self._structure_changes()
            check(lib.zs_value_clear(runtime._live_ptr(), self._owner, runtime._native_type(self._spec),
                                     ffi.cast("void *", self._address())), "reset", runtime)

    def __eq__(self, other: object) -> bool:
        mine = self.to_python()
        if isinstance(other, Optional):
            return bool(mine == other.to_python())
        return bool(mine == _plain(other))


class OptionalSpec(_ContainerSpec):
    """Spec of ``zs.Optional[T]``: the value, then a flag byte."""

    __slots__ = ()
    kind_name = "optional"

    @property
    def layout_pointer(self) -> Any:
        """The layout-FFI pointer type ``struct {T value; uint8_t set;} *``."""
        cached = _OPTIONAL_LAYOUTS.get(self.key)
        if cached is None:
            element = self.elements[0]
            cached = _OPTIONAL_LAYOUTS[self.key] = declare_struct(
                "Optional", [("value", element.c_type), ("set", "uint8_t")], header=False)
        return cached

    @property
    def c_type(self) -> str:  # type: ignore[override]
        return str(self.layout_pointer.item.cname)

    @property
    def flag_offset(self) -> int:
        """Offset of the flag byte."""
        return int(layout_ffi.offsetof(self.layout_pointer.item, "set"))

    def pointer(self, address: int) -> Any:
        """A layout pointer to the optional."""
        return layout_ffi.cast(self.layout_pointer, address)

    def address_of(self, pointer: Any) -> int:
        """Address of the optional."""
        return layout_address(pointer)

    def new_black(self, runtime: Runtime, pointer: Any, handle: int) -> Any:
        """Wrap a black optional block."""
        return make_black(self.cls, runtime, self, self.pointer(api_address(pointer)), handle)

    def check_contents(self, value: Any) -> None:
        """None, or a valid value."""
        if value is not None:
            self.elements[0].check("value", value)

    def fill(self, runtime: Runtime, owner: int, address: int, value: Any) -> None:
        """Set unless ``value`` is None."""
        if isinstance(value, Optional):
            value = value.to_python()
        if value is None:
            return
        check(lib.zs_optional_set(runtime._ptr, owner, runtime._native_type(self),
                                  ffi.cast("void *", address), ffi.NULL), "set", runtime)
        self.elements[0].initialize(runtime, owner, address)
        self.elements[0].write(runtime, owner, address, value)

    def to_python(self, runtime: Runtime, address: int) -> Any:
        """The plain value, or None."""
        if not ffi.cast("uint8_t *", address + self.flag_offset)[0]:
            return None
        return self.elements[0].to_python(runtime, address)


_OPTIONAL_LAYOUTS: dict[Any, Any] = {}
