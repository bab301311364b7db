"""`Collector`: step records -> a Run's columns, for every reader of step records (tables, console logs, W&B,
TensorBoard, verl's file logger).

Records are kept under their own keys while the file is read (one 8-byte float a step and key); the keys are
resolved at the end, all at once (meaning.resolve_keys: `--map`, the engine the keys name, the catalogue, the
key's words checked against its values), because a key's meaning may need the other keys (the engine they name,
the number of groups a count is out of) and its values (a share, a percentage or a count).

What a record is, as its author wrote it:
- nested objects are joined with `/` (EasyR1's `{"actor": {"pg_loss": ...}}` is `actor/pg_loss`), an object
  under `metrics`, `data` or `stats` without its name (ROLL's `{"step": 3, "metrics": {...}}`);
- a record marked held-out by a field (`split`, `mode`, `phase`, `stage` = eval / val / test, or `eval: true`)
  has its keys read as held-out ones (`eval/<key>`);
- a step that starts again at or below the first step of the run so far is a restart: a new segment. The last
  segment is the run (`Run.earlier` holds the others; `--segments each` diagnoses each). A step that goes back
  to a later point (a resume from a checkpoint) stays one run: the later values of the steps logged twice win.
"""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from . import catalogue as c
from .assemble import series_of
from .collect import SKIPPED, is_step_key, number_of
from .meaning import Resolution, resolve_keys
from .record import Run, to_float

if TYPE_CHECKING:
    from .read_options import ReadOptions

_NAN = array("d", [math.nan])
SPLIT_FIELDS = ("split", "mode", "phase", "stage", "partition", "subset", "dataset_split")
HELD_OUT_VALUES = {"eval", "evaluation", "val", "valid", "validation", "test", "testing", "heldout", "held_out",
                   "dev"}
CONTAINERS = ("metrics", "data", "stats", "scalars", "logs", "log")  # objects whose name is no part of a key
DEPTH = 4  # nesting flattened; deeper objects are tables, not metrics


@dataclass
class Segment:
    """One run of a log: its steps' rows and, per key, a column of raw values."""

    first: int
    rows: dict[int, int] = field(default_factory=dict)  # step -> row, in the order first read
    columns: dict[str, array] = field(default_factory=dict)  # key -> (rows,) raw values, NaN where not logged
    nonfinite: dict[str, set[int]] = field(default_factory=dict)
    repeated: int = 0
    backwards: int = 0


