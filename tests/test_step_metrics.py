"""A step's line of metrics.jsonl is collected in one place (trainer/step_metrics.py): producer by producer, in
a fixed order, with a reward function's name that clashes with grposcope's refused."""

from __future__ import annotations

import pytest

from grposcope.trainer.generation import UpdateFigures
from grposcope.trainer.step_metrics import OptimizerFigures, StepMetrics, summary_figures


def a_step(**overrides) -> StepMetrics:
    parts = dict(
        generation={"sampler/samples_generated": 24.0, "reward/mean": 0.25},
        update=UpdateFigures(policy_loss=-0.5, entropy=0.3, loss_figures={"clip/low_frac": 0.0}),
        optimizer=OptimizerFigures(grad_norm=2.0, skipped_updates=1, skipped_no_signal=False, train_tokens=300,
                                   seconds=1.5, logp_change={"update/logp_change_other": 0.01}),
        diagnosis={"collapse/acr": 0.5},
        logged={"judge/calls": 1.0},
    )
    return StepMetrics(**(parts | overrides))


def test_a_line_holds_each_producer_in_order_with_its_values():
    step = a_step()
    step.seconds, step.phases, step.evaluation = 2.5, {"perf/generation_s": 1.0}, {"eval/accuracy": 0.75}
    line = step.metrics()
    assert list(line) == [
        "sampler/samples_generated", "reward/mean",  # the generation's, as measured when it was drawn
        "loss/policy", "clip/low_frac", "entropy/mean",  # the micro-batches' (no loss/kl, kl/mean: not measured)
        "update/logp_change_other", "grad_norm", "loss/skipped_updates", "optimizer/skipped_no_signal",
        "perf/train_tokens", "perf/train_tokens_per_s",  # the optimizer step's
        "collapse/acr", "judge/calls", "perf/step_s", "perf/generation_s", "eval/accuracy",
    ]
    assert line["loss/skipped_updates"] == 1.0 and line["optimizer/skipped_no_signal"] == 0.0
    assert line["perf/train_tokens"] == 300 and line["perf/train_tokens_per_s"] == 200.0  # 300 tokens / 1.5 s
    assert line["perf/step_s"] == 2.5 and line["eval/accuracy"] == 0.75


def test_a_reward_function_cannot_log_a_name_grposcope_logs():
    with pytest.raises(ValueError, match=r"logged \['reward/mean'\] with log_metric.*another name"):
        a_step(logged={"reward/mean": 1.0, "judge/calls": 1.0})
    with pytest.raises(ValueError, match=r"logged \['collapse/acr'\]"):
        a_step(logged={"collapse/acr": 0.0})


def test_the_summary_adds_held_out_figures_before_and_after_and_skipped_steps():
    extra = summary_figures({"eval/accuracy": 0.25}, {"eval/accuracy": 0.5}, no_signal_steps=3, updates=7)
    assert extra == {"eval/accuracy before": 0.25, "eval/accuracy after": 0.5,
                     "optimizer/skipped_no_signal_steps": 3, "optimizer/updates": 7}
    assert "optimizer/skipped_no_signal_steps" not in summary_figures({}, {}, None, 10)
