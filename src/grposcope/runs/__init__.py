"""Reading runs back: one reader per log format in a registry (formats/), the run record (record.Run), and the
metric catalogue every reader resolves its keys through (catalogue.py). Below diagnosis and reports, which read
runs through `load_run`."""

from .load import ReadOptions, load_run, load_runs, run_kind
from .record import Run

__all__ = ["ReadOptions", "Run", "load_run", "load_runs", "run_kind"]
