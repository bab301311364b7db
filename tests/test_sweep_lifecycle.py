"""`grposcope sweep`'s lifecycle: a signal to the sweep ends its training child and says how to continue; a
killed sweep (SIGKILL) leaves no child behind; every option is checked before the first run; a sweep run again
with other settings names the runs that do not match instead of counting them as done.

The signal tests start a real sweep (`python -m grposcope.cli sweep`) on the tiny Llama and read the process
table from /proc, so they run on Linux only. They wait by polling with generous deadlines; nothing is timed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grposcope.cli import app

SIM = ["--backend", "simulate", "--prompts", "200", "--batch_size", "16", "--features", "4"]
DEADLINE_S = 300.0  # for a loaded 2-core machine: the child has to import torch and build the tiny model

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; PR_SET_PDEATHSIG")


def _tiny_train(model_dir: Path) -> list[str]:
    return ["--model_name_or_path", str(model_dir), "--dataset_size", "8", "--eval_size", "2",
            "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1",
            "--max_completion_length", "4", "--eval_steps", "none", "--torch_threads", "1"]


def _sweep_args(out: Path, model_dir: Path, max_steps: int = 100000) -> list[str]:
    """A sweep of one train run, long enough to be stopped while it trains (a checkpoint every step)."""
    return ["sweep", "--output", str(out), "--group_sizes", "2", "--levels", "easy", "--max_steps", str(max_steps),
            "--save_steps", "1", *_tiny_train(model_dir)]


def _long_sweep(out: Path, model_dir: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "grposcope.cli", *_sweep_args(out, model_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            env=dict(os.environ))


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (state, ppid, ...); None once the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"  # a zombie has ended; only its exit status is left


def _train_child(sweep_pid: int) -> int | None:
    """The PID of the sweep's child once it runs `python -m grposcope.cli train` (not before it execs)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields is None or int(fields[1]) != sweep_pid:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[1:4] == [b"-m", b"grposcope.cli", b"train"]:
            return int(entry.name)
    return None


def _wait_for(what: str, check, sweep: subprocess.Popen, out: Path):
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if sweep.poll() is not None:
            break
        time.sleep(0.2)
    sweep.kill()
    log = out / "g2-easy-grpo-s0.log"
    pytest.fail(f"{what} did not happen; sweep exit {sweep.poll()}: {sweep.communicate()[1]}\n"
                + (log.read_text() if log.is_file() else "(no log)"))


def _gone_within(pid: int, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def _checkpointed(run: Path) -> bool:
    return any((p / "manifest.json").is_file() for p in run.glob("checkpoint-*"))


@linux_only
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)],
                         ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_sweep_ends_its_child_and_says_how_to_continue(tmp_path, tiny_model_dir, signum, code):
    out = tmp_path / "sweep"
    sweep = _long_sweep(out, tiny_model_dir)
    child = None
    try:
        child = _wait_for("a train child", lambda: _train_child(sweep.pid), sweep, out)
        _wait_for("a checkpoint", lambda: _checkpointed(out / "g2-easy-grpo-s0"), sweep, out)
        os.kill(sweep.pid, signum)
        assert _gone_within(child), f"the training child {child} outlived the sweep"
        _, err = sweep.communicate(timeout=120)
        assert sweep.returncode == code, err
        assert f"error: sweep stopped by {signal.Signals(signum).name} during g2-easy-grpo-s0" in err
        assert f"PID {child}, was ended" in err and "0 of 1 runs done" in err
        assert "run the same grposcope sweep command again" in err
        assert "g2-easy-grpo-s0 continues from its newest checkpoint (--resume)" in err
        assert len(err.strip().splitlines()) == 1, err  # one line, no traceback
        # continuing with other settings would resume that checkpoint into a run of two settings: refused
        other = CliRunner().invoke(app, _sweep_args(out, tiny_model_dir, max_steps=50000))
        assert other.exit_code == 2 and "1 run(s) in " in other.output
        assert "other settings than this sweep's: g2-easy-grpo-s0 (--max_steps 100000 then, 50000 now)" in other.output
    finally:
        _kill_leftovers(sweep, child)


