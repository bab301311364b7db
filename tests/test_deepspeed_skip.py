"""The no-signal skip of grposcope.integrations.trl under DeepSpeed ZeRO-2 and ZeRO-3, on two CPU processes.

DeepSpeed runs here on its CPU accelerator (DS_ACCELERATOR=cpu: gloo, as oneCCL is not installed). The first run
on a machine builds DeepSpeed's shared-memory comm op with the C++ compiler (about a minute; cached in
~/.cache/torch_extensions).
tests/deepspeed_two_process.py trains, per ZeRO stage, one group per process and micro-batch, two micro-batches
per optimizer step, 16 completions a step: a step with signal, a step without any, a step with signal on
process 0 only; the first two with the skip off; a resume from the checkpoint written after the skipped step; and a
run whose first step is the skipped one. Stage 2 uses TRL's AdamW and the trainer's linear schedule, stage 3 an
AdamW from the DeepSpeed config and the linear schedule the engine owns.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("deepspeed")
pytest.importorskip("trl")

LAUNCHER = Path(sys.executable).parent / "accelerate"
pytestmark = [
    pytest.mark.skipif(shutil.which("accelerate") is None and not LAUNCHER.exists(),
                       reason="needs accelerate's launcher"),
    pytest.mark.skipif(shutil.which(os.environ.get("CXX", "c++")) is None,
                       reason="DeepSpeed builds its CPU comm op on first use: needs a C++ compiler"),
]
ROWS_PER_STEP = 4 * 2 * 2  # 4 rows a micro-batch x 2 micro-batches x 2 processes


@pytest.fixture(scope="module", params=[2, 3], ids=["zero2", "zero3"])
def ranks(request, tmp_path_factory):
    """Both processes' records of tests/deepspeed_two_process.py under one ZeRO stage."""
    out = tmp_path_factory.mktemp(f"zero{request.param}")
    command = [str(LAUNCHER), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
               "--mixed_precision", "no", "--dynamo_backend", "no",
               str(Path(__file__).parent / "deepspeed_two_process.py"), str(out), str(request.param)]
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parent)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    return request.param, [json.loads((out / f"rank{i}.json").read_text()) for i in range(2)]


def test_a_step_without_signal_leaves_weights_and_optimizer_state_bit_identical(ranks):
    """Step 2 has no signal anywhere: the weights (gathered under ZeRO-3) and each process's moments and step
    count are the bytes they were after step 1. Step 3, with signal on process 0 only, moves both processes."""
    _, both = ranks
    for rank in both:
        first, second, third = rank["skip"]["records"]
        assert [r["skipped"] for r in (first, second, third)] == [0.0, 1.0, 0.0]
        assert rank["skip"]["skipped_no_signal_steps"] == 1
        assert second["weights"] == first["weights"] and second["optimizer"] == first["optimizer"]
        assert [r["adam_steps"] for r in (first, second, third)] == [[1.0], [1.0], [2.0]]
        assert third["weights"] != second["weights"] and third["optimizer"] != second["optimizer"]
    assert [r["weights"] for r in both[0]["skip"]["records"]] == [r["weights"] for r in both[1]["skip"]["records"]]


def test_with_the_skip_off_the_step_without_signal_moves_them(ranks):
    """Stock behaviour (skip_no_signal_steps=False): AdamW replays its momentum on a zero gradient."""
    _, both = ranks
    for rank in both:
        first, second = rank["stock"]["records"]
        assert first["weights"] == rank["skip"]["records"][0]["weights"]  # the same first step
        assert second["skipped"] is None
        assert second["weights"] != first["weights"] and second["optimizer"] != first["optimizer"]
        assert second["adam_steps"] == [2.0]


def test_the_engine_counters_and_the_learning_rate_go_on_across_the_skip(ranks):
    """The engine still runs its step (only the base optimizer's update is left out): global_steps,
    global_samples and micro_steps advance with transformers' global_step, DeepSpeed's own overflow counter
    stays 0, and the linear schedule (lr 1e-3 over 3 steps) advances on the skipped step as without DeepSpeed."""
    stage, both = ranks
    for rank in both:
        records = rank["skip"]["records"]
        assert [r["global_steps"] for r in records] == [r["step"] for r in records] == [1, 2, 3]
        assert [r["micro_steps"] for r in records] == [1, 2, 3]  # accelerate steps the engine once per step
        assert [r["global_samples"] for r in records] == [ROWS_PER_STEP * k for k in (1, 2, 3)]
        assert [r["ds_skipped_steps"] for r in records] == [0, 0, 0]
        assert all(r["engine_owns_scheduler"] == (stage == 3) for r in records)
        # linear decay: step k trains at 1e-3 * (3 - (k - 1)) / 3. TRL logs the lr after the optimizer call: the
        # trainer's own scheduler (ZeRO-2) has not stepped yet; the engine's (ZeRO-3) stepped inside the backward
        # pass, so TRL shows the next step's, 1e-3 * (3 - k) / 3
        offset = 1 if stage == 2 else 0
        assert [r["lr"] for r in records] == pytest.approx([1e-3 * (3 - k + offset) / 3 for k in (1, 2, 3)],
                                                           abs=1e-12)


def test_a_checkpoint_after_the_skip_resumes_bit_identically(ranks):
    """checkpoint-2, written right after the skipped step, resumed for step 3: the same weights, moments, step
    counts, engine counters and lr as the run that did not stop, and the skip count restored."""
    _, both = ranks
    for rank in both:
        (resumed,), straight = rank["resume"]["records"], rank["skip"]["records"][2]
        for key in ("step", "weights", "optimizer", "adam_steps", "global_steps", "global_samples", "lr",
                    "skipped"):
            assert resumed[key] == straight[key], key
        assert rank["resume"]["skipped_no_signal_steps"] == 1
        # DeepSpeed checkpoints no micro_steps: a resumed engine counts from 0, with or without the skip
        assert resumed["micro_steps"] == 1


def test_a_first_step_without_signal_is_skipped_and_the_next_trains(ranks):
    """The run's first step is the skipped one: the initial weights stay, AdamW holds no moments yet; step 2
    trains, and DeepSpeed's per-weight view of the moments (safe_get_full_optimizer_state) shows them, which
    ZeRO-2 links after its first base optimizer call, here a skipped one."""
    _, both = ranks
    for rank in both:
        first, second = rank["first"]["records"]
        assert [first["skipped"], second["skipped"]] == [1.0, 0.0]
        assert first["weights"] == rank["first"]["initial"] and first["adam_steps"] == []
        assert second["weights"] != first["weights"] and second["adam_steps"] == [1.0]
        views = rank["first"]["moment_views"]
        assert views["shown"] == views["decayed"] > 0
