"""grposcope's metrics.jsonl read a line at a time into columns, for `grposcope report` and `forecast --from_run`.

Why not logging.jsonl.read_metrics: it holds the whole text, then every line, then a dict per line (twice), which
for a 1 GB file of 589,341 steps peaked at 6.5 GB. Here what is kept is one 8-byte float per step and metric
(`array('d')`), the steps, and a few counters for the notes. The file's rules are read_metrics': only the last
line may be cut short (skipped with a RuntimeWarning); a bad line anywhere else is an error naming it; `null` is
the writer's NaN.

Also said here, one note per file, because each changes what the report shows without a word otherwise:
- values that are NaN or infinite (JSON `NaN`, `Infinity`, `-Infinity`, or `null`): shown as not logged;
- values that are `true` / `false` where a number belongs: read as 1 / 0;
- a step that goes back or repeats: two runs writing one file (or a resume that kept the old lines), shown as
  one run, each step once in step order with the values of its last line (as logs.Collector reads other logs).
"""

from __future__ import annotations

import json
import math
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..logging.jsonl import _warn_partial
from .catalogue import resolve
from .record import to_float

NAN_ROW = array("d", [math.nan])
SHOWN = 3  # metrics, and steps of each, named in a note


@dataclass
class MetricColumns:
    """What a metrics.jsonl holds: `series[name]` aligned with `steps` (sorted, each once), NaN where not logged."""

    path: Path
    steps: list[int] = field(default_factory=list)
    series: dict[str, array] = field(default_factory=dict)
    odd: dict[str, list[Any]] = field(default_factory=dict)  # name -> [count, first step, first value]
    nonfinite: dict[str, list[int]] = field(default_factory=dict)  # name -> steps logged NaN, +-inf or null
    flags: dict[str, list[int]] = field(default_factory=dict)  # name -> steps logged true / false
    unknown: dict[str, int] = field(default_factory=dict)  # keys the catalogue does not know -> values seen
    first_time: float | None = None  # the `time` of the first and last lines (a wall time for a run still going)
    last_time: float | None = None
    back: tuple[int, int, int] | None = None  # (line, step before, step) of the first step that went back
    back_lines: int = 0  # lines whose step is not above the line before's

    def notes(self) -> list[str]:
        return value_notes(self.path, self.nonfinite, self.flags) + ([self._order_note()] if self.back else [])

    def _order_note(self) -> str:
        assert self.back is not None  # notes() asks only when a step went back
        line, before, step = self.back
        went = f"goes back from {before} to {step}" if step < before else f"{step} repeats"
        more = f" ({self.back_lines} such lines)" if self.back_lines > 1 else ""
        return (f"{self.path}: step {went} at line {line}{more}: two runs writing one file, or a resume that kept "
                "the old lines; shown as one run, each step once in step order with the values of its last line")


def read_metric_columns(path: Path) -> MetricColumns:
    """The columns of a grposcope metrics.jsonl, streamed (see the module's docstring)."""
    out = MetricColumns(path)
    reader = _Reader(out)
    pending: tuple[int, str] | None = None  # a bad line: an error unless it is the last
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if pending is not None:
                raise ValueError(f"{path}: line {pending[0]} is not a record ({pending[1]}); remove or fix that line")
            text = _utf8(raw, path, number)
            if not text.strip():
                continue
            try:
                record = json.loads(text)
                if not isinstance(record, dict) or "step" not in record:
                    raise ValueError("not a JSON object with a 'step' key")
            except RecursionError:  # nested past Python's limit: a damaged or hostile line, not a record
                raise ValueError(f"{path}: line {number} nests JSON deeper than Python reads (a damaged or hostile "
                                 "line, no record of a run); remove or fix that line") from None
            except ValueError as err:
                pending = (number, str(err))
                continue
            reader.add(number, record)
    if pending is not None:  # a process killed mid-write
        _warn_partial(path, pending[0])
    reader.finish()
    return out


