"""CISPO: clip the importance-sampling weight, never the token's gradient.

Source: "MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning Attention" (arXiv 2506.13585),
Eqs. 4-5. Each token's ratio r_t = exp(logp_t - old_logp_t) is clipped and detached, and weighs a REINFORCE
term:
    l_t = -sg(clip(r_t, 1 - eps_low, 1 + eps_high)) * A * logp_t.
Unlike PPO's clip, which zeroes the gradient of a token whose ratio left the range (rare, low-probability
"fork" tokens among them, after their first update), every token keeps a gradient; only its weight is
bounded. MiniMax-M1 sets no lower bound (eps_low None here). The upper bound's default, a weight of at most
5 (eps_high 4), is the cap TRL 1.16 recommends for its `cispo` loss after ScaleRL (arXiv 2510.13786).
On-policy (r = 1) the gradient is the clipped surrogate's: -A * grad logp.

Notation: N sequences, T completion tokens; mask (N, T) is 1 on real completion tokens.
"""

from __future__ import annotations

import torch

from ._tensors import masked_mean
from .loss_registry import POLICY_LOSSES
from .losses import aggregate, per_sequence


def cispo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float | None = None,
    eps_high: float = 4.0,
    **aggregation,
) -> tuple[torch.Tensor, dict[str, float]]:
    """CISPO.  logp, old_logp, mask (N, T); advantages (N,) or (B, G) -> (loss, metrics).

    `aggregation`: aggregate()'s keywords (MiniMax-M1 uses the token mean, loss_type="dapo"). Metrics:
    `loss/policy`; `clip/low_frac` / `clip/high_frac`, the share of real tokens whose weight was capped below
    or above (they still give a gradient).
    """
    adv = per_sequence(advantages, logp)  # (N, 1)
    real = mask.bool()
    zero = torch.zeros_like(logp)
    ratio = torch.exp(torch.where(real, logp - old_logp, zero)).detach()  # (N, T), 1 on padding
    low = None if eps_low is None else 1.0 - eps_low
    weight = torch.clamp(ratio, min=low, max=1.0 + eps_high)  # (N, T), no gradient
    per_token = -weight * adv * torch.where(real, logp, zero)  # (N, T)
    loss = aggregate(per_token, mask, **aggregation)
    with torch.no_grad():
        capped_low = ratio < low if low is not None else torch.zeros_like(real)
        metrics = {
            "loss/policy": loss.item(),
            "clip/low_frac": masked_mean(capped_low.float(), mask).item(),
            "clip/high_frac": masked_mean((ratio > 1.0 + eps_high).float(), mask).item(),
        }
    return loss, metrics


@POLICY_LOSSES.register("cispo")
class CISPO:
    """Clipped IS-weight Policy Optimization: `cispo_loss` with its bounds fixed.

    Args:
        cispo_epsilon_low: cispo loss: the weight's lower bound is 1 - this; None: no lower bound, as MiniMax-M1 (arXiv
            2506.13585).
        cispo_epsilon_high: cispo loss: the weight's upper bound is 1 + this (4: a weight of at most 5, the cap TRL
            recommends after ScaleRL, arXiv 2510.13786).
    """

    def __init__(self, cispo_epsilon_low: float | None = None, cispo_epsilon_high: float = 4.0) -> None:
        if (cispo_epsilon_low is not None and not 0 < cispo_epsilon_low <= 1) or cispo_epsilon_high <= 0:
            raise ValueError(f"cispo_epsilon_low must be in (0, 1] or None and cispo_epsilon_high > 0, got "
                             f"{cispo_epsilon_low} and {cispo_epsilon_high}")
        self.eps_low, self.eps_high = cispo_epsilon_low, cispo_epsilon_high

    def __call__(self, logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                 **aggregation) -> tuple[torch.Tensor, dict[str, float]]:
        return cispo_loss(logp, old_logp, advantages, mask, self.eps_low, self.eps_high, **aggregation)
