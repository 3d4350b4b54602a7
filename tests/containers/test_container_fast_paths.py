"""The fast paths of container methods (native/binding/zpy_containers.c,
zpy_names.c): set elements and map keys read natively where they are staged
(no native temporary), the per-runtime memo of interned strs, and bulk
writes of arrays whose elements own nothing. Each test drives a path where
a mistake would read or write the wrong memory, and checks the contents
against plain Python."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import zsharp_py as zs

pytestmark = pytest.mark.usefixtures("no_leaked_values")


class Keeper(zs.Object):
    names: zs.Set[zs.Name]
    texts: zs.Set[zs.String]
    scores: zs.Map[zs.Name, zs.Int32]
    by_text: zs.Map[zs.String, zs.Int32]
    floats: zs.Array[zs.Float64]
    kids: zs.Array["Keeper"]


# Specialised once at import (see test_containers.py: SPECIALISED).
SPECIALISED = [
    zs.Set[zs.Name],
    zs.Set[zs.String],
    zs.Set[zs.Utf8String],
    zs.Set[zs.AnsiString],
    zs.Set[zs.Int64],
    zs.Set[zs.UInt8],
    zs.Map[zs.Name, zs.Int32],
    zs.Map[zs.String, zs.Int32],
    zs.Map[zs.Utf8String, zs.Array[zs.Int32]],
    zs.Array[zs.Float64],
    zs.Array[Keeper],
]

TEXTS = ["", "a", "A", "é", "日本語", "x" * 300, "\U0001f600 smile", "T3", "t3"]


@pytest.mark.parametrize("kind", [zs.String, zs.Utf8String])
def test_string_keys_of_every_length_are_found_and_removed(rt: zs.Runtime, kind) -> None:
    texts = zs.Set[kind](TEXTS)
    assert len(texts) == len(TEXTS)  # case matters for strings
    for text in TEXTS:
        assert text in texts
        assert text + "?" not in texts
    texts.add("")  # an existing key: nothing added
    assert len(texts) == len(TEXTS)
    for text in TEXTS:
        texts.discard(text)
        assert text not in texts
    assert len(texts) == 0
    texts.dispose()


def test_ansi_string_keys_refuse_what_they_cannot_hold(rt: zs.Runtime) -> None:
    texts = zs.Set[zs.AnsiString](["abc", ""])
    assert "abc" in texts and "" in texts
    assert "é" not in texts  # not a key: absent, as before
    with pytest.raises(ValueError):
        texts.add("é")
    assert sorted(texts) == ["", "abc"]
    texts.dispose()


def test_scalar_keys_found_where_they_are_staged(rt: zs.Runtime) -> None:
    numbers = zs.Set[zs.Int64]([-(2**63), -1, 0, 1, 2**63 - 1])
    for number in (-(2**63), -1, 0, 1, 2**63 - 1):
        assert number in numbers
    assert 2**63 not in numbers  # out of range: not a key
    assert 2 not in numbers
    small = zs.Set[zs.UInt8](range(256))
    assert all(i in small for i in range(256))
    assert -1 not in small and 256 not in small
    numbers.dispose()
    small.dispose()


def test_many_names_through_the_intern_memo(rt: zs.Runtime) -> None:
    # More distinct strs than the memo has slots: slots are replaced, and
    # every name still resolves to its own entry.
    words = [f"word{i}" for i in range(2000)]
    names = zs.Set[zs.Name](words)
    assert len(names) == len(words)
    for word in words:
        assert word in names
        assert word.upper() in names  # names fold ASCII case
        assert word + "x" not in names
    assert sorted(str(name) for name in names) == sorted(words)
    names.dispose()


def test_equal_strs_that_are_different_objects_intern_alike(rt: zs.Runtime) -> None:
    first = "".join(["Ga", "ther"])
    second = "".join(["Gat", "her"])
    assert first == second and first is not second
    scores = zs.Map[zs.Name, zs.Int32]()
    scores[first] = 1
    scores[second] = 2
    assert len(scores) == 1 and scores[first] == 2 and scores["gather"] == 2
    scores.dispose()


def test_a_str_subclass_is_taken_by_its_contents_not_memoised(rt: zs.Runtime) -> None:
    class Liar(str):
        def __hash__(self) -> int:
            return hash("other")

        def __eq__(self, other: object) -> bool:
            return True

    names = zs.Set[zs.Name](["real"])
    assert Liar("real") in names
    assert Liar("other") not in names
    names.add(Liar("other"))
    assert sorted(str(name) for name in names) == ["other", "real"]
    names.dispose()


def test_the_intern_memo_is_per_runtime() -> None:
    word = "SharedWord"
    with zs.Runtime():
        zs.Name("padding")  # another index for the same text in the next runtime
        zs.Name("more padding")
        in_first = zs.Set[zs.Name]([word])
        assert word in in_first
        in_first.dispose()
    with zs.Runtime():
        in_second = zs.Set[zs.Name]([word])
        assert word in in_second and "padding" not in in_second
        assert [str(name) for name in in_second] == [word]
        in_second.dispose()


def test_names_after_the_runtime_closed_raise(rt: zs.Runtime) -> None:
    holder = Keeper()
    names = holder.names
    names.add("Kept")
    rt.close()
    with pytest.raises(zs.ExpiredConjugateError):
        names.add("Kept")
    with pytest.raises(zs.ExpiredConjugateError):
        "Kept" in names  # noqa: B015


class Grower:
    """An int-like value whose __index__ grows a map (a rehash: its entries
    move) or disposes it, between the key's staging and the native add."""

    def __init__(self, target, action: str) -> None:
        self.target = target
        self.action = action

    def __index__(self) -> int:
        if self.action == "grow":
            for i in range(200):
                self.target[f"grown{i}"] = i
        elif self.action == "clear":
            self.target.clear()
        elif self.action == "dispose":
            self.target.dispose()
        return 7


