"""What the reward says: `reward_hacking`, `reward_composition`, `plateau`."""

from __future__ import annotations

import numpy as np

from ...runs import catalogue as c
from .. import stats
from ..findings import DEEPSEEK_R1, OVEROPTIMIZATION, Fix
from .base import Detector, p_text, register

TREND_ALPHA = 0.01
EVAL_ALPHA = 0.05  # the held-out score has few points: a looser test, stated in the evidence

# reward_hacking: the held-out score (smoothed over a tenth of the evaluations, at least 3) fell from its peak by both
# of these, and its fall after the peak is significant (Mann-Kendall p < 0.05)
HACK_DROP, HACK_DROP_SHARE = 0.05, 0.10
HACK_CRITICAL_DROP = 0.15
# ... or the two diverge: the training reward gained at least HACK_GAIN (between the medians of the run's first and
# last tenth) while the held-out score gained at most HACK_TRANSFER of that (between its first and last quarter)
HACK_GAIN, HACK_TRANSFER = 0.20, 0.15
# with fewer than HACK_SMOOTHED evaluations (real runs often evaluate 3 to 5 times) each evaluation is a figure of its
# own: the fall is read from the best one and every one after it (at least HACK_FEW_AFTER, each below the best, the
# last by HACK_DROP and HACK_DROP_SHARE), and the training reward must rise significantly over the steps after the best
HACK_SMOOTHED, HACK_FEW_AFTER = 6, 2


