"""One run's logged series, whichever trainer or logger wrote them: what the readers produce, and what the
detectors, the report and the live diagnosis read.

Notation: `series[name]` is aligned with `steps` (sorted, each step once); a step that did not log `name` holds
NaN. Names are the catalogue's canonical names (catalogue.py); keys it does not know keep their own spelling
and are listed in `unknown`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import compress
from pathlib import Path
from typing import Any, Sequence

from .catalogue import EVAL as ACCURACY  # the held-out score, named once in the catalogue


@dataclass
class Run:
    """One run's per-step series and the figures of its end."""

    name: str
    path: Path
    source: str  # "grposcope", "trl", "verl", "simulate", or the log format read ("tensorboard", "wandb", ...)
    steps: list[int]
    series: dict[str, Sequence[float]]  # array('d') from the readers (8 bytes a value), lists elsewhere
    eval_before: float | None = None  # held-out accuracy before the first step (step 0)
    wall_time_s: float | None = None
    notes: list[str] = field(default_factory=list)  # what the reader had to assume, shown in the report
    found: str = ""  # what was read, said to the user ("a stock TRL output folder (...)")
    steps_trained: int | None = None  # a stock run whose rollouts cover part of it: the steps it trained
    unknown: dict[str, int] = field(default_factory=dict)  # keys the catalogue does not know -> values seen
    problems: list[str] = field(default_factory=list)  # one line per bad file or bad value, the rest still read
    config: dict[str, Any] = field(default_factory=dict)  # what the log says of the run's settings
    from_rollouts: bool = False  # the ACR family was computed from the run's rollouts (per group)
    nonfinite: dict[str, list[int]] = field(default_factory=dict)  # name -> steps that logged NaN or +-inf
    read_as: dict[str, str] = field(default_factory=dict)  # key -> metric, read by its plain spelling or --map
    reasons: dict[str, str] = field(default_factory=dict)  # key -> why it was read as read_as says (its words...)
    keys: dict[str, str] = field(default_factory=dict)  # a logged key -> the series its values went to
    meanings: dict[str, str] = field(default_factory=dict)  # a logged key -> the metric it is, read or not
    engine: str = ""  # the engine whose keys the log holds (runs/engines), when its keys named one
    earlier: list["Run"] = field(default_factory=list)  # the runs before a restart in the same log (segments)

    def values(self, name: str) -> Sequence[float]:
        """The series `name`, NaN where a step did not log it; all NaN when the run never logged it."""
        return self.series.get(name, [math.nan] * len(self.steps))

    def has(self, name: str) -> bool:
        return any(math.isfinite(v) for v in self.values(name))

    def points(self, name: str) -> tuple[list[int], list[float]]:
        """(steps, values) of the steps that logged a finite `name`."""
        values = self.values(name)
        keep = [math.isfinite(v) for v in values]  # no (step, value) tuple per step: a long run has millions
        return list(compress(self.steps, keep)), list(compress(values, keep))

    def accuracy_points(self) -> tuple[list[int], list[float]]:
        """Held-out accuracy against step, the evaluation before training as step 0."""
        steps, values = self.points(ACCURACY)
        if self.eval_before is not None and math.isfinite(self.eval_before):
            steps, values = [0, *steps], [self.eval_before, *values]
        return steps, values


def to_float(value: int | float) -> float:
    """A JSON number as a float: an integer past float's range (`10**400`) is +-inf (a non-finite value, said
    as one), never an OverflowError."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


LONG_SEGMENT = 20  # logged steps that make an earlier part of a log with restarts a run of its own


def parts(run: "Run", how: str = "long") -> list["Run"]:
    """The runs of a log whose steps start again (`Run.earlier`, then the run), as `--segments` asks: 'last' the
    last alone; 'each' every one; 'long' (the default) the last and every earlier one that is a run of its own: of
    LONG_SEGMENT or more logged steps (not a start aborted after a few) and followed by a fresh start at step 0 or
    1 (a run appended to the file; a resume from a checkpoint starts again later and logs the same steps anew)."""
    if how == "last":
        return [run]
    every = [*run.earlier, run]
    kept = [r for r, after in zip(run.earlier, every[1:]) if how == "each" or
            (len(r.steps) >= LONG_SEGMENT and after.steps and after.steps[0] <= 1)]
    return [*kept, run]

