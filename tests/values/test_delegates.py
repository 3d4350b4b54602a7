"""Delegates: zs.Delegate, zs.MulticastDelegate and zs.SparseDelegate.

Creation, binding kinds (callables, weak object bindings), broadcast order
and snapshot semantics, destroyed targets skipped and dropped, raising
listeners, red views writing through, clones, expiry, black values freed
exactly once, the runtime's callable table drained, sparse storage
allocated only while bound, delegates inside structs and containers."""

from __future__ import annotations

import builtins
import copy
import gc
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

import zsharp_py as zs
from helpers import assert_no_leaked_values, collect, runtime_ptr
from zsharp_py._base.ffi import lib


@pytest.fixture(autouse=True)
def no_leaks(request: pytest.FixtureRequest, rt: zs.Runtime) -> Iterator[None]:
    """After each passing test, every black value and every callable is gone."""
    failed = request.session.testsfailed
    yield
    if rt.closed or request.session.testsfailed != failed:
        return
    assert_no_leaked_values(rt)
    # Objects still alive in the test (rooted ones) may hold bindings.
    if rt.live_objects() == 0:
        assert rt.bound_callables() == 0


class Listener(zs.Object):
    """A target of object bindings."""

    calls: zs.Int32
    total: zs.Int64

    def hear(self, amount: int = 1) -> None:
        self.calls += 1
        self.total += amount

    def hear_2(self, amount: int = 1) -> None:  # a "_<digits>" suffix
        self.total += 100 * amount

    def double(self, value: int) -> int:
        return value * 2

    def boom(self, *args: Any) -> None:
        raise ValueError("listener failed")


class Emitter(zs.Object):
    on_hit: zs.MulticastDelegate
    on_done: zs.Delegate
    on_rare: zs.SparseDelegate
    score: zs.Int32


class Hooks(zs.Struct):
    before: zs.Delegate
    after: zs.MulticastDelegate
    rare: zs.SparseDelegate


def _warm_up(rt: zs.Runtime) -> None:
    """Register the types and make the runtime's one-off native blocks."""
    e = Emitter()
    e.on_hit.add(print)
    e.on_rare.add(print)
    e.on_done = print
    d = zs.Delegate(print)
    d.dispose()
    m = zs.MulticastDelegate([print])
    m.dispose()
    s = zs.SparseDelegate([print])
    s.dispose()
    Listener()
    collect(rt)
    assert rt.bound_callables() == 0


# ---- single-cast -----------------------------------------------------------------


def test_black_delegate_binds_executes_and_unbinds(rt: zs.Runtime) -> None:
    d = zs.Delegate()
    assert d.is_black and not d.is_expired and not d.is_bound
    assert d.target is None and d.to_python() is None
    assert d.execute_if_bound(1) is False
    with pytest.raises(RuntimeError, match="not bound"):
        d.execute()
    d.bind(lambda x, y=0: x + y)
    assert d.is_bound and callable(d.target)
    assert d.execute(2, y=3) == 5
    assert d.execute_if_bound(1) is True
    d.unbind()
    assert not d.is_bound
    d.dispose()
    d.dispose()  # a second dispose does nothing
    assert d.is_expired
    with pytest.raises(zs.ExpiredConjugateError):
        d.execute()


def test_delegate_created_bound_and_rebinding_replaces(rt: zs.Runtime) -> None:
    first = zs.Delegate(lambda: "first")
    assert first.execute() == "first"
    first.bind(lambda: "second")
    assert first.execute() == "second"
    assert rt.bound_callables() == 1  # the replaced callable was released
    first.dispose()


def test_object_binding_calls_the_method(rt: zs.Runtime) -> None:
    target = Listener()
    d = zs.Delegate(target, "double")
    assert d.target == (target, "double")
    assert d.execute(21) == 42
    d.bind(target.hear)  # a bound method of an object: a weak object binding
    assert d.target == (target, "hear")
    d.execute(5)
    assert (target.calls, target.total) == (1, 5)
    d.dispose()


def test_object_binding_is_weak_and_dropped_when_target_dies(rt: zs.Runtime) -> None:
    target = Listener()
    d = zs.Delegate(target, "hear")
    collect(rt)  # nothing keeps the listener alive: the binding is weak
    assert target.is_expired
    assert not d.is_bound
    assert d.execute_if_bound() is False
    with pytest.raises(RuntimeError, match="destroyed"):
        d.execute()
    assert d.target is None
    d.dispose()


