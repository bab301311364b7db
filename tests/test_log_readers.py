"""The log readers behind `grposcope diagnose` / `report` (reports/logs.py, reports/log_formats.py, through
reports/runs.py's load_run): TensorBoard folders as transformers writes them, a W&B offline run, verl's file
logger, a bare trainer_state.json, JSONL and CSV tables. Each test writes a small file, reads it back and checks
the canonical series' exact values, the unknown keys, and that every kind of bad file costs exactly one problem
line while the good data around it is still read.

Values written to TensorBoard are float32: the ones used here (0.25, 0.5, ...) are exact in float32, so the
checks are exact too."""

from __future__ import annotations

import json
import math
import os
import struct
import time

import pytest

from grposcope.runs import load_run, run_kind

pytest.importorskip("tensorboard")

# ------------------------------------------------------------------------------------------------- TensorBoard


def hf_tensorboard(folder, rows: dict[int, dict[str, float]], args: dict | None = None) -> None:
    """A run as transformers' TensorBoardCallback writes it: torch's SummaryWriter, add_text("args", ...) once,
    then one add_scalar per key and logging step, tags train/<key>."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(folder))
    if args is not None:
        writer.add_text("args", json.dumps(args))
    for step, values in rows.items():
        for key, value in values.items():
            writer.add_scalar(key, value, step)
    writer.close()


def raw_events(folder, rows: dict[int, dict[str, float]], suffix: str = "", tensors: bool = False):
    """One event per step (all its scalars in one summary) with tensorboard's own writer; `tensors`: each scalar
    as a 0-d tensor proto (summary v2) instead of simple_value. Records: the file version, then one per step."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    folder.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(folder), filename_suffix=suffix)
    for step, values in rows.items():
        scalars = [summary_pb2.Summary.Value(tag=k, tensor=tensor_util.make_tensor_proto(v)) if tensors else
                   summary_pb2.Summary.Value(tag=k, simple_value=v) for k, v in values.items()]
        writer.add_event(event_pb2.Event(step=step, wall_time=1.0 + step, summary=summary_pb2.Summary(value=scalars)))
    writer.close()
    return max(folder.glob(f"events.out.tfevents.*{suffix}"), key=os.path.getmtime)


def record_offsets(path) -> list[int]:
    """Where each TFRecord of an event file starts (8-byte length, 4-byte CRC, data, 4-byte CRC)."""
    data, out, offset = path.read_bytes(), [], 0
    while offset < len(data):
        out.append(offset)
        offset += 16 + struct.unpack("<Q", data[offset:offset + 8])[0]
    return out


HF_ROWS = {s: {"train/reward": 0.25 * s, "train/frac_reward_zero_std": 0.5, "train/grad_norm": 0.0 if s < 3 else 1.5,
               "train/completions/min_length": 3.0} for s in range(1, 5)}
ARGS = {"num_generations": 8, "max_completion_length": 256, "max_steps": 40, "logging_steps": 1, "seed": 0}


def test_a_transformers_tensorboard_run_from_its_output_dir_runs_dir_folder_or_file(tmp_path):
    folder = tmp_path / "out" / "runs" / "Nov26_12-00-00_host"
    hf_tensorboard(folder, HF_ROWS, ARGS)
    (file,) = folder.glob("events.out.tfevents.*")
    for given in (tmp_path / "out", tmp_path / "out" / "runs", folder, file):
        assert run_kind(given) == "tensorboard"
        run = load_run(given)
        assert run.source == "tensorboard" and run.steps == [1, 2, 3, 4]
        assert list(run.values("reward/mean")) == [0.25, 0.5, 0.75, 1.0]
        assert list(run.values("collapse/acr")) == [0.5] * 4  # train/frac_reward_zero_std, through the catalogue
        assert list(run.values("grad_norm")) == [0.0, 0.0, 1.5, 1.5]
        # an unknown key keeps its spelling and is counted once per step that logged it
        assert list(run.series["train/completions/min_length"]) == [3.0] * 4
        assert run.unknown == {"train/completions/min_length": 4}
        assert run.config == {"num_generations": 8, "max_completion_length": 256, "max_steps": 40, "logging_steps": 1}
        assert run.problems == [] and run.nonfinite == {}


def test_scalars_written_as_tensors_are_read(tmp_path):
    raw_events(tmp_path / "tb", {1: {"train/reward": 0.5, "eval/reward": 0.25}, 2: {"train/reward": 0.75}},
               tensors=True)
    run = load_run(tmp_path / "tb")
    assert list(run.values("reward/mean")) == [0.5, 0.75]
    held_out = run.values("eval/accuracy")  # eval/reward
    assert held_out[0] == 0.25 and math.isnan(held_out[1])


