"""The Targets table (benchmarks/_targets.py), which decides whether each
promised figure is "met": the comparison and its boundary, ratios (round by
round when one run measured both figures), the worst of several parts,
the values family's worst and median rows, the largest heap measured, and
"not measured" whenever a figure is missing. Pure bookkeeping on made-up
figures put into the harness's tables; nothing is timed."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from benchmarks import _harness, _targets  # the repository's root is on the path

FULL = _harness.Config(quick=False, verbose=False, allow_install=False)
N = 1_000_000  # the heap the full run's GC targets are read at


@pytest.fixture(autouse=True)
def figures() -> Iterator[dict[str, float]]:
    """Empty figure tables for the test (the harness's are module-level);
    what was there before is put back."""
    tables = (_harness.METRICS, _harness.NOTES, _harness.ROUNDS)
    saved = [dict(table) for table in tables]
    for table in tables:
        table.clear()
    try:
        yield _harness.METRICS
    finally:
        for table, before in zip(tables, saved, strict=True):
            table.clear()
            table.update(before)  # type: ignore[attr-defined]


def _rows(config: _harness.Config = FULL) -> tuple[dict[str, list[str]], list[str]]:
    table = _targets.targets_table(config)
    rows = {row[0]: row for row in table.rows}
    assert len(rows) == len(table.rows), "two targets share a name"
    return rows, table.notes


def _status(name: str) -> str:
    return _rows()[0][name][3]


READ_NANOBIND = "property read <= 2.5x nanobind"


def _read(ours: float, theirs: float) -> None:
    _harness.METRICS["bindings.read.zsharp_py"] = ours
    _harness.METRICS["bindings.read.nanobind"] = theirs


def test_nothing_measured_means_every_target_is_not_measured() -> None:
    rows, notes = _rows()
    assert rows, "no targets"
    assert {row[3] for row in rows.values()} == {"not measured"}
    assert all(row[1] == "-" for row in rows.values())
    assert notes == [f"0 met, 0 not met, {len(rows)} not measured"]


@pytest.mark.parametrize(
    ("ours", "theirs", "status", "shown"),
    [
        (2.0e-8, 1.0e-8, "met", "x2.00"),
        (2.5e-8, 1.0e-8, "met", "x2.50"),  # the limit itself meets "<="
        (2.6e-8, 1.0e-8, "**NOT MET**", "x2.60"),
    ],
)
def test_a_ratio_at_most_its_limit_is_met(
    ours: float, theirs: float, status: str, shown: str
) -> None:
    _read(ours, theirs)
    rows, notes = _rows()
    _, measured, how, got = rows[READ_NANOBIND]
    assert (measured, got) == (shown, status)
    assert how == f"{ours * 1e9:.1f} ns / 10.0 ns"
    met = status == "met"
    assert notes == [f"{int(met)} met, {int(not met)} not met, {len(rows) - 1} not measured"]


def test_a_missing_figure_says_why_and_is_not_measured() -> None:
    _harness.METRICS["bindings.read.zsharp_py"] = 2.0e-8
    _harness.NOTES["bindings.read.nanobind"] = "nanobind is not installed"
    row = _rows()[0][READ_NANOBIND]
    assert row[1:] == ["-", "nanobind is not installed", "not measured"]
    _harness.NOTES.clear()
    row = _rows()[0][READ_NANOBIND]
    assert row[2] == "bindings.read.nanobind not measured in this run"


def test_a_zero_denominator_is_not_measured_rather_than_infinitely_fast() -> None:
    _read(2.0e-8, 0.0)
    assert _status(READ_NANOBIND) == "not measured"


def test_figures_of_one_run_are_divided_round_by_round() -> None:
    # The medians alone give 1.2/1.0; round by round the ratio is 3.0,
    # past the limit: the pairing decides the status.
    _read(1.2e-8, 1.0e-8)
    _harness.ROUNDS["bindings.read.zsharp_py"] = (7, (3.0, 3.0, 3.0))
    _harness.ROUNDS["bindings.read.nanobind"] = (7, (1.0, 1.0, 1.0))
    row = _rows()[0][READ_NANOBIND]
    assert row[1] == "x3.00" and row[3] == "**NOT MET**"
    # Rounds of two different runs do not pair: the ratio of the figures.
    _harness.ROUNDS["bindings.read.nanobind"] = (8, (1.0, 1.0, 1.0))
    row = _rows()[0][READ_NANOBIND]
    assert row[1] == "x1.20" and row[3] == "met"


def test_at_least_targets_are_met_from_their_limit_up() -> None:
    name = "capacity: the default runtime holds >= 2,162,688 objects"
    for held, status in [(2_162_687, "**NOT MET**"), (2_162_688, "met"), (3e6, "met")]:
        _harness.METRICS["gc.capacity.default_held"] = held
        row = _rows()[0][name]
        assert row[3] == status, (held, row)
        assert row[1] == f"{held:,.0f}"


def test_a_target_of_several_parts_is_judged_by_its_worst() -> None:
    name = "host property read <= 1.1x a Python-declared one"
    h = _harness.METRICS
    h["host.read_int.zsharp_py"], h["host.read_int.declared"] = 1.0e-8, 1.0e-8
    h["host.read_float.zsharp_py"], h["host.read_float.declared"] = 1.2e-8, 1.0e-8
    row = _rows()[0][name]
    assert row[1] == "x1.20" and row[3] == "**NOT MET**"
    assert "Int32" in row[2] and "Float64" in row[2]
    h["host.read_float.zsharp_py"] = 1.05e-8
    assert _rows()[0][name][3] == "met"


def test_a_target_of_several_parts_with_one_missing_is_not_measured() -> None:
    """Every part must meet the target: one part alone, however good, does
    not make the target met."""
    name = "host property read <= 1.1x a Python-declared one"
    h = _harness.METRICS
    h["host.read_int.zsharp_py"], h["host.read_int.declared"] = 1.0e-8, 1.0e-8
    row = _rows()[0][name]
    assert row[3] == "not measured", row
    assert "host.read_float.zsharp_py not measured" in row[2]


def test_incremental_steps_are_read_on_their_clock_with_the_other_beside() -> None:
    name = "incremental, 1 ms budget: p99 step <= 1.2 ms"
    h = _harness.METRICS
    for shape, wall, cpu in [("tree", 1.1e-3, 0.9e-3), ("random", 1.3e-3, 1.0e-3)]:
        h[f"gc.incremental.{shape}.p99"] = wall
        h[f"gc.incremental.{shape}.cpu_p99"] = cpu
    rows = _rows()[0]
    wall_row = rows[name]
    assert wall_row[1] == "1.300 ms" and wall_row[3] == "**NOT MET**"
    assert "random 1.300 ms wall (CPU 1.000 ms)" in wall_row[2]
    cpu_row = rows["incremental, 1 ms budget: p99 step CPU time <= 1.2 ms"]
    assert cpu_row[1] == "1.000 ms" and cpu_row[3] == "met"


def test_gc_targets_are_read_at_a_million_objects_in_a_full_run() -> None:
    name = f"full collection, {N:,} live, tree: <= 0.5x Boehm (1 marker each)"
    h = _harness.METRICS
    h[f"gc.live.tree.{N}.zs1"], h[f"gc.live.tree.{N}.boehm1"] = 4.0e-3, 1.0e-2
    h[f"gc.live_cpu.tree.{N}.zs1"], h[f"gc.live_cpu.tree.{N}.boehm1"] = 3.0e-3, 1.0e-2
    h["gc.live.tree.10000.zs1"], h["gc.live.tree.10000.boehm1"] = 9.0, 1.0  # ignored
    row = _rows()[0][name]
    assert row[1] == "x0.40" and row[3] == "met"
    assert row[2].endswith("(CPU time: x0.30)")
    quick = _targets.targets_table(_harness.Config(quick=True, verbose=False))
    assert not any(r[0] == name for r in quick.rows), "a quick run reads 10,000-object heaps"
    assert "mean nothing" in quick.description


def test_the_largest_heap_is_one_both_graphs_were_collected_at() -> None:
    name = "capacity: the 4M-object GC benchmark runs"
    h = _harness.METRICS
    h["gc.live.tree.4000000.zs1"] = 1.0  # the random graph was not collected at 4M
    h["gc.live.tree.1000000.zs1"] = h["gc.live.random.1000000.zs1"] = 1.0
    row = _rows()[0][name]
    assert row[1:] == ["1,000,000", "1,000,000 objects, both graphs", "**NOT MET**"]
    h["gc.live.random.4000000.zs1"] = 1.0
    assert _rows()[0][name][3] == "met"


def _values_row(row: str, ours: float | None, nanobind: float, pybind11: float) -> None:
    if ours is not None:
        _harness.METRICS[f"values.{row}.zsharp_py"] = ours
    _harness.METRICS[f"values.{row}.nanobind"] = nanobind
    _harness.METRICS[f"values.{row}.pybind11"] = pybind11


def test_the_values_family_is_judged_by_its_worst_and_median_rows() -> None:
    _values_row("a", 1.0, 1.0, 2.0)  # x1.0 of nanobind
    _values_row("b", 1.5, 1.0, 2.0)  # x1.5
    _values_row("c", 1.1, 1.0, 2.0)  # x1.1
    rows = _rows()[0]
    worst = rows["value types: every row <= 2x nanobind"]
    assert worst[1:] == ["x1.50", "worst b of 3 rows", "met"]
    median = rows["value types: the median row <= 1.2x nanobind"]
    assert median[1:] == ["x1.10", "median of 3 rows", "met"]
    assert rows["value types: no row slower than pybind11"][1] == "x0.75"


def test_a_values_row_zsharp_py_cannot_do_counts_as_infinitely_slow() -> None:
    _values_row("a", 1.0, 1.0, 2.0)
    _values_row("raises", None, 1.0, 2.0)
    row = _rows()[0]["value types: every row <= 2x nanobind"]
    assert row[1] == "x inf" and row[3] == "**NOT MET**"
    assert "1 unavailable in zsharp_py (raises)" in row[2]


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (1.234, "x", "x1.23"),
        (math.inf, "x", "x inf"),
        (1.5e-3, "s", "1.500 ms"),
        (25_000_000.0, "n", "25,000,000"),
        (23.96, "B", "24.0 B"),
        (0.0312, "%", "3.1%"),
    ],
)
def test_values_are_shown_in_their_unit(value: float, unit: str, text: str) -> None:
    assert _targets._format(value, unit) == text


def test_every_target_compares_one_way_against_a_positive_limit() -> None:
    targets = _targets._targets(FULL)
    assert len({t.name for t in targets}) == len(targets)
    for target in targets:
        assert target.compare in ("<=", ">="), target
        assert target.limit > 0, target
        assert target.unit in ("x", "s", "n", "B", "%"), target
        assert isinstance(target.compute({}), str), f"{target.name} computed from nothing"


def test_the_frame_target_is_judged_on_cpu_time_with_wall_time_beside() -> None:
    """p99 over (median + 1 ms) x 1.2 on the thread's CPU time: a loaded
    machine's preemption inflates wall time only, and is shown, not judged."""
    (frame,) = [t for t in _targets._targets(FULL) if t.name.startswith("frame loop: p99")]
    figures = {
        "frames.cpu_p99": 0.0006,
        "frames.cpu_p99_limit": 0.0012,
        "frames.cpu_median": 0.0,
        "frames.p99": 0.009,
        "frames.p99_limit": 0.0012,
        "frames.median": 0.0,
    }
    value, how = frame.compute(figures)  # type: ignore[misc]
    assert value == pytest.approx(0.5) and "wall: x7.50" in how
    del figures["frames.cpu_p99"]
    assert isinstance(frame.compute(figures), str)  # one figure missing: not measured
