"""Does a rollout copy with the linear layers' weights stored transposed make a decode step faster?

A (16, 576) x (576, 1536) product runs 1.8-2.7x faster on some CPUs when the weight is stored as (in, out)
rather than (out, in), with equal results at 16 rows (MKL picks another kernel); repeated on one weight, it sits
in cache. This bench asks whether the whole model gains: grposcope's own decode loop (2 prompts x 8 rows, 64
forced tokens) on the float32 weights, on a copy whose every nn.Linear but the (tied) LM head stores its
weight transposed (the same values, another memory layout), and on a bf16 copy for scale; the same seed for
each in every round (the first round warms up). It prints the ms a decode step (median of 3 rounds) against
the floor of bench/decode_loop.py, and whether the transposed copy's tokens and log-probabilities equal the
float32 weights' to the bit. Nothing else may run.

    .venv/bin/python bench/decode_layout.py
"""

from __future__ import annotations

import copy
import statistics
import time
import warnings

import torch
from _common import MatmulWeights, boxed_chat_prompts, copy_gbps, matmul_gflops

STEPS, ROWS_PER_PROMPT, ROUNDS = 64, 8, 4


def transposed_copy(model):
    """A copy whose nn.Linear weights (the LM head aside) are stored as (in, out): weight.t() is contiguous."""
    out = copy.deepcopy(model)
    head = out.get_output_embeddings().weight
    for module in out.modules():
        if isinstance(module, torch.nn.Linear) and module.weight is not head:
            module.weight.data = module.weight.data.t().contiguous().t()  # (out, in) values, (in, out) storage
    return out


def main() -> None:
    warnings.filterwarnings("ignore")
    torch.set_num_threads(2)
    from grposcope.models import load_model
    from grposcope.rollout.base import SamplingParams
    from grposcope.rollout.hf import TransformersRollout

    gflops, gbps = matmul_gflops(), copy_gbps()
    model, tok = load_model("embedded:smollm2-135m-instruct")
    model.eval()
    weights = MatmulWeights.of(model)
    rows = 2 * ROWS_PER_PROMPT
    floor_ms = max(4 * weights.with_head / (gbps * 1e9), 2 * weights.with_head * rows / (gflops * 1e9)) * 1e3
    half = copy.deepcopy(model)
    for p in half.parameters():
        p.data = p.data.to(torch.bfloat16)
    models = {"float32": model, "float32, transposed weights": transposed_copy(model), "bfloat16 copy": half}
    routes = {name: TransformersRollout(m, tok) for name, m in models.items()}
    for backend in routes.values():
        backend.eos_ids = [len(tok) + 10]  # an id no token has: every row runs STEPS tokens
    prompts, params = boxed_chat_prompts(tok), SamplingParams(STEPS, 1.0, 1.0, 0)
    per_step: dict[str, list[float]] = {name: [] for name in routes}
    equal = []
    for round_ in range(ROUNDS):
        outs = {}
        for name, backend in routes.items():
            torch.manual_seed(round_)
            t0 = time.perf_counter()
            outs[name] = backend.generate(prompts, ROWS_PER_PROMPT, params)
            if round_:
                per_step[name].append((time.perf_counter() - t0) / STEPS * 1e3)
        a, b = outs["float32"], outs["float32, transposed weights"]
        equal.append(torch.equal(a.completion_ids, b.completion_ids) and torch.equal(a.sampling_logp, b.sampling_logp))
    print(f"matmul {gflops:.1f} GFLOP/s, copy {gbps:.1f} GB/s; {rows} rows, {STEPS} forced tokens; floor of a decode "
          f"step {floor_ms:.1f} ms (fp32); transposed copy's tokens and log-probs equal to float32's, bit for bit, "
          f"in {sum(equal)} of {len(equal)} seeded rounds")
    print("| weights | ms a decode step | x the floor | each round |")
    print("|---|---|---|---|")
    for name, values in per_step.items():
        ms = statistics.median(values)
        print(f"| {name} | {ms:.1f} | {ms / floor_ms:.2f} | {', '.join(f'{v:.1f}' for v in values)} |")


if __name__ == "__main__":
    main()
