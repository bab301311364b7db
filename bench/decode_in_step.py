"""Decoding alone against decoding inside training: where the extra milliseconds of a decode step go.

One process, grposcope's trainer on the embedded SmolLM2-135M (bench/step.py's workload: 2 prompts x 8 rows,
the decode benches' boxed-answer prompts), every generation forced to 64 tokens so that each one does the
same work. Rounds alternate, under the same seeds:
- "alone": the rollout backend's generate() right after another generate() (no training in between);
- "after a step": the same call right after a training update (log-probs, backward, AdamW) on the last batch.
Each generate() is split into the decode loop's model forwards, its sampling and bookkeeping, and what runs
outside the loop (tokenising, the prompts' prefill, detokenising). With --profile, a torch.profiler table of
one decode loop of each kind, side by side. Nothing else may run meanwhile.

    .venv/bin/python bench/decode_in_step.py --rounds 3 [--profile]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from collections import defaultdict

import torch
from _common import boxed_chat_prompts

MODEL = "embedded:smollm2-135m-instruct"


def build_trainer(threads: int):
    from grposcope import GRPOConfig, GRPOTrainer

    def reward(prompts, completions, **kwargs):
        return [float(len(c) % 2) for c in completions]  # mixed groups: every step updates

    config = GRPOConfig(output_dir=tempfile.mkdtemp(prefix="bench-decode-in-step-"), overwrite_output_dir=True,
                        model_name_or_path=MODEL, per_device_train_batch_size=16, gradient_accumulation_steps=1,
                        num_generations=8, max_completion_length=64, learning_rate=1e-6, seed=0,
                        skip_no_signal_steps=False, torch_threads=threads, save_steps=10_000,
                        logging_steps=10_000, eval_size=0, max_steps=1000)
    data = [{"prompt": [{"role": "user", "content": f"What is {a} + {b}? Put your final answer within \\boxed{{}}."}],
             "answer": str(a + b)} for a, b in ((17, 25), (31, 48))]
    return GRPOTrainer(args=config, reward_funcs=reward, train_dataset=data)


class Split:
    """Wall time of the decode loop's forwards, of the whole loop, and of generate() around it."""

    def __init__(self) -> None:
        self.table: dict[str, float] = defaultdict(float)
        self.in_loop = False

    def install(self, model) -> None:
        import grposcope.rollout.hf as hf

        forward, decode = model.forward, hf.decode

        def timed_forward(*args, **kwargs):
            if not self.in_loop:
                return forward(*args, **kwargs)
            t0 = time.perf_counter()
            try:
                return forward(*args, **kwargs)
            finally:
                self.table["forward"] += time.perf_counter() - t0

        def timed_decode(*args, **kwargs):
            self.in_loop, t0 = True, time.perf_counter()
            try:
                return decode(*args, **kwargs)
            finally:
                self.in_loop = False
                self.table["loop"] += time.perf_counter() - t0

        model.forward, hf.decode = timed_forward, timed_decode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    from grposcope.rollout.base import SamplingParams

    trainer = build_trainer(args.threads)
    model, backend = trainer.model, trainer.rollout_backend
    prompts = boxed_chat_prompts(trainer.tokenizer)
    params = SamplingParams(64, 1.0, 1.0, 0, extra=(("min_new_tokens", 64),))
    split = Split()
    split.install(model)

    def generate(seed: int) -> dict[str, float]:
        model.eval()
        split.table.clear()
        torch.manual_seed(seed)
        t0 = time.perf_counter()
        backend.generate(prompts, 8, params)
        total = time.perf_counter() - t0
        return {"total": total, **split.table}

    def train_once() -> None:
        generation = trainer._generate()
        trainer._optimize(generation.batch)

    train_once()  # warm-up: the optimizer's state exists from here on, as in a run
    generate(99)
    rows: dict[str, list[dict]] = {"alone": [], "after a step": []}
    for r in range(args.rounds):
        generate(1000 + r)  # a generate before: "alone" follows one
        rows["alone"].append(generate(r))
        train_once()
        rows["after a step"].append(generate(r))
    print(f"16 rows, 64 decode steps a generate(); median of {args.rounds} rounds, ms a decode step "
          f"(threads {torch.get_num_threads()}):")
    print(f"{'':>14} {'whole':>8} {'loop':>8} {'forwards':>9} {'sampling+':>10} {'outside':>8}")
    for name, kept in rows.items():
        med = {k: statistics.median(row[k] for row in kept) * 1e3 / 64 for k in kept[0]}
        print(f"{name:>14} {med['total']:8.1f} {med['loop']:8.1f} {med['forward']:9.1f} "
              f"{med['loop'] - med['forward']:10.1f} {med['total'] - med['loop']:8.1f}")
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        for name in ("alone", "after a step"):
            if name == "alone":
                generate(2000)
            else:
                train_once()
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                generate(3000)
            print(f"--- {name}")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))


if __name__ == "__main__":
    main()
