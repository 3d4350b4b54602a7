"""The sample engine's classes, structs and enums: type stubs for mypy and pyright.

Written by zsharp_py.stubs from the descriptions the host registered; regenerate with `python -m
zsharp_py stubs --engine sample -o src/zsharp_py/engines/sample.pyi`. Do not edit.
"""

import enum

import zsharp_py as zs

__all__ = [
    "Team",
    "Vec3",
    "Transform",
    "World",
    "Actor",
    "Component",
    "MovementComponent",
]

class Team(enum.IntEnum):
    """Team: an enum of the native host, stored as UInt8."""

    Neutral = 0
    Red = 1
    Blue = 2

class Vec3(zs.Struct):
    """Vec3: a struct of the native host."""

    x: zs.Float64 = ...
    y: zs.Float64 = ...
    z: zs.Float64 = ...

class Transform(zs.Struct):
    """Transform: a struct of the native host."""

    location: Vec3 = ...
    yaw: zs.Float64 = ...
    scale: zs.Float64 = ...

class World(zs.Object):
    """World: a class of the native host."""

    frame: zs.Int64 = ...
    time: zs.Float64 = ...
    actors: zs.Array[Actor] = ...
    gravity: zs.Float64 = ...
    on_tick: zs.MulticastDelegate = ...
    def spawn(self, cls: type[Actor] | zs.SubclassOf[Actor] | None, at: Transform) -> Actor | None:
        """spawn(cls: SubclassOf[Actor], at: Transform) -> Actor | None: A function."""
    def destroy(self, actor: Actor | None) -> None:
        """destroy(actor: Actor | None) -> None: A function."""
    def find(self, index: zs.Int32) -> Actor | None:
        """find(index: Int32) -> Actor | None: A function."""
    def tick(self, dt: zs.Float64) -> zs.Int32:
        """tick(dt: Float64) -> Int32: A function."""
    @staticmethod
    def version() -> zs.Int32:
        """version() -> Int32: A static function."""
    def collect(self) -> None:
        """collect() -> None: A function."""

class Actor(zs.Object):
    """Actor: a class of the native host."""

    world: World | None = ...
    transform: Transform = ...
    team: Team = ...
    health: zs.Int32 = ...
    max_health: zs.Int32 = ...
    speed: zs.Float64 = ...
    alive: zs.Bool = ...
    ticks: zs.Int64 = ...
    target: zs.WeakObjectPtr[Actor] = ...
    components: zs.Array[Component] = ...
    tags: zs.Set[zs.Name] = ...
    on_damaged: zs.MulticastDelegate = ...
    def take_damage(self, amount: zs.Float64, instigator: Actor | None) -> zs.Float64:
        """take_damage(amount: Float64, instigator: Actor | None) -> Float64: A function."""
    def get_location(self) -> Vec3:
        """get_location() -> Vec3: A function."""
    def heal(self, amount: zs.Int32) -> zs.Int32:
        """heal(amount: Int32) -> Int32: A function."""
    def move(self, delta: Vec3) -> None:
        """move(delta: Vec3) -> None: A function."""
    def add_component(
        self, cls: type[Component] | zs.SubclassOf[Component] | None
    ) -> Component | None:
        """add_component(cls: SubclassOf[Component]) -> Component | None: A function."""
    def begin_play(self) -> None:
        """begin_play() -> None: An event: a Python subclass may override it (native calls reach the
        override).
        """
    def tick(self, dt: zs.Float64) -> None:
        """tick(dt: Float64) -> None: An event: a Python subclass may override it (native calls
        reach
        the override).
        """
    def on_destroy(self) -> None:
        """on_destroy() -> None: An event: a Python subclass may override it (native calls reach the
        override); it has no native default.
        """

class Component(zs.Object):
    """Component: a class of the native host."""

    owner: Actor | None = ...
    enabled: zs.Bool = ...

class MovementComponent(Component):
    """MovementComponent: a class of the native host."""

    velocity: Vec3 = ...
