"""Shared fixtures: a fresh runtime per test, with a heap check at the end;
``no_leaked_values`` for the test files of black values (their ``pytestmark``);
``unraisable`` for tests of errors no Python caller can see. And the suite's
options: ``--update-hostile-reach`` (tests/hostile/conftest.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

import zsharp_py as zs
from helpers import assert_no_leaked_values


def pytest_addoption(parser: pytest.Parser) -> None:
    """The suite's own command-line options."""
    parser.addoption(
        "--update-hostile-reach",
        action="store_true",
        help="rewrite tests/hostile/reach.json from what the hostile matrix's reach tests "
        "measure (run them with -k test_reach_of) instead of checking it",
    )


@pytest.fixture
def rt() -> Iterator[zs.Runtime]:
    """A fresh runtime, current for the whole test; the heap is verified
    after the test if the test left the runtime open."""
    with zs.Runtime() as runtime:
        yield runtime
        if not runtime.closed:
            runtime.gc.verify()


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
