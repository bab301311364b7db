"""What the reward functions are given, shared by training and evaluation."""

from __future__ import annotations

import torch


def scoring_inputs(examples: list[dict], texts: list[str], g: int, completion_ids: torch.Tensor):
    """The reward functions' view of a batch, in TRL's convention (chat data gets message completions)."""
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
