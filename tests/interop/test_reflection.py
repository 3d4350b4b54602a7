"""Native reflection: a host module written in C (tests/hosts/reflect_host.c),
compiled here as a user's host is and registered in a runtime through the
API table; Python discovers its classes, structs and enums and binds them
with the same binder as classes declared in Python."""

from __future__ import annotations

import enum
import gc
import inspect
import pydoc
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from cffi import FFI

import zsharp_py as zs
from helpers import declared_functions, runtime_ptr
from native_build import compile_host
from zsharp_py._base.ffi import ffi as zs_ffi
from zsharp_py._base.ffi import lib as zs_lib
from zsharp_py._interop.reflection import PropertyDescription, StructDescription
from zsharp_py._model.struct import StructMeta
from zsharp_py.lowlevel import api_table, include_dir

HOST_SOURCE = Path(__file__).resolve().parents[1] / "hosts" / "reflect_host.c"


@pytest.fixture(scope="module")
def host() -> Any:
    _, lib, _ = compile_host(
        HOST_SOURCE.read_text(), "reflect_host", "int reflect_host_install(void *api, void *rt);"
    )
    return lib


@pytest.fixture
def rt(host: Any) -> Any:
    with zs.Runtime() as runtime:
        status = host.reflect_host_install(
            FFI().cast("void *", api_table()), FFI().cast("void *", runtime.native_address)
        )
        assert status == 0
        yield runtime


def test_every_registered_class_is_found_by_name_and_in_the_list(rt: Any) -> None:
    thing = zs.native_class("Thing")
    big = zs.native_class("BigThing")
    assert issubclass(big, thing) and issubclass(thing, zs.Object)
    assert zs.native_class("Thing") is thing  # bound once per runtime
    found = zs.native_classes()
    assert found["Thing"] is thing and found["BigThing"] is big
    with pytest.raises(KeyError, match="no class named 'Nope'"):
        zs.native_class("Nope")
    with pytest.raises(TypeError, match="class name"):
        zs.native_class(3)  # type: ignore[arg-type]


def test_properties_of_every_kind_read_and_write_natively(rt: Any) -> None:
    Thing = zs.native_class("Thing")
    Vec2 = zs.native_struct("Vec2")
    Mood = zs.native_enum("Mood")
    a, b = Thing(), Thing()
    a.add_to_root()
    a.hp, a.speed, a.mood = 7, 1.5, Mood.Sad
    a.pos = Vec2(1.0, 2.0)
    a.friend, a.weak = b, b
    a.label = "hero"
    a.kids.append(b)
    a.scores["goal"] = 3
    assert (a.hp, a.speed, a.mood, a.mood == Mood.Sad) == (7, 1.5, 7, True)
    assert (a.pos.x, a.pos.y) == (1.0, 2.0)
    assert a.friend is b and a.weak.get() is b and a.kids[0] is b
    assert str(a.label) == "hero" and a.scores["goal"] == 3
    # The bytes are where the host's C struct has them.
    raw = zs_ffi.cast("int32_t *", a._address + zs_ffi.sizeof("zs_object"))
    assert raw[0] == 7
    with pytest.raises(OverflowError):
        a.hp = 2**31
    # An enum reads as its member; a number that is no member's value is refused.
    assert a.mood is Mood.Sad
    with pytest.raises(ValueError, match="256 is not a value of Mood"):
        a.mood = 256
    assert a.mood is Mood.Sad
    with pytest.raises(TypeError, match="Thing"):
        a.friend = zs.native_class("Thing").__mro__[-2]  # not an object


def test_host_references_are_traced_from_registration(rt: Any) -> None:
    Thing = zs.native_class("Thing")
    a = Thing()
    a.add_to_root()
    a.friend = Thing()
    a.kids.append(Thing())
    stray = Thing()
    rt.collect_garbage()
    assert not a.friend.is_expired and not a.kids[0].is_expired
    assert stray.is_expired
    rt.gc.verify()


def test_a_live_host_object_never_reads_as_none(rt: Any) -> None:
    """An object created natively, before Python bound its class, stored in
    a Python-declared reference, reads as its bound class."""

    class Holder(zs.Object):
        held: "zs.Object | None"

    cls_out = zs_ffi.new("zs_class **")
    assert zs_lib.zs_find_class(runtime_ptr(rt), b"BigThing", cls_out) == 0
    ref_out = zs_ffi.new("zs_ref *")
    obj_out = zs_ffi.new("zs_object **")
    status = zs_lib.zs_object_new(
        runtime_ptr(rt), cls_out[0], 0, zs_lib.ZS_NAME_AUTO, 0, ref_out, obj_out
    )
    assert status == 0
    holder = Holder()
    assert (
        zs_lib.zs_store_ref(
            runtime_ptr(rt), holder.handle, Holder._zs_layout.properties[0].offset, ref_out[0]
        )
        == 0
    )
    held = holder.held
    assert held is not None and type(held).__name__ == "BigThing"
    assert isinstance(held, zs.native_class("Thing"))


