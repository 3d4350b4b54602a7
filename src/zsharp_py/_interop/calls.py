"""Calls from native code into Python methods (``zs_call_function``,
``zs_call_each``: Unreal's ``ProcessEvent``): the parameter block of each
function (``function_layout``, cached in the class's ``_zs_functions``) and
its call plan (``_core.CallPlan``), which the C handler
(native/binding/zpy_host_to_python.c) asks for through ``_plan_of`` on a function's
first call on a class. docs/embedding.md, "Calls from native code", is the
user's view.
"""

from __future__ import annotations

import inspect
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import _core
from .._base.layout import Layout, member_name
from .._model.kinds import EnumKind, ScalarKind
from .._model.object import Object, ObjectRefKind, WeakRefKind, add_declaration_check, kind_of
from .._model.struct import StructKind

__all__ = [
    "FunctionLayout",
    "FunctionParameter",
    "function_layout",
    "native_function",
    "include_dir",
    "api_table",
]


@dataclass(frozen=True)
class FunctionParameter:
    """One member of a parameter block."""

    name: str
    """The parameter's name, or ``"return_value"`` for the result."""
    c_type: str
    """Its C type as the host spells it: ``double``, ``int32_t``, ``bool``;
    ``zs_ref`` for an object (its handle, 0 for None); ``struct Vector`` for
    a struct."""
    offset: int
    """Its byte offset in the block."""


@dataclass(frozen=True)
class FunctionLayout:
    """The parameter block of a method that native code can call."""

    owner: type
    """The class that defines the method."""
    name: str
    parameters: tuple[FunctionParameter, ...]
    """The method's parameters after ``self``, in order."""
    result: FunctionParameter | None
    """Where the result goes (after the parameters), or None for ``-> None``."""
    size: int
    """Bytes of the block (0 when there is nothing to pass)."""
    _kinds: tuple[Any, ...] = field(repr=False, compare=False)
    _plan: _core.CallPlan = field(repr=False, compare=False)
    """How zsharp_py._core's handler makes the call (native/binding/zpy_host_to_python.c)."""
    host: bool = False
    """Whether the block is a native host's (its function's description
    places it, zsharp_py/_interop/reflection.py), not laid out here."""

    @property
    def c_declaration(self) -> str:
        """The block as a C struct for the native host, after the structs it
        contains (``zsharp.h`` declares ``zs_ref``, ``<stdbool.h>`` ``bool``)."""
        structs: dict[str, str] = {}
        for kind in self._kinds:
            _declare_host_struct(kind, structs)
        members = list(self.parameters) + ([self.result] if self.result else [])
        body = "".join(f" {m.c_type} {m.name};" for m in members)
        block = f"struct {self.owner.__name__}_{self.name}_params {{{body or ' char unused;'} }};"
        return "\n".join([*structs.values(), block])


_MANAGED_FUNCTIONS = frozenset(_core.managed_functions())
_API_FUNCTIONS: dict[str, int] = _core.api_functions()  # name -> address, read in C


def native_function(name: str) -> int:
    """The address of the C API function ``name`` (``native/include/zsharp.h``
    or ``zsharp_debug.h``) in the native library this process loaded (``lib_dir()``'s
    ``libzsharp.so``), for a native host that embeds Python.

    A host that does not link the library casts this address to the
    function's pointer type, and calls it on a runtime's ``native_address``
    (``zs_find_class``, ``zs_call_each``, ``zs_gc_get_stats``...). The
    addresses are the slots of ``api_table()`` (and ``zs_api_table``'s own),
    read in C from the list of ``zsharp_api.h``. Both stay valid while the
    interpreter runs and the runtime is open. ``ValueError`` for a name that
    is not a function of the C API, and for the scripting layer's own
    protocol (``ZS_MANAGED_FUNCTIONS`` in ``zsharp_api.h``), which no host
    is given.
    """
    if not isinstance(name, str) or not name.startswith("zs_"):
        raise ValueError(f"{name!r} is not a function of the C API (zsharp.h)")
    if name in _MANAGED_FUNCTIONS:
        raise ValueError(
            f"{name} is the scripting layer's own protocol, not a host's call: a host "
            "collects with zs_collect_garbage or zs_gc_step and zs_gc_purge, and the "
            "scripting layer expires its proxies itself (docs/embedding.md)"
        )
    address = _API_FUNCTIONS.get(name)
    if address is None:
        raise ValueError(f"{name!r} is not a function of the C API (zsharp.h)")
    return address


