"""The fuzz harness: one input (bytes) becomes one sequence of public API calls.

``run_one(data)`` opens a runtime (its options, the collector's stress
switches and an optional allocation limit come from the first bytes), then
reads the rest of ``data`` as a program: every step picks an operation and
its arguments.  The operations cover objects of several classes (scalars,
the string kinds, names, references, weak pointers, arrays, maps, sets,
optionals, structs, delegates, object wrappers), roots, strong and weak
pointers, mark-as-garbage, clusters, scopes and red views, clones, black
values and their disposal, full collections, incremental steps and purges,
and closing the runtime early; arguments are often malformed on purpose:
wrong types, huge and negative integers, NaN and infinities, invalid UTF-8
and non-ASCII text for ANSI strings, unknown properties and classes,
expired objects, disposed values, views of closed scopes, objects of
another runtime, out-of-range indices.

A native host is driven too: most sessions install the sample engine
(``zsharp_py.sample_engine``) and define Python subclasses of its Actor, one
with ``zs.state()`` only and one whose event overrides read from the input
what to do when native code calls them (``super()`` to the native default,
a nested step, destroy, collect from Python or natively, mark as garbage,
replace the state, raise, close the runtime). The operations spawn, tick
(``zs_call_each`` from C), destroy, call the engine's functions from Python
with fuzzed and hostile arguments (a ``__float__`` that destroys the target
or collects), call functions by name from C on a raw block
(``zs_call_function``, ``zs_call_each``: an override through the handler or
the host's own entry), and store Python state. The tick manager (``rt.ticks``) registers
tick functions of those actors and of other objects (fuzzed names, groups,
intervals, prerequisites), changes and unregisters them, and runs frames
from Python (with the collector's share) or from C (``zs_tick_frame`` with
fuzzed settings), whose overrides act as the input says. Exceptions an override
raises go to ``sys.unraisablehook`` and must be documented ones; a value
stored in the state of an expired object must have been released.

Delegates are broadcast from native code too (``zs_delegate_broadcast``,
``zs_delegate_execute``, as a host calls them): the delegates of the
harness's classes and the engine's events, with a signature drawn from a
fixed set (a scalar, an object reference, a string, a result, a type no
script knows, an out parameter the call refuses) and a block of input
bytes, reaching listeners that run more steps (collect, close, unbind...)
or raise; the engine broadcasts its own events when it ticks and takes
damage, to listeners the delegate operations bind there.

The only exceptions an operation may raise are the library's documented
ones (``EXPECTED``; ``MemoryError`` only when an allocation limit or a
small object capacity is injected; ``RuntimeError`` only with the messages
of ``RUNTIME_ERRORS``).  Anything else escapes ``run_one``, and so does a
failed ``rt.gc.verify()`` (run after every step) or a failed check at the
end: after releasing everything it holds, the harness collects and checks
that no native object and no black value is left, that every conjugate it
saw is expired once the runtime is closed, and closing the runtime frees
every native block (``zs_runtime_free`` asserts the block and byte counts
are zero; the assert is compiled in the sanitizer build that
``tools/fuzz.sh`` uses).

The byte reader is self-contained (no atheris needed), so the normal test
suite runs ``run_one`` over fixed pseudo-random inputs
(``tests/tooling/test_fuzz_harness.py``) and ``fuzz_api.py`` runs it under atheris.
"""

from __future__ import annotations

import gc
import itertools
import math
import sys
import uuid
import weakref
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, suppress
from typing import Any, TypeVar

import zsharp_py as zs
import zsharp_py.debug
from zsharp_py import sample_engine
from zsharp_py._base.errors import (
    ZS_E_BUSY,
    ZS_E_CALL_FAILED,
    ZS_E_DYING,
    ZS_E_INVALID,
    ZS_E_NOMEM,
    ZS_E_STALE,
    ZS_OK,
)
from zsharp_py._base.ffi import ffi, lib
from zsharp_py._model.object import class_layout
from zsharp_py.debug import GcStress

__all__ = ["EXPECTED", "RUNTIME_ERRORS", "Reader", "Session", "run_one"]

T = TypeVar("T")

#: The library's documented exceptions for misuse.
EXPECTED: tuple[type[BaseException], ...] = (
    TypeError,
    ValueError,
    OverflowError,
    IndexError,
    KeyError,
    zs.ExpiredConjugateError,
)

#: ``RuntimeError`` is documented only for these situations (messages).
RUNTIME_ERRORS = (
    "an incremental cycle is already in progress",  # gc.start_incremental
    "not possible while an incremental mark is pending",  # create_cluster
    "the delegate is not bound",  # Delegate.execute
    # A host function whose call into a Python override failed (the sample
    # engine's World.destroy when on_destroy raised; reported first).
    "the Python (managed) function called from native code raised an exception",
    "rt.ticks.frame() is running already",  # a frame from inside a tick function
)

#: ``AttributeError`` is documented only for binding a missing method
#: (``FieldPathError``, also an ``AttributeError``, is handled where used).
ATTRIBUTE_ERRORS = ("has no method",)

MAX_STEPS = 120  # operations per input
MAX_POOL = 48  # conjugates, values and views remembered per pool


class Reader:
    """Reads choices from fuzz bytes; past the end every read gives zeros,
    so any byte string is a valid (possibly short) program."""

    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def remaining(self) -> int:
        """Bytes not read yet."""
        return len(self._data) - self._pos

    def byte(self) -> int:
        """The next byte (0 past the end)."""
        if self._pos >= len(self._data):
            return 0
        self._pos += 1
        return self._data[self._pos - 1]

    def below(self, n: int) -> int:
        """A number in ``range(n)`` (``n`` >= 1)."""
        if n <= 256:
            return self.byte() % n
        return (self.byte() << 8 | self.byte()) % n

    def flag(self) -> bool:
        """True or False, evenly."""
        return bool(self.byte() & 1)

    def chance(self, k: int) -> bool:
        """True with probability ``k``/256."""
        return self.byte() < k

    def pick(self, seq: Sequence[T]) -> T:
        """One element of the non-empty ``seq``."""
        return seq[self.below(len(seq))]

    def take(self, n: int) -> bytes:
        """Up to ``n`` raw bytes."""
        chunk = self._data[self._pos : self._pos + n]
        self._pos += len(chunk)
        return chunk


# ---- the classes the harness drives ------------------------------------------------


# The generic value types, untyped: the harness subscripts them in tables
# and feeds them deliberately malformed arguments, which their typed
# signatures would (rightly) refuse.
Array: Any = zs.Array
Map: Any = zs.Map
Set: Any = zs.Set
Optional: Any = zs.Optional
SubclassOf: Any = zs.SubclassOf
SoftObjectPtr: Any = zs.SoftObjectPtr
SoftClassPtr: Any = zs.SoftClassPtr
LazyObjectPtr: Any = zs.LazyObjectPtr
ScriptInterface: Any = zs.ScriptInterface


class IPoke(zs.Interface):
    """An interface, implemented by ``FHero`` only."""

    __slots__ = ()

    def poke(self) -> None:
        """Do something observable."""
        raise NotImplementedError


def blank(cls: Callable[..., T], *args: Any) -> T:
    """``cls(*args)``: a new object (or struct) with every property not
    given at zero, as native code creates one. Type checkers see the properties declared
    without a default as required keywords of the class call (zs.Object's
    dataclass_transform, docs/writing-game-scripts.md); the harness wants
    that zeroed state on purpose."""
    return cls(*args)


class FVec(zs.Struct):
    """A struct with a scalar, a float, a name, a string and a reference."""

    x: zs.Int32
    f: zs.Float32
    label: zs.Name
    text: zs.String
    who: "FNode | None"


class FNode(zs.Object, cluster_root=True, can_be_in_cluster=True):
    """Every kind of property, and clusterable."""

    i8: zs.Int8
    u8: zs.UInt8
    i32: zs.Int32 = 7
    u32: zs.UInt32
    i64: zs.Int64
    u64: zs.UInt64
    f32: zs.Float32
    f64: zs.Float64
    flag: zs.Bool
    label: zs.String
    ansi: zs.AnsiString
    utf8: zs.Utf8String
    text: zs.Text
    tag: zs.Name
    ref: "FNode | None"
    leaf: "FLeaf | None"
    weak: zs.WeakObjectPtr["FNode"]
    nodes: zs.Array["FNode"]
    nums: zs.Array[zs.Int32]
    vecs: zs.Array[FVec]
    words: zs.Array[zs.String]
    scores: zs.Map[zs.Name, zs.Int32]
    owners: zs.Map[zs.Int32, "FNode"]
    members: zs.Set["FNode"]
    tags: zs.Set[zs.Name]
    pos: FVec
    maybe: zs.Optional[FVec]
    on_event: zs.MulticastDelegate
    single: zs.Delegate
    sparse: zs.SparseDelegate

    def bump(self, *args: Any) -> None:
        """A method delegates bind to (weakly)."""
        self.i32 = (self.i32 + 1) & 0x7FFFFFFF

    def react(self, amount: zs.Int32, other: FNode | None) -> zs.Int8:
        """Called from native code (op_native_call): writes, links, sometimes
        collects mid-call, and returns a result that is often out of range."""
        self.i32 = amount & 0x7FFFFFFF
        self.ref = other
        if amount % 5 == 0:
            zs.current_runtime().collect_garbage()
        return amount


class FHero(FNode, IPoke):
    """A subclass with its own scalar and reference; implements ``IPoke``."""

    level: zs.Int16 = 1
    sidekick: "FNode | None"

    def poke(self) -> None:
        """Raise the level (wrapping)."""
        self.level = (self.level + 1) % 30000


class FLeaf(zs.Object, can_be_in_cluster=False):
    """Cannot join a cluster; holds the object wrappers."""

    value: zs.Int32
    node: "FNode | None"
    kind: zs.SubclassOf[FNode]
    soft: zs.SoftObjectPtr[FNode]
    soft_class: zs.SoftClassPtr[FNode]
    lazy: zs.LazyObjectPtr[FNode]
    iface: zs.ScriptInterface[IPoke]
    hook: zs.Delegate


class FOther(zs.Object):
    """Unrelated to the others: storing it anywhere is a type error."""

    weight: zs.Float64 = 1.5


class FGone(zs.Object):
    """Removed from this module after import: a class no path finds."""

    value: zs.Int32


_GONE = FGone
del FGone

CLASSES: list[type[zs.Object]] = [FNode, FNode, FHero, FLeaf, FOther, _GONE]

# property name -> kind of plausible value (see Session.plausible)
NODE_PROPS: dict[str, str] = {
    "i8": "int8",
    "u8": "uint8",
    "i32": "int32",
    "u32": "uint32",
    "i64": "int64",
    "u64": "uint64",
    "f32": "float",
    "f64": "float",
    "flag": "bool",
    "label": "text",
    "ansi": "text",
    "utf8": "text",
    "text": "text",
    "tag": "text",
    "ref": "node",
    "leaf": "leaf",
    "weak": "weak",
    "nodes": "node_list",
    "nums": "int_list",
    "vecs": "vec_list",
    "words": "text_list",
    "scores": "name_int_map",
    "owners": "int_node_map",
    "members": "node_set",
    "tags": "text_set",
    "pos": "vec",
    "maybe": "opt_vec",
    "on_event": "callables",
    "single": "callable",
    "sparse": "callables",
}
HERO_PROPS = dict(NODE_PROPS, level="int16", sidekick="node")
LEAF_PROPS: dict[str, str] = {
    "value": "int32",
    "node": "node",
    "kind": "class",
    "soft": "soft",
    "soft_class": "class_path",
    "lazy": "node",
    "iface": "node",
    "hook": "callable",
}
PROPS: dict[type[zs.Object], dict[str, str]] = {
    FNode: NODE_PROPS,
    FHero: HERO_PROPS,
    FLeaf: LEAF_PROPS,
    FOther: {"weight": "float"},
    _GONE: {"value": "int32"},
}
VEC_MEMBERS: dict[str, str] = {
    "x": "int32",
    "f": "float",
    "label": "text",
    "text": "text",
    "who": "node",
}
BOGUS_NAMES = ("nope", "__dict__", "__class__", "name", "handle", "", "i32 ", "I32")

