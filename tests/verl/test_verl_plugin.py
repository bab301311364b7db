"""grposcope.integrations.verl through verl 0.9.1's own compute_advantage on a DataProto, on the CPU.

Runs in .venv-verl (scripts/test_verl.sh); the main suite, without verl, skips it. The skip imports a verl
submodule, not `verl` itself: in the main suite `import verl` would find this very folder, tests/verl, as a
namespace package and succeed.
"""

from __future__ import annotations

import pytest
import torch

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos", reason="needs verl 0.9.1: bash scripts/test_verl.sh")

from verl_batches import make_batch, verl_advantages  # noqa: E402

from grposcope.core import advantages  # noqa: E402
from grposcope.integrations import verl as plugin  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_estimators():
    plugin.reset()
    yield
    plugin.reset()


def algorithm(**grposcope):
    from omegaconf import OmegaConf

    return OmegaConf.create({"adv_estimator": "avspo", "grposcope": grposcope})


def test_registers_only_what_verl_lacks():
    registry = core_algos.ADV_ESTIMATOR_REGISTRY
    assert {"avspo", "grposcope_pool", "grposcope_grpo"} <= set(registry)
    assert registry["grpo"] is core_algos.compute_grpo_outcome_advantage  # verl's own, untouched
    assert registry["rloo"] is core_algos.compute_rloo_outcome_advantage
    assert not {"pool", "dr_grpo"} & set(registry)


