"""Scalar logs that grposcope did not write, read into a Run: TensorBoard event folders, W&B offline runs and
history exports, and any JSONL or CSV of step metrics. (grposcope's metrics.jsonl, TRL's trainer_state.json and
verl's file logger are read in runs.py and engine_runs.py; every reader resolves its keys through the catalogue.)

- TensorBoard: tensorboard's own reader (`EventFileLoader`), every event file of a folder; tags as transformers'
  TensorBoardCallback writes them (`train/<key>`, `eval/<key>`), scalars as `simple_value` or as a scalar tensor.
- W&B: wandb 0.31 ships no Python reader of the `.wandb` transaction log (its reader moved into the Go
  `wandb-core` binary, which offers none either); its records are wandb's own protobuf (`wandb.proto.
  wandb_internal_pb2.Record`) framed as a LevelDB log (7-byte header: ':W&B', a 2-byte magic, a version byte;
  then 32 KiB blocks of records with a CRC, a length and a type). `read_wandb` reads that framing and parses each
  record with wandb's protobuf: history rows, the config, nothing sent anywhere. A file of another layout is
  named in one problem line. A history export (`run.history()` or the UI's CSV: `_step`, `train/reward`, ...)
  is a generic JSONL or CSV.
- Generic JSONL / CSV: one object or row per step, the step in `step`, `_step`, `global_step`,
  `train/global_step` or `iteration`.

Streaming: files are read record by record (a line, an event, a W&B record); what is kept is one number per
logged step and metric. A bad record costs one problem line naming the file, never the rest of the file.
"""

from __future__ import annotations

import csv
import json
import math
import struct
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterator

from ..diagnose.catalogue import resolve
from ..diagnose.runlog import Run

# the optimizer step, most specific first: W&B's own `_step` counts log calls, which transformers makes several of
# per optimizer step (train and eval), so its `train/global_step` is preferred
STEP_KEYS = ("step", "global_step", "train/global_step", "trainer/global_step", "_step", "iteration")
TB_GLOB = "events.out.tfevents.*"
WANDB_GLOB = "*.wandb"


class Collector:
    """Step records -> a Run's columns. Keys go through the catalogue; of two spellings of one metric in a
    record the catalogue's preferred one wins; a later record of a step overwrites an earlier one key by key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[int, dict[str, tuple[int, float]]] = {}
        self.unknown: Counter = Counter()
        self.nonfinite: dict[str, set[int]] = defaultdict(set)
        self.not_numbers: dict[str, list[tuple[int, Any]]] = defaultdict(list)
        self.repeated = self.backwards = 0
        self.last: int | None = None
        self.problems: list[str] = []

    def add(self, step: int, record: dict[str, Any]) -> None:
        if step in self.rows:
            self.repeated += 1
        if self.last is not None and step < self.last:
            self.backwards += 1
        self.last = step
        row = self.rows.setdefault(step, {})
        for key, value in record.items():
            if key in STEP_KEYS or key in ("time", "_timestamp", "_runtime", "epoch", "train/epoch"):
                continue
            found = resolve(key)
            name, rank = found if found is not None else (key, 99)
            if found is None:
                self.unknown[key] += 1
            number = number_of(value)
            if number is None:
                if value is not None and not isinstance(value, (dict, list)):
                    self.not_numbers[name].append((step, value))
                continue
            if not math.isfinite(number):
                self.nonfinite[name].add(step)
            if name not in row or rank <= row[name][0]:
                row[name] = (rank, number)

    def run(self, name: str, source: str, found: str) -> Run:
        steps = sorted(self.rows)
        names = list(dict.fromkeys(n for s in steps for n in self.rows[s]))
        series = {n: [self.rows[s][n][1] if n in self.rows[s] else math.nan for s in steps] for n in names}
        problems = list(self.problems)
        if self.repeated:
            problems.append(f"{self.path}: {self.repeated} record(s) repeat a step already logged (a resumed run, "
                            "or two runs in one log): the later value of each metric is kept")
        if self.backwards:
            problems.append(f"{self.path}: steps go backwards {self.backwards} time(s); read in step order")
        for metric, bad in self.not_numbers.items():
            step, value = bad[0]
            shown = json.dumps(value)[:40] if not isinstance(value, str) else repr(value[:40])
            problems.append(f"{self.path}: {metric} holds {len(bad)} value(s) that are not numbers (the first: "
                            f"{shown} at step {step}); read as not logged")
        for metric, where in self.nonfinite.items():
            problems.append(f"{self.path}: {metric} is NaN or infinite at {len(where)} step(s) (the first: "
                            f"{min(where)})")
        return Run(name, self.path, source, steps, series, found=found, unknown=dict(self.unknown),
                   problems=problems, nonfinite={k: sorted(v) for k, v in self.nonfinite.items()})


def number_of(value: Any) -> float | None:
    """A float for a number, a boolean (0/1) or a numeric string ('NaN', 'inf', '0.5' in a CSV); else None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


