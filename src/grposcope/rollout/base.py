"""What every generation backend returns, and the completion bookkeeping they share.

Notation: N = B * G sequences, P prompt tokens (left-padded), T completion tokens (right-padded).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    max_completion_length: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    greedy: bool = False
    extra: tuple[tuple[str, object], ...] = ()  # more `generate` keyword arguments, e.g. (("min_new_tokens", 64),)


@dataclass
class Rollout:
    prompt_ids: torch.Tensor  # (N, P) left-padded
    prompt_mask: torch.Tensor  # (N, P) 1 on real prompt tokens
    completion_ids: torch.Tensor  # (N, T) right-padded
    completion_mask: torch.Tensor  # (N, T) 1 on generated tokens up to and including the first EOS
    truncated: torch.Tensor  # (N,) bool: reached max_completion_length without EOS
    texts: list[str]  # (N,) decoded completions, special tokens dropped

    @property
    def lengths(self) -> torch.Tensor:
        return self.completion_mask.sum(dim=1)  # (N,)


class RolloutBackend:
    """Interface of a generation backend."""

    def generate(self, prompts: list[str], num_generations: int, params: SamplingParams) -> Rollout:
        raise NotImplementedError


def completion_mask(completion_ids: torch.Tensor, eos_ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Marks tokens up to and including the first EOS.  completion_ids (N, T) -> mask (N, T), truncated (N,).

    A row with no EOS is truncated: every one of its T positions counts, and it ends mid-answer.
    """
    is_eos = torch.isin(completion_ids, torch.tensor(eos_ids, device=completion_ids.device))  # (N, T)
    has_eos = is_eos.any(dim=1)  # (N,)
    t = completion_ids.shape[1]
    first_eos = torch.where(has_eos, is_eos.int().argmax(dim=1), torch.full_like(has_eos, t, dtype=torch.long))
    positions = torch.arange(t, device=completion_ids.device).unsqueeze(0)  # (1, T)
    mask = positions <= first_eos.unsqueeze(1)  # (N, T) includes the EOS itself: the model learns to stop
    return mask.long(), ~has_eos
