"""The four samplers compared: in the collapse simulator, and on the quickstart task with the embedded model.

For each sampler: completions generated per step, the informative fraction of the trained groups, the
post-mitigation collapse rate (`collapse/acr_post`) and the accuracy after a fixed budget of generated
completions (the same budget for every sampler, so a sampler that spends more per step takes fewer steps).

    .venv/bin/python bench/samplers.py                       # both parts (~25 min; the simulator's 5 s)
    .venv/bin/python bench/samplers.py --part sim            # simulator only
    .venv/bin/python bench/samplers.py --part embedded --budget 320 --out bench/results

Simulator part: 10,000 prompts, G = 16, the same seed and prompts for every sampler; `budgeted` also at
reinforce_ada's measured samples per step (the goal's "same number of generated samples"). Embedded part:
the quickstart preset (SmolLM2-135M-Instruct, arithmetic, G = 8, 2 prompts a step, lr 2e-5) with plain GRPO
advantages (reinforce_ada with its pool baseline), run until `--budget` completions were generated, held-out
greedy accuracy before and after; once on the quickstart's 1000 training prompts (a run sees each prompt
about once: budgeted has only its prior) and once on 32 (it sees each several times: its beliefs matter).
Nothing else may run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

SAMPLERS = ("fixed", "dynamic", "reinforce_ada", "budgeted")
EMBEDDED_OPTIONS = {
    "fixed": {},
    "dynamic": {"max_gen_batches": 3},
    "reinforce_ada": {"advantage_estimator": "pool", "round_size": 8, "max_rounds": 4},
    "budgeted": {},
}


# --- the embedded model -----------------------------------------------------------------------------------


def embedded_run(name: str, budget: int, workdir: str, dataset_size: int | None) -> dict:
    """The quickstart with sampler `name`, stopped once `budget` completions were generated."""
    from grposcope import GRPOConfig, GRPOTrainer
    from grposcope.presets import preset

    steps: list[dict] = []

    class StopAtBudget:
        """Records every step; ends the run (max_steps = this step) once the budget is spent."""

        def on_step_end(self, trainer, metrics):
            steps.append(metrics)
            if sum(m["sampler/samples_generated"] for m in steps) >= budget:
                trainer.max_steps = trainer.global_step

    values = preset("quickstart") | {
        "output_dir": os.path.join(workdir, name), "use_avspo": False, "advantage_estimator": "grpo",
        "sampler": name, "max_steps": 10_000, "eval_steps": None, "save_steps": 10_000, "logging_steps": 10,
        "dataset_size": dataset_size,
    } | EMBEDDED_OPTIONS[name]
    t0 = time.perf_counter()
    summary = GRPOTrainer(args=GRPOConfig(**values), callbacks=[StopAtBudget()]).train()
    generated = sum(m["sampler/samples_generated"] for m in steps)
    g = values["num_generations"]
    informative = sum(m["sampler/samples_kept"] / g * m["sampler/informative_frac"] for m in steps)
    return {
        "sampler": name,
        "steps": len(steps),
        "samples_generated": generated,
        "informative_groups": informative,
        "informative_per_100_samples": 100 * informative / generated,
        "samples_per_step": statistics.mean(m["sampler/samples_generated"] for m in steps),
        "informative_frac": statistics.mean(m["sampler/informative_frac"] for m in steps),
        "acr_post": statistics.mean(m["collapse/acr_post"] for m in steps),
        "accuracy_before": summary["eval/accuracy before"],
        "accuracy_after": summary["eval/accuracy after"],
        "wall_s": time.perf_counter() - t0,
    }


def embedded(budget: int, dataset_size: int | None) -> list[dict]:
    with tempfile.TemporaryDirectory() as workdir:
        rows = []
        for name in SAMPLERS:
            rows.append(embedded_run(name, budget, workdir, dataset_size))
            print(json.dumps(rows[-1]), flush=True)
        return rows


def embedded_table(rows: list[dict], budget: int, dataset_size: int | None) -> str:
    data = f"{dataset_size} training prompts" if dataset_size else "the quickstart's 1000 training prompts"
    head = (f"Embedded SmolLM2-135M-Instruct, quickstart task ({data}), until {budget} completions were "
            "generated:\n\n| sampler | steps | samples/step | informative frac | informative groups | per 100 "
            "samples | acr_post | accuracy before -> after | wall |\n|---|---|---|---|---|---|---|---|---|\n")
    return head + "".join(
        f"| {r['sampler']} | {r['steps']} | {r['samples_per_step']:.1f} | {r['informative_frac']:.3f} | "
        f"{r['informative_groups']:.0f} | {r['informative_per_100_samples']:.2f} | {r['acr_post']:.3f} | "
        f"{r['accuracy_before']:.3f} -> {r['accuracy_after']:.3f} | {r['wall_s']:.0f} s |\n"
        for r in rows
    )


# --- the simulator ----------------------------------------------------------------------------------------


SIM_RUNS = (  # (label, sampler, estimator, sampler options); grpo everywhere isolates the sampler's effect
    ("fixed", "fixed", "grpo", {}),
    ("dynamic", "dynamic", "grpo", {"max_gen_batches": 3}),
    ("reinforce_ada", "reinforce_ada", "grpo", {}),
    ("reinforce_ada + pool", "reinforce_ada", "pool", {}),
    ("budgeted", "budgeted", "grpo", {}),
)


def simulated(steps: int) -> list[dict]:
    """Every sampler on the same 10,000 simulated prompts, G = 16; then budgeted at reinforce_ada's spend."""
    from grposcope.sim import SimConfig, simulate

    def run(label, sampler, estimator, options):
        result = simulate(SimConfig(sampler=sampler, estimator=estimator, sampler_options=options, steps=steps))
        return {"run": label, **result.summary, "history": {k: result.history[k] for k in
                                                             ("samples_total", "accuracy")}}

    rows = [run(*spec) for spec in SIM_RUNS]
    ada = next(r for r in rows if r["run"] == "reinforce_ada")
    budget = int(round(ada["samples_per_step"]))
    rows.append(run(f"budgeted, budget {budget}", "budgeted", "grpo", {"sample_budget": budget}))
    fixed_total = next(r for r in rows if r["run"] == "fixed")["samples_generated"]
    for row in rows:  # accuracy once `fixed`'s whole spend was generated (or at the end, if sooner)
        history = row.pop("history")
        within = [a for n, a in zip(history["samples_total"], history["accuracy"]) if n <= fixed_total]
        row["accuracy_at_fixed_budget"] = within[-1] if within else float("nan")
        print(json.dumps(row), flush=True)
    return rows


