"""grposcope.core: the math, in pure torch (no transformers, no config objects).

    from grposcope.core import advantages, diagnostics, losses
"""

from . import advantages, diagnostics, losses
from .advantages import AdvantageOutput
from .diagnostics import CollapseMonitor, collapse_metrics

__all__ = ["AdvantageOutput", "CollapseMonitor", "advantages", "collapse_metrics", "diagnostics", "losses"]
