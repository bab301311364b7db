"""grposcope: measure and fix advantage collapse in GRPO-style RL with verifiable rewards."""

__version__ = "0.1.0"
