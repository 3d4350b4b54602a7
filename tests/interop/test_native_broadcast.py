"""Delegates called from native code (``zs_delegate_broadcast``,
``zs_delegate_execute``: native/src/broadcast.c, and the binding's
listener handler in native/binding/zpy_host_to_python.c), driven as a host
drives them: from the C host of docs/events.md (tests/hosts/events_host.c,
compiled here), from the sample engine, and through cffi on Python-declared
classes. Listeners of every kind, in bind order, each in a call scope of
its own; listeners that unbind, destroy the owner, collect, close the
runtime or raise in the middle of a broadcast; a broadcast from Python
reaching native listeners; single-cast execute with a result."""

from __future__ import annotations

import functools
import gc
import threading
from pathlib import Path
from typing import Any

import pytest

import zsharp_py as zs
from helpers import collect, runtime_ptr
from native_build import compile_host
from zsharp_py import sample_engine
from zsharp_py._base.errors import ExpiredConjugateError
from zsharp_py._base.ffi import ffi, lib
from zsharp_py._model.object import class_layout
from zsharp_py.lowlevel import api_table

HOST_SOURCE = Path(__file__).resolve().parents[1] / "hosts" / "events_host.c"
HOST_CDEF = """
typedef struct { uint32_t listeners, called, failed, skipped; } zs_broadcast_report;
int events_host_install(const void *api, void *rt);
int events_host_announce(const void *api, void *rt, uint64_t announcer, int32_t value,
                         zs_broadcast_report *report);
const void *events_host_signature(const char *name);
"""

ZS_OK = lib.ZS_OK
CALL_FAILED = lib.ZS_E_CALL_FAILED
INVALID = lib.ZS_E_INVALID


class Host:
    """The compiled events host and what a test calls it with."""

    def __init__(self) -> None:
        self.ffi, self.lib, _ = compile_host(HOST_SOURCE.read_text(), "events_host", HOST_CDEF)

    def install(self, runtime: zs.Runtime) -> None:
        status = self.lib.events_host_install(
            self.ffi.cast("void *", api_table()), self.ffi.cast("void *", runtime.native_address)
        )
        assert status == ZS_OK

    def announce(self, runtime: zs.Runtime, announcer: zs.Object, value: int) -> tuple[int, Any]:
        """Broadcast on_announce from plain C (the GIL released by cffi):
        (status, report as listeners, called, failed, skipped)."""
        report = self.ffi.new("zs_broadcast_report *")
        status = self.lib.events_host_announce(
            self.ffi.cast("void *", api_table()),
            self.ffi.cast("void *", runtime.native_address),
            announcer.handle,
            value,
            report,
        )
        return status, (report.listeners, report.called, report.failed, report.skipped)

    def signature(self, name: str) -> Any:
        """The host's signature of an event, as the package's cffi type."""
        found = self.lib.events_host_signature(name.encode())
        assert found != self.ffi.NULL
        return ffi.cast("const zs_function_desc *", int(self.ffi.cast("uintptr_t", found)))


@pytest.fixture(scope="module")
def host() -> Host:
    return Host()


@pytest.fixture
def events(rt: zs.Runtime, host: Host) -> Any:
    """The host installed in ``rt``: (Announcer, Counter)."""
    host.install(rt)
    return zs.native_class("Announcer"), zs.native_class("Counter")


class Listener:
    """A plain Python object whose bound method listens."""

    def __init__(self, heard: list[Any]) -> None:
        self.heard = heard

    def on_announce(self, value: int, source: Any) -> None:
        self.heard.append(("method", value))

    def __call__(self, value: int, source: Any) -> None:
        self.heard.append(("callable object", value))


class Ear(zs.Object):
    """A Python-declared object whose method listens (an object binding)."""

    hits: zs.Int32

    def hear(self, value: int, source: Any) -> None:
        self.hits += value
        HEARD.append(("zs.Object method", value))


HEARD: list[Any] = []


