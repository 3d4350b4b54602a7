"""Host classes: a class a native host describes in C (native reflection),
bound by zsharp_py from its description, side by side with the same C++
class bound by nanobind and pybind11.

The host is ``csrc/host_bench.c``, a C module built apart from the library
against its headers, as a user's host is (``_build.host_bench_library``):
it registers ``BenchHost`` (``count: Int32``, ``speed: Float64``, functions
``nop()`` and ``add3(a, b, c: Int32) -> Int32``, events ``on_scalar(x:
Float64)``, ``on_struct(v: BenchVec3)`` and ``on_object(o: BenchHost |
None)``) and the struct ``BenchVec3``; zsharp_py binds them with
``zs.native_class``. The peers bind ``csrc/host_bench.h``, the same members
in C++, the events as virtuals with the trampoline each library documents.

Rows: a host function called from Python with 0 and 3 arguments; native
code calling a Python override of each event, N times from a C loop
(``host_bench_call``: ``zs_call_function`` per call; the peers' C++ loop
calls the virtual); creating an object; reading and writing the Int32 and
Float64 properties, also on a Python-declared ``zs.Object`` with the same
members (the figure the host class's property should match).

Objects Python has never seen (``BenchActor``, ``ref: BenchActor | None``,
``kids: Array[BenchActor]``, event ``tick(dt: Float64)``; the peers'
``BenchActor`` in C++): reading an element and the reference of a holder
whose kids the host spawned, when no proxy of them exists (every read makes
one, dropped at once; the peers make a new wrapper per read), and one host
frame ticking 10,000 actors of a Python subclass that the host spawned, with
their proxies held by Python or not (the peers' C++ loop over 10,000
Python-subclassed objects through the trampoline), and the same 10,000
actors ticked by the tick manager instead (one ``zs_tick_frame`` per
statement, each actor's ``tick`` registered from C), in a runtime of
their own.

An event broadcast from C to Python listeners (``BenchEmitter``, whose
``on_signal: MulticastDelegate`` holds Python functions; ``host_bench_broadcast``
calls ``zs_delegate_broadcast`` from a C loop), per listener, beside the
peers' C++ loop calling each Python function held as a ``std::function``.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any

import zsharp_py as zs
from zsharp_py.lowlevel import api_table

from . import _build
from ._harness import (
    Config,
    MicroCase,
    MicroResult,
    Table,
    Unavailable,
    add_case_rows,
    fmt_ns,
    fmt_result_ratio,
    progress,
    record,
    run_micro,
)

NAME = "host_classes"
TITLE = "Host classes (native reflection)"

__all__ = ["NAME", "TITLE", "GROUPS", "PEERS", "run"]

LOOP = 100
"""Event calls per statement of an override row (from one C loop)."""

KIDS = 1_000
"""Kids the host spawns into the holder whose element 700 and reference
the cold read rows read."""

ACTORS = 10_000
"""Actors one host frame ticks per statement of a tick row."""

LISTENERS = 10
"""Python listeners of the broadcast row's event (each a function of its own)."""

BROADCASTS = 10
"""Broadcasts per statement of the broadcast row (from one C or C++ loop)."""

TICK_SCALE = 5 / 10_000
"""Statements per batch of a tick row relative to the configuration's
operations: 5 statements (50,000 calls) in a full run, 1 in a quick one.
A batch drops at most 65,536 proxies, what the binding queues for the heap
until the safe point that follows the batch (more would wait for a
collection instead)."""


def _overriding(base: Any) -> Any:
    """A Python subclass of ``base`` (zsharp_py's host class or a peer's
    bound C++ class) overriding its three events, as the override rows
    call them: the host's parameters, no work."""

    class PyBenchHost(base):  # type: ignore[misc]
        def on_scalar(self, x):  # type: ignore[no-untyped-def]
            pass

        def on_struct(self, v):  # type: ignore[no-untyped-def]
            pass

        def on_object(self, o):  # type: ignore[no-untyped-def]
            pass

    return PyBenchHost


# (group, title)
GROUPS: list[tuple[str, str]] = [
    ("call0", "host function, 0 arguments `h.nop()`"),
    ("call3", "host function, 3 arguments `h.add3(1, 2, 3)`"),
    ("override_scalar", "native code calling a Python override, scalar `on_scalar(x)`"),
    ("override_struct", "native code calling a Python override, struct `on_struct(v)`"),
    ("override_object", "native code calling a Python override, object `on_object(o)`"),
    ("cold_element", "reading an object element whose proxy does not exist yet `c.kids[700]`"),
    ("cold_ref", "reading an object reference whose proxy does not exist yet `c.ref`"),
    (
        "tick_cold",
        f"one host frame calling an empty Python override `tick(dt)` on each of {ACTORS:,} "
        "actors the host spawned, no proxies held (per actor)",
    ),
    ("tick_held", "the same, the actors' proxies held by Python (per actor)"),
    (
        "frame_cold",
        f"one frame of the tick manager (zs_tick_frame) calling the Python override `tick(dt)` "
        f"of each of {ACTORS:,} actors the host spawned, no proxies held (per actor)",
    ),
    ("frame_held", "the same, the actors' proxies held by Python (per actor)"),
    (
        "broadcast",
        f"native code broadcasting an event to {LISTENERS} Python listeners, a function each "
        "(per listener)",
    ),
    ("create", "creating an object `BenchHost()`"),
    ("read_int", "property read, Int32 `h.count`"),
    ("write_int", "property write, Int32 `h.count = 5`"),
    ("read_float", "property read, Float64 `h.speed`"),
    ("write_float", "property write, Float64 `h.speed = 1.5`"),
]

