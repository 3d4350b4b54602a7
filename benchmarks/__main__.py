"""Run the zsharp_py benchmarks side by side with their peers, print the
tables and write a markdown report (benchmarks/RESULTS.md for a full run of
every family)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path

from . import FAMILIES, frames, load
from ._harness import Config, Table, clock, load_average, machine_info
from ._plot import write_plot
from ._targets import targets_table

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
PLOT_NAME = "gc_scaling.png"


def _markdown(
    config: Config,
    families: list[str],
    sections: list[tuple[str, list[Table]]],
    info: dict[str, str],
    seconds: float,
    targets: Table,
    plot: str,
) -> str:
    command = "python -m benchmarks" + (" --quick" if config.quick else "")
    if families != list(FAMILIES):
        command += "".join(f" --only {name}" for name in families)
    out = [
        "# zsharp_py benchmark results",
        "",
        f"Produced by `{command}` in {seconds:,.0f} s. "
        "See `benchmarks/README.md` for what each figure means. "
        "Ratios are computed from figures measured in this same run.",
        "",
        "## Machine",
        "",
    ]
    out += [f"- **{key}**: {value}" for key, value in info.items()]
    if config.quick:
        out += [
            "",
            "> **Quick (smoke) run**: tiny sizes and few rounds; these numbers are not meaningful.",
        ]
    busy = _busy_note(info)
    if busy:
        out += ["", busy]
    out += ["", "## Targets", "", targets.render_markdown()]
    if plot:
        out += ["", plot]
    for title, tables in sections:
        out += ["", f"## {title}", ""]
        for table in tables:
            out += [table.render_markdown(), ""]
    return "\n".join(out).rstrip() + "\n"


def _busy_note(info: dict[str, str]) -> str:
    """A warning when other processes loaded the machine during the run."""
    loads = []
    for key in ("load average at start", "load average at end"):
        with contextlib.suppress(ValueError, IndexError):
            loads.append(float(info.get(key, "").split()[0]))
    cores = os.cpu_count() or 1
    if not loads or max(loads) < 0.5 * cores:
        return ""
    return (
        f"> **Shared machine**: the load average was {' then '.join(f'{v:.1f}' for v in loads)} "
        f"on {cores} cores (other processes running), so absolute times are inflated and "
        "wall-time ratios are noisier than on an idle machine. The GC tables also give "
        "CPU times, which exclude preemption."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: tiny sizes, few rounds (a few seconds); does not touch RESULTS.md",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=list(FAMILIES),
        metavar="NAME",
        help=f"run only this family (repeatable): {', '.join(FAMILIES)}",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="write the markdown report here (default: benchmarks/RESULTS.md "
        "for a full run of every family, a temporary file otherwise)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--no-install",
        action="store_true",
        help="never pip/apt-install peers nor compile the C++ ones (quick runs "
        "never do); missing peers become notes in the tables",
    )
    args = parser.parse_args(argv)

    config = Config(quick=args.quick, verbose=not args.quiet, allow_install=not args.no_install)
    families = args.only or list(FAMILIES)
    families = [name for name in FAMILIES if name in families]  # canonical order
    info = machine_info()
    width = max(len(key) for key in info)
    for key, value in info.items():
        print(f"{key.ljust(width)}  {value}")
    print()

    start = clock()
    sections: list[tuple[str, list[Table]]] = []
    failures: list[str] = []
    for name in families:
        module = load(name)
        tables = module.run(config)
        sections.append((module.TITLE, tables))
        for table in tables:
            print(table.render_text())
            print()
            failures += table.failures
    elapsed = clock() - start
    info["load average at end"] = load_average()

    if args.output is not None:
        output = args.output
    elif not config.quick and families == list(FAMILIES):
        output = RESULTS
    else:
        # Quick or partial runs never replace the committed full-run numbers.
        output = Path(tempfile.gettempdir()) / "zsharp_py_benchmarks_results.md"
    targets = targets_table(config)
    print(targets.render_text())
    print()
    plot = write_plot(config, output.parent / PLOT_NAME)
    frame_plot = frames.write_frame_plot(config, output.parent / frames.PLOT_NAME)
    if frame_plot:
        plot = "\n\n".join(line for line in (plot, frame_plot) if line)
    output.write_text(
        _markdown(config, families, sections, info, elapsed, targets, plot), encoding="utf-8"
    )
    print(
        f"wrote {output} ({elapsed:,.1f} s)"
        + (f" and {output.parent / PLOT_NAME}" if plot.startswith("!") else "")
    )
    if failures:
        print("sanity checks failed:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
