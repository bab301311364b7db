"""verl's flat batch as grposcope's (B, G) groups: group rows by prompt uid, run an estimator, scatter back.

verl hands an advantage estimator one row per response, in whatever order its sequence-length balancing left
them, with `index` the prompt uid of each row (verl 0.9.1, verl/trainer/ppo/ray_trainer.py, compute_advantage).
grposcope's estimators take a rectangular (B, G) reward matrix. This module translates, and imports neither verl
nor anything above grposcope.core, so that it is tested in the main suite as well.

- Padding rows: verl's v1 trainer appends no-op rows so that the batch divides across ranks; their uid starts
  with "pad" (verl/trainer/ppo/padding_utils.py). They get advantage 0 and join no group: left in, they would
  form an all-wrong group of zero rewards and count towards the ACR (and AVSPO's signal). A real uid never
  starts with "pad": verl draws it with uuid4, whose text is hexadecimal.
- Uneven groups (failed rollouts, multi-turn sessions): the groups of each size s form one (B_s, s) matrix and
  one estimator call. A stateful estimator (AVSPO, arXiv 2605.21125) must still take one state update per step,
  so every call after the first starts again from the state the step began with, and all calls read the step's
  collapse signal from the same matrix `as_drawn` (every group, padded to the largest size with its own mean:
  that keeps whether a group is collapsed and its common reward). Two deviations, only when sizes differ:
  AVSPO's J_t is then the mean of the group means (the sample mean when groups are even), and its all-wrong
  guard (`all_wrong_max_share`) weighs the all-wrong groups of one size against the mixed groups of that size.
- Groups of one response get advantage 0 and join no statistic: one reward has no group to be compared with.

Notation: N rows, B groups of two or more rows, B_s groups of size s, G the largest size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch

from ..core.advantages import AdvantageEstimator, PoolStats
from ..core.diagnostics import CollapseMonitor, collapse_metrics, pad_groups, post_collapse_rate

PAD_PREFIX = "pad"


@dataclass
class Groups:
    """The rows of each prompt, in the order its uid first appears."""

    rows: list[np.ndarray]  # B arrays of row indices, each of size >= 2
    padding: int  # rows whose uid starts with "pad"
    singletons: list[int]  # rows alone under their uid

    def sizes(self) -> dict[int, list[int]]:
        """{group size s: the ids of the groups of that size}, sizes ascending."""
        by_size: dict[int, list[int]] = {}
        for gid, rows in enumerate(self.rows):
            by_size.setdefault(len(rows), []).append(gid)
        return dict(sorted(by_size.items()))


def verl_name(name: str) -> str:
    """The name verl's registry knows grposcope estimator `name` by: grposcope_<name>, so that none shadows
    verl's own (verl has a grpo), except avspo, which verl does not have."""
    return name if name == "avspo" else f"grposcope_{name}"


def group_rows(index: Sequence[Any] | np.ndarray, n: int) -> Groups:
    """Groups row ids by uid.  index (N,) of uids (verl: strings in an object array) -> Groups."""
    if len(index) != n:
        raise ValueError(f"index has {len(index)} uids but the batch has {n} rows")
    members: dict[Any, list[int]] = {}
    padding = 0
    for row, uid in enumerate(index):
        if str(uid).startswith(PAD_PREFIX):
            padding += 1
            continue
        members.setdefault(uid, []).append(row)
    rows = [np.asarray(r) for r in members.values() if len(r) > 1]
    singletons = [r[0] for r in members.values() if len(r) == 1]
    return Groups(rows, padding, singletons)


def padded_groups(scores: torch.Tensor, rows: list[np.ndarray]) -> torch.Tensor:
    """Every group as one row of a matrix, padded with its own mean (core's `pad_groups`).  scores (N,) -> (B, G)."""
    return pad_groups([scores[torch.as_tensor(r)] for r in rows])


# what the collapse monitor reports but cannot measure where verl hands grposcope only rewards (the rollout
# manager, the replay buffer): no entropy, KL or advantages reach it; verl logs `actor/entropy` itself
UNMEASURED = ("alarm/entropy_collapse", "alarm/kl_drift", "alarm/no_signal", "collapse/no_signal_streak",
              "collapse/no_signal_steps")


