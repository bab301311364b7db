"""The one-machine trainer: GRPOConfig and GRPOTrainer."""

from .config import GRPOConfig
from .trainer import GRPOTrainer

__all__ = ["GRPOConfig", "GRPOTrainer"]
