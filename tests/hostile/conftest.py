"""The hostile matrix's bookkeeping (tests/hostile/test_hostile_conversions.py,
``MATRIX`` in tests/hostile_support.py): at the end of a session that
collected the matrix, a summary of how many distinct behaviours it checks
and how many of this run's cases reached their hook; with
``--update-hostile-reach``, the reach table (tests/hostile/reach.json) is
rewritten from what the reach tests measured."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from hostile_support import MATRIX

REACH_FILE = Path(__file__).with_name("reach.json")


def pytest_configure(config: pytest.Config) -> None:
    """With --update-hostile-reach, the reach tests record instead of checking."""
    if config.getoption("update_hostile_reach", default=False):
        MATRIX.measured = {}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write what the reach tests measured into the table: groups measured
    now replace their entry, groups no longer in the matrix are dropped,
    the others are kept."""
    if not MATRIX.measured:
        return
    old = json.loads(REACH_FILE.read_text())["groups"] if REACH_FILE.exists() else {}
    groups = {
        group: MATRIX.measured.get(group, old.get(group))
        for group in sorted(MATRIX.groups)
        if group in MATRIX.measured or group in old
    }
    lines = [f"    {json.dumps(group)}: {json.dumps(reach)}" for group, reach in groups.items()]
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    REACH_FILE.write_text(
        "{\n"
        f'  "about": {json.dumps(_ABOUT)},\n'
        f'  "python": "{python}",\n'
        '  "groups": {\n' + ",\n".join(lines) + "\n  }\n}\n"
    )


_ABOUT = (
    "How many times each group's trigger runs when it never acts, by mode: hook (the "
    "value's conversion hooks), gc (gc.callbacks at the start of a collection), del "
    "(finalisers of cyclic garbage). The matrix acts at those moments only. Written by "
    'python -m pytest tests/hostile/test_hostile_conversions.py -m "" -k test_reach_of '
    "--update-hostile-reach; checked by the same tests without the option."
)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How many distinct behaviours the matrix checks, and what this run reached."""
    if not MATRIX.groups:
        return  # the matrix was not collected
    cases = MATRIX.cases
    fire = sum(cases.values())
    write = terminalreporter.write_line
    write(
        f"hostile matrix: {fire + len(MATRIX.groups):,} distinct behaviours: "
        f"{fire:,} cases that act at a moment where a trigger runs ({cases['hook']:,} "
        f"conversion hook, {cases['gc']:,} cycle collector, {cases['del']:,} finaliser; "
        f'-m "" runs them all) and {len(MATRIX.groups):,} groups run plain, their '
        "triggers counted against tests/hostile/reach.json"
    )
    reached = MATRIX.reached
    if reached or MATRIX.plain:
        write(
            f"hostile matrix, this run: {sum(reached.values()):,} cases reached their "
            f"trigger ({reached['hook']:,} hook, {reached['gc']:,} collector, "
            f"{reached['del']:,} finaliser; the action refused in {MATRIX.refused:,}), "
            f"{MATRIX.plain:,} groups matched the reach table"
        )
    if MATRIX.measured:
        write(f"hostile matrix: {len(MATRIX.measured):,} groups measured into {REACH_FILE}")
