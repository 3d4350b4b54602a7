"""Build script of the native parts: the native library a host links
(``zsharp_py/lib/libzsharp.so`` and ``libzsharp.a``, public symbols only,
with the headers, a pkg-config file and a CMake package), the ``_core``
extension and the cffi module ``zsharp_py._native_lib`` (the sample engine
and the declarations of the C API and ``native/engine/sample_engine.h``),
which link that same library.

The ``ZSHARP_*`` environment switches (sanitizers, asserts, debug builds,
no object slabs) are listed in CONTRIBUTING.md, "Build switches".

The declarations are read from the C API's headers (``zsharp.h``,
``zsharp_managed.h`` and ``zsharp_debug.h``: ``API_HEADERS``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parents[2]  # the checkout: src/zsharp_py/_build.py
NATIVE = ROOT / "native"
VERSION = "0.1.0"  # pyproject.toml's; the symbol version and the library's
# The C API by audience: the host's (zsharp.h), the managed side's protocol
# (zsharp_managed.h) and the test and stress switches (zsharp_debug.h). The
# library exports the functions of all three; the cffi module declares them
# all (Python is the managed side, and its tests call each one).
API_HEADERS = tuple(
    NATIVE / "include" / name for name in ("zsharp.h", "zsharp_managed.h", "zsharp_debug.h")
)
# Every header installed for hosts (include_dir()): those, and the two tables.
HEADERS = (*(header.name for header in API_HEADERS), "zsharp_api.h", "zsharp_python.h")


def header_cdef(*headers: Path) -> str:
    """The cffi declarations, read from headers themselves, in order
    (default: ``API_HEADERS``), so the binding can never drift from the C
    API: comments, includes, include guards and function-like macros go;
    the other ``#define``s (all integer constants) become ``#define X ...``,
    whose values the compiler supplies."""
    sources = [header.read_text(encoding="utf-8") for header in headers or API_HEADERS]
    text = re.sub(r"/\*.*?\*/", "", "\n".join(sources), flags=re.S)
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


def public_functions(*headers: Path) -> list[str]:
    """The names of the functions the headers declare (default:
    ``API_HEADERS``; the library exports these, and nothing else)."""
    sources = [header.read_text(encoding="utf-8") for header in headers or API_HEADERS]
    text = re.sub(r"/\*.*?\*/", "", "\n".join(sources), flags=re.S)
    found = re.findall(
        r"^[A-Za-z_][\w \*]*?\b(zs_[a-z0-9_]+)\s*\([^;{]*\)\s*;", text, flags=re.M | re.S
    )
    return sorted(set(found) - {"zs_status"})


def _compile_args() -> tuple[list[str], list[str]]:
    # -DNDEBUG as Python's own extension flags have it (the asserts stated
    # for invariants cost in the hot paths): ZSHARP_ASSERTS=1 and the
    # sanitizer builds turn them on again (-UNDEBUG comes later).
    cflags = ["-std=c11", "-O2", "-DNDEBUG", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden"]
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


def _pkgconfig_text() -> str:
    return (
        "prefix=${pcfiledir}/../..\n"
        "includedir=${prefix}/include\n"
        "libdir=${prefix}/lib\n\n"
        "Name: zsharp\n"
        "Description: zsharp_py's native object heap and collector (zsharp.h)\n"
        f"Version: {VERSION}\n"
        "Cflags: -I${includedir}\n"
        "Libs: -L${libdir} -Wl,-rpath,${libdir} -lzsharp\n"
        "Libs.private: -pthread\n"
    )


def _cmake_texts() -> dict[str, str]:
    config = f"""# zsharp's CMake package (zsharp_py/_build.py writes it): the imported
# target zsharp::zsharp, the native library with its headers.
get_filename_component(_zsharp_prefix "${{CMAKE_CURRENT_LIST_DIR}}/../../.." ABSOLUTE)
if(NOT TARGET zsharp::zsharp)
  add_library(zsharp::zsharp SHARED IMPORTED)
  set_target_properties(zsharp::zsharp PROPERTIES
    IMPORTED_LOCATION "${{_zsharp_prefix}}/lib/libzsharp.so"
    IMPORTED_SONAME "libzsharp.so"
    INTERFACE_INCLUDE_DIRECTORIES "${{_zsharp_prefix}}/include")
  add_library(zsharp::zsharp_static STATIC IMPORTED)
  set_target_properties(zsharp::zsharp_static PROPERTIES
    IMPORTED_LOCATION "${{_zsharp_prefix}}/lib/libzsharp.a"
    INTERFACE_INCLUDE_DIRECTORIES "${{_zsharp_prefix}}/include"
    INTERFACE_LINK_LIBRARIES "-pthread")
