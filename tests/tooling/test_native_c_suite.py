"""Build and run the C-level tests (native/tests) with the strict warning
flags, so the test command proves the C code is -Wall -Wextra -Werror clean."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "native"
STRICT = ["-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pedantic"]


def _compiler() -> str:
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError("no C compiler on PATH (cc, gcc or clang is required)")


def test_native_c_suite_passes(tmp_path: Path) -> None:
    binary = tmp_path / "test_native"
    sources = [
        str(path)
        for folder in ("src", "engine", "tests")
        for path in sorted((NATIVE / folder).glob("*.c"))
    ]
    build = subprocess.run(
        [
            _compiler(),
            *STRICT,
            f"-I{NATIVE / 'include'}",
            f"-I{NATIVE / 'src'}",
            f"-I{NATIVE / 'engine'}",
            *sources,
            "-o",
            str(binary),
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    assert build.stderr == "", f"compiler printed warnings:\n{build.stderr}"
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=300)
    sys.stdout.write(run.stdout[-2000:])
    summary = re.search(r"^(\d+) passed, (\d+) failed$", run.stdout, re.MULTILINE)
    assert summary is not None, run.stdout + run.stderr
    passed, failed = map(int, summary.groups())
    assert run.returncode == 0 and failed == 0 and passed > 0, run.stdout + run.stderr
