"""metrics.jsonl: one JSON object per logged step, the run's record that every other tool reads.

Format: one line per `log` call, `{"step": 3, "time": 1767225600.12, "collapse/acr": 0.5, ...}`, where
`time` is the Unix time of the call and every other key is a metric. JSON has no NaN or infinity, so a
non-finite value is written as `null`; `read_metrics` turns it back into `nan` (the sign of an infinity is
lost, which is acceptable: such a value already means the step went wrong).

Each line is handed to the operating system as soon as it is written, so a killed process keeps every
complete line. A process killed in the middle of a write can leave a partial last line; the readers skip it
with a warning and the writer cuts it off before appending. A write that fails (a full disk) is cut off at
once, so the file always ends with a whole line, and raises DiskFullError naming the file.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from pathlib import Path
from typing import Any

from ..errors import DiskFullError
from ..files import NO_ROOM, write_text_atomic

RESERVED_KEYS = ("step", "time")


def json_value(value: float) -> float | None:
    """A float as JSON can hold it: non-finite values become None (written as null)."""
    return value if math.isfinite(value) else None


def encode_record(step: int, metrics: dict[str, float], now: float) -> str:
    """One metrics.jsonl line (with its newline) for `metrics` logged at `step`."""
    clash = [key for key in RESERVED_KEYS if key in metrics]
    if clash:
        raise ValueError(
            f"metric name(s) {clash} are reserved in metrics.jsonl (every line has 'step' and 'time'); "
            "rename the metric, e.g. 'perf/step_s'"
        )
    record: dict[str, Any] = {"step": int(step), "time": now}
    record.update((name, json_value(float(value))) for name, value in metrics.items())
    return json.dumps(record, allow_nan=False) + "\n"


def _decode_line(line: str) -> dict[str, Any]:
    record = json.loads(line)
    if not isinstance(record, dict) or "step" not in record:
        raise ValueError("not a JSON object with a 'step' key")
    return record


def parse_lines(text: str, path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(raw line, record) pairs of a step-keyed JSON-lines text (metrics.jsonl, completions.jsonl), without
    a partial last line.

    Only the last line can be partial (a process killed mid-write); a bad line anywhere else means the file
    was edited or mixed up with another file, and guessing would hide that.
    """
    lines = text.split("\n")
    # A complete file ends with "\n", so the last element is "" unless the last write was cut short.
    complete, tail = lines[:-1], lines[-1]
    parsed: list[tuple[str, dict[str, Any]]] = []
    for number, line in enumerate(complete, start=1):
        if not line.strip():
            continue
        try:
            parsed.append((line, _decode_line(line)))
        except ValueError as err:
            if number == len(complete) and not tail:
                # A last line that ends with a newline but does not parse: treat it as partial too.
                _warn_partial(path, number)
                continue
            raise ValueError(
                f"{path}: line {number} is not a record ({err}); remove or fix that line"
            ) from None
    if tail.strip():
        try:
            parsed.append((tail, _decode_line(tail)))
        except ValueError:
            _warn_partial(path, len(complete) + 1)
    return parsed


def _warn_partial(path: Path, number: int) -> None:
    warnings.warn(
        f"{path}: skipping the partial last line {number} (written by a process that was killed mid-write)",
        RuntimeWarning,
        stacklevel=3,
    )


def read_records(path: str | os.PathLike[str], missing: str) -> list[dict[str, Any]]:
    """The records of a step-keyed JSON-lines file, in file order, a partial last line (a killed process)
    skipped with a RuntimeWarning. A missing file raises FileNotFoundError with `missing` as the hint."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no {path.name} at {path}; {missing}")
    return [record for _, record in parse_lines(path.read_text(encoding="utf-8"), path)]


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a metrics.jsonl file, in file order; `null` metric values come back as `nan`.

    A partial last line (a killed process) is skipped with a RuntimeWarning.
    """
    records = read_records(path, "a run writes it to <output_dir>/metrics.jsonl")
    return [{k: math.nan if v is None and k not in RESERVED_KEYS else v for k, v in record.items()}
            for record in records]


