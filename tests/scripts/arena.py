"""A game script on the sample engine, declared at module level: its
classes are made when the module is imported, before any runtime exists,
and serve every runtime in which the engine is installed
(tests/interop/test_game_scripts.py; docs/writing-game-scripts.md shows the
same script).

>>> import zsharp_py as zs
>>> from zsharp_py import sample_engine
>>> with zs.Runtime():
...     sample_engine.install()
...     log = play(frames=2)
>>> log
[('Guard', 0.0), ('Guard', 1.0), ('Sniper', 800, 'eagle')]
"""

from __future__ import annotations

import zsharp_py as zs
from zsharp_py.engines.sample import Actor, Team, Transform, Vec3, World

__all__ = ["Guard", "Sniper", "Squad", "play"]


class Guard(Actor):
    """Patrols along x, and remembers where it was at each tick."""

    seen: list = zs.state(factory=list)  # Python state, kept as long as the actor

    def begin_play(self) -> None:
        super().begin_play()  # the engine's native default: alive, full health
        self.team = Team.Blue
        self.speed = 2.0

    def tick(self, dt: float) -> None:
        self.seen.append(round(self.transform.location.x, 1))
        super().tick(dt)  # the native default: move at speed


class Sniper(Actor):
    """Defaults of every kind: a scalar, a string and a struct."""

    range: zs.Int32 = 800
    callsign: zs.String = "eagle"
    scope: Vec3 = Vec3(0.0, 0.0, 2.0)

    def begin_play(self) -> None:
        super().begin_play()
        self.team = Team.Red


class Squad(zs.Object):
    """A Python class whose properties reference the engine's actors."""

    leader: Actor | None
    members: zs.Array[Actor]


def play(frames: int) -> list[tuple[object, ...]]:
    """In the current runtime (the engine installed there): a world, a
    guard and a sniper spawned by the engine, ``frames`` frames ticked by
    the engine's C loop; what the guard saw, and the sniper's defaults."""
    world = World()
    world.add_to_root()
    guard = world.spawn(Guard, Transform(Vec3(0.0, 0.0, 0.0), 0.0, 1.0))
    sniper = world.spawn(Sniper, Transform())
    for _ in range(frames):
        world.tick(0.5)
    log: list[tuple[object, ...]] = [("Guard", x) for x in guard.seen]
    log.append(("Sniper", sniper.range, str(sniper.callsign)))
    world.remove_from_root()
    return log