def api_table() -> int:
    """The address of the C API as one table of function pointers (``struct
    zs_api``, declared in ``zsharp_api.h`` beside ``zsharp.h``), for a host
    module built apart from the library: it calls ``api->zs_object_new(...)``
    where a linked host calls ``zs_object_new(...)``. Valid while the
    interpreter runs; the same table serves every runtime."""
    return _core.api_table()


def python_table() -> int:
    """The address of the handle/proxy table (``struct zs_python_api``,
    declared in ``zsharp_python.h`` beside ``zsharp.h``), for C code that
    holds a runtime's handles and Python's proxies: ``proxy_of`` makes or
    finds the proxy of a handle, ``handle_of`` reads the handle of a proxy
    (both with the GIL held). Valid while the interpreter runs."""
    return int(_core.python_table())


def _installed(folder: str, marker: str) -> str:
    """The package's own ``folder`` (``setup.py`` builds it there, inside
    the source tree for an editable install), checked to hold ``marker``."""
    path = Path(__file__).resolve().parents[1] / folder  # zsharp_py/_interop/calls.py
    if not (path / marker).is_file():
        raise FileNotFoundError(f"{marker} is not in {path}: reinstall zsharp_py")
    return str(path)


def lib_dir() -> str:
    """The folder holding the native library a host links (``libzsharp.so``,
    ``libzsharp.a``), with ``pkgconfig/zsharp.pc`` and ``cmake/zsharp/``
    beside it: the one the installed package loads itself, so a host and
    Python share one copy of the heap. ``python -m zsharp_py config``
    prints the flags built from it."""
    return _installed("lib", "libzsharp.so")


def include_dir() -> str:
    """The folder holding ``zsharp.h``, the host's C API header (with
    ``zsharp_debug.h``, ``zsharp_managed.h``, ``zsharp_api.h`` and
    ``zsharp_python.h``), for a native host's compiler
    (``-I``), as ``pybind11.get_include()`` gives its own: the copy
    installed with the package, beside ``lib_dir()``."""
    return _installed("include", "zsharp.h")


def function_layout(cls: type[Object], name: str) -> FunctionLayout:
    """The parameter block of ``cls``'s method ``name`` as native code passes
    it (``zsharp_py.lowlevel.function_layout(Actor, "tick")``).

    A method can be called from native code when it is a plain public method
    of a ``zs.Object`` subclass whose parameters after ``self`` are
    positional and annotated (scalars such as ``zs.Int32`` or ``float``,
    object references such as ``"Actor | None"``, structs, strings,
    containers: a value parameter is a red view of the host's block, valid
    for the call), and whose result is None, a scalar, an object reference
    or a plain struct (scalars, references and plain structs only: nothing
    the host would have to free). A host's function (a class bound by
    ``zs.native_class``) has its host's block; a Python override of it
    takes that block. Raises ``AttributeError`` when there is no such
    method and ``TypeError`` when its signature cannot cross the boundary.
    """
    if not (isinstance(cls, type) and issubclass(cls, Object)):
        raise TypeError(f"function_layout() needs a zs.Object subclass, got {cls!r}")
    cache: dict[str, FunctionLayout] | None = cls.__dict__.get("_zs_functions")
    if cache is None:
        cache = {}
        type.__setattr__(cls, "_zs_functions", cache)
    layout = cache.get(name)
    if layout is None:
        layout = cache[name] = _declare(cls, name)
    return layout


