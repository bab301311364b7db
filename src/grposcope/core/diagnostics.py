"""Collapse diagnostics: the ACR family, token entropy, and the alarms of a training run.

Source: "Advantage Collapse in Group Relative Policy Optimization: Diagnosis and Mitigation" (arXiv 2605.21125),
Definition 3.1 / Eq. 11. The entropy-collapse and KL-drift signals follow the note "The Structural Weaknesses
of GRPO" that grposcope started from (0.5 nats for more than 50 steps). See docs/metrics.md.

Notation: B prompts, G completions per prompt, N = B * G sequences, T completion tokens, V vocabulary.
"""

from __future__ import annotations

import logging
import statistics
from collections import deque
from typing import Any, Sequence

import torch

from ._tensors import DEFAULT_CHUNK_ROWS, check_rewards, group_std, map_rows, weighted_sum
from .alarms import ADVICE as ALARM_ADVICE
from .alarms import AlarmRules, Alarms, alarm_window

__all__ = ["ALARM_ADVICE", "alarm_window"]  # the alarms' rules live in alarms.py; these names stay importable here

logger = logging.getLogger("grposcope")

COLLAPSE_TOL = 1e-6  # a group is collapsed when the population std of its rewards is below this
ZERO_ADVANTAGE_TOL = 1e-8  # an advantage below this in magnitude carries no gradient


def collapsed_groups(rewards: torch.Tensor, tol: float = COLLAPSE_TOL) -> torch.Tensor:
    """Which groups have (numerically) identical rewards.  rewards (B, G) -> bool (B,)."""
    rewards = check_rewards(rewards)
    return group_std(rewards, unbiased=False) < tol  # (B,)


def collapse_metrics(rewards: torch.Tensor, success_threshold: float = 0.5) -> dict[str, float]:
    """The Advantage Collapse Rate of one step, split by the common reward of the collapsed groups.

    rewards (B, G), before any mitigation. A collapsed group whose common reward is >= success_threshold
    counts as all-correct, any other as all-wrong; the two parts sum to `collapse/acr`.
    """
    rewards = check_rewards(rewards)
    collapsed = collapsed_groups(rewards)  # (B,)
    correct = rewards[:, 0] >= success_threshold  # (B,) the common value, for the collapsed ones
    b = rewards.shape[0]
    return {
        "collapse/acr": collapsed.sum().item() / b,
        "collapse/acr_all_correct": (collapsed & correct).sum().item() / b,
        "collapse/acr_all_wrong": (collapsed & ~correct).sum().item() / b,
    }


def pad_groups(groups: Sequence[torch.Tensor]) -> torch.Tensor:
    """Groups of different sizes as one matrix, each padded with its own mean: that keeps whether a group is
    collapsed (padding an all-equal group with its value adds no spread; a group with spread keeps some) and
    its common reward, so `collapse_metrics` reads it as it would read the groups one by one.
    groups: B tensors of shape (s_b,), s_b >= 1 -> (B, max s_b)."""
    if not groups:
        raise ValueError("pad_groups needs at least one group")
    width = max(g.numel() for g in groups)
    out = torch.empty(len(groups), width, dtype=torch.result_type(groups[0], 1.0))  # (B, G)
    for i, values in enumerate(groups):
        values = values.reshape(-1).to(out.dtype)  # (s_b,)
        out[i, : values.numel()] = values
        out[i, values.numel():] = values.mean()
    return out


def post_collapse_rate(advantages: torch.Tensor, tol: float = ZERO_ADVANTAGE_TOL) -> float:
    """Fraction of groups whose advantages are all zero: what reaches the gradient.  advantages (B, G)."""
    if advantages.dim() != 2:
        raise ValueError(f"advantages must have shape (B, G), got {tuple(advantages.shape)}")
    return (advantages.abs() < tol).all(dim=1).float().mean().item()


