"""Garbage collection side by side: zsharp's collector, the Boehm-Demers-Weiser
collector and CPython's ``gc.collect()`` on the same two graphs of 64-byte
objects with four reference slots (``_graphs``), at 10K to 4M objects, next
to two floors measured in the same run: touching every object once in
address order, and once in random order with many loads in flight.

Building millions of objects from Python would take most of the run (about
5 us per zsharp_py object), so the zsharp and Boehm heaps are built natively
by small C programs compiled at benchmark time (``csrc/gc_zsharp.c`` against
``native/src``, ``csrc/gc_boehm.c`` against libgc); the CPython graph is
built in a child process (``_cpython_heap``) so its peak RSS is its own. All
of them draw the random graph's edges from the same generator and print an
edge checksum, which the run compares.

Also measured here, on natively built heaps: mark time of a 1M-object heap
made of 64-object groups with and without clusters, incremental steps at a
1 ms budget on the 1M heap (p50, p99, max, and their total next to the
stop-the-world collection), native bytes per object and the peak RSS of the
4M-object heaps.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import _build
from ._graphs import random_drop_survivors, tree_drop_mask, tree_drop_plan
from ._harness import SERIES, Config, Table, Unavailable, fmt_ratio, percentile, progress, record

NAME = "gc_peers"
TITLE = "Garbage collection against Boehm, CPython and the memory floors"

__all__ = ["NAME", "TITLE", "PEERS", "run"]

SHAPES = ("tree", "random")
CORES = os.cpu_count() or 1
OBJECT_BYTES = 64


@dataclass(frozen=True)
class Peer:
    key: str
    label: str
    kind: str  # zsharp | boehm | cpython
    threads: int = 1


PEERS: list[Peer] = [
    Peer("zs1", "zsharp_py, 1 marker", "zsharp", 1),
    Peer("zsN", f"zsharp_py, {CORES} markers", "zsharp", 0),
    Peer("boehm1", "Boehm, 1 marker", "boehm", 1),
    Peer("boehmN", f"Boehm, {CORES} markers", "boehm", CORES),
    Peer("cpython", "CPython gc.collect()", "cpython"),
]
FLOORS = [("floor_address", "floor: address order"), ("floor_random", "floor: random order")]


@dataclass
class Results:
    runs: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict)
    floors: dict[int, dict[str, Any]] = field(default_factory=dict)
    clusters: dict[str, Any] | None = None
    missing: dict[str, str] = field(default_factory=dict)  # peer key -> why
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------
# Running the programs
# ---------------------------------------------------------------------------

REPOSITORY = Path(__file__).resolve().parent.parent


def _run_json(
    command: list[str], what: str, env: dict[str, str] | None = None, timeout: float = 1800
) -> dict[str, Any]:
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
            cwd=REPOSITORY,
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise RuntimeError(f"{what}: {error}") from None
    if done.returncode != 0:
        tail = " / ".join(done.stderr.strip().splitlines()[-3:])
        raise RuntimeError(f"{what} exited with {done.returncode}: {tail}")
    try:
        data: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError(f"{what}: no JSON in its output") from None
    return data


def _median_ns(values: list[int]) -> float:
    return statistics.median(values) / 1e9 if values else float("nan")


def _drop_arguments(shape: str, n: int) -> tuple[int, int, str]:
    """(tree drop mask, survivors, slots for the CPython worker)."""
    if shape == "tree":
        slots, survivors = tree_drop_plan(n)
        return tree_drop_mask(n), survivors, ",".join(slots)
    return 0, random_drop_survivors(n), "-"


def _programs(config: Config, results: Results) -> dict[str, Path]:
    programs: dict[str, Path] = {}
    for kind, builder in (
        ("zsharp", _build.zsharp_gc_program),
        ("boehm", _build.boehm_gc_program),
        ("floors", _build.floors_program),
    ):
        try:
            programs[kind] = builder(config)
        except Unavailable as reason:
            for peer in PEERS:
                if peer.kind == kind:
                    results.missing[peer.key] = f"unavailable: {reason}"
            if kind == "floors":
                for key, _ in FLOORS:
                    results.missing[key] = f"unavailable: {reason}"
            if kind == "zsharp":
                results.failures.append(f"the zsharp GC benchmark program did not build: {reason}")
    return programs


def _measure(
    config: Config, programs: dict[str, Path], peer: Peer, shape: str, n: int, results: Results
) -> None:
    if peer.key in results.missing:
        return
    rounds = config.peer_rounds(n)
    mask, survivors, slots = _drop_arguments(shape, n)
    what = f"{peer.label}, {shape} of {n:,}"
    progress(config, f"{NAME}: {what}: build, {rounds} collections, drop half")
    try:
        if peer.kind == "zsharp":
            incremental = 5 if n == config.incremental_heap and peer.threads == 1 else 0
            if config.quick and incremental:
                incremental = 2
            data = _run_json(
                [
                    str(programs["zsharp"]),
                    "graph",
                    shape,
                    str(n),
                    str(rounds),
                    str(peer.threads),
                    str(mask),
                    str(survivors),
                    str(incremental),
                ],
                what,
            )
        elif peer.kind == "boehm":
            data = _run_json(
                [
                    str(programs["boehm"]),
                    "graph",
                    shape,
                    str(n),
                    str(rounds),
                    str(mask),
                    str(survivors),
                ],
                what,
                env={"GC_MARKERS": str(peer.threads)},
            )
            if data.get("markers") != peer.threads:
                results.notes.append(
                    f"{peer.label}: libgc used {data.get('markers')} "
                    f"marker(s) for the {shape} of {n:,}"
                )
        else:
            data = _run_json(
                [
                    sys.executable,
                    "-m",
                    "benchmarks._cpython_heap",
                    shape,
                    str(n),
                    str(rounds),
                    slots,
                ],
                what,
            )
    except RuntimeError as error:
        if peer.kind == "zsharp":
            results.failures.append(str(error))
        else:
            results.missing[peer.key] = f"unavailable: {error}"
        return
    data["survivors"] = survivors
    if data.get("failures"):
        results.failures.append(
            f"{what}: {data['failures']} sanity check(s) failed (marked "
            "count, live count after the drop or heap verification)"
        )
    previous = results.runs.get((peer.key, shape, n))
    results.runs[(peer.key, shape, n)] = data if previous is None else _merge(previous, data)


# Fields holding every sample (concatenated over passes) and single figures
# (the median over passes).
_SAMPLES = (
    "live_walls",
    "live_cpus",
    "incremental_steps",
    "incremental_steps_cpu",
    "incremental_totals",
    "incremental_starts",
)
_FIGURES = (
    "live_mark",
    "live_gather",
    "live_purge",
    "live_cpu",
    "drop_wall",
    "drop_mutation",
    "drop_mark",
    "drop_gather",
    "drop_purge",
)


def _merge(previous: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """Fold another pass of the same program into its results."""
    passes: list[dict[str, Any]] = previous.get("_passes", [dict(previous)]) + [data]
    merged = dict(previous)
    merged["_passes"] = passes
    for key in _SAMPLES:
        if key in data:
            merged[key] = [v for p in passes for v in p.get(key, [])]
    for key in _FIGURES:
        values = [p[key] for p in passes if key in p]
        if values:
            merged[key] = statistics.median(values)
    merged["peak_rss_kb"] = max(p.get("peak_rss_kb", 0) for p in passes)
    merged["failures"] = sum(p.get("failures", 0) for p in passes)
    if "drop_sampled" in data:
        merged["drop_sampled"] = sum(p.get("drop_sampled", 0) for p in passes)
        merged["drop_sampled_freed"] = sum(p.get("drop_sampled_freed", 0) for p in passes)
    return merged


def run(config: Config) -> list[Table]:
    results = Results()
    programs = _programs(config, results)
    for n in config.peer_heap_sizes:
        if "floors" in programs:
            progress(config, f"{NAME}: memory floors for {n:,} objects")
            try:
                results.floors[n] = _run_json(
                    [str(programs["floors"]), str(n), str(max(config.peer_rounds(n), 5))], "floors"
                )
            except RuntimeError as error:
                results.failures.append(str(error))
        # Several passes over every peer (each program run anew), so a burst of
        # load from other processes does not land on one peer only.
        for _ in range(config.peer_passes(n)):
            for shape in SHAPES:
                for peer in PEERS:
                    _measure(config, programs, peer, shape, n, results)
    _check_checksums(results)
    if "zsharp" in programs:
        n = config.cluster_heap
        progress(config, f"{NAME}: clusters: {n:,} objects in groups of 64")
        try:
            results.clusters = _run_json(
                [str(programs["zsharp"]), "clusters", str(n), str(config.peer_rounds(n)), "1"],
                "clusters",
            )
            if results.clusters.get("failures"):
                results.failures.append("clusters: sanity check failed")
        except RuntimeError as error:
            results.failures.append(str(error))
    return _tables(config, results)


def _check_checksums(results: Results) -> None:
    sums: dict[int, set[int]] = {}
    for (_, shape, n), data in results.runs.items():
        if shape == "random" and "checksum" in data:
            sums.setdefault(n, set()).add(int(data["checksum"]))
    for n, values in sums.items():
        if len(values) > 1:
            results.failures.append(
                f"random graph of {n:,}: the peers built different edges "
                f"(checksums {sorted(values)})"
            )


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------


def _live(results: Results, key: str, shape: str, n: int) -> float:
    """Median seconds of one full collection with everything live (floors:
    one walk, whatever the shape)."""
    if key.startswith("floor_"):
        floor = results.floors.get(n)
        return floor[key[len("floor_") :]] / 1e9 if floor else float("nan")
    data = results.runs.get((key, shape, n))
    return _median_ns(data["live_walls"]) if data else float("nan")


def _cell_ms(seconds: float) -> str:
    return "n/a" if seconds != seconds else f"{seconds * 1e3:,.2f}"


def _cell_ns_per(seconds: float, count: float) -> str:
    return "n/a" if seconds != seconds or not count else f"{seconds * 1e9 / count:,.1f}"


def _why(results: Results, key: str) -> str:
    return results.missing.get(key, "n/a")


def _tables(config: Config, results: Results) -> list[Table]:
    sizes = config.peer_heap_sizes
    columns = [(p.key, p.label) for p in PEERS] + FLOORS
    tables: list[Table] = []

    # ---- full collections, everything live ----
    live = Table(
        f"{TITLE}: full collection, everything live (median ms)",
        ["graph", "objects", *(label for _, label in columns)],
        description=(
            "Median wall time of one full collection with every object reachable "
            "(`zs_collect_garbage`, `GC_gcollect`, `gc.collect()`), after a warm-up; rounds: "
            + ", ".join(
                f"{config.peer_passes(n)} x {config.peer_rounds(n)} at {n:,}" for n in sizes
            )
            + " (passes x rounds: every pass runs every peer's "
            "program anew, in turn; the median is over all rounds). The floors "
            "read one word of each of n 64-byte objects, in address order and in random "
            "order (independent loads). zsharp_py with N markers is the default "
            "configuration (`mark_threads` 0: one per core; parallel from 65,536 objects)."
        ),
    )
    for shape in SHAPES:
        for n in sizes:
            cells = [shape, f"{n:,}"]
            for key, _ in columns:
                seconds = _live(results, key, shape, n)
                cells.append(_cell_ms(seconds) if seconds == seconds else _why(results, key))
            live.add(*cells)
            for key, _ in columns:
                seconds = _live(results, key, shape, n)
                record(f"gc.live.{shape}.{n}.{key}", seconds, _why(results, key))
                if seconds == seconds:
                    SERIES.setdefault(f"{shape}|{dict(columns)[key]}", []).append((n, seconds))
    live.notes += sorted({f"{key}: {why}" for key, why in results.missing.items()})
    zs = next((d for (k, _, _), d in results.runs.items() if k == "zs1"), None)
    if zs is not None:
        live.notes.append(
            f"a zsharp_py node is its {zs['header_bytes']}-byte object header plus four 8-byte "
            f"references: {zs['object_bytes']} bytes (Boehm and CPython nodes: 64 bytes)"
        )
    tables.append(live)

    cpu = Table(
        f"{TITLE}: the same collections in CPU time (median ms)",
        ["graph", "objects", *(p.label for p in PEERS)],
        description=(
            "Process CPU time (all threads) of the same collections: on a machine shared "
            "with other processes, the CPU time of a one-marker collection is closer to "
            "what it costs than its wall time, which includes preemption. A parallel "
            "collection's CPU time is the sum over its markers."
        ),
    )
    for shape in SHAPES:
        for n in sizes:
            cells = [shape, f"{n:,}"]
            for peer in PEERS:
                data = results.runs.get((peer.key, shape, n))
                value = None
                if data is not None and "live_cpus" in data:
                    value = _median_ns(data["live_cpus"])
                elif data is not None and "live_cpu" in data:
                    value = data["live_cpu"] / 1e9
                cells.append(_cell_ms(value) if value is not None else _why(results, peer.key))
                if value is not None:
                    record(f"gc.live_cpu.{shape}.{n}.{peer.key}", value)
            cpu.add(*cells)
    tables.append(cpu)

    # ---- ns per object and the growth from the smallest heap ----
    scaling = Table(
        f"{TITLE}: ns per object, and how it grows with the heap",
        ["peer", "graph", *(f"{n:,}" for n in sizes), "growth"],
        description=(
            "Median collection time divided by the number of objects. *growth* is ns/object at "
            "the largest heap over ns/object at 100K (or the smallest): 1.00 means the cost "
            "grows exactly linearly with the heap; above 1, each object costs more in a "
            "bigger heap (caches and TLB stop covering it). The PNG plot shows the same "
            "curves."
        ),
    )
    base = 100_000 if 100_000 in sizes else sizes[0]
    for key, label in columns:
        for shape in SHAPES if not key.startswith("floor_") else ("any",):
            values = [_live(results, key, shape, n) for n in sizes]
            if all(v != v for v in values):
                continue
            first, last = _live(results, key, shape, base), values[-1]
            growth = (
                (last / sizes[-1]) / (first / base)
                if len(sizes) > 1 and first == first and last == last
                else float("nan")
            )
            scaling.add(
                label,
                shape,
                *(_cell_ns_per(v, n) for v, n in zip(values, sizes, strict=True)),
                "n/a" if growth != growth else f"x{growth:.2f}",
            )
    tables.append(scaling)

    # ---- ratios ----
    ratios = Table(
        f"{TITLE}: ratios, zsharp_py / peer (everything live)",
        [
            "graph",
            "objects",
            "1 marker / Boehm 1 marker",
            f"{CORES} markers / Boehm {CORES} markers",
            "1 marker / CPython",
            f"{CORES} markers / CPython",
            "1 marker / random floor",
            "1 marker / address floor",
        ],
        description="Below 1, zsharp_py is faster. Same-run figures only.",
    )
    for shape in SHAPES:
        for n in sizes:
            zs1, zsn = _live(results, "zs1", shape, n), _live(results, "zsN", shape, n)
            ratios.add(
                shape,
                f"{n:,}",
                fmt_ratio(zs1, _live(results, "boehm1", shape, n)),
                fmt_ratio(zsn, _live(results, "boehmN", shape, n)),
                fmt_ratio(zs1, _live(results, "cpython", shape, n)),
                fmt_ratio(zsn, _live(results, "cpython", shape, n)),
                fmt_ratio(zs1, _live(results, "floor_random", shape, n)),
                fmt_ratio(zs1, _live(results, "floor_address", shape, n)),
            )
    tables.append(ratios)

    tables.append(_phases_table(config, results))
    tables.append(_drop_table(config, results))
    tables.append(_clusters_table(config, results))
    tables.append(_incremental_table(config, results))
    tables.append(_memory_table(config, results))
    tables[0].notes += results.notes
    tables[0].notes += [f"CHECK FAILED: {f}" for f in results.failures]
    tables[0].failures += results.failures
    return tables


def _phases_table(config: Config, results: Results) -> Table:
    table = Table(
        f"{TITLE}: zsharp_py's phases (everything live)",
        [
            "graph",
            "objects",
            "markers",
            "wall ms",
            "mark ms",
            "gather ms",
            "purge ms",
            "mark ns/object",
            "gather ns/object",
            "gather / address floor",
        ],
        description=(
            "Median phases of the same collections from `zs_gc_get_stats`: *mark* (roots and "
            "the worklist), *gather* (one pass over the object array collecting unmarked "
            "objects: nothing dies here, so this is the pass's fixed cost), *purge*."
        ),
    )
    for shape in SHAPES:
        for n in config.peer_heap_sizes:
            for key in ("zs1", "zsN"):
                data = results.runs.get((key, shape, n))
                if data is None:
                    continue
                wall = _median_ns(data["live_walls"])
                mark, gather, purge = (data[f"live_{p}"] / 1e9 for p in ("mark", "gather", "purge"))
                floor = _live(results, "floor_address", shape, n)
                table.add(
                    shape,
                    f"{n:,}",
                    data["live_threads"],
                    _cell_ms(wall),
                    _cell_ms(mark),
                    _cell_ms(gather),
                    _cell_ms(purge),
                    _cell_ns_per(mark, n),
                    _cell_ns_per(gather, n),
                    fmt_ratio(gather, floor),
                )
                record(f"gc.gather.{shape}.{n}.{key}", gather)
                record(f"gc.mark.{shape}.{n}.{key}", mark)
    return table


def _drop_table(config: Config, results: Results) -> Table:
    phases: list[str] = []
    table = Table(
        f"{TITLE}: collection after dropping half (ms)",
        [
            "graph",
            "objects",
            "freed",
            *(p.label for p in PEERS),
            "1 marker / Boehm 1",
            "1 marker / CPython",
        ],
        description=(
            "One collection per pass (the median over passes) after dropping about half of "
            "the graph: the "
            "tree's root slots whose subtrees hold closest to half of it are cleared; the "
            "random graph's root moves to node n/2 - 1 (edges only point back, so the newer "
            "half dies). zsharp_py's time includes destroying and freeing the dead objects. "
            "CPython frees the dropped half by reference counting when the reference goes "
            "(counted here), then `gc.collect()` runs over the rest. Boehm sweeps lazily: "
            "its figure is the mark and the reclaim setup; memory is reused as it allocates."
        ),
    )
    for shape in SHAPES:
        for n in config.peer_heap_sizes:
            cells: list[str] = [shape, f"{n:,}"]
            freed = n - (random_drop_survivors(n) if shape == "random" else tree_drop_plan(n)[1])
            cells.append(f"{freed:,}")
            walls: dict[str, float] = {}
            for peer in PEERS:
                data = results.runs.get((peer.key, shape, n))
                if data is None:
                    cells.append(_why(results, peer.key))
                    continue
                seconds = data["drop_wall"] / 1e9
                if peer.kind == "cpython":
                    seconds += data["drop_mutation"] / 1e9
                walls[peer.key] = seconds
                cells.append(_cell_ms(seconds))
                if peer.kind == "boehm" and data.get("drop_sampled"):
                    share = data["drop_sampled_freed"] / data["drop_sampled"]
                    if share < 0.99:
                        results.notes.append(
                            f"{peer.label}, {shape} of {n:,}: only {share:.0%} of the dropped "
                            "nodes were freed (sampled with disappearing links): conservative "
                            "scanning kept the rest through stale words"
                        )
            cells.append(
                fmt_ratio(walls.get("zs1", float("nan")), walls.get("boehm1", float("nan")))
            )
            cells.append(
                fmt_ratio(walls.get("zs1", float("nan")), walls.get("cpython", float("nan")))
            )
            table.add(*cells)
            zs = results.runs.get(("zs1", shape, n))
            if zs is not None and "drop_gather" in zs:
                # The gather that collects the dead half (the live table's
                # gather only scans the mark filter: nothing dies there).
                record(f"gc.gather_dead.{shape}.{n}.zs1", zs["drop_gather"] / 1e9)
            if zs is not None and "drop_purge" in zs and freed:
                phases.append(
                    f"{shape} {n:,}: mark {zs['drop_mark'] / 1e6:,.2f}, gather "
                    f"{zs['drop_gather'] / 1e6:,.2f}, purge {zs['drop_purge'] / 1e6:,.2f} "
                    f"ms ({zs['drop_purge'] / freed:,.0f} ns per freed object)"
                )
    if phases:
        table.notes.append(
            "zsharp_py, 1 marker, phases of the drop collection: " + "; ".join(phases)
        )
    return table


def _clusters_table(config: Config, results: Results) -> Table:
    data = results.clusters
    table = Table(
        f"{TITLE}: clusters",
        ["objects", "groups", "", "wall ms", "mark ms", "objects scanned", "clusters marked"],
        description=(
            "A heap of 64-object groups (a cluster-root object holding a 4-ary tree of 63 "
            "in-cluster objects; every group root in the object array of one rooted world "
            "object), collected with one marker: first as plain objects, then after "
            "`zs_create_cluster` on every group root (min_cluster_size 2). A cluster is "
            "marked as a unit through its root's mark bit, without reading or writing its "
            "members (the gather then reads a member's reachability from its root: the wall "
            "column includes it)."
        ),
    )
    if data is None:
        table.notes.append("not measured (the zsharp GC benchmark program is unavailable)")
        return table
    for label, prefix in (("plain objects", "plain"), ("clustered", "clustered")):
        table.add(
            f"{data['n']:,}",
            f"{data['groups']:,}",
            label,
            _cell_ms(_median_ns(data[f"{prefix}_walls"])),
            _cell_ms(data[f"{prefix}_mark"] / 1e9),
            f"{data[f'{prefix}_scanned']:,}",
            f"{data[f'{prefix}_clusters_marked']:,}",
        )
    plain, clustered = data["plain_mark"], data["clustered_mark"]
    table.notes.append(
        f"marking is x{plain / clustered:.2f} faster with clusters "
        f"(wall: x{_median_ns(data['plain_walls']) / _median_ns(data['clustered_walls']):.2f}); "
        f"creating the {data['clusters']:,} clusters took "
        f"{data['create_clusters'] / 1e6:,.1f} ms"
    )
    record("gc.clusters.plain_mark", plain / 1e9)
    record("gc.clusters.clustered_mark", clustered / 1e9)
    record("gc.clusters.n", data["n"])
    return table


def _incremental_table(config: Config, results: Results) -> Table:
    table = Table(
        f"{TITLE}: incremental collection, 1 ms steps",
        [
            "graph",
            "objects",
            "cycles",
            "steps/cycle",
            "p50 ms",
            "p99 ms",
            "max ms",
            "CPU p99 ms",
            "CPU max ms",
            "steps total ms",
            "stop-the-world ms",
            "total / stop-the-world",
        ],
        description=(
            "`zs_gc_start_incremental`, then `zs_gc_step(rt, 1 ms)` until done, on the live "
            "heap (one marker, nothing dies): every step's wall time over all cycles (p50, "
            "p99, max), the same for the thread's CPU time in each step (what the step "
            "cost, without preemption by other processes), and the median total of a "
            "cycle's steps (start included) next to the median stop-the-world collection "
            "of the same heap with one marker."
        ),
    )
    n = config.incremental_heap
    for shape in SHAPES:
        data = results.runs.get(("zs1", shape, n))
        if data is None or "incremental_steps" not in data:
            continue
        steps = sorted(s / 1e9 for s in data["incremental_steps"])
        cpu = sorted(s / 1e9 for s in data.get("incremental_steps_cpu", [])) or [float("nan")]
        totals = [t / 1e9 for t in data["incremental_totals"]]
        cycles = len(totals)
        total = statistics.median(totals)
        stw = _median_ns(data["live_walls"])
        table.add(
            shape,
            f"{n:,}",
            cycles,
            f"{len(steps) / cycles:,.0f}",
            _cell_ms(percentile(steps, 50)),
            _cell_ms(percentile(steps, 99)),
            _cell_ms(steps[-1]),
            _cell_ms(percentile(cpu, 99)),
            _cell_ms(cpu[-1]),
            _cell_ms(total),
            _cell_ms(stw),
            fmt_ratio(total, stw),
        )
        record(f"gc.incremental.{shape}.p50", percentile(steps, 50))
        record(f"gc.incremental.{shape}.p99", percentile(steps, 99))
        record(f"gc.incremental.{shape}.max", steps[-1])
        record(f"gc.incremental.{shape}.ratio", total / stw)
        record(f"gc.incremental.{shape}.cpu_p99", percentile(cpu, 99))
        record(f"gc.incremental.{shape}.cpu_max", cpu[-1])
    if not table.rows:
        table.notes.append("not measured (the zsharp GC benchmark program is unavailable)")
    return table


def _memory_table(config: Config, results: Results) -> Table:
    n = config.peer_heap_sizes[-1]
    table = Table(
        f"{TITLE}: memory of the {n:,}-object heaps",
        ["peer", "graph", "accounted bytes/object", "RSS bytes/object", "peak RSS MB"],
        description=(
            "*accounted*: zsharp_py's own count of its native blocks (`zs_runtime_memory` "
            "live bytes: the objects, their object-array items, chunk and class tables) per "
            "object; Boehm's heap size per object. *RSS bytes/object*: "
            "resident memory after building minus before, per object (malloc overhead "
            "included; the build's index table freed). *peak RSS*: the process's high-water "
            "mark (`VmHWM`), which also holds the build's index table (8 bytes per object) "
            "and, for CPython, the interpreter."
        ),
    )
    for peer in PEERS:
        for shape in SHAPES:
            data = results.runs.get((peer.key, shape, n))
            if data is None:
                continue
            if peer.kind == "zsharp":
                accounted = f"{data['live_bytes'] / n:,.1f}"
            elif peer.kind == "boehm":
                accounted = f"{data['heap_bytes'] / n:,.1f}"
            else:
                accounted = "64 (by layout)"
            rss = (data["rss_built_kb"] - data["rss_before_kb"]) * 1024 / n
            table.add(
                peer.label, shape, accounted, f"{rss:,.1f}", f"{data['peak_rss_kb'] / 1024:,.1f}"
            )
            record(f"gc.peak_rss.{shape}.{n}.{peer.key}", data["peak_rss_kb"] * 1024)
    zs = next((d for (k, s, m), d in results.runs.items() if k == "zs1"), None)
    if zs is not None:
        table.notes.append(
            f"zsharp_py per object: a {zs['item_bytes']}-byte object-array item (the GC's "
            f"metadata: object pointer, flags, cluster index, serial, strong refcount) and "
            f"a {zs['header_bytes']}-byte object header (class, outer, index, name) inside "
            f"the {zs['object_bytes']}-byte object, carved from 64-byte-aligned slabs (one "
            f"cache line per object; no malloc chunk header)"
        )
        record("gc.item_bytes", zs["item_bytes"])
        record("gc.header_bytes", zs["header_bytes"])
    return table
