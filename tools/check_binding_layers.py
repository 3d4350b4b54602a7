"""Check the layering rule of native/binding (docs/binding.md).

The rule is the table of docs/binding.md, "The rule": each file of
native/binding belongs to one layer, and a file may include the headers of
its own layer and the layers below it, and use (call, or name in a table)
the functions and data that other files of its own layer or the layers
below define; arrows within a layer may not make a cycle. The table's
exceptions ("| exception |" rows) are allowed arrows against the rule,
each with its reason.

How it reads the C: comments and literals are blanked; every top-level
function definition and every non-static variable with an initialiser is
a symbol of the file that defines it (a header's inline functions too).
A file's arrows are the symbols of other files it names; naming a
header's inline function counts as naming what that function names (it is
compiled into the caller). Includes are the `#include "..."` lines.

    python tools/check_binding_layers.py [ROOT]    # prints each bad arrow; exit 1 if any
    python tools/check_binding_layers.py --graph   # prints every arrow
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

IDENT = re.compile(r"\b[A-Za-z_]\w*\b")


def blank(text: str) -> str:
    """`text` with comments and string and character literals blanked."""

    def spaces(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group())

    return re.sub(
        r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", spaces, text, flags=re.S
    )


def definitions(code: str) -> list[tuple[str, bool, int, int]]:
    """(name, static, body start, body end) of each top-level function, and
    (name, static, 0, 0) of each variable with an initialiser."""
    found = []
    depth = 0
    start = 0
    for match in re.finditer(r"[{};]", code):
        char = match.group()
        if char == "{":
            if depth == 0:
                head = code[start : match.start()]
                found.extend(_definition(head, match.start()))
                open_at = match.start()
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0 and found and found[-1][2] == open_at:
                found[-1] = (*found[-1][:3], match.end())
                start = match.end()
        elif depth == 0:
            start = match.end()
    return [item for item in found if item[3] != 0 or item[2] == 0]


def _definition(head: str, at: int) -> list[tuple[str, bool, int, int]]:
    head = re.sub(r"^\s*#[^\n]*\n", "", head, flags=re.M)
    static = re.search(r"\bstatic\b", head) is not None
    function = re.search(r"(\w+)\s*\((?:[^()]|\([^()]*\))*\)\s*$", head)
    if function and "=" not in head:
        return [(function.group(1), static, at, 0)]
    variable = re.search(r"(\w+)\s*(?:\[[^\]]*\])?\s*=\s*$", head)
    if variable and not head.lstrip().startswith("typedef"):
        return [(variable.group(1), static, 0, 0)]
    return []


def read_rule(doc: Path) -> tuple[dict[str, int], list[str], set[tuple[str, str]]]:
    """file -> layer number, the layers' names, and the allowed exceptions,
    from the tables of docs/binding.md."""
    layer_of: dict[str, int] = {}
    names: list[str] = []
    exceptions: set[tuple[str, str]] = set()
    for line in doc.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not line.startswith("|"):
            continue
        if len(cells) >= 3 and re.fullmatch(r"\d+", cells[0]):
            names.append(cells[1])
            for file in re.findall(r"`([\w.]+\.[ch])`", cells[2]):
                layer_of[file] = int(cells[0])
        arrow = re.fullmatch(r"`([\w.]+\.[ch])` -> `([\w.]+\.[ch])`", cells[0])
        if arrow:
            exceptions.add((arrow.group(1), arrow.group(2)))
    return layer_of, names, exceptions


def arrows(
    binding: Path,
) -> tuple[dict[tuple[str, str], set[str]], dict[tuple[str, str], set[str]]]:
    """(uses, includes): (from file, to file) -> the symbols or header names."""
    files = sorted(binding.glob("*.[ch]"))
    code = {f.name: blank(f.read_text()) for f in files}
    owner: dict[str, str] = {}
    inline_uses: dict[str, set[str]] = {}
    local: dict[str, set[str]] = {}
    for name, text in code.items():
        local[name] = set()
        for symbol, static, begin, end in definitions(text):
            local[name].add(symbol)
            if name.endswith(".h"):
                owner[symbol] = name
                inline_uses[symbol] = set(IDENT.findall(text[begin:end])) if end else set()
            elif not static:
                owner[symbol] = name
    uses: dict[tuple[str, str], set[str]] = {}
    includes: dict[tuple[str, str], set[str]] = {}
    for name, text in code.items():
        for header in re.findall(r'#\s*include\s+"([^"]+)"', (binding / name).read_text()):
            if (binding / header).exists():
                includes.setdefault((name, header), set()).add(header)
        if name.endswith(".h"):
            continue
        seen: set[str] = set()
        todo = [ident for ident in set(IDENT.findall(text)) if ident not in local[name]]
        while todo:
            ident = todo.pop()
            if ident in seen or ident not in owner:
                continue
            seen.add(ident)
            home = owner[ident]
            if home.endswith(".h"):
                todo.extend(inline_uses.get(ident, ()))
            elif home != name:
                uses.setdefault((name, home), set()).add(ident)
    return uses, includes


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The cycles among `edges`, one path each (Tarjan's components)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def foreign_prefixes(root: Path) -> list[str]:
    """Identifiers native/binding defines with the heap's and the public
    API's prefixes (zs_, ZS_, zsv_, ZSV_) that native/include does not
    declare: the binding's own take zpy_/zpyv_ (docs/binding.md, "Names")."""
    public = set()
    for header in (root / "native" / "include").glob("*.h"):
        public |= set(IDENT.findall(header.read_text()))
    found = set()
    prefixed = r"((?:zs|zsv|ZS|ZSV)_\w+)"
    for path in sorted((root / "native" / "binding").glob("*.[ch]")):
        code = blank(path.read_text())
        found |= {name for name, _, _, _ in definitions(code) if re.match(prefixed, name)}
        found |= set(re.findall(r"#\s*define\s+" + prefixed, code))
        found |= set(re.findall(r"\b(?:struct|union|enum)\s+" + prefixed + r"\s*\{", code))
        found |= set(re.findall(r"\}\s*" + prefixed + r"\s*;", code))
    return [
        f"{name}: defined in native/binding with a zs_ prefix (use zpy_)"
        for name in sorted(found - public)
    ]


def check(root: Path) -> list[str]:
    """Every breach of the rule, as a line of text."""
    binding = root / "native" / "binding"
    layer_of, names, exceptions = read_rule(root / "docs" / "binding.md")
    uses, includes = arrows(binding)
    problems = foreign_prefixes(root)
    for file in sorted(p.name for p in binding.glob("*.[ch]")):
        if file not in layer_of:
            problems.append(f"{file}: in no layer of docs/binding.md")
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
    return problems


def main(argv: list[str]) -> int:
    graph = "--graph" in argv
    args = [a for a in argv if a != "--graph"]
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent
    if graph:
        uses, _ = arrows(root / "native" / "binding")
        for (a, b), what in sorted(uses.items()):
            print(f"{a} -> {b}: {' '.join(sorted(what))}")
        return 0
    problems = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"native/binding layering: {len(problems)} problem(s) (the rule: docs/binding.md)")
        return 1
    print("native/binding layering: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
