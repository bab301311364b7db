"""Advantage estimators: one registry, one call signature.

    est = advantages.make("grpo", scale_rewards="group")
    out = est(rewards)            # rewards (B, G) -> out.advantages (B, G), out.metrics dict[str, float]
    out = est(rewards, pool=...)  # only `pool` reads it: every reward drawn per prompt this step
    out = est(rewards, as_drawn=...)  # only `avspo` reads it: the groups as first drawn (B0, G), before a
                                      # sampler dropped or balanced any; its collapse signal is their ACR

Every estimator is called once per generation batch, which feeds one or more optimizer steps
(steps_per_generation, num_iterations); AVSPO carries state across generations. Each exposes
`state_dict()` / `load_state_dict()` so that the trainer checkpoints all of them the same way.
Formulas, papers and deviations: docs/algorithms.md.

Notation: B prompts, G completions per prompt, P rewards in a prompt's pool (P >= G).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Sequence

import torch

from ._tensors import check_rewards, group_mean, group_std
from .diagnostics import collapse_metrics, collapsed_groups
from .ranges import at_least
from .registry import HOSTS, Registry
from .virtual_samples import (
    STRATEGIES,
    advantages_with_virtual,
    all_wrong_share,
    bound_all_wrong_share,
    num_virtual_samples,
    virtual_rewards,
)

SCALES = ("group", "batch", "none")
DEFAULT_EPS = 1e-4  # added to the std, as TRL does, so that numbers line up with it



@dataclass(frozen=True)
class PoolStats:
    """What each prompt's pool contributes, when the pools themselves are not at hand (see `pool_stats`):
    enough for its mean and for either std, so that a sampler's pools serve any `unbiased` setting."""

    mean: torch.Tensor  # (B,) float64
    square: torch.Tensor  # (B,) float64: sum of squared deviations from the mean
    count: torch.Tensor  # (B,) float64: rewards in the pool, >= 1

    def std(self, unbiased: bool = True) -> torch.Tensor:
        """(B,), 0 for a pool of one reward."""
        dof = (self.count - 1).clamp(min=1) if unbiased else self.count
        return torch.where(self.count > 1, (self.square / dof).sqrt(), torch.zeros_like(self.mean))

    def __len__(self) -> int:
        return self.mean.shape[0]


Pool = Sequence[torch.Tensor] | torch.Tensor | PoolStats | None


def pool_stats(values: torch.Tensor, valid: torch.Tensor) -> PoolStats:
    """The statistics of pools of different sizes, padded into one matrix.

    values (B, P) rewards, valid (B, P) bool marks the real ones (at least one per row) -> PoolStats of (B,)
    Accumulated in float64, as the group statistics are: a float32 mean of 32 copies of 0.7 is off by 6e-8,
    which `pool_std` would blow up to |A| = 6e-4 on a pool whose rewards are all equal.
    """
    if not valid.any(dim=1).all():
        raise ValueError("every pool needs at least one reward")
    real = check_rewards(torch.where(valid, values, torch.zeros_like(values)), name="pool rewards")  # (B, P)
    x = real.double()  # (B, P), 0 on padding
    n = valid.sum(dim=1).double()  # (B,)
    mean = x.sum(dim=1) / n  # (B,)
    square = torch.where(valid, (x - mean.unsqueeze(1)) ** 2, torch.zeros_like(x)).sum(dim=1)  # (B,)
    return PoolStats(mean, square, n)


@dataclass
class AdvantageOutput:
    advantages: torch.Tensor  # (B, G), one value per real completion
    metrics: dict[str, float] = field(default_factory=dict)


class AdvantageEstimator:
    """Base class: stateless unless a subclass says otherwise."""

    def __call__(self, rewards: torch.Tensor, pool: Pool = None, as_drawn: torch.Tensor | None = None
                 ) -> AdvantageOutput:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


ESTIMATORS: Registry[AdvantageEstimator] = Registry("advantage estimator", plugins=True, base=AdvantageEstimator)
register = ESTIMATORS.register
# Where each estimator runs: every one in TRL (the subclass hands it the gathered (B, G) rewards); verl takes
# those registered as its advantage estimators (integrations/verl.py)
IN_TRL = ("grposcope", "trl")


