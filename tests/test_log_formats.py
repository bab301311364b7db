"""Reading the scalar logs of runs grposcope did not write (reports/logs.py, reports/runs.py): TensorBoard, W&B
offline runs, JSONL and CSV tables, verl's file logger, a bare trainer_state.json; keys through the catalogue,
unknown keys kept and listed, and every kind of bad file costing one problem line and nothing else."""

from __future__ import annotations

import json
import math
import os

import pytest

from grposcope.reports.runs import load_run, run_kind


def write_tb(folder, rows: dict[int, dict[str, float]], name: str = "a") -> None:
    """Scalars as transformers' TensorBoardCallback writes them (train/<key>), with tensorboard's own writer."""
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2

    folder.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(folder), filename_suffix=name)
    for step, values in rows.items():
        scalars = [summary_pb2.Summary.Value(tag=k, simple_value=v) for k, v in values.items()]
        summary = summary_pb2.Summary(value=scalars)
        writer.add_event(event_pb2.Event(step=step, wall_time=1.0 + step, summary=summary))
    writer.close()


ROWS = {s: {"train/reward": 0.1 * s, "train/frac_reward_zero_std": 0.5, "train/grad_norm": 0.0 if s < 3 else 1.0,
            "train/completions/min_length": 3.0} for s in range(1, 6)}


def test_a_tensorboard_folder_as_transformers_writes_it(tmp_path):
    write_tb(tmp_path / "runs" / "Nov26_host", ROWS)
    assert run_kind(tmp_path) == "tensorboard"
    run = load_run(tmp_path)
    assert run.source == "tensorboard" and run.steps == [1, 2, 3, 4, 5]
    assert run.values("reward/mean") == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    assert run.values("collapse/acr") == [0.5] * 5 and run.values("grad_norm")[:3] == [0.0, 0.0, 1.0]
    assert run.unknown == {"train/completions/min_length": 5} and run.problems == []


def test_a_cut_event_file_keeps_what_came_before(tmp_path):
    folder = tmp_path / "tb"
    write_tb(folder, ROWS)
    (file,) = folder.iterdir()
    data = file.read_bytes()
    file.write_bytes(data[: len(data) - 7])  # the last record cut mid-way
    run = load_run(folder)
    assert run.steps == [1, 2, 3, 4] and len(run.problems) == 1 and str(file) in run.problems[0]


def test_two_runs_events_in_one_folder_are_not_merged(tmp_path):
    folder = tmp_path / "tb"
    write_tb(folder, ROWS, "first")
    os.utime(next(folder.iterdir()), (1, 1))
    write_tb(folder, {s: {"train/reward": 0.9} for s in range(1, 4)}, "second")
    run = load_run(folder)
    assert run.steps == [1, 2, 3] and run.values("reward/mean") == pytest.approx([0.9] * 3)
    assert any("two runs' events in one folder" in p for p in run.problems)


def test_a_wandb_offline_run_is_read_from_its_own_records(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = wandb.init(project="p", dir=str(tmp_path), config={"num_generations": 8, "max_completion_length": 64})
    for step in range(1, 6):  # as transformers' WandbCallback logs: train/<key> and train/global_step
        run.log({"train/reward": 0.1 * step, "train/grad_norm": 0.0 if step < 3 else 1.0, "train/global_step": step})
    run.finish()
    assert run_kind(tmp_path) == "wandb"
    read = load_run(tmp_path)
    assert read.steps == [1, 2, 3, 4, 5] and read.values("reward/mean") == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    assert read.config == {"num_generations": 8, "max_completion_length": 64}


def test_a_wandb_file_of_another_layout_is_one_problem(tmp_path):
    folder = tmp_path / "wandb" / "offline-run-x"
    folder.mkdir(parents=True)
    (folder / "run-x.wandb").write_bytes(b"LEVELDB?" + bytes(100))
    with pytest.raises(ValueError, match="does not start with wandb's ':W&B' header"):
        load_run(tmp_path)


def test_a_jsonl_table_with_bad_values_and_a_half_written_last_line(tmp_path):
    path = tmp_path / "history.jsonl"
    lines = [{"_step": 1, "train/reward": 0.1, "train/grad_norm": 1.0},
             {"_step": 2, "train/reward": "oops", "train/grad_norm": float("nan")},
             {"_step": 4, "train/reward": 0.4, "train/grad_norm": float("inf"), "flag": True},
             {"_step": 3, "train/reward": 0.3},
             {"_step": 3, "train/reward": 0.35}]
    path.write_text("\n".join(json.dumps(r) for r in lines) + '\n{"_step": 5, "train/rew')
    run = load_run(path)
    assert run.source == "jsonl" and run.steps == [1, 2, 3, 4]
    assert run.values("reward/mean")[:1] == [0.1] and math.isnan(run.values("reward/mean")[1])
    assert run.values("reward/mean")[2] == 0.35  # the later record of a repeated step wins
    assert run.nonfinite == {"grad_norm": [2, 4]} and run.unknown == {"flag": 1}
    problems = "\n".join(run.problems)
    for expected in ("half-written last line", "repeat a step", "go backwards", "not numbers", "NaN or infinite"):
        assert expected in problems
    assert len(run.problems) == 5


def test_a_csv_export_and_a_verl_logger_folder(tmp_path):
    csv_path = tmp_path / "export.csv"
    csv_path.write_text("_step,train/reward,train/entropy\n1,0.1,1.2\n2,0.2,\n3,NaN,1.0\n")
    run = load_run(csv_path)
    assert run.steps == [1, 2, 3] and run.values("entropy/mean")[0] == 1.2 and math.isnan(run.values("entropy/mean")[1])
    logger = tmp_path / "proj"
    logger.mkdir()
    records = [{"step": s, "data": {"critic/score/mean": 0.1 * s, "actor/grad_norm": 0.0, "actor/entropy": 1.0,
                                    "val-core/gsm8k/reward/mean@1": 0.3}} for s in (1, 2)]
    (logger / "exp.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    assert run_kind(logger) == "verl-logger"
    run = load_run(logger)
    assert run.values("grad_norm") == [0.0, 0.0] and run.values("eval/accuracy") == [0.3, 0.3]


def test_a_trainer_state_keeps_its_unknown_keys_and_non_finite_values(tmp_path):
    history = [{"step": 1, "loss": 0.1, "reward": 0.2, "grad_norm": 1.0, "completions/min_length": 3.0},
               {"step": 2, "loss": float("nan"), "reward": 0.2, "grad_norm": float("inf"), "completions/min_length": 4}]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": history, "max_steps": 300}))
    run = load_run(tmp_path / "trainer_state.json")
    assert run.unknown == {"completions/min_length": 2} and run.config["max_steps"] == 300
    assert run.nonfinite == {"loss/policy": [2], "grad_norm": [2]}
