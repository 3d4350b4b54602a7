"""Helpers shared by the tests."""

from __future__ import annotations

import gc
import re
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zsharp_py as zs
from zsharp_py._base.ffi import ffi, lib
from zsharp_py.collector import GcStats


def slice_of(nodeid: str, n: int) -> int:
    """The slice (0..n-1) a test id falls in for ``--slice K/N``
    (tests/conftest.py): a hash of the id, so a slice keeps its tests
    whatever else is selected, and N slices cover them all."""
    return zlib.crc32(nodeid.encode()) % n


def collect(rt: zs.Runtime) -> GcStats:
    """Run a full collection, then verify the native heap; return the stats.

    Every test collects through this helper so the heap is checked after
    every single collection.
    """
    stats = rt.collect_garbage()
    rt.gc.verify()
    return stats


def awaiting_expiry(rt: zs.Runtime, doomed: list[zs.Object]) -> list[zs.Object]:
    """Start an incremental cycle and step it past marking and gathering in
    steps bounded by work (64 objects: the same steps on any machine and
    under any load); return those of ``doomed`` (unreachable) whose
    conjugates the bounded expiry has not reached yet. Finish the cycle with
    ``finish_cycle``."""
    rt.gc.start_incremental()
    while rt.gc.phase in ("marking", "gathering"):
        rt.gc.step(max_objects=64)
    pending = [obj for obj in doomed if not obj.is_expired]
    assert pending, "expiry finished in one step: nothing left pending"
    return pending


def finish_cycle(rt: zs.Runtime) -> None:
    """Step the pending incremental cycle to its end, then verify the heap."""
    while not rt.gc.step(budget_s=0.01):
        pass
    rt.gc.verify()


def assert_no_leaked_values(rt: zs.Runtime) -> None:
    """Collect, then assert that every black value has been freed. Views
    cached in their parent form reference cycles, so Python's cycle
    collector runs too when values are still alive after the first pass."""
    collect(rt)
    if rt.values_alive():
        gc.collect()
        collect(rt)
    assert rt.values_alive() == 0


def growth(rt: zs.Runtime, operation: Callable[[], object], times: int = 1000) -> tuple[int, int]:
    """What ``operation`` run ``times`` times (after two runs that warm
    every cache up) leaves allocated: (bytes Python's allocators hold more,
    as tracemalloc traces them: PyMem and PyObject, which the binding uses;
    native blocks the runtime owns more). A leak of n bytes or blocks a call
    shows as about n * times; a one-off cache, as a constant."""
    operation()
    operation()
    gc.collect()
    blocks = rt.native_memory()["live_blocks"]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(times):
            operation()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return after - before, rt.native_memory()["live_blocks"] - blocks


def warm_up(rt: zs.Runtime) -> None:
    """Register every test class in ``rt`` and exercise the collector's
    internal lists once (roots, references, garbage, expiry), so that the
    runtime's one-off native blocks exist before a memory baseline is taken."""
    from classes import Actor, Hero, Item

    objects = [Actor(), Hero(), Item()]
    objects[0].add_to_root()
    objects[0].target = objects[1]
    objects[1].target = objects[0]
    objects[2].mark_as_garbage()
    collect(rt)
    objects[0].remove_from_root()
    collect(rt)
    assert rt.live_objects() == 0
    assert all(o.is_expired for o in objects)


# Why a view or black value expired, as its ExpiredConjugateError says.
SCOPE = "scope it was obtained in has ended"
STRUCTURE = "changed structure"
PARENT = "what it points into has expired"
CLOSED = "runtime was closed"
DISPOSED = "disposed"


def declared_functions(header: Path) -> set[str]:
    """The names of the functions a C header declares (comments ignored)."""
    text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
    found = re.findall(
        r"^[A-Za-z_][\w \*]*?\b(zs_[a-z0-9_]+)\s*\([^;{]*\)\s*;", text, flags=re.M | re.S
    )
    return set(found) - {"zs_status"}  # zs_status: the enum typedef


def runtime_ptr(rt: zs.Runtime) -> Any:
    """The cffi ``zs_runtime *`` of an open runtime, for a test calling the
    library through cffi (``ExpiredConjugateError`` once it is closed, as
    ``rt.native_address`` raises)."""
    return ffi.cast("zs_runtime *", rt.native_address)


def class_ptr(rt: zs.Runtime, cls: type[zs.Object]) -> Any:
    """The cffi ``zs_class *`` of ``cls`` in ``rt`` (registered on first use)."""
    return ffi.cast("zs_class *", rt._native_class_address(cls))


def made_by_class_name(rt: zs.Runtime, name: bytes) -> Any:
    """An object of the class named ``name`` made as a host makes one
    (``zs_find_class``, then ``zs_object_new``), rooted, and its proxy."""
    found, ref = ffi.new("zs_class **"), ffi.new("zs_ref *")
    assert lib.zs_find_class(runtime_ptr(rt), name, found) == 0
    status = lib.zs_object_new(runtime_ptr(rt), found[0], 0, lib.ZS_NAME_AUTO, 0, ref, ffi.NULL)
    assert status == 0
    assert lib.zs_add_to_root(runtime_ptr(rt), ref[0]) == 0
    return rt.object_from_handle(ref[0])
