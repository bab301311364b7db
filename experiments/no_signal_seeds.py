"""Does skipping the optimizer step on no-signal steps keep the quickstart from destroying the model?

The comparison declared before running (issue 25): on seeds 5-14 (0-4 tuned AVSPO's all-wrong guard and are
kept out), the quickstart preset at its learning rate (2e-5) for 30 steps, four arms paired by seed:

    avspo          the preset (AVSPO with the all-wrong guard), no-signal steps skipped (the new default)
    avspo_noskip   the preset with --skip_no_signal_steps false (every step moves AdamW, as before)
    grpo           --use_avspo false, no-signal steps skipped
    grpo_noskip    --use_avspo false --skip_no_signal_steps false

Per run: greedy held-out accuracy on the run's own 48-prompt split before and after (and per level), and the
steps skipped for having no signal. The held-out evaluation runs at the end only (`--eval_steps 30`):
greedy evaluation draws no random numbers, so the training steps are those of the preset's schedule.

    .venv/bin/python experiments/no_signal_seeds.py run --root /work/runs/nosignal --seeds 5 6 7 8 9 10 11 12 13 14
    .venv/bin/python experiments/no_signal_seeds.py report --root /work/runs/nosignal
    .venv/bin/python experiments/no_signal_seeds.py archive --root /work/runs/nosignal \
        --out experiments/results/no_signal

`archive` keeps, gzipped, what the table reads of each run (summary.json, metrics.jsonl) and its console log;
`report --root` reads an archive too.

Runs whose summary.json exists are skipped, so an interrupted sweep continues; each run's model folder is
deleted afterwards (metrics.jsonl, completions.jsonl and summary.json stay). Two runs at a time, one torch
thread each.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import shutil
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ARMS = {
    "avspo": [],
    "avspo_noskip": ["--skip_no_signal_steps", "false"],
    "grpo": ["--use_avspo", "false"],
    "grpo_noskip": ["--use_avspo", "false", "--skip_no_signal_steps", "false"],
}
LEVELS = ("easy", "medium", "hard")


def one_run(root: Path, arm: str, seed: int, steps: int, extra: list[str]) -> str:
    out = root / f"{arm}-s{seed}"
    if (out / "summary.json").is_file():
        return f"{out.name}: done before"
    cmd = [sys.executable, "-m", "grposcope.cli", "train", "--preset", "quickstart", "--output_dir", str(out),
           "--max_steps", str(steps), "--eval_steps", str(steps), "--seed", str(seed), "--torch_threads", "1",
           *ARMS[arm], *extra]
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{out.name}.log", "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    shutil.rmtree(out / "model", ignore_errors=True)  # 0.5 GB each
    return f"{out.name}: exit {code}"


def run(args: argparse.Namespace) -> None:
    jobs = [(arm, seed) for seed in args.seeds for arm in args.arms]
    with ThreadPoolExecutor(args.workers) as pool:
        for line in pool.map(lambda job: one_run(Path(args.root), *job, args.steps, args.extra), jobs):
            print(line, flush=True)


def _read(folder: Path, name: str) -> str | None:
    """A run file's text, from the run folder or its gzipped copy in an archive."""
    if (folder / name).is_file():
        return (folder / name).read_text()
    if (folder / f"{name}.gz").is_file():
        return gzip.decompress((folder / f"{name}.gz").read_bytes()).decode()
    return None


def figures(folder: Path) -> dict[str, float] | None:
    """One finished run's figures, from its summary.json and metrics.jsonl."""
    summary_text = _read(folder, "summary.json")
    if summary_text is None:
        return None
    summary = json.loads(summary_text)
    steps = [json.loads(line) for line in _read(folder, "metrics.jsonl").splitlines() if line.strip()]
    steps = [s for s in steps if "reward/mean" in s]
    skipped = [s.get("optimizer/skipped_no_signal", 0.0) for s in steps]
    no_signal = [s["collapse/acr_post"] == 1.0 for s in steps]
    out = {
        "before": summary["eval/accuracy before"],
        "after": summary["eval/accuracy after"],
        "skipped": float(sum(skipped)),
        "no_signal_steps": float(sum(no_signal)),  # acr_post 1.0: every advantage zero (beta 0 here)
        "reward": statistics.fmean(s["reward/mean"] for s in steps),
        "entropy_first": steps[0]["entropy/mean"] if "entropy/mean" in steps[0] else float("nan"),
        "entropy_last": steps[-1].get("entropy/mean", float("nan")),
        "step_s": statistics.median(s["perf/step_s"] for s in steps),
    }
    # the update's time (log-probs, backward, optimizer) on steps with and without signal
    update = [sum(s.get(f"perf/{p}_s", 0.0) for p in ("logprobs", "backward", "optimizer")) for s in steps]
    for kind, keep in (("no_signal", True), ("signal", False)):
        chosen = [u for u, empty in zip(update, no_signal) if empty == keep]
        out[f"update_s_{kind}"] = statistics.median(chosen) if chosen else float("nan")
    for level in LEVELS:
        for when in ("before", "after"):
            key = f"eval/accuracy/{level} {when}"
            if key in summary:
                out[f"{level} {when}"] = summary[key]
    return out


