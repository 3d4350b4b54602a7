"""The current runtime of each context, and the protocol lower layers see a
runtime through.

``with Runtime():`` and ``rt.activate()`` push a runtime in the running
context (each thread and each asyncio task has its own); with none pushed,
the default runtime is current: made on first use by the factory the
runtime layer registers (``set_default_factory``), closed at exit. A closed
runtime is never replaced silently: one closed while still current (inside
its ``with`` block or activation) stays the current one, and a closed
default runtime is not made again; making anything there raises
``ExpiredConjugateError`` saying so. This module sits in the lowest layer
so that objects, values and calls can find the current runtime without
importing the layer that defines ``Runtime``.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sized
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .. import _core
from .errors import ExpiredConjugateError

__all__ = [
    "RuntimeInternals",
    "RuntimeLike",
    "current",
    "current_runtime",
    "default_runtime",
    "entered",
    "made_current",
    "reset_current",
    "set_current",
    "set_default_factory",
]


class RuntimeLike(Protocol):
    """A ``Runtime`` as the layers below the runtime layer see it.

    Only ``_base/`` and ``_model/`` type against this protocol (the layers
    above import ``Runtime`` itself): what an ``Object`` needs of the heap
    that holds it, and the public members game code reaches through
    ``obj.runtime``. ``zsharp_py/_runtime/runtime.py`` is the one
    implementation."""

    _ptr: int
    """The native ``zs_runtime``'s address, 0 once closed."""
    _lock: threading.RLock
    """Held around native calls that must not interleave with a collection."""

    @property
    def _closed(self) -> bool:
        """Whether the runtime is closed (its life's phase, native/binding/zpy_life.c)."""

    @property
    def _closing(self) -> bool:
        """Whether close() has begun (or the runtime is closed)."""

    gc: Any
    """The runtime's ``GarbageCollector`` (zsharp_py/_runtime/collector.py)."""

    @property
    def closed(self) -> bool:
        """Whether ``close()`` has run."""

    def close(self) -> None:
        """Free the native heap; every conjugate expires."""

    def collect_garbage(self) -> Any:
        """A full collection; returns its ``GcStats``."""

    def live_objects(self) -> int:
        """Objects alive on the native heap."""

    def _conjugate_of(self, handle: int) -> Any:
        """The conjugate of a live object (made if needed), or None."""

    def _new_object(
        self, cls: type, layout: Any, name: str | None, outer: Any, properties: dict[str, Any]
    ) -> Any:
        """Allocate an object of ``cls`` and its conjugate in one native call."""

    def _name_text(self, index: int, number: int) -> str:
        """The text of an interned name."""

    def _release_strong(self, handle: int) -> None:
        """Drop a strong reference taken while Python code ran."""

    def _create_cluster(self, root: Any) -> int:
        """Cluster ``root`` with what it references; the cluster's size."""

    def _cluster_info(self, handle: int) -> Any:
        """The cluster of an object (``ClusterInfo``), or None."""

    # The heap calls of zsharp_py._core.RuntimeCore (native/binding/reflection.c)
    # the lower layers make: each raises ExpiredConjugateError once the
    # runtime is closing, and the exception of a refused call (``what``
    # names it) as ``check`` does.
    def _heap_add_to_root(self, handle: int, what: str, /) -> None:
        """Add an object to the root set."""

    def _heap_remove_from_root(self, handle: int, what: str, /) -> None:
        """Remove an object from the root set."""

    def _heap_mark_as_garbage(self, handle: int, what: str, /) -> None:
        """Destroy an object at the next collection."""

    def _heap_dissolve_cluster(self, handle: int, what: str, /) -> None:
        """Dissolve the cluster an object belongs to."""

    def _heap_add_strong_ref(self, handle: int, what: str, /) -> None:
        """Take a strong reference to an object (``_release_strong`` drops it)."""

    def _heap_object_writable(self, owner: int, what: str, /) -> None:
        """Refuse a write into a stale or dying owner, as the heap would."""

    def _heap_abandon(self, handle: int, /) -> None:
        """Unroot an object whose construction failed and mark it as
        garbage; statuses ignored, nothing once the runtime is closing."""

    def _heap_is_rooted(self, handle: int, /) -> bool:
        """Whether an object is in the root set."""

    def _heap_is_garbage(self, handle: int, /) -> bool:
        """Whether an object is marked as garbage."""


