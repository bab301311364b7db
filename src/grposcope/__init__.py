"""grposcope: measure and fix advantage collapse in GRPO-style RL with verifiable rewards.

    from grposcope import GRPOTrainer, GRPOConfig

The trainer is imported on first use, so that `import grposcope.core` stays light (torch only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what IDEs and type checkers read; at run time these load on first use (__getattr__)
    from .trainer.config import GRPOConfig
    from .trainer.trainer import GRPOTrainer

_LAZY = {"GRPOTrainer": "grposcope.trainer", "GRPOConfig": "grposcope.trainer.config"}


def __getattr__(name: str):
    if name == "__version__":  # looked up on first use: `import grposcope.core` reads no package metadata
        from .version import package_version

        globals()["__version__"] = package_version()
        return globals()["__version__"]
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'grposcope' has no attribute {name!r}")


__all__ = ["GRPOConfig", "GRPOTrainer", "__version__"]
