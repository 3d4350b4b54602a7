"""Native properties of the collector that need no peer: what the write
barrier costs on a store-heavy loop while no collection is pending, and the
object array's capacity (the default runtime's, and a runtime configured
for 25 million objects).

The barrier is measured natively (``csrc/gc_zsharp.c barrier``): the same
loop of ``zs_store_ref`` calls in two builds of the same program, one as is
and one with ``-DZS_BENCH_NO_BARRIER`` (the barrier compiled out of every
store), run alternately so a burst of load from other processes does not
land on one build only; each figure is the calling thread's CPU time.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from . import _build
from ._harness import Config, Table, Unavailable, progress, record
from .gc_peers import _run_json

NAME = "gc_native"
TITLE = "Write barrier and capacity"

__all__ = ["NAME", "TITLE", "run"]

CONFIGURED_CAPACITY = 25_000_000


def run(config: Config) -> list[Table]:
    try:
        with_barrier = _build.zsharp_gc_program(config)
        without = _build.zsharp_gc_program(config, barrier=False)
    except Unavailable as reason:
        table = Table(TITLE, ["what", "value"])
        table.notes.append(f"not measured: the zsharp GC benchmark program did not build: {reason}")
        table.failures.append(str(reason))
        return [table]
    tables: list[Table] = []
    builders: list[Callable[[], Table]] = [
        lambda: _barrier_table(config, str(with_barrier), str(without)),
        lambda: _capacity_table(config, str(with_barrier)),
    ]
    for build in builders:
        try:
            tables.append(build())
        except RuntimeError as error:
            table = Table(TITLE, ["what", "value"])
            table.notes.append(f"CHECK FAILED: {error}")
            table.failures.append(str(error))
            tables.append(table)
    return tables


def _barrier_table(config: Config, with_barrier: str, without: str) -> Table:
    stores = 100_000 if config.quick else 1_000_000
    rounds = 3
    passes = 1 if config.quick else 15
    samples: dict[str, list[float]] = {"with": [], "without": []}
    failures: list[str] = []
    progress(config, f"{NAME}: write barrier, {passes} x 2 runs of {rounds} x {stores:,} stores")
    for _ in range(passes):
        for key, program in (("with", with_barrier), ("without", without)):
            data = _run_json(
                [program, "barrier", str(stores), str(rounds)], f"barrier loop ({key} the barrier)"
            )
            if data.get("failures") or data.get("barrier") != (key == "with"):
                failures.append(f"barrier loop ({key}): a store failed or the wrong build ran")
            samples[key] += [ns / stores * 1e-9 for ns in data["round_cpu"]]
    table = Table(
        f"{TITLE}: the write barrier with no collection pending",
        [
            "build",
            "rounds",
            "median ns/store",
            "min ns/store",
            "overhead (median)",
            "overhead (min)",
        ],
        description=(
            f"Rounds of {stores:,} `zs_store_ref` calls (random holders among 1,024 rooted "
            "objects, random slots, random targets among 1,024 live objects; each store takes "
            "the runtime lock, validates both handles and the member, then runs the barrier) "
            "with no mark pending, in the normal build and in a build with the barrier "
            "compiled out (`-DZS_BENCH_NO_BARRIER`), the two alternating over "
            f"{passes} pass(es) (each a new process); the thread's CPU time per store. "
            "*overhead*: with / without - 1. The target uses the minimum: how fast each "
            "build's store is when nothing disturbs it. The medians swing by +-30% from "
            "one process to the next (code and heap placement differ per process), in "
            "either direction, which a single compare-and-branch cannot explain; "
            "callgrind counts +0.7% instructions per store with the barrier."
        ),
    )
    med = {k: statistics.median(v) for k, v in samples.items()}
    low = {k: min(v) for k, v in samples.items()}
    for key, label in (("with", "with the barrier"), ("without", "barrier compiled out")):
        over_med = med[key] / med["without"] - 1
        over_min = low[key] / low["without"] - 1
        table.add(
            label,
            len(samples[key]),
            f"{med[key] * 1e9:,.2f}",
            f"{low[key] * 1e9:,.2f}",
            "-" if key == "without" else f"{over_med:+.1%}",
            "-" if key == "without" else f"{over_min:+.1%}",
        )
    record("gc.barrier.with", low["with"])
    record("gc.barrier.without", low["without"])
    table.notes += [f"CHECK FAILED: {f}" for f in failures]
    table.failures += failures
    return table


def _capacity_table(config: Config, program: str) -> Table:
    configured = 0 if config.quick else CONFIGURED_CAPACITY
    progress(
        config,
        f"{NAME}: capacity (default runtime"
        + (f", then {configured:,} objects)" if configured else ")"),
    )
    data = _run_json([program, "capacity", str(configured)], "capacity")
    table = Table(
        f"{TITLE}: capacity of the object array",
        ["runtime", "max objects", "objects held", "refused with", "fill s", "collection s"],
        description=(
            "Memberless objects (header only) allocated until the runtime refuses: a runtime "
            "with default options, then one configured for "
            f"{CONFIGURED_CAPACITY:,} objects, which one full collection then frees "
            "entirely (nothing is rooted). The largest heaps of the GC tables (4,000,000 "
            "objects) run on runtimes configured past the default."
        ),
    )
    failures: list[str] = []
    default = int(data["default_max_objects"])
    table.add(
        "default options",
        f"{default:,}",
        f"{data['default_held']:,}",
        data["default_refusal"],
        f"{data['default_fill_ns'] / 1e9:,.2f}",
        "-",
    )
    record("gc.capacity.default_held", float(data["default_held"]))
    if data["default_refusal"] != "capacity" or data["default_held"] != default:
        failures.append("the default runtime did not hold exactly its capacity")
    if configured:
        if data.get("configured_status") != "ok":
            failures.append(
                f"a runtime for {configured:,} objects: {data.get('configured_status')}"
            )
        else:
            held = int(data["configured_held"])
            table.add(
                "configured",
                f"{configured:,}",
                f"{held:,}",
                data["configured_refusal"],
                f"{data['configured_fill_ns'] / 1e9:,.2f}",
                f"{data['configured_collect_ns'] / 1e9:,.2f}",
            )
            record("gc.capacity.configured_held", float(held))
            if (
                held != configured
                or data["configured_freed"] != held
                or data["configured_live_after"] != 0
            ):
                failures.append(
                    f"the configured runtime held {held:,} of {configured:,} objects "
                    "or its collection did not free them all"
                )
        table.notes.append(f"peak RSS of the program: {data['peak_rss_kb'] / 1024:,.0f} MB")
    else:
        table.notes.append("quick run: the configured runtime is not filled")
    table.notes += [f"CHECK FAILED: {f}" for f in failures]
    table.failures += failures
    return table
