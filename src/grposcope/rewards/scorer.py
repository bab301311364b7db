"""`RewardScorer`: calls the reward functions on a batch, bounds their time, checks what they return, and
combines them into one reward per sample.

Notation: N samples (completions) in the batch, F reward functions.

Call convention (TRL 1.16's): every function is called by keyword only,

    f(prompts=[...], completions=[...], **columns,
      trainer_state=state, log_extra=log_extra, log_metric=log_metric)

so TRL's own reward functions and `def acc(completions, solution, **kwargs)` run unchanged; what they log
with `log_extra` / `log_metric` is returned in `ScoreResult.extra_columns` / `ScoreResult.logged_metrics`.
The details, and the time bound of each call, are in `grposcope.rewards.calling`.

Combination (TRL's rule): `reward[i] = nansum_j(weight[j] * value[i, j])`, where a `None` value is NaN, so a
function that does not apply to a sample is skipped; a sample for which every function returned None gets 0.0
and is counted in `reward/none_frac`.

Errors are never swallowed: a function that raises, overruns, returns a list of the wrong length, or returns
NaN, inf or a non-number stops the run with `RewardFunctionError`, which names the function, the problem and
the sample. With `reward_errors="zero"` the affected samples score 0.0 for that function instead, are counted
in `reward/errors`, and one warning per function goes to the `grposcope` logger.

What a function logs lands in the result when its call returns or raises; a call abandoned on overrun may
still log from its thread, so its logs are dropped, and so are those of the one-sample re-calls that name a
failing sample (diagnostics, not the batch). A `log_extra` with other than N values, or a `log_metric` of a
non-number, is a bug in the function rather than a sample it cannot score: it raises in every mode.
"""

from __future__ import annotations

import logging
import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from grposcope.errors import InputTypeError, RunError  # noqa: F401  (RunError: the base of RewardFunctionError)
from grposcope.rewards.builtin import get_reward
from grposcope.rewards.calling import RESERVED, Batch, CallLog, CallTimeout, call_bounded

logger = logging.getLogger("grposcope")

ERROR_MODES = ("raise", "zero")  # reward_errors
_ZERO_HINT = "or set reward_errors='zero' to score such samples 0 and count them in reward/errors"


class RewardFunctionError(RunError):
    """A reward function failed;`function`, `problem` and `index` (None: the whole call) say how."""

    def __init__(self, message: str, *, function: str, problem: str, index: int | None) -> None:
        super().__init__(message)
        self.function = function
        self.problem = problem
        self.index = index


@dataclass
class ScoreResult:
    rewards: torch.Tensor  # (N,) float32: weighted sum over functions, None skipped
    per_function: torch.Tensor  # (N, F) float32: raw values, NaN where a function returned None
    metrics: dict[str, float]
    logged_metrics: dict[str, list[float]]  # name -> every value given to log_metric, in call order
    extra_columns: dict[str, list]  # column -> N values given to log_extra (a later log of a column wins)
    errors: int = 0  # samples zero-scored by a failing function (reward_errors="zero")


@dataclass
class _Failure:
    """What went wrong in one call: `indices` are the samples it zero-scores in "zero" mode."""

    problem: str
    fix: str
    index: int | None  # the sample shown in the message; None when the call as a whole failed
    indices: list[int]
    cause: BaseException | None = None


def _name_of(func: Callable) -> str:
    name = getattr(func, "__name__", None) or type(func).__name__
    return "reward" if name == "<lambda>" else name


def _unique_names(funcs: Sequence[Callable]) -> list[str]:
    """Function names with `_2`, `_3`, ... appended to repeats, so every metric key is distinct."""
    names: list[str] = []
    for func in funcs:
        base = _name_of(func)
        name, k = base, 2
        while name in names:
            name, k = f"{base}_{k}", k + 1
        names.append(name)
    return names


def _resolve(reward_funcs: Any) -> list[Callable]:
    items = reward_funcs if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
    if not items:
        raise ValueError("reward_funcs is empty; pass a reward function, a registered name, or a list")
    funcs = []
    for item in items:
        if isinstance(item, str):
            funcs.append(get_reward(item))
        elif callable(item):
            funcs.append(item)
        else:
            raise InputTypeError(
                f"reward_funcs entries must be callables or registered names, got {type(item).__name__} "
                f"{item!r}; pass e.g. 'accuracy_reward' or a function f(completions, **kwargs)"
            )
    return funcs


