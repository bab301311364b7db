"""The binary logs of runs grposcope did not write: TensorBoard event folders and W&B offline runs, read into a
Run through logs.Collector (keys through the catalogue, bad records one problem line each).

- TensorBoard: tensorboard's own reader (`EventFileLoader`), each event file streamed event by event; tags as
  transformers' TensorBoardCallback writes them (`train/<key>`, `eval/<key>`), a scalar as `simple_value` or as a
  one-element tensor, the run's arguments from its `args` text summary. tensorboard's reader stops without a word
  at a record cut short or failing its checksum (it waits for a live writer to finish it), so the file's framing
  is walked after it to name such a file.
- W&B: wandb 0.31 ships no Python reader of the `.wandb` transaction log (`wandb.sdk.internal.datastore` is gone:
  the reader moved into the Go `wandb-core` binary, which offers none either), so its framing is read here and
  each record parsed with wandb's own protobuf (`wandb.proto.wandb_internal_pb2.Record`): history rows and the
  config, nothing sent anywhere. The framing is LevelDB's log: a 7-byte header (':W&B', a 2-byte magic, a version
  byte), then 32 KiB blocks of records, each with a 4-byte CRC, a 2-byte length and a 1-byte type. A file of
  another layout is named in one problem line. A history export (`run.history()` or the UI's CSV: `_step`,
  `train/reward`, ...) is a generic JSONL or CSV (logs.py).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Iterator

from ..diagnose.runlog import Run
from .logs import Collector, step_of

TB_GLOB = "events.out.tfevents.*"
TB_ARGS = "args/text_summary"  # transformers' TensorBoardCallback: add_text("args", args.to_json_string())
SETTINGS = ("num_generations", "max_completion_length", "max_steps", "logging_steps")

# ------------------------------------------------------------------------------------------------- TensorBoard


def event_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if path.name.startswith("events.out.tfevents.") else []
    return sorted(p for p in path.rglob(TB_GLOB) if p.is_file())


def is_tensorboard(path: Path) -> bool:
    return bool(event_files(path)) if path.exists() else False


def _scalar(value: Any) -> float | None:
    """A summary value's number: `simple_value` (add_scalar) or a one-element numeric tensor (summary v2)."""
    if value.HasField("simple_value"):
        return float(value.simple_value)
    if value.HasField("tensor") and value.tensor.dtype != 7:  # 7: DT_STRING (text summaries)
        from tensorboard.util import tensor_util

        array = tensor_util.make_ndarray(value.tensor)
        if array.size == 1 and array.dtype.kind in "fiub":
            return float(array.reshape(-1)[0])
    return None


