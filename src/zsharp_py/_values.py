"""Value conjugates: the red views and black values of every non-object type
(structs, strings, containers, delegates, wrappers).

Lifetimes (design rules 3 to 5):

* **Black** values are created from Python (``Vector(1, 2, 3)``,
  ``zs.Array[zs.Int32]([1, 2])``) or by ``clone()``. Their native block is
  freed exactly once: on ``dispose()``, at the end of a ``with`` block, or
  (queued, flushed at the runtime's next safe point) when Python finalises
  the conjugate.
* **Red** views point into memory something else owns: a member of an
  object or of another value, an element of a container. A view expires at
  the first of: its parent expired (owner collected, black value disposed,
  runtime closed); the innermost ``zs.scope()`` it was obtained in ended;
  the container it points into changed structure.

Views are cached in their parent (``_v``, keyed by member name or element
index), so one memory location has one live view of one type, and expiring
a parent expires its whole subtree in time proportional to the views that
exist, never to the heap.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import TYPE_CHECKING, Any, Iterator, NoReturn

from . import _core
from ._conjugate import FIXED_CLASS, ExpiredPointer, expired_error, expired_reason, make_expired

if TYPE_CHECKING:
    from ._runtime import Runtime
    from ._types import PropertyKind as ValueSpec

__all__ = ["ValueConjugate", "ImmutableValue", "scope", "open_scope", "close_scope", "expire_scope_views", "expire_views", "expire_cache", "invalidate_children", "REASON_SCOPE",
           "REASON_STRUCTURE", "REASON_PARENT"]

REASON_SCOPE = "the scope it was obtained in has ended"
REASON_STRUCTURE = "the container it points into changed structure (it may have moved)"
REASON_PARENT = "what it points into has expired"

# The stack of open scopes in this context: each a list of the views
# obtained while it was innermost.
_scopes: contextvars.ContextVar[tuple[list[ValueConjugate], ...]] = contextvars.ContextVar(
    "zsharp_scopes", default=())


@contextlib.contextmanager
def scope() -> Iterator[None]:
    """A lifetime scope for red views.

    Every red view (struct member, container element, string property...)
    obtained inside the block expires when it ends; use ``clone()`` to keep
    a black copy. Native -> Python calls (delegates, callbacks) run inside a
    scope of their own.

    >>> import zsharp_py as zs
    >>> class Point(zs.Struct):
    ...     x: zs.Int32
    >>> class Holder(zs.Object):
    ...     where: Point
    >>> with zs.Runtime():
    ...     h = Holder()
    ...     with zs.scope():
    ...         view = h.where
    ...     view.is_expired
    True
    """
    token, views = open_scope()
    try:
        yield
    finally:
        close_scope(token, views)


def open_scope() -> tuple[contextvars.Token[tuple[list[ValueConjugate], ...]],
                          list[ValueConjugate]]:
    """Open a scope without a ``with`` block (hot paths); pass what it
    returns to ``close_scope``."""
    views: list[ValueConjugate] = []
    return _scopes.set(_scopes.get() + (views,)), views


def close_scope(token: contextvars.Token[tuple[list[ValueConjugate], ...]],
                views: list[ValueConjugate]) -> None:
    """End a scope from ``open_scope``: its views expire."""
    _scopes.reset(token)
    if views:
        expire_scope_views(views)


def expire_scope_views(views: list[ValueConjugate]) -> None:
    """Expire the views of a scope that has ended (also called from C:
    zsharp_py._core opens and ends the scope of a call from native code)."""
    # Two passes, so that a view obtained in this scope reports the
    # scope as its reason even when its parent was obtained here too.
    ended = [view for view in views if type(view._p) is not ExpiredPointer]
    for view in ended:
        _detach(view)
        view._p = make_expired(type(view).__name__, _describe_view, view, REASON_SCOPE)
    for view in ended:
        _expire_children(view, REASON_PARENT)


def _describe_view(view: ValueConjugate) -> str:
    return "(red view)" if view._black == 0 else "(black value)"


def _detach(view: ValueConjugate) -> None:
    """Forget a view in its parent's cache (so the next access makes a new one)."""
    parent = view._parent
    cache = getattr(parent, "_v", None) if parent is not None else None
    if cache is not None and cache.get(view._key) is view:
        del cache[view._key]


def _expire_children(holder: Any, reason: str) -> None:
    cache = holder._v
    if not cache:
        return
    holder._v = None
    expire_cache(cache, reason)


def expire_cache(cache: dict[Any, ValueConjugate], reason: str) -> None:
    """Expire the views of a cache taken from an expired holder, and theirs."""
    stack = list(cache.values())
    while stack:
        view = stack.pop()
        if type(view._p) is ExpiredPointer:
            continue
        view._p = make_expired(type(view).__name__, _describe_view, view, reason)
        if view._v:
            stack.extend(view._v.values())
            view._v = None


def expire_views(holder: Any, reason: str = REASON_PARENT) -> None:
    """Expire every view cached under ``holder`` (an object or value conjugate)."""
    _expire_children(holder, reason)


