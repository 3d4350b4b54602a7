"""The current runtime of each context, and the protocol lower layers see a
runtime through.

``with Runtime():`` and ``rt.activate()`` push a runtime in the running
context (each thread and each asyncio task has its own); with none pushed,
the default runtime is current: made on first use by the factory the
runtime layer registers (``set_default_factory``), closed at exit. This
module sits in the lowest layer so that objects, values and calls can find
the current runtime without importing the layer that defines ``Runtime``.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any, Protocol

__all__ = [
    "RuntimeLike",
    "current",
    "current_runtime",
    "default_runtime",
    "entered",
    "made_current",
    "set_default_factory",
]


class RuntimeLike(Protocol):
    """What the layers below the runtime use of a ``Runtime``: its native
    heap, its lock, its conjugate table and its collector. The runtime
    layer's ``Runtime`` is the one implementation; typing against this
    protocol keeps the model, types and interop layers from importing it."""

    _ptr: Any
    _lock: Any
    _closed: bool
    _closing: bool
    _flush_pending: bool
    _describe: Any
    _deferred_releases: Any
    _native_classes: dict[type, Any]
    _classes_by_id: list[Any]
    gc: Any

    def _call(self, *args: Any, **kwargs: Any) -> int: ...
    def _live_ptr(self, *args: Any, **kwargs: Any) -> Any: ...
    def _conjugate_of(self, *args: Any, **kwargs: Any) -> Any: ...
    def _conjugate_get(self, *args: Any, **kwargs: Any) -> Any: ...
    def _black_of(self, *args: Any, **kwargs: Any) -> Any: ...
    def _new_object(self, *args: Any, **kwargs: Any) -> Any: ...
    def _native_class(self, *args: Any, **kwargs: Any) -> Any: ...
    def _has_native_type(self, *args: Any, **kwargs: Any) -> bool: ...
    def _name_text(self, *args: Any, **kwargs: Any) -> str: ...
    def _intern(self, *args: Any, **kwargs: Any) -> tuple[int, int]: ...
    def _flush_deferred(self, *args: Any, **kwargs: Any) -> None: ...
    def _release_strong(self, *args: Any, **kwargs: Any) -> None: ...
    def _refuse_reentry(self, *args: Any, **kwargs: Any) -> None: ...
    def _create_cluster(self, *args: Any, **kwargs: Any) -> int: ...
    def _cluster_info(self, *args: Any, **kwargs: Any) -> Any: ...
    def _query(self, *args: Any, **kwargs: Any) -> bool: ...
    def feature_state(self, *args: Any, **kwargs: Any) -> Any: ...
    def collect_garbage(self, *args: Any, **kwargs: Any) -> Any: ...
    def reference_chains(self, *args: Any, **kwargs: Any) -> Any: ...


current: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "zsharp_current_runtime", default=None
)
"""The runtime of the innermost ``with`` block or activation (None: the default)."""

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
    """The runtime of the innermost ``with Runtime()`` block, else the default
    runtime (created on first use, closed at interpreter exit)."""
    runtime = current.get()
    if runtime is not None and not runtime._closed:
        return runtime
    with _default_lock:
        if not default_runtime or default_runtime[0]._closed:
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
        self.token = current.set(self.runtime)

    def __exit__(self, *exc: object) -> None:
        current.reset(self.token)
