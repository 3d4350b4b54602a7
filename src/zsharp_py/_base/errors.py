"""Exceptions raised by zsharp_py, and the map from native status codes."""
from __future__ import annotations

from typing import NoReturn

__all__ = ["ExpiredConjugateError", "HeapCorruptionError", "raise_status", "named"]


class ExpiredConjugateError(ReferenceError):
    """A conjugate (or view) was used after its primitive may have gone away.

    The message names the class, the object and why it expired: collected
    as unreachable, marked as garbage, disposed, or its runtime closed.
    """


class HeapCorruptionError(RuntimeError):
    """``rt.gc.verify()`` found the native heap inconsistent (a bug in zsharp_py)."""


# zs_status values (see native/include/zsharp.h); kept here as plain ints so
# this module does not import the compiled library.
ZS_OK = 0
ZS_E_NOMEM = 1
ZS_E_CAPACITY = 2
ZS_E_STALE = 3
ZS_E_INVALID = 4
ZS_E_BUSY = 5
ZS_E_EXPIRY_PENDING = 6
ZS_E_DYING = 7
ZS_E_CORRUPT = 8
ZS_E_CALL_FAILED = 9

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

_STATUS_TEXT = {
    ZS_E_NOMEM: "native allocation failed",
    ZS_E_CAPACITY: "the object array is full (max_objects reached)",
    ZS_E_STALE: "the object was destroyed",
    ZS_E_INVALID: "invalid argument",
    ZS_E_BUSY: "the heap cannot be changed now (inside a destroy hook or a collection)",
    ZS_E_EXPIRY_PENDING: "dying objects still have conjugates to expire",
    ZS_E_DYING: "the object is unreachable and about to be destroyed",
    ZS_E_CORRUPT: "heap verification failed",
    ZS_E_CALL_FAILED: "the Python function called from native code raised",
}


ExpiredConjugateError.__module__ = "zsharp_py"
HeapCorruptionError.__module__ = "zsharp_py"


def raise_status(status: int, context: str) -> NoReturn:
    """Raise the Python exception for a non-zero native status."""
    exc = _STATUS_EXCEPTIONS.get(status, RuntimeError)
    raise exc(f"{context}: {_STATUS_TEXT.get(status, f'native status {status}')}")


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
