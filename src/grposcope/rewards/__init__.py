"""Reward functions in TRL's convention, their registry, and the scorer the trainer calls.

    f(prompts=..., completions=..., **columns, trainer_state=..., log_extra=..., log_metric=...)
        -> list[float | None]

called by keyword only, as TRL 1.16 calls them (see `grposcope.rewards.calling`).

Built-ins: `accuracy_reward` (answer extraction, no dependency), `box_accuracy_reward` (strict `\\boxed{}`
checked with math-verify, time-bounded per sample), `format_reward`. Extraction helpers live in
`grposcope.rewards.extract`.
"""

from __future__ import annotations

from grposcope.rewards.builtin import (
    REWARDS,
    accuracy_reward,
    box_accuracy_reward,
    format_reward,
    get_reward,
    make_box_accuracy_reward,
    make_soft_overlong_penalty,
)
from grposcope.rewards.scorer import RewardFunctionError, RewardScorer, ScoreResult

__all__ = [
    "REWARDS",
    "RewardFunctionError",
    "RewardScorer",
    "ScoreResult",
    "accuracy_reward",
    "box_accuracy_reward",
    "format_reward",
    "get_reward",
    "make_box_accuracy_reward",
    "make_soft_overlong_penalty",
]
