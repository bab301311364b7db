"""GSPO and CISPO: hand-computed losses, gradients and clip fractions, and one SGD step on the tiny Llama that
follows the advantage."""

from __future__ import annotations

import pytest
import torch

from grposcope.core import losses
from grposcope.core.cispo import cispo_loss
from grposcope.core.gspo import gspo_loss

# two completions of 3 and 2 tokens; log-ratios row 0: 0.3, -0.1, 0.1 (mean 0.1), row 1: -0.2, 0.0 (mean -0.1)
OLD = torch.tensor([[-1.0, -2.0, -0.5], [-1.5, -0.3, 0.0]])
LOGP = torch.tensor([[-0.7, -2.1, -0.4], [-1.7, -0.3, 5.0]])  # 5.0: padding, must not matter
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
ADV = torch.tensor([1.0, -1.0])


def test_gspo_clips_whole_sequences_hand_computed():
    # s_0 = exp(0.1) = 1.105171 > 1 + 0.05 with A > 0: clipped, l = -1.05 on each of its 3 tokens, no gradient.
    # s_1 = exp(-0.1) = 0.904837 > 1 - 0.2: not clipped, l = -s_1 * (-1) = 0.904837 on each of its 2 tokens.
    logp = LOGP.clone().requires_grad_(True)
    loss, metrics = gspo_loss(logp, OLD, ADV, MASK, eps_low=0.2, eps_high=0.05, aggregation="seq_mean_token_mean")
    assert loss.item() == pytest.approx((-1.05 + 0.904837) / 2, abs=1e-5)  # -0.0725815
    loss.backward()
    # GSPO's gradient: -(1/2) * s_1 * A_1 * (1/2) per token of sequence 1 = 0.904837 / 4 = 0.226209
    torch.testing.assert_close(logp.grad, torch.tensor([[0.0, 0.0, 0.0], [0.226209, 0.226209, 0.0]]), atol=1e-5,
                               rtol=0)
    assert metrics["clip/high_frac"] == pytest.approx(3 / 5) and metrics["clip/low_frac"] == 0.0
    assert metrics["gspo/ratio_mean"] == pytest.approx((1.105171 + 0.904837) / 2, abs=1e-5)
    # token mean: (3 * -1.05 + 2 * 0.904837) / 5 = -0.268065
    token, _ = gspo_loss(LOGP, OLD, ADV, MASK, eps_low=0.2, eps_high=0.05, aggregation="token_mean")
    assert token.item() == pytest.approx(-0.268065, abs=1e-5)


def test_gspo_clips_below_on_a_negative_advantage():
    # eps_low 0.05: s_1 = 0.904837 < 0.95 with A < 0: min(-0.904837, -0.95) = -0.95, so l = 0.95, no gradient
    logp = LOGP.clone().requires_grad_(True)
    loss, metrics = gspo_loss(logp, OLD, ADV, MASK, eps_low=0.05, eps_high=0.2, aggregation="seq_mean_token_mean")
    # s_0 = 1.105171 < 1.2: l = -1.105171 on row 0
    assert loss.item() == pytest.approx((-1.105171 + 0.95) / 2, abs=1e-5)
    loss.backward()
    assert (logp.grad[1] == 0).all() and logp.grad[0].tolist() == pytest.approx([-1.105171 / 6] * 3, abs=1e-5)
    assert metrics["clip/low_frac"] == pytest.approx(2 / 5) and metrics["clip/high_frac"] == 0.0


def test_cispo_weights_every_token_and_caps_the_weight_hand_computed():
    # ratios: row 0 e^0.3 = 1.349859, e^-0.1 = 0.904837, e^0.1 = 1.105171; row 1 e^-0.2 = 0.818731, 1.
    # eps_high 0.2: weights 1.2, 0.904837, 1.105171 | 0.818731, 1 (no lower bound).
    # l = -w * A * logp: 0.84, 1.900158, 0.442068 | 0.818731 * -1.7 = -1.391843, -0.3; sum 1.490383, / 5 tokens
    logp = LOGP.clone().requires_grad_(True)
    loss, metrics = cispo_loss(logp, OLD, ADV, MASK, eps_high=0.2, aggregation="token_mean")
    assert loss.item() == pytest.approx(1.490383 / 5, abs=1e-5)
    loss.backward()
    # d l / d logp = -w * A / 5: the capped token keeps a gradient (PPO's clip would give it none)
    expected = torch.tensor([[-1.2, -0.904837, -1.105171], [0.818731, 1.0, 0.0]]) / 5
    torch.testing.assert_close(logp.grad, expected, atol=1e-5, rtol=0)
    assert metrics["clip/high_frac"] == pytest.approx(1 / 5) and metrics["clip/low_frac"] == 0.0
    # with a lower bound 1 - 0.1: row 1's first weight is 0.9, l = 0.9 * -1.7 = -1.53
    bounded, metrics = cispo_loss(LOGP, OLD, ADV, MASK, eps_low=0.1, eps_high=0.2, aggregation="token_mean")
    assert bounded.item() == pytest.approx((1.490383 + 1.391843 - 1.53) / 5, abs=1e-5)
    assert metrics["clip/low_frac"] == pytest.approx(1 / 5)


def test_the_registry_builds_them_and_bad_bounds_are_refused():
    assert {"cispo", "grpo", "gspo"} <= set(losses.POLICY_LOSSES.names())
    gspo = losses.POLICY_LOSSES.make("gspo")
    assert (gspo.eps_low, gspo.eps_high) == (3e-4, 4e-4)  # the paper's
    cispo = losses.POLICY_LOSSES.make("cispo")
    assert (cispo.eps_low, cispo.eps_high) == (None, 4.0)
    with pytest.raises(ValueError, match="gspo_epsilon must be in"):
        losses.POLICY_LOSSES.make("gspo", gspo_epsilon=0.0)
    with pytest.raises(ValueError, match="cispo_epsilon_high > 0"):
        losses.POLICY_LOSSES.make("cispo", cispo_epsilon_high=-1.0)


@pytest.mark.parametrize("name", ["gspo", "cispo"])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_one_sgd_step_on_the_tiny_llama_follows_the_advantage(tiny_llama, name, sign):
    from test_direction import logp_change_after_one_sgd_step

    change = logp_change_after_one_sgd_step(tiny_llama, losses.POLICY_LOSSES.make(name), sign,
                                            aggregation="seq_mean_token_mean")
    assert sign * change > 1e-3, f"log-prob changed by {change:+.5f} for advantage {sign:+}"


@pytest.mark.parametrize("name", ["gspo", "cispo"])
def test_the_trainer_trains_with_it_and_the_kl_term_adds(tmp_path, tiny_llama, tiny_tokenizer, name):
    from test_trainer import DATA, read_lines, text_length, tiny_config

    from grposcope import GRPOTrainer

    args = tiny_config(tmp_path, policy_loss=name, beta=0.1, num_iterations=2)
    GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length, train_dataset=DATA,
                args=args).train()
    lines = [line for line in read_lines(tmp_path / "run" / "metrics.jsonl") if "loss/policy" in line]
    assert len(lines) == 2 and all("loss/kl" in line and "kl/mean" in line for line in lines)
    assert ("gspo/ratio_mean" in lines[1]) == (name == "gspo")
