"""A native host's classes, structs and enums, bound as Python types on
first use in each runtime, by the same binder as classes declared in
Python (``class_layout``, ``struct_layout``). ``zsharp_py._core`` reads the
host's descriptions (native/binding/reflection.c); type texts resolve in
``zsharp_py``'s names and, through ``_HostNames``, the runtime's own types.
Bound types belong to the runtime that registered them.
docs/native-classes.md is the user's view.
"""

from __future__ import annotations

import enum
import inspect
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .. import _core
from .._base.generics import key_mentions
from .._model.kinds import (
    Bool,
    Float32,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    forget_kinds,
)
from .._model.object import Object, ObjectMeta, class_layout, kind_of
from .._model.struct import Struct, StructMeta, struct_layout
from .._runtime.runtime import Runtime, add_class_binder, current_runtime
from .._types.containers import Array, Map, Optional, Set
from .._types.containers import forget_specialisations as forget_containers
from .._types.delegates import Delegate, MulticastDelegate, SparseDelegate
from .._types.fieldpath import FieldPath
from .._types.object_pointers import StrongObjectPtr, WeakObjectPtr
from .._types.pointers import (
    LazyObjectPtr,
    ScriptInterface,
    SoftClassPtr,
    SoftObjectPtr,
    SubclassOf,
)
from .._types.pointers import forget_specialisations as forget_pointers
from .._types.strings import AnsiString, Name, String, Text, Utf8String
from .calls import plan_member

__all__ = [
    "ClassDescription",
    "FunctionDescription",
    "PropertyDescription",
    "StructDescription",
    "native_class",
    "native_classes",
    "native_enum",
    "native_struct",
]

# The names a type text may use besides the runtime's own types.
_TYPE_NAMES: dict[str, Any] = {
    t.__name__: t
    for t in (
        Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Float32, Float64,
        Name, String, Utf8String, AnsiString, Text, Array, Set, Map, Optional,
        Delegate, MulticastDelegate, SparseDelegate, WeakObjectPtr, StrongObjectPtr,
        SoftObjectPtr, SoftClassPtr, SubclassOf, LazyObjectPtr, ScriptInterface, FieldPath,
    )
}  # fmt: skip
_TYPE_NAMES["None"] = None

_DIRECTIONS = ("in", "out", "inout", "return")


# ---------------------------------------------------------------------------
# Descriptions, read from the native ones
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PropertyDescription:
    """A property, struct member or function parameter as described."""

    name: str
    type: str
    """As a script writes it: ``"Int32"``, ``"Actor | None"``, ``"Array[Vec3]"``."""
    offset: int
    direction: str = "in"
    """Parameters only: ``"in"``, ``"out"``, ``"inout"`` or ``"return"``."""
    native: int = 0
    """Properties and members: the address of the native type the host gave
    (0 for plain data)."""


@dataclass(frozen=True)
class FunctionDescription:
    """A native function (or event) of a class."""

    name: str
    entry: int
    """The C entry point's address (0: an event with no native default)."""
    user: int
    is_static: bool
    is_event: bool
    block_size: int
    parameters: tuple[PropertyDescription, ...]

    @property
    def signature_text(self) -> str:
        """``(amount: Float64, instigator: Actor | None) -> Float64``."""
        taken = ", ".join(
            f"{p.name}: {p.type}" for p in self.parameters if p.direction in ("in", "inout")
        )
        return f"({taken}) -> {self.result_text}"

    @property
    def result_text(self) -> str:
        """What a call gives back: the result, then the out and in-out
        values (``None``, one type, or ``tuple[...]``)."""
        given = [p.type for p in self.parameters if p.direction == "return"] + [
            p.type for p in self.parameters if p.direction in ("out", "inout")
        ]
        return given[0] if len(given) == 1 else f"tuple[{', '.join(given)}]" if given else "None"


@dataclass(frozen=True)
class ClassDescription:
    """A native class as its host described it (a Python class registers
    the same kind of description natively: zsharp_py/_runtime/runtime.py
    ``_register_class``)."""

    name: str
    parent: str | None
    size: int
    properties: tuple[PropertyDescription, ...]
    functions: tuple[FunctionDescription, ...]


@dataclass(frozen=True)
class StructDescription:
    """A native struct as its host described it."""

    name: str
    size: int
    align: int
    properties: tuple[PropertyDescription, ...]