def test_bind_errors(rt: zs.Runtime) -> None:
    target = Listener()
    d = zs.Delegate()
    with pytest.raises(AttributeError, match="no method 'missing'"):
        d.bind(target, "missing")
    with pytest.raises(TypeError, match="callable or"):
        d.bind(42)
    with pytest.raises(TypeError, match="method name"):
        d.bind(target)
    with pytest.raises(TypeError, match="method name must be a str"):
        d.bind(target, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="zs.Object"):
        d.bind("not an object", "upper")
    with zs.Runtime():
        stranger = Listener()
        with pytest.raises(ValueError, match="another runtime"):
            d.bind(stranger, "hear")
    assert not d.is_bound
    d.dispose()


def test_method_names_keep_number_suffix_and_case_is_folded(rt: zs.Runtime) -> None:
    target = Listener()
    d = zs.Delegate(target, "hear_2")
    d.execute(1)
    assert target.total == 100
    assert d.target == (target, "hear_2")
    # Names are interned case-insensitively (FName): the first spelling seen is kept.
    zs.Name("DOUBLE()")
    d.bind(target, "double")
    assert d.execute(4) == 8
    d.dispose()


def test_delegate_property_is_a_red_view_writing_through(rt: zs.Runtime) -> None:
    e = Emitter()
    view = e.on_done
    assert view.is_black is False
    assert e.on_done is view  # cached in the owner
    view.bind(lambda: "bound through a view")
    assert e.on_done.execute() == "bound through a view"
    e.on_done = lambda: "assigned"
    assert view.execute() == "assigned"
    black = zs.Delegate(lambda: "copied")
    e.on_done = black
    black.bind(lambda: "rebound black")  # the property holds a copy
    assert e.on_done.execute() == "copied"
    e.on_done = None
    assert not e.on_done.is_bound
    with pytest.raises(TypeError, match="Emitter.on_done"):
        e.on_done = 42
    black.dispose()


def test_clone_is_black_and_independent(rt: zs.Runtime) -> None:
    e = Emitter()
    e.on_done = lambda: 1
    clone = e.on_done.clone()
    assert clone.is_black and clone == e.on_done
    clone.bind(lambda: 2)
    assert (e.on_done.execute(), clone.execute()) == (1, 2)
    duplicate = copy.copy(clone)
    assert duplicate.is_black and duplicate.execute() == 2
    clone.dispose()
    assert duplicate.execute() == 2  # copies retain the callable
    duplicate.dispose()


def test_red_views_expire_with_owner_and_scope(rt: zs.Runtime) -> None:
    e = Emitter()
    with zs.scope():
        scoped = e.on_hit
    assert scoped.is_expired
    with pytest.raises(zs.ExpiredConjugateError, match="scope"):
        scoped.add(print)
    view = e.on_hit
    collect(rt)
    assert e.is_expired and view.is_expired
    with pytest.raises(zs.ExpiredConjugateError):
        view.broadcast()
    with pytest.raises(zs.ExpiredConjugateError):
        view.add(print)
    with pytest.raises(TypeError, match="red view"):
        Emitter().on_done.dispose()


def test_black_delegates_are_freed_exactly_once(rt: zs.Runtime) -> None:
    _warm_up(rt)
    blocks = rt.native_memory()["live_blocks"]
    values = rt.values_alive()
    kinds = [zs.Delegate(print), zs.MulticastDelegate([print, len]), zs.SparseDelegate([print])]
    assert rt.values_alive() == values + 3
    assert rt.bound_callables() == 4
    for value in kinds:
        value.dispose()
        value.dispose()
    assert rt.values_alive() == values
    # Finalised by Python: queued, freed at the next safe point.
    for _ in range(3):
        zs.MulticastDelegate([lambda: None]).clone()
    gc.collect()
    collect(rt)
    assert rt.values_alive() == values
    assert rt.bound_callables() == 0
    assert rt.native_memory()["live_blocks"] == blocks


# ---- multicast ---------------------------------------------------------------------


