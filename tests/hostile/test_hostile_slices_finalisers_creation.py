"""Regressions for the open points of docs/staging-rule.md section 5"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import zsharp_py as zs

EXPIRED = zs.ExpiredConjugateError


class AuditVec(zs.Struct):
    x: zs.Int32
    y: zs.Int32


class AuditHolder(zs.Object):
    nums: zs.Array[zs.Int32]


# Specialised once at import: no test is the first to specialise one while
# holding black values in its locals.
SPECIALISED = [zs.Array[zs.Int32], zs.Array[AuditVec]]


# ---- A: arr[a:b] reads the array through an address taken before the bounds'
# __index__ ran (native/binding/containers.c, array_subscript).


class Bound:
    """A slice bound whose ``__index__`` runs ``action`` once, then gives ``value``."""

    def __init__(self, value: int, action: Callable[[], Any]) -> None:
        self.value = value
        self.action: Callable[[], Any] | None = action

    def __index__(self) -> int:
        action, self.action = self.action, None
        if action is not None:
            action()
        return self.value


# The slices of the tests, by which bound is hostile: (the value the hook's
# __index__ gives, the slice made with it). An empty slice is empty whatever
# the length: the old code, reading a freed header, returned ``[]`` for it
# on any build, instead of raising.
SLICES: dict[str, tuple[int, Callable[[Bound], slice]]] = {
    "start": (0, lambda b: slice(b, 4)),
    "stop": (4, lambda b: slice(0, b)),
    "step": (1, lambda b: slice(0, 4, b)),
    "empty_start": (4, lambda b: slice(b, 4)),
    "empty_stop": (0, lambda b: slice(0, b)),
    "empty_step": (1, lambda b: slice(4, 4, b)),
}


def _hostile_slice(case: str, action: Callable[[], Any]) -> tuple[slice, Bound]:
    value, make = SLICES[case]
    bound = Bound(value, action)
    return make(bound), bound


@pytest.mark.parametrize("case", list(SLICES))
@pytest.mark.parametrize("element", ["scalar", "struct"])
def test_a_slice_bound_disposes_the_black_array(rt: zs.Runtime, case: str, element: str) -> None:
    """The doc's reproducer: the bound disposes the array it slices."""
    if element == "scalar":
        arr: Any = zs.Array[zs.Int32](range(8))
    else:
        arr = zs.Array[AuditVec]([(i, -i) for i in range(8)])
    index, bound = _hostile_slice(case, arr.dispose)
    with pytest.raises(EXPIRED, match="disposed"):
        arr[index]
    assert bound.action is None  # the hook ran
    rt.gc.verify()


@pytest.mark.parametrize("case", list(SLICES))
def test_a_slice_bound_collects_the_views_owner(rt: zs.Runtime, case: str) -> None:
    """The bound collects the object a red view of an array points into."""
    holder = AuditHolder(nums=list(range(8)))
    view = holder.nums

    def collect() -> None:
        holder.mark_as_garbage()
        rt.collect_garbage()

    index, bound = _hostile_slice(case, collect)
    with pytest.raises(EXPIRED, match="what it points into has expired"):
        view[index]
    assert bound.action is None
    rt.gc.verify()


@pytest.mark.parametrize("case", ["start", "stop", "step"])
def test_a_slice_bound_changes_the_array(rt: zs.Runtime, case: str) -> None:
    """The bound grows (storage moves) or clears the array: the slice is of
    the array as it is after the conversion."""
    arr = zs.Array[zs.Int32](range(8))
    index, _ = _hostile_slice(case, lambda: arr.extend(range(8, 1000)))
    assert arr[index] == [0, 1, 2, 3]
    assert len(arr) == 1000
    index, _ = _hostile_slice(case, arr.clear)
    assert arr[index] == []
    arr.dispose()


# ---- B: a black value made after a finaliser run by the drain of delegate
# callables closed the runtime (native/binding/value.c, zsv_new_black;
# native/binding/names.c, zsv_callables_drain).


class Closer:
    """A delegate callable whose finaliser closes ``runtime`` (if ``closes``)."""

    def __init__(self, runtime: zs.Runtime, closes: bool = True) -> None:
        self.runtime = runtime
        self.closes = closes

    def __call__(self) -> None:
        pass

    def __del__(self) -> None:
        if self.closes:
            self.runtime.close()


def _pending_closers(runtime: zs.Runtime, count: int) -> zs.MulticastDelegate:
    """``count`` callables bound once, then unbound: only the runtime's
    registry holds them until its next drain; the last one bound closes
    the runtime when it is dropped."""
    d = zs.MulticastDelegate()
    for i in range(count):
        d.add(Closer(runtime, closes=i == count - 1))
    d.clear()
    gc.collect()
    assert not runtime.closed  # no drain has run yet
    return d


MAKERS: dict[str, Callable[[Any], Any]] = {
    "string": lambda source: zs.String("x"),
    "array": lambda source: zs.Array[zs.Int32]([1, 2]),
    "clone": lambda source: source.clone(),
}


