"""The records a generation batch passes from one phase of a step to the next, and how its rows are planned.

`Generation`: the scored batch with its advantages, the plan of rows per optimizer step it feeds, and what was
measured when it was drawn (`GenerationFigures`, logged on every step it feeds; `LoggedFigures` once resumed).
`Drawn`: what only the step that drew it reads (the monitor's groups, its time, the completions to log).
`UpdateFigures`: one optimizer step's figures, added up over its micro-batches, typed so that the monitor reads
`figures.entropy`, not a metric looked up by name. They carry data; step_metrics.py makes the step's metrics
of them, after the step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .policy import TrainBatch


@dataclass
class GenerationFigures:
    """What a generation batch measured when it was drawn, scored and given advantages."""

    rewards: dict[str, float]  # Drawer.reward_metrics(): over every sample drawn
    sampler: dict[str, float]  # Selection.metrics: sampler/*
    reward_mean: float  # reward/mean: of the completions that reach the loss
    reward_std: float  # reward/std
    mean_length: float  # completion/mean_length
    truncated_frac: float  # completion/truncated_frac
    prompts_cut_frac: float  # prompt/truncated_frac
    gen_tokens_per_s: float  # perf/gen_tokens_per_s
    advantages: dict[str, float]  # AdvantageOutput.metrics: the estimator's own (avspo/*)
    kl_penalty: float | None = None  # kl/reward_penalty, with kl_in_reward

    @classmethod
    def measure(cls, drawer: Any, selection: Any, rollout: Any, estimate: Any, kl_penalty: float | None,
                generation_seconds: float) -> "GenerationFigures":
        """The figures of the kept completions (`selection`, `rollout`) and of every draw (`drawer`)."""
        rewards, lengths = selection.rewards, rollout.lengths.float()  # (B', G), (N,)
        return cls(
            rewards=drawer.reward_metrics(),
            sampler=selection.metrics,
            reward_mean=rewards.mean().item(),
            reward_std=rewards.std().item() if rewards.numel() > 1 else 0.0,
            mean_length=lengths.mean().item(),
            truncated_frac=rollout.truncated.float().mean().item(),
            prompts_cut_frac=drawer.prompts_cut / max(drawer.prompts_drawn, 1),
            gen_tokens_per_s=selection.tokens_generated / max(generation_seconds, 1e-9),
            advantages=estimate.metrics,
            kl_penalty=kl_penalty,
        )

    def metrics(self) -> dict[str, float]:
        penalty = {} if self.kl_penalty is None else {"kl/reward_penalty": self.kl_penalty}
        return {
            **self.rewards,
            **self.sampler,
            "reward/mean": self.reward_mean,
            "reward/std": self.reward_std,
            "completion/mean_length": self.mean_length,
            "completion/truncated_frac": self.truncated_frac,
            "prompt/truncated_frac": self.prompts_cut_frac,
            "perf/gen_tokens_per_s": self.gen_tokens_per_s,
            **self.advantages,
            **penalty,
        }


@dataclass
class Drawn:
    """What only the step that drew a generation reads; a checkpoint, always written after that step, keeps none."""

    as_drawn: torch.Tensor  # (B0, G) the groups as first drawn: the ACR family reads these
    advantages: torch.Tensor  # (B', G) what reaches the loss: acr_post reads these
    seconds: float  # sampling, scoring and estimating: charged to the first optimizer step it feeds
    # completions drawn for it, kept or not (Selection.samples_generated): max_samples counts them when it is
    # drawn, so a checkpoint, whose count has them already, does not keep it
    samples_generated: int
    completions: list[dict] = field(default_factory=list)  # rows for completions.jsonl (log_completions)


@dataclass
class LoggedFigures:
    """A resumed generation's figures: the metrics its steps logged, as a checkpoint keeps them."""

    line: dict[str, float]

    def metrics(self) -> dict[str, float]:
        return dict(self.line)


