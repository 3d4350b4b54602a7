"""The demo: a small shooter scripted in Python over the native heap, narrating
frame by frame what the incremental garbage collector does.

A rooted ``World`` holds a linked list of actors, a chain of smoke particles
(long enough that marking takes several frames; the oldest burn out every
frame) and a ``Level`` whose tiles form a GC cluster (marked as one unit,
without reading its members). Every frame actors spawn and shoot: a shot is
a ``Projectile`` carrying a few spark ``Particle`` objects that nothing
keeps, so it is garbage at once; an actor killed in gameplay is unlinked
from the world and marked as garbage, so the collector nulls the references
still pointing at it. A camera outside the world, out of combat, is kept
alive by a ``StrongObjectPtr`` alone; the demo holds a ``WeakObjectPtr`` to
each actor the camera follows, and each goes ``None`` once the collector has
found its actor unreachable.

``rt.gc.tick()`` drives the collector once per frame with a budget counted
in objects (``GcSettings.objects_per_tick``), never in seconds: a cycle
spans several frames, and the same arguments print the same text on any
machine and under any load (unless ``timings`` asks for measured times).
"""

from __future__ import annotations

import random
import re
import sys
import textwrap
from collections import deque
from dataclasses import dataclass
from typing import TextIO

import zsharp_py as zs
from zsharp_py.collector import GcStats

__all__ = [
    "Actor",
    "Projectile",
    "Particle",
    "Tile",
    "Level",
    "World",
    "run_demo",
    "LEGEND",
    "DEFAULT_FRAMES",
    "DEFAULT_SEED",
    "DEFAULT_COLLECT_EVERY",
    "DEFAULT_OBJECTS_PER_FRAME",
    "DEFAULT_PARTICLES",
]


class Actor(zs.Object):
    """A combatant (or the camera) on the native heap."""

    health: zs.Int32 = 100
    x: zs.Float64
    y: zs.Float64
    kills: zs.UInt16
    target: "Actor | None"
    """Killable: the collector sets it to None once its actor is garbage."""
    next: "Actor | None"


class Particle(zs.Object):
    """A smoke particle of the world's chain, or a spark of a shot."""

    life: zs.Float32
    next: "Particle | None"


class Projectile(zs.Object):
    """A shot: referenced by nobody once fired, so garbage at once."""

    damage: zs.Int32 = 25
    target: Actor | None
    sparks: Particle | None


class Tile(zs.Object, can_be_in_cluster=True):
    """Static level geometry: joins its level's cluster."""

    height: zs.Float32
    next: "Tile | None"


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


DEFAULT_FRAMES = 12
"""Frames the demo plays unless told otherwise."""
DEFAULT_SEED = 7
"""The game's default random seed."""
DEFAULT_COLLECT_EVERY = 3
"""Frames between the starts of two incremental cycles, by default."""
DEFAULT_OBJECTS_PER_FRAME = 200
"""Default GC work per frame (``GcSettings.objects_per_tick``)."""
DEFAULT_PARTICLES = 300
"""Default length of the world's smoke chain."""

FRAME_SECONDS = 1 / 60
SPAWNS_PER_FRAME = 3
SPARKS_PER_SHOT = 2
SMOKE_LIFE_FRAMES = 6
TILES = 64
_WIDTH = 100

