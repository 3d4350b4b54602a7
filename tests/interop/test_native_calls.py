"""Calls from native code into Python (overridable functions). Each test plays
the native host: it builds the parameter block from the layout's C
declaration with a cffi FFI of its own, as a C host would from the header,
and calls ``zs_call_function`` / ``zs_call_each`` through the library."""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from typing import Any

import cffi
import pytest

import zsharp_py as zs
from helpers import awaiting_expiry, collect, finish_cycle, runtime_ptr
from zsharp_py import _core
from zsharp_py._base.errors import (
    ZS_E_CALL_FAILED,
    ZS_E_DYING,
    ZS_E_INVALID,
    ZS_E_STALE,
    ZS_OK,
    ExpiredConjugateError,
)
from zsharp_py._base.ffi import ffi, lib
from zsharp_py.lowlevel import FunctionParameter, function_layout


class Spot(zs.Struct):
    x: zs.Float64


class Vec(zs.Struct):
    x: zs.Float64
    y: zs.Float64


class Pose(zs.Struct):
    """Plain: scalars, a reference and a plain struct."""

    at: Vec
    who: "Mob | None"


class Label(zs.Struct):
    """Not plain: a string member would allocate inside the host's block."""

    text: zs.String


class Mob(zs.Object):
    health: zs.Int32 = 10
    speed: zs.Float64
    target: "Mob | None"
    spot: Spot

    def tick(self, dt: float) -> None:
        self.speed += dt

    def damage(self, amount: zs.Int32, source: "Mob | None") -> zs.Int32:
        self.health -= amount
        self.target = source
        return self.health

    def aim(self, target: "Mob | None", ready: bool) -> bool:
        return ready and target is not None

    def weaken(self) -> zs.Int8:
        return self.health * 100  # out of range for Int8 past 1

    def no_vec(self) -> Vec:
        return None  # type: ignore[return-value]

    def pick(self) -> Mob | None:
        return self.target

    def explode(self) -> None:
        raise RuntimeError("boom")

    def vararg(self, *amounts: int) -> None:  # not callable from native code
        pass

    def untyped(self, amount) -> None:  # type: ignore[no-untyped-def]
        pass

    def named(self) -> Label:  # a result owning native memory does not cross
        return Label()

    def greet(self, who: zs.String, tags: zs.Array[zs.Name]) -> zs.Int32:
        seen_texts.append((str(who), [str(t) for t in tags]))
        kept_views.append(who)
        return len(tags)

    def step(self, by: Vec, big: zs.UInt64) -> Vec:
        by.x = -by.x  # an out-parameter: the host sees it
        self.speed = by.y
        kept_views.append(by)
        return Vec(by.x + 1, float(big))

    def place(self, pose: Pose) -> Vec:
        self.target = pose.who
        return (pose.at.x, pose.at.y)  # type: ignore[return-value]  # members, as a tuple


kept_views: list[Any] = []  # views Mob.step let escape its call
seen_texts: list[Any] = []  # what Mob.greet was passed


class Boss(Mob):
    def tick(self, dt: float) -> None:  # an override: dispatched by class
        self.speed += 10 * dt


class Host:
    """A native host's view of one function: the block and the calls."""

    def __init__(self, cls: type[zs.Object], name: str) -> None:
        self.layout = function_layout(cls, name)
        self.ffi = cffi.FFI()
        self.ffi.cdef("typedef uint64_t zs_ref;\n" + self.layout.c_declaration)
        self.block: Any = self.ffi.new(f"struct {cls.__name__}_{name}_params *")

    def pointer(self) -> Any:
        return ffi.cast("void *", int(self.ffi.cast("uintptr_t", self.block)))

    def call(self, obj: zs.Object, **arguments: Any) -> int:
        for key, value in arguments.items():
            setattr(self.block, key, value)
        status: int = lib.zs_call_function(
            runtime_ptr(obj.runtime), obj.handle, self.layout.name.encode(), self.pointer()
        )
        return status

    def call_each(self, rt: zs.Runtime, cls: type[zs.Object], **arguments: Any) -> tuple[int, int]:
        for key, value in arguments.items():
            setattr(self.block, key, value)
        called, native_class = ffi.new("uint32_t *"), ffi.new("zs_class **")
        assert lib.zs_find_class(runtime_ptr(rt), cls.__name__.encode(), native_class) == ZS_OK
        status = lib.zs_call_each(
            runtime_ptr(rt), native_class[0], self.layout.name.encode(), self.pointer(), called
        )
        return status, called[0]


