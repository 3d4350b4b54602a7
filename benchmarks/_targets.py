"""The Targets table: the figures the project promised (README.md,
"Benchmarks"), computed from the headline figures that the families
recorded in this run (``_harness.METRICS``), each marked met or not met."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from ._harness import METRICS, NOTES, ROUNDS, Config, Table, figure_ratio

__all__ = ["targets_table"]


Compute = Callable[[dict[str, float]], "tuple[float, str] | str"]


@dataclass(frozen=True)
class Target:
    name: str
    limit: float
    compare: str  # "<=" or ">="
    compute: Compute
    """(value, how it was computed), or why a figure is missing."""
    unit: str = "x"


def _missing(key: str) -> str:
    return NOTES.get(key, f"{key} not measured in this run")


def _ratio(numerator: str, denominator: str, label: str) -> Compute:
    """The ratio of two recorded figures: round by round when one run of
    interleaved batches measured both (``paired_ratio``), else the ratio of
    the figures; the label shows the two figures (medians)."""

    def compute(m: dict[str, float]) -> tuple[float, str] | str:
        for key in (numerator, denominator):
            if key not in m or not m[key]:
                return _missing(key)
        return _figure_ratio(m, numerator, denominator), label.format(
            a=_human(m[numerator]), b=_human(m[denominator])
        )

    return compute


def _figure_ratio(m: dict[str, float], numerator: str, denominator: str) -> float:
    """``m[numerator] / m[denominator]`` (``figure_ratio``: round by round
    when one run of interleaved batches measured both)."""
    ours, theirs = ROUNDS.get(numerator), ROUNDS.get(denominator)
    return figure_ratio(m[numerator], ours, m[denominator], theirs)


def _human(seconds: float) -> str:
    if seconds < 1e-6:
        return f"{seconds * 1e9:,.1f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:,.1f} us"
    return f"{seconds * 1e3:,.2f} ms"


def _with_cpu(compute: Compute, numerator: str, denominator: str) -> Compute:
    """A wall-time ratio, with the CPU-time ratio of the same runs beside it."""

    def with_cpu(m: dict[str, float]) -> tuple[float, str] | str:
        result = compute(m)
        if isinstance(result, str) or numerator not in m or not m.get(denominator):
            return result
        return result[0], f"{result[1]} (CPU time: x{m[numerator] / m[denominator]:.2f})"

    return with_cpu


def _worst(*parts: Compute) -> Compute:
    """The highest value of several (every one must meet the target, so a
    part not measured leaves the target not measured: the others alone
    cannot make it met)."""

    def compute(m: dict[str, float]) -> tuple[float, str] | str:
        values = [part(m) for part in parts]
        missing = [v for v in values if isinstance(v, str)]
        if missing:
            return "; ".join(missing)
        present = [v for v in values if not isinstance(v, str)]
        worst = max(present)
        return worst[0], "; ".join(v[1] for v in present)

    return compute


def _value(key: str, label: str, scale: float = 1.0) -> Compute:
    def compute(m: dict[str, float]) -> tuple[float, str] | str:
        if key not in m:
            return _missing(key)
        return m[key], label.format(v=m[key] * scale)

    return compute


def _step(shape: str, which: str, clock: str = "wall") -> Compute:
    """An incremental step statistic on ``clock`` ("wall", or "cpu": the
    thread's CPU time, preemption by other processes excluded), with the
    other clock's figure beside it."""
    other = "cpu" if clock == "wall" else "wall"

    def key(on: str) -> str:
        return f"gc.incremental.{shape}.{'cpu_' if on == 'cpu' else ''}{which}"

    def compute(m: dict[str, float]) -> tuple[float, str] | str:
        if key(clock) not in m:
            return _missing(key(clock))
        beside = m.get(key(other))
        extra = (
            f" ({other.upper() if other == 'cpu' else other} {beside * 1e3:.3f} ms)"
            if beside is not None
            else ""
        )
        label = "CPU" if clock == "cpu" else "wall"
        return m[key(clock)], f"{shape} {m[key(clock)] * 1e3:.3f} ms {label}{extra}"

    return compute


def _largest_heap() -> Compute:
    """The largest heap both graphs were collected at by zsharp_py (1 marker)."""

    def compute(m: dict[str, float]) -> tuple[float, str] | str:
        sizes = [
            int(key.split(".")[3])
            for key in m
            if key.startswith("gc.live.tree.")
            and key.endswith(".zs1")
            and f"gc.live.random.{key.split('.')[3]}.zs1" in m
        ]
        if not sizes:
            return _missing("gc.live.tree.4000000.zs1")
        return float(max(sizes)), f"{max(sizes):,} objects, both graphs"

    return compute


def _values(peer: str, statistic: str) -> Compute:
    """A statistic of zsharp_py / ``peer`` over the rows of the values
    family (``values.<row>.<side>``): "worst" (the highest ratio) or
    "median". A row the peer measured but zsharp_py could not (an operation
    that raises) counts as infinitely slow."""

    def compute(m: dict[str, float]) -> tuple[float, str] | str:
        rows = sorted(
            {
                key.split(".")[1]
                for key in m
                if key.startswith("values.") and key.endswith(f".{peer}")
            }
        )
        if not rows:
            return NOTES.get(
                f"values.struct_member_read.{peer}",
                "the values family was not measured in this run",
            )
        ratios: list[tuple[float, str]] = []
        for row in rows:
            ours, theirs = f"values.{row}.zsharp_py", f"values.{row}.{peer}"
            if m[theirs] > 0:
                ratios.append((math.inf if ours not in m else _figure_ratio(m, ours, theirs), row))
        if not ratios:
            return f"no values row measured for {peer}"
        missing = [row for ratio, row in ratios if math.isinf(ratio)]
        extra = (
            f"; {len(missing)} unavailable in zsharp_py ({', '.join(missing[:4])}"
            f"{'...' if len(missing) > 4 else ''})"
            if missing
            else ""
        )
        if statistic == "median":
            value = statistics.median(ratio for ratio, _ in ratios)
            return value, f"median of {len(ratios)} rows{extra}"
        worst = max(ratios)
        return worst[0], f"worst {worst[1]} of {len(ratios)} rows{extra}"

    return compute


def _targets(config: Config) -> list[Target]:
    n = 1_000_000 if 1_000_000 in config.peer_heap_sizes else config.peer_heap_sizes[-1]
    b = "bindings.{}.{}"
    # %-format on purpose: the {} are filled later, by str.format.
    live = "gc.live.{}.%d.{}" % n  # noqa: UP031
    gather = "gc.gather_dead.{}.%d.zs1" % n  # noqa: UP031
    size = f"{n:,}"
    targets = [
        Target(
            "property read <= 2.5x nanobind",
            2.5,
            "<=",
            _ratio(b.format("read", "zsharp_py"), b.format("read", "nanobind"), "{a} / {b}"),
        ),
        Target(
            "property read <= 0.5x pybind11",
            0.5,
            "<=",
            _ratio(b.format("read", "zsharp_py"), b.format("read", "pybind11"), "{a} / {b}"),
        ),
        Target(
            "method call, 0 arguments, <= 1.3x raw cffi",
            1.3,
            "<=",
            _ratio(b.format("call0", "zsharp_py"), b.format("call0", "raw cffi"), "{a} / {b}"),
        ),
        Target(
            "method call, 3 arguments, <= 1.3x raw cffi",
            1.3,
            "<=",
            _ratio(b.format("call3", "zsharp_py"), b.format("call3", "raw cffi"), "{a} / {b}"),
        ),
        Target(
            "returning an existing object <= 2.5x nanobind",
            2.5,
            "<=",
            _ratio(
                b.format("existing", "zsharp_py"), b.format("existing", "nanobind"), "{a} / {b}"
            ),
        ),
        Target(
            "returning an existing object <= 0.5x pybind11",
            0.5,
            "<=",
            _ratio(
                b.format("existing", "zsharp_py"), b.format("existing", "pybind11"), "{a} / {b}"
            ),
        ),
        Target(
            "creating an object <= pybind11",
            1.0,
            "<=",
            _ratio(
                b.format("create", "zsharp_py"),
                b.format("create", "pybind11"),
                "{a} (collection included) / {b}",
            ),
        ),
    ]
    h = "host.{}.{}"

    def host_ratio(group: str, peer: str) -> Compute:
        return _ratio(h.format(group, "zsharp_py"), h.format(group, peer), "{a} / {b}")

    targets += [
        Target(
            "host function call, 0 arguments, <= 1.2x nanobind",
            1.2,
            "<=",
            host_ratio("call0", "nanobind"),
        ),
        Target(
            "host function call, 3 arguments, <= 1.2x nanobind",
            1.2,
            "<=",
            host_ratio("call3", "nanobind"),
        ),
        *(
            Target(
                f"native code calling a Python override, {kind} parameter, "
                "<= 2x nanobind's trampoline",
                2.0,
                "<=",
                host_ratio(f"override_{kind}", "nanobind"),
            )
            for kind in ("scalar", "struct", "object")
        ),
        Target(
            "reading an object element whose proxy does not exist yet <= 1.5x nanobind",
            1.5,
            "<=",
            host_ratio("cold_element", "nanobind"),
        ),
        Target(
            "reading an object reference whose proxy does not exist yet <= 1.5x nanobind",
            1.5,
            "<=",
            host_ratio("cold_ref", "nanobind"),
        ),
        *(
            Target(
                "one host frame calling an empty Python override on each of 10,000 actors it "
                f"spawned, {held}, <= 1.5x nanobind's trampoline per actor",
                1.5,
                "<=",
                host_ratio(group, "nanobind"),
            )
            for group, held in (
                ("tick_cold", "no proxies held"),
                ("tick_held", "proxies held"),
            )
        ),
        *(
            Target(
                "one frame of the tick manager calling an empty Python override on each of "
                f"10,000 actors, {held}, <= 1.5x nanobind's trampoline per actor",
                1.5,
                "<=",
                host_ratio(group, "nanobind"),
            )
            for group, held in (
                ("frame_cold", "no proxies held"),
                ("frame_held", "proxies held"),
            )
        ),
        Target(
            "native code broadcasting an event to Python listeners <= 2x nanobind calling a "
            "Python callable held as std::function (per listener)",
            2.0,
            "<=",
            host_ratio("broadcast", "nanobind"),
        ),
        Target(
            "creating a host object <= 1.5x nanobind",
            1.5,
            "<=",
            _ratio(
                h.format("create", "zsharp_py"),
                h.format("create", "nanobind"),
                "{a} (collection included) / {b}",
            ),
        ),
        Target(
            "host property read <= 1.1x a Python-declared one",
            1.1,
            "<=",
            _worst(
                _ratio(
                    h.format("read_int", "zsharp_py"),
                    h.format("read_int", "declared"),
                    "Int32 {a} / {b}",
                ),
                _ratio(
                    h.format("read_float", "zsharp_py"),
                    h.format("read_float", "declared"),
                    "Float64 {a} / {b}",
                ),
            ),
        ),
        Target(
            "host property write <= 1.1x a Python-declared one",
            1.1,
            "<=",
            _worst(
                _ratio(
                    h.format("write_int", "zsharp_py"),
                    h.format("write_int", "declared"),
                    "Int32 {a} / {b}",
                ),
                _ratio(
                    h.format("write_float", "zsharp_py"),
                    h.format("write_float", "declared"),
                    "Float64 {a} / {b}",
                ),
            ),
        ),
    ]
    cpu = "gc.live_cpu.{}.%d.{}" % n  # noqa: UP031 (the {} are filled later)

    def gc_ratio(shape: str, ours: str, theirs: str, label: str) -> Compute:
        return _with_cpu(
            _ratio(live.format(shape, ours), live.format(shape, theirs), label),
            cpu.format(shape, ours),
            cpu.format(shape, theirs),
        )

    for shape in ("tree", "random"):
        targets += [
            Target(
                f"full collection, {size} live, {shape}: <= 0.5x Boehm (1 marker each)",
                0.5,
                "<=",
                gc_ratio(shape, "zs1", "boehm1", "{a} / {b}"),
            ),
            Target(
                f"full collection, {size} live, {shape}: <= 0.5x Boehm (parallel markers each)",
                0.5,
                "<=",
                gc_ratio(shape, "zsN", "boehmN", "{a} / {b}"),
            ),
            Target(
                f"full collection, {size} live, {shape}: <= 0.2x CPython gc.collect()",
                0.2,
                "<=",
                gc_ratio(shape, "zs1", "cpython", "{a} (1 marker) / {b}"),
            ),
        ]
    targets += [
        Target(
            f"random graph, {size} objects: within 3x of the random-order floor",
            3.0,
            "<=",
            _ratio(
                live.format("random", "zs1"),
                live.format("random", "floor_random"),
                "{a} (1 marker) / {b}",
            ),
        ),
        Target(
            f"gathering the dead half of {size} objects: <= 2x the address-order floor",
            2.0,
            "<=",
            _worst(
                _ratio(
                    gather.format("tree"), live.format("tree", "floor_address"), "tree {a} / {b}"
                ),
                _ratio(
                    gather.format("random"),
                    live.format("random", "floor_address"),
                    "random {a} / {b}",
                ),
            ),
        ),
        Target(
            "clusters: >= 5x faster marking",
            5.0,
            ">=",
            _ratio(
                "gc.clusters.plain_mark", "gc.clusters.clustered_mark", "{a} plain / {b} clustered"
            ),
        ),
        Target(
            "incremental, 1 ms budget: p99 step <= 1.2 ms",
            1.2e-3,
            "<=",
            _worst(_step("tree", "p99"), _step("random", "p99")),
            unit="s",
        ),
        Target(
            "incremental, 1 ms budget: max step <= 2 ms",
            2e-3,
            "<=",
            _worst(_step("tree", "max"), _step("random", "max")),
            unit="s",
        ),
        Target(
            "incremental, 1 ms budget: p99 step CPU time <= 1.2 ms",
            1.2e-3,
            "<=",
            _worst(_step("tree", "p99", "cpu"), _step("random", "p99", "cpu")),
            unit="s",
        ),
        Target(
            "incremental, 1 ms budget: max step CPU time <= 2 ms",
            2e-3,
            "<=",
            _worst(_step("tree", "max", "cpu"), _step("random", "max", "cpu")),
            unit="s",
        ),
        Target(
            "incremental: steps total <= 1.3x stop-the-world",
            1.3,
            "<=",
            _worst(
                _value("gc.incremental.tree.ratio", "tree x{v:.2f}"),
                _value("gc.incremental.random.ratio", "random x{v:.2f}"),
            ),
        ),
        Target(
            "write barrier <= 5% on a store-heavy loop, no collection pending",
            1.05,
            "<=",
            _ratio(
                "gc.barrier.with",
                "gc.barrier.without",
                "{a} / {b} per zs_store_ref (fastest round, CPU time; barrier compiled out)",
            ),
        ),
        Target(
            "capacity: the default runtime holds >= 2,162,688 objects",
            2_162_688,
            ">=",
            _value("gc.capacity.default_held", "{v:,.0f} objects held"),
            unit="n",
        ),
        Target(
            "capacity: configurable to 25M objects",
            25_000_000,
            ">=",
            _value("gc.capacity.configured_held", "{v:,.0f} objects held"),
            unit="n",
        ),
        Target(
            "capacity: the 4M-object GC benchmark runs", 4_000_000, ">=", _largest_heap(), unit="n"
        ),
        Target(
            "<= 24 bytes of GC metadata per object",
            24,
            "<=",
            _value("gc.item_bytes", "object-array item {v:.0f} B"),
            unit="B",
        ),
        Target(
            "expiring a conjugate <= creating one",
            1.0,
            "<=",
            _ratio(
                "expiry.100000.managed_per_conjugate",
                "bindings.create_alone.zsharp_py",
                "{a} per conjugate expired (K = 100,000, managed part) / {b} per "
                "Actor() (collection not timed)",
            ),
        ),
        Target(
            "<= 64 bytes per conjugate",
            64,
            "<=",
            _value("expiry.bytes_per_conjugate", "Python heap {v:.1f} B (tracemalloc)"),
            unit="B",
        ),
        Target("value types: every row <= 2x nanobind", 2.0, "<=", _values("nanobind", "worst")),
        Target(
            "value types: the median row <= 1.2x nanobind", 1.2, "<=", _values("nanobind", "median")
        ),
        Target("value types: no row slower than pybind11", 1.0, "<=", _values("pybind11", "worst")),
        Target(
            "every store path during a mark <= 3x idle (100,000 elements)",
            3.0,
            "<=",
            _value(
                "barrier.worst_marking_over_idle",
                "the slowest path's marking / idle, containers of "
                + ("{:,.0f}".format(METRICS.get("barrier.elements", 0)))
                + " elements (benchmarks/barrier.py)",
            ),
        ),
        Target(
            "frame loop: p99 frame <= (median + collector budget) + 20%",
            1.0,
            "<=",
            _frame_p99(),
        ),
        Target(
            "frame loop: RSS flat (within 5%) from frame 500 to the end",
            0.05,
            "<=",
            _value("frames.rss_growth", "RSS change {v:+.1%} (benchmarks/frames.py)"),
            unit="%",
        ),
    ]
    return targets


def _frame_p99() -> Compute:
    """The frame loop's p99 over its limit, (median + budget) x 1.2, on the
    thread's CPU time (a shared machine's preemption left out, as the
    incremental steps' targets do), the wall-time ratio beside it."""

    def compute(m: dict[str, float]) -> tuple[float, str] | str:
        for key in ("frames.cpu_p99", "frames.cpu_p99_limit", "frames.p99", "frames.p99_limit"):
            if key not in m:
                return _missing(key)
        return m["frames.cpu_p99"] / m["frames.cpu_p99_limit"], (
            f"CPU: p99 {_human(m['frames.cpu_p99'])} / limit {_human(m['frames.cpu_p99_limit'])} "
            f"(median {_human(m.get('frames.cpu_median', math.nan))} + 1 ms, + 20%); wall: "
            f"x{m['frames.p99'] / m['frames.p99_limit']:.2f} "
            f"(p99 {_human(m['frames.p99'])}, median {_human(m.get('frames.median', math.nan))})"
        )

    return compute


def _format(value: float, unit: str) -> str:
    if unit == "n":
        return f"{value:,.0f}"
    if unit == "x":
        return "x inf" if math.isinf(value) else f"x{value:.2f}"
    if unit == "s":
        return f"{value * 1e3:.3f} ms"
    if unit == "%":
        return f"{value:.1%}"
    return f"{value:,.1f} B"


def targets_table(config: Config) -> Table:
    """One row per target: the measured value, how, and met / not met."""
    table = Table(
        "Targets: met or not, from this run's figures",
        ["target", "measured", "from", "status"],
        description=(
            "Each target computed from figures measured in this run (ratios are zsharp_py "
            "over the peer; of two figures timed in the same interleaved rounds, the median "
            "of the per-round ratios, so the *from* column's two medians need not divide to "
            "it). *not measured*: a figure is missing (a peer unavailable here, or a family "
            "not run)."
            + (
                " Quick run: the GC figures are from 10,000-object heaps and mean nothing."
                if config.quick
                else ""
            )
        ),
    )
    met = missed = 0
    for target in _targets(config):
        result = target.compute(METRICS)
        if isinstance(result, str):
            table.add(target.name, "-", result[:200], "not measured")
            continue
        value, how = result
        ok = value <= target.limit if target.compare == "<=" else value >= target.limit
        if math.isnan(value):
            table.add(target.name, "-", how, "not measured")
            continue
        met += ok
        missed += not ok
        table.add(target.name, _format(value, target.unit), how, "met" if ok else "**NOT MET**")
    table.notes.append(
        f"{met} met, {missed} not met, {len(table.rows) - met - missed} not measured"
    )
    return table