@pytest.mark.parametrize("action", ["grow", "clear"])
@pytest.mark.parametrize("key_kind", [zs.Name, zs.String])
def test_a_value_hook_that_restructures_the_map_between_key_and_write(
    rt: zs.Runtime, action: str, key_kind
) -> None:
    scores = zs.Map[key_kind, zs.Int32]({"k1": 1, "k5": 5})
    scores["k5"] = Grower(scores, action)
    assert scores["k5"] == 7
    expected = {"k5": 7} if action == "clear" else {"k1": 1, "k5": 7}
    if action == "grow":
        expected.update({f"grown{i}": i for i in range(200)})
    assert {str(key): value for key, value in scores.items()} == expected
    scores.dispose()


@pytest.mark.parametrize("key_kind", [zs.Name, zs.String])
def test_a_value_hook_that_disposes_the_map_raises(rt: zs.Runtime, key_kind) -> None:
    scores = zs.Map[key_kind, zs.Int32]({"k5": 5})
    with pytest.raises(zs.ExpiredConjugateError):
        scores["k5"] = Grower(scores, "dispose")


def test_a_view_valued_map_found_by_a_borrowed_string_key(rt: zs.Runtime) -> None:
    lists = zs.Map[zs.Utf8String, zs.Array[zs.Int32]]({"a": [1], "bé": [2, 3]})
    view = lists["bé"]
    assert list(view) == [2, 3]
    lists["new"] = [4]  # a new key: the structure changed, views expire
    assert view.is_expired
    assert list(lists["bé"]) == [2, 3] and list(lists.get("new")) == [4]
    assert lists.get("absent") is None
    lists.dispose()


def test_property_containers_keyed_by_staged_values(rt: zs.Runtime) -> None:
    keeper = Keeper()
    for i in range(40):
        keeper.names.add(f"T{i}")
        keeper.texts.add(f"T{i}")
        keeper.scores[f"k{i}"] = i
        keeper.by_text[f"k{i}"] = -i
    assert all(f"t{i}" in keeper.names for i in range(40))  # names fold case
    assert all(f"T{i}" in keeper.texts and f"t{i}" not in keeper.texts for i in range(40))
    assert [keeper.scores[f"K{i}"] for i in range(40)] == list(range(40))
    assert [keeper.by_text[f"k{i}"] for i in range(40)] == [-i for i in range(40)]
    with pytest.raises(KeyError):
        keeper.by_text["K1"]


# ---- arrays whose elements own nothing: inserted packed, in one native call ----


def test_packed_insertions_match_a_list(rt: zs.Runtime) -> None:
    floats = zs.Array[zs.Float64]([1.0, 2.0])
    model = [1.0, 2.0]
    for position, number in [(0, -1.0), (1, 0.5), (99, 9.0), (-1, 8.5), (-99, -9.0)]:
        floats.insert(position, number)
        model.insert(position, number)
    floats.append(10.0)
    model.append(10.0)
    floats.extend([11.0, 12.0])
    model.extend([11.0, 12.0])
    floats[1:1] = [0.25, 0.75]
    model[1:1] = [0.25, 0.75]
    assert floats.to_python() == model
    floats.dispose()


