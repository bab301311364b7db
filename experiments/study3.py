"""The study, round 3 (docs/results.md): each method compared the way its paper compares it, with the updates
counted, curves instead of end points, and GRESO's pre-rollout filter beside the other samplers.

Same model, task, learning rate (1e-6, constant), batch (2 prompts x G = 8 a step) and final evaluation as round 2
(experiments/study2.py: avg@4 on each seed's 96 held-out prompts, by `grposcope eval`), on new seeds 110-119
(seeds 0-109 were used to design and to decide earlier rounds). Every arm skips the optimizer step on a step
without signal (`skip_no_signal_steps`, as shipped), so steps and updates differ: every table gives both.

DECLARED BEFORE ANY RUN OF THIS ROUND (this file's first commit), not to be changed once runs exist:

Block A, the arithmetic task as in round 2 (204 training prompts, 96 held out), five arms:
  - grpo:          GRPO, fixed sampler, until 320 completions were generated (20 steps);
  - avspo:         AVSPO as shipped, 320 completions;
  - grpo-updates:  GRPO until it has taken as many optimizer updates as avspo took on the same seed
                   (`--max_updates`, read from that avspo run; max_steps 200, no sample limit): equal updates;
  - ra-samples:    Reinforce-Ada-balance with its pool baseline (arXiv 2510.04996), 320 completions (equal
                   generated samples, round 2's protocol);
  - ra-steps:      the same for 20 steps, whatever it spends (the paper's protocol: a fixed number of steps).
Block B, GRESO's setting (arXiv 2506.02177: a pool of prompts revisited epoch after epoch): the same task cut to
12 training prompts and 48 held out (`--dataset_size 12 --eval_size 48`), so that 20 steps of 2 prompts pass over
the pool about three times; four samplers at 320 completions each: fixed, budgeted, reinforce_ada (balance, pool
baseline) and greso (defaults). Its final evaluation: avg@4 on the 48 held-out prompts.

Curves: every run also measures avg@4 on the first 32 held-out prompts before training and every 5 steps
(`--eval_steps 5 --eval_num_samples 4 --eval_limit 32`; sampling forks the random state, so the training draws
are those of a run without it).

The primary comparison: avspo - grpo-updates in final avg@4, paired by seed (10 seeds): mean with its 95% t
interval; decided when the interval excludes 0. It asks whether AVSPO helps beyond taking more AdamW steps.
The secondary comparisons, each a paired two-sided t test, decided by Holm's step-down correction over the seven
at family-wise alpha 0.05:
  S1 avspo - grpo (equal samples, 320)          S2 ra-samples - grpo (equal samples, 320)
  S3 ra-steps - grpo (equal steps, 20)          S4 greso - fixed (block B, equal samples)
  S5 budgeted - fixed (block B)                 S6 reinforce_ada - fixed (block B)
  S7 greso - budgeted (block B)
Alongside (not decisions): the AVSPO - GRPO difference at equal updates also by regressing the paired
difference on the difference in updates over the seeds (its intercept), as the round-2 review did.

    python experiments/study3.py train --out runs/study3      # two runs at a time, one thread each; finished
                                                              # runs (here or kept) are skipped, a killed run
                                                              # starts again from its beginning
    python experiments/study3.py tables --out runs/study3     # the tables and the curve plot; the logs gzipped
                                                              # into experiments/results/study3
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import subprocess
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from study import CLI, ENV, run_name, train_one
from study2 import TRAIN2, _interval, _keep, _restore

from grposcope.reports.regression import Fit, fit_line, mean_t_interval, regularized_beta, t_quantile

SEEDS = tuple(range(110, 120))
EVAL_K = 4
CURVE = ["--eval_steps", "5", "--eval_num_samples", str(EVAL_K), "--eval_limit", "32"]
SMALL_POOL = ["--dataset_size", "12", "--eval_size", "48"]


def _set(flags: list[str], name: str, value: str | None) -> list[str]:
    """`flags` with `name` given `value` (replaced, or appended), or removed when `value` is None."""
    out, i = [], 0
    while i < len(flags):
        if flags[i] == name:
            i += 2
            continue
        out.append(flags[i])
        i += 1
    return out if value is None else [*out, name, value]


TRAIN_A = [*TRAIN2, *CURVE]  # 320 completions (max_samples), at most 200 steps
TRAIN_B = [*_set(TRAIN2, "--eval_size", None), *SMALL_POOL, *CURVE]
AVSPO = ["--advantage_estimator", "avspo"]
RA = ["--sampler", "reinforce_ada", "--exit_rule", "balance", "--advantage_estimator", "pool"]
# arm -> (block, the arm's flags, the run's base flags); grpo-updates gets --max_updates at run time
ARMS: dict[str, tuple[str, list[str], list[str]]] = {
    "grpo": ("A", [], TRAIN_A),
    "avspo": ("A", AVSPO, TRAIN_A),
    "grpo-updates": ("A", [], _set(TRAIN_A, "--max_samples", None)),
    "ra-samples": ("A", RA, TRAIN_A),
    "ra-steps": ("A", RA, _set(_set(TRAIN_A, "--max_samples", None), "--max_steps", "20")),
    "fixed": ("B", [], TRAIN_B),
    "budgeted": ("B", ["--sampler", "budgeted"], TRAIN_B),
    "reinforce_ada": ("B", RA, TRAIN_B),
    "greso": ("B", ["--sampler", "greso"], TRAIN_B),
}
EVAL_BASE = ["--dataset", "arithmetic", "--num_samples", str(EVAL_K), "--max_completion_length", "24",
             "--max_prompt_length", "256", "--overwrite"]
EVAL_FLAGS = {"A": [*EVAL_BASE, "--eval_size", "96"], "B": [*EVAL_BASE, *SMALL_POOL]}
PRIMARY = ("avspo", "grpo-updates")
SECONDARY = [("avspo", "grpo"), ("ra-samples", "grpo"), ("ra-steps", "grpo"), ("greso", "fixed"),
             ("budgeted", "fixed"), ("reinforce_ada", "fixed"), ("greso", "budgeted")]
BUDGET = {"grpo": "320 samples", "avspo": "320 samples", "grpo-updates": "avspo's updates",
          "ra-samples": "320 samples", "ra-steps": "20 steps", "fixed": "320 samples", "budgeted": "320 samples",
          "reinforce_ada": "320 samples", "greso": "320 samples"}
ALPHA = 0.05


# --- the runs -----------------------------------------------------------------------------------------------

def updates_taken(folder: Path) -> int:
    """Optimizer updates a finished run took: its summary's count (steps that skipped no update)."""
    return int(json.loads((folder / "summary.json").read_text())["optimizer/updates"])


