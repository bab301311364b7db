"""grposcope: measure and fix advantage collapse in GRPO-style RL with verifiable rewards.

    from grposcope import GRPOTrainer, GRPOConfig

The trainer is imported on first use, so that `import grposcope.core` stays light (torch only).
"""

from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {"GRPOTrainer": "grposcope.trainer", "GRPOConfig": "grposcope.trainer.config"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'grposcope' has no attribute {name!r}")


__all__ = ["GRPOConfig", "GRPOTrainer", "__version__"]
