"""A runtime's life: the one state machine (native/binding/zpy_life.c) and
its table in docs/lifecycle.md, read here and checked cell by cell.

Each state is reached the way real code reaches it, and the code asking
runs where real code runs: a keyword's hook inside a constructor (adopting),
a finaliser run when a collection or a close releases an object's Python
state (collecting, closing), after close() (closed). The "expiring" column
is reached by a collection a host starts natively: the cells are checked
in ``test_inside_the_expiry`` with the expiry handler's own Python code.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import zsharp_py as zs
from hostile_support import GcTrigger
from zsharp_py import _core, sample_engine
from zsharp_py._base.ffi import ffi, lib

TABLE = Path(__file__).resolve().parents[2] / "docs" / "lifecycle.md"


class Finaliser:
    """Runs ``action`` when released (a finaliser, as Python code run by
    the collector or by close() would)."""

    def __init__(self, action: Callable[[], None]) -> None:
        self.action = action

    def __del__(self) -> None:
        self.action()


class Carrier(zs.Object):
    """An object with Python state: its conjugate lives exactly as long as
    the object, and the state is released when it expires."""

    hp: zs.Int32
    floats: zs.Array[zs.Float32]
    probe: Any = zs.state(default=None)


class Hook:
    """An iterable whose second iteration (the constructor's write, inside
    the adoption: the first is its check) runs ``action``."""

    def __init__(self, action: Callable[[], None]) -> None:
        self.action = action
        self.calls = 0

    def __iter__(self) -> Iterator[float]:
        self.calls += 1
        if self.calls == 2:
            self.action()
        return iter([1.0])


def read_table() -> dict[tuple[str, str], str]:
    """(row, column) -> the first word of the cell, from docs/lifecycle.md."""
    lines = [line for line in TABLE.read_text().splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    columns = header[1:]
    cells: dict[tuple[str, str], str] = {}
    for line in lines[2:]:
        row = [cell.strip() for cell in line.strip("|").split("|")]
        for column, cell in zip(columns, row[1:], strict=True):
            cells[(row[0], column)] = re.split(r"[ (]", cell)[0]
    return cells


ROWS = {
    "collect": "a collection (`rt.collect_garbage()`, `rt.gc.step()`)",
    "close": "`rt.close()`",
    "create": "creating an object",
    "host": "calling a host function",
    "frame": "a frame of the tick manager (`rt.ticks.frame()`)",
}


def attempt(runtime: zs.Runtime, row: str) -> str:
    """Ask for ``row`` on ``runtime``: "runs", or the exception's class name."""
    try:
        if row == "collect":
            runtime.collect_garbage()
            runtime.gc.step(max_objects=8)
        elif row == "close":
            runtime.close()
        elif row == "create":
            Carrier(hp=1)
        elif row == "frame":
            runtime.ticks.frame(0.1)
        else:
            zs.native_class("World", runtime=runtime).version()
    except (RuntimeError, zs.ExpiredConjugateError) as error:
        return type(error).__name__
    return "runs"


def in_state(column: str, row: str) -> tuple[str, str]:
    """In a fresh runtime with the sample engine, reach ``column`` and ask
    for ``row`` there: (the outcome, the lifecycle the asker saw)."""
    seen: list[tuple[str, str]] = []
    runtime = zs.Runtime()
    sample_engine.install(runtime)
    zs.native_class("World", runtime=runtime)  # bound while open

    def ask() -> None:
        seen.append((attempt(runtime, row), runtime.lifecycle))

    with runtime.activate():
        if column == "open":
            ask()
        elif column == "adopting":
            Carrier(hp=1, floats=Hook(ask))
        elif column == "collecting":
            Carrier(hp=1).probe = Finaliser(ask)  # dropped: the collection releases it
            runtime.collect_garbage()
        elif column == "closing":
            carrier = Carrier(hp=1)
            carrier.add_to_root()
            carrier.probe = Finaliser(ask)
            del carrier
            runtime.close()
        else:
            runtime.close()
            ask()
    runtime.close()
    assert len(seen) == 1, (column, row, seen)  # the asker ran exactly once
    return seen[0]


