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


def _version() -> str:
    """pyproject.toml's version, its one source: as installed (the package metadata pip recorded from it), or,
    from a source tree that was never installed (PYTHONPATH=src), read from the pyproject.toml beside src/;
    "0+unknown" when neither exists."""
    import re
    from importlib.metadata import PackageNotFoundError, version
    from pathlib import Path

    try:
        return version("grposcope")
    except PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if pyproject.is_file():
        table = re.search(r"^\[project\]$(.*?)(?:^\[|\Z)", pyproject.read_text(), re.M | re.S)  # to the next table
        if table and re.search(r'^name = "grposcope"$', table[1], re.M):
            line = re.search(r'^version = "([^"]+)"$', table[1], re.M)
            if line:
                return line[1]
    return "0+unknown"


def __getattr__(name: str):
    if name == "__version__":  # looked up on first use: `import grposcope.core` reads no package metadata
        globals()["__version__"] = _version()
        return globals()["__version__"]
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'grposcope' has no attribute {name!r}")


__all__ = ["GRPOConfig", "GRPOTrainer", "__version__"]
