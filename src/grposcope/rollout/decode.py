"""grposcope's own decode loop: one forward per token over the reserved KV cache, and inverse-CDF sampling.

transformers' `generate` samples with `torch.multinomial`, which on a CPU draws one exponential per vocabulary
entry: 12.4 ms of a 98.6 ms decode step for 16 rows x 49,152 entries (bench/decode_overhead.py). Inverse-CDF
sampling draws one uniform per row and finds where it falls in the cumulative distribution: the same
distribution, a fraction of the cost, but another use of the random stream, so a seed gives other tokens than
`generate` does (greedy decoding gives the same ones). The loop also records the log-probability of each drawn
token under the distribution that drew it, which truncated importance sampling needs when the rollout runs a
lower-precision copy of the weights (`trainer/rollout_copy.py`).

What it applies, in `generate`'s order: `min_new_tokens` (no EOS before it), temperature, top-k, top-p.
Any other `generation_kwargs` go through `generate` itself (`hf.TransformersRollout`).

Notation: N rows, P prompt tokens (left-padded), T completion tokens, V vocabulary.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from .base import SamplingParams

BLOCK = 1024  # vocabulary entries per block of the two-level inverse CDF


def warp(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Temperature, then top-k, then top-p (nucleus), as transformers' warpers apply them.  (N, V) -> (N, V)

    Entries outside top-k or the nucleus become -inf; the nucleus keeps the smallest set of top entries whose
    probability reaches top_p, and always the top entry.
    """
    z = logits / params.temperature if params.temperature != 1.0 else logits
    if params.top_k and params.top_k < z.shape[-1]:
        kth = torch.topk(z, params.top_k, dim=-1).values[:, -1:]  # (N, 1)
        z = z.masked_fill(z < kth, float("-inf"))
    if params.top_p < 1.0:
        ascending, order = torch.sort(z, dim=-1)  # (N, V)
        below = ascending.softmax(dim=-1).cumsum(dim=-1) <= 1.0 - params.top_p  # (N, V) mass left out
        below[:, -1] = False  # the top entry stays
        z = z.masked_fill(below.scatter(-1, order, below), float("-inf"))
    return z


