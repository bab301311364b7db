"""AVSPO's all-wrong guard (docs/algorithms.md, "When it hurts"): hand-computed advantages with and without it,
and the update it makes on the tiny model (measure_update)."""

from __future__ import annotations

import pytest
import torch

from grposcope.core import advantages
from grposcope.core.virtual_samples import all_wrong_share, bound_all_wrong_share


def test_an_all_wrong_batch_is_pushed_down_by_the_paper_and_left_alone_by_the_guard():
    # Two groups of G = 8 zeros; ema_lambda 0: signal = ACR = 1 > tau 0.5, so K = 8 and stratified virtual
    # rewards 0.1 * (8 - k + 1) / 8 = 0.1, 0.0875, ..., 0.0125 (sum 0.45). Over the 16 values: mean
    # 0.45 / 16 = 0.028125; squares: 8 * 0.028125^2 + sum_k (v_k - 0.028125)^2 = 0.0063281 + 0.0128906
    # = 0.0192188; std_unb = sqrt(0.0192188 / 15) = 0.0357946; A = -0.028125 / (0.0357946 + 1e-4) = -0.78355.
    rewards = torch.zeros(2, 8)
    paper = advantages.make("avspo", acr_ema_lambda=0.0, all_wrong_max_share=None)(rewards)
    assert paper.advantages.flatten().tolist() == pytest.approx([-0.78355] * 16, abs=1e-4)
    assert paper.metrics["avspo/all_wrong_share"] == 1.0 and paper.metrics["avspo/all_wrong_scale"] == 1.0
    guarded = advantages.make("avspo", acr_ema_lambda=0.0, all_wrong_max_share=0.5)(rewards)
    assert torch.equal(guarded.advantages, torch.zeros(2, 8))  # nothing else in the step: no update, as GRPO
    assert guarded.metrics["avspo/all_wrong_share"] == 1.0 and guarded.metrics["avspo/all_wrong_scale"] == 0.0


def test_beside_a_mixed_group_the_guard_scales_the_all_wrong_share_down_to_its_bound():
    # Group 0 all wrong, group 1 one right of 8; ema_lambda 0, tau 0.3: signal = ACR = 0.5 > 0.3, K = ceil(8 *
    # 0.5 ** 0.5) = 6. Group 1 (grpo): mean 0.125, std_unb = sqrt((0.875^2 + 7 * 0.125^2) / 7) = 0.353553, so
    # A = 0.875 / 0.353653 = 2.47417 and -0.125 / 0.353653 = -0.35345. Group 0: virtual 0.1 * (6 - k + 1) / 6,
    # sum 0.35; 14 values, mean 0.025, squares 0.0165278, std_unb = sqrt(0.0165278 / 13) = 0.0356563,
    # A = -0.025 / 0.0357563 = -0.69918. W = 8 * 0.69918 = 5.59344, R = 2.47417 + 7 * 0.35345 = 4.94832,
    # share = W / (W + R) = 0.53060 > 0.5: f = 0.5 / 0.5 * R / W = 0.88467, A = -0.69918 * f = -0.61854.
    rewards = torch.tensor([[0.0] * 8, [1.0] + [0.0] * 7])
    paper = advantages.make("avspo", acr_ema_lambda=0.0, acr_threshold_init=0.3, all_wrong_max_share=None)(rewards)
    assert paper.advantages[0].tolist() == pytest.approx([-0.69918] * 8, abs=1e-4)
    assert paper.advantages[1, :2].tolist() == pytest.approx([2.47417, -0.35345], abs=1e-4)
    assert paper.metrics["avspo/all_wrong_share"] == pytest.approx(0.53060, abs=1e-4)
    guarded = advantages.make("avspo", acr_ema_lambda=0.0, acr_threshold_init=0.3, all_wrong_max_share=0.5)(rewards)
    assert guarded.advantages[0].tolist() == pytest.approx([-0.61854] * 8, abs=1e-4)
    assert torch.equal(guarded.advantages[1], paper.advantages[1])  # the mixed group is untouched
    assert guarded.metrics["avspo/all_wrong_scale"] == pytest.approx(0.88467, abs=1e-4)
    wrong, mixed = torch.tensor([True, False]), torch.tensor([False, True])
    assert all_wrong_share(guarded.advantages, wrong, mixed) == pytest.approx(0.5, abs=1e-6)
    # below the bound nothing changes
    same = advantages.make("avspo", acr_ema_lambda=0.0, acr_threshold_init=0.3, all_wrong_max_share=0.6)(rewards)
    assert torch.equal(same.advantages, paper.advantages) and same.metrics["avspo/all_wrong_scale"] == 1.0


