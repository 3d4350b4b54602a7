"""``rt.reference_chains(obj)``: why an object is alive. Each chain must start
at a real root, follow references a reader can check through the named
properties, and exist exactly for the objects a full collection keeps."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import zsharp_py as zs
from classes import Asset, Part
from helpers import awaiting_expiry, collect, finish_cycle
from zsharp_py import _core
from zsharp_py.debug import ChainLink, ReferenceChain


class Spot(zs.Struct):
    """A struct with a reference inside (the native schema inlines it)."""

    x: zs.Float64
    owner: "Holder | None"


class Holder(zs.Object):
    """Every kind of member that can hold an object."""

    hp: zs.Int32
    target: "Holder | None"
    items: zs.Array["Holder"]
    spot: Spot
    friend: zs.WeakObjectPtr["Holder"]


def holds(link: ChainLink, following: Any) -> bool:
    """Whether the link's holder really holds ``following`` through its member,
    read back through the public API."""
    holder, member = link.holder, link.member
    if member == "outer":
        return bool(holder.outer is following)
    if member == "cluster":
        return bool(holder.cluster is not None and holder.cluster == following.cluster)
    if member == "contents":
        return any(item is following for item in holder)
    value = holder
    for name in member.split("."):
        value = getattr(value, name)
    if isinstance(value, zs.Array):
        return any(item is following for item in value)
    return value is following


def check_chain(chain: ReferenceChain, target: Any) -> None:
    """A chain starts at a root, every link holds the next, it ends at target."""
    assert chain.links[-1].holder is target and chain.links[-1].member is None
    assert len(chain) == len(chain.links) - 1
    for link, following in itertools.pairwise(chain.links):
        assert link.member is not None
        assert holds(link, following.holder), (str(chain), link)
    root = chain.root
    if isinstance(root, zs.Object):
        assert ("rooted" in chain.root_reasons) == root.is_rooted
    else:
        assert chain.root_reasons == ("black value",) and root.is_black


def test_chain_through_every_member_kind(rt: zs.Runtime) -> None:
    hero = Holder(name="Hero")
    hero.add_to_root()
    enemy, loot, owner, stray = (Holder(name=n) for n in ("Enemy", "Loot", "Owner", "Stray"))
    hero.target = enemy
    enemy.items.append(loot)
    loot.spot = Spot(x=1.0, owner=owner)
    stray.target = loot  # an unreachable holder gives no chain
    (chain,) = rt.reference_chains(owner)
    assert [(link.holder, link.member) for link in chain.links] == [
        (hero, "target"),
        (enemy, "items"),
        (loot, "spot.owner"),
        (owner, None),
    ]
    assert chain.root is hero and chain.root_reasons == ("rooted",) and len(chain) == 3
    assert str(chain) == (
        "(rooted) Holder 'Hero' -> target -> Holder 'Enemy' -> items -> "
        "Holder 'Loot' -> spot.owner -> Holder 'Owner'"
    )
    check_chain(chain, owner)
    assert rt.reference_chains(stray) == []
    collect(rt)
    assert stray.is_expired and not owner.is_expired


def test_weak_pointers_and_dropped_references_give_no_chain(rt: zs.Runtime) -> None:
    hero = Holder()
    hero.add_to_root()
    other = Holder()
    hero.friend = zs.WeakObjectPtr(other)  # weak: never keeps it alive
    assert rt.reference_chains(other) == []
    hero.target = other
    assert len(rt.reference_chains(other)) == 1
    hero.target = None
    assert rt.reference_chains(other) == []


def test_one_chain_per_root_nearest_first(rt: zs.Runtime) -> None:
    far, near = Holder(name="Far"), Holder(name="Near")
    far.add_to_root()
    middle, target = Holder(), Holder(name="Target")
    far.target = middle
    middle.target = target
    far.items.append(target)  # a second path from the same root: shorter
    pointer = zs.StrongObjectPtr(near)
    near.target = target
    chains = rt.reference_chains(target)
    assert [(c.root, len(c)) for c in chains] in ([(far, 1), (near, 1)], [(near, 1), (far, 1)])
    by_root = {c.root_reasons: c for c in chains}
    assert by_root[("rooted",)].links[0].member == "items"
    assert by_root[("strong pointer",)].links[0].member == "target"
    assert len(rt.reference_chains(target, limit=1)) == 1
    far.items.clear()
    chains = rt.reference_chains(target)
    assert [(c.root, len(c)) for c in chains] == [(near, 1), (far, 2)]
    for chain in chains:
        check_chain(chain, target)
    pointer.dispose()
    assert [c.root for c in rt.reference_chains(target)] == [far]


def test_a_root_is_a_chain_of_itself(rt: zs.Runtime) -> None:
    hero = Holder()
    hero.add_to_root()
    pointer = zs.StrongObjectPtr(hero)
    (chain,) = rt.reference_chains(hero)
    assert chain.links == (ChainLink(hero, None),) and len(chain) == 0
    assert chain.root_reasons == ("rooted", "strong pointer")
    pointer.dispose()


def test_outer_keeps_its_outer_alive(rt: zs.Runtime) -> None:
    level = Holder(name="Level")
    actor = Holder(name="Actor", outer=level)
    actor.add_to_root()
    (chain,) = rt.reference_chains(level)
    assert [(link.holder, link.member) for link in chain.links] == [(actor, "outer"), (level, None)]


def test_garbage_is_held_only_by_roots_and_outers(rt: zs.Runtime) -> None:
    hero = Holder()
    hero.add_to_root()
    doomed = Holder()
    hero.target = doomed
    inner = Holder(outer=doomed)
    doomed.mark_as_garbage()
    assert rt.reference_chains(doomed) == []  # killable references to garbage are cut
    inner.add_to_root()
    (chain,) = rt.reference_chains(doomed)
    assert chain.root is inner and chain.links[0].member == "outer"


def test_black_values_are_roots(rt: zs.Runtime) -> None:
    target, owner = Holder(), Holder()
    bag = zs.Array[Holder]([target])
    spot = Spot(owner=owner)
    (chain,) = rt.reference_chains(target)
    assert chain.root is bag and chain.root_reasons == ("black value",)
    assert chain.links[0].member == "contents"
    assert str(chain).startswith("(black value) Array[Holder] -> contents -> Holder")
    (chain,) = rt.reference_chains(owner)
    assert chain.root is spot and chain.links[0].member == "owner"
    bag.dispose()
    assert rt.reference_chains(target) == []
    spot.dispose()


def test_black_values_are_not_roots_when_the_runtime_says_so() -> None:
    with zs.Runtime(black_conjugates_are_roots=False) as rt:
        target = Holder()
        bag = zs.Array[Holder]([target])
        assert rt.reference_chains(target) == []
        bag.dispose()


def test_a_cluster_is_held_as_a_unit(rt: zs.Runtime) -> None:
    root = Asset(name="Root")
    parts = [Part(value=i) for i in range(20)]
    root.a = parts[0]
    for before, after in itertools.pairwise(parts):
        before.a = after
    assert root.create_cluster() == 21
    outside = Holder()
    outside.add_to_root()
    keeper = Part(value=-1)
    keeper.add_to_root()
    keeper.b = parts[-1]  # reaching one member reaches all of it
    chains = rt.reference_chains(root)
    assert [(link.holder, link.member) for link in chains[0].links] == [
        (keeper, "b"),
        (parts[-1], "cluster"),
        (root, None),
    ]
    chain = rt.reference_chains(parts[3])[0]
    assert [link.member for link in chain.links] == ["b", "cluster", "cluster", None]
    check_chain(chain, parts[3])
    keeper.b = None
    assert rt.reference_chains(parts[3]) == []
    collect(rt)
    assert root.is_expired and all(p.is_expired for p in parts)


def test_bad_arguments(rt: zs.Runtime) -> None:
    obj = Holder()
    with pytest.raises(TypeError, match="needs a zs.Object"):
        rt.reference_chains(Spot())  # type: ignore[arg-type]
    for limit in (0, -1, 1.5, True, 2**32):
        with pytest.raises(ValueError, match="limit"):
            rt.reference_chains(obj, limit=limit)  # type: ignore[arg-type]
    with zs.Runtime() as other, pytest.raises(ValueError, match="another runtime"):
        other.reference_chains(obj)
    collect(rt)
    with pytest.raises(zs.ExpiredConjugateError):
        rt.reference_chains(obj)


def test_a_dying_object_mid_cycle_reads_as_expired(rt: zs.Runtime) -> None:
    """Between an incremental gather and the expiry of its conjugate, asking
    about a dying object raises, and the conjugate has expired by then."""
    pending = awaiting_expiry(rt, [Holder() for _ in range(2000)])
    with pytest.raises(zs.ExpiredConjugateError):
        rt.reference_chains(pending[-1])
    assert pending[-1].is_expired
    finish_cycle(rt)


def test_refused_inside_a_collection(rt: zs.Runtime) -> None:
    """Asked from code running inside a collection (a finaliser, a gc
    callback), the search would adopt objects mid-expiry: refused."""
    obj = Holder()
    obj.add_to_root()
    rt._life_enter(_core.LIFE_COLLECT, "a collection")
    try:
        assert rt._collecting and rt.lifecycle == "collecting"
        with pytest.raises(RuntimeError, match="inside a collection"):
            rt.reference_chains(obj)
    finally:
        rt._life_leave(_core.LIFE_COLLECT)
    assert len(rt.reference_chains(obj)) == 1


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(2, 60))
def test_chains_exist_exactly_for_the_survivors(seed: int, size: int) -> None:
    """On random graphs (references, arrays, struct members, outers, roots,
    strong pointers, garbage marks, black arrays), every chain is a real path
    from a real root, and an object has chains exactly when a full
    collection keeps it."""
    rng = random.Random(seed)
    with zs.Runtime() as rt:
        objects: list[Holder] = []
        for _ in range(size):
            outer = rng.choice(objects) if objects and rng.random() < 0.15 else None
            objects.append(Holder(outer=outer))
        keep: list[Any] = []
        for obj in objects:
            roll = rng.random()
            if roll < 0.1:
                obj.add_to_root()
            elif roll < 0.15:
                keep.append(zs.StrongObjectPtr(obj))
            elif roll < 0.18:
                keep.append(zs.Array[Holder]([obj]))
            for _ in range(rng.randrange(3)):
                kind, other = rng.randrange(3), rng.choice(objects)
                if kind == 0:
                    obj.target = other
                elif kind == 1:
                    obj.items.append(other)
                else:
                    obj.spot = Spot(owner=other)
        for obj in rng.sample(objects, size // 10):
            obj.mark_as_garbage()
        chains = {id(obj): rt.reference_chains(obj) for obj in objects}
        for obj in objects:
            for chain in chains[id(obj)]:
                check_chain(chain, obj)
            lengths = [len(c) for c in chains[id(obj)]]
            assert lengths == sorted(lengths)
        collect(rt)
        assert [not obj.is_expired for obj in objects] == [bool(chains[id(o)]) for o in objects]
        for value in keep:
            value.dispose()


def _search_under_a_gc_callback(action: str, when: int) -> tuple[int, bool]:
    """rt.reference_chains() with a gc.callbacks entry that, at the
    ``when``-th collection of Python's cycle collector (every allocation
    runs one), closes the runtime or unroots the target and collects.
    Returns how many collections ran and whether the callback was refused;
    checks that every chain returned is whole."""
    import gc

    runtime = zs.Runtime()
    with runtime.activate():
        head = Holder()
        head.add_to_root()
        target = head
        for _ in range(5):
            target.items.append(Holder())
            target.target = target.items[0]
            target = target.target
        black = zs.Array[Holder]([target, head])
        calls, refused = [0], []

        def callback(phase: str, info: dict[str, Any]) -> None:
            if phase != "start":
                return
            calls[0] += 1
            if calls[0] != when:
                return
            try:
                if action == "close":
                    runtime.close()
                else:
                    head.remove_from_root()
                    target.mark_as_garbage()
                    runtime.collect_garbage()
            except RuntimeError as error:
                refused.append(error)

        saved = gc.get_threshold()
        gc.callbacks.append(callback)
        gc.set_threshold(1, 1, 1)
        try:
            chains = runtime.reference_chains(target)
        except zs.ExpiredConjugateError:
            chains = []  # closed or collected before the search began
        finally:
            gc.callbacks.remove(callback)
            gc.set_threshold(*saved)
        for chain in chains:
            assert all(link.holder is not None for link in chain.links), str(chain)
            assert chain.links[-1].holder is target
        if not black.is_expired:
            black.dispose()
    runtime.close()
    return calls[0], bool(refused)


@pytest.mark.parametrize("action", ["close", "collect"])
def test_a_gc_callback_cannot_close_or_collect_during_the_search(action: str) -> None:
    """Found by the fuzzer (tools/fuzz/harness.py, op_hostile_collector
    around op_reference_chains): the runtime's lock is re-entrant, so a
    gc.callbacks entry run by an allocation of the search or of the
    conversion of its handles could close the runtime (or unroot the target
    and collect) in the middle of it, and the chains came back with None
    holders ("a freed black value") that were not the target. Such re-entry
    is refused now, as while any conjugate is adopted: every chain returned
    is whole, whichever allocation the callback runs at."""
    refused_any = False
    for when in itertools.count(1):
        calls, refused = _search_under_a_gc_callback(action, when)
        refused_any = refused_any or refused
        if calls < when:
            break
    assert refused_any  # some callback ran inside the search and was refused
