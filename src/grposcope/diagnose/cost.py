"""What bought no gradient: the share of generated samples and tokens spent on collapsed groups and on steps
without signal, and the same in GPU-hours when the run's step times and `--gpus` give them.

Per step s, the wasted share w_s is:
- 1 on a step without signal (its gradient norm is exactly 0, it was skipped, its rewards' std is exactly 0, or
  every group reached the loss with zero advantage): everything generated for it bought nothing;
- otherwise the share of its groups with zero advantage: `collapse/acr_post` where logged (after the sampler
  and the estimator: AVSPO's rescued groups count as used), else the collapse series the detectors read
  (signals.collapse_series: `collapse/acr`, TRL's `frac_reward_zero_std`, or its estimate from the mean reward).
A step whose share is unknown counts as 0 (the figure is then a lower bound, and says so).

Samples:  sum_s w_s n_s / sum_s n_s, n_s the completions generated (`sampler/samples_generated`; equal per step when
          not logged).
Tokens:   the same weighted by the step's completion tokens (`sampler/tokens_generated`, else n_s times the mean
          completion length): a collapsed group's completions are taken to be as long as the step's average.
GPU-hours: gpus * sum_s w_s t_s / 3600, t_s the step's wall time (`perf/step_s`; else the run's wall time spread
          evenly): the update of a collapsed group costs what a useful one costs (its rows go through the same
          forward and backward), so the whole step's time is shared by its groups.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..runs import catalogue as c
from .signals import collapse_series, no_signal_mask, rewards_alike, signal_known

if TYPE_CHECKING:
    from .view import View


MISSING = ("the log holds no collapse share (frac_reward_zero_std), no mean reward in [0, 1] over 4 or more steps "
           "to estimate it, and no gradient norm, reward std or skipped flag")


@dataclass
class Cost:
    steps: int  # logged steps
    steps_without_signal: int
    samples_share: float | None  # share of generated samples that bought no gradient
    tokens_share: float | None
    gpu_hours: float | None = None
    wasted_gpu_hours: float | None = None
    money: float | None = None  # wasted GPU-hours times --gpu_hour_cost
    basis: list[str] = field(default_factory=list)  # how each figure was computed

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in ("steps", "steps_without_signal", "samples_share", "tokens_share",
                                               "gpu_hours", "wasted_gpu_hours", "money", "basis")}

    def line(self) -> str:
        """One line for the terminal and the report."""
        if self.samples_share is None:
            return f"cost: not computed ({MISSING})"
        text = (f"cost: {self.samples_share:.1%} of generated samples and {self.tokens_share:.1%} of generated "
                f"tokens bought no gradient ({self.steps_without_signal} of {self.steps} steps without reward "
                "signal)")
        if self.wasted_gpu_hours is not None:
            text += f"; {self.wasted_gpu_hours:,.2f} of {self.gpu_hours:,.2f} GPU-hours"
            if self.money is not None:
                text += f", {self.money:,.2f} at the given price per GPU-hour"
        return text


def run_cost(view: "View") -> Cost:
    run = view.run
    n = len(run.steps)
    empty = no_signal_mask(view)
    share = view.array(c.ACR_POST)
    basis = []
    source = "collapse/acr_post"
    if not np.isfinite(share).any():  # the detectors' series: logged, or inferred and said so
        found = collapse_series(view)
        share = np.full(n, np.nan)
        if found is not None:
            share[np.isin(view.steps, found.steps)] = found.share
            source = found.basis
    known = np.isfinite(share) | signal_known(view)
    if not known.any():
        return Cost(n, 0, None, None, basis=[MISSING])
    waste = np.where(empty, 1.0, np.nan_to_num(share, nan=0.0))  # (n,)
    basis.append(f"per step: 1 on a step without signal, else the share of groups with zero advantage ({source})")
    if not np.isfinite(share).any():
        basis.append("no collapse share logged or estimated: only the steps without signal count (a lower bound)")
    if not known.all():
        basis.append(f"{int((~known).sum())} of {n} steps logged neither: counted as 0 (the shares are lower bounds)")
    samples = view.array(c.SAMPLES)
    if not np.isfinite(samples).all():
        samples = np.ones(n)
        basis.append("samples per step not logged (sampler/samples_generated): every step weighs the same")
    tokens = view.array(c.TOKENS)
    if not np.isfinite(tokens).all():
        length = view.array(c.LENGTH)
        if np.isfinite(length).any():
            length = np.where(np.isfinite(length), length, np.nanmean(length))
            tokens = samples * length
            basis.append("tokens per step: samples times the mean completion length; a collapsed group's "
                         "completions are taken as long as the step's average")
        else:
            tokens = samples
            basis.append("no completion lengths logged: the token share is the sample share")
    silent = empty | rewards_alike(view)  # no_signal_steps' two kinds: no gradient, or a KL-only one
    cost = Cost(n, int(silent.sum()), _share(waste, samples), _share(waste, tokens), basis=basis)
    gpus = view.setting("gpus")
    if gpus:
        logged = view.array(c.STEP_S)
        step_s: np.ndarray | None
        if np.isfinite(logged).sum() >= max(1, n // 2):
            step_s = np.where(np.isfinite(logged), logged, np.nanmedian(logged))
        elif run.wall_time_s:
            step_s = np.full(n, run.wall_time_s / max(n, 1))
            basis.append("no step times logged: the run's wall time spread evenly over its logged steps")
        else:
            step_s = None
            basis.append("GPU-hours: no step times (perf/step_s, TRL step_time, verl timing_s/step) nor wall time")
        if step_s is not None:
            cost.gpu_hours = float(gpus * step_s.sum() / 3600)
            cost.wasted_gpu_hours = float(gpus * (waste * step_s).sum() / 3600)
            price = view.setting("gpu_hour_cost")
            if price is not None:
                cost.money = cost.wasted_gpu_hours * float(price)
            basis.append(f"GPU-hours: {gpus} GPU(s) times each step's wall time times its wasted share")
    return cost


def _share(waste: np.ndarray, weight: np.ndarray) -> float:
    total = float(weight.sum())
    return float((waste * weight).sum() / total) if total > 0 and math.isfinite(total) else 0.0
