"""How long the completions are: `length_growth` and `truncation`."""

from __future__ import annotations

import numpy as np

from ...runs import catalogue as c
from .. import stats
from ..findings import DAPO, DR_GRPO, LENGTH_CORRELATIONS, Fix
from .base import Detector, p_text, register

LENGTH_GROWTH = 1.5  # the last tenth's mean length at least this multiple of the first tenth's
LENGTH_CRITICAL = 3.0
TREND_ALPHA = 0.01
EVAL_ALPHA = 0.05  # the held-out score has few points: a looser test, stated in the evidence
EVAL_GAIN = 0.03  # ... and the fitted line must gain at least this over the run (3 points of accuracy) to pay
CUT_WARNING = 0.10  # truncation's warning level: growth that pushes this share into the cap does not pay
EVAL_SHARE = 0.15  # ... and at least this share of the training reward's fitted gain (reward_hacking's HACK_TRANSFER)

SHORTER = Fix(
    grposcope="loss_type='dr_grpo' (no per-sequence length normalisation, whose bias rewards long wrong answers); "
    "overlong_buffer_len > 0 (DAPO's soft overlong penalty); a length-aware reward",
    trl="loss_type='dr_grpo'; mask_truncated_completions=True; a length penalty among reward_funcs",
    verl="actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm (Dr. GRPO); "
    "reward_model.overlong_buffer.enable=True",
)


def _score_trend(view) -> tuple[str, stats.Trend | None]:
    """The held-out score's trend over the run ('' and None without one)."""
    if not view.has(c.EVAL, 4):
        return "", None
    x, y = view[c.EVAL]
    return c.EVAL, stats.trend(x, y)


@register
class LengthGrowth(Detector):
    name = "length_growth"
    summary = "completions grow longer and longer while the held-out score does not follow"
    needs = ((c.LENGTH,),)
    least = 8
    fix = SHORTER
    refs = (DR_GRPO, LENGTH_CORRELATIONS, DAPO)

    def detect(self, view):
        x, length = view[c.LENGTH]
        start, end = stats.level(stats.head(length)), stats.level(stats.tail(length, 0.1))
        t = stats.trend(x, length)
        growth = end / start if start > 0 else float("inf")
        if not (t.rising(TREND_ALPHA) and growth >= LENGTH_GROWTH):
            return []
        evidence = [f"mean completion length grew {growth:.1f}x: {start:.0f} tokens (median of the first tenth) to "
                    f"{end:.0f} (last tenth), Theil-Sen slope {t.slope:+.3g} tokens per step ({p_text(t.p)})"]
        name, score = _score_trend(view)
        first = int(x[np.argmax(length >= LENGTH_GROWTH * start)])
        _, cut = view[c.TRUNCATED]
        cut_recent = stats.level(stats.tail(cut)) if len(cut) else 0.0
        cut_line = (f"{cut_recent:.0%} of completions now hit the length cap (median over the last quarter): the "
                    "growth runs into the cap, where an answer is cut and scored wrong")
        if score is not None:
            ex, ey = view[c.EVAL]
            evidence.append(f"the held-out score ({name}) over the same run: {ey[0]:.3f} -> {ey[-1]:.3f}, slope "
                            f"{score.slope:+.2e} per step ({p_text(score.p)}, {len(ey)} evaluations)")
            held_out_gain = score.slope * float(ex[-1] - ex[0])
            rx, ry = view[c.REWARD]
            reward_gain = stats.trend(rx, ry).slope * float(rx[-1] - rx[0]) if len(ry) >= 4 else 0.0
            # pays: the held-out score rises, by 3 points and by a share of the training reward's gain (a score
            # that moves 0.03 while the reward moves 0.70 is the training reward being gamed, not reasoning)
            pays = held_out_gain >= max(EVAL_GAIN, EVAL_SHARE * reward_gain)
            if pays and cut_recent >= CUT_WARNING:  # grown into the cap: cut answers score wrong, whatever pays
                pays = False
                evidence.append(cut_line)
            if not pays and score.rising(EVAL_ALPHA) and held_out_gain >= EVAL_GAIN:
                evidence.append(f"the held-out gain, {held_out_gain:+.3f}, is under {EVAL_SHARE:.0%} of the training "
                                f"reward's, {reward_gain:+.3f}: the longer answers do not pay on held-out prompts")
            if score.rising(EVAL_ALPHA) and pays:
                return [self.finding("info", first, "completions grow longer with the held-out score (longer "
                                     "reasoning that pays, not padding)", evidence, growth=growth)]
        else:
            rx, ry = view[c.REWARD]
            reward = stats.trend(rx, ry)
            if reward.rising(TREND_ALPHA) and cut_recent >= CUT_WARNING:
                evidence.append(cut_line)
            elif reward.rising(TREND_ALPHA):
                evidence.append(f"the training reward rises too ({p_text(reward.p)}), but no held-out score was "
                                "logged to tell longer reasoning from padding")
                return [self.finding("info", first, "completions grow longer while the reward rises; log a "
                                     "held-out score to tell reasoning from padding", evidence, growth=growth)]
            evidence.append(f"the training reward does not rise with it ({p_text(reward.p)})")
        severity = "critical" if growth >= LENGTH_CRITICAL else "warning"
        return [self.finding(severity, first, "completions grow longer without a better score: the policy is paid "
                             "by the token, not by the answer", evidence, growth=growth)]


