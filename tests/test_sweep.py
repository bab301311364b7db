"""`grposcope sweep`: the grid, one folder per run, skipping finished runs, resuming from a checkpoint."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from grposcope.cli import app
from grposcope.runs import load_run
from grposcope.sweep import Point, grid

SIM = ["--backend", "simulate", "--prompts", "200", "--batch_size", "16", "--features", "4"]


def test_the_grid_is_every_combination_seeds_innermost():
    points = grid([4, 8], ["easy"], ["grpo", "avspo"], ["fixed"], [0, 1])
    assert len(points) == 8  # 2 x 1 x 2 x 1 x 2
    assert points[:2] == [Point(4, "easy", "grpo", "fixed", 0), Point(4, "easy", "grpo", "fixed", 1)]
    assert points[0].name(samplers=1) == "g4-easy-grpo-s0"
    assert Point(8, "easy+medium", "grpo", "dynamic", 2).name(samplers=2) == "g8-easy_medium-grpo-dynamic-s2"
    assert Point(8, "-2", "grpo", "fixed", 0).name(samplers=1) == "g8-mu-2-grpo-s0"


def test_a_simulated_sweep_writes_runs_that_report_reads_and_continues(tmp_path):
    out = tmp_path / "sweep"
    args = ["sweep", "--output", str(out), *SIM, "--group_sizes", "4,8", "--levels", "-1", "--seeds", "0,1",
            "--max_steps", "5"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "sweep: 4 runs, 0 done before, 4 to run" in result.output
    names = sorted(p.name for p in out.iterdir())
    assert names == ["g4-mu-1-grpo-s0", "g4-mu-1-grpo-s1", "g8-mu-1-grpo-s0", "g8-mu-1-grpo-s1"]
    run = load_run(out / "g8-mu-1-grpo-s1")
    assert run.source == "simulate" and run.steps == [1, 2, 3, 4, 5]
    assert run.has("collapse/acr") and run.has("eval/accuracy") and run.has("sampler/samples_generated")
    config = json.loads((out / "g8-mu-1-grpo-s1" / "summary.json").read_text())["config"]
    settings = (config["num_generations"], config["seed"], config["difficulty_mean"], config["prompts"])
    assert settings == (8, 1, -1.0, 200)
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and "sweep: 4 runs, 4 done before, 0 to run" in again.output
    report = CliRunner().invoke(app, ["report", str(out), "--regress", "--output", str(tmp_path / "r")])
    assert report.exit_code == 0, report.output
    assert "over 4 runs: Pearson r =" in report.output


def test_a_train_sweep_runs_trains_and_resumes_from_a_checkpoint(tmp_path, tiny_model_dir):
    out = tmp_path / "sweep"
    args = ["sweep", "--output", str(out), "--group_sizes", "2", "--levels", "easy", "--max_steps", "2",
            "--save_steps", "1", "--keep_models", "--model_name_or_path", str(tiny_model_dir),
            "--dataset_size", "8", "--eval_size", "2", "--per_device_train_batch_size", "4",
            "--gradient_accumulation_steps", "1", "--max_completion_length", "4", "--eval_steps", "none"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output + _log(out)
    run = out / "g2-easy-grpo-s0"
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert (run / "checkpoint-2").is_dir() and not (run / "checkpoint-1").is_dir()  # only the newest kept
    # as if killed after its last checkpoint and before the end: the same command continues it
    (run / "summary.json").unlink()
    again = CliRunner().invoke(app, args[:args.index("--keep_models")] + args[args.index("--keep_models") + 1:])
    assert again.exit_code == 0, again.output
    assert "sweep: 1 runs, 0 done before, 1 to run" in again.output
    assert "resum" in (out / "g2-easy-grpo-s0.log").read_text().lower()
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert (run / "summary.json").is_file() and not (run / "checkpoint-2").exists()  # tidied this time


def test_bad_grids_fail_before_any_run(tmp_path):
    runner = CliRunner()
    out = str(tmp_path / "s")
    result = runner.invoke(app, ["sweep", "--output", out, *SIM, "--group_sizes", "1,4"])
    assert result.exit_code == 2 and "--group_sizes must be >= 2" in result.output
    result = runner.invoke(app, ["sweep", "--output", out, "--backend", "slurm"])
    assert result.exit_code == 2 and "--backend must be one of train, simulate" in result.output
    result = runner.invoke(app, ["sweep", "--output", out, *SIM, "--levels", "hard"])
    assert result.exit_code == 2 and "a level is the mean base logit" in result.output
    result = runner.invoke(app, ["sweep", "--output", out, *SIM, "--promts", "5"])
    assert result.exit_code == 2 and "unknown simulator option(s) ['promts']" in result.output
    # the quickstart makes 16 completions a step: G = 3 does not divide them, found before anything runs
    result = runner.invoke(app, ["sweep", "--output", out, "--group_sizes", "3,8"])
    assert result.exit_code == 2 and "the run g3-default-grpo-s0 would fail" in result.output
    assert not (tmp_path / "s").exists()


def _log(out):
    log = out / "g2-easy-grpo-s0.log"
    return log.read_text() if log.is_file() else "(no log)"
