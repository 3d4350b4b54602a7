"""Calls from native code into an override of another shape (FINDINGS.md,
class 6). Native code calls a function with one parameter block, the one
of its *reference declaration* (the first declaration from the root of the
class hierarchy down that native code can call); an override whose own
block differs is refused: at class declaration when both signatures
resolve then, else at the call (ZS_E_INVALID, a TypeError naming both
signatures through sys.unraisablehook). It never runs with another layout,
so it never reads or writes past the host's block."""

from __future__ import annotations

from typing import Any

import cffi
import pytest

import zsharp_py as zs
from helpers import runtime_ptr
from zsharp_py._base.errors import ZS_E_INVALID, ZS_OK
from zsharp_py._base.ffi import ffi, lib
from zsharp_py.lowlevel import function_layout

GUARD = 64


class Walker(zs.Object):
    speed: zs.Float64
    hits: zs.Int32

    def tick(self, dt: float) -> None:
        self.speed += dt

    def hit(self, amount: zs.Int32) -> zs.Int32:
        self.hits += amount
        return self.hits


class Runner(Walker):
    """A valid override: other parameter names, the same block."""

    def tick(self, delta: zs.Float64) -> None:
        self.speed += 10 * delta


class Sprinter(Runner):
    """Overrides an override: still checked against Walker's block."""

    def hit(self, damage: zs.Int32) -> zs.Int32:
        self.hits += 2 * damage
        return self.hits


class Host:
    """The host's block for ``cls.name``, followed by guard bytes that no
    call may touch."""

    def __init__(self, cls: type[zs.Object], name: str) -> None:
        self.layout = function_layout(cls, name)
        self.ffi = cffi.FFI()
        self.ffi.cdef(
            "typedef uint64_t zs_ref;\n"
            + self.layout.c_declaration
            + f"\nstruct guarded {{ struct {cls.__name__}_{name}_params p; "
            f"unsigned char guard[{GUARD}]; }};"
        )
        self.block: Any = self.ffi.new("struct guarded *")
        for i in range(GUARD):
            self.block.guard[i] = 0xAB

    def pointer(self) -> Any:
        return ffi.cast("void *", int(self.ffi.cast("uintptr_t", self.block)))

    def guard_intact(self) -> bool:
        return all(self.block.guard[i] == 0xAB for i in range(GUARD))

    def call(self, obj: zs.Object, **arguments: Any) -> int:
        for key, value in arguments.items():
            setattr(self.block.p, key, value)
        status: int = lib.zs_call_function(
            runtime_ptr(obj.runtime), obj.handle, self.layout.name.encode(), self.pointer()
        )
        return status

    def call_each(self, rt: zs.Runtime, cls: type[zs.Object], **arguments: Any) -> tuple[int, int]:
        for key, value in arguments.items():
            setattr(self.block.p, key, value)
        called, native_class = ffi.new("uint32_t *"), ffi.new("zs_class **")
        assert lib.zs_find_class(runtime_ptr(rt), cls.__name__.encode(), native_class) == ZS_OK
        status = lib.zs_call_each(
            runtime_ptr(rt), native_class[0], self.layout.name.encode(), self.pointer(), called
        )
        return status, called[0]


def test_the_briefs_override_is_refused_at_declaration() -> None:
    """tick(self, dt: float, extra: zs.Int64) -> zs.Int64 over tick(self, dt:
    float): native code would write the result past the 8-byte block."""
    with pytest.raises(TypeError) as info:

        class Greedy(Walker):
            def tick(self, dt: float, extra: zs.Int64) -> zs.Int64:
                return extra

    message = str(info.value)
    assert "Greedy.tick(double dt, int64_t extra) -> int64_t" in message
    assert "Walker.tick(double dt) -> void" in message