def test_an_augmented_all_correct_group_is_no_counterweight():
    # Group 0 all wrong, group 1 all right; signal = ACR = 1, K = 8. Group 0: A = -0.78355 (first test). Group 1:
    # virtual 1 - k / 9, k = 1..8 (sum 4); 16 values, mean 12 / 16 = 0.75; squares 8 * 0.25^2 + sum_j (j / 9
    # - 0.75)^2 = 0.5 + 1.0185185 = 1.5185185, std_unb = sqrt(1.5185185 / 15) = 0.3181738, A = 0.25 / 0.3182738
    # = 0.78549. Its mass 6.2839 would make the all-wrong share 6.2684 / 12.5523 = 0.4994, under 0.5, if it
    # counted; it does not (its push acts on near-certain tokens and hardly moves them), so the share is 1 and
    # the guard zeroes the all-wrong group while the all-correct one keeps its advantages.
    rewards = torch.tensor([[0.0] * 8, [1.0] * 8])
    paper = advantages.make("avspo", acr_ema_lambda=0.0, all_wrong_max_share=None)(rewards)
    assert paper.advantages[0].tolist() == pytest.approx([-0.78355] * 8, abs=1e-4)
    assert paper.advantages[1].tolist() == pytest.approx([0.78549] * 8, abs=1e-4)
    assert paper.metrics["avspo/all_wrong_share"] == 1.0
    guarded = advantages.make("avspo", acr_ema_lambda=0.0, all_wrong_max_share=0.5)(rewards)
    assert torch.equal(guarded.advantages[0], torch.zeros(8))
    assert torch.equal(guarded.advantages[1], paper.advantages[1])
    assert guarded.metrics["avspo/all_wrong_scale"] == 0.0


def test_all_correct_augmentation_is_not_bounded_and_bad_bounds_are_refused():
    # an all-correct group is pushed up, never scaled: the guard is about negative-only steps
    out = advantages.make("avspo", acr_ema_lambda=0.0, all_wrong_max_share=0.0)(torch.ones(1, 8))
    assert (out.advantages > 0).all() and out.metrics["avspo/all_wrong_share"] == 0.0
    with pytest.raises(ValueError, match="all_wrong_max_share must be in \\[0, 1\\)"):
        advantages.make("avspo", all_wrong_max_share=1.0)
    with pytest.raises(ValueError, match="max_share must be in"):
        bound_all_wrong_share(torch.zeros(1, 2), torch.tensor([True]), torch.tensor([False]), -0.1)


@pytest.mark.parametrize("guard", [None, 0.5])
def test_measure_update_shows_the_all_wrong_push_and_the_guard_stopping_it(tmp_path, tiny_llama, tiny_tokenizer,
                                                                           guard):
    from test_trainer import DATA, always_zero, read_lines, tiny_config

    from grposcope import GRPOTrainer

    args = tiny_config(tmp_path, max_steps=1, use_avspo=True, acr_ema_lambda=0.0, measure_update=True,
                       all_wrong_max_share=guard, learning_rate=0.01)
    GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=always_zero, train_dataset=DATA,
                args=args).train()
    [line] = read_lines(tmp_path / "run" / "metrics.jsonl")
    assert "update/logp_change_other" not in line  # every group was all-wrong
    if guard is None:  # every sampled completion got a negative advantage: the update pushed them all down
        assert line["update/logp_change_all_wrong"] < -1e-3
    else:  # zero advantages, zero gradient: AdamW leaves the weights exactly as they were
        assert line["update/logp_change_all_wrong"] == 0.0
