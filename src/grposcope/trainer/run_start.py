"""How a run of the trainer starts: anew in an output_dir that holds no other run, or from a checkpoint that is
checked to fit the model, the config and the data (checkpoint.py holds the files, resume_checks.py the fit)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..logging.backends import METRICS_FILE
from . import checkpoint, resume_checks
from .setup import check_output_dir

if TYPE_CHECKING:
    from .config import GRPOConfig


class Resumable(Protocol):
    """What a resume reads of the trainer and loads into it (GRPOTrainer is one), named here rather than
    imported from trainer.py, which imports this module."""

    args: GRPOConfig
    model: Any
    optimizer: Any
    scheduler: Any
    stream: Any
    max_steps: int
    global_step: int

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def start(args: GRPOConfig) -> tuple[int, list[str]]:
    """A new run: output_dir must not hold another run's metrics (unless overwrite_output_dir). Returns the
    step it starts from (0) and what to tell the user."""
    notes = check_output_dir(args)
    return 0, notes + _leftovers(checkpoint.remove_unfinished(args.output_dir))


def resume(trainer: Resumable, spec: str | bool) -> tuple[int, list[str]]:
    """Loads the checkpoint `spec` names into `trainer`; returns its step and what to tell the user."""
    args = trainer.args
    notes = _leftovers(checkpoint.remove_unfinished(args.output_dir))  # a run killed while saving
    folder = checkpoint.resolve(spec, args.output_dir)
    info = resume_checks.checked_info(folder, trainer.model, trainer.max_steps, args)  # fits, or raises
    notes += checkpoint.check_resumable(info, args.to_dict(), checkpoint.fingerprint(trainer.stream.examples))
    if metrics_bytes(args.output_dir) < info["metrics_offset"]:
        notes.append(f"{METRICS_FILE} is shorter than when {folder.name} was written: lines of the steps "
                     "before it are missing from it")
    state = checkpoint.load_checkpoint(folder, model=trainer.model, optimizer=trainer.optimizer,
                                       scheduler=trainer.scheduler)
    trainer.load_state_dict(state)
    step = trainer.global_step
    return step, notes + [f"resumed from {folder} at step {step} of {trainer.max_steps}"]


def metrics_bytes(output_dir: str | os.PathLike[str]) -> int:
    """The size of metrics.jsonl: a checkpoint records it, a resume checks that nothing went missing."""
    path = Path(output_dir) / METRICS_FILE
    return path.stat().st_size if path.is_file() else 0


def _leftovers(names: list[str]) -> list[str]:
    return [f"removed {name}: an unfinished checkpoint of a run killed while saving" for name in names]
