"""The CPython peer of ``gc_peers``, run in a child process so that its peak
RSS is the graph's alone:

    python -m benchmarks._cpython_heap SHAPE N ROUNDS DROP_SLOTS

builds the graph (``_graphs``) as ``__slots__`` objects (four slots: 16 bytes
of object header, 16 of GC header and 32 of slots, 64 bytes like the other
peers' nodes), then times ``gc.collect()`` with everything live (one warm-up,
ROUNDS timed), then drops half (tree: the root slots in DROP_SLOTS, e.g.
``a,b``; random: the root moves to node n/2 - 1) and times the reference
counting that frees it and one more ``gc.collect()``. Prints one JSON line
in the C programs' format (times in ns).
"""

from __future__ import annotations

import gc
import json
import sys
import time
from typing import Any

from ._graphs import random_checksum, random_picks

clock = time.perf_counter_ns


class Node:
    __slots__ = ("a", "b", "c", "d")

    def __init__(self) -> None:
        self.a: Node | None = None
        self.b: Node | None = None
        self.c: Node | None = None
        self.d: Node | None = None


def _status_kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def _build_tree(n: int) -> Node:
    nodes: list[Node] = []
    append = nodes.append
    slots = ("a", "b", "c", "d")
    for i in range(n):
        node = Node()
        if i:
            setattr(nodes[(i - 1) >> 2], slots[(i - 1) & 3], node)
        append(node)
    return nodes[0]


def _build_random(n: int, picks: Any) -> tuple[Node, Node]:
    nodes: list[Node] = []
    append = nodes.append
    previous: Node | None = None
    for i in range(n):
        node = Node()
        if i:
            j = 3 * i
            node.a = previous
            node.b = nodes[picks[j]]
            node.c = nodes[picks[j + 1]]
            node.d = nodes[picks[j + 2]]
        append(node)
        previous = node
    assert previous is not None
    return previous, nodes[n // 2 - 1]


def main(argv: list[str]) -> int:
    shape, n, rounds, drop = argv[0], int(argv[1]), int(argv[2]), argv[3]
    gc.disable()
    out: dict[str, Any] = {"peer": "cpython", "shape": shape, "n": n}
    gc.collect()
    out["rss_before_kb"] = _status_kb("VmRSS")  # before the edges: freed again below
    picks = None
    if shape == "random":
        picks = random_picks(n)
        out["checksum"] = random_checksum(picks)
    gc.collect()
    gc.freeze()  # what exists now is not the graph's: keep it out of every collection
    start = clock()
    middle: Node | None = None
    if shape == "tree":
        root = _build_tree(n)
    else:
        root, middle = _build_random(n, picks)
    out["build"] = clock() - start
    picks = None
    out["rss_built_kb"] = _status_kb("VmRSS")

    gc.collect()  # warm-up
    walls, cpus = [], []
    for _ in range(rounds):
        cpu, start = time.process_time_ns(), clock()
        found = gc.collect()
        walls.append(clock() - start)
        cpus.append(time.process_time_ns() - cpu)
        if found:
            out["failures"] = out.get("failures", 0) + 1
    out["live_walls"] = walls
    out["live_cpus"] = cpus

    start = clock()
    if shape == "tree":
        for slot in drop.split(","):
            setattr(root, slot, None)  # reference counting frees the subtree here
    else:
        assert middle is not None
        root = middle  # frees nodes n/2 .. n-1 by reference counting
    out["drop_mutation"] = clock() - start
    start = clock()
    gc.collect()
    out["drop_wall"] = clock() - start
    out.setdefault("failures", 0)
    out["peak_rss_kb"] = _status_kb("VmHWM")
    print(json.dumps(out), flush=True)
    del root, middle
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
