"""Object wrappers: zs.SubclassOf, zs.SoftObjectPtr, zs.SoftClassPtr,
zs.LazyObjectPtr, zs.ScriptInterface and zs.Interface.

Creation and conversion, refusals, resolution while loaded, persistent ids
surviving destroy and re-create, red views writing through, clones, expiry,
black values freed exactly once, and which wrappers keep their target alive
(only ScriptInterface, and from a black value only when black conjugates
are roots)."""

from __future__ import annotations

import copy
import gc
import itertools
import uuid

import pytest

import zsharp_py as zs
from helpers import collect, growth, runtime_ptr
from zsharp_py import _core
from zsharp_py._base.ffi import ffi, lib

pytestmark = pytest.mark.usefixtures("no_leaked_values")


class IDamageable(zs.Interface):
    __slots__ = ()

    def take_damage(self, amount: int) -> None:
        raise NotImplementedError


class IUsable(zs.Interface):
    __slots__ = ()

    def use(self) -> str:
        raise NotImplementedError


class Pawn(zs.Object, IDamageable):
    health: zs.Int32 = 100

    def take_damage(self, amount: int) -> None:
        self.health -= amount


class Boss(Pawn, IUsable):
    def use(self) -> str:
        return "used"


class Rock(zs.Object):
    """Implements nothing."""


class Slot(zs.Struct):
    user: zs.ScriptInterface[IDamageable]
    kind: zs.SubclassOf[Pawn]
    soft: zs.SoftObjectPtr[Pawn]
    lazy: zs.LazyObjectPtr[Pawn]


class Spawner(zs.Object):
    pawn_class: zs.SubclassOf[Pawn]
    any_class: zs.SubclassOf
    soft: zs.SoftObjectPtr[Pawn]
    soft_class: zs.SoftClassPtr[Pawn]
    lazy: zs.LazyObjectPtr[Pawn]
    victim: zs.ScriptInterface[IDamageable]
    slot: Slot
    victims: zs.Array[zs.ScriptInterface[IDamageable]]
    classes: zs.Array[zs.SubclassOf[Pawn]]


# ---- Interface -------------------------------------------------------------------------


def test_interfaces_are_implemented_by_inheritance(rt: zs.Runtime) -> None:
    boss = Boss()
    assert isinstance(boss, IDamageable) and isinstance(boss, IUsable)
    assert IDamageable.implemented_by(Boss) and IDamageable.implemented_by(boss)
    assert not IUsable.implemented_by(Pawn) and not IDamageable.implemented_by(Rock())
    # the mixin is not a native parent: Boss's native parent is Pawn
    from zsharp_py._model.object import class_layout

    assert class_layout(Boss).parent is Pawn and class_layout(Pawn).parent is zs.Object
    assert not hasattr(boss, "__dict__")  # interfaces with __slots__ = () keep conjugates tight
    with pytest.raises(TypeError, match="interface"):
        IDamageable()


# ---- SubclassOf ------------------------------------------------------------------------


def test_subclass_of_value(rt: zs.Runtime) -> None:
    value = zs.SubclassOf[Pawn](Boss)
    assert value.get() is Boss and value == Boss and value == zs.SubclassOf[Pawn](Boss)
    assert hash(value) == hash(zs.SubclassOf[Pawn](Boss))
    assert value.is_black and not value.is_expired
    assert value.clone() is value and copy.copy(value) is value
    value.dispose()
    assert repr(value) == "SubclassOf[Pawn](Boss)"
    assert zs.SubclassOf[Pawn] is zs.SubclassOf[Pawn]
    made = value.new(name="Made")
    assert type(made) is Boss and made.name == "Made"
    empty = zs.SubclassOf[Pawn]()
    assert not empty and empty.get() is None and empty == None  # noqa: E711
    with pytest.raises(TypeError, match="empty"):
        empty.new()
    with pytest.raises(TypeError, match="needs Pawn or a subclass of it, not Rock"):
        zs.SubclassOf[Pawn](Rock)
    with pytest.raises(TypeError, match="not int"):
        zs.SubclassOf[Pawn](3)
    with pytest.raises(AttributeError, match="immutable"):
        value._cls = Rock
    assert zs.SubclassOf(Rock).get() is Rock  # unconstrained: any zs.Object class
    with pytest.raises(TypeError, match="zs.Object subclass"):
        zs.SubclassOf[int]


