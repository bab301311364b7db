"""One GRPO step, grposcope against TRL, on the embedded SmolLM2-135M: speed, phases, FLOP floor, memory.

Both trainers get the same config: the same two prompts every step, G = 8 completions each, at most `--length`
new tokens, stopping at EOS as users run them (natural lengths; `--forced-length` makes every completion exactly
`--length` tokens with `min_new_tokens`), temperature 1, beta 0, one iteration per batch, full fine-tuning, fp32,
`--threads` threads, the same seed. Natural lengths differ between the trainers and from step to step, so the
headline is the time per 1,000 completion tokens; each trainer's reward function records every completion's
length, from which the bench also prices generation against its floor, decode step by decode step.
Each trainer lives in its own process (so that each has its own peak memory); the parent alternates them,
one step at a time, so that slow drifts of the machine hit all alike. The processes: grposcope with its
defaults; grposcope with `skip_no_signal_steps=False` (every step updates, as TRL's do: the same work, and the
update's figures); TRL with gradient checkpointing off and TRL with its default (on), the faster of the two
being "TRL at its best"; grposcope with its diagnostics off, which prices them. `--no-*` flags leave one out.

    .venv/bin/python bench/step.py                    # natural lengths, 1 warm-up + 5 measured steps each
    .venv/bin/python bench/step.py --steps 10 --json bench/results/step.json
    .venv/bin/python bench/step.py --forced-length    # every completion exactly --length tokens

Needs TRL (`pip install -e ".[bench]"`). Nothing else may run on the machine meanwhile: on 2 cores a second
busy process slows both many times over.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (  # noqa: E402
    MatmulWeights,
    copy_gbps,
    entropy_cost_s,
    floor_flops,
    matmul_gflops,
    median_spread,
    peak_rss_mib,
)

MODEL = "embedded:smollm2-135m-instruct"
PHASES = ("generation", "scoring", "logprobs", "backward", "optimizer", "diagnostics")
# "trl": TRL at its best for this workload (gradient checkpointing off: the 135M model's activations fit, and
# recomputing them costs time); "trl-default": TRL's own default (gradient_checkpointing=True), the second figure
# "grposcope-noskip": skip_no_signal_steps=False, every step updates as TRL's do: the same work per step, and
# the update's figures (a step without signal skips the backward pass under the default)
TRAINERS = ("grposcope", "grposcope-noskip", "trl", "trl-default", "grposcope-nodiag")


def bench_prompts(n: int, style: str) -> list[dict]:
    """n arithmetic prompts as chat messages, with their `answer` column (the same for both trainers).

    `boxed`: the bare question and the instruction to box the answer, as a math RLVR prompt reads; the model
    works it out in its own words and stops where it likes. `quickstart`: the quickstart task's prompts (a
    system prompt and worked examples ask for "a + b = c"), whose completions are a few tokens long."""
    from grposcope.data.arithmetic import build_arithmetic

    examples, _ = build_arithmetic(n, seed=0, levels=("medium",))
    if style == "quickstart":
        return [{"prompt": e["prompt"], "answer": e["answer"]} for e in examples[:n]]
    return [{"prompt": [{"role": "user", "content": f"{e['prompt'][-1]['content']} Put your final answer "
                         "within \\boxed{}."}], "answer": e["answer"]} for e in examples[:n]]


# --- workers: one trainer each, stepping when the parent says "go" ------------------------------------

LENGTHS: list[int] = []  # every completion's length since the worker's last report (tokens, EOS included)


def accuracy_reward(prompts, completions, completion_ids=None, **kwargs):
    """grposcope's accuracy_reward, recording each completion's length on the way (both trainers pass
    `completion_ids`, one list of token ids per completion, cut after EOS)."""
    from grposcope.rewards import accuracy_reward as score

    LENGTHS.extend(len(ids) for ids in completion_ids)
    return score(prompts, completions, **kwargs)


def take_lengths() -> list[int]:
    lengths = list(LENGTHS)
    LENGTHS.clear()
    return lengths


class Gate:
    """Blocks a trainer after each step until the parent sends the next "go"; reports each step."""

    def __init__(self, conn):
        self.conn, self.t0 = conn, None

    def wait(self) -> None:
        if self.conn.recv() != "go":
            raise SystemExit(0)
        self.t0 = time.perf_counter()

    def report(self, record: dict) -> None:
        record["step_s"] = time.perf_counter() - self.t0
        self.conn.send(record)
        self.wait()


def grposcope_worker(conn, opts: dict, diagnostics: bool, skip: bool) -> None:
    import torch

    from grposcope import GRPOConfig, GRPOTrainer

    torch.set_num_threads(opts["threads"])
    gate = Gate(conn)

    class OnStep:
        def on_step_end(self, trainer, metrics):
            record = {k: v for k, v in metrics.items() if k.startswith(("perf/", "completion/", "optimizer/"))}
            record["weights"] = MatmulWeights.of(trainer.model).__dict__
            record["lengths"] = take_lengths()
            gate.report(record)

    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench-grposcope-"), overwrite_output_dir=True, seed=opts["seed"],
        model_name_or_path=MODEL, per_device_train_batch_size=opts["completions"],
        gradient_accumulation_steps=1, num_generations=opts["generations"],
        max_completion_length=opts["length"], temperature=1.0, beta=0.0, num_iterations=1,
        learning_rate=1e-6, max_steps=opts["warmup"] + opts["steps"], save_steps=10_000, logging_steps=10_000,
        generation_kwargs=opts["generation_kwargs"], diagnostics=diagnostics, torch_threads=opts["threads"],
        skip_no_signal_steps=skip, rollout_dtype=opts["rollout_dtype"], decode_loop=opts["decode_loop"],
    )
    trainer = GRPOTrainer(args=config, reward_funcs=accuracy_reward, train_dataset=opts["prompts"],
                          callbacks=[OnStep()])
    conn.send({"ready": True})
    gate.wait()
    trainer.train()
    conn.send({"done": True, "peak_rss_mib": peak_rss_mib()})


def trl_worker(conn, opts: dict, checkpointing: bool) -> None:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from grposcope.models import load_model

    torch.set_num_threads(opts["threads"])
    gate = Gate(conn)
    model, tokenizer = load_model(MODEL)

    class OnStep(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            # logging_steps=1: TRL logs after every step (its step's end), so this is where it waits
            logs = logs or {}
            gate.report({"completion/mean_length": logs.get("completions/mean_length"),
                         "num_tokens": logs.get("num_tokens"), "lengths": take_lengths()})

    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench-trl-"), seed=opts["seed"], per_device_train_batch_size=opts[
            "completions"], gradient_accumulation_steps=1, num_generations=opts["generations"],
        max_completion_length=opts["length"], temperature=1.0, beta=0.0, num_iterations=1, learning_rate=1e-6,
        max_steps=opts["warmup"] + opts["steps"], logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=True, bf16=False, disable_tqdm=True, generation_kwargs=opts["generation_kwargs"],
        gradient_checkpointing=checkpointing,
    )
    trainer = GRPOTrainer(model=model, args=config, reward_funcs=accuracy_reward, processing_class=tokenizer,
                          train_dataset=Dataset.from_list(opts["prompts"]), callbacks=[OnStep()])
    conn.send({"ready": True})
    gate.wait()
    trainer.train()
    conn.send({"done": True, "peak_rss_mib": peak_rss_mib()})


def start(kind: str, opts: dict):
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    if kind.startswith("trl"):
        proc = ctx.Process(target=trl_worker, args=(child, opts, kind == "trl-default"))
    else:
        proc = ctx.Process(target=grposcope_worker, args=(child, opts, not kind.endswith("nodiag"),
                                                          not kind.endswith("noskip")))
    proc.start()
    return proc, parent


# --- the parent: alternate, then report ---------------------------------------------------------------


def run(args) -> dict:
    kinds = [k for k in TRAINERS if not (args.no_trl and k.startswith("trl"))
             and not (args.no_trl_default and k == "trl-default") and not (args.no_nodiag and k.endswith("nodiag"))
             and not (args.no_noskip and k.endswith("noskip"))]
    import torch

    torch.set_num_threads(args.threads)
    gflops, gbps = matmul_gflops(), copy_gbps()
    print(f"fp32 matmul rate (2048^3, {args.threads} threads, best of 5): {gflops:.1f} GFLOP/s; "
          f"memory bandwidth (512 MB copy): {gbps:.1f} GB/s; grposcope: rollout_dtype={args.rollout_dtype}, "
          f"decode_loop={args.decode_loop}", flush=True)
    opts = {
        "threads": args.threads, "seed": args.seed, "completions": args.prompts * args.generations,
        "generations": args.generations, "length": args.length, "warmup": args.warmup, "steps": args.steps,
        "prompts": bench_prompts(args.prompts, args.prompt_style),
        "generation_kwargs": {"min_new_tokens": args.length} if args.forced_length else None,
        "rollout_dtype": args.rollout_dtype, "decode_loop": args.decode_loop,
    }
    workers = {kind: start(kind, opts) for kind in kinds}  # they load their models while the parent waits
    for kind, (_, conn) in workers.items():  # no step starts while another process still loads
        conn.recv()
    records: dict[str, list[dict]] = {kind: [] for kind in kinds}
    for step in range(args.warmup + args.steps):
        for kind in kinds:
            _, conn = workers[kind]
            conn.send("go")
            record = conn.recv()
            records[kind].append(record)
            print(f"step {step + 1} {kind:>17}: {record['step_s']:.2f} s", flush=True)
    peaks = {}
    for kind, (proc, conn) in workers.items():
        conn.send("go")  # lets train() finish
        while True:
            message = conn.recv()
            if message.get("done"):
                peaks[kind] = message["peak_rss_mib"]
                break
            conn.send("go")
        proc.join()
    plain, with_entropy = entropy_cost_s(opts["completions"], args.length, 49152)  # the workers are done
    return summarize(args, gflops, gbps, records, peaks, with_entropy - plain)


def summarize(args, gflops: float, gbps: float, records: dict, peaks: dict, entropy_s: float) -> dict:
    measured = {kind: recs[args.warmup :] for kind, recs in records.items()}
    n = args.prompts * args.generations
    result: dict = {"matmul_gflops": gflops, "copy_gbps": gbps, "entropy_s": entropy_s, "config": vars(args),
                    "trainers": {}}
    for kind, recs in measured.items():
        times, tokens = [r["step_s"] for r in recs], [sum(r["lengths"]) for r in recs]
        result["trainers"][kind] = {
            "step_s": times, "completions_per_s": [n / t for t in times], "peak_rss_mib": peaks.get(kind),
            "completion_tokens": tokens, "s_per_1k_tokens": [1000 * t / k for t, k in zip(times, tokens)],
            "completion_mean_length": [k / n for k in tokens],
        }
    ours = measured.get("grposcope-noskip", measured["grposcope"])  # the update's figures: steps that update
    weights = MatmulWeights(**ours[0]["weights"])
    keys = ("floor_s", "floor_shared_prompt_s", "update_floor_s", "update_s", "decode_steps", "decode_step_s",
            "decode_floor_step_s")
    figures: dict[str, list[float]] = {key: [] for key in keys}
    for r in ours:
        completion = sum(r["lengths"])
        prompt = r["perf/train_tokens"] - completion  # every row's prompt, as the update would see it unshared
        figures["floor_s"].append(floor_flops(weights, prompt, completion, n) / (gflops * 1e9))
        # each prompt once per group, as grposcope computes it (generation prefill and update)
        shared = floor_flops(weights, prompt / args.generations, completion, n) / (gflops * 1e9)
        figures["floor_shared_prompt_s"].append(shared)
        figures["update_floor_s"].append(shared * 3 / 4)  # forward + backward of the update: 3 of the 4 forwards
        figures["update_s"].append(r["perf/logprobs_s"] + r["perf/backward_s"])
        steps, floor = decode_floor_s(r["lengths"], weights, gflops, gbps)
        floor += 2 * weights.without_head * prompt / args.generations / (gflops * 1e9)  # the prefill, once a group
        figures["decode_steps"].append(steps)
        figures["decode_step_s"].append(r["perf/generation_s"] / steps)
        figures["decode_floor_step_s"].append(floor / steps)
    result.update(figures)
    result["phases"] = {p: [r[f"perf/{p}_s"] for r in ours] for p in PHASES}
    result["skipped_no_signal"] = [r.get("optimizer/skipped_no_signal", 0.0) for r in measured["grposcope"]]
    print_report(result, n)
    return result


def decode_floor_s(lengths: list[int], weights: MatmulWeights, gflops: float, gbps: float) -> tuple[int, float]:
    """(decode steps, the least time they can take): decode step t runs the rows whose completion has more
    than t tokens; it must read every weight once (4 bytes each) and do 2 FLOPs per weight per running row,
    so it costs at least the larger of the two."""
    steps = max(lengths)
    read_s = 4 * weights.with_head / (gbps * 1e9)
    floor = 0.0
    for t in range(steps):
        running = sum(1 for length in lengths if length > t)
        floor += max(read_s, 2 * weights.with_head * running / (gflops * 1e9))
    return steps, floor


def print_report(result: dict, n: int) -> None:
    t = result["trainers"]
    med = statistics.median
    print(f"\n{n} completions per step; medians (min-max) over {len(t['grposcope']['step_s'])} measured steps")
    print(f"{'trainer':>17} | {'step s':>17} | {'s / 1k compl. tokens':>20} | {'mean length':>11} | peak RSS MiB")
    for kind, r in t.items():
        print(f"{kind:>17} | {median_spread(r['step_s']):>17} | {median_spread(r['s_per_1k_tokens']):>20} | "
              f"{statistics.mean(r['completion_mean_length']):>11.1f} | {r['peak_rss_mib']:.0f}")
    trls = [k for k in ("trl", "trl-default") if k in t]
    for ours in [k for k in ("grposcope", "grposcope-noskip") if k in t]:
        for kind in trls:
            ratio = med(t[kind]["s_per_1k_tokens"]) / med(t[ours]["s_per_1k_tokens"])
            print(f"{ours} vs {kind} per 1,000 completion tokens: {ratio:.2f}x faster")
    if trls:
        best = min(trls, key=lambda k: med(t[k]["s_per_1k_tokens"]))
        setting = "gradient checkpointing off" if best == "trl" else "its default, gradient checkpointing on"
        print(f"TRL at its best here: {best} ({setting}); the goal is >= 2.5x against it")
    skipped = result["skipped_no_signal"]
    print(f"grposcope optimizer steps skipped without signal (skip_no_signal_steps, on by default): "
          f"{sum(skipped):.0f} of {len(skipped)} measured steps")
    step = med(t["grposcope-noskip" if "grposcope-noskip" in t else "grposcope"]["step_s"])
    floor, shared = med(result["floor_s"]), med(result["floor_shared_prompt_s"])
    print(f"FLOP floor at {result['matmul_gflops']:.1f} GFLOP/s, real tokens: {floor:.2f} s with every sequence's "
          f"prompt; {shared:.2f} s with each prompt once per group (what grposcope computes); step / that: "
          f"{step / shared:.2f}x")
    decode, decode_floor = med(result["decode_step_s"]), med(result["decode_floor_step_s"])
    print(f"generation: {med(result['decode_steps']):.0f} decode steps, {decode * 1000:.1f} ms each (the prefill "
          f"shared out); floor (each prompt's prefill, then per step the weights read once at "
          f"{result['copy_gbps']:.1f} GB/s or the arithmetic of the rows still running, the larger) "
          f"{decode_floor * 1000:.1f} ms: {decode / decode_floor:.2f}x the floor (goal <= 3x)")
    update, update_floor = med(result["update_s"]), med(result["update_floor_s"])
    print(f"update (log-probs + backward): {update:.2f} s; FLOP floor for the tokens present {update_floor:.2f} s: "
          f"{update / update_floor:.2f}x (goal <= 1.5x)")
    if "trl" in t:
        print(f"peak memory: grposcope {t['grposcope']['peak_rss_mib']:.0f} MiB, "
              f"TRL {t['trl']['peak_rss_mib']:.0f} MiB"
              + (f", TRL default {t['trl-default']['peak_rss_mib']:.0f} MiB" if "trl-default" in t else ""))
    print(f"{'grposcope-noskip' if 'grposcope-noskip' in t else 'grposcope'} phases, median s (share of the "
          "median step):")
    for phase, values in result["phases"].items():
        print(f"  {phase:>12}: {med(values):7.3f} ({med(values) / step:6.1%})")
    monitor = med(result["phases"]["diagnostics"])
    print(f"diagnostics: entropy {result['entropy_s']:.3f} s (log-probs with it minus without, same shapes) + "
          f"monitor {monitor:.3f} s = {(result['entropy_s'] + monitor) / step:.2%} of a step")
    if "grposcope-nodiag" in t:
        off = med(t["grposcope-nodiag"]["step_s"])
        spread = max(max(r) - min(r) for r in (t["grposcope"]["step_s"], t["grposcope-nodiag"]["step_s"]))
        on = med(t["grposcope"]["step_s"])  # both skip steps without signal
        verdict = "smaller" if abs(on - off) < spread else "larger"
        print(f"  step with diagnostics off {median_spread(t['grposcope-nodiag']['step_s'])} s vs on "
              f"{median_spread(t['grposcope']['step_s'])} s: {(on - off) / off:+.1%}, {verdict} than the "
              f"step-to-step spread ({spread:.2f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=5, help="measured steps per trainer")
    parser.add_argument("--warmup", type=int, default=1, help="steps per trainer not measured")
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--length", type=int, default=64, help="max_completion_length (and, forced, min_new_tokens)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt-style", choices=("boxed", "quickstart"), default="boxed",
                        help="boxed: a bare question asking for a boxed answer (completions of tens of tokens); "
                        "quickstart: the quickstart's worked-example prompts (a few tokens)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--forced-length", action="store_true", help="every completion exactly --length tokens "
                        "(min_new_tokens), as the first version of this bench measured")
    parser.add_argument("--no-trl", action="store_true", help="grposcope only")
    parser.add_argument("--no-trl-default", action="store_true",
                        help="skip TRL at its default (gradient checkpointing on), the second TRL figure")
    parser.add_argument("--no-nodiag", action="store_true", help="skip the diagnostics-off run")
    parser.add_argument("--no-noskip", action="store_true",
                        help="skip the run with skip_no_signal_steps=False (every step updates, as TRL's do)")
    parser.add_argument("--rollout-dtype", default="float32", help="grposcope's rollout_dtype (its default: float32)")
    parser.add_argument("--decode-loop", default="grposcope", help="grposcope's decode_loop (its default: grposcope)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    result = run(args)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
