"""Conjugate core: the expired-pointer sentinel that replaces a conjugate's
native pointer when it expires.

A live conjugate keeps its native pointer (a cffi cdata) in the ``_p`` slot,
so a property read is ``attrgetter("_p.field")``: two C-level attribute
fetches, no Python frame, no branch. Expiring swaps ``_p`` for an
``ExpiredPointer``, whose every attribute access raises
``ExpiredConjugateError`` with the reason. Nothing can reach freed memory
through a conjugate after that, and the check costs nothing while live.
"""
from __future__ import annotations

from typing import Any, NoReturn

from ._errors import ExpiredConjugateError

__all__ = ["ExpiredPointer", "REASON_COLLECTED", "REASON_GARBAGE", "REASON_CLOSED",
           "REASON_DISPOSED"]

REASON_COLLECTED = "it was unreachable and the garbage collector destroyed it"
REASON_GARBAGE = "it was marked as garbage and the garbage collector destroyed it"
REASON_CLOSED = "its runtime was closed"
REASON_DISPOSED = "it was disposed"


class ExpiredPointer:
    """Stands in for the native pointer of an expired conjugate."""

    __slots__ = ("what", "reason")

    def __init__(self, what: str, reason: str) -> None:
        object.__setattr__(self, "what", what)
        object.__setattr__(self, "reason", reason)

    def error(self) -> ExpiredConjugateError:
        """The exception describing this expiry."""
        return ExpiredConjugateError(f"{self.what} has expired: {self.reason}")

    def __getattr__(self, name: str) -> NoReturn:
        raise self.error()

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise self.error()

    def __repr__(self) -> str:
        return f"<expired pointer: {self.what}: {self.reason}>"
