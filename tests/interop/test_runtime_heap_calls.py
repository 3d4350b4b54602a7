"""The Python layer's heap calls through zsharp_py._core (the ``_heap_*``
methods of native/binding/reflection.c and heap_calls.c): the lifetime
controls of objects, the queries of zsharp_py.testing, hosts'
descriptions, status texts, the header's constants and C type layouts, and
the C API's addresses. Each converts its arguments first, then checks that
the runtime is open, then calls the heap."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest

import zsharp_py as zs
from classes import Actor
from zsharp_py import _core
from zsharp_py._base.errors import status_message
from zsharp_py._base.ffi import ffi, lib
from zsharp_py._runtime.collector import _STATS_LAYOUT

CLOSED = "the runtime has been closed"

# Every RuntimeCore method of zpy_reflection.c that reaches the heap, and
# zpy_heap_calls.c's class resolution, called with plausible arguments.
HEAP_CALLS: dict[str, Callable[[zs.Runtime, int], Any]] = {
    "_heap_add_to_root": lambda rt, h: rt._heap_add_to_root(h, "what"),
    "_heap_remove_from_root": lambda rt, h: rt._heap_remove_from_root(h, "what"),
    "_heap_mark_as_garbage": lambda rt, h: rt._heap_mark_as_garbage(h, "what"),
    "_heap_dissolve_cluster": lambda rt, h: rt._heap_dissolve_cluster(h, "what"),
    "_heap_add_strong_ref": lambda rt, h: rt._heap_add_strong_ref(h, "what"),
    "_heap_object_writable": lambda rt, h: rt._heap_object_writable(h, "what"),
    "_heap_is_rooted": lambda rt, h: rt._heap_is_rooted(h),
    "_heap_is_garbage": lambda rt, h: rt._heap_is_garbage(h),
    "_heap_is_permanent": lambda rt, h: rt._heap_is_permanent(h),
    "_heap_live_handles": lambda rt, h: rt._heap_live_handles("what"),
    "_heap_class_names": lambda rt, h: rt._heap_class_names(),
    "_heap_find_class": lambda rt, h: rt._heap_find_class(b"Actor"),
    "_heap_resolve_class": lambda rt, h: rt._heap_resolve_class(h),
    "_heap_describe_class": lambda rt, h: rt._heap_describe_class(0),
    "_heap_find_struct": lambda rt, h: rt._heap_find_struct(b"Vec"),
    "_heap_find_enum": lambda rt, h: rt._heap_find_enum(b"ETeam"),
    "_heap_class_id_of": lambda rt, h: rt._heap_class_id_of(Actor),
}


class _Closing:
    """A handle whose ``__index__`` closes the runtime first."""

    def __init__(self, runtime: zs.Runtime, handle: int) -> None:
        self.runtime, self.handle = runtime, handle

    def __index__(self) -> int:
        self.runtime.close()
        return self.handle


@pytest.mark.parametrize("call", sorted(HEAP_CALLS))
def test_a_closed_runtime_refuses_every_heap_call(call: str) -> None:
    rt = zs.Runtime()
    with rt.activate():
        handle = Actor().handle
    rt.close()
    with pytest.raises(zs.ExpiredConjugateError, match=CLOSED):
        HEAP_CALLS[call](rt, handle)


# The collection protocol's entry points (native/binding/zpy_collection.c),
# called as rt.gc calls them.
COLLECTION_CALLS: dict[str, Callable[[zs.Runtime], Any]] = {
    "_collect_full": lambda rt: rt._collect_full(_STATS_LAYOUT),
    "_gc_start_incremental": lambda rt: rt._gc_start_incremental(),
    "_gc_step": lambda rt: rt._gc_step(0, 8),
    "_gc_expire_pending": lambda rt: rt._gc_expire_pending(),
    "_gc_stats": lambda rt: rt._gc_stats(_STATS_LAYOUT),
}


@pytest.mark.parametrize("call", sorted(COLLECTION_CALLS))
def test_a_closed_runtime_refuses_the_collection_protocol(call: str) -> None:
    """rt.gc checks first; each C entry point checks again (that of the
    expiry a refused call asks for, _gc_expire_pending, in its first batch:
    zpy_expire_dying) and raises, never returning a result with the
    exception still set (a SystemError)."""
    rt = zs.Runtime()
    with rt.activate():
        Actor()
    rt.close()
    with pytest.raises(RuntimeError, match="the runtime is closed") as raised:
        COLLECTION_CALLS[call](rt)
    assert type(raised.value) is RuntimeError


@pytest.mark.parametrize(
    "call",
    [
        "_heap_add_to_root",
        "_heap_mark_as_garbage",
        "_heap_add_strong_ref",
        "_heap_is_rooted",
        "_heap_resolve_class",
    ],
)
def test_a_handle_that_closes_the_runtime_is_converted_before_the_check(call: str) -> None:
    rt = zs.Runtime()
    with rt.activate():
        handle = Actor().handle
    with pytest.raises(zs.ExpiredConjugateError, match=CLOSED):
        HEAP_CALLS[call](rt, _Closing(rt, handle))  # type: ignore[arg-type]
    assert rt.closed


def test_abandon_does_nothing_once_the_runtime_is_closed() -> None:
    rt = zs.Runtime()
    with rt.activate():
        handle = Actor().handle
    rt._heap_abandon(_Closing(rt, handle))  # type: ignore[arg-type]
    assert rt.closed


def test_abandon_unroots_and_marks_as_garbage(rt: zs.Runtime) -> None:
    a = Actor()
    a.add_to_root()
    rt._heap_abandon(a.handle)
    assert not a.is_rooted and a.is_garbage
    rt._heap_abandon(a.handle)  # not rooted any more: no error


def test_a_stale_handle_raises_as_check_did(rt: zs.Runtime) -> None:
    a = Actor()
    handle = a.handle
    del a
    rt.collect_garbage()
    with pytest.raises(zs.ExpiredConjugateError, match=r"^Actor\.add_to_root: "):
        rt._heap_add_to_root(handle, "Actor.add_to_root")
    with pytest.raises(zs.ExpiredConjugateError, match=r"^query: "):
        rt._heap_is_garbage(handle)


def test_handles_are_converted_as_cffi_converted_them(rt: zs.Runtime) -> None:
    with pytest.raises(TypeError):
        rt._heap_is_rooted("1")  # type: ignore[arg-type]
    with pytest.raises(OverflowError):
        rt._heap_is_rooted(-1)
    with pytest.raises(OverflowError):
        rt._heap_is_rooted(2**64)


def test_live_handles_lists_every_live_object(rt: zs.Runtime) -> None:
    made = [Actor() for _ in range(5)]
    assert [a.handle for a in made] == [
        h for h in rt._heap_live_handles("what") if h in {a.handle for a in made}
    ]
    assert len(rt._heap_live_handles("what")) == rt.live_objects()


def test_classes_are_named_by_id_and_found_by_name(rt: zs.Runtime) -> None:
    a = Actor()
    class_id = rt._heap_class_id_of(Actor)
    assert rt._heap_class_names()[class_id] == "Actor"
    assert rt._heap_find_class(b"Actor") == class_id
    assert rt._heap_find_class(b"Act") is None and rt._heap_find_class(b"Actor\0") is None
    name, parent, parent_id, size, address, properties, functions = rt._heap_describe_class(
        class_id
    )
    assert (name, parent, functions) == ("Actor", "Object", ())
    assert parent_id == rt._heap_find_class(b"Object")
    assert size == len(rt._object_bytes(a.handle))
    assert rt._heap_resolve_class(a.handle) == class_id and address != 0
    assert rt._heap_resolve_class(0) is None
    assert "health" in [row[0] for row in properties]
    with pytest.raises(ValueError, match="no class has id"):
        rt._heap_describe_class(len(rt._heap_class_names()))
    with pytest.raises(TypeError):
        rt._heap_find_class("Actor")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a conjugate class"):
        rt._heap_class_id_of(int)


def test_object_header_reads_a_live_object_only(rt: zs.Runtime) -> None:
    boss = Actor(name="Boss")
    a = Actor(name="Hero", outer=boss)
    index, number, outer = _core.object_header(a)
    assert rt._name_text(index, number) == "Hero" and outer == boss.handle
    with pytest.raises(TypeError, match="zs.Object"):
        _core.object_header(3)
    b = Actor()
    b.mark_as_garbage()
    rt.collect_garbage()
    with pytest.raises(zs.ExpiredConjugateError, match="marked as garbage"):
        _core.object_header(b)


def test_status_texts_and_constants_are_the_headers() -> None:
    for status in range(lib.ZS_E_CALL_FAILED + 2):
        assert status_message(status) == ffi.string(lib.zs_status_message(status)).decode()
    with pytest.raises(OverflowError):
        _core.status_message(2**40)
    for name in (
        "OK", "E_NOMEM", "E_CAPACITY", "E_STALE", "E_INVALID", "E_BUSY", "E_EXPIRY_PENDING",
        "E_DYING", "E_CORRUPT", "E_CALL_FAILED", "TYPE_PLAIN", "TYPE_OBJECT",
        "TYPE_WEAK_OBJECT", "TYPE_STRING", "TYPE_STRUCT", "TYPE_ARRAY", "TYPE_SET", "TYPE_MAP",
        "TYPE_OPTIONAL", "TYPE_DELEGATE", "TYPE_MULTICAST", "TYPE_SPARSE", "MEMBER_OBJECT",
        "MEMBER_WEAK_OBJECT", "MEMBER_OBJECT_ARRAY", "MEMBER_VALUE", "CLASS_CLUSTER_ROOT",
        "CLASS_IN_CLUSTER",
    ):  # fmt: skip
        assert getattr(_core, name) == getattr(lib, f"ZS_{name}"), name
    assert ffi.sizeof("zs_object") == _core.OBJECT_HEADER_SIZE


class _ClosesOnCollection:
    """Garbage in a reference cycle whose finaliser closes a runtime."""

    def __init__(self, runtime: zs.Runtime) -> None:
        self.runtime = runtime
        self.cycle = self

    def __del__(self) -> None:
        self.runtime.close()


READS: dict[str, Callable[[zs.Runtime, int], Any]] = {
    "_heap_describe_class": lambda rt, class_id: rt._heap_describe_class(class_id)[0] == "Actor",
    "_heap_class_names": lambda rt, class_id: rt._heap_class_names()[class_id] == "Actor",
    "_heap_find_struct": lambda rt, class_id: rt._heap_find_struct(b"NoSuchStruct") is None,
}


@pytest.mark.parametrize("read", sorted(READS))
def test_no_finaliser_runs_while_a_description_is_read(read: str) -> None:
    # Python's collector is made to run at (nearly) every allocation, and a
    # finaliser it runs closes the runtime: the read either finds it closed
    # first or reads the whole description before any finaliser runs.
    rt = zs.Runtime()
    with rt.activate():
        Actor()
    class_id = rt._heap_class_id_of(Actor)
    threshold = gc.get_threshold()
    gc.collect()
    try:
        _ClosesOnCollection(rt)
        gc.set_threshold(1)
        try:
            assert READS[read](rt, class_id)
        except zs.ExpiredConjugateError as error:
            assert str(error) == CLOSED
    finally:
        gc.set_threshold(*threshold)
        gc.collect()
    assert rt.closed


def test_the_c_api_addresses_are_the_tables_slots() -> None:
    """``_core.api_functions()`` (what ``lowlevel.native_function`` gives)
    holds the host table's functions, in its order, at the addresses the
    table (``_core.api_table()``, zs_api_table()) holds; never the managed
    side's own."""
    functions = _core.api_functions()
    assert _core.api_table() == int(ffi.cast("uintptr_t", lib.zs_api_table()))
    assert functions.pop("zs_api_table") != 0
    header = ffi.cast("uint32_t *", _core.api_table())
    slots = ffi.cast("uintptr_t *", _core.api_table() + 8)
    assert header[1] == 8 + ffi.sizeof("void *") * len(functions)
    assert [int(slots[i]) for i in range(len(functions))] == list(functions.values())
    assert not set(functions) & set(_core.managed_functions())


def test_the_c_layouts_are_the_compilers() -> None:
    for name, (size, align) in _core.C_LAYOUTS.items():
        assert (ffi.sizeof(name), ffi.alignof(name)) == (size, align), name
