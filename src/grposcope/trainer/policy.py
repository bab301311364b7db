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
    rewards: torch.Tensor | None = None  # (n,) each row's reward, for the diagnostics (measure_update)

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


def completion_logits(model, batch: TrainBatch, temperature: float) -> torch.Tensor:
    """Next-token logits at every completion position, divided by the sampling temperature.  -> (n, T, V)

    Rows that share a prompt (a group's G completions) share its forward pass: the prompt runs once, its
    keys and values are copied to each of its rows, and only the completions run per row (see
    `_shared_prompt_logits`). Gradients flow back through the copies into the one prompt pass, so the
    result equals a forward over every full row, with a G-th of the prompt's cost.
    Position ids follow the attention mask, as in generation: with left padding, the first real token of
    every row is position 0, so these are the distributions that sampled the tokens.
    """
    _, inverse = torch.unique_consecutive(batch.prompt_ids, dim=0, return_inverse=True)  # (n,)
    first = _first_rows(inverse)  # (U,) a row of each distinct prompt
    same_masks = torch.equal(batch.prompt_mask, batch.prompt_mask[first][inverse])
    if len(first) < len(batch) and same_masks:
        logits = _shared_prompt_logits(model, batch, first, inverse)
    else:
        logits = _full_row_logits(model, batch)
    return logits if temperature == 1.0 else logits / temperature  # no (n, T, V) copy at temperature 1


def _full_row_logits(model, batch: TrainBatch) -> torch.Tensor:
    """One forward over [prompt, completion] per row; only the T + 1 last positions reach the LM head."""
    ids = torch.cat([batch.prompt_ids, batch.completion_ids], dim=1)  # (n, P + T)
    attention = torch.cat([batch.prompt_mask, torch.ones_like(batch.completion_ids)], dim=1)  # (n, P + T)
    positions = (attention.cumsum(dim=1) - 1).clamp(min=0)  # (n, P + T)
    t = batch.completion_ids.shape[1]
    device = _device(model)
    out = model(
        input_ids=ids.to(device), attention_mask=attention.to(device), position_ids=positions.to(device),
        logits_to_keep=t + 1, use_cache=False,
    )
    return out.logits[:, :-1]  # (n, T, V): position t predicts completion token t


def _shared_prompt_logits(model, batch: TrainBatch, first: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
    """The prompt once per distinct prompt (rows `first`, U of them), then the completions of all n rows on
    its cache (`inverse` maps each row to its prompt)."""
    device = _device(model)
    prompt_ids, prompt_mask = batch.prompt_ids[first].to(device), batch.prompt_mask[first].to(device)  # (U, P)
    prompt = model(
        input_ids=prompt_ids, attention_mask=prompt_mask,
        position_ids=(prompt_mask.cumsum(dim=1) - 1).clamp(min=0), use_cache=True, logits_to_keep=1,
    )
    first_logits = prompt.logits[:, -1:][inverse.to(device)]  # (n, 1, V): predicts completion token 0
    if batch.completion_ids.shape[1] == 1:
        return first_logits
    cache = prompt.past_key_values
    cache.batch_select_indices(inverse.to(device))  # (U, ...) -> (n, ...): differentiable copies
    completion_in = batch.completion_ids[:, :-1].to(device)  # (n, T - 1): the last token predicts nothing
    lengths = batch.prompt_mask.sum(dim=1, keepdim=True).to(device)  # (n, 1) real prompt tokens
    attention = torch.cat([batch.prompt_mask.to(device), torch.ones_like(batch.completion_ids, device=device)], 1)
    out = model(
        input_ids=completion_in, attention_mask=attention[:, :-1],
        position_ids=lengths + torch.arange(completion_in.shape[1], device=device), past_key_values=cache,
        use_cache=True,
    )
    return torch.cat([first_logits, out.logits], dim=1)  # (n, T, V)


def _first_rows(inverse: torch.Tensor) -> torch.Tensor:
    """Index of the first row of each run in `inverse` (sorted run ids 0..U-1)."""  # (n,) -> (U,)
    change = torch.ones_like(inverse, dtype=torch.bool)
    change[1:] = inverse[1:] != inverse[:-1]
    return change.nonzero().squeeze(1)


def _device(model) -> torch.device:
    return next(model.parameters()).device


def completion_logps(
    model, batch: TrainBatch, temperature: float, with_entropy: bool = False, entropy_grad: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of the completion tokens (n, T), and their entropies (n, T) if asked (TRL's temperature).

    A measured entropy comes from the log-probs' own pass over the logits; with `entropy_grad` (an entropy
    bonus in the loss) it is computed on its own, differentiably.
    """
    logits = completion_logits(model, batch, temperature)  # (n, T, V)
    tokens = batch.completion_ids.to(logits.device)  # (n, T)
    if with_entropy and not entropy_grad:
        return losses.selective_log_probs(logits, tokens, with_entropy=True)
    logp = losses.selective_log_probs(logits, tokens)  # (n, T)
    return logp, diagnostics.token_entropy(logits) if with_entropy else None
