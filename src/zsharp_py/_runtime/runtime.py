"""``zs.Runtime``: one isolated native heap plus its conjugate mapping.

Every native call goes through the C core (``zsharp_py._core``): the
``_heap_*`` methods of ``RuntimeCore`` (native/binding/heap_calls.c), which
release the GIL around the calls that may run long (collector steps,
clustering, verification, reference chains), so the C library serialises
each call with the runtime's own lock. Locking (rule 10 of docs/design.md):
this module holds ``Runtime._lock`` around every sequence of calls that
must not interleave with a collection (create-then-adopt an object, and
mark -> expire conjugates -> purge), and around each call a ``close()`` on
another thread must not overtake. The C hot paths (zsharp_py._core:
property reads and writes, reference stores, ``Cls()``) never take it: they
hold the GIL from their first check to their last native call, and a
conjugate is expired, under the GIL, before the purge frees its object.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import os
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .. import _core
from .._base import context
from .._base.context import current_runtime
from .._base.errors import ZS_E_BUSY, ExpiredConjugateError, check, refused
from .._model.hints import plural
from .._model.object import ClassLayout, ClusterInfo, Object, class_layout
from .chains import ReferenceChain, reference_chains
from .collector import GarbageCollector, GcStats, GcStress
from .ticks import TickManager

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["Runtime", "RuntimeActivation", "current_runtime", "describe_runtime", "runtime_of"]

_open_runtimes: weakref.WeakSet[Runtime] = weakref.WeakSet()
_attached: set[Runtime] = set()  # runtimes over a host's heap, open: kept until closed
_kept_for_hosts: list[list[Any]] = []  # class descriptions a host's heap still points into


def _free_native(address: int) -> None:
    """Free a native runtime this side made (``zs_runtime_free``)."""
    _core.RuntimeCore._heap_free_runtime(address)


class Runtime(_core.RuntimeCore):
    """An isolated native heap with its garbage collector and conjugates.

    ``with zs.Runtime() as rt:`` makes it current for the block and closes
    it at the end; closing destroys every native object and expires every
    conjugate. Options:

    ``black_conjugates_are_roots``
        object references inside black conjugates keep their targets alive
        (default True). False is faster but no longer memory-safe for such
        references.
    ``max_objects``
        capacity of the object array (default 2,162,688; at most 33,554,432).
    ``min_cluster_size``
        clusters smaller than this are not kept (default 16).
    ``mark_threads``
        threads a full collection may mark with (default: one per core;
        1 keeps marking on the calling thread). Incremental steps always
        mark on the calling thread.
    ``disregard_for_gc``
        open the disregard-for-GC window: objects created until
        ``close_disregard_for_gc()`` are permanent and never scanned.
    ``stress``
        a ``GcStress`` of collector stress switches (testing only).
    """

    def __init__(
        self,
        *,
        black_conjugates_are_roots: bool = True,
        max_objects: int | None = None,
        min_cluster_size: int | None = None,
        mark_threads: int | None = None,
        disregard_for_gc: bool = False,
        stress: GcStress | None = None,
    ) -> None:
        # 0 keeps an option's default (zs_runtime_default_options).
        objects = clusters = threads = flags = 0
        if max_objects is not None:
            objects = _checked_count("max_objects", max_objects, 1, _core.MAX_OBJECTS_LIMIT)
        if min_cluster_size is not None:
            clusters = _checked_count("min_cluster_size", min_cluster_size, 1, 1 << 30)
        if mark_threads is not None:
            threads = _checked_count("mark_threads", mark_threads, 1, 64)
        if disregard_for_gc:
            flags |= _core.RUNTIME_DISREGARD_WINDOW
        if not black_conjugates_are_roots:
            flags |= _core.RUNTIME_BLACK_NOT_ROOTS
        status, address = self._heap_new_runtime(objects, clusters, threads, flags)
        check(status, "Runtime()", None)
        self._open(address, True, stress)
        self.black_conjugates_are_roots = bool(black_conjugates_are_roots)

    @classmethod
    def attach(cls, address: int) -> Runtime:
        """A Runtime over the native runtime at ``address``, which a native
        host created (``zs_runtime_new``) and owns: Python sees the host's
        objects and classes, creates its own, and collects, as in a runtime
        it made. ``close()`` (``with`` too) expires every proxy and value
        and lets go, leaving the heap and its objects to the host; the host
        freeing the runtime (``zs_runtime_free``) closes this side first.
        ``address`` must name a live ``zs_runtime`` (the host passes it to
        Python as an int: docs/embedding.md, "One library, and a host that owns the
        runtime"); attaching twice raises ``RuntimeError``."""
        if isinstance(address, bool) or not isinstance(address, int):
            raise TypeError(f"attach: address must be an int, not {type(address).__name__}")
        value = int.__index__(address)
        if not 0 < value < 2**64:
            raise ValueError(f"attach: {value} is not the address of a zs_runtime")
        if any(r._ptr == value for r in list(_open_runtimes) if not r._closed):
            raise RuntimeError("attach: a zs.Runtime is already open on this zs_runtime")
        runtime = cls.__new__(cls)
        runtime._open(value, False, None)
        runtime.black_conjugates_are_roots = True  # as the host created it, by default
        _attached.add(runtime)
        return runtime

    def _open(self, address: int, owned: bool, stress: GcStress | None) -> None:
        """Open this runtime on the native runtime at ``address``: made here
        (``owned``: close() frees it) or the host's (``attach``)."""
        self._ptr: int = address  # the native runtime's address while open, else 0
        self._owns_heap = owned
        self._origin = _caller_outside_package()  # where it was made, for error messages
        self._describe = self._describe_packed_name
        self._core_open(address, self._describe, owned)
        self._lock = threading.RLock()
        self._native_classes: dict[type, int] = {}  # class -> its native class's address
        self._classes_by_id: list[type[Object] | None] = []
        self._keep_alive: list[Any] = []  # what native classes point into (descriptions)
        self._deferred_releases: collections.deque[int] = collections.deque()
        self._creators: dict[type, tuple[int, bytes, bool]] = {}
        # The defaults of each class the heap applies itself at creation
        # (_set_class_defaults): names of the properties Python skips.
        self._native_defaults: dict[type, frozenset[str]] = {}
        self._defaults_pending: set[type] = set()  # registered, defaults not set yet
        # State the type layers keep per runtime (feature_state), each
        # cleared through its close() when this runtime closes.
        self._features: dict[object, Any] = {}
        self.gc = GarbageCollector(self)
        """Garbage collector controls: ``stats()``, ``verify()``."""
        self.ticks = TickManager(self)
        """The tick manager: ``register(obj)``, then ``frame(dt)`` once a frame."""
        # An unclosed runtime that Python collects frees its heap; at exit,
        # _close_all expires conjugates first (other atexit code may still
        # hold them), so the finaliser's own atexit run is disabled. A
        # host's runtime is never freed here (_attached keeps its Runtime
        # until close(), the host's free or the exit).
        self._finalizer = weakref.finalize(self, _free_native, address) if owned else None
        if self._finalizer is not None:
            self._finalizer.atexit = False
        # Calls from native code on this heap go to zsharp_py._core's C
        # handler, which finds the runtime by its native address. Native
        # code may create a Python class's object by name before Python used
        # the class in this runtime: zs_find_class asks _resolve_class.
        _open_runtimes.add(self)
        self._heap_set_handlers(True)
        self._stress = stress or GcStress()
        self._collect_every = self._stress.collect_every
        self._creations = 0
        if stress is not None:
            self.gc._apply_stress(stress)

    # ---- lifetime -------------------------------------------------------
    def __enter__(self) -> Runtime:
        self._make_current()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._leave_current()
        self.close()

    def activate(self) -> RuntimeActivation:
        """A context manager that makes this runtime current for its block
        and leaves it open (``with rt:`` closes it at the end).

        Blocks nest, the same activation may be entered again, and each
        thread (each context: asyncio tasks too) has its own current
        runtime. Entering raises ``RuntimeError`` once the runtime is closed.

        >>> import zsharp_py as zs
        >>> level = zs.Runtime()
        >>> with level.activate():
        ...     zs.current_runtime() is level
        True
        >>> level.closed
        False
        >>> level.close()
        """
        return RuntimeActivation(self)

    def _make_current(self) -> None:
        """Push this runtime as the current one in this context."""
        if self._closed:
            raise RuntimeError("this Runtime is closed; create a new zs.Runtime()")
        context.entered.set(context.entered.get() + ((self, context.set_current(self)),))

    def _leave_current(self) -> None:
        """Pop this context's innermost entry of this runtime: it may be
        current in several threads (each has its own context) at once."""
        entered = context.entered.get()
        for position in range(len(entered) - 1, -1, -1):
            if entered[position][0] is self:
                context.reset_current(entered[position][1])
                context.entered.set(entered[:position] + entered[position + 1 :])
                break

    @property
    def stress(self) -> GcStress:
        """The stress switches in force (``GcStress``)."""
        return self._stress

    @property
    def native_address(self) -> int:
        """The address of the native ``zs_runtime`` (``zsharp.h``), for C code
        in this process: a native host calls ``zs_call_function`` on it.
        Valid until ``close()``; raises ``ExpiredConjugateError`` after."""
        return self._live_address()

    @property
    def closed(self) -> bool:
        """Whether ``close()`` has run."""
        return self._closed

    @property
    def owns_heap(self) -> bool:
        """False for a runtime a host owns (``attach``): close() leaves it be."""
        return self._owns_heap

    def close(self) -> None:
        """Destroy every native object, expire every conjugate, free the heap;
        for a host's runtime (``attach``), expire every proxy and value and
        let go, leaving the heap to the host."""
        with self._lock:
            # The runtime's life says whether close() may run now (not
            # re-entered inside a collection, an adoption or another close();
            # nothing to do once closed) and moves it to closing first: the C
            # fast paths decline from now on (docs/lifecycle.md).
            if not self._life_enter(_LIFE_CLOSE, "close()"):
                return
            try:
                self._close_now()
            finally:
                self._life_leave(_LIFE_CLOSE)

    def _host_freed(self) -> None:
        """The host is freeing this runtime (``zs_runtime_free`` of a runtime
        it owns calls here first, through the free handler): close this side
        now, as close() does, and leave the freeing to the host."""
        with self._lock:
            if not self._life_enter(_LIFE_HOST_FREE, "the host's zs_runtime_free"):
                return
            try:
                self._close_now(host_frees=True)
            finally:
                self._life_leave(_LIFE_HOST_FREE)

    def _close_now(self, host_frees: bool = False) -> None:
        """close()'s work, under the lock and the re-entry guard."""
        self._deferred_releases.clear()
        keep_heap = not self._owns_heap and not host_frees
        if keep_heap:
            # The host's collections will run without this side: what they
            # gathered is expired now, through the handler, while it is set;
            # then the handler goes, so that the heap may forget the
            # conjugate flags (_expire_all), which it refuses while one is set.
            self._heap_expire_gathered()
            self._core_remove_handler("expiry")
        # Names must outlive the native table: expired conjugates format
        # their messages lazily.
        self._keep_names(self._heap_name_count())
        # Every conjugate and black value, in C. An expiry that failed (out
        # of memory for an expired conjugate's record) expired it all the
        # same: its error comes back, and is raised once this side is closed.
        failure = self._expire_all(self._describe, keep_heap)
        for state in self._features.values():
            state.close()
        self._features.clear()
        if not self._owns_heap:
            # The heap keeps the descriptions of the classes Python
            # registered in it, which point into these.
            _kept_for_hosts.append(self._keep_alive)
            if keep_heap:  # the heap stays: nothing of Python's is called from it again
                self._heap_set_handlers(False)
                self._core_remove_handler("free")
            self._core_detach()
            _attached.discard(self)
            self._ptr = 0
        else:
            self._core_detach()
            # zs_runtime_free, exactly once. Called through detach(): once
            # weakref.finalize's own atexit hook has run (it may run before
            # _close_all), calling a finalizer does nothing.
            assert self._finalizer is not None  # an owned heap's
            detached = self._finalizer.detach()
            if detached is not None:
                _, free, args, _ = detached
                # Later if a host function running on this heap called the
                # Python code closing it: the last one to return frees it
                # (native/binding/zpy_python_to_host.c).
                self._core_free_native(functools.partial(free, *args))
            self._ptr = 0
        if failure is not None:
            raise failure

    def feature_state(self, key: object, make: Callable[[], Any]) -> Any:
        """The state a feature of a higher layer keeps for this runtime
        (the ids of LazyObjectPtr, the interfaces of ScriptInterface), made
        by ``make()`` on first use; its ``close()`` runs when the runtime
        closes, so the runtime needs to know nothing of the feature."""
        state = self._features.get(key)
        if state is None:
            state = self._features[key] = make()
        return state

    def _live_address(self) -> int:
        """The native runtime's address, or ``ExpiredConjugateError`` once closed."""
        if self._closed:
            raise ExpiredConjugateError(_CLOSED)
        return self._ptr

    def close_disregard_for_gc(self) -> None:
        """End the start-up window opened by ``Runtime(disregard_for_gc=True)``."""
        with self._lock:
            self._live_address()
            status = self._heap_close_disregard()
        check(status, "close_disregard_for_gc", self)

    # ---- garbage collection --------------------------------------------
    def collect_garbage(self) -> GcStats:
        """Full stop-the-world collection: mark, expire conjugates, purge.

        A pending incremental cycle is finished rather than restarted.
        Returns the cycle's ``GcStats`` (the same as ``rt.gc.collect()``).
        """
        return self.gc.collect()

    def _create_cluster(self, root: Object) -> int:
        handle = root._h
        with self._lock:
            self._live_address()
            status, size = self._heap_create_cluster(handle)
        if status == ZS_E_BUSY:
            raise RuntimeError(
                "create_cluster: not possible while an incremental mark is "
                "pending (finish it with rt.gc.step() or collect_garbage())"
            )
        check(status, f"{type(root).__name__}.create_cluster", self)
        return int(size)

    def _cluster_info(self, handle: int) -> ClusterInfo | None:
        with self._lock:
            self._live_address()
            # Both native calls in one: no Python code between them.
            status, info = self._heap_cluster_info(handle)
            check(status, "cluster", self)
            if info is None:
                return None
            root, objects, referenced_clusters, mutable_objects, referenced_by = info
            return ClusterInfo(
                self._conjugate_of(root),
                objects,
                referenced_clusters,
                mutable_objects,
                referenced_by,
            )

    def reference_chains(self, obj: Object, *, limit: int | None = None) -> list[ReferenceChain]:
        """Why is ``obj`` alive? For each root that reaches it (nearest first,
        at most ``limit`` roots), the shortest chain of references from that
        root to it, along exactly the references a collection follows.

        An empty list means nothing keeps it alive: the next collection
        destroys it. A root itself gets a chain of just itself. Each call
        reads the whole heap (a debugging tool, like Unreal's ``obj refs``).
        """
        return reference_chains(self, obj, limit)

    def object_from_handle(self, handle: int) -> Object | None:
        """The object a handle of this runtime names (``obj.handle`` the
        other way; a native host's ``zs_ref``): its proxy, the one Python
        holds or a new one, or None for 0 or a handle whose object was
        freed, is dying or was destroyed. ``TypeError`` for a non-int,
        ``ValueError`` outside 0..2**64-1, ``ExpiredConjugateError`` once
        the runtime is closed. C code does the same with
        ``zsharp_python.h`` (``zsharp_py.lowlevel.python_table()``).

        >>> import zsharp_py as zs
        >>> class Probe(zs.Object):
        ...     pass
        >>> with zs.Runtime() as rt:
        ...     probe = Probe()
        ...     rt.object_from_handle(probe.handle) is probe, rt.object_from_handle(0)
        (True, None)
        """
        if isinstance(handle, bool) or not isinstance(handle, int):
            raise TypeError(
                f"object_from_handle: a handle is an int (obj.handle), not {type(handle).__name__}"
            )
        value = int.__index__(handle)  # a subclass's own __index__ is not trusted
        if not 0 <= value <= 0xFFFF_FFFF_FFFF_FFFF:
            raise ValueError(f"object_from_handle: {value} is not a handle (0 to 2**64 - 1)")
        with self._lock:
            self._live_address()
            found: Object | None = self._conjugate_of(value)
            return found

    def live_objects(self) -> int:
        """Number of live native objects in this runtime."""
        with self._lock:
            self._live_address()
            return int(self._heap_live_objects())

    def native_memory(self) -> dict[str, int]:
        """Native blocks and bytes the runtime owns (``live_blocks``,
        ``live_bytes``, ``peak_bytes``, ``item_bytes_per_object``)."""
        with self._lock:
            self._live_address()
            blocks, live, peak, item = self._heap_memory()
        return {
            "live_blocks": blocks,
            "live_bytes": live,
            "peak_bytes": peak,
            "item_bytes_per_object": item,
        }

    def _flush_deferred(self) -> None:
        """Run the native releases queued by finalisers (a safe point)."""
        self._release_deferred()
        self._flush_values()  # black values' blocks; callables no binding holds

    def _release_deferred(self) -> None:
        """The strong references finalisers queued, released (the first half
        of ``_flush_deferred``; the collection protocol flushes the rest in
        C, native/binding/zpy_collection.c)."""
        self._flush_pending = False  # first: a finaliser running meanwhile sets it again
        queue = self._deferred_releases
        while queue:
            handle = queue.popleft()
            # Checked before each release, with no Python code before the call:
            # a signal handler between two releases may close the runtime (the
            # releases then no longer matter: closing frees everything).
            if self._closing:
                queue.clear()
                break
            self._heap_release_strong_ref(handle)

    def bound_callables(self) -> int:
        """Number of Python callables that native delegate bindings hold
        (a leak check: it drops back once the delegates are gone)."""
        with self._lock:
            if self._closed:
                return 0
            return self._callable_count()

    def values_alive(self) -> int:
        """Number of live black values (structs, strings, containers...)."""
        with self._lock:
            if self._closed:
                return 0
            return int(self._heap_value_count()) + self._inline_blacks

    def _release_strong(self, handle: int) -> None:
        with self._lock:
            if not self._closed:
                status = self._heap_release_strong_ref(handle)
                check(status, "StrongObjectPtr.dispose", self)

    # ---- objects and conjugates -----------------------------------------
    def _native_class_address(self, cls: type[Object]) -> int:
        """The address of ``cls``'s native class in this runtime, registered
        on first use.

        Raises ``ExpiredConjugateError`` once the runtime is closing: the
        lookup hashes ``cls`` (a metaclass ``__hash__``) and registering
        runs Python code, either of which may close it, and the caller uses
        the result at once (``zs_class_id``) with no Python code between."""
        native = self._native_classes.get(cls)
        if native is None:
            native = self._register_class(cls)
        elif cls in self._defaults_pending:  # registered, its defaults refused: again
            self._set_class_defaults(cls, class_layout(cls), native)
        if self._closing:  # checked last: after this, the caller's native call
            raise ExpiredConjugateError(_CLOSED)
        return native

    def _register_class(self, cls: type[Object]) -> int:
        """Register ``cls`` (and its parents) natively; its native class. A
        host's class is not registered from here: it is bound to the class
        this runtime's host registered (``set_host_binding``), or refused
        saying why."""
        if "_zs_description" in cls.__dict__:
            if not _host_binding:
                raise TypeError(f"{cls.__name__} is a class of a native host: import zsharp_py")
            _host_binding[0](self, cls)
            native = self._native_classes.get(cls)
            if native is None:  # hashing cls, or the binding, closed the runtime meanwhile
                raise ExpiredConjugateError(_CLOSED)
            return native
        layout = class_layout(cls)
        parent = self._native_class_address(layout.parent) if layout.parent is not None else 0
        what = f"registering class {cls.__name__}"
        name = cls.__name__.encode("utf-8")
        # References go as their own member kinds; everything else (structs,
        # strings, containers) as a VALUE member of its registered type.
        rows = [
            (m.member_kind, offset, 0)
            if m.member_kind
            else (_core.MEMBER_VALUE, offset, self._native_type(m.kind))
            for offset, m in layout.own_members
        ]
        # The same description a host gives (zsharp.h, "reflection"): each
        # own property by name, type and offset, so native code can list a
        # Python class's properties as Python lists a host's. Their members
        # are the rows above, so no property repeats its native type.
        own = layout.properties[len(layout.properties) - layout.own_count :]
        properties = [(p.name.encode(), p.kind.describe().encode(), p.offset) for p in own]
        # Everything above may run Python code (class layout, string
        # annotations, names, kinds), which may close the runtime: checked
        # again here, with no Python code before the call (the parent's
        # native class, if any, was freed by the same close).
        if self._closing:
            raise ExpiredConjugateError(_CLOSED)
        status, native, class_id, kept = self._heap_register_class(
            name, parent, layout.size, layout.class_flags, rows, properties
        )
        check(status, what, self)
        self._keep_alive.append(kept)  # the native description points into it
        self._record_class(cls, native, class_id)
        self._set_class_defaults(cls, layout, native)
        return native

    def _set_class_defaults(self, cls: type[Object], layout: ClassLayout, native: int) -> None:
        """Give the native class of ``cls`` its defaults, so that an object
        a host creates (``zs_object_new``) starts with them as one Python
        creates does: the plain image, and the values that are not plain
        data (strings, names, structs...), read from an object made now
        with every default applied (``Default__<name>``, dropped at once).
        Defaults holding object references are left to Python's creations
        (``_initialize``): the heap's copy of them would not be traced."""
        later = layout.defaults + layout.initializers
        if not layout.image and not later:
            return
        # An error on the way (the default object could not be made now)
        # leaves the class registered and its defaults pending: the next use
        # of it here sets them (_native_class_address). Until set, and for
        # the default object itself, Python applies every default.
        self._defaults_pending.discard(cls)
        try:
            source = 0
            if later:
                made = self._new_object(cls, layout, f"Default__{cls.__name__}", None, {})
                source = made._h
            members = tuple((info.offset, info.kind.kind) for info in later)
            taken = set(self._heap_class_defaults(native, layout.image, members, source))
        except BaseException:
            self._defaults_pending.add(cls)
            raise
        finally:
            self._creators.pop(cls, None)  # the default object's: it applied every default
        self._native_defaults[cls] = frozenset(info.name for info in later if info.offset in taken)

    def _record_class(self, cls: type[Object], address: int, class_id: int) -> None:
        """Make ``cls`` the conjugate class of the native class at
        ``address`` (id ``class_id``) in this runtime: registered from
        Python, or a host's class bound when found
        (zsharp_py/_interop/reflection.py)."""
        while len(self._classes_by_id) <= class_id:
            self._classes_by_id.append(None)
        self._classes_by_id[class_id] = cls
        self._set_native_class(cls, address)
        self._native_classes[cls] = address  # last: hashing cls may run Python code

    def _describe_packed_name(self, packed: int) -> str:
        """``repr`` of a name packed as index | number << 32 (expiry messages)."""
        return repr(self._name_text(packed & 0xFFFFFFFF, packed >> 32))

    def _new_object(
        self,
        cls: type[Object],
        layout: ClassLayout,
        name: str | None,
        outer: Object | None,
        properties: dict[str, Any],
    ) -> Object:
        # One native call allocates the object, copies its plain defaults in
        # and records its conjugate; the lock keeps a collection on another
        # thread from running between that call and the mapping insert.
        # (acquire/release: a ``with`` costs two bound-method calls more.)
        lock = self._lock
        lock.acquire()
        try:
            if self._closing:  # set first by close(), and kept
                raise ExpiredConjugateError(_CLOSED)
            every = self._collect_every
            if every:
                self._creations += 1
                if self._creations % every == 0:
                    self.collect_garbage()  # before allocating: the new object is safe
            if self._flush_pending:
                self._flush_deferred()
            native, image, more = self._creators.get(cls) or self._creator(cls, layout)
            if name is None:
                index, number = _NAME_AUTO, 0
            else:
                index, number = self._intern(name)
            outer_handle = 0 if outer is None else outer._h
            # From the native call until the constructor returns, collections
            # and close() re-entering on this thread (a signal handler, a
            # finaliser run by an allocation, a keyword's hook) are refused
            # (an adoption, in the runtime's life: they nest, as a hook may
            # create or adopt another object meanwhile): the expiry would miss
            # a conjugate the table does not hold yet, and an object still
            # being built is unreachable. The flush, the lookups (a metaclass
            # __hash__), the creator and the name may have run Python code
            # that closed the runtime: entering raises ExpiredConjugateError
            # then, with no Python code before the call.
            self._life_enter(_LIFE_ADOPT, f"{cls.__name__}()")
            try:
                status, handle, address = self._heap_new_object(
                    native, outer_handle, index, number, image
                )
                if status:  # not a handle (say, a dying outer)
                    refused(status, f"{cls.__name__}()", self)
                conjugate: Object = self._adopt(cls, handle, address)
                if more or properties:
                    self._initialize(conjugate, layout, handle, properties)
            finally:
                self._life_leave(_LIFE_ADOPT)
            return conjugate
        finally:
            lock.release()

    def _creator(self, cls: type[Object], layout: ClassLayout) -> tuple[int, bytes, bool]:
        """What creating a ``cls`` object in this runtime needs: its native
        class's address, the initial image, and whether anything is left to
        initialise after the image."""
        native = self._native_class_address(cls)
        natively = self._native_defaults.get(cls, frozenset())
        more = any(info.name not in natively for info in layout.initializers + layout.defaults)
        creator = (native, layout.image, more)
        self._creators[cls] = creator
        if not more:  # plain defaults only: ``cls()`` can be made in C from now on
            self._fast_creators[cls] = _core.Creator(native, layout.image)
        return creator

    def _initialize(
        self, conjugate: Object, layout: ClassLayout, handle: int, properties: dict[str, Any]
    ) -> None:
        """What the image could not do, then the constructor's keywords."""
        # What the heap applied itself (the class's native defaults) is skipped.
        natively = self._native_defaults.get(layout.cls, frozenset())
        try:
            # Embedded structs start from their declared defaults.
            for info in layout.initializers:
                if info.name not in natively:
                    info.kind.initialize_defaults(conjugate, info.name)
            # Keywords were validated before allocation; a store can still
            # fail if a referenced object died meanwhile on another thread.
            for info in layout.defaults:
                if info.name not in properties and info.name not in natively:
                    setattr(conjugate, info.name, info.default)
            for key, value in properties.items():
                setattr(conjugate, key, value)
        except BaseException:
            # Leave no half-built object reachable: it goes at the next
            # collection. close() is refused during an adoption, but
            # checked anyway: a closed runtime has freed the object already.
            # (Unrooted too, should a keyword's hook have rooted it: the
            # same call as a failed Python __init__, _model/object.py.)
            if not self._closing:
                self._heap_abandon(handle)
            raise

    def _refuse_reentry(self, what: str) -> None:
        """Refuse ``what`` where a collection may not run now (re-entered
        inside a collection, a close() or an adoption on this thread; the
        rules are the runtime's life's, docs/lifecycle.md)."""
        self._life_check(_LIFE_COLLECT, what)

    @contextlib.contextmanager
    def _collection(self, what: str) -> Iterator[None]:
        """Hold the lock for one collection step (mark, expire, purge), as
        a collection in the runtime's life: re-entry on this thread refused."""
        with self._lock:
            self._life_enter(_LIFE_COLLECT, what)
            try:
                yield
            finally:
                self._life_leave(_LIFE_COLLECT)

    def _conjugate_of_slow(self, handle: int) -> Object | None:
        """The conjugate of a handle, made here when C could not
        (``_conjugate_of``, native/binding/zpy_conjugate_table.c: a host's class
        Python has not bound yet is bound now): existing, new, or None if
        the object is gone (or the handle is null)."""
        if not handle:
            return None
        with self._lock:
            found: Object | None = self._conjugate_get(handle)
            if found is not None or self._closing:
                return found
            class_id = self._heap_resolve_class(handle)
            if class_id is None:
                return None
            cls = self._classes_by_id[class_id] if class_id < len(self._classes_by_id) else None
            if cls is None:  # a host's class Python has not bound yet: bind it now
                cls = next((b(self, class_id) for b in _class_binders), None)
                if cls is None:
                    return None
            class_layout(cls)
            # class_layout may have run Python code (string annotations, a
            # metaclass __hash__) that closed the runtime: checked again, with
            # no Python code before the call (so the adoption cannot be refused).
            if self._closing:
                return None
            self._life_enter(_LIFE_ADOPT, "adopting an object")
            try:
                address = self._heap_resolve_for_conjugate(handle)
                if address is None:
                    return None
                adopted: Object = self._adopt(cls, handle, address)
                return adopted
            finally:
                self._life_leave(_LIFE_ADOPT)

    def _resolve_class(self, name: str) -> bool:
        """The C class resolver's call (zs_find_class missed ``name``):
        ``_resolve_class_named``."""
        return _resolve_class_named(self, name)

    def __repr__(self) -> str:
        if self._closed:
            return "<zs.Runtime closed>"
        return f"<zs.Runtime {plural(self.live_objects(), 'live object')}>"


class RuntimeActivation:
    """``rt.activate()``: makes ``rt`` current for a ``with`` block without
    closing it at the end. Re-entrant: the entries live in a per-context
    stack (like ``with rt:``), so nested and concurrent uses pair up."""

    __slots__ = ("_runtime",)

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    @property
    def runtime(self) -> Runtime:
        """The runtime this activates."""
        return self._runtime

    def __enter__(self) -> Runtime:
        self._runtime._make_current()
        return self._runtime

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._runtime._leave_current()


_NAME_AUTO = _core.NAME_AUTO
_LIFE_COLLECT = _core.LIFE_COLLECT
_LIFE_CLOSE = _core.LIFE_CLOSE
_LIFE_HOST_FREE = _core.LIFE_HOST_FREE
_LIFE_ADOPT = _core.LIFE_ADOPT
_CLOSED = "the runtime has been closed"  # the ExpiredConjugateError of a closed runtime
context.set_default_factory(Runtime)


_class_binders: list[Callable[[Runtime, int], type[Object]]] = []
_host_binding: list[Any] = []  # (bind, fits, is_host_type) of zsharp_py/_interop/reflection.py


def set_host_binding(
    bind: Callable[[Runtime, type], None],
    fits: Callable[[Runtime, type], bool],
    is_host_type: Callable[[Any], bool],
) -> None:
    """How a host's class (made once, zsharp_py/_interop/reflection.py) is
    bound in a runtime: ``bind(runtime, cls)`` binds it (or raises saying
    why it cannot), ``fits(runtime, cls)`` says whether it could."""
    _host_binding[:] = [bind, fits, is_host_type]


def _caller_outside_package() -> str:
    """``file:line`` of the nearest caller outside the package's private
    modules (a runtime's origin, which its errors name)."""
    frame = sys._getframe(1)
    private = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        while frame is not None:
            path = os.path.abspath(frame.f_code.co_filename)
            inside = path.startswith(private + os.sep) and (
                os.path.basename(os.path.dirname(path)).startswith("_")
                or os.path.basename(path) == "__init__.py"
            )
            if not inside:
                parts = path.split(os.sep)
                return f"{os.sep.join(parts[-2:])}:{frame.f_lineno}"
            frame = frame.f_back  # type: ignore[assignment]
        return "?"
    finally:
        del frame


def describe_runtime(runtime: Runtime) -> str:
    """How errors name a runtime: the default one, or where it was made,
    and whether it is the current one or closed."""
    if context.default_runtime and context.default_runtime[0] is runtime:
        text = "the default runtime (made on first use outside any `with zs.Runtime()`)"
    else:
        text = f"the runtime made at {getattr(runtime, '_origin', '?')}"
    notes = []
    if context.current.get() is runtime:
        notes.append("the current one")
    if runtime._closed:
        notes.append("closed")
    return f"{text} ({', '.join(notes)})" if notes else text


def add_class_binder(binder: Callable[[Runtime, int], type[Object]]) -> None:
    """Bind a native class Python has no class for with ``binder(runtime,
    class_id)`` (zsharp_py/_interop/reflection.py registers the binder of
    hosts' descriptions), so that no live object reads as None."""
    _class_binders.append(binder)


def _declared_classes(name: str) -> list[type[Object]]:
    """The zs.Object subclasses named ``name`` declared in Python (bound
    host classes left out: they are the host's own)."""
    found: list[type[Object]] = []
    pending: list[type[Object]] = [Object]
    while pending:
        cls = pending.pop()
        pending.extend(type.__subclasses__(cls))
        if (
            cls.__name__ == name
            and "_zs_description" not in cls.__dict__
            and "_zs_staged" not in cls.__dict__  # a reload's statement: never used
            and cls is not Object
        ):
            found.append(cls)
    return found


def _resolve_class_named(runtime: Runtime, name: str) -> bool:
    """zs_find_class missed ``name`` (native code creating a class by
    name): register the Python class of that name in the runtime, if
    exactly one is declared; whether it was. The C core's class resolver
    (native/binding/heap_calls.c) calls this, through
    ``Runtime._resolve_class``, for an open runtime that is not closing; an
    exception cannot cross into C: it is reported as unraisable and the
    lookup fails."""
    if runtime._closing:
        return False
    fits = _host_binding[1] if _host_binding else None
    candidates = [
        cls
        for cls in _declared_classes(name)
        # A subclass of a host's class this runtime's host has not registered cannot live here.
        if all(
            base in runtime._native_classes or (fits is not None and fits(runtime, base))
            for base in cls.__mro__
            if "_zs_description" in base.__dict__
        )
    ]
    if len(candidates) != 1:
        return False  # none, or ambiguous: native code must say which
    runtime._native_class_address(candidates[0])
    return True


def runtime_of(obj: Object) -> Runtime:
    """The live runtime of ``obj`` as a ``Runtime`` (``Object`` types it as
    the lower layers' ``RuntimeLike``, of which ``Runtime`` is the only
    implementation); ``ExpiredConjugateError`` once it or its object is gone."""
    runtime = obj._live_runtime()
    assert isinstance(runtime, Runtime)
    return runtime


@atexit.register
def _close_all() -> None:
    for runtime in list(_open_runtimes):
        runtime.close()


def _checked_count(option: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{option} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{option} must be between {low} and {high}, got {value}")
    return value
