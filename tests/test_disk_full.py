"""A full disk while a checkpoint (or the final model) is written: one clear error (DiskFullError), nothing
partial left behind, metrics.jsonl and earlier checkpoints kept, and a way on: --resume from the last checkpoint,
or, for a run that has none, overwrite_output_dir, which keeps its metrics.jsonl aside as metrics.jsonl.1.

The disk is never really filled: the free space `shutil.disk_usage` reports is patched (the check before a
save), or a writer is patched to raise the exception it raises on a full disk (texts copied from real writes
into a 200 KiB tmpfs: safetensors 0.8, torch 2.13, Python's OSError)."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
from collections import namedtuple
from pathlib import Path

import pytest
import torch
import transformers.modeling_utils
from safetensors import SafetensorError
from test_checkpoint import make_tiny, make_trainer
from test_trainer import read_lines
from typer.testing import CliRunner

from grposcope import errors
from grposcope.cli import app
from grposcope.errors import UserError
from grposcope.logging import jsonl
from grposcope.trainer import checkpoint, disk_space, run_folder
from grposcope.trainer.checkpoint import CheckpointError

Usage = namedtuple("Usage", "total used free")
NO_SPACE = r"^no space left on .+ while writing {what} \(needs ~[\d.]+ [KMG]iB, [\d.]+ [KMG]iB free"


def steps(run: Path) -> list[int]:
    return [r["step"] for r in read_lines(run / "metrics.jsonl")]


def free_space_until(run: Path, exists: str, free: int):
    """A disk_usage that reports plenty of room until `run/exists` appears, then `free` bytes."""
    real = shutil.disk_usage

    def disk_usage(path):
        if exists and not (run / exists).exists():
            return real(path)
        return Usage(10**12, 10**12 - free, free)

    return disk_usage


def test_a_save_that_would_not_fit_is_refused_before_anything_is_written(tmp_path, tiny_llama, tiny_tokenizer,
                                                                         monkeypatch):
    run = tmp_path / "run"
    trainer = make_trainer(tmp_path, tiny_llama, tiny_tokenizer, save_steps=1, max_steps=3)
    monkeypatch.setattr(checkpoint.shutil, "disk_usage", free_space_until(run, "checkpoint-1", free=50_000))
    written = []
    real_save_weights = checkpoint.save_weights
    monkeypatch.setattr(checkpoint, "save_weights", lambda folder, *a: written.append(folder.name) or
                        real_save_weights(folder, *a))
    with pytest.raises(UserError, match=NO_SPACE.format(what="checkpoint-2")) as info:
        trainer.train()
    assert isinstance(info.value, errors.DiskFullError) and isinstance(info.value, OSError)
    message = str(info.value)
    # the estimate is the size of checkpoint-1 (same files, same shapes); 50,000 bytes are shown as free
    size = sum(p.stat().st_size for p in (run / "checkpoint-1").iterdir())
    needs = float(re.search(r"needs ~([\d.]+) MiB", message).group(1))
    assert size / 2**20 - 0.005 <= needs <= 1.05 * size / 2**20 + 0.01
    assert "0.05 MiB free" in message
    assert "--resume" in message and str(run / "checkpoint-1") in message  # the way on
    assert "save_total_limit" in message and "free space" in message.lower()  # the fix
    assert len(written) == 1  # checkpoint-1's weights only: checkpoint-2 was refused before its first byte
    assert sorted(p.name for p in run.iterdir() if "checkpoint" in p.name) == ["checkpoint-1"]
    assert steps(run) == [1, 2]


def test_the_estimate_without_an_earlier_checkpoint_covers_weights_and_adamw_moments(tmp_path, tiny_llama,
                                                                                    tiny_tokenizer):
    trainer = make_trainer(tmp_path, tiny_llama, tiny_tokenizer, save_steps=2, max_steps=2)
    trainer.train()
    folder = tmp_path / "run" / "checkpoint-2"
    shutil.rmtree(folder)  # so that the estimate cannot read an earlier checkpoint's size
    estimate = disk_space.estimate_checkpoint_bytes(tmp_path / "run", trainer.model, trainer.optimizer)
    weights = sum(p.numel() * p.element_size() for p in trainer.model.parameters())
    assert estimate >= 3 * weights  # the weights and AdamW's two moments of each
    assert estimate <= 3 * weights * 1.05 + 2 * 2**20  # plus a small margin, not a multiple


WRITE_FAILURES = [
    # (writer, the file it fails on, the exception a full disk gives)
    ("safetensors", "model.safetensors",
     SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")),
    ("torch.save", "optimizer.pt",
     RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")),
    ("torch.save", "scheduler.pt", OSError(28, "No space left on device")),
]


def fail_writes(monkeypatch, writer: str, file: str, error: BaseException, inside: str) -> None:
    """Makes `writer` raise `error` when it writes `file` into a folder whose name contains `inside`."""
    if writer == "safetensors":
        real, owner, name = transformers.modeling_utils.safe_save_file, transformers.modeling_utils, "safe_save_file"
    else:
        real, owner, name = torch.save, torch, "save"

    def write(obj, path, *args, **kwargs):
        if inside in str(Path(path).parent.name) and Path(path).name == file:
            Path(path).write_bytes(b"\0" * 100)  # a partial file, as a full disk leaves one
            raise error
        return real(obj, path, *args, **kwargs)

    monkeypatch.setattr(owner, name, write)


@pytest.mark.parametrize("writer, file, error", WRITE_FAILURES, ids=["SafetensorError", "torch-unexpected-pos",
                                                                     "OSError-ENOSPC"])
def test_a_write_that_fills_the_disk_keeps_everything_and_the_run_resumes(tmp_path, tiny_llama, tiny_tokenizer,
                                                                          monkeypatch, writer, file, error):
    run = tmp_path / "run"
    trainer = make_trainer(tmp_path, tiny_llama, tiny_tokenizer, save_steps=1, max_steps=3)
    with monkeypatch.context() as patch:
        fail_writes(patch, writer, file, error, inside="checkpoint-2")
        with pytest.raises(UserError, match=NO_SPACE.format(what="checkpoint-2")) as info:
            trainer.train()
    assert isinstance(info.value, errors.DiskFullError)
    assert "--resume" in str(info.value) and str(run / "checkpoint-1") in str(info.value)
    assert not list(run.glob(".tmp-*")) and not (run / "checkpoint-2").exists()  # nothing partial is left
    assert run_folder.verify(run / "checkpoint-1") is None  # the earlier checkpoint is intact
    assert steps(run) == [1, 2]  # and every logged step
    # once there is room again, --resume continues from checkpoint-1
    resumed = make_trainer(tmp_path, make_tiny(), tiny_tokenizer, save_steps=1, max_steps=3)
    resumed.train(resume_from_checkpoint=True)
    assert steps(run) == [1, 2, 3]
    assert all(run_folder.verify(run / f"checkpoint-{n}") is None for n in (1, 2, 3))


def test_the_final_model_on_a_full_disk_is_refused_the_same_way(tmp_path, tiny_llama, tiny_tokenizer, monkeypatch):
    run = tmp_path / "run"
    trainer = make_trainer(tmp_path, tiny_llama, tiny_tokenizer, save_steps=1, max_steps=2)
    with monkeypatch.context() as patch:
        fail_writes(patch, "safetensors", "model.safetensors", WRITE_FAILURES[0][2], inside="model")
        with pytest.raises(UserError, match=NO_SPACE.format(what=f"the final model {re.escape(str(run / 'model'))}")):
            trainer.train()
    assert not (run / "model").exists() and not list(run.glob(".tmp-*"))
    assert steps(run) == [1, 2] and run_folder.verify(run / "checkpoint-2") is None


def cli_options(tmp_path, tiny_model_dir) -> list[str]:
    return ["train", "--model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp_path / "out"),
            "--dataset_name", "arithmetic:easy", "--dataset_size", "8", "--eval_size", "2",
            "--num_generations", "2", "--per_device_train_batch_size", "4", "--max_completion_length", "4",
            "--save_steps", "1", "--max_steps", "2"]


def test_the_cli_prints_one_error_line_and_exits_1(tmp_path, tiny_model_dir, monkeypatch):
    runner = CliRunner()
    fail_writes(monkeypatch, "torch.save", "optimizer.pt", WRITE_FAILURES[1][2], inside="checkpoint-2")
    result = runner.invoke(app, cli_options(tmp_path, tiny_model_dir))
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    errors_shown = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors_shown) == 1 and "Traceback" not in result.output
    assert re.match(NO_SPACE.format(what="checkpoint-2"), errors_shown[0].removeprefix("error: "))
    assert steps(tmp_path / "out") == [1, 2]


def test_a_run_with_no_checkpoint_yet_has_a_way_on_that_keeps_its_metrics(tmp_path, tiny_llama, tiny_tokenizer,
                                                                         monkeypatch):
    run = tmp_path / "run"
    trainer = make_trainer(tmp_path, tiny_llama, tiny_tokenizer, save_steps=2, max_steps=2)
    with monkeypatch.context() as patch:  # the first checkpoint does not fit
        patch.setattr(checkpoint.shutil, "disk_usage", free_space_until(run, "", free=1000))
        with pytest.raises(UserError, match=NO_SPACE.format(what="checkpoint-2")) as info:
            trainer.train()
    dead = (run / "metrics.jsonl").read_bytes()
    assert [r["step"] for r in read_lines(run / "metrics.jsonl")] == [1, 2]
    way_on = "--overwrite_output_dir (overwrite_output_dir=True), which keeps its metrics.jsonl as metrics.jsonl.1"
    assert way_on in str(info.value)
    # --resume has nothing to continue: it says so and names the same option
    with pytest.raises(CheckpointError, match="holds a run's metrics.jsonl and no complete checkpoint") as info:
        make_trainer(tmp_path, make_tiny(), tiny_tokenizer).train(resume_from_checkpoint=True)
    assert way_on in str(info.value)
    # a new run without the option is refused with the same words; nothing changes
    with pytest.raises(ValueError, match="already holds a run with no checkpoint to resume from") as info:
        make_trainer(tmp_path, make_tiny(), tiny_tokenizer).train()
    assert way_on in str(info.value)
    assert (run / "metrics.jsonl").read_bytes() == dead and not (run / "metrics.jsonl.1").exists()
    # with it, the run starts over and the dead run's metrics are kept beside the new ones
    make_trainer(tmp_path, make_tiny(), tiny_tokenizer, save_steps=2, max_steps=2, overwrite_output_dir=True).train()
    assert (run / "metrics.jsonl.1").read_bytes() == dead
    assert steps(run) == [1, 2] and run_folder.verify(run / "checkpoint-2") is None
    # a second start-over keeps both earlier files
    make_trainer(tmp_path, make_tiny(), tiny_tokenizer, save_steps=2, max_steps=2, overwrite_output_dir=True).train()
    assert (run / "metrics.jsonl.1").read_bytes() == dead and (run / "metrics.jsonl.2").is_file()


def test_the_mount_point_is_named(tmp_path):
    named = disk_space.mount_of(tmp_path / "run" / "checkpoint-3")  # the folders need not exist
    mount = Path(named.split(" (")[0])
    assert os.path.ismount(mount) and str(tmp_path).startswith(str(mount))


# --- a full disk while a line of metrics.jsonl or completions.jsonl is written ---------------------------------


def fill_the_disk_at(patch, name: str, call: int) -> None:
    """The `call`-th write to a file called `name` writes half its bytes, then fails as a full disk does
    (os.write is what the JSON-lines writer calls; other files pass through)."""
    real, count = os.write, 0

    def write(fd, data):
        nonlocal count
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) == name:
            count += 1
            if count == call:
                real(fd, bytes(data[: len(data) // 2]))
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    patch.setattr(jsonl.os, "write", write)


def whole_lines(path: Path) -> list[dict]:
    text = path.read_text()
    assert text.endswith("\n")  # no partial last line
    return [json.loads(line) for line in text.splitlines()]


def train_until_the_disk_fills(monkeypatch, trainer, name: str, call: int) -> str:
    """Trains until the `call`-th write to `name` fills the disk; returns the DiskFullError's message."""
    with monkeypatch.context() as patch:
        fill_the_disk_at(patch, name, call)
        with pytest.raises(errors.DiskFullError) as info:
            trainer.train()
    return str(info.value)