def test_multicast_broadcasts_in_order(rt: zs.Runtime) -> None:
    heard: list[str] = []
    m = zs.MulticastDelegate()
    assert m.is_black and not m.is_bound and len(m) == 0 and not m
    m.add(lambda x: heard.append(f"a{x}"))
    target = Listener()
    m.add(target, "hear")
    m += lambda x: heard.append(f"c{x}")
    assert len(m) == 3 and m.is_bound and m
    m.broadcast(7)
    assert heard == ["a7", "c7"] and target.total == 7
    assert m.to_python()[1] == (target, "hear")
    assert list(m)[1] == (target, "hear")
    m.dispose()


def test_multicast_add_remove_contains(rt: zs.Runtime) -> None:
    calls: list[str] = []

    def f(*args: Any) -> None:
        calls.append("f")

    def g(*args: Any) -> None:
        calls.append("g")

    target = Listener()
    m = zs.MulticastDelegate([f, g, f])
    assert f in m and (target, "hear") not in m and 42 not in m
    assert m.add_unique(f) is False
    assert m.add_unique(target, "hear") is True
    assert (target, "hear") in m and target.hear in m
    assert m.remove(f) is True  # the first match only
    assert m.to_python()[:2] == [g, f]
    m.broadcast()
    assert calls == ["g", "f"] and target.calls == 1
    m -= g
    assert m.remove(g) is False
    m.add(target, "double")
    assert m.remove_all(target) == 2
    assert m.to_python() == [f]
    m.clear()
    assert len(m) == 0 and not m.is_bound
    m.broadcast()  # nothing to call
    m.dispose()


def test_bound_methods_of_equal_callables_are_removed(rt: zs.Runtime) -> None:
    class Plain:
        def __init__(self) -> None:
            self.hits = 0

        def hit(self) -> None:
            self.hits += 1

    plain = Plain()
    m = zs.MulticastDelegate([plain.hit])
    assert plain.hit in m  # a new bound-method object, equal to the stored one
    assert m.remove(plain.hit) is True
    assert len(m) == 0
    m.dispose()


def test_multicast_skips_and_drops_destroyed_targets(rt: zs.Runtime) -> None:
    e = Emitter()
    e.add_to_root()
    doomed, kept = Listener(), Listener()
    kept.add_to_root()
    e.on_hit.add(doomed, "hear")
    e.on_hit.add(kept, "hear")
    e.on_hit.add(doomed, "boom")
    collect(rt)
    assert doomed.is_expired and not kept.is_expired
    assert len(e.on_hit) == 1  # dead bindings are not counted...
    e.on_hit.broadcast(3)  # ...never called (boom would raise)...
    assert kept.total == 3
    assert len(e.on_hit._raw()) == 1  # ...and dropped from native storage
    e.remove_from_root()
    kept.remove_from_root()


def test_bindings_to_an_object_a_host_destroyed_are_dead(rt: zs.Runtime) -> None:
    """A host destroys a bound object (zs_destroy_object) and no mark has
    nulled the bindings' weak handles since: they are stale, and count as
    gone for is_bound, len, truth and broadcast, of a single, a multicast
    and a sparse delegate, and still once a new object has taken the freed
    slot (same index, the next serial)."""
    e = Emitter()
    e.add_to_root()
    kept = Listener()
    kept.add_to_root()
    doomed = Listener()
    single = zs.Delegate(doomed, "hear")
    e.on_hit.add(doomed, "boom")  # would raise if it were called
    e.on_hit.add(kept, "hear")
    e.on_rare.add(doomed, "boom")
    stale = doomed.handle
    assert lib.zs_destroy_object(runtime_ptr(rt), stale) == 0
    assert doomed.is_expired

    def check() -> None:
        # What the test is about: the stale handle is still stored.
        assert stale in (raw[0] for raw in e.on_hit._raw())
        assert single._raw()[0][0] == stale
        assert not single.is_bound
        assert len(e.on_hit) == 1 and e.on_hit.is_bound and e.on_hit
        assert len(e.on_rare) == 0 and not e.on_rare.is_bound and not e.on_rare

    check()
    del doomed
    collect(rt)  # frees the slot; the delegates' handles are not traced to it
    newcomer = Listener()
    assert newcomer.handle & 0xFFFFFFFF == stale & 0xFFFFFFFF and newcomer.handle != stale
    check()
    e.on_hit.broadcast(2)
    assert kept.total == 2 and newcomer.calls == 0
    assert len(e.on_hit._raw()) == 1  # the dead binding was dropped
    assert single.execute_if_bound() is False and newcomer.calls == 0
    single.dispose()
    e.remove_from_root()
    kept.remove_from_root()


