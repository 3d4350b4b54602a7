"""cffi pointers of a runtime, for the code that still calls the native
library through cffi (``lib``, zsharp_py/_base/ffi.py).

``zs.Runtime`` no longer holds cffi pointers: the C core
(``zsharp_py._core``) holds its native runtime, and Python sees the address
(``Runtime._ptr``, an int). Modules, tests and tools that still pass a
``zs_runtime *`` or a ``zs_class *`` to a cffi call get one here, made from
the address; this module goes once nothing calls through cffi.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._native_lib import ffi

__all__ = ["class_pointer", "query", "runtime_pointer"]


def runtime_pointer(address: int) -> Any:
    """The cffi ``zs_runtime *`` at ``address`` (``ffi.NULL`` for 0)."""
    return ffi.cast("zs_runtime *", address)


def class_pointer(address: int) -> Any:
    """The cffi ``zs_class *`` at ``address``."""
    return ffi.cast("zs_class *", address)


def query(function: Callable[[Any, int, Any], int], pointer: Any, handle: int) -> tuple[int, bool]:
    """Ask a yes/no question of the heap through cffi (``zs_is_rooted`` and
    the like): its status and the answer."""
    flag = ffi.new("int *")
    status = function(pointer, handle, flag)
    return status, bool(flag[0])