def _args(value: Any) -> dict[str, Any]:
    """The run's arguments from transformers' `args` text summary (JSON), or {} when they do not parse."""
    try:
        text = value.tensor.string_val[0].decode("utf-8")
        args = json.loads(text)
    except (IndexError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return args if isinstance(args, dict) else {}


def read_event_file(path: Path) -> tuple[Collector, dict[str, Any]]:
    """One event file's scalars and the run's arguments, streamed; a damaged record ends the file with a problem
    line, the records before it kept."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    collect, args = Collector(path), {}
    count = 0
    try:
        for event in EventFileLoader(str(path)).Load():
            count += 1
            scalars = {}
            for value in event.summary.value:
                number = _scalar(value)
                if number is not None:
                    scalars[value.tag] = number
                elif value.tag == TB_ARGS:
                    args = _args(value)
            if scalars:
                collect.add(int(event.step), scalars)
    except Exception as err:  # a record that parses as no Event: read up to it
        collect.problems.append(f"{path}: record {count + 1} cannot be read ({type(err).__name__}: {err}); the "
                                f"{count} record(s) before it are read")
        return collect, args
    damage = tb_damage(path, count)
    if damage:
        collect.problems.append(damage)
    return collect, args


def tb_damage(path: Path, read: int) -> str | None:
    """Why tensorboard's reader stopped after `read` records of `path`, when the file holds more: a record cut
    short at the end, or one failing its checksum. Walks the TFRecord framing (an 8-byte length, its masked
    CRC-32C, the data, the data's CRC); seeks over the data, reads only the headers. None for a whole file."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    size, offset, records = path.stat().st_size, 0, 0
    with path.open("rb") as handle:
        while offset < size:
            head = handle.read(12)
            length = struct.unpack("<Q", head[:8])[0] if len(head) == 12 else 0
            if len(head) < 12 or (masked_crc32c(head[:8]) == struct.unpack("<I", head[8:])[0]
                                  and offset + 16 + length > size):
                return (f"{path}: the last record is cut short ({size - offset} of its bytes written: a run still "
                        f"writing, or killed); the {records} record(s) before it are read")
            if records >= read:  # a whole record the reader refused: its length or its data fails the checksum
                return (f"{path}: record {records + 1} (at byte {offset}) fails its checksum: a damaged file; the "
                        f"{records} record(s) before it are read, the {size - offset} bytes from it on are not")
            offset += 16 + length
            handle.seek(offset)
            records += 1
    return None


def _run_folders(files: list[Path]) -> list[Path]:
    """The folders holding event files, oldest first (by their newest file)."""
    newest: dict[Path, float] = {}
    for file in files:
        newest[file.parent] = max(newest.get(file.parent, 0.0), file.stat().st_mtime)
    return sorted(newest, key=newest.__getitem__)


def _one_run(folder: Path) -> tuple[Collector, dict[str, Any], list[str]]:
    """The event files of one folder as one run: files whose steps overlap are two runs' events in one folder
    (the newest file is read and the others named); files that follow one another are one run's."""
    parts = [(file, *read_event_file(file))
             for file in sorted(folder.glob(TB_GLOB), key=lambda f: (f.stat().st_mtime, f.name))]
    spans = [(file, min(c.rows), max(c.rows)) for file, c, _ in parts if c.rows]
    overlap = any(a[1] <= b[2] and b[1] <= a[2] for i, a in enumerate(spans) for b in spans[i + 1:])
    if overlap:
        parts = [p for p in parts if p[0] == spans[-1][0]]
        others = ", ".join(f"{f.name} (steps {lo}-{hi})" for f, lo, hi in spans[:-1])
        line = (f"{folder}: {len(spans)} event files whose steps overlap: two runs' events in one folder, not "
                f"merged; the newest, {spans[-1][0].name} (steps {spans[-1][1]}-{spans[-1][2]}), is read, not {others}")
    collect, args = Collector(folder), {}
    for _, part, part_args in parts:
        collect.absorb(part)
        args.update(part_args)
    return collect, args, [line] if overlap else []


def read_tensorboard(path: Path, name: str) -> Run:
    """The event files of one run. Several run folders under `path` (transformers writes runs/<date_host>/, one
    per launch): the newest that holds scalars is read and the others named."""
    files = event_files(path)
    if not files:
        raise FileNotFoundError(f"{path} holds no TensorBoard event file ({TB_GLOB})")
    if path.is_file():
        collect, args = read_event_file(path)
        lines, folder, others = [], path.parent, []
    else:
        folders = _run_folders(files)
        for folder in reversed(folders):  # a folder of text summaries only (no scalar) is no run
            collect, args, lines = _one_run(folder)
            if collect.rows:
                break
        others = [f for f in folders if f != folder]
    if not collect.rows:
        raise ValueError(f"{path}: the TensorBoard events hold no scalar (" + "; ".join(collect.problems[:2]) + ")")
    if others:
        lines.append(f"{path}: {len(others) + 1} folders of TensorBoard events (runs): {folder} is read (the newest), "
                     f"not {', '.join(str(f) for f in others)}; give one of those folders to read it")
    collect.problems[:0] = lines
    run = collect.run(name, "tensorboard", f"TensorBoard events in {folder}")
    run.config = settings(args)
    return run


# ----------------------------------------------------------------------------------------------------------- W&B

WANDB_GLOB = "*.wandb"
BLOCK = 32 * 1024
HEADER = b":W&B"
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def wandb_files(path: Path) -> list[Path]:
    """The .wandb files of `path` (a file, a run folder, a wandb/ folder or the folder above it), oldest first;
    the `latest-run` link counted once."""
    if path.is_file():
        return [path] if path.suffix == ".wandb" else []
    found = sorted(path.glob(WANDB_GLOB)) or sorted(path.glob(f"*/{WANDB_GLOB}")) or \
        sorted(path.glob(f"wandb/*/{WANDB_GLOB}"))
    unique = {p.resolve(): p for p in sorted(found, key=lambda p: "latest-run" not in p.parts)}
    return sorted(unique.values(), key=lambda p: (p.stat().st_mtime, p.name))


def is_wandb(path: Path) -> bool:
    return path.exists() and bool(wandb_files(path))


def wandb_payloads(path: Path, problems: list[str]) -> Iterator[bytes]:
    """The records of a .wandb file, streamed a block at a time (a FIFO or a folder by its name raises
    ValueError naming it, unopened)."""
    from .file_kinds import check_file

    check_file(path)
    with path.open("rb") as handle:
        head = handle.read(7)
        if len(head) < 7 or head[:4] != HEADER:
            problems.append(f"{path} does not start with wandb's ':W&B' header: not a .wandb file, or one written "
                            "by a wandb release of another layout; nothing read from it")
            return
        if head[6] != 0:
            problems.append(f"{path}: .wandb layout version {head[6]} (read here: 0, wandb 0.x); read as version 0")
        offset, pending = 7, b""
        block = head + handle.read(BLOCK - 7)
        while block:
            while offset + 7 <= len(block):
                _, length, kind = struct.unpack("<IHB", block[offset:offset + 7])
                if kind == 0 and length == 0:  # padding to the block's end
                    break
                if offset + 7 + length > len(block):
                    problems.append(f"{path}: the last record is cut short (a run still writing, or killed); the "
                                    "records before it are read")
                    return
                payload = block[offset + 7:offset + 7 + length]
                offset += 7 + length
                if kind == FULL or kind == LAST:
                    yield pending + payload
                    pending = b""
                elif kind in (FIRST, MIDDLE):
                    pending = payload if kind == FIRST else pending + payload
                else:
                    problems.append(f"{path}: a record of unknown type {kind} (another wandb layout?); the records "
                                    "before it are read, the rest of the file is not")
                    return
            block, offset = handle.read(BLOCK), 0


def _items(items: Any) -> dict[str, Any]:
    """wandb's {key or nested_key: value_json} items as a dict of parsed values."""
    out = {}
    for item in items:
        try:
            value = json.loads(item.value_json)
        except json.JSONDecodeError:
            value = item.value_json
        out[item.key or "/".join(item.nested_key)] = value
    return out


def read_wandb(path: Path, name: str) -> Run:
    """A W&B run folder (offline or synced; the folder, its .wandb file, or the wandb/ folder above runs, whose
    newest run is read and the others named): history rows, and the config from its records, its
    files/config.yaml and files/wandb-summary.json."""
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2 as pb

    *others, file = wandb_files(path)
    collect = Collector(file)
    if others:
        collect.problems.append(f"{path}: {len(others) + 1} W&B runs: {file.parent.name} is read (the newest), not "
                                f"{', '.join(p.parent.name for p in others)}; give a run's folder to read it")
    config: dict[str, Any] = {}
    unreadable = 0
    for payload in wandb_payloads(file, collect.problems):
        record = pb.Record()
        try:
            record.ParseFromString(payload)
        except DecodeError:
            unreadable += 1
            continue
        kind = record.WhichOneof("record_type")
        if kind == "history":
            row = _items(record.history.item)
            step = step_of(row)
            if step is None and record.history.HasField("step"):
                step = int(record.history.step.num)
            if step is not None:
                collect.add(step, row)
        elif kind in ("config", "run"):
            config.update(_items(record.config.update if kind == "config" else record.run.config.update))
    if unreadable:
        collect.problems.append(f"{file}: {unreadable} record(s) wandb's protobuf cannot parse (written by another "
                                "wandb release?); skipped")
    if not collect.rows:
        raise ValueError(f"{file} holds no history row (" + ("; ".join(collect.problems[:2]) or "an empty run") + ")")
    run = collect.run(name, "wandb", f"a W&B run ({file.name})")
    run.config = settings({**_wandb_files_config(file.parent, run.problems), **config})
    return run


def _wandb_files_config(folder: Path, problems: list[str]) -> dict[str, Any]:
    """The settings a synced run keeps beside its log: files/config.yaml ({key: {value: v}}) and
    files/wandb-summary.json (the last value of each key)."""
    import yaml

    out: dict[str, Any] = {}
    for file, load in ((folder / "files" / "wandb-summary.json", json.load),
                       (folder / "files" / "config.yaml", yaml.safe_load)):
        if not file.is_file():
            continue
        try:
            with file.open(encoding="utf-8") as handle:
                content = load(handle)
        except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as err:
            problems.append(f"{file} cannot be read ({type(err).__name__}); the run's settings are taken from its "
                            "log alone")
            continue
        out.update(content if isinstance(content, dict) else {})
    return out


def settings(config: dict[str, Any]) -> dict[str, Any]:
    """What the detectors use from a run's config: G, the length cap, the planned steps, the logging interval."""
    out = {}
    for key in SETTINGS:
        value = config.get(key)
        value = value.get("value") if isinstance(value, dict) else value
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            out[key] = int(value)
    return out