def test_target_destroyed_during_broadcast_is_not_called(rt: zs.Runtime) -> None:
    e = Emitter()
    e.add_to_root()
    victim = Listener()
    victim.add_to_root()

    def kill(*args: Any) -> None:
        victim.remove_from_root()
        victim.mark_as_garbage()
        collect(rt)

    e.on_hit.add(kill)
    e.on_hit.add(victim, "boom")  # would raise if it were called
    e.on_hit.broadcast()
    assert victim.is_expired
    assert e.on_hit.to_python() == [kill]
    e.remove_from_root()


def test_owner_collected_during_broadcast(rt: zs.Runtime) -> None:
    e = Emitter()
    e.add_to_root()
    heard: list[int] = []

    def release(*args: Any) -> None:
        e.remove_from_root()
        collect(rt)

    view = e.on_hit
    view.add(release)
    view.add(heard.append)
    view.broadcast(1)  # runs on the snapshot; the owner went away meanwhile
    assert heard == [1]
    assert e.is_expired and view.is_expired


def test_add_or_remove_during_broadcast_takes_effect_next_time(rt: zs.Runtime) -> None:
    heard: list[str] = []
    m = zs.MulticastDelegate()

    def late(*args: Any) -> None:
        heard.append("late")

    def second(*args: Any) -> None:
        heard.append("second")

    def first(*args: Any) -> None:
        heard.append("first")
        m.add(late)
        m.remove(second)

    m.add(first)
    m.add(second)
    m.broadcast()
    assert heard == ["first", "second"]  # a snapshot: second still ran, late did not
    heard.clear()
    m.remove(first)
    m.broadcast()
    assert heard == ["late"]
    m.dispose()


def test_a_raising_listener_does_not_stop_the_others(rt: zs.Runtime) -> None:
    heard: list[int] = []
    target = Listener()
    m = zs.MulticastDelegate([heard.append, (target, "boom"), lambda x: heard.append(x * 10)])
    with pytest.raises(ValueError, match="listener failed"):
        m.broadcast(2)
    assert heard == [2, 20]  # every listener ran exactly once
    assert len(m) == 3 and rt.bound_callables() == 2  # the delegate is unchanged
    heard.clear()
    m.remove(target, "boom")
    m.broadcast(1)
    assert heard == [1, 10]
    m.dispose()


def test_several_raising_listeners_raise_a_group(rt: zs.Runtime) -> None:
    def bad_type(*args: Any) -> None:
        raise TypeError("one")

    def bad_key(*args: Any) -> None:
        raise KeyError("two")

    heard: list[int] = []
    m = zs.MulticastDelegate([bad_type, heard.append, bad_key])
    group = getattr(builtins, "ExceptionGroup", zs.BroadcastErrors)  # Python 3.10: BroadcastErrors
    with pytest.raises(group) as info:
        m.broadcast(5)
    assert [type(e) for e in info.value.exceptions] == [TypeError, KeyError]
    assert heard == [5]
    m.dispose()


def test_keyboard_interrupt_stops_the_broadcast(rt: zs.Runtime) -> None:
    heard: list[str] = []

    def interrupt() -> None:
        raise KeyboardInterrupt

    m = zs.MulticastDelegate([lambda: heard.append("a"), interrupt, lambda: heard.append("c")])
    with pytest.raises(KeyboardInterrupt):
        m.broadcast()
    assert heard == ["a"]
    assert len(m) == 3
    m.dispose()


def test_single_delegate_error_propagates_and_keeps_the_binding(rt: zs.Runtime) -> None:
    target = Listener()
    d = zs.Delegate(target, "boom")
    with pytest.raises(ValueError, match="listener failed"):
        d.execute()
    assert d.is_bound and d.target == (target, "boom")
    d.dispose()


def test_listeners_run_in_a_scope(rt: zs.Runtime) -> None:
    class Place(zs.Struct):
        x: zs.Int32

    class Holder(zs.Object):
        where: Place

    holder = Holder()
    seen: list[Any] = []
    m = zs.MulticastDelegate([lambda: seen.append(holder.where)])
    m.broadcast()
    assert seen[0].is_expired  # the view obtained in the listener expired with its scope
    d = zs.Delegate(lambda: holder.where)
    assert d.execute().is_expired
    m.dispose()
    d.dispose()


# ---- the callable table ----------------------------------------------------------------


