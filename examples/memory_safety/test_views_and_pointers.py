"""Red views into native memory and weak pointers: they expire instead of
dangling (UnLua #517/#505, UnrealSharp #195 in the design's list)."""

from __future__ import annotations

import pytest

import zsharp_py as zs
from game import Actor, Vec3


def test_a_view_into_a_reallocated_array_expires(zs_runtime: zs.Runtime) -> None:
    path = zs.Array[Vec3]([(0, 0, 0)])
    first = path[0]
    for i in range(100):  # grows: the block moves
        path.append((i, i, i))
    with pytest.raises(zs.ExpiredConjugateError, match="changed structure"):
        first.x
    assert path[0].x == 0.0  # a fresh view reads the new block
    path.dispose()


def test_a_view_into_a_map_expires_when_the_map_changes(zs_runtime: zs.Runtime) -> None:
    hero = Actor()
    hero.add_to_root()
    hero.inventory["sword"] = (1, 0, 0)
    sword = hero.inventory["sword"]
    hero.inventory["shield"] = (2, 0, 0)
    with pytest.raises(zs.ExpiredConjugateError):
        sword.x = 9.0
    assert hero.inventory["sword"].x == 1.0  # the write never happened
    hero.remove_from_root()


def test_a_view_outlives_neither_its_owner_nor_its_scope(zs_runtime: zs.Runtime) -> None:
    hero = Actor()
    spot = hero.position  # a view into hero's memory
    zs_runtime.collect_garbage()  # hero was never rooted
    with pytest.raises(zs.ExpiredConjugateError, match="points into has expired"):
        spot.y
    keeper = Actor()
    keeper.add_to_root()
    with zs.scope():
        inner = keeper.position
        copy = inner.clone()  # black: survives the scope
    with pytest.raises(zs.ExpiredConjugateError, match="scope"):
        inner.x
    assert copy.x == 0.0
    copy.dispose()
    keeper.remove_from_root()


def test_a_disposed_value_is_gone(zs_runtime: zs.Runtime) -> None:
    v = Vec3(1.0, 2.0, 3.0)
    v.dispose()
    with pytest.raises(zs.ExpiredConjugateError):
        v.x


def test_stale_weak_pointers_resolve_to_none(zs_runtime: zs.Runtime) -> None:
    hero = Actor(name="Hero")
    hero.add_to_root()
    friend = Actor(name="Friend")
    hero.friend = zs.WeakObjectPtr(friend)
    assert hero.friend.get() is friend
    zs_runtime.collect_garbage()  # weak: did not keep the friend alive
    assert hero.friend.get() is None and not hero.friend.is_valid
    for _ in range(10):
        Actor()  # fill freed slots with newcomers
    assert hero.friend.get() is None
    hero.remove_from_root()
