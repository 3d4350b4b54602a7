"""The command line: ``python -m zsharp_py`` and the ``zsharp-py`` script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import zsharp_py
from zsharp_py.__main__ import main, program_name

MODULE_MAIN = str(Path(zsharp_py.__file__).with_name("__main__.py"))


@pytest.fixture
def as_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """sys.argv[0] as ``python -m zsharp_py`` sets it."""
    monkeypatch.setattr(sys, "argv", [MODULE_MAIN])


@pytest.fixture
def as_script(monkeypatch: pytest.MonkeyPatch) -> None:
    """sys.argv[0] as the ``zsharp-py`` console script sets it."""
    monkeypatch.setattr(sys, "argv", ["/opt/venv/bin/zsharp-py"])


def exit_status(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert isinstance(exited.value.code, int)
    return exited.value.code


def test_version(as_module: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_status(["--version"]) == 0
    assert capsys.readouterr().out == f"zsharp_py {zsharp_py.__version__}\n"


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--frames", "0", "argument --frames: must be a positive integer, got 0"),
        ("--frames", "-3", "argument --frames: must be a positive integer, got -3"),
        ("--frames", "many", "argument --frames: must be a positive integer, got 'many'"),
        ("--collect-every", "0", "argument --collect-every: must be a positive integer, got 0"),
        (
            "--objects-per-frame",
            "0",
            "argument --objects-per-frame: must be a positive integer, got 0",
        ),
        (
            "--objects-per-frame",
            str(2**32),
            "argument --objects-per-frame: must be at most 4,294,967,295, got 4,294,967,296",
        ),
        ("--particles", "-1", "argument --particles: must be a non-negative integer, got -1"),
    ],
)
def test_demo_option_errors_come_from_the_demo_parser(
    as_module: None, capsys: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    assert exit_status(["demo", option, value]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m zsharp_py demo [-h] [--frames N]")
    assert err.rstrip().endswith(f"python -m zsharp_py demo: error: {message}")


def test_demo_help_explains_every_option(
    as_module: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert exit_status(["demo", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # unwrapped
    for option, default in (
        ("--frames N", "12"),
        ("--seed S", "7"),
        ("--collect-every N", "3"),
        ("--objects-per-frame N", "200"),
        ("--particles N", "300"),
    ):
        assert option in text
        help_text = text.split(option)[-1]
        assert f"default: {default})" in help_text.split(" --")[0], option
    assert "number of frames to play (default: 12)" in text
    assert "a game engine written in C whose actors the game subclasses in Python" in text
    assert "GcSettings.objects_per_tick" in text
    assert "--timings also print the measured time" in text
    assert "no longer reproducible" in text


def test_the_console_script_calls_itself_zsharp_py(
    as_script: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert exit_status(["demo", "--frames", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: zsharp-py demo ") and "python -m" not in err
    assert main([]) == 2
    assert capsys.readouterr().err.startswith("usage: zsharp-py [-h] [--version] COMMAND")


def test_program_name() -> None:
    assert program_name("/usr/local/bin/zsharp-py") == "zsharp-py"
    assert program_name(r"C:\venv\Scripts\zsharp-py.exe".replace("\\", "/")) == "zsharp-py"
    assert program_name(MODULE_MAIN) == "python -m zsharp_py"
    assert program_name("") == "python -m zsharp_py"


def test_no_command_prints_the_help(as_module: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("usage: python -m zsharp_py [-h] [--version] COMMAND")
    assert "commands:" in captured.err and "demo" in captured.err and "--version" in captured.err


def test_python_dash_m_names_itself_and_rejects_bad_options() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "zsharp_py", "demo", "--frames", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("usage: python -m zsharp_py demo ")
    assert "error: argument --frames: must be a positive integer, got 0" in result.stderr
    bare = subprocess.run(
        [sys.executable, "-m", "zsharp_py"], capture_output=True, text=True, timeout=120
    )
    assert bare.returncode == 2 and "commands:" in bare.stderr


def test_the_installed_console_script() -> None:
    script = Path(sys.executable).with_name("zsharp-py")
    if not script.exists():
        pytest.skip("the zsharp-py script is not installed next to this Python")
    result = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout == f"zsharp_py {zsharp_py.__version__}\n"
    result = subprocess.run(
        [str(script), "demo", "--seed", "x"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2 and result.stderr.startswith("usage: zsharp-py demo ")
    assert "argument --seed: invalid int value: 'x'" in result.stderr
