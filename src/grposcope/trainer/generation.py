"""What one generation batch carries through the optimizer steps it feeds, and what one step measures.

`Generation`: the scored batch, its advantages, the groups as first drawn (diagnosed on the generation's first
optimizer step) and the plan of rows per step. `UpdateFigures`: one optimizer step's figures, added up over
its micro-batches, typed so that the monitor reads `figures.entropy`, not a metric looked up by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .policy import TrainBatch


@dataclass
class Generation:
    """One generation batch, scored, with its advantages, and the optimizer steps it feeds."""

    batch: TrainBatch
    metrics: dict[str, float]  # step_metrics.GenerationFigures.metrics(): logged on every step it feeds
    seconds: float  # generating and scoring it: charged to the first optimizer step it feeds
    plan: list[torch.Tensor]  # the rows of each optimizer step it feeds, in order
    taken: int = 0  # optimizer steps fed so far
    logged: dict[str, float] = field(default_factory=dict)  # what the reward functions gave log_metric
    sample: list[dict] = field(default_factory=list)  # rows for completions.jsonl, until a logging step takes them
    as_drawn: torch.Tensor | None = None  # (B0, G) the groups as first drawn: the ACR family reads these
    advantages: torch.Tensor | None = None  # (B', G) what reaches the loss: acr_post reads these
    # completions drawn for it, kept or not (Selection.samples_generated): max_samples counts them when it is
    # drawn, so a checkpoint, whose count has them already, does not keep it
    samples_generated: int = 0

    @classmethod
    def planned(cls, batch: TrainBatch, metrics: dict[str, float], seconds: float, iterations: int, size: int,
                **extra: Any) -> "Generation":
        """`iterations` passes over the batch, `size` completions per optimizer step."""
        plan = [rows for _ in range(iterations) for rows in optimizer_batches(len(batch), size)]
        return cls(batch, metrics, seconds, plan, **extra)

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
        return {"batch": vars(self.batch).copy(), "metrics": dict(self.metrics), "plan": self.plan,
                "taken": self.taken, "logged": dict(self.logged)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Generation":
        # a resumed generation was diagnosed before the checkpoint (taken >= 1): what diagnosis needs, and the
        # sample of completions, are not kept
        return cls(TrainBatch(**state["batch"]), state["metrics"], 0.0, list(state["plan"]), int(state["taken"]),
                   dict(state.get("logged", {})))


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