def test_listeners_of_every_kind_run_in_bind_order(rt: zs.Runtime, host: Host, events: Any) -> None:
    announcer_class, counter_class = events
    heard = HEARD
    heard.clear()
    announcer = announcer_class()
    counter = counter_class()
    ear = Ear()
    for obj in (announcer, counter, ear):
        obj.add_to_root()

    class LoudCounter(counter_class):  # type: ignore[misc, valid-type]
        def count(self, value: int, source: Any) -> None:  # overrides the native function
            heard.append(("override", value, source is announcer))

    loud = LoudCounter()
    loud.add_to_root()

    def function(value: int, source: Any) -> None:
        heard.append(("function", value, source is announcer))

    def make_closure(tag: str) -> Any:
        def closure(value: int, source: Any) -> None:
            heard.append((tag, value))

        return closure

    on = announcer.on_announce
    on.add(function)
    on.add(lambda value, source: heard.append(("lambda", value)))
    on.add(make_closure("closure"))
    on.add(Listener(heard).on_announce)
    on.add(Listener(heard))
    on.add(functools.partial(lambda tag, value, source: heard.append((tag, value)), "partial"))
    on.add(ear.hear)
    on.add(counter, "count")  # the host's native function
    on.add(loud, "count")  # a Python override of it
    assert len(on) == 9

    announcer.announce(5)  # C broadcasts, called from Python
    expected = [
        ("function", 5, True),
        ("lambda", 5),
        ("closure", 5),
        ("method", 5),
        ("callable object", 5),
        ("partial", 5),
        ("zs.Object method", 5),
        ("override", 5, True),
    ]
    assert heard == expected
    assert (counter.total, counter.calls, ear.hits) == (5, 1, 5)

    heard.clear()
    status, report = host.announce(rt, announcer, 7)  # C broadcasts from plain C
    assert status == ZS_OK and report == (9, 9, 0, 0)
    assert [entry[:2] for entry in heard] == [(entry[0], 7) for entry in expected]
    assert (counter.total, counter.calls, ear.hits) == (12, 2, 12)


def test_a_broadcast_from_python_reaches_native_listeners(rt: zs.Runtime, events: Any) -> None:
    announcer_class, counter_class = events
    announcer, counter = announcer_class(), counter_class()
    heard: list[int] = []
    announcer.on_announce.add(counter, "count")
    announcer.on_announce.add(lambda value, source: heard.append(value))
    announcer.on_announce.broadcast(4, announcer)
    assert (counter.total, counter.calls, heard) == (4, 1, [4])


def test_each_python_listener_runs_in_a_scope_of_its_own(rt: zs.Runtime, events: Any) -> None:
    announcer_class, _ = events
    announcer = announcer_class()
    announcer.add_to_root()
    kept: list[Any] = []
    seen: list[Any] = []

    class Holder(zs.Object):
        delegate: zs.MulticastDelegate

    holder = Holder()
    holder.add_to_root()

    def first(at: Any) -> None:
        kept.append(at)  # a view into the host's block
        kept.append(holder.delegate)  # a view obtained in this listener's scope
        seen.append((at.x, at.y))

    def second(at: Any) -> None:
        # The first listener's scope has ended: both of its views expired.
        seen.append(tuple(view.is_expired for view in kept))
        seen.append((at.x, at.y))

    announcer.on_moved.add(first)
    announcer.on_moved.add(second)
    announcer.move(1.5, -2.0)
    assert seen == [(1.5, -2.0), (True, True), (1.5, -2.0)]
    with pytest.raises(ExpiredConjugateError):
        kept[0].x


def test_listeners_that_unbind_run_this_time_and_not_the_next(
    rt: zs.Runtime, host: Host, events: Any
) -> None:
    announcer_class, _ = events
    announcer = announcer_class()
    announcer.add_to_root()
    calls: list[str] = []
    on = announcer.on_announce
    baseline = rt.bound_callables()

    def a(value: int, source: Any) -> None:
        calls.append("a")
        on.remove(a)
        on.remove(c)  # a later one: still called this time (the bindings were copied)
        for _ in range(50):  # the storage grows and moves
            on.add(lambda value, source: None)
        gc.collect()
        collect(rt)  # the registry drops callables no binding holds any more

    def b(value: int, source: Any) -> None:
        calls.append("b")
        on.clear()  # every binding, and its storage

    def c(value: int, source: Any) -> None:
        calls.append("c")

    for listener in (a, b, c):
        on.add(listener)
    status, report = host.announce(rt, announcer, 1)
    assert status == ZS_OK and report == (3, 3, 0, 0)
    assert calls == ["a", "b", "c"]
    calls.clear()
    assert host.announce(rt, announcer, 1) == (ZS_OK, (0, 0, 0, 0))
    assert calls == [] and len(on) == 0
    collect(rt)
    assert rt.bound_callables() == baseline  # nothing the broadcast held is left