@pytest.mark.parametrize(
    "source",
    [
        "def tick(self, dt: zs.Int32) -> None: pass",  # another type, same size class
        "def tick(self, dt: zs.Float32) -> None: pass",  # a smaller type
        "def tick(self) -> None: pass",  # fewer parameters
        "def tick(self, dt: float) -> zs.Int8: return 0",  # a result where there was none
        "def hit(self, amount: zs.Int32) -> zs.Int64: return 0",  # a wider result
        "def hit(self, amount: zs.UInt32) -> zs.Int32: return 0",  # unsigned for signed
        "def hit(self, amount: zs.Int32) -> None: pass",  # no result where there was one
        "def hit(self, amount: zs.Int32, more: zs.Int32) -> zs.Int32: return 0",
    ],
)
def test_overrides_of_another_block_are_refused_at_declaration(source: str) -> None:
    namespace: dict[str, Any] = {"zs": zs}
    exec(source, namespace)  # noqa: S102
    method = next(v for k, v in namespace.items() if k in ("tick", "hit"))
    with pytest.raises(TypeError, match="cannot override Walker"):
        type(Walker)("Bad", (Walker,), {method.__name__: method, "__module__": __name__})


def test_overrides_of_the_same_block_run(rt: zs.Runtime) -> None:
    walker, runner, sprinter = Walker(), Runner(), Sprinter()
    host = Host(Walker, "tick")
    for obj in (walker, runner, sprinter):
        assert host.call(obj, dt=1.0) == ZS_OK
    assert (walker.speed, runner.speed, sprinter.speed) == (1.0, 10.0, 10.0)
    hit = Host(Walker, "hit")
    assert hit.call(sprinter, amount=3) == ZS_OK and hit.block.p.return_value == 6
    assert host.guard_intact() and hit.guard_intact()


class Later(zs.Object):
    """Declared before the class its override's annotation names."""

    count: zs.Int32

    def touch(self, amount: zs.Int32) -> None:
        self.count += amount


class LaterChild(Later):
    # "NotYet" cannot be resolved when LaterChild is declared: decided at the call.
    def touch(self, amount: zs.Int32, other: "NotYet | None") -> "NotYet | None":  # type: ignore[override]
        self.count += 100
        return other


class NotYet(zs.Object):
    pass


@pytest.mark.parametrize("how", ["call_function", "call_each"])
def test_an_override_decided_at_the_call_is_refused_there(
    rt: zs.Runtime, unraisable: list[Any], how: str
) -> None:
    base, child = Later(), LaterChild()
    host = Host(Later, "touch")
    if how == "call_function":
        assert host.call(base, amount=1) == ZS_OK
        assert host.call(child, amount=1) == ZS_E_INVALID
    else:
        status, called = host.call_each(rt, Later, amount=1)
        assert status == ZS_E_INVALID and called == 2  # both tried, one refused
    assert base.count == 1 and child.count == 0  # the override never ran
    assert host.guard_intact()  # nothing written past the block
    errors = [u.exc_value for u in unraisable]
    assert len(errors) == 1 and isinstance(errors[0], TypeError)
    assert "LaterChild.touch(int32_t amount, zs_ref other) -> zs_ref" in str(errors[0])
    assert "Later.touch(int32_t amount) -> void" in str(errors[0])
    with pytest.raises(TypeError, match="cannot override Later.touch"):
        function_layout(LaterChild, "touch")


def test_a_method_replaced_after_declaration_is_checked_at_the_call(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    class Patched(Walker):
        pass

    def tick(self: Any, dt: float, extra: zs.Int64) -> zs.Int64:
        self.hits = 99
        return extra

    Patched.tick = tick  # type: ignore[method-assign]
    obj = Patched()
    host = Host(Walker, "tick")
    assert host.call(obj, dt=1.0) == ZS_E_INVALID
    assert obj.hits == 0 and host.guard_intact()
    assert "cannot override Walker.tick" in str(unraisable[0].exc_value)


def test_an_override_that_cannot_be_called_from_native_code_is_refused(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    """``*args``, a missing annotation, a property: no block at all."""

    class Loose(Walker):
        def tick(self, *args: float) -> None:  # type: ignore[override]
            self.hits = 99

    obj = Loose()
    host = Host(Walker, "tick")
    assert host.call(obj, dt=1.0) == ZS_E_INVALID
    assert obj.hits == 0 and host.guard_intact()


def test_a_narrower_object_parameter_is_the_same_block(rt: zs.Runtime) -> None:
    class Aimer(zs.Object):
        def aim(self, target: "Aimer | None") -> None:
            pass

    class Sniper(Aimer):
        def aim(self, target: "Sniper | None") -> None:  # type: ignore[override]
            pass

    assert function_layout(Sniper, "aim").size == function_layout(Aimer, "aim").size
