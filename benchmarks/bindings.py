"""Binding cost: the same C struct and functions (``csrc/actor.h``) reached
from Python five ways (zsharp_py, nanobind, pybind11, raw cffi, ctypes), with
a plain Python object as the floor.

Operations (one statement each, timed in interleaved ``timeit`` batches):
property read and write, a method call with 0 and 3 arguments, returning an
already-wrapped native object (the conjugate mapping: the same Python object
comes back), storing an object reference, creating a native object with its
proxy, reading a struct member as a view, and iterating a 1,000-element
native array of ints.

zsharp_py declares the struct's members as a ``zs.Object`` subclass
(``BindActor``, with ``velocity`` a ``zs.Struct``). It has no native method
binding yet, so its methods are Python methods on the conjugate that call the
same C function bodies, compiled for its layout, through the raw cffi module.
Its array is a black ``zs.Array[zs.Int32]``. Where zsharp_py lacks structs or
containers, those rows say so instead of a figure.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any

import zsharp_py as zs
from zsharp_py._model.object import class_layout
from zsharp_py.lowlevel import function_layout

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

NAME = "bindings"
TITLE = "Binding cost"

__all__ = ["NAME", "TITLE", "PEERS", "GROUPS", "run"]

VALUE = 5  # written by every write case; fits every field type
ARRAY_LENGTH = 1000

# (group, title, what the statement looks like)
GROUPS: list[tuple[str, str]] = [
    ("read", "property read `a.health`"),
    ("write", "property write `a.health = v`"),
    ("call0", "method call, 0 arguments `a.get_health()`"),
    ("call3", "method call, 3 arguments `a.move(1.0, 2.0, 3.0)`"),
    ("existing", "returning an already-wrapped object `a.target`"),
    ("store", "storing an object reference `a.target = b`"),
    ("create", "creating a native object with its proxy `Actor()`"),
    ("view", "reading a struct member as a view `a.velocity`"),
    ("iterate", "iterating a 1,000-int native array, per element"),
    ("override", "native code calling a Python override `tick(dt)` (a call down, then up)"),
]
GROUP_TITLES = dict(GROUPS)

PEER_NAMES = ["zsharp_py", "nanobind", "pybind11", "raw cffi", "ctypes", "CPython"]
VERSIONS: dict[str, str] = {}  # the C++ binding libraries measured


# ---------------------------------------------------------------------------
# The peers' objects
# ---------------------------------------------------------------------------


def zs_vec3_class() -> type[Any] | None:
    """``Vec3`` as a ``zs.Struct`` (None while zsharp_py has no structs)."""
    if not hasattr(zs, "Struct"):
        return None

    class Vec3(zs.Struct):  # type: ignore[misc,name-defined,unused-ignore]
        x: zs.Float64
        y: zs.Float64
        z: zs.Float64

    return Vec3


def zs_actor_class(
    get_health: Callable[[Any], int],
    move: Callable[[Any, float, float, float], None],
    vec3: type[Any] | None,
) -> type[zs.Object]:
    """The struct's members declared for zsharp_py; the methods call the C
    bodies (``zs_actor_*``, compiled for this layout) through cffi."""

    class BindActor(zs.Object):
        health: zs.Int32 = 100
        x: zs.Float64
        y: zs.Float64
        z: zs.Float64
        target: BindActor | None
        if vec3 is not None:
            velocity: vec3  # type: ignore[valid-type]

        def get_health(self) -> int:
            return get_health(self._address)

        def move(self, dx: float, dy: float, dz: float) -> None:
            move(self._address, dx, dy, dz)

    return BindActor


class PyVec3:
    __slots__ = ("x", "y", "z")

    def __init__(self) -> None:
        self.x = self.y = self.z = 0.0


class PyActor:
    """The floor: the same members and methods as a plain Python object."""

    __slots__ = ("health", "x", "y", "z", "target", "velocity")

    def __init__(self) -> None:
        self.health = 100
        self.x = self.y = self.z = 0.0
        self.target: PyActor | None = None
        self.velocity: PyVec3 | None = None

    def get_health(self) -> int:
        return self.health

    def move(self, dx: float, dy: float, dz: float) -> None:
        self.x += dx
        self.y += dy
        self.z += dz


class PyTickerFloor:
    """The floor of the override row: a Python method called from Python."""

    __slots__ = ()

    def tick(self, dt: float) -> None:
        pass


class PropertyActor:
    """A Python-level property (a getter and a setter function)."""

    __slots__ = ("_health",)

    def __init__(self) -> None:
        self._health = 100

    @property
    def health(self) -> int:
        return self._health

    @health.setter
    def health(self, value: int) -> None:
        self._health = value


class CVec3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_double), ("y", ctypes.c_double), ("z", ctypes.c_double)]


class CActor(ctypes.Structure):
    pass


CActor._fields_ = [
    ("health", ctypes.c_int32),
    ("x", ctypes.c_double),
    ("y", ctypes.c_double),
    ("z", ctypes.c_double),
    ("target", ctypes.POINTER(CActor)),
    ("velocity", CVec3),
]


class CIntArray(ctypes.Structure):
    _fields_ = [("values", ctypes.c_int32 * ARRAY_LENGTH)]


# ---------------------------------------------------------------------------
# Providers: the cases of one peer, and the groups it cannot measure
# ---------------------------------------------------------------------------

Provided = tuple[list[MicroCase], dict[str, str]]


def _zsharp_cases(config: Config, stack: contextlib.ExitStack) -> Provided:
    runtime = stack.enter_context(zs.Runtime())  # current runtime while the cases run
    skipped: dict[str, str] = {}
    try:
        vec3 = zs_vec3_class()
    except Exception as error:  # a young API: report, do not fail the run
        vec3 = None
        skipped["view"] = f"unavailable: declaring a zs.Struct failed: {error}"
    if vec3 is None:
        skipped.setdefault("view", _not_yet("Struct"))
    try:
        lib = _build.cffi_actor_module(config).lib
        get_health, move = lib.zs_actor_get_health, lib.zs_actor_move
        methods = True
    except Unavailable as reason:
        get_health = move = None
        methods = False
        skipped["call0"] = skipped["call3"] = f"unavailable: {reason}"
    actor_class = zs_actor_class(get_health, move, vec3)
    if methods:
        _check_zs_layout(actor_class, _build.cffi_actor_module(config))
    actor, other = actor_class(), actor_class()
    actor.add_to_root()  # the creation case collects garbage after every batch
    actor.target = other  # type: ignore[attr-defined]
    assert actor.health == 100 and actor.target is other  # type: ignore[attr-defined]
    namespace = {
        "a": actor,
        "b": other,
        "v": VALUE,
        "Actor": actor_class,
        "arr": _zs_int_array(skipped),
    }
    peer = "zsharp_py"
    cases = [
        MicroCase(
            "zs.Object Int32 property",
            "read",
            "a.health",
            namespace,
            peer,
            note="a C descriptor (zsharp_py._core): liveness check, member load",
        ),
        MicroCase(
            "zs.Object Int32 property",
            "write",
            "a.health = v",
            namespace,
            peer,
            note=(
                "a C descriptor: an exact in-range int is stored in C; "
                "other values convert first (Python)"
            ),
        ),
        MicroCase(
            "reference property, target has a conjugate",
            "existing",
            "a.target",
            namespace,
            peer,
            note="a C descriptor: field load + conjugate-table lookup",
        ),
        MicroCase(
            "reference property",
            "store",
            "a.target = b",
            namespace,
            peer,
            note=(
                "a C descriptor: class, liveness and runtime checks, "
                "then zs_store_ref (liveness, write barrier)"
            ),
        ),
        MicroCase(
            "BindActor() + its share of a collection",
            "create",
            "Actor()",
            namespace,
            peer,
            after_batch=runtime.collect_garbage,
            after_batch_timed=True,
            scale=0.2,
            note="each batch ends with rt.collect_garbage(), timed. Each object is "
            "dropped unshared, so the next creation frees it and the collection only "
            "the batch's last one, as the peers' destructors run inside their statements",
        ),
        MicroCase(
            "BindActor() alone (collection not timed)",
            "create",
            "Actor()",
            namespace,
            peer,
            after_batch=runtime.collect_garbage,
            scale=0.2,
            primary=False,
        ),
    ]
    if vec3 is not None:
        view = actor.velocity  # type: ignore[attr-defined]
        assert view.x == 0.0 and not view.is_black
        cases.append(
            MicroCase(
                "zs.Struct member: a red view",
                "view",
                "a.velocity",
                namespace,
                peer,
                note="a red view into the object (cached per object)",
            )
        )
    if namespace["arr"] is not None:
        cases += [
            MicroCase(
                "black zs.Array[zs.Int32]: for v in arr",
                "iterate",
                "for v in arr: pass",
                namespace,
                peer,
                scale=0.001,
                items=ARRAY_LENGTH,
                note="Array.__iter__: chunks of 256 copied out by one ffi.unpack under the lock",
            ),
            MicroCase(
                "the same through arr.to_python() (one bulk copy)",
                "iterate",
                "for v in arr.to_python(): pass",
                namespace,
                peer,
                scale=0.01,
                items=ARRAY_LENGTH,
                primary=False,
            ),
        ]
    cases.append(_zs_override_case(runtime))
    cases.append(_zs_override_objects_case(runtime))
    if methods:
        cases += [
            MicroCase(
                "Python method -> cffi -> C body",
                "call0",
                "a.get_health()",
                namespace,
                peer,
                note="no native method binding yet: a Python method calling "
                "zs_actor_get_health(self._address) through cffi (the C body "
                "takes the address as an integer, 0 once expired)",
            ),
            MicroCase(
                "Python method -> cffi -> C body", "call3", "a.move(1.0, 2.0, 3.0)", namespace, peer
            ),
        ]
    return cases, skipped


class ZsSpot(zs.Struct):
    """A struct parameter: a red view into the host's block during the call."""

    x: zs.Float64
    y: zs.Float64


