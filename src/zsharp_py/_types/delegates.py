"""Delegates: ``zs.Delegate`` (one binding), ``zs.MulticastDelegate``
(ordered bindings) and ``zs.SparseDelegate`` (storage only once bound).
Their storage is native (native/binding/delegates.c): a Python callable is
an id the runtime maps to it, an object binding a weak handle and a method
name. docs/pointers-and-delegates.md, "Delegates", is the user's view,
cycles across the boundary included.
"""

from __future__ import annotations

import builtins
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from .. import _core
from .._base import context
from .._base.layout import size_align
from .._model.kinds import PropertyKind
from .._model.object import Object
from .._model.values import ValueConjugate, scope
from .._runtime.runtime import Runtime

__all__ = [
    "Delegate",
    "MulticastDelegate",
    "SparseDelegate",
    "DelegateKind",
    "MulticastKind",
    "SparseKind",
    "BroadcastErrors",
]

# A parsed binding: (object handle, method name index, callable or None);
# exactly one of the object handle and the callable is set.
_Binding = tuple[int, int, "Callable[..., Any] | None"]


def _exception_group(message: str, errors: Sequence[Exception]) -> Exception:
    group = getattr(builtins, "ExceptionGroup", None)
    if group is not None:
        result: Exception = group(message, list(errors))
        return result
    return BroadcastErrors(message, list(errors))  # Python 3.10


class BroadcastErrors(Exception):
    """Raised (before Python 3.11, which raises ``ExceptionGroup``) when
    several listeners of one broadcast raised; ``exceptions`` holds them."""

    def __init__(self, message: str, exceptions: list[Exception]) -> None:
        super().__init__(message)
        self.exceptions = exceptions


# ---------------------------------------------------------------------------
# Bindings
# ---------------------------------------------------------------------------


def _method_name(runtime: Runtime, name: str) -> int:
    """The native name index of a method name, interned as ``"name()"`` so
    that a ``_<digits>`` suffix stays part of the name."""
    index, number = runtime._intern(name + "()")
    assert number == 0
    return index


def _method_text(runtime: Runtime, index: int) -> str:
    text = runtime._name_text(index, 0)
    return text[:-2] if text.endswith("()") else text


def _find_method(obj: Object, name: str) -> Callable[..., Any] | None:
    """``obj.name``, callable; names are case-insensitive as in the engines
    (interned names keep the first spelling seen), so fall back to a unique
    case-insensitive match."""
    method: Any = getattr(obj, name, None)
    if callable(method):
        return typing.cast("Callable[..., Any]", method)
    folded = name.casefold()
    matches = [attr for attr in dir(type(obj)) if attr.casefold() == folded]
    if len(matches) == 1:
        method = getattr(obj, matches[0], None)
        if callable(method):
            return typing.cast("Callable[..., Any]", method)
    return None


def _parse(
    runtime: Runtime,
    what: str,
    target: Any,
    function: Any = None,
    *,
    require_method: bool = True,
) -> _Binding:
    """Turn ``bind``/``add`` arguments into a binding (not yet stored)."""
    if function is None:
        if isinstance(target, Delegate):  # its binding (C#'s "+= other")
            binding = target.to_python()
            if binding is None:
                raise TypeError(f"{what}: the Delegate given is not bound")
            target = binding
        if isinstance(target, tuple) and tuple.__len__(target) == 2:
            # tuple's own methods: a subclass's __len__/__iter__ may run anything
            target, function = tuple.__getitem__(target, 0), tuple.__getitem__(target, 1)
        elif isinstance(target, types.MethodType) and isinstance(target.__self__, Object):
            target, function = target.__self__, target.__func__.__name__
        elif isinstance(target, Object):
            raise TypeError(
                f"{what}: bind an object together with a method name, "
                f"e.g. ({type(target).__name__}, 'method')"
            )
        elif isinstance(target, ValueConjugate):
            raise TypeError(
                f"{what}: a {type(target).__name__} is not a binding (add its bindings one by one)"
            )
        elif callable(target):
            return 0, 0, target
        else:
            raise TypeError(
                f"{what}: a binding is a callable or (object, 'method'), "
                f"not {type(target).__name__}"
            )
    if not isinstance(target, Object):
        raise TypeError(f"{what}: an object binding needs a zs.Object, not {type(target).__name__}")
    if not isinstance(function, str):
        raise TypeError(f"{what}: the method name must be a str, not {type(function).__name__}")
    # the text itself: a str subclass's __hash__/__eq__ would run inside the
    # attribute lookup, whose errors CPython swallows
    function = str.__str__(function)
    if require_method:
        target._live_runtime()
        if _find_method(target, function) is None:
            raise AttributeError(f"{what}: {type(target).__name__} has no method {function!r}")
    if target._rt is not runtime:
        raise ValueError(f"{what}: the object belongs to another runtime")
    return target._h, _method_name(runtime, function), None


