"""Where every metric of a step comes from: one record (or one method) per producer, collected here.

A line of metrics.jsonl is `StepMetrics.metrics()`. Its names come from these producers, in this order:

    producer                          gives                                    names
    reward functions (drawer.py)      Drawer.reward_metrics()                  reward/<func>/mean, reward/none_frac,
                                                                               reward/errors
    sampler (grposcope.sampling)      Selection.metrics (base.accounting)      sampler/*
    the generation batch              GenerationFigures (below)                reward/mean, reward/std, completion/*,
                                                                               prompt/*, perf/gen_tokens_per_s
    advantage estimator (core)        AdvantageOutput.metrics                  avspo/*
    KL in the reward                  GenerationFigures.kl_penalty             kl/reward_penalty
    policy loss, KL, entropy          UpdateFigures.metrics() (generation.py)  loss/*, clip/*, gspo/*, entropy/mean,
                                                                               kl/mean
    the optimizer step                OptimizerFigures (below)                 update/*, grad_norm, optimizer/*,
                                                                               loss/skipped_updates, perf/train_*
    collapse monitor (core)           CollapseMonitor.update()                 collapse/*, alarm/*
    reward functions' log_metric      Drawer.logged_metrics()                  yours
    the step's clock                  StepMetrics.seconds, PhaseTimer.take()   perf/step_s, perf/<phase>_s
    evaluation (eval_steps)           GRPOTrainer.evaluate()                   eval/accuracy, eval/accuracy/<level>

The first five are measured once per generation batch (`GenerationFigures`, kept in `Generation.figures`, in
checkpoints as the metrics it gives) and logged on every optimizer step it feeds; the monitor runs on its first
step only. The phases hand each other records of data (`Generation`, `Update`); `StepMetrics.of` makes the
step's line of them, after the step.
Nothing the run decides is read back from these names: `max_samples` counts `Selection.samples_generated`.
docs/metrics.md documents every name; its section "Adding a metric" says where a new one goes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import torch

# GenerationFigures is a record of generation.py; the trainer and the tests import it from here, with the others
from .generation import Generation, GenerationFigures, UpdateFigures  # noqa: F401
from .policy import TrainBatch


@dataclass
class OptimizerFigures:
    """What one optimizer step did, after its micro-batches' forward and backward passes."""

    grad_norm: float  # before clipping to max_grad_norm
    skipped_updates: int  # updates skipped so far for a NaN or inf (loss/skipped_updates)
    skipped_no_signal: bool  # this step took no optimizer step: its gradient was exactly 0
    train_tokens: float  # real prompt and completion tokens of its sequences
    seconds: float  # the update's wall time (perf/train_tokens_per_s)
    logp_change: dict[str, float] = field(default_factory=dict)  # update/logp_change_* with measure_update

    def metrics(self) -> dict[str, float]:
        return {
            **self.logp_change,
            "grad_norm": self.grad_norm,
            "loss/skipped_updates": float(self.skipped_updates),
            "optimizer/skipped_no_signal": float(self.skipped_no_signal),
            "perf/train_tokens": self.train_tokens,
            "perf/train_tokens_per_s": self.train_tokens / self.seconds,
        }


class Update(NamedTuple):
    """What one optimizer step hands on: its micro-batches' figures (the monitor reads their entropy and KL) and
    what the optimizer step did. A named pair: `loss, optimizer = update` unpacks it."""

    loss: UpdateFigures
    optimizer: OptimizerFigures


@dataclass
class StepMetrics:
    """One optimizer step's line of metrics.jsonl, producer by producer, in the order `metrics()` writes it.

    Built before the step is counted: a name a reward function logged with log_metric that grposcope's own
    producers also give is refused here (the step's clock and evaluation come after).
    """

    generation: dict[str, float]  # GenerationFigures.metrics() of the batch it trains on
    update: UpdateFigures  # the policy loss, KL and entropy over its micro-batches
    optimizer: OptimizerFigures
    diagnosis: dict[str, float]  # CollapseMonitor.update(): on a generation's first step, with diagnostics
    logged: dict[str, float]  # Drawer.logged_metrics(): what reward functions gave log_metric
    seconds: float = 0.0  # perf/step_s: its share of generation and scoring, plus the update
    phases: dict[str, float] = field(default_factory=dict)  # PhaseTimer.take(): perf/<phase>_s
    evaluation: dict[str, float] = field(default_factory=dict)  # eval/accuracy*, when eval_steps makes it due

    @classmethod
    def of(cls, generation: Generation, update: Update, diagnosis: dict[str, float]) -> "StepMetrics":
        """The line of a step that trained on `generation`'s next rows, as `update` did, diagnosed as `diagnosis`
        says ({} but on the generation's first step)."""
        return cls(generation.figures.metrics(), update.loss, update.optimizer, diagnosis, generation.logged)

    def __post_init__(self) -> None:
        clash = sorted(self._own().keys() & self.logged.keys())
        if clash:
            raise ValueError(f"a reward function logged {clash} with log_metric: grposcope logs metrics of that "
                             "name itself; give yours another name, e.g. 'my_reward/...'")

    def _own(self) -> dict[str, float]:
        return {**self.generation, **self.update.metrics(), **self.optimizer.metrics(), **self.diagnosis}

    def metrics(self) -> dict[str, float]:
        return {**self._own(), **self.logged, "perf/step_s": self.seconds, **self.phases, **self.evaluation}


def logp_change(change: torch.Tensor, batch: TrainBatch, group: int, success_threshold: float) -> dict[str, float]:
    """`update/logp_change_*` (measure_update): how far an update moved the log-probs of the completions it
    trained on, the mean change `change` (n, T) per completion token, over the rows of all-wrong groups
    (every reward of the group below `success_threshold`) and over the others; a name without tokens is left out."""
    assert batch.rewards is not None  # measure_update: the trainer sets each row's reward
    all_wrong = (batch.rewards.view(-1, group) < success_threshold).all(dim=1).repeat_interleave(group)  # (n,)
    real = batch.loss_mask.bool()  # (n, T)
    out = {}
    for name, rows in (("all_wrong", all_wrong), ("other", ~all_wrong)):
        tokens = real & rows.unsqueeze(1)  # (n, T)
        if tokens.any():
            out[f"update/logp_change_{name}"] = change[tokens].mean().item()
    return out


def summary_figures(before: dict[str, float], after: dict[str, float], no_signal_steps: int | None,
                    updates: int) -> dict[str, float]:
    """What the run's summary adds to the logger's figures: the held-out figures before and after training,
    the optimizer steps skipped for no signal (`no_signal_steps`, None without skip_no_signal_steps) and the
    optimizer updates taken (`updates`)."""
    extra = {f"{k} before": v for k, v in before.items()} | {f"{k} after": v for k, v in after.items()}
    if no_signal_steps is not None:
        extra["optimizer/skipped_no_signal_steps"] = no_signal_steps
    extra["optimizer/updates"] = updates
    return extra
