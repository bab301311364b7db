"""The failures people have, named (issue 65's detectors): each on real runs of the corpus where it fires, on real
runs where it must stay quiet (tests/fixtures/real_runs/, tuning half), on hand-made runs at the edges of its rule,
and judgements from 3 to 5 evaluations. The engine fixtures are checked in tests/test_engines.py."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from grposcope.diagnose import Run, diagnose
from grposcope.runs import catalogue as c
from grposcope.runs import load_runs

CORPUS = Path(__file__).parent / "fixtures" / "real_runs"
WARNED = ("warning", "critical")


def real(name: str, detector: str):
    """The findings of `detector` on the corpus run `name` (every run its files hold)."""
    run = CORPUS / name
    files = sorted(p for p in run.rglob("*") if p.is_file() and p.name not in ("CALLOUT.md", "SOURCE.md"))
    given = files[0] if len(files) == 1 and files[0].parent == run else run
    return [f for one in load_runs(given, name) for f in diagnose(one, only=[detector]).findings]


def warned(findings) -> list:
    return [f for f in findings if f.severity in WARNED]


def make_run(n: int, **series) -> Run:
    return Run("run", Path("."), "custom", list(range(1, n + 1)),
               {k: [float(v) for v in vals] for k, vals in series.items()})


def only(run: Run, detector: str):
    return diagnose(run, only=[detector]).findings


NAN = math.nan


# no_learning ----------------------------------------------------------------------------------------------------
def test_no_learning_names_a_flat_reward_on_a_real_run():
    (f,) = warned(real("cas-wordle-4090", "no_learning"))  # reward flat at about -0.25 for 300 steps
    assert f.title.startswith("the reward has not improved in 299 steps")
    assert any("scatter" in line for line in f.evidence)


def test_no_learning_is_quiet_on_a_real_run_that_learns():
    assert not warned(real("v-retool-opd-3b-tokkl002", "no_learning"))  # reward and held-out score rise


def test_no_learning_needs_a_run_long_enough_and_sees_a_slow_rise():
    rng = np.random.default_rng(1)
    flat = make_run(60, **{c.REWARD: 0.3 + rng.normal(0, 0.05, 60)})
    assert warned(only(flat, "no_learning"))
    short = make_run(8, **{c.REWARD: 0.3 + rng.normal(0, 0.05, 8)})
    assert "no_learning" in diagnose(short).unchecked  # 8 points: too short to say it learns nothing
    rising = make_run(60, **{c.REWARD: 0.3 + 0.004 * np.arange(60) + rng.normal(0, 0.05, 60)})
    assert not only(rising, "no_learning")


def test_no_learning_stays_quiet_when_the_held_out_score_rose():
    rng = np.random.default_rng(2)
    ev = np.full(60, NAN)
    ev[[9, 29, 59]] = [0.30, 0.38, 0.45]
    run = make_run(60, **{c.REWARD: 0.3 + rng.normal(0, 0.05, 60), c.EVAL: ev})
    assert not only(run, "no_learning")


# pinned_reward --------------------------------------------------------------------------------------------------
def test_pinned_reward_names_a_reward_stuck_on_one_value_on_a_real_run():
    (f,) = warned(real("t-tsc-grpo-qwen05b-console", "pinned_reward"))
    assert f.figures["value"] == 0.5 and f.figures["points"] >= 8


def test_pinned_reward_is_quiet_on_a_flat_but_moving_real_reward():
    assert not warned(real("cas-wordle-4090", "pinned_reward"))


def test_pinned_reward_at_the_end_is_critical_and_a_binary_series_needs_half():
    reward = np.r_[np.linspace(-1, 0, 40), np.full(80, -5.0)]  # exactly -5.0 for the last 80 of 120 steps
    (f,) = only(make_run(120, **{c.REWARD: reward}), "pinned_reward")
    assert f.severity == "critical" and f.figures["points"] == 80 and f.step == 41
    coin = np.random.default_rng(3).integers(0, 2, 200).astype(float)  # one episode's 0/1 reward: streaks by chance
    assert not only(make_run(200, **{c.REWARD: coin}), "pinned_reward")


# loss_explosion -------------------------------------------------------------------------------------------------
def test_loss_explosion_names_a_jump_of_orders_of_magnitude_on_a_real_run():
    (f,) = warned(real("minimind-grpo-r1", "loss_explosion"))  # 0.0005 -> 1.78 at step 7, no grad norm logged
    assert f.figures["largest"] >= 100


@pytest.mark.parametrize("name", ["chaos-economy-grpo", "csd-gate1-console"])
def test_loss_explosion_is_quiet_on_a_grpo_loss_that_moves_around_zero(name):
    assert not warned(real(name, "loss_explosion"))  # -0.03 after 1e-4: 300x, and nothing


def test_a_loss_of_exactly_zero_warns_unless_the_log_rounds_it():
    # 19 of 20 rows exactly 0.0, the other 0.0121, no gradient norm: a 4-decimal log whose loss otherwise sits far
    # above its last digit, so its zeros are a loss that vanished
    (f,) = warned(real("r3-verifier-reinforce-warmstart-regress", "loss_explosion"))
    assert f.figures["share"] == pytest.approx(19 / 20)
    assert not real("dapo-vl3b-terminal-md", "loss_explosion")  # a gradient norm: no_signal_steps reads the zeros
    assert warned(real("dapo-vl3b-terminal-md", "no_signal_steps"))
    assert not real("xling-openrs-console", "loss_explosion")  # every value 0: never computed or rounded, unknown
    loss = np.r_[np.full(19, 0.0), [0.0123456]]
    assert warned(only(make_run(20, **{c.LOSS: loss}), "loss_explosion"))
    rounded = np.r_[np.full(12, 0.0), [0.0012, -0.0003, 0.0021, 0.0007, -0.0011, 0.0002, 0.0005, -0.0001]]
    assert not only(make_run(20, **{c.LOSS: rounded}), "loss_explosion")  # 4 decimals: a 0 is a small loss


def test_loss_explosion_sees_1e8_without_a_gradient_norm():
    loss = np.r_[0.15 + 0.05 * np.sin(np.arange(40)), [1.3e8], 0.15 + np.zeros(9)]
    (f,) = only(make_run(50, **{c.LOSS: loss}), "loss_explosion")
    assert f.severity == "critical" and f.step == 41


# held_out_regression --------------------------------------------------------------------------------------------
def test_held_out_regression_on_a_real_run_and_quiet_on_one_that_rises():
    (f,) = warned(real("v-retool-grpo-3b-inreward-kl005-collapse", "held_out_regression"))
    assert f.severity == "critical"
    assert not warned(real("v-retool-opd-3b-tokkl002", "held_out_regression"))


def test_held_out_regression_from_three_evaluations_says_no_trend_is_tested():
    ev = np.full(80, NAN)
    ev[[0, 24, 74]] = [0.992, 0.725, 0.575]  # the training reward falls too: not reward_hacking's
    run = make_run(80, **{c.EVAL: ev, c.REWARD: np.linspace(0.9, 0.6, 80)})
    (f,) = only(run, "held_out_regression")
    assert f.severity == "critical" and any("no trend is tested" in line for line in f.evidence)
    assert not only(run, "reward_hacking")
    ev2 = np.full(80, NAN)
    ev2[[0, 24, 74]] = [0.5, 0.8, 0.6]  # one evaluation after the best: not a fall yet
    assert not only(make_run(80, **{c.EVAL: ev2}), "held_out_regression")


# reward_hacking from few evaluations ----------------------------------------------------------------------------
def test_reward_hacking_from_four_evaluations():
    rng = np.random.default_rng(5)
    ev = np.full(360, NAN)
    ev[[0, 100, 200, 300]] = [0.21, 0.39, 0.37, 0.30]  # the training reward 0.29 -> 1.02 meanwhile
    reward = np.clip(0.29 + 0.73 * np.arange(360) / 359, 0, None) + rng.normal(0, 0.03, 360)
    (f,) = only(make_run(360, **{c.EVAL: ev, c.REWARD: reward}), "reward_hacking")
    assert f.severity in WARNED and any("no trend of the held-out score is tested" in line for line in f.evidence)
    ev[[0, 100, 200, 300]] = [0.21, 0.39, 0.45, 0.52]  # the held-out score follows: quiet
    assert not only(make_run(360, **{c.EVAL: ev, c.REWARD: reward}), "reward_hacking")


# negative_kl ----------------------------------------------------------------------------------------------------
def test_negative_kl_on_real_runs():
    (f,) = real("v-retool-opd-3b-tokkl002", "negative_kl")
    assert f.severity == "critical" and f.figures["share"] == 1.0
    assert not warned(real("unlearning-grpo-run3", "negative_kl"))  # 11% of steps, all small: k1's noise, info
    assert not real("chaos-economy-grpo", "negative_kl")  # TRL's k3: never below 0


# clip_near_one --------------------------------------------------------------------------------------------------
def test_clip_near_one_is_critical_when_it_recurs_and_quiet_on_a_real_clip_fraction():
    clip = np.r_[np.full(25, 0.02), np.full(75, 1.0)]  # 1.0 in 75 of 100 updates
    (f,) = only(make_run(100, **{c.CLIP: clip}), "clip_near_one")
    assert f.severity == "critical" and f.figures["steps"] == 75
    assert not real("t-tsc-grpo-qwen05b-console", "clip_near_one")


# length_collapse ------------------------------------------------------------------------------------------------
def test_length_collapse_on_a_real_run_and_quiet_where_length_holds():
    (f,) = warned(real("v-retool-grpo-3b-inreward-kl005-collapse", "length_collapse"))  # 968 -> 9 tokens
    assert f.severity == "critical"
    assert not real("chaos-economy-grpo", "length_collapse")


def test_shorter_answers_with_a_rising_score_are_info():
    n = 100
    rng = np.random.default_rng(6)
    run = make_run(n, **{c.LENGTH: np.linspace(800, 250, n) + rng.normal(0, 10, n),
                         c.REWARD: np.linspace(0.3, 0.7, n) + rng.normal(0, 0.02, n)})
    (f,) = only(run, "length_collapse")
    assert f.severity == "info"


# facts before estimates -----------------------------------------------------------------------------------------
def test_no_collapse_estimate_where_the_std_contradicts_a_binary_reward():
    n = 40
    reward = np.linspace(0.2, 0.6, n)
    run = make_run(n, **{c.REWARD: reward, c.REWARD_STD: np.full(n, 0.1414)})  # constant while the mean moves
    d = diagnose(run, only=["advantage_collapse"])
    assert not d.findings and "no estimate from the mean reward" in d.unchecked["advantage_collapse"]
    wide = make_run(n, **{c.REWARD: np.full(n, 0.05), c.REWARD_STD: np.full(n, 0.9)})  # 0/1 at 0.05: std <= 0.22
    d = diagnose(wide, only=["advantage_collapse"])
    assert not d.findings and "above what a 0/1 reward allows" in d.unchecked["advantage_collapse"]
    binary = make_run(n, **{c.REWARD: np.full(n, 0.05), c.REWARD_STD: np.full(n, 0.2179)})
    (f,) = diagnose(binary, only=["advantage_collapse"]).findings
    assert "estimated from the mean reward" in f.evidence[0]


def test_logged_reward_min_and_max_off_zero_and_one_stop_the_estimate():
    n = 40
    run = make_run(n, **{c.REWARD: np.full(n, 0.4), c.REWARD_MIN: np.full(n, 0.1), c.REWARD_MAX: np.full(n, 0.7)})
    d = diagnose(run, only=["advantage_collapse"])
    assert not d.findings and "neither 0 nor 1" in d.unchecked["advantage_collapse"]


def test_every_detector_has_its_row_in_the_docs():
    from grposcope.diagnose import DETECTORS

    text = (Path(__file__).parents[1] / "docs" / "diagnose.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip().strip("`") for line in text.splitlines() if line.startswith("| `")}
    assert set(DETECTORS.names()) <= rows, sorted(set(DETECTORS.names()) - rows)


def test_a_reward_list_of_one_group_a_step_is_read_not_estimated():
    # each row holds the step's 2 rewards (G = 2): the share of collapsed groups is the share of steps whose 2
    # rewards are equal (163 of 201), not an estimate from the mean with an assumed G = 8
    (f,) = real("r3-bitnet-grpo-g2-skipped", "advantage_collapse")
    said = " ".join(f.evidence)
    assert "estimated" not in said and "assumed" not in said and "163 step(s)" in said
    run = load_runs(CORPUS / "r3-bitnet-grpo-g2-skipped")[0]
    assert run.config["completions_per_step"] == 2


def test_a_single_step_kl_jump_of_orders_of_magnitude_is_named_and_a_small_kl_jump_is_not():
    (f,) = warned(real("r3-monarch-grpo-qwen15b-gsm8k", "kl_drift"))  # 36.3 at step 68 on a KL of about 0.1
    assert f.figures["largest"] >= 100 and "jumps" in f.title
    assert not warned(real("r3-deepretrieval-grpo-0p8b-30step", "kl_drift"))  # 500x, but of a KL of 1e-5: 0.0066
    assert not warned(real("csd-gate1-console", "kl_drift"))  # six jumps of up to 11x: under 100x


def test_a_held_out_score_repeated_over_a_short_run_is_info_and_a_two_level_reward_is_not_pinned():
    ev = np.full(20, NAN)
    ev[[4, 9, 14, 19]] = 0.53125  # 17 of 32 greedy answers right at each of 4 evaluations of a 20-step run
    (f,) = only(make_run(20, **{c.EVAL: ev}), "pinned_reward")
    assert f.severity == "info"
    rng = np.random.default_rng(7)
    hard = np.where(rng.random(40) < 0.55, 0.0, rng.choice([0.5, 0.4375, 0.5625, 0.8125], 40))  # 0 on half the steps
    assert not warned(only(make_run(40, **{c.REWARD: hard}), "pinned_reward"))
    ceiling = np.r_[np.linspace(0.7, 0.99, 5), np.where(rng.random(45) < 0.6, 1.0, 0.99)]  # 1.0 or 0.99
    (g,) = warned(only(make_run(50, **{c.REWARD: ceiling}), "pinned_reward"))
    assert g.figures["value"] == 1.0


def test_clip_fractions_under_their_authors_keys_are_read():
    # TRL's classic PPOTrainer (ppo/policy/clipfrac), a percentage (clip_pct); PPO's old-vs-new KL stays no KL
    from grposcope.runs.meaning import infer

    assert infer("ppo/policy/clipfrac", [0.02, 1.0, 1.0]).metric == c.CLIP
    pct = infer("clip_pct", [2.0, 100.0, 100.0])
    assert pct.metric == c.CLIP and pct.divide_by == 100.0
    assert infer("ppo_kl", [0.01, 0.02]) is None and infer("ppo/policy/approxkl", [0.01]) is None
    total, policy = infer("ppo/loss/total", [1.0]), infer("ppo/loss/policy", [1.0])
    assert total.metric == policy.metric == c.LOSS and policy.rank < total.rank

