"""Full garbage collection: how long one stop-the-world collection of a
zsharp_py heap takes, and how that grows with the heap, next to the same
object graph made of plain Python objects under CPython's ``gc.collect()``.

Two graphs of nodes with four object-reference fields ``a b c d``, built
by the same Python code for every peer:

tree
    allocation-ordered 4-ary tree: node ``i`` is referenced by node
    ``(i - 1) // 4`` (slot ``(i - 1) % 4``); node 0 is the root.
random
    node ``i``: ``a`` is node ``i - 1`` (a chain that keeps everything
    reachable from the last node, the root), ``b c d`` point at random
    earlier nodes (the shared generator of ``_graphs``: the same edges as
    ``gc_peers`` builds natively).

Measured per heap size: the collection with everything live (median of
several rounds), then, for the tree, one collection after dropping half of
it (the root's slots whose subtrees hold closest to half the nodes set to
None, see ``tree_drop_plan``). For zsharp_py the wall time is
split into the native phases reported by ``rt.gc.stats()`` (mark, gather,
purge) and the managed remainder (expiring the conjugates of the dying
objects, in Python). CPython frees an unreachable tree by reference counting
as soon as the reference is dropped, so its figure for the drop is that
deallocation plus the ``gc.collect()`` that follows.

Peers are ``Heap`` classes in ``PEERS``. This family measures heaps built
from Python (every object with its conjugate); ``gc_peers`` measures
natively built heaps against Boehm and the memory floors.
"""

from __future__ import annotations

import gc
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import zsharp_py as zs

from ._graphs import SLOTS, random_picks, tree_drop_plan
from ._harness import (
    Config,
    Stats,
    Table,
    Unavailable,
    clock,
    fmt_ms,
    fmt_ratio,
    gc_paused,
    host_gc_isolated,
    progress,
    time_rounds,
)

NAME = "gc_collect"
TITLE = "Garbage collection"

__all__ = ["NAME", "TITLE", "PEERS", "run"]


class GcNode(zs.Object):
    """A native node with four traced, killable references."""

    a: "GcNode | None"
    b: "GcNode | None"
    c: "GcNode | None"
    d: "GcNode | None"


class PyNode:
    """The same node as a plain Python object."""

    __slots__ = SLOTS


# ---------------------------------------------------------------------------
# Graphs: one builder per shape, shared by every peer
# ---------------------------------------------------------------------------


def build_tree(make: Callable[[], Any], n: int) -> Any:
    """Allocation-ordered 4-ary tree; returns node 0 (the root)."""
    nodes: list[Any] = []
    append = nodes.append
    slots = SLOTS
    for i in range(n):
        node = make()
        if i:
            setattr(nodes[(i - 1) >> 2], slots[(i - 1) & 3], node)
        append(node)
    return nodes[0]


def build_random(make: Callable[[], Any], n: int, picks: array[int]) -> Any:
    """Random back-references plus an ``a`` chain; returns the last node (the root)."""
    nodes: list[Any] = []
    append = nodes.append
    previous = None
    for i in range(n):
        node = make()
        if i:
            j = 3 * i
            node.a = previous
            node.b = nodes[picks[j]]
            node.c = nodes[picks[j + 1]]
            node.d = nodes[picks[j + 2]]
        append(node)
        previous = node
    return previous


# ---------------------------------------------------------------------------
# Peers
# ---------------------------------------------------------------------------


@dataclass
class Collection:
    """One collection: wall seconds and the phases the collector reports."""

    wall: float
    phases: dict[str, float] = field(default_factory=dict)
    marked: int | None = None
    freed: int | None = None


