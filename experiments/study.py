"""The study behind docs/results.md: does mitigating advantage collapse pay, at equal generated samples?

Every method trains the embedded SmolLM2-135M-Instruct on the arithmetic task (easy, medium and hard prompts in
equal shares, so that groups collapse both all-correct and all-wrong) with the quickstart's settings, until it
has generated BUDGET completions (`--max_samples`: dynamic sampling and Reinforce-Ada spend more per step, so
they take fewer steps). Each trained model is then scored on the run's held-out prompts by `grposcope eval`:
greedy pass@1 and avg@4 (4 samples at T = 1), with the standard error over prompts.

    python experiments/study.py train --out runs/study          # the runs; finished ones are skipped
    python experiments/study.py simulate --out runs/study/sim   # the simulator at 10,000 prompts, G = 8 and 16
    python experiments/study.py tables --out runs/study         # the tables of docs/results.md, the kept logs
    python experiments/study.py regress                         # its ACR -> accuracy line, from the kept logs

`train` runs two trainings at a time with one torch thread each (2 cores). A killed run starts again from
its beginning; runs that finished (their eval file is written) are kept and skipped, so the study can be
continued and extended by adding methods or seeds below.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

BUDGET = 320  # completions generated per run: 20 GRPO steps of 2 prompts x 8
EVAL_SIZE = 96  # held-out prompts (seeded split, as in training)
EVAL_K = 4  # samples per held-out prompt for avg@k
SEEDS = (0, 1, 2)
TRAIN = [
    "--dataset_name", "arithmetic", "--num_generations", "8", "--per_device_train_batch_size", "8",
    "--gradient_accumulation_steps", "2", "--max_completion_length", "24", "--max_prompt_length", "256",
    "--learning_rate", "2e-5", "--lr_scheduler_type", "constant", "--max_samples", str(BUDGET),
    "--max_steps", "200", "--eval_size", str(EVAL_SIZE), "--logging_steps", "1", "--save_steps", "100000",
    "--torch_threads", "1", "--overwrite_output_dir", "true",
]
EVAL = ["--dataset", "arithmetic", "--num_samples", str(EVAL_K), "--eval_size", str(EVAL_SIZE),
        "--max_completion_length", "24", "--max_prompt_length", "256", "--overwrite"]
AVSPO = ["--advantage_estimator", "avspo"]  # stratified, adaptive threshold, guard 0.5: the defaults
# name -> (flags, seeds): the four methods the issue asks for on 3 seeds first, then the one-seed ablations
METHODS: dict[str, tuple[list[str], tuple[int, ...]]] = {
    "grpo": ([], SEEDS),
    "avspo": (AVSPO, SEEDS),
    "reinforce_ada-balance": (["--sampler", "reinforce_ada", "--exit_rule", "balance"], SEEDS),
    "budgeted": (["--sampler", "budgeted"], SEEDS),
    "dapo": (["--sampler", "dynamic", "--epsilon_high", "0.28", "--loss_type", "dapo"], (0,)),
    "reinforce_ada-pos": (["--sampler", "reinforce_ada", "--exit_rule", "pos"], (0,)),
    **{f"avspo-{s}": ([*AVSPO, "--virtual_sample_strategy", s], (0,))
       for s in ("uniform", "fixed", "exp_decay", "opposite")},
    **{f"avspo-tau{t}": ([*AVSPO, "--acr_threshold_adaptive", "false", "--acr_threshold_init", t], (0,))
       for t in ("0.3", "0.5", "0.7")},
}
CLI = [sys.executable, "-m", "grposcope.cli"]
# one thread per process: two runs share the 2 cores, and more threads than cores make OpenMP spin (measured:
# an eval that takes minutes alone did not finish in 7 minutes beside a second one at 2 threads each)
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def run_name(method: str, seed: int) -> str:
    return f"{method}-s{seed}"


def jobs() -> list[tuple[str, list[str], int]]:
    """(run name, method flags, seed), seed by seed for the 3-seed methods, then the ablations."""
    out = []
    for seed in SEEDS:
        out += [(run_name(m, seed), flags, seed) for m, (flags, seeds) in METHODS.items() if seed in seeds
                and len(seeds) > 1]
    out += [(run_name(m, s), flags, s) for m, (flags, seeds) in METHODS.items() if len(seeds) == 1 for s in seeds]
    return out


def train_one(out: Path, name: str, flags: list[str], seed: int, train_flags: list[str] = TRAIN,
              eval_flags: list[str] = EVAL) -> str:
    """Trains one run, scores it with `grposcope eval`, and writes the seconds both took to its timing.json."""
    folder = out / name
    if (folder / "eval_avg4.json").is_file():
        return f"{name}: done before"
    t0 = time.perf_counter()
    trained = (folder / "summary.json").is_file() and (folder / "model").is_dir()  # only its eval is missing
    with open(out / f"{name}.log", "a" if trained else "w") as log:
        code = 0 if trained else subprocess.run(
            [*CLI, "train", "--output_dir", str(folder), "--seed", str(seed), *train_flags, *flags],
            stdout=log, stderr=subprocess.STDOUT, env=ENV).returncode
        if code == 0:
            code = subprocess.run([*CLI, "eval", "--model", str(folder / "model"), "--seed", str(seed), *eval_flags,
                                   "--output", str(folder / "eval_avg4.json")], stdout=log,
                                  stderr=subprocess.STDOUT, env=ENV).returncode
    seconds = time.perf_counter() - t0
    if code == 0:
        shutil.rmtree(folder / "model")  # 540 MB each; the logs and the eval file are what the study reads
        timing = folder / "timing.json"  # a run whose eval alone was redone adds to its first attempt's time
        before = json.loads(timing.read_text())["seconds"] if timing.is_file() else 0.0
        timing.write_text(json.dumps({"seconds": before + seconds}) + "\n")
    return f"{name}: exit {code} after {seconds:.0f} s"


def base_eval(out: Path, seed: int) -> str:
    """The untrained model on each seed's held-out split: the 'before' of every run of that seed."""
    path = out / f"base-s{seed}.json"
    if path.is_file():
        return f"base-s{seed}: done before"
    with open(out / f"base-s{seed}.log", "w") as log:
        code = subprocess.run([*CLI, "eval", "--model", "embedded:smollm2-135m-instruct", "--seed", str(seed),
                               *EVAL, "--output", str(path)], stdout=log, stderr=subprocess.STDOUT, env=ENV).returncode
    return f"base-s{seed}: exit {code}"


