"""grposcope.logging: where a run's metrics go, and what the console shows.

    from grposcope.logging import RunLogger, read_metrics
    logger = RunLogger("./output", report_to=["tensorboard", "wandb"], total_steps=200)

Every run writes <output_dir>/metrics.jsonl (see `jsonl`), and <output_dir>/completions.jsonl once the trainer
logs completions (see `completions`); `report_to` adds TensorBoard and W&B. New backends register a factory
`(run: RunInfo) -> MetricsBackend` with `register`.
"""

from __future__ import annotations

from .backends import (
    LOGGERS,
    CompletionsBackend,
    MetricsBackend,
    RunInfo,
    TensorBoardBackend,
    WandbBackend,
    prefixed,
    register,
    resolve_report_to,
)
from .completions import COMPLETIONS_FILE, read_completions
from .jsonl import JsonlBackend, read_metrics, truncate_after
from .run_logger import RunLogger
from .summary import RunStats, edge_means


def available() -> list[str]:
    """The registered backend names (usable in report_to)."""
    return LOGGERS.names()


__all__ = [
    "COMPLETIONS_FILE",
    "LOGGERS",
    "CompletionsBackend",
    "JsonlBackend",
    "MetricsBackend",
    "RunInfo",
    "RunLogger",
    "RunStats",
    "TensorBoardBackend",
    "WandbBackend",
    "available",
    "edge_means",
    "prefixed",
    "read_completions",
    "read_metrics",
    "register",
    "resolve_report_to",
    "truncate_after",
]
