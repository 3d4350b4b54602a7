"""Frame loop: a game on the sample engine, frame after frame, as a player
sees it. What a frame costs at the median, at the 99th percentile and at
worst, how much of it the collector takes, and whether memory stays flat.

The game (``_Game``): a world of 100,000 objects (``Debris``, in rooted
``Field`` arrays), 1,000 actors whose Python ``tick`` override the tick
manager calls from C every frame, 1,000 objects spawned and 1,000 dropped
per frame (the dropped ones become garbage for the collector), a few
actors damaged per frame (``take_damage`` broadcasts its ``on_damaged``
event natively to two Python listeners each), and the collector driven by
``rt.gc.tick`` with a 1 ms budget per frame. Each frame is timed whole,
and its collector step on its own.

There is no peer here: the figures are checked against the frame's own
median (the issue's target: p99 at most the median plus the collector's
budget plus 20%) and against the start of the run (RSS flat within 5% from
frame 500 to the end). The plot (``frames.png``) draws every frame's time
and the collector's part of it, so a pause shows as a spike.
"""

from __future__ import annotations

import gc
import itertools
import os
import random
import resource
import statistics
import time
from pathlib import Path
from typing import Any

import zsharp_py as zs
from zsharp_py import sample_engine

from ._harness import Config, Table, percentile, progress, record
from ._plot import pyplot_or_reason

NAME = "frames"
TITLE = "Frame loop"

__all__ = ["NAME", "TITLE", "PLOT_NAME", "run", "write_frame_plot"]

PLOT_NAME = "frames.png"
BUDGET_S = 0.001  # the collector's budget per frame
DT = 1 / 60
FIELD_SIZE = 10_000  # Debris per Field
DAMAGED_PER_FRAME = 10
RSS_FROM_FRAME = 500


class Debris(zs.Object):
    """The world's filler: an object with a reference (so marking follows it)."""

    heat: zs.Float32
    near: Debris | None


class Field(zs.Object):
    """A rooted holder of ``FIELD_SIZE`` Debris."""

    pieces: zs.Array[Debris]