class SignatureMismatch(TypeError):
    """An override whose parameter block differs from the one native code
    calls the function with (see ``_declare``)."""


def _declare(cls: type[Object], name: str) -> FunctionLayout:
    """Work out the parameter block of ``cls.name`` (cached by the caller).

    Native code calls a function with one parameter block whatever the
    object's class: the block of the function's *reference declaration*, the
    first declaration in the class hierarchy, from the root down (the
    last class of the MRO first), that native code can call. An override
    further down runs only if its own block is the same (the same C types
    at the same offsets, the same result, the same size): otherwise it
    would read its arguments from, and write its result into, memory the
    host never laid out for it. ``SignatureMismatch`` (a TypeError naming
    both signatures) refuses it: at class declaration when both signatures
    resolve then (``check_overrides``), else here, at the first call."""
    if not isinstance(name, str):
        raise AttributeError(f"{cls.__name__} has no method {name!r} that native code can call")
    owner = next((c for c in cls.__mro__ if name in c.__dict__), None)
    if name.startswith("_") or owner is None or not issubclass(owner, Object) or owner is Object:
        raise AttributeError(f"{cls.__name__} has no method {name!r} that native code can call")
    reference = _reference_layout(cls, name, owner)
    if reference is not None and reference.host and not owner.__dict__.get("_zs_description"):
        return _override_host(owner, name, reference)
    layout = _lay_out(owner, name)
    if reference is not None and not _same_block(layout, reference):
        raise SignatureMismatch(
            f"{owner.__name__}.{name}{_signature(layout)} cannot override "
            f"{reference.owner.__name__}.{name}{_signature(reference)} for calls from native "
            f"code: native code passes {reference.owner.__name__}.{name}'s parameter block "
            f"({reference.size} bytes), so an override must take the same parameters and "
            "return the same type"
        )
    return layout


def _reference_layout(cls: type[Object], name: str, owner: type) -> FunctionLayout | None:
    """The layout of the reference declaration of ``name`` above ``owner``
    in ``cls``'s hierarchy (None when ``owner``'s is the reference)."""
    for base in reversed(cls.__mro__):
        if base is owner:
            return None
        if (
            base is Object
            or not isinstance(base, type)
            or not issubclass(base, Object)
            or name not in base.__dict__
            or not issubclass(owner, base)
        ):
            continue
        try:
            return function_layout(base, name)
        except (AttributeError, TypeError):
            continue  # not callable from native code: no block to match
    return None


def _same_block(layout: FunctionLayout, reference: FunctionLayout) -> bool:
    """Whether two layouts describe the same parameter block."""

    def shape(described: FunctionLayout) -> Any:
        members = list(described.parameters) + ([described.result] if described.result else [])
        return (
            described.size,
            described.result is None,
            tuple((m.c_type, m.offset) for m in members),
            tuple(_block_key(k) for k in described._kinds),
        )

    return bool(shape(layout) == shape(reference))


def _block_key(kind: Any) -> Any:
    """What a block member is natively: an object reference of any class is
    one handle (a narrower class is the same block)."""
    if isinstance(kind, (ObjectRefKind, WeakRefKind)):
        return ("reference",)
    return getattr(kind, "key", None)


def _signature(layout: FunctionLayout) -> str:
    """``(double dt, int64_t extra) -> int64_t``: a block as a C signature."""
    parameters = ", ".join(f"{p.c_type} {p.name}" for p in layout.parameters)
    result = layout.result.c_type if layout.result is not None else "void"
    return f"({parameters}) -> {result}"


