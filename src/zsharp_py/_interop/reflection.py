"""A native host's classes, structs and enums as Python types, made once
per description by the same binder as classes declared in Python
(``class_layout``, ``struct_layout``) and bound in every runtime whose host
registered them described the same way. ``zsharp_py._core`` reads the
host's descriptions (native/binding/zpy_reflection.c); type texts resolve
in ``zsharp_py``'s names and the host types they name. ``host_types``
makes a host's types before any runtime of the program exists
(zsharp_py/engines/). docs/native-classes.md and
docs/writing-game-scripts.md are the user's view.
"""

from __future__ import annotations

import enum
import functools
import inspect
import re
import threading
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
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
from .._runtime.runtime import (
    Runtime,
    add_class_binder,
    current_runtime,
    describe_runtime,
    set_host_binding,
)
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
from .calls import _crossing_kind, plan_member

__all__ = [
    "ClassDescription",
    "FunctionDescription",
    "PropertyDescription",
    "StructDescription",
    "bind_host_type",
    "host_type_fits",
    "host_types",
    "is_host_type",
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
# Host types, declared once and bound per runtime
# ---------------------------------------------------------------------------
#
# A host type (a class, struct or enum a native host describes) is made once
# per description, process-wide, and kept in ``_registry``: every runtime in
# which a host registers a type described the same way (the same name,
# members, offsets, functions, and the same for every type its type texts
# name) binds that one Python type to its own native one. Binding a class in
# a runtime records it there (``Runtime._record_class``) and gives each of
# its functions the entry and user pointer that runtime's host registered
# (``NativeFunction._bind``), dropped when the runtime closes.
#
# Binding is a transaction (``_Binding``): the types a lookup makes or
# matches, with the types they name, are checked first and recorded in the
# runtime only when every one of them passed; a type whose description is
# refused is recorded as refused in that runtime (``_Bound.refused``), and
# every later lookup of it there raises the same error. So no half-bound
# type is ever handed out or reached through a live object.

_lock = threading.RLock()  # the registry and every binding, one at a time

_registry: dict[str, list[type]] = {}
"""Every host type made, by name (several descriptions may share a name)."""

_binding = threading.local()  # .active: the transactions under way on this thread

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _property_key(p: PropertyDescription) -> tuple[Any, ...]:
    return (p.name, p.type, p.offset, p.direction)


def _class_key(described: ClassDescription, parent: str | None) -> tuple[Any, ...]:
    """What two runtimes' descriptions of a class must share for one Python
    class to serve both (addresses aside: entries and user pointers are
    each runtime's own); ``parent`` is the parent class's name."""
    return (
        "class",
        described.name,
        parent,
        described.size,
        tuple(_property_key(p) for p in described.properties),
        tuple(
            (
                f.name,
                f.is_static,
                f.is_event,
                f.entry != 0,
                f.block_size,
                tuple(_property_key(p) for p in f.parameters),
            )
            for f in described.functions
        ),
    )


def _struct_key(described: StructDescription) -> tuple[Any, ...]:
    return (
        "struct",
        described.name,
        described.size,
        described.align,
        tuple(_property_key(p) for p in described.properties),
    )


def _enum_key(row: _core.EnumRow) -> tuple[Any, ...]:
    name, underlying, items = row
    return ("enum", name, underlying, tuple(items))


def is_host_type(t: Any) -> bool:
    """Whether ``t`` is a class, struct or enum a native host described."""
    return isinstance(t, type) and "_zs_host_key" in t.__dict__


def _unusable(t: type, runtime: Runtime, problem: str) -> str:
    """The error of host type ``t`` used in a runtime where it cannot be:
    which runtime, what differs, and what to do."""
    kind = t.__dict__["_zs_host_key"][0]
    if problem.startswith("no "):  # not registered there
        hint = t.__dict__.get("_zs_install_hint") or "install its native host there first"
    else:
        hint = (
            f"the host there describes it otherwise than the one {t.__name__} was made "
            "from (another version of the host?)"
        )
    return (
        f"{t.__name__} (a {kind} of a native host) cannot be used in "
        f"{describe_runtime(runtime)}: {problem}; {hint}"
    )


class _Bound:
    """A runtime's side of binding: the host types bound there, and the
    descriptions refused there (its classes themselves are in the runtime's
    own class table, which Python-declared classes share)."""

    __slots__ = ("runtime", "types", "by_name", "refused", "names")

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.types: set[type] = set()
        self.by_name: dict[tuple[str, str], type] = {}  # ("struct" | "enum", name) -> type
        self.refused: dict[tuple[str, Any], BaseException] = {}
        self.names = _HostNames(runtime)

    def close(self) -> None:
        """The runtime closed: its host's entries are forgotten (its state
        goes with it), the types stay, for other runtimes."""
        for t in self.types:
            for function in t.__dict__.get("_zs_native_functions", {}).values():
                function._unbind(self.runtime)
        self.types.clear()
        self.by_name.clear()
        self.refused.clear()


def _bound(runtime: Runtime) -> _Bound:
    state: _Bound = runtime.feature_state(_Bound, lambda: _Bound(runtime))
    return state


class _HostNames(Mapping[str, Any]):
    """The runtime's classes, structs and enums by name, bound on lookup:
    where the type texts of a signature a host gives at run time resolve."""

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


def _scope(runtime: Runtime) -> tuple[dict[str, Any], Mapping[str, Any]]:
    """Where type texts a host gives at run time resolve: ``zsharp_py``'s
    names, then the runtime's own types (bound on lookup)."""
    return dict(_TYPE_NAMES), _bound(runtime).names


def _again(error: BaseException) -> BaseException:
    """A new exception saying what ``error`` (a refusal: a ``TypeError`` or
    ``ValueError``, made from its message) said."""
    return type(error)(*error.args)


class _Binding:
    """One binding transaction in a runtime (see above)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.bound = _bound(runtime)
        self.classes: dict[int, type[Object]] = {}  # class id -> class, to record
        self.rows: dict[type, Any] = {}  # class -> its row; struct -> its row
        self.structs: dict[str, type[Struct]] = {}
        self.enums: dict[str, type[enum.IntEnum]] = {}
        self.made: list[type] = []  # new types, registered at commit
        self.refusals: dict[tuple[str, Any], BaseException] = {}
        self.failure: BaseException | None = None  # the first error: nothing is committed

    # ---- lookups ---------------------------------------------------------------------
    def lookup(self, name: str) -> type | None:
        """The type of the runtime named ``name`` (a class first), made or
        matched, or None."""
        runtime = self.runtime
        encoded = name.encode("utf-8")
        # No resolver here: a script class not registered yet is not the host's.
        class_id = runtime._heap_find_class(encoded)
        if class_id is not None:
            return self.class_of(class_id)
        if name in self.structs:
            return self.structs[name]
        known = self.bound.by_name.get(("struct", name))
        if known is not None:
            return known
        row = runtime._heap_find_struct(encoded)
        if row is not None:
            return self.struct_of(row)
        if name in self.enums:
            return self.enums[name]
        known = self.bound.by_name.get(("enum", name))
        if known is not None:
            return known
        enum_row = runtime._heap_find_enum(encoded)
        if enum_row is not None:
            return self.enum_of(enum_row)
        return None

    def _refused(self, key: tuple[str, Any]) -> None:
        refusal = self.bound.refused.get(key)
        if refusal is not None:
            raise _again(refusal)

    def _fail(self, key: tuple[str, Any], error: BaseException) -> None:
        """A type failed to bind: the transaction fails (even if a caller
        catches the error, nothing it made is recorded), and a refused
        description is remembered."""
        if self.failure is None:
            self.failure = error
        self._refuse(key, error)

    def _refuse(self, key: tuple[str, Any], error: BaseException) -> None:
        """Remember ``error`` as the refusal of the type ``key`` names, when
        it is a refusal of a description (not a closing runtime) and no type
        it named was refused first."""
        if isinstance(error, (TypeError, ValueError)) and not getattr(error, "_zs_refusal", False):
            setattr(error, "_zs_refusal", True)  # noqa: B010 (an attribute the type does not declare)
            self.refusals[key] = error

    def class_of(self, class_id: int) -> type[Object]:
        """The class of the runtime's class ``class_id``: its Python class,
        a host class bound or scheduled, one from the registry whose
        description is the same, or one made now."""
        runtime = self.runtime
        known = runtime._classes_by_id[class_id] if class_id < len(runtime._classes_by_id) else None
        if known is not None:
            return known
        if class_id in self.classes:
            return self.classes[class_id]
        key = ("class", class_id)
        self._refused(key)
        try:
            row = runtime._heap_describe_class(class_id)
            described = _read_class(row)
            parent = self.class_of(row[2]) if row[2] is not None else Object
            host_key = _class_key(described, None if parent is Object else parent.__name__)
            for candidate in _registry.get(described.name, ()):
                if (
                    candidate.__dict__["_zs_host_key"] == host_key
                    and candidate.__bases__ == (parent,)
                    and self.difference(candidate, frozenset()) is None
                ):
                    self.adopt(candidate, (class_id, row))
                    return typing.cast("type[Object]", candidate)
            cls = _make_class(described, parent)
            self.classes[class_id] = cls
            self.rows[cls] = row
            self.made.append(cls)
            _finish(cls, host_key, self.resolve(_texts_of_class(described)))
            class_layout(cls)
            functions = {f.name: _native_function(cls, f) for f in described.functions}
            type.__setattr__(cls, "_zs_native_functions", functions)
            for name, function in functions.items():
                type.__setattr__(cls, name, function)
            return cls
        except BaseException as error:
            self._fail(key, error)
            raise

    def struct_of(self, row: _core.StructRow) -> type[Struct]:
        """The struct of a host's struct row, matched or made (as ``class_of``)."""
        name, size, align, members, _ = row
        key = ("struct", name)
        self._refused(key)
        try:
            described = StructDescription(name, size, align, _properties(members))
            host_key = _struct_key(described)
            for candidate in _registry.get(name, ()):
                if (
                    candidate.__dict__["_zs_host_key"] == host_key
                    and self.difference(candidate, frozenset()) is None
                ):
                    self.adopt(candidate)
                    return typing.cast("type[Struct]", candidate)
            namespace: dict[str, Any] = {
                "__module__": _MODULE,
                "__qualname__": name,
                "__doc__": f"{name}: a struct of the native host ({size} bytes).",
                "_zs_description": described,
                "_zs_align": align,
            }
            cls = typing.cast("type[Struct]", StructMeta(name, (Struct,), namespace))
            self.structs[name] = cls
            self.rows[cls] = row
            self.made.append(cls)
            _finish(cls, host_key, self.resolve(p.type for p in described.properties))
            struct_layout(cls)
            return cls
        except BaseException as error:
            self._fail(key, error)
            raise

    def enum_of(self, row: _core.EnumRow) -> type[enum.IntEnum]:
        """The ``enum.IntEnum`` of a host's enum row, matched or made: a
        property of that type stores its underlying integer type."""
        name, underlying, items = row
        host_key = _enum_key(row)
        for candidate in _registry.get(name, ()):
            if candidate.__dict__["_zs_host_key"] == host_key:
                self.adopt(candidate)
                return typing.cast("type[enum.IntEnum]", candidate)
        made = enum.IntEnum(name, list(items), module=_MODULE)  # type: ignore[misc]
        made._zs_underlying = _TYPE_NAMES[underlying]  # type: ignore[attr-defined]
        self.enums[name] = made
        self.made.append(made)
        _finish(made, host_key, {})
        return made

    def resolve(self, texts: Iterable[str]) -> dict[str, type]:
        """The runtime's types that type texts name (each found or made
        now): what a host type's texts resolve in, in every runtime."""
        names: dict[str, type] = {}
        for text in texts:
            for word in _IDENTIFIER.findall(text):
                if word in _TYPE_NAMES or word in names:
                    continue
                found = self.lookup(word)
                if found is not None:
                    names[word] = found
        return names

    # ---- matching a type made before -----------------------------------------------
    def described(self, t: type) -> tuple[Any, Any] | None:
        """The runtime's own description of the type named like host type
        ``t`` (of its kind): (its key, its row), or None when it has none."""
        runtime = self.runtime
        kind = t.__dict__["_zs_host_key"][0]
        encoded = t.__name__.encode("utf-8")
        if kind == "class":
            class_id = runtime._heap_find_class(encoded)
            if class_id is None:
                return None
            recorded = (
                runtime._classes_by_id[class_id] if class_id < len(runtime._classes_by_id) else None
            )
            if recorded is not None and not is_host_type(recorded):
                return None  # a Python class of that name
            row = runtime._heap_describe_class(class_id)
            parent = runtime._heap_class_names()[row[2]] if row[2] is not None else None
            return _class_key(_read_class(row), parent), (class_id, row)
        if kind == "struct":
            struct_row = runtime._heap_find_struct(encoded)
            if struct_row is None:
                return None
            name, size, align, members, _ = struct_row
            described = StructDescription(name, size, align, _properties(members))
            return _struct_key(described), struct_row
        enum_row = runtime._heap_find_enum(encoded)
        return (_enum_key(enum_row), enum_row) if enum_row is not None else None

    def difference(self, t: type, assumed: frozenset[type]) -> str | None:
        """None when host type ``t`` can be bound in the runtime (its type
        of that name is described the same, and so is every host type ``t``
        names), else what differs."""
        if t in assumed or t in self.bound.types or t in self.rows or t in self.enums.values():
            return None
        found = self.described(t)
        kind = t.__dict__["_zs_host_key"][0]
        if found is None:
            return f"no {kind} named {t.__name__} is registered there"
        key, _ = found
        if key != t.__dict__["_zs_host_key"]:
            return _key_difference(t.__name__, t.__dict__["_zs_host_key"], key)
        assumed = assumed | {t}
        for named in (*t.__bases__, *t.__dict__.get("_zs_host_names", {}).values()):
            if is_host_type(named):
                problem = self.difference(named, assumed)
                if problem is not None:
                    return problem
        return None

    def adopt(self, t: type, row: Any = None) -> None:
        """Schedule host type ``t`` (which fits) for binding, and the host
        types it names; ``row`` is the runtime's own (for a class, its id
        and row), else the one its name finds."""
        if t in self.bound.types or t in self.rows or t in self.enums.values():
            return
        if row is None:
            found = self.described(t)
            assert found is not None  # difference() found it
            _, row = found
        kind = t.__dict__["_zs_host_key"][0]
        if kind == "class":
            class_id, class_row = row
            self.classes[class_id] = typing.cast("type[Object]", t)
            self.rows[t] = class_row
        elif kind == "struct":
            self.structs[t.__name__] = typing.cast("type[Struct]", t)
            self.rows[t] = row
        else:
            self.enums[t.__name__] = typing.cast("type[enum.IntEnum]", t)
        for named in (*t.__bases__, *t.__dict__.get("_zs_host_names", {}).values()):
            if is_host_type(named):
                self.adopt(named)

    # ---- the end -----------------------------------------------------------------------
    def commit(self) -> None:
        """Check every scheduled type against the runtime, then record them
        all (nothing is recorded if one is refused)."""
        runtime = self.runtime
        if self.failure is not None:
            raise _again(self.failure)
        for class_id, cls in self.classes.items():
            row = self.rows[cls]
            layout = class_layout(cls)
            own = layout.properties[len(layout.properties) - layout.own_count :]
            try:
                _check_native_types(
                    runtime, cls.__name__, own, _properties(row[5]), _traits(row[5])
                )
            except BaseException as error:
                self._fail(("class", class_id), error)
                raise
        for name, struct in self.structs.items():
            row = self.rows[struct]
            properties = struct_layout(struct).properties
            try:
                _check_native_types(runtime, name, properties, _properties(row[3]), _traits(row[3]))
            except BaseException as error:
                self._fail(("struct", name), error)
                raise
        # Nothing below runs Python code that could refuse or close.
        for name, struct in self.structs.items():
            kind = struct_layout(struct).kind
            if not runtime._has_native_type(kind):
                runtime._preset_native_type(kind, self.rows[struct][4])
            self.bound.by_name[("struct", name)] = struct
        for name, made_enum in self.enums.items():
            self.bound.by_name[("enum", name)] = made_enum
        for class_id, cls in self.classes.items():
            row = self.rows[cls]
            runtime._record_class(cls, row[4], class_id)
            functions = cls.__dict__["_zs_native_functions"]
            for function in _read_class(row).functions:
                functions[function.name]._bind(runtime, function.entry, function.user)
        self.bound.types.update(self.structs.values(), self.enums.values(), self.classes.values())
        for t in self.made:
            _registry.setdefault(t.__name__, []).append(t)
        self.made.clear()

    def abandon(self) -> None:
        """The transaction failed: the types it made are dropped (and the
        process-wide caches of kinds and specialisations forget them, so
        that nothing keeps them alive), its refusals remembered."""
        made = set(self.made)
        self.bound.refused.update(self.refusals)
        if not made:
            return

        def mentions(part: Any) -> bool:
            if not isinstance(part, type):
                return False
            if any(base in made for base in part.__mro__):
                return True
            # A specialisation (Array[Array[Actor]]) mentions its arguments.
            arguments = part.__dict__.get("_zs_args", ()), part.__dict__.get("_zs_arg")
            return key_mentions(arguments, mentions)

        forget_kinds(mentions)
        forget_containers(mentions)
        forget_pointers(mentions)


class _transaction:
    """``with _transaction(runtime) as binding:`` one binding transaction,
    committed at the end of the outermost block (a lookup that binds a type
    while another one is being bound in that runtime joins it)."""

    __slots__ = ("runtime", "binding", "outermost")

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def __enter__(self) -> _Binding:
        _lock.acquire()
        active: list[_Binding] = getattr(_binding, "active", None) or []
        _binding.active = active
        joined = next((b for b in reversed(active) if b.runtime is self.runtime), None)
        self.outermost = joined is None
        self.binding = joined if joined is not None else _Binding(self.runtime)
        if self.outermost:
            active.append(self.binding)
        return self.binding

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if self.outermost:
                _binding.active.remove(self.binding)
                if exc_type is None:
                    try:
                        self.binding.commit()
                    except BaseException:
                        self.binding.abandon()
                        raise
                else:
                    self.binding.abandon()
        finally:
            _lock.release()


def _key_difference(name: str, ours: tuple[Any, ...], theirs: tuple[Any, ...]) -> str:
    """What differs between the description a host type was made from
    (``ours``) and a runtime's (``theirs``), in words."""
    kind = ours[0]
    if kind == "enum":
        return (
            f"its enum {name} is {theirs[2]} {dict(theirs[3])} there, {ours[2]} "
            f"{dict(ours[3])} in the type"
        )
    if kind == "struct":
        if ours[2:4] != theirs[2:4]:
            return (
                f"its struct {name} is {theirs[2]} bytes aligned to {theirs[3]} there, "
                f"{ours[2]} aligned to {ours[3]} in the type"
            )
        return _members_difference(name, "member", ours[4], theirs[4])
    if ours[2] != theirs[2]:
        return f"its class {name} derives from {theirs[2]} there, from {ours[2]} in the type"
    if ours[3] != theirs[3]:
        return f"its class {name} is {theirs[3]} bytes there, {ours[3]} in the type"
    if ours[4] != theirs[4]:
        return _members_difference(name, "property", ours[4], theirs[4])
    theirs_functions = {f[0]: f for f in theirs[5]}
    for function in ours[5]:
        other = theirs_functions.get(function[0])
        if other is None:
            return f"its class {name} has no function {function[0]} there"
        if other != function:
            return f"{name}.{function[0]} is described otherwise there (flags, parameters or block)"
    extra = [f[0] for f in theirs[5] if f[0] not in {g[0] for g in ours[5]}]
    return f"its class {name} has functions the type has not: {', '.join(extra) or 'reordered'}"


def _members_difference(owner: str, what: str, ours: Any, theirs: Any) -> str:
    """The first property (or member) two descriptions disagree on."""
    theirs_by_name = {p[0]: p for p in theirs}
    for mine in ours:
        other = theirs_by_name.get(mine[0])
        if other is None:
            return f"{owner} has no {what} {mine[0]!r} there"
        if other != mine:
            return (
                f"{owner}.{mine[0]} is {other[1]} at offset {other[2]} there, "
                f"{mine[1]} at offset {mine[2]} in the type"
            )
    extra = [p[0] for p in theirs if p[0] not in {q[0] for q in ours}]
    return f"{owner} has {what}s the type has not: {', '.join(extra) or 'reordered'}"


_MODULE = "zsharp_py.native"


def _make_class(described: ClassDescription, parent: type[Object]) -> type[Object]:
    """A new Python class for a host's class description (not laid out yet)."""
    namespace: dict[str, Any] = {
        "__module__": _MODULE,
        "__qualname__": described.name,
        "__doc__": _class_doc(described),
        "_zs_description": described,
    }
    return typing.cast("type[Object]", ObjectMeta(described.name, (parent,), namespace))


def _finish(t: type, host_key: tuple[Any, ...], names: dict[str, type]) -> None:
    """Mark ``t`` as a host type made from ``host_key``, its type texts
    resolving in ``names`` (the host types and classes they name)."""
    type.__setattr__(t, "_zs_host_key", host_key)
    type.__setattr__(t, "_zs_host_names", names)
    if not isinstance(t, enum.EnumMeta):
        type.__setattr__(t, "_zs_scope", (dict(_TYPE_NAMES), names))


def _texts_of_class(described: ClassDescription) -> Iterator[str]:
    """Every type text a class description holds."""
    for p in described.properties:
        yield p.type
    for f in described.functions:
        for p in f.parameters:
            yield p.type


def _find(runtime: Runtime, name: str) -> type | None:
    """The class, struct or enum of the runtime named ``name``, bound
    there, or None."""
    with _transaction(runtime) as binding:
        return binding.lookup(name)


def _bind_class_id(runtime: Runtime, class_id: int) -> type[Object]:
    """The conjugate class of the native class ``class_id`` of ``runtime``:
    the Python class registered it, or the host's class, bound now (the
    class binder, ``add_class_binder``)."""
    with _transaction(runtime) as binding:
        return binding.class_of(class_id)


def bind_host_type(runtime: Runtime, t: type) -> None:
    """Bind host type ``t`` in ``runtime``, with the host types it names:
    ``TypeError`` saying which runtime and what differs when the runtime's
    host has not registered it there, or described it otherwise."""
    with _transaction(runtime) as binding:
        if t in binding.bound.types:
            return
        problem = binding.difference(t, frozenset())
        if problem is not None:
            raise TypeError(_unusable(t, runtime, problem))
        binding.adopt(t)


def host_type_fits(runtime: Runtime, t: type) -> bool:
    """Whether host type ``t`` can be bound in ``runtime`` (``bind_host_type``
    would succeed), without binding it."""
    with _lock:
        if t in _bound(runtime).types:
            return True
        return _Binding(runtime).difference(t, frozenset()) is None


def _bind_for_call(cls: type[Object], runtime: Runtime) -> None:
    """A shared function of ``cls`` called in a runtime it is not bound in
    (a static function in the current runtime): bind ``cls`` there."""
    bind_host_type(runtime, cls)


def _class_doc(described: ClassDescription) -> str:
    lines = [f"{described.name}: a class of the native host ({described.size} bytes)."]
    if described.properties:
        lines.append("")
        lines.append(
            "Properties: " + ", ".join(f"{p.name}: {p.type}" for p in described.properties)
        )
    return "\n".join(lines)


def host_types(
    install: Callable[[Runtime], object],
    *,
    module: str | None = None,
    install_hint: str | None = None,
) -> dict[str, type]:
    """A native host's classes, structs and enums, by name, made before any
    runtime of the program exists: ``install(runtime)`` registers the host
    in a private runtime made for the purpose, whose descriptions are read
    once (then it is closed). The types serve every runtime in which the
    host registers the same descriptions (each binds them to its own native
    types on first use); ``module`` becomes their ``__module__``, and
    ``install_hint`` (how to install the host in a runtime) ends the errors
    of a runtime where it is not installed.

    Raises the binder's error when a description is refused."""
    scratch = Runtime(max_objects=1024)
    try:
        install(scratch)
        class_names = scratch._heap_class_names()
        struct_names, enum_names = scratch._heap_type_names()
        found: dict[str, type] = {}
        with _transaction(scratch) as binding:
            for name in (*enum_names, *struct_names):
                made = binding.lookup(name)
                assert made is not None
                found.setdefault(name, made)
            for class_id, name in enumerate(class_names):
                found.setdefault(name, binding.class_of(class_id))
        for t in found.values():
            if is_host_type(t):
                if module is not None and t.__module__ == _MODULE:
                    type.__setattr__(t, "__module__", module)
                if install_hint is not None:
                    type.__setattr__(t, "_zs_install_hint", install_hint)
        return found
    finally:
        scratch.close()


def _native_function(cls: type[Object], function: FunctionDescription) -> Any:
    """The method of one described function: a ``_core.NativeFunction``
    that marshals in C from its members' kinds
    (native/binding/zpy_python_to_host.c). It is shared by every runtime
    the class is bound in, each giving its own entry and user pointer
    (``_Binding.commit``); a static function runs in the current runtime,
    binding the class there first if needed."""
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
        entry=0,
        user=0,
        flags=(_core.FUNCTION_STATIC if function.is_static else 0)
        | (_core.FUNCTION_EVENT if function.is_event else 0),
        size=function.block_size,
        members=tuple(members),
        signature=_signature(function),
        doc=_function_doc(function),
        bind=functools.partial(_bind_for_call, cls),
    )


