"""Command line: ``python -m zsharp_py`` or the ``zsharp-py`` script.

``demo`` plays a small game on the sample engine (written in C) whose game
logic is Python overrides of the engine's actors, and narrates what the
garbage collector does each frame; ``config`` prints what a native host
compiles and links with (as ``python3-config`` and ``pybind11 --includes``
do); ``stubs`` writes the type stubs (``.pyi``) of a native host's classes,
structs and enums (zsharp_py/stubs.py); ``--version`` prints the version.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from . import __version__
from ._demo import (
    DEFAULT_COLLECT_EVERY,
    DEFAULT_FRAMES,
    DEFAULT_OBJECTS_PER_FRAME,
    DEFAULT_PARTICLES,
    DEFAULT_SEED,
    run_demo,
)
from ._interop.calls import include_dir, lib_dir
from ._runtime.runtime import Runtime
from .sample_engine import install as install_sample_engine
from .stubs import host_stub, load_installer

__all__ = ["main", "build_parser", "program_name"]

SCRIPT = "zsharp-py"
MODULE = "python -m zsharp_py"
_MAX_OBJECTS_PER_STEP = 0xFFFFFFFF  # what rt.gc.step(max_objects=...) accepts
_MAX_PARTICLES = 1_000_000


def program_name(argv0: str) -> str:
    """The name the command line was invoked by, for its usage lines:
    ``zsharp-py`` when ``argv0`` is the console script (``zsharp-py.exe`` on
    Windows), else ``python -m zsharp_py``."""
    name = os.path.basename(argv0)
    if name.lower().endswith(".exe"):
        name = name[:-4]
    return SCRIPT if name == SCRIPT else MODULE


def _integer(minimum: int, maximum: int) -> Callable[[str], int]:
    """An argparse type: an integer in [minimum, maximum]. Its errors are
    reported by the parser of the option, with that parser's usage."""
    kind = {0: "a non-negative integer", 1: "a positive integer"}.get(
        minimum, f"an integer >= {minimum}"
    )

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {kind}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {kind}, got {value}")
        if value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum:,}, got {value:,}")
        return value

    return parse