def test_a_reference_that_died_while_later_elements_were_staged(rt: zs.Runtime) -> None:
    keeper = Keeper()
    keeper.add_to_root()
    first = Keeper()
    keeper.kids.append(first)
    doomed = Keeper()

    def elements():
        yield first
        yield doomed  # staged as a handle here...
        rt.collect_garbage()  # ...whose object nothing keeps: it dies
        yield first

    with pytest.raises(zs.ExpiredConjugateError):
        keeper.kids.extend(elements())
    assert doomed.is_expired
    assert keeper.kids.to_python() == [first]  # all or nothing
    with pytest.raises(zs.ExpiredConjugateError):
        keeper.kids.append(doomed)
    with pytest.raises(zs.ExpiredConjugateError):
        keeper.kids.insert(0, doomed)
    assert keeper.kids.to_python() == [first]
    keeper.kids.insert(0, None)
    keeper.kids.append(keeper)
    assert keeper.kids.to_python() == [None, first, keeper]


def _dying(rt: zs.Runtime, scratch: zs.Array[Keeper]) -> Keeper:
    """An object an incremental collection has gathered as unreachable and
    whose proxy has not expired yet (the bounded expiry has not reached
    it): the native heap refuses to store it (ZS_E_DYING)."""
    doomed = [Keeper() for _ in range(16)]
    scratch.extend(doomed)  # stored once: the heap has shared their handles,
    scratch.clear()  # so they wait for the collector
    rt.gc.start_incremental()
    while rt.gc.phase == "marking":
        rt.gc.step(max_objects=1)  # bounded by work: deterministic
    return next(kid for kid in doomed if not kid.is_expired)


def test_an_insertion_refused_for_a_dying_object_allocates_nothing(rt: zs.Runtime) -> None:
    """Every insertion into an array of references refuses an object the
    collector is destroying (ExpiredConjugateError), and the refusal
    changes nothing: not the elements, and not the storage, which is full,
    so an insertion that grew it before checking the reference would leave
    the heap's live bytes higher (zsharp.h: zs_array_insert_packed checks
    every reference before it grows the storage)."""
    keeper = Keeper()
    keeper.add_to_root()
    keeper.kids = [keeper] * 4  # exactly the first capacity
    scratch = zs.Array[Keeper]()
    inserts: list[Callable[[Keeper], None]] = [
        keeper.kids.append,
        lambda kid: keeper.kids.insert(1, kid),
        lambda kid: keeper.kids.extend([keeper, kid]),
        lambda kid: keeper.kids.__setitem__(slice(1, 1), [kid, keeper]),
    ]
    for insert in inserts:
        kid = _dying(rt, scratch)
        used = rt.native_memory()["live_bytes"]
        with pytest.raises(zs.ExpiredConjugateError, match="about to be destroyed"):
            insert(kid)
        assert rt.native_memory()["live_bytes"] == used
        assert keeper.kids.to_python() == [keeper] * 4
        rt.collect_garbage()
        assert kid.is_expired
    keeper.kids.append(keeper)
    assert keeper.kids.to_python() == [keeper] * 5
    scratch.dispose()
    rt.gc.verify()


def test_a_position_hook_that_empties_or_disposes_the_array(rt: zs.Runtime) -> None:
    floats = zs.Array[zs.Float64]([1.0, 2.0, 3.0])

    class Position:
        def __init__(self, action: str) -> None:
            self.action = action

        def __index__(self) -> int:
            if self.action == "clear":
                floats.clear()
            else:
                floats.dispose()
            return 2

    floats.insert(Position("clear"), 5.0)  # clamped to the array as it is now
    assert floats.to_python() == [5.0]
    with pytest.raises(zs.ExpiredConjugateError):
        floats.insert(Position("dispose"), 5.0)


def test_an_appended_reference_is_traced(rt: zs.Runtime) -> None:
    keeper = Keeper()
    keeper.add_to_root()
    kid = Keeper()
    keeper.kids.append(kid)
    keeper.kids.insert(0, Keeper())
    rt.collect_garbage()
    assert not kid.is_expired and len(keeper.kids) == 2
    assert keeper.kids[1] is kid and not keeper.kids[0].is_expired


# ---- whole arrays from a list or tuple, staged from its own storage ----------


class Halver:
    """A number whose __float__ changes the list being converted."""

    def __init__(self, target: list, value: float) -> None:
        self.target = target
        self.value = value

    def __float__(self) -> float:
        self.target.clear()
        self.target.extend([99.0] * 50)
        return self.value


def test_a_list_with_a_hook_is_converted_as_it_was_first(rt: zs.Runtime) -> None:
    keeper = Keeper()
    numbers: list = [1.0, 2.0]
    numbers.append(Halver(numbers, 3.0))
    numbers.extend([4.0, 5])
    keeper.floats = numbers  # a snapshot first: the hook's changes are not seen
    assert keeper.floats.to_python() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert numbers == [99.0] * 50


