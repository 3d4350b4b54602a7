"""cffi build script: compiles native/src/*.c, and the sample engine module
native/engine/sample_engine.c (the host the tests, examples and demo
script), into ``zsharp_py._native_lib``.

API (out-of-line) mode; the declarations are read from
``native/include/zsharp.h`` and ``native/engine/sample_engine.h``
themselves. Environment switches:

``ZSHARP_SANITIZE=1``
    build with ``-fsanitize=address,undefined`` (run Python with libasan
    preloaded; see README "Sanitizers").
``ZSHARP_SANITIZE=nolink``
    the same instrumentation, but the sanitizer runtime is not linked in:
    whoever runs it preloads one (``tools/fuzz.sh`` preloads atheris's
    ASan+libFuzzer runtime, which must be the only ASan runtime loaded).
``ZSHARP_SANITIZE=thread``
    build with ``-fsanitize=thread`` (ThreadSanitizer) instead; run Python
    with libtsan and tools/tsan/c11_threads.c preloaded (``tools/tsan.sh``
    does, and says why the second one is needed).
``ZSHARP_NO_SLAB=1``
    allocate every native object with its own malloc block instead of from
    the object slabs (``-DZS_NO_OBJECT_SLAB``), so memory-safety tools see a
    use after free of one object (``tools/valgrind.sh`` sets it; the
    SANITIZE builds always do this).
``ZSHARP_ASSERTS=1``
    keep the C ``assert`` invariant checks (on by default with SANITIZE).
``ZSHARP_DEBUG=1``
    build with ``-O1 -g`` (exact stacks for valgrind and debuggers; see
    README "Testing").
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parents[2]  # the checkout: src/zsharp_py/_build.py
NATIVE = ROOT / "native"


def header_cdef(header: Path = NATIVE / "include" / "zsharp.h") -> str:
    """The cffi declarations, read from a header itself (so the binding can
    never drift from the C API): comments, includes, include guards and
    function-like macros go; the other ``#define``s (all integer constants)
    become ``#define X ...``, whose values the compiler supplies."""
    text = re.sub(r"/\*.*?\*/", "", header.read_text(encoding="utf-8"), flags=re.S)
    lines = text.split("\n")
    guards = {m.group(1) for m in re.finditer(r"^\s*#ifndef\s+(\w+)", text, flags=re.M)}
    out: list[str] = []
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.startswith("#ifdef __cplusplus"):
            while not lines[i].strip().startswith("#endif"):
                i += 1
        elif stripped.startswith("#define"):
            full = stripped
            while full.endswith("\\"):
                i += 1
                full = full[:-1] + " " + lines[i].strip()
            match = re.match(r"#define\s+(\w+)(\(?)", full)
            if match and not match.group(2) and match.group(1) not in guards:
                out.append(f"#define {match.group(1)} ...")  # integer constants
        elif not stripped.startswith(("#include", "#ifndef", "#endif")):
            out.append(lines[i])
        i += 1
    return "\n".join(out)


def _compile_args() -> tuple[list[str], list[str]]:
    cflags = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden"]
    ldflags: list[str] = []
    sanitize = os.environ.get("ZSHARP_SANITIZE")
    if sanitize == "thread":
        cflags += ["-fsanitize=thread", "-fno-omit-frame-pointer", "-O1", "-g", "-UNDEBUG"]
        ldflags += ["-fsanitize=thread"]
    elif sanitize in ("1", "nolink"):
        cflags += [
            "-fsanitize=address,undefined",
            "-fno-omit-frame-pointer",
            "-fno-sanitize-recover=all",
            "-O1",
            "-g",
            "-UNDEBUG",
            "-DZS_NO_OBJECT_SLAB",
        ]
        if sanitize == "1":
            ldflags += ["-fsanitize=address,undefined"]
    elif os.environ.get("ZSHARP_ASSERTS") == "1":
        cflags += ["-UNDEBUG"]
    if os.environ.get("ZSHARP_NO_SLAB") == "1" and "-DZS_NO_OBJECT_SLAB" not in cflags:
        cflags += ["-DZS_NO_OBJECT_SLAB"]
    if os.environ.get("ZSHARP_DEBUG") == "1":
        cflags += ["-O1", "-g", "-fno-omit-frame-pointer"]
    return cflags, ldflags


def make_ffibuilder() -> FFI:
    """Return the FFI builder for the native library."""
    builder = FFI()
    builder.cdef(header_cdef())
    # The sample engine's install function and layouts (struct zs_api is
    # declared, opaque, by zsharp.h): lib.zs_sample_engine_install(...).
    builder.cdef(header_cdef(NATIVE / "engine" / "sample_engine.h"))
    cflags, ldflags = _compile_args()
    sources = sorted(
        str(p.relative_to(ROOT))
        for folder in ("src", "engine")
        for p in (NATIVE / folder).glob("*.c")
    )
    builder.set_source(
        "zsharp_py._native_lib",
        '#include "zsharp.h"\n#include "sample_engine.h"\n',
        sources=sources,
        include_dirs=[str(NATIVE / "include"), str(NATIVE / "src"), str(NATIVE / "engine")],
        extra_compile_args=cflags,
        extra_link_args=ldflags,
    )
    return builder


def core_extension(extension: type) -> object:
    """The ``zsharp_py._core`` extension (native/binding/*.c): the conjugate
    hot path, built with the same flags as the native heap. It does not link
    the heap: Python hands it the heap's function addresses at import."""
    cflags, ldflags = _compile_args()
    sources = sorted(str(p.relative_to(ROOT)) for p in (NATIVE / "binding").glob("*.c"))
    return extension(
        "zsharp_py._core",
        sources=sources,
        include_dirs=[str(NATIVE / "include"), str(NATIVE / "binding")],
        depends=[
            str((NATIVE / "binding" / "core.h").relative_to(ROOT)),
            str((NATIVE / "include" / "zsharp.h").relative_to(ROOT)),
        ],
        extra_compile_args=cflags,
        extra_link_args=ldflags,
    )


ffibuilder = make_ffibuilder()

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
