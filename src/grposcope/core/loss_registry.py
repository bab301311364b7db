"""The policy-loss family's registry. `losses` (grpo), `gspo` and `cispo` register into it on import; its first
lookup imports every module of `core` (core.registry, `entry_modules`), so a new loss's module is found, not
listed. The other modules of `core` register nothing here. The entries import the shared loss helpers from
`losses`, and nothing imports them back."""

from __future__ import annotations

from .registry import Registry

# grpo (the paper's loss, the default) first; the others by their module's name
POLICY_LOSSES: Registry = Registry("policy loss", package=__package__, first=("grpo",), plugins=True)
