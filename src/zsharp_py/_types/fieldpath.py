"""``zs.FieldPath``: a path to a property (``FFieldPath``).

``zs.FieldPath("Actor.position.x")`` names the class the path starts from,
then one property per step: struct members (``position.x``) and object
references (``target.health``) can be walked through. The path resolves
against a class (``resolve``), reads (``get``) and writes (``set``) through
an object or struct, and a step that does not exist raises
``FieldPathError`` naming the path, the class and the properties it has.

A FieldPath is an immutable value object (like ``zs.Name``): hashable,
``clone()`` returns itself. As a property or element it is stored natively
as a UTF-8 string; a path built from a class (``zs.FieldPath(Actor,
"position.x")``) is stored with the class's full Python path
(``"package.module.Actor:position.x"``), so it resolves back to the same
class even when several classes share a name.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from .. import _core
from .._base import context
from .._base.errors import named
from .._base.layout import size_align
from .._model.kinds import PropertyKind
from .._model.object import Object, ObjectRefKind, PropertyInfo, class_layout
from .._model.struct import Struct, StructKind, struct_layout
from .._model.values import ImmutableValue, scope
from .._runtime.runtime import Runtime

__all__ = ["FieldPath", "FieldPathError", "FieldInfo", "FieldPathKind"]


class FieldPathError(AttributeError):
    """A FieldPath does not resolve (unknown class, missing property, a step
    that has no properties, or a None reference met while walking)."""


FieldPathError.__module__ = "zsharp_py"  # raised to users: named as they import it


@dataclass(frozen=True)
class FieldInfo:
    """What a FieldPath resolves to against a class."""

    owner: type
    """The class (object or struct) that has the final property."""
    name: str
    """The final property's name."""
    type_name: str
    """Its type, as a short name (``Float64``, ``Vector``...)."""
    steps: tuple[tuple[type, str], ...]
    """Every step of the walk: (class, property name)."""


def _class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _declared_classes() -> list[type]:
    """Every zs.Object and zs.Struct subclass declared so far."""
    found: list[type] = []
    stack: list[type] = [Object, Struct]
    seen: set[type] = set()
    while stack:
        cls = stack.pop()
        subclasses: list[type] = cls.__subclasses__()
        for sub in subclasses:
            if sub not in seen and "_zs_staged" not in sub.__dict__:  # a reload's, never used
                seen.add(sub)
                found.append(sub)
                stack.append(sub)
    return found


def _import_path(path: str) -> type | None:
    """The class at ``module.QualifiedName`` if its module is imported
    (nothing is imported here), else None."""
    parts = path.split(".")
    for split in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:split]))
        if module is None:
            continue
        found: Any = module
        for attribute in parts[split:]:
            found = getattr(found, attribute, None)
        if isinstance(found, type) and issubclass(found, (Object, Struct)):
            return found
        return None
    return None


def _properties(cls: type) -> list[PropertyInfo]:
    if issubclass(cls, Object):
        return class_layout(cls).properties
    if issubclass(cls, Struct):
        return struct_layout(cls).properties
    raise TypeError(f"{cls.__name__} is not a zs.Object or zs.Struct class")


def _step_class(kind: PropertyKind) -> type | None:
    """The class a property leads to (struct members, object references)."""
    if isinstance(kind, StructKind):
        return kind.cls
    if isinstance(kind, ObjectRefKind):
        return kind.target
    return None


def _text(value: str) -> str:
    """The code points of a str, or of a str subclass, as an exact str:
    ``str.__str__`` copies the base value, so no method a subclass overrides
    (``split``, ``__contains__``...) ever sees the parse (the rule on
    builtin subclasses, docs/staging-rule.md)."""
    return value if type(value) is str else str.__str__(value)


