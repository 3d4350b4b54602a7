"""A runtime a native host created and owns, with Python attached to it
(``zs.Runtime.attach``): Python uses the host's classes and its own, and
collects; closing the Python side expires every proxy and value and leaves
the heap to the host, whose later collections need no Python; the host
freeing the runtime closes the Python side first. The "host" here is this
process calling the C API through cffi, as a C program would
(examples/game_host/game.c does it from C, tests/hosts/test_host_build.py)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import zsharp_py as zs
from zsharp_py import sample_engine
from zsharp_py._base.ffi import api_address, ffi, lib


class Pet(zs.Object):
    hp: zs.Int32
    friend: Pet | None
    tags: zs.Array[zs.Int32]


WHEN_CALLED: list[Callable[[], None]] = []  # what Caller.called runs


class Caller(zs.Object):
    """An object the "host" calls a Python method of."""

    def called(self) -> None:
        WHEN_CALLED[0]()


@pytest.fixture
def host_runtime() -> Iterator[Any]:
    """A native runtime the "host" made, with the sample engine's classes
    registered natively before any Python sees it; freed by the host at the
    end (unless the test freed it)."""
    options = ffi.new("zs_runtime_options *")
    lib.zs_runtime_default_options(options)
    out = ffi.new("zs_runtime **")
    assert lib.zs_runtime_new(options, out) == 0
    native = out[0]
    table = ffi.cast("const struct zs_api *", lib.zs_api_table())
    assert lib.zs_sample_engine_install(table, native) == 0
    state = {"native": native, "freed": False}
    yield state
    if not state["freed"]:
        lib.zs_runtime_free(native)


def test_python_attaches_uses_and_lets_go(host_runtime: Any) -> None:
    native = host_runtime["native"]
    rt = zs.Runtime.attach(api_address(native))
    assert not rt.owns_heap
    with rt.activate():
        World = zs.native_class("World")
        world = World()
        world.add_to_root()
        kept = Pet(hp=3)
        kept.add_to_root()
        kept.friend = Pet(hp=4)
        stray = Pet(hp=5)
        tags = zs.Array[zs.Int32]([1, 2, 3])  # a black value: a native block
        assert rt.collect_garbage().objects_freed == 1 and stray.is_expired
    values_before = lib.zs_value_count(native)
    assert values_before >= 1
    rt.close()
    assert rt.closed and kept.is_expired and world.is_expired and tags.is_expired
    # The heap is the host's: its objects stay, the black value's block went.
    assert lib.zs_live_objects(native) == 3
    assert lib.zs_value_count(native) == values_before - 1
    # The host collects with no Python side: nothing waits for an expiry.
    assert lib.zs_collect_garbage(native) == 0
    assert lib.zs_live_objects(native) == 3
    assert lib.zs_heap_verify(native, ffi.NULL, 0) == 0


def test_the_heap_python_let_go_of_runs_on_without_python(host_runtime: Any) -> None:
    """After close() the heap is the host's alone: nothing of Python's is
    called from it or stands in another managed side's way. A host
    function on an object Python used runs natively (no managed call
    handler answers it); the host's collection frees what Python held
    proxies of; another managed side may set its own expiry and free
    handlers (refused while one of Python's is left, zsharp_managed.h);
    and zsharp_py keeps nothing of the Runtime (attach's bookkeeping, the
    host functions' bindings to it), so it is freed."""
    native = host_runtime["native"]
    rt = zs.Runtime.attach(api_address(native))
    with rt.activate():
        Actor = zs.native_class("Actor")
        World = zs.native_class("World")
        hero = Actor()
        hero.max_health, hero.health = 100, 10
        hero.add_to_root()
        hero.heal(1)  # a host function, bound to this runtime (shared by every runtime)
        assert hero.health == 11
        handle = hero.handle
        strays = [Pet(hp=i) for i in range(5)]
        world = World()
        world.add_to_root()
    live = lib.zs_live_objects(native)
    rt.close()
    assert hero.is_expired and world.is_expired and all(pet.is_expired for pet in strays)
    params = ffi.new("int32_t[1]", [5])  # Actor.heal(inout amount: Int32)
    assert lib.zs_call_function(native, handle, b"heal", params) == 0
    assert params[0] == 5 and lib.zs_live_objects(native) == live
    assert lib.zs_collect_garbage(native) == 0
    assert lib.zs_live_objects(native) == live - len(strays)
    assert lib.zs_heap_verify(native, ffi.NULL, 0) == 0
    other = ffi.new("int *")  # another managed side's `user`
    assert lib.zs_set_expiry_handler(native, ffi.NULL, other) == 0
    assert lib.zs_set_free_handler(native, ffi.NULL, other) == 0
    released = weakref.ref(rt)
    del rt, hero, world, strays, Actor, World
    gc.collect()
    assert released() is None


def test_letting_go_during_the_hosts_incremental_cycle(host_runtime: Any) -> None:
    """The host's incremental cycle has gathered objects whose proxies
    Python holds when Python lets go: they are expired then (the host's
    handler is still Python's), and the host's purge finishes without
    Python, freeing them (with none of them left waiting for an expiry
    that no handler would take: ZS_E_EXPIRY_PENDING)."""
    native = host_runtime["native"]
    rt = zs.Runtime.attach(api_address(native))
    with rt.activate():
        kept = Pet(hp=1)
        kept.add_to_root()
        doomed = [Pet(hp=i) for i in range(300)]
        live = lib.zs_live_objects(native)
        assert lib.zs_gc_start_incremental(native) == 0
        done = ffi.new("int *")
        while lib.zs_gc_phase_of(native) == lib.ZS_GC_MARKING:
            assert lib.zs_gc_step_bounded(native, 10**9, 16, done) == 0
        assert lib.zs_gc_expiring_count(native) == len(doomed)  # gathered, not expired yet
        assert not any(pet.is_expired for pet in doomed)
    rt.close()
    assert kept.is_expired and all(pet.is_expired for pet in doomed)
    done[0] = 0
    while not done[0]:  # the host purges in bounded steps, as a frame would
        assert lib.zs_gc_purge_bounded(native, 0, 64, done) == 0
    assert lib.zs_live_objects(native) == live - len(doomed)
    assert lib.zs_collect_garbage(native) == 0
    assert lib.zs_live_objects(native) == live - len(doomed)
    assert lib.zs_heap_verify(native, ffi.NULL, 0) == 0


def test_the_host_freeing_its_runtime_closes_the_python_side(host_runtime: Any) -> None:
    native = host_runtime["native"]
    rt = zs.Runtime.attach(api_address(native))
    with rt.activate():
        pet = Pet(hp=9)
        pet.add_to_root()
        pet.tags = [7, 8]
        tags = pet.tags  # a view into the host's heap
        copy = pet.tags.clone()  # a black value
    lib.zs_runtime_free(native)  # the host frees it: Python closes first
    host_runtime["freed"] = True
    assert rt.closed and pet.is_expired and tags.is_expired and copy.is_expired
    # Messages are formatted when shown, the native name table gone by then.
    assert repr(pet).startswith("<Pet 'Pet_") and "runtime was closed" in repr(pet)
    with pytest.raises(zs.ExpiredConjugateError):
        pet.hp
    rt.close()  # already closed: nothing to do


def test_a_host_freeing_its_runtime_during_a_call_refuses_python_collections(
    host_runtime: Any,
) -> None:
    """The host frees its runtime while it is calling into Python: the free
    waits for the call to return. Python code still running in that call
    cannot collect (the heap refuses it: ExpiredConjugateError, raised by
    the first thing a collection does, the expiry of what is pending); when
    the call returns, the runtime is freed and the Python side closed."""
    native = host_runtime["native"]
    rt = zs.Runtime.attach(api_address(native))
    outcomes: list[tuple[str, type[BaseException] | None, str]] = []

    def free_then_collect() -> None:
        lib.zs_runtime_free(native)
        host_runtime["freed"] = True
        calls: dict[str, Callable[[], object]] = {
            "step": lambda: rt.gc.step(max_objects=8),
            "collect": rt.collect_garbage,
            "start": rt.gc.start_incremental,
        }
        for what, call in calls.items():
            try:
                call()
                outcomes.append((what, None, ""))
            except BaseException as error:  # checked below, outside the native call
                outcomes.append((what, type(error), str(error)))

    WHEN_CALLED[:] = [free_then_collect]
    with rt.activate():
        caller = Caller()
        caller.add_to_root()
        doomed = [Pet(hp=i) for i in range(5)]
        assert lib.zs_call_function(native, caller.handle, b"called", ffi.NULL) == 0
    assert [what for what, _, _ in outcomes] == ["step", "collect", "start"]
    for what, error, message in outcomes:
        assert error is zs.ExpiredConjugateError, (what, error, message)
        assert message.startswith("collect_garbage:"), (what, message)
    assert rt.closed and caller.is_expired and all(pet.is_expired for pet in doomed)
    rt.close()  # already closed: nothing to do


def test_a_collection_the_host_starts_expires_the_scripts_proxies(host_runtime: Any) -> None:
    native = host_runtime["native"]
    rt = zs.Runtime.attach(api_address(native))
    with rt.activate():
        doomed = [Pet(hp=i) for i in range(10)]
        assert lib.zs_collect_garbage(native) == 0
        assert all(pet.is_expired for pet in doomed)
    rt.close()


def test_attach_refuses_what_is_not_a_runtime(host_runtime: Any) -> None:
    for bad in (True, "1", 1.5, None):
        with pytest.raises(TypeError, match="address must be an int"):
            zs.Runtime.attach(bad)  # type: ignore[arg-type]
    for value in (0, -1, 2**64):
        with pytest.raises(ValueError, match="not the address of a zs_runtime"):
            zs.Runtime.attach(value)
    address = api_address(host_runtime["native"])
    rt = zs.Runtime.attach(address)
    with pytest.raises(RuntimeError, match="already open"):
        zs.Runtime.attach(address)
    rt.close()
    again = zs.Runtime.attach(address)  # let go: another may attach
    again.close()


def test_the_sample_engine_installed_natively_is_found(host_runtime: Any) -> None:
    rt = zs.Runtime.attach(api_address(host_runtime["native"]))
    with rt.activate():
        assert "World" in zs.native_classes()
        with pytest.raises(ValueError, match="installed in this runtime already"):
            sample_engine.install()
    rt.close()
