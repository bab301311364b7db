"""The model side of a step: log-probs (and entropy) of completion tokens under the current policy.

Notation: n sequences in a micro-batch, P prompt tokens (left-padded), T completion tokens (right-padded),
V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from ..core import diagnostics, losses


@dataclass
class TrainBatch:
    """Rows of one generation batch, as the update consumes them."""

    prompt_ids: torch.Tensor  # (n, P)
    prompt_mask: torch.Tensor  # (n, P)
    completion_ids: torch.Tensor  # (n, T)
    loss_mask: torch.Tensor  # (n, T) completion tokens that count in the loss
    advantages: torch.Tensor  # (n,)
    old_logp: torch.Tensor | None = None  # (n, T) when batches are reused (num_iterations > 1)
    ref_logp: torch.Tensor | None = None  # (n, T) when a reference policy is used

    def rows(self, index: torch.Tensor) -> "TrainBatch":
        """A sub-batch, with the padding columns that none of its rows uses cut away."""
        picked = {f.name: _take(getattr(self, f.name), index) for f in fields(self)}
        t = int(picked["loss_mask"].sum(dim=0).nonzero().max().item()) + 1 if picked["loss_mask"].any() else 1
        first = int(picked["prompt_mask"].sum(dim=0).nonzero().min().item())  # leading all-padding columns
        for name in ("completion_ids", "loss_mask", "old_logp", "ref_logp"):
            if picked[name] is not None:
                picked[name] = picked[name][:, :t]
        picked["prompt_ids"], picked["prompt_mask"] = picked["prompt_ids"][:, first:], picked["prompt_mask"][:, first:]
        return TrainBatch(**picked)

    def __len__(self) -> int:
        return self.completion_ids.shape[0]


def _take(x: torch.Tensor | None, index: torch.Tensor) -> torch.Tensor | None:
    return None if x is None else x[index]


def completion_logps(
    model, batch: TrainBatch, temperature: float, with_entropy: bool, entropy_grad: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of the completion tokens (n, T), and their entropies (n, T) if asked.

    Position ids follow the attention mask, as in generation: with left padding, the first real token of
    every row is position 0, so the log-probs are those of the distribution that sampled the tokens.
    Logits are divided by the sampling temperature (as TRL does).
    """
    ids = torch.cat([batch.prompt_ids, batch.completion_ids], dim=1)  # (n, P + T)
    attention = torch.cat([batch.prompt_mask, torch.ones_like(batch.completion_ids)], dim=1)  # (n, P + T)
    positions = (attention.cumsum(dim=1) - 1).clamp(min=0)  # (n, P + T)
    t = batch.completion_ids.shape[1]
    device = next(model.parameters()).device
    out = model(
        input_ids=ids.to(device), attention_mask=attention.to(device), position_ids=positions.to(device),
        logits_to_keep=t + 1, use_cache=False,
    )
    logits = out.logits[:, :-1] / temperature  # (n, T, V): position t predicts completion token t
    logp = losses.selective_log_probs(logits, batch.completion_ids.to(device))  # (n, T)
    entropy = None
    if with_entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            entropy = diagnostics.token_entropy(logits if entropy_grad else logits.detach())  # (n, T)
    return logp, entropy
