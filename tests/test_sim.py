"""The collapse simulator: deterministic, learns in the right direction, runs the registries' samplers and
estimators, and its command writes what it says. Small instances only: the whole file runs in seconds."""

from __future__ import annotations

import json
import math
import sys

import pytest
import torch
from typer.testing import CliRunner

from grposcope.cli import app
from grposcope.core import advantages
from grposcope.core.advantages import PoolStats
from grposcope.sampling import SAMPLERS
from grposcope.sampling.stream import PromptStream
from grposcope.sim import Population, SimConfig, simulate
from grposcope.sim.model import completion_lengths

SMALL = {"prompts": 300, "batch_size": 24, "num_generations": 8, "steps": 4}


def small(**overrides) -> SimConfig:
    return SimConfig(**{**SMALL, **overrides})


# --- determinism ------------------------------------------------------------------------------------------


def test_same_seed_same_history_and_another_seed_differs():
    config = small(sampler="budgeted", estimator="avspo", steps=6)
    a, b = simulate(config), simulate(config)
    assert a.history == b.history and torch.equal(a.weights, b.weights)
    c = simulate(small(sampler="budgeted", estimator="avspo", steps=6, seed=1))
    assert c.history["accuracy"] != a.history["accuracy"]
    assert c.history["sampler/tokens_generated"] != a.history["sampler/tokens_generated"]  # other draws


def test_samplers_see_the_same_prompts_at_the_same_seed():
    fixed, dynamic = simulate(small(sampler="fixed", steps=1)), simulate(small(sampler="dynamic", steps=1))
    assert fixed.initial_accuracy == dynamic.initial_accuracy  # the same population


# --- the update ---------------------------------------------------------------------------------------------


def one_prompt(x: list[float]) -> Population:
    """One prompt with z = 0 and features x: at w = 0 its p is exactly 0.5."""
    features = torch.tensor([x])
    return Population(features, torch.zeros(1), features.clone(), torch.zeros(1))


def test_one_prompt_step_matches_the_gradient_worked_by_hand():
    # p = sigmoid(0) = 0.5, G = 2, lr = 0.1, x = (2, -1).
    # A mixed group (1, 0): grpo A = (y - 0.5) / (std_unb + 1e-4); std_unb(1, 0) = sqrt(0.5) = 0.707107,
    # so A = +-0.5 / 0.707207 = +-0.707007, and A * (y - p) = 0.707007 * 0.5 = 0.353504 for both samples.
    # Their mean is 0.353504: dw = 0.1 * 0.353504 * (2, -1) = (0.0707007, -0.0353504).
    # A collapsed group (0, 0) or (1, 1): A = 0, dw = 0.
    expected_mixed = torch.tensor([0.0707007, -0.0353504])
    seen = set()
    for seed in range(12):
        config = SimConfig(prompts=1, batch_size=1, num_generations=2, steps=1, lr=0.1, seed=seed)
        result = simulate(config, population=one_prompt([2.0, -1.0]))
        mixed = result.history["sampler/informative_frac"][0] == 1.0
        expected = expected_mixed if mixed else torch.zeros(2)
        assert torch.allclose(result.weights, expected, atol=1e-6), (seed, mixed, result.weights)
        seen.add(mixed)
    assert seen == {True, False}  # both cases were checked


def test_fixed_grpo_raises_accuracy_on_training_and_heldout_prompts():
    result = simulate(SimConfig(prompts=2000, batch_size=64, num_generations=8, steps=30, seed=3))
    h = result.history
    assert h["accuracy"][-1] > result.initial_accuracy + 0.03
    assert h["heldout_accuracy"][-1] > h["heldout_accuracy"][0] + 0.02  # transfer through the shared w
    assert h["samples_total"][-1] == 30 * 64 * 8


# --- the registries' samplers and estimators ----------------------------------------------------------------


