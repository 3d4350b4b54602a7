"""Object wrappers: ``zs.SubclassOf[T]``, ``zs.SoftObjectPtr[T]``,
``zs.SoftClassPtr[T]``, ``zs.LazyObjectPtr[T]``, ``zs.ScriptInterface[T]``
and the ``zs.Interface`` base (``WeakObjectPtr`` and ``StrongObjectPtr``
are in ``object_pointers.py``). Only ``ScriptInterface`` holds a strong
reference the collector traces; docs/pointers-and-delegates.md, "Object
wrappers", gives each one's colour and lifetime.
"""

from __future__ import annotations

import builtins
import importlib
import re
import sys
import typing
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, overload

from typing_extensions import Self, TypeVar

from .. import _core
from .._base import context
from .._base.generics import TypeParameters, forget_cached
from .._base.layout import Layout, size_align
from .._model.kinds import PropertyKind, Scalar, ScalarKind, UInt32
from .._model.object import Object, ObjectMeta, ObjectRefKind, _evaluate, declaring_scope
from .._model.values import ImmutableValue, ValueConjugate
from .._runtime.runtime import Runtime, runtime_of

if TYPE_CHECKING:
    from .._model.struct import Struct

__all__ = [
    "Interface",
    "SubclassOf",
    "SoftObjectPtr",
    "SoftClassPtr",
    "LazyObjectPtr",
    "ScriptInterface",
    "object_path",
]

_NULL_ID = bytes(16)

# The target type parameter (for type checkers: see _typing). An unspecialised
# wrapper targets zs.Object at run time, hence the default.
T = TypeVar("T", bound=Object, default=Object)


# ---------------------------------------------------------------------------
# Interfaces
# ---------------------------------------------------------------------------


class _LazyIds:
    """The persistent ids of LazyObjectPtr in one runtime: id -> handle and
    handle -> id (``Runtime.feature_state``; forgotten when it closes)."""

    __slots__ = ("ids", "handles")

    def __init__(self) -> None:
        self.ids: dict[bytes, int] = {}
        self.handles: dict[int, bytes] = {}

    def close(self) -> None:
        """The runtime closed: no handle names an object any more."""
        self.ids.clear()
        self.handles.clear()


class _InterfaceIds:
    """The interface classes ScriptInterface values name in one runtime,
    numbered from 1 in order of first use (``Runtime.feature_state``)."""

    __slots__ = ("ids", "interfaces")

    def __init__(self) -> None:
        self.ids: dict[type, int] = {}
        self.interfaces: list[type] = []

    def close(self) -> None:
        """Nothing native to release: the ids are plain Python data."""


def _lazy(runtime: Runtime) -> _LazyIds:
    state: _LazyIds = runtime.feature_state(_LazyIds, _LazyIds)
    return state


def _interfaces_of(runtime: Runtime) -> _InterfaceIds:
    state: _InterfaceIds = runtime.feature_state(_InterfaceIds, _InterfaceIds)
    return state


class Interface:
    """Base of interfaces (``UInterface``): plain Python marker classes that
    object classes implement by inheritance.

    >>> import zsharp_py as zs
    >>> class IDamageable(zs.Interface):
    ...     __slots__ = ()
    ...     def take_damage(self, amount: int) -> None: ...
    >>> class Crate(zs.Object, IDamageable):
    ...     hits: zs.Int32
    ...     def take_damage(self, amount: int) -> None:
    ...         self.hits += amount
    >>> IDamageable.implemented_by(Crate)
    True

    Declare ``__slots__ = ()`` in an interface, or the conjugates of the
    classes implementing it get a ``__dict__`` (typos in attribute names
    would then pass silently). An interface holds no properties.
    """

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(cls, ObjectMeta):
            raise TypeError(
                f"{cls.__name__} is an interface: implement it in a zs.Object class and create that"
            )
        return super().__new__(cls)

    @classmethod
    def implemented_by(cls, value: Any) -> bool:
        """Whether an object (or a class) implements this interface."""
        if isinstance(value, type):
            return issubclass(value, cls)
        return isinstance(value, cls)


I = TypeVar("I", bound=Interface)  # noqa: E741 (ScriptInterface's type parameter)


# ---------------------------------------------------------------------------
# Wrapper[T]: specialisation with lazily resolved targets
# ---------------------------------------------------------------------------


