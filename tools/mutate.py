"""Mutation testing of the code that decides memory safety.

Applies small deliberate bugs (mutants) to the functions listed in
tools/mutation_targets.py (native/src, native/binding and the Python
layers that decide lifetimes), runs the tests mapped to each function (and,
for a mutant they let through, the rest of the library's tests), and
reports every mutant as killed (a test failed, crashed or hung), survived
(every test passed: a hole in the suite) or equivalent (listed, with the
reason, in tools/mutation_equivalent.txt). docs/reliability.md,
"Mutation testing", has the figures of the last full run.

    python tools/mutate.py                  # the full run (nice it: 3-4 hours from scratch)
    python tools/mutate.py --smoke          # the fixed sample CI runs (SMOKE)
    python tools/mutate.py --only PATTERN   # mutants whose id, file or function matches
    python tools/mutate.py --list [--only PATTERN]   # list the mutants, run nothing
    python tools/mutate.py --show ID        # print one mutant's diff
    python tools/mutate.py --shard 0/2 & python tools/mutate.py --shard 1/2   # two halves
    python tools/mutate.py --json run.json --resume old.json   # go on from an earlier run

Operators (each mutant applies exactly one, at one site, inside one listed
function):

    negate-compare   == <-> != (not against ZS_OK or NULL: that breaks the success
                     path, which every test sees); in Python also `is` <-> `is not`,
                     `in` <-> `not in`
    off-by-one       < <-> <=, > <-> >= ; `+ 1` / `- 1` become `+ 0` / `- 0`
    swap-logic       && <-> || (Python: and <-> or)
    drop-condition   one operand of && (||) replaced by 1 (0): the check is gone
                     (Python: the operand left out of the `and`/`or`)
    remove-call      a call made as a statement is removed (an expiry, a
                     barrier, an invalidation, a check, a release, ...);
                     locking and reference counting are left alone, and
                     nothing inside an assert() is mutated
    negate-not       (Python) a `not x` becomes `x`

A mutant's id is `function:operator:hash`, the hash taken over the text of
the mutated line, the change and its rank among identical changes in that
function: never a line number, so ids survive code moving around and files
being split (tools/mutation_targets.py names the files).

Every mutant runs in a scratch copy of the tree (the checkout is never
written to, Ctrl-C included). C mutants rebuild only what changed: a
native/src file is recompiled into libzsharp.so (which _core and the cffi
module link dynamically) and into the C test program, which runs first; a
native/binding file is recompiled into _core. The flags are
src/zsharp_py/_build.py's and native/Makefile's. A test run that outlives
--timeout (default 120 s) is stopped and the mutant counted as killed (a
hang is a failure a user would see); so is a crash. A mutant that does not
compile is "stillborn" and not counted.

--json FILE is rewritten after every mutant, so a run that was stopped
leaves the outcomes it had. --resume FILE (repeatable) takes an earlier
run's --json file and skips every mutant it reports killed whose id still
exists: the tests only grow, and an id is the hash of the mutated line and
its change, so a mutant killed once stays killed while its line is
unchanged. Survivors, stillborn mutants and new ids run again; the carried
kills count in the report (as killed, "in an earlier run").

Exit status: 0 when no mutant survived (and, with --smoke, every smoke
mutant exists and was killed); 1 otherwise; 2 for a broken set-up (a test
selection that fails unmutated, a target function not found).
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import dataclasses
import difflib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import mutation_targets as catalog  # noqa: E402  (a sibling module of this script)

EQUIVALENT_FILE = ROOT / "tools" / "mutation_equivalent.txt"

# =============================================================================
# Mutants
# =============================================================================


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One change at one site of one function."""

    id: str
    path: str  # relative to the repository root
    function: str
    operator: str
    start: int  # character offsets of the replaced text in the file
    end: int
    replacement: str
    line: str  # the mutated line as it was (stripped): the human anchor
    selection: str  # the test selection's name (catalog.SELECTIONS)

    def apply(self, text: str) -> str:
        """The file's text with this mutant applied."""
        return text[: self.start] + self.replacement + text[self.end :]

    def describe(self, text: str) -> str:
        """The change on one line: `original -> replacement`, and the
        mutated line when the change is a single token."""
        before = " ".join(text[self.start : self.end].split())
        after = " ".join(self.replacement.split())
        change = f"{before or '<empty>'}  ->  {after or '<empty>'}"
        return change if len(before) > 3 else f"{change}  in [{self.line}]"


def _line_of(text: str, offset: int) -> str:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return " ".join(text[start : end if end >= 0 else len(text)].split())


def _finish(
    path: str, function: str, selection: str, text: str, raw: list[tuple[str, int, int, str]]
) -> list[Mutant]:
    """Mutants from (operator, start, end, replacement) sites: duplicates
    dropped, ids given (function, operator, and a hash of the line, the
    change and its rank among identical ones)."""
    seen: set[tuple[int, int, str]] = set()
    ranks: dict[tuple[str, str, str, str], int] = {}
    out: list[Mutant] = []
    for operator, start, end, replacement in sorted(raw, key=lambda r: (r[1], r[2], r[0])):
        if (start, end, replacement) in seen or text[start:end] == replacement:
            continue
        seen.add((start, end, replacement))
        line = _line_of(text, start)
        key = (operator, line, text[start:end], replacement)
        rank = ranks.get(key, 0)
        ranks[key] = rank + 1
        digest = hashlib.sha1("\0".join([*key, str(rank)]).encode()).hexdigest()[:8]
        out.append(
            Mutant(
                id=f"{function}:{operator}:{digest}",
                path=path,
                function=function,
                operator=operator,
                start=start,
                end=end,
                replacement=replacement,
                line=line,
                selection=selection,
            )
        )
    return out


# ---- C -----------------------------------------------------------------------

