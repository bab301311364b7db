"""A full disk during a save: the size a checkpoint or the final model will take, checked against the free
space before writing; a write that runs out of room recognised through each writer (Python, safetensors,
torch.save) and answered with one DiskFullError that names the disk, the sizes and the way on; and a run
that died before its first checkpoint started over without losing its metrics.jsonl (docs/reliability.md).
"""

from __future__ import annotations

import errno
import os
import warnings
from pathlib import Path

import torch

from ..errors import DiskFullError
from ..logging.backends import METRICS_FILE
from .run_folder import (
    CHECKPOINT_NAME,
    MANIFEST,
    STATE,
    STATE_JSON,
    checkpoint_folders,
    holds_metrics,
    latest_checkpoint,
    nearest_existing,
    step_of,
)

# Room for what the formula does not count: tokenizer and config files, trainer_state.pt (RNGs, the generation
# in flight), manifest.json, file-system blocks. Real tokenizers take 2-10 MB, which the 2% margin covers for
# models of 135M weights up. Kept small: an estimate above the truth would refuse a save that fits.
_SMALL_FILES = 256 << 10


def _run_files() -> tuple[str, ...]:
    """A checkpoint's files that a model folder does not have."""
    return ("optimizer.pt", "scheduler.pt", STATE, STATE_JSON, MANIFEST)


# What a full disk looks like through each writer: Python's OSError (ENOSPC), safetensors' SafetensorError
# ("... No space left on device (os error 28)"), torch.save's RuntimeError ("[enforce fail at
# inline_container.cc:672] . unexpected pos 576 vs 534", or "... failed writing file ..." on older torch).
_FULL_TEXTS = ("No space left on device", "os error 28")
_TORCH_SHORT_WRITE = ("unexpected pos", "failed writing file")


def estimate_checkpoint_bytes(output_dir: str | os.PathLike[str], model, optimizer) -> int:
    """The size the next checkpoint will take, plus a margin: the newest checkpoint's size when there is one
    (the same files of the same shapes), else the weights and the optimizer's state (AdamW: two moments of
    every trainable weight). An estimate that falls short is caught by the write failing (DiskFullError)."""
    folders = checkpoint_folders(Path(output_dir))
    if folders:
        newest = max(folders, key=step_of)
        return _with_margin(sum(p.stat().st_size for p in newest.iterdir() if p.is_file()))
    return _with_margin(weights_bytes(model) + _optimizer_bytes(optimizer)) + _SMALL_FILES


def estimate_model_bytes(output_dir: str | os.PathLike[str], model) -> int:
    """The size of the final model folder, plus a margin: the newest checkpoint's weight, config and tokenizer
    files when there is one, else the weights (tokenizer and config files: `_SMALL_FILES / 4`)."""
    folders = checkpoint_folders(Path(output_dir))
    if folders:
        newest = max(folders, key=step_of)
        files = [p for p in newest.iterdir() if p.is_file() and p.name not in _run_files()]
        return _with_margin(sum(p.stat().st_size for p in files))
    return _with_margin(weights_bytes(model)) + _SMALL_FILES // 4


def weights_bytes(model) -> int:
    """What save_pretrained writes of `model`: every weight (tied ones once), or the adapters alone with LoRA."""
    from ..models import is_peft_model

    params = model.parameters()
    if is_peft_model(model):
        params = (p for p in params if p.requires_grad)
    return sum(p.numel() * p.element_size() for p in params)


def _optimizer_bytes(optimizer) -> int:
    held = sum(t.numel() * t.element_size() for state in optimizer.state.values() for t in state.values()
               if torch.is_tensor(t))
    if held:
        return held
    # no step taken yet (or every update skipped): AdamW will hold two moments of each weight it trains
    return 2 * sum(p.numel() * p.element_size() for group in optimizer.param_groups for p in group["params"])


def _with_margin(size: int) -> int:
    return int(size * 1.02)


def is_disk_full(err: BaseException | None) -> bool:
    """True when `err` (or what caused it) is a writer's way of saying the disk is full."""
    for _ in range(4):  # transformers and torch may wrap the OSError
        if err is None:
            return False
        if isinstance(err, OSError) and err.errno == errno.ENOSPC:
            return True
        text = str(err) if isinstance(err, Exception) else ""
        if any(t in text for t in _FULL_TEXTS):
            return True
        if isinstance(err, RuntimeError) and any(t in text for t in _TORCH_SHORT_WRITE):
            return True
        err = err.__cause__ or err.__context__
    return False


