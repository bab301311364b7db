"""Model and data text shown on a terminal (issue 26, point 5): no control byte of it reaches the terminal.

A completion holding a window-title sequence (OSC "\\x1b]0;pwned\\x07"), a clear-screen (CSI "\\x1b[2J") and a
one-byte C1 CSI ("\\x9b") is printed by `grposcope audit-rewards`, by the training display and in an error
line; each shows the sequence as visible text and passes none of those bytes through.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

EVIL = "\x1b]0;pwned\x07\x1b[2J\x9b31m"
RAW = ("\x1b", "\x07", "\x9b")  # what must never reach the terminal


def assert_no_raw_control(text: str) -> None:
    for char in RAW:
        assert char not in text, f"{char!r} reached the output: {text!r}"


def test_terminal_safe_writes_controls_as_visible_escapes():
    from grposcope.terminal import markup_safe, terminal_safe

    # by hand: ESC -> \x1b, BEL -> \x07, C1 CSI -> \x9b, NUL -> \x00, DEL -> \x7f, CR -> \x0d; newline, tab,
    # and printable non-ASCII (é, ✓) stay as they are
    text = "a\x1b]0;pwned\x07b\x1b[2J\x9bc\x00\x7f\r\n\té✓"
    assert terminal_safe(text) == r"a\x1b]0;pwned\x07b\x1b[2J\x9bc\x00\x7f\x0d" + "\n\té✓"
    assert markup_safe("[bold red]x\x1b[0m") == r"\[bold red]x\x1b[0m"  # rich shows "[bold red]" as written
    assert terminal_safe(42) == "42"


@pytest.fixture
def pairs_file(tmp_path):
    """Two pairs on which boxed_exact and last_number disagree, so audit-rewards shows them as examples:
    the boxed answer is right, the last number after it (inside the control sequences) is not."""
    path = tmp_path / "pairs.jsonl"
    rows = [{"completion": f"so \\boxed{{4}} {EVIL} 5", "answer": "4"},
            {"completion": f"\\boxed{{7}}{EVIL}8", "answer": "7"}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_audit_rewards_prints_control_sequences_as_visible_text(pairs_file):
    # the real command in a process of its own: its stdout bytes are what a terminal would get
    result = subprocess.run([sys.executable, "-m", "grposcope.cli", "audit-rewards", str(pairs_file),
                             "--verifiers", "boxed_exact,last_number", "--examples", "2"],
                            capture_output=True, timeout=300)
    out = result.stdout.decode("utf-8")
    assert result.returncode == 0, result.stderr.decode()
    assert "boxed_exact right, last_number wrong: 2 of 2" in out  # the examples were printed
    assert_no_raw_control(out + result.stderr.decode("utf-8"))
    assert r"\x1b]0;pwned\x07\x1b[2J\x9b31m 5" in out  # shown, as text


def test_the_training_display_prints_notes_as_visible_text(capsys):
    from grposcope.logging.console import LiveDisplay, PlainDisplay

    plain = PlainDisplay(total_steps=2)
    plain.note(f"a note quoting {EVIL}")
    live = LiveDisplay(total_steps=2)
    live.note(f"a note quoting [bold]{EVIL}")
    live.stop()
    out = capsys.readouterr().out
    assert_no_raw_control(out)
    assert out.count(r"\x1b]0;pwned\x07\x1b[2J\x9b31m") == 2
    assert "quoting [bold]" in out  # not read as rich markup


def test_an_error_line_quoting_a_data_file_shows_its_controls_as_text(tmp_path, tiny_model_dir, monkeypatch):
    # a MATH-500 row without 'problem': the error lists the row's fields, here one named with the sequences
    from test_hardening import run

    data = tmp_path / "math.jsonl"
    data.write_text(json.dumps({f"question{EVIL}": "1 + 1", "answer": "2"}) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = run("train", "--model_name_or_path", str(tiny_model_dir), "--dataset_name", str(data),
                 "--output_dir", str(tmp_path / "out"))
    assert result.exit_code == 2
    line = next(line for line in result.output.splitlines() if line.startswith("error: "))
    assert r"question\x1b]0;pwned\x07\x1b[2J\x9b31m" in line
    assert_no_raw_control(result.output)
