"""The forecast against what runs measured: `grposcope forecast`'s expected ACR at the runs' G, next to the
ACR the runs logged over their first steps (collapse/acr, on the groups as drawn), each with its standard error.

    grposcope probe --dataset arithmetic --k 16 --prompts 80 --seed 0 --eval_size 48 \
        --max_completion_length 24 --max_prompt_length 256 --out probe.jsonl
    grposcope forecast probe.jsonl --group_sizes 2,4,8,16 --budget 16 --json forecast.json
    grposcope sweep --out measure --group_sizes 8 --seeds 10,11,12,13,14,15,16,17 --max_steps 5 \
        --learning_rate 1e-6 --eval_size 0
    python bench/forecast_vs_runs.py forecast.json measure --steps 5

The measured side: every group of the runs' first `--steps` steps, pooled; its SE is the binomial one over
groups (the runs have different seeds, so their prompts differ and the groups are independent). A second SE
treats each run as one observation (its own ACR over those steps, the SE over runs): it allows for groups of one
run sharing its prompt stream and policy. The forecast's SE is over the probed prompts. The two agree when
their difference is within about two combined SEs.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from grposcope.logging.jsonl import read_metrics
from grposcope.runs import load_run


def measured(runs: list[Path], steps: int) -> tuple[int, dict[str, tuple[float, float]]]:
    """(G, {metric: (mean over groups, binomial SE)}) over the runs' first `steps` steps, and "acr by run":
    (the mean of each run's own ACR, the SE over runs)."""
    sizes, per_step, groups, by_run = set(), [], 0, []
    for run in runs:
        records = [r for r in read_metrics(run / "metrics.jsonl") if r["step"] <= steps]
        summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").is_file() else {}
        g = int(summary.get("config", {}).get("num_generations", 0)) or _group_size(run)
        sizes.add(g)
        mine = [(int(round(r["sampler/samples_kept"] / g)), r) for r in records]  # (groups in the step, record)
        per_step += mine
        groups += sum(n for n, _ in mine)
        by_run.append(math.fsum(n * r["collapse/acr"] for n, r in mine) / sum(n for n, _ in mine))
    if len(sizes) != 1:
        raise SystemExit(f"the runs differ in group size ({sorted(sizes)}); compare runs of one G at a time")
    out = {}
    for name in ("collapse/acr", "collapse/acr_all_correct", "collapse/acr_all_wrong"):
        mean = math.fsum(n * r[name] for n, r in per_step) / groups
        out[name] = (mean, math.sqrt(mean * (1 - mean) / groups))
    run_mean = math.fsum(by_run) / len(by_run)
    run_se = math.sqrt(math.fsum((a - run_mean) ** 2 for a in by_run) / (len(by_run) - 1) / len(by_run)) \
        if len(by_run) > 1 else float("nan")
    return sizes.pop(), out | {"groups": (groups, 0.0), "acr by run": (run_mean, run_se)}


def _group_size(run: Path) -> int:
    """G from the run folder's name (grposcope sweep names runs g<G>-...)."""
    name = run.name
    if name.startswith("g") and name[1:].split("-")[0].isdigit():
        return int(name[1:].split("-")[0])
    raise SystemExit(f"cannot tell the group size of {run}; name it g<G>-... as grposcope sweep does")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("forecast", type=Path, help="grposcope forecast's --json output")
    parser.add_argument("runs", type=Path, nargs="+", help="run folders, or a sweep folder of them")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    runs = [p for path in args.runs for p in ([path] if (path / "metrics.jsonl").is_file() else
                                              sorted(q for q in path.iterdir() if (q / "metrics.jsonl").is_file()))]
    for run in runs:
        load_run(run)  # fails clearly on a folder that is not a run
    g, figures = measured(runs, args.steps)
    forecast = next((x for x in json.loads(args.forecast.read_text())["group_sizes"] if x["g"] == g), None)
    if forecast is None:
        raise SystemExit(f"{args.forecast} has no forecast for G = {g}; rerun forecast with --group_sizes {g}")
    acr, se = figures["collapse/acr"]
    print(f"measured: {len(runs)} runs, steps 1-{args.steps}, {figures['groups'][0]:.0f} groups of G = {g}: "
          f"ACR {acr:.3f} +- {se:.3f}, all-correct {figures['collapse/acr_all_correct'][0]:.3f} +- "
          f"{figures['collapse/acr_all_correct'][1]:.3f}, all-wrong {figures['collapse/acr_all_wrong'][0]:.3f} +- "
          f"{figures['collapse/acr_all_wrong'][1]:.3f}")
    print(f"forecast: {forecast['prompts']} prompts: ACR {forecast['acr']:.3f} +- {forecast['acr_se']:.3f}, "
          f"all-correct {forecast['all_correct']:.3f}, all-wrong {forecast['all_wrong']:.3f}")
    diff, combined = acr - forecast["acr"], math.hypot(se, forecast["acr_se"])
    print(f"difference {diff:+.3f}, combined SE {combined:.3f}, z = {diff / combined:+.2f}")
    run_acr, run_se = figures["acr by run"]
    diff, combined = run_acr - forecast["acr"], math.hypot(run_se, forecast["acr_se"])
    print(f"each run one observation: ACR {run_acr:.3f} +- {run_se:.3f} (SE over {len(runs)} runs); difference "
          f"{diff:+.3f}, combined SE {combined:.3f}, z = {diff / combined:+.2f}")


if __name__ == "__main__":
    main()
