"""A bf16 copy of the weights for generation, inside grposcope's own rollout: what it saves per decode step, and
how far its sampling distribution is from the fp32 policy the trainer computes log-probs with.

The embedded SmolLM2-135M, 2 prompts x 8 rows through `TransformersRollout` (the prompt prefilled once per
group, the reserved KV cache): (1) 64 forced tokens from the fp32 model and from its bf16 copy, alternating,
the same seed for both, median over `--repeats` seeds after one warm-up; (2) on completions the bf16 copy
sampled at natural lengths, the per-token ratio pi_fp32 / pi_bf16 of the sampled tokens (teacher-forced
through both), which truncated importance sampling would use as its weight, and the k3 estimate of
KL(bf16 || fp32). Only where the CPU computes bf16 natively (else it says so and stops). Nothing else may run.

    .venv/bin/python bench/bf16_rollout.py --repeats 3
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
import warnings

import torch
from _common import boxed_chat_prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mismatch-seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    from decode_routes import cpu_has_native_bf16

    if not cpu_has_native_bf16():
        raise SystemExit("this CPU does not compute bf16 natively (no AVX-512 BF16 or AMX): nothing to measure")
    from grposcope.models import load_model
    from grposcope.rollout.base import SamplingParams
    from grposcope.rollout.hf import TransformersRollout

    model, tok = load_model("embedded:smollm2-135m-instruct")
    model.eval()
    bf16 = copy.deepcopy(model).to(torch.bfloat16).eval()
    prompts = boxed_chat_prompts(tok)
    forced = SamplingParams(64, 1.0, 1.0, 0, extra=(("min_new_tokens", 64),))
    natural = SamplingParams(64, 1.0, 1.0, 0)

    def generate(m, params, seed):
        torch.manual_seed(seed)
        t0 = time.perf_counter()
        rollout = TransformersRollout(m, tok).generate(prompts, 8, params)
        return rollout, time.perf_counter() - t0

    per_step: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for seed in range(args.repeats + 1):
        for name, m in (("fp32", model), ("bf16", bf16)):
            _, seconds = generate(m, forced, seed)
            if seed:  # the first round warms up
                per_step[name].append(seconds / 64 * 1e3)
    fp32, half = (statistics.median(per_step[k]) for k in ("fp32", "bf16"))
    print(f"16 rows, 64 forced tokens, median of {args.repeats}: fp32 {fp32:.1f} ms a decode step, bf16 copy "
          f"{half:.1f} ms ({half / fp32 - 1:+.0%}); each: {[round(v, 1) for v in per_step['fp32']]} and "
          f"{[round(v, 1) for v in per_step['bf16']]}")
    logs = []
    for seed in range(args.mismatch_seeds):
        r, _ = generate(bf16, natural, 10 + seed)
        ids = torch.cat([r.prompt_ids, r.completion_ids], 1)
        mask = torch.cat([r.prompt_mask, r.completion_mask], 1)
        start = r.prompt_ids.shape[1]
        position = (mask.cumsum(1) - 1).clamp(min=0)
        target = r.completion_ids.unsqueeze(-1)
        with torch.inference_mode():
            lp = [m(input_ids=ids, attention_mask=mask, position_ids=position).logits[:, start - 1:-1].float()
                  .log_softmax(-1).gather(-1, target).squeeze(-1) for m in (model, bf16)]
        logs.append((lp[0] - lp[1])[r.completion_mask.bool()])  # log pi_fp32 - log pi_bf16, sampled tokens
    log_ratio = torch.cat(logs)
    ratio = log_ratio.exp()
    print(f"{len(ratio)} tokens the bf16 copy sampled ({args.mismatch_seeds} seeds, natural lengths): ratio "
          f"pi_fp32 / pi_bf16 {ratio.min():.3f}-{ratio.max():.3f}, above 2: {(ratio > 2).float().mean():.2%}, "
          f"below 0.5: {(ratio < 0.5).float().mean():.2%}; mean |log ratio| {log_ratio.abs().mean():.3f}; "
          f"KL(bf16 || fp32), k3 estimate: {((ratio - 1) - log_ratio).mean():.2e} nats a token")


if __name__ == "__main__":
    main()