def token_entropy(logits: torch.Tensor, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> torch.Tensor:
    """Entropy in nats of the next-token distribution at every position.  logits (N, T, V) -> (N, T).

    H = log S - sum_v e_v (z_v - max z) / S with e = exp(z - max z), S = sum_v e_v, computed `chunk_rows` rows at a
    time so that no full (N, T, V) softmax or log-softmax is held at once. Differentiable (for an entropy bonus);
    a measurement alongside log-probs is cheaper with `losses.selective_log_probs(..., with_entropy=True)`.
    """

    def entropy_rows(z: torch.Tensor, _rows: slice) -> torch.Tensor:
        z = z.float()  # (rows, V)
        # relative to the top logit (H does not depend on a shift): every term has one sign, nothing cancels
        shifted = z - z.amax(dim=-1, keepdim=True).detach()  # (rows, V), <= 0
        e = torch.exp(shifted)  # (rows, V)
        total = e.sum(dim=-1)  # (rows,)
        return total.log() - weighted_sum(e, shifted) / total  # H = log S - sum_v e_v shifted_v / S

    return map_rows(logits, entropy_rows, chunk_rows)


class CollapseMonitor:
    """Tracks the ACR family and the health alarms across the steps of a run.

    Call `update` once per generation batch (the trainer calls it on the batch's first optimizer step; a
    run with one optimizer step per generation calls it every step).
    Alarms (metric 1.0 while active, else 0.0; a console warning once
    at each onset):
      - `alarm/stagnation`: ACR > `stagnation_acr` (0.35) for `stagnation_steps` (50) consecutive steps
        (the paper's Corollary 3.3).
      - `alarm/entropy_collapse`: mean token entropy < `entropy_floor` (0.5 nats) for more than
        `entropy_steps` (50) consecutive steps, once the entropy has been at or above the floor: a collapse is
        a fall, and a policy that starts below the floor on a task (the quickstart's starts at 0.1-0.4 nats)
        would otherwise raise it in every run.
      - `alarm/kl_drift`: mean per-token KL to the reference policy above `kl_bound`.
      - `alarm/no_signal`: `no_signal_steps` (5) steps in a row whose advantages were all zero (acr_post 1):
        nothing was learned on them, and without `skip_no_signal_steps` AdamW moved the weights anyway.
    The trainers fit the two 50-step windows to the run's length (`alarm_window`).
    Everything it knows survives `state_dict()` / `load_state_dict()`, so a resumed run continues its ACR
    history, streaks and alarms where they were.
    """

    def __init__(
        self,
        success_threshold: float = 0.5,
        ema_lambda: float = 0.9,
        early_steps: int = 100,
        volatility_window: int = 25,
        stagnation_acr: float = 0.35,
        stagnation_steps: int = 50,
        entropy_floor: float = 0.5,
        entropy_steps: int = 50,
        kl_bound: float = 0.5,
        no_signal_steps: int = 5,
    ) -> None:
        if not 0.0 <= ema_lambda < 1.0:
            raise ValueError(f"ema_lambda must be in [0, 1), got {ema_lambda}")
        if min(early_steps, volatility_window, stagnation_steps, no_signal_steps) < 1 or entropy_steps < 0:
            raise ValueError("early_steps, volatility_window, stagnation_steps and no_signal_steps must be >= 1 "
                             "and entropy_steps >= 0")
        self.success_threshold = success_threshold
        self.ema_lambda = ema_lambda
        self.early_steps = early_steps
        self.volatility_window = volatility_window
        self.stagnation_acr = stagnation_acr
        self.stagnation_steps = stagnation_steps
        self.entropy_floor = entropy_floor
        self.entropy_steps = entropy_steps
        self.kl_bound = kl_bound
        self.no_signal_steps = no_signal_steps
        self.step = 0
        self.acr_ema: float | None = None
        self.collapsed_seen = 0
        self.groups_seen = 0
        self.early_acr_sum = 0.0
        self.early_count = 0
        self.window: deque[float] = deque(maxlen=volatility_window)
        # the alarms' rules and streaks: core/alarms.py, shared with `grposcope diagnose`
        self.alarms = Alarms(AlarmRules(stagnation_acr, stagnation_steps, entropy_floor, entropy_steps, kl_bound,
                                        no_signal_steps))
        self.no_signal_seen = 0  # steps whose advantages were all zero, since the run began

    @property
    def fired(self) -> list[tuple[int, str]]:
        """(step, alarm) at every onset."""
        return self.alarms.fired

    @property
    def active(self) -> dict[str, bool]:
        return self.alarms.active

    def update(
        self,
        rewards: torch.Tensor,
        advantages: torch.Tensor | None = None,
        entropy: float | None = None,
        kl: float | None = None,
    ) -> dict[str, float]:
        """One step. rewards (B0, G): the groups as first drawn, before any mitigation (a sampler's
        `Selection.as_drawn`); advantages (B', G) or (B' * G,): what reaches the loss, after the sampler and
        the estimator (for `collapse/acr_post`; B' may differ from B0);
        entropy: mean token entropy in nats; kl: mean per-token KL to the reference. A signal passed as None
        was not measured this step: its alarm keeps its streak and state. Returns the metrics."""
        rewards = check_rewards(rewards)
        metrics = collapse_metrics(rewards, self.success_threshold)
        acr = metrics["collapse/acr"]
        b = rewards.shape[0]
        self.step += 1
        lam = self.ema_lambda
        self.acr_ema = acr if self.acr_ema is None else lam * self.acr_ema + (1 - lam) * acr
        self.collapsed_seen += round(acr * b)
        self.groups_seen += b
        if self.early_count < self.early_steps:
            self.early_acr_sum += acr
            self.early_count += 1
        self.window.append(acr)
        metrics.update(
            {
                "collapse/acr_ema": self.acr_ema,
                "collapse/acr_cumulative": self.collapsed_seen / self.groups_seen,
                "collapse/acr_100": self.early_acr_sum / self.early_count,
                "collapse/volatility": _population_std(self.window),
            }
        )
        no_signal = None
        if advantages is not None:
            metrics["collapse/acr_post"] = post_collapse_rate(advantages.reshape(-1, rewards.shape[1]))
            no_signal = metrics["collapse/acr_post"] == 1.0
            self.no_signal_seen += no_signal
            metrics["collapse/no_signal_steps"] = float(self.no_signal_seen)
        now = self.alarms.update(self.step, acr, entropy, kl, no_signal, reward=float(rewards.mean()))
        metrics.update({f"alarm/{name}": float(on) for name, on in now.items()})
        metrics["collapse/no_signal_streak"] = float(self.alarms.streaks["no_signal"])
        return metrics

    def evaluated(self, score: float | None) -> None:
        """The held-out score measured after the last step (before the first: step 0), which tells the
        entropy-collapse alarm whether the run still learns while its entropy is low."""
        self.alarms.evaluated(self.step, score)

    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "acr_ema": self.acr_ema,
            "collapsed_seen": self.collapsed_seen,
            "groups_seen": self.groups_seen,
            "early_acr_sum": self.early_acr_sum,
            "early_count": self.early_count,
            "window": list(self.window),
            **self.alarms.state_dict(),  # streaks, active, fired, entropy_was_above
            "no_signal_seen": self.no_signal_seen,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step = int(state["step"])
        self.acr_ema = state["acr_ema"]
        self.collapsed_seen = int(state["collapsed_seen"])
        self.groups_seen = int(state["groups_seen"])
        self.early_acr_sum = float(state["early_acr_sum"])
        self.early_count = int(state["early_count"])
        self.window = deque(state["window"], maxlen=self.volatility_window)
        self.alarms.load_state_dict(state)
        self.no_signal_seen = int(state.get("no_signal_seen", 0))


def _population_std(values: deque[float]) -> float:
    # statistics works in exact fractions: a constant window gives exactly 0, not 2e-16
    return statistics.pstdev(values) if len(values) > 1 else 0.0