def test_lists_and_tuples_of_every_shape(rt: zs.Runtime) -> None:
    class MyList(list):
        def __iter__(self):
            return iter([0.0])

        def __getitem__(self, index):
            return 0.0

        def __len__(self) -> int:
            return 1

    class MyTuple(tuple):
        def __iter__(self):
            return iter([0.0])

    keeper = Keeper()
    for given, expected in [
        ([], []),
        ((), []),
        ([1.5] * 1000, [1.5] * 1000),
        ((1.0, 2, True), [1.0, 2.0, 1.0]),
        ([1, 2.5], [1.0, 2.5]),
        (MyList([1.0, 2.0]), [1.0, 2.0]),  # its own storage, not its methods
        (MyTuple((3.0, 4.0)), [3.0, 4.0]),
    ]:
        keeper.floats = given
        assert keeper.floats.to_python() == expected
        assert zs.Array[zs.Float64](given).to_python() == expected
    with pytest.raises(TypeError):
        keeper.floats = [1.0, "2"]
    assert keeper.floats.to_python() == [3.0, 4.0]  # unchanged


def test_a_list_of_objects_staged_from_its_storage(rt: zs.Runtime) -> None:
    class Special(Keeper):
        pass

    keeper = Keeper()
    keeper.add_to_root()
    kids = [Keeper() for _ in range(100)]
    keeper.kids = kids
    assert keeper.kids.to_python() == kids
    mixed = [kids[0], Special(), None, kids[1]]  # a subclass and None: the general path
    keeper.kids = mixed
    assert keeper.kids.to_python() == mixed
    dead = Keeper()
    rt.collect_garbage()
    assert dead.is_expired
    with pytest.raises(zs.ExpiredConjugateError):
        keeper.kids = [kids[0], dead]
    assert keeper.kids.to_python() == mixed  # unchanged
    with zs.Runtime():
        stranger = Keeper()
    with pytest.raises(zs.ExpiredConjugateError):
        keeper.kids = [stranger]
    assert keeper.kids.to_python() == mixed


def test_a_list_holding_an_object_of_another_open_runtime(rt: zs.Runtime) -> None:
    keeper = Keeper()
    keeper.add_to_root()
    with zs.Runtime():
        stranger = Keeper()
        stranger.add_to_root()
        with pytest.raises(ValueError, match="another runtime"):
            keeper.kids = [stranger]
    assert keeper.kids.to_python() == []


# ---- keys and elements staged without the general dispatch -------------------


class Text(str):
    pass


class Whole(int):
    pass


class Real(float):
    pass


def _error(expected: type[Exception], action: Callable[[], object]) -> str:
    """The message ``action`` fails with, which must be ``expected`` exactly
    (not a subclass: both paths raise the same class)."""
    with pytest.raises(expected) as caught:
        action()
    assert type(caught.value) is expected, caught.value
    message = str(caught.value)  # a message may name the value's type
    for subclass, base in (("'Text'", "'str'"), ("'Whole'", "'int'"), ("'Real'", "'float'")):
        message = message.replace(subclass, base)
    return message


def test_exact_keys_and_elements_fail_as_their_subclasses_do(rt: zs.Runtime) -> None:
    # An exact str, int or float takes stage_leaf; a subclass the general
    # path: the same conversion, so the same exception and message.
    keeper = Keeper()
    scores, names, floats = keeper.scores, keeper.names, keeper.floats
    cases: list[tuple[type[Exception], Callable[[], object], Callable[[], object]]] = [
        (
            ValueError,
            lambda: scores.__setitem__("bad\0", 1),
            lambda: scores.__setitem__(Text("bad\0"), 1),
        ),
        (
            ValueError,
            lambda: scores.__setitem__("x" * 2000, 1),
            lambda: scores.__setitem__(Text("x" * 2000), 1),
        ),
        (
            OverflowError,
            lambda: scores.__setitem__("k", 2**40),
            lambda: scores.__setitem__("k", Whole(2**40)),
        ),
        (
            TypeError,
            lambda: scores.__setitem__("k", 1.5),
            lambda: scores.__setitem__("k", Real(1.5)),
        ),
        (ValueError, lambda: names.add("bad\0"), lambda: names.add(Text("bad\0"))),
        (OverflowError, lambda: floats.append(10**400), lambda: floats.append(Whole(10**400))),
        (
            OverflowError,
            lambda: floats.insert(0, 10**400),
            lambda: floats.insert(0, Whole(10**400)),
        ),
    ]
    for expected, exact, subclass in cases:
        assert _error(expected, exact) == _error(expected, subclass)
    assert len(scores) == 0 and len(names) == 0 and len(floats) == 0
    # A lookup of what cannot be a key is "absent", for both.
    assert "bad\0" not in names and Text("bad\0") not in names
    assert scores.get("bad\0", 7) == 7 and scores.get(Text("bad\0"), 7) == 7
