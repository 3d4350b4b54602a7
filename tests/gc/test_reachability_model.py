"""Model-based random test of the public API (hypothesis.stateful).

A ``RuleBasedStateMachine`` drives a runtime through random sequences of
object creation (with and without an outer), reference stores (``left``,
``right``, ``leaf``, ``items``, ``pos.other``), weak pointers, scalar
writes, roots, strong pointers, ``mark_as_garbage``, clusters, scopes with
red views, black clones, full collections and incremental cycles with
mutations interleaved between their steps.  A pure-Python model computes
which objects must survive (roots, strong pointers and live black values are
roots; references are strong and killable; ``outer`` is strong and not
killable; weak pointers never keep alive; reaching one member of a live
cluster keeps the whole cluster) and the invariants are checked after every
collection and at teardown (see ``ModelMachine``).

The machine runs twice: on a plain runtime and on one with the collector's
stress switches (``check_marks``, ``objects_per_step=1``, ``poison_freed``,
``mark_stack_limit=8``). ``HostileModelMachine`` adds writes whose value's
conversion hook changes the heap first.

``EngineMachine`` (plain and stressed too) scripts a native host, the sample
engine: worlds spawn actors of the engine's class and of Python subclasses
with ``zs.state()`` and overrides of its events (which, called from C, run
the native default through ``super()``, destroy actors, mark them as
garbage, collect from Python or from native code, add components, replace
their state or raise); the rules tick the worlds (``zs_call_each`` in C),
destroy actors, call the engine's functions with valid, invalid and hostile
arguments, call events by name (``zs_call_function``), root, mark and
collect. Listeners bound to the engine's events (``World.on_tick``,
``Actor.on_damaged``), which the engine broadcasts from C
(``zs_delegate_broadcast``): plain callables that record, and actors'
methods that draw what to do as overrides do (destroy, collect, unbind or
bind listeners mid-broadcast, raise). Its model predicts which objects
survive, which conjugates are expired, what every tick calls, which
listeners each broadcast reaches, and that Python state lives exactly as
long as its object. The tick manager (``rt.ticks``) is driven too: actors
register tick functions in random groups, with intervals, enabled or not,
after random prerequisites (a cycle must be refused); the rules enable,
disable, regroup, re-time and unregister them, and run frames whose
overrides act as above; the model predicts each function's calls and
elapsed time, the prerequisite and group order of the overrides' calls,
the failures, and that a freed actor's functions are unregistered.

CI profile: ``max_examples=100``, ``stateful_step_count=40``.  For a long
run set the number of examples in the environment, e.g.::

    ZSHARP_MODEL_EXAMPLES=2000 python -m pytest -q tests/gc/test_reachability_model.py

(``ZSHARP_MODEL_STEPS`` likewise sets the steps per example.)
"""

from __future__ import annotations

import math
import os
import sys
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

import zsharp_py as zs
import zsharp_py.debug
from helpers import runtime_ptr
from zsharp_py import sample_engine
from zsharp_py._base.ffi import ffi, lib
from zsharp_py._model import values as _values
from zsharp_py.debug import GcStress

EXAMPLES = int(os.environ.get("ZSHARP_MODEL_EXAMPLES", "100"))
STEPS = int(os.environ.get("ZSHARP_MODEL_STEPS", "40"))


class Vec(zs.Struct):
    x: zs.Int32
    other: "Node | None"


class Node(zs.Object, cluster_root=True, can_be_in_cluster=True):
    value: zs.Int32
    left: "Node | None"
    right: "Node | None"
    leaf: "Leaf | None"
    weak: zs.WeakObjectPtr["Node"]
    items: zs.Array["Node"]
    pos: Vec


class Leaf(zs.Object):
    """Cannot join a cluster: a mutable object seen from one."""

    value: zs.Int32
    node: "Node | None"


INT32 = st.integers(-(2**31), 2**31 - 1)


@dataclass
class MObj:
    idx: int
    kind: str  # "Node" or "Leaf"
    conj: Any  # the conjugate, or None once Python dropped it
    weak: Any  # zs.WeakObjectPtr, to find the object again
    first: Any  # the first conjugate (kept to check expiry)
    outer: int | None = None
    alive: bool = True
    value: int = 0
    left: int | None = None
    right: int | None = None
    leaf: int | None = None  # Node.leaf / Leaf.node
    items: list[int | None] = field(default_factory=list)
    pos_x: int = 0
    pos_other: int | None = None
    weak_to: int | None = None
    rooted: bool = False
    garbage: bool = False

    def killable(self) -> list[int | None]:
        return [self.left, self.right, self.leaf, self.pos_other, *self.items]


@dataclass
class Black:
    value: Any
    kind: str  # "vec" or "arr"
    refs: list[int | None]
    x: int = 0
    disposed: bool = False


@dataclass
class Temp:
    """An object made and held by its conjugate alone (no weak pointer, no
    handle read): dropping that conjugate frees it at once."""

    kind: str
    conj: Any  # None once dropped
    value: int


@dataclass
class View:
    view: Any
    owner: int
    kind: str  # "pos" or "items"
    scope: int | None  # id of the scope it was obtained in


