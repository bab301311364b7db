"""What every reader of step records shares: the step column found by content, and `Collector`, which turns step
records into a Run's columns (keys through the catalogue, bad values one line per column, never per value).

Streaming: a file is read record by record (a line, a CSV row, an event, a W&B record); what is kept is one
number per logged step and metric. A bad record or value costs one problem line per file and kind of fault,
naming the file, never the rest of the file. A column of text or of true/false is metadata (a run name, a
`done` flag): one note for all such columns, not a problem; a true/false column the catalogue knows (a
`skipped` flag: a step without an update) is read as 0/1.
"""

from __future__ import annotations

import csv
import math
import re
from array import array
from collections import Counter
from itertools import islice
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from .catalogue import SKIPPED_NO_SIGNAL, by_engine_name, fold, resolve
from .record import Run, to_float

# The step column, most specific first: W&B's own `_step` counts log calls, which transformers makes several of
# per optimizer step (train and eval), so its `train/global_step` is preferred. Matched after folding case and
# separators (catalogue.fold) (`Step`, `Global-Step`), so `iteration`, `iter`, `update` of hand-written loops
# count too; `--step_key` names any other.
STEP_KEYS = ("step", "global_step", "train/global_step", "trainer/global_step", "_step", "iteration", "iter",
             "update", "updates", "train_step", "training_step", "optimizer_step", "steps", "it", "epoch_step")
# keys that are not metrics: the step counters and clocks (the live diagnosis skips them too)
NOT_METRICS = frozenset(("step", "global_step", "train/global_step", "trainer/global_step", "_step", "iteration",
                         "time", "_timestamp", "_runtime", "epoch", "train/epoch", "timestamp", "wall_time"))
SKIPPED = NOT_METRICS | {"training/global_step", "training/epoch"}  # verl's counters ride in its data too
UNKNOWN_RANK = 99  # a key the catalogue does not know: any spelling it knows is preferred
MAPPED_RANK = -1  # a key the user mapped (--map KEY=METRIC) wins over every spelling in its record
_NAN = array("d", [math.nan])  # a column is padded with it where a step did not log the name


_FOLDED_STEPS = {fold(k): i for i, k in enumerate(STEP_KEYS)}


def step_column(keys: Iterator[str] | list[str], given: str | None = None) -> str | None:
    """The step column among `keys`: `given` (`--step_key`) if present, else the first of STEP_KEYS by rank,
    matched with case and separators folded. None when there is none."""
    keys = list(keys)
    if given is not None:
        return given if given in keys else None
    ranked = sorted((_FOLDED_STEPS[fold(k)], k) for k in keys if fold(k) in _FOLDED_STEPS)
    return ranked[0][1] if ranked else None


def shown_columns(keys: list[str]) -> str:
    """A table's columns for an error line: the first 20, and how many in all."""
    return ", ".join(keys[:20]) + (f", ... ({len(keys)} in all)" if len(keys) > 20 else "")


def no_step_column(path: Path, keys: list[str], given: str | None) -> ValueError:
    """The error of a table without a step column: the columns it saw, and `--step_key`."""
    seen = shown_columns(keys)
    if given is not None:
        return ValueError(f"{path} has no column {given!r} (--step_key); its columns: {seen}")
    return ValueError(f"{path} has no step column (none of {', '.join(STEP_KEYS[:8])}, ...); its columns: {seen}. "
                      "Name the column that counts the steps with --step_key NAME")


