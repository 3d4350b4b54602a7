"""Native classes declared from Python (``class Actor(zs.Object)``) and their
object conjugates.

Declaring a class records its annotations; the first use (instantiation or
registration in a runtime) resolves them, lays out a C struct (the object
header, then the properties) and installs one descriptor per property. Each
runtime registers the native class and its reference schema on first use.
"""

from __future__ import annotations

import collections
import enum
import importlib
import inspect
import struct as _struct_module
import sys
import types
import typing
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from typing_extensions import dataclass_transform

from .. import _core
from .._base import context
from .._base.context import RuntimeLike
from .._base.errors import ExpiredConjugateError, refused
from .._base.expiry import FIXED_CLASS, expired_error, expired_reason, expired_subject
from .._base.layout import HEADER, Layout, member_name, size_align
from .hints import type_text, unsupported_hint
from .kinds import PYTHON_SHORTHANDS, EnumKind, Int32, PropertyKind, Scalar, ScalarKind
from .state import MISSING, StateField

__all__ = [
    "Object",
    "ObjectMeta",
    "ClassLayout",
    "Described",
    "DescribedProperty",
    "described_properties",
    "class_layout",
    "declaring_scope",
]

# Attribute names of zs.Object that a property may not shadow.
_RESERVED = frozenset(
    {
        "name",
        "outer",
        "is_expired",
        "is_black",
        "add_to_root",
        "remove_from_root",
        "is_rooted",
        "mark_as_garbage",
        "is_garbage",
        "runtime",
        "handle",
        "dispose",
        "create_cluster",
        "dissolve_cluster",
        "cluster",
    }
)

ZS_CLASS_CLUSTER_ROOT: int = _core.CLASS_CLUSTER_ROOT
ZS_CLASS_IN_CLUSTER: int = _core.CLASS_IN_CLUSTER


@dataclass
class PropertyInfo:
    """One declared property of a class (inherited ones included in layouts)."""

    name: str
    cname: str
    kind: PropertyKind
    offset: int = 0
    has_default: bool = False
    default: Any = None


@dataclass
class ClassLayout:
    """The runtime-independent native shape of a Python-declared class."""

    cls: type[Object]
    parent: type[Object] | None
    size: int
    properties: list[PropertyInfo]  # inherited first
    own_members: list[tuple[int, PropertyKind]]  # (offset, kind): cls's own non-scalar members
    class_flags: int = 0  # ZS_CLASS_*
    property_names: frozenset[str] = field(default_factory=frozenset)
    defaults: list[PropertyInfo] = field(default_factory=list)  # set after creation
    initializers: list[PropertyInfo] = field(default_factory=list)  # run after creation
    image: bytes = b""  # plain defaults: the bytes after the header of a new object
    described: bool = False  # a native host's class (its description gave the layout)
    own_count: int = 0  # the properties cls declares itself: the last own_count of properties


class _Zero:
    """The value ``zs.zero()`` gives: "no default", in a class body."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "zs.zero()"


_ZERO = _Zero()


def zero() -> Any:
    """The property's zeroed value as its declared default: what it starts
    at when no default is given (0, False, None, empty), written out for a
    type checker.

    For mypy and pyright, a ``zs.Object`` or ``zs.Struct`` subclass is a
    dataclass, so a property declared without a default is a required
    keyword of the class call. ``= 0`` or ``= None`` says a scalar or a
    reference is optional; a string, container, pointer or delegate has no
    literal of its declared type, so it takes ``= zs.zero()`` (typed
    ``Any``). At run time it is the same as declaring no default: nothing
    is applied at creation.

    >>> import zsharp_py as zs
    >>> class Squad(zs.Object):
    ...     size: zs.Int32 = 0
    ...     members: zs.Array["Squad"] = zs.zero()
    >>> with zs.Runtime():
    ...     squad = Squad()                # no keyword needed, for checkers too
    ...     (squad.size, len(squad.members))
    (0, 0)
    """
    return _ZERO


def take_defaults(namespace: dict[str, Any], annotations: dict[str, Any]) -> dict[str, Any]:
    """Take the declared defaults of the annotated properties out of a class
    body (``zs.zero()`` is taken out, and is no default)."""
    defaults = {
        key: namespace.pop(key)
        for key in list(annotations)
        if key in namespace and not _is_classvar(annotations[key])
    }
    return {key: value for key, value in defaults.items() if value is not _ZERO}


def library_keyword(*, default: Any, alias: str, kw_only: bool = True) -> Any:
    """A field specifier for type checkers only (``dataclass_transform``):
    ``zs.Object`` declares ``name=`` and ``outer=``, the library's own
    keywords of every class call, as fields under other attribute names
    (the ``alias`` is the keyword), so that checkers accept them beside a
    class's properties. Never called at run time."""
    raise TypeError("library_keyword() only describes zs.Object's keywords to type checkers")


