"""Classes and hostile values shared by tests/hostile/test_hostile_conversions.py (and reusable by
the fuzz harness and the model test): values whose conversion hooks run an
*action* (a heap mutation, a collection, closing the runtime, raising) the
N-th time any hook of theirs is called, builtin subclasses with lying
methods, and a trigger that fires from CPython's cycle collector
(``gc.callbacks``) or from a finaliser (``__del__``) instead.

The contract these values check (FINDINGS.md at the repository root): no
crash and no sanitizer report whatever the hook does; the operation either
completes with the documented result (a conversion runs first, then the
value is stored into the container *as it is after the hook*) or raises a
clear exception (the hook's own exception unchanged, or TypeError,
ValueError, OverflowError, IndexError, KeyError, ExpiredConjugateError),
and then the container is exactly as the hook left it (all or nothing);
the heap verifies and the runtime closes.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import zsharp_py as zs


class HookError(Exception):
    """What a raising hook raises: it must reach the caller unchanged."""


class PickyTypeError(TypeError):
    """A TypeError subclass whose constructor takes several arguments: a
    library that re-raises with ``type(error)(message)`` cannot build it."""

    def __init__(self, code: int, where: str, detail: str) -> None:
        super().__init__(f"{code} at {where}: {detail}")
        self.code = code


class Trigger:
    """Runs ``action`` once, on the ``when``-th call (1 = the first) made
    while armed (a trigger made with ``armed=False`` counts from ``arm()``:
    the test builds its hostile value, e.g. a dict literal hashing its
    keys, before the operation under test runs)."""

    def __init__(self, action: Callable[[], None], when: int = 1, *, armed: bool = True) -> None:
        self.action = action
        self.when = when
        self.calls = 0
        self.fired = False
        self.armed = armed

    def arm(self) -> None:
        """Start counting calls."""
        self.armed = True

    def __call__(self) -> None:
        if not self.armed:
            return
        self.calls += 1
        if self.calls == self.when and not self.fired:
            self.fired = True
            self.action()


def never() -> None:
    """A trigger action that does nothing (plain values)."""


NO_TRIGGER = Trigger(never, when=0)


def counter(*, armed: bool = True) -> Trigger:
    """A trigger that only counts its calls (it never acts): what a plain
    run of a case measures."""
    return Trigger(never, when=0, armed=armed)


@dataclass
class MatrixLog:
    """The bookkeeping of the hostile matrix (tests/hostile/
    test_hostile_conversions.py) for one session, read by
    tests/hostile/conftest.py: what the matrix holds in all (set when the
    module is imported), what this session's cases reached, and with
    ``--update-hostile-reach`` what the reach tests measured."""

    groups: set[str] = field(default_factory=set)
    """Every group of the matrix: an operation on a kind and colour, a
    property, a constructor or a read, named as in tests/hostile/reach.json."""
    cases: Counter[str] = field(default_factory=Counter)
    """The whole matrix's cases in which a trigger fires, by mode (hook,
    gc, del), whatever this session selected."""
    reached: Counter[str] = field(default_factory=Counter)
    """This session: cases whose trigger fired (asserted), by mode."""
    refused: int = 0
    """This session: of those, cases whose action the library refused
    (a collection from inside a collection, say)."""
    plain: int = 0
    """This session: groups whose plain run matched the reach table."""
    measured: dict[str, dict[str, int]] | None = None
    """``--update-hostile-reach``: what each reach test measured."""


MATRIX = MatrixLog()


# ---- conversion hooks --------------------------------------------------------------


class HFloat:
    """A real number: ``__float__`` (and ``__index__``-less) runs the trigger."""

    def __init__(self, trigger: Trigger, value: float) -> None:
        self.trigger, self.value = trigger, value

    def __float__(self) -> float:
        self.trigger()
        return self.value

    def __repr__(self) -> str:
        return f"HFloat({self.value!r})"


class HIndex:
    """An integer through ``__index__`` and ``__int__``."""

    def __init__(self, trigger: Trigger, value: int) -> None:
        self.trigger, self.value = trigger, value

    def __index__(self) -> int:
        self.trigger()
        return self.value

    def __int__(self) -> int:
        self.trigger()
        return self.value

    def __float__(self) -> float:
        self.trigger()
        return float(self.value)

    def __repr__(self) -> str:
        return f"HIndex({self.value!r})"


class HBool:
    """A boolean through ``__index__`` (0/1) and ``__bool__``."""

    def __init__(self, trigger: Trigger, value: bool) -> None:
        self.trigger, self.value = trigger, value

    def __index__(self) -> int:
        self.trigger()
        return int(self.value)

    def __bool__(self) -> bool:
        self.trigger()
        return self.value


class HStr(str):
    """A str subclass whose every overridable hook runs the trigger; its
    contents are those of the str it was built from."""

    trigger: Trigger

    def __new__(cls, text: str, trigger: Trigger) -> HStr:
        made = str.__new__(cls, text)
        made.trigger = trigger
        return made

    def encode(self, *args: Any, **kwargs: Any) -> bytes:  # type: ignore[override]
        self.trigger()
        return str.encode(self, *args, **kwargs)

    def __str__(self) -> str:
        self.trigger()
        return str.__str__(self)

    def __len__(self) -> int:
        self.trigger()
        return str.__len__(self)

    def __hash__(self) -> int:
        self.trigger()
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        self.trigger()
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __iter__(self) -> Iterator[str]:
        self.trigger()
        return str.__iter__(self)


class HInt(int):
    """An int subclass whose ``__index__``/``__int__``/``__eq__``/``__hash__``
    run the trigger; its value is the int it was built from."""

    trigger: Trigger

    def __new__(cls, value: int, trigger: Trigger) -> HInt:
        made = int.__new__(cls, value)
        made.trigger = trigger
        return made

    def __index__(self) -> int:
        self.trigger()
        return int.__index__(self)

    def __int__(self) -> int:
        self.trigger()
        return int.__int__(self)

    def __float__(self) -> float:
        self.trigger()
        return int.__float__(self)

    def __hash__(self) -> int:
        self.trigger()
        return int.__hash__(self)

    def __eq__(self, other: object) -> bool:
        self.trigger()
        return int.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)


class HFloatSub(float):
    """A float subclass whose ``__float__`` runs the trigger."""

    trigger: Trigger

    def __new__(cls, value: float, trigger: Trigger) -> HFloatSub:
        made = float.__new__(cls, value)
        made.trigger = trigger
        return made

    def __float__(self) -> float:
        self.trigger()
        return float.__float__(self)


class HEq:
    """Compares (``__eq__``) and hashes through the trigger, equal to ``value``."""

    def __init__(self, trigger: Trigger, value: Any) -> None:
        self.trigger, self.value = trigger, value

    def __eq__(self, other: object) -> bool:
        self.trigger()
        return bool(self.value == other)

    def __hash__(self) -> int:
        self.trigger()
        return hash(self.value)

    def __index__(self) -> int:
        self.trigger()
        return int(self.value)

    def __float__(self) -> float:
        self.trigger()
        return float(self.value)


class HIter:
    """An iterable of ``items``: ``__iter__``, each ``__next__`` and
    ``__len__`` run the trigger."""

    def __init__(self, trigger: Trigger, items: list[Any]) -> None:
        self.trigger, self.items = trigger, items

    def __len__(self) -> int:
        self.trigger()
        return len(self.items)

    def __iter__(self) -> Iterator[Any]:
        self.trigger()
        for item in self.items:
            self.trigger()
            yield item


class HMapping:
    """A mapping (``keys``/``__getitem__``/``items``) whose methods run the trigger."""

    def __init__(self, trigger: Trigger, items: dict[Any, Any]) -> None:
        self.trigger, self.data = trigger, items

    def keys(self) -> list[Any]:
        self.trigger()
        return list(self.data)

    def items(self) -> list[tuple[Any, Any]]:
        self.trigger()
        return list(self.data.items())

    def __getitem__(self, key: Any) -> Any:
        self.trigger()
        return self.data[key]

    def __iter__(self) -> Iterator[Any]:
        self.trigger()
        return iter(self.data)

    def __len__(self) -> int:
        self.trigger()
        return len(self.data)


# ---- lying builtin subclasses (class 4) ------------------------------------------------


class LyingBytes(bytes):
    """bytes whose ``__len__`` lies (600 for 2 real bytes)."""

    def __len__(self) -> int:
        return 600


class LyingEncodeStr(str):
    """A str whose ``encode`` returns a ``LyingBytes``."""

    def encode(self, *args: Any, **kwargs: Any) -> bytes:  # type: ignore[override]
        return LyingBytes(str.encode(self, *args, **kwargs))


class ShortEncodeStr(str):
    """A str whose ``encode`` returns bytes of another text (shorter)."""

    def encode(self, *args: Any, **kwargs: Any) -> bytes:  # type: ignore[override]
        return b"x"


class InvalidUtf8Str(str):
    """A str whose ``encode`` yields invalid UTF-8 (class 5: names)."""

    def encode(self, *args: Any, **kwargs: Any) -> bytes:  # type: ignore[override]
        return b"\xff\xfe\xc3bad"


class NotBytesEncodeStr(str):
    """A str whose ``encode`` returns something that is not bytes."""

    def encode(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return [1, 2, 3]


class LyingStrStr(str):
    """A str whose ``__str__`` returns other text and ``__len__`` lies."""

    def __str__(self) -> str:
        return "something else entirely"

    def __len__(self) -> int:
        return 10_000


class LyingInt(int):
    """An int whose ``__index__``/``__int__`` return other values."""

    def __index__(self) -> int:
        return 1 << 70

    def __int__(self) -> int:
        return -(1 << 70)


class LyingFloat(float):
    """A float whose ``__float__`` returns another value."""

    def __float__(self) -> float:
        return 1e300


class LyingBytesBytes(bytes):
    """bytes whose ``__bytes__`` and ``__len__`` lie."""

    def __bytes__(self) -> bytes:
        return b"y" * 1000  # noqa: PLE0308 (ruff misreads it: bytes * int is bytes)

    def __len__(self) -> int:
        return 1000


# ---- triggers from CPython's cycle collector ------------------------------------------


def _freeze_existing() -> list[Callable[[str, dict[str, Any]], None]]:
    """Move every object tracked now out of the collector's reach
    (``gc.freeze``) and reset the generations' counts (a collection that
    examines nothing), so that the collections a case forces examine only
    what the case makes, at the allocations they would fall on after a
    full collection. The ``gc.callbacks`` already installed (Hypothesis
    installs one for good at its first test: it allocates at every
    collection and so moves the next) are taken out and returned, to be
    put back by ``_thaw``."""
    others = gc.callbacks[:]
    gc.callbacks.clear()
    gc.freeze()
    gc.collect()
    return others


def _thaw(others: list[Callable[[str, dict[str, Any]], None]]) -> None:
    """Undo ``_freeze_existing``."""
    gc.unfreeze()
    gc.callbacks[:0] = others


class GcTrigger:
    """Runs a trigger from ``gc.callbacks`` (at the start of the N-th
    collection) while installed; ``gc.set_threshold(1)`` makes a collection
    run on nearly every allocation of a tracked object. What existed before
    is frozen (``gc.freeze``): each of those collections examines only what
    the case made (a suite of thousands of cases would otherwise scan the
    whole process's heap at each), and garbage older than the case cannot
    run its finalisers in the middle of it. Other ``gc.callbacks`` are
    taken out meanwhile (``_freeze_existing``)."""

    def __init__(self, trigger: Trigger) -> None:
        self.trigger = trigger
        self.saved = gc.get_threshold()
        self.others: list[Callable[[str, dict[str, Any]], None]] = []

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.trigger()

    def __enter__(self) -> GcTrigger:
        self.others = _freeze_existing()
        gc.set_threshold(1, 1, 1)
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)
        gc.set_threshold(*self.saved)
        _thaw(self.others)


class _Doomed:
    """In a reference cycle: its ``__del__`` runs when the cycle collector
    frees it, at whatever allocation that happens."""

    def __init__(self, trigger: Trigger) -> None:
        self.trigger = trigger
        self.cycle = self

    def __del__(self) -> None:
        self.trigger()


class DelTrigger:
    """Leaves ``count`` cyclic garbage objects whose finalisers run the
    trigger, with ``gc.set_threshold(1)`` so the collector frees them during
    the very next API call's allocations. What existed before is frozen, as
    in ``GcTrigger`` (the doomed objects are made after, so they are not)."""

    def __init__(self, trigger: Trigger, count: int = 4) -> None:
        self.trigger = trigger
        self.count = count
        self.saved = gc.get_threshold()
        self.others: list[Callable[[str, dict[str, Any]], None]] = []

    def __enter__(self) -> DelTrigger:
        gc.disable()
        self.others = _freeze_existing()
        for _ in range(self.count):
            _Doomed(self.trigger)
        gc.set_threshold(1, 1, 1)
        gc.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        gc.set_threshold(*self.saved)
        gc.collect()  # what the case made, the doomed objects among it
        _thaw(self.others)


# ---- the classes under test -------------------------------------------------------------


class HVec(zs.Struct):
    """A plain struct: a scalar of each family."""

    x: zs.Int32
    y: zs.Float64


class HRich(zs.Struct):
    """A struct with members that own memory."""

    label: zs.String
    tag: zs.Name
    nums: zs.Array[zs.Int32]
    count: zs.Int32


class HTiny(zs.Struct):
    """A small struct: a member descriptor of HRich applied to it reads past it."""

    a: zs.UInt8


class IThing(zs.Interface):
    """An interface implemented by HHolder."""

    __slots__ = ()

    def poke(self) -> None:
        raise NotImplementedError


class HHolder(zs.Object, IThing):
    """Every kind of property."""

    f64: zs.Float64
    f32: zs.Float32
    i32: zs.Int32
    i8: zs.Int8
    u64: zs.UInt64
    i64: zs.Int64
    flag: zs.Bool
    label: zs.String
    utf8: zs.Utf8String
    ansi: zs.AnsiString
    text: zs.Text
    tag: zs.Name
    ref: "HHolder | None"
    weak: zs.WeakObjectPtr["HHolder"]
    floats: zs.Array[zs.Float64]
    ints: zs.Array[zs.Int32]
    flags: zs.Array[zs.Bool]
    vecs: zs.Array[HVec]
    words: zs.Array[zs.String]
    names: zs.Array[zs.Name]
    fmap: zs.Map[zs.Int32, zs.Float64]
    nmap: zs.Map[zs.Name, zs.Int32]
    vmap: zs.Map[zs.Int32, HVec]
    iset: zs.Set[zs.Int32]
    nset: zs.Set[zs.Name]
    ofloat: zs.Optional[zs.Float64]
    ovec: zs.Optional[HVec]
    pos: HVec
    rich: HRich
    single: zs.Delegate
    multi: zs.MulticastDelegate
    sparse: zs.SparseDelegate
    path: zs.FieldPath

    def bump(self, *args: Any) -> None:
        """A method delegates bind to."""
        self.i32 = (self.i32 + 1) & 0x7FFFFFFF

    def poke(self) -> None:
        self.i32 = 7


class HWrapped(zs.Object):
    """The object wrappers (they name HHolder, declared above)."""

    kind: zs.SubclassOf[HHolder]
    soft: zs.SoftObjectPtr[HHolder]
    soft_class: zs.SoftClassPtr[HHolder]
    lazy: zs.LazyObjectPtr[HHolder]
    iface: zs.ScriptInterface[IThing]
    count: zs.Int32


class HSmall(zs.Object):
    """A small object: descriptors of HHolder applied to it read past its end."""

    b: zs.UInt8


class HOther(zs.Object):
    """Unrelated to the others, as big as nothing in particular."""

    weight: zs.Float64


class HHeroHolder(HHolder):
    """A subclass of HHolder (its descriptors apply)."""

    level: zs.Int32
