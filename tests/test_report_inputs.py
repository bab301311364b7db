"""`grposcope report` on inputs a user can get wrong: run folders whose names matplotlib would read as mathtext
(`$...$`) or hide from a legend (`_x`), a log whose step is not a whole number, metric values that are not
numbers, and out-of-range alarm bounds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grposcope.cli import app
from grposcope.reports import plots

FIXTURES = Path(__file__).parent / "fixtures" / "runs"


def _drawn(raw: str) -> str:
    """What matplotlib draws for a text: plain text (no mathtext), `\\$` as `$`, the zero-width space as
    nothing."""
    import matplotlib.cbook

    assert not matplotlib.cbook.is_math_text(raw), f"{raw!r} would be drawn as mathtext"
    return raw.replace("\\$", "$").replace("\u200b", "")


@pytest.mark.parametrize("name", ["$\\x$", "$x$", "_x"])
def test_run_names_are_drawn_as_written_in_every_legend_and_title(tmp_path, monkeypatch, name):
    shutil.copytree(FIXTURES / "quickstart", tmp_path / name)
    shutil.copytree(FIXTURES / "quickstart", tmp_path / "plain")
    drawn: dict[str, list[str]] = {}
    save = plots.Canvas.save

    def spy(self, fig, file, caption):  # what each figure's legends and titles show, before it is closed
        drawn[file] = [_drawn(t.get_text()) for ax in fig.axes if ax.get_legend()
                       for t in ax.get_legend().get_texts()]
        drawn[file] += [_drawn(ax.get_title(loc)) for ax in fig.axes for loc in ("center", "left")]
        save(self, fig, file, caption)

    monkeypatch.setattr(plots.Canvas, "save", spy)
    out = tmp_path / "r"
    result = CliRunner().invoke(app, ["report", str(tmp_path / name), str(tmp_path / "plain"), "--output", str(out)])
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert sorted(p.name for p in out.glob("*.png")) == sorted(drawn)
    for file in ("acr.png", "entropy.png", "reward.png", "accuracy.png", "sampler_cost.png"):
        assert name in drawn[file] and "plain" in drawn[file], (file, drawn[file])
    assert name in drawn["collapse_split.png"]  # each run's panel has its name as title
    assert f"| {name} | grposcope | 20 |" in (out / "report.md").read_text()


def _trl_log(folder: Path, step) -> Path:
    state = json.loads((FIXTURES / "trl_avspo" / "trainer_state.json").read_text())
    state["log_history"][2]["step"] = step
    folder.mkdir()
    (folder / "trainer_state.json").write_text(json.dumps(state))
    return folder / "trainer_state.json"


@pytest.mark.parametrize("step, shown", [("3x", '"3x"'), (None, "null"), (2.5, "2.5")],
                         ids=["text", "null", "fraction"])
def test_a_trl_log_with_a_bad_step_names_the_file_and_the_entry(tmp_path, step, shown):
    path = _trl_log(tmp_path / "trl", step)
    result = CliRunner().invoke(app, ["report", str(tmp_path / "trl"), "--output", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert result.output == (f"error: {path}: log_history[2] has step {shown}; a step must be a whole number "
                             "(the optimizer step it was logged at): fix or remove that record\n")


def test_a_metrics_file_with_a_bad_step_names_the_file_and_the_line(tmp_path):
    lines = (FIXTURES / "quickstart" / "metrics.jsonl").read_text().splitlines()
    record = json.loads(lines[2])
    record["step"] = "3x"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text("\n".join(lines[:2] + [json.dumps(record)] + lines[3:]) + "\n")
    result = CliRunner().invoke(app, ["report", str(tmp_path / "run"), "--output", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert f'error: {tmp_path / "run" / "metrics.jsonl"}: line 3 has step "3x"' in result.output


def test_metric_values_that_are_not_numbers_are_noted_with_the_file(tmp_path):
    lines = [json.loads(line) for line in (FIXTURES / "quickstart" / "metrics.jsonl").read_text().splitlines()]
    lines[2]["reward/mean"] = "0.5"  # one string among numbers: that step is a gap
    for record in lines:
        record["entropy/mean"] = f"{record['entropy/mean']:.3f}"  # every value a string: the column is n/a
    (tmp_path / "run").mkdir()
    metrics = tmp_path / "run" / "metrics.jsonl"
    metrics.write_text("".join(json.dumps(r) + "\n" for r in lines))
    trl = _trl_log(tmp_path / "trl", 3)
    state = json.loads(trl.read_text())
    state["log_history"][1]["reward"] = [0.5]
    trl.write_text(json.dumps(state))
    out = tmp_path / "r"
    result = CliRunner().invoke(app, ["report", str(tmp_path / "run"), str(tmp_path / "trl"), "--output", str(out)])
    assert result.exit_code == 0, result.output
    expected = [f'run: reward/mean has 1 value(s) that are not numbers in {metrics} (the first: "0.5" at step 3)',
                f'run: entropy/mean has 20 value(s) that are not numbers in {metrics} (the first: "0.234" at '
                "step 1); they are read as not logged (n/a in the table, gaps in the plots)",
                f"trl: reward/mean has 1 value(s) that are not numbers in {trl} (the first: [0.5] at step 2)"]
    report = (out / "report.md").read_text()
    for note in expected:
        assert f"note: {note}" in result.output and note in report, note


@pytest.mark.parametrize("option, value", [("--entropy_floor", "-1"), ("--kl_bound", "nan"),
                                           ("--kl_bound", "inf")])
def test_alarm_bounds_out_of_range_are_refused_before_anything_is_written(tmp_path, option, value):
    out = tmp_path / "r"
    result = CliRunner().invoke(app, ["report", str(FIXTURES / "quickstart"), "--output", str(out), option, value])
    assert result.exit_code == 2
    assert f"error: {option} must be a finite number >= 0 (nats; the runs' {option[2:]}, 0.5 by default), got" \
        in result.output
    assert not out.exists()


# ------------------------------------------------------------- run names as text, logs that are no files, bad bytes


def test_report_md_shows_html_and_line_breaks_in_run_names_as_text(tmp_path):
    html_name, broken_name = "<img src=x onerror=alert(1)><svg onload=alert(2)>", "a\nb|c"
    for name in (html_name, broken_name):
        shutil.copytree(FIXTURES / "quickstart", tmp_path / name)
    out = tmp_path / "r"
    result = CliRunner().invoke(app, ["report", str(tmp_path / html_name), str(tmp_path / broken_name),
                                      "--output", str(out)])
    assert result.exit_code == 0, result.output + repr(result.exception)
    markdown = (out / "report.md").read_text()
    assert "<img" not in markdown and "<svg" not in markdown
    assert "| &lt;img src=x onerror=alert(1)>&lt;svg onload=alert(2)> | grposcope | 20 |" in markdown  # `<` escaped
    rows = [line for line in markdown.splitlines() if line.startswith("| ") and "| grposcope |" in line]
    assert len(rows) == 2 and "| a\\nb\\|c | grposcope | 20 |" in rows[1], rows
    # the terminal: one line per run, the line break shown as \n
    assert "a\\nb|c: read a grposcope run" in result.output, result.output


def _verl_dump(folder: Path) -> Path:
    """A verl rollout dump of one step: 4 prompts x 4 rollouts, half of them right."""
    folder.mkdir(parents=True)
    lines = [json.dumps({"input": f"q{p}", "output": "a", "gts": "1", "score": float((p + k) % 2), "step": 1})
             for p in range(4) for k in range(4)]
    (folder / "1.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def _cli(*args: str) -> subprocess.CompletedProcess:
    """grposcope in a process of its own, killed after 60 s: a reader that opens a FIFO waits for ever."""
    return subprocess.run([sys.executable, "-m", "grposcope.cli", *args], capture_output=True, text=True,
                          timeout=60)


def _not_a_file(folder: Path, name: str, kind: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    where = folder / name
    if kind == "FIFO":
        os.mkfifo(where)
    elif kind == "directory":
        where.mkdir()
    else:  # a symbolic link loop
        os.symlink(where.name, where)
    return where


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
@pytest.mark.parametrize("command", ["report", "forecast"])
def test_a_fifo_in_a_verl_dump_is_named_never_opened(tmp_path, command):
    dump = _verl_dump(tmp_path / "dump")
    os.mkfifo(dump / "2.jsonl")
    args = ["report", str(dump), "--output", str(tmp_path / "r")] if command == "report" else \
        ["forecast", "--from_run", str(dump)]
    result = _cli(*args)
    assert result.returncode != 0
    assert f"{dump / '2.jsonl'} is a FIFO, not a file" in result.stderr, result.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
@pytest.mark.parametrize("name", ["metrics.jsonl", "trainer_state.json"])
@pytest.mark.parametrize("kind", ["FIFO", "directory", "symbolic link loop"])
def test_a_run_log_that_is_no_file_is_named_with_its_kind(tmp_path, name, kind):
    where = _not_a_file(tmp_path / "run", name, kind)
    result = _cli("report", str(tmp_path / "run"), "--output", str(tmp_path / "r"))
    assert result.returncode != 0
    assert f"{where} is a {kind}, not a file" in result.stderr, result.stderr
    assert "is not a run" not in result.stderr


def test_bytes_that_are_not_utf8_in_metrics_are_named_with_file_line_and_fix(tmp_path):
    shutil.copytree(FIXTURES / "quickstart", tmp_path / "run")
    path = tmp_path / "run" / "metrics.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3][:20] + b"\xff" + lines[3][20:]
    path.write_bytes(b"\n".join(lines))
    result = CliRunner().invoke(app, ["report", str(tmp_path / "run"), "--output", str(tmp_path / "r")])
    assert result.exit_code != 0
    assert f"{path}: line 4, column 21: not UTF-8 text (byte 0xff); save the file as UTF-8" in result.output, \
        result.output


def test_bytes_that_are_not_utf8_in_completions_are_named_for_forecast(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    rows = [json.dumps({"step": 1, "prompt": f"q{p}", "completion": "a", "reward": float((p + k) % 2)})
            for p in range(4) for k in range(4)]
    rows[5] = rows[5].replace('"a"', '"\xff"')
    (run / "completions.jsonl").write_bytes("\n".join(rows).encode("latin-1") + b"\n")
    result = CliRunner().invoke(app, ["forecast", "--from_run", str(run)])
    assert result.exit_code != 0
    assert f"{run / 'completions.jsonl'}: line 6, column" in result.output, result.output
    assert "not UTF-8 text (byte 0xff); save the file as UTF-8" in result.output, result.output