def _properties(rows: tuple[_core.PropertyRow, ...]) -> tuple[PropertyDescription, ...]:
    """The descriptions of the rows ``zsharp_py._core`` read from the host's."""
    return tuple(
        PropertyDescription(
            name, type_text, offset, _DIRECTIONS[direction] if direction < 4 else "in", native
        )
        for name, type_text, offset, direction, native, _ in rows
    )


def _traits(rows: tuple[_core.PropertyRow, ...]) -> tuple[_core.TypeTraits | None, ...]:
    """What each row's native type is (kind, size, flags), or None."""
    return tuple(row[5] for row in rows)


def _read_class(row: _core.ClassRow) -> ClassDescription:
    """The description of a class, from the row ``Runtime._heap_describe_class``
    read (native/binding/reflection.c)."""
    name, parent, _, size, _, properties, functions = row
    return ClassDescription(
        name,
        parent,
        size,
        _properties(properties),
        tuple(
            FunctionDescription(
                function_name,
                entry,
                user,
                bool(flags & _core.FUNCTION_STATIC),
                bool(flags & _core.FUNCTION_EVENT),
                block_size,
                _properties(parameters),
            )
            for function_name, entry, user, flags, block_size, parameters in functions
        ),
    )


# ---------------------------------------------------------------------------
# Binding, per runtime
# ---------------------------------------------------------------------------


class _Bound:
    """A runtime's bound structs and enums (its classes are in the runtime's
    own class table, which Python-declared classes share)."""

    __slots__ = ("classes", "structs", "enums", "names")

    def __init__(self, runtime: Runtime) -> None:
        self.classes: list[type[Object]] = []
        self.structs: dict[str, type[Struct]] = {}
        self.enums: dict[str, type[enum.IntEnum]] = {}
        self.names = _HostNames(runtime)

    def close(self) -> None:
        """The runtime closed: its types stay usable as Python types only,
        and the process-wide caches of kinds and specialisations
        (``Array[Actor]``, ``SubclassOf[Actor]``) forget them and the
        Python classes derived from them, so that nothing keeps a closed
        runtime's types alive."""
        bound = {*self.classes, *self.structs.values(), *self.enums.values()}

        def mentions(part: Any) -> bool:
            if not isinstance(part, type):
                return False
            if any(base in bound for base in part.__mro__):
                return True
            # A specialisation (Array[Array[Actor]]) mentions its arguments.
            arguments = part.__dict__.get("_zs_args", ()), part.__dict__.get("_zs_arg")
            return key_mentions(arguments, mentions)

        forget_kinds(mentions)
        forget_containers(mentions)
        forget_pointers(mentions)
        self.classes.clear()
        self.structs.clear()
        self.enums.clear()


def _bound(runtime: Runtime) -> _Bound:
    state: _Bound = runtime.feature_state(_Bound, lambda: _Bound(runtime))
    return state


class _HostNames(Mapping[str, Any]):
    """The runtime's classes, structs and enums by name, bound on lookup:
    the local names type texts resolve in."""

    __slots__ = ("_runtime",)

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def __getitem__(self, name: str) -> Any:
        found = _find(self._runtime, name)
        if found is None:
            raise KeyError(name)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _find(runtime: Runtime, name: str) -> type | None:
    """The bound class, struct or enum of the runtime named ``name``, or None."""
    encoded = name.encode("utf-8")
    # No resolver here: a script class not registered yet is not the host's.
    class_id = runtime._heap_find_class(encoded)
    if class_id is not None:
        return _bind_class_id(runtime, class_id)
    struct = runtime._heap_find_struct(encoded)
    if struct is not None:
        return _bind_struct(runtime, struct)
    found_enum = runtime._heap_find_enum(encoded)
    if found_enum is not None:
        return _bind_enum(runtime, found_enum)
    return None


def _scope(runtime: Runtime) -> tuple[dict[str, Any], Mapping[str, Any]]:
    """Where a description's type texts resolve (``_zs_scope`` of a bound type)."""
    return dict(_TYPE_NAMES), _bound(runtime).names


