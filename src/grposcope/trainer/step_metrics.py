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

The first five are measured once per generation batch (`GenerationFigures.metrics()`, kept in `Generation.metrics`
and in checkpoints) and logged on every optimizer step it feeds; the monitor runs on its first step only.
Nothing the run decides is read back from these names: `max_samples` counts `Selection.samples_generated`.
docs/metrics.md documents every name; its section "Adding a metric" says where a new one goes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .generation import UpdateFigures


@dataclass
class GenerationFigures:
    """What a generation batch measured when it was drawn, scored and given advantages."""

    rewards: dict[str, float]  # Drawer.reward_metrics(): over every sample drawn
    sampler: dict[str, float]  # Selection.metrics: sampler/*
    reward_mean: float  # reward/mean: of the completions that reach the loss
    reward_std: float  # reward/std
    mean_length: float  # completion/mean_length
    truncated_frac: float  # completion/truncated_frac
    prompts_cut_frac: float  # prompt/truncated_frac
    gen_tokens_per_s: float  # perf/gen_tokens_per_s
    advantages: dict[str, float]  # AdvantageOutput.metrics: the estimator's own (avspo/*)
    kl_penalty: float | None = None  # kl/reward_penalty, with kl_in_reward

    @classmethod
    def measure(cls, drawer: Any, selection: Any, rollout: Any, estimate: Any, kl_penalty: float | None,
                generation_seconds: float) -> "GenerationFigures":
        """The figures of the kept completions (`selection`, `rollout`) and of every draw (`drawer`)."""
        rewards, lengths = selection.rewards, rollout.lengths.float()  # (B', G), (N,)
        return cls(
            rewards=drawer.reward_metrics(),
            sampler=selection.metrics,
            reward_mean=rewards.mean().item(),
            reward_std=rewards.std().item() if rewards.numel() > 1 else 0.0,
            mean_length=lengths.mean().item(),
            truncated_frac=rollout.truncated.float().mean().item(),
            prompts_cut_frac=drawer.prompts_cut / max(drawer.prompts_drawn, 1),
            gen_tokens_per_s=selection.tokens_generated / max(generation_seconds, 1e-9),
            advantages=estimate.metrics,
            kl_penalty=kl_penalty,
        )

    def metrics(self) -> dict[str, float]:
        penalty = {} if self.kl_penalty is None else {"kl/reward_penalty": self.kl_penalty}
        return {
            **self.rewards,
            **self.sampler,
            "reward/mean": self.reward_mean,
            "reward/std": self.reward_std,
            "completion/mean_length": self.mean_length,
            "completion/truncated_frac": self.truncated_frac,
            "prompt/truncated_frac": self.prompts_cut_frac,
            "perf/gen_tokens_per_s": self.gen_tokens_per_s,
            **self.advantages,
            **penalty,
        }


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

    def __post_init__(self) -> None:
        clash = sorted(self._own().keys() & self.logged.keys())
        if clash:
            raise ValueError(f"a reward function logged {clash} with log_metric: grposcope logs metrics of that "
                             "name itself; give yours another name, e.g. 'my_reward/...'")

    def _own(self) -> dict[str, float]:
        return {**self.generation, **self.update.metrics(), **self.optimizer.metrics(), **self.diagnosis}

    def metrics(self) -> dict[str, float]:
        return {**self._own(), **self.logged, "perf/step_s": self.seconds, **self.phases, **self.evaluation}


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
