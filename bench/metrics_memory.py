"""Peak memory and wall time of `grposcope report` on a large metrics.jsonl (issue 40: a 1 GB file of 589,341
steps peaked at 6.5 GB RSS while the metrics reader held every line as a dict).

The file is written a line at a time from the keys of tests/fixtures/runs/quickstart's first line (about 40
metrics, each a float with full precision, as the trainer logs them), until it reaches --mb megabytes. Then
`grposcope report` runs on it in a child process; its peak RSS is the children's ru_maxrss (resource.getrusage
RUSAGE_CHILDREN), read after it ends. The parent never holds the file: Linux carries ru_maxrss over fork and
exec, so a large parent would lend its own peak to the measurement. Nothing is asserted.

    .venv/bin/python bench/metrics_memory.py [--mb 200] [--dir /tmp/grposcope-metrics-memory]
    PYTHONPATH=/tmp/before/src .venv/bin/python bench/metrics_memory.py   # the same against another checkout
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "runs" / "quickstart" / "metrics.jsonl"


def write_metrics(path: Path, megabytes: float, seed: int = 0) -> int:
    """A metrics.jsonl of about `megabytes` MB, a line per step; returns the steps written."""
    keys = [k for k in json.loads(FIXTURE.read_text().splitlines()[0]) if k not in ("step", "time")]
    rng, limit, step = random.Random(seed), int(megabytes * 1e6), 0
    with path.open("w", encoding="utf-8") as handle:
        while handle.tell() < limit:
            step += 1
            record = {"step": step, "time": 1.7e9 + step, **{k: rng.random() for k in keys}}
            handle.write(json.dumps(record) + "\n")
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=200.0, help="size of the generated metrics.jsonl, in MB")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/grposcope-metrics-memory"))
    args = parser.parse_args()
    run = args.dir / "run"
    run.mkdir(parents=True, exist_ok=True)
    metrics = run / "metrics.jsonl"
    if not metrics.is_file() or abs(metrics.stat().st_size - args.mb * 1e6) > 2e6:
        steps = write_metrics(metrics, args.mb)
    else:  # reused: the same file for a before and an after run
        steps = sum(1 for _ in metrics.open("rb"))
    out = args.dir / "report"
    shutil.rmtree(out, ignore_errors=True)
    source = os.environ.get("PYTHONPATH", str(ROOT / "src"))
    command = [sys.executable, "-c", "import sys; from grposcope.cli import app; sys.exit(app())",
               "report", str(run), "--out", str(out)]
    start = time.perf_counter()
    done = subprocess.run(command, env={**os.environ, "PYTHONPATH": source}, capture_output=True, text=True)
    wall = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
    print(f"source {source}: metrics.jsonl {metrics.stat().st_size / 1e6:.0f} MB, {steps:,} steps; "
          f"grposcope report exit {done.returncode}, wall {wall:.1f} s, peak RSS {peak_mb:,.0f} MB")


if __name__ == "__main__":
    main()
