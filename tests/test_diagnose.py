"""grposcope diagnose's detectors on hand-made runs: each fires on the shape it names, at the severity and step
its thresholds (docs/diagnose.md) give, and stays silent where its condition says the shape is healthy."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from grposcope.core.alarms import AlarmRules, replay
from grposcope.diagnose import Options, Run, diagnose

STEPS = 200


def make_run(n: int = STEPS, source: str = "trl", **series) -> Run:
    """A run of n steps (1..n) with the given series (arrays of length n, NaN where not logged)."""
    return Run("run", Path("."), source, list(range(1, n + 1)), {k: [float(v) for v in vals] for k, vals in
                                                                    series.items()})


def found(run: Run, detector: str, options: Options = Options()):
    return [f for f in diagnose(run, options, only=[detector]).findings]


def noise(seed: int, n: int = STEPS, scale: float = 0.01) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, scale, n)


t = np.arange(1, STEPS + 1)


# advantage_collapse ---------------------------------------------------------------------------------------------
def test_collapse_all_wrong_is_critical_with_the_too_hard_fix():
    acr = np.clip(0.8 + noise(0, scale=0.03), 0, 1)
    run = make_run(**{"collapse/acr": acr, "collapse/acr_all_wrong": acr, "collapse/acr_all_correct": 0 * acr})
    (f,) = found(run, "advantage_collapse")
    assert f.severity == "critical" and "all-wrong" in f.title
    assert "use_avspo=True" in f.fix.grposcope and "filter_groups" in f.fix.verl
    assert f.figures["all_wrong_share"] == 1.0
    # the stagnation rule (ACR > 0.35 for 20 steps in a row: a tenth of 200) first holds at step 20
    assert f.step == 20


def test_collapse_all_correct_gets_the_too_easy_fix():
    acr = np.full(STEPS, 0.6)
    run = make_run(**{"collapse/acr": acr, "collapse/acr_all_correct": acr, "collapse/acr_all_wrong": 0 * acr})
    (f,) = found(run, "advantage_collapse")
    assert f.severity == "warning" and "all-correct" in f.title and "sampler='dynamic'" in f.fix.grposcope


def test_collapse_handled_by_avspo_is_only_info():
    run = make_run(**{"collapse/acr": np.full(STEPS, 0.8), "collapse/acr_post": np.full(STEPS, 0.1)})
    (f,) = found(run, "advantage_collapse")
    assert f.severity == "info" and "mitigated" in f.title


def test_collapse_estimated_from_a_bounded_reward():
    # no frac_reward_zero_std: p = 0.05, G = 8 -> 0.95^8 + 0.05^8 = 0.6634 (a lower bound): a warning, all-wrong
    run = make_run(**{"reward/mean": np.full(STEPS, 0.05)})
    (f,) = found(run, "advantage_collapse", Options(num_generations=8))
    assert f.severity == "warning" and "all-wrong" in f.title
    assert f.figures["acr_recent"] == pytest.approx(0.95**8 + 0.05**8)


def test_collapse_below_the_info_threshold_is_silent():
    assert found(make_run(**{"collapse/acr": np.full(STEPS, 0.2)}), "advantage_collapse") == []


# no_signal_steps ------------------------------------------------------------------------------------------------
def test_no_signal_steps_names_the_steps_with_a_zero_gradient_norm():
    grad = [0.0, 1.4, 0.0, 0.0, 0.0, 1.2, 0.0, 0.0]  # the stock TRL run's 8 steps
    (f,) = found(make_run(8, grad_norm=grad, learning_rate=[1e-6] * 8), "no_signal_steps")
    assert f.severity == "critical" and f.step == 1  # 6 of 8 = 75% >= 25%
    assert "steps 1, 3-5, 7-8" in f.evidence[0] and f.figures["steps"] == 6
    assert any("AdamW" in e for e in f.evidence)


def test_one_zero_gradient_in_a_long_run_is_info_and_none_is_silent():
    grad = np.exp(noise(1, scale=0.3))
    assert found(make_run(grad_norm=grad), "no_signal_steps") == []
    grad[50] = 0.0
    (f,) = found(make_run(grad_norm=grad), "no_signal_steps")
    assert f.severity == "info" and f.step == 51


# entropy_collapse -----------------------------------------------------------------------------------------------
def test_entropy_collapse_with_a_flat_reward_is_critical():
    entropy = 1.2 * np.exp(-t / 30) + 0.03 + np.abs(noise(2, scale=0.01))
    reward = np.minimum(0.5, 0.3 + t / 100) + noise(3, scale=0.02)  # flat from step 20
    (f,) = found(make_run(**{"entropy/mean": entropy, "reward/mean": reward}), "entropy_collapse")
    assert f.severity == "critical" and f.figures["end"] < 0.1


def test_entropy_falling_while_the_reward_climbs_is_convergence():
    entropy = 0.8 * np.exp(-t / 30) + 0.3  # 1.1 -> 0.3 nats: below the floor, but not an order of magnitude down
    reward = 0.1 + 0.8 * t / STEPS + noise(4, scale=0.02)
    fs = found(make_run(**{"entropy/mean": entropy, "reward/mean": reward}), "entropy_collapse")
    assert [f.severity for f in fs] == ["info"] and "convergence" in fs[0].title
    deep = 1.2 * np.exp(-t / 30) + 0.03  # to 3% of its start: nearly deterministic, the climb notwithstanding
    fs = found(make_run(**{"entropy/mean": deep, "reward/mean": reward}), "entropy_collapse")
    assert [f.severity for f in fs] == ["warning"] and "order of magnitude" in fs[0].title


def test_no_entropy_warning_where_the_runs_own_alarm_saw_the_score_rise():
    # the quickstart's shape (20 steps, evaluated before training and at steps 10 and 20): the entropy below the
    # floor from step 6, the held-out score +0.27 by step 10 and +0.02 after it. The alarm (window 5) could fire
    # from step 11, when the step-10 evaluation shows the gain: it stays off; the finding, which once warned "the
    # reward stopped improving", says info
    n = 20
    entropy = np.r_[np.full(5, 0.9), np.full(n - 5, 0.1)]
    reward = np.full(n, 0.5)
    run = make_run(n, **{"entropy/mean": entropy, "reward/mean": reward,
                         "eval/accuracy": [math.nan] * 9 + [0.60] + [math.nan] * 9 + [0.62]})
    run.eval_before = 0.33
    (f,) = found(run, "entropy_collapse")
    assert f.severity == "info" and any("alarm, replayed on this log, never fired" in e for e in f.evidence)
    stalled = make_run(n, **{"entropy/mean": entropy, "reward/mean": reward,
                             "eval/accuracy": [math.nan] * 9 + [0.34] + [math.nan] * 9 + [0.35]})
    stalled.eval_before = 0.33  # no gain by step 10: the alarm fires from step 11, and the finding warns
    assert [f.severity for f in found(stalled, "entropy_collapse")] == ["warning"]


def test_entropy_that_stays_up_is_silent():
    entropy = 0.9 + noise(5, scale=0.05)
    assert found(make_run(**{"entropy/mean": entropy, "reward/mean": np.full(STEPS, 0.4)}), "entropy_collapse") == []


# kl_drift -------------------------------------------------------------------------------------------------------
def test_kl_past_the_bound_and_rising_is_critical():
    kl = 0.01 * np.exp(t / 40)  # 0.01 -> 1.48: passes 0.5 at step 157
    (f,) = found(make_run(**{"kl/mean": kl}), "kl_drift")
    assert f.severity == "critical" and f.step == 157


def test_small_steady_kl_is_silent():
    kl = 0.02 * np.sqrt(t / STEPS) + np.abs(noise(6, scale=0.002))
    assert found(make_run(**{"kl/mean": kl}), "kl_drift") == []


# length_growth and truncation -----------------------------------------------------------------------------------
def test_length_growth_without_a_better_score_is_flagged():
    length = 150 + 1.5 * t + noise(7, scale=5)  # 150 -> 450: about 2.6x
    evals = np.full(STEPS, np.nan)
    evals[::10] = 0.40 + noise(8, n=20, scale=0.01)
    (f,) = found(make_run(**{"completion/mean_length": length, "eval/accuracy": evals}), "length_growth")
    assert f.severity == "warning" and f.figures["growth"] > 2


def test_length_growth_with_the_held_out_score_is_info():
    length = 150 + 1.5 * t
    evals = np.full(STEPS, np.nan)
    evals[::10] = np.linspace(0.2, 0.6, 20)
    (f,) = found(make_run(**{"completion/mean_length": length, "eval/accuracy": evals}), "length_growth")
    assert f.severity == "info"


def test_truncation_of_a_third_is_critical_and_none_is_silent():
    (f,) = found(make_run(**{"completion/truncated_frac": np.full(STEPS, 0.35)}), "truncation")
    assert f.severity == "critical" and "35%" in f.title
    assert found(make_run(**{"completion/truncated_frac": np.zeros(STEPS)}), "truncation") == []


# clip_saturation ------------------------------------------------------------------------------------------------
def test_clip_saturation_on_the_upper_side_suggests_clip_higher():
    run = make_run(**{"clip/low_frac": np.full(STEPS, 0.02), "clip/high_frac": np.full(STEPS, 0.18)})
    (f,) = found(run, "clip_saturation")
    assert f.severity == "warning" and any("upper bound" in e for e in f.evidence)
    assert found(make_run(**{"clip/frac": np.full(STEPS, 0.01)}), "clip_saturation") == []


# gradient_pathology ---------------------------------------------------------------------------------------------
def test_gradient_spikes_and_non_finite_norms():
    grad = np.exp(noise(9, scale=0.2))
    assert found(make_run(grad_norm=grad), "gradient_pathology") == []
    grad[[60, 110, 160]] *= 30
    (f,) = found(make_run(grad_norm=grad), "gradient_pathology")
    assert f.severity == "warning" and f.figures["spikes"] == 3 and f.step == 61
    grad[180] = math.inf
    fs = found(make_run(grad_norm=grad), "gradient_pathology")
    assert fs[0].severity == "critical" and fs[0].step == 181


# reward_hacking -------------------------------------------------------------------------------------------------
def test_reward_up_and_held_out_down_is_hacking():
    reward = 0.2 + 0.7 * t / STEPS + noise(10, scale=0.02)
    evals = np.full(STEPS, np.nan)
    evals[9::10] = [0.30, 0.35, 0.40, 0.44, 0.46, 0.47, 0.46, 0.43, 0.40, 0.37, 0.34, 0.31, 0.29, 0.27, 0.25,
                    0.24, 0.22, 0.21, 0.20, 0.19]
    (f,) = found(make_run(**{"reward/mean": reward, "eval/accuracy": evals}), "reward_hacking")
    assert f.severity == "critical" and f.figures["peak_step"] == 60


def test_reward_and_held_out_rising_together_is_silent():
    reward = 0.2 + 0.7 * t / STEPS
    evals = np.full(STEPS, np.nan)
    evals[9::10] = np.linspace(0.3, 0.6, 20) + noise(11, n=20, scale=0.01)
    assert found(make_run(**{"reward/mean": reward, "eval/accuracy": evals}), "reward_hacking") == []


# reward_composition ---------------------------------------------------------------------------------------------
def test_a_constant_zero_accuracy_beside_a_varying_format_reward_is_critical():
    run = make_run(**{"reward/format/mean": 0.5 + noise(12, scale=0.05), "reward/format/std": np.full(STEPS, 0.4),
                      "reward/accuracy/mean": np.zeros(STEPS), "reward/accuracy/std": np.zeros(STEPS)})
    (f,) = found(run, "reward_composition")
    assert f.severity == "critical" and "format" in f.title and "accuracy" in f.title


def test_two_varying_reward_functions_are_silent_and_one_is_not_checked():
    run = make_run(**{"reward/a/mean": 0.3 + 0.002 * t, "reward/a/std": np.full(STEPS, 0.4),
                      "reward/b/mean": 0.2 + 0.001 * t, "reward/b/std": np.full(STEPS, 0.3)})
    assert found(run, "reward_composition") == []
    d = diagnose(make_run(**{"reward/a/mean": np.full(STEPS, 0.3)}), only=["reward_composition"])
    assert "two or more reward functions" in d.unchecked["reward_composition"]


# plateau --------------------------------------------------------------------------------------------------------
def test_a_run_that_stopped_gaining_for_its_second_half_is_a_plateau():
    reward = np.minimum(0.2 + 0.5 * t / 60, 0.7) + noise(13, scale=0.01)  # reaches its top by step 60
    (f,) = found(make_run(**{"reward/mean": reward}), "plateau")
    assert f.severity == "warning" and 50 <= f.step <= 60


def test_a_steady_climb_and_a_run_that_never_learnt_are_not_plateaus():
    assert found(make_run(**{"reward/mean": 0.1 + 0.6 * t / STEPS + noise(14, scale=0.01)}), "plateau") == []
    assert found(make_run(**{"reward/mean": 0.05 + noise(15, scale=0.01)}), "plateau") == []


# one mechanism ---------------------------------------------------------------------------------------------------
def test_the_monitor_and_a_replay_of_its_log_raise_the_same_alarms():
    """The trainer's alarms (CollapseMonitor, live) and diagnose's (a replay of the logged series) are one rule."""
    import torch

    from grposcope.core.diagnostics import CollapseMonitor

    rules = AlarmRules(stagnation_steps=5, entropy_steps=5, kl_bound=0.3, no_signal_steps=3)
    monitor = CollapseMonitor(stagnation_steps=5, entropy_steps=5, kl_bound=0.3, no_signal_steps=3)
    gen = torch.Generator().manual_seed(0)
    steps, acr, entropy, kl, empty, reward, live = [], [], [], [], [], [], {}
    for step in range(1, 61):
        p = 0.02 if 20 <= step < 40 else 0.5  # a stretch where nearly every group is all-wrong
        rewards = (torch.rand(4, 4, generator=gen) < p).float()
        advantages = rewards - rewards.mean(dim=1, keepdim=True)
        h, k = 1.0 if step < 30 else 0.2, 0.01 * step
        metrics = monitor.update(rewards, advantages, entropy=h, kl=k)
        steps.append(step)
        acr.append(metrics["collapse/acr"])
        entropy.append(h)
        kl.append(k)
        empty.append(float(metrics["collapse/acr_post"] == 1.0))
        reward.append(float(rewards.mean()))  # the entropy rule's "still learning" reads it
        for name in ("stagnation", "entropy_collapse", "kl_drift", "no_signal"):
            if metrics[f"alarm/{name}"]:
                live.setdefault(name, []).append(step)
    replayed = replay(steps, acr, entropy, kl, empty, rules, reward=reward)
    assert {k: v for k, v in replayed.items() if v} == live
    assert set(live) >= {"stagnation", "entropy_collapse", "kl_drift"}


# the command ------------------------------------------------------------------------------------------------------
def _write_state(folder: Path, grad: list[float], name: str = "trainer_state.json") -> Path:
    # the reward moves (0.0 on every step is pinned_reward's); the loss is rounded as transformers logs it
    history = [{"step": i + 1, "loss": 0.0, "reward": round(0.1 + 0.013 * (i % 3), 4), "grad_norm": g,
                "frac_reward_zero_std": 1.0 if g == 0 else 0.1, "learning_rate": 1e-6} for i, g in enumerate(grad)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps({"log_history": history, "max_steps": len(grad)}))
    return folder


def test_cli_json_and_fail_on(tmp_path):
    from typer.testing import CliRunner

    from grposcope.cli import app

    run = _write_state(tmp_path / "[bold]run<img src=x>", [0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0])
    out = tmp_path / "findings.json"
    result = CliRunner().invoke(app, ["diagnose", str(run), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "[bold]run<img src=x>" in result.output  # the name shown as written, not as markup
    document = json.loads(out.read_text())
    assert document["schema"] == "grposcope.findings/1" and len(document["runs"]) == 1
    findings = document["runs"][0]["findings"]
    row = next(f for f in findings if f["detector"] == "no_signal_steps")
    assert {"run", "detector", "severity", "step", "evidence", "fix", "refs"} <= set(row)
    assert row["severity"] == "critical" and row["step"] == 1 and isinstance(row["evidence"], list)
    assert set(row["fix"]) == {"grposcope", "trl", "verl"} and any("2605.21125" in r for r in row["refs"])
    failed = CliRunner().invoke(app, ["diagnose", str(run), "--fail_on", "critical"])
    assert failed.exit_code == 1
    healthy = _write_state(tmp_path / "ok", [1.0 + 0.01 * i for i in range(8)])
    assert CliRunner().invoke(app, ["diagnose", str(healthy), "--fail_on", "warning"]).exit_code == 0


def test_cli_refuses_an_unknown_detector_and_lists_them(tmp_path):
    from typer.testing import CliRunner

    from grposcope.cli import app

    run = _write_state(tmp_path / "r", [0.0] * 8)
    bad = CliRunner().invoke(app, ["diagnose", str(run), "--only", "entropy"])
    assert bad.exit_code == 2 and "unknown detector 'entropy'" in bad.output and "entropy_collapse" in bad.output
    listed = CliRunner().invoke(app, ["diagnose", "--list"])
    assert listed.exit_code == 0 and "reward_hacking" in listed.output


# the stock TRL run kept in experiments/results, through the command and the report ----------------------------
STOCK_TRL = Path(__file__).resolve().parents[1] / "experiments" / "results" / "stock_report" / "trl_out"


def test_the_stock_trl_run_names_truncation_and_steps_without_signal(tmp_path):
    """27% of its completions hit the cap (44% at its last step); 6 of its 8 steps have a gradient norm of 0."""
    from typer.testing import CliRunner

    from grposcope.cli import app

    out = tmp_path / "f.json"
    result = CliRunner().invoke(app, ["diagnose", str(STOCK_TRL), "--json", str(out)])
    assert result.exit_code == 0, result.output
    by = {f["detector"]: f for f in json.loads(out.read_text())["runs"][0]["findings"]}
    assert by["truncation"]["severity"] == "critical" and "27%" in by["truncation"]["title"]
    assert "44% at the last logged step (8)" in by["truncation"]["evidence"][0]
    assert by["no_signal_steps"]["step"] == 1 and "steps 1, 3-5, 7-8" in by["no_signal_steps"]["evidence"][0]
    collapse = by["advantage_collapse"]
    assert "all-wrong" in collapse["title"] and any("per group, from the rollouts" in e for e in collapse["evidence"])
    assert any(e.startswith("from the rollouts (32 groups of 8 steps, G = 4)") for e in collapse["evidence"])
    assert "93.8% of generated samples" in result.output  # the cost: (1 + 0.75 + 1 + 1 + 1 + 0.75 + 1 + 1) / 8


def test_the_report_opens_with_the_same_findings(tmp_path):
    from typer.testing import CliRunner

    from grposcope.cli import app

    result = CliRunner().invoke(app, ["report", str(STOCK_TRL), "--output", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    md = (tmp_path / "r" / "report.md").read_text()
    assert md.index("## Findings") < md.index("| run |")
    assert "**critical** `truncation`" in md and "**critical** `no_signal_steps`" in md
    page = (tmp_path / "r" / "report.html").read_text()
    assert page.index('id="findings"') < page.index("id='summary'") and "<code>truncation</code>" in page
