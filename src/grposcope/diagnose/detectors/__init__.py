"""The detectors: one registry (`DETECTORS`), one class per failure, each in the module of its kind.

A detector declares the metrics it needs (`needs`: groups of canonical names, one of each group must be logged)
and returns zero or more findings from `detect(view)`. Its fix and papers are class attributes, so `grposcope
diagnose --list` and docs/diagnose.md show them without running anything. Thresholds are module constants, each
with its reason in docs/diagnose.md. A new detector is a `@register` class in a module of this package: the
registry finds it (base.py).
"""

from __future__ import annotations

# The registry imports this package's modules on its first lookup, and each registers its detectors (base.py);
# nothing here lists them, so a detector cannot be left out by a forgotten import.
from .base import DETECTORS, Detector

__all__ = ["DETECTORS", "Detector"]
