"""``rt.gc``: collection control (full, incremental, per-frame), statistics,
clusters and heap verification."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ._errors import HeapCorruptionError
from ._native import check, ffi, lib

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["GcStats", "GcSettings", "GcStress", "GarbageCollector", "GcPhase", "GcTick"]

GcPhase = Literal["idle", "marking", "gathering", "purging"]
GcTick = Literal["idle", "started", "advanced", "finished"]
_PHASES: dict[int, GcPhase] = {0: "idle", 1: "marking", 2: "purging", 3: "gathering"}
_IDLE, _MARKING, _PURGE_PENDING, _GATHERING = 0, 1, 2, 3


@dataclass(frozen=True)
class GcStats:
    """Figures of the last collection cycle (incremental cycles: summed over
    their steps)."""

    cycle: int
    """Number of cycles started so far."""
    objects_scanned: int
    """Objects whose references the marker read (cluster members are not read)."""
    objects_marked: int
    """Objects found reachable (roots and cluster members included; permanent
    objects excluded)."""
    objects_unreachable: int
    objects_freed: int
    references_killed: int
    """Killable references set to None because their target was garbage."""
    roots: int
    permanent_objects: int
    clusters: int
    """Live clusters after gathering."""
    clusters_marked: int
    """Clusters marked reachable as a unit."""
    clusters_dissolved: int
    live_objects: int
    conjugates_expired: int
    mark_seconds: float
    gather_seconds: float
    purge_seconds: float
    mark_steps: int
    """Incremental steps of the cycle (1 for a full collection)."""
    barrier_marks: int
    """Objects the write barrier marked during an incremental cycle."""
    mark_threads: int
    """Threads that marked (more than 1 for a parallel full collection)."""
    gathers_aborted: int = 0
    """1 when the cycle ran out of native memory while gathering the
    unreachable objects: it was given up and every object survived it."""


@dataclass(frozen=True)
class GcStress:
    """Stress switches that make collector bugs loud (``Runtime(stress=...)``),
    after V8's ``--gc-interval``/``--verify-heap``, Go's ``gccheckmark`` and
    ``clobberfree``, and Unreal's ``gc.VerifyNoUnreachableObjects``. All are
    slow; none changes what a correct program observes, except that objects
    only Python holds are collected sooner."""

    collect_every: int = 0
    """Run a full collection before every Nth object creation (0: off)."""
    check_marks: bool = False
    """After every mark, a second simple mark must find nothing unmarked
    (failures make ``rt.gc.verify()`` raise)."""
    objects_per_step: int = 0
    """Incremental steps scan at most this many objects (1 stresses the
    write barrier hardest; 0: off)."""
    poison_freed: bool = False
    """Fill freed native memory with 0xDD."""
    mark_stack_limit: int = 0
    """Mark stacks hold at most this many entries, forcing the overflow
    rescan path (0: off)."""
    allocation_limit: int = 0
    """Native allocations fail (``MemoryError``) past this many live bytes
    (0: off): fault injection."""


@dataclass
class GcSettings:
    """Policy of ``rt.gc.tick(dt)``, the per-frame driver (seed 002)."""

    time_between_collections: float = 1.0
    """Seconds of ticks between the start of two incremental cycles."""
    reachability_budget: float = 0.002
    """Seconds of marking (and gathering) per tick while a cycle is pending."""
    purge_budget: float = 0.002
    """Seconds of destruction per tick while a purge is pending."""


class GarbageCollector:
    """Garbage collector controls of one runtime (``rt.gc``)."""

    __slots__ = ("_rt", "_last_expired", "settings", "_since_cycle")

    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime
        self._last_expired = 0
        self.settings = GcSettings()
        """Settings of ``tick`` (a mutable ``GcSettings``)."""
        self._since_cycle = 0.0

    # ---- full collection ------------------------------------------------
    def collect(self) -> GcStats:
        """Run a full, stop-the-world collection (same as ``rt.collect_garbage()``)."""
        return self._rt.collect_garbage()

    # ---- incremental collection -----------------------------------------
    @property
    def phase(self) -> GcPhase:
        """``"idle"``, ``"marking"``, ``"gathering"`` or ``"purging"``."""
        return _PHASES[int(self._rt._call(lib.zs_gc_phase_of))]

    def start_incremental(self) -> None:
        """Begin an incremental cycle (finishing a pending purge first).

        While it is pending, the write barrier marks every object stored into
        a reference, rooted or strongly referenced, and new objects are born
        reachable, so nothing live is collected. Advance it with ``step``.
        """
        runtime = self._rt
        with runtime._collection("gc.start_incremental()") as pointer:
            runtime._flush_deferred()
            if lib.zs_gc_phase_of(pointer) in (_MARKING, _GATHERING):
                raise RuntimeError("an incremental cycle is already in progress")
            runtime._expire_dying()
            check(lib.zs_gc_start_incremental(pointer), "start_incremental", self._rt)
            self._last_expired = 0

    def step(self, budget_s: float = 0.001) -> bool:
        """Advance the pending cycle for about ``budget_s`` seconds.

        Marks, then gathers the unreachable objects, expires their
        conjugates and destroys them, each under the budget. Returns True
        when the cycle is complete (also when none was pending).
        """
        if not budget_s > 0:
            raise ValueError(f"budget_s must be positive, got {budget_s!r}")
        runtime = self._rt
        deadline = time.perf_counter() + budget_s
        done = ffi.new("int *")
        with runtime._collection("gc.step()") as pointer:
            runtime._flush_deferred()
            phase = lib.zs_gc_phase_of(pointer)
            progressed = False
            if phase in (_MARKING, _GATHERING):
                check(lib.zs_gc_step(pointer, _nanoseconds(budget_s), done), "gc.step", self._rt)
                if not done[0]:
                    return False
                progressed = True
            expired = runtime._expire_dying(deadline)
            self._last_expired += expired
            if lib.zs_gc_expiring_count(pointer):
                return False
            progressed = progressed or expired > 0
            if lib.zs_gc_pending_purge(pointer) == 0:
                return True
            # Every step makes progress: one that did nothing else yet
            # purges at least a few objects, however small the budget.
            remaining = deadline - time.perf_counter()
            if remaining <= 0 and progressed:
                return False
            check(lib.zs_gc_purge(pointer, _nanoseconds(max(remaining, 0.0)), done), "gc.step",
                  self._rt)
            return bool(done[0])

    def tick(self, dt: float) -> GcTick:
        """Per-frame driver: advance whatever is pending under the settings'
        budgets, or start a new incremental cycle once
        ``settings.time_between_collections`` seconds of ticks have passed.

        Returns what this tick did: ``"idle"`` (nothing due), ``"started"``
        (a cycle began and is still pending), ``"advanced"`` (a pending cycle
        progressed) or ``"finished"`` (the cycle completed in this tick).
        """
        if not dt >= 0:
            raise ValueError(f"dt must be >= 0, got {dt!r}")
        self._since_cycle += dt
        phase = self.phase
        if phase == "idle":
            if self._since_cycle < self.settings.time_between_collections:
                return "idle"
            self._since_cycle = 0.0
            self.start_incremental()
            return "finished" if self.step(self.settings.reachability_budget) else "started"
        budget = (self.settings.purge_budget if phase == "purging"
                  else self.settings.reachability_budget)
        return "finished" if self.step(budget) else "advanced"

    # ---- figures and checks ---------------------------------------------
    def stats(self) -> GcStats:
        """The last cycle's figures."""
        raw = ffi.new("zs_gc_stats *")
        self._rt._call(lib.zs_gc_get_stats, raw)
        return GcStats(
            cycle=raw.cycle, objects_scanned=raw.objects_scanned,
            objects_marked=raw.objects_marked, objects_unreachable=raw.objects_unreachable,
            objects_freed=raw.objects_freed, references_killed=raw.references_killed,
            roots=raw.roots, permanent_objects=raw.permanent_objects, clusters=raw.clusters,
            clusters_marked=raw.clusters_marked, clusters_dissolved=raw.clusters_dissolved,
            live_objects=raw.live_objects, conjugates_expired=self._last_expired,
            mark_seconds=raw.mark_ns / 1e9, gather_seconds=raw.gather_ns / 1e9,
            purge_seconds=raw.purge_ns / 1e9, mark_steps=raw.mark_steps,
            barrier_marks=raw.barrier_marks, mark_threads=raw.mark_threads,
            gathers_aborted=raw.gathers_aborted)

    def cluster_count(self) -> int:
        """Number of live clusters."""
        return int(self._rt._call(lib.zs_cluster_count))

    def verify(self) -> None:
        """Check every item, object, cluster and reference; raise
        ``HeapCorruptionError`` on any inconsistency."""
        message = ffi.new("char[]", 512)
        if self._rt._call(lib.zs_heap_verify, message, 512) != 0:
            raise HeapCorruptionError(ffi.string(message).decode("utf-8", "replace"))

    # ---- test-only switches ---------------------------------------------
    def _debug_disable_barrier(self, disabled: bool) -> None:
        """Test-only: make the write barrier do nothing (proves tests catch it)."""
        check(self._rt._call(lib.zs_debug_set, lib.ZS_DEBUG_DISABLE_BARRIER, int(disabled)),
              "debug", self._rt)

    def _apply_stress(self, stress: GcStress) -> None:
        """Set the native stress switches of ``stress``."""
        for what, value in ((lib.ZS_DEBUG_CHECK_MARKS, int(stress.check_marks)),
                            (lib.ZS_DEBUG_STEP_OBJECTS, stress.objects_per_step),
                            (lib.ZS_DEBUG_POISON_FREED, int(stress.poison_freed)),
                            (lib.ZS_DEBUG_MARK_STACK_LIMIT, stress.mark_stack_limit),
                            (lib.ZS_DEBUG_ALLOC_LIMIT, stress.allocation_limit)):
            if value < 0:
                raise ValueError(f"stress settings must be >= 0, got {stress!r}")
            check(self._rt._call(lib.zs_debug_set, what, value), "stress", self._rt)

    def _debug_parallel_threshold(self, objects: int) -> None:
        """Test-only: live objects needed before a full mark goes parallel."""
        check(self._rt._call(lib.zs_debug_set, lib.ZS_DEBUG_PARALLEL_THRESHOLD, objects), "debug",
              self._rt)


def _nanoseconds(seconds: float) -> int:
    return max(1, int(seconds * 1e9))
