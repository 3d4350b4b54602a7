"""The AttributeError for an attribute a native object or struct does not
have: which zs type to declare it with (or, for a plain Python value on an
object, Python state: ``zs.state()``), or the name the user probably
meant. Called from C (native/binding/conjugates.c) only after the generic
store failed, so nothing here is on a hot path."""

from __future__ import annotations

from typing import Any

from .hints import PYTHON_EQUIVALENTS, did_you_mean, type_text
from .object import Object
from .struct import Struct
from .values import ValueConjugate

__all__ = ["attribute_error"]


def _value_type(value: Any) -> str | None:
    """The zs type to declare for a property holding ``value``, or None."""
    if isinstance(value, Object):
        return f'"{type(value).__name__} | None"'
    if isinstance(value, ValueConjugate):
        return type_text(type(value))
    if type(value) in PYTHON_EQUIVALENTS:
        return PYTHON_EQUIVALENTS[type(value)]
    if isinstance(value, (bytes, bytearray)):
        return "zs.Array[zs.UInt8]"
    if isinstance(value, dict):
        if value:
            key, item = next(iter(value.items()))
            key_type, item_type = _value_type(key), _value_type(item)
            if key_type is not None and item_type is not None and not key_type.startswith('"'):
                return f"zs.Map[{key_type}, {item_type}]"
        return "zs.Map[zs.Name, zs.Int32]"
    if isinstance(value, (list, set, frozenset)):
        container = "zs.Array" if isinstance(value, list) else "zs.Set"
        element = _value_type(next(iter(value))) if value else None
        if element is not None and element.startswith('"'):
            element = element.strip('"').removesuffix(" | None")  # object elements: the class
        return f"{container}[{element or 'zs.Int32'}]"
    return None


def _python_type(value: Any) -> str:
    """How to annotate Python state holding ``value``."""
    if value is None:
        return "object"
    if callable(value) and not isinstance(value, type):
        return "Callable[..., Any]"
    return type(value).__qualname__


def _public_names(obj: Any) -> list[str]:
    """The declared properties and public attributes of ``obj``'s class."""
    names = [n for n in dir(type(obj)) if not n.startswith("_")]
    layout = type(obj).__dict__.get("_zs_layout")
    if layout is not None:
        names.extend(p.name for p in layout.properties)
    return names


# attribute_error's ``action`` (native/binding/conjugates.c).
_WRITE, _DELETE = 1, 2


def attribute_error(
    obj: Any, name: str, error: BaseException, action: int, value: Any
) -> BaseException | None:
    """The AttributeError to raise instead of ``error``, for an attribute
    ``obj``'s class does not have (written or deleted); None keeps
    ``error``. Called from C (native/binding/conjugates.c) only after the
    generic store failed."""
    if name.startswith("_"):
        return None  # private and dunder probes (hasattr, copy, pickle...) stay cheap
    cls = type(obj).__name__
    suggestion = did_you_mean(name, _public_names(obj))
    if action == _WRITE and isinstance(obj, (Object, Struct)):
        holder, body, holds = (
            ("objects", "class", "properties")
            if isinstance(obj, Object)
            else ("structs", "struct", "members")
        )
        declared = _value_type(value)
        if declared is None and isinstance(obj, Object) and not isinstance(value, tuple):
            # No zs type holds it (a function, an instance of a Python
            # class...): only Python state can.
            message = (
                f"'{cls}' object has no attribute '{name}': native objects hold only "
                "their declared properties and Python state; declare it in the class "
                f"body as Python state (e.g. `{name}: {_python_type(value)} = "
                f"zs.state({'default=None' if value is None else ''})`).{suggestion}"
            )
            return AttributeError(message, name=name, obj=obj)
        if declared is None and isinstance(value, tuple):
            example = f"a zs.Struct subclass, e.g. `{name}: Pair`"
        else:
            example = f"e.g. `{name}: {declared or 'zs.Int32'}`"
        state = ""
        if isinstance(obj, Object) and isinstance(value, (dict, list, set, frozenset)):
            kind = type(value).__name__
            state = (
                " Or, for a plain Python value the collector does not trace, declare "
                f"Python state (e.g. `{name}: {kind} = zs.state(factory={kind})`)."
            )
        message = (
            f"'{cls}' object has no attribute '{name}': native {holder} hold only "
            f"their declared {holds}; declare it in the {body} body with a zs type "
            f"({example}).{state}{suggestion}"
        )
    elif suggestion:
        message = f"'{cls}' object has no attribute '{name}'.{suggestion}"
    else:
        return None
    return AttributeError(message, name=name, obj=obj)
