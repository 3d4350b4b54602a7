"""The game's Python side: the host (game.c) owns the runtime and the frame
loop; this module attaches to the runtime it is handed, subclasses the
host's Actor, and keeps a proxy of an actor the host later destroys."""

from __future__ import annotations

from typing import Any

import zsharp_py as zs

_state: dict[str, Any] = {}


def attach(address: int) -> None:
    """Take the host's runtime (a ``zs_runtime *`` as an int) and declare
    the script's classes in it."""
    runtime = zs.Runtime.attach(address)
    _state["runtime"] = runtime
    _state["activation"] = activation = runtime.activate()
    activation.__enter__()
    actor = zs.native_class("Actor")

    class Guard(actor):  # type: ignore[valid-type,misc]
        """A Python subclass of the host's Actor: the host spawns it by name."""

        def tick(self, dt: float) -> None:
            """Called from C every frame (zs_call_each): the native default
            counts the tick, then the guard loses a little health."""
            super().tick(dt)
            self.health -= 1.0

    _state["Guard"] = Guard
    print(f"script: attached to the host's runtime; Guard subclasses {actor.__name__}")


def meet(first_handle: int, guard_handle: int) -> None:
    """Keep proxies of the host's first actor (the host destroys it later)
    and of a guard (its health is the script's doing)."""
    runtime = _state["runtime"]
    _state["first"] = first = runtime.object_from_handle(first_handle)
    _state["guard"] = guard = runtime.object_from_handle(guard_handle)
    print(f"script: holding {first.name}, an {type(first).__name__}, and {guard.name}, a Guard")


def frame(index: int, ticked: int) -> None:
    """After the host's frame: report what the script sees."""
    first = _state["first"]
    if first.is_expired and "noticed" not in _state:
        _state["noticed"] = index
        try:
            first.health  # noqa: B018
        except zs.ExpiredConjugateError as error:
            print(f"script: frame {index}: the host destroyed the first actor: {error}")
    if index % 10 == 9:
        guard = _state["guard"]
        print(
            f"script: frame {index}: the host ticked {ticked} actors; {guard.name} has "
            f"{guard.health:g} health after {guard.ticks} ticks"
        )


def finish() -> None:
    """Let go of the host's runtime: every proxy expires, the heap stays."""
    runtime = _state.pop("runtime")
    _state.pop("activation").__exit__(None, None, None)
    runtime.close()
    print(f"script: closed; owns_heap={runtime.owns_heap}")