class _Specialised:
    """``Wrapper[T]`` makes (and caches) one subclass per target ``T``; the
    target resolves on first use, so forward references (``"Actor"``) work."""

    __slots__ = ()
    _zs_arg: ClassVar[Any] = None
    _zs_scope: ClassVar[Any] = None
    _zs_cache: ClassVar[dict[Any, type]]
    _zs_bound: ClassVar[type] = Object  # targets must derive from this
    _zs_needs_target: ClassVar[bool] = False

    def __class_getitem__(cls, argument: Any) -> Any:
        if cls._zs_arg is not None:
            raise TypeError(f"{cls.__name__} is already specialised")
        if isinstance(argument, tuple):
            raise TypeError(f"{cls.__name__}[...] takes one type argument")
        cache = cls.__dict__.get("_zs_cache")
        if cache is None:
            cache = {}
            type.__setattr__(cls, "_zs_cache", cache)
        # A string argument resolves later in the caller's scope; of the
        # caller's locals only those the string names are kept.
        named = set(re.findall(r"[A-Za-z_]\w*", argument)) if isinstance(argument, str) else set()
        scope = declaring_scope(1, named)
        key = argument if not isinstance(argument, str) else (argument, scope[0].get("__name__"))
        found = cache.get(key)
        if found is not None:
            return found
        shown = (
            argument if isinstance(argument, str) else getattr(argument, "__name__", repr(argument))
        )
        special = type(
            f"{cls.__name__}[{shown}]",
            (cls,),
            {
                "__slots__": (),
                "_zs_arg": argument,
                "_zs_scope": scope,
                "_zs_resolved": None,
                "__module__": "zsharp_py",
                "__doc__": cls.__doc__,
            },
        )
        if not isinstance(argument, (str, typing.ForwardRef)):
            typing.cast("type[_Specialised]", special)._zs_target()  # checked at once
        cache[key] = special
        return special

    @classmethod
    def _zs_target(cls) -> type:
        """``T``: the class (or interface) this wrapper is constrained to."""
        resolved: type | None = cls.__dict__.get("_zs_resolved")
        if resolved is not None:
            return resolved
        argument = cls._zs_arg
        if argument is None:
            if cls._zs_needs_target:
                raise TypeError(f"use {cls.__name__}[T]: it needs the type it refers to")
            return cls._zs_bound
        holder = type("_Scope", (), {"_zs_scope": cls._zs_scope})
        result = _evaluate(holder, argument)
        if (
            not isinstance(result, type)
            or not issubclass(result, cls._zs_bound)
            or (cls._zs_bound is Interface and isinstance(result, ObjectMeta))
        ):
            raise TypeError(
                f"{cls.__name__}: the type argument must be a "
                f"{'zs.' + cls._zs_bound.__name__} subclass, got {result!r}"
            )
        type.__setattr__(cls, "_zs_resolved", result)
        return result


def _describe(cls: type) -> str:
    try:
        target = cls._zs_target()  # type: ignore[attr-defined]
    except TypeError:
        return str(cls.__name__)
    root = next(k for k in cls.__mro__ if "_zs_arg" not in k.__dict__)
    return f"{root.__name__}[{target.__name__}]"


class _PointerKind(PropertyKind):
    """What the pointer kinds share: the wrapper class ``cls`` they
    stand for, equality by that class, a hash by the native type's key and
    the ``Wrapper[T]`` description. Subclasses give ``key`` and the rest."""

    __slots__ = ("cls",)

    def __init__(self, cls: Any) -> None:
        self.cls = cls

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.cls is self.cls

    def __hash__(self) -> int:
        return hash(self.key)

    def is_zero(self, value: Any) -> bool:
        """``None``: a null pointer is zeroed memory."""
        return value is None

    def describe(self) -> str:
        """``Wrapper[T]``."""
        return _describe(self.cls)


# ---------------------------------------------------------------------------
# SubclassOf
# ---------------------------------------------------------------------------


