"""Handles and proxies, both ways: ``rt.object_from_handle`` and
``obj.handle`` in Python, ``zsharp_python.h`` (``proxy_of``, ``handle_of``)
in C, for objects Python holds a proxy of, objects it never saw, and
handles of freed objects."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import zsharp_py as zs
from helpers import runtime_ptr
from native_build import compile_host
from zsharp_py import _core
from zsharp_py._base.ffi import ffi, lib
from zsharp_py.lowlevel import python_table

HOST = r"""
#include "zsharp_python.h"

static const zs_python_api *py;

int host_init(const void *table) {
    py = table;
    return py->version == ZS_PYTHON_API_VERSION && py->size == sizeof *py;
}

/* proxy_of: a new reference, or NULL with the error set. */
PyObject *host_proxy_of(void *rt, uint64_t handle) { return py->proxy_of(py, rt, handle); }

/* handle_of: the handle, and the runtime through `rt_out`; 0 with the error set. */
PyObject *host_handle_of(PyObject *proxy, void **rt_out) {
    zs_runtime *rt = NULL;
    zs_ref handle = 0;
    if (py->handle_of(py, proxy, &rt, &handle) < 0) return NULL;
    *rt_out = rt;
    return PyLong_FromUnsignedLongLong(handle);
}

/* handle_of's own answer for what it must refuse (`null`: a NULL pointer
   instead of `proxy`): (its return value, the type of the error it set),
   the error taken back. */
