"""Collections a native host starts, from C, while Python holds proxies.

Whoever starts a collection (a host's C code, a host function, another
thread), the native purge hands the dying objects that have conjugates to
the expiry handler the binding registered when the runtime opened
(``zs_set_expiry_handler``, native/include/zsharp_managed.h); the handler takes the
GIL and expires their conjugates and views before any memory goes. These
tests drive every public host call that collects, from a host compiled
against ``zsharp_api.h`` (the table a host calls through), and check that
when the call returns each proxy of a freed object is expired, reads
raise ``ExpiredConjugateError`` and the heap verifies: a proxy never reads
freed memory (the sanitizer smoke run, tools/sanitize.sh, runs this file
against the ASan/UBSan build)."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

import zsharp_py as zs
from helpers import runtime_ptr
from native_build import compile_host
from zsharp_py._base.ffi import ffi as zs_ffi
from zsharp_py._base.ffi import lib as zs_lib
from zsharp_py._model.object import class_layout
from zsharp_py.lowlevel import api_table

HOST = r"""
#include <threads.h>
#include "zsharp_api.h"

static const zs_api *api;

int host_init(const void *table) {
    api = table;
    return api->version == ZS_API_VERSION && api->size == sizeof *api;
}

int host_collect(void *rt) { return (int)api->zs_collect_garbage(rt); }

/* The header's old recipe for a managed side: mark and gather, then purge. */
int host_mark_gather_purge(void *rt) {
    zs_status status = api->zs_gc_mark_and_gather(rt);
    if (status != ZS_OK) return 100 + (int)status;
    int done = 0;
    return (int)api->zs_gc_purge(rt, 0, &done) * 10 + done;
}

/* An incremental cycle from C: start, steps of budget_ns, then a purge in
   steps of one object each; the number of purge steps it took, or -status. */
int host_incremental(void *rt, uint64_t budget_ns) {
    zs_status status = api->zs_gc_start_incremental(rt);
    int done = 0, steps = 0;
    while (status == ZS_OK && !done) status = api->zs_gc_step(rt, budget_ns, &done);
    done = 0;
    while (status == ZS_OK && !done) {
        status = api->zs_gc_purge_bounded(rt, 0, 1, &done);
        steps++;
    }
    return status == ZS_OK ? steps : -(int)status;
}

int host_destroy(void *rt, uint64_t handle) { return (int)api->zs_destroy_object(rt, handle); }

/* A host embedding Python that collects with a Python exception pending
   and the GIL held (called through ctypes.PyDLL): `set_error` is
   PyErr_SetString, called first with `type`. */
typedef void (*set_error_fn)(void *type, const char *message);
int host_collect_with_error_pending(void *rt, set_error_fn set_error, void *type) {
    set_error(type, "pending before the collection");
    return (int)api->zs_collect_garbage(rt);
}

int host_store(void *rt, uint64_t holder, uint32_t offset, uint64_t target) {
    return (int)api->zs_store_ref(rt, holder, offset, target);
}

typedef struct job {
    void *rt;
    int rounds;
    int failures;
} job;

static int collector(void *argument) {
    job *work = argument;
    for (int i = 0; i < work->rounds; i++)
        if (api->zs_collect_garbage(work->rt) != ZS_OK) work->failures++;
    return 0;
}

/* Collect `rounds` times on a thread of its own; the failures. The caller
   (cffi) released the GIL, which the expiry handler takes on that thread. */
int host_collect_on_thread(void *rt, int rounds) {
    job work = {rt, rounds, 0};
    thrd_t thread;
    if (thrd_create(&thread, collector, &work) != thrd_success) return -1;
    thrd_join(thread, NULL);
    return work.failures;
}
"""

CDEF = """
int host_init(const void *table);
int host_collect(void *rt);
int host_mark_gather_purge(void *rt);
int host_incremental(void *rt, uint64_t budget_ns);
int host_collect_on_thread(void *rt, int rounds);
int host_destroy(void *rt, uint64_t handle);
int host_collect_with_error_pending(void *rt, void *set_error, void *type);
int host_store(void *rt, uint64_t holder, uint32_t offset, uint64_t target);
"""


class Spot(zs.Struct):
    x: zs.Float64
    y: zs.Float64


class Crate(zs.Object):
    weight: zs.Int32
    where: Spot
    path: zs.Array[Spot]
    contents: zs.Array["Crate"]
    buddy: "Crate | None"


@pytest.fixture(scope="module")
def host() -> Any:
    _ffi, lib, _path = compile_host(HOST, "host_collections", CDEF)
    assert lib.host_init(_ffi.cast("const void *", api_table())) == 1
    return lib


@pytest.fixture(scope="module")
def host_with_gil(host: Any) -> Any:
    """The same host (initialised), loaded by ctypes.PyDLL: its functions
    run with the GIL held, and a Python exception they leave pending is
    raised when they return, as a host embedding Python would see it."""
    _ffi, _lib, path = compile_host(HOST, "host_collections", CDEF)
    return ctypes.PyDLL(str(path))


def address(rt: zs.Runtime) -> Any:
    """The native runtime as the host's ``void *``."""
    return zs_ffi.cast("void *", rt.native_address)


