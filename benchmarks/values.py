"""Value types: the everyday operations of game logic on every kind of the
type table (structs, strings, names, sets, arrays, maps, optionals,
delegates, weak and soft pointers, field paths), zsharp_py side by side with
the same data in C++ bound by nanobind and pybind11.

zsharp_py declares one ``zs.Object`` subclass (``ValueActor``) holding a
member of every kind; the peers bind ``struct A`` of ``csrc/values.h``, the
same members in plain C++/STL. Every zsharp_py statement uses the public
API only (``import zsharp_py as zs``), so the rows keep measuring the same
thing whatever implements the value layer.

Each C++ peer is built twice (``csrc/nb_values.cpp``, ``csrc/pb_values.cpp``,
``_build.nanobind_values_module``): with its containers *opaque* (bound
classes: ``bind_vector``, ``bind_map``, a hand-bound set class, so
``a.kids`` is a view of the C++ vector) and with the STL *casters* (which copy
the whole container on every read and every assignment). Which build a row
compares against: container methods (element access, mutation, membership,
iteration, slicing) against the opaque build, whole-value transfers
(assigning a whole value, converting a whole container to a list) against
the casters; the other build is shown beside it where it has an equivalent.
Non-container members (the struct, the string, the optional, the delegates,
the pointers, the field path) are bound the same way in both builds.

Timing: every case's batch is calibrated to take about the same time
(``Config.value_batch_seconds``), since the peers are up to 1,000x apart;
batches of all cases are interleaved round by round (``_harness.run_micro``).
Every zsharp_py batch ends with a timed ``rt.collect_garbage()``: the safe
point where objects and black values dropped by the batch are freed (the
peers free theirs inside the statement, by refcount).
"""

from __future__ import annotations

import contextlib
import operator
import statistics
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import zsharp_py as zs

from . import _build
from ._harness import (
    Config,
    MicroCase,
    MicroResult,
    Table,
    Unavailable,
    calibrate,
    fmt_ns,
    fmt_result_ratio,
    progress,
    record,
    result_ratio,
    run_micro,
)

NAME = "values"
TITLE = "Value types"

__all__ = ["NAME", "TITLE", "ROWS", "Row", "run"]

ARRAY = 1000  # elements of a.kids and a.floats
SMALL = 16  # elements of s.kids and s.floats (insert at the front)
TAGS = 8  # elements of a.tags and a.stags ("T0".."T7")
SCORES = 64  # entries of a.scores ("k0".."k63")

LIBRARIES = ("nanobind", "pybind11")
VARIANTS = ("opaque", "caster")


# ---------------------------------------------------------------------------
# The rows
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Alt:
    """The peers' other binding of a row: a statement run in ``variant``'s
    build (``bound`` says how it binds it)."""

    variant: str
    stmt: str
    bound: str
    setup: str = ""


@dataclass(frozen=True)
class Row:
    """One operation: the zsharp_py statement and the peers' statement in the
    build the row compares against (``main``)."""

    key: str
    kind: str
    zs: str
    bound: str
    """How the compared peers bind it (short; the README explains)."""
    peer: str = ""
    """The peers' statement when it differs from zsharp_py's."""
    main: str = "opaque"
    """The build of the compared peers ("opaque" or "caster"); rows whose
    member is bound alike in both builds use "opaque"."""
    alt: Alt | None = None
    items: int = 1
    """Elements per operation: the figures are per element."""
    setup: str = ""
    """Run untimed before every batch, on every side (``n``: the batch's
    operation count)."""
    needs: tuple[str, ...] = ()
    """zsharp_py members the row uses (a member that failed to set up makes
    the row unavailable)."""
    extra: tuple[tuple[str, str], ...] = ()
    """Other zsharp_py spellings of the same operation: (label, statement),
    in the detail table only."""

    @property
    def peer_stmt(self) -> str:
        return self.peer or self.zs

    @property
    def title(self) -> str:
        return f"`{self.zs}`" + (" (per element)" if self.items > 1 else "")


