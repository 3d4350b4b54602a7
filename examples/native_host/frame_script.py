"""Game logic that a native host (host.c) drives once per frame.

The host owns the frame loop and the clock. Each frame it calls every
particle's ``tick`` itself, through the C API (``zs_call_each``, as Unreal
calls a blueprint override), then calls ``frame()`` here to spawn new
particles, drop the spent ones and let the GC work; it reads the GC's
figures natively (``zs_gc_get_stats``). The game state lives in the default
runtime (created on first use, closed when the host finalises Python).
"""
from __future__ import annotations

import zsharp_py as zs
from zsharp_py.lowlevel import function_layout


class Particle(zs.Object):
    """A short-lived effect: dropped when its time is up, freed by the GC."""

    ttl: zs.Float32
    kind: zs.Name

    def tick(self, dt: float) -> None:
        """Called from C every frame (``zs_call_each``)."""
        self.ttl -= dt


class Emitter(zs.Object):
    """Owns the live particles."""

    particles: zs.Array[Particle]
    spawned: zs.Int64


_state: dict[str, Emitter] = {}


def start(seconds_between_collections: float) -> tuple[int, str]:
    """Create the scene. Returns the runtime's native address (a
    ``zs_runtime *``) and the C declaration of ``Particle.tick``'s parameter
    block, which the host checks against its own."""
    rt = zs.current_runtime()
    rt.gc.settings.time_between_collections = seconds_between_collections
    emitter = Emitter(name="Emitter")
    emitter.add_to_root()
    _state["emitter"] = emitter
    Particle()                              # registers the class (zs_find_class); dropped
    return rt.native_address, function_layout(Particle, "tick").c_declaration


def frame(index: int, dt: float, spawn: int) -> str:
    """Spawn ``spawn`` particles, drop the spent ones, then let the GC work
    for this frame. Returns what the GC did (``rt.gc.tick``)."""
    emitter = _state["emitter"]
    for i in range(spawn):
        kind = "spark" if i % 3 else "smoke"
        emitter.particles.append(Particle(ttl=0.05 + (index + i) % 10 * 0.02, kind=kind))
    emitter.spawned += spawn
    alive = [particle for particle in emitter.particles if particle.ttl > 0]
    if len(alive) != len(emitter.particles):
        emitter.particles = alive          # the others are referenced by nobody now
    return zs.current_runtime().gc.tick(dt)


def finish() -> tuple[int, int, int]:
    """End of the session: full collections and a heap check. Returns
    (particles spawned, objects freed by the final collections, live objects)."""
    rt = zs.current_runtime()
    emitter = _state.pop("emitter")
    spawned = emitter.spawned
    emitter.remove_from_root()
    freed = 0
    if rt.gc.phase != "idle":              # finish the pending cycle first: what it
        freed += rt.collect_garbage().objects_freed   # marked already survives it
    freed += rt.collect_garbage().objects_freed
    rt.gc.verify()
    return spawned, freed, rt.live_objects()
