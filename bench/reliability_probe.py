"""Re-runs issue 56's probe through the installed command line, case by case, and checks what every case must
hold (docs/reliability.md, rows 56.x): it ends within its time limit (no hang), prints no traceback, an error is
one line with exit 2, no file it was given changed (no data lost), no file it wrote holds a raw control
character, and no planted command ran. The Python-level cases (the callback, links, a hostile state file) are
tests: tests/test_reliability_round5*.py.

    python bench/reliability_probe.py [--grposcope .venv/bin/grposcope] \
        [--out bench/results/reliability_probe_round5.txt]

Each case runs under an 8 GB address-space limit (`ulimit -v`), so an allocation that escapes a bound
fails at once rather than swapping the machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "tests" / "fixtures" / "runs" / "quickstart"
HOSTILE = "run\x1b]0;pwned\x07\x1b[2J<b>x<i>"
LIMIT_S = 180
MEMORY_KB = 8_000_000


def plant(d: Path) -> None:
    """The inputs of every case, in one scratch folder."""
    shutil.copytree(QUICKSTART, d / "q")
    shutil.copytree(QUICKSTART, d / HOSTILE)
    (d / "notes.txt").write_text("my notes\n")
    (d / "evil.yaml").write_text('use_avspo: false\nadvantage_estimator: "os:system"\n'
                                 'advantage_estimator_kwargs: {command: "touch PWNED"}\n')
    (d / "probe.jsonl").write_text('{"prompt": "1+1?", "k": 4, "successes": 2}\n'
                                   '{"prompt": "2+2?", "k": 4, "successes": 1}\n')
    (d / "answers.jsonl").write_text('{"completion": "\\\\boxed{3}", "answer": "3"}\n')
    (d / "arr.jsonl").write_text('{"completion": "\\\\boxed{3}", "answer": [3]}\n'
                                 '{"completion": "\\\\boxed{4}", "answer": "4"}\n')
    lines = "".join(json.dumps({"step": s, "reward": 0.5}) + "\n" for s in range(1, 6))
    (d / "huge.jsonl").write_text(lines + '{"step": 6, "reward": ' + str(10**400) + "}\n")
    (d / "deep").mkdir()
    (d / "deep" / "metrics.jsonl").write_text("[" * 150_000 + "]" * 150_000 + "\n")
    (d / "rand.csv").write_bytes(os.urandom(3000))
    (d / "empty.jsonl").write_bytes(b"")
    (d / "u16.jsonl").write_bytes('{"step": 1, "reward": 0.5}\n{"step": 2, "reward": 0.5}\n'.encode("utf-16"))
    (d / "semi.csv").write_text("step;reward;reward_std\n1;0,5;0,1\n2;0,5;0,1\n3;0,5;0,1\n")
    (d / "nostep.csv").write_text("reward,reward_std\n0.5,0.1\n")
    (d / "header.csv").write_text("step,reward,reward_std\n")
    (d / "list.jsonl").write_text(lines + '{"step": 6, "reward": [0.5, 1.0]}\n')
    os.symlink("loopb", d / "loopa")
    os.symlink("loopa", d / "loopb")
    (d / "many").mkdir()
    for i in range(3000):
        (d / "many" / f"m{i}.csv").write_text("step,reward\n1,0.5\n")
    (d / "tb").mkdir()
    (d / "tb" / "events.out.tfevents.1.host").write_bytes(b"")
    for name in ("cfgdir", "dsdir", "simout"):
        (d / name).mkdir()


# (case, arguments, the exit codes it may end with)
CASES = [
    ("56.1 plug-in path runs a function", ["train", "--config", "evil.yaml", "--output_dir", "ev"], {2}),
    ("56.1 sweep --estimators os:system", ["sweep", "--estimators", "os:system", "--output", "sw1", "--backend",
                                           "simulate", "--levels=0"], {2}),
    ("56.3 diagnose --json existing file", ["diagnose", "q", "--json", "notes.txt"], {2}),
    ("56.3 diagnose --json its own log", ["diagnose", "q", "--json", "q/metrics.jsonl", "--overwrite"], {2}),
    ("56.3 forecast --json its probe", ["forecast", "probe.jsonl", "--json", "probe.jsonl", "--overwrite"], {2}),
    ("56.3 audit-rewards --json its input", ["audit-rewards", "answers.jsonl", "--json", "answers.jsonl",
                                             "--overwrite"], {2}),
    ("56.4 report of a hostile run name", ["report", HOSTILE, "-o", "r4"], {0}),
    ("56.5 knapsack_max_groups 1e9", ["train", "--sampler", "knapsack", "--knapsack_max_groups", "1000000000",
                                      "--output_dir", "k1"], {2}),
    ("56.5 knapsack sample_budget 1e12", ["train", "--sampler", "knapsack", "--sample_budget", "1000000000000",
                                          "--output_dir", "k2"], {2}),
    ("56.5 eval_num_samples 1e9", ["train", "--eval_num_samples", "1000000000", "--output_dir", "k3"], {2}),
    ("56.5 eval --num_samples 1e9", ["eval", "--model", "embedded:smollm2-135m-instruct", "--dataset",
                                     "arithmetic", "--num_samples", "1000000000", "--output", "e5.json"], {2}),
    ("56.5 simulate knapsack_max_groups 1e8", ["simulate", "--sampler", "knapsack", "--sampler_options",
                                               "knapsack_max_groups=100000000", "--output", "s1.json"], {2}),
    ("56.5 simulate knapsack budget 1e12", ["simulate", "--sampler", "knapsack", "--sampler_options",
                                            "sample_budget=1000000000000", "--output", "s2.json"], {2}),
    ("56.5 greso_max_candidates 1e18", ["train", "--sampler", "greso", "--greso_max_candidates", "1e18",
                                        "--output_dir", "k4"], {2}),
    ("56.5 budget_candidates 1e18", ["simulate", "--sampler", "budgeted", "--sampler_options",
                                     "budget_candidates=1e18", "--output", "s3.json"], {2}),
    ("56.6 a 10**400 value", ["diagnose", "huge.jsonl"], {0, 1}),
    ("56.6 a 10**400 value, report", ["report", "huge.jsonl", "-o", "r6"], {0}),
    ("56.7 JSON nested 150,000 deep", ["diagnose", "deep"], {2}),
    ("56.8 random bytes .csv", ["diagnose", "rand.csv"], {2}),
    ("56.10 --kl_bound 0", ["diagnose", "q", "--kl_bound", "0"], {2}),
    ("56.10 --num_generations 1e12", ["diagnose", "q", "--num_generations", "1000000000000"], {2}),
    ("56.10 --only ,,", ["diagnose", "q", "--only", ",,"], {2}),
    ("56.10 --gpus 1e20", ["diagnose", "q", "--gpus", "100000000000000000000"], {2}),
    ("56.10 --gpu_hour_cost inf", ["diagnose", "q", "--gpus", "8", "--gpu_hour_cost", "inf"], {2}),
    ("56.12 a list in a column", ["diagnose", "list.jsonl"], {0, 1}),
    ("56.13 a JSON answer [3]", ["audit-rewards", "arr.jsonl"], {0, 1}),
    ("56.14 empty file", ["diagnose", "empty.jsonl"], {2}),
    ("56.14 UTF-16", ["diagnose", "u16.jsonl"], {2}),
    ("56.14 ;-separated CSV", ["diagnose", "semi.csv"], {0, 1}),
    ("56.14 no step column", ["diagnose", "nostep.csv"], {2}),
    ("56.14 header, no rows", ["diagnose", "header.csv"], {2}),
    ("56.14 link loop", ["diagnose", "loopa"], {2}),
    ("56.14 link loop, report", ["report", "loopa", "-o", "r14"], {2}),
    ("56.14 3,000 files", ["diagnose", "many"], {0, 1}),
    ("56.14 0-byte TensorBoard", ["diagnose", "tb"], {2}),
    ("56.14 config is a folder", ["train", "--config", "cfgdir"], {2}),
    ("56.14 dataset is a folder", ["train", "--dataset_name", "dsdir", "--output_dir", "k5"], {2}),
    ("56.14 simulate --output folder", ["simulate", "--steps", "5", "--output", "simout", "--overwrite"], {2}),
    ("56.14 sweep's default level", ["sweep", "--output", "sw2", "--backend", "simulate"], {2}),
]


def digest(d: Path) -> dict[str, str]:
    out = {}
    for root, _, files in os.walk(d):
        for name in files:
            path = Path(root) / name
            if path.is_symlink():
                continue
            out[str(path.relative_to(d))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def run_case(grposcope: str, d: Path, args: list[str], codes: set[int]) -> dict:
    before = digest(d)
    env = {**os.environ, "COLUMNS": "120", "CI": "true"}
    command = f"ulimit -v {MEMORY_KB}; exec \"$0\" \"$@\""
    start = time.perf_counter()
    try:
        done = subprocess.run(["bash", "-c", command, grposcope, *args], cwd=d, env=env, capture_output=True,
                              text=True, errors="replace", timeout=LIMIT_S)
        code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired:
        code, output = None, ""
    seconds = time.perf_counter() - start
    after = digest(d)
    changed = sorted(k for k in before if after.get(k) != before[k])
    new = sorted(k for k in after if k not in before)
    texts = [k for k in new if not k.endswith(".png")]  # a PNG's bytes hold any value
    raw = [k for k in texts if any(c in (d / k).read_bytes() for c in (b"\x1b", b"\x07"))]
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    problems = []
    if code is None:
        problems.append(f"no end within {LIMIT_S} s")
    elif code not in codes:
        problems.append(f"exit {code}")
    if "Traceback" in output:
        problems.append("traceback")
    if code == 2 and len(errors) != 1:
        problems.append(f"{len(errors)} error lines")
    if changed:
        problems.append(f"changed {changed[:3]}")
    if raw:
        problems.append(f"raw escapes in {raw[:3]}")
    if "missing from font" in output:  # a control character drawn into a plot
        problems.append("a control character reached a plot")
    if (d / "PWNED").exists():
        problems.append("a planted command ran")
    last = (errors[-1] if errors else (output.strip().splitlines() or [""])[-1])[:150]
    return {"code": code, "seconds": round(seconds, 1), "problems": problems, "said": last}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grposcope", default=str(ROOT / ".venv" / "bin" / "grposcope"))
    parser.add_argument("--out", default=None, help="also write the table here")
    args = parser.parse_args()
    lines, bad = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        plant(d)
        for case, argv, codes in CASES:
            result = run_case(args.grposcope, d, argv, codes)
            bad += bool(result["problems"])
            verdict = "ok" if not result["problems"] else "FAIL " + "; ".join(result["problems"])
            line = f"{case:<40} exit {result['code']!s:<4} {result['seconds']:>6.1f} s  {verdict}  | {result['said']}"
            print(line, flush=True)
            lines.append(line)
    summary = f"{len(CASES) - bad} of {len(CASES)} cases hold: no hang, no traceback, one error line, no data lost"
    print(summary)
    if args.out:
        Path(args.out).write_text("\n".join(lines + [summary]) + "\n", encoding="utf-8")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
