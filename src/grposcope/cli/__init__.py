"""The `grposcope` command: one module per command.

    grposcope train                                   # the quickstart preset
    grposcope train --config run.yaml --num_generations 16 --use_avspo true
    grposcope eval --model output/quickstart/model --dataset arithmetic
    grposcope simulate --sampler fixed,dynamic
    grposcope diagnose output/quickstart                # findings from any run's logs
    grposcope report output/quickstart --output report
    grposcope sweep --output runs/sweep --group_sizes 4,8 --levels easy,hard
"""

from __future__ import annotations

from . import audit, diagnose, eval, forecast, report, simulate, sweep, train  # noqa: F401  (register the commands)
from .app import app
from .options import coerce, coerce_all, parse_overrides, read_yaml


def run() -> None:  # the console-script entry point
    app()


__all__ = ["app", "coerce", "coerce_all", "parse_overrides", "read_yaml", "run"]
