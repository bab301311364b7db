"""One decode step of the embedded SmolLM2-135M, route by route, against its floor: what a rollout copy of the
weights in another precision buys, on this machine.

A decode step here is the model's forward for `--rows` rows of one new token each, over a KV cache holding a
121-token prompt and `--position` generated tokens (the bench's shapes: 2 prompts x G 8, mid-completion). Routes:
the fp32 model as the trainer holds it; a bf16 copy (only where the CPU computes bf16 natively, else reported as
skipped); int8 dynamic quantization of every Linear (weights int8 per output channel, activations quantized per
call; `torch.ao.quantization.quantize_dynamic`). The floor of a step is the larger of reading every fp32 weight
once (at the copy bandwidth measured here, bytes read plus written, as bench/step.py prices it) and the step's
fp32 arithmetic (at the matmul rate measured here): what generation is judged against. Each route's logits are
compared with fp32's on the same step (max |difference|, the KL of its next-token distribution to fp32's, and the
largest probability ratio on the fp32-sampled tokens), which is what truncated importance sampling would correct.
Nothing else may run meanwhile.

    .venv/bin/python bench/decode_routes.py --rows 16 --steps 30
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time

import torch
from _common import MatmulWeights, copy_gbps, matmul_gflops


def cpu_has_native_bf16() -> bool:
    """Whether oneDNN computes bf16 natively here (AVX-512 BF16 or AMX); some machines of this kind have it."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of the weights a decode step reads (quantized Linears: their packed int8 weights)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    for module in model.modules():
        if hasattr(module, "_packed_params") and callable(getattr(module, "weight", None)):
            weight, bias = module.weight(), module.bias()  # a dynamically quantized Linear's int8 weight
            total += weight.numel() * weight.element_size() + (bias.numel() * 4 if bias is not None else 0)
    return total


def cache_after_prompt(model, prompt_len: int, rows: int, position: int):
    """A KV cache with the prompt and `position` generated tokens, for `rows` rows."""
    from grposcope.rollout.kv_cache import reserve, reserved_cache

    ids = torch.randint(100, 1000, (1, prompt_len + position), generator=torch.Generator().manual_seed(0))
    cache = reserved_cache()
    with torch.inference_mode():
        model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
    reserve(cache, rows, prompt_len + position + 8)
    return cache


def time_route(model, rows: int, prompt_len: int, position: int, steps: int) -> tuple[float, torch.Tensor]:
    """Median seconds of one decode step, and its logits (rows, V)."""
    token = torch.randint(100, 1000, (rows, 1), generator=torch.Generator().manual_seed(1))
    times, logits = [], None
    for _ in range(steps + 2):  # two warm-ups: packing, allocator
        cache = cache_after_prompt(model, prompt_len, rows, position)
        pos = torch.full((rows, 1), prompt_len + position)
        with torch.inference_mode():
            t0 = time.perf_counter()
            out = model(input_ids=token, position_ids=pos, past_key_values=cache, use_cache=True)
            times.append(time.perf_counter() - t0)
        logits = out.logits[:, -1].float()
    return statistics.median(times[2:]), logits


def mismatch(reference: torch.Tensor, other: torch.Tensor) -> dict[str, float]:
    """How a route's next-token distribution departs from fp32's: max |logit difference|, the mean KL(fp32 ||
    route), and the largest probability ratio route / fp32 over tokens fp32 samples."""
    lp, lq = reference.log_softmax(-1), other.log_softmax(-1)
    kl = (lp.exp() * (lp - lq)).sum(-1)  # (rows,)
    tokens = torch.multinomial(lp.exp(), 64, replacement=True, generator=torch.Generator().manual_seed(2))
    ratio = (lq.gather(1, tokens) - lp.gather(1, tokens)).exp()  # (rows, 64)
    return {"max_abs_logit_diff": float((reference - other).abs().max()), "kl_mean": float(kl.mean()),
            "ratio_min": float(ratio.min()), "ratio_max": float(ratio.max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--prompt", type=int, default=121)
    parser.add_argument("--position", type=int, default=32)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from grposcope.models import load_model

    model, _ = load_model("embedded:smollm2-135m-instruct")
    model.eval()
    gflops, gbps = matmul_gflops(), copy_gbps()
    weights = MatmulWeights.of(model)
    arithmetic = 2 * weights.with_head * args.rows / (gflops * 1e9)
    print(f"machine: matmul {gflops:.1f} GFLOP/s, copy {gbps:.1f} GB/s, native bf16: {cpu_has_native_bf16()}, "
          f"torch {torch.__version__}, {args.threads} threads; {args.rows} rows at position "
          f"{args.prompt}+{args.position}")
    routes = {"fp32": model}
    if cpu_has_native_bf16():
        routes["bf16"] = copy.deepcopy(model).to(torch.bfloat16)
    routes["int8-dynamic"] = torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear},
                                                                   dtype=torch.qint8)
    # as bench/step.py prices a decode step: every weight read once at the copy's rate (bytes read + written)
    fp32_floor = max(weight_bytes(model) / (gbps * 1e9), arithmetic)
    results, reference = {}, None
    for name, route in routes.items():
        seconds, logits = time_route(route, args.rows, args.prompt, args.position, args.steps)
        reference = logits if reference is None else reference
        read = weight_bytes(route) / (gbps * 1e9)
        results[name] = {"step_ms": seconds * 1e3, "x_fp32_floor": seconds / fp32_floor,
                         "weights_mib": weight_bytes(route) / 2**20, "read_floor_ms": read * 1e3,
                         **mismatch(reference, logits)}
        r = results[name]
        print(f"{name:>13}: {r['step_ms']:7.1f} ms a step, {r['x_fp32_floor']:.2f}x the fp32 floor "
              f"({fp32_floor * 1e3:.1f} ms); weights {r['weights_mib']:.0f} MiB; max |dlogit| "
              f"{r['max_abs_logit_diff']:.2e}, KL {r['kl_mean']:.2e}, ratio {r['ratio_min']:.3f}-{r['ratio_max']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gflops": gflops, "gbps": gbps, "native_bf16": cpu_has_native_bf16(),
                       "fp32_floor_ms": fp32_floor * 1e3, "args": vars(args), "routes": results}, f, indent=1)


if __name__ == "__main__":
    main()