def make(name: str, **params: Any) -> AdvantageEstimator:
    """Builds the estimator registered as `name`; unknown names fail with the list of known ones."""
    return ESTIMATORS.make(name, **params)


def available() -> list[str]:
    return ESTIMATORS.names()


# ---------------------------------------------------------------------------------------------------------
# Pure functions


def grpo_advantages(
    rewards: torch.Tensor, scale: str = "group", unbiased: bool = True, eps: float = DEFAULT_EPS
) -> torch.Tensor:
    """GRPO (DeepSeekMath, arXiv 2402.03300): A_ij = (r_ij - mean_j) / (std + eps).  (B, G) -> (B, G).

    scale="group": std of the group; "batch": std of all B*G rewards (mean still per group);
    "none": no division (Dr. GRPO, arXiv 2503.20783).
    """
    rewards = check_rewards(rewards)
    centered = rewards - group_mean(rewards)  # (B, G)
    if scale == "none":
        return centered
    if unbiased and ((scale == "group" and rewards.shape[1] < 2) or rewards.numel() < 2):
        raise ValueError("an unbiased std needs at least 2 rewards per group: set num_generations >= 2")
    if scale == "group":
        std = group_std(rewards, unbiased).unsqueeze(1)  # (B, 1)
    elif scale == "batch":
        std = group_std(rewards.reshape(-1), unbiased)  # scalar
    else:
        raise ValueError(f"unknown scale {scale!r}; known: {', '.join(SCALES)}")
    return centered / (std + eps)


def rloo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """RLOO: A_ij = r_ij - mean of the other G-1 rewards = G / (G - 1) * (r_ij - mean_j).  (B, G) -> (B, G)."""
    rewards = check_rewards(rewards)
    g = rewards.shape[1]
    if g < 2:
        raise ValueError("rloo needs at least 2 completions per prompt: set num_generations >= 2")
    return g / (g - 1) * (rewards - group_mean(rewards))


def pool_advantages(
    rewards: torch.Tensor, pool: Pool, use_std: bool = False, unbiased: bool = True, eps: float = DEFAULT_EPS
) -> torch.Tensor:
    """Reinforce-Ada's baseline (arXiv 2510.04996): A_ij = r_ij - mean(pool_j) [/ (std(pool_j) + eps)].

    rewards (B, G) the kept samples; pool: B tensors (P_j,) of every reward drawn for prompt j this step, or a
    (B, P) tensor, or their `PoolStats`, or None (the pool is the group itself). A pool of one reward has std 0.
    """
    rewards = check_rewards(rewards)
    if pool is None:
        pool = rewards
    if len(pool) != rewards.shape[0]:
        raise ValueError(f"pool has {len(pool)} prompts but rewards has {rewards.shape[0]}")
    if not isinstance(pool, PoolStats):
        pools = [torch.as_tensor(p, dtype=rewards.dtype).reshape(-1) for p in pool]  # B tensors (P_j,)
        values = torch.nn.utils.rnn.pad_sequence(pools, batch_first=True)  # (B, P_max)
        valid = torch.arange(values.shape[1]).unsqueeze(0) < torch.tensor([len(p) for p in pools]).unsqueeze(1)
        pool = pool_stats(values, valid)
    centered = rewards - pool.mean.to(rewards).unsqueeze(1)  # (B, G)
    if not use_std:
        return centered
    return centered / (pool.std(unbiased).to(rewards).unsqueeze(1) + eps)


# ---------------------------------------------------------------------------------------------------------
# Registered estimators. Each one's options are its keyword arguments, documented in its docstring's Args:
# (core/registry.py); grpo documents the std options that pool and avspo share with it