@pytest.mark.parametrize("how", ["destroy", "collect"])
def test_a_listener_that_frees_the_owner(
    rt: zs.Runtime, host: Host, events: Any, unraisable: list[Any], how: str
) -> None:
    announcer_class, counter_class = events
    announcer = announcer_class()
    counter = counter_class()
    counter.add_to_root()
    calls: list[str] = []

    def free_owner(value: int, source: Any) -> None:
        calls.append("free")
        if how == "destroy":
            assert lib.zs_destroy_object(runtime_ptr(rt), source.handle) == ZS_OK
        collect(rt)  # the announcer, unrooted, goes with its delegate's storage

    on = announcer.on_announce
    on.add(free_owner)
    on.add(lambda value, source: calls.append(f"after: {source}"))
    on.add(counter, "count")
    status, report = host.announce(rt, announcer, 3)
    assert announcer.is_expired
    # The block still names the owner: a later Python listener reads it as
    # None, as a killable reference to it reads; a native listener takes
    # the block as it is.
    assert status == ZS_OK and report == (3, 3, 0, 0) and unraisable == []
    assert calls == ["free", "after: None"]
    assert (counter.total, counter.calls) == (3, 1)


def test_a_listener_that_collects_skips_the_objects_it_freed(
    rt: zs.Runtime, host: Host, events: Any
) -> None:
    announcer_class, counter_class = events
    announcer = announcer_class()
    announcer.add_to_root()
    doomed = counter_class()  # referenced by nothing: object bindings are weak
    doomed_ear = Ear()
    kept = counter_class()
    kept.add_to_root()
    HEARD.clear()

    def collector(value: int, source: Any) -> None:
        collect(rt)

    on = announcer.on_announce
    on.add(collector)
    on.add(doomed, "count")
    on.add(doomed_ear.hear)
    on.add(kept, "count")
    del doomed_ear  # its conjugate only held it
    gc.collect()
    status, report = host.announce(rt, announcer, 2)
    assert status == ZS_OK and report == (4, 2, 0, 2)
    assert doomed.is_expired and HEARD == []
    assert (kept.total, kept.calls) == (2, 1)


def test_a_listener_that_closes_the_runtime(host: Host) -> None:
    runtime = zs.Runtime()
    with runtime:
        host.install(runtime)
        announcer_class, counter_class = zs.native_class("Announcer"), zs.native_class("Counter")
        announcer, counter = announcer_class(), counter_class()
        announcer.add_to_root()
        counter.add_to_root()
        calls: list[str] = []

        def closer(value: int, source: Any) -> None:
            calls.append("close")
            runtime.close()

        announcer.on_announce.add(closer)
        announcer.on_announce.add(lambda value, source: calls.append("never"))
        announcer.on_announce.add(counter, "count")
        announcer.announce(1)
    assert calls == ["close"]
    assert runtime.closed and announcer.is_expired and counter.is_expired


def test_a_listener_that_closes_the_runtime_from_plain_c(host: Host) -> None:
    runtime = zs.Runtime()
    with runtime:
        host.install(runtime)
        announcer = zs.native_class("Announcer")()
        announcer.add_to_root()
        calls: list[str] = []
        announcer.on_announce.add(lambda value, source: (calls.append("close"), runtime.close()))
        announcer.on_announce.add(lambda value, source: calls.append("never"))
        # The broadcast counts as a call in progress: the native free waits
        # for it, and the listener left is skipped.
        status, report = host.announce(runtime, announcer, 1)
    assert status == ZS_OK and report == (2, 1, 0, 1)
    assert calls == ["close"] and runtime.closed


def test_raising_listeners_are_reported_and_the_others_run(
    rt: zs.Runtime, host: Host, events: Any, unraisable: list[Any]
) -> None:
    announcer_class, counter_class = events
    announcer, counter = announcer_class(), counter_class()
    announcer.add_to_root()
    calls: list[str] = []

    def boom(value: int, source: Any) -> None:
        calls.append("boom")
        raise ValueError("listener failed")

    def interrupt(value: int, source: Any) -> None:
        calls.append("interrupt")
        raise KeyboardInterrupt

    class Wrong(zs.Object):
        def hear(self) -> None:  # takes none of the signature's arguments
            calls.append("wrong")

    wrong = Wrong()
    on = announcer.on_announce
    on.add(boom)
    on.add(interrupt)
    on.add(wrong.hear)
    on.add(counter, "count")
    on.add(lambda value, source: calls.append("last"))
    status, report = host.announce(rt, announcer, 6)
    assert status == CALL_FAILED and report == (5, 5, 3, 0)
    assert calls == ["boom", "interrupt", "last"]
    assert counter.total == 6
    kinds = [type(u.exc_value) for u in unraisable]
    assert kinds == [ValueError, KeyboardInterrupt, TypeError]
    assert "listener failed" in str(unraisable[0].exc_value)
    # Called from Python, the host's function that broadcasts raises what
    # the listeners raised (docs/errors.md): the interrupt wins over the
    # ValueError, and every listener still ran.
    unraisable.clear()
    calls.clear()
    with pytest.raises(KeyboardInterrupt):
        announcer.announce(1)
    assert unraisable == [] and counter.total == 7
    assert calls == ["boom", "interrupt", "last"]


