"""Struct layouts computed in Python (zsharp_py/_base/layout.py) against a C
compiler's view of the same structs.

The oracle is an ABI-level cffi FFI of this test's own: it declares the
native structs as ``zsharp.h`` does (checked first against the compiled
extension, which was built from that header), then each representative
class as the C struct a host would write for it. cffi lays those out as
the platform's C compiler does; the layouts the package computes must
agree member by member, and on size and alignment. A few are also checked
against offsets worked out by hand.
"""

from __future__ import annotations

from typing import Any

import cffi
import pytest

import zsharp_py as zs
from zsharp_py._base.ffi import ffi
from zsharp_py._base.layout import Layout, align_up, member_name, size_align
from zsharp_py._model.object import class_layout, kind_of
from zsharp_py._model.struct import struct_layout
from zsharp_py.lowlevel import function_layout

# The native structs as zsharp.h declares them.
NATIVE_CDEF = """
typedef uint64_t zs_ref;
typedef struct zs_object {
    const void *cls;
    zs_ref outer;
    uint32_t index;
    uint32_t name_index;
    uint32_t name_number;
    uint32_t hash_next;
} zs_object;
typedef struct zs_string { void *data; uint32_t length; uint32_t capacity; } zs_string;
typedef struct zs_array { void *data; uint32_t count; uint32_t capacity; } zs_array;
typedef struct zs_hash {
    zs_array entries; uint32_t *buckets; uint32_t bucket_count; uint32_t reserved;
} zs_hash;
typedef struct zs_binding { zs_ref object; uint32_t function_name; uint32_t callable; } zs_binding;
"""

NATIVE_STRUCTS = ("zs_object", "zs_string", "zs_array", "zs_hash", "zs_binding")


class IThing(zs.Interface):
    __slots__ = ()


class Inner(zs.Struct):
    a: zs.Int8
    b: zs.Int16


class Vec3(zs.Struct):
    x: zs.Float64
    y: zs.Float64
    z: zs.Float64


class Outer(zs.Struct):
    flag: zs.Bool
    inner: Inner
    c: zs.Int8
    where: Vec3
    d: zs.Int8


class Tiny(zs.Struct):
    a: zs.UInt8
    b: zs.UInt8
    c: zs.UInt8


class Nothing(zs.Struct):
    pass


class Wrapped(zs.Struct):
    """Structs inside a struct, with the kinds that hold small structs."""

    tiny: Tiny
    maybe: "zs.Optional[Tiny]"
    lazy: "zs.LazyObjectPtr[Scalars]"
    e: zs.Int8
    user: zs.ScriptInterface[IThing]
    f: zs.Int8


class Scalars(zs.Object, IThing):
    """Scalars of every size, in an order that pads."""

    flag: zs.Bool
    big: zs.Int64
    tiny: zs.Int8
    ratio: zs.Float32
    small: zs.UInt16
    huge: zs.UInt64
    other_flag: bool
    count: zs.Int32
    wide: zs.Float64
    byte: zs.UInt8


class MoreScalars(Scalars):
    """Inherited members first, then its own (in the parent's tail padding)."""

    tail: zs.Int8
    signed_small: zs.Int16
    unsigned: zs.UInt32


