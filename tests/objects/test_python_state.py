"""Python state on native objects: ``zs.state()`` (src/zsharp_py/_model/state.py,
native/binding/state.c).

A class with state keeps each conjugate exactly as long as its native
object: the conjugate table holds it strongly, so the state survives while
only native references reach the object, and it is released when the
object dies (collected, marked as garbage, runtime closed), after which the
dead conjugate raises ``ExpiredConjugateError`` on state access. Classes
without state are unchanged: their conjugates are freed when Python drops
them. Conjugates cannot be weakly referenced, so the tests watch the state
values (weak references, finalisers) and the conjugate table
(``rt._conjugate_get``) instead.
"""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import zsharp_py as zs
from helpers import class_ptr, collect, runtime_ptr
from zsharp_py import _core
from zsharp_py._base.ffi import ffi, lib
from zsharp_py._model.object import class_layout
from zsharp_py.debug import GcStress


class Token:
    """A state value whose release can be watched (``weakref.ref``)."""

    def __init__(self, name: str = "") -> None:
        self.name = name


class Cache(dict[str, int]):
    """A dict that can be weakly referenced."""


class Hero(zs.Object):
    hp: zs.Int32 = 10
    cache: dict[str, int] = zs.state(factory=Cache)
    target_name: str | None = zs.state(default=None)
    note: Any = zs.state()
    me: Any = zs.state(default=None)


class Team(zs.Object):
    leader: Hero | None
    members: zs.Array[Hero]


class Plain(zs.Object):
    hp: zs.Int32


def _instances(cls: type) -> int:
    """The conjugates of ``cls`` Python still has (stateful conjugates are
    tracked by the cycle collector)."""
    return sum(1 for o in gc.get_objects() if type(o) is cls)


@pytest.fixture
def team(rt: zs.Runtime) -> Team:
    rooted = Team()
    rooted.add_to_root()
    return rooted


# ---- the state lives as long as the object ------------------------------------------


def test_state_survives_collections_while_only_native_references_reach_it(
    rt: zs.Runtime, team: Team
) -> None:
    team.leader = Hero()
    team.leader.cache["a"] = 1
    token = Token()
    team.leader.note = token
    cache_ref, token_ref = weakref.ref(team.leader.cache), weakref.ref(token)
    handle = team.leader.handle
    conjugate_id = id(team.leader)
    del token
    gc.collect()
    collect(rt)
    gc.collect()
    assert cache_ref() is not None and token_ref() is not None  # nothing was released
    leader = team.leader
    assert leader is not None and id(leader) == conjugate_id
    assert rt._conjugate_get(handle) is leader  # the very conjugate, held by the table
    assert leader.cache is cache_ref() and leader.cache == {"a": 1}
    assert leader.note is token_ref()


def test_state_survives_in_objects_reached_through_containers(rt: zs.Runtime, team: Team) -> None:
    for i in range(20):
        hero = Hero(hp=i)
        hero.note = Token(str(i))
        team.members.append(hero)
    del hero
    for _ in range(3):
        gc.collect()
        collect(rt)
    assert [h.note.name for h in team.members] == [str(i) for i in range(20)]
    assert [h.hp for h in team.members] == list(range(20))


@pytest.mark.parametrize("how", ["collected", "garbage", "closed", "incremental"])
def test_state_is_released_when_the_object_dies(how: str) -> None:
    runtime = zs.Runtime()
    with runtime.activate():
        team = Team()
        team.add_to_root()
        hero = Hero()
        team.leader = hero
        token = Token()
        hero.note = token
        hero.cache["k"] = 2
        token_ref, cache_ref = weakref.ref(token), weakref.ref(hero.cache)
        released: list[str] = []
        weakref.finalize(token, released.append, "token")
        del token
        if how == "collected":
            team.leader = None
            collect(runtime)
        elif how == "garbage":
            hero.mark_as_garbage()
            collect(runtime)
            assert team.leader is None  # killable reference cleared
        elif how == "incremental":
            team.leader = None
            runtime.gc.start_incremental()
            while not runtime.gc.step(max_objects=1):  # expiry in batches of one
                pass
            runtime.gc.verify()
        else:
            runtime.close()
        # Released at the expiry, although this test still holds the conjugate.
        assert released == ["token"] and token_ref() is None and cache_ref() is None
        assert hero.is_expired
        for read in (lambda: hero.note, lambda: hero.cache, lambda: hero.target_name):
            with pytest.raises(zs.ExpiredConjugateError):
                read()
        with pytest.raises(zs.ExpiredConjugateError):
            hero.note = Token()
        with pytest.raises(zs.ExpiredConjugateError):
            del hero.note
    runtime.close()


