"""The demo (``python -m zsharp_py demo``): a shooter on the sample engine
whose game logic is Python overrides the engine calls from C; reproducible
output, incremental cycles that span frames, a legend for every term it
uses, consistent totals. None of these tests depends on timing or load: the
demo's GC steps are bounded by work (GcSettings.objects_per_tick), not by
time."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from collections import defaultdict
from typing import Any

import pytest

import zsharp_py as zs
from zsharp_py import _demo
from zsharp_py.__main__ import main
from zsharp_py._demo import SPAWNS_PER_FRAME, run_demo
from zsharp_py._runtime.collector import GarbageCollector

FRAME = re.compile(
    r"^frame +(\d+): (\d+) soldiers? ticked, (\d+) shots?, (\d+) killed, (\d+) alive; (.*)$"
)
# FRAME's groups.
NUMBER, TICKED, SHOTS, KILLED, ALIVE, GC = range(1, 7)
CYCLE = re.compile(r"^GC cycle (\d+)( starts)?: ")


def demo(**options: Any) -> tuple[str, dict[str, int]]:
    out = io.StringIO()
    totals = run_demo(out=out, **options)
    return out.getvalue(), totals


def frame_lines(text: str) -> list[re.Match[str]]:
    lines = [line for line in text.splitlines() if line.startswith("frame")]
    matches = [FRAME.match(line) for line in lines]
    assert all(matches), [line for line, match in zip(lines, matches, strict=True) if match is None]
    return [match for match in matches if match is not None]


def legend(text: str) -> tuple[dict[str, str], str]:
    """The legend's terms (and their meanings), and the output after it."""
    head, _, rest = text.partition("\nLegend:\n")
    assert rest, "no legend"
    block, _, after = rest.partition("\n\n")
    terms: dict[str, str] = {}
    term = ""
    for line in block.splitlines():
        if line.startswith("   "):  # a continuation line: indented further than a term
            terms[term] += " " + line.strip()
        else:
            term, meaning = re.split(r"\s{2,}", line.strip(), maxsplit=1)
            terms[term] = meaning
    return terms, head + "\n" + after


def summary(text: str) -> dict[str, str]:
    _, _, block = text.partition("\nSummary:\n")
    assert block, "no summary"
    pairs = {}
    for line in block.splitlines():
        label, separator, value = line.strip().partition(": ")
        assert separator, f"not a 'label: value' line: {line!r}"
        pairs[label] = value.strip()
    return pairs


def test_the_same_seed_prints_the_same_output() -> None:
    first, totals = demo(frames=8, seed=3)
    second, again = demo(frames=8, seed=3)
    assert first == second and totals == again
    assert " ms" not in first and "second" not in first  # nothing measured


