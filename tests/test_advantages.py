"""Hand-computed values for every advantage estimator, AVSPO's pieces, and the registry's errors."""

from __future__ import annotations

import pytest
import torch

from grposcope.core import advantages, diagnostics
from grposcope.core.virtual_samples import advantages_with_virtual, num_virtual_samples, virtual_rewards

TOL = 1e-5


def close(actual: torch.Tensor, expected) -> None:
    torch.testing.assert_close(actual, torch.as_tensor(expected, dtype=actual.dtype), atol=TOL, rtol=0)


# --- grpo / dr_grpo / rloo / pool ---------------------------------------------------------------------


def test_grpo_group_scale_hand_computed():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    out = advantages.make("grpo")(rewards)
    # group 0: mean 0.25; std_unb = sqrt((0.75^2 + 3 * 0.25^2) / 3) = sqrt(0.25) = 0.5
    #   A = 0.75 / 0.5001 = 1.4997001, -0.25 / 0.5001 = -0.4999000
    # group 1: mean 0.5; std_unb = sqrt(4 * 0.25 / 3) = 0.5773503; A = +-0.5 / 0.5774503 = +-0.8658754
    close(out.advantages, [[1.4997001, -0.4999000, -0.4999000, -0.4999000],
                           [0.8658754, 0.8658754, -0.8658754, -0.8658754]])
    assert out.metrics == {}


def test_grpo_population_std_and_zero_eps():
    out = advantages.make("grpo", advantage_std_unbiased=False, advantage_eps=0.0)(torch.tensor([[1.0, 0.0, 0.0, 0.0]]))
    # std_pop = sqrt((0.5625 + 3 * 0.0625) / 4) = sqrt(0.1875) = 0.4330127; 0.75 / 0.4330127 = 1.7320508
    close(out.advantages, [[1.7320508, -0.5773503, -0.5773503, -0.5773503]])


def test_grpo_batch_scale_hand_computed():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    out = advantages.make("grpo", scale_rewards="batch")(rewards)
    # all 8 rewards: 3 ones, 5 zeros, mean 0.375; std_unb = sqrt((3 * 0.625^2 + 5 * 0.375^2) / 7)
    #   = sqrt(1.875 / 7) = 0.5175492; denominator 0.5176492; group means stay 0.25 and 0.5
    #   0.75 / d = 1.4488577, -0.25 / d = -0.4829526, 0.5 / d = 0.9659052
    close(out.advantages, [[1.4488577, -0.4829526, -0.4829526, -0.4829526],
                           [0.9659052, 0.9659052, -0.9659052, -0.9659052]])


def test_grpo_none_and_dr_grpo_only_centre():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0]])  # mean 0.25
    expected = [[0.75, -0.25, -0.25, -0.25]]
    close(advantages.make("grpo", scale_rewards="none")(rewards).advantages, expected)
    close(advantages.make("dr_grpo")(rewards).advantages, expected)


def test_rloo_hand_computed():
    out = advantages.make("rloo")(torch.tensor([[1.0, 0.0, 0.0, 0.0]]))
    # A_0 = 1 - mean(0, 0, 0) = 1; A_i = 0 - mean(1, 0, 0) = -1/3
    close(out.advantages, [[1.0, -1 / 3, -1 / 3, -1 / 3]])


def test_pool_baseline_hand_computed():
    rewards = torch.tensor([[1.0, 0.0]])
    pool = [torch.tensor([1.0, 0, 0, 0, 0, 0, 0, 1, 0, 0])]  # 10 draws, 2 correct: mean 0.2
    close(advantages.make("pool")(rewards, pool=pool).advantages, [[0.8, -0.2]])
    # with std: std_unb(pool) = sqrt((2 * 0.8^2 + 8 * 0.2^2) / 9) = sqrt(1.6 / 9) = 0.4216370
    #   0.8 / 0.4217370 = 1.8969167, -0.2 / 0.4217370 = -0.4742292
    close(advantages.make("pool", pool_std=True)(rewards, pool=pool).advantages, [[1.8969167, -0.4742292]])