@linux_only
def test_sigkill_to_the_sweep_leaves_no_child_alive(tmp_path, tiny_model_dir):
    out = tmp_path / "sweep"
    sweep = _long_sweep(out, tiny_model_dir)
    child = None
    try:
        child = _wait_for("a train child", lambda: _train_child(sweep.pid), sweep, out)
        os.kill(sweep.pid, signal.SIGKILL)  # no handler can run: the kernel has to end the child
        sweep.wait(timeout=60)
        assert _gone_within(child), f"the training child {child} outlived the killed sweep"
    finally:
        _kill_leftovers(sweep, child)


def _kill_leftovers(sweep: subprocess.Popen, child: int | None) -> None:
    if sweep.poll() is None:
        sweep.kill()
        sweep.communicate()
    if child is not None and _alive(child):
        os.kill(child, signal.SIGKILL)


def test_every_level_and_range_is_checked_before_the_first_run(tmp_path, tiny_model_dir):
    runner = CliRunner()
    out = tmp_path / "s"
    train = ["sweep", "--output", str(out), "--group_sizes", "2", "--max_steps", "1", *_tiny_train(tiny_model_dir)]
    # "easy" is a good level and would run first; "bogus" used to fail only in its own child, after it
    result = runner.invoke(app, [*train, "--levels", "easy,bogus"])
    assert result.exit_code == 2
    assert "error: --levels 'bogus': unknown arithmetic level(s) ['bogus']; known: easy, medium, hard" in result.output
    result = runner.invoke(app, [*train, "--levels", "easy+easy"])
    assert result.exit_code == 2 and "--levels 'easy+easy': names a level twice" in result.output
    result = runner.invoke(app, [*train, "--levels", "easy", "--seeds", "0,-1"])
    assert result.exit_code == 2 and "--seeds must be >= 0, got [-1]" in result.output
    result = runner.invoke(app, ["sweep", "--output", str(out), *SIM, "--levels=-1,nan"])
    assert result.exit_code == 2 and "a finite number such as -2 for hard or 1 for easy), got 'nan'" in result.output
    result = runner.invoke(app, ["sweep", "--output", str(out), *SIM, "--save_steps", "0"])
    assert result.exit_code == 2 and "--save_steps must be >= 1 (steps), got 0" in result.output
    assert not out.exists()  # no run, no log


def test_a_sweep_run_again_with_other_settings_names_the_runs_that_differ(tmp_path):
    runner = CliRunner()
    out = tmp_path / "sweep"
    base = ["sweep", "--output", str(out), *SIM, "--group_sizes", "4,8", "--levels", "-1", "--seeds", "0,1"]
    assert runner.invoke(app, [*base, "--max_steps", "5"]).exit_code == 0
    again = runner.invoke(app, [*base, "--max_steps", "6"])
    assert again.exit_code == 2, again.output
    assert ("error: 4 run(s) in " + str(out) + " were done (or started) with other settings than this sweep's: "
            "g4-mu-1-grpo-s0, g4-mu-1-grpo-s1, g8-mu-1-grpo-s0, g8-mu-1-grpo-s1 (--max_steps 5 then, 6 now); "
            "give another --output for these settings, or pass --redo_changed") in again.output
    assert _steps(out / "g8-mu-1-grpo-s1") == 5  # left as it was
    other = runner.invoke(app, [*base, "--max_steps", "5", "--prompts", "300"])
    assert other.exit_code == 2 and "(--prompts 200 then, 300 now)" in other.output
    redo = runner.invoke(app, [*base, "--max_steps", "6", "--redo_changed"])
    assert redo.exit_code == 0, redo.output
    assert "sweep: 4 runs, 0 done before, 4 to run (4 done with other settings, run again)" in redo.output
    assert _steps(out / "g8-mu-1-grpo-s1") == 6
    same = runner.invoke(app, [*base, "--max_steps", "6"])
    assert same.exit_code == 0 and "sweep: 4 runs, 4 done before, 0 to run" in same.output


def _steps(run: Path) -> int:
    return json.loads((run / "summary.json").read_text())["steps"]
