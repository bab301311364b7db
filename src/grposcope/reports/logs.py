"""Scalar logs that grposcope did not write, read into a Run: any JSONL or CSV of step metrics (W&B history
exports among them), verl's file logger, and through log_formats.py TensorBoard event folders and W&B offline
runs. (grposcope's metrics.jsonl and TRL's trainer_state.json are read in runs.py.) Every reader resolves its keys
through the catalogue; a key it does not know keeps its spelling and is counted in `run.unknown`.

- Generic JSONL / CSV: one object or row per step, the step in `step`, `global_step`, `train/global_step`,
  `trainer/global_step`, `_step` or `iteration` (the first present of these, in that order).
- verl's file logger (`trainer.logger=[..., 'file']`): `{"step": s, "data": {metric: value}}` lines.

Streaming: a file is read record by record (a line, a CSV row, an event, a W&B record); what is kept is one
number per logged step and metric (`Collector`). A bad record or value costs one problem line per file and kind
of fault, naming the file, never the rest of the file.
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

from ..diagnose.catalogue import resolve
from ..diagnose.live import NOT_METRICS, UNKNOWN_RANK
from ..diagnose.runlog import Run

# the optimizer step, most specific first: W&B's own `_step` counts log calls, which transformers makes several of
# per optimizer step (train and eval), so its `train/global_step` is preferred
STEP_KEYS = ("step", "global_step", "train/global_step", "trainer/global_step", "_step", "iteration")
SKIPPED = NOT_METRICS | {"training/global_step", "training/epoch"}  # verl's counters ride in its data too


class Collector:
    """Step records -> a Run's columns. Keys go through the catalogue; of two spellings of one metric in one
    record the catalogue's preferred (lower rank) wins; a later record of a step overwrites an earlier one key by
    key (a resumed run re-logs the steps after its checkpoint: the later values are the ones that trained on)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[int, dict[str, float]] = {}
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
        if key in SKIPPED or key in STEP_KEYS:
            return None
        found = resolve(key)
        return (found[0], found[1], True) if found is not None else (key, UNKNOWN_RANK, False)

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
                number = float(value)
            else:
                number = number_of(value)
                if number is None:
                    self._not_a_number(name, step, value)
                    continue
                if kind is bool and known:  # a known metric; an unknown key may be a flag
                    self.flags[name] += 1
            if number != number or number in (math.inf, -math.inf):
                self.nonfinite.setdefault(name, set()).add(step)
            if name not in numbers or rank < numbers[name][0]:
                numbers[name] = (rank, number)
        row = self.rows.setdefault(step, {})
        if row and not row.keys().isdisjoint(numbers):
            self.repeated += 1
        for name, (_, number) in numbers.items():
            row[name] = number

    def _not_a_number(self, name: str, step: int, value: Any) -> None:
        if isinstance(value, (dict, list)):
            self.not_scalars.add(name)
        elif value is not None:
            seen = self.not_numbers.setdefault(name, [0, step, value])
            seen[0] += 1

    def absorb(self, other: Collector) -> None:
        """`other`'s steps into this one (the files of one run, `other` the later): its values win."""
        self._absorbed.append({e[0] for e in other._names.values() if e is not None} | set().union(*other._absorbed))
        for step, row in sorted(other.rows.items()):
            mine = self.rows.setdefault(step, {})
            self.repeated += bool(mine.keys() & row.keys())
            mine.update(row)
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
        steps = sorted(self.rows)
        rows = [self.rows[s] for s in steps]
        # every name a key resolved to, in the order first met, kept when some step logged a number for it
        candidates = dict.fromkeys(e[0] for e in self._names.values() if e is not None)
        candidates.update(dict.fromkeys(n for other in self._absorbed for n in other))
        series = {n: [row.get(n, math.nan) for row in rows] for n in candidates}
        series = {n: v for n, v in series.items() if any(n in row for row in rows)}
        # a NaN logged as NaN, unlike the gaps of `series` (recorded as each value was read)
        nonfinite = {n: sorted(where) for n, where in self.nonfinite.items()}
        notes = []
        if self.not_scalars:
            notes.append(f"{self.path}: {len(self.not_scalars)} key(s) hold histograms, tables or media, not numbers "
                         f"(not read): {', '.join(sorted(self.not_scalars)[:5])}")
        return Run(name, self.path, source, steps, series, found=found, unknown=dict(self.unknown),
                   problems=self.problems + self._value_problems(nonfinite), notes=notes, nonfinite=nonfinite)

    def _value_problems(self, nonfinite: dict[str, list[int]]) -> list[str]:
        """One line per kind of bad record, and per metric with bad values."""
        out = []
        if self.repeated:
            out.append(f"{self.path}: {self.repeated} record(s) repeat a step already logged, with a metric logged "
                       "there before (a resumed run, or two runs in one log): the later value of each metric is kept")
        if self.backwards:
            out.append(f"{self.path}: steps go backwards {self.backwards} time(s); read in step order")
        for metric, (count, step, value) in self.not_numbers.items():
            shown = repr(value[:40]) if isinstance(value, str) else repr(value)[:40]
            out.append(f"{self.path}: {metric} holds {count} value(s) that are not numbers (the first: {shown} at "
                       f"step {step}); read as not logged")
        for metric, count in self.flags.items():
            out.append(f"{self.path}: {metric} holds {count} true/false value(s) where a number belongs; read as 1/0")
        for metric, where in nonfinite.items():
            out.append(f"{self.path}: {metric} is NaN or infinite at {len(where)} step(s) (the first: {where[0]}); "
                       "kept as logged")
        return out