# ------------------------------------------------------------------------------------------- generic JSONL / CSV


def step_of(record: dict[str, Any]) -> int | None:
    for key in STEP_KEYS:
        value = number_of(record.get(key))
        if value is not None and math.isfinite(value) and value == int(value):
            return int(value)
    return None


def _jsonl_records(path: Path, problems: list[str]) -> Iterator[dict[str, Any]]:
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                last = not handle.peek(1) if hasattr(handle, "peek") else False
                problems.append(f"{path}: line {number} is not JSON" + (" (a half-written last line: a run still "
                                                                        "going, or killed)" if last else "; skipped"))
                continue
            if isinstance(record, dict):
                yield record
            else:
                problems.append(f"{path}: line {number} is not an object of metrics; skipped")


def _csv_records(path: Path, problems: list[str]) -> Iterator[dict[str, Any]]:
    with path.open(newline="", encoding="utf-8", errors="replace") as handle:
        for row in csv.DictReader(handle):
            yield {k: v for k, v in row.items() if k is not None and v not in ("", None)}


def read_table(path: Path, name: str) -> Run:
    """A JSONL or CSV of step metrics (a W&B history export among them)."""
    collect = Collector(path)
    records = _csv_records(path, collect.problems) if path.suffix.lower() == ".csv" else \
        _jsonl_records(path, collect.problems)
    stepless = 0
    for record in records:
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
    kind = "csv" if path.suffix.lower() == ".csv" else "jsonl"
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


# ------------------------------------------------------------------------------------------------- TensorBoard


def event_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if path.name.startswith("events.out.tfevents.") else []
    return sorted(p for p in path.rglob(TB_GLOB) if p.is_file())


def _tb_scalars(path: Path, problems: list[str]) -> Iterator[tuple[int, str, float]]:
    """(step, tag, value) of every scalar in one event file; a cut or corrupt record ends the file with a problem
    line, the records before it kept."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    try:
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    yield int(event.step), value.tag, float(value.simple_value)
                elif value.HasField("tensor"):
                    array = tensor_util.make_ndarray(value.tensor)
                    if array.size == 1 and array.dtype.kind in "fiub":
                        yield int(event.step), value.tag, float(array.reshape(-1)[0])
    except Exception as err:  # DataLossError and its kin: a damaged record
        problems.append(f"{path}: damaged after the records read ({type(err).__name__}: {err}); "
                        "the records before it are kept")
        return
    cut = _tb_cut_bytes(path)  # tensorboard's reader stops quietly at a cut record (it waits for a live writer)
    if cut:
        problems.append(f"{path}: the last record is cut short ({cut} bytes of it written: a run still writing, "
                        "or killed); the records before it are kept")


def _tb_cut_bytes(path: Path) -> int:
    """Bytes of a record cut short at the file's end, from the TFRecord framing (an 8-byte length, a 4-byte CRC
    of it, the data, a 4-byte CRC of the data); 0 when the file ends on a record's end. Seeks, reads no data."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        offset = 0
        while offset < size:
            head = handle.read(12)
            if len(head) < 12:
                return size - offset
            (length,) = struct.unpack("<Q", head[:8])
            end = offset + 12 + length + 4
            if end > size:
                return size - offset
            handle.seek(end)
            offset = end
    return 0


def read_tensorboard(path: Path, name: str) -> Run:
    """The event files of one run. Several run folders under `path` (transformers writes runs/<date_host>/):
    the newest is read and the others named; two event files of one folder whose steps overlap are two runs in
    one folder: the newest is read."""
    files = event_files(path)
    if not files:
        raise FileNotFoundError(f"{path} holds no TensorBoard event file ({TB_GLOB})")
    folders = sorted({f.parent for f in files}, key=lambda d: max(f.stat().st_mtime for f in files if f.parent == d))
    notes = []
    if len(folders) > 1:
        notes.append(f"{path}: {len(folders)} folders of TensorBoard events ({', '.join(str(f) for f in folders[:-1])} "
                     f"and {folders[-1]}): the newest, {folders[-1]}, is read; give another folder to read it")
    chosen = sorted((f for f in files if f.parent == folders[-1]), key=lambda f: f.stat().st_mtime)
    collect = Collector(folders[-1])
    spans: list[tuple[Path, int, int]] = []
    per_file: list[tuple[Path, list[tuple[int, str, float]]]] = []
    for file in chosen:
        scalars = list(_tb_scalars(file, collect.problems))
        if scalars:
            steps = [s for s, _, _ in scalars]
            spans.append((file, min(steps), max(steps)))
            per_file.append((file, scalars))
    keep = per_file
    if len(spans) > 1 and any(a[2] >= b[1] and b[2] >= a[1] for i, a in enumerate(spans) for b in spans[i + 1:]):
        notes.append(f"{folders[-1]}: {len(spans)} event files whose steps overlap: two runs' events in one folder; "
                     f"the newest, {per_file[-1][0].name}, is read")
        keep = per_file[-1:]
    for _, scalars in keep:
        by_step: dict[int, dict[str, float]] = defaultdict(dict)
        for step, tag, value in scalars:
            by_step[step][tag] = value
        for step in by_step:
            collect.add(step, by_step[step])
    if not collect.rows:
        raise ValueError(f"{path}: the TensorBoard events hold no scalar")
    collect.problems[:0] = notes
    return collect.run(name, "tensorboard", f"TensorBoard events ({len(keep)} file(s) in {folders[-1]})")