def test_subclass_of_property_reads_the_class(rt: zs.Runtime) -> None:
    spawner = Spawner()
    assert spawner.pawn_class is None
    spawner.pawn_class = Boss
    assert spawner.pawn_class is Boss
    spawner.pawn_class = zs.SubclassOf[Pawn](Pawn)
    assert spawner.pawn_class is Pawn
    with pytest.raises(TypeError, match="Spawner.pawn_class.*not Rock"):
        spawner.pawn_class = Rock
    assert spawner.pawn_class is Pawn
    spawner.any_class = Rock
    assert spawner.any_class is Rock
    spawner.pawn_class = None
    assert spawner.pawn_class is None
    with pytest.raises(TypeError, match="not Rock"):
        Spawner(pawn_class=Rock)


def test_subclass_of_registers_the_class_in_the_runtime(rt: zs.Runtime) -> None:
    class Fresh(Pawn):
        pass

    spawner = Spawner()
    assert Fresh not in rt._native_classes
    spawner.pawn_class = Fresh
    assert spawner.pawn_class is Fresh and Fresh in rt._native_classes


def test_subclass_of_in_structs_and_containers(rt: zs.Runtime) -> None:
    slot = Slot(kind=Boss)
    assert slot.kind is Boss and slot.clone().kind is Boss
    classes = zs.Array[zs.SubclassOf[Pawn]]([Pawn, Boss, None])
    assert classes.to_python() == [Pawn, Boss, None]
    with pytest.raises(TypeError, match="not Rock"):
        classes.append(Rock)
    assert len(classes) == 3
    spawner = Spawner(classes=[Boss])
    assert spawner.classes[0] is Boss
    kinds = zs.Set[zs.SubclassOf[Pawn]]([Pawn, Boss, Pawn])
    assert len(kinds) == 2 and Boss in kinds
    classes.dispose()
    kinds.dispose()
    slot.dispose()


# ---- SoftObjectPtr -----------------------------------------------------------------------


def test_soft_object_ptr_resolves_while_loaded(rt: zs.Runtime) -> None:
    level = Rock(name="Level")
    level.add_to_root()
    soft = zs.SoftObjectPtr[Pawn]("Level.Hero")
    assert soft.is_black and soft.path == "Level.Hero" and str(soft) == "Level.Hero"
    assert soft.get() is None and soft.is_pending and not soft.is_valid
    hero = Pawn(name="Hero", outer=level)
    assert soft.get() is hero and soft.is_valid and not soft.is_pending
    collect(rt)  # a soft pointer never keeps its object alive
    assert hero.is_expired and soft.get() is None
    again = Pawn(name="hero", outer=level)  # names compare case-insensitively
    assert soft.get() is again
    again.mark_as_garbage()
    collect(rt)
    Rock(name="Hero", outer=level)  # something else at the path: not a Pawn
    assert soft.get() is None
    soft.dispose()
    level.remove_from_root()


def test_soft_object_ptr_from_object_and_errors(rt: zs.Runtime) -> None:
    top = Rock(name="Top")
    pawn = Pawn(name="Mid_3", outer=Pawn(name="Mid", outer=top))
    soft = zs.SoftObjectPtr[Pawn](pawn)
    assert soft.path == "Top.Mid.Mid_3" and soft.get() is pawn
    assert zs.SoftObjectPtr(top).path == "Top"  # unconstrained
    with pytest.raises(TypeError, match="needs a Pawn, not Rock"):
        zs.SoftObjectPtr[Pawn](top)
    with pytest.raises(ValueError, match=r"cannot be part of an object path \(it contains '\.'\)"):
        zs.SoftObjectPtr[Pawn](Pawn(name="a.b"))
    with pytest.raises(TypeError, match="not int"):
        zs.SoftObjectPtr[Pawn](5)
    for bad in ("", "Top..Mid", "Nowhere", ".Top", "Top.Mid.Mid_3.", "Top.Mid."):
        assert zs.SoftObjectPtr[Pawn](bad).get() is None
    # A path names no object with an empty name (object_path refuses to
    # make one): an empty segment finds nothing even where one exists.
    unnamed = Rock(name="", outer=top)
    Pawn(name="Under", outer=unnamed)
    with pytest.raises(ValueError, match=r"cannot be part of an object path \(it is empty\)"):
        zs.SoftObjectPtr(unnamed)
    assert zs.SoftObjectPtr[Pawn]("Top..Under").get() is None
    # A segment that finds nothing ends the search: the next one is never
    # looked up from the top level instead (where this one is).
    Pawn(name="Loose")
    assert zs.SoftObjectPtr[Pawn]("Loose").get() is not None
    assert zs.SoftObjectPtr[Pawn]("Top.Nowhere.Loose").get() is None
    # get() reads a soft pointer's path only: any other value is refused
    # before its memory is read as a path.
    soft_get = _core.ValueConjugate._soft_get
    with pytest.raises(TypeError, match="soft object pointer"):
        soft_get(zs.String("Top"))  # a string, but of UTF-16 code units
    with pytest.raises(TypeError, match="soft object pointer"):
        soft_get(zs.Array[zs.Int32]([1, 2]))
    empty = zs.SoftObjectPtr[Pawn]()
    assert empty.is_null and not empty.is_pending and empty.get() is None
    soft.dispose()
    empty.dispose()


