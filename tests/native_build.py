"""Build a small native host for a test: C source compiled against the
package's headers (``zsharp.h``, ``zsharp_api.h``, which includes
``zsharp_debug.h``) into a shared library, loaded with cffi in ABI mode.

The library's own symbols are hidden (it is linked into the extension), so
a host reaches the C API through the table ``zsharp_py.lowlevel.api_table()``
gives the address of (``const zs_api *``), handed to it by the test: as a
function's ``user`` pointer, or through an init function of its own.

    ffi, lib, path = compile_host(SOURCE, "movers", "int host_init(const void *);")
    lib.host_init(ffi.cast("const void *", api_table()))

Builds are cached by content in ``<tempdir>/zsharp-hosts/<sha256>.so`` (the
source, the flags and both headers), written under a temporary name and
then renamed into place, so parallel runs (pytest-xdist, two checkouts)
never load a half-written library.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cffi

from zsharp_py.lowlevel import include_dir

FLAGS = ("-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC")
HEADERS = ("zsharp.h", "zsharp_debug.h", "zsharp_api.h")  # zsharp_api.h includes the debug one


def compiler() -> str:
    """The C compiler: gcc, else cc."""
    for name in ("gcc", "cc"):
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError("no C compiler on PATH (gcc or cc is required)")


def cache_dir() -> Path:
    """Where built hosts are kept between runs."""
    folder = Path(tempfile.gettempdir()) / "zsharp-hosts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def compile_host(
    source: str, name: str, cdef: str = "", include_dirs: Sequence[Path] = ()
) -> tuple[cffi.FFI, Any, Path]:
    """Compile ``source`` (C11, warnings as errors) into a shared library, or
    reuse the cached build of the same source, and load it: returns an FFI
    with ``cdef`` declared, the library opened through it, and its path.
    ``name`` names the build in its temporary files and in a failure's
    message; ``include_dirs`` are searched for the source's own headers
    (after the package's), whose contents are part of the cache key. A
    compiler error or warning fails the test with its output."""
    includes = [Path(include_dir()), *include_dirs]
    headers = [includes[0] / h for h in HEADERS] + sorted(
        header for folder in include_dirs for header in Path(folder).glob("*.h")
    )
    digest = hashlib.sha256()
    for part in (source, "\0".join(FLAGS), *(h.read_text() for h in headers)):
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    path = cache_dir() / f"{digest.hexdigest()}.so"
    if not path.exists():
        _build(source, name, includes, path)
    ffi = cffi.FFI()
    if cdef:
        ffi.cdef(cdef)
    return ffi, ffi.dlopen(str(path)), path


def _build(source: str, name: str, includes: Sequence[Path], path: Path) -> None:
    """Compile into a temporary file beside ``path``, then rename it there."""
    handle, temporary = tempfile.mkstemp(prefix=f".{name}-", suffix=".so", dir=path.parent)
    os.close(handle)
    c_file = Path(temporary).with_suffix(".c")
    try:
        c_file.write_text(source, encoding="utf-8")
        build = subprocess.run(
            [compiler(), *FLAGS, *(f"-I{folder}" for folder in includes), str(c_file)]
            + ["-o", temporary],
            capture_output=True,
            text=True,
            check=False,
        )
        if build.returncode != 0 or build.stderr:
            raise AssertionError(f"building the host {name!r} failed:\n{build.stderr}")
        os.replace(temporary, path)
    finally:
        for leftover in (Path(temporary), c_file):
            leftover.unlink(missing_ok=True)