ZS = "zsharp_py"
DECLARED = "zs, Python-declared"
PEER_NAMES = [ZS, DECLARED, "nanobind", "pybind11"]
RATIO_PEERS = ["nanobind", "pybind11", DECLARED]
METRIC_PEERS = {
    ZS: "zsharp_py",
    DECLARED: "declared",
    "nanobind": "nanobind",
    "pybind11": "pybind11",
}
VERSIONS: dict[str, str] = {}
UNSEEN_GROUPS = ("cold_element", "cold_ref", "tick_cold", "tick_held", "frame_cold", "frame_held")
"""The rows of objects Python has never seen (``_unseen_cases``)."""
SHARED = {"tick_held": "tick_cold", "frame_cold": "tick_cold", "frame_held": "tick_cold"}
"""Groups whose peers' figure is another group's case: the peers' actors
are Python objects (a trampoline's instance is made from Python), so they
have no proxy to hold or not, nor a tick manager (their loop over the actors
is the frame); their one tick case is beside the four tick rows."""

Provided = tuple[list[MicroCase], dict[str, str]]
Check = Callable[[], str | None]
"""A sanity check run after the measurements: None, or what went wrong."""


# ---------------------------------------------------------------------------
# zsharp_py: the host's class, bound from its description
# ---------------------------------------------------------------------------

HOST_CDEF = """
int host_bench_install(const void *api, void *rt);
int host_bench_call(const void *api, void *rt, uint64_t object, const char *function,
                    void *block, int n);
int64_t host_bench_defaults(const void *api, void *rt, uint64_t object);
int host_bench_spawn(const void *api, void *rt, uint64_t holder, const char *class_name, int n,
                     uint64_t *out);
int host_bench_call_each_of(const void *api, void *rt, const uint64_t *objects, int n,
                            const char *function, void *block);
const void *host_bench_find_class(const void *api, void *rt, const char *name);
int host_bench_call_class(const void *api, void *rt, const void *cls, const char *function,
                          void *block, uint32_t *out_called);
int64_t host_bench_ticks(const void *api, void *rt, const uint64_t *objects, int n);
int host_bench_register_ticks(const void *api, void *rt, const uint64_t *objects, int n,
                              const char *function);
int64_t host_bench_tick_frame(const void *api, void *rt, double dt);
int host_bench_broadcast(const void *api, void *rt, uint64_t emitter, double x, int n);
"""


def _host_library(config: Config) -> tuple[Any, Any, ctypes.PyDLL]:
    """The native host loaded twice: through cffi (ABI mode: calls release
    the GIL) and through ``ctypes.PyDLL`` (calls keep it, as a function
    bound by nanobind or pybind11 does)."""
    import cffi

    path = _build.host_bench_library(config)
    ffi = cffi.FFI()
    ffi.cdef(HOST_CDEF)
    lib = ffi.dlopen(str(path))
    held = ctypes.PyDLL(str(path))
    held.host_bench_call.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_int,
    ]
    held.host_bench_call.restype = ctypes.c_int
    held.host_bench_call_each_of.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_void_p,
    ]
    held.host_bench_call_each_of.restype = ctypes.c_int
    held.host_bench_call_class.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    held.host_bench_call_class.restype = ctypes.c_int
    held.host_bench_tick_frame.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double]
    held.host_bench_tick_frame.restype = ctypes.c_int64
    held.host_bench_broadcast.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_double,
        ctypes.c_int,
    ]
    held.host_bench_broadcast.restype = ctypes.c_int
    return ffi, lib, held


def _listeners(count: int, into: list[int] | None = None) -> list[Callable[[float], None]]:
    """``count`` listeners, a function object each: empty, or counting their
    calls into ``into`` (the check before the measurement)."""

    def make(i: int) -> Callable[[float], None]:
        if into is None:

            def listener(x: float) -> None:
                pass

        else:

            def listener(x: float) -> None:
                into[i] += 1

        return listener

    return [make(i) for i in range(count)]


