"""Tasks: where training prompts come from, behind one front door.

    data = load_task("arithmetic:easy,medium", size=600, seed=0)   # built-in generator, two levels
    data = load_task("rg:leg_counting", size=500)                    # any reasoning-gym dataset
    data = load_task("math500.jsonl")                                # a MATH-500-style file
    data = load_task(hf_dataset)  /  load_task([{"prompt": ..., "answer": ...}, ...])
    data.train, data.eval, data.reward_funcs

Task builders share one signature, `build(size, seed, variant=None, **params) -> (examples,
reward_funcs)`, where `variant` is the text after the colon of a spec ("easy,medium" in
"arithmetic:easy,medium") and `reward_funcs` are the rewards the task recommends (names or callables,
or None). Register a new one with `@TASKS.register("name")`.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Any

from ..core.registry import Registry
from ..errors import InputTypeError
from .arithmetic import build_arithmetic
from .gym import build_reasoning_gym
from .jsonl import folder_given, read_math_jsonl
from .split import resolve_eval_size, split_examples
from .validation import validate_examples

Examples = list[dict[str, Any]]
TASKS: Registry[tuple[Examples, "list[Any] | None"]] = Registry("task")
TASKS.register("arithmetic")(build_arithmetic)
TASKS.register("rg")(build_reasoning_gym)

GENERATED_SIZE = 1000  # train examples a generator makes when no size is given
GENERATED_EVAL_SIZE = 50  # held-out prompts of a generator
FILE_EVAL_FRACTION = 0.1  # held-out share of a file or dataset ...
FILE_EVAL_CAP = 500  # ... at most this many examples


@dataclass
class TaskData:
    """Train and held-out eval examples, and the rewards the task recommends (None: the caller picks)."""

    train: list[dict[str, Any]]
    eval: list[dict[str, Any]]
    reward_funcs: list[Any] | None = None
    name: str = ""
    info: dict[str, Any] = field(default_factory=dict)


def load_task(
    spec: Any, *, size: int | None = None, seed: int = 0, eval_size: int | float | None = None, **params: Any
) -> TaskData:
    """Builds train and eval examples from a task name, a .jsonl path, an HF Dataset or a list of dicts.

    size: train examples (generators: default 1000; files and datasets: all, or a seeded random subset).
    eval_size: held-out examples, a count or a fraction (default 50 for generators, 0.1 of the data
        capped at 500 for files and datasets); eval prompts never appear in train.
    params: passed to the task builder (e.g. `levels=` for arithmetic, a generator's config for rg,
        `instruction=` for a .jsonl file).
    """
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise ValueError(f"size={size!r} must be a positive int (train examples), or None for the default")
    if is_file_spec(spec):
        unused = {k: v for k, v in params.items() if k != "instruction"}
        _reject_params(unused, "a .jsonl file (it takes instruction=)")
        examples = read_math_jsonl(spec, **params)
        return _from_examples(examples, os.fspath(spec), size, seed, eval_size)
    if isinstance(spec, str):
        return _from_builder(spec, size, seed, eval_size, params)
    _reject_params(params, "a dataset or a list of examples")
    if hasattr(spec, "column_names") and hasattr(spec, "to_list"):  # an HF Dataset (duck-typed: no import)
        return _from_examples(spec.to_list(), "dataset", size, seed, eval_size)
    if isinstance(spec, (list, tuple)):
        return _from_examples(list(spec), "list", size, seed, eval_size)
    if isinstance(getattr(spec, "column_names", None), dict):  # a DatasetDict: several splits
        splits = list(spec.column_names)
        raise InputTypeError(
            f"got a {type(spec).__name__} with splits {splits}; pick one, e.g. data[{splits[0]!r}]"
        )
    raise InputTypeError(
        f"cannot load a task from a {type(spec).__name__}; give a task name ({', '.join(TASKS.names())}, "
        "e.g. 'arithmetic' or 'rg:leg_counting'), a .jsonl path, an HF Dataset or a list of dicts"
    )


def check_task_spec(spec: str) -> None:
    """Raises, listing the known tasks, when `spec` (not a file) names no registered task."""
    try:
        TASKS.get(spec.partition(":")[0])
    except ValueError as err:
        if os.path.isdir(spec):  # a name without a slash that is a folder here: said as one
            raise ValueError(folder_given(spec)) from None
        # "known: arithmetic, rg" alone does not say that rg needs a dataset name after a colon
        raise ValueError(
            f"{err} (written '<task>' or '<task>:<variant>', e.g. 'arithmetic:easy' or 'rg:leg_counting'); "
            "or give the path of a .jsonl file"
        ) from None


def _from_builder(spec: str, size: int | None, seed: int, eval_size: Any, params: dict[str, Any]) -> TaskData:
    check_task_spec(spec)
    name, _, variant = spec.partition(":")
    train_size = GENERATED_SIZE if size is None else size
    n_eval = resolve_eval_size(GENERATED_EVAL_SIZE if eval_size is None else eval_size, train_size)
    if variant:
        params = {"variant": variant, **params}
    examples, reward_funcs = TASKS.make(name, size=train_size + n_eval, seed=seed, **params)
    examples = validate_examples(examples, source=f"task {spec!r}")
    train, held_out = split_examples(examples, n_eval, seed)
    info = {"eval_size": n_eval, "seed": seed}
    return TaskData(_repeat_to(train, train_size), held_out, reward_funcs, spec, info)


def _from_examples(
    examples: list[Any], source: str, size: int | None, seed: int, eval_size: int | float | None
) -> TaskData:
    examples = validate_examples(examples, source=source)
    if eval_size is None:
        n_eval = min(FILE_EVAL_CAP, int(round(FILE_EVAL_FRACTION * len(examples))))
    else:
        n_eval = resolve_eval_size(eval_size, len(examples))
    train, held_out = split_examples(examples, n_eval, seed)
    if size is not None and size < len(train):
        # a seeded subset that keeps the original order, so a smaller run is a sample of the bigger one
        keep = set(random.Random(seed).sample(range(len(train)), size))
        train = [ex for i, ex in enumerate(train) if i in keep]
    return TaskData(train, held_out, None, source, {"eval_size": n_eval, "seed": seed})


def _repeat_to(train: Examples, size: int) -> Examples:
    # A generator whose level has fewer distinct problems than asked for repeats problems; the split then
    # drops the repeats of held-out prompts, and train is topped up from its own (shuffled) start.
    while len(train) < size:
        train = train + train[: size - len(train)]
    return train[:size]


def is_file_spec(spec: Any) -> bool:
    """True when a task spec names a file (a path or a .jsonl name) rather than a registered task."""
    if isinstance(spec, os.PathLike):
        return True
    return isinstance(spec, str) and (spec.endswith(".jsonl") or os.sep in spec)


def _reject_params(params: dict[str, Any], what: str) -> None:
    if params:
        raise InputTypeError(
            f"{', '.join(sorted(params))}: not used for {what}; build the examples with the columns you need "
            "instead (only task names take extra parameters)"
        )
