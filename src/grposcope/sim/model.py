"""The simulated world: prompts, the policy's success probabilities, the draw, and the REINFORCE gradient.

Notation: N training prompts, H held-out prompts, k features, B' prompts that train in a step, G samples per
group. The policy is a shared linear logit model,
    p_i = sigmoid(z_i + w . x_i),
with a fixed base logit z_i (the prompt's difficulty for the initial policy) and a fixed feature vector x_i;
`w` (k,) is all that learns. See docs/simulator.md for what this models and what it does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..sampling import ScoredDraw


@dataclass(frozen=True)
class Population:
    """The prompts of a simulated run: training ones and held-out ones from the same distribution."""

    features: torch.Tensor  # (N, k) x_i of the training prompts
    logits: torch.Tensor  # (N,) z_i
    heldout_features: torch.Tensor  # (H, k)
    heldout_logits: torch.Tensor  # (H,)

    def __post_init__(self) -> None:
        n, k = self.features.shape
        if self.logits.shape != (n,) or self.heldout_features.shape[1:] != (k,) or \
                self.heldout_logits.shape != self.heldout_features.shape[:1]:
            shapes = [tuple(t.shape) for t in (self.features, self.logits, self.heldout_features,
                                               self.heldout_logits)]
            raise ValueError(f"Population shapes disagree: features, logits, heldout_features and "
                             f"heldout_logits are {shapes}; they must be (N, k), (N,), (H, k), (H,)")

    @property
    def size(self) -> int:
        return self.features.shape[0]


def make_population(n: int, heldout: int, k: int, shared_skill: float, mu: float, sigma: float,
                    generator: torch.Generator) -> Population:
    """N + H prompts: x_i = (shared_skill + eps_i) / sqrt(k), eps_i ~ Normal(0, I_k); z_i ~ Normal(mu, sigma).

    The 1/sqrt(k) keeps |w . x| of the order of |w| whatever k is. `shared_skill` > 0 gives every prompt a
    component along one direction (general skill): without it, the prompts' features average to zero and a
    step that helps some prompts hurts as many others.
    """
    total = n + heldout
    x = (shared_skill + torch.randn(total, k, generator=generator)) / math.sqrt(k)  # (N+H, k)
    z = mu + sigma * torch.randn(total, generator=generator)  # (N+H,)
    return Population(x[:n], z[:n], x[n:], z[n:])


def success_prob(logits: torch.Tensor, features: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """p_i = sigmoid(z_i + w . x_i).  logits (M,), features (M, k), w (k,) -> (M,)"""
    return torch.sigmoid(logits + features @ w)


def completion_lengths(correct: torch.Tensor, length_correct: float, length_wrong: float, spread: float,
                       max_length: int, generator: torch.Generator) -> torch.Tensor:
    """Token counts: log-normal around a median that is shorter for correct answers, cut at max_length.

    correct (M, n) bool -> (M, n) float
    """
    median = torch.where(correct, length_correct, length_wrong)  # (M, n)
    noise = torch.randn(correct.shape, generator=generator)  # (M, n)
    return (median * torch.exp(spread * noise)).round().clamp(1, max_length)


class Simulated:
    """`draw(prompts, n)` for the samplers: n Bernoulli(p_i) rewards per prompt, with lengths.

    Built once per step: `p` is the policy of that step (samples are drawn before the update).
    """

    def __init__(self, p: torch.Tensor, generator: torch.Generator, lengths: dict[str, Any]) -> None:
        self.p, self.generator, self.lengths = p, generator, lengths  # p (N,)

    def __call__(self, prompts: list[int], n: int) -> ScoredDraw:
        probs = self.p[torch.tensor(prompts, dtype=torch.long)]  # (M,)
        correct = torch.rand(len(prompts), n, generator=self.generator) < probs.unsqueeze(1)  # (M, n)
        lengths = completion_lengths(correct, generator=self.generator, **self.lengths)
        return ScoredDraw(correct.float(), lengths)


def policy_gradient(features: torch.Tensor, p: torch.Tensor, rewards: torch.Tensor,
                    advantages: torch.Tensor) -> torch.Tensor:
    """The REINFORCE estimate, averaged over the kept samples: mean_ij A_ij * (y_ij - p_i) * x_i.

    For a Bernoulli outcome y with P(y = 1) = p = sigmoid(z + w . x), d log P(y) / d w = (y - p) x.
    features (B', k), p (B',) at sampling time, rewards y (B', G) in {0, 1}, advantages (B', G) -> (k,)
    """
    score = advantages * (rewards - p.unsqueeze(1))  # (B', G)
    return score.sum(dim=1) @ features / rewards.numel()  # (k,)
