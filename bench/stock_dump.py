"""How `grposcope report` copes with a large verl rollout dump: time and peak memory on a generated dump.

Writes a dump in verl 0.9.1's format (`{step}.jsonl`, one line per rollout: input, output, gts, score, step,
and an extra reward field, as `RayPPOTrainer._write_generations` writes it; tests/verl checks the reader
against that writer itself), then reports on it in a child process and reads the child's peak resident
memory (`ru_maxrss`). A second child only imports the report's modules: the difference is what reading the
dump cost. Every figure printed is measured on this machine.

    .venv/bin/python bench/stock_dump.py --rows 200000 --out /tmp/dump200k
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import resource, sys, time
t0 = time.perf_counter()
from grposcope.runs import load_run
from grposcope.reports.figures import run_figures
if sys.argv[1] != "import-only":
    run = load_run(sys.argv[1])
    figures = run_figures(run)
    print("steps", len(run.steps))
    print("acr", round(figures.acr_mean, 4), "(mean over steps)")
print("seconds", round(time.perf_counter() - t0, 2))
print("peak_mib", round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1))
"""


def write_dump(out: Path, rows: int, group: int, per_step: int, output_chars: int, seed: int) -> int:
    """A dump of `rows` rollouts, `per_step` a step in groups of `group`, shuffled within each step as
    verl's balance_batch leaves them; returns its size in bytes."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    words = "the of and to in is that for it as with was on be by this are or at from".split()
    step, written = 0, 0
    while written < rows:
        step += 1
        lines = []
        for p in range(min(per_step, rows - written) // group):
            level = rng.random()  # the prompt's pass rate
            prompt = f"Problem {step}-{p}: " + " ".join(rng.choices(words, k=60))
            for _ in range(group):
                right = rng.random() < level
                text = " ".join(rng.choices(words, k=output_chars // 4))[:output_chars]
                lines.append(json.dumps({"input": prompt, "output": text, "gts": str(p), "score": float(right),
                                         "step": step, "acc": right}, ensure_ascii=False))
        rng.shuffle(lines)
        (out / f"{step}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        written += len(lines)
    return sum(p.stat().st_size for p in out.glob("*.jsonl"))


def child(target: str) -> dict[str, str]:
    done = subprocess.run([sys.executable, "-c", CHILD, target], check=True, capture_output=True, text=True)
    return dict(line.split(" ", 1) for line in done.stdout.strip().splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--per_step", type=int, default=2048)
    parser.add_argument("--output_chars", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    t0 = time.perf_counter()
    size = write_dump(args.out, args.rows, args.group, args.per_step, args.output_chars, args.seed)
    print(f"wrote {args.rows:,} rollouts ({size / 2**20:,.0f} MiB) to {args.out} in {time.perf_counter() - t0:.1f} s")
    base = child("import-only")
    read = child(str(args.out))
    print(f"import only: {base['seconds']} s, peak {base['peak_mib']} MiB")
    print(f"reading the dump ({read['steps']} steps, collapse/acr {read['acr']}): {read['seconds']} s, peak "
          f"{read['peak_mib']} MiB (+{float(read['peak_mib']) - float(base['peak_mib']):.1f} MiB over the import)")
    print(f"this process's peak (the writer): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
