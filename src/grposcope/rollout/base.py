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
    # (N, T) log-probability of each token under the distribution that drew it (temperature-scaled, as the
    # loss's), when the backend records it (rollout.decode); 0 on padding
    sampling_logp: torch.Tensor | None = None

    @property
    def lengths(self) -> torch.Tensor:
        return self.completion_mask.sum(dim=1)  # (N,)

    def select(self, index: torch.Tensor) -> "Rollout":
        """The rows `index` (N',), in that order."""
        return Rollout(self.prompt_ids[index], self.prompt_mask[index], self.completion_ids[index],
                       self.completion_mask[index], self.truncated[index], [self.texts[i] for i in index.tolist()],
                       None if self.sampling_logp is None else self.sampling_logp[index])


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


def _pad_to(x: torch.Tensor, width: int, value: int, left: bool) -> torch.Tensor:
    pad = x.new_full((x.shape[0], width - x.shape[1]), value)
    return torch.cat([pad, x] if left else [x, pad], dim=1)


def concat(parts: list[Rollout], pad_id: int) -> Rollout:
    """Rollouts one after the other, padded to the widest prompt (left) and completion (right)."""
    if len(parts) == 1:
        return parts[0]
    p = max(r.prompt_ids.shape[1] for r in parts)
    t = max(r.completion_ids.shape[1] for r in parts)
    return Rollout(
        torch.cat([_pad_to(r.prompt_ids, p, pad_id, left=True) for r in parts]),
        torch.cat([_pad_to(r.prompt_mask, p, 0, left=True) for r in parts]),
        torch.cat([_pad_to(r.completion_ids, t, pad_id, left=False) for r in parts]),
        torch.cat([_pad_to(r.completion_mask, t, 0, left=False) for r in parts]),
        torch.cat([r.truncated for r in parts]),
        [text for r in parts for text in r.texts],
        _concat_logp(parts, t),
    )


def _concat_logp(parts: list[Rollout], width: int) -> torch.Tensor | None:
    if any(r.sampling_logp is None for r in parts):
        return None
    return torch.cat([torch.nn.functional.pad(logp, (0, width - logp.shape[1]))
                      for r in parts if (logp := r.sampling_logp) is not None])  # all of them: checked above
