"""The policy loss: clipped surrogate with clip-higher, its aggregation, decoupled KL, and log-probs.

Sources: PPO clipping as used by GRPO (DeepSeekMath, arXiv 2402.03300); clip-higher, token-level loss,
decoupled KL and the soft overlong penalty (DAPO, arXiv 2503.14476); length-unbiased aggregation (Dr. GRPO,
arXiv 2503.20783); dual-clip (Ye et al., "Mastering Complex Control in MOBA Games with Deep RL",
arXiv 1912.09729). See docs/algorithms.md.

Notation: N sequences in a micro-batch, T completion tokens, V vocabulary; `mask` (N, T) is 1 on real
completion tokens. With gradient accumulation, `num_tokens` / `num_sequences` are the counts of the whole
optimizer batch, so that the summed micro-batch gradients equal the gradient of one big batch.
"""

from __future__ import annotations

import torch

from ._tensors import map_rows, masked_mean, weighted_sum
from .loss_registry import POLICY_LOSSES

# Rows of (V,) logits per chunk: 64 x 49152 floats (12 MB) stay near the cache; with 256 rows the forward and
# backward of 1024 rows took 0.7 s instead of 0.35 s here (bench/step.py's shapes, 2 cores).
LOGPROB_CHUNK_ROWS = 64

