"""What the reward functions are given: one rule for training and evaluation."""

from __future__ import annotations

from typing import Any, Sequence

import torch


def reward_inputs(examples: Sequence[dict[str, Any]], texts: list[str], g: int, completion_ids: torch.Tensor):
    """The reward functions' view of B examples with g completions each, in TRL's convention:
    `(prompts, completions, columns)`, the prompt repeated per completion, chat data given message
    completions, every other column (not `prompt_text`) as a keyword list, plus `completion_ids`.

    texts: (B*g,) decoded completions, group j at rows j*g .. j*g+g-1; completion_ids: (B*g, T).
    """
    prompts, completions, columns = [], [], {}
    for example, start in zip(examples, range(0, len(texts), g)):
        for text in texts[start : start + g]:
            prompts.append(example["prompt"])
            chat = isinstance(example["prompt"], list)
            completions.append([{"role": "assistant", "content": text}] if chat else text)
            for key, value in example.items():
                if key not in ("prompt", "prompt_text"):
                    columns.setdefault(key, []).append(value)
    columns["completion_ids"] = [row.tolist() for row in completion_ids]
    return prompts, completions, columns
