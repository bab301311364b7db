"""grposcope.diagnose: findings from what a run logged (scalar logs, rollouts where there are any).

    from grposcope.diagnose import diagnose, Options
    from grposcope.runs import load_run      # any log format -> Run
    d = diagnose(load_run("trl_out/"))
    for f in d.findings: print(f.severity, f.detector, f.step, f.title)

Layers: pure numpy over the Run record (runs/record.py); imports nothing above runs. The catalogue
(runs/catalogue.py) names every metric; the detectors (detectors/) and the cost (cost.py) read those names.
"""

from ..runs.catalogue import CATALOGUE, resolve
from ..runs.record import Run
from .detectors import DETECTORS
from .engine import SCHEMA, Diagnosis, Options, diagnose, document
from .findings import SEVERITIES, Finding, Fix

__all__ = ["CATALOGUE", "DETECTORS", "SCHEMA", "SEVERITIES", "Diagnosis", "Finding", "Fix", "Options", "Run",
           "diagnose", "document", "resolve"]