def test_state_of_an_object_only_native_code_held_is_released_when_it_dies(
    rt: zs.Runtime, team: Team
) -> None:
    team.leader = Hero()
    token = Token()
    team.leader.note = token
    token_ref = weakref.ref(token)
    before = _instances(Hero)
    del token
    team.leader = None  # now unreachable; Python holds no reference to it
    assert token_ref() is not None and _instances(Hero) == before
    collect(rt)
    assert token_ref() is None
    assert _instances(Hero) == before - 1  # the conjugate went with it


def test_a_stateful_conjugate_never_takes_a_plain_ones_freed_memory(rt: zs.Runtime) -> None:
    """A plain conjugate's freed memory waits for the next plain one
    (zs_conjugate_alloc, native/binding/core.h); a stateful conjugate is
    bigger and tracked: Python's allocator makes it, its state unset."""
    for _ in range(20):
        Plain(hp=1)
    hero = Hero()
    assert gc.is_tracked(hero) and sys.getsizeof(hero) > 48
    assert hero.hp == 10 and hero.target_name is None and hero.me is None
    assert type(hero.cache) is Cache and not hero.cache
    with pytest.raises(AttributeError):
        hero.note  # declared without a default: unset
    plain = Plain()
    assert not gc.is_tracked(plain) and plain.hp == 0


def test_a_conjugate_of_a_class_without_state_is_freed_when_python_drops_it(
    rt: zs.Runtime, team: Team
) -> None:
    plain, hero = Plain(), Hero()
    plain.add_to_root()
    hero.add_to_root()
    plain_handle, hero_handle = plain.handle, hero.handle
    assert not gc.is_tracked(plain) and sys.getsizeof(plain) == 48  # unchanged
    assert gc.is_tracked(hero)  # slots: Python tracks it
    assert not Plain._zs_stateful and Hero._zs_stateful
    del plain, hero
    assert rt._conjugate_get(plain_handle) is None  # freed by refcount
    held = rt._conjugate_get(hero_handle)
    assert type(held) is Hero and not held.is_expired  # kept by the table


# ---- Python's cycle collector -------------------------------------------------------


def test_a_self_cycle_lives_with_the_object_and_goes_when_it_dies(
    rt: zs.Runtime, team: Team
) -> None:
    before = _instances(Hero)
    hero = Hero()
    hero.me = hero
    token = Token()
    hero.note = token
    token_ref = weakref.ref(token)
    team.leader = hero
    del hero, token
    for _ in range(2):
        gc.collect()  # the table's reference is invisible: the cycle is not garbage
        collect(rt)
    leader = team.leader
    assert leader is not None and leader.me is leader and leader.note is token_ref()
    del leader
    team.leader = None
    collect(rt)
    # Expiry emptied the slots, so refcounting frees the conjugate, no
    # cycle collection needed.
    assert token_ref() is None
    assert _instances(Hero) == before


def test_cycles_between_objects_and_python_values(rt: zs.Runtime, team: Team) -> None:
    before = _instances(Hero)
    a, b = Hero(), Hero()
    holder = Token()
    holder.hero = a  # type: ignore[attr-defined]
    a.me, b.me, a.note = b, a, holder  # a -> b -> a, a -> holder -> a
    team.members.append(a)
    team.members.append(b)
    holder_ref = weakref.ref(holder)
    del a, b, holder
    gc.collect()
    collect(rt)
    gc.collect()
    first, second = team.members[0], team.members[1]
    assert first.me is second and second.me is first and first.note is holder_ref()
    del first, second
    team.members.clear()
    collect(rt)
    assert holder_ref() is None and _instances(Hero) == before


