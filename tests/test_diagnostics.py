"""Hand-computed values for the ACR family, the monitor and its alarms, and token entropy."""

from __future__ import annotations

import logging
import math

import pytest
import torch

from grposcope.core import diagnostics
from grposcope.core.diagnostics import (
    CollapseMonitor,
    alarm_window,
    collapse_metrics,
    post_collapse_rate,
    token_entropy,
)


def test_collapse_metrics_hand_computed():
    rewards = torch.tensor(
        [
            [1.0, 1.0, 1.0, 1.0],  # collapsed, common 1 >= 0.5: all correct
            [0.0, 0.0, 0.0, 0.0],  # collapsed, common 0: all wrong
            [1.0, 0.0, 1.0, 0.0],  # mixed
            [0.5, 0.5, 0.5, 0.5],  # collapsed, common 0.5 >= 0.5: counts as correct
        ]
    )
    m = collapse_metrics(rewards, success_threshold=0.5)
    assert m["collapse/acr"] == pytest.approx(3 / 4, abs=1e-6)
    assert m["collapse/acr_all_correct"] == pytest.approx(2 / 4, abs=1e-6)
    assert m["collapse/acr_all_wrong"] == pytest.approx(1 / 4, abs=1e-6)
    # With the threshold above 0.5 the 0.5-group becomes all-wrong: 1/4 correct, 2/4 wrong.
    m = collapse_metrics(rewards, success_threshold=0.6)
    assert (m["collapse/acr_all_correct"], m["collapse/acr_all_wrong"]) == pytest.approx((0.25, 0.5))


def test_collapse_uses_tolerance_not_exact_equality():
    # population std of [0, 1e-7] is 5e-8 < 1e-6: collapsed; of [0, 1e-5] is 5e-6: not collapsed
    rewards = torch.tensor([[0.0, 1e-7], [0.0, 1e-5]], dtype=torch.float64)
    assert diagnostics.collapsed_groups(rewards).tolist() == [True, False]


def test_collapse_metrics_rejects_nan_and_bad_shape():
    with pytest.raises(ValueError, match="non-finite value at"):
        collapse_metrics(torch.tensor([[1.0, float("nan")]]))
    with pytest.raises(ValueError, match=r"shape \(B, G\)"):
        collapse_metrics(torch.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match=r"shape \(B, G\)"):
        CollapseMonitor().update([1.0, 0.0])  # a plain list is validated, not an AttributeError


def test_post_collapse_rate():
    adv = torch.tensor([[0.0, 0.0], [0.5, -0.5], [1e-9, -1e-9]])  # groups 0 and 2 are all |A| < 1e-8
    assert post_collapse_rate(adv) == pytest.approx(2 / 3)


def test_monitor_running_statistics_hand_computed():
    mon = CollapseMonitor()
    both = torch.tensor([[1.0, 1.0], [0.0, 0.0]])  # ACR 1
    none = torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # ACR 0
    half = torch.tensor([[1.0, 1.0], [0.0, 1.0]])  # ACR 0.5
    m1, m2, m3 = mon.update(both), mon.update(none), mon.update(half)
    # acr_ema: 1; 0.9*1 + 0.1*0 = 0.9; 0.9*0.9 + 0.1*0.5 = 0.86
    assert [m["collapse/acr_ema"] for m in (m1, m2, m3)] == pytest.approx([1.0, 0.9, 0.86])
    # cumulative: 2/2, 2/4, 3/6
    assert [m["collapse/acr_cumulative"] for m in (m1, m2, m3)] == pytest.approx([1.0, 0.5, 0.5])
    # acr_100: running mean of 1, 0, 0.5 -> 1, 0.5, 0.5
    assert [m["collapse/acr_100"] for m in (m1, m2, m3)] == pytest.approx([1.0, 0.5, 0.5])
    # volatility (population std): [1] -> 0; [1, 0] -> 0.5; [1, 0, 0.5] -> sqrt((0.25 + 0.25 + 0) / 3)
    assert [m["collapse/volatility"] for m in (m1, m2, m3)] == pytest.approx([0.0, 0.5, math.sqrt(1 / 6)])


