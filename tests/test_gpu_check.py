"""bench/gpu_check.py at its tiny size on the CPU: the code paths a GPU machine runs (grposcope's trainer, its
TRL subclass and stock TRL; the no-signal skip; a resume; the report), so that the check cannot rot between the
sessions that are lent a GPU. Nothing here asserts a time: only that every figure is there and finite."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
_spec = importlib.util.spec_from_file_location("_gpu_check_runs", BENCH / "_gpu_check_runs.py")
runs = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = runs  # its dataclasses look their module up there
_spec.loader.exec_module(runs)


def test_scripted_rewards_mix_every_group_and_collapse_all_on_the_no_signal_step():
    g, reward = 4, runs.make_reward(4, no_signal_step=3)
    pid = [p for p in (0, 1, 2) for _ in range(g)]  # three groups, group after group
    for done in (0, 1, 3):  # steps 1, 2 and 4: every group mixed
        scores = reward([""] * len(pid), [""] * len(pid), pid, trainer_state=SimpleNamespace(global_step=done))
        groups = [scores[i : i + g] for i in range(0, len(scores), g)]
        assert all(len(set(group)) > 1 for group in groups)
        assert set(scores) <= {0.0, 1 / 3, 2 / 3, 1.0}
    # pid 0, step 1: (0 + i + 1) % 4 / 3 for i = 0..3 -> 1/3, 2/3, 1, 0
    first = reward([""] * g, [""] * g, [0] * g, trainer_state=SimpleNamespace(global_step=0))
    assert first == pytest.approx([1 / 3, 2 / 3, 1.0, 0.0])
    flat = reward([""] * len(pid), [""] * len(pid), pid, trainer_state=SimpleNamespace(global_step=2))
    assert flat == [0.0] * len(pid)


def test_timing_drops_the_warm_up_and_prices_a_thousand_tokens():
    # 3 steps, 1 warm-up, 500 tokens a step: measured 2.0 and 4.0 s -> 4.0 and 8.0 s per 1,000 tokens
    t = runs.timing([9.0, 2.0, 4.0], warmup=1, tokens_per_step=500)
    assert t["measured_step_s"] == [2.0, 4.0]
    assert t["s_per_1k_tokens"] == [4.0, 8.0]
    assert (t["median_step_s"], t["min_s_per_1k_tokens"], t["max_s_per_1k_tokens"]) == (3.0, 4.0, 8.0)


@pytest.fixture(scope="module")
def tiny_check(tmp_path_factory):
    pytest.importorskip("trl")
    pytest.importorskip("datasets")
    out = tmp_path_factory.mktemp("gpu-check")
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    proc = subprocess.run([sys.executable, str(BENCH / "gpu_check.py"), "--tiny", "--device", "cpu", "--out",
                           str(out)], capture_output=True, text=True, timeout=900, env=env)
    return proc, out


def test_the_tiny_check_passes_and_writes_its_report(tiny_check):
    proc, out = tiny_check
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    result = json.loads((out / "gpu_check.json").read_text())
    assert result["status"] == "complete" and result["passed"] and not result["errors"]
    assert result["checks"] and all(result["checks"].values())
    assert result["environment"]["versions"]["trl"] and result["environment"]["device"] == "cpu"
    text = (out / "gpu_check.txt").read_text()
    assert "PASSED" in text and "failed checks: none" in text


def test_the_tiny_check_skips_the_no_signal_step_and_resumes_exactly(tiny_check):
    _, out = tiny_check
    c = json.loads((out / "gpu_check.json").read_text())["shapes"]["tiny"]["correctness"]
    s = c["plan"]["no_signal_step"]
    assert c["no_signal"]["skipped_flags"][str(s)] == 1.0
    assert c["no_signal"]["weights_unchanged"] and c["no_signal"]["control_changed"]
    assert c["no_signal"]["adam_steps_before_after"][0] == c["no_signal"]["adam_steps_before_after"][1] == s - 1
    assert c["acr_by_step"][str(s)] == 1.0 and c["acr_by_step"]["1"] == 0.0
    assert c["resume"]["weights_equal"] and c["resume"]["max_abs_diff"] == 0.0
    assert c["resume"]["resumed_steps"] == list(range(c["plan"]["resume_at"] + 1, c["plan"]["steps"] + 1))
    assert c["resume"]["resumed"] == c["resume"]["straight"]
    assert all(math.isfinite(v) for v in c["losses"] + c["grad_norms"])


def test_the_tiny_check_times_all_three_trainers(tiny_check):
    _, out = tiny_check
    result = json.loads((out / "gpu_check.json").read_text())
    speed = result["shapes"]["tiny"]["speed"]
    assert set(speed) == set(runs.TRAINERS)
    batch = result["shapes"]["tiny"]["batch"]
    for kind, s in speed.items():
        assert len(s["measured_step_s"]) == result["settings"]["steps"], kind
        assert all(math.isfinite(t) and t > 0 for t in s["measured_step_s"] + s["s_per_1k_tokens"]), kind
        assert s["completion_tokens_per_step"] == batch["prompts"] * batch["generations"] * batch["length"]
        assert s["lengths_forced"] and s["losses_finite"], kind
    steps = result["settings"]["warmup"] + result["settings"]["steps"]
    assert speed["grposcope"]["acr"] == [0.0] * steps  # the scripted rewards mix every group, in every trainer
    assert speed["grposcope_trl"]["acr"] == [0.0] * steps
    assert speed["trl"]["frac_reward_zero_std"] == [0.0] * steps
