"""The scaling plot: full-collection time against heap size for every GC peer
and the floors (``_harness.SERIES``, recorded by ``gc_peers``), drawn with
matplotlib (a benchmark-only dependency that full runs pip-install)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from ._build import ensure_package
from ._harness import SERIES, Config, Unavailable

__all__ = ["pyplot_or_reason", "write_plot"]

STYLES = {
    "zsharp_py": ("tab:blue", "-"),
    "Boehm": ("tab:orange", "-"),
    "CPython": ("tab:green", "-"),
    "floor": ("gray", ":"),
}


def _style(label: str, index: int) -> dict[str, Any]:
    for prefix, (color, line) in STYLES.items():
        if label.startswith(prefix):
            parallel = "1 marker" not in label and prefix in ("zsharp_py", "Boehm")
            random_floor = "random" in label and prefix == "floor"
            return {
                "color": color,
                "linestyle": "--" if parallel or random_floor else line,
                "marker": "os^v"[index % 4],
            }
    return {"marker": "o"}


def pyplot_or_reason(config: Config) -> tuple[Any, str]:
    """matplotlib's pyplot drawing to files (installed first where the run
    may install), or None and why it is not there."""
    try:
        ensure_package(config, "matplotlib", "matplotlib")
        matplotlib = importlib.import_module("matplotlib")
        matplotlib.use("Agg")
        return importlib.import_module("matplotlib.pyplot"), ""
    except (Unavailable, ImportError) as reason:
        return None, str(reason)


def write_plot(config: Config, path: Path) -> str:
    """Draw the curves into ``path``; return a line for the report."""
    if not SERIES:
        return ""
    pyplot, missing = pyplot_or_reason(config)
    if pyplot is None:
        return f"Scaling plot not drawn: {missing}"
    shapes = [s for s in ("tree", "random") if any(k.startswith(s + "|") for k in SERIES)]
    figure, axes = pyplot.subplots(len(shapes), 2, figsize=(13, 5.2 * len(shapes)), squeeze=False)
    for row, shape in enumerate(shapes):
        total, per = axes[row][0], axes[row][1]
        curves = [
            (key.split("|", 1)[1], sorted(points))
            for key, points in SERIES.items()
            if key.startswith(shape + "|")
        ]
        for index, (label, points) in enumerate(curves):
            sizes = [n for n, _ in points]
            style = _style(label, index)
            total.plot(sizes, [s * 1e3 for _, s in points], label=label, **style)
            per.plot(sizes, [s * 1e9 / n for n, s in points], label=label, **style)
        reference = next((p for label, p in curves if label.startswith("zsharp_py, 1")), None)
        if reference:
            n0, s0 = reference[0]
            xs = [n for n, _ in reference]
            total.plot(
                xs,
                [s0 * 1e3 * n / n0 for n in xs],
                color="black",
                linewidth=0.8,
                linestyle="-.",
                label="linear from zsharp_py's first point",
            )
        total.set(
            xscale="log",
            yscale="log",
            xlabel="objects in the heap",
            ylabel="one full collection, ms",
            title=f"{shape}: collection time (slope 1 on log-log = linear)",
        )
        per.set(
            xscale="log",
            yscale="log",
            xlabel="objects in the heap",
            ylabel="ns per object",
            title=f"{shape}: ns per object (flat = linear growth)",
        )
        for axis in (total, per):
            axis.grid(True, which="both", alpha=0.3)
        total.legend(fontsize=8)
    figure.suptitle(
        "Full collection, everything live: zsharp_py, Boehm, CPython and the "
        "memory floors (same run)" + (" - QUICK RUN" if config.quick else "")
    )
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    pyplot.close(figure)
    return f"![Scaling of a full collection]({path.name})"
