"""The study, round 2 (docs/results.md, section 1): enough paired seeds to decide, at the paper's learning rate.

Same task, model, budget and evaluation as round 1 (experiments/study.py: 320 generated completions a run,
avg@4 on 96 held-out prompts per seed), with these changes:
- learning rate 1e-6 (the AVSPO and Reinforce-Ada papers'), constant;
- seeds 100-109 (new: the AVSPO guard was designed on seeds 0-4, the no-signal default checked on 5-14, the
  rollout routes on 15-20); more can be added to SEEDS and the study continued;
- every arm takes no optimizer step on a step whose loss has no signal (`skip_no_signal_steps`, as shipped);
- five arms, the papers' methods as the papers run them beside grposcope's defaults:
  - grpo: GRPO, fixed sampler;
  - avspo: AVSPO as grposcope ships it (EMA-smoothed collapse signal, lam 0.9; all-wrong guard 0.5);
  - avspo-paper: AVSPO as arXiv 2605.21125 runs it: the per-step ACR as its signal (lam 0), no guard;
    stratified virtual samples and the adaptive threshold from 0.5 (the paper's, and grposcope's defaults);
  - reinforce_ada-pool: Reinforce-Ada-balance (arXiv 2510.04996) with its pool baseline
    (advantage_estimator pool);
  - budgeted: grposcope's budgeted sampler.

Declared before any run of this round (this file's first commit): the primary comparison is avspo - grpo in
final avg@4, paired by seed, mean with its 95% t interval; it is decided when that interval excludes 0. Every
other difference is secondary and reported the same way. The predictor question is answered with the ACR of
steps 1-5 (not the whole run) against final avg@4, within each arm across seeds, and across arms with a
per-seed term; a run identical to another (an arm that never changes anything) counts once.

    python experiments/study2.py train --out runs/study2      # two runs at a time; finished ones (here or kept
                                                              # in experiments/results/study2) are skipped
    python experiments/study2.py tables --out runs/study2     # the tables; the logs gzipped into
                                                              # experiments/results/study2
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from study import TRAIN, avg_at_k, base_eval, run_figures, run_name, train_one

from grposcope.reports.regression import correlation_p_value, fit_line, mean_t_interval

SEEDS = tuple(range(100, 110))
LEARNING_RATE = "1e-6"
TRAIN2 = [LEARNING_RATE if previous == "--learning_rate" else flag for previous, flag in zip(["", *TRAIN], TRAIN)]
AVSPO = ["--advantage_estimator", "avspo"]
ARMS: dict[str, list[str]] = {
    "grpo": [],
    "avspo": AVSPO,
    "avspo-paper": [*AVSPO, "--acr_ema_lambda", "0", "--all_wrong_max_share", "none"],
    "reinforce_ada-pool": ["--sampler", "reinforce_ada", "--exit_rule", "balance", "--advantage_estimator", "pool"],
    "budgeted": ["--sampler", "budgeted"],
}
PRIMARY = ("avspo", "grpo")
PAPER_LINE = (51.4, -29.6)  # arXiv 2605.21125: final accuracy (%) = 51.4 - 29.6 ACR_100, over its own runs


def train(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.keep:
        _restore(Path(args.keep), out)
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else SEEDS
    jobs = [(run_name(arm, seed), flags, seed) for seed in seeds for arm, flags in ARMS.items()]
    with ThreadPoolExecutor(max_workers=args.workers) as pool:  # seed by seed: pairs complete early
        futures = []
        for seed in seeds:
            futures.append(pool.submit(_timed_base_eval, out, seed))
            futures += [pool.submit(train_one, out, name, flags, s, TRAIN2) for name, flags, s in jobs if s == seed]
        for future in futures:
            print(future.result(), flush=True)


def _restore(keep: Path, out: Path) -> None:
    """Unpacks the kept logs of finished runs (and untrained evals) into `out`, so that a fresh checkout goes on
    with the runs not yet done instead of training the finished ones again."""
    for path in sorted(keep.glob("*.gz")) if keep.is_dir() else []:
        name, file = path.name.removesuffix(".gz"), None
        for suffix in ("metrics.jsonl", "summary.json", "eval_avg4.json", "timing.json"):
            if name.endswith("." + suffix) and not name.startswith("base"):  # base*-s*.json: beside the runs
                name, file = name.removesuffix("." + suffix), suffix
        target = out / f"{name}" / file if file else out / name
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(gzip.decompress(path.read_bytes()))


def _timed_base_eval(out: Path, seed: int) -> str:
    t0 = time.perf_counter()
    message = base_eval(out, seed)
    if "done before" not in message:
        (out / f"base-s{seed}.timing.json").write_text(json.dumps({"seconds": time.perf_counter() - t0}) + "\n")
    return message


# --- the tables ---------------------------------------------------------------------------------------------

def _runs(out: Path) -> dict[str, dict[str, float]]:
    """Every finished run's figures (study.run_figures), with its seed, arm and compute time."""
    runs = {}
    for arm in ARMS:
        for seed in SEEDS:
            folder = out / run_name(arm, seed)
            if (folder / "eval_avg4.json").is_file():
                figures = run_figures(folder)
                timing = folder / "timing.json"
                figures["compute s"] = json.loads(timing.read_text())["seconds"] if timing.is_file() else math.nan
                runs[run_name(arm, seed)] = {**figures, "seed": seed, "arm": arm}
    return runs