def test_soft_object_ptr_finds_nothing_once_close_has_begun(rt: zs.Runtime) -> None:
    """Once close() has begun (the runtime's life is closing, before its
    proxies expire; Python code can run then: a finaliser, a gc callback)
    close() is expiring and freeing, and get() declines as every fast path
    does (native/binding/core.h, zpy_open): it finds nothing, even an object
    whose proxy Python holds, and never reads or grows the heap's name table
    (a path of names never seen interns none of them)."""
    level = Pawn(name="Level")
    level.add_to_root()
    hero = Pawn(name="Hero", outer=level)
    soft = zs.SoftObjectPtr[Pawn]("Level.Hero")
    unseen = zs.SoftObjectPtr[Pawn]("Level.NeverNamedBefore")
    assert soft.get() is hero
    names = lib.zs_name_count(runtime_ptr(rt))
    assert rt._life_enter(_core.LIFE_CLOSE, "close()")  # what close() does first
    try:
        assert rt.lifecycle == "closing" and not soft.is_expired
        assert soft.get() is None and soft.is_pending
        assert unseen.get() is None
        assert lib.zs_name_count(runtime_ptr(rt)) == names
        assert rt._conjugate_of(hero.handle) is hero  # the proxy is still held
    finally:
        rt._life_leave(_core.LIFE_CLOSE)
    rt.close()
    assert soft.is_expired and unseen.is_expired and hero.is_expired
    with pytest.raises(zs.ExpiredConjugateError):
        soft.get()


def test_soft_object_ptr_get_raises_when_the_proxy_cannot_be_made(rt: zs.Runtime) -> None:
    """get() of a path to a host's object that Python has no proxy of, and
    whose class it cannot bind (the host described a property of a type
    nobody declared), raises the binder's error, as rt.object_from_handle
    does: the failed conjugate is never type-checked as if it were one.
    The description is kept by reference (zsharp.h), so the runtime is
    closed before the test's buffers go."""
    native = runtime_ptr(rt)
    texts = [ffi.new("char[]", text) for text in (b"mystery", b"NoSuchType", b"Unbindable")]
    properties = ffi.new(
        "zs_property_desc[1]",
        [{"name": texts[0], "type": texts[1], "offset": ffi.sizeof("zs_object")}],
    )
    desc = ffi.new(
        "zs_class_desc *",
        {
            "name": texts[2],
            "instance_size": ffi.sizeof("zs_object") + 8,
            "properties": properties,
            "property_count": 1,
        },
    )
    cls = ffi.new("zs_class **")
    assert lib.zs_class_register(native, desc, cls) == 0
    index, number, ref = ffi.new("uint32_t *"), ffi.new("uint32_t *"), ffi.new("zs_ref *")
    assert lib.zs_name_intern(native, b"Crate", 5, index, number) == 0
    assert lib.zs_object_new(native, cls[0], 0, index[0], number[0], ref, ffi.NULL) == 0
    assert lib.zs_add_to_root(native, ref[0]) == 0
    soft = zs.SoftObjectPtr[zs.Object]("Crate")
    with pytest.raises(TypeError, match="NoSuchType"):
        rt.object_from_handle(ref[0])
    for _ in range(2):  # and again: the refusal is remembered, not half-made
        with pytest.raises(TypeError, match="NoSuchType"):
            soft.get()
    soft.dispose()
    rt.close()


