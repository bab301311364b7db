"""A run in a few numbers: the row `grposcope report` writes for it in report.md."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..runs.engine_runs import ACR_100_STEPS
from ..runs.record import Run

ALARMS = ("alarm/stagnation", "alarm/entropy_collapse", "alarm/kl_drift", "alarm/no_signal")


@dataclass(frozen=True)
class Alarm:
    name: str  # "stagnation", ...
    first_step: int
    steps_on: int  # how many logged steps it was raised on


@dataclass(frozen=True)
class RunFigures:
    steps: int
    last_step: int
    final_accuracy: float | None  # the last held-out accuracy logged
    best_accuracy: float | None  # the best held-out accuracy, the evaluation before training included
    acr_mean: float | None
    acr_100: float | None
    acr_post_mean: float | None
    alarms: tuple[Alarm, ...]
    samples_generated: float | None
    tokens_generated: float | None
    wall_time_s: float | None


def run_figures(run: Run) -> RunFigures:
    _, accuracy = run.accuracy_points()
    return RunFigures(
        steps=len(run.steps),
        last_step=run.steps[-1],
        final_accuracy=accuracy[-1] if accuracy else None,
        best_accuracy=max(accuracy) if accuracy else None,
        acr_mean=_mean(run.values("collapse/acr")),
        acr_100=acr_100(run),
        acr_post_mean=_mean(run.values("collapse/acr_post")),
        alarms=alarms(run),
        samples_generated=_sum(run.values("sampler/samples_generated")),
        tokens_generated=_sum(run.values("sampler/tokens_generated")),
        wall_time_s=run.wall_time_s,
    )


def no_signal_spans(run: Run) -> list[tuple[int, int]]:
    """(first step, number of steps) of each streak of logged steps with no signal: `collapse/acr_post` 1, no
    group reached the loss with an advantage (in a TRL log averaged over its logging steps: 1 when all were)."""
    spans: list[tuple[int, int]] = []
    previous = None
    for step, value in zip(*run.points("collapse/acr_post")):
        if value >= 1.0:
            if spans and previous is not None and spans[-1][0] + spans[-1][1] - 1 == previous:
                spans[-1] = (spans[-1][0], spans[-1][1] + step - previous)
            else:
                spans.append((step, 1))
        previous = step
    return spans


def acr_100(run: Run) -> float | None:
    """The run's `collapse/acr_100` as last logged (it freezes after step 100); for a log without it (stock
    TRL), the mean ACR over the first 100 logged steps, which is the same definition."""
    _, logged = run.points("collapse/acr_100")
    if logged:
        return logged[-1]
    steps, acr = run.points("collapse/acr")
    early = [v for s, v in zip(steps, acr) if s <= ACR_100_STEPS]
    return math.fsum(early) / len(early) if early else None


def alarms(run: Run) -> tuple[Alarm, ...]:
    """Each alarm that was raised: its first step and on how many logged steps it was on."""
    found = []
    for name in ALARMS:
        steps, values = run.points(name)
        on = [s for s, v in zip(steps, values) if v > 0.5]
        if on:
            found.append(Alarm(name.removeprefix("alarm/"), on[0], len(on)))
    return tuple(found)


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if math.isfinite(v)]


def _mean(values: Sequence[float]) -> float | None:
    finite = _finite(values)
    return math.fsum(finite) / len(finite) if finite else None


def _sum(values: Sequence[float]) -> float | None:
    finite = _finite(values)
    return math.fsum(finite) if finite else None