@register("grpo", hosts=HOSTS)
class GRPO(AdvantageEstimator):
    """Group-normalised advantages; `scale_rewards` in {"group", "batch", "none"} (TRL's True / False: group /
    none).

    Args:
        scale_rewards: grpo's std: "group", "batch" or "none" (TRL; True = "group", False = "none").
        advantage_std_unbiased: The std that normalises advantages (grpo, avspo, pool with pool_std): unbiased (ddof 1,
            as TRL) or the population std (False; the AVSPO paper's worked example).
        advantage_eps: Added to that std before dividing (TRL's 1e-4), so that a group of near-equal rewards stays
            finite.
    """

    def __init__(
        self,
        scale_rewards: str | bool = "group",
        advantage_std_unbiased: bool = True,
        advantage_eps: Annotated[float, at_least(0, "added to the std before dividing, e.g. 1e-4; at 0 a group of "
                                                 "equal rewards gets NaN advantages", strict=True)] = DEFAULT_EPS,
    ) -> None:
        scale = scale_rewards
        if isinstance(scale, bool):
            scale = "group" if scale else "none"
        if scale not in SCALES:
            raise ValueError(f"unknown scale_rewards {scale!r}; known: {', '.join(SCALES)}")
        self.scale, self.unbiased, self.eps = scale, advantage_std_unbiased, advantage_eps

    def __call__(self, rewards: torch.Tensor, pool: Pool = None, as_drawn: torch.Tensor | None = None
                 ) -> AdvantageOutput:
        return AdvantageOutput(grpo_advantages(rewards, self.scale, self.unbiased, self.eps))


@register("dr_grpo", hosts=IN_TRL)
class DrGRPO(GRPO):
    """Dr. GRPO: centred, not divided by the std (pair it with aggregation='seq_mean_token_sum_norm')."""

    def __init__(self) -> None:
        super().__init__(scale_rewards="none")


@register("rloo", hosts=IN_TRL)
class RLOO(AdvantageEstimator):
    """Leave-one-out baseline."""

    def __call__(self, rewards: torch.Tensor, pool: Pool = None, as_drawn: torch.Tensor | None = None
                 ) -> AdvantageOutput:
        return AdvantageOutput(rloo_advantages(rewards))


@register("pool", hosts=HOSTS)
class PoolBaseline(AdvantageEstimator):
    """Reinforce-Ada's pool baseline; `pool_std=True` also divides by the pool's std.

    Args:
        pool_std: pool (Reinforce-Ada's baseline): also divide by the std of the prompt's pool. The released
            Reinforce-Ada script trains with the mean only.
    """

    def __init__(self, pool_std: bool = False, advantage_std_unbiased: bool = True,
                 advantage_eps: float = DEFAULT_EPS) -> None:
        self.pool_std, self.unbiased, self.eps = pool_std, advantage_std_unbiased, advantage_eps

    def __call__(self, rewards: torch.Tensor, pool: Pool = None, as_drawn: torch.Tensor | None = None
                 ) -> AdvantageOutput:
        return AdvantageOutput(pool_advantages(rewards, pool, self.pool_std, self.unbiased, self.eps))