class Holder(zs.Object):
    """Every kind of member, each after a byte to show its alignment."""

    a: zs.Int8
    label: zs.String
    b: zs.Bool
    numbers: zs.Array[zs.Int32]
    c: zs.Int8
    lookup: zs.Map[zs.String, zs.Float64]
    d: zs.Int8
    tags: zs.Set[zs.Name]
    e: zs.Int8
    id_name: zs.Name
    f: zs.Int8
    maybe_small: zs.Optional[zs.Int8]
    g: zs.Int8
    maybe_big: zs.Optional[zs.Float64]
    h: zs.Int8
    maybe_struct: zs.Optional[Inner]
    i: zs.Int8
    maybe_text: zs.Optional[zs.String]
    j: zs.Int8
    friend: "Holder | None"
    k: zs.Int8
    weak: "zs.WeakObjectPtr[Holder]"
    m: zs.Int8
    cls_of: "zs.SubclassOf[Holder]"
    n: zs.Int8
    soft: "zs.SoftObjectPtr[Holder]"
    o: zs.Int8
    lazy: "zs.LazyObjectPtr[Holder]"
    p: zs.Int8
    user: zs.ScriptInterface[IThing]
    q: zs.Int8
    on_hit: zs.Delegate
    r: zs.Int8
    listeners: zs.MulticastDelegate
    s: zs.Int8
    rare: zs.SparseDelegate
    t: zs.Int8
    path: zs.FieldPath
    u: zs.Int8
    text: zs.Text
    v: zs.Int8
    outer_struct: Outer
    w: zs.Int8
    wrapped: Wrapped
    x: zs.Int8
    nothing: Nothing
    y: zs.Int16


class Caller(zs.Object):
    def hit(self, flag: bool, where: Vec3, amount: zs.Int16, who: "Caller | None") -> zs.Int8:
        return 0

    def move(self, step: Tiny, ratio: zs.Float32) -> Inner:
        return Inner()

    def tick(self, dt: float) -> None:
        pass


# The same classes as a host would declare them in C.
CLASSES_CDEF = """
struct Inner { int8_t a; int16_t b; };
struct Vec3 { double x; double y; double z; };
struct Outer { _Bool flag; struct Inner inner; int8_t c; struct Vec3 where; int8_t d; };
struct Tiny { uint8_t a; uint8_t b; uint8_t c; };
struct Lazy { uint64_t low; uint64_t high; };
struct Interface { zs_ref object; uint32_t interface; };
struct Wrapped {
    struct Tiny tiny;
    struct { struct Tiny value; uint8_t set; } maybe;
    struct Lazy lazy;
    int8_t e;
    struct Interface user;
    int8_t f;
};
struct Nothing { uint8_t padding; };
struct Scalars {
    zs_object header;
    _Bool flag; int64_t big; int8_t tiny; float ratio; uint16_t small;
    uint64_t huge; _Bool other_flag; int32_t count; double wide; uint8_t byte;
};
struct MoreScalars {
    zs_object header;
    _Bool flag; int64_t big; int8_t tiny; float ratio; uint16_t small;
    uint64_t huge; _Bool other_flag; int32_t count; double wide; uint8_t byte;
    int8_t tail; int16_t signed_small; uint32_t unsigned_;
};
struct Holder {
    zs_object header;
    int8_t a; zs_string label;
    _Bool b; zs_array numbers;
    int8_t c; zs_hash lookup;
    int8_t d; zs_hash tags;
    int8_t e; uint64_t id_name;
    int8_t f; struct { int8_t value; uint8_t set; } maybe_small;
    int8_t g; struct { double value; uint8_t set; } maybe_big;
    int8_t h; struct { struct Inner value; uint8_t set; } maybe_struct;
    int8_t i; struct { zs_string value; uint8_t set; } maybe_text;
    int8_t j; zs_ref friend_;
    int8_t k; zs_ref weak;
    int8_t m; uint32_t cls_of;
    int8_t n; zs_string soft;
    int8_t o; struct Lazy lazy;
    int8_t p; struct Interface user;
    int8_t q; zs_binding on_hit;
    int8_t r; zs_array listeners;
    int8_t s; void *rare;
    int8_t t; zs_string path;
    int8_t u; zs_string text;
    int8_t v; struct Outer outer_struct;
    int8_t w; struct Wrapped wrapped;
    int8_t x; struct Nothing nothing;
    int16_t y;
};
struct Caller_hit_params {
    _Bool flag; struct Vec3 where; int16_t amount; zs_ref who; int8_t return_value;
};
struct Caller_move_params { struct Tiny step; float ratio; struct Inner return_value; };
struct Caller_tick_params { double dt; };
"""


def c_member(name: str) -> str:
    """The oracle's member name of a property (a few are C keywords)."""
    return name + "_" if name in ("friend", "unsigned") else name


