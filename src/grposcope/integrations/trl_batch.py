"""Assembling TRL's training batch from several generation rounds (dynamic sampling's refills, Reinforce-Ada's
rounds, the budgeted sampler's rounds).

TRL's `_generate_and_score_completions` returns this process's rows of one round: padded tensors whose first
dimension is the process's L_r rows. A sampler keeps groups from several rounds, and a group kept on one
process may be needed on another, so every round is gathered whole (N_r = num_processes * L_r rows: the
sampler's real rows first, then the round's padding rows), the kept rows are picked from the gathered rounds
in the sampler's order, and each process takes its slice again. Every process holds the same gathered rows and
the same selection, so all agree without more traffic.

Notation: L_r rows per process in round r, N_r = num_processes * L_r, R rounds, T tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..errors import RunError

LEFT_PADDED = ("prompt_ids", "prompt_mask")  # TRL pads prompts on the left, completions on the right
# what a text batch holds; anything else (images, tiles, token types) would need its own rules to merge
MERGEABLE = (
    "prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages", "old_per_token_logps",
    "ref_per_token_logps", "sampling_per_token_logps", "importance_sampling_ratio", "tool_mask",
)


@dataclass
class Round:
    """One generation round: TRL's output for this process, its reward metrics, and its row counts."""

    output: dict[str, Any]
    metrics: dict[str, float]
    real: int  # rows the sampler asked for (its samples), first in the gathered round
    rows: int  # N_r: every process's rows, padding included


def row_numbers(rounds: list[Round]) -> torch.Tensor:
    """The sampler numbers its samples across rounds (round r's real row i is sample offset(r) + i); the
    concatenated gathered rounds also hold each round's padding rows. -> (samples,) the row of each sample."""
    parts, start = [], 0
    for r in rounds:
        parts.append(start + torch.arange(r.real))
        start += r.rows
    return torch.cat(parts)


def pad_values(pad_token_id: int) -> dict[str, float]:
    """The fill of each key's padding, as TRL pads it; the logps and ratios are masked wherever padded."""
    return {"prompt_ids": pad_token_id, "completion_ids": pad_token_id, "tool_mask": 1}


def check_mergeable(output: dict[str, Any]) -> None:
    extra = sorted(set(output) - set(MERGEABLE) - {"num_items_in_batch"})
    if extra:
        raise RunError(
            f"a sampler that draws several rounds in TRL merges text batches, and this one also holds "
            f"{', '.join(extra)} (images or tool outputs): train it with sampler='fixed', or in grposcope's own "
            "trainer"
        )


def pad_to(tensor: torch.Tensor, width: int, value: float, left: bool) -> torch.Tensor:
    """(rows, T) -> (rows, width), filled with `value` on the left or the right."""
    missing = width - tensor.shape[1]
    if missing <= 0:
        return tensor
    fill = tensor.new_full((tensor.shape[0], missing), value)
    return torch.cat([fill, tensor] if left else [tensor, fill], dim=1)


def gather_round(accelerator: Any, output: dict[str, Any], pads: dict[str, float]) -> dict[str, torch.Tensor]:
    """One round's rows of every process, in process order.  (L, T_p) per process -> (N, max_p T_p)."""
    check_mergeable(output)
    whole = {}
    for key in MERGEABLE:
        tensor = output.get(key)
        if tensor is None:
            continue
        if tensor.dim() >= 2:
            tensor = accelerator.pad_across_processes(tensor, dim=1, pad_index=pads.get(key, 0),
                                                      pad_first=key in LEFT_PADDED)
        whole[key] = accelerator.gather(tensor.contiguous())
    return whole


def concat_rounds(rounds: list[dict[str, torch.Tensor]], pads: dict[str, float]) -> dict[str, torch.Tensor]:
    """R gathered rounds -> one batch of R * N rows, each key padded to its widest round."""
    out = {}
    for key in rounds[0]:
        parts = [r[key] for r in rounds]
        if parts[0].dim() >= 2:
            width = max(p.shape[1] for p in parts)
            parts = [pad_to(p, width, pads.get(key, 0), key in LEFT_PADDED) for p in parts]
        out[key] = torch.cat(parts)
    return out


def trim(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drops the columns that are padding in every row (prompts: on the left, completions: on the right), so
    that a batch picked from longer rounds costs no more than its own longest row."""
    out = dict(batch)
    first = int(batch["prompt_mask"].any(dim=0).int().argmax())  # first column some prompt uses
    for key in LEFT_PADDED:
        out[key] = batch[key][:, first:]
    used = batch["completion_mask"].any(dim=0)  # (T,)
    width = int(used.nonzero().max()) + 1 if used.any() else 1
    for key, tensor in batch.items():
        if key not in LEFT_PADDED and tensor.dim() >= 2 and tensor.shape[1] == used.shape[0]:
            out[key] = tensor[:, :width]
    return out


def pick_rows(batch: dict[str, torch.Tensor], kept: torch.Tensor, advantages: torch.Tensor, groups: int,
              g: int) -> dict[str, torch.Tensor]:
    """The training batch of `groups` groups from the concatenated rounds.

    kept (B', G) the kept samples' rows in the concatenated rounds (`row_numbers`); advantages (B', G). A
    shortfall (B' < groups) is filled with rows whose completion mask is zero and whose advantage is zero:
    they take no part in the loss, so the step trains on the B' groups kept, as grposcope's own trainer does,
    while every process keeps the row count TRL expects.
    """
    missing = groups - kept.shape[0]
    filler = torch.arange(missing * g)  # (missing * G,) any rows will do: they are masked out
    rows = torch.cat([kept.reshape(-1), filler]).to(batch["completion_ids"].device)  # (groups * G,)
    out = {key: tensor[rows] for key, tensor in batch.items()}
    adv = torch.cat([advantages.reshape(-1).float(), torch.zeros(missing * g)])  # (groups * G,)
    out["advantages"] = adv.to(out["completion_ids"].device)
    if missing:
        out["completion_mask"] = out["completion_mask"].clone()
        out["completion_mask"][kept.numel():] = 0
    return out


def local_slice(batch: dict[str, torch.Tensor], process: int, rows: int) -> dict[str, torch.Tensor]:
    """This process's `rows` rows of a global batch (TRL's `process_slice`)."""
    part = slice(process * rows, (process + 1) * rows)
    return {key: tensor[part] for key, tensor in batch.items()}


def items_in_batch(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """TRL's `num_items_in_batch`: the loss tokens of the whole (global) batch."""
    mask = batch["completion_mask"]
    if "tool_mask" in batch:
        mask = mask * batch["tool_mask"]
    return mask.sum()