class RuntimeInternals(RuntimeLike, Protocol):
    """A ``Runtime`` as the runtime layer's own helpers see it: exactly what
    ``_runtime/collector.py`` (``rt.gc``), ``_runtime/chains.py``
    (``rt.reference_chains``) and ``_runtime/ticks.py`` (``rt.ticks``) use
    of it, so that none imports ``_runtime/runtime.py``, which imports them
    (no import circle; the contract in pyproject.toml keeps it so).
    ``Runtime`` is the one implementation; the ``_gc_*``, ``_collect_full``,
    ``_ticks_*`` and ``_heap_*`` methods are ``zsharp_py._core.RuntimeCore``'s,
    the collection protocol itself among them (native/binding/zpy_collection.c)
    and the tick manager's (native/binding/zpy_ticks.c)."""

    @property
    def _deferred_releases(self) -> Sized:
        """The strong references finalisers queued (``_release_deferred``)."""

    def _live_address(self) -> int:
        """The native runtime's address; ``ExpiredConjugateError`` once closed."""

    # The runtime's life (native/binding/zpy_life.c, docs/lifecycle.md):
    # RuntimeCore's, the one state machine every side asks.
    def _life_enter(self, act: int, what: str, /) -> bool:
        """Begin ``act`` (an ``_core.LIFE_`` constant) if the runtime's life
        allows it now; False for a close of a closed runtime; else the
        refusal (``RuntimeError``, ``ExpiredConjugateError``) raised."""

    def _life_leave(self, act: int, /) -> None:
        """End ``act``, which ``_life_enter`` began."""

    def _refuse_reentry(self, what: str) -> None:
        """Refuse ``what`` where a collection may not run now (re-entered
        inside a collection, a ``close()`` or an adoption on this thread)."""

    def _collection(self, what: str) -> AbstractContextManager[None]:
        """The lock, and a collection in the runtime's life, for a block."""

    def _release_deferred(self) -> None:
        """Release the strong references finalisers queued (the collection
        protocol flushes the rest of a safe point itself)."""

    def _flush_deferred(self) -> None:
        """A safe point: the queued releases and frees, run."""

    # The collection protocol (native/binding/zpy_collection.c): called
    # with the lock held and re-entry refused (_collection).
    def _collect_full(self, layout: tuple[type, tuple[str, ...]], /) -> Any:
        """A full collection; its ``GcStats`` (built to ``layout``)."""

    def _gc_start_incremental(self) -> None:
        """Begin an incremental cycle."""

    def _gc_step(self, budget_ns: int, max_objects: int, /) -> bool:
        """One bounded step of the pending cycle; whether it is complete."""

    def _gc_expire_pending(self) -> int:
        """Expire every gathered object's conjugate; how many were taken."""

    def _gc_stats(self, layout: tuple[type, tuple[str, ...]], /) -> Any:
        """The last cycle's ``GcStats`` (built to ``layout``)."""

    _expiry_faults: int
    """Test-only: the next this many conjugate expiries fail as out of
    memory (``GarbageCollector._debug_fail_expiries``)."""

    # The tick manager (native/binding/zpy_ticks.c): statuses and figures.
    def _ticks_register(
        self, obj: Any, function: bytes, group: int, interval: float, flags: int, /
    ) -> tuple[int, int]:
        """Register a tick function: the status and its id."""

    def _ticks_unregister(self, tick: int, /) -> int:
        """Unregister a tick function; the status."""

    def _ticks_unregister_object(self, obj: Any, /) -> int:
        """Unregister every tick function of an object; how many."""

    def _ticks_set_enabled(self, tick: int, enabled: bool, /) -> int:
        """Enable or disable a tick function; the status."""

    def _ticks_set_interval(self, tick: int, seconds: float, /) -> int:
        """Set a tick function's interval; the status."""

    def _ticks_set_group(self, tick: int, group: int, /) -> int:
        """Move a tick function to another group; the status."""

    def _ticks_prerequisite(self, tick: int, prerequisite: int, add: bool, /) -> int:
        """Add or remove a prerequisite; the status."""

    def _ticks_info(self, tick: int, /) -> tuple[Any, ...]:
        """(status, object, group, actual group, interval, elapsed, calls,
        enabled, prerequisites)."""

    def _ticks_count(self) -> int:
        """Tick functions registered."""

    def _ticks_frame(self, dt: float, /) -> tuple[Any, ...]:
        """One frame: (status, frame, time, ticked, failed, waiting,
        disabled, skipped, unregistered, first failure, tick seconds)."""

    # Heap calls returning statuses and figures (native/binding/zpy_heap_calls.c).
    def _heap_gc_phase(self) -> int:
        """The collector's phase (``_core.GC_*``)."""

    def _heap_cluster_count(self) -> int:
        """Live clusters."""

    def _heap_verify(self) -> str | None:
        """None, or what the heap check found wrong."""

    def _heap_debug_set(self, what: int, value: int, /) -> int:
        """Set a ``ZS_DEBUG_*`` switch; the status."""

    def _heap_reference_chains(
        self, handle: int, max_chains: int, /
    ) -> tuple[int, list[tuple[int, int, int]]]:
        """Why an object is alive: the status and (holder, member, root) links."""

    def _black_of(self, handle: int, /) -> Any:
        """The black value conjugate of a native value handle, or None."""