def test_the_command_line_prints_what_run_demo_prints(capsys: pytest.CaptureFixture[str]) -> None:
    # Another hash seed in the child: nothing printed may depend on it.
    env = dict(os.environ, PYTHONHASHSEED="12345")
    result = subprocess.run(
        [sys.executable, "-m", "zsharp_py", "demo", "--frames", "6", "--seed", "5"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no override's exception reported on the way
    assert main(["demo", "--frames", "6", "--seed", "5"]) == 0
    assert result.stdout == capsys.readouterr().out
    assert result.stdout == demo(frames=6, seed=5)[0]


def test_different_seeds_play_different_games() -> None:
    games = {}
    for seed in (1, 2, 3):
        text = demo(frames=6, seed=seed)[0]
        assert text == demo(frames=6, seed=seed)[0]  # each game is reproducible...
        games[seed] = "\n".join(line[0] for line in frame_lines(text))
    assert len(set(games.values())) == 3  # ...and the seed changes the game itself


def test_timings_are_printed_only_when_asked_for() -> None:
    plain, _ = demo(frames=6)
    timed, _ = demo(frames=6, timings=True)
    assert "timings" not in plain and " ms" not in plain
    assert re.search(r"timings, measured .*: marking \d+\.\d{3} ms", timed)


@pytest.mark.parametrize("options", [{}, {"frames": 6}])
def test_a_cycle_marks_and_purges_across_several_frames(options: dict[str, int]) -> None:
    text, _ = demo(**options)
    by_cycle: dict[int, list[str]] = defaultdict(list)
    starts: list[int] = []
    for line in frame_lines(text):
        cycle = CYCLE.match(line[GC])
        if cycle:
            by_cycle[int(cycle[1])].append(line[GC])
            if cycle[2]:
                starts.append(int(cycle[1]))
    assert by_cycle, "no GC cycle ran during the frames"
    assert starts == sorted(by_cycle)  # each cycle's first frame line says it starts
    spanning = []
    for number, texts in by_cycle.items():
        marking = [text for text in texts if re.search(r": marking \([\d,]+ objects marked", text)]
        purging = [text for text in texts if re.search(r": purging, ", text)]
        if len(texts) >= 3 and marking and purging:
            spanning.append(number)
            assert texts.index(marking[-1]) < texts.index(purging[0])
            assert sum("freed" in text for text in texts) >= 2  # the purge spans frames too
        done = re.search(r"the cycle is finished, after (\d+) frames?$", texts[-1])
        if done:
            assert int(done[1]) == len(texts)
    assert spanning, by_cycle


def test_the_legend_explains_every_term_the_output_uses() -> None:
    text, _ = demo()
    terms, rest = legend(text)
    frames = "\n".join(line[0] for line in frame_lines(text))
    jargon = {
        r"\bticked\b": "ticked",
        r"\bmarked\b": "marked",
        r"\bmarking\b": "marking",
        r"\bscanned\b": "scanned",
        r"\bclusters?\b": "cluster",
        r"\bkilled\b": "killed",
        r"\bfreed\b": "freed",
        r"\breferences? nulled\b": "references nulled",
        r"\bconjugates? expired\b": "conjugates expired",
        r"\bunreachable\b": "unreachable",
        r"\bpurging\b": "purging",
        r"\bGC cycle\b": "GC cycle",
        r"\bshots?\b": "shots",
    }
    used_in_frames = {term for pattern, term in jargon.items() if re.search(pattern, frames)}
    assert {
        "ticked",
        "marked",
        "killed",
        "freed",
        "conjugates expired",
        "references nulled",
        "purging",
        "GC cycle",
    } <= used_in_frames
    assert used_in_frames <= set(terms), used_in_frames - set(terms)
    for pattern, term in jargon.items():  # the rest of the output uses what the legend lists
        if term in terms:
            assert re.search(pattern, rest), term
    assert "cluster" in terms and "scanned" in terms and "without being read" in terms["scanned"]
    assert "ExpiredConjugateError" in terms["conjugates expired"]
    # The legend says which side does what: the engine in C, the overrides in Python.
    assert "in C" in terms["ticked"] and "Python override" in terms["ticked"]
    assert "on_destroy" in terms["killed"] and "take_damage" in terms["killed"]


def test_the_header_tells_what_is_native_and_what_is_python() -> None:
    text, _ = demo(frames=1)
    header = " ".join(text.partition("\nLegend:\n")[0].split())  # unwrapped
    for said in (
        "The engine, in C (native/engine/sample_engine.c)",
        "The game, in Python: Soldier is a Python subclass of the engine's Actor",
        "the engine calls the overrides from C",
        "super().begin_play()",
        "super().tick(dt)",
        "Python state (zs.state())",
        "a Python subclass of the engine's World",
        "only a StrongObjectPtr keeps it alive",
    ):
        assert said in header, said


def test_the_legend_leaves_out_terms_the_output_does_not_use() -> None:
    text, _ = demo(frames=1)  # the first cycle would start at frame 3: no frame line has one
    terms, _ = legend(text)
    assert "marking" not in terms and "purging" not in terms and "GC cycle" in terms


def test_totals_add_up() -> None:
    text, totals = demo(frames=9, seed=3)
    frames = frame_lines(text)
    assert len(frames) == 9
    assert totals["spawned"] == 9 * SPAWNS_PER_FRAME
    assert totals["killed"] == sum(int(line[KILLED]) for line in frames) > 0
    assert totals["shots"] == sum(int(line[SHOTS]) for line in frames)
    assert totals["ticked"] == sum(int(line[TICKED]) for line in frames)
    assert int(frames[-1][ALIVE]) == totals["spawned"] - totals["killed"]
    # Nothing is lost: created = freed (by the collector, or at once when
    # the only proxy went: the projectiles) + live.
    assert totals["freed"] > 0 and totals["freed_at_once"] > 0
    assert totals["created"] == totals["freed"] + totals["freed_at_once"] + totals["live"]
    assert totals["nulled"] > 0
    # Only the proxies Python still held are expired (a proxy nobody held is
    # gone already): each destroyed soldier's, held for its Python state by
    # the conjugate table while it lived, and the camera's.
    assert totals["expired"] == totals["killed"] + 1 <= totals["freed"]
    pairs = summary(text)
    assert pairs["soldiers spawned"] == "27" and pairs["frames played"] == "9"
    assert pairs["objects freed by the GC"] == f"{totals['freed']:,}"
    assert pairs["objects freed at once"] == f"{totals['freed_at_once']:,}"
    assert pairs["conjugates expired"] == f"{totals['expired']:,}"
    assert pairs["objects on the heap at the end"] == f"{totals['live']:,}"
    assert pairs["GC cycles"].startswith(f"{totals['collections']} ({totals['incremental']} ")
    assert "{" not in text  # no raw dict anywhere


def test_the_engine_calls_the_python_overrides_from_c() -> None:
    """Each soldier's begin_play ran once, from the engine's spawn; its tick
    once for each actor World.tick said it ticked; its on_destroy once for
    each soldier destroyed, from the engine's destroy."""
    text, totals = demo(frames=9, seed=3)
    assert totals["begin_play"] == totals["spawned"]
    assert totals["tick"] == totals["ticked"] > totals["spawned"]
    assert totals["on_destroy"] == totals["killed"] > 0
    assert summary(text)["Python overrides run from C"] == (
        f"begin_play {totals['begin_play']}, tick {totals['tick']}, "
        f"on_destroy {totals['on_destroy']}"
    )
    flat = " ".join(text.split())
    # The Python begin_play set the maximum health (60 to 120) before its
    # super().begin_play(), the engine's default, brought the soldier to it.
    spawned = re.search(r"called super\(\)\.begin_play\(\) \(C\): (.*?) the camera", flat)
    assert spawned, flat[:2000]
    first = re.findall(r"(Soldier_\d+) \((Red|Blue), (\d+) health\)", spawned[1])
    assert [name for name, _, _ in first] == ["Soldier_0", "Soldier_1", "Soldier_2"]
    assert {team for _, team, _ in first} == {"Red", "Blue"}
    assert all(60 <= int(health) <= 120 for _, _, health in first)
    # The first kill went through the engine: take_damage, destroy, on_destroy.
    assert re.search(
        r"(Soldier_\d+) shot (Soldier_\d+) down: the engine's take_damage \(C\) left it 0 "
        r"health and alive=False; \1's tick \(Python\) called world\.destroy, and the engine "
        r"\(C\) called \2's on_destroy \(Python\), then marked it as garbage",
        flat,
    )


def test_an_override_that_raises_stops_the_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    """An override's exception reaches the demo's call into the engine
    (world.tick raises zs.CallbackError, the original as its cause): the
    demo needs no handling of its own, and nothing goes to the hook."""

    def broken(game: object, killer: object, victim: object) -> None:
        raise ZeroDivisionError("a bug in the game logic")

    reported: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    monkeypatch.setattr(_demo._Game, "on_kill", broken)
    with pytest.raises(zs.CallbackError, match="World.tick.*raised ZeroDivisionError") as e:
        demo(frames=6)
    assert isinstance(e.value.__cause__, ZeroDivisionError)
    assert reported == []


def test_every_cycle_leaves_a_heap_that_verifies(monkeypatch: pytest.MonkeyPatch) -> None:
    verified: list[str] = []
    original = GarbageCollector.verify

    def verify(self: GarbageCollector) -> None:
        original(self)  # raises when the heap is inconsistent
        verified.append(self.phase)

    monkeypatch.setattr(GarbageCollector, "verify", verify)
    _, totals = demo()
    assert len(verified) == totals["collections"] >= 4
    assert set(verified) == {"idle"}  # after each cycle, incremental or full


def test_destroyed_soldiers_state_lives_and_dies_with_them() -> None:
    text, totals = demo()
    flat = " ".join(text.split())
    assert (
        f"All {totals['killed']} soldiers destroyed in play are freed, their proxies expired: "
        "the conjugate table held each while it lived, for its Python state (zs.state())"
    ) in flat
    fallen = re.search(
        r"(Soldier_\d+) fell after (\d+) kills? (\(([\w, ]+)\), )?as its on_destroy filed it; "
        r"its kill log went with it: reading it now raises ExpiredConjugateError",
        flat,
    )
    assert fallen, flat
    assert int(fallen[2]) == (0 if fallen[4] is None else len(fallen[4].split(", ")))
    best = re.search(
        r"(Soldier_\d+), the best scorer still standing \(spawned in frame (\d+)\), still has "
        r"its kill log, Python state on the native soldier, after (\d+) GC cycles? in which "
        r"no Python root kept it \(the World's native array of actors did\): ([\w, ]+)\.",
        flat,
    )
    assert best, flat
    assert int(best[3]) >= 2  # state kept across collections
    kills = best[4].split(", ")
    assert all(re.fullmatch(r"Soldier_\d+", name) for name in kills)
    assert len(kills) <= int(summary(text)["top scorer"].split(", ")[1].split()[0])


def test_the_camera_is_kept_by_its_strong_pointer_only() -> None:
    text, _ = demo()
    assert re.search(
        r"The camera \(following (Soldier_\d+|nobody)\) is alive although no\s+object\s+"
        r"references it: its\s+StrongObjectPtr\s+is\s+a\s+root",
        text,
    )
    assert re.search(
        r"After camera_ptr\.dispose\(\), GC cycle \d+ freed 1 object \(the camera\): "
        r"using its proxy now raises\s+ExpiredConjugateError\(\"Camera 'Camera' has expired",
        text,
    )


@pytest.mark.parametrize("options", [{}, {"frames": 6, "seed": 5}, {"frames": 7, "seed": 2}])
def test_the_collector_nulls_references_and_weak_pointers_go_none(options: dict[str, int]) -> None:
    """Each soldier the camera followed and saw killed: camera.follows is
    nulled by the collector, then the weak pointer to it returns None."""
    text, _ = demo(**options)
    flat = " ".join(text.split())
    killed = re.findall(r"the camera's soldier (\w+) was killed by \w+", flat)
    assert killed
    for name in killed:
        told = flat.index(f"the camera's soldier {name} was killed")
        nulled = re.search(
            rf"(the GC|That cycle|The final collection) nulled camera\.follows: "
            rf"{name} is marked as garbage",
            flat,
        )
        assert nulled, name
        gone = re.search(rf"(the|The) WeakObjectPtr to {name} now returns None", flat)
        assert gone, name
        assert told < nulled.start() < gone.start()
    followed = re.findall(r"the camera now follows (\w+) \((\d+) health\), the weakest", flat)
    assert [name for name, _ in followed[: len(killed)]] == killed  # it moves on each time


def test_counts_have_the_right_plurals() -> None:
    texts = [demo(frames=4, seed=seed, collect_every=1)[0] for seed in range(4)]
    texts.append(demo(frames=4, objects_per_frame=1_000_000)[0])  # cycles of one frame
    text = "\n".join(texts)
    nouns = (
        "soldier|shot|frame|object|reference|conjugate|cluster|step|kill|smoke particle|GC cycle"
    )
    assert not re.search(rf"(?<![\w,.])1 ({nouns})s\b", text)
    assert not re.search(rf"(?<![\w,.])(0|[2-9]|\d[\d,]+) ({nouns})\b(?!s)", text)
    for singular in (
        "the cycle is finished, after 1 frame\n",
        "freed 1 object (the camera)",
        "in 1 cluster marked",
    ):
        assert singular in text
    assert re.search(r"the cycle is finished, after [2-9] frames\n", text)
    assert "every frame" in texts[0] and "every 1 frame" not in text
    assert "every 3 frames" in demo(frames=1)[0]


def test_run_demo_checks_its_arguments() -> None:
    for options in (
        {"frames": 0},
        {"collect_every": 0},
        {"objects_per_frame": 0},
        {"particles": -1},
        {"frames": True},
    ):
        with pytest.raises(ValueError, match="must be an integer"):
            demo(**options)


@pytest.mark.parametrize(
    "options",
    [{"particles": 0}, {"frames": 40, "objects_per_frame": 1}, {"frames": 120, "seed": 11}],
)
def test_unusual_settings_play_through(options: dict[str, int]) -> None:
    text, totals = demo(**options)
    assert totals["created"] == totals["freed"] + totals["freed_at_once"] + totals["live"]
    assert totals["on_destroy"] == totals["killed"] and totals["tick"] == totals["ticked"]
    assert len(frame_lines(text)) == options.get("frames", 12)