class Collector:
    """Step records -> a Run's columns (see the module's docstring)."""

    def __init__(self, path: Path, mapping: Mapping[str, str] | None = None, step_key: str | None = None,
                 held_out: bool = False, engine: str | None = None) -> None:
        self.path = path
        self.held_out = held_out  # an evaluation's file: `accuracy` is the held-out accuracy (read as eval_accuracy)
        self.mapping = dict(mapping or {})  # --map KEY=METRIC: the user's reading of a key, before every other
        self.step_key = step_key  # the record's step column, not a metric
        self.engine = engine  # --engine: the engine whose keys the log holds, when its keys do not say
        self.segments: list[Segment] = []
        self.keys: dict[str, None] = {}  # every metric key, in the order first met
        self.not_numbers: dict[str, list[Any]] = {}  # key -> [count, first step, first value]
        self.flags: Counter = Counter()  # key -> values logged as true/false
        self.not_scalars: set[str] = set()  # histograms, tables, media
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.config: dict[str, Any] = {}
        self.split_rows = 0  # records marked held-out by a field
        # keys that held lists of numbers (per-sample values), read as mean and std: -> the cells they filled
        self.lists: dict[str, list[tuple[Segment, int, int, list[Any]]]] = {}
        self.scalars: set[str] = set()  # of those, keys that also held plain numbers
        self.last: int | None = None
        self._skip: dict[str, bool] = {}

    @classmethod
    def reading(cls, path: Path, options: "ReadOptions | None", step_key: str | None = None,
                held_out: bool = False) -> Collector:
        """A collector for a reader given the user's ReadOptions: their --map and --engine, one place for all."""
        if options is None:
            return cls(path, None, step_key, held_out)
        return cls(path, dict(options.mapping), step_key, held_out, options.engine)

    @property
    def rows(self) -> dict[int, int]:
        """The current (last) segment's steps -> rows."""
        return self.segments[-1].rows if self.segments else {}

    def _skipped(self, key: str) -> bool:
        found = self._skip.get(key)
        if found is None:
            found = self._skip[key] = key not in self.mapping and (
                key in SKIPPED or key == self.step_key or is_step_key(key))
        return found

    def add(self, step: int, record: dict[str, Any]) -> None:
        # a held-out row (marked by a field, or holding held-out keys and no training figure) is placed at its
        # step without counting as a step that went back (evaluations are logged after the steps they follow),
        # and every key of it is a held-out figure (its counters are the evaluation's, not the step's)
        held = _held_out_row(record) or _held_out_keys(record)
        segment = self.segments[-1] if self.segments and held else self._segment(step)
        if held:
            self.split_rows += 1
        row = segment.rows.get(step)
        new = row is None
        if row is None:
            row = segment.rows[step] = len(segment.rows)
        logged_before = False
        for key, value in flat(record):
            if held and not key.startswith(("eval", "val", "test")) and key not in SPLIT_FIELDS:
                key = f"eval/{key}"
            if self._skipped(key):
                continue
            kind = type(value)
            if kind is float or kind is int:  # the common case, without number_of's checks
                number = to_float(value)
                if key in self.lists:
                    self.scalars.add(key)
            elif kind is list and (spread := _list_figures(value)) is not None:  # per-sample values: mean, std
                number = spread[0]
                if key in self.keys and key not in self.lists:  # numbers before it: a stray list
                    self.scalars.add(key)
                self.lists.setdefault(key, []).append((segment, row, step, value))
                self._put(segment, row, f"{key}/std", spread[1], step)
            else:
                parsed = number_of(value)
                if parsed is None:
                    self._not_a_number(key, step, value)
                    continue
                number = parsed
                if kind is bool:  # a flag: kept as 0/1; metadata unless its key is read as a metric (`skipped`)
                    self.flags[key] += 1
            logged_before |= self._put(segment, row, key, number, step) and not new
        segment.repeated += logged_before and not held  # an evaluation's row re-logs the clocks, not a step

    def _put(self, segment: Segment, row: int, key: str, number: float, step: int) -> bool:
        """`number` into `key`'s column at `row`; whether that row held a value already."""
        self.keys.setdefault(key)
        if number != number or number in (math.inf, -math.inf):
            segment.nonfinite.setdefault(key, set()).add(step)
        column = segment.columns.get(key)
        if column is None:
            column = segment.columns[key] = array("d")
        before = False
        if len(column) <= row:
            column.extend(_NAN * (row + 1 - len(column)))
        else:
            before = not math.isnan(column[row])
        column[row] = number
        return before

    def _segment(self, step: int) -> Segment:
        """The segment `step` belongs to: a new one when the steps start again (a restart)."""
        if not self.segments or (self.last is not None and step < self.last and step <= self.segments[-1].first):
            self.segments.append(Segment(step))
        elif self.last is not None and step < self.last:
            self.segments[-1].backwards += 1
        self.last = step
        return self.segments[-1]

    def _not_a_number(self, key: str, step: int, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, (dict, list)):  # a column of them alone is a histogram or a table: one note
            self.not_scalars.add(key)
        seen = self.not_numbers.setdefault(key, [0, step, value])  # among numbers: a problem line, as text's
        seen[0] += 1

    def absorb(self, other: Collector) -> None:
        """`other`'s steps into this one (the files of one run, `other` the later): its values win."""
        if not other.segments:
            return
        if not self.segments:
            self.segments.append(Segment(min(other.rows)))
        mine = self.segments[-1]
        for theirs in other.segments:
            for step, at in sorted(theirs.rows.items()):
                row = mine.rows.get(step)
                if row is None:
                    row = mine.rows[step] = len(mine.rows)
                mine.first = min(mine.first, step)
                for key, column in theirs.columns.items():
                    if at < len(column) and not math.isnan(column[at]):
                        target = mine.columns.setdefault(key, array("d"))
                        if len(target) <= row:
                            target.extend(_NAN * (row + 1 - len(target)))
                        elif not math.isnan(target[row]):
                            mine.repeated += 1
                        target[row] = column[at]
            for key, where in theirs.nonfinite.items():
                mine.nonfinite.setdefault(key, set()).update(where)
            mine.repeated += theirs.repeated
            mine.backwards += theirs.backwards
        for key in other.keys:
            self.keys.setdefault(key)
        self.flags.update(other.flags)
        self.not_scalars |= other.not_scalars
        for key, seen in other.not_numbers.items():
            self.not_numbers.setdefault(key, [0, *seen[1:]])[0] += seen[0]
        self.problems += other.problems
        self.notes += other.notes

    # ------------------------------------------------------------------------------------------- the run

    def run(self, name: str, source: str, found: str) -> Run:
        """The last segment as the run (the others in `Run.earlier`), every key resolved."""
        if not self.segments:
            self.segments.append(Segment(0))
        self._stray_lists()
        keys = [k for k in self.keys if k not in self.not_scalars or any(k in s.columns for s in self.segments)]
        values = _Values(self.segments)  # read when a key's meaning needs its values, not for every key
        resolution = resolve_keys(keys, values, self.mapping, self.held_out, self.engine)
        _held_out_by_cadence(resolution, self.segments)
        runs = [self._segment_run(s, resolution, name if i == len(self.segments) - 1 else f"{name}#{i + 1}",
                                  source, found) for i, s in enumerate(self.segments)]
        run = runs[-1]
        run.earlier = runs[:-1]
        if run.earlier:
            spans = ", ".join(f"{r.steps[0]}-{r.steps[-1]}" if r.steps else "none" for r in runs)
            run.notes.append(f"{self.path}: the steps start again {len(runs) - 1} time(s) (a restart, or runs "
                             f"appended to one file): {len(runs)} runs, steps {spans}; the last is diagnosed, and each "
                             "earlier one of 20 or more logged steps that a fresh start at step 0 or 1 follows "
                             "(--segments last: the last alone; each: every one)")
        return run

    def _stray_lists(self) -> None:
        """A list among a column of plain numbers is no step's samples: a value that is not a number (a problem
        line, as text there is), not its mean."""
        for key in self.scalars:
            for segment, row, step, value in self.lists.pop(key):
                segment.columns[key][row] = math.nan
                segment.columns[f"{key}/std"][row] = math.nan
                seen = self.not_numbers.setdefault(key, [0, step, value])
                seen[0] += 1

    def _segment_run(self, segment: Segment, resolution: Resolution, name: str, source: str, found: str) -> Run:
        in_order = all(a < b for a, b in zip(segment.rows, islice(segment.rows, 1, None)))
        steps = list(segment.rows) if in_order else sorted(segment.rows)
        order = None if in_order else [segment.rows[s] for s in steps]
        series, notes, kept = series_of(segment, resolution, order, self.config, set(self.lists))
        nonfinite: dict[str, list[int]] = {}
        for key, where in segment.nonfinite.items():
            target = kept.get(key, key)
            nonfinite.setdefault(target, [])
            nonfinite[target] = sorted(set(nonfinite[target]) | where)
        unknown = Counter({k: int(sum(1 for v in segment.columns[k] if not math.isnan(v)))
                           for k in segment.columns if not resolution.readings[k].known})
        run = Run(name, self.path, source, steps, series, found=found, notes=[], nonfinite=nonfinite)
        metadata = sorted({k for k in self.not_numbers if k not in segment.columns and k not in self.not_scalars}
                          | {k for k in self.flags if k in segment.columns and not resolution.readings[k].known})
        for key in metadata:
            series.pop(key, None)
            unknown.pop(key, None)
        not_scalars = sorted(k for k in self.not_scalars if k not in segment.columns)
        if not_scalars:
            run.notes.append(f"{self.path}: {len(not_scalars)} key(s) hold histograms, tables or media, not numbers "
                             f"(not read): {', '.join(not_scalars[:5])}")
        if metadata:
            run.notes.append(f"{self.path}: {len(metadata)} column(s) hold text or true/false, read as metadata, not "
                             f"metrics: {', '.join(metadata[:8])}{', ...' if len(metadata) > 8 else ''}")
        if set(self.lists) & set(segment.columns):
            listed = sorted(set(self.lists) & set(segment.columns))
            run.notes.append(f"{self.path}: {len(listed)} key(s) hold a list of numbers a step (per-sample values): "
                             f"read as their mean, and their spread as <key>/std: {', '.join(listed[:5])}")
        if self.split_rows:
            run.notes.append(f"{self.path}: {self.split_rows} record(s) are held-out rows (a field says eval, val "
                             "or test): their keys are read as held-out figures (eval/<key>)")
        if resolution.engine is not None:
            run.engine = resolution.engine.engine.name
            run.found = f"{found}; {resolution.engine.said()}"
        run.notes += self.notes + notes
        run.unknown = dict(unknown)
        said = {k: why for k, why in resolution.said.items() if kept.get(k) == resolution.readings[k].metric}
        run.read_as = {k: resolution.readings[k].metric for k in said}
        run.read_as.update({k: m for k, m in self.mapping.items() if k in segment.columns})
        run.reasons = said
        run.config = dict(self.config)
        # the reward logged as a list of each step's completions: how many a step held (a fact of the log that an
        # estimate assuming a group size must not contradict: signals.group_size)
        for key, rows in self.lists.items():
            sizes = {len(value) for seg, _, _, value in rows if seg is segment}
            if resolution.readings[key].metric == c.REWARD and len(sizes) == 1:
                run.config.setdefault("completions_per_step", sizes.pop())
        run.keys = {k: kept.get(k, resolution.readings[k].metric) for k in segment.columns if k not in metadata}
        run.meanings = {k: resolution.readings[k].metric for k in run.keys if resolution.readings[k].known}
        run.problems = self.problems + _value_problems(self, segment, series, nonfinite, resolution)
        return run