def monitored(monitor: CollapseMonitor, rewards: torch.Tensor) -> dict[str, float]:
    """One step of the collapse monitor on rewards alone.  rewards (B, G) the groups as first drawn -> the ACR
    family with acr_ema, acr_cumulative, acr_100, volatility and the stagnation alarm."""
    return {k: v for k, v in monitor.update(rewards).items() if k not in UNMEASURED}


def step_collapse(index: Sequence[Any] | np.ndarray, scores: torch.Tensor, success_threshold: float
                  ) -> dict[str, float]:
    """The ACR family of a flat batch (padding rows and singletons left out; {} when no group is left).
    index (N,) uids, scores (N,) -> {"collapse/acr", "collapse/acr_all_correct", "collapse/acr_all_wrong"}."""
    groups = group_rows(index, scores.shape[0])
    if not groups.rows:
        return {}
    return collapse_metrics(padded_groups(scores, groups.rows), success_threshold)


def _restart_from(est: AdvantageEstimator, state: dict[str, Any]) -> None:
    """Puts `est` back to the state the step began with, except its random generator (AVSPO's "uniform"
    strategy), which moves on, so that groups of different sizes do not get the same draws."""
    if "generator" in state:
        state = dict(state, generator=est.state_dict()["generator"])
    est.load_state_dict(state)


def run_estimator(est: AdvantageEstimator, scores: torch.Tensor, groups: Groups, success_threshold: float,
                  pool_of: Callable[[list[int]], PoolStats] | None = None, as_drawn: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, dict[str, float]]:
    """Advantages of every row, and the step's metrics.  scores (N,) -> advantages (N,) of scores' dtype.

    One call of `est` per group size (see the module docstring); rows in no group get 0. What grposcope's own
    trainer hands an estimator beside the rewards, when a sampler drew the batch (verl_sampling): `pool_of(gids)`
    the pools of those groups (Reinforce-Ada's baseline), `as_drawn` (B0, G) the groups as first drawn (AVSPO's
    collapse signal). Without them each group is its own pool and the groups here are the groups as drawn.
    """
    adv = torch.zeros_like(scores)  # (N,)
    metrics: dict[str, float] = {"grposcope/padding_rows": float(groups.padding),
                                 "grposcope/singleton_groups": float(len(groups.singletons))}
    if not groups.rows:
        return adv, metrics
    by_size = groups.sizes()
    drawn = padded_groups(scores, groups.rows)  # (B, G)
    if as_drawn is None:
        as_drawn = drawn if len(by_size) > 1 else None  # even groups: the estimator reads its own input
    start = est.state_dict()
    weighted: dict[str, float] = {}
    for call, (size, gids) in enumerate(by_size.items()):
        if call:
            _restart_from(est, start)
        idx = torch.as_tensor(np.stack([groups.rows[g] for g in gids]))  # (B_s, s) row ids
        pool = pool_of(gids) if pool_of is not None else None
        out = est(scores[idx], pool=pool, as_drawn=as_drawn)  # rewards (B_s, s) -> advantages (B_s, s)
        adv[idx] = out.advantages.to(scores.dtype)
        for key, value in out.metrics.items():  # identical across sizes for the signal and tau
            weighted[key] = weighted.get(key, 0.0) + value * len(gids) / len(groups.rows)
    metrics.update(collapse_metrics(drawn, success_threshold))
    metrics["collapse/acr_post"] = post_collapse_rate(_zero_padded(adv, groups.rows))
    metrics.update(weighted)
    return adv, metrics


def _zero_padded(adv: torch.Tensor, rows: list[np.ndarray]) -> torch.Tensor:
    """Every group's advantages as one row, padded with 0 (no gradient: a row is all ~0 exactly when its group's
    advantages are), for core's `post_collapse_rate`.  adv (N,) -> (B, G)."""
    out = adv.new_zeros(len(rows), max(len(r) for r in rows))  # (B, G)
    for i, r in enumerate(rows):
        out[i, : len(r)] = adv[torch.as_tensor(r)]
    return out


__all__ = ["Groups", "PAD_PREFIX", "group_rows", "padded_groups", "run_estimator", "step_collapse", "verl_name"]
