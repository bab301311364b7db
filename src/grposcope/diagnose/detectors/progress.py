"""Whether the run learns at all: `no_learning`, `pinned_reward`, `held_out_regression`.

These are the symptoms that bring most people to a diagnosis: a reward that never rises, a reward stuck on one
exact value, a held-out score that falls. Each is said as a fact of the log first (the figures, the steps), and a
rule that needs more points than the log has says so rather than guessing a trend.
"""

from __future__ import annotations

import math

import numpy as np

from ...runs import catalogue as c
from .. import stats
from ..findings import DEEPSEEKMATH, Fix
from .base import Detector, p_text, register, spans

# no_learning: a run long enough to judge (NO_LEARNING_POINTS logged points over NO_LEARNING_STEPS steps: a
# 10-step smoke run is too early to expect a gain) whose reward has no significant rise (Mann-Kendall, p < 0.05)
# and whose last quarter is not above its first quarter by more than NO_GAIN_SE standard errors of that difference
# (the reward's own scatter decides, not a fixed amount)
NO_LEARNING_POINTS, NO_LEARNING_STEPS = 10, 20
NO_LEARNING_ALPHA = 0.05
NO_GAIN_SE = 2.0
MEDIAN_SE = 1.2533  # the standard error of a median of m normal values is this * sigma / sqrt(m)
CEILING = 0.95  # a reward in [0, 1] that starts at or above this has nothing left to learn (info, not a warning)
HELD_OUT_LEARNT = 0.05  # the held-out score gained this much from its first to its last evaluation: it learnt
HELD_OUT_TESTED = 6  # evaluations from which the held-out gain is a tested trend instead

NOT_LEARNING = Fix(
    grposcope="run grposcope audit-rewards on a few completions (a verifier that rejects right answers gives a flat "
    "reward); check that the learning_rate reaches the weights (not 0 after warm-up, LoRA modules attached); "
    "easier prompts or a larger num_generations so that some groups mix",
    trl="check the reward functions on logged completions (log_completions=True); learning_rate up (LoRA usually "
    "needs 1e-5 or more); easier data or a larger num_generations",
    verl="check custom_reward_function on dumped rollouts (trainer.rollout_data_dir); "
    "actor_rollout_ref.actor.optim.lr up; easier data or a larger actor_rollout_ref.rollout.n",
)


def scatter(y: np.ndarray) -> float:
    """The series' step-to-step noise as a standard deviation: the robust SD of consecutive differences over
    sqrt(2), so a trend does not count as noise; their plain SD where most differences are 0 (a reward that sits on
    one value and leaves it now and then: the robust SD would call any move a gain)."""
    if len(y) < 3:
        return math.nan
    d = np.diff(y)
    return (stats.mad(d) or float(np.std(d))) / math.sqrt(2)


def _held_out_gain(view) -> tuple[float, int, bool] | None:
    """(last - first, evaluations, learnt) of the held-out score, the evaluation before training included; None
    with fewer than 2 evaluations. Learnt: with HELD_OUT_TESTED or more evaluations a significant rise (p < 0.05:
    one high evaluation among oscillating ones is not a gain), with fewer a gain of HELD_OUT_LEARNT or more."""
    steps, values = view.run.accuracy_points()
    kept = [(s, v) for s, v in zip(steps, values) if math.isfinite(v)]
    if len(kept) < 2:
        return None
    gain = kept[-1][1] - kept[0][1]
    if len(kept) >= HELD_OUT_TESTED:
        x, y = np.asarray(kept, dtype=float).T
        return gain, len(kept), stats.trend(x, y).rising(0.05)
    return gain, len(kept), gain >= HELD_OUT_LEARNT


