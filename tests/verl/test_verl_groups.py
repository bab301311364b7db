"""grposcope.integrations.verl_groups: verl's flat rows as (B, G) groups. Needs no verl: runs in the main suite too."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grposcope.core import advantages
from grposcope.integrations.verl_groups import group_rows, padded_groups, run_estimator, step_collapse


def test_rows_are_grouped_by_uid_and_padding_and_singletons_join_no_group():
    index = np.array(["b", "a", "pad1f", "b", "c", "a", "pad1f", "b"], dtype=object)
    groups = group_rows(index, 8)
    assert [r.tolist() for r in groups.rows] == [[0, 3, 7], [1, 5]]  # uid order as first seen
    assert groups.padding == 2 and groups.singletons == [4]
    assert groups.sizes() == {2: [1], 3: [0]}
    with pytest.raises(ValueError, match="3 uids but the batch has 4 rows"):
        group_rows(index[:3], 4)


def test_padded_groups_keep_collapse_and_common_value():
    scores = torch.tensor([1.0, 0.0, 0.5, 0.5, 0.5], dtype=torch.float64)
    m = padded_groups(scores, [np.array([0, 1]), np.array([2, 3, 4])])
    # group 0: [1, 0] padded with its mean 0.5; group 1 already full
    assert m.tolist() == [[1.0, 0.0, 0.5], [0.5, 0.5, 0.5]]


def test_uneven_groups_get_each_groups_own_grpo_advantages():
    # group x: [1, 0] -> mean 0.5, std (ddof 1) sqrt(0.5) = 0.70711, A = +-0.5 / (0.70711 + 1e-4) = +-0.70700
    # group y: [1, 0, 0] -> mean 1/3, std sqrt(((2/3)^2 + 2 (1/3)^2) / 2) = 0.57735, A = 2/3 / 0.57745 = 1.15450,
    #          -1/3 / 0.57745 = -0.57725;  the padding row gets 0, the singleton z gets 0
    index = np.array(["y", "x", "pad0", "y", "x", "z", "y"], dtype=object)
    scores = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    adv, metrics = run_estimator(advantages.make("grpo"), scores, group_rows(index, 7), success_threshold=0.5)
    expected = [1.15450, 0.70700, 0.0, -0.57725, -0.70700, 0.0, -0.57725]
    torch.testing.assert_close(adv, torch.tensor(expected, dtype=torch.float64), atol=1e-5, rtol=0)
    assert metrics["collapse/acr"] == 0.0 and metrics["grposcope/padding_rows"] == 1.0
    assert metrics["grposcope/singleton_groups"] == 1.0


def test_acr_post_counts_the_groups_left_with_no_advantage_whatever_their_size():
    # grpo: x [1, 1] and w [0, 0, 0] have std 0, so every advantage is 0; y [1, 0, 0] has +-advantages;
    # the padding row and the singleton z join no group: acr_post = 2 dead of 3 groups
    index = np.array(["x", "y", "pad0", "w", "y", "x", "z", "w", "y", "w"], dtype=object)
    scores = torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    _, metrics = run_estimator(advantages.make("grpo"), scores, group_rows(index, 10), success_threshold=0.5)
    assert metrics["collapse/acr_post"] == pytest.approx(2 / 3)
    assert metrics["collapse/acr"] == pytest.approx(2 / 3)  # the same two groups, collapsed before the estimator


def test_avspo_takes_one_state_update_per_step_whatever_the_group_sizes():
    # sizes 2 and 3: both groups of size 2 collapsed (all wrong), both of size 3 mixed -> the step's ACR is 0.5.
    # One update: acr_ema = 0.5. Updating per size would give 1.0, then 0.9 * 1.0 + 0.1 * 0.0 = 0.9.
    index = np.array(["a", "a", "b", "b", "c", "c", "c", "d", "d", "d"], dtype=object)
    scores = torch.tensor([0, 0, 0, 0, 1, 0, 0, 0, 1, 1], dtype=torch.float64)
    est = advantages.make("avspo")
    _, metrics = run_estimator(est, scores, group_rows(index, 10), success_threshold=0.5)
    assert est.acr_ema == 0.5 and metrics["avspo/signal"] == 0.5 and metrics["collapse/acr"] == 0.5
    assert metrics["collapse/acr_all_wrong"] == 0.5
    # J_t: the mean of the group means, 0 0 1/3 2/3 -> 0.25
    assert est.reward_smooth == pytest.approx(0.25)


def test_even_groups_are_one_plain_call():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)  # (2, 4)
    index = np.repeat(np.array(["p", "q"], dtype=object), 4)
    est, direct = advantages.make("avspo"), advantages.make("avspo")
    adv, _ = run_estimator(est, rewards.reshape(-1), group_rows(index, 8), success_threshold=0.5)
    torch.testing.assert_close(adv.view(2, 4), direct(rewards).advantages)
    assert est.state_dict()["acr_ema"] == direct.state_dict()["acr_ema"] == 0.5


def test_step_collapse_leaves_out_padding_and_singletons():
    # groups a [1, 1] (collapsed, correct) and b [0, 1] (mixed); the padding rows and the singleton c are no group
    index = np.array(["a", "b", "pad7", "a", "b", "pad7", "c"], dtype=object)
    scores = torch.tensor([1, 0, 0, 1, 1, 0, 0], dtype=torch.float64)
    assert step_collapse(index, scores, 0.5) == {"collapse/acr": 0.5, "collapse/acr_all_correct": 0.5,
                                                 "collapse/acr_all_wrong": 0.0}
    assert step_collapse(index[[2, 5, 6]], scores[[2, 5, 6]], 0.5) == {}


def test_without_verl_the_adapter_names_the_install_command():
    from importlib import metadata

    try:
        metadata.version("verl")
    except metadata.PackageNotFoundError:
        with pytest.raises(ImportError, match=r"pip install verl==0\.9\.1"):
            import grposcope.integrations.verl  # noqa: F401
    else:
        pytest.skip("verl is installed here: tests/verl/test_verl_plugin.py checks the version check")
