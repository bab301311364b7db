"""Hand-computed values for the policy loss, its aggregations, the KL estimators and the log-prob helper."""

from __future__ import annotations

import math

import pytest
import torch

from grposcope.core import losses

TOL = 1e-5


def batch():
    """Two sequences of two tokens; old_logp = 0 so that ratio = exp(logp).

    seq 0 (A = +1): ratios 1.5, 0.9;  seq 1 (A = -1): ratios 0.5, 1.1 (the second token is padding).
    """
    ratios = torch.tensor([[1.5, 0.9], [0.5, 1.1]])
    logp = ratios.log()
    return logp, torch.zeros_like(logp), torch.tensor([1.0, -1.0]), torch.tensor([[1, 1], [1, 0]])


def test_policy_loss_token_mean_and_clip_fractions():
    logp, old, adv, mask = batch()
    loss, m = losses.policy_loss(logp, old, adv, mask)
    # seq 0, A = +1: token 0: -min(1.5, clip 1.2) = -1.2 (clipped high); token 1: -min(0.9, 0.9) = -0.9
    # seq 1, A = -1: token 0: -min(-0.5, -clip(0.5) = -0.8) = 0.8 (clipped low); token 1 is padding
    # token_mean = (-1.2 - 0.9 + 0.8) / 3 = -0.4333333
    assert loss.item() == pytest.approx(-1.3 / 3, abs=TOL)
    assert m["loss/policy"] == pytest.approx(-1.3 / 3, abs=TOL)
    assert m["clip/high_frac"] == pytest.approx(1 / 3) and m["clip/low_frac"] == pytest.approx(1 / 3)


def test_policy_loss_clip_higher():
    logp, old, adv, mask = batch()
    loss, m = losses.policy_loss(logp, old, adv, mask, eps_low=0.2, eps_high=0.28)
    # token (0, 0) is now clipped at 1.28: (-1.28 - 0.9 + 0.8) / 3 = -0.46
    assert loss.item() == pytest.approx(-0.46, abs=TOL)
    # the ratio 1.5 is still above 1.28, so it still counts as clipped high
    assert m["clip/high_frac"] == pytest.approx(1 / 3)


def test_policy_loss_aggregations():
    logp, old, adv, mask = batch()
    # seq_mean_token_mean: seq 0 mean (-1.2 - 0.9) / 2 = -1.05; seq 1 mean 0.8; (-1.05 + 0.8) / 2 = -0.125
    loss, _ = losses.policy_loss(logp, old, adv, mask, aggregation="seq_mean_token_mean")
    assert loss.item() == pytest.approx(-0.125, abs=TOL)
    # seq_mean_token_sum_norm, L = 4: (-2.1 / 4 + 0.8 / 4) / 2 = -0.1625
    loss, _ = losses.policy_loss(
        logp, old, adv, mask, aggregation="seq_mean_token_sum_norm", max_completion_length=4
    )
    assert loss.item() == pytest.approx(-0.1625, abs=TOL)


def test_policy_loss_uses_the_optimizer_batch_counts():
    logp, old, adv, mask = batch()
    loss, _ = losses.policy_loss(logp, old, adv, mask, num_tokens=6)  # -1.3 / 6
    assert loss.item() == pytest.approx(-1.3 / 6, abs=TOL)
    loss, _ = losses.policy_loss(logp, old, adv, mask, aggregation="seq_mean_token_mean", num_sequences=5)
    assert loss.item() == pytest.approx(-0.25 / 5, abs=TOL)  # (-1.05 + 0.8) / 5


def test_dual_clip_caps_negative_advantage_loss():
    logp, old, adv, mask = torch.tensor([[math.log(4.0)]]), torch.zeros(1, 1), torch.tensor([-1.0]), torch.ones(1, 1)
    # ratio 4, A = -1: -min(-4, -1.2) = 4 without dual-clip; with c = 3: min(4, -3 * -1) = 3
    assert losses.policy_loss(logp, old, adv, mask)[0].item() == pytest.approx(4.0, abs=TOL)
    loss, m = losses.policy_loss(logp, old, adv, mask, dual_clip=3.0)
    assert loss.item() == pytest.approx(3.0, abs=TOL) and m["clip/dual_frac"] == 1.0
    # a positive advantage is untouched by dual-clip: -min(4, 1.2) = -1.2
    assert losses.policy_loss(logp, old, -adv, mask, dual_clip=3.0)[0].item() == pytest.approx(-1.2, abs=TOL)