# For type checkers, a zs.Object subclass is a dataclass whose fields are its
# annotated properties, each a keyword of the class call (``Debris(heat=1.0)``):
# a wrong keyword or a value of the wrong type is reported. eq_default=False:
# conjugates compare and hash by identity, as the runtime does. A property
# declared without a default is a required keyword for a checker, as a
# dataclass field is (at run time it starts at zero, None or empty):
# docs/writing-game-scripts.md ("Typing") says so.
@dataclass_transform(kw_only_default=True, eq_default=False, field_specifiers=(library_keyword,))
class ObjectMeta(_core.ObjectClass):
    """Metaclass of ``zs.Object``: collects property declarations and makes
    ``Actor(name=..., outer=..., **properties)`` allocate a native object
    (``Actor()`` in C when it can, see native/binding/classes.c; else
    ``_create``). A class with a Python ``__init__`` is created by
    ``_create_initialized`` instead, which runs it. Its ``zs.state()``
    declarations (state.py) become slots of its conjugates.

    For type checkers it is a ``dataclass_transform``: the class call of a
    subclass takes its annotated properties as keywords, with their types."""

    def __new__(
        mcls,
        name: str,
        bases: tuple[type, ...],
        namespace: dict[str, Any],
        *,
        cluster_root: bool | None = None,
        can_be_in_cluster: bool | None = None,
        **kwargs: Any,
    ) -> ObjectMeta:
        _refuse_new(name, bases, namespace)
        _refuse_slots(name, namespace)
        # A reload of the module that declared this class runs the class
        # statement again: the reload hook (zsharp_py/_interop/reload.py)
        # updates that class in place and the statement gives it back.
        previous = previous_declaration(ObjectMeta, name, namespace)
        cell = namespace.get("__classcell__")
        # Python state first: nothing may resolve its annotations as native
        # properties (``note: str = zs.state()`` is not a zs.String).
        own_state = _take_state(namespace)
        inherited_state: dict[str, StateField] = {}
        for base in bases:
            if isinstance(base, ObjectMeta):
                inherited_state.update(base.__dict__.get("_zs_state", {}))
        _check_state_names(name, bases, namespace, own_state, inherited_state)
        namespace["__slots__"] = tuple(own_state)
        namespace["_zs_state"] = {**inherited_state, **own_state}
        # Cluster flags are inherited unless the class says otherwise.
        inherited = next(
            (b.__dict__.get("_zs_class_flags", 0) for b in bases if isinstance(b, ObjectMeta)), 0
        )
        flags = inherited
        for wanted, bit in (
            (cluster_root, ZS_CLASS_CLUSTER_ROOT),
            (can_be_in_cluster, ZS_CLASS_IN_CLUSTER),
        ):
            if wanted is not None:
                flags = flags | bit if wanted else flags & ~bit
        namespace["_zs_class_flags"] = flags
        annotations = namespace.get("__annotations__", {})
        defaults = take_defaults(namespace, annotations)
        namespace["_zs_defaults"] = defaults
        namespace["_zs_scope"] = declaring_scope(1)
        cls = super().__new__(mcls, name, bases, namespace, **kwargs)
        if previous is not None:  # only read, even when a check below refuses it
            type.__setattr__(cls, "_zs_staged", True)
        _core.init_class(cls, bool(namespace["_zs_state"]))
        for attribute, declared in own_state.items():
            _install_state(cls, attribute, declared)
        if any(isinstance(base, ObjectMeta) for base in bases):  # not zs.Object itself
            _set_python_init(cls)
            check_annotations(cls)
            # An override that native code would call with another signature's
            # parameter block is refused now when it can be decided now
            # (the check zsharp_py/_interop/calls.py registers; else at the first call).
            for check_declaration in _declaration_checks:
                check_declaration(cls, namespace)
        if previous is not None:
            return typing.cast("ObjectMeta", redeclared(previous, cls, cell, namespace))
        return cls

    def __setattr__(cls, name: str, value: Any) -> None:
        if name == "__new__":
            raise TypeError(
                f"{cls.__name__}: a native class cannot have a __new__ (objects "
                "are created natively, it would never run); use __init__"
            )
        super().__setattr__(name, value)
        if name == "__init__":
            _refresh_python_init(cls)

    def __delattr__(cls, name: str) -> None:
        super().__delattr__(name)
        if name == "__init__":
            _refresh_python_init(cls)


# The reload hook (zsharp_py/_interop/reload.py): redeclared(previous, new,
# namespace) updates ``previous`` from ``new`` (or stages it) and returns it.
_redeclaration_hooks: list[typing.Callable[[type, type, dict[str, Any]], type]] = []


def set_redeclaration_hook(hook: typing.Callable[[type, type, dict[str, Any]], type]) -> None:
    """Install how a class statement run again by a module reload updates
    the class it declared before (zsharp_py/_interop/reload.py)."""
    _redeclaration_hooks[:] = [hook]


def _reloading(module: str) -> bool:
    """Whether ``module`` is being reloaded: by ``importlib.reload`` (which
    lists the modules it is running in ``importlib._RELOADING``) or by
    ``zsharp_py.reload``, which calls it."""
    return module in getattr(importlib, "_RELOADING", {})


def previous_declaration(meta: type, name: str, namespace: dict[str, Any]) -> type | None:
    """The class (of metaclass ``meta``) a module being reloaded declared at
    its top level under this class statement's name before the reload, or
    None (a first import, a class inside a function or another class, a
    name that held something else, no reload hook installed)."""
    module = namespace.get("__module__")
    if not isinstance(module, str) or namespace.get("__qualname__") != name:
        return None
    if not _redeclaration_hooks or not _reloading(module):
        return None
    loaded = sys.modules.get(module)
    previous = getattr(loaded, "__dict__", {}).get(name) if loaded is not None else None
    if (
        isinstance(previous, type)
        and type(previous) is meta
        and previous.__module__ == module
        and previous.__qualname__ == name
        and "_zs_staged" not in previous.__dict__
        and "_zs_description" not in previous.__dict__
    ):
        return previous
    return None


def redeclared(previous: type, new: type, cell: Any, namespace: dict[str, Any]) -> type:
    """A reload ran the class statement of ``previous`` again, which made
    ``new``: ``new`` is only read (marked ``_zs_staged``: no lookup by name
    finds it, it is never registered), its methods' ``__class__`` cell
    (what ``super()`` reads) names ``previous``, and the reload hook
    updates ``previous`` from it (or refuses); the statement binds
    ``previous``, which stays the one class of that name."""
    type.__setattr__(new, "_zs_staged", True)
    if cell is not None:
        cell.cell_contents = previous
    return _redeclaration_hooks[0](previous, new, namespace)


