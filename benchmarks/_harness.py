"""Common harness of the benchmark families: configuration, timing, statistics,
result tables and the machine description.

Every benchmark module exposes ``run(config) -> list[Table]``. Ratios are
always computed from figures measured in the same process and the same run,
so machine speed and frequency drift cancel out as far as possible; micro
benchmarks interleave their cases round by round for the same reason.
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import itertools
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import timeit
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Config",
    "Stats",
    "Table",
    "MicroCase",
    "Unavailable",
    "summarize",
    "percentile",
    "METRICS",
    "NOTES",
    "SERIES",
    "record",
    "ROUNDS",
    "paired_ratio",
    "figure_ratio",
    "result_ratio",
    "time_rounds",
    "run_micro",
    "calibrate",
    "gc_paused",
    "host_gc_isolated",
    "machine_info",
    "progress",
    "fmt_ratio",
    "fmt_result_ratio",
    "fmt_ns",
    "fmt_ms",
    "load_average",
]

clock = time.perf_counter


# ---------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """How hard to measure. ``quick`` is the CI smoke run: tiny sizes, few
    rounds; its numbers are only a check that everything runs."""

    quick: bool = False
    verbose: bool = True
    allow_install: bool = True
    """Full runs may pip/apt-install benchmark-only peers (``--no-install``
    turns it off); quick runs never install nor compile C++ peers."""

    @property
    def install(self) -> bool:
        """Whether missing peers may be installed and C++ peers compiled."""
        return self.allow_install and not self.quick

    # bindings: every case runs ``micro_rounds`` batches of
    # ``micro_number`` operations (1e6 operations per case in a full run).
    @property
    def micro_number(self) -> int:
        return 1_000 if self.quick else 10_000

    @property
    def micro_rounds(self) -> int:
        return 10 if self.quick else 100

    # values: every case runs ``value_rounds`` batches, each calibrated to
    # take about ``value_batch_seconds`` (the peers are up to 1,000x apart,
    # so a fixed operation count would not do).
    @property
    def value_rounds(self) -> int:
        return 3 if self.quick else 30

    @property
    def value_batch_seconds(self) -> float:
        return 0.002 if self.quick else 0.03

    # gc_collect
    @property
    def heap_sizes(self) -> tuple[int, ...]:
        return (10_000,) if self.quick else (10_000, 100_000, 1_000_000)

    def collect_rounds(self, objects: int) -> int:
        """Timed full collections per heap (after one untimed warm-up)."""
        if self.quick:
            return 3
        return 5 if objects >= 1_000_000 else 9

    # gc_peers: natively built heaps, Boehm, CPython and the memory floors
    @property
    def peer_heap_sizes(self) -> tuple[int, ...]:
        return (10_000,) if self.quick else (10_000, 100_000, 1_000_000, 4_000_000)

    def peer_rounds(self, objects: int) -> int:
        """Timed full collections per native heap (after one warm-up)."""
        if self.quick:
            return 3
        return (
            3
            if objects >= 4_000_000
            else 5
            if objects >= 1_000_000
            else 9
            if objects >= 100_000
            else 15
        )

    def peer_passes(self, objects: int) -> int:
        """Times every GC program runs anew per heap size (interleaved passes)."""
        if self.quick:
            return 1
        return 1 if objects >= 4_000_000 else 2

    @property
    def incremental_heap(self) -> int:
        """The heap whose incremental steps are timed (1M objects; 10,000 in a quick run)."""
        return 10_000 if self.quick else 1_000_000

    @property
    def cluster_heap(self) -> int:
        return 10_048 if self.quick else 1_000_000

    # expiry: conjugates expired by one collection
    @property
    def expiry_sizes(self) -> tuple[int, ...]:
        return (1_000, 10_000) if self.quick else (1_000, 100_000, 1_000_000)

    def expiry_rounds(self, conjugates: int) -> int:
        if self.quick:
            return 2
        return 1 if conjugates >= 1_000_000 else 3 if conjugates >= 100_000 else 9


class Unavailable(Exception):
    """A peer cannot be measured here (missing module, compiler, library)."""


# ---------------------------------------------------------------------------
# Figures shared across families (the Targets table, the scaling plot)
# ---------------------------------------------------------------------------

METRICS: dict[str, float] = {}
"""Headline figures recorded by the families (``record``), read by the
Targets table. Keys are ``family.figure``; values in seconds, bytes or ratios."""

NOTES: dict[str, str] = {}
"""Why a headline figure is missing (a peer unavailable), by metric key."""

SERIES: dict[str, list[tuple[int, float]]] = {}
"""Scaling curves for the plot: label -> [(objects, seconds per collection)]."""


ROUNDS: dict[str, tuple[int, tuple[float, ...]]] = {}
"""The per-round figures behind a headline figure that ``run_micro`` measured:
(the run, the figure of each round in round order). Two figures of one run
are compared round by round (``paired_ratio``)."""


def record(
    key: str,
    value: float | None,
    why_missing: str = "",
    rounds: tuple[int, tuple[float, ...]] | None = None,
) -> None:
    """Record one headline figure (or why it is missing), and the per-round
    figures it is the median of when ``run_micro`` measured it."""
    if value is None or math.isnan(value):
        if why_missing:
            NOTES[key] = why_missing
        return
    METRICS[key] = value
    if rounds is not None:
        ROUNDS[key] = rounds


def paired_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> float:
    """The median of the round-by-round ratios of two cases measured in the
    same rounds: each round runs one batch of every case, so a change of the
    machine's speed between rounds (which moves both) cancels out, where the
    ratio of two medians taken apart can pair a fast round of one case with
    a slow round of the other. Rounds whose denominator is not above zero
    (net of the empty loop, a very fast case can be) are left out; NaN when
    fewer than half are left."""
    pairs = [n / d for n, d in zip(numerators, denominators, strict=True) if d > 0]
    if not pairs or 2 * len(pairs) < len(numerators):
        return math.nan
    return statistics.median(pairs)


# ---------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between ranks."""
    if not sorted_values:
        return math.nan
    if len(sorted_values) == 1:
        return sorted_values[0]
    position = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] * (1 - fraction) + sorted_values[high] * fraction


