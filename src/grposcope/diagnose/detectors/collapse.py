"""Groups and steps that bought no gradient: `advantage_collapse` and `no_signal_steps`."""

from __future__ import annotations

import numpy as np

from ...runs import catalogue as c
from .. import stats
from ..findings import ACR_PAPER, DAPO, REINFORCE_ADA, SEVERITIES, Fix, rank
from ..signals import collapse_series, group_size, no_signal_mask, not_binary, recent_share, rewards_alike, signal_known
from .base import Detector, alarm_rules, alarm_steps, register, spans

# advantage_collapse: the median collapsed share over the last quarter of the run. At a share f a run generates
# 1 / (1 - f) completions per completion that carries gradient: 0.30 -> 1.4x, 0.50 -> 2x, 0.75 -> 4x.
COLLAPSE_INFO, COLLAPSE_WARNING, COLLAPSE_CRITICAL = 0.30, 0.50, 0.75
REGIME_SHARE = 0.6  # one side (all-wrong or all-correct) holding this share of the collapsed groups names the regime
MITIGATED_POST = 0.30  # acr_post at or below this (and at most half the ACR): a sampler or AVSPO is handling it

TOO_HARD = Fix(
    grposcope="use_avspo=True (virtual samples give all-wrong groups a gradient); or sampler='reinforce_ada' with "
    "advantage_estimator='pool', or sampler='budgeted'; a larger num_generations; easier prompts",
    trl="num_generations up (e.g. 16); drop prompts the model never solves; or import GRPOTrainer from "
    "grposcope.integrations.trl and set use_avspo=True",
    verl="algorithm.filter_groups.enable=True (DAPO dynamic sampling); actor_rollout_ref.rollout.n up; with grposcope "
    "installed, algorithm.adv_estimator=avspo",
)
TOO_EASY = Fix(
    grposcope="sampler='dynamic' (drops collapsed groups and refills the batch) or sampler='budgeted'; drop solved "
    "prompts or move to harder ones",
    trl="remove solved prompts from the dataset or use harder data; or import GRPOTrainer from "
    "grposcope.integrations.trl and set sampler='dynamic'",
    verl="algorithm.filter_groups.enable=True, algorithm.filter_groups.metric=acc; harder data",
)


def _split(view, recent_steps: np.ndarray) -> tuple[float, float, str]:
    """(all-wrong share, all-correct share, how) of the collapsed groups over the recent steps."""
    xw, wrong = view[c.ACR_ALL_WRONG]
    xc, right = view[c.ACR_ALL_CORRECT]
    if len(wrong) and len(right):
        keep_w, keep_c = np.isin(xw, recent_steps), np.isin(xc, recent_steps)
        w, r = float(wrong[keep_w].sum()), float(right[keep_c].sum())
        how = ("per group, from the rollouts" if view.run.from_rollouts
               else "logged: collapse/acr_all_wrong, _all_correct")
        return (w / (w + r), r / (w + r), how) if w + r > 0 else (0.5, 0.5, how)
    alike = rewards_alike(view) & np.isin(view.steps, recent_steps)  # such a step's mean is its common reward
    common = view.array(c.REWARD)[alike]
    common = common[np.isfinite(common)]
    if len(common) * 2 >= len(recent_steps):  # most recent steps say their common reward: read it, estimate nothing
        w, r = int((common == 0.0).sum()), int((common == 1.0).sum())
        how = (f"on the {len(common)} recent steps whose rewards were all equal, {w} scored 0 and {r} scored 1 "
               f"for every completion; median {np.median(common):.3f}")
        if w + r < len(common):
            how += " (a reward neither 0 nor 1: whether it is a success is the reward's scale to say)"
        return w / len(common), r / len(common), how
    x, p = view[c.REWARD]
    if len(p) and p.min() >= 0 and p.max() <= 1 and not not_binary(view):
        p_recent = float(np.median(p[np.isin(x, recent_steps)])) if np.isin(x, recent_steps).any() else float(p[-1])
        g, _ = group_size(view)
        a, b = (1 - p_recent) ** g, p_recent**g
        return (a / (a + b), b / (a + b), f"estimated from the mean reward {p_recent:.3f} with G = {g}, for a 0/1 "
                "reward (p^G all-correct against (1-p)^G all-wrong)") if a + b > 0 else (0.5, 0.5, "")
    return 0.5, 0.5, ""