def _zsharp_cases(config: Config, stack: contextlib.ExitStack, checks: list[Check]) -> Provided:
    ffi, lib, held = _host_library(config)
    runtime = stack.enter_context(zs.Runtime())  # current while the cases run
    api = ffi.cast("const void *", api_table())
    native = ffi.cast("void *", runtime.native_address)
    if lib.host_bench_install(api, native) != 0:
        raise Unavailable("host_bench_install failed")
    host: Any = zs.native_class("BenchHost")

    plain, overridden, other = host(), _overriding(host)(), host()
    for obj in (plain, overridden, other):
        obj.add_to_root()  # the creation cases collect garbage after every batch
    if plain.add3(1, 2, 3) != 6 or plain.nop() is not None:
        raise Unavailable("BenchHost's functions give wrong results")
    scalar = ffi.new("double *", 1.5)
    vector = ffi.new("double[3]", [1.0, 2.0, 3.0])
    reference = ffi.new("uint64_t *", other.handle)
    blocks = {"scalar": scalar, "struct": vector, "object": reference}
    for kind, block in blocks.items():
        status = lib.host_bench_call(
            api, native, overridden.handle, f"on_{kind}".encode(), block, 1
        )
        if status != 0:
            raise Unavailable(f"zs_call_function(on_{kind}) failed with status {status}")

    def overrides_ran() -> str | None:
        runs = lib.host_bench_defaults(api, native, overridden.handle)
        return None if runs == 0 else f"{NAME}: the native default ran {runs} times, not Python's"

    checks.append(overrides_ran)
    namespace: dict[str, Any] = {
        "h": plain,
        "v": 5,
        "f": 1.5,
        "Host": host,
        "held_call": held.host_bench_call,
        "call": lib.host_bench_call,
        "api": api,
        "api_address": api_table(),
        "rt": native,
        "rt_address": runtime.native_address,
        "target": overridden.handle,
        "N": LOOP,
        "keep": (plain, overridden, other, type(overridden), blocks),
    }
    for kind, block in blocks.items():
        namespace[f"{kind}_block"] = block
        namespace[f"{kind}_address"] = int(ffi.cast("uintptr_t", block))
    cases = [
        MicroCase(
            "NativeFunction (C marshalling, zs_call_native)",
            "call0",
            "h.nop()",
            namespace,
            ZS,
        ),
        MicroCase("NativeFunction", "call3", "h.add3(1, 2, 3)", namespace, ZS),
    ]
    for kind in blocks:
        cases.append(
            MicroCase(
                f"C loop: zs_call_function(rt, h, 'on_{kind}', block) (GIL held)",
                f"override_{kind}",
                f"held_call(api_address, rt_address, target, b'on_{kind}', {kind}_address, N)",
                namespace,
                ZS,
                scale=1 / LOOP,
                items=LOOP,
                note=(
                    "the handler (native/binding/calls.c): the object's conjugate, the plan "
                    "cached on its class, the runtime made current, a call scope, the method"
                ),
            )
        )
    cases.append(
        MicroCase(
            "the same, GIL released (cffi ABI call): each call takes it",
            "override_scalar",
            "call(api, rt, target, b'on_scalar', scalar_block, N)",
            namespace,
            ZS,
            scale=1 / LOOP,
            items=LOOP,
            primary=False,
        )
    )
    cases.append(_broadcast_case(lib, held, api, native, runtime, namespace, checks))
    cases += _creation_cases(runtime, host, namespace, "BenchHost()", ZS)
    cases += _property_cases(namespace, ZS, "host class property (the binder's C descriptor)")
    try:
        cases += _unseen_cases(ffi, lib, held, stack, checks)
    except Unavailable as reason:  # those rows only
        return cases, dict.fromkeys(UNSEEN_GROUPS, f"unavailable: {reason}")
    return cases, {}


def _broadcast_case(
    lib: Any,
    held: ctypes.PyDLL,
    api: Any,
    native: Any,
    runtime: zs.Runtime,
    namespace: dict[str, Any],
    checks: list[Check],
) -> MicroCase:
    """The broadcast row: a BenchEmitter whose on_signal holds LISTENERS
    Python functions, broadcast BROADCASTS times from a C loop; checked
    first with counting listeners (each called once per broadcast)."""
    emitter: Any = zs.native_class("BenchEmitter")()
    emitter.add_to_root()
    counts = [0] * LISTENERS
    for listener in _listeners(LISTENERS, counts):
        emitter.on_signal.add(listener)
    status = lib.host_bench_broadcast(api, native, emitter.handle, 1.5, 2)
    if status != 0 or counts != [2] * LISTENERS:
        raise Unavailable(f"host_bench_broadcast: status {status}, listeners called {counts}")
    emitter.on_signal.clear()
    for listener in _listeners(LISTENERS):
        emitter.on_signal.add(listener)

    def all_bound() -> str | None:
        bound = len(emitter.on_signal)
        return None if bound == LISTENERS else f"{NAME}: the emitter has {bound} listeners"

    checks.append(all_bound)
    namespace.update(
        held_broadcast=held.host_bench_broadcast,
        emitter=emitter.handle,
        B=BROADCASTS,
        emitter_object=emitter,
    )
    return MicroCase(
        f"C loop: zs_delegate_broadcast(rt, emitter, on_signal, ...) x {BROADCASTS} (GIL held)",
        "broadcast",
        "held_broadcast(api_address, rt_address, emitter, 1.5, B)",
        namespace,
        ZS,
        scale=1 / (BROADCASTS * LISTENERS),
        items=BROADCASTS * LISTENERS,
        note=(
            "per listener: the bindings copied once per broadcast (one lock), then each "
            "callable's turn checked with no lock (the handler's generation) and run by the "
            "binding's listener handler: the signature's plan (cached), the runtime made "
            "current, a call scope, the function"
        ),
    )


# ---------------------------------------------------------------------------
# zsharp_py: objects the host spawned, which Python has never seen
# ---------------------------------------------------------------------------


def _actors_runtime(
    ffi: Any, lib: Any, stack: contextlib.ExitStack
) -> tuple[zs.Runtime, Any, contextvars.Context]:
    """A runtime of its own for the host's actors (the creation cases'
    collections then mark only their own heap), the host installed in it,
    and a context in which it is current: the tick statements run there, as
    the override rows run with their runtime current."""
    runtime = zs.Runtime()
    stack.callback(runtime.close)
    native = ffi.cast("void *", runtime.native_address)
    if lib.host_bench_install(ffi.cast("const void *", api_table()), native) != 0:
        raise Unavailable("host_bench_install failed in the actors' runtime")
    context = contextvars.copy_context()
    context.run(runtime.activate().__enter__)  # left entered: the context is ours alone
    return runtime, native, context


def _cold(runtime: zs.Runtime, handles: list[int], what: str) -> str | None:
    """None when no proxy of any of ``handles`` exists, else what is wrong."""
    warm = sum(runtime._conjugate_get(handle) is not None for handle in handles)
    return None if warm == 0 else f"{NAME}: {what}: {warm} of {len(handles)} proxies exist"


