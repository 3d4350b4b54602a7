"""Conjugate core: the reasons conjugates expire for, and the sentinel that
an expired object conjugate keeps.

Conjugates keep their native address in their C part (zsharp_py._core,
native/binding/): expiring clears it (and, for an object conjugate, keeps
an ``ExpiredPointer`` naming the object and why it went), so nothing can
reach freed memory through a conjugate afterwards.

Expiring K conjugates must cost O(K) with a small constant (a collection may
expire a million), so the sentinel is a tuple built in one call and its
message is only formatted when an error is actually raised.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from .. import _core
from .errors import ExpiredConjugateError

__all__ = [
    "ExpiredPointer",
    "FIXED_CLASS",
    "REASON_COLLECTED",
    "REASON_GARBAGE",
    "REASON_CLOSED",
    "REASON_DISPOSED",
    "REASON_SCOPE",
    "REASON_STRUCTURE",
    "REASON_PARENT",
    "expired_error",
    "expired_subject",
]

# Why a conjugate expired: the C extension's interned strings (expiry in C
# allocates nothing), stated once there (native/binding/core.h, ZS_REASONS).
REASON_COLLECTED: str = _core.REASON_collected
REASON_GARBAGE: str = _core.REASON_garbage
REASON_CLOSED: str = _core.REASON_closed
REASON_DISPOSED: str = _core.REASON_disposed
REASON_SCOPE: str = _core.REASON_scope
REASON_STRUCTURE: str = _core.REASON_structure
REASON_PARENT: str = _core.REASON_parent
# Added to the error (not the repr) of an object the collector found
# unreachable: the usual cause is an object nothing native kept alive.
KEEP_ALIVE_HINT = (
    "keep an object alive with obj.add_to_root(), a reference from a rooted "
    "object, or zs.StrongObjectPtr(obj)"
)

_tuple_item = tuple.__getitem__


class ExpiredPointer(tuple):  # type: ignore[type-arg]
    """Stands in for the native pointer of an expired conjugate.

    Holds ``(kind, describe, key, reason)``: ``describe(key)`` names the
    object (called lazily, when an error is raised). Every attribute read or
    write raises ``ExpiredConjugateError``.
    """

    __slots__ = ()

    def __getattribute__(self, name: str) -> NoReturn:
        raise expired_error(self)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise expired_error(self)

    def __repr__(self) -> str:
        return f"<expired pointer: {_tuple_item(self, 3)}>"


def _refuse_class_change(conjugate: Any, cls: Any) -> NoReturn:
    raise TypeError(f"cannot change the class of a {type(conjugate).__name__} conjugate")


# ``__class__`` of the conjugate base classes: reads as usual (the getter is
# the builtin ``type``, so ``isinstance`` stays fast), assignment raises
# TypeError. Python allows ``obj.__class__ = Other`` between classes with
# the same ``__slots__``, and every object conjugate class (likewise every
# value conjugate class) has the same slots: a re-classed conjugate would
# read and write its native memory through another class's layout.
FIXED_CLASS: Any = property(type, _refuse_class_change)


def make_expired(
    kind: str, describe: Callable[[Any], str], key: Any, reason: str
) -> ExpiredPointer:
    """A sentinel for an object of ``kind``; ``describe(key)`` names it later."""
    return tuple.__new__(ExpiredPointer, (kind, describe, key, reason))


def expired_reason(pointer: ExpiredPointer) -> str:
    """Why the conjugate expired."""
    reason: str = _tuple_item(pointer, 3)
    return reason


def expired_subject(pointer: ExpiredPointer) -> str | None:
    """What ``describe`` names the expired thing (``"'Hero'"`` for an
    object), or None when naming fails."""
    describe, key = _tuple_item(pointer, 1), _tuple_item(pointer, 2)
    try:
        subject: str = describe(key)
    except Exception:  # noqa: BLE001 (naming must never hide the real error)
        return None
    return subject


def expired_error(pointer: ExpiredPointer) -> ExpiredConjugateError:
    """The exception describing an expiry (class, object, reason, and for an
    unreachable object how to keep one alive)."""
    kind, reason = _tuple_item(pointer, 0), _tuple_item(pointer, 3)
    subject = expired_subject(pointer)
    what = kind if subject is None else f"{kind} {subject}"
    hint = f" ({KEEP_ALIVE_HINT})" if reason == REASON_COLLECTED else ""
    return ExpiredConjugateError(f"{what} has expired: {reason}{hint}")
