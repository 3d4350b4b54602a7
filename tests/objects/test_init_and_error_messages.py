"""What a newcomer runs into first: ``__init__`` on native classes,
annotations refused where they are declared, errors that say how to fix
them, ``rt.activate()``, and messages that read well."""

# No ``from __future__ import annotations`` here: several tests annotate a
# class body with a local variable, which must be evaluated as written.
import threading
import typing
from typing import Any, Optional

import pytest

import zsharp_py as zs
from classes import Actor
from helpers import collect
from zsharp_py.collector import GcStats
from zsharp_py.debug import GcStress

# ---- 1. a user-defined __init__ --------------------------------------------


class WithInit(zs.Object):
    hp: zs.Int32 = 100
    bonus: zs.Int32
    seen: zs.Int32  # the hp __init__ found: declared defaults come first

    def __init__(self, hp: int, *, bonus: int = 0) -> None:
        super().__init__()
        self.seen = self.hp
        self.hp = hp + bonus
        self.bonus = bonus


class Recorder(zs.Object):
    calls: typing.ClassVar[list[tuple[tuple[Any, ...], dict[str, Any]]]] = []
    value: zs.Int32

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        Recorder.calls.append((args, kwargs))
        self.value = len(args) + len(kwargs)


class Grown(WithInit):
    """Inherits WithInit.__init__."""

    extra: zs.Int32 = 9


class Chained(WithInit):
    tag: zs.Int32

    def __init__(self, tag: int) -> None:
        super().__init__(tag * 10, bonus=1)
        self.tag = tag


class NoInit(zs.Object):
    hp: zs.Int32 = 5


def test_init_runs_with_positional_and_keyword_arguments(rt: zs.Runtime) -> None:
    unit = WithInit(7)
    assert (unit.hp, unit.bonus, unit.seen) == (7, 0, 100)
    boosted = WithInit(7, bonus=3)
    assert (boosted.hp, boosted.bonus) == (10, 3)
    with pytest.raises(TypeError, match="hp"):
        WithInit()  # __init__'s own signature applies


def test_init_runs_every_time_even_once_the_class_has_a_c_creator(rt: zs.Runtime) -> None:
    Recorder.calls.clear()
    first = Recorder()
    second = Recorder()  # the class is registered now: still not the C path
    third = Recorder(1, 2, key="x")
    assert Recorder.calls == [((), {}), ((), {}), ((1, 2), {"key": "x"})]
    assert (first.value, second.value, third.value) == (0, 0, 3)


def test_name_and_outer_are_the_librarys_and_not_passed_to_init(rt: zs.Runtime) -> None:
    Recorder.calls.clear()
    parent = Actor(name="Parent")
    child = Recorder(5, name="Child", outer=parent)
    assert Recorder.calls == [((5,), {})]
    assert child.name == "Child" and child.outer is parent
    named = WithInit(3, name="Hero")
    assert named.name == "Hero" and named.hp == 3


def test_properties_set_in_init_persist(rt: zs.Runtime) -> None:
    unit = WithInit(42, bonus=1)
    unit.add_to_root()
    collect(rt)
    assert not unit.is_expired
    assert (unit.hp, unit.bonus) == (43, 1)


def test_inherited_init_applies_to_subclasses(rt: zs.Runtime) -> None:
    grown = Grown(4, bonus=2)
    assert (grown.hp, grown.bonus, grown.extra, grown.seen) == (6, 2, 9, 100)
    chained = Chained(3)
    assert (chained.hp, chained.bonus, chained.tag) == (31, 1, 3)


def test_classes_without_init_keep_property_keywords_and_the_fast_path(rt: zs.Runtime) -> None:
    assert not NoInit._zs_python_init and not Actor._zs_python_init
    assert WithInit._zs_python_init and Grown._zs_python_init and Chained._zs_python_init
    plain = NoInit(hp=8, name="Plain")
    assert (plain.hp, plain.name) == (8, "Plain")
    with pytest.raises(TypeError, match="got an unknown property: nope"):
        NoInit(nope=1)


