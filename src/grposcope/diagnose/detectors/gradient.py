"""The gradient itself: `gradient_pathology` (non-finite values, spikes, vanishing norms)."""

from __future__ import annotations

import math

import numpy as np

from ...runs import catalogue as c
from .. import stats
from ..findings import EXPLODING_GRADIENTS, Fix
from ..signals import rewards_alike
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
        alike = np.isin(x, view.steps[rewards_alike(view)])
        # the KL-only norms of steps whose rewards were all equal (no_signal_steps) are another population: a signal
        # step among them is the reward coming back, not a spike, and a norm that falls with them is the signal
        # gone, not a vanishing gradient. Each population is judged on its own
        findings += self._spikes(x, g, [part for part in (~alike, alike) if part.sum() >= 8])
        if (~alike).sum() >= 8:
            findings += self._vanishing(x[~alike], g[~alike])
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

    def _spikes(self, x: np.ndarray, g: np.ndarray, parts: list[np.ndarray]) -> list:
        spike, ratios, bases = np.zeros(len(g), dtype=bool), np.ones(len(g)), np.full(len(g), np.nan)
        for part in parts:  # (n,) masks of the steps judged together
            logs = np.log(g[part])
            base = stats.rolling_median(logs, SPIKE_WINDOW)
            resid = logs - base
            scale = stats.mad(resid[np.isfinite(resid)]) or 1e-12
            spike[part] = np.isfinite(base) & (resid > math.log(SPIKE_RATIO)) & (resid / scale > SPIKE_Z)
            ratios[part], bases[part] = np.exp(resid), np.exp(base)
        n = int(spike.sum())
        if n == 0:
            return []
        largest = int(np.flatnonzero(spike)[np.argmax(ratios[spike])])
        ratio = float(ratios[largest])
        severity = "warning" if n >= RECURRING or ratio >= HUGE else "info"
        evidence = [f"{n} spike(s) in grad_norm: at least {SPIKE_RATIO:g}x the median of the {SPIKE_WINDOW} steps "
                    f"before and {SPIKE_Z:g} robust standard deviations out (log scale), at steps {spans(x[spike])}",
                    f"the largest is {ratio:.0f}x its local median ({g[largest]:.3g} against {bases[largest]:.3g})"]
        if len(parts) > 1:
            evidence.append("steps whose rewards were all equal (a KL-only norm) and steps with reward signal are "
                            "judged apart: a signal step among the others is the reward coming back")
        return [self.finding(severity, x[spike][0], "gradient spikes" + (" recur" if n >= RECURRING else ""),
                             evidence, spikes=n, largest=ratio)]

    def _vanishing(self, x: np.ndarray, g: np.ndarray) -> list:
        start, end = stats.level(stats.head(g)), stats.level(stats.tail(g, 0.1))
        if not (start > 0 and end <= VANISHED * start and stats.trend(x, g).falling()):
            return []
        return [self.finding("warning", x[np.argmax(g <= VANISHED * start)], "the gradient norm has vanished", [
            f"grad_norm fell from {start:.3g} (median of the first tenth) to {end:.3g} (last tenth): "
            f"{end / start:.1e} of where it started; the updates no longer move the policy"], ratio=end / start)]