def test_python_subclass_of_a_host_class_is_made_natively_by_name(rt: Any) -> None:
    Thing = zs.native_class("Thing")

    class ReflectHero(Thing):  # type: ignore[misc,valid-type]
        level: zs.Int32 = 5

    # Native code asks for the class by name before Python used it here:
    # zs_find_class's resolver registers the Python class.
    cls_out = zs_ffi.new("zs_class **")
    assert zs_lib.zs_find_class(runtime_ptr(rt), b"ReflectHero", cls_out) == 0
    ref_out = zs_ffi.new("zs_ref *")
    obj_out = zs_ffi.new("zs_object **")
    assert (
        zs_lib.zs_object_new(
            runtime_ptr(rt), cls_out[0], 0, zs_lib.ZS_NAME_AUTO, 0, ref_out, obj_out
        )
        == 0
    )
    hero = rt._conjugate_of(ref_out[0])
    assert type(hero) is ReflectHero
    hero.level, hero.hp = 9, 4  # its own property after the host's part, and the host's
    assert (hero.level, hero.hp) == (9, 4)
    assert ReflectHero._zs_layout.properties[-1].offset >= Thing._zs_layout.size
    made = ReflectHero()
    assert made.level == 5 and isinstance(made, Thing)


def test_python_classes_register_the_same_description(rt: Any) -> None:
    class Mob(zs.Object):
        hp: zs.Int32
        kids: zs.Array["Mob"]

    Mob()
    cls_out = zs_ffi.new("zs_class **")
    assert zs_lib.zs_find_class(runtime_ptr(rt), b"Mob", cls_out) == 0
    desc = zs_lib.zs_class_describe(cls_out[0])
    rows = [
        (
            zs_ffi.string(desc.properties[i].name),
            zs_ffi.string(desc.properties[i].type),
            desc.properties[i].offset,
        )
        for i in range(desc.property_count)
    ]
    layout = Mob._zs_layout
    assert rows == [
        (b"hp", b"Int32", layout.properties[0].offset),
        (b"kids", b"Array[Mob]", layout.properties[1].offset),
    ]


def test_structs_and_enums_of_the_host(rt: Any) -> None:
    Vec2 = zs.native_struct("Vec2")
    v = Vec2(3.0, 4.0)
    assert (v.x, v.y) == (3.0, 4.0) and issubclass(Vec2, zs.Struct)
    Mood = zs.native_enum("Mood")
    assert issubclass(Mood, enum.IntEnum) and [(m.name, m.value) for m in Mood] == [
        ("Calm", 0),
        ("Angry", 1),
        ("Sad", 7),
    ]
    with pytest.raises(KeyError):
        zs.native_struct("Thing")
    with pytest.raises(KeyError):
        zs.native_enum("Vec2")


def test_descriptions_list_functions_with_their_signatures(rt: Any) -> None:
    described = zs.native_class("Thing")._zs_description
    signatures = {f.name: f.signature_text for f in described.functions}
    assert signatures["add"] == "(a: Int32, b: Int32) -> Int32"
    assert signatures["split"] == "(v: Vec2, scale: Float64) -> tuple[Vec2, Float64, Float64]"
    events = {f.name: (f.is_event, bool(f.entry)) for f in described.functions if f.is_event}
    assert events == {"hit": (True, True), "on_spawn": (True, False)}


