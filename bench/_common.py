"""What the benchmarks share: the machine's matmul rate, the FLOP floor of a step, and medians with spread.

The floor is arithmetic, not a measurement: a forward pass costs 2 FLOPs per matmul weight per token and a
backward pass twice that (Kaplan et al., "Scaling Laws for Neural Language Models", arXiv 2001.08361).
For a step that generates and then trains on the same sequences:

    generation (prefill and decode):  2 * W * (P + C)
    update (forward and backward):    6 * W * (P + C)

where P and C are the step's real prompt and completion tokens (padding excluded) and W the weights a token
meets in matmuls. The LM head (vocabulary x hidden) runs only where logits are needed, the completion
positions (and the last prompt position), so prompt tokens count W without the head. Attention scores and
element-wise work are left out: the floor is a lower bound.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch


def matmul_gflops(size: int = 2048, repeats: int = 5) -> float:
    """The best fp32 rate of a size^3 matmul on this machine, in GFLOP/s (2 * size^3 FLOPs each)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)  # warm-up: thread pool, allocator
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2 * size**3 / best / 1e9


@dataclass(frozen=True)
class MatmulWeights:
    """Weights a token meets in matmuls: all of them (with the head) and without the LM head."""

    with_head: int
    without_head: int

    @classmethod
    def of(cls, model) -> "MatmulWeights":
        head = model.get_output_embeddings().weight.numel()
        embed = model.get_input_embeddings().weight.numel()  # a lookup, not a matmul
        tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
        total = sum(p.numel() for p in model.parameters())  # tied weights are counted once
        body = total - embed - (0 if tied else head)
        return cls(with_head=body + head, without_head=body)


def floor_flops(weights: MatmulWeights, prompt_tokens: int, completion_tokens: int, sequences: int) -> float:
    """FLOPs a step must do at least: generation plus update, for its real token counts (see the top)."""
    head_positions = completion_tokens + sequences  # completion positions and each prompt's last position
    body_positions = prompt_tokens + completion_tokens
    forward = 2 * (weights.without_head * body_positions + (weights.with_head - weights.without_head) * head_positions)
    return forward + 3 * forward  # generation: one forward; update: forward and backward (2x forward)


def copy_gbps(megabytes: int = 512, repeats: int = 5) -> float:
    """The best memory bandwidth of a large tensor copy, in GB/s (bytes read plus bytes written)."""
    src = torch.ones(megabytes * 2**20 // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - t0)
    return 2 * src.numel() * 4 / best / 1e9


def entropy_cost_s(rows: int, length: int, vocab: int, repeats: int = 5) -> tuple[float, float]:
    """Median seconds of the log-probs' forward and backward over (rows, length, vocab) logits, without and
    with the entropy measured in the same pass: the entropy's marginal cost is the difference."""
    from grposcope.core.losses import selective_log_probs

    logits = torch.randn(rows, length, vocab).requires_grad_()
    tokens = torch.randint(0, vocab, (rows, length))
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(repeats + 1):  # the first round warms up
        for with_entropy in (False, True):
            t0 = time.perf_counter()
            out = selective_log_probs(logits, tokens, with_entropy=with_entropy)
            (out[0] if with_entropy else out).sum().backward()
            times[with_entropy].append(time.perf_counter() - t0)
            logits.grad = None
    return statistics.median(times[False][1:]), statistics.median(times[True][1:])


def median_spread(values: list[float]) -> str:
    """'median (min-max)' of a list, as the benches print it."""
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def peak_rss_mib() -> float:
    """The peak resident memory of this process so far, in MiB (Linux reports KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def boxed_chat_prompts(tokenizer) -> list[str]:
    """The decode benches' two prompts (x G 8 = 16 rows): a bare sum asking for a boxed answer, in the
    model's chat template, ready for generation."""
    questions = [f"What is {a} + {b}? Put your final answer within \\boxed{{}}." for a, b in ((17, 25), (31, 48))]
    return [tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
            for q in questions]
