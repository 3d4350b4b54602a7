"""The demo: a small game loop scripted in Python over the native heap.

A rooted ``World`` holds a linked list of actors and a ``Level`` whose
static geometry (tiles) is a GC cluster: the collector marks it in one step
without reading the tiles. Every frame actors spawn, pick targets and fire
projectiles; dead actors are unlinked and marked as garbage (so every
``target`` pointing at them is nulled by the GC); spent projectiles are
simply dropped. The GC runs incrementally, driven by ``rt.gc.tick(dt)``
once per frame under a small time budget, and the demo prints what it did.
"""
from __future__ import annotations

import random
from typing import Callable, TextIO

import zsharp_py as zs


class Actor(zs.Object):
    """A game actor on the native heap."""

    health: zs.Int32 = 100
    x: zs.Float64
    y: zs.Float64
    kills: zs.UInt16
    target: "Actor | None"
    next: "Actor | None"
    rival: zs.WeakObjectPtr["Actor"]


class Projectile(zs.Object):
    """A short-lived object: referenced by nobody once fired."""

    damage: zs.Int32 = 25
    target: Actor | None


class Tile(zs.Object, can_be_in_cluster=True):
    """Static level geometry: joins its level's cluster."""

    height: zs.Float32
    next: "Tile | None"


class Particle(zs.Object):
    """Background effects: a long rooted chain, so a GC cycle needs several
    small steps."""

    life: zs.Float32
    next: "Particle | None"


class Level(zs.Object, cluster_root=True):
    """Owns the tiles; the root of their cluster."""

    first_tile: Tile | None


class World(zs.Object):
    """The root of the game state."""

    level: Level | None
    first: Actor | None
    particles: Particle | None
    frame: zs.Int64
    spawned: zs.Int64


def _actors(world: World) -> list[Actor]:
    actors = []
    actor = world.first
    while actor is not None:
        actors.append(actor)
        actor = actor.next
    return actors


def _unlink(world: World, dead: Actor) -> None:
    if world.first is dead:
        world.first = dead.next
        return
    actor = world.first
    while actor is not None and actor.next is not dead:
        actor = actor.next
    if actor is not None:
        actor.next = dead.next


def _build_level(world: World, tiles: int) -> int:
    level = Level(name="Level", outer=world)
    previous = None
    for index in range(tiles):
        previous = Tile(outer=level, height=index * 0.5, next=previous)
    level.first_tile = previous
    world.level = level
    return level.create_cluster()


FRAME_SECONDS = 1 / 60


def run_demo(frames: int = 12, seed: int = 7, collect_every: int = 3,
             out: TextIO | None = None, particles: int = 20000,
             budget: float = 0.0002) -> dict[str, int]:
    """Run the game loop; print per frame what the GC did; return totals.

    A collection cycle starts every ``collect_every`` frames and advances
    incrementally on the following ticks (``budget`` seconds of GC work per
    frame).
    """
    write: Callable[[str], object] = print if out is None else (lambda s: out.write(s + "\n"))
    rng = random.Random(seed)
    totals = {"spawned": 0, "killed": 0, "freed": 0, "nulled": 0, "expired": 0, "collections": 0}
    with zs.Runtime(min_cluster_size=8) as rt:
        rt.gc.settings.time_between_collections = collect_every * FRAME_SECONDS * 0.999
        rt.gc.settings.reachability_budget = rt.gc.settings.purge_budget = budget
        world = World(name="World")
        world.add_to_root()
        cluster_size = _build_level(world, tiles=64)
        for _ in range(particles):
            world.particles = Particle(life=rng.random(), next=world.particles)
        camera: zs.StrongObjectPtr[Actor] | None = None
        write(f"zsharp_py demo: {frames} frames; an incremental GC cycle every {collect_every} "
              f"frames, {budget * 1e3:g} ms of GC work per frame; {particles} particles; "
              f"level cluster of {cluster_size} objects")
        for frame in range(1, frames + 1):
            world.frame = frame
            for _ in range(3):
                actor = Actor(outer=world, x=rng.uniform(-50, 50), y=rng.uniform(-50, 50))
                actor.next = world.first
                world.first = actor
                world.spawned += 1
                totals["spawned"] += 1
            actors = _actors(world)
            if camera is None:
                camera = zs.StrongObjectPtr(actors[-1])  # keeps the first actor alive
            for actor in actors:
                actor.target = rng.choice(actors)
                actor.rival = zs.WeakObjectPtr(rng.choice(actors))
            killed = 0
            for actor in actors:
                victim = actor.target
                if victim is None or victim is actor or victim.health <= 0:
                    continue
                shot = Projectile(target=victim, damage=rng.randint(10, 60))
                victim.health = max(victim.health - shot.damage, 0)
                if victim.health == 0:
                    actor.kills += 1
                    _unlink(world, victim)
                    victim.mark_as_garbage()
                    killed += 1
            totals["killed"] += killed
            line = (f"frame {frame:3d}: live objects {rt.live_objects():4d}, "
                    f"{len(_actors(world)):3d} actors, killed {killed}")
            action = rt.gc.tick(FRAME_SECONDS)
            if action == "finished":
                stats = rt.gc.stats()
                rt.gc.verify()
                totals["collections"] += 1
                totals["freed"] += stats.objects_freed
                totals["nulled"] += stats.references_killed
                totals["expired"] += stats.conjugates_expired
                line += (f" | GC cycle #{stats.cycle} done in {stats.mark_steps} step(s): "
                         f"marked {stats.objects_marked} ({stats.clusters_marked} cluster "
                         f"in one step), scanned {stats.objects_scanned}, freed "
                         f"{stats.objects_freed}, refs nulled {stats.references_killed}, "
                         f"conjugates expired {stats.conjugates_expired}")
            elif action != "idle":
                line += f" | GC {action} ({rt.gc.phase})"
            write(line)
        stats = rt.collect_garbage()  # finishes a pending cycle, or runs a full one
        rt.gc.verify()
        totals["collections"] += 1
        totals["freed"] += stats.objects_freed
        totals["nulled"] += stats.references_killed
        totals["expired"] += stats.conjugates_expired
        write(f"final full collection #{stats.cycle}: marked {stats.objects_marked}, freed "
              f"{stats.objects_freed}, refs nulled {stats.references_killed}, mark "
              f"{stats.mark_seconds * 1e3:.2f} ms on {stats.mark_threads} thread(s)")
        assert camera is not None
        hero = camera.get()
        write(f"camera actor {hero.name!r} survived (health {hero.health}) because a "
              f"StrongObjectPtr holds it")
        camera.dispose()
        write(f"totals: {totals}")
    return totals