CELLS = [
    (row, column)
    for row in ROWS
    for column in ("open", "adopting", "collecting", "closing", "closed")
    if read_table()[(ROWS[row], column)] != "—"
]


@pytest.mark.parametrize(("row", "column"), CELLS)
def test_every_cell_of_the_table(row: str, column: str) -> None:
    expected = read_table()[(ROWS[row], column)]
    outcome, lifecycle = in_state(column, row)
    assert outcome == expected
    # What the asker saw: the state it was in (after a close that ran, closed).
    if (row == "close" and outcome == "runs") or column == "closed":
        assert lifecycle == "closed"
    elif column == "adopting":
        assert lifecycle == "open"  # an adoption is an activity of an open runtime
    else:
        assert lifecycle == column


def test_the_table_names_every_row_and_state() -> None:
    cells = read_table()
    columns = {"open", "adopting", "collecting", "expiring", "closing", "closed"}
    assert {column for _, column in cells} == columns
    assert {row for row, _ in cells} == set(ROWS.values())


def test_inside_the_expiry() -> None:
    """The "expiring" column: a collection the host starts natively expires
    conjugates through the handler, which runs no Python code of its own
    (states and views are released after it): only Python's cycle
    collector, on an allocation of the handler, can run code inside it. A
    ``gc.callbacks`` hook asks there. CPython 3.12+ runs the cycle collector
    only between bytecodes, never inside a C loop: there the state cannot be
    reached from Python at all, which is checked instead."""
    table = read_table()
    outcomes: dict[str, tuple[str, str]] = {}
    for row in ("collect", "host", "frame", "create", "close"):
        runtime = zs.Runtime()
        sample_engine.install(runtime)
        World = zs.native_class("World", runtime=runtime)
        with runtime.activate():
            world = World()
            world.add_to_root()
            doomed = [Carrier(hp=i) for i in range(200)]
            del doomed

            def ask(row: str = row, runtime: zs.Runtime = runtime) -> None:
                if row not in outcomes and runtime.lifecycle == "expiring":
                    outcomes[row] = (attempt(runtime, row), runtime.lifecycle)

            with GcTrigger(ask):
                world.collect()  # a host function that collects natively
        runtime.close()
    if sys.version_info >= (3, 12):
        assert outcomes == {}
        return
    assert set(outcomes) == {"collect", "host", "frame", "create", "close"}
    for row, (outcome, lifecycle) in outcomes.items():
        assert outcome == table[(ROWS[row], "expiring")], row
        assert lifecycle == ("closed" if row == "close" else "expiring"), row


def test_leaving_what_was_not_begun_is_refused(rt: zs.Runtime) -> None:
    for act in (_core.LIFE_COLLECT, _core.LIFE_ADOPT, _core.LIFE_CLOSE):
        with pytest.raises(RuntimeError, match="is not running"):
            rt._life_leave(act)
    with pytest.raises(ValueError, match="not an act Python begins"):
        rt._life_enter(99, "nothing")
    assert rt.lifecycle == "open" and rt._adopting == 0 and not rt._collecting


def test_the_phase_moves_one_way() -> None:
    runtime = zs.Runtime()
    assert runtime.lifecycle == "open" and not runtime._closing
    assert runtime._life_enter(_core.LIFE_CLOSE, "close()")
    runtime._life_leave(_core.LIFE_CLOSE)  # a close that stopped half-way
    assert runtime.lifecycle == "closing" and runtime._closing and not runtime.closed
    with pytest.raises(zs.ExpiredConjugateError):
        runtime._life_enter(_core.LIFE_ADOPT, "adopting")
    runtime.close()  # finishes it
    assert runtime.lifecycle == "closed" and runtime.closed
    assert runtime._life_enter(_core.LIFE_CLOSE, "close()") is False  # nothing to do
    with pytest.raises(zs.ExpiredConjugateError):
        runtime.collect_garbage()