_CLASS_V = "class V (def_rw: assignment copies)"
_VIEW_V = "class V (def_rw: reference_internal view)"
_SET = "opaque: hand-bound set class"
_SET_CASTER = "caster (stl set): copies the set"
_SET_CASTER_CHANGE = "caster (stl set): copied out, changed, assigned back"
_VEC = "opaque: bind_vector"
_VEC_CASTER = "caster (stl/vector.h): copies the vector"
_VEC_CASTER_CHANGE = "caster (stl/vector.h): copied out, changed, assigned back"
_MAP = "opaque: bind_map"
_MAP_CASTER = "caster (stl map): copies the map"
_MAP_CASTER_CHANGE = "caster (stl map): copied out, changed, assigned back"


def _array_rows(kind: str, member: str, element: str, probe: str, build: str) -> list[Row]:
    """The array rows of one element kind (``kids``: objects, ``floats``:
    Float64); ``element`` is the value written, ``probe`` an element found
    at index 500 by ``in``, ``build`` the list the container is built from."""
    read = f"a.{member}[700]"
    write_value = "k700" if member == "kids" else "700.0"
    new = "b" if member == "kids" else "1.0"
    ctor = "KA" if member == "kids" else "FA"
    return [
        Row(
            f"{member}_index",
            kind,
            read,
            _VEC,
            alt=Alt("caster", read, _VEC_CASTER),
            needs=(member,),
        ),
        Row(
            f"{member}_index_write",
            kind,
            f"a.{member}[700] = {write_value}",
            _VEC,
            alt=Alt(
                "caster",
                f"t = a.{member}; t[700] = {write_value}; a.{member} = t",
                _VEC_CASTER_CHANGE,
            ),
            needs=(member,),
        ),
        Row(
            f"{member}_append",
            kind,
            f"m.{member}.append({new})",
            _VEC,
            setup=f"m.{member}.clear()",
            needs=(member,),
        ),
        Row(
            f"{member}_insert_front",
            kind,
            f"s.{member}.insert(0, {new}); s.{member}.pop()",
            _VEC,
            alt=Alt(
                "caster",
                f"t = s.{member}; t.insert(0, {new}); t.pop(); s.{member} = t",
                _VEC_CASTER_CHANGE,
            ),
            needs=(member,),
        ),
        Row(
            f"{member}_pop",
            kind,
            f"m.{member}.pop()",
            _VEC,
            setup=f"m.{member} = [{element}] * n",
            needs=(member,),
        ),
        Row(
            f"{member}_in",
            kind,
            f"{probe} in a.{member}",
            _VEC,
            alt=Alt("caster", f"{probe} in a.{member}", _VEC_CASTER),
            needs=(member,),
        ),
        Row(
            f"{member}_iterate",
            kind,
            f"for x in a.{member}: pass",
            _VEC,
            items=ARRAY,
            alt=Alt("caster", f"for x in a.{member}: pass", _VEC_CASTER),
            needs=(member,),
        ),
        Row(
            f"{member}_build",
            kind,
            f"{ctor}({build})",
            f"{_VEC} constructor",
            items=ARRAY,
            needs=(member,),
        ),
        Row(
            f"{member}_to_python",
            kind,
            f"a.{member}.to_python()",
            "caster (stl/vector.h)",
            peer=f"a.{member}",
            main="caster",
            items=ARRAY,
            alt=Alt("opaque", f"list(a.{member})", _VEC),
            needs=(member,),
        ),
        Row(
            f"{member}_assign",
            kind,
            f"m.{member} = {build}",
            "caster (stl/vector.h)",
            main="caster",
            items=ARRAY,
            alt=Alt("opaque", f"m.{member} = {build}", f"{_VEC} (implicit conversion)"),
            needs=(member,),
        ),
        Row(
            f"{member}_slice",
            kind,
            f"a.{member}[100:110]",
            _VEC,
            alt=Alt("caster", f"a.{member}[100:110]", _VEC_CASTER),
            needs=(member,),
        ),
    ]


