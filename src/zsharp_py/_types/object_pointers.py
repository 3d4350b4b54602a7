"""Object wrappers: ``WeakObjectPtr`` (never keeps its object alive, never
resolves to another object reusing the slot) and ``StrongObjectPtr`` (a
black conjugate that keeps its object alive until disposed)."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .. import _core
from .._base.errors import ExpiredConjugateError
from .._base.expiry import REASON_CLOSED, REASON_DISPOSED
from .._model.object import Object, WeakRefKind, object_target
from .._runtime.runtime import Runtime, runtime_of

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["WeakObjectPtr", "StrongObjectPtr"]

T = TypeVar("T", bound=Object)


class WeakObjectPtr(_core.WeakPointer, Generic[T]):
    """A weak reference to a native object: index + serial.

    ``get()`` returns the object while it lives and ``None`` afterwards, even
    once its slot holds a new object (the serial no longer matches).
    ``zs.WeakObjectPtr["Actor"]`` as an annotation declares an untraced
    weak property. True while ``get()`` would return the object, as
    Unreal's ``TWeakObjectPtr`` converts to bool; equal to another pointer
    to the same object (native/binding/weak.c).

    >>> import zsharp_py as zs
    >>> class Pawn(zs.Object):
    ...     hp: zs.Int32
    >>> with zs.Runtime() as rt:
    ...     pawn = Pawn()
    ...     weak = zs.WeakObjectPtr(pawn)
    ...     alive = weak.get() is pawn
    ...     stats = rt.collect_garbage()  # nothing roots the pawn
    ...     (alive, weak.get(), bool(weak))
    (True, None, False)
    """

    if not TYPE_CHECKING:

        def __class_getitem__(cls, target: Any) -> Any:
            # A plain alias, as list[T] makes: typing's subscription keeps a
            # process-wide cache, which would keep a closed runtime's host
            # classes alive (zsharp_py/_interop/reflection.py, _Bound.close).
            return types.GenericAlias(cls, target)

    __slots__ = ()

    if TYPE_CHECKING:

        def __init__(self, obj: T | None = None) -> None: ...
        def get(self) -> T | None: ...

    @classmethod
    def _zs_generic_kind(cls, owner: type, arguments: tuple[Any, ...], what: str) -> WeakRefKind:
        """The kind of a ``WeakObjectPtr[Target]`` annotation (the resolver,
        zsharp_py/_model/object.py kind_of, asks the origin type)."""
        (argument,) = arguments
        target = object_target(owner, argument)
        if target is None:
            raise TypeError(f"{what}: WeakObjectPtr needs a zs.Object subclass, got {argument!r}")
        return WeakRefKind(target, cls)


class StrongObjectPtr(Generic[T]):
    """A black conjugate holding a strong reference: the object survives
    every collection until ``dispose()`` (or the end of a ``with`` block, or
    Python finalising this pointer)."""

    if not TYPE_CHECKING:

        def __class_getitem__(cls, target: Any) -> Any:
            # A plain alias, as list[T] makes: typing's subscription keeps a
            # process-wide cache, which would keep a closed runtime's host
            # classes alive (zsharp_py/_interop/reflection.py, _Bound.close).
            return types.GenericAlias(cls, target)

    __slots__ = ("_rt", "_h", "_target", "_disposed")
    _rt: Runtime
    _h: int
    _target: T
    _disposed: str | None

    def __init__(self, obj: T) -> None:
        if not isinstance(obj, Object):
            raise TypeError(f"StrongObjectPtr needs a zs.Object, not {type(obj).__name__}")
        if hasattr(self, "_h"):
            raise TypeError("StrongObjectPtr is already initialised; create a new one")
        runtime = runtime_of(obj)
        self._disposed = REASON_DISPOSED  # until the native reference is really taken
        runtime._heap_add_strong_ref(obj._h, "StrongObjectPtr")
        self._rt, self._h, self._target = runtime, obj._h, obj
        self._disposed = None

    @property
    def is_black(self) -> bool:
        """Always True: the pointer is owned by Python."""
        return True

    @property
    def is_expired(self) -> bool:
        """True once disposed or once its runtime closed."""
        return self._disposed is not None or self._rt._closed

    def get(self) -> T:
        """The object (alive for as long as this pointer is)."""
        if self._disposed is not None or self._rt._closed:
            reason = self._disposed or REASON_CLOSED
            raise ExpiredConjugateError(f"StrongObjectPtr has expired: {reason}")
        return self._target

    def dispose(self) -> None:
        """Release the strong reference now; later calls do nothing."""
        if self._disposed is not None:
            return
        self._disposed = REASON_DISPOSED
        runtime = self._rt
        if not runtime._closed:
            runtime._release_strong(self._h)

    def __enter__(self) -> StrongObjectPtr[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.dispose()

    def __del__(self) -> None:
        # Finalisers may run on any thread, even inside a collection: only
        # queue the release; the runtime flushes it at its next safe point.
        # None once the runtime is closing: close() frees everything (and
        # drops the queue), and nothing would ever flush it again.
        if getattr(self, "_disposed", REASON_DISPOSED) is None:
            self._disposed = REASON_DISPOSED
            runtime = self._rt
            if not runtime._closing:
                runtime._deferred_releases.append(self._h)
                runtime._flush_pending = True

    def __copy__(self) -> StrongObjectPtr[T]:
        raise TypeError(
            "a StrongObjectPtr owns one native strong reference and cannot be "
            "copied; create another StrongObjectPtr(obj) instead"
        )

    def __deepcopy__(self, memo: dict[int, Any]) -> StrongObjectPtr[T]:
        return self.__copy__()

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("a StrongObjectPtr cannot be pickled")

    def __repr__(self) -> str:
        if self.is_expired:
            return "StrongObjectPtr(<expired>)"
        return f"StrongObjectPtr({self._target!r})"