def _fresh_reads(read: Callable[[], object], what: str) -> str | None:
    """None when ``read()`` makes a new object each time nothing holds the
    last one, else what is wrong. Two reads while the first is held give
    the same object (the binding finds a live proxy or wrapper), and nothing
    but the caller holds what a read returns (its reference count is a new
    ``object()``'s), so dropping it frees it and the next read makes another."""
    first = read()
    if read() is not first:
        return f"{NAME}: {what}: two reads while the first is held give two objects"
    del first
    if sys.getrefcount(read()) != sys.getrefcount(object()):
        return f"{NAME}: {what}: something else holds what a read returns: it is not made anew"
    return None


def _unseen_cases(
    ffi: Any, lib: Any, held: ctypes.PyDLL, stack: contextlib.ExitStack, checks: list[Check]
) -> list[MicroCase]:
    """The cold read and tick cases: objects the host spawned from C in a
    runtime of their own, whose proxies Python never made (or, for the
    held tick row, holds). Every batch is followed by a timed
    ``_flush_values()``: the safe point that hands the proxies the batch
    dropped to the heap (zs_conjugates_dropped), a cost of each cold read."""
    runtime, native, context = _actors_runtime(ffi, lib, stack)
    api = ffi.cast("const void *", api_table())
    problems: list[str] = []

    def spawn(holder: zs.Object, class_name: str, n: int) -> Any:
        handles = ffi.new("uint64_t[]", n)
        status = lib.host_bench_spawn(api, native, holder.handle, class_name.encode(), n, handles)
        if status != 0:
            raise Unavailable(f"host_bench_spawn({class_name}) failed with status {status}")
        return handles

    with runtime.activate():
        actor: Any = zs.native_class("BenchActor")

        class ColdTicker(actor):  # type: ignore[misc]
            """Ticked with no proxy held: each call makes one, dropped after it."""

            def tick(self, dt):  # type: ignore[no-untyped-def]
                pass

        class HeldTicker(actor):  # type: ignore[misc]
            """Ticked with every proxy held by a Python list."""

            def tick(self, dt):  # type: ignore[no-untyped-def]
                pass

        holder, cold_world, held_world = actor(), actor(), actor()
        for obj in (holder, cold_world, held_world):
            obj.add_to_root()
        kids = spawn(holder, "BenchActor", KIDS)
        cold = spawn(cold_world, "ColdTicker", ACTORS)
        hot = spawn(held_world, "HeldTicker", ACTORS)
        proxies = held_world.kids.to_python()  # the held row's proxies, held
    element, reference = kids[700], kids[KIDS - 1]
    cold_handles, hot_handles = list(cold), list(hot)
    dt = ffi.new("double *", 1 / 60)
    namespace: dict[str, Any] = {
        "c": holder,
        "tick_each": held.host_bench_call_each_of,
        "tick_class": held.host_bench_call_class,
        "in_actors_rt": context.run,
        "api_address": api_table(),
        "rt_address": runtime.native_address,
        "cold_address": int(ffi.cast("uintptr_t", cold)),
        "held_address": int(ffi.cast("uintptr_t", hot)),
        "dt_address": int(ffi.cast("uintptr_t", dt)),
        "A": ACTORS,
        "keep": (cold_world, held_world, proxies, kids, cold, hot, dt, ColdTicker, HeldTicker),
    }
    for name in ("ColdTicker", "HeldTicker"):
        cls = lib.host_bench_find_class(api, native, name.encode())
        if cls == ffi.NULL:
            raise Unavailable(f"the host cannot find {name}")
        namespace[f"{name}_class"] = int(ffi.cast("uintptr_t", cls))

    # Before anything is timed: the rows measure what they say.
    called = ffi.new("uint32_t *")
    for name, handles in (("ColdTicker", cold), ("HeldTicker", hot)):
        status = lib.host_bench_call_each_of(api, native, handles, ACTORS, b"tick", dt)
        each = lib.host_bench_call_class(
            api, native, ffi.cast("const void *", namespace[f"{name}_class"]), b"tick", dt, called
        )
        if status != 0 or each != 0 or called[0] != ACTORS:
            raise Unavailable(
                f"ticking {name}: status {status}, zs_call_each {each} ({called[0]} calls)"
            )
    for problem in (
        _cold(runtime, [element, reference, *cold_handles], "cold objects, at setup"),
        _fresh_reads(lambda: holder.kids[700], "zsharp_py, c.kids[700]"),
        _fresh_reads(lambda: holder.ref, "zsharp_py, c.ref"),
        _cold(runtime, [element, reference], "cold objects, after reading them"),
        None
        if all(runtime._conjugate_get(h) is not None for h in hot_handles)
        else f"{NAME}: a held actor's proxy is missing",
    ):
        if problem is not None:
            problems.append(problem)
    runtime._flush_values()

    def still_cold(handles: list[int], what: str) -> Callable[[int], None]:
        def before(operations: int) -> None:
            problem = _cold(runtime, handles, f"{what}, before a batch")
            if problem is not None and problem not in problems:
                problems.append(problem)

        return before

    def held_all(operations: int) -> None:
        problem = f"{NAME}: a held actor's proxy is missing before a batch"
        if problem not in problems and any(runtime._conjugate_get(h) is None for h in hot_handles):
            problems.append(problem)

    def verdict() -> str | None:
        ticks = lib.host_bench_ticks(api, native, cold, ACTORS) + lib.host_bench_ticks(
            api, native, hot, ACTORS
        )
        if ticks != 0:
            problems.append(f"{NAME}: tick's native default ran {ticks} times, not Python's")
        late = _cold(runtime, [element, reference, *cold_handles], "cold objects, after the run")
        if late is not None:
            problems.append(late)
        return "; ".join(problems) or None

    checks.append(verdict)
    flush = {"after_batch": runtime._flush_values, "after_batch_timed": True}
    tick = {"scale": TICK_SCALE, "items": ACTORS, **flush}
    each_note = (
        "zs_call_each(rt, cls, 'tick', block): every live object of the class, each "
        "checked again (lock, item) before its call"
    )
    return [
        MicroCase(
            "read makes the proxy in C (zs_resolve_conjugate), dropped at once",
            "cold_element",
            "c.kids[700]",
            namespace,
            ZS,
            before_batch=still_cold([element], "c.kids[700]"),
            note="the host spawned the kids from C; `rt._conjugate_get(kid)` is None before "
            "every batch; each batch ends with a timed `rt._flush_values()` (the safe point "
            "handing the dropped proxies to the heap)",
            **flush,  # type: ignore[arg-type]
        ),
        MicroCase(
            "read makes the proxy in C (zs_resolve_conjugate), dropped at once",
            "cold_ref",
            "c.ref",
            namespace,
            ZS,
            before_batch=still_cold([reference], "c.ref"),
            **flush,  # type: ignore[arg-type]
        ),
        MicroCase(
            f"C loop: zs_call_function(rt, actor, 'tick', block) on {ACTORS:,} actors "
            "(GIL held); each call makes the proxy, dropped after it",
            "tick_cold",
            "in_actors_rt(tick_each, api_address, rt_address, cold_address, A, b'tick', "
            "dt_address)",
            namespace,
            ZS,
            before_batch=still_cold(cold_handles, "tick, no proxies held"),
            note="objects of a Python subclass (`def tick(self, dt): pass`) created by the "
            "host from C (zs_object_new); `rt._conjugate_get` is None for each before every "
            "batch; each batch ends with a timed `rt._flush_values()`",
            **tick,  # type: ignore[arg-type]
        ),
        MicroCase(
            "the same through zs_call_each(rt, ColdTicker, 'tick', block)",
            "tick_cold",
            "in_actors_rt(tick_class, api_address, rt_address, ColdTicker_class, b'tick', "
            "dt_address, None)",
            namespace,
            ZS,
            primary=False,
            note=each_note,
            before_batch=still_cold(cold_handles, "tick through zs_call_each, no proxies held"),
            **tick,  # type: ignore[arg-type]
        ),
        MicroCase(
            f"C loop: zs_call_function(rt, actor, 'tick', block) on {ACTORS:,} actors "
            "(GIL held); every proxy held by a Python list",
            "tick_held",
            "in_actors_rt(tick_each, api_address, rt_address, held_address, A, b'tick', "
            "dt_address)",
            namespace,
            ZS,
            before_batch=held_all,
            **tick,  # type: ignore[arg-type]
        ),
        MicroCase(
            "the same through zs_call_each(rt, HeldTicker, 'tick', block)",
            "tick_held",
            "in_actors_rt(tick_class, api_address, rt_address, HeldTicker_class, b'tick', "
            "dt_address, None)",
            namespace,
            ZS,
            primary=False,
            note=each_note,
            **tick,  # type: ignore[arg-type]
        ),
        *_frame_cases(ffi, lib, held, stack, checks, hold=False),
        *_frame_cases(ffi, lib, held, stack, checks, hold=True),
    ]