def test_a_runtime_not_opened_yet_is_closed_to_every_act() -> None:
    """A runtime made but not opened (``attach`` makes one with ``__new__``
    before it opens it) has no heap: close() and the host's free have
    nothing to do, and nothing that would touch the heap may begin."""
    unopened = zs.Runtime.__new__(zs.Runtime)
    assert unopened.lifecycle == "closed" and unopened._closed
    assert unopened._life_enter(_core.LIFE_CLOSE, "close()") is False
    assert unopened._life_enter(_core.LIFE_HOST_FREE, "the host's free") is False
    for act in (_core.LIFE_COLLECT, _core.LIFE_ADOPT):
        with pytest.raises(zs.ExpiredConjugateError, match="the runtime has been closed"):
            unopened._life_enter(act, "asked")
    with pytest.raises(zs.ExpiredConjugateError):
        unopened._life_check(_core.LIFE_COLLECT, "collect_garbage()")
    assert unopened.lifecycle == "closed"  # nothing began


class NativeFree:
    """A cleanup of the native runtime (``zs_runtime_add_cleanup``, as a
    host registers one): counts the runtime's free and runs ``action``
    inside it."""

    def __init__(self, runtime: zs.Runtime, action: Callable[[], None] = lambda: None) -> None:
        self.count = 0
        self.action = action
        self.callback = ffi.callback("void(void *)", self._run)  # kept as long as this
        native = ffi.cast("zs_runtime *", runtime.native_address)
        assert lib.zs_runtime_add_cleanup(native, self.callback, ffi.NULL) == lib.ZS_OK

    def _run(self, user: Any) -> None:
        self.count += 1
        self.action()


def test_a_close_from_inside_the_native_free_is_refused() -> None:
    """close() frees the native runtime after it detached it: Python code
    the free runs (a host's cleanup calling back) finds the runtime closed,
    yet a close() there is refused as inside any close(), not taken for
    done while the outer one still frees."""
    runtime = zs.Runtime()
    seen: list[str] = []

    def close_again() -> None:
        seen.append(runtime.lifecycle)
        with pytest.raises(RuntimeError, match="inside a collection or close"):
            runtime.close()
        seen.append("refused")

    free = NativeFree(runtime, close_again)
    runtime.close()
    assert seen == ["closed", "refused"] and free.count == 1
    assert runtime.closed
    runtime.close()  # afterwards: nothing to do


class Closer(zs.Object):
    """A tick function that runs ``ACTION`` (closing its runtime)."""

    def tick(self, dt: float) -> None:
        CLOSER_ACTIONS.pop()(self)


CLOSER_ACTIONS: list[Callable[[Closer], None]] = []


def test_the_native_runtime_is_freed_once_and_only_when_detached() -> None:
    """Runtime._core_free_native (close()'s last step) refuses a runtime
    still attached, and a second free while the first waits for the host
    calls running on it (a tick function closed the runtime inside
    ``rt.ticks.frame()``): neither free is made; the waiting one is made
    once, when the frame returns."""
    runtime = zs.Runtime()
    free = NativeFree(runtime)
    made: list[str] = []
    with pytest.raises(RuntimeError, match="detach first, and free a runtime once"):
        runtime._core_free_native(lambda: made.append("attached"))
    assert made == [] and runtime.lifecycle == "open"

    def close_and_free_again(me: Closer) -> None:
        runtime.close()  # detached; the native free waits for the frame
        assert runtime.closed and free.count == 0
        with pytest.raises(RuntimeError, match="free a runtime once"):
            runtime._core_free_native(lambda: made.append("twice"))

    with runtime.activate():
        closer = Closer()
        closer.add_to_root()
        runtime.ticks.register(closer)
        CLOSER_ACTIONS.append(close_and_free_again)
        runtime.ticks.frame(0.1)
    assert CLOSER_ACTIONS == []  # it ran
    assert made == [] and free.count == 1
