"""A C program that owns its runtime (examples/game_host/game.c), built
against the installed package the three ways docs/embedding.md documents
(the flags ``python -m zsharp_py config`` prints, pkg-config, CMake), run,
and its output checked: the script attaches to the host's runtime, the host
ticks its Python subclass from C, destroys an actor the script holds (whose
proxy expires at once), collects from C, and both sides shut down cleanly.

CI runs this file against the plain (non-editable) install of README's
first command too (.ci/run), so the installed headers, library, pkg-config
file and CMake package are what is tested, not the source tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from helpers import declared_functions
from zsharp_py.lowlevel import include_dir, lib_dir

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "game_host"
FRAMES = 12


def python_config() -> str:
    """This interpreter's pythonX.Y-config (a venv has none: its base's)."""
    name = "python" + sysconfig.get_config_var("VERSION") + "-config"
    found = Path(sysconfig.get_config_var("BINDIR")) / name
    if found.exists():
        return str(found)
    fallback = shutil.which(name) or shutil.which("python3-config")
    assert fallback, f"{name} is needed to embed Python (Debian: python3-dev)"
    return fallback


def zsharp_config(*options: str) -> list[str]:
    """``python -m zsharp_py config`` with this interpreter, split."""
    done = subprocess.run(
        [sys.executable, "-m", "zsharp_py", "config", *options],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


def embed_flags() -> list[str]:
    config = python_config()
    flags: list[str] = []
    for option in (["--includes"], ["--embed", "--ldflags"]):
        done = subprocess.run([config, *option], capture_output=True, text=True, check=True)
        flags += done.stdout.split()
    return [*flags, "-Xlinker", "-export-dynamic"]


def compile_game(output: Path, zsharp_flags: list[str]) -> None:
    compiler = os.environ.get("CC") or shutil.which("cc") or "gcc"
    command = [compiler, "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror"]
    command += ["-o", str(output), str(EXAMPLE / "game.c"), *zsharp_flags, *embed_flags()]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and not _our_diagnostics(done.stderr), done.stderr


def _our_diagnostics(stderr: str) -> list[str]:
    """The compiler's and linker's lines, but those the linker prints about
    a sanitizer runtime itself (a library built by tools/sanitize.sh pulls
    in libasan, whose interceptors of ``tmpnam`` the linker warns about):
    nothing the example or the installed library wrote."""
    return [
        line
        for line in stderr.splitlines()
        if not ("/libasan.so" in line and ": warning: the use of `" in line)
    ]


def run_game(program: Path) -> str:
    done = subprocess.run(
        [str(program), str(FRAMES), str(EXAMPLE)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "ZS_HOST_PYTHON": sys.executable},
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    return done.stdout


def check_output(out: str) -> None:
    lines = out.splitlines()
    assert lines[0] == "script: attached to the host's runtime; Guard subclasses Actor"
    assert lines[1] == "script: holding Actor_0, an Actor, and Guard_7, a Guard"
    assert lines[2].startswith(
        "script: frame 2: the host destroyed the first actor: Actor 'Actor_0' has expired"
    )
    assert "script: frame 9: the host ticked 16 actors; Guard_7 has 90 health after 10 ticks" in (
        lines
    )
    assert f"game: {FRAMES} frames, 20 actors spawned, 4 destroyed from C, 16 live at the end" in (
        lines
    )
    assert lines[-2:] == [
        "script: closed; owns_heap=False",
        "game: Python finished; 16 objects left to the host",
    ]


def test_the_game_host_built_with_the_flags_command(tmp_path: Path) -> None:
    program = tmp_path / "game"
    compile_game(program, zsharp_config("--cflags", "--libs"))
    check_output(run_game(program))


def test_the_game_host_built_with_pkg_config(tmp_path: Path) -> None:
    pkg_config = shutil.which("pkg-config")
    assert pkg_config, "pkg-config is needed (Debian: pkgconf; .ci/run installs it)"
    done = subprocess.run(
        [pkg_config, "--cflags", "--libs", "zsharp"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PKG_CONFIG_PATH": zsharp_config("--pkgconfigdir")[0]},
    )
    program = tmp_path / "game"
    compile_game(program, done.stdout.split())
    check_output(run_game(program))


def test_the_game_host_built_with_cmake(tmp_path: Path) -> None:
    cmake = shutil.which("cmake")
    assert cmake, "CMake is needed (Debian: cmake; .ci/run installs it)"
    build = tmp_path / "build"
    configure = subprocess.run(
        [
            cmake,
            "-S",
            str(EXAMPLE),
            "-B",
            str(build),
            f"-Dzsharp_DIR={zsharp_config('--cmakedir')[0]}",
            f"-DPython_EXECUTABLE={sys.executable}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert configure.returncode == 0, configure.stdout + configure.stderr
    made = subprocess.run(
        [cmake, "--build", str(build)], capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stdout + made.stderr
    check_output(run_game(build / "game"))


def test_the_library_exports_only_its_api_under_a_version() -> None:
    """libzsharp.so exports the functions of the C API's headers (zsharp.h,
    zsharp_managed.h, zsharp_debug.h), each under the symbol version
    ZSHARP_<version>, and nothing of its internals."""

    nm = shutil.which("nm")
    assert nm, "nm (binutils) is needed"
    done = subprocess.run(
        [nm, "-D", "--defined-only", str(Path(lib_dir()) / "libzsharp.so")],
        capture_output=True,
        text=True,
        check=True,
    )
    exported = {line.split()[-1] for line in done.stdout.splitlines() if " T " in line}
    names = {symbol.split("@")[0] for symbol in exported}
    include = Path(include_dir())
    headers = ("zsharp.h", "zsharp_managed.h", "zsharp_debug.h")
    assert names == set().union(*(declared_functions(include / header) for header in headers))
    assert all(symbol.endswith("@@ZSHARP_0_1_0") for symbol in exported)


@pytest.mark.parametrize("option", ["--libdir", "--includedir", "--cmakedir", "--pkgconfigdir"])
def test_the_config_command_names_folders_that_exist(option: str) -> None:
    (folder,) = zsharp_config(option)
    assert Path(folder).is_dir()


CPP_HOST = r"""
#include "zsharp.h"
#include "zsharp_api.h"
#include "zsharp_debug.h"
#include "zsharp_managed.h"
#include <cstdio>
#include <cstring>

