"""What the reward functions are given: one rule for training and evaluation."""

from __future__ import annotations

from typing import Any, Sequence

import torch


def reward_inputs(
    examples: Sequence[dict[str, Any]],
    texts: list[str],
    g: int,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
):
    """The reward functions' view of B examples with g completions each, in TRL's convention:
    `(prompts, completions, columns)`, the prompt repeated per completion, chat data given message
    completions, every other column (not `prompt_text`) as a list of B*g entries, plus `completion_ids`.

    `RewardScorer.score` passes all of it by keyword only, as TRL 1.16 does: `f(prompts=...,
    completions=..., **columns, trainer_state=..., log_extra=..., log_metric=...)`, so `completion_ids`
    reaches a function like any column. A dataset column named like one of the scorer's own keywords
    (`grposcope.rewards.calling.RESERVED`) is refused there.

    texts: (B*g,) decoded completions, group j at rows j*g .. j*g+g-1; completion_ids: (B*g, T),
    right-padded; completion_mask: (B*g, T), 1 on the generated tokens: each completion's ids are its
    generated tokens only, as TRL gives them (a length-based reward such as TRL's soft overlong punishment
    needs that).
    """
    prompts, completions, columns = [], [], {}  # type: list[Any], list[Any], dict[str, list[Any]]
    for example, start in zip(examples, range(0, len(texts), g)):
        for text in texts[start : start + g]:
            prompts.append(example["prompt"])
            chat = isinstance(example["prompt"], list)
            completions.append([{"role": "assistant", "content": text}] if chat else text)
            for key, value in example.items():
                if key not in ("prompt", "prompt_text"):
                    columns.setdefault(key, []).append(value)
    rows = zip(completion_ids, completion_mask)
    columns["completion_ids"] = [row[keep.bool()].tolist() for row, keep in rows]  # (B*g,) lists
    return prompts, completions, columns
