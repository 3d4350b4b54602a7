"""Exceptions raised by zsharp_py, and the Python exception of each native
status (its text is the C library's own, zs_status_message): ``check`` and
``refused`` raise it for a status of a call on a runtime's heap."""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from .. import _core

if TYPE_CHECKING:
    from .context import RuntimeLike

__all__ = [
    "CallbackError",
    "ExpiredConjugateError",
    "HeapCorruptionError",
    "check",
    "named",
    "raise_status",
    "refused",
    "status_message",
]


class ExpiredConjugateError(ReferenceError):
    """A conjugate (or view) was used after its primitive may have gone away.

    The message names the class, the object and why it expired: collected
    as unreachable, marked as garbage, disposed, or its runtime closed.
    """


#: A call from native code into Python raised while Python was calling the
#: host (a native function, ``rt.ticks.frame``): raised when the host
#: returns, naming its function, the original exception as ``__cause__``
#: (docs/errors.md, "Debugging: errors in scripts"). Made by
#: native/binding/zpy_errors.c.
CallbackError: type[RuntimeError] = _core.CallbackError


class HeapCorruptionError(RuntimeError):
    """``rt.gc.verify()`` found the native heap inconsistent (a bug in zsharp_py)."""


# zs_status values, read from the C API (native/include/zsharp.h) by
# zsharp_py._core: the header is the one place they are written.
ZS_OK: int = _core.OK
ZS_E_NOMEM: int = _core.E_NOMEM
ZS_E_CAPACITY: int = _core.E_CAPACITY
ZS_E_STALE: int = _core.E_STALE
ZS_E_INVALID: int = _core.E_INVALID
ZS_E_BUSY: int = _core.E_BUSY
ZS_E_EXPIRY_PENDING: int = _core.E_EXPIRY_PENDING
ZS_E_DYING: int = _core.E_DYING
ZS_E_CORRUPT: int = _core.E_CORRUPT
ZS_E_CALL_FAILED: int = _core.E_CALL_FAILED

# The Python exception of each status; its text comes from zs_status_message
# (native/src/api.c), the only table of status texts.
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
    return _core.status_message(status)


ExpiredConjugateError.__module__ = "zsharp_py"
HeapCorruptionError.__module__ = "zsharp_py"


def raise_status(status: int, context: str) -> NoReturn:
    """Raise the Python exception for a non-zero native status."""
    exc = _STATUS_EXCEPTIONS.get(status, RuntimeError)
    raise exc(f"{context}: {status_message(status)}")


def check(status: int, context: str, runtime: RuntimeLike | None) -> None:
    """Raise for a non-zero native status of a call made on ``runtime``'s
    heap (None only for a call on no runtime: creating one). See ``refused``."""
    if status:
        refused(status, context, runtime)


def refused(status: int, context: str, runtime: RuntimeLike | None) -> NoReturn:
    """Raise the exception for a native status (non-zero) of a call made on
    ``runtime``'s heap.

    The one place that handles ``ZS_E_DYING``: the heap refused the call
    because an object it names is dying (gathered by an incremental cycle
    whose budgeted expiry has not reached its conjugate yet). The runtime
    expires every pending conjugate first, so the ``ExpiredConjugateError``
    reaches the caller with that object's ``is_expired`` already True.
    zsharp_py._core raises every status of its own calls through here.
    """
    if status == ZS_E_DYING and runtime is not None:
        runtime.gc._expire_refused()
    raise_status(status, context)


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