def test_a_full_disk_while_logging_a_step_names_the_file_and_the_way_on(tmp_path, tiny_llama, tiny_tokenizer,
                                                                         monkeypatch):
    run = tmp_path / "run"
    trainer = make_trainer(tmp_path, tiny_llama, tiny_tokenizer, save_steps=1, max_steps=4)
    said = train_until_the_disk_fills(monkeypatch, trainer, "metrics.jsonl", call=3)
    assert said.startswith(f"no space left on the disk of {run / 'metrics.jsonl'} (No space left on device)")
    assert "keeps every whole line" in said and "Free space on that disk" in said
    assert f"continue from {run / 'checkpoint-2'} with --resume" in said
    assert [r["step"] for r in whole_lines(run / "metrics.jsonl")] == [1, 2]
    make_trainer(tmp_path, make_tiny(), tiny_tokenizer, save_steps=1, max_steps=4).train(resume_from_checkpoint=True)
    assert [r["step"] for r in whole_lines(run / "metrics.jsonl")] == [1, 2, 3, 4]


def test_a_full_disk_while_logging_completions_leaves_no_partial_line(tmp_path, tiny_llama, tiny_tokenizer,
                                                                      monkeypatch):
    run = tmp_path / "run"
    trainer = make_trainer(tmp_path, tiny_llama, tiny_tokenizer, save_steps=10, max_steps=3)
    said = train_until_the_disk_fills(monkeypatch, trainer, "completions.jsonl", call=2)
    assert said.startswith(f"no space left on the disk of {run / 'completions.jsonl'}")
    assert "start the run over with --overwrite_output_dir" in said  # no checkpoint yet: the one way on
    assert {r["step"] for r in whole_lines(run / "completions.jsonl")} == {1}
    assert [r["step"] for r in whole_lines(run / "metrics.jsonl")] == [1, 2]


def test_the_cli_prints_a_full_disk_while_logging_as_one_line(tmp_path, tiny_model_dir, monkeypatch):
    fill_the_disk_at(monkeypatch, "metrics.jsonl", call=2)
    result = CliRunner().invoke(app, cli_options(tmp_path, tiny_model_dir))
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    shown = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(shown) == 1 and "Traceback" not in result.output
    assert shown[0].startswith(f"error: no space left on the disk of {tmp_path / 'out' / 'metrics.jsonl'}")
    assert f"continue from {tmp_path / 'out' / 'checkpoint-1'} with --resume" in shown[0]