@pytest.mark.parametrize("sampler", ["fixed", "dynamic", "reinforce_ada", "budgeted"])
@pytest.mark.parametrize("estimator", ["grpo", "avspo", "pool"])
def test_every_sampler_with_every_estimator_runs(sampler, estimator):
    result = simulate(small(sampler=sampler, estimator=estimator))
    h = result.history
    assert all(len(values) == SMALL["steps"] for values in h.values())
    assert all(math.isfinite(v) for values in h.values() for v in values)
    for frac, acr, post in zip(h["sampler/informative_frac"], h["collapse/acr"], h["collapse/acr_post"]):
        # acr is measured on the groups as drawn, informative_frac on those kept: a sampler keeps at least the
        # informative share of what it drew, and under `fixed` (which keeps what it draws) exactly that
        assert frac >= 1 - acr - 1e-6
        if sampler == "fixed":
            assert frac == pytest.approx(1 - acr)
        # no estimator zeroes an informative group (1e-6: acr_post is a float32 share, acr a float64 one)
        assert post <= acr + 1e-6
    assert h["samples_total"] == sorted(h["samples_total"])


def test_dynamic_with_enough_batches_trains_only_informative_groups():
    result = simulate(small(sampler="dynamic", sampler_options={"max_gen_batches": 30}, steps=5))
    h = result.history
    assert h["sampler/informative_frac"] == [1.0] * 5 and h["sampler/shortfall"] == [0.0] * 5
    assert h["collapse/acr_post"] == [0.0] * 5
    assert max(h["sampler/samples_generated"]) > SMALL["batch_size"] * SMALL["num_generations"]  # it redrew


def test_budgeted_stays_within_its_budget():
    result = simulate(small(sampler="budgeted", steps=5))
    assert max(result.history["sampler/samples_generated"]) <= SMALL["batch_size"] * SMALL["num_generations"]


def test_the_estimator_is_looked_up_in_the_registry_and_gets_reinforce_adas_pool(monkeypatch):
    calls = []

    class Spy(advantages.AdvantageEstimator):
        def __call__(self, rewards, pool=None, as_drawn=None):
            calls.append((rewards.shape, pool))
            return advantages.AdvantageOutput(advantages.pool_advantages(rewards, pool))

    registry = advantages.ESTIMATORS
    for table, value in ((registry._entries, Spy), (registry._docs, {}), (registry._ranges, {}), (registry._reads, ()),
                         (registry._hosts, ("grposcope",))):
        monkeypatch.setitem(table, "spy", value)  # registered for this test only
    simulate(small(sampler="reinforce_ada", estimator="spy", steps=3))
    assert len(calls) == 3  # once per step, as stateful estimators need
    for shape, pool in calls:
        assert isinstance(pool, PoolStats) and len(pool) == shape[0]


def test_options_reach_the_sampler():
    pos = simulate(small(sampler="reinforce_ada", sampler_options={"exit_rule": "pos"}, steps=3))
    balance = simulate(small(sampler="reinforce_ada", steps=3))
    # `pos` lets a prompt leave after one correct sample: fewer samples than `balance`
    assert sum(pos.history["sampler/samples_generated"]) < sum(balance.history["sampler/samples_generated"])


def test_bad_names_and_options_fail_with_what_is_known():
    with pytest.raises(ValueError, match=f"known: {', '.join(SAMPLERS.names())}"):
        SimConfig(sampler="dapo")
    with pytest.raises(ValueError, match=r"known: .*avspo.*grpo.*pool"):
        SimConfig(estimator="gpro")
    with pytest.raises(TypeError, match="exit_rul"):
        simulate(small(sampler="reinforce_ada", sampler_options={"exit_rul": "pos"}))
    with pytest.raises(ValueError, match="batch_size=400 is larger than prompts=300"):
        small(batch_size=400)


# --- the pieces of the model ------------------------------------------------------------------------------


def test_the_prompt_stream_is_a_fresh_permutation_every_epoch():
    order = PromptStream(range(5), seed=0)
    first, second = order.take(3) + order.take(2), order.take(5)
    assert sorted(first) == sorted(second) == [0, 1, 2, 3, 4] and first != second  # reshuffled
    third = order.take(7)  # crosses into a fourth epoch
    assert sorted(third[:5]) == [0, 1, 2, 3, 4] and order.epoch == 3 and order.position == 2


