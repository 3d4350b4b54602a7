"""Incremental reachability with a write barrier, incremental purge, the
per-frame driver ``rt.gc.tick`` and parallel marking, checked against a
model of reachability (clusters and garbage marks included) computed in
Python."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import zsharp_py as zs
from classes import Actor, Asset, Hero, Loose, Part
from helpers import awaiting_expiry, collect, finish_cycle
from zsharp_py.collector import GcStats
from zsharp_py.debug import GcStress, HeapCorruptionError

FIELDS = ("a", "b", "c")
TINY = 1e-6  # a step budget that stops the marker at its first clock check


def step(rt: zs.Runtime, budget: float = TINY) -> bool:
    """One incremental step, then a heap check."""
    done = rt.gc.step(budget)
    rt.gc.verify()
    return done


def finish(rt: zs.Runtime, budget: float = 0.01) -> int:
    """Step (checking the heap after each step) until the cycle completes;
    return the number of steps."""
    steps = 1
    while not step(rt, budget):
        steps += 1
        assert steps < 1_000_000
    return steps


def chain_of(count: int, first: Actor) -> list[Actor]:
    """``first`` -> count new Actors through ``target``; return the new ones."""
    chain = [Actor(health=i) for i in range(count)]
    first.target = chain[0]
    for one, two in itertools.pairwise(chain):
        one.target = two
    return chain


# ---- the write barrier ---------------------------------------------------------


def barrier_scenario(rt: zs.Runtime) -> tuple[Actor, Actor, Actor]:
    """A rooted holder H, and a 20,000-object chain from another root ending
    in X (X -> Y). Start a cycle and step until H is scanned but the chain is
    not; then H.target = X and cut the chain's link to X. Return (H, X, Y)."""
    chain_root = Actor(name="ChainRoot")
    chain_root.add_to_root()  # first in the root list...
    holder = Actor(name="H")
    holder.add_to_root()  # ...so H, pushed last, is scanned first
    chain = chain_of(20_000, chain_root)
    x = Actor(name="X", health=42)
    y = Actor(name="Y", health=43)
    chain[-1].target = x
    x.target = y
    rt.gc.start_incremental()
    rt.gc.verify()
    for _ in range(3):
        assert not step(rt)
    assert rt.gc.phase == "marking"  # the chain is far from scanned
    assert rt.gc.stats().objects_scanned < 10_000
    holder.target = x  # H was scanned: only the barrier sees X now
    chain[-1].target = None  # and the chain no longer leads to X
    return holder, x, y


def test_write_barrier_keeps_an_object_stored_into_a_scanned_holder(rt: zs.Runtime) -> None:
    holder, x, y = barrier_scenario(rt)
    finish(rt)
    assert not x.is_expired and not y.is_expired
    assert holder.target is x and x.target is y
    assert (x.health, y.health) == (42, 43)
    stats = rt.gc.stats()
    assert stats.barrier_marks >= 1
    assert stats.mark_steps > 3
    # Everything is still consistent for the next full collection.
    collect(rt)
    assert not x.is_expired and holder.target is x


def test_without_the_barrier_the_same_scenario_loses_the_object(rt: zs.Runtime) -> None:
    """Proves the test above detects a missing barrier."""
    rt.gc._debug_disable_barrier(True)
    try:
        holder, x, y = barrier_scenario(rt)
        while not rt.gc.step(0.01):
            pass
        assert x.is_expired and y.is_expired
        # H now holds a dangling reference: the heap check sees it.
        with pytest.raises(HeapCorruptionError):
            rt.gc.verify()
        holder.target = None  # repair before anything else runs
        rt.gc.verify()
    finally:
        rt.gc._debug_disable_barrier(False)


def test_barrier_applies_to_roots_and_strong_pointers_added_mid_cycle(rt: zs.Runtime) -> None:
    first = Actor()
    first.add_to_root()
    chain_of(5000, first)
    rooted, strong = Actor(health=1), Actor(health=2)  # unreachable at the start
    rooted.target = Actor(health=3)
    strong.target = Actor(health=4)
    rt.gc.start_incremental()
    assert not step(rt)
    assert rt.gc.phase == "marking"
    rooted.add_to_root()
    pointer = zs.StrongObjectPtr(strong)
    finish(rt)
    assert not rooted.is_expired and rooted.target is not None and rooted.target.health == 3
    assert not strong.is_expired and strong.target is not None and strong.target.health == 4
    pointer.dispose()
    rooted.remove_from_root()
    collect(rt)
    assert rooted.is_expired and strong.is_expired


# ---- objects born during a cycle -------------------------------------------------


def test_objects_created_during_a_pending_mark_are_born_reachable(rt: zs.Runtime) -> None:
    keep = Actor()
    keep.add_to_root()
    chain = chain_of(5000, keep)
    old = Actor(health=-1)  # unreachable when the cycle starts
    old_child = Actor(health=-2)
    old.target = old_child
    rt.gc.start_incremental()
    assert not step(rt)
    assert rt.gc.phase == "marking"
    born = [Actor(health=i) for i in range(100)]
    for one, two in itertools.pairwise(born):
        one.target = two
    adopter = Actor(target=old)  # a newborn referencing an old unreachable object
    assert not step(rt)
    more = [Part(value=i) for i in range(10)]
    finish(rt)
    assert not any(o.is_expired for o in born + more + [adopter, old, old_child])
    assert [o.health for o in born] == list(range(100))
    assert adopter.target is old and old.target is old_child
    stats = collect(rt)
    assert all(o.is_expired for o in born + more + [adopter, old, old_child])
    assert stats.objects_freed == 100 + 10 + 3
    assert not any(o.is_expired for o in chain)


@pytest.mark.parametrize("budget", [TINY, 1e-9])
@pytest.mark.parametrize("driver", ["step", "tick"])
def test_steps_with_a_tiny_budget_always_make_progress(
    rt: zs.Runtime, driver: str, budget: float
) -> None:
    """Every step must advance the cycle, however small its budget: the
    marker scans a few objects, expiry takes a batch, the purge must free
    some objects too, or a frame budget below the call overhead never ends
    the cycle."""
    keep = Actor()
    keep.add_to_root()
    chain_of(500, keep)
    doomed = [Actor() for _ in range(1000)]
    rt.gc.settings.time_between_collections = 0.0
    rt.gc.settings.reachability_budget = budget
    rt.gc.settings.purge_budget = budget
    if driver == "step":
        rt.gc.start_incremental()
    for _ in range(20_000):
        finished = rt.gc.step(budget) if driver == "step" else rt.gc.tick(0.0) == "finished"
        if finished:
            break
    else:
        pytest.fail(
            f"the cycle did not complete in 20,000 steps of {budget} s: phase "
            f"{rt.gc.phase!r}, {rt.live_objects()} live objects, "
            f"{sum(o.is_expired for o in doomed)} of {len(doomed)} conjugates expired"
        )
    rt.gc.verify()
    assert all(o.is_expired for o in doomed)
    assert rt.live_objects() == 501


