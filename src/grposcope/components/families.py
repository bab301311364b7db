"""The component families: the config field that chooses a family's entry -> its registry (core.registry)."""

from __future__ import annotations

from ..core.advantages import ESTIMATORS
from ..core.loss_registry import POLICY_LOSSES
from ..core.registry import Registry
from ..sampling.registry import SAMPLERS

FAMILIES: dict[str, Registry] = {"advantage_estimator": ESTIMATORS, "sampler": SAMPLERS, "policy_loss": POLICY_LOSSES}
LABELS = {"advantage_estimator": "estimator", "sampler": "sampler", "policy_loss": "loss"}  # short names in docs