ROWS: list[Row] = [
    Row("struct_assign_new", "struct", "a.pos = V(1.0, 2.0)", _CLASS_V, needs=("pos",)),
    Row("struct_assign_held", "struct", "a.pos = v", _CLASS_V, needs=("pos",)),
    Row("struct_member_read", "struct", "a.pos.x", _VIEW_V, needs=("pos",)),
    Row("struct_member_write", "struct", "a.pos.x = 1.0", _VIEW_V, needs=("pos",)),
    Row("string_assign", "string", 'a.label = "abc"', "caster (stl/string.h)", needs=("label",)),
    Row("string_read", "string", "str(a.label)", "caster (stl/string.h)", needs=("label",)),
    Row(
        "create",
        "object",
        'A(hp=1, label="x" * 16)',
        "class A (init), freed by refcount",
        needs=("label",),
    ),
    Row(
        "name_set_add",
        "set",
        'a.tags.add("T3")',
        _SET,
        alt=Alt("caster", 't = a.tags; t.add("T3"); a.tags = t', _SET_CASTER_CHANGE),
        needs=("tags",),
    ),
    Row(
        "name_set_in",
        "set",
        '"T3" in a.tags',
        _SET,
        alt=Alt("caster", '"T3" in a.tags', _SET_CASTER),
        needs=("tags",),
    ),
    Row(
        "string_set_add",
        "set",
        'a.stags.add("T3")',
        _SET,
        alt=Alt("caster", 't = a.stags; t.add("T3"); a.stags = t', _SET_CASTER_CHANGE),
        needs=("stags",),
    ),
    Row(
        "string_set_in",
        "set",
        '"T3" in a.stags',
        _SET,
        alt=Alt("caster", '"T3" in a.stags', _SET_CASTER),
        needs=("stags",),
    ),
    Row(
        "kids_append_clear",
        "array of objects",
        "m.kids.append(b); m.kids.clear()",
        _VEC,
        alt=Alt("caster", "t = m.kids; t.append(b); m.kids = t; m.kids = []", _VEC_CASTER_CHANGE),
        needs=("kids",),
    ),
    *_array_rows("array of objects", "kids", "b", "k500", "kids"),
    *_array_rows("array of Float64", "floats", "1.0", "500.0", "lst"),
    Row(
        "map_get",
        "map",
        'a.scores["k5"]',
        _MAP,
        alt=Alt("caster", 'a.scores["k5"]', _MAP_CASTER),
        needs=("scores",),
    ),
    Row(
        "map_set",
        "map",
        'a.scores["k5"] = 5',
        _MAP,
        alt=Alt("caster", 't = a.scores; t["k5"] = 5; a.scores = t', _MAP_CASTER_CHANGE),
        needs=("scores",),
    ),
    Row(
        "map_in",
        "map",
        '"k5" in a.scores',
        _MAP,
        alt=Alt("caster", '"k5" in a.scores', _MAP_CASTER),
        needs=("scores",),
    ),
    Row(
        "map_items",
        "map",
        "for k, x in a.scores.items(): pass",
        _MAP,
        items=SCORES,
        alt=Alt("caster", "for k, x in a.scores.items(): pass", _MAP_CASTER),
        needs=("scores",),
    ),
    Row(
        "optional_set",
        "optional",
        "a.opt = 1.5",
        "caster (stl/optional.h)",
        needs=("opt",),
        extra=(("Optional.set", "a.opt.set(1.5)"),),
    ),
    Row(
        "optional_get",
        "optional",
        "a.opt.get()",
        "caster (stl/optional.h): `a.opt`",
        peer="a.opt",
        needs=("opt",),
        extra=(("Optional.value", "a.opt.value"),),
    ),
    Row(
        "multicast_add_remove",
        "delegate",
        "m.on_event.add(f); m.on_event.remove(f)",
        "class: vector of std::function; `m.on_event.remove(m.on_event.add(f))`",
        peer="m.on_event.remove(m.on_event.add(f))",
        needs=("on_event",),
    ),
    Row(
        "multicast_broadcast",
        "delegate",
        "a.on_event.broadcast()",
        "class: vector of std::function",
        needs=("on_event",),
    ),
    Row(
        "delegate_execute",
        "delegate",
        "a.on_hit.execute()",
        "class: std::function",
        needs=("on_hit",),
    ),
    Row("weak_get", "pointer", "a.weak.get()", "class: index + serial registry", needs=("weak",)),
    Row("soft_get", "pointer", "a.soft.get()", "class: path -> A* hash map", needs=("soft",)),
    Row(
        "fieldpath_get",
        "field path",
        "fp.get(a)",
        "class: path resolved to an offset",
        alt=Alt("opaque", "getter(a)", "getattr by name: `operator.attrgetter('pos.x')`"),
        needs=("fieldpath",),
    ),
    Row(
        "fieldpath_set",
        "field path",
        "fp.set(a, 1.0)",
        "class: path resolved to an offset",
        alt=Alt("opaque", 'setattr(a.pos, "x", 1.0)', 'setattr by name: `setattr(a.pos, "x", v)`'),
        needs=("fieldpath",),
    ),
]