class ZsTicker(zs.Object):
    """An object whose Python ``tick`` native code calls (``zs_call_function``)."""

    def tick(self, dt: float) -> None:
        pass

    def meet(self, other: ZsTicker | None, at: ZsSpot) -> None:
        pass


def _zs_override_case(runtime: zs.Runtime) -> MicroCase:
    """``zs_call_function(rt, h, "tick", &dt)`` called as a native host would
    (through cffi from here, as the peers' C functions are)."""
    from zsharp_py._base.ffi import ffi as zffi
    from zsharp_py._base.ffi import lib as zlib

    ticker = ZsTicker()
    ticker.add_to_root()
    block = zffi.new("double *", 1 / 60)
    namespace = {
        "call": zlib.zs_call_function,
        "rt": zffi.cast("zs_runtime *", runtime.native_address),
        "h": ticker.handle,
        "name": b"tick",
        "block": zffi.cast("void *", block),
        "keep": (ticker, block),
    }
    assert zlib.zs_call_function(namespace["rt"], ticker.handle, b"tick", namespace["block"]) == 0
    return MicroCase(
        "zs_call_function -> Python method (a scope, the runtime current)",
        "override",
        "call(rt, h, name, block)",
        namespace,
        "zsharp_py",
    )


def _zs_override_objects_case(runtime: zs.Runtime) -> MicroCase:
    """``zs_call_function(rt, h, "meet", &params)`` with an object and a
    struct parameter: the handle resolved to its conjugate, the struct a red
    view into the block (made, then expired by the call's scope)."""
    from zsharp_py._base.ffi import ffi as zffi
    from zsharp_py._base.ffi import lib as zlib

    ticker, other = ZsTicker(), ZsTicker()
    ticker.add_to_root()
    other.add_to_root()
    assert function_layout(ZsTicker, "meet").size == 24  # { zs_ref other; struct ZsSpot at; }
    block = zffi.new("uint64_t[3]", [other.handle, 0, 0])
    namespace = {
        "call": zlib.zs_call_function,
        "rt": zffi.cast("zs_runtime *", runtime.native_address),
        "h": ticker.handle,
        "name": b"meet",
        "block": zffi.cast("void *", block),
        "keep": (ticker, other, block),
    }
    assert zlib.zs_call_function(namespace["rt"], ticker.handle, b"meet", namespace["block"]) == 0
    return MicroCase(
        "the same, meet(other, at): an object and a struct parameter",
        "override",
        "call(rt, h, name, block)",
        namespace,
        "zsharp_py",
        primary=False,
        note="the handle resolved to the held conjugate; the struct a red view "
        "into the block, expired when the call returns",
    )


