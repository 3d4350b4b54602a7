"""Every example in examples/ runs and says what it should: the game-logic
script, the native host (built with the C compiler and run), and the
memory-safety suite (through pytest, with the plugin)."""
from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_game_logic_script(capsys: pytest.CaptureFixture[str],
                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["game_logic.py", "--frames", "300", "--seed", "7"])
    runpy.run_path(str(EXAMPLES / "game_logic.py"), run_name="__main__")
    out = capsys.readouterr().out
    spawned, killed, escaped, on_field = map(int, re.search(
        r"300 frames: (\d+) creeps spawned, (\d+) killed, (\d+) escaped, (\d+) still on",
        out).groups())
    assert spawned == 30 and killed > 0 and killed + escaped + on_field == spawned
    cycles, freed = map(int, re.search(
        r"GC: (\d+) incremental cycles finished during play, (\d+) objects freed", out).groups())
    assert cycles >= 10 and freed == killed + escaped       # the dead and the escaped, no more
    live, towers, creeps = map(int, re.search(
        r"live objects after the final collection: (\d+) \(arena, (\d+) towers, (\d+) creeps",
        out).groups())
    assert (towers, creeps) == (4, on_field) and live == 1 + towers + creeps
    assert "last kill through its weak pointer: None" in out
    assert re.search(r"the first creep killed, touched again: Creep 'Creep_\d+' has expired: "
                     r"it was marked as garbage", out)


def test_native_host_builds_and_runs(tmp_path: Path) -> None:
    host = tmp_path / "host"
    build = subprocess.run(["sh", str(EXAMPLES / "native_host" / "build.sh"), str(host)],
                           env={**os.environ, "PYTHON": sys.executable},
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stdout + build.stderr
    assert build.stderr == "", f"the compiler printed warnings:\n{build.stderr}"
    run = subprocess.run([str(host), "30"], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    spawned = sum(20 + (frame % 7) * 5 for frame in range(30))
    assert f"host: 30 frames, {spawned} particles spawned" in out
    assert "host: frame   6: GC cycle 1 finished" in out
    cycles, during = map(int, re.search(
        r"(\d+) incremental GC cycles freed (\d+) objects during play", out).groups())
    final, live = map(int, re.search(
        r"final collection freed (\d+), (\d+) live objects left", out).groups())
    assert cycles == out.count("finished,") >= 3
    assert live == 0 and during + final == spawned + 1     # every particle and the emitter
    bad = subprocess.run([str(host), "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "usage" in bad.stderr


@pytest.mark.parametrize("options", [[], ["--zs-stress"]])
def test_memory_safety_suite(pytester: pytest.Pytester, options: list[str]) -> None:
    """The suite passes as written, and under the plugin's stress switches."""
    result = pytester.runpytest(str(EXAMPLES / "memory_safety"), "-p", "no:hypothesispytest",
                                *options)
    result.assert_outcomes(passed=15)