LEGEND: tuple[tuple[str, str], ...] = (
    (
        "killed",
        "actors whose health reached 0 in gameplay this frame: each is unlinked from "
        "the world and marked as garbage (obj.mark_as_garbage())",
    ),
    (
        "shots",
        f"projectiles fired this frame, each with {SPARKS_PER_SHOT} sparks; nothing keeps "
        "a projectile after its hit, so it is garbage at once",
    ),
    ("GC cycle", "one garbage collection, spread over several frames: marking, then purging"),
    (
        "marking",
        "the collector follows references from the roots (the rooted World, the "
        "camera's StrongObjectPtr), a bounded number of objects per frame",
    ),
    ("marked", "objects found reachable from the roots this cycle"),
    (
        "scanned",
        "objects whose references the collector read; cluster members are marked "
        "without being read",
    ),
    ("cluster", f"a group of objects marked as one unit: the level and its {TILES} tiles"),
    ("unreachable", "objects the marking did not reach: this cycle frees them"),
    (
        "purging",
        "the collector expires the conjugates of the unreachable objects, then frees "
        "the objects, a bounded number per frame",
    ),
    (
        "conjugates expired",
        "Python proxies still held for unreachable objects, switched off "
        "before the native memory goes: using one raises "
        "ExpiredConjugateError",
    ),
    ("freed", "native objects destroyed"),
    (
        "references nulled",
        "references to garbage-marked (killed) actors that the collector set to None",
    ),
)
"""Each term the demo's output may use, and what it means; the demo prints
the entries whose term its output uses."""


def _uses(text: str, term: str) -> bool:
    """Whether ``text`` uses ``term``, singular or plural (``1 reference
    nulled`` uses ``references nulled``)."""
    words = [
        re.escape(word[:-1]) + "s?" if word.endswith("s") else re.escape(word) + "s?"
        for word in term.split()
    ]
    return re.search(r"\b" + r"\s+".join(words) + r"\b", text) is not None


def _count(n: int, singular: str, plural: str | None = None) -> str:
    """``1 actor``, ``2 actors``, ``1,250 objects``."""
    return f"{n:,} {singular if n == 1 else (plural or singular + 's')}"


def _every(n: int, unit: str) -> str:
    """``every frame``, ``every 3 frames``."""
    return f"every {unit}" if n == 1 else f"every {n:,} {unit}s"


def _fill(text: str, indent: str = "") -> str:
    return textwrap.fill(text, _WIDTH, initial_indent=indent, subsequent_indent=indent)


def _actors(world: World) -> list[Actor]:
    actors = []
    actor = world.first
    while actor is not None:
        actors.append(actor)
        actor = actor.next
    return actors


def _unlink(world: World, dead: Actor) -> None:
    if world.first == dead:
        world.first = dead.next
        return
    actor = world.first
    while actor is not None and actor.next != dead:
        actor = actor.next
    if actor is not None:
        actor.next = dead.next


def _nearest(shooter: Actor, actors: list[Actor]) -> Actor | None:
    """The nearest other living actor (the first of equals)."""
    best: Actor | None = None
    best_distance = 0.0
    for other in actors:
        if other == shooter or other.is_garbage:
            continue
        distance = (other.x - shooter.x) ** 2 + (other.y - shooter.y) ** 2
        if best is None or distance < best_distance:
            best, best_distance = other, distance
    return best


@dataclass(frozen=True)
class _Progress:
    """The figures of a pending cycle that two frames' lines compare."""

    marked: int = 0
    unreachable: int = 0
    expired: int = 0
    freed: int = 0
    nulled: int = 0

    @staticmethod
    def of(stats: GcStats) -> _Progress:
        return _Progress(
            stats.objects_marked,
            stats.objects_unreachable,
            stats.conjugates_expired,
            stats.objects_freed,
            stats.references_killed,
        )


def _gc_progress(
    phase_before: str, before: _Progress, phase: str, after: _Progress, finished: bool
) -> str:
    """What one tick of the collector did, in words."""
    if phase_before == "purging":
        parts = ["purging"]
    elif phase == "marking":
        parts = [f"marking ({_count(after.marked, 'object')} marked so far)"]
    else:
        parts = [
            f"marking done ({_count(after.marked, 'object')} marked, "
            f"{after.unreachable:,} unreachable)"
        ]
    if after.nulled != before.nulled:
        parts.append(_count(after.nulled - before.nulled, "reference") + " nulled")
    if after.expired != before.expired:
        parts.append(_count(after.expired - before.expired, "conjugate") + " expired")
    if after.freed != before.freed:
        parts.append(_count(after.freed - before.freed, "object") + " freed")
    if not finished and phase == "purging":
        parts.append(f"{after.unreachable - after.freed:,} left to free")
    return ", ".join(parts)


