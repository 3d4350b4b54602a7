"""The demo (``python -m zsharp_py demo``): reproducible output, incremental
cycles that span frames, a legend for every term it uses, consistent totals.
None of these tests depends on timing or load: the demo's GC steps are
bounded by work (GcSettings.objects_per_tick), not by time."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from collections import defaultdict
from typing import Any

import pytest

from zsharp_py.__main__ import main
from zsharp_py._demo import SPAWNS_PER_FRAME, run_demo

FRAME = re.compile(r"^frame +(\d+): (\d+) actors? alive, (\d+) killed, (\d+) shots?; (.*)$")
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
        cycle = CYCLE.match(line[5])
        if cycle:
            by_cycle[int(cycle[1])].append(line[5])
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


def test_the_legend_leaves_out_terms_the_output_does_not_use() -> None:
    text, _ = demo(frames=1)  # the first cycle would start at frame 3: no frame line has one
    terms, _ = legend(text)
    assert "marking" not in terms and "purging" not in terms and "GC cycle" in terms


def test_totals_add_up() -> None:
    text, totals = demo(frames=9, seed=3)
    frames = frame_lines(text)
    assert len(frames) == 9
    assert totals["spawned"] == 9 * SPAWNS_PER_FRAME
    assert totals["killed"] == sum(int(line[3]) for line in frames)
    assert totals["shots"] == sum(int(line[4]) for line in frames)
    assert int(frames[-1][2]) == totals["spawned"] - totals["killed"]
    # Only the proxies Python still held are expired (a proxy nobody held is
    # gone already); and nothing is lost: created = freed + live.
    assert totals["freed"] > 0 and 0 < totals["expired"] <= totals["freed"]
    assert totals["created"] == totals["freed"] + totals["live"]
    assert totals["nulled"] > 0
    pairs = summary(text)
    assert pairs["actors spawned"] == "27" and pairs["frames played"] == "9"
    assert pairs["objects freed"] == f"{totals['freed']:,}"
    assert pairs["conjugates expired"] == f"{totals['expired']:,}"
    assert pairs["objects on the heap at the end"] == f"{totals['live']:,}"
    assert pairs["GC cycles"].startswith(f"{totals['collections']} ({totals['incremental']} ")
    assert "{" not in text  # no raw dict anywhere


def test_the_camera_is_kept_by_its_strong_pointer_only() -> None:
    text, _ = demo()
    assert "health 0" not in text
    assert re.search(
        r"The camera \(health 100: it never fought\) is alive although no\s+object "
        r"references it: its\s+StrongObjectPtr is a root",
        text,
    )
    assert re.search(
        r"After camera_ptr\.dispose\(\), GC cycle \d+ freed 1 object \(the camera\): "
        r"using its proxy now raises\s+ExpiredConjugateError",
        text,
    )


def test_the_collector_nulls_references_and_weak_pointers_go_none() -> None:
    text, _ = demo()
    killed = re.search(r"the camera's actor (\w+) was killed", text)
    assert killed
    name = killed[1]
    nulled = text.index(f"the GC nulled camera.target: {name} is marked as garbage")
    assert (
        text.index(killed[0]) < nulled < text.index(f"the WeakObjectPtr to {name} now returns None")
    )


def test_counts_have_the_right_plurals() -> None:
    texts = [demo(frames=4, seed=seed, collect_every=1)[0] for seed in range(4)]
    texts.append(demo(frames=4, objects_per_frame=1_000_000)[0])  # cycles of one frame
    text = "\n".join(texts)
    nouns = "actor|shot|frame|object|reference|conjugate|cluster|step|kill|smoke particle"
    assert not re.search(rf"(?<![\d,.])1 ({nouns})s\b", text)
    assert not re.search(rf"(?<![\d,.])(0|[2-9]|\d[\d,]+) ({nouns})\b(?!s)", text)
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