@register("avspo", hosts=HOSTS, reads=["acr_ema_lambda", "success_threshold", "seed"])
class AVSPO(AdvantageEstimator):
    """Adaptive Virtual Sample Policy Optimization (arXiv 2605.21125). Stateful: call once per step.

    Each step: the collapse signal is an EMA of the ACR (`acr_ema_lambda`, 0 = the per-step ACR, as in the
    paper) of the groups as first drawn (`as_drawn`; default: `rewards`, right for the fixed sampler);
    a collapsed group is augmented when signal > tau; it gets K = max(1, min(G, ceil(G * signal**alpha)))
    virtual rewards (`virtual_sample_strategy`) and is normalised over its G + K values; every other group gets
    plain grpo advantages. Then tau moves towards the signal while the smoothed batch reward rises, away from
    it while it falls (`acr_threshold_eta`), clipped to [acr_threshold_min, acr_threshold_max];
    `acr_threshold_adaptive=False` keeps tau fixed.

    Args:
        acr_threshold_init: AVSPO's initial adaptive threshold tau: groups are augmented while the collapse signal
            exceeds it.
        virtual_sample_alpha: AVSPO's alpha in K = ceil(G * signal ** alpha): how fast the number of virtual samples
            grows.
        virtual_sample_strategy: AVSPO's virtual reward values: "stratified" (the paper's Eq. 9), "uniform", "fixed",
            "exp_decay", "opposite".
        virtual_reward_range: AVSPO: the reward range [r_lo, r_hi] virtual rewards are drawn within (set it to your
            reward's range).
        virtual_reward_anchor: AVSPO: r_anchor, how far above an all-wrong group's common reward its virtual rewards
            reach (Eq. 9).
        virtual_reward_partial: AVSPO: the value of every virtual reward under virtual_sample_strategy="fixed".
        acr_threshold_adaptive: AVSPO's adaptive threshold: tau moves towards the signal while the smoothed batch reward
            rises and away from it while it falls. False keeps tau at acr_threshold_init.
        acr_threshold_eta: AVSPO: step size of the adaptive threshold.
        acr_threshold_reward_ema: AVSPO: smoothing of the batch mean reward J_t whose rise or fall moves the threshold.
        acr_threshold_min: AVSPO: the adaptive threshold never goes below this.
        acr_threshold_max: AVSPO: the adaptive threshold never goes above this.
        all_wrong_max_share: AVSPO guard (grposcope's; docs/algorithms.md, "When it hurts"): the largest share W / (W +
            R) of advantage mass that augmented all-wrong groups (W) may carry against the step's mixed groups (R).
            Above it their advantages are scaled down, so beside no mixed group they make no update, as under GRPO. 0.5
            (the default, from 5 seeds at two learning rates): never more than the mixed groups. None: the paper's
            AVSPO, unbounded.
    """

    def __init__(
        self,
        acr_threshold_init: float = 0.5,
        virtual_sample_alpha: float = 0.5,
        virtual_sample_strategy: str = "stratified",
        virtual_reward_range: tuple[float, float] = (0.0, 1.0),
        virtual_reward_anchor: Annotated[float, at_least(0, "how far above an all-wrong group's reward AVSPO's "
                                                         "virtual rewards reach, e.g. 0.1; at or below it the wrong "
                                                         "replies would gain", strict=True)] = 0.1,
        virtual_reward_partial: float = 0.5,
        acr_threshold_adaptive: bool = True,
        acr_threshold_eta: Annotated[float, at_least(0, "the step size of AVSPO's adaptive threshold, e.g. "
                                                     "0.01")] = 0.01,
        acr_threshold_reward_ema: float = 0.9,
        acr_threshold_min: float = 0.1,
        acr_threshold_max: float = 0.9,
        all_wrong_max_share: float | None = 0.5,
        advantage_std_unbiased: bool = True,
        advantage_eps: float = DEFAULT_EPS,
        acr_ema_lambda: float = 0.9,  # run-wide fields it reads: not its options
        success_threshold: float = 0.5,
        seed: int = 0,
    ) -> None:
        if virtual_sample_strategy not in STRATEGIES:
            raise ValueError(f"unknown virtual_sample_strategy {virtual_sample_strategy!r}; known: "
                             f"{', '.join(STRATEGIES)}")
        if virtual_sample_alpha <= 0:
            raise ValueError(f"virtual_sample_alpha must be > 0, got {virtual_sample_alpha}")
        if not 0.0 <= acr_ema_lambda < 1.0 or not 0.0 <= acr_threshold_reward_ema < 1.0:
            raise ValueError(f"acr_ema_lambda and acr_threshold_reward_ema must be in [0, 1), got {acr_ema_lambda} "
                             f"and {acr_threshold_reward_ema}")
        if not 0.0 <= acr_threshold_min <= acr_threshold_init <= acr_threshold_max <= 1.0:
            raise ValueError(f"need 0 <= acr_threshold_min <= acr_threshold_init <= acr_threshold_max <= 1, got "
                             f"{acr_threshold_min}, {acr_threshold_init}, {acr_threshold_max}")
        if len(virtual_reward_range) != 2 or virtual_reward_range[0] >= virtual_reward_range[1]:
            raise ValueError(f"virtual_reward_range must be [low, high] with low < high, got "
                             f"{list(virtual_reward_range)}")
        if all_wrong_max_share is not None and not 0.0 <= all_wrong_max_share < 1.0:
            raise ValueError(f"all_wrong_max_share must be in [0, 1), or None (the paper: no bound), got "
                             f"{all_wrong_max_share}")
        self.all_wrong_max_share = all_wrong_max_share
        self.alpha, self.strategy = virtual_sample_alpha, virtual_sample_strategy
        self.ema_lambda = acr_ema_lambda
        self.adaptive_threshold, self.eta = acr_threshold_adaptive, acr_threshold_eta
        self.reward_ema = acr_threshold_reward_ema
        self.tau_min, self.tau_max = acr_threshold_min, acr_threshold_max
        self.reward_range = (float(virtual_reward_range[0]), float(virtual_reward_range[1]))
        self.r_anchor, self.r_partial = virtual_reward_anchor, virtual_reward_partial
        self.success_threshold, self.unbiased, self.eps = success_threshold, advantage_std_unbiased, advantage_eps
        self.generator = torch.Generator().manual_seed(seed)  # only the "uniform" strategy draws from it
        self.tau = acr_threshold_init
        self.acr_ema: float | None = None
        self.reward_smooth: float | None = None  # J_t

    def __call__(self, rewards: torch.Tensor, pool: Pool = None, as_drawn: torch.Tensor | None = None
                 ) -> AdvantageOutput:
        rewards = check_rewards(rewards)
        b, g = rewards.shape
        # the signal and J_t read the groups as first drawn: what the policy does, not what a sampler kept
        # (DAPO's dynamic sampling keeps only mixed groups, whose ACR is 0 by construction)
        drawn = rewards if as_drawn is None else check_rewards(as_drawn, name="as_drawn rewards")  # (B0, G)
        acr = collapse_metrics(drawn, self.success_threshold)["collapse/acr"]
        lam = self.ema_lambda
        signal = acr if self.acr_ema is None else lam * self.acr_ema + (1 - lam) * acr
        self.acr_ema = signal
        tau_used = self.tau
        adv = grpo_advantages(rewards, "group", self.unbiased, self.eps)  # (B, G)
        triggered = collapsed_groups(rewards) & (signal > tau_used)  # (B,)
        k = num_virtual_samples(signal, g, self.alpha) if triggered.any() else 0
        if k:
            common = rewards[triggered, 0]  # (M,)
            virtual = virtual_rewards(
                common, common >= self.success_threshold, k, self.strategy, self.reward_range,
                self.r_anchor, self.r_partial, self.generator,
            )  # (M, K')
            k = virtual.shape[1]  # "opposite" always adds one
            adv[triggered] = advantages_with_virtual(rewards[triggered], virtual, self.unbiased, self.eps)
        all_wrong = triggered & (rewards[:, 0] < self.success_threshold)  # (B,) augmented all-wrong groups
        mixed = ~collapsed_groups(rewards)  # (B,) real signal, the guard's counterweight
        share, scale = all_wrong_share(adv, all_wrong, mixed), 1.0
        if self.all_wrong_max_share is not None:  # grposcope's guard; None: the paper, measured but unbounded
            adv, scale = bound_all_wrong_share(adv, all_wrong, mixed, self.all_wrong_max_share)
        self._update_threshold(drawn.mean().item(), signal)
        metrics = {
            "avspo/tau": tau_used,
            "avspo/signal": signal,
            "avspo/k_mean": float(k),
            "avspo/frac_groups_augmented": triggered.float().mean().item(),
            "avspo/all_wrong_share": share,
            "avspo/all_wrong_scale": scale,
        }
        return AdvantageOutput(adv, metrics)


    def _update_threshold(self, mean_reward: float, signal: float) -> None:
        previous = self.reward_smooth
        beta = self.reward_ema
        self.reward_smooth = mean_reward if previous is None else beta * previous + (1 - beta) * mean_reward
        if not self.adaptive_threshold or previous is None:
            return
        delta = self.reward_smooth - previous
        direction = (delta > 0) - (delta < 0)  # sign(J_t - J_{t-1})
        tau = self.tau + self.eta * direction * (signal - self.tau)
        self.tau = min(self.tau_max, max(self.tau_min, tau))

    def state_dict(self) -> dict[str, Any]:
        return {
            "tau": self.tau,
            "acr_ema": self.acr_ema,
            "reward_smooth": self.reward_smooth,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.tau = float(state["tau"])
        self.acr_ema = state["acr_ema"]
        self.reward_smooth = state["reward_smooth"]
        self.generator.set_state(state["generator"])


__all__ = [
    "AVSPO",
    "AdvantageEstimator",
    "AdvantageOutput",
    "ESTIMATORS",
    "STRATEGIES",
    "available",
    "grpo_advantages",
    "PoolStats",
    "make",
    "pool_advantages",
    "pool_stats",
    "register",
    "rloo_advantages",
]
