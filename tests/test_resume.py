"""Kill and resume: a run killed with SIGKILL in the middle of a step continues from its last complete
checkpoint, and the steps after it equal those of a run that was never stopped (same seed, same CPU)."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

DRIVER = Path(__file__).with_name("resume_driver.py")
MAX_STEPS = 8


def run_driver(model_dir, output_dir, *extra, check=True):
    env = dict(os.environ, PYTHONWARNINGS="default")
    result = subprocess.run([sys.executable, str(DRIVER), str(model_dir), str(output_dir), *extra],
                            capture_output=True, text=True, env=env, timeout=600)
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def records(output_dir) -> list[dict]:
    return [json.loads(line) for line in (Path(output_dir) / "metrics.jsonl").read_text().splitlines()]


def comparable(record: dict) -> dict:
    """A step's metrics without the ones that measure time."""
    return {k: v for k, v in record.items() if k != "time" and not k.startswith("perf/")}


def start_held_in_step_5(model_dir, output_dir, marker: Path) -> subprocess.Popen:
    """Starts the run and waits until it hangs in the reward function's 3rd call (step 5's scoring, with
    checkpoint-3 written); returns the live process, which the caller ends (`end`)."""
    proc = subprocess.Popen([sys.executable, str(DRIVER), str(model_dir), str(output_dir),
                             "--hang-at-call", "3", "--marker", str(marker)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        while not marker.exists():
            assert proc.poll() is None, f"the run ended before step 5: {proc.stderr.read()[-3000:]}"
            assert time.monotonic() < deadline, "the run never reached step 5"
            time.sleep(0.1)
    except BaseException:
        end(proc)
        raise
    return proc


def end(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()
    proc.stderr.close()


def kill_in_a_step(model_dir, output_dir, marker: Path) -> None:
    """Starts the run, waits until it is in step 5's scoring, kills it with SIGKILL."""
    proc = start_held_in_step_5(model_dir, output_dir, marker)
    try:
        proc.send_signal(signal.SIGKILL)
    finally:
        end(proc)


def test_a_run_killed_mid_step_resumes_to_the_uninterrupted_result(tmp_path, tiny_model_dir):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    run_driver(tiny_model_dir, straight)
    expected = records(straight)
    assert [r["step"] for r in expected] == list(range(1, MAX_STEPS + 1))

    kill_in_a_step(tiny_model_dir, killed, tmp_path / "marker")
    before = records(killed)
    assert [r["step"] for r in before] == [1, 2, 3, 4]  # killed in step 5
    assert sorted(p.name for p in killed.glob("checkpoint-*")) == ["checkpoint-3"]

    # Damage that resuming must not trip over: a later checkpoint whose weights were cut short (a full disk,
    # a partial copy) and the temporary folder of a run killed while saving.
    bad = killed / "checkpoint-7"
    shutil.copytree(killed / "checkpoint-3", bad)
    weights = bad / "model.safetensors"
    os.truncate(weights, weights.stat().st_size // 2)
    (killed / ".tmp-checkpoint-6-12345").mkdir()
    (killed / ".tmp-checkpoint-6-12345" / "model.safetensors").write_bytes(b"partial")

    result = run_driver(tiny_model_dir, killed, "--resume")
    assert "skipping" in result.stderr and "checkpoint-7" in result.stderr and "truncated" in result.stderr
    assert not (killed / ".tmp-checkpoint-6-12345").exists()

    resumed = records(killed)
    assert [r["step"] for r in resumed] == list(range(1, MAX_STEPS + 1))  # each step exactly once
    assert [comparable(r) for r in resumed[:3]] == [comparable(r) for r in before[:3]]  # kept as written
    differences = [
        abs(a[k] - b[k]) if a[k] is not None and b[k] is not None else (0.0 if a[k] == b[k] else math.inf)
        for a, b in zip(map(comparable, resumed), map(comparable, expected))
        for k in a.keys() | b.keys()
        if k != "step"
    ]
    print(f"kill-and-resume: {MAX_STEPS} steps, killed in step {len(before) + 1}, resumed from checkpoint-3, "
          f"{len(differences)} values compared, max |resumed - uninterrupted| = {max(differences)}")
    assert max(differences) == 0.0, f"resumed run differs from the uninterrupted one by {max(differences)}"
    assert comparable(resumed[3]).keys() == comparable(expected[3]).keys()  # same metrics, step 4 included
