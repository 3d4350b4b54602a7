"""Print one of the two commands README.md starts with (1: install and run
the demo, 2: install the test dependencies and run the suite), exactly as
written there, so that .ci/run executes README's text itself."""

from __future__ import annotations

import re
import sys
from pathlib import Path


def readme_commands(readme: Path) -> list[str]:
    """The first two ```bash blocks of ``readme``."""
    text = readme.read_text(encoding="utf-8")
    return re.findall(r"```(?:bash|sh)\n(.*?)\n```", text, re.DOTALL)[:2]


if __name__ == "__main__":
    which = int(sys.argv[1])
    print(readme_commands(Path(__file__).resolve().parent.parent / "README.md")[which - 1])
