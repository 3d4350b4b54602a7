"""Check the layering rule of native/src (docs/native.md).

The rule is the table of docs/native.md, "The layers": each file of
native/src belongs to one layer, and a file may include the headers of its
own layer and the layers below it, and use (call, or name) the functions
and data that other files of its own layer or the layers below define;
arrows within a layer may not make a cycle. The table's exceptions
("| exception |" rows) are allowed arrows against the rule, each with its
reason; an exception no arrow needs any more is reported too, as is a file
of native/src the table does not place (a new file: add it to a layer) and
a file the table names that native/src does not have. Every function or
variable native/src exports is named zs_ (the library's prefix).

How it reads the C: as tools/check_binding_layers.py does (comments and
literals blanked; every top-level function definition and every non-static
variable with an initialiser is a symbol of the file that defines it), and
a header's inline functions and macros (those of native/include too) count
as what they name where they are used: an arrow hidden in internal.h's
zs_gc_barrier or in ZS_API_FUNCTIONS is an arrow of the file that uses it.
Calls through function pointers (the handlers, the destroy hook) are not
arrows.

    python tools/check_native_layers.py [ROOT]   # prints each problem; exit 1 if any
    python tools/check_native_layers.py --graph  # prints every arrow, with its layers
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_binding_layers import IDENT, blank, cycles, definitions, read_rule

RULE = Path("docs") / "native.md"
DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)((?:[^\n\\]|\\\n|\\.)*)", re.M)


def arrows(
    root: Path,
) -> tuple[dict[tuple[str, str], set[str]], dict[tuple[str, str], set[str]]]:
    """(uses, includes) among native/src's files: (from file, to file) ->
    the symbols used, or the header included."""
    src = root / "native" / "src"
    files = sorted(src.glob("*.[ch]"))
    code = {f.name: blank(f.read_text()) for f in files}
    owner: dict[str, str] = {}
    expands: dict[str, set[str]] = {}  # a header's inline function or macro -> what it names
    local: dict[str, set[str]] = {}
    for header in sorted((root / "native" / "include").glob("*.h")):
        for name, body in DEFINE.findall(blank(header.read_text())):
            expands[name] = set(IDENT.findall(body))
    for name, text in code.items():
        local[name] = set()
        for symbol, static, begin, end in definitions(text):
            local[name].add(symbol)
            if name.endswith(".h"):
                owner[symbol] = name
                expands[symbol] = set(IDENT.findall(text[begin:end])) if end else set()
            elif not static:
                owner[symbol] = name
        if name.endswith(".h"):
            for macro, body in DEFINE.findall(text):
                owner.setdefault(macro, name)
                expands[macro] = set(IDENT.findall(body))
    uses: dict[tuple[str, str], set[str]] = {}
    includes: dict[tuple[str, str], set[str]] = {}
    for name, text in code.items():
        for header in re.findall(r'#\s*include\s+"([^"]+)"', (src / name).read_text()):
            if (src / header).exists():
                includes.setdefault((name, header), set()).add(header)
        if name.endswith(".h"):
            continue
        seen: set[str] = set()
        todo = [ident for ident in set(IDENT.findall(text)) if ident not in local[name]]
        while todo:
            ident = todo.pop()
            if ident in seen:
                continue
            seen.add(ident)
            home = owner.get(ident)
            if home is None or home.endswith(".h"):
                todo.extend(expands.get(ident, ()))
            elif home != name:
                uses.setdefault((name, home), set()).add(ident)
    return uses, includes


def unprefixed(root: Path) -> list[str]:
    """The functions and variables native/src exports without zs_."""
    found = []
    for path in sorted((root / "native" / "src").glob("*.c")):
        for name, static, _, _ in definitions(blank(path.read_text())):
            if not static and not name.startswith("zs_"):
                found.append(f"{path.name}: {name} is exported without the zs_ prefix")
    return found


def check(root: Path) -> list[str]:
    """Every breach of the rule, as a line of text."""
    src = root / "native" / "src"
    layer_of, names, exceptions = read_rule(root / RULE)
    uses, includes = arrows(root)
    present = sorted(p.name for p in src.glob("*.[ch]"))
    problems = unprefixed(root)
    for file in present:
        if file not in layer_of:
            problems.append(
                f"native/src/{file}: in no layer of {RULE.as_posix()}: add it to the row of the"
                " layer it belongs to (and say what it owns)"
            )
    for file in sorted(set(layer_of) - set(present)):
        problems.append(f"{RULE.as_posix()} places {file}, which native/src does not have")
    same_layer = set()
    for kind, table in (("uses", uses), ("includes", includes)):
        for (a, b), what in sorted(table.items()):
            if a not in layer_of or b not in layer_of or (a, b) in exceptions:
                continue
            if layer_of[b] > layer_of[a]:
                problems.append(
                    f"{a} ({names[layer_of[a]]}) {kind} {b} ({names[layer_of[b]]}), a layer above: "
                    + ", ".join(sorted(what))
                )
            elif layer_of[b] == layer_of[a] and kind == "uses":
                same_layer.add((a, b))
    for group in cycles(same_layer):
        inner = sorted(f"{a} -> {b}" for a, b in same_layer if a in group and b in group)
        problems.append("a cycle within a layer: " + "; ".join(inner))
    for a, b in sorted(exceptions - set(uses) - set(includes)):
        problems.append(f"the exception {a} -> {b} is listed, but {a} no longer uses {b}")
    return problems


def main(argv: list[str]) -> int:
    graph = "--graph" in argv
    args = [a for a in argv if a != "--graph"]
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent
    if graph:
        layer_of, names, _ = read_rule(root / RULE)
        uses, _ = arrows(root)

        def where(file: str) -> str:
            return names[layer_of[file]] if file in layer_of else "no layer"

        for (a, b), what in sorted(uses.items()):
            print(f"{a} ({where(a)}) -> {b} ({where(b)}): {' '.join(sorted(what))}")
        print(f"{len(uses)} arrows")
        return 0
    problems = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"native/src layering: {len(problems)} problem(s) (the rule: {RULE.as_posix()})")
        return 1
    print("native/src layering: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