def _se(values: list[float]) -> float:
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")


T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 19: 2.093, 29: 2.045}


def interval(values: list[float]) -> str:
    """mean and the half-width of its 95% t interval"""
    n = len(values)
    if n < 2:
        return f"{statistics.fmean(values):+.3f}" if values else "-"
    t = T975.get(n - 1) or T975[max(k for k in T975 if k <= n - 1)]
    return f"{statistics.fmean(values):+.3f} +- {t * _se(values):.3f}"


def report(args: argparse.Namespace) -> None:
    root = Path(args.root)
    runs = {p.name: f for p in sorted(root.iterdir()) if p.is_dir() and (f := figures(p)) is not None}
    seeds = sorted({int(name.rsplit("-s", 1)[1]) for name in runs})
    arms = [a for a in ARMS if any(name.startswith(f"{a}-s") for name in runs)]
    head = "| seed | before | " + " | ".join(f"{a}: after (skipped)" for a in arms) + " |"
    print(head)
    print("|" + "---|" * (2 + len(arms)))
    for seed in seeds:
        cells, before = [], None
        for arm in arms:
            f = runs.get(f"{arm}-s{seed}")
            before = before if f is None else f["before"]
            cells.append("" if f is None else f"{f['after']:.3f} ({f['skipped']:.0f} of {f['no_signal_steps']:.0f})")
        print(f"| {seed} | {before:.3f} | " + " | ".join(cells) + " |")
    print()
    for arm in arms:
        done = [runs[f"{arm}-s{s}"] for s in seeds if f"{arm}-s{s}" in runs]
        change = [f["after"] - f["before"] for f in done]
        lost = sum(c < 0 for c in change)
        mean_after = statistics.fmean(f["after"] for f in done)
        print(f"{arm:14s} n={len(done):2d}  change {interval(change)}  after {mean_after:.3f}  "
              f"runs that lost accuracy: {lost}  worst {min(change):+.3f}  skipped/run "
              f"{statistics.fmean(f['skipped'] for f in done):.1f}  "
              f"median step {statistics.fmean(f['step_s'] for f in done):.1f} s")
    for arm in arms:
        done = [runs[f"{arm}-s{s}"] for s in seeds if f"{arm}-s{s}" in runs]
        empty = [f["update_s_no_signal"] for f in done if not math.isnan(f["update_s_no_signal"])]
        full = [f["update_s_signal"] for f in done if not math.isnan(f["update_s_signal"])]
        print(f"{arm:14s} update (log-probs, backward, optimizer), median of the runs' medians: steps with "
              f"signal {statistics.median(full):.2f} s, without {statistics.median(empty):.2f} s")
    pairs_of_arms = (("avspo", "avspo_noskip"), ("grpo", "grpo_noskip"), ("avspo", "grpo"),
                     ("avspo_noskip", "grpo_noskip"))
    for a, b in pairs_of_arms:
        pairs = [(runs[f"{a}-s{s}"]["after"], runs[f"{b}-s{s}"]["after"]) for s in seeds
                 if f"{a}-s{s}" in runs and f"{b}-s{s}" in runs]
        if pairs:
            print(f"{a} - {b}, paired by seed (n={len(pairs)}): {interval([x - y for x, y in pairs])}")
    if args.out:
        Path(args.out).write_text(json.dumps(runs, indent=1) + "\n")


def archive(args: argparse.Namespace, beside: tuple[tuple[str, str], ...] = ((".log", "console.log"),)) -> None:
    """Each finished run's summary.json and metrics.jsonl, gzipped, and the files kept beside its folder
    (`beside`: (suffix after the run's name, name in the archive)), e.g. its console log."""
    root, out = Path(args.root), Path(args.out)
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and (p / "summary.json").is_file()):
        target = out / folder.name
        target.mkdir(parents=True, exist_ok=True)
        for name in ("summary.json", "metrics.jsonl"):
            (target / f"{name}.gz").write_bytes(gzip.compress((folder / name).read_bytes(), mtime=0))
        for suffix, kept in beside:
            source = root / f"{folder.name}{suffix}"
            if source.is_file():
                (target / f"{kept}.gz").write_bytes(gzip.compress(source.read_bytes(), mtime=0))
    print(f"archived {len(list(out.iterdir()))} runs in {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--root", required=True)
    r.add_argument("--seeds", type=int, nargs="+", default=list(range(5, 15)))
    r.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    r.add_argument("--steps", type=int, default=30)
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more `grposcope train` options")
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