current: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "zsharp_current_runtime", default=None
)
"""The runtime of the innermost ``with`` block or activation (None: the default)."""


def set_current(runtime: Any) -> contextvars.Token[Any]:
    """Make ``runtime`` the value of ``current`` in this context; the token
    undoes it. Every change of ``current`` goes through here or
    ``reset_current``: zsharp_py._core remembers its value per
    thread context (native/binding/core.h, ``zs_current_memo``) and forgets
    it when told."""
    return _core.set_context_var(current, runtime)


def reset_current(token: contextvars.Token[Any]) -> None:
    """Undo the change ``token`` made to ``current``, told to zsharp_py._core
    as ``set_current`` is."""
    _core.reset_context_var(current, token)


entered: contextvars.ContextVar[tuple[tuple[Any, contextvars.Token[Any]], ...]] = (
    contextvars.ContextVar("zsharp_entered_runtimes", default=())
)
"""The ``with`` blocks open in this context, innermost last: (runtime, token)."""

default_runtime: list[Any] = []
"""The lazily created default runtime (at most one live). A list, so that
the C fast path (zsharp_py._core) reads the same object this module writes."""

_factory: list[Callable[[], Any]] = []
_default_lock = threading.Lock()


def set_default_factory(factory: Callable[[], Any]) -> None:
    """Register what makes the default runtime (``Runtime`` itself, from the
    runtime layer's module, once at import)."""
    _factory[:] = [factory]


def current_runtime() -> Any:
    """The runtime of the innermost ``with Runtime()`` block or activation,
    else the default runtime (created on first use, closed at interpreter
    exit).

    ``ExpiredConjugateError`` when that runtime is closed: the innermost
    block's runtime was closed inside it, or the default runtime was
    closed. Neither is replaced by a new runtime, whose objects the program
    would not know were apart from the rest."""
    runtime = current.get()
    if runtime is not None:
        if runtime._closed:
            raise ExpiredConjugateError(
                f"the current runtime (made at {getattr(runtime, '_origin', '?')}) has been "
                "closed, inside its `with` block or activation, and a closed runtime is never "
                "replaced: leave the block, or make a new runtime (with zs.Runtime() as rt: ...)"
            )
        return runtime
    with _default_lock:
        if default_runtime and default_runtime[0]._closed:
            raise ExpiredConjugateError(
                "the default runtime has been closed, and it is not made again: make a runtime "
                "(with zs.Runtime() as rt: ...) for what comes next"
            )
        if not default_runtime:
            if not _factory:
                raise RuntimeError(
                    "no runtime: import zsharp_py (its runtime layer "
                    "registers the default runtime's factory)"
                )
            default_runtime[:] = [_factory[0]()]
        return default_runtime[0]


class made_current:
    """``with made_current(runtime):`` makes ``runtime`` current for the
    block without closing it at the end: a value made for an object is made
    in that object's runtime, whichever runtime is current."""

    __slots__ = ("runtime", "token")

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime

    def __enter__(self) -> None:
        self.token = set_current(self.runtime)

    def __exit__(self, *exc: object) -> None:
        reset_current(self.token)
