"""Where the update's time goes, against its FLOP floor.

The embedded SmolLM2-135M, 2 prompts x 8 rows at natural lengths (at most 64 tokens; the decode benches'
prompts), one rollout; then `--repeats` times the update the trainer runs on it: log-probs of the completion
tokens (`completion_logps`: one prompt pass per group, rows in parts of similar length), the grpo loss, and
its backward (no optimizer step: it is 2% of a step). The floor is the FLOPs of forward and backward (3x the
forward's 2 FLOPs per weight per token, each prompt once per group) at this run's matmul rate. One more
repeat runs under torch.profiler and prints the operators by their own time. Nothing else may run.

    .venv/bin/python bench/update_profile.py --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
from _common import MatmulWeights, boxed_chat_prompts, floor_flops, matmul_gflops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--top", type=int, default=14)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    from grposcope.core import losses
    from grposcope.models import load_model
    from grposcope.rollout.base import SamplingParams
    from grposcope.rollout.hf import TransformersRollout
    from grposcope.trainer.policy import TrainBatch, completion_logps

    gflops = matmul_gflops()
    model, tok = load_model("embedded:smollm2-135m-instruct")
    model.eval()
    torch.manual_seed(0)
    out = TransformersRollout(model, tok).generate(boxed_chat_prompts(tok), 8, SamplingParams(64))
    advantages = torch.randn(len(out.texts))
    batch = TrainBatch(out.prompt_ids, out.prompt_mask, out.completion_ids, out.completion_mask, advantages)
    weights = MatmulWeights.of(model)
    prompt_tokens = int(out.prompt_mask[::8].sum())  # each group's prompt once
    completion_tokens = int(out.completion_mask.sum())
    update_flops = floor_flops(weights, prompt_tokens, completion_tokens, 2) * 3 / 4  # forward + backward
    floor_s = update_flops / (gflops * 1e9)
    model.train()

    def update() -> None:
        logp, _ = completion_logps(model, batch, 1.0, with_entropy=True)
        loss, _ = losses.policy_loss(logp, logp.detach(), batch.advantages, batch.loss_mask)
        loss.backward()
        model.zero_grad(set_to_none=True)

    update()  # warm-up
    seconds = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        update()
        seconds.append(time.perf_counter() - t0)
    median = statistics.median(seconds)
    lengths = out.completion_mask.sum(dim=1).tolist()
    print(f"matmul {gflops:.1f} GFLOP/s; 16 rows, completion lengths {min(lengths)}-{max(lengths)} (mean "
          f"{completion_tokens / 16:.1f}), {prompt_tokens} prompt tokens once per group")
    print(f"update (log-probs, loss, backward): {median:.2f} s, median of {args.repeats} "
          f"({', '.join(f'{s:.2f}' for s in seconds)}); floor {floor_s:.2f} s; {median / floor_s:.2f}x")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        update()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    print(f"\noperators by their own time (one profiled update, {total / 1e6:.2f} s in all under the profiler):")
    print("| operator | calls | own s | share |")
    print("|---|---|---|---|")
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[: args.top]:
        print(f"| {e.key} | {e.count} | {e.self_cpu_time_total / 1e6:.3f} | {e.self_cpu_time_total / total:.1%} |")


if __name__ == "__main__":
    main()