SAME_RUN_KEYS = ("reward/mean", "collapse/acr", "collapse/acr_post", "completion/mean_length",
                 "sampler/samples_generated", "sampler/tokens_generated")


def _signature(folder: Path) -> tuple:
    """What a run shares with another that is the same run again: each step's rewards, collapse and lengths
    (the tokens drawn), and every held-out answer. Gradients and entropies are left out: two runs of the same
    code differ there by float rounding (docs/performance.md, "Seeded runs")."""
    from grposcope.logging.jsonl import read_metrics

    steps = [tuple(line.get(k) for k in SAME_RUN_KEYS) for line in read_metrics(folder / "metrics.jsonl")
             if "collapse/acr" in line]
    answers = json.loads((folder / "eval_avg4.json").read_text())["records"]
    return tuple(steps), tuple(json.dumps(r, sort_keys=True) for r in answers)


def tables(args: argparse.Namespace) -> None:
    out = Path(args.out)
    runs = _runs(out)
    base = {s: avg_at_k(out / f"base-s{s}.json") for s in SEEDS if (out / f"base-s{s}.json").is_file()}
    print(f"learning rate {LEARNING_RATE}; untrained avg@4 per seed: "
          + ", ".join(f"{s}: {a:.3f}" for s, (a, _, _) in base.items()))
    _arm_table(runs, base)
    _paired_table(runs)
    duplicates = _duplicates(out, runs)
    _predictor(runs, base, duplicates)
    compute = sum(r["compute s"] for r in runs.values()) + sum(
        json.loads(p.read_text())["seconds"] for p in out.glob("base-s*.timing.json"))
    print(f"\ncompute: {len(runs)} runs and {len(base)} untrained evals, {compute / 3600:.2f} h of wall time in "
          "processes of one thread (two at a time on 2 cores)")
    if args.keep:
        _keep(out, Path(args.keep), runs)


def _arm_table(runs: dict, base: dict) -> None:
    cols = ["steps", "ACR", "ACR 1-5", "acr_post", "greedy", "avg@4", "samples", "tokens"]
    print("\nPer arm, mean over seeds (+- the SE over seeds; avg@4 and its gain with their 95% t intervals):\n")
    print("| arm | seeds | " + " | ".join(cols) + " | avg@4 - untrained |")
    print("|---|---|" + "---|" * (len(cols) + 1))
    for arm in ARMS:
        mine = [r for r in runs.values() if r["arm"] == arm]
        if not mine:
            continue
        cells = []
        for col in cols:
            values = [r[col] for r in mine]
            if col == "avg@4":
                cells.append(_interval(values, "{:.3f}"))
            elif col in ("samples", "tokens", "steps"):
                cells.append(f"{statistics.fmean(values):,.1f}".removesuffix(".0"))
            else:
                cells.append(f"{statistics.fmean(values):.3f}" + (f" +- {_se(values):.3f}" if len(values) > 1 else ""))
        gains = [r["avg@4"] - base[r["seed"]][0] for r in mine if r["seed"] in base]
        print(f"| {arm} | {len(mine)} | " + " | ".join(cells) + f" | {_interval(gains)} |")
    print("\nPer seed, final avg@4 (untrained first):\n")
    print("| seed | untrained | " + " | ".join(ARMS) + " |")
    print("|---|---|" + "---|" * len(ARMS))
    for seed in SEEDS:
        row = [runs.get(run_name(arm, seed), {}).get("avg@4") for arm in ARMS]
        if any(v is not None for v in row):
            first = f"{base[seed][0]:.3f}" if seed in base else "-"
            print(f"| {seed} | {first} | " + " | ".join("-" if v is None else f"{v:.3f}" for v in row) + " |")


def _paired_table(runs: dict) -> None:
    pairs = [PRIMARY] + [(arm, "grpo") for arm in ARMS if arm not in ("grpo", PRIMARY[0])] + [
        ("avspo", "avspo-paper"), ("budgeted", "reinforce_ada-pool")]
    print("\nPaired by seed, final avg@4 differences (95% t interval; decided when it excludes 0):\n")
    print("| difference | n | per seed | mean +- 95% t | decided |")
    print("|---|---|---|---|---|")
    for a, b in pairs:
        diffs = [(s, runs[run_name(a, s)]["avg@4"] - runs[run_name(b, s)]["avg@4"]) for s in SEEDS
                 if run_name(a, s) in runs and run_name(b, s) in runs]
        if len(diffs) < 2:
            continue
        values = [d for _, d in diffs]
        mean, half = mean_t_interval(values)
        verdict = "yes, " + ("above 0" if mean > 0 else "below 0") if abs(mean) > half else "no"
        label = f"{a} - {b}" + (" (primary)" if (a, b) == PRIMARY else "")
        print(f"| {label} | {len(values)} | " + ", ".join(f"{d:+.3f}" for d in values)
              + f" | {_interval(values)} | {verdict} |")