def test_a_cut_event_file_keeps_the_records_before_the_cut(tmp_path):
    file = raw_events(tmp_path / "tb", {s: {"train/reward": 0.25 * s} for s in range(1, 5)})
    data = file.read_bytes()
    file.write_bytes(data[: record_offsets(file)[-1] + 20])  # the last record (step 4) cut inside its data
    run = load_run(tmp_path / "tb")
    assert run.steps == [1, 2, 3] and list(run.values("reward/mean")) == [0.25, 0.5, 0.75]
    assert len(run.problems) == 1 and str(file) in run.problems[0] and "cut short" in run.problems[0]


def test_a_corrupt_event_record_keeps_the_records_before_it(tmp_path):
    file = raw_events(tmp_path / "tb", {s: {"train/reward": 0.25 * s} for s in range(1, 6)})
    data = bytearray(file.read_bytes())
    data[record_offsets(file)[3] + 14] ^= 0xFF  # record 3 (step 3; record 0 is the file version): its data
    file.write_bytes(bytes(data))
    run = load_run(tmp_path / "tb")
    assert run.steps == [1, 2] and list(run.values("reward/mean")) == [0.25, 0.5]
    assert len(run.problems) == 1 and str(file) in run.problems[0] and "fails its checksum" in run.problems[0]


def test_two_runs_events_in_one_folder_are_not_merged(tmp_path):
    folder = tmp_path / "tb"
    first = raw_events(folder, {s: {"train/reward": 0.25} for s in range(1, 6)}, "a")
    os.utime(first, (1, 1))  # the older file
    second = raw_events(folder, {s: {"train/reward": 0.75} for s in range(1, 4)}, "b")
    run = load_run(folder)
    assert run.steps == [1, 2, 3] and list(run.values("reward/mean")) == [0.75] * 3  # the newest file alone
    assert len(run.problems) == 1 and "two runs' events in one folder" in run.problems[0]
    assert first.name in run.problems[0] and second.name in run.problems[0]


def test_event_files_that_follow_one_another_are_one_run(tmp_path):
    folder = tmp_path / "tb"
    os.utime(raw_events(folder, {1: {"train/reward": 0.25}, 2: {"train/reward": 0.5}}, "a"), (1, 1))
    raw_events(folder, {3: {"train/reward": 0.75}}, "b")
    run = load_run(folder)
    assert run.steps == [1, 2, 3] and list(run.values("reward/mean")) == [0.25, 0.5, 0.75] and run.problems == []


def test_several_run_folders_read_the_newest_and_name_the_others(tmp_path):
    runs = tmp_path / "runs"
    old = raw_events(runs / "Nov25_host", {1: {"train/reward": 0.25}})
    os.utime(old, (1, 1))
    raw_events(runs / "Nov26_host", {1: {"train/reward": 0.75}})
    run = load_run(tmp_path)
    assert list(run.values("reward/mean")) == [0.75]
    assert len(run.problems) == 1 and "Nov26_host is read" in run.problems[0] and "Nov25_host" in run.problems[0]


# ----------------------------------------------------------------------------------------------------------- W&B


def wait_for_wandb(path, seconds: float = 30.0) -> None:
    """wandb's finish() may return before its service has written the .wandb file (measured: 1 run in 8 found
    only the 7-byte header right after finish()); wait for the run's exit record."""
    from wandb.proto import wandb_internal_pb2 as pb

    from grposcope.runs.formats.wandb import wandb_payloads

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        kinds = [pb.Record.FromString(p).WhichOneof("record_type") for p in wandb_payloads(path, [])]
        if "exit" in kinds:
            return
        time.sleep(0.1)
    raise AssertionError(f"{path}: wandb wrote no exit record in {seconds} s")