# Invariants every side must still hold after the run (the statements keep
# their state constant); a failure fails the run.
CHECKS: list[str] = [
    f"len(a.kids) == {ARRAY}",
    "a.kids[700] is k700",
    f"len(a.floats) == {ARRAY}",
    "a.floats[700] == 700.0",
    f"len(s.kids) == {SMALL}",
    f"len(s.floats) == {SMALL}",
    '"T3" in a.tags',
    f"len(a.tags) == {TAGS}",
    '"T3" in a.stags',
    f"len(a.scores) == {SCORES}",
    'a.scores["k5"] == 5',
    "len(a.on_event) == 1",
    "len(m.on_event) == 1",
    "a.weak.get() is b",
    "a.soft.get() is b",
]


def listener() -> None:
    """The Python callable the delegates call."""


def other_listener() -> None:
    """A second binding of ``m.on_event`` (never called)."""


# ---------------------------------------------------------------------------
# zsharp_py's side
# ---------------------------------------------------------------------------

ValueVector: Any = None
ValueActor: Any = None
_declared: list[str] = []  # the declaration error, once


def _declare() -> str:
    """Declare ``ValueVector`` and ``ValueActor`` once per process (module
    globals: zsharp_py resolves the forward reference ``"ValueActor"`` of the
    containers in the module that wrote it). Returns the error, or ""."""
    global ValueVector, ValueActor
    if _declared:
        return _declared[0]
    try:

        class ValueVector(zs.Struct):
            x: zs.Float64
            y: zs.Float64

        class ValueActor(zs.Object):
            hp: zs.Int32
            pos: ValueVector
            label: zs.String
            tags: zs.Set[zs.Name]
            stags: zs.Set[zs.String]
            kids: zs.Array["ValueActor"]
            floats: zs.Array[zs.Float64]
            ints: zs.Array[zs.Int32]
            scores: zs.Map[zs.Name, zs.Int32]
            opt: zs.Optional[zs.Float64]
            on_hit: zs.Delegate
            on_event: zs.MulticastDelegate
            weak: zs.WeakObjectPtr["ValueActor"]
            soft: zs.SoftObjectPtr["ValueActor"]

        _declared.append("")
    except Exception as error:  # a young API: report, do not fail the run
        _declared.append(f"declaring ValueActor failed: {type(error).__name__}: {error}")
    return _declared[0]


def _step(failed: dict[str, str], member: str, action: Callable[[], Any]) -> None:
    """Set up one member; on failure, remember why (its rows are unavailable)."""
    if member in failed:
        return
    try:
        action()
    except Exception as error:  # a young API: report, do not fail the run
        failed[member] = f"{type(error).__name__}: {error}"