PyObject *host_handle_refusal(PyObject *proxy, int null) {
    zs_runtime *rt = NULL;
    zs_ref handle = 0;
    int status = py->handle_of(py, null ? NULL : proxy, &rt, &handle);
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *result = Py_BuildValue("(iO)", status, type != NULL ? type : Py_None);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    return result;
}
"""


class Beacon(zs.Object):
    signal: zs.Int32
    next: Beacon | None


@pytest.fixture(scope="module")
def host() -> Any:
    include = Path(sysconfig.get_paths()["include"])
    _ffi, _lib, path = compile_host(HOST, "host_handles", include_dirs=[include])
    # ctypes.PyDLL holds the GIL through each call, as these functions need.
    lib = ctypes.PyDLL(str(path))
    lib.host_init.argtypes = [ctypes.c_void_p]
    lib.host_proxy_of.restype = ctypes.py_object
    lib.host_proxy_of.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    lib.host_handle_of.restype = ctypes.py_object
    lib.host_handle_of.argtypes = [ctypes.py_object, ctypes.POINTER(ctypes.c_void_p)]
    lib.host_handle_refusal.restype = ctypes.py_object
    lib.host_handle_refusal.argtypes = [ctypes.py_object, ctypes.c_int]
    assert lib.host_init(python_table()) == 1
    return lib


def test_python_maps_handles_to_proxies_and_back(rt: zs.Runtime) -> None:
    head = Beacon(signal=1)
    head.add_to_root()
    head.next = Beacon(signal=2)
    handle = head.next.handle  # its proxy is dropped: the lookup makes one
    found = rt.object_from_handle(handle)
    assert isinstance(found, Beacon) and found.signal == 2 and found.handle == handle
    assert rt.object_from_handle(handle) is found  # the proxy Python holds
    assert rt.object_from_handle(0) is None
    stray = Beacon()
    stale = stray.handle
    del stray
    rt.collect_garbage()
    assert rt.object_from_handle(stale) is None  # freed: its slot's serial moved on


class HostileIndex(int):
    """An int whose own __index__ would run code and lie."""

    def __index__(self) -> int:
        raise AssertionError("a subclass's __index__ must not be called")


def test_object_from_handle_refuses_what_is_not_a_handle(rt: zs.Runtime) -> None:
    beacon = Beacon()
    for bad in (True, "1", 1.0, None):
        with pytest.raises(TypeError, match="a handle is an int"):
            rt.object_from_handle(bad)  # type: ignore[arg-type]
    for bad_value in (-1, 2**64):
        with pytest.raises(ValueError, match="is not a handle"):
            rt.object_from_handle(bad_value)
    # Every 64-bit value is a handle: one no object has (forged, or freed
    # long ago) names nothing, up to the largest.
    for forged in (2**64 - 1, beacon.handle | 0xFFFF_FFFF << 32, 0xFFFF_FFFF):
        assert rt.object_from_handle(forged) is None
    assert rt.object_from_handle(HostileIndex(beacon.handle)) is beacon
    rt.close()
    with pytest.raises(zs.ExpiredConjugateError, match="closed"):
        rt.object_from_handle(beacon.handle)


def test_c_maps_handles_to_proxies_and_back(rt: zs.Runtime, host: Any) -> None:
    head = Beacon(signal=1)
    head.add_to_root()
    head.next = Beacon(signal=5)
    cold = head.next.handle  # no proxy of it is held now
    rt_address = rt.native_address
    made = host.host_proxy_of(rt_address, cold)
    assert isinstance(made, Beacon) and made.signal == 5
    assert host.host_proxy_of(rt_address, cold) is made
    assert host.host_proxy_of(rt_address, 0) is None
    out = ctypes.c_void_p()
    assert host.host_handle_of(head, ctypes.byref(out)) == head.handle
    assert out.value == rt_address
    with pytest.raises(TypeError, match="expected a zs.Object"):
        host.host_handle_of(42, ctypes.byref(out))
    head.next = None
    rt.collect_garbage()
    assert made.is_expired
    assert host.host_proxy_of(rt_address, cold) is None  # freed
    with pytest.raises(zs.ExpiredConjugateError):
        host.host_handle_of(made, ctypes.byref(out))
    # Each refusal returns -1 with its error set: a host that checks only
    # the return value never reads a handle that was not written.
    assert host.host_handle_refusal(made, 0) == (-1, zs.ExpiredConjugateError)
    assert host.host_handle_refusal(42, 0) == (-1, TypeError)
    assert host.host_handle_refusal(None, 1) == (-1, TypeError)  # a NULL pointer


@pytest.mark.parametrize("held", [True, False], ids=["proxy held", "no proxy"])
def test_proxy_of_never_hands_out_a_dying_object(rt: zs.Runtime, host: Any, held: bool) -> None:
    """Between the end of an incremental mark and the purge an unreachable
    object is dying: proxy_of gives None for it, the proxy Python still
    holds included (its bounded expiry is pending), while a live one is
    found; before the mark is complete it is found (not dying yet).
    tests/gc/test_phase_edge_lookups.py does the same for every Python path."""
    head = Beacon(signal=1)
    head.add_to_root()
    head.next = Beacon(signal=2)
    live = head.next.handle
    doomed = [Beacon(signal=3) for _ in range(400)]  # a bounded expiry of several steps
    handles = [b.handle for b in doomed]
    for beacon in doomed:  # stored once: the heap shared the handles (never freed at once)
        head.next.next = beacon
    head.next.next = None
    if not held:
        del doomed
    rt_address = rt.native_address
    rt.gc.start_incremental()
    while rt.gc.phase == "marking":
        assert host.host_proxy_of(rt_address, handles[-1]) is not None  # not dying yet
        rt.gc.step(max_objects=16)
    while rt.gc.phase in ("gathering", "purging"):
        assert host.host_proxy_of(rt_address, live).signal == 2
        assert all(host.host_proxy_of(rt_address, h) is None for h in handles[::37])
        if rt.gc.step(max_objects=64):
            break
    assert rt.gc.phase == "idle"
    assert all(host.host_proxy_of(rt_address, h) is None for h in handles)
    rt.gc.verify()


def test_proxy_of_needs_an_open_runtime(host: Any) -> None:
    runtime = zs.Runtime()
    address = runtime.native_address
    runtime.close()
    with pytest.raises(RuntimeError, match="no open zs.Runtime"):
        host.host_proxy_of(address, 1)
    with pytest.raises(RuntimeError, match="no open zs.Runtime"):
        host.host_proxy_of(None, 1)


def test_proxy_of_refuses_a_runtime_that_is_closing(rt: zs.Runtime, host: Any) -> None:
    """Once close() has begun (the runtime's life is closing; a host called
    from a finaliser or a gc callback of close() can run then) the runtime
    is not open any more: proxy_of raises RuntimeError as after close(),
    for a handle whose proxy Python holds too (close() is about to expire
    it), and for the null handle."""
    head = Beacon(signal=1)
    head.add_to_root()
    address = rt.native_address
    assert host.host_proxy_of(address, head.handle) is head
    assert rt._life_enter(_core.LIFE_CLOSE, "close()")  # what close() does first
    try:
        for handle in (head.handle, 0):
            with pytest.raises(RuntimeError, match="no open zs.Runtime"):
                host.host_proxy_of(address, handle)
    finally:
        rt._life_leave(_core.LIFE_CLOSE)
    rt.close()
    assert head.is_expired


PAST_THE_CLASS_TABLE = textwrap.dedent("""
    import zsharp_py as zs
    from zsharp_py._base.ffi import ffi, lib

    kept = []
    with zs.Runtime() as rt:
        native = ffi.cast("zs_runtime *", rt.native_address)
        classes = {}
        while not classes or max(classes) < 256:
            name = ffi.new("char[]", b"HostOnly%d" % len(classes))
            desc = ffi.new(
                "zs_class_desc *", {"name": name, "instance_size": ffi.sizeof("zs_object")}
            )
            out = ffi.new("zs_class **")
            kept += [name, desc]
            assert lib.zs_class_register(native, desc, out) == 0
            classes[lib.zs_class_id(out[0])] = (out[0], ffi.string(name).decode())
        for class_id in (0, 64, 128, 256):
            cls, name = classes[class_id]
            ref = ffi.new("zs_ref *")
            assert lib.zs_object_new(native, cls, 0, lib.ZS_NAME_AUTO, 0, ref, ffi.NULL) == 0
            found = rt.object_from_handle(ref[0])
            assert type(found).__name__ == name and found.handle == ref[0], (class_id, found)
            assert rt.object_from_handle(ref[0]) is found
            print(class_id)