def test_lengths_are_shorter_for_correct_answers_and_cut_at_max():
    correct = torch.tensor([[True, False]])
    gen = torch.Generator().manual_seed(0)
    exact = completion_lengths(correct, 250.0, 450.0, 0.0, 1024, gen)
    assert exact.tolist() == [[250.0, 450.0]]
    assert completion_lengths(correct, 250.0, 4000.0, 0.0, 1024, gen).tolist() == [[250.0, 1024.0]]


# --- the command ------------------------------------------------------------------------------------------

CLI_SMALL = ["--prompts", "300", "--batch_size", "16", "--num_generations", "4", "--steps", "5"]


def test_simulate_command_writes_json_table_and_plot(tmp_path):
    out, plot = tmp_path / "sim.json", tmp_path / "sim.png"
    args = ["simulate", "--sampler", "fixed,budgeted", *CLI_SMALL, "--output", str(out)]
    try:
        import matplotlib  # noqa: F401

        args += ["--plot", str(plot)]
    except ImportError:
        plot = None
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "fixed" in result.output and "budgeted" in result.output and "acr_post" in result.output
    runs = json.loads(out.read_text())["runs"]
    assert [r["config"]["sampler"] for r in runs] == ["fixed", "budgeted"]
    assert all(len(r["history"]["accuracy"]) == 5 for r in runs)
    assert runs[0]["summary"]["initial_accuracy"] == runs[1]["summary"]["initial_accuracy"]  # same prompts
    if plot is not None:
        assert plot.read_bytes()[:4] == b"\x89PNG"


def test_simulate_command_routes_options_and_reports_errors(tmp_path):
    runner, out = CliRunner(), tmp_path / "sim.json"
    base = ["simulate", *CLI_SMALL, "--output", str(out)]
    # each option is a flag of its own, as grposcope train takes it, given to the listed samplers that take it
    ok = runner.invoke(app, base + ["--sampler", "fixed,reinforce_ada", "--exit_rule", "pos", "--round_size", "4"])
    assert ok.exit_code == 0, ok.output
    options = [r["config"]["sampler_options"] for r in json.loads(out.read_text())["runs"]]
    assert options == [{}, {"exit_rule": "pos", "round_size": 4}]
    again = runner.invoke(app, base)
    assert again.exit_code == 2 and "--overwrite" in again.output
    bad = runner.invoke(app, base + ["--overwrite", "--sampler", "fixd"])
    assert bad.exit_code == 2 and f"known: {', '.join(SAMPLERS.names())}" in bad.output
    typo = runner.invoke(app, base + ["--overwrite", "--exit_rul", "pos"])
    assert typo.exit_code == 2 and "No such option: --exit_rul (Possible options: --exit_rule)" in typo.output
    unread = runner.invoke(app, base + ["--overwrite", "--exit_rule", "pos"])
    assert unread.exit_code == 2 and "--exit_rule: none of the simulation's samplers and estimators (fixed, " \
        "grpo) takes it; it is read by sampler reinforce_ada" in unread.output.replace("\n", "")


