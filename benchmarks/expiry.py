"""Expiry and the cost of a conjugate.

Expiry: K objects created from Python (each with its conjugate, kept in a
Python list so that the expired proxies stay observable) become unreachable
together; one ``rt.collect_garbage()`` marks, gathers, hands the K dying
handles to the managed side, which clears every conjugate's address and
gives it the expired sentinel (in C), then purges. Reported per conjugate: the whole collection,
and the managed part (wall minus the native phases: mostly the expiry).
Rule 7 of docs/design.md says expiring K conjugates costs O(K): the ns per conjugate
should not grow with K.

Memory: Python bytes per conjugate (``tracemalloc`` over creating objects
from Python: the C conjugate and its share of the runtime's conjugate table)
next to ``sys.getsizeof`` of the parts, and the native bytes per object.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc

import zsharp_py as zs

from ._harness import Config, Stats, Table, clock, fmt_ns, gc_paused, progress, record, summarize

NAME = "expiry"
TITLE = "Expiry and conjugate memory"

__all__ = ["NAME", "TITLE", "run"]


class ExpiryNode(zs.Object):
    """A small object: one scalar and one reference."""

    value: zs.Int32
    next: ExpiryNode | None


def _expire_once(k: int) -> tuple[float, float, int, bool]:
    """Create k objects with conjugates, drop them all, collect once.
    Returns (wall seconds, managed seconds, conjugates expired, all expired)."""
    with zs.Runtime(max_objects=max(k + 65_536, 2_162_688)) as runtime:
        with gc_paused():
            proxies = [ExpiryNode() for _ in range(k)]
            start = clock()
            stats = runtime.collect_garbage()
            wall = clock() - start
        native = stats.mark_seconds + stats.gather_seconds + stats.purge_seconds
        every = all(p.is_expired for p in proxies[:: max(k // 1000, 1)])
        del proxies
    return wall, max(wall - native, 0.0), stats.conjugates_expired, every


def _conjugate_bytes(count: int) -> tuple[float, int, int, float]:
    """tracemalloc bytes per conjugate, getsizeof of conjugate / handle,
    native bytes per object."""
    with zs.Runtime() as runtime:
        holder: list[ExpiryNode] = []
        holder.extend(ExpiryNode() for _ in range(16))  # classes registered, mapping warm
        holder = [None] * count  # type: ignore[list-item]
        gc.collect()
        native_before = runtime.native_memory()["live_bytes"]
        live_before = runtime.live_objects()
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        for index in range(count):
            holder[index] = ExpiryNode()
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
        sample = holder[0]
        sizes = (sys.getsizeof(sample), sys.getsizeof(sample.handle))
        native = (runtime.native_memory()["live_bytes"] - native_before) / max(
            runtime.live_objects() - live_before, 1
        )
        del holder, sample
    return grown / count, *sizes, native


def run(config: Config) -> list[Table]:
    expiry = Table(
        f"{TITLE}: expiring K conjugates in one collection",
        [
            "K",
            "rounds",
            "collection ms",
            "ns/conjugate",
            "managed ms",
            "managed ns/conjugate",
            "max ns/conjugate",
        ],
        description=(
            "K objects created from Python, each with its conjugate held in a list, all "
            "unreachable; one `rt.collect_garbage()` (median over rounds, each on a fresh "
            "runtime). *managed* is the wall time minus the native phases: handing the K "
            "handles over and swapping each conjugate's pointer for the expired sentinel. "
            "Flat ns/conjugate across K shows the promise that expiring K conjugates costs "
            "O(K), whatever the size of the heap."
        ),
    )
    failures: list[str] = []
    per: dict[int, Stats] = {}
    for k in config.expiry_sizes:
        rounds = config.expiry_rounds(k)
        progress(config, f"{NAME}: {rounds} x expiring {k:,} conjugates")
        walls, managed = [], []
        for _ in range(rounds):
            wall, managed_part, expired, every = _expire_once(k)
            walls.append(wall)
            managed.append(managed_part)
            if expired != k or not every:
                failures.append(
                    f"expiry of {k:,}: {expired:,} conjugates expired, all "
                    f"observed expired: {every}"
                )
        wall_stats, managed_stats = summarize(walls), summarize(managed)
        per[k] = wall_stats
        expiry.add(
            f"{k:,}",
            rounds,
            f"{wall_stats.median * 1e3:,.2f}",
            fmt_ns(wall_stats.median / k),
            f"{managed_stats.median * 1e3:,.2f}",
            fmt_ns(managed_stats.median / k),
            fmt_ns(wall_stats.max / k),
        )
        record(f"expiry.{k}.per_conjugate", wall_stats.median / k)
        record(f"expiry.{k}.managed_per_conjugate", managed_stats.median / k)
    sizes = config.expiry_sizes
    if len(sizes) > 1:
        first, last = per[sizes[0]].median / sizes[0], per[sizes[-1]].median / sizes[-1]
        expiry.notes.append(
            f"ns/conjugate at K = {sizes[-1]:,} is x{last / first:.2f} the "
            f"figure at K = {sizes[0]:,} (1.00: cost exactly linear in K)"
        )
    expiry.notes += [f"CHECK FAILED: {f}" for f in failures]
    expiry.failures += failures

    count = 2_000 if config.quick else 100_000
    progress(config, f"{NAME}: Python bytes of {count:,} conjugates (tracemalloc)")
    traced, proxy, handle, native = _conjugate_bytes(count)
    memory = Table(
        f"{TITLE}: bytes per conjugate",
        ["what", "bytes"],
        description=(
            f"Creating {count:,} `ExpiryNode` objects (an Int32 and a reference) from Python, "
            "each kept in a preallocated list: the Python heap growth per object traced by "
            "`tracemalloc`, the `sys.getsizeof` of its parts, and the native bytes per "
            "object (`rt.native_memory()` live bytes)."
        ),
    )
    memory.add("Python bytes per conjugate (tracemalloc)", f"{traced:,.1f}")
    memory.add("  the conjugate (`sys.getsizeof(obj)`: a C object, no GC header)", proxy)
    memory.add(
        "  the conjugate table, the rest (traced minus the conjugate)", f"{traced - proxy:,.1f}"
    )
    memory.add("  made on demand, not counted above: the handle int (`obj.handle`)", handle)
    memory.add("native bytes per object (object + item + tables)", f"{native:,.1f}")
    record("expiry.bytes_per_conjugate", traced)
    record("expiry.native_bytes_per_object", native)
    return [expiry, memory]
