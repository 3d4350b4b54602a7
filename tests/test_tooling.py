"""The package's own standards: mypy --strict clean, README commands in
sync with CI, README examples runnable."""
from __future__ import annotations

import doctest
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```(?:bash|sh)\n(.*?)\n```", text, re.DOTALL)[:2]


def test_package_is_mypy_strict_clean() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ci_runs_the_readme_test_command() -> None:
    install_and_demo, install_and_test = _readme_commands()
    assert "python -m zsharp_py demo" in install_and_demo
    ci_script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert install_and_test.strip() in ci_script


def test_readme_examples_run() -> None:
    failures, attempted = doctest.testfile(str(ROOT / "README.md"), module_relative=False,
                                           optionflags=doctest.ELLIPSIS)
    assert attempted > 0
    assert failures == 0