def _frame_cases(
    ffi: Any,
    lib: Any,
    held: ctypes.PyDLL,
    stack: contextlib.ExitStack,
    checks: list[Check],
    *,
    hold: bool,
) -> list[MicroCase]:
    """The tick manager's rows: a runtime of their own whose host spawned
    ACTORS objects of a Python subclass overriding ``tick`` and registered
    each one's ``tick`` with the tick manager from C; one statement is one
    ``zs_tick_frame`` (through ``ctypes.PyDLL``: the GIL held, as the other
    tick rows), in a context where that runtime is current. With ``hold``,
    Python holds every proxy; without, none exists before a batch (each
    call makes one, dropped after it, and the batch ends with the timed
    safe point, as tick_cold's)."""
    runtime, native, context = _actors_runtime(ffi, lib, stack)
    api = ffi.cast("const void *", api_table())
    group = "frame_held" if hold else "frame_cold"
    with runtime.activate():
        actor: Any = zs.native_class("BenchActor")

        def tick(self: Any, dt: float) -> None:
            pass

        # A name of its own per case: BenchActor is one class in every
        # runtime, so two subclasses named alike would make the host's
        # lookup by name ambiguous (docs/writing-game-scripts.md).
        name = "FrameTickerHeld" if hold else "FrameTickerCold"
        FrameTicker = type(name, (actor,), {"tick": tick, "__doc__": "Ticked by the tick manager."})
        world = actor()
        world.add_to_root()
        handles = ffi.new("uint64_t[]", ACTORS)
        status = lib.host_bench_spawn(api, native, world.handle, name.encode(), ACTORS, handles)
        if status != 0:
            raise Unavailable(f"host_bench_spawn({name}) failed with status {status}")
        status = lib.host_bench_register_ticks(api, native, handles, ACTORS, b"tick")
        if status != 0:
            raise Unavailable(f"host_bench_register_ticks failed with status {status}")
        proxies = world.kids.to_python() if hold else []
    handle_list = list(handles)
    frame = held.host_bench_tick_frame
    ticked = context.run(frame, api_table(), runtime.native_address, 1 / 60)
    if ticked != ACTORS:
        raise Unavailable(f"a tick manager frame ticked {ticked} of {ACTORS:,} actors")
    if not hold:
        runtime._flush_values()
    problems: list[str] = []

    def before(operations: int) -> None:
        if not hold:
            problem = _cold(runtime, handle_list, "tick manager, before a batch")
        elif any(runtime._conjugate_get(h) is None for h in handle_list):
            problem = f"{NAME}: a held actor's proxy is missing before a tick manager batch"
        else:
            problem = None
        if problem is not None and problem not in problems:
            problems.append(problem)

    def verdict() -> str | None:
        ticks = lib.host_bench_ticks(api, native, handles, ACTORS)
        if ticks != 0:
            problems.append(f"{NAME}: tick's native default ran {ticks} times, not Python's")
        return "; ".join(problems) or None

    checks.append(verdict)
    namespace: dict[str, Any] = {
        "frame": frame,
        "in_rt": context.run,
        "api_address": api_table(),
        "rt_address": runtime.native_address,
        "keep": (world, proxies, handles, FrameTicker),
    }
    flush = {"after_batch": runtime._flush_values, "after_batch_timed": True}
    return [
        MicroCase(
            f"zs_tick_frame(rt, 1/60, NULL, &stats): {ACTORS:,} tick functions registered from "
            "C, each the actor's Python `tick` (GIL held)"
            + ("; every proxy held by a Python list" if hold else "; no proxy held"),
            group,
            "in_rt(frame, api_address, rt_address, 0.016)",
            namespace,
            ZS,
            before_batch=before,
            scale=TICK_SCALE,
            items=ACTORS,
            note="the tick manager (native/src/ticks.c): per actor, one lock to check the "
            "registration, the object and the interval, then the managed call handler",
            **flush,  # type: ignore[arg-type]
        )
    ]


