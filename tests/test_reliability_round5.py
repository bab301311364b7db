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


@pytest.mark.parametrize("args, message", [
    (["--kl_bound", "0"], "--kl_bound must be a finite number > 0.0, got 0.0"),
    (["--num_generations", "1"], "--num_generations must be a whole number in [2, 65,536], got 1"),
    (["--num_generations", "1000000000000"], "--num_generations must be a whole number in [2, 65,536]"),
    (["--only", ",,"], "names no detector"),
    (["--gpus", "100000000000000000000"], "--gpus must be a whole number in [1, 1,000,000]"),
    (["--entropy_floor", "nan"], "--entropy_floor must be a finite number >= 0.0, got nan"),
    (["--gpus", "8", "--gpu_hour_cost", "inf"], "--gpu_hour_cost must be a finite number >= 0"),
])
def test_diagnose_refuses_what_train_refuses_in_one_line(args, message):
    result = CliRunner().invoke(app, ["diagnose", str(FIXTURES / "quickstart"), *args])
    assert result.exit_code == 2 and message in result.output, result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1


def test_diagnose_says_what_it_did_not_do():
    quickstart = str(FIXTURES / "quickstart")
    result = CliRunner().invoke(app, ["diagnose", quickstart, quickstart, "--gpu_hour_cost", "2"])
    assert result.exit_code == 0
    assert "need --gpus: no money figure" in result.output and "given twice: each is diagnosed once" in result.output
    assert result.output.count("quickstart  (") == 1


def test_a_huge_integer_a_deep_nesting_and_random_bytes_are_lines_not_tracebacks(tmp_path):
    import json
    import os

    huge = tmp_path / "huge.jsonl"  # a value and a step past float's range
    huge.write_text("".join(json.dumps({"step": s, "reward": 0.5}) + "\n" for s in range(1, 6))
                    + '{"step": 6, "reward": ' + str(10**400) + "}\n" + '{"step": ' + str(10**400) + ', "reward": 1}\n')
    result = CliRunner().invoke(app, ["diagnose", str(huge)])
    assert result.exit_code == 0 and "NaN or infinite at 1 step(s)" in result.output, result.output
    assert "without a whole-number step" in result.output
    assert CliRunner().invoke(app, ["report", str(huge), "-o", str(tmp_path / "r")]).exit_code == 0
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "metrics.jsonl").write_text("[" * 150_000 + "]" * 150_000 + "\n")
    (tmp_path / "deep.jsonl").write_text("[" * 150_000 + "]" * 150_000 + "\n")
    (tmp_path / "random.csv").write_bytes(os.urandom(5000))
    for given, says in ((deep, "nests JSON deeper than Python reads"), (tmp_path / "deep.jsonl", "is not a run"),
                        (tmp_path / "random.csv", "is not a run")):
        result = CliRunner().invoke(app, ["diagnose", str(given)])
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1 and says in lines[0], (given, result.output[-600:])


@pytest.mark.parametrize("options", [dict(num_generations=0), dict(kl_bound=-1), dict(entropy_floor=float("nan")),
                                     dict(gpus=-1), dict(num_generations=True)])
def test_the_callback_takes_the_ranges_the_command_line_takes(options):
    pytest.importorskip("transformers")
    from grposcope.diagnose import Options
    from grposcope.integrations.trl_callback import DiagnoseCallback

    with pytest.raises(ValueError, match="must be a"):
        Options(**options)
    with pytest.raises((ValueError, TypeError)):
        DiagnoseCallback(options="x")
    with pytest.raises(ValueError):
        DiagnoseCallback(every=True)
