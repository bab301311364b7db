"""How long grposcope's `load_run` + `diagnose` take on a long log: a 100,000-step healthy run of
tests/scenario_runs.py (healthy_steady's curves, about 25 metrics a step, an evaluation every 10 steps) written as a
generic JSONL and as a trainer_state.json, each read and diagnosed in a fresh Python process, three times; the
median wall time of each part and the peak RSS (resource.getrusage's ru_maxrss of that process) are printed.
Nothing is asserted. The run is generated and written in a child process too: Linux carries ru_maxrss over fork
and exec, so a parent holding the 100,000-step run would lend its own peak to every measurement.

    .venv/bin/python bench/diagnose_speed.py [--steps 100000] [--repeats 3] [--out /tmp/grposcope-speed]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

WRITER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from scenario_runs import make, write
start = time.perf_counter()
run = make(sys.argv[2], 0, steps=int(sys.argv[3]))
made = time.perf_counter() - start
paths = {fmt: str(write(run, sys.argv[4] + "/" + fmt, fmt)) for fmt in ("jsonl", "trainer_state")}
print(json.dumps({"paths": paths, "made_s": made, "written_s": time.perf_counter() - start,
                  "train": len(run.train_keys()), "eval": len(run.eval_keys())}))
"""
CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
from grposcope.diagnose import diagnose
from grposcope.runs import load_run
t1 = time.perf_counter()
rss_imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
run = load_run(sys.argv[1])
t2 = time.perf_counter()
d = diagnose(run)
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "diagnose_s": t3 - t2, "steps": len(run.steps),
                  "series": len(run.series), "findings": [[f.detector, f.severity] for f in d.findings],
                  "rss_imports_mib": rss_imports / 1024,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(path: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"load_run + diagnose failed on {path}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scenario", default="healthy_steady")
    parser.add_argument("--out", type=Path, default=Path("/tmp/grposcope-speed"))
    args = parser.parse_args()
    done = subprocess.run([sys.executable, "-c", WRITER, str(ROOT / "tests"), args.scenario, str(args.steps),
                           str(args.out)], capture_output=True, text=True, check=True)
    w = json.loads(done.stdout.strip().splitlines()[-1])
    paths = {fmt: Path(p) for fmt, p in w["paths"].items()}
    print(f"{args.scenario}, {args.steps:,} steps, {w['train']} train metrics a step + {w['eval']} eval metrics "
          f"every 10 steps (made and written in {w['written_s']:.1f} s, of which {w['made_s']:.1f} s generating)")
    for fmt, path in paths.items():
        file = path / "trainer_state.json" if path.is_dir() else path
        runs = [measure(path) for _ in range(args.repeats)]
        med = {k: statistics.median(r[k] for r in runs) for k in ("load_s", "diagnose_s", "import_s")}
        total = [r["load_s"] + r["diagnose_s"] for r in runs]
        print(f"{fmt} ({file.stat().st_size / 2**20:.1f} MiB, {runs[0]['steps']:,} steps, {runs[0]['series']} "
              f"series): load_run {med['load_s']:.2f} s + diagnose {med['diagnose_s']:.2f} s = median "
              f"{statistics.median(total):.2f} s (min {min(total):.2f}, max {max(total):.2f}, {args.repeats} runs; "
              f"imports {med['import_s']:.2f} s apart); peak RSS {max(r['rss_mib'] for r in runs):.0f} MiB "
              f"({max(r['rss_imports_mib'] for r in runs):.0f} MiB after the imports); findings "
              f"{runs[0]['findings'] or 'none'}")


if __name__ == "__main__":
    main()
