"""Building the peers on this machine, into a cache (``benchmarks/.build/``,
gitignored).

Every artefact is named after a hash of its sources, flags, compiler and
Python version, so a changed input rebuilds it and an unchanged one is
reused. Nothing here is a runtime dependency of zsharp_py:

- C programs (``csrc/``): the zsharp and Boehm GC benchmarks and the memory
  floors, compiled with the system C compiler;
- the actor bindings: a shared library for ctypes, an API-mode cffi module
  (C code emitted by cffi, compiled here), nanobind and pybind11 extension
  modules (g++ -O2; the packages come from PyPI);
- benchmark-only packages (``nanobind``, ``pybind11``, ``matplotlib``) are
  pip-installed into the running interpreter, and Debian's ``libgc-dev`` with
  apt-get, but only when the configuration allows installing (full runs;
  ``--no-install`` and ``--quick`` never install anything).

A peer that cannot be built raises ``Unavailable`` with the reason, which the
tables print instead of failing.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path
from types import ModuleType

from ._harness import Config, Unavailable, progress

__all__ = [
    "BUILD_DIR",
    "CSRC",
    "NATIVE",
    "c_program",
    "shared_library",
    "extension_module",
    "ensure_package",
    "ensure_boehm",
    "cffi_actor_module",
    "nanobind_actor_module",
    "pybind11_actor_module",
    "ctypes_actor_library",
    "zsharp_gc_program",
    "boehm_gc_program",
    "floors_program",
    "VALUE_VARIANTS",
    "nanobind_values_module",
    "pybind11_values_module",
    "host_bench_library",
    "nanobind_host_module",
    "pybind11_host_module",
]

HERE = Path(__file__).resolve().parent
BUILD_DIR = Path(os.environ.get("ZSHARP_BENCH_BUILD_DIR", HERE / ".build"))
CSRC = HERE / "csrc"
NATIVE = HERE.parent / "native"

C_FLAGS = ["-std=c11", "-O2", "-DNDEBUG", "-pthread"]
CXX_FLAGS = ["-std=c++17", "-O2", "-DNDEBUG", "-fPIC", "-fvisibility=hidden"]

_install_lock = threading.Lock()
_failed_installs: dict[str, str] = {}


# ---------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------


def _tool(*names: str) -> str:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise Unavailable(f"no {' or '.join(names)} on PATH")


def _tool_version(path: str) -> str:
    try:
        return subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=30
        ).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return path


def _stamp(parts: list[str], files: list[Path]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() + b"\0")
    for path in files:
        digest.update(str(path).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _run(command: list[str], what: str, cwd: Path | None = None, timeout: float = 900) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as error:
        raise Unavailable(f"{what}: {error}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise Unavailable(f"{what} failed: {' / '.join(tail)}"[:400])


def _cached(name: str, suffix: str, parts: list[str], files: list[Path]) -> tuple[Path, bool]:
    """The output path of an artefact and whether it is already built."""
    directory = BUILD_DIR / f"{name}-{_stamp(parts, files)}"
    output = directory / f"{name}{suffix}"
    return output, output.exists()


def _build_into(output: Path, build: list[list[str]], what: str) -> Path:
    """Run the build commands (which write ``output``) in a fresh directory;
    the artefact appears only when every command succeeded."""
    directory = output.parent
    staging = directory.with_name(directory.name + f".tmp{os.getpid()}.{threading.get_ident()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        for command in build:
            _run(
                [part.replace(str(directory), str(staging)) for part in command], what, cwd=staging
            )
        if directory.exists():  # built concurrently meanwhile
            return output
        staging.rename(directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _prune(directory)
    return output


def _prune(keep: Path) -> None:
    """Remove older builds of the same artefact (same name, other hash)."""
    prefix = keep.name.rsplit("-", 1)[0] + "-"
    for old in keep.parent.glob(prefix + "*"):
        if (
            old != keep
            and old.is_dir()
            and ".tmp" not in old.name
            and old.name.rsplit("-", 1)[0] + "-" == prefix
        ):
            shutil.rmtree(old, ignore_errors=True)


def c_program(
    config: Config,
    name: str,
    sources: list[Path],
    extra: list[str],
    libraries: list[str] | None = None,
) -> Path:
    """Compile (or reuse) a C program; ``extra`` are include flags and defines."""
    libraries = libraries or []
    cc = _tool("cc", "gcc")
    flags = C_FLAGS + extra
    headers = (
        sorted(CSRC.glob("*.h"))
        + sorted((NATIVE / "include").glob("*.h"))
        + sorted((NATIVE / "src").glob("*.h"))
    )
    output, built = _cached(
        name, "", [cc, _tool_version(cc), *flags, *libraries], sources + headers
    )
    if built:
        return output
    progress(config, f"building {name} ({len(sources)} C files)")
    return _build_into(
        output,
        [[cc, *flags, *map(str, sources), "-o", str(output), *libraries]],
        f"compiling {name}",
    )


def shared_library(config: Config, name: str, sources: list[Path], extra: list[str]) -> Path:
    """Compile (or reuse) a C shared library."""
    cc = _tool("cc", "gcc")
    flags = C_FLAGS + ["-fPIC", "-shared"] + extra
    output, built = _cached(
        name, ".so", [cc, _tool_version(cc), *flags], sources + sorted(CSRC.glob("*.h"))
    )
    if built:
        return output
    progress(config, f"building {name}.so")
    return _build_into(
        output, [[cc, *flags, *map(str, sources), "-o", str(output)]], f"compiling {name}"
    )


# Read once, at import on the main thread: sysconfig fills its configuration
# lazily and not thread-safely (two builder threads calling it first at once
# can see a half-filled table without EXT_SUFFIX).
_PYTHON_INCLUDE = sysconfig.get_paths()["include"]
_EXT_SUFFIX = str(sysconfig.get_config_var("EXT_SUFFIX") or ".so")


def _python_include() -> str:
    if not (Path(_PYTHON_INCLUDE) / "Python.h").exists():
        raise Unavailable(f"Python.h not found in {_PYTHON_INCLUDE} (Python development headers)")
    return _PYTHON_INCLUDE


def _ext_suffix() -> str:
    return _EXT_SUFFIX


_modules: dict[str, ModuleType] = {}


def extension_module(name: str, path: Path) -> ModuleType:
    """Import a built extension module from its file (once per process)."""
    if name in _modules:
        return _modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise Unavailable(f"cannot load {path}")
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except (ImportError, OSError) as error:
        raise Unavailable(f"importing {path.name}: {error}") from None
    _modules[name] = module
    return module


# ---------------------------------------------------------------------------
# Packages from PyPI and Debian
# ---------------------------------------------------------------------------


def ensure_package(config: Config, module: str, requirement: str) -> ModuleType:
    """Import a benchmark-only package, pip-installing it first when it is
    missing and the configuration allows installing."""
    if importlib.util.find_spec(module) is None:
        if not config.install:
            raise Unavailable(
                f"{requirement} is not installed (a full run without --no-install pip-installs it)"
            )
        with _install_lock:
            if module in _failed_installs:
                raise Unavailable(_failed_installs[module])
            if importlib.util.find_spec(module) is None:
                progress(config, f"pip install {requirement} (benchmark-only)")
                try:
                    _run(
                        [sys.executable, "-m", "pip", "install", "-q", requirement],
                        f"pip install {requirement}",
                        timeout=600,
                    )
                except Unavailable as reason:
                    _failed_installs[module] = str(reason)
                    raise
                importlib.invalidate_caches()
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise Unavailable(f"import {module}: {error}") from None


def _boehm_header() -> bool:
    return any(
        Path(p).exists()
        for p in ("/usr/include/gc.h", "/usr/include/gc/gc.h", "/usr/local/include/gc.h")
    )


def ensure_boehm(config: Config) -> None:
    """Make sure the Boehm-Demers-Weiser collector's headers are installed
    (``apt-get install libgc-dev`` when allowed and possible)."""
    if _boehm_header():
        return
    if not config.install:
        raise Unavailable(
            "libgc-dev is not installed (a full run without --no-install apt-get installs it)"
        )
    with _install_lock:
        if "libgc" in _failed_installs:
            raise Unavailable(_failed_installs["libgc"])
        if _boehm_header():
            return
        try:
            apt = _tool("apt-get")
            if hasattr(os, "geteuid") and os.geteuid() != 0:
                raise Unavailable("libgc-dev is not installed and apt-get needs root")
            progress(config, "apt-get install libgc-dev (benchmark-only)")
            _run([apt, "update", "-qq"], "apt-get update", timeout=600)
            _run(
                [apt, "install", "-y", "-qq", "libgc-dev"], "apt-get install libgc-dev", timeout=600
            )
        except Unavailable as reason:
            _failed_installs["libgc"] = str(reason)
            raise
    if not _boehm_header():
        raise Unavailable("libgc-dev installed but gc.h not found")


# ---------------------------------------------------------------------------
# The peers
# ---------------------------------------------------------------------------


def zsharp_gc_program(config: Config, barrier: bool = True) -> Path:
    """``csrc/gc_zsharp.c`` linked with the native heap's sources; without
    ``barrier``, built with the write barrier compiled out (a measurement
    build: not a safe collector)."""
    sources = [CSRC / "gc_zsharp.c", *sorted((NATIVE / "src").glob("*.c"))]
    flags = [f"-I{NATIVE / 'include'}", f"-I{NATIVE / 'src'}", f"-I{CSRC}"]
    if barrier:
        return c_program(config, "gc_zsharp", sources, flags)
    return c_program(config, "gc_zsharp_no_barrier", sources, [*flags, "-DZS_BENCH_NO_BARRIER"])


def boehm_gc_program(config: Config) -> Path:
    """``csrc/gc_boehm.c`` linked with libgc."""
    ensure_boehm(config)
    return c_program(config, "gc_boehm", [CSRC / "gc_boehm.c"], [f"-I{CSRC}"], ["-lgc"])


def floors_program(config: Config) -> Path:
    return c_program(config, "floors", [CSRC / "floors.c"], [f"-I{CSRC}"])


def ctypes_actor_library(config: Config) -> Path:
    return shared_library(config, "libbench_actor", [CSRC / "actor.c"], [f"-I{CSRC}"])


# The raw cffi module: actor.h as is, plus the same method bodies compiled
# for zsharp_py's layout of the same members (zs_object header first).
CFFI_CDEF = """
typedef struct Vec3 { double x, y, z; } Vec3;
typedef struct Actor {
    int32_t health;
    double x, y, z;
    struct Actor *target;
    Vec3 velocity;
} Actor;
typedef struct IntArray { int32_t values[1000]; } IntArray;
typedef struct ZsActor {
    int32_t health; double x, y, z; uint64_t target; Vec3 velocity; ...;
} ZsActor;