def run_one(out: Path, arm: str, seed: int, after: Future | None = None) -> str:
    """Trains one run and scores it with `grposcope eval` on its block's split (study.train_one); grpo-updates
    first waits for avspo of the same seed (`after`) and takes its update count as --max_updates."""
    block, flags, base = ARMS[arm]
    if arm == "grpo-updates" and not (out / run_name(arm, seed) / "eval_avg4.json").is_file():
        assert after is not None
        after.result()
        flags = [*flags, "--max_updates", str(updates_taken(out / run_name("avspo", seed)))]
    return train_one(out, run_name(arm, seed), flags, seed, base, EVAL_FLAGS[block])


def base_eval(out: Path, block: str, seed: int) -> str:
    """The untrained model on the block's held-out split of the seed: the 'before' of every run."""
    path = out / f"base{block}-s{seed}.json"
    if path.is_file():
        return f"base{block}-s{seed}: done before"
    t0 = time.perf_counter()
    with open(out / f"base{block}-s{seed}.log", "w") as log:
        code = subprocess.run([*CLI, "eval", "--model", "embedded:smollm2-135m-instruct", "--seed", str(seed),
                               *EVAL_FLAGS[block], "--output", str(path)], stdout=log, stderr=subprocess.STDOUT,
                              env=ENV).returncode
    if code == 0:
        (out / f"base{block}-s{seed}.timing.json").write_text(
            json.dumps({"seconds": time.perf_counter() - t0}) + "\n")
    return f"base{block}-s{seed}: exit {code}"


