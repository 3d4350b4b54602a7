"""zsharp_py.engines: the classes, structs and enums of native hosts as
modules, importable before any runtime exists (``from
zsharp_py.engines.sample import Actor, World``).

A host's module reads the host's descriptions once, from a private runtime
in which it installs the host (``host_types``), and makes one Python type
per description. Those types then serve every runtime in which the host is
installed (the pytest plugin's ``zs_runtime`` included): each runtime binds
them to its own native classes on first use, after checking that it
describes them the same way. docs/writing-game-scripts.md is the guide.

- ``zsharp_py.engines.sample``: the sample engine (``zsharp_py.sample_engine``),
  with the type stubs ``sample.pyi`` beside it for mypy and pyright (written
  by ``python -m zsharp_py stubs --engine sample``, zsharp_py/stubs.py).

``host_types(install, ...)`` makes such a module's types for any host.
"""

from __future__ import annotations

from .._interop.reflection import host_types

__all__ = ["host_types"]