def test_step_and_start_incremental_argument_and_state_checks(rt: zs.Runtime) -> None:
    assert rt.gc.phase == "idle"
    assert rt.gc.step() is True  # nothing pending
    with pytest.raises(ValueError):
        rt.gc.step(0)
    with pytest.raises(ValueError):
        rt.gc.step(-1.0)
    keep = Actor()
    keep.add_to_root()
    chain_of(3000, keep)
    rt.gc.start_incremental()
    with pytest.raises(RuntimeError):
        rt.gc.start_incremental()
    rt.gc.verify()
    finish(rt)
    assert rt.gc.phase == "idle"
    with pytest.raises(ValueError):
        rt.gc.tick(-0.1)


# ---- the model -------------------------------------------------------------------


@dataclass
class ModelCluster:
    root: int
    members: set[int]  # the root included
    referenced: set[int] = field(default_factory=set)  # roots of referenced clusters
    referenced_by: set[int] = field(default_factory=set)
    mutable: set[int] = field(default_factory=set)


@dataclass
class Cycle:
    """What the model records while an incremental cycle is pending."""

    seeds: set[int]  # roots at the start, objects rooted / stored / born since
    edges: dict[int, set[int]]  # every reference present at any time
    together: list[set[int]]  # clusters that lived during the cycle


