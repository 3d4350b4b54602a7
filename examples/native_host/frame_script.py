"""Game logic that a native host (host.c) calls once per frame.

The host owns the frame loop and the clock; this script owns the game state,
on zsharp_py's native heap, in the default runtime (created on first use,
closed when the host finalises Python). Each function returns plain numbers
and strings for the host to report.
"""
from __future__ import annotations

import zsharp_py as zs


class Particle(zs.Object):
    """A short-lived effect: dropped when its time is up, freed by the GC."""

    ttl: zs.Float32
    kind: zs.Name


class Emitter(zs.Object):
    """Owns the live particles."""

    particles: zs.Array[Particle]
    spawned: zs.Int64


_state: dict[str, Emitter] = {}


def start(seconds_between_collections: float) -> int:
    """Create the scene; return the number of live objects."""
    rt = zs.current_runtime()
    rt.gc.settings.time_between_collections = seconds_between_collections
    emitter = Emitter(name="Emitter")
    emitter.add_to_root()
    _state["emitter"] = emitter
    return rt.live_objects()


def frame(index: int, dt: float, spawn: int) -> tuple[str, int, int]:
    """One frame: spawn ``spawn`` particles, age them, drop the expired ones,
    then let the GC work for this frame. Returns (what the GC did this frame,
    live objects, objects freed by the cycle if it finished this frame)."""
    rt = zs.current_runtime()
    emitter = _state["emitter"]
    for i in range(spawn):
        kind = "spark" if i % 3 else "smoke"
        emitter.particles.append(Particle(ttl=0.05 + (index + i) % 10 * 0.02, kind=kind))
    emitter.spawned += spawn
    alive = []
    for particle in emitter.particles:
        particle.ttl -= dt
        if particle.ttl > 0:
            alive.append(particle)
    if len(alive) != len(emitter.particles):
        emitter.particles = alive          # the others are referenced by nobody now
    action = rt.gc.tick(dt)
    freed = rt.gc.stats().objects_freed if action == "finished" else 0
    return action, rt.live_objects(), freed


def finish() -> tuple[int, int, int]:
    """End of the session: a full collection and a heap check. Returns
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