""")


def test_objects_of_host_classes_past_the_class_table_get_their_class() -> None:
    """Objects of a host's classes Python has not bound get proxies of
    their own classes (bound then), whatever the size of Python's table of
    classes by id: none before Python binds a class, then 64 entries,
    doubled whenever it binds one past them. Looked up in the order of
    their ids 0, 64, 128 and 256, each first object's class id is exactly
    the table's size (binding the one before grew it to that), and the
    table is never read there. Run with the debug allocator, whose guard
    bytes after every PyMem block make a read one past the table read a
    pointer that is not NULL (and crash), where pymalloc's neighbouring
    block could hold anything, NULL included."""
    env = {**os.environ, "PYTHONMALLOC": "debug"}
    result = subprocess.run(
        [sys.executable, "-c", PAST_THE_CLASS_TABLE],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "64", "128", "256"]


def _host_only_object(rt: zs.Runtime, kept: list[Any]) -> int:
    """The handle of a new object of a class the "host" registered now
    (cffi, as C would), which Python has not bound: its first lookup takes
    the binding's slow path (Runtime._conjugate_of_slow). The class's
    description is kept by reference: ``kept`` holds it until the runtime
    is closed."""
    native = runtime_ptr(rt)
    name = ffi.new("char[]", b"HostOnlyRaced")
    desc = ffi.new("zs_class_desc *", {"name": name, "instance_size": ffi.sizeof("zs_object")})
    cls, ref = ffi.new("zs_class **"), ffi.new("zs_ref *")
    kept += [name, desc]
    assert lib.zs_class_register(native, desc, cls) == 0
    assert lib.zs_object_new(native, cls[0], 0, lib.ZS_NAME_AUTO, 0, ref, ffi.NULL) == 0
    assert lib.zs_add_to_root(native, ref[0]) == 0
    return int(ref[0])


def _wait_until_in(thread: threading.Thread, code: Any) -> None:
    """Wait (on a condition, not a time) until ``thread`` runs ``code``."""
    deadline = time.monotonic() + 60
    while True:
        frame = sys._current_frames().get(thread.ident or 0)
        while frame is not None and frame.f_code is not code:
            frame = frame.f_back
        if frame is not None:
            return
        assert thread.is_alive() and time.monotonic() < deadline, "never got there"
        time.sleep(0.001)


@pytest.mark.parametrize("meanwhile", ["made", "closed"])
def test_a_host_thread_waiting_to_adopt_an_object_sees_what_happened_meanwhile(
    host: Any, meanwhile: str
) -> None:
    """A host's thread asks for the proxy of an object of a class Python
    has not bound (proxy_of takes no lock: the binding's slow path waits
    for the runtime's lock, which a Python thread holds). Meanwhile that
    thread makes the proxy itself, or closes the runtime. The waiting
    thread then gets that very proxy (never a second one, never an error
    for an object that already has one), or None as any lookup of a
    closing runtime does (no proxy of a closed runtime, no error)."""
    rt = zs.Runtime()
    kept: list[Any] = []
    handle = _host_only_object(rt, kept)
    address = rt.native_address
    answers: list[Any] = []

    def ask() -> None:
        try:
            answers.append(host.host_proxy_of(address, handle))
        except BaseException as error:  # the test's answer, reported below
            answers.append(error)

    thread = threading.Thread(target=ask)
    with rt._lock:  # what any runtime operation of this thread holds
        thread.start()
        _wait_until_in(thread, zs.Runtime._conjugate_of_slow.__code__)
        if meanwhile == "made":
            made = rt.object_from_handle(handle)
            assert type(made).__name__ == "HostOnlyRaced"
        else:
            rt.close()
    thread.join()
    if meanwhile == "made":
        assert answers == [made]
        assert answers[0] is made and rt.object_from_handle(handle) is made
        rt.close()
    else:
        assert answers == [None]
    assert rt.closed
    del kept


def test_no_proxy_is_made_while_the_runtime_closes(rt: zs.Runtime) -> None:
    """Once close() has begun (the runtime's life moves to closing first
    thing, before every proxy expires), reading a reference whose target
    has no proxy gives None: a proxy made then would escape the expiry.
    (Python code can run in that window: a gc callback or finaliser on an
    allocation of close().) The move is one way: close() then finishes."""
    head = Beacon(signal=1)
    head.add_to_root()
    head.next = Beacon(signal=2)  # its proxy is dropped
    assert isinstance(head.next, Beacon) and head.next.signal == 2  # open: made
    assert rt._life_enter(_core.LIFE_CLOSE, "close()")  # what close() does first
    try:
        assert rt.lifecycle == "closing"
        assert head.next is None
        assert rt._conjugate_of(head.handle) is head  # an existing proxy is still found
        with pytest.raises(RuntimeError, match="inside a collection or close"):
            rt.close()  # a nested close() is refused, not a no-op
    finally:
        rt._life_leave(_core.LIFE_CLOSE)
    assert rt.lifecycle == "closing" and not rt.closed
    rt.close()  # finishes what the first began
    assert rt.lifecycle == "closed" and head.is_expired