_C_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\n\f\v]+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<char>'(?:[^'\\\n]|\\.)*')
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<number>\.?\d(?:[\w.]|[eEpP][+-])*)
  | (?P<punct><<=|>>=|\.\.\.|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\|
               |[-+*/%&|^]=|[][(){};,.?:~!<>=+\-*/%&|^\#])
    """,
    re.S | re.X,
)


@dataclasses.dataclass(frozen=True)
class Token:
    kind: str
    text: str
    start: int
    end: int


def c_tokens(text: str) -> list[Token]:
    """The C tokens of a file: comments, whitespace and preprocessor lines skipped."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        match = _C_TOKEN.match(text, pos)
        if match is None:
            raise ValueError(f"cannot tokenise C at offset {pos}: {text[pos : pos + 20]!r}")
        kind = match.lastgroup or ""
        if kind == "punct" and match.group() == "#":
            line_start = text.rfind("\n", 0, pos) + 1
            if text[line_start:pos].strip() == "":  # a preprocessor line, continued by '\'
                end = pos
                while True:
                    end = text.find("\n", end)
                    if end < 0:
                        end = len(text)
                        break
                    if text[end - 1] != "\\":
                        break
                    end += 1
                pos = end
                continue
        if kind not in ("ws", "comment"):
            tokens.append(Token(kind, match.group(), match.start(), match.end()))
        pos = match.end()
    return tokens


def _matching(tokens: Sequence[Token], index: int) -> int:
    """The index of the bracket closing the one at `index`."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    opening = tokens[index].text
    closing = pairs[opening]
    depth = 0
    for i in range(index, len(tokens)):
        if tokens[i].text == opening:
            depth += 1
        elif tokens[i].text == closing:
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"unbalanced {opening!r} at offset {tokens[index].start}")


def c_function_body(tokens: Sequence[Token], name: str) -> tuple[int, int] | None:
    """The token indices of a function definition's `{` and `}`, or None."""
    depth = 0
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.text == "{":
            depth += 1
        elif token.text == "}":
            depth -= 1
        elif (
            depth == 0
            and token.kind == "ident"
            and token.text == name
            and i + 1 < len(tokens)
            and tokens[i + 1].text == "("
        ):
            close = _matching(tokens, i + 1)
            if close + 1 < len(tokens) and tokens[close + 1].text == "{":
                return close + 1, _matching(tokens, close + 1)
            i = close
        i += 1
    return None


def c_definitions(tokens: Sequence[Token]) -> dict[str, set[str]]:
    """Every function defined at file level: {name: the words of its body}."""
    bodies: dict[str, set[str]] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.text == "{":  # a struct, enum or initialiser at file level
            i = _matching(tokens, i) + 1
            continue
        if token.kind == "ident" and i + 1 < len(tokens) and tokens[i + 1].text == "(":
            close = _matching(tokens, i + 1)
            if close + 1 < len(tokens) and tokens[close + 1].text == "{":
                end = _matching(tokens, close + 1)
                bodies[token.text] = {t.text for t in tokens[close + 1 : end]}
                i = end + 1
                continue
            i = close
        i += 1
    return bodies


# Calls a remove-call mutant leaves alone: invariant asserts, the runtime's
# lock (single-threaded tests cannot see it go), reference counting (a leak,
# not a memory-safety decision), prefetch hints and plain byte copies (their
# removal breaks everything at once, which measures nothing).
_C_KEEP_CALLS = re.compile(
    r"^(assert|ZS_LOCK|ZS_UNLOCK|Py_(X?INCREF|X?DECREF|CLEAR|X?SETREF|VISIT)|"
    r"__builtin_\w+|memcpy|memmove|PyErr_\w+|Py_RETURN_\w+)$"
)
_STATEMENT_START = {";", "{", "}", "else", ":"}
_LOGICAL = {"&&", "||"}
_OPERAND_STOP = {";", ",", "{", "}", "?", ":", "=", "return", "case"} | {
    op + "=" for op in ("+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>")
}


def _operand(tokens: Sequence[Token], at: int, step: int, stop_at: set[str]) -> int:
    """The last token index of the operand of the logical operator at `at`,
    walking in direction `step` (-1 left, +1 right) at the operator's depth."""
    depth = 0
    i = at + step
    last = at
    while 0 <= i < len(tokens):
        text = tokens[i].text
        if (text in ("(", "[") and step < 0) or (text in (")", "]") and step > 0):
            if depth == 0:
                break
            depth -= 1
        elif text in ("(", "[") or text in (")", "]"):
            depth += 1
        elif depth == 0 and (text in _OPERAND_STOP or text in stop_at):
            break
        last = i
        i += step
    return last


def c_mutants(path: str, function: str, selection: str, text: str) -> list[Mutant]:
    """Every mutant of one C function (a KeyError if it is not found)."""
    tokens = c_tokens(text)
    body = c_function_body(tokens, function)
    if body is None:
        raise KeyError(f"{path}: no definition of {function}()")
    first, last = body
    # Assert conditions are invariant checks, not decisions (and the
    # binding is built with NDEBUG): nothing inside one is mutated.
    skipped: set[int] = set()
    for i in range(first + 1, last):
        if tokens[i].text in ("assert", "_Static_assert") and tokens[i + 1].text == "(":
            skipped.update(range(i, _matching(tokens, i + 1) + 1))
    raw: list[tuple[str, int, int, str]] = []
    swaps = {"==": "!=", "!=": "==", "<": "<=", "<=": "<", ">": ">=", ">=": ">"}
    for i in range(first + 1, last):
        if i in skipped:
            continue
        token = tokens[i]
        text_i = token.text
        if text_i in swaps:
            operator = "negate-compare" if text_i in ("==", "!=") else "off-by-one"
            # `status == ZS_OK`, `p != NULL` negated break the success path
            # itself, which every test sees: nothing learnt for a run's cost
            # (drop-condition still removes such a check).
            trivial = {tokens[i - 1].text, tokens[i + 1].text} & {"ZS_OK", "NULL"}
            if not (operator == "negate-compare" and trivial):
                raw.append((operator, token.start, token.end, swaps[text_i]))
        elif text_i in _LOGICAL:
            raw.append(("swap-logic", token.start, token.end, "||" if text_i == "&&" else "&&"))
            # Operands: && binds tighter than ||, so an && operand stops at
            # either, an || operand only at another ||.
            stop = _LOGICAL if text_i == "&&" else {"||"}
            keep = "1" if text_i == "&&" else "0"
            left = _operand(tokens, i, -1, stop)
            right = _operand(tokens, i, +1, stop)
            if left < i:
                raw.append(("drop-condition", tokens[left].start, tokens[i - 1].end, keep))
            if right > i:
                raw.append(("drop-condition", tokens[i + 1].start, tokens[right].end, keep))
        elif (
            text_i in ("+", "-")
            and tokens[i + 1].kind == "number"
            and re.fullmatch(r"1[uUlL]*", tokens[i + 1].text)
            and (tokens[i - 1].kind in ("ident", "number") or tokens[i - 1].text in (")", "]"))
        ):
            nxt = tokens[i + 1]
            raw.append(("off-by-one", nxt.start, nxt.end, "0" + nxt.text[1:]))
        elif (
            token.kind == "ident"
            and tokens[i + 1].text == "("
            and not _C_KEEP_CALLS.match(text_i)
            and text_i not in ("if", "while", "for", "switch", "return", "sizeof")
        ):
            close = _matching(tokens, i + 1)
            before = tokens[i - 1]
            statement = before.text in _STATEMENT_START
            if before.text == ":":  # a label's or a case's, not a ternary's
                j = i - 2
                while j > first and tokens[j].text not in (";", "{", "}"):
                    j -= 1
                label = tokens[j + 1 : i - 1]
                statement = bool(label) and (
                    label[0].text in ("case", "default")
                    or (len(label) == 1 and label[0].kind == "ident")
                )
            if before.text == ")":
                # `if (...) call();`: the `)` closes a control header.
                depth = 0
                j = i - 1
                while j > first:
                    if tokens[j].text == ")":
                        depth += 1
                    elif tokens[j].text == "(":
                        depth -= 1
                        if depth == 0:
                            break
                    j -= 1
                statement = tokens[j - 1].text in ("if", "while", "for")
            if statement and close + 1 < last and tokens[close + 1].text == ";":
                raw.append(("remove-call", token.start, tokens[close + 1].end, "(void)0;"))
    return _finish(path, function, selection, text, raw)


# ---- Python ------------------------------------------------------------------


def _py_function(tree: ast.Module, qualified: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The definition `Class.method` or `function` in a module."""
    scope: list[ast.stmt] = list(tree.body)
    parts = qualified.split(".")
    for k, part in enumerate(parts):
        found: ast.stmt | None = None
        for node in scope:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and (
                node.name == part
            ):
                found = node
        if found is None:
            break
        if k == len(parts) - 1 and isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return found
        scope = list(found.body) if isinstance(found, ast.ClassDef) else []
    raise KeyError(f"no definition of {qualified}")


_PY_KEEP_CALLS = re.compile(r"^(assert\w*|append|extend|warn|debug|info|__init__)$")


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def py_mutants(path: str, function: str, selection: str, text: str) -> list[Mutant]:
    """Every mutant of one Python function or method (KeyError if not found)."""
    tree = ast.parse(text)
    definition = _py_function(tree, function)
    line_starts = _offsets(text)
    encoded = [line.encode() for line in text.splitlines(keepends=True)]

    def offset(line: int, col: int) -> int:  # ast columns count UTF-8 bytes
        return line_starts[line - 1] + len(encoded[line - 1][:col].decode())

    def span(node: ast.expr | ast.stmt) -> tuple[int, int]:
        assert node.end_lineno is not None and node.end_col_offset is not None
        return offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)

    def expr(node: ast.expr) -> str:
        return "(" + ast.unparse(node) + ")"

    raw: list[tuple[str, int, int, str]] = []
    swaps: dict[type, type] = {
        ast.Eq: ast.NotEq,
        ast.NotEq: ast.Eq,
        ast.Is: ast.IsNot,
        ast.IsNot: ast.Is,
        ast.In: ast.NotIn,
        ast.NotIn: ast.In,
        ast.Lt: ast.LtE,
        ast.LtE: ast.Lt,
        ast.Gt: ast.GtE,
        ast.GtE: ast.Gt,
    }
    body_nodes = [n for stmt in definition.body for n in ast.walk(stmt)]
    for node in body_nodes:
        if isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                if type(op) in swaps:
                    ops = list(node.ops)
                    ops[k] = swaps[type(op)]()
                    mutated = ast.Compare(node.left, ops, node.comparators)
                    operator = (
                        "off-by-one"
                        if isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE))
                        else "negate-compare"
                    )
                    raw.append((operator, *span(node), expr(mutated)))
        elif isinstance(node, ast.BoolOp):
            other: ast.boolop = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            raw.append(("swap-logic", *span(node), expr(ast.BoolOp(other, node.values))))
            for k in range(len(node.values)):
                rest = node.values[:k] + node.values[k + 1 :]
                kept = rest[0] if len(rest) == 1 else ast.BoolOp(node.op, rest)
                raw.append(("drop-condition", *span(node), expr(kept)))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            raw.append(("negate-not", *span(node), expr(node.operand)))
        elif (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, (ast.Add, ast.Sub))
            and isinstance(node.right, ast.Constant)
            and node.right.value == 1
        ):
            raw.append(("off-by-one", *span(node.right), "0"))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if name and not _PY_KEEP_CALLS.match(name):
                raw.append(("remove-call", *span(node), "pass"))
    # ast.unparse cannot say what a user wrote: a mutant equal to the
    # original after normalising is no mutant.
    kept_raw = []
    for operator, start, end, replacement in raw:
        original = text[start:end]
        try:
            same = ast.dump(ast.parse("(" + original + ")", mode="eval")) == ast.dump(
                ast.parse(replacement, mode="eval")
            )
        except SyntaxError:
            same = False
        if not same:
            kept_raw.append((operator, start, end, replacement))
    return _finish(path, function, selection, text, kept_raw)


def all_mutants() -> list[Mutant]:
    """Every mutant of every target, in catalog order; raises KeyError for a
    target function that does not exist (the catalog must follow the code)."""
    mutants: list[Mutant] = []
    for target in catalog.TARGETS:
        text = (ROOT / target.path).read_text(encoding="utf-8")
        make = py_mutants if target.path.endswith(".py") else c_mutants
        for function in target.functions:
            mutants += make(target.path, function, target.selection, text)
    ids: dict[str, Mutant] = {}
    for mutant in mutants:
        if mutant.id in ids:
            raise KeyError(f"two mutants share the id {mutant.id}: rename or split the target")
        ids[mutant.id] = mutant
    return mutants


def read_equivalents(path: Path = EQUIVALENT_FILE) -> dict[str, str]:
    """The equivalent mutants: {id: reason}. Format: a line with the id, then
    the reason on the indented lines below it; `#` starts a comment line."""
    entries: dict[str, str] = {}
    current: str | None = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if raw[0].isspace():
            if current is None:
                raise ValueError(f"{path}: a reason before any id: {raw!r}")
            entries[current] = (entries[current] + " " + raw.strip()).strip()
        else:
            current = raw.split()[0]
            entries[current] = ""
    missing = [key for key, reason in entries.items() if not reason]
    if missing:
        raise ValueError(f"{path}: equivalent mutants without a reason: {missing}")
    return entries


# =============================================================================
# The scratch tree and its builds
# =============================================================================

_EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
# What a mutant's own object is compiled with besides its flavour's flags:
# warnings stay warnings (a removed call may leave a variable unused, a
# swapped && may want parentheses: neither changes what the mutant means).
_MUTANT_CFLAGS = ["-Wno-error"]
# Objects: native/src for the library, native/src for the C test program,
# native/binding for _core, native/engine and native/tests; and the C test
# program's again under AddressSanitizer (asrc, atest), for the survivors.
FLAVOURS = ("lib", "csrc", "core", "test", "asrc", "atest")


class BuildError(Exception):
    """A compile or link command failed (its command line and output)."""


class Scratch:
    """A copy of the tree in a temporary folder, where libzsharp.so, _core
    and the C test program are built from per-file objects, so that a
    mutant recompiles one file and relinks. The checkout is only read.

    Every object is compiled as the real builds compile it: native/src for
    the library with src/zsharp_py/_build.py's flags (and linked with its
    symbol version script, so _core and the cffi module load it as they
    load the installed one), native/src again with the C test program's
    (native/Makefile's ``CFLAGS_BASE``: asserts on) with native/engine and
    native/tests, the binding with the flags setup.py gives _core."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="zsharp-mutate-"))
        self.tree = self.dir / "tree"
        self.objects = self.dir / "objects"
        spec = ROOT / "src" / "zsharp_py" / "_build.py"
        namespace: dict[str, object] = {"__file__": str(spec), "__name__": "_zsharp_build"}
        exec(compile(spec.read_text(), str(spec), "exec"), namespace)  # noqa: S102  the build's own flags
        self.build = namespace
        compile_args = namespace["_compile_args"]
        assert callable(compile_args)
        core_cflags, core_ldflags = compile_args()
        lib_cflags, self.lib_ldflags = compile_args()
        # build_library's flags (the version script decides visibility).
        self.lib_flags = [f for f in lib_cflags if f != "-fvisibility=hidden"]
        py = sysconfig.get_config_vars()
        self.cc = os.environ.get("CC", "cc")
        self.c_flags = _makefile_flags()
        self.san_flags = _makefile_flags("SAN_FLAGS")
        self.asan_ready = False
        self.core_compile = [
            *(os.environ.get("CC") or py.get("CC") or "cc").split(),
            *(py.get("CFLAGS") or "").split(),
            *(py.get("CCSHARED") or "-fPIC").split(),
            *core_cflags,
        ]
        self.core_link = [*(py.get("LDSHARED") or "cc -shared").split(), *core_ldflags]

    # ---- set-up ----
    def populate(self) -> None:
        """Copy the checkout's files (tracked, and untracked but not
        ignored: the working state) and the cffi module built beside them."""
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout.decode()
        for name in filter(None, listed.split("\0")):
            source = ROOT / name
            if source.is_file():
                target = self.tree / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
        package = ROOT / "src" / "zsharp_py"
        built = sorted(package.glob("_native_lib*.so"))
        if not built:
            raise SystemExit("mutate: build the package first: pip install -e '.[test]'")
        for module in built:
            shutil.copy2(module, self.tree / "src" / "zsharp_py" / module.name)
        include = self.tree / "src" / "zsharp_py" / "include"
        include.mkdir(exist_ok=True)
        headers = self.build["HEADERS"]
        assert isinstance(headers, tuple)
        for header in headers:
            shutil.copy2(self.tree / "native" / "include" / header, include / header)
        for flavour in FLAVOURS:
            (self.objects / flavour).mkdir(parents=True, exist_ok=True)

    def run(self, command: list[str]) -> None:
        result = subprocess.run(command, cwd=self.tree, capture_output=True, text=True)
        if result.returncode != 0:
            raise BuildError(" ".join(command) + "\n" + result.stdout + result.stderr)

    def compile_command(self, flavour: str, source: Path, output: Path) -> list[str]:
        native = self.tree / "native"
        target = ["-c", str(source), "-o", str(output)]
        if flavour == "core":
            python = sysconfig.get_paths()["include"]
            flags = [*self.core_compile, f"-I{native / 'include'}", f"-I{native / 'binding'}"]
            return [*flags, f"-I{python}", *target]
        if flavour == "lib":
            includes = [f"-I{native / 'include'}", f"-I{native / 'src'}"]
            return [self.cc, *self.lib_flags, "-fPIC", *includes, *target]
        includes = [f"-I{native / 'include'}", f"-I{native / 'src'}", f"-I{native / 'engine'}"]
        san = self.san_flags if flavour in ("asrc", "atest") else []
        return [self.cc, *self.c_flags, *san, *includes, *target]

    def sources(self, flavour: str) -> list[Path]:
        native = self.tree / "native"
        if flavour in ("lib", "csrc", "asrc"):
            return sorted((native / "src").glob("*.c"))
        if flavour == "core":
            return sorted((native / "binding").glob("*.c"))
        return sorted([*(native / "engine").glob("*.c"), *(native / "tests").glob("*.c")])

    def object_of(self, flavour: str, source: Path) -> Path:
        return self.objects / flavour / (source.stem + ".o")

    def build_baseline(self, c_tests: bool) -> None:
        """Compile every object (two at a time), link the library, _core and
        (if a native/src mutant will run) the C test program, and keep the
        linked files as the baseline each mutant starts from."""
        flavours = ["lib", "core", *(["csrc", "test"] if c_tests else [])]
        jobs = [(f, source) for f in flavours for source in self.sources(f)]
        self._compile_all([(f, src, self.object_of(f, src)) for f, src in jobs], [])
        for product in self.link({}, c_tests=c_tests, core=True):
            shutil.copy2(product, self.dir / ("baseline-" + product.name))

    def product(self, name: str) -> Path:
        package = self.tree / "src" / "zsharp_py"
        if name == "lib":
            return package / "lib" / "libzsharp.so"
        if name == "core":
            return package / ("_core" + _EXT_SUFFIX)
        if name == "asan":
            return self.dir / "test_native_asan"
        return self.dir / "test_native"

    def _compile_all(self, jobs: Sequence[tuple[str, Path, Path]], extra: Sequence[str]) -> None:
        """Compile (flavour, source, object) jobs, two compilers at a time."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            for future in [
                pool.submit(self.run, [*self.compile_command(f, src, obj), *extra])
                for f, src, obj in jobs
            ]:
                future.result()

    def link_asan(self, replaced: dict[Path, Path]) -> Path:
        """Link the C test program built with native/Makefile's SAN_FLAGS
        (AddressSanitizer and UBSan, the object slabs compiled out)."""
        objects = [
            str(replaced.get(self.object_of(f, src), self.object_of(f, src)))
            for f in ("asrc", "atest")
            for src in self.sources(f)
        ]
        output = self.product("asan")
        self.run([self.cc, *self.c_flags, *self.san_flags, "-o", str(output), *objects, "-pthread"])
        return output

    def ensure_asan(self) -> None:
        """Build the sanitized C test program once, when a mutant first needs it."""
        if self.asan_ready:
            return
        jobs = [
            (f, src, self.object_of(f, src)) for f in ("asrc", "atest") for src in self.sources(f)
        ]
        self._compile_all(jobs, [])
        shutil.copy2(self.link_asan({}), self.dir / "baseline-test_native_asan")
        self.asan_ready = True

    def rebuild_asan(self, units: Sequence[Path]) -> Path:
        """The sanitized C test program with the mutated native/src files."""
        self.ensure_asan()
        replaced: dict[Path, Path] = {}
        jobs = []
        for unit in units:
            baseline = self.object_of("asrc", unit)
            mutant = baseline.with_suffix(".mutant.o")
            jobs.append(("asrc", unit, mutant))
            replaced[baseline] = mutant
        self._compile_all(jobs, _MUTANT_CFLAGS)
        return self.link_asan(replaced)

    def link(self, replaced: dict[Path, Path], c_tests: bool, core: bool) -> list[Path]:
        """Link the library (always), _core and the C test program (when
        asked) from the baseline objects, with `replaced` (baseline object
        -> mutant object) swapped in; the files linked."""

        def objects(flavour: str) -> list[str]:
            return [
                str(replaced.get(self.object_of(flavour, s), self.object_of(flavour, s)))
                for s in self.sources(flavour)
            ]

        lib = self.product("lib")
        lib.parent.mkdir(parents=True, exist_ok=True)
        public = self.build["public_functions"]
        assert callable(public)
        script = self.objects / "zsharp.map"
        if not script.exists():
            version = "ZSHARP_" + str(self.build["VERSION"]).replace(".", "_")
            exported = "".join(f"    {name};\n" for name in public())
            script.write_text(f"{version} {{\n  global:\n{exported}  local:\n    *;\n}};\n")
        self.run(
            [
                self.cc,
                "-shared",
                "-o",
                str(lib),
                *objects("lib"),
                f"-Wl,--version-script={script}",
                "-Wl,-soname,libzsharp.so",
                "-pthread",
                *self.lib_ldflags,
            ]
        )
        linked = [lib]
        if core:
            output = self.product("core")
            rpath = "-Wl,-rpath,$ORIGIN/lib"
            self.run(
                [*self.core_link, *objects("core"), f"-L{lib.parent}", "-lzsharp", rpath]
                + ["-o", str(output)]
            )
            linked.append(output)
        if c_tests:
            output = self.product("test")
            self.run(
                [self.cc, *self.c_flags, "-o", str(output), *objects("csrc"), *objects("test")]
                + ["-pthread"]
            )
            linked.append(output)
        return linked

    def rebuild(self, source: Path, function: str, c_tests: bool) -> list[Path]:
        """Recompile what a mutated C file reaches (two compilers at a
        time) and relink; the files recompiled."""
        if source.parent.name == "binding":
            reached = [source] if source.suffix == ".c" else self.users(source, function, "core")
            units = [("core", unit) for unit in reached]
        else:
            reached = [source] if source.suffix == ".c" else self.users(source, function, "lib")
            units = [(f, unit) for unit in reached for f in ("lib", "csrc")]
            if not c_tests:
                units = [(f, unit) for f, unit in units if f == "lib"]
        replaced: dict[Path, Path] = {}
        jobs = []
        for flavour, unit in units:
            baseline = self.object_of(flavour, unit)
            mutant = baseline.with_suffix(".mutant.o")
            jobs.append((flavour, unit, mutant))
            replaced[baseline] = mutant
        self._compile_all(jobs, _MUTANT_CFLAGS)
        if units[0][0] == "core":
            output = self.product("core")
            lib = self.product("lib")
            objects = [
                str(replaced.get(self.object_of("core", s), self.object_of("core", s)))
                for s in self.sources("core")
            ]
            self.run(
                [*self.core_link, *objects, f"-L{lib.parent}", "-lzsharp"]
                + ["-Wl,-rpath,$ORIGIN/lib", "-o", str(output)]
            )
        else:
            self.link(replaced, c_tests=c_tests, core=False)
        return reached

    def users(self, header: Path, function: str, flavour: str) -> list[Path]:
        """The files of a flavour a mutant of an inline function of `header`
        reaches: those naming it, or an inline function of the header that
        calls it (transitively)."""
        bodies = c_definitions(c_tokens(header.read_text(encoding="utf-8")))
        names = {function}
        while True:
            more = {name for name, used in bodies.items() if used & names} - names
            if not more:
                break
            names |= more
        return [
            unit
            for unit in self.sources(flavour)
            if names & {t.text for t in c_tokens(unit.read_text(encoding="utf-8"))}
        ]

    def restore(self) -> None:
        """Put the baseline library, _core and C test program back."""
        for name in ("lib", "core", "test"):
            product = self.product(name)
            saved = self.dir / ("baseline-" + product.name)
            if saved.exists():
                shutil.copy2(saved, product)

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _makefile_flags(name: str = "CFLAGS_BASE") -> list[str]:
    """A flags variable of native/Makefile (CFLAGS_BASE: the C test
    program's; SAN_FLAGS: its sanitizers'), without include flags (the
    scratch tree's are added)."""
    text = (ROOT / "native" / "Makefile").read_text()
    match = re.search(rf"^{name}\s*:=\s*(.*)$", text, flags=re.M)
    if match is None:
        raise SystemExit(f"mutate: native/Makefile has no {name}")
    return [f for f in match.group(1).split() if not f.startswith("-I")]


def is_native(path: str) -> bool:
    """A native/src file: its mutants rebuild the library and run the C tests."""
    return path.startswith("native/src/")


# =============================================================================
# Running
# =============================================================================


@dataclasses.dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed, survived, equivalent, stillborn
    how: str  # what killed it (a failing test, a crash, a timeout), or why not
    seconds: float


def _run_tests(
    command: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> tuple[int | None, str]:
    """Run a test command in its own process group; (exit code or None on
    timeout, its output)."""
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        out, _ = process.communicate(timeout=timeout)
        return process.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        return None, out
    except BaseException:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise


def _first_failure(output: str) -> str:
    """The first failing test's id (pytest -x -q), or the C test's line."""
    for line in output.splitlines():
        match = re.match(r"^(FAILED|ERROR) (\S+)", line)
        if match:
            return match.group(2)
        if line.startswith(("FAIL ", "not ok")) or "CHECK failed" in line:
            return line.strip()
    for line in output.splitlines():
        if "ERROR: AddressSanitizer" in line or "runtime error:" in line:
            return line.strip()
    for line in output.splitlines():
        if "Fatal Python error" in line or "Segmentation fault" in line or "Assertion" in line:
            return line.strip()
    tail = [line for line in output.splitlines() if line.strip()]
    return tail[-1].strip() if tail else "(no output)"


_PYTEST = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
_TOOLING_ON_THE_LIBRARY = ("test_docs_examples.py", "test_cli.py", "test_pytest_plugin.py")
# Tests of how the installed package is found (pkg-config): a scratch tree
# is never installed.
_NEEDS_AN_INSTALL = ("tests/hosts/test_host_build.py",)


class Runner:
    """Runs mutants one by one in a Scratch tree."""

    def __init__(self, scratch: Scratch, timeout: float, verbose: bool, whole_suite: bool) -> None:
        self.scratch = scratch
        self.timeout = timeout
        self.whole_suite = whole_suite  # survivors run the rest of the suite too
        self.verbose = verbose
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = str(scratch.tree / "src")
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.stamp = time.time() + 10  # unique mtimes: a rewritten .py is never read from a .pyc
        self.pristine: tuple[Path, str] = (scratch.tree, "")  # the mutated file, unmutated

    def pytest_commands(self, selection: str) -> list[list[str]]:
        """The selection in two runs: its own files first, then the rest of
        the core files (collecting everything up front would cost a killed
        mutant seconds)."""
        first = catalog.SELECTIONS[selection]
        rest = [name for name in catalog.CORE if name not in first]
        return [[*_PYTEST, *first], [*_PYTEST, *rest]]

    def library_tests(self) -> list[str]:
        """The default tier's test files that run the library: tests/tooling
        only for the documentation's examples, the CLI and the pytest plugin
        (the others check tools, types and the C suite the C tests run)."""
        files = sorted(
            path.relative_to(self.scratch.tree).as_posix()
            for path in (self.scratch.tree / "tests").rglob("test_*.py")
        )
        return [
            name
            for name in files
            if name not in _NEEDS_AN_INSTALL
            and (
                not name.startswith("tests/tooling/") or Path(name).name in _TOOLING_ON_THE_LIBRARY
            )
        ]

    def rest_command(self, selection: str) -> list[str]:
        """The library's test files neither the selection nor CORE ran: a
        survivor's second chance, so that "survived" means the whole suite
        passed."""
        ran = set(catalog.SELECTIONS[selection]) | set(catalog.CORE)
        return [*_PYTEST, *(name for name in self.library_tests() if name not in ran)]

    def check_baseline(self, selections: Sequence[str], c_tests: bool) -> None:
        """Every selection (and the C tests) must pass on the unmutated tree."""
        commands: list[tuple[str, list[str]]] = []
        if c_tests:
            commands.append(("C tests", [str(self.scratch.product("test"))]))
        for selection in selections:
            commands.append((selection, self.pytest_commands(selection)[0]))
        commands.append(("core", [*_PYTEST, *catalog.CORE]))
        if self.whole_suite:  # every file a rest_command may name passes unmutated
            commands.append(("the whole suite", [*_PYTEST, *self.library_tests()]))
        for name, command in commands:
            started = time.monotonic()
            code, out = _run_tests(command, self.scratch.tree, self.env, self.timeout * 5)
            if code != 0:
                raise SystemExit(
                    f"mutate: {name} fails unmutated ({_first_failure(out)}):\n{out[-3000:]}"
                )
            print(f"baseline {name}: passed in {time.monotonic() - started:.1f} s", flush=True)

    def write(self, path: Path, text: str) -> None:
        path.write_text(text, encoding="utf-8")
        self.stamp += 2
        os.utime(path, (self.stamp, self.stamp))

    def run(self, mutant: Mutant, c_tests: bool) -> Outcome:
        started = time.monotonic()
        source = self.scratch.tree / mutant.path
        original = source.read_text(encoding="utf-8")
        mutated = mutant.apply(original)
        self.pristine = (source, original)  # for the sanitized baseline, built once
        try:
            self.write(source, mutated)
            try:
                if source.suffix == ".py":
                    compile(mutated, str(source), "exec")  # a SyntaxError is this tool's bug
                    self.units: list[Path] = []
                else:
                    self.units = self.scratch.rebuild(source, mutant.function, c_tests)
            except BuildError as error:
                return Outcome(mutant, "stillborn", str(error).splitlines()[-1][:200], 0.0)
            status, how = self.test(mutant)
            return Outcome(mutant, status, how, time.monotonic() - started)
        finally:
            self.write(source, original)
            if source.suffix != ".py":
                self.scratch.restore()

    def test(self, mutant: Mutant) -> tuple[str, str]:
        runs: list[tuple[str, list[str]]] = [
            ("", command) for command in self.pytest_commands(mutant.selection)
        ]
        if is_native(mutant.path):
            runs.insert(0, ("C tests: ", [str(self.scratch.product("test"))]))
        if self.whole_suite:
            # Last, the rest of the suite: slow, so only for what survived
            # the selection (its timeout is the baseline's, not a selection's).
            runs.append(("rest of the suite: ", self.rest_command(mutant.selection)))
        for label, command in runs:
            timeout = self.timeout * 5 if label.startswith("rest") else self.timeout
            code, out = _run_tests(command, self.scratch.tree, self.env, timeout)
            if self.verbose:
                print(out[-2000:])
            if code is None:
                return "killed", f"{label}timeout after {timeout:.0f} s"
            if code in (3, 4, 5) and not label:  # pytest: internal error, usage, nothing collected
                raise SystemExit(
                    f"mutate: selection {mutant.selection!r} cannot run (pytest exit {code}):\n"
                    + out[-2000:]
                )
            if code < 0:
                return "killed", f"{label}crash (signal {-code}): {_first_failure(out)}"
            if code != 0:
                return "killed", label + _first_failure(out)
        if is_native(mutant.path):
            # A second chance for the tests: the C tests again under
            # AddressSanitizer, which sees an out-of-bounds read or a use
            # after free that changed no result (slow: survivors only).
            env = {**self.env, "ASAN_OPTIONS": "detect_leaks=1"}
            try:
                if not self.scratch.asan_ready:
                    # Its baseline objects from the sources as they are in
                    # the checkout: the mutant is back once they are built.
                    source, original = self.pristine
                    mutated = source.read_text(encoding="utf-8")
                    self.write(source, original)
                    try:
                        self.scratch.ensure_asan()
                    finally:
                        self.write(source, mutated)
                    code, out = _run_tests(
                        [str(self.scratch.product("asan"))],
                        self.scratch.tree,
                        env,
                        self.timeout * 2,
                    )
                    if code != 0:
                        raise SystemExit(
                            "mutate: the sanitized C tests fail unmutated:\n" + out[-3000:]
                        )
                program = self.scratch.rebuild_asan(self.units)
            except BuildError as error:
                raise SystemExit(f"mutate: the sanitized C tests do not build: {error}") from error
            code, out = _run_tests([str(program)], self.scratch.tree, env, self.timeout * 2)
            if code is None:
                return "killed", "C tests under ASan: timeout"
            if code != 0:
                return "killed", "C tests under ASan: " + _first_failure(out)
        return "survived", ""


# =============================================================================
# Command line
# =============================================================================


def select(mutants: list[Mutant], smoke: bool, only: Sequence[str]) -> list[Mutant]:
    chosen = mutants
    if smoke:
        by_id = {m.id: m for m in mutants}
        missing = [key for key in catalog.SMOKE if key not in by_id]
        if missing:
            raise SystemExit(
                "mutate: smoke mutants no longer exist (the code changed: pick new ones "
                f"in tools/mutation_targets.py, SMOKE): {missing}"
            )
        chosen = [by_id[key] for key in catalog.SMOKE]
    for pattern in only:
        regex = re.compile(pattern)
        chosen = [
            m for m in chosen if regex.search(m.id) or regex.search(m.path + "::" + m.function)
        ]
    return chosen


def report(outcomes: list[Outcome], equivalents: dict[str, str], elapsed: float) -> str:
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    killed = counts.get("killed", 0)
    survived = counts.get("survived", 0)
    scored = killed + survived
    score = 100.0 * killed / scored if scored else 100.0
    carried = sum(1 for o in outcomes if o.how.startswith("in an earlier run: "))
    lines = [
        "",
        f"mutants: {len(outcomes)}  killed: {killed}  survived: {survived}  "
        f"equivalent: {counts.get('equivalent', 0)}  stillborn: {counts.get('stillborn', 0)}",
        f"score: {score:.1f}% of non-equivalent mutants killed ({killed}/{scored}), "
        f"{elapsed / 60:.1f} min",
    ]
    if carried:
        lines.append(f"killed in an earlier run (--resume), not run again: {carried}")
    for outcome in outcomes:
        if outcome.status == "survived":
            m = outcome.mutant
            lines.append(f"SURVIVED {m.id}  {m.path}::{m.function}  [{m.line}]")
    return "\n".join(lines)


def write_json(path: Path, outcomes: list[Outcome]) -> None:
    """Every outcome so far, written whole (a stopped run leaves a file
    that --resume reads)."""
    records = [
        {
            "id": o.mutant.id,
            "path": o.mutant.path,
            "function": o.mutant.function,
            "operator": o.mutant.operator,
            "line": o.mutant.line,
            "status": o.status,
            "how": o.how,
            "seconds": round(o.seconds, 2),
        }
        for o in outcomes
    ]
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(records, indent=1))
    partial.replace(path)


def read_kills(paths: Sequence[Path]) -> dict[str, str]:
    """The mutants earlier runs (their --json files) killed: id -> how."""
    kills: dict[str, str] = {}
    for path in paths:
        records = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(records, list):
            raise ValueError(f"{path}: not a list of outcomes")
        for record in records:
            if not isinstance(record, dict) or not isinstance(record.get("id"), str):
                raise ValueError(f"{path}: an outcome without an id: {record!r}")
            if record.get("status") == "killed":
                how = str(record.get("how", ""))
                # Carried again: keep the first run's reason, not a chain.
                kills[record["id"]] = how.removeprefix("in an earlier run: ")
    return kills


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="only the fixed CI sample (SMOKE)")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PATTERN",
        help="regex on id or file::function",
    )
    parser.add_argument(
        "--shard",
        metavar="K/N",
        help="only every N-th mutant from the K-th (0-based): N runs of K = 0..N-1 split a run",
    )
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--show", metavar="ID", help="print one mutant's diff and stop")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per test run")
    parser.add_argument("--json", type=Path, help="write every outcome to this file")
    parser.add_argument(
        "--resume",
        action="append",
        default=[],
        type=Path,
        metavar="JSON",
        help="an earlier run's --json file: its killed mutants are not run again (repeatable)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch tree")
    parser.add_argument("--skip-baseline", action="store_true", help="trust the selections")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)

    try:
        mutants = select(all_mutants(), args.smoke, args.only)
    except KeyError as error:
        print(f"mutate: {error.args[0]}", file=sys.stderr)
        return 2
    if args.shard:
        shard, shards = (int(part) for part in args.shard.split("/"))
        if not 0 <= shard < shards:
            print(f"mutate: --shard {args.shard}: K must be in 0..N-1", file=sys.stderr)
            return 2
        mutants = mutants[shard::shards]
    equivalents = read_equivalents()
    if args.show:
        found = [m for m in mutants if m.id == args.show]
        if not found:
            print(f"mutate: no mutant {args.show}", file=sys.stderr)
            return 2
        m = found[0]
        text = (ROOT / m.path).read_text(encoding="utf-8")
        diff = difflib.unified_diff(
            text.splitlines(keepends=True),
            m.apply(text).splitlines(keepends=True),
            f"a/{m.path}",
            f"b/{m.path}",
            n=2,
        )
        sys.stdout.writelines(diff)
        return 0
    if args.list:
        for m in mutants:
            text = (ROOT / m.path).read_text(encoding="utf-8")
            mark = "  (equivalent)" if m.id in equivalents else ""
            print(f"{m.id}  {m.path}::{m.function}  {m.describe(text)}{mark}")
        print(f"{len(mutants)} mutants")
        return 0
    every_id = {m.id for m in all_mutants()}
    stale = sorted(set(equivalents) - every_id)
    if stale:
        print(f"mutate: equivalents that match no mutant (update {EQUIVALENT_FILE.name}): {stale}")

    try:
        earlier = read_kills(args.resume)
    except (OSError, ValueError) as error:
        print(f"mutate: --resume: {error}", file=sys.stderr)
        return 2
    if args.resume:
        carried = sum(1 for m in mutants if m.id in earlier and m.id not in equivalents)
        print(f"resuming: {carried} of {len(mutants)} mutants killed in an earlier run", flush=True)

    started = time.monotonic()
    scratch = Scratch()
    outcomes: list[Outcome] = []
    interrupted = False
    # SIGTERM (CI's timeout, kill) ends the run like Ctrl-C: the scratch tree goes.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started ignoring it
    try:
        print(f"scratch tree: {scratch.tree}", flush=True)
        scratch.populate()
        todo = [m for m in mutants if m.id not in equivalents and m.id not in earlier]
        c_tests = any(is_native(m.path) for m in todo)
        scratch.build_baseline(c_tests)
        # The smoke's mutants must die in their selection: no second chance.
        runner = Runner(scratch, args.timeout, args.verbose, whole_suite=not args.smoke)
        if not args.skip_baseline and todo:
            runner.check_baseline(sorted({m.selection for m in todo}), c_tests)
        texts: dict[str, str] = {}
        for number, mutant in enumerate(mutants, 1):
            if mutant.id in equivalents:
                outcome = Outcome(mutant, "equivalent", equivalents[mutant.id], 0.0)
            elif mutant.id in earlier:
                outcome = Outcome(mutant, "killed", f"in an earlier run: {earlier[mutant.id]}", 0.0)
            else:
                outcome = runner.run(mutant, c_tests)
            outcomes.append(outcome)
            text = texts.setdefault(mutant.path, (ROOT / mutant.path).read_text(encoding="utf-8"))
            print(
                f"[{number}/{len(mutants)}] {outcome.status:<10} {mutant.id}  "
                f"{mutant.path}::{mutant.function}  {mutant.describe(text)}"
                f"  ({outcome.seconds:.1f} s) {outcome.how[:160]}",
                flush=True,
            )
            if args.json:
                write_json(args.json, outcomes)
    except KeyboardInterrupt:
        interrupted = True
        print("\ninterrupted: the checkout was never modified; partial results below")
    finally:
        if args.keep:
            print(f"kept: {scratch.dir}")
        else:
            scratch.remove()
    elapsed = time.monotonic() - started
    print(report(outcomes, equivalents, elapsed))
    if args.json:
        write_json(args.json, outcomes)
    survivors = [o for o in outcomes if o.status == "survived"]
    if interrupted:
        return 130
    if args.smoke and any(o.status != "killed" for o in outcomes):
        print("mutate: every smoke mutant must be killed")
        return 1
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