def test_a_dead_conjugate_held_in_a_cycle_is_collected(rt: zs.Runtime) -> None:
    before = _instances(Hero)
    hero = Hero()
    box = Token()
    box.hero = hero  # type: ignore[attr-defined]
    box.me = box  # type: ignore[attr-defined]
    box_ref = weakref.ref(box)
    del box
    hero.mark_as_garbage()
    collect(rt)
    assert hero.is_expired
    del hero
    gc.collect()
    assert box_ref() is None and _instances(Hero) == before


# ---- defaults --------------------------------------------------------------------


def test_a_factory_runs_once_per_object_on_first_read(rt: zs.Runtime) -> None:
    calls: list[int] = []

    def make() -> list[int]:
        calls.append(1)
        return []

    class Counted(zs.Object):
        items: list[int] = zs.state(factory=make)

    one, two = Counted(), Counted()
    assert calls == []  # lazily: nothing at creation
    one.items.append(1)
    one.items.append(2)
    assert calls == [1] and one.items == [1, 2]
    assert two.items == [] and two.items is not one.items and calls == [1, 1]
    two.items = [9]
    assert two.items == [9] and calls == [1, 1]
    del one.items  # back to the default: the next read makes a new one
    assert one.items == [] and calls == [1, 1, 1]


def test_a_default_is_shared_and_must_be_immutable(rt: zs.Runtime) -> None:
    shared = ("a", "b")

    class Tagged(zs.Object):
        tags: tuple[str, ...] = zs.state(default=shared)

    assert Tagged().tags is shared and Tagged().tags is shared
    with pytest.raises(ValueError, match=r"mutable list .* zs\.state\(factory=list\)"):
        zs.state(default=[])
    with pytest.raises(ValueError, match="mutable dict"):
        zs.state(default={})
    with pytest.raises(TypeError, match="a default or a factory, not both"):
        zs.state(default=1, factory=int)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="must be callable"):
        zs.state(factory=5)  # type: ignore[call-overload]


def test_state_without_a_default_raises_until_assigned(rt: zs.Runtime) -> None:
    hero = Hero()
    with pytest.raises(AttributeError, match=r"'Hero' object has no attribute 'note': Hero\.note"):
        hero.note
    with pytest.raises(AttributeError, match="assign it first"):
        del hero.note
    assert hero.target_name is None and hero.me is None
    del hero.target_name  # state with a default: back to it (nothing to do)
    hero.note = "set"
    assert hero.note == "set"
    del hero.note
    with pytest.raises(AttributeError):
        hero.note


def test_constructor_keywords_set_state(rt: zs.Runtime) -> None:
    hero = Hero(hp=3, note="n", cache=Cache(x=1))
    assert (hero.hp, hero.note, hero.cache) == (3, "n", {"x": 1})
    with pytest.raises(TypeError, match="unknown property: nte"):
        Hero(nte="n")


def test_state_annotations_are_not_native_properties(rt: zs.Runtime) -> None:
    # `str` alone would be a zs.String property; `Any` no property at all.
    assert [p.name for p in class_layout(Hero).properties] == ["hp"]
    assert "note" not in Hero.__annotations__ and "hp" in Hero.__annotations__
    assert Hero.__slots__ == ("cache", "target_name", "note", "me")
    assert repr(vars(Hero)["note"]) == "<zs.state Hero.note>"
    assert vars(Hero)["target_name"].default is None and vars(Hero)["cache"].factory is Cache
    with pytest.raises(AttributeError, match="Hero.note has no default"):
        vars(Hero)["note"].default


def test_a_subclass_inherits_state_and_adds_more(rt: zs.Runtime, team: Team) -> None:
    class Boss(Hero):
        loot: list[str] = zs.state(factory=list)
        rage: zs.Int32 = 1

    class Minion(Boss):  # no state of its own: still stateful
        pass

    assert Boss._zs_stateful and Minion._zs_stateful
    assert list(Minion._zs_state) == ["cache", "target_name", "note", "me", "loot"]
    boss = Minion(rage=4)
    boss.loot.append("gold")
    boss.cache["x"] = 1
    team.leader = boss
    token_ref = weakref.ref(boss.cache)
    del boss
    collect(rt)
    leader = team.leader
    assert isinstance(leader, Minion)
    assert leader.loot == ["gold"] and leader.cache == {"x": 1} and leader.rage == 4
    assert leader.hp == 10
    del leader
    team.leader = None
    collect(rt)
    assert token_ref() is None