def test_callable_table_is_drained_when_bindings_go(rt: zs.Runtime) -> None:
    _warm_up(rt)

    class Token:
        def __call__(self, *args: Any) -> None:
            pass

    token = Token()
    watch = weakref.ref(token)
    e = Emitter()
    e.on_hit.add(token)
    e.on_rare.add(lambda: None)
    e.on_done = lambda: None
    held = zs.MulticastDelegate([token, token])
    assert rt.bound_callables() == 5
    clone = e.on_hit.clone()
    assert rt.bound_callables() == 5  # a copy retains the same ids
    e.on_hit.clear()
    assert rt.bound_callables() == 5  # the clone still holds the token's first id
    held.dispose()
    assert rt.bound_callables() == 3
    clone.dispose()
    assert rt.bound_callables() == 2
    del token
    gc.collect()
    assert watch() is None  # the runtime let go of the callable
    collect(rt)  # the emitter is collected: its bindings are released
    assert rt.bound_callables() == 0


def test_callable_ids_are_reused(rt: zs.Runtime) -> None:
    for _ in range(200):
        d = zs.Delegate(lambda: None)
        d.dispose()
    assert rt.bound_callables() == 0
    assert rt._callable_capacity <= 64  # ids were reused: the registry never grew


def test_closing_the_runtime_forgets_callables() -> None:
    runtime = zs.Runtime()
    with runtime:
        d = zs.MulticastDelegate([print])
        e = Emitter()
        e.on_hit.add(len)
        view = e.on_hit
    assert runtime.closed and d.is_expired and view.is_expired
    assert runtime._callable_count() == 0


# ---- sparse ------------------------------------------------------------------------------


def test_sparse_storage_exists_only_while_bound(rt: zs.Runtime) -> None:
    _warm_up(rt)
    e = Emitter()
    view = e.on_rare
    blocks = rt.native_memory()["live_blocks"]
    assert not view.is_allocated and not view.is_bound and len(view) == 0
    view.broadcast()
    assert rt.native_memory()["live_blocks"] == blocks
    view.add(print)
    assert view.is_allocated and view.is_bound
    assert rt.native_memory()["live_blocks"] == blocks + 2  # the list and its entries
    view.add(len)
    view.remove(print)
    assert view.is_allocated
    view.remove(len)
    assert not view.is_allocated
    assert rt.native_memory()["live_blocks"] == blocks
    view.add(print)
    view.clear()
    assert not view.is_allocated
    assert rt.native_memory()["live_blocks"] == blocks


def test_sparse_behaves_like_multicast(rt: zs.Runtime) -> None:
    heard: list[int] = []
    s = zs.SparseDelegate([heard.append])
    s += lambda x: heard.append(-x)
    s.broadcast(3)
    assert heard == [3, -3]
    clone = s.clone()
    assert clone.is_allocated and clone == s
    e = Emitter()
    e.on_rare = s  # native copy
    e.on_hit = s  # from a sparse to a multicast: rebuilt from the bindings
    assert e.on_hit.to_python() == s.to_python() == e.on_rare.to_python()
    empty = zs.SparseDelegate()
    assert not empty.is_allocated and empty.clone().is_allocated is False
    for value in (s, clone, empty):
        value.dispose()


# ---- as property, struct member and element ------------------------------------------


def test_multicast_property_assignment_is_all_or_nothing(rt: zs.Runtime) -> None:
    e = Emitter()
    e.on_hit = [print, len]
    assert e.on_hit.to_python() == [print, len]
    target = Listener()
    with pytest.raises(AttributeError, match="missing"):
        e.on_hit = [abs, (target, "missing")]
    assert e.on_hit.to_python() == [print, len]
    with pytest.raises(TypeError, match="iterable of bindings"):
        e.on_hit = print
    e.on_hit = None
    assert len(e.on_hit) == 0
    view = e.on_hit
    view += abs
    e.on_hit = view  # assigning a view to itself keeps it
    assert e.on_hit.to_python() == [abs]


def test_constructor_keywords_are_checked_before_allocation(rt: zs.Runtime) -> None:
    target = Listener()
    e = Emitter(on_hit=[print, (target, "hear")], on_done=len)
    assert e.on_hit.to_python() == [print, (target, "hear")]
    assert e.on_done.execute([1, 2]) == 2
    live = rt.live_objects()
    with pytest.raises(AttributeError, match="no method"):
        Emitter(on_hit=[(target, "nope")])
    with pytest.raises(TypeError):
        Emitter(on_done=5)
    assert rt.live_objects() == live