class ModelMachine(RuleBasedStateMachine):
    STRESS: GcStress | None = None

    def __init__(self) -> None:
        super().__init__()
        kwargs: dict[str, Any] = {"min_cluster_size": 2}
        if self.STRESS is not None:
            kwargs["stress"] = self.STRESS
        self.rt = zs.Runtime(**kwargs)
        self.rt.__enter__()
        self.objs: list[MObj] = []
        self.by_handle: dict[int, int] = {}
        self.blacks: list[Black] = []
        self.strongs: list[tuple[Any, int, list[bool]]] = []  # (ptr, idx, [disposed])
        self.views: list[View] = []
        self.temps: list[Temp] = []
        # Temporaries dropped since the last full collection: the next
        # creation frees those the C constructor made, but a class's first
        # object in a runtime comes from the Python constructor (never freed
        # at once), and an incremental cycle may or may not free them.
        self.dropped_pending = 0
        self.scopes: list[tuple[int, Any]] = []  # (scope id, context manager)
        self.closed_scopes: set[int] = set()
        self.next_scope = 0
        self.touched: set[int] | None = None  # during an incremental cycle

    # ------------------------------------------------------------------ helpers
    def conj(self, i: int | None) -> Any:
        if i is None:
            return None
        m = self.objs[i]
        if m.conj is not None:
            return m.conj
        return m.weak.get()

    def alive(self, kind: str | None = None, nongarbage: bool = False) -> list[int]:
        return [
            m.idx
            for m in self.objs
            if m.alive and (kind is None or m.kind == kind) and not (nongarbage and m.garbage)
        ]

    def touch(self, i: int | None) -> None:
        """During a cycle, ``i`` was stored, rooted or created: the barrier
        marks it, so it and everything it reaches now may survive."""
        if self.touched is not None and i is not None:
            self.touched |= self.closure([i])

    def closure(self, seeds: list[int]) -> set[int]:
        """Everything reachable from ``seeds`` through any reference (kills and
        cluster dissolution ignored; clusters expanded): an over-approximation."""
        clusters = self.clusters()
        member_of = {i: r for r, ms in clusters.items() for i in ms}
        seen: set[int] = set()
        stack = list(seeds)
        while stack:
            i = stack.pop()
            if i in seen or not self.objs[i].alive:
                continue
            seen.add(i)
            if i in member_of:
                stack.extend(clusters[member_of[i]])
            stack.extend(t for t, _ in self.edges(self.objs[i]))
        return seen

    def pick(
        self,
        data: st.DataObject,
        kind: str | None = None,
        nongarbage: bool = False,
        label: str = "obj",
    ) -> int:
        if self.touched is not None:
            nongarbage = True  # no garbage object is stored or rooted during a cycle
        return data.draw(st.sampled_from(self.alive(kind, nongarbage)), label=label)

    def pick_target(self, data: st.DataObject, kind: str = "Node") -> int | None:
        cands = self.alive(kind, nongarbage=self.touched is not None)
        return data.draw(
            st.one_of(st.none(), st.sampled_from(cands)) if cands else st.none(), label="target"
        )

    def has(self, kind: str | None = None) -> bool:
        return bool(self.alive(kind))

    def verify(self) -> None:
        self.rt.gc.verify()

    # ------------------------------------------------------------ reachability
    def clusters(self) -> dict[int, set[int]]:
        """Cluster root index -> member indices, as the runtime has them now."""
        out: dict[int, set[int]] = {}
        for i in self.alive("Node"):
            c = self.conj(i)
            if c is None or c.is_expired:  # dying in a pending purge
                continue
            info = c.cluster
            if info is not None:
                out.setdefault(self.by_handle[info.root.handle], set()).add(i)
        return out

    def edges(self, m: MObj) -> list[tuple[int, bool]]:
        out = [(t, True) for t in m.killable() if t is not None]
        if m.outer is not None:
            out.append((m.outer, False))
        return out

    def reachable(self, use_clusters: bool = True) -> set[int]:
        objs = self.objs
        member_of: dict[int, int] = {}
        clusters = self.clusters() if use_clusters else {}
        # A cluster whose member references a garbage object is dissolved at
        # the next cycle; so is every cluster that references a dissolved one.
        dissolved = {
            r
            for r, ms in clusters.items()
            if any(objs[t].garbage for i in ms for t, _ in self.edges(objs[i]))
        }
        for r, ms in clusters.items():
            for i in ms:
                member_of[i] = r
        changed = True
        while changed:
            changed = False
            for r, ms in clusters.items():
                if r in dissolved:
                    continue
                if any(member_of.get(t) in dissolved for i in ms for t, _ in self.edges(objs[i])):
                    dissolved.add(r)
                    changed = True
        stack = [m.idx for m in objs if m.alive and m.rooted]
        stack += [i for _, i, d in self.strongs if not d[0]]
        for b in self.blacks:
            if not b.disposed:
                stack += [t for t in b.refs if t is not None and not objs[t].garbage]
        seen: set[int] = set()
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            assert objs[i].alive, f"model: dead object {i} reached"
            r = member_of.get(i)
            if r is not None and r not in dissolved:
                stack.extend(clusters[r])
            for t, killable in self.edges(objs[i]):
                if killable and objs[t].garbage:
                    continue
                stack.append(t)
        return seen

    def apply_kills(self) -> None:
        """Killable references to garbage objects are nulled by a collection."""

        def k(t: int | None) -> int | None:
            if t is not None and self.objs[t].garbage:
                event("killable reference nulled")
                return None
            return t

        for m in self.objs:
            if m.alive:
                m.left, m.right, m.leaf, m.pos_other = (
                    k(m.left),
                    k(m.right),
                    k(m.leaf),
                    k(m.pos_other),
                )
                m.items = [k(t) for t in m.items]
        for b in self.blacks:
            if not b.disposed:
                b.refs = [k(t) for t in b.refs]

    # ------------------------------------------------------------------ checks
    def check_dead(self, m: MObj) -> None:
        assert m.weak.get() is None, f"object {m.idx} should be dead"
        for c in (m.conj, m.first):
            if c is not None:
                assert c.is_expired
                with pytest.raises(zs.ExpiredConjugateError):
                    c.value
                with pytest.raises(zs.ExpiredConjugateError):
                    c.add_to_root()

    def check_state(self) -> None:
        """Every live model object has its model values; every dead one is expired."""
        with zs.scope():
            for m in self.objs:
                if not m.alive:
                    self.check_dead(m)
                    continue
                c = self.conj(m.idx)
                assert c is not None and not c.is_expired, f"object {m.idx} should be alive"
                if m.conj is not None:
                    assert m.weak.get() is m.conj
                assert c.value == m.value
                assert c.is_rooted == m.rooted
                assert c.is_garbage == m.garbage
                assert (c.outer is self.conj(m.outer)) if m.outer is not None else c.outer is None
                if m.kind == "Node":
                    assert c.left is self.conj(m.left)
                    assert c.right is self.conj(m.right)
                    assert c.leaf is self.conj(m.leaf)
                    items = list(c.items)
                    assert len(items) == len(m.items)
                    for got, want in zip(items, m.items, strict=True):
                        assert got is self.conj(want)
                    assert c.pos.x == m.pos_x
                    assert c.pos.other is self.conj(m.pos_other)
                    w = self.objs[m.weak_to] if m.weak_to is not None else None
                    got_w = c.weak.get()
                    if w is None or not w.alive:
                        assert got_w is None
                    else:
                        assert got_w is self.conj(w.idx)
                else:
                    assert c.node is self.conj(m.leaf)
                for t in m.killable() + [m.outer]:
                    assert t is None or self.objs[t].alive, f"{m.idx} references dead {t}"
            for b in self.blacks:
                if b.disposed:
                    assert b.value.is_expired
                    continue
                assert not b.value.is_expired
                for t in b.refs:
                    assert t is None or self.objs[t].alive
                if b.kind == "vec":
                    assert b.value.x == b.x
                    assert b.value.other is self.conj(b.refs[0])
                else:
                    got = list(b.value)
                    assert len(got) == len(b.refs)
                    for g, want in zip(got, b.refs, strict=True):
                        assert g is self.conj(want)
            for ptr, i, d in self.strongs:
                if d[0]:
                    assert ptr.is_expired
                else:
                    assert ptr.get() is self.conj(i)
        self.check_views()
        # Temporaries' objects may still be there: held by a conjugate, or
        # dropped and not freed yet (see dropped_pending); after a full
        # collection, none.
        extra = self.rt.live_objects() - len(self.alive())
        assert 0 <= extra <= len(self.live_temps()) + self.dropped_pending
        assert self.rt.values_alive() == sum(1 for b in self.blacks if not b.disposed)

    def check_views(self) -> None:
        for v in self.views:
            if v.scope in self.closed_scopes or not self.objs[v.owner].alive:
                assert v.view.is_expired
                with pytest.raises(zs.ExpiredConjugateError):
                    (v.view.x if v.kind == "pos" else len(v.view))
            elif v.kind == "pos":
                assert not v.view.is_expired
                assert v.view.x == self.objs[v.owner].pos_x

    def after_full(self, expected: set[int]) -> None:
        if any(self.objs[i].garbage for i in expected):
            event("garbage object kept alive")
        if self.clusters():
            event("collection with a live cluster")
        for m in self.objs:
            if m.alive:
                actual = m.weak.get() is not None
                assert actual == (m.idx in expected), (
                    f"object {m.idx} ({m.kind}): alive={actual}, model says {m.idx in expected}"
                )
                m.alive = actual
        self.apply_kills()
        self.check_state()

    # ------------------------------------------------------------- mutations
    def do_create(self, data: st.DataObject) -> None:
        kind = data.draw(st.sampled_from(["Node", "Leaf"]), label="kind")
        outer = None
        if self.alive(nongarbage=self.touched is not None) and data.draw(
            st.booleans(), label="with_outer"
        ):
            outer = self.pick(data, label="outer")
        value = data.draw(INT32, label="value")
        cls = Node if kind == "Node" else Leaf
        obj = cls(outer=self.conj(outer), value=value) if outer is not None else cls(value=value)
        i = len(self.objs)
        self.objs.append(MObj(i, kind, obj, zs.WeakObjectPtr(obj), obj, outer=outer, value=value))
        self.by_handle[obj.handle] = i
        self.touch(i)
        self.touch(outer)
        self.verify()

    def do_set_ref(self, data: st.DataObject) -> None:
        i = self.pick(data, label="owner")
        m = self.objs[i]
        if m.kind == "Node":
            which = data.draw(st.sampled_from(["left", "right", "leaf"]), label="field")
        else:
            which = "leaf"
        t = self.pick_target(data, "Leaf" if (which == "leaf" and m.kind == "Node") else "Node")
        name = which if m.kind == "Node" else "node"
        setattr(self.conj(i), name, self.conj(t))
        setattr(m, which, t)
        self.touch(t)

    def do_append(self, data: st.DataObject) -> None:
        i = self.pick(data, "Node", label="owner")
        t = self.pick_target(data)
        self.conj(i).items.append(self.conj(t))
        self.objs[i].items.append(t)
        # The barrier sees the new element alone, not the rest of the
        # container (tests/gc/test_write_barrier_work.py): only it may survive.
        self.touch(t)

    def do_clear_items(self, data: st.DataObject) -> None:
        i = self.pick(data, "Node", label="owner")
        self.conj(i).items.clear()  # writes no reference: nothing passes the barrier
        self.objs[i].items.clear()

    def do_set_pos(self, data: st.DataObject) -> None:
        i = self.pick(data, "Node", label="owner")
        t = self.pick_target(data)
        x = data.draw(INT32, label="x")
        c = self.conj(i)
        if data.draw(st.booleans(), label="whole"):
            c.pos = {"x": x, "other": self.conj(t)}  # no temporary black value
        else:
            c.pos.other = self.conj(t)
            c.pos.x = x
        self.objs[i].pos_other = t
        self.objs[i].pos_x = x
        self.touch(t)

    def do_set_value(self, data: st.DataObject) -> None:
        i = self.pick(data, label="obj")
        v = data.draw(INT32, label="value")
        self.conj(i).value = v
        self.objs[i].value = v

    def do_set_weak(self, data: st.DataObject) -> None:
        i = self.pick(data, "Node", label="owner")
        t = self.pick_target(data)
        self.conj(i).weak = zs.WeakObjectPtr(self.conj(t)) if t is not None else None
        self.objs[i].weak_to = t

    def do_root(self, data: st.DataObject) -> None:
        i = self.pick(data, label="obj")
        if data.draw(st.booleans(), label="add"):
            self.conj(i).add_to_root()
            self.objs[i].rooted = True
            self.touch(i)
        else:
            self.conj(i).remove_from_root()
            self.objs[i].rooted = False

    def do_strong(self, data: st.DataObject) -> None:
        live = [k for k, (_, _, d) in enumerate(self.strongs) if not d[0]]
        if live and data.draw(st.booleans(), label="dispose"):
            k = data.draw(st.sampled_from(live), label="strong")
            self.strongs[k][0].dispose()
            self.strongs[k][2][0] = True
        else:
            i = self.pick(data, label="obj")
            self.strongs.append((zs.StrongObjectPtr(self.conj(i)), i, [False]))
            self.touch(i)

    def do_black(self, data: st.DataObject) -> None:
        live = [k for k, b in enumerate(self.blacks) if not b.disposed]
        choice = data.draw(
            st.sampled_from(["vec", "arr", "clone_pos", "clone_items", "dispose"]), label="black"
        )
        if choice == "dispose":
            if not live:
                return
            b = self.blacks[data.draw(st.sampled_from(live), label="which")]
            b.value.dispose()
            b.disposed = True
        elif choice == "vec":
            t = self.pick_target(data)
            x = data.draw(INT32, label="x")
            self.blacks.append(Black(Vec(x=x, other=self.conj(t)), "vec", [t], x))
            self.touch(t)
        elif choice == "arr":
            cands = self.alive("Node", nongarbage=self.touched is not None)
            ts = data.draw(
                st.lists(st.sampled_from(cands) if cands else st.none(), max_size=3), label="elts"
            )
            self.blacks.append(Black(zs.Array[Node]([self.conj(t) for t in ts]), "arr", list(ts)))
            for t in ts:
                self.touch(t)
        elif self.alive("Node", nongarbage=self.touched is not None):
            i = self.pick(data, "Node", label="src")
            m = self.objs[i]
            if self.touched is not None and any(
                t is not None and self.objs[t].garbage for t in [m.pos_other, *m.items]
            ):
                return  # no garbage object is stored during a cycle
            if choice == "clone_pos":
                self.blacks.append(Black(self.conj(i).pos.clone(), "vec", [m.pos_other], m.pos_x))
                self.touch(m.pos_other)
            else:
                self.blacks.append(Black(self.conj(i).items.clone(), "arr", list(m.items)))
                for t in m.items:
                    self.touch(t)

    def do_drop(self, data: st.DataObject) -> None:
        i = self.pick(data, label="obj")
        m = self.objs[i]
        m.conj = None
        if data.draw(st.booleans(), label="drop_first"):
            m.first = None

    def live_temps(self) -> list[int]:
        return [k for k, t in enumerate(self.temps) if t.conj is not None and not t.conj.is_expired]

    def do_make_temp(self, data: st.DataObject) -> None:
        kind = data.draw(st.sampled_from(["Node", "Leaf"]), label="kind")
        value = data.draw(INT32, label="value")
        cls = Node if kind == "Node" else Leaf
        self.temps.append(Temp(kind, cls(value=value), value))

    def do_drop_temp(self, data: st.DataObject) -> None:
        """Drop a temporary's only conjugate: its object is freed at the next
        creation (or by the collector), and nothing may notice but the count."""
        k = data.draw(st.sampled_from(self.live_temps()), label="temp")
        self.temps[k].conj = None
        self.dropped_pending += 1

    def do_share_temp(self, data: st.DataObject) -> None:
        """Give a temporary's handle out, then drop its conjugate and make
        another object (which frees the dropped sole objects): the object
        must live on, found again through what shared it."""
        k = data.draw(st.sampled_from(self.live_temps()), label="temp")
        temp = self.temps[k]
        obj, temp.conj = temp.conj, None
        holders = self.alive("Node", nongarbage=self.touched is not None)
        ways = ["weak", "ref", "item"] if temp.kind == "Node" else ["weak", "ref"]
        way = data.draw(st.sampled_from(ways if holders else ["weak"]), label="way")
        i = len(self.objs)
        if way == "weak":
            self.objs.append(MObj(i, temp.kind, obj, zs.WeakObjectPtr(obj), obj, value=temp.value))
        else:
            h = data.draw(st.sampled_from(holders), label="holder")
            holder = self.conj(h)
            if way == "ref":
                field_name = "left" if temp.kind == "Node" else "leaf"
                setattr(holder, field_name, obj)
            else:
                holder.items.append(obj)
            del obj  # the conjugate goes; the next creation flushes it
            self.do_make_temp(data)
            found = getattr(holder, field_name) if way == "ref" else holder.items[-1]
            assert found is not None and found.value == temp.value, "a shared object was freed"
            self.objs.append(
                MObj(i, temp.kind, found, zs.WeakObjectPtr(found), found, value=temp.value)
            )
            if way == "ref":
                setattr(self.objs[h], field_name, i)
            else:
                self.objs[h].items.append(i)  # the barrier sees i alone (touched below)
        self.by_handle[self.objs[i].weak.get().handle] = i
        self.touch(i)

    def new_obj(self, kind: str, outer: int | None = None, value: int = 0) -> int:
        cls = Node if kind == "Node" else Leaf
        obj = cls(outer=self.conj(outer), value=value) if outer is not None else cls(value=value)
        i = len(self.objs)
        self.objs.append(MObj(i, kind, obj, zs.WeakObjectPtr(obj), obj, outer=outer, value=value))
        self.by_handle[obj.handle] = i
        return i

    # ------------------------------------------------------------------ rules
    @initialize(n=st.integers(0, 5), rooted=st.booleans(), leaf=st.booleans())
    def build_chain(self, n: int, rooted: bool, leaf: bool) -> None:
        """A head Node and a chain of n Nodes (through ``left``, the head's
        ``items`` holding them all), so that clusters and kills have material."""
        with zs.scope():  # no view of ours outlives the rule
            self._build_chain(n, rooted, leaf)

    def _build_chain(self, n: int, rooted: bool, leaf: bool) -> None:
        head = self.new_obj("Node")
        prev = head
        for _ in range(n):
            i = self.new_obj("Node")
            self.conj(prev).left = self.conj(i)
            self.objs[prev].left = i
            self.conj(head).items.append(self.conj(i))
            self.objs[head].items.append(i)
            prev = i
        if leaf:
            j = self.new_obj("Leaf", outer=prev)
            self.conj(prev).leaf = self.conj(j)
            self.objs[prev].leaf = j
        if rooted:
            self.conj(head).add_to_root()
            self.objs[head].rooted = True
        self.verify()

    @rule(data=st.data())
    def create(self, data: st.DataObject) -> None:
        with zs.scope():  # no view of ours outlives the rule
            self.do_create(data)

    @precondition(lambda self: self.has())
    @rule(data=st.data())
    def set_ref(self, data: st.DataObject) -> None:
        with zs.scope():  # no view of ours outlives the rule
            self.do_set_ref(data)

    @precondition(lambda self: self.has("Node"))
    @rule(data=st.data())
    def append_item(self, data: st.DataObject) -> None:
        with zs.scope():  # no view of ours outlives the rule
            self.do_append(data)

    @precondition(lambda self: self.has("Node"))
    @rule(data=st.data())
    def clear_items(self, data: st.DataObject) -> None:
        with zs.scope():  # no view of ours outlives the rule
            self.do_clear_items(data)

    @precondition(lambda self: self.has("Node"))
    @rule(data=st.data())
    def set_pos(self, data: st.DataObject) -> None:
        with zs.scope():  # no view of ours outlives the rule
            self.do_set_pos(data)

    @precondition(lambda self: self.has())
    @rule(data=st.data())
    def set_value(self, data: st.DataObject) -> None:
        with zs.scope():  # no view of ours outlives the rule
            self.do_set_value(data)

    @precondition(lambda self: self.has("Node"))
    @rule(data=st.data())
    def set_weak(self, data: st.DataObject) -> None:
        with zs.scope():  # no view of ours outlives the rule
            self.do_set_weak(data)

    @precondition(lambda self: self.has())
    @rule(data=st.data())
    def root(self, data: st.DataObject) -> None:
        with zs.scope():  # no view of ours outlives the rule
            self.do_root(data)

    @precondition(lambda self: self.has())
    @rule(data=st.data())
    def strong(self, data: st.DataObject) -> None:
        with zs.scope():  # no view of ours outlives the rule
            self.do_strong(data)

    @rule(data=st.data())
    def black(self, data: st.DataObject) -> None:
        with zs.scope():  # no view of ours outlives the rule
            self.do_black(data)

    @precondition(lambda self: self.has())
    @rule(data=st.data())
    def drop_python_ref(self, data: st.DataObject) -> None:
        with zs.scope():  # no view of ours outlives the rule
            self.do_drop(data)

    @rule(data=st.data())
    def make_temp(self, data: st.DataObject) -> None:
        self.do_make_temp(data)

    @precondition(lambda self: bool(self.live_temps()))
    @rule(data=st.data())
    def drop_temp(self, data: st.DataObject) -> None:
        self.do_drop_temp(data)

    @precondition(lambda self: bool(self.live_temps()))
    @rule(data=st.data())
    def share_temp(self, data: st.DataObject) -> None:
        with zs.scope():  # no view of ours outlives the rule
            self.do_share_temp(data)

    @precondition(lambda self: self.has())
    @rule(data=st.data())
    def mark_as_garbage(self, data: st.DataObject) -> None:
        i = self.pick(data, label="obj")
        self.conj(i).mark_as_garbage()
        self.objs[i].garbage = True
        self.verify()

    @precondition(lambda self: self.has("Node"))
    @rule(data=st.data())
    def create_cluster(self, data: st.DataObject) -> None:
        assert self.rt.gc.phase in ("idle", "purging")
        i = self.pick(data, "Node", label="root")
        c = self.conj(i)
        if self.objs[i].garbage or c.cluster is not None:
            return
        size = c.create_cluster()
        assert size == 0 or size >= 2
        if size:
            event("cluster created")
            info = c.cluster
            assert info is not None and info.objects == size and info.root is c
            assert len(self.clusters()[i]) == size
        self.verify()

    @precondition(lambda self: self.has("Node"))
    @rule(data=st.data())
    def dissolve_cluster(self, data: st.DataObject) -> None:
        i = self.pick(data, "Node", label="obj")
        c = self.conj(i)
        if c.cluster is not None:
            c.dissolve_cluster()
            assert c.cluster is None
        self.verify()

    @rule()
    def open_scope(self) -> None:
        cm = zs.scope()
        cm.__enter__()
        self.scopes.append((self.next_scope, cm))
        self.next_scope += 1

    @precondition(lambda self: bool(self.scopes))
    @rule()
    def close_scope(self) -> None:
        sid, cm = self.scopes.pop()
        cm.__exit__(None, None, None)
        self.closed_scopes.add(sid)
        self.check_views()

    @precondition(lambda self: self.has("Node"))
    @rule(data=st.data(), kind=st.sampled_from(["pos", "items"]))
    def take_view(self, data: st.DataObject, kind: str) -> None:
        i = self.pick(data, "Node", label="owner")
        v = getattr(self.conj(i), kind)
        assert not v.is_black and not v.is_expired
        if not any(t.view is v for t in self.views):
            self.views.append(View(v, i, kind, self._scope_of(v)))

    def _scope_of(self, view: Any) -> int | None:
        """The model's id of the scope ``view`` was made in. A view is cached
        under its holder while it lives, so one made earlier (by another
        rule's temporary, kept alive by its scope) is returned again, and
        keeps the scope it was made in."""
        lists = _values._scopes.get()
        assert len(lists) == len(self.scopes)
        for level, (views, _serial) in enumerate(lists):
            if any(held is view for held in views):
                return self.scopes[level][0]
        return None

    @rule()
    def full_collection(self) -> None:
        expected = self.reachable()
        self.rt.collect_garbage()
        self.verify()
        self.dropped_pending = 0  # a full collection frees every unreachable object
        assert not self.live_temps()
        self.after_full(expected)

    @rule(data=st.data(), steps=st.integers(0, 8), budget=st.sampled_from([1e-6, 1e-5, 1e-4]))
    def incremental(self, data: st.DataObject, steps: int, budget: float) -> None:
        gc = self.rt.gc
        assert gc.phase == "idle"
        before = self.reachable()
        unreachable0 = set(self.alive()) - before
        self.touched = set()
        gc.start_incremental()
        self.verify()
        mutations = [
            self.do_create,
            self.do_set_ref,
            self.do_append,
            self.do_clear_items,
            self.do_set_pos,
            self.do_set_value,
            self.do_set_weak,
            self.do_root,
            self.do_strong,
            self.do_black,
            self.do_drop,
            self.do_make_temp,
            self.do_drop_temp,
            self.do_share_temp,
        ]
        done = False
        try:
            for _ in range(steps):
                if gc.phase == "marking" and data.draw(st.booleans(), label="mutate"):
                    action = data.draw(st.sampled_from(mutations), label="mutation")
                    needs = {self.do_create: None, self.do_black: None, self.do_make_temp: None}
                    if action in (self.do_drop_temp, self.do_share_temp) and not self.live_temps():
                        action = self.do_make_temp
                    kind = (
                        "Node"
                        if action
                        in (self.do_append, self.do_clear_items, self.do_set_pos, self.do_set_weak)
                        else ""
                    )
                    if action in needs or self.alive(kind or None, nongarbage=True):
                        event("mutation during an incremental mark")
                        with zs.scope():
                            action(data)
                done = gc.step(budget)
                self.verify()
                if done:
                    break
            doomed = unreachable0 - self.closure(list(self.touched))
            if not done and gc.phase in ("gathering", "purging"):
                # Marking is over: an object unreachable at the start (and
                # never stored since) is dying, and cannot be rooted again.
                for i in doomed:
                    c = self.objs[i].conj
                    if c is not None:
                        event("rooting a dying object refused")
                        with pytest.raises(zs.ExpiredConjugateError):
                            c.add_to_root()
            n = 0
            while not done:
                done = gc.step(1e-4)
                n += 1
                assert n < 1_000_000
            self.verify()
            assert gc.phase == "idle"
        finally:
            self.touched = None
        # (a) everything reachable now survived; (b) what was unreachable at
        # the start and never stored, rooted or referenced since is gone.
        lower = self.reachable(use_clusters=False)
        for m in self.objs:
            if not m.alive:
                continue
            actual = m.weak.get() is not None
            if m.idx in lower:
                assert actual, f"object {m.idx} reachable after the cycle but collected"
            if m.idx in doomed:
                assert not actual, f"object {m.idx} unreachable at the cycle start survived"
            if actual and m.idx not in lower:
                event("floating garbage survived an incremental cycle")
            m.alive = actual
        self.apply_kills()
        self.check_state()

    # --------------------------------------------------------------- teardown
    def teardown(self) -> None:
        try:
            while self.scopes:
                sid, cm = self.scopes.pop()
                cm.__exit__(None, None, None)
                self.closed_scopes.add(sid)
            if not self.rt.closed and self.rt.gc.phase == "idle":
                if self.temps:  # objects of temporaries: gone after a full collection
                    self.full_collection()
                    assert not self.live_temps()
                self.verify()
                assert self.rt.live_objects() == len(self.alive())
                assert self.rt.values_alive() == sum(1 for b in self.blacks if not b.disposed)
        finally:
            self.rt.__exit__(None, None, None)
        assert self.rt.closed
        for m in self.objs:
            assert m.weak.get() is None
            for c in (m.conj, m.first):
                if c is not None:
                    assert c.is_expired
                    with pytest.raises(zs.ExpiredConjugateError):
                        c.value
        for v in self.views:
            assert v.view.is_expired
        for b in self.blacks:
            assert b.value.is_expired
        for ptr, _, _ in self.strongs:
            assert ptr.is_expired


