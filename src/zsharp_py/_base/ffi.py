"""The compiled library and the checks of its calls' statuses.

``lib``/``ffi`` come from the cffi API-mode extension built at install time
(from ``zsharp.h``). The layouts of classes declared from Python are
computed from its types' sizes (zsharp_py/_base/layout.py).
"""

from __future__ import annotations

from typing import Any, NoReturn

from .._native_lib import ffi, lib
from .context import RuntimeLike
from .errors import ZS_E_DYING, raise_status

__all__ = [
    "ffi",
    "lib",
    "check",
    "refused",
    "check_writable",
]

_UINTPTR = ffi.typeof("uintptr_t")


def api_address(pointer: Any) -> int:
    """The address a pointer of the compiled FFI points to."""
    return int(ffi.cast(_UINTPTR, pointer))


def check(status: int, context: str, runtime: RuntimeLike | None) -> None:
    """Raise for a non-zero native status of a call made on ``runtime``'s
    heap (None only for a call on no runtime: creating one). See ``refused``."""
    if status:
        refused(status, context, runtime)


def check_writable(runtime: RuntimeLike, owner: int, context: str) -> None:
    """Before a write that Python makes itself into ``owner``'s memory
    (plain data: a name, a class id, a persistent id; a struct member by
    member): raise as the heap would refuse a native write into a stale or
    dying owner (``ZS_E_DYING``: see ``refused``). Nothing to check for
    ``owner`` 0 (black values). Caller holds the runtime's lock, without
    which no collection step runs, so the answer holds until the write."""
    if owner:
        check(lib.zs_object_writable(runtime._live_ptr(), owner), context, runtime)


def refused(status: int, context: str, runtime: RuntimeLike | None) -> NoReturn:
    """Raise the exception for a native status (non-zero) of a call made on
    ``runtime``'s heap.

    The one place that handles ``ZS_E_DYING``: the heap refused the call
    because an object it names is dying (gathered by an incremental cycle
    whose budgeted expiry has not reached its conjugate yet). The runtime
    expires every pending conjugate first, so the ``ExpiredConjugateError``
    reaches the caller with that object's ``is_expired`` already True.
    """
    if status == ZS_E_DYING and runtime is not None:
        runtime.gc._expire_refused()
    raise_status(status, context)