def test_layout_and_its_c_declaration() -> None:
    layout = function_layout(Mob, "damage")
    assert [(p.name, p.c_type, p.offset) for p in layout.parameters] == [
        ("amount", "int32_t", 0),
        ("source", "zs_ref", 8),
    ]
    assert layout.result == FunctionParameter("return_value", "int32_t", 16)
    assert layout.size == 24 and layout.owner is Mob
    assert layout.c_declaration == (
        "struct Mob_damage_params { int32_t amount; zs_ref source; int32_t return_value; };"
    )
    assert function_layout(Mob, "aim").c_declaration == (
        "struct Mob_aim_params { zs_ref target; bool ready; bool return_value; };"
    )
    assert function_layout(Mob, "explode").size == 0
    assert function_layout(Boss, "tick").owner is Boss
    assert function_layout(Boss, "damage").owner is Mob  # inherited


@pytest.mark.parametrize(
    "name, error, match",
    [
        ("missing", AttributeError, "no method 'missing'"),
        ("_hidden", AttributeError, "no method '_hidden'"),
        ("add_to_root", AttributeError, "no method"),  # zs.Object's own
        ("vararg", TypeError, "must be positional"),
        ("untyped", TypeError, "needs a type annotation"),
        ("named", TypeError, "the result is Label; a result returned to native code"),
    ],
)
def test_methods_that_cannot_be_called_from_native(name: str, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        function_layout(Mob, name)


def test_value_parameters_cross_as_views_of_the_hosts_block(rt: zs.Runtime) -> None:
    """A string and an array of names in the host's block reach the method
    as red views of the block (no copy), which expire when the call returns."""
    layout = function_layout(Mob, "greet")
    assert [p.c_type for p in layout.parameters] == ["zs_string", "zs_array"]
    assert layout.result is not None and layout.result.c_type == "int32_t"
    block = ffi.new("char[]", layout.size)
    who = ffi.cast("zs_string *", block + layout.parameters[0].offset)
    string_type = ffi.cast("zs_type *", rt._native_type(layout._kinds[0].kind))
    text = "h\u00e9ros".encode("utf-16-le")
    assert lib.zs_string_assign(runtime_ptr(rt), 0, string_type, who, text, 5) == ZS_OK
    mob = Mob()
    seen_texts.clear()
    kept_views.clear()
    status = lib.zs_call_function(runtime_ptr(rt), mob.handle, b"greet", block)
    assert status == ZS_OK
    assert seen_texts == [("h\u00e9ros", [])]
    assert ffi.cast("int32_t *", block + layout.result.offset)[0] == 0
    with pytest.raises(ExpiredConjugateError):
        str(kept_views.pop())  # the call's scope expired the view
    assert lib.zs_value_clear(runtime_ptr(rt), 0, string_type, who) == ZS_OK


def test_native_call_runs_the_method(rt: zs.Runtime) -> None:
    mob = Mob()
    host = Host(Mob, "tick")
    assert host.call(mob, dt=0.25) == ZS_OK
    assert host.call(mob, dt=0.5) == ZS_OK
    assert mob.speed == 0.75


def test_virtual_dispatch_by_class(rt: zs.Runtime) -> None:
    mob, boss = Mob(), Boss()
    host = Host(Mob, "tick")  # one block serves both: same signature
    assert host.call(mob, dt=1.0) == ZS_OK and host.call(boss, dt=1.0) == ZS_OK
    assert (mob.speed, boss.speed) == (1.0, 10.0)


def test_arguments_and_result(rt: zs.Runtime) -> None:
    mob, attacker = Mob(), Mob()
    host = Host(Mob, "damage")
    assert host.call(mob, amount=3, source=attacker.handle) == ZS_OK
    assert host.block.return_value == 7 and mob.target is attacker
    assert host.call(mob, amount=1, source=0) == ZS_OK
    assert host.block.return_value == 6 and mob.target is None
    aim = Host(Mob, "aim")
    assert aim.call(mob, target=attacker.handle, ready=True) == ZS_OK
    assert aim.block.return_value is True
    pick = Host(Mob, "pick")
    mob.target = attacker
    assert pick.call(mob) == ZS_OK and pick.block.return_value == attacker.handle


def test_struct_parameters_are_views_into_the_block(rt: zs.Runtime) -> None:
    layout = function_layout(Mob, "step")
    assert layout.c_declaration == (
        "struct Vec { double x; double y; };\n"
        "struct Mob_step_params { struct Vec by; uint64_t big; struct Vec return_value; };"
    )
    mob = Mob()
    host = Host(Mob, "step")
    host.block.by.x, host.block.by.y = 2.5, 4.0
    assert host.call(mob, big=2**64 - 1) == ZS_OK  # a UInt64, not a handle
    assert (host.block.by.x, mob.speed) == (-2.5, 4.0)
    assert (host.block.return_value.x, host.block.return_value.y) == (-1.5, float(2**64 - 1))
    assert kept_views[-1].is_expired  # the call's scope ended
    with pytest.raises(zs.ExpiredConjugateError, match="scope"):
        kept_views[-1].x


def test_nested_plain_structs_and_references(rt: zs.Runtime) -> None:
    assert function_layout(Mob, "place").c_declaration == (
        "struct Vec { double x; double y; };\n"
        "struct Pose { struct Vec at; zs_ref who; };\n"
        "struct Mob_place_params { struct Pose pose; struct Vec return_value; };"
    )
    mob, other = Mob(), Mob()
    host = Host(Mob, "place")
    host.block.pose.at.x, host.block.pose.at.y, host.block.pose.who = 1.0, 2.0, other.handle
    assert host.call(mob) == ZS_OK
    assert mob.target is other
    assert (host.block.return_value.x, host.block.return_value.y) == (1.0, 2.0)


def test_failures_are_reported_not_raised(rt: zs.Runtime, unraisable: list[Any]) -> None:
    mob = Mob()
    mob.add_to_root()
    assert Host(Mob, "explode").call(mob) == ZS_E_CALL_FAILED
    assert type(unraisable[-1].exc_value) is RuntimeError
    assert unraisable[-1].object.__func__ is Mob.explode
    assert Host(Mob, "weaken").call(mob) == ZS_E_CALL_FAILED  # the result is range-checked
    assert type(unraisable[-1].exc_value) is OverflowError
    assert "Mob.weaken (result)" in str(unraisable[-1].exc_value)
    damage = Host(Mob, "damage")
    victim = Mob()
    handle = victim.handle
    collect(rt)  # victim dies: its handle goes stale
    assert damage.call(mob, amount=1, source=handle) == ZS_E_CALL_FAILED
    assert type(unraisable[-1].exc_value) is zs.ExpiredConjugateError
    assert mob.health == 10  # the method never ran
    status = lib.zs_call_function(runtime_ptr(rt), mob.handle, b"missing", ffi.NULL)
    assert status == ZS_E_INVALID and type(unraisable[-1].exc_value) is AttributeError
    status = lib.zs_call_function(runtime_ptr(rt), mob.handle, b"tick", ffi.NULL)  # no block
    assert status == ZS_E_INVALID and "without its parameter block" in str(unraisable[-1].exc_value)
    assert Host(Mob, "no_vec").call(mob) == ZS_E_CALL_FAILED  # a struct result is checked too
    assert type(unraisable[-1].exc_value) is TypeError
    assert len(unraisable) == 6


def test_wrong_object_class_in_an_argument(rt: zs.Runtime, unraisable: list[Any]) -> None:
    class Other(zs.Object):
        pass

    mob, other = Mob(), Other()
    assert Host(Mob, "damage").call(mob, amount=1, source=other.handle) == ZS_E_CALL_FAILED
    assert "expects Mob, got Other" in str(unraisable[-1].exc_value)


def test_stale_and_dying_objects_are_never_called(rt: zs.Runtime) -> None:
    host = Host(Mob, "tick")
    gone = Mob()
    handle = gone.handle
    collect(rt)
    assert lib.zs_call_function(runtime_ptr(rt), handle, b"tick", host.pointer()) == ZS_E_STALE
    pending = awaiting_expiry(rt, [Mob() for _ in range(2000)])
    assert host.call(pending[-1], dt=1.0) == ZS_E_DYING
    finish_cycle(rt)


def test_a_call_runs_in_a_scope(rt: zs.Runtime) -> None:
    views: list[Any] = []

    class Keeper(Mob):
        def tick(self, dt: float) -> None:
            views.append(self.spot)  # a red view, obtained inside the call

    keeper = Keeper()
    assert Host(Mob, "tick").call(keeper, dt=1.0) == ZS_OK
    assert views[0].is_expired
    with pytest.raises(zs.ExpiredConjugateError, match="scope"):
        views[0].x


def test_call_each_with_a_collection_inside_a_call(rt: zs.Runtime) -> None:
    """The first call drops every other mob and collects: the dropped ones
    are freed and never called; mobs created by a call are not called."""
    called: list[str] = []
    born: list[Mob] = []
    mobs: list[Mob] = []

    class Sweeper(Mob):
        def tick(self, dt: float) -> None:
            called.append(self.name)
            if len(called) == 1:
                for other in mobs[1::2]:
                    other.remove_from_root()
                born.append(Mob(name="newborn"))
                born[0].add_to_root()
                collect(zs.current_runtime())

    sweeper = Sweeper(name="broom")  # first in slot order: called first
    sweeper.add_to_root()
    mobs.extend(Mob(name=f"m{i}") for i in range(6))
    for mob in mobs:
        mob.add_to_root()
    status, count = Host(Mob, "tick").call_each(rt, Mob, dt=1.0)
    assert status == ZS_OK
    assert called == ["broom"] and count == 1 + 3
    assert [m.speed for m in mobs[0::2]] == [1.0, 1.0, 1.0]
    assert all(m.is_expired for m in mobs[1::2]) and born[0].speed == 0.0
    rt.gc.verify()


def test_closing_the_runtime_inside_a_call(rt: zs.Runtime) -> None:
    """A call that closes its runtime: the native loop skips the rest, and
    the native runtime is freed when the last call returns."""
    calls: list[int] = []

    class Closer(Mob):
        def tick(self, dt: float) -> None:
            calls.append(1)
            zs.current_runtime().close()

    closer = Closer()  # first in slot order: called first
    closer.add_to_root()
    mobs = [Mob() for _ in range(5)]
    for mob in mobs:
        mob.add_to_root()
    status, count = Host(Mob, "tick").call_each(rt, Mob, dt=1.0)
    assert (status, count, len(calls)) == (ZS_OK, 1, 1)
    assert rt.closed
    assert all(m.is_expired for m in mobs) and closer.is_expired


def test_native_call_from_a_thread_sees_the_objects_runtime(rt: zs.Runtime) -> None:
    seen: list[Any] = []

    class Spawner(Mob):
        def tick(self, dt: float) -> None:
            seen.append((zs.current_runtime(), Mob().runtime))

    spawner = Spawner()
    host = Host(Mob, "tick")
    thread = threading.Thread(target=host.call, args=(spawner,), kwargs={"dt": 1.0})
    thread.start()
    thread.join()
    assert seen == [(rt, rt)]


def test_native_address() -> None:
    rt = zs.Runtime()
    assert rt.native_address == rt._ptr != 0
    rt.close()
    with pytest.raises(zs.ExpiredConjugateError):
        rt.native_address


def test_the_first_call_and_later_ones_behave_the_same(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    """The first call of a function on a class asks Python for its plan;
    later ones find it in the class's cache: the scope, the current runtime,
    failure reports and dead objects must come out the same either way."""
    views: list[Any] = []
    runtimes: list[Any] = []

    class Fast(Mob):
        def tick(self, dt: float) -> None:
            views.append(self.spot)
            runtimes.append(zs.current_runtime())
            if dt < 0:
                raise ValueError("negative dt")
            self.speed += dt

    mob = Fast()
    host = Host(Mob, "tick")
    for _ in range(3):  # the plan laid out, then found in the cache
        assert host.call(mob, dt=1.0) == ZS_OK
        assert views[-1].is_expired and runtimes[-1] is rt
        assert host.call(mob, dt=-1.0) == ZS_E_CALL_FAILED
        assert type(unraisable[-1].exc_value) is ValueError
        assert unraisable[-1].object.__func__ is Fast.tick
    assert mob.speed == 3.0 and len(unraisable) == 1  # the same error, reported once
    assert "_zs_functions" in Fast.__dict__ and Fast.__dict__["_zs_functions"]["tick"]._plan
    # From a thread Python did not start the call (the default runtime is
    # current there), still with the object's runtime current.
    thread = threading.Thread(target=host.call, args=(mob,), kwargs={"dt": 0.5})
    thread.start()
    thread.join()
    assert runtimes[-1] is rt and mob.speed == 3.5
    # An object whose conjugate nobody holds is adopted, then called.
    handle = Fast().handle
    assert lib.zs_call_function(runtime_ptr(rt), handle, b"tick", host.pointer()) == ZS_OK
    views.clear()  # the views held their parent (an expired view is a cycle: gc.collect)
    gc.collect()
    assert rt._conjugate_get(handle) is None  # the adopted conjugate was not kept
    collect(rt)
    assert lib.zs_call_function(runtime_ptr(rt), handle, b"tick", host.pointer()) == ZS_E_STALE


# ---------------------------------------------------------------------------
# The one handler (native/binding/calls.c): every call from a plan, in C
# ---------------------------------------------------------------------------


class Pair(zs.Struct):
    """A struct result with an object member: staged whole before it is stored."""

    at: Vec
    who: "Agent | None"


class Tag(zs.Struct):
    """The reference first: staged before the number after it converts."""

    who: "Agent | None"
    weight: zs.Float64


class Agent(zs.Object):
    health: zs.Int32 = 10
    friend: "Agent | None"

    def meet(self, other: "Agent | None", at: Vec) -> Agent | None:
        seen.append((other, at.x, at.y))
        at.y = at.x * 2  # written through the view into the host's block
        previous = self.friend
        self.friend = other
        return previous

    def mirror(self, at: Vec, who: "Agent | None") -> Pair:
        return Pair(at=(at.y, at.x), who=who)  # type: ignore[call-arg]

    def ten(
        self,
        a: bool,
        b: zs.Int8,
        c: zs.UInt8,
        d: zs.Int16,
        e: zs.UInt16,
        f: zs.Int32,
        g: zs.UInt32,
        h: zs.Int64,
        i: zs.UInt64,
        j: zs.Float32,
        k: zs.Float64,
    ) -> zs.Float64:
        seen.append((a, b, c, d, e, f, g, h, i, j, k))
        return float(b + c + d + e + f + g + h) + j + k + (i % 1000) + a

    def keep(self, at: Vec) -> zs.Int32:
        seen.append(lambda: at.x)  # the view, closed over past the call
        return 1

    def answer(self) -> zs.Int32:
        return RESULT[0]  # type: ignore[no-any-return]

    def partner(self) -> Agent | None:
        return RESULT[0]  # type: ignore[no-any-return]

    def pair(self) -> Pair:
        return RESULT[0]  # type: ignore[no-any-return]

    def ratio(self) -> zs.Float32:
        return RESULT[0]  # type: ignore[no-any-return]

    def tag(self) -> Tag:
        return RESULT[0]  # type: ignore[no-any-return]


seen: list[Any] = []  # what Agent's methods saw
RESULT: list[Any] = [None]  # what Agent's result methods return


@pytest.fixture(autouse=True)
def forget() -> Iterator[None]:
    """Forget what the previous test's calls saw and returned."""
    yield
    seen.clear()
    RESULT[0] = None


def test_object_and_struct_parameters_and_results(rt: zs.Runtime) -> None:
    agent, other = Agent(), Agent()
    meet = Host(Agent, "meet")
    meet.block.at.x, meet.block.at.y = 1.5, 0.0
    for _ in range(2):  # the plan laid out by Python, then found in the class's cache
        assert meet.call(agent, other=other.handle) == ZS_OK
    assert seen[0][0] is other and seen[0][1:] == (1.5, 0.0)
    assert (meet.block.at.x, meet.block.at.y) == (1.5, 3.0)  # the out-parameter
    assert agent.friend is other and meet.block.return_value == other.handle
    assert meet.call(agent, other=0) == ZS_OK  # 0 is None, both ways
    assert seen[-1][0] is None and meet.block.return_value == other.handle
    assert meet.call(agent, other=0) == ZS_OK and meet.block.return_value == 0
    mirror = Host(Agent, "mirror")
    mirror.block.at.x, mirror.block.at.y = 1.0, 2.0
    assert mirror.call(agent, who=other.handle) == ZS_OK
    result = mirror.block.return_value
    assert (result.at.x, result.at.y, result.who) == (2.0, 1.0, other.handle)


def test_more_than_eight_scalar_arguments(rt: zs.Runtime) -> None:
    agent = Agent()
    host = Host(Agent, "ten")
    values = {
        "a": True,
        "b": -8,
        "c": 200,
        "d": -3000,
        "e": 60000,
        "f": -(2**31),
        "g": 2**32 - 1,
        "h": 2**40,
        "i": 2**64 - 1,
        "j": 0.5,
        "k": 0.25,
    }
    for _ in range(2):
        assert host.call(agent, **values) == ZS_OK
    assert seen[-1] == tuple(values.values())
    expected = float(-8 + 200 - 3000 + 60000 - 2**31 + 2**32 - 1 + 2**40) + 0.75 + 615 + 1
    assert host.block.return_value == expected


def test_a_struct_view_kept_past_the_call_is_expired(rt: zs.Runtime) -> None:
    agent = Agent()
    host = Host(Agent, "keep")
    host.block.at.x = 4.0
    assert host.call(agent) == ZS_OK and host.block.return_value == 1
    with pytest.raises(zs.ExpiredConjugateError, match="scope"):
        seen[-1]()  # the closure's view: never a read of the host's block after the call


def test_an_object_argument_without_a_conjugate_is_adopted(rt: zs.Runtime) -> None:
    agent, other = Agent(), Agent(health=7)
    other.add_to_root()
    handle = other.handle
    del other
    gc.collect()
    assert rt._conjugate_get(handle) is None  # nobody holds a conjugate of it
    meet = Host(Agent, "meet")
    assert meet.call(agent, other=handle) == ZS_OK
    assert seen[-1][0].handle == handle and seen[-1][0].health == 7
    assert agent.friend is seen[-1][0]


def test_a_method_that_collects_or_destroys_its_own_object(rt: zs.Runtime) -> None:
    """The handler trusts nothing it read before the method ran: the object
    and its argument may be gone when the result is written (the block is
    the host's, so it is still there)."""

    class Doomed(Agent):
        def meet(self, other: "Agent | None", at: Vec) -> Agent | None:
            seen.append(at)
            self.remove_from_root()
            assert other is not None
            other.remove_from_root()
            collect(zs.current_runtime())  # both die here, during the call
            return None

        def answer(self) -> zs.Int32:
            self.mark_as_garbage()
            collect(zs.current_runtime())
            return 42

    doomed, other = Doomed(), Agent()
    doomed.add_to_root()
    other.add_to_root()
    meet = Host(Agent, "meet")
    meet.block.return_value = 12345
    assert meet.call(doomed, other=other.handle) == ZS_OK
    assert doomed.is_expired and other.is_expired and meet.block.return_value == 0
    assert seen[-1].is_expired  # the struct view, expired by the call's scope
    answer = Host(Agent, "answer")
    victim = Doomed()  # referenced by nothing native: marked as garbage, it dies
    assert answer.call(victim) == ZS_OK and answer.block.return_value == 42
    assert victim.is_expired
    rt.gc.verify()


@pytest.mark.parametrize(
    "name, value, error",
    [
        ("answer", 2**31, OverflowError),
        ("answer", "7", TypeError),
        ("answer", 1.5, TypeError),
        ("ratio", 1e300, OverflowError),
        ("partner", 5, TypeError),
        ("pair", ((1.0, "x"), None), TypeError),  # the second member fails: nothing stored
        ("pair", {"at": (1.0, 2.0), "who": 3}, TypeError),
    ],
)
def test_a_wrong_result_is_reported_and_leaves_the_block_as_it_was(
    rt: zs.Runtime, unraisable: list[Any], name: str, value: Any, error: type
) -> None:
    agent = Agent()
    host = Host(Agent, name)
    if name == "pair":
        host.block.return_value.at.x = host.block.return_value.at.y = 9.0
        host.block.return_value.who = 99
    else:
        host.block.return_value = 99
    before = bytes(host.ffi.buffer(host.block))
    RESULT[0] = value
    assert host.call(agent) == ZS_E_CALL_FAILED
    assert type(unraisable[-1].exc_value) is error
    assert f"Agent.{name} (result)" in str(unraisable[-1].exc_value)
    assert unraisable[-1].object.__func__ is getattr(Agent, name)
    assert bytes(host.ffi.buffer(host.block)) == before  # not half-written


def test_an_object_result_of_another_runtime_or_expired(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    agent = Agent()
    host = Host(Agent, "partner")
    with zs.Runtime():  # closed when the block ends
        RESULT[0] = Agent()
        assert host.call(agent) == ZS_E_CALL_FAILED
        assert "belongs to another runtime" in str(unraisable[-1].exc_value)
    assert RESULT[0].is_expired  # closed with its runtime
    assert host.call(agent) == ZS_E_CALL_FAILED
    assert type(unraisable[-1].exc_value) is zs.ExpiredConjugateError
    assert "cannot store into Agent.partner (result)" in str(unraisable[-1].exc_value)
    assert host.block.return_value == 0


class Freeing:
    """A number whose conversion runs Python code that frees objects (the
    caller's own object and its partner) or closes the runtime."""

    def __init__(self, value: Any, action: str, victims: list[zs.Object]) -> None:
        self.value, self.action, self.victims = value, action, victims
        self.conversions = 0

    def _run(self) -> None:
        self.conversions += 1
        rt = zs.current_runtime()
        if self.action == "close":
            rt.close()
            return
        for victim in self.victims:
            victim.remove_from_root()
        collect(rt)

    def __index__(self) -> int:
        self._run()
        return int(self.value)

    def __float__(self) -> float:
        self._run()
        return float(self.value)


@pytest.mark.parametrize("name, value", [("answer", 7), ("ratio", 2.5)])
def test_a_hostile_scalar_result_frees_objects_during_its_conversion(
    rt: zs.Runtime, unraisable: list[Any], name: str, value: Any
) -> None:
    agent, other = Agent(), Agent()
    agent.add_to_root()
    other.add_to_root()
    agent.friend = other
    host = Host(Agent, name)
    RESULT[0] = hostile = Freeing(value, "collect", [agent, other])
    assert host.call(agent) == ZS_OK
    assert hostile.conversions == 1  # converted once, then stored as is
    assert host.block.return_value == value
    assert agent.is_expired and other.is_expired and unraisable == []
    rt.gc.verify()


@pytest.mark.parametrize("name, value", [("answer", 7), ("ratio", 2.5)])
def test_a_hostile_scalar_result_closes_the_runtime(
    unraisable: list[Any], name: str, value: Any
) -> None:
    """The block is the host's: the result is still stored; the native
    runtime is freed when the call returns."""
    rt = zs.Runtime()
    try:
        with rt:
            agent = Agent()
            host = Host(Agent, name)
            RESULT[0] = hostile = Freeing(value, "close", [])
            assert host.call(agent) == ZS_OK
        assert rt.closed and agent.is_expired and hostile.conversions == 1
        assert host.block.return_value == value and unraisable == []
    finally:
        rt.close()


def test_a_hostile_struct_result_frees_its_own_reference(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    """A member's conversion destroys the object another member refers to:
    staged before (``Tag``), the reference is refused when the struct is
    stored, before anything is; staged after (``Pair``), it is refused
    when it is staged."""
    agent = Agent()
    agent.add_to_root()
    for name in ("tag", "pair"):
        other = Agent()
        other.add_to_root()
        host = Host(Agent, name)
        before = bytes(host.ffi.buffer(host.block))
        freeing = Freeing(1.0, "collect", [other])
        RESULT[0] = (
            {"who": other, "weight": freeing}
            if name == "tag"
            else {
                "who": other,
                "at": (freeing, 2.0),
            }
        )
        assert host.call(agent) == ZS_E_CALL_FAILED
        assert other.is_expired and freeing.conversions == 1
        assert f"Agent.{name} (result)" in str(unraisable[-1].exc_value)
        assert bytes(host.ffi.buffer(host.block)) == before
    rt.gc.verify()


def test_a_hostile_struct_result_closes_the_runtime(unraisable: list[Any]) -> None:
    rt = zs.Runtime()
    try:
        with rt:
            agent = Agent()
            host = Host(Agent, "pair")
            before = bytes(host.ffi.buffer(host.block))
            RESULT[0] = {"at": (Freeing(1.0, "close", []), 2.0), "who": None}
            assert host.call(agent) == ZS_E_CALL_FAILED
            assert type(unraisable[-1].exc_value) is zs.ExpiredConjugateError
            assert "the runtime has been closed" in str(unraisable[-1].exc_value)
            assert bytes(host.ffi.buffer(host.block)) == before
            assert rt.closed
    finally:
        rt.close()


def test_a_plan_never_reaches_outside_its_block() -> None:
    with pytest.raises(ValueError, match="outside the 8-byte block"):
        _core.CallPlan("f", "F.f", 8, ((4, _core.CALL_SCALAR, _core.SCALAR_F64, "x"),), None)
    with pytest.raises(ValueError, match="outside"):
        _core.CallPlan("f", "F.f", 16, ((4, _core.CALL_OBJECT, Agent, "x"),), None)  # misaligned
    with pytest.raises(TypeError, match="object conjugate class"):
        _core.CallPlan("f", "F.f", 8, ((0, _core.CALL_OBJECT, int, "x"),), None)
    with pytest.raises(TypeError, match="struct kind"):
        _core.CallPlan("f", "F.f", 8, ((0, _core.CALL_STRUCT, 3, "x"),), None)
    plan = function_layout(Agent, "meet")._plan
    assert (plan.name, plan.size) == ("meet", function_layout(Agent, "meet").size)


class Named(zs.Object):
    """Two methods with the same block, to tell which one a name reaches."""

    def first(self, x: float) -> None:
        called_names.append(("first", x))

    def second(self, x: float) -> None:
        called_names.append(("second", x))


called_names: list[Any] = []


def test_function_names_are_matched_by_their_text(rt: zs.Runtime, unraisable: list[Any]) -> None:
    """The handler remembers the names it was called with by their text: one
    buffer holding one name, then another, reaches each method; names it
    cannot remember all (more than it keeps) and bad ones behave the same."""
    called_names.clear()
    obj = Named()
    block = ffi.new("double *", 1.5)
    name = ffi.new("char[32]")
    for text in (b"first", b"second", b"first", b"second"):
        ffi.memmove(name, text + b"\0", len(text) + 1)  # the same address, another name
        assert lib.zs_call_function(runtime_ptr(rt), obj.handle, name, block) == ZS_OK
    assert [n for n, _ in called_names] == ["first", "second", "first", "second"]
    for i in range(80):  # more names than are remembered: each still looked up
        assert (
            lib.zs_call_function(runtime_ptr(rt), obj.handle, f"nope{i}".encode(), block)
            == ZS_E_INVALID
        )
    assert len(unraisable) == 80
    assert lib.zs_call_function(runtime_ptr(rt), obj.handle, b"\xff\xfe", block) == ZS_E_INVALID
    assert lib.zs_call_function(runtime_ptr(rt), obj.handle, b"", block) == ZS_E_INVALID
    assert lib.zs_call_function(runtime_ptr(rt), obj.handle, b"second", block) == ZS_OK
    assert called_names[-1] == ("second", 1.5) and len(called_names) == 5


def test_the_current_runtime_after_a_call_is_the_one_before_it(rt: zs.Runtime) -> None:
    """The object's runtime is current during the call, whether it was
    current before (the handler then sets nothing) or not; a method that
    leaves another runtime current does not change the caller's."""
    other = zs.Runtime()
    seen: list[Any] = []

    class Leaver(Mob):
        def tick(self, dt: float) -> None:
            seen.append(zs.current_runtime())
            other._make_current()  # entered, never left

    leaver = Leaver()
    host = Host(Mob, "tick")
    try:
        assert host.call(leaver, dt=1.0) == ZS_OK  # rt current already
        assert seen == [rt] and zs.current_runtime() is rt
        with zs.Runtime() as third:
            assert host.call(leaver, dt=1.0) == ZS_OK  # another runtime current
            assert seen == [rt, rt] and zs.current_runtime() is third
        assert zs.current_runtime() is rt
    finally:
        other.close()


def test_a_method_replaced_after_native_calls_is_the_one_called(rt: zs.Runtime) -> None:
    """The handler remembers each class's plan and method (native/binding/
    zpy_host_to_python.c, the plan cache): replacing the method on the class, or on a
    base it inherits it from, reaches native calls at once, as does a
    class whose attribute lookup is its own."""
    log: list[Any] = []

    class Base(Mob):
        def tick(self, dt: float) -> None:
            log.append(("base", dt))

    class Child(Base):
        pass

    host = Host(Mob, "tick")
    child = Child()
    assert host.call(child, dt=1.0) == ZS_OK
    assert host.call(child, dt=2.0) == ZS_OK  # from the cache

    def replaced(self: Any, dt: float) -> None:
        log.append(("replaced", dt))

    Base.tick = replaced  # type: ignore[method-assign]  # a base changed: its subclasses too
    assert host.call(child, dt=3.0) == ZS_OK

    def own(self: Any, dt: float) -> None:
        log.append(("own", dt))

    Child.tick = own  # type: ignore[method-assign]
    assert host.call(child, dt=4.0) == ZS_OK
    del Child.tick
    assert host.call(child, dt=5.0) == ZS_OK
    assert log == [("base", 1.0), ("base", 2.0), ("replaced", 3.0), ("own", 4.0), ("replaced", 5.0)]

    class Looking(Mob):
        def __getattribute__(self, name: str) -> Any:
            if name == "tick":
                return lambda dt: log.append(("looked up", dt))
            return super().__getattribute__(name)

    looking = Looking()
    assert host.call(looking, dt=6.0) == ZS_OK
    assert host.call(looking, dt=7.0) == ZS_OK
    assert log[-2:] == [("looked up", 6.0), ("looked up", 7.0)]


def _gil_holding_call() -> Any:
    """zs_call_function through ctypes.PyDLL: the GIL stays held through the
    call, as a host calling from a loop that keeps it does (the cffi calls
    of ``Host`` release it). The binding then makes a cold object's proxy
    from the object the heap checked under the call's own lock."""
    import ctypes

    from zsharp_py.lowlevel import lib_dir

    library = ctypes.PyDLL(os.path.join(lib_dir(), "libzsharp.so"))
    function = library.zs_call_function
    function.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_void_p]
    function.restype = ctypes.c_int
    return function


@pytest.mark.parametrize("gil", ["held", "released"])
def test_a_cold_object_is_called_the_same_with_or_without_the_gil(rt: zs.Runtime, gil: str) -> None:
    """An object no proxy holds, called from native code: its override runs
    on a new proxy of its class; dropped after the call, the proxy leaves
    the object to the collector as before; a method that destroys its own
    object leaves an expired proxy, never freed memory."""
    held_call = _gil_holding_call()
    tick = Host(Mob, "tick")

    def call(handle: int) -> int:
        tick.block.dt = 0.5
        if gil == "released":
            return int(lib.zs_call_function(runtime_ptr(rt), handle, b"tick", tick.pointer()))
        address = int(tick.ffi.cast("uintptr_t", tick.block))
        return int(held_call(rt.native_address, handle, b"tick", address))

    boss = Boss()
    boss.add_to_root()
    handle = boss.handle
    del boss
    gc.collect()
    rt._flush_values()  # the heap hears the proxy went: no conjugate flag left
    assert rt._conjugate_get(handle) is None
    assert call(handle) == ZS_OK
    made = rt.object_from_handle(handle)
    assert isinstance(made, Boss) and made.speed == 5.0  # Boss.tick: 10 * dt
    made.remove_from_root()
    del made
    gc.collect()
    collect(rt)
    assert rt.live_objects() == 0 and rt.object_from_handle(handle) is None

    class Suicidal(Mob):
        def tick(self, dt: float) -> None:
            self.remove_from_root()
            collect(zs.current_runtime())  # unreachable: freed inside the call
            kept.append(self)

    kept: list[Any] = []
    victim = Suicidal()
    victim.add_to_root()
    handle = victim.handle
    del victim
    gc.collect()
    rt._flush_values()
    assert rt._conjugate_get(handle) is None
    assert call(handle) == ZS_OK
    assert kept[0].is_expired
    with pytest.raises(ExpiredConjugateError):
        kept[0].speed
    assert call(handle) == ZS_E_STALE
    rt.gc.verify()