class StressModelMachine(ModelMachine):
    STRESS = GcStress(check_marks=True, objects_per_step=1, poison_freed=True, mark_stack_limit=8)


_SETTINGS = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
    print_blob=True,
)

TestModelPlain = ModelMachine.TestCase
TestModelPlain.settings = _SETTINGS
TestModelStress = StressModelMachine.TestCase
TestModelStress.settings = _SETTINGS


# ---- hostile values (FINDINGS.md, tests/hostile/test_hostile_conversions.py) ---------------------


class HookInt:
    """An integer through ``__index__`` (or a float through ``__float__``),
    which first runs ``hook`` (once)."""

    def __init__(self, value: int, hook: Any) -> None:
        self.value, self.hook = value, hook

    def __index__(self) -> int:
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()
        return self.value

    def __float__(self) -> float:
        return float(self.__index__())


class HostileModelMachine(ModelMachine):
    """The model, plus writes whose value's conversion hook changes the heap
    first: appends to or clears the owner's array (its storage moves), replaces
    the owner's struct, or runs a full collection (which may destroy the
    owner itself). The write then lands as the model says: converted first,
    then stored into the object as it is after the hook; a destroyed owner
    raises ExpiredConjugateError and nothing is written."""

    def _hostile(self, data: st.DataObject, i: int, action: str) -> None:
        if action == "append":
            self.do_append_to(data, i)
        elif action == "clear":
            for e in self.objs[i].items:
                self.touch(e)
            self.conj(i).items.clear()
            self.objs[i].items.clear()
        elif action == "pos":
            self.conj(i).pos = {"x": 5, "other": None}
            self.objs[i].pos_x, self.objs[i].pos_other = 5, None
        elif self.rt.gc.phase == "idle":
            expected = self.reachable()
            self.rt.collect_garbage()
            self.verify()
            self.after_full(expected)

    def do_append_to(self, data: st.DataObject, i: int) -> None:
        t = self.pick_target(data)
        self.conj(i).items.append(self.conj(t))
        self.objs[i].items.append(t)
        for e in self.objs[i].items:
            self.touch(e)

    @precondition(lambda self: self.has("Node"))
    @rule(
        data=st.data(),
        action=st.sampled_from(["append", "clear", "pos", "collect"]),
        member=st.sampled_from(["value", "pos.x"]),
    )
    def hostile_write(self, data: st.DataObject, action: str, member: str) -> None:
        i = self.pick(data, "Node", label="owner")
        x = data.draw(INT32, label="x")
        c = self.conj(i)
        holder = c.pos if member == "pos.x" else c
        name = "x" if member == "pos.x" else "value"
        value = HookInt(x, lambda: self._hostile(data, i, action))
        if action == "collect" and self.rt.gc.phase != "idle":
            return
        try:
            setattr(holder, name, value)
        except zs.ExpiredConjugateError:
            assert not self.objs[i].alive, "a live owner refused the write"
            return
        assert self.objs[i].alive, "a write into a destroyed owner succeeded"
        if member == "pos.x":
            self.objs[i].pos_x = x
        else:
            self.objs[i].value = x
        assert getattr(self.conj(i).pos if member == "pos.x" else self.conj(i), name) == x
        self.check_state()