def _descriptor(cls: type, name: str) -> Any:
    """The class attribute ``name`` of ``cls`` as stored (no descriptor
    protocol), or None."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


class FieldPath(_core.FieldPathBase, ImmutableValue):
    """A path to a property: ``zs.FieldPath("Actor.position.x")`` or
    ``zs.FieldPath(Actor, "position.x")``.

    >>> import zsharp_py as zs
    >>> class Spot(zs.Struct):
    ...     x: zs.Float64
    >>> class Marker(zs.Object):
    ...     where: Spot
    >>> with zs.Runtime():
    ...     marker = Marker()
    ...     path = zs.FieldPath(Marker, "where.x")
    ...     path.set(marker, 2.5)
    ...     (path.get(marker), marker.where.x, str(path), path.resolve().type_name)
    (2.5, 2.5, 'Marker.where.x', 'Float64')

    Equality and hashing use the short form (``str(path)``).
    """

    __slots__ = ("_owner_name", "_fields", "_owner")
    _owner_name: str
    _fields: tuple[str, ...]
    _owner: type | None

    def __init__(self, path: Any = "", fields: str | None = None) -> None:
        owner: type | None = None
        if isinstance(path, FieldPath):
            if fields is not None:
                raise TypeError("FieldPath(path) takes no second argument when copying")
            owner_name, parts, owner = path._owner_name, path._fields, path._owner
        elif isinstance(path, type):
            if not issubclass(path, (Object, Struct)):
                raise TypeError(f"FieldPath: {path.__name__} is not a zs.Object or zs.Struct class")
            if not isinstance(fields, str):
                raise TypeError('FieldPath(cls, fields) needs the fields as a str ("position.x")')
            owner, owner_name = path, _class_path(path)
            fields = _text(fields)
            parts = self._split(fields, f"{path.__name__}.{fields}")
        elif isinstance(path, str):
            if fields is not None:
                raise TypeError('FieldPath(str) takes one argument: "Class.field.field"')
            owner_name, parts = self._parse(_text(path))
        else:
            raise TypeError(
                f'FieldPath needs a str ("Actor.position.x") or a class, not {type(path).__name__}'
            )
        object.__setattr__(self, "_owner_name", owner_name)
        object.__setattr__(self, "_fields", parts)
        object.__setattr__(self, "_owner", owner)

    @staticmethod
    def _split(fields: str, shown: str) -> tuple[str, ...]:
        parts = tuple(fields.split("."))
        if not fields or any(not part.isidentifier() for part in parts):
            raise ValueError(
                f"FieldPath {shown!r} is malformed: expected "
                '"Class.field" or "Class.field.field..."'
            )
        return parts

    @classmethod
    def _parse(cls, text: str) -> tuple[str, tuple[str, ...]]:
        if not text:
            return "", ()
        if ":" in text:
            owner_name, fields = text.split(":", 1)
        elif "." in text:
            owner_name, fields = text.split(".", 1)
        else:
            owner_name, fields = text, ""
        if not owner_name or "\0" in text:
            raise ValueError(f'FieldPath {text!r} is malformed: expected "Class.field"')
        return owner_name, cls._split(fields, text)

    # ---- value behaviour ----------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("FieldPath is immutable")

    @property
    def owner_name(self) -> str:
        """The name of the class the path starts from (short form)."""
        return self._owner_name.rsplit(".", 1)[-1]

    @property
    def fields(self) -> tuple[str, ...]:
        """The property names, in order."""
        return self._fields

    @property
    def full_path(self) -> str:
        """``package.module.Class:field.field`` when the class is known,
        else the path as given. This is what is stored natively."""
        if not self._fields:
            return ""
        owner = self._owner
        prefix = _class_path(owner) if owner is not None else self._owner_name
        separator = ":" if owner is not None or "." in self._owner_name else "."
        return f"{prefix}{separator}{'.'.join(self._fields)}"

    def __bool__(self) -> bool:
        return bool(self._fields)

    def __str__(self) -> str:
        if not self._fields:
            return ""
        return f"{self.owner_name}.{'.'.join(self._fields)}"

    def __repr__(self) -> str:
        return f"FieldPath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FieldPath):
            return str(self) == str(other)
        if isinstance(other, str):
            return str(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))

    def __reduce__(self) -> Any:
        return (FieldPath, (self.full_path,))

    @classmethod
    def _zs_value_kind(cls, owner: type) -> FieldPathKind:
        return FieldPathKind()

    # ---- resolution ---------------------------------------------------------
    def _error(self, message: str) -> FieldPathError:
        return FieldPathError(f"FieldPath {str(self)!r}: {message}")

    def _owner_class(self, against: type | None) -> type:
        """The class the path starts from."""
        owner = self._owner
        if owner is not None:
            return owner
        name = self._owner_name
        qualified = "." in name
        if against is not None:
            for cls in against.__mro__:
                if (_class_path(cls) if qualified else cls.__name__) == name:
                    return cls
        direct = _import_path(name) if qualified else None
        if direct is not None:
            object.__setattr__(self, "_owner", direct)
            return direct
        candidates = [
            cls
            for cls in _declared_classes()
            if (_class_path(cls) if qualified else cls.__name__) == name
        ]
        if len(candidates) > 1:
            candidates = self._loaded(candidates) or candidates
        if not candidates:
            raise self._error(f"no zs.Object or zs.Struct class is named {name!r}")
        if len(candidates) > 1:
            shown = ", ".join(sorted(_class_path(cls) for cls in candidates))
            raise self._error(
                f"several classes are named {name!r} ({shown}); build the path "
                f"from the class: zs.FieldPath(cls, {'.'.join(self._fields)!r})"
            )
        owner = candidates[0]
        object.__setattr__(self, "_owner", owner)
        return owner

    @staticmethod
    def _loaded(candidates: list[type]) -> list[type]:
        """The candidates registered in the current runtime."""
        runtime = context.current_runtime()
        return [
            cls
            for cls in candidates
            if cls in runtime._native_classes
            or ("_zs_kind" in cls.__dict__ and runtime._has_native_type(cls.__dict__["_zs_kind"]))
        ]

    def resolve(self, cls: type | None = None) -> FieldInfo:
        """Resolve against ``cls`` (the path's class or a subclass; default:
        the path's own class) and describe the final property.
        ``FieldPathError`` names the first step that does not resolve."""
        if not self._fields:
            raise self._error("the path is empty")
        owner = self._owner_class(cls)
        if cls is not None and not (isinstance(cls, type) and issubclass(cls, owner)):
            shown = cls.__name__ if isinstance(cls, type) else type(cls).__name__
            raise self._error(
                f"it starts from {owner.__name__}, which {shown} is not (nor a subclass of it)"
            )
        current = cls if cls is not None else owner
        steps: list[tuple[type, str]] = []
        info: PropertyInfo | None = None
        for position, name in enumerate(self._fields):
            properties = _properties(current)
            info = next((p for p in properties if p.name == name), None)
            if info is None:
                known = ", ".join(p.name for p in properties) or "none"
                raise self._error(
                    f"{current.__name__} has no property {name!r} (its properties: {known})"
                )
            steps.append((current, name))
            if position < len(self._fields) - 1:
                following = _step_class(info.kind)
                if following is None:
                    raise self._error(
                        f"{current.__name__}.{name} is {info.kind.describe()}, "
                        f"which has no property {self._fields[position + 1]!r}"
                    )
                current = following
        assert info is not None
        return FieldInfo(current, info.name, info.kind.describe(), tuple(steps))

    def is_valid_for(self, cls: type) -> bool:
        """Whether the path resolves against ``cls``."""
        try:
            self.resolve(cls)
        except FieldPathError:
            return False
        return True

    def _walk(self, root: Any) -> tuple[Any, str]:
        """The holder of the final property, reached from ``root``."""
        if not isinstance(root, (Object, Struct)):
            raise TypeError(
                f"FieldPath.get/set needs a zs.Object or zs.Struct, not {type(root).__name__}"
            )
        info = self.resolve(type(root))
        holder = root
        for cls, name in info.steps[:-1]:
            holder = getattr(holder, name)
            if holder is None:
                raise self._error(f"{cls.__name__}.{name} is None")
        return holder, info.name

    # A path through inline structs to a scalar is read and written at its
    # offset in C (native/binding/fieldpaths.c), with the descriptors' checks;
    # any other takes the walk below.
    get = _core.FieldPathBase._get
    set = _core.FieldPathBase._set

    def _plan(self, root: type) -> None:
        """Make the C plan for roots of class ``root`` when the path allows
        one; a path that does not resolve is left to the walk, which raises."""
        if not self._fields or not issubclass(root, (Object, Struct)):
            return
        try:
            info = self.resolve(root)
        except FieldPathError:
            return
        steps = tuple((cls, _descriptor(cls, name)) for cls, name in info.steps)
        if all(descriptor is not None for _, descriptor in steps):
            self._compile(root, steps)

    def _get_slow(self, root: Any) -> Any:
        holder, name = self._walk(root)
        return getattr(holder, name)

    def _set_slow(self, root: Any, value: Any) -> None:
        with scope():
            holder, name = self._walk(root)
            setattr(holder, name, value)


class FieldPathKind(PropertyKind):
    """A FieldPath member or element: a native UTF-8 string."""

    __slots__ = ()
    member_type = "zs_string"

    @property
    def key(self) -> Any:
        """``("field_path",)``."""
        return ("field_path",)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FieldPathKind)

    def __hash__(self) -> int:
        return hash(self.key)

    def describe(self) -> str:
        """``FieldPath``."""
        return "FieldPath"

    @staticmethod
    def _convert(value: Any) -> FieldPath:
        if value is None:
            return FieldPath()
        if isinstance(value, FieldPath):
            return value
        if isinstance(value, str):
            return FieldPath(value)
        raise TypeError(f"expects a FieldPath, a str or None, not {type(value).__name__}")

    def check(self, what: str, value: Any) -> None:
        """A FieldPath, a well-formed str, or None."""
        try:
            self._convert(value)
        except (TypeError, ValueError) as error:
            raise named(what, error) from None

    def make_kind(self) -> _core.Kind:
        """A UTF-8 string read back as a FieldPath (an immutable value)."""
        convert = self._convert

        def encode(runtime: Runtime, value: Any) -> str:
            return convert(value).full_path

        def decode(runtime: Runtime, text: str) -> FieldPath:
            return FieldPath(text) if text else FieldPath()

        return _core.Kind(
            _core.KIND_STRING,
            *size_align(self.member_type),
            _core.TYPE_STRING,
            "FieldPath",
            unit=1,
            encode=encode,
            decode=decode,
        )
