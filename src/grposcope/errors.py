"""grposcope's own error classes: a problem with what the user gave, whose message names it and the fix.

The CLI prints these (and ValueError, OSError, and a missing optional dependency, naming the extra that installs
it) as one line and exits 1; any other exception is a bug and keeps its traceback. Each class also derives from
the built-in a caller would catch (TypeError for a value of the wrong kind, RuntimeError for a run that cannot go
on), so that `except TypeError` keeps working.
"""

from __future__ import annotations


class UserError(Exception):
    """Base: what the user gave (options, data, files, reward functions, the run's state) cannot work."""


class InputTypeError(UserError, TypeError):
    """An option or a data field of the wrong kind (a dict where a string belongs, an unknown keyword)."""


class RunError(UserError, RuntimeError):
    """The run cannot go on as configured (a sampler found too few informative groups, a reward function
    failed, a helper process did not start)."""


class NonFiniteError(UserError, FloatingPointError):
    """The updates kept turning NaN or inf (too high a learning rate, huge rewards)."""


class CheckpointError(UserError, ValueError):
    """A checkpoint (or a file in one) that cannot be resumed from; the message says why and what to do."""


class DiskFullError(UserError, OSError):
    """The disk had (or would have had) no room for a checkpoint or the final model. Nothing partial was kept:
    the message names the disk, the space needed and free, the fix, and how to continue the run."""


# The optional dependencies (top-level module -> the extra of pyproject.toml that installs it): a plain
# `pip install grposcope` reads and diagnoses logs; training, the integrations and some readers are extras.
EXTRAS = {
    "torch": "train", "transformers": "train", "accelerate": "train", "safetensors": "train", "gguf": "train",
    "math_verify": "train", "datasets": "train", "pyarrow": "train", "trl": "trl", "peft": "peft",
    "reasoning_gym": "tasks", "tensorboard": "tensorboard", "wandb": "wandb", "google": "wandb",
    "matplotlib": "report", "verl": "verl",
}


def missing_extra(err: BaseException) -> str | None:
    """For an ImportError of an optional dependency: one line naming it and the extra that installs it
    (`needs torch: pip install 'grposcope[train]'`); None for anything else."""
    if not isinstance(err, ImportError):
        return None
    name = (getattr(err, "name", None) or "").split(".")[0]
    if name not in EXTRAS:
        return None
    said = str(err) if not str(err).startswith("No module named") else ""
    if f"grposcope[{EXTRAS[name]}]" in said:  # the raiser named the extra already
        return said
    return (f"{said + '; ' if said else ''}this needs {name}, which a plain install leaves out: "
            f"pip install 'grposcope[{EXTRAS[name]}]'")
