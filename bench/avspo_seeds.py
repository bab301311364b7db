"""AVSPO over seeds on the quickstart: GRPO, AVSPO as the paper has it, and AVSPO with the all-wrong guard.

Each run is `grposcope train --preset quickstart` (SmolLM2-135M-Instruct, arithmetic, G = 8, 2 prompts a step)
with `--max_steps`, a seed, one torch thread (two runs share the 2 cores) and `measure_update` on. Runs whose
summary.json exists are skipped, so an interrupted sweep continues where it stopped; each run's model folder
is deleted afterwards (its metrics, completions and summary stay).

    .venv/bin/python bench/avspo_seeds.py run --root /work/runs/avspo --seeds 0 1 2 3 4 --lr 2e-5 --steps 30
    .venv/bin/python bench/avspo_seeds.py report --root /work/runs/avspo --out bench/results/avspo_seeds.json
    .venv/bin/python bench/avspo_seeds.py push    # the all-wrong advantage per strategy, K and r_anchor

The report: per run and per method (mean and standard error over seeds), greedy held-out accuracy before and
after on the run's own 48-prompt split, the mean all-wrong ACR and the mean entropy over the first and the last
10 steps, the mean all-wrong advantage share, and how far the updates moved the all-wrong completions.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

METHODS = {
    "grpo": ["--use_avspo", "false", "--advantage_estimator", "grpo"],
    "avspo": ["--all_wrong_max_share", "none"],  # AVSPO as the paper has it
    "avspo_guard": ["--all_wrong_max_share", "0.5"],  # the preset (and the default since the guard was measured)
}
# runs whose method the current code no longer has; their folders stay and are reported beside the others
RETIRED = {
    # the first guard: it counted augmented all-correct groups as counterweight (checkout d6af6ab to re-run)
    "avspo_guard_d6af6ab": "--all_wrong_max_share 0.5 at commit d6af6ab",
}


def run_name(method: str, lr: str, seed: int) -> str:
    return f"{method}-lr{lr}-s{seed}"


def one_run(root: Path, method: str, lr: str, steps: int, seed: int) -> str:
    out = root / run_name(method, lr, seed)
    if (out / "summary.json").is_file():
        return f"{out.name}: done before"
    cmd = [sys.executable, "-m", "grposcope.cli", "train", "--preset", "quickstart", "--output_dir", str(out),
           "--max_steps", str(steps), "--seed", str(seed), "--learning_rate", lr, "--torch_threads", "1",
           "--measure_update", "true", "--overwrite_output_dir", "true", *METHODS[method]]
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{out.name}.log", "w") as log:
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    shutil.rmtree(out / "model", ignore_errors=True)  # 0.5 GB each; the figures are in the files kept
    return f"{out.name}: exit {code}"


def run(args: argparse.Namespace) -> None:
    jobs = [(m, s) for s in args.seeds for m in args.methods]  # a seed's methods together: usable early
    with ThreadPoolExecutor(args.workers) as pool:
        for line in pool.map(lambda job: one_run(Path(args.root), job[0], args.lr, args.steps, job[1]), jobs):
            print(line, flush=True)


def _mean(values: list[float]) -> float:
    values = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.fmean(values) if values else float("nan")


def run_figures(folder: Path) -> dict[str, float] | None:
    """One finished run's figures, from its summary.json and metrics.jsonl."""
    if not (folder / "summary.json").is_file():
        return None
    summary = json.loads((folder / "summary.json").read_text())
    lines = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    steps = [line for line in lines if "collapse/acr" in line]
    first, last = steps[:10], steps[-10:]
    return {
        "before": summary["eval/accuracy before"],
        "after": summary["eval/accuracy after"],
        "acr_all_wrong": _mean([s["collapse/acr_all_wrong"] for s in steps]),
        "acr_all_wrong_first10": _mean([s["collapse/acr_all_wrong"] for s in first]),
        "entropy_first10": _mean([s["entropy/mean"] for s in first]),
        "entropy_last10": _mean([s["entropy/mean"] for s in last]),
        "all_wrong_share": _mean([s.get("avspo/all_wrong_share", 0.0) for s in steps]),
        "logp_change_all_wrong": _mean([s.get("update/logp_change_all_wrong") for s in steps]),
        "logp_change_other": _mean([s.get("update/logp_change_other") for s in steps]),
        "length_first10": _mean([s["completion/mean_length"] for s in first]),
        "length_last10": _mean([s["completion/mean_length"] for s in last]),
        "truncated_last10": _mean([s["completion/truncated_frac"] for s in last]),
        **_after_all_wrong_steps(steps),
        **_clean_format(folder),
        **{f"accuracy@{line['step']}": line["eval/accuracy"] for line in lines if "eval/accuracy" in line},
        **{f"after/{k.split('/')[-1].split()[0]}": v for k, v in summary.items()
           if k.startswith("eval/accuracy/") and k.endswith(" after")},
    }