def _check_binding(what: str, value: Any) -> None:
    """Validate one binding without a runtime (constructor keywords)."""
    if isinstance(value, Delegate):
        value = value.to_python()
        if value is None:
            raise TypeError(f"{what}: the Delegate given is not bound")
    if isinstance(value, tuple) and tuple.__len__(value) == 2:
        target, function = tuple.__getitem__(value, 0), tuple.__getitem__(value, 1)
        if not isinstance(target, Object) or not isinstance(function, str):
            raise TypeError(f"{what}: an object binding is (zs.Object, 'method')")
        target._live_runtime()
        if _find_method(target, str.__str__(function)) is None:
            raise AttributeError(f"{what}: {type(target).__name__} has no method {function!r}")
        return
    if isinstance(value, (Object, ValueConjugate)) or not callable(value):
        raise TypeError(
            f"{what}: a binding is a callable or (object, 'method'), not {type(value).__name__}"
        )


def _object_alive(runtime: Runtime, handle: int) -> bool:
    return runtime._conjugate_of(handle) is not None


# A native binding read out: (object handle, function name index, callable or None).
_Raw = tuple[int, int, Any]


def _plain(runtime: Runtime, raw: _Raw) -> Any:
    """The Python form of a native binding: the callable, ``(object,
    'method')``, or None (empty, or its object is gone)."""
    handle, name, function = raw
    if function is not None:
        return function
    if handle:
        obj = runtime._conjugate_of(handle)
        if obj is not None:
            return obj, _method_text(runtime, name)
    return None


def _live_binding(runtime: Runtime, raw: _Raw) -> bool:
    """Whether a broadcast would call it."""
    return raw[2] is not None or (bool(raw[0]) and _object_alive(runtime, raw[0]))


def _matches(raw: _Raw, wanted: _Binding) -> bool:
    handle, name, function = wanted
    if function is None:
        return raw[2] is None and (raw[0], raw[1]) == (handle, name)
    held = raw[2]
    return held is not None and (held is function or bool(held == function))