def test_object_init_accepts_no_arguments(rt: zs.Runtime) -> None:
    unit = NoInit()
    zs.Object.__init__(unit)  # what super().__init__() does: nothing
    assert unit.hp == 5
    with pytest.raises(TypeError, match=r"zs\.Object\.__init__\(\) takes no arguments"):
        zs.Object.__init__(unit, hp=3)
    with pytest.raises(TypeError, match=r"takes no arguments"):
        zs.Object.__init__(unit, "name")


class Failing(zs.Object):
    made: typing.ClassVar[list[zs.Object]] = []
    hp: zs.Int32

    def __init__(self, root: bool = False) -> None:
        self.hp = 5
        if root:
            self.add_to_root()
        Failing.made.append(self)
        raise ValueError("half-built")


@pytest.mark.parametrize("root", [False, True])
def test_a_failing_init_leaves_the_object_marked_as_garbage(rt: zs.Runtime, root: bool) -> None:
    keeper = Actor()
    keeper.add_to_root()
    Failing.made.clear()
    with pytest.raises(ValueError, match="half-built"):
        Failing(root)
    (half,) = Failing.made
    assert not half.is_expired and half.is_garbage and not half.is_rooted
    keeper.target = None
    collect(rt)
    assert half.is_expired
    assert "marked as garbage" in repr(half)
    assert rt.live_objects() == 1


class ReturnsValue(zs.Object):
    made: typing.ClassVar[list[zs.Object]] = []

    def __init__(self) -> None:
        ReturnsValue.made.append(self)
        return 3  # type: ignore[return-value]  # noqa: PLE0101 (the refusal under test)


def test_an_init_returning_a_value_is_refused_like_pythons(rt: zs.Runtime) -> None:
    ReturnsValue.made.clear()
    with pytest.raises(TypeError, match=r"__init__\(\) should return None, not 'int'"):
        ReturnsValue()
    assert ReturnsValue.made[0].is_garbage


class Collecting(zs.Object):
    child: "Actor | None"
    hp: zs.Int32

    def __init__(self) -> None:
        zs.current_runtime().collect_garbage()  # self is unreachable, but kept
        self.child = Actor(health=3)
        self.hp = 1


def test_the_object_survives_collections_while_its_init_runs(rt: zs.Runtime) -> None:
    made = Collecting()
    assert not made.is_expired and made.hp == 1 and made.child.health == 3
    collect(rt)  # once __init__ returned, nothing keeps it: a normal object
    assert made.is_expired


def test_init_under_a_collection_before_every_creation() -> None:
    with zs.Runtime(stress=GcStress(collect_every=1)) as stressed:
        made = Collecting()
        made.add_to_root()
        assert made.child.health == 3
        collect(stressed)
        assert not made.is_expired and made.child.health == 3


def test_init_assigned_or_deleted_after_declaration_applies(rt: zs.Runtime) -> None:
    class Late(zs.Object):
        hp: zs.Int32

    class LateChild(Late):
        pass

    assert Late(hp=2).hp == 2

    def init(self: Any, hp: int) -> None:
        self.hp = hp * 2

    Late.__init__ = init  # type: ignore[method-assign]
    assert Late._zs_python_init and LateChild._zs_python_init
    assert Late(4).hp == 8 and LateChild(5).hp == 10
    del Late.__init__
    assert not Late._zs_python_init and not LateChild._zs_python_init
    assert LateChild(hp=6).hp == 6


def test_a_user_new_is_refused_at_declaration() -> None:
    with pytest.raises(TypeError, match=r"WithNew: a native class cannot define __new__.*__init__"):

        class WithNew(zs.Object):
            def __new__(cls) -> Any:
                return super().__new__(cls)

    class Mixin:
        def __new__(cls, *args: Any) -> Any:
            return super().__new__(cls)

    with pytest.raises(TypeError, match=r"its base Mixin defines __new__.*__init__"):

        class Mixed(Mixin, zs.Object):
            pass

    with pytest.raises(TypeError, match="use __init__"):
        NoInit.__new__ = lambda cls: None  # type: ignore[assignment]