def test_delegates_in_a_black_struct(rt: zs.Runtime) -> None:
    heard: list[str] = []
    hooks = Hooks(before=lambda: heard.append("before"), after=[lambda: heard.append("after")])
    hooks.before.execute()
    hooks.after.broadcast()
    hooks.rare.add(lambda: heard.append("rare"))
    hooks.rare.broadcast()
    assert heard == ["before", "after", "rare"]
    assert rt.bound_callables() == 3
    copy_ = hooks.clone()
    hooks.dispose()
    assert rt.bound_callables() == 3  # the clone holds them
    copy_.dispose()
    assert rt.bound_callables() == 0


def test_delegates_as_container_elements(rt: zs.Runtime) -> None:
    heard: list[int] = []
    array = zs.Array[zs.MulticastDelegate]()
    array.append([heard.append])
    array.append([])
    array[1].add(lambda x: heard.append(x + 1))
    for delegate in array:
        delegate.broadcast(1)
    assert heard == [1, 2]
    first = array[0]
    array.insert(0, [])  # structure change: element views expire
    assert first.is_expired
    singles = zs.Map[zs.Name, zs.Delegate]({"double": lambda x: 2 * x})
    assert singles["double"].execute(4) == 8
    assert len(array.to_python()) == 3
    with pytest.raises(TypeError, match="not hashable"):
        zs.Set[zs.Delegate]()
    with pytest.raises(TypeError, match="not hashable"):
        zs.Map[zs.MulticastDelegate, zs.Int32]()
    array.dispose()
    singles.dispose()
    assert rt.bound_callables() == 0


def test_delegate_with_object_binding_does_not_keep_target_alive_in_black_value(
    rt: zs.Runtime,
) -> None:
    target = Listener()
    m = zs.MulticastDelegate([(target, "hear")])
    collect(rt)  # object bindings are weak even inside black values (roots)
    assert target.is_expired and len(m) == 0
    m.dispose()


def test_repr_and_equality(rt: zs.Runtime) -> None:
    m = zs.MulticastDelegate([print])
    n = zs.MulticastDelegate([print])
    assert m == n and m != zs.MulticastDelegate()
    assert "MulticastDelegate (black)" in repr(m) and "print" in repr(m)
    e = Emitter()
    assert "Delegate (red)" in repr(e.on_done)
    with pytest.raises(TypeError, match="unhashable"):
        hash(m)
    with pytest.raises(TypeError, match="pickled"):
        import pickle

        pickle.dumps(m)
    m.dispose()
    assert "expired" in repr(m)
    n.dispose()


def test_adding_a_delegate_adds_its_binding(rt: zs.Runtime) -> None:
    target = Listener()
    single = zs.Delegate(target, "hear")
    m = zs.MulticastDelegate()
    m.add(single)
    m += zs.Delegate(print)
    assert m.to_python() == [(target, "hear"), print]
    with pytest.raises(TypeError, match="not bound"):
        m.add(zs.Delegate())
    with pytest.raises(TypeError, match="not a binding"):
        m.add(zs.MulticastDelegate())
    other = zs.Delegate()
    other.bind(single)
    assert other.target == (target, "hear")
    e = Emitter(on_hit=[single])
    assert e.on_hit.to_python() == [(target, "hear")]
    gc.collect()  # the temporaries above are finalised and queued
    m.dispose()
    single.dispose()
    other.dispose()


class Defaults(zs.Object):
    on_ready: zs.MulticastDelegate = [print]
    handler: zs.Delegate = len


def test_delegate_property_defaults(rt: zs.Runtime) -> None:
    first, second = Defaults(), Defaults()
    assert first.on_ready.to_python() == [print] and first.handler.execute("abc") == 3
    first.on_ready.clear()
    assert second.on_ready.to_python() == [print]  # every object gets its own copy