def test_soft_object_ptr_property_is_a_red_view(rt: zs.Runtime) -> None:
    spawner = Spawner()
    target = Pawn(name="Target")
    spawner.soft = target
    view = spawner.soft
    assert not view.is_black and view.get() is target and view == "Target"
    other = Pawn(name="Other")
    view.set(other)  # writes through
    assert spawner.soft.path == "Other" and spawner.soft.get() is other
    spawner.soft = "Target"
    assert view.get() is target
    clone = view.clone()
    assert clone.is_black and clone == view
    clone.set(None)
    assert clone.is_null and spawner.soft.path == "Target"
    with pytest.raises(TypeError, match="Spawner.soft"):
        spawner.soft = 3.5
    with zs.scope():
        scoped = Spawner(soft="Target").soft  # a view first obtained in the scope
    assert scoped.is_expired
    spawner.mark_as_garbage()
    collect(rt)
    assert view.is_expired
    with pytest.raises(zs.ExpiredConjugateError):
        view.get()
    assert clone.is_null
    clone.dispose()


def test_soft_pointers_are_freed_exactly_once(rt: zs.Runtime) -> None:
    zs.SoftObjectPtr[Pawn]("warm").dispose()
    zs.SoftClassPtr[Pawn]("warm").dispose()
    collect(rt)
    blocks, values = rt.native_memory()["live_blocks"], rt.values_alive()
    pointers = [zs.SoftObjectPtr[Pawn]("A.B"), zs.SoftClassPtr[Pawn](Boss)]
    assert rt.values_alive() == values + 2
    for pointer in pointers:
        pointer.dispose()
        pointer.dispose()
    del pointers
    for _ in range(3):
        zs.SoftObjectPtr[Pawn]("finalised").clone()
    gc.collect()
    collect(rt)
    assert rt.values_alive() == values
    assert rt.native_memory()["live_blocks"] == blocks


# ---- SoftClassPtr ------------------------------------------------------------------------


def test_soft_class_ptr_resolves_registered_classes(rt: zs.Runtime) -> None:
    soft = zs.SoftClassPtr[Pawn](Boss)
    assert soft.path == f"{__name__}.Boss"
    if Boss not in rt._native_classes:
        assert soft.get() is None and soft.is_pending
    Boss()  # registers the class in this runtime
    assert soft.get() is Boss and soft.is_valid
    by_name = zs.SoftClassPtr[Pawn]("Boss")
    assert by_name.get() is Boss
    with pytest.raises(TypeError, match="not Rock"):
        zs.SoftClassPtr[Pawn](Rock)
    Rock()
    assert zs.SoftClassPtr[Pawn]("Rock").get() is None  # registered, but not a Pawn
    soft.dispose()
    by_name.dispose()


def test_soft_class_ptr_load(rt: zs.Runtime) -> None:
    soft = zs.SoftClassPtr[zs.Object]("zsharp_py._demo.Level")
    assert soft.get() is None
    level = soft.load()
    assert level.__name__ == "Level" and soft.get() is level
    missing = zs.SoftClassPtr[zs.Object]("no_such_module.Nothing")
    with pytest.raises(LookupError, match="cannot load"):
        missing.load()
    wrong = zs.SoftClassPtr[Pawn]("zsharp_py._demo.Level")
    with pytest.raises(TypeError, match="not Pawn"):
        wrong.load()
    for value in (soft, missing, wrong):
        value.dispose()


def test_soft_class_ptr_ambiguous_bare_name(rt: zs.Runtime) -> None:
    def declare() -> type:
        class Twin(zs.Object):
            pass

        return Twin

    first, second = declare(), declare()
    first()
    second()
    soft = zs.SoftClassPtr[zs.Object]("Twin")
    with pytest.raises(LookupError, match="several registered classes"):
        soft.get()
    soft.dispose()


def test_soft_class_ptr_property(rt: zs.Runtime) -> None:
    spawner = Spawner(soft_class=Boss)
    Boss()
    assert spawner.soft_class.get() is Boss
    spawner.soft_class.set(Pawn)
    assert spawner.soft_class.path.endswith(".Pawn")
    spawner.soft_class = zs.SubclassOf[Pawn](Boss)
    assert spawner.soft_class.get() is Boss


