"""The demo (``python -m zsharp_py demo``) runs and reports GC activity."""
from __future__ import annotations

import io
import subprocess
import sys

from zsharp_py._demo import run_demo


def test_demo_reports_what_the_collector_did() -> None:
    out = io.StringIO()
    totals = run_demo(frames=9, seed=3, collect_every=3, out=out, particles=2_000, budget=0.01)
    text = out.getvalue()
    assert totals["collections"] >= 2            # at least one tick cycle plus the final one
    assert totals["freed"] > 0 and totals["freed"] == totals["expired"]
    assert totals["spawned"] == 27
    assert "GC cycle #1 done" in text and "final full collection" in text
    assert "survived" in text


def test_demo_command_line() -> None:
    result = subprocess.run([sys.executable, "-m", "zsharp_py", "demo", "--frames", "4"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "final full collection" in result.stdout
    bad = subprocess.run([sys.executable, "-m", "zsharp_py", "demo", "--frames", "0"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "must be positive" in bad.stderr
