"""Peak memory and wall time of `grposcope diagnose` and `grposcope report` on a 1 GB generic JSONL of step metrics
(a hand-written loop's log: 25 TRL-named metrics a step, random values, about 1.3 million steps), each in a fresh
process (os.wait4's ru_maxrss). Nothing is asserted; issue 55's goal is below 1 GB for both.

    .venv/bin/python bench/diagnose_big_log.py [--bytes 1000000000] | tee bench/results/diagnose_big_log.txt
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

KEYS = ("reward", "reward_std", "frac_reward_zero_std", "entropy", "kl", "grad_norm", "loss", "learning_rate",
        "completions/mean_length", "completions/clipped_ratio", "clip_ratio/region_mean", "clip_ratio/low_mean",
        "clip_ratio/high_mean", "rewards/accuracy/mean", "rewards/format/mean", "num_tokens", "step_time",
        "completions/max_length", "completions/min_length", "epoch", "rewards/accuracy/std", "rewards/format/std",
        "completions/mean_terminated_length", "clip_ratio/high_max", "clip_ratio/low_min")


def write(path: Path, size: int) -> int:
    rng = random.Random(0)
    written, step = 0, 0
    with path.open("w") as handle:
        while written < size:
            step += 1
            line = json.dumps({"step": step, **{k: round(rng.random(), 6) for k in KEYS}}) + "\n"
            handle.write(line)
            written += len(line)
    return step


def timed(command: list[str]) -> tuple[float, float, int]:
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    return time.perf_counter() - start, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bytes", type=int, default=1_000_000_000)
    parser.add_argument("--grposcope", default=str(Path(sys.executable).parent / "grposcope"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/grposcope-big-log"))
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    log = args.out / "train_log.jsonl"
    steps = write(log, args.bytes)
    print(f"{log}: {log.stat().st_size / 2**20:,.0f} MiB, {steps:,} steps, {len(KEYS)} metrics a step\n")
    print("| command | wall | peak RSS | exit |")
    print("|---|---|---|---|")
    for label, command in (("grposcope diagnose", [args.grposcope, "diagnose", str(log)]),
                           ("grposcope report", [args.grposcope, "report", str(log), "-o", str(args.out / "r")])):
        wall, rss, code = timed(command)
        print(f"| {label} | {wall:.1f} s | {rss:,.0f} MiB | {code} |")
    shutil.rmtree(args.out, ignore_errors=True)


if __name__ == "__main__":
    main()
