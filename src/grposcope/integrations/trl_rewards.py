"""The TRL integration's reward functions: what `reward_funcs` may name, and the check of every call.

TRL's `GRPOTrainer` takes a string in `reward_funcs` as the hub id of a reward model and downloads it, and
calls each function bare: one that raises, or returns `None` instead of a list, ends in a traceback that names
neither the function nor the sample. Here, before TRL sees them:

- a string is a grposcope reward's registered name ("accuracy_reward": that function), or the folder of a
  reward model saved with `save_pretrained` (handed to TRL, which loads it from the disk); anything else is
  refused, so no hub is ever asked;
- a function is wrapped (`CheckedReward`: same name, so TRL's metric names do not change; picklable, as
  TRL's async rollout worker needs) so that a failing call raises grposcope's `RewardFunctionError`, worded
  as in grposcope's own trainer (`grposcope.rewards.scorer`): the function, the problem, the sample's prompt
  and completion, the fix. The sample a raising call failed on is found by calling the function again on one
  sample at a time. A list holding `None` stays TRL's "does not apply"; a bare `None`, a list of another
  length, a value that is no number, NaN or inf are refused, as the own trainer refuses them.
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Any, Callable

from torch import nn

from ..errors import InputTypeError
from ..rewards.builtin import REWARDS
from ..rewards.scorer import (
    VALUE_FIX,
    RewardFunctionError,
    _as_value,
    _clip,
    _exception_fix,
    failure_message,
    output_shape_problem,
)

# TRL's keywords that are not one entry per sample (rewards/calling.py's RESERVED, less the two lists)
_WHOLE_BATCH = ("trainer_state", "log_extra", "log_metric")


def prepare_reward_funcs(reward_funcs: Any) -> Any:
    """`reward_funcs` as TRL takes them, every string resolved or refused and every function wrapped."""
    if reward_funcs is None:  # TRL: the reward comes from an environment_factory
        return None
    items = reward_funcs if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
    return [_prepare(item) for item in items]


def _prepare(item: Any) -> Any:
    if isinstance(item, str):
        return _resolve_name(item)
    if isinstance(item, nn.Module) or isinstance(item, CheckedReward):  # a reward model, or wrapped already
        return item
    if callable(item):
        return CheckedAsyncReward(item) if _is_async(item) else CheckedReward(item)
    raise InputTypeError(
        f"reward_funcs entries must be functions, registered names or reward model folders, got "
        f"{type(item).__name__} {_clip(repr(item), 60)}; pass e.g. 'accuracy_reward' or a function "
        "f(completions, **kwargs)"
    )


def _resolve_name(name: str) -> Any:
    """A registered reward's function, or a reward model folder (kept as its path for TRL to load)."""
    if name in REWARDS.names():
        return CheckedReward(REWARDS.get(name))
    folder = Path(name).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(
                f"reward_funcs: {name!r} is a folder without config.json, so it holds no reward model; save one "
                "there with model.save_pretrained(path) and tokenizer.save_pretrained(path), or pass a function"
            )
        return name
    raise ValueError(
        f"reward_funcs: {name!r} is neither a registered grposcope reward ({', '.join(REWARDS.names())}) nor "
        "an existing folder holding a reward model; TRL would take it as a model hub id and download it, which "
        "grposcope never does. Pass a reward function, one of those names, or the folder of a reward model "
        "saved with save_pretrained"
    )


def _is_async(func: Callable) -> bool:
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None))


def _name_of(func: Callable) -> str:
    """TRL's name for a function (`get_callable_name`): metrics are logged under it."""
    while isinstance(func, functools.partial):
        func = func.func
    return getattr(func, "__name__", type(func).__name__)


def _discard(*args: Any, **kwargs: Any) -> None:
    """log_extra / log_metric of the one-sample re-calls: diagnostics, not the batch, so nothing is logged."""


class CheckedReward:
    """A reward function that, called as TRL calls it (by keyword), fails with its name and the sample."""

    def __init__(self, func: Callable) -> None:
        self.func = func
        self.__name__ = _name_of(func)

    def __repr__(self) -> str:
        return f"CheckedReward({self.func!r})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            output = self.func(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - raised again below, with the function and the sample
            index = None if args else next((i for i, one in self._samples(kwargs) if self._fails(one)), None)
            raise self._raised(err, kwargs, index) from err
        return self.check(output, kwargs)

    def _fails(self, kwargs: dict[str, Any]) -> bool:
        try:
            self.func(**kwargs)
        except Exception:  # noqa: BLE001 - this is the sample we are looking for
            return True
        return False

    def _samples(self, kwargs: dict[str, Any]):
        """(i, keywords of sample i alone) for each sample: every per-sample list cut to its i-th entry."""
        n = len(kwargs.get("completions") or ())
        for i in range(n):
            one = {key: value[i:i + 1] if isinstance(value, (list, tuple)) and len(value) == n
                   and key not in _WHOLE_BATCH else value for key, value in kwargs.items()}
            one.update(log_extra=_discard, log_metric=_discard)
            yield i, one

    def _raised(self, err: Exception, kwargs: dict[str, Any], index: int | None) -> RewardFunctionError:
        return self.error(f"raised {type(err).__name__}: {_clip(str(err))}", _exception_fix(err), kwargs, index)

    def check(self, output: Any, kwargs: dict[str, Any]) -> Any:
        """`output` as returned, when it is one number (or None) per completion; else RewardFunctionError."""
        shape = output_shape_problem(output, len(kwargs.get("completions") or ()))
        if shape is not None:
            raise self.error(*shape, kwargs, None)
        for i, item in enumerate(output):
            _, problem = _as_value(item)
            if problem is not None:
                raise self.error(problem, VALUE_FIX, kwargs, i)
        return output

    def error(self, problem: str, fix: str, kwargs: dict[str, Any], index: int | None) -> RewardFunctionError:
        """grposcope's own trainer's message (`RewardScorer._report`): the problem, the sample shown, the fix."""
        prompts, completions = kwargs.get("prompts") or [], kwargs.get("completions") or []
        message = failure_message(self.__name__, problem, index, prompts, completions) + f"Fix: {fix}."
        return RewardFunctionError(message, function=self.__name__, problem=problem, index=index)


class CheckedAsyncReward(CheckedReward):
    """`CheckedReward` of an async function: TRL awaits it (and runs it beside the other async ones)."""

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            output = await self.func(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - raised again below, with the function and the sample
            index = None
            for i, one in ([] if args else self._samples(kwargs)):
                try:
                    await self.func(**one)
                except Exception:  # noqa: BLE001 - this is the sample we are looking for
                    index = i
                    break
            raise self._raised(err, kwargs, index) from err
        return self.check(output, kwargs)
