"""Native reflection: a host module written in C (tests/hosts/reflect_host.c),
compiled here as a user's host is and registered in a runtime through the
API table; Python discovers its classes, structs and enums and binds them
with the same binder as classes declared in Python."""

from __future__ import annotations

import enum
import gc
import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from cffi import FFI

import zsharp_py as zs
from zsharp_py._base.ffi import ffi as zs_ffi
from zsharp_py._base.ffi import lib as zs_lib
from zsharp_py._interop.reflection import PropertyDescription, StructDescription
from zsharp_py._model.struct import StructMeta
from zsharp_py.lowlevel import api_table, include_dir

HOST_SOURCE = Path(__file__).parent / "hosts" / "reflect_host.c"
FLAGS = ["-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC"]


def compile_host(source: Path, cdef: str) -> Any:
    """Build ``source`` into a shared library (cached by content), as a
    user's host module is, and load it with cffi's ABI mode."""
    text = source.read_bytes()
    digest = hashlib.sha256(text + " ".join(FLAGS).encode() + include_dir().encode()).hexdigest()
    folder = Path(tempfile.gettempdir()) / "zsharp-hosts"
    folder.mkdir(exist_ok=True)
    target = folder / f"{source.stem}-{digest[:16]}.so"
    if not target.exists():
        partial = folder / f"{target.name}.{os.getpid()}.tmp"
        build = subprocess.run(
            ["gcc", *FLAGS, "-I", include_dir(), str(source), "-o", str(partial)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert build.returncode == 0, build.stderr
        assert build.stderr == "", f"the compiler printed warnings:\n{build.stderr}"
        os.replace(partial, target)
    host_ffi = FFI()
    host_ffi.cdef(cdef)
    return host_ffi.dlopen(str(target))


@pytest.fixture(scope="module")
def host() -> Any:
    return compile_host(HOST_SOURCE, "int reflect_host_install(void *api, void *rt);")


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
    with pytest.raises(OverflowError):
        a.mood = 256  # stored as the enum's UInt8
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
    assert zs_lib.zs_find_class(rt._ptr, b"BigThing", cls_out) == 0
    ref_out = zs_ffi.new("zs_ref *")
    obj_out = zs_ffi.new("zs_object **")
    status = zs_lib.zs_object_new(rt._ptr, cls_out[0], 0, zs_lib.ZS_NAME_AUTO, 0, ref_out, obj_out)
    assert status == 0
    holder = Holder()
    assert (
        zs_lib.zs_store_ref(
            rt._ptr, holder.handle, Holder._zs_layout.properties[0].offset, ref_out[0]
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
    assert zs_lib.zs_find_class(rt._ptr, b"ReflectHero", cls_out) == 0
    ref_out = zs_ffi.new("zs_ref *")
    obj_out = zs_ffi.new("zs_object **")
    assert (
        zs_lib.zs_object_new(rt._ptr, cls_out[0], 0, zs_lib.ZS_NAME_AUTO, 0, ref_out, obj_out) == 0
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
    assert zs_lib.zs_find_class(rt._ptr, b"Mob", cls_out) == 0
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
    assert signatures["split"] == "(v: Vec2, scale: Float64) -> tuple[Float64, Float64, Vec2]"
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


def test_a_host_class_belongs_to_its_runtime(host: Any, rt: Any) -> None:
    Thing = zs.native_class("Thing")
    with zs.Runtime(), pytest.raises(TypeError, match="another runtime"):
        Thing()
    gc.collect()


def test_a_description_that_does_not_fit_is_refused(rt: Any) -> None:
    bad = StructDescription("Bad", 8, 8, (PropertyDescription("x", "zs.Float64", 4),))
    cls = StructMeta("Bad", (zs.Struct,), {"_zs_description": bad, "_zs_align": 8})
    with pytest.raises(TypeError, match="does not fit"):
        cls(1.0)


def test_the_api_table_lists_every_function_of_the_header() -> None:
    """zsharp_api.h's table is what a separately built host calls through:
    a function of zsharp.h missing from it is one such a host cannot call."""
    include = Path(include_dir())
    header = re.sub(r"/\*.*?\*/", "", (include / "zsharp.h").read_text(), flags=re.S)
    declared = set(
        re.findall(
            r"^[A-Za-z_][\w \*]*?\b(zs_[a-z0-9_]+)\s*\([^;{]*\)\s*;", header, flags=re.M | re.S
        )
    ) - {"zs_api_table", "zs_status"}  # zs_status: the enum typedef
    table = (include / "zsharp_api.h").read_text()
    listed = set(re.findall(r"X\((zs_[a-z0-9_]+)\)", table))
    assert declared and declared == listed
