"""Reloading a game script in place: ``zsharp_py.reload(module)`` and
``importlib.reload``.

A reload runs the module's code again. Each class statement of a
``zs.Object`` subclass the module declared before (at its top level, under
the same name) makes no second class: the statement's class is only read
(``ObjectMeta``, zsharp_py/_model/object.py, marks it ``_zs_staged`` and
gives ``super()`` the previous class), and the previous class takes its
methods and class attributes, so that live objects, the runtimes' native
classes, lookups by name and ``isinstance`` all keep the one class.

What the native side has laid out cannot change under live objects: a
class's native properties (names, types, order, defaults) and Python state
(``zs.state()`` slots), its bases and its cluster flags, a struct's
members once laid out, and the parameter block of a method native code
may call with a block it holds. A reload that
changes them is refused, naming the class and the property, unless no open
runtime holds a native class of it or of a subclass (then the class is
laid out again at its next use).

``zsharp_py.reload`` is atomic: it checks every class of the module once
the whole module has run, before changing any, and restores the module's
namespace when anything failed. A plain ``importlib.reload`` updates each
class at its class statement (a refused one raises there; the classes
before it are already updated). docs/writing-game-scripts.md, "Reloading".
"""

from __future__ import annotations

import importlib
import threading
import types
from dataclasses import dataclass, field
from typing import Any

from .._model.object import (
    ObjectMeta,
    PropertyInfo,
    _annotations_of,
    _refresh_python_init,
    resolve_kind,
    set_redeclaration_hook,
)
from .._model.struct import StructMeta
from .._runtime.runtime import Runtime, _open_runtimes, describe_runtime
from .calls import _same_block, _signature, function_layout

__all__ = ["reload"]

# Class attributes a reload never copies: the class's native and Python
# layout, its caches and its identity.
_KEPT = frozenset(
    {
        "__dict__",
        "__weakref__",
        "__slots__",
        "__module__",
        "__qualname__",
        "_zs_state",
        "_zs_scope",
        "_zs_layout",
        "_zs_functions",
        "_zs_class_flags",
        "_zs_staged",
        "_zs_python_init",
        "_zs_cache",
        "_zs_kind",
        "_zs_align",
    }
)

_lock = threading.Lock()
_stages: dict[str, _Stage] = {}  # module name -> the zsharp_py.reload running it


@dataclass
class _Update:
    """What one class statement run again changes in the class it declared
    before (checked by ``check``, done by ``apply``)."""

    old: type  # an ObjectMeta or a StructMeta
    new: type
    relayout: bool = False  # the native properties change: lay the class out again


@dataclass
class _Stage:
    """The updates of one ``zsharp_py.reload``, applied once the module has run."""

    module: str
    updates: list[_Update] = field(default_factory=list)


def _own_state(cls: type) -> tuple[str, ...]:
    """The ``zs.state()`` names ``cls`` declares itself (its own slots)."""
    return tuple(cls.__dict__.get("__slots__", ()))


def _declared(cls: type) -> list[tuple[str, str, Any]]:
    """The native properties ``cls`` declares itself, as a reload compares
    them: (name, the native type as the property describes it, default or
    the string "<none>")."""
    defaults = cls.__dict__.get("_zs_defaults", {})
    found = []
    for name, annotation in _annotations_of(cls).items():
        try:
            kind = resolve_kind(cls, name, annotation)
            shown = f"{type(kind).__name__}:{kind.describe()}:{kind.member_type}"
        except TypeError:  # not resolvable now: compared as written
            shown = f"annotation:{annotation!r}"
        found.append((name, shown, defaults.get(name, "<none>")))
    return found


def _same_default(old: Any, new: Any) -> bool:
    """Whether two declared defaults are equal (a comparison that fails or
    does not give a bool counts as a change)."""
    if old is new:
        return True
    if type(old) is not type(new):
        return False
    try:
        same = old == new
    except Exception:  # noqa: BLE001  a default that cannot be compared counts as changed
        return False
    return same is True