class Heap:
    """A peer's heap holding one graph. Subclasses: ``ZsHeap``, ``CPythonHeap``."""

    peer = ""
    make: Callable[[], Any]
    phase_names: tuple[str, ...] = ()

    def __init__(self, n: int) -> None:
        self.n = n

    def build(self, shape: str, picks: array[int] | None) -> None:
        """Build the graph and root it. The default runs the shared Python
        builders with ``make``; a peer whose nodes live in C overrides this."""
        if shape == "tree":
            root = build_tree(self.make, self.n)
        else:
            assert picks is not None
            root = build_random(self.make, self.n, picks)
        self.set_root(root)

    def set_root(self, root: Any) -> None:
        raise NotImplementedError

    def collect(self) -> Collection:
        raise NotImplementedError

    def drop(self, slots: tuple[str, ...]) -> None:
        """Set the root's ``slots`` to None (tree only): about half the heap
        becomes unreachable."""
        raise NotImplementedError

    def live_objects(self) -> int | None:
        return None

    def bytes_per_object(self) -> float | None:
        return None

    def conjugates_host_gc(self, rounds: int) -> Stats | None:
        """Cost of CPython's ``gc.collect()`` over the peer's proxies, if any."""
        return None

    def verify(self) -> None:
        pass

    def close(self) -> None:
        raise NotImplementedError


class ZsHeap(Heap):
    """The graph as native objects in a fresh ``zs.Runtime`` (made current)."""

    peer = "zsharp_py"
    make = GcNode
    phase_names = ("mark", "gather", "purge", "managed")

    def __init__(self, n: int) -> None:
        super().__init__(n)
        capacity = max(n + 1024, 2_162_688)
        self.runtime = zs.Runtime(max_objects=min(capacity, 33_554_432))
        self.runtime.__enter__()
        self.root: GcNode | None = None

    def set_root(self, root: Any) -> None:
        root.add_to_root()
        self.root = root

    def collect(self) -> Collection:
        start = clock()
        stats = self.runtime.collect_garbage()
        wall = clock() - start
        native = stats.mark_seconds + stats.gather_seconds + stats.purge_seconds
        return Collection(
            wall,
            {
                "mark": stats.mark_seconds,
                "gather": stats.gather_seconds,
                "purge": stats.purge_seconds,
                "managed": max(wall - native, 0.0),
            },
            marked=stats.objects_marked,
            freed=stats.objects_freed,
        )

    def drop(self, slots: tuple[str, ...]) -> None:
        assert self.root is not None
        for slot in slots:
            setattr(self.root, slot, None)

    def live_objects(self) -> int | None:
        return self.runtime.live_objects()

    def bytes_per_object(self) -> float | None:
        return self.runtime.native_memory()["live_bytes"] / max(self.runtime.live_objects(), 1)

    def conjugates_host_gc(self, rounds: int) -> Stats | None:
        # Every object built from Python has a conjugate, kept by the runtime's
        # mapping while the object lives; CPython's collector traverses them.
        stats, _ = time_rounds(gc.collect, rounds, warmup=1)
        return stats

    def verify(self) -> None:
        self.runtime.gc.verify()

    def close(self) -> None:
        self.root = None
        self.runtime.__exit__(None, None, None)


class CPythonHeap(Heap):
    """The graph as ``__slots__`` objects; collected by ``gc.collect()``."""

    peer = "CPython"
    make = PyNode

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.root: PyNode | None = None

    def set_root(self, root: Any) -> None:
        self.root = root

    def collect(self) -> Collection:
        start = clock()
        found = gc.collect()
        return Collection(clock() - start, freed=found)

    def drop(self, slots: tuple[str, ...]) -> None:
        assert self.root is not None
        for slot in slots:
            setattr(self.root, slot, None)  # reference counting frees the subtree here

    def close(self) -> None:
        self.root = None


# The first peer is the subject; ratios are subject / peer.
PEERS: list[type[Heap]] = [ZsHeap, CPythonHeap]


# ---------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------


@dataclass
class Measurement:
    peer: str
    shape: str
    n: int
    build: float = 0.0
    live: Stats | None = None
    live_phases: dict[str, float] = field(default_factory=dict)
    drop_mutation: float | None = None
    drop: Collection | None = None
    bytes_per_object: float | None = None
    host_gc: Stats | None = None
    failures: list[str] = field(default_factory=list)