def invalidate_children(holder: Any) -> None:
    """``holder``'s storage changed structure: its element views expire."""
    _expire_children(holder, REASON_STRUCTURE)


class ValueConjugate(_core.ValueBase):
    """Base of every non-object conjugate (red view or black value).

    Slots: ``_p`` native pointer (or the expired sentinel), ``_rt`` runtime,
    ``_parent`` what it points into (None when black), ``_key`` its key in
    the parent's cache, ``_owner`` handle of the object that owns the memory
    (0 when black or inside a black value), ``_black`` value handle (0 when
    red), ``_v`` cached child views, ``_spec`` its type description.
    """

    __slots__ = ("_p", "_rt", "_parent", "_key", "_owner", "_black", "_v", "_spec", "__weakref__")
    __class__ = FIXED_CLASS  # never re-classed: its memory is laid out for its own type
    _p: Any
    _rt: Runtime
    _parent: Any
    _key: Any
    _owner: int
    _black: int
    _v: dict[Any, ValueConjugate] | None
    _spec: ValueSpec

    # ---- colour and lifetime ------------------------------------------------
    @property
    def is_black(self) -> bool:
        """True for values owned by Python (created from Python or cloned)."""
        return self._black != 0

    @property
    def is_expired(self) -> bool:
        """True once the memory may be gone; never raises."""
        return type(self._p) is ExpiredPointer

    def dispose(self) -> None:
        """Free a black value now (views into it expire); no-op if already
        disposed. Red views cannot be disposed: ``TypeError``."""
        if self._black == 0:
            if type(self._p) is ExpiredPointer:
                return
            raise TypeError(f"{type(self).__name__} is a red view (owned natively) and cannot "
                            "be disposed; clone() it to get a black copy you own")
        handle, runtime = self._black, self._rt
        if type(self._p) is not ExpiredPointer:
            self._p = make_expired(type(self).__name__, _describe_view, self, "it was disposed")
            _expire_children(self, REASON_PARENT)
        self._black = 0
        runtime._free_value(handle)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.dispose()

    def __del__(self) -> None:
        # Finalisers run on any thread, even inside collections: queue only.
        handle = getattr(self, "_black", 0)
        if handle:
            self._black = 0
            self._rt._deferred_value_frees.append(handle)
            self._rt._flush_pending = True

    def clone(self) -> Any:
        """A black deep copy (always black, independent of this one)."""
        self._live()
        return self._rt._clone_value(self._spec, self)

    # ---- helpers --------------------------------------------------------------
    def _live(self) -> Any:
        """The native pointer, after checking this conjugate has not expired."""
        pointer = self._p
        if type(pointer) is ExpiredPointer:
            raise expired_error(pointer)
        return pointer

    def _address(self) -> int:
        """The native address of the value (checks expiry)."""
        self._live()
        address: int = self._spec.address_of(self._p)
        return address

    def __copy__(self) -> Any:
        return self.clone()

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self.clone()

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        raise TypeError(f"{type(self).__name__} conjugates cannot be pickled; "
                        "convert to a Python value first")

    def _expired_repr(self) -> str:
        return f"<{type(self).__name__} expired: {expired_reason(self._p)}>"


class ImmutableValue:
    """Mixin of the value types that own no native memory and never change
    (``Name``, ``SubclassOf``, ``LazyObjectPtr``, ``FieldPath``): always
    black, never expired, the clone is the value itself, nothing to free."""

    __slots__ = ()

    @property
    def is_black(self) -> bool:
        """Always True: values owned by Python (nothing native to free)."""
        return True

    @property
    def is_expired(self) -> bool:
        """Never: the value does not depend on native memory."""
        return False

    def clone(self) -> Any:
        """Immutable: the clone is the value itself."""
        return self

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self

    def dispose(self) -> None:
        """Nothing to free."""


def register_view(view: ValueConjugate) -> None:
    """Record a new red view in the innermost open scope, if any."""
    scopes = _scopes.get()
    if scopes:
        scopes[-1].append(view)


def make_view(cls: type[ValueConjugate], runtime: Runtime, spec: ValueSpec, pointer: Any,
              parent: Any, key: Any, owner: int) -> Any:
    """Create (and cache in ``parent``, if any) a red view. Without a parent
    (a parameter block of a call from native code) only its scope expires it."""
    view = object.__new__(cls)
    view._p = pointer
    view._rt = runtime
    view._parent = parent
    view._key = key
    view._owner = owner
    view._black = 0
    view._v = None
    view._spec = spec
    if parent is not None:
        cache = parent._v
        if cache is None:
            parent._v = cache = {}
        cache[key] = view
    register_view(view)
    return view


def make_black(cls: type[ValueConjugate], runtime: Runtime, spec: ValueSpec, pointer: Any,
               handle: int) -> Any:
    """Wrap a freshly allocated black value block."""
    value = object.__new__(cls)
    value._p = pointer
    value._rt = runtime
    value._parent = None
    value._key = None
    value._owner = 0
    value._black = handle
    value._v = None
    value._spec = spec
    return value

