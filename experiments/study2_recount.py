"""Round 2 of the study recounted from its kept logs (experiments/results/study2), for issue 43: the optimizer
updates each run took, each difference with the budget it was judged at, Holm's correction over the secondary
comparisons, and the AVSPO - GRPO difference at equal updates by regression. Nothing is rerun.

    python experiments/study2_recount.py
"""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

from study3 import holm, intercept_se, paired_t

from grposcope.reports.regression import fit_line, t_quantile

KEPT = Path(__file__).parent / "results" / "study2"
SEEDS = tuple(range(100, 110))
ARMS = ("grpo", "avspo", "avspo-paper", "reinforce_ada-pool", "budgeted")
PRIMARY = ("avspo", "grpo")
SECONDARY = [("avspo-paper", "grpo"), ("reinforce_ada-pool", "grpo"), ("budgeted", "grpo"),
             ("avspo", "avspo-paper"), ("budgeted", "reinforce_ada-pool")]


def _read(name: str) -> bytes:
    return gzip.decompress((KEPT / name).read_bytes())


def figures(arm: str, seed: int) -> dict[str, float]:
    lines = [json.loads(line) for line in _read(f"{arm}-s{seed}.metrics.jsonl.gz").splitlines() if line.strip()]
    steps = [line for line in lines if "optimizer/skipped_no_signal" in line]
    records = json.loads(_read(f"{arm}-s{seed}.eval_avg4.json.gz"))["records"]
    return {"steps": len(steps), "updates": sum(1 for s in steps if s["optimizer/skipped_no_signal"] == 0.0),
            "samples": sum(s["sampler/samples_generated"] for s in steps),
            "avg@4": statistics.fmean(r["num_correct"] / 4 for r in records)}


def main() -> None:
    runs = {(arm, seed): figures(arm, seed) for arm in ARMS for seed in SEEDS}
    print("Per arm, mean over the 10 seeds (min-max):\n")
    print("| arm | steps | optimizer updates | samples | avg@4 |")
    print("|---|---|---|---|---|")
    for arm in ARMS:
        cells = []
        for key in ("steps", "updates", "samples", "avg@4"):
            values = [runs[(arm, s)][key] for s in SEEDS]
            form = "{:.3f}" if key == "avg@4" else "{:.1f}"
            cells.append(f"{form.format(statistics.fmean(values))} ({form.format(min(values))}-"
                         f"{form.format(max(values))})")
        print(f"| {arm} | " + " | ".join(cells) + " |")
    print("\nPaired differences in final avg@4 (two-sided paired t; the secondaries under Holm over 5 at 0.05):\n")
    print("| difference | budget | mean +- 95% t | p | decided |")
    print("|---|---|---|---|---|")

    def diffs(a: str, b: str) -> list[float]:
        return [runs[(a, s)]["avg@4"] - runs[(b, s)]["avg@4"] for s in SEEDS]

    def budget(a: str, b: str) -> str:
        steps = [statistics.fmean(runs[(x, s)]["steps"] for s in SEEDS) for x in (a, b)]
        updates = [statistics.fmean(runs[(x, s)]["updates"] for s in SEEDS) for x in (a, b)]
        return (f"equal samples (320); steps {steps[0]:.1f} vs {steps[1]:.1f}, updates {updates[0]:.1f} vs "
                f"{updates[1]:.1f}")

    mean, half, p = paired_t(diffs(*PRIMARY))
    print(f"| {PRIMARY[0]} - {PRIMARY[1]} (primary) | {budget(*PRIMARY)} | {mean:+.3f} +- {half:.3f} | {p:.3g} | "
          f"{'yes' if abs(mean) > half else 'no'} |")
    tests = [paired_t(diffs(a, b)) for a, b in SECONDARY]
    for (a, b), (mean, half, p), yes in zip(SECONDARY, tests, holm([t[2] for t in tests])):
        print(f"| {a} - {b} | {budget(a, b)} | {mean:+.3f} +- {half:.3f} | {p:.3g} | {'yes' if yes else 'no'} |")
    extra = [runs[("avspo", s)]["updates"] - runs[("grpo", s)]["updates"] for s in SEEDS]
    fit, se = intercept_se(extra, diffs("avspo", "grpo"))
    print(f"\navspo - grpo regressed on avspo's extra updates (per seed: {', '.join(f'{x:+d}' for x in extra)}): "
          f"difference = {fit.intercept:+.4f} (SE {se:.4f}; 95% t +- "
          f"{t_quantile(0.975, len(extra) - 2) * se:.4f}) {fit.slope:+.4f} x extra updates, "
          f"r = {fit.r:+.3f}; the intercept is the difference at equal updates")
    within = [(runs[(a, s)]["updates"], runs[(a, s)]["avg@4"]) for a in ARMS for s in SEEDS]
    centred_x, centred_y = [], []
    for s in SEEDS:
        mine = [(runs[(a, s)]["updates"], runs[(a, s)]["avg@4"]) for a in ARMS]
        mu, ma = statistics.fmean(u for u, _ in mine), statistics.fmean(v for _, v in mine)
        centred_x += [u - mu for u, _ in mine]
        centred_y += [v - ma for _, v in mine]
    print(f"final avg@4 against updates taken, centred within each seed, over the {len(within)} runs: "
          f"r = {fit_line(centred_x, centred_y).r:+.3f}")


def simulator() -> None:
    """Reinforce-Ada-balance minus GRPO in the kept simulator runs (docs/results.md section 3), read three ways:
    at the samples GRPO spends in 50 steps (Reinforce-Ada's first step at or past them), at that same step, and
    both at 50 steps (Reinforce-Ada then having spent more)."""
    runs = {}
    with gzip.open(Path(__file__).parent / "results" / "study" / "sim_raw.jsonl.gz", "rt") as f:
        for line in f:
            run = json.loads(line)["runs"][0]
            config = run["config"]
            balance = config["sampler"] == "reinforce_ada" and config["sampler_options"].get("exit_rule") == "balance"
            if config["estimator"] == "grpo" and (config["sampler"] == "fixed" or balance):
                key = (config["sampler"], config["num_generations"], config["difficulty_mean"], config["seed"])
                runs[key] = run["history"]
    print("\nSimulator, reinforce_ada-balance - grpo in held-out accuracy (mean over 10 seeds):\n")
    print("| G | difficulty_mean | at equal samples | at the same step | both at 50 steps | its steps to the budget |")
    print("|---|---|---|---|---|---|")
    for g in (8, 16):
        for mu in (-1.0, -3.0):
            budget, rows = 256 * g * 50, []
            for seed in range(10):
                ra, grpo = runs[("reinforce_ada", g, mu, seed)], runs[("fixed", g, mu, seed)]
                at = next((i for i, t in enumerate(ra["samples_total"]) if t >= budget), len(ra["samples_total"]) - 1)
                acc_ra, acc = ra["heldout_accuracy"], grpo["heldout_accuracy"]
                rows.append((acc_ra[at] - acc[-1], acc_ra[at] - acc[at], acc_ra[-1] - acc[-1], at + 1))
            means = [statistics.fmean(r[i] for r in rows) for i in range(4)]
            print(f"| {g} | {mu:g} | {means[0]:+.4f} | {means[1]:+.4f} | {means[2]:+.4f} | {means[3]:.1f} |")


if __name__ == "__main__":
    main()
    simulator()