def _call(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    with scope():
        return function(*args, **kwargs)


def _iterate_bindings(what: str, value: Any) -> list[Any]:
    if isinstance(value, _MulticastBase):
        return value.to_python()
    if isinstance(value, (str, bytes, tuple)) or callable(value) or not hasattr(value, "__iter__"):
        raise TypeError(
            f"{what} needs an iterable of bindings (callables or "
            f"(object, 'method')), not {type(value).__name__}"
        )
    return list(value)


def _encode_delegate(runtime: Runtime, value: Any) -> list[_Binding]:
    """What a Delegate property or element stores (native/binding/kind.c
    stages the rows): a Delegate, a binding, or None (unbound)."""
    if value is None:
        return []
    if isinstance(value, Delegate):
        if value._rt is runtime:
            return [raw for raw in value._raw() if raw[0] or raw[2] is not None]
        value = value.to_python()
        if value is None:
            return []
    return [_parse(runtime, "Delegate", value)]


def _encode_multicast(runtime: Runtime, value: Any) -> list[_Binding]:
    """What a multicast or sparse delegate property or element stores: a
    delegate of either kind, an iterable of bindings, or None (empty)."""
    if value is None:
        return []
    if isinstance(value, _MulticastBase) and value._rt is runtime:
        return list(value._raw())
    bindings = _iterate_bindings("MulticastDelegate", value)
    return [_parse(runtime, "MulticastDelegate", binding) for binding in bindings]


# ---------------------------------------------------------------------------
# Conjugates
# ---------------------------------------------------------------------------


class _DelegateBase(_core.DelegateBase, ValueConjugate):
    """Shared plumbing of the delegate conjugates."""

    __slots__ = ()
    if TYPE_CHECKING:

        @property
        def _rt(self) -> Runtime: ...

    _zs_kind_code: ClassVar[int] = 0
    if TYPE_CHECKING:

        def _raw(self) -> list[_Raw]: ...
        def _add(self, handle: int, name: int, function: Any) -> None: ...
        def _remove(self, index: int, count: int) -> None: ...
        @property
        def _allocated(self) -> bool: ...

    @classmethod
    def _make_kind(cls) -> PropertyKind:
        raise NotImplementedError

    @classmethod
    def _zs_value_kind(cls, owner: type) -> PropertyKind:
        return cls._make_kind()

    def __new__(cls, *args: Any) -> Any:
        runtime = context.current_runtime()
        for argument in args:
            if isinstance(argument, types.MethodType):
                argument = argument.__self__
            if isinstance(argument, Object):
                runtime = argument._live_runtime()
        with context.made_current(runtime):
            value = _core.ValueConjugate.__new__(cls)
        try:
            if args:
                value._init(*args)
        except BaseException:
            value.dispose()
            raise
        return value

    def __init__(self, *args: Any) -> None:
        """Construction happens in ``__new__``."""

    def _init(self, *args: Any) -> None:
        raise NotImplementedError

    def to_python(self) -> Any:
        """The bindings as Python values (callables, ``(object, 'method')``)."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _DelegateBase):
            return bool(self.to_python() == other.to_python())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(f"{type(self).__name__} conjugates cannot be pickled")


class Delegate(_DelegateBase):
    """A single-cast delegate (``FScriptDelegate``): at most one binding.

    Black when created from Python (``zs.Delegate(fn)``,
    ``zs.Delegate(actor, "on_hit")``, ``clone()``); a red view, writing
    through to native memory, when read from a property or element. An
    object binding is weak: once its object is destroyed the delegate is
    unbound (``is_bound`` is False and the binding is dropped when next
    executed). The call runs in its own ``zs.scope()``.

    >>> import zsharp_py as zs
    >>> with zs.Runtime():
    ...     d = zs.Delegate(lambda x: x * 2)
    ...     (d.is_bound, d.execute(21), d.execute_if_bound(1))
    (True, 42, True)
    """

    __slots__ = ()

    @classmethod
    def _make_kind(cls) -> PropertyKind:
        return DelegateKind()

    def _init(self, target: Any = None, function: Any = None) -> None:
        if target is not None:
            self.bind(target, function)

    def bind(self, target: Any, function: str | None = None) -> None:
        """Bind a callable, or an object and the name of one of its methods
        (``bind(actor, "on_hit")``); replaces the current binding."""
        self._raw()  # live, or ExpiredConjugateError
        parsed = _parse(self._rt, "Delegate.bind", target, function)
        self._assign(_Rows([parsed]))

    def unbind(self) -> None:
        """Remove the binding."""
        self._remove(0, 1)

    @property
    def is_bound(self) -> bool:
        """Bound to a callable, or to an object that is still alive."""
        return any(_live_binding(self._rt, raw) for raw in self._raw())

    def _target(self) -> Callable[..., Any] | None:
        """What ``execute`` calls; drops a binding whose object is gone."""
        runtime = self._rt
        raw = self._raw()
        if not raw:
            return None
        handle, name, function = raw[0]
        if function is not None:
            return typing.cast("Callable[..., Any]", function)
        if not handle:
            return None
        obj = runtime._conjugate_of(handle)
        if obj is None:
            if self._raw() == raw:
                self._remove(0, 1)
            return None
        method_name = _method_text(runtime, name)
        method = _find_method(obj, method_name)
        if method is None:
            raise AttributeError(f"Delegate: {type(obj).__name__} has no method {method_name!r}")
        return method

    # Called in C for a callable binding (native/binding/delegates.c); an
    # object binding takes the _slow method of the same name.
    execute = _core.DelegateBase._execute
    execute_if_bound = _core.DelegateBase._execute_if_bound

    def _execute_slow(self, *args: Any, **kwargs: Any) -> Any:
        function = self._target()
        if function is None:
            raise RuntimeError(
                "Delegate.execute: the delegate is not bound "
                "(or the object it was bound to has been destroyed)"
            )
        return _call(function, args, kwargs)

    def _execute_if_bound_slow(self, *args: Any, **kwargs: Any) -> bool:
        function = self._target()
        if function is None:
            return False
        _call(function, args, kwargs)
        return True

    @property
    def target(self) -> Any:
        """The binding: a callable, ``(object, 'method')``, or None."""
        return self.to_python()

    def to_python(self) -> Any:
        """The binding as a Python value (None when unbound)."""
        raw = self._raw()
        return _plain(self._rt, raw[0]) if raw else None

    def __repr__(self) -> str:
        if self.is_expired:
            return self._expired_repr()
        colour = "black" if self.is_black else "red"
        return f"<Delegate ({colour}) {self.to_python()!r}>"


class _Rows(list):  # type: ignore[type-arg]
    """Bindings already parsed: the encoders pass them through."""

    __slots__ = ()


class _MulticastBase(_DelegateBase):
    """Behaviour shared by multicast and sparse delegates."""

    __slots__ = ()

    def _init(self, bindings: Any = None) -> None:
        if bindings is not None:
            for binding in _iterate_bindings(type(self).__name__, bindings):
                self.add(binding)

    # A plain callable is added, a plain function removed, and a delegate
    # of callables broadcast in C (native/binding/delegates.c); anything
    # else takes the _slow method of the same name.
    add = _core.DelegateBase._add_binding
    remove = _core.DelegateBase._remove_binding
    broadcast = _core.DelegateBase._broadcast

    def _add_slow(self, target: Any, function: str | None = None) -> None:
        self._raw()  # live, or ExpiredConjugateError
        parsed = _parse(self._rt, f"{type(self).__name__}.add", target, function)
        self._prune()
        self._add(*parsed)

    def add_unique(self, target: Any, function: str | None = None) -> bool:
        """Append a binding unless an equal one is present; return whether
        it was added."""
        self._raw()
        parsed = _parse(self._rt, f"{type(self).__name__}.add_unique", target, function)
        if self._index_of(parsed) >= 0:
            return False
        self._prune()
        self._add(*parsed)
        return True

    def _index_of(self, parsed: _Binding) -> int:
        for index, raw in enumerate(self._raw()):
            if _matches(raw, parsed):
                return index
        return -1

    def _remove_slow(self, target: Any, function: str | None = None) -> bool:
        self._raw()
        parsed = _parse(
            self._rt, f"{type(self).__name__}.remove", target, function, require_method=False
        )
        # Decide (== may run Python code), then remove by what is there now.
        snapshot = self._raw()
        index = next((i for i, raw in enumerate(snapshot) if _matches(raw, parsed)), -1)
        if index < 0:
            return False
        if self._raw() != snapshot:
            return self._remove_slow(target, function)
        self._remove(index, 1)
        return True

    def remove_all(self, obj: Object) -> int:
        """Remove every binding to methods of ``obj``; return how many."""
        if not isinstance(obj, Object):
            raise TypeError(f"remove_all needs a zs.Object, not {type(obj).__name__}")
        handle = obj._h
        return self._remove_where(lambda raw: raw[0] == handle and raw[2] is None)

    def _remove_where(self, condition: Callable[[_Raw], bool]) -> int:
        """Remove the bindings a condition selects (it may run Python code:
        decide first, then remove, last first, while nothing changed)."""
        snapshot = self._raw()
        doomed = [index for index, raw in enumerate(snapshot) if condition(raw)]
        if not doomed:
            return 0
        if self._raw() != snapshot:
            return self._remove_where(condition)
        for index in reversed(doomed):
            self._remove(index, 1)
        return len(doomed)

    def _prune(self) -> int:
        """Drop the object bindings whose object is gone."""
        runtime = self._rt
        return self._remove_where(lambda raw: not _live_binding(runtime, raw))

    def clear(self) -> None:
        """Remove every binding."""
        self._assign(None)

    @property
    def is_bound(self) -> bool:
        """Whether any binding would be called by ``broadcast``."""
        return any(_live_binding(self._rt, raw) for raw in self._raw())

    def __len__(self) -> int:
        """Number of live bindings (bindings to destroyed objects are not counted)."""
        return sum(1 for raw in self._raw() if _live_binding(self._rt, raw))

    def __contains__(self, target: Any) -> bool:
        self._raw()
        try:
            parsed = _parse(self._rt, "in", target, require_method=False)
        except (TypeError, ValueError):
            return False
        return self._index_of(parsed) >= 0

    def __iter__(self) -> Iterator[Any]:
        return iter(self.to_python())

    def __iadd__(self, target: Any) -> Any:
        self.add(target)
        return self

    def __isub__(self, target: Any) -> Any:
        self.remove(target)
        return self

    def to_python(self) -> list[Any]:
        """The live bindings, in order: callables and ``(object, 'method')``."""
        runtime = self._rt
        plain = [_plain(runtime, raw) for raw in self._raw()]
        return [b for b in plain if b is not None]

    def _broadcast_slow(self, *args: Any, **kwargs: Any) -> None:
        runtime = self._rt
        calls = self._raw()
        errors: list[Exception] = []
        dead = 0
        for handle, name, function in calls:
            if function is None:
                if not handle:
                    continue
                obj = runtime._conjugate_of(handle) if not runtime._closed else None
                if obj is None:
                    dead += 1
                    continue
                method_name = _method_text(runtime, name)
                function = _find_method(obj, method_name)
                if function is None:
                    errors.append(
                        AttributeError(
                            f"{type(self).__name__}.broadcast: {type(obj).__name__} has no "
                            f"method {method_name!r}"
                        )
                    )
                    continue
            try:
                _call(function, args, kwargs)
            except Exception as error:  # noqa: BLE001 - re-raised below
                errors.append(error)
        if dead and not self.is_expired and not runtime._closed:
            self._prune()
        if len(errors) == 1:
            raise errors[0]
        if errors:
            self._broadcast_failed(errors)

    def _broadcast_failed(self, errors: list[Exception]) -> None:
        """Raise the ExceptionGroup of several listeners' errors."""
        raise _exception_group(
            f"{type(self).__name__}.broadcast: {len(errors)} listeners raised", errors
        )

    def __repr__(self) -> str:
        if self.is_expired:
            return self._expired_repr()
        colour = "black" if self.is_black else "red"
        return f"<{type(self).__name__} ({colour}) {self.to_python()!r}>"


class MulticastDelegate(_MulticastBase):
    """A multicast delegate (``FMulticastScriptDelegate``): ordered bindings.

    Black when created from Python (``zs.MulticastDelegate([f, g])``,
    ``clone()``); a red view, writing through to native memory, when read
    from a property (``actor.on_hit.add(f)``) or element. Object bindings
    are weak: destroyed targets are skipped and dropped, never called. See
    ``broadcast`` for ordering and errors.

    >>> import zsharp_py as zs
    >>> with zs.Runtime():
    ...     heard = []
    ...     on_hit = zs.MulticastDelegate()
    ...     on_hit += heard.append
    ...     on_hit.add(lambda x: heard.append(x * 10))
    ...     on_hit.broadcast(4)
    ...     (heard, len(on_hit), on_hit.is_bound)
    ([4, 40], 2, True)
    """

    __slots__ = ()

    @classmethod
    def _make_kind(cls) -> PropertyKind:
        return MulticastKind()


class SparseDelegate(_MulticastBase):
    """A sparse multicast delegate (``FSparseDelegate``): one pointer wide;
    its binding storage is allocated when it is first bound and freed when
    it is emptied. Otherwise behaves like ``MulticastDelegate``."""

    __slots__ = ()

    @classmethod
    def _make_kind(cls) -> PropertyKind:
        return SparseKind()

    @property
    def is_allocated(self) -> bool:
        """Whether binding storage exists (only while bound)."""
        return self._allocated


# ---------------------------------------------------------------------------
# Property kinds
# ---------------------------------------------------------------------------


class _DelegateKind(PropertyKind):
    """Shared kind plumbing (delegates hold no strong references: object
    bindings are weak, so they are never traced)."""

    __slots__ = ()
    member_type = "zs_binding"
    hashable = False  # not a set element or map key
    kind_name = ""
    native_kind = 0
    cls: type[_DelegateBase] = _DelegateBase

    def is_zero(self, value: Any) -> bool:
        """``None`` or no bindings: a zeroed delegate is unbound."""
        return value is None or (type(value) in (list, tuple) and not value)

    @property
    def key(self) -> Any:
        """``("delegate",)``, ``("multicast",)`` or ``("sparse",)``."""
        return (self.kind_name,)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _DelegateKind) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def describe(self) -> str:
        """The delegate kind's name."""
        return self.cls.__name__

    def make_kind(self) -> _core.Kind:
        """A delegate kind: bindings staged from what ``encode`` parses."""
        encode = _encode_delegate if self.kind_name == "delegate" else _encode_multicast
        return _core.Kind(
            self.cls._zs_kind_code,
            *size_align(self.member_type),
            self.native_kind,
            self.describe(),
            flags=_core.KIND_VIEW,
            cls=self.cls,
            encode=_passing_rows(encode),
        )