def test_policy_loss_gradient_on_policy_is_minus_advantage_over_tokens():
    # With logp == old_logp, d(loss)/d(logp_t) = -A / num_tokens for every real token (ratio 1, no clipping).
    logp = torch.zeros(2, 3, requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    loss, _ = losses.policy_loss(logp, logp.detach(), torch.tensor([2.0, -1.0]), mask)
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[-0.4, -0.4, 0.0], [0.2, 0.2, 0.2]]), atol=TOL, rtol=0)


def test_bad_arguments_are_named():
    logp, old, adv, mask = batch()
    with pytest.raises(ValueError, match="known: token_mean, seq_mean_token_mean, seq_mean_token_sum_norm"):
        losses.policy_loss(logp, old, adv, mask, aggregation="sum")
    with pytest.raises(ValueError, match="needs max_completion_length"):
        losses.policy_loss(logp, old, adv, mask, aggregation="seq_mean_token_sum_norm")
    with pytest.raises(ValueError, match="3 advantages for 2 sequences"):
        losses.policy_loss(logp, old, torch.ones(3), mask)
    with pytest.raises(ValueError, match="dual_clip must be > 1"):
        losses.policy_loss(logp, old, adv, mask, dual_clip=0.5)


def test_kl_estimators_hand_computed():
    logp, ref = torch.tensor([[0.0, -1.0, 5.0]]), torch.tensor([[-1.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0]])  # the third token is padding: its KL is 0 and it is not averaged
    # ref - logp = -1, +1
    k1, m1 = losses.kl_penalty(logp, ref, mask, "k1")  # logp - ref = 1, -1
    assert k1[0].tolist() == pytest.approx([1.0, -1.0, 0.0]) and m1["kl/mean"] == pytest.approx(0.0)
    k2, _ = losses.kl_penalty(logp, ref, mask, "k2")  # 0.5 * 1 = 0.5 both
    assert k2[0].tolist() == pytest.approx([0.5, 0.5, 0.0])
    k3, m3 = losses.kl_penalty(logp, ref, mask, "k3")
    # exp(-1) + 1 - 1 = 0.3678794;  exp(1) - 1 - 1 = 0.7182818; mean 0.5430806
    assert k3[0].tolist() == pytest.approx([0.3678794, 0.7182818, 0.0], abs=TOL)
    assert m3["kl/mean"] == pytest.approx(0.5430806, abs=TOL)
    with pytest.raises(ValueError, match="known: k1, k2, k3"):
        losses.kl_penalty(logp, ref, mask, "k4")


def test_aggregate_a_kl_term_like_the_policy_loss():
    kl = torch.tensor([[0.2, 0.4], [0.6, 9.0]])
    mask = torch.tensor([[1, 1], [1, 0]])
    # token_mean: (0.2 + 0.4 + 0.6) / 3 = 0.4; seq_mean_token_mean: (0.3 + 0.6) / 2 = 0.45
    assert losses.aggregate(kl, mask).item() == pytest.approx(0.4, abs=TOL)
    assert losses.aggregate(kl, mask, "seq_mean_token_mean").item() == pytest.approx(0.45, abs=TOL)


def test_selective_log_probs_hand_computed():
    logits = torch.tensor([[[0.0, math.log(2), math.log(3)], [0.0, 0.0, 0.0]]])  # (1, 2, 3)
    tokens = torch.tensor([[2, 0]])
    # row 0: p = 1/6, 2/6, 3/6 -> log(1/2) = -0.6931472; row 1: uniform -> log(1/3) = -1.0986123
    lp = losses.selective_log_probs(logits, tokens)
    assert lp[0].tolist() == pytest.approx([-0.6931472, -1.0986123], abs=TOL)


def test_selective_log_probs_matches_log_softmax_in_every_chunking():
    torch.manual_seed(0)
    logits = torch.randn(3, 7, 13, requires_grad=True)
    tokens = torch.randint(0, 13, (3, 7))
    reference = torch.log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    (g_ref,) = torch.autograd.grad(reference.sum(), logits)
    for chunk_rows in (1, 4, 21, 1000):
        lp = losses.selective_log_probs(logits, tokens, chunk_rows=chunk_rows)
        (g,) = torch.autograd.grad(lp.sum(), logits)
        torch.testing.assert_close(lp, reference, atol=1e-6, rtol=0)
        torch.testing.assert_close(g, g_ref, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="must match logits"):
        losses.selective_log_probs(logits, tokens[:, :3])


def test_overlong_penalty_hand_computed():
    lengths = torch.tensor([10, 12, 14, 16, 20])
    # free up to 16 - 4 = 12 tokens; then (12 - L) / 4: 14 -> -0.5, 16 -> -1; beyond 16 -> -1
    assert losses.overlong_penalty(lengths, 16, 4).tolist() == pytest.approx([0.0, 0.0, -0.5, -1.0, -1.0])
