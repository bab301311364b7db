"""How a grposcope step's time grows with the group size G and the completion length, on the embedded model.

Two prompts per step; G in (4, 8, 16) at 64 tokens, and 32, 64, 128 tokens at G = 8, every completion
forced to its full length (`min_new_tokens`), the rest as in bench/step.py; every step updates
(`skip_no_signal_steps=False`), so that a point's cost does not depend on which groups collapsed. For each
point it prints the median step time and phases, the time per completion token, and the FLOP floor; it
writes a table (Markdown) and a plot of step time against each variable, next to a line through the origin and the
middle point (what linear growth would give).

    .venv/bin/python bench/scaling.py                      # 1 warm-up + 3 measured steps per point (~15 min)
    .venv/bin/python bench/scaling.py --steps 2 --out bench/results
    .venv/bin/python bench/scaling.py --natural --lengths 64,256 --steps 2   # stopping at EOS, boxed prompts
    .venv/bin/python bench/scaling.py --natural --lengths 1024 --groups 4,16 --warmup 0 --steps 1

With `--natural`, completions stop at EOS (at most the length), on bench/step.py's boxed-answer prompts, and
every point takes G in (4, 8, 16) at each `--lengths`; the time per completion token and the floor use the
tokens really generated. It writes scaling_natural.md (no plot).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import MatmulWeights, floor_flops, matmul_gflops  # noqa: E402
from step import MODEL, PHASES, bench_prompts  # noqa: E402

GROUPS = (4, 8, 16)
LENGTHS = (32, 64, 128)


def measure(g: int, length: int, args) -> dict:
    """Median step time and phases of `args.steps` steps after `args.warmup`, for G = g and `length` tokens."""
    from grposcope import GRPOConfig, GRPOTrainer
    from grposcope.rewards import accuracy_reward

    records: list[dict] = []

    class Record:
        def on_step_end(self, trainer, metrics):
            records.append(dict(metrics, weights=MatmulWeights.of(trainer.model)))

    n = args.prompts * g
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench-scaling-"), overwrite_output_dir=True, seed=args.seed,
        model_name_or_path=MODEL, per_device_train_batch_size=n, num_generations=g, max_completion_length=length,
        generation_kwargs=None if args.natural else {"min_new_tokens": length}, temperature=1.0, beta=0.0,
        learning_rate=1e-6,
        max_steps=args.warmup + args.steps, save_steps=10_000, logging_steps=10_000, torch_threads=args.threads,
        skip_no_signal_steps=False,  # every step updates: a point's cost must not depend on which groups collapsed
        rollout_dtype=args.rollout_dtype,
    )
    prompts = bench_prompts(args.prompts, "boxed" if args.natural else "quickstart")
    GRPOTrainer(args=config, reward_funcs=accuracy_reward, train_dataset=prompts, callbacks=[Record()]).train()
    kept = records[args.warmup :]
    step = statistics.median(r["perf/step_s"] for r in kept)
    tokens = [r["completion/mean_length"] * n for r in kept]  # completion tokens generated per step
    completion = statistics.median(tokens)
    prompt = statistics.median(r["perf/train_tokens"] - c for r, c in zip(kept, tokens))
    return {
        "G": g, "length": length, "completions": n, "step_s": step, "mean_length": completion / n,
        "spread": (min(r["perf/step_s"] for r in kept), max(r["perf/step_s"] for r in kept)),
        "ms_per_completion_token": statistics.median(1000 * r["perf/step_s"] / c for r, c in zip(kept, tokens)),
        "floor_s": floor_flops(kept[0]["weights"], prompt, completion, n) / (args.gflops * 1e9),
        "phases": {p: statistics.median(r[f"perf/{p}_s"] for r in kept) for p in PHASES},
    }


def table(points: list[dict]) -> str:
    head = ("| G | max tokens | completions | mean length | step s (min-max) | ms / completion token | floor s | "
            "step / floor | " + " | ".join(PHASES) + " |")
    rows = [head, "|" + "---|" * (8 + len(PHASES))]
    for p in points:
        lo, hi = p["spread"]
        phases = " | ".join(f"{p['phases'][k]:.2f}" for k in PHASES)
        rows.append(f"| {p['G']} | {p['length']} | {p['completions']} | {p['mean_length']:.1f} | "
                    f"{p['step_s']:.2f} ({lo:.2f}-{hi:.2f}) | "
                    f"{p['ms_per_completion_token']:.1f} | {p['floor_s']:.2f} | {p['step_s'] / p['floor_s']:.2f} | "
                    f"{phases} |")
    return "\n".join(rows)


def plot(points: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, fixed, label in ((axes[0], "G", ("length", 64), "group size G (64 tokens)"),
                                  (axes[1], "length", ("G", 8), "completion tokens (G = 8)")):
        series = sorted((p for p in points if p[fixed[0]] == fixed[1]), key=lambda p: p[key])
        xs, ys = [p[key] for p in series], [p["step_s"] for p in series]
        ax.plot(xs, ys, "o-", label="step time")
        ax.plot(xs, [p["floor_s"] for p in series], "s--", label="FLOP floor")
        mid = series[len(series) // 2]
        ax.plot([0] + xs, [0] + [mid["step_s"] * x / mid[key] for x in xs], ":", label="linear through the middle")
        ax.set_xlabel(label)
        ax.set_ylabel("seconds per step")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench/results", help="folder for scaling.md and scaling.png")
    parser.add_argument("--rollout-dtype", default="float32", help="grposcope's rollout_dtype (its default)")
    parser.add_argument("--natural", action="store_true", help="completions stop at EOS (boxed-answer prompts)")
    parser.add_argument("--lengths", default="64,256", help="with --natural: the max completion lengths")
    parser.add_argument("--groups", default="4,8,16", help="with --natural: the group sizes G")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    args.gflops = matmul_gflops()
    print(f"fp32 matmul rate: {args.gflops:.1f} GFLOP/s", flush=True)
    if args.natural:
        grid = [(int(g), int(n)) for n in args.lengths.split(",") for g in args.groups.split(",")]
    else:
        grid = [(g, 64) for g in GROUPS] + [(8, n) for n in LENGTHS if n != 64]
    points = []
    for g, length in grid:
        points.append(measure(g, length, args))
        print(f"G={g:>2} length={length:>3}: {points[-1]['step_s']:.2f} s/step", flush=True)
    points.sort(key=lambda p: (p["length"], p["G"]))
    text = table(points)
    print(text)
    os.makedirs(args.out, exist_ok=True)
    name = "scaling_natural.md" if args.natural else "scaling.md"
    with open(os.path.join(args.out, name), "w") as f:
        f.write(f"fp32 matmul rate {args.gflops:.1f} GFLOP/s\n\n{text}\n")
    if not args.natural:
        plot(points, os.path.join(args.out, "scaling.png"))
    print(f"wrote {args.out}/{name}" + ("" if args.natural else f" and {args.out}/scaling.png"))


if __name__ == "__main__":
    main()
