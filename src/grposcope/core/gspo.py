"""GSPO: the importance ratio and its clipping at the level of the sequence.

Source: "Group Sequence Policy Optimization" (Zheng et al. 2025, arXiv 2507.18071), Eqs. 5-7 and the
GSPO-token form (Eq. 13). The ratio of a completion is the geometric mean of its token ratios,
s_i = exp(mean_t (logp_t - old_logp_t)), and the whole completion is clipped or not:
    l_i = -min(s_i * A_i, clip(s_i, 1 - eps_low, 1 + eps_high) * A_i).
Written per token as GSPO-token, s_it = sg(s_i) * exp(logp_t - sg(logp_t)): its value is s_i on every token
and its gradient s_i * grad logp_t, so that with the per-sequence mean (loss_type="grpo", the paper's
objective) the gradient is exactly GSPO's; with a token mean (loss_type="dapo") longer completions weigh more.
The paper's clip ranges are 3e-4 and 4e-4, far below the token-level 0.2: a sequence ratio is an average.

Notation: N sequences, T completion tokens; mask (N, T) is 1 on real completion tokens.
"""

from __future__ import annotations

import torch

from ._tensors import masked_mean
from .loss_registry import POLICY_LOSSES
from .losses import aggregate, per_sequence


def gspo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = 3e-4,
    eps_high: float = 4e-4,
    **aggregation,
) -> tuple[torch.Tensor, dict[str, float]]:
    """GSPO-token.  logp, old_logp, mask (N, T); advantages (N,) or (B, G) -> (loss, metrics).

    `aggregation`: aggregate()'s keywords (aggregation, num_tokens, num_sequences, max_completion_length).
    Metrics: `loss/policy`; `clip/low_frac` / `clip/high_frac`, the share of real tokens in sequences whose
    ratio was clipped (they give no gradient); `gspo/ratio_mean`, the mean sequence ratio.
    """
    adv = per_sequence(advantages, logp)  # (N, 1)
    real = mask.bool()
    zero = torch.zeros_like(logp)
    log_ratio = torch.where(real, logp - old_logp, zero)  # (N, T), 0 on padding
    seq_log_ratio = log_ratio.sum(dim=1, keepdim=True) / real.sum(dim=1, keepdim=True).clamp(min=1)  # (N, 1)
    seq_ratio = torch.exp(seq_log_ratio)  # (N, 1): s_i
    # s_it: the value s_i, the gradient s_i * grad logp_t (padding: value s_i, no gradient)
    token_ratio = torch.exp(seq_log_ratio.detach() + torch.where(real, logp - logp.detach(), zero))  # (N, T)
    unclipped = token_ratio * adv  # (N, T)
    clipped = torch.clamp(token_ratio, 1.0 - eps_low, 1.0 + eps_high) * adv  # (N, T)
    loss = aggregate(-torch.minimum(unclipped, clipped), mask, **aggregation)
    with torch.no_grad():
        low = ((seq_ratio < 1.0 - eps_low) & (adv < 0)).expand_as(logp)  # (N, T)
        high = ((seq_ratio > 1.0 + eps_high) & (adv > 0)).expand_as(logp)  # (N, T)
        has_tokens = real.any(dim=1)  # (N,)
        metrics = {
            "loss/policy": loss.item(),
            "clip/low_frac": masked_mean(low.float(), mask).item(),
            "clip/high_frac": masked_mean(high.float(), mask).item(),
            "gspo/ratio_mean": seq_ratio[has_tokens].mean().item() if has_tokens.any() else 1.0,
        }
    return loss, metrics


@POLICY_LOSSES.register("gspo")
class GSPO:
    """Group Sequence Policy Optimization: `gspo_loss` with its clip ranges fixed.

    Args:
        gspo_epsilon: gspo loss: lower clip range of the sequence ratio (GSPO, arXiv 2507.18071: 3e-4).
        gspo_epsilon_high: gspo loss: upper clip range of the sequence ratio (GSPO: 4e-4).
    """

    def __init__(self, gspo_epsilon: float = 3e-4, gspo_epsilon_high: float = 4e-4) -> None:
        if not 0 < gspo_epsilon < 1 or gspo_epsilon_high <= 0:
            raise ValueError(f"gspo_epsilon must be in (0, 1) and gspo_epsilon_high > 0, got {gspo_epsilon} and "
                             f"{gspo_epsilon_high}")
        self.eps_low, self.eps_high = gspo_epsilon, gspo_epsilon_high

    def __call__(self, logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                 **aggregation) -> tuple[torch.Tensor, dict[str, float]]:
        return gspo_loss(logp, old_logp, advantages, mask, self.eps_low, self.eps_high, **aggregation)