LIST_LIMIT = 1 << 16  # values in one list read as a step's samples


def _list_figures(values: list[Any]) -> tuple[float, float] | None:
    """(mean, population std) of a list of numbers (a step's per-sample rewards); None for anything else."""
    if not values or len(values) > LIST_LIMIT:
        return None
    if not all((type(v) is float or type(v) is int) for v in values):
        return None
    numbers = [to_float(v) for v in values]
    mean = math.fsum(numbers) / len(numbers)
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in numbers) / len(numbers))


def _held_out_by_cadence(resolution: Resolution, segments: list[Segment]) -> None:
    """A plain success share (`accuracy`) read by its words as the training reward is the held-out score when it
    is logged at exactly the steps the log's held-out keys are (`heldout_false_refuse_rate` beside it, a step-0
    evaluation before any reward): an evaluation's figure without its prefix."""
    from .meaning import HELD_OUT_WORDS, SUCCESS_SHARE, Reading, words

    def logged(key: str) -> frozenset[tuple[int, int]]:
        return frozenset((i, step) for i, s in enumerate(segments) if key in s.columns
                         for step, row in s.rows.items()
                         if row < len(s.columns[key]) and not math.isnan(s.columns[key][row]))

    held = [k for k in resolution.readings if (ws := words(k)) and ws[0] in HELD_OUT_WORDS - {"valid"}]
    if not held:
        return
    cadences = {logged(k): k for k in reversed(held)}  # a cadence -> the first held-out key logged at it
    for key, reading in list(resolution.readings.items()):
        if reading.why == SUCCESS_SHARE:
            twin = cadences.get(logged(key))
            if twin is None:
                continue
            resolution.readings[key] = Reading(c.EVAL, reading.rank, why=f"a success share logged at the steps of "
                                               f"the held-out {twin}, an evaluation's figure")
            resolution.said[key] = resolution.readings[key].why