def _zsharp_fixture(stack: contextlib.ExitStack) -> tuple[dict[str, Any], dict[str, str]]:
    """zsharp_py's namespace and the members that failed to set up."""
    error = _declare()
    if error:
        raise Unavailable(error)
    runtime = stack.enter_context(zs.Runtime())  # the current runtime while the cases run
    A, V = ValueActor, ValueVector
    a = A(name="Hero")
    a.add_to_root()
    b = A(name="B", outer=a)  # soft path "Hero.B"
    b.add_to_root()
    s, m = A(), A()
    s.add_to_root()
    m.add_to_root()
    kids = [A() for _ in range(ARRAY)]
    ns: dict[str, Any] = {
        "zs": zs,
        "A": A,
        "V": V,
        "a": a,
        "b": b,
        "s": s,
        "m": m,
        "kids": kids,
        "k500": kids[500],
        "k700": kids[700],
        "lst": [float(i) for i in range(ARRAY)],
        "f": listener,
        "rt": runtime,
    }
    failed: dict[str, str] = {}

    def kids_() -> None:
        a.kids = kids
        s.kids = kids[:SMALL]
        array: Any = zs.Array  # specialised with a class held in a variable
        ns["KA"] = array[A]
        assert a.kids[700] is kids[700]

    def floats_() -> None:
        a.floats = ns["lst"]
        s.floats = ns["lst"][:SMALL]
        ns["FA"] = zs.Array[zs.Float64]

    def sets_(member: str) -> Callable[[], None]:
        def fill() -> None:
            for i in range(TAGS):
                getattr(a, member).add(f"T{i}")

        return fill

    def scores_() -> None:
        for i in range(SCORES):
            a.scores[f"k{i}"] = i

    def pos_() -> None:
        ns["v"] = V(3.0, 4.0)
        a.pos = (1.0, 0.0)

    def fieldpath_() -> None:
        ns["fp"] = zs.FieldPath(A, "pos.x")
        assert ns["fp"].get(a) == a.pos.x

    _step(failed, "pos", pos_)
    _step(failed, "label", lambda: setattr(a, "label", "abc"))
    _step(failed, "tags", sets_("tags"))
    _step(failed, "stags", sets_("stags"))
    _step(failed, "kids", kids_)
    _step(failed, "floats", floats_)
    _step(failed, "scores", scores_)
    _step(failed, "opt", lambda: setattr(a, "opt", 1.5))
    _step(failed, "on_hit", lambda: a.on_hit.bind(listener))
    _step(failed, "on_event", lambda: (a.on_event.add(listener), m.on_event.add(other_listener)))
    _step(failed, "weak", lambda: setattr(a, "weak", zs.WeakObjectPtr(b)))
    _step(failed, "soft", lambda: setattr(a, "soft", b))
    _step(failed, "fieldpath", fieldpath_)
    return ns, failed


# ---------------------------------------------------------------------------
# The C++ peers' side
# ---------------------------------------------------------------------------

_LOADERS: dict[str, Callable[[Config, str], ModuleType]] = {
    "nanobind": _build.nanobind_values_module,
    "pybind11": _build.pybind11_values_module,
}
VERSIONS: dict[str, str] = {}


def _peer_fixture(module: ModuleType) -> dict[str, Any]:
    """The same state as zsharp_py's, in one build of a C++ peer."""
    A, V = module.A, module.V
    opaque = bool(module.OPAQUE)
    a, b = A(path="Hero"), A(path="Hero.B")
    s, m = A(), A()
    kids = [A() for _ in range(ARRAY)]
    lst = [float(i) for i in range(ARRAY)]
    a.kids, s.kids = kids, kids[:SMALL]
    a.floats, s.floats = lst, lst[:SMALL]
    tags = {f"T{i}" for i in range(TAGS)}
    scores = {f"k{i}": i for i in range(SCORES)}
    if opaque:
        for tag in tags:
            a.tags.add(tag)
            a.stags.add(tag)
        for key, value in scores.items():
            a.scores[key] = value
    else:
        a.tags, a.stags, a.scores = tags, set(tags), scores
    a.pos = V(1.0, 0.0)
    a.label = "abc"
    a.opt = 1.5
    a.on_hit.bind(listener)
    a.on_event.add(listener)
    m.on_event.add(other_listener)
    a.weak = module.WeakPtr(b)
    a.soft = module.SoftPtr("Hero.B")
    assert a.kids[700] is kids[700] and a.weak.get() is b and a.soft.get() is b
    return {
        "A": A,
        "V": V,
        "a": a,
        "b": b,
        "s": s,
        "m": m,
        "kids": kids,
        "k500": kids[500],
        "k700": kids[700],
        "lst": lst,
        "v": V(3.0, 4.0),
        "f": listener,
        "FA": getattr(module, "FloatVec", None),
        "KA": getattr(module, "KidVec", None),
        "fp": module.FieldPath("pos.x"),
        "getter": operator.attrgetter("pos.x"),
    }


def _load_peers(config: Config) -> tuple[dict[tuple[str, str], dict[str, Any]], dict[str, str]]:
    """Every build of the C++ peers: namespaces by (library, variant), and
    why a library is unavailable."""
    jobs = [(library, variant) for library in LIBRARIES for variant in VARIANTS]
    modules: dict[tuple[str, str], ModuleType] = {}
    missing: dict[str, str] = {}
    if config.install:  # compile the builds two at a time (g++ takes most of it)
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = {job: pool.submit(_LOADERS[job[0]], config, job[1]) for job in jobs}
            for future in futures.values():
                with contextlib.suppress(Unavailable):
                    future.result()
    for library, variant in jobs:
        try:
            modules[(library, variant)] = _LOADERS[library](config, variant)
        except Unavailable as reason:
            missing.setdefault(library, f"unavailable: {reason}")
    namespaces = {}
    for job, module in modules.items():
        VERSIONS[job[0]] = str(getattr(module, "VERSION", "?"))
        try:
            namespaces[job] = _peer_fixture(module)
        except Exception as error:  # a broken build: a note, not a crash
            missing.setdefault(job[0], f"unavailable: setting up {module.__name__}: {error}")
    return namespaces, missing


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------