def test_listener_methods_are_found_by_name_and_a_missing_one_is_reported(
    rt: zs.Runtime, host: Host, events: Any, unraisable: list[Any]
) -> None:
    announcer_class, _ = events
    announcer = announcer_class()
    announcer.add_to_root()

    class Fickle(zs.Object):
        def Hear(self, value: int, source: Any) -> None:
            HEARD.append(("Hear", value))

        def gone(self, value: int, source: Any) -> None:
            HEARD.append(("gone", value))

    fickle = Fickle()
    fickle.add_to_root()
    announcer.on_announce.add(fickle, "HEAR")  # interned as spelled: found case-insensitively
    announcer.on_announce.add(fickle, "gone")
    del Fickle.gone
    HEARD.clear()
    status, report = host.announce(rt, announcer, 1)
    assert status == INVALID and report == (2, 2, 1, 0)
    assert HEARD == [("Hear", 1)]
    assert isinstance(unraisable[0].exc_value, AttributeError)
    assert "gone" in str(unraisable[0].exc_value)


def test_execute_from_c_with_a_result(rt: zs.Runtime, events: Any, unraisable: list[Any]) -> None:
    announcer_class, _ = events
    announcer = announcer_class()
    assert announcer.query(3) == -1  # unbound
    announcer.on_query = lambda value: value * 2
    assert announcer.query(21) == 42

    class Oracle(zs.Object):
        def answer(self, value: int) -> int:
            return value + 1000

    oracle = Oracle()
    announcer.on_query = (oracle, "answer")
    assert announcer.query(1) == 1001
    announcer.on_query = lambda value: "not an Int32"
    with pytest.raises(zs.CallbackError) as raised:  # the result could not be written
        announcer.query(1)
    assert isinstance(raised.value.__cause__, TypeError) and unraisable == []
    announcer.on_query = (oracle, "answer")
    assert lib.zs_destroy_object(runtime_ptr(rt), oracle.handle) == ZS_OK
    assert announcer.query(1) == -1  # its object is gone: not called


def test_broadcast_through_cffi_on_python_declared_delegates(rt: zs.Runtime, host: Host) -> None:
    host.install(rt)
    announcer_class = zs.native_class("Announcer")

    class Panel(zs.Object):
        multi: zs.MulticastDelegate
        sparse: zs.SparseDelegate
        single: zs.Delegate

    panel = Panel()
    panel.add_to_root()
    source = announcer_class()
    heard: list[Any] = []
    panel.multi.add(lambda value, src: heard.append(("multi", value, src is source)))
    panel.sparse.add(lambda value, src: heard.append(("sparse", value)))
    panel.single = lambda value: value - 1
    offsets = {info.name: info.offset for info in class_layout(Panel).properties}
    native = runtime_ptr(rt)
    kinds = {"multi": lib.ZS_TYPE_MULTICAST, "sparse": lib.ZS_TYPE_SPARSE}
    block = ffi.new("uint64_t[2]")  # announce_params: an int32_t, then a zs_ref at 8
    ffi.cast("int32_t *", block)[0] = 9
    block[1] = source.handle
    report = ffi.new("zs_broadcast_report *")
    for name, kind in kinds.items():
        out = ffi.new("const zs_type **")
        assert lib.zs_type_basic(native, kind, 0, 0, out) == ZS_OK
        address = ffi.cast("char *", lib.zs_resolve(native, panel.handle)) + offsets[name]
        status = lib.zs_delegate_broadcast(
            native, panel.handle, out[0], address, host.signature("on_announce"), block, report
        )
        assert status == ZS_OK and (report.listeners, report.called) == (1, 1)
    assert heard == [("multi", 9, True), ("sparse", 9)]
    query = ffi.new("int32_t[2]", [50, 0])
    called = ffi.new("int *")
    address = ffi.cast(
        "zs_binding *", ffi.cast("char *", lib.zs_resolve(native, panel.handle)) + offsets["single"]
    )
    status = lib.zs_delegate_execute(
        native, panel.handle, address, host.signature("on_query"), query, called
    )
    assert status == ZS_OK and called[0] == 1 and query[1] == 49