def sim_table(rows: list[dict], steps: int) -> str:
    head = (f"Collapse simulator, 10,000 prompts, G = 16, B = 256, {steps} steps, seed 0 (accuracy starts at "
            f"{rows[0]['initial_accuracy']:.3f}):\n\n"
            "| run | samples/step | informative frac | informative groups/step | per 1k samples | acr_post | "
            "accuracy at fixed's spend | final accuracy |\n|---|---|---|---|---|---|---|---|\n")
    return head + "".join(
        f"| {r['run']} | {r['samples_per_step']:.0f} | {r['informative_frac']:.3f} | "
        f"{r['informative_groups_per_1k_samples'] * r['samples_per_step'] / 1000:.1f} | "
        f"{r['informative_groups_per_1k_samples']:.1f} | {r['acr_post']:.3f} | "
        f"{r['accuracy_at_fixed_budget']:.3f} | {r['final_accuracy']:.3f} |\n"
        for r in rows
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("sim", "embedded", "both"), default="both")
    parser.add_argument("--budget", type=int, default=320, help="completions generated per embedded run")
    parser.add_argument("--sim-steps", type=int, default=200, help="steps per simulated run")
    parser.add_argument("--dataset-sizes", type=lambda v: [int(x) or None for x in v.split(",")], default=[None, 32],
                        help="training prompts of the embedded runs, comma separated (0: the quickstart's)")
    parser.add_argument("--out", default=None, help="folder for samplers.md and samplers.json")
    args = parser.parse_args()
    report, data = [], {}
    if args.part in ("sim", "both"):
        data["sim"] = simulated(args.sim_steps)
        report.append(sim_table(data["sim"], args.sim_steps))
    if args.part in ("embedded", "both"):
        for size in args.dataset_sizes:
            data[f"embedded-{size or 'all'}"] = rows = embedded(args.budget, size)
            report.append(embedded_table(rows, args.budget, size))
    text = "\n".join(report)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "samplers.md"), "w") as f:
            f.write(text)
        with open(os.path.join(args.out, "samplers.json"), "w") as f:
            json.dump(data, f, indent=2)


if __name__ == "__main__":
    main()