def number_of(value: Any) -> float | None:
    """A float for a number, a boolean (0/1) or a numeric string ('NaN', 'inf', '0.5' in a CSV); else None."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def step_of(record: dict[str, Any]) -> int | None:
    """The record's step: the first of STEP_KEYS that holds a whole number."""
    for key in STEP_KEYS:
        value = number_of(record.get(key))
        if value is not None and math.isfinite(value) and value == int(value) and not isinstance(record[key], bool):
            return int(value)
    return None


# ------------------------------------------------------------------------------------------- generic JSONL / CSV


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


def _csv_records(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(newline="", encoding="utf-8", errors="replace") as handle:
        for row in csv.DictReader(handle):
            yield {k: v for k, v in row.items() if k is not None and v not in ("", None)}


def read_table(path: Path, name: str) -> Run:
    """A JSONL or CSV of step metrics (a W&B history export among them)."""
    collect = Collector(path)
    csv_file = path.suffix.lower() == ".csv"
    stepless = 0
    for record in _csv_records(path) if csv_file else jsonl_records(path, collect.problems):
        step = step_of(record)
        if step is None:
            stepless += 1
            continue
        collect.add(step, record)
    if stepless:
        collect.problems.append(f"{path}: {stepless} record(s) without a whole-number step ({', '.join(STEP_KEYS)}); "
                                "skipped")
    if not collect.rows:
        raise ValueError(f"{path} holds no step metrics: each line (or CSV row) needs a step column, one of "
                         f"{', '.join(STEP_KEYS)}")
    kind = "csv" if csv_file else "jsonl"
    return collect.run(name, kind, f"a {kind.upper()} of step metrics ({path.name})")


def is_table(path: Path) -> bool:
    """A .jsonl/.csv file whose first record has a step column (and is not a verl file-logger record)."""
    if not path.is_file() or path.suffix.lower() not in (".jsonl", ".csv"):
        return False
    try:
        with path.open("rb") as handle:
            first = handle.readline()
        if path.suffix.lower() == ".csv":
            return any(k in STEP_KEYS for k in next(csv.reader([first.decode("utf-8", "replace")]), []))
        record = json.loads(first)
        return isinstance(record, dict) and "data" not in record and step_of(record) is not None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, StopIteration):
        return False


# ----------------------------------------------------------------------------------------------- verl file logger


def read_verl_log(path: Path, name: str) -> Run:
    """verl's file logger: `{"step": s, "data": {...}}` lines, verl's names resolved through the catalogue (of
    `critic/score/mean` and `critic/rewards/mean` in one line, the score before the KL penalty is the reward)."""
    from .engine_runs import is_verl_logger_record

    collect = Collector(path)
    other = 0
    for record in jsonl_records(path, collect.problems):
        if is_verl_logger_record(record):
            collect.add(int(record["step"]), record["data"])
        else:
            other += 1
    if other:
        collect.problems.append(f"{path}: {other} line(s) are not verl file-logger records ({{\"step\": s, \"data\": "
                                "{...}}); skipped")
    if not collect.rows:
        raise ValueError(f"{path} has no record yet; report a verl run after its first logged step")
    return collect.run(name, "verl", f"verl's file logger {path.name}")


# ------------------------------------------------------------------------------------------------------ dispatch


def read_log(path: Path, name: str) -> Run | None:
    """The run in `path` if it is one of the formats read here or in log_formats.py, else None."""
    from .log_formats import is_tensorboard, is_wandb, read_tensorboard, read_wandb

    if is_wandb(path):
        return read_wandb(path, name)
    if is_tensorboard(path):
        return read_tensorboard(path, name)
    if is_table(path):
        return read_table(path, name)
    return None


def kind_of(path: Path) -> str | None:
    """"wandb", "tensorboard" or "table" (runs.run_kind's names), or None."""
    from .log_formats import is_tensorboard, is_wandb

    return ("wandb" if is_wandb(path) else "tensorboard" if is_tensorboard(path) else
            "table" if is_table(path) else None)
