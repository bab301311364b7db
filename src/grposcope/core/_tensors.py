"""Small tensor helpers shared by the core modules.

Notation (used in every core module):
    B  prompts in a step          G  completions per prompt (the group)
    N  sequences, N = B * G       T  completion tokens         V  vocabulary size
"""

from __future__ import annotations

from typing import Callable, Iterator

import torch

# Rows of a (N*T, V) logits matrix handled at once by the chunked reductions: 256 rows of SmolLM2's
# 49,152-entry vocabulary are 50 MB of float32 temporaries instead of gigabytes for a whole batch.
DEFAULT_CHUNK_ROWS = 256


def check_rewards(rewards: torch.Tensor, name: str = "rewards") -> torch.Tensor:
    """Validates a (B, G) reward matrix and returns it as float32 (float64 stays float64)."""
    if not isinstance(rewards, torch.Tensor):
        rewards = torch.as_tensor(rewards, dtype=torch.float32)
    if rewards.dim() != 2:
        raise ValueError(
            f"{name} must have shape (B, G) = (prompts, completions per prompt), got {tuple(rewards.shape)}; "
            "reshape a flat batch with rewards.view(-1, num_generations)"
        )
    if rewards.shape[1] < 1 or rewards.shape[0] < 1:
        raise ValueError(f"{name} is empty: shape {tuple(rewards.shape)}")
    if not torch.is_floating_point(rewards):
        rewards = rewards.float()
    if not torch.isfinite(rewards).all():
        bad = (~torch.isfinite(rewards)).nonzero()[0].tolist()
        raise ValueError(
            f"{name} holds a non-finite value at (prompt, completion) = {tuple(bad)}: "
            "a reward function returned NaN or inf; fix the function or score such samples explicitly"
        )
    return rewards


def group_std(x: torch.Tensor, unbiased: bool) -> torch.Tensor:
    """Std over the last dimension: ddof 1 if `unbiased`, else population std.  (..., G) -> (...)."""
    return x.std(dim=-1, correction=1 if unbiased else 0)


def masked_sum(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum of x where mask is set.  x, mask: same shape -> scalar."""
    return (x * mask).sum()


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x over the set entries of mask (0 when none is set).  x, mask: same shape -> scalar."""
    return masked_sum(x, mask) / mask.sum().clamp(min=1)


def row_chunks(logits: torch.Tensor, chunk_rows: int) -> Iterator[torch.Tensor]:
    """Yields (rows, V) slices of logits (..., V) flattened to (rows_total, V), without copying."""
    flat = logits.reshape(-1, logits.shape[-1])  # (N*T, V), a view when logits is contiguous
    for start in range(0, flat.shape[0], chunk_rows):
        yield flat[start : start + chunk_rows]


def map_rows(
    logits: torch.Tensor, fn: Callable[[torch.Tensor, slice], torch.Tensor], chunk_rows: int
) -> torch.Tensor:
    """Applies fn(chunk (rows, V), row_slice) -> (rows,) chunk by chunk; returns logits.shape[:-1]."""
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    outs = []
    for i, chunk in enumerate(row_chunks(logits, chunk_rows)):
        start = i * chunk_rows
        outs.append(fn(chunk, slice(start, start + chunk.shape[0])))
    if not outs:
        return logits.new_zeros(logits.shape[:-1])
    return torch.cat(outs).view(logits.shape[:-1])