def _creation_cases(
    runtime: zs.Runtime, cls: type, namespace: dict[str, Any], label: str, peer: str
) -> list[MicroCase]:
    """Creating an object, each batch ending with a collection (timed in the
    main case, as the peers free theirs inside the statement). Each batch
    starts after an untimed collection: the timed one then frees what the
    batch left, not what the cases run before it did (an override case's
    leftovers cost a collection tens of microseconds)."""
    namespace = {**namespace, "New": cls}

    def collected_first(operations: int) -> None:
        runtime.collect_garbage()

    return [
        MicroCase(
            f"{label} + its share of a collection",
            "create",
            "New()",
            namespace,
            peer,
            before_batch=collected_first,
            after_batch=runtime.collect_garbage,
            after_batch_timed=True,
            scale=0.2,
            note="each batch starts after an untimed rt.collect_garbage() and ends with a "
            "timed one. Each object is dropped unshared, so the next creation frees it "
            "(docs/garbage-collector.md, 'Objects freed at once') and the timed collection "
            "only the batch's last one, as the peers' destructors run in their statements",
        ),
        MicroCase(
            f"{label} alone (collection not timed)",
            "create",
            "New()",
            namespace,
            peer,
            before_batch=collected_first,
            after_batch=runtime.collect_garbage,
            scale=0.2,
            primary=False,
        ),
    ]


def _property_cases(namespace: dict[str, Any], peer: str, label: str) -> list[MicroCase]:
    return [
        MicroCase(label, "read_int", "h.count", namespace, peer),
        MicroCase(label, "write_int", "h.count = v", namespace, peer),
        MicroCase(label, "read_float", "h.speed", namespace, peer),
        MicroCase(label, "write_float", "h.speed = f", namespace, peer),
    ]


class DeclaredHost(zs.Object):
    """The host class's properties, declared in Python."""

    count: zs.Int32
    speed: zs.Float64


def _declared_cases(config: Config, stack: contextlib.ExitStack, checks: list[Check]) -> Provided:
    """A Python-declared zs.Object with the same properties, in the
    runtime the zsharp_py cases made current."""
    runtime = zs.current_runtime()
    if not isinstance(runtime, zs.Runtime):
        raise Unavailable("no zsharp_py runtime")
    declared = DeclaredHost()
    declared.add_to_root()
    namespace = {"h": declared, "v": 5, "f": 1.5}
    return [
        *_creation_cases(runtime, DeclaredHost, namespace, "DeclaredHost()", DECLARED),
        *_property_cases(namespace, DECLARED, "zs.Object property (the same C descriptor)"),
    ], {}


# ---------------------------------------------------------------------------
# nanobind and pybind11: the same class in C++
# ---------------------------------------------------------------------------