AGGREGATIONS = ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm")
KL_ESTIMATORS = ("k1", "k2", "k3")
ROLLOUT_CORRECTIONS = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def selective_log_probs(
    logits: torch.Tensor, tokens: torch.Tensor, chunk_rows: int = LOGPROB_CHUNK_ROWS, with_entropy: bool = False
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """log p(token) under softmax(logits).  logits (N, T, V), tokens (N, T) -> (N, T).

    log p = z[token] - logsumexp(z), `chunk_rows` rows at a time: no (N, T, V) log-softmax is built.
    With `with_entropy`, also the entropy of each row's distribution (N, T), without gradient, from the same
    pass over the logits (`diagnostics.token_entropy` is the standalone, differentiable one).
    """
    if tokens.shape != logits.shape[:-1]:
        raise ValueError(f"tokens {tuple(tokens.shape)} must match logits {tuple(logits.shape)} without V")
    flat_tokens = tokens.reshape(-1)  # (N*T,)
    entropies: list[torch.Tensor] = []

    def chosen_rows(z: torch.Tensor, rows: slice) -> torch.Tensor:
        z = z.float()  # (rows, V)
        chosen = z.gather(-1, flat_tokens[rows].unsqueeze(-1)).squeeze(-1)  # (rows,)
        if not with_entropy:
            return chosen - torch.logsumexp(z, dim=-1)
        lse, entropy = _LogSumExpAndEntropy.apply(z)  # (rows,), (rows,)
        entropies.append(entropy)
        return chosen - lse

    logp = map_rows(logits, chosen_rows, chunk_rows)
    if not with_entropy:
        return logp
    return logp, (torch.cat(entropies).view(logp.shape) if entropies else torch.zeros_like(logp))


class _LogSumExpAndEntropy(torch.autograd.Function):
    """logsumexp(z) over the last dim, and the entropy of softmax(z) (no gradient), from one exp pass.

    The entropy is taken relative to the row's top logit: every term e_v (z_v - top) has the same sign, so
    nothing cancels (lse - sum p z loses ~1e-3 nats in float32 when the logits are large and H small).
    Backward is logsumexp's: grad * softmax(z), recomputed from z and the saved logsumexp.
    """

    @staticmethod
    def forward(ctx, z: torch.Tensor):  # z (rows, V)
        top = z.amax(dim=-1, keepdim=True)  # (rows, 1)
        shifted = z - top  # (rows, V), <= 0
        e = torch.exp(shifted)  # (rows, V)
        total = e.sum(dim=-1)  # (rows,)
        lse = top.squeeze(-1) + total.log()  # (rows,)
        entropy = total.log() - weighted_sum(e, shifted) / total  # H = log S - sum_v e_v (z_v - top) / S
        ctx.save_for_backward(z, lse)
        ctx.mark_non_differentiable(entropy)
        return lse, entropy

    @staticmethod
    def backward(ctx, grad_lse: torch.Tensor, _grad_entropy: torch.Tensor):
        z, lse = ctx.saved_tensors
        return grad_lse.unsqueeze(-1) * torch.exp(z - lse.unsqueeze(-1))  # (rows, V)


def per_sequence(advantages: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    """One advantage per sequence, as a column to broadcast over its tokens.  (N,) or (B, G), logp (N, T) -> (N, 1)
    (B, G) advantages are flattened row by row: sequence n = j * G + i."""
    adv = advantages.reshape(-1, 1).to(logp.dtype)  # (N, 1)
    if adv.shape[0] != logp.shape[0]:
        raise ValueError(f"{adv.shape[0]} advantages for {logp.shape[0]} sequences")
    return adv


def carries_signal(advantages: torch.Tensor, mask: torch.Tensor) -> bool:
    """Whether a policy loss on these rows can have a gradient: some row with a real token has a non-zero
    advantage.  advantages (N,) or (B, G), mask (N, T) -> bool.

    Every registered policy loss is a product with the advantage, so rows whose advantage is exactly 0 give
    a gradient of exactly 0, and so do rows with no real token. A KL or entropy term is the caller's to add.
    """
    adv = advantages.reshape(-1)  # (N,)
    if adv.shape[0] != mask.shape[0]:
        raise ValueError(f"{adv.shape[0]} advantages for {mask.shape[0]} sequences")
    return bool(((adv != 0) & mask.bool().any(dim=1)).any())


def adamw_replay(empty_steps: int, beta1: float = 0.9, beta2: float = 0.999) -> float:
    """How far AdamW moves a weight in all over one real gradient g followed by `empty_steps` exactly-zero
    gradients, in units of the first step's displacement lr * sign(g) (eps and weight decay left out).

    After step 1, m_t = beta1^(t-1) (1 - beta1) g and v_t = beta2^(t-1) (1 - beta2) g^2, so the bias-corrected
    step m_t / (1 - beta1^t) / sqrt(v_t / (1 - beta2^t)) keeps the sign of g and shrinks slowly:
    1 + 0.670 = 1.67 after one empty step (beta1 0.9, beta2 0.999). docs/algorithms.md derives it.
    """
    if empty_steps < 0:
        raise ValueError(f"empty_steps must be >= 0, got {empty_steps}")
    total = 0.0
    for t in range(1, empty_steps + 2):
        m_hat = beta1 ** (t - 1) * (1 - beta1) / (1 - beta1**t)
        v_hat = beta2 ** (t - 1) * (1 - beta2) / (1 - beta2**t)
        total += m_hat / v_hat**0.5
    return total


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    aggregation: str = "token_mean",
    num_tokens: float | torch.Tensor | None = None,
    num_sequences: int | None = None,
    max_completion_length: int | None = None,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reduces a per-token loss (N, T) to a scalar.

    `weights` (N, T) or (N, 1), without gradient, multiply each token's loss first (the rollout correction's
    importance weights, `rollout_importance_weights`); the counts that normalise stay the tokens'.

    token_mean:              sum over all real tokens / num_tokens (the optimizer batch's token count).
    seq_mean_token_mean:     sum over sequences of (the sequence's token mean) / num_sequences.
    seq_mean_token_sum_norm: sum over sequences of (the sequence's token sum / max_completion_length)
                             / num_sequences.
    Counts default to this micro-batch's own (right without gradient accumulation).
    """
    real = mask.bool()
    if weights is not None:
        per_token = per_token * weights
    per_token = torch.where(real, per_token, torch.zeros_like(per_token))  # padding contributes exactly 0
    if aggregation == "token_mean":
        count = real.sum() if num_tokens is None else num_tokens
        return per_token.sum() / max(float(count), 1.0)
    n_seq = per_token.shape[0] if num_sequences is None else num_sequences
    seq_sums = per_token.sum(dim=1)  # (N,)
    if aggregation == "seq_mean_token_mean":
        return (seq_sums / real.sum(dim=1).clamp(min=1)).sum() / n_seq
    if aggregation == "seq_mean_token_sum_norm":
        if not max_completion_length or max_completion_length <= 0:
            raise ValueError("aggregation 'seq_mean_token_sum_norm' needs max_completion_length > 0")
        return (seq_sums / max_completion_length).sum() / n_seq
    raise ValueError(f"unknown aggregation {aggregation!r}; known: {', '.join(AGGREGATIONS)}")


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    aggregation: str = "token_mean",
    dual_clip: float | None = None,
    num_tokens: float | torch.Tensor | None = None,
    num_sequences: int | None = None,
    max_completion_length: int | None = None,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped surrogate loss with clip-higher.  logp, old_logp, mask (N, T); advantages (N,) or (B, G).

    rho = exp(logp - old_logp); l = -min(rho * A, clip(rho, 1 - eps_low, 1 + eps_high) * A);
    with dual_clip = c (> 1), tokens with A < 0 get l = min(l, -c * A). Returns (loss, metrics): `loss/policy`
    and the fraction of real tokens whose ratio was clipped below (`clip/low_frac`, A < 0) or above
    (`clip/high_frac`, A > 0), i.e. tokens that give no gradient; `clip/dual_frac` with dual-clip.
    """
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be > 1 (3 is usual), got {dual_clip}")
    adv = per_sequence(advantages, logp)  # (N, 1), broadcast over tokens
    real = mask.bool()
    # Padding gets ratio 1 before the exp: whatever logp holds there can neither overflow nor send a NaN
    # back through the gradient.
    log_ratio = torch.where(real, logp - old_logp, torch.zeros_like(logp))  # (N, T)
    ratio = torch.exp(log_ratio)  # (N, T)
    unclipped = ratio * adv  # (N, T)
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv  # (N, T)
    per_token = -torch.minimum(unclipped, clipped)  # (N, T)
    metrics = {}
    if dual_clip is not None:
        dual = -dual_clip * adv  # (N, 1)
        dual_active = (adv < 0) & (per_token > dual)  # (N, T)
        per_token = torch.where(adv < 0, torch.minimum(per_token, dual), per_token)
        metrics["clip/dual_frac"] = masked_mean(dual_active.float(), mask).item()
    loss = aggregate(per_token, mask, aggregation, num_tokens, num_sequences, max_completion_length, weights)
    with torch.no_grad():
        low = (ratio < 1.0 - eps_low) & (adv < 0)  # (N, T)
        high = (ratio > 1.0 + eps_high) & (adv > 0)  # (N, T)
        metrics["clip/low_frac"] = masked_mean(low.float(), mask).item()
        metrics["clip/high_frac"] = masked_mean(high.float(), mask).item()
        metrics["loss/policy"] = loss.item()
    return loss, metrics


# ---------------------------------------------------------------------------------------------------------
# Policy losses: one registry, one call signature
#
#     loss_fn = POLICY_LOSSES.make("grpo", epsilon=0.2, epsilon_high=0.28)
#     loss, metrics = loss_fn(logp, old_logp, advantages, mask, aggregation="token_mean", num_tokens=...,
#                             num_sequences=..., max_completion_length=...)
#
# An entry is built once per run from its options and called on every micro-batch; the aggregation and the
# batch counts are the run's, so that the KL and entropy terms, aggregated the same way, add to any entry.


@POLICY_LOSSES.register("grpo")
class ClippedSurrogate:
    """`policy_loss` with its clip ranges fixed: PPO's clipped surrogate with clip-higher and dual-clip.

    Args:
        epsilon: grpo loss: lower clip range of the ratio (PPO).
        epsilon_high: grpo loss: upper clip range (clip-higher; DAPO, arXiv 2503.14476, uses 0.28). Default: epsilon.
        dual_clip: grpo loss: cap the loss of negative-advantage tokens at dual_clip * |A| (dual-clip PPO, arXiv
            1912.09729; 3 is usual).
    """

    def __init__(self, epsilon: float = 0.2, epsilon_high: float | None = None, dual_clip: float | None = None
                 ) -> None:
        epsilon_high = epsilon if epsilon_high is None else epsilon_high
        if epsilon <= 0 or epsilon_high <= 0:
            raise ValueError(f"epsilon and epsilon_high must be > 0, got {epsilon} and {epsilon_high}")
        if dual_clip is not None and dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1 (3 is usual) or None, got {dual_clip}")
        self.eps_low, self.eps_high, self.dual_clip = epsilon, epsilon_high, dual_clip

    def __call__(self, logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                 **aggregation) -> tuple[torch.Tensor, dict[str, float]]:
        return policy_loss(logp, old_logp, advantages, mask, self.eps_low, self.eps_high, dual_clip=self.dual_clip,
                           **aggregation)


def rollout_importance_weights(
    logp: torch.Tensor,
    sampling_logp: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token_truncate",
    clip_max: float | None = 2.0,
    clip_min: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Importance weights for tokens drawn by another policy than the one the loss scores.  logp (the trainer's
    log-probs of the policy that sampled, pi_old), sampling_logp (the rollout's own), mask (N, T) ->
    weights (N, T) for token modes or (N, 1) for sequence modes, without gradient, and metrics.

    The rollout may run a lower-precision copy of the weights (a bf16 copy here, vLLM in TRL and verl): its
    distribution mu differs a little from the trainer's pi_old, and the loss's expectation is over mu.
    w = pi_old / mu per token ("token_*"), or the product over a completion's tokens ("sequence_*");
    "*_truncate" clips w to [clip_min, clip_max] (truncated importance sampling), "*_mask" sets weights
    outside that range to 0. Truncation: IMPALA's V-trace (arXiv 1802.01561); for rollout engines, Yao et al.,
    "Your Efficient RL Framework Secretly Brings You Off-Policy RL Training" (2025, blog), whose cap of 2 is
    verl's default; TRL's vllm_importance_sampling_mode names the same four modes.
    Metrics (TRL's names): `sampling/sampling_logp_difference/mean|max` (|log pi_old - log mu| per token),
    `sampling/importance_sampling_ratio/min|mean|max` (after truncation or masking), `sampling/rollout_kl`
    (the k3 estimate of KL(mu || pi_old) per token) and `sampling/importance_sampling_clipped_frac`.
    """
    if mode not in ROLLOUT_CORRECTIONS:
        raise ValueError(f"unknown rollout correction {mode!r}; known: {', '.join(ROLLOUT_CORRECTIONS)}")
    real = mask.bool()
    with torch.no_grad():
        diff = torch.where(real, logp - sampling_logp, torch.zeros_like(logp))  # (N, T) log pi_old - log mu
        sequence = mode.startswith("sequence")
        raw = torch.exp(diff.sum(dim=1, keepdim=True) if sequence else diff)  # (N, 1) or (N, T)
        low = 0.0 if clip_min is None else clip_min
        high = float("inf") if clip_max is None else clip_max
        outside = (raw < low) | (raw > high)
        weights = raw.clamp(min=clip_min, max=clip_max) if mode.endswith("truncate") else raw.masked_fill(outside, 0.0)
        counted = real.any(dim=1, keepdim=True) if sequence else real  # (N, 1) or (N, T)
        shown, out = weights[counted], outside[counted]
        token_ratio = torch.exp(diff[real])
        metrics = {}
        if real.any():
            metrics = {
                "sampling/sampling_logp_difference/mean": diff[real].abs().mean().item(),
                "sampling/sampling_logp_difference/max": diff[real].abs().max().item(),
                "sampling/importance_sampling_ratio/min": shown.min().item(),
                "sampling/importance_sampling_ratio/mean": shown.mean().item(),
                "sampling/importance_sampling_ratio/max": shown.max().item(),
                "sampling/importance_sampling_clipped_frac": out.float().mean().item(),
                "sampling/rollout_kl": (token_ratio - 1 - diff[real]).mean().item(),
            }
    return weights, metrics


def kl_penalty(
    logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor, estimator: str = "k3"
) -> tuple[torch.Tensor, dict[str, float]]:
    """Per-token KL estimate of the policy to the reference.  logp, ref_logp, mask (N, T) -> (N, T), metrics.

    k1 = logp - ref; k2 = (logp - ref)^2 / 2; k3 = exp(ref - logp) - (ref - logp) - 1 (unbiased, >= 0).
    Add `beta * aggregate(kl, mask, ...)` to the loss (decoupled KL, DAPO). Padding positions are zeroed.
    """
    real = mask.bool()
    diff = torch.where(real, ref_logp - logp, torch.zeros_like(logp))  # (N, T), 0 (so KL 0) on padding
    if estimator == "k1":
        kl = -diff
    elif estimator == "k2":
        kl = 0.5 * diff.pow(2)
    elif estimator == "k3":
        kl = torch.exp(diff) - diff - 1.0
    else:
        raise ValueError(f"unknown KL estimator {estimator!r}; known: {', '.join(KL_ESTIMATORS)}")
    return kl, {"kl/mean": masked_mean(kl.detach(), mask).item()}


def overlong_penalty(lengths: torch.Tensor, max_completion_length: int, cache_length: int) -> torch.Tensor:
    """DAPO's soft overlong punishment, added to the reward.  lengths (N,) in tokens -> (N,).

    0 up to max_completion_length - cache_length, then falling linearly to -1 at max_completion_length,
    and -1 beyond it.
    """
    if not 0 < cache_length <= max_completion_length:
        raise ValueError(f"need 0 < cache_length <= max_completion_length, got {cache_length}")
    free = max_completion_length - cache_length
    over = (lengths.float() - free) / cache_length  # (N,) > 0 inside the cache zone
    return -over.clamp(min=0.0, max=1.0)