def _rss_bytes() -> int:
    """The process's resident set now (``/proc/self/statm``; the peak from
    ``getrusage`` where there is no /proc)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _Game:
    """The game's world, actors and per-frame work."""

    def __init__(self, runtime: zs.Runtime, objects: int, actors: int, churn: int) -> None:
        sample_engine.install(runtime)
        world_class = zs.native_class("World", runtime=runtime)
        actor_class = zs.native_class("Actor", runtime=runtime)
        transform = zs.native_struct("Transform", runtime=runtime)
        self.runtime = runtime
        self.churn = churn
        self.ticked = 0
        self.heard = 0
        game = self

        class Guard(actor_class):  # type: ignore[misc, valid-type]
            """An actor whose tick is a Python override."""

            def tick(self, dt: float) -> None:
                game.ticked += 1
                self.speed = self.speed * 0.5 + dt

        self.world = world_class()
        self.world.add_to_root()
        self.fields = []
        for _ in range(max(1, objects // FIELD_SIZE)):
            field = Field()
            field.add_to_root()
            pieces = [Debris(heat=1.0) for _ in range(min(FIELD_SIZE, objects))]
            for a, b in itertools.pairwise(pieces):
                a.near = b
            field.pieces = pieces
            self.fields.append(field)
        self.actors = [self.world.spawn(Guard, transform()) for _ in range(actors)]
        for actor in self.actors:
            runtime.ticks.register(actor)
            actor.on_damaged.add(self._heard)
            actor.on_damaged.add(lambda a, amount, instigator: None)
        self.random = random.Random(7)

    def _heard(self, actor: Any, amount: float, instigator: Any) -> None:
        self.heard += 1

    def frame(self) -> None:
        """One frame's game work (the collector apart)."""
        # Spawn and drop: `churn` new Debris replace as many in one field.
        field = self.fields[self.random.randrange(len(self.fields))]
        at = self.random.randrange(len(field.pieces) - self.churn + 1)
        field.pieces[at : at + self.churn] = [Debris(heat=2.0) for _ in range(self.churn)]
        self.runtime.ticks.frame(DT)
        for _ in range(DAMAGED_PER_FRAME):
            victim = self.actors[self.random.randrange(len(self.actors))]
            victim.health = 100
            victim.take_damage(1.0, None)


def _play(config: Config) -> dict[str, Any]:
    """Run the game; every frame's times and the RSS samples."""
    quick = config.quick
    frames = 60 if quick else 2_000
    objects = 5_000 if quick else 100_000
    actors = 100 if quick else 1_000
    churn = 50 if quick else 1_000
    gc.collect()
    gc.disable()  # Python's own collector is not the one measured
    try:
        with zs.Runtime() as runtime:
            game = _Game(runtime, objects, actors, churn)
            settings = runtime.gc.settings
            settings.reachability_budget = BUDGET_S
            settings.purge_budget = BUDGET_S
            settings.time_between_collections = 0.0
            runtime.collect_garbage()
            rss_start = _rss_bytes()
            rss_at = rss_start
            totals: list[float] = []
            collector: list[float] = []
            cpu_totals: list[float] = []
            cpu_collector: list[float] = []
            wall, cpu = time.perf_counter, time.thread_time
            for index in range(frames):
                start, start_cpu = wall(), cpu()
                game.frame()
                mid, mid_cpu = wall(), cpu()
                runtime.gc.tick(DT)
                end, end_cpu = wall(), cpu()
                totals.append(end - start)
                collector.append(end - mid)
                cpu_totals.append(end_cpu - start_cpu)
                cpu_collector.append(end_cpu - mid_cpu)
                if index == min(RSS_FROM_FRAME, frames // 4):
                    rss_at = _rss_bytes()
            rss_end = _rss_bytes()
            live = runtime.live_objects()
            failures = []
            if game.ticked != frames * actors:
                failures.append(f"frames: {game.ticked:,} ticks, not {frames * actors:,}")
            if game.heard != frames * DAMAGED_PER_FRAME:
                failures.append(
                    f"frames: {game.heard:,} broadcasts heard, not {frames * DAMAGED_PER_FRAME:,}"
                )
    finally:
        gc.enable()
    return {
        "frames": frames,
        "objects": objects,
        "actors": actors,
        "churn": churn,
        "live": live,
        "totals": totals,
        "collector": collector,
        "cpu_totals": cpu_totals,
        "cpu_collector": cpu_collector,
        "rss": (rss_start, rss_at, rss_end),
        "failures": failures,
    }


LAST: list[dict[str, Any]] = []  # the last run's result, for the plot


def write_frame_plot(config: Config, path: Path) -> str:
    """Draw the last run's frame times into ``path`` (matplotlib, the
    benchmark-only dependency full runs install); a line for the report."""
    if not LAST:
        return ""
    result = LAST[-1]
    pyplot, missing = pyplot_or_reason(config)
    if pyplot is None:
        return f"Frame plot not drawn: {missing}"
    totals = [t * 1e3 for t in result["totals"]]
    collector = [t * 1e3 for t in result["collector"]]
    frames = range(len(totals))
    median = statistics.median(totals)
    line = (median + BUDGET_S * 1e3) * 1.2  # the p99 target, on wall time here
    figure, axes = pyplot.subplots(figsize=(12, 4.5))
    cpu = [t * 1e3 for t in result["cpu_totals"]]
    axes.plot(frames, totals, color="tab:blue", linewidth=0.7, label="frame time (wall)")
    axes.plot(frames, cpu, color="black", linewidth=0.5, alpha=0.6, label="frame time (CPU)")
    axes.fill_between(frames, collector, color="tab:orange", alpha=0.7, label="collector (wall)")
    axes.axhline(median, color="gray", linestyle=":", label=f"median {median:.2f} ms")
    axes.axhline(line, color="tab:red", linestyle="--", label=f"p99 target {line:.2f} ms")
    axes.set_xlabel("frame")
    axes.set_ylabel("ms")
    axes.set_ylim(0, max(max(totals) * 1.05, line * 1.3))
    axes.set_title(
        f"{result['frames']:,} frames: {result['objects']:,} objects, "
        f"{result['actors']:,} ticked actors, {result['churn']:,} spawned and dropped per frame, "
        f"{BUDGET_S * 1e3:g} ms collector budget"
    )
    axes.legend(loc="upper right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
    return f"![Frame time per frame]({path.name})"


def _figures(values: list[float]) -> tuple[float, float, float]:
    """Median, p99 and max of ``values``."""
    ordered = sorted(values)
    return statistics.median(ordered), percentile(ordered, 99), ordered[-1]


def run(config: Config) -> list[Table]:
    progress(config, "frames: playing the game")
    result = _play(config)
    LAST[:] = [result]
    median, p99, worst = _figures(result["totals"])
    gc_median, gc_p99, gc_worst = _figures(result["collector"])
    cpu_median, cpu_p99, cpu_worst = _figures(result["cpu_totals"])
    cpu_gc_median, cpu_gc_p99, cpu_gc_worst = _figures(result["cpu_collector"])
    share = sum(result["collector"]) / sum(result["totals"])
    rss_start, rss_at, rss_end = result["rss"]
    growth = (rss_end - rss_at) / rss_at
    record("frames.median", median)
    record("frames.p99", p99)
    record("frames.p99_limit", (median + BUDGET_S) * 1.2)
    record("frames.cpu_median", cpu_median)
    record("frames.cpu_p99", cpu_p99)
    record("frames.cpu_p99_limit", (cpu_median + BUDGET_S) * 1.2)
    record("frames.rss_growth", abs(growth))
    table = Table(
        f"Frame loop ({result['frames']:,} frames of {DT * 1e3:.1f} ms game time; "
        f"{result['objects']:,} objects, {result['actors']:,} actors ticked by the tick manager, "
        f"{result['churn']:,} spawned and dropped per frame, {DAMAGED_PER_FRAME} native "
        f"broadcasts to 2 Python listeners each, collector budget {BUDGET_S * 1e3:g} ms)",
        ["figure", "median", "p99", "max"],
        description=(
            "Wall time is what a player sees; CPU time (the thread's) leaves out the time "
            "other processes took the core, so on a shared machine it is the one that "
            "shows the library's own pauses."
        ),
    )

    def ms(values: tuple[float, float, float]) -> list[str]:
        return [f"{v * 1e3:.3f} ms" for v in values]

    table.add("frame time (wall)", *ms((median, p99, worst)))
    table.add("frame time (CPU)", *ms((cpu_median, cpu_p99, cpu_worst)))
    table.add("collector (wall)", *ms((gc_median, gc_p99, gc_worst)))
    table.add("collector (CPU)", *ms((cpu_gc_median, cpu_gc_p99, cpu_gc_worst)))
    table.add("collector's share of frame time (wall)", f"{share:.1%}", "-", "-")
    mid = min(RSS_FROM_FRAME, result["frames"] // 4)
    table.add(
        f"RSS: start, frame {mid}, end",
        f"{rss_start / 2**20:.1f} MiB",
        f"{rss_at / 2**20:.1f} MiB",
        f"{rss_end / 2**20:.1f} MiB ({growth:+.1%} since frame {mid})",
    )
    table.add("live objects at the end", f"{result['live']:,}", "-", "-")
    table.failures += result["failures"]
    return [table]