def train(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    todo = [(n, f, s) for n, f, s in jobs() if not args.only or n.split("-s")[0] in args.only.split(",")]
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        futures = [pool.submit(train_one, out, *job) for job in todo]
        futures += [pool.submit(base_eval, out, seed) for seed in SEEDS]
        for future in futures:
            print(future.result(), flush=True)


# --- the simulator ------------------------------------------------------------------------------------------

# name -> (sampler, sampler options, estimator, estimator options). The simulator has no clipping and no token
# loss: there, DAPO is its dynamic sampling alone.
SIM_METHODS: dict[str, tuple[str, dict, str, dict]] = {
    "grpo": ("fixed", {}, "grpo", {}),
    "avspo": ("fixed", {}, "avspo", {}),
    "dapo (dynamic sampling)": ("dynamic", {}, "grpo", {}),
    "reinforce_ada-balance": ("reinforce_ada", {"exit_rule": "balance"}, "grpo", {}),
    "reinforce_ada-pos": ("reinforce_ada", {"exit_rule": "pos"}, "grpo", {}),
    "budgeted": ("budgeted", {}, "grpo", {}),
    **{f"avspo-{s}": ("fixed", {}, "avspo", {"virtual_sample_strategy": s})
       for s in ("uniform", "fixed", "exp_decay", "opposite")},
    **{f"avspo-tau{t}": ("fixed", {}, "avspo", {"acr_threshold_adaptive": False, "acr_threshold_init": t})
       for t in (0.3, 0.5, 0.7)},
}
SIM_SEEDS = tuple(range(10))
SIM_STEPS = 50  # the budget below is what the fixed sampler spends in these steps; others reach it sooner
# difficulty_mean of the prompts' base logits: the simulator's default (-1: mean pass rate 0.37, ACR ~0.37 at
# G = 8), then a hard population (-3) where most groups collapse all-wrong
SIM_DIFFICULTIES = (-1.0, -3.0)


def _sim_path(out: Path, g: int, name: str, seed: int, mu: float = -1.0) -> Path:
    level = "" if mu == -1.0 else f"mu{mu:g}-"
    return out / f"g{g}-{level}{name.split(' ')[0]}-s{seed}.json"


def simulate(args: argparse.Namespace) -> None:
    """In-process (the simulator imports only torch and grposcope's samplers and estimators): 260 runs."""
    from grposcope.sim import SimConfig
    from grposcope.sim import simulate as run

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for mu in SIM_DIFFICULTIES:
        for g in (8, 16):
            for name, (sampler, sampler_options, estimator, estimator_options) in SIM_METHODS.items():
                t0 = time.perf_counter()
                for seed in SIM_SEEDS:
                    path = _sim_path(out, g, name, seed, mu)
                    if not path.is_file():
                        config = SimConfig(sampler=sampler, sampler_options=sampler_options, estimator=estimator,
                                           estimator_options=estimator_options, prompts=10_000, num_generations=g,
                                           steps=SIM_STEPS, seed=seed, difficulty_mean=mu)
                        path.write_text(json.dumps({"runs": [run(config).to_dict()]}) + "\n")
                print(f"difficulty_mean {mu:g}, G={g} {name}: {len(SIM_SEEDS)} seeds, "
                      f"{time.perf_counter() - t0:.0f} s", flush=True)


def sim_row(paths: list[Path], budget: float) -> dict[str, tuple[float, float]]:
    """Per seed: held-out accuracy once `budget` samples were generated (the first step at or past it), the
    ACR and acr_post over those steps, and the steps taken; mean and SE over seeds."""
    per_seed: dict[str, list[float]] = {}
    for path in paths:
        run = json.loads(path.read_text())["runs"][0]
        history = run["history"]
        totals = history["samples_total"]
        last = next((i for i, total in enumerate(totals) if total >= budget), len(totals) - 1)  # or its end
        picked = {"heldout accuracy": history["heldout_accuracy"][last], "steps": last + 1,
                  "ACR": statistics.fmean(history["collapse/acr"][: last + 1]),
                  "acr_post": statistics.fmean(history["collapse/acr_post"][: last + 1]),
                  "samples": history["samples_total"][last]}
        for key, value in picked.items():
            per_seed.setdefault(key, []).append(value)
    return {key: (statistics.fmean(v), _se(v)) for key, v in per_seed.items()}


# --- the tables ---------------------------------------------------------------------------------------------

def _se(values: list[float]) -> float:
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")


def avg_at_k(path: Path) -> tuple[float, float, float]:
    """avg@k over prompts with its standard error over prompts, and greedy pass@1."""
    records = json.loads(path.read_text())["records"]
    per_prompt = [r["num_correct"] / EVAL_K for r in records]
    return statistics.fmean(per_prompt), _se(per_prompt), statistics.fmean(r["greedy_correct"] for r in records)


def run_figures(folder: Path) -> dict[str, float]:
    from grposcope.logging.jsonl import read_metrics

    steps = [line for line in read_metrics(folder / "metrics.jsonl") if "collapse/acr" in line]
    summary = json.loads((folder / "summary.json").read_text())
    avg, avg_se, greedy = avg_at_k(folder / "eval_avg4.json")
    return {
        "steps": len(steps),
        "ACR": statistics.fmean(s["collapse/acr"] for s in steps),
        "ACR 1-5": statistics.fmean(s["collapse/acr"] for s in steps[:5]),
        "all-correct": statistics.fmean(s["collapse/acr_all_correct"] for s in steps),
        "all-wrong": statistics.fmean(s["collapse/acr_all_wrong"] for s in steps),
        "acr_post": statistics.fmean(s["collapse/acr_post"] for s in steps),
        "avg@4": avg, "avg@4 SE": avg_se, "greedy": greedy,
        "samples": sum(s["sampler/samples_generated"] for s in steps),
        "tokens": sum(s["sampler/tokens_generated"] for s in steps),
        "wall s": summary["wall_time_s"],
    }


def tables(args: argparse.Namespace) -> None:
    out = Path(args.out)
    keep = Path(args.keep) if args.keep else None
    base = {s: avg_at_k(out / f"base-s{s}.json") for s in SEEDS if (out / f"base-s{s}.json").is_file()}
    print(f"untrained model, avg@{EVAL_K} / greedy on each seed's {EVAL_SIZE} held-out prompts: "
          + ", ".join(f"seed {s}: {a:.3f} +- {se:.3f} / {g:.3f}" for s, (a, se, g) in base.items()))
    cols = ["steps", "ACR", "all-correct", "all-wrong", "acr_post", "greedy", "avg@4", "samples", "tokens", "wall s"]
    print("\n| method | seeds | " + " | ".join(cols) + " | avg@4 - untrained |")
    print("|---|---|" + "---|" * (len(cols) + 1))
    per_run: dict[str, dict[str, float]] = {}
    for method, (_, seeds) in METHODS.items():
        done = [s for s in seeds if (out / run_name(method, s) / "eval_avg4.json").is_file()]
        if not done:
            continue
        figures = [run_figures(out / run_name(method, s)) for s in done]
        for s, f in zip(done, figures):
            per_run[run_name(method, s)] = f
        gains = [f["avg@4"] - base[s][0] for s, f in zip(done, figures) if s in base]
        cells = []
        for col in cols:
            values = [f[col] for f in figures]
            mean = statistics.fmean(values)
            text = _fmt(col, mean)
            if col == "avg@4":
                # one seed: the SE over prompts; several: the SE over seeds
                text += f" +- {figures[0]['avg@4 SE']:.3f}" if len(done) == 1 else f" +- {_se(values):.3f}"
            elif len(done) > 1 and col in ("ACR", "acr_post", "greedy"):
                text += f" +- {_se(values):.3f}"
            cells.append(text)
        gain = "n/a" if not gains else (f"{statistics.fmean(gains):+.3f}"
                                         + (f" +- {_se(gains):.3f}" if len(gains) > 1 else ""))
        print(f"| {method} | {','.join(map(str, done))} | " + " | ".join(cells) + f" | {gain} |")
    print("\nPaired with GRPO on the same seed (same prompts, same held-out split), avg@4 difference per seed:")
    for method, (_, seeds) in METHODS.items():
        diffs = [per_run[run_name(method, s)]["avg@4"] - per_run[run_name("grpo", s)]["avg@4"] for s in seeds
                 if run_name(method, s) in per_run and run_name("grpo", s) in per_run]
        if method != "grpo" and diffs:
            print(f"  {method}: " + ", ".join(f"{d:+.3f}" for d in diffs)
                  + (f"; mean {statistics.fmean(diffs):+.3f} +- {_se(diffs):.3f}" if len(diffs) > 1 else ""))
    grpo = [per_run[run_name("grpo", s)] for s in SEEDS if run_name("grpo", s) in per_run]
    if len(grpo) > 1:  # each run one observation: its groups share a prompt stream (seed 2's collapses most)
        whole, early = [f["ACR"] for f in grpo], [f["ACR 1-5"] for f in grpo]
        print(f"\nGRPO, {len(grpo)} runs: ACR {statistics.fmean(whole):.3f} +- {_se(whole):.3f} (SE over seeds); "
              f"steps 1-5: {statistics.fmean(early):.3f} +- {_se(early):.3f} "
              "(the probe's forecast for the quickstart task: 0.622 +- 0.047)")
    print("\nPer run:")
    for name, f in per_run.items():
        print(f"  {name}: " + ", ".join(f"{k} {_fmt(k, v)}" for k, v in f.items()))
    if keep:
        _keep_logs(out, keep, per_run)
    sim = out / "sim"
    if sim.is_dir():
        rows = _sim_tables(sim)
        if keep:  # the figures each table row averages, and every run itself (its whole history), one per line
            (keep / "sim_runs.json.gz").write_bytes(gzip.compress(json.dumps(rows, indent=0).encode(), mtime=0))
            lines = [json.dumps({"file": path.name, **json.loads(path.read_text())})
                     for path in sorted(sim.glob("*.json"))]
            (keep / "sim_raw.jsonl.gz").write_bytes(gzip.compress("\n".join(lines).encode() + b"\n", mtime=0))


def _fmt(col: str, value: float) -> str:
    if col in ("samples", "tokens", "steps"):
        return f"{value:,.0f}" if col != "steps" else f"{value:.1f}".rstrip("0").rstrip(".")
    if col == "wall s":
        return f"{value:.0f}"
    return f"{value:.3f}"


def _keep_logs(out: Path, keep: Path, runs: dict[str, dict[str, float]]) -> None:
    """Each run's metrics.jsonl and summary.json, and the eval files, gzipped into `keep` (in the repository)."""
    keep.mkdir(parents=True, exist_ok=True)
    for name in runs:
        for src, dst in ((out / name / "metrics.jsonl", f"{name}.metrics.jsonl.gz"),
                         (out / name / "summary.json", f"{name}.summary.json.gz"),
                         (out / name / "eval_avg4.json", f"{name}.eval_avg4.json.gz")):
            (keep / dst).write_bytes(gzip.compress(src.read_bytes(), mtime=0))
    for seed in SEEDS:
        path = out / f"base-s{seed}.json"
        if path.is_file():
            (keep / f"base-s{seed}.json.gz").write_bytes(gzip.compress(path.read_bytes(), mtime=0))


def _sim_tables(sim: Path) -> list[dict]:
    rows = []
    for mu, g in [(mu, g) for mu in SIM_DIFFICULTIES for g in (8, 16)]:
        budget = 256 * g * SIM_STEPS  # what the fixed sampler spends in SIM_STEPS steps
        print(f"\nSimulator, 10,000 prompts, difficulty_mean {mu:g}, G = {g}, at {budget:,.0f} generated samples "
              f"(mean +- SE over seeds):\n")
        print("| method | seeds | steps | ACR | acr_post | held-out accuracy |")
        print("|---|---|---|---|---|---|")
        for name in SIM_METHODS:
            paths = [p for p in (_sim_path(sim, g, name, seed, mu) for seed in SIM_SEEDS) if p.is_file()]
            if not paths:
                continue
            row = sim_row(paths, budget)
            rows.append({"difficulty_mean": mu, "G": g, "method": name, "seeds": len(paths),
                         **{key: {"mean": m, "se": se} for key, (m, se) in row.items()}})
            print(f"| {name} | {len(paths)} | {row['steps'][0]:.1f} | {row['ACR'][0]:.3f} +- {row['ACR'][1]:.3f} | "
                  f"{row['acr_post'][0]:.3f} +- {row['acr_post'][1]:.3f} | "
                  f"{row['heldout accuracy'][0]:.4f} +- {row['heldout accuracy'][1]:.4f} |")
    return rows


def regress(args: argparse.Namespace) -> None:
    """Round 1's ACR -> accuracy line (docs/results.md, section 4), from the kept logs, and what it rests on:
    the fit over the 21 runs, without seed 2, seed 0 alone, each duplicate run once, and with the ACR of steps
    1-5 instead of the whole run's."""
    from grposcope.reports.regression import fit_line

    keep = Path(args.keep)
    runs = {}
    for path in sorted(keep.glob("*.summary.json.gz")):
        name = path.name.removesuffix(".summary.json.gz")
        lines = gzip.decompress((keep / f"{name}.metrics.jsonl.gz").read_bytes()).decode().splitlines()
        acr = [json.loads(line)["collapse/acr"] for line in lines if '"collapse/acr"' in line]
        runs[name] = (statistics.fmean(acr), statistics.fmean(acr[:5]),
                      json.loads(gzip.decompress(path.read_bytes()))["eval/accuracy after"])
    duplicates = {"avspo-tau0.5-s0", "avspo-tau0.7-s0"}  # avspo's and grpo's runs again, to every figure
    for label, names, which in (
            ("all runs, whole-run ACR", list(runs), 0),
            ("without seed 2", [n for n in runs if not n.endswith("-s2")], 0),
            ("seed 0 alone", [n for n in runs if n.endswith("-s0")], 0),
            ("each duplicate once", [n for n in runs if n not in duplicates], 0),
            ("each duplicate once, ACR of steps 1-5", [n for n in runs if n not in duplicates], 1)):
        fit = fit_line([runs[n][which] for n in names], [runs[n][2] for n in names])
        print(f"{label}: n = {fit.n}, greedy accuracy = {fit.intercept:.3f} {fit.slope:+.3f} x ACR, "
              f"r = {fit.r:+.3f}, p = {fit.p_value:.2g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("--out", default="runs/study")
    t.add_argument("--workers", type=int, default=2)
    t.add_argument("--only", default="", help="comma-separated method names (default: all)")
    s = sub.add_parser("simulate")
    s.add_argument("--out", default="runs/study/sim")
    r = sub.add_parser("tables")
    r.add_argument("--out", default="runs/study")
    r.add_argument("--keep", default="experiments/results/study", help="where the gzipped logs go ('' : nowhere)")
    g = sub.add_parser("regress")
    g.add_argument("--keep", default="experiments/results/study")
    args = parser.parse_args()
    {"train": train, "simulate": simulate, "tables": tables, "regress": regress}[args.command](args)


if __name__ == "__main__":
    main()
