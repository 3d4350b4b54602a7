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

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_game_logic_script(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["game_logic.py", "--frames", "300", "--seed", "7"])
    runpy.run_path(str(EXAMPLES / "game_logic.py"), run_name="__main__")
    out = capsys.readouterr().out
    spawned, killed, escaped, on_field = map(
        int,
        re.search(
            r"300 frames: (\d+) creeps spawned, (\d+) killed, (\d+) escaped, (\d+) still on", out
        ).groups(),
    )
    assert spawned == 30 and killed > 0 and killed + escaped + on_field == spawned
    cycles, freed = map(
        int,
        re.search(
            r"GC: (\d+) incremental cycles finished during play, (\d+) objects freed", out
        ).groups(),
    )
    assert cycles >= 10 and freed == killed + escaped  # the dead and the escaped, no more
    live, towers, creeps = map(
        int,
        re.search(
            r"live objects after the final collection: (\d+) \(arena, (\d+) towers, (\d+) creeps",
            out,
        ).groups(),
    )
    assert (towers, creeps) == (4, on_field) and live == 1 + towers + creeps
    assert "last kill through its weak pointer: None" in out
    assert re.search(
        r"the first creep killed, touched again: Creep 'Creep_\d+' has expired: "
        r"it was marked as garbage",
        out,
    )


def test_native_host_builds_and_runs(tmp_path: Path) -> None:
    host = tmp_path / "host"
    build = subprocess.run(
        ["sh", str(EXAMPLES / "native_host" / "build.sh"), str(host)],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    assert build.stderr == "", f"the compiler printed warnings:\n{build.stderr}"
    run = subprocess.run(
        [str(host), "20"], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "Particle.tick's block is struct Particle_tick_params { double dt; };" in out
    spawned = sum(20 + (frame % 7) * 5 for frame in range(20))
    ticks = int(
        re.search(
            rf"host: 20 frames, {spawned} particles spawned, (\d+) tick calls "
            r"from C",
            out,
        ).group(1)
    )
    assert ticks > spawned  # each particle ticks from C for several frames
    # Cycles start on simulated time, but each step runs on a wall-clock
    # budget: which frame finishes the first one depends on the machine.
    assert re.search(r"host: frame +\d+: GC cycle 1 finished", out), out
    cycles, during = map(
        int, re.search(r"(\d+) incremental GC cycles freed (\d+) objects during play", out).groups()
    )
    final, live = map(
        int, re.search(r"final collection freed (\d+), (\d+) live objects left", out).groups()
    )
    assert cycles == out.count("finished (") >= 2
    # Every particle, the emitter and the particle start() made to register the class.
    assert live == 0 and during + final == spawned + 2
    bad = subprocess.run([str(host), "0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "usage" in bad.stderr


@pytest.mark.parametrize("options", [[], ["--zs-stress"]])
def test_memory_safety_suite(pytester: pytest.Pytester, options: list[str]) -> None:
    """The suite passes as written, and under the plugin's stress switches."""
    result = pytester.runpytest(
        str(EXAMPLES / "memory_safety"), "-p", "no:hypothesispytest", *options
    )
    result.assert_outcomes(passed=15)


def test_native_function_gives_hosts_the_c_api() -> None:
    """What the native host calls the C API through (the library's symbols are hidden)."""
    from zsharp_py.lowlevel import native_function

    addresses = {
        native_function(name)
        for name in ("zs_call_each", "zs_find_class", "zs_gc_get_stats", "zs_live_objects")
    }
    assert len(addresses) == 4 and 0 not in addresses
    for bad in ("ZS_OK", "zs_no_such_function", "printf", 42):
        with pytest.raises(ValueError, match="not a function of the C API"):
            native_function(bad)  # type: ignore[arg-type]
    # The scripting layer's own protocol is not handed out either: a host
    # taking the dying objects, or making the heap forget a proxy, could
    # leave a proxy pointing at freed memory.
    for managed in ("zs_gc_take_expiring", "zs_forget_conjugate", "zs_conjugates_dropped"):
        with pytest.raises(ValueError, match="scripting layer's own protocol"):
            native_function(managed)


def test_include_dir_holds_the_c_api_header() -> None:
    """``include_dir()`` is the ``-I`` folder of zsharp.h (the build script
    uses it): every header installed in the package (in an editable install
    too), the same bytes as the source tree's, whose declarations the
    binding is built from: the host's API, the managed side's protocol, the
    debug switches and the two tables."""
    from zsharp_py.lowlevel import include_dir

    header = Path(include_dir()) / "zsharp.h"
    assert "zs_call_each" in header.read_text(encoding="utf-8")
    sources = Path(__file__).resolve().parents[2] / "native" / "include"
    names = ("zsharp.h", "zsharp_managed.h", "zsharp_debug.h", "zsharp_api.h", "zsharp_python.h")
    assert sorted(p.name for p in sources.glob("*.h")) == sorted(names)
    for name in names:
        assert (Path(include_dir()) / name).read_bytes() == (sources / name).read_bytes(), name