@dataclass
class _Followed:
    """An actor the camera followed: a weak pointer to it, and its proxy,
    kept to check that it expires with the weak pointer."""

    name: str
    weak: zs.WeakObjectPtr[Actor]
    proxy: Actor


class _Game:
    """The game's state and its narration (``lines``), in one runtime."""

    def __init__(self, rt: zs.Runtime, rng: random.Random, particles: int, timings: bool) -> None:
        self.rt, self.rng, self.timings = rt, rng, timings
        self.lines: list[str] = []
        self.totals = {
            "spawned": 0,
            "killed": 0,
            "shots": 0,
            "created": 0,
            "freed": 0,
            "expired": 0,
            "nulled": 0,
            "collections": 0,
            "incremental": 0,
            "live": 0,
        }
        self.world = World(name="World")
        self.world.add_to_root()
        level = Level(name="Level", outer=self.world)
        for index in range(TILES):
            level.first_tile = Tile(outer=level, height=index * 0.5, next=level.first_tile)
        self.world.level = level
        self.cluster_size = level.create_cluster()
        # The smoke chain, oldest particle first: the oldest burn out each frame.
        self.smoke: deque[Particle] = deque()
        for _ in range(particles):
            self.world.particles = Particle(life=rng.random(), next=self.world.particles)
            self.smoke.append(self.world.particles)
        self.burnt_per_frame = -(-particles // SMOKE_LIFE_FRAMES)
        self.camera = Actor(name="Camera")  # no outer, in no list: only camera_ptr keeps it
        self.camera_ptr = zs.StrongObjectPtr(self.camera)
        self.totals["created"] = 1 + 1 + TILES + particles + 1
        self.kills: dict[str, int] = {}  # by killer, dead or alive, in order of first kill
        self.followed: _Followed | None = None
        self.watched: list[_Followed] = []
        self.cycle_start: dict[int, int] = {}
        self.finished: GcStats | None = None  # the cycle this frame's tick finished

    # ---- narration --------------------------------------------------------
    def say(self, text: str, indent: str = "") -> None:
        self.lines.append(_fill(text, indent))

    def count_cycle(self, stats: GcStats) -> None:
        self.totals["collections"] += 1
        self.totals["freed"] += stats.objects_freed
        self.totals["expired"] += stats.conjugates_expired
        self.totals["nulled"] += stats.references_killed
        if self.timings:
            self.say(
                f"timings, measured (they vary from run to run): marking "
                f"{stats.mark_seconds * 1e3:.3f} ms, gathering "
                f"{stats.gather_seconds * 1e3:.3f} ms, purging "
                f"{stats.purge_seconds * 1e3:.3f} ms",
                "    ",
            )

    def gone(self) -> list[str]:
        """Forget the followed actors whose weak pointer now reads None (their
        proxy is expired too); return their names."""
        gone = [watch for watch in self.watched if watch.weak.get() is None]
        for watch in gone:
            assert watch.proxy.is_expired, f"{watch.name}: a weak pointer outlived its proxy"
            self.watched.remove(watch)
        return [watch.name for watch in gone]

    # ---- a frame ----------------------------------------------------------
    def play(self, frame: int, frame_width: int) -> None:
        """Play one frame, tick the collector, narrate both."""
        world, rng, totals = self.world, self.rng, self.totals
        events: list[str] = []
        world.frame = frame
        for _ in range(SPAWNS_PER_FRAME):
            world.first = Actor(
                outer=world, x=rng.uniform(-50, 50), y=rng.uniform(-50, 50), next=world.first
            )
            world.spawned += 1
        if self.smoke:
            for _ in range(self.burnt_per_frame):
                self.smoke.popleft()
                world.particles = Particle(life=rng.random(), next=world.particles)
                self.smoke.append(world.particles)
            self.smoke[0].next = None  # the burnt-out tail is unreachable from here on
        totals["spawned"] += SPAWNS_PER_FRAME
        totals["created"] += SPAWNS_PER_FRAME + self.burnt_per_frame * bool(self.smoke)

        actors = _actors(world)
        if self.camera.target is None:
            subject = actors[-1]
            self.camera.target = subject
            self.followed = _Followed(subject.name, zs.WeakObjectPtr(subject), subject)
            self.watched.append(self.followed)
            events.append(f"the camera now follows {subject.name}, the oldest actor")
        shots = killed = 0
        for actor in actors:
            if actor.is_garbage:
                continue  # killed earlier this frame
            target = actor.target
            if target is None:  # never aimed yet, or nulled by the collector
                target = actor.target = _nearest(actor, actors)
            if target is None or target.is_garbage:
                continue  # holds fire: its reference to a killed actor waits for the GC
            sparks = None
            for _ in range(SPARKS_PER_SHOT):
                sparks = Particle(life=rng.random(), next=sparks)
            shot = Projectile(target=target, damage=rng.randint(10, 60), sparks=sparks)
            shots += 1
            target.health = max(target.health - shot.damage, 0)
            if target.health == 0:
                actor.kills += 1
                self.kills[actor.name] = actor.kills
                _unlink(world, target)
                target.mark_as_garbage()
                killed += 1
                if self.followed is not None and target == self.followed.proxy:
                    events.append(
                        f"the camera's actor {target.name} was killed: "
                        f"camera.target points at it until the GC nulls it"
                    )
        totals["shots"] += shots
        totals["created"] += shots * (1 + SPARKS_PER_SHOT)
        totals["killed"] += killed

        gc = self.tick(frame)
        if self.followed is not None and self.camera.target is None:
            events.append(f"the GC nulled camera.target: {self.followed.name} is marked as garbage")
            self.followed = None
        for name in self.gone():
            events.append(
                f"the WeakObjectPtr to {name} now returns None: the GC found it "
                f"unreachable and expired its proxy; this cycle's purge frees it"
            )
        alive = world.spawned - totals["killed"]
        self.lines.append(
            f"frame {frame:>{frame_width}}: {_count(alive, 'actor')} alive, "
            f"{killed} killed, {_count(shots, 'shot')}; {gc}"
        )
        for event in events:
            self.say(event, "    ")
        if self.finished is not None:
            self.count_cycle(self.finished)

    def tick(self, frame: int) -> str:
        """Tick the collector; what it did, in words."""
        gc = self.rt.gc
        self.finished = None
        phase_before = gc.phase
        before = _Progress.of(gc.stats()) if phase_before != "idle" else _Progress()
        action = gc.tick(FRAME_SECONDS)
        if action == "idle":
            return "GC idle"
        stats = gc.stats()
        first_frame = self.cycle_start.setdefault(stats.cycle, frame)
        text = (
            f"GC cycle {stats.cycle}{' starts' if first_frame == frame else ''}: "
            + _gc_progress(
                phase_before, before, gc.phase, _Progress.of(stats), action == "finished"
            )
        )
        if action == "finished":
            gc.verify()
            self.totals["incremental"] += 1
            self.finished = stats  # counted (and timed) after the frame's line
            text += f"; the cycle is finished, after {_count(frame - first_frame + 1, 'frame')}"
        return text

    # ---- after the last frame ----------------------------------------------
    def finish(self, frames: int, objects_per_frame: int) -> None:
        """Finish the pending cycle, collect fully, release the camera."""
        rt, gc = self.rt, self.rt.gc
        self.lines.append("")
        self.lines.append(f"After frame {frames}:")
        if gc.phase != "idle":
            # Stepping, not rt.collect_garbage(): during a pending purge that
            # would also run a new cycle, and stats() would then describe the
            # new cycle instead of this one (src/zsharp_py/_runtime/collector.py, collect).
            phase, steps = gc.phase, 1
            while not gc.step(max_objects=objects_per_frame):
                steps += 1
            stats = gc.stats()
            gc.verify()
            self.totals["incremental"] += 1
            self.say(
                f"GC cycle {stats.cycle} was still {phase}; {_count(steps, 'more step')} of "
                f"rt.gc.step(max_objects={objects_per_frame}) finished it. The whole cycle: "
                f"{_count(stats.objects_marked, 'object')} marked, "
                f"{stats.objects_unreachable:,} unreachable, "
                f"{_count(stats.conjugates_expired, 'conjugate')} expired, "
                f"{_count(stats.objects_freed, 'object')} freed, "
                f"{_count(stats.references_killed, 'reference')} nulled.",
                "  ",
            )
            self.count_cycle(stats)
            for name in self.gone():
                self.say(
                    f"The WeakObjectPtr to {name} now returns None: that cycle freed it.", "  "
                )
        stats = rt.collect_garbage()
        gc.verify()
        self.say(
            f"Final full collection (GC cycle {stats.cycle}, stop-the-world, in one step): "
            f"{_count(stats.objects_marked, 'object')} marked, of which "
            f"{stats.objects_scanned:,} scanned and the rest in "
            f"{_count(stats.clusters_marked, 'cluster')} marked as a unit; "
            f"{stats.objects_unreachable:,} unreachable (what the last frames left behind), "
            f"{_count(stats.conjugates_expired, 'conjugate')} expired, "
            f"{_count(stats.objects_freed, 'object')} freed, "
            f"{_count(stats.references_killed, 'reference')} nulled.",
            "  ",
        )
        self.count_cycle(stats)
        for name in self.gone():
            self.say(
                f"The WeakObjectPtr to {name} now returns None: the final collection freed it.",
                "  ",
            )

        camera = self.camera
        self.say(
            f"The camera (health {camera.health}: it never fought) is alive although no "
            f"object references it: its StrongObjectPtr is a root.",
            "  ",
        )
        self.camera_ptr.dispose()
        stats = rt.collect_garbage()
        gc.verify()
        try:
            camera.health  # noqa: B018 (the read is the use after free shown)
        except zs.ExpiredConjugateError as error:
            expired = f'using its proxy now raises ExpiredConjugateError("{error}")'
        else:
            raise AssertionError("the camera outlived its StrongObjectPtr")
        self.say(
            f"After camera_ptr.dispose(), GC cycle {stats.cycle} freed "
            f"{_count(stats.objects_freed, 'object')} (the camera): {expired}.",
            "  ",
        )
        self.count_cycle(stats)
        self.totals["live"] = rt.live_objects()

    def summary(self, frames: int) -> None:
        """The closing ``label: value`` lines."""
        totals = self.totals
        top = max(self.kills, key=lambda name: self.kills[name], default=None)
        summary = [
            ("frames played", f"{frames:,}"),
            ("actors spawned", f"{totals['spawned']:,}"),
            ("actors killed", f"{totals['killed']:,}"),
            ("actors alive at the end", f"{totals['spawned'] - totals['killed']:,}"),
            ("shots fired", f"{totals['shots']:,}"),
            (
                "top scorer",
                "nobody" if top is None else f"{top}, {_count(self.kills[top], 'kill')}",
            ),
            (
                "GC cycles",
                f"{totals['collections']:,} ({totals['incremental']:,} incremental, "
                f"{totals['collections'] - totals['incremental']:,} full)",
            ),
            ("objects created", f"{totals['created']:,}"),
            ("objects freed", f"{totals['freed']:,}"),
            ("objects on the heap at the end", f"{totals['live']:,}"),
            ("conjugates expired", f"{totals['expired']:,}"),
            ("references nulled", f"{totals['nulled']:,}"),
        ]
        width = max(len(label) for label, _ in summary) + 1
        self.lines.append("")
        self.lines.append("Summary:")
        for label, value in summary:
            self.lines.append(f"  {(label + ':').ljust(width)} {value}")


def run_demo(
    frames: int = DEFAULT_FRAMES,
    seed: int = DEFAULT_SEED,
    collect_every: int = DEFAULT_COLLECT_EVERY,
    out: TextIO | None = None,
    *,
    particles: int = DEFAULT_PARTICLES,
    objects_per_frame: int = DEFAULT_OBJECTS_PER_FRAME,
    timings: bool = False,
) -> dict[str, int]:
    """Play ``frames`` frames of the game, print (to ``out``, default
    standard output) what the collector did each frame, and return the
    totals: ``spawned``, ``killed``, ``shots``, ``created`` (objects),
    ``freed``, ``expired`` (conjugates), ``nulled`` (references),
    ``collections`` (cycles), ``incremental`` (of them) and ``live`` (objects
    at the end).

    An incremental cycle starts every ``collect_every`` frames (later while
    the previous one is still running); each frame's GC work is bounded by
    ``objects_per_frame`` objects; the world's smoke chain has ``particles``
    particles. The output is the same for the same arguments on every run,
    unless ``timings`` adds measured times.
    """
    for what, value, low in (
        ("frames", frames, 1),
        ("collect_every", collect_every, 1),
        ("objects_per_frame", objects_per_frame, 1),
        ("particles", particles, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{what} must be an integer >= {low}, got {value!r}")
    with zs.Runtime() as rt:
        rt.gc.settings.objects_per_tick = objects_per_frame
        # Half a frame short of the interval, so that the sum of the ticks'
        # float seconds reaches it on the intended frame, never one later.
        rt.gc.settings.time_between_collections = (collect_every - 0.5) * FRAME_SECONDS
        game = _Game(rt, random.Random(seed), particles, timings)
        for frame in range(1, frames + 1):
            game.play(frame, len(str(frames)))
        game.finish(frames, objects_per_frame)
        game.summary(frames)
        cluster_size, burnt = game.cluster_size, game.burnt_per_frame

    header = [
        _fill(
            f"zsharp_py demo: {_count(frames, 'frame')} of a small shooter scripted in Python "
            f"over the native heap (seed {seed})."
        ),
        _fill(
            f"The rooted World holds the actors (a linked list), a chain of "
            f"{_count(particles, 'smoke particle')} (every frame the oldest "
            f"{burnt:,} burn out and as many new ones are emitted) "
            f"and the level, whose {TILES} tiles form one GC cluster of {cluster_size} objects. "
            f"Every frame {SPAWNS_PER_FRAME} actors spawn and each actor shoots its target: the "
            f"nearest other actor, kept until the collector nulls the reference (an actor "
            f"whose target was killed holds fire until then). The camera follows the oldest "
            f"actor; it is out of combat, outside the world, and only a StrongObjectPtr keeps "
            f"it alive."
        ),
        _fill(
            f"rt.gc.tick() runs once per frame and starts an incremental GC cycle "
            f"{_every(collect_every, 'frame')} (later while one is still running); each frame "
            f"it marks, expires and frees at most {_count(objects_per_frame, 'object')} "
            f"(GcSettings.objects_per_tick), so a cycle spans several frames and the output "
            f"is the same on every run" + (" except for the measured timings." if timings else ".")
        ),
    ]
    body = "\n".join(header + game.lines)
    used = [(term, meaning) for term, meaning in LEGEND if _uses(body, term)]
    width = max((len(term) for term, _ in used), default=0) + 2
    legend = (
        ["", "Legend:"]
        + [
            textwrap.fill(
                meaning,
                _WIDTH,
                initial_indent="  " + term.ljust(width),
                subsequent_indent=" " * (width + 2),
            )
            for term, meaning in used
        ]
        + [""]
    )
    stream = sys.stdout if out is None else out
    stream.write("\n".join(header + legend + game.lines) + "\n")
    return game.totals