def test_pool_without_pool_is_the_group_and_single_reward_pool_has_zero_std():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    close(advantages.make("pool")(rewards).advantages, [[0.75, -0.25, -0.25, -0.25]])
    out = advantages.make("pool", pool_std=True, advantage_eps=0.5)(torch.tensor([[1.0]]), pool=[torch.tensor([0.0])])
    close(out.advantages, [[2.0]])  # (1 - 0) / (0 + 0.5)
    with pytest.raises(ValueError, match="pool has 2 prompts but rewards has 1"):
        advantages.make("pool")(rewards, pool=[torch.ones(3), torch.ones(3)])


def test_unbiased_std_needs_two_samples():
    with pytest.raises(ValueError, match="num_generations >= 2"):
        advantages.make("grpo")(torch.tensor([[1.0], [0.0]]))
    with pytest.raises(ValueError, match="num_generations >= 2"):
        advantages.make("rloo")(torch.tensor([[1.0]]))


# --- AVSPO pieces -----------------------------------------------------------------------------------


@pytest.mark.parametrize("signal, k", [(0.1, 3), (0.2, 4), (0.3, 5), (0.5, 6), (1.0, 8)])
def test_k_values_for_g8_alpha_half(signal, k):
    # K = ceil(8 * sqrt(signal)): 8 * 0.3162 = 2.53 -> 3; 3.58 -> 4; 4.38 -> 5; 5.66 -> 6; 8 -> 8
    assert num_virtual_samples(signal, group_size=8, alpha=0.5) == k


def test_k_is_exact_at_integers_and_bounded():
    assert num_virtual_samples(0.25, 8, 0.5) == 4  # 8 * 0.5 = 4 exactly, not 5 from float noise
    assert num_virtual_samples(0.0, 8, 0.5) == 1  # never below 1
    assert num_virtual_samples(1.0, 8, 0.1) == 8  # never above G


def test_worked_example_all_wrong_and_all_correct():
    # ALGORITHMS.md: G = 8, K = 4, stratified, binary rewards.
    wrong = virtual_rewards(torch.tensor([0.0]), torch.tensor([False]), 4)
    # v_k = 0 + 0.1 * (4 - k + 1) / 4 = 0.1, 0.075, 0.05, 0.025
    close(wrong, [[0.1, 0.075, 0.05, 0.025]])
    # 12 values: mean 0.25 / 12 = 0.0208333; std_unb = 0.0350865; A = -0.0208333 / 0.0351865 = -0.5921
    close(advantages_with_virtual(torch.zeros(1, 8), wrong), [[-0.5920836] * 8])
    close(advantages_with_virtual(torch.zeros(1, 8), wrong, unbiased=False, eps=0.0), [[-0.6201737] * 8])
    correct = virtual_rewards(torch.tensor([1.0]), torch.tensor([True]), 4)
    # v_k = 1 - 1 * k / 5 = 0.8, 0.6, 0.4, 0.2: mean 10 / 12 = 0.8333333; std_unb = 0.2806918;
    #   A = 0.1666667 / 0.2807918 = +0.5936
    close(correct, [[0.8, 0.6, 0.4, 0.2]])
    close(advantages_with_virtual(torch.ones(1, 8), correct), [[0.5935596] * 8])
    close(advantages_with_virtual(torch.ones(1, 8), correct, unbiased=False, eps=0.0), [[0.6201737] * 8])


def test_other_strategies_hand_computed():
    c, flags = torch.tensor([1.0, 0.0]), torch.tensor([True, False])  # one correct, one wrong group
    # exp_decay, K = 3: correct 0 + 1 * 0.5^k = 0.5, 0.25, 0.125; wrong 0 + 0.1 * 0.5^(k-1) = 0.1, 0.05, 0.025
    close(virtual_rewards(c, flags, 3, "exp_decay"), [[0.5, 0.25, 0.125], [0.1, 0.05, 0.025]])
    close(virtual_rewards(c, flags, 3, "fixed"), [[0.5] * 3, [0.5] * 3])  # r_partial everywhere
    close(virtual_rewards(c, flags, 3, "opposite"), [[0.0], [1.0]])  # one sample at the other end
    # reward range [-1, 1]: stratified correct group 1 - 2 * k / 4 = 0.5, 0, -0.5
    close(virtual_rewards(c[:1], flags[:1], 3, "stratified", reward_range=(-1.0, 1.0)), [[0.5, 0.0, -0.5]])


