"""The gradient itself: `gradient_pathology` (non-finite values, spikes, vanishing norms)."""

from __future__ import annotations

import math

import numpy as np

from ...runs import catalogue as c
from .. import stats
from ..findings import EXPLODING_GRADIENTS, Fix
from ..signals import loss_rounded, rewards_alike, zero_loss
from .base import Detector, p_text, register, spans

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


# loss_explosion: a loss at least EXPLODE_RATIO times the typical size of the loss before it (the 90th percentile of
# |loss| over the EXPLODE_WINDOW logged points before, EXPLODE_LEAST at least: a policy-gradient loss swings around
# 0, so its median is no scale) and at least EXPLODE_FLOOR in size (a policy-gradient loss is a mean of ratio x
# advantage terms, the ratio clipped near 1 and the advantages of order 1: a GRPO loss of 1e-4 that moves to 0.03
# is 300x and nothing); EXPLODE_CRITICAL times, or RECURRING such steps: critical. A loss of exactly 0 on
# ZERO_LOSS_SHARE of the logged points (ZERO_LOSS_INFO: info) where the log does not round it
EXPLODE_RATIO, EXPLODE_CRITICAL, EXPLODE_FLOOR = 100.0, 1e4, 1.0
EXPLODE_WINDOW, EXPLODE_LEAST = 25, 5
ZERO_LOSS_SHARE, ZERO_LOSS_INFO = 0.5, 0.2
@register
class LossExplosion(Detector):
    name = "loss_explosion"
    summary = "the loss jumps by orders of magnitude (or is not finite), or sits at exactly 0"
    needs = ((c.LOSS,),)
    fix = Fix(
        grposcope="max_grad_norm lower; learning_rate lower; read the completions of the exploding step (a huge "
        "loss is a huge ratio or advantage: a reward far off its scale, a log-prob of -inf); a loss of exactly 0: "
        "no group mixed (see advantage_collapse) or the loss is masked out",
        trl="max_grad_norm lower; learning_rate lower; scale_rewards and reward functions on one scale; "
        "log_completions=True to read the exploding step",
        verl="actor_rollout_ref.actor.grad_clip lower; actor_rollout_ref.actor.optim.lr down; "
        "actor_rollout_ref.actor.clip_ratio_c (dual clip) for negative advantages",
    )
    refs = (EXPLODING_GRADIENTS,)

    def detect(self, view):
        x, y = view[c.LOSS]
        findings = []
        if not view.has(c.GRAD_NORM):  # with a gradient norm, gradient_pathology names non-finite losses
            bad = sorted(set(view.run.nonfinite.get(c.LOSS, [])) | {int(s) for s, v in zip(x, y) if math.isinf(v)})
            if bad:
                findings.append(self.finding("critical", bad[0], "non-finite losses", [
                    f"{len(bad)} logged step(s) have a NaN or infinite loss: steps {spans(bad)}",
                    "no gradient norm was logged to tell whether the update was skipped"], steps=len(bad)))
        findings += self._explosions(x, y) or self._drift(x, y)
        if not view.has(c.GRAD_NORM):  # with a gradient norm, no_signal_steps reads the steps without gradient
            findings += self._zeros(view, x, y)
        return findings

    def _drift(self, x: np.ndarray, y: np.ndarray) -> list:
        """The loss's size grew by EXPLODE_RATIO over the run, step by step rather than in one jump: the median
        |loss| of the last tenth against the 90th percentile of the first tenth's, and past EXPLODE_FLOOR."""
        size = np.abs(y)
        if len(size) < 10:
            return []
        start, end = float(np.percentile(stats.head(size), 90)), stats.level(stats.tail(size, 0.1))
        t = stats.trend(x, size)
        if not (end >= EXPLODE_FLOOR and end >= EXPLODE_RATIO * start and t.rising(0.01)):
            return []
        ratio = end / start if start > 0 else math.inf
        evidence = [f"|{c.LOSS}| grew from {start:.3g} (90th percentile of the first tenth) to {end:.3g} (median of "
                    f"the last tenth): {ratio:.3g}x, rising through the run ({p_text(t.p)})",
                    "no single jump: a term of the loss (a KL penalty, an unclipped ratio) grows step by step"]
        return [self.finding("warning", x[np.argmax(size >= EXPLODE_FLOOR)], f"the loss grew {ratio:.0e}x over the "
                             "run", evidence, largest=ratio, steps=0)]

    def _explosions(self, x: np.ndarray, y: np.ndarray) -> list:
        size = np.abs(y)
        if len(size) <= EXPLODE_LEAST:
            return []
        from numpy.lib.stride_tricks import sliding_window_view

        padded = np.concatenate([np.full(EXPLODE_WINDOW, np.nan), size[:-1]])  # the values before each one
        windows = sliding_window_view(padded, EXPLODE_WINDOW)  # (n, window)
        enough = np.isfinite(windows).sum(axis=1) >= EXPLODE_LEAST
        base = np.full(len(size), np.nan)
        if enough.any():
            base[enough] = np.nanpercentile(windows[enough], 90, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(base > 0, size / np.where(base > 0, base, 1.0), np.nan)
        hit = (np.nan_to_num(ratio) >= EXPLODE_RATIO) & (size >= EXPLODE_FLOOR)
        if not hit.any():
            return []
        largest = int(np.nanargmax(np.where(hit, ratio, np.nan)))
        n = int(hit.sum())
        severity = "critical" if ratio[largest] >= EXPLODE_CRITICAL or n >= RECURRING else "warning"
        evidence = [f"{c.LOSS} at step {int(x[largest])} is {y[largest]:.3g}: {ratio[largest]:.3g}x the typical size "
                    f"of the loss before it ({base[largest]:.3g}, the 90th percentile of |loss| over the "
                    f"{EXPLODE_WINDOW} logged points before)",
                    f"{n} logged step(s) at {EXPLODE_RATIO:g}x or more: steps {spans(x[hit])}"]
        after = size[largest + 1:largest + 6]
        if len(after):
            back = bool(np.all(after < EXPLODE_RATIO * base[largest] / 10))
            evidence.append("the steps after it are back at the usual size: one step's update was huge"
                            if back else "the loss stays large after it")
        return [self.finding(severity, x[hit][0], f"the loss jumps {ratio[largest]:.0e}x above its usual size",
                             evidence, largest=float(ratio[largest]), steps=n)]

    def _zeros(self, view, x: np.ndarray, y: np.ndarray) -> list:
        zero = y == 0
        share = float(zero.mean()) if len(y) else 0.0
        # a loss of 0 on every step: one never computed and one rounded to 0 (transformers: 4 decimals) look alike,
        # nothing to say (the gradient norm, where logged, tells: no_signal_steps)
        if share < ZERO_LOSS_INFO or zero.all() or (loss_rounded(view) and not zero_loss(view).any()):
            return []
        evidence = [f"{c.LOSS} is exactly 0 on {int(zero.sum())} of {len(y)} logged points ({share:.0%}): steps "
                    f"{spans(x[zero])}"]
        severity = "warning" if share >= ZERO_LOSS_SHARE else "info"
        evidence.append("an unrounded policy loss of exactly 0 means no gradient from it: every group's advantage was "
                        "0 (no group mixed), or every token was masked out of the loss")
        return [self.finding(severity, x[zero][0], f"the loss is exactly 0 on {share:.0%} of the logged steps",
                             evidence, share=share)]
