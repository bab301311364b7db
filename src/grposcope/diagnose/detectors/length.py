"""How long the completions are: `length_growth` and `truncation`."""

from __future__ import annotations

from typing import NamedTuple

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


EVAL_TESTED = 6  # evaluations a held-out trend is tested from; with 3 to 5, the first and the last are compared


class Score(NamedTuple):
    name: str
    gain: float  # over the run: the fitted line's (6 or more evaluations), else the last minus the first
    rising: bool  # significant (p < 0.05) with 6 or more evaluations; else a gain of EVAL_GAIN or more
    text: str  # the evidence line


def held_out_score(view) -> Score | None:
    """What the held-out score did over the run (None with fewer than 3 evaluations)."""
    if not view.has(c.EVAL, 3):
        return None
    x, y = view[c.EVAL]
    if len(y) >= EVAL_TESTED:
        t = stats.trend(x, y)
        gain = t.slope * float(x[-1] - x[0])
        return Score(c.EVAL, gain, t.rising(EVAL_ALPHA),
                     f"the held-out score ({c.EVAL}) over the same run: {y[0]:.3f} -> {y[-1]:.3f}, slope "
                     f"{t.slope:+.2e} per step ({p_text(t.p)}, {len(y)} evaluations)")
    gain = float(y[-1] - y[0])
    return Score(c.EVAL, gain, gain >= EVAL_GAIN,
                 f"the held-out score ({c.EVAL}) at its {len(y)} evaluations: "
                 + ", ".join(f"{v:.3f} (step {int(s)})" for s, v in zip(x, y))
                 + f"; {gain:+.3f} from the first to the last (no trend is tested from under {EVAL_TESTED})")


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
        score = held_out_score(view)
        first = int(x[np.argmax(length >= LENGTH_GROWTH * start)])
        _, cut = view[c.TRUNCATED]
        cut_recent = stats.level(stats.tail(cut)) if len(cut) else 0.0
        cut_line = (f"{cut_recent:.0%} of completions now hit the length cap (median over the last quarter): the "
                    "growth runs into the cap, where an answer is cut and scored wrong")
        if score is not None:
            evidence.append(score.text)
            held_out_gain = score.gain
            rx, ry = view[c.REWARD]
            reward_gain = stats.trend(rx, ry).slope * float(rx[-1] - rx[0]) if len(ry) >= 4 else 0.0
            # pays: the held-out score rises, by 3 points and by a share of the training reward's gain (a score
            # that moves 0.03 while the reward moves 0.70 is the training reward being gamed, not reasoning)
            pays = held_out_gain >= max(EVAL_GAIN, EVAL_SHARE * reward_gain)
            if pays and cut_recent >= CUT_WARNING:  # grown into the cap: cut answers score wrong, whatever pays
                pays = False
                evidence.append(cut_line)
            if not pays and score.rising and held_out_gain >= EVAL_GAIN:
                evidence.append(f"the held-out gain, {held_out_gain:+.3f}, is under {EVAL_SHARE:.0%} of the training "
                                f"reward's, {reward_gain:+.3f}: the longer answers do not pay on held-out prompts")
            if score.rising and pays:
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


# length_collapse: the mean length falls (p < 0.01) to LENGTH_SHRINK of its start or less; LENGTH_SHRINK_CRITICAL
# with the score not rising: critical
LENGTH_SHRINK, LENGTH_SHRINK_CRITICAL = 0.5, 0.2


@register
class LengthCollapse(Detector):
    name = "length_collapse"
    summary = "completions shrink to a fraction of their length while the score does not rise with them"
    needs = ((c.LENGTH,),)
    least = 8
    fix = Fix(
        grposcope="read the short completions (completions.jsonl): an answer without reasoning, an early end of "
        "sequence, a reward paid for the format alone; loss_type='dr_grpo' (per-sequence normalisation favours "
        "short right answers); beta > 0 or a lower learning_rate",
        trl="log_completions=True and read the short completions; loss_type='dr_grpo'; beta > 0; a lower "
        "learning_rate",
        verl="dump the rollouts (trainer.rollout_data_dir) and read the short ones; "
        "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm; actor_rollout_ref.actor.use_kl_loss=True",
    )
    refs = (DR_GRPO,)

    def detect(self, view):
        x, length = view[c.LENGTH]
        start, end = stats.level(stats.head(length)), stats.level(stats.tail(length, 0.1))
        t = stats.trend(x, length)
        if not (start > 0 and end <= LENGTH_SHRINK * start and t.falling(TREND_ALPHA)):
            return []
        evidence = [f"mean completion length fell to {end / start:.0%} of its start: {start:.0f} tokens (median of "
                    f"the first tenth) to {end:.0f} (last tenth), Theil-Sen slope {t.slope:+.3g} tokens per step "
                    f"({p_text(t.p)})"]
        first = int(x[np.argmax(length <= LENGTH_SHRINK * start)])
        held = held_out_score(view)
        rx, ry = view[c.REWARD]
        reward = stats.trend(rx, ry) if len(ry) >= 4 else None
        if held is not None:
            evidence.append(held.text)
        elif reward is not None:
            evidence.append(f"{c.REWARD} over the run: {ry[0]:.3f} -> {ry[-1]:.3f}, slope {reward.slope:+.2e} per "
                            f"step ({p_text(reward.p)}, {len(ry)} points)")
        rising = held.rising if held is not None else reward is not None and reward.rising(TREND_ALPHA)
        if rising:
            return [self.finding("info", first, "completions get much shorter while the score rises (more "
                                 "concise answers, not a collapse)", evidence, ratio=end / start)]
        score = held if held is not None else reward
        falling = (held.gain <= -EVAL_GAIN if held is not None else
                   reward is not None and reward.falling(TREND_ALPHA))
        severity = "critical" if end <= LENGTH_SHRINK_CRITICAL * start and (falling or score is None) else "warning"
        if falling:
            evidence.append("the score falls with the length: the policy is giving up on the reasoning")
        return [self.finding(severity, first, f"completions collapsed to {end / start:.0%} of their length",
                             evidence, ratio=end / start)]
