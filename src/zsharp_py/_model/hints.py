"""Error messages that say how to fix the mistake: the zs type to use for a
Python annotation or value, "Did you mean ...?" for a mistyped attribute,
and counts with their noun in the right number.

Nothing here is on a hot path: the hints are made only once something has
failed (a class declaration that is refused, a store into an attribute the
class does not have).
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from .. import _core
from .kinds import Scalar

__all__ = ["plural", "type_text", "unsupported_hint", "did_you_mean", "name_exported_types"]

# The zs type a Python type stands for inside a zs container or zs.Optional.
PYTHON_EQUIVALENTS: dict[Any, str] = {
    int: "zs.Int64",
    float: "zs.Float64",
    str: "zs.String",
    bool: "zs.Bool",
}
_CONTAINERS: dict[Any, str] = {list: "zs.Array", set: "zs.Set", frozenset: "zs.Set", dict: "zs.Map"}
_TYPE_TABLE = "(or another zs type: see the type table)"


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``"1 live object"``, ``"2 live objects"`` (``nouns`` when the plural
    is not ``noun + "s"``)."""
    return f"{count} {noun if count == 1 else (nouns or noun + 's')}"


# The types ``zsharp_py`` exports, by what users write for them: filled by
# zsharp_py/__init__.py (name_exported_types), the one module that knows.
_EXPORTED: dict[type, str] = {}


def name_exported_types(names: dict[str, Any]) -> None:
    """Let hints write ``zs.Name`` for each type ``zsharp_py`` exports."""
    _EXPORTED.update(
        {value: f"zs.{name}" for name, value in names.items() if isinstance(value, type)}
    )


def _zs_name(cls: type) -> str | None:
    """``zs.Int32`` for a type the package exports, else None."""
    return _EXPORTED.get(cls)


def type_text(annotation: Any) -> str:
    """An annotation as its author would write it (``dict[str, int]``,
    ``int | None``, ``zs.Int32``, ``Actor``)."""
    if isinstance(annotation, str):
        # ``x: "Later"`` under ``from __future__ import annotations`` is the
        # text of a string literal: show what it names, without the quotes.
        if len(annotation) >= 2 and annotation[0] == annotation[-1] and annotation[0] in "'\"":
            return annotation[1:-1]
        return annotation
    if isinstance(annotation, typing.ForwardRef):
        return annotation.__forward_arg__
    if annotation is None or annotation is type(None):
        return "None"
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_text(a) for a in arguments)
    if origin is not None and arguments:
        shown = ", ".join("..." if a is Ellipsis else type_text(a) for a in arguments)
        return f"{type_text(origin)}[{shown}]"
    if isinstance(annotation, type):
        # A zs specialisation (zs.Array[zs.Int32], zs.SoftObjectPtr["Actor"]):
        # its generic, then its type arguments written the same way.
        special = annotation.__dict__.get("_zs_args") or (
            (annotation.__dict__["_zs_arg"],) if "_zs_arg" in annotation.__dict__ else ()
        )
        if special:
            shown = ", ".join(type_text(a) for a in special)
            return f"{type_text(annotation.__bases__[0])}[{shown}]"
        if annotation.__module__ == "typing":
            return f"typing.{annotation.__name__}"  # typing.Any is a class from 3.11 on
        return _zs_name(annotation) or annotation.__name__
    return repr(annotation)


def _is_zs_type(value: Any) -> bool:
    """Whether ``value`` is a type a property can have (a zs type, a struct
    or an object class)."""
    if not isinstance(value, type):
        return False
    return issubclass(value, (Scalar, _core.ObjectConjugate)) or hasattr(value, "_zs_value_kind")


def _element(annotation: Any) -> str | None:
    """The zs type text for ``annotation`` inside a container or
    ``zs.Optional``, or None when there is no direct equivalent."""
    if isinstance(annotation, (str, typing.ForwardRef)):
        return type_text(annotation)  # a forward reference: kept as written
    if annotation in PYTHON_EQUIVALENTS:
        return PYTHON_EQUIVALENTS[annotation]
    if annotation in (bytes, bytearray):
        return "zs.Array[zs.UInt8]"
    if _is_zs_type(annotation):
        return type_text(annotation)
    origin = typing.get_origin(annotation) or annotation
    if origin in _CONTAINERS:
        arguments = typing.get_args(annotation)
        wanted = 2 if origin is dict else 1
        if len(arguments) != wanted:
            return None
        elements = [_element(a) for a in arguments]
        if any(e is None for e in elements):
            return None
        return f"{_CONTAINERS[origin]}[{', '.join(typing.cast('list[str]', elements))}]"
    return None


def _container_hint(annotation: Any) -> str:
    """``use zs.Array[zs.Int64]`` for ``list[int]``; for a bare or unusual
    container, the zs container with a placeholder."""
    origin = typing.get_origin(annotation) or annotation
    converted = _element(annotation)
    if converted is not None:
        return f"use {converted}"
    placeholder = "K, V" if origin is dict else "T"
    return (
        f"use {_CONTAINERS[origin]}[{placeholder}] with zs element types, e.g. "
        f"{_CONTAINERS[origin]}[{'zs.Name, zs.Int32' if origin is dict else 'zs.Int32'}]"
    )


def unsupported_hint(annotation: Any) -> str:
    """What to write instead of an annotation no property can have."""
    origin = typing.get_origin(annotation) or annotation
    if origin in _CONTAINERS:
        return f"{_container_hint(annotation)} {_TYPE_TABLE}"
    if annotation in (bytes, bytearray):
        return f"use zs.Array[zs.UInt8] {_TYPE_TABLE}"
    if origin is tuple:
        return f"use a zs.Struct subclass with one annotated member per item {_TYPE_TABLE}"
    if origin in (typing.Union, types.UnionType):
        arguments = typing.get_args(annotation)
        members = [a for a in arguments if a is not type(None)]
        if len(members) == 1 and len(arguments) == 2:
            inner = members[0]
            inner_origin = typing.get_origin(inner) or inner
            if inner_origin in _CONTAINERS:
                return (
                    f"{_container_hint(inner)} (an empty container stands for none) {_TYPE_TABLE}"
                )
            converted = _element(inner)
            if converted is not None and not converted.startswith("zs.Array"):
                return f"use zs.Optional[{converted}] {_TYPE_TABLE}"
        elif len(members) > 1:
            return (
                "a property has exactly one zs type: the only union allowed is "
                "`Class | None`, a reference to a zs.Object class (see the type table)"
            )
    return "native properties hold only zs types (see the type table)"


def did_you_mean(name: str, candidates: typing.Iterable[str]) -> str:
    """``" Did you mean 'health'?"`` for the closest candidate, or ``""``."""
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""
