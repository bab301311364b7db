"""The one-machine trainer: GRPOConfig and GRPOTrainer.

Both load on first use (PEP 562): the TRL and verl integrations read the config's fields and checks from
`trainer.config` without loading the trainer's loop, its rollout and its checkpoints."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import GRPOConfig
    from .trainer import GRPOTrainer

__all__ = ["GRPOConfig", "GRPOTrainer"]


def __getattr__(name: str) -> Any:
    if name == "GRPOConfig":
        from .config import GRPOConfig

        return GRPOConfig
    if name == "GRPOTrainer":
        from .trainer import GRPOTrainer

        return GRPOTrainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