class SubclassOf(ImmutableValue, _Specialised, TypeParameters[T]):
    """A class constrained to ``T`` or a subclass (``TSubclassOf<T>``).

    An immutable value: ``zs.SubclassOf[Actor](Hero)`` checks the class and
    holds it; classes that are not ``T`` or a subclass raise ``TypeError``.
    As a property (stored natively as the class id) it reads as the class
    itself, or None; it accepts a class, a ``SubclassOf`` or None.

    >>> import zsharp_py as zs
    >>> class Weapon(zs.Object): pass
    >>> class Sword(Weapon): pass
    >>> zs.SubclassOf[Weapon](Sword).get() is Sword
    True

    For type checkers, a ``SubclassOf[T]`` property of a ``zs.Object`` or
    ``zs.Struct`` reads as ``type[T] | None`` (what it is at run time: no
    ``.get()``, no ``.new()``) and takes a class, a ``SubclassOf`` or None;
    anywhere else (a variable, an attribute of a plain class) it is the
    wrapper.
    """

    __slots__ = ("_cls",)
    _cls: type[Object] | None

    if TYPE_CHECKING:
        # The descriptor protocol, for type checkers only: at run time the
        # property of an object or struct class is installed by the class
        # (SubclassOfKind reads the class id back as the class).
        @overload
        def __get__(self, instance: None, owner: Any) -> SubclassOf[T]: ...
        @overload
        def __get__(self, instance: Object | Struct, owner: Any) -> type[T] | None: ...
        @overload
        def __get__(self, instance: object, owner: Any) -> SubclassOf[T]: ...
        def __get__(self, instance: object, owner: Any) -> Any: ...

        # One signature, not overloads: the dataclass_transform of zs.Object
        # and zs.Struct types a keyword of the class call by it (mypy refuses
        # an overloaded __set__ there).
        def __set__(self, instance: object, value: type[T] | SubclassOf[T] | None) -> None: ...

    def __init__(self, cls: type[T] | SubclassOf[T] | None = None) -> None:
        object.__setattr__(self, "_cls", type(self)._convert(_describe(type(self)), cls))

    @classmethod
    def _convert(cls, what: str, value: Any) -> type[Object] | None:
        if value is None:
            return None
        if isinstance(value, SubclassOf):
            value = value._cls
            if value is None:
                return None
        target = cls._zs_target()
        if not isinstance(value, type) or not issubclass(value, target):
            shown = value.__name__ if isinstance(value, type) else type(value).__name__
            raise TypeError(f"{what} needs {target.__name__} or a subclass of it, not {shown}")
        return typing.cast("type[Object]", value)

    @classmethod
    def _zs_value_kind(cls, owner: type) -> PropertyKind:
        return SubclassOfKind(cls)

    def get(self) -> type[T] | None:
        """The class (None when empty)."""
        return typing.cast("type[T] | None", self._cls)

    def new(self, *args: Any, **kwargs: Any) -> T:
        """Create an object of the class (``Actor(name=..., outer=..., ...)``)."""
        if self._cls is None:
            raise TypeError("SubclassOf is empty: no class to create")
        return typing.cast("T", self._cls(*args, **kwargs))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __bool__(self) -> bool:
        return self._cls is not None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SubclassOf):
            return self._cls is other._cls
        if other is None or isinstance(other, type):
            return self._cls is other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._cls)

    def __repr__(self) -> str:
        shown = self._cls.__name__ if self._cls is not None else "None"
        return f"{_describe(type(self))}({shown})"


class SubclassOfKind(_PointerKind):
    """A ``SubclassOf[T]`` member or element: the class id + 1 (0: None)."""

    __slots__ = ()
    cls: type[SubclassOf]
    member_type = "uint32_t"
    bitwise = True

    @property
    def key(self) -> Any:
        """``("subclass", cls)``."""
        return ("subclass", self.cls)

    def check(self, what: str, value: Any) -> None:
        """A class deriving from ``T``, a SubclassOf, or None."""
        self.cls._convert(what, value)

    def make_kind(self) -> _core.Kind:
        """Four plain bytes: the native class id + 1 in the runtime."""
        wrapper, what = self.cls, self.describe()

        def encode(runtime: Runtime, value: Any) -> bytes:
            cls = wrapper._convert(what, value)
            if cls is None:
                stored = 0
            else:
                runtime._native_class_address(cls)  # registered here on first use
                stored = runtime._heap_class_id_of(cls) + 1
            return int(stored).to_bytes(4, sys.byteorder)

        def decode(runtime: Runtime, raw: bytes) -> Any:
            stored = int.from_bytes(raw, sys.byteorder)
            classes = runtime._classes_by_id
            return classes[stored - 1] if 0 < stored <= len(classes) else None

        return _core.Kind(
            _core.KIND_PLAIN,
            *size_align(self.member_type),
            _core.TYPE_PLAIN,
            what,
            flags=_core.KIND_BITWISE,
            encode=encode,
            decode=decode,
        )


# ---------------------------------------------------------------------------
# LazyObjectPtr
# ---------------------------------------------------------------------------


def _id_bytes(value: Any) -> bytes:
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, str):
        return uuid.UUID(value).bytes
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return bytes(value)
    raise TypeError(
        f"a persistent id is a uuid.UUID, its str or 16 bytes, not {type(value).__name__}"
    )


def _persistent_id(obj: Object) -> bytes:
    """The object's persistent id, assigned (a new uuid4) if it has none."""
    runtime = runtime_of(obj)
    with runtime._lock:
        lazy = _lazy(runtime)
        found = lazy.handles.get(obj._h)
        if found is not None:
            return found
        new = uuid.uuid4().bytes
        lazy.handles[obj._h] = new
        lazy.ids[new] = obj._h
        return new


