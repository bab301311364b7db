"""What each GRPOConfig option may hold, checked in GRPOConfig.__post_init__ (trainer/config.py).

First every option's type, and every number finite (`check_types`). Then the one table of ranges
(components/ranges.py, which the TRL subclass, verl and `grposcope diagnose` read too). Then the options whose
valid values are no interval (an empty path, an empty list) or depend on another option.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ..components.ranges import RANGES, not_finite, quoted
from ..errors import InputTypeError


def check_values(config: Any) -> None:
    """Raises naming the first option that holds a value it cannot take, the value and the fix."""
    check_types(config)
    for name, rule in RANGES.items():
        if hasattr(config, name) and not rule.holds(getattr(config, name)):
            raise ValueError(rule.message(name, getattr(config, name)))
    if not 0 <= config.overlong_buffer_len <= config.max_completion_length:
        raise ValueError(f"overlong_buffer_len must be in [0, max_completion_length={config.max_completion_length}]"
                         f" (0: off), got {config.overlong_buffer_len}")
    _check_texts_and_lists(config)
    _check_virtual_reward_partial(config)


def _check_texts_and_lists(config: Any) -> None:
    """Paths that are empty, lists that name nothing: each would quietly mean something else."""
    if not config.output_dir.strip():
        raise ValueError(f"output_dir is empty ({config.output_dir!r}), so the run would write into the working "
                         "folder; give a folder, e.g. output/run")
    if not config.model_name_or_path.strip():
        raise ValueError(f"model_name_or_path is empty ({config.model_name_or_path!r}); give a model folder, or "
                         "embedded:smollm2-135m-instruct (the default)")
    if isinstance(config.resume_from_checkpoint, str) and not config.resume_from_checkpoint.strip():
        raise ValueError("resume_from_checkpoint is an empty path; give a checkpoint folder, True (--resume) for "
                         "the newest one in output_dir, or None to start a new run")
    empty = {"lora_target_modules": "module names, e.g. ['q_proj', 'v_proj'], or None for all linear layers",
             "reward_funcs": "reward names, e.g. ['accuracy_reward'], or None for the task's",
             "reward_weights": "one weight per reward function, or None for all 1"}
    for name, fix in empty.items():
        if getattr(config, name) is not None and len(getattr(config, name)) == 0:
            raise ValueError(f"{name} is an empty list; give {fix}")
    for i, weight in enumerate(config.reward_weights or []):
        if not math.isfinite(weight):
            raise ValueError(f"reward_weights[{i}] is {weight}; give finite numbers, one per reward function")
    if config.reward_weights is not None and config.reward_funcs is not None:
        if len(config.reward_weights) != len(config.reward_funcs):
            raise ValueError(f"{len(config.reward_weights)} reward_weights for {len(config.reward_funcs)} "
                             "reward_funcs; give one weight per reward function")


def _check_virtual_reward_partial(config: Any) -> None:
    """Under virtual_sample_strategy="fixed" every virtual reward is virtual_reward_partial: it must lie inside
    virtual_reward_range, above an all-wrong group's reward and below an all-correct one's."""
    if getattr(config, "virtual_sample_strategy", None) != "fixed":
        return
    low, high = config.virtual_reward_range
    if not low < config.virtual_reward_partial < high:
        raise ValueError(f"virtual_reward_partial must be inside virtual_reward_range ({low:g}, {high:g}) under "
                         f"virtual_sample_strategy='fixed', got {config.virtual_reward_partial}; e.g. "
                         f"{(low + high) / 2:g}, midway")


def naming_the_option(option: str, check: Any, *args: Any) -> None:
    """Runs `check(*args)`; its ValueError (an unknown name, say) is raised again starting with `option:`."""
    try:
        check(*args)
    except ValueError as err:
        raise ValueError(f"{option}: {err}") from None


def check_types(config: Any) -> None:
    """Each option holds a value of its declared type (a YAML file can hold anything: `learning_rate: [1, 2]`),
    and every number is finite: NaN or inf would surface steps later, after the model loaded, as a stranger
    error."""
    import typing

    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        value, hint = getattr(config, f.name), hints.get(f.name, Any)
        if not _is_a(value, hint):
            raise InputTypeError(f"option {f.name}: got {quoted(value)} ({type(value).__name__}); it takes "
                                 f"{type_name(hint)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(not_finite(f.name, value))


def _is_a(value: Any, hint: Any) -> bool:
    """Whether `value` fits type `hint` (Any, unions, list/tuple/dict of items); an int is a float, a bool is
    neither an int nor a float (YAML's `yes`)."""
    import types
    import typing

    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_a(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin in (list, tuple):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis] or [Any]
        return isinstance(value, (list, tuple)) and all(_is_a(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict)
    return isinstance(value, origin or hint)


def type_name(hint: Any) -> str:
    """`float`, `int or None`, `a list of str`: the type as the error message says it."""
    import types
    import typing

    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return "None"
    if origin in (list, tuple):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis] or [Any]
        return f"a list of {type_name(args[0])}"
    if origin is dict:
        return "a mapping"
    return getattr(hint, "__name__", str(hint))


def check_choice(name: str, value: Any, known) -> None:
    if value not in known:
        raise ValueError(f"unknown {name} {quoted(value)}; known: {', '.join(known)}")
