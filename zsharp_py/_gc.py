"""``rt.gc``: collection control, statistics and heap verification."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._errors import HeapCorruptionError
from ._native import ffi, lib

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["GcStats", "GarbageCollector"]


@dataclass(frozen=True)
class GcStats:
    """Figures of the last collection cycle."""

    cycle: int
    """Number of mark phases run so far."""
    objects_scanned: int
    """Objects whose references the marker read."""
    objects_marked: int
    """Objects found reachable (roots included; permanent objects excluded)."""
    objects_unreachable: int
    objects_freed: int
    references_killed: int
    """Killable references set to None because their target was garbage."""
    roots: int
    permanent_objects: int
    clusters: int
    live_objects: int
    conjugates_expired: int
    mark_seconds: float
    gather_seconds: float
    purge_seconds: float


class GarbageCollector:
    """Garbage collector controls of one runtime (``rt.gc``)."""

    __slots__ = ("_rt", "_last_expired")

    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime
        self._last_expired = 0

    def collect(self) -> GcStats:
        """Run a full, stop-the-world collection (same as ``rt.collect_garbage()``)."""
        return self._rt.collect_garbage()

    def stats(self) -> GcStats:
        """The last cycle's figures."""
        raw = ffi.new("zs_gc_stats *")
        self._rt._call(lib.zs_gc_get_stats, raw)
        return GcStats(
            cycle=raw.cycle, objects_scanned=raw.objects_scanned,
            objects_marked=raw.objects_marked, objects_unreachable=raw.objects_unreachable,
            objects_freed=raw.objects_freed, references_killed=raw.references_killed,
            roots=raw.roots, permanent_objects=raw.permanent_objects, clusters=raw.clusters,
            live_objects=raw.live_objects, conjugates_expired=self._last_expired,
            mark_seconds=raw.mark_ns / 1e9, gather_seconds=raw.gather_ns / 1e9,
            purge_seconds=raw.purge_ns / 1e9)

    def verify(self) -> None:
        """Check every item, object and reference; raise ``HeapCorruptionError``."""
        message = ffi.new("char[]", 512)
        if self._rt._call(lib.zs_heap_verify, message, 512) != 0:
            raise HeapCorruptionError(ffi.string(message).decode("utf-8", "replace"))