def test_plot_without_matplotlib_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    args = ["simulate", *CLI_SMALL, "--output", str(tmp_path / "s.json"), "--plot", str(tmp_path / "s.png")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "pip install 'grposcope[report]'" in result.output
    assert not (tmp_path / "s.json").exists()  # it failed before running anything


def test_a_run_of_work_beyond_the_bound_is_refused_in_one_line_naming_the_option(tmp_path):
    # --steps 10**12 ran for ever (issue 40, point 4); MAX_STEPS is the bound, named with an example
    from grposcope.sim.config import MAX_STEPS

    args = ["simulate", "--steps", str(10**12), "--output", str(tmp_path / "s.json")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    line = result.output.replace("\n", "")
    assert "error:" in line and "--steps" in line and f"{MAX_STEPS:,}" in line and "e.g. --steps 2000" in line
    assert not (tmp_path / "s.json").exists()
    with pytest.raises(ValueError, match="steps"):
        SimConfig(steps=MAX_STEPS + 1)
    assert SimConfig(steps=MAX_STEPS).steps == MAX_STEPS  # the bound itself is allowed


def _alarm_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "grposcope alarm" in r.getMessage()]


def test_an_alarm_that_flickers_is_printed_when_it_fires_and_when_it_clears(caplog):
    # no_signal fires after 5 steps without signal and goes off at the next step with one: a run near 100%
    # accuracy flipped it every few steps and printed 2,971 lines (issue 40, point 4). Now: one line when it
    # fires, none while it flickers, one when it has stayed off for quiet_steps steps (here 50, the longest
    # window), and one when it fires again after that.
    from grposcope.core.alarms import AlarmRules, Alarms

    alarms = Alarms(AlarmRules(no_signal_steps=5))
    pattern = ([True] * 5 + [False]) * 20 + [False] * 60 + [True] * 5  # 120 flickering, 60 quiet, fires again
    with caplog.at_level("WARNING", logger="grposcope"):
        states = [alarms.update(step, None, no_signal=n)["no_signal"] for step, n in enumerate(pattern, 1)]
    assert sum(a and not b for a, b in zip(states[1:], states)) == 21  # the state itself still flickers
    lines = _alarm_lines(caplog)
    assert len(lines) == 3, lines
    assert lines[0].startswith("grposcope alarm at step 5: no_signal.")
    # last on at step 119 (the 20th block's 5th step); off from 120; quiet for 50 steps at step 169
    assert lines[1].startswith("grposcope alarm cleared at step 169: no_signal, off since step 120")
    assert "on at 20 of the 115 steps from step 5 to 119" in lines[1]  # the 5th step of each block
    assert lines[2].startswith("grposcope alarm at step 185: no_signal.")


def test_alarm_announcements_survive_a_resume(caplog):
    from grposcope.core.alarms import AlarmRules, Alarms

    first = Alarms(AlarmRules(no_signal_steps=2))
    for step, n in enumerate([True, True, False], 1):
        first.update(step, None, no_signal=n)
    resumed = Alarms(AlarmRules(no_signal_steps=2))
    resumed.load_state_dict(first.state_dict())
    caplog.clear()  # the first run's line
    with caplog.at_level("WARNING", logger="grposcope"):
        resumed.update(4, None, no_signal=True)
        resumed.update(5, None, no_signal=True)  # on again, still announced: no new line
    assert _alarm_lines(caplog) == []


def test_simulate_prints_a_flickering_alarm_once(caplog):
    # a small run that reaches ~100% accuracy, so that no_signal turns on and off every few steps
    config = SimConfig(prompts=64, batch_size=8, num_generations=4, lr=0.5, steps=450, seed=0)
    with caplog.at_level("WARNING", logger="grposcope"):
        result = simulate(config)
    onsets = sum(1 for a, b in zip(result.history["alarm/no_signal"][1:], result.history["alarm/no_signal"])
                 if a and not b)
    assert onsets > 10  # it flickers (before the change: one line each)
    lines = [line for line in _alarm_lines(caplog) if "no_signal" in line]
    assert 1 <= len(lines) <= 3, lines


def test_another_estimators_option_is_left_unread_with_a_warning_as_in_every_host():
    """The one policy (grposcope.components.options): the simulator, like the trainers, warns about an option
    another entry declares, naming what reads it, and runs; a key no entry declares still fails."""
    from grposcope.errors import InputTypeError
    from grposcope.sim import SimConfig, simulate

    config = SimConfig(estimator="grpo", estimator_options={"virtual_sample_alpha": 0.3}, steps=2, prompts=32,
                       batch_size=8)
    with pytest.warns(UserWarning, match=r"virtual_sample_alpha=0.3 is not used: advantage_estimator='grpo' does "
                                         r"not read it \(read by advantage_estimator avspo\)"):
        assert len(simulate(config).history["step"]) == 2
    with pytest.raises(InputTypeError, match="virtual_sample_alpah"):
        simulate(SimConfig(estimator="grpo", estimator_options={"virtual_sample_alpah": 0.3}, steps=2, prompts=32,
                           batch_size=8))