@pytest.mark.parametrize("maker", sorted(MAKERS))
def test_b_drain_finaliser_closes_the_runtime_before_a_black_value(maker: str) -> None:
    """The doc's reproducer: the drain in zsv_new_black drops the callable,
    whose __del__ closes the runtime; no value is made in the freed heap."""
    runtime = zs.Runtime()
    with runtime:
        source = zs.String("warm")  # the String type is registered
        zs.Array[zs.Int32]([0]).dispose()
        d = _pending_closers(runtime, 1)
        with pytest.raises(EXPIRED, match="runtime has been closed"):
            MAKERS[maker](source)
        assert runtime.closed
        del d, source


@pytest.mark.parametrize("count", [1, 255, 256, 257, 300, 600])
def test_b_drain_stops_once_a_finaliser_closed_the_runtime(count: int) -> None:
    """The drain's loop takes released ids 256 at a time: a finaliser that
    closes the runtime in the first round ends it (no native call on the
    freed runtime)."""
    runtime = zs.Runtime()
    with runtime:
        d = _pending_closers(runtime, count)
        assert runtime.bound_callables() == 0
        assert runtime.closed
        del d


def test_b_flush_after_a_finaliser_closed_the_runtime() -> None:
    """``_flush_values`` (the Python path's safe point) drains the same way."""
    runtime = zs.Runtime()
    with runtime:
        d = _pending_closers(runtime, 300)
        runtime._flush_values()
        assert runtime.closed
        del d


# ---- C: the C creation path calls the heap after a metaclass hook closed the
# runtime (native/binding/classes.c, read_request, find_creator, create_now).


class ClosingMeta(type(zs.Object)):  # type: ignore[misc]
    """A metaclass whose ``__hash__`` closes ``runtime`` once armed."""

    runtime: zs.Runtime | None = None

    def __hash__(cls) -> int:
        runtime, ClosingMeta.runtime = ClosingMeta.runtime, None
        if runtime is not None:
            runtime.close()
        return type.__hash__(cls)


class AuditCreated(zs.Object, metaclass=ClosingMeta):
    health: zs.Int32
    nums: zs.Array[zs.Int32]


class AuditOther(zs.Object):
    x: zs.Int32


@pytest.fixture
def disarmed() -> Iterator[None]:
    """The metaclass's hook is disarmed after the test, whatever happened."""
    yield
    ClosingMeta.runtime = None


def _warm(runtime: zs.Runtime) -> AuditOther:
    """Creators of both classes recorded (the C path from now on); the
    class created last is not AuditCreated, so creating one looks its
    creator up by hash."""
    AuditCreated(health=1, nums=[1])
    AuditOther(x=1)
    AuditCreated(health=2, nums=[2])
    return AuditOther(x=2)


def _check_made_elsewhere_or_refused(
    runtime: zs.Runtime, call: Callable[[], Any], outer: bool
) -> None:
    """After the hook closed ``runtime``: the creation is refused, with an
    outer in it or without one (the closed runtime is still the current
    one, and a closed runtime is never replaced by the default one:
    zsharp_py/_base/context.py). Never a crash."""
    with pytest.raises(EXPIRED, match="closed" if outer else "never replaced"):
        call()
    assert runtime.closed and ClosingMeta.runtime is None


@pytest.mark.parametrize("outer", [False, True], ids=["no_outer", "outer"])
def test_c_metaclass_hash_closes_the_runtime_before_creation(disarmed: None, outer: bool) -> None:
    """The doc's reproducer: find_creator's dict lookup runs the metaclass's
    __hash__, which closes the runtime before the native creation call."""
    runtime = zs.Runtime()
    with runtime:
        other = _warm(runtime)
        kwargs: dict[str, Any] = {"outer": other} if outer else {}
        ClosingMeta.runtime = runtime
        _check_made_elsewhere_or_refused(runtime, lambda: AuditCreated(health=3, **kwargs), outer)


@pytest.mark.parametrize("outer", [False, True], ids=["no_outer", "outer"])
def test_c_metaclass_hash_closes_the_runtime_after_staging(disarmed: None, outer: bool) -> None:
    """Staging a value keyword runs Python code that creates another class's
    object and arms the hook: the lookup after staging closes the runtime."""
    runtime = zs.Runtime()

    class Nums:
        armed = False

        def __iter__(self) -> Any:
            if not self.armed:  # once: the Python path converts again
                self.armed = True
                AuditOther(x=5)  # the last class created is another one
                ClosingMeta.runtime = runtime
            return iter([1, 2, 3])

    with runtime:
        other = _warm(runtime)
        kwargs: dict[str, Any] = {"outer": other} if outer else {}
        _check_made_elsewhere_or_refused(
            runtime, lambda: AuditCreated(health=3, nums=Nums(), **kwargs), outer
        )
