"""The sample engine (native/engine/sample_engine.c) as a user's host module:
compiled on its own with gcc against the installed headers only (it calls
the library through the API table, since the library's symbols are hidden),
loaded with cffi's ABI mode and installed into a runtime. What it registers
is read back through the low-level cffi library."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import zsharp_py as zs
from helpers import runtime_ptr
from native_build import compile_host
from zsharp_py._base.errors import ZS_E_INVALID, ZS_OK
from zsharp_py._base.ffi import ffi, lib
from zsharp_py.lowlevel import api_table

ENGINE = Path(__file__).resolve().parents[2] / "native" / "engine"


@pytest.fixture(scope="module")
def engine_module() -> Any:
    """sample_engine.c built as a shared library and opened (ABI mode)."""
    host, module, _ = compile_host(
        (ENGINE / "sample_engine.c").read_text(),
        "sample_engine",
        "int zs_sample_engine_install(const void *api, void *rt);",
        include_dirs=[ENGINE],
    )
    return host, module


def _install(engine_module: Any, rt: zs.Runtime) -> int:
    host, module = engine_module
    api = host.cast("const void *", api_table())
    return int(module.zs_sample_engine_install(api, host.cast("void *", rt.native_address)))


def _find_class(rt: zs.Runtime, name: str) -> Any:
    out = ffi.new("const zs_class **")
    assert lib.zs_find_class(runtime_ptr(rt), name.encode(), out) == ZS_OK, name
    return out[0]


def _names(items: Any, count: int) -> list[str]:
    return [ffi.string(items[i].name).decode() for i in range(count)]


def test_standalone_engine_registers_its_classes(engine_module: Any) -> None:
    with zs.Runtime() as rt:
        assert _install(engine_module, rt) == ZS_OK
        actor = _find_class(rt, "Actor")
        desc = lib.zs_class_describe(actor)
        assert _names(desc.properties, desc.property_count) == [
            "world",
            "transform",
            "team",
            "health",
            "max_health",
            "speed",
            "alive",
            "ticks",
            "target",
            "components",
            "tags",
            "on_damaged",
        ]
        types = {
            ffi.string(desc.properties[i].name).decode(): ffi.string(desc.properties[i].type)
            for i in range(desc.property_count)
        }
        assert types["target"] == b"WeakObjectPtr[Actor]" and types["tags"] == b"Set[Name]"
        assert _names(desc.functions, desc.function_count) == [
            "take_damage",
            "get_location",
            "heal",
            "move",
            "add_component",
            "begin_play",
            "tick",
            "on_destroy",
        ]
        on_destroy = desc.functions[7]
        assert on_destroy.entry == ffi.NULL and on_destroy.flags == lib.ZS_FUNCTION_EVENT

        world = lib.zs_class_describe(_find_class(rt, "World"))
        assert _names(world.properties, world.property_count) == [
            "frame",
            "time",
            "actors",
            "gravity",
            "on_tick",
        ]
        movement = _find_class(rt, "MovementComponent")
        assert lib.zs_class_parent(movement) == _find_class(rt, "Component")
        out_desc = ffi.new("const zs_struct_desc **")
        assert lib.zs_find_struct(runtime_ptr(rt), b"Transform", out_desc, ffi.NULL) == ZS_OK
        assert _names(out_desc[0].members, out_desc[0].member_count) == ["location", "yaw", "scale"]
        out_enum = ffi.new("const zs_enum_desc **")
        assert lib.zs_find_enum(runtime_ptr(rt), b"Team", out_enum) == ZS_OK
        assert _names(out_enum[0].items, out_enum[0].item_count) == ["Neutral", "Red", "Blue"]

        # Its entries run through the table: the static World.version.
        version = ffi.new("const zs_function_desc **")
        assert lib.zs_find_function(_find_class(rt, "World"), b"version", version) == ZS_OK
        block = ffi.new("int32_t *")
        status = lib.zs_call_native(runtime_ptr(rt), version[0].entry, version[0].user, 0, block)
        assert status == ZS_OK and block[0] == 1

        assert _install(engine_module, rt) == ZS_E_INVALID  # once per runtime


def test_packaged_engine_installs_too() -> None:
    """The copy compiled into the package's native library."""
    with zs.Runtime() as rt:
        assert lib.zs_sample_engine_install(lib.zs_api_table(), runtime_ptr(rt)) == ZS_OK
        desc = lib.zs_class_describe(_find_class(rt, "World"))
        assert desc.function_count == 6
        assert ffi.sizeof("sample_actor") == lib.zs_class_instance_size(_find_class(rt, "Actor"))
