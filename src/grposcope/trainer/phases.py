"""Where a step's time goes: named phases, timed with the wall clock, reported as `perf/<phase>_s`; and where
a run's goes, part by part, in summary.json's `time/<part>_s`."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager

# In the order a step runs them. "logprobs" is every forward pass of the update (and of old/reference
# log-probs); "diagnostics" is token entropy and the collapse monitor (ACR family, alarms).
PHASES = ("generation", "scoring", "logprobs", "backward", "optimizer", "diagnostics")


class PhaseTimer:
    """Accumulates seconds per phase until `take()` hands them over and starts again from zero."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)

    def __call__(self, phase: str):
        return _adding_to(self.seconds, phase)  # an unknown phase is a KeyError

    def take(self) -> dict[str, float]:
        out = {f"perf/{phase}_s": s for phase, s in self.seconds.items()}
        self.seconds = dict.fromkeys(PHASES, 0.0)
        return out


class RunClock:
    """Seconds per part of a run: "load" (data, model, optimizer: the trainer's construction), "eval_before",
    "steps" (generation and updates), "eval_after", "save" (the final model). In summary.json as
    `time/<part>_s`, not in the printed table: what a slow start or a slow evaluation costs, measured."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def __call__(self, part: str):
        return _adding_to(self.seconds, part)

    def figures(self) -> dict[str, float]:
        return {f"time/{part}_s": round(seconds, 3) for part, seconds in self.seconds.items()}


@contextmanager
def _adding_to(seconds: dict[str, float], key: str):
    """Adds the wall time of the `with` block to seconds[key]."""
    t0 = time.perf_counter()
    try:
        yield
    finally:  # CPU work is synchronous; on a GPU the phases are approximate (no device sync)
        seconds[key] += time.perf_counter() - t0
