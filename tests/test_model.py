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
``mark_stack_limit=8``).

CI profile: ``max_examples=100``, ``stateful_step_count=40``.  For a long
run set the number of examples in the environment, e.g.::

    ZSHARP_MODEL_EXAMPLES=2000 python -m pytest -q tests/test_model.py

(``ZSHARP_MODEL_STEPS`` likewise sets the steps per example.)
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

import zsharp_py as zs
from zsharp_py.debug import GcStress
from zsharp_py import _values

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
    kind: str                      # "Node" or "Leaf"
    conj: Any                      # the conjugate, or None once Python dropped it
    weak: Any                      # zs.WeakObjectPtr, to find the object again
    first: Any                     # the first conjugate (kept to check expiry)
    outer: int | None = None
    alive: bool = True
    value: int = 0
    left: int | None = None
    right: int | None = None
    leaf: int | None = None        # Node.leaf / Leaf.node
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
    kind: str                      # "vec" or "arr"
    refs: list[int | None]
    x: int = 0
    disposed: bool = False


@dataclass
class View:
    view: Any
    owner: int
    kind: str                      # "pos" or "items"
    scope: int | None              # id of the scope it was obtained in


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
        self.strongs: list[tuple[Any, int, list[bool]]] = []   # (ptr, idx, [disposed])
        self.views: list[View] = []
        self.scopes: list[tuple[int, Any]] = []                 # (scope id, context manager)
        self.closed_scopes: set[int] = set()
        self.next_scope = 0
        self.touched: set[int] | None = None                    # during an incremental cycle

    # ------------------------------------------------------------------ helpers
    def conj(self, i: int | None) -> Any:
        if i is None:
            return None
        m = self.objs[i]
        if m.conj is not None:
            return m.conj
        return m.weak.get()

    def alive(self, kind: str | None = None, nongarbage: bool = False) -> list[int]:
        return [m.idx for m in self.objs if m.alive and (kind is None or m.kind == kind)
                and not (nongarbage and m.garbage)]

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

    def pick(self, data: st.DataObject, kind: str | None = None, nongarbage: bool = False,
             label: str = "obj") -> int:
        if self.touched is not None:
            nongarbage = True   # no garbage object is stored or rooted during a cycle
        return data.draw(st.sampled_from(self.alive(kind, nongarbage)), label=label)

    def pick_target(self, data: st.DataObject, kind: str = "Node") -> int | None:
        cands = self.alive(kind, nongarbage=self.touched is not None)
        return data.draw(st.one_of(st.none(), st.sampled_from(cands)) if cands else st.none(),
                         label="target")

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
            if c is None or c.is_expired:   # dying in a pending purge
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
        dissolved = {r for r, ms in clusters.items()
                     if any(objs[t].garbage for i in ms for t, _ in self.edges(objs[i]))}
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
                m.left, m.right, m.leaf, m.pos_other = k(m.left), k(m.right), k(m.leaf), k(m.pos_other)
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
                    for got, want in zip(items, m.items):
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
                    for g, want in zip(got, b.refs):
                        assert g is self.conj(want)
            for ptr, i, d in self.strongs:
                if d[0]:
                    assert ptr.is_expired
                else:
                    assert ptr.get() is self.conj(i)
        self.check_views()
        assert self.rt.live_objects() == len(self.alive())
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
                    f"object {m.idx} ({m.kind}): alive={actual}, model says {m.idx in expected}")
                m.alive = actual
        self.apply_kills()
        self.check_state()

    # ------------------------------------------------------------- mutations
    def do_create(self, data: st.DataObject) -> None:
        kind = data.draw(st.sampled_from(["Node", "Leaf"]), label="kind")
        outer = None
        if (self.alive(nongarbage=self.touched is not None)
                and data.draw(st.booleans(), label="with_outer")):
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
        # A write into a container barriers the whole container (every
        # element it holds), not just the new one: those may survive too.
        for e in self.objs[i].items:
            self.touch(e)

    def do_clear_items(self, data: st.DataObject) -> None:
        i = self.pick(data, "Node", label="owner")
        for e in self.objs[i].items:   # conservative: see do_append
            self.touch(e)
        self.conj(i).items.clear()
        self.objs[i].items.clear()

    def do_set_pos(self, data: st.DataObject) -> None:
        i = self.pick(data, "Node", label="owner")
        t = self.pick_target(data)
        x = data.draw(INT32, label="x")
        c = self.conj(i)
        if data.draw(st.booleans(), label="whole"):
            c.pos = {"x": x, "other": self.conj(t)}   # no temporary black value
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
        choice = data.draw(st.sampled_from(["vec", "arr", "clone_pos", "clone_items", "dispose"]),
                           label="black")
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
            ts = data.draw(st.lists(st.sampled_from(cands) if cands else st.none(), max_size=3),
                           label="elts")
            self.blacks.append(Black(zs.Array[Node]([self.conj(t) for t in ts]), "arr", list(ts)))
            for t in ts:
                self.touch(t)
        elif self.alive("Node", nongarbage=self.touched is not None):
            i = self.pick(data, "Node", label="src")
            m = self.objs[i]
            if self.touched is not None and any(
                    t is not None and self.objs[t].garbage for t in [m.pos_other, *m.items]):
                return   # no garbage object is stored during a cycle
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
        with zs.scope():   # no view of ours outlives the rule
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
        with zs.scope():   # no view of ours outlives the rule
            self.do_create(data)

    @precondition(lambda self: self.has())
    @rule(data=st.data())
    def set_ref(self, data: st.DataObject) -> None:
        with zs.scope():   # no view of ours outlives the rule
            self.do_set_ref(data)

    @precondition(lambda self: self.has("Node"))
    @rule(data=st.data())
    def append_item(self, data: st.DataObject) -> None:
        with zs.scope():   # no view of ours outlives the rule
            self.do_append(data)

    @precondition(lambda self: self.has("Node"))
    @rule(data=st.data())
    def clear_items(self, data: st.DataObject) -> None:
        with zs.scope():   # no view of ours outlives the rule
            self.do_clear_items(data)

    @precondition(lambda self: self.has("Node"))
    @rule(data=st.data())
    def set_pos(self, data: st.DataObject) -> None:
        with zs.scope():   # no view of ours outlives the rule
            self.do_set_pos(data)

    @precondition(lambda self: self.has())
    @rule(data=st.data())
    def set_value(self, data: st.DataObject) -> None:
        with zs.scope():   # no view of ours outlives the rule
            self.do_set_value(data)

    @precondition(lambda self: self.has("Node"))
    @rule(data=st.data())
    def set_weak(self, data: st.DataObject) -> None:
        with zs.scope():   # no view of ours outlives the rule
            self.do_set_weak(data)

    @precondition(lambda self: self.has())
    @rule(data=st.data())
    def root(self, data: st.DataObject) -> None:
        with zs.scope():   # no view of ours outlives the rule
            self.do_root(data)

    @precondition(lambda self: self.has())
    @rule(data=st.data())
    def strong(self, data: st.DataObject) -> None:
        with zs.scope():   # no view of ours outlives the rule
            self.do_strong(data)

    @rule(data=st.data())
    def black(self, data: st.DataObject) -> None:
        with zs.scope():   # no view of ours outlives the rule
            self.do_black(data)

    @precondition(lambda self: self.has())
    @rule(data=st.data())
    def drop_python_ref(self, data: st.DataObject) -> None:
        with zs.scope():   # no view of ours outlives the rule
            self.do_drop(data)

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
        for level, views in enumerate(lists):
            if any(held is view for held in views):
                return self.scopes[level][0]
        return None

    @rule()
    def full_collection(self) -> None:
        expected = self.reachable()
        self.rt.collect_garbage()
        self.verify()
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
        mutations = [self.do_create, self.do_set_ref, self.do_append, self.do_clear_items,
                     self.do_set_pos, self.do_set_value, self.do_set_weak, self.do_root,
                     self.do_strong, self.do_black, self.do_drop]
        done = False
        try:
            for _ in range(steps):
                if gc.phase == "marking" and data.draw(st.booleans(), label="mutate"):
                    action = data.draw(st.sampled_from(mutations), label="mutation")
                    needs = {self.do_create: None, self.do_black: None}
                    kind = "Node" if action in (self.do_append, self.do_clear_items,
                                                self.do_set_pos, self.do_set_weak) else ""
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
    STRESS = GcStress(check_marks=True, objects_per_step=1, poison_freed=True,
                         mark_stack_limit=8)


_SETTINGS = settings(max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow,
                                            HealthCheck.filter_too_much,
                                            HealthCheck.data_too_large],
                     print_blob=True)

TestModelPlain = ModelMachine.TestCase
TestModelPlain.settings = _SETTINGS
TestModelStress = StressModelMachine.TestCase
TestModelStress.settings = _SETTINGS


# ---- hostile values (FINDINGS.md, tests/test_hostile.py) --------------------------

class HookInt:
    """An integer through ``__index__``, which first runs ``hook`` (once)."""

    def __init__(self, value: int, hook: Any) -> None:
        self.value, self.hook = value, hook

    def __index__(self) -> int:
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()
        return self.value


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
    @rule(data=st.data(), action=st.sampled_from(["append", "clear", "pos", "collect"]),
          member=st.sampled_from(["value", "pos.x"]))
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