@pytest.mark.parametrize(
    ("name", "annotation", "value", "message"),
    [
        ("hp", int, zs.state(), "Bad.hp: the name is already used by a property of a parent"),
        ("note", int, zs.state(), "Bad.note: the name is already used by Python state of a"),
        ("name", str, zs.state(), "Bad.name: the name is already used by zs.Object"),
        ("is_expired", None, zs.state(), "Bad.is_expired: the name is already used by zs.Object"),
        ("_h", None, zs.state(), "Bad._h: the name is already used by zs.Object"),
        ("_zs_layout", None, zs.state(), "Bad._zs_layout: the name is already used by Python"),
        ("cache", zs.Int32, None, "Bad.cache: the name is already used by Python state of a"),
        ("__slots__", None, ("x",), "cannot have instance attributes of its own"),
    ],
)
def test_state_names_that_clash_are_refused_at_declaration(
    name: str, annotation: Any, value: Any, message: str
) -> None:
    namespace: dict[str, Any] = {"__annotations__": {}}
    if annotation is not None:
        namespace["__annotations__"][name] = annotation
    if value is not None:
        namespace[name] = value
    with pytest.raises(TypeError, match=message.replace(".", r"\.")):
        type("Bad", (Hero,), namespace)


def test_state_on_a_class_that_is_not_native_is_refused() -> None:
    # Python 3.11 wraps __set_name__'s error in RuntimeError; 3.12 does not.
    with pytest.raises((TypeError, RuntimeError)) as raised:

        class NotNative:
            cache = zs.state(factory=dict)

    error = raised.value if isinstance(raised.value, TypeError) else raised.value.__cause__
    assert "only a zs.Object subclass can have it" in str(error)


def test_state_in_a_struct_is_refused() -> None:
    with pytest.raises(TypeError, match=r"Spot\.memo: a struct holds native members only"):

        class Spot(zs.Struct):
            x: zs.Float64
            memo: dict[str, int] = zs.state(factory=dict)


def test_a_class_is_made_ready_once() -> None:
    # Its conjugates' layout and the table's hold on them follow the first call.
    with pytest.raises(TypeError, match="is ready already"):
        _core.init_class(Plain, True)
    with pytest.raises(TypeError, match="is ready already"):
        _core.init_class(Hero)


def test_state_descriptors_refuse_other_objects(rt: zs.Runtime) -> None:
    with pytest.raises(TypeError, match="does not apply to a 'Plain' object"):
        Hero.__dict__["note"].__get__(Plain())
    with pytest.raises(TypeError, match="does not apply to a 'int' object"):
        Hero.__dict__["note"].__set__(5, 1)


# ---- creation and adoption pin alike ------------------------------------------------


def _native_hero_into(rt: zs.Runtime, team: Team) -> int:
    """A Hero made by native code (no conjugate), stored into team.leader."""
    offset = next(p.offset for p in class_layout(Team).properties if p.name == "leader")
    out = ffi.new("zs_ref *")
    native = class_ptr(rt, Hero)
    pointer, team_handle = runtime_ptr(rt), team.handle  # nothing allocated between the calls
    assert lib.zs_object_new(pointer, native, 0, lib.ZS_NAME_AUTO, 0, out, ffi.NULL) == 0
    assert lib.zs_store_ref(pointer, team_handle, offset, out[0]) == 0
    assert rt._conjugate_get(out[0]) is None
    return int(out[0])


@pytest.mark.parametrize("path", ["c", "python", "init", "adopted"])
def test_every_way_to_a_conjugate_pins_it(rt: zs.Runtime, team: Team, path: str) -> None:
    class Greeter(Hero):
        def __init__(self) -> None:
            super().__init__()
            self.note = "hello"

    Hero()  # the first creation registers the C creator
    if path == "c":
        hero = Hero()
        assert Hero in rt._fast_creators
    elif path == "python":
        hero = Hero(name="Named", note="hello")
    elif path == "init":
        hero = Greeter()
    else:
        handle = _native_hero_into(rt, team)
        hero = team.leader
        assert hero is not None and rt._conjugate_get(handle) is hero
    if path != "adopted":
        team.leader = hero
    hero.cache["pinned"] = 1
    cache_ref, handle = weakref.ref(hero.cache), hero.handle
    del hero
    gc.collect()
    collect(rt)
    held = rt._conjugate_get(handle)
    assert held is not None and held is team.leader and held.cache is cache_ref()
    del held
    team.leader = None
    collect(rt)
    assert cache_ref() is None and rt._conjugate_get(handle) is None