@dataclass
class Planned:
    """A case and where it goes in the tables."""

    row: Row
    side: str  # "zsharp_py", "nanobind", "pybind11"
    role: str  # "main", "alt" or "extra"
    variant: str  # the C++ build ("" for zsharp_py)
    case: MicroCase


def _setup_hook(setup: str, namespace: dict[str, Any]) -> Callable[[int], Any] | None:
    """The row's untimed setup, run before every batch with ``n`` bound."""
    if not setup:
        return None
    code = compile(setup, "<setup>", "exec")

    def before(count: int) -> None:
        namespace["n"] = count
        exec(code, namespace)  # noqa: S102 (the rows' own setup statements)

    return before


def _plan(
    zsharp: tuple[dict[str, Any], dict[str, str]] | None,
    peers: dict[tuple[str, str], dict[str, Any]],
) -> list[Planned]:
    planned: list[Planned] = []
    if zsharp is not None:
        ns, failed = zsharp
        runtime = ns["rt"]
        for row in ROWS:
            if any(member in failed for member in row.needs):
                continue
            forms = [("main", "", row.zs), *(("extra", label, stmt) for label, stmt in row.extra)]
            for role, label, stmt in forms:
                case = MicroCase(
                    label or "public API",
                    row.key,
                    stmt,
                    ns,
                    "zsharp_py",
                    primary=role == "main",
                    items=row.items,
                    before_batch=_setup_hook(row.setup, ns),
                    after_batch=runtime.collect_garbage,
                    after_batch_timed=True,
                )
                planned.append(Planned(row, "zsharp_py", role, "", case))
    for (library, variant), ns in peers.items():
        for row in ROWS:
            if variant == row.main:
                case = MicroCase(
                    row.bound,
                    row.key,
                    row.peer_stmt,
                    ns,
                    library,
                    items=row.items,
                    before_batch=_setup_hook(row.setup, ns),
                )
                planned.append(Planned(row, library, "main", variant, case))
            if row.alt is not None and variant == row.alt.variant:
                case = MicroCase(
                    row.alt.bound,
                    row.key,
                    row.alt.stmt,
                    ns,
                    library,
                    primary=False,
                    items=row.items,
                    before_batch=_setup_hook(row.alt.setup or row.setup, ns),
                )
                planned.append(Planned(row, library, "alt", variant, case))
    return planned


# ---------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------


@dataclass
class Outcome:
    """What a run measured, and what it could not."""

    results: dict[tuple[str, str, str], MicroResult] = field(default_factory=dict)
    """(row key, side, role) -> result (role "extra:<label>" for extra forms)."""
    unavailable: dict[tuple[str, str, str], str] = field(default_factory=dict)
    """(row key, side, role) -> why."""
    batches: dict[tuple[str, str, str], int] = field(default_factory=dict)
    overhead: float = 0.0
    failures: list[str] = field(default_factory=list)


def _slot(item: Planned) -> tuple[str, str, str]:
    role = item.role if item.role != "extra" else f"extra:{item.case.label}"
    return item.row.key, item.side, role


