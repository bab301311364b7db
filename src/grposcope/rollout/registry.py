"""The rollout backends' registry; `hf` registers the transformers backend on import, and the registry imports
every module of this package on its first lookup (core.registry, `entry_modules`): no module imports the package
that imports it back, and a new backend's module is found, not listed."""

from __future__ import annotations

from ..core.registry import Registry
from .base import RolloutBackend

ROLLOUTS: Registry[RolloutBackend] = Registry("rollout backend", package=__package__)
