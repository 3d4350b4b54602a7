"""zsharp_py.sample_engine: a small game engine written in C, to script.

The engine (native/engine/sample_engine.c) is a native host like any
other: it describes its classes, structs and enum in C (zsharp.h,
"reflection") and Python binds them on first use. It ships inside the
package so the examples, the demo and the tests have a host to script
without a compiler:

- ``World``: ``spawn(cls, at) -> Actor | None`` (creates an actor of
  ``cls``, a subclass of ``Actor`` given as ``SubclassOf[Actor]``, and
  calls its ``begin_play`` event), ``destroy(actor)`` (calls
  ``on_destroy``, then marks the actor as garbage), ``find(index)``,
  ``tick(dt) -> Int32`` (calls the ``tick`` event of every live actor and
  returns how many were called, then broadcasts the world's ``on_tick``
  event from C: listeners take ``(dt: Float64, frame: Int64)``),
  ``collect()`` (a full collection from native code), and the static
  ``version()``; the property ``on_tick`` besides ``frame``, ``time``,
  ``actors`` and ``gravity``.
- ``Actor``: properties ``world``, ``transform``, ``team``, ``health``,
  ``max_health``, ``speed``, ``alive``, ``ticks``, ``target``,
  ``components``, ``tags``, ``on_damaged`` (an event ``take_damage``
  broadcasts from C: listeners take ``(actor: Actor | None, amount:
  Float64, instigator: Actor | None)``); functions ``take_damage``,
  ``get_location`` (an out parameter), ``heal`` (in-out), ``move``,
  ``add_component``; events ``begin_play`` and ``tick`` (with native
  defaults) and ``on_destroy`` (none).
- ``Component``, ``MovementComponent``, the structs ``Vec3`` and
  ``Transform``, and the enum ``Team``.

>>> import zsharp_py as zs
>>> from zsharp_py import sample_engine
>>> with zs.Runtime():
...     sample_engine.install()
...     World, Actor = zs.native_class("World"), zs.native_class("Actor")
...     class Hero(Actor):
...         def begin_play(self) -> None:
...             super().begin_play()  # the engine's default: full health
...             self.speed = 2.0
...     world = World()
...     hero = world.spawn(Hero, zs.native_struct("Transform")())
...     (type(hero).__name__, hero.alive, hero.health, world.tick(0.5), hero.ticks)
('Hero', True, 100, 1, 1)
"""

from __future__ import annotations

from ._base.ffi import ffi, lib
from ._runtime.runtime import Runtime, current_runtime

__all__ = ["install"]


def install(runtime: Runtime | None = None) -> None:
    """Register the sample engine's classes, structs and enum in ``runtime``
    (the current one by default). Once per runtime: ``ValueError`` when it
    is installed there already."""
    target = runtime if runtime is not None else current_runtime()
    if not isinstance(target, Runtime):
        raise TypeError(f"install() needs a zs.Runtime, got {type(target).__name__}")
    status = lib.zs_sample_engine_install(
        ffi.cast("const struct zs_api *", lib.zs_api_table()),
        ffi.cast("zs_runtime *", target.native_address),
    )
    if status == lib.ZS_E_INVALID:
        raise ValueError("the sample engine is installed in this runtime already")
    if status != lib.ZS_OK:
        raise MemoryError(f"the sample engine could not be installed (status {status})")
