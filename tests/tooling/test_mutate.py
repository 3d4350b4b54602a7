"""tools/mutate.py, the mutation testing of the memory-safety code: its
operators make the mutants they document (and only those), its catalog
(tools/mutation_targets.py) names functions that exist and test files that
exist, every smoke mutant exists, and every equivalent mutant listed in
tools/mutation_equivalent.txt still matches a mutant and gives a reason.
Running mutants is `python tools/mutate.py` (docs/reliability.md); CI runs
the smoke sample."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_tool() -> ModuleType:
    """tools/mutate.py as a module (its catalog beside it on the path)."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        spec = importlib.util.spec_from_file_location("mutate", ROOT / "tools" / "mutate.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "tools"))


mutate = load_tool()

C_SOURCE = """
/* a comment: if (a && b) call(); */
static int helper(int x) { return x; }

int decide(int *p, int n, const char *s) {
    assert(p != NULL && n >= 0);
    if (n > 0 && p[n - 1] == 3 || !s) expire(p);
    const char *text = "a < b && c";
    for (int i = 0; i < n; i++) barrier(p, i + 1);
    int k = s == NULL ? helper(n) : helper(1);
    switch (k) {
    case 2: release(p);
    }
    return helper(n) != 0;
}
"""


def changes(mutants: list) -> set[tuple[str, str, str]]:  # type: ignore[type-arg]
    return {(m.operator, C_SOURCE[m.start : m.end], m.replacement) for m in mutants}


def test_c_operators_make_the_documented_mutants() -> None:
    made = mutate.c_mutants("x.c", "decide", "lookups", C_SOURCE)
    got = changes(made)
    expected = {
        ("off-by-one", ">", ">="),
        ("off-by-one", "<", "<="),
        ("off-by-one", "1", "0"),  # n - 1, i + 1
        ("negate-compare", "==", "!="),
        ("negate-compare", "!=", "=="),
        ("swap-logic", "&&", "||"),
        ("swap-logic", "||", "&&"),
        ("drop-condition", "n > 0", "1"),
        ("drop-condition", "p[n - 1] == 3", "1"),
        ("drop-condition", "n > 0 && p[n - 1] == 3", "0"),
        ("drop-condition", "!s", "0"),
        ("remove-call", "expire(p);", "(void)0;"),
        ("remove-call", "barrier(p, i + 1);", "(void)0;"),
        ("remove-call", "release(p);", "(void)0;"),  # after a case label
    }
    assert got == expected
    # `s == NULL` is not negated (that breaks the success path, which any test
    # sees); a call in a ternary is a value, not a statement.
    # Nothing inside assert(), a comment or a string; calls used as values stay.
    assert all("assert" not in m.line and '"' not in m.line for m in made)
    assert not any(
        m.replacement == "(void)0;" and "helper" in C_SOURCE[m.start : m.end] for m in made
    )
    # Ids: the function, the operator, a hash of the line and the change.
    assert len({m.id for m in made}) == len(made)
    assert all(m.id.startswith("decide:" + m.operator + ":") for m in made)


def test_c_ids_do_not_depend_on_line_numbers() -> None:
    """A mutant keeps its id when code above it moves."""
    before = {m.id for m in mutate.c_mutants("x.c", "decide", "lookups", C_SOURCE)}
    moved = "\n\n/* new */\nint other(void) { return 1 < 2; }\n" + C_SOURCE
    after = {m.id for m in mutate.c_mutants("y.c", "decide", "lookups", moved)}
    assert before == after


PY_SOURCE = """
class Holder:
    def get(self, handle):
        if handle is None or not self.live:
            return None
        self.flush()
        assert handle != 0
        return self.table.get(handle + 1)
"""


def test_python_operators_make_the_documented_mutants() -> None:
    made = mutate.py_mutants("x.py", "Holder.get", "runtime", PY_SOURCE)
    got = {(m.operator, m.replacement) for m in made}
    assert ("negate-compare", "(handle is not None)") in got
    assert ("swap-logic", "(handle is None and (not self.live))") in got
    assert ("drop-condition", "(handle is None)") in got
    assert ("drop-condition", "(not self.live)") in got
    assert ("negate-not", "(self.live)") in got
    assert ("remove-call", "pass") in got
    assert ("off-by-one", "0") in got
    for mutant in made:  # every mutant is valid Python
        compile(mutant.apply(PY_SOURCE), "x.py", "exec")