def _binding_cases(peer: str, module: ModuleType, checks: list[Check]) -> Provided:
    plain, overridden, other = (
        module.BenchHost(),
        _overriding(module.BenchHost)(),
        module.BenchHost(),
    )
    if plain.add3(1, 2, 3) != 6:
        raise Unavailable(f"{peer}: add3 gives a wrong result")
    vector = module.BenchVec3()
    module.call_scalar(overridden, 1.5, 1)

    def overrides_ran() -> str | None:
        runs = overridden.defaults
        return None if runs == 0 else f"{NAME}: {peer}'s native default ran {runs} times"

    checks.append(overrides_ran)
    namespace = {
        "h": plain,
        "t": overridden,
        "o": other,
        "vec": vector,
        "v": 5,
        "f": 1.5,
        "New": module.BenchHost,
        "call_scalar": module.call_scalar,
        "call_struct": module.call_struct,
        "call_object": module.call_object,
        "call_scalar_nogil": module.call_scalar_nogil,
        "N": LOOP,
    }
    VERSIONS[peer] = str(getattr(module, "VERSION", "?"))
    loop = {"scale": 1 / LOOP, "items": LOOP}
    emitter = module.BenchEmitter()
    counts = [0] * LISTENERS
    for listener in _listeners(LISTENERS, counts):
        emitter.add(listener)
    module.broadcast(emitter, 1.5, 2)
    if counts != [2] * LISTENERS:
        raise Unavailable(f"{peer}: broadcast called the listeners {counts}")
    emitter = module.BenchEmitter()
    for listener in _listeners(LISTENERS):
        emitter.add(listener)
    namespace.update(e=emitter, broadcast=module.broadcast, B=BROADCASTS)
    return [
        *_unseen_binding_cases(peer, module, checks),
        MicroCase(
            f"C++ loop calling each std::function (a Python function) x {BROADCASTS}",
            "broadcast",
            "broadcast(e, 1.5, B)",
            namespace,
            peer,
            scale=1 / (BROADCASTS * LISTENERS),
            items=BROADCASTS * LISTENERS,
        ),
        MicroCase("bound method", "call0", "h.nop()", namespace, peer),
        MicroCase("bound method", "call3", "h.add3(1, 2, 3)", namespace, peer),
        MicroCase(
            "C++ loop calling the virtual (trampoline)",
            "override_scalar",
            "call_scalar(t, 1.5, N)",
            namespace,
            peer,
            **loop,  # type: ignore[arg-type]
        ),
        MicroCase(
            "C++ loop calling the virtual (trampoline; the struct by const&: a copy)",
            "override_struct",
            "call_struct(t, vec, N)",
            namespace,
            peer,
            **loop,  # type: ignore[arg-type]
        ),
        MicroCase(
            "C++ loop calling the virtual (trampoline; the pointer: instance-map lookup)",
            "override_object",
            "call_object(t, o, N)",
            namespace,
            peer,
            **loop,  # type: ignore[arg-type]
        ),
        MicroCase(
            "the same, GIL released (call_guard): each call takes it",
            "override_scalar",
            "call_scalar_nogil(t, 1.5, N)",
            namespace,
            peer,
            primary=False,
            **loop,  # type: ignore[arg-type]
        ),
        MicroCase(
            "BenchHost() (then freed by refcount)", "create", "New()", namespace, peer, scale=0.2
        ),
        *_property_cases(namespace, peer, "def_rw / def_readwrite"),
    ], {}


def _unseen_binding_cases(peer: str, module: ModuleType, checks: list[Check]) -> list[MicroCase]:
    """The peer's cold reads (C++ objects with no Python wrapper, returned
    by reference: a new wrapper per read) and its tick loop (a C++ loop
    calling the virtual on Python-subclassed actors through the trampoline)."""

    class PyTicker(module.BenchActor):  # type: ignore[misc,name-defined]
        """The peer's actor overriding tick, as the host's ColdTicker does."""

        def tick(self, dt):  # type: ignore[no-untyped-def]
            pass

    holder, world = module.BenchActor(), module.BenchActor()
    module.spawn(holder, KIDS)  # made in C++: no wrapper exists
    tickers = [PyTicker() for _ in range(ACTORS)]
    for ticker in tickers:
        world.kids.append(ticker)
    module.tick_all(world, 1 / 60)
    problems = [
        problem
        for problem in (
            _fresh_reads(lambda: holder.kids[700], f"{peer}, c.kids[700]"),
            _fresh_reads(lambda: holder.ref, f"{peer}, c.ref"),
            None
            if world.kids[ACTORS - 1] is tickers[-1]
            else f"{NAME}: {peer}'s loop does not tick the Python objects",
        )
        if problem is not None
    ]

    def verdict() -> str | None:
        ticks = sum(ticker.ticks for ticker in tickers)
        if ticks:
            problems.append(f"{NAME}: {peer}'s native tick ran {ticks} times, not Python's")
        return "; ".join(problems) or None

    def still_fresh(read: Callable[[], object], what: str) -> Callable[[int], None]:
        def before(operations: int) -> None:
            problem = _fresh_reads(read, what)
            if problem is not None and problem not in problems:
                problems.append(problem)

        return before

    checks.append(verdict)
    namespace = {
        "c": holder,
        "w": world,
        "tick_all": module.tick_all,
        "keep": (tickers, PyTicker),
    }
    return [
        MicroCase(
            "bind_vector __getitem__ (rv_policy::reference), a new wrapper per read",
            "cold_element",
            "c.kids[700]",
            namespace,
            peer,
            before_batch=still_fresh(lambda: holder.kids[700], f"{peer}, c.kids[700]"),
        ),
        MicroCase(
            "pointer property (rv_policy::reference), a new wrapper per read",
            "cold_ref",
            "c.ref",
            namespace,
            peer,
            before_batch=still_fresh(lambda: holder.ref, f"{peer}, c.ref"),
        ),
        MicroCase(
            f"C++ loop calling the virtual on {ACTORS:,} Python-subclassed actors (trampoline)",
            "tick_cold",
            "tick_all(w, 0.016)",
            namespace,
            peer,
            scale=TICK_SCALE,
            items=ACTORS,
        ),
    ]


def _nanobind_cases(config: Config, stack: contextlib.ExitStack, checks: list[Check]) -> Provided:
    return _binding_cases("nanobind", _build.nanobind_host_module(config), checks)


def _pybind11_cases(config: Config, stack: contextlib.ExitStack, checks: list[Check]) -> Provided:
    return _binding_cases("pybind11", _build.pybind11_host_module(config), checks)


Provider = Callable[[Config, contextlib.ExitStack, list[Check]], Provided]