def _utf8(raw: bytes, path: Path, number: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: line {number}, column {err.start + 1}: not UTF-8 text (byte "
                         f"0x{raw[err.start]:02x}); save the file as UTF-8") from None


class _Reader:
    """Lines -> columns. A step above the last is a new row (the common case: no lookup); a step that goes back
    finds its row through an index built then, and a step not seen before is appended and sorted at the end."""

    def __init__(self, out: MetricColumns) -> None:
        self.out = out
        self.index: dict[int, int] | None = None
        self.unsorted = False
        self.known: dict[str, bool] = {}
        self.prev: int | None = None  # the step of the line before

    def add(self, number: int, record: dict[str, Any]) -> None:
        out, steps = self.out, self.out.steps
        step = record["step"]
        if not ((type(step) is int) or (type(step) is float and step.is_integer())):
            from .values import bad_step

            raise bad_step(step, out.path, f"line {number}")
        step = int(step)
        row = len(steps)
        if self.prev is not None and step <= self.prev or self.index is not None and step in self.index:
            row = self._row_of(number, step)
        self.prev = step
        if row == len(steps):
            steps.append(step)
            if self.index is not None:
                self.index[step] = row
        t = record.get("time")
        if type(t) is float or type(t) is int:
            out.first_time = t if out.first_time is None else out.first_time
            out.last_time = t
        for key, value in record.items():
            if key == "step" or key == "time":
                continue
            kind = type(value)
            if kind is float or kind is int:
                number_ = to_float(value)
                if number_ != number_ or number_ in (math.inf, -math.inf):
                    out.nonfinite.setdefault(key, []).append(step)
            elif value is None:  # the writer's NaN (JSON has none)
                number_ = math.nan
                out.nonfinite.setdefault(key, []).append(step)
            elif kind is bool:
                number_ = float(value)
                out.flags.setdefault(key, []).append(step)
            else:
                seen = out.odd.setdefault(key, [0, step, value])
                seen[0] += 1
                continue
            if not (self.known[key] if key in self.known else self.known.setdefault(key, resolve(key) is not None)):
                out.unknown[key] = out.unknown.get(key, 0) + 1
            column = out.series.get(key)
            if column is None:
                column = out.series[key] = NAN_ROW * row
            if len(column) < row:
                column.extend(NAN_ROW * (row - len(column)))
            if len(column) == row:
                column.append(number_)
            else:  # a repeated step: its later line wins, metric by metric
                column[row] = number_

    def _row_of(self, number: int, step: int) -> int:
        """The row of a step that is not above the last: its own when seen, else a new one (sorted later)."""
        out = self.out
        out.back_lines += 1
        if out.back is None:
            assert self.prev is not None  # a step not above the last: there was a last
            out.back = (number, self.prev, step)
        if self.index is None:
            self.index = {s: i for i, s in enumerate(out.steps)}
        row = self.index.get(step)
        if row is None:
            self.unsorted = True
            return len(out.steps)
        return row

    def finish(self) -> None:
        out = self.out
        n = len(out.steps)
        for column in out.series.values():
            if len(column) < n:
                column.extend(NAN_ROW * (n - len(column)))
        if self.unsorted:
            order = sorted(range(n), key=out.steps.__getitem__)
            out.steps = [out.steps[i] for i in order]
            out.series = {k: array("d", (c[i] for i in order)) for k, c in out.series.items()}


NOT_LOGGED, AS_NUMBERS = "shown as not logged", "read as 1/0"
VALUE_NOTE_ENDS = (f"): {NOT_LOGGED}", f"): {AS_NUMBERS}")  # how value_notes' notes end, to pick them out


def value_notes(path: Path, nonfinite: dict[str, list[int]], flags: dict[str, list[int]]) -> list[str]:
    """One note per kind: the values a file logged as NaN or infinite, and as true / false."""
    notes = []
    for where, what, shown in ((nonfinite, "NaN or infinite", NOT_LOGGED), (flags, "true/false", AS_NUMBERS)):
        count = sum(len(steps) for steps in where.values())
        if count:
            notes.append(f"{path}: {count} value{'s' if count > 1 else ''} {what} ({_where(where)}): {shown}")
    return notes


def _where(where: dict[str, list[int]]) -> str:
    """'loss at steps 4, 7, ...; kl/mean at step 3; 2 more metrics'."""
    parts = []
    for name, steps in list(where.items())[:SHOWN]:
        listed = ", ".join(map(str, steps[:SHOWN])) + (", ..." if len(steps) > SHOWN else "")
        parts.append(f"{name} at step{'s' if len(steps) > 1 else ''} {listed}")
    more = len(where) - SHOWN
    return "; ".join(parts) + (f"; {more} more metric{'s' if more > 1 else ''}" if more > 0 else "")
