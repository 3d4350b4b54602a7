"""A host's C functions called from Python (``_core.NativeFunction``).

Each test builds the functions the way the binder will, from a parameter
block's members, over small C entries compiled for the test
(``native_build.compile_host``): they reach the C API through the table
``zsharp_py.lowlevel.api_table()`` gives, and count their calls, so a test
can tell whether an entry ran.
"""

from __future__ import annotations

import gc
import inspect
import pydoc
import types
from collections.abc import Iterator
from typing import Any

import pytest

import zsharp_py as zs
from helpers import collect
from native_build import compile_host
from zsharp_py import _core
from zsharp_py._base.errors import ExpiredConjugateError
from zsharp_py._model.object import kind_of
from zsharp_py.lowlevel import api_table

IN, OUT, INOUT, RETURN = _core.PARAM_IN, _core.PARAM_OUT, _core.PARAM_INOUT, _core.PARAM_RETURN
SCALAR, OBJECT, STRUCT, VALUE = (
    _core.CALL_SCALAR,
    _core.CALL_OBJECT,
    _core.CALL_STRUCT,
    _core.CALL_VALUE,
)
STATIC, EVENT = _core.FUNCTION_STATIC, _core.FUNCTION_EVENT

HOST = r"""
#include <stdint.h>
#include <string.h>
#include "zsharp_api.h"

static const zs_api *api;
static int calls;
static int frees; /* runtimes freed that host_watch registered a cleanup in */
static zs_ref remembered;

static void count_free(void *user) { (void)user; frees++; }

int host_init(const void *table) {
    api = table;
    return api->version == ZS_API_VERSION && api->size == sizeof(zs_api);
}
int host_calls(void) { return calls; }
int host_frees(void) { return frees; }
/* Count rt's free (its cleanups run when it is freed). */
int host_watch(zs_runtime *rt) { return (int)api->zs_runtime_add_cleanup(rt, count_free, NULL); }
int host_call(zs_runtime *rt, zs_ref object, const char *function, void *params) {
    return (int)api->zs_call_function(rt, object, function, params);
}

#define ENTRY(name) zs_status name(void *user, zs_runtime *rt, zs_ref self, void *params)
#define UNUSED (void)user, (void)rt, (void)self, (void)params

ENTRY(nothing) { UNUSED; calls++; return ZS_OK; }

/* add3(a: Int32, b: Float64, c: UInt8) -> Float64 */
struct add3 { int32_t a; double b; uint8_t c; double result; };
ENTRY(add3) {
    UNUSED;
    struct add3 *p = params;
    calls++;
    p->result = p->a + p->b + p->c;
    return ZS_OK;
}

/* The 8 bytes at 0 copied to 8: one scalar of any kind in, the same out. */
ENTRY(echo) {
    UNUSED;
    memcpy((char *)params + 8, params, 8);
    calls++;
    return ZS_OK;
}

/* pick(a: Mob | None, out other: Mob | None) -> Mob | None: a back, self as other. */
struct pick { zs_ref a; zs_ref other; zs_ref result; };
ENTRY(pick) {
    UNUSED;
    struct pick *p = params;
    calls++;
    p->result = p->a;
    p->other = self;
    return ZS_OK;
}

/* remember(a: Mob | None); recall() -> Mob | None: a handle kept in C. */
ENTRY(remember) { UNUSED; memcpy(&remembered, params, sizeof remembered); calls++; return ZS_OK; }
ENTRY(recall) { UNUSED; memcpy(params, &remembered, sizeof remembered); calls++; return ZS_OK; }

/* combine(a: Vec, inout b: Vec, out c: Vec) -> Vec */
struct vec { double x, y; };
struct combine { struct vec a, b, c, result; };
ENTRY(combine) {
    UNUSED;
    struct combine *p = params;
    calls++;
    p->c.x = p->a.x + p->b.x;
    p->c.y = p->a.y + p->b.y;
    p->b.x *= 2;
    p->b.y *= 2;
    p->result.x = p->a.x * 10;
    p->result.y = p->a.y * 10;
    return ZS_OK;
}

/* sum(a: Int64, b: Int64) -> Int64, static: no object. */
struct sum { int64_t a, b, result; };
ENTRY(sum) {
    UNUSED;
    struct sum *p = params;
    calls++;
    if (self != ZS_NULL_REF) return ZS_E_INVALID;
    p->result = p->a + p->b;
    return ZS_OK;
}

/* fail(code: Int32): returns code as its status. */
ENTRY(fail) { UNUSED; calls++; return (zs_status) * (int32_t *)params; }

/* collect() -> Int32: the status of a full collection made natively. */
ENTRY(collect_natively) {
    UNUSED;
    calls++;
    *(int32_t *)params = (int32_t)api->zs_collect_garbage(rt);
    return ZS_OK;
}

/* self_destruct() -> Int32: marks its own object as garbage and collects. */
ENTRY(self_destruct) {
    UNUSED;
    calls++;
    zs_status marked = api->zs_mark_as_garbage(rt, self);
    zs_status collected = api->zs_collect_garbage(rt);
    *(int32_t *)params = marked != ZS_OK ? (int32_t)marked : (int32_t)collected;
    return ZS_OK;
}

/* call_back() -> (Int32, Int32), or -> Mob | None (the handle at 8): calls
   the Python method named by `user` on self, then asks the API about self
   once more (it may be gone by then). */
struct call_back { int32_t status; int32_t after; zs_ref self; };
ENTRY(call_back) {
    UNUSED;
    struct call_back *p = params;
    calls++;
    p->status = (int32_t)api->zs_call_function(rt, self, (const char *)user, NULL);
    int rooted = 0;
    p->after = (int32_t)api->zs_is_rooted(rt, self, &rooted);
    p->self = self;
    return ZS_OK;
}

/* call_back_watched() -> (Int32, Int32): calls the Python method named by
   `user` on self, then reports how many watched runtimes had been freed
   when that call returned, touching the runtime no more: the one it runs
   on must still be there. */
struct call_back_watched { int32_t status; int32_t frees; };
ENTRY(call_back_watched) {
    UNUSED;
    struct call_back_watched *p = params;
    calls++;
    p->status = (int32_t)api->zs_call_function(rt, self, (const char *)user, NULL);
    p->frees = frees;
    return ZS_OK;
}

/* call_back_then_destroy() -> Int32: calls the Python method named by
   `user` on self, then destroys self natively: the destroy's status. */
ENTRY(call_back_then_destroy) {
    UNUSED;
    calls++;
    api->zs_call_function(rt, self, (const char *)user, NULL);
    *(int32_t *)params = (int32_t)api->zs_destroy_object(rt, self);
    return ZS_OK;
}

/* Strings are UTF-16 (zs.String): greet(name: String) -> String, "hi " + name. */
struct greet { zs_string name; zs_string result; };
ENTRY(greet) {
    UNUSED;
    struct greet *p = params;
    calls++;
    const zs_type *type = NULL;
    zs_status status = api->zs_type_basic(rt, ZS_TYPE_STRING, 2, 0, &type);
    if (status != ZS_OK) return status;
    uint16_t units[64] = {'h', 'i', ' '};
    uint32_t length = p->name.length < 61 ? p->name.length : 61;
    memcpy(units + 3, p->name.data, length * 2u);
    return api->zs_string_assign(rt, ZS_NULL_REF, type, &p->result, units, length + 3);
}

/* count_to(n: Int32, out numbers: Array[Int32]) */
struct count_to { int32_t n; zs_array numbers; };
ENTRY(count_to) {
    UNUSED;
    struct count_to *p = params;
    calls++;
    const zs_type *element = NULL, *array = NULL;
    zs_status status = api->zs_type_basic(rt, ZS_TYPE_PLAIN, 4, 4, &element);
    if (status == ZS_OK) status = api->zs_type_container(rt, ZS_TYPE_ARRAY, element, NULL, &array);
    for (int32_t i = 0; status == ZS_OK && i < p->n; i++)
        status = api->zs_array_insert(rt, ZS_NULL_REF, array, &p->numbers, (uint32_t)i, &i, 1);
    return status;
}

/* greet_back(name: String) -> String: as greet, after calling back into
   Python (the method named by `user`) with the strings in the block. */
ENTRY(greet_back) {
    calls--; /* greet counts it */
    api->zs_call_function(rt, self, (const char *)user, NULL);
    return greet(user, rt, self, params);
}

/* doubled(x: Int32) -> Int32, the entry of a CallPlan: called by the
   handler on the host's own block. */
struct doubled { int32_t x; int32_t result; };
ENTRY(doubled) {
    UNUSED;
    struct doubled *p = params;
    calls++;
    p->result = p->x * 2 + (self != ZS_NULL_REF ? 1000 : 0);
    return ZS_OK;
}
"""

