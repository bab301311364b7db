"""Do the faster rollout routes keep the quickstart's held-out accuracy? (performance round 3, issue 30)

The comparison declared before running: on seeds 15-20 (none used to tune anything here), the quickstart
preset as shipped (20 steps, evaluation on its 48 held-out prompts before and after), three arms paired by
seed:

    generate   --decode_loop generate: transformers' generate, torch.multinomial (the route before this round)
    own        the default: grposcope's decode loop, inverse-CDF sampling (exact in distribution, other tokens)
    bf16       --rollout_dtype bfloat16: the own loop on a bf16 copy, truncated importance sampling (cap 2)

Primary comparison: bf16 - own in accuracy after training; secondary: own - generate. Each paired difference
is reported per seed, with its mean and 95% t interval; a route may become the default only if its interval
holds 0 and its half-width is small enough to say so (stated with the figures).

    .venv/bin/python experiments/rollout_routes.py run --root /work/runs/routes --seeds 15 16 17 18 19 20
    .venv/bin/python experiments/rollout_routes.py report --root /work/runs/routes
    .venv/bin/python experiments/rollout_routes.py archive --root /work/runs/routes \
        --out experiments/results/perf_round3_routes

Runs whose summary.json exists are skipped; two runs at a time, one torch thread each (no_signal_seeds.py's
runner, archive and figures).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import no_signal_seeds as base

ARMS = {
    "generate": ["--decode_loop", "generate"],
    "own": [],
    "bf16": ["--rollout_dtype", "bfloat16"],
}
PAIRS = (("bf16", "own"), ("own", "generate"), ("bf16", "generate"))


def report(args: argparse.Namespace) -> None:
    root = Path(args.root)
    runs = {p.name: f for p in sorted(root.iterdir()) if p.is_dir() and (f := base.figures(p)) is not None}
    seeds = sorted({int(name.rsplit("-s", 1)[1]) for name in runs})
    arms = [a for a in ARMS if any(name.startswith(f"{a}-s") for name in runs)]
    print("| seed | before | " + " | ".join(f"{a}: after" for a in arms) + " |")
    print("|" + "---|" * (2 + len(arms)))
    for seed in seeds:
        found = [runs.get(f"{arm}-s{seed}") for arm in arms]
        before = next((f["before"] for f in found if f is not None), float("nan"))
        print(f"| {seed} | {before:.3f} | " + " | ".join("" if f is None else f"{f['after']:.3f}" for f in found)
              + " |")
    print()
    for arm in arms:
        done = [runs[f"{arm}-s{s}"] for s in seeds if f"{arm}-s{s}" in runs]
        print(f"{arm:9s} n={len(done)}  after {statistics.fmean(f['after'] for f in done):.3f}  change "
              f"{base.interval([f['after'] - f['before'] for f in done])}  median step "
              f"{statistics.median(f['step_s'] for f in done):.2f} s")
    for a, b in PAIRS:
        diffs = [(s, runs[f"{a}-s{s}"]["after"] - runs[f"{b}-s{s}"]["after"]) for s in seeds
                 if f"{a}-s{s}" in runs and f"{b}-s{s}" in runs]
        if diffs:
            each = ", ".join(f"{s}: {d:+.3f}" for s, d in diffs)
            print(f"{a} - {b}, after, paired by seed (n={len(diffs)}): {base.interval([d for _, d in diffs])} "
                  f"[{each}]")


def main() -> None:
    base.ARMS.clear()
    base.ARMS.update(ARMS)  # the shared runner reads its arms from there
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--root", required=True)
    r.add_argument("--seeds", type=int, nargs="+", default=list(range(15, 21)))
    r.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    r.add_argument("--steps", type=int, default=20)
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--extra", nargs=argparse.REMAINDER, default=[])
    p = sub.add_parser("report")
    p.add_argument("--root", required=True)
    a = sub.add_parser("archive")
    a.add_argument("--root", required=True)
    a.add_argument("--out", required=True)
    args = parser.parse_args()
    {"run": base.run, "report": report, "archive": base.archive}[args.command](args)


if __name__ == "__main__":
    main()