@pytest.fixture(scope="module")
def oracle() -> Any:
    declared = cffi.FFI()
    declared.cdef(NATIVE_CDEF + CLASSES_CDEF)
    return declared


def test_the_oracle_declares_the_native_structs_as_the_extension_has_them(oracle: Any) -> None:
    for name in NATIVE_STRUCTS:
        assert (oracle.sizeof(name), oracle.alignof(name)) == (ffi.sizeof(name), ffi.alignof(name))
        assert size_align(name) == (ffi.sizeof(name), ffi.alignof(name))
        for field, _ in ffi.typeof(name).fields:
            assert oracle.offsetof(name, field) == ffi.offsetof(name, field), f"{name}.{field}"


@pytest.mark.parametrize("cls", [Scalars, MoreScalars, Holder], ids=lambda c: c.__name__)
def test_object_classes(oracle: Any, cls: type[zs.Object]) -> None:
    layout = class_layout(cls)
    c_struct = f"struct {cls.__name__}"
    for info in layout.properties:
        assert info.offset == oracle.offsetof(c_struct, c_member(info.name)), info.name
    assert layout.size == oracle.sizeof(c_struct)


@pytest.mark.parametrize(
    "cls", [Inner, Vec3, Outer, Tiny, Wrapped, Nothing], ids=lambda c: c.__name__
)
def test_struct_classes(oracle: Any, cls: type[zs.Struct]) -> None:
    layout = struct_layout(cls)
    c_struct = f"struct {cls.__name__}"
    for info in layout.properties:
        assert info.offset == oracle.offsetof(c_struct, info.name), info.name
        assert info.offset == layout.c_struct.offsets[info.cname]
    assert (layout.size, layout.align) == (oracle.sizeof(c_struct), oracle.alignof(c_struct))
    assert (layout.c_struct.size, layout.c_struct.align) == (layout.size, layout.align)


@pytest.mark.parametrize(
    "annotation, c_type",
    [
        (zs.Optional[zs.Int8], "struct { int8_t value; uint8_t set; }"),
        (zs.Optional[zs.Float64], "struct { double value; uint8_t set; }"),
        (zs.Optional[Vec3], "struct { struct Vec3 value; uint8_t set; }"),
        (zs.Optional[Tiny], "struct { struct Tiny value; uint8_t set; }"),
        (zs.Optional[zs.String], "struct { zs_string value; uint8_t set; }"),
        (zs.Optional[zs.Map[zs.Int8, zs.Int8]], "struct { zs_hash value; uint8_t set; }"),
        (zs.LazyObjectPtr[Holder], "struct Lazy"),
        (zs.ScriptInterface[IThing], "struct Interface"),
    ],
    ids=str,
)
def test_kinds_held_as_small_structs(oracle: Any, annotation: Any, c_type: str) -> None:
    """The member type of each such kind, and the native kind made from it."""
    kind = kind_of(Holder, annotation, "test")
    member = kind.member_type
    assert isinstance(member, Layout)
    assert (member.size, member.align) == (oracle.sizeof(c_type), oracle.alignof(c_type))
    for name, offset in member.offsets.items():
        assert offset == oracle.offsetof(c_type, name), name
    assert (kind.kind.size, kind.kind.align) == (member.size, member.align)
    if "set" in member.offsets:
        assert kind.kind.value_offset == member.offsets["set"]


@pytest.mark.parametrize("name", ["hit", "move", "tick"])
def test_function_parameter_blocks(oracle: Any, name: str) -> None:
    layout = function_layout(Caller, name)
    c_struct = f"struct Caller_{name}_params"
    members = list(layout.parameters) + ([layout.result] if layout.result else [])
    for member in members:
        assert member.offset == oracle.offsetof(c_struct, member.name), member.name
    assert layout.size == oracle.sizeof(c_struct)