class World:
    """A random graph of Parts (Asset: cluster roots, Loose: never in a
    cluster; some with an outer) built through the API and mirrored by a
    Python model of references, roots, garbage marks and clusters. The model
    follows the documented rules: killable references to garbage are nulled,
    outers keep their object alive; a cluster is marked whole; a store into a
    member or a garbage mark on one dissolves the cluster and, recursively,
    the clusters that reference it; a cluster with a garbage mutable object
    dissolves when the next cycle starts."""

    def __init__(
        self, rt: zs.Runtime, seed: int, n: int, *, edge_p: float = 0.45, min_cluster_size: int = 3
    ) -> None:
        self.rt = rt
        self.rng = random.Random(seed)
        self.min_cluster_size = min_cluster_size
        self.objects: list[Part] = []
        self.kinds: list[type[Part]] = []
        self.outer: list[int | None] = []
        self.edges: list[dict[str, int | None]] = []
        self.roots: set[int] = set()
        self.garbage: set[int] = set()
        self.dead: set[int] = set()
        self.clusters: dict[int, ModelCluster] = {}  # by root
        self.cluster_of: dict[int, int] = {}  # object -> root of its cluster
        self.cycle: Cycle | None = None
        self.dying_allowed = False  # marking complete: unmarked objects refuse use
        self.refused = 0
        self.assets: list[int] = []
        for _ in range(n):
            self.new_object()
        for i in range(n):
            for f in FIELDS:
                if self.rng.random() < edge_p:
                    self.store(i, f, self.pick_target(i))
        for i in self.rng.sample(range(n), max(1, n // 40)):
            self.add_root(i)
        for _ in range(n // 30):
            self.try_cluster()
        for i in self.rng.sample(range(n), n // 40):
            self.mark_garbage(i)
        for _ in range(n // 60):
            self.try_cluster()

    # ---- operations, applied to the heap and to the model --------------
    def alive(self) -> list[int]:
        return [i for i in range(len(self.objects)) if i not in self.dead]

    def random_alive(self, among: list[int] | None = None) -> int | None:
        """A random live object (of ``among`` if given)."""
        pool = range(len(self.objects)) if among is None else among
        for _ in range(20):
            i = self.rng.choice(pool)
            if i not in self.dead:
                return i
        live = [i for i in pool if i not in self.dead]
        return self.rng.choice(live) if live else None

    def pick_target(self, near: int) -> int:
        """Mostly a nearby later object (chains and trees), sometimes any."""
        n = len(self.objects)
        if self.rng.random() < 0.7:
            target = (near + self.rng.randint(1, 8)) % n
        else:
            target = self.rng.randrange(n)
        while target in self.dead:
            target = self.rng.randrange(n)
        return target

    def attempt(self, action: Callable[[], object]) -> bool:
        """Run one API call; once marking is complete, a call involving an
        unmarked (dying) object is refused with ExpiredConjugateError and
        changes nothing."""
        try:
            action()
        except zs.ExpiredConjugateError:
            if not self.dying_allowed:
                raise
            self.refused += 1
            return False
        return True

    def new_object(self) -> int | None:
        roll = self.rng.random()
        cls: type[Part] = Asset if roll < 0.2 else Loose if roll < 0.4 else Part
        i = len(self.objects)
        outer = self.random_alive() if i > 0 and self.rng.random() < 0.15 else None
        made: list[Part] = []
        if not self.attempt(
            lambda: made.append(cls(value=i, outer=None if outer is None else self.objects[outer]))
        ):
            return None
        self.objects.append(made[0])
        self.kinds.append(cls)
        self.outer.append(outer)
        if cls is Asset:
            self.assets.append(i)
        self.edges.append(dict.fromkeys(FIELDS))
        if self.cycle is not None:
            self.cycle.seeds.add(i)  # born reachable
            if outer is not None:
                self.cycle.seeds.add(outer)
                self.cycle.edges.setdefault(i, set()).add(outer)
        return i

    def store(self, i: int, f: str, t: int | None) -> None:
        target = None if t is None else self.objects[t]
        if not self.attempt(lambda: setattr(self.objects[i], f, target)):
            return
        if i in self.cluster_of:
            self.dissolve(self.cluster_of[i])
        self.edges[i][f] = t
        if self.cycle is not None and t is not None:
            self.cycle.seeds.add(t)
            self.cycle.edges.setdefault(i, set()).add(t)

    def add_root(self, i: int) -> None:
        if not self.attempt(self.objects[i].add_to_root):
            return
        self.roots.add(i)
        if self.cycle is not None:
            self.cycle.seeds.add(i)

    def remove_root(self, i: int) -> None:
        self.objects[i].remove_from_root()
        self.roots.discard(i)

    def mark_garbage(self, i: int) -> None:
        if not self.attempt(self.objects[i].mark_as_garbage):
            return
        self.garbage.add(i)
        if i in self.cluster_of:
            self.dissolve(self.cluster_of[i])

    def references(self, i: int) -> list[int]:
        """Everything object i references strongly (its outer first)."""
        candidates = [self.outer[i], *self.edges[i].values()]
        return [t for t in candidates if t is not None]

    def can_join(self, i: int) -> bool:
        return self.kinds[i] is not Loose and i not in self.cluster_of and i not in self.garbage

    def try_cluster(self) -> None:
        root = self.random_alive(self.assets) if self.assets else None
        if root is None:
            return
        obj = self.objects[root]
        if self.cycle is not None:
            with pytest.raises(RuntimeError):
                obj.create_cluster()
            return
        if root in self.cluster_of or root in self.garbage:
            with pytest.raises(ValueError):
                obj.create_cluster()
            return
        members, work = {root}, [root]
        referenced: set[int] = set()
        mutable: set[int] = set()
        while work:
            for t in self.references(work.pop()):
                if t in members:
                    continue
                if self.can_join(t):
                    members.add(t)
                    work.append(t)
                elif t in self.cluster_of:
                    referenced.add(self.cluster_of[t])
                else:
                    mutable.add(t)
        size = obj.create_cluster()
        if len(members) < self.min_cluster_size:
            assert size == 0
            return
        assert size == len(members)
        self.clusters[root] = ModelCluster(root, members, referenced, set(), mutable)
        for m in members:
            self.cluster_of[m] = root
        for other in referenced:
            self.clusters[other].referenced_by.add(root)

    def dissolve_via_api(self, i: int) -> None:
        self.objects[i].dissolve_cluster()
        if i in self.cluster_of:
            self.dissolve(self.cluster_of[i])

    def dissolve(self, root: int) -> None:
        """A cluster and, recursively, the clusters that reference it."""
        pending = [root]
        while pending:
            cluster = self.clusters.get(pending.pop())
            if cluster is None:
                continue
            pending += cluster.referenced_by
            self.release(cluster)

    def release(self, cluster: ModelCluster) -> None:
        root = cluster.root
        del self.clusters[root]
        for m in cluster.members:
            del self.cluster_of[m]
        for other in cluster.referenced:
            if other in self.clusters:
                self.clusters[other].referenced_by.discard(root)
        for other in cluster.referenced_by:
            if other in self.clusters:
                self.clusters[other].referenced.discard(root)

    def dissolve_stale(self) -> None:
        """What every cycle does first: clusters with a garbage mutable object."""
        for root in list(self.clusters):
            cluster = self.clusters.get(root)
            if cluster is not None and cluster.mutable & self.garbage:
                self.dissolve(root)

    def random_op(self) -> None:
        roll = self.rng.random()
        i = self.random_alive()
        if i is None:  # everything died: start again from a new root
            j = self.new_object()
            if j is not None:
                self.add_root(j)
            return
        if roll < 0.55:
            t = None if self.rng.random() < 0.25 else self.pick_target(i)
            self.store(i, self.rng.choice(FIELDS), t)
        elif roll < 0.65:
            j = self.new_object()
            if j is not None:
                self.store(j, "a", self.pick_target(i))
                self.store(i, self.rng.choice(FIELDS), j)
        elif roll < 0.75:
            self.add_root(i)
        elif roll < 0.83:
            if self.roots:
                self.remove_root(self.rng.choice(sorted(self.roots)))
        elif roll < 0.88:
            self.mark_garbage(i)
        elif roll < 0.95:
            self.try_cluster()
        else:
            self.dissolve_via_api(i)

    # ---- reachability ------------------------------------------------------
    def reach(self, roots: set[int], *, clusters: bool) -> set[int]:
        """Objects marked from ``roots``: killable references to garbage are
        not followed, outers always are; reaching a cluster object reaches
        its whole cluster."""
        seen: set[int] = set()
        work: list[int] = []

        def add(x: int) -> None:
            if x in seen:
                return
            seen.add(x)
            work.append(x)
            if clusters and x in self.cluster_of:
                for m in self.clusters[self.cluster_of[x]].members:
                    add(m)

        for r in roots:
            add(r)
        while work:
            x = work.pop()
            outer = self.outer[x]
            if outer is not None:
                add(outer)
            for t in self.edges[x].values():
                if t is not None and t not in self.garbage:
                    add(t)
        return seen

    def settle_deaths(self, survivors: set[int], candidates: set[int]) -> set[int]:
        """Record the objects of ``candidates`` that did not survive."""
        deaths = candidates - survivors
        assert not deaths & self.roots, "a root was collected"
        for root, cluster in list(self.clusters.items()):
            gone = cluster.members & deaths
            assert not gone or gone == cluster.members, (
                f"cluster {root} was destroyed partly: {sorted(gone)} of {sorted(cluster.members)}"
            )
            if gone:
                self.release(cluster)
        self.dead |= deaths
        self.garbage -= deaths
        return deaths

    # ---- checks -------------------------------------------------------------
    def survivors(self, among: set[int]) -> set[int]:
        return {i for i in among if not self.objects[i].is_expired}

    def check(self) -> None:
        """The heap matches the model: life, values, references, clusters."""
        rt = self.rt
        rt.gc.verify()
        alive = self.alive()
        assert [i for i, o in enumerate(self.objects) if not o.is_expired] == alive
        for i in alive:
            obj = self.objects[i]
            assert obj.value == i
            outer = self.outer[i]
            assert obj.outer is (None if outer is None else self.objects[outer])
            for f, t in self.edges[i].items():
                got = getattr(obj, f)
                assert got is (None if t is None else self.objects[t]), (i, f, t, got)
            info = obj.cluster
            if i in self.cluster_of:
                root = self.cluster_of[i]
                cluster = self.clusters[root]
                assert info is not None, f"object {i} should be in cluster {root}"
                assert info.root is self.objects[root]
                assert (
                    info.objects,
                    info.referenced_clusters,
                    info.mutable_objects,
                    info.referenced_by,
                ) == (
                    len(cluster.members),
                    len(cluster.referenced),
                    len(cluster.mutable),
                    len(cluster.referenced_by),
                )
            else:
                assert info is None, f"object {i} should be in no cluster"
        assert rt.live_objects() == len(alive)
        assert rt.gc.cluster_count() == len(self.clusters)

    def full_collect(self) -> tuple[GcStats, set[int], set[tuple[int, str]]]:
        """A full collection, predicted exactly: (stats, survivors, killed references)."""
        assert self.cycle is None
        self.dissolve_stale()
        reached = self.reach(self.roots, clusters=True)
        marked_clusters = {r for r in self.clusters if r in reached}
        clustered = {m for r in marked_clusters for m in self.clusters[r].members}
        killed = {
            (i, f)
            for i in reached
            for f, t in self.edges[i].items()
            if t is not None and t in self.garbage
        }
        assert not {i for i, _ in killed} & clustered  # members never reference garbage
        before = set(self.alive())
        stats = collect(self.rt)
        survivors = self.survivors(before)
        assert survivors == reached
        deaths = self.settle_deaths(survivors, before)
        for i, f in killed:
            self.edges[i][f] = None
        self.check()
        assert stats.objects_marked == len(reached)
        assert stats.objects_scanned == len(reached - clustered)
        assert stats.references_killed == len(killed)
        assert stats.clusters_marked == len(marked_clusters)
        assert stats.objects_unreachable == stats.objects_freed == len(deaths)
        assert stats.conjugates_expired == len(deaths)
        assert stats.clusters == len(self.clusters)
        assert stats.live_objects == len(survivors)
        assert stats.roots == len(self.roots)
        return stats, survivors, killed

    def incremental(
        self, *, mutations: int, budget: float, collect_after: int | None = None
    ) -> GcStats:
        """An incremental cycle with random mutations between its marking
        and gathering steps (finished by ``collect_garbage()`` after
        ``collect_after`` steps if given). The survivors must include
        everything reachable at the end and nothing that was never
        reachable, stored, rooted or born during the cycle."""
        rt = self.rt
        self.dissolve_stale()
        before = set(self.alive())
        self.cycle = Cycle(
            set(self.roots),
            {i: set(self.references(i)) for i in before},
            [set(c.members) for c in self.clusters.values()],
        )
        rt.gc.start_incremental()
        rt.gc.verify()
        done, steps, applied = False, 0, 0
        while not done:
            phase = rt.gc.phase
            if phase in ("marking", "gathering"):
                self.dying_allowed = phase == "gathering"
                for _ in range(min(self.rng.randint(1, 6), mutations - applied)):
                    self.random_op()
                    applied += 1
                self.dying_allowed = False
                rt.gc.verify()
            if (
                collect_after is not None
                and steps >= collect_after
                and phase in ("marking", "gathering")
            ):
                collect(rt)
                done = True
            else:
                # Tiny budgets until the purge; then one it can use (see
                # test_steps_with_a_tiny_budget_always_make_progress).
                done = step(rt, budget if phase in ("marking", "gathering") else 1e-3)
                steps += 1
        cycle, self.cycle = self.cycle, None
        everyone = before | {i for i in range(len(self.objects)) if i not in self.dead}
        survivors = self.survivors(everyone)
        lower = self.reach(self.roots, clusters=False)
        upper = closure(cycle)
        assert lower <= survivors, f"reachable objects collected: {sorted(lower - survivors)}"
        assert survivors <= upper, f"never-reachable objects kept: {sorted(survivors - upper)}"
        # References of survivors: kept, or killed if their target is garbage.
        for i in survivors:
            assert self.outer[i] is None or self.outer[i] in survivors
            for f, t in self.edges[i].items():
                got = getattr(self.objects[i], f)
                if t is None:
                    assert got is None
                elif t in survivors and got is self.objects[t]:
                    continue
                else:
                    assert got is None and t in self.garbage, (i, f, t, got)
                    self.edges[i][f] = None
        deaths = self.settle_deaths(survivors, everyone)
        self.check()
        stats = rt.gc.stats()
        assert stats.objects_unreachable == stats.objects_freed == len(deaths)
        assert stats.conjugates_expired == len(deaths)
        assert stats.mark_threads == 1
        return stats


def closure(cycle: Cycle) -> set[int]:
    """Everything the marker could have reached during a cycle."""
    together: dict[int, set[int]] = {}
    for members in cycle.together:
        for m in members:
            together.setdefault(m, set()).update(members)
    seen = set(cycle.seeds)
    work = list(seen)
    while work:
        x = work.pop()
        for t in cycle.edges.get(x, set()) | together.get(x, set()):
            if t not in seen:
                seen.add(t)
                work.append(t)
    return seen


# ---- randomized graphs --------------------------------------------------------------


@pytest.mark.parametrize("seed", range(12))
def test_full_collections_match_the_model(seed: int) -> None:
    with zs.Runtime(min_cluster_size=3) as rt:
        world = World(rt, seed, 300)
        world.check()
        for _ in range(3):
            world.full_collect()
            for _ in range(60):
                world.random_op()
            world.check()


@pytest.mark.parametrize("seed", range(16))
def test_incremental_cycles_with_mutations_keep_everything_reachable(seed: int) -> None:
    with zs.Runtime(min_cluster_size=3) as rt:
        world = World(rt, 1000 + seed, 400)
        world.check()
        for _ in range(3):
            budget = world.rng.choice([TINY, 2e-6, 1e-5])
            stats = world.incremental(mutations=80, budget=budget)
            assert stats.mark_steps >= 1
            for _ in range(40):
                world.random_op()
            world.full_collect()  # exact again, after the floating garbage goes


@pytest.mark.parametrize("seed", range(8))
def test_collect_garbage_finishes_a_pending_cycle_with_mutations(seed: int) -> None:
    with zs.Runtime(min_cluster_size=3) as rt:
        world = World(rt, 2000 + seed, 400)
        for _ in range(2):
            world.incremental(mutations=40, budget=TINY, collect_after=world.rng.randint(0, 4))
            world.full_collect()


@pytest.mark.parametrize("seed", range(6))
def test_collect_garbage_during_a_pending_cycle_gives_the_same_survivors(seed: int) -> None:
    """Two identical heaps: one collected fully, one collected fully in the
    middle of an incremental cycle (no mutations): the same survivors, both
    those of the model."""
    results = []
    for interrupted in (False, True):
        with zs.Runtime(min_cluster_size=3) as rt:
            world = World(rt, 3000 + seed, 2000)
            before = set(world.alive())
            if interrupted:
                rt.gc.start_incremental()
                rt.gc.verify()
                for _ in range(1 + seed % 4):
                    assert not step(rt)
                assert rt.gc.phase == "marking"
            stats, survivors, killed = world.full_collect()
            assert survivors <= before
            results.append(
                (
                    survivors,
                    killed,
                    stats.references_killed,
                    stats.clusters_marked,
                    stats.objects_marked,
                )
            )
            if interrupted:
                assert stats.mark_steps >= 2
    assert results[0] == results[1]


# ---- parallel marking -----------------------------------------------------------------


def test_parallel_marking_gives_the_same_result_as_one_thread() -> None:
    outcomes = []
    for threads in (1, 4):
        with zs.Runtime(min_cluster_size=3, mark_threads=threads) as rt:
            rt.gc._debug_parallel_threshold(0)
            world = World(rt, 4242, 20_000)
            world.check()
            rounds = []
            for _ in range(3):
                stats, survivors, killed = world.full_collect()
                assert stats.mark_threads == threads
                rounds.append(
                    (
                        survivors,
                        killed,
                        stats.objects_marked,
                        stats.objects_scanned,
                        stats.references_killed,
                        stats.clusters_marked,
                        stats.objects_unreachable,
                    )
                )
                for _ in range(400):
                    world.random_op()
            # Incremental steps mark on the calling thread.
            world.incremental(mutations=20, budget=1e-4)
            assert rt.gc.stats().mark_threads == 1
            outcomes.append(rounds)
    assert outcomes[0] == outcomes[1]
    assert any(killed for _, killed, *_ in outcomes[0])
    assert any(clusters for *_, clusters, _ in outcomes[0])


def test_parallel_marking_uses_several_threads_on_a_large_heap() -> None:
    with zs.Runtime(mark_threads=4) as rt:
        rt.gc._debug_parallel_threshold(0)
        root = Actor()
        root.add_to_root()
        # A wide tree, so that workers have something to share.
        layer: list[Actor] = [root]
        objects = 1
        while objects < 30_000:
            nxt: list[Actor] = []
            for holder in layer:
                child, buddy = Hero(), Hero()
                holder.target = child
                child.sidekick = buddy
                nxt += [child, buddy]
            objects += len(nxt)
            layer = nxt
        doomed = [Actor() for _ in range(1000)]
        stats = collect(rt)
        assert stats.mark_threads == 4
        assert stats.objects_marked == objects
        assert all(o.is_expired for o in doomed)


# ---- incremental purge --------------------------------------------------------------


def purge_scenario(rt: zs.Runtime, dying: int) -> tuple[list[Actor], list[Actor]]:
    keep = Actor(health=-1)
    keep.add_to_root()
    kept = [keep, *chain_of(99, keep)]
    doomed = [Actor(health=i) for i in range(dying)]
    for first, second in zip(doomed[::2], doomed[1::2], strict=True):
        first.target = second
    return kept, doomed


def test_incremental_purge_expires_conjugates_before_freeing_memory(rt: zs.Runtime) -> None:
    kept, doomed = purge_scenario(rt, 50_000)
    total = rt.live_objects()
    rt.gc.start_incremental()
    rt.gc.verify()
    phases: list[str] = []
    live_counts: list[int] = []
    expired_counts: list[int] = []
    waiting = doomed  # conjugates not expired yet
    while True:
        done = step(rt, 1e-4)  # verify() between steps, mid-purge included
        phase = rt.gc.phase
        live = rt.live_objects()
        waiting = [o for o in waiting if not o.is_expired]
        expired = len(doomed) - len(waiting)
        phases.append(phase)
        live_counts.append(live)
        expired_counts.append(expired)
        if live < total:
            # Memory was freed: every dying object's conjugate expired first.
            assert expired == len(doomed)
        if phase in ("marking", "gathering"):
            assert expired == 0 and live == total
        if phase == "purging" and 0 < expired < len(doomed):
            # Expiry is itself spread over steps (batches). Until its
            # conjugate expires, a dying object's memory is intact and it
            # cannot be made reachable again.
            assert live == total
            assert waiting[0].health in range(len(doomed))
            with pytest.raises(zs.ExpiredConjugateError):
                kept[0].target = waiting[0]
            with pytest.raises(zs.ExpiredConjugateError):
                waiting[0].add_to_root()
        if done:
            break
    assert phase == "idle"
    assert all(o.is_expired for o in doomed)
    assert not any(o.is_expired for o in kept)
    assert [o.health for o in kept] == [-1, *range(99)]
    assert rt.live_objects() == len(kept)
    assert expired_counts == sorted(expired_counts)
    assert live_counts == sorted(live_counts, reverse=True)
    # The destruction was split over several steps.
    freeing = [c for c in live_counts if len(kept) < c < total]
    assert len(set(freeing)) >= 3
    assert "purging" in phases
    stats = rt.gc.stats()
    assert stats.objects_unreachable == stats.objects_freed == len(doomed)
    assert stats.conjugates_expired == len(doomed)
    assert stats.live_objects == len(kept)
    with pytest.raises(zs.ExpiredConjugateError):
        doomed[0].health


@pytest.mark.parametrize("when", ["expiring", "freeing"])
def test_new_cycle_finishes_a_pending_purge_first(rt: zs.Runtime, when: str) -> None:
    kept, doomed = purge_scenario(rt, 30_000)
    total = rt.live_objects()
    rt.gc.start_incremental()
    while True:
        assert not step(rt, 1e-4)
        if rt.gc.phase != "purging":
            continue
        if when == "expiring" and not all(o.is_expired for o in doomed):
            break
        if when == "freeing" and rt.live_objects() < total:
            break
    assert rt.gc.phase == "purging"
    rt.gc.start_incremental()
    rt.gc.verify()
    assert rt.gc.phase == "marking"
    assert all(o.is_expired for o in doomed)
    assert rt.live_objects() == len(kept)
    finish(rt)
    assert not any(o.is_expired for o in kept)
    assert rt.live_objects() == len(kept)


def test_collect_garbage_during_gathering_and_purging(rt: zs.Runtime) -> None:
    kept, doomed = purge_scenario(rt, 50_000)
    rt.gc.start_incremental()
    while rt.gc.phase != "gathering":
        assert not step(rt, TINY)
    # Marking is complete: new objects are born reachable, unmarked objects
    # are dying and cannot be stored or clustered.
    newborn = Actor(health=7)
    with pytest.raises(zs.ExpiredConjugateError):
        kept[0].target = doomed[1]
    with pytest.raises(RuntimeError):
        Asset().create_cluster()
    rt.gc.verify()
    stats = collect(rt)
    assert all(o.is_expired for o in doomed)
    assert not newborn.is_expired and newborn.health == 7
    assert not any(o.is_expired for o in kept)
    assert stats.objects_freed == len(doomed)
    assert stats.conjugates_expired == len(doomed)
    # Once more, interrupted in the purge.
    doomed = [Actor() for _ in range(20_000)]
    total = rt.live_objects()
    rt.gc.start_incremental()
    while rt.live_objects() == total:
        assert not step(rt, 1e-4)
    assert rt.gc.phase == "purging"
    collect(rt)
    assert all(o.is_expired for o in doomed)
    assert newborn.is_expired  # born reachable for one cycle only
    assert rt.live_objects() == len(kept)
    assert rt.gc.phase == "idle"


def test_conjugates_expired_counts_every_path_that_expires(rt: zs.Runtime) -> None:
    """``stats().conjugates_expired`` counts every conjugate a cycle
    expired, whichever path expired it: a bounded step, a store refused
    because its target is dying (which expires everything pending at once),
    and the full collection that finishes the cycle. Steps bounded by work,
    so the split between the paths is the same on every run."""
    kept, doomed = purge_scenario(rt, 5_000)
    rt.gc.start_incremental()
    while rt.gc.phase in ("marking", "gathering"):
        assert not rt.gc.step(max_objects=100)
    assert sum(o.is_expired for o in doomed) == 100  # one bounded expiry so far
    assert rt.gc.stats().conjugates_expired == 100
    target = next(o for o in doomed if not o.is_expired)
    with pytest.raises(zs.ExpiredConjugateError):
        kept[0].target = target  # refused: expires the rest
    assert all(o.is_expired for o in doomed)
    assert rt.gc.stats().conjugates_expired == len(doomed)
    while not rt.gc.step(max_objects=1_000):  # the same cycle's purge
        pass
    stats = rt.gc.stats()
    assert stats.conjugates_expired == len(doomed) == stats.objects_freed
    # The next cycle starts counting from zero.
    more = [Actor() for _ in range(300)]
    stats = collect(rt)
    assert stats.conjugates_expired == len(more) == stats.objects_freed


def test_a_step_with_time_to_spare_expires_in_batches_up_to_its_bounds(rt: zs.Runtime) -> None:
    """A timed step expires in batches until its budget or its object bound
    runs out, never stopping after the first batch: with an hour to spare,
    a bound of 1,000 expires exactly 1,000 (four batches), and no bound
    expires every conjugate left. The hour is never near: no time is
    measured here."""
    _kept, doomed = purge_scenario(rt, 4_000)
    rt.gc.start_incremental()
    while rt.gc.phase in ("marking", "gathering"):
        assert not rt.gc.step(max_objects=50)
    before = sum(o.is_expired for o in doomed)
    assert before == 50
    assert not rt.gc.step(3600.0, max_objects=1_000)
    assert sum(o.is_expired for o in doomed) == before + 1_000
    rt.gc.step(3600.0)
    assert all(o.is_expired for o in doomed)
    assert rt.gc.stats().conjugates_expired == len(doomed)


def test_a_full_collection_does_not_count_a_previous_cycles_expiry(rt: zs.Runtime) -> None:
    """A full collection started while the previous cycle's conjugates are
    still being expired finishes that expiry (counted in that cycle), then
    reports its own cycle only."""
    _kept, doomed = purge_scenario(rt, 2_000)  # _kept: held, so it stays alive
    rt.gc.start_incremental()
    while rt.gc.phase in ("marking", "gathering"):
        assert not rt.gc.step(max_objects=50)
    assert rt.gc.phase == "purging" and not all(o.is_expired for o in doomed)
    fresh = [Actor() for _ in range(10)]
    stats = collect(rt)
    assert all(o.is_expired for o in doomed + fresh)
    assert stats.conjugates_expired == len(fresh) == stats.objects_freed


def _bounded_trace(seed: int, max_objects: int) -> list[tuple[str, int, int, int]]:
    """Build a heap from ``seed``, run one cycle in work-bounded steps, and
    record after every step what an observer sees."""
    rng = random.Random(seed)
    trace: list[tuple[str, int, int, int]] = []
    with zs.Runtime(mark_threads=1) as rt:
        root = Actor(name="root")
        root.add_to_root()
        nodes = [root]
        for _ in range(3_000):
            node = Actor()
            if rng.random() < 0.7:
                rng.choice(nodes).target = node
            nodes.append(node)
        rt.gc.start_incremental()
        done = False
        while not done:
            done = rt.gc.step(max_objects=max_objects)
            stats = rt.gc.stats()
            trace.append(
                (
                    rt.gc.phase,
                    stats.objects_scanned,
                    rt.live_objects(),
                    sum(n.is_expired for n in nodes),
                )
            )
            rt.gc.verify()
        assert trace[-1][0] == "idle"
    return trace


def test_steps_bounded_by_work_are_deterministic() -> None:
    """The same heap stepped by work alone makes the same steps every time,
    and no step scans more objects than its bound."""
    first = _bounded_trace(seed=11, max_objects=97)
    assert first == _bounded_trace(seed=11, max_objects=97)
    scanned = [entry[1] for entry in first]
    assert all(b - a <= 97 for a, b in zip([0] + scanned, scanned, strict=False))
    assert len(first) > 10  # a chain of steps, not one
    expired = [entry[3] for entry in first]
    assert all(b - a <= 97 for a, b in zip([0] + expired, expired, strict=False))


@pytest.mark.parametrize("bounds", [{"max_objects": 0xFFFFFFFF}, {"max_objects": 60_000}])
def test_a_step_bounded_by_work_alone_has_no_time_budget(
    rt: zs.Runtime, bounds: dict[str, int]
) -> None:
    """``step(max_objects=N)`` without ``budget_s`` is bounded by work only
    (no default time budget is added, or the step would stop on the clock
    and not be deterministic): with N above the cycle's work, one step marks
    20,000 live objects, expires and destroys 40,000 and completes the
    cycle, however long that takes on this machine (far more than the
    default budget of a step)."""
    kept, doomed = purge_scenario(rt, 40_000)
    kept += chain_of(20_000, kept[-1])
    rt.gc.start_incremental()
    assert rt.gc.step(**bounds) is True
    assert rt.gc.phase == "idle"
    assert all(o.is_expired for o in doomed)
    assert not any(o.is_expired for o in kept)
    assert rt.live_objects() == len(kept)


def test_tick_can_be_bounded_by_work(rt: zs.Runtime) -> None:
    """``settings.objects_per_tick`` makes the per-frame driver do a fixed
    amount of work per tick: the same frames finish the same cycles."""

    def frames() -> list[str]:
        with zs.Runtime() as inner:
            keep = Actor()
            keep.add_to_root()
            chain_of(2_000, keep)
            garbage = [Actor() for _ in range(1_000)]
            inner.gc.settings.objects_per_tick = 150
            inner.gc.settings.time_between_collections = 0.0
            actions = [inner.gc.tick(1 / 60) for _ in range(60)]
            assert all(o.is_expired for o in garbage)
            return actions

    first = frames()
    assert first == frames()
    assert first.count("finished") >= 2 and "advanced" in first


@pytest.mark.parametrize(
    "arguments, error, message",
    [
        (("x",), TypeError, "budget_s must be a number of seconds"),
        ((True,), TypeError, "budget_s must be a number of seconds"),
        ((0,), ValueError, "budget_s must be positive"),
        ((-1.0,), ValueError, "budget_s must be positive"),
        ((None,), None, ""),
    ],
)
def test_step_arguments_are_checked(
    rt: zs.Runtime, arguments: tuple[Any, ...], error: type[Exception] | None, message: str
) -> None:
    Actor()
    rt.gc.start_incremental()
    if error is None:
        rt.gc.step(*arguments)  # None alone: the default budget
        return
    with pytest.raises(error, match=message):
        rt.gc.step(*arguments)


@pytest.mark.parametrize(
    "objects, error",
    [
        (0, ValueError),
        (-5, ValueError),
        (2**32, ValueError),
        (1.5, TypeError),
        ("3", TypeError),
        (True, TypeError),
    ],
)
def test_step_work_bounds_are_checked(rt: zs.Runtime, objects: Any, error: type[Exception]) -> None:
    rt.gc.start_incremental()
    with pytest.raises(error, match="max_objects"):
        rt.gc.step(max_objects=objects)


def test_tick_refuses_a_non_number(rt: zs.Runtime) -> None:
    with pytest.raises(TypeError, match="dt must be a number of seconds"):
        rt.gc.tick("1/60")  # type: ignore[arg-type]


@pytest.mark.parametrize("phase", ["marking", "gathering", "purging"])
def test_closing_the_runtime_during_a_pending_cycle(phase: str) -> None:
    rt = zs.Runtime()
    with rt:
        kept, doomed = purge_scenario(rt, 10_000)
        rt.gc.start_incremental()
        while rt.gc.phase != phase:
            assert not step(rt, 1e-4 if phase == "purging" else TINY)
    assert rt.closed
    assert all(o.is_expired for o in kept + doomed)
    with pytest.raises(zs.ExpiredConjugateError, match="closed"):
        kept[0].health
    with pytest.raises(zs.ExpiredConjugateError):
        doomed[-1].health


def test_stats_of_a_collection_that_settles_a_pending_purge(rt: zs.Runtime) -> None:
    """A full collection started while the previous cycle's purge is pending
    finishes that purge first; its statistics describe its own cycle, so it
    cannot report more expired conjugates than unreachable objects."""
    kept, doomed = purge_scenario(rt, 20_000)
    rt.gc.start_incremental()
    while rt.gc.phase != "purging":
        assert not step(rt, 1e-4)
    assert not all(o.is_expired for o in doomed)  # expiry is still under way
    stats = collect(rt)
    assert all(o.is_expired for o in doomed)
    assert rt.live_objects() == len(kept)
    assert stats.objects_unreachable == 0  # nothing new died in this cycle
    assert stats.conjugates_expired <= stats.objects_unreachable, stats


@pytest.mark.parametrize("max_objects", [None, 100_000])
def test_expiry_steps_stop_between_small_batches(rt: zs.Runtime, max_objects: int | None) -> None:
    """A step runs for "about budget_s": expiring conjugates is part of the
    step, so a budgeted step checks its deadline between small batches
    rather than expiring thousands at once (tick relies on it to keep frames
    short), also when its work bound is larger than a batch. Counted, not
    timed: with a budget that has always run out after one batch, each step
    expires at most one batch (256 conjugates), and the purge still
    completes."""
    kept, doomed = purge_scenario(rt, 5_000)
    rt.gc.start_incremental()
    expired_after: list[int] = []
    while not rt.gc.step(1e-9, max_objects=max_objects):
        expired_after.append(sum(o.is_expired for o in doomed))
    rt.gc.verify()
    increments = [b - a for a, b in zip([0] + expired_after, expired_after, strict=False)]
    assert max(increments) <= 256, increments
    assert all(o.is_expired for o in doomed)
    assert not any(o.is_expired for o in kept)


# ---- the per-frame driver ---------------------------------------------------------


def test_tick_waits_for_time_between_collections(rt: zs.Runtime) -> None:
    rt.gc.settings.time_between_collections = 0.5
    keep = Actor()
    keep.add_to_root()
    doomed = [Actor() for _ in range(10)]
    assert rt.gc.tick(0.2) == "idle"
    assert rt.gc.tick(0.2) == "idle"
    rt.gc.verify()
    assert all(not o.is_expired for o in doomed)
    result = rt.gc.tick(0.2)
    rt.gc.verify()
    assert result in ("started", "finished")
    while result != "finished":
        result = rt.gc.tick(0.0)
        rt.gc.verify()
        assert result == "advanced" or result == "finished"
    assert rt.gc.phase == "idle"
    assert all(o.is_expired for o in doomed) and not keep.is_expired
    assert rt.gc.tick(0.2) == "idle"  # the clock restarted with the cycle


def test_tick_spreads_a_large_cycle_over_many_frames(rt: zs.Runtime) -> None:
    settings = rt.gc.settings
    settings.time_between_collections = 0.1
    settings.reachability_budget = 2e-5
    settings.purge_budget = 2e-5
    keep = Actor()
    keep.add_to_root()
    kept = chain_of(20_000, keep)
    doomed = [Actor() for _ in range(20_000)]
    results = [rt.gc.tick(0.016) for _ in range(6)]
    assert results == ["idle"] * 6
    results = []
    while not results or results[-1] != "finished":
        results.append(rt.gc.tick(0.016))
        rt.gc.verify()
        assert len(results) < 100_000
    assert results[0] == "started"
    assert set(results[1:-1]) == {"advanced"}
    assert len(results) > 5
    assert all(o.is_expired for o in doomed)
    assert not any(o.is_expired for o in kept)
    assert rt.gc.stats().mark_steps > 1


class Keeper(zs.Object):
    """A reference and an array of references (stores refused mid-cycle)."""

    target: "Keeper | None"
    items: zs.Array["Keeper"]


@pytest.mark.parametrize("store", ["into a live holder", "into the dying object", "array element"])
def test_store_refused_for_a_dying_object_expires_its_conjugate_first(
    rt: zs.Runtime, store: str
) -> None:
    """Between steps, a gathered object's conjugate may not be expired yet (expiry
    is budgeted too). A store that the heap refuses because the object is dying
    raises ExpiredConjugateError, and by then the conjugate reads as expired."""
    holder = Keeper()
    holder.add_to_root()
    doomed = [Keeper() for _ in range(3000)]
    dying = awaiting_expiry(rt, doomed)[0]  # expiry still pending
    with pytest.raises(zs.ExpiredConjugateError):
        if store == "into a live holder":
            holder.target = dying
        elif store == "into the dying object":
            dying.target = holder
        else:
            holder.items.append(dying)
    assert dying.is_expired
    assert holder.target is None and len(holder.items) == 0
    finish_cycle(rt)
    assert all(o.is_expired for o in doomed) and rt.live_objects() == 1
    holder.remove_from_root()


def test_a_refusal_for_another_reason_leaves_the_pending_expiry_alone() -> None:
    """Only a refusal because an object is dying (``ZS_E_DYING``) expires
    the cycle's pending conjugates first (``_base/errors.py``, ``refused``).
    A call refused for another reason while expiry is pending (here a full
    heap: the dying objects keep their slots until the purge) raises its own
    error, and the budgeted expiry stays where the steps left it."""
    with zs.Runtime(max_objects=1024) as rt:
        keep = Keeper()
        keep.add_to_root()
        doomed = [Keeper() for _ in range(1023)]
        pending = awaiting_expiry(rt, doomed)
        with pytest.raises(MemoryError, match="max_objects reached") as info:
            Keeper()
        assert not isinstance(info.value, zs.ExpiredConjugateError)
        assert not any(o.is_expired for o in pending)
        assert not keep.is_expired
        finish_cycle(rt)
        assert all(o.is_expired for o in doomed) and rt.live_objects() == 1
        assert not Keeper().is_expired  # room again once the purge freed it


class Spot(zs.Struct):
    """A struct member (assigning a struct conjugate is one native copy; a
    tuple or dict is written member by member: the scalar first)."""

    x: zs.Float64
    label: zs.String


def _noop() -> None:
    """A callable to bind."""


class Hoard(zs.Object):
    """Every container kind, a struct, the string kinds, names, the object
    wrappers and the delegates (writes refused mid-cycle)."""

    nums: zs.Array[zs.Int32]
    tags: zs.Set[zs.Name]
    scores: zs.Map[zs.Name, zs.Int32]
    maybe: zs.Optional[zs.Int32]
    spot: Spot
    label: zs.String
    utf8: zs.Utf8String
    ansi: zs.AnsiString
    text: zs.Text
    tag: zs.Name
    names: zs.Array[zs.Name]
    soft: zs.SoftObjectPtr["Hoard"]
    soft_class: zs.SoftClassPtr["Hoard"]
    lazy: zs.LazyObjectPtr["Hoard"]
    kind: zs.SubclassOf["Hoard"]
    weak: zs.WeakObjectPtr["Hoard"]
    path: zs.FieldPath
    on_hit: zs.Delegate
    on_open: zs.MulticastDelegate
    on_sparse: zs.SparseDelegate
    health: zs.Int32
    other: "Hoard | None"


# Each writes into a dying Hoard through a red view taken before the cycle
# began (``view``), or the object itself, or names it: all are refused with
# ZS_E_DYING because the object is dying, by the native call that would write
# (containers, strings, delegates, struct copies, references, roots) or, for
# plain data Python writes itself (a name, a class, a persistent id, a struct
# member by member), by the owner check made first (zs_object_writable).
# ``keep`` is a live Hoard. Scalar writes are refused too (the test after).
_DYING_MUTATIONS: dict[str, Callable[[Hoard, Any, Hoard], object]] = {
    "array append": lambda obj, view, keep: view.append(1),
    "array insert": lambda obj, view, keep: view.insert(0, 1),
    "array clear": lambda obj, view, keep: view.clear(),
    "array slice assignment": lambda obj, view, keep: view.__setitem__(slice(0, 0), [1, 2]),
    "array assigned whole": lambda obj, view, keep: setattr(obj, "nums", [1, 2]),
    "set add": lambda obj, view, keep: obj.tags.add("enemy"),
    "set update": lambda obj, view, keep: obj.tags.update(["a", "b"]),
    "map item": lambda obj, view, keep: obj.scores.__setitem__("kills", 3),
    "map setdefault": lambda obj, view, keep: obj.scores.setdefault("kills", 3),
    "map clear": lambda obj, view, keep: obj.scores.clear(),
    "optional set": lambda obj, view, keep: obj.maybe.set(5),
    "optional reset": lambda obj, view, keep: obj.maybe.reset(),
    "struct copied in": lambda obj, view, keep: setattr(obj, "spot", Spot(1.0, "far")),
    "struct tuple written": lambda obj, view, keep: setattr(obj, "spot", (1.0, "far")),
    "struct dict written": lambda obj, view, keep: setattr(obj, "spot", {"x": 1.0}),
    "struct member string": lambda obj, view, keep: setattr(obj.spot, "label", "far"),
    "string assigned": lambda obj, view, keep: setattr(obj, "label", "new"),
    "string view assign": lambda obj, view, keep: obj.label.assign("new"),
    "utf8 string assigned": lambda obj, view, keep: setattr(obj, "utf8", "new"),
    "ansi string assigned": lambda obj, view, keep: setattr(obj, "ansi", "new"),
    "text assigned": lambda obj, view, keep: setattr(obj, "text", "new"),
    "name assigned": lambda obj, view, keep: setattr(obj, "tag", "Brand_New_Name"),
    "name element": lambda obj, view, keep: obj.names.__setitem__(0, "Brand_New_Name"),
    "soft pointer": lambda obj, view, keep: setattr(obj, "soft", keep),
    "soft class pointer": lambda obj, view, keep: setattr(obj, "soft_class", Hoard),
    "lazy pointer": lambda obj, view, keep: setattr(obj, "lazy", keep),
    "subclass": lambda obj, view, keep: setattr(obj, "kind", Hoard),
    "weak pointer": lambda obj, view, keep: setattr(obj, "weak", keep),
    "weak pointer cleared": lambda obj, view, keep: setattr(obj, "weak", None),
    "reference": lambda obj, view, keep: setattr(obj, "other", keep),
    "reference cleared": lambda obj, view, keep: setattr(obj, "other", None),
    "field path": lambda obj, view, keep: setattr(obj, "path", zs.FieldPath("Hoard.nums")),
    "delegate bind": lambda obj, view, keep: obj.on_hit.bind(_noop),
    "delegate bind object": lambda obj, view, keep: obj.on_hit.bind(keep, "add_to_root"),
    "delegate assigned": lambda obj, view, keep: setattr(obj, "on_hit", _noop),
    "delegate unbind": lambda obj, view, keep: obj.on_hit.unbind(),
    "multicast add": lambda obj, view, keep: obj.on_open.add(_noop),
    "multicast remove": lambda obj, view, keep: obj.on_open.remove(_noop),
    "multicast assigned": lambda obj, view, keep: setattr(obj, "on_open", [_noop]),
    "sparse add": lambda obj, view, keep: obj.on_sparse.add(_noop),
    "object created inside it": lambda obj, view, keep: Hoard(outer=obj),
    "rooted": lambda obj, view, keep: obj.add_to_root(),
    "strong pointer": lambda obj, view, keep: zs.StrongObjectPtr(obj),
}


def _prepared_hoards(count: int) -> list[Hoard]:
    """Hoards with something to remove, unbind or overwrite."""
    hoards = []
    for _ in range(count):
        hoard = Hoard(label="old", tag="Old")
        hoard.names.append("Old")
        hoard.on_hit.bind(_noop)
        hoard.on_open.add(_noop)
        hoards.append(hoard)
    return hoards


@pytest.mark.parametrize("mutation", sorted(_DYING_MUTATIONS))
def test_write_refused_for_a_dying_object_expires_its_conjugate_first(mutation: str) -> None:
    """Like the stores above, through every other kind of write: between
    incremental steps a gathered object's conjugate may still be live (expiry
    is budgeted), and a write into it (a container mutation, a string, a name,
    an object wrapper, a delegate binding, a struct copy or tuple, an object
    created with it as outer) is refused as dying. The caller gets
    ExpiredConjugateError with the object, and views into it, already
    expired; not one byte of the object changed, and the cycle completes."""
    with zs.Runtime(stress=GcStress(objects_per_step=1)) as rt:
        keep = Hoard()
        keep.add_to_root()
        doomed = _prepared_hoards(3000)
        views = {id(obj): obj.nums for obj in doomed}  # red views, held across the cycle
        callables = rt.bound_callables()
        pending = awaiting_expiry(rt, doomed)
        assert rt.gc.phase == "purging"
        dying = pending[-1]
        view = views[id(dying)]
        assert not view.is_expired
        before = rt._object_bytes(dying._h)  # the memory stays until the purge, after expiry
        texts = (str(dying.label), str(dying.spot.label), str(dying.tag))
        with pytest.raises(zs.ExpiredConjugateError, match="about to be destroyed") as caught:
            _DYING_MUTATIONS[mutation](dying, view, keep)
        assert dying.is_expired, caught.value
        assert view.is_expired
        with pytest.raises(zs.ExpiredConjugateError):
            view.append(1)
        assert rt._object_bytes(dying._h) == before, "a refused write changed the object"
        assert texts == ("old", "", "Old")
        assert rt.bound_callables() == callables  # a refused binding keeps no callable
        assert rt.live_objects() == 1 + len(doomed)  # nothing created, nothing freed yet
        finish_cycle(rt)
        assert all(obj.is_expired for obj in doomed) and rt.live_objects() == 1
        assert (len(keep.nums), len(keep.tags), len(keep.scores), keep.maybe.is_set) == (
            0,
            0,
            0,
            False,
        )


def test_scalar_writes_into_a_dying_object_are_refused_like_every_write() -> None:
    """One rule for every write into a dying object: refused, its conjugate
    (and its views) expired first. A scalar (an object's scalar property, a
    struct member, a container element) is written by zsharp_py itself, with
    no native call; while a cycle has found objects dying whose conjugates
    may not have expired yet, such a write asks the heap first
    (native/binding/value.h, zsv_writable), and costs nothing at any other
    time."""
    writes = (
        lambda obj: setattr(obj, "health", 5),
        lambda obj: setattr(obj.spot, "x", 2.5),
        lambda obj: obj.nums.__setitem__(0, 7),
    )
    for write in writes:
        with zs.Runtime(stress=GcStress(objects_per_step=1)) as rt:
            doomed = [Hoard(spot=(0.0, "")) for _ in range(3000)]
            for obj in doomed:
                obj.nums.append(0)
            dying = awaiting_expiry(rt, doomed)[-1]
            spot, nums = dying.spot, dying.nums
            before = rt._object_bytes(dying._h)
            with pytest.raises(zs.ExpiredConjugateError, match="about to be destroyed"):
                write(dying)
            assert dying.is_expired and spot.is_expired and nums.is_expired
            assert rt._object_bytes(dying._h) == before
            finish_cycle(rt)
            assert all(obj.is_expired for obj in doomed) and rt.live_objects() == 0


class Tether(zs.Struct):
    """A struct member that can hold a reference back to its owner."""

    x: zs.Int32
    other: "Loop | None"


class Loop(zs.Object):
    """An object whose struct member may name the object itself."""

    pos: Tether


@pytest.mark.parametrize(
    "new_value",
    [
        {"x": 1, "other": None},
        (1, None),
        Tether(1, None),
    ],
    ids=["dict", "tuple", "struct"],
)
def test_replacing_a_whole_struct_mid_mark_keeps_nothing_alive(
    rt: zs.Runtime, new_value: Any
) -> None:
    """An object reachable only from its own struct member is garbage; the
    member, replaced whole during the mark, must not keep it alive. A struct
    written from a partial dict starts as a copy of the old value (the
    members not given keep theirs), and that copy passed the write barrier,
    marking the old value's objects: the object survived the cycle. Now the
    copy is made only when a member is missing. Steps are bounded by work,
    so the mark is still pending at the write on any machine."""
    loop = Loop()
    loop.pos.other = loop
    rt.gc.start_incremental()
    assert rt.gc.phase == "marking"
    loop.pos = new_value
    finish_cycle(rt)
    assert loop.is_expired
    assert rt.live_objects() == 0
