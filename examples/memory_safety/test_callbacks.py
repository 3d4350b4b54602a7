"""Collections inside callbacks: a listener may collect, destroy its own
broadcaster or hold views; nothing it leaves behind dangles."""

from __future__ import annotations

import pytest

import zsharp_py as zs
from game import Actor, Vec3


def test_a_listener_that_collects_its_own_broadcaster(zs_runtime: zs.Runtime) -> None:
    door = Actor(name="Door")  # only Python holds it
    log: list[object] = []

    def collect_everything() -> None:
        zs_runtime.collect_garbage()
        log.append(door.is_expired)

    door.on_hit.add(collect_everything)
    door.on_hit.add(lambda: log.append("second listener ran"))
    door.on_hit.broadcast()
    assert log == [True, "second listener ran"]
    with pytest.raises(zs.ExpiredConjugateError):
        door.on_hit.broadcast()


def test_a_listener_bound_to_a_destroyed_object_is_skipped(zs_runtime: zs.Runtime) -> None:
    hero = Actor(name="Hero")
    hero.add_to_root()
    medic = Actor(name="Medic", health=10)
    hero.on_hit.add(medic.heal)  # object bindings are weak
    hero.on_hit.broadcast(5)
    assert medic.health == 15
    zs_runtime.collect_garbage()  # the medic dies
    hero.on_hit.broadcast(5)  # skipped and dropped, never called
    assert len(hero.on_hit) == 0
    with pytest.raises(zs.ExpiredConjugateError):
        medic.health
    hero.remove_from_root()


def test_views_taken_in_a_callback_expire_when_it_returns(zs_runtime: zs.Runtime) -> None:
    hero = Actor()
    hero.add_to_root()
    leaked_views: list[Vec3] = []
    hero.on_hit.add(lambda: leaked_views.append(hero.position))
    hero.on_hit.broadcast()
    (view,) = leaked_views
    with pytest.raises(zs.ExpiredConjugateError, match="scope"):
        view.x
    hero.remove_from_root()


def test_a_listener_that_marks_the_target_as_garbage(zs_runtime: zs.Runtime) -> None:
    hero = Actor(name="Hero")
    hero.add_to_root()
    boss = Actor(name="Boss")
    hero.target = boss
    boss.on_hit.add(lambda: boss.mark_as_garbage())
    boss.on_hit.broadcast()
    zs_runtime.gc.start_incremental()  # collected in small steps
    while not zs_runtime.gc.step(0.001):
        pass
    assert hero.target is None
    with pytest.raises(zs.ExpiredConjugateError, match="marked as garbage"):
        boss.on_hit.broadcast()
    hero.remove_from_root()
