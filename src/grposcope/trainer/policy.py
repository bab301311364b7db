"""The model side of a step: log-probs (and entropy) of completion tokens under the current policy.

Notation: n sequences in a micro-batch, P prompt tokens (left-padded), T completion tokens (right-padded),
V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, cast

import torch
from transformers.cache_utils import DynamicCache

from ..core import diagnostics, losses

# What a separate pass over a part of the rows costs beyond its positions, in positions: 30 layers of small
# products and their launch. Chosen on the embedded model (2 prompts x 8, max 64, 2 cores): 64 split 16 rows
# into 6 of length <= 33 and 10 of 64 and took 7.45-9.09 s forward + backward, 16 (four parts) 8.07-8.63 s, one
# pass 8.42-10.60 s (4 runs each; timings on this host varied by up to 25% from run to run).
PART_OVERHEAD = 64


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
    sampling_logp: torch.Tensor | None = None  # (n, T) the rollout copy's log-probs of its tokens (rollout_dtype)

    def rows(self, index: torch.Tensor) -> "TrainBatch":
        """A sub-batch, with the padding columns that none of its rows uses cut away."""
        picked: dict[str, Any] = {f.name: _take(getattr(self, f.name), index) for f in fields(self)}
        t = _width(picked["loss_mask"])
        first = int(picked["prompt_mask"].sum(dim=0).nonzero().min().item())  # leading all-padding columns
        for name in ("completion_ids", "loss_mask", "old_logp", "ref_logp", "sampling_logp"):
            if picked[name] is not None:
                picked[name] = picked[name][:, :t]
        picked["prompt_ids"], picked["prompt_mask"] = picked["prompt_ids"][:, first:], picked["prompt_mask"][:, first:]
        return TrainBatch(**picked)

    def to(self, device: torch.device) -> "TrainBatch":
        """The batch on `device`: the rollout hands rows back on the CPU, the loss runs where the model is."""
        return TrainBatch(**cast("dict[str, Any]", {f.name: None if (x := getattr(self, f.name)) is None
                                                   else x.to(device) for f in fields(self)}))

    def __len__(self) -> int:
        return self.completion_ids.shape[0]


def _take(x: torch.Tensor | None, index: torch.Tensor) -> torch.Tensor | None:
    return None if x is None else x[index]


def completion_logits(model, batch: TrainBatch, temperature: float) -> torch.Tensor:
    """Next-token logits at every completion position, divided by the sampling temperature.  -> (n, T', V)

    T' reaches the last column that any row's loss mask uses. All rows run in one pass (no split by length):
    the reference against which the split passes of `completion_logps` are tested.
    """
    logits = torch.cat([part for _, part in _logits_by_length(model, batch, [torch.arange(len(batch))])])
    return logits if temperature == 1.0 else logits / temperature  # no (n, T, V) copy at temperature 1


def _logits_by_length(model, batch: TrainBatch, parts: list[torch.Tensor]):
    """For each part (row indices), the logits of its rows over its own width: its longest row.
    Yields (rows (r,), logits (r, T_r, V)).

    Rows that share a prompt (a group's G completions) share its forward pass: the prompt runs once, its
    keys and values are copied to each row of each part, and only the completions run per part (see
    `_shared_prompt_logits`). Gradients flow back through the copies into the one prompt pass, so the
    result equals a forward over every full row, with a G-th of the prompt's cost.
    Position ids follow the attention mask, as in generation: with left padding, the first real token of
    every row is position 0, so these are the distributions that sampled the tokens.
    """
    _, inverse = torch.unique_consecutive(batch.prompt_ids, dim=0, return_inverse=True)  # (n,)
    first = _first_rows(inverse)  # (U,) a row of each distinct prompt
    same_masks = torch.equal(batch.prompt_mask, batch.prompt_mask[first][inverse])
    if len(first) < len(batch) and same_masks:
        yield from _shared_prompt_logits(model, batch, first, inverse, parts)
    else:
        for rows in parts:
            yield rows, _full_row_logits(model, batch.rows(rows))


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


def _shared_prompt_logits(model, batch: TrainBatch, first: torch.Tensor, inverse: torch.Tensor,
                          parts: list[torch.Tensor]):
    """The prompt once per distinct prompt (rows `first`, U of them), then the completions of each part's rows
    on a copy of its cache, `inverse` mapping each row to its prompt. Yields (rows, logits (r, T_r, V))."""
    device = _device(model)
    prompt_ids, prompt_mask = batch.prompt_ids[first].to(device), batch.prompt_mask[first].to(device)  # (U, P)
    prompt = model(
        input_ids=prompt_ids, attention_mask=prompt_mask,
        position_ids=(prompt_mask.cumsum(dim=1) - 1).clamp(min=0), use_cache=True, logits_to_keep=1,
    )
    last = prompt.logits[:, -1:]  # (U, 1, V): predicts completion token 0
    layers = [(layer.keys, layer.values) for layer in prompt.past_key_values.layers]  # (U, kv heads, P, d) each
    for rows in parts:
        t = _width(batch.loss_mask[rows])
        own = inverse[rows].to(device)  # (r,) each row's prompt
        first_logits = last[own]  # (r, 1, V)
        if t == 1:
            yield rows, first_logits
            continue
        cache = DynamicCache([(keys[own], values[own]) for keys, values in layers])  # differentiable copies
        completion_in = batch.completion_ids[rows, : t - 1].to(device)  # (r, t - 1): the last token predicts nothing
        prompt_mask_rows = batch.prompt_mask[rows].to(device)  # (r, P)
        lengths = prompt_mask_rows.sum(dim=1, keepdim=True)  # (r, 1) real prompt tokens
        attention = torch.cat([prompt_mask_rows, torch.ones_like(completion_in)], dim=1)  # (r, P + t - 1)
        out = model(
            input_ids=completion_in, attention_mask=attention,
            position_ids=lengths + torch.arange(t - 1, device=device), past_key_values=cache, use_cache=True,
        )
        yield rows, torch.cat([first_logits, out.logits], dim=1)  # (r, t, V)


def _width(loss_mask: torch.Tensor) -> int:
    """Columns up to the last one that counts in the loss (at least 1).  (r, T) -> int"""
    used = loss_mask.sum(dim=0).nonzero()
    return int(used.max().item()) + 1 if len(used) else 1


def length_parts(loss_mask: torch.Tensor, overhead: int | None = None) -> list[torch.Tensor]:
    """Rows split into parts of similar length, so that little padding is computed.  (n, T) -> parts (r,)

    Rows sorted by length (up to their last loss token) are cut into runs that minimise the positions
    computed, sum over parts of rows x longest row, plus `overhead` positions for each extra pass (the
    passes' fixed cost: small matrix products run slower), PART_OVERHEAD unless given. Exact dynamic
    programme over the cut points.
    """
    overhead = PART_OVERHEAD if overhead is None else overhead
    n, t = loss_mask.shape
    used = loss_mask.bool()
    lengths = torch.where(used.any(dim=1), t - used.flip(1).int().argmax(dim=1), 0)  # (n,) last loss token + 1
    order = lengths.argsort(stable=True)
    sorted_len = lengths[order].clamp(min=1).tolist()
    best, cut = [0.0] + [float("inf")] * n, [0] * (n + 1)  # best[j]: cost of rows :j; cut[j]: start of its part
    for j in range(1, n + 1):
        for i in range(j):  # the last part holds sorted rows i..j-1, whose longest is sorted_len[j - 1]
            cost = best[i] + (j - i) * sorted_len[j - 1] + overhead
            if cost < best[j]:
                best[j], cut[j] = cost, i
    parts, j = [], n
    while j > 0:
        parts.append(order[cut[j] : j])
        j = cut[j]
    return parts[::-1]


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

    Rows run in parts of similar length (`length_parts`), each over its own longest row: the padding after a
    short completion is not computed where its part is shorter, and log-probs and entropies are 0 past each part's
    width (outside the loss mask; inside a part, rows shorter than its longest still get theirs).
    A measured entropy comes from the log-probs' own pass over the logits; with `entropy_grad` (an entropy
    bonus in the loss) it is computed on its own, differentiably.
    """
    n, t = batch.completion_ids.shape
    logps, entropies, order = [], [], []  # type: list[torch.Tensor], list[Any], list[torch.Tensor]
    for rows, logits in _logits_by_length(model, batch, length_parts(batch.loss_mask)):
        logits = logits if temperature == 1.0 else logits / temperature  # (r, T_r, V)
        tokens = batch.completion_ids[rows, : logits.shape[1]].to(logits.device)  # (r, T_r)
        if with_entropy and not entropy_grad:
            logp, entropy = losses.selective_log_probs(logits, tokens, with_entropy=True)
        else:
            logp = losses.selective_log_probs(logits, tokens)  # (r, T_r)
            entropy = diagnostics.token_entropy(logits) if with_entropy else None
        logps.append(_pad(logp, t))
        entropies.append(None if entropy is None else _pad(entropy, t))
        order.append(rows)
    back = torch.cat(order).argsort().to(logps[0].device)  # (n,) each row's place in the parts' order
    logp = torch.cat(logps)[back]  # (n, T)
    return logp, (torch.cat(entropies)[back] if with_entropy else None)


@torch.no_grad()
def logps_in_chunks(model, batch: TrainBatch, size: int, temperature: float) -> torch.Tensor:
    """Log-probs of the completion tokens under `model`, without a graph, `size` rows at a time (the memory of
    one micro-batch): the sampling policy's, the reference's, or the policy's after an update.  -> (n, T) on
    the CPU, float32, 0 past each chunk's width"""
    out = torch.zeros(len(batch), batch.completion_ids.shape[1])  # (n, T)
    for rows in torch.arange(len(batch)).split(size):
        logp, _ = completion_logps(model, batch.rows(rows), temperature, with_entropy=False)
        out[rows, : logp.shape[1]] = logp.float().cpu()
    return out


def _pad(x: torch.Tensor, t: int) -> torch.Tensor:
    """(r, T_r) -> (r, T), zeros on the right."""
    return torch.nn.functional.pad(x, (0, t - x.shape[1]))
