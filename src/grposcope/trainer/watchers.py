"""What watches a run of the trainer as it goes: the live diagnosis (grposcope diagnose's detectors, every
diagnose_every steps), the user's callbacks, and the guard that stops a run whose updates keep failing."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from ..diagnose.engine import Options
from ..diagnose.live import LiveDiagnosis
from ..errors import InputTypeError, NonFiniteError
from . import checkpoint
from .config import GRPOConfig


def live_diagnosis(args: GRPOConfig, max_steps: int) -> LiveDiagnosis | None:
    """The live diagnosis of a run (None with diagnose_every=0), told what the config knows and a log does not."""
    if not args.diagnose_every:
        return None
    options = Options(kl_bound=args.kl_bound, success_threshold=args.success_threshold,
                      num_generations=args.num_generations, max_completion_length=args.max_completion_length,
                      max_steps=max_steps)
    name = args.run_name or Path(args.output_dir).name
    settings = {k: getattr(args, k) for k in ("use_avspo", "skip_no_signal_steps", "sampler", "epsilon_high",
                                               "mask_truncated_completions", "advantage_estimator")}
    return LiveDiagnosis(name, options, every=args.diagnose_every, output_dir=args.output_dir, settings=settings)


def check_callbacks(callbacks: list[Any]) -> list[Any]:
    """The callbacks, each with a method `on_step_end(trainer, metrics)`; TRL's TrainerCallback is refused."""
    for callback in callbacks:
        hook = getattr(callback, "on_step_end", None)
        if hook is None or "control" in inspect.signature(hook).parameters:
            raise InputTypeError(
                f"{type(callback).__name__} is not a grposcope callback: give it a method "
                "on_step_end(trainer, metrics) (TRL's TrainerCallback takes other arguments)"
            )
    return list(callbacks)


def stop_if_unstable(args: GRPOConfig, bad_steps: int, step: int) -> None:
    """Stops the run (NonFiniteError) once more than max_bad_steps updates were skipped for a NaN or inf;
    `step` is the run's step now."""
    if bad_steps <= args.max_bad_steps:
        return
    last = checkpoint.latest_checkpoint(args.output_dir)
    then = f"then resume from {last} (--resume)" if last is not None else "then start the run again"
    raise NonFiniteError(
        f"{bad_steps} updates were skipped because the loss or the gradient was NaN or inf "
        f"(max_bad_steps={args.max_bad_steps}, now at step {step}); the skipped updates "
        "left the weights unchanged. Lower learning_rate, set max_grad_norm, or check the reward "
        f"functions for huge values; {then}"
    )
