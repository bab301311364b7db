"""What a run shows on the console: a live rich progress bar in a terminal, plain lines elsewhere.

A live bar in a log file or a CI job turns into thousands of redraws, so when stdout is not a terminal the
display prints one plain line every `logging_steps` steps instead. Both show the same key figures.
"""

from __future__ import annotations

import time
from typing import Any

from ..terminal import terminal_safe

# metric -> (label, format) of the key figures, in display order
KEY_FIGURES = {
    "reward/mean": ("reward", "{:.3f}"),
    "collapse/acr": ("acr", "{:.3f}"),
    "collapse/acr_post": ("acr_post", "{:.3f}"),
    "entropy/mean": ("entropy", "{:.3f}"),
    "perf/step_s": ("s/step", "{:.2f}"),
}


def format_figures(figures: dict[str, float]) -> str:
    """'reward 0.250 | acr 0.500 | 2.10 s/step' for the key figures present in `figures`."""
    parts = []
    for name, (label, fmt) in KEY_FIGURES.items():
        if name in figures:
            value = fmt.format(figures[name])
            parts.append(f"{value} {label}" if label == "s/step" else f"{label} {value}")
    return " | ".join(parts)


def format_eta(seconds: float | None) -> str:
    """'H:MM:SS' of a duration in seconds; '-:--:--' when unknown (None)."""
    if seconds is None:
        return "-:--:--"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def eta_seconds(elapsed_s: float, steps_done: int, steps_left: int) -> float | None:
    """Remaining time at the mean pace so far; None before the first step."""
    if steps_done <= 0:
        return None
    return elapsed_s / steps_done * max(steps_left, 0)


def plain_line(step: int, total_steps: int, figures: dict[str, float], eta_s: float | None) -> str:
    """One progress line: 'step 3/10 | reward 0.250 | acr 0.500 | eta 0:00:15'."""
    parts = [f"step {step}/{total_steps}"]
    shown = format_figures(figures)
    if shown:
        parts.append(shown)
    parts.append(f"eta {format_eta(eta_s)}")
    return " | ".join(parts)


class SilentDisplay:
    """console=False: nothing on the console."""

    def update(self, step: int, metrics: dict[str, float]) -> None:
        pass

    def set_total(self, total_steps: int) -> None:
        pass

    def note(self, message: str) -> None:
        pass

    def show(self, renderable: Any) -> None:
        pass

    def stop(self) -> None:
        pass


class PlainDisplay:
    """One line per `logging_steps` steps on stdout (and on the last step), for pipes, files and CI."""

    def __init__(self, total_steps: int, logging_steps: int = 1) -> None:
        self.total_steps = total_steps
        self.logging_steps = logging_steps
        self._first: tuple[int, float] | None = None  # (step, time) of the first update
        self._last_printed: int | None = None

    def update(self, step: int, metrics: dict[str, float]) -> None:
        now = time.monotonic()
        if self._first is None:
            self._first = (step, now)
        figures = {name: metrics[name] for name in KEY_FIGURES if name in metrics}
        due = step % self.logging_steps == 0 or step == self.total_steps
        # A call with no key figure (evaluation metrics alone) adds nothing to the line; skip it.
        if not figures or not due or step == self._last_printed:
            return
        self._last_printed = step
        print(plain_line(step, self.total_steps, figures, self._eta(step, now, metrics)), flush=True)

    def set_total(self, total_steps: int) -> None:
        self.total_steps = total_steps

    def _eta(self, step: int, now: float, metrics: dict[str, float]) -> float | None:
        """Mean pace since the first step logged here, so that setup and model loading do not count;
        until a second step is in, the step's own `perf/step_s` if it was logged."""
        assert self._first is not None  # update() sets it before it asks
        first_step, first_time = self._first
        if step > first_step:
            return eta_seconds(now - first_time, step - first_step, self.total_steps - step)
        pace = metrics.get("perf/step_s")
        return None if pace is None else pace * max(self.total_steps - step, 0)

    def note(self, message: str) -> None:
        print(terminal_safe(message), flush=True)

    def show(self, renderable: Any) -> None:
        from rich.console import Console

        Console().print(renderable)

    def stop(self) -> None:
        pass


def _figures_progress(*columns: Any, **kwargs: Any):
    """A rich Progress that draws the key figures on their own line under the bar: on one line with the
    bar they would squeeze it out of an 80-column terminal. `get_renderables` is rich's hook for this."""
    from rich.progress import Progress
    from rich.text import Text

    class FiguresProgress(Progress):
        figures = ""

        def get_renderables(self):
            yield self.make_tasks_table(self.tasks)
            if self.figures:
                yield Text("  " + self.figures, overflow="ellipsis", no_wrap=True)

    return FiguresProgress(*columns, **kwargs)


class LiveDisplay:
    """A rich progress bar with elapsed time and ETA, and the key figures of the last step under it."""

    def __init__(self, total_steps: int, start_step: int = 0) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self._progress = _figures_progress(
            TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta"), TimeRemainingColumn(),
            console=Console(),
            # RL steps take seconds to minutes: estimate the pace over the last hour, not rich's default
            # 30 s, which would often hold a single step and show no ETA at all.
            speed_estimate_period=3600.0,
        )
        self._task = self._progress.add_task("train", total=total_steps, completed=start_step)
        self._figures: dict[str, float] = {}
        self._progress.start()

    def update(self, step: int, metrics: dict[str, float]) -> None:
        # Keep the last known value of each figure: an evaluation-only call must not blank the others.
        self._figures.update({name: metrics[name] for name in KEY_FIGURES if name in metrics})
        self._progress.figures = format_figures(self._figures)
        self._progress.update(self._task, completed=step)

    def set_total(self, total_steps: int) -> None:
        self._progress.update(self._task, total=total_steps)

    def note(self, message: str) -> None:
        # printed above the bar, which is redrawn below it; a note can quote a prompt or a file name
        self._progress.console.print(terminal_safe(message), markup=False)

    def show(self, renderable: Any) -> None:
        self._progress.console.print(renderable)

    def stop(self) -> None:
        self._progress.stop()
