"""Sphinx configuration of the zsharp_py documentation.

Build (from the repository root, after ``pip install -e '.[docs]'``):
``python -m sphinx -W --keep-going -b html docs docs/_build/html``.
The pages are Markdown (MyST); the API reference is generated from the
docstrings of the installed package by autodoc.
"""

from __future__ import annotations

import re
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent

project = "zsharp_py"
author = "the zsharp_py authors"
copyright = "the zsharp_py authors (MIT licence)"
release = re.search(
    r'^version = "([^"]+)"', (_ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.MULTILINE
)[1]  # type: ignore[index]
version = release

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# MyST: heading anchors, so that [text](page.md#a-heading) links resolve.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

# autodoc: the package's docstrings are reStructuredText with ``literals``.
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "signature"

html_theme = "alabaster"
html_title = f"zsharp_py {release}"
html_theme_options = {
    "description": "Python over a native object heap with an Unreal-style GC",
    "fixed_sidebar": False,
}