def inverse_cdf(probs: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """The entry where each row's uniform falls in its cumulative distribution.  probs (N, V), uniform (N,) in
    [0, 1) -> (N,) token ids.

    Two levels, so that no long sum is taken in float32 (whose rounding, ~V x 6e-8, would shift mass between
    entries): the blocks' totals and their running sum in float64, then the running sum inside the chosen
    block, in float64 too. An entry of probability 0 is never drawn. Rows need not sum to 1.
    """
    n, v = probs.shape
    pad = -v % BLOCK  # SmolLM2's 49,152 entries are 48 whole blocks: no padded copy of (N, V) a token
    blocks = (torch.nn.functional.pad(probs, (0, pad)) if pad else probs).view(n, -1, BLOCK)  # (N, K, BLOCK)
    running = blocks.sum(dim=-1, dtype=torch.float64).cumsum(dim=-1)  # (N, K)
    target = uniform.to(torch.float64) * running[:, -1]  # (N,) in [0, total)
    block = torch.searchsorted(running, target.unsqueeze(1), right=True).squeeze(1)  # (N,)
    block = torch.minimum(block, _last_positive(running))  # rounding at the very end: the last block with mass
    before = torch.where(block > 0, running.gather(1, (block - 1).clamp(min=0).unsqueeze(1)).squeeze(1), 0.0)
    rows = torch.arange(n, device=probs.device)
    inner = blocks[rows, block].to(torch.float64).cumsum(dim=-1)  # (N, BLOCK)
    within = torch.searchsorted(inner, (target - before).unsqueeze(1), right=True).squeeze(1)  # (N,)
    within = torch.minimum(within, _last_positive(inner))
    return block * BLOCK + within


def _last_positive(running: torch.Tensor) -> torch.Tensor:
    """Per row of a running sum (N, K), the last position that adds mass: the first that reaches the total."""
    return (running < running[:, -1:]).sum(dim=-1)  # (N,)


def next_tokens(logits: torch.Tensor, params: SamplingParams, banned: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """The next token of each row, never one of `banned` (ids), and its log-probability under the
    temperature-scaled distribution (the one the loss's log-probs use: top-k, top-p and the ban are left out of
    both).  logits (N, V) -> (N,), (N,)"""
    logits = logits.float()
    scaled = logits / params.temperature if params.temperature != 1.0 and not params.greedy else logits
    allowed = logits if banned is None else logits.index_fill(1, banned, float("-inf"))
    if params.greedy:
        tokens = allowed.argmax(dim=-1)
    else:
        probs = warp(allowed, params).softmax(dim=-1)  # (N, V)
        tokens = inverse_cdf(probs, torch.rand(len(logits), device=logits.device))
    logp = scaled.gather(1, tokens.unsqueeze(1)).squeeze(1) - torch.logsumexp(scaled, dim=-1)
    return tokens, logp


# From this many rows, a decode step's float32 products run weight-major on a CPU (`weight_major_linears`).
# With MKL 2024.2, both orientations gave equal bits from 12 rows up (and at 1), and differed at 2-8.
WEIGHT_MAJOR_ROWS = 16


@contextlib.contextmanager
def weight_major_linears(model, rows: int) -> Iterator[None]:
    """While decoding `rows` rows on a CPU, each bias-free float32 nn.Linear computes (W x^T)^T instead of
    x W^T: the same products, but MKL then blocks the weight's long side: 118.7 -> 91.3 ms of products a decode
    step of 16 rows, the 49,152-entry LM head most (bench/weight_major.py). The result is copied
    back to row-major, so the layers after it see the layout (and, on the kernels measured, the bits)
    `F.linear` gives. Other modules, devices and dtypes keep their own forward."""
    eligible = rows >= WEIGHT_MAJOR_ROWS
    linears = [m for m in model.modules() if eligible and type(m) is torch.nn.Linear and m.bias is None
               and m.weight.device.type == "cpu" and m.weight.dtype == torch.float32]
    for module in linears:
        module.forward = _weight_major(module)
    try:
        yield
    finally:
        for module in linears:
            module.__dict__.pop("forward", None)


def _weight_major(module: torch.nn.Linear):
    def forward(x: torch.Tensor) -> torch.Tensor:  # (..., K) -> (..., N)
        flat = x.reshape(-1, x.shape[-1])  # (R, K)
        out = torch.mm(module.weight, flat.T).T.contiguous()  # (N, K) @ (K, R) -> (R, N), row-major
        return out.view(*x.shape[:-1], module.weight.shape[0])
    return forward


@torch.inference_mode()
def decode(model, ids: torch.Tensor, mask: torch.Tensor, cache, params: SamplingParams, eos_ids: list[int],
           pad_id: int, min_new_tokens: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Completions of the rows `ids` (N, P), left-padded with `mask` (N, P), whose cache holds every prompt
    token but the last (None: nothing cached). Returns the tokens (N, T') and their log-probabilities (N, T'),
    T' <= max_completion_length: after a row's EOS, its tokens are `pad_id`; the loop ends when every row has.
    No EOS is drawn before `min_new_tokens` tokens (transformers' min_new_tokens).
    """
    n = ids.shape[0]
    if cache is None:  # nothing prefilled: the first pass runs the whole prompt
        step_ids, positions = ids, (mask.cumsum(dim=1) - 1).clamp(min=0)
    else:
        step_ids, positions = ids[:, -1:], (mask.sum(dim=1, keepdim=True) - 1).clamp(min=0)  # (N, 1)
    eos = torch.tensor(eos_ids, device=ids.device)
    running = torch.ones(n, dtype=torch.bool, device=ids.device)  # (N,) rows before their EOS
    tokens, logps = [], []
    with weight_major_linears(model, n):
        for step in range(params.max_completion_length):
            out = model(input_ids=step_ids, attention_mask=mask, position_ids=positions, past_key_values=cache,
                        use_cache=True, logits_to_keep=1)
            cache = out.past_key_values
            token, logp = next_tokens(out.logits[:, -1, :], params, eos if step < min_new_tokens else None)  # (N,)
            token = torch.where(running, token, pad_id)
            tokens.append(token)
            logps.append(torch.where(running, logp, 0.0))
            running = running & ~torch.isin(token, eos)
            if not running.any():
                break
            step_ids = token.unsqueeze(1)  # (N, 1)
            mask = torch.cat([mask, mask.new_ones(n, 1)], dim=1)  # (N, P + t)
            positions = positions[:, -1:] + 1
    return torch.stack(tokens, dim=1), torch.stack(logps, dim=1)