def _zs_int_array(skipped: dict[str, str]) -> Any:
    """A black ``zs.Array[zs.Int32]`` holding 0..999, or None (reason in skipped)."""
    if not hasattr(zs, "Array"):
        skipped["iterate"] = _not_yet("Array")
        return None
    try:
        array_type: Any = zs.Array
        array = array_type[zs.Int32](range(ARRAY_LENGTH))
        assert sum(array) == ARRAY_LENGTH * (ARRAY_LENGTH - 1) // 2
        return array
    except Exception as error:  # a young API: report, do not fail the run
        skipped["iterate"] = f"unavailable: zs.Array[zs.Int32] failed: {error}"
        return None


def _not_yet(name: str) -> str:
    if hasattr(zs, name):
        return f"skipped: zs.{name} exists now, but this benchmark does not measure it yet"
    return f"skipped: zs.{name} does not exist yet"


def _check_zs_layout(actor_class: type[zs.Object], module: ModuleType) -> None:
    """The C bodies compiled for zsharp's layout must see the same offsets."""
    layout = class_layout(actor_class)
    for info in layout.properties:
        expected = module.ffi.offsetof("ZsActor", info.name)
        if info.offset != expected:
            raise Unavailable(
                f"zsharp layout of {info.name} at {info.offset}, the C struct has it at {expected}"
            )


