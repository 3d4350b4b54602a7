"""A tower-defence round written as game logic over the native heap.

Creeps walk along a lane; towers shoot the nearest creep in range. What a
game-logic author writes with zsharp_py:

- actors are native objects (``zs.Object`` subclasses) with typed
  properties, a struct member (``Vec2``), containers and a delegate, plus
  ordinary Python methods and properties;
- the arena is the one root; everything else lives because the arena (or a
  tower's ``target``) references it;
- a killed creep is *marked as garbage*: at the next collection every
  reference to it (a tower's ``target``) becomes ``None`` by itself;
- ``on_death`` listeners are bound weakly through object methods;
- the HUD remembers the last kill through a ``WeakObjectPtr``, which never
  keeps it alive;
- the collector runs incrementally, ``rt.gc.tick(dt)`` once per frame.

Run: ``python examples/game_logic.py [--frames N] [--seed S]``.
"""

from __future__ import annotations

import argparse
import random

import zsharp_py as zs

LANE_END = 100.0
DT = 1 / 60


class Vec2(zs.Struct):
    """A 2-D position or velocity (a native struct)."""

    x: zs.Float64
    y: zs.Float64


class Actor(zs.Object):
    """Anything on the field."""

    position: Vec2
    health: zs.Int32 = 100
    team: zs.Name
    on_death: zs.MulticastDelegate

    @property
    def alive(self) -> bool:
        """Still standing (and not yet destroyed by the GC)."""
        return not self.is_expired and self.health > 0

    def distance_to(self, other: Actor) -> float:
        """Distance between two actors' positions."""
        a, b = self.position, other.position
        return float(((a.x - b.x) ** 2 + (a.y - b.y) ** 2) ** 0.5)


class Creep(Actor):
    """Walks down the lane; carries loot."""

    speed: zs.Float32 = 16.0
    loot: zs.Map[zs.Name, zs.Int32]

    def tick(self, dt: float) -> None:
        """Walk along the lane."""
        self.position.x += self.speed * dt


class Tower(Actor):
    """Shoots the nearest creep in range."""

    range: zs.Float32 = 20.0
    damage: zs.Int32 = 12
    cooldown: zs.Float32
    target: Creep | None  # strong and killable: nulled when its creep dies
    shots: zs.UInt32

    def tick(self, dt: float, creeps: list[Creep]) -> None:
        """Pick a target if needed, then fire when the cooldown allows."""
        self.cooldown = max(0.0, self.cooldown - dt)
        # Aim again when the target died, escaped or walked out of range (a
        # dead creep's reference is nulled at the next GC; until then it is
        # garbage, and no longer in the list of creeps on the field).
        if self.target not in creeps or self.distance_to(self.target) > self.range:
            in_range = [c for c in creeps if self.distance_to(c) <= self.range]
            self.target = min(in_range, key=self.distance_to, default=None)
        if self.target is not None and self.cooldown == 0.0:
            self.cooldown = 0.2
            self.shots += 1
            self.target.health -= self.damage
            if self.target.health <= 0:
                self.target.on_death.broadcast(self.target, self)


class Arena(zs.Object):
    """The root of the round: owns the creeps and towers, keeps the score."""

    creeps: zs.Array[Creep]
    towers: zs.Array[Tower]
    gold: zs.Map[zs.Name, zs.Int32]
    kills: zs.Int32
    escaped: zs.Int32
    spawned: zs.Int32
    last_kill: zs.WeakObjectPtr[Creep]

    def on_creep_died(self, creep: Creep, killer: Tower) -> None:
        """Bound (weakly) to every creep's ``on_death``: score and clean up."""
        self.kills += 1
        for item, amount in creep.loot.items():
            self.gold[item] = self.gold.get(item, 0) + amount
        self.last_kill = zs.WeakObjectPtr(creep)
        self.creeps.remove(creep)
        creep.mark_as_garbage()  # towers still aiming at it let go at the next GC

    def spawn_wave(self, rng: random.Random, size: int) -> None:
        """Add ``size`` creeps at the start of the lane."""
        for _ in range(size):
            creep = Creep(
                outer=self,
                team="Creeps",
                health=rng.randrange(30, 60),
                position=(0.0, rng.uniform(-4.0, 4.0)),
                speed=rng.uniform(14, 24),
            )
            creep.loot["gold"] = rng.randrange(1, 5)
            creep.on_death.add(self.on_creep_died)
            self.creeps.append(creep)
            self.spawned += 1

    def tick(self, dt: float) -> None:
        """One frame of game logic."""
        creeps = list(self.creeps)
        for creep in creeps:
            creep.tick(dt)
            if creep.position.x >= LANE_END:  # escaped: dropped, the GC frees it later
                self.escaped += 1
                self.creeps.remove(creep)
        creeps = list(self.creeps)
        for tower in self.towers:
            tower.tick(dt, creeps)
            creeps = [c for c in creeps if c.alive and not c.is_garbage]


def play(frames: int = 480, seed: int = 7) -> dict[str, int]:
    """Play one round; print a short summary; return its figures."""
    rng = random.Random(seed)
    with zs.Runtime() as rt:
        rt.gc.settings.time_between_collections = 0.25  # a GC cycle every ~15 frames
        arena = Arena(name="Arena")
        arena.add_to_root()
        for x in (20.0, 40.0, 60.0, 80.0):
            arena.towers.append(Tower(outer=arena, team="Guards", position=(x, 6.0)))
        cycles = freed = killed_refs = 0
        first_kill: Creep | None = None
        for frame in range(frames):
            if frame % 60 == 0:
                arena.spawn_wave(rng, size=6)
            with zs.scope():  # views made this frame expire with it
                arena.tick(DT)
            if first_kill is None and arena.last_kill.is_valid:
                first_kill = arena.last_kill.get()
            if rt.gc.tick(DT) == "finished":
                stats = rt.gc.stats()
                cycles += 1
                freed += stats.objects_freed
                killed_refs += stats.references_killed
        stats = rt.collect_garbage()  # end of round: everything dead goes
        freed += stats.objects_freed
        figures = {
            "frames": frames,
            "spawned": arena.spawned,
            "killed": arena.kills,
            "escaped": arena.escaped,
            "on_field": len(arena.creeps),
            "gold": arena.gold.get("gold", 0),
            "shots": sum(t.shots for t in arena.towers),
            "gc_cycles": cycles,
            "freed": freed,
            "references_killed": killed_refs,
            "live_objects": rt.live_objects(),
        }
        print(
            f"{frames} frames: {arena.spawned} creeps spawned, {arena.kills} killed, "
            f"{arena.escaped} escaped, {len(arena.creeps)} still on the field"
        )
        print(f"towers fired {figures['shots']} shots and looted {figures['gold']} gold")
        print(
            f"GC: {cycles} incremental cycles finished during play, {freed} objects freed "
            f"in all, {killed_refs} references to dead creeps nulled by the GC"
        )
        print(
            f"live objects after the final collection: {figures['live_objects']} "
            f"(arena, {len(arena.towers)} towers, {len(arena.creeps)} creeps)"
        )
        print(f"last kill through its weak pointer: {arena.last_kill.get()}")
        if first_kill is not None:
            try:
                first_kill.health  # noqa: B018 (touching it is the point)
            except zs.ExpiredConjugateError as error:
                print(f"the first creep killed, touched again: {error}")
    return figures


def main() -> None:
    """Command line: ``--frames``, ``--seed``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=480)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    play(args.frames, args.seed)


if __name__ == "__main__":
    main()