def train(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.keep:
        _restore(Path(args.keep), out)
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else SEEDS
    arms = args.arms.split(",") if args.arms else list(ARMS)
    with ThreadPoolExecutor(max_workers=args.workers) as pool:  # seed by seed: the pairs complete early
        futures: list[Future] = []
        for seed in seeds:
            done: dict[str, Future] = {}
            for arm in arms:
                if arm == "grpo-updates" and "avspo" not in done:
                    done["avspo"] = pool.submit(run_one, out, "avspo", seed)
                    futures.append(done["avspo"])
                if arm not in done:
                    done[arm] = pool.submit(run_one, out, arm, seed, done.get("avspo"))
                    futures.append(done[arm])
            for block in sorted({ARMS[a][0] for a in arms}):
                futures.append(pool.submit(base_eval, out, block, seed))
        for future in futures:
            print(future.result(), flush=True)


# --- the tables ---------------------------------------------------------------------------------------------

def avg_at_k(path: Path) -> float:
    return statistics.fmean(r["num_correct"] / EVAL_K for r in json.loads(path.read_text())["records"])


def run_figures(folder: Path) -> dict:
    """A finished run's figures: final avg@4, steps, updates, samples, the ACR, and its curve."""
    from grposcope.logging.jsonl import read_metrics

    lines = list(read_metrics(folder / "metrics.jsonl"))
    steps = [line for line in lines if "optimizer/skipped_no_signal" in line]
    summary = json.loads((folder / "summary.json").read_text())
    samples = 0.0
    curve = [(0, 0.0, 0, summary.get(f"eval/avg@{EVAL_K} before"))]  # (step, samples, updates, avg@4)
    updates = 0
    for line in steps:
        samples += line.get("sampler/samples_generated", 0.0)
        updates += int(line["optimizer/skipped_no_signal"] == 0.0)
        if f"eval/avg@{EVAL_K}" in line:
            curve.append((line["step"], samples, updates, line[f"eval/avg@{EVAL_K}"]))
    timing = folder / "timing.json"
    return {
        "avg@4": avg_at_k(folder / "eval_avg4.json"), "steps": len(steps), "updates": summary["optimizer/updates"],
        "samples": samples, "ACR": statistics.fmean(s["collapse/acr"] for s in steps if "collapse/acr" in s),
        "prompts skipped": sum(s.get("sampler/prompts_skipped", 0.0) for s in steps), "curve": curve,
        "compute s": json.loads(timing.read_text())["seconds"] if timing.is_file() else math.nan,
    }


def _runs(out: Path) -> dict[str, dict]:
    runs = {}
    for arm in ARMS:
        for seed in SEEDS:
            folder = out / run_name(arm, seed)
            if (folder / "eval_avg4.json").is_file():
                runs[run_name(arm, seed)] = {**run_figures(folder), "seed": seed, "arm": arm}
    return runs


def paired_t(values: list[float]) -> tuple[float, float, float]:
    """mean, the half-width of its 95% t interval, and the two-sided p of a paired t test of mean 0."""
    mean, half = mean_t_interval(values)
    sd = statistics.stdev(values)
    if sd == 0:
        return mean, half, 0.0 if mean else 1.0
    t, df = mean / (sd / math.sqrt(len(values))), len(values) - 1
    return mean, half, regularized_beta(df / (df + t * t), df / 2, 0.5)


def holm(pvalues: list[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down: sorted ascending, the i-th (from 0) is rejected while p <= alpha / (m - i)."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    decided = [False] * len(pvalues)
    for rank, i in enumerate(order):
        if pvalues[i] > alpha / (len(pvalues) - rank):
            break
        decided[i] = True
    return decided


def _diffs(runs: dict, a: str, b: str) -> list[tuple[int, float]]:
    return [(s, runs[run_name(a, s)]["avg@4"] - runs[run_name(b, s)]["avg@4"]) for s in SEEDS
            if run_name(a, s) in runs and run_name(b, s) in runs]


def tables(args: argparse.Namespace) -> None:
    out = Path(args.out)
    runs = _runs(out)
    base = {(b, s): avg_at_k(out / f"base{b}-s{s}.json") for b in "AB" for s in SEEDS
            if (out / f"base{b}-s{s}.json").is_file()}
    print("Per arm, mean over seeds (avg@4 with its 95% t interval; steps, updates, samples per run):\n")
    print("| block | arm | budget | seeds | avg@4 | avg@4 - untrained | steps | updates | samples | ACR | "
          "prompts skipped |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for arm, (block, _, _) in ARMS.items():
        mine = [r for r in runs.values() if r["arm"] == arm]
        if not mine:
            continue
        gains = [r["avg@4"] - base[(block, r["seed"])] for r in mine if (block, r["seed"]) in base]
        mean = {k: statistics.fmean(r[k] for r in mine) for k in ("steps", "updates", "samples", "ACR",
                                                                   "prompts skipped")}
        print(f"| {block} | {arm} | {BUDGET[arm]} | {len(mine)} | {_interval([r['avg@4'] for r in mine], '{:.3f}')} "
              f"| {_interval(gains)} | {mean['steps']:.1f} | {mean['updates']:.1f} | {mean['samples']:.0f} | "
              f"{mean['ACR']:.3f} | {mean['prompts skipped']:.1f} |")
    print("\nPer seed: final avg@4 / steps / updates / samples:\n")
    print("| seed | " + " | ".join(ARMS) + " |")
    print("|---|" + "---|" * len(ARMS))
    for seed in SEEDS:
        cells = []
        for arm in ARMS:
            r = runs.get(run_name(arm, seed))
            cells.append("-" if r is None else f"{r['avg@4']:.3f} / {r['steps']} / {r['updates']} / {r['samples']:.0f}")
        if any(c != "-" for c in cells):
            print(f"| {seed} | " + " | ".join(cells) + " |")
    _curve_table(runs)
    _decisions(runs)
    _equal_updates_regression(runs)
    if args.plot:
        _plot(runs, Path(args.plot))
    compute = sum(r["compute s"] for r in runs.values()) + sum(
        json.loads(p.read_text())["seconds"] for p in out.glob("base*-s*.timing.json"))
    print(f"\ncompute: {len(runs)} runs and {len(base)} untrained evals, {compute / 3600:.2f} h in processes of "
          "one thread (two at a time on 2 cores)")
    if args.keep:
        _keep(out, Path(args.keep), runs)


def _curve_table(runs: dict) -> None:
    """The curves in numbers: mean avg@4 on the 32-prompt subset at each evaluated step, with the mean updates
    taken by then (a cell over fewer seeds than the arm has gives their count: runs that stop early)."""
    points: dict[str, dict[int, list[tuple[int, float]]]] = {}
    for r in runs.values():
        for step, _, updates, value in r["curve"]:
            if value is not None:
                points.setdefault(r["arm"], {}).setdefault(step, []).append((updates, value))
    steps = sorted({step for arm in points.values() for step in arm})
    print("\nCurves: avg@4 on the first 32 held-out prompts at each evaluated step (mean over seeds), and in "
          "brackets the mean optimizer updates taken by then:\n")
    print("| arm | " + " | ".join(f"step {s}" for s in steps) + " |")
    print("|---|" + "---|" * len(steps))
    for arm in ARMS:
        if arm not in points:
            continue
        n = sum(r["arm"] == arm for r in runs.values())
        cells = []
        for step in steps:
            at = points[arm].get(step, [])
            cell = (f"{statistics.fmean(v for _, v in at):.3f} ({statistics.fmean(u for u, _ in at):.1f})"
                    if at else "-")
            cells.append(cell + (f", {len(at)} of {n} seeds" if at and len(at) < n else ""))
        print(f"| {arm} | " + " | ".join(cells) + " |")


def _decisions(runs: dict) -> None:
    print("\nPaired by seed, final avg@4 differences:\n")
    print("| comparison | budget | n | per seed | mean +- 95% t | p | decided |")
    print("|---|---|---|---|---|---|---|")
    diffs = _diffs(runs, *PRIMARY)
    if len(diffs) > 1:
        values = [d for _, d in diffs]
        mean, half, p = paired_t(values)
        verdict = ("yes, " + ("above 0" if mean > 0 else "below 0")) if abs(mean) > half else "no"
        print(f"| {PRIMARY[0]} - {PRIMARY[1]} (primary) | equal updates | {len(values)} | "
              + ", ".join(f"{d:+.3f}" for d in values) + f" | {_interval(values)} | {p:.3g} | {verdict} |")
    rows = [(a, b, [d for _, d in _diffs(runs, a, b)]) for a, b in SECONDARY]
    rows = [(a, b, v) for a, b, v in rows if len(v) > 1]
    decided = holm([paired_t(v)[2] for _, _, v in rows])
    for (a, b, values), yes in zip(rows, decided):
        mean, half, p = paired_t(values)
        budget = {"ra-steps": "equal steps (20); samples differ"}.get(a, "equal samples (320)")
        verdict = ("yes, " + ("above 0" if mean > 0 else "below 0")) if yes else "no"
        print(f"| {a} - {b} | {budget} | {len(values)} | " + ", ".join(f"{d:+.3f}" for d in values)
              + f" | {_interval(values)} | {p:.3g} | {verdict} (Holm over {len(rows)}) |")


def intercept_se(x: list[float], y: list[float]) -> tuple[Fit, float]:
    """The least-squares line of y on x and its intercept's standard error (n - 2 df: times
    t_quantile(0.975, n - 2) for the 95% t half-width)."""
    fit = fit_line(x, y)
    mx = statistics.fmean(x)
    sxx = sum((v - mx) ** 2 for v in x)
    s2 = sum((b - fit.predict(a)) ** 2 for a, b in zip(x, y)) / (len(x) - 2)
    return fit, math.sqrt(s2 * (1 / len(x) + mx * mx / sxx))


def _equal_updates_regression(runs: dict) -> None:
    pairs = [(runs[run_name("avspo", s)], runs[run_name("grpo", s)]) for s in SEEDS
             if run_name("avspo", s) in runs and run_name("grpo", s) in runs]
    if len(pairs) < 3:
        return
    extra = [a["updates"] - g["updates"] for a, g in pairs]
    diff = [a["avg@4"] - g["avg@4"] for a, g in pairs]
    if len(set(extra)) < 2:
        return
    fit, se = intercept_se(extra, diff)
    half = t_quantile(0.975, len(extra) - 2) * se
    print(f"\navspo - grpo (equal samples) regressed on avspo's extra updates (per seed: "
          f"{', '.join(f'{x:+d}' for x in extra)}), over {len(pairs)} seeds: difference = {fit.intercept:+.4f} "
          f"(95% t +- {half:.4f}) {fit.slope:+.4f} x extra updates (r = {fit.r:+.3f}); the intercept is the "
          "difference at equal updates")


def _plot(runs: dict, path: Path) -> None:
    """avg@4 on the 32-prompt subset against steps, samples and optimizer updates, mean over seeds per arm (a
    point only where every seed of the arm has one: runs that stop early end the line)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(16, 8), sharey="row")
    for row, block in enumerate("AB"):
        for col, (x_name, x_index) in enumerate((("step", 0), ("completions generated", 1),
                                                 ("optimizer updates", 2))):
            ax = axes[row][col]
            for arm, (b, _, _) in ARMS.items():
                curves = [r["curve"] for r in runs.values() if r["arm"] == arm and b == block]
                if not curves:
                    continue
                points: dict[int, list[tuple[float, float]]] = {}
                for curve in curves:
                    for i, point in enumerate(curve):
                        if point[3] is not None:
                            points.setdefault(i, []).append((point[x_index], point[3]))
                xs = [statistics.fmean(p[0] for p in v) for _, v in sorted(points.items()) if len(v) == len(curves)]
                ys = [statistics.fmean(p[1] for p in v) for _, v in sorted(points.items()) if len(v) == len(curves)]
                # grpo-updates is grpo continued past step 20 on the same seed: dotted, so that grpo shows under it
                style = {"linestyle": ":", "marker": "s"} if arm == "grpo-updates" else {"marker": "o"}
                ax.plot(xs, ys, **style, label=f"{arm} ({len(curves)} seeds)")
            ax.set_xlabel(x_name)
            ax.set_title(f"block {block}: avg@4 on 32 held-out prompts")
            ax.grid(alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"\nwrote {path}")


# --- the simulator ---------------------------------------------------------------------------------------------
# Added after the runs above began (it decides nothing): the samplers side by side in `grposcope simulate`, as
# docs/results.md section 3 sets them (B = 256 prompts a step, G = 8, 50 steps of the fixed sampler's spending,
# 10 seeds, held-out accuracy on prompts never trained on), on a pool of 10,000 prompts (1.3 passes over it in
# 50 fixed steps, section 3's) and of 1,000 (12.8 passes: GRESO's setting, a pool revisited epoch after epoch),
# each on the default population (difficulty_mean -1) and the hard one (-3).
# name -> (sampler, its options, estimator, its options). Reinforce-Ada with the grpo estimator as in section 3;
# Knapsack RL with the pool of each prompt's N samples as the baseline, normalised by its std (GRPO over the N).
SIM_SAMPLERS: dict[str, tuple[str, dict, str, dict]] = {
    "fixed (GRPO)": ("fixed", {}, "grpo", {}),
    "dynamic (DAPO)": ("dynamic", {}, "grpo", {}),
    "reinforce_ada-balance": ("reinforce_ada", {"exit_rule": "balance"}, "grpo", {}),
    "greso": ("greso", {}, "grpo", {}),
    "knapsack": ("knapsack", {}, "pool", {"pool_std": True}),
    "budgeted": ("budgeted", {}, "grpo", {}),
}
SIM_SEEDS = tuple(range(10))
SIM_POOLS = (10_000, 1_000)
SIM_DIFFICULTIES = (-1.0, -3.0)
SIM_G, SIM_B, SIM_STEPS = 8, 256, 50


def simulate(args: argparse.Namespace) -> None:
    """Every (pool, difficulty, sampler, seed) run in-process; each run's history kept as one JSON line."""
    from grposcope.sim import SimConfig
    from grposcope.sim import simulate as run

    path = Path(args.raw)
    done = {(r["pool"], r["mu"], r["sampler"], r["seed"]) for r in _sim_lines(path)}
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "at") as raw:
        for pool in SIM_POOLS:
            for mu in SIM_DIFFICULTIES:
                for name, (sampler, options, estimator, estimator_options) in SIM_SAMPLERS.items():
                    t0 = time.perf_counter()
                    for seed in SIM_SEEDS:
                        if (pool, mu, name, seed) in done:
                            continue
                        config = SimConfig(sampler=sampler, sampler_options=options, estimator=estimator,
                                           estimator_options=estimator_options, prompts=pool,
                                           num_generations=SIM_G, batch_size=SIM_B, steps=SIM_STEPS * 3,
                                           seed=seed, difficulty_mean=mu)
                        history = run(config).history
                        keep = ("samples_total", "heldout_accuracy", "collapse/acr", "collapse/acr_post",
                                "sampler/prompts_skipped", "sampler/samples_generated")
                        raw.write(json.dumps({"pool": pool, "mu": mu, "sampler": name, "seed": seed,
                                              "history": {k: history[k] for k in keep if k in history}}) + "\n")
                    print(f"pool {pool}, difficulty_mean {mu:g}, {name}: {time.perf_counter() - t0:.1f} s", flush=True)


def _sim_lines(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def sim_tables(args: argparse.Namespace) -> None:
    """Each sampler read where it has generated what the fixed sampler spends in 50 steps (SIM_B x G x 50)."""
    lines = _sim_lines(Path(args.raw))
    budget = SIM_B * SIM_G * SIM_STEPS
    for pool in SIM_POOLS:
        for mu in SIM_DIFFICULTIES:
            print(f"\n**Simulator, {pool:,} prompts, difficulty_mean {mu:g}, G = {SIM_G}, at {budget:,} generated "
                  "samples (mean +- SE over seeds; paired differences against fixed with their 95% t interval)**\n")
            print("| sampler | seeds | steps | ACR | acr_post | prompts skipped / step | held-out accuracy | "
                  "minus fixed |")
            print("|---|---|---|---|---|---|---|---|")
            by_name: dict[str, dict[int, dict]] = {}
            for line in lines:
                if line["pool"] == pool and line["mu"] == mu:
                    history = line["history"]
                    last = next((i for i, t in enumerate(history["samples_total"]) if t >= budget),
                                len(history["samples_total"]) - 1)
                    skipped = history.get("sampler/prompts_skipped", [0.0] * (last + 1))[: last + 1]
                    by_name.setdefault(line["sampler"], {})[line["seed"]] = {
                        "steps": last + 1, "acc": history["heldout_accuracy"][last],
                        "ACR": statistics.fmean(history["collapse/acr"][: last + 1]),
                        "acr_post": statistics.fmean(history["collapse/acr_post"][: last + 1]),
                        "skipped": statistics.fmean(skipped)}
            fixed = by_name.get("fixed (GRPO)", {})
            for name in SIM_SAMPLERS:
                seeds = by_name.get(name, {})
                if not seeds:
                    continue
                cells = [f"{statistics.fmean(v[k] for v in seeds.values()):.1f}" if k in ("steps", "skipped")
                         else _mean_se([v[k] for v in seeds.values()]) for k in ("steps", "ACR", "acr_post",
                                                                                   "skipped", "acc")]
                diffs = [seeds[s]["acc"] - fixed[s]["acc"] for s in seeds if s in fixed]
                versus = "-" if name.startswith("fixed") else _interval(diffs, "{:+.4f}")
                print(f"| {name} | {len(seeds)} | " + " | ".join(cells) + f" | {versus} |")


def _mean_se(values: list[float]) -> str:
    mean = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return f"{mean:.4f} +- {se:.4f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("--out", default="runs/study3")
    t.add_argument("--workers", type=int, default=2)
    t.add_argument("--seeds", default="", help="comma-separated seeds (default: SEEDS)")
    t.add_argument("--arms", default="", help="comma-separated arms (default: all)")
    t.add_argument("--keep", default="experiments/results/study3",
                   help="kept logs of finished runs, unpacked into --out first ('' : none)")
    r = sub.add_parser("tables")
    r.add_argument("--out", default="runs/study3")
    r.add_argument("--keep", default="experiments/results/study3", help="where the gzipped logs go ('' : nowhere)")
    r.add_argument("--plot", default="docs/img/study3_curves.png", help="the curve plot ('' : none)")
    for command in ("simulate", "sim-tables"):
        sub.add_parser(command).add_argument("--raw", default="experiments/results/study3/sim_raw.jsonl.gz")
    args = parser.parse_args()
    {"train": train, "tables": tables, "simulate": simulate, "sim-tables": sim_tables}[args.command](args)


if __name__ == "__main__":
    main()
