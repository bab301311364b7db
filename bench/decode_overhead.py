"""Where a decode step's time goes outside the model: grposcope's own generation (its rollout backend, the
prompt prefilled once per group, the reserved KV cache) on the embedded SmolLM2-135M, 2 prompts x 8 rows,
64 forced tokens, split into the model's forward passes, `torch.multinomial` (the sampling), the softmax
before it, and the rest of transformers' `generate` loop (logits processors, stopping criteria, bookkeeping).
Timers wrap the three calls; the rest is the whole minus them. Nothing else may run meanwhile.

    .venv/bin/python bench/decode_overhead.py --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections import defaultdict

import torch
from _common import boxed_chat_prompts


def timed(table: dict, name: str, fn):
    """fn, with its wall time added to table[name] at each call."""
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            table[name] += time.perf_counter() - t0
    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    from grposcope.models import load_model
    from grposcope.rollout.base import SamplingParams
    from grposcope.rollout.hf import TransformersRollout

    model, tok = load_model("embedded:smollm2-135m-instruct")
    model.eval()
    backend = TransformersRollout(model, tok)
    prompts = boxed_chat_prompts(tok)
    params = SamplingParams(args.tokens, 1.0, 1.0, 0, extra=(("min_new_tokens", args.tokens),))
    table: dict = defaultdict(float)
    model.forward = timed(table, "forward", model.forward)
    multinomial, softmax = torch.multinomial, torch.nn.functional.softmax
    torch.multinomial = timed(table, "multinomial", multinomial)
    torch.nn.functional.softmax = timed(table, "softmax", softmax)
    rows = []
    try:
        for i in range(args.repeats + 1):  # the first is a warm-up
            table.clear()
            torch.manual_seed(i)
            t0 = time.perf_counter()
            backend.generate(prompts, 8, params)
            total = time.perf_counter() - t0
            if i:
                rows.append({"total": total, **table})
    finally:
        torch.multinomial, torch.nn.functional.softmax = multinomial, softmax
    steps = args.tokens
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    rest = med["total"] - med["forward"] - med["multinomial"] - med["softmax"]
    print(f"{len(prompts) * 8} rows, {steps} decode steps, median of {args.repeats} generations: "
          f"{med['total']:.2f} s, {med['total'] / steps * 1e3:.1f} ms a decode step")
    for name, seconds in (("model forward (prefill included)", med["forward"]), ("softmax", med["softmax"]),
                          ("torch.multinomial", med["multinomial"]), ("the rest of generate's loop", rest)):
        print(f"  {name:>34}: {seconds / steps * 1e3:6.1f} ms a step ({seconds / med['total']:.0%})")


if __name__ == "__main__":
    main()
