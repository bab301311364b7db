"""`diagnose(run)`: every detector over one run's logged series, with the cost of what bought no gradient.

The same call serves `grposcope diagnose`, the report's findings section and the live diagnosis inside a run
(live.py): one mechanism, one set of thresholds (docs/diagnose.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from ..components.ranges import check_options
from ..runs.record import Run
from .cost import Cost, run_cost
from .detectors import DETECTORS, Detector
from .findings import Finding, rank
from .stats import finite


@dataclass(frozen=True)
class Options:
    """What a log may not say, given by the user (`grposcope diagnose`'s options of the same names). Checked
    against the one table of option ranges when made (components/ranges.py: a name means what it means in a
    training config)."""

    entropy_floor: float = 0.5  # nats: the entropy_collapse alarm's floor (CollapseMonitor's)
    kl_bound: float = 0.5  # the kl_drift alarm's bound (CollapseMonitor's)
    success_threshold: float | None = None  # a reward >= this is a success; None: 0.5 for rewards in [0, 1]
    num_generations: int | None = None  # G, when the log does not say it
    max_completion_length: int | None = None  # the length cap, when the log does not say it
    max_steps: int | None = None  # the steps the run was planned for (entropy's projected arrival)
    gpus: int | None = None  # for the cost in GPU-hours
    gpu_hour_cost: float | None = None  # per GPU-hour, for the cost in money

    def __post_init__(self) -> None:
        check_options({f.name: getattr(self, f.name) for f in fields(self)})
        if self.max_steps == -1:  # a training config's "num_train_epochs decides": not known here
            object.__setattr__(self, "max_steps", None)


class View:
    """A run's series as finite numpy arrays, each built once: `view[name]` -> (steps (n,), values (n,))."""

    def __init__(self, run: Run, options: Options) -> None:
        self.run = run
        self.options = options
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.memo: dict[str, Any] = {}  # what several detectors compute once (the alarms' replay)
        self._arrays: dict[str, np.ndarray] = {}
        self.steps = np.asarray(run.steps, dtype=float)
        self.steps.flags.writeable = False
        self.last_step = max(run.steps) if run.steps else 0

    def __getitem__(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in self._cache:
            self._cache[name] = finite(self.steps, self.array(name))
        return self._cache[name]

    def array(self, name: str) -> np.ndarray:
        """The series `name` aligned with the run's steps, NaN where not logged (converted once: a long run's
        lists cost more to convert than to diagnose)."""
        if name not in self._arrays:
            values = self.run.series.get(name)
            array = (np.asarray(values, dtype=float) if values is not None
                     else np.full(len(self.run.steps), np.nan))
            array.flags.writeable = False  # may share the run's own memory (an array('d') series): read only
            self._arrays[name] = array
        return self._arrays[name]

    def has(self, name: str, least: int = 1) -> bool:
        return len(self[name][1]) >= least

    def setting(self, name: str) -> Any:
        """A run setting: the user's option first (Options), then what the log's config says."""
        given = getattr(self.options, name, None)
        return given if given is not None else self.run.config.get(name)

    def aligned(self, *names: str) -> tuple[np.ndarray, ...]:
        """(steps, values of each name) on the steps where every one of them is finite."""
        steps = self.steps
        values = [self.array(n) for n in names]
        keep = np.ones(len(steps), dtype=bool)
        for v in values:
            keep &= np.isfinite(v)
        return (steps[keep], *(v[keep] for v in values))


@dataclass
class Diagnosis:
    run: Run
    findings: list[Finding]
    cost: Cost
    unchecked: dict[str, str] = field(default_factory=dict)  # detector -> what it needs and the log lacks

    def worst(self) -> str | None:
        return max((f.severity for f in self.findings), key=rank, default=None)

    def to_json(self) -> dict[str, Any]:
        """One run of the findings document (`document`)."""
        return {"run": self.run.name, "source": self.run.source, "read": self.run.found,
                "logged_steps": len(self.run.steps), "worst": self.worst(),
                "findings": [f.to_json() for f in self.findings], "cost": self.cost.to_json(),
                "cost_line": self.cost.line(), "unchecked": dict(self.unchecked),
                "problems": list(self.run.problems)}


SCHEMA = "grposcope.findings/1"


def document(diagnoses: list[Diagnosis]) -> dict[str, Any]:
    """The one JSON shape of findings, whoever writes them: `grposcope diagnose --format json` (or `--json`),
    the trainers' and `DiagnoseCallback`'s findings.json, and the report's findings.json. docs/diagnose.md,
    "JSON", documents it."""
    return {"schema": SCHEMA, "runs": [d.to_json() for d in diagnoses]}


def diagnose(run: Run, options: Options = Options(), only: list[str] | None = None) -> Diagnosis:
    """Every registered detector (or those in `only`) over `run`; findings ordered by severity, then step."""
    view = View(run, options)
    findings, unchecked = [], {}
    for name in only or DETECTORS.names():
        detector: Detector = DETECTORS.make(name)
        missing = detector.missing(view)
        if missing:
            unchecked[name] = missing
            continue
        findings += [replace(f, run=run.name, detector=name) for f in detector.detect(view)]
    findings.sort(key=lambda f: (-rank(f.severity), f.step if f.step is not None else -1, f.detector))
    return Diagnosis(run, findings, run_cost(view), unchecked)
