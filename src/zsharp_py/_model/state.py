"""Python state on native objects: ``zs.state()``.

A native class keeps its data in native properties, which the native
collector traces. Game code also keeps plain Python values on its objects
(caches, callbacks, handles of other systems): ``cache: dict[str, int] =
zs.state(factory=dict)`` declares one. The class statement (``ObjectMeta``,
object.py) takes each declaration out of the class body and makes it a slot
of the class's conjugates, read and written through a
``_core.StateProperty`` (native/binding/state.c); the conjugate table holds
the conjugates of such a class for as long as their objects live, so the
state is never lost while its object lives and is released when it dies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

__all__ = ["MISSING", "StateField", "state"]

_T = TypeVar("_T")


class _Missing:
    """The type of ``MISSING``: no default, or no factory."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class StateField:
    """What ``zs.state()`` returns: a declaration, which the class statement
    of a ``zs.Object`` subclass takes out of the class body (the class
    attribute is then the state's descriptor)."""

    __slots__ = ("default", "factory")

    def __init__(self, default: Any, factory: Any) -> None:
        self.default = default
        self.factory = factory

    def __set_name__(self, owner: type, name: str) -> None:
        # Only reached for a class whose statement did not take the
        # declaration: a class that is not a zs.Object subclass.
        raise TypeError(
            f"{owner.__name__}.{name}: zs.state() declares Python state of a native "
            "class; only a zs.Object subclass can have it"
        )

    def __repr__(self) -> str:
        if self.factory is not MISSING:
            return f"zs.state(factory={self.factory!r})"
        if self.default is not MISSING:
            return f"zs.state(default={self.default!r})"
        return "zs.state()"


@overload
def state(*, default: _T) -> _T: ...
@overload
def state(*, factory: Callable[[], _T]) -> _T: ...
@overload
def state() -> Any: ...
def state(*, default: Any = MISSING, factory: Any = MISSING) -> Any:
    """Declare an attribute of a native class that holds any Python value.

    ``zs.state()`` in the body of a ``zs.Object`` subclass declares Python
    state: an attribute the native collector does not trace (it may hold
    any Python object, including the object's own conjugate) and which
    lives exactly as long as the native object. It survives collections
    while only native references reach the object, and is released when
    the object dies (collected, marked as garbage, or its runtime closed);
    from then on reading it raises ``zs.ExpiredConjugateError``.

    ``default`` is shared by every object (so it must be immutable: a list,
    dict or set raises ``ValueError``); ``factory`` is called once per
    object for its first value. Both apply when the attribute is first read
    without having been assigned; without either, reading it first raises
    ``AttributeError``. ``del obj.attribute`` puts it back to its default.

    >>> import zsharp_py as zs
    >>> class Hero(zs.Object):
    ...     hp: zs.Int32 = 10
    ...     cache: dict[str, int] = zs.state(factory=dict)
    ...     target_name: str | None = zs.state(default=None)
    >>> class Team(zs.Object):
    ...     leader: Hero | None
    >>> with zs.Runtime() as rt:
    ...     team = Team(); team.add_to_root()
    ...     team.leader = Hero()
    ...     team.leader.cache["gold"] = 5
    ...     _ = rt.collect_garbage()     # only the native reference keeps the hero
    ...     (team.leader.cache, team.leader.target_name)
    ({'gold': 5}, None)
    """
    if default is not MISSING and factory is not MISSING:
        raise TypeError("zs.state() takes a default or a factory, not both")
    if factory is not MISSING and not callable(factory):
        raise TypeError(f"zs.state(factory=...) must be callable, not {type(factory).__name__}")
    if default is not MISSING and type(default).__hash__ is None:
        kind = type(default).__name__
        raise ValueError(
            f"zs.state(default=...): a mutable {kind} would be shared by every object; "
            f"use zs.state(factory={kind}) for one each"
        )
    return StateField(default, factory)