def test_the_host_declaration_lays_out_as_the_block(oracle: Any) -> None:
    """What ``c_declaration`` gives a host compiles to the same offsets."""
    layout = function_layout(Caller, "hit")
    host = cffi.FFI()
    host.cdef("typedef uint64_t zs_ref;\n" + layout.c_declaration)
    for member in [*layout.parameters, layout.result]:
        assert member is not None
        assert member.offset == host.offsetof("struct Caller_hit_params", member.name)
    assert layout.size == host.sizeof("struct Caller_hit_params")


# ---------------------------------------------------------------------------
# By hand (a 64-bit platform: 8-byte pointers, int64_t and double 8-aligned)
# ---------------------------------------------------------------------------

lp64 = pytest.mark.skipif(
    ffi.sizeof("void *") != 8 or ffi.alignof("uint64_t") != 8, reason="offsets for LP64"
)


def test_layout_rules() -> None:
    empty = Layout("Empty", [])
    assert (empty.size, empty.align, dict(empty.offsets)) == (1, 1, {})
    bytes3 = Layout("Bytes", [("a", "uint8_t"), ("b", "uint8_t"), ("c", "_Bool")])
    assert (bytes3.size, bytes3.align, dict(bytes3.offsets)) == (3, 1, {"a": 0, "b": 1, "c": 2})
    shorts = Layout("Shorts", [("a", "uint8_t"), ("b", "int16_t"), ("c", "uint8_t")])
    assert (shorts.size, shorts.align, dict(shorts.offsets)) == (6, 2, {"a": 0, "b": 2, "c": 4})
    nested = Layout("Nested", [("x", "uint8_t"), ("s", shorts), ("y", "uint8_t")])
    assert (nested.size, nested.align, dict(nested.offsets)) == (10, 2, {"x": 0, "s": 2, "y": 8})
    assert align_up(0, 8) == 0 and align_up(1, 8) == 8 and align_up(8, 8) == 8
    with pytest.raises(ValueError, match="two members named 'a'"):
        Layout("Twice", [("a", "uint8_t"), ("a", "uint8_t")])


@lp64
def test_by_hand() -> None:
    mixed = Layout("Mixed", [("a", "uint8_t"), ("b", "double"), ("c", "uint16_t")])
    assert (mixed.size, mixed.align, dict(mixed.offsets)) == (24, 8, {"a": 0, "b": 8, "c": 16})
    assert size_align("zs_object") == (32, 8) and size_align("void *") == (8, 8)

    offsets = {info.name: info.offset for info in class_layout(Scalars).properties}
    assert offsets == {
        "flag": 32,
        "big": 40,
        "tiny": 48,
        "ratio": 52,
        "small": 56,
        "huge": 64,
        "other_flag": 72,
        "count": 76,
        "wide": 80,
        "byte": 88,
    }
    assert class_layout(Scalars).size == 96
    more = {info.name: info.offset for info in class_layout(MoreScalars).properties}
    assert (more["tail"], more["signed_small"], more["unsigned"]) == (89, 90, 92)
    assert class_layout(MoreScalars).size == 96

    holder = {info.name: info.offset for info in class_layout(Holder).properties}
    # A small optional packs its flag next to the byte; a big one pads to 16.
    assert (holder["a"], holder["label"], holder["b"], holder["numbers"]) == (32, 40, 56, 64)
    assert (holder["f"], holder["maybe_small"], holder["g"]) == (176, 177, 179)
    assert (holder["maybe_big"], holder["h"], holder["maybe_struct"]) == (184, 200, 202)

    outer = struct_layout(Outer)
    assert [info.offset for info in outer.properties] == [0, 2, 6, 8, 32]
    assert (outer.size, outer.align) == (40, 8)
    assert (struct_layout(Nothing).size, struct_layout(Nothing).align) == (1, 1)

    hit = function_layout(Caller, "hit")
    assert [p.offset for p in hit.parameters] == [0, 8, 32, 40]
    assert hit.result is not None and hit.result.offset == 48 and hit.size == 56
    assert function_layout(Caller, "move").size == 12


def test_member_names_are_c_identifiers() -> None:
    assert member_name(0, "health") == "m0_health"
    assert member_name(12, "größe-1") == "m12_gr__e_1"