def _binding_cases(peer: str, module: ModuleType) -> Provided:
    actor, other = module.Actor(), module.Actor()
    actor.target = other
    assert actor.health == 100 and actor.target is other and actor.get_health() == 100
    array = module.IntArray()
    assert sum(array) == ARRAY_LENGTH * (ARRAY_LENGTH - 1) // 2

    class PyTicker(module.Ticker):  # type: ignore[name-defined,misc]
        def tick(self, dt: float) -> None:
            pass

    namespace = {
        "a": actor,
        "b": other,
        "v": VALUE,
        "Actor": module.Actor,
        "arr": array,
        "t": PyTicker(),
        "call_tick": module.call_tick,
    }
    VERSIONS[peer] = str(getattr(module, "VERSION", "?"))
    return [
        MicroCase(
            "a C++ virtual overridden in Python (trampoline)",
            "override",
            "call_tick(t, 0.016)",
            namespace,
            peer,
        ),
        MicroCase("def_rw / def_readwrite", "read", "a.health", namespace, peer),
        MicroCase("def_rw / def_readwrite", "write", "a.health = v", namespace, peer),
        MicroCase("bound C function", "call0", "a.get_health()", namespace, peer),
        MicroCase("bound C function", "call3", "a.move(1.0, 2.0, 3.0)", namespace, peer),
        MicroCase(
            "rv_policy reference: instance-map lookup", "existing", "a.target", namespace, peer
        ),
        MicroCase("property setter", "store", "a.target = b", namespace, peer),
        MicroCase(
            "Actor() (then freed by refcount)", "create", "Actor()", namespace, peer, scale=0.2
        ),
        MicroCase(
            "def_rw of a struct member (reference_internal)", "view", "a.velocity", namespace, peer
        ),
        MicroCase(
            "make_iterator over the C array",
            "iterate",
            "for v in arr: pass",
            namespace,
            peer,
            scale=0.01,
            items=ARRAY_LENGTH,
        ),
    ], {}


def _nanobind_cases(config: Config, stack: contextlib.ExitStack) -> Provided:
    return _binding_cases("nanobind", _build.nanobind_actor_module(config))


def _pybind11_cases(config: Config, stack: contextlib.ExitStack) -> Provided:
    return _binding_cases("pybind11", _build.pybind11_actor_module(config))