@dataclass(frozen=True)
class Stats:
    """Summary of repeated measurements (same unit as the samples)."""

    n: int
    median: float
    p50: float
    p99: float
    max: float
    min: float
    mean: float

    def scaled(self, factor: float) -> Stats:
        """Every figure multiplied by ``factor`` (unit change, per-item)."""
        return Stats(
            self.n,
            self.median * factor,
            self.p50 * factor,
            self.p99 * factor,
            self.max * factor,
            self.min * factor,
            self.mean * factor,
        )

    def minus(self, offset: float) -> Stats:
        """Every figure minus ``offset`` (loop overhead), floored at zero."""
        return Stats(
            self.n,
            *(
                max(v - offset, 0.0)
                for v in (self.median, self.p50, self.p99, self.max, self.min, self.mean)
            ),
        )


def summarize(samples: Sequence[float]) -> Stats:
    """Median, p50, p99, max, min and mean of ``samples``."""
    ordered = sorted(samples)
    return Stats(
        len(ordered),
        statistics.median(ordered),
        percentile(ordered, 50),
        percentile(ordered, 99),
        ordered[-1],
        ordered[0],
        statistics.fmean(ordered),
    )


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Keep CPython's cyclic collector from running inside a timed region
    (as ``timeit`` does); restores the previous state."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def host_gc_isolated() -> Iterator[None]:
    """Move every object that exists now into CPython's permanent generation
    (``gc.freeze()``), so a ``gc.collect()`` inside the block only traverses
    what the block creates; undone on exit."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def time_rounds(
    function: Callable[[], Any], rounds: int, warmup: int = 1
) -> tuple[Stats, list[Any]]:
    """Call ``function`` ``warmup`` times untimed, then ``rounds`` times timed
    (CPython's collector paused). Returns the seconds per call and the
    return values of the timed calls."""
    results: list[Any] = []
    samples: list[float] = []
    with gc_paused():
        for _ in range(warmup):
            function()
        for _ in range(rounds):
            start = clock()
            result = function()
            samples.append(clock() - start)
            results.append(result)
    return summarize(samples), results


@dataclass
class MicroCase:
    """One statement timed in a ``timeit`` loop.

    ``group`` gathers cases that are compared with each other (e.g. "read");
    the case with ``baseline=True`` in a group is the denominator of that
    group's ratios. ``peer`` names who provides it (for the tables).
    """

    label: str
    group: str
    stmt: str
    namespace: dict[str, Any]
    peer: str = ""
    baseline: bool = False
    note: str = ""
    primary: bool = True
    """The peer's main case for its group (the one in the side-by-side table)."""
    scale: float = 1.0
    """Operations per batch relative to the configuration's (slow statements
    such as iterating 1,000 elements use fewer)."""
    after_batch: Callable[[], Any] | None = None
    """Run after every batch (e.g. collect the objects a batch created)."""
    after_batch_timed: bool = False
    """Whether ``after_batch`` is part of the batch's time (amortised)."""
    items: int = 1
    """Elements handled per operation (per-element figures for iteration)."""
    before_batch: Callable[[int], Any] | None = None
    """Run untimed before every batch (the warm-up too) with the batch's
    operation count (e.g. fill the array that a batch of ``pop()`` empties)."""


@dataclass
class MicroResult:
    case: MicroCase
    gross: Stats  # seconds per operation, loop overhead included
    net: Stats  # minus the median cost of an empty loop iteration
    run: int = 0
    """Which ``run_micro`` call measured it: rounds pair only within one."""
    rounds: tuple[float, ...] = ()
    """Net seconds per item of each round, in round order (the round's own
    empty-loop time subtracted)."""

    def per_item(self) -> float:
        """The median net seconds per item."""
        return self.net.median / self.case.items

    def recorded(self) -> tuple[float, tuple[int, tuple[float, ...]]]:
        """``record``'s value and rounds for this result."""
        return self.per_item(), (self.run, self.rounds)


def figure_ratio(
    ours: float,
    our_rounds: tuple[int, tuple[float, ...]] | None,
    theirs: float,
    their_rounds: tuple[int, tuple[float, ...]] | None,
) -> float:
    """``ours / theirs``: round by round (``paired_ratio``) when one run of
    ``run_micro`` measured both (the rounds ``record`` keeps), else the
    ratio of the two figures."""
    if our_rounds and their_rounds and our_rounds[0] and our_rounds[0] == their_rounds[0]:
        paired = paired_ratio(our_rounds[1], their_rounds[1])
        if not math.isnan(paired):
            return paired
    return ours / theirs if theirs else math.nan


def result_ratio(ours: MicroResult, theirs: MicroResult) -> float:
    """``ours`` over ``theirs``, per item (``figure_ratio``)."""
    return figure_ratio(*ours.recorded(), *theirs.recorded())


_RUNS = itertools.count(1)


def _run_untimed(case: MicroCase, timer: timeit.Timer, operations: int) -> None:
    """One batch of ``case`` with its hooks, nothing timed (a warm-up)."""
    with gc_paused():
        if case.before_batch is not None:
            case.before_batch(operations)
        timer.timeit(operations)
        if case.after_batch is not None:
            case.after_batch()


def run_micro(
    cases: Sequence[MicroCase],
    number: int,
    rounds: int,
    time_source: Callable[[], float] = clock,
) -> tuple[list[MicroResult], Stats]:
    """Time every case ``rounds`` times ``number`` operations, interleaved:
    each round runs one batch of every case (in a rotating order, each timed
    batch after an untimed tenth of it), so slow drift of the machine
    affects all cases alike. Returns the per-operation
    statistics of each case and of the empty loop (the overhead).

    ``time_source`` is wall time by default; ``time.thread_time`` measures the
    work alone, for families whose question is how much work a path does
    (a batch the scheduler pre-empts then costs what it ran, not what it
    waited)."""
    empty = timeit.Timer("pass", timer=time_source)
    timers = [timeit.Timer(case.stmt, timer=time_source, globals=case.namespace) for case in cases]
    numbers = [max(int(number * case.scale), 1) for case in cases]
    for case, timer, count in zip(cases, timers, numbers, strict=True):
        _run_untimed(case, timer, max(count // 10, 1))  # fail early on a broken statement
    samples: list[list[float]] = [[] for _ in cases]
    empty_samples: list[float] = []
    count = len(timers)
    for round_index in range(rounds):
        empty_samples.append(empty.timeit(number) / number)
        # Every case runs once per round: samples[i][r] and empty_samples[r]
        # are of the same round (MicroResult.rounds pairs them).
        for offset in range(count):
            index = (round_index + offset) % count
            case, operations = cases[index], numbers[index]
            # A tenth of the batch first, untimed (with its hooks): the timed
            # batch then starts warm whichever case ran before it. Otherwise
            # a case run right after the same statement (the "alone" twin of
            # a creation case) starts with the processor's caches and branch
            # history ready, and the one after another family's statement
            # does not: 5 to 10% apart for the same loop.
            _run_untimed(case, timers[index], max(operations // 10, 1))
            if case.before_batch is not None:
                with gc_paused():
                    case.before_batch(operations)
            seconds = timers[index].timeit(operations)
            if case.after_batch is not None:
                # Like the statement under timeit, with CPython's cyclic
                # collector off: otherwise a timed after_batch pays for
                # whatever collection the other cases' garbage makes due.
                with gc_paused():
                    start = time_source()
                    case.after_batch()
                    elapsed = time_source() - start
                if case.after_batch_timed:
                    seconds += elapsed
            samples[index].append(seconds / operations)
    overhead = summarize(empty_samples)
    run = next(_RUNS)
    results = [
        MicroResult(
            case,
            summarize(s),
            summarize(s).minus(overhead.median),
            run,
            tuple((t - e) / case.items for t, e in zip(s, empty_samples, strict=True)),
        )
        for case, s in zip(cases, samples, strict=True)
    ]
    return results, overhead


def calibrate(case: MicroCase, seconds: float, limit: int = 10_000_000) -> int:
    """The number of operations of ``case`` that takes about ``seconds``:
    batches of 1, 10, 100... operations (with the case's before and after
    hooks, untimed) until one takes a tenth of ``seconds``, then scaled by
    the fastest of three batches of that size (one batch slowed by a pause
    of the machine would otherwise make every batch of the case tiny, and
    a timed ``after_batch`` then weigh on each operation many times over).
    Raises what the statement raises (a broken or unsupported operation)."""
    timer = timeit.Timer(case.stmt, globals=case.namespace)
    if case.before_batch is not None:  # a first call may register types, fill caches...
        case.before_batch(1)
    timer.timeit(1)
    if case.after_batch is not None:
        case.after_batch()

    def batch(count: int) -> float:
        if case.before_batch is not None:
            case.before_batch(count)
        elapsed = timer.timeit(count)
        if case.after_batch is not None:
            case.after_batch()
        return elapsed

    count = 1
    while True:
        elapsed = batch(count)
        if elapsed >= seconds / 10 or count >= limit:
            break
        count *= 10
    elapsed = min(elapsed, batch(count), batch(count))
    return max(1, min(limit, round(count * seconds / max(elapsed, 1e-9))))


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------


@dataclass
class Table:
    """A result table: printed as text, written as markdown."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    description: str = ""
    failures: list[str] = field(default_factory=list)
    """Sanity checks that failed while measuring (the run exits non-zero)."""

    def add(self, *cells: Any) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{self.title}: {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([str(c) for c in cells])

    def _widths(self) -> list[int]:
        return [
            max(len(row[i]) for row in [self.columns, *self.rows]) for i in range(len(self.columns))
        ]

    @staticmethod
    def _numeric(cell: str) -> bool:
        text = cell.strip()
        if text in ("-", "n/a", ""):
            return True
        try:
            float(text.lstrip("x~<>=").rstrip("%").replace(",", ""))
        except ValueError:
            return False
        return True

    def render_text(self) -> str:
        widths = self._widths()

        def line(row: list[str]) -> str:
            return "  ".join(
                cell.rjust(w) if self._numeric(cell) else cell.ljust(w)
                for cell, w in zip(row, widths, strict=False)
            ).rstrip()

        out = [
            self.title,
            "=" * len(self.title),
            line(self.columns),
            "  ".join("-" * w for w in widths),
        ]
        out += [line(row) for row in self.rows]
        out += [f"  * {note}" for note in self.notes]
        return "\n".join(out)

    def render_markdown(self) -> str:
        numeric = [
            all(self._numeric(row[i]) for row in self.rows) if self.rows else False
            for i in range(len(self.columns))
        ]
        out = [f"### {self.title}", ""]
        if self.description:
            out += [self.description, ""]
        out.append("| " + " | ".join(self.columns) + " |")
        out.append("|" + "|".join(" ---: " if n else " --- " for n in numeric) + "|")
        out += ["| " + " | ".join(row) + " |" for row in self.rows]
        if self.notes:
            out.append("")
            out += [f"- {note}" for note in self.notes]
        return "\n".join(out)


def fmt_ns(seconds: float, digits: int = 1) -> str:
    """Seconds as nanoseconds."""
    return f"{seconds * 1e9:,.{digits}f}"


def fmt_ms(seconds: float, digits: int = 2) -> str:
    """Seconds as milliseconds."""
    return f"{seconds * 1e3:,.{digits}f}"


def fmt_ratio(numerator: float, denominator: float) -> str:
    """``x1.23`` (n/a when the denominator is zero or missing)."""
    if not denominator or math.isnan(denominator):
        return "n/a"
    return _fmt_x(numerator / denominator)


def fmt_result_ratio(ours: MicroResult | None, theirs: MicroResult | None) -> str:
    """``result_ratio`` as ``x1.23`` (n/a when either result is missing)."""
    return "n/a" if ours is None or theirs is None else _fmt_x(result_ratio(ours, theirs))


def _fmt_x(ratio: float) -> str:
    return "n/a" if math.isnan(ratio) else f"x{ratio:.2f}"


# ---------------------------------------------------------------------------
# Machine description and progress
# ---------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if (
                    line.lower().startswith(("model name", "hardware", "processor\t: "))
                    and ":" in line
                ):
                    value = line.split(":", 1)[1].strip()
                    if value and not value.isdigit():
                        return value
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _git_revision(root: Path) -> str:
    try:
        revision = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
        )
        suffix = " (with uncommitted changes)" if dirty.stdout.strip() else ""
        return revision.stdout.strip() + suffix
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def machine_info() -> dict[str, str]:
    """What the numbers were measured on."""
    import cffi

    import zsharp_py

    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 0
    return {
        "CPU": _cpu_model(),
        "cores": f"{os.cpu_count()} logical ({usable} usable by this process)",
        "OS": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "Python": f"{platform.python_implementation()} {platform.python_version()} "
        f"({sys.executable})",
        "cffi": cffi.__version__,
        "zsharp_py": (
            f"{zsharp_py.__version__}, git {_git_revision(Path(__file__).resolve().parent.parent)}"
        ),
        "compilers": _compilers(),
        "peers": _peer_versions(),
        "load average at start": load_average(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _first_line(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10)
        return done.stdout.strip().splitlines()[0] if done.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError, IndexError):
        return ""


def _compilers() -> str:
    return (
        "; ".join(
            filter(None, (_first_line(["cc", "--version"]), _first_line(["c++", "--version"])))
        )
        or "none found"
    )


def _peer_versions() -> str:
    """Versions of the peers found now (a full run installs missing ones later)."""
    import importlib.metadata

    found = []
    for package in ("nanobind", "pybind11", "matplotlib"):
        try:
            found.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{package} (not installed at start)")
    libgc = _first_line(["dpkg-query", "-W", "-f", "${Version}", "libgc-dev"])
    found.append(f"libgc-dev {libgc}" if libgc else "libgc-dev (not installed at start)")
    found.append(f"ctypes (CPython {platform.python_version()})")
    return ", ".join(found)


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except (AttributeError, OSError):
        return "unknown"
    return f"{one:.2f} {five:.2f} {fifteen:.2f} (1, 5, 15 min; other processes skew the figures)"


_started = clock()


def progress(config: Config, message: str) -> None:
    """A progress line on stderr (long runs build million-object heaps)."""
    if config.verbose:
        print(f"[{clock() - _started:7.1f}s] {message}", file=sys.stderr, flush=True)


def add_case_rows(
    detail: Table,
    results: Sequence[MicroResult],
    groups: Sequence[tuple[str, str]],
    peer_names: Sequence[str],
    net: Callable[[MicroResult], float],
) -> None:
    """Fill a family's "every case" table: one row per measured case, by
    group, then peer, the main case first (operation, case [peer], code,
    ns/op, p99, max, ``net(result)``, main), and a note for each secondary
    case that has one."""
    order = {group: index for index, (group, _) in enumerate(groups)}
    peers = {peer: index for index, peer in enumerate(peer_names)}
    for result in sorted(
        results, key=lambda r: (order[r.case.group], peers[r.case.peer], not r.case.primary)
    ):
        case = result.case
        detail.add(
            case.group,
            f"{case.label} [{case.peer}]",
            f"`{case.stmt}`",
            fmt_ns(result.gross.median),
            fmt_ns(result.gross.p99),
            fmt_ns(result.gross.max),
            fmt_ns(net(result)),
            "yes" if case.primary else "",
        )
    detail.notes += sorted(
        {
            f"{r.case.label} [{r.case.peer}]: {r.case.note}"
            for r in results
            if r.case.note and not r.case.primary
        }
    )
