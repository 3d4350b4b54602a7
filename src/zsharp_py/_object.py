"""Native classes declared from Python (``class Actor(zs.Object)``) and their
object conjugates.

Declaring a class records its annotations; the first use (instantiation or
registration in a runtime) resolves them, lays out a C struct (the object
header, then the properties) and installs one descriptor per property. Each
runtime registers the native class and its reference schema on first use.
"""
from __future__ import annotations

import inspect
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from . import _core
from ._conjugate import FIXED_CLASS, ExpiredPointer, expired_error, expired_reason
from ._errors import ExpiredConjugateError
from ._native import (check, declare_struct, ffi, layout_address, layout_ffi, lib, member_name,
                      refused)
from ._types import PYTHON_SHORTHANDS, PropertyKind, Scalar, ScalarKind

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["Object", "ObjectMeta", "ClassLayout", "class_layout"]

# Attribute names of zs.Object that a property may not shadow.
_RESERVED = frozenset(
    {"name", "outer", "is_expired", "is_black", "add_to_root", "remove_from_root",
     "is_rooted", "mark_as_garbage", "is_garbage", "runtime", "handle", "dispose",
     "create_cluster", "dissolve_cluster", "cluster"})

# zs_class flags (native/include/zsharp.h).
ZS_CLASS_CLUSTER_ROOT = 0x1
ZS_CLASS_IN_CLUSTER = 0x2

ZS_MEMBER_OBJECT = 1
ZS_MEMBER_WEAK_OBJECT = 2


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
    pointer_type: Any                   # layout-FFI ``struct ... *``
    size: int
    properties: list[PropertyInfo]      # inherited first
    own_members: list[tuple[int, PropertyKind]]  # (offset, spec): cls's own non-scalar members
    class_flags: int = 0                # ZS_CLASS_*
    property_names: frozenset[str] = field(default_factory=frozenset)
    defaults: list[PropertyInfo] = field(default_factory=list)  # set after creation
    initializers: list[PropertyInfo] = field(default_factory=list)  # run after creation
    image: bytes = b""  # plain defaults: the bytes after the header of a new object


class ObjectMeta(_core.ObjectClass):
    """Metaclass of ``zs.Object``: collects property declarations and makes
    ``Actor(name=..., outer=..., **properties)`` allocate a native object
    (``Actor()`` in C when it can, see native/binding/classes.c; else
    ``_create``)."""

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any],
                *, cluster_root: bool | None = None, can_be_in_cluster: bool | None = None,
                **kwargs: Any) -> ObjectMeta:
        namespace.setdefault("__slots__", ())
        # Cluster flags are inherited unless the class says otherwise.
        inherited = next((b.__dict__.get("_zs_class_flags", 0) for b in bases
                          if isinstance(b, ObjectMeta)), 0)
        flags = inherited
        for wanted, bit in ((cluster_root, ZS_CLASS_CLUSTER_ROOT),
                            (can_be_in_cluster, ZS_CLASS_IN_CLUSTER)):
            if wanted is not None:
                flags = flags | bit if wanted else flags & ~bit
        namespace["_zs_class_flags"] = flags
        annotations = namespace.get("__annotations__", {})
        defaults = {key: namespace.pop(key) for key in list(annotations)
                    if key in namespace and not _is_classvar(annotations[key])}
        namespace["_zs_defaults"] = defaults
        namespace["_zs_scope"] = _scope_of(2)
        cls = super().__new__(mcls, name, bases, namespace, **kwargs)
        _core.init_class(cls)
        # An override that native code would call with another signature's
        # parameter block is refused now when it can be decided now
        # (zsharp_py/_calls.py check_overrides; else at the first call).
        calls = sys.modules.get("zsharp_py._calls")
        if calls is not None:
            calls.check_overrides(cls, namespace)
        return cls


# ``obj.__class__ = X`` is refused by FIXED_CLASS; the base descriptor
# (``object.__dict__['__class__'].__set__``) bypasses it, so zsharp_py._core
# refuses that through an audit hook (native/binding/conjugates.c) for every
# class whose MRO holds FIXED_CLASS (object and value conjugates alike).
_core.refuse_reclassing(FIXED_CLASS)