def test_a_wandb_offline_run_and_one_with_a_record_of_unknown_type(tmp_path, monkeypatch):
    """One wandb.init (about 1-2 s here): the run read from wandb's own records, then the same file with a record
    type no wandb layout has."""
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = wandb.init(project="p", dir=str(tmp_path), config={"num_generations": 8, "max_completion_length": 64})
    for step in range(1, 5):  # as transformers' WandbCallback logs: train/<key> and train/global_step
        run.log({"train/reward": 0.25 * step, "train/grad_norm": float("nan") if step == 2 else 1.0,
                 "train/global_step": step, "train/my_metric": 2.0})
    run.finish()
    (file,) = {p.resolve() for p in tmp_path.glob("wandb/*/*.wandb")}
    wait_for_wandb(file)
    assert run_kind(tmp_path) == "wandb"
    read = load_run(tmp_path)
    assert read.source == "wandb" and read.steps == [1, 2, 3, 4]
    assert list(read.values("reward/mean")) == [0.25, 0.5, 0.75, 1.0]
    assert list(read.values("grad_norm"))[::2] == [1.0, 1.0] and math.isnan(list(read.values("grad_norm"))[1])
    assert read.nonfinite == {"grad_norm": [2]} and read.unknown == {"train/my_metric": 4}
    assert read.config == {"num_generations": 8, "max_completion_length": 64}
    assert len(read.problems) == 1 and "grad_norm is NaN or infinite at 1 step(s)" in read.problems[0]

    data = bytearray(file.read_bytes())
    offset, kinds = 7, []
    while offset + 7 <= len(data) and len(kinds) < 40:
        _, length, kind = struct.unpack("<IHB", data[offset:offset + 7])
        kinds.append((offset, kind))
        offset += 7 + length
    history = [o for o, _ in kinds[-12:]]  # a record among the last ones: after some history rows
    data[history[0] + 6] = 9  # a record type LevelDB's log does not have
    cut = file.parent / "damaged.wandb"
    cut.write_bytes(bytes(data))
    damaged = load_run(cut)
    assert 0 < len(damaged.steps) < 4 and list(damaged.values("reward/mean")) == [0.25 * s for s in damaged.steps]
    assert sum("unknown type 9" in p for p in damaged.problems) == 1


def test_a_wandb_file_of_another_layout_is_one_problem_line_not_a_traceback(tmp_path):
    folder = tmp_path / "wandb" / "offline-run-x"
    folder.mkdir(parents=True)
    (folder / "run-x.wandb").write_bytes(b"LEVELDB?" + bytes(100))
    with pytest.raises(ValueError, match=r"run-x.wandb does not start with wandb's ':W&B' header"):
        load_run(tmp_path)


# ------------------------------------------------------------------------------------------- verl and TRL files


def test_a_verl_file_logger_as_file_or_folder(tmp_path):
    lines = [{"step": s, "data": {"critic/score/mean": 0.25 * s, "critic/rewards/mean": 9.0, "actor/entropy": 1.5,
                                  "actor/grad_norm": 0.5, "training/global_step": s, "my/verl_key": 1.0}}
             for s in (1, 2, 3)]
    path = tmp_path / "proj" / "exp.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(json.dumps(r) for r in lines) + '\n{"step": 4, "data": {"critic/sc')
    for given in (path, path.parent):
        assert run_kind(given) == "verl-logger"
        run = load_run(given)
        assert run.source == "verl" and run.steps == [1, 2, 3]
        # of verl's two reward means the score before the KL penalty is the reward (the catalogue's rank)
        assert list(run.values("reward/mean")) == [0.25, 0.5, 0.75]
        assert list(run.values("entropy/mean")) == [1.5] * 3 and list(run.values("grad_norm")) == [0.5] * 3
        assert run.unknown == {"my/verl_key": 3} and list(run.series["my/verl_key"]) == [1.0] * 3
        assert len(run.problems) == 1 and "line 4 is a half-written last line" in run.problems[0]


def test_a_bare_trainer_state_goes_through_the_catalogue(tmp_path):
    history = [{"step": 1, "loss": 0.5, "reward": 0.25, "frac_reward_zero_std": 0.75, "grad_norm": 1.0,
                "completions/min_length": 3.0},
               {"step": 2, "loss": 0.25, "reward": 0.5, "frac_reward_zero_std": 0.5, "grad_norm": float("inf")},
               {"step": 2, "eval_reward": 0.125},
               {"step": 2, "train_runtime": 12.0}]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": history, "max_steps": 300, "logging_steps": 2}))
    run = load_run(path)
    assert run.steps == [1, 2] and list(run.values("reward/mean")) == [0.25, 0.5]
    assert list(run.values("collapse/acr")) == [0.75, 0.5] and list(run.values("loss/policy")) == [0.5, 0.25]
    assert math.isnan(list(run.values("eval/accuracy"))[0]) and list(run.values("eval/accuracy"))[1] == 0.125
    assert run.config == {"max_steps": 300, "logging_steps": 2}
    assert run.unknown == {"completions/min_length": 1} and run.nonfinite == {"grad_norm": [2]}
    assert any("frac_reward_zero_std" in n for n in run.notes) and run.wall_time_s == 12.0


# ------------------------------------------------------------------------------------------- generic JSONL / CSV


