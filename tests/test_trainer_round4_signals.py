"""Issue 40, point 19: SIGTERM and SIGHUP stop `grposcope train` as Ctrl-C does, and say so: the signal, the
last checkpoint and the command that continues the run. A real process gets the real signal."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_a_stop_signal_during_a_run_prints_what_ctrl_c_prints(tmp_path, tiny_model_dir, monkeypatch, name):
    """In this process (fast): the signal arrives while the trainer runs."""
    import os

    from test_hardening import run, small_run

    import grposcope.trainer as trainer_pkg

    out = small_run(tmp_path, tiny_model_dir)

    def signalled(self, *args, **kwargs):
        os.kill(os.getpid(), getattr(signal, name))
        time.sleep(30)  # the handler raises before this ends
        raise AssertionError("no signal arrived")

    monkeypatch.setattr(trainer_pkg.GRPOTrainer, "train", signalled)
    monkeypatch.setattr("sys.argv", ["grposcope", "train", "--output_dir", str(out), "--max_steps", "4"])
    before = signal.getsignal(signal.SIGTERM)
    result = run("train", "--model_name_or_path", str(tiny_model_dir), "--dataset_name", "arithmetic:easy",
                 "--dataset_size", "8", "--eval_size", "0", "--num_generations", "2",
                 "--per_device_train_batch_size", "2", "--max_completion_length", "4", "--max_steps", "4",
                 "--output_dir", str(out))
    assert result.exit_code == 128 + getattr(signal, name), result.output
    lines = result.output.splitlines()
    assert f"stopped by {name}" in lines
    assert (f"the run's last checkpoint is {out / 'checkpoint-2'}; continue it with: grposcope train --output_dir "
            f"{out} --max_steps 4 --resume") in lines
    assert signal.getsignal(signal.SIGTERM) is before  # the handlers from before are back


def test_sigterm_to_a_real_run_says_where_the_last_checkpoint_is_and_how_to_resume(tmp_path, tiny_model_dir):
    """A real process, signalled from outside while it trains (slower: it imports torch)."""
    name = "SIGTERM"
    out = tmp_path / "run"
    argv = ["train", "--model_name_or_path", str(tiny_model_dir), "--dataset_name", "arithmetic:easy",
            "--dataset_size", "8", "--eval_size", "0", "--num_generations", "2", "--per_device_train_batch_size",
            "2", "--max_completion_length", "4", "--max_steps", "100000", "--save_steps", "1", "--output_dir",
            str(out)]
    code = "import sys; from grposcope.cli import run; sys.argv[0] = 'grposcope'; run()"
    child = subprocess.Popen([sys.executable, "-c", code, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        deadline = time.monotonic() + 120
        while not (out / "checkpoint-1").is_dir():  # a step in: a checkpoint written
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "no checkpoint after 120 s"
            time.sleep(0.05)
        child.send_signal(getattr(signal, name))
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    number = getattr(signal, name)
    assert child.returncode == 128 + number, err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert f"stopped by {name}" in lines, err[-3000:]  # the whole end of stderr: a failure shows what was printed
    resume = next(line for line in lines if line.startswith("the run's last checkpoint is "))
    assert resume.endswith(f"; continue it with: grposcope {' '.join(argv)} --resume")
