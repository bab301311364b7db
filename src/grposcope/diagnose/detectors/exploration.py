"""How far and how freely the policy moves: `entropy_collapse`, `kl_drift`, `clip_saturation`."""

from __future__ import annotations

import numpy as np

from ...runs import catalogue as c
from .. import stats
from ..findings import DAPO, ENTROPY_MECHANISM, OVEROPTIMIZATION, PPO, SUMMARIZE, Fix
from .base import Detector, alarm_rules, alarm_steps, p_text, register, spans

# entropy_collapse
ENTROPY_FALL = 0.25  # the last tenth's entropy at or below this share of the first tenth's: a collapse
ENTROPY_HEADING = 0.50  # "heading for the floor" once it has lost half of its start (a mild decline is normal)
ENTROPY_CRITICAL = 0.10  # ... at or below this share, with the score flat: critical (else a warning)
TREND_ALPHA = 0.01  # Mann-Kendall significance for every "rising" / "falling" the detectors state
REWARD_CLIMB = 0.05  # the reward rose by at least this share of its range over the same steps: still learning


HELD_OUT_GAIN = 0.05  # a held-out score evaluated only a few times: this gain across `since` counts as learning


def _held_out_gain(view, since: float) -> tuple[bool, str] | None:
    """With fewer than 6 held-out evaluations (grposcope evaluates before and after a run): whether the first one
    after `since` beats the last one before it by HELD_OUT_GAIN; None when there is none on either side."""
    steps, values = view.run.accuracy_points()  # the evaluation before training as step 0
    before = [(s, v) for s, v in zip(steps, values) if s <= since]
    after = [(s, v) for s, v in zip(steps, values) if s > since]
    if not before or not after:
        return None
    (s0, v0), (s1, v1) = before[-1], after[-1]
    gained = v1 - v0 >= HELD_OUT_GAIN
    return gained, (f"held-out score {v0:.3f} at step {s0} -> {v1:.3f} at step {s1}: "
                    f"{'the policy still improved' if gained else 'no gain'} while its entropy fell")


def _still_learning(view, since: float) -> tuple[bool, str]:
    """Whether the reward (the held-out score where logged) still rose significantly after step `since`."""
    if not view.has(c.EVAL, 6) and (held := _held_out_gain(view, since)) is not None:
        return held
    name = c.EVAL if view.has(c.EVAL, 6) else c.REWARD
    x, y = view[name]
    keep = x >= since
    if keep.sum() < 4:
        return False, ""
    t = stats.trend(x[keep], y[keep])
    span = float(np.ptp(y)) or 1.0
    gain = t.slope * float(x[keep][-1] - x[keep][0])
    rising = t.rising(TREND_ALPHA if name == c.REWARD else 0.05) and gain >= REWARD_CLIMB * span
    return rising, (f"{name} over steps {int(x[keep][0])}-{int(x[keep][-1])}: Theil-Sen slope {t.slope:+.2e} per "
                    f"step ({p_text(t.p)}), {'still rising' if rising else 'not rising'}")


def entropy_collapsed(view) -> tuple[bool, list[int], bool, float, float]:
    """(collapsed, the steps the entropy rule was on, fell to a quarter, start, end). Collapsed: the alarm's rule
    held (below the floor for a window, after having been above) and the entropy lost at least half of its start,
    or it fell to a quarter of its start with a falling trend. The floor alone is absolute, and models differ:
    one that starts at 0.8 nats and settles at 0.45 has converged, not collapsed."""
    if "entropy" not in view.memo:
        x, h = view[c.ENTROPY]
        start, end = stats.level(stats.head(h)), stats.level(stats.tail(h, 0.1))
        on = alarm_steps(view, "entropy_collapse", judge_gain=False)  # the gain: _still_learning, below
        fell = start > 0 and end <= ENTROPY_FALL * start and stats.trend(x, h).falling(TREND_ALPHA)
        lost_half = start > 0 and end <= ENTROPY_HEADING * start
        view.memo["entropy"] = (bool(on and lost_half) or bool(fell), on, bool(fell), start, end)
    return view.memo["entropy"]