/* The same runtime's life through the linked API and through the table a
   module built apart from the library is handed. */
int main() {
    const zs_api *api = zs_api_table();
    if (api->version != ZS_API_VERSION || api->size != sizeof(zs_api)) return 2;
    zs_runtime_options options;
    api->zs_runtime_default_options(&options);
    zs_runtime *rt = nullptr;
    if (api->zs_runtime_new(&options, &rt) != ZS_OK) return 3;
    uint32_t through_table = 0, linked = 0, number = 0;
    if (api->zs_name_intern(rt, "Guard", std::strlen("Guard"), &through_table, &number) != ZS_OK)
        return 4;
    if (zs_name_intern(rt, "Guard", 5, &linked, &number) != ZS_OK || linked != through_table)
        return 5;
    api->zs_runtime_free(rt);
    std::printf("C++ host: %s\n", zs_status_message(ZS_OK));
    return 0;
}
"""


def test_the_headers_compile_and_link_as_cpp(tmp_path: Path) -> None:
    """Game engines are C++: every public header compiles as C++11 with
    warnings as errors, zsharp_api.h's table included (its slots are typed
    after the header's own declarations, which C++ spells differently), and
    a C++ host links and runs through the table and the linked API alike."""
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    assert compiler, "a C++ compiler is needed (Debian: g++)"
    source = tmp_path / "host.cpp"
    source.write_text(CPP_HOST)
    program = tmp_path / "host"
    command = [compiler, "-std=c++11", "-Wall", "-Wextra", "-Werror", "-pedantic"]
    command += ["-o", str(program), str(source), *zsharp_config("--cflags", "--libs")]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and not _our_diagnostics(done.stderr), done.stderr
    run = subprocess.run([str(program)], capture_output=True, text=True, check=False, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("C++ host: "), run.stdout
