"""`grposcope report`: reading both log formats (recorded fixtures), the per-run figures, and the files written.

Fixtures (tests/fixtures/runs):
- quickstart/: metrics.jsonl and summary.json of a real `grposcope train` quickstart run (20 steps, embedded
  model, AVSPO with its guard);
- trl_avspo/: trainer_state.json of a real TRL run through grposcope's TRL integration (6 steps, checkpoint-6
  of examples/trl/train_grpo.py on the embedded model). A stock TRL log is that file without grposcope's keys.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grposcope.cli import app
from grposcope.reports.figures import no_signal_spans, run_figures
from grposcope.runs import load_run

FIXTURES = Path(__file__).parent / "fixtures" / "runs"
GRPOSCOPE_KEYS = ("collapse/", "sampler/", "avspo/", "alarm/", "reward/none_frac")


def test_a_grposcope_run_read_from_its_metrics_and_summary():
    run = load_run(FIXTURES / "quickstart")
    fig = run_figures(run)
    assert run.source == "grposcope" and run.steps == list(range(1, 21))
    # ACR per step: 1 .5 0 1 .5 .5 1 1 0 0 .5 0 1 1 .5 .5 1 1 0 1 -> 12 / 20 = 0.6, and acr_100 = the same
    # (fewer than 100 steps: the mean over all of them), as logged at step 20
    assert fig.acr_mean == pytest.approx(0.6, abs=1e-12) and fig.acr_100 == pytest.approx(0.6, abs=1e-12)
    # held-out accuracy: 0.3333 before (summary.json), 0.5417 at step 10, 0.5208 at step 20
    assert run.accuracy_points() == ([0, 10, 20], [pytest.approx(1 / 3), pytest.approx(0.5416667),
                                                   pytest.approx(0.5208333)])
    assert fig.final_accuracy == pytest.approx(0.5208333) and fig.best_accuracy == pytest.approx(0.5416667)
    assert fig.samples_generated == 320  # 16 a step for 20 steps
    assert fig.tokens_generated == 3946  # 160 + 191 + ... + 199, the steps' sampler/tokens_generated
    assert fig.wall_time_s == pytest.approx(1056.45, abs=0.01) and fig.alarms == ()


def test_a_trl_run_read_from_its_checkpoint_with_the_names_mapped():
    run = load_run(FIXTURES / "trl_avspo")
    fig = run_figures(run)
    assert run.source == "trl" and run.steps == [1, 2, 3, 4, 5, 6]
    assert run.values("reward/mean")[2] == pytest.approx(0.46875)  # TRL's "reward" at step 3
    assert run.values("entropy/mean")[0] == pytest.approx(0.4208768)  # TRL's "entropy"
    # the integration logs collapse/acr itself: 1, .25, .25, .5, .5, .75 -> 3.25 / 6
    assert fig.acr_mean == pytest.approx(3.25 / 6) and fig.acr_100 == pytest.approx(3.25 / 6)
    assert fig.samples_generated == 192 and fig.final_accuracy is None  # 32 a step; no eval loop ran
    assert fig.wall_time_s == pytest.approx(671.889, abs=1e-3)  # the steps' step_time, no train_runtime yet
    assert run.notes == []


def test_a_stock_trl_run_uses_frac_reward_zero_std(tmp_path):
    state = json.loads((FIXTURES / "trl_avspo" / "trainer_state.json").read_text())
    for record in state["log_history"]:
        for key in [k for k in record if k.startswith(GRPOSCOPE_KEYS)]:
            del record[key]
    state["log_history"].append({"step": 6, "train_runtime": 700.0, "train_loss": 0.0})
    folder = tmp_path / "stock" / "checkpoint-6"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps(state))
    run = load_run(tmp_path / "stock")
    fig = run_figures(run)
    # frac_reward_zero_std was 1, .25, .25, .5, .5, .75 here too; acr_100 is computed from it
    assert run.values("collapse/acr") == [1.0, 0.25, 0.25, 0.5, 0.5, 0.75]
    assert fig.acr_100 == pytest.approx(3.25 / 6) and fig.samples_generated is None
    assert fig.wall_time_s == 700.0  # train_runtime, once the run has ended
    assert run.notes[0] == "collapse/acr is TRL's frac_reward_zero_std (a stock TRL run)"
    assert "log_completions=True" in run.notes[1] and len(run.notes) == 2  # how to get the whole family


def test_a_killed_run_without_summary_and_with_a_partial_line(tmp_path):
    lines = (FIXTURES / "quickstart" / "metrics.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "metrics.jsonl").write_text("".join(lines[:12]) + lines[12][:40])  # killed mid-write
    with pytest.warns(RuntimeWarning, match="partial last line 13"):
        run = load_run(tmp_path)
    fig = run_figures(run)
    assert run.steps == list(range(1, 13)) and run.eval_before is None
    assert fig.final_accuracy == pytest.approx(0.5416667)  # the step-10 evaluation
    assert fig.wall_time_s == pytest.approx(sum(json.loads(x)["perf/step_s"] for x in lines[:12]))


def write_run(folder: Path, acr: list[float], accuracy: float, alarm_from: int | None = None) -> None:
    """A minimal grposcope run: per step collapse/acr (and acr_100 as the trainer logs it), eval at the end."""
    folder.mkdir(parents=True)
    records = []
    for step, value in enumerate(acr, start=1):
        record = {"step": step, "time": 1000.0 + step, "collapse/acr": value,
                  "collapse/acr_100": sum(acr[:step]) / step, "perf/step_s": 2.0,
                  "alarm/stagnation": float(alarm_from is not None and step >= alarm_from)}
        if step == len(acr):
            record["eval/accuracy"] = accuracy
        records.append(json.dumps(record))
    (folder / "metrics.jsonl").write_text("\n".join(records) + "\n")


def test_report_writes_plots_markdown_and_a_self_contained_html(tmp_path):
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["report", str(FIXTURES / "quickstart"), str(FIXTURES / "trl_avspo"),
                                      "--output", str(out)])
    assert result.exit_code == 0, result.output
    pngs = sorted(p.name for p in out.glob("*.png"))
    # no KL plot: neither run logged kl/mean (beta = 0)
    assert pngs == ["accuracy.png", "acr.png", "collapse_split.png", "entropy.png", "reward.png",
                    "sampler_cost.png"]
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(pngs)
    assert "http://" not in html and "https://" not in html and "<script" not in html  # opens offline
    md = (out / "report.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| quickstart |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # run, source, steps, final acc., best acc., mean ACR, acr_100, mean acr_post, alarms, samples, tokens, wall
    assert cells[:9] == ["quickstart", "grposcope", "20", "0.521", "0.542", "0.600", "0.600", cells[7], "none"]
    assert cells[9:] == ["320", "3,946", "0:17:36"]
    assert "| trl_avspo | trl | 6 | n/a | n/a | 0.542 | 0.542 |" in md
    for png in pngs:
        assert f"]({png})" in md


def test_alarms_are_listed_with_their_first_step(tmp_path):
    write_run(tmp_path / "a", [1.0, 1.0, 1.0, 1.0], 0.1, alarm_from=3)
    result = CliRunner().invoke(app, ["report", str(tmp_path / "a"), "--output", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "| stagnation 3 |" in (tmp_path / "r" / "report.md").read_text()


def test_no_signal_streaks_are_found_and_drawn(tmp_path):
    folder = tmp_path / "streaks"
    folder.mkdir()
    # acr_post at steps 1-4, 6-9: streaks 1-2 and 4-8; a step not logged (5) does not break a streak of logged
    # ones (a TRL log holds every logging_steps-th step, each averaged over the steps since the last)
    posts = {1: 1.0, 2: 1.0, 3: 0.5, 4: 1.0, 6: 1.0, 7: 1.0, 8: 1.0, 9: 0.0}
    lines = [json.dumps({"step": s, "time": 1000.0 + s, "collapse/acr": 1.0, "collapse/acr_post": v})
             for s, v in posts.items()]
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert no_signal_spans(load_run(folder)) == [(1, 2), (4, 5)]
    out = tmp_path / "r"
    result = CliRunner().invoke(app, ["report", str(folder), "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "acr.png").is_file()


def test_regress_fits_final_accuracy_on_acr_100(tmp_path):
    # acr_100 = 0, 0.25, 0.5, 0.75 and final accuracy 0.1, 0.3, 0.2, 0.5: test_regression's worked data set
    # scaled (x / 4, y / 10), so slope = 1.1 * 4 / 10 = 0.44, intercept = 1.1 / 10 = 0.11, and r, R^2 and p
    # are unchanged by the scaling: 0.832, 0.691, 0.168
    for i, (x, y) in enumerate([(0.0, 0.1), (0.25, 0.3), (0.5, 0.2), (0.75, 0.5)]):
        write_run(tmp_path / "sweep" / f"run{i}", [x, x], y)
    out = tmp_path / "r"
    result = CliRunner().invoke(app, ["report", str(tmp_path / "sweep"), "--regress", "--output", str(out)])
    assert result.exit_code == 0, result.output
    expected = ("final accuracy = 0.110 + 0.440 x acr_100 over 4 runs: Pearson r = 0.832, R^2 = 0.691, "
                "p = 0.168")
    assert expected in result.output and expected in (out / "report.md").read_text()
    assert (out / "regression.png").is_file()


def test_regress_refuses_below_three_runs_and_writes_nothing(tmp_path):
    write_run(tmp_path / "a", [0.5], 0.2)
    write_run(tmp_path / "b", [0.25], 0.4)
    out = tmp_path / "r"
    result = CliRunner().invoke(app, ["report", str(tmp_path / "a"), str(tmp_path / "b"), "--regress",
                                      "--output", str(out)])
    assert result.exit_code == 2
    assert "needs at least 3 runs with both, got 2" in result.output
    assert not list(out.glob("*"))


def test_bad_input_is_one_clear_line(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["report", str(tmp_path / "nope"), "--output", str(tmp_path / "r")])
    assert result.exit_code == 2 and "does not exist" in result.output
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["report", str(tmp_path / "empty"), "--output", str(tmp_path / "r")])
    assert result.exit_code == 2 and "is not a run" in result.output
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "metrics.jsonl").write_text('{"step": 1}\nnot json\n{"step": 3}\n')
    result = runner.invoke(app, ["report", str(bad), "--output", str(tmp_path / "r")])
    assert result.exit_code == 2 and "line 2 is not a record" in result.output
    shutil.copytree(FIXTURES / "quickstart", tmp_path / "q")
    assert runner.invoke(app, ["report", str(tmp_path / "q"), "--output", str(tmp_path / "r2")]).exit_code == 0
    again = runner.invoke(app, ["report", str(tmp_path / "q"), "--output", str(tmp_path / "r2")])
    assert again.exit_code == 2 and "pass --overwrite" in again.output



@pytest.mark.parametrize("command, example", [
    ("report", "grposcope report runs/sweep --regress --output sweep_report"),
    ("sweep", "grposcope sweep --output runs/sim --backend simulate --levels=-3,-1,1"),
    ("probe", "--dataset arithmetic --k 16 --prompts 64 --output probe.jsonl"),
    ("forecast", "grposcope forecast probe.jsonl --group_sizes 2,4,8,16,32 --budget 64"),
    ("audit-rewards", "grposcope audit-rewards pairs.jsonl --fail_on_flag --json audit.json"),
])
def test_every_command_of_the_report_family_shows_an_example(command, example):
    result = CliRunner().invoke(app, [command, "--help"], terminal_width=100)
    assert result.exit_code == 0 and example in result.output, result.output