def _median_phases(collections: list[Collection]) -> dict[str, float]:
    names = collections[0].phases.keys() if collections else ()
    out = {}
    for name in names:
        values = sorted(c.phases[name] for c in collections)
        out[name] = values[len(values) // 2]
    return out


def measure(
    heap_class: type[Heap], shape: str, n: int, picks: array[int] | None, config: Config
) -> Measurement:
    """Build one graph in one peer's heap and time its collections."""
    result = Measurement(heap_class.peer, shape, n)
    with host_gc_isolated():
        heap = heap_class(n)
        try:
            progress(config, f"{NAME}: {heap.peer}: building {shape} of {n:,} nodes")
            with gc_paused():
                start = clock()
                heap.build(shape, picks)
                result.build = clock() - start
            rounds = config.collect_rounds(n)
            progress(config, f"{NAME}: {heap.peer}: {rounds} collections, everything live")
            live, collections = time_rounds(heap.collect, rounds, warmup=1)
            result.live = live
            result.live_phases = _median_phases(collections)
            for c in collections:
                if c.marked is not None and c.marked != n:
                    result.failures.append(
                        f"{heap.peer} {shape} {n:,}: marked {c.marked:,} of {n:,} live objects"
                    )
                    break
            live_count = heap.live_objects()
            if live_count is not None and live_count != n:
                result.failures.append(
                    f"{heap.peer} {shape} {n:,}: {live_count:,} objects "
                    "live after collecting a fully live heap"
                )
            result.bytes_per_object = heap.bytes_per_object()
            result.host_gc = heap.conjugates_host_gc(3 if n < 1_000_000 or config.quick else 2)
            if shape == "tree":
                slots, expected = tree_drop_plan(n)
                progress(
                    config, f"{NAME}: {heap.peer}: clearing root.{'/'.join(slots)}, collecting"
                )
                with gc_paused():
                    start = clock()
                    heap.drop(slots)
                    result.drop_mutation = clock() - start
                    result.drop = heap.collect()
                live_count = heap.live_objects()
                if live_count is not None and live_count != expected:
                    result.failures.append(
                        f"{heap.peer} tree {n:,}: {live_count:,} objects "
                        f"live after the drop, expected {expected:,}"
                    )
                heap.verify()
        finally:
            with gc_paused():
                heap.close()
    return result


def run(config: Config) -> list[Table]:
    """Measure every peer on both graphs at every size; return the tables."""
    results: dict[tuple[str, str, int], Measurement] = {}
    missing: list[str] = []
    for n in config.heap_sizes:
        picks = None
        for shape in ("tree", "random"):
            if shape == "random":
                progress(config, f"{NAME}: drawing random edges for {n:,} nodes")
                picks = random_picks(n)
            for heap_class in PEERS:
                try:
                    results[(heap_class.peer, shape, n)] = measure(
                        heap_class, shape, n, picks, config
                    )
                except Unavailable as reason:
                    missing.append(f"{heap_class.peer}: not measured ({reason})")
    return _tables(config, results, sorted(set(missing)))


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------


def _ns_per(seconds: float | None, count: int | None) -> str:
    if seconds is None or not count:
        return "n/a"
    return f"{seconds * 1e9 / count:,.1f}"


def _tables(
    config: Config, results: dict[tuple[str, str, int], Measurement], missing: list[str]
) -> list[Table]:
    subject, *others = [cls.peer for cls in PEERS]
    sizes = config.heap_sizes
    failures = [f for m in results.values() for f in m.failures]

    live = Table(
        f"{TITLE}: full collection, everything live",
        [
            "graph",
            "objects",
            f"{subject} ms",
            "max ms",
            "ns/object",
            "mark ms",
            "gather ms",
            "purge ms",
            "managed ms",
        ]
        + [
            c for peer in others for c in (f"{peer} ms", f"{peer} ns/object", f"{subject} / {peer}")
        ],
        description=(
            "Median wall time of one full collection (rounds after a warm-up) with every "
            "object reachable, and the median native phases from `rt.gc.stats()`; "
            "*managed* is wall minus the native phases (Python-side work). The peer "
            "column is `gc.collect()` over the same graph of `__slots__` objects."
        ),
    )
    for shape in ("tree", "random"):
        for n in sizes:
            m = results.get((subject, shape, n))
            if m is None or m.live is None:
                continue
            phases = m.live_phases
            cells: list[Any] = [
                shape,
                f"{n:,}",
                fmt_ms(m.live.median),
                fmt_ms(m.live.max),
                _ns_per(m.live.median, n),
            ]
            cells += [fmt_ms(phases.get(p, float("nan"))) for p in ZsHeap.phase_names]
            for peer in others:
                o = results.get((peer, shape, n))
                if o is None or o.live is None:
                    cells += ["n/a"] * 3
                    continue
                cells += [
                    fmt_ms(o.live.median),
                    _ns_per(o.live.median, n),
                    fmt_ratio(m.live.median, o.live.median),
                ]
            live.add(*cells)
    for shape in ("tree", "random"):
        for peer in [subject, *others]:
            first = results.get((peer, shape, sizes[0]))
            last = results.get((peer, shape, sizes[-1]))
            if len(sizes) > 1 and first and last and first.live and last.live:
                growth = (last.live.median / sizes[-1]) / (first.live.median / sizes[0])
                live.notes.append(
                    f"{peer}, {shape}: ns/object at {sizes[-1]:,} is x{growth:.2f} "
                    f"the figure at {sizes[0]:,} (1.00 = linear cost)"
                )

    drop = Table(
        f"{TITLE}: collection after dropping half of the tree",
        [
            "objects",
            "freed",
            f"{subject} ms",
            "ns/freed",
            "mark ms",
            "gather ms",
            "purge ms",
            "managed ms",
        ]
        + [
            c
            for peer in others
            for c in (f"{peer} drop ms", f"{peer} collect ms", f"{subject} / {peer}")
        ],
        description=(
            "One collection after clearing the root slots whose subtrees hold closest to "
            "half the tree (a single sample per size). For zsharp_py, *managed* is mostly "
            "expiring the conjugates of the freed objects. CPython frees the dropped subtrees "
            "by reference counting when the reference is cleared (*drop*), then "
            "`gc.collect()` runs over the rest; the ratio compares with drop + collect."
        ),
    )
    for n in sizes:
        m = results.get((subject, "tree", n))
        if m is None or m.drop is None:
            continue
        freed = m.drop.freed
        cells = [
            f"{n:,}",
            f"{freed:,}" if freed is not None else "n/a",
            fmt_ms(m.drop.wall),
            _ns_per(m.drop.wall, freed),
        ]
        cells += [fmt_ms(m.drop.phases.get(p, float("nan"))) for p in ZsHeap.phase_names]
        for peer in others:
            o = results.get((peer, "tree", n))
            if o is None or o.drop is None or o.drop_mutation is None:
                cells += ["n/a"] * 3
                continue
            cells += [
                fmt_ms(o.drop_mutation),
                fmt_ms(o.drop.wall),
                fmt_ratio(m.drop.wall, o.drop_mutation + o.drop.wall),
            ]
        drop.add(*cells)

    build = Table(
        f"{TITLE}: building the graphs, and the conjugates' cost to CPython's collector",
        ["graph", "objects", f"{subject} build s", "us/object"]
        + [c for peer in others for c in (f"{peer} build s", "us/object", f"{subject} / {peer}")]
        + ["native bytes/object", "CPython gc.collect() over conjugates ms", "ns/conjugate"],
        description=(
            "Building runs the same Python code for every peer (one allocation and one to "
            "four reference stores per node). Every object built from Python keeps its "
            "conjugate in the runtime's mapping while it lives, and CPython's cyclic "
            "collector traverses those conjugates: the last columns are a full "
            "`gc.collect()` with only the zsharp_py heap's conjugates tracked."
        ),
    )
    for shape in ("tree", "random"):
        for n in sizes:
            m = results.get((subject, shape, n))
            if m is None:
                continue
            cells = [shape, f"{n:,}", f"{m.build:,.2f}", f"{m.build * 1e6 / n:,.2f}"]
            for peer in others:
                o = results.get((peer, shape, n))
                if o is None:
                    cells += ["n/a"] * 3
                    continue
                cells += [
                    f"{o.build:,.2f}",
                    f"{o.build * 1e6 / n:,.2f}",
                    fmt_ratio(m.build, o.build),
                ]
            cells += [
                f"{m.bytes_per_object:,.1f}" if m.bytes_per_object else "n/a",
                fmt_ms(m.host_gc.median) if m.host_gc else "n/a",
                _ns_per(m.host_gc.median if m.host_gc else None, n),
            ]
            build.add(*cells)

    tables = [live, drop, build]
    for table in tables:
        table.notes += missing
    live.notes += [f"CHECK FAILED: {f}" for f in failures]
    live.failures += failures
    return tables
