"""The end-of-run summary: a handful of figures computed from what was logged, kept cheaply in memory.

Only two series are kept step by step (`reward/mean` and `collapse/acr`, one float per step each), because
their first and last 10% need the values; everything else is a running sum or a last value.
"""

from __future__ import annotations

import math
from typing import Any

from .console import format_eta

SERIES = {"reward/mean": "reward", "collapse/acr": "acr"}  # metric -> figure prefix
ALARM_PREFIX = "alarm/"


def edge_means(values: list[float]) -> tuple[float, float]:
    """Means of the first and of the last 10% of `values` (at least one value each).

    10% is rounded up: ceil(n / 10) values, so 25 steps compare the first 3 with the last 3.
    """
    if not values:
        raise ValueError("edge_means needs at least one value")
    k = max(1, -(-len(values) // 10))  # ceil(n / 10), in exact integer arithmetic
    return sum(values[:k]) / k, sum(values[-k:]) / k


class RunStats:
    """Accumulates the figures of the summary from each `add(step, metrics)`.

    Non-finite values are left out of the means: a NaN reward says the step failed, not what it earned.
    """

    def __init__(self) -> None:
        self.series: dict[str, list[float]] = {name: [] for name in SERIES}
        self.steps = 0
        self.first_step: int | None = None
        self.last_step: int | None = None
        self.acr_post_sum = 0.0
        self.acr_post_count = 0
        self.entropy_last: float | None = None
        self.alarms: dict[str, dict[str, int]] = {}  # name -> {"first_step": .., "steps_on": ..}

    def add(self, step: int, metrics: dict[str, float]) -> None:
        if step != self.last_step:  # train and eval metrics of one step may come in separate calls
            self.steps += 1
            self.first_step = step if self.first_step is None else self.first_step
            self.last_step = step
        finite = {name: value for name, value in metrics.items() if math.isfinite(value)}
        for name, values in self.series.items():
            if name in finite:
                values.append(finite[name])
        if "collapse/acr_post" in finite:
            self.acr_post_sum += finite["collapse/acr_post"]
            self.acr_post_count += 1
        if "entropy/mean" in finite:
            self.entropy_last = finite["entropy/mean"]
        for name, value in finite.items():
            # Alarms are 1.0 while active and 0.0 otherwise; >= 0.5 also counts an averaged one as on.
            if name.startswith(ALARM_PREFIX) and value >= 0.5:
                alarm = self.alarms.setdefault(name, {"first_step": step, "steps_on": 0})
                alarm["steps_on"] += 1

    def figures(self, wall_time_s: float) -> dict[str, Any]:
        """The summary as a flat dict (plus `alarms`); figures of metrics never logged are left out."""
        out: dict[str, Any] = {"steps": self.steps, "first_step": self.first_step,
                               "last_step": self.last_step, "wall_time_s": wall_time_s}
        for name, prefix in SERIES.items():
            values = self.series[name]
            if values:
                first, last = edge_means(values)
                out[f"{prefix}_mean"] = sum(values) / len(values)
                out[f"{prefix}_mean_first_10pct"] = first
                out[f"{prefix}_mean_last_10pct"] = last
        if self.acr_post_count:
            out["acr_post_mean"] = self.acr_post_sum / self.acr_post_count
        if self.entropy_last is not None:
            out["entropy_final"] = self.entropy_last
        out["alarms"] = {name: dict(alarm) for name, alarm in self.alarms.items()}
        return out


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def summary_rows(figures: dict[str, Any], extra: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) rows of the summary table, in reading order."""
    steps = f"{figures['steps']}"
    if figures["steps"]:
        steps += f" (step {figures['first_step']} to {figures['last_step']})"
    rows = [("steps", steps), ("wall time", format_eta(figures["wall_time_s"]))]
    for prefix, label in (("reward", "reward/mean"), ("acr", "collapse/acr")):
        if f"{prefix}_mean" in figures:
            first, last = figures[f"{prefix}_mean_first_10pct"], figures[f"{prefix}_mean_last_10pct"]
            edges = f"{_fmt(first)} -> {_fmt(last)}"
            rows.append((f"{label}, first 10% -> last 10%", edges))
            rows.append((f"{label}, whole run", _fmt(figures[f"{prefix}_mean"])))
    if "acr_post_mean" in figures:
        rows.append(("collapse/acr_post, whole run", _fmt(figures["acr_post_mean"])))
    if "entropy_final" in figures:
        rows.append(("entropy/mean, last step", _fmt(figures["entropy_final"])))
    alarms = figures["alarms"]
    for name, alarm in alarms.items():
        on = alarm["steps_on"]
        rows.append((name, f"fired at step {alarm['first_step']}, on for {on} step{'' if on == 1 else 's'}"))
    if not alarms:
        rows.append(("alarms", "none fired"))
    rows.extend((name, _fmt(value)) for name, value in extra.items())
    return rows


def render_table(rows: list[tuple[str, str]]):
    """A rich Table of the rows (rich is imported here, when a summary is printed)."""
    from rich.table import Table

    table = Table(title="grposcope run summary", show_header=False)
    table.add_column("figure", style="bold")
    table.add_column("value")
    for label, value in rows:
        table.add_row(label, value)
    return table