def disk_full(target: Path, needs: int, free: int, failure: BaseException | None = None) -> DiskFullError:
    """The error for `target` not fitting: the disk, the sizes (`free`: before the write began; a failed
    writer may still hold its deleted file's blocks), the fix, and how to continue the run."""
    root = target.parent
    what = target.name if CHECKPOINT_NAME.match(target.name) else f"the final model {target}"
    sizes = f"needs ~{_size(needs)}, {_size(free)} free" if needs else f"{_size(free)} free"
    if failure is not None:
        sizes += f"; the write failed with {type(failure).__name__}: {_first_line(failure)}"
    return DiskFullError(f"no space left on {mount_of(root)} while writing {what} ({sizes}). {_way_on(root)}")


def _way_on(output_dir: Path) -> str:
    with warnings.catch_warnings():  # a damaged checkpoint is reported when the run resumes, not here
        warnings.simplefilter("ignore")
        last = latest_checkpoint(output_dir)
    if last is None:
        return (f"Nothing of it was kept and {METRICS_FILE} is as it was, but the run has no checkpoint to "
                f"resume from: free space on that disk and start it over with {start_over(output_dir)}; or "
                "start it in an output_dir on a disk with room")
    return (f"Nothing of it was kept; {METRICS_FILE} and the checkpoints are as they were. Free space on that "
            "disk (resuming needs only the newest checkpoint, so older checkpoint-N folders can go; a lower "
            f"save_total_limit keeps fewer), or move {output_dir} to a disk with room and pass its new path as "
            f"--output_dir; then continue from {last} with --resume (resume_from_checkpoint=True)")


def way_on_after_a_failed_write(output_dir: str | os.PathLike[str]) -> str:
    """How to continue a run whose metrics.jsonl or completions.jsonl line could not be written (a full disk):
    the files keep every whole line, and a resume from the last checkpoint logs the steps after it again."""
    root = Path(output_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        last = latest_checkpoint(root)
    if last is None:
        return (f"start the run over with {start_over(root)}, since it has no checkpoint to resume from; or "
                "start it in an output_dir on a disk with room")
    return (f"continue from {last} with --resume (resume_from_checkpoint=True): the steps after it run and "
            f"are logged again; or move {root} to a disk with room and pass its new path as --output_dir")


def start_over(output_dir: str | os.PathLike[str]) -> str:
    """The option that starts a new run in a used output_dir, and what it does with the run there (see
    setup.check_output_dir): the one way on for a run that has no checkpoint."""
    root = Path(output_dir)
    text = (f"--overwrite_output_dir (overwrite_output_dir=True), which keeps its {METRICS_FILE} as "
            f"{_aside(root / METRICS_FILE).name}")
    return text + " and removes its checkpoint-N folders" if checkpoint_folders(root) else text


def keep_metrics_aside(output_dir: str | os.PathLike[str]) -> Path | None:
    """Renames a used metrics.jsonl to metrics.jsonl.<n> (the first free n) before a new run starts over
    there, so that a run's record is never lost to overwrite_output_dir; returns the new name, if any."""
    if not holds_metrics(Path(output_dir)):
        return None
    path = Path(output_dir) / METRICS_FILE
    aside = _aside(path)
    os.replace(path, aside)  # a rename: needs no room on a full disk
    return aside


def _aside(path: Path) -> Path:
    n = 1
    while path.with_name(f"{path.name}.{n}").exists():
        n += 1
    return path.with_name(f"{path.name}.{n}")


def mount_of(path: str | os.PathLike[str]) -> str:
    """The mount point holding `path` (which need not exist yet), with its device where /proc/mounts names it:
    '/data (/dev/sdb1)', '/tmp/small (tmpfs)'."""
    point = nearest_existing(path).resolve()
    while not os.path.ismount(point) and point != point.parent:
        point = point.parent
    device = _devices().get(str(point))
    return f"{point} ({device})" if device else str(point)


def _devices() -> dict[str, str]:
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:  # not Linux: the mount point alone names the disk
        return {}
    # a later mount on the same point hides the earlier one, so later lines win; spaces are written \040
    return {f[1].replace("\\040", " "): f[0] for f in (line.split() for line in lines) if len(f) > 2}


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= scale / 100:  # 0.01 of the unit: smaller numbers read better in the next unit down
            return f"{n / scale:.2f} {unit}"
    return f"{n / 1024:.2f} KiB"


def _first_line(err: BaseException) -> str:
    line = (str(err).splitlines() or [""])[0]
    return line if len(line) <= 120 else line[:117] + "..."