def test_the_catalog_follows_the_code() -> None:
    """Every target function exists (a moved function needs its new path in
    tools/mutation_targets.py), ids are unique, selections name files."""
    mutants = mutate.all_mutants()
    assert len(mutants) > 800
    catalog = mutate.catalog
    for files in [catalog.CORE, *catalog.SELECTIONS.values()]:
        missing = [f for f in files if not (ROOT / f.split("::")[0]).is_file()]
        assert missing == []
    assert {m.selection for m in mutants} <= set(catalog.SELECTIONS)
    paths = {target.path for target in catalog.TARGETS}
    assert {path.split("/")[0] for path in paths} == {"native", "src"}


def test_every_smoke_mutant_exists_and_covers_each_kind_of_code() -> None:
    """CI runs the sample (`.ci/run`); each of its mutants exists, and it
    has mutants of the heap, the binding and the Python layers."""
    assert "python tools/mutate.py --smoke" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    by_id = {m.id: m for m in mutate.all_mutants()}
    smoke = [by_id[key] for key in mutate.catalog.SMOKE]  # KeyError: pick a new one
    assert len(smoke) == len(set(mutate.catalog.SMOKE)) >= 8
    kinds = {m.path.split("/")[1] for m in smoke}
    assert kinds >= {"src", "binding", "zsharp_py"}


def test_every_equivalent_mutant_exists_and_says_why() -> None:
    equivalents = mutate.read_equivalents()
    ids = {m.id for m in mutate.all_mutants()}
    stale = sorted(set(equivalents) - ids)
    assert stale == [], "argue these again against the code as it is, or delete them"
    assert all(len(reason) > 20 for reason in equivalents.values())


def test_resume_carries_only_kills_and_json_round_trips(tmp_path: Path) -> None:
    """--resume skips what an earlier run killed, nothing else: survivors,
    stillborn and equivalent mutants run again; an outcome file written
    after every mutant reads back; a kill carried twice keeps its first
    reason; a file that is not a list of outcomes is refused."""
    mutants = mutate.c_mutants("x.c", "decide", "lookups", C_SOURCE)[:4]
    statuses = ["killed", "survived", "stillborn", "equivalent"]
    outcomes = [
        mutate.Outcome(m, status, f"how {i}", 1.0)
        for i, (m, status) in enumerate(zip(mutants, statuses, strict=True))
    ]
    first = tmp_path / "first.json"
    mutate.write_json(first, outcomes)
    assert not (tmp_path / "first.json.partial").exists()
    assert mutate.read_kills([first]) == {mutants[0].id: "how 0"}
    carried = mutate.Outcome(mutants[0], "killed", "in an earlier run: how 0", 0.0)
    second = tmp_path / "second.json"
    mutate.write_json(second, [carried])
    assert mutate.read_kills([second, first]) == {mutants[0].id: "how 0"}
    assert "killed in an earlier run (--resume), not run again: 1" in mutate.report(
        [carried, outcomes[1]], {}, 60.0
    )
    bad = tmp_path / "bad.json"
    bad.write_text('{"id": "x"}')
    try:
        mutate.read_kills([bad])
    except ValueError as error:
        assert "not a list" in str(error)
    else:
        raise AssertionError("a file that is no list of outcomes was read")


def test_a_survivor_runs_the_rest_of_the_library_tests() -> None:
    """A mutant its selection and CORE let through runs every other test
    file of the library (so "survived" means the whole suite passed): not
    the files it ran already, not tests/tooling's checks of tools, not the
    build test that needs an install; the baseline checks the whole set."""
    runner = object.__new__(mutate.Runner)
    runner.scratch = type("FakeScratch", (), {"tree": ROOT})()
    library = runner.library_tests()
    assert "tests/tooling/test_docs_examples.py" in library
    assert "tests/tooling/test_mutate.py" not in library
    assert "tests/hosts/test_host_build.py" not in library
    assert "tests/objects/test_object_wrappers.py" in library
    for selection, first in mutate.catalog.SELECTIONS.items():
        rest = runner.rest_command(selection)[len(mutate._PYTEST) :]
        ran = set(first) | set(mutate.catalog.CORE)
        assert not ran & set(rest)
        assert sorted(rest + [name for name in library if name in ran]) == library