def _after_all_wrong_steps(steps: list[dict]) -> dict[str, float]:
    """The mechanism's footprint: the entropy change from a step to the next, after steps whose every group
    was all-wrong (AVSPO pushes every completion down there; GRPO makes no update) and after the others."""
    after_wrong, after_other = [], []
    for now, nxt in zip(steps, steps[1:]):
        (after_wrong if now["collapse/acr_all_wrong"] == 1.0 else after_other).append(
            nxt["entropy/mean"] - now["entropy/mean"])
    return {"all_wrong_steps": float(len(after_wrong)), "entropy_step_after_all_wrong": _mean(after_wrong),
            "entropy_step_after_other": _mean(after_other)}


# "12 + 7 = 19": the reply the quickstart's system prompt asks for, ending (EOS) right after the number
CLEAN = re.compile(r"\s*-?\d+ [-+*] -?\d+ = -?\d+\.?\s*")


def _clean_format(folder: Path) -> dict[str, float]:
    """The share of completions that are the bare equation and stop there, over the first and the last 10
    steps (from completions.jsonl): what a push on every token of all-wrong completions, the shared format
    and EOS included, wears away."""
    path = folder / "completions.jsonl"
    if not path.is_file():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    last = max(r["step"] for r in rows)

    def share(keep) -> float:
        texts = [r["completion"][0]["content"] for r in rows if keep(r["step"])]
        return sum(bool(CLEAN.fullmatch(t)) for t in texts) / len(texts) if texts else float("nan")

    return {"clean_first10": share(lambda s: s <= 10), "clean_last10": share(lambda s: s > last - 10),
            "all_wrong_with_answer": _answer_in_all_wrong(rows)}


QUESTION = re.compile(r"What is (-?\d+) ([-+*]) (-?\d+)\?")


def _answer_in_all_wrong(rows: list[dict]) -> float:
    """Is the reward too strict? The share of completions in all-wrong groups that contain the right result
    anywhere (a reward that missed it would leave it there)."""
    groups: dict[tuple, list[str]] = {}
    for r in rows:
        reply = (r["reward"], r["completion"][0]["content"])
        groups.setdefault((r["step"], r["prompt"][-1]["content"]), []).append(reply)
    seen = hits = 0
    for (_, question), replies in groups.items():
        match = QUESTION.fullmatch(question)
        if match is None or any(reward > 0 for reward, _ in replies):
            continue
        a, op, b = int(match[1]), match[2], int(match[3])
        answer = str({"+": a + b, "-": a - b, "*": a * b}[op])
        seen += len(replies)
        hits += sum(answer in re.findall(r"-?\d+", text) for _, text in replies)
    return hits / seen if seen else float("nan")


def report(args: argparse.Namespace) -> None:
    root = Path(args.root)
    runs = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        figures = run_figures(folder)
        if figures is not None:
            runs[folder.name] = figures
    table: dict[str, dict[str, dict[str, float]]] = {}
    for name, figures in runs.items():
        method, lr, _ = re.fullmatch(r"(.+)-lr(.+)-s(\d+)", name).groups()
        group = table.setdefault(f"{method} lr {lr}", {})
        for key, value in figures.items():
            group.setdefault(key, []).append(value)
    summary = {group: {key: {"mean": _mean(v), "se": _se(v), "n": len(v)} for key, v in figures.items()}
               for group, figures in table.items()}
    result = {"runs": runs, "summary": summary}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for name, f in runs.items():
        print(f"{name:28s} {f['before']:.3f} -> {f['after']:.3f}  all-wrong ACR {f['acr_all_wrong']:.2f} "
              f"(first 10: {f['acr_all_wrong_first10']:.2f})  entropy {f['entropy_first10']:.2f} / "
              f"{f['entropy_last10']:.2f}  all-wrong share {f['all_wrong_share']:.2f}  "
              f"dlogp wrong {f['logp_change_all_wrong']:+.4f} other {f['logp_change_other']:+.4f}  "
              f"clean {f.get('clean_first10', float('nan')):.2f} / {f.get('clean_last10', float('nan')):.2f}  "
              f"H after all-wrong step {f['entropy_step_after_all_wrong']:+.3f} ({f['all_wrong_steps']:.0f}) "
              f"other {f['entropy_step_after_other']:+.3f}")
    for lr in sorted({re.fullmatch(r".+-lr(.+)-s\d+", n).group(1) for n in runs}):
        print(markdown(runs, lr))
    for group, s in summary.items():
        change = [a - b for a, b in zip(table[group]["after"], table[group]["before"])]
        print(f"{group:22s} n={s['after']['n']} after {s['after']['mean']:.3f} +- {s['after']['se']:.3f}  "
              f"change {_mean(change):+.3f} +- {_se(change):.3f}")