def run(config: Config) -> list[Table]:
    """Measure every row on every side, interleaved; a side-by-side table
    and the detail."""
    outcome = Outcome()
    side_missing: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        peers, side_missing = _load_peers(config)
        zsharp: tuple[dict[str, Any], dict[str, str]] | None = None
        try:
            zsharp = _zsharp_fixture(stack)
        except Unavailable as reason:
            side_missing["zsharp_py"] = f"unavailable: {reason}"
        except Exception as error:  # a young API: report, do not fail the run
            side_missing["zsharp_py"] = f"unavailable: setting up: {type(error).__name__}: {error}"
        if zsharp is not None:
            for row in ROWS:
                why = next((zsharp[1][m] for m in row.needs if m in zsharp[1]), None)
                if why is not None:
                    outcome.unavailable[(row.key, "zsharp_py", "main")] = f"unavailable: {why}"
        planned = _plan(zsharp, peers)
        kept: list[Planned] = []
        for item in planned:
            try:
                count = calibrate(item.case, config.value_batch_seconds)
            except Exception as error:  # the operation raises here: a note, not a crash
                outcome.unavailable[_slot(item)] = (
                    f"unavailable: {type(error).__name__}: {str(error)[:160]}"
                )
                continue
            item.case.scale = count / 1000
            outcome.batches[_slot(item)] = count
            kept.append(item)
        progress(
            config,
            f"{NAME}: {len(kept)} cases x {config.value_rounds} rounds x "
            f"~{config.value_batch_seconds * 1e3:g} ms",
        )
        results, overhead = run_micro([item.case for item in kept], 1000, config.value_rounds)
        outcome.overhead = overhead.median
        for item, result in zip(kept, results, strict=True):
            outcome.results[_slot(item)] = result
        outcome.failures += _check(zsharp[0] if zsharp is not None else None, peers)
    return _tables(config, outcome, side_missing)


def _check(
    zsharp: dict[str, Any] | None, peers: dict[tuple[str, str], dict[str, Any]]
) -> list[str]:
    """The invariants, on every side that was set up (members that failed to
    set up on zsharp_py's side are not checked)."""
    failures = []
    sides: list[tuple[str, dict[str, Any]]] = [
        (f"{lib} ({variant})", ns) for (lib, variant), ns in peers.items()
    ]
    if zsharp is not None:
        sides.insert(0, ("zsharp_py", zsharp))
    for side, ns in sides:
        for check in CHECKS:
            try:
                ok = eval(check, dict(ns))  # noqa: S307 (the checks above)
            except Exception as error:  # an unavailable member: not this check's business
                if side == "zsharp_py":
                    continue
                ok, check = False, f"{check} raised {error}"
            if not ok:
                failures.append(f"{NAME}: {side}: after the run, `{check}` is false")
    return failures


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------


def _cell(outcome: Outcome, slot: tuple[str, str, str], missing: str) -> str:
    result = outcome.results.get(slot)
    if result is not None:
        return fmt_ns(result.per_item())
    why = outcome.unavailable.get(slot) or missing
    return "unavailable" if why.startswith("unavailable") else (why or "-")