# ---- LazyObjectPtr -----------------------------------------------------------------------


def test_lazy_object_ptr_assigns_and_reuses_ids(rt: zs.Runtime) -> None:
    pawn = Pawn()
    assert zs.LazyObjectPtr.id_of(pawn) is None
    lazy = zs.LazyObjectPtr[Pawn](pawn)
    persistent = zs.LazyObjectPtr.id_of(pawn)
    assert isinstance(persistent, uuid.UUID) and lazy.id == persistent
    assert zs.LazyObjectPtr(pawn) == lazy and hash(zs.LazyObjectPtr(pawn)) == hash(lazy)
    assert lazy.get() is pawn and lazy.is_valid and not lazy.is_null
    assert lazy.is_black and lazy.clone() is lazy and not lazy.is_expired
    lazy.dispose()
    with pytest.raises(AttributeError, match="immutable"):
        lazy._id = b""


def test_lazy_object_ptr_survives_destroy_and_recreate(rt: zs.Runtime) -> None:
    original = Pawn(name="Door")
    lazy = zs.LazyObjectPtr[Pawn](original)
    persistent = lazy.id
    collect(rt)  # lazy pointers never keep their object alive
    assert original.is_expired and lazy.get() is None and not lazy.is_valid
    rebuilt = Pawn(name="Door")
    assert lazy.get() is None  # a new object has no id until it takes one over
    zs.LazyObjectPtr.bind(rebuilt, persistent)
    assert lazy.get() is rebuilt and zs.LazyObjectPtr.id_of(rebuilt) == persistent
    from_str = zs.LazyObjectPtr[Pawn](str(persistent))
    assert from_str.get() is rebuilt and from_str == lazy


def test_a_dead_objects_persistent_id_is_forgotten_once_looked_up(rt: zs.Runtime) -> None:
    """The runtime's table of persistent ids (id -> object and back,
    ``_types/pointers.py``) keeps no entry for a destroyed object once a
    lookup has found it dead: a game that gives ids to objects it keeps
    destroying (and resolving) does not grow its memory round after round.
    Each round leaves an id (a 16-byte ``bytes``) and two dict entries
    behind if either direction of the entry survives the lookup."""

    def one_round() -> None:
        pawn = Pawn()
        lazy = zs.LazyObjectPtr(pawn)
        del pawn
        collect(rt)
        assert lazy.get() is None and not lazy.is_valid

    python_bytes, native_blocks = growth(rt, one_round, times=500)
    assert native_blocks == 0, f"{native_blocks} native blocks left by 500 rounds"
    assert python_bytes < 4_000, f"{python_bytes} bytes left by 500 rounds"


def test_lazy_object_ptr_take_over_moves_the_id(rt: zs.Runtime) -> None:
    old, new = Pawn(), Pawn()
    lazy = zs.LazyObjectPtr(old)
    old_ids_of_new = zs.LazyObjectPtr(new).id
    zs.LazyObjectPtr.bind(new, lazy.id)
    assert lazy.get() is new
    assert zs.LazyObjectPtr.id_of(old) is None  # the previous holder lost it
    assert zs.LazyObjectPtr(old_ids_of_new).get() is None  # new lost its own old id
    with pytest.raises(ValueError, match="null"):
        zs.LazyObjectPtr.bind(new, bytes(16))
    with pytest.raises(TypeError, match="zs.Object"):
        zs.LazyObjectPtr.bind("x", uuid.uuid4())  # type: ignore[arg-type]


def test_rebinding_an_object_again_and_again_leaves_no_old_ids(rt: zs.Runtime) -> None:
    """An object given a new id by ``bind`` loses its old one in both
    directions: re-binding one object round after round does not grow the
    id table (each left-over id is a 16-byte ``bytes`` and a dict entry)."""
    pawn = Pawn()

    def one_round() -> None:
        lazy = zs.LazyObjectPtr.bind(pawn, uuid.uuid4())
        assert lazy.get() is pawn

    python_bytes, native_blocks = growth(rt, one_round, times=500)
    assert native_blocks == 0
    assert python_bytes < 4_000, f"{python_bytes} bytes left by 500 re-bindings"


