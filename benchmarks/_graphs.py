"""The benchmark graphs, shared by every peer: the same shapes and the same
random edges in Python (CPython's ``gc``, zsharp_py heaps built from Python)
and in the C programs (``csrc/graph.h``: zsharp and Boehm heaps built
natively).

Nodes have four reference slots ``a b c d``.

tree
    allocation-ordered 4-ary tree: node ``i`` is stored in slot
    ``(i - 1) % 4`` of node ``(i - 1) // 4``; node 0 is the root.
random
    node ``i``: ``a`` is node ``i - 1`` (a chain that keeps everything
    reachable from the last node, the root) and ``b c d`` are random earlier
    nodes drawn by ``GraphRandom`` (a 64-bit LCG, the high 32 bits as output,
    multiply-shift reduction to ``[0, i)``), seeded with ``GRAPH_SEED``.

Dropping half: for the tree, the root slots whose subtrees hold closest to
half of the nodes are cleared (``tree_drop_plan``); for the random graph the
root moves to node ``n // 2 - 1``: edges only point back, so nodes
``n // 2 .. n - 1`` become unreachable and everything before stays
reachable through the chain.

``random_checksum`` folds the drawn indices the way the C programs do, so a
run can check that every peer built the same graph.
"""

from __future__ import annotations

from array import array

__all__ = [
    "GRAPH_SEED",
    "SLOTS",
    "random_picks",
    "random_checksum",
    "tree_subtree_size",
    "tree_drop_plan",
    "tree_drop_mask",
    "random_drop_survivors",
]

GRAPH_SEED = 20240611
SLOTS = ("a", "b", "c", "d")

_MASK = (1 << 64) - 1
_MULTIPLIER = 6364136223846793005
_INCREMENT = 1442695040888963407
_FNV_OFFSET = 14695981039346656037
_FNV_PRIME = 1099511628211


def random_picks(n: int, seed: int = GRAPH_SEED) -> array[int]:
    """For each node ``i >= 1``, the three random earlier nodes ``b c d``
    (at ``3 * i .. 3 * i + 2``), exactly as ``csrc/graph.h`` draws them."""
    picks = array("I", bytes(4 * 3 * n))
    state = seed
    multiplier, increment, mask = _MULTIPLIER, _INCREMENT, _MASK
    j = 3
    for i in range(1, n):
        state = (state * multiplier + increment) & mask
        picks[j] = ((state >> 32) * i) >> 32
        state = (state * multiplier + increment) & mask
        picks[j + 1] = ((state >> 32) * i) >> 32
        state = (state * multiplier + increment) & mask
        picks[j + 2] = ((state >> 32) * i) >> 32
        j += 3
    return picks


def random_checksum(picks: array[int]) -> int:
    """The edge checksum the C programs print (FNV-1a style fold)."""
    total, prime, mask = _FNV_OFFSET, _FNV_PRIME, _MASK
    for value in picks[3:]:
        total = ((total ^ value) * prime) & mask
    return total


def tree_subtree_size(n: int, start: int) -> int:
    """Nodes in the subtree of node ``start`` of the ``n``-node tree."""
    size, low, high = 0, start, start
    while low < n:
        size += min(high, n - 1) - low + 1
        low, high = 4 * low + 1, 4 * high + 4
    return size


def tree_drop_plan(n: int) -> tuple[tuple[str, ...], int]:
    """The root slots to clear so that the unreachable part is closest to half
    of the tree (the last level is filled from the left, so the root's four
    subtrees differ in size), and how many nodes that leaves reachable."""
    sizes = [tree_subtree_size(n, child) for child in range(1, 5)]
    best: tuple[float, int, int] | None = None
    for mask in range(1, 16):
        removed = sum(sizes[k] for k in range(4) if mask >> k & 1)
        key = (abs(removed - n / 2), bin(mask).count("1"), mask)
        if best is None or key < best:
            best = key
    assert best is not None
    mask = best[2]
    slots = tuple(SLOTS[k] for k in range(4) if mask >> k & 1)
    return slots, n - sum(sizes[k] for k in range(4) if mask >> k & 1)


def tree_drop_mask(n: int) -> int:
    """``tree_drop_plan`` as a bit mask (bit k: slot k), for the C programs."""
    slots, _ = tree_drop_plan(n)
    return sum(1 << SLOTS.index(slot) for slot in slots)


def random_drop_survivors(n: int) -> int:
    """Nodes still reachable once the random graph's root moves to node n//2-1."""
    return n // 2
