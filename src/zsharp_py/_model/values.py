"""Value conjugates: the red views and black values of every non-object type
(structs, strings, containers, delegates, wrappers), and scopes. The
conjugates themselves are C (``zsharp_py._core.ValueConjugate``,
native/binding/value.c); their lifetimes are rules 3 to 5 of
docs/design.md, and docs/object-model.md, "Values: black and red", is the
user's view.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NoReturn

from .. import _core
from .._base.context import RuntimeLike
from .._base.expiry import FIXED_CLASS

__all__ = ["ValueConjugate", "ImmutableValue", "scope", "open_scope", "close_scope"]

# The stack of open scopes in this context: each a list of the views
# obtained while it was innermost (native/binding/value.c appends to it),
# with its serial (_core.scope_opened(): it orders the scope among the
# call scopes of calls from native code, native/binding/value.h).
_scopes: contextvars.ContextVar[tuple[tuple[list[Any], int], ...]] = contextvars.ContextVar(
    "zsharp_scopes", default=()
)


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


def open_scope() -> tuple[contextvars.Token[tuple[tuple[list[Any], int], ...]], list[Any]]:
    """Open a scope without a ``with`` block (hot paths); pass what it
    returns to ``close_scope``."""
    views: list[Any] = []
    serial = _core.scope_opened()
    try:
        token = _scopes.set(_scopes.get() + ((views, serial),))
    except BaseException:
        _core.scope_closed(views)
        raise
    return token, views


def close_scope(
    token: contextvars.Token[tuple[tuple[list[Any], int], ...]], views: list[Any]
) -> None:
    """End a scope from ``open_scope``: its views expire."""
    try:
        _scopes.reset(token)
    finally:
        _core.scope_closed(views)


class ValueConjugate(_core.ValueConjugate):
    """Base of every non-object conjugate (red view or black value)."""

    __slots__ = ()
    __class__ = FIXED_CLASS  # never re-classed: its memory is laid out for its own type
    if TYPE_CHECKING:

        @property
        def _rt(self) -> RuntimeLike: ...

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _core.value_class_init(cls)

    @classmethod
    def _zs_prepare(cls) -> _core.Kind:
        """First use of a value class (zsharp_py._core calls this before
        making its first value): make the kind its ``_zs_value_kind``
        describes and keep it on the class, where the C core finds it."""
        describe = getattr(cls, "_zs_value_kind", None)
        if describe is None:
            raise TypeError(f"{cls.__name__} values cannot be created directly")
        kind: _core.Kind = describe(cls).kind
        type.__setattr__(cls, "_zs_kind", kind)
        return kind

    def _expired_repr(self) -> str:
        return f"<{type(self).__name__} expired: {self._expired_reason}>"

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        raise TypeError(
            f"{type(self).__name__} conjugates cannot be pickled; convert to a Python value first"
        )


_core.value_class_init(ValueConjugate)


class ImmutableValue:
    """Mixin of the value types that own no native memory and never change
    (``SubclassOf``, ``LazyObjectPtr``, ``FieldPath``): always black, never
    expired, the clone is the value itself, nothing to free."""

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
