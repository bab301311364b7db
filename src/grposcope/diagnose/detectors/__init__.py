"""The detectors: one registry (`DETECTORS`), one class per failure, each in the module of its kind.

A detector declares the metrics it needs (`needs`: groups of canonical names, one of each group must be logged)
and returns zero or more findings from `detect(view)`. Its fix and papers are class attributes, so `grposcope
diagnose --list` and docs/diagnose.md show them without running anything. Thresholds are module constants, each
with its reason in docs/diagnose.md.
"""

from __future__ import annotations

# each module registers its detectors when imported: they import base.py, never this package (no circle)
from . import collapse, exploration, gradient, length, reward  # noqa: F401
from .base import DETECTORS, Detector

__all__ = ["DETECTORS", "Detector"]