def test_uniform_strategy_stays_in_range_and_follows_its_generator():
    c, flags = torch.tensor([1.0, 0.0]), torch.tensor([True, False])
    v = virtual_rewards(c, flags, 50, "uniform", generator=torch.Generator().manual_seed(3))
    assert (v[0] >= 0).all() and (v[0] < 1).all()  # U(r_lo, c) = U(0, 1)
    assert (v[1] >= 0).all() and (v[1] < 0.1).all()  # U(c, c + r_anchor) = U(0, 0.1)
    again = virtual_rewards(c, flags, 50, "uniform", generator=torch.Generator().manual_seed(3))
    assert torch.equal(v, again)


# --- AVSPO estimator ---------------------------------------------------------------------------------


def test_avspo_estimator_reproduces_worked_example():
    # 5 groups of 8: one all wrong, four mixed -> ACR 0.2 = signal on step 1 > tau 0.1 -> K = 4
    rewards = torch.zeros(5, 8)
    rewards[1:, 0] = 1.0
    est = advantages.make("avspo", all_wrong_max_share=None, acr_threshold_init=0.1)
    out = est(rewards)
    close(out.advantages[0], [-0.5920836] * 8)
    # mixed groups keep their grpo advantages: mean 0.125, std_unb = sqrt((0.875^2 + 7 * 0.125^2) / 7)
    #   = 0.3535534; 0.875 / 0.3536534 = 2.4741739, -0.125 / 0.3536534 = -0.3534495
    close(out.advantages[1], [2.4741739] + [-0.3534495] * 7)
    # all-wrong share of the advantage mass: W = 8 * 0.5920836 = 4.7366688, R = 4 * (2.4741739 + 7 * 0.3534495)
    #   = 19.7932816, W / (W + R) = 0.1930974; no guard, so the scale is 1
    assert out.metrics == pytest.approx(
        {"avspo/tau": 0.1, "avspo/signal": 0.2, "avspo/k_mean": 4.0, "avspo/frac_groups_augmented": 0.2,
         "avspo/all_wrong_share": 0.1930974, "avspo/all_wrong_scale": 1.0}, abs=1e-6
    )


def test_avspo_does_not_trigger_below_threshold():
    rewards = torch.zeros(5, 8)
    rewards[1:, 0] = 1.0  # ACR 0.2 <= tau 0.5
    out = advantages.make("avspo", all_wrong_max_share=None)(rewards)
    close(out.advantages[0], [0.0] * 8)
    assert out.metrics["avspo/frac_groups_augmented"] == 0.0 and out.metrics["avspo/k_mean"] == 0.0


def test_avspo_adaptive_threshold_hand_computed():
    est = advantages.make("avspo", all_wrong_max_share=None)  # tau 0.5, eta 0.01, both EMAs 0.9
    collapsed, mixed = torch.zeros(2, 2), torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    # step 1: ACR 1 -> signal 1; J = 0; no previous J, tau stays 0.5
    assert est(collapsed).metrics["avspo/tau"] == pytest.approx(0.5)
    # step 2: ACR 0 -> signal 0.9; J = 0.9 * 0 + 0.1 * 0.5 = 0.05 rose: tau = 0.5 + 0.01 * (0.9 - 0.5) = 0.504
    out2 = est(mixed)
    assert out2.metrics["avspo/signal"] == pytest.approx(0.9)
    # step 3: ACR 1 -> signal 0.9 * 0.9 + 0.1 = 0.91 > 0.504: triggered, K = ceil(2 * sqrt(0.91)) = 2
    #   virtual 0.1, 0.05 with 0, 0: mean 0.0375, std_unb = 0.0478714; A = -0.0375 / 0.0479714 = -0.7817165
    #   J = 0.9 * 0.05 = 0.045 fell: tau = 0.504 - 0.01 * (0.91 - 0.504) = 0.49994
    out3 = est(collapsed)
    assert out3.metrics["avspo/tau"] == pytest.approx(0.504, abs=TOL)
    assert out3.metrics["avspo/k_mean"] == 2.0
    close(out3.advantages, [[-0.7817165] * 2] * 2)
    assert est.tau == pytest.approx(0.49994, abs=TOL)