class Collector:
    """Step records -> a Run's columns. Keys go through the catalogue; of two spellings of one metric in one
    record the catalogue's preferred (lower rank) wins; a later record of a step overwrites an earlier one key by
    key (a resumed run re-logs the steps after its checkpoint: the later values are the ones that trained on)."""

    def __init__(self, path: Path, mapping: Mapping[str, str] | None = None, step_key: str | None = None,
                 held_out: bool = False) -> None:
        self.path = path
        self.held_out = held_out  # an evaluation's file: `accuracy` is the held-out accuracy (read as eval_accuracy)
        self.mapping = dict(mapping or {})  # --map KEY=METRIC: the user's reading of a key, before the catalogue's
        self.step_key = step_key  # the record's step column, not a metric
        self.read_as: dict[str, str] = {}  # key -> metric, for keys read by their plain spelling or the user's map
        # the values as columns: 8 bytes a value (a 1 GB log's dicts of Python floats took several GB)
        self.rows: dict[int, int] = {}  # step -> its row in the columns, in the order first read
        self.columns: dict[str, array] = {}  # name -> (rows,) its values, NaN where the step did not log it
        self.unknown: Counter = Counter()
        self.not_numbers: dict[str, list[Any]] = {}  # name -> [count, first step, first value]
        self.flags: Counter = Counter()  # name -> values logged as true/false
        self.not_scalars: set[str] = set()  # histograms, tables, media
        self.repeated = self.backwards = 0
        self.last: int | None = None
        self.problems: list[str] = []
        self.nonfinite: dict[str, set[int]] = {}  # name -> steps that logged NaN or +-inf
        self._names: dict[str, tuple[str, int, bool] | None] = {}  # key -> (name, rank, known); None: skipped
        self._absorbed: list[set[str]] = []  # the names of the collectors absorbed into this one

    def _name(self, key: str) -> tuple[str, int, bool] | None:
        if key in self.mapping:
            self.read_as[key] = self.mapping[key]
            return self.mapping[key], MAPPED_RANK, True
        if key in SKIPPED or key in STEP_KEYS or key == self.step_key:
            return None
        spelled = f"eval_{key}" if self.held_out and not key.startswith(("eval", "val", "test")) else key
        found = resolve(spelled)
        if found is None:
            return spelled, UNKNOWN_RANK, False
        if found[0] != key and not by_engine_name(key):
            self.read_as[key] = found[0]
        return found[0], found[1], True

    def add(self, step: int, record: dict[str, Any]) -> None:
        if self.last is not None and step < self.last:
            self.backwards += 1
        self.last = step
        numbers: dict[str, tuple[int, float]] = {}
        names = self._names
        for key, value in record.items():
            entry = names[key] if key in names else names.setdefault(key, self._name(key))
            if entry is None:
                continue
            name, rank, known = entry
            if not known:
                self.unknown[key] += 1
            kind = type(value)
            if kind is float or kind is int:  # the common case, without number_of's checks
                number = to_float(value)
            else:
                parsed = number_of(value)
                if parsed is None:
                    self._not_a_number(name, step, value)
                    continue
                number = parsed
                if kind is bool:  # a flag: read as 0/1 when the catalogue knows it (`skipped`), else metadata
                    self.flags[name] += 1
                    if not known:
                        continue
            if number != number or number in (math.inf, -math.inf):
                self.nonfinite.setdefault(name, set()).add(step)
            if name not in numbers or rank < numbers[name][0]:
                numbers[name] = (rank, number)
        row = self.rows.get(step)
        if row is None:
            row = self.rows[step] = len(self.rows)
        elif any(self._logged(name, row) for name in numbers):
            self.repeated += 1
        for name, (_, number) in numbers.items():
            self._put(name, row, number)

    def _logged(self, name: str, row: int) -> bool:
        column = self.columns.get(name)
        return column is not None and row < len(column) and not math.isnan(column[row])

    def _put(self, name: str, row: int, number: float) -> None:
        column = self.columns.get(name)
        if column is None:
            column = self.columns[name] = array("d")
        if len(column) <= row:
            column.extend(_NAN * (row + 1 - len(column)))
        column[row] = number

    def _not_a_number(self, name: str, step: int, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, (dict, list)):  # a column of them alone is a histogram or a table: one note
            self.not_scalars.add(name)
        seen = self.not_numbers.setdefault(name, [0, step, value])  # among numbers: a problem line, as text's
        seen[0] += 1

    def absorb(self, other: Collector) -> None:
        """`other`'s steps into this one (the files of one run, `other` the later): its values win."""
        self._absorbed.append({e[0] for e in other._names.values() if e is not None} | set().union(*other._absorbed))
        for step, theirs in sorted(other.rows.items()):
            row = self.rows.get(step)
            if row is None:
                row = self.rows[step] = len(self.rows)
            given = {n: c[theirs] for n, c in other.columns.items() if theirs < len(c) and not math.isnan(c[theirs])}
            self.repeated += any(self._logged(n, row) for n in given)
            for name, number in given.items():
                self._put(name, row, number)
        self.unknown.update(other.unknown)
        self.flags.update(other.flags)
        self.not_scalars |= other.not_scalars
        for name, seen in other.not_numbers.items():
            self.not_numbers.setdefault(name, [0, *seen[1:]])[0] += seen[0]
        for name, where in other.nonfinite.items():
            self.nonfinite.setdefault(name, set()).update(where)
        self.repeated += other.repeated
        self.backwards += other.backwards
        self.problems += other.problems

    def run(self, name: str, source: str, found: str) -> Run:
        in_order = all(a < b for a, b in zip(self.rows, islice(self.rows, 1, None)))  # read in step order
        steps = list(self.rows) if in_order else sorted(self.rows)
        order = range(len(steps)) if in_order else [self.rows[s] for s in steps]  # (n,) each step's row
        # every name a key resolved to, in the order first met, kept when some step logged a number for it
        candidates = dict.fromkeys(e[0] for e in self._names.values() if e is not None)
        candidates.update(dict.fromkeys(n for other in self._absorbed for n in other))
        series: dict[str, Sequence[float]] = {}  # array('d') columns
        for n in (c for c in candidates if c in self.columns):
            column = self.columns[n]
            if len(column) < len(order):
                column.extend(_NAN * (len(order) - len(column)))
            series[n] = column if in_order else array("d", (column[r] for r in order))
        # a NaN logged as NaN, unlike the gaps of `series` (recorded as each value was read)
        nonfinite = {n: sorted(where) for n, where in self.nonfinite.items()}
        notes = []
        not_scalars = sorted(n for n in self.not_scalars if n not in series)
        if not_scalars:
            notes.append(f"{self.path}: {len(not_scalars)} key(s) hold histograms, tables or media, not numbers "
                         f"(not read): {', '.join(not_scalars[:5])}")
        metadata = sorted({n for n in self.not_numbers if n not in series and n not in self.not_scalars}
                          | {n for n in self.flags if n not in series})
        if metadata:
            notes.append(f"{self.path}: {len(metadata)} column(s) hold text or true/false, read as metadata, not "
                         f"metrics: {', '.join(metadata[:8])}{', ...' if len(metadata) > 8 else ''}")
        unknown = {k: n for k, n in self.unknown.items() if k not in metadata}
        return Run(name, self.path, source, steps, series, found=found, unknown=unknown,
                   problems=self.problems + self._value_problems(nonfinite, series), notes=notes,
                   nonfinite=nonfinite, read_as=dict(self.read_as))

    def _value_problems(self, nonfinite: dict[str, list[int]], series: dict[str, Sequence[float]]) -> list[str]:
        """One line per kind of bad record, and per metric with bad values (a column of numbers that also holds
        text; a column of text alone is metadata, said in a note)."""
        out = []
        if self.repeated:
            out.append(f"{self.path}: {self.repeated} record(s) repeat a step already logged, with a metric logged "
                       "there before (a resumed run, or two runs in one log): the later value of each metric is kept")
        if self.backwards:
            out.append(f"{self.path}: steps go backwards {self.backwards} time(s); read in step order")
        for metric, (count, step, value) in self.not_numbers.items():
            if metric not in series:
                continue
            shown = repr(value[:40]) if isinstance(value, str) else repr(value)[:40]
            out.append(f"{self.path}: {metric} holds {count} value(s) that are not numbers (the first: {shown} at "
                       f"step {step}); read as not logged")
        for metric, count in self.flags.items():
            if metric in series and metric != SKIPPED_NO_SIGNAL:  # a flag by nature: read as 0/1 without a word
                out.append(f"{self.path}: {metric} holds {count} true/false value(s) where a number belongs; read "
                           "as 1/0")
        for metric, where in nonfinite.items():
            out.append(f"{self.path}: {metric} is NaN or infinite at {len(where)} step(s) (the first: {where[0]}); "
                       "kept as logged")
        return out