def test_failed_native_allocation_leaves_delegates_consistent(rt: zs.Runtime) -> None:
    _warm_up(rt)
    m = zs.MulticastDelegate()
    sparse = zs.SparseDelegate()
    single = zs.Delegate(len)
    used = rt.native_memory()["live_bytes"]
    lib.zs_debug_set(runtime_ptr(rt), lib.ZS_DEBUG_ALLOC_LIMIT, used + 512)
    added = 0
    try:
        with pytest.raises(MemoryError):
            for _ in range(10_000):
                m.add(lambda: None)
                added += 1
        assert len(m) == added > 0
        with pytest.raises(MemoryError):
            for _ in range(10_000):
                sparse.add(print)
        with pytest.raises(MemoryError):
            m.clone()
    finally:
        lib.zs_debug_set(runtime_ptr(rt), lib.ZS_DEBUG_ALLOC_LIMIT, 0)
    # no id was leaked by the failed adds: every callable held is a stored binding
    assert rt.bound_callables() == added + len(sparse) + 1
    assert single.execute("still bound") == 11
    m.broadcast()
    for value in (m, sparse, single):
        value.dispose()
    assert rt.bound_callables() == 0


# ---- the C paths of execute, broadcast, add and remove ----------------------------------


def test_a_listener_disposing_its_delegate_mid_broadcast(rt: zs.Runtime) -> None:
    """The broadcast holds what it snapshotted: the delegate disposed (its
    native list freed) by the first listener still calls the second, once."""
    heard: list[str] = []
    m = zs.MulticastDelegate()
    m.add(lambda: (heard.append("first"), m.dispose()))
    m.add(lambda: heard.append("second"))
    m.broadcast()
    assert heard == ["first", "second"] and m.is_expired
    rt.collect_garbage()
    assert rt.bound_callables() == 0


def test_a_listener_dropping_the_last_reference_to_itself(rt: zs.Runtime) -> None:
    """A lambda held only by the delegate clears the delegate and forces the
    callable table to drain (a safe point) while it is still running."""
    heard: list[int] = []
    m = zs.MulticastDelegate()

    def make() -> Any:
        return lambda: (m.clear(), gc.collect(), zs.Array[zs.Int32](), heard.append(1))

    m.add(make())
    m.add(make())
    m.broadcast()
    assert heard == [1, 1] and len(m) == 0
    zs.Array[zs.Int32]()  # a safe point: the table drains
    assert rt.bound_callables() == 0
    m.dispose()


def test_execute_rebinding_itself(rt: zs.Runtime) -> None:
    """A callable that rebinds its delegate (dropping itself) finishes, and
    its result is returned."""
    d = zs.Delegate()
    d.bind(lambda: (d.bind(lambda: "second"), gc.collect(), "first")[2])
    assert d.execute() == "first"
    assert d.execute() == "second"
    d.dispose()


def test_remove_takes_the_first_equal_binding_even_before_an_identical_one(rt: zs.Runtime) -> None:
    """remove(f) removes the first binding equal to f: a callable object
    whose == says yes comes before f itself, and is the one removed."""

    class Agreeable:
        def __call__(self) -> None:
            pass

        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = object.__hash__

    def f() -> None:
        pass

    agreeable = Agreeable()
    m = zs.MulticastDelegate([agreeable, f])
    assert m.remove(f) is True
    assert m.to_python() == [f] and m.to_python()[0] is f
    assert m.remove(f) is True and m.remove(f) is False
    m.dispose()


def test_add_spellings_and_their_bindings(rt: zs.Runtime) -> None:
    """A function, a builtin, a callable object and a bound method of a
    plain Python object are callable bindings; a bound method of a
    zs.Object is an object binding (weak), as is (object, 'method')."""
    listener = Listener()

    class Plain:
        def method(self) -> None:
            pass

    plain = Plain()
    m = zs.MulticastDelegate()
    for binding in (print, len, plain.method, Listener.hear, listener.hear):
        m.add(binding)
    m.add(listener, "hear_2")
    bindings = m.to_python()
    assert bindings[:3] == [print, len, plain.method]
    assert bindings[3] is Listener.hear
    assert bindings[4] == (listener, "hear") and bindings[5] == (listener, "hear_2")
    assert m.remove(print) is True and print not in m  # a builtin: matched in Python
    m.dispose()