@register
class EntropyCollapse(Detector):
    name = "entropy_collapse"
    summary = "the policy's token entropy falls to its floor (exploration ends) while the reward stops improving"
    needs = ((c.ENTROPY,),)
    least = 8
    fix = Fix(
        grposcope="epsilon_high=0.28 (clip-higher); entropy_coef=0.001 (an entropy bonus); a higher temperature",
        trl="epsilon_high=0.28 (clip-higher); temperature=1.0 or above; a lower learning_rate",
        verl="actor_rollout_ref.actor.clip_ratio_high=0.28; actor_rollout_ref.actor.entropy_coeff=0.001; "
        "actor_rollout_ref.rollout.temperature=1.0",
    )
    refs = (ENTROPY_MECHANISM, DAPO)

    def detect(self, view):
        x, h = view[c.ENTROPY]
        floor = view.options.entropy_floor
        collapsed, on, fell, start, end = entropy_collapsed(view)
        rules = alarm_rules(view)
        half = x >= x[len(x) // 2]
        late = stats.trend(x[half], h[half])
        horizon = view.setting("max_steps") or 1.5 * view.last_step
        arrival = stats.crossing(late, floor, view.last_step) if late.falling(TREND_ALPHA) and end > floor else None
        heading = arrival is not None and arrival <= horizon and end <= ENTROPY_HEADING * start
        if not (collapsed or heading):
            return []
        onset = on[0] if on and collapsed else int(x[np.argmax(h <= ENTROPY_FALL * start)]) if fell else None
        learning, reward_line = _still_learning(view, onset if onset is not None else x[len(x) // 2])
        # the floor rule held, yet the live alarm (which asks whether the score still rises, window by window)
        # never fired: one rule for the alarm and the finding, so no warning that the run's own alarm did not raise
        alarm_quiet = bool(on) and not learning and not alarm_steps(view, "entropy_collapse")
        if alarm_quiet:
            reward_line = (f"{reward_line}; " if reward_line else "") + (
                "grposcope's entropy_collapse alarm, replayed on this log, never fired: over each window it checked "
                f"the held-out score (else the reward) rose by {rules.entropy_gain} or more, or too few steps were "
                "logged to tell")
        evidence = [f"entropy/mean fell from {start:.3f} nats (median of the first tenth) to {end:.3f} (last tenth), "
                    f"{(end - start) / start:+.0%}" if start > 0 else f"entropy/mean ends at {end:.3f} nats"]
        if on and collapsed:
            evidence.append(f"below the floor {floor} nats for more than {rules.entropy_steps} steps in a row from "
                            f"step {on[0] - rules.entropy_steps} (the floor of grposcope's entropy_collapse alarm)")
        if arrival is not None:
            evidence.append(f"over the last half it falls {late.slope:+.2e} nats per step ({p_text(late.p)}): at that "
                            f"rate it reaches the floor {floor} at step ~{arrival:.0f}")
        if reward_line:
            evidence.append(reward_line)
        deep = start > 0 and end <= ENTROPY_CRITICAL * start  # an order of magnitude down: nearly deterministic
        if alarm_quiet and not deep:
            return [self.finding("info", onset or x[-1], "entropy fell below the floor, but the run's entropy alarm "
                                 "never fired: the score rose over each window it checked", evidence, start=start,
                                 end=end)]
        learning = learning or alarm_quiet
        if learning and not (collapsed and deep):
            return [self.finding("info", onset or x[-1], "entropy falls while the reward still climbs (convergence, "
                                 "not yet a collapse)", evidence, start=start, end=end)]
        if learning:  # the score still rises, but groups of a near-deterministic policy will soon all agree
            return [self.finding("warning", onset, "the policy's entropy has collapsed by an order of magnitude; the "
                                 "score still rises, but its groups will soon give identical answers", evidence,
                                 start=start, end=end)]
        if collapsed:
            # an order of magnitude below its start: nothing left to explore; less: a warning
            severity = "critical" if start > 0 and end <= ENTROPY_CRITICAL * start else "warning"
            return [self.finding(severity, onset, "the policy's entropy has collapsed and the reward stopped "
                                 "improving: exploration is over", evidence, start=start, end=end)]
        return [self.finding("warning", x[-1], f"entropy heads for the floor (step ~{arrival:.0f}) while the reward "
                             "is flat", evidence, start=start, end=end, arrival=arrival)]


# kl_drift
KL_RUNAWAY = 0.1  # nats per token: a KL this large that still accelerates is heading somewhere
KL_ACCELERATION = 3.0  # the second half's slope at least this multiple of the first half's: super-linear growth
KL_JUMP, KL_JUMP_WINDOW = 100.0, 25  # one step's KL at this multiple of the median of the steps before it


@register
class KLDrift(Detector):
    name = "kl_drift"
    summary = "the policy's KL to the reference grows past a bound, or grows faster and faster"
    needs = ((c.KL,),)
    least = 8
    fix = Fix(
        grposcope="beta up (e.g. 0.04 -> 0.1) to hold the policy near the reference; a lower learning_rate",
        trl="beta up (TRL's default is 0.0: set e.g. beta=0.04); a lower learning_rate",
        verl="actor_rollout_ref.actor.use_kl_loss=True with a larger actor_rollout_ref.actor.kl_loss_coef; "
        "actor_rollout_ref.actor.optim.lr down",
    )
    refs = (SUMMARIZE, OVEROPTIMIZATION)

    def detect(self, view):
        x, k = view[c.KL]
        bound = view.options.kl_bound
        on = alarm_steps(view, "kl_drift")
        recent = stats.level(stats.tail(k, 0.1))
        half = len(x) // 2
        early, late = stats.trend(x[:half], k[:half]), stats.trend(x[half:], k[half:])
        runaway = (late.rising(TREND_ALPHA) and recent > KL_RUNAWAY
                   and late.slope > KL_ACCELERATION * max(early.slope, 1e-12))
        if not (recent > bound or runaway):
            return self._jumps(x, k)
        evidence = [f"kl/mean: median {recent:.3f} over the last tenth of the run, {stats.level(stats.head(k)):.3f} "
                    f"over the first (bound {bound}: grposcope's kl_drift rule)"]
        if on:
            evidence.append(f"above the bound on {len(on)} logged steps, first at step {on[0]}")
        evidence.append(f"slope {early.slope:+.2e} per step over the first half, {late.slope:+.2e} over the second "
                        f"({p_text(late.p)})")
        beta = view[c.BETA][1]
        if len(beta):
            evidence.append(f"the KL coefficient in force: {beta[-1]:g}")
        if recent > bound:
            severity = "critical" if late.rising(TREND_ALPHA) else "warning"
            first = on[0] if on else int(x[np.argmax(k > bound)])
            return [self.finding(severity, first, "the policy has drifted far from the reference and "
                                 + ("keeps drifting" if severity == "critical" else "stays there"), evidence,
                                 recent=recent)]
        arrival = stats.crossing(late, bound, view.last_step)
        if arrival is not None:
            evidence.append(f"at the second half's rate it passes the bound at step ~{arrival:.0f}")
        return [self.finding("warning", x[half], "KL to the reference grows faster and faster", evidence,
                             recent=recent)]


    def _jumps(self, x: np.ndarray, k: np.ndarray) -> list:
        """Single steps whose KL is KL_JUMP times the median of the KL_JUMP_WINDOW steps before it (on a log scale, so
        a KL of 1e-7 that moves to 1e-5 is measured as one of 0.1 that moves to 10) and KL_RUNAWAY nats or more:
        the policy leapt away from the reference for a step, even if it came back."""
        keep = k > 0
        xs, ks = x[keep], k[keep]
        if len(ks) < 8:
            return []
        base = np.exp(stats.rolling_median(np.log(ks), KL_JUMP_WINDOW))
        with np.errstate(invalid="ignore"):
            jump = np.isfinite(base) & (ks >= KL_JUMP * base) & (ks >= KL_RUNAWAY)
        if not jump.any():
            return []
        i = int(np.flatnonzero(jump)[np.argmax(ks[jump] / base[jump])])
        evidence = [f"kl/mean jumps to {ks[i]:.3g} at step {int(xs[i])}, {ks[i] / base[i]:.0f}x the median of the "
                    f"{KL_JUMP_WINDOW} steps before ({base[i]:.3g}); {int(jump.sum())} such step(s): {spans(xs[jump])}",
                    f"the run's KL is otherwise {stats.level(stats.tail(k, 0.1)):.3f} over its last tenth: not a "
                    "drift, a step whose update moved the policy far at once (a huge ratio or advantage, a bad batch)"]
        return [self.finding("warning", xs[jump][0], "the KL to the reference jumps by orders of magnitude on single "
                             "steps", evidence, largest=float(ks[i] / base[i]))]


# clip_saturation: the median clipped share of tokens over the last quarter
CLIP_INFO, CLIP_WARNING, CLIP_CRITICAL = 0.05, 0.15, 0.30
CLIP_ASYMMETRY = 3.0  # one side clipped this many times more than the other: the bounds suit one sign only


def clipped(view, least: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(steps, clipped share of tokens): the logged total where it has `least` points, else the two sides summed
    on the steps that logged both."""
    if view.has(c.CLIP, least):
        return view[c.CLIP]
    x, low, high = view.aligned(c.CLIP_LOW, c.CLIP_HIGH)
    return x, low + high


@register
class ClipSaturation(Detector):
    name = "clip_saturation"
    summary = "a large share of tokens clipped by the trust region, so their gradient is thrown away"
    needs = ((c.CLIP, c.CLIP_LOW, c.CLIP_HIGH),)
    fix = Fix(
        grposcope="a lower learning_rate or fewer num_iterations (updates per generation); epsilon_high=0.28 "
        "(clip-higher) when the upper side saturates",
        trl="a lower learning_rate; num_iterations=1; epsilon_high=0.28 when the upper side saturates",
        verl="actor_rollout_ref.actor.optim.lr down; actor_rollout_ref.actor.ppo_epochs=1 or a larger "
        "ppo_mini_batch_size; actor_rollout_ref.actor.clip_ratio_high=0.28",
    )
    refs = (PPO, DAPO)

    def detect(self, view):
        x, total = clipped(view, least=4)
        if len(total) < 4:
            return []
        recent = stats.level(stats.tail(total))
        if recent < CLIP_INFO:
            return []
        severity = "critical" if recent >= CLIP_CRITICAL else "warning" if recent >= CLIP_WARNING else "info"
        evidence = [f"{recent:.1%} of tokens clipped (median over {stats.where_text(stats.tail(x))}; "
                    f"{np.mean(total):.1%} over the run): "
                    "their ratio left [1 - epsilon, 1 + epsilon_high] and they gave no gradient"]
        _, low, high = view.aligned(c.CLIP_LOW, c.CLIP_HIGH)
        if len(low) >= 4:
            lo, hi = stats.level(stats.tail(low)), stats.level(stats.tail(high))
            evidence.append(f"lower side {lo:.1%}, upper side {hi:.1%}")
            if hi >= CLIP_ASYMMETRY * max(lo, 1e-9) and hi >= CLIP_INFO:
                evidence.append("the upper bound does the clipping: tokens whose probability should rise are held "
                                "back (DAPO's clip-higher widens that side)")
        first = int(x[np.argmax(total >= CLIP_INFO)])
        return [self.finding(severity, first, "the trust region clips a large share of the update", evidence,
                             recent=recent)]