def _duplicates(out: Path, runs: dict) -> set[str]:
    """Runs that repeat another run of the same seed to every logged figure and held-out answer."""
    seen: dict[tuple, str] = {}
    dup = set()
    for name, r in runs.items():
        key = (r["seed"], _signature(out / name))
        if key in seen:
            dup.add(name)
            print(f"note: {name} repeats {seen[key]} to every logged figure and answer: counted once")
        else:
            seen[key] = name
    return dup


def _predictor(runs: dict, base: dict, duplicates: set[str]) -> None:
    print("\nACR of steps 1-5 against final avg@4 (Pearson r, least-squares line, two-sided p):\n")
    print("| runs | n | line | r | p |")
    print("|---|---|---|---|---|")
    for arm in ARMS:
        mine = [r for name, r in runs.items() if r["arm"] == arm]
        _fit_row(f"within {arm}, across seeds", [r["ACR 1-5"] for r in mine], [r["avg@4"] for r in mine])
    distinct = [r for name, r in runs.items() if name not in duplicates]
    _fit_row("every distinct run, no seed term", [r["ACR 1-5"] for r in distinct], [r["avg@4"] for r in distinct])
    with_base = [r for r in distinct if r["seed"] in base]
    _fit_row("every distinct run, gain over the seed's untrained avg@4", [r["ACR 1-5"] for r in with_base],
             [r["avg@4"] - base[r["seed"]][0] for r in with_base])
    # a per-seed intercept: each seed's runs centred on their own means, one common slope
    xs, ys = [], []
    for seed in SEEDS:
        mine = [r for r in distinct if r["seed"] == seed]
        if len(mine) > 1:
            mx, my = statistics.fmean(r["ACR 1-5"] for r in mine), statistics.fmean(r["avg@4"] for r in mine)
            xs += [r["ACR 1-5"] - mx for r in mine]
            ys += [r["avg@4"] - my for r in mine]
    _fit_row("every distinct run, centred within its seed (per-seed term)", xs, ys,
             lost_df=len({r["seed"] for r in distinct}) - 1)
    print(f"| the paper's own runs (arXiv 2605.21125; ACR of steps 1-100, accuracy in %) | - | "
          f"`{PAPER_LINE[0]} {PAPER_LINE[1]:+} x ACR_100` | -0.785 | - |")


def _fit_row(label: str, x: list[float], y: list[float], lost_df: int = 0) -> None:
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        print(f"| {label} | {len(x)} | - | - | - |")
        return
    fit = fit_line(x, y)
    p = fit.p_value
    if lost_df:  # centring within seeds spends one degree of freedom per seed beyond the first
        p = correlation_p_value(fit.r, len(x) - lost_df)
    print(f"| {label} | {len(x)} | `{fit.intercept:.3f} {fit.slope:+.3f} x ACR_1-5` | {fit.r:+.3f} | {p:.3g} |")


def _se(values: list[float]) -> float:
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")


def _interval(values: list[float], form: str = "{:+.3f}") -> str:
    """mean +- the half-width of its 95% t interval, both to the digits of `form`; one value alone, as it is"""
    if len(values) < 2:
        return form.format(values[0]) if values else "-"
    mean, half = mean_t_interval(values)
    return f"{form.format(mean)} +- {form.format(half).lstrip('+')}"


def _keep(out: Path, keep: Path, runs: dict) -> None:
    """Each run's metrics.jsonl, summary.json, eval and timing, and the untrained evals, gzipped into `keep`."""
    keep.mkdir(parents=True, exist_ok=True)
    for name in runs:
        for file in ("metrics.jsonl", "summary.json", "eval_avg4.json", "timing.json"):
            src = out / name / file
            if src.is_file():
                (keep / f"{name}.{file}.gz").write_bytes(gzip.compress(src.read_bytes(), mtime=0))
    for path in [*out.glob("base*-s*.json"), *out.glob("base*-s*.timing.json")]:  # study3: base<block>-s<seed>
        (keep / f"{path.name}.gz").write_bytes(gzip.compress(path.read_bytes(), mtime=0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("--out", default="runs/study2")
    t.add_argument("--workers", type=int, default=2)
    t.add_argument("--seeds", default="", help="comma-separated seeds (default: SEEDS)")
    t.add_argument("--keep", default="experiments/results/study2",
                   help="kept logs of finished runs, unpacked into --out first ('' : none)")
    r = sub.add_parser("tables")
    r.add_argument("--out", default="runs/study2")
    r.add_argument("--keep", default="experiments/results/study2", help="where the gzipped logs go ('' : nowhere)")
    args = parser.parse_args()
    {"train": train, "tables": tables}[args.command](args)


if __name__ == "__main__":
    main()
