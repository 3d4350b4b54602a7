"""The game types the memory-safety tests exercise (a user's own module)."""

from __future__ import annotations

import zsharp_py as zs


class Vec3(zs.Struct):
    x: zs.Float64
    y: zs.Float64
    z: zs.Float64


class Actor(zs.Object):
    health: zs.Int32 = 100
    position: Vec3
    target: "Actor | None"
    friend: zs.WeakObjectPtr["Actor"]
    path: zs.Array[Vec3]
    inventory: zs.Map[zs.Name, Vec3]
    on_hit: zs.MulticastDelegate

    def heal(self, amount: int) -> None:
        self.health += amount
