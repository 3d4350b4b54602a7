"""The cffi module of the library, for the sample engine (compiled into it:
zsharp_py/sample_engine.py), the tests and the tools; the package itself
reaches the native library only through zsharp_py._core.

``lib``/``ffi`` come from the cffi API-mode extension built at install time
(from ``zsharp.h`` and ``native/engine/sample_engine.h``), whose functions
are libzsharp.so's, the library _core links too.
"""

from __future__ import annotations

from typing import Any

from .._native_lib import ffi, lib

__all__ = ["ffi", "lib", "api_address"]

_UINTPTR = ffi.typeof("uintptr_t")


def api_address(pointer: Any) -> int:
    """The address a pointer of the compiled FFI points to."""
    return int(ffi.cast(_UINTPTR, pointer))