def test_without_a_handler_native_calls_run_the_native_entries(host: Any) -> None:
    """A runtime with no scripting layer attached (no call handler) runs the
    functions its classes describe; an event nobody implements does nothing."""
    out = zs_ffi.new("zs_runtime **")
    assert zs_lib.zs_runtime_new(zs_ffi.NULL, out) == 0
    native = out[0]
    try:
        address = int(zs_ffi.cast("uintptr_t", native))
        api = FFI().cast("void *", api_table())
        assert host.reflect_host_install(api, FFI().cast("void *", address)) == 0
        cls_out = zs_ffi.new("zs_class **")
        assert zs_lib.zs_find_class(native, b"Thing", cls_out) == 0
        ref = zs_ffi.new("zs_ref *")
        obj = zs_ffi.new("zs_object **")
        assert zs_lib.zs_object_new(native, cls_out[0], 0, zs_lib.ZS_NAME_AUTO, 0, ref, obj) == 0
        hp = zs_ffi.cast("int32_t *", zs_ffi.cast("char *", obj[0]) + zs_ffi.sizeof("zs_object"))
        hp[0] = 10
        damage = zs_ffi.new("int32_t *", 3)
        assert zs_lib.zs_call_function(native, ref[0], b"hit", damage) == 0
        assert hp[0] == 7
        assert zs_lib.zs_call_function(native, ref[0], b"on_spawn", zs_ffi.NULL) == 0
        assert zs_lib.zs_call_function(native, ref[0], b"nope", zs_ffi.NULL) == zs_lib.ZS_E_INVALID
    finally:
        zs_lib.zs_runtime_free(native)


def install(host: Any, runtime: Any) -> None:
    """Register the test host in ``runtime``."""
    status = host.reflect_host_install(
        FFI().cast("void *", api_table()), FFI().cast("void *", runtime.native_address)
    )
    assert status == 0


def test_a_host_class_serves_every_runtime_its_host_registers_it_in(host: Any, rt: Any) -> None:
    """One class per description: found in another runtime whose host
    registered the same, it is the same class, and its objects and
    functions are that runtime's own."""
    Thing = zs.native_class("Thing")
    mine = Thing(hp=1)
    with zs.Runtime() as other:
        install(host, other)
        assert zs.native_class("Thing") is Thing and zs.native_struct("Vec2").__name__ == "Vec2"
        theirs = Thing(hp=2)
        assert theirs.runtime is other and theirs.add(2, 3) == 5
        assert set(Thing.add.runtimes) == {rt, other}
    assert Thing.add.runtimes == (rt,)  # the closed runtime's entries are forgotten
    assert mine.hp == 1 and mine.add(1, 1) == 2


def test_a_host_class_is_refused_where_its_host_is_not_installed(host: Any, rt: Any) -> None:
    Thing = zs.native_class("Thing")
    with zs.Runtime():
        with pytest.raises(
            TypeError,
            match=r"Thing \(a class of a native host\) cannot be used "
            r"in the runtime made at .*test_reflection.py:\d+ \(the current "
            r"one\): no class named Thing is registered there",
        ):
            Thing()

        class Sub(Thing):  # type: ignore[misc,valid-type]
            pass

        with pytest.raises(TypeError, match="no class named Thing"):
            Sub()
    gc.collect()


def test_a_description_that_does_not_fit_is_refused(rt: Any) -> None:
    bad = StructDescription("Bad", 8, 8, (PropertyDescription("x", "zs.Float64", 4),))
    cls = StructMeta("Bad", (zs.Struct,), {"_zs_description": bad, "_zs_align": 8})
    with pytest.raises(TypeError, match="does not fit"):
        cls(1.0)


def test_the_api_table_lists_every_function_of_the_header() -> None:
    """zsharp_api.h's table is what a separately built host calls through:
    a function of zsharp.h or zsharp_debug.h missing from it is one such a
    host cannot call. The managed side's protocol (zsharp_managed.h) is
    listed apart, ZS_MANAGED_FUNCTIONS, and kept out of the table."""
    include = Path(include_dir())
    host = declared_functions(include / "zsharp.h") - {"zs_api_table"}
    debug = declared_functions(include / "zsharp_debug.h")
    table = (include / "zsharp_api.h").read_text()
    managed_at = table.index("#define ZS_MANAGED_FUNCTIONS")
    listed = set(re.findall(r"X\((zs_[a-z0-9_]+)\)", table[:managed_at]))
    managed = set(re.findall(r"X\((zs_[a-z0-9_]+)\)", table[managed_at:]))
    assert host and debug and listed == host | debug
    assert managed == declared_functions(include / "zsharp_managed.h")
    assert not listed & managed  # the managed side's protocol is not the host's
    assert {"zs_gc_take_expiring", "zs_forget_conjugate", "zs_conjugates_dropped"} <= managed


# ---------------------------------------------------------------------------
# Host functions as methods, and Python overrides of host events
# ---------------------------------------------------------------------------


def call_natively(rt: Any, obj: Any, name: bytes, block: Any = None) -> int:
    """zs_call_function as the host calls it (``block``: a zs_ffi buffer)."""
    return int(zs_lib.zs_call_function(runtime_ptr(rt), obj.handle, name, block or zs_ffi.NULL))


