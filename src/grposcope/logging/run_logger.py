"""RunLogger: everything a training run does with its metrics, behind `log`, `log_completions`, `note`,
`summary`, `close`.

    logger = RunLogger("./output", report_to="tensorboard", total_steps=200, config=asdict(config))
    for step in range(1, 201):
        ...
        logger.log(step, metrics)
        if step % logging_steps == 0:
            logger.log_completions(step, rows)  # a sample of the step's completions
    logger.summary({"eval/accuracy before": 0.12, "eval/accuracy after": 0.31})
    logger.close()
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from ..errors import DiskFullError
from ..files import write_text_atomic
from .backends import LOGGERS, METRICS_FILE, CompletionsBackend, MetricsBackend, RunInfo, resolve_report_to
from .completions import COMPLETIONS_FILE, CompletionsWriter, completion_rows
from .console import LiveDisplay, PlainDisplay, SilentDisplay
from .jsonl import json_value, read_metrics
from .summary import RunStats, render_table, summary_rows

SUMMARY_FILE = "summary.json"


def as_float_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """The metrics as plain floats (0-d tensors and numpy scalars included); anything else is an error."""
    out = {}
    for name, value in metrics.items():
        if not isinstance(name, str):
            raise TypeError(f"metric name {name!r} is a {type(name).__name__}; metric names are strings")
        try:
            out[name] = float(value)
        except (TypeError, ValueError):
            raise TypeError(
                f"metric {name!r} is a {type(value).__name__} ({value!r:.60}); log a number "
                "(call .item() on a tensor, or leave the value out)"
            ) from None
    return out


def _json_safe(value: Any) -> Any:
    if isinstance(value, float):
        return json_value(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    return value


def _check_counts(total_steps: int, logging_steps: int, resume_step: int | None) -> None:
    if not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"total_steps={total_steps!r}: pass the number of optimizer steps of the run (>= 1)")
    if not isinstance(logging_steps, int) or logging_steps < 1:
        raise ValueError(f"logging_steps={logging_steps!r}: pass a whole number >= 1 (1 prints every step)")
    if resume_step is not None and (not isinstance(resume_step, int) or resume_step < 0):
        raise ValueError(
            f"resume_step={resume_step!r}: pass the checkpoint's step (>= 0), or None for a new run"
        )


class RunLogger:
    """Sends each step's metrics to metrics.jsonl and the `report_to` backends, shows progress, sums up.

    `resume_step`: the step of the checkpoint a resumed run starts from. Lines of metrics.jsonl and
    completions.jsonl above it are dropped (the run logs those steps again), TensorBoard hides its events
    above it, W&B continues the same run, and the summary covers the steps kept from before as well as the
    new ones. Pass 0 to start a reused output_dir's files afresh; None appends to them.

    `live`: draw the rich bar (True), print plain lines (False), or decide by whether stdout is a terminal
    (None). `console=False` prints nothing at all. `way_on`: called when a line cannot be written for a full
    disk; what it returns (how to continue the run) ends the DiskFullError's message.
    """

    def __init__(self, output_dir: str | os.PathLike[str], report_to: str | list[str] | None = "none", *,
                 total_steps: int, run_name: str | None = None, config: dict[str, Any] | None = None,
                 resume_step: int | None = None, console: bool = True, logging_steps: int = 1,
                 logging_dir: str | os.PathLike[str] | None = None, project: str | None = None,
                 live: bool | None = None, way_on: Callable[[], str] | None = None) -> None:
        _check_counts(total_steps, logging_steps, resume_step)
        names = resolve_report_to(report_to)  # fail on a bad name before anything is created
        self.output_dir = Path(output_dir)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.total_steps = total_steps
        self._way_on = way_on
        self._notes: set[str] = set()
        self._display = self._make_display(console, live, logging_steps, resume_step or 0)
        self._started = time.time()
        self.stats = RunStats()
        self._prior_wall_s = 0.0
        run = RunInfo(output_dir=self.output_dir, run_name=run_name, config=config, resume_step=resume_step,
                      logging_dir=None if logging_dir is None else Path(logging_dir), project=project,
                      note=self.note)
        self.backends: dict[str, MetricsBackend] = {}
        self._closed = False
        self._completions: CompletionsWriter | None = None
        try:
            # Written here, not by a backend, so that completions.jsonl is kept whatever report_to says.
            self._completions = CompletionsWriter(self.output_dir / COMPLETIONS_FILE, resume_step=resume_step)
            for name in names:
                self.backends[name] = LOGGERS.get(name)(run)
        except BaseException:
            self.close()  # the backends opened so far, and the display
            raise
        if resume_step:
            self._replay(self.output_dir / METRICS_FILE)

    def _make_display(self, console: bool, live: bool | None, logging_steps: int, start_step: int):
        if not console:
            return SilentDisplay()
        if live is None:
            from rich.console import Console

            live = Console().is_terminal  # honours FORCE_COLOR and TTY_COMPATIBLE, like rich itself
        if live:
            return LiveDisplay(self.total_steps, start_step=start_step)
        return PlainDisplay(self.total_steps, logging_steps=logging_steps)

    def _replay(self, path: Path) -> None:
        """Feeds the steps kept from before the resume into the summary, and counts their wall time."""
        if not path.is_file():
            return
        records = read_metrics(path)
        for record in records:
            self.stats.add(record["step"], {k: v for k, v in record.items() if k not in ("step", "time")})
        if records:
            self._prior_wall_s = records[-1]["time"] - records[0]["time"]

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """Logs the metrics of optimizer step `step` to every backend and updates the progress display."""
        metrics = as_float_metrics(metrics)
        with self._full_disk_says_how_to_go_on():
            for backend in self.backends.values():
                backend.log(step, metrics)
        self.stats.add(step, metrics)
        self._display.update(step, metrics)

    def set_total(self, total_steps: int) -> None:
        """A new expected number of steps for the progress display (a run that stops at max_samples)."""
        self.total_steps = total_steps
        self._display.set_total(total_steps)

    def log_completions(self, step: int, rows: list[dict[str, Any]]) -> None:
        """Logs a sample of step `step`'s completions: one line per row in <output_dir>/completions.jsonl,
        and a table in every backend that has `log_completions` (TensorBoard, W&B).

        Each row: {"prompt": str | messages, "completion": str | messages, "rewards": {function name:
        score}, "reward": float, "advantage": float, **extra JSON-able columns}. NaN scores (a reward
        function that returned None) are written as null. The rows are checked before anything is written.
        """
        rows = completion_rows(rows)
        if not rows:
            return
        assert self._completions is not None  # made in __init__
        with self._full_disk_says_how_to_go_on():
            self._completions.write(step, rows)
        for backend in self.backends.values():
            if isinstance(backend, CompletionsBackend):
                backend.log_completions(step, rows)

    @contextlib.contextmanager
    def _full_disk_says_how_to_go_on(self) -> Iterator[None]:
        try:
            yield
        except DiskFullError as err:
            if self._way_on is None:
                raise
            raise DiskFullError(f"{err}; then {self._way_on()}") from err.__cause__

    def note(self, message: str) -> None:
        """Prints `message` once (repeats are dropped), above the progress bar."""
        if message in self._notes:
            return
        self._notes.add(message)
        self._display.note(message)

    def summary(self, extra: dict[str, float | str] | None = None,
                unshown: dict[str, float] | None = None) -> dict[str, Any]:
        """Prints the run's summary table, writes it to <output_dir>/summary.json, and returns it.

        Figures: steps, wall time (the time this logger ran, plus the logged span before a resume), reward
        and ACR over the first 10%, the last 10% and the whole run, the mean post-mitigation ACR, the last
        entropy, and the alarms that fired. `extra` rows (e.g. held-out accuracy) are added as given;
        `unshown` figures (the run's time split) go into summary.json only.
        """
        extra = dict(extra or {})
        figures = self.stats.figures(wall_time_s=self._prior_wall_s + time.time() - self._started)
        clash = sorted(set(extra) & set(figures))
        if clash:
            raise ValueError(f"extra rows {clash} have the names of computed figures; rename them")
        self._display.stop()  # the table goes below the finished bar, not inside it
        self._display.show(render_table(summary_rows(figures, extra)))
        figures.update(extra)
        figures.update(unshown or {})
        write_text_atomic(self.output_dir / SUMMARY_FILE,
                          json.dumps(_json_safe(figures), indent=2, allow_nan=False) + "\n")
        return figures

    def close(self) -> None:
        """Stops the display and closes every backend (each is closed even if another fails)."""
        if self._closed:
            return
        self._closed = True
        self._display.stop()
        errors = []
        closing: list[MetricsBackend | CompletionsWriter] = [*self.backends.values(),
                                                             *filter(None, [self._completions])]
        for backend in closing:
            try:
                backend.close()
            except Exception as err:  # close the others anyway, then report the first failure
                errors.append(err)
        if errors:
            raise errors[0]

    def __enter__(self) -> RunLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

