"""Shared fixtures: a fresh runtime per test, with a heap check at the end
(``engine_rt``: one with the sample engine installed);
``no_leaked_values`` for the test files of black values (their ``pytestmark``);
``unraisable`` for tests of errors no Python caller can see. And the suite's
options: ``--slice K/N`` (one of N fixed slices of the selection: CI runs the
slow tier's slice of the day) and ``--update-hostile-reach``
(tests/hostile/conftest.py)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import zsharp_py as zs
from helpers import assert_no_leaked_values, slice_of
from zsharp_py import sample_engine


def pytest_addoption(parser: pytest.Parser) -> None:
    """The suite's own command-line options."""
    parser.addoption(
        "--slice",
        metavar="K/N",
        help="run only slice K of N (0 <= K < N) of the selected tests, split by a hash of "
        "each test id (the same slices on every machine and run); CI runs the slow tier's "
        "slice of the day, the day of the year modulo N (.ci/run)",
    )
    parser.addoption(
        "--update-hostile-reach",
        action="store_true",
        help="rewrite tests/hostile/reach.json from what the hostile matrix's reach tests "
        "measure (run them with -k test_reach_of) instead of checking it",
    )


def _slice(config: pytest.Config) -> tuple[int, int] | None:
    spec = config.getoption("slice")
    if spec is None:
        return None
    try:
        k, n = (int(part) for part in spec.split("/"))
    except ValueError:
        raise pytest.UsageError(f"--slice {spec!r}: expected K/N, e.g. 2/4") from None
    if not 0 <= k < n:
        raise pytest.UsageError(f"--slice {spec}: K must be in 0..N-1")
    return k, n


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--slice K/N``: deselect the tests of the other slices."""
    chosen = _slice(config)
    if chosen is None:
        return
    k, n = chosen
    kept = [item for item in items if slice_of(item.nodeid, n) == k]
    if len(kept) < len(items):
        config.hook.pytest_deselected(
            items=[item for item in items if slice_of(item.nodeid, n) != k]
        )
        items[:] = kept
    if not kept:
        raise pytest.UsageError(f"--slice {k}/{n} selects no test")


@pytest.fixture
def rt() -> Iterator[zs.Runtime]:
    """A fresh runtime, current for the whole test; the heap is verified
    after the test if the test left the runtime open."""
    with zs.Runtime() as runtime:
        yield runtime
        if not runtime.closed:
            runtime.gc.verify()


@pytest.fixture
def engine_rt() -> Iterator[zs.Runtime]:
    """A fresh runtime with the sample engine installed
    (zsharp_py.sample_engine: its World, Actor, Transform, ...), current for
    the whole test; Python's cycles are collected after it."""
    with zs.Runtime() as runtime:
        sample_engine.install()
        yield runtime
    gc.collect()


@pytest.fixture
def no_leaked_values(request: pytest.FixtureRequest, rt: zs.Runtime) -> Iterator[None]:
    """After each passing test, every black value has been freed."""
    failed = request.session.testsfailed
    yield
    if not rt.closed and request.session.testsfailed == failed:
        assert_no_leaked_values(rt)


@pytest.fixture
def unraisable(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """What sys.unraisablehook received during the test (an override or a
    finaliser called from native code reports there)."""
    seen: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    yield seen