def doomed_crates(count: int) -> tuple[Crate, list[Crate], list[Any]]:
    """A rooted keeper and ``count`` unreachable crates, each held by a proxy,
    with a struct view, an element view of a struct array and an element of
    an object array read from each."""
    keeper = Crate(weight=-1)
    keeper.add_to_root()
    crates = [Crate(weight=i) for i in range(count)]
    views: list[Any] = []
    for crate in crates:
        crate.where = Spot(1.0, 2.0)
        crate.path = [Spot(3.0, 4.0)]
        crate.contents = [Crate(weight=100)]
        views += [crate.where, crate.path[0], crate.path, crate.contents]
    return keeper, crates, views


def assert_expired(crates: list[Crate], views: list[Any]) -> None:
    """Every proxy and view expired; a read raises instead of reading freed memory."""
    assert all(crate.is_expired for crate in crates)
    assert all(view.is_expired for view in views)
    with pytest.raises(zs.ExpiredConjugateError, match="unreachable"):
        crates[0].weight
    with pytest.raises(zs.ExpiredConjugateError):
        views[0].x
    with pytest.raises(zs.ExpiredConjugateError):
        len(views[2])


def test_a_full_collection_from_c_expires_before_it_frees(rt: zs.Runtime, host: Any) -> None:
    keeper, crates, views = doomed_crates(40)
    assert rt.live_objects() == 81
    assert host.host_collect(address(rt)) == 0
    assert rt.live_objects() == 1  # freed inside the call, not left for Python
    assert_expired(crates, views)
    assert keeper.weight == -1 and not keeper.is_expired
    rt.gc.verify()


def test_the_headers_old_recipe_cannot_reach_freed_memory(rt: zs.Runtime, host: Any) -> None:
    """A host that followed the old header's protocol (mark and gather, take
    the expiring list, purge) made the next read of a proxy read freed
    memory. zs_gc_take_expiring is no longer in the host's table and
    refuses while the expiry handler is set; the purge hands the objects
    over instead."""
    _keeper, crates, views = doomed_crates(8)
    assert zs_lib.zs_gc_mark_and_gather(runtime_ptr(rt)) == 0
    assert not crates[0].is_expired  # dying, gathered, still in memory
    with pytest.raises(zs.ExpiredConjugateError):
        crates[0].weight = 5  # a dying object is not written
    buffer = zs_ffi.new("zs_ref[]", 16)
    count = zs_ffi.new("uint32_t *")
    assert zs_lib.zs_gc_take_expiring(runtime_ptr(rt), buffer, 16, count) == zs_lib.ZS_E_BUSY
    assert count[0] == 0
    assert host.host_mark_gather_purge(address(rt)) == 1  # OK, done
    assert_expired(crates, views)
    assert rt.live_objects() == 1
    rt.gc.verify()


@pytest.mark.parametrize("budget_ns", [1, 1_000_000])
def test_an_incremental_cycle_from_c(rt: zs.Runtime, host: Any, budget_ns: int) -> None:
    _keeper, crates, views = doomed_crates(40)
    steps = host.host_incremental(address(rt), budget_ns)
    assert steps >= 80  # one object per purge step: every dead crate and its content
    assert rt.live_objects() == 1
    assert_expired(crates, views)
    rt.gc.verify()


def test_a_collection_on_another_thread(rt: zs.Runtime, host: Any) -> None:
    """A C thread collects while the Python thread waits in a cffi call
    (the GIL released): the handler takes the GIL on the collecting thread."""
    _keeper, crates, views = doomed_crates(40)
    assert host.host_collect_on_thread(address(rt), 3) == 0
    assert rt.live_objects() == 1
    assert_expired(crates, views)
    rt.gc.verify()


class Finaliser:
    """Runs ``action`` when freed: Python code inside the expiry (a
    stateful object's state is released as its proxy expires)."""

    def __init__(self, action: Any) -> None:
        self.action = action

    def __del__(self) -> None:
        self.action()


class Keeper(Crate):
    """A crate with Python state: its state is released by the expiry."""

    note: Any = zs.state()


def test_python_collecting_inside_the_handlers_expiry_is_refused(rt: zs.Runtime, host: Any) -> None:
    """Python code that runs while the handler expires conjugates (a
    finaliser of released state; a gc callback would do the same) and
    collects is refused, not run inside the hand-over; the host's
    collection finishes, and the objects expire."""
    outcomes: list[str] = []

    def collect_inside() -> None:
        try:
            rt.collect_garbage()
            outcomes.append("collected")
        except (RuntimeError, zs.ExpiredConjugateError) as error:
            outcomes.append(f"{type(error).__name__}: {error}")

    keepers = [Keeper(weight=i) for i in range(300)]  # more than one batch of 256
    for keeper in keepers:
        keeper.note = Finaliser(collect_inside)
    assert host.host_collect(address(rt)) == 0
    # Refused by the heap (a hand-over is in progress) or, nested inside a
    # refused attempt, by the runtime's own re-entry guard: never run.
    assert len(outcomes) == 300
    assert any("the heap cannot be changed now" in outcome for outcome in outcomes)
    assert all(
        outcome.startswith("RuntimeError: collect_garbage") and "cannot" in outcome
        for outcome in outcomes
    ), set(outcomes)
    assert all(keeper.is_expired for keeper in keepers)
    assert rt.live_objects() == 0
    rt.gc.verify()


