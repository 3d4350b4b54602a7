"""Property access: the cost of one property read and one write on a
``zs.Object`` subclass, next to the same field reached through raw cffi,
ctypes and plain Python objects.

A scalar property of a Python-declared class is
``property(operator.attrgetter("_p.health"), setter)``: the read is two
C-level attribute fetches (the conjugate's ``_p`` slot, then the cdata
field), with no Python frame. The setter is a generated Python function
(range check, then ``self._p.health = value``). An object-reference read
(``a.target``) is a Python getter: field fetch plus a lookup in the
runtime's conjugate mapping.

Peers are providers in ``PEERS``: functions that return the cases of one
peer, or raise ``Unavailable`` (a later stage adds nanobind and pybind11
bindings of the same struct here).
"""
from __future__ import annotations

import contextlib
import ctypes
from typing import Callable

import cffi

import zsharp_py as zs

from ._harness import (Config, MicroCase, MicroResult, Table, Unavailable, fmt_ns, fmt_ratio,
                       progress, run_micro)

NAME = "property_access"
TITLE = "Property access"

__all__ = ["NAME", "TITLE", "PEERS", "run"]

VALUE = 5  # written by every write case; fits every field type


class BenchActor(zs.Object):
    """The measured class: one Int32 field and one object reference."""

    health: zs.Int32 = 100
    target: "BenchActor | None"


class SlotsActor:
    __slots__ = ("health", "target")

    def __init__(self) -> None:
        self.health = 100
        self.target = None


class PropertyActor:
    """A Python-level property (a getter and a setter function)."""

    __slots__ = ("_health",)

    def __init__(self) -> None:
        self._health = 100

    @property
    def health(self) -> int:
        return self._health

    @health.setter
    def health(self, value: int) -> None:
        self._health = value


class CtypesStruct(ctypes.Structure):
    _fields_ = [("x", ctypes.c_int32)]


def _zsharp_cases(stack: contextlib.ExitStack) -> list[MicroCase]:
    stack.enter_context(zs.Runtime())  # current runtime while the cases run
    actor, other = BenchActor(), BenchActor()
    actor.target = other
    assert actor.health == 100 and actor.target is other
    namespace = {"a": actor, "b": other, "v": VALUE}
    return [
        MicroCase("zs.Object Int32 property", "read", "a.health", namespace, "zsharp_py",
                  note="attrgetter('_p.health')"),
        MicroCase("zs.Object reference property (existing conjugate)", "read", "a.target",
                  namespace, "zsharp_py"),
        MicroCase("zs.Object Int32 property", "write", "a.health = v", namespace, "zsharp_py"),
        MicroCase("zs.Object reference property", "write", "a.target = b", namespace,
                  "zsharp_py", note="zs_store_ref + write barrier"),
    ]


def _cffi_cases(stack: contextlib.ExitStack) -> list[MicroCase]:
    stack.enter_context(zs.Runtime())
    actor = BenchActor()
    layout_pointer = actor._p  # the cdata our attrgetter reads
    plain_ffi = cffi.FFI()
    plain = plain_ffi.new("struct {int32_t x;} *")
    plain.x = 100
    assert layout_pointer.health == 100
    namespace = {"a": actor, "p": layout_pointer, "q": plain, "v": VALUE}
    return [
        MicroCase("raw cffi: layout cdata field", "read", "p.health", namespace, "cffi",
                  baseline=True, note="the object's own struct, pointer hoisted"),
        MicroCase("raw cffi: a._p.health spelled out", "read", "a._p.health", namespace, "cffi"),
        MicroCase("raw cffi: plain FFI struct {int32_t x;}", "read", "q.x", namespace, "cffi"),
        MicroCase("raw cffi: layout cdata field", "write", "p.health = v", namespace, "cffi",
                  baseline=True),
        MicroCase("raw cffi: a._p.health spelled out", "write", "a._p.health = v", namespace,
                  "cffi"),
        MicroCase("raw cffi: plain FFI struct {int32_t x;}", "write", "q.x = v", namespace,
                  "cffi"),
    ]


def _ctypes_cases(stack: contextlib.ExitStack) -> list[MicroCase]:
    struct = CtypesStruct(100)
    namespace = {"s": struct, "v": VALUE}
    return [
        MicroCase("ctypes Structure field (c_int32)", "read", "s.x", namespace, "ctypes"),
        MicroCase("ctypes Structure field (c_int32)", "write", "s.x = v", namespace, "ctypes"),
    ]


def _python_cases(stack: contextlib.ExitStack) -> list[MicroCase]:
    slots, prop = SlotsActor(), PropertyActor()
    namespace = {"o": slots, "r": prop, "v": VALUE}
    return [
        MicroCase("Python object, __slots__ attribute", "read", "o.health", namespace,
                  "CPython"),
        MicroCase("Python object, @property (Python getter)", "read", "r.health", namespace,
                  "CPython"),
        MicroCase("Python object, __slots__ attribute", "write", "o.health = v", namespace,
                  "CPython"),
        MicroCase("Python object, @property (Python setter)", "write", "r.health = v",
                  namespace, "CPython"),
    ]


# Each provider returns the cases of one peer or raises Unavailable.
PEERS: list[tuple[str, Callable[[contextlib.ExitStack], list[MicroCase]]]] = [
    ("zsharp_py", _zsharp_cases),
    ("cffi", _cffi_cases),
    ("ctypes", _ctypes_cases),
    ("CPython", _python_cases),
]

GROUP_TITLES = {"read": "one property read", "write": "one property write"}


def run(config: Config) -> list[Table]:
    """Measure every peer's cases, interleaved, and return one table per group."""
    with contextlib.ExitStack() as stack:
        cases: list[MicroCase] = []
        missing: list[str] = []
        for peer, provider in PEERS:
            try:
                cases += provider(stack)
            except Unavailable as reason:
                missing.append(f"{peer}: not measured ({reason})")
        progress(config, f"{NAME}: {len(cases)} cases x {config.micro_rounds} rounds x "
                         f"{config.micro_number:,} operations")
        results, overhead = run_micro(cases, config.micro_number, config.micro_rounds)
    total = config.micro_number * config.micro_rounds
    tables = []
    for group, title in GROUP_TITLES.items():
        chosen = [r for r in results if r.case.group == group]
        baseline = next((r for r in chosen if r.case.baseline), None)
        table = Table(
            f"{TITLE}: {title}",
            ["case", "code", "ns/op", "p99", "max", "net ns/op", "vs raw cffi"],
            description=(
                f"Median ns per operation over {config.micro_rounds} interleaved batches of "
                f"{config.micro_number:,} ({total:,} operations per case); p99 and max are "
                "over the batches. *net* subtracts the empty loop's cost per iteration; the "
                "ratio is net / net of the raw cffi layout-cdata access."))
        for result in chosen:
            table.add(*_row(result, baseline))
        table.notes.append(f"empty timeit loop: {fmt_ns(overhead.median, 2)} ns per iteration "
                           "(included in ns/op, removed from net)")
        table.notes += [f"{r.case.label}: {r.case.note}" for r in chosen if r.case.note]
        table.notes += missing
        tables.append(table)
    return tables


def _row(result: MicroResult, baseline: MicroResult | None) -> list[str]:
    case = result.case
    ratio = fmt_ratio(result.net.median, baseline.net.median) if baseline else "n/a"
    label = f"{case.label} [{case.peer}]" if case.peer else case.label
    return [label, f"`{case.stmt}`", fmt_ns(result.gross.median), fmt_ns(result.gross.p99),
            fmt_ns(result.gross.max), fmt_ns(result.net.median), ratio]