class _Values(Mapping[str, Sequence[float]]):
    """A key's logged values over every segment, read when asked."""

    def __init__(self, segments: list[Segment]) -> None:
        self.segments = segments

    def __getitem__(self, key: str) -> Sequence[float]:
        if not any(key in s.columns for s in self.segments):
            raise KeyError(key)
        return _all_values(self.segments, key)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(k for s in self.segments for k in s.columns))

    def __len__(self) -> int:
        return len(set().union(*(s.columns for s in self.segments)))


def _all_values(segments: list[Segment], key: str) -> list[float]:
    out: list[float] = []
    for segment in segments:
        column = segment.columns.get(key)
        if column is not None:
            out += [v for v in column if not math.isnan(v)]
    return out


def _held_out_row(record: dict[str, Any]) -> bool:
    for name in SPLIT_FIELDS:
        value = record.get(name)
        if isinstance(value, str) and value.strip().lower() in HELD_OUT_VALUES:
            return True
    return record.get("eval") is True or record.get("is_eval") is True or record.get("validation") is True


TRAINING_WORDS = {"reward", "rewards", "loss", "kl", "entropy", "grad", "score", "acc", "accuracy", "advantages"}


def _held_out_keys(record: dict[str, Any]) -> bool:
    """Whether the record is an evaluation's by its keys: some are held-out ones and none is a training figure
    (a W&B export's eval row, `eval/...`; ms-swift's, `eval_...` beside the clocks it re-logs; ART's, `val/...`
    beside its counters)."""
    held = training = 0
    for key in record:
        if not isinstance(key, str) or is_step_key(key) or key in SKIPPED:
            continue
        lower = key.lower()
        if lower.startswith(("eval", "val", "test")):
            held += 1
        elif lower.startswith("train") or TRAINING_WORDS & set(re.split(r"[^a-z]+", lower)):
            training += 1
    return held > 0 and training == 0


