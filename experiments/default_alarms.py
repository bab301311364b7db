"""Does the quickstart's default run trip its own alarms because it needs the fix they name, or because the alarm
misjudges a run that is learning? (issue 58)

The quickstart (seed 0, 20 steps) ends with `alarm/stagnation` on from step 10 and `alarm/entropy_collapse` from
step 13, and its summary prints "fix: epsilon_high=0.28 (clip-higher); entropy_coef=0.001".

DECLARED BEFORE ANY RUN (this file's first commit), not to be changed once runs exist:

Seeds 200-209: new, never used to tune or decide anything (0-20 and 100-119 were). Two arms, paired by seed, each
the quickstart preset exactly as shipped (20 steps, its learning rate, AVSPO with its guard, no-signal steps
skipped), with `--eval_num_samples 4 --eval_steps 20` so that held-out accuracy is measured as avg@4 (and greedy)
on the run's 48 held-out prompts before and after training only (sampled evaluation forks the random state: the
training draws are those of the preset):

    default   the preset
    fix       the preset with the fix the summary names, both parts: --epsilon_high 0.28 --entropy_coef 0.001

Per run: avg@4 and greedy accuracy before and after; which alarms fired (summary.json's `alarms`) and at which
step; the findings of `grposcope diagnose` on the run folder (name and severity).

The comparison: fix - default in final held-out avg@4, paired by seed (n = 10), mean with its 95% t interval.
The decision:
  - the fix "keeps accuracy" when that interval does not lie wholly below 0, and "quiets the alarm" when
    alarm/entropy_collapse fires on at most 2 of the 10 fix runs and on fewer fix runs than default runs;
  - both hold -> the fix becomes the preset's default and the README's figures are measured again;
  - otherwise -> the alarm fires on runs that are learning: its rule is recalibrated (an entropy fall counts as
    collapse only while the run shows no gain), checked to stay quiet on these default runs and to still fire on
    the collapse scenarios of `bench/diagnose_scenarios.py`.
Whatever the decision, an alarm that fires on the quickstart's own run must name an action that run has not taken.

    .venv/bin/python experiments/default_alarms.py run --root /work/runs/alarms
    .venv/bin/python experiments/default_alarms.py report --root /work/runs/alarms
    .venv/bin/python experiments/default_alarms.py archive --root /work/runs/alarms \
        --out experiments/results/default_alarms

Two runs at a time, one torch thread each; a run whose summary.json exists is skipped, so a killed sweep
continues; each run's model folder is deleted after its diagnosis (0.5 GB each).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from no_signal_seeds import _read, interval

SEEDS = tuple(range(200, 210))
ARMS = {
    "default": [],
    "fix": ["--epsilon_high", "0.28", "--entropy_coef", "0.001"],
}
STEPS = 20


def one_run(root: Path, arm: str, seed: int) -> str:
    out = root / f"{arm}-s{seed}"
    if (out / "summary.json").is_file():
        return f"{out.name}: done before"
    cmd = [sys.executable, "-m", "grposcope.cli", "train", "--preset", "quickstart", "--output_dir", str(out),
           "--seed", str(seed), "--torch_threads", "1", "--eval_num_samples", "4", "--eval_steps", str(STEPS),
           *ARMS[arm]]
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{out.name}.log", "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    diagnose = [sys.executable, "-m", "grposcope.cli", "diagnose", str(out), "--format", "json",
                "-o", str(root / f"{out.name}.findings.json")]
    subprocess.run(diagnose, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-m", "grposcope.cli", "diagnose", str(out)],
                   stdout=open(root / f"{out.name}.diagnose.txt", "w"), stderr=subprocess.STDOUT)
    shutil.rmtree(out / "model", ignore_errors=True)
    return f"{out.name}: exit {code}"


def run(args: argparse.Namespace) -> None:
    jobs = [(arm, seed) for seed in args.seeds for arm in ARMS]
    with ThreadPoolExecutor(args.workers) as pool:
        for line in pool.map(lambda job: one_run(Path(args.root), *job), jobs):
            print(line, flush=True)


def figures(root: Path, name: str) -> dict | None:
    """One finished run's figures: accuracies, alarms (step fired, steps on) and diagnose's findings."""
    text = _read(root / name, "summary.json")
    if text is None:
        return None
    summary = json.loads(text)
    findings_text = _read(root, f"{name}.findings.json") or _read(root / name, "findings.json")  # run / archive
    findings = [f for r in json.loads(findings_text)["runs"] for f in r["findings"]] if findings_text else []
    return {
        "avg4_before": summary["eval/avg@4 before"], "avg4_after": summary["eval/avg@4 after"],
        "greedy_before": summary["eval/accuracy before"], "greedy_after": summary["eval/accuracy after"],
        "reward_first": summary["reward_mean_first_10pct"], "reward_last": summary["reward_mean_last_10pct"],
        "entropy_final": summary["entropy_final"],
        "alarms": summary.get("alarms", {}),
        "findings": sorted(f"{f['severity'].upper()} {f['detector']}" for f in findings),
    }


def _alarm_cell(alarms: dict) -> str:
    """`stagnation (5, 11)`: each alarm that fired, its first step and the steps it was on."""
    return ", ".join(f"{name.removeprefix('alarm/')} ({a['first_step']}, {a['steps_on']})"
                     for name, a in sorted(alarms.items())) or "none"


def report(args: argparse.Namespace) -> None:
    root = Path(args.root)
    runs = {f"{a}-s{s}": f for a in ARMS for s in SEEDS if (f := figures(root, f"{a}-s{s}")) is not None}
    print("| seed | avg@4 before | default: after | fix: after | fix - default | default: alarms | fix: alarms |")
    print("|---|---|---|---|---|---|---|")
    diffs = []
    for s in SEEDS:
        d, f = runs.get(f"default-s{s}"), runs.get(f"fix-s{s}")
        if d is None or f is None:
            continue
        diffs.append(f["avg4_after"] - d["avg4_after"])
        print(f"| {s} | {d['avg4_before']:.3f} | {d['avg4_after']:.3f} | {f['avg4_after']:.3f} | {diffs[-1]:+.3f} | "
              f"{_alarm_cell(d['alarms'])} | {_alarm_cell(f['alarms'])} |")
    print()
    for arm in ARMS:
        done = [runs[f"{arm}-s{s}"] for s in SEEDS if f"{arm}-s{s}" in runs]
        if not done:
            continue
        change = [r["avg4_after"] - r["avg4_before"] for r in done]
        greedy = [r["greedy_after"] - r["greedy_before"] for r in done]
        fired = {name: sum(f"alarm/{name}" in r["alarms"] for r in done)
                 for name in ("stagnation", "entropy_collapse", "kl_drift", "no_signal")}
        warned = sum(any(x.startswith(("WARNING", "CRITICAL")) for x in r["findings"]) for r in done)
        print(f"{arm:8s} n={len(done)}  avg@4 change {interval(change)}  greedy change {interval(greedy)}  "
              f"lost avg@4: {sum(c < 0 for c in change)}  alarms fired (runs): {fired}  "
              f"diagnose WARNING/CRITICAL (runs): {warned}  entropy at the end "
              f"{statistics.fmean(r['entropy_final'] for r in done):.3f}")
    if diffs:
        print(f"\nfix - default, final avg@4, paired (n={len(diffs)}): {interval(diffs)}")
    if args.out:
        Path(args.out).write_text(json.dumps(runs, indent=1) + "\n")


def archive(args: argparse.Namespace) -> None:
    root, out = Path(args.root), Path(args.out)
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and (p / "summary.json").is_file()):
        target = out / folder.name
        target.mkdir(parents=True, exist_ok=True)
        for name in ("summary.json", "metrics.jsonl"):
            (target / f"{name}.gz").write_bytes(gzip.compress((folder / name).read_bytes(), mtime=0))
        for suffix, kept in ((".log", "console.log"), (".findings.json", "findings.json"),
                             (".diagnose.txt", "diagnose.txt")):
            source = root / f"{folder.name}{suffix}"
            if source.is_file():
                (target / f"{kept}.gz").write_bytes(gzip.compress(source.read_bytes(), mtime=0))
    print(f"archived {len(list(out.iterdir()))} runs in {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--root", required=True)
    r.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    r.add_argument("--workers", type=int, default=2)
    p = sub.add_parser("report")
    p.add_argument("--root", required=True)
    p.add_argument("--out")
    a = sub.add_parser("archive")
    a.add_argument("--root", required=True)
    a.add_argument("--out", required=True)
    args = parser.parse_args()
    {"run": run, "report": report, "archive": archive}[args.command](args)


if __name__ == "__main__":
    main()
