"""The benchmark harness's statistics (benchmarks/_harness.py): ratios of two
micro cases are taken round by round, and every timed batch follows an
untimed one; and the check that the host_classes family's cold reads make
their proxies anew. Pure bookkeeping, checked on made-up figures, counters
and stand-in objects; no time is asserted."""

from __future__ import annotations

import math
import weakref

import pytest
from benchmarks import _harness  # the repository's root is on the path (python -m pytest)


def test_a_paired_ratio_cancels_the_machine_changing_speed() -> None:
    # The machine runs twice as slowly in rounds 3 and 4: both cases move.
    ours = [1.2, 1.2, 2.4, 2.4, 1.2]
    theirs = [1.0, 1.0, 2.0, 2.0, 1.0]
    assert _harness.paired_ratio(ours, theirs) == pytest.approx(1.2)
    # Medians taken apart pair a slow round of one with a fast one of the other.
    skewed = [1.2, 2.4, 2.4, 2.4, 1.2]
    assert _harness.paired_ratio(skewed, theirs) == pytest.approx(1.2)
    assert sorted(skewed)[2] / sorted(theirs)[2] == pytest.approx(2.4)


def test_a_paired_ratio_leaves_out_rounds_it_cannot_divide_by() -> None:
    assert _harness.paired_ratio([1.0, 3.0, 2.0], [0.0, 1.0, 1.0]) == pytest.approx(2.5)
    assert math.isnan(_harness.paired_ratio([1.0, 1.0, 1.0], [0.0, -1.0, 1.0]))
    with pytest.raises(ValueError):
        _harness.paired_ratio([1.0], [1.0, 2.0])  # rounds of different runs


def test_every_timed_batch_follows_an_untimed_tenth_with_its_hooks() -> None:
    calls: list[tuple[str, int]] = []
    namespace = {"log": calls}
    case = _harness.MicroCase(
        "counted",
        "g",
        "log.append(('op', 0))",
        namespace,
        before_batch=lambda n: calls.append(("before", n)),
        after_batch=lambda: calls.append(("after", 0)),
    )
    results, _ = _harness.run_micro([case], number=100, rounds=3)
    batches = [n for what, n in calls if what == "before"]
    # The warm-up, then per round an untimed tenth and the timed batch.
    assert batches == [10, 10, 100, 10, 100, 10, 100]
    assert sum(1 for what, _ in calls if what == "op") == sum(batches)
    assert sum(1 for what, _ in calls if what == "after") == len(batches)
    (result,) = results
    assert len(result.rounds) == 3 and result.run > 0


def test_cases_of_one_run_pair_and_of_two_runs_do_not() -> None:
    first, _ = _harness.run_micro(
        [_harness.MicroCase("a", "g", "pass", {}), _harness.MicroCase("b", "g", "pass", {})],
        number=10,
        rounds=4,
    )
    (second,) = _harness.run_micro([_harness.MicroCase("c", "g", "pass", {})], 10, 4)[0]
    assert first[0].run == first[1].run != second.run

    def result(run: int, rounds: list[float]) -> object:
        stats = _harness.summarize(rounds)
        case = _harness.MicroCase("made up", "g", "pass", {})
        return _harness.MicroResult(case, stats, stats, run, tuple(rounds))

    ours = result(7, [3.0, 6.0, 3.0, 6.0])
    theirs = result(7, [2.0, 4.0, 4.0, 4.0])  # x1.5, x1.5, x0.75, x1.5 round by round
    assert _harness.result_ratio(ours, theirs) == pytest.approx(1.5)
    other_run = result(8, [2.0, 4.0, 4.0, 4.0])  # the medians' ratio: 4.5 / 4.0
    assert _harness.result_ratio(ours, other_run) == pytest.approx(4.5 / 4.0)


class _Wrapper:
    """A stand-in for a binding's wrapper of a native object."""


def test_the_cold_read_check_tells_a_new_wrapper_from_a_kept_one() -> None:
    # benchmarks/host_classes.py checks that every cold read makes its proxy
    # or wrapper anew: a live one is found again, none is kept by anyone else.
    from benchmarks import host_classes

    live: weakref.WeakValueDictionary[int, _Wrapper] = weakref.WeakValueDictionary()

    def instance_map_read() -> _Wrapper:
        """What nanobind's instance map does: the live wrapper, else a new one."""
        found = live.get(700)
        if found is None:
            found = live[700] = _Wrapper()
        return found

    kept = _Wrapper()
    assert host_classes._fresh_reads(instance_map_read, "fresh") is None
    assert "not made anew" in (host_classes._fresh_reads(lambda: kept, "kept") or "")
    assert "two objects" in (host_classes._fresh_reads(_Wrapper, "no identity") or "")