def check_overrides(cls: type[Object], namespace: dict[str, Any]) -> None:
    """At class declaration (zsharp_py/_model/object.py ObjectMeta): refuse an
    override of a host's function that is not a plain function (native code
    calls it with the host's block: a value, a property or a static method
    could not take it), and an override whose parameter block differs from
    its reference declaration's, when both signatures resolve now;
    otherwise the first call decides."""
    for name, value in namespace.items():
        if isinstance(name, str) and not isinstance(value, types.FunctionType):
            _refuse_non_function(cls, name, value)
    for name, value in namespace.items():
        if (
            not isinstance(value, types.FunctionType)
            or not isinstance(name, str)
            or name.startswith("_")
        ):
            continue
        if not any(
            name in base.__dict__
            for base in cls.__mro__[1:]
            if isinstance(base, type) and issubclass(base, Object) and base is not Object
        ):
            continue  # not an override
        try:
            function_layout(cls, name)
        except SignatureMismatch:
            raise
        except (AttributeError, TypeError):
            continue  # not callable from native code, or not resolvable yet


def _refuse_non_function(cls: type[Object], name: str, value: Any) -> None:
    """Refuse ``cls.name = value`` (not a plain function) when it replaces
    a function of a host's class above ``cls`` that native code calls on
    objects (not a static one): ``TypeError`` naming both."""
    for base in cls.__mro__[1:]:
        function = _host_function(base, name) if isinstance(base, type) else None
        if function is None or function.is_static:
            continue
        kind = "event" if function.is_event else "function"
        shown = type(value).__name__
        raise TypeError(
            f"{cls.__name__}.{name} overrides the {kind} {base.__name__}.{name}"
            f"{function.signature_text}, which native code calls with its parameters: it "
            f"must be a plain function (def {name}(self, ...)), not {shown}"
        )


def _lay_out(owner: type[Object], name: str) -> FunctionLayout:
    """The parameter block of ``owner``'s own declaration of ``name``: a
    host's function as its description places it, else a Python method's,
    laid out from its annotations."""
    host = _host_function(owner, name)
    if host is not None:
        return _host_layout(owner, name, host, entry=True)
    function = owner.__dict__[name]
    what = f"{owner.__name__}.{name}"
    if not isinstance(function, types.FunctionType):
        raise TypeError(f"{what} is not a plain method, so native code cannot call it")
    signature = inspect.signature(function)
    parameters = list(signature.parameters.values())[1:]
    members: list[tuple[str, str, Any]] = []
    for parameter in parameters:
        if parameter.kind not in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            raise TypeError(
                f"{what}: parameter {parameter.name!r} must be positional to be "
                "passed from native code"
            )
        if parameter.annotation is parameter.empty:
            raise TypeError(
                f"{what}: parameter {parameter.name!r} needs a type annotation to "
                "be passed from native code"
            )
        members.append((parameter.name, parameter.name, parameter.annotation))
    returns = signature.return_annotation
    if returns not in (signature.empty, None, "None"):
        members.append(("return_value", "return_value", returns))
    kinds: list[Any] = []
    for label, _, annotation in members:
        kinds.append(_crossing_kind(owner, annotation, what, label))
    cnames = tuple(member_name(i, label) for i, (label, _, _) in enumerate(members))
    block = Layout(
        f"{owner.__name__}_{name}_params",
        [(c, k.member_type) for c, k in zip(cnames, kinds, strict=True)],
    )
    described = tuple(
        FunctionParameter(label, _host_type(kind), block.offsets[c])
        for (label, _, _), kind, c in zip(members, kinds, cnames, strict=True)
    )
    has_result = len(members) > len(parameters)
    size = block.size if members else 0
    plan = _core.CallPlan(
        name,
        what,
        size,
        tuple(
            plan_member(kind, p.offset, f"{what}: argument {p.name!r}")
            for p, kind in zip(described[: len(parameters)], kinds[: len(parameters)], strict=True)
        ),
        plan_member(kinds[-1], described[-1].offset, f"{what} (result)") if has_result else None,
    )
    return FunctionLayout(
        owner,
        name,
        described[: len(parameters)],
        described[-1] if has_result else None,
        size,
        tuple(kinds),
        plan,
    )