def test_a_lazy_pointer_of_a_closed_runtime_resolves_in_the_current_one() -> None:
    """A lazy pointer keeps only an id: once the runtime it was made in has
    closed, ``get()`` looks the id up in the current runtime, where an
    object rebuilt with that id (a level loaded again) is found."""
    with zs.Runtime():
        lazy = zs.LazyObjectPtr[Pawn](Pawn(name="Saved"))
    with zs.Runtime():
        assert lazy.get() is None  # nothing holds the id here yet
        rebuilt = Pawn(name="Saved")
        zs.LazyObjectPtr.bind(rebuilt, lazy.id)
        assert lazy.get() is rebuilt


def test_lazy_object_ptr_type_and_null(rt: zs.Runtime) -> None:
    rock = Rock()
    with pytest.raises(TypeError, match="needs a Pawn, not Rock"):
        zs.LazyObjectPtr[Pawn](rock)
    untyped = zs.LazyObjectPtr(rock)
    assert untyped.get() is rock
    assert zs.LazyObjectPtr[Pawn](untyped.id).get() is None  # resolves, but not a Pawn
    null = zs.LazyObjectPtr[Pawn]()
    assert null.is_null and null.id is None and null.get() is None
    assert repr(null) == "LazyObjectPtr[Pawn](None)"
    with pytest.raises(TypeError, match="persistent id"):
        zs.LazyObjectPtr(3.5)
    with pytest.raises(ValueError):
        zs.LazyObjectPtr("not-a-uuid")


def test_lazy_object_ptr_property_and_elements(rt: zs.Runtime) -> None:
    spawner = Spawner()
    assert spawner.lazy.is_null
    pawn = Pawn()
    spawner.lazy = pawn
    assert spawner.lazy.get() is pawn and spawner.lazy == zs.LazyObjectPtr(pawn)
    with pytest.raises(TypeError, match="Spawner.lazy"):
        spawner.lazy = Rock()
    spawner.slot = Slot(lazy=pawn)
    assert spawner.slot.lazy.get() is pawn
    ids = zs.Array[zs.LazyObjectPtr[Pawn]]([pawn, None])
    assert ids[0].get() is pawn and ids[1].is_null
    keyed = zs.Map[zs.LazyObjectPtr[Pawn], zs.Int32]({pawn: 7})
    assert keyed[zs.LazyObjectPtr(pawn)] == 7
    spawner.lazy = None
    assert spawner.lazy.is_null
    ids.dispose()
    keyed.dispose()


def test_lazy_id_resolves_in_the_current_runtime(rt: zs.Runtime) -> None:
    persistent = uuid.uuid4()
    lazy = zs.LazyObjectPtr(persistent)  # a bare id belongs to no runtime
    pawn = Pawn()
    zs.LazyObjectPtr.bind(pawn, persistent)
    assert lazy.get() is pawn
    with zs.Runtime():
        assert lazy.get() is None


# ---- ScriptInterface -----------------------------------------------------------------------


def test_script_interface_checks_the_interface(rt: zs.Runtime) -> None:
    boss = Boss()
    si = zs.ScriptInterface[IDamageable](boss)
    assert si.is_black and si.object is boss and si.get() is boss and si.is_valid
    assert si.interface is IDamageable and si == boss
    si.take_damage(30)  # forwarded: the interface declares it
    assert boss.health == 70
    with pytest.raises(AttributeError, match="name"):
        si.name  # not declared by the interface
    with pytest.raises(TypeError, match="Rock does not implement IDamageable"):
        zs.ScriptInterface[IDamageable](Rock())
    with pytest.raises(TypeError, match="Pawn does not implement IUsable"):
        zs.ScriptInterface[IUsable](Pawn())
    with pytest.raises(TypeError, match="not str"):
        zs.ScriptInterface[IDamageable]("boss")
    with pytest.raises(TypeError, match="zs.Interface subclass"):
        zs.ScriptInterface[Pawn]()
    with pytest.raises(TypeError, match=r"ScriptInterface\[T\]"):
        zs.ScriptInterface()
    si.set(None)
    assert si.object is None and not si.is_valid
    with pytest.raises(AttributeError, match="holds no object"):
        si.take_damage(1)
    si.dispose()