@dataclass
class Generation:
    """One generation batch, scored, with its advantages, and the optimizer steps it feeds."""

    batch: TrainBatch  # N rows, advantages included
    plan: list[torch.Tensor]  # the rows of each optimizer step it feeds, in order (`plan` below)
    figures: GenerationFigures | LoggedFigures  # measured when it was drawn: logged on every step it feeds
    logged: dict[str, float] = field(default_factory=dict)  # what the reward functions gave log_metric
    taken: int = 0  # optimizer steps fed so far
    drawn: Drawn | None = None  # for its first step (None once resumed: that step came before the checkpoint)

    @property
    def fresh(self) -> bool:
        """No optimizer step has used it yet: the next one pays for generating it and diagnoses it."""
        return self.taken == 0

    @property
    def done(self) -> bool:
        return self.taken == len(self.plan)

    def next_batch(self) -> TrainBatch:
        self.taken += 1
        return self.batch.rows(self.plan[self.taken - 1])

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to feed its remaining steps after a resume (tensors and numbers only)."""
        return {"batch": vars(self.batch).copy(), "metrics": self.figures.metrics(), "plan": self.plan,
                "taken": self.taken, "logged": dict(self.logged)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Generation":
        # a resumed generation was diagnosed before the checkpoint (taken >= 1): its Drawn is not kept
        return cls(TrainBatch(**state["batch"]), list(state["plan"]), LoggedFigures(state["metrics"]),
                   dict(state.get("logged", {})), int(state["taken"]))


def plan(n: int, iterations: int, size: int) -> list[torch.Tensor]:
    """The rows of each optimizer step a generation of `n` rows feeds: `iterations` passes over the batch,
    `size` rows per optimizer step."""
    return [rows for _ in range(iterations) for rows in optimizer_batches(n, size)]


@dataclass
class UpdateFigures:
    """What one optimizer step measured over its micro-batches.

    The loss terms are normalised by the whole optimizer batch, so the micro-batches' values add up; every
    other figure is a mean over a micro-batch's real tokens, weighted by its share of the batch's tokens, so
    that the sum is the mean over every token of the batch (`add`).
    """

    policy_loss: float = 0.0  # loss/policy
    kl_loss: float | None = None  # loss/kl, with the decoupled KL term
    entropy: float | None = None  # entropy/mean, when measured
    kl: float | None = None  # kl/mean, with a reference policy
    loss_figures: dict[str, float] = field(default_factory=dict)  # the policy loss's own (clip/*, gspo/*)

    def add(self, micro: "UpdateFigures", share: float) -> None:
        self.policy_loss += micro.policy_loss
        if micro.kl_loss is not None:
            self.kl_loss = (self.kl_loss or 0.0) + micro.kl_loss
        if micro.entropy is not None:
            self.entropy = (self.entropy or 0.0) + share * micro.entropy
        if micro.kl is not None:
            self.kl = (self.kl or 0.0) + share * micro.kl
        for name, value in micro.loss_figures.items():
            if name.endswith(("/min", "/max")):  # extremes over the micro-batches, not a mean
                pick = min if name.endswith("/min") else max
                self.loss_figures[name] = pick(self.loss_figures.get(name, value), value)
            else:
                self.loss_figures[name] = self.loss_figures.get(name, 0.0) + share * value

    def metrics(self) -> dict[str, float]:
        named = {"loss/kl": self.kl_loss, "entropy/mean": self.entropy, "kl/mean": self.kl}
        return {"loss/policy": self.policy_loss, **self.loss_figures,
                **{name: value for name, value in named.items() if value is not None}}


def token_share(micro: TrainBatch, counts: dict[str, Any]) -> float:
    """A micro-batch's share of its optimizer batch's loss tokens (`counts["num_tokens"]`): the weight of its
    figures in the step's. (Micro-batches are grouped by length, so weighting them by rows would over-count
    short ones; one whose tokens are all masked adds nothing.)"""
    total = float(counts["num_tokens"])
    return float(micro.loss_mask.sum()) / total if total else 0.0


def optimizer_batches(n: int, size: int) -> list[torch.Tensor]:
    return list(torch.arange(n).split(size))


def length_buckets(batch: TrainBatch, size: int, group: int) -> list[torch.Tensor]:
    """Micro-batches of `size` rows that hold completions of similar length, so that little padding is
    computed: groups ordered by their longest completion, rows within a group by length. Groups stay
    together (when size >= group), so that a micro-batch can share each prompt's forward pass.
    The loss is a sum over rows normalised by whole-batch counts: the order changes only rounding."""
    lengths = batch.loss_mask.sum(dim=1)  # (n,)
    n = len(batch)
    if n % group:
        return optimizer_batches(n, size)
    by_group = lengths.view(-1, group)  # (n / group, group)
    within = by_group.argsort(dim=1, stable=True)  # (n / group, group)
    groups = by_group.amax(dim=1).argsort(stable=True)  # (n / group,)
    order = (groups.unsqueeze(1) * group + within[groups]).reshape(-1)  # (n,)
    return list(order.split(size))
