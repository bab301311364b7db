"""The trainer's side of a sampler: `draw` generates and scores, `gather` assembles what the sampler kept.

The sampler (grposcope.sampling) decides who gets how many completions; it calls `Drawer.draw` as often as it
needs and answers with a `Selection`. This module turns that selection back into one batch of completions, in
group order, merges the reward metrics of every draw of the step, and keeps what the reward functions logged
(TRL's `log_metric` and `log_extra`) for the step's metrics and its sample of completions, with each sample's
reference answer, so that completions.jsonl can be re-scored later (`grposcope audit-rewards`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..rewards.builtin import reference_answer
from ..rewards.inputs import reward_inputs
from ..rewards.scorer import reward_metrics
from ..rollout import SamplingParams
from ..rollout.base import Rollout, concat
from ..sampling import ScoredDraw, Selection
from .phases import PhaseTimer


@dataclass(frozen=True)
class TrainerState:
    """What reward functions get as `trainer_state` (the fields of TRL's, a transformers TrainerState, that
    reward shaping reads): optimizer steps done, steps planned, and epochs of the training prompts done."""

    global_step: int
    max_steps: int
    epoch: float


class Drawer:
    """One step's draws: `draw(examples, n)` for the sampler; then `gather(selection)`, `reward_metrics()`,
    `logged_metrics()` and `sample_rows(selection, advantages, limit)`."""

    def __init__(self, backend: Any, scorer: Any, params: SamplingParams, pad_id: int, timer: PhaseTimer,
                 state: TrainerState | None = None) -> None:
        self.backend, self.scorer, self.params, self.pad_id, self.timer = backend, scorer, params, pad_id, timer
        self.state = state
        self.scores: list[Any] = []  # the ScoreResult of every draw, for the reward metrics
        self.prompts_drawn = self.prompts_cut = 0  # prompts generated for, and those cut to max_prompt_length
        self.inputs: list[tuple[list, list]] = []  # (prompts, completions) of every draw, as the rewards saw them
        self.answers: list[list | None] = []  # each draw's reference answers (None: no answer/solution column)

    def draw(self, examples: list[dict], n: int) -> ScoredDraw:
        """n completions of each example, generated and scored.  -> rewards, lengths (B, n)"""
        cut_before = getattr(self.backend, "prompts_cut", 0)
        with self.timer("generation"):
            rollout = self.backend.generate([e["prompt_text"] for e in examples], n, self.params)  # B*n rows
        self.prompts_drawn += len(examples)
        self.prompts_cut += getattr(self.backend, "prompts_cut", 0) - cut_before
        with self.timer("scoring"):
            prompts, completions, columns = reward_inputs(examples, rollout.texts, n, rollout.completion_ids,
                                                          rollout.completion_mask)
            scored = self.scorer.score(prompts, completions, columns, trainer_state=self.state)
        self.scores.append(scored)
        self.inputs.append((prompts, completions))
        self.answers.append(_references(columns))
        return ScoredDraw(scored.rewards.view(-1, n), rollout.lengths.view(-1, n).float(), rollout)

    def gather(self, selection: Selection) -> Rollout:
        """The kept samples as one rollout, group after group: row b*G + j is `selection.samples[b, j]`."""
        every = concat([d.rows for d in selection.draws], self.pad_id)  # the step's samples, numbered in order
        return every.select(selection.samples.reshape(-1))

    def reward_metrics(self) -> dict[str, float]:
        """`reward/<func>/mean` and `reward/none_frac` over every sample drawn this step, `reward/errors` summed."""
        if len(self.scores) == 1:
            return dict(self.scores[0].metrics)
        per_function = torch.cat([s.per_function for s in self.scores]).double()  # (N_drawn, F)
        errors = float(sum(s.errors for s in self.scores))
        return reward_metrics(per_function, self.scorer.names, errors)

    def logged_metrics(self) -> dict[str, float]:
        """What the reward functions gave `log_metric` this step: the mean of each name's values (TRL's rule)."""
        values: dict[str, list[float]] = {}
        for scored in self.scores:
            for name, logged in scored.logged_metrics.items():
                values.setdefault(name, []).extend(logged)
        return {name: math.fsum(v) / len(v) for name, v in values.items()}

    def sample_rows(self, selection: Selection, advantages: torch.Tensor, limit: int | None) -> list[dict]:
        """The first `limit` kept samples (None: all), group after group, as rows of completions.jsonl: prompt,
        completion, each function's reward, the combined reward, the advantage, the reference `answer` when the
        examples carry an `answer` or `solution` column, and the `log_extra` columns.

        advantages (B', G), aligned with selection.samples.
        """
        numbers = selection.samples.reshape(-1)[:limit].tolist()  # step-wide sample numbers, kept order
        prompts = [prompt for drawn, _ in self.inputs for prompt in drawn]  # (N_drawn,)
        completions = [completion for _, drawn in self.inputs for completion in drawn]  # (N_drawn,)
        per_function = torch.cat([s.per_function for s in self.scores])  # (N_drawn, F)
        rewards = torch.cat([s.rewards for s in self.scores])  # (N_drawn,)
        extra = self._extra_columns()
        answers = self._answer_column()
        if answers is not None:
            if "answer" in extra:
                raise ValueError(
                    "a reward function logged a log_extra column 'answer', the name completions.jsonl gives each "
                    "completion's reference answer (the dataset's answer or solution column); rename the "
                    "log_extra column, e.g. to 'predicted_answer'")
            extra = {"answer": answers, **extra}
        rows = []
        for number, advantage in zip(numbers, advantages.reshape(-1).tolist()):
            rows.append({
                "prompt": prompts[number], "completion": completions[number],
                "rewards": dict(zip(self.scorer.names, per_function[number].tolist())),
                "reward": rewards[number].item(), "advantage": advantage,
                **{column: values[number] for column, values in extra.items()},
            })
        return rows

    def _answer_column(self) -> list | None:
        """Every sample's reference answer, over the step's draws (None where a draw had none); None when no
        draw carried an answer or solution column."""
        if all(answers is None for answers in self.answers):
            return None
        return [a for answers, s in zip(self.answers, self.scores) for a in (answers or [None] * len(s.rewards))]

    def _extra_columns(self) -> dict[str, list]:
        """`log_extra` columns over every sample drawn this step; None where a draw did not log the column."""
        names = list(dict.fromkeys(c for s in self.scores for c in s.extra_columns))
        return {name: [v for s in self.scores for v in s.extra_columns.get(name, [None] * len(s.rewards))]
                for name in names}


def _references(columns: dict[str, list]) -> list[str | None] | None:
    """Each sample's reference answer as accuracy_reward reads it (the `answer` column, else the last box of
    `solution`; None when neither holds one), or None when the draw has neither column."""
    if "answer" not in columns and "solution" not in columns:
        return None
    n = len(columns["completion_ids"])
    answers, solutions = columns.get("answer", [None] * n), columns.get("solution", [None] * n)
    return [reference_answer(answer, solution) for answer, solution in zip(answers, solutions)]
