"""Shared fixtures: a fresh runtime per test, with a heap check at the end."""
from __future__ import annotations

from typing import Iterator

import pytest

import zsharp_py as zs


@pytest.fixture
def rt() -> Iterator[zs.Runtime]:
    """A fresh runtime, current for the whole test; the heap is verified
    after the test if the test left the runtime open."""
    with zs.Runtime() as runtime:
        yield runtime
        if not runtime.closed:
            runtime.gc.verify()