INT_EDGES = (
    0,
    1,
    -1,
    7,
    127,
    128,
    -128,
    -129,
    255,
    256,
    32767,
    -32768,
    65535,
    65536,
    2**31 - 1,
    2**31,
    -(2**31),
    -(2**31) - 1,
    2**32 - 1,
    2**32,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64 - 1,
    2**64,
    10**30,
    -(10**30),
)
FLOAT_EDGES = (
    0.0,
    -0.0,
    1.5,
    -2.25,
    math.nan,
    math.inf,
    -math.inf,
    3.4028234663852886e38,
    3.5e38,
    -3.5e38,
    1e308,
    5e-324,
    1e-45,
    0.1,
)
TEXT_EDGES = (
    "",
    "a",
    "Hero",
    "héllo",
    "日本語",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udcff",
    "😀",
    "Actor_0",
    "FNode_3",
    "a_01",
    "A.B.C",
    " ",
    "None",
    "x" * 300,
    "\u00ff",
    "ÿ_7",
)
METHODS = ("bump", "poke", "nope", "", "__init__", "i32", "bump_1", "BUMP")
CLASS_PATHS = (
    "harness.FNode",
    "harness.FHero",
    "harness.FGone",
    "harness.FOther",
    "nowhere.Class",
    "",
    "harness.",
    ".FNode",
    "builtins.int",
    "zsharp_py.Object",
)


class Skip(Exception):
    """The harness combined a value with an operation it does not have
    (``append`` on a map, a property of ``None``): nothing to test."""


def call(target: Any, method: str, *args: Any) -> Any:
    """``target.method(*args)``, or ``Skip`` if its type has no such method
    (so an ``AttributeError`` from inside the library is still a finding)."""
    if getattr(type(target), method, None) is None:
        raise Skip(method)
    return getattr(target, method)(*args)


def declared(target: Any, name: str) -> bool:
    """Whether ``name`` is a declared property of ``target``'s class."""
    if isinstance(target, FVec):
        return name in VEC_MEMBERS
    return type(target) in PROPS and name in PROPS[type(target)]


def get(target: Any, name: str) -> Any:
    """``target.name``: any error but the documented ones is a finding for
    a declared property; for anything else ``AttributeError`` is a ``Skip``."""
    if declared(target, name):
        return getattr(target, name)
    try:
        return getattr(target, name)
    except AttributeError:
        raise Skip(name) from None


def put(target: Any, name: str, value: Any) -> None:
    """``target.name = value``, with ``get``'s rules (and never on a class:
    that would redefine it for the inputs that follow)."""
    if declared(target, name):
        setattr(target, name, value)
        return
    if isinstance(target, type):
        raise Skip(name)
    try:
        setattr(target, name, value)
    except AttributeError:
        raise Skip(name) from None