# ---- 2. annotations refused where they are declared ---------------------------------


class _Pair(zs.Struct):
    a: zs.Float64


@pytest.mark.parametrize(
    "annotation, shown, hint",
    [
        (list[int], "list[int]", "use zs.Array[zs.Int64] (or another zs type"),
        (list, "list", "use zs.Array[T] with zs element types, e.g. zs.Array[zs.Int32]"),
        (list[Actor], "list[Actor]", "use zs.Array[Actor]"),
        (typing.List[float], "list[float]", "use zs.Array[zs.Float64]"),  # noqa: UP006 (the input)
        (set[str], "set[str]", "use zs.Set[zs.String]"),
        (
            dict[str, int],
            "dict[str, int]",
            "use zs.Map[zs.String, zs.Int64] (or another zs type: see the type table)",
        ),
        (dict, "dict", "use zs.Map[K, V] with zs element types"),
        (
            dict[str, list[bool]],
            "dict[str, list[bool]]",
            "use zs.Map[zs.String, zs.Array[zs.Bool]]",
        ),
        (int | None, "int | None", "use zs.Optional[zs.Int64]"),
        (Optional[float], "float | None", "use zs.Optional[zs.Float64]"),  # noqa: UP045 (the input)
        (str | None, "str | None", "use zs.Optional[zs.String]"),
        (Optional[_Pair], "_Pair | None", "use zs.Optional[_Pair]"),  # noqa: UP045 (the input)
        (zs.Int32 | None, "zs.Int32 | None", "use zs.Optional[zs.Int32]"),
        (list[int] | None, "list[int] | None", "use zs.Array[zs.Int64] (an empty container"),
        (bytes, "bytes", "use zs.Array[zs.UInt8]"),
        (bytearray, "bytearray", "use zs.Array[zs.UInt8]"),
        (tuple[float, float], "tuple[float, float]", "use a zs.Struct subclass"),
        (tuple, "tuple", "use a zs.Struct subclass"),
        (object, "object", "native properties hold only zs types"),
        (Any, "typing.Any", "native properties hold only zs types"),
        (
            int | str,
            "int | str",
            "a property has exactly one zs type: the only union allowed is `Class | None`",
        ),
        ("dict[str, int]", "dict[str, int]", "use zs.Map[zs.String, zs.Int64]"),
        # Only what ``zsharp_py`` exports is shown as zs.X: a class of a
        # submodule keeps its own name.
        (GcStats, "GcStats", "native properties hold only zs types"),
        (list[GcStats], "list[GcStats]", "use zs.Array[T] with zs element types"),
    ],
)
def test_unsupported_annotations_are_refused_at_declaration(
    annotation: Any, shown: str, hint: str
) -> None:
    expected = f"Unit.scores: unsupported property type {shown}; {hint}"
    with pytest.raises(TypeError) as raised:

        class Unit(zs.Object):
            scores: annotation  # type: ignore[valid-type]

    assert str(raised.value).startswith(expected), str(raised.value)


def test_struct_members_are_refused_at_declaration_too() -> None:
    with pytest.raises(
        TypeError,
        match=r"Segment\.points: unsupported property type "
        r"list\[float\]; use zs\.Array\[zs\.Float64\]",
    ):

        class Segment(zs.Struct):
            points: list[float]


def test_a_string_annotation_is_resolved_with_the_class_in_scope() -> None:
    with pytest.raises(
        TypeError,
        match=r"Node\.children: unsupported property type "
        r"list\[Node\]; use zs\.Array\[Node\]",
    ):

        class Node(zs.Object):
            children: "list[Node]"


class _Early(zs.Object):
    other: "_Later | None"  # a forward reference: left for the first use
    friends: zs.Array["_Later"]
    weak: zs.WeakObjectPtr["_Later"]


class _Later(zs.Object):
    value: zs.Int32 = 4


