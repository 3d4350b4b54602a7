"""Use after free: every way back to a destroyed object raises
ExpiredConjugateError, and a reused slot never resurrects an old handle."""

from __future__ import annotations

import pytest

import zsharp_py as zs
from game import Actor, Vec3


def test_reading_and_writing_a_collected_object(zs_runtime: zs.Runtime) -> None:
    stray = Actor(name="Stray")
    zs_runtime.collect_garbage()  # nothing references it
    assert stray.is_expired
    with pytest.raises(zs.ExpiredConjugateError, match="Stray.*garbage collector destroyed"):
        stray.health
    with pytest.raises(zs.ExpiredConjugateError):
        stray.health = 5
    with pytest.raises(zs.ExpiredConjugateError):
        stray.heal(10)  # a method touching a property
    with pytest.raises(zs.ExpiredConjugateError):
        stray.add_to_root()  # too late to save it


def test_storing_an_expired_object_into_a_live_one(zs_runtime: zs.Runtime) -> None:
    hero = Actor(name="Hero")
    hero.add_to_root()
    ghost = Actor()
    zs_runtime.collect_garbage()
    with pytest.raises(zs.ExpiredConjugateError):
        hero.target = ghost
    with pytest.raises(zs.ExpiredConjugateError):
        zs.WeakObjectPtr(ghost)
    assert hero.target is None  # nothing was written
    hero.remove_from_root()


def test_mark_as_garbage_nulls_references_then_expires(zs_runtime: zs.Runtime) -> None:
    hero = Actor(name="Hero")
    hero.add_to_root()
    boss = Actor(name="Boss")
    hero.target = boss
    boss.mark_as_garbage()  # referenced, but destroyed anyway
    zs_runtime.collect_garbage()
    assert hero.target is None
    with pytest.raises(zs.ExpiredConjugateError, match="marked as garbage"):
        boss.position
    hero.remove_from_root()


def test_a_reused_slot_never_answers_to_an_old_handle(zs_runtime: zs.Runtime) -> None:
    old = Actor(name="Old")
    weak = zs.WeakObjectPtr(old)
    old_slot = old.handle & 0xFFFFFFFF
    zs_runtime.collect_garbage()
    new = Actor(name="New")  # takes the freed slot, new serial
    assert new.handle & 0xFFFFFFFF == old_slot and new.handle != old.handle
    assert weak.get() is None  # not the newcomer
    with pytest.raises(zs.ExpiredConjugateError):
        old.health  # the old conjugate stays expired
    assert new.health == 100


def test_closing_the_runtime_expires_everything(zs_runtime: zs.Runtime) -> None:
    hero = Actor()
    hero.add_to_root()
    spot = hero.position
    kept = Vec3(1.0, 2.0, 3.0)
    zs_runtime.close()
    for conjugate in (hero, spot, kept):
        assert conjugate.is_expired
    with pytest.raises(zs.ExpiredConjugateError, match="runtime was closed"):
        spot.x
    with pytest.raises(zs.ExpiredConjugateError):
        kept.x = 4.0


@pytest.mark.zs_stress(collect_every=3, poison_freed=True, check_marks=True)
def test_under_stress_every_third_creation_collects(zs_runtime: zs.Runtime) -> None:
    """collect_every collects before object creations: an object only Python
    holds dies early, loudly; a rooted chain survives, heap checked after."""
    head = Actor()
    head.add_to_root()
    node = head
    for _ in range(30):
        node.target = Actor()
        node = node.target
    loose = Actor()
    for _ in range(3):
        Actor()
    assert loose.is_expired and not head.is_expired
    with pytest.raises(zs.ExpiredConjugateError):
        loose.health
    head.remove_from_root()
