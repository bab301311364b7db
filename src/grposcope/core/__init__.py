"""grposcope.core: the math, in pure torch (no transformers, no config objects).

    from grposcope.core import advantages, diagnostics, losses

Its modules load on first use, so that the torch-free ones (the plug-in registry, the alarm rules) serve the
log readers of a plain install, which has no torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what IDEs and type checkers read; at run time these load on first use (__getattr__)
    from . import advantages, diagnostics, losses
    from .advantages import AdvantageOutput
    from .diagnostics import CollapseMonitor, collapse_metrics

_MODULES = ("advantages", "diagnostics", "losses")
_NAMES = {"AdvantageOutput": "advantages", "CollapseMonitor": "diagnostics", "collapse_metrics": "diagnostics"}


def __getattr__(name: str):
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AdvantageOutput", "CollapseMonitor", "advantages", "collapse_metrics", "diagnostics", "losses"]
