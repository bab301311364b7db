"""What a no-signal step costs: the update of one quickstart batch with signal, and without (skipped or not).

The quickstart preset (embedded SmolLM2-135M-Instruct, 2 prompts x G = 8, 24 tokens, 2 micro-batches of 8), one
generation batch drawn once; then, alternating, `--repeats` times each, the trainer's update (`_optimize`:
log-probs, backward, optimizer) on that batch:

    signal        its own advantages (GRPO, one group mixed at least)
    empty, skip   every advantage 0, skip_no_signal_steps on (the default): no-grad forward for the
                  entropy, no backward, no optimizer step
    empty, stock  every advantage 0, skip_no_signal_steps off: forward, backward and AdamW's step as always

Weights are restored before each update so that every one starts from the same state. Medians with their
range; run it with nothing else on the machine.

    .venv/bin/python bench/no_signal_step.py --repeats 7 --json bench/results/no_signal_step.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    args = parser.parse_args()

    import torch

    from grposcope import GRPOConfig, GRPOTrainer
    from grposcope.presets import preset

    torch.set_num_threads(args.threads)
    options = preset("quickstart") | {"output_dir": tempfile.mkdtemp(), "use_avspo": False, "seed": args.seed,
                                      "log_completions": False}
    trainer = GRPOTrainer(args=GRPOConfig(**options))
    generation = None
    for _ in range(20):  # a batch with signal: some group mixed
        generation = trainer._generate()
        if generation.batch.advantages.abs().sum() > 0:
            break
    batch = generation.batch
    weights = copy.deepcopy(trainer.model.state_dict())
    optimizer = copy.deepcopy(trainer.optimizer.state_dict())
    cases = {
        "signal": (batch.advantages.clone(), True),
        "empty, skip": (torch.zeros_like(batch.advantages), True),
        "empty, stock": (torch.zeros_like(batch.advantages), False),
    }
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    phases: dict[str, dict[str, list[float]]] = {name: {} for name in cases}
    for _ in range(args.repeats):
        for name, (advantages, skip) in cases.items():
            trainer.model.load_state_dict(weights)
            trainer.optimizer.load_state_dict(optimizer)
            trainer.args.skip_no_signal_steps = skip
            batch.advantages = advantages
            trainer.timer.take()
            t0 = time.perf_counter()
            _, optimizer_figures = trainer._optimize(batch)
            seconds[name].append(time.perf_counter() - t0)
            for phase, value in trainer.timer.take().items():
                phases[name].setdefault(phase, []).append(value)
            assert optimizer_figures.skipped_no_signal == (name == "empty, skip"), name
    rows = len(batch)
    tokens = int(batch.loss_mask.sum())
    print(f"quickstart batch: {rows} completions, {tokens} completion tokens, {args.threads} threads, "
          f"{args.repeats} updates each (median, min-max)")
    result = {"rows": rows, "tokens": tokens, "threads": args.threads, "cases": {}}
    for name in cases:
        values = seconds[name]
        median = statistics.median(values)
        parts = {p.removeprefix("perf/").removesuffix("_s"): statistics.median(v) for p, v in phases[name].items()
                 if statistics.median(v) > 0}
        print(f"{name:13s} {median:6.3f} s ({min(values):.3f}-{max(values):.3f})  "
              + "  ".join(f"{p} {v:.3f}" for p, v in parts.items()))
        result["cases"][name] = {"median_s": median, "all_s": values, "phases_median_s": parts}
    saved = statistics.median(seconds["empty, stock"]) - statistics.median(seconds["empty, skip"])
    print(f"saved per skipped step: {saved:.3f} s of {statistics.median(seconds['empty, stock']):.3f} s "
          f"({100 * saved / statistics.median(seconds['empty, stock']):.0f}% of the update)")
    result["saved_per_skipped_step_s"] = saved
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
