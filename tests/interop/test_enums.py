"""Enums as ``enum.IntEnum`` and ``enum.IntFlag`` members, read and written
(zsharp_py/_model/kinds.py ``EnumKind``): a host's enum (the sample
engine's ``Team``) and Python's, as object properties, struct members,
container elements, defaults, and parameters and results of calls from
native code. A refused write leaves the stored value as it was."""

from __future__ import annotations

import enum
from typing import Any

import cffi
import pytest

import zsharp_py as zs
from helpers import runtime_ptr
from zsharp_py import _core, sample_engine
from zsharp_py._base.errors import ZS_OK
from zsharp_py._base.ffi import ffi, lib
from zsharp_py.lowlevel import function_layout


class Mood(enum.IntEnum):
    Calm = 0
    Angry = 1
    Sad = 7


class Access(enum.IntFlag):
    Read = 1
    Write = 2
    Run = 4


class Other(enum.IntEnum):
    Sad = 7


class Badge(zs.Struct):
    mood: Mood = Mood.Angry
    level: zs.Int32 = 0


class Person(zs.Object):
    mood: Mood = Mood.Sad
    access: Access = zs.zero()
    moods: zs.Array[Mood] = zs.zero()
    badge: Badge = zs.zero()
    by_mood: zs.Map[Mood, zs.Int32] = zs.zero()

    def feel(self, mood: Mood) -> Mood:
        """Called from native code: the parameter arrives as a member, and
        the result crosses back as its number."""
        felt.append(mood)
        return Mood.Angry if mood is Mood.Calm else Mood.Calm


felt: list[Any] = []


def test_a_host_enum_property_reads_as_a_member(rt: zs.Runtime) -> None:
    sample_engine.install(rt)
    World, Actor = zs.native_class("World"), zs.native_class("Actor")
    Team = zs.native_enum("Team")
    world = World()
    world.add_to_root()
    actor = world.spawn(Actor, zs.native_struct("Transform")())
    assert actor.team is Team.Neutral and type(actor.team) is Team
    actor.team = Team.Blue
    assert actor.team is Team.Blue
    actor.team = 1  # the int value of a member
    assert actor.team is Team.Red
    assert Actor(team=Team.Blue).team is Team.Blue


def test_a_wrong_enum_or_value_is_refused_and_nothing_changes(rt: zs.Runtime) -> None:
    sample_engine.install(rt)
    Team = zs.native_enum("Team")
    actor = zs.native_class("Actor")(team=Team.Red)
    with pytest.raises(TypeError, match=r"Actor.team: expected Team, not Mood.Sad"):
        actor.team = Mood.Sad
    with pytest.raises(ValueError, match="9 is not a value of Team"):
        actor.team = 9
    with pytest.raises(ValueError, match="-1 is not a value of Team"):
        actor.team = -1
    with pytest.raises(TypeError, match=r"expected Team \(a member, or the int value of one\)"):
        actor.team = "Red"
    with pytest.raises(TypeError, match="not bool"):
        actor.team = True
    with pytest.raises(TypeError, match="Actor.team: expected Team, not Mood.Angry"):
        zs.native_class("Actor")(team=Mood.Angry)
    assert actor.team is Team.Red


def test_python_enums_type_properties_members_and_elements(rt: zs.Runtime) -> None:
    person = Person()
    # The default is in the creation image, as a scalar's.
    assert person.mood is Mood.Sad and person.badge.mood is Mood.Angry
    assert person.access is Access(0)
    person.access = Access.Read | Access.Run
    assert person.access == Access.Read | Access.Run and type(person.access) is Access
    person.access = 3  # any combination of the flags
    assert person.access == Access.Read | Access.Write
    with pytest.raises(ValueError, match="8 is not a value of Access"):
        person.access = 8
    person.moods.extend([Mood.Calm, 7])
    assert list(person.moods) == [Mood.Calm, Mood.Sad]
    assert all(type(mood) is Mood for mood in person.moods)
    with pytest.raises(TypeError, match="expected Mood, not Other.Sad"):
        person.moods.append(Other.Sad)
    assert len(person.moods) == 2
    person.badge.mood = Mood.Calm
    assert person.badge.mood is Mood.Calm and Badge(Mood.Sad).mood is Mood.Sad
    person.by_mood[Mood.Angry] = 3
    assert [(type(k), k, v) for k, v in person.by_mood.items()] == [(Mood, Mood.Angry, 3)]


def test_a_stored_number_that_is_no_member_reads_as_the_int(rt: zs.Runtime) -> None:
    """The host may store any number its type holds: reading never raises."""
    person = Person()
    stored = ffi.cast("int32_t *", person._address + _core.OBJECT_HEADER_SIZE)
    stored[0] = 5
    assert person.mood == 5 and type(person.mood) is int


def test_enum_declarations_that_cannot_be_stored_are_refused() -> None:
    class Huge(enum.IntEnum):
        Big = 2**40

    with pytest.raises(TypeError, match=r"Huge.Big = 1099511627776 does not fit .* Int32"):

        class Holder(zs.Object):
            huge: Huge

    with pytest.raises(TypeError, match=r"Broken.mood \(default\) expects Mood, not Other.Sad"):

        class Broken(zs.Object):
            mood: Mood = Other.Sad  # type: ignore[assignment]

        with zs.Runtime():
            Broken()


def test_calls_from_native_code_pass_and_return_members(rt: zs.Runtime) -> None:
    felt.clear()
    layout = function_layout(Person, "feel")
    assert [(p.name, p.c_type) for p in layout.parameters] == [("mood", "int32_t")]
    host = cffi.FFI()
    host.cdef("typedef uint64_t zs_ref;\n" + layout.c_declaration)
    block: Any = host.new("struct Person_feel_params *")
    block.mood = 0
    person = Person()
    pointer = ffi.cast("void *", int(host.cast("uintptr_t", block)))
    assert lib.zs_call_function(runtime_ptr(rt), person.handle, b"feel", pointer) == ZS_OK
    assert felt == [Mood.Calm] and type(felt[0]) is Mood
    assert block.return_value == Mood.Angry


def test_members_passed_from_native_code_are_left_untouched(rt: zs.Runtime) -> None:
    """An enum argument is copied out as its member, never a view of the
    host's block: the call's end expires views only. Treating the member as
    one wrote an expiry reason past the member's memory, a crash some calls
    later (zpy_host_to_python.c, loads_a_view; the sanitizer smoke,
    tools/sanitize.sh, runs this file)."""
    layout = function_layout(Person, "feel")
    host = cffi.FFI()
    host.cdef("typedef uint64_t zs_ref;\n" + layout.c_declaration)
    block: Any = host.new("struct Person_feel_params *")
    pointer = ffi.cast("void *", int(host.cast("uintptr_t", block)))
    person = Person()
    before = {m: (m.name, int(m), hash(m)) for m in Mood}
    for round_ in range(200):
        felt.clear()
        member = list(Mood)[round_ % len(Mood)]
        block.mood = int(member)
        assert lib.zs_call_function(runtime_ptr(rt), person.handle, b"feel", pointer) == ZS_OK
        assert felt == [member] and felt[0] is member
        assert {m: (m.name, int(m), hash(m)) for m in Mood} == before
        assert Mood(int(member)) is member
    rt.gc.collect()
    rt.gc.verify()