def markdown(runs: dict[str, dict[str, float]], lr: str) -> str:
    """The per-seed table of docs/algorithms.md ("When it hurts"): accuracy before and after, and per method the
    mean all-wrong ACR and the entropy over the first / last 10 steps; then the mean and standard error."""
    methods = [m for m in [*METHODS, *RETIRED] if any(name.startswith(f"{m}-lr{lr}-") for name in runs)]
    seeds = sorted({int(re.fullmatch(r".+-s(\d+)", n).group(1)) for n in runs if f"-lr{lr}-" in n})
    head = "| seed | before | " + " | ".join(f"{m} after" for m in methods) + " | " + " | ".join(
        f"{m}: all-wrong ACR, entropy first 10 / last 10" for m in methods) + " |"
    rows = [head, "|" + "---|" * (2 + 2 * len(methods))]
    per = {m: [runs.get(run_name(m, lr, s)) for s in seeds] for m in methods}
    for i, seed in enumerate(seeds):
        figures = [per[m][i] for m in methods]
        before = next((f["before"] for f in figures if f), float("nan"))
        after = [f"{f['after']:.3f}" if f else "" for f in figures]
        mech = [f"{f['acr_all_wrong']:.2f}, {f['entropy_first10']:.2f} / {f['entropy_last10']:.2f}" if f else ""
                for f in figures]
        rows.append(f"| {seed} | {before:.3f} | " + " | ".join(after) + " | " + " | ".join(mech) + " |")
    done = {m: [f for f in per[m] if f] for m in methods}
    change = {m: [f["after"] - f["before"] for f in done[m]] for m in methods}
    rows.append("| mean change (+- s.e.) | | " + " | ".join(
        f"{_mean(change[m]):+.3f} +- {_se(change[m]):.3f} (n={len(change[m])})" for m in methods) + " | " +
        " | ".join(f"{_mean([f['acr_all_wrong'] for f in done[m]]):.2f}, "
                   f"{_mean([f['entropy_first10'] for f in done[m]]):.2f} / "
                   f"{_mean([f['entropy_last10'] for f in done[m]]):.2f}" for m in methods) + " |")
    return "\n".join(rows)


def push(args: argparse.Namespace) -> None:
    """The advantage AVSPO gives every completion of an all-wrong group of G = 8, per strategy, K and r_anchor:
    the group is normalised by the virtual values' own std, so the anchor's size cancels out."""
    import torch

    from grposcope.core.virtual_samples import STRATEGIES, advantages_with_virtual, virtual_rewards

    rewards = torch.zeros(1, 8)
    print("| strategy | " + " | ".join(f"K = {k}, r_anchor = {a}" for k in (1, 4, 8) for a in (0.1, 0.5)) + " |")
    print("|---|" + "---|" * 6)
    for strategy in STRATEGIES:
        cells = []
        for k in (1, 4, 8):
            for anchor in (0.1, 0.5):
                virtual = virtual_rewards(torch.zeros(1), torch.tensor([False]), k, strategy, r_anchor=anchor,
                                          generator=torch.Generator().manual_seed(0))
                cells.append(f"{advantages_with_virtual(rewards, virtual)[0, 0].item():+.3f}")
        print(f"| {strategy} | " + " | ".join(cells) + " |")


def _se(values: list[float]) -> float:
    values = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--root", required=True)
    r.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    r.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    r.add_argument("--lr", default="2e-5")
    r.add_argument("--steps", type=int, default=30)
    r.add_argument("--workers", type=int, default=2)
    p = sub.add_parser("report")
    p.add_argument("--root", required=True)
    p.add_argument("--out")
    sub.add_parser("push")
    args = parser.parse_args()
    {"run": run, "report": report, "push": push}[args.command](args)


if __name__ == "__main__":
    main()