ENTRIES = [
    "nothing",
    "add3",
    "echo",
    "pick",
    "remember",
    "recall",
    "combine",
    "sum",
    "fail",
    "collect_natively",
    "self_destruct",
    "call_back",
    "call_back_watched",
    "call_back_then_destroy",
    "greet",
    "count_to",
    "greet_back",
    "doubled",
]

CDEF = (
    "int host_init(const void *);\nint host_calls(void);\nint host_frees(void);\n"
    "int host_watch(void *);\n"
    "int host_call(void *, uint64_t, const char *, void *);\n"
    + "".join(f"int {name}(void *, void *, uint64_t, void *);\n" for name in ENTRIES)
)


class Vec(zs.Struct):
    x: zs.Float64
    y: zs.Float64


class Mob(zs.Object):
    hp: zs.Int32
    friend: "Mob | None"
    pos: Vec

    def py_collect(self) -> None:
        self.runtime.collect_garbage()

    def py_close(self) -> None:
        self.runtime.close()


class Other(zs.Object):
    hp: zs.Int32


class Host:
    """The compiled host: its entries' addresses, its call count, and
    NativeFunctions made over them."""

    def __init__(self) -> None:
        self.ffi, self.lib, self.path = compile_host(HOST, "native_functions", CDEF)
        assert self.lib.host_init(self.ffi.cast("const void *", api_table())) == 1
        self.keep: list[Any] = []

    @property
    def calls(self) -> int:
        return int(self.lib.host_calls())

    @property
    def frees(self) -> int:
        """Native runtimes freed among those ``watch`` was given."""
        return int(self.lib.host_frees())

    def watch(self, runtime: zs.Runtime) -> None:
        """Count ``runtime``'s native free (a cleanup of the host's)."""
        address = self.ffi.cast("void *", runtime.native_address)
        assert self.lib.host_watch(address) == 0

    def entry(self, name: str) -> int:
        return int(self.ffi.cast("uintptr_t", getattr(self.lib, name)))

    def text(self, value: bytes) -> int:
        """The address of a C string that lives as long as the host."""
        buffer = self.ffi.new("char[]", value)
        self.keep.append(buffer)
        return int(self.ffi.cast("uintptr_t", buffer))

    def function(
        self,
        name: str,
        what: str,
        members: tuple[tuple[Any, ...], ...] = (),
        size: int = 0,
        *,
        entry: str | None = None,
        owner: type = Mob,
        flags: int = 0,
        user: int = 0,
        signature: Any = None,
        doc: str | None = None,
    ) -> Any:
        return _core.NativeFunction(
            name=name,
            what=what,
            owner=owner,
            entry=self.entry(entry or name) if entry != "" else 0,
            user=user,
            flags=flags,
            size=size,
            members=members,
            signature=signature,
            doc=doc,
        )


@pytest.fixture(scope="module")
def host() -> Host:
    return Host()


@pytest.fixture(autouse=True)
def forget_functions() -> Iterator[None]:
    """Functions set on the test classes by a test are removed after it."""
    yield
    for cls in (Mob, Other):
        for name, value in list(vars(cls).items()):
            if isinstance(value, _core.NativeFunction):
                type.__delattr__(cls, name)