class Session:
    """One runtime and everything one input made in it."""

    def __init__(self, reader: Reader, hostile: bool = False) -> None:
        r = self.r = reader
        #: Whether the hostile operations (HOSTILE_OPERATIONS) are drawn too.
        self.operations = OPERATIONS + HOSTILE_OPERATIONS if hostile else OPERATIONS
        options = r.byte()
        stress_bits = r.byte()
        stress = GcStress(
            collect_every=(stress_bits & 0x7) if stress_bits & 0x8 else 0,
            check_marks=bool(stress_bits & 0x10),
            objects_per_step=1 if stress_bits & 0x20 else 0,
            poison_freed=bool(stress_bits & 0x40),
            mark_stack_limit=2 if stress_bits & 0x80 else 0,
            allocation_limit=(1_560_000 + 600 * r.byte()) if options & 0x3 == 0x1 else 0,
        )
        max_objects = 24 + r.byte() if options & 0x3 == 0x2 else 4096
        #: MemoryError is documented only when a limit is injected.
        self.expected = EXPECTED + ((MemoryError,) if options & 0x3 in (0x1, 0x2) else ())
        self.other: zs.Runtime | None = None
        self.foreign: list[zs.Object] = []
        if options & 0xC == 0x4:
            # Objects of another runtime: storing them raises ValueError.
            self.other = zs.Runtime()
            self.other.__enter__()
            self.foreign = [blank(FNode), blank(FLeaf), blank(FHero)]
            self.foreign[0].add_to_root()
        self.rt = zs.Runtime(
            max_objects=max_objects,
            min_cluster_size=1 + (options >> 5),
            black_conjugates_are_roots=not options & 0x10,
            stress=stress,
        )
        self.rt.__enter__()
        self.objs: list[zs.Object] = []  # conjugates seen (live or expired)
        self.values: list[Any] = []  # black values (live or disposed)
        self.views: list[Any] = []  # red views (live or expired)
        self.strongs: list[zs.StrongObjectPtr[Any]] = []
        self.weaks: list[zs.WeakObjectPtr[Any]] = []
        self.rooted: list[zs.WeakObjectPtr[Any]] = []  # to unroot at the end
        self.scopes: list[AbstractContextManager[None]] = []
        self.lazy_ids: list[Any] = [uuid.UUID(int=1), uuid.UUID(int=2), "not-a-uuid", 5]
        self.depth = 0  # nesting of listener-driven steps and overrides
        #: Hostile actions run so far (a hook may run one inside any operation).
        self.hostile_acts = 0
        #: The sample engine's classes in this runtime (None: not installed).
        self.engine: Engine | None = None
        #: Python state the harness stored: (weak reference to the value, its
        #: actor); and the value each actor's state should hold now.
        self.tokens: list[tuple[weakref.ref[Token], Any]] = []
        self.current_token: dict[int, weakref.ref[Token] | None] = {}
        #: Exceptions that reached sys.unraisablehook (overrides called from
        #: native code), checked after every step.
        self.reports: list[BaseException] = []
        #: Tick functions registered with rt.ticks (live or not).
        self.tick_fns: list[Any] = []
        self.saved_hook = sys.unraisablehook
        sys.unraisablehook = self.unraisable
        # The harness checks every override's error through the hook (its
        # model: the engine goes on), so none is raised by the Python call
        # into the host; that path: tests/interop/test_callback_errors.py.
        self.saved_raise = zs.debug.raise_callback_errors(False)
        # A few objects to start from, one of them rooted.
        try:
            head = self.note(blank(FNode))
            head.add_to_root()
            self.rooted.append(zs.WeakObjectPtr(head))
            for cls in (FHero, FLeaf, FNode):
                self.note(blank(cls))
        except self.expected:  # an injected limit can be that small
            pass
        if options & 0xC != 0xC:  # the sample engine, most of the time
            with suppress(*self.expected):
                self.engine = Engine(self)

    def override(self, actor: Any, name: str, args: tuple[Any, ...]) -> None:
        """A Scripted actor's event, called from native code."""
        _override(self, actor, name, args)

    def unraisable(self, report: Any) -> None:
        """sys.unraisablehook while the session runs: keep the exception."""
        _keep_report(self.reports, report)

    # ---- pools -------------------------------------------------------------------
    def remember(self, pool: list[Any], item: Any) -> None:
        """Keep ``item`` in ``pool``, dropping an old one past ``MAX_POOL``."""
        if len(pool) >= MAX_POOL:
            pool.pop(self.r.below(len(pool)))
        pool.append(item)

    def note(self, value: Any) -> Any:
        """Remember whatever the API returned (objects, values, views)."""
        if isinstance(value, zs.Object):
            if value._rt is self.rt and all(o is not value for o in self.objs[-8:]):
                self.remember(self.objs, value)
        elif (
            hasattr(value, "is_black") and hasattr(value, "dispose") and not isinstance(value, type)
        ):
            try:
                black = value.is_black
            except EXPECTED:
                return value
            self.remember(self.values if black else self.views, value)
        return value

    def obj(self) -> Any:
        """An object: usually one seen before (maybe expired), sometimes None,
        an object of another runtime or of an unrelated class."""
        r = self.r
        roll = r.byte()
        if roll < 200 and self.objs:
            return r.pick(self.objs)
        if roll < 215 and self.foreign:
            return r.pick(self.foreign)
        if roll < 235:
            return None
        return self.any_value()

    def obj_of(self, cls: type[zs.Object]) -> Any:
        """Usually a remembered instance of ``cls`` (maybe expired), else ``obj()``."""
        fitting = [o for o in self.objs if isinstance(o, cls)]
        return self.r.pick(fitting) if fitting and self.r.chance(220) else self.obj()

    def value_of(self, pool: list[Any]) -> Any:
        """One item of ``pool``, or something malformed if it is empty."""
        return self.r.pick(pool) if pool and self.r.chance(230) else self.any_value()

    # ---- values ------------------------------------------------------------------
    def integer(self) -> int:
        """An edge-case or random integer."""
        r = self.r
        if r.chance(160):
            return r.pick(INT_EDGES)
        raw = int.from_bytes(r.take(1 + r.below(9)), "little", signed=True)
        return raw

    def floating(self) -> float:
        """An edge-case or random float."""
        r = self.r
        if r.chance(160):
            return r.pick(FLOAT_EDGES)
        return float(self.integer()) / (1 + r.byte())

    def text(self) -> str:
        """Edge-case text, or random bytes decoded with surrogate escapes."""
        r = self.r
        if r.chance(128):
            return r.pick(TEXT_EDGES)
        return r.take(r.below(24)).decode("utf-8", "surrogateescape")

    def any_value(self) -> Any:
        """Anything at all: the malformed-argument generator."""
        r = self.r
        kind = r.below(18)
        if kind == 0:
            return self.integer()
        if kind == 1:
            return self.floating()
        if kind == 2:
            return self.text()
        if kind == 3:
            return r.take(r.below(8)) + b"\xff\xfe\xc3"  # invalid UTF-8
        if kind == 4:
            return None
        if kind == 5:
            return r.chance(128)
        if kind == 6:
            return r.pick(self.objs) if self.objs else None
        if kind == 7:
            return r.pick(self.values) if self.values else object()
        if kind == 8:
            return r.pick(self.views) if self.views else FNode
        if kind == 9:
            return [self.shallow() for _ in range(r.below(4))]
        if kind == 10:
            return tuple(self.shallow() for _ in range(r.below(6)))
        if kind == 11:
            return {self.text(): self.shallow() for _ in range(r.below(3))}
        if kind == 12:
            return r.pick([*CLASSES, zs.Object, int, zs.Struct, FVec])
        if kind == 13:
            return r.pick(self.foreign) if self.foreign else object()
        if kind == 14:
            return r.pick(self.strongs) if self.strongs else math.nan
        if kind == 15:
            return r.pick(self.weaks) if self.weaks else -1
        if kind == 16:
            return {self.shallow(), self.shallow()} if r.chance(128) else frozenset()
        return self.plausible(r.pick(list(set(NODE_PROPS.values()))))

    def shallow(self) -> Any:
        """A hashable scalar or object (elements of generated containers)."""
        r = self.r
        kind = r.below(5)
        if kind == 0:
            return self.integer()
        if kind == 1:
            return self.floating()
        if kind == 2:
            return self.text()
        if kind == 3:
            return r.pick(self.objs) if self.objs else None
        return None

    def plausible(self, kind: str) -> Any:
        """A value that usually fits ``kind``, sometimes malformed."""
        r = self.r
        if r.chance(40):
            return self.any_value()
        if kind.startswith(("int", "uint")):
            return self.integer()
        if kind == "float":
            return self.floating()
        if kind == "bool":
            return r.pick((True, False, 0, 1, 2))
        if kind == "text":
            return self.text()
        if kind in ("node", "leaf", "weak"):
            choice = self.obj()
            if kind == "weak" and r.chance(100) and isinstance(choice, zs.Object):
                return zs.WeakObjectPtr(choice)
            return choice
        if kind == "node_list":
            return [self.obj() for _ in range(r.below(5))]
        if kind == "int_list":
            return [self.integer() for _ in range(r.below(5))]
        if kind == "text_list":
            return [self.text() for _ in range(r.below(4))]
        if kind == "vec_list":
            return [self.vec_like() for _ in range(r.below(4))]
        if kind == "vec":
            return self.vec_like()
        if kind == "opt_vec":
            return None if r.chance(60) else self.vec_like()
        if kind == "name_int_map":
            return {self.text(): self.integer() for _ in range(r.below(4))}
        if kind == "int_node_map":
            return {self.integer(): self.obj() for _ in range(r.below(4))}
        if kind == "node_set":
            return {
                o
                for o in (self.obj() for _ in range(r.below(4)))
                if o is None or isinstance(o, zs.Object)
            }
        if kind == "text_set":
            return {self.text() for _ in range(r.below(4))}
        if kind in ("callable", "callables"):
            return self.callable_like()
        if kind == "class":
            return r.pick(CLASSES + [None])
        if kind == "class_path":
            return r.pick(CLASS_PATHS + (None,))
        if kind == "soft":
            return self.text() if r.chance(100) else self.obj()
        return self.any_value()

    def vec_like(self) -> Any:
        """A struct value as a tuple, a dict, a black ``FVec`` or a view."""
        r = self.r
        roll = r.below(5)
        if roll == 0:
            return (self.integer(), self.floating())
        if roll == 1:
            return {r.pick(list(VEC_MEMBERS) + ["nope"]): self.plausible(r.pick(("int32", "text")))}
        if roll == 2:
            return self.note(
                FVec(self.integer(), self.floating(), self.text(), self.text(), self.obj())
            )
        if roll == 3:
            return self.value_of(self.views)
        return ()

    def callable_like(self) -> Any:
        """A Python callable, an (object, method name) pair, a bound method
        of an object, or something that is not callable."""
        r = self.r
        roll = r.below(6)
        if roll == 0:
            return lambda *args: None
        if roll == 1:
            return self.listener()
        if roll == 2:
            return (self.obj(), r.pick(METHODS))
        if roll == 3:
            target = self.obj()
            return getattr(target, "bump", target) if isinstance(target, zs.Object) else target
        if roll == 4:
            return [self.listener(), (self.obj(), r.pick(METHODS))]
        return self.any_value()

    def listener(self) -> Callable[..., None]:
        """A listener that, when called, runs one more step (re-entrancy:
        collections, disposal or mark-as-garbage during a broadcast) or
        raises a documented exception."""
        reader = Reader(self.r.take(12))

        def listen(*args: Any) -> None:
            if self.depth >= 2 or self.rt.closed:
                return
            saved = self.r
            self.r, self.depth = reader, self.depth + 1
            try:
                if reader.chance(30):
                    raise ValueError("listener failed")
                self.step()
            finally:
                self.r, self.depth = saved, self.depth - 1

        return listen

    # ---- one step ------------------------------------------------------------------
    def step(self) -> None:
        """Run one operation; documented exceptions are fine, anything else
        escapes; the heap is verified afterwards."""
        op = self.r.pick(self.operations)
        try:
            op(self)
        except (Skip, HookError):
            pass
        except self.expected:
            pass
        except RuntimeError as error:
            if not any(text in str(error) for text in RUNTIME_ERRORS):
                raise
        except AttributeError as error:
            if not any(text in str(error) for text in ATTRIBUTE_ERRORS):
                raise
        except Exception as error:
            # Several raising listeners: a group of documented exceptions.
            inner = getattr(error, "exceptions", None)
            if inner is None or not all(isinstance(e, self.expected) for e in inner):
                raise
        self.check_reports()
        if not self.rt.closed:
            self.rt.gc.verify()
        self.check_tokens()

    def check_reports(self) -> None:
        """What overrides raised into sys.unraisablehook must be documented."""
        reports, self.reports[:] = self.reports[:], []
        for error in reports:
            if isinstance(error, (HookError, Skip, *self.expected)):
                continue
            if isinstance(error, RuntimeError) and any(t in str(error) for t in RUNTIME_ERRORS):
                continue
            raise AssertionError(f"a call from native code reported {error!r}") from error

    def check_tokens(self) -> None:
        """Python state lives exactly as long as its object: a value stored
        in the state of an expired object is released; a live object's state
        holds what was stored last."""
        kept = []
        for ref, actor in self.tokens:
            if actor.is_expired:
                if ref() is not None:
                    raise AssertionError(f"Python state of an expired {actor!r} was not released")
                continue
            current = self.current_token.get(id(actor))
            if current is ref:
                got = actor.token
                if got is not ref():
                    raise AssertionError(f"the state of {actor!r} lost its value: {got!r}")
            kept.append((ref, actor))
        self.tokens = kept

    def run(self) -> None:
        """Steps until the input is used up (or ``MAX_STEPS``)."""
        for _ in range(MAX_STEPS):
            if self.r.remaining() == 0:
                break
            self.step()

    # ---- the end -------------------------------------------------------------------
    def finish(self) -> None:
        """Release everything, check nothing native is left, close."""
        self.check_reports()
        while self.scopes:
            self.scopes.pop().__exit__(None, None, None)
        rt = self.rt
        if not rt.closed:
            for value in self.values + list(self.strongs):
                value.dispose()
            self.values.clear()
            self.strongs.clear()
            self.views.clear()
            for weak in self.rooted:
                obj = weak.get()
                if obj is not None and obj.is_rooted:
                    obj.remove_from_root()
            rt.collect_garbage()  # finishes a pending incremental cycle...
            rt.collect_garbage()  # ...which kept what the write barrier marked
            if rt.live_objects() or rt.values_alive():
                # Black values that only Python's cycle collector frees
                # (listeners close over this session) are queued for the
                # next safe point. (Not every time: it costs milliseconds.)
                gc.collect()
                rt.collect_garbage()
            rt.gc.verify()
            assert rt.live_objects() == 0, f"{rt.live_objects()} native objects left"
            assert rt.values_alive() == 0, f"{rt.values_alive()} black values left"
            assert rt.gc.phase == "idle"
            rt.ticks.frame(0.0)  # unregisters the tick functions of the freed objects
            assert len(rt.ticks) == 0, f"{len(rt.ticks)} tick functions left"
            assert not any(fn.registered for fn in self.tick_fns)
        rt.__exit__(None, None, None)  # zs_runtime_free asserts no native block is left
        self.check_tokens()
        if self.tokens:
            raise AssertionError("Python state outlived its runtime")
        for obj in self.objs:
            assert obj.is_expired
            try:
                obj.name
            except zs.ExpiredConjugateError:
                pass
            else:
                raise AssertionError("an object of a closed runtime is still usable")
        if self.other is not None:
            self.other.__exit__(None, None, None)
        assert all(o.is_expired for o in self.foreign)


# ---- operations ----------------------------------------------------------------------


def _props_of(target: Any) -> dict[str, str]:
    return PROPS.get(type(target), NODE_PROPS)


def op_new_object(s: Session) -> None:
    """Create an object, maybe named, with an outer and property keywords."""
    r = s.r
    cls = r.pick(CLASSES)
    kwargs: dict[str, Any] = {}
    for _ in range(r.below(3)):
        name = r.pick(list(PROPS[cls])) if r.chance(230) else r.pick(BOGUS_NAMES)
        kwargs[name] = s.plausible(PROPS[cls].get(name, "any"))
    object_name = None if r.chance(150) else (s.text() if r.chance(200) else s.any_value())
    outer = None if r.chance(170) else s.obj()
    if r.chance(250):
        s.note(cls(name=object_name, outer=outer, **kwargs))
    else:  # positional misuse
        s.note(cls(object_name, outer, s.any_value()))  # type: ignore[call-arg]


def op_set_property(s: Session) -> None:
    """Assign a property (usually plausible, sometimes malformed or unknown);
    an integer or bool that was accepted must read back unchanged."""
    r = s.r
    target = s.obj()
    props = _props_of(target)
    name = r.pick(list(props)) if r.chance(235) else r.pick(BOGUS_NAMES)
    value = s.plausible(props.get(name, "any"))
    put(target, name, value)
    if props.get(name, "").startswith(("int", "uint")) and type(value) is int:
        assert get(target, name) == value, (name, value)
    elif props.get(name) == "bool" and type(value) is bool:
        assert get(target, name) is value


def op_get_property(s: Session) -> None:
    """Read a property; views and objects read are remembered."""
    r = s.r
    target = s.obj()
    props = _props_of(target)
    name = r.pick(list(props)) if r.chance(235) else r.pick(BOGUS_NAMES)
    s.note(get(target, name))


def op_identity(s: Session) -> None:
    """Read an object's identity members and flags; repr never raises."""
    target = s.obj()
    repr(target)
    if isinstance(target, zs.Object):
        if target.is_expired:
            repr(target)
            return
        target.name
        target.handle
        s.note(target.outer)
        target.is_garbage
        target.is_rooted
        info = target.cluster
        if info is not None:
            s.note(info.root)


def op_roots(s: Session) -> None:
    """Add to or remove from the root set."""
    target = s.obj()
    if s.r.flag():
        call(target, "add_to_root")
        s.rooted.append(zs.WeakObjectPtr(target))
    else:
        call(target, "remove_from_root")


def op_mark_as_garbage(s: Session) -> None:
    """Mark an object as garbage."""
    call(s.obj(), "mark_as_garbage")


def op_reference_chains(s: Session) -> None:
    """Ask why an object is alive, and check each chain ends at it."""
    target = s.obj()
    limit = s.r.pick([None, 1, 2, 0, -1])
    chains = s.rt.reference_chains(target, limit=limit)
    for chain in chains:
        if chain.links[-1].holder is not target or chain.links[-1].member is not None:
            raise AssertionError(f"a chain of {target!r} ends elsewhere: {chain}")
    if limit is not None and len(chains) > limit:
        raise AssertionError(f"{len(chains)} chains past limit={limit}")


_NATIVE_CALL_STATUSES = (ZS_OK, ZS_E_STALE, ZS_E_DYING, ZS_E_INVALID, ZS_E_CALL_FAILED, ZS_E_BUSY)


