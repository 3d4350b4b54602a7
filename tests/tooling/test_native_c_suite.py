"""Build and run the C-level tests (native/tests) with the strict warning
flags, so the test command proves the C code is -Wall -Wextra -Werror clean;
and check the runner's selection: a filter that selects nothing fails, and
the tests tagged THREADED_TEST (what the ThreadSanitizer smoke run takes)
are the ones that start threads, as many as docs/reliability.md says."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "native"
STRICT = ["-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pedantic"]
NUMBER_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
]


def _compiler() -> str:
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError("no C compiler on PATH (cc, gcc or clang is required)")


@pytest.fixture(scope="module")
def c_tests(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The C test program, built once for this file with the strict flags."""
    binary = tmp_path_factory.mktemp("c_suite") / "test_native"
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
            "-pthread",
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    assert build.stderr == "", f"compiler printed warnings:\n{build.stderr}"
    return binary


def _run(binary: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=300)


def test_native_c_suite_passes(c_tests: Path) -> None:
    """Every C test passes; the runner also fails a test whose THREADED_TEST
    tag does not match whether it started a thread (a parallel mark or
    start_thread)."""
    run = _run(c_tests)
    sys.stdout.write(run.stdout[-2000:])
    summary = re.search(r"^(\d+) passed, (\d+) failed$", run.stdout, re.MULTILINE)
    assert summary is not None, run.stdout + run.stderr
    passed, failed = map(int, summary.groups())
    assert run.returncode == 0 and failed == 0 and passed > 0, run.stdout + run.stderr
    assert passed == len(_listed(c_tests)), "a run takes every listed test"


def _listed(binary: Path, *args: str) -> list[str]:
    run = _run(binary, "--list", *args)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[-1] == f"{len(lines) - 1} listed", run.stdout
    return [line.split()[0] for line in lines[:-1]]


@pytest.mark.parametrize(
    "args",
    [
        ["no_test_has_this_name"],
        ["test_lock_excludes_and_recurses", "no_test_has_this_name"],
        ["--threaded", "test_million_object_chain", "test_heap_basics_no_such"],
        ["--threaded", "test_find_object_across_purges"],
        ["--no-such-option"],
    ],
)
def test_a_selection_that_names_nothing_fails(c_tests: Path, args: list[str]) -> None:
    """A filter that matches no test (a typo, a renamed test) exits with 2
    and says which, even when another filter matched: "0 passed, 0 failed"
    is not a pass."""
    run = _run(c_tests, *args)
    assert run.returncode == 2, run.stdout + run.stderr
    named = [arg for arg in args if not arg.startswith("--")]
    if args[0] == "--no-such-option":
        assert "unknown option --no-such-option" in run.stderr
    else:
        assert any(f'no test matches "{name}"' in run.stderr for name in named), run.stderr
    assert "FAIL" not in run.stdout


def test_filters_select_by_substring_and_run_what_they_select(c_tests: Path) -> None:
    """Several filters select the union of their matches, each test once."""
    run = _run(c_tests, "test_lock_", "lock_sleeper")
    assert run.returncode == 0, run.stdout + run.stderr
    ran = re.findall(r"^ok   (\w+)", run.stdout, re.MULTILINE)
    assert ran == ["test_lock_excludes_and_recurses", "test_lock_sleeper_waits_for_the_owner"]
    assert run.stdout.splitlines()[-1] == "2 passed, 0 failed"


def test_no_c_test_calls_thrd_create_itself() -> None:
    """The runner notes a test's threads through start_thread (and parallel
    marks through its heap checks); a bare thrd_create in a test would start
    threads the THREADED_TEST check cannot see."""
    calls = {
        path.name: len(re.findall(r"\bthrd_create\s*\(", path.read_text()))
        for path in sorted((NATIVE / "tests").glob("*.c"))
    }
    assert {name: n for name, n in calls.items() if n} == {"test_support.c": 1}, calls


def test_the_tsan_smoke_run_takes_every_tagged_c_test_and_the_docs_count_them(
    c_tests: Path,
) -> None:
    """tools/tsan.sh --smoke runs the C tests with --threaded (the tagged
    ones: every test that starts a thread, the runner checks the tags), and
    docs/reliability.md states how many there are."""
    threaded = _listed(c_tests, "--threaded")
    assert "test_lock_excludes_and_recurses" in threaded
    assert "test_lock_sleeper_waits_for_the_owner" in threaded
    tsan = (ROOT / "tools" / "tsan.sh").read_text()
    assert re.search(r'"\$work/test_native_tsan" --threaded\n', tsan), "tsan.sh --smoke"
    reliability = (ROOT / "docs" / "reliability.md").read_text()
    stated = re.findall(r"the (\w+)\s+C\s+tests\s+that\s+start\s+threads", reliability)
    assert stated, "docs/reliability.md no longer says how many C tests start threads"
    assert stated == [NUMBER_WORDS[len(threaded)]] * len(stated), (
        f"docs/reliability.md says {stated}; {len(threaded)} are tagged: {threaded}"
    )
