"""The ACR family in verl's own logged metrics: a replay buffer that measures each training batch it hands out.

A verl advantage estimator returns tensors only (verl 0.9.1, ray_trainer.compute_advantage keeps none of its
metrics), and the v1 trainer offers no per-step metric hook outside its own class, except its replay buffer:
`sample()` returns (batch, metrics) and the trainer merges those metrics into the step's
(v1/trainer_base.py, _step_once). So:

    trainer.v1.sampler.custom_sampler.path=pkg://grposcope.integrations.verl_metrics
    trainer.v1.sampler.custom_sampler.name=GrposcopeReplayBuffer          # GrposcopeReplayBufferAsync for the
                                                                           # colocate_async / separate_async modes
    +trainer.v1.sampler.sampler_kwargs.success_threshold=0.5               # optional; default 0.5

logs `collapse/acr`, `collapse/acr_all_correct` and `collapse/acr_all_wrong` of the batch sampled for that step
(grouped by uid from the trajectory keys, scores = the sum of each trajectory's rm_scores, before any KL penalty)
with any advantage estimator, verl's grpo included, and the run-long part of the family from a collapse monitor
fed each sampled batch: `collapse/acr_ema`, `acr_cumulative`, `acr_100`, `volatility` and `alarm/stagnation` (one
update per sampled batch: per step with `parameter_sync_step` 1, verl's default). Measured where the batch leaves
the buffer, so after verl's own filtering would have happened, and before the padding rows exist. The ACR family
is averaged over the `parameter_sync_step` iterations of a step, like verl's other metrics (MetricsAggregator).

verl builds a custom sampler without its DAPO filter (v1/trainer_base.py, _build_replay_buffer: the
filter_groups arguments go to the built-in buffers only), so this turns `algorithm.filter_groups` off. That is
deliberate: with filtering on, the batch holds no collapsed group (verl drops every group whose metric has
zero std before sampling), its ACR is 0 by construction, and the collapse shows only in verl's own
`training/filter_groups/evicted_samples` (groups dropped per step). Needs verl's v1 trainer and TransferQueue.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from ..core.diagnostics import CollapseMonitor, alarm_window
from . import verl as _registration  # noqa: F401  first: it checks verl's version (and registers the estimators)
from .verl_groups import group_rows, monitored, padded_groups, step_collapse

# isort: split
import transfer_queue as tq  # verl's v1 trainer needs it too (verl's "verl-core" extra)
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync

logger = logging.getLogger("grposcope")
MONITOR_STATE = "grposcope_replay_monitor"  # the buffer's collapse monitor in grposcope's checkpoint state


def uid_of(key: str) -> str:
    """The prompt uid of a trajectory key `{uid}_{session}_{index}` (verl's v1 key format; a uid is a uuid4)."""
    return key.split("_")[0]


def batch_metrics(keys: list[str], scores: torch.Tensor, success_threshold: float,
                  monitor: CollapseMonitor | None = None) -> dict[str, float]:
    """The ACR family of one sampled batch, and with a monitor its run-long part (acr_ema, acr_cumulative,
    acr_100, volatility, the stagnation alarm).  keys (N,) trajectory keys, scores (N,) -> metrics."""
    uids = [uid_of(k) for k in keys]
    if monitor is None:
        return step_collapse(uids, scores, success_threshold)
    groups = group_rows(uids, scores.shape[0])
    return monitored(monitor, padded_groups(scores, groups.rows)) if groups.rows else {}


class _MeasuredSampling:
    """Adds the ACR family of every training batch `sample()` returns to that step's metrics."""

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[Any, dict]:
        batch, metrics = super().sample(global_steps, partition_id, batch_size)  # type: ignore[misc]
        if partition_id != "train" or not batch.keys:
            return batch, metrics
        try:
            data = tq.kv_batch_get(keys=batch.keys, partition_id=partition_id, select_fields=["rm_scores"])
        except Exception as err:  # a metric must not stop a run: e.g. a colocated reward model scores later
            if not getattr(self, "_warned", False):
                logger.warning("grposcope: no rm_scores at sampling time (%s); collapse/* not logged", err)
                self._warned = True
            return batch, metrics
        scores = torch.tensor([float(v.sum()) for v in data["rm_scores"]], dtype=torch.float64)  # (N,)
        return batch, {**metrics, **batch_metrics(batch.keys, scores, self._threshold(), self._monitor())}

    def _threshold(self) -> float:
        return float((self.sampler_kwargs or {}).get("success_threshold", 0.5))  # type: ignore[attr-defined]

    def _monitor(self) -> CollapseMonitor:
        """The run's collapse monitor, one per buffer; its state is saved with grposcope's in verl's checkpoints
        (GrposcopeCheckpointCallback) and restored when verl resumes."""
        if getattr(self, "_collapse_monitor", None) is None:
            self._collapse_monitor = CollapseMonitor(self._threshold(), stagnation_steps=alarm_window(None),
                                                     entropy_steps=alarm_window(None))
            _registration.attach_state(MONITOR_STATE, self._collapse_monitor)
        return self._collapse_monitor


class GrposcopeReplayBuffer(_MeasuredSampling, ReplayBuffer):
    """verl's sync replay buffer, measured (trainer.v1.trainer_mode=sync)."""


class GrposcopeReplayBufferAsync(_MeasuredSampling, ReplayBufferAsync):
    """verl's async replay buffer, measured (trainer.v1.trainer_mode=colocate_async or separate_async)."""


__all__ = ["GrposcopeReplayBuffer", "GrposcopeReplayBufferAsync", "batch_metrics", "uid_of"]