@register
class AdvantageCollapse(Detector):
    name = "advantage_collapse"
    summary = "groups whose completions all got the same reward (zero advantage), split into all-wrong and all-correct"
    needs = ((c.ACR, c.REWARD, c.REWARD_STD, c.SKIPPED_NO_SIGNAL),)
    fix = TOO_HARD
    refs = (ACR_PAPER, DAPO, REINFORCE_ADA)

    least = 1

    def missing(self, view):
        if collapse_series(view) is not None:
            return ""
        contradicted = not_binary(view)
        if contradicted and view.has(c.REWARD, 4):
            return ("needs collapse/acr (frac_reward_zero_std) or reward stds / skipped flags on 4 or more steps; "
                    f"no estimate from the mean reward: {contradicted}")
        return super().missing(view) or ("needs collapse/acr (frac_reward_zero_std), or a mean reward in [0, 1] "
                                          "on 4 or more steps, or reward stds / skipped flags on 4 or more steps")

    def detect(self, view):
        found = collapse_series(view)
        if found is None:
            return []
        x, acr, basis, logged = found
        level, f = recent_share(found)
        if f < COLLAPSE_INFO:
            return []
        severity = "critical" if f >= COLLAPSE_CRITICAL else "warning" if f >= COLLAPSE_WARNING else "info"
        recent_steps = stats.tail(x, 0.25)
        wrong, right, how = _split(view, recent_steps)
        regime = "all-wrong" if wrong >= REGIME_SHARE else "all-correct" if right >= REGIME_SHARE else "mixed"
        if len(acr) < stats.SHORT_RUN:
            evidence = [f"{basis}: " + (f"{acr[0]:.3f} at " if len(acr) == 1 else f"{level} {f:.3f} over ")
                        + f"{stats.where_text(x)}; with {len(acr)} logged step{'s' if len(acr) > 1 else ''}, a "
                        f"trend cannot be judged ({stats.SHORT_RUN} or more are needed)"]
        else:
            evidence = [f"{basis}: {level} {f:.3f} over {stats.where_text(recent_steps)}, mean {acr.mean():.3f} over "
                        "the run"]
        evidence += [
                     f"{1 / (1 - f):.1f} completions generated per completion that carries a gradient" if f < 0.99
                     else "almost no completion carried a gradient on those steps"]
        if how:
            evidence.append(f"of the collapsed groups {wrong:.0%} all-wrong, {right:.0%} all-correct ({how})"
                            if wrong + right > 0.99 else f"all-wrong or all-correct: {how}")
        t = stats.trend(x, acr)
        if t.p < 0.01 and len(acr) >= stats.SHORT_RUN:
            evidence.append(f"{'rising' if t.slope > 0 else 'falling'} over the run: Theil-Sen slope {t.slope:+.2e} "
                            f"per step (Mann-Kendall p = {t.p:.2g})")
        on = alarm_steps(view, "stagnation") if logged else []
        rules = alarm_rules(view)
        if on:
            evidence.append(f"grposcope's stagnation rule (ACR > {rules.stagnation_acr} for {rules.stagnation_steps} "
                            f"steps in a row) was on for {len(on)} steps from step {on[0]}")
        first = on[0] if on else int(x[np.argmax(acr >= COLLAPSE_INFO)])
        mitigated = self._mitigated(view, recent_steps, f)
        if mitigated:
            evidence.append(mitigated)
            severity = "info"
        title = {"all-wrong": "most groups are all-wrong: the prompts are too hard for the policy (or the verifier "
                              "rejects right answers)",
                 "all-correct": "most groups are all-correct: the policy has learnt these prompts",
                 "mixed": "many groups have one reward for every completion, so they teach nothing"}[regime]
        fix = TOO_EASY if regime == "all-correct" else TOO_HARD
        figures = {"acr_recent": f, "all_wrong_share": wrong, "all_correct_share": right}
        return [self.finding(severity, first, title + (" (mitigated)" if mitigated else ""), evidence, fix=fix,
                             **figures)]

    def _mitigated(self, view, recent_steps: np.ndarray, f: float) -> str:
        x, post = view[c.ACR_POST]
        keep = np.isin(x, recent_steps)
        if not keep.any():
            return ""
        p = float(np.median(post[keep]))
        if p <= MITIGATED_POST and p <= f / 2:
            return (f"what reaches the loss is mostly informative: collapse/acr_post median {p:.3f} over the same "
                    "steps (the sampler or AVSPO is handling the collapse)")
        return ""


# no_signal_steps: steps with no gradient at all. A streak of NO_SIGNAL_STREAK is the no-signal alarm's rule.
NO_SIGNAL_WARNING_COUNT, NO_SIGNAL_WARNING_SHARE, NO_SIGNAL_CRITICAL_SHARE = 3, 0.05, 0.25
# steps whose rewards all agreed while a KL term kept the gradient non-zero: no harm from AdamW's moments, but the
# generation bought no reward signal: a warning once a quarter of the steps are such (a saturated run's few are
# not). Where advantage_collapse warns, it already names the same event as the cause (such a step counts there as
# fully collapsed): then a warning here only once most steps bought nothing
KL_ONLY_WARNING_SHARE, KL_ONLY_NAMED_SHARE = 0.25, 0.50