def test_a_destroy_from_c_expires_at_once_and_frees_with_the_next_collection(
    rt: zs.Runtime, host: Any
) -> None:
    """zs_destroy_object (Unreal's DestroyActor): the proxy and its views
    expire before the call returns; a reference to the object reads as None;
    every call naming it is refused as for a dying object; its memory goes
    with the next collection, which nulls the references to it."""
    keeper = Crate(weight=-1)
    keeper.add_to_root()
    victim = Crate(weight=7)
    victim.add_to_root()  # a destroyed root is unrooted: it would never be freed
    victim.where = Spot(1.0, 2.0)
    where, handle = victim.where, victim.handle
    keeper.buddy = victim
    assert host.host_destroy(address(rt), handle) == 0
    assert victim.is_expired and where.is_expired  # at once, no collection yet
    with pytest.raises(zs.ExpiredConjugateError, match="garbage"):
        victim.weight
    assert rt.live_objects() == 2  # the memory is still there...
    assert keeper.buddy is None  # ...but no new proxy of it is made
    buddy = next(p.offset for p in class_layout(Crate).properties if p.name == "buddy")
    stored = host.host_store(address(rt), keeper.handle, buddy, handle)
    assert stored == zs_lib.ZS_E_DYING  # no store from C names it either
    assert host.host_destroy(address(rt), handle) == zs_lib.ZS_E_DYING  # destroyed once
    assert host.host_collect(address(rt)) == 0
    assert rt.live_objects() == 1 and keeper.buddy is None
    assert host.host_destroy(address(rt), handle) == zs_lib.ZS_E_STALE
    rt.gc.verify()


def test_a_collection_from_c_gives_back_the_callers_pending_error(
    rt: zs.Runtime, host_with_gil: Any, unraisable: list[Any]
) -> None:
    """The expiry handler sets the caller's pending exception aside while
    it expires, and gives it back: the host's caller still sees its own
    error, and the handler's own (an expiry that failed) is reported,
    not put in its place."""
    collect_pending = host_with_gil.host_collect_with_error_pending
    collect_pending.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.py_object)
    collect_pending.restype = ctypes.c_int
    set_error = ctypes.cast(ctypes.pythonapi.PyErr_SetString, ctypes.c_void_p)
    for faults in (0, 1):
        keeper, crates, views = doomed_crates(8)
        rt.gc._debug_fail_expiries(faults)
        with pytest.raises(LookupError, match="pending before the collection"):
            collect_pending(rt.native_address, set_error, LookupError)
        assert [type(report.exc_value) for report in unraisable] == [MemoryError] * faults
        assert rt.live_objects() == 1
        keeper.remove_from_root()
        assert all(crate.is_expired for crate in crates)
        assert all(view.is_expired for view in views)
    rt.gc.verify()


def test_the_managed_sides_calls_cannot_undo_its_guarantee(rt: zs.Runtime) -> None:
    """Called by anyone but the binding (a host linking the library, here
    through cffi), the managed side's calls that could leave a proxy behind
    its object are refused: removing or replacing the binding's expiry
    handler, forgetting the conjugate flag of an object Python holds, and
    saying its conjugate was dropped."""
    crate = Crate(weight=1)
    assert (
        zs_lib.zs_set_expiry_handler(runtime_ptr(rt), zs_ffi.NULL, zs_ffi.NULL) == zs_lib.ZS_E_BUSY
    )
    assert zs_lib.zs_forget_conjugate(runtime_ptr(rt), crate.handle) == zs_lib.ZS_E_BUSY
    # Saying its conjugate was dropped, even as the object's sole holder
    # (which would destroy it at once), is the binding's alone too.
    dropped = zs_ffi.new("zs_dropped_conjugate[1]", [(crate.handle, 1, 0)])
    destroyed = zs_ffi.new("uint32_t *", 7)
    status = zs_lib.zs_conjugates_dropped(runtime_ptr(rt), zs_ffi.NULL, dropped, 1, destroyed)
    assert status == zs_lib.ZS_E_BUSY and destroyed[0] == 0 and rt.live_objects() == 1
    made = zs_ffi.new("void **")
    refused = zs_lib.zs_object_new_conjugate(
        runtime_ptr(rt),
        zs_lib.zs_class_by_id(runtime_ptr(rt), 0),
        0,
        0,
        0,
        zs_ffi.NULL,
        0,
        made,
        dropped,
        1,
        zs_ffi.NULL,
    )
    assert refused == zs_lib.ZS_E_BUSY and rt.live_objects() == 1
    assert crate.weight == 1
    rt.collect_garbage()
    assert crate.is_expired and rt.live_objects() == 0  # the flag stood: expired, then freed
    with pytest.raises(zs.ExpiredConjugateError):
        crate.weight