# truncation: the median share of completions cut at the cap over the last quarter
TRUNC_INFO, TRUNC_WARNING, TRUNC_CRITICAL = 0.02, 0.10, 0.30


@register
class Truncation(Detector):
    name = "truncation"
    summary = "completions that hit the length cap: cut before their answer, scored as wrong"
    needs = ((c.TRUNCATED,),)
    least = 1
    fix = Fix(
        grposcope="max_completion_length up; mask_truncated_completions=True (a cut completion gives no gradient "
        "instead of a wrong one); overlong_buffer_len > 0 for a soft penalty before the cap",
        trl="max_completion_length up; mask_truncated_completions=True",
        verl="data.max_response_length up; reward_model.overlong_buffer.enable=True",
    )
    refs = (DAPO,)

    def detect(self, view):
        x, frac = view[c.TRUNCATED]
        recent = stats.level(stats.tail(frac))
        mean = float(np.mean(frac))
        worst = max(recent, mean)
        if worst < TRUNC_INFO:
            return []
        severity = "critical" if worst >= TRUNC_CRITICAL else "warning" if worst >= TRUNC_WARNING else "info"
        if len(frac) < stats.SHORT_RUN:  # a few logged steps: their figures, no trend and no "last quarter"
            evidence = [(f"{frac[0]:.0%} of completions hit the length cap at " if len(frac) == 1 else
                         f"{mean:.0%} of completions hit the length cap on average over ")
                        + f"{stats.where_text(x)} (completion/truncated_frac; TRL completions/clipped_ratio)"
                        + ("" if len(frac) == 1 else f", {frac[-1]:.0%} at the last"),
                        f"with {len(frac)} logged step{'s' if len(frac) > 1 else ''}, a trend cannot be judged "
                        f"({stats.SHORT_RUN} or more are needed)"]
        else:
            evidence = [f"{mean:.0%} of completions hit the length cap over the run (completion/truncated_frac; TRL "
                        f"completions/clipped_ratio), {frac[-1]:.0%} at the last logged step ({int(x[-1])}); median "
                        f"{recent:.0%} over {stats.where_text(stats.tail(x))}"]
        cap = view.setting("max_completion_length")
        _, longest = view[c.LENGTH_MAX]
        if cap:
            evidence.append(f"the cap: max_completion_length = {cap}")
        elif len(longest):
            evidence.append(f"the cap is likely {longest.max():.0f} tokens (the longest completion logged)")
        t = stats.trend(x, frac)
        if t.rising(TREND_ALPHA) and len(frac) >= stats.SHORT_RUN:
            evidence.append(f"rising over the run: slope {t.slope:+.2e} per step ({p_text(t.p)})")
        evidence.append("a cut completion has no final answer, so it scores as wrong: its group's advantage "
                        "punishes length, not error")
        first = int(x[np.argmax(frac >= (TRUNC_WARNING if severity != "info" else TRUNC_INFO))])
        title = (f"{mean:.0%} of completions are cut at the length cap" if len(frac) > 1 else
                 f"{mean:.0%} of completions were cut at the length cap at the one logged step")
        return [self.finding(severity, first, title, evidence,
                             mean=mean, recent=recent)]
