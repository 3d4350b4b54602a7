"""Native structs declared from Python (``class Vector(zs.Struct)``).

A struct is a value type laid out like a C struct; its conjugate is black
(``Vector(1.0, 2.0, 3.0)``, ``clone()``) or a red view into an object, a
container element or another value (``actor.position``). Reads and writes of
a view go straight to native memory; assigning a struct copies it, as a C++
value type would.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ._native import (check, check_writable, declare_struct, ffi, layout_address, layout_ffi,
                      layout_pointer, lib, member_name)
from ._hints import plural
from ._types import PropertyKind
from ._values import ValueConjugate, make_black, make_view

if TYPE_CHECKING:
    from ._object import PropertyInfo
    from ._runtime import Runtime

__all__ = ["Struct", "StructMeta", "StructSpec", "StructLayout", "struct_layout"]


@dataclass
class StructLayout:
    """The native shape of a Python-declared struct."""

    cls: type[Struct]
    pointer_type: Any  # layout-FFI ``struct ... *``
    c_type: str        # ``struct zs_layout_N_Name`` (embeddable in other layouts)
    size: int
    align: int
    properties: list[PropertyInfo]


class StructMeta(type):
    """Metaclass of ``zs.Struct``: records the annotated members."""

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any],
                **kwargs: Any) -> StructMeta:
        from ._object import _is_classvar, _scope_of, check_annotations

        namespace.setdefault("__slots__", ())
        annotations = namespace.get("__annotations__", {})
        namespace["_zs_defaults"] = {key: namespace.pop(key) for key in list(annotations)
                                     if key in namespace and not _is_classvar(annotations[key])}
        namespace["_zs_scope"] = _scope_of(2)
        cls = super().__new__(mcls, name, bases, namespace, **kwargs)
        if any(isinstance(base, StructMeta) for base in bases):  # not zs.Struct itself
            check_annotations(cls)
        return cls


class Struct(ValueConjugate, metaclass=StructMeta):
    """Base of native structs declared from Python.

    >>> import zsharp_py as zs
    >>> class Vector(zs.Struct):
    ...     x: zs.Float64
    ...     y: zs.Float64
    >>> class Ship(zs.Object):
    ...     position: Vector
    >>> with zs.Runtime():
    ...     ship = Ship()
    ...     ship.position = Vector(1.0, 2.0)     # copied into the object
    ...     p = ship.position                    # a red view into the ship
    ...     p.x = 5.0                            # writes the object's memory
    ...     c = p.clone()                        # a black copy
    ...     c.y = -1.0
    ...     (ship.position, c, p.is_black, c.is_black)
    (Vector(x=5.0, y=2.0), Vector(x=5.0, y=-1.0), False, True)
    """

    __slots__ = ()
    _zs_defaults: ClassVar[dict[str, Any]]

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from ._runtime import current_runtime

        layout = struct_layout(cls)
        values = _bind_arguments(layout, args, kwargs)
        runtime = current_runtime()
        spec = StructSpec(cls)
        for info in layout.properties:
            if info.name in values:
                info.kind.check(f"{cls.__name__}.{info.name}", values[info.name])
        value = runtime._new_value(spec)
        try:
            with runtime._lock:
                address = layout_address(value._p)
                spec.initialize(runtime, 0, address)
                for info in layout.properties:
                    if info.name in values:
                        info.kind.write(runtime, 0, address + info.offset, values[info.name])
        except BaseException:
            value.dispose()
            raise
        return value

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Construction happens in ``__new__`` (positional in declaration
        order, or by keyword; missing members are zeroed)."""

    @classmethod
    def _zs_value_spec(cls, owner: type) -> StructSpec:
        return StructSpec(cls)

    # ---- value semantics -------------------------------------------------------
    def to_python(self) -> dict[str, Any]:
        """The members as a plain dict (nested values converted too)."""
        self._live()
        return self._spec.to_python(self._rt, layout_address(self._p))  # type: ignore[no-any-return]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Struct):
            if type(other) is not type(self):
                return NotImplemented
            return self.to_python() == other.to_python()
        if isinstance(other, dict):
            return self.to_python() == other
        if isinstance(other, tuple):
            return tuple(self.to_python().values()) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable value

    def __iter__(self) -> Any:
        return iter(self.to_python().values())

    def __repr__(self) -> str:
        if self.is_expired:
            return self._expired_repr()
        fields = ", ".join(f"{k}={v!r}" for k, v in self.to_python().items())
        return f"{type(self).__name__}({fields})"