_DIRECTION_IN, _DIRECTION_RETURN = 0, 3  # zs_param_direction


def signature_plan_of(
    runtime: Any, name: str, block_size: int, parameters: tuple[tuple[str, str, int, int], ...]
) -> _core.CallPlan:
    """The plan of a delegate's signature (``zs_delegate_broadcast``,
    ``zs_delegate_execute``: a host's description of the parameter block,
    each parameter ``(name, type text, offset, direction)``), which the
    handler of listeners (native/binding/zpy_host_to_python.c) asks for
    once per runtime and signature. Type texts resolve as a host's
    descriptions do (zsharp_py's types and the runtime's own); a parameter
    crosses as an override's does (a value is a red view into the block,
    valid for the call), and the one result, for a single-cast delegate,
    is a scalar, an object reference or a plain struct. ``TypeError`` when
    a type cannot be resolved or cannot cross, which the handler reports."""
    scope: Any = type(f"{name} (signature)", (), {"_zs_scope": _scope(runtime)})
    arguments = [p for p in parameters if p[3] == _DIRECTION_IN]
    results = [p for p in parameters if p[3] == _DIRECTION_RETURN]
    shown = ", ".join(f"{p[0]}: {p[1]}" for p in arguments)
    what = f"{name}({shown})" + (f" -> {results[0][1]}" if results else "")
    if len(arguments) + len(results) != len(parameters) or len(results) > 1:
        raise TypeError(f"{what}: a delegate's signature takes parameters in and one result")
    members = [
        plan_member(
            _crossing_kind(scope, type_text, what, label),
            offset,
            f"{what}: " + ("result" if label == "return_value" else f"argument {label!r}"),
        )
        for (label, type_text, offset) in [(p[0], p[1], p[2]) for p in arguments]
        + [("return_value", p[1], p[2]) for p in results]
    ]
    return _core.CallPlan(
        name,
        what,
        block_size,
        tuple(members[: len(arguments)]),
        members[-1] if results else None,
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
set_host_binding(bind_host_type, host_type_fits, is_host_type)
