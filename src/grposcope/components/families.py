"""The component families: the config field that chooses a family's entry -> its registry (core.registry)."""

from __future__ import annotations

from ..core.advantages import ESTIMATORS
from ..core.loss_registry import POLICY_LOSSES
from ..core.registry import Registry
from ..sampling.registry import SAMPLERS

FAMILIES: dict[str, Registry] = {"advantage_estimator": ESTIMATORS, "sampler": SAMPLERS, "policy_loss": POLICY_LOSSES}
LABELS = {"advantage_estimator": "estimator", "sampler": "sampler", "policy_loss": "loss"}  # short names in docs


def estimator_with_avspo(advantage_estimator: str, use_avspo: bool) -> str:
    """The advantage estimator a config runs: `use_avspo=True` (the AVSPO paper's switch) is
    advantage_estimator="avspo", and clashes with any other estimator chosen. grposcope's config and the TRL
    integration's both resolve it here."""
    if use_avspo and advantage_estimator not in ("grpo", "avspo"):
        raise ValueError(
            f"use_avspo=True conflicts with advantage_estimator={advantage_estimator!r}: "
            "AVSPO is its own estimator; drop one of the two"
        )
    return "avspo" if use_avspo else advantage_estimator