def _bind_arguments(layout: StructLayout, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> dict[str, Any]:
    names = [p.name for p in layout.properties]
    if len(args) > len(names):
        raise TypeError(f"{layout.cls.__name__}() takes at most "
                        f"{plural(len(names), 'positional argument')} ({len(args)} given)")
    values = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names:
            raise TypeError(f"{layout.cls.__name__}() got an unknown member {key!r}")
        if key in values:
            raise TypeError(f"{layout.cls.__name__}() got multiple values for {key!r}")
        values[key] = value
    return values


def struct_layout(cls: type[Struct]) -> StructLayout:
    """The layout of ``cls``, computed (and descriptors installed) on first use."""
    from ._object import _RESERVED_STRUCT, PropertyInfo, _annotations_of, resolve_kind

    layout: StructLayout | None = cls.__dict__.get("_zs_layout")
    if layout is not None:
        return layout
    if cls is Struct:
        raise TypeError("zs.Struct itself cannot be instantiated; declare a subclass")
    parents = [b for b in cls.__bases__ if isinstance(b, StructMeta) and b is not Struct]
    if parents:
        raise TypeError(f"{cls.__name__}: structs cannot inherit from other structs")
    properties: list[PropertyInfo] = []
    defaults = cls.__dict__.get("_zs_defaults", {})
    for attribute, annotation in _annotations_of(cls).items():
        if attribute.startswith("_") or attribute in _RESERVED_STRUCT:
            raise TypeError(f"{cls.__name__}.{attribute}: this member name is reserved")
        kind = resolve_kind(cls, attribute, annotation)
        if isinstance(kind, StructSpec) and kind.cls is cls:
            raise TypeError(f"{cls.__name__}.{attribute}: a struct cannot contain itself")
        info = PropertyInfo(attribute, member_name(len(properties), attribute), kind)
        if attribute in defaults:
            info.has_default, info.default = True, defaults[attribute]
            kind.check(f"{cls.__name__}.{attribute} (default)", info.default)
        properties.append(info)
    members = [(p.cname, p.kind.c_type) for p in properties]
    pointer_type = declare_struct(cls.__name__, members, header=False)
    struct_type = pointer_type.item
    for info in properties:
        info.offset = layout_ffi.offsetof(struct_type, info.cname)
        info.kind.install(cls, info.name, info.cname, info.offset)
    layout = StructLayout(cls, pointer_type, struct_type.cname, layout_ffi.sizeof(struct_type),
                          layout_ffi.alignof(struct_type), properties)
    type.__setattr__(cls, "_zs_layout", layout)
    return layout


class StructSpec(PropertyKind):
    """A struct member, element or black value of a ``zs.Struct`` class."""

    __slots__ = ("cls",)

    def __init__(self, cls: type[Struct]) -> None:
        self.cls = cls

    @property
    def layout(self) -> StructLayout:
        """The struct's layout (computed on first use)."""
        return struct_layout(self.cls)

    @property
    def c_type(self) -> str:  # type: ignore[override]
        return self.layout.c_type

    @property
    def key(self) -> Any:
        """``("struct", cls)``."""
        return ("struct", self.cls)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StructSpec) and other.cls is self.cls

    def __hash__(self) -> int:
        return hash(self.key)

    def describe(self) -> str:
        """The struct's name."""
        return self.cls.__name__

    def address_of(self, pointer: Any) -> int:
        """The address a view's pointer holds."""
        return layout_address(pointer)


    def check(self, what: str, value: Any) -> None:
        """A struct of this class, a tuple or a dict of its members."""
        if isinstance(value, self.cls):
            value._live()
            return
        layout = self.layout
        if isinstance(value, (tuple, list)):
            items = dict(zip((p.name for p in layout.properties), value))
            if len(value) > len(layout.properties):
                raise TypeError(f"{what}: too many values for {self.cls.__name__}")
        elif isinstance(value, dict):
            items = value
            unknown = set(items) - {p.name for p in layout.properties}
            if unknown:
                raise TypeError(f"{what}: {self.cls.__name__} has no member {sorted(unknown)[0]!r}")
        else:
            raise TypeError(f"{what} expects {self.cls.__name__}, a tuple or a dict, "
                            f"not {type(value).__name__}")
        for info in layout.properties:
            if info.name in items:
                info.kind.check(f"{what}.{info.name}", items[info.name])

    def native(self, runtime: Runtime) -> Any:
        """Register the struct type (its members first)."""
        layout = self.layout
        members = [(runtime._native_type(p.kind), p.offset) for p in layout.properties]
        out = ffi.new("zs_type **")
        array = ffi.new("zs_type_member[]", members or [(ffi.NULL, 0)])
        name = ffi.new("char[]", self.cls.__name__.encode("utf-8"))
        check(lib.zs_type_struct(runtime._ptr, name, layout.size, layout.align, array, len(members),
                                 out), f"registering struct {self.cls.__name__}", runtime)
        return out[0]

    def read(self, runtime: Runtime, parent: Any, key: Any, owner: int, address: int) -> Any:
        """A red view (cached in ``parent``), or a dict when there is no parent."""
        if parent is None:
            return self.to_python(runtime, address)
        pointer = layout_ffi.cast(self.layout.pointer_type, address)
        return make_view(self.cls, runtime, self, pointer, parent, key, owner)

    def write(self, runtime: Runtime, owner: int, address: int, value: Any) -> None:
        """Copy a struct conjugate natively, or member by member from a
        tuple or dict (unlisted members keep their values)."""
        if isinstance(value, self.cls) and value._rt is runtime:
            source = layout_address(value._live())
            check(lib.zs_value_assign(runtime._ptr, owner, runtime._native_type(self),
                                      ffi.cast("void *", address), ffi.cast("void *", source)),
                  "struct copy", runtime)
            return
        self.check(self.cls.__name__, value)
        # Member by member: the owner is checked once, first, so a dying
        # owner refuses the whole write before any member has changed.
        check_writable(runtime, owner, "struct")
        layout = self.layout
        if isinstance(value, self.cls):  # another runtime: go through Python values
            value = value.to_python()
        if isinstance(value, (tuple, list)):
            value = dict(zip((p.name for p in layout.properties), value))
        for info in layout.properties:
            if info.name in value:
                info.kind.write(runtime, owner, address + info.offset, value[info.name])

    def initialize(self, runtime: Runtime, owner: int, address: int) -> None:
        """Member defaults (``a: zs.UInt8 = 255``), nested structs included,
        as a C++ default constructor would."""
        for info in self.layout.properties:
            if info.has_default:
                info.kind.write(runtime, owner, address + info.offset, info.default)
            else:
                info.kind.initialize(runtime, owner, address + info.offset)

    def to_python(self, runtime: Runtime, address: int) -> Any:
        """``{member: value}`` with nested values converted."""
        return {info.name: info.kind.to_python(runtime, address + info.offset)
                for info in self.layout.properties}

    def new_black(self, runtime: Runtime, pointer: Any, handle: int) -> Any:
        """Wrap a black block of this struct."""
        return make_black(self.cls, runtime, self,
                          layout_pointer(self.layout.pointer_type, pointer),
                          handle)