def test_call_scopes_nest_with_zs_scope_and_each_other(rt: zs.Runtime) -> None:
    """Views obtained in a delegate's call expire when it returns; a
    zs.scope() opened inside the call is innermost while open; a nested
    call's views expire when the nested call returns, the outer call's
    when it returns."""

    class Place(zs.Struct):
        x: zs.Int32

    class Holder(zs.Object):
        here: Place
        there: Place
        elsewhere: Place

    holder = Holder()
    seen: dict[str, Any] = {}

    def inner() -> None:
        seen["inner"] = holder.elsewhere

    nested = zs.Delegate(inner)

    def outer() -> None:
        with zs.scope():
            seen["in_scope"] = holder.here
        seen["scope_ended"] = seen["in_scope"].is_expired
        seen["after_scope"] = holder.there
        nested.execute()
        seen["inner_ended"] = seen["inner"].is_expired
        seen["outer_alive_after_inner"] = not seen["after_scope"].is_expired

    zs.Delegate(outer).execute()
    assert seen["scope_ended"] and seen["inner_ended"] and seen["outer_alive_after_inner"]
    assert seen["after_scope"].is_expired  # with the outer call
    kept = holder.here  # outside any scope: lives with its owner
    assert not kept.is_expired


def test_call_scopes_are_per_thread(rt: zs.Runtime) -> None:
    """A delegate called on another thread while this one is inside a call:
    each thread's views expire with its own call."""

    class Place(zs.Struct):
        x: zs.Int32

    class Holder(zs.Object):
        here: Place
        there: Place

    holder = Holder()
    holder.add_to_root()
    started, release = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def on_thread() -> None:
        def listen() -> None:
            seen["thread_view"] = holder.there
            started.set()
            release.wait(10)

        zs.Delegate(listen).execute()
        seen["thread_done"] = seen["thread_view"].is_expired

    def listen_here() -> None:
        worker = threading.Thread(target=on_thread)
        worker.start()
        started.wait(10)
        seen["main_view"] = holder.here
        seen["thread_view_alive_meanwhile"] = not seen["thread_view"].is_expired
        release.set()
        worker.join(10)
        seen["main_alive_after_thread"] = not seen["main_view"].is_expired

    with rt.activate():
        zs.Delegate(listen_here).execute()
    assert seen["thread_view_alive_meanwhile"] and seen["thread_done"]
    assert seen["main_alive_after_thread"] and seen["main_view"].is_expired


def test_call_scopes_close_out_of_order_across_threads(rt: zs.Runtime) -> None:
    """A thread's call ends while a newer call of another thread is still
    open (the open call scopes are one list for every thread): each view
    still goes to its own thread's innermost call and expires with it."""

    class Place(zs.Struct):
        x: zs.Int32

    class Holder(zs.Object):
        here: Place
        there: Place
        elsewhere: Place
        later: Place

    holder = Holder()
    holder.add_to_root()
    started, release, finished = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def on_thread() -> None:
        def listen() -> None:
            seen["thread_view"] = holder.there
            started.set()
            release.wait(10)

        zs.Delegate(listen).execute()  # ends while the main thread's newer call is open
        seen["thread_done"] = seen["thread_view"].is_expired
        finished.set()

    def nested() -> None:
        release.set()
        finished.wait(10)  # the thread's older call has closed meanwhile
        seen["nested_view"] = holder.elsewhere

    def listen_here() -> None:
        worker = threading.Thread(target=on_thread)
        worker.start()
        started.wait(10)
        zs.Delegate(nested).execute()
        seen["nested_done"] = seen["nested_view"].is_expired
        seen["outer_view"] = holder.later
        worker.join(10)
        seen["outer_alive_in_call"] = not seen["outer_view"].is_expired

    with rt.activate():
        zs.Delegate(listen_here).execute()
    assert seen["thread_done"] and seen["nested_done"] and seen["outer_alive_in_call"]
    assert seen["outer_view"].is_expired  # with the outer call


def test_zs_scope_ended_inside_a_call_leaves_views_to_the_call(rt: zs.Runtime) -> None:
    """A zs.scope() opened before a call and closed inside it (open_scope /
    close_scope need no with block): views obtained afterwards in the call
    belong to the call and expire when it returns."""

    class Place(zs.Struct):
        x: zs.Int32

    class Holder(zs.Object):
        here: Place
        there: Place

    from zsharp_py._model.values import close_scope, open_scope

    holder = Holder()
    token, views = open_scope()
    seen: dict[str, Any] = {}

    def listen() -> None:
        seen["in_scope"] = holder.here  # the call is innermost: newer than the scope
        close_scope(token, views)
        seen["after_scope"] = holder.there
        seen["alive_in_call"] = not seen["after_scope"].is_expired

    zs.Delegate(listen).execute()
    assert seen["alive_in_call"] and seen["after_scope"].is_expired
    assert seen["in_scope"].is_expired
