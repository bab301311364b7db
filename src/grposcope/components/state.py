"""The state of a run's stateful components in a checkpoint, under the keys every host keeps them (the own
trainer's trainer_state.pt, the TRL integration's grposcope_state.pt)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import CheckpointError


def component_state(*, estimator, sampler, monitor) -> dict[str, Any]:
    """The advantage estimator's (AVSPO's threshold), the sampler's and the collapse monitor's state."""
    return {"estimator": estimator.state_dict(), "sampler": sampler.state_dict(), "monitor": monitor.state_dict()}


def load_component_state(state: dict[str, Any], *, estimator, sampler, monitor) -> None:
    """Puts `component_state`'s dict (or a checkpoint's, which holds it) back into the live components."""
    estimator.load_state_dict(state["estimator"])
    sampler.load_state_dict(state["sampler"])
    monitor.load_state_dict(state["monitor"])


def read_state_file(path: str | Path, fix: str) -> Any:
    """A torch file of a checkpoint (a state dict: tensors, numbers, strings, containers), read with
    `weights_only=True`, which refuses a pickled object instead of running it. A file it refuses, or cannot read,
    is named as damaged in one line ending in `fix` (never torch's advice to retry with weights_only=False, which
    would run the file's code)."""
    import pickle

    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        first = str(err).splitlines()[0] if str(err) else ""
        raise CheckpointError(
            f"{path} is damaged or not to be trusted: it holds pickled Python objects besides tensors "
            f"({first[:120]}), which grposcope never writes; nothing in it was run. {fix}") from None
    except (RuntimeError, EOFError, ValueError, KeyError) as err:  # truncated, or not a torch file at all
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CheckpointError(f"{path} is damaged: torch cannot read it ({first[:160]}). {fix}") from None
