"""Every code example of the documentation runs: each page of docs/ (and
README.md) is one test, its examples run in order in one fresh namespace,
and a broken example fails with its page and line.

What a page's fenced blocks mean:

- ```python with ``>>>`` prompts: a doctest (``ELLIPSIS`` on), its output
  compared;
- ```python without prompts: executed (an exception fails the example);
  one whose first line is a comment naming a test module (``# test_x.py``)
  is a pytest module instead: it is written to a temporary folder under
  that name and run by pytest in a subprocess, and must pass;
- ```console: a transcript. Each ``$ command`` line runs (``python`` is
  this interpreter, ``zsharp-py`` the installed script; help at 100
  columns) and must print exactly the lines that follow it;
- ```bash (installation and contributor commands: README's first two run
  in CI, .ci/run), ```text (output shown, file trees) and MyST directives
  (```{toctree}...) are not run.

Any other fence language fails the page, so no example can be added that
nothing runs.
"""

from __future__ import annotations

import doctest
import os
import re
import shlex
import subprocess
import sys
import tempfile
import traceback
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PAGES = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    *sorted(path for path in (ROOT / "docs").rglob("*.md") if "_build" not in path.parts),
]

RUN = {"python", "console"}
SHOWN = {"bash", "text"}

_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_TEST_MODULE = re.compile(r"# (test_\w+\.py)\s*$")


@dataclass
class Block:
    """One fenced block: its language, its text and the line of the page
    its text starts on."""

    language: str
    text: str
    line: int


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, in order."""
    text = page.read_text(encoding="utf-8")
    return [
        Block(match[1].strip().split(" ")[0], match[2], text.count("\n", 0, match.start(2)) + 1)
        for match in _FENCE.finditer(text)
    ]


def examples(page: Path) -> list[Block]:
    """The blocks of ``page`` that run."""
    return [block for block in blocks(page) if block.language in RUN]


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix() if page.is_relative_to(ROOT) else page.name


def _run_doctest(page: Path, block: Block, namespace: dict[str, object]) -> list[str]:
    test = doctest.DocTestParser().get_doctest(
        block.text, namespace, _name(page), _name(page), block.line - 1
    )
    test.globs = namespace  # get_doctest copies it: the page's examples share one namespace
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=report.append, clear_globs=False)
    return ["".join(report)] if runner.failures else []


def _run_code(page: Path, block: Block, namespace: dict[str, object]) -> list[str]:
    # Padded so that tracebacks name the page's own line numbers.
    code = compile("\n" * (block.line - 1) + block.text, _name(page), "exec")
    try:
        exec(code, namespace)  # noqa: S102 (running the page's example is the test)
    except BaseException:  # any failure of the example is reported
        return [f"{_name(page)}:{block.line}: the example raised\n{traceback.format_exc()}"]
    return []


def _run_test_module(page: Path, block: Block, module: str) -> list[str]:
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, module).write_text(block.text, encoding="utf-8")
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", module],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=120,
        )
    if result.returncode != 0:
        return [
            f"{_name(page)}:{block.line}: the test module {module} failed under pytest\n"
            f"{result.stdout}{result.stderr}"
        ]
    return []


def _console_commands(block: Block) -> list[tuple[int, str, str]]:
    """(line, command, expected output) of each ``$ command`` of a transcript."""
    commands: list[tuple[int, str, list[str]]] = []
    for offset, line in enumerate(block.text.splitlines()):
        if line.startswith("$ "):
            commands.append((block.line + offset, line[2:], []))
        elif commands:
            commands[-1][2].append(line)
        elif line.strip():
            raise AssertionError(f"line {block.line + offset}: output before any `$ ` command")
    return [(line, command, "\n".join(output)) for line, command, output in commands]


def _run_console(page: Path, block: Block) -> list[str]:
    failures: list[str] = []
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "COLUMNS": "100", "PATH": bin_dir + os.pathsep + os.environ["PATH"]}
    for line, command, expected in _console_commands(block):
        argv = shlex.split(command, comments=True)
        if argv[0] == "python":
            argv[0] = sys.executable
        result = subprocess.run(
            argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        output = (result.stdout + result.stderr).rstrip("\n")
        if output != expected.rstrip("\n"):
            failures.append(
                f"{_name(page)}:{line}: `{command}` printed\n{output}\n"
                f"--- instead of ---\n{expected}"
            )
    return failures


def run_page(page: Path) -> tuple[int, list[str]]:
    """Run every example of ``page`` in order in one fresh module namespace;
    (number of examples run, failure reports naming page and line)."""
    module = types.ModuleType("docs_example_" + re.sub(r"\W", "_", _name(page)))
    namespace = module.__dict__
    failures: list[str] = []
    count = 0
    sys.modules[module.__name__] = module  # so classes declared there resolve their annotations
    try:
        for block in blocks(page):
            if block.language in SHOWN or block.language.startswith("{"):
                continue  # shown, or a MyST directive ({toctree}, {include}, {eval-rst})
            if block.language not in RUN:
                failures.append(
                    f"{_name(page)}:{block.line}: a ```{block.language} block: "
                    "write examples as ```python (run) or ```console (run), "
                    "commands as ```bash, output as ```text"
                )
                continue
            count += 1
            if block.language == "console":
                failures += _run_console(page, block)
            elif ">>> " in block.text:
                failures += _run_doctest(page, block, namespace)
            elif found := _TEST_MODULE.match(block.text.splitlines()[0]):
                failures += _run_test_module(page, block, found[1])
            else:
                failures += _run_code(page, block, namespace)
    finally:
        del sys.modules[module.__name__]
    return count, failures


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_page_examples_run(page: Path) -> None:
    _, failures = run_page(page)
    assert not failures, "\n\n".join(failures)


def test_pages_have_examples() -> None:
    """The pages that teach show code that runs; the harness finds it."""
    for name in (
        "README.md",
        "docs/getting-started.md",
        "docs/object-model.md",
        "docs/values.md",
        "docs/pointers-and-delegates.md",
        "docs/garbage-collector.md",
        "docs/embedding.md",
        "docs/testing-your-code.md",
        "docs/errors.md",
    ):
        assert examples(ROOT / name), name


def test_the_harness_reports_page_and_line(tmp_path: Path) -> None:
    """A broken example fails with the page and the line it is on."""
    page = tmp_path / "_harness_check.md"
    text = (
        "# check\n\n```python\n>>> 1 + 1\n3\n\n```\n\n"
        "```python\nx = 1\nraise ValueError('broken')\n```\n"
    )
    page.write_text(text, encoding="utf-8")
    count, failures = run_page(page)
    assert count == 2 and len(failures) == 2
    assert 'File "_harness_check.md", line 4' in failures[0]
    assert failures[1].startswith("_harness_check.md:10:")
    assert '_harness_check.md", line 11' in failures[1]
