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
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import no_signal_seeds
from no_signal_seeds import _read, interval

SEEDS = tuple(range(200, 210))
ARMS = {
    "default": [],
    "fix": ["--epsilon_high", "0.28", "--entropy_coef", "0.001"],
}
STEPS = 20
# After the decision (not one of the declared arms): the preset exactly as the README runs it (greedy held-out
# accuracy before training and after steps 10 and 20, no sampled evaluation), on the same seeds and on the
# quickstart's own seed 0, with the recalibrated entropy rule: what a user's first run now reports.
SHIPPED = {"shipped": []}


def one_run(root: Path, arm: str, seed: int) -> str:
    out = root / f"{arm}-s{seed}"
    if (out / "summary.json").is_file():
        return f"{out.name}: done before"
    evaluation = [] if arm in SHIPPED else ["--eval_num_samples", "4", "--eval_steps", str(STEPS)]
    cmd = [sys.executable, "-m", "grposcope.cli", "train", "--preset", "quickstart", "--output_dir", str(out),
           "--seed", str(seed), "--torch_threads", "1", *evaluation, *{**ARMS, **SHIPPED}[arm]]
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
    jobs = [(arm, seed) for seed in args.seeds for arm in args.arms]
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


def shipped(args: argparse.Namespace) -> None:
    """The runs as shipped: greedy held-out accuracy before, at step 10 and after; the alarms the run itself
    raised (its summary.json) and `grposcope diagnose`'s warnings and critical findings on its folder."""
    root = Path(args.root)
    print("| seed | greedy before | step 10 | after | alarms (first step, steps on) | diagnose: warning or critical |")
    print("|---|---|---|---|---|---|")
    for seed in (0, *SEEDS):
        folder = root / f"shipped-s{seed}"
        text = _read(folder, "summary.json")
        if text is None:
            continue
        summary = json.loads(text)
        rows = [json.loads(line) for line in _read(folder, "metrics.jsonl").splitlines() if line.strip()]
        mid = next((r["eval/accuracy"] for r in rows if r.get("step") == 10 and "eval/accuracy" in r), math.nan)
        findings_text = _read(root, f"{folder.name}.findings.json") or _read(folder, "findings.json")
        found = [f"{f['severity']} {f['detector']}" for r in json.loads(findings_text)["runs"] for f in r["findings"]
                 if f["severity"] in ("warning", "critical")] if findings_text else []
        print(f"| {seed} | {summary['eval/accuracy before']:.3f} | {mid:.3f} | {summary['eval/accuracy after']:.3f} | "
              f"{_alarm_cell(summary.get('alarms', {}))} | {', '.join(found) or 'none'} |")


def entropy_alarm(run, gain: float) -> list[int]:
    """The steps alarm/entropy_collapse is on when `run`'s log is replayed through the alarms' rules (as
    `grposcope diagnose` replays it), with the entropy rule's `entropy_gain` set to `gain` (inf: the rule before
    issue 58, which never asks whether the run still learns)."""
    from grposcope.core.alarms import AlarmRules, alarm_window, replay
    from grposcope.runs import catalogue as c

    window = alarm_window(len(run.steps))
    rules = AlarmRules(stagnation_steps=window, entropy_steps=window, entropy_gain=gain)
    nan = [math.nan] * len(run.steps)
    return replay(run.steps, nan, run.values(c.ENTROPY), nan, nan, rules, reward=run.values(c.REWARD),
                  held_out=zip(*run.accuracy_points()))["entropy_collapse"]


def recalibrated(args: argparse.Namespace) -> None:
    """The entropy rule before and after its recalibration, replayed on every run here and on every scenario of
    tests/scenarios.py (seeds 0-9, written as a JSONL log): the first step it is on, '-' when never."""
    from grposcope.core.alarms import AlarmRules
    from grposcope.runs import load_run

    new = AlarmRules().entropy_gain
    first = lambda on: str(on[0]) if on else "-"  # noqa: E731
    root = Path(args.root)
    print("| run | entropy_collapse before (first step) | after |\n|---|---|---|")
    counts = {arm: [0, 0, 0] for arm in ARMS}
    for arm in ARMS:
        for seed in SEEDS:
            folder = root / f"{arm}-s{seed}"
            if _read(folder, "summary.json") is None:  # not finished
                continue
            run = load_run(folder if (folder / "metrics.jsonl").is_file() else _unzipped(folder))
            before, after = entropy_alarm(run, math.inf), entropy_alarm(run, new)
            counts[arm] = [counts[arm][0] + 1, counts[arm][1] + bool(before), counts[arm][2] + bool(after)]
            print(f"| {folder.name} | {first(before)} | {first(after)} |")
    for arm, (n, before, after) in counts.items():
        print(f"{arm}: on in {before} of {n} runs before, {after} of {n} after")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from scenarios import SCENARIOS, make, write

    print("\n| scenario | runs on before | after | first step before (median) | after (median) |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in SCENARIOS:
            before, after = [], []
            for seed in range(10):
                run = load_run(write(make(name, seed), Path(tmp) / f"{name}-{seed}", "jsonl"))
                before.append(entropy_alarm(run, math.inf))
                after.append(entropy_alarm(run, new))
            steps = lambda runs: statistics.median(r[0] for r in runs if r) if any(runs) else "-"  # noqa: E731
            print(f"| {name} | {sum(map(bool, before))} of 10 | {sum(map(bool, after))} of 10 | {steps(before)} | "
                  f"{steps(after)} |")


def _unzipped(folder: Path) -> Path:
    """An archived run's metrics.jsonl and summary.json, unzipped into a temporary folder."""
    out = Path(tempfile.mkdtemp()) / folder.name
    out.mkdir()
    for name in ("metrics.jsonl", "summary.json"):
        (out / name).write_text(_read(folder, name))
    return out


def archive(args: argparse.Namespace) -> None:
    """no_signal_seeds.archive, with the run's diagnosis kept beside its console log."""
    no_signal_seeds.archive(args, beside=((".log", "console.log"), (".findings.json", "findings.json"),
                                          (".diagnose.txt", "diagnose.txt")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--root", required=True)
    r.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--arms", nargs="+", default=list(ARMS), choices=[*ARMS, *SHIPPED])
    p = sub.add_parser("report")
    p.add_argument("--root", required=True)
    p.add_argument("--out")
    s = sub.add_parser("shipped")
    s.add_argument("--root", required=True)
    q = sub.add_parser("recalibrated")
    q.add_argument("--root", required=True)
    a = sub.add_parser("archive")
    a.add_argument("--root", required=True)
    a.add_argument("--out", required=True)
    args = parser.parse_args()
    {"run": run, "report": report, "archive": archive, "recalibrated": recalibrated,
     "shipped": shipped}[args.command](args)


if __name__ == "__main__":
    main()