TestModelHostile = HostileModelMachine.TestCase
TestModelHostile.settings = _SETTINGS


# ---- a native host: the sample engine (native functions, overrides, state) -------------


class Token:
    """A value kept in Python state (``zs.state()``), whose release the
    model watches through a weak reference."""

    def __init__(self, owner: Any = None) -> None:
        self.owner = owner  # sometimes the actor's own conjugate: a cycle through the state


class OverrideError(Exception):
    """Raised by an override on purpose: it goes to sys.unraisablehook."""


#: What an override does when the engine calls it (drawn at each call).
ACTIONS = (
    "super",
    "super",
    "destroy_other",
    "destroy_self",
    "garbage_other",
    "collect",
    "native_collect",
    "add_component",
    "state",
    "raise",
)


@dataclass(frozen=True)
class Ref:
    """An expected argument naming the model's object ``idx``: its handle,
    or None once it is gone (a listener reads an object freed earlier in the
    broadcast as None)."""

    idx: int


#: What an actor's listener method does when the engine broadcasts to it.
LISTENER_ACTIONS = (
    "none",
    "destroy_other",
    "destroy_self",
    "garbage_other",
    "collect",
    "native_collect",
    "unbind",
    "bind",
    "raise",
)


@dataclass
class EObj:
    """The model of one object of the engine: a World, an Actor (of the
    engine's class or of a Python subclass) or a Component."""

    idx: int
    handle: int
    kind: str  # "World", "Actor" or "Component"
    cls: str  # "World", "Actor", "Quiet", "Scripted", "Component"
    weak: Any
    conj: Any  # the conjugate while the model holds it
    first: Any  # the first conjugate (kept to check expiry), or None
    outer: int | None = None
    alive: bool = True
    garbage: bool = False
    rooted: bool = False
    # World
    actors: list[int | None] = field(default_factory=list)  # World.actors
    frame: int = 0
    # Actor
    world: int | None = None  # Actor.world
    components: list[int | None] = field(default_factory=list)
    health: int = 0
    alive_flag: bool = False  # Actor.alive
    ticks: int | None = 0  # None: not known (a tick whose order the model cannot tell)
    token: Any = None  # weakref.ref to the Token in the state, or None
    # Component
    owner: int | None = None
    # World.on_tick, Actor.on_damaged: ("record", listener id) or ("method", actor)
    listeners: list[tuple[str, int]] = field(default_factory=list)

    def edges(self) -> list[tuple[int, bool]]:
        """(target, killable) of every strong reference."""
        out = [(t, True) for t in (*self.actors, self.world, *self.components, self.owner)]
        if self.outer is not None:
            out.append((self.outer, False))
        return [(t, k) for t, k in out if t is not None]


@dataclass
class MTick:
    """The model of one tick function of ``rt.ticks``."""

    fn: Any  # the TickFunction
    actor: int
    group: int
    interval: float
    enabled: bool
    after: list[int]  # its prerequisites: indices of EngineMachine.tick_fns
    elapsed: float = 0.0
    calls: int = 0
    registered: bool = True


TICK_GROUPS = ("pre_physics", "during_physics", "post_physics", "post_update_work")


