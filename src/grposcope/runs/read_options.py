"""`ReadOptions`: what the user says of a log that it cannot say itself, for every reader (formats/) and the
commands that read runs. A module of its own, so that the readers and load.py, which asks them, import it and
not each other."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ReadOptions:
    """How a log is read (`grposcope diagnose` / `report`'s options of the same names)."""

    success_threshold: float | None = None  # None: 0.5 for rewards in [0, 1], else the midpoint of those seen
    entropy_floor: float = 0.5
    kl_bound: float = 0.5
    step_key: str | None = None  # a table's step column, when none of the common names
    mapping: tuple[tuple[str, str], ...] = field(default=())  # (key, metric): --map KEY=METRIC
    pattern: str | None = None  # a console log's line format: a regex with a named group `step`
    engine: str | None = None  # --engine: read the keys as this engine's (runs/engines), when they do not say
    segments: str = "long"  # a log with restarts: "last" its last run, "each" every one, "long" the last and
    # every earlier one of 20 or more logged steps (record.parts)


def line_pattern(pattern: str) -> re.Pattern[str]:
    """`--pattern`, compiled: a regular expression with a named group `step`; else a ValueError naming the fault
    (checked by the command before any log is read, and by the console reader that uses it)."""
    try:
        regex = re.compile(pattern)
    except re.error as err:
        raise ValueError(f"--pattern {pattern!r} is not a regular expression ({err}); e.g. "
                         "'it (?P<step>\\d+) R (?P<reward>[-.\\d]+)'") from None
    if "step" not in regex.groupindex:
        raise ValueError(f"--pattern {pattern!r} has no named group `step`: write (?P<step>\\d+) where the step is")
    return regex
