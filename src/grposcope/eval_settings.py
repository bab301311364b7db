"""EvalSettings: how `grposcope eval` and the trainer's held-out evaluation measure a model.

Kept apart from evaluation.py, which needs torch, so that the command line shows these defaults without
loading it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# Prompts longer than this many tokens keep their last ones, in training (GRPOConfig) and in `grposcope eval`
MAX_PROMPT_LENGTH = 512
# Seeds go to random, torch and numpy alike: numpy's range, 0 to 2**32 - 1 (torch overflows past 2**64)
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class EvalSettings:
    """How to evaluate. `num_samples` 0 measures greedy pass@1 only (k times cheaper than sampling k)."""

    max_completion_length: int = 256
    num_samples: int = 0  # k sampled completions per prompt for avg@k / pass@k
    temperature: float = 1.0  # sampling only; greedy decoding ignores it
    top_p: float = 1.0
    success_threshold: float = 0.5
    batch_size: int = 16  # prompts per batch; a sampling batch generates batch_size * k sequences at once
    seed: int = 42  # torch is seeded with seed + (index of the batch's first prompt) before sampling

    def __post_init__(self) -> None:
        _check_int("max_completion_length", self.max_completion_length, 1, "tokens to generate")
        _check_int("num_samples", self.num_samples, 0, "sampled completions per prompt; 0 for greedy only")
        _check_int("batch_size", self.batch_size, 1, "prompts generated at once")
        _check_int("seed", self.seed, 0, "seeds the split and the sampling")
        if self.seed > MAX_SEED:
            raise ValueError(f"seed must be in [0, {MAX_SEED}], got {self.seed}")
        for name in ("temperature", "top_p", "success_threshold"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if self.num_samples > 0 and not self.temperature > 0:
            raise ValueError(
                f"temperature must be > 0 when num_samples > 0, got {self.temperature}: sampling at "
                "temperature 0 is greedy decoding, which eval/accuracy already measures; set num_samples 0 "
                "for greedy only, or a temperature such as 1.0"
            )
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}; 1.0 keeps the whole distribution")


def _check_int(name: str, value: Any, low: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an int >= {low} ({what}), got {value!r}")
