"""A run owns its output_dir: a second run (or a --resume) beside a live one is refused before it touches
anything, a killed run leaves no lock behind, overwrite_output_dir deletes only what grposcope wrote, and the
final model carries a manifest that `grposcope eval` checks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import flip_a_bit
from resume_driver import PROMPTS, config
from test_checkpoint import make_tiny, make_trainer
from test_hardening import one_error_line, run, small_run
from test_resume import DRIVER, end, records, start_held_in_step_5

from grposcope import GRPOConfig, GRPOTrainer
from grposcope.trainer.folder_lock import FolderInUseError


def folder_state(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root` with its size and mtime: what "nothing was touched" compares."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def live_run(tmp_path, tiny_model_dir):
    """A run in its own process, held inside step 5 (checkpoint-3 written); yields (process, output_dir)."""
    out = tmp_path / "run"
    proc = start_held_in_step_5(tiny_model_dir, out, tmp_path / "in-step")
    try:
        yield proc, out
    finally:
        end(proc)


def resume_config(out: Path) -> GRPOConfig:
    return config(str(out), resume=True)


def length_20(prompts, completions, **columns):
    """The driver's reward: the completion's length in characters / 20."""
    return [len(c[0]["content"]) / 20 for c in completions]


def test_a_second_run_into_a_live_runs_folder_is_refused_naming_the_holder(live_run, tiny_model_dir):
    proc, out = live_run
    before = folder_state(out)
    for resume in (False, True):
        args = resume_config(out)
        args.resume_from_checkpoint = resume or None
        args.overwrite_output_dir = not resume  # even the option that replaces a run waits its turn
        trainer = GRPOTrainer(model=str(tiny_model_dir), args=args, reward_funcs=length_20, train_dataset=PROMPTS)
        with pytest.raises(FolderInUseError, match=rf"^{out} is in use: process {proc.pid} is training into it"):
            trainer.train()
    assert folder_state(out) == before  # metrics.jsonl, checkpoint-3, the lock file: all as they were
    assert [r["step"] for r in records(out)] == [1, 2, 3, 4]


def test_a_resume_beside_a_live_save_leaves_its_unfinished_checkpoint_alone(live_run, tiny_model_dir):
    proc, out = live_run
    saving = out / f".tmp-checkpoint-6-{proc.pid}"  # what the live run holds while it writes checkpoint-6
    saving.mkdir()
    (saving / "model.safetensors").write_bytes(b"half")
    result = subprocess.run([sys.executable, str(DRIVER), str(tiny_model_dir), str(out), "--resume"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode != 0
    assert f"{out} is in use: process {proc.pid}" in result.stderr
    assert (saving / "model.safetensors").read_bytes() == b"half"


def test_a_killed_run_leaves_no_stale_lock(live_run, tiny_model_dir):
    proc, out = live_run
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (out / ".grposcope.lock").is_file()  # the file stays; the lock went with the process
    trainer = GRPOTrainer(model=str(tiny_model_dir), args=resume_config(out), reward_funcs=length_20,
                          train_dataset=PROMPTS)
    trainer.train()
    assert [r["step"] for r in records(out)] == list(range(1, 9))


def test_the_cli_refuses_a_second_run_with_one_line(live_run, tiny_model_dir):
    proc, out = live_run
    line = one_error_line(run("train", "--model_name_or_path", str(tiny_model_dir), "--output_dir", str(out),
                              "--resume", "--dataset_name", "arithmetic:easy", "--max_steps", "8"))
    assert line.startswith(f"error: {out} is in use: process {proc.pid} is training into it")
    assert "--resume" in line and "another output_dir" in line


def test_the_lock_is_released_when_train_ends_or_fails(tmp_path, tiny_llama, tiny_tokenizer):
    make_trainer(tmp_path, tiny_llama, tiny_tokenizer).train()
    make_trainer(tmp_path, make_tiny(), tiny_tokenizer, max_steps=3).train(resume_from_checkpoint=True)
    failing = make_trainer(tmp_path, make_tiny(), tiny_tokenizer, max_steps=4)
    failing.scorer = None  # fails inside the run, after the lock was taken
    with pytest.raises(Exception):
        failing.train(resume_from_checkpoint=True)
    make_trainer(tmp_path, make_tiny(), tiny_tokenizer, max_steps=4).train(resume_from_checkpoint=True)
    assert [r["step"] for r in records(tmp_path / "run")] == [1, 2, 3, 4]


# --- overwrite_output_dir deletes only what grposcope wrote ----------------------------------------------------


def test_overwrite_deletes_only_the_files_grposcope_wrote(tmp_path, tiny_llama, tiny_tokenizer):
    out = tmp_path / "run"
    make_trainer(tmp_path, tiny_llama, tiny_tokenizer, save_steps=1).train()
    (out / "checkpoint-1" / "my-notes.txt").write_text("lr looked high")  # a user's file in a checkpoint
    (out / "checkpoint-9").mkdir()  # a folder of the user's that happens to have the name
    (out / "checkpoint-9" / "plan.md").write_text("try beta 0.1")
    trainer = make_trainer(tmp_path, make_tiny(), tiny_tokenizer, save_steps=5, max_steps=1,
                           overwrite_output_dir=True)
    notes = []
    real = trainer.logger_factory

    def logger_factory(total, resume_step):
        logger = real(total, resume_step)
        logger.note = notes.append
        return logger

    trainer.logger_factory = logger_factory
    trainer.train()
    assert (out / "checkpoint-9" / "plan.md").read_text() == "try beta 0.1"
    assert sorted(p.name for p in (out / "checkpoint-1").iterdir()) == ["my-notes.txt"]
    assert not (out / "checkpoint-2").exists()
    said = " | ".join(notes)
    assert "removed 1 checkpoint(s) of the earlier run" in said
    assert f"left {out / 'checkpoint-9'} in place: no manifest.json" in said and "plan.md" in said
    assert f"{out / 'checkpoint-1'} but left what grposcope did not write there (my-notes.txt)" in said


def test_rotation_keeps_a_users_file(tmp_path, tiny_llama, tiny_tokenizer):
    out = tmp_path / "run"
    make_trainer(tmp_path, tiny_llama, tiny_tokenizer, save_steps=1, max_steps=1).train()
    (out / "checkpoint-1" / "my-notes.txt").write_text("keep me")
    with pytest.warns(RuntimeWarning, match="save_total_limit: kept .*checkpoint-1.*my-notes.txt"):
        make_trainer(tmp_path, make_tiny(), tiny_tokenizer, save_steps=1, max_steps=3,
                     save_total_limit=1).train(resume_from_checkpoint=True)
    assert sorted(p.name for p in (out / "checkpoint-1").iterdir()) == ["my-notes.txt"]
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-3"]


# --- the final model carries a manifest --------------------------------------------------------------------


def test_eval_refuses_a_bit_flipped_final_model(tmp_path, tiny_model_dir):
    out = small_run(tmp_path, tiny_model_dir)
    manifest = json.loads((out / "model" / "manifest.json").read_text())
    assert manifest["kind"] == "model" and "model.safetensors" in manifest["files"]
    ok = run("eval", "--model", str(out / "model"), "--dataset", "arithmetic:easy", "--eval_size", "2",
             "--output", str(tmp_path / "ok.json"))
    assert ok.exit_code == 0, ok.output  # the intact model evaluates
    flip_a_bit(out / "model" / "model.safetensors")  # one bit of one weight
    line = one_error_line(run("eval", "--model", str(out / "model"), "--dataset", "arithmetic:easy",
                              "--eval_size", "2", "--output", str(tmp_path / "e.json")))
    assert line == (f"error: {out / 'model'} is damaged: model.safetensors does not match its checksum "
                    f"(corrupted); the newest good checkpoint beside it is {out / 'checkpoint-2'}")
    assert not (tmp_path / "e.json").exists()


def test_the_lock_file_is_not_a_run(tmp_path, tiny_llama, tiny_tokenizer):
    """A folder where a run failed before writing anything holds only the lock file: a new run may start."""
    out = tmp_path / "run"
    out.mkdir()
    (out / ".grposcope.lock").write_text(f"{os.getpid() + 10**6}\n")  # a dead holder's PID
    make_trainer(tmp_path, tiny_llama, tiny_tokenizer).train()
    assert [r["step"] for r in records(out)] == [1, 2]


@pytest.mark.parametrize("kind, what", [
    ("symlink", "a symbolic link"), ("directory", "a folder"), ("fifo", "a FIFO"), ("hardlink", "a hard link"),
])
def test_a_lock_path_that_is_not_a_plain_file_is_refused_and_never_written_through(tmp_path, kind, what):
    """A `.grposcope.lock` planted as a link must not carry the PID into the file it points at (a file outside
    the run), and a folder or a FIFO there is named with the fix, not `[Errno 21] Is a directory`."""
    from grposcope.errors import RunError
    from grposcope.trainer.folder_lock import FolderLock

    out, victim = tmp_path / "run", tmp_path / "elsewhere" / "victim.txt"
    out.mkdir()
    victim.parent.mkdir()
    victim.write_text("precious\n")
    lock = out / ".grposcope.lock"
    {"symlink": lambda: lock.symlink_to(victim), "directory": lock.mkdir, "fifo": lambda: os.mkfifo(lock),
     "hardlink": lambda: os.link(victim, lock)}[kind]()
    with pytest.raises(RunError) as caught:
        FolderLock(out).acquire()
    message = str(caught.value)
    assert message.startswith(f"{lock} is {what}") and "remove it" in message and "Errno" not in message
    assert victim.read_text() == "precious\n"


def test_the_cli_names_a_linked_lock_file_in_one_line(tmp_path, tiny_model_dir):
    out = small_run(tmp_path, tiny_model_dir)
    lock, victim = out / ".grposcope.lock", tmp_path / "victim.txt"
    victim.write_text("precious\n")
    lock.unlink()
    lock.symlink_to(victim)
    line = one_error_line(run("train", "--model_name_or_path", str(tiny_model_dir), "--dataset_name",
                              "arithmetic:easy", "--dataset_size", "8", "--eval_size", "0", "--num_generations",
                              "2", "--per_device_train_batch_size", "2", "--max_completion_length", "4",
                              "--max_steps", "3", "--output_dir", str(out), "--resume"))
    assert line.startswith(f"error: {lock} is a symbolic link (to {victim})")
    assert victim.read_text() == "precious\n"


def test_rotation_deletes_nothing_through_a_linked_checkpoint(tmp_path, tiny_llama, tiny_tokenizer):
    """A user moved checkpoint-1 elsewhere and linked it back (issue 56): save_total_limit removed every file
    grposcope had written there, outside output_dir. The link is left, with one warning naming its target."""
    out = tmp_path / "run"
    make_trainer(tmp_path, tiny_llama, tiny_tokenizer, save_steps=1, max_steps=1).train()
    elsewhere = tmp_path / "archive" / "checkpoint-1"
    elsewhere.parent.mkdir()
    (out / "checkpoint-1").rename(elsewhere)
    (out / "checkpoint-1").symlink_to(elsewhere, target_is_directory=True)
    before = sorted(p.name for p in elsewhere.iterdir())
    with pytest.warns(RuntimeWarning, match=f"left .*checkpoint-1 in place: it is a link to {elsewhere}"):
        make_trainer(tmp_path, make_tiny(), tiny_tokenizer, save_steps=1, max_steps=3,
                     save_total_limit=1).train(resume_from_checkpoint=True)
    assert sorted(p.name for p in elsewhere.iterdir()) == before and (out / "checkpoint-1").is_symlink()
    assert (out / "checkpoint-3").is_dir()