@pytest.mark.parametrize("step_key", ["step", "_step", "global_step", "iteration", "trainer/global_step"])
def test_a_jsonl_of_step_metrics_takes_any_step_column(tmp_path, step_key):
    path = tmp_path / "metrics_export.jsonl"
    path.write_text("".join(json.dumps({step_key: s, "train/reward": 0.25 * s, "rewards/acc/mean": 0.5}) + "\n"
                            for s in (10, 20)))
    run = load_run(path)
    assert run.source == "jsonl" and run.steps == [10, 20] and list(run.values("reward/mean")) == [2.5, 5.0]
    assert list(run.values("reward/acc/mean")) == [0.5, 0.5] and run.unknown == {} and run.problems == []


def test_a_jsonl_with_every_kind_of_bad_value_keeps_the_good_data(tmp_path):
    lines = [{"step": 1, "train/reward": 0.25, "train/grad_norm": 1.0, "kl": 0.125},
             {"step": 2, "train/reward": "oops", "train/grad_norm": float("nan"), "kl": True},
             {"step": 4, "train/reward": 1.0, "train/grad_norm": float("inf"), "train/flag": False},
             {"step": 3, "train/reward": 0.75},  # out of order
             {"step": 3, "train/reward": 0.5, "loss": 0.5}]  # step 3 again: its reward wins, loss is added
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in lines) + '\n{"step": 5, "train/rew')
    run = load_run(path)
    assert run.steps == [1, 2, 3, 4]
    reward = run.values("reward/mean")
    assert reward[0] == 0.25 and math.isnan(reward[1]) and list(reward[2:]) == [0.5, 1.0]
    grad = run.values("grad_norm")  # kept as logged: the gradient detector tells NaN from not logged
    assert grad[0] == 1.0 and math.isnan(grad[1]) and grad[3] == math.inf and math.isnan(grad[2])
    assert run.nonfinite == {"grad_norm": [2, 4]} and list(run.values("kl/mean"))[:2] == [0.125, 1.0]
    # a true/false column the catalogue does not know is metadata: one note, no series, not an unknown metric
    assert run.unknown == {} and "train/flag" not in run.series
    assert [n for n in run.notes if "train/flag" in n and "metadata" in n]
    assert list(run.values("loss/policy"))[2] == 0.5
    expected = ["line 6 is a half-written last line", "1 record(s) repeat a step", "steps go backwards 1 time(s)",
                "reward/mean holds 1 value(s) that are not numbers (the first: 'oops' at step 2)",
                "kl/mean holds 1 true/false value(s)", "grad_norm is NaN or infinite at 2 step(s) (the first: 2)"]
    assert len(run.problems) == len(expected)
    for line, text in zip(run.problems, expected):
        assert text in line and str(path) in line


def test_a_csv_export_as_the_wandb_ui_writes_it(tmp_path):
    path = tmp_path / "export.csv"
    path.write_text("_step,train/reward,train/entropy,train/grad_norm,train/global_step,custom\n"
                    "0,0.25,1.5,1.0,1,7\n1,0.5,,NaN,2,8\n2,n/a,1.25,inf,3,9\n")
    run = load_run(path)
    assert run_kind(path) == "table" and run.source == "csv"
    assert run.steps == [1, 2, 3]  # train/global_step is the optimizer step, not W&B's _step
    assert list(run.values("reward/mean"))[:2] == [0.25, 0.5] and math.isnan(list(run.values("reward/mean"))[2])
    assert list(run.values("entropy/mean"))[0] == 1.5 and math.isnan(list(run.values("entropy/mean"))[1])
    assert run.nonfinite == {"grad_norm": [2, 3]} and run.unknown == {"custom": 3}
    assert list(run.series["custom"]) == [7.0, 8.0, 9.0]
    assert len(run.problems) == 2 and "'n/a' at step 3" in run.problems[0]


def test_the_formats_are_asked_in_one_order_whichever_module_was_imported_first():
    """A format module imported before the registry (a test, a user's script) must not move its format ahead of
    more specific ones: a TRL folder with runs/ would then read as TensorBoard."""
    import subprocess
    import sys

    script = ("import grposcope.runs.formats.{} as _\nfrom grposcope.runs.formats import formats\n"
              "print(' '.join(f.name for f in formats()))")
    orders = {subprocess.run([sys.executable, "-c", script.format(m)], capture_output=True, text=True,
                             check=True).stdout for m in ("tensorboard", "console", "trl")}
    assert len(orders) == 1 and orders.pop().split()[:2] == ["grposcope", "trl"]