def _property_change(old: type, new: type) -> tuple[str, str] | None:
    """The first difference between the native properties ``old`` and
    ``new`` declare: (property, what changes), or None."""
    before, after = _declared(old), _declared(new)
    named_after = {name: (shown, default) for name, shown, default in after}
    named_before = {name: (shown, default) for name, shown, default in before}
    for name, shown, default in before:
        if name not in named_after:
            return name, "removes the property"
        if named_after[name][0] != shown:
            now = _type_text(named_after[name][0])
            return name, f"changes the property's type ({_type_text(shown)} to {now})"
        if not _same_default(default, named_after[name][1]):
            return name, "changes the property's default"
    order_before = [name for name, _, _ in before]
    order_after = [name for name, _, _ in after if name in named_before]
    if order_before != order_after:
        moved = next(a for a, b in zip(order_before, order_after, strict=True) if a != b)
        return moved, "moves the property (its offset would change)"
    for name, _, _ in after:
        if name not in named_before:
            return name, "adds the property"
    return None


def _type_text(shown: str) -> str:
    """The type part of what ``_declared`` shows."""
    parts = shown.split(":")
    return parts[1] if len(parts) > 1 else shown


def _subclasses(cls: type) -> list[type]:
    """``cls`` and every class below it (a reload's own classes left out)."""
    found: list[type] = []
    pending = [cls]
    while pending:
        current = pending.pop()
        if "_zs_staged" in current.__dict__:
            continue
        found.append(current)
        pending.extend(type.__subclasses__(current))
    return found


def _holding_runtime(cls: type) -> Runtime | None:
    """An open runtime with a native class of ``cls`` or of a subclass."""
    family = _subclasses(cls)
    for runtime in list(_open_runtimes):
        if runtime._closed:
            continue
        if any(member in runtime._native_classes for member in family):
            return runtime
    return None


def _check(update: _Update) -> None:
    """Refuse, with ``TypeError`` naming the class (and the property), a
    change that live objects or the native classes could not follow."""
    old, new = update.old, update.new
    name = old.__name__
    if new.__bases__ != old.__bases__:
        raise TypeError(
            f"reloading {name}: a reload cannot change the base classes of a native class "
            f"({_names(old.__bases__)} before, {_names(new.__bases__)} now): its objects and "
            f"native classes keep the old ones; the old {name} keeps running"
        )
    if new.__dict__.get("_zs_class_flags") != old.__dict__.get("_zs_class_flags"):  # objects
        raise TypeError(
            f"reloading {name}: a reload cannot change cluster_root= or can_be_in_cluster= "
            f"(the native class keeps its flags); the old {name} keeps running"
        )
    if isinstance(old, StructMeta):
        pass  # no state, no cluster flags
    elif _own_state(new) != _own_state(old):
        before, after = set(_own_state(old)), set(_own_state(new))
        changed = sorted(before ^ after) or list(_own_state(old))
        raise TypeError(
            f"reloading {name}: {name}.{changed[0]}: a reload cannot add, remove or reorder "
            f"zs.state() declarations (they are slots of the live objects' conjugates); "
            f"the old {name} keeps running"
        )
    if isinstance(old, ObjectMeta):
        _check_blocks(old, new)
    change = _property_change(old, new)
    update.relayout = False
    if change is None:
        return
    if "_zs_layout" not in old.__dict__:  # never laid out: nothing native to keep
        update.relayout = True
        return
    if isinstance(old, StructMeta):
        prop, what = change
        raise TypeError(
            f"reloading {name}: {name}.{prop}: the reload {what}, which cannot change once "
            f"the struct {name} is laid out (objects, containers and other structs embed its "
            f"layout, in every runtime); the old {name} keeps running"
        )
    holder = _holding_runtime(old)
    if holder is None:  # laid out, but no open runtime has its native class
        update.relayout = True
        return
    prop, what = change
    raise TypeError(
        f"reloading {name}: {name}.{prop}: the reload {what}, which cannot change while "
        f"{describe_runtime(holder)} has a native class of {name}: its objects keep their "
        f"native layout (declare the property as before, or reload when no open runtime "
        f"uses {name}); the old {name} keeps running"
    )