def plan_member(kind: Any, offset: int, what: str) -> tuple[int, int, Any, str]:
    """How one block member crosses, for ``_core.CallPlan`` and
    ``_core.NativeFunction``: a scalar by its scalar code, an object
    reference by its target class (checked on the way in and out), a
    struct by its kind, any other value by its kind (both a red view into
    the block, or a staged result)."""
    if isinstance(kind, ScalarKind):
        return (offset, _core.CALL_SCALAR, kind.code, what)
    if isinstance(kind, ObjectRefKind):
        return (offset, _core.CALL_OBJECT, kind.target, what)
    if isinstance(kind, StructKind):
        return (offset, _core.CALL_STRUCT, kind.kind, what)
    return (offset, _core.CALL_VALUE, kind.kind, what)


def _crossing_kind(scope: type[Object], annotation: Any, what: str, label: str) -> Any:
    """The kind of one member of a block that native code passes to Python:
    a parameter of any kind (a value is a red view into the host's block,
    valid for the call); a result only a scalar, an object reference or a
    plain struct, which the handler writes without allocating anything the
    host would have to free."""
    kind = kind_of(scope, annotation, f"{what}: {label}")
    if label == "return_value" and not (
        isinstance(kind, (ScalarKind, EnumKind, ObjectRefKind)) or _plain_struct(kind)
    ):
        raise TypeError(
            f"{what}: the result is {kind.describe()}; a result returned to native code "
            "is a scalar, an object reference or a plain struct (a value owning native "
            "memory would be the host's to free)"
        )
    return kind


def _host_function(owner: type[Object], name: str) -> Any:
    """The description of ``owner``'s own host function ``name`` (a class a
    native host described, bound by zsharp_py/_interop/reflection.py), or
    None."""
    described = owner.__dict__.get("_zs_description")
    functions = getattr(described, "functions", ())
    return next((f for f in functions if f.name == name), None)


def _host_layout(
    owner: type[Object], name: str, function: Any, *, entry: bool, scope: type[Object] | None = None
) -> FunctionLayout:
    """The layout of a host's function: its block as its description places
    it. With ``entry``, the plan runs the host's C entry on the block as it
    is (the function of a class no Python class overrode: any signature);
    without, it calls the Python override, which then needs every member
    to cross (no out or in-out parameters). Type texts resolve in
    ``scope``, the host's class (by default ``owner``)."""
    what = f"{owner.__name__}.{name}"
    scope = scope or owner
    arguments = [p for p in function.parameters if p.direction in ("in", "inout")]
    results = [p for p in function.parameters if p.direction == "return"]
    if not entry and len(arguments) + len(results) != len(function.parameters):
        raise SignatureMismatch(
            f"{what}{function.signature_text} has out or in-out parameters: Python code can "
            "call it, but not override it for calls from native code"
        )
    labels = [p.name for p in arguments] + ["return_value"] * len(results)
    kinds = [
        kind_of(scope, p.type, f"{what}: {p.name}")
        if entry
        else _crossing_kind(scope, p.type, what, label)
        for p, label in zip(arguments + results, labels, strict=True)
    ]
    described = tuple(
        FunctionParameter(label, _host_type(kind), p.offset)
        for p, label, kind in zip(arguments + results, labels, kinds, strict=True)
    )
    count = len(arguments)
    # The host's entry runs as it is when no Python class overrode the
    # function: a host's class serves every runtime that registered it, so
    # the plan runs its function's entry in the runtime of the call
    # (NativeFunction._plan_entry, native/binding/zpy_python_to_host.c).
    plan_entry, plan_user = 0, 0
    if entry and function.entry:
        shared = owner.__dict__.get("_zs_native_functions", {}).get(name)
        plan_entry, plan_user = (
            shared._plan_entry if shared is not None else (function.entry, function.user)
        )
    plan = _core.CallPlan(
        name,
        what,
        function.block_size,
        ()
        if entry
        else tuple(
            plan_member(kind, p.offset, f"{what}: argument {p.name!r}")
            for p, kind in zip(described[:count], kinds[:count], strict=True)
        ),
        None
        if entry or not results
        else plan_member(kinds[-1], described[-1].offset, f"{what} (result)"),
        entry=plan_entry,
        user=plan_user,
    )
    return FunctionLayout(
        owner,
        name,
        described[:count],
        described[-1] if results else None,
        function.block_size,
        tuple(kinds),
        plan,
        host=True,
    )


