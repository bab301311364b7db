"""The gradient itself: `gradient_pathology` (non-finite values, spikes, vanishing norms)."""

from __future__ import annotations

import math

import numpy as np

from ...runs import catalogue as c
from .. import stats
from ..findings import EXPLODING_GRADIENTS, Fix
from .base import Detector, register, spans

SPIKE_RATIO = 5.0  # a spike is at least this multiple of the median of the steps before it ...
SPIKE_Z = 6.0  # ... and this many robust standard deviations above it, on a log scale
SPIKE_WINDOW = 25  # steps in that rolling median
RECURRING = 3  # spikes that make a pattern rather than an accident
HUGE = 100.0  # one spike this large is a warning on its own
VANISHED = 0.01  # the last tenth's median norm at most this share of the first tenth's
SKIPPED_UPDATES = "loss/skipped_updates"  # grposcope's count of updates skipped for a NaN/inf loss or norm


@register
class GradientPathology(Detector):
    name = "gradient_pathology"
    summary = "non-finite gradient norms or losses, recurring gradient spikes, or a norm that vanishes"
    needs = ((c.GRAD_NORM,),)
    fix = Fix(
        grposcope="max_grad_norm lower (e.g. 0.5); learning_rate lower; warmup_ratio=0.05; float32 or bfloat16 "
        "rather than float16",
        trl="max_grad_norm lower; learning_rate lower; warmup_ratio=0.05; bf16=True rather than fp16",
        verl="actor_rollout_ref.actor.grad_clip lower; actor_rollout_ref.actor.optim.lr lower; "
        "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=0.05",
    )
    refs = (EXPLODING_GRADIENTS,)

    def detect(self, view):
        findings = []
        bad = self._nonfinite(view)
        if bad:
            findings.append(self.finding("critical", bad[0], "non-finite gradient norms or losses", [
                f"{len(bad)} step(s) logged a NaN or infinite gradient norm or loss: steps {spans(bad)}",
                "a non-finite update corrupts the weights unless the trainer skips it; every later step is suspect"],
                steps=len(bad)))
        x, g = view[c.GRAD_NORM]
        keep = g > 0  # exact zeros are steps without signal (no_signal_steps), not a vanishing gradient
        x, g = x[keep], g[keep]
        if len(g) < 8:
            return findings
        findings += self._spikes(x, g) + self._vanishing(x, g)
        return findings

    def _nonfinite(self, view) -> list[int]:
        run = view.run
        steps = set()
        for name in (c.GRAD_NORM, c.LOSS):
            steps |= set(run.nonfinite.get(name, []))
            steps |= {s for s, v in zip(run.steps, run.values(name)) if math.isinf(v)}
        x, skipped = view[SKIPPED_UPDATES]
        if len(skipped):
            rises = np.flatnonzero(np.diff(np.concatenate([[0.0], skipped])) > 0)
            steps |= {int(x[i]) for i in rises}
        return sorted(steps)

    def _spikes(self, x: np.ndarray, g: np.ndarray) -> list:
        logs = np.log(g)
        base = stats.rolling_median(logs, SPIKE_WINDOW)
        resid = logs - base
        scale = stats.mad(resid[np.isfinite(resid)]) or 1e-12
        spike = np.isfinite(base) & (resid > math.log(SPIKE_RATIO)) & (resid / scale > SPIKE_Z)
        n = int(spike.sum())
        if n == 0:
            return []
        ratio = float(np.exp(resid[spike]).max())
        severity = "warning" if n >= RECURRING or ratio >= HUGE else "info"
        evidence = [f"{n} spike(s) in grad_norm: at least {SPIKE_RATIO:g}x the median of the {SPIKE_WINDOW} steps "
                    f"before and {SPIKE_Z:g} robust standard deviations out (log scale), at steps {spans(x[spike])}",
                    f"the largest is {ratio:.0f}x its local median ({g[spike].max():.3g} against "
                    f"{np.exp(base[spike][np.argmax(resid[spike])]):.3g})"]
        return [self.finding(severity, x[spike][0], "gradient spikes" + (" recur" if n >= RECURRING else ""),
                             evidence, spikes=n, largest=ratio)]

    def _vanishing(self, x: np.ndarray, g: np.ndarray) -> list:
        start, end = stats.level(stats.head(g)), stats.level(stats.tail(g, 0.1))
        if not (start > 0 and end <= VANISHED * start and stats.trend(x, g).falling()):
            return []
        return [self.finding("warning", x[np.argmax(g <= VANISHED * start)], "the gradient norm has vanished", [
            f"grad_norm fell from {start:.3g} (median of the first tenth) to {end:.3g} (last tenth): "
            f"{end / start:.1e} of where it started; the updates no longer move the policy"], ratio=end / start)]