def test_host_functions_are_methods_of_every_direction(rt: Any) -> None:
    Thing, Vec2 = zs.native_class("Thing"), zs.native_struct("Vec2")
    a, b = Thing(), Thing()
    assert a.add(2, 3) == 5 and a.add(a=4, b=-1) == 3
    a.hp = 10
    assert a.hit(4) is None and a.hp == 6
    assert Thing.version() == 3 and a.version() == 3  # static: no object
    result, scale, x = a.split(Vec2(1.5, 2.0), 2.0)  # result, then inout, then out
    assert (result.x, result.y, scale, x) == (3.0, 4.0, 4.0, 1.5)
    assert a.befriend(b) is a and a.friend is b
    assert a.befriend(None) is a and a.friend is None


def test_wrong_arguments_name_the_function_and_its_signature(rt: Any) -> None:
    Thing = zs.native_class("Thing")
    a = Thing()
    with pytest.raises(TypeError, match=re.escape("Thing.add(a: Int32, b: Int32) -> Int32")):
        a.add(1)
    with pytest.raises(TypeError, match="Thing.add"):
        a.add(1, 2, 3)
    with pytest.raises(TypeError, match="Thing.add"):
        a.add(1, c=2)
    with pytest.raises(TypeError):
        a.add("1", 2)
    with pytest.raises(OverflowError):
        a.add(2**31, 0)
    with pytest.raises(TypeError, match="Thing"):
        a.befriend(zs.native_struct("Vec2")(0.0, 0.0))
    with pytest.raises(ValueError):  # the host's entry refused: its status raises
        a.add(600, 66)
    b = Thing()
    b.mark_as_garbage()
    rt.collect_garbage()
    with pytest.raises(zs.ExpiredConjugateError):
        b.add(1, 2)
    with pytest.raises(zs.ExpiredConjugateError):
        a.befriend(b)


def test_help_shows_each_functions_signature(rt: Any) -> None:
    Thing = zs.native_class("Thing")
    assert str(inspect.signature(Thing.add)) == "(self, /, a: 'Int32', b: 'Int32') -> 'Int32'"
    assert str(inspect.signature(Thing.version)) == "() -> 'Int32'"
    text = pydoc.render_doc(Thing, renderer=pydoc.plaintext)
    assert "split(self, /, v: 'Vec2', scale: 'Float64')" in text
    assert "It returns its result, then scale, x, as a tuple." in text
    assert "no native default" in text  # on_spawn


def test_native_calls_run_the_native_entry_when_python_overrides_nothing(rt: Any) -> None:
    Thing = zs.native_class("Thing")
    a = Thing()
    a.hp = 10
    damage = zs_ffi.new("int32_t *", 3)
    assert call_natively(rt, a, b"hit", damage) == 0 and a.hp == 7
    assert call_natively(rt, a, b"on_spawn") == 0  # implementable, nobody did: nothing
    block = zs_ffi.new("int32_t[3]", [20, 22, 0])
    assert call_natively(rt, a, b"add", block) == 0 and block[2] == 42
    # Any signature runs natively, out and in-out parameters too.
    split = zs_ffi.new("double[7]", [1.0, 2.0, 3.0, 0, 0, 0, 0])
    assert call_natively(rt, a, b"split", split) == 0
    assert list(split) == [1.0, 2.0, 6.0, 1.0, 3.0, 6.0, 0]


def test_native_calls_reach_python_overrides_and_super_runs_the_default(rt: Any) -> None:
    Thing = zs.native_class("Thing")
    seen: list[Any] = []

    class Knight(Thing):  # type: ignore[misc,valid-type]
        def hit(self, damage):  # type: ignore[no-untyped-def]  # the host's parameters
            seen.append(("hit", damage))
            super().hit(damage * 2)  # the native default, on this object

        def on_spawn(self) -> None:
            seen.append("spawned")
            super().on_spawn()  # no native default: nothing

        def add(self, a: int, b: int) -> int:  # not an event: still reached
            return 100 + super().add(a, b)

    k = Knight()
    k.hp = 20
    assert call_natively(rt, k, b"hit", zs_ffi.new("int32_t *", 3)) == 0
    assert call_natively(rt, k, b"on_spawn") == 0
    block = zs_ffi.new("int32_t[3]", [1, 2, 0])
    assert call_natively(rt, k, b"add", block) == 0 and block[2] == 103
    assert seen == [("hit", 3), "spawned"] and k.hp == 14
    raw_hits = zs_ffi.cast("int32_t *", k._address + zs_ffi.sizeof("zs_object"))
    assert raw_hits[0] == 14  # the host's own field, written by its default
    # Other classes keep the native default.
    plain = Thing()
    plain.hp = 5
    assert call_natively(rt, plain, b"hit", zs_ffi.new("int32_t *", 3)) == 0 and plain.hp == 2