def _cffi_cases(config: Config, stack: contextlib.ExitStack) -> Provided:
    module = _build.cffi_actor_module(config)
    ffi, lib = module.ffi, module.lib
    actor = ffi.gc(lib.actor_new(), lib.actor_free)
    other = ffi.gc(lib.actor_new(), lib.actor_free)
    lib.actor_set_target(actor, other)
    array = ffi.gc(lib.int_array_new(), lib.int_array_free)
    assert actor.health == 100 and lib.actor_get_health(actor) == 100
    assert sum(array.values) == ARRAY_LENGTH * (ARRAY_LENGTH - 1) // 2

    @ffi.callback("void(void *, double)")
    def tick(self: Any, dt: float) -> None:
        pass

    namespace = {
        "p": actor,
        "q": other,
        "v": VALUE,
        "ffi": ffi,
        "lib": lib,
        "arr": array,
        "get_health": lib.actor_get_health,
        "move": lib.actor_move,
        "tick": tick,
        "NULL": ffi.NULL,
    }
    peer = "raw cffi"
    return [
        MicroCase(
            "a C function calling an ffi.callback",
            "override",
            "lib.actor_call_tick(tick, NULL, 0.016)",
            namespace,
            peer,
        ),
        MicroCase("cdata field", "read", "p.health", namespace, peer, baseline=True),
        MicroCase("cdata field", "write", "p.health = v", namespace, peer, baseline=True),
        MicroCase("lib function", "call0", "lib.actor_get_health(p)", namespace, peer),
        MicroCase("lib function", "call3", "lib.actor_move(p, 1.0, 2.0, 3.0)", namespace, peer),
        MicroCase(
            "lib function hoisted (no `lib.` lookup)",
            "call0",
            "get_health(p)",
            namespace,
            peer,
            primary=False,
        ),
        MicroCase(
            "lib function hoisted (no `lib.` lookup)",
            "call3",
            "move(p, 1.0, 2.0, 3.0)",
            namespace,
            peer,
            primary=False,
        ),
        MicroCase(
            "pointer field (a new cdata per read, no identity)",
            "existing",
            "p.target",
            namespace,
            peer,
        ),
        MicroCase("pointer field", "store", "p.target = q", namespace, peer),
        MicroCase(
            "ffi.gc(lib.actor_new(), lib.actor_free)",
            "create",
            "ffi.gc(lib.actor_new(), lib.actor_free)",
            namespace,
            peer,
            scale=0.2,
        ),
        MicroCase(
            "ffi.new('Actor *') (no C constructor)",
            "create",
            "ffi.new('Actor *')",
            namespace,
            peer,
            scale=0.2,
            primary=False,
        ),
        MicroCase("struct field (a cdata view)", "view", "p.velocity", namespace, peer),
        MicroCase(
            "iterating an int32_t[1000] cdata",
            "iterate",
            "for v in arr.values: pass",
            namespace,
            peer,
            scale=0.01,
            items=ARRAY_LENGTH,
        ),
    ], {}