void actor_init(Actor *actor);
Actor *actor_new(void);
void actor_free(Actor *actor);
int32_t actor_get_health(const Actor *actor);
void actor_move(Actor *actor, double dx, double dy, double dz);
Actor *actor_get_target(const Actor *actor);
void actor_set_target(Actor *actor, Actor *target);
IntArray *int_array_new(void);
void int_array_free(IntArray *array);
typedef void (*actor_tick_fn)(void *self, double dt);
void actor_call_tick(actor_tick_fn tick, void *self, double dt);

int32_t zs_actor_get_health(uintptr_t address);
void zs_actor_move(uintptr_t address, double dx, double dy, double dz);
"""

CFFI_SOURCE = """
#include "actor.h"
#include "zsharp.h"

/* zsharp_py's layout of BindActor: the object header, then the properties. */
typedef struct ZsActor {
    zs_object header;
    int32_t health;
    double x, y, z;
    zs_ref target;
    Vec3 velocity; /* a zs.Struct member when zsharp_py has structs */
} ZsActor;

ACTOR_BODIES(ZsActor, zs_actor_typed)
/* Called with a conjugate's address (obj._address: 0 once it expired). */
static int32_t zs_actor_get_health(uintptr_t address) {
    return address ? zs_actor_typed_get_health((ZsActor *)address) : -1;
}
static void zs_actor_move(uintptr_t address, double dx, double dy, double dz) {
    if (address) zs_actor_typed_move((ZsActor *)address, dx, dy, dz);
}
"""


def cffi_actor_module(config: Config) -> ModuleType:
    """The API-mode cffi module ``bench_cffi_actor`` (``.ffi``, ``.lib``)."""
    import cffi

    cc = _tool("cc", "gcc")
    include = _python_include()
    flags = [
        "-std=gnu11",
        "-O2",
        "-DNDEBUG",
        "-fPIC",
        "-shared",
        f"-I{include}",
        f"-I{CSRC}",
        f"-I{NATIVE / 'include'}",
    ]
    name = "bench_cffi_actor"
    output, built = _cached(
        name,
        _ext_suffix(),
        [cc, _tool_version(cc), cffi.__version__, CFFI_CDEF, CFFI_SOURCE, *flags],
        [CSRC / "actor.c", CSRC / "actor.h"],
    )
    if not built:
        progress(config, f"building {name} (cffi API mode)")
        builder = cffi.FFI()
        builder.cdef(CFFI_CDEF)
        builder.set_source(name, CFFI_SOURCE)
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        generated = BUILD_DIR / f"{name}.{os.getpid()}.{threading.get_ident()}.c"
        with contextlib.redirect_stdout(io.StringIO()):  # "generating ..."
            builder.emit_c_code(str(generated))
        try:
            _build_into(
                output,
                [[cc, *flags, str(generated), str(CSRC / "actor.c"), "-o", str(output)]],
                f"compiling {name}",
            )
        finally:
            generated.unlink(missing_ok=True)
    return extension_module(name, output)


def _cxx_module(
    config: Config,
    name: str,
    source: Path,
    include_dirs: list[str],
    extra_sources: list[str],
    extra_flags: list[str],
    package: str,
    c_sources: list[Path] | None = None,
    depends: list[Path] | None = None,
) -> ModuleType:
    """Compile (or reuse) a C++ extension module ``name`` from ``source``,
    the ``extra_sources`` (C++, e.g. nanobind's core) and the ``c_sources``
    (C; default ``csrc/actor.c``); ``depends`` are the headers whose changes
    rebuild it (default ``csrc/actor.h``)."""
    cxx = _tool("c++", "g++")
    cc = _tool("cc", "gcc")
    include = _python_include()
    flags = (
        CXX_FLAGS + extra_flags + [f"-I{include}", f"-I{CSRC}"] + [f"-I{d}" for d in include_dirs]
    )
    c_sources = [CSRC / "actor.c"] if c_sources is None else c_sources
    depends = [CSRC / "actor.h"] if depends is None else depends
    output, built = _cached(
        name,
        _ext_suffix(),
        [cxx, _tool_version(cxx), package, *flags, *extra_sources],
        [source, *c_sources, *depends],
    )
    if not built:
        if not config.install:
            raise Unavailable(
                "not built (quick and --no-install runs do not compile the C++ "
                "peers; a full run builds them into benchmarks/.build)"
            )
        progress(config, f"building {name} ({package}, g++ -O2; about 10-30 s)")
        directory = output.parent
        objects: list[str] = []
        commands: list[list[str]] = []
        for c_source in c_sources:
            objects.append(str(directory / f"{c_source.stem}.o"))
            commands.append([cc, *C_FLAGS, "-fPIC", "-c", str(c_source), "-o", objects[-1]])
        for index, extra in enumerate(extra_sources):
            objects.append(str(directory / f"extra{index}.o"))
            commands.append(
                [cxx, *flags, "-DNB_BUILD", "-fno-strict-aliasing", "-c", extra, "-o", objects[-1]]
            )
        commands.append([cxx, *flags, "-shared", str(source), *objects, "-o", str(output)])
        _build_into(output, commands, f"compiling {name}")
    return extension_module(name, output)


def nanobind_actor_module(config: Config) -> ModuleType:
    """actor.h bound with nanobind (its core compiled from source, statically)."""
    nanobind = ensure_package(config, "nanobind", "nanobind")
    root = Path(str(nanobind.__file__)).resolve().parent
    flags = ["-DNB_COMPACT_ASSERTIONS"]
    module = _cxx_module(
        config,
        "bench_nb_actor",
        CSRC / "nb_actor.cpp",
        [str(root / "include"), str(root / "ext" / "robin_map" / "include")],
        [str(root / "src" / "nb_combined.cpp")],
        flags,
        f"nanobind {getattr(nanobind, '__version__', '?')}",
    )
    module.__dict__.setdefault("VERSION", getattr(nanobind, "__version__", "?"))
    return module


def pybind11_actor_module(config: Config) -> ModuleType:
    pybind11 = ensure_package(config, "pybind11", "pybind11")
    module = _cxx_module(
        config,
        "bench_pb_actor",
        CSRC / "pb_actor.cpp",
        [pybind11.get_include()],
        [],
        [],
        f"pybind11 {getattr(pybind11, '__version__', '?')}",
    )
    module.__dict__.setdefault("VERSION", getattr(pybind11, "__version__", "?"))
    return module


# The "values" family's peers: csrc/values.h bound by nb_values.cpp and
# pb_values.cpp, each built twice (opaque containers, STL casters).
VALUE_VARIANTS = ("opaque", "caster")


def _values_flags(library: str, variant: str) -> tuple[str, list[str]]:
    if variant not in VALUE_VARIANTS:
        raise ValueError(f"unknown variant {variant!r}")
    name = f"bench_{library}_values_{variant}"
    return name, [
        f"-DBENCH_MODULE={name}",
        f"-DBENCH_NS={name}_ns",
        f"-DBENCH_OPAQUE={int(variant == 'opaque')}",
    ]


def nanobind_values_module(config: Config, variant: str) -> ModuleType:
    """``csrc/values.h`` bound with nanobind: ``variant`` "opaque"
    (bind_vector, bind_map, a bound set class) or "caster" (nanobind/stl/*.h)."""
    nanobind = ensure_package(config, "nanobind", "nanobind")
    root = Path(str(nanobind.__file__)).resolve().parent
    name, defines = _values_flags("nb", variant)
    module = _cxx_module(
        config,
        name,
        CSRC / "nb_values.cpp",
        [str(root / "include"), str(root / "ext" / "robin_map" / "include")],
        [str(root / "src" / "nb_combined.cpp")],
        ["-DNB_COMPACT_ASSERTIONS", *defines],
        f"nanobind {getattr(nanobind, '__version__', '?')}",
        c_sources=[],
        depends=[CSRC / "values.h"],
    )
    module.__dict__.setdefault("VERSION", getattr(nanobind, "__version__", "?"))
    return module


def pybind11_values_module(config: Config, variant: str) -> ModuleType:
    """``csrc/values.h`` bound with pybind11: ``variant`` "opaque"
    (bind_vector, bind_map, a bound set class) or "caster" (pybind11/stl.h)."""
    pybind11 = ensure_package(config, "pybind11", "pybind11")
    name, defines = _values_flags("pb", variant)
    module = _cxx_module(
        config,
        name,
        CSRC / "pb_values.cpp",
        [pybind11.get_include()],
        [],
        defines,
        f"pybind11 {getattr(pybind11, '__version__', '?')}",
        c_sources=[],
        depends=[CSRC / "values.h"],
    )
    module.__dict__.setdefault("VERSION", getattr(pybind11, "__version__", "?"))
    return module


# The "host_classes" family's peers: a native host (csrc/host_bench.c, a C
# module built against zsharp_py's headers as a user's host is) and the same
# class in C++ (csrc/host_bench.h) bound by nb_host.cpp and pb_host.cpp.


def host_bench_library(config: Config) -> Path:
    """``csrc/host_bench.c`` as a shared library, compiled against the headers
    ``zsharp_py.lowlevel.include_dir()`` gives (it calls the C API through
    the table ``api_table()`` gives, as a host module built apart does)."""
    from zsharp_py.lowlevel import include_dir

    cc = _tool("cc", "gcc")
    include = Path(include_dir())
    flags = [*C_FLAGS, "-Wall", "-Wextra", "-fPIC", "-shared", f"-I{include}"]
    source = CSRC / "host_bench.c"
    output, built = _cached(
        "libbench_host",
        ".so",
        [cc, _tool_version(cc), *flags],
        [source, *(include / h for h in ("zsharp.h", "zsharp_debug.h", "zsharp_api.h"))],
    )
    if built:
        return output
    progress(config, "building libbench_host.so (the benchmark's native host)")
    return _build_into(
        output, [[cc, *flags, str(source), "-o", str(output)]], "compiling the native host"
    )


def nanobind_host_module(config: Config) -> ModuleType:
    """``csrc/host_bench.h`` bound with nanobind (its core compiled from
    source, statically), with a trampoline for the three events."""
    nanobind = ensure_package(config, "nanobind", "nanobind")
    root = Path(str(nanobind.__file__)).resolve().parent
    module = _cxx_module(
        config,
        "bench_nb_host",
        CSRC / "nb_host.cpp",
        [str(root / "include"), str(root / "ext" / "robin_map" / "include")],
        [str(root / "src" / "nb_combined.cpp")],
        ["-DNB_COMPACT_ASSERTIONS"],
        f"nanobind {getattr(nanobind, '__version__', '?')}",
        c_sources=[],
        depends=[CSRC / "host_bench.h"],
    )
    module.__dict__.setdefault("VERSION", getattr(nanobind, "__version__", "?"))
    return module


def pybind11_host_module(config: Config) -> ModuleType:
    """``csrc/host_bench.h`` bound with pybind11, with a trampoline for the events."""
    pybind11 = ensure_package(config, "pybind11", "pybind11")
    module = _cxx_module(
        config,
        "bench_pb_host",
        CSRC / "pb_host.cpp",
        [pybind11.get_include()],
        [],
        [],
        f"pybind11 {getattr(pybind11, '__version__', '?')}",
        c_sources=[],
        depends=[CSRC / "host_bench.h"],
    )
    module.__dict__.setdefault("VERSION", getattr(pybind11, "__version__", "?"))
    return module
