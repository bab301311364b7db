"""The decode loop's weight-major products against F.linear's: equal bits, and the time of each product.

Three parts, on the machine's own MKL (nothing else may run):
1. Equal bits: for each weight shape of the embedded SmolLM2-135M and 1-256 rows, at 1 and 2 threads, whether
   `F.linear(x, W)` and `(W @ x^T)^T` (copied to row-major) give the same float32 values; the rows where they
   differ, with the largest difference.
2. The trainer's own rollout (2 prompts x 8 rows, 64 forced tokens, the decode benches' prompts), with the
   weight-major route off and on, alternating under the same seeds: milliseconds a decode step and whether the
   tokens and log-probabilities are equal.
3. One profiled generate() of each route, the matrix products grouped by shape: milliseconds each and calls
   a decode step.

    .venv/bin/python bench/weight_major.py --rounds 6
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections import defaultdict

import torch
from _common import boxed_chat_prompts

SHAPES = [(576, 576), (192, 576), (1536, 576), (576, 1536), (49152, 576)]  # (out, in) of each Linear
ROWS = (1, 2, 3, 4, 7, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256)
STEPS = 64


def equal_bits() -> None:
    torch.manual_seed(0)
    for threads in (1, 2):
        torch.set_num_threads(threads)
        differ = defaultdict(list)
        for out_features, in_features in SHAPES:
            weight = torch.randn(out_features, in_features)
            for rows in ROWS:
                x = torch.randn(rows, in_features)
                a = torch.nn.functional.linear(x, weight)
                b = torch.mm(weight, x.T).T.contiguous()
                if not torch.equal(a, b):
                    differ[rows].append((a - b).abs().max().item())
        equal = [r for r in ROWS if r not in differ]
        print(f"{threads} thread(s): equal bits at rows {equal}; differ at "
              + (", ".join(f"{r} (up to {max(v):.1e})" for r, v in differ.items()) or "none"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    equal_bits()
    torch.set_num_threads(args.threads)
    import grposcope.rollout.decode as decode_module
    from grposcope.models import load_model
    from grposcope.rollout.base import SamplingParams
    from grposcope.rollout.hf import TransformersRollout

    model, tok = load_model("embedded:smollm2-135m-instruct")
    model.eval()
    backend = TransformersRollout(model, tok, own_loop=True)
    backend.eos_ids = [len(tok) + 10]  # an id no token has: every row runs STEPS tokens
    prompts, params = boxed_chat_prompts(tok), SamplingParams(STEPS, 1.0, 1.0, 0)
    threshold = decode_module.WEIGHT_MAJOR_ROWS
    routes = {"F.linear": 10**9, "weight-major": threshold}
    ms, outs = defaultdict(list), {}
    for round_ in range(args.rounds + 1):
        for name, rows in routes.items():
            decode_module.WEIGHT_MAJOR_ROWS = rows
            torch.manual_seed(round_)
            t0 = time.perf_counter()
            outs[name, round_] = backend.generate(prompts, 8, params)
            if round_:  # the first round warms up
                ms[name].append((time.perf_counter() - t0) / STEPS * 1e3)
    print(f"16 rows, {STEPS} forced tokens, {args.threads} threads, median of {args.rounds} rounds after a warm-up:")
    for name, values in ms.items():
        each = ", ".join(f"{v:.1f}" for v in values)
        print(f"  {name:>12}: {statistics.median(values):6.1f} ms a decode step ({each})")
    same = [torch.equal(outs["F.linear", r].completion_ids, outs["weight-major", r].completion_ids)
            and torch.equal(outs["F.linear", r].sampling_logp, outs["weight-major", r].sampling_logp)
            for r in range(args.rounds + 1)]
    print(f"  tokens and log-probabilities equal, bit for bit: {sum(same)} of {len(same)} rounds")
    from torch.profiler import profile

    per_shape = {}
    for name, rows in routes.items():
        decode_module.WEIGHT_MAJOR_ROWS = rows
        torch.manual_seed(0)
        with profile(record_shapes=True) as prof:
            backend.generate(prompts, 8, params)
        events = prof.key_averages(group_by_input_shape=True)
        per_shape[name] = {(e.key, str(e.input_shapes)): (e.self_cpu_time_total / 1e3, e.count)
                           for e in events if e.key in ("aten::mm", "aten::copy_")}
    print("products of 16 rows (aten::mm by shape) and copies, one profiled generate() each: ms each, calls a step")
    for name, table in per_shape.items():
        total = 0.0
        for (op, shapes), (ms_total, calls) in sorted(table.items(), key=lambda kv: -kv[1][0])[:8]:
            if calls >= STEPS:
                total += ms_total
                print(f"  {name:>12} {op:<12} {shapes:<42} {ms_total / calls:8.3f} ms x {calls / STEPS:5.1f}")
        print(f"  {name:>12} these, a decode step: {total / STEPS:.1f} ms")
    decode_module.WEIGHT_MAJOR_ROWS = threshold


if __name__ == "__main__":
    main()