def _ctypes_cases(config: Config, stack: contextlib.ExitStack) -> Provided:
    lib = ctypes.CDLL(str(_build.ctypes_actor_library(config)))
    lib.actor_sizeof.restype = lib.int_array_sizeof.restype = ctypes.c_size_t
    if lib.actor_sizeof() != ctypes.sizeof(CActor) or lib.int_array_sizeof() != ctypes.sizeof(
        CIntArray
    ):
        raise Unavailable("ctypes' struct layout differs from the C compiler's")
    actor_pointer = ctypes.POINTER(CActor)
    lib.actor_new.restype = actor_pointer
    lib.actor_free.argtypes = [actor_pointer]
    lib.actor_get_health.argtypes = [actor_pointer]
    lib.actor_get_health.restype = ctypes.c_int32
    lib.actor_move.argtypes = [actor_pointer, ctypes.c_double, ctypes.c_double, ctypes.c_double]
    lib.actor_move.restype = None
    lib.int_array_new.restype = ctypes.POINTER(CIntArray)
    pointer, other = lib.actor_new(), lib.actor_new()
    stack.callback(lib.actor_free, pointer)
    stack.callback(lib.actor_free, other)
    actor = pointer.contents
    actor.target = other
    array_pointer = lib.int_array_new()
    stack.callback(ctypes.CDLL(None).free, array_pointer)
    array = array_pointer.contents
    assert actor.health == 100 and lib.actor_get_health(pointer) == 100
    tick_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_double)
    lib.actor_call_tick.argtypes = [tick_type, ctypes.c_void_p, ctypes.c_double]
    lib.actor_call_tick.restype = None
    tick = tick_type(lambda self, dt: None)
    namespace = {
        "s": actor,
        "sp": pointer,
        "q": other,
        "v": VALUE,
        "lib": lib,
        "CActor": CActor,
        "arr": array,
        "tick": tick,
    }
    peer = "ctypes"
    return [
        MicroCase(
            "a CDLL function calling a CFUNCTYPE callback",
            "override",
            "lib.actor_call_tick(tick, None, 0.016)",
            namespace,
            peer,
        ),
        MicroCase("Structure field", "read", "s.health", namespace, peer),
        MicroCase("Structure field", "write", "s.health = v", namespace, peer),
        MicroCase(
            "CDLL function with argtypes", "call0", "lib.actor_get_health(sp)", namespace, peer
        ),
        MicroCase(
            "CDLL function with argtypes",
            "call3",
            "lib.actor_move(sp, 1.0, 2.0, 3.0)",
            namespace,
            peer,
        ),
        MicroCase(
            "POINTER field (a new pointer object per read)", "existing", "s.target", namespace, peer
        ),
        MicroCase("POINTER field", "store", "s.target = q", namespace, peer),
        MicroCase(
            "CActor() (ctypes-owned buffer, no C constructor)",
            "create",
            "CActor()",
            namespace,
            peer,
            scale=0.2,
        ),
        MicroCase(
            "Structure field of Structure type (a view)", "view", "s.velocity", namespace, peer
        ),
        MicroCase(
            "iterating a c_int32 * 1000 field",
            "iterate",
            "for v in arr.values: pass",
            namespace,
            peer,
            scale=0.01,
            items=ARRAY_LENGTH,
        ),
    ], {}


def _python_cases(config: Config, stack: contextlib.ExitStack) -> Provided:
    actor, other = PyActor(), PyActor()
    actor.target = other
    actor.velocity = PyVec3()
    values = list(range(ARRAY_LENGTH))
    namespace = {
        "o": actor,
        "o2": other,
        "r": PropertyActor(),
        "v": VALUE,
        "PyActor": PyActor,
        "arr": values,
        "t": PyTickerFloor(),
    }
    peer = "CPython"
    return [
        MicroCase(
            "a Python method called from Python", "override", "t.tick(0.016)", namespace, peer
        ),
        MicroCase("__slots__ attribute", "read", "o.health", namespace, peer),
        MicroCase("__slots__ attribute", "write", "o.health = v", namespace, peer),
        MicroCase("Python method", "call0", "o.get_health()", namespace, peer),
        MicroCase("Python method", "call3", "o.move(1.0, 2.0, 3.0)", namespace, peer),
        MicroCase("__slots__ attribute holding an object", "existing", "o.target", namespace, peer),
        MicroCase("__slots__ attribute", "store", "o.target = o2", namespace, peer),
        MicroCase(
            "PyActor() (then freed by refcount)", "create", "PyActor()", namespace, peer, scale=0.2
        ),
        MicroCase("attribute holding an object", "view", "o.velocity", namespace, peer),
        MicroCase(
            "iterating a list of 1,000 ints",
            "iterate",
            "for v in arr: pass",
            namespace,
            peer,
            scale=0.01,
            items=ARRAY_LENGTH,
        ),
        MicroCase("@property (Python getter)", "read", "r.health", namespace, peer, primary=False),
        MicroCase(
            "@property (Python setter)", "write", "r.health = v", namespace, peer, primary=False
        ),
    ], {}


Provider = Callable[[Config, contextlib.ExitStack], Provided]