# Each provider returns the cases of one peer or raises Unavailable. The
# zsharp_py provider makes the runtime the Python-declared one uses.
PEERS: list[tuple[str, Provider]] = [
    (ZS, _zsharp_cases),
    (DECLARED, _declared_cases),
    ("nanobind", _nanobind_cases),
    ("pybind11", _pybind11_cases),
]


def _prebuild(config: Config) -> None:
    """Build the native host and (full runs) the C++ peers, two at a time."""
    builders: list[Callable[[Config], Any]] = [_build.host_bench_library]
    if config.install:
        builders = [_build.nanobind_host_module, _build.pybind11_host_module, *builders]
    with ThreadPoolExecutor(max_workers=2) as pool:
        for future in [pool.submit(builder, config) for builder in builders]:
            with contextlib.suppress(Unavailable):
                future.result()


# ---------------------------------------------------------------------------
# Measurement and tables
# ---------------------------------------------------------------------------


def run(config: Config) -> list[Table]:
    """Measure every peer's cases, interleaved; a side-by-side table and the detail."""
    _prebuild(config)
    checks: list[Check] = []
    with contextlib.ExitStack() as stack:
        cases: list[MicroCase] = []
        skipped: dict[tuple[str, str], str] = {}
        for peer, provider in PEERS:
            try:
                provided, peer_skips = provider(config, stack, checks)
            except Unavailable as reason:
                for group, _ in GROUPS:
                    skipped[(peer, group)] = f"unavailable: {reason}"
                continue
            cases += provided
            skipped.update({(peer, group): why for group, why in peer_skips.items()})
        progress(
            config,
            f"{NAME}: {len(cases)} cases x {config.micro_rounds} rounds x "
            f"{config.micro_number:,} operations",
        )
        results, overhead = run_micro(cases, config.micro_number, config.micro_rounds)
        failures = [problem for check in checks if (problem := check()) is not None]
    tables = _tables(config, results, overhead.median, skipped)
    tables[0].failures += failures
    return tables


def _tables(
    config: Config, results: list[MicroResult], overhead: float, skipped: dict[tuple[str, str], str]
) -> list[Table]:
    primary = {(r.case.peer, r.case.group): r for r in results if r.case.primary}
    for group, same in SHARED.items():  # the peers' one case, beside both rows
        for peer in PEER_NAMES:
            if peer != ZS and (peer, group) not in primary and (peer, same) in primary:
                primary[(peer, group)] = primary[(peer, same)]
    for (peer, group), result in primary.items():
        value, rounds = result.recorded()
        record(f"host.{group}.{METRIC_PEERS[peer]}", value, rounds=rounds)
    for (peer, group), why in skipped.items():
        record(f"host.{group}.{METRIC_PEERS[peer]}", None, why)

    side = Table(
        f"{TITLE}: side by side (net ns per operation)",
        ["operation", *PEER_NAMES, *(f"zsharp_py / {p}" for p in RATIO_PEERS)],
        description=(
            "A class described by a native host in C (`csrc/host_bench.c`), bound by "
            "zsharp_py from its description, and the same class in C++ "
            "(`csrc/host_bench.h`) bound by nanobind and pybind11; the Python-declared "
            "column is a `zs.Object` declaring the same properties in Python. Each cell "
            "is the median net ns per operation (the empty `timeit` loop, "
            f"{fmt_ns(overhead, 2)} ns, subtracted) of the peer's main case; override rows "
            f"are per call, from a C or C++ loop of {LOOP} calls with the GIL held, tick "
            f"rows per actor, from one loop over {ACTORS:,} actors. Ratios "
            "are zsharp_py's host class over the peer, the median of the ratios of the "
            "batches run in the same round (so they need not equal the quotient of the two "
            "medians shown). The peers' tick figure is beside both tick rows: their actors "
            "are Python objects, made from Python, with no proxy to hold or not."
        ),
    )
    for group, title in GROUPS:
        cells: list[str] = [title]
        for peer in PEER_NAMES:
            found = primary.get((peer, group))
            why = skipped.get((peer, group), "n/a")
            cells.append(
                fmt_ns(found.per_item())
                if found is not None
                else "unavailable"
                if why.startswith("unavailable")
                else why
            )
        ours = primary.get((ZS, group))
        for peer in RATIO_PEERS:
            theirs = primary.get((peer, group))
            cells.append(fmt_result_ratio(ours, theirs))
        side.add(*cells)
    if VERSIONS:
        side.notes.append(
            "versions: "
            + ", ".join(f"{peer} {version}" for peer, version in sorted(VERSIONS.items()))
            + "; C++ peers compiled with g++ -O2 -std=c++17, the host with cc -O2"
        )
    side.notes += sorted(
        {
            f"{r.case.peer}, {r.case.group}: {r.case.note}"
            for r in results
            if r.case.note and r.case.primary
        }
    )
    side.notes += sorted(
        {f"{peer}: {why}" for (peer, _), why in skipped.items() if why.startswith("unavailable")}
    )

    detail = Table(
        f"{TITLE}: every case",
        ["operation", "case [peer]", "code", "ns/op", "p99", "max", "net ns/item", "main"],
        description=(
            f"Median ns per operation over {config.micro_rounds} interleaved batches "
            f"(creation batches are 5x smaller; an override statement makes {LOOP} calls, "
            f"and its net figure is per call; a tick statement ticks {ACTORS:,} actors, its "
            "net figure per actor), p99 and max over the batches, *net* minus "
            "the empty loop. *main*: the case shown side by side."
        ),
    )
    add_case_rows(detail, results, GROUPS, PEER_NAMES, MicroResult.per_item)
    return [side, detail]
