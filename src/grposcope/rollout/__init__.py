"""Generation backends: prompts in, completions (token ids, masks, truncation flags, texts) out.

    backend = ROLLOUTS.make("transformers", model=model, tokenizer=tokenizer, max_completion_length=64)
    out = backend.generate(prompt_texts, num_generations=8)   # completions of prompt j are rows j*G .. j*G+G-1
"""

from __future__ import annotations

from .base import Rollout, RolloutBackend, SamplingParams
from .registry import ROLLOUTS

__all__ = ["ROLLOUTS", "Rollout", "RolloutBackend", "SamplingParams"]