def _bind_class_id(runtime: Runtime, class_id: int) -> type[Object]:
    """The conjugate class of the native class ``class_id`` of ``runtime``:
    the Python class registered it, or bind the host's description now
    (the class binder, ``add_class_binder``)."""
    known = runtime._classes_by_id[class_id] if class_id < len(runtime._classes_by_id) else None
    if known is not None:
        return known
    row = runtime._heap_describe_class(class_id)
    described = _read_class(row)
    parent_id, address = row[2], row[4]
    parent = _bind_class_id(runtime, parent_id) if parent_id is not None else Object
    namespace: dict[str, Any] = {
        "__module__": "zsharp_py.native",
        "__qualname__": described.name,
        "__doc__": _class_doc(described),
        "_zs_description": described,
    }
    cls = typing.cast("type[Object]", ObjectMeta(described.name, (parent,), namespace))
    type.__setattr__(cls, "_zs_scope", _scope(runtime))
    # Recorded before the layout: a property may name the class itself.
    runtime._record_class(cls, address, class_id)
    _bound(runtime).classes.append(cls)
    layout = class_layout(cls)
    own = layout.properties[len(layout.properties) - layout.own_count :]
    _check_native_types(runtime, described.name, own, described.properties, _traits(row[5]))
    for function in described.functions:
        type.__setattr__(cls, function.name, _native_function(runtime, cls, function))
    return cls


def _native_function(runtime: Runtime, cls: type[Object], function: FunctionDescription) -> Any:
    """The method of one described function: a ``_core.NativeFunction``
    that marshals in C from its members' kinds (native/binding/functions.c).
    It runs in ``runtime`` only, whose host gave its entry and user pointer
    (a static function too, whatever runtime is current; a closed one
    raises ``ExpiredConjugateError``)."""
    what = f"{cls.__name__}.{function.name}"
    members = []
    for parameter in function.parameters:
        kind = kind_of(cls, parameter.type, f"{what}: {parameter.name}")
        label = "result" if parameter.direction == "return" else f"argument {parameter.name!r}"
        _, mode, detail, _ = plan_member(kind, parameter.offset, "")
        members.append(
            (
                parameter.name,
                _DIRECTIONS.index(parameter.direction),
                parameter.offset,
                mode,
                detail,
                f"{what}{function.signature_text}: {label}",
            )
        )
    return _core.NativeFunction(
        name=function.name,
        what=f"{what}{function.signature_text}",
        owner=cls,
        entry=function.entry,
        user=function.user,
        flags=(_core.FUNCTION_STATIC if function.is_static else 0)
        | (_core.FUNCTION_EVENT if function.is_event else 0),
        size=function.block_size,
        members=tuple(members),
        signature=_signature(function),
        doc=_function_doc(function),
        runtime=runtime,
    )


def _function_doc(function: FunctionDescription) -> str:
    """What ``help()`` shows under the signature."""
    kind = "A static function" if function.is_static else "A function"
    if function.is_event:
        kind = "An event: a Python subclass may override it, and native calls reach the override"
        if not function.entry:
            kind += "; it has no native default (calling it does nothing)"
    outputs = [p.name for p in function.parameters if p.direction in ("out", "inout")]
    lines = [f"{function.name}{function.signature_text}", "", f"{kind}, of the native host."]
    if outputs:
        first = (
            "its result, then " if any(p.direction == "return" for p in function.parameters) else ""
        )
        lines.append(f"It returns {first}{', '.join(outputs)}, as a tuple.")
    return "\n".join(lines)


def _signature(function: FunctionDescription) -> inspect.Signature:
    """The Python signature ``help()`` and ``inspect.signature`` show: the
    arguments taken (after ``self`` unless static), and what comes back."""
    parameters = [
        inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=p.type)
        for p in function.parameters
        if p.direction in ("in", "inout")
    ]
    if not function.is_static:
        parameters.insert(0, inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY))
    return inspect.Signature(parameters, return_annotation=function.result_text)


def _class_doc(described: ClassDescription) -> str:
    lines = [f"{described.name}: a class of the native host ({described.size} bytes)."]
    if described.properties:
        lines.append("")
        lines.append(
            "Properties: " + ", ".join(f"{p.name}: {p.type}" for p in described.properties)
        )
    return "\n".join(lines)


def _bind_struct(runtime: Runtime, row: _core.StructRow) -> type[Struct]:
    """The ``zs.Struct`` subclass of a host's struct in ``runtime``, from
    the row ``Runtime._heap_find_struct`` read."""
    name, size, align, members, native_type = row
    bound = _bound(runtime)
    known = bound.structs.get(name)
    if known is not None:
        return known
    described = StructDescription(name, size, align, _properties(members))
    namespace: dict[str, Any] = {
        "__module__": "zsharp_py.native",
        "__qualname__": name,
        "__doc__": f"{name}: a struct of the native host ({described.size} bytes).",
        "_zs_description": described,
        "_zs_align": described.align,
    }
    cls = typing.cast("type[Struct]", StructMeta(name, (Struct,), namespace))
    type.__setattr__(cls, "_zs_scope", _scope(runtime))
    bound.structs[name] = cls
    layout = struct_layout(cls)
    runtime._preset_native_type(layout.kind, native_type)
    _check_native_types(runtime, name, layout.properties, described.properties, _traits(members))
    return cls


