"""Reading a finished (or running) run's logs into one shape, whichever trainer wrote them.

`load_run(path)` asks the log formats (formats/, one module a format) which one the path holds, by content, and
reads it with that format's reader; `load_runs(path)` gives each run of a folder that holds several (the
TensorBoard runs transformers writes to `runs/`, one per launch). `ReadOptions` carries what the user says of a
log that it cannot say itself: its step column, a key's meaning (`--map KEY=METRIC`), a console log's line
format.

Notation: a run's `series[name]` is aligned with its `steps`; a step that did not log `name` holds NaN.
"""

from __future__ import annotations

from pathlib import Path

from .file_content import check_text
from .file_kinds import check_file, check_folder
from .read_options import ReadOptions
from .record import Run


def run_kind(path: Path) -> str | None:
    """The name of the log format `path` holds, judged by what is inside (formats.FORMATS: "grposcope", "trl",
    "verl", "verl-logger", "wandb", "tensorboard", "table", "console"), or None."""
    from .formats import claiming

    if not path.is_dir():  # a FIFO, a socket or a link loop given itself: named, never opened
        check_file(path)
    else:
        check_folder(path)  # one this user may not list or enter: named with the fix
    found = claiming(path)
    return found.name if found is not None else None


def load_run(path: str | Path, name: str | None = None, options: ReadOptions = ReadOptions()) -> Run:
    """The run in `path`: whatever log format it holds (formats/), read by content. A console log given with
    `options.pattern` is read with that pattern."""
    from .formats import claiming, described, get

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; give a run's output folder or log file")
    label = name or (path.parent.name if path.is_file() else path.name) or str(path)
    if not path.is_dir():
        check_file(path)
    else:
        check_folder(path)
    found = get("console") if options.pattern and path.is_file() else claiming(path)
    if found is None:
        if path.is_file():
            check_text(path)  # empty, UTF-16, binary: said as such, not as the list of formats
        raise FileNotFoundError(f"{path} holds no run log grposcope reads. It reads: {described()}. "
                                + ("Is it a run's output_dir?" if path.is_dir() else
                                   "A console log of another line format: give it with --pattern REGEX"))
    return found.read(path, label, options)


def load_runs(path: str | Path, name: str | None = None, options: ReadOptions = ReadOptions()) -> list[Run]:
    """Every run in `path`: one, or one a TensorBoard run when `path` is a folder of several (`runs/`)."""
    from .formats.tensorboard import event_files, run_folders

    path = Path(path)
    if path.is_dir() and run_kind(path) == "tensorboard":
        folders = run_folders(event_files(path))
        if len(folders) > 1:
            base = name or path.name or str(path)
            return [load_run(folder, f"{base}/{folder.relative_to(path)}", options) for folder in folders]
    return [load_run(path, name, options)]