class EngineMachine(RuleBasedStateMachine):
    """The sample engine (zsharp_py.sample_engine) scripted from Python.

    Worlds spawn actors of the engine's ``Actor``, of ``Quiet`` (a Python
    subclass with state and no override) and of ``Scripted`` (a Python
    subclass whose ``begin_play``, ``tick`` and ``on_destroy`` overrides
    draw, at each call from native code, what to do: run the native default
    through ``super()``, destroy another actor or itself, mark one as
    garbage, collect (from Python or from native code), add a component,
    replace its state, or raise). The rules tick the worlds (``zs_call_each``
    from C), destroy actors, call the engine's functions with valid and
    invalid arguments (hostile ones too: an argument whose ``__float__``
    destroys the target or collects), call events by name from C
    (``zs_call_function``), root and mark as garbage, and collect fully,
    natively and incrementally. The model follows every effect as it
    happens (an override updates it when it acts), predicts which objects
    each collection keeps (roots; ``World.actors``, ``Actor.world``,
    ``Actor.components`` and ``Component.owner`` are killable references;
    ``outer`` is not), which actors a tick calls, their health, ticks and
    frames, and that Python state lives exactly as long as its object."""

    STRESS: GcStress | None = None

    def __init__(self) -> None:
        super().__init__()
        kwargs: dict[str, Any] = {}
        if self.STRESS is not None:
            kwargs["stress"] = self.STRESS
        self.rt = zs.Runtime(**kwargs)
        self.rt.__enter__()
        sample_engine.install()
        self.World = zs.native_class("World")
        Actor = self.Actor = zs.native_class("Actor")
        self.Components = [zs.native_class("Component"), zs.native_class("MovementComponent")]
        self.Transform = zs.native_struct("Transform")
        self.Vec3 = zs.native_struct("Vec3")
        machine = self

        class Quiet(Actor):  # type: ignore[misc,valid-type]
            token: Any = zs.state(default=None)

        class Scripted(Actor):  # type: ignore[misc,valid-type]
            token: Any = zs.state(default=None)
            bag: list[Any] = zs.state(factory=list)

            def begin_play(self) -> None:
                machine.event(self, "begin_play", ())

            def tick(self, dt):  # type: ignore[no-untyped-def]
                machine.event(self, "tick", (dt,))

            def on_destroy(self) -> None:
                machine.event(self, "on_destroy", ())

            def heard(self, *args: Any) -> None:  # a listener of the engine's events
                machine.event(self, "heard", args)

            def call_super(self, name: str, *args: Any) -> Any:
                return getattr(super(), name)(*args)

        self.classes: dict[str, Any] = {"Actor": Actor, "Quiet": Quiet, "Scripted": Scripted}
        self.objs: list[EObj] = []
        self.by_handle: dict[int, int] = {}
        self.data: st.DataObject | None = None  # the running rule's, for the overrides
        self.depth = 0
        self.spawning: int | None = None  # the world of a spawn in progress
        self.calls: list[tuple[int, str]] = []  # events that reached an override
        self.raised: list[tuple[int, str, int]] = []  # (actor, event, depth) that raised
        self.reports: list[tuple[type[BaseException], str]] = []
        self.tokens: list[tuple[Any, int]] = []  # (weakref to a token, owner)
        self.pending = False  # a native collection left its purge to Python
        self.tick_fns: list[MTick] = []  # rt.ticks' tick functions
        self.frames = 0  # rt.ticks.frame() calls
        self.heard: list[tuple[int, int, tuple[Any, ...]]] = []  # (owner, listener id, args)
        self.next_listener = 0
        self._saved_hook = sys.unraisablehook
        sys.unraisablehook = self._report
        # The model's overrides raise on purpose and it models the engine
        # going on: errors are reported, not raised by the call into the
        # host (that path: tests/interop/test_callback_errors.py).
        self._saved_raise = zsharp_py.debug.raise_callback_errors(False)

    def _report(self, args: Any) -> None:
        self.reports.append((args.exc_type, repr(args.exc_value)))
        if args.exc_value is not None:
            args.exc_value.__traceback__ = None  # no frame keeps a token alive

    # ------------------------------------------------------------------ helpers
    def conj(self, i: int | None) -> Any:
        if i is None:
            return None
        m = self.objs[i]
        return m.conj if m.conj is not None else m.weak.get()

    def alive(self, kind: str | None = None, nongarbage: bool = False) -> list[int]:
        return [
            m.idx
            for m in self.objs
            if m.alive and (kind is None or m.kind == kind) and not (nongarbage and m.garbage)
        ]

    def has(self, kind: str | None = None) -> bool:
        return bool(self.alive(kind))

    def draw(self, strategy: st.SearchStrategy[Any], label: str) -> Any:
        assert self.data is not None
        return self.data.draw(strategy, label=label)

    def pick(self, kind: str | None = None, label: str = "obj", nongarbage: bool = False) -> int:
        return self.draw(st.sampled_from(self.alive(kind, nongarbage)), label)

    def add(self, conj: Any, kind: str, cls: str, **fields: Any) -> int:
        i = len(self.objs)
        self.objs.append(
            EObj(i, conj.handle, kind, cls, zs.WeakObjectPtr(conj), conj, conj, **fields)
        )
        self.by_handle[conj.handle] = i
        return i

    def reachable(self) -> set[int]:
        stack = [m.idx for m in self.objs if m.alive and m.rooted]
        seen: set[int] = set()
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            assert self.objs[i].alive, f"model: dead object {i} reached"
            for t, killable in self.objs[i].edges():
                if not (killable and self.objs[t].garbage):
                    stack.append(t)
        return seen

    def collected(self, expected: set[int], settled: bool) -> None:
        """A collection ran: what it did not keep is dead (only dying until
        Python takes the expiring list when it ran from native code); every
        killable reference to a garbage object is nulled."""
        for m in self.objs:
            if m.alive and m.idx not in expected:
                m.alive = False
                event(f"engine: a {m.cls} collected")
        self.pending = not settled and self.rt.gc.phase == "purging"

        def k(t: int | None) -> int | None:
            return None if t is not None and self.objs[t].garbage else t

        for m in self.objs:
            if m.alive:
                m.actors = [k(t) for t in m.actors]
                m.components = [k(t) for t in m.components]
                m.world, m.owner = k(m.world), k(m.owner)

    def settle(self) -> None:
        """Finish a purge a native collection left to Python."""
        if self.rt.gc.phase == "purging":
            assert self.pending, "a purge is pending after a collection that finished"
            while not self.rt.gc.step(1e-3):
                pass
        self.pending = False
        assert self.rt.gc.phase == "idle"

    # ------------------------------------------------------------- the engine
    def do_collect(self, native: bool) -> None:
        if native:
            worlds = self.alive("World")
            if not worlds:
                return
            world = self.conj(self.pick("World", "collector"))
            # A native collection cannot begin while an earlier one's dying
            # objects wait for Python to expire their conjugates: it does
            # nothing then (ZS_E_EXPIRY_PENDING, which World.collect takes
            # as success).
            blocked = lib.zs_gc_expiring_count(runtime_ptr(self.rt)) > 0
            expected = self.reachable()
            world.collect()
            if blocked:
                event("engine: a native collection waited for Python")
                return
        else:
            expected = self.reachable()
            self.rt.collect_garbage()
        self.collected(expected, settled=not native)

    def do_destroy(self, w: int, a: int) -> None:
        """World w destroys actor a: on_destroy (an override may do
        anything), then out of w's actors, then a and its components are
        marked as garbage. A raising on_destroy makes destroy raise
        RuntimeError (after the actor is gone all the same)."""
        world, actor = self.conj(w), self.conj(a)
        depth = self.depth
        before = len(self.raised)
        try:
            world.destroy(actor)
            failed = False
        except RuntimeError as error:
            assert "raised an exception" in str(error)
            failed = True
        except zs.ExpiredConjugateError:
            # Only when destroyed in a nested call meanwhile: the actor died
            # during its own on_destroy (a collection there) - or it was dying.
            assert not self.objs[a].alive or not self.objs[w].alive
            return
        ran = any(e == (a, "on_destroy", depth) for e in self.raised[before:])
        assert failed == ran, f"destroy of {a}: raised {failed}, on_destroy raised {ran}"
        mw = self.objs[w]
        if mw.alive:
            mw.actors = [t for t in mw.actors if t is not None and t != a]
        ma = self.objs[a]
        if ma.alive:
            ma.garbage = True
            for c in ma.components:
                if c is not None and self.objs[c].alive:
                    self.objs[c].garbage = True

    def event(self, conj: Any, name: str, args: tuple[Any, ...]) -> None:
        """An override called from native code: the model follows."""
        i = self.by_handle.get(conj.handle)
        if i is None:  # the begin_play of an actor being spawned
            assert name == "begin_play" and self.spawning is not None
            w = self.spawning
            i = self.add(conj, "Actor", "Scripted", outer=w, world=w)
            self.objs[w].actors.append(i)
            self.spawning = None
        self.calls.append((i, name))
        listening = name == "heard"
        if self.data is None or self.depth >= 2:
            actions = ["none" if listening else "super"]
        else:
            choices = LISTENER_ACTIONS if listening else ACTIONS
            actions = self.draw(st.lists(st.sampled_from(choices), max_size=3), f"{name} does")
        self.depth += 1
        try:
            for action in actions:
                self.act(i, conj, name, args, action)
        finally:
            self.depth -= 1

    def act(self, i: int, conj: Any, name: str, args: tuple[Any, ...], action: str) -> None:
        m = self.objs[i]
        event(f"engine: {name} override does {action}")
        if action == "none":
            return
        if action == "unbind":  # an event's every listener, mid-broadcast or not
            owners = self.owners()
            if owners:
                o = self.pick_of(owners, "unbind from")
                self.delegate_of(o).clear()
                self.objs[o].listeners = []
            return
        if action == "bind":  # a new listener: called from the next broadcast on
            owners = self.owners()
            if owners:
                self.do_listen(self.pick_of(owners, "bind to"), None)
            return
        if action == "super":
            if not m.alive and name == "on_destroy":
                # No native default: nothing runs, refused only once expired.
                try:
                    conj.call_super(name, *args)
                except zs.ExpiredConjugateError:
                    assert conj.is_expired
                return
            if not m.alive:  # collected or dying: the native default is refused
                with pytest.raises(zs.ExpiredConjugateError):
                    conj.call_super(name, *args)
                return
            conj.call_super(name, *args)
            if name == "begin_play":
                m.health, m.alive_flag = 100, True
            elif name == "tick" and m.ticks is not None:
                m.ticks += 1
        elif action == "destroy_other" or action == "destroy_self":
            others = [a for a in self.alive("Actor") if a != i]
            a = (
                i
                if action == "destroy_self"
                else (self.pick_of(others, "victim") if others else None)
            )
            w = self.objs[a].world if a is not None else None
            if a is None or not self.objs[a].alive or w is None or not self.objs[w].alive:
                return
            self.do_destroy(w, a)
        elif action == "garbage_other":
            candidates = self.alive("Actor") + self.alive("Component")
            if not candidates:
                return
            j = self.pick_of(candidates, "garbage")
            self.conj(j).mark_as_garbage()
            self.objs[j].garbage = True
        elif action == "collect":
            self.do_collect(native=False)
        elif action == "native_collect":
            self.do_collect(native=True)
        elif action == "add_component":
            self.do_add_component(i, conj)
        elif action == "state":
            token = Token(conj if self.draw(st.booleans(), "cycle") else None)
            try:
                conj.token = token
            except zs.ExpiredConjugateError:
                assert not m.alive
                return
            m.token = weakref.ref(token)
            self.tokens.append((m.token, i))
        else:
            self.raised.append((i, name, self.depth - 1))
            raise OverrideError(f"{name} of {i}")

    def pick_of(self, candidates: list[int], label: str) -> int:
        return self.draw(st.sampled_from(candidates), label)

    def do_add_component(self, i: int, conj: Any) -> None:
        m = self.objs[i]
        cls = self.draw(st.sampled_from(self.Components), "component")
        if not m.alive:
            with pytest.raises(zs.ExpiredConjugateError):
                conj.add_component(cls)
            return
        made = conj.add_component(cls)
        assert type(made) is cls and made.owner is conj and made.enabled
        c = self.add(made, "Component", "Component", outer=i, owner=i)
        m.components.append(c)

    # --------------------------------------------------------------- listeners
    def owners(self) -> list[int]:
        """Worlds and actors whose event a listener may be bound to."""
        return self.alive("World") + self.alive("Actor")

    def delegate_of(self, owner: int) -> Any:
        """The owner's event: World.on_tick or Actor.on_damaged (a red view)."""
        conj = self.conj(owner)
        return conj.on_tick if self.objs[owner].kind == "World" else conj.on_damaged

    def do_listen(self, owner: int, actor: int | None) -> None:
        """Bind a listener to the owner's event: a callable that records
        (actor None), or that actor's ``heard`` method (an object binding)."""
        delegate = self.delegate_of(owner)
        if actor is None:
            lid = self.next_listener
            self.next_listener += 1

            def record(*args: Any) -> None:
                plain = tuple(a.handle if isinstance(a, zs.Object) else a for a in args)
                self.heard.append((owner, lid, plain))

            delegate.add(record)
            self.objs[owner].listeners.append(("record", lid))
        else:
            delegate.add(self.conj(actor).heard)
            self.objs[owner].listeners.append(("method", actor))

    def before_broadcast(self, owner: int) -> tuple[int, list[tuple[str, int]], int, int]:
        """What a broadcast of the owner's event must reach: its listeners now."""
        return owner, list(self.objs[owner].listeners), len(self.heard), len(self.calls)

    def check_broadcast(
        self, before: tuple[int, list[tuple[str, int]], int, int], args: tuple[Any, ...]
    ) -> None:
        """The broadcast that began after ``before`` reached every recording
        listener bound then, once, in bind order, with ``args`` (bindings
        made or removed by listeners count from the next broadcast), and
        every listener method of an actor still alive and not garbage (one
        that died first was skipped); none if the owner died before it."""
        owner, expected, heard_at, calls_at = before
        records = [lid for kind, lid in expected if kind == "record"]
        heard = [h for h in self.heard[heard_at:] if h[0] == owner]
        assert [h[1] for h in heard] == records or not heard, (heard, records)
        happened = bool(heard) or (bool(records) and self.objs[owner].alive)
        assert [h[1] for h in heard] == (records if happened else []), "a broadcast was lost"
        for h in heard:
            assert len(h[2]) == len(args), (h[2], args)
            for got, want in zip(h[2], args, strict=True):
                if isinstance(want, Ref):
                    gone = not self.objs[want.idx].alive
                    assert got == self.objs[want.idx].handle or (got is None and gone), (got, want)
                else:
                    assert got == want, (h[2], args)
        methods = Counter(a for kind, a in expected if kind == "method")
        reached = Counter(a for a, name in self.calls[calls_at:] if name == "heard")
        assert all(reached[a] <= n for a, n in methods.items()) and set(reached) <= set(methods)
        if happened:
            for a, n in methods.items():
                if self.objs[a].alive and not self.objs[a].garbage:
                    assert reached[a] == n, f"listener {a} was skipped while alive"
        if heard:
            event("engine: a broadcast reached recording listeners")
        if reached:
            event("engine: a broadcast reached actors' listener methods")
        if sum(reached.values()) < sum(methods.values()):
            event("engine: a broadcast skipped a listener method (its actor died first)")

    # ------------------------------------------------------------------ checks
    def check_state(self) -> None:
        self.settle()
        self.rt.gc.verify()
        with zs.scope():
            for m in self.objs:
                if not m.alive:
                    assert m.weak.get() is None, f"{m.cls} {m.idx} should be dead"
                    if m.first is not None:
                        assert m.first.is_expired
                        with pytest.raises(zs.ExpiredConjugateError):
                            m.first.add_to_root()
                        if m.cls in ("Quiet", "Scripted"):
                            with pytest.raises(zs.ExpiredConjugateError):
                                m.first.token
                    continue
                c = self.conj(m.idx)
                assert c is not None and not c.is_expired, f"{m.cls} {m.idx} should be alive"
                assert type(c) is self.cls_of(m)
                assert c.is_garbage == m.garbage and c.is_rooted == m.rooted
                assert (c.outer is self.conj(m.outer)) if m.outer is not None else c.outer is None
                if m.kind == "World":
                    assert list(c.actors) == [self.conj(t) for t in m.actors]
                    assert c.frame == m.frame
                elif m.kind == "Actor":
                    assert c.world is self.conj(m.world)
                    assert list(c.components) == [self.conj(t) for t in m.components]
                    assert (c.health, c.alive) == (m.health, m.alive_flag)
                    if m.ticks is None:
                        m.ticks = c.ticks
                    assert c.ticks == m.ticks
                    if m.cls != "Actor":
                        want = m.token() if m.token is not None else None
                        assert c.token is want
                else:
                    assert c.owner is self.conj(m.owner)
        for ref, owner in self.tokens:
            m = self.objs[owner]
            if not m.alive or m.token is not ref:
                assert ref() is None, f"a token of {owner} outlived its place in the state"
            else:
                assert ref() is not None
        self.tokens = [(r, o) for r, o in self.tokens if r() is not None]
        assert self.rt.live_objects() == len(self.alive())

    def cls_of(self, m: EObj) -> Any:
        if m.kind == "World":
            return self.World
        if m.kind == "Actor":
            return self.classes[m.cls]
        return type(m.first) if m.first is not None else type(m.weak.get())

    def check_reports(self, before: int) -> None:
        raised = self.raised[before:]
        assert [t for t, _ in self.reports] == [OverrideError] * len(raised), self.reports
        self.reports.clear()

    def run(self, data: st.DataObject, rule: Callable[[], None]) -> None:
        """Run a rule with the overrides drawing from its data, then check."""
        self.data = data
        before = len(self.raised)
        try:
            with zs.scope():
                rule()
        finally:
            self.data = None
        self.check_reports(before)
        self.check_state()

    # ------------------------------------------------------------------ rules
    @initialize()
    def first_world(self) -> None:
        self.do_new_world(rooted=True)  # (the root rule may unroot it)

    def do_new_world(self, rooted: bool) -> None:
        world = self.World()
        i = self.add(world, "World", "World")
        if rooted:
            world.add_to_root()
            self.objs[i].rooted = True

    @rule(rooted=st.booleans())
    def new_world(self, rooted: bool) -> None:
        self.do_new_world(rooted)

    @precondition(lambda self: self.has("World"))
    @rule(
        data=st.data(),
        classes=st.lists(
            st.sampled_from(["Actor", "Quiet", "Scripted", "Scripted"]), min_size=1, max_size=3
        ),
    )
    def spawn(self, data: st.DataObject, classes: list[str]) -> None:
        def go() -> None:
            for cls in classes:
                if self.has("World"):
                    self.do_spawn(self.pick("World", "world"), cls)

        self.run(data, go)

    def do_spawn(self, w: int, cls: str) -> None:
        """Spawn an actor of ``cls`` in world ``w``: begin_play runs first."""
        at = self.Transform(self.Vec3(1.0, 2.0, 3.0), 0.0, 1.0)
        self.spawning = w if cls == "Scripted" else None
        before = len(self.objs)
        got = self.conj(w).spawn(self.classes[cls], at)
        if cls != "Scripted":
            assert type(got) is self.classes[cls]
            i = self.add(got, "Actor", cls, outer=w, world=w, health=100, alive_flag=True)
            self.objs[w].actors.append(i)
            return
        assert self.spawning is None and len(self.objs) > before, "begin_play was not called"
        m = self.objs[before]
        if m.alive and not m.garbage:
            assert got is self.conj(before)
        elif not m.alive and self.pending and got is not None:
            # Collected natively in begin_play: dying, not yet expired
            # (Python takes the expiring list at its next collection).
            assert got is self.conj(before) or got.handle == m.handle
            event("engine: spawn returned a dying actor")
        else:
            assert got is None
            event("engine: spawn returned None (the actor died in begin_play)")

    @precondition(lambda self: self.has("World"))
    @rule(data=st.data(), dt=st.sampled_from([0.0, 0.5, 1.0, 1e-3]))
    def tick(self, data: st.DataObject, dt: float) -> None:
        def go() -> None:
            w = self.pick("World", "world")
            start = set(self.alive("Actor", nongarbage=True))
            plain = {a for a in start if self.objs[a].cls != "Scripted"}
            self.calls.clear()
            broadcast = self.before_broadcast(w)
            frame = self.objs[w].frame + 1  # counted before on_tick is broadcast
            called = self.conj(w).tick(dt)
            if self.objs[w].alive:
                self.objs[w].frame += 1
            self.check_broadcast(broadcast, (dt, frame))
            ticked = [a for a, name in self.calls if name == "tick"]
            assert len(ticked) == len(set(ticked)) and set(ticked) <= start, (ticked, start)
            kept = set(self.alive("Actor", nongarbage=True))
            for a in start - plain:
                if a in kept:
                    assert a in ticked, f"actor {a} was not ticked"
            sure = plain & kept
            for a in plain:  # the native default ran (or, if destroyed meanwhile, maybe)
                m = self.objs[a]
                if a in sure:
                    m.ticks = None if m.ticks is None else m.ticks + 1
                else:
                    m.ticks = None
            assert len(ticked) + len(sure) <= called <= len(ticked) + len(plain), called

        self.run(data, go)

    @precondition(lambda self: self.has("Actor"))
    @rule(data=st.data())
    def destroy(self, data: st.DataObject) -> None:
        def go() -> None:
            a = self.pick("Actor", "actor")
            worlds = self.alive("World")
            own = self.objs[a].world
            w = own if own is not None and self.draw(st.booleans(), "own world") else None
            if w is None:
                w = self.pick("World", "world") if worlds else None
            if w is None:
                return
            self.do_destroy(w, a)

        self.run(data, go)

    @precondition(lambda self: self.has("Actor"))
    @rule(data=st.data(), name=st.sampled_from(["tick", "begin_play", "on_destroy", "nope"]))
    def call_by_name(self, data: st.DataObject, name: str) -> None:
        """Native code calls an event by name (zs_call_function): a
        Scripted actor's override, or the engine's default."""

        def go() -> None:
            a = self.pick("Actor", "actor")
            m = self.objs[a]
            block = ffi.new("sample_actor_tick_params *", {"dt": 0.25})
            self.calls.clear()
            before = len(self.raised)
            status = lib.zs_call_function(runtime_ptr(self.rt), m.handle, name.encode(), block)
            if name == "nope":
                assert status == lib.ZS_E_INVALID
                assert [t for t, _ in self.reports] == [AttributeError]
                self.reports.clear()
                return
            failed = (a, name, 0) in self.raised[before:]
            assert status in (lib.ZS_OK, lib.ZS_E_CALL_FAILED)
            if m.cls != "Scripted":  # the engine's default (on_destroy has none)
                assert status == lib.ZS_OK and not self.calls
                if name == "tick" and m.ticks is not None:
                    m.ticks += 1
                elif name == "begin_play":
                    m.health, m.alive_flag = 100, True
            else:
                assert self.calls[0] == (a, name)
                assert (status == lib.ZS_E_CALL_FAILED) == failed

        self.run(data, go)

    @precondition(lambda self: self.has("Actor"))
    @rule(
        data=st.data(),
        function=st.sampled_from(
            ["take_damage", "heal", "move", "get_location", "add_component", "find", "version"]
        ),
        bad=st.sampled_from([None, None, "type", "range", "value", "expired", "count"]),
    )
    def call_function(self, data: st.DataObject, function: str, bad: str | None) -> None:
        """The engine's functions from Python (NativeFunction), with valid
        arguments or with ones that must raise; a refused call changes
        nothing."""

        def go() -> None:
            a = self.pick("Actor", "actor")
            m = self.objs[a]
            actor = self.conj(a)
            if bad == "expired":
                dead = [o.first for o in self.objs if not o.alive and o.first is not None]
                gone = self.draw(st.sampled_from(dead), "dead") if dead else None
                with pytest.raises(zs.ExpiredConjugateError):
                    if isinstance(gone, self.Actor):  # as self, or as an argument
                        gone.heal(1) if self.draw(st.booleans(), "self") else actor.take_damage(
                            1.0, gone
                        )
                    elif isinstance(gone, self.World):
                        gone.find(0)
                    else:
                        raise zs.ExpiredConjugateError("nothing dead to call")
                return
            if bad == "count":
                with pytest.raises(TypeError):
                    getattr(actor, function if hasattr(actor, function) else "heal")(1, 2, 3)
                return
            if function == "take_damage":
                if bad == "type":
                    with pytest.raises(TypeError):
                        actor.take_damage(self.draw(st.sampled_from(["1", None, [1]]), "x"), None)
                    return
                if bad in ("value", "range"):
                    amount = self.draw(st.sampled_from([-1.0, -1e-300, math.nan]), "amount")
                    with pytest.raises(ValueError):
                        actor.take_damage(amount, None)
                    return
                amount = self.draw(
                    st.floats(0, 1e3) | st.sampled_from([0.5, 1e300, math.inf]), "amount"
                )
                instigator = self.conj(
                    self.draw(st.sampled_from([None, *self.alive("Actor")]), "by")
                )
                by = Ref(self.by_handle[instigator.handle]) if instigator is not None else None
                broadcast = self.before_broadcast(a)
                left = actor.take_damage(amount, instigator)
                self.check_broadcast(broadcast, (Ref(a), amount, by))
                rest = m.health - amount
                m.health = int(rest) if rest > 0 else 0
                m.alive_flag = m.health > 0
                assert left == m.health
            elif function == "heal":
                if bad == "type":
                    with pytest.raises(TypeError):
                        actor.heal(self.draw(st.sampled_from([1.5, "1", None]), "x"))
                    return
                if bad == "range":
                    with pytest.raises(OverflowError):
                        actor.heal(self.draw(st.sampled_from([2**31, -(2**31) - 1, 2**64]), "x"))
                    return
                if bad == "value":
                    with pytest.raises(ValueError):
                        actor.heal(-1)
                    return
                amount = self.draw(st.integers(0, 2**31 - 1), "amount")
                healed = actor.heal(amount)
                room = 100 - m.health
                want = 0 if room <= 0 else min(room, amount)
                assert healed == want
                m.health += want
                m.alive_flag = m.health > 0
            elif function == "move":
                if bad is not None:
                    with pytest.raises((TypeError, ValueError)):
                        actor.move(self.draw(st.sampled_from([1, "v", (1.0, "y", 0.0)]), "v"))
                    return
                before = actor.get_location()
                actor.move(self.Vec3(1.0, 0.0, -1.0))
                after = actor.get_location()
                assert (after.x - before.x, after.z - before.z) == (1.0, -1.0) or math.isnan(
                    before.x
                )
            elif function == "get_location":
                loc = actor.get_location()
                assert loc.is_black
                loc.dispose()
            elif function == "add_component":
                if bad is not None:
                    with pytest.raises((TypeError, ValueError)):
                        actor.add_component(
                            self.draw(st.sampled_from([None, self.World, self.Actor, 5]), "cls")
                        )
                    return
                self.do_add_component(a, actor)
            elif function == "find":
                w = self.pick("World", "world") if self.has("World") else None
                if w is None:
                    return
                world = self.conj(w)
                if bad == "range":
                    with pytest.raises(OverflowError):
                        world.find(2**31)
                    return
                if bad is not None:
                    with pytest.raises(TypeError):
                        world.find("0")
                    return
                k = self.draw(st.integers(-1, 4), "index")
                listed = [t for t in self.objs[w].actors if t is not None]
                live = [t for t in listed if not self.objs[t].garbage]
                found = world.find(k)
                assert found is (self.conj(live[k]) if 0 <= k < len(live) else None)
            else:
                assert self.World.version() == 1

        self.run(data, go)

    @precondition(lambda self: self.has("Actor"))
    @rule(
        data=st.data(),
        hook=st.sampled_from(["collect", "destroy", "destroy_collect", "garbage", "nothing"]),
        function=st.sampled_from(["take_damage", "heal"]),
    )
    def hostile_call(self, data: st.DataObject, hook: str, function: str) -> None:
        """An argument whose conversion (``__float__``, ``__index__``) runs
        code first: a collection, the target's destruction (and then a
        collection), or marking it as garbage. Arguments are converted
        completely before the target is checked: a target that died raises
        ExpiredConjugateError, one that lives takes the call."""

        def go() -> None:
            a = self.pick("Actor", "actor")
            m = self.objs[a]
            actor = self.conj(a)

            def run_hook() -> None:
                if hook == "collect":
                    self.do_collect(native=False)
                elif hook in ("destroy", "destroy_collect"):
                    w = m.world
                    if m.alive and w is not None and self.objs[w].alive:
                        self.do_destroy(w, a)
                    if hook == "destroy_collect":
                        self.do_collect(native=False)
                elif hook == "garbage" and m.alive:
                    actor.mark_as_garbage()
                    m.garbage = True

            converted: list[bool] = []  # whether the target lived once converted

            def hook_then_note() -> None:
                run_hook()
                converted.append(m.alive)

            value = HookInt(7, hook_then_note)
            broadcast = self.before_broadcast(a)
            try:
                got = (
                    actor.take_damage(value, None)
                    if function == "take_damage"
                    else actor.heal(value)
                )
            except zs.ExpiredConjugateError:
                assert not m.alive, "a live target refused the call"
                event("engine: hostile argument killed the target")
                return
            assert converted == [True], "a call on a target that died during conversion succeeded"
            if function == "take_damage":  # on_damaged's listeners may act on anything
                self.check_broadcast(broadcast, (Ref(a), 7.0, None))
            if function == "take_damage":
                m.health = max(0, m.health - 7)
                assert got == m.health
            else:
                healed = max(0, min(100 - m.health, 7))
                assert got == healed
                m.health += healed
            m.alive_flag = m.health > 0

        self.run(data, go)

    @precondition(lambda self: any(self.objs[a].cls != "Actor" for a in self.alive("Actor")))
    @rule(data=st.data(), cycle=st.booleans())
    def set_state(self, data: st.DataObject, cycle: bool) -> None:
        def go() -> None:
            a = self.pick_of([a for a in self.alive("Actor") if self.objs[a].cls != "Actor"], "a")
            m = self.objs[a]
            actor = self.conj(a)
            if self.draw(st.booleans(), "delete") and m.token is not None:
                del actor.token  # back to the default
                m.token = None
                return
            token = Token(actor if cycle else None)
            actor.token = token
            m.token = weakref.ref(token)
            self.tokens.append((m.token, a))

        self.run(data, go)

    @precondition(lambda self: self.has("World") or self.has("Actor"))
    @rule(data=st.data(), method=st.booleans())
    def listen(self, data: st.DataObject, method: bool) -> None:
        """Bind a listener to a world's on_tick or an actor's on_damaged: a
        callable, or a Scripted actor's method (which acts when called)."""

        def go() -> None:
            scripted = [a for a in self.alive("Actor") if self.objs[a].cls == "Scripted"]
            if method and not scripted and self.has("World"):
                self.do_spawn(self.pick("World", "world"), "Scripted")
                scripted = [a for a in self.alive("Actor") if self.objs[a].cls == "Scripted"]
            if not self.owners():
                return
            owner = self.pick_of(self.owners(), "owner")
            actor = self.pick_of(scripted, "listener") if method and scripted else None
            self.do_listen(owner, actor)

        self.run(data, go)

    @precondition(lambda self: self.has())
    @rule(data=st.data(), add=st.booleans())
    def root(self, data: st.DataObject, add: bool) -> None:
        def go() -> None:
            i = self.pick(label="obj")
            if add:
                self.conj(i).add_to_root()
            else:
                self.conj(i).remove_from_root()
            self.objs[i].rooted = add

        self.run(data, go)

    @precondition(lambda self: self.has("Actor") or self.has("Component"))
    @rule(data=st.data())
    def mark_as_garbage(self, data: st.DataObject) -> None:
        def go() -> None:
            j = self.pick_of(self.alive("Actor") + self.alive("Component"), "obj")
            self.conj(j).mark_as_garbage()
            self.objs[j].garbage = True

        self.run(data, go)

    @precondition(lambda self: self.has())
    @rule(data=st.data(), first=st.booleans())
    def drop_python_ref(self, data: st.DataObject, first: bool) -> None:
        """Python forgets a conjugate: state lives on while the object does."""

        def go() -> None:
            m = self.objs[self.pick(label="obj")]
            m.conj = None
            if first:
                m.first = None

        self.run(data, go)

    @rule(data=st.data(), native=st.booleans())
    def full_collection(self, data: st.DataObject, native: bool) -> None:
        self.run(data, lambda: self.do_collect(native))

    @rule(data=st.data(), budget=st.sampled_from([1e-6, 1e-5, 1e-4]))
    def incremental(self, data: st.DataObject, budget: float) -> None:
        def go() -> None:
            gc_ = self.rt.gc
            expected = self.reachable()
            gc_.start_incremental()
            n = 0
            while not gc_.step(budget):
                self.rt.gc.verify()
                n += 1
                assert n < 1_000_000
            self.collected(expected, settled=True)

        self.run(data, go)

    # --------------------------------------------------------- the tick manager
    def drop_dead_ticks(self) -> None:
        """The tick functions of freed actors are unregistered (natively by
        the first call that names them: this one)."""
        for t in self.tick_fns:
            if t.registered and not self.objs[t.actor].alive:
                assert not t.fn.registered and t.fn.target is None
                t.registered = False

    def live_ticks(self) -> list[int]:
        return [i for i, t in enumerate(self.tick_fns) if t.registered]

    def tick_depends(self, start: int, target: int) -> bool:
        """Whether tick function ``start`` ticks after ``target``, through
        registered prerequisites."""
        stack, seen = [start], {start}
        while stack:
            for p in self.tick_fns[stack.pop()].after:
                if p == target:
                    return True
                if self.tick_fns[p].registered and p not in seen:
                    seen.add(p)
                    stack.append(p)
        return False

    def actual_group(self, i: int, memo: dict[int, int]) -> int:
        if i not in memo:
            t = self.tick_fns[i]
            memo[i] = max(
                [t.group]
                + [self.actual_group(p, memo) for p in t.after if self.tick_fns[p].registered]
            )
        return memo[i]

    @precondition(lambda self: self.has("Actor"))
    @rule(
        data=st.data(),
        group=st.integers(0, 3),
        interval=st.sampled_from([0.0, 0.0, 0.5, 1.0]),
        enabled=st.booleans(),
    )
    def register_tick(
        self, data: st.DataObject, group: int, interval: float, enabled: bool
    ) -> None:
        """An actor registers a tick function (refused when it is garbage)."""

        def go() -> None:
            self.drop_dead_ticks()
            a = self.pick("Actor", "ticked actor")
            live = self.live_ticks()
            after = (
                self.draw(st.lists(st.sampled_from(live), max_size=2, unique=True), "after")
                if live
                else []
            )
            options: dict[str, Any] = {
                "group": TICK_GROUPS[group],
                "interval": interval,
                "enabled": enabled,
                "after": [self.tick_fns[p].fn for p in after],
            }
            if self.objs[a].garbage:
                with pytest.raises(zs.ExpiredConjugateError):
                    self.rt.ticks.register(self.conj(a), **options)
                return
            fn = self.rt.ticks.register(self.conj(a), **options)
            self.tick_fns.append(MTick(fn, a, group, interval, enabled, list(after)))
            event("ticks: registered")

        self.run(data, go)

    @precondition(lambda self: any(t.registered for t in self.tick_fns))
    @rule(
        data=st.data(),
        what=st.sampled_from(
            ["enable", "disable", "interval", "group", "unregister", "after", "after", "before"]
        ),
    )
    def change_tick(self, data: st.DataObject, what: str) -> None:
        """Enable, disable, re-time, regroup or unregister a tick function,
        or add or remove a prerequisite (a cycle refused)."""

        def go() -> None:
            self.drop_dead_ticks()
            live = self.live_ticks()
            if not live:
                return
            i = self.pick_of(live, "tick function")
            t = self.tick_fns[i]
            if what in ("enable", "disable"):
                t.fn.enabled = t.enabled = what == "enable"
            elif what == "interval":
                t.interval = self.draw(st.sampled_from([0.0, 0.25, 0.5, 1.0]), "interval")
                t.fn.interval = t.interval
            elif what == "group":
                t.group = self.draw(st.integers(0, 3), "group")
                t.fn.group = TICK_GROUPS[t.group]
            elif what == "unregister":
                assert t.fn.unregister() is True
                assert t.fn.unregister() is False and not t.fn.registered
                t.registered = False
                return
            elif what == "after":
                j = self.pick_of(live, "prerequisite")
                if i == j or self.tick_depends(j, i):
                    event("ticks: a cycle refused")
                    with pytest.raises(ValueError, match="cycle"):
                        t.fn.add_prerequisite(self.tick_fns[j].fn)
                    return
                t.fn.add_prerequisite(self.tick_fns[j].fn)
                if j not in t.after:
                    t.after.append(j)
            else:
                present = [p for p in t.after if self.tick_fns[p].registered]
                if not present:
                    with pytest.raises(ValueError, match="not a prerequisite"):
                        t.fn.remove_prerequisite(self.tick_fns[i].fn)
                    return
                j = self.pick_of(present, "removed")
                t.fn.remove_prerequisite(self.tick_fns[j].fn)
                t.after.remove(j)
            assert t.fn.prerequisite_count == len(
                [p for p in t.after if self.tick_fns[p].registered]
            )

        self.run(data, go)

    @precondition(lambda self: bool(self.tick_fns))
    @rule(data=st.data(), dt=st.sampled_from([0.0, 0.25, 0.5, 1 / 60]))
    def tick_frame(self, data: st.DataObject, dt: float) -> None:
        """One frame of the tick manager: every sure function (its actor
        alive and not garbage before and after the frame) ticks exactly when
        its enabled time reaches its interval; the overrides' calls follow
        the groups and the prerequisites; failures are counted."""

        def go() -> None:
            self.drop_dead_ticks()
            live = self.live_ticks()
            start = {i for i in live if not self.objs[self.tick_fns[i].actor].garbage}
            memo: dict[int, int] = {}
            groups = {i: self.actual_group(i, memo) for i in live}
            self.calls.clear()
            before = len(self.raised)
            stats = self.rt.ticks.frame(dt)
            self.frames += 1
            assert stats.frame == self.frames
            failed = [e for e in self.raised[before:] if e[1] == "tick" and e[2] == 0]
            assert stats.failed == len(failed)
            kept = set(self.alive("Actor", nongarbage=True))
            for i in live:
                t = self.tick_fns[i]
                m = self.objs[t.actor]
                if not m.alive:
                    t.registered = False  # freed during the frame
                    continue
                calls, before_calls = t.fn.calls, t.calls
                assert t.fn.actual_group == TICK_GROUPS[groups[i]]
                if i in start and t.actor in kept:
                    if t.enabled:
                        t.elapsed += dt
                        if t.interval == 0 or t.elapsed >= t.interval * (1 - 1e-9):
                            t.calls += 1
                            t.elapsed = 0.0
                    assert calls == t.calls, (i, calls, t.calls)
                    assert t.fn.elapsed == t.elapsed
                    # the native default of an actor no override reaches
                    if m.cls != "Scripted" and m.ticks is not None:
                        m.ticks += t.calls - before_calls
                else:
                    assert calls in (t.calls, t.calls + 1)
                    t.calls, t.elapsed = calls, t.fn.elapsed
                    if m.cls != "Scripted":
                        m.ticks = None
            # order: the overrides' calls, each of an actor with one tick function
            single = {}
            for i in live:
                actor = self.tick_fns[i].actor
                single[actor] = None if actor in single else i
            seen = [single.get(a) for a, name in self.calls if name == "tick"]
            mapped = [i for i in seen if i is not None]
            position = {i: k for k, i in enumerate(mapped)}
            assert [groups[i] for i in mapped] == sorted(groups[i] for i in mapped)
            for i in mapped:
                for p in self.tick_fns[i].after:
                    if p in position:
                        assert position[p] < position[i], f"{i} ticked before its prerequisite {p}"
            event(f"ticks: a frame of {len(live)} functions")

        self.run(data, go)

    # --------------------------------------------------------------- teardown
    def teardown(self) -> None:
        try:
            if not self.rt.closed:
                self.settle()
                self.rt.gc.verify()
                assert self.rt.live_objects() == len(self.alive())
        finally:
            self.rt.__exit__(None, None, None)
            sys.unraisablehook = self._saved_hook
            zsharp_py.debug.raise_callback_errors(self._saved_raise)
        for m in self.objs:
            assert m.weak.get() is None
            if m.first is not None:
                assert m.first.is_expired
        for ref, _ in self.tokens:
            assert ref() is None, "Python state outlived its runtime"


class StressEngineMachine(EngineMachine):
    STRESS = GcStress(check_marks=True, objects_per_step=1, poison_freed=True, mark_stack_limit=8)


TestEnginePlain = EngineMachine.TestCase
TestEnginePlain.settings = _SETTINGS
TestEngineStress = StressEngineMachine.TestCase
TestEngineStress.settings = _SETTINGS
