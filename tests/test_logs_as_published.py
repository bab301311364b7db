"""The failures a new user met on logs nobody here wrote (issue 54), each as the smallest file that shows it:
a state under another name, a step column named `update`, a hand-written loop's plain names and skipped flag,
a noisy reward that never rose, one logged row, a cost line that contradicted the findings, metadata columns,
a TRL output folder with its TensorBoard events, and console output. Each failed before the readers became a
registry read by content and the detectors read fitted values."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from grposcope.cli.app import app
from grposcope.diagnose import diagnose
from grposcope.runs import ReadOptions, load_run, load_runs


def fired(d, severities=("warning", "critical")):
    return {f.detector for f in d.findings if f.severity in severities}


def trl_state(records: list[dict], **extra) -> dict:
    """A transformers trainer state as Trainer.save_state writes it (keys sorted, log_history early)."""
    return {"best_metric": None, "epoch": 1.0, "global_step": records[-1]["step"], "log_history": records,
            "logging_steps": 1, "max_steps": records[-1]["step"], **extra}


def test_a_full_trainer_state_saved_under_another_name_is_read(tmp_path):
    records = [{"step": s, "loss": 0.01, "reward": 0.2 + 0.01 * s, "frac_reward_zero_std": 0.8, "epoch": s / 40}
               for s in range(1, 41)]
    (tmp_path / "training_logs.json").write_text(json.dumps(trl_state(records), indent=2))
    for given in (tmp_path / "training_logs.json", tmp_path):  # the file, and the folder that holds it
        result = CliRunner().invoke(app, ["diagnose", str(given)])
        assert result.exit_code == 0, result.output
        assert "40 logged steps" in result.output and "advantage_collapse" in result.output
    assert load_run(tmp_path / "training_logs.json").source == "trl"


def test_a_csv_whose_step_column_is_update_is_read_and_one_without_a_step_names_its_columns(tmp_path):
    (tmp_path / "log.csv").write_text("update,reward,kl\n" + "".join(f"{u},{0.1 * u},0.01\n" for u in range(1, 9)))
    run = load_run(tmp_path / "log.csv")
    assert run.steps == list(range(1, 9)) and run.values("reward/mean")[-1] == pytest.approx(0.8)
    (tmp_path / "odd.csv").write_text("n,reward\n1,0.5\n2,0.6\n")
    result = CliRunner().invoke(app, ["diagnose", str(tmp_path / "odd.csv")])
    assert result.exit_code != 0
    assert "no step column" in result.output and "n, reward" in result.output and "--step_key" in result.output
    assert load_run(tmp_path / "odd.csv", options=ReadOptions(step_key="n")).steps == [1, 2]


def test_a_hand_written_loop_with_mean_reward_and_a_skipped_flag_is_a_collapse(tmp_path):
    """Two completions a prompt; 81% of the steps had both rewards equal and took no update."""
    rng = np.random.default_rng(3)
    lines = []
    for step in range(1, 101):
        skipped = bool(rng.random() < 0.81)
        reward = float(rng.choice([0.0, 1.0])) if skipped else 0.5
        lines.append({"iteration": step, "mean_reward": reward, "skipped": skipped, "loss": 0.0 if skipped else 0.1})
    path = tmp_path / "train_log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    run = load_run(path)
    assert run.read_as == {"mean_reward": "reward/mean", "skipped": "optimizer/skipped_no_signal"}
    d = diagnose(run)
    assert {"advantage_collapse", "no_signal_steps"} <= fired(d)
    collapse = next(f for f in d.findings if f.detector == "advantage_collapse")
    assert any("skipped flag" in e and "fully collapsed" in e for e in collapse.evidence)
    assert "took no update" in " ".join(next(f for f in d.findings if f.detector == "no_signal_steps").evidence)
    result = CliRunner().invoke(app, ["diagnose", str(path)])
    assert "read by name: mean_reward as reward/mean" in " ".join(result.output.split())


def test_plain_column_names_reach_their_detectors(tmp_path):
    names = {"policy_entropy_mean": "entropy/mean", "completion_length_mean": "completion/mean_length",
             "truncation_rate": "completion/truncated_frac", "clip_fraction": "clip/frac",
             "zero_advantage_fraction": "collapse/acr", "avg_reward": "reward/mean"}
    rows = [{"step": s, "policy_entropy_mean": 1.0, "completion_length_mean": 300, "truncation_rate": 0.01,
             "clip_fraction": 0.001, "zero_advantage_fraction": 0.2, "avg_reward": 0.4} for s in range(1, 31)]
    path = tmp_path / "metrics.csv"
    path.write_text(",".join(rows[0]) + "\n" + "".join(",".join(str(v) for v in r.values()) + "\n" for r in rows))
    run = load_run(path)
    assert run.read_as == names
    d = diagnose(run)
    for detector in ("entropy_collapse", "length_growth", "truncation", "clip_saturation", "advantage_collapse"):
        assert detector not in d.unchecked, d.unchecked[detector]
    mapped = load_run(path, options=ReadOptions(mapping=(("avg_reward", "eval/accuracy"),)))
    assert mapped.has("eval/accuracy") and mapped.read_as["avg_reward"] == "eval/accuracy"


def test_a_noisy_reward_that_never_rose_is_no_plateau(tmp_path):
    """Two real-like noisy TRL runs: the first ten logs average 0.38, the whole run 0.44, single points reach 1.8."""
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        reward = np.clip(rng.gamma(1.2, 0.36, 120), 0, 2.2)  # heavy right tail: one low and one high point differ
        records = [{"step": s, "loss": 0.02, "reward": float(r), "reward_std": 0.5, "grad_norm": 0.3}
                   for s, r in zip(range(1, 121), reward)]
        (tmp_path / "trainer_state.json").write_text(json.dumps(trl_state(records)))
        d = diagnose(load_run(tmp_path))
        assert "plateau" not in {f.detector for f in d.findings}
        assert not [e for f in d.findings for e in f.evidence if " rose " in e]


def test_one_logged_row_speaks_of_that_row(tmp_path):
    records = [{"step": 5, "loss": 0.0, "reward": 0.05, "completions/clipped_ratio": 0.91,
                "frac_reward_zero_std": 0.9, "completions/mean_length": 1024}]
    (tmp_path / "trainer_state.json").write_text(json.dumps(trl_state(records)))
    d = diagnose(load_run(tmp_path))
    truncation = next(f for f in d.findings if f.detector == "truncation")
    text = " ".join([truncation.title, *truncation.evidence])
    assert "the one logged step (5)" in text and "91%" in text
    assert "over the run" not in text and "last quarter" not in text and "cannot be judged" in text
    assert "too short" in d.unchecked["entropy_collapse"] or "needs" in d.unchecked["entropy_collapse"]
    assert "(1 point)" in d.unchecked["length_growth"]  # present but too short, and how short


def test_the_cost_line_reads_the_series_the_detectors_read(tmp_path):
    # a gradient norm and an unbounded reward (0 to 3): no collapse share to read or estimate
    records = [{"step": s, "loss": 0.1, "reward": 1.5 + 0.01 * s, "grad_norm": 0.4} for s in range(1, 21)]
    (tmp_path / "trainer_state.json").write_text(json.dumps(trl_state(records)))
    d = diagnose(load_run(tmp_path))
    assert "no gradient norm" not in d.cost.line() and d.cost.samples_share == 0.0
    assert "advantage_collapse" in d.unchecked
    # two rows of frac_reward_zero_std: the detector reads them, and the cost uses the same figures
    records = [{"step": s, "loss": 0.1, "reward": 0.5, "frac_reward_zero_std": 0.6, "grad_norm": 0.4}
               for s in (1, 2)]
    (tmp_path / "trainer_state.json").write_text(json.dumps(trl_state(records)))
    d = diagnose(load_run(tmp_path))
    assert "advantage_collapse" in {f.detector for f in d.findings}
    assert d.cost.samples_share == pytest.approx(0.6)


def test_columns_of_booleans_or_strings_are_one_note_not_a_line_per_value(tmp_path):
    lines = [{"step": s, "reward": 0.3, "done": s % 2 == 0, "phase": "warmup" if s < 5 else "main",
              "model": "qwen", "ok": True} for s in range(1, 21)]
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    run = load_run(path)
    assert run.problems == []
    notes = [n for n in run.notes if "metadata" in n]
    assert len(notes) == 1 and all(k in notes[0] for k in ("done", "phase", "model", "ok"))
    assert set(run.series) == {"reward/mean"} and run.unknown == {}


def _events(folder, rows: dict[int, dict[str, float]]) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    folder.mkdir(parents=True)
    with (folder / "events.out.tfevents.1764190000.host.1.0").open("wb") as handle:
        writer = RecordWriter(handle)
        writer.write(event_pb2.Event(wall_time=1.0, file_version="brain.Event:2").SerializeToString())
        for step, row in rows.items():
            for key, value in row.items():
                summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=f"train/{key}",
                                                                               simple_value=value)])
                writer.write(event_pb2.Event(wall_time=1.0 + step, step=step, summary=summary).SerializeToString())


def test_a_trl_output_folder_is_read_whole_and_a_folder_of_runs_gives_each(tmp_path):
    """A killed run: its last saved state holds steps 1-10, its TensorBoard events go on to step 30, where
    completions started to hit the cap."""
    records = [{"step": s, "loss": 0.01, "reward": 0.3, "frac_reward_zero_std": 0.2} for s in range(1, 11)]
    out = tmp_path / "out"
    (out / "checkpoint-10").mkdir(parents=True)
    (out / "checkpoint-10" / "trainer_state.json").write_text(json.dumps(trl_state(records)))
    _events(out / "runs" / "Nov26_22-00-00_host", {s: {"reward": 0.3, "completions/clipped_ratio": 0.0 if s <= 10
                                                        else 0.4, "frac_reward_zero_std": 0.2} for s in range(1, 31)})
    run = load_run(out)
    assert run.steps == list(range(1, 31)) and "TensorBoard" in run.found
    assert "truncation" in fired(diagnose(run))
    _events(out / "runs" / "Nov27_09-00-00_host", {s: {"reward": 0.5} for s in range(1, 6)})
    runs = load_runs(out / "runs")
    assert len(runs) == 2 and {len(r.steps) for r in runs} == {30, 5}


def test_console_output_of_trl_and_verl_is_read(tmp_path):
    trl = tmp_path / "nohup.out"
    trl.write_text("loading model...\n" + "".join(
        f"{s:3d}/40 [00:{s:02d}<00:10, 1.0it/s]{{'loss': 0.0, 'grad_norm': 0.0, 'reward': '{0.0:.1f}', "
        f"'reward_std': 0.0, 'frac_reward_zero_std': 1.0, 'epoch': {s / 40}}}\n" for s in range(1, 41))
        + "{'train_runtime': 400.0, 'train_loss': 0.0}\n")
    run = load_run(trl)
    assert run.source == "console" and run.steps == list(range(1, 41)) and run.wall_time_s == 400.0
    assert {"advantage_collapse", "no_signal_steps"} <= fired(diagnose(run))
    verl = tmp_path / "train.log"
    verl.write_text("".join(f"(TaskRunner pid=1) step:{s} - actor/entropy:{1.0 / s:.4f} - critic/score/mean:"
                            f"{0.1 * s:.3f} - response_length/mean:300\n" for s in range(1, 21)))
    run = load_run(verl)
    assert run.steps == list(range(1, 21)) and run.values("entropy/mean")[0] == 1.0
    loop = tmp_path / "notes.md"
    loop.write_text("# run 3\n" + "".join(f"it {s}: R {0.01 * s:.2f}\n" for s in range(1, 11)))
    with pytest.raises(FileNotFoundError, match="--pattern"):
        load_run(loop)
    run = load_run(loop, options=ReadOptions(pattern=r"it (?P<step>\d+): R (?P<reward>[-.\d]+)"))
    assert run.steps == list(range(1, 11)) and math.isclose(run.values("reward/mean")[-1], 0.1)


def test_a_trl_folder_reads_without_the_tensorboard_package(tmp_path, monkeypatch):
    """A plain install may lack tensorboard: the state is the run, the events in runs/ an addition (said)."""
    import grposcope.runs.formats.tensorboard as tb

    def missing(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'tensorboard'")

    records = [{"step": s, "loss": 0.01, "reward": 0.3} for s in range(1, 6)]
    (tmp_path / "trainer_state.json").write_text(json.dumps(trl_state(records)))
    _events(tmp_path / "runs" / "Nov26_22-00-00_host", {1: {"reward": 0.3}})
    monkeypatch.setattr(tb, "read_tensorboard", missing)
    run = load_run(tmp_path)
    assert run.steps == [1, 2, 3, 4, 5] and any("pip install 'grposcope[tensorboard]'" in n for n in run.notes)