def _create(cls: type[Object], /, name: str | None = None, outer: Object | None = None,
            **properties: Any) -> Any:
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
        runtime = _current_context.get()
        if runtime is None or runtime._closed:
            runtime = _current_runtime()
    if properties:
        _check_properties(layout, runtime, properties)
    return runtime._new_object(layout.cls, layout, name, outer, properties)


def _scope_of(depth: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Where string annotations resolve: the declaring frame's module globals
    (live, so later definitions are seen) plus a snapshot of its locals when
    it is a function (a class declared inside one)."""
    frame = sys._getframe(depth)
    # Only classes are kept from a function's locals: a snapshot of every
    # local would keep them (black values included) alive for ever.
    scope_locals = ({k: v for k, v in frame.f_locals.items() if isinstance(v, type)}
                    if frame.f_locals is not frame.f_globals else {})
    return frame.f_globals, scope_locals


def _annotations_of(cls: type) -> dict[str, Any]:
    """The class's own annotations, ClassVars and private ``_zs_`` names left out."""
    return {k: v for k, v in inspect.get_annotations(cls).items()
            if not _is_classvar(v) and not k.startswith("_zs_")}


# Names a struct member may not take (ValueConjugate's own API).
_RESERVED_STRUCT = frozenset({"is_black", "is_expired", "dispose", "clone", "to_python"})


def _is_classvar(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    return typing.get_origin(annotation) is ClassVar


def _check_properties(layout: ClassLayout, runtime: Runtime, values: dict[str, Any]) -> None:
    """Validate constructor keywords before anything is allocated."""
    unknown = values.keys() - layout.property_names
    if unknown:
        raise TypeError(f"{layout.cls.__name__}() got unknown properties: "
                        f"{', '.join(sorted(unknown))}")
    for info in layout.properties:
        if info.name in values:
            value = values[info.name]
            info.kind.check(f"{layout.cls.__name__}.{info.name}", value)
            if isinstance(value, Object) and value._rt is not runtime:
                raise ValueError(f"{layout.cls.__name__}.{info.name}: the object belongs to "
                                 "another runtime")


def _no_runtime() -> Runtime:
    raise RuntimeError("zsharp_py._runtime was not imported")


# Set by _runtime at import (it imports this module, so this one cannot
# import it at the top); a plain global call on the creation path.
_current_runtime: typing.Callable[[], Runtime] = _no_runtime
# The context variable of ``with Runtime()`` (also set by _runtime): read
# inline on the creation path, current_runtime() only when it is unset.
_current_context: Any = None


class Object(_core.ObjectConjugate, metaclass=ObjectMeta):
    """Base of every native class declared from Python.

    Instances are *red* object conjugates: the native side owns the object;
    the conjugate never keeps it alive and expires (every access raises
    ``ExpiredConjugateError``) when the garbage collector destroys it.
    There is at most one conjugate per native object, so ``a.target is b``.

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
        def _rt(self) -> Runtime: ...
    _zs_defaults: ClassVar[dict[str, Any]]
    _zs_class_flags: ClassVar[int]

    if TYPE_CHECKING:
        # Creation goes through ObjectMeta.__call__; this only types it.
        def __init__(self, name: str | None = None, outer: Object | None = None,
                     **properties: Any) -> None: ...

    # ---- identity -----------------------------------------------------
    @property
    def name(self) -> str:
        """The object's name (``"Actor_3"`` when none was given)."""
        header = self._header()
        return self._rt._name_text(header.name_index, header.name_number)

    @property
    def outer(self) -> Object | None:
        """The outer object (an immutable reference that keeps it alive)."""
        ref = self._header().outer
        return self._rt._conjugate_of(ref) if ref else None

    @property
    def runtime(self) -> Runtime:
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
        check(runtime._call(lib.zs_add_to_root, self._h), self._what("add_to_root"), runtime)

    def remove_from_root(self) -> None:
        """Remove the object from the root set."""
        runtime = self._live_runtime()
        check(runtime._call(lib.zs_remove_from_root, self._h), self._what("remove_from_root"),
              runtime)

    @property
    def is_rooted(self) -> bool:
        """Whether the object is in the root set."""
        return self._live_runtime()._query(lib.zs_is_rooted, self._h)

    def mark_as_garbage(self) -> None:
        """Destroy the object at the next collection even if it is referenced.

        Object-reference properties pointing at it become ``None`` during that
        collection (they are *killable*). Roots, strong pointers and inner
        objects' ``outer`` (an immutable reference) still keep it alive.
        """
        runtime = self._live_runtime()
        check(runtime._call(lib.zs_mark_as_garbage, self._h), self._what("mark_as_garbage"), runtime)

    @property
    def is_garbage(self) -> bool:
        """Whether ``mark_as_garbage`` was called on the object."""
        return self._live_runtime()._query(lib.zs_is_garbage, self._h)

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
        check(runtime._call(lib.zs_dissolve_cluster, self._h), self._what("dissolve_cluster"),
              runtime)

    @property
    def cluster(self) -> ClusterInfo | None:
        """The cluster this object belongs to, or None."""
        return self._live_runtime()._cluster_info(self._h)

    # ---- helpers --------------------------------------------------------
    def _live_address(self) -> int:
        """The native object's address, after checking that this conjugate
        has not expired."""
        address: int = self._address
        if not address:
            raise expired_error(self._p)
        return address

    def _live_runtime(self) -> Runtime:
        """The runtime, after checking that this conjugate has not expired."""
        self._live_address()
        return self._rt

    def _header(self) -> Any:
        """The native ``zs_object`` header (checks expiry)."""
        return ffi.cast(_HEADER_POINTER, self._live_address())

    def _what(self, action: str) -> str:
        return f"{type(self).__name__}.{action}"

    def __repr__(self) -> str:
        if not self._address:
            return f"<{type(self).__name__} expired: {expired_reason(self._p)}>"
        return f"<{type(self).__name__} {self.name!r} #{self._h & 0xFFFFFFFF}>"

    def __copy__(self) -> Object:
        raise TypeError(f"{type(self).__name__} is a native object conjugate and cannot be "
                        "copied; there is one conjugate per object")

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
    if value is None or isinstance(value, target):
        if value is not None and not value._address:
            raise ExpiredConjugateError(f"cannot store into {what}: "
                                        f"{expired_error(value._p)}")
        return
    raise TypeError(f"{what} expects {target.__name__}{extra} or None, "
                    f"not {type(value).__name__}")


# The generated reference setter: everything inline (one native call under
# the runtime lock, which close() also takes). Errors are rare and go
# through _reference_store_failed for their messages.
_REFERENCE_SETTER = """
def setter(self, value):
    runtime = self._rt
    if value is None:
        ref = 0
    elif isinstance(value, target) and value._address and value._rt is runtime:
        ref = value._h
    else:
        return failed(self, value, what)
    lock = runtime._lock
    lock.acquire()
    try:
        if not self._address or runtime._closed:
            return failed(self, value, what)
        status = store(runtime._ptr, self._h, offset, ref)
    finally:
        lock.release()
    if status:
        store_refused(runtime, status, what)
"""


def _reference_store_failed(self: Object, value: Any, what: str) -> None:
    """Raise the precise error for a reference store that cannot happen."""
    self._live_runtime()
    if isinstance(value, Object):
        value._live_runtime()
        if value._rt is not self._rt:
            raise ValueError(f"cannot store into {what}: the object belongs to another runtime")
    raise TypeError(f"{what} expects an object of its declared class or None, "
                    f"not {type(value).__name__}")


def _reference_store_refused(runtime: Runtime, status: int, what: str) -> NoReturn:
    """Raise for a refused store (the C setters call this); a dying holder
    or target expires first (``_native.refused``)."""
    refused(status, what, runtime)


def _make_reference_setter(what: str, target: type, offset: int) -> Any:
    namespace: dict[str, Any] = {
        "target": target, "failed": _reference_store_failed,
        "what": what, "store": lib.zs_store_ref, "offset": offset,
        "store_refused": _reference_store_refused}
    exec(_REFERENCE_SETTER, namespace)  # noqa: S102
    return namespace["setter"]


_REF_POINTER = ffi.typeof("zs_ref *")
_HEADER_POINTER = ffi.typeof("zs_object *")


def _read_ref(address: int) -> int:
    ref: int = ffi.cast(_REF_POINTER, address)[0]
    return ref


def _write_ref(runtime: Any, owner: int, native_type: Any, address: int, value: Any) -> None:
    if value is not None and value._rt is not runtime:
        raise ValueError("cannot store an object of another runtime")
    ref = value._h if value is not None else 0
    status = lib.zs_value_store_ref(runtime._ptr, owner, native_type,
                                    ffi.cast(_REF_POINTER, address), ref)
    check(status, "store", runtime)


def owner_handle(holder: Any) -> int:
    """The handle of the object whose memory ``holder`` is or points into."""
    return holder._h if isinstance(holder, Object) else holder._owner


def base_address(holder: Any) -> int:
    """The address of an object's or a struct view's memory (checks expiry)."""
    if isinstance(holder, Object):
        return holder._live_address()
    pointer = holder._p
    if type(pointer) is ExpiredPointer:
        raise expired_error(pointer)
    return layout_address(pointer)


def install_value_property(spec: PropertyKind, cls: type, name: str, cname: str,
                           offset: int) -> None:
    """A property whose value lives at ``offset`` in the owner and is read and
    written through ``spec`` (views are cached in the owner's ``_v``)."""
    what = f"{cls.__name__}.{name}"

    def getter(self: Any) -> Any:
        cache = self._v
        if cache is not None:
            view = cache.get(name)
            if view is not None:
                return view
        runtime = self._rt
        with runtime._lock:
            address = base_address(self) + offset
            return spec.read(runtime, self, name, owner_handle(self), address)

    def setter(self: Any, value: Any) -> None:
        runtime = self._rt
        with runtime._lock:
            address = base_address(self) + offset
            runtime._live_ptr()
            try:
                spec.write(runtime, owner_handle(self), address, value)
            except (TypeError, OverflowError, ValueError) as error:
                raise type(error)(f"{what}: {error}") from None
            cache = self._v
            if cache is not None and name in cache:
                from ._values import invalidate_children

                invalidate_children(cache[name])

    setattr(cls, name, property(getter, setter, None, f"{spec.describe()} property."))


class ObjectRefKind(PropertyKind):
    """A strong, killable object reference (``target: "Actor | None"``)."""

    __slots__ = ("target",)
    c_type = "uint64_t"
    member_kind = ZS_MEMBER_OBJECT

    def __init__(self, target: type[Object]) -> None:
        self.target = target

    def install(self, cls: type[Object], name: str, cname: str, offset: int) -> None:
        """Install the C descriptor (on a struct: a value property)."""
        if not issubclass(cls, Object):
            return install_value_property(self, cls, name, cname, offset)
        # In C (native/binding/properties.c): a read is a field load and a
        # conjugate-table lookup; a store checks, then calls zs_store_ref.
        setattr(cls, name, _core.ReferenceProperty(
            cls, self.target, f"{cls.__name__}.{name}", offset,
            f"Reference to {self.target.__name__} or None (killable, traced)."))

    def check(self, what: str, value: Any) -> None:
        """Type and expiry check."""
        _check_target(what, self.target, value)

    def describe(self) -> str:
        """``Target | None``."""
        return f"{self.target.__name__} | None"

    @property
    def key(self) -> Any:
        """Object references share one native type whatever their target."""
        return ("object",)

    def native(self, runtime: Any) -> Any:
        """The built-in OBJECT type."""
        return runtime._basic_type(2, 8, 8)  # ZS_TYPE_OBJECT

    def read(self, runtime: Any, parent: Any, key: Any, owner: int, address: int) -> Any:
        """The referenced object's conjugate, or None."""
        ref = _read_ref(address)
        if not ref:
            return None
        return runtime._conjugate_of(ref)

    def write(self, runtime: Any, owner: int, address: int, value: Any) -> None:
        """Type-check, then store through the native API (barrier, checks)."""
        _check_target(self.describe(), self.target, value)
        _write_ref(runtime, owner, self.native(runtime), address, value)


class WeakRefKind(PropertyKind):
    """A weak reference property (``friend: zs.WeakObjectPtr["Actor"]``)."""

    __slots__ = ("target",)
    c_type = "uint64_t"
    member_kind = ZS_MEMBER_WEAK_OBJECT

    def __init__(self, target: type[Object]) -> None:
        self.target = target

    def install(self, cls: type[Object], name: str, cname: str, offset: int) -> None:
        """Reads give a ``WeakObjectPtr``; writes take one, an object or None."""
        from ._wrappers import WeakObjectPtr

        if not issubclass(cls, Object):
            return install_value_property(self, cls, name, cname, offset)
        make = WeakObjectPtr._from_handle

        def getter(self: Object) -> Any:
            return make(self._rt, _read_ref(base_address(self) + offset))

        store = _make_reference_setter(f"{cls.__name__}.{name}", self.target, offset)

        def setter(self: Object, value: Any) -> None:
            if isinstance(value, WeakObjectPtr):
                value = value.get()
            store(self, value)

        setattr(cls, name, property(getter, setter, None,
                                    f"Weak reference to {self.target.__name__} (not traced)."))

    def check(self, what: str, value: Any) -> None:
        """Accept a WeakObjectPtr, an object of the target class or None."""
        from ._wrappers import WeakObjectPtr

        if not isinstance(value, WeakObjectPtr):
            _check_target(what, self.target, value, ", WeakObjectPtr")

    def describe(self) -> str:
        """``WeakObjectPtr[Target]``."""
        return f"WeakObjectPtr[{self.target.__name__}]"

    @property
    def key(self) -> Any:
        """Weak references share one native type."""
        return ("weak",)

    def native(self, runtime: Any) -> Any:
        """The built-in WEAK_OBJECT type."""
        return runtime._basic_type(3, 8, 8)  # ZS_TYPE_WEAK_OBJECT

    def read(self, runtime: Any, parent: Any, key: Any, owner: int, address: int) -> Any:
        """A ``WeakObjectPtr`` to what is stored."""
        from ._wrappers import WeakObjectPtr

        return WeakObjectPtr._from_handle(runtime, _read_ref(address))

    def write(self, runtime: Any, owner: int, address: int, value: Any) -> None:
        """Store a WeakObjectPtr's target, an object or None."""
        from ._wrappers import WeakObjectPtr

        if isinstance(value, WeakObjectPtr):
            value = value.get()
        _check_target(self.describe(), self.target, value, ", WeakObjectPtr")
        _write_ref(runtime, owner, self.native(runtime), address, value)


# ---------------------------------------------------------------------------
# Annotation resolution and layout
# ---------------------------------------------------------------------------

def _evaluate(cls: type, annotation: Any) -> Any:
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        scope_globals, scope_locals = cls.__dict__["_zs_scope"]
        names = {**scope_locals, cls.__name__: cls}
        try:
            return eval(annotation, scope_globals, names)  # noqa: S307
        except Exception as exc:
            raise TypeError(f"{cls.__name__}: cannot resolve annotation {annotation!r}: {exc}") from exc
    return annotation


def _object_target(cls: type, annotation: Any) -> type[Object] | None:
    """The class of an object-reference annotation (``T``, ``T | None``)."""
    annotation = _evaluate(cls, annotation)
    if isinstance(annotation, type) and issubclass(annotation, Object):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return _object_target(cls, members[0])
    return None


def resolve_kind(cls: type, attribute: str, annotation: Any) -> PropertyKind:
    """Map one annotation to its property kind, or raise ``TypeError``."""
    return spec_of(cls, _evaluate(cls, annotation), f"{cls.__name__}.{attribute}", annotation)


def spec_of(cls: type, resolved: Any, what: str, annotation: Any = None) -> PropertyKind:
    """The value spec of an evaluated annotation or type argument (``cls``
    gives the scope where nested string annotations resolve)."""
    from ._wrappers import WeakObjectPtr

    if isinstance(resolved, (str, typing.ForwardRef)):
        resolved = _evaluate(cls, resolved)
    if resolved is str:
        from ._strings import String

        resolved = String
    resolved = PYTHON_SHORTHANDS.get(resolved, resolved)
    if isinstance(resolved, type) and issubclass(resolved, Scalar) and resolved is not Scalar:
        return ScalarKind(resolved)
    make_spec = getattr(resolved, "_zs_value_spec", None)
    if make_spec is not None:
        spec: PropertyKind = make_spec(cls)
        return spec
    if typing.get_origin(resolved) is WeakObjectPtr:
        (argument,) = typing.get_args(resolved)
        target = _object_target(cls, argument)
        if target is None:
            raise TypeError(f"{what}: WeakObjectPtr needs a zs.Object subclass, got {argument!r}")
        return WeakRefKind(target)
    target = _object_target(cls, resolved)
    if target is not None:
        return ObjectRefKind(target)
    shown = annotation if annotation is not None else resolved
    raise TypeError(f"{what}: unsupported property type {shown!r}")


def class_layout(cls: type[Object]) -> ClassLayout:
    """The layout of ``cls``, computed (and descriptors installed) on first use."""
    layout: ClassLayout | None = cls.__dict__.get("_zs_layout")
    if layout is not None:
        return layout
    parents = [typing.cast("type[Object]", b) for b in cls.__bases__ if isinstance(b, ObjectMeta)]
    if len(parents) > 1:
        raise TypeError(f"{cls.__name__}: a native class has one native parent, got "
                        f"{', '.join(p.__name__ for p in parents)}")
    parent = parents[0] if parents else None
    parent_layout = class_layout(parent) if parent is not None else None
    inherited = list(parent_layout.properties) if parent_layout else []
    taken = {p.name for p in inherited}
    own: list[PropertyInfo] = []
    defaults = cls.__dict__.get("_zs_defaults", {})
    # zs.Object's own annotations only type its private slots.
    annotations = _annotations_of(cls) if cls is not Object else {}
    for attribute, annotation in annotations.items():
        if attribute in _RESERVED or attribute in taken:
            raise TypeError(f"{cls.__name__}.{attribute}: the name is already used by "
                            f"{'zs.Object' if attribute in _RESERVED else 'a parent class'}")
        if attribute.startswith("_"):
            raise TypeError(f"{cls.__name__}.{attribute}: property names cannot start with '_'")
        info = PropertyInfo(attribute, member_name(len(inherited) + len(own), attribute),
                            resolve_kind(cls, attribute, annotation))
        if attribute in defaults:
            info.has_default, info.default = True, defaults[attribute]
            info.kind.check(f"{cls.__name__}.{attribute} (default)", info.default)
        own.append(info)
    members = [(p.cname, p.kind.c_type) for p in inherited + own]
    pointer_type = declare_struct(cls.__name__, members)
    struct_type = pointer_type.item
    own_members: list[tuple[int, PropertyKind]] = []
    for info in own:
        info.offset = layout_ffi.offsetof(struct_type, info.cname)
        info.kind.install(cls, info.name, info.cname, info.offset)
        if not isinstance(info.kind, ScalarKind):
            own_members.append((info.offset, info.kind))
    properties = inherited + own
    size = layout_ffi.sizeof(struct_type)
    image, defaults, initializers = _initial_image(properties, size)
    layout = ClassLayout(cls, parent, pointer_type, size, properties,
                         own_members, cls.__dict__.get("_zs_class_flags", 0),
                         frozenset(p.name for p in properties), defaults, initializers, image)
    type.__setattr__(cls, "_zs_layout", layout)
    return layout


def _initial_image(properties: list[PropertyInfo],
                   size: int) -> tuple[bytes, list[PropertyInfo], list[PropertyInfo]]:
    """What a new object's properties start as: the plain part (scalar
    defaults, embedded structs' scalar defaults) as the bytes after the
    header, which the native side copies in at creation, and the rest
    (``(defaults, initializers)``) left to run after creation. The image
    only ever holds plain data: a reference member stays zero in it."""
    header = layout_ffi.sizeof("zs_object")
    buffer = layout_ffi.new("char[]", size)
    base = layout_address(buffer)
    defaults: list[PropertyInfo] = []
    initializers: list[PropertyInfo] = []
    for info in properties:
        if info.has_default:
            if info.default is None and isinstance(info.kind, (ObjectRefKind, WeakRefKind)):
                continue  # a null reference: already zero
            if not _plain_default(info.kind, base + info.offset, info.default):
                defaults.append(info)
        elif not _plain_initialize(info.kind, base + info.offset):
            initializers.append(info)
    image = bytes(layout_ffi.buffer(buffer))[header:].rstrip(b"\0")
    return image, defaults, initializers


def _plain_default(kind: PropertyKind, address: int, value: Any) -> bool:
    """Write a scalar default into an image; False for any other kind."""
    if not isinstance(kind, ScalarKind):
        return False
    kind.write(None, 0, address, value)
    return True


def _plain_initialize(kind: PropertyKind, address: int) -> bool:
    """Write what ``kind.initialize`` would into an image, if that is plain
    data only (embedded structs of scalars); False when it needs the runtime."""
    from ._struct import StructSpec

    if type(kind).initialize is PropertyKind.initialize:
        return True  # nothing to initialise
    if not isinstance(kind, StructSpec):
        return False
    plain = True
    for info in kind.layout.properties:
        if info.has_default:
            plain = _plain_default(info.kind, address + info.offset, info.default) and plain
        else:
            plain = _plain_initialize(info.kind, address + info.offset) and plain
    return plain
