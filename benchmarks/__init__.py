"""Side-by-side benchmarks of zsharp_py and its peers.

``python -m benchmarks [--quick] [--only NAME]`` runs every family, prints
the tables and writes ``benchmarks/RESULTS.md`` (full runs of every family
only). Each family is one module exposing ``NAME``, ``TITLE`` and
``run(config) -> list[Table]``; the common timing, statistics and table code
is in ``_harness``. To add a family, add a module and list it in
``FAMILIES``; to add a peer to a family, add a provider to its ``PEERS``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["FAMILIES", "load"]

# name -> module (in the order they run and appear in RESULTS.md)
FAMILIES: dict[str, str] = {
    "bindings": "benchmarks.bindings",
    "values": "benchmarks.values",
    "host_classes": "benchmarks.host_classes",
    "gc_collect": "benchmarks.gc_collect",
    "gc_peers": "benchmarks.gc_peers",
    "gc_native": "benchmarks.gc_native",
    "expiry": "benchmarks.expiry",
    "barrier": "benchmarks.barrier",
    "frames": "benchmarks.frames",
}


def load(name: str) -> ModuleType:
    """Import one benchmark family by name."""
    return importlib.import_module(FAMILIES[name])