def arg(name: str, offset: int, mode: int, detail: Any, direction: int = IN) -> tuple[Any, ...]:
    """One member, named as the binder names it in errors."""
    label = "result" if direction == RETURN else f"argument {name!r}"
    return (name, direction, offset, mode, detail, f"Mob.f: {label}")


ADD3_WHAT = "Mob.add3(a: Int32, b: Float64, c: UInt8) -> Float64"


def add3(host: Host, **options: Any) -> Any:
    return host.function(
        "add3",
        ADD3_WHAT,
        (
            arg("a", 0, SCALAR, _core.SCALAR_I32),
            arg("b", 8, SCALAR, _core.SCALAR_F64),
            arg("c", 16, SCALAR, _core.SCALAR_U8),
            arg("result", 24, SCALAR, _core.SCALAR_F64, RETURN),
        ),
        32,
        **options,
    )


def rooted(*objects: zs.Object) -> None:
    for obj in objects:
        obj.add_to_root()


# ---------------------------------------------------------------------------
# Calls and arguments
# ---------------------------------------------------------------------------


def test_no_arguments(rt: zs.Runtime, host: Host) -> None:
    Mob.nothing = host.function("nothing", "Mob.nothing() -> None")
    mob = Mob()
    before = host.calls
    assert mob.nothing() is None
    assert Mob.nothing(mob) is None
    bound = mob.nothing
    assert isinstance(bound, types.MethodType) and bound.__self__ is mob
    assert bound() is None
    assert host.calls == before + 3


def test_three_scalar_arguments_and_a_result(rt: zs.Runtime, host: Host) -> None:
    Mob.add3 = add3(host)
    mob = Mob()
    assert mob.add3(1, 2.5, 3) == 6.5
    assert mob.add3(-7, 0.25, 255) == 248.25
    assert mob.add3(c=1, a=2, b=3.0) == 6.0  # keywords, in any order
    assert mob.add3(2, c=1, b=3) == 6.0
    assert Mob.add3(mob, 1, 1, 1) == 3.0


def test_the_descriptor_protocol(rt: zs.Runtime, host: Host) -> None:
    fn = add3(host, doc="Adds three numbers.")
    Mob.add3 = fn
    mob = Mob()
    assert Mob.add3 is fn and Mob.__dict__["add3"] is fn
    assert fn.__get__(None, Mob) is fn
    assert mob.add3.__func__ is fn
    assert (fn.__name__, fn.__qualname__, fn.__objclass__) == ("add3", "Mob.add3", Mob)
    assert fn.__doc__ == "Adds three numbers." and fn.what == ADD3_WHAT
    assert (fn.size, fn.flags, fn.entry) == (32, 0, host.entry("add3"))
    assert fn.members[0] == ("a", IN, 0, SCALAR, _core.SCALAR_I32, "Mob.f: argument 'a'")
    assert repr(fn) == f"<native function {ADD3_WHAT}>"
    assert fn(mob, 1, 2, 3) == 6.0
    with pytest.raises(TypeError):
        type("Sub", (_core.NativeFunction,), {})


def test_signature_and_help(rt: zs.Runtime, host: Host) -> None:
    parameter = inspect.Parameter
    signature = inspect.Signature(
        [
            parameter("self", parameter.POSITIONAL_OR_KEYWORD),
            parameter("a", parameter.POSITIONAL_OR_KEYWORD, annotation=zs.Int32),
            parameter("b", parameter.POSITIONAL_OR_KEYWORD, annotation=zs.Float64),
            parameter("c", parameter.POSITIONAL_OR_KEYWORD, annotation=zs.UInt8),
        ],
        return_annotation=zs.Float64,
    )
    Mob.add3 = add3(host, signature=signature, doc="Adds three numbers.")
    assert inspect.signature(Mob.add3) == signature
    assert list(inspect.signature(Mob().add3).parameters) == ["a", "b", "c"]
    page = pydoc.render_doc(Mob, renderer=pydoc.plaintext)
    assert "add3(self, a:" in page and "Adds three numbers." in page