def test_script_interface_property_keeps_its_object_alive(rt: zs.Runtime) -> None:
    spawner = Spawner()
    spawner.add_to_root()
    victim = Pawn()
    spawner.victim = victim
    view = spawner.victim
    assert not view.is_black and view.object is victim
    collect(rt)  # traced: the property keeps the victim alive
    assert not victim.is_expired and spawner.victim.object is victim
    with pytest.raises(TypeError, match="Spawner.victim.*Rock does not implement"):
        spawner.victim = Rock()
    assert spawner.victim.object is victim
    victim.mark_as_garbage()  # killable, as any object reference
    collect(rt)
    assert victim.is_expired and spawner.victim.object is None
    other = Boss()
    view.set(other)  # a red view writes through
    assert spawner.victim.object is other
    spawner.victim = zs.ScriptInterface[IDamageable](other)
    assert spawner.victim.object is other
    spawner.remove_from_root()
    collect(rt)
    assert view.is_expired and other.is_expired


def test_black_script_interface_is_a_root(rt: zs.Runtime) -> None:
    pawn = Pawn()
    si = zs.ScriptInterface[IDamageable](pawn)
    collect(rt)
    assert not pawn.is_expired and si.object is pawn
    clone = si.clone()
    si.dispose()
    collect(rt)
    assert not pawn.is_expired and clone.object is pawn  # the clone is a root too
    clone.dispose()
    collect(rt)
    assert pawn.is_expired


def test_script_interface_in_black_struct_roots_on_and_off() -> None:
    for roots in (True, False):
        with zs.Runtime(black_conjugates_are_roots=roots) as runtime:
            pawn = Pawn()
            slot = Slot(user=pawn)
            alone = zs.ScriptInterface[IDamageable](Pawn())
            collect(runtime)
            assert pawn.is_expired is (not roots)
            assert (slot.user.object is pawn) is roots
            assert (alone.object is None) is (not roots)
            if not roots:
                assert slot.user.object is None  # the stale handle never resolves
                copy_ = slot.clone()
                assert copy_.user.object is None
                copy_.dispose()
            slot.dispose()
            alone.dispose()
            assert runtime.values_alive() == 0


def test_script_interface_clone_and_elements(rt: zs.Runtime) -> None:
    a, b = Pawn(), Boss()
    spawner = Spawner(victim=a, victims=[a, b, None])
    spawner.add_to_root()
    assert [si.object for si in spawner.victims] == [a, b, None]
    assert spawner.victims.to_python() == [a, b, None]
    clone = spawner.victim.clone()
    clone.set(b)
    assert spawner.victim.object is a and clone.object is b
    with pytest.raises(TypeError, match="Rock does not implement"):
        spawner.victims.append(Rock())
    collect(rt)
    assert not a.is_expired and not b.is_expired  # array elements are traced
    del spawner.victims[0]
    spawner.victim = None
    collect(rt)
    assert a.is_expired and not b.is_expired
    clone.dispose()
    spawner.remove_from_root()


def test_script_interface_freed_exactly_once(rt: zs.Runtime) -> None:
    pawn = Pawn()
    pawn.add_to_root()
    zs.ScriptInterface[IDamageable](pawn).dispose()
    collect(rt)
    blocks, values = rt.native_memory()["live_blocks"], rt.values_alive()
    interfaces = [zs.ScriptInterface[IDamageable](pawn) for _ in range(4)]
    assert rt.values_alive() == values + 4
    interfaces[0].dispose()
    interfaces[0].dispose()
    del interfaces
    gc.collect()
    collect(rt)
    assert rt.values_alive() == values
    assert rt.native_memory()["live_blocks"] == blocks
    pawn.remove_from_root()


def test_script_interface_red_view_expires_with_scope_and_owner(rt: zs.Runtime) -> None:
    spawner = Spawner(victim=Pawn())
    with zs.scope():
        scoped = spawner.victim
        assert scoped.object is not None
    assert scoped.is_expired
    with pytest.raises(zs.ExpiredConjugateError, match="scope"):
        scoped.object
    with pytest.raises(TypeError, match="red view"):
        spawner.victim.dispose()
    view = spawner.victim
    collect(rt)
    assert view.is_expired and "expired" in repr(view)


def test_only_script_interface_is_traced(rt: zs.Runtime) -> None:
    holder = Spawner()
    holder.add_to_root()
    soft_target, lazy_target, traced = Pawn(name="Soft"), Pawn(), Pawn()
    holder.soft = soft_target
    holder.lazy = lazy_target
    holder.pawn_class = Pawn
    holder.victim = traced
    collect(rt)
    assert soft_target.is_expired and lazy_target.is_expired
    assert not traced.is_expired
    holder.remove_from_root()


