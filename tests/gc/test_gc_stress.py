"""The collector's stress switches (GcStress): each is exercised, and the
checking ones are shown to catch the bugs they exist for."""

from __future__ import annotations

import pytest

import zsharp_py as zs
from helpers import collect, runtime_ptr
from zsharp_py.debug import GcStress, HeapCorruptionError


class Node(zs.Object):
    value: zs.Int32
    next: "Node | None"
    links: zs.Array["Node"]


def chain(length: int) -> tuple[Node, list[Node]]:
    head = Node(value=0)
    head.add_to_root()
    nodes = [head]
    for i in range(1, length):
        node = Node(value=i)
        nodes[-1].next = node
        nodes.append(node)
    return head, nodes


def test_check_marks_agrees_with_a_correct_collector() -> None:
    with zs.Runtime(stress=GcStress(check_marks=True)) as rt:
        _head, nodes = chain(200)
        for i, node in enumerate(nodes[:50]):
            node.links.append(nodes[-1 - i])
        garbage = [Node() for _ in range(100)]
        collect(rt)
        rt.gc.start_incremental()
        while not rt.gc.step(1e-5):
            nodes[0].links.append(Node(value=-1))  # stores during the cycle
        rt.gc.verify()
        assert all(g.is_expired for g in garbage)
        assert not any(n.is_expired for n in nodes)


def test_check_marks_catches_a_missing_write_barrier() -> None:
    with zs.Runtime(stress=GcStress(check_marks=True, objects_per_step=1)) as rt:
        holder = Node(value=-1)
        _head, nodes = chain(2_000)
        holder.add_to_root()  # rooted last: on top of the mark stack, scanned first
        moved = nodes[-1]
        rt.gc._debug_disable_barrier(True)
        rt.gc.start_incremental()
        for _ in range(5):  # the holder is scanned, the chain's tail is not
            rt.gc.step(1.0)
        holder.next = moved  # only reference now comes from a scanned object
        nodes[-2].next = None
        while not rt.gc.step(1.0):
            pass
        with pytest.raises(HeapCorruptionError, match="check-mark"):
            rt.gc.verify()


def test_collect_every_bounds_heap_growth_in_a_long_loop() -> None:
    with zs.Runtime(stress=GcStress(collect_every=50)) as rt:
        _head, nodes = chain(10)
        peak = 0
        for i in range(3_000):
            temporary = Node(value=i)  # dropped at once: garbage
            del temporary
            peak = max(peak, rt.live_objects())
        assert peak <= 10 + 50 + 1
        assert rt.gc.stats().cycle >= 3_000 // 50
        assert not any(n.is_expired for n in nodes)
        rt.gc.verify()


def test_one_object_per_step_needs_a_step_per_object() -> None:
    with zs.Runtime(stress=GcStress(objects_per_step=1)) as rt:
        _head, _nodes = chain(300)
        rt.gc.start_incremental()
        steps = 1
        while not rt.gc.step(1.0):
            steps += 1
        assert steps >= 300
        assert rt.gc.stats().objects_scanned == 300
        rt.gc.verify()


@pytest.mark.parametrize("threads", [1, 2])
def test_a_tiny_mark_stack_still_marks_everything(threads: int) -> None:
    def survivors(stress: GcStress) -> list[int]:
        with zs.Runtime(stress=stress, mark_threads=threads) as rt:
            rt.gc._debug_parallel_threshold(0)  # threads > 1: parallel marking
            head, nodes = chain(500)
            for i, node in enumerate(nodes):  # wide fan-out too
                for j in range(1, 4):
                    node.links.append(nodes[(i * 7 + j) % len(nodes)])
            head.next = None  # most are reachable only via links
            orphans = [Node(value=-1) for _ in range(50)]
            stats = collect(rt)
            assert stats.mark_threads == threads
            assert all(o.is_expired for o in orphans)
            return sorted(n.value for n in nodes if not n.is_expired)

    assert survivors(GcStress(mark_stack_limit=1)) == survivors(GcStress())


def test_poisoned_frees_change_nothing_observable() -> None:
    with zs.Runtime(stress=GcStress(poison_freed=True)) as rt:
        _head, nodes = chain(100)
        for node in nodes:
            node.links.extend([Node(value=7) for _ in range(3)])
        collect(rt)
        for node in nodes:
            node.links.clear()  # frees element storage
        collect(rt)
        assert [n.value for n in nodes] == list(range(100))
        assert rt.live_objects() == 100


def test_allocation_limit_raises_memory_error_and_keeps_the_heap_consistent() -> None:
    with zs.Runtime(stress=GcStress(allocation_limit=4_000_000)) as rt:
        head, _nodes = chain(10)
        created = []
        with pytest.raises(MemoryError):
            while True:
                created.append(Node(value=1))
        rt.gc.verify()
        live = rt.live_objects()
        # A container append that cannot allocate leaves the array as it was.
        with pytest.raises(MemoryError):
            while True:
                head.links.append(head)
        length = len(head.links)
        rt.gc.verify()
        assert all(link is head for link in head.links)
        del created  # unshared: freed when the collection starts, without marking
        stats = collect(rt)
        assert stats.objects_freed + stats.objects_freed_unshared == live - 10
        head.links.append(head)  # memory is available again
        assert len(head.links) == length + 1


def test_out_of_memory_while_gathering_never_frees_what_a_survivor_references() -> None:
    from zsharp_py._base.ffi import lib

    outcomes = set()
    for extra in range(0, 20_000, 1_000):
        with zs.Runtime(stress=GcStress(poison_freed=True)) as rt:
            _head, nodes = chain(5)
            doomed, doomed_nodes = chain(600)  # unreachable once unrooted
            doomed.remove_from_root()
            held = doomed_nodes[::7]  # some keep a conjugate
            del doomed, doomed_nodes
            used = rt.native_memory()["live_bytes"]
            # The limit also starves the collector's own lists, as a real
            # out-of-memory would: the cycle is given up or completes whole.
            lib.zs_debug_set(runtime_ptr(rt), lib.ZS_DEBUG_ALLOC_LIMIT, used + extra)
            lib.zs_debug_set(runtime_ptr(rt), lib.ZS_DEBUG_STRICT_ALLOC_LIMIT, 1)
            stats = collect(rt)
            lib.zs_debug_set(runtime_ptr(rt), lib.ZS_DEBUG_ALLOC_LIMIT, 0)
            outcomes.add(stats.gathers_aborted)
            if stats.gathers_aborted:
                assert stats.objects_freed == 0 and not any(n.is_expired for n in held)
                assert [n.value for n in held] == list(range(0, 600, 7))
                assert rt.live_objects() == 605
                stats = collect(rt)
            assert stats.gathers_aborted == 0 and stats.objects_freed == 600
            assert all(n.is_expired for n in held) and rt.live_objects() == 5
            assert [n.value for n in nodes] == list(range(5))
    assert outcomes == {0, 1}  # the sweep covers a given-up and a complete cycle


def test_stress_settings_are_validated() -> None:
    with pytest.raises(ValueError):
        zs.Runtime(stress=GcStress(objects_per_step=-1))