@register
class NoSignalSteps(Detector):
    name = "no_signal_steps"
    summary = "optimizer steps whose gradient was exactly 0 (every group collapsed), which AdamW still applies"
    needs = ((c.GRAD_NORM, c.SKIPPED_NO_SIGNAL, c.ACR_POST, c.REWARD_STD),)
    least = 1
    fix = Fix(
        grposcope="skip_no_signal_steps=True (the default: no optimizer step on such a step); use_avspo=True or "
        "sampler='dynamic' / 'reinforce_ada' so that steps carry signal",
        trl="import GRPOTrainer from grposcope.integrations.trl (it skips such steps); raise num_generations or "
        "the prompts per step so that some group mixes",
        verl="GRPOSCOPE_SKIP_NO_SIGNAL_STEPS=1 in the workers' environment (grposcope's verl plugin); "
        "algorithm.filter_groups.enable=True",
    )
    refs = (ACR_PAPER, DAPO)

    def missing(self, view):
        if signal_known(view).any():  # a policy loss of exactly 0, a mean at the reward's floor, an ACR of 1
            return ""
        return super().missing(view)

    def detect(self, view):
        run = view.run
        empty = no_signal_mask(view)
        steps = np.asarray(run.steps)
        known = signal_known(view)
        grad = view.array(c.GRAD_NORM)
        with np.errstate(invalid="ignore"):  # the reward taught nothing, a KL term still moved the weights
            kl_only = ~empty & rewards_alike(view) & ((grad > 0) | (~np.isfinite(grad) &
                                                                    np.isfinite(view.array(c.KL))))
        count, total, others = int(empty.sum()), int(known.sum()), int(kl_only.sum())
        if count == 0 and others == 0:
            return []
        share, kl_share = count / total, others / total
        reward = view[c.REWARD][1]
        # a reward that never moves in the whole run is not what trains it (on-policy distillation trains on a
        # teacher's KL and logs the environment's reward beside it): its silence is the design, not a failure
        not_the_objective = others > 0 and len(reward) >= 4 and np.ptp(reward) == 0
        streak = stats.longest_streak(empty[known])
        rules = alarm_rules(view)
        severity = ("critical" if share >= NO_SIGNAL_CRITICAL_SHARE or streak >= rules.no_signal_steps else
                    "warning" if count >= NO_SIGNAL_WARNING_COUNT or share >= NO_SIGNAL_WARNING_SHARE else
                    "info" if count else None)
        named = _collapse_warns(view)
        if (kl_share >= (KL_ONLY_NAMED_SHARE if named else KL_ONLY_WARNING_SHARE) and not not_the_objective
                and rank(severity or "info") < rank("warning")):
            severity = "warning"
        severity = severity or "info"
        where = steps[empty]
        evidence = ([f"{count} of {total} logged steps ({share:.0%}) had no gradient signal: steps {spans(where)}",
                     f"longest run of such steps: {streak}"] if count else [])
        if others:
            evidence.append(f"{others} of {total} logged steps ({kl_share:.0%}) had no reward signal (every completion "
                            f"scored alike) and a KL term in the update (steps {spans(steps[kl_only])}): only the KL "
                            "term (or another regulariser) moved the weights"
                            + ("; advantage_collapse counts them as its cause" if named else ""))
            if not_the_objective:
                evidence.append(f"{c.REWARD} is {reward[0]:g} on every logged step: the run trains on another "
                                "objective (its KL term), so a silent reward is its design")
        if np.isfinite(grad[empty]).any():
            evidence.append("grad_norm is exactly 0 on "
                            f"{int((grad[empty] == 0).sum())} of them (every group's rewards were equal)")
        std = view.array(c.REWARD_STD)
        if (std[empty] == 0).any():
            evidence.append(f"the reward's std is exactly 0 on {int((std[empty] == 0).sum())} of them: every "
                            "completion of the step scored alike, so every group's advantage was 0 (inferred)")
        skipped = view.array(c.SKIPPED_NO_SIGNAL)
        if not count:
            pass  # only KL-only steps: nothing skipped, no step without a gradient
        elif np.isfinite(skipped).any():
            who = ("grposcope skipped the optimizer step on {} of them (skip_no_signal_steps)"
                   if view.run.source in ("grposcope", "simulate") else
                   "the log's skipped flag says {} of them took no update")
            evidence.append(who.format(int((skipped[empty] >= 0.5).sum()))
                            + ": the weights stayed put, the generation was still paid for")
            if (skipped[empty] >= 0.5).all() and not kl_share >= KL_ONLY_WARNING_SHARE:  # no harm to the weights
                severity = SEVERITIES[max(0, SEVERITIES.index(severity) - 1)]
        else:
            lr = view.array(c.LEARNING_RATE)[empty]
            if np.isfinite(lr).any() and np.nanmax(lr) > 0:
                evidence.append(f"the learning rate was {np.nanmax(lr):.3g} on them: AdamW's moments still moved "
                                "the weights with no gradient behind the move")
        on = alarm_steps(view, "no_signal")
        if on:
            evidence.append(f"grposcope's no-signal rule ({rules.no_signal_steps} such steps in a row) was on from "
                            f"step {on[0]}")
        title = (f"{count} of {total} optimizer steps had no gradient signal" if count else
                 f"{others} of {total} optimizer steps had no reward signal (a KL-only update)")
        first = int(min([*where, *steps[kl_only]]))
        return [self.finding(severity, first, title, evidence, steps=count, share=share, streak=streak,
                             reward_silent_steps=others)]


def _collapse_warns(view) -> bool:
    """advantage_collapse's own level test: its recent collapsed share at warning or above."""
    found = collapse_series(view)
    return found is not None and recent_share(found)[1] >= COLLAPSE_WARNING
