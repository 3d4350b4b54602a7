"""The sample engine (native/engine/sample_engine.c, zsharp_py.sample_engine)
scripted from Python: its classes discovered, its functions called, its
actors subclassed in Python and created by the engine's own spawn function,
its events reaching Python overrides (``super()`` running the native
default), Python state kept on actors exactly as long as they live, and
collections and destruction from inside native functions and overrides."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

import zsharp_py as zs
from helpers import runtime_ptr
from hostile_support import GcTrigger
from zsharp_py import sample_engine


class Token:
    """A state value whose release a weak reference can watch."""


@pytest.fixture
def rt(engine_rt: zs.Runtime) -> zs.Runtime:
    """Every test here runs on the sample engine (conftest's engine_rt)."""
    return engine_rt


def engine() -> tuple[Any, Any, Any, Any]:
    return (
        zs.native_class("World"),
        zs.native_class("Actor"),
        zs.native_struct("Transform"),
        zs.native_struct("Vec3"),
    )


def test_install_once_per_runtime(rt: zs.Runtime) -> None:
    with pytest.raises(ValueError, match="installed in this runtime already"):
        sample_engine.install(rt)
    with pytest.raises(TypeError, match="zs.Runtime"):
        sample_engine.install("world")  # type: ignore[arg-type]
    assert set(zs.native_classes()) >= {"World", "Actor", "Component", "MovementComponent"}
    Team = zs.native_enum("Team")
    assert [m.name for m in Team] == ["Neutral", "Red", "Blue"]


def test_functions_of_every_direction(rt: zs.Runtime) -> None:
    World, Actor, Transform, Vec3 = engine()
    world = World()
    world.add_to_root()
    a = world.spawn(Actor, Transform(Vec3(1.0, 2.0, 3.0), 0.0, 1.0))
    b = world.spawn(Actor, Transform())
    assert type(a) is Actor and a.alive and a.health == a.max_health == 100
    assert a.take_damage(30.0, b) == 70.0
    loc = a.get_location()  # an out parameter comes back as a value
    assert (loc.x, loc.y, loc.z) == (1.0, 2.0, 3.0)
    a.move(Vec3(1.0, 0.0, 0.0))
    assert a.transform.location.x == 2.0
    assert a.heal(50) == 30  # in-out: how much was healed
    assert a.health == 100
    movement_class = zs.native_class("MovementComponent")
    component = a.add_component(movement_class)
    assert type(component) is movement_class and component.owner is a
    assert a.components[0] is component
    assert World.version() == 1 and world.find(1) is b and world.find(5) is None
    with pytest.raises(TypeError, match="World.spawn"):
        world.spawn(Actor)
    with pytest.raises(TypeError):
        world.spawn(World, Transform())  # not a subclass of Actor
    with pytest.raises(ValueError):
        a.take_damage(-1.0, None)  # refused by the engine: its status raises


def test_python_subclasses_spawned_by_the_engine_and_ticked(rt: zs.Runtime) -> None:
    World, Actor, Transform, _ = engine()
    log: list[Any] = []

    class Hero(Actor):  # type: ignore[misc,valid-type]
        def begin_play(self) -> None:
            super().begin_play()  # the engine's default: alive, full health
            self.speed = 3.0
            log.append(("begin", self.health))

        def tick(self, dt):  # type: ignore[no-untyped-def]
            log.append(("tick", dt))
            super().tick(dt)  # the default moves along x at speed

        def on_destroy(self) -> None:
            log.append("destroyed")

    world = World()
    world.add_to_root()
    hero = world.spawn(Hero, Transform())
    plain = world.spawn(Actor, Transform())
    assert type(hero) is Hero and log == [("begin", 100)]
    assert world.tick(0.5) == 2
    assert log[1:] == [("tick", 0.5)]
    assert hero.ticks == 1 and hero.transform.location.x == 1.5
    assert plain.ticks == 1 and plain.transform.location.x == 0.0  # speed 0
    world.destroy(hero)
    assert log[-1] == "destroyed" and hero.is_garbage
    assert world.tick(0.5) == 1  # a destroyed actor is not ticked
    rt.collect_garbage()
    assert hero.is_expired and not plain.is_expired


def test_created_natively_by_name_and_by_subclass_of(rt: zs.Runtime) -> None:
    World, Actor, Transform, _ = engine()

    class Scout(Actor):  # type: ignore[misc,valid-type]
        pass

    world = World()
    world.add_to_root()
    scouts = [world.spawn(Scout, Transform()) for _ in range(3)]
    assert all(type(s) is Scout for s in scouts)
    scouts.clear()
    gc.collect()  # no Python reference left: the world's array holds them
    rt.collect_garbage()
    found = world.find(2)
    assert type(found) is Scout and found.alive


def test_state_lives_exactly_as_long_as_the_actor(rt: zs.Runtime) -> None:
    World, Actor, Transform, _ = engine()

    class Looter(Actor):  # type: ignore[misc,valid-type]
        bag: list[Any] = zs.state(factory=list)

        def tick(self, dt):  # type: ignore[no-untyped-def]
            self.bag.append(dt)

    world = World()
    world.add_to_root()
    looter = world.spawn(Looter, Transform())
    token = Token()
    looter.bag.append(token)
    watch = weakref.ref(token)
    del looter, token
    gc.collect()
    for _ in range(3):
        world.tick(1.0)
        rt.collect_garbage()
    looter = world.find(0)
    assert looter.bag[0] is watch() and looter.bag[1:] == [1.0, 1.0, 1.0]
    world.destroy(looter)
    rt.collect_garbage()
    with pytest.raises(zs.ExpiredConjugateError):
        looter.bag
    del looter
    gc.collect()
    assert watch() is None  # released with the actor


def test_overrides_that_destroy_and_collect_inside_native_calls(rt: zs.Runtime) -> None:
    """An override destroys other actors and itself and runs a collection
    from inside World.tick's loop; the engine skips what died, nothing
    touches freed memory, and the heap verifies."""
    World, Actor, Transform, _ = engine()

    class Bomber(Actor):  # type: ignore[misc,valid-type]
        def tick(self, dt):  # type: ignore[no-untyped-def]
            world = self.world
            victim = world.find(0)
            if victim is not None and victim is not self:
                world.destroy(victim)
            world.destroy(self)
            world.collect()  # a native collection, inside the override
            super().tick(dt)  # the default on a destroyed actor: refused

    world = World()
    world.add_to_root()
    others = [world.spawn(Actor, Transform()) for _ in range(3)]
    bomber = world.spawn(Bomber, Transform())
    with pytest.raises(zs.ExpiredConjugateError):
        bomber.tick(0.1)  # called from Python: the refusal raises
    assert others[0].is_expired and bomber.is_expired
    assert world.tick(0.1) == 2
    rt.gc.verify()


def test_a_native_collection_is_finished_when_it_returns(rt: zs.Runtime) -> None:
    """A collection the host runs (World.collect, from Python with no
    override in between) hands its dying objects to the expiry handler
    before its purge frees them: when the host function returns, their
    conjugates have expired and their memory is gone; a host function called
    on one, a property write and a struct member write are refused, and a
    view taken before the collection expired with its object."""
    World, Actor, Transform, _ = engine()
    world = World()
    world.add_to_root()
    doomed = world.spawn(Actor, Transform())
    kept = world.spawn(Actor, Transform())
    location = doomed.transform.location  # a struct view into doomed
    live = rt.live_objects()
    world.destroy(doomed)
    world.collect()
    assert doomed.is_expired and location.is_expired
    assert rt.live_objects() == live - 1  # freed inside the call
    with pytest.raises(zs.ExpiredConjugateError):
        doomed.take_damage(1.0, None)
    with pytest.raises(zs.ExpiredConjugateError):
        doomed.health = 5
    with pytest.raises(zs.ExpiredConjugateError):
        location.x = 5.0
    assert kept.take_damage(1.0, None) == 99.0  # the living are not affected
    kept.health = 7
    rt.collect_garbage()
    assert kept.health == 7
    rt.gc.verify()


def test_host_functions_refused_while_conjugates_expire(rt: zs.Runtime) -> None:
    """Python code run while the collector expires the conjugates of taken
    objects (a gc callback on an allocation) may not call a host function:
    a native collection then would free the objects whose conjugates it has
    not reached yet. The call raises RuntimeError; after the collection it
    works again, and every doomed conjugate expired."""
    World, Actor, Transform, _ = engine()
    world = World()
    world.add_to_root()
    doomed = [world.spawn(Actor, Transform()) for _ in range(64)]
    for actor in doomed:
        world.destroy(actor)
    outcomes: list[object] = []

    def collect_natively() -> None:
        if not rt._collecting:
            return
        try:
            world.collect()
            outcomes.append("collected")
        except RuntimeError as error:
            outcomes.append(error)
        # Whatever happened, no doomed actor reads freed memory.
        for actor in doomed:
            if not actor.is_expired:
                assert actor.health >= 0

    with GcTrigger(collect_natively):
        rt.collect_garbage()
    refused = [o for o in outcomes if isinstance(o, RuntimeError)]
    assert refused, outcomes
    assert "while the collector expires conjugates" in str(refused[0])
    assert all(actor.is_expired for actor in doomed)
    world.collect()
    rt.gc.verify()


def test_an_override_that_closes_the_runtime_inside_a_host_function() -> None:
    """World.tick (a host function called from Python) ticks an override
    that closes the runtime. The engine's loop goes on over the native
    runtime, which is freed only when tick returns; then every conjugate is
    expired and nothing reads freed memory (the sanitizer build checks)."""
    runtime = zs.Runtime()
    with runtime:
        sample_engine.install()
        World, Actor, Transform, _ = engine()

        class Closer(Actor):  # type: ignore[misc,valid-type]
            def tick(self, dt):  # type: ignore[no-untyped-def]
                runtime.close()

        world = World()
        world.add_to_root()
        actors = [world.spawn(Closer, Transform()) for _ in range(3)]
        ticked = world.tick(0.1)  # the first override closes; the rest find it closed
        assert runtime.closed and ticked == 1
        assert world.is_expired and all(actor.is_expired for actor in actors)
        with pytest.raises(zs.ExpiredConjugateError):
            world.tick(0.1)
    gc.collect()


@pytest.mark.parametrize("hook", ["destroy_and_collect", "close"])
def test_a_scalar_argument_whose_conversion_kills_the_target(hook: str) -> None:
    """Actor.heal takes scalars only (the short path of native/binding/
    functions.c, invoke_plain). An argument whose __index__ destroys the
    actor and collects natively, or closes the runtime, runs before the
    target is checked, so the call raises instead of reaching the entry."""
    runtime = zs.Runtime()
    with runtime:
        sample_engine.install()
        World, Actor, Transform, _ = engine()
        world = World()
        world.add_to_root()
        actor = world.spawn(Actor, Transform())
        actor.health = 50

        class Hostile:
            def __index__(self) -> int:
                if hook == "close":
                    runtime.close()
                else:
                    world.destroy(actor)
                    world.collect()
                return 5

        with pytest.raises(zs.ExpiredConjugateError):
            actor.heal(Hostile())
        if hook != "close":
            runtime.collect_garbage()
            assert actor.is_expired and not world.is_expired
            runtime.gc.verify()
    assert runtime.closed and actor.is_expired
    gc.collect()


def test_an_override_that_raises_reaches_the_caller_and_the_loop_goes_on(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    World, Actor, Transform, _ = engine()

    class Buggy(Actor):  # type: ignore[misc,valid-type]
        def begin_play(self) -> None:
            raise KeyError("no such item")

        def tick(self, dt):  # type: ignore[no-untyped-def]
            raise ZeroDivisionError

    world = World()
    world.add_to_root()
    with pytest.raises(zs.CallbackError, match=r"^World\.spawn.*raised KeyError") as spawned:
        world.spawn(Buggy, Transform())
    assert type(spawned.value.__cause__) is KeyError
    plain = world.spawn(Actor, Transform())
    (buggy,) = [a for a in world.actors if a is not None and type(a) is Buggy]
    assert not buggy.alive  # begin_play failed before the default
    with pytest.raises(zs.CallbackError, match=r"^World\.tick.*raised ZeroDivisionError") as e:
        world.tick(1.0)
    assert type(e.value.__cause__) is ZeroDivisionError
    assert plain.ticks == 1  # the engine went on after the failure
    assert unraisable == []
    rt.gc.verify()


def test_host_objects_in_python_declared_references(rt: zs.Runtime) -> None:
    World, Actor, Transform, _ = engine()

    class Squad(zs.Object):
        leader: Actor | None
        members: zs.Array[Actor]

    world = World()
    squad = Squad()
    squad.add_to_root()
    squad.leader = world.spawn(Actor, Transform())
    squad.members.append(world.spawn(Actor, Transform()))
    del world
    gc.collect()
    rt.collect_garbage()
    assert squad.leader.alive and squad.members[0].alive
    assert squad.leader.world is not None  # the world is kept by its actors


def test_host_types_are_shared_by_runtime_after_runtime_and_nothing_accumulates() -> None:
    """Host classes are made once per description and bound in each runtime
    whose engine registers them: round after round the same classes come
    back, a closed runtime's entries are forgotten (its functions are bound
    in no closed runtime), and the Python classes each round derived from
    them, used in ``Array[Array[Actor]]`` and ``SubclassOf[Actor]``, are
    collected with the round, so the process does not grow."""
    rounds = [_play_a_round() for _ in range(3)]
    gc.collect()
    shared = {tuple(types) for types, _ in rounds}
    assert len(shared) == 1  # the same World, Actor and Team every round
    World, Actor, _ = shared.pop()
    assert World.spawn.runtimes == () and Actor.take_damage.runtimes == ()
    assert [ranger() for _, ranger in rounds] == [None] * 3


def _play_a_round() -> tuple[list[Any], weakref.ref[Any]]:
    """Bind the engine in a runtime, subclass and use it, close it: the
    host types bound there, and a weak reference to the subclass."""
    with zs.Runtime():
        sample_engine.install()
        World, Actor = zs.native_class("World"), zs.native_class("Actor")

        class Ranger(Actor):  # type: ignore[misc,valid-type]
            friends: zs.Array[zs.Array[Actor]]
            kind: zs.SubclassOf[Actor]

        world = World()
        ranger = world.spawn(Ranger, zs.native_struct("Transform")())
        ranger.friends.append([ranger])
        ranger.kind = Ranger
        return [World, Actor, zs.native_enum("Team")], weakref.ref(Ranger)


def test_native_lookup_by_name_of_a_subclass_declared_twice_is_ambiguous() -> None:
    """Two runtimes bind the engine's one ``Actor``, and a ``Sentry`` is
    declared over it in each: both can live in either, so native code
    asking for ``"Sentry"`` by name cannot tell which it means and the
    lookup fails (docs/native-classes.md); once the first is gone, the
    second is found and created natively."""
    from zsharp_py._base.ffi import ffi, lib

    def declare_first() -> weakref.ref[type]:
        class Sentry(zs.native_class("Actor")):  # type: ignore[misc]
            pass

        return weakref.ref(Sentry)

    with zs.Runtime():
        sample_engine.install()
        first = declare_first()
        with zs.Runtime() as second:
            sample_engine.install()

            class Sentry(zs.native_class("Actor")):  # type: ignore[misc]
                pass

            found = ffi.new("zs_class **")
            assert first() is not None  # declared, never used: it could live here too
            assert lib.zs_find_class(runtime_ptr(second), b"Sentry", found) == lib.ZS_E_INVALID
            gc.collect()
            assert first() is None
            assert lib.zs_find_class(runtime_ptr(second), b"Sentry", found) == lib.ZS_OK
            handle = ffi.new("zs_ref *")
            obj = ffi.new("zs_object **")
            assert (
                lib.zs_object_new(
                    runtime_ptr(second), found[0], 0, lib.ZS_NAME_AUTO, 0, handle, obj
                )
                == lib.ZS_OK
            )
            made = second._conjugate_of(handle[0])
            assert type(made) is Sentry