class Link(zs.Object):
    next: "Link | None"


def test_script_interface_store_during_incremental_mark_uses_the_barrier(rt: zs.Runtime) -> None:
    holder = Spawner()
    holder.add_to_root()
    head = Link()
    head.add_to_root()
    chain = [Link() for _ in range(5000)]  # long enough that marking takes several steps
    head.next = chain[0]
    for one, two in itertools.pairwise(chain):
        one.next = two
    late = Pawn(health=7)  # unreachable when the cycle starts
    rt.gc.start_incremental()
    assert not rt.gc.step(1e-6)
    rt.gc.verify()
    holder.victim = late  # the store goes through the write barrier
    black = zs.ScriptInterface[IDamageable](Pawn(health=8))  # born reachable, then a root
    while not rt.gc.step(0.01):
        rt.gc.verify()
    collect(rt)
    assert not late.is_expired and holder.victim.object.health == 7
    assert black.object is not None and black.object.health == 8
    black.dispose()
    holder.remove_from_root()
    head.remove_from_root()


class WithDefaults(zs.Object):
    pawn_class: zs.SubclassOf[Pawn] = Boss
    soft: zs.SoftObjectPtr[Pawn] = "Level.Hero"
    path: zs.FieldPath = "Pawn.health"


def test_wrapper_property_defaults(rt: zs.Runtime) -> None:
    made = WithDefaults()
    assert made.pawn_class is Boss
    assert made.soft.path == "Level.Hero" and made.soft.get() is None
    assert made.path.get(Pawn(health=3)) == 3
    with pytest.raises(TypeError, match="not Rock"):

        class BadDefault(zs.Object):
            kind: zs.SubclassOf[Pawn] = Rock

        BadDefault()


class Bookmarks(zs.Struct):
    where: zs.FieldPath
    which: zs.SoftClassPtr[Pawn]


def test_soft_pointers_and_paths_as_elements_and_struct_members(rt: zs.Runtime) -> None:
    pawn = Pawn(name="Solo")
    pointers = zs.Array[zs.SoftObjectPtr[Pawn]](["Solo", pawn, None, "Nobody"])
    assert [p.get() for p in pointers] == [pawn, pawn, None, None]
    assert pointers.to_python() == ["Solo", "Solo", "", "Nobody"]
    element = pointers[3]
    element.set(pawn)  # an element view writes through
    assert pointers.to_python()[3] == "Solo"
    unique = zs.Set[zs.SoftObjectPtr[Pawn]](["A", "A", "B"])
    assert len(unique) == 2 and "A" in unique
    marks = Bookmarks(where="Pawn.health", which=Boss)
    assert marks.where.get(pawn) == 100 and marks.which.path.endswith(".Boss")
    copy_ = marks.clone()
    copy_.which.set(None)
    assert marks.which.path.endswith(".Boss") and copy_.which.is_null
    for value in (pointers, unique, marks, copy_):
        value.dispose()
    assert element.is_expired


def test_pointers_are_true_only_while_they_resolve(rt: zs.Runtime) -> None:
    """``if ptr:`` means ``ptr.is_valid`` for every pointer type, as Unreal's
    pointers convert to bool (a bare ``if weak:`` used to be always true)."""
    level = Rock(name="Level")
    level.add_to_root()
    hero = Pawn(name="Hero", outer=level)
    spawner = Spawner()
    spawner.add_to_root()
    spawner.victim = hero
    pointers = [
        zs.WeakObjectPtr(hero),
        zs.SoftObjectPtr[Pawn]("Level.Hero"),
        zs.LazyObjectPtr[Pawn](hero),
        spawner.victim,
    ]
    assert [bool(p) for p in pointers] == [True] * 4
    assert not zs.WeakObjectPtr() and not zs.SoftObjectPtr[Pawn]("Level.Nobody")
    spawner.victim = None
    hero.mark_as_garbage()
    collect(rt)
    assert hero.is_expired
    assert [bool(p) for p in pointers] == [False] * 4
    assert [p.is_valid for p in pointers] == [False] * 4
    pointers[1].dispose()
    level.remove_from_root()
    spawner.remove_from_root()