def test_grposcope_grpo_hand_computed_on_shuffled_rows():
    # group a: [1, 0, 0, 1] -> mean 0.5, std (ddof 1) sqrt(1/3) = 0.577350, A = +-0.5 / 0.577450 = +-0.865875
    # group b: [1, 1, 1, 1] -> 0;  rows interleaved, responses of different lengths
    uids = ["a", "b", "a", "b", "b", "a", "b", "a"]
    scores = [1, 1, 0, 1, 1, 0, 1, 1]
    adv = verl_advantages(make_batch(scores, uids, lengths=[5, 1, 3, 2, 5, 4, 1, 2]), "grposcope_grpo")
    expected = torch.tensor([0.865875, 0, -0.865875, 0, 0, -0.865875, 0, 0.865875])
    torch.testing.assert_close(adv, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name, core", [("grposcope_grpo", "grpo"), ("grposcope_pool", "pool")])
def test_equals_core_on_shuffled_rows(name, core):
    g = torch.Generator().manual_seed(0)
    rewards = torch.rand(6, 8, generator=g).round(decimals=1)  # (B, G) partial credit
    rewards[2] = 0.3  # one collapsed group
    expected = advantages.make(core)(rewards).advantages.reshape(-1)  # (B*G,) in group order
    perm = torch.randperm(48, generator=g)
    uids = [f"u{i // 8}" for i in range(48)]
    adv = verl_advantages(make_batch(rewards.reshape(-1)[perm], [uids[i] for i in perm]), name)
    torch.testing.assert_close(adv, expected[perm], atol=1e-6, rtol=0)


def test_uneven_groups_and_padding_rows():
    per_group = {"u0": torch.tensor([1.0, 0.0, 1.0]), "u1": torch.ones(5),  # u1 collapsed, all correct
                 "u2": torch.tensor([0.0, 1.0, 1.0, 0.0, 0.0]), "u3": torch.tensor([1.0, 0.0])}
    uids = [u for u, r in per_group.items() for _ in r] + ["pad9e1c"] * 3  # verl's v1 padding rows
    g = torch.Generator().manual_seed(1)
    scores = torch.cat([*per_group.values(), torch.zeros(3)])
    expected = torch.cat([advantages.make("grpo")(r.unsqueeze(0)).advantages[0] for r in per_group.values()]
                         + [torch.zeros(3)])
    perm = torch.randperm(len(uids), generator=g)
    adv = verl_advantages(make_batch(scores[perm], [uids[i] for i in perm]), "grposcope_grpo")
    torch.testing.assert_close(adv, expected[perm], atol=1e-6, rtol=0)
    metrics = plugin.latest_metrics()
    # 4 groups, u1 collapsed: ACR 1/4; the padding rows (all 0) would have made it 2/5
    assert metrics["collapse/acr"] == 0.25 and metrics["collapse/acr_all_correct"] == 0.25
    assert metrics["grposcope/padding_rows"] == 3.0


def test_partial_credit_all_equal_groups_exactly_zero_where_verl_grpo_is_not():
    g = torch.Generator().manual_seed(0)
    common = torch.rand(1000, generator=g)  # (1000,) a partial-credit reward in [0, 1) per group
    uids = [f"u{i // 8}" for i in range(8000)]
    data = make_batch(common.repeat_interleave(8), uids, lengths=[1] * 8000)
    ours = verl_advantages(data, "grposcope_grpo").view(1000, 8)
    theirs = verl_advantages(make_batch(common.repeat_interleave(8), uids, lengths=[1] * 8000), "grpo").view(1000, 8)
    nonzero = int((theirs != 0).any(dim=1).sum())
    print(f"verl grpo: {nonzero} of 1000 all-equal groups get a non-zero advantage, max |A| "
          f"{theirs.abs().max():.4f}; grposcope_grpo: {int((ours != 0).any(dim=1).sum())}")
    assert torch.count_nonzero(ours) == 0
    assert 300 < nonzero < 550 and 0.05 < theirs.abs().max() < 0.2  # measured: 420 and 0.1057 (torch 2.13 CPU)


def test_avspo_equals_core_avspo_step_after_step():
    options = {"virtual_sample_alpha": 1.0, "acr_threshold_init": 0.3, "all_wrong_max_share": None}
    direct = advantages.make("avspo", **options)
    steps = [torch.tensor([[0.0] * 4, [0.0] * 4, [1.0] * 4, [1.0, 0.0, 0.0, 1.0]]),  # ACR 0.75 > tau: augmented
             torch.tensor([[0.0] * 4, [1.0, 1.0, 0.0, 1.0], [1.0] * 4, [0.0] * 4])]
    g = torch.Generator().manual_seed(2)
    for rewards in steps:
        expected = direct(rewards).advantages.reshape(-1)  # (16,)
        perm = torch.randperm(16, generator=g)
        uids = [f"s{i // 4}" for i in range(16)]
        adv = verl_advantages(make_batch(rewards.reshape(-1)[perm], [uids[i] for i in perm]), "avspo",
                              algorithm(**options))
        torch.testing.assert_close(adv, expected[perm], atol=1e-6, rtol=0)
        assert plugin.latest_metrics()["avspo/tau"] == pytest.approx(direct.state_dict()["tau"], abs=0.02)
    assert plugin.state_dict()["avspo"]["acr_ema"] == direct.state_dict()["acr_ema"]
    assert plugin.state_dict()["avspo"]["tau"] == direct.state_dict()["tau"]
    # the collapsed groups moved: not GRPO's zero
    assert torch.count_nonzero(adv) == 16


def test_options_come_from_algorithm_grposcope_in_verls_own_config():
    import os

    import verl
    from hydra import compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        with pytest.raises(Exception, match=r"\+algorithm.grposcope.acr_threshold_init"):
            compose("ppo_trainer", overrides=["algorithm.grposcope.acr_threshold_init=0.8"])  # undeclared key
        cfg = compose("ppo_trainer", overrides=[
            "algorithm.adv_estimator=avspo", "+algorithm.grposcope.acr_threshold_init=0.8",
            "+algorithm.grposcope.virtual_reward_range=[0,2]", "+algorithm.grposcope.acr_ema_lambda=0.0",
            "+algorithm.grposcope.success_threshold=1.0"])
    params, threshold = plugin.estimator_params("avspo", cfg.algorithm)
    assert params == {"acr_threshold_init": 0.8, "virtual_reward_range": (0, 2), "acr_ema_lambda": 0.0,
                      "success_threshold": 1.0}
    assert threshold == 1.0
    rewards = [1, 1, 1, 1, 2, 2, 2, 2]  # two collapsed groups; success at 1.0: both all-correct
    verl_advantages(make_batch(rewards, ["a"] * 4 + ["b"] * 4), "avspo", cfg.algorithm)
    est = core_algos.get_adv_estimator_fn("avspo").slot.estimator
    assert est.tau == 0.8 and est.reward_range == (0, 2) and est.ema_lambda == 0.0
    assert plugin.latest_metrics()["collapse/acr_all_correct"] == 1.0


def test_an_unknown_option_fails_with_the_known_list_and_another_entrys_is_warned_about():
    # the one policy of every host (grposcope.components.options): a typo fails, another entry's option warns
    data = make_batch([1, 0, 1, 0], ["a"] * 4)
    with pytest.raises(ValueError, match="virtual_sample_alpah is not an option.*virtual_sample_alpha"):
        verl_advantages(data, "avspo", algorithm(virtual_sample_alpah=0.5))
    with pytest.raises(ValueError, match="'grposcope_pool'; it reads: advantage_eps, advantage_std_unbiased, "
                                         "pool_std, skip_no_signal_steps, success_threshold"):
        verl_advantages(data, "grposcope_pool", algorithm(virtual_sample_alpah=0.5))
    with pytest.warns(UserWarning, match=r"algorithm.grposcope.virtual_sample_alpha=0.5 is not used: "
                                         r"algorithm.adv_estimator=grposcope_pool does not read it \(read by "
                                         r"advantage estimator avspo\)"):
        verl_advantages(data, "grposcope_pool", algorithm(virtual_sample_alpha=0.5))


def test_reimport_keeps_the_registered_functions_and_a_foreign_name_fails(monkeypatch):
    import importlib

    before = core_algos.get_adv_estimator_fn("avspo")
    importlib.reload(plugin)
    assert core_algos.get_adv_estimator_fn("avspo") is before
    monkeypatch.setitem(core_algos.ADV_ESTIMATOR_REGISTRY, "grposcope_pool", core_algos.compute_rloo_outcome_advantage)
    with pytest.raises(ValueError, match="already has an advantage estimator named 'grposcope_pool'"):
        plugin.register()


def test_untested_verl_version_is_refused(monkeypatch):
    from importlib import metadata

    from grposcope.integrations import verl_run

    monkeypatch.setattr(metadata, "version", lambda name: "0.10.0")
    with pytest.raises(ImportError, match="tested with verl 0.9.1 only, found verl 0.10.0"):
        verl_run.require_verl()


@pytest.mark.parametrize("section, message", [
    ({"success_threshold": float("nan")}, "option success_threshold: got nan; give a finite number"),
    ({"acr_ema_lambda": 1.5}, r"acr_ema_lambda must be in \[0, 1\)"),
    ({"advantage_eps": 0.0}, "advantage_eps must be > 0"),
])
def test_verls_keys_get_grposcopes_option_ranges(section, message):
    # the one table (components/ranges.py) for algorithm.grposcope's keys too
    data = make_batch([1, 0, 1, 0], ["a"] * 4)
    name = "grposcope_grpo" if "advantage_eps" in section else "avspo"
    with pytest.raises(ValueError, match=message):
        verl_advantages(data, name, algorithm(**section))
