"""Native classes shared by the test suite (declared once, at module level)."""

import zsharp_py as zs


class Actor(zs.Object):
    health: zs.Int32 = 100
    speed: zs.Float64
    alive: zs.Bool
    i8: zs.Int8
    u8: zs.UInt8
    i16: zs.Int16
    u16: zs.UInt16
    u32: zs.UInt32
    i64: zs.Int64
    u64: zs.UInt64
    f32: zs.Float32
    target: "Actor | None"
    friend: zs.WeakObjectPtr["Actor"]


class Hero(Actor):
    """A subclass with extra fields: a scalar and a second traced reference."""

    level: zs.Int32 = 1
    sidekick: "Actor | None"


class Item(zs.Object):
    """Unrelated to Actor: storing it into an Actor reference is a type error."""

    weight: zs.Float64 = 1.5
