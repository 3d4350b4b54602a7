"""The cffi module of the library, for the modules that still call it
through cffi (zsharp_py._core is the way in for the others).

``lib``/``ffi`` come from the cffi API-mode extension built at install time
(from ``zsharp.h``). The layouts of classes declared from Python are
computed from its types' sizes (zsharp_py/_base/layout.py). The checks of
native statuses (``check``, ``refused``, ``check_writable``) live in
zsharp_py/_base/errors.py and are re-exported here for those modules.
"""

from __future__ import annotations

from typing import Any

from .._native_lib import ffi, lib
from .errors import check, check_writable, refused

__all__ = [
    "ffi",
    "lib",
    "api_address",
    "check",
    "refused",
    "check_writable",
    "class_pointer",
]

_UINTPTR = ffi.typeof("uintptr_t")
_CLASS_POINTER = ffi.typeof("zs_class *")


def api_address(pointer: Any) -> int:
    """The address a pointer of the compiled FFI points to."""
    return int(ffi.cast(_UINTPTR, pointer))


def class_pointer(address: int) -> Any:
    """The ``zs_class *`` at ``address``: the form the runtime layer keeps
    native classes in (``Runtime._record_class``, ``_native_classes``) while
    it still calls the library through cffi; the reflection layer, which
    reads hosts' classes through ``zsharp_py._core``, knows them by address."""
    return ffi.cast(_CLASS_POINTER, address)