def flat(record: dict[str, Any], prefix: str = "", depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(key, value) of a record, nested objects joined with `/` (see the module's docstring)."""
    for key, value in record.items():
        if not isinstance(key, str):
            continue
        if isinstance(value, dict) and depth < DEPTH and value and "_type" not in value:
            inner = prefix if key.lower() in CONTAINERS and not prefix else f"{prefix}{key}/"
            yield from flat(value, inner, depth + 1)
        else:
            yield prefix + key, value


def _value_problems(collect: Collector, segment: Segment, series: Mapping[str, Sequence[float]],
                    nonfinite: dict[str, list[int]], resolution: Resolution) -> list[str]:
    """One line per kind of bad record, and per key with bad values (a column of numbers that also holds text;
    a column of text alone is metadata, said in a note)."""
    out, path = [], collect.path
    if segment.repeated:
        out.append(f"{path}: {segment.repeated} record(s) repeat a step already logged, with a metric logged there "
                   "before (a resume from a checkpoint, or several rows a step): the later value of each metric is "
                   "kept")
    if segment.backwards:
        out.append(f"{path}: steps go backwards {segment.backwards} time(s) (a resume from a checkpoint); read in "
                   "step order")
    for key, (count, step, value) in collect.not_numbers.items():
        if key not in segment.columns:
            continue
        shown = repr(value[:40]) if isinstance(value, str) else repr(value)[:40]
        out.append(f"{path}: {resolution.readings[key].metric} holds {count} value(s) that are not numbers (the "
                   f"first: {shown} at step {step}); read as not logged")
    for key, count in collect.flags.items():
        metric = resolution.readings[key].metric if key in resolution.readings else key
        if key in segment.columns and metric in series and resolution.readings[key].known and \
                metric != c.SKIPPED_NO_SIGNAL:
            out.append(f"{path}: {metric} holds {count} true/false value(s) where a number belongs; read as 1/0")
    for metric, where in nonfinite.items():
        if where:
            out.append(f"{path}: {metric} is NaN or infinite at {len(where)} step(s) (the first: {where[0]}); kept "
                       "as logged")
    return out
