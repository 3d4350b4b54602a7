"""Coverage-guided fuzzing of the public API with atheris (libFuzzer).

    python tools/fuzz/fuzz_api.py [libFuzzer arguments] [CORPUS_DIR ...]

``tools/fuzz.sh`` runs it against the ASan/UBSan build of the native
library. Each input is one program of API calls (see ``harness.py``);
zsharp_py and the harness are instrumented for Python coverage, the native
library is not (libFuzzer's coverage comes from the Python side). A crash,
a sanitizer report, an undocumented exception or a failed heap check stops
the run and writes the input to ``crash-*``; replay it with
``python tools/fuzz/harness.py crash-...``.
"""

from __future__ import annotations

import os
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

with atheris.instrument_imports(include=["zsharp_py", "harness"]):
    import harness


def test_one_input(data: bytes) -> None:
    """libFuzzer's entry point: one input, one runtime (hostile operations included)."""
    harness.run_one(data, hostile=True)


def main() -> None:
    """Hand the command line to libFuzzer and run."""
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