def test_only_the_check_is_eager_forward_references_and_layouts_stay_lazy(rt: zs.Runtime) -> None:
    class Local(zs.Object):
        hp: zs.Int32
        other: "Local | None"

    class Dangling(zs.Object):
        other: "NoSuchClass | None"  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(TypeError, match="unsupported property type"):

        class Refused(Local):
            more: "dict[Local, int]"

    # Declaring checked the annotations, but laid nothing out.
    for cls in (_Early, _Later, Local, Dangling):
        assert "_zs_layout" not in cls.__dict__
    early = _Early(other=_Later())
    assert early.other.value == 4
    assert Local(other=Local(hp=1)).other.hp == 1
    with pytest.raises(TypeError, match="cannot resolve annotation"):
        Dangling()  # a name never declared: still an error at first use


# ---- 3. errors that say how to fix ----------------------------------------------------


def test_only_an_unreachable_objects_error_says_how_to_keep_one_alive() -> None:
    with zs.Runtime() as runtime:
        stray = Actor(name="Stray")
        doomed = Actor(name="Doomed")
        doomed.add_to_root()
        doomed.mark_as_garbage()
        doomed.remove_from_root()
        kept = Actor(name="Kept")
        kept.add_to_root()
        collect(runtime)
        with pytest.raises(zs.ExpiredConjugateError) as unreachable:
            stray.health
        with pytest.raises(zs.ExpiredConjugateError) as garbage:
            doomed.health
    with pytest.raises(zs.ExpiredConjugateError) as closed:
        kept.health
    assert str(unreachable.value) == (
        "Actor 'Stray' has expired: it was unreachable and the garbage collector destroyed "
        "it (keep an object alive with obj.add_to_root(), a reference from a rooted object, "
        "or zs.StrongObjectPtr(obj))"
    )
    assert "add_to_root" not in repr(stray)  # the repr stays compact
    assert str(garbage.value) == (
        "Actor 'Doomed' has expired: it was marked as garbage and "
        "the garbage collector destroyed it"
    )
    assert str(closed.value) == "Actor 'Kept' has expired: its runtime was closed"


class _Vec(zs.Struct):
    x: zs.Float64
    speed: zs.Float64


class _Ship(zs.Object):
    health: zs.Int32 = 10
    where: _Vec


@pytest.mark.parametrize(
    "value, declared",
    [
        ({}, "zs.Map[zs.Name, zs.Int32]"),
        ({"a": 1.5}, "zs.Map[zs.String, zs.Float64]"),
        (5, "zs.Int64"),
        (2.5, "zs.Float64"),
        (True, "zs.Bool"),
        ("text", "zs.String"),
        ([1, 2], "zs.Array[zs.Int64]"),
        ({"x"}, "zs.Set[zs.String]"),
        (b"raw", "zs.Array[zs.UInt8]"),
    ],
)
def test_an_undeclared_attribute_says_to_declare_it(
    rt: zs.Runtime, value: Any, declared: str
) -> None:
    ship = _Ship()
    with pytest.raises(AttributeError) as raised:
        ship.cache = value
    message = str(raised.value)
    zs_type = (
        "'_Ship' object has no attribute 'cache': native objects hold only their declared "
        f"properties; declare it in the class body with a zs type (e.g. `cache: {declared}`)."
    )
    assert message.startswith(zs_type)
    if isinstance(value, (dict, list, set)):  # or Python state (zs.state())
        kind = type(value).__name__
        assert message[len(zs_type) :] == (
            " Or, for a plain Python value the collector does not trace, declare Python "
            f"state (e.g. `cache: {kind} = zs.state(factory={kind})`)."
        )
    else:
        assert message == zs_type
    assert raised.value.name == "cache" and raised.value.obj is ship


