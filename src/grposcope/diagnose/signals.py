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
    a skipped flag, every group at zero advantage after the sampler (acr_post = 1), or, where no gradient norm
    was logged, a reward std of exactly 0 (every completion of the step scored alike)."""
    if "no_signal" not in view.memo:
        grad = view.array(c.GRAD_NORM)
        skipped = view.array(c.SKIPPED_NO_SIGNAL)
        post = view.array(c.ACR_POST)
        std = view.array(c.REWARD_STD)
        with np.errstate(invalid="ignore"):  # a zero std counts where no gradient norm says otherwise (a KL term)
            view.memo["no_signal"] = ((grad == ZERO_GRAD) | (skipped >= 0.5) | (post >= 1.0)
                                      | ((std == 0.0) & ~np.isfinite(grad)))
    return view.memo["no_signal"]


def rewards_alike(view: "View") -> np.ndarray:
    """Per logged step (aligned with run.steps): True where the rewards' std was exactly 0, every completion of
    the step scored alike (no reward signal, whatever a KL term did to the gradient). Computed once per run."""
    if "alike" not in view.memo:
        with np.errstate(invalid="ignore"):  # NaN: the std was not logged that step
            view.memo["alike"] = view.array(c.REWARD_STD) == 0.0
    return view.memo["alike"]


def signal_known(view: "View") -> np.ndarray:
    """Per logged step: whether the log says anything of its signal (a gradient norm, a skipped flag, acr_post,
    a reward std)."""
    known = np.zeros(len(view.run.steps), dtype=bool)
    for name in (c.GRAD_NORM, c.SKIPPED_NO_SIGNAL, c.ACR_POST, c.REWARD_STD):
        known |= np.isfinite(view.array(name))
    return known


def group_size(view: "View") -> tuple[int, str]:
    """G and where it comes from."""
    g = view.setting("num_generations")
    return (int(g), "num_generations") if g else (ASSUMED_G, f"assumed {ASSUMED_G} (TRL's default; "
                                                                 "--num_generations sets it)")


class Collapse(NamedTuple):
    steps: np.ndarray  # (n,)
    share: np.ndarray  # (n,) collapsed share of the step's groups
    basis: str  # how it is known, said in the evidence
    logged: bool  # read from the log (else inferred)


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
    if len(p) >= LEAST and p.min() >= 0 and p.max() <= 1 and not not_binary(view):
        g, how = group_size(view)
        share[np.isin(steps, x)] = p**g + (1 - p) ** g
        said.append(f"estimated from the mean reward as p^G + (1-p)^G, a lower bound for a 0/1 reward (G = {g}: "
                    f"{how})")
    empty = no_signal_mask(view) | rewards_alike(view)  # every completion scored alike: all groups collapsed
    known = signal_known(view)
    if known.sum() >= LEAST:
        share = np.where(empty, 1.0, share if said else np.where(known, 0.0, np.nan))
        reasons = [what for name, what in ((c.REWARD_STD, "a reward std of exactly 0"),
                                           (c.SKIPPED_NO_SIGNAL, "a skipped flag"),
                                           (c.GRAD_NORM, "a gradient norm of exactly 0"))
                   if (empty & np.isfinite(view.array(name))).any()]
        if empty.any():
            said.append(f"inferred: the {int(empty.sum())} step(s) with {' or '.join(reasons) or 'no signal'} count "
                        "as fully collapsed" + ("" if len(said) else ", the others as 0 (a lower bound)"))
    keep = np.isfinite(share)
    if keep.sum() < LEAST or not said:
        return None
    return Collapse(steps[keep], share[keep], "; ".join(said), False)
