"""The demo: a small game loop scripted in Python over the native heap.

A rooted ``World`` holds a linked list of actors. Every frame actors spawn,
pick targets and fire projectiles; dead actors are unlinked and marked as
garbage (so every ``target`` pointing at them is nulled by the GC); spent
projectiles are simply dropped. Every few frames the GC runs and the demo
prints what it did.
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


class World(zs.Object):
    """The root of the game state."""

    first: Actor | None
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


def run_demo(frames: int = 12, seed: int = 7, collect_every: int = 3,
             out: TextIO | None = None) -> dict[str, int]:
    """Run the game loop; print per frame what the GC did; return totals."""
    write: Callable[[str], object] = print if out is None else (lambda s: out.write(s + "\n"))
    rng = random.Random(seed)
    totals = {"spawned": 0, "killed": 0, "freed": 0, "nulled": 0, "expired": 0, "collections": 0}
    with zs.Runtime() as rt:
        world = World(name="World")
        world.add_to_root()
        camera: zs.StrongObjectPtr[Actor] | None = None
        write(f"zsharp_py demo: {frames} frames, a collection every {collect_every} frames")
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
            if frame % collect_every == 0:
                stats = rt.collect_garbage()
                rt.gc.verify()
                totals["collections"] += 1
                totals["freed"] += stats.objects_freed
                totals["nulled"] += stats.references_killed
                totals["expired"] += stats.conjugates_expired
                line += (f" | GC #{stats.cycle}: marked {stats.objects_marked}, "
                         f"freed {stats.objects_freed}, killable refs nulled "
                         f"{stats.references_killed}, conjugates expired "
                         f"{stats.conjugates_expired}, mark {stats.mark_seconds * 1e3:.3f} ms")
            write(line)
        assert camera is not None
        hero = camera.get()
        write(f"camera actor {hero.name!r} survived (health {hero.health}) because a "
              f"StrongObjectPtr holds it")
        camera.dispose()
        write(f"totals: {totals}")
    return totals
