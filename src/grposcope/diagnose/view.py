"""`View`: a run's series as the detectors read them (finite numpy arrays, each built once) with the user's
options. A module of its own, so that the detectors, the cost and the signals import it and not the engine,
which imports them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..runs.record import Run
from .stats import finite

if TYPE_CHECKING:
    from .options import Options


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