# Bases whose own __new__ is not the user's (the library's, Python's).
_LIBRARY_MODULES = (
    "builtins",
    "zsharp_py",
    "typing",
    "typing_extensions",
    "abc",
    "collections.abc",
)


def _refuse_new(name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> None:
    """A native class's ``__new__`` would never run: ``Cls()`` allocates the
    object natively (native/binding/classes.c), so refuse one when the class
    is declared, its own or a mixin's."""
    if "__new__" in namespace:
        raise TypeError(
            f"{name}: a native class cannot define __new__ (objects are created "
            "natively, so it would never run); put the initialisation in __init__"
        )
    for base in bases:
        for ancestor in base.__mro__:
            module = getattr(ancestor, "__module__", "") or ""
            if (
                "__new__" in ancestor.__dict__
                and ancestor is not _core.ObjectConjugate
                and not module.startswith(_LIBRARY_MODULES)
            ):
                raise TypeError(
                    f"{name}: its base {ancestor.__name__} defines __new__, which "
                    "never runs for a native class (objects are created natively); "
                    "put the initialisation in __init__"
                )


def _refuse_slots(name: str, namespace: dict[str, Any]) -> None:
    """A native class's conjugates hold no Python attributes of their own
    but its ``zs.state()`` declarations (ObjectMeta makes their slots)."""
    slots = namespace.get("__slots__", ())
    if isinstance(slots, str) or tuple(slots):
        raise TypeError(
            f"{name}: a native class cannot have instance attributes of its own "
            "(__slots__, __dict__ or __weakref__): its state lives in native properties, "
            "or in Python state declared with zs.state() (e.g. `cache: dict = "
            "zs.state(factory=dict)`)"
        )


def _take_state(namespace: dict[str, Any]) -> dict[str, StateField]:
    """Take the ``zs.state()`` declarations out of a class body, with their
    annotations (in declaration order)."""
    declared = {key: value for key, value in namespace.items() if isinstance(value, StateField)}
    annotations = namespace.get("__annotations__", {})
    for key in declared:
        del namespace[key]
        annotations.pop(key, None)
    return declared


def _property_names(bases: tuple[type, ...]) -> set[str]:
    """The native properties the native bases declare (laid out or not)."""
    names: set[str] = set()
    for base in bases:
        for ancestor in base.__mro__:
            if isinstance(ancestor, ObjectMeta) and ancestor is not Object:
                names.update(_annotations_of(ancestor))
    return names


def _check_state_names(
    name: str,
    bases: tuple[type, ...],
    namespace: dict[str, Any],
    own: dict[str, StateField],
    inherited: dict[str, StateField],
) -> None:
    """Refuse, when the class statement runs, Python state whose name is
    taken (zs.Object's own attributes, a property, a parent's state), and a
    property named like inherited state."""
    properties = _property_names(bases) if own else set()
    for attribute in own:
        dunder = attribute.startswith("__") and attribute.endswith("__")
        if dunder or attribute.startswith("_zs_"):
            used = "Python or zsharp_py"
        elif attribute in _RESERVED or any(attribute in vars(c) for c in Object.__mro__):
            used = "zs.Object"
        elif attribute in properties:
            used = "a property of a parent class"
        elif attribute in inherited:
            used = "Python state of a parent class"
        else:
            continue
        raise TypeError(
            f"{name}.{attribute}: the name is already used by {used}; "
            "give the Python state another name"
        )
    if inherited:
        for attribute, annotation in namespace.get("__annotations__", {}).items():
            if attribute in inherited and not _is_classvar(annotation):
                raise TypeError(
                    f"{name}.{attribute}: the name is already used by Python state of a "
                    "parent class; give the property another name"
                )


def _install_state(cls: ObjectMeta, attribute: str, declared: StateField) -> None:
    """Replace the slot's member descriptor by the state's C descriptor
    (native/binding/state.c): it checks the conjugate is live and applies
    the default or factory on the first read."""
    options: dict[str, Any] = {}
    if declared.default is not MISSING:
        options["default"] = declared.default
    if declared.factory is not MISSING:
        options["factory"] = declared.factory
    descriptor = _core.StateProperty(
        cls, cls.__dict__[attribute], f"{cls.__name__}.{attribute}", **options
    )
    type.__setattr__(cls, attribute, descriptor)


def _set_python_init(cls: ObjectMeta) -> None:
    """Record whether ``cls`` (or a base below zs.Object) has a Python
    ``__init__``: the C creation path (class_call, native/binding/classes.c)
    reads this flag, so a class without one pays nothing for the feature."""
    init = getattr(cls, "__init__")  # noqa: B009 (mypy refuses cls.__init__ on a class)
    type.__setattr__(cls, "_zs_python_init", init is not Object.__init__)


def _refresh_python_init(cls: ObjectMeta) -> None:
    """``__init__`` was assigned or deleted after the declaration: the flag
    of ``cls`` and of every subclass (which may inherit it) changes."""
    pending = [cls]
    while pending:
        current = pending.pop()
        _set_python_init(current)
        pending.extend(typing.cast("list[ObjectMeta]", type.__subclasses__(current)))


# ``obj.__class__ = X`` is refused by FIXED_CLASS; the base descriptor
# (``object.__dict__['__class__'].__set__``) bypasses it, so zsharp_py._core
# refuses that through an audit hook (native/binding/conjugates.c) for every
# class whose MRO holds FIXED_CLASS (object and value conjugates alike).
_core.refuse_reclassing(FIXED_CLASS)


def _create(
    cls: type[Object], /, name: str | None = None, outer: Object | None = None, **properties: Any
) -> Any:
    """``cls(name=..., outer=..., **properties)``: what the C fast path of
    ``cls()`` does not handle (arguments, a class's first use in a runtime)."""
    layout = cls._zs_layout
    if layout is None or layout.cls is not cls:  # inherited, or not laid out yet
        layout = class_layout(cls)
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, not {type(name).__name__}")
    if outer is not None:
        if not isinstance(outer, Object):
            raise TypeError(f"outer must be a zs.Object or None, not {type(outer).__name__}")
        runtime = outer._live_runtime()
    else:
        runtime = context.current.get()
        if runtime is None or runtime._closed:
            runtime = context.current_runtime()
    if properties:
        _check_properties(layout, runtime, properties)
    return runtime._new_object(layout.cls, layout, name, outer, properties)


def _create_initialized(
    cls: type[Object],
    /,
    *args: Any,
    name: str | None = None,
    outer: Object | None = None,
    **arguments: Any,
) -> Any:
    """``cls(*args, name=..., outer=..., **arguments)`` for a class with a
    Python ``__init__``: the object is made with its declared defaults
    (``name`` and ``outer`` are the library's: they name the native object
    and set its outer), then ``__init__`` runs with every other argument.

    The new object is unreachable until ``__init__`` links it somewhere, so
    a strong reference keeps it alive meanwhile (``__init__`` may create
    objects or collect). If ``__init__`` raises, the object leaves the root
    set and is marked as garbage (no half-built object stays reachable), and
    the error propagates."""
    if isinstance(outer, Object):
        runtime = outer._live_runtime()
    else:
        runtime = context.current.get()
        if runtime is None or runtime._closed:
            runtime = context.current_runtime()
    with runtime._lock:  # no collection between the creation and the strong reference
        obj = _create(cls, name, outer)
        handle = obj._h
        runtime._heap_add_strong_ref(handle, f"{cls.__name__}()")
    try:
        result = cls.__init__(obj, *args, **arguments)
        if result is not None:
            raise TypeError(
                f"{cls.__name__}.__init__() should return None, not '{type(result).__name__}'"
            )
    except BaseException:
        # Both in one call, with no Python code between them; nothing once
        # the runtime is closing (it was closed meanwhile: the object is gone).
        runtime._heap_abandon(handle)
        raise
    finally:
        runtime._release_strong(handle)
    return obj


def declaring_scope(
    depth: int, names: Collection[str] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Where a string annotation or type argument written ``depth`` frames
    above the caller resolves: that frame's module globals (live, so later
    definitions are seen) plus a snapshot of its locals when it is a
    function (a class declared inside one). The only capture of a caller's
    scope: class declarations (``Object``, ``Struct``) and the type
    arguments of containers and pointers all resolve through it.

    Only classes are kept from a function's locals, or only ``names`` when
    given (the names a string argument mentions): a snapshot of every local
    would keep them (black values included) alive for ever. With ``names``
    empty the locals are not read at all: before Python 3.13, reading a
    running function's ``f_locals`` leaves a dict of all its locals on the
    frame, which keeps each of them (a conjugate deleted since) alive until
    the function returns."""
    frame = sys._getframe(depth + 1)
    try:
        if names is not None and not names:
            return frame.f_globals, {}
        if frame.f_locals is frame.f_globals:
            return frame.f_globals, {}
        local_values = frame.f_locals
        if names is None:
            kept = {k: v for k, v in local_values.items() if isinstance(v, type)}
        else:
            kept = {k: v for k, v in local_values.items() if k in names}
        return frame.f_globals, kept
    finally:
        del frame


def _annotations_of(cls: type) -> dict[str, Any]:
    """The class's own annotations, ClassVars and private ``_zs_`` names left out."""
    return {
        k: v
        for k, v in inspect.get_annotations(cls).items()
        if not _is_classvar(v) and not k.startswith("_zs_")
    }


# Names a struct member may not take (ValueConjugate's own API).
_RESERVED_STRUCT = frozenset({"is_black", "is_expired", "dispose", "clone", "to_python"})


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    return typing.get_origin(annotation) is ClassVar


def _check_properties(layout: ClassLayout, runtime: RuntimeLike, values: dict[str, Any]) -> None:
    """Validate constructor keywords before anything is allocated (Python
    state keywords are assigned once the object exists, as properties are)."""
    unknown = values.keys() - layout.property_names - layout.cls._zs_state.keys()
    if unknown:
        noun = "an unknown property" if len(unknown) == 1 else "unknown properties"
        raise TypeError(f"{layout.cls.__name__}() got {noun}: {', '.join(sorted(unknown))}")
    for info in layout.properties:
        if info.name in values:
            value = values[info.name]
            info.kind.check(f"{layout.cls.__name__}.{info.name}", value)
            if issubclass(type(value), Object) and value._rt is not runtime:
                raise ValueError(
                    f"{layout.cls.__name__}.{info.name}: the object belongs to another runtime"
                )


_declaration_checks: list[typing.Callable[[type, dict[str, Any]], None]] = []


def add_declaration_check(check_declaration: typing.Callable[[type, dict[str, Any]], None]) -> None:
    """Run ``check_declaration(cls, namespace)`` on every zs.Object subclass
    when its class statement runs (the interop layer refuses overrides that
    native code would call with another signature's parameter block)."""
    _declaration_checks.append(check_declaration)


class Object(_core.ObjectConjugate, metaclass=ObjectMeta):
    """Base of every native class declared from Python.

    Instances are *red* object conjugates: the native side owns the object;
    the conjugate never keeps it alive and expires (every access raises
    ``ExpiredConjugateError``) when the garbage collector destroys it.
    There is at most one conjugate per native object, so ``a.target is b``.

    A subclass may define ``__init__``: ``Actor(7, name="Hero")`` creates the
    object with its declared defaults (``name`` and ``outer`` are the
    library's), then calls ``__init__(7)``. Without one, keywords set
    properties: ``Actor(name="Hero", health=5)``.

    >>> import zsharp_py as zs
    >>> class Actor(zs.Object):
    ...     health: zs.Int32 = 100
    ...     target: "Actor | None"
    >>> with zs.Runtime() as rt:
    ...     hero = Actor(name="Hero"); hero.add_to_root()
    ...     hero.target = Actor(); hero.health -= 1
    ...     _ = rt.collect_garbage()
    ...     (hero.health, hero.target.name)
    (99, 'Actor_0')
    """

    # The conjugate's state is the C base's (native/binding/core.h): the
    # native address, the handle, the runtime and the views cache.
    __slots__ = ()
    __class__ = FIXED_CLASS  # never re-classed: its native object has its own class's layout
    _zs_layout: ClassVar[ClassLayout | None] = None  # each class's own, set by class_layout
    if TYPE_CHECKING:

        @property
        def _rt(self) -> RuntimeLike: ...

    _zs_defaults: ClassVar[dict[str, Any]]
    _zs_class_flags: ClassVar[int]
    _zs_state: ClassVar[dict[str, StateField]]  # every zs.state() declaration, inherited too

    if TYPE_CHECKING:
        # What type checkers see of the class call (ObjectMeta is a
        # dataclass_transform): the library's keywords ``name=`` and
        # ``outer=`` (fields under private names, the keyword being the
        # alias), then a subclass's properties. Nothing at run time.
        _zs_name_keyword: str | None = library_keyword(default=None, alias="name")
        _zs_outer_keyword: Object | None = library_keyword(default=None, alias="outer")
    else:

        def __init__(
            self, name: str | None = None, outer: Object | None = None, **properties: Any
        ) -> None:
            """Does nothing: ``Actor(name=..., outer=..., **properties)``
            creates the object natively before any ``__init__`` runs. A
            subclass's ``__init__`` may call ``super().__init__()``, with no
            arguments."""
            if name is not None or outer is not None or properties:
                raise TypeError(
                    f"{type(self).__name__}: zs.Object.__init__() takes no arguments "
                    "(name=, outer= and property values are given to the class call, "
                    "and the object exists before __init__ runs)"
                )

    # ---- identity -----------------------------------------------------
    @property
    def name(self) -> str:
        """The object's name (``"Actor_3"`` when none was given)."""
        index, number, _ = _core.object_header(self)
        return self._rt._name_text(index, number)

    @property
    def outer(self) -> Object | None:
        """The outer object (an immutable reference that keeps it alive)."""
        _, _, ref = _core.object_header(self)
        return self._rt._conjugate_of(ref) if ref else None

    @property
    def runtime(self) -> RuntimeLike:
        """The runtime whose heap holds this object."""
        return self._rt

    @property
    def handle(self) -> int:
        """The object's handle (index in the low 32 bits, serial above)."""
        return self._h

    @property
    def is_black(self) -> bool:
        """Always False: object conjugates are red (owned by the native side)."""
        return False

    # ---- lifetime control ---------------------------------------------
    def add_to_root(self) -> None:
        """Add the object to the root set: it survives every collection."""
        runtime = self._live_runtime()
        runtime._heap_add_to_root(self._h, self._what("add_to_root"))

    def remove_from_root(self) -> None:
        """Remove the object from the root set."""
        runtime = self._live_runtime()
        runtime._heap_remove_from_root(self._h, self._what("remove_from_root"))

    @property
    def is_rooted(self) -> bool:
        """Whether the object is in the root set."""
        return self._live_runtime()._heap_is_rooted(self._h)

    def mark_as_garbage(self) -> None:
        """Destroy the object at the next collection even if it is referenced.

        Object-reference properties pointing at it become ``None`` during that
        collection (they are *killable*). Roots, strong pointers and inner
        objects' ``outer`` (an immutable reference) still keep it alive.
        """
        runtime = self._live_runtime()
        runtime._heap_mark_as_garbage(self._h, self._what("mark_as_garbage"))

    @property
    def is_garbage(self) -> bool:
        """Whether ``mark_as_garbage`` was called on the object."""
        return self._live_runtime()._heap_is_garbage(self._h)

    # ---- clusters -------------------------------------------------------
    def create_cluster(self) -> int:
        """Make this object the root of a GC cluster; return its size.

        The class must be declared with ``cluster_root=True``. The cluster
        gathers every object reachable from here whose class has
        ``can_be_in_cluster=True``; while it lives, the collector marks all
        of them in one step without reading them. Returns 0 when the result
        is smaller than the runtime's ``min_cluster_size`` (nothing kept).
        """
        runtime = self._live_runtime()
        if not type(self)._zs_class_flags & ZS_CLASS_CLUSTER_ROOT:
            raise TypeError(f"{type(self).__name__} is not declared with cluster_root=True")
        return runtime._create_cluster(self)

    def dissolve_cluster(self) -> None:
        """Turn the cluster this object belongs to back into ordinary objects."""
        runtime = self._live_runtime()
        runtime._heap_dissolve_cluster(self._h, self._what("dissolve_cluster"))

    @property
    def cluster(self) -> ClusterInfo | None:
        """The cluster this object belongs to, or None."""
        info: ClusterInfo | None = self._live_runtime()._cluster_info(self._h)
        return info

    # ---- helpers --------------------------------------------------------
    def _live_address(self) -> int:
        """The native object's address, after checking that this conjugate
        has not expired."""
        address: int = self._address
        if not address:
            raise expired_error(self._expired)
        return address

    def _live_runtime(self) -> RuntimeLike:
        """The runtime, after checking that this conjugate has not expired."""
        self._live_address()
        return self._rt

    def _what(self, action: str) -> str:
        return f"{type(self).__name__}.{action}"

    def __repr__(self) -> str:
        if not self._address:
            pointer = self._expired
            subject = expired_subject(pointer)
            shown = f" {subject}" if subject is not None else ""
            return f"<{type(self).__name__}{shown} expired: {expired_reason(pointer)}>"
        return f"<{type(self).__name__} {self.name!r} #{self._h & 0xFFFFFFFF}>"

    def __copy__(self) -> Object:
        raise TypeError(
            f"{type(self).__name__} is a native object conjugate and cannot be "
            "copied; there is one conjugate per object"
        )

    def __deepcopy__(self, memo: dict[int, Any]) -> Object:
        return self.__copy__()

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(f"{type(self).__name__} is a native object conjugate and cannot be pickled")


# ---------------------------------------------------------------------------
# Property kinds for object references
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterInfo:
    """A GC cluster as seen from one of its objects."""

    root: Object | None
    objects: int
    referenced_clusters: int
    mutable_objects: int
    referenced_by: int


def _check_target(what: str, target: type[Object], value: Any, extra: str = "") -> None:
    # The value's real type: isinstance would believe a __class__ property.
    if value is None or issubclass(type(value), target):
        if value is not None and not value._address:
            raise ExpiredConjugateError(
                f"cannot store into {what}: {expired_error(value._expired)}"
            )
        return
    raise TypeError(f"{what} expects {target.__name__}{extra} or None, not {type(value).__name__}")


def _reference_store_failed(self: Object, value: Any, what: str) -> None:
    """Raise the precise error for a reference store that cannot happen."""
    self._live_runtime()
    if issubclass(type(value), Object):
        value._live_runtime()
        if value._rt is not self._rt:
            raise ValueError(f"cannot store into {what}: the object belongs to another runtime")
    raise TypeError(
        f"{what} expects an object of its declared class or None, not {type(value).__name__}"
    )


def _reference_store_refused(runtime: RuntimeLike, status: int, what: str) -> NoReturn:
    """Raise for a refused store (the C setters call this); a dying holder
    or target expires first (``_base.errors.refused``)."""
    refused(status, what, runtime)


class ObjectRefKind(PropertyKind):
    """A strong, killable object reference (``target: "Actor | None"``)."""

    __slots__ = ("target",)
    member_type = "uint64_t"
    member_kind = _core.MEMBER_OBJECT

    def __init__(self, target: type[Object]) -> None:
        self.target = target

    def install(self, cls: type, name: str, cname: str, offset: int) -> None:
        """On an object class the C ``ReferenceProperty`` (a read is a field
        load and a conjugate-table lookup; a store checks, then calls
        zs_store_ref); on a struct a ``ValueProperty``."""
        if not issubclass(cls, Object):
            return super().install(cls, name, cname, offset)
        setattr(
            cls,
            name,
            _core.ReferenceProperty(
                cls,
                self.target,
                f"{cls.__name__}.{name}",
                offset,
                f"Reference to {self.target.__name__} or None (killable, traced).",
            ),
        )

    def check(self, what: str, value: Any) -> None:
        """Type and expiry check."""
        _check_target(what, self.target, value)

    def describe(self) -> str:
        """``Target | None``."""
        return f"{self.target.__name__} | None"

    @property
    def key(self) -> Any:
        """References to different classes are different kinds (the target
        is checked on every store); natively they share one type."""
        return ("object", self.target)

    def make_kind(self) -> _core.Kind:
        """A strong reference kind checking its target class."""
        return _core.Kind(
            _core.KIND_OBJECT,
            *size_align(self.member_type),
            _core.TYPE_OBJECT,
            self.describe(),
            cls=self.target,
        )


class WeakRefKind(PropertyKind):
    """A weak reference property (``friend: zs.WeakObjectPtr["Actor"]``):
    reads give a ``WeakObjectPtr``; writes take one, an object or None."""

    __slots__ = ("target", "pointer_class")
    member_type = "uint64_t"
    member_kind = _core.MEMBER_WEAK_OBJECT

    def __init__(self, target: type[Object], pointer_class: type) -> None:
        self.target = target
        # What reads give: WeakObjectPtr (zsharp_py/_types/object_pointers.py),
        # a subclass of zsharp_py._core.WeakPointer.
        self.pointer_class = pointer_class

    def check(self, what: str, value: Any) -> None:
        """Accept a WeakObjectPtr, an object of the target class or None."""
        if not isinstance(value, _core.WeakPointer):
            _check_target(what, self.target, value, ", WeakObjectPtr")

    def describe(self) -> str:
        """``WeakObjectPtr[Target]``."""
        return f"WeakObjectPtr[{self.target.__name__}]"

    @property
    def key(self) -> Any:
        """``("weak", target)``."""
        return ("weak", self.target)

    def make_kind(self) -> _core.Kind:
        """A weak reference kind (not traced) checking its target class: it
        takes a WeakObjectPtr, an object or None, and reads as a
        WeakObjectPtr (both in native/binding, kind.c and weak.c)."""
        return _core.Kind(
            _core.KIND_WEAK,
            *size_align(self.member_type),
            _core.TYPE_WEAK_OBJECT,
            self.describe(),
            cls=self.target,
            decode=self.pointer_class,
        )


# ---------------------------------------------------------------------------
# Annotation resolution and layout
# ---------------------------------------------------------------------------


def _evaluate(cls: type, annotation: Any) -> Any:
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        scope_globals, scope_locals = cls.__dict__["_zs_scope"]
        # A ChainMap, not a copy: a host's scope binds names on lookup
        # (zsharp_py/_interop/reflection.py _HostNames).
        names = collections.ChainMap({cls.__name__: cls}, scope_locals)
        try:
            return eval(annotation, scope_globals, names)  # noqa: S307
        except Exception as exc:
            raise TypeError(
                f"{cls.__name__}: cannot resolve annotation {annotation!r}: {exc}"
            ) from exc
    return annotation


def object_target(cls: type, annotation: Any) -> type[Object] | None:
    """The class of an object-reference annotation (``T``, ``T | None``)."""
    annotation = _evaluate(cls, annotation)
    if isinstance(annotation, type) and issubclass(annotation, Object):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return object_target(cls, members[0])
    return None


def resolve_kind(cls: type, attribute: str, annotation: Any) -> PropertyKind:
    """Map one annotation to its property kind, or raise ``TypeError``."""
    return kind_of(cls, _evaluate(cls, annotation), f"{cls.__name__}.{attribute}", annotation)


def kind_of(cls: type, resolved: Any, what: str, annotation: Any = None) -> PropertyKind:
    """The property kind of an evaluated annotation or type argument (``cls``
    gives the scope where nested string annotations resolve).

    The one annotation resolver, knowing no type of a higher layer: a
    Python shorthand (``int``, ``str``...) stands for the zs type registered
    for it (``register_shorthand``); a zs type gives its own kind
    (``_zs_value_kind(owner)``), a generic one from its type arguments
    (``_zs_generic_kind(owner, arguments, what)`` on the origin, as
    ``WeakObjectPtr[T]``); an object class, alone or ``| None``, is a
    reference."""
    if isinstance(resolved, (str, typing.ForwardRef)):
        resolved = _evaluate(cls, resolved)
    resolved = PYTHON_SHORTHANDS.get(resolved, resolved)
    if isinstance(resolved, type) and issubclass(resolved, Scalar) and resolved is not Scalar:
        return ScalarKind(resolved)
    if isinstance(resolved, type) and issubclass(resolved, (enum.IntEnum, enum.IntFlag)):
        # Stored as its integer type (a host's enum says which; Int32 else),
        # read as its members.
        underlying = typing.cast("type[Scalar]", getattr(resolved, "_zs_underlying", Int32))
        return EnumKind(resolved, underlying)
    make_kind = getattr(resolved, "_zs_value_kind", None)
    if make_kind is not None:
        kind: PropertyKind = make_kind(cls)
        return kind
    make_generic = getattr(typing.get_origin(resolved), "_zs_generic_kind", None)
    if make_generic is not None:
        generic: PropertyKind = make_generic(cls, typing.get_args(resolved), what)
        return generic
    target = object_target(cls, resolved)
    if target is not None:
        return ObjectRefKind(target)
    shown = annotation if annotation is not None else resolved
    raise TypeError(
        f"{what}: unsupported property type {type_text(shown)}; {unsupported_hint(resolved)}"
    )


def check_annotations(cls: type) -> None:
    """Refuse, when the class statement runs, an annotation no property can
    have, with the zs type to use. This only resolves the annotations to
    check them: the layout is still made on first use (class_layout,
    struct_layout). An annotation naming something not declared yet (a
    forward reference: NameError, or AttributeError from a module still
    being imported) is left for the first use, as is a name error there."""
    for attribute, annotation in _annotations_of(cls).items():
        try:
            resolve_kind(cls, attribute, annotation)
        except TypeError as error:
            if not _is_forward_reference(error):
                raise


def _is_forward_reference(error: BaseException) -> bool:
    """Whether resolving failed because a name is not defined yet."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, (NameError, AttributeError)):
            return True
        cause = cause.__cause__
    return False


def class_layout(cls: type[Object]) -> ClassLayout:
    """The layout of ``cls``, computed (and descriptors installed) on first use."""
    layout: ClassLayout | None = cls.__dict__.get("_zs_layout")
    if layout is not None:
        return layout
    parents = [typing.cast("type[Object]", b) for b in cls.__bases__ if isinstance(b, ObjectMeta)]
    if len(parents) > 1:
        raise TypeError(
            f"{cls.__name__}: a native class has one native parent, got "
            f"{', '.join(p.__name__ for p in parents)}"
        )
    parent = parents[0] if parents else None
    parent_layout = class_layout(parent) if parent is not None else None
    inherited = list(parent_layout.properties) if parent_layout else []
    described: Described | None = cls.__dict__.get("_zs_description")
    if described is not None:  # a host's class: its description says where each property is
        start = parent_layout.size if parent_layout else _core.OBJECT_HEADER_SIZE
        own = described_properties(cls, described, start, len(inherited))
        size = described.size
    else:
        own, size = _declared_properties(cls, parent_layout, inherited)
    return _bind_class(cls, parent, inherited, own, size)


@typing.runtime_checkable
class DescribedProperty(typing.Protocol):
    """A property (or struct member) as a description gives it."""

    name: str
    type: str
    offset: int


@typing.runtime_checkable
class Described(typing.Protocol):
    """What a host's description of a class or struct gives the binder
    (zsharp_py/_interop/reflection.py reads it from the native one)."""

    name: str
    size: int
    properties: tuple[DescribedProperty, ...]


def described_properties(
    cls: type, described: Described, start: int, first: int = 0
) -> list[PropertyInfo]:
    """The properties (or struct members) a host's description gives ``cls``,
    their kinds resolved from the type texts (numbered from ``first`` after
    inherited ones), refused unless each fits between ``start`` and the
    described size (``_check_described``)."""
    own = [
        PropertyInfo(
            p.name, member_name(first + i, p.name), resolve_kind(cls, p.name, p.type), p.offset
        )
        for i, p in enumerate(described.properties)
    ]
    _check_described(cls.__name__, own, start, described.size)
    return own


def _check_described(what: str, own: list[PropertyInfo], start: int, size: int) -> None:
    """Refuse a description whose properties do not fit: each inside the
    object or struct, past the parent's part, aligned, and apart."""
    spans: list[tuple[int, int, str]] = []
    for info in own:
        member_size, member_align = size_align(info.kind.member_type)
        end = info.offset + member_size
        if info.offset < start or end > size or info.offset % member_align:
            raise TypeError(
                f"{what}.{info.name}: {info.kind.describe()} at offset {info.offset} does not "
                f"fit the native layout ({member_size} bytes aligned to {member_align}, "
                f"between {start} and {size})"
            )
        for low, high, other in spans:
            if info.offset < high and low < end:
                raise TypeError(f"{what}.{info.name}: overlaps {what}.{other} in the description")
        spans.append((info.offset, end, info.name))


def _declared_properties(
    cls: type[Object], parent_layout: ClassLayout | None, inherited: list[PropertyInfo]
) -> tuple[list[PropertyInfo], int]:
    """The properties a Python class declares, laid out after its parent's
    (a host parent's part as one opaque block): (own properties, size)."""
    taken = {p.name for p in inherited}
    own: list[PropertyInfo] = []
    defaults = cls.__dict__.get("_zs_defaults", {})
    # zs.Object's own annotations only type its private slots.
    annotations = _annotations_of(cls) if cls is not Object else {}
    for attribute, annotation in annotations.items():
        if attribute in _RESERVED or attribute in taken:
            raise TypeError(
                f"{cls.__name__}.{attribute}: the name is already used by "
                f"{'zs.Object' if attribute in _RESERVED else 'a parent class'}"
            )
        if attribute.startswith("_"):
            raise TypeError(f"{cls.__name__}.{attribute}: property names cannot start with '_'")
        info = PropertyInfo(
            attribute,
            member_name(len(inherited) + len(own), attribute),
            resolve_kind(cls, attribute, annotation),
        )
        if attribute in defaults:
            info.has_default, info.default = True, defaults[attribute]
            info.kind.check(f"{cls.__name__}.{attribute} (default)", info.default)
        own.append(info)
    if parent_layout is not None and parent_layout.described:
        head: list[tuple[str, Any]] = [
            (HEADER, Layout.opaque(parent_layout.cls.__name__, parent_layout.size, 8))
        ]
    else:
        head = [(HEADER, "zs_object")] + [(p.cname, p.kind.member_type) for p in inherited]
    c_struct = Layout(cls.__name__, head + [(p.cname, p.kind.member_type) for p in own])
    for info in own:
        info.offset = c_struct.offsets[info.cname]
    return own, c_struct.size


def _bind_class(
    cls: type[Object],
    parent: type[Object] | None,
    inherited: list[PropertyInfo],
    own: list[PropertyInfo],
    size: int,
) -> ClassLayout:
    """The one binder of object classes: install a C descriptor for each own
    property at its offset and record the layout, whether the properties
    were declared in Python or described by a native host."""
    own_members: list[tuple[int, PropertyKind]] = []
    for info in own:
        info.kind.install(cls, info.name, info.cname, info.offset)
        if not isinstance(info.kind, ScalarKind):
            own_members.append((info.offset, info.kind))
    properties = inherited + own
    image, defaults, initializers = _initial_image(properties, size)
    layout = ClassLayout(
        cls,
        parent,
        size,
        properties,
        own_members,
        cls.__dict__.get("_zs_class_flags", 0),
        frozenset(p.name for p in properties),
        defaults,
        initializers,
        image,
        described="_zs_description" in cls.__dict__,
        own_count=len(own),
    )
    type.__setattr__(cls, "_zs_layout", layout)
    return layout


def _initial_image(
    properties: list[PropertyInfo], size: int
) -> tuple[bytes, list[PropertyInfo], list[PropertyInfo]]:
    """What a new object's properties start as: the plain part (scalar
    defaults, embedded structs' scalar defaults) as the bytes after the
    header, which the native side copies in at creation, and the rest
    (``(defaults, initializers)``) left to run after creation. The image
    only ever holds plain data: a reference member stays zero in it."""
    header = _core.OBJECT_HEADER_SIZE
    buffer = bytearray(size)
    defaults: list[PropertyInfo] = []
    initializers: list[PropertyInfo] = []
    for info in properties:
        if info.has_default:
            if info.default is None and isinstance(info.kind, (ObjectRefKind, WeakRefKind)):
                continue  # a null reference: already zero
            if info.kind.is_zero(info.default):
                continue  # an empty value: already what the zeroed member holds
            if not pack_default(info.kind, buffer, info.offset, info.default):
                defaults.append(info)
        elif not info.kind.pack_initial(buffer, info.offset):
            initializers.append(info)
    image = bytes(buffer)[header:].rstrip(b"\0")
    return image, defaults, initializers


# struct module formats of the scalar C types (native byte order and size).
_PACK = {
    "_Bool": "?",
    "int8_t": "b",
    "int16_t": "h",
    "int32_t": "i",
    "int64_t": "q",
    "uint8_t": "B",
    "uint16_t": "H",
    "uint32_t": "I",
    "uint64_t": "Q",
    "float": "f",
    "double": "d",
}


def pack_default(kind: PropertyKind, buffer: bytearray, offset: int, value: Any) -> bool:
    """Write a scalar or enum default into an image; False for any other kind."""
    if isinstance(kind, EnumKind):
        number = kind.number("default", value)
        _struct_module.pack_into(_PACK[kind.scalar.c_type], buffer, offset, number)
        return True
    if not isinstance(kind, ScalarKind):
        return False
    _struct_module.pack_into(_PACK[kind.scalar.c_type], buffer, offset, kind.scalar.convert(value))
    return True
