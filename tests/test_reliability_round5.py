"""Reliability, round 5 (issue 56): each case a probe found, as the smallest input that shows it; each failed before
its change. docs/reliability.md's table has the message a real run printed."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from grposcope.cli import app

FIXTURES = Path(__file__).parent / "fixtures" / "runs"
HOSTILE = "run\x1b]0;pwned\x07\x1b[2J<b>x<i>"  # retitles and clears a terminal that prints it; HTML in a page


def test_escapes_and_html_in_a_run_name_reach_no_file_raw(tmp_path):
    shutil.copytree(FIXTURES / "quickstart", tmp_path / HOSTILE)
    result = CliRunner().invoke(app, ["report", str(tmp_path / HOSTILE), "-o", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    for name in ("report.md", "steps.csv", "report.html", "findings.json"):
        text = (tmp_path / "r" / name).read_text(encoding="utf-8")
        assert "\x1b" not in text and "\x07" not in text, name
        if name.endswith((".md", ".html")):  # JSON and CSV hold the name as data; the pages show it as text
            assert "<b>x" not in text, name
    assert "\\x1b" in (tmp_path / "r" / "report.md").read_text()  # shown, not dropped


def test_the_callbacks_findings_md_shows_a_hostile_run_name_as_text(tmp_path):
    pytest.importorskip("transformers")
    from grposcope.integrations.trl_callback import DiagnoseCallback

    args = SimpleNamespace(output_dir=str(tmp_path), run_name=HOSTILE, num_generations=4, max_completion_length=8,
                           report_to=[])
    state = SimpleNamespace(max_steps=6, log_history=[], is_world_process_zero=True, global_step=0)
    callback = DiagnoseCallback(every=2)
    callback.on_train_begin(args, state, None)
    for step in range(1, 7):
        state.global_step = step
        callback.on_log(args, state, None, logs={"reward": 0.0, "reward_std": 0.0, "grad_norm": 0.0})
    callback.on_train_end(args, state, None)
    text = (tmp_path / "findings.md").read_text(encoding="utf-8")
    first = text.splitlines()[0]
    assert "\x1b" not in text and "\x07" not in text and "<b>" not in first and "&lt;b>" in first
