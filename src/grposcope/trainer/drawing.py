"""The trainer's side of a sampler: `draw` generates and scores, `gather` assembles what the sampler kept.

The sampler (grposcope.sampling) decides who gets how many completions; it calls `Drawing.draw` as often as it
needs and answers with a `Selection`. This module turns that selection back into one batch of completions, in
group order, and merges the reward metrics of every draw of the step.
"""

from __future__ import annotations

from typing import Any

import torch

from ..rewards.inputs import reward_inputs
from ..rewards.scorer import reward_metrics
from ..rollout import SamplingParams
from ..rollout.base import Rollout, concat
from ..sampling import Drawn, Selection
from .phases import PhaseTimer


class Drawing:
    """One step's draws: `draw(examples, n)` for the sampler; then `gather(selection)` and `reward_metrics()`."""

    def __init__(self, rollout: Any, scorer: Any, params: SamplingParams, pad_id: int, timer: PhaseTimer) -> None:
        self.rollout, self.scorer, self.params, self.pad_id, self.timer = rollout, scorer, params, pad_id, timer
        self.scores: list[Any] = []  # the ScoreResult of every draw, for the reward metrics

    def draw(self, examples: list[dict], n: int) -> Drawn:
        """n completions of each example, generated and scored.  -> rewards, lengths (B, n)"""
        with self.timer("generation"):
            rollout = self.rollout.generate([e["prompt_text"] for e in examples], n, self.params)  # B*n rows
        with self.timer("scoring"):
            scored = self.scorer.score(*reward_inputs(examples, rollout.texts, n, rollout.completion_ids))
        self.scores.append(scored)
        return Drawn(scored.rewards.view(-1, n), rollout.lengths.view(-1, n).float(), rollout)

    def gather(self, selection: Selection) -> Rollout:
        """The kept samples as one rollout, group after group: row b*G + j is `selection.samples[b, j]`."""
        every = concat([d.rows for d in selection.draws], self.pad_id)  # the step's samples, numbered in order
        return every.select(selection.samples.reshape(-1))

    def reward_metrics(self) -> dict[str, float]:
        """`reward/<func>/mean` and `reward/none_frac` over every sample drawn this step, `reward/errors` summed."""
        if len(self.scores) == 1:
            return dict(self.scores[0].metrics)
        per_function = torch.cat([s.per_function for s in self.scores]).double()  # (N_drawn, F)
        errors = float(sum(s.metrics["reward/errors"] for s in self.scores))
        return reward_metrics(per_function, self.scorer.names, errors)
