"""The rollout backends' registry; `hf` registers the transformers backend on import, which the registry does
on its first lookup (core.registry): no module imports the package that imports it back."""

from __future__ import annotations

from ..core.registry import Registry
from .base import RolloutBackend

ROLLOUTS: Registry[RolloutBackend] = Registry("rollout backend", entry_modules=("grposcope.rollout.hf",))
