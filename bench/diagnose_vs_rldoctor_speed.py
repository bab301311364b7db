"""`grposcope diagnose` against `rl-doctor diagnose` (rldoctor 0.2.0), each through its command line as a user or a CI
job runs it, on the same files: a 200-step and a 5,000-step trainer_state.json, a 200-step TensorBoard folder and a
200-step verl file-logger JSONL (tests/scenario_runs.py's healthy_steady run: about 25 metrics a step, an
evaluation every 10 steps). Each command runs `--repeats` times in a fresh process; the table gives the median
wall time and the largest peak RSS (os.wait4's ru_maxrss of that process). Nothing is asserted.

The files are written by a child process first, so that no measured process inherits a large parent's peak.

    python3 -m venv /work/scratch/rldoctor-venv
    /work/scratch/rldoctor-venv/bin/pip install 'rldoctor[tensorboard]==0.2.0'
    .venv/bin/python bench/diagnose_vs_rldoctor_speed.py --rldoctor /work/scratch/rldoctor-venv/bin/rl-doctor \\
        | tee bench/results/diagnose_vs_rldoctor_speed.txt
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WRITER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from scenario_runs import make, write
out = {}
for label, steps, fmt in (("trainer_state.json, 200 steps", 200, "trainer_state"),
                          ("trainer_state.json, 5,000 steps", 5000, "trainer_state"),
                          ("TensorBoard folder, 200 steps", 200, "tensorboard"),
                          ("verl file-logger JSONL, 200 steps", 200, "verl")):
    path = write(make("healthy_steady", 0, steps=steps), f"{sys.argv[2]}/{fmt}-{steps}", fmt)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() and fmt != "tensorboard" else [path]
    out[label] = str(files[0])  # the file itself (rldoctor takes a file, or a TensorBoard folder)
print(json.dumps(out))
"""


def timed(command: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MiB, exit code) of one run of `command`, its output discarded."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/tmp")
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rldoctor", required=True, help="rldoctor 0.2.0's rl-doctor command (a scratch venv's)")
    parser.add_argument("--grposcope", default=str(Path(sys.executable).parent / "grposcope"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("/tmp/grposcope-vs-rldoctor-speed"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    written = subprocess.run([sys.executable, "-c", WRITER, str(ROOT / "tests"), str(args.out)], check=True,
                             capture_output=True, text=True)
    files = json.loads(written.stdout.strip().splitlines()[-1])
    tools = {"grposcope": [args.grposcope, "diagnose"], "rldoctor": [args.rldoctor, "diagnose"]}
    version = subprocess.run([args.grposcope, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{version} and rldoctor 0.2.0, {args.repeats} runs each, median wall time, largest peak RSS; "
          f"{os.cpu_count()} CPUs\n")
    print("| file | grposcope: wall | grposcope: peak RSS | rldoctor: wall | rldoctor: peak RSS | wall, grposcope / "
          "rldoctor |")
    print("|---|---|---|---|---|---|")
    for label, path in files.items():
        row, walls = [label], {}
        for tool, command in tools.items():
            runs = [timed([*command, path]) for _ in range(args.repeats)]
            codes = {code for _, _, code in runs}
            walls[tool] = statistics.median(w for w, _, _ in runs)
            row += [f"{walls[tool]:.2f} s" + (f" (exit {sorted(codes)})" if codes - {0, 1} else ""),
                    f"{max(m for _, m, _ in runs):.0f} MiB"]
        row.append(f"{walls['grposcope'] / walls['rldoctor']:.2f}x")
        print("| " + " | ".join(row) + " |")
    startup = [timed([args.grposcope, "--version"]) for _ in range(args.repeats)]
    print(f"\ngrposcope --version: {statistics.median(w for w, _, _ in startup):.2f} s, "
          f"{max(m for _, m, _ in startup):.0f} MiB")


if __name__ == "__main__":
    main()
