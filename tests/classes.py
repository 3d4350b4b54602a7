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


class Part(zs.Object, can_be_in_cluster=True):
    """Can join a cluster; three traced references (random graphs) and a weak one."""

    value: zs.Int64
    a: "Part | None"
    b: "Part | None"
    c: "Part | None"
    link: zs.WeakObjectPtr["Part"]


class Asset(Part, cluster_root=True):
    """Can root a cluster (and, like every Part, join one)."""


class Loose(Part, can_be_in_cluster=False):
    """A Part that never joins a cluster: a mutable object seen from one."""
