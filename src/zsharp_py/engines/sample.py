"""The sample engine's classes, structs and enum (native/engine/sample_engine.c,
``zsharp_py.sample_engine``), importable before any runtime exists.

>>> import zsharp_py as zs
>>> from zsharp_py import sample_engine
>>> from zsharp_py.engines.sample import Actor, Transform, World
>>> class Scout(Actor):                  # declared once, at import
...     def begin_play(self) -> None:
...         super().begin_play()
...         self.speed = 3.0
>>> for _ in range(2):                   # the same classes in every runtime
...     with zs.Runtime():
...         sample_engine.install()      # the engine registers its classes there
...         scout = World().spawn(Scout, Transform())
...         print(type(scout).__name__, scout.speed, zs.native_class("Actor") is Actor)
Scout 3.0 True
Scout 3.0 True

The types are read once from a private runtime in which the engine is
installed (``zsharp_py.engines.host_types``); each runtime in which the
engine is installed binds them on first use. Using one in a runtime where
the engine is not installed raises ``TypeError`` naming that runtime.
"""

import enum as _enum
import typing as _typing

from .._interop.reflection import host_types as _host_types
from .._model.object import Object as _Object
from .._model.struct import Struct as _Struct
from ..sample_engine import install as _install

__all__ = ["Actor", "Component", "MovementComponent", "Team", "Transform", "Vec3", "World"]

_types = _host_types(
    _install,
    module=__name__,
    install_hint="install the engine there first: zsharp_py.sample_engine.install(runtime)",
)

World = _typing.cast("type[_Object]", _types["World"])
Actor = _typing.cast("type[_Object]", _types["Actor"])
Component = _typing.cast("type[_Object]", _types["Component"])
MovementComponent = _typing.cast("type[_Object]", _types["MovementComponent"])
Transform = _typing.cast("type[_Struct]", _types["Transform"])
Vec3 = _typing.cast("type[_Struct]", _types["Vec3"])
Team = _typing.cast("type[_enum.IntEnum]", _types["Team"])
