"""``rt.gc``: collection control (full, incremental, per-frame), statistics,
clusters and heap verification.

A front over the collection protocol, which runs in C
(native/binding/zpy_collection.c): this module checks and converts the
arguments, holds the runtime's lock and re-entry guard around each call,
and keeps the settings and the per-frame ``tick``. It sees the runtime
through ``RuntimeInternals`` (zsharp_py/_base/context.py), never importing
``runtime.py``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .. import _core
from .._base.errors import HeapCorruptionError, check

if TYPE_CHECKING:
    from .._base.context import RuntimeInternals

__all__ = ["GcStats", "GcSettings", "GcStress", "GarbageCollector", "GcPhase", "GcTick"]

GcPhase = Literal["idle", "marking", "gathering", "purging"]
"""``rt.gc.phase``: what the collector has pending (native ``zs_gc_phase``)."""
GcTick = Literal["idle", "started", "advanced", "finished"]
_PHASES: dict[int, GcPhase] = {
    _core.GC_IDLE: "idle",
    _core.GC_MARKING: "marking",
    _core.GC_PURGE_PENDING: "purging",
    _core.GC_GATHERING: "gathering",
}


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
    objects_freed_unshared: int = 0
    """Objects destroyed without a collection between the previous cycle's
    start and this one's: made by Python, their handle never given out
    (stored, passed to the host, read as ``handle``), they were freed as
    soon as their conjugate was dropped (docs/garbage-collector.md). Not
    counted in ``objects_freed``."""
    barrier_slots: int = 0
    """Reference slots the write barrier looked at during this incremental
    cycle: each store adds the references it wrote, never the rest of the
    container it wrote into, so a write during a mark costs what it writes."""


_LIFE_COLLECT = _core.LIFE_COLLECT
_STATS_LAYOUT = (
    GcStats,
    tuple(
        name.removesuffix("_ns") + "_seconds" if name.endswith("_ns") else name
        for name in _core.GC_STATS_FIELDS
    )
    + ("conjugates_expired",),
)
"""How the runtime's C part builds a ``GcStats`` (native/binding/zpy_collection.c):
the class, and the field each ``zs_gc_stats`` member fills, in order
(``_core.GC_STATS_FIELDS``; its ``*_ns`` members in seconds), then
``conjugates_expired``. Built in C because
a game collecting every frame would otherwise pay more for the figures than
for collecting a small heap; tests/gc/test_gc.py checks that every field is set."""
assert set(_STATS_LAYOUT[1]) == {f.name for f in dataclasses.fields(GcStats)}


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
    """Policy of ``rt.gc.tick(dt)``, the per-frame driver."""

    time_between_collections: float = 1.0
    """Seconds of ticks between the start of two incremental cycles."""
    reachability_budget: float = 0.002
    """Seconds of marking (and gathering) per tick while a cycle is pending."""
    purge_budget: float = 0.002
    """Seconds of destruction per tick while a purge is pending."""
    objects_per_tick: int = 0
    """When positive, each tick does this much work instead of spending the
    two time budgets above: the mark scans at most this many objects, the
    expiry and the purge handle at most this many each. Steps bounded by
    work are deterministic (the same game, the same steps, on any machine
    and under any load), as replays and lockstep games need."""


_DEFAULT_BUDGET = 0.001


class GarbageCollector:
    """Garbage collector controls of one runtime (``rt.gc``).

    The front of the collection protocol, which runs in C
    (native/binding/zpy_collection.c). Every path (a full collection, an
    incremental step, the per-frame ``tick``, a store refused because its
    target is dying) runs the same sequence under the runtime's lock: flush
    the native frees that finalisers queued, take the dying objects from the
    native side and expire their conjugates (before any memory goes:
    native/include/zsharp_managed.h, zs_gc_expire), then let the purge free
    them. Each cycle counts the conjugates it expired, for
    ``stats().conjugates_expired``, whichever path expired them (counted by
    the expiry in C). A full collection runs the whole sequence in one C
    call, an incremental step runs one bounded step of it in one C call.
    """

    __slots__ = ("_rt", "settings", "_since_cycle")

    def __init__(self, runtime: RuntimeInternals) -> None:
        self._rt = runtime
        self.settings = GcSettings()
        """Settings of ``tick`` (a mutable ``GcSettings``)."""
        self._since_cycle = 0.0

    # ---- full collection ------------------------------------------------
    def collect(self) -> GcStats:
        """Full stop-the-world collection: mark, expire conjugates, purge.

        A pending incremental cycle is finished rather than restarted.
        Returns the cycle's ``GcStats`` (``rt.collect_garbage()`` is the same).
        """
        runtime = self._rt
        with runtime._lock:  # runtime._collection, without a generator's frames
            runtime._life_enter(_LIFE_COLLECT, "collect_garbage()")
            try:
                if runtime._deferred_releases:
                    runtime._release_deferred()
                # The sequence of the class docstring: flush, expire what a
                # pending cycle gathered (counted in that cycle), mark and
                # gather, expire, purge. A native step refused because
                # Python code run meanwhile (a gc callback on an allocation,
                # a host function collecting natively) gathered more runs
                # again after their expiry.
                stats: GcStats = runtime._collect_full(_STATS_LAYOUT)
            finally:
                runtime._life_leave(_LIFE_COLLECT)
        return stats

    # ---- incremental collection -----------------------------------------
    @property
    def phase(self) -> GcPhase:
        """``"idle"``, ``"marking"``, ``"gathering"`` or ``"purging"``."""
        runtime = self._rt
        with runtime._lock:
            runtime._live_address()
            return _PHASES[int(runtime._heap_gc_phase())]

    def start_incremental(self) -> None:
        """Begin an incremental cycle (finishing a pending purge first).

        While it is pending, the write barrier marks every object stored into
        a reference, rooted or strongly referenced, and new objects are born
        reachable, so nothing live is collected. Advance it with ``step``.
        """
        runtime = self._rt
        with runtime._collection("gc.start_incremental()"):
            runtime._release_deferred()
            # Flush, refuse while a mark is pending, expire what a pending
            # cycle gathered, start: in C (zpy_collection.c).
            runtime._gc_start_incremental()

    def step(self, budget_s: float | None = None, *, max_objects: int | None = None) -> bool:
        """Advance the pending cycle by one bounded step.

        Marks, then gathers the unreachable objects, expires their
        conjugates and destroys them. The step is bounded by time
        (``budget_s`` seconds, default 0.001 when ``max_objects`` is not
        given either) or by work (``max_objects``: at most that many objects
        marked, expired and destroyed), or both. A step bounded by work
        alone is deterministic: the same heap and the same calls give the
        same steps on any machine, under any load. Every step makes
        progress: one that did nothing else destroys at least a few
        objects, however small its budget. Returns True when the cycle is
        complete (also when none was pending).
        """
        if budget_s is None and max_objects is None:
            budget_s = _DEFAULT_BUDGET
        budget_ns = _budget_nanoseconds(budget_s)
        objects = _object_budget(max_objects)
        runtime = self._rt
        with runtime._collection("gc.step()"):
            runtime._release_deferred()
            # Flush, mark, expire in batches, purge with what the budget
            # leaves: in C (zpy_collection.c), the deadline on CLOCK_MONOTONIC.
            return runtime._gc_step(budget_ns, objects)

    def tick(self, dt: float) -> GcTick:
        """Per-frame driver: advance whatever is pending under the settings'
        budgets, or start a new incremental cycle once
        ``settings.time_between_collections`` seconds of ticks have passed.

        Returns what this tick did: ``"idle"`` (nothing due), ``"started"``
        (a cycle began and is still pending), ``"advanced"`` (a pending cycle
        progressed) or ``"finished"`` (the cycle completed in this tick).
        """
        if isinstance(dt, bool) or not isinstance(dt, (int, float)):
            raise TypeError(f"dt must be a number of seconds (a float), not {type(dt).__name__}")
        if not dt >= 0:
            raise ValueError(f"dt must be >= 0, got {dt!r}")
        self._since_cycle += dt
        phase = self.phase
        if phase == "idle":
            if self._since_cycle < self.settings.time_between_collections:
                return "idle"
            self._since_cycle = 0.0
            self.start_incremental()
            return "finished" if self._tick_step(phase) else "started"
        return "finished" if self._tick_step(phase) else "advanced"

    def _tick_step(self, phase: GcPhase) -> bool:
        """One step of ``tick``, bounded as the settings say."""
        settings = self.settings
        if settings.objects_per_tick > 0:
            return self.step(None, max_objects=settings.objects_per_tick)
        return self.step(
            settings.purge_budget if phase == "purging" else settings.reachability_budget
        )

    # ---- expiry -----------------------------------------------------------
    def _expire_refused(self) -> None:
        """A native call was refused because an object it names is dying
        (gathered by an incremental cycle whose budgeted expiry has not
        reached it yet): expire every pending conjugate now, so that the
        refused object's conjugate already reads as expired when the error
        reaches the caller (``_base.errors.refused`` calls this)."""
        runtime = self._rt
        with runtime._lock:
            if not runtime._closed:
                runtime._gc_expire_pending()

    # ---- figures and checks ---------------------------------------------
    def stats(self) -> GcStats:
        """The last cycle's figures."""
        runtime = self._rt
        with runtime._lock:
            runtime._live_address()
            stats: GcStats = runtime._gc_stats(_STATS_LAYOUT)
        return stats

    def cluster_count(self) -> int:
        """Number of live clusters."""
        runtime = self._rt
        with runtime._lock:
            runtime._live_address()
            return int(runtime._heap_cluster_count())

    def verify(self) -> None:
        """Check every item, object, cluster and reference; raise
        ``HeapCorruptionError`` on any inconsistency."""
        runtime = self._rt
        with runtime._lock:
            runtime._live_address()
            message = runtime._heap_verify()
        if message is not None:
            raise HeapCorruptionError(message)

    # ---- test-only switches ---------------------------------------------
    def _debug_disable_barrier(self, disabled: bool) -> None:
        """Test-only: make the write barrier do nothing (proves tests catch it)."""
        check(self._debug_set(_core.DEBUG_DISABLE_BARRIER, int(disabled)), "debug", self._rt)

    def _apply_stress(self, stress: GcStress) -> None:
        """Set the native stress switches of ``stress``."""
        for what, value in (
            (_core.DEBUG_CHECK_MARKS, int(stress.check_marks)),
            (_core.DEBUG_STEP_OBJECTS, stress.objects_per_step),
            (_core.DEBUG_POISON_FREED, int(stress.poison_freed)),
            (_core.DEBUG_MARK_STACK_LIMIT, stress.mark_stack_limit),
            (_core.DEBUG_ALLOC_LIMIT, stress.allocation_limit),
        ):
            if value < 0:
                raise ValueError(f"stress settings must be >= 0, got {stress!r}")
            check(self._debug_set(what, value), "stress", self._rt)

    def _debug_fail_expiries(self, count: int) -> None:
        """Test-only fault injection: the next ``count`` conjugate expiries
        (whoever collects: Python, a host, ``close()``) fail as running out
        of memory for the expired conjugate's record would. Each still
        expires, without its name in later errors, and the collection or
        ``close()`` raises ``MemoryError`` as it would for a real failure
        (or reports it to ``sys.unraisablehook`` when a host collected).
        0 disarms."""
        if isinstance(count, bool) or not isinstance(count, int):
            raise TypeError(f"count must be an int, not {type(count).__name__}")
        if not 0 <= count <= 0xFFFFFFFF:
            raise ValueError(f"count must be in 0..2**32-1, got {count!r}")
        runtime = self._rt
        with runtime._lock:
            runtime._live_address()
            runtime._expiry_faults = count

    def _debug_parallel_threshold(self, objects: int) -> None:
        """Test-only: live objects needed before a full mark goes parallel."""
        check(self._debug_set(_core.DEBUG_PARALLEL_THRESHOLD, objects), "debug", self._rt)

    def _debug_set(self, what: int, value: int) -> int:
        """Set one native ``ZS_DEBUG_*`` switch under the lock; the status."""
        runtime = self._rt
        with runtime._lock:
            runtime._live_address()
            status: int = runtime._heap_debug_set(what, value)
            return status


def _budget_nanoseconds(seconds: float | None) -> int:
    """A step's time budget in nanoseconds (0: none), checked."""
    if seconds is None:
        return 0
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(
            "budget_s must be a number of seconds (a float such as 0.001) or None, "
            f"not {type(seconds).__name__}"
        )
    if not seconds > 0:
        raise ValueError(f"budget_s must be positive, got {seconds!r}")
    return min(max(1, int(seconds * 1e9)), 2**63)


def _object_budget(objects: int | None) -> int:
    """A step's work budget in objects (0: none), checked."""
    if objects is None:
        return 0
    if isinstance(objects, bool) or not isinstance(objects, int):
        raise TypeError(f"max_objects must be an int or None, not {type(objects).__name__}")
    if not 1 <= objects <= 0xFFFFFFFF:
        raise ValueError(f"max_objects must be between 1 and {0xFFFFFFFF}, got {objects}")
    return objects
