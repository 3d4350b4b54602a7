"""Command line: ``python -m zsharp_py demo [--frames N] [--seed S]``."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m zsharp_py`` and the ``zsharp-py`` script."""
    parser = argparse.ArgumentParser(prog="python -m zsharp_py",
                                     description="zsharp_py command line")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the scripted game loop and print GC activity")
    demo.add_argument("--frames", type=int, default=12)
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--collect-every", type=int, default=3)
    args = parser.parse_args(argv)
    if args.command == "demo":
        from ._demo import run_demo

        if args.frames < 1 or args.collect_every < 1:
            parser.error("--frames and --collect-every must be positive")
        run_demo(args.frames, args.seed, args.collect_every)
    return 0


if __name__ == "__main__":
    sys.exit(main())
