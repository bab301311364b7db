"""Typer's own usage errors (a missing option, a value of the wrong type, an unknown option or command) are one
`error:` line naming the command, the option, what it takes and an example, as the CLI's other errors are."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from grposcope.cli import app
from grposcope.cli.app import ERROR_CHARS, _bounded

runner = CliRunner()


def _error(args: list[str]) -> tuple[int, list[str]]:
    result = runner.invoke(app, args, prog_name="grposcope")
    lines = [line for line in result.output.splitlines() if line.strip()]
    return result.exit_code, lines


@pytest.mark.parametrize("args, wanted", [
    (["eval"], ["grposcope eval: --model is required", "it takes a checkpoint folder",
                "e.g. --model output/run/checkpoint-20"]),
    (["simulate", "--steps", "1e12"], ["grposcope simulate: --steps", "(got '1e12')", "it takes training steps",
                                       "e.g. --steps 200"]),
    (["forecast", "--mc_groups=lots"], ["grposcope forecast: --mc_groups", "(got 'lots')", "e.g. --mc_groups"]),
    (["simulate", "--bogus"], ["grposcope simulate: No such option: --bogus", "see grposcope simulate --help"]),
    (["bogus"], ["No such command 'bogus'", "see grposcope --help"]),
    (["sweep", "--output"], ["grposcope sweep: Option '--output' requires an argument", "see grposcope sweep --help"]),
    (["report"], ["grposcope report: RUNS is required", "it takes runs"]),
])
def test_usage_errors_are_one_line_naming_the_option_and_an_example(args, wanted):
    code, lines = _error(args)
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    for part in wanted:
        assert part in lines[0], (part, lines[0])
    assert "╭" not in lines[0] and "Usage:" not in lines[0]


def test_the_installed_command_prints_the_same_one_line():
    proc = subprocess.run([sys.executable, "-m", "grposcope.cli", "eval", "--dataset", "arithmetic"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith("error: ") and "eval: --model is required" in proc.stderr


def test_help_and_a_typer_exit_keep_their_exit_codes():
    result = runner.invoke(app, ["simulate", "--help"])
    assert result.exit_code == 0 and "--steps" in result.output
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("grposcope ")
    result = runner.invoke(app, ["report", "/nonexistent/run"])
    assert result.exit_code == 2 and result.output.startswith("error: ")


def test_an_error_quoting_a_huge_value_is_bounded():
    line = _bounded("x" * 1_000_000)
    assert len(line) < ERROR_CHARS + 60
    assert line.endswith("... (1,000,000 characters in all)")
    assert _bounded("short") == "short"