def json_safe(value: Any) -> Any:
    """`value` with every NaN and infinity (in nested dicts, lists and tuples) as None: JSON has neither, and
    null stands for both (an undefined SE, a figure a run never logged)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    return [json_safe(item) for item in value] if isinstance(value, (list, tuple)) else value


def truncate_after(path: str | os.PathLike[str], step: int) -> int:
    """Drops the lines of `path` with a step above `step` (and a partial last line); returns how many.

    The kept lines are copied byte for byte and the file is replaced atomically. Used on resume from a
    checkpoint taken at `step`, so that the steps the resumed run logs again appear once.
    """
    path = Path(path)
    if not path.is_file():
        return 0
    text = path.read_text(encoding="utf-8")
    kept = [line for line, record in parse_lines(text, path) if record["step"] <= step]
    total_lines = sum(1 for line in text.split("\n") if line.strip())
    dropped = total_lines - len(kept)
    if dropped:
        write_text_atomic(path, "".join(line + "\n" for line in kept))
    return dropped


def _cut_partial_tail(path: Path) -> None:
    """Removes a last line without its newline, so that the next line does not get glued onto it."""
    size = path.stat().st_size
    if size == 0:
        return
    with open(path, "rb") as f:
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        f.seek(0)
        data = f.read()
    keep = data.rfind(b"\n") + 1  # 0 when the whole file is one partial line
    _warn_partial(path, data[:keep].count(b"\n") + 1)
    os.truncate(path, keep)


class JsonlAppender:
    """An append-only JSON-lines file whose every write is flushed at once: the writing half shared by
    metrics.jsonl and completions.jsonl, so that both resume and survive a kill the same way.

    `resume_step=None` appends to what the file holds. `resume_step=N` first drops the lines with a step
    above N (see `truncate_after`): pass the step of the checkpoint a run resumes from, or 0 to start the
    file afresh. A partial last line is cut off. The file itself is opened by `open()` or by the first
    `append`, so that a run which never writes to it does not leave an empty file behind.
    """

    def __init__(self, path: str | os.PathLike[str], resume_step: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_step is not None:
            truncate_after(self.path, resume_step)
        if self.path.is_file():
            _cut_partial_tail(self.path)
        self._fd: int | None = None
        self._closed = False

    def open(self) -> None:
        """Opens (creating) the file for appending; a no-op once open."""
        if self._closed:
            raise RuntimeError(f"{self.path} is closed; log before close()")
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, text: str) -> None:
        """Writes `text` (whole lines, each ending in a newline) straight to the operating system.

        Unbuffered, not fsynced: the lines reach the OS, which keeps them if the process is killed; an fsync
        per step would only add protection against a power cut, at a cost on slow disks. A write that fails
        part-way is cut back to the file's size before it, so no partial line is left behind.
        """
        self.open()
        assert self._fd is not None  # open() opened it
        data, size = text.encode("utf-8"), os.fstat(self._fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as err:
            os.ftruncate(self._fd, size)  # frees what was written: needs no room
            if err.errno in NO_ROOM:
                raise DiskFullError(
                    f"no space left on the disk of {self.path} ({err.strerror}) while writing to it; the file "
                    "keeps every whole line written before. Free space on that disk"
                ) from err
            raise OSError(err.errno, f"{err.strerror} while writing {self.path}") from err

    def close(self) -> None:
        self._closed = True
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class JsonlBackend:
    """Appends one line per `log` call to a metrics.jsonl file, flushed at once.

    `resume_step=None` appends to what the file holds. `resume_step=N` first drops the lines with a step
    above N (see `truncate_after`): pass the step of the checkpoint a run resumes from, or 0 to start the
    file afresh.
    """

    def __init__(self, path: str | os.PathLike[str], resume_step: int | None = None) -> None:
        self._out = JsonlAppender(path, resume_step=resume_step)
        self._out.open()  # metrics.jsonl exists from the start: every run writes it
        self.path = self._out.path

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self._out.append(encode_record(step, metrics, time.time()))

    def close(self) -> None:
        self._out.close()
