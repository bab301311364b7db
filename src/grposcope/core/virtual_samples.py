"""AVSPO's virtual samples: how many, which values, and the advantages they give the real samples.

Source: "Advantage Collapse in Group Relative Policy Optimization: Diagnosis and Mitigation" (arXiv 2605.21125),
Eq. 9 (stratified), with the choices of docs/algorithms.md where the paper leaves a gap. Virtual samples are
rewards only: they shift the group's mean and std and never get tokens or gradients.

Notation: M collapsed groups that are augmented this step, G completions per group, K virtual samples per group.
"""

from __future__ import annotations

import math

import torch

from ._tensors import group_mean, group_std

STRATEGIES = ("stratified", "uniform", "fixed", "exp_decay", "opposite")


def num_virtual_samples(signal: float, group_size: int, alpha: float) -> int:
    """K = max(1, min(G, ceil(G * signal ** alpha))).

    The 1e-9 slack keeps float noise from rounding an exact integer up (8 * 0.25 ** 0.5 must give 4, not 5).
    """
    if not 0.0 <= signal <= 1.0:
        raise ValueError(f"signal must be in [0, 1], got {signal}")
    return max(1, min(group_size, math.ceil(group_size * signal**alpha - 1e-9)))


def virtual_rewards(
    common: torch.Tensor,
    correct: torch.Tensor,
    k: int,
    strategy: str = "stratified",
    reward_range: tuple[float, float] = (0.0, 1.0),
    r_anchor: float = 0.1,
    r_partial: float = 0.5,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Virtual rewards for collapsed groups.  common (M,) shared reward, correct (M,) bool -> (M, K).

    A correct group gets values below its common reward (down to r_lo), a wrong group values above it (up to
    r_anchor above), so that the real samples end up above (correct) or below (wrong) the augmented mean.
    `opposite` ignores k and returns one sample at the other end of the range, as the authors' code does.
    """
    r_lo, r_hi = reward_range
    c = common.unsqueeze(1)  # (M, 1)
    up = correct.unsqueeze(1)  # (M, 1) True: values go down from c
    if strategy == "opposite":
        return torch.where(up, torch.full_like(c, r_lo), torch.full_like(c, r_hi))  # (M, 1)
    steps = torch.arange(1, k + 1, dtype=common.dtype, device=common.device)  # (K,) k = 1..K
    if strategy == "stratified":
        down_v = c - (c - r_lo) * steps / (k + 1)  # evenly spaced strictly between r_lo and c
        up_v = c + r_anchor * (k - steps + 1) / k  # r_anchor, ..., r_anchor / K above c
    elif strategy == "exp_decay":
        down_v = r_lo + (c - r_lo) * 0.5**steps
        up_v = c + r_anchor * 0.5 ** (steps - 1)
    elif strategy == "uniform":
        # drawn on the CPU generator (its state is checkpointed), then moved to the rewards' device
        u = torch.rand(common.shape[0], k, generator=generator, dtype=common.dtype).to(common.device)  # (M, K)
        down_v = r_lo + (c - r_lo) * u
        up_v = c + r_anchor * u
    elif strategy == "fixed":
        return torch.full((common.shape[0], k), r_partial, dtype=common.dtype, device=common.device)
    else:
        raise ValueError(f"unknown virtual sample strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
    return torch.where(up, down_v, up_v)  # (M, K)


def advantages_with_virtual(
    rewards: torch.Tensor, virtual: torch.Tensor, unbiased: bool = True, eps: float = 1e-4
) -> torch.Tensor:
    """Group-normalised advantages of the real samples over the real and virtual values together.

    rewards (M, G), virtual (M, K) -> (M, G): A_i = (r_i - mean(r ∪ v)) / (std(r ∪ v) + eps).
    """
    both = torch.cat([rewards, virtual], dim=1)  # (M, G + K)
    mean = group_mean(both)  # (M, 1)
    std = group_std(both, unbiased).unsqueeze(1)  # (M, 1)
    return (rewards - mean) / (std + eps)  # (M, G)


def all_wrong_share(adv: torch.Tensor, all_wrong: torch.Tensor, mixed: torch.Tensor) -> float:
    """The all-wrong groups' advantage mass against the real signal beside them: W / (W + R), W = sum |A| over
    the groups `all_wrong` marks, R over the groups `mixed` marks (real reward spread, no virtual samples);
    0 when both are 0.  adv (B, G), all_wrong (B,) bool, mixed (B,) bool -> float

    Augmented all-correct groups are left out of R on purpose: their positive advantages act on tokens the model
    already gives probability near 1 and hardly move it (docs/algorithms.md, "When it hurts").
    """
    mass = adv.abs().double().sum(dim=1)  # (B,)
    w, r = mass[all_wrong].sum().item(), mass[mixed & ~all_wrong].sum().item()
    return w / (w + r) if w + r > 0 else 0.0


def bound_all_wrong_share(adv: torch.Tensor, all_wrong: torch.Tensor, mixed: torch.Tensor, max_share: float
                          ) -> tuple[torch.Tensor, float]:
    """Caps the all-wrong groups' share of the advantage mass against the step's mixed groups (grposcope's guard).

    adv (B, G); all_wrong (B,) bool marks the augmented groups whose common reward is below success_threshold;
    mixed (B,) bool the groups with a real reward spread. With share = all_wrong_share(...) above max_share,
    the all-wrong advantages are scaled by f = max_share / (1 - max_share) * R / W, which brings the share to
    max_share: all-wrong augmentation may sharpen the push away from failures that real mixed groups already
    give, but never drive a step alone or beside only all-correct groups (R = 0: f = 0, no gradient from them,
    as under GRPO). -> (adv (B, G), f), f = 1 when nothing was scaled.
    """
    if not 0.0 <= max_share < 1.0:
        raise ValueError(f"max_share must be in [0, 1) (None switches the guard off), got {max_share}")
    share = all_wrong_share(adv, all_wrong, mixed)
    if share <= max_share:
        return adv, 1.0
    f = max_share / (1.0 - max_share) * (1.0 - share) / share  # R / W = (1 - share) / share
    out = adv.clone()
    out[all_wrong] = adv[all_wrong] * f
    return out, f