def _keep_report(into: list[BaseException], report: Any) -> None:
    """An unraisablehook's report: keep the exception only, without its
    traceback (nor its chain's). Before Python 3.12 the report itself
    (UnraisableHookArgs) is not tracked by the cycle collector: a list of
    reports in a frame that the report's traceback reaches (the caller's
    frame is the f_back of the method that failed) is a cycle that is never
    collected, and everything those frames hold leaks (black values: the
    end of the run finds them alive)."""
    error = report.exc_value
    if error is not None:
        into.append(error)
    while error is not None:
        chained = error.__context__
        error.__traceback__ = error.__context__ = error.__cause__ = None
        error = chained


def _host_runtime(s: Session) -> Any:
    """The runtime's pointer as a host holds it, for an operation to read
    last, with nothing allocated after it: a host never calls on a freed
    runtime, and every allocation before may have run a gc.callbacks hook
    that closed it (op_hostile_collector). Skip when one did."""
    if s.rt._closed:
        raise Skip("the runtime was closed by a hook")
    return ffi.cast("zs_runtime *", s.rt.native_address)


def _reports_hook(into: list[BaseException]) -> Callable[[Any], None]:
    """An unraisablehook that keeps each report's exception in ``into``."""
    return lambda report: _keep_report(into, report)


def op_native_call(s: Session) -> None:
    """Play the native host: call a method by name on one object, or on
    every object of its class, with a parameter block of input bytes
    (random handles included). A failed call is reported, never raised:
    the report must be one of the documented exceptions."""
    r = s.r
    target = s.obj()
    if not isinstance(target, zs.Object) or target.runtime is not s.rt or s.rt.closed:
        raise Skip("native call")
    name = r.pick(("react", "react", "bump", "poke", "nope", "_hidden", "i32", "add_to_root"))
    block = ffi.new("char[]", r.take(24).ljust(24, b"\0"))
    each = not r.flag()
    function, class_name, handle = name.encode(), type(target).__name__.encode(), target.handle
    native_class = ffi.new("zs_class **")
    reports: list[BaseException] = []
    hook, sys.unraisablehook = sys.unraisablehook, _reports_hook(reports)
    try:
        runtime = _host_runtime(s)
        if not each:
            status = lib.zs_call_function(runtime, handle, function, block)
        else:
            if lib.zs_find_class(runtime, class_name, native_class):
                raise Skip("class not registered")
            status = lib.zs_call_each(runtime, native_class[0], function, block, ffi.NULL)
    finally:
        sys.unraisablehook = hook
    if status not in _NATIVE_CALL_STATUSES:
        raise AssertionError(f"native call of {name!r}: status {status}")
    for error in reports:
        if not isinstance(error, EXPECTED + (AttributeError, RuntimeError)):
            raise AssertionError(f"native call of {name!r} reported {error!r}")


def op_clusters(s: Session) -> None:
    """Create or dissolve a cluster, or count them."""
    target = s.obj()
    roll = s.r.below(3)
    if roll == 0:
        call(target, "create_cluster")
    elif roll == 1:
        call(target, "dissolve_cluster")
    else:
        s.rt.gc.cluster_count()


def op_strong(s: Session) -> None:
    """Make, read or dispose a strong pointer."""
    r = s.r
    roll = r.below(3)
    if roll == 0 or not s.strongs:
        s.remember(s.strongs, zs.StrongObjectPtr(s.obj()))
    elif roll == 1:
        s.note(r.pick(s.strongs).get())
    else:
        r.pick(s.strongs).dispose()


def op_weak(s: Session) -> None:
    """Make a weak pointer, resolve one, compare and hash them."""
    r = s.r
    if r.flag() or not s.weaks:
        s.remember(s.weaks, zs.WeakObjectPtr(s.obj()))
    else:
        weak = r.pick(s.weaks)
        s.note(weak.get())
        weak.is_valid
        _ = weak == r.pick(s.weaks)
        hash(weak)


ARRAYS = (
    ("nodes", Array[FNode], "node_list"),
    ("nums", Array[zs.Int32], "int_list"),
    ("vecs", Array[FVec], "vec_list"),
    ("words", Array[zs.String], "text_list"),
)
HASHES = (
    ("scores", Map[zs.Name, zs.Int32], "name_int_map"),
    ("owners", Map[zs.Int32, FNode], "int_node_map"),
    ("members", Set[FNode], "node_set"),
    ("tags", Set[zs.Name], "text_set"),
)
OPTIONALS = (("maybe", Optional[FVec], "opt_vec"),)


def _container(s: Session, kinds: tuple[tuple[str, Any, str], ...]) -> Any:
    """A container of one of ``kinds``: a view of an object's property, a
    new black one, or (less often) any remembered value or view."""
    r = s.r
    name, maker, contents = r.pick(kinds)
    roll = r.below(8)
    if roll < 4:
        return s.note(get(s.obj_of(FNode), name))
    if roll < 6:
        return s.note(maker(s.plausible(contents)) if r.chance(220) else maker())
    return s.value_of(s.values if roll == 6 else s.views)


def op_sequence(s: Session) -> None:
    """List-protocol operations, with malformed elements and indices; a
    refused element leaves the length unchanged."""
    r = s.r
    seq = _container(s, ARRAYS)
    index = s.integer() if r.chance(80) else r.below(6) - 3
    element = s.plausible(r.pick(("int32", "node", "vec", "text", "any")))
    if not isinstance(seq, zs.Array):
        raise Skip("not an array")
    before = len(seq)
    roll = r.below(14)
    try:
        if roll == 0:
            seq.append(element)
        elif roll == 1:
            seq.insert(index, element)
        elif roll == 2:
            s.note(seq.pop(index) if r.flag() else seq.pop())
        elif roll == 3:
            seq.remove(element)
        elif roll == 4:
            seq.index(element)
        elif roll == 5:
            s.note(seq[index])
        elif roll == 6:
            seq[index] = element
        elif roll == 7:
            del seq[index]
        elif roll == 8:
            for x in seq[index : index + r.below(4) : r.pick((1, 2, -1, None))]:
                s.note(x)
        elif roll == 9:
            seq.extend(s.plausible(r.pick(("int_list", "node_list", "vec_list", "any"))))
        elif roll == 10:
            seq.clear()
        elif roll == 11:
            seq.count(element)
            _ = element in seq
        elif roll == 12:
            for x in seq:
                s.note(x)
        else:
            _ = seq == s.plausible("int_list")
            repr(seq)
    except (TypeError, OverflowError):
        # A refused element changes nothing (unless a stress collection
        # expired the container meanwhile).
        if not seq.is_expired and roll in (0, 1, 6, 9):
            assert len(seq) == before, (roll, before, len(seq))
        raise


def op_mapping(s: Session) -> None:
    """Dict- and set-protocol operations with malformed keys and values."""
    r = s.r
    box = _container(s, HASHES)
    key = s.plausible(r.pick(("text", "int32", "node", "any")))
    value = s.plausible(r.pick(("int32", "node", "any")))
    roll = r.below(13)
    if roll == 0:
        if not isinstance(box, zs.Map):
            raise Skip("not a map")
        box[key] = value
    elif roll == 1:
        if not isinstance(box, zs.Map):
            raise Skip("not a map")
        s.note(box[key])
    elif roll == 2:
        s.note(call(box, "get", key))
    elif roll == 3:
        s.note(call(box, "pop", key) if r.flag() and isinstance(box, zs.Map) else call(box, "pop"))
    elif roll == 4:
        s.note(call(box, "setdefault", key, value))
    elif roll == 5:
        call(
            box, "update", s.plausible(r.pick(("name_int_map", "int_node_map", "text_set", "any")))
        )
    elif roll == 6:
        if not isinstance(box, zs.Map):
            raise Skip("not a map")
        del box[key]
    elif roll == 7:
        call(box, "add", key)
    elif roll == 8:
        call(box, "discard", key)
    elif roll == 9:
        if not isinstance(box, zs.Set):
            raise Skip("not a set")
        box.remove(key)
    elif roll == 10:
        items = call(box, "items") if isinstance(box, zs.Map) else call(box, "__iter__")
        for x in items:
            s.note(x)
    elif roll == 11:
        if not isinstance(box, (zs.Map, zs.Set)):
            raise Skip("not a map or set")
        _ = key in box
        len(box)
        box.to_python()
    else:
        call(box, "clear")


def op_optional(s: Session) -> None:
    """Optional protocol."""
    r = s.r
    opt = _container(s, OPTIONALS)
    if not isinstance(opt, zs.Optional):
        raise Skip("not an optional")
    roll = r.below(5)
    if roll == 0:
        opt.set(s.vec_like())
    elif roll == 1:
        opt.reset()
    elif roll == 2:
        s.note(opt.value)
    elif roll == 3:
        s.note(opt.get(s.any_value()))
    else:
        bool(opt)
        opt.is_set


def op_struct(s: Session) -> None:
    """Struct members of a view or a black struct."""
    r = s.r
    roll = r.below(3)
    if roll == 0:
        vec = s.note(get(s.obj_of(FNode), "pos"))
    elif roll == 1:
        vec = s.value_of(s.views)
    else:
        vec = s.note(FVec(**{r.pick(list(VEC_MEMBERS)): s.plausible("int32")}))
    if not isinstance(vec, FVec):
        raise Skip("not a struct")
    name = r.pick(list(VEC_MEMBERS)) if r.chance(230) else r.pick(BOGUS_NAMES)
    if r.flag():
        put(vec, name, s.plausible(VEC_MEMBERS.get(name, "any")))
    else:
        s.note(get(vec, name))
    if r.chance(60):
        _ = vec == s.vec_like()
        repr(vec)
        vec.to_python()


STRING_KINDS = (zs.String, zs.Utf8String, zs.AnsiString, zs.Text, zs.Name)


def op_strings(s: Session) -> None:
    """String values: assign, concatenate, compare, black strings of each kind."""
    r = s.r
    string: Any
    if r.flag():
        string = s.note(get(s.obj_of(FNode), r.pick(("label", "ansi", "utf8", "text", "tag"))))
    else:
        string = s.note(r.pick(STRING_KINDS)(s.plausible("text")))
    if not isinstance(string, STRING_KINDS):
        raise Skip("not a string")
    roll = r.below(4)
    if roll == 0:
        call(string, "assign", s.plausible("text"))
    elif roll == 1:
        _ = string + s.plausible("text")
    elif roll == 2:
        _ = string == s.plausible("text")
        if not isinstance(string, zs.Name):
            _ = s.plausible("text") in string
    elif isinstance(string, zs.Name):
        str(string)
        hash(string)
    else:
        str(string)
        len(string)


DELEGATE_KINDS = (zs.Delegate, zs.MulticastDelegate, zs.SparseDelegate)
# The classes with delegate properties.
OWNER_CLASSES: tuple[type[zs.Object], ...] = (FNode, FLeaf)