def _override_host(owner: type[Object], name: str, reference: FunctionLayout) -> FunctionLayout:
    """A Python override of a host's function (``def begin_play(self)`` in a
    subclass of a host's class): native code passes the host's block, so
    the override takes the host's parameters whatever it annotates; it must
    accept them by position."""
    what = f"{owner.__name__}.{name}"
    function = owner.__dict__[name]
    if not isinstance(function, types.FunctionType):
        raise TypeError(f"{what} is not a plain method, so native code cannot call it")
    host = _host_function(reference.owner, name)
    layout = _host_layout(owner, name, host, entry=False, scope=reference.owner)
    try:
        inspect.signature(function).bind(None, *layout.parameters)
    except TypeError:
        raise SignatureMismatch(
            f"{what}{inspect.signature(function)} cannot override "
            f"{reference.owner.__name__}.{name}{host.signature_text}: native code passes "
            f"{len(layout.parameters)} argument(s) by position"
        ) from None
    return layout


def check_tick_function(cls: type[Object], name: str) -> None:
    """Refuse ``cls.name`` as a tick function (``rt.ticks.register``,
    zsharp_py/_runtime/ticks.py) unless native code can call it with the
    tick manager's block: ``(dt: float)`` or nothing, and no result
    (``AttributeError`` when native code cannot call it at all, else
    ``TypeError`` naming its signature)."""
    layout = function_layout(cls, name)
    parameters = layout.parameters
    if (
        layout.result is None
        and len(parameters) <= 1
        and all(p.c_type == "double" and p.offset == 0 for p in parameters)
    ):
        return
    raise TypeError(
        f"{cls.__name__}.{name}{_signature(layout)} cannot be a tick function: a tick "
        "function takes (dt: float) or nothing and returns None"
    )


def _plain_struct(kind: Any) -> bool:
    """Whether ``kind`` is a struct of scalars, references and plain structs:
    a view of it in the host's block writes nothing the host would have to
    free (a string or container member would allocate there)."""
    if not isinstance(kind, StructKind):
        return False
    return all(
        isinstance(info.kind, (ScalarKind, ObjectRefKind, WeakRefKind)) or _plain_struct(info.kind)
        for info in kind.layout.properties
    )


def _host_type(kind: Any) -> str:
    """The C type of a block member as the host spells it."""
    if isinstance(kind, StructKind):
        return f"struct {kind.cls.__name__}"
    if isinstance(kind, (ObjectRefKind, WeakRefKind)):
        return "zs_ref"
    if isinstance(kind, ScalarKind):
        return "bool" if kind.c_type == "_Bool" else str(kind.c_type)
    return str(kind.member_type)


def _declare_host_struct(kind: Any, out: dict[str, str]) -> None:
    """Add the C declaration of a struct kind (after the structs it holds) to ``out``."""
    if not isinstance(kind, StructKind) or kind.cls.__name__ in out:
        return
    for info in kind.layout.properties:
        _declare_host_struct(info.kind, out)
    body = "".join(f" {_host_type(info.kind)} {info.name};" for info in kind.layout.properties)
    out[kind.cls.__name__] = f"struct {kind.cls.__name__} {{{body} }};"


# ---------------------------------------------------------------------------
# The handler's one entry into Python
# ---------------------------------------------------------------------------


def _plan_of(cls: type[Object], name: str) -> _core.CallPlan:
    """The plan of ``cls.name`` for zsharp_py._core's handler, on the first
    call of that function on that class (later calls find it in the cache).
    Only lays the function out: ``AttributeError`` or ``TypeError`` when it
    cannot be called from native code, which the handler reports."""
    return function_layout(cls, name)._plan


add_declaration_check(check_overrides)