def _weights(reward_weights: Sequence[float] | None, names: list[str]) -> torch.Tensor:
    if reward_weights is None:
        return torch.ones(len(names), dtype=torch.float32)  # (F,)
    weights = [float(w) for w in reward_weights]
    if len(weights) != len(names):
        raise ValueError(
            f"reward_weights has {len(weights)} entries but there are {len(names)} reward functions "
            f"({', '.join(names)}); give one weight per function, or None for all 1.0"
        )
    if not all(math.isfinite(w) for w in weights):
        raise ValueError(f"reward_weights must be finite numbers, got {weights}")
    return torch.tensor(weights, dtype=torch.float32)  # (F,)


FLOAT32_MAX = float(torch.finfo(torch.float32).max)  # rewards leave the scorer as float32


def _as_value(value: Any) -> tuple[float | None, str | None]:
    """(value, None) for a finite number or None; (None, problem) for anything else."""
    if value is None:
        return None, None
    if not isinstance(value, numbers.Real) and getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        value = value.item()  # a 0-d tensor or numpy array
    if not isinstance(value, numbers.Real):
        return None, f"returned a non-number ({type(value).__name__} {_clip(repr(value), 60)})"
    try:
        value = float(value)
    except OverflowError:  # a Python int (or Fraction, Decimal) beyond float64
        # its size from its bits: str() of an int past 4,300 digits raises in Python >= 3.11
        size = f" (about 10^{int(int(value).bit_length() * math.log10(2))})" if isinstance(value, numbers.Integral) \
            else ""
        return None, f"returned a number too large for a float{size}"
    if not math.isfinite(value):
        return None, f"returned {value}"
    if abs(value) > FLOAT32_MAX:  # finite here, inf in the float32 rewards the update reads
        return None, f"returned {value:g}, beyond the float32 range rewards are trained in (|r| <= {FLOAT32_MAX:.2g})"
    return value, None


VALUE_FIX = "return a finite float, or None when the function does not apply to the sample"


def output_shape_problem(raw: Any, n: int) -> tuple[str, str] | None:
    """(problem, fix) when a reward function's output for `n` completions is not one value per completion
    (a bare value or None, text, a mapping, a list of another length); None when it is."""
    if isinstance(raw, (str, bytes, dict)) or not hasattr(raw, "__len__"):
        return f"returned a {type(raw).__name__}, not a list of {n} values", "return one float (or None) per completion"
    if len(raw) != n:
        return (f"returned {len(raw)} values for {n} completions",
                "return one float (or None) per completion, in the batch's order")
    return None