def _passing_rows(
    encode: Callable[[Runtime, Any], list[_Binding]],
) -> Callable[[Any, Any], Any]:
    """``encode``, letting already parsed rows through."""

    def encoded(runtime: Any, value: Any) -> Any:
        if isinstance(value, _Rows):
            return list(value)
        return encode(runtime, value)

    return encoded


class DelegateKind(_DelegateKind):
    """Kind of ``zs.Delegate`` (one ``zs_binding``)."""

    __slots__ = ()
    kind_name = "delegate"
    native_kind = _core.TYPE_DELEGATE
    cls = Delegate

    def check(self, what: str, value: Any) -> None:
        """A Delegate, a binding, or None."""
        if value is None:
            return
        if isinstance(value, Delegate):
            value._raw()
            return
        _check_binding(what, value)


class MulticastKind(_DelegateKind):
    """Kind of ``zs.MulticastDelegate`` (a ``zs_array`` of bindings)."""

    __slots__ = ()
    member_type = "zs_array"
    kind_name = "multicast"
    native_kind = _core.TYPE_MULTICAST
    cls: type[_MulticastBase] = MulticastDelegate

    def check(self, what: str, value: Any) -> None:
        """A multicast or sparse delegate, an iterable of bindings, or None."""
        if value is None:
            return
        if isinstance(value, _MulticastBase):
            value._raw()
            return
        for binding in _iterate_bindings(what, value):
            _check_binding(what, binding)


class SparseKind(MulticastKind):
    """Kind of ``zs.SparseDelegate`` (a pointer to a binding list)."""

    __slots__ = ()
    member_type = "void *"
    kind_name = "sparse"
    native_kind = _core.TYPE_SPARSE
    cls = SparseDelegate


Delegate._zs_kind_code = _core.KIND_DELEGATE
MulticastDelegate._zs_kind_code = _core.KIND_MULTICAST
SparseDelegate._zs_kind_code = _core.KIND_SPARSE