def _tables(config: Config, outcome: Outcome, side_missing: dict[str, str]) -> list[Table]:
    for row in ROWS:
        for side in ("zsharp_py", *LIBRARIES):
            result = outcome.results.get((row.key, side, "main"))
            why = outcome.unavailable.get((row.key, side, "main"))
            note = (
                f"{side}, {row.key}: {why}"
                if why
                else f"{side}: {side_missing[side]}"
                if side in side_missing
                else ""
            )
            value, rounds = result.recorded() if result else (None, None)
            record(f"values.{row.key}.{side}", value, note, rounds)
    side_table = Table(
        f"{TITLE}: side by side (net ns per operation)",
        [
            "kind",
            "operation",
            "zsharp_py",
            "nanobind",
            "pybind11",
            "zsharp_py / nanobind",
            "zsharp_py / pybind11",
            "peers bound as",
            "nanobind, other binding",
            "pybind11, other binding",
            "other binding",
        ],
        description=(
            "The same members in zsharp_py (`ValueActor`) and in C++ (`csrc/values.h`) bound "
            "by nanobind and pybind11. Each cell is the median net ns per operation (per "
            f"element where marked; the empty `timeit` loop, {fmt_ns(outcome.overhead, 2)} "
            "ns, subtracted) over interleaved batches. *nanobind* and *pybind11* are the "
            "build the row compares against (*peers bound as*): opaque containers for "
            "container methods, the STL casters for whole-value transfers; the *other "
            "binding* columns show the other build where it has an equivalent. Ratios are "
            "zsharp_py over the peer (below 1: zsharp_py is faster). Every zsharp_py batch "
            "ends with a timed `rt.collect_garbage()` (the safe point that frees what the "
            "batch dropped; an object created and dropped unshared is freed by the next "
            "creation already)."
        ),
    )
    for row in ROWS:
        ours = outcome.results.get((row.key, "zsharp_py", "main"))
        cells = [
            row.kind,
            row.title,
            _cell(outcome, (row.key, "zsharp_py", "main"), side_missing.get("zsharp_py", "")),
        ]
        ratios = []
        for library in LIBRARIES:
            cells.append(_cell(outcome, (row.key, library, "main"), side_missing.get(library, "")))
            theirs = outcome.results.get((row.key, library, "main"))
            ratios.append(fmt_result_ratio(ours, theirs))
        cells += ratios
        bound = row.bound + (f"; `{row.peer}`" if row.peer and row.peer not in row.bound else "")
        cells.append(bound)
        if row.alt is None:
            cells += ["-", "-", "-"]
        else:
            cells += [
                _cell(outcome, (row.key, library, "alt"), side_missing.get(library, ""))
                for library in LIBRARIES
            ]
            alt_stmt = f"; `{row.alt.stmt}`" if row.alt.stmt != row.peer_stmt else ""
            cells.append(row.alt.bound + (alt_stmt if row.alt.stmt not in row.alt.bound else ""))
        side_table.add(*cells)
    _summary_notes(side_table, outcome)
    if VERSIONS:
        side_table.notes.append(
            "versions: "
            + ", ".join(f"{lib} {version}" for lib, version in sorted(VERSIONS.items()))
            + "; C++ peers compiled with g++ -O2 -std=c++17, each twice "
            "(opaque containers, STL casters)"
        )
    side_table.notes += sorted({f"{who}: {why}" for who, why in side_missing.items()})
    side_table.notes += sorted(
        {
            f"{s}, {key}{'' if role == 'main' else f' ({role})'}: {why}"
            for (key, s, role), why in outcome.unavailable.items()
        }
    )
    side_table.failures += outcome.failures

    detail = Table(
        f"{TITLE}: every case",
        [
            "row",
            "case [side, build]",
            "code",
            "ops/batch",
            "ns/op",
            "p99",
            "max",
            "net ns (per element)",
            "main",
        ],
        description=(
            f"Median ns per operation over {config.value_rounds} interleaved batches, each "
            f"calibrated to about {config.value_batch_seconds * 1e3:g} ms (*ops/batch*), p99 "
            "and max over the batches, and the net figure (minus the empty loop) per "
            "element. *main*: the figure shown side by side. zsharp_py's batches include "
            "their `rt.collect_garbage()`."
        ),
    )
    order = {row.key: index for index, row in enumerate(ROWS)}
    sides = {"zsharp_py": 0, "nanobind": 1, "pybind11": 2}
    for (key, who, role), result in sorted(
        outcome.results.items(),
        key=lambda kv: (order[kv[0][0]], sides[kv[0][1]], kv[0][2] != "main", kv[0][2]),
    ):
        case = result.case
        build = "" if who == "zsharp_py" else f", {_variant(key, role)}"
        detail.add(
            key,
            f"{case.label} [{who}{build}]",
            f"`{case.stmt}`",
            f"{outcome.batches[(key, who, role)]:,}",
            fmt_ns(result.gross.median),
            fmt_ns(result.gross.p99),
            fmt_ns(result.gross.max),
            fmt_ns(result.per_item()),
            "yes" if role == "main" else "",
        )
    return [side_table, detail]


def _variant(key: str, role: str) -> str:
    """The C++ build a peer case of ``key`` ran in."""
    row = next(r for r in ROWS if r.key == key)
    if role == "alt" and row.alt is not None:
        return row.alt.variant
    return row.main


def _summary_notes(table: Table, outcome: Outcome) -> None:
    """The worst and median ratios (what the targets read), as notes."""
    for position, library in enumerate(LIBRARIES):
        ratios = []
        for row in ROWS:
            ours = outcome.results.get((row.key, "zsharp_py", "main"))
            theirs = outcome.results.get((row.key, library, "main"))
            if ours is not None and theirs is not None and theirs.per_item() > 0:
                ratios.append((result_ratio(ours, theirs), row.key))
        if ratios:
            worst = max(ratios)
            table.notes.insert(
                position,
                f"zsharp_py / {library} over {len(ratios)} rows: median "
                f"x{statistics.median(r for r, _ in ratios):.2f}, worst "
                f"x{worst[0]:.2f} ({worst[1]}), best x{min(ratios)[0]:.2f} "
                f"({min(ratios)[1]})",
            )