def _lookup(runtime: Runtime, persistent: bytes) -> Object | None:
    """The live object holding a persistent id (dead entries are dropped)."""
    with runtime._lock:
        if runtime._closed:
            return None
        lazy = _lazy(runtime)
        handle = lazy.ids.get(persistent)
        if handle is None:
            return None
        obj: Object | None = runtime._conjugate_of(handle)
        if obj is None or lazy.handles.get(handle) != persistent:
            lazy.ids.pop(persistent, None)
            if lazy.handles.get(handle) == persistent:
                del lazy.handles[handle]
            return None
        return obj


class LazyObjectPtr(ImmutableValue, _Specialised, TypeParameters[T]):
    """A reference by persistent id (``TLazyObjectPtr<T>``): survives the
    object being destroyed and re-created with the same id.

    ``zs.LazyObjectPtr(obj)`` gives ``obj`` a persistent id (a new uuid) if
    it has none; ``zs.LazyObjectPtr.bind(new_obj, old_id)`` makes another
    object take the id over (the previous holder loses it), so pointers to
    the id resolve to it from then on. ``get()`` returns the live object
    holding the id (if it is a ``T``), else None. An immutable value object
    (like ``WeakObjectPtr``); it never keeps its object alive.

    >>> import zsharp_py as zs
    >>> class Door(zs.Object): pass
    >>> with zs.Runtime() as rt:
    ...     lazy = zs.LazyObjectPtr(Door(name="Front"))
    ...     _ = rt.collect_garbage()          # the door is destroyed
    ...     gone = lazy.get()
    ...     rebuilt = zs.LazyObjectPtr.bind(Door(name="Front"), lazy.id)
    ...     (gone, lazy.get().name, rebuilt == lazy)
    (None, 'Front', True)
    """

    __slots__ = ("_id", "_rt")
    _id: bytes
    _rt: Runtime | None

    def __init__(self, value: T | LazyObjectPtr[T] | uuid.UUID | str | bytes | None = None) -> None:
        persistent, runtime = type(self)._convert(_describe(type(self)), value)
        object.__setattr__(self, "_id", persistent)
        object.__setattr__(self, "_rt", runtime)

    @classmethod
    def _convert(cls, what: str, value: Any) -> tuple[bytes, Runtime | None]:
        if value is None:
            return _NULL_ID, None
        if isinstance(value, LazyObjectPtr):
            return value._id, value._rt
        if issubclass(type(value), Object):
            target = cls._zs_target()
            if not issubclass(type(value), target):
                raise TypeError(f"{what} needs a {target.__name__}, not {type(value).__name__}")
            return _persistent_id(value), value._rt
        return _id_bytes(value), None

    @classmethod
    def _make(cls, persistent: bytes, runtime: Runtime | None) -> Any:
        lazy = object.__new__(cls)
        object.__setattr__(lazy, "_id", persistent)
        object.__setattr__(lazy, "_rt", runtime)
        return lazy

    @classmethod
    def _zs_value_kind(cls, owner: type) -> PropertyKind:
        return LazyObjectKind(cls)

    @staticmethod
    def id_of(obj: Object) -> uuid.UUID | None:
        """The persistent id of ``obj``, or None if it has none."""
        runtime = runtime_of(obj)
        found = _lazy(runtime).handles.get(obj._h)
        return uuid.UUID(bytes=found) if found is not None else None

    @classmethod
    def bind(cls, obj: Object, persistent_id: Any) -> Self:
        """Give ``obj`` the persistent id (``uuid.UUID``, its str, or 16
        bytes), taking it over from any previous holder; ``obj`` loses the id
        it had. Returns a pointer to it."""
        if not isinstance(obj, Object):
            raise TypeError(f"bind needs a zs.Object, not {type(obj).__name__}")
        persistent = _id_bytes(persistent_id)
        if persistent == _NULL_ID:
            raise ValueError("the all-zero id is the null persistent id")
        runtime = runtime_of(obj)
        with runtime._lock:
            lazy = _lazy(runtime)
            previous_handle = lazy.ids.get(persistent)
            if previous_handle is not None:
                lazy.handles.pop(previous_handle, None)
            previous_id = lazy.handles.get(obj._h)
            if previous_id is not None:
                lazy.ids.pop(previous_id, None)
            lazy.ids[persistent] = obj._h
            lazy.handles[obj._h] = persistent
        made: Self = cls._make(persistent, runtime)
        return made

    @property
    def id(self) -> uuid.UUID | None:
        """The persistent id (None for a null pointer)."""
        return uuid.UUID(bytes=self._id) if self._id != _NULL_ID else None

    @property
    def is_null(self) -> bool:
        """Whether there is no id at all."""
        return self._id == _NULL_ID

    def get(self) -> T | None:
        """The live object holding the id, if it is a ``T``; else None.
        Resolves in the pointer's runtime (or the current one, for a
        pointer made from a bare id)."""
        if self._id == _NULL_ID:
            return None
        runtime = self._rt
        if runtime is None or runtime._closed:
            runtime = context.current_runtime()
        obj = _lookup(runtime, self._id)
        return typing.cast("T", obj) if isinstance(obj, type(self)._zs_target()) else None

    @property
    def is_valid(self) -> bool:
        """Whether ``get()`` would return an object now."""
        return self.get() is not None

    def __bool__(self) -> bool:
        """``is_valid``, as Unreal's pointer types convert to bool: ``if ptr:``
        holds only while it resolves to a live object."""
        return self.is_valid

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyObjectPtr):
            return self._id == other._id
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._id)

    def __repr__(self) -> str:
        return f"{_describe(type(self))}({str(self.id) if self._id != _NULL_ID else 'None'})"


