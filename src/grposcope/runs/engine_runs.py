"""A stock TRL or verl run as a report's Run: the ACR family recomputed from the rewards its rollout files hold,
beside the metrics the engine logged itself (TRL's log_history, verl's file logger).

The ACR family is grposcope's own (core.diagnostics.CollapseMonitor, fed each step's groups as the trainer
feeds it), with three differences a stock run's files force, each said in the run's notes:
- only the steps whose rollouts were written are seen (TRL writes at its logging steps): `acr_ema`,
  `volatility`, `acr_cumulative` and the alarms run over the seen steps, the stagnation and entropy alarms
  wait for a tenth of the seen steps (`alarm_window`) counted in seen steps, and `acr_100` is the mean ACR
  of the seen steps among steps 1-100. Nothing is interpolated.
- the success threshold that splits collapsed groups into all-correct and all-wrong is `--success_threshold`,
  by default 0.5 when every reward lies in [0, 1] (grposcope's default for its reward range) and the
  midpoint of the rewards seen otherwise.
- `collapse/acr_post` and the no-signal alarm need the advantages: TRL writes them, verl does not.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .rollouts import Rollouts, StepGroups, plural, step_span

if TYPE_CHECKING:
    import torch

ACR_100_STEPS = 100

GROUPS = "groups"  # groups of two or more completions in the step's rollouts (steps.csv, the plots)


def step_rewards(step: StepGroups) -> "torch.Tensor":
    """A step's groups as core's (B, G) reward matrix, uneven groups padded with their own mean."""
    import torch

    from ..core.diagnostics import pad_groups

    return pad_groups([torch.tensor(g, dtype=torch.float64) for g in step.rewards])


def success_threshold(low: float, high: float, given: float | None) -> tuple[float, str]:
    """(the threshold a completion succeeds at, why): `given` (--success_threshold) when set, else 0.5 for
    rewards in [low, high] within [0, 1], else the midpoint of the rewards seen."""
    if given is not None:
        return given, "--success_threshold"
    if 0.0 <= low and high <= 1.0:
        return 0.5, "grposcope's default for rewards in [0, 1]"
    return (low + high) / 2, "the midpoint of the rewards seen; --success_threshold sets it"


def replay(rollouts: Rollouts, engine: dict[int, dict[str, float]], given_threshold: float | None,
           entropy_floor: float, kl_bound: float) -> tuple[dict[int, dict[str, float]], list[str]]:
    """The ACR family of every step the rollouts hold, as grposcope's trainer computes it, with the engine's
    entropy and KL (`engine[step]["entropy/mean"]`, `["kl/mean"]`) for their alarms. -> ({step: metrics}, notes)."""
    import torch

    from ..core.diagnostics import ZERO_ADVANTAGE_TOL, CollapseMonitor, alarm_window, collapsed_groups

    notes = []
    low, high = rollouts.reward_range()
    threshold, how = success_threshold(low, high, given_threshold)
    notes.append(f"rewards seen in [{low:g}, {high:g}]; a collapsed group is all-correct when its common reward "
                 f"is >= {threshold:g} ({how})")
    seen = [s.step for s in rollouts.steps]
    window = alarm_window(len(seen))
    early = max(1, sum(s <= ACR_100_STEPS for s in seen))
    monitor = CollapseMonitor(success_threshold=threshold, early_steps=early, stagnation_steps=window,
                              entropy_steps=window, entropy_floor=entropy_floor, kl_bound=kl_bound)
    out: dict[int, dict[str, float]] = {}
    disagree = 0  # groups whose advantages (TRL's) say otherwise than their summed rewards
    quiet = logging.getLogger("grposcope")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the onsets are the report's alarms column, not a console warning each
    try:
        for step in rollouts.steps:
            rewards = step_rewards(step)  # (B, G)
            advantages = None
            if step.advantages is not None:
                advantages = torch.zeros(rewards.shape, dtype=torch.float64)  # (B, G), 0-padded
                for i, a in enumerate(step.advantages):
                    advantages[i, : len(a)] = torch.tensor(a, dtype=torch.float64).nan_to_num(0.0)
                disagree += int((collapsed_groups(rewards) != (advantages.abs() < ZERO_ADVANTAGE_TOL).all(dim=1)).sum())
            figures = engine.get(step.step, {})
            metrics = monitor.update(rewards, advantages, entropy=_finite(figures.get("entropy/mean")),
                                     kl=_finite(figures.get("kl/mean")))
            metrics[GROUPS] = float(len(step.rewards))
            if "reward/mean" not in figures or not math.isfinite(figures["reward/mean"]):  # verl without its logger
                metrics["reward/mean"] = math.fsum(map(math.fsum, step.rewards)) / sum(map(len, step.rewards))
            out[step.step] = metrics
    finally:
        quiet.setLevel(level)
    notes.append(f"group sizes seen: {_sizes(rollouts.group_sizes(), rollouts.kind)}")
    notes.append(f"the ACR family is computed from the rollouts of {plural(len(seen), 'step')} ({step_span(seen)}); "
                 f"acr_ema, acr_cumulative, volatility and the alarms run over those steps alone (the stagnation "
                 f"and entropy alarms wait for {window} seen steps in a row); acr_100 is the mean ACR of the "
                 f"{plural(early if seen and seen[0] <= ACR_100_STEPS else 0, 'seen step')} among steps 1-100")
    if disagree:
        notes.append(f"on {plural(disagree, 'group')} the engine's advantages disagree with the rewards summed here "
                     "(all zero where the rewards differ, or the reverse): the run likely set reward_weights or "
                     "multi_objective_aggregation='normalize_then_sum'; the ACR here weighs every reward column 1")
    without = [s.step for s in rollouts.steps if s.advantages is None]
    if without:
        notes.append(f"no advantages in the rollouts of {plural(len(without), 'step')} ({step_span(without)}): "
                     "collapse/acr_post and the no-signal alarm are not computed there")
    return out, notes


def _sizes(sizes: Counter, kind: str) -> str:
    """`10 groups of 4, 1 group of 3`, with what an odd size most likely means."""
    usual = max(sizes, key=lambda s: (sizes[s], s))
    text = ", ".join(f"{plural(n, 'group')} of {s}" for s, n in sorted(sizes.items(), key=lambda i: -i[1]))
    if any(s < usual for s in sizes):
        text += (f"; a group smaller than {usual} lost rollouts (failed, filtered, or its file cut short) and is "
                 "read as it is")
    if any(s > usual for s in sizes) and kind == "verl":
        text += (f"; a group larger than {usual} is most likely one prompt drawn twice in a step (verl writes no "
                 "uid, so its rows cannot be told apart) and is read as one group")
    return text


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def is_verl_logger_record(record: Any) -> bool:
    return (isinstance(record, dict) and isinstance(record.get("data"), dict)
            and isinstance(record.get("step"), int) and not isinstance(record.get("step"), bool))


def is_verl_logger(path: Path) -> bool:
    """Whether `path`'s first line is a verl file logger record; False, unopened, for what is no regular file
    (a FIFO would wait for a writer for ever)."""
    from .file_kinds import not_a_file

    if not_a_file(path) is not None:
        return False
    try:
        with path.open("rb") as handle:
            first = handle.readline()
        return is_verl_logger_record(json.loads(first))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return False


def verl_logger_beside(folder: Path) -> tuple[Path | None, str | None]:
    """The one verl file-logger .jsonl in the dump folder or its parent folder: (path, None), or (None, a
    note) when there are several, or (None, None) when there is none."""
    from .rollouts import VERL_FILE

    found = sorted({p for where in (folder, folder.parent) for p in where.glob("*.jsonl")
                    if not VERL_FILE.fullmatch(p.name) and p.is_file() and is_verl_logger(p)})
    if len(found) > 1:
        return None, (f"several verl file-logger files beside {folder} ({', '.join(p.name for p in found)}): none "
                      "read; report the logger file of this run as its own run to see its metrics")
    return (found[0], None) if found else (None, None)
