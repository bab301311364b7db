"""Behaviour unchanged? Seeded runs of several configurations, their metrics compared between two source trees.

A refactor that claims to change no behaviour runs this before and after: each configuration trains the
embedded model for a few steps with one torch thread (bitwise reproducible on one machine), and `compare`
prints, per configuration, how many metric values differ and the largest difference (timings excluded).

    PYTHONPATH=/tmp/before/src .venv/bin/python bench/same_metrics.py run --out /work/runs/same/before
    .venv/bin/python bench/same_metrics.py run --out /work/runs/same/after
    .venv/bin/python bench/same_metrics.py compare /work/runs/same/before /work/runs/same/after

`run --extra ...` adds options to every configuration (e.g. `--extra --skip_no_signal_steps false`, to check
that a new default's off switch gives the old behaviour).

The configurations cover every estimator, sampler and loss setting the trainer routes: AVSPO with its guard and
measure_update, dynamic sampling with a reference model, clip-higher, dual-clip and two passes over each batch,
Reinforce-Ada with the pool baseline, the budgeted sampler with RLOO and an entropy bonus, Dr. GRPO with the KL
in the reward.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

BASE = ["--max_steps", "3", "--max_completion_length", "24", "--eval_size", "8", "--seed", "3",
        "--dataset_name", "arithmetic:easy,medium",  # prompts the model sometimes solves: mixed groups
        "--torch_threads", "1", "--logging_steps", "1", "--learning_rate", "2e-5", "--lr_scheduler_type", "constant",
        "--num_generations", "4", "--per_device_train_batch_size", "8", "--overwrite_output_dir", "true"]
CONFIGS = {
    "avspo_guard": ["--use_avspo", "true", "--all_wrong_max_share", "0.5", "--measure_update", "true"],
    "dynamic_kl_clip": ["--sampler", "dynamic", "--beta", "0.04", "--epsilon_high", "0.28", "--dual_clip", "3",
                        "--num_iterations", "2", "--loss_type", "grpo"],
    "reinforce_ada_pool": ["--sampler", "reinforce_ada", "--advantage_estimator", "pool", "--exit_rule", "pos",
                           "--round_size", "4", "--max_rounds", "2"],
    "budgeted_rloo": ["--sampler", "budgeted", "--advantage_estimator", "rloo", "--entropy_coef", "0.01",
                      "--loss_type", "dr_grpo"],
    "dr_grpo_kl_reward": ["--advantage_estimator", "dr_grpo", "--beta", "0.04", "--kl_in_reward", "true",
                          "--mask_truncated_completions", "true", "--scale_rewards", "false"],
}
SKIP = ("perf/", "time")  # wall-clock figures (and the line's timestamp) differ from run to run


def run(args: argparse.Namespace) -> None:
    out = Path(args.out)
    for name, extra in CONFIGS.items():
        folder = out / name
        cmd = [sys.executable, "-m", "grposcope.cli", "train", "--output_dir", str(folder), *BASE, *extra, *args.extra]
        code = subprocess.run(cmd, capture_output=True, text=True)
        status = "ok" if code.returncode == 0 else f"exit {code.returncode}: {code.stderr.strip()[-300:]}"
        print(f"{name}: {status}", flush=True)


def _values(folder: Path) -> dict[tuple[int, str], float]:
    values = {}
    for line in (folder / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        step = record.get("step", -1)
        for key, value in record.items():
            if isinstance(value, (int, float)) and not key.startswith(SKIP) and key != "step":
                values[(step, key)] = float(value)
    return values


def compare(args: argparse.Namespace) -> None:
    worst = 0.0
    for name in CONFIGS:
        a, b = _values(Path(args.before) / name), _values(Path(args.after) / name)
        shared = a.keys() & b.keys()
        diffs = {k: abs(a[k] - b[k]) for k in shared if a[k] != b[k] and not (a[k] != a[k] and b[k] != b[k])}
        only = sorted({k[1] for k in a.keys() ^ b.keys()})
        largest = max(diffs.values(), default=0.0)
        worst = max(worst, largest)
        print(f"{name:20s} {len(shared)} values compared, {len(diffs)} differ, largest difference {largest:.3g}"
              + (f"; metrics in one run only: {', '.join(only)}" if only else ""))
    print(f"largest difference over all configurations: {worst:.3g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--extra", nargs=argparse.REMAINDER, default=[],
                   help="options added to every configuration, e.g. --extra --skip_no_signal_steps false")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    args = parser.parse_args()
    run(args) if args.command == "run" else compare(args)


if __name__ == "__main__":
    main()