def op_delegates(s: Session) -> None:
    """Bind, unbind, add, remove, broadcast and execute delegates."""
    r = s.r
    roll = r.below(5)
    if roll < 2:
        owner = s.obj_of(r.pick(OWNER_CLASSES))
        d = s.note(
            get(
                owner,
                "hook" if isinstance(owner, FLeaf) else r.pick(("on_event", "single", "sparse")),
            )
        )
    elif roll == 4:  # an event the engine broadcasts from C (World.tick, Actor.take_damage)
        e = _engine(s)
        owner = _world(s) if r.flag() else _actor(s)
        d = s.note(get(owner, "on_tick" if isinstance(owner, e.world) else "on_damaged"))
    elif roll == 2:
        d = s.note(r.pick(DELEGATE_KINDS)())
    else:
        d = s.value_of(s.values if r.flag() else s.views)
    if not isinstance(d, DELEGATE_KINDS):
        raise Skip("not a delegate")
    what = r.below(10)
    if what == 0:
        call(d, "bind" if isinstance(d, zs.Delegate) else "add", s.callable_like())
    elif what == 1:
        call(d, "unbind" if isinstance(d, zs.Delegate) else "remove_all", s.obj())
    elif what == 2:
        call(d, "broadcast", s.integer())
    elif what == 3:
        call(d, "execute", 2)
    elif what == 4:
        call(d, "execute_if_bound", 3)
    elif what == 5:
        call(d, "remove", s.callable_like())
    elif what == 6:
        call(d, "add_unique", s.callable_like())
    elif what == 7:
        call(d, "clear")
    elif what == 8:
        if not isinstance(d, zs.MulticastDelegate):
            raise Skip("not multicast")
        d += s.callable_like()
        d -= s.callable_like()
    else:
        d.is_bound
        if not isinstance(d, zs.Delegate):
            len(d)
            _ = s.callable_like() in d


#: Signatures a host broadcasts with: (parameters as (name, type text,
#: offset, direction), block size, whether the block must hold valid values).
SIGNATURES: dict[str, tuple[tuple[tuple[str, str, int, int], ...], int, bool]] = {
    "none": ((), 0, False),
    "int": ((("value", "Int32", 0, 0),), 8, False),
    "ref": ((("amount", "Float64", 0, 0), ("node", "FNode | None", 8, 0)), 16, False),
    "string": ((("text", "String", 0, 0),), 16, True),
    "unknown": ((("x", "NoSuchType", 0, 0),), 8, False),
    "result": ((("value", "Int32", 0, 0), ("return_value", "Int8", 4, 3)), 8, False),
    "out": ((("value", "Int32", 0, 1),), 8, False),  # refused: a listener writes no out value
}
_SIGNATURES: dict[str, Any] = {}
"""The signatures made so far, with the memory they point to: a runtime
keeps a signature by reference until it is freed, so these live as long
as the process."""


def _signature(name: str) -> Any:
    """The ``const zs_function_desc *`` of ``SIGNATURES[name]``."""
    made = _SIGNATURES.get(name)
    if made is None:
        parameters, size, _ = SIGNATURES[name]
        texts = [ffi.new("char[]", name.encode())]
        members = ffi.new("zs_property_desc[]", max(1, len(parameters)))
        for i, (label, type_text, offset, direction) in enumerate(parameters):
            texts += [ffi.new("char[]", label.encode()), ffi.new("char[]", type_text.encode())]
            members[i].name, members[i].type = texts[-2], texts[-1]
            members[i].offset, members[i].direction = offset, direction
        desc = ffi.new("zs_function_desc *")
        desc.name, desc.block_size = texts[0], size
        desc.params, desc.param_count = members, len(parameters)
        made = _SIGNATURES[name] = (desc, members, texts)
    return made[0]


_DELEGATE_TYPES = {
    "on_event": lib.ZS_TYPE_MULTICAST,
    "sparse": lib.ZS_TYPE_SPARSE,
    "single": lib.ZS_TYPE_DELEGATE,
    "hook": lib.ZS_TYPE_DELEGATE,
}
_BROADCAST_STATUSES = (ZS_OK, ZS_E_STALE, ZS_E_INVALID, ZS_E_CALL_FAILED, ZS_E_BUSY)


def op_native_broadcast(s: Session) -> None:
    """Play a host calling a delegate (zs_delegate_broadcast, or
    zs_delegate_execute for a single-cast one): of an object of the
    harness's classes, or an engine's event with the engine's own
    signature; its listeners run more steps or raise, and are reported,
    never raised. The block is input bytes (random handles included),
    zeroed where the signature's values must be valid ones."""
    r = s.r
    engine_event = s.engine is not None and r.chance(70)
    if engine_event:
        e = _engine(s)
        owner = _world(s) if r.flag() else _actor(s)
        if isinstance(owner, e.world):
            name, offset, size = "on_tick", ffi.offsetof("sample_world", "on_tick"), 16
        elif isinstance(owner, e.actor):
            name, offset, size = "on_damaged", ffi.offsetof("sample_actor", "on_damaged"), 24
        else:
            raise Skip("no engine object")
        signature = lib.zs_sample_engine_event(name.encode())
        kind, valid = lib.ZS_TYPE_MULTICAST, False
    else:
        owner = s.obj_of(r.pick(OWNER_CLASSES))
        if not isinstance(owner, (FNode, FLeaf)):
            raise Skip("no delegate owner")
        name = "hook" if isinstance(owner, FLeaf) else r.pick(("on_event", "sparse", "single"))
        offset = next(i.offset for i in class_layout(type(owner)).properties if i.name == name)
        kind = _DELEGATE_TYPES[name]
        shape = r.pick(list(SIGNATURES))
        signature, (_, size, valid) = _signature(shape), SIGNATURES[shape]
    if not isinstance(owner, zs.Object) or owner.runtime is not s.rt:
        raise Skip("native broadcast")
    if r.chance(150):  # a listener first: one that runs steps, a method, or anything
        delegate_view = get(owner, name)
        roll = r.below(4)
        listener = (
            s.listener()
            if roll < 2
            else (s.obj(), r.pick(METHODS))
            if roll == 2
            else s.callable_like()
        )
        call(delegate_view, "bind" if isinstance(delegate_view, zs.Delegate) else "add", listener)
    block = ffi.new("char[]", max(8, size))
    if not valid:
        ffi.memmove(block, r.take(size).ljust(size, b"\0"), size)
    report = ffi.new("zs_broadcast_report *")
    called = ffi.new("int *")
    out_type = ffi.new("const zs_type **")
    handle, plain = owner.handle, r.chance(30)  # plain: no block at all
    reports: list[BaseException] = []
    hook, sys.unraisablehook = sys.unraisablehook, _reports_hook(reports)
    try:
        runtime = _host_runtime(s)
        address = lib.zs_resolve(runtime, handle)
        if address == ffi.NULL or lib.zs_type_basic(runtime, kind, 0, 0, out_type) != ZS_OK:
            raise Skip("the owner is gone")
        delegate = ffi.cast("char *", address) + offset
        params = ffi.NULL if plain else block
        if kind == lib.ZS_TYPE_DELEGATE:
            status = lib.zs_delegate_execute(
                runtime, handle, ffi.cast("zs_binding *", delegate), signature, params, called
            )
        else:
            status = lib.zs_delegate_broadcast(
                runtime, handle, out_type[0], delegate, signature, params, report
            )
    finally:
        sys.unraisablehook = hook
    allowed = _BROADCAST_STATUSES + ((ZS_E_NOMEM,) if MemoryError in s.expected else ())
    if status not in allowed:
        raise AssertionError(f"native broadcast of {name!r}: status {status}")
    if report.called + report.skipped > report.listeners or report.failed > report.called:
        raise AssertionError(
            f"native broadcast of {name!r}: {report.listeners} listeners, "
            f"{report.called} called, {report.failed} failed, {report.skipped} skipped"
        )
    if kind != lib.ZS_TYPE_DELEGATE and status == ZS_OK and report.failed:
        raise AssertionError(f"native broadcast of {name!r}: failures but ZS_OK")
    for error in reports:
        if not isinstance(error, (*s.expected, HookError, Skip, AttributeError, RuntimeError)):
            raise AssertionError(f"native broadcast of {name!r} reported {error!r}")


def op_wrappers(s: Session) -> None:
    """SubclassOf, SoftObjectPtr, SoftClassPtr, LazyObjectPtr, ScriptInterface."""
    r = s.r
    roll = r.below(7)
    if roll == 0:
        made = SubclassOf[FNode](s.plausible("class"))
        if r.flag():
            s.note(made.new(name=s.plausible("text")))
    elif roll == 1:
        soft = s.note(SoftObjectPtr[FNode](s.plausible("soft")))
        s.note(soft.get())
    elif roll == 2:
        soft_class = s.note(SoftClassPtr[FNode](s.plausible("class_path")))
        soft_class.get()
    elif roll == 3:
        zs.LazyObjectPtr.bind(s.obj(), r.pick(s.lazy_ids))
    elif roll == 4:
        lazy = s.note(LazyObjectPtr[FNode](s.obj()))
        s.note(lazy.get())
        lazy.id
    elif roll == 5:
        iface = s.note(ScriptInterface[IPoke](s.obj()))
        s.note(iface.get())
    else:
        s.note(get(s.obj_of(FLeaf), r.pick(("kind", "soft", "soft_class", "lazy", "iface"))))


def op_values(s: Session) -> None:
    """Clone, dispose (twice too), use after dispose, copy into properties."""
    r = s.r
    roll = r.below(5)
    value = s.value_of(s.values if roll < 2 else s.views)
    if roll in (0, 2):
        s.note(call(value, "clone"))
    elif roll in (1, 3):
        call(value, "dispose")
    else:
        name = r.pick(("pos", "nums", "nodes", "scores", "tags", "label", "maybe", "on_event"))
        put(s.obj(), name, value)
    if r.chance(40) and hasattr(value, "is_expired"):
        value.is_expired
        repr(value)
        call(value, "to_python")


def op_scopes(s: Session) -> None:
    """Open a scope, or close the innermost one (its views expire)."""
    if s.r.chance(140) and len(s.scopes) < 6:
        scope = zs.scope()
        scope.__enter__()
        s.scopes.append(scope)
    elif s.scopes:
        s.scopes.pop().__exit__(None, None, None)


def op_drop(s: Session) -> None:
    """Forget conjugates, values and views (Python finalises black values,
    freed at the next safe point)."""
    r = s.r
    pool: list[Any] = r.pick((s.objs, s.values, s.views, s.weaks))
    for _ in range(r.below(4)):
        if pool:
            pool.pop(r.below(len(pool)))
    if r.chance(20):
        gc.collect()


def op_collect(s: Session) -> None:
    """Full collection. Its count of survivors is the heap's, unless a
    hostile hook (CPython's collector firing at an allocation) disposed,
    collected or closed something after the cycle ended."""
    acts = s.hostile_acts
    stats = s.rt.collect_garbage()
    live = s.rt.live_objects()
    assert s.hostile_acts != acts or stats.live_objects == live, (stats.live_objects, live)


def op_incremental(s: Session) -> None:
    """Start an incremental cycle, step it (odd budgets too) or tick."""
    r = s.r
    roll = r.below(4)
    collector = s.rt.gc
    if roll == 0:
        collector.start_incremental()
    elif roll == 1:
        collector.step(r.pick((1e-6, 1e-4, 1e-3, 0.0, -1.0, math.nan, math.inf)))
    elif roll == 2:
        while not collector.step(1e-5):
            pass
    else:
        collector.tick(r.pick((0.0, 0.02, 1.0, 100.0, -1.0, math.nan)))
    collector.phase
    collector.stats()


FIELD_PATHS = (
    "FNode.pos.x",
    "FNode.ref.ref.i32",
    "FNode.pos.who.i8",
    "FNode.nope",
    "FNode.",
    "",
    "FNode.pos.x.y",
    "FLeaf.node.label",
    "FNode.nums",
    "FHero.sidekick.f32",
)


