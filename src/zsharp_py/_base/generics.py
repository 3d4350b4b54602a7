"""``TypeParameters``: what makes the run-time generic classes (containers,
object wrappers) generic for type checkers, at no run-time cost.

``zs.Array[T]``, ``zs.SubclassOf[T]`` and the rest specialise themselves at
run time through their own ``__class_getitem__`` (one cached subclass per
type argument, see ``_types/containers.py``'s
``_Generic`` and ``_types/pointers.py``'s ``_Specialised``). Type checkers cannot see that, so each
such class also lists ``TypeParameters[T]`` among its bases:

* for type checkers ``TypeParameters`` *is* ``typing.Generic``, so the class
  is generic in ``T`` and its methods are typed with ``T``;
* at run time ``TypeParameters[...]`` is plain ``object``, which every class
  derives from anyway: the method resolution order, the specialisation,
  its cache and its error messages stay exactly as they were, and no
  ``typing.Generic`` machinery runs when a class is specialised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

__all__ = ["TypeParameters", "forget_cached", "key_mentions"]

if TYPE_CHECKING:
    from typing import Generic as TypeParameters
else:

    class _TypeParameters:
        """``TypeParameters[...]`` at run time: ``object`` (see the module)."""

        __slots__ = ()

        def __getitem__(self, parameters: Any) -> type:
            return object

        def __repr__(self) -> str:
            return "zsharp_py._typing.TypeParameters"

    TypeParameters = _TypeParameters()


def key_mentions(key: Any, mentions: Callable[[Any], bool]) -> bool:
    """Whether a structural key (nested tuples of types, names, numbers)
    has a part for which ``mentions`` is true."""
    if isinstance(key, (tuple, frozenset)):
        return any(key_mentions(part, mentions) for part in key)
    return mentions(key)


def forget_cached(base: type, mentions: Callable[[Any], bool]) -> None:
    """Drop, from the specialisation caches (``_zs_cache``) of ``base`` and
    its subclasses, the entries whose key or specialised class mentions a
    type ``mentions`` names: a closed runtime's host classes, which these
    process-wide caches would otherwise keep alive with all they hold."""
    pending: list[type] = [base]
    while pending:
        cls = pending.pop()
        pending.extend(type.__subclasses__(cls))
        cache = cls.__dict__.get("_zs_cache")
        if not cache:
            continue
        for key in [k for k, made in cache.items() if key_mentions(k, mentions) or mentions(made)]:
            del cache[key]
