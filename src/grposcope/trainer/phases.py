"""Where a step's time goes: named phases, timed with the wall clock, reported as `perf/<phase>_s`."""

from __future__ import annotations

import time
from contextlib import contextmanager

# In the order a step runs them. "logprobs" is every forward pass of the update (and of old/reference
# log-probs); "diagnostics" is token entropy and the collapse monitor (ACR family, alarms).
PHASES = ("generation", "scoring", "logprobs", "backward", "optimizer", "diagnostics")


class PhaseTimer:
    """Accumulates seconds per phase until `take()` hands them over and starts again from zero."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)

    @contextmanager
    def __call__(self, phase: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:  # CPU work is synchronous; on a GPU the phases are approximate (no device sync)
            self.seconds[phase] += time.perf_counter() - t0

    def take(self) -> dict[str, float]:
        out = {f"perf/{phase}_s": s for phase, s in self.seconds.items()}
        self.seconds = dict.fromkeys(PHASES, 0.0)
        return out
