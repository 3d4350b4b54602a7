"""The demo: a small shooter on the sample engine whose ``Soldier`` is a
Python subclass of the engine's ``Actor``, narrating frame by frame what
the incremental garbage collector does. docs/getting-started.md, "The
demo", describes the game and what each frame shows.

The engine's classes are bound per runtime, so the classes that subclass
or reference them (``Battlefield``, ``Soldier``, ``Projectile``,
``Camera``) are declared for each game, after ``sample_engine.install()``
(``_declare``); the others are declared here once.
"""

from __future__ import annotations

import random
import re
import sys
import textwrap
from collections import deque
from dataclasses import dataclass
from typing import Any, TextIO

import zsharp_py as zs
from zsharp_py import sample_engine
from zsharp_py.collector import GcStats

__all__ = [
    "Particle",
    "Tile",
    "Level",
    "run_demo",
    "LEGEND",
    "DEFAULT_FRAMES",
    "DEFAULT_SEED",
    "DEFAULT_COLLECT_EVERY",
    "DEFAULT_OBJECTS_PER_FRAME",
    "DEFAULT_PARTICLES",
]


class Particle(zs.Object):
    """A smoke particle of the world's chain, or a spark of a shot."""

    life: zs.Float32
    next: "Particle | None"


class Tile(zs.Object, can_be_in_cluster=True):
    """Static level geometry: joins its level's cluster."""

    height: zs.Float32
    next: "Tile | None"