def _check_native_types(
    runtime: Runtime,
    owner: str,
    infos: Any,
    properties: tuple[PropertyDescription, ...],
    traits: tuple[_core.TypeTraits | None, ...],
) -> None:
    """Refuse a description whose type text and native type disagree: the
    collector traces and frees the member through the native type, Python
    reads and writes it through the text's kind, so both must be one type
    (the same type, or one of the same kind, size and flags: ``traits``
    are the described types', read with the description)."""
    for info, described, given in zip(infos, properties, traits, strict=True):
        wanted, *wanted_traits = runtime._heap_native_type_traits(info.kind.kind)
        if not described.native:
            if wanted_traits[0] == _core.TYPE_PLAIN:
                continue
            raise TypeError(
                f"{owner}.{described.name}: {described.type} is not plain data, so its "
                "description must give its native type (zs_property_desc.native)"
            )
        if described.native != wanted and (given is None or list(given) != wanted_traits):
            raise TypeError(
                f"{owner}.{described.name}: the description says {described.type}, but its "
                "native type is another one (zs_property_desc.native)"
            )


def _bind_enum(runtime: Runtime, row: _core.EnumRow) -> type[enum.IntEnum]:
    """The ``enum.IntEnum`` of a host's enum in ``runtime`` (from the row
    ``Runtime._heap_find_enum`` read): a property of that type stores its
    underlying integer type."""
    name, underlying, items = row
    bound = _bound(runtime)
    known = bound.enums.get(name)
    if known is not None:
        return known
    made = enum.IntEnum(name, list(items), module="zsharp_py.native")  # type: ignore[misc]
    made._zs_underlying = _TYPE_NAMES[underlying]  # type: ignore[attr-defined]
    bound.enums[name] = made
    return made


# ---------------------------------------------------------------------------
# Discovery (the public functions)
# ---------------------------------------------------------------------------


def _runtime(runtime: Runtime | None) -> Runtime:
    return runtime if runtime is not None else current_runtime()


def native_class(name: str, *, runtime: Runtime | None = None) -> type[Object]:
    """The class named ``name`` that the runtime's native host registered
    (or a Python class registered there), as a ``zs.Object`` subclass.

    >>> import zsharp_py as zs
    >>> class Ship(zs.Object):
    ...     speed: zs.Float64
    >>> with zs.Runtime() as rt:
    ...     _ = Ship()
    ...     zs.native_class("Ship") is Ship
    True

    ``KeyError`` when no class of that name is registered in the runtime.
    """
    if not isinstance(name, str):
        raise TypeError(f"native_class() needs a class name (str), not {type(name).__name__}")
    found = _find(_runtime(runtime), name)
    if not (isinstance(found, type) and issubclass(found, Object)):
        raise KeyError(f"no class named {name!r} is registered in this runtime")
    return found


def native_classes(*, runtime: Runtime | None = None) -> dict[str, type[Object]]:
    """Every class registered in the runtime, by name (the first of a name),
    in registration order: the host's, bound now, and Python's."""
    rt = _runtime(runtime)
    found: dict[str, type[Object]] = {}
    for class_id, name in enumerate(rt._heap_class_names()):
        found.setdefault(name, _bind_class_id(rt, class_id))
    return found


def native_struct(name: str, *, runtime: Runtime | None = None) -> type[Struct]:
    """The struct named ``name`` that the runtime's native host registered
    (``zs_struct_register``), as a ``zs.Struct`` subclass; ``KeyError``
    when there is none."""
    found = _find(_runtime(runtime), name) if isinstance(name, str) else None
    if not (isinstance(found, type) and issubclass(found, Struct)):
        raise KeyError(f"no struct named {name!r} is registered in this runtime")
    return found


def native_enum(name: str, *, runtime: Runtime | None = None) -> type[enum.IntEnum]:
    """The enum named ``name`` that the runtime's native host registered
    (``zs_enum_register``), as an ``enum.IntEnum``; ``KeyError`` when there
    is none."""
    found = _find(_runtime(runtime), name) if isinstance(name, str) else None
    if not (isinstance(found, type) and issubclass(found, enum.IntEnum)):
        raise KeyError(f"no enum named {name!r} is registered in this runtime")
    return found


add_class_binder(_bind_class_id)