_LAZY_LAYOUT = Layout("LazyId", [("low", "uint64_t"), ("high", "uint64_t")])


class LazyObjectKind(_PointerKind):
    """A ``LazyObjectPtr[T]`` member or element: 16 plain bytes (the id)."""

    __slots__ = ()
    cls: type[LazyObjectPtr]
    member_type = _LAZY_LAYOUT
    bitwise = True

    @property
    def key(self) -> Any:
        """``("lazy", cls)``."""
        return ("lazy", self.cls)

    def check(self, what: str, value: Any) -> None:
        """A LazyObjectPtr, an object of ``T``, an id or None."""
        if issubclass(type(value), Object):
            value._live_runtime()
            target = self.cls._zs_target()
            if not issubclass(type(value), target):
                raise TypeError(f"{what} needs a {target.__name__}, not {type(value).__name__}")
            return
        self.cls._convert(what, value)

    def make_kind(self) -> _core.Kind:
        """Sixteen plain bytes: the persistent id (an object gets one first)."""
        wrapper, what = self.cls, self.describe()

        def encode(runtime: Runtime, value: Any) -> bytes:
            persistent, _ = wrapper._convert(what, value)
            return persistent

        def decode(runtime: Runtime, raw: bytes) -> Any:
            return wrapper._make(raw, runtime)

        return _core.Kind(
            _core.KIND_PLAIN,
            _LAZY_LAYOUT.size,
            _LAZY_LAYOUT.align,
            _core.TYPE_PLAIN,
            what,
            flags=_core.KIND_BITWISE,
            encode=encode,
            decode=decode,
        )


# ---------------------------------------------------------------------------
# Soft pointers
# ---------------------------------------------------------------------------


def object_path(obj: Object) -> str:
    """The path of a live object: its outers' names and its own, joined by
    dots (``"Level.Hero"``). Empty names and names containing a dot have no
    path."""
    names: list[str] = []
    current: Object | None = obj
    while current is not None:
        name = current.name
        if "." in name or not name:
            why = "it contains '.'" if name else "it is empty"
            raise ValueError(
                f"{name!r} cannot be part of an object path ({why}); "
                "rename the object or its outer to have a soft pointer to it"
            )
        names.append(name)
        current = current.outer
    return ".".join(reversed(names))