def _check_blocks(old: type, new: type) -> None:
    """Refuse a new signature for a method of ``old`` whose parameter block
    is laid out already (``function_layout``: a host may hold a block of
    that shape and call the method by name with it, and the new method
    would read and write another): ``TypeError`` naming it and both
    signatures. A method removed, or no longer callable from native code,
    only fails the host's next call (an error it is given)."""
    for member in _subclasses(old):
        computed = member.__dict__.get("_zs_functions") or {}
        for name, before in list(computed.items()):
            if before.owner is not old:
                continue
            try:
                after = function_layout(new, name)
            except (AttributeError, TypeError):
                continue
            if not _same_block(before, after):
                raise TypeError(
                    f"reloading {old.__name__}: {old.__name__}.{name}: the reload changes its "
                    f"parameter block from {_signature(before)} to {_signature(after)}, and "
                    f"native code may hold a block of the old one to call it with; keep the "
                    f"signature (or give the new one another name); the old {old.__name__} "
                    "keeps running"
                )


def _names(classes: tuple[type, ...]) -> str:
    return ", ".join(c.__name__ for c in classes) or "none"


def _apply(update: _Update) -> None:
    """Give ``old`` the methods and class attributes of ``new`` (checked)."""
    old, new = update.old, update.new
    keep = set(_KEPT) | set(_own_state(old))
    layout = old.__dict__.get("_zs_layout")
    own_properties: list[PropertyInfo] = []
    if layout is not None:
        count = getattr(layout, "own_count", len(layout.properties))  # a struct: all its own
        own_properties = layout.properties[len(layout.properties) - count :]
    if update.relayout:
        for member in _subclasses(old):
            if "_zs_layout" in member.__dict__:
                type.__delattr__(member, "_zs_layout")
        for info in own_properties:  # laid out again from the new declaration
            if info.name in old.__dict__:
                type.__delattr__(old, info.name)
    else:
        keep |= {info.name for info in own_properties}
    incoming = {k: v for k, v in new.__dict__.items() if k not in keep}
    for name in [k for k in old.__dict__ if k not in keep and k not in incoming]:
        type.__delattr__(old, name)
    for name, value in incoming.items():
        type.__setattr__(old, name, value)
    for member in _subclasses(old):  # their function layouts name the old methods
        if "_zs_functions" in member.__dict__:
            type.__delattr__(member, "_zs_functions")
    if isinstance(old, ObjectMeta):
        _refresh_python_init(old)


def _redeclared(previous: type, new: type, namespace: dict[str, Any]) -> type:
    """The class statement of ``previous``'s name ran again in a reload of
    its module: check the change now, then apply it (``importlib.reload``)
    or leave it to the end of the module (``zsharp_py.reload``)."""
    update = _Update(previous, new)
    _check(update)
    with _lock:
        stage = _stages.get(previous.__module__)
    if stage is not None:
        stage.updates.append(update)
    else:
        _apply(update)
    return previous


def reload(module: types.ModuleType) -> types.ModuleType:
    """Reload a game script in place, as one step: run the module's code
    again (``importlib.reload``), then update each ``zs.Object`` subclass
    it declares at its top level in place with the new methods and class
    attributes. The class objects stay the same, so live objects run the
    new methods at once, from Python and from native code (overrides,
    events, tick functions), and lookups by name and ``isinstance`` are
    unchanged.

    Every class is checked before any changes; when the module fails (a
    syntax error, an exception while it runs) or a class's change is
    refused (``TypeError`` naming the class and the property: a change
    of its native properties, Python state, bases or cluster flags while
    an open runtime has its native class), the module's namespace is
    restored and every class is as it was: the old code keeps running.

    Returns the module. docs/writing-game-scripts.md, "Reloading", says
    what a reload cannot do."""
    if not isinstance(module, types.ModuleType):
        raise TypeError(f"reload() takes a module, not {type(module).__name__}")
    name = module.__name__
    snapshot = dict(module.__dict__)
    stage = _Stage(name)
    with _lock:
        if name in _stages:
            raise RuntimeError(f"{name} is being reloaded already")
        _stages[name] = stage
    try:
        try:
            reloaded = importlib.reload(module)
            for update in stage.updates:  # again: the module's code ran meanwhile
                _check(update)
        except BaseException as error:
            module.__dict__.clear()
            module.__dict__.update(snapshot)
            if hasattr(error, "add_note"):
                error.add_note(
                    f"zsharp_py.reload({name}): nothing was changed, the old code keeps running"
                )
            raise
    finally:
        with _lock:
            del _stages[name]
    for update in stage.updates:
        _apply(update)
    return reloaded


set_redeclaration_hook(_redeclared)