class Level(zs.Object, cluster_root=True):
    """Owns the tiles; the root of their cluster."""

    first_tile: Tile | None = None


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
        "ticked",
        "soldiers whose tick the engine called this frame: world.tick(dt), in C, calls "
        "every live actor's tick event, here the Soldier's Python override",
    ),
    (
        "shots",
        f"projectiles fired this frame, each with {SPARKS_PER_SHOT} sparks (Python-declared "
        "objects; a projectile references the soldier it hits and its sparks); nothing ever "
        "references a projectile, so it is freed at once when Python drops it (its sparks, "
        "which it referenced, wait for the GC)",
    ),
    (
        "killed",
        "soldiers shot down to 0 health this frame (the engine's take_damage, in C): the "
        "shooter calls world.destroy, and the engine calls the victim's Python on_destroy, "
        "then marks it as garbage",
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
        "Python proxies still held for unreachable objects (a soldier's is held while "
        "it lives, for its Python state), switched off before the native memory goes: "
        "using one raises ExpiredConjugateError",
    ),
    ("freed", "native objects destroyed"),
    (
        "freed at once",
        "objects Python made and dropped whose handle nothing else ever had (the "
        "projectiles): destroyed when their proxy went, as CPython frees by refcount, "
        "without waiting for the GC",
    ),
    (
        "references nulled",
        "references to destroyed (garbage-marked) soldiers that the collector set to "
        "None: soldiers' rivals, the camera's follows",
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
    """``1 soldier``, ``2 soldiers``, ``1,250 objects``."""
    return f"{n:,} {singular if n == 1 else (plural or singular + 's')}"


def _every(n: int, unit: str) -> str:
    """``every frame``, ``every 3 frames``."""
    return f"every {unit}" if n == 1 else f"every {n:,} {unit}s"


def _fill(text: str, indent: str = "") -> str:
    return textwrap.fill(text, _WIDTH, initial_indent=indent, subsequent_indent=indent)


def _series(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


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
    """A soldier the camera followed: a weak pointer to it, and its proxy,
    kept to check that it expires with the weak pointer."""

    name: str
    weak: zs.WeakObjectPtr[Any]
    proxy: Any


@dataclass
class _Fallen:
    """A destroyed soldier, as its on_destroy override filed it: its name,
    its kill log, and its proxy, kept to check that it expires."""

    name: str
    kills: tuple[str, ...]
    proxy: Any


def _declare(game: _Game) -> tuple[Any, Any, Any, Any]:
    """The classes that subclass or reference the engine's, declared for
    ``game``'s runtime (where the engine is installed): ``Battlefield``,
    ``Soldier``, ``Projectile`` and ``Camera``. Their annotations name
    ``Actor``, the engine's class in that runtime, through this function's
    locals."""
    World, Actor, Team, rng = game.World, game.Actor, game.Team, game.rng

    class Battlefield(World):  # type: ignore[misc,valid-type]
        """The engine's World (its actors, frame and clock, in C), with two
        references added in Python: the level and the smoke."""

        level: Level | None
        smoke: Particle | None
        """The newest smoke particle; the chain runs to the oldest."""

    class Projectile(zs.Object):
        """A shot: referenced by nobody, so freed as soon as Python drops it."""

        damage: zs.Int32
        target: Actor | None  # type: ignore[valid-type]
        """The engine's Actor, from a Python-declared class."""
        sparks: Particle | None

    class Camera(zs.Object):
        """Follows a soldier; outside the world, kept by a StrongObjectPtr."""

        follows: Actor | None  # type: ignore[valid-type]
        """Strong and killable: the collector sets it to None once its
        soldier is destroyed."""

    class Soldier(Actor):  # type: ignore[misc,valid-type]
        """A combatant: the engine's Actor (health, transform, speed, in C),
        with game logic in Python. The engine calls its overrides from C."""

        rival: Actor | None  # type: ignore[valid-type]
        """Added in Python to the engine's class: strong and killable."""
        kill_log: list[str] = zs.state(factory=list)
        """Python state: the names of the soldiers it killed, kept exactly
        as long as the native soldier lives."""
        born: int = zs.state(default=0)
        """Python state: the frame it was spawned in."""

        def begin_play(self) -> None:
            """Called by the engine's ``world.spawn``, from C: choose a team
            by the side the engine placed the soldier on, a speed towards
            the other side and a maximum health, then come alive."""
            red = self.transform.location.x < 0
            self.team = Team.Red if red else Team.Blue
            self.speed = rng.uniform(20.0, 40.0) * (1 if red else -1)
            self.max_health = rng.randint(60, 120)
            super().begin_play()  # the engine's default, in C: alive at full health
            self.born = game.frame
            game.overrides["begin_play"] += 1

        def tick(self, dt: float) -> None:
            """Called by the engine's ``world.tick``, from C, every frame."""
            super().tick(dt)  # the engine's default, in C: count the tick, move along x
            game.overrides["tick"] += 1
            rival = self.rival
            if rival is None:  # never aimed yet, or nulled by the collector
                rival = self.rival = self.nearest_enemy()
            if rival is None or rival.is_garbage:
                return  # holds fire: its reference to a destroyed rival waits for the GC
            self.fire_at(rival)

        def on_destroy(self) -> None:
            """Called by the engine's ``world.destroy``, from C, before it
            marks this soldier as garbage."""
            game.overrides["on_destroy"] += 1
            game.fallen.append(_Fallen(self.name, tuple(self.kill_log), self))

        def nearest_enemy(self) -> Any:
            """The nearest living soldier of the other team (the first of
            equals), among the world's actors (the engine's array)."""
            here = self.transform.location
            best, best_distance = None, 0.0
            for other in self.world.actors:
                if other.team == self.team or not other.alive:
                    continue
                there = other.transform.location
                distance = (there.x - here.x) ** 2 + (there.y - here.y) ** 2
                if best is None or distance < best_distance:
                    best, best_distance = other, distance
            return best

        def fire_at(self, rival: Any) -> None:
            """Shoot: a projectile and its sparks, the damage dealt by the
            engine; a rival left at 0 health is destroyed."""
            sparks = None
            for _ in range(SPARKS_PER_SHOT):
                sparks = Particle(life=rng.random(), next=sparks)
            shot = Projectile(target=rival, damage=rng.randint(10, 60), sparks=sparks)
            game.frame_shots += 1
            if rival.take_damage(float(shot.damage), self) == 0:  # the engine's, in C
                self.kill_log.append(rival.name)
                game.on_kill(self, rival)
                self.world.destroy(rival)  # the engine calls rival.on_destroy, from C

    return Battlefield, Soldier, Projectile, Camera


class _Game:
    """The game's state and its narration (``lines``), in one runtime where
    the sample engine is installed."""

    def __init__(
        self,
        rt: zs.Runtime,
        rng: random.Random,
        particles: int,
        timings: bool,
    ) -> None:
        self.rt, self.rng, self.timings = rt, rng, timings
        self.lines: list[str] = []
        self.totals = {
            "spawned": 0,
            "ticked": 0,
            "killed": 0,
            "shots": 0,
            "begin_play": 0,
            "tick": 0,
            "on_destroy": 0,
            "created": 0,
            "freed": 0,
            "freed_at_once": 0,
            "expired": 0,
            "nulled": 0,
            "collections": 0,
            "incremental": 0,
            "live": 0,
        }
        # The engine's classes, bound in this runtime (Any: their members are
        # the engine's, which no type checker sees).
        self.World: Any = zs.native_class("World")
        self.Actor: Any = zs.native_class("Actor")
        self.Transform: Any = zs.native_struct("Transform")
        self.Vec3: Any = zs.native_struct("Vec3")
        self.Team: Any = zs.native_enum("Team")
        self.Battlefield, self.Soldier, self.Projectile, self.Camera = _declare(self)
        self.overrides = {"begin_play": 0, "tick": 0, "on_destroy": 0}

        self.world = self.Battlefield(name="World")
        self.world.add_to_root()
        level = Level(name="Level", outer=self.world)
        for index in range(TILES):
            level.first_tile = Tile(outer=level, height=index * 0.5, next=level.first_tile)
        self.world.level = level
        self.cluster_size = level.create_cluster()
        # The smoke chain, oldest particle first: the oldest burn out each frame.
        self.particles: deque[Particle] = deque()
        for _ in range(particles):
            self.world.smoke = Particle(life=rng.random(), next=self.world.smoke)
            self.particles.append(self.world.smoke)
        self.burnt_per_frame = -(-particles // SMOKE_LIFE_FRAMES)
        self.camera = self.Camera(name="Camera")  # outside the world: only camera_ptr keeps it
        self.camera_ptr = zs.StrongObjectPtr(self.camera)
        self.totals["created"] = 1 + 1 + TILES + particles + 1
        self.kills: dict[str, int] = {}  # by killer, dead or alive, in order of first kill
        self.fallen: list[_Fallen] = []  # the destroyed soldiers (on_destroy)
        self.first_kill_told = False
        self.followed: _Followed | None = None
        self.watched: list[_Followed] = []
        self.cycle_start: dict[int, int] = {}
        self.finished: GcStats | None = None  # the cycle this frame's tick finished
        self.frame = self.frame_shots = self.frame_kills = 0
        self.events: list[str] = []
        self.cycle_ends: list[int] = []  # the frame each cycle finished in

    # ---- called by the overrides ---------------------------------------------
    def on_kill(self, killer: Any, victim: Any) -> None:
        """Called by a soldier's tick when its shot left ``victim`` at 0
        health, before it destroys the victim."""
        self.frame_kills += 1
        self.kills[killer.name] = self.kills.get(killer.name, 0) + 1
        if not self.first_kill_told:
            self.first_kill_told = True
            self.events.append(
                f"{killer.name} shot {victim.name} down: the engine's take_damage (C) left it "
                f"{victim.health} health and alive={victim.alive}; {killer.name}'s tick "
                f"(Python) called world.destroy, and the engine (C) called {victim.name}'s "
                f"on_destroy (Python), then marked it as garbage"
            )
        if self.followed is not None and victim == self.followed.proxy:
            self.events.append(
                f"the camera's soldier {victim.name} was killed by {killer.name}: "
                f"camera.follows points at it until the GC nulls it"
            )

    # ---- narration --------------------------------------------------------
    def say(self, text: str, indent: str = "") -> None:
        self.lines.append(_fill(text, indent))

    def count_cycle(self, stats: GcStats) -> None:
        self.totals["collections"] += 1
        self.totals["freed"] += stats.objects_freed
        self.totals["freed_at_once"] += stats.objects_freed_unshared
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
        """Forget the followed soldiers whose weak pointer now reads None
        (their proxy is expired too); return their names."""
        gone = [watch for watch in self.watched if watch.weak.get() is None]
        for watch in gone:
            assert watch.proxy.is_expired, f"{watch.name}: a weak pointer outlived its proxy"
            self.watched.remove(watch)
        return [watch.name for watch in gone]

    # ---- a frame ----------------------------------------------------------
    def spawn(self) -> list[Any]:
        """Spawn this frame's soldiers through the engine, each as a
        reinforcement of the smaller team: on the left for Red, on the
        right for Blue (alternately when the teams are even)."""
        rng, spawned = self.rng, []
        red = sum(soldier.team == self.Team.Red for soldier in self.world.actors)
        blue = len(self.world.actors) - red
        for _ in range(SPAWNS_PER_FRAME):
            left = red < blue or (red == blue and self.totals["spawned"] % 2 == 0)
            red, blue = red + left, blue + (not left)
            x = rng.uniform(-50.0, -10.0) if left else rng.uniform(10.0, 50.0)
            at = self.Transform(self.Vec3(x, rng.uniform(-50.0, 50.0), 0.0), 0.0, 1.0)
            soldier = self.world.spawn(self.Soldier, at)  # calls begin_play
            assert type(soldier) is self.Soldier and soldier.alive, soldier
            spawned.append(soldier)
            self.totals["spawned"] += 1
        self.totals["created"] += SPAWNS_PER_FRAME
        return spawned

    def follow_the_weakest(self) -> None:
        """Point the camera at the living soldier with the least health
        (the first of equals, in the World's order: the oldest)."""
        subject = min(self.world.actors, key=lambda soldier: soldier.health, default=None)
        if subject is None:
            return
        self.camera.follows = subject
        self.followed = _Followed(subject.name, zs.WeakObjectPtr(subject), subject)
        self.watched.append(self.followed)
        self.events.append(
            f"the camera now follows {subject.name} ({subject.health} health), the weakest soldier"
        )

    def play(self, frame: int, frame_width: int) -> None:
        """Play one frame, tick the collector, narrate both."""
        totals, camera = self.totals, self.camera
        self.events = []
        self.frame, self.frame_shots, self.frame_kills = frame, 0, 0
        spawned = self.spawn()
        if frame == 1:
            self.events.append(
                "the engine's world.spawn (C) called each new soldier's begin_play (Python), "
                "which chose its team and health and called super().begin_play() (C): "
                + _series(
                    [f"{s.name} ({self.Team(s.team).name}, {s.health} health)" for s in spawned]
                )
            )
        if self.particles:
            for _ in range(self.burnt_per_frame):
                self.particles.popleft()
                self.world.smoke = Particle(life=self.rng.random(), next=self.world.smoke)
                self.particles.append(self.world.smoke)
            self.particles[0].next = None  # the burnt-out tail is unreachable from here on
            totals["created"] += self.burnt_per_frame

        ticked = self.world.tick(FRAME_SECONDS)  # calls every soldier's tick
        if camera.follows is None:
            self.follow_the_weakest()
        totals["ticked"] += ticked
        totals["shots"] += self.frame_shots
        totals["created"] += self.frame_shots * (1 + SPARKS_PER_SHOT)
        totals["killed"] += self.frame_kills

        gc = self.tick(frame)
        if self.followed is not None and camera.follows is None:
            self.events.append(
                f"the GC nulled camera.follows: {self.followed.name} is marked as garbage"
            )
            self.followed = None
        for name in self.gone():
            self.events.append(
                f"the WeakObjectPtr to {name} now returns None: the GC found it "
                f"unreachable and expired its proxy; this cycle's purge frees it"
            )
        alive = len(self.world.actors)
        self.lines.append(
            f"frame {frame:>{frame_width}}: {_count(ticked, 'soldier')} ticked, "
            f"{_count(self.frame_shots, 'shot')}, {self.frame_kills} killed, {alive:,} alive; {gc}"
        )
        for event in self.events:
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
            self.cycle_ends.append(frame)
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
            self.cycle_ends.append(frames + 1)
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
            self.tell_unfollowed("That cycle")
            for name in self.gone():
                self.say(
                    f"The WeakObjectPtr to {name} now returns None: that cycle freed it.", "  "
                )
        stats = rt.collect_garbage()
        gc.verify()
        self.cycle_ends.append(frames + 1)
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
        self.tell_unfollowed("The final collection")
        for name in self.gone():
            self.say(
                f"The WeakObjectPtr to {name} now returns None: the final collection freed it.",
                "  ",
            )
        self.tell_state()

        camera = self.camera
        follows = camera.follows
        self.say(
            f"The camera (following {'nobody' if follows is None else follows.name}) is alive "
            f"although no object references it: its StrongObjectPtr is a root.",
            "  ",
        )
        self.camera_ptr.dispose()
        stats = rt.collect_garbage()
        gc.verify()
        try:
            camera.follows  # noqa: B018 (the read is the use after free shown)
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
        self.totals.update(self.overrides)

    def tell_unfollowed(self, collection: str) -> None:
        """Say so if ``collection`` nulled camera.follows."""
        if self.followed is not None and self.camera.follows is None:
            self.say(
                f"{collection} nulled camera.follows: {self.followed.name} is marked as garbage.",
                "  ",
            )
            self.followed = None

    def tell_state(self) -> None:
        """What the soldiers' Python state shows once every destroyed soldier
        is freed: a living one's kill log, a fallen one's gone with it."""
        fallen, living = self.fallen, list(self.world.actors)
        if not all(soldier.proxy.is_expired for soldier in fallen):
            raise AssertionError("a destroyed soldier outlived the final collection")
        if fallen:
            self.say(
                f"All {_count(len(fallen), 'soldier')} destroyed in play "
                f"{'is' if len(fallen) == 1 else 'are'} freed, their proxies expired: the "
                f"conjugate table held each while it lived, for its Python state "
                f"(zs.state()), and let it go with the native soldier.",
                "  ",
            )
            ace = max(fallen, key=lambda soldier: len(soldier.kills))
            try:
                ace.proxy.kill_log  # noqa: B018 (the read is the use after free shown)
            except zs.ExpiredConjugateError:
                pass
            else:
                raise AssertionError("a freed soldier's Python state is still readable")
            kills = f" ({', '.join(ace.kills)})" if ace.kills else ""
            self.say(
                f"{ace.name} fell after {_count(len(ace.kills), 'kill')}{kills}, as its "
                f"on_destroy filed it; its kill log went with it: reading it now raises "
                f"ExpiredConjugateError.",
                "  ",
            )
        best = max(living, key=lambda soldier: len(soldier.kill_log), default=None)
        if best is not None and best.kill_log:
            cycles = sum(end >= best.born for end in self.cycle_ends)
            self.say(
                f"{best.name}, the best scorer still standing (spawned in frame {best.born}), "
                f"still has its kill log, Python state on the native soldier, after "
                f"{_count(cycles, 'GC cycle')} in which no Python root kept it (the World's "
                f"native array of actors did): {', '.join(best.kill_log)}.",
                "  ",
            )

    def summary(self, frames: int) -> None:
        """The closing ``label: value`` lines."""
        totals = self.totals
        top = max(self.kills, key=lambda name: self.kills[name], default=None)
        summary = [
            ("frames played", f"{frames:,}"),
            ("soldiers spawned", f"{totals['spawned']:,}"),
            ("soldiers killed", f"{totals['killed']:,}"),
            ("soldiers alive at the end", f"{totals['spawned'] - totals['killed']:,}"),
            ("shots fired", f"{totals['shots']:,}"),
            (
                "top scorer",
                "nobody" if top is None else f"{top}, {_count(self.kills[top], 'kill')}",
            ),
            (
                "Python overrides run from C",
                f"begin_play {totals['begin_play']:,}, tick {totals['tick']:,}, "
                f"on_destroy {totals['on_destroy']:,}",
            ),
            (
                "GC cycles",
                f"{totals['collections']:,} ({totals['incremental']:,} incremental, "
                f"{totals['collections'] - totals['incremental']:,} full)",
            ),
            ("objects created", f"{totals['created']:,}"),
            ("objects freed by the GC", f"{totals['freed']:,}"),
            ("objects freed at once", f"{totals['freed_at_once']:,}"),
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
    totals: ``spawned``, ``ticked`` (soldiers the engine ticked, summed
    over the frames), ``killed``, ``shots``; ``begin_play``, ``tick`` and
    ``on_destroy`` (how many times the engine ran each Python override);
    ``created`` (objects), ``freed`` (by the collector), ``freed_at_once``
    (when their only proxy went), ``expired`` (conjugates), ``nulled``
    (references), ``collections`` (cycles), ``incremental`` (of them) and
    ``live`` (objects at the end).

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
        sample_engine.install(rt)
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
            f"zsharp_py demo: {_count(frames, 'frame')} of a small shooter on the sample "
            f"engine, a game engine written in C, with its game logic written in Python "
            f"(seed {seed})."
        ),
        _fill(
            "The engine, in C (native/engine/sample_engine.c): a World spawns actors "
            "(world.spawn), ticks them (world.tick(dt)) and destroys them (world.destroy). "
            "An Actor has native health, a position and a speed, native functions such as "
            "take_damage, and three events that the engine calls from C: begin_play, tick "
            "and on_destroy (the first two have C defaults)."
        ),
        _fill(
            "The game, in Python: Soldier is a Python subclass of the engine's Actor that "
            "overrides the three events, and the engine calls the overrides from C. "
            "begin_play picks the soldier's team (Red soldiers spawn on the left, Blue ones "
            "on the right), speed and health, then calls super().begin_play(), the C default "
            "(alive at full health). tick calls super().tick(dt), the C movement, then aims "
            "at the nearest enemy and shoots, the engine's take_damage dealing the damage; a "
            "soldier shot down is destroyed with world.destroy, which calls its on_destroy "
            "and marks it as garbage. Every frame the game spawns "
            f"{SPAWNS_PER_FRAME} soldiers, calls world.tick(dt) once and ticks the collector "
            "once."
        ),
        _fill(
            "A soldier also has what Python added to the engine's class: its rival, a strong "
            "reference that the collector nulls once the rival is destroyed (until then the "
            "soldier holds fire), and its kill log, Python state (zs.state()) kept exactly as "
            "long as the native soldier lives."
        ),
        _fill(
            f"Python-declared classes share the heap with the engine's. The rooted World is a "
            f"Battlefield, a Python subclass of the engine's World that references the level, "
            f"whose {TILES} tiles form one GC cluster of {cluster_size} objects, and a chain "
            f"of {_count(particles, 'smoke particle')} (every frame the oldest {burnt:,} burn "
            f"out and as many new ones are emitted). Each shot is a projectile with its sparks. "
            f"The camera, outside the world, follows the weakest soldier; only a "
            f"StrongObjectPtr keeps it alive."
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