def _class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class _SoftPointer(ValueConjugate, _Specialised):
    """Shared behaviour: a native UTF-8 string (the path) that resolves to
    what it names while that is loaded."""

    __slots__ = ()
    if TYPE_CHECKING:

        @property
        def _rt(self) -> Runtime: ...

    def __new__(cls, value: Any = None) -> Self:
        runtime = (
            value._live_runtime() if issubclass(type(value), Object) else context.current_runtime()
        )
        with context.made_current(runtime):
            made: Self = _core.ValueConjugate.__new__(cls, value)  # type: ignore[call-arg]
        return made

    def __init__(self, value: Any = None) -> None:
        """Construction happens in ``__new__``."""

    @classmethod
    def _zs_value_kind(cls, owner: type) -> PropertyKind:
        return SoftKind(cls)

    @classmethod
    def _path_of(cls, what: str, value: Any) -> str:
        raise NotImplementedError

    @property
    def path(self) -> str:
        """The stored path ("" when null)."""
        path: str = self.to_python()
        return path

    def set(self, value: Any) -> None:
        """Point somewhere else (a red view writes through)."""
        self._assign(value)

    @property
    def is_null(self) -> bool:
        """Whether the path is empty."""
        return self.path == ""

    @property
    def is_valid(self) -> bool:
        """Whether ``get()`` would return something now."""
        return self.get() is not None

    def __bool__(self) -> bool:
        """``is_valid``, as Unreal's pointer types convert to bool: ``if ptr:``
        holds only while it resolves to a live object."""
        return self.is_valid

    @property
    def is_pending(self) -> bool:
        """A path is set but does not resolve now (not loaded)."""
        return not self.is_null and self.get() is None

    def get(self) -> Any:
        """What the path names, while it is loaded; else None."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.path

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _SoftPointer):
            return self.path == other.path
        if isinstance(other, str):
            return self.path == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable (a red view writes through)

    def __repr__(self) -> str:
        if self.is_expired:
            return self._expired_repr()
        colour = "black" if self.is_black else "red"
        return f"<{_describe(type(self))} ({colour}) {self.path!r}>"


class SoftObjectPtr(_SoftPointer, TypeParameters[T]):
    """A reference to an object by path (``TSoftObjectPtr<T>``).

    The path is the names of the object's outers and its own, joined by dots
    (``"Level.Hero"``); ``get()`` returns the live object at that path if it
    is a ``T``, else None (nothing at the path now, or something else).
    Black when created from Python (``zs.SoftObjectPtr[Actor](hero)`` or
    ``(... )("Level.Hero")``) or cloned; a red view when read from a
    property. Never keeps its object alive.

    >>> import zsharp_py as zs
    >>> class Prop(zs.Object): pass
    >>> with zs.Runtime() as rt:
    ...     level = Prop(name="Level"); level.add_to_root()
    ...     soft = zs.SoftObjectPtr[Prop]("Level.Lamp")
    ...     before = soft.get()
    ...     lamp = Prop(name="Lamp", outer=level)
    ...     (before, soft.get() is lamp, soft.path)
    (None, True, 'Level.Lamp')
    """

    __slots__ = ()

    @classmethod
    def _path_of(cls, what: str, value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, str):
            if "\0" in value:
                raise ValueError(f"{what}: a path cannot contain NUL characters")
            return value
        if isinstance(value, SoftObjectPtr):
            return value.path
        if issubclass(type(value), Object):
            target = cls._zs_target()
            if not issubclass(type(value), target):
                raise TypeError(f"{what} needs a {target.__name__}, not {type(value).__name__}")
            return object_path(value)
        raise TypeError(
            f"{what} needs a path (str), a zs.Object, a SoftObjectPtr or None, "
            f"not {type(value).__name__}"
        )

    if TYPE_CHECKING:

        def __init__(self, value: T | SoftObjectPtr[T] | str | None = None) -> None:
            """Construction happens in ``__new__``."""

    # In C (native/binding/paths.c): the path read, each segment found under
    # the one before, with no Python code in between.
    get = _core.ValueConjugate._soft_get


class SoftClassPtr(_SoftPointer, TypeParameters[T]):
    """A reference to a class by path (``TSoftClassPtr<T>``).

    The path is ``"module.QualifiedName"`` (a bare class name is accepted
    too); ``get()`` returns the class while it is loaded, that is registered
    in this runtime (a class is registered when its first object is created,
    or by ``load()``), if it is ``T`` or a subclass; else None.

    >>> import zsharp_py as zs
    >>> with zs.Runtime():
    ...     soft = zs.SoftClassPtr[zs.Object]("zsharp_py._demo.Level")
    ...     before = soft.get()
    ...     loaded = soft.load()
    ...     (before, loaded.__name__, soft.get() is loaded)
    (None, 'Level', True)
    """

    __slots__ = ()

    @classmethod
    def _path_of(cls, what: str, value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, str):
            if "\0" in value:
                raise ValueError(f"{what}: a path cannot contain NUL characters")
            return value
        if isinstance(value, SoftClassPtr):
            return value.path
        if isinstance(value, SubclassOf):
            value = value.get()
            if value is None:
                return ""
        if isinstance(value, type):
            target = cls._zs_target()
            if not issubclass(value, target):
                raise TypeError(
                    f"{what} needs {target.__name__} or a subclass of it, not {value.__name__}"
                )
            return _class_path(value)
        raise TypeError(
            f"{what} needs a class, a path (str), a SoftClassPtr or None, "
            f"not {type(value).__name__}"
        )

    if TYPE_CHECKING:

        def __init__(
            self, value: type[T] | SoftClassPtr[T] | SubclassOf[T] | str | None = None
        ) -> None:
            """Construction happens in ``__new__``."""

    def get(self) -> type[T] | None:
        """The class if it is registered in this runtime and derives from
        ``T``, else None. A bare name that several registered classes share
        raises ``LookupError``."""
        path = self.path
        if not path:
            return None
        runtime = self._rt
        exact = [cls for cls in list(runtime._native_classes) if _class_path(cls) == path]
        if not exact:
            exact = [cls for cls in list(runtime._native_classes) if cls.__name__ == path]
            if len(exact) > 1:
                raise LookupError(
                    f"SoftClassPtr {path!r}: several registered classes have "
                    f"that name ({', '.join(map(_class_path, exact))}); "
                    "use the full path"
                )
        if not exact:
            return None
        found = exact[-1]
        return typing.cast("type[T]", found) if issubclass(found, type(self)._zs_target()) else None

    def load(self) -> type[T]:
        """The class, imported (``module.QualifiedName``) and registered in
        this runtime if needed. ``LookupError`` if it cannot be found,
        ``TypeError`` if it is not ``T`` or a subclass."""
        found = self.get()
        if found is not None:
            return found
        path = self.path
        cls = _import_class(path)
        target = type(self)._zs_target()
        if not isinstance(cls, type) or not issubclass(cls, target):
            raise TypeError(
                f"SoftClassPtr {path!r} names {cls!r}, not {target.__name__} or a subclass of it"
            )
        runtime = self._rt
        with runtime._lock:
            runtime._live_address()
            runtime._native_class_address(typing.cast("type[Object]", cls))
        return typing.cast("type[T]", cls)


def _import_class(path: str) -> Any:
    parts = path.split(".")
    for split in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:split])
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        found: Any = module
        try:
            for attribute in parts[split:]:
                found = getattr(found, attribute)
        except AttributeError:
            break
        return found
    raise LookupError(f"SoftClassPtr: cannot load {path!r} (expected module.ClassName)")


class SoftKind(_PointerKind):
    """A soft pointer member or element: a native UTF-8 string (the path)."""

    __slots__ = ()
    cls: type[_SoftPointer]
    member_type = "zs_string"

    @property
    def key(self) -> Any:
        """``("soft", cls)``."""
        return ("soft", self.cls)

    def check(self, what: str, value: Any) -> None:
        """Anything ``set`` accepts."""
        if isinstance(value, _SoftPointer) and value.is_expired:
            value.to_python()  # raises with the reason
        self.cls._path_of(what, value)

    def make_kind(self) -> _core.Kind:
        """A UTF-8 string, read as a view of the pointer class."""
        wrapper, what = self.cls, self.describe()

        def encode(runtime: Runtime, value: Any) -> str:
            return wrapper._path_of(what, value)

        return _core.Kind(
            _core.KIND_STRING,
            *size_align(self.member_type),
            _core.TYPE_STRING,
            what,
            unit=1,
            flags=_core.KIND_VIEW,
            cls=wrapper,
            encode=encode,
        )


# ---------------------------------------------------------------------------
# ScriptInterface
# ---------------------------------------------------------------------------


def _interface_id(runtime: Runtime, interface: type) -> int:
    known = _interfaces_of(runtime)
    found = known.ids.get(interface)
    if found is None:
        known.interfaces.append(interface)
        found = known.ids[interface] = len(known.interfaces)
    return found


class ScriptInterface(ValueConjugate, _Specialised, TypeParameters[I]):
    """An object together with the interface it is used through
    (``TScriptInterface<I>``): ``zs.ScriptInterface[IDamageable](crate)``.

    Objects that do not implement the interface raise ``TypeError``. The
    object reference is strong and traced: inside an object it keeps its
    target alive (and becomes None if the target is marked as garbage);
    a black ``ScriptInterface`` (created from Python or cloned) is a GC root
    unless the runtime was created with ``black_conjugates_are_roots=False``,
    in which case ``object`` may become None once the target is collected.
    A red view writes through. Attributes the interface declares are
    forwarded to the object (``si.take_damage(3)``).
    """

    __slots__ = ()
    if TYPE_CHECKING:

        @property
        def _rt(self) -> Runtime: ...

    _zs_bound = Interface
    _zs_needs_target = True

    def __new__(cls, obj: Any = None) -> Self:
        runtime = obj._live_runtime() if isinstance(obj, Object) else context.current_runtime()
        with context.made_current(runtime):
            made: Self = _core.ValueConjugate.__new__(cls, obj)  # type: ignore[call-arg]
        return made

    def __init__(self, obj: I | ScriptInterface[I] | None = None) -> None:
        """Construction happens in ``__new__``."""

    @classmethod
    def _zs_value_kind(cls, owner: type) -> PropertyKind:
        return ScriptInterfaceKind(cls)

    @property
    def interface(self) -> type[I]:
        """The interface (``T``)."""
        return typing.cast("type[I]", type(self)._zs_target())

    @property
    def object(self) -> I | None:
        """The object, or None."""
        return typing.cast("I | None", self.to_python())

    def get(self) -> I | None:
        """The object (used through the interface), or None."""
        return self.object

    def set(self, obj: Any) -> None:
        """Point at another object implementing the interface (or None)."""
        self._assign(obj)

    @property
    def is_valid(self) -> bool:
        """Whether it holds a live object."""
        return self.object is not None

    def __bool__(self) -> bool:
        """``is_valid``, as Unreal's pointer types convert to bool: ``if ptr:``
        holds only while it resolves to a live object."""
        return self.is_valid

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or not hasattr(type(self)._zs_target(), name):
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        obj = self.object
        if obj is None:
            raise AttributeError(f"{type(self).__name__}.{name}: it holds no object")
        return getattr(obj, name)

    def __eq__(self, other: builtins.object) -> bool:
        if isinstance(other, ScriptInterface):
            return self.object is other.object
        if other is None or isinstance(other, Object):
            held: builtins.object = self.object
            return held is other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        if self.is_expired:
            return self._expired_repr()
        colour = "black" if self.is_black else "red"
        return f"<{_describe(type(self))} ({colour}) {self.object!r}>"


_INTERFACE_LAYOUT = Layout("ScriptInterface", [("object", "uint64_t"), ("interface", "uint32_t")])


class ScriptInterfaceKind(_PointerKind):
    """A ``ScriptInterface[I]`` member or element: ``{zs_ref object;
    uint32_t interface;}``, the object reference traced (strong, killable)."""

    __slots__ = ()
    cls: type[ScriptInterface[Any]]
    member_type = _INTERFACE_LAYOUT

    @property
    def key(self) -> Any:
        """``("script_interface", cls)``."""
        return ("script_interface", self.cls)

    def install(self, cls: type, name: str, cname: str, offset: int) -> None:
        """Reads give a red view; assignment takes an object, a
        ScriptInterface or None."""
        self.cls._zs_target()  # a bare ScriptInterface is refused at declaration
        super().install(cls, name, cname, offset)

    def check(self, what: str, value: Any) -> None:
        """An object implementing the interface, a ScriptInterface holding
        one, or None."""
        interface = self.cls._zs_target()
        if isinstance(value, ScriptInterface):
            value = value.object
        if value is None:
            return
        if not issubclass(type(value), Object):
            raise TypeError(
                f"{what} needs an object implementing {interface.__name__} or None, "
                f"not {type(value).__name__}"
            )
        value._live_runtime()
        if not isinstance(value, interface):
            raise TypeError(
                f"{what}: {type(value).__name__} does not implement {interface.__name__}"
            )

    def make_kind(self) -> _core.Kind:
        """A struct of a strong reference and the interface's id in the runtime."""
        wrapper, what, check = self.cls, self.describe(), self.check

        def encode(runtime: Runtime, value: Any) -> dict[str, Any]:
            check(what, value)
            if isinstance(value, ScriptInterface):
                value = value.object
            interface = _interface_id(runtime, wrapper._zs_target()) if value is not None else 0
            return {"object": value, "interface": interface}

        def decode(runtime: Runtime, members: dict[str, Any]) -> Any:
            return members["object"]

        kind = _core.Kind(
            _core.KIND_STRUCT,
            _INTERFACE_LAYOUT.size,
            _INTERFACE_LAYOUT.align,
            _core.TYPE_STRUCT,
            what,
            flags=_core.KIND_VIEW,
            cls=wrapper,
            struct_name=b"ScriptInterface",
            encode=encode,
            decode=decode,
        )
        offsets = _INTERFACE_LAYOUT.offsets
        kind.set_members(
            [
                ("object", offsets["object"], ObjectRefKind(Object).kind),
                (
                    "interface",
                    offsets["interface"],
                    ScalarKind(typing.cast("type[Scalar]", UInt32)).kind,
                ),
            ]
        )
        return kind


def forget_specialisations(mentions: Callable[[Any], bool]) -> None:
    """Drop the cached specialisations (``SubclassOf[...]``,
    ``SoftObjectPtr[...]``...) that mention a type ``mentions`` names
    (``forget_cached``, zsharp_py/_base/generics.py)."""
    forget_cached(_Specialised, mentions)