def test_monitor_acr_100_freezes_and_volatility_window_slides():
    mon = CollapseMonitor(early_steps=2, volatility_window=2)
    ones, zeros = torch.ones(1, 2), torch.tensor([[1.0, 0.0]])
    mon.update(ones)  # ACR 1
    mon.update(zeros)  # ACR 0
    m = mon.update(zeros)  # ACR 0: acr_100 stays mean(1, 0) = 0.5; window [0, 0] -> volatility 0
    assert m["collapse/acr_100"] == pytest.approx(0.5)
    assert m["collapse/volatility"] == pytest.approx(0.0)


def test_monitor_acr_post_only_with_advantages():
    mon = CollapseMonitor()
    rewards = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    assert "collapse/acr_post" not in mon.update(rewards)
    m = mon.update(rewards, advantages=torch.tensor([0.0, 0.0, 0.7, -0.7]))  # flat (B*G,) is accepted
    assert m["collapse/acr_post"] == pytest.approx(0.5)


def test_stagnation_alarm_fires_at_the_50th_step_once(caplog):
    mon = CollapseMonitor()
    collapsed = torch.zeros(2, 4)  # ACR 1 > 0.35
    with caplog.at_level(logging.WARNING, logger="grposcope"):
        flags = [mon.update(collapsed)["alarm/stagnation"] for _ in range(52)]
    assert flags[:49] == [0.0] * 49 and flags[49:] == [1.0, 1.0, 1.0]  # on from the 50th consecutive step
    warnings = [r for r in caplog.records if "stagnation" in r.getMessage()]
    assert len(warnings) == 1 and "step 50" in warnings[0].getMessage()
    assert mon.update(torch.tensor([[1.0, 0.0, 1.0, 0.0]] * 2))["alarm/stagnation"] == 0.0  # ACR 0 clears it
    assert mon.fired == [(50, "stagnation")]


def test_stagnation_needs_acr_strictly_above_threshold():
    mon = CollapseMonitor(stagnation_steps=2)
    exactly = torch.tensor([[1.0, 1.0]] * 7 + [[1.0, 0.0]] * 13)  # ACR = 7/20 = 0.35, not > 0.35
    assert [mon.update(exactly)["alarm/stagnation"] for _ in range(3)] == [0.0, 0.0, 0.0]


def test_entropy_alarm_needs_more_than_50_steps(caplog):
    mon = CollapseMonitor()
    mixed = torch.tensor([[1.0, 0.0]])
    for _ in range(50):
        mon.update(mixed, entropy=0.6)  # above the floor first: a collapse is a fall
    with caplog.at_level(logging.WARNING, logger="grposcope"):
        flags = [mon.update(mixed, entropy=0.4)["alarm/entropy_collapse"] for _ in range(52)]
    assert flags[:50] == [0.0] * 50 and flags[50:] == [1.0, 1.0]  # fires on the 51st low step (the reward flat)
    assert mon.update(mixed, entropy=0.6)["alarm/entropy_collapse"] == 0.0
    assert sum("entropy_collapse" in r.getMessage() for r in caplog.records) == 1


def test_kl_drift_alarm_over_bound():
    mon = CollapseMonitor(kl_bound=0.5)
    mixed = torch.tensor([[1.0, 0.0]])
    assert mon.update(mixed, kl=0.5)["alarm/kl_drift"] == 0.0  # at the bound: not over it
    assert mon.update(mixed, kl=0.51)["alarm/kl_drift"] == 1.0
    assert mon.update(mixed)["alarm/kl_drift"] == 1.0  # not measured this step: the alarm stays as it was
    assert mon.update(mixed, kl=0.1)["alarm/kl_drift"] == 0.0
    assert CollapseMonitor().update(mixed)["alarm/kl_drift"] == 0.0  # never measured: never on


def test_unmeasured_entropy_keeps_the_streak():
    mon = CollapseMonitor(entropy_steps=2)
    mixed = torch.tensor([[1.0, 0.0]])
    # high, low, (not measured), low, low: the streak reaches 3 > 2 on the fifth step, not reset by the gap
    flags = [mon.update(mixed, entropy=e)["alarm/entropy_collapse"] for e in (0.9, 0.1, None, 0.1, 0.1)]
    assert flags == [0.0, 0.0, 0.0, 0.0, 1.0]