@pytest.mark.parametrize(
    ("value", "annotation", "declaration"),
    [
        (object(), "object", "zs.state()"),
        (len, "Callable[..., Any]", "zs.state()"),
        (None, "object", "zs.state(default=None)"),
    ],
)
def test_an_undeclared_attribute_no_zs_type_holds_says_python_state(
    rt: zs.Runtime, value: Any, annotation: str, declaration: str
) -> None:
    ship = _Ship()
    with pytest.raises(AttributeError) as raised:
        ship.cache = value
    assert str(raised.value) == (
        "'_Ship' object has no attribute 'cache': native objects hold only their declared "
        "properties and Python state; declare it in the class body as Python state "
        f"(e.g. `cache: {annotation} = {declaration}`)."
    )
    assert raised.value.name == "cache" and raised.value.obj is ship


def test_an_undeclared_attribute_holding_an_object_or_a_struct(rt: zs.Runtime) -> None:
    ship = _Ship()
    with pytest.raises(AttributeError, match=r'e\.g\. `escort: "_Ship \| None"`'):
        ship.escort = _Ship()
    with pytest.raises(AttributeError, match=r"e\.g\. `spot: _Vec`"):
        ship.spot = ship.where
    with pytest.raises(AttributeError, match=r"`pair: Pair`"):
        ship.pair = (1.0, 2.0)


def test_a_struct_member_that_is_not_declared(rt: zs.Runtime) -> None:
    ship = _Ship()
    for value in (ship.where, _Vec(1.0, 2.0)):
        with pytest.raises(AttributeError) as raised:
            value.y = 3.0
        assert str(raised.value) == (
            "'_Vec' object has no attribute 'y': native structs hold only their declared "
            "members; declare it in the struct body with a zs type (e.g. `y: zs.Float64`)."
        )
        assert raised.value.name == "y" and raised.value.obj is value
        value.x = 2.0  # declared members still write
        assert value.x == 2.0


def test_a_mistyped_property_write_says_did_you_mean(rt: zs.Runtime) -> None:
    ship = _Ship()
    with pytest.raises(AttributeError) as raised:
        ship.helth = 5
    assert str(raised.value).endswith(". Did you mean 'health'?")
    assert raised.value.name == "helth" and raised.value.obj is ship
    with pytest.raises(AttributeError, match=r"Did you mean 'speed'\?$"):
        ship.where.sped = 1.0
    with pytest.raises(
        AttributeError,
        match=r"^'_Ship' object has no attribute 'helth'\. "
        r"Did you mean 'health'\?$",
    ):
        del ship.helth
    assert ship.health == 10
    # Other attribute errors are left as they are.
    with pytest.raises(AttributeError, match="has no setter|can't set attribute"):  # 3.10
        ship.name = "renamed"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="read-only"):
        ship.add_to_root = None  # type: ignore[method-assign]
    with pytest.raises(AttributeError) as private:
        ship._cache = 1
    assert "native objects" not in str(private.value)


def test_container_typos_get_did_you_mean_too(rt: zs.Runtime) -> None:
    numbers = zs.Array[zs.Int32]([1])
    with pytest.raises(AttributeError, match=r"Did you mean 'append'\?$"):
        numbers.apend = 2  # type: ignore[attr-defined]
    numbers.dispose()


# ---- 4. rt.activate() -----------------------------------------------------------------


def test_activate_makes_the_runtime_current_without_closing_it() -> None:
    rt = zs.Runtime()
    before = zs.current_runtime()
    with rt.activate() as got:
        assert got is rt and zs.current_runtime() is rt
        hero = Actor(name="Hero")
        hero.add_to_root()
    assert not rt.closed and zs.current_runtime() is before
    assert hero.health == 100 and hero.runtime is rt
    with rt.activate():  # again: the same heap
        assert Actor().runtime is rt
    rt.close()


def test_activations_nest_and_are_reentrant() -> None:
    outer, inner = zs.Runtime(), zs.Runtime()
    activation = outer.activate()
    with activation:
        with inner.activate():
            assert zs.current_runtime() is inner
            with activation:  # the same object, entered again
                assert zs.current_runtime() is outer
            assert zs.current_runtime() is inner
        assert zs.current_runtime() is outer
        with inner:  # `with rt` inside an activation: closes inner only
            assert zs.current_runtime() is inner
        assert zs.current_runtime() is outer and inner.closed
    assert zs.current_runtime() is not outer and not outer.closed
    outer.close()


