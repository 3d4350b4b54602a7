"""Exceptions raised by zsharp_py, and the Python exception of each native
status (its text is the C library's own, zs_status_message)."""

from __future__ import annotations

from typing import NoReturn

from .._native_lib import ffi, lib

__all__ = [
    "ExpiredConjugateError",
    "HeapCorruptionError",
    "named",
    "raise_status",
    "status_message",
]


class ExpiredConjugateError(ReferenceError):
    """A conjugate (or view) was used after its primitive may have gone away.

    The message names the class, the object and why it expired: collected
    as unreachable, marked as garbage, disposed, or its runtime closed.
    """


class HeapCorruptionError(RuntimeError):
    """``rt.gc.verify()`` found the native heap inconsistent (a bug in zsharp_py)."""


# zs_status values, read from the C API (native/include/zsharp.h) by the
# cffi module: the header is the one place they are written.
ZS_OK: int = lib.ZS_OK
ZS_E_NOMEM: int = lib.ZS_E_NOMEM
ZS_E_CAPACITY: int = lib.ZS_E_CAPACITY
ZS_E_STALE: int = lib.ZS_E_STALE
ZS_E_INVALID: int = lib.ZS_E_INVALID
ZS_E_BUSY: int = lib.ZS_E_BUSY
ZS_E_EXPIRY_PENDING: int = lib.ZS_E_EXPIRY_PENDING
ZS_E_DYING: int = lib.ZS_E_DYING
ZS_E_CORRUPT: int = lib.ZS_E_CORRUPT
ZS_E_CALL_FAILED: int = lib.ZS_E_CALL_FAILED

# The Python exception of each status; its text comes from zs_status_message
# (native/src/runtime.c), the only table of status texts.
_STATUS_EXCEPTIONS: dict[int, type[BaseException]] = {
    ZS_E_NOMEM: MemoryError,
    ZS_E_CAPACITY: MemoryError,
    ZS_E_STALE: ExpiredConjugateError,
    ZS_E_INVALID: ValueError,
    ZS_E_BUSY: RuntimeError,
    ZS_E_EXPIRY_PENDING: RuntimeError,
    ZS_E_DYING: ExpiredConjugateError,
    ZS_E_CORRUPT: HeapCorruptionError,
    ZS_E_CALL_FAILED: RuntimeError,
}


def status_message(status: int) -> str:
    """The C library's text for a status (``zs_status_message``)."""
    text: bytes = ffi.string(lib.zs_status_message(status))
    return text.decode("utf-8")


ExpiredConjugateError.__module__ = "zsharp_py"
HeapCorruptionError.__module__ = "zsharp_py"


def raise_status(status: int, context: str) -> NoReturn:
    """Raise the Python exception for a non-zero native status."""
    exc = _STATUS_EXCEPTIONS.get(status, RuntimeError)
    raise exc(f"{context}: {status_message(status)}")


def named(what: str, error: BaseException) -> BaseException:
    """``error`` with ``what`` (the property or element) before its message,
    for TypeError, ValueError and OverflowError themselves; any other
    exception (a subclass may need other constructor arguments, a hook's own
    exception must reach the caller unchanged) is returned as it is. Use as
    ``raise named(what, error) from None``."""
    if type(error) in (TypeError, ValueError, OverflowError):
        message = str(error)
        if not message.startswith(what):
            return type(error)(f"{what}: {message}")
    return error