def build_parser(prog: str = MODULE) -> argparse.ArgumentParser:
    """The command line's parser; ``prog`` names the program in usage lines."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="zsharp_py: a native object heap with an Unreal-style "
        "incremental tracing garbage collector, seen from Python through conjugates.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"zsharp_py {__version__}",
        help="print the version and exit",
    )
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="play a shooter on a C engine with Python game logic and narrate the GC's work",
        description="Play a small shooter on the sample engine, a game engine written in C "
        "whose actors the game subclasses in Python (the engine calls the Python overrides "
        "from C), and print, frame by frame, what the incremental garbage collector did "
        "(marking, purging, "
        "references nulled, conjugates expired), then a final full collection and a summary. "
        "The GC's work per frame is counted in objects, not time, so the same options print "
        "the same output on every run and every machine (unless --timings is given).",
    )
    positive = _integer(1, sys.maxsize)
    demo.add_argument(
        "--frames",
        type=positive,
        default=DEFAULT_FRAMES,
        metavar="N",
        help="number of frames to play (default: %(default)s)",
    )
    demo.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        metavar="S",
        help="random seed of the game; the same seed prints the same output (default: %(default)s)",
    )
    demo.add_argument(
        "--collect-every",
        type=positive,
        default=DEFAULT_COLLECT_EVERY,
        metavar="N",
        help="start an incremental GC cycle every N frames (later "
        "while the previous cycle is still running; default: %(default)s)",
    )
    demo.add_argument(
        "--objects-per-frame",
        type=_integer(1, _MAX_OBJECTS_PER_STEP),
        default=DEFAULT_OBJECTS_PER_FRAME,
        metavar="N",
        help="GC work per frame: at most N objects marked, N conjugates expired "
        "and N objects freed (GcSettings.objects_per_tick); smaller values "
        "spread a cycle over more frames (default: %(default)s)",
    )
    demo.add_argument(
        "--particles",
        type=_integer(0, _MAX_PARTICLES),
        default=DEFAULT_PARTICLES,
        metavar="N",
        help="smoke particles in the world: a rooted chain that marking must "
        "walk, so more particles make marking take more frames "
        "(default: %(default)s)",
    )
    demo.add_argument(
        "--timings",
        action="store_true",
        help="also print the measured time of each GC cycle; times vary from "
        "run to run, so the output is no longer reproducible",
    )
    config = commands.add_parser(
        "config",
        help="print the compile and link flags of the native library, for a C host",
        description="Print what a native host builds with: the flags that compile against "
        "zsharp.h and link the native library this package loads (libzsharp.so), or the "
        "folders of its headers, library, pkg-config file and CMake package. Several options "
        "print their values on one line, in order.",
    )
    for option, what in _CONFIG_OPTIONS.items():
        config.add_argument(
            f"--{option}", action="append_const", const=option, dest="asked", help=what
        )
    stubs = commands.add_parser(
        "stubs",
        help="write the type stubs (.pyi) of a native host's classes, structs and enums",
        description="Write a .pyi module declaring the classes (properties, functions, static "
        "functions, events), structs and enums a native host registers, from the descriptions "
        "it registers, for mypy, pyright and editors. The host is installed in a new runtime: "
        "--engine names a host shipped with the package, --install any host's Python function "
        "that registers it in the runtime it is given.",
    )
    host = stubs.add_mutually_exclusive_group(required=True)
    host.add_argument(
        "--engine",
        choices=sorted(_ENGINES),
        help="a host shipped with the package (sample: native/engine/sample_engine.c)",
    )
    host.add_argument(
        "--install",
        metavar="MODULE:FUNCTION",
        help="a function that registers a host's types in the runtime it is given "
        "(e.g. zsharp_py.sample_engine:install)",
    )
    stubs.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        help="the file to write (default: print the stub)",
    )
    return parser


# The hosts shipped with the package, by the name `stubs --engine` takes:
# each one's installer and the title of its stub.
_ENGINES: dict[str, tuple[Callable[[Runtime], object], str]] = {
    "sample": (install_sample_engine, "The sample engine's classes, structs and enums")
}


def stub_text(engine: str | None, install: str | None, output: str | None) -> str:
    """The stub ``stubs`` writes: the host installed in a new runtime, its
    descriptions written out (the command itself named in the docstring)."""
    if engine is not None:
        installer, title = _ENGINES[engine]
        command = f"python -m zsharp_py stubs --engine {engine}"
    else:
        assert install is not None
        installer, title = load_installer(install), f"The classes, structs and enums of {install}"
        command = f"python -m zsharp_py stubs --install {install}"
    if output is not None:
        command += f" -o {output}"
    with Runtime() as runtime:
        installer(runtime)
        return host_stub(runtime, title=title, command=command)


_CONFIG_OPTIONS = {
    "cflags": "compiler flags (-I the headers' folder)",
    "libs": "linker flags for the shared library (-L, an rpath, -lzsharp)",
    "static-libs": "linker flags for the static library (libzsharp.a, -pthread)",
    "includedir": "the folder of the headers (zsharp.h, zsharp_api.h, zsharp_python.h...)",
    "libdir": "the folder of libzsharp.so and libzsharp.a",
    "pkgconfigdir": "the folder of zsharp.pc (for PKG_CONFIG_PATH)",
    "cmakedir": "the folder of the CMake package (for zsharp_DIR, or CMAKE_PREFIX_PATH)",
}


def config_values(asked: list[str]) -> list[str]:
    """The values of ``config``'s options, in the order asked."""
    lib, include = lib_dir(), include_dir()
    values = {
        "cflags": f"-I{include}",
        "libs": f"-L{lib} -Wl,-rpath,{lib} -lzsharp",
        "static-libs": f"{os.path.join(lib, 'libzsharp.a')} -pthread",
        "includedir": include,
        "libdir": lib,
        "pkgconfigdir": os.path.join(lib, "pkgconfig"),
        "cmakedir": os.path.join(lib, "cmake", "zsharp"),
    }
    return [values[option] for option in asked]


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m zsharp_py`` and of the ``zsharp-py``
    script; ``argv`` defaults to ``sys.argv[1:]``. Returns the exit status
    (usage errors exit with status 2, as argparse does)."""
    parser = build_parser(program_name(sys.argv[0] if sys.argv else ""))
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    if args.command == "config":
        if not args.asked:
            parser.parse_args(["config", "--help"])  # prints the options, exits 0
        print(" ".join(config_values(args.asked)))
        return 0
    if args.command == "stubs":
        try:
            text = stub_text(args.engine, args.install, args.output)
        except (ImportError, AttributeError, TypeError, ValueError) as error:
            parser.exit(2, f"{parser.prog} stubs: error: {error}\n")
        if args.output is None:
            sys.stdout.write(text)
        else:
            with open(args.output, "w", encoding="utf-8") as out:
                out.write(text)
        return 0
    run_demo(
        args.frames,
        args.seed,
        args.collect_every,
        particles=args.particles,
        objects_per_frame=args.objects_per_frame,
        timings=args.timings,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