def is_tensorboard(path: Path) -> bool:
    return bool(event_files(path)) if path.exists() else False


# ----------------------------------------------------------------------------------------------------------- W&B

BLOCK = 32 * 1024
HEADER = b":W&B"
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def wandb_file(path: Path) -> Path | None:
    if path.is_file():
        return path if path.suffix == ".wandb" else None
    found = sorted(path.glob(WANDB_GLOB)) or sorted(path.glob(f"*/{WANDB_GLOB}")) or \
        sorted(path.glob(f"wandb/*/{WANDB_GLOB}"))
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def wandb_payloads(path: Path, problems: list[str]) -> Iterator[bytes]:
    """The records of a .wandb file, streamed a block at a time."""
    with path.open("rb") as handle:
        head = handle.read(7)
        if len(head) < 7 or head[:4] != HEADER:
            problems.append(f"{path} does not start with wandb's ':W&B' header: not a .wandb file, or one written "
                            "by a wandb release of another layout; nothing read from it")
            return
        if head[6] != 0:
            problems.append(f"{path}: .wandb layout version {head[6]} (read here: 0); read as version 0")
        offset, pending = 7, b""
        block = head + handle.read(BLOCK - 7)
        while block:
            while offset + 7 <= len(block):
                _, length, kind = struct.unpack("<IHB", block[offset:offset + 7])
                if kind == 0 and length == 0:  # padding to the block's end
                    break
                payload = block[offset + 7:offset + 7 + length]
                offset += 7 + length
                if kind == FULL:
                    yield payload
                elif kind == FIRST:
                    pending = payload
                elif kind == MIDDLE:
                    pending += payload
                elif kind == LAST:
                    yield pending + payload
                    pending = b""
                else:
                    problems.append(f"{path}: a record of unknown type {kind}; the rest of the file is skipped")
                    return
            block, offset = handle.read(BLOCK), 0


def read_wandb(path: Path, name: str) -> Run:
    """A W&B offline run (the folder or its .wandb file): history rows and the run's config."""
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2 as pb

    file = wandb_file(path)
    if file is None:
        raise FileNotFoundError(f"{path} holds no .wandb file of a W&B offline run")
    collect = Collector(file)
    config: dict[str, Any] = {}
    for payload in wandb_payloads(file, collect.problems):
        record = pb.Record()
        try:
            record.ParseFromString(payload)
        except DecodeError:
            collect.problems.append(f"{file}: a record wandb's protobuf cannot parse (another wandb release?); "
                                    "skipped")
            continue
        kind = record.WhichOneof("record_type")
        if kind == "history":
            row = {(i.key or "/".join(i.nested_key)): _json(i.value_json) for i in record.history.item}
            step = step_of(row)
            if step is None and record.history.HasField("step"):
                step = int(record.history.step.num)
            if step is not None:
                collect.add(step, row)
        elif kind in ("config", "run"):
            items = record.config.update if kind == "config" else record.run.config.update
            config.update({(i.key or "/".join(i.nested_key)): _json(i.value_json) for i in items})
    if not collect.rows:
        raise ValueError(f"{file} holds no history row (" + "; ".join(collect.problems[:2]) + ")")
    run = collect.run(name, "wandb", f"a W&B offline run ({file.name})")
    run.config = _settings(config)
    return run


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _settings(config: dict[str, Any]) -> dict[str, Any]:
    """What the detectors use from a run's config: G, the length cap, the planned steps."""
    def value(key: str) -> Any:
        v = config.get(key)
        return v.get("value") if isinstance(v, dict) and "value" in v else v

    out = {}
    for key in ("num_generations", "max_completion_length", "max_steps"):
        v = value(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            out[key] = int(v)
    return out


def is_wandb(path: Path) -> bool:
    return path.exists() and wandb_file(path) is not None


def read_log(path: Path, name: str) -> Run | None:
    """The run in `path` if it is one of this module's formats, else None."""
    if is_wandb(path):
        return read_wandb(path, name)
    if is_tensorboard(path):
        return read_tensorboard(path, name)
    if is_table(path):
        return read_table(path, name)
    return None


def kind_of(path: Path) -> str | None:
    return ("wandb" if is_wandb(path) else "tensorboard" if is_tensorboard(path) else
            "table" if is_table(path) else None)