def test_creation_and_adoption_under_a_collecting_cycle_collector() -> None:
    """Allocating a tracked conjugate may run Python's cycle collector
    before 3.12; here its callback collects native garbage at every
    generation-0 collection while stateful objects are created (the C
    path, the Python path) and adopted: every state stays with its live
    object and the heap verifies."""
    stress_rt = zs.Runtime(stress=GcStress(poison_freed=True))
    log: list[str] = []

    def collect_too(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and not stress_rt.closed:
            try:
                stress_rt.collect_garbage()
                log.append("collected")
            except RuntimeError as error:
                log.append(str(error))

    threshold = gc.get_threshold()
    with stress_rt:
        team = Team()
        team.add_to_root()
        made: list[Hero] = []
        gc.set_threshold(1)
        gc.callbacks.append(collect_too)
        try:
            for i in range(200):
                hero = Hero(note=i) if i % 2 else Hero()  # the Python path / the C path
                made.append(hero)
                try:
                    if not i % 2:
                        hero.note = i
                    team.members.append(hero)
                except zs.ExpiredConjugateError:  # collected before it was linked: legal
                    assert hero.is_expired
                if i % 5 == 0:  # made by native code, adopted on the read
                    _native_hero_into(stress_rt, team)
                    leader = team.leader
                    assert leader is not None and leader.target_name is None
                    leader.target_name = str(i)
                    assert team.leader is leader
        finally:
            gc.callbacks.remove(collect_too)
            gc.set_threshold(*threshold)
        del hero, leader
        gc.collect()
        collect(stress_rt)
        alive = [h for h in made if not h.is_expired]
        assert [h.note for h in team.members] == [h.note for h in alive]
        assert all(h.note == made.index(h) for h in alive) and len(alive) > 100
        assert team.leader is not None and team.leader.target_name == "195"
        stress_rt.gc.verify()
    assert log.count("collected") > 20


def test_a_cycle_collection_cannot_adopt_the_object_being_adopted(rt: zs.Runtime) -> None:
    """A gc callback adopts the object whose adoption is under way
    (``Runtime._adopt``, native/binding/conjugates.c). Had the allocation of
    the adopted conjugate run the collection (tracked objects may, before
    Python 3.12), the callback would adopt the object first and the outer
    adoption would then record a second conjugate over the first. Either
    adoption may be refused ("already has a conjugate"), never both taken.
    The collection is due after a set number of allocations, moved along
    from one round to the next, so that one falls on each allocation of
    the adoption."""
    team = Team()
    team.add_to_root()
    seen: list[Hero] = []
    armed: list[tuple[int, int]] = []

    def adopt(handle: int, address: int) -> None:
        try:
            seen.append(rt._adopt(Hero, handle, address))
        except RuntimeError as error:
            assert "already has a conjugate" in str(error)

    def adopt_too(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and armed:
            adopt(*armed[0])

    out = ffi.new("zs_object **")
    threshold = gc.get_threshold()
    gc.callbacks.append(adopt_too)
    try:
        gc.set_threshold(100)
        for shift in range(12):
            handle = _native_hero_into(rt, team)
            assert lib.zs_resolve_for_conjugate(runtime_ptr(rt), handle, out) == 0
            arguments = (handle, int(ffi.cast("uintptr_t", out[0])))
            gc.collect()
            padding = [[] for _ in range(100 - shift)]
            armed.append(arguments)
            adopt(*arguments)
            armed.clear()
            del padding
            entry = rt._conjugate_get(handle)
            assert seen and all(conjugate is entry for conjugate in seen)
            seen.clear()
            team.leader = None
    finally:
        gc.callbacks.remove(adopt_too)
        gc.set_threshold(*threshold)
    collect(rt)
    assert rt.live_objects() == 1


# ---- hostile state values -----------------------------------------------------------


class Hostile:
    """A state value whose finaliser calls back into the runtime when the
    object dies and its state is released."""

    def __init__(self, action: Callable[[], Any], log: list[str]) -> None:
        self.action, self.log = action, log

    def __del__(self) -> None:
        try:
            result = self.action()
            self.log.append(f"ok {type(result).__name__}")
        except Exception as error:  # recorded: the test checks which
            self.log.append(f"{type(error).__name__}: {error}")


@pytest.fixture
def hostile_rt() -> Iterator[zs.Runtime]:
    runtime = zs.Runtime(stress=GcStress(poison_freed=True))
    with runtime.activate():
        yield runtime
    runtime.close()


@pytest.mark.parametrize("when", ["collection", "close"])
@pytest.mark.parametrize("action", ["collect", "close", "create", "read", "write", "step"])
def test_a_finaliser_run_by_the_release_of_state(
    hostile_rt: zs.Runtime, when: str, action: str
) -> None:
    rt = hostile_rt
    log: list[str] = []
    team = Team()
    team.add_to_root()
    witness = Hero()  # dies with the hostile one: its state is gone too
    team.members.append(witness)
    witness.note = "witness"
    created: list[Hero] = []
    actions: dict[str, Callable[[], Any]] = {
        "collect": rt.collect_garbage,
        "close": rt.close,
        "create": lambda: created.append(Hero(note="new")),
        "read": lambda: witness.note,
        "write": lambda: setattr(witness, "note", "again"),
        "step": lambda: rt.gc.step(max_objects=1),
    }
    victims = [Hero() for _ in range(3)]
    for victim in victims:
        victim.note = Hostile(actions[action], log)
        victim.me = victim
        team.members.append(victim)
    del victim
    if when == "collection":
        for victim in victims:
            victim.mark_as_garbage()
        witness.mark_as_garbage()
        collect(rt)
    else:
        rt.close()
    assert len(log) == 3
    assert all(v.is_expired for v in victims) and witness.is_expired
    reentry = "cannot run inside a collection or close()"
    if action in ("collect", "step", "close"):  # re-entering a collection or close()
        assert all(reentry in line for line in log), log
    elif action in ("read", "write"):
        assert all(line.startswith("ExpiredConjugateError") for line in log), log
    elif when == "collection":  # creation works in the middle of a collection
        assert log == ["ok NoneType"] * 3 and [h.note for h in created] == ["new"] * 3
        collect(rt)
        assert all(h.is_expired for h in created)  # unreachable: collected next time
    else:  # closing: creation is refused
        assert all(line.startswith("ExpiredConjugateError") for line in log), log
    with pytest.raises(zs.ExpiredConjugateError):
        witness.note
    if not rt.closed:
        rt.gc.verify()
        assert rt.live_objects() == 1 + len([h for h in created if not h.is_expired])


def test_a_factory_that_kills_its_object(rt: zs.Runtime) -> None:
    def doom() -> list[int]:
        hero.mark_as_garbage()
        collect(rt)
        return []

    class Doomed(zs.Object):
        items: list[int] = zs.state(factory=doom)

    hero = Doomed()
    with pytest.raises(zs.ExpiredConjugateError):
        hero.items


def test_a_factory_that_assigns_the_state_itself(rt: zs.Runtime) -> None:
    def sneaky() -> list[int]:
        hero.items = [1]
        return [2]

    class Sneaky(zs.Object):
        items: list[int] = zs.state(factory=sneaky)

    hero = Sneaky()
    assert hero.items == [1]  # the value stored first wins
    assert hero.items == [1]


def test_a_factory_that_raises_leaves_the_state_unset(rt: zs.Runtime) -> None:
    calls: list[int] = []

    def fail_once() -> list[int]:
        calls.append(1)
        if len(calls) == 1:
            raise KeyError("first")
        return []

    class Flaky(zs.Object):
        items: list[int] = zs.state(factory=fail_once)

    hero = Flaky()
    with pytest.raises(KeyError):
        hero.items
    assert hero.items == [] and calls == [1, 1]


def test_replacing_state_drops_the_old_value_after_the_store(rt: zs.Runtime) -> None:
    seen: list[Any] = []

    class Peek:
        def __del__(self) -> None:
            seen.append(hero.note)

    hero = Hero()
    hero.note = Peek()
    hero.note = "new"
    assert seen == ["new"]