@register
class NoLearning(Detector):
    name = "no_learning"
    summary = "the reward has not improved over a run long enough to judge"
    needs = ((c.REWARD,),)
    least = NO_LEARNING_POINTS
    fix = NOT_LEARNING
    refs = (DEEPSEEKMATH,)

    def detect(self, view):
        x, y = view[c.REWARD]
        span = float(x[-1] - x[0])
        if span < NO_LEARNING_STEPS:
            return []
        t = stats.trend(x, y)
        h, tl = stats.head(y, 0.25), stats.tail(y, 0.25)
        start, end = stats.level(h), stats.level(tl)
        noise = scatter(stats.binned(x, y)[1])
        se = MEDIAN_SE * noise * math.sqrt(1 / len(h) + 1 / len(tl))
        if t.rising(NO_LEARNING_ALPHA) or end - start > NO_GAIN_SE * se:
            return []
        held = _held_out_gain(view)
        if held is not None and held[2]:
            return []  # the held-out score rose: the run learnt what the training reward does not show
        evidence = [f"{c.REWARD}: {start:.4g} (median of the first quarter) -> {end:.4g} (median of the last quarter), "
                    f"{end - start:+.3g} over {span:.0f} steps ({len(y)} logged points)",
                    f"the reward's step-to-step scatter is {noise:.3g} (robust SD): a real gain would be above "
                    f"{NO_GAIN_SE * se:.3g} ({NO_GAIN_SE:g} standard errors of that difference)",
                    f"trend over the run: Theil-Sen slope {t.slope:+.2e} per step ({p_text(t.p)}), "
                    + ("falling" if t.falling(NO_LEARNING_ALPHA) else "no significant rise")]
        # rose, then fell back: a significant rise up to its best stretch and a significant fall after it (the
        # highest of many running means of a noisy reward is the noise's own maximum, not a rise)
        k = max(3, len(y) // 10)
        smooth = np.convolve(y, np.ones(k) / k, mode="valid")  # (n - k + 1,) running means of k points
        top = int(np.argmax(smooth)) + k // 2
        up, down = stats.trend(x[:top + 1], y[:top + 1]), stats.trend(x[top:], y[top:])
        rose = up.rising(0.01) and down.falling(0.01)
        if rose:
            evidence.append(f"it rose to {float(smooth[top - k // 2]):.4g} (mean of {k} points around step "
                            f"{int(x[top])}; rising before, {p_text(up.p)}) and fell back ({p_text(down.p)}): "
                            "whatever it learnt was lost")
        if held is not None:
            evidence.append(f"held-out score: {held[0]:+.3f} from the first to the last of {held[1]} evaluations"
                            + (", no significant rise" if held[1] >= HELD_OUT_TESTED else ""))
        bounded = y.min() >= 0 and y.max() <= 1
        if bounded and float(np.mean(h)) >= CEILING:  # the mean: a median of 0.6s and 1s says 1
            evidence.append("the reward starts at its ceiling: there is nothing left to learn on these prompts")
            return [self.finding("info", x[0], f"the reward has not improved in {span:.0f} steps: it started at "
                                 "its ceiling", evidence, start=start, end=end, scatter=noise)]
        title = (f"the reward has not improved in {span:.0f} steps" + (" (it rose, then fell back)" if rose else
                 " (it fell)" if t.falling(NO_LEARNING_ALPHA) else ""))
        return [self.finding("warning", x[0], title, evidence, start=start, end=end, scatter=noise, steps=span)]


# pinned_reward: one exact value on PIN_LEAST consecutive logged points and on PIN_SHARE of them (PIN_FEW_VALUES:
# a series of at most this many distinct values, such as one episode's 0/1 reward, repeats by chance: it must hold
# the value on PIN_FEW_SHARE of its points); or, in a series of more values, one exact value on PIN_MODE_SHARE of
# PIN_LEAST or more points, consecutive or not (a reward back on exactly 1.0 step after step, between other values)
PIN_LEAST, PIN_SHARE = 8, 0.2
PIN_FEW_VALUES, PIN_FEW_SHARE = 3, 0.5
PIN_MODE_SHARE = 0.5
PIN_MODE_NEAR = 0.1  # ... with the other values, by their median, within this share of the run's range of it (a
# reward at 1.0 or 0.99: pinned; one at 0 on half the steps and 0.5 on the rest: a hard task, not a pin)
PIN_EVAL_LEAST = 4  # a held-out score: this many evaluations in a row at one value (and half of them): info
PIN_EVAL_WARNING = 6  # ... this many: a warning (greedy answers on a small fixed set repeat for a few evaluations
# of a short run whose policy barely moved; a measurement, it is never critical: no_learning names the cause)
PIN_CRITICAL = 0.5  # the training reward's streak reaches the last logged point and covers this share: critical


def _streak(y: np.ndarray) -> tuple[int, int]:
    """(start index, length) of the longest run of exactly equal consecutive values."""
    best = (0, 1 if len(y) else 0)
    start = 0
    for i in range(1, len(y) + 1):
        if i == len(y) or y[i] != y[start]:
            if i - start > best[1]:
                best = (start, i - start)
            start = i
    return best


@register
class PinnedReward(Detector):
    name = "pinned_reward"
    summary = "the reward (or the held-out score) sits on one exact value, step after step"
    needs = ((c.REWARD, c.EVAL),)
    least = 4
    fix = Fix(
        grposcope="read completions.jsonl at the pinned steps: a reward function that returns a constant (an "
        "exception caught into a default, a parser that never matches, a clip at its bound) pins it; "
        "grposcope audit-rewards on a sample",
        trl="log_completions=True and read the pinned steps' completions; test each reward function on them "
        "outside the trainer",
        verl="dump the rollouts (trainer.rollout_data_dir) at the pinned steps and run custom_reward_function on them",
    )

    def detect(self, view):
        findings = []
        for name, least in ((c.REWARD, PIN_LEAST), (c.EVAL, PIN_EVAL_LEAST)):
            x, y = view[name]
            if len(y) < least:
                continue
            start, length = _streak(y)
            share = length / len(y)
            values, counts = np.unique(y, return_counts=True)
            few = len(values) <= PIN_FEW_VALUES
            if length < least or share < (PIN_FEW_SHARE if few else PIN_SHARE if name == c.REWARD else 0.5):
                mode = float(values[np.argmax(counts)])
                off = np.abs(y[y != mode] - mode)  # the other values: near the mode (pinned) or a second level
                near = len(off) == 0 or float(np.median(off)) <= PIN_MODE_NEAR * float(np.ptp(y))
                if (name == c.REWARD and not few and near
                        and counts.max() >= max(PIN_LEAST, PIN_MODE_SHARE * len(y))):
                    findings.append(self._mode(x, y, mode))
                continue
            value = float(y[start])
            last = start + length == len(y)
            where = "at its lowest" if value <= y.min() else "at its highest" if value >= y.max() else ""
            held = x[start:start + length]
            steps = spans(held) if length < 12 else f"{int(held[0])}-{int(held[-1])}"
            evidence = [f"{name} is exactly {value:g} on {length} consecutive logged points (steps {steps}), "
                        f"{share:.0%} of the {len(y)} logged" + (f", {where} value" if where else "")
                        + ("; it is still there at the last logged step" if last else "")]
            std = view.array(c.REWARD_STD)[np.isin(view.steps, x[start:start + length])]
            if name == c.REWARD and np.isfinite(std).any() and np.nanmax(std) == 0:
                evidence.append("the reward's std is 0 on those steps: every completion got exactly this reward")
            evidence.append("a reward that does not move by a single digit is a constant somewhere: a verifier "
                            "that always fails or always passes, a default returned on error, a clip at its bound")
            if name == c.REWARD:
                severity = "critical" if last and share >= PIN_CRITICAL else "warning"
            else:
                severity = "warning" if length >= PIN_EVAL_WARNING else "info"
            what = "reward" if name == c.REWARD else "held-out score"
            findings.append(self.finding(severity, x[start], f"the {what} is pinned at exactly {value:g} for "
                                         f"{length} logged points", evidence, value=value, points=length,
                                         share=share))
        return findings

    def _mode(self, x: np.ndarray, y: np.ndarray, value: float):
        on = y == value
        where = "its lowest" if value <= y.min() else "its highest" if value >= y.max() else "one"
        evidence = [f"{c.REWARD} is exactly {value:g} on {int(on.sum())} of {len(y)} logged points ({on.mean():.0%}), "
                    f"{where} value, not all in a row (steps {spans(x[on])})",
                    "a reward averaged over a batch lands on one exact value step after step only when every "
                    "completion of those steps scored it: a ceiling or a floor the reward cannot leave"]
        return self.finding("warning", x[on][0], f"the reward is exactly {value:g} on {on.mean():.0%} of the logged "
                            "steps", evidence, value=value, points=int(on.sum()), share=float(on.mean()))


# held_out_regression: the held-out score fell from its best to its last evaluations (the median of the last
# quarter, at least REGRESSION_AFTER) by REGRESSION_DROP and REGRESSION_SHARE of the best, with at least
# REGRESSION_AFTER evaluations after the best. With REGRESSION_SMOOTHED or more evaluations the best is the highest
# running median of 3 (or a tenth of them), so one lucky evaluation is not the peak, and the last REGRESSION_AFTER
# are below it by half the drop asked; with fewer, each evaluation is a figure of its own, every one after the best
# is below it, and the finding says that no trend is tested
REGRESSION_DROP, REGRESSION_SHARE = 0.05, 0.10
REGRESSION_CRITICAL = 0.15
REGRESSION_AFTER = 2
REGRESSION_SMOOTHED = 6


@register
class HeldOutRegression(Detector):
    name = "held_out_regression"
    summary = "the held-out score falls from its best, whatever the training reward does"
    needs = ((c.EVAL,),)
    least = 2  # with the evaluation before training (accuracy_points), 3 evaluations make a judgement
    fix = Fix(
        grposcope="keep the checkpoint of the best evaluation (eval_steps, save_steps aligned); learning_rate lower "
        "or beta > 0 to hold the policy near the reference; read the completions of the later evaluations",
        trl="load_best_model_at_end=True with metric_for_best_model='eval_reward'; a lower learning_rate; beta > 0",
        verl="resume from the checkpoint of the best val-core score (trainer.save_freq = trainer.test_freq); "
        "actor_rollout_ref.actor.optim.lr down; actor_rollout_ref.actor.use_kl_loss=True",
    )

    def detect(self, view):
        steps, values = view.run.accuracy_points()  # the evaluation before training, where logged, as step 0
        keep = [math.isfinite(v) for v in values]
        ex = np.asarray([s for s, k in zip(steps, keep) if k], dtype=float)
        ey = np.asarray([v for v, k in zip(values, keep) if k], dtype=float)
        if len(ey) < 1 + REGRESSION_AFTER:
            return []
        smoothed = len(ey) >= REGRESSION_SMOOTHED
        k = max(3, len(ey) // 10)
        level = stats.smooth(ey, k) if smoothed else ey
        peak_i = int(np.argmax(level))
        peak = float(level[peak_i])
        after = ey[peak_i + 1:]
        if len(after) < REGRESSION_AFTER:
            return []
        last = float(np.median(stats.tail(ey, 0.25, least=REGRESSION_AFTER)))
        drop = peak - last
        need = max(REGRESSION_DROP, REGRESSION_SHARE * abs(peak))
        below = after < peak if not smoothed else after[-REGRESSION_AFTER:] < peak - need / 2
        if drop < need or not below.all():
            return []
        best = f"best {peak:.3f} at step {int(ex[peak_i])}" + (f" (running median of {k} evaluations)" if smoothed
                                                                  else "")
        evidence = [f"held-out score ({c.EVAL}): {best}, {last:.3f} over the last evaluations: -{drop:.3f}",
                    f"evaluations (step: score): {', '.join(f'{int(s)}: {v:.3f}' for s, v in zip(ex[-10:], ey[-10:]))}"
                    + (f" (the last 10 of {len(ey)})" if len(ey) > 10 else "")]
        if not smoothed:
            evidence.append(f"{len(ey)} evaluations: each is a figure of its own, the fall is read from the best and "
                            f"the {len(after)} after it; no trend is tested ({REGRESSION_SMOOTHED} or more are needed)")
        if ey[-1] < ey[0] - REGRESSION_DROP:
            evidence.append(f"it ends below its first evaluation ({ey[0]:.3f}): training made the policy worse on "
                            "held-out prompts")
        rx, ry = view[c.REWARD]
        if len(ry) >= 4:
            t = stats.trend(rx[rx >= ex[peak_i]], ry[rx >= ex[peak_i]])
            said = ("rises (see reward_hacking)" if t.rising(0.01) else "falls too: a worse policy" if
                    t.falling(0.01) else "has no significant trend")
            evidence.append(f"the training reward over the same steps {said} ({p_text(t.p)})")
        severity = "critical" if drop >= REGRESSION_CRITICAL else "warning"
        first = int(ex[peak_i + 1])
        return [self.finding(severity, first, f"the held-out score fell from {peak:.3f} to {last:.3f}", evidence,
                             peak=peak, last=last, peak_step=float(ex[peak_i]), evaluations=len(ey))]