def op_field_path(s: Session) -> None:
    """Field paths, valid and not (``FieldPathError`` is documented)."""
    r = s.r
    try:
        path = zs.FieldPath(r.pick((FNode, FHero, FLeaf)), r.pick(FIELD_PATHS).partition(".")[2])
        if r.flag():
            s.note(path.get(s.obj()))
        else:
            path.set(s.obj(), s.plausible("int32"))
    except zs.FieldPathError:
        pass


def op_close(s: Session) -> None:
    """Close the runtime early (rarely): everything held must expire safely
    and what follows fails with ExpiredConjugateError."""
    if s.r.chance(8):
        while s.scopes:
            s.scopes.pop().__exit__(None, None, None)
        s.rt.close()


def op_other_runtime(s: Session) -> None:
    """Store objects of another runtime (ValueError)."""
    if s.foreign:
        put(s.obj(), s.r.pick(("ref", "leaf", "node", "sidekick", "nodes")), s.r.pick(s.foreign))


def op_stale(s: Session) -> None:
    """Use an expired conjugate, value or view every which way."""
    r = s.r
    pool: list[Any] = r.pick((s.objs, s.values, s.views))
    stale = [x for x in pool if x.is_expired]
    if not stale:
        return
    item = r.pick(stale)
    action = r.below(4)
    if action == 0:
        get(item, r.pick(list(NODE_PROPS) + list(VEC_MEMBERS) + ["name", "handle"]))
    elif action == 1:
        put(item, r.pick(list(NODE_PROPS) + list(VEC_MEMBERS)), s.any_value())
    elif action == 2:
        repr(item)
        assert item.is_expired
    elif hasattr(item, "clone"):
        s.note(item.clone())
    else:
        call(item, "add_to_root")


# ---- a native host: the sample engine ------------------------------------------------
# (zsharp_py.sample_engine: classes described in C, their functions bound as
# _core.NativeFunction methods, events that native code calls by name and
# Python subclasses override, and Python state.)


class Token:
    """A value kept in Python state; the harness watches its release."""

    def __init__(self, owner: Any = None) -> None:
        self.owner = owner  # sometimes the actor itself: a cycle through the state


class OverrideError(ValueError):
    """Raised by an override on purpose (documented: a ValueError)."""


OVERRIDE_ACTIONS = (
    "super",
    "super",
    "step",
    "destroy_other",
    "destroy_self",
    "collect",
    "native_collect",
    "garbage",
    "state",
    "raise",
    "close",
    "nothing",
)
EVENT_NAMES = ("tick", "begin_play", "on_destroy")
NATIVE_NAMES = (
    *EVENT_NAMES,
    *EVENT_NAMES,
    "take_damage",
    "heal",
    "move",
    "get_location",
    "add_component",
    "spawn",
    "destroy",
    "find",
    "tick",
    "collect",
    "version",
    "nope",
    "",
)


class Engine:
    """The sample engine installed in a session's runtime, its bound
    classes, and Python subclasses of its Actor: ``quiet`` (state, no
    override) and ``scripted`` (state, and overrides of the three events
    that read what to do from the input when native code calls them)."""

    def __init__(self, s: Session) -> None:
        sample_engine.install(s.rt)
        self.world: Any = zs.native_class("World", runtime=s.rt)
        actor: Any = zs.native_class("Actor", runtime=s.rt)
        self.actor = actor
        self.components: list[Any] = [
            zs.native_class("Component", runtime=s.rt),
            zs.native_class("MovementComponent", runtime=s.rt),
        ]
        self.transform: Any = zs.native_struct("Transform", runtime=s.rt)
        self.vec3: Any = zs.native_struct("Vec3", runtime=s.rt)

        class Quiet(actor):  # type: ignore[misc]
            token: Any = zs.state(default=None)

        class Scripted(actor):  # type: ignore[misc]
            token: Any = zs.state(default=None)
            bag: list[Any] = zs.state(factory=list)

            def begin_play(self) -> None:
                s.override(self, "begin_play", ())

            def tick(self, dt: float) -> None:
                s.override(self, "tick", (dt,))

            def on_destroy(self) -> None:
                s.override(self, "on_destroy", ())

            def call_super(self, name: str, *args: Any) -> Any:
                return getattr(super(), name)(*args)

        self.quiet: Any = Quiet
        self.scripted: Any = Scripted
        self.actor_classes: list[Any] = [actor, Quiet, Scripted, Scripted]


def _engine(s: Session) -> Engine:
    if s.engine is None or s.rt.closed:
        raise Skip("no engine")
    return s.engine


def _world(s: Session) -> Any:
    """A world seen before (maybe expired), or a new one (rooted, often)."""
    e = _engine(s)
    worlds = [o for o in s.objs if isinstance(o, e.world)]
    if worlds and s.r.chance(200):
        return s.r.pick(worlds)
    world = s.note(e.world())
    if s.r.chance(160):
        world.add_to_root()
        s.rooted.append(zs.WeakObjectPtr(world))
    return world


def _actor(s: Session) -> Any:
    """An actor seen before (maybe expired), else something else."""
    return s.obj_of(_engine(s).actor)


def _store_token(s: Session, actor: Any) -> None:
    """Store a fresh Token in an actor's state (or delete it)."""
    if s.r.chance(40):
        del actor.token
        s.current_token[id(actor)] = None
        return
    token = Token(actor if s.r.flag() else None)
    actor.token = token
    ref = weakref.ref(token)
    s.current_token[id(actor)] = ref
    if len(s.tokens) < MAX_POOL:
        s.tokens.append((ref, actor))


def _hostile_number(s: Session, target: Any, floating: bool) -> Any:
    """A number whose conversion (``__float__``/``__index__``) first runs a
    hostile action on the engine: destroy ``target``, collect (from Python
    or natively), mark it as garbage, close the runtime, or raise."""
    r = s.r
    action = r.pick(
        ("destroy", "destroy_collect", "collect", "native", "garbage", "close", "raise")
    )
    e = _engine(s)

    def act() -> None:
        try:
            world = target.world if isinstance(target, e.actor) else None
            if action in ("destroy", "destroy_collect") and world is not None:
                world.destroy(target)
            if action in ("destroy_collect", "collect"):
                s.rt.collect_garbage()
            elif action == "native" and world is not None:
                world.collect()
            elif action == "garbage":
                target.mark_as_garbage()
            elif action == "close" and r.chance(60):
                while s.scopes:
                    s.scopes.pop().__exit__(None, None, None)
                s.rt.close()
        except HookError:
            raise
        except Exception as error:  # refused (documented): changes nothing
            if not isinstance(error, s.expected + (RuntimeError, AttributeError)):
                raise
        if action == "raise":
            raise HookError("raised by a hostile argument")

    hook = _Once(act, 1)
    value = r.pick((1.5, 7.0, 0.0, 1e300)) if floating else r.pick((1, 7, 0, 100))
    return _HFloat(hook, value)


def op_engine_spawn(s: Session) -> None:
    """World.spawn with a fuzzed class (a Python subclass, a wrong class,
    None...) and transform (struct, tuple, dict, garbage); begin_play runs
    before spawn returns (a Python override or the native default)."""
    r = s.r
    e = _engine(s)
    world = _world(s)
    cls = r.pick(e.actor_classes) if r.chance(220) else r.pick((FNode, None, e.world, "Actor", 5))
    roll = r.below(5)
    at: Any
    if roll == 0:
        at = e.transform()
    elif roll == 1:
        at = e.transform(e.vec3(s.floating(), s.floating(), s.floating()), s.floating(), 1.0)
    elif roll == 2:
        at = ((s.floating(), 0.0, 0.0), s.floating())
    elif roll == 3:
        at = {"yaw": s.floating(), "location": {"x": s.plausible("float")}}
    else:
        at = s.any_value()
    s.note(at)
    s.note(world.spawn(cls, at) if r.chance(240) else world.spawn(cls))


def op_engine_call(s: Session) -> None:
    """An engine function from Python (a NativeFunction), with fuzzed
    arguments: wrong types and counts, out-of-range and NaN numbers,
    expired objects, objects of another class or runtime, keywords."""
    r = s.r
    e = _engine(s)
    actor = _actor(s)
    roll = r.below(12)
    if roll == 0:
        amount = s.floating() if r.chance(200) else s.plausible("float")
        left = call(actor, "take_damage", amount, s.obj_of(e.actor))
        if not isinstance(left, float):
            raise AssertionError(f"take_damage returned {left!r}")
    elif roll == 1:
        s.note(call(actor, "heal", s.integer() if r.chance(200) else s.any_value()))
    elif roll == 2:
        call(actor, "move", e.vec3(s.floating(), 0.0, 0.0) if r.flag() else s.vec_like())
    elif roll == 3:
        s.note(call(actor, "get_location"))
    elif roll == 4:
        component = (
            r.pick([*e.components, None, e.actor, FNode]) if r.chance(220) else s.any_value()
        )
        made = s.note(call(actor, "add_component", component))
        if made is not None and made.owner is not actor:
            raise AssertionError(f"a component of {actor!r} has another owner: {made.owner!r}")
    elif roll == 5:
        world = _world(s)
        s.note(world.find(s.integer() if r.chance(200) else s.any_value()))
    elif roll == 6:
        if e.world.version() != 1:
            raise AssertionError("World.version() is not 1")
    elif roll == 7:
        _world(s).destroy(actor)
    elif roll == 8:
        call(
            actor,
            r.pick(("take_damage", "heal", "move")),
            *[s.any_value() for _ in range(r.below(4))],
        )
    elif roll == 9:
        # Keywords, known and unknown.
        name = r.pick(("amount", "instigator", "delta", "cls", "nope"))
        call(
            actor, r.pick(("take_damage", "heal", "move", "add_component")), **{name: s.any_value()}
        )
    elif roll == 10:
        # A function of one class applied to an object of another.
        r.pick((e.actor.heal, e.actor.take_damage, e.world.find))(s.obj(), 1)
    else:
        # An event called from Python: the override, or the native default.
        name = r.pick(EVENT_NAMES)
        args = (s.floating(),) if name == "tick" else ()
        call(actor, name, *args)


def op_engine_tick(s: Session) -> None:
    """World.tick: every live actor's tick event, called from C
    (zs_call_each), reaching the Python overrides; or a native collection."""
    r = s.r
    e = _engine(s)
    world = _world(s)
    roll = r.below(6)
    if roll < 3:
        called = world.tick(s.floating())
        if not isinstance(called, int) or called < 0:
            raise AssertionError(f"World.tick returned {called!r}")
    elif roll == 3:
        world.tick(_hostile_number(s, _actor(s), True) if r.flag() else s.any_value())
    elif roll == 4:
        world.collect()
    else:
        s.note(world.actors)
        for actor in list(world.actors):
            if actor is not None and not isinstance(actor, e.actor):
                raise AssertionError(f"World.actors holds {actor!r}")
            s.note(actor)