def test_an_override_that_cannot_take_the_hosts_arguments_is_refused(rt: Any) -> None:
    Thing = zs.native_class("Thing")
    with pytest.raises(TypeError, match=r"cannot override Thing\.hit\(damage: Int32\)"):

        class Wrong(Thing):  # type: ignore[misc,valid-type]
            def hit(self) -> None:
                pass

    with pytest.raises(TypeError, match="out or in-out parameters"):

        class Splitter(Thing):  # type: ignore[misc,valid-type]
            def split(self, v, scale):  # type: ignore[no-untyped-def]
                return v


def test_an_exception_in_an_override_reaches_unraisablehook_not_the_host(
    rt: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    Thing = zs.native_class("Thing")
    seen: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)

    class Fragile(Thing):  # type: ignore[misc,valid-type]
        def hit(self, damage):  # type: ignore[no-untyped-def]
            super().hit(damage)
            raise RuntimeError("shield broke")

    f = Fragile()
    f.hp = 9
    status = call_natively(rt, f, b"hit", zs_ffi.new("int32_t *", 4))
    assert status == zs_lib.ZS_E_CALL_FAILED
    assert len(seen) == 1 and isinstance(seen[0].exc_value, RuntimeError)
    assert f.hp == 5  # the default ran before the exception; the heap is consistent
    rt.gc.verify()


def test_overrides_that_collect_and_destroy_their_object_are_safe(rt: Any) -> None:
    """An override that runs a full collection and destroys its own object,
    then calls the native default on it: the default is refused (the object
    is dying), the native caller gets a status, nothing is touched."""
    Thing = zs.native_class("Thing")
    results: list[Any] = []

    class Doomed(Thing):  # type: ignore[misc,valid-type]
        def hit(self, damage):  # type: ignore[no-untyped-def]
            self.mark_as_garbage()
            rt.collect_garbage()
            try:
                super().hit(damage)
            except zs.ExpiredConjugateError as error:
                results.append(type(error))
            self.add(1, 2) if not self.is_expired else results.append("expired")

    d = Doomed()
    d_handle = d.handle
    status = zs_lib.zs_call_function(runtime_ptr(rt), d_handle, b"hit", zs_ffi.new("int32_t *", 1))
    assert status == 0
    assert results == [zs.ExpiredConjugateError, "expired"]
    assert d.is_expired
    # The same handle again: the object is gone; the host gets a status.
    again = zs_lib.zs_call_function(runtime_ptr(rt), d_handle, b"hit", zs_ffi.new("int32_t *", 1))
    assert again == zs_lib.ZS_E_STALE
    rt.gc.verify()


def test_host_objects_stored_in_python_declared_references(rt: Any) -> None:
    Thing = zs.native_class("Thing")

    class Squad(zs.Object):
        leader: "Thing | None"
        members: zs.Array["Thing"]

    squad = Squad()
    squad.add_to_root()
    leader = Thing()
    squad.leader = leader
    squad.members.append(Thing())
    rt.collect_garbage()
    assert squad.leader is leader and not squad.members[0].is_expired
    assert squad.leader.add(1, 1) == 2


def test_static_functions_run_in_the_current_runtime(host: Any) -> None:
    """A static function has no object to say its runtime: it runs in the
    current one, with the entry and user pointer that runtime's host
    registered; where the host is not installed it raises, naming the
    runtime, instead of calling into another runtime's (maybe freed) state."""
    with zs.Runtime() as first:
        install(host, first)
        Thing = zs.native_class("Thing")
        assert Thing.version() == 3
        with (
            zs.Runtime(),  # another runtime current: the host is not installed there
            pytest.raises(TypeError, match=r"the current one\): no class named Thing"),
        ):
            Thing.version()
        with zs.Runtime() as second:
            install(host, second)
            assert Thing.version() == 3 and set(Thing.version.runtimes) == {first, second}
    assert Thing.version.runtimes == ()
    with zs.Runtime(), pytest.raises(TypeError, match="no class named Thing"):
        Thing.version()
    gc.collect()
