"""Regressions for the open points of docs/staging-rule.md section 5 (Python layer).

D: the Python creation, registration and adoption paths check the runtime
again right before each native call (a hook may have closed it meanwhile).
E: the ``_adopting`` guard is a depth, so a nested creation does not let
``close()`` run inside a constructor. H2 to H5: builtin subclasses are taken
through the base type's behaviour, and results of calls from native code are
converted once. Every test that closes a runtime makes its own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import cffi
import pytest

import zsharp_py as zs
from helpers import runtime_ptr
from zsharp_py._base.errors import ZS_E_CALL_FAILED, ZS_OK
from zsharp_py._base.ffi import api_address, ffi, lib
from zsharp_py.lowlevel import function_layout


class Armed:
    """One action to run at the next hook call, then nothing (a metaclass
    hook is called for every use of its class, the library's included)."""

    def __init__(self) -> None:
        self.action: Callable[[], None] | None = None
        self.fired = 0

    def arm(self, action: Callable[[], None]) -> None:
        self.action = action

    def __call__(self) -> None:
        action, self.action = self.action, None
        if action is not None:
            self.fired += 1
            action()


HASH_HOOK = Armed()
DICT_HOOK = Armed()


class ClosingHashMeta(type(zs.Object)):  # type: ignore[misc]
    """A metaclass whose ``__hash__`` (every dict lookup of the class) runs
    ``HASH_HOOK``."""

    def __hash__(cls) -> int:
        HASH_HOOK()
        return type.__hash__(cls)

    __eq__ = type.__eq__


class ClosingDictMeta(type(zs.Object)):  # type: ignore[misc]
    """A metaclass whose ``cls.__dict__`` runs ``DICT_HOOK`` (class_layout
    reads it on every call)."""

    def __getattribute__(cls, name: str) -> Any:
        if name == "__dict__":
            DICT_HOOK()
        return type.__getattribute__(cls, name)


@pytest.fixture(autouse=True)
def _disarmed() -> Iterator[None]:
    for hook in (HASH_HOOK, DICT_HOOK):
        hook.action, hook.fired = None, 0
    yield
    HASH_HOOK.action = DICT_HOOK.action = None


# ---- D: the runtime checked again before each native call ---------------------------


class Plain(zs.Object):
    health: zs.Int32


class Hashed(zs.Object, metaclass=ClosingHashMeta):
    health: zs.Int32

    def __init__(self, health: int = 0) -> None:  # the Python constructor, always
        self.health = health


class Other(zs.Object):
    pass


class Closer:
    """A delegate callable whose finaliser closes a runtime."""

    def __init__(self, runtime: zs.Runtime) -> None:
        self.runtime = runtime

    def __call__(self) -> None:
        pass

    def __del__(self) -> None:
        self.runtime.close()


def test_d_a_flush_whose_finaliser_closes_the_runtime_refuses_the_creation() -> None:
    runtime = zs.Runtime()
    with runtime.activate():
        Plain(health=1)
        delegate = zs.MulticastDelegate()
        closer = Closer(runtime)
        delegate.add(closer)
        delegate.clear()
        del closer  # held by the runtime only: dropped at the next flush
        pointer = zs.StrongObjectPtr(Plain())
        del pointer  # its finaliser queues a release: the next creation flushes first
        assert runtime._flush_pending
        with pytest.raises(zs.ExpiredConjugateError, match="runtime has been closed"):
            Plain(health=2)  # the flush drops Closer, which closes the runtime
    assert runtime.closed


def test_d_a_metaclass_hash_that_closes_the_runtime_refuses_the_creation() -> None:
    runtime = zs.Runtime()
    with runtime.activate():
        Hashed(health=1)
        Other()
        HASH_HOOK.arm(runtime.close)
        with pytest.raises(zs.ExpiredConjugateError, match="runtime has been closed"):
            Hashed(health=3)  # the creator lookup hashes Hashed: close, then no native call
    assert HASH_HOOK.fired == 1 and runtime.closed


class Item(zs.Object):
    pass


class Weapon(Item, metaclass=ClosingHashMeta):
    pass


class Armory(zs.Object):
    kind: zs.SubclassOf[Item]


def test_d_registering_a_class_after_a_close_by_its_hash_is_refused() -> None:
    runtime = zs.Runtime()
    with runtime.activate():
        armory = Armory()
        HASH_HOOK.arm(runtime.close)
        # The encoder registers Weapon (and Item) on first use: the lookup of
        # Weapon's native class hashes it and closes the runtime.
        with pytest.raises(zs.ExpiredConjugateError, match="runtime has been closed"):
            armory.kind = Weapon
    assert HASH_HOOK.fired == 1 and runtime.closed
    with pytest.raises(zs.ExpiredConjugateError):
        armory.kind


def test_d_a_registered_class_after_a_close_by_its_hash_is_refused() -> None:
    """The cached native class is not returned once the runtime closed: the
    encoder would read its class id from freed memory (``zs_class_id``)."""
    runtime = zs.Runtime()
    with runtime.activate():
        armory = Armory()
        armory.kind = Weapon  # registered: the next lookup finds its native class
        HASH_HOOK.arm(runtime.close)
        with pytest.raises(zs.ExpiredConjugateError, match="runtime has been closed"):
            armory.kind = Weapon  # the class id is not read from the freed class
    assert HASH_HOOK.fired == 1 and runtime.closed


class Adoptee(zs.Object, metaclass=ClosingDictMeta):
    health: zs.Int32


class Keeper(zs.Object):
    held: Adoptee | None


def test_d_an_adoption_after_a_close_by_the_class_layout_is_refused() -> None:
    """A proxy made by a read is made in C, with no Python code (the
    metaclass's hook does not fire); the Python path, which binds a host's
    class first and runs Python code doing so, checks the runtime again
    after that code: closed by it, it adopts nothing."""
    runtime = zs.Runtime()
    with runtime.activate():
        keeper = Keeper()
        keeper.add_to_root()
        keeper.held = Adoptee(health=4)  # its conjugate is dropped: the next read adopts
        DICT_HOOK.arm(runtime.close)
        made_in_c = keeper.held
        assert DICT_HOOK.fired == 0 and made_in_c is not None and made_in_c.health == 4
        handle = made_in_c.handle
        del made_in_c  # dropped again: the slow path adopts anew
        result = runtime._conjugate_of_slow(handle)  # class_layout reads Adoptee.__dict__
    assert DICT_HOOK.fired == 1 and runtime.closed
    assert result is None


# ---- E: the adoption guard is a depth ------------------------------------------------


class Holder(zs.Object):
    health: zs.Int32
    floats: zs.Array[zs.Float64]


class Index:
    def __index__(self) -> int:
        return 3


class NestedCreator:
    """An iterable that, on its second iteration (the write: the first is the
    constructor's check), creates another object, then closes the runtime."""

    def __init__(self, runtime: zs.Runtime) -> None:
        self.runtime = runtime
        self.calls = 0
        self.made: list[Holder] = []

    def __iter__(self) -> Iterator[float]:
        self.calls += 1
        if self.calls == 2:
            self.made.append(Holder(health=Index()))
            self.runtime.close()
        return iter([1.0, 2.0])


def test_e_a_nested_creation_leaves_close_refused_inside_the_constructor() -> None:
    runtime = zs.Runtime()
    with runtime.activate():
        hostile = NestedCreator(runtime)
        with pytest.raises(RuntimeError, match="being created or adopted"):
            Holder(health=Index(), floats=hostile)
        assert hostile.calls == 2 and not runtime.closed
        assert runtime._adopting == 0  # back to 0: collections and close() run again
        assert hostile.made[0].health == 3
        runtime.collect_garbage()
    runtime.close()
    assert runtime.closed


class HostFreer:
    """An iterable that, on its second iteration (the write), has the host
    free its runtime: the one close the runtime's life never refuses, even
    inside an adoption (the host frees all the same)."""

    def __init__(self, native: Any) -> None:
        self.native = native
        self.calls = 0

    def __iter__(self) -> Iterator[float]:
        self.calls += 1
        if self.calls == 2:
            lib.zs_runtime_free(self.native)
        return iter([1.0, 2.0])


def test_e_a_constructor_whose_runtime_the_host_freed_fails_cleanly() -> None:
    """The host frees its runtime from inside a constructor (a keyword's
    hook calls into the host): the Python side closes first, and the
    constructor's error path makes no native call on the freed runtime
    (ASan would see one: tools/sanitize.sh)."""
    options = ffi.new("zs_runtime_options *")
    lib.zs_runtime_default_options(options)
    out = ffi.new("zs_runtime **")
    assert lib.zs_runtime_new(options, out) == 0
    runtime = zs.Runtime.attach(api_address(out[0]))
    with runtime.activate():
        hostile = HostFreer(out[0])
        with pytest.raises(zs.ExpiredConjugateError):
            Holder(health=Index(), floats=hostile)
    assert hostile.calls == 2
    assert runtime.closed and runtime.lifecycle == "closed" and runtime._adopting == 0


# ---- H2 to H5: builtin subclasses through their base type ----------------------------


class LyingDict(dict):  # type: ignore[type-arg]
    """A dict whose overridable views disagree with its storage."""

    def items(self) -> Any:
        return [("lie", 99)]

    def keys(self) -> Any:
        return ["lie"]

    def __iter__(self) -> Iterator[Any]:
        return iter(["lie"])

    def __getitem__(self, key: Any) -> Any:
        return 99


def test_h2_map_update_with_keywords_reads_a_dict_subclass_through_dict(rt: zs.Runtime) -> None:
    plain = zs.Map[zs.String, zs.Int32]()
    plain.update(LyingDict(a=1, b=2))
    keywords = zs.Map[zs.String, zs.Int32]()
    keywords.update(LyingDict(a=1, b=2), c=3)
    assert plain.to_python() == {"a": 1, "b": 2}
    assert keywords.to_python() == {"a": 1, "b": 2, "c": 3}


class SplitStr(str):
    """A str whose methods parse it as something else."""

    def split(self, *args: Any, **kwargs: Any) -> Any:
        return ["V", "y"]

    def __contains__(self, item: object) -> bool:
        return item == ":"

    def isidentifier(self) -> bool:
        return False


class V(zs.Struct):
    x: zs.Float64
    y: zs.Float64


class Pathed(zs.Object):
    path: zs.FieldPath


def test_h3_field_paths_parse_a_str_subclass_through_str(rt: zs.Runtime) -> None:
    assert zs.FieldPath(SplitStr("V.x")).fields == ("x",)
    assert str(zs.FieldPath(SplitStr("V.x"))) == "V.x"
    assert zs.FieldPath(V, SplitStr("x")).fields == ("x",)
    holder = Pathed()
    holder.path = SplitStr("V.x")
    assert holder.path.fields == ("x",)
    assert Pathed(path=SplitStr("V.x")).path.fields == ("x",)


class LyingFloat(float):
    def __float__(self) -> float:
        return 99.0


class LyingInt(int):
    def __index__(self) -> int:
        return 99

    def __int__(self) -> int:
        return 99

    def __float__(self) -> float:
        return 99.0


class Defaults(zs.Struct):
    f: zs.Float64 = LyingFloat(2.5)
    g: zs.Float32 = LyingFloat(1.5)
    n: zs.Float64 = LyingInt(4)
    i: zs.Int32 = LyingInt(5)


class DefaultsObject(zs.Object):
    f: zs.Float64 = LyingFloat(2.5)
    g: zs.Float32 = LyingFloat(1.5)
    n: zs.Float64 = LyingInt(4)
    i: zs.Int32 = LyingInt(5)
    inner: Defaults


def test_h4_class_defaults_take_int_and_float_subclasses_through_their_base_value(
    rt: zs.Runtime,
) -> None:
    expected = (2.5, 1.5, 4.0, 5)
    for holder in (DefaultsObject(), DefaultsObject().inner, Defaults()):
        assert (holder.f, holder.g, holder.n, holder.i) == expected
    written = DefaultsObject()
    written.f, written.n = LyingFloat(2.5), LyingInt(4)  # a property write, for comparison
    assert (written.f, written.n) == (2.5, 4.0)
    assert zs.Float64(LyingFloat(2.5)) == 2.5 and type(zs.Float64(LyingFloat(2.5))) is float


class IndexOnly:
    def __index__(self) -> int:
        return 5


class TwoFaced:
    """``__index__`` says 5, ``__int__`` 6: converted once, through ``__index__``."""

    calls = 0

    def __index__(self) -> int:
        TwoFaced.calls += 1
        return 5

    def __int__(self) -> int:
        return 6


RESULT: list[Any] = [None]  # what Caller's methods return


class Caller(zs.Object):
    def count(self) -> zs.Int32:
        return RESULT[0]  # type: ignore[no-any-return]

    def partner(self) -> Caller | None:
        return RESULT[0]  # type: ignore[no-any-return]

    def ratio(self) -> zs.Float32:
        return RESULT[0]  # type: ignore[no-any-return]


def _call_from_native(obj: zs.Object, name: str) -> tuple[int, Any]:
    """Call ``obj.name()`` as a native host does; (status, result)."""
    layout = function_layout(type(obj), name)
    host = cffi.FFI()
    host.cdef("typedef uint64_t zs_ref;\n" + layout.c_declaration)
    block = host.new(f"struct {type(obj).__name__}_{name}_params *")
    pointer = ffi.cast("void *", int(host.cast("uintptr_t", block)))
    status = lib.zs_call_function(runtime_ptr(obj.runtime), obj.handle, name.encode(), pointer)
    return status, block.return_value


def test_h5_results_of_calls_from_native_code_are_converted_once(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    caller = Caller()
    RESULT[0] = IndexOnly()  # accepted, as by every other scalar sink
    assert _call_from_native(caller, "count") == (ZS_OK, 5)
    TwoFaced.calls = 0
    RESULT[0] = TwoFaced()
    assert _call_from_native(caller, "count") == (ZS_OK, 5)
    assert TwoFaced.calls == 1
    RESULT[0] = LyingInt(7)  # an int subclass: its base value
    assert _call_from_native(caller, "count") == (ZS_OK, 7)
    RESULT[0] = LyingFloat(2.5)
    assert _call_from_native(caller, "ratio") == (ZS_OK, 2.5)
    RESULT[0] = LyingInt(3)
    assert _call_from_native(caller, "ratio") == (ZS_OK, 3.0)
    assert unraisable == []
    RESULT[0] = 2**31  # still range-checked, and reported
    assert _call_from_native(caller, "count")[0] == ZS_E_CALL_FAILED
    assert type(unraisable[-1].exc_value) is OverflowError
    assert "Caller.count (result)" in str(unraisable[-1].exc_value)


class Impostor:
    """Claims to be a Caller through ``__class__`` (isinstance believes it)
    and offers a handle of its own choosing."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return Caller

    def __init__(self, rt: zs.Runtime, handle: int) -> None:
        self._rt = rt
        self._h = handle
        self._address = 1


def test_object_results_are_checked_by_their_real_type(
    rt: zs.Runtime, unraisable: list[Any]
) -> None:
    caller, other = Caller(), Caller()
    RESULT[0] = other
    assert _call_from_native(caller, "partner") == (ZS_OK, other.handle)
    impostor = Impostor(rt, other.handle + 1)
    assert isinstance(impostor, Caller)  # what the check must not trust
    RESULT[0] = impostor
    status, written = _call_from_native(caller, "partner")
    assert status == ZS_E_CALL_FAILED and written == 0
    assert type(unraisable[-1].exc_value) is TypeError
    assert "not Impostor" in str(unraisable[-1].exc_value)
