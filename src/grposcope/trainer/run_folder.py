"""What a run's output_dir holds and how its parts are found: the `checkpoint-N` folders and their files,
which one is the newest complete one, and whether a run's metrics.jsonl is there.

Shared by checkpoint.py (which writes and loads checkpoints) and disk_space.py (which sizes them and words
what to do when the disk is full); neither of those imports the other's names.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

from .. import manifest as mf
from ..logging.backends import METRICS_FILE

FORMAT = 1  # of trainer_state.pt, trainer_state.json and manifest.json
MANIFEST = mf.MANIFEST
STATE = "trainer_state.pt"
STATE_JSON = "trainer_state.json"
CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d+)$")
RESUME_ONLY = ("optimizer.pt", "scheduler.pt", STATE, STATE_JSON)  # read by a resume, never by a model load


def checkpoint_folders(root: Path) -> list[Path]:
    """The `checkpoint-N` folders in `root`, complete or not (see `verify`), in no particular order."""
    return [p for p in root.iterdir() if p.is_dir() and CHECKPOINT_NAME.match(p.name)] if root.is_dir() else []


def step_of(folder: Path) -> int:
    """N of a `checkpoint-N` folder."""
    match = CHECKPOINT_NAME.match(folder.name)
    assert match is not None  # callers pass checkpoint-N folders
    return int(match.group(1))


def verify(folder: Path, resumable: bool = True) -> str | None:
    """None when `folder` is complete: every file its manifest lists has its size and checksum, and (with
    `resumable`) it is a checkpoint a run can continue from, not a model folder; otherwise what is wrong.
    Without `resumable` (a model load: eval, training from it) the files only a resume reads are not checked:
    a checkpoint whose optimizer.pt was deleted to make room still evaluates."""
    manifest, why = mf.read(folder)
    if manifest is None:
        return f"{why} (not a complete grposcope checkpoint)"
    if manifest.get("format") != FORMAT:
        return f"checkpoint format {manifest.get('format')!r}, this grposcope reads {FORMAT}"
    files = manifest["files"] if resumable else {k: v for k, v in manifest["files"].items() if k not in RESUME_ONLY}
    problem = mf.problem(folder, files)
    if problem is not None:
        return problem
    if resumable and STATE not in manifest["files"]:
        return f"no {STATE} in the manifest"
    return None


def latest_checkpoint(output_dir: str | os.PathLike[str]) -> Path | None:
    """The newest complete checkpoint in `output_dir`; incomplete ones are skipped with a warning."""
    root = Path(output_dir)
    if not root.is_dir():
        return None
    for folder in sorted(checkpoint_folders(root), key=step_of, reverse=True):
        problem = verify(folder)
        if problem is None:
            return folder
        warnings.warn(f"skipping {folder}: {problem}; resuming from an older checkpoint", RuntimeWarning,
                      stacklevel=2)
    return None


def repair(folder: Path) -> str:
    """How to mend a checkpoint that fails `verify`: the files its manifest lists that are gone, to copy back;
    else (a truncated or corrupted file, no manifest) the folder, to copy again."""
    manifest, _ = mf.read(folder)
    gone = [name for name in (manifest or {}).get("files", {}) if not (folder / name).is_file()]
    return f"copy {', '.join(gone)} back into {folder}" if gone else f"copy {folder} again from where it came from"


def holds_metrics(output_dir: Path) -> bool:
    """True when `output_dir` holds a run's record: a metrics.jsonl that is not empty."""
    path = output_dir / METRICS_FILE
    return path.is_file() and path.stat().st_size > 0


def nearest_existing(path: str | os.PathLike[str]) -> Path:
    """`path` made absolute, or its nearest ancestor that exists (disk_usage needs one)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