endif()
set(zsharp_VERSION {VERSION})
set(zsharp_INCLUDE_DIRS "${{_zsharp_prefix}}/include")
set(zsharp_LIBRARIES zsharp::zsharp)
unset(_zsharp_prefix)
"""
    version = f"""set(PACKAGE_VERSION {VERSION})
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
"""
    return {"zsharpConfig.cmake": config, "zsharpConfigVersion.cmake": version}


def build_library(package_dir: Path, build_temp: Path, compiler: str | None = None) -> Path:
    """Compile native/src/*.c into ``package_dir/lib``: ``libzsharp.so``
    exporting the public functions of the C API's headers (``API_HEADERS``)
    under the symbol version ``ZSHARP_<version>``, and ``libzsharp.a``; copy
    the headers into
    ``package_dir/include``; write ``lib/pkgconfig/zsharp.pc`` and
    ``lib/cmake/zsharp/``. Returns the library folder."""
    cc = compiler or os.environ.get("CC", "cc")
    cflags, ldflags = _compile_args()
    cflags = [f for f in cflags if f != "-fvisibility=hidden"]  # the version script decides
    lib_dir = package_dir / "lib"
    objects_dir = build_temp / "zsharp-objects"
    for folder in (lib_dir, objects_dir):
        folder.mkdir(parents=True, exist_ok=True)
    includes = ["-I" + str(NATIVE / "include"), "-I" + str(NATIVE / "src")]
    objects = []
    for source in sorted((NATIVE / "src").glob("*.c")):
        target = objects_dir / (source.stem + ".o")
        subprocess.run(
            [cc, *cflags, "-fPIC", *includes, "-c", str(source), "-o", str(target)], check=True
        )
        objects.append(str(target))
    node = "ZSHARP_" + VERSION.replace(".", "_")
    exported = "".join(f"    {name};\n" for name in public_functions())
    script = objects_dir / "zsharp.map"
    script.write_text(f"{node} {{\n  global:\n{exported}  local:\n    *;\n}};\n")
    shared = lib_dir / "libzsharp.so"
    subprocess.run(
        [
            cc,
            "-shared",
            "-o",
            str(shared),
            *objects,
            f"-Wl,--version-script={script}",
            "-Wl,-soname,libzsharp.so",
            "-pthread",
            *ldflags,
        ],
        check=True,
    )
    static = lib_dir / "libzsharp.a"
    static.unlink(missing_ok=True)
    subprocess.run([os.environ.get("AR", "ar"), "rcs", str(static), *objects], check=True)
    include_dir = package_dir / "include"
    include_dir.mkdir(exist_ok=True)
    for header in HEADERS:
        shutil.copyfile(NATIVE / "include" / header, include_dir / header)
    (lib_dir / "pkgconfig").mkdir(exist_ok=True)
    (lib_dir / "pkgconfig" / "zsharp.pc").write_text(_pkgconfig_text())
    cmake_dir = lib_dir / "cmake" / "zsharp"
    cmake_dir.mkdir(parents=True, exist_ok=True)
    for name, text in _cmake_texts().items():
        (cmake_dir / name).write_text(text)
    return lib_dir


def link_library(extension: object, lib_dir: Path) -> None:
    """Make ``extension`` (either of the package's) link ``lib_dir``'s libzsharp.so,
    found at run time beside it (``$ORIGIN/lib``)."""
    ext = extension  # a setuptools Extension
    ext.library_dirs = [*ext.library_dirs, str(lib_dir)]  # type: ignore[attr-defined]
    ext.libraries = [*ext.libraries, "zsharp"]  # type: ignore[attr-defined]
    ext.extra_link_args = [*ext.extra_link_args, "-Wl,-rpath,$ORIGIN/lib"]  # type: ignore[attr-defined]


def make_ffibuilder() -> FFI:
    """Return the FFI builder of ``zsharp_py._native_lib``: the sample engine,
    and the declarations of the C API's headers (``API_HEADERS``), whose
    functions come from libzsharp.so (``build_library``; setup.py links it)."""
    builder = FFI()
    builder.cdef(header_cdef())
    # The sample engine's install function and layouts (struct zs_api is
    # declared, opaque, by zsharp.h): lib.zs_sample_engine_install(...).
    builder.cdef(header_cdef(NATIVE / "engine" / "sample_engine.h"))
    cflags, ldflags = _compile_args()
    sources = sorted(str(p.relative_to(ROOT)) for p in (NATIVE / "engine").glob("*.c"))
    builder.set_source(
        "zsharp_py._native_lib",
        '#include "zsharp.h"\n#include "zsharp_managed.h"\n#include "zsharp_debug.h"\n'
        '#include "sample_engine.h"\n',
        sources=sources,
        include_dirs=[str(NATIVE / "include"), str(NATIVE / "engine")],
        extra_compile_args=cflags,
        extra_link_args=ldflags,
    )
    return builder


def core_extension(extension: type) -> object:
    """The ``zsharp_py._core`` extension (native/binding/*.c): the conjugate
    hot path, built with the same flags as the native heap. It links
    libzsharp.so (setup.py), the library a native host links too."""
    cflags, ldflags = _compile_args()
    sources = sorted(str(p.relative_to(ROOT)) for p in (NATIVE / "binding").glob("*.c"))
    return extension(
        "zsharp_py._core",
        sources=sources,
        include_dirs=[str(NATIVE / "include"), str(NATIVE / "binding")],
        depends=[
            *(str(header.relative_to(ROOT)) for header in sorted((NATIVE / "binding").glob("*.h"))),
            *(str(header.relative_to(ROOT)) for header in API_HEADERS),
        ],
        extra_compile_args=cflags,
        extra_link_args=ldflags,
    )


ffibuilder = make_ffibuilder()

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
