"""How `RewardScorer` calls one reward function: its keyword arguments, its time bound, and what it logs.

Notation: N samples (completions) in the batch.

Call convention (TRL 1.16's, `GRPOTrainer._calculate_rewards`): every function is called by keyword only,

    f(prompts=[...], completions=[...], **columns,
      trainer_state=state, log_extra=log_extra, log_metric=log_metric)

so a function takes what it needs by name and ends its signature with `**kwargs`: TRL's `def acc(completions,
solution, **kwargs)` runs unchanged. `columns` are the batch's other columns, each a list of N entries,
`completion_ids` among them (see `grposcope.rewards.inputs`). `trainer_state` is what the caller gave
`RewardScorer.score`: the trainer's state (`global_step`, `max_steps`, `epoch`), or None outside training,
e.g. in evaluation. `log_extra(column, values)` logs N values, one per sample, and `log_metric(name, value)`
one number for the batch. The keywords in `RESERVED` are the scorer's own, so no column may take their names.

Time bounds, and how they nest:
- Each call of one reward function on one batch runs in a daemon worker thread that the scorer joins with
  `reward_timeout`. A thread cannot be killed, so a call that overruns is abandoned (it finishes, or not, in
  the background; being a daemon it does not keep the interpreter alive) and reported. Threads are used
  rather than SIGALRM because an alarm only works in the main thread and a second alarm set inside the reward
  function (math-verify sets one per parse) would silently replace the scorer's.
- `box_accuracy_reward` bounds each sample itself, in a worker process it kills on overrun (see
  `grposcope.rewards.verifier`), which works from any thread, so the two bounds never interfere.
- `reward_timeout=None` calls the function in the calling thread without a bound: the escape hatch for a
  custom function that relies on `signal.alarm` (e.g. math-verify with its default timeouts).
"""

from __future__ import annotations

import numbers
import reprlib
import threading
from dataclasses import dataclass
from typing import Any, Callable

# The keywords the scorer passes itself: TRL 1.16's set, but for `completion_ids`, which is a column here.
RESERVED = ("prompts", "completions", "trainer_state", "log_extra", "log_metric")


class CallTimeout(Exception):
    """The call did not return within the time bound (it may still be running in its thread)."""


class CallLog:
    """What one call of one reward function logged through `log_extra` and `log_metric`.

    A new one for every call: a call abandoned on overrun, or a diagnostic re-call, then writes to a log that
    nobody reads, and can never change a result already returned.
    """

    def __init__(self, function: str, n: int) -> None:
        self.function, self.n = function, n
        self.metrics: dict[str, list[float]] = {}
        self.columns: dict[str, list] = {}
        self.misuse: Exception | None = None

    def log_extra(self, column: str, values: list) -> None:
        sized = hasattr(values, "__len__") and not isinstance(values, (str, bytes, dict))
        if not sized or len(values) != self.n:
            given = f"{len(values)} values" if sized else f"a {type(values).__name__}"
            self._refuse(ValueError(
                f"reward function {self.function!r} logged column {column!r} with {given} for a batch of "
                f"{self.n} samples; log_extra takes a list of one value per sample, in the batch's order"
            ))
        self.columns[column] = list(values)

    def log_metric(self, name: str, value: float) -> None:
        scalar = getattr(value, "ndim", None) == 0 and hasattr(value, "item")  # a 0-d tensor or numpy array
        if not isinstance(value, numbers.Real) and not scalar:
            self._refuse(TypeError(
                f"reward function {self.function!r} logged metric {name!r} with {type(value).__name__} "
                f"{reprlib.repr(value)}; log_metric takes one number for the batch"
            ))
        self.metrics.setdefault(name, []).append(float(value))

    def _refuse(self, error: Exception) -> None:
        # Raised at the function's own line, and kept: the scorer raises it again after the call, in case the
        # function caught it.
        self.misuse = self.misuse or error
        raise error

    def raise_misuse(self) -> None:
        if self.misuse is not None:
            raise self.misuse


@dataclass(frozen=True)
class Batch:
    """The inputs of one `score` call; `keywords` is the one place a reward function's arguments are built."""

    prompts: list
    completions: list
    columns: dict[str, list]
    trainer_state: Any

    def __len__(self) -> int:
        return len(self.completions)

    def sample(self, i: int) -> Batch:
        """Sample `i` alone, as a batch of one (to find the sample a call failed on)."""
        columns = {key: values[i : i + 1] for key, values in self.columns.items()}
        return Batch([self.prompts[i]], [self.completions[i]], columns, self.trainer_state)

    def keywords(self, log: CallLog) -> dict[str, Any]:
        # By keyword only, as TRL 1.16 calls them: `def acc(completions, solution, **kwargs)` works, which a
        # positional (prompts, completions) call breaks with "got multiple values for argument".
        return {
            "prompts": list(self.prompts), "completions": list(self.completions), **self.columns,
            "trainer_state": self.trainer_state, "log_extra": log.log_extra, "log_metric": log.log_metric,
        }


def call_bounded(func: Callable, timeout: float | None, kwargs: dict, name: str = "reward") -> Any:
    """`func(**kwargs)` in a daemon thread, waiting at most `timeout` s (None: in this thread)."""
    if timeout is None:
        return func(**kwargs)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = func(**kwargs)
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread below
            box["error"] = err

    thread = threading.Thread(target=target, daemon=True, name=f"grposcope-reward-{name}")
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise CallTimeout
    if "error" in box:
        raise box["error"]
    return box["value"]