def number_of(value: Any) -> float | None:
    """A float for a number, a boolean (0/1) or a numeric string ('NaN', 'inf', '0.5' in a CSV); else None."""
    if isinstance(value, (bool, int, float)):
        return to_float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def step_of(record: dict[str, Any], key: str | None = None) -> int | None:
    """The record's step: `record[key]`, or the first of STEP_KEYS that holds a whole number."""
    for key in (key,) if key is not None else STEP_KEYS:
        value = number_of(record.get(key))
        if value is not None and math.isfinite(value) and value == int(value) and not isinstance(record[key], bool):
            return int(value)
    return None


# ------------------------------------------------------------------------------------------------- records


def jsonl_records(path: Path, problems: list[str]) -> Iterator[dict[str, Any]]:
    """The objects of a JSON-lines file, a line at a time; lines that are not JSON objects cost one problem line
    (a half-written last line, the mark of a run still writing or killed, one of its own)."""
    from .rollouts import CUT, NOT_JSON, json_lines

    bad: list[int] = []
    for number, record in json_lines(path):
        if record is CUT:
            problems.append(f"{path}: line {number} is a half-written last line (no end of line: a run still "
                            "writing, or killed); the lines before it are read")
        elif record is NOT_JSON or not isinstance(record, dict):
            bad.append(number)
        else:
            yield record
    if bad:
        problems.append(f"{path}: {len(bad)} line(s) are not JSON objects (the first: line {bad[0]}); skipped")


DECIMAL_COMMA = re.compile(r"[-+]?[0-9]*,[0-9]+(?:[eE][-+]?[0-9]+)?")  # 0,5 and -1,5e-3: a `;` CSV's numbers


def csv_records(path: Path, delimiter: str = ",") -> Iterator[dict[str, Any]]:
    """A CSV's rows as dicts, empty cells left out; a UTF-8 byte-order mark skipped. In a `;`-separated CSV (a
    European locale's) a decimal comma is read as a point."""
    comma = delimiter == ";"
    with path.open(newline="", encoding="utf-8-sig", errors="replace") as handle:
        for row in csv.DictReader(handle, delimiter=delimiter):
            yield {k: v.replace(",", ".") if comma and DECIMAL_COMMA.fullmatch(v) else v for k, v in row.items()
                   if k is not None and v not in ("", None)}