# Each provider returns the cases of one peer or raises Unavailable.
PEERS: list[tuple[str, Provider]] = [
    ("zsharp_py", _zsharp_cases),
    ("nanobind", _nanobind_cases),
    ("pybind11", _pybind11_cases),
    ("raw cffi", _cffi_cases),
    ("ctypes", _ctypes_cases),
    ("CPython", _python_cases),
]


def _prebuild(config: Config) -> None:
    """Build the compiled peers two at a time (g++ takes most of it)."""
    builders: list[Callable[[Config], Any]] = [
        _build.cffi_actor_module,
        _build.ctypes_actor_library,
    ]
    if config.install:
        builders = [_build.nanobind_actor_module, _build.pybind11_actor_module] + builders
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
    with contextlib.ExitStack() as stack:
        cases: list[MicroCase] = []
        skipped: dict[tuple[str, str], str] = {}
        for peer, provider in PEERS:
            try:
                provided, peer_skips = provider(config, stack)
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
    return _tables(config, results, overhead.median, skipped)


def _tables(
    config: Config, results: list[MicroResult], overhead: float, skipped: dict[tuple[str, str], str]
) -> list[Table]:
    result: MicroResult | None
    primary = {(r.case.peer, r.case.group): r for r in results if r.case.primary}
    for (peer, group), result in primary.items():
        value, rounds = result.recorded()
        record(f"bindings.{group}.{peer}", value, rounds=rounds)
    for (peer, group), why in skipped.items():
        record(f"bindings.{group}.{peer}", None, why)
    for result in results:  # creation without its collection: the expiry target's yardstick
        if (
            result.case.peer == "zsharp_py"
            and result.case.group == "create"
            and not result.case.after_batch_timed
        ):
            record("bindings.create_alone.zsharp_py", result.per_item())

    ratio_peers = ["nanobind", "pybind11", "raw cffi", "CPython"]
    side = Table(
        f"{TITLE}: side by side (net ns per operation)",
        ["operation", *PEER_NAMES, *(f"zsharp_py / {p}" for p in ratio_peers)],
        description=(
            "The same C struct and functions bound five ways, plus a plain Python object "
            "(the floor). Each cell is the median net ns per operation (the empty `timeit` "
            f"loop, {fmt_ns(overhead, 2)} ns, subtracted) of the peer's main case; the detail "
            "table lists every case with its statement. Ratios are zsharp_py over the peer "
            "(below 1: zsharp_py is faster). Iteration is per element."
        ),
    )
    for group, title in GROUPS:
        cells: list[str] = [title]
        for peer in PEER_NAMES:
            result = primary.get((peer, group))
            why = skipped.get((peer, group), "n/a")
            cells.append(
                fmt_ns(result.per_item())
                if result is not None
                else "unavailable"
                if why.startswith("unavailable")
                else why
            )
        ours = primary.get(("zsharp_py", group))
        for peer in ratio_peers:
            theirs: MicroResult | None = primary.get((peer, group))
            cells.append(fmt_result_ratio(ours, theirs))
        side.add(*cells)
    if VERSIONS:
        side.notes.append(
            "versions: "
            + ", ".join(f"{peer} {version}" for peer, version in sorted(VERSIONS.items()))
            + "; C++ peers compiled with g++ -O2 -std=c++17"
        )
    side.notes += sorted(
        {
            f"{r.case.peer}, {r.case.group}: {r.case.note}"
            for r in results
            if r.case.note and r.case.primary
        }
    )
    unavailable = sorted(
        {f"{peer}: {why}" for (peer, _), why in skipped.items() if why.startswith("unavailable")}
    )
    side.notes += unavailable

    total = config.micro_number * config.micro_rounds
    detail = Table(
        f"{TITLE}: every case",
        ["operation", "case [peer]", "code", "ns/op", "p99", "max", "net ns/op", "main"],
        description=(
            f"Median ns per operation over {config.micro_rounds} interleaved batches of "
            f"{config.micro_number:,} operations ({total:,} per case; creation batches are "
            "5x and iteration batches 100x smaller), p99 and max over the batches, *net* "
            "minus the empty loop. *main*: the case shown side by side."
        ),
    )
    add_case_rows(detail, results, GROUPS, PEER_NAMES, lambda result: result.net.median)
    return [side, detail]