@register
class RewardHacking(Detector):
    name = "reward_hacking"
    summary = "the training reward rises while the held-out score falls: the verifier is being gamed"
    needs = ((c.REWARD,), (c.EVAL,))
    least = 3  # three evaluations make a judgement from figures (_fell_few, _diverged); a trend needs HACK_SMOOTHED
    fix = Fix(
        grposcope="read the high-reward completions (completions.jsonl) and run grposcope audit-rewards to see what "
        "the verifier accepts; a stricter reward; beta > 0; keep the checkpoint from before the held-out peak",
        trl="log_completions=True and read the high-reward completions; a stricter reward function; beta > 0; "
        "load_best_model_at_end=True with metric_for_best_model='eval_reward'",
        verl="trainer.rollout_data_dir=DIR to dump rollouts and read them; a stricter custom_reward_function; "
        "actor_rollout_ref.actor.use_kl_loss=True; resume from the checkpoint before the held-out peak",
    )
    refs = (OVEROPTIMIZATION,)

    def detect(self, view):
        ex, ey = view[c.EVAL]
        if len(ey) < 3:
            return []
        fell = self._fell(view, ex, ey) if len(ey) >= HACK_SMOOTHED else self._fell_few(view, ex, ey)
        return fell or self._diverged(view, ex, ey)

    def _diverged(self, view, ex, ey):
        """The training reward climbs and the held-out score does not follow: the gain does not transfer."""
        rx, ry = view[c.REWARD]
        if len(ry) < stats.SHORT_RUN:
            return []
        t = stats.trend(rx, ry)
        r0, r1 = stats.level(stats.head(ry)), stats.level(stats.tail(ry, 0.1))
        # the first and the last quarter of the evaluations, as many of each (a quarter of 3 is the first against
        # the last: a window of two at one end only would take the middle evaluation for the end)
        e0, e1 = stats.level(stats.head(ey, 0.25, least=1)), stats.level(stats.tail(ey, 0.25, least=1))
        gain, moved = r1 - r0, e1 - e0
        if not (t.rising(TREND_ALPHA) and gain >= HACK_GAIN and moved <= HACK_TRANSFER * gain):
            return []
        k = len(stats.head(ey, 0.25, least=1))
        held = (f"{e0:.3f} (the first of {len(ey)} evaluations) -> {e1:.3f} (the last; no trend is tested from "
                f"under {HACK_SMOOTHED})" if k == 1 else
                f"{e0:.3f} (median of the first {k} of {len(ey)} evaluations) -> {e1:.3f} (of the last {k})")
        evidence = [f"training reward ({c.REWARD}): {r0:.3f} (median of the first tenth) -> {r1:.3f} (last tenth), "
                    f"{gain:+.3f}, slope {t.slope:+.2e} per step ({p_text(t.p)})",
                    f"held-out score ({c.EVAL}): {held}, {moved:+.3f}: {max(moved, 0) / gain:.0%} of the training gain",
                    "the policy gets better at what the training reward pays for, not at the held-out task"]
        severity = "critical" if moved < 0 else "warning"
        first = int(rx[np.argmax(ry >= r0 + gain / 2)])
        return [self.finding(severity, first, "the training reward rises while the held-out score does not follow",
                             evidence, train_gain=gain, held_out_gain=moved)]

    def _fell_few(self, view, ex, ey):
        peak_i = int(np.argmax(ey))
        peak, after = float(ey[peak_i]), ey[peak_i + 1:]
        if len(after) < HACK_FEW_AFTER:
            return []
        last = float(ey[-1])
        drop = peak - last
        if drop < HACK_DROP or drop < HACK_DROP_SHARE * abs(peak) or not (after < peak).all():
            return []
        rx, ry = view[c.REWARD]
        since = rx >= ex[peak_i]
        t_all, t_after = stats.trend(rx, ry), stats.trend(rx[since], ry[since])
        if not (t_all.rising(TREND_ALPHA) and t_after.rising(TREND_ALPHA)):
            return []  # the training reward does not keep rising past the held-out best: not a gamed verifier
        evidence = [f"held-out score ({c.EVAL}) at its {len(ey)} evaluations: "
                    + ", ".join(f"{v:.3f} (step {int(s)})" for s, v in zip(ex, ey))
                    + f"; best {peak:.3f}, last {last:.3f}: -{drop:.3f}",
                    f"training reward after the best evaluation: slope {t_after.slope:+.2e} per step "
                    f"({p_text(t_after.p)}), {stats.level(ry[since][:3]):.3f} -> "
                    f"{stats.level(stats.tail(ry, 0.1)):.3f}",
                    f"{len(ey)} evaluations: each is a figure of its own; no trend of the held-out score is tested "
                    f"({HACK_SMOOTHED} or more are needed), the fall is every evaluation after the best being below it"]
        first = int(ex[peak_i + 1])
        return [self.finding("critical" if drop >= HACK_CRITICAL_DROP else "warning", first,
                             "the training reward rises while the held-out score falls", evidence, peak=peak,
                             last=last, peak_step=float(ex[peak_i]))]

    def _fell(self, view, ex, ey):
        k = max(3, len(ey) // 10)  # a tenth of the evaluations: with many, the max of short medians is noise
        smooth = stats.smooth(ey, k)
        peak_i = int(np.argmax(smooth))
        peak, last = float(smooth[peak_i]), float(np.median(stats.tail(ey, 0.25, least=2)))
        drop = peak - last
        if peak_i >= len(ey) - 1 or drop < HACK_DROP or drop < HACK_DROP_SHARE * abs(peak):
            return []
        rx, ry = view[c.REWARD]
        after = rx >= ex[peak_i]
        t_all, t_after = stats.trend(rx, ry), stats.trend(rx[after], ry[after])
        if not (t_all.rising(TREND_ALPHA) and t_after.slope >= 0):
            return []  # the training reward falls too: a worse policy, not a gamed verifier
        falls = stats.trend(ex[peak_i:], ey[peak_i:])
        if not falls.falling(EVAL_ALPHA):
            return []  # a dip that is not a fall (a noisy peak, a flat score): nothing gamed
        evidence = [f"held-out score ({c.EVAL}) peaked at {peak:.3f} at step {int(ex[peak_i])} (median of {k} "
                    f"evaluations) and is at {last:.3f} over the last quarter of evaluations: -{drop:.3f}",
                    f"training reward over the run: slope {t_all.slope:+.2e} per step ({p_text(t_all.p)}); after the "
                    f"peak {t_after.slope:+.2e}",
                    f"held-out score after its peak: slope {falls.slope:+.2e} per step ({p_text(falls.p)}, "
                    f"{len(ey) - peak_i} evaluations)"]
        severity = "critical" if drop >= HACK_CRITICAL_DROP or falls.falling(TREND_ALPHA) else "warning"
        first = int(ex[min(peak_i + 1, len(ex) - 1)])
        return [self.finding(severity, first, "the training reward rises while the held-out score falls", evidence,
                             peak=peak, last=last, peak_step=float(ex[peak_i]))]


# reward_composition
DOMINANT = 0.90  # one function holds this share of the within-step reward variance (median over steps)
GAIN_DOMINANT = 0.80  # ... or this share of the reward's gain over the run (first tenth to last tenth)
GAIN_STARVED = 0.20  # while another gained less than this share of the dominant one's gain
GAIN_MIN = 0.05  # the dominant gain itself, in reward units: below it nothing moved enough to share
CONSTANT = 1e-9  # a function whose mean and std never move more than this is constant
NEAR_CONSTANT_SHARE = 0.9  # ... or one that holds one value on this share of the steps,
NEAR_CONSTANT_SPREAD = 0.05  # with a range under this share of the widest function's range: it adds ~nothing


def _functions(view) -> list[str]:
    return c.reward_functions([n for n in view.run.series if view.has(n, 4)])


@register
class RewardComposition(Detector):
    name = "reward_composition"
    summary = "with several reward functions: one carries all the variance, or one is constant"
    needs = ((c.REWARD_FUNC_MEAN,),)
    fix = Fix(
        grposcope="reward_weights to rebalance the functions; drop a constant one (it adds the same to every "
        "completion); check the starved one's verifier on completions.jsonl",
        trl="reward_weights; multi_objective_aggregation='normalize_then_sum'; drop a constant reward function",
        verl="rebalance the terms inside custom_reward_function; drop a constant term",
    )
    refs = (DEEPSEEK_R1,)

    def missing(self, view):
        return "" if len(_functions(view)) >= 2 else "needs two or more reward functions (TRL: rewards/<func>/mean)"

    def detect(self, view):
        funcs = _functions(view)
        means = {f: view[f"reward/{f}/mean"] for f in funcs}
        stds = {f: view[f"reward/{f}/std"] for f in funcs}
        dead = [f for f in funcs if np.ptp(means[f][1]) <= CONSTANT and
                (not len(stds[f][1]) or np.max(stds[f][1]) <= CONSTANT)]
        dead += [f for f in funcs if f not in dead and self._near_constant(means, f)]
        shares = self._shares(view, funcs)
        dominant = [f for f, s in shares.items() if s >= DOMINANT]
        starved = [f for f in funcs if f not in dominant and not stats.trend(*means[f]).rising(TREND_ALPHA)]
        gains, by_gain, gain_starved = self._gains(means)
        if not dead and not (dominant and starved) and not (by_gain and gain_starved):
            return []
        if by_gain and gain_starved and not (dominant and starved):
            dominant, starved = [by_gain], gain_starved
        evidence = []
        for f in dead:
            y = means[f][1]
            value, count = self._mode(y)
            evidence.append(f"reward/{f}/mean is {value:g} on every one of {len(y)} logged steps: it adds the same to "
                            "every completion and never moves an advantage" if count == len(y) else
                            f"reward/{f}/mean is {value:g} on {count} of {len(y)} logged steps (range {y.min():.3g} to "
                            f"{y.max():.3g}, under {NEAR_CONSTANT_SPREAD:.0%} of the widest function's): it moves "
                            "almost no advantage")
        if shares:
            within = all(view.has(f"reward/{f}/std", 4) for f in funcs)
            evidence.append(("share of the within-step reward variance (median over steps): " if within else
                             "share of the variance of the step means over the run (no per-function std logged): ")
                            + ", ".join(f"{f} {s:.0%}" for f, s in shares.items()))
        if by_gain:
            total = sum(max(g, 0.0) for g, _, _ in gains.values())
            evidence.append("share of the reward's gain over the run (median of the first tenth to the last): "
                            + ", ".join(f"{f} {max(g, 0) / total:.0%} ({a:.3f} -> {b:.3f})"
                                        for f, (g, a, b) in gains.items()))
        zero_dead = [f for f in dead if self._mode(means[f][1])[0] == 0]
        severity = "critical" if zero_dead and dominant else "warning" if zero_dead or dominant else "info"
        what = "gain" if by_gain == (dominant[0] if dominant else None) and not shares.get(by_gain, 0) >= DOMINANT \
            else "variance"
        nearly = "" if all(self._mode(means[f][1])[1] == len(means[f][1]) for f in dead) else "(nearly) "
        if dominant:
            title = (f"{dominant[0]} carries the reward's {what}; "
                     + (f"{', '.join(dead)} {nearly}never varies" if dead else f"{', '.join(starved)} barely moves"))
        else:
            title = (f"reward functions {', '.join(dead)} are {nearly}constant over the run" if len(dead) > 1 else
                     f"reward function {dead[0]} is {nearly}constant over the run")
        return [self.finding(severity, view.run.steps[0], title, evidence, dead=len(dead),
                             dominant_share=max(shares.values(), default=0.0))]

    @staticmethod
    def _mode(y: np.ndarray) -> tuple[float, int]:
        values, counts = np.unique(y, return_counts=True)
        return float(values[np.argmax(counts)]), int(counts.max())

    def _near_constant(self, means, f: str) -> bool:
        y = means[f][1]
        widest = max(float(np.ptp(m[1])) for m in means.values())
        return (self._mode(y)[1] >= NEAR_CONSTANT_SHARE * len(y) and widest > 0
                and float(np.ptp(y)) < NEAR_CONSTANT_SPREAD * widest)

    def _gains(self, means) -> tuple[dict[str, tuple[float, float, float]], str | None, list[str]]:
        """Per function (gain, start, end) between the medians of the first and the last tenth; the function that
        holds GAIN_DOMINANT of the summed gains (rising, p < 0.01), and those that gained less than GAIN_STARVED
        of its gain and end below half its level (room left that the dominant one does not leave)."""
        gains = {}
        for f, (x, y) in means.items():
            a, b = stats.level(stats.head(y)), stats.level(stats.tail(y, 0.1))
            gains[f] = (b - a, a, b)
        total = sum(max(g, 0.0) for g, _, _ in gains.values())
        if total <= 0:
            return gains, None, []
        top = max(gains, key=lambda f: gains[f][0])
        g, _, end = gains[top]
        if g < GAIN_MIN or g / total < GAIN_DOMINANT or not stats.trend(*means[top]).rising(TREND_ALPHA):
            return gains, None, []
        starved = [f for f, (gf, _, ef) in gains.items() if f != top and gf < GAIN_STARVED * g and ef < 0.5 * end]
        return gains, top, starved

    def _shares(self, view, funcs: list[str]) -> dict[str, float]:
        """Per function, the median over steps of its std^2 / the sum of all functions' std^2; without the
        per-function std (verl, most custom logs), each function's share of the variance of its step means over
        the run (a proxy: what moves the reward from step to step)."""
        names = [f"reward/{f}/std" for f in funcs]
        if not all(view.has(n, 4) for n in names):
            _, *means = view.aligned(*(f"reward/{f}/mean" for f in funcs))
            var = np.array([np.var(m) for m in means])
            return {f: float(v / var.sum()) for f, v in zip(funcs, var)} if var.sum() > 0 else {}
        _, *stds = view.aligned(*names)
        var = np.vstack(stds) ** 2  # (F, steps)
        total = var.sum(axis=0)
        keep = total > 0
        if not keep.any():
            return {}
        return {f: float(np.median(var[i, keep] / total[keep])) for i, f in enumerate(funcs)}


# plateau: a line fitted to the score rises, then stays flat (stats.hinge), and the run went on for at least
# PLATEAU_SHARE of its length (PLATEAU_WARNING: a warning) after the bend without gaining more
PLATEAU_SHARE, PLATEAU_WARNING = 0.30, 0.40
PLATEAU_MIN_STEPS = 20
PLATEAU_POINTS = 10  # training-reward points a rise-then-flat fit needs (as no_learning: a log every 10 of 100 steps)
PLATEAU_GAIN = 0.05  # the score must first have risen by this much
PLATEAU_REST = 0.05  # ... and the line fitted after the bend does not rise significantly (p < 0.05) by this share of it
PLATEAU_NOISE = 2.0  # ... and by at least twice the scatter of the points around the fitted line


@register
class Plateau(Detector):
    name = "plateau"
    summary = "the run learnt, then stopped: many steps since the last gain, still spending compute"
    needs = ((c.EVAL, c.REWARD),)
    least = 6
    fix = Fix(
        grposcope="stop at the step of the last gain (max_steps) and keep that checkpoint; to learn more: harder "
        "prompts, a larger num_generations, a learning-rate schedule (lr_scheduler_type='cosine')",
        trl="max_steps at the last gain, or transformers' EarlyStoppingCallback on eval_reward; harder data",
        verl="trainer.total_training_steps at the last gain; harder data",
    )
    refs = ()

    def detect(self, view):
        name = c.EVAL if view.has(c.EVAL, 6) else c.REWARD
        x, y = view[name]
        if len(y) < (6 if name == c.EVAL else PLATEAU_POINTS):
            return []
        x, y = stats.binned(x, y)  # a long log: bin medians, so the fit below stays cheap
        fit = stats.hinge(x, y)  # a rising line, then flat: where the rise ended, fitted on every point
        if fit is None:
            return []
        reached, start, top, noise = fit
        gain = top - start
        # the rise tested when it has points enough for Mann-Kendall to reach p < 0.01 (6: 5 perfectly ordered points
        # give p = 0.017 at best); a held-out score at 0.05, as elsewhere; fewer points: the gain/noise ratio decides
        rise = stats.trend(x[:reached + 1], y[:reached + 1])
        alpha = EVAL_ALPHA if name == c.EVAL else TREND_ALPHA
        if gain < max(PLATEAU_GAIN, PLATEAU_NOISE * noise) or (rise.n >= 6 and not rise.rising(alpha)):
            return []  # never rose, or rose within the run's noise: a collapse or a too-hard task, not a plateau
        if name == c.EVAL and not self._trained(view):
            return []  # a held-out rise the training reward does not share is the few eval points' noise
        flat = float(x[-1] - x[reached])
        length = float(x[-1] - x[0]) or 1.0
        after = stats.trend(x[reached:], y[reached:])
        rest = after.slope * flat  # what the line fitted since then gained
        creeping = after.rising(EVAL_ALPHA) and rest >= PLATEAU_REST * gain  # still gaining: not stalled
        if flat / length < PLATEAU_SHARE or flat < PLATEAU_MIN_STEPS or creeping:
            return []
        if after.falling(EVAL_ALPHA) and name == c.EVAL:
            return []  # falling, not flat: reward_hacking's or a regression's business
        explained = self._explained(view)
        if explained:
            return []
        severity = "warning" if flat / length >= PLATEAU_WARNING else "info"
        evidence = [f"{name} rose from {start:.3f} to {top:.3f} by step {int(x[reached])} and stayed there (a line "
                    f"fitted to every logged point, rising then flat; the points scatter {noise:.3f} around it); the "
                    f"last {flat:.0f} steps ({flat / length:.0%} of the run) added {rest:+.3f} on a line fitted to "
                    "them",
                    f"slope since then {after.slope:+.2e} per step ({p_text(after.p)})"]
        return [self.finding(severity, x[reached], f"no gain for the last {flat:.0f} steps", evidence,
                             since=float(x[reached]), share=flat / length)]

    def _trained(self, view) -> bool:
        """The training reward rose beyond its scatter too (True when it is not logged on 20 or more steps): a
        plateau is a run that learnt, then stopped."""
        x, y = view[c.REWARD]
        if len(y) < 20:
            return True
        fit = stats.hinge(*stats.binned(x, y))
        return fit is not None and fit[2] - fit[1] >= PLATEAU_NOISE * fit[3]

    def _explained(self, view) -> bool:
        """Another finding explains the stall: entropy collapsed, or most groups all-correct (saturated)."""
        from .exploration import entropy_collapsed

        if view.has(c.ENTROPY, 8) and entropy_collapsed(view)[0]:
            return True
        from ..signals import collapse_series, recent_share
        from .collapse import COLLAPSE_WARNING

        found = collapse_series(view)
        return found is not None and recent_share(found)[1] >= COLLAPSE_WARNING