def test_argument_count_and_keyword_errors_name_the_signature(rt: zs.Runtime, host: Host) -> None:
    Mob.add3 = add3(host)
    mob = Mob()
    before = host.calls
    cases = [
        ((1, 2), {}, "missing required argument 'c'"),
        ((1, 2, 3, 4), {}, "takes 3 arguments (4 given)"),
        ((1, 2, 3), {"d": 1}, "unexpected keyword argument 'd'"),
        ((1, 2, 3), {"a": 1}, "multiple values for argument 'a'"),
        ((), {"a": 1, "b": 2}, "missing required argument 'c'"),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(TypeError) as error:
            mob.add3(*args, **kwargs)
        assert ADD3_WHAT in str(error.value) and message in str(error.value)
    with pytest.raises(TypeError, match="needs the Mob object it is called on"):
        Mob.add3()
    assert host.calls == before


def test_wrong_types_and_ranges_name_the_argument(rt: zs.Runtime, host: Host) -> None:
    Mob.add3 = add3(host)
    mob = Mob()
    before = host.calls
    with pytest.raises(TypeError, match=r"Mob.f: argument 'b': expected a real number, got str"):
        mob.add3(1, "2", 3)
    with pytest.raises(OverflowError, match=r"Mob.f: argument 'c': 256 is out of range for UInt8"):
        mob.add3(1, 2, 256)
    with pytest.raises(TypeError, match=r"Mob.f: argument 'a'"):
        mob.add3(1.5, 2, 3)
    assert host.calls == before


SCALARS = [
    (_core.SCALAR_BOOL, "Bool", [True, False], [2, -1], []),
    (_core.SCALAR_I8, "Int8", [-128, 127], [128, -129], ["x"]),
    (_core.SCALAR_I16, "Int16", [-32768, 32767], [32768], [1.5]),
    (_core.SCALAR_I32, "Int32", [-(2**31), 2**31 - 1], [2**31], [None]),
    (_core.SCALAR_I64, "Int64", [-(2**63), 2**63 - 1], [2**63], ["1"]),
    (_core.SCALAR_U8, "UInt8", [0, 255], [256, -1], []),
    (_core.SCALAR_U16, "UInt16", [0, 65535], [65536, -1], []),
    (_core.SCALAR_U32, "UInt32", [0, 2**32 - 1], [2**32, -1], []),
    (_core.SCALAR_U64, "UInt64", [0, 2**64 - 1], [2**64, -1], [2.0]),
    (_core.SCALAR_F32, "Float32", [1.5, -0.25, 7], [1e39], ["1.0", b"1"]),
    (_core.SCALAR_F64, "Float64", [1e300, -2.5, 3], [], [None]),
]


@pytest.mark.parametrize(
    "code, label, good, out_of_range, wrong", SCALARS, ids=[s[1] for s in SCALARS]
)
def test_every_scalar_kind(
    rt: zs.Runtime,
    host: Host,
    code: int,
    label: str,
    good: list[Any],
    out_of_range: list[Any],
    wrong: list[Any],
) -> None:
    fn = host.function(
        "echo",
        f"Mob.echo(v: {label}) -> {label}",
        (arg("v", 0, SCALAR, code), arg("result", 8, SCALAR, code, RETURN)),
        16,
    )
    mob = Mob()
    for value in good:
        back = fn(mob, value)
        assert back == value and type(back) is (bool if code == _core.SCALAR_BOOL else type(back))
    for value in out_of_range:
        with pytest.raises(
            OverflowError, match=rf"Mob.f: argument 'v': .*out of range for {label}"
        ):
            fn(mob, value)
    for value in wrong:
        with pytest.raises(TypeError, match=r"Mob.f: argument 'v'"):
            fn(mob, value)


def test_a_failure_status_raises(rt: zs.Runtime, host: Host) -> None:
    fn = host.function(
        "fail", "Mob.fail(code: Int32) -> None", (arg("code", 0, SCALAR, _core.SCALAR_I32),), 4
    )
    mob = Mob()
    assert fn(mob, 0) is None
    with pytest.raises(ValueError, match=r"Mob.fail\(code: Int32\) -> None with code=4: "):
        fn(mob, 4)  # ZS_E_INVALID: the arguments named
    with pytest.raises(ExpiredConjugateError, match=r"Mob.fail"):
        fn(mob, 3)  # ZS_E_STALE
    with pytest.raises(RuntimeError, match=r"Mob.fail"):
        fn(mob, 9)  # ZS_E_CALL_FAILED
    with pytest.raises(RuntimeError, match=r"unknown status"):
        fn(mob, 77)


# ---------------------------------------------------------------------------
# Objects
# ---------------------------------------------------------------------------


def pick(host: Host) -> Any:
    return host.function(
        "pick",
        "Mob.pick(a: Mob | None) -> tuple[Mob | None, Mob | None]",
        (
            arg("a", 0, OBJECT, Mob),
            arg("other", 8, OBJECT, Mob, OUT),
            arg("result", 16, OBJECT, Mob, RETURN),
        ),
        24,
    )


def test_object_arguments_and_results(rt: zs.Runtime, host: Host) -> None:
    Mob.pick = pick(host)
    mob, friend = Mob(), Mob()
    assert mob.pick(friend) == (friend, mob)  # the RETURN member first, then the OUT one
    assert mob.pick(None) == (None, mob)
    assert mob.pick(a=mob) == (mob, mob)


def test_object_arguments_are_checked(rt: zs.Runtime, host: Host) -> None:
    Mob.pick = pick(host)
    mob, dead = Mob(), Mob()
    rooted(mob)
    collect(rt)
    assert dead.is_expired
    before = host.calls
    with pytest.raises(ExpiredConjugateError, match=r"Mob.f: argument 'a': "):
        mob.pick(dead)
    with pytest.raises(TypeError, match=r"Mob.f: argument 'a' expects Mob or None, not Other"):
        mob.pick(Other())
    with pytest.raises(TypeError, match=r"expects Mob or None, not int"):
        mob.pick(3)
    with zs.Runtime() as elsewhere:
        stranger = Mob()
        with pytest.raises(
            ValueError, match=r"Mob.f: argument 'a': the object belongs to another runtime"
        ):
            mob.pick(stranger)
        del stranger
        assert not elsewhere.closed
    assert host.calls == before


def test_an_object_result_whose_object_died_is_none(rt: zs.Runtime, host: Host) -> None:
    remember = host.function(
        "remember", "Mob.remember(a: Mob | None)", (arg("a", 0, OBJECT, Mob),), 8
    )
    recall = host.function(
        "recall", "Mob.recall() -> Mob | None", (arg("r", 0, OBJECT, Mob, RETURN),), 8
    )
    keeper, gone = Mob(), Mob()
    rooted(keeper)
    remember(keeper, gone)
    assert recall(keeper) is gone
    del gone
    collect(rt)
    assert recall(keeper) is None


def test_any_object_class_with_detail_none(rt: zs.Runtime, host: Host) -> None:
    fn = host.function(
        "pick",
        "Mob.pick(a: Object | None) -> Object | None",
        (
            arg("a", 0, OBJECT, None),
            arg("o", 8, OBJECT, None, OUT),
            arg("r", 16, OBJECT, None, RETURN),
        ),
        24,
    )
    mob, other = Mob(), Other()
    assert fn(mob, other) == (other, mob)
    with pytest.raises(TypeError, match="expects an object or None, not str"):
        fn(mob, "x")


def test_self_is_checked(rt: zs.Runtime, host: Host) -> None:
    Mob.add3 = add3(host)
    fn = Mob.add3
    other = Other()
    before = host.calls
    with pytest.raises(
        TypeError, match=r"descriptor Mob.add3 of 'Mob' objects does not apply to a 'Other'"
    ):
        fn(other, 1, 2, 3)
    with pytest.raises(TypeError, match="does not apply to a 'str' object"):
        fn("mob", 1, 2, 3)
    with pytest.raises(TypeError, match="does not apply to a 'Other' object"):
        fn.__get__(other, Other)
    dead = Mob()
    collect(rt)
    with pytest.raises(ExpiredConjugateError):
        dead.add3(1, 2, 3)
    assert host.calls == before


def test_a_subclass_instance_is_accepted(rt: zs.Runtime, host: Host) -> None:
    class Boss(Mob):
        pass

    Mob.add3 = add3(host)
    assert Boss().add3(1, 1, 1) == 3.0


# ---------------------------------------------------------------------------
# Structs and values
# ---------------------------------------------------------------------------


def combine(host: Host) -> Any:
    kind = Vec._zs_kind
    return host.function(
        "combine",
        "Mob.combine(a: Vec, b: Vec) -> tuple[Vec, Vec, Vec]",
        (
            arg("a", 0, STRUCT, kind),
            arg("b", 16, STRUCT, kind, INOUT),
            arg("c", 32, STRUCT, kind, OUT),
            arg("result", 48, STRUCT, kind, RETURN),
        ),
        64,
    )


def test_struct_arguments_and_results(rt: zs.Runtime, host: Host) -> None:
    Mob.combine = combine(host)
    mob = Mob()
    mob.pos = Vec(1, 2)
    result, b, c = mob.combine(mob.pos, Vec(10, 20))  # a red view, a black value
    assert isinstance(result, Vec) and result.is_black
    assert (result.x, result.y) == (10, 20)
    assert (b.x, b.y) == (20, 40) and b.is_black  # INOUT: doubled
    assert (c.x, c.y) == (11, 22)
    assert mob.combine((1, 1), {"x": 2, "y": 3})[2].to_python() == {"x": 3.0, "y": 4.0}
    # The black copy survives the object it came from.
    mob.mark_as_garbage()
    collect(rt)
    assert mob.is_expired and (result.x, c.y) == (10, 22)


def test_struct_arguments_are_checked(rt: zs.Runtime, host: Host) -> None:
    Mob.combine = combine(host)
    mob = Mob()
    disposed = Vec(1, 1)
    disposed.dispose()
    before = host.calls
    with pytest.raises(ExpiredConjugateError):
        mob.combine(disposed, Vec())
    with pytest.raises(TypeError, match=r"Mob.f: argument 'b'"):
        mob.combine(Vec(), 3)
    with pytest.raises(OverflowError):
        mob.combine(Vec(), (1, 2**2000))
    assert host.calls == before


def value_kind(annotation: Any) -> Any:
    return kind_of(Mob, annotation, "test").kind


def test_string_and_array_values(rt: zs.Runtime, host: Host) -> None:
    string = value_kind(zs.String)
    greet = host.function(
        "greet",
        "Mob.greet(name: String) -> String",
        (arg("name", 0, VALUE, string), arg("result", 16, VALUE, string, RETURN)),
        32,
    )
    count_to = host.function(
        "count_to",
        "Mob.count_to(n: Int32) -> Array[Int32]",
        (
            arg("n", 0, SCALAR, _core.SCALAR_I32),
            arg("numbers", 8, VALUE, value_kind(zs.Array[zs.Int32]), OUT),
        ),
        24,
    )
    mob = Mob()
    bob = zs.String("Bob")
    assert greet(mob, "Ann") == "hi Ann"
    assert greet(mob, bob) == "hi Bob"
    assert count_to(mob, 5) == [0, 1, 2, 3, 4]
    assert count_to(mob, 0) == []
    with pytest.raises(TypeError, match=r"Mob.f: argument 'name'"):
        greet(mob, 3)
    # Nothing native is left behind in the blocks (the types are registered by now).
    memory = rt.native_memory()["live_blocks"]
    for _ in range(50):
        assert greet(mob, "Dee" * 10) == "hi " + "Dee" * 10
        assert count_to(mob, 7) == list(range(7))
    assert rt.native_memory()["live_blocks"] == memory


def test_a_value_entry_that_closes_the_runtime(host: Host) -> None:
    runtime = zs.Runtime()
    with runtime.activate():
        string = value_kind(zs.String)
        greet_back = host.function(
            "greet_back",
            "Mob.greet_back(name: String) -> String",
            (arg("name", 0, VALUE, string), arg("result", 16, VALUE, string, RETURN)),
            32,
            user=host.text(b"py_close"),
        )
        mob = Mob()
        # The strings in the block are freed before the runtime is.
        assert greet_back(mob, "Cy" * 40) == "hi " + ("Cy" * 40)[:61]
    assert runtime.closed and mob.is_expired


def test_an_event_without_an_entry_does_nothing(rt: zs.Runtime, host: Host) -> None:
    fn = host.function(
        "on_hit",
        "Mob.on_hit(a: Int32, b: Vec) -> Vec",
        (
            arg("a", 0, SCALAR, _core.SCALAR_I32),
            arg("b", 8, STRUCT, Vec._zs_kind),
            arg("r", 24, STRUCT, Vec._zs_kind, RETURN),
        ),
        40,
        entry="",
        flags=EVENT,
    )
    assert fn.entry == 0
    mob = Mob()
    result = fn(mob, 1, Vec(3, 4))
    assert isinstance(result, Vec) and result.to_python() == {"x": 0.0, "y": 0.0}
    with pytest.raises(OverflowError):
        fn(mob, 2**40, Vec())
    with pytest.raises(ValueError, match="only an event may have none"):
        host.function("on_hit", "Mob.on_hit()", entry="")


# ---------------------------------------------------------------------------
# Static functions
# ---------------------------------------------------------------------------


def test_a_static_function(rt: zs.Runtime, host: Host) -> None:
    fn = host.function(
        "sum",
        "Mob.sum(a: Int64, b: Int64) -> Int64",
        (
            arg("a", 0, SCALAR, _core.SCALAR_I64),
            arg("b", 8, SCALAR, _core.SCALAR_I64),
            arg("r", 16, SCALAR, _core.SCALAR_I64, RETURN),
        ),
        24,
        flags=STATIC,
    )
    assert type(fn) is _core.NativeStaticFunction and isinstance(fn, _core.NativeFunction)
    Mob.sum = fn
    mob = Mob()
    assert Mob.sum(1, 2) == 3
    assert mob.sum(3, 4) == 7  # no self passed
    assert mob.sum is fn and Mob.sum is fn
    assert fn(b=5, a=1) == 6
    with pytest.raises(TypeError, match=r"takes 2 arguments \(3 given\)"):
        Mob.sum(mob, 1, 2)


def test_a_static_function_uses_the_current_runtime(host: Host) -> None:
    fn = host.function(
        "pick",
        "Mob.pick(a: Mob | None) -> Mob | None",
        (
            arg("a", 0, OBJECT, Mob),
            arg("o", 8, OBJECT, Mob, OUT),
            arg("r", 16, OBJECT, Mob, RETURN),
        ),
        24,
        flags=STATIC,
    )
    with zs.Runtime() as first:
        mine = Mob()
        assert fn(mine) == (mine, None)
        with zs.Runtime(), pytest.raises(ValueError, match="another runtime"):
            fn(mine)
        assert not first.closed


# ---------------------------------------------------------------------------
# Entries that collect, destroy, call back, close
# ---------------------------------------------------------------------------


def status_function(host: Host, name: str, user: int = 0) -> Any:
    return host.function(
        name,
        f"Mob.{name}() -> Int32",
        (arg("r", 0, SCALAR, _core.SCALAR_I32, RETURN),),
        4,
        user=user,
    )


def call_back(host: Host, method: bytes) -> Any:
    """The entry that calls `method` back on self: its status, then that of
    a question about self asked afterwards."""
    return host.function(
        "call_back",
        "Mob.call_back() -> tuple[Int32, Int32]",
        (
            arg("status", 0, SCALAR, _core.SCALAR_I32, RETURN),
            arg("after", 4, SCALAR, _core.SCALAR_I32, OUT),
        ),
        16,
        user=host.text(method),
    )


def call_back_watched(host: Host, method: bytes, owner: type = Mob) -> Any:
    """The entry that calls `method` back on self, then reports how many
    watched runtimes had been freed when that call returned: its status and
    that count."""
    return host.function(
        "call_back_watched",
        f"{owner.__name__}.call_back_watched() -> tuple[Int32, Int32]",
        (
            arg("status", 0, SCALAR, _core.SCALAR_I32, RETURN),
            arg("frees", 4, SCALAR, _core.SCALAR_I32, OUT),
        ),
        8,
        owner=owner,
        user=host.text(method),
    )


def test_an_entry_that_collects(rt: zs.Runtime, host: Host) -> None:
    """A collection a host function runs is finished when the call returns:
    the purge handed loose to the expiry handler, which expired its
    conjugate, before freeing it."""
    fn = status_function(host, "collect_natively")
    mob, loose = Mob(), Mob()
    rooted(mob)
    assert rt.live_objects() == 2
    assert fn(mob) == 0
    assert loose.is_expired and not mob.is_expired
    assert rt.live_objects() == 1  # freed, not waiting for Python
    with pytest.raises(ExpiredConjugateError, match="unreachable"):
        loose.hp
    assert fn(mob) == 0
    rt.gc.verify()


def test_an_entry_that_destroys_its_own_object(rt: zs.Runtime, host: Host) -> None:
    fn = status_function(host, "self_destruct")
    mob = Mob()
    assert fn(mob) == 0  # marked, gathered, expired and freed inside the call
    assert mob.is_expired and rt.live_objects() == 0
    with pytest.raises(ExpiredConjugateError):
        fn(mob)


def test_an_entry_that_calls_back_into_python_which_collects(rt: zs.Runtime, host: Host) -> None:
    fn = call_back(host, b"py_collect")
    keeper, loose = Mob(), Mob()
    rooted(keeper)
    assert fn(keeper) == (0, 0)  # the callback ran; self still there
    assert loose.is_expired
    doomed = Mob()
    assert fn(doomed) == (0, 3)  # self collected by the callback: stale afterwards
    assert doomed.is_expired and not keeper.is_expired
    rt.gc.verify()


def test_an_entry_that_calls_back_into_python_which_closes_the_runtime(host: Host) -> None:
    """close() inside a host call detaches the runtime and leaves the native
    free to the call, which still runs on it: freed once it returns."""
    fn = call_back_watched(host, b"py_close")
    runtime = zs.Runtime()
    host.watch(runtime)
    before = host.frees
    with runtime.activate():
        mob = Mob()
        assert fn(mob) == (0, before)  # not freed under the entry
    assert host.frees == before + 1  # freed when the call returned
    assert runtime.closed and mob.is_expired
    with pytest.raises(ExpiredConjugateError):
        fn(mob)
    assert host.frees == before + 1  # once


def test_a_close_inside_nested_calls_frees_when_the_outermost_returns(host: Host) -> None:
    """A host call whose Python callback calls the host again, and the
    inner call's callback closes the runtime: the inner call returning must
    not free the native runtime the outer one still runs on; the outer
    one's return does, once."""
    inner = call_back(host, b"py_close")
    seen: list[tuple[Any, int]] = []

    class Nester(Mob):
        def py_nest(self) -> None:
            seen.append((inner(self), host.frees))

    outer = call_back_watched(host, b"py_nest", owner=Nester)
    runtime = zs.Runtime()
    host.watch(runtime)
    before = host.frees
    with runtime.activate():
        nester = Nester()
        # The inner call's question about self after its callback finds
        # the runtime still there (detached, not freed): ZS_OK.
        assert outer(nester) == (0, before)
    assert seen == [((0, 0), before)]
    assert host.frees == before + 1
    assert runtime.closed and nester.is_expired


def test_an_entry_that_destroys_an_object_after_python_closed_the_runtime(host: Host) -> None:
    """The callback closes the runtime, whose native free waits for the
    entry; the entry then destroys its object natively. The heap hands it
    to the expiry handler, which finds no open runtime for it (close()
    expired every conjugate already) and leaves it be."""
    fn = status_function(host, "call_back_then_destroy", host.text(b"py_close"))
    runtime = zs.Runtime()
    with runtime.activate():
        mob = Mob()
        assert fn(mob) == 0  # ZS_OK: destroyed; the runtime is freed when the call returns
    assert runtime.closed and mob.is_expired
    with pytest.raises(ExpiredConjugateError):
        fn(mob)


def test_an_object_result_after_the_runtime_closed(host: Host) -> None:
    fn = host.function(
        "call_back",
        "Mob.call_back() -> Mob | None",
        (arg("r", 8, OBJECT, Mob, RETURN),),
        16,
        user=host.text(b"py_close"),
    )
    runtime = zs.Runtime()
    with runtime.activate():
        mob = Mob()
        with pytest.raises(ExpiredConjugateError, match="the runtime was closed during the call"):
            fn(mob)
    assert runtime.closed


# ---------------------------------------------------------------------------
# Hostile arguments: converted completely before anything native happens
# ---------------------------------------------------------------------------


class Hook:
    """A number whose conversion runs `action` first."""

    def __init__(self, action: Any, value: Any = 1) -> None:
        self.action, self.value = action, value

    def __index__(self) -> int:
        self.action()
        return int(self.value)

    def __float__(self) -> float:
        self.action()
        return float(self.value)


@pytest.mark.parametrize("position", [0, 1, 2])
@pytest.mark.parametrize("what", ["collect", "close", "garbage"])
def test_a_hook_that_frees_self_or_closes_the_runtime(host: Host, position: int, what: str) -> None:
    runtime = zs.Runtime()
    with runtime.activate():
        Mob.add3 = add3(host)
        mob = Mob()

        def action() -> None:
            if what == "collect":
                runtime.collect_garbage()
            elif what == "garbage":
                mob.mark_as_garbage()
                runtime.collect_garbage()
            else:
                runtime.close()

        args: list[Any] = [1, 2.0, 3]
        args[position] = Hook(action)
        before = host.calls
        with pytest.raises(ExpiredConjugateError):
            mob.add3(*args)
        assert host.calls == before
    runtime.close()


def test_a_hook_that_frees_an_object_argument(rt: zs.Runtime, host: Host) -> None:
    fn = host.function(
        "pick",
        "Mob.pick(a: Mob | None, n: Int32)",
        (
            arg("a", 0, OBJECT, Mob),
            arg("o", 8, OBJECT, Mob, OUT),
            arg("n", 16, SCALAR, _core.SCALAR_I32),
        ),
        24,
    )
    mob, victim = Mob(), Mob()
    rooted(mob)
    before = host.calls
    with pytest.raises(ExpiredConjugateError, match="Mob.f: argument 'a'"):
        fn(mob, victim, Hook(rt.collect_garbage))
    assert victim.is_expired and host.calls == before
    assert fn(mob, None, Hook(rt.collect_garbage)) == mob


def test_a_hook_that_disposes_a_struct_argument(rt: zs.Runtime, host: Host) -> None:
    Mob.combine = combine(host)
    mob = Mob()
    later = Vec(1, 2)
    before = host.calls
    with pytest.raises(ExpiredConjugateError):
        mob.combine((Hook(later.dispose), 0), later)
    assert host.calls == before
    # Staged first, then disposed: the call goes ahead with the value it had.
    early = Vec(5, 6)
    result, _, _ = mob.combine(early, (Hook(early.dispose), 0))
    assert result.to_python() == {"x": 50.0, "y": 60.0}


def test_a_hook_that_frees_a_value_argument_object(rt: zs.Runtime, host: Host) -> None:
    """A struct holding a reference, staged, then its object collected by a
    later argument's hook: the emit refuses it, the entry never runs."""

    class Link(zs.Struct):
        who: "Mob | None"
        n: zs.Int32

    kind = value_kind(Link)
    fn = host.function(
        "nothing",
        "Mob.f(link: Link, n: Int32)",
        (arg("link", 0, STRUCT, kind), arg("n", 16, SCALAR, _core.SCALAR_I32)),
        24,
    )
    mob, victim = Mob(), Mob()
    rooted(mob)
    before = host.calls
    with pytest.raises(ExpiredConjugateError, match="Mob.f: argument 'link'"):
        fn(mob, (victim, 1), Hook(rt.collect_garbage))  # a black Link would keep it alive
    assert host.calls == before
    assert fn(mob, Link(mob, 1), 2) is None and host.calls == before + 1


def test_a_gc_callback_that_closes_the_runtime_during_conversion(host: Host) -> None:
    runtime = zs.Runtime()
    with runtime.activate():
        Mob.add3 = add3(host)
        mob = Mob()
        armed = [True]

        def callback(phase: str, info: dict[str, Any]) -> None:
            if armed and phase == "start":
                armed.clear()
                runtime.close()

        gc.callbacks.append(callback)
        try:
            before = host.calls
            with pytest.raises(ExpiredConjugateError):
                mob.add3(1, Hook(gc.collect, 2.0), 3)
            assert host.calls == before
        finally:
            gc.callbacks.remove(callback)
    assert runtime.closed


# ---------------------------------------------------------------------------
# The constructor's checks
# ---------------------------------------------------------------------------


def test_members_are_checked(host: Host) -> None:
    def make(members: tuple[tuple[Any, ...], ...], size: int = 16, **options: Any) -> Any:
        return host.function("echo", "Mob.echo()", members, size, **options)

    with pytest.raises(ValueError, match="outside the 16-byte block"):
        make((arg("a", 12, SCALAR, _core.SCALAR_F64),))
    with pytest.raises(ValueError, match="outside"):
        make((arg("a", 4, OBJECT, Mob),))  # misaligned
    with pytest.raises(ValueError, match="is a second result"):
        make(
            (
                arg("a", 0, SCALAR, _core.SCALAR_I32, RETURN),
                arg("b", 4, SCALAR, _core.SCALAR_I32, RETURN),
            )
        )
    with pytest.raises(ValueError, match="is named twice"):
        make((arg("a", 0, SCALAR, _core.SCALAR_I32), arg("a", 4, SCALAR, _core.SCALAR_I32)))
    with pytest.raises(ValueError, match="has no direction"):
        make((arg("a", 0, SCALAR, _core.SCALAR_I32, 7),))
    with pytest.raises(TypeError, match="object conjugate class"):
        make((arg("a", 0, OBJECT, int),))
    with pytest.raises(TypeError, match="struct kind"):
        make((arg("a", 0, STRUCT, value_kind(zs.String)),))
    with pytest.raises(TypeError, match="a value member needs a kind"):
        make((arg("a", 0, VALUE, 3),))
    with pytest.raises(TypeError, match="NativeFunction member"):
        make((("a", IN, 0),))
    with pytest.raises(TypeError, match="owner must be an object conjugate class"):
        make((), owner=int)
    with pytest.raises(ValueError, match="unknown flags"):
        make((), flags=8)
    with pytest.raises(TypeError, match="CallPlan: an object member"):
        _core.CallPlan("f", "F.f", 8, ((0, OBJECT, None, "x"),), None)
    with pytest.raises(ValueError, match="CallPlan: unknown member mode"):
        _core.CallPlan("f", "F.f", 8, ((0, 9, value_kind(zs.Int32), "x"),), None)
    plan = _core.CallPlan("f", "F.f", 16, ((0, VALUE, value_kind(zs.String), "x"),), None)
    assert plan.size == 16  # a value parameter: a red view of the host's block


def test_many_arguments_and_a_big_block(rt: zs.Runtime, host: Host) -> None:
    """More arguments than the stack arrays hold, and a block past 256
    bytes: the heap paths. (The entry reads nothing: `nothing`.)"""
    members = tuple(arg(f"a{i}", 8 * i, SCALAR, _core.SCALAR_I64) for i in range(40))
    fn = host.function("nothing", "Mob.many(...)", members, 8 * 40 + 8, entry="nothing")
    assert fn(Mob(), *range(40)) is None
    assert fn(Mob(), *range(39), a39=1) is None
    with pytest.raises(TypeError, match="missing required argument 'a39'"):
        fn(Mob(), *range(39))


# ---------------------------------------------------------------------------
# Calls from native code to a native function (CallPlan with an entry)
# ---------------------------------------------------------------------------


class Relay(zs.Object):
    hp: zs.Int32


def test_a_call_plan_with_an_entry_runs_the_host_function(rt: zs.Runtime, host: Host) -> None:
    plan = _core.CallPlan(
        "doubled", "Relay.doubled", 8, (), None, entry=host.entry("doubled"), user=0
    )
    assert plan.entry == host.entry("doubled") and plan.user == 0 and "native entry" in repr(plan)
    type.__setattr__(Relay, "_zs_functions", {"doubled": types.SimpleNamespace(_plan=plan)})
    try:
        relay = Relay()
        block = host.ffi.new("int32_t[2]", [21, 0])
        before = host.calls
        status = host.lib.host_call(
            host.ffi.cast("void *", rt.native_address), relay.handle, b"doubled", block
        )
        assert status == 0 and host.calls == before + 1
        assert block[1] == 42 + 1000  # the host's own block; self passed
        relay.mark_as_garbage()
        collect(rt)
        assert (
            host.lib.host_call(
                host.ffi.cast("void *", rt.native_address), relay.handle, b"doubled", block
            )
            == 3
        )
    finally:
        type.__delattr__(Relay, "_zs_functions")


class Tagged(zs.Struct):
    """Not plain: a string member owns native memory."""

    label: zs.String
    at: Vec
    who: "Mob | None"


VALUES = [
    (zs.String, "héllo", "héllo"),
    (zs.Name, "Alpha_3", "Alpha_3"),
    (zs.Array[zs.Int32], [1, 2, 3], [1, 2, 3]),
    (zs.Array[zs.String], ("a", "bb"), ["a", "bb"]),
    (zs.Set[zs.Int32], {4, 5}, {4, 5}),
    (zs.Map[zs.Name, zs.Int32], {"k": 1}, {"k": 1}),
    (zs.Optional[zs.Int32], 7, 7),
    (zs.Optional[zs.String], None, None),
    (zs.Optional[zs.String], "x", "x"),
    (zs.Array[Vec], [(1, 2)], [{"x": 1.0, "y": 2.0}]),
]


@pytest.mark.parametrize(
    "annotation, given, expected", VALUES, ids=[str(v[0]) + "-" + repr(v[1]) for v in VALUES]
)
def test_inout_values_round_trip(
    rt: zs.Runtime, host: Host, annotation: Any, given: Any, expected: Any
) -> None:
    """Staged into the block, emitted, read back (the entry changes
    nothing), cleared: for every kind of value, nothing native is left."""
    kind = value_kind(annotation)
    fn = host.function(
        "nothing",
        f"Mob.keep(v: {kind}) -> {kind}",
        (arg("v", 0, VALUE, kind, INOUT),),
        kind.size,
    )
    mob = Mob()
    assert fn(mob, given) == expected  # a plain Python copy: str, list, set, dict...
    memory = rt.native_memory()["live_blocks"]
    for _ in range(20):
        fn(mob, given)
    assert rt.native_memory()["live_blocks"] == memory


def test_a_struct_that_owns_memory_and_holds_a_reference(rt: zs.Runtime, host: Host) -> None:
    kind = value_kind(Tagged)
    fn = host.function(
        "nothing", "Mob.keep(t: Tagged) -> Tagged", (arg("t", 0, STRUCT, kind, INOUT),), kind.size
    )
    mob, friend = Mob(), Mob()
    rooted(mob)
    back = fn(mob, Tagged("tag", (1, 2), friend))
    assert isinstance(back, Tagged) and back.is_black
    assert (back.label, back.at.x, back.who) == ("tag", 1.0, friend)
    # The black copy holds the reference: friend survives while it lives.
    collect(rt)
    assert not friend.is_expired
    back.dispose()
    collect(rt)
    assert friend.is_expired
    memory = rt.native_memory()["live_blocks"]
    for _ in range(20):
        fn(mob, {"label": "x" * 50, "who": None}).dispose()
    assert rt.native_memory()["live_blocks"] == memory
