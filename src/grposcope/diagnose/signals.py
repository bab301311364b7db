"""The two series that the cost and several detectors read, computed once per run so that they cannot disagree:

- `no_signal_mask`: the steps that bought no gradient at all;
- `collapse_series`: the share of each step's groups whose rewards were all equal (zero advantage).

Both say how they know. Read from the log where it holds them; otherwise inferred, and the inference is said in
the evidence: a step whose rewards have a standard deviation of exactly 0 had every completion scored alike, so
every group collapsed and the reward gave no gradient; a step the log flags as skipped (`skipped`, grposcope's
`optimizer/skipped_no_signal`) took no update; without a logged share, the mean p of a reward bounded in [0, 1]
gives the lower bound p^G + (1-p)^G (prompts differ in pass rate and the function is convex).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..runs import catalogue as c

if TYPE_CHECKING:
    from .view import View

ZERO_GRAD = 0.0  # a gradient norm of exactly this is a step without signal ("exactly 0", as logged)
ASSUMED_G = 8  # completions per prompt when neither the log nor --num_generations says (TRL's default)
LEAST = 4  # logged points an inferred collapse series needs (a logged one is read from its first point)


def no_signal_mask(view: "View") -> np.ndarray:
    """Per logged step (aligned with run.steps): True where the step had no signal: a gradient norm of exactly 0,
    a skipped flag, every group at zero advantage after the sampler (acr_post = 1), or, where neither a gradient
    norm nor a KL was logged, a step whose reward gave no signal (`rewards_alike`)."""
    if "no_signal" not in view.memo:
        grad = view.array(c.GRAD_NORM)
        skipped = view.array(c.SKIPPED_NO_SIGNAL)
        post = view.array(c.ACR_POST)
        # a silent reward counts where neither a gradient norm nor a logged KL term says that something else moved
        # the weights (a KL-only update: no_signal_steps names those apart)
        silent = rewards_alike(view) & ~np.isfinite(grad) & ~np.isfinite(view.array(c.KL))
        with np.errstate(invalid="ignore"):
            view.memo["no_signal"] = (grad == ZERO_GRAD) | (skipped >= 0.5) | (post >= 1.0) | silent
    return view.memo["no_signal"]


ROUNDED_DIGITS = 4  # transformers' Trainer logs the loss rounded to 4 decimals
ROUNDED_FAR = 100  # a rounded loss whose non-zero values sit at this many last digits or more: its 0s are zeros
ZERO_LOSS_LEAST = 1  # logged non-zero losses that make the exact zeros evidence (not a loss never computed)
EXTREME_LEAST = 3  # steps whose mean sits exactly on the run's lowest (or highest) step mean that make it a floor


def loss_rounded(view: "View") -> bool:
    """Whether the log rounds the loss (so an exact 0 is a small loss, not none): transformers' Trainer (TRL)
    rounds it to 4 decimals; so does any log whose non-zero losses (one or more) all have at most 4 decimals."""
    if view.run.source == "trl":
        return True
    _, y = view[c.LOSS]
    nonzero = y[y != 0]
    # an unrounded float has 4 decimals or fewer by chance about once in 10^12: one such value is evidence enough
    return len(nonzero) >= 1 and bool(np.all(np.abs(np.round(nonzero, ROUNDED_DIGITS) - nonzero) < 1e-12))


def zero_loss(view: "View") -> np.ndarray:
    """Per logged step: True where the policy loss is exactly 0 in a log that logs a non-zero loss on
    ZERO_LOSS_LEAST other steps (a loss of 0 everywhere may be one never computed) and either does not round it or
    rounds a loss that is otherwise ROUNDED_FAR last digits or more in size: the reward gave that step no gradient
    (every advantage 0)."""
    loss = view.array(c.LOSS)
    finite = loss[np.isfinite(loss)]
    nonzero = np.abs(finite[finite != 0])
    # in a rounded log a 0 is a loss under half the last digit: evidence only where the loss otherwise sits far
    # above that digit (a GRPO loss, near 0 by construction, rounds to 0 on most steps and says nothing)
    far_above = len(nonzero) and float(np.median(nonzero)) >= ROUNDED_FAR * 10.0 ** -ROUNDED_DIGITS
    if len(nonzero) < ZERO_LOSS_LEAST or (loss_rounded(view) and not far_above):
        return np.zeros(len(loss), dtype=bool)
    return loss == 0.0


def _at_extreme(view: "View") -> np.ndarray:
    """Per logged step: True where, with neither a reward std nor a collapse share logged, the step's mean reward
    is exactly the run's lowest (or highest) step mean, a value EXTREME_LEAST or more steps share: a mean can equal
    the floor only if every completion scored it."""
    out = np.zeros(len(view.steps), dtype=bool)
    if view.has(c.REWARD_STD) or view.has(c.ACR):
        return out
    reward = view.array(c.REWARD)
    seen = reward[np.isfinite(reward)]
    if len(seen) < LEAST or np.ptp(seen) == 0:
        return out  # a constant reward: pinned_reward's, and no floor to tell apart
    for value in (seen.min(), seen.max()):
        if (seen == value).sum() >= EXTREME_LEAST:
            out |= reward == value
    return out


def rewards_alike(view: "View") -> np.ndarray:
    """Per logged step (aligned with run.steps): True where every completion of the step scored alike, so the
    reward gave no signal (whatever a KL term did to the gradient): the rewards' std is exactly 0; the logged
    share of collapsed groups is 1 (before any sampler: acr_post decides where logged); the policy loss is exactly
    0 (`zero_loss`); or the step's mean is the run's floor or ceiling (`_at_extreme`). Computed once per run."""
    if "alike" not in view.memo:
        with np.errstate(invalid="ignore"):  # NaN: not logged that step
            alike = view.array(c.REWARD_STD) == 0.0
            if not view.has(c.ACR_POST):
                alike |= view.array(c.ACR) >= 1.0
        view.memo["alike"] = alike | zero_loss(view) | _at_extreme(view)
    return view.memo["alike"]


def signal_known(view: "View") -> np.ndarray:
    """Per logged step: whether the log says anything of its signal (a gradient norm, a skipped flag, acr_post,
    a reward std, the collapse share, a policy loss whose zeros are evidence, a mean at the reward's floor)."""
    known = np.zeros(len(view.run.steps), dtype=bool)
    for name in (c.GRAD_NORM, c.SKIPPED_NO_SIGNAL, c.ACR_POST, c.REWARD_STD, c.ACR):
        known |= np.isfinite(view.array(name))
    if zero_loss(view).any():
        known |= np.isfinite(view.array(c.LOSS))
    extreme = _at_extreme(view)
    if extreme.any():
        known |= np.isfinite(view.array(c.REWARD))
    return known


def group_size(view: "View") -> tuple[int, str]:
    """G and where it comes from: the setting; else at most the completions a step's reward list holds (a log of
    one group a step gives it exactly); else TRL's default, said as assumed."""
    g = view.setting("num_generations")
    if g:
        return int(g), "num_generations"
    held = view.run.config.get("completions_per_step")
    if held and int(held) < ASSUMED_G:
        return int(held), f"the log's reward lists hold {int(held)} completions a step"
    return ASSUMED_G, f"assumed {ASSUMED_G} (TRL's default; --num_generations sets it)"


class Collapse(NamedTuple):
    steps: np.ndarray  # (n,)
    share: np.ndarray  # (n,) collapsed share of the step's groups
    basis: str  # how it is known, said in the evidence
    logged: bool  # read from the log (else inferred)


def recent_share(found: Collapse) -> tuple[str, float]:
    """The collapsed share over the last quarter of the run and how it is taken: a logged share's median; a
    series inferred from flags is mostly 0s and 1s (a step fully collapsed, or not known to be), whose median
    says nothing of the share: its mean, the share of such steps (a lower bound)."""
    recent = found.share[-min(len(found.share), max(3, -(-len(found.share) // 4))):]
    if found.logged or len(np.unique(found.share)) > 2:
        return "median", float(np.median(recent))
    return "mean", float(np.mean(recent))


def collapse_series(view: "View") -> Collapse | None:
    """The collapsed share per step: logged (collapse/acr, TRL's frac_reward_zero_std), else inferred from the
    no-signal steps (1 there) and a bounded mean reward (p^G + (1-p)^G elsewhere, from LEAST points on); None
    when the log holds neither. Computed once per run."""
    if "collapse" in view.memo:
        return view.memo["collapse"]
    found = None
    if view.has(c.ACR):  # a level from the log: one logged step is a figure (said as one), not a trend
        x, acr = view[c.ACR]
        basis = "collapse/acr" + (" (TRL's frac_reward_zero_std)" if view.run.source == "trl" else "")
        found = Collapse(x, acr, basis, True)
    else:
        found = _inferred(view)
    view.memo["collapse"] = found
    return found


# a 0/1 reward's standard deviation at mean p is sqrt(p (1 - p)), times sqrt(n / (n - 1)) for a sample std of n
# rewards (sqrt(2) at most, TRL's mean of groups' stds with G = 2): above BINARY_STD_SLACK times sqrt(p (1 - p)) on
# BINARY_STD_SHARE of the steps, the rewards are not 0/1
BINARY_STD_SLACK, BINARY_STD_SHARE, BINARY_STD_TOL = 1.5, 0.25, 1e-3
CONSTANT_STD_LEAST = 8  # a std identical on this many steps while the mean moves is no per-step std of 0/1 rewards


def not_binary(view: "View") -> str:
    """What in the log contradicts a 0/1 reward ('' when nothing does): the estimate of the collapsed share from
    the mean reward assumes one, and is not made where the log says otherwise."""
    if "not_binary" in view.memo:
        return view.memo["not_binary"]
    said = ""
    _, low, high = view.aligned(c.REWARD_MIN, c.REWARD_MAX)
    odd = ~np.isin(low, (0.0, 1.0)) | ~np.isin(high, (0.0, 1.0))
    _, p, std = view.aligned(c.REWARD, c.REWARD_STD)
    if len(low) and odd.mean() >= BINARY_STD_SHARE:
        said = (f"the log's reward min / max are neither 0 nor 1 on {int(odd.sum())} of {len(low)} steps (e.g. "
                f"{low[odd][0]:.3g} / {high[odd][0]:.3g})")
    elif len(std) >= LEAST and p.min() >= 0 and p.max() <= 1:
        bound = BINARY_STD_SLACK * np.sqrt(p * (1 - p)) + BINARY_STD_TOL
        above = std > bound
        if above.mean() >= BINARY_STD_SHARE:
            i = int(np.argmax(above))
            most = float(np.sqrt(p[i] * (1 - p[i])))
            said = (f"the log's reward std is above what a 0/1 reward allows on {int(above.sum())} of {len(std)} "
                    f"steps (std {std[i]:.3g} at mean {p[i]:.3g}; a 0/1 reward's is at most {most:.3g})")
        elif len(std) >= CONSTANT_STD_LEAST and np.ptp(std) == 0 and np.ptp(p) > 0:
            said = (f"the log's reward std is {std[0]:.4g} on every one of {len(std)} steps while the mean moves "
                    f"({p.min():.3g} to {p.max():.3g}): a 0/1 reward's std moves with its mean")
    view.memo["not_binary"] = said
    return said


def _inferred(view: "View") -> Collapse | None:
    steps = view.steps
    share = np.full(len(steps), np.nan)
    said = []
    x, p = view[c.REWARD]
    # a log whose reward is a list of each step's completions, with no group size set: one group a step, whose std
    # says whether it collapsed (0) or not; nothing to estimate
    one_group = bool(view.run.config.get("completions_per_step")) and not view.setting("num_generations") \
        and view.has(c.REWARD_STD, LEAST)
    if len(p) >= LEAST and p.min() >= 0 and p.max() <= 1 and not not_binary(view) and not one_group:
        g, how = group_size(view)
        share[np.isin(steps, x)] = p**g + (1 - p) ** g
        said.append(f"estimated from the mean reward as p^G + (1-p)^G, a lower bound for a 0/1 reward (G = {g}: "
                    f"{how})")
    empty = no_signal_mask(view) | rewards_alike(view)  # every completion scored alike: all groups collapsed
    known = signal_known(view)
    if known.sum() >= LEAST:
        share = np.where(empty, 1.0, share if said else np.where(known, 0.0, np.nan))
        with np.errstate(invalid="ignore"):
            reasons = [what for mask, what in (
                (view.array(c.REWARD_STD) == 0, "a reward std of exactly 0"),
                (view.array(c.SKIPPED_NO_SIGNAL) >= 0.5, "a skipped flag"),
                (view.array(c.GRAD_NORM) == ZERO_GRAD, "a gradient norm of exactly 0"),
                (zero_loss(view), "an (unrounded) policy loss of exactly 0"),
                (_at_extreme(view), "a mean reward exactly at the run's lowest or highest step mean (every "
                                    "completion scored it)")) if (empty & mask).any()]
        if empty.any():
            said.append(f"inferred: the {int(empty.sum())} step(s) with {' or '.join(reasons) or 'no signal'} count "
                        "as fully collapsed" + ("" if len(said) else ", the others as 0 (a lower bound)"))
    keep = np.isfinite(share)
    if keep.sum() < LEAST or not said:
        return None
    return Collapse(steps[keep], share[keep], "; ".join(said), False)
