"""The decode step of grposcope's rollout, route by route, against its floor.

The embedded SmolLM2-135M, 2 prompts x 8 rows through `TransformersRollout` (the prompt prefilled once per
group, the reserved KV cache), 64 forced tokens (no token ends a completion, so every route decodes the same
number of steps). Routes: transformers' `generate` (torch.multinomial) or grposcope's own loop (inverse-CDF
sampling), each on the float32 weights and, where the CPU computes bf16 natively, on a bf16 copy. The routes
alternate within each repeat, the same seed for all, after one warm-up round; the figure is the median over
`--repeats` of the milliseconds per decode step (the prompt's pass included, as in training). The floor of a
decode step is the larger of reading every float32 weight once at the copy rate and the float32 arithmetic of
its 16 rows at the matmul rate (bench/step.py's). Nothing else may run.

    .venv/bin/python bench/decode_loop.py --repeats 3
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
import warnings

import torch
from _common import MatmulWeights, boxed_chat_prompts, copy_gbps, matmul_gflops

STEPS = 64
ROWS_PER_PROMPT = 8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    from grposcope.machine import native_bf16_cpu
    from grposcope.models import load_model
    from grposcope.rollout.base import SamplingParams
    from grposcope.rollout.hf import TransformersRollout

    gflops, gbps = matmul_gflops(), copy_gbps()
    model, tok = load_model("embedded:smollm2-135m-instruct")
    model.eval()
    weights = MatmulWeights.of(model)
    rows = 2 * ROWS_PER_PROMPT
    floor_ms = max(4 * weights.with_head / (gbps * 1e9), 2 * weights.with_head * rows / (gflops * 1e9)) * 1e3
    models = {"float32": model}
    if native_bf16_cpu():
        half = copy.deepcopy(model)
        for p in half.parameters():
            p.data = p.data.to(torch.bfloat16)
        models["bfloat16 copy"] = half.eval()
    prompts = boxed_chat_prompts(tok)
    params = SamplingParams(STEPS, 1.0, 1.0, 0)
    routes = {(name, own): TransformersRollout(m, tok, own_loop=own) for name, m in models.items()
              for own in (False, True)}
    for backend in routes.values():
        backend.eos_ids = [len(tok) + 10]  # an id no token has: every row runs STEPS tokens
    per_step: dict[tuple[str, bool], list[float]] = {key: [] for key in routes}
    for repeat in range(args.repeats + 1):
        for key, backend in routes.items():
            torch.manual_seed(repeat)
            t0 = time.perf_counter()
            out = backend.generate(prompts, ROWS_PER_PROMPT, params)
            seconds = time.perf_counter() - t0
            assert out.completion_ids.shape == (rows, STEPS)
            if repeat:  # the first round warms up
                per_step[key].append(seconds / STEPS * 1e3)
    print(f"matmul {gflops:.1f} GFLOP/s, copy {gbps:.1f} GB/s, native bf16: {native_bf16_cpu()}; {rows} rows, "
          f"{STEPS} forced tokens, median of {args.repeats}; floor of a decode step {floor_ms:.1f} ms (fp32)")
    print("| weights | sampling | ms a decode step | x the floor | each repeat |")
    print("|---|---|---|---|---|")
    for (name, own), values in per_step.items():
        ms = statistics.median(values)
        sampling = "own loop, inverse CDF" if own else "generate, torch.multinomial"
        print(f"| {name} | {sampling} | {ms:.1f} | {ms / floor_ms:.2f} | {', '.join(f'{v:.1f}' for v in values)} |")


if __name__ == "__main__":
    main()
