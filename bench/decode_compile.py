"""What compiling the decode step buys: transformers' `generate` on the embedded SmolLM2-135M, 2 prompts x 8 rows,
64 forced tokens, eager against `torch.compile` (inductor, static KV cache, full graph), and what the compile
costs the first time on a machine and again once inductor's caches hold its artefacts.

Run it three times, each in a fresh process (nothing else running), with one cache folder:

    .venv/bin/python bench/decode_compile.py eager --out /tmp/compile
    TORCHINDUCTOR_CACHE_DIR=/tmp/compile/cache .venv/bin/python bench/decode_compile.py compiled --out /tmp/compile
    TORCHINDUCTOR_CACHE_DIR=/tmp/compile/cache .venv/bin/python bench/decode_compile.py compiled --out /tmp/compile

The first `compiled` run finds the cache empty (its first call pays the whole compile), the second finds it
full. Each compiled run also says how many rows' tokens equal the eager static-cache run's under the same seed.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import torch
from _common import boxed_chat_prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("eager", "compiled"))
    parser.add_argument("--out", required=True, help="folder for the eager tokens and each run's figures")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    from transformers.generation import CompileConfig

    from grposcope.models import load_model

    model, tok = load_model("embedded:smollm2-135m-instruct")
    model.eval()
    tok.padding_side = "left"
    prompts = boxed_chat_prompts(tok)
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    ids, mask = enc["input_ids"].repeat_interleave(8, 0), enc["attention_mask"].repeat_interleave(8, 0)
    sampling = dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=args.tokens,
                    min_new_tokens=args.tokens, pad_token_id=tok.pad_token_id)

    def generate(label: str, **extra) -> tuple[torch.Tensor, float]:
        torch.manual_seed(0)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, **sampling, **extra)
        seconds = time.perf_counter() - t0
        print(f"{label}: {seconds:.2f} s, {seconds / args.tokens * 1e3:.1f} ms a decode step", flush=True)
        return out, seconds

    figures: dict[str, float] = {}
    if args.mode == "eager":
        model.generation_config.disable_compile = True
        for i in (1, 2):
            dynamic, figures[f"dynamic_{i}"] = generate("eager, transformers' dynamic cache")
        for i in (1, 2):
            static, figures[f"static_{i}"] = generate("eager, static cache", cache_implementation="static")
        torch.save({"dynamic": dynamic, "static": static}, os.path.join(args.out, "eager_tokens.pt"))
        name = "eager"
    else:
        config = CompileConfig(fullgraph=True, mode="default", dynamic=False)
        config._compile_all_devices = True  # generate() compiles on CUDA-like devices only unless told
        model.generation_config.compile_config = config
        cached = os.path.isdir(os.environ.get("TORCHINDUCTOR_CACHE_DIR", "/nonexistent"))
        for i in (1, 2, 3):
            tokens, figures[f"call_{i}"] = generate(f"compiled, static cache, call {i}", cache_implementation="static")
        eager = torch.load(os.path.join(args.out, "eager_tokens.pt"))
        same = int((tokens == eager["static"]).all(dim=1).sum())
        figures["rows_equal_to_eager"] = same
        print(f"rows whose tokens equal the eager static-cache run's: {same} of {len(tokens)}")
        name = "compiled_warm" if cached else "compiled_cold"
    with open(os.path.join(args.out, f"{name}.json"), "w") as f:
        json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