def test_entropy_that_starts_below_the_floor_raises_no_alarm_until_it_has_risen_and_fallen():
    mon = CollapseMonitor(entropy_steps=2)
    mixed = torch.tensor([[1.0, 0.0]])
    # 0.2 x 4 (a policy that starts nearly deterministic: no collapse), 0.5 (at the floor), then 0.3 x 3
    flags = [mon.update(mixed, entropy=e)["alarm/entropy_collapse"] for e in (0.2, 0.2, 0.2, 0.2, 0.5, 0.3, 0.3, 0.3)]
    assert flags == [0.0] * 7 + [1.0]  # 3 > 2 low steps after the rise


def test_no_signal_alarm_counts_steps_whose_advantages_are_all_zero(caplog):
    mon = CollapseMonitor(no_signal_steps=3)
    rewards = torch.tensor([[0.0, 0.0], [1.0, 1.0]])  # (B=2, G=2)
    zero, some = torch.zeros(2, 2), torch.tensor([[0.0, 0.0], [0.5, -0.5]])
    with caplog.at_level(logging.WARNING, logger="grposcope"):
        out = [mon.update(rewards, a) for a in (zero, zero, some, zero, zero, zero, zero)]
    assert [o["collapse/no_signal_streak"] for o in out] == [1, 2, 0, 1, 2, 3, 4]
    assert [o["collapse/no_signal_steps"] for o in out] == [1, 2, 2, 3, 4, 5, 6]
    assert [o["alarm/no_signal"] for o in out] == [0, 0, 0, 0, 0, 1, 1]  # the third in a row
    assert sum("no_signal" in r.getMessage() for r in caplog.records) == 1
    assert "collapse/no_signal_steps" not in CollapseMonitor().update(rewards)  # no advantages: not measured
    resumed = CollapseMonitor(no_signal_steps=3)
    resumed.load_state_dict(mon.state_dict())
    assert resumed.update(rewards, some)["collapse/no_signal_steps"] == 6


def test_alarm_windows_fit_the_run_length():
    # a tenth of the run, between 5 and the paper's 50 steps: 30 -> 5, 51 -> ceil(5.1) = 6, 200 -> 20
    assert [alarm_window(n) for n in (None, 10, 30, 51, 200, 500, 5000)] == [50, 5, 5, 6, 20, 50, 50]


def test_monitor_state_round_trip_continues_identically():
    torch.manual_seed(0)
    batches = [(torch.rand(4, 3) < 0.3).float() for _ in range(12)]
    straight = CollapseMonitor(stagnation_steps=3, volatility_window=5)
    for r in batches[:7]:
        straight.update(r, entropy=0.3)
    resumed = CollapseMonitor(stagnation_steps=3, volatility_window=5)
    resumed.load_state_dict(straight.state_dict())
    for r in batches[7:]:
        assert resumed.update(r, entropy=0.3) == straight.update(r, entropy=0.3)


def test_token_entropy_hand_computed():
    logits = torch.tensor([[[0.0, 0.0, -math.inf], [0.0, math.log(2), math.log(3)]]])  # (1, 2, 3)
    h = token_entropy(logits)
    # row 0: two equal logits, the third has no mass (a top-k filtered logit): ln 2 = 0.693147
    # row 1: p = 1/6, 2/6, 3/6: H = ln6/6 + ln3/3 + ln2/2 = 0.298627 + 0.366204 + 0.346574 = 1.011404
    assert h[0].tolist() == pytest.approx([0.693147, 1.011404], abs=1e-5)


def test_token_entropy_chunking_gives_same_values_and_gradient():
    torch.manual_seed(1)
    logits = torch.randn(3, 5, 11, requires_grad=True)
    whole = token_entropy(logits, chunk_rows=1000)
    (g_whole,) = torch.autograd.grad(whole.sum(), logits)
    chunked = token_entropy(logits, chunk_rows=2)  # 15 rows in 8 chunks, the last one short
    (g_chunked,) = torch.autograd.grad(chunked.sum(), logits)
    torch.testing.assert_close(chunked, whole, atol=1e-6, rtol=0)
    torch.testing.assert_close(g_chunked, g_whole, atol=1e-6, rtol=0)


# The entropy rule asks whether the run still learns (issue 58: the quickstart's default run, learning, tripped it)