def test_each_thread_has_its_own_current_runtime() -> None:
    mine, theirs = zs.Runtime(), zs.Runtime()
    activated, checked = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def other_thread() -> None:
        try:
            activated.wait()
            seen["before"] = zs.current_runtime()
            with theirs.activate():
                seen["inside"] = zs.current_runtime()
        finally:
            checked.set()  # never leave the main thread waiting, even on failure

    thread = threading.Thread(target=other_thread, daemon=True)
    thread.start()
    try:
        with mine.activate():
            activated.set()
            checked.wait()
            assert zs.current_runtime() is mine
    finally:
        activated.set()
        thread.join()
    assert seen["before"] is not mine and seen["inside"] is theirs
    mine.close()
    theirs.close()


def test_a_closed_runtime_cannot_become_current() -> None:
    rt = zs.Runtime()
    activation = rt.activate()
    rt.close()
    message = r"^this Runtime is closed; create a new zs\.Runtime\(\)$"
    with pytest.raises(RuntimeError, match=message), rt:
        pass
    with pytest.raises(RuntimeError, match=message), rt.activate():
        pass
    with pytest.raises(RuntimeError, match=message), activation:
        pass
    assert zs.current_runtime() is not rt


def test_closing_inside_an_activation() -> None:
    """The closed runtime stays current to the end of its activation, and is
    not replaced by the default one: making anything there raises."""
    rt = zs.Runtime()
    with rt.activate():
        rt.close()
        with pytest.raises(zs.ExpiredConjugateError, match="never replaced"):
            zs.current_runtime()
        with pytest.raises(zs.ExpiredConjugateError, match="never replaced"):
            Actor()
    assert rt.closed


# ---- 5. the repr of an expired object keeps its name --------------------------------


def test_the_repr_of_an_expired_object_names_it() -> None:
    with zs.Runtime() as rt:
        stray = Actor(name="Hero")
        doomed = Actor(name="Doomed")
        doomed.add_to_root()
        doomed.mark_as_garbage()
        doomed.remove_from_root()
        kept = Actor(name="Kept")
        kept.add_to_root()
        auto = Actor()
        auto.add_to_root()
        view = _Ship().where
        collect(rt)
        assert repr(view) == "<_Vec expired: what it points into has expired>"  # as before
    assert repr(stray) == (
        "<Actor 'Hero' expired: it was unreachable and the garbage collector destroyed it>"
    )
    assert repr(doomed) == (
        "<Actor 'Doomed' expired: it was marked as garbage and the garbage collector destroyed it>"
    )
    assert repr(kept) == "<Actor 'Kept' expired: its runtime was closed>"
    assert repr(auto).startswith("<Actor 'Actor_") and "expired: its runtime" in repr(auto)


# ---- 6. counts read well ----------------------------------------------------------------


def test_runtime_repr_counts_live_objects_in_the_right_number(rt: zs.Runtime) -> None:
    assert repr(rt) == "<zs.Runtime 0 live objects>"
    first = Actor()
    assert repr(rt) == "<zs.Runtime 1 live object>"
    second = Actor()
    assert repr(rt) == "<zs.Runtime 2 live objects>"
    assert first is not second


def test_other_counted_messages_read_well(rt: zs.Runtime) -> None:
    class One(zs.Struct):
        a: zs.Int32

    with pytest.raises(TypeError, match=r"takes at most 1 positional argument \(2 given\)"):
        One(1, 2)
    with pytest.raises(TypeError, match=r"takes at most 2 positional arguments \(3 given\)"):
        _Vec(1.0, 2.0, 3.0)
    with pytest.raises(TypeError, match=r"Array\[\.\.\.\] takes 1 type argument$"):
        zs.Array[zs.Int32, zs.Int32]  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"Map\[\.\.\.\] takes 2 type arguments$"):
        zs.Map[zs.Int32]  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"Actor\(\) got unknown properties: a, b$"):
        Actor(a=1, b=2)