def op_engine_native(s: Session) -> None:
    """Play the engine from C: call a function by name on an engine object
    (zs_call_function) or on every actor (zs_call_each), with a block of
    input bytes: a Python override through the handler, or the host's own
    entry when no Python class overrides it. Failures are reported, never
    raised: each report must be a documented exception."""
    r = s.r
    _engine(s)
    target = _actor(s) if r.chance(170) else _world(s)
    if not isinstance(target, zs.Object) or target.runtime is not s.rt:
        raise Skip("native call")
    name = r.pick(NATIVE_NAMES)
    block = ffi.new("char[]", r.take(64).ljust(64, b"\0"))
    if r.chance(60):  # a plausible block: dt, amount, a class id...
        ffi.cast("double *", block)[0] = s.floating()
    each = r.chance(60)
    function, handle = name.encode(), target.handle
    native_class = ffi.new("zs_class **")
    class_name = r.pick((b"Actor", b"World", b"Component", b"Scripted"))
    reports: list[BaseException] = []
    hook, sys.unraisablehook = sys.unraisablehook, _reports_hook(reports)
    try:
        runtime = _host_runtime(s)
        if not each:
            status = lib.zs_call_function(
                runtime, handle, function, block if r.chance(240) else ffi.NULL
            )
        else:
            if lib.zs_find_class(runtime, class_name, native_class):
                raise Skip("class not registered")
            status = lib.zs_call_each(runtime, native_class[0], function, block, ffi.NULL)
    finally:
        sys.unraisablehook = hook
    allowed = _NATIVE_CALL_STATUSES + ((ZS_E_NOMEM,) if MemoryError in s.expected else ())
    if status not in allowed:
        raise AssertionError(f"native call of {name!r}: status {status}")
    for error in reports:
        if not isinstance(error, (*s.expected, HookError, Skip, AttributeError, RuntimeError)):
            raise AssertionError(f"native call of {name!r} reported {error!r}")


def op_engine_state(s: Session) -> None:
    """Python state of an actor: store, delete, read (expired: refused)."""
    e = _engine(s)
    actor = s.obj_of(e.quiet if s.r.flag() else e.scripted)
    if not isinstance(actor, (e.quiet, e.scripted)):
        raise Skip("no actor with state")
    if s.r.chance(170):
        _store_token(s, actor)
    else:
        actor.token
        if isinstance(actor, e.scripted):
            actor.bag.append(s.shallow())


TICK_GROUPS = ("pre_physics", "during_physics", "post_physics", "post_update_work")
TICK_NAMES = ("tick",) * 8 + ("begin_play", "bump", "react", "nope", "", "ti\0ck")
_TICK_FRAME_STATUSES = (ZS_OK, ZS_E_INVALID, ZS_E_BUSY)


def _seconds_like(s: Session) -> Any:
    """A plausible interval or dt, or a fuzzed one (negative, NaN, not a number)."""
    r = s.r
    if r.chance(235):
        return r.pick((0.0, 0.0, 1 / 60, 0.25, 0.5, 1.0, 2))
    return r.pick((-1.0, math.nan, math.inf, True, "1", None, s.floating()))


def _register_tick(s: Session) -> None:
    """rt.ticks.register with a fuzzed target (an engine actor, often a new
    one in a world that is often rooted; any object), name, group, interval,
    flag and prerequisites."""
    r = s.r
    target: Any = s.obj()
    if s.engine is not None and r.chance(200):
        target = _actor(s)
        if not isinstance(target, s.engine.actor) or target.is_expired or r.flag():
            e = s.engine  # a new actor, in a world that is often rooted
            world = _world(s)
            if world.is_expired or r.flag():
                world = s.note(e.world())
                world.add_to_root()
                s.rooted.append(zs.WeakObjectPtr(world))
            target = s.note(world.spawn(r.pick(e.actor_classes), e.transform()))
    name = r.pick(TICK_NAMES) if r.chance(240) else s.any_value()
    group: Any = r.pick(TICK_GROUPS) if r.chance(240) else r.pick(("physics", 1, None))
    after: list[Any] = [r.pick(s.tick_fns) for _ in range(r.below(3))] if s.tick_fns else []
    if r.chance(20):
        after.append(s.any_value())
    fn = s.rt.ticks.register(
        target, name, group=group, interval=_seconds_like(s), enabled=r.flag(), after=after
    )
    if fn.target is not target or fn.function != name:
        raise AssertionError(f"{fn!r} does not tick {target!r}.{name}")
    s.remember(s.tick_fns, fn)


def op_ticks(s: Session) -> None:
    """The tick manager (rt.ticks): register tick functions of the engine's
    actors (a Python override through the handler, the host's own entry in
    C, a script class's inherited default) and of other objects, with
    fuzzed names, groups, intervals, flags and prerequisites; change and
    unregister them; run frames (with the collector's share) whose
    overrides act as the input says; or run one from C (zs_tick_frame)
    with fuzzed collector settings. A freed object's functions end up
    unregistered (checked at the end)."""
    r = s.r
    roll = r.below(10)
    if roll < 4:
        for _ in range(1 + r.below(4)):
            _register_tick(s)
        if r.flag():
            s.rt.ticks.frame(_seconds_like(s))
    elif roll < 6:
        if not s.tick_fns:
            raise Skip("no tick function")
        fn = r.pick(s.tick_fns)
        what = r.below(8)
        if what == 0:
            fn.enabled = r.flag()
        elif what == 1:
            fn.interval = _seconds_like(s)
        elif what == 2:
            fn.group = r.pick(TICK_GROUPS) if r.chance(220) else s.any_value()
        elif what == 3:
            fn.unregister()
            if fn.registered:
                raise AssertionError(f"{fn!r} is registered after unregister()")
        elif what == 4:
            fn.add_prerequisite(r.pick(s.tick_fns) if r.chance(220) else s.any_value())
        elif what == 5:
            fn.remove_prerequisite(r.pick(s.tick_fns))
        elif what == 6:
            if fn.registered:
                parts = (fn.target, fn.group, fn.actual_group, fn.interval, fn.elapsed, fn.calls)
                s.note(parts[0])
                if fn.prerequisite_count < 0 or fn.calls < 0:
                    raise AssertionError(f"{fn!r}: {parts}")
            elif fn.target is not None:
                raise AssertionError(f"an unregistered {fn!r} names an object")
        else:
            s.rt.ticks.unregister_all(s.obj())
    elif roll < 9:
        if not any(fn.registered for fn in s.tick_fns[-4:]):
            with suppress(*s.expected, AttributeError):  # a function to tick, most often
                _register_tick(s)
        dt = _seconds_like(s)
        stats = s.rt.ticks.frame(dt, collect=r.chance(60))
        counts = (stats.ticked, stats.failed, stats.waiting, stats.disabled, stats.skipped)
        if min(counts) < 0 or stats.frame < 1:
            raise AssertionError(f"a frame's figures: {stats!r}")
    else:
        settings = ffi.new("zs_frame_gc *")
        lib.zs_frame_gc_defaults(settings)
        settings.seconds_between_cycles = r.pick((0.0, 0.5, 1.0, -1.0, math.nan))
        settings.mark_budget_ns = r.pick((0, 1, 1000, 2_000_000))
        settings.purge_budget_ns = r.pick((0, 1, 1000, 2_000_000))
        settings.objects_per_frame = r.pick((0, 1, 8, 1000))
        dt = r.pick((0.0, 1 / 60, 0.5, -1.0, math.nan, math.inf))
        out = ffi.new("zs_frame_stats *")
        if s.rt.closed:
            raise Skip("the runtime is closed")
        runtime = ffi.cast("zs_runtime *", s.rt.native_address)
        given = r.chance(200)
        status = lib.zs_tick_frame(runtime, dt, settings if given else ffi.NULL, out)
        allowed = _TICK_FRAME_STATUSES + ((ZS_E_NOMEM,) if MemoryError in s.expected else ())
        if status not in allowed:
            raise AssertionError(f"zs_tick_frame: status {status}")
        bad = not (dt >= 0 and math.isfinite(dt))
        bad = bad or (given and not settings.seconds_between_cycles >= 0)
        if (status == ZS_E_INVALID) != bad:
            raise AssertionError(f"zs_tick_frame({dt!r}): status {status}")
        if status == ZS_OK and out.frame < 1:
            raise AssertionError("zs_tick_frame ran no frame")


def _override(s: Session, actor: Any, name: str, args: tuple[Any, ...]) -> None:
    """What a Scripted actor's event does when native code calls it."""
    r = s.r
    e = _engine(s)
    if s.depth >= 2:
        actor.call_super(name, *args)
        return
    s.depth += 1
    try:
        for _ in range(1 + r.below(3)):
            action = r.pick(OVERRIDE_ACTIONS)
            if action == "super":
                actor.call_super(name, *args)
            elif action == "step":
                s.step()
            elif action in ("destroy_other", "destroy_self"):
                victim = actor if action == "destroy_self" else _actor(s)
                world = actor.world if r.chance(200) else _world(s)
                if world is not None:
                    world.destroy(victim)
            elif action == "collect":
                s.rt.collect_garbage()
            elif action == "native_collect":
                _world(s).collect()
            elif action == "garbage":
                call(s.obj_of(e.actor), "mark_as_garbage")
            elif action == "state":
                _store_token(s, actor)
                actor.bag.append(args)
            elif action == "raise":
                raise OverrideError(f"{name} failed")
            elif action == "close" and r.chance(20):
                while s.scopes:
                    s.scopes.pop().__exit__(None, None, None)
                s.rt.close()
    finally:
        s.depth -= 1


def op_hostile_native_function(s: Session) -> None:
    """An engine function whose argument's conversion destroys the target,
    collects, marks it as garbage or closes the runtime (arguments are
    converted completely before anything is checked): a target that died
    must refuse the call, one that lives takes it."""
    r = s.r
    e = _engine(s)
    actor = _actor(s)
    if not isinstance(actor, e.actor) or actor.is_expired:
        raise Skip("no live actor")
    function = r.pick(("take_damage", "heal", "add_component", "move"))
    try:
        if function == "take_damage":
            actor.take_damage(_hostile_number(s, actor, True), None)
        elif function == "heal":
            actor.heal(_hostile_number(s, actor, False))
        elif function == "move":
            actor.move((_hostile_number(s, actor, True), 0.0, 0.0))
        else:
            actor.take_damage(1.0, r.pick([actor, _actor(s)]))
            s.note(actor.add_component(r.pick(e.components)))
    finally:
        expired = actor.is_expired
    if expired:
        raise AssertionError(f"{function} ran on {actor!r}, which died during the conversion")


# ---- hostile operations: Python code that runs in the middle of an API call ----
# (FINDINGS.md, tests/hostile/test_hostile_conversions.py). A hook of a value being written, a
# gc.callbacks entry or a finaliser runs an action on the heap: grow, clear
# or dispose what is being written, collect, mark as garbage, close the
# runtime, or raise HookError (which must reach the caller unchanged).


class HookError(Exception):
    """Raised by a hostile hook: documented for the hostile operations."""


HOSTILE_ACTIONS = ("grow", "clear", "dispose", "collect", "garbage", "close", "raise", "none")


def _hostile_action(s: Session, target: Any, action: str) -> Callable[[], None]:
    """The action a hook runs once (on its ``when``-th call)."""

    def act() -> None:
        s.hostile_acts += 1
        try:
            if action == "grow" and isinstance(target, zs.Array):
                target.extend([target[0]] * 600 if len(target) else [])
            elif action == "grow" and isinstance(target, zs.Map):
                target.update(dict(zip(range(900, 1500), target.values(), strict=False)))
            elif action == "grow" and isinstance(target, zs.Set):
                target.update(range(900, 1500))
            elif action == "clear" and hasattr(target, "clear"):
                target.clear()
            elif action == "dispose" and hasattr(target, "dispose"):
                target.dispose()
            elif action == "collect":
                s.rt.collect_garbage()
            elif action == "garbage" and s.objs:
                victim = s.r.pick(s.objs)
                victim.mark_as_garbage()
                s.rt.collect_garbage()
            elif action == "close" and s.r.chance(40):
                while s.scopes:
                    s.scopes.pop().__exit__(None, None, None)
                s.rt.close()
        except HookError:
            raise
        except Exception as error:  # an action refused (documented) changes nothing
            if not isinstance(error, s.expected + (RuntimeError, AttributeError)):
                raise
        if action == "raise":
            raise HookError("raised by a hostile hook")

    return act