def _rows(mean: float, g: int = 4) -> torch.Tensor:
    """One group of g 0/1 rewards whose mean is `mean` (a multiple of 1/g)."""
    right = round(mean * g)
    return torch.tensor([[1.0] * right + [0.0] * (g - right)])


def test_entropy_below_the_floor_while_the_reward_rises_is_no_collapse():
    rising, flat = CollapseMonitor(entropy_steps=2), CollapseMonitor(entropy_steps=2)
    means = (0.0, 0.25, 0.25, 0.5, 0.5, 0.75, 0.75)  # the last 2 steps' mean 0.25 above the 2 before
    entropies = (0.9, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1)
    up = [rising.update(_rows(m), entropy=e)["alarm/entropy_collapse"] for m, e in zip(means, entropies)]
    level = [flat.update(_rows(0.5), entropy=e)["alarm/entropy_collapse"] for e in entropies]
    assert up == [0.0] * 7
    assert level == [0.0] * 3 + [1.0] * 4  # the rule as before: 3 > 2 low steps


def test_a_held_out_gain_since_the_entropy_fell_decides_over_the_reward():
    mon = CollapseMonitor(entropy_steps=2)
    mon.evaluated(0.30)  # before training
    flags = [mon.update(_rows(0.5), entropy=e)["alarm/entropy_collapse"] for e in (0.9, 0.1, 0.1, 0.1)]
    assert flags == [0.0, 0.0, 0.0, 1.0]  # evaluated before the fall only: the reward (flat) decides
    mon.evaluated(0.40)  # after step 4, the entropy low since step 2: +0.10
    assert mon.update(_rows(0.5), entropy=0.1)["alarm/entropy_collapse"] == 0.0
    mon.evaluated(0.38)  # after step 5: below the last score but +0.08 over step 0's, 2 or more steps back
    assert mon.update(_rows(0.5), entropy=0.1)["alarm/entropy_collapse"] == 0.0
    stalled = CollapseMonitor(entropy_steps=2)
    stalled.evaluated(0.30)
    for m, e in zip((0.0, 0.25, 0.5, 0.75), (0.9, 0.1, 0.1, 0.1)):
        stalled.update(_rows(m), entropy=e)
    stalled.evaluated(0.32)  # the reward climbs, the held-out score does not (+0.02): it decides
    assert stalled.update(_rows(1.0), entropy=0.1)["alarm/entropy_collapse"] == 1.0


def test_an_early_fall_waits_for_two_windows_of_rewards_before_it_is_called_a_collapse():
    mon = CollapseMonitor(entropy_steps=3)
    flags = [mon.update(_rows(0.5), entropy=e)["alarm/entropy_collapse"] for e in (0.9,) + (0.1,) * 6]
    assert flags == [0.0] * 5 + [1.0, 1.0]  # 4 > 3 low steps at step 5, two windows of rewards at step 6
    assert mon.alarms.still_learning() is False


def test_the_entropy_rules_history_survives_a_resume():
    straight = CollapseMonitor(entropy_steps=2)
    straight.evaluated(0.3)
    for m, e in zip((0.0, 0.25, 0.5), (0.9, 0.1, 0.1)):
        straight.update(_rows(m), entropy=e)
    resumed = CollapseMonitor(entropy_steps=2)
    resumed.load_state_dict(straight.state_dict())
    for m in (0.5, 0.5, 0.5):
        assert resumed.update(_rows(m), entropy=0.1) == straight.update(_rows(m), entropy=0.1)
    old = {k: v for k, v in straight.state_dict().items() if k not in ("low_since", "rewards", "held_out")}
    CollapseMonitor(entropy_steps=2).load_state_dict(old)  # a checkpoint from before: read, history empty


def test_the_entropy_alarm_still_fires_on_the_collapse_scenario():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from scenarios import make

    from grposcope.core.alarms import AlarmRules, replay

    for seed in range(10):
        s = make("entropy_collapse", seed)  # the entropy falls to 0.04 while the reward levels off at step 60
        n = s.steps
        rules = AlarmRules(stagnation_steps=alarm_window(n), entropy_steps=alarm_window(n))
        nan = [math.nan] * n
        on = replay(range(1, n + 1), nan, s.series["entropy"], nan, nan, rules, reward=s.series["reward"])
        assert on["entropy_collapse"] and on["entropy_collapse"][0] <= 120, (seed, on["entropy_collapse"][:3])