def _clip(text: str, limit: int = 200) -> str:
    """`text` cut to about `limit` characters, keeping head and tail (a completion's answer is at the end)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} [...] {text[-half:]}"


def _show(sample: Any) -> str:
    """A prompt or completion as one line of text: chat messages become `role: content | ...`."""
    if isinstance(sample, str):
        return sample
    if isinstance(sample, (list, tuple)):
        return " | ".join(
            f"{m.get('role', '?')}: {m.get('content', '')}" if isinstance(m, dict) else str(m) for m in sample
        )
    return str(sample)


def _exception_fix(err: BaseException) -> str:
    text = str(err)
    if "signal only works in main thread" in text or "threaded environment" in text:
        return (
            "the function uses signal.alarm (math-verify does with its default timeouts), which works "
            "only in the main thread: pass reward_timeout=None to call it in the calling thread, or use "
            "box_accuracy_reward, whose time bound works from any thread"
        )
    # The two ways a signature can disagree with the keyword call (see grposcope.rewards.calling).
    if isinstance(err, TypeError) and "unexpected keyword argument" in text:
        return (
            "reward functions are called by keyword with prompts, completions, every column of the batch, "
            "and trainer_state, log_extra and log_metric: add **kwargs to its signature"
        )
    if isinstance(err, TypeError) and "missing" in text and "required" in text:
        return (
            f"the function needs an argument that is neither one of {', '.join(RESERVED)} nor a column of "
            "the batch: add that column to the dataset, or give the argument a default"
        )
    return "fix the function so it handles this sample (the traceback above shows where it failed)"


class RewardScorer:
    """Scores a batch with one or more reward functions (see the module docstring for the rules).

    Args:
        reward_funcs: a reward function, a registered name (`"accuracy_reward"`), or a list mixing both.
        reward_weights: one weight per function; None for all 1.0.
        reward_timeout: seconds one function may take on one batch; None calls it in the calling thread
            without a bound (needed by functions that use `signal.alarm`).
        reward_errors: "raise" stops the run on a failing function; "zero" scores its samples 0.0 and counts
            them in `reward/errors`.
    """

    def __init__(
        self,
        reward_funcs: Any,
        reward_weights: Sequence[float] | None = None,
        reward_timeout: float | None = 60.0,
        reward_errors: str = "raise",
    ) -> None:
        if reward_errors not in ERROR_MODES:
            raise ValueError(f"reward_errors must be 'raise' or 'zero', got {reward_errors!r}")
        if reward_timeout is not None and not reward_timeout > 0:
            raise ValueError(f"reward_timeout must be > 0 seconds or None (no bound), got {reward_timeout!r}")
        self.funcs = _resolve(reward_funcs)
        self.names = _unique_names(self.funcs)
        self.weights = _weights(reward_weights, self.names)  # (F,)
        self.reward_timeout = reward_timeout
        self.reward_errors = reward_errors
        self._warned: set[str] = set()

    def score(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        columns: dict[str, list] | None = None,
        trainer_state: Any = None,
    ) -> ScoreResult:
        """Scores N completions; `columns` are the batch's other columns, each a list of N entries.

        `trainer_state` is handed to every function as is (the trainer's state; None outside training).
        Returns a `ScoreResult`; raises `RewardFunctionError` when a function fails and reward_errors="raise".
        """
        columns = dict(columns or {})
        n = _check_batch(prompts, completions, columns)
        batch = Batch(list(prompts), list(completions), columns, trainer_state)
        # float64 while combining, so that metrics read 0.2 rather than 0.2000000029; float32 out.
        per_function = torch.full((n, len(self.funcs)), float("nan"), dtype=torch.float64)  # (N, F)
        errored = torch.zeros(n, dtype=torch.bool)  # (N,)
        logged_metrics: dict[str, list[float]] = {}
        extra_columns: dict[str, list] = {}
        for j, (func, name) in enumerate(zip(self.funcs, self.names)):
            values, failed, log = self._run(func, name, batch)
            per_function[:, j] = torch.tensor(values, dtype=torch.float64)
            errored[failed] = True
            if log is not None:
                for key, logged in log.metrics.items():
                    logged_metrics.setdefault(key, []).extend(logged)
                extra_columns.update(log.columns)
        rewards = combine(per_function, self.weights)  # (N,)
        errors = int(errored.sum())
        return ScoreResult(
            rewards=rewards.float(), per_function=per_function.float(),
            metrics=reward_metrics(per_function, self.names, errors=float(errors)),
            logged_metrics=logged_metrics, extra_columns=extra_columns, errors=errors,
        )

    def _run(self, func, name: str, batch: Batch) -> tuple[list[float], list[int], CallLog | None]:
        """One function on the batch: its values (NaN for None), the samples zero-scored by errors, and what
        it logged (None when the call was abandoned)."""
        n = len(batch)
        failure, raw, log = self._call(func, name, batch)
        shape = output_shape_problem(raw, n) if failure is None else None
        if shape is not None:
            failure = _Failure(*shape, None, list(range(n)))
        if failure is not None:
            self._report(name, failure, batch)
            return [0.0] * n, failure.indices, log
        values, failed = [], []
        for i, item in enumerate(raw):
            value, problem = _as_value(item)
            if problem is not None:
                self._report(name, _Failure(problem, VALUE_FIX, i, [i]), batch)
                value = 0.0
                failed.append(i)
            values.append(float("nan") if value is None else value)
        return values, failed, log

    def _call(self, func, name: str, batch: Batch) -> tuple[_Failure | None, Any, CallLog | None]:
        """Calls `func` on the whole batch within the time bound; a failure when it raises or overruns."""
        n = len(batch)
        log = CallLog(name, n)
        try:
            raw = call_bounded(func, self.reward_timeout, batch.keywords(log), name)
        except CallTimeout:
            problem = (
                f"did not return within reward_timeout={self.reward_timeout} s on a batch of {n} samples "
                "(the call keeps running in a background thread, which cannot be stopped; sample 0 shown)"
            )
            fix = "make the function faster or bound its own work per sample, or raise reward_timeout"
            return _Failure(problem, fix, None, list(range(n))), None, None
        except Exception as err:  # noqa: BLE001 - reported with the sample, never swallowed
            log.raise_misuse()  # a bad log_extra/log_metric is the function's bug, not this sample's
            # Naming the sample costs extra calls: only when the failure is reported, not when it is counted.
            reported = self.reward_errors == "raise" or name not in self._warned
            index = self._locate(func, name, batch) if reported else None
            problem = f"raised {type(err).__name__}: {_clip(str(err))}"
            return _Failure(problem, _exception_fix(err), index, list(range(n)), cause=err), None, log
        log.raise_misuse()
        return None, raw, log

    def _locate(self, func, name: str, batch: Batch) -> int | None:
        """The first sample on which `func` raises when called on it alone (None if none does).

        Calls the function again, one sample at a time, so that the error names the sample that caused it.
        What these re-calls log goes to a log of their own, which is dropped: the batch's call was logged.
        """
        for i in range(len(batch)):
            try:
                call_bounded(func, self.reward_timeout, batch.sample(i).keywords(CallLog(name, 1)), name)
            except CallTimeout:
                return None
            except Exception:  # noqa: BLE001 - this is the sample we are looking for
                return i
        return None

    def _report(self, name: str, failure: _Failure, batch: Batch) -> None:
        """Raises `RewardFunctionError` ("raise"), or warns once per function ("zero")."""
        if self.reward_errors == "zero" and name in self._warned:
            return
        message = failure_message(name, failure.problem, failure.index, batch.prompts, batch.completions)
        if self.reward_errors == "raise":
            message += f"Fix: {failure.fix}; {_ZERO_HINT}."
            error = RewardFunctionError(message, function=name, problem=failure.problem, index=failure.index)
            raise error from failure.cause
        self._warned.add(name)
        logger.warning(
            "%sScored 0.0 for %s and counted in reward/errors (reward_errors='zero'); further failures of "
            "%r are counted without a warning. Fix: %s.",
            message, "that sample" if failure.index is not None and len(failure.indices) == 1 else "the call",
            name, failure.fix,
        )


def failure_message(name: str, problem: str, index: int | None, prompts: Sequence[Any],
                    completions: Sequence[Any]) -> str:
    """What a failing reward function did, and the sample it did it on (the first of the call when the whole
    call failed): the head of a RewardFunctionError's message, before its "Fix: ..." line."""
    shown = 0 if index is None else index
    where = f"sample {shown}" if index is not None else f"the whole call of {len(completions)} samples"
    message = f"reward function {name!r} {problem} [{where}].\n"
    if shown < len(completions):
        prompt = _show(prompts[shown]) if shown < len(prompts) else "?"
        message += (f"  prompt[{shown}]: {_clip(prompt)!r}\n"
                    f"  completion[{shown}]: {_clip(_show(completions[shown]))!r}\n")
    return message


def _check_batch(prompts: Sequence[Any], completions: Sequence[Any], columns: dict[str, list]) -> int:
    n = len(completions)
    if len(prompts) != n:
        raise ValueError(
            f"got {len(prompts)} prompts for {n} completions; repeat each prompt once per completion"
        )
    for key, values in columns.items():
        if key in RESERVED:
            raise ValueError(
                f"column {key!r} clashes with the reward function argument {key!r}, which the scorer passes "
                f"itself (reserved: {', '.join(RESERVED)}); rename the column"
            )
        if len(values) != n:
            raise ValueError(
                f"column {key!r} has {len(values)} entries for {n} completions; every column must be aligned "
                "with the batch (repeat each prompt's entry once per completion)"
            )
    return n


def combine(per_function: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """TRL's rule: the weighted sum of each sample's values, None (NaN) skipped; a sample no function scored
    gets 0.0 (counted in `reward/none_frac`).  per_function (N, F), weights (F,) -> (N,) float64"""
    return torch.nansum(per_function.double() * weights.double().to(per_function.device), dim=1)


def none_frac(per_function: torch.Tensor) -> float:
    """`reward/none_frac`: the share of samples no function scored.  per_function (N, F), NaN for None"""
    none = torch.isnan(per_function).all(dim=1)  # (N,)
    return float(none.float().mean()) if len(none) else 0.0


def reward_metrics(per_function: torch.Tensor, names: Sequence[str], errors: float) -> dict[str, float]:
    """`reward/<name>/mean` (over the samples a function applied to), `reward/errors` (samples zero-scored by
    a failure) and `reward/none_frac` (samples no function applied to).  per_function (N, F), NaN for None"""
    metrics = {f"reward/{name}/mean": _nanmean(per_function[:, j]) for j, name in enumerate(names)}
    metrics["reward/errors"] = errors
    metrics["reward/none_frac"] = none_frac(per_function)
    return metrics


def _nanmean(column: torch.Tensor) -> float:
    """Mean over the entries that are not NaN; NaN when there are none (the function applied to no sample)."""
    return float(column.nanmean()) if column.numel() else float("nan")
