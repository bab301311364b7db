"""The policy-loss family's registry. `losses` (grpo), `gspo` and `cispo` register into it on import, which it
does on its first lookup (core.registry): the entries import the shared loss helpers from `losses`, and nothing
imports them back."""

from __future__ import annotations

from .registry import Registry

POLICY_LOSSES: Registry = Registry("policy loss", entry_modules=(
    "grposcope.core.losses", "grposcope.core.cispo", "grposcope.core.gspo"), plugins=True)
