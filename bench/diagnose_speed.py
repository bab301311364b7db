"""How long `grposcope diagnose` takes on a long log: 100,000 logged steps of a healthy-shaped run (tests/scenarios.py,
about 20 metrics a step), as a JSONL of step metrics and as a trainer_state.json, read and diagnosed in a fresh
process each time (the import of grposcope, numpy and scipy included: what a user waits for).

    .venv/bin/python bench/diagnose_speed.py --steps 100000 --repeats 3

Prints, per format, the file size, the median wall time of `grposcope diagnose FILE` (min-max) and the peak RSS of
that process. Nothing is asserted: tests assert no wall-clock times.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from scenarios import base, ramp  # noqa: E402


def write_logs(folder: Path, steps: int) -> dict[str, Path]:
    series, evals = base(np.random.default_rng(0), steps, ramp(steps, 0.3, 0.6))
    names = list(series)
    folder.mkdir(parents=True, exist_ok=True)
    jsonl, history = folder / "metrics_export.jsonl", []
    with jsonl.open("w") as out:
        for i in range(steps):
            row = {"step": i + 1, **{k: float(series[k][i]) for k in names}}
            if i + 1 in evals:
                row["eval_reward"] = evals[i + 1]
            out.write(json.dumps(row) + "\n")
            history.append(row)
    state = folder / "trainer_state.json"
    state.write_text(json.dumps({"log_history": history, "global_step": steps, "max_steps": steps}))
    return {"jsonl": jsonl, "trainer_state": state}


def time_once(path: Path) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of `grposcope diagnose PATH` in a child process."""
    start = time.perf_counter()
    subprocess.run([str(ROOT / ".venv" / "bin" / "grposcope"), "diagnose", str(path)], check=True,
                   capture_output=True)
    seconds = time.perf_counter() - start
    return seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("/tmp/grposcope-diagnose-speed"))
    args = parser.parse_args()
    logs = write_logs(args.out, args.steps)
    for fmt, path in logs.items():
        runs = [time_once(path) for _ in range(args.repeats)]
        times = [t for t, _ in runs]
        print(f"{fmt}: {args.steps:,} steps, {path.stat().st_size / 2**20:.1f} MiB; grposcope diagnose: median "
              f"{statistics.median(times):.2f} s (min {min(times):.2f}, max {max(times):.2f}) over {args.repeats} "
              f"runs; peak RSS {max(r for _, r in runs):.0f} MiB")


if __name__ == "__main__":
    main()