def test_a_signature_python_cannot_read_is_reported(rt: zs.Runtime, unraisable: list[Any]) -> None:
    class Panel(zs.Object):
        multi: zs.MulticastDelegate

    panel = Panel()
    heard: list[Any] = []
    panel.multi.add(lambda value: heard.append(value))
    members = ffi.new("zs_property_desc[1]")
    texts = [ffi.new("char[]", b"value"), ffi.new("char[]", b"NoSuchType")]
    members[0].name, members[0].type, members[0].offset = texts[0], texts[1], 0
    signature = ffi.new("zs_function_desc *")
    name = ffi.new("char[]", b"on_nothing")
    signature.name, signature.block_size = name, 8
    signature.params, signature.param_count = members, 1
    KEEP.append((members, texts, signature, name))  # kept by reference until exit
    native = runtime_ptr(rt)
    out = ffi.new("const zs_type **")
    assert lib.zs_type_basic(native, lib.ZS_TYPE_MULTICAST, 0, 0, out) == ZS_OK
    offset = class_layout(Panel).properties[0].offset
    address = ffi.cast("char *", lib.zs_resolve(native, panel.handle)) + offset
    block = ffi.new("int64_t *", 1)
    report = ffi.new("zs_broadcast_report *")
    status = lib.zs_delegate_broadcast(
        native, panel.handle, out[0], address, signature, block, report
    )
    assert status == INVALID and (report.called, report.failed) == (1, 1) and heard == []
    assert "NoSuchType" in str(unraisable[0].exc_value)


KEEP: list[Any] = []
"""Signatures made in tests: a runtime keeps a signature by reference
until it is freed (zsharp.h), and these must outlive every runtime."""


def test_broadcast_from_another_thread(rt: zs.Runtime, host: Host, events: Any) -> None:
    announcer_class, _ = events
    announcer = announcer_class()
    announcer.add_to_root()
    threads: list[int] = []
    announcer.on_announce.add(lambda value, source: threads.append(threading.get_ident()))
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(host.announce(rt, announcer, 1)))
    worker.start()
    worker.join()
    assert results == [(ZS_OK, (1, 1, 0, 0))]
    assert threads == [worker.ident]


# ---------------------------------------------------------------------------
# The sample engine's events
# ---------------------------------------------------------------------------


def test_sample_engine_broadcasts_its_events(rt: zs.Runtime) -> None:
    sample_engine.install()
    world_class, actor_class = zs.native_class("World"), zs.native_class("Actor")
    transform = zs.native_struct("Transform")
    world = world_class()
    world.add_to_root()
    log: list[Any] = []

    class Guard(actor_class):  # type: ignore[misc, valid-type]
        def on_hurt(self, actor: Any, amount: float, instigator: Any) -> None:
            log.append(("hurt", actor is self, amount, instigator))

        def on_world_tick(self, dt: float, frame: int) -> None:
            log.append(("guard", frame))

    guard = world.spawn(Guard, transform())
    other = world.spawn(actor_class, transform())
    guard.on_damaged.add(guard.on_hurt)
    guard.on_damaged.add(lambda actor, amount, instigator: log.append(("lambda", amount)))
    assert guard.take_damage(30.0, other) == 70.0
    assert log == [("hurt", True, 30.0, other), ("lambda", 30.0)]

    log.clear()
    world.on_tick.add(lambda dt, frame: log.append(("tick", dt, frame)))

    def destroy_guard(dt: float, frame: int) -> None:
        if frame == 2:
            world.destroy(guard)
            collect(rt)

    world.on_tick.add(destroy_guard)
    world.on_tick.add(guard.on_world_tick)  # skipped once the guard is gone
    for dt in (0.5, 0.25, 0.125):
        world.tick(dt)
    assert log == [("tick", 0.5, 1), ("guard", 1), ("tick", 0.25, 2), ("tick", 0.125, 3)]
    assert guard.is_expired


def test_a_result_whose_conversion_closes_the_runtime(host: Host) -> None:
    runtime = zs.Runtime()
    with runtime:
        host.install(runtime)
        announcer = zs.native_class("Announcer")()
        announcer.add_to_root()

        class Closing:
            def __index__(self) -> int:
                runtime.close()
                return 5

        announcer.on_query = lambda value: Closing()
        # The result is converted completely, then written into the host's
        # block (its own memory, which the close does not free).
        assert announcer.query(1) == 5
    assert runtime.closed and announcer.is_expired
