"""``TypeParameters``: what makes the run-time generic classes (containers,
object wrappers) generic for type checkers, at no run-time cost.

``zs.Array[T]``, ``zs.SubclassOf[T]`` and the rest specialise themselves at
run time through their own ``__class_getitem__`` (one cached subclass per
type argument, see ``_containers._Generic`` and
``_object_wrappers._Specialised``). Type checkers cannot see that, so each
such class also lists ``TypeParameters[T]`` among its bases:

* for type checkers ``TypeParameters`` *is* ``typing.Generic``, so the class
  is generic in ``T`` and its methods are typed with ``T``;
* at run time ``TypeParameters[...]`` is plain ``object``, which every class
  derives from anyway: the method resolution order, the specialisation,
  its cache and its error messages stay exactly as they were, and no
  ``typing.Generic`` machinery runs when a class is specialised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["TypeParameters"]

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