class _Once:
    def __init__(self, action: Callable[[], None], when: int) -> None:
        self.action, self.when, self.calls = action, when, 0

    def __call__(self) -> None:
        self.calls += 1
        if self.calls == self.when:
            self.action()


class _HFloat:
    def __init__(self, hook: _Once, value: float) -> None:
        self.hook, self.value = hook, value

    def __float__(self) -> float:
        self.hook()
        return self.value

    def __index__(self) -> int:
        self.hook()
        return int(self.value) if math.isfinite(self.value) else 0


class _HStr(str):
    hook: _Once

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        self.hook()
        return str.encode(self, *args, **kwargs)

    def __str__(self) -> str:
        self.hook()
        return str.__str__(self)

    def __hash__(self) -> int:
        self.hook()
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        self.hook()
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __len__(self) -> int:
        self.hook()
        return str.__len__(self)


class _HInt(int):
    hook: _Once

    def __index__(self) -> int:
        self.hook()
        return int.__index__(self)

    def __hash__(self) -> int:
        self.hook()
        return int.__hash__(self)

    def __eq__(self, other: object) -> bool:
        self.hook()
        return int.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)


class _HIter:
    def __init__(self, hook: _Once, items: list[Any]) -> None:
        self.hook, self.items = hook, items

    def __len__(self) -> int:
        self.hook()
        return len(self.items)

    def __iter__(self) -> Any:
        self.hook()
        for item in self.items:
            self.hook()
            yield item


class _LyingBytes(bytes):
    def __len__(self) -> int:
        return 600


class _LyingStr(str):
    """Lies about its encoding (class 4) or yields invalid UTF-8 (class 5)."""

    invalid = False

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        if self.invalid:
            return b"\xff\xfe\xc3"
        return _LyingBytes(str.encode(self, *args, **kwargs))


def _hostile_value(s: Session, hook: _Once, kind: str) -> Any:
    """A value of ``kind`` whose conversion hooks run ``hook``."""
    r = s.r
    if kind == "int":
        made = _HInt.__new__(_HInt, r.pick((0, 1, 5, 7, 100)))
        made.hook = hook
        return made if r.flag() else _HFloat(hook, float(made))
    if kind == "float":
        return _HFloat(hook, r.pick((1.5, -2.0, 42.0)))
    if kind == "text":
        text = _HStr.__new__(_HStr, r.pick(("a", "Hero", "héllo", "FNode.i32", "x" * 40)))
        text.hook = hook
        return text
    if kind == "vec":
        return (_hostile_value(s, hook, "int"), _hostile_value(s, hook, "float"))
    if kind == "list":
        return _HIter(hook, [_hostile_value(s, hook, "int") for _ in range(r.below(4))])
    lying = _LyingStr.__new__(_LyingStr, r.pick(("ab", "Hero", "n")))
    lying.invalid = r.flag()
    return lying


# (target getter, write) pairs: how a hostile value goes in.
def op_hostile_write(s: Session) -> None:
    """Write a hostile value into a container element, a struct member, a
    property or a new value; its hook mutates the target mid-write."""
    r = s.r
    node = s.obj_of(FNode)
    if not isinstance(node, FNode) or node.is_expired:
        raise Skip("no node")
    roll = r.below(12)
    target: Any
    if roll < 3:
        target = get(node, r.pick(("nums", "vecs", "words")))
    elif roll < 5:
        target = get(node, r.pick(("scores", "owners", "tags", "members")))
    elif roll == 5:
        target = get(node, "pos")
    elif roll == 6:
        target = get(node, "maybe")
    elif roll == 7:
        target = s.note(
            r.pick(
                (
                    Array[zs.Int32]([1, 2, 3]),
                    Array[FVec]([(1, 1.0, "a", "b")]),
                    Map[zs.Name, zs.Int32]({"a": 1}),
                    Set[zs.Name]({"a"}),
                    Optional[FVec]((1, 1.0)),
                    blank(FVec, 1, 1.0),
                    zs.String("s"),
                )
            )
        )
    else:
        target = node
    action = r.pick(HOSTILE_ACTIONS)
    hook = _Once(_hostile_action(s, target, action), 1 + r.below(3))
    if isinstance(target, zs.Array):
        element = {"nums": "int", "vecs": "vec", "words": "text"}.get(
            next((k for k, v in ARRAY_KINDS.items() if isinstance(target, v)), "nums"), "int"
        )
        value = _hostile_value(s, hook, element)
        how = r.below(4)
        if how == 0 and len(target):
            target[r.below(len(target))] = value
        elif how == 1:
            target.append(value)
        elif how == 2:
            target.extend(_HIter(hook, [value]))
        else:
            target.insert(r.below(4), value)
    elif isinstance(target, zs.Map):
        key = _hostile_value(
            s, hook, "text" if isinstance(target, Map[zs.Name, zs.Int32]) else "int"
        )
        if isinstance(target, Map[zs.Name, zs.Int32]):
            target[key] = _hostile_value(s, hook, "int")
        else:
            target.setdefault(key, None)
    elif isinstance(target, zs.Set):
        target.add(
            _hostile_value(s, hook, "text" if isinstance(target, Set[zs.Name]) else "int")
            if isinstance(target, Set[zs.Name])
            else s.obj()
        )
    elif isinstance(target, zs.Optional):
        target.set(_hostile_value(s, hook, "vec"))
    elif isinstance(target, FVec):
        put(
            target,
            r.pick(("x", "f", "label", "text")),
            _hostile_value(s, hook, r.pick(("int", "float", "text"))),
        )
    elif isinstance(target, zs.String):
        target.assign(_hostile_value(s, hook, "text"))
    else:
        name = r.pick(list(NODE_PROPS))
        kind = NODE_PROPS[name]
        value_kind = (
            "int"
            if kind.startswith(("int", "uint"))
            else "float"
            if kind == "float"
            else "text"
            if kind == "text"
            else "vec"
            if kind in ("vec", "opt_vec")
            else "list"
            if kind in ("int_list",)
            else "lying"
        )
        put(target, name, _hostile_value(s, hook, value_kind))


ARRAY_KINDS: dict[str, Any] = {
    "nums": Array[zs.Int32],
    "vecs": Array[FVec],
    "words": Array[zs.String],
}


def op_hostile_collector(s: Session) -> None:
    """Run one ordinary operation while CPython's cycle collector (a
    gc.callbacks entry, or the finaliser of cyclic garbage) runs an action
    on the heap at any allocation inside it."""
    r = s.r
    target = s.value_of(s.values) if r.flag() else s.obj()
    hook = _Once(_hostile_action(s, target, r.pick(HOSTILE_ACTIONS[:-2])), 1 + r.below(4))

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            hook()

    saved = gc.get_threshold()
    gc.callbacks.append(callback)
    gc.set_threshold(1, 1, 1)
    try:
        r.pick(OPERATIONS)(s)
    finally:
        gc.callbacks.remove(callback)
        gc.set_threshold(*saved)


def op_hostile_descriptor(s: Session) -> None:
    """A property descriptor of one class applied to an object of another
    (or to anything), and re-classing through the base descriptor: a
    TypeError (or ExpiredConjugateError), never memory of another layout."""
    r = s.r
    owner = r.pick((FNode, FHero, FLeaf, FVec))
    names = list(VEC_MEMBERS) if owner is FVec else list(PROPS[owner])
    descriptor = owner.__dict__.get(r.pick(names))
    if descriptor is None:
        raise Skip("not laid out yet")
    instance = r.pick([s.obj(), s.value_of(s.views), s.value_of(s.values), object(), 5])
    if r.flag():
        descriptor.__get__(instance, type(instance))  # property.fget(instance) alike
    else:
        value = s.plausible(
            PROPS.get(owner, VEC_MEMBERS).get(descriptor_name(owner, descriptor), "any")
        )
        descriptor.__set__(instance, value)
    if r.chance(60):
        victim = r.pick([s.obj(), s.value_of(s.values), s.value_of(s.views)])
        object.__dict__["__class__"].__set__(
            victim, r.pick((FNode, FHero, FLeaf, FVec, zs.String, Array[zs.Int32]))
        )


def descriptor_name(owner: type, descriptor: Any) -> str:
    """The attribute name of ``descriptor`` on ``owner``."""
    return next((k for k, v in vars(owner).items() if v is descriptor), "any")


HOSTILE_OPERATIONS: list[Callable[[Session], None]] = [
    op_hostile_native_function,
    op_hostile_write,
    op_hostile_write,
    op_hostile_collector,
    op_hostile_descriptor,
]


OPERATIONS: list[Callable[[Session], None]] = [
    op_new_object,
    op_new_object,
    op_new_object,
    op_set_property,
    op_set_property,
    op_set_property,
    op_get_property,
    op_get_property,
    op_identity,
    op_roots,
    op_roots,
    op_mark_as_garbage,
    op_clusters,
    op_strong,
    op_weak,
    op_sequence,
    op_sequence,
    op_mapping,
    op_mapping,
    op_optional,
    op_struct,
    op_strings,
    op_delegates,
    op_wrappers,
    op_values,
    op_scopes,
    op_drop,
    op_collect,
    op_incremental,
    op_incremental,
    op_field_path,
    op_close,
    op_other_runtime,
    op_stale,
    op_reference_chains,
    op_native_call,
    op_engine_spawn,
    op_engine_spawn,
    op_engine_call,
    op_engine_call,
    op_engine_tick,
    op_engine_native,
    op_engine_state,
    op_ticks,
    op_ticks,
    op_ticks,
    op_native_broadcast,
    op_native_broadcast,
]


def run_one(data: bytes, hostile: bool = False) -> None:
    """Run one fuzz input; raises on a finding (see the module docstring).
    ``hostile`` adds HOSTILE_OPERATIONS (tools/fuzz.sh always does)."""
    session = Session(Reader(data), hostile)
    try:
        session.run()
        session.finish()
    except BaseException:
        # Leave no runtime current for the next input, then report.
        _close_quietly(session)
        raise
    finally:
        sys.unraisablehook = session.saved_hook
        zs.debug.raise_callback_errors(session.saved_raise)


def _close_quietly(session: Session) -> None:
    """Exit the session's scopes and runtimes (each at most once)."""
    while session.scopes:
        session.scopes.pop().__exit__(None, None, None)
    session.rt.__exit__(None, None, None)
    if session.other is not None:
        session.other.__exit__(None, None, None)


def inputs(count: int, seed: int = 0, size: int = 400) -> list[bytes]:
    """``count`` deterministic pseudo-random inputs (for the normal test suite
    and to seed the corpus)."""
    import random

    rng = random.Random(seed)
    return [
        bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, size)))
        for _ in itertools.repeat(None, count)
    ]


if __name__ == "__main__":  # python tools/fuzz/harness.py FILE...: replay inputs
    for path in sys.argv[1:]:
        with open(path, "rb") as handle:
            run_one(handle.read())
        print(f"{path}: ok")