def test_avspo_fixed_threshold_and_clipping():
    est = advantages.make("avspo", all_wrong_max_share=None, acr_threshold_adaptive=False)
    for r in (torch.zeros(2, 2), torch.tensor([[1.0, 0.0]] * 2), torch.zeros(2, 2)):
        est(r)
    assert est.tau == 0.5
    # eta 1 jumps straight to the signal, then clips
    est = advantages.make("avspo", all_wrong_max_share=None, acr_threshold_init=0.1, acr_threshold_eta=1.0)
    est(torch.zeros(2, 2))  # signal 1, J = 0
    est(torch.ones(2, 2))  # signal 1, J = 0.1 rose: tau = 0.1 + 1 * (1 - 0.1) = 1 -> clipped to 0.9
    assert est.tau == pytest.approx(0.9)


def test_avspo_state_round_trip_continues_identically():
    torch.manual_seed(0)
    batches = [(torch.rand(4, 4) < 0.2).float() for _ in range(10)]
    straight = advantages.make("avspo", all_wrong_max_share=None, virtual_sample_strategy="uniform",
                                acr_threshold_init=0.1, seed=7)
    for r in batches[:5]:
        straight(r)
    resumed = advantages.make("avspo", all_wrong_max_share=None, virtual_sample_strategy="uniform",
                               acr_threshold_init=0.1, seed=999)
    resumed.load_state_dict(straight.state_dict())
    for r in batches[5:]:
        a, b = straight(r), resumed(r)
        assert torch.equal(a.advantages, b.advantages) and a.metrics == b.metrics


# --- registry -------------------------------------------------------------------------------------------


def test_unknown_names_list_the_known_ones():
    known = ", ".join(advantages.available())
    with pytest.raises(ValueError, match=f"unknown advantage estimator 'gpro'; known: {known}, or your own as "
                                         r"module.path:Name \(docs/architecture.md"):
        advantages.make("gpro")
    with pytest.raises(ValueError, match="known: stratified, uniform, fixed, exp_decay, opposite"):
        advantages.make("avspo", virtual_sample_strategy="random")
    with pytest.raises(ValueError, match="known: group, batch, none"):
        advantages.make("grpo", scale_rewards="global")


def test_unknown_parameter_names_the_signature():
    with pytest.raises(TypeError, match="advantage estimator 'grpo'.*it takes"):
        advantages.make("grpo", alpha=0.5)


def test_pool_stats_in_float64_refuses_non_finite_and_ignores_padding():
    # 32 copies of 0.7: a float32 mean is 0.7 + 6e-8, which pool_std divided by (std + 1e-4) turned into
    # |A| = 6e-4 on a pool whose rewards are all equal, so acr_post read 0 instead of 1.
    values, valid = torch.full((1, 32), 0.7), torch.ones(1, 32, dtype=torch.bool)
    stats = advantages.pool_stats(values, valid)
    adv = advantages.pool_advantages(values, stats, use_std=True)  # (1, 32)
    assert adv.abs().max().item() == 0.0
    assert diagnostics.post_collapse_rate(adv) == 1.0
    bad = values.clone()
    bad[0, 3] = float("nan")
    with pytest.raises(ValueError, match="pool rewards holds a non-finite value"):
        advantages.pool_stats(bad, valid)
    # padding (valid False) may hold anything: mean of [1, 0] = 0.5, std_unb = sqrt(0.5) = 0.70711
    padded = advantages.pool_stats(torch.tensor([[1.0, 0.0, float("inf")]]), torch.tensor([[True, True, False]]))
    assert padded.mean.item() == 0.5 and abs(padded.std().item() - 0.5**0.5) < 1e-6
    assert abs(padded.std(unbiased=False).item() - 0.5) < 1e-6  # the population std of [1, 0]
