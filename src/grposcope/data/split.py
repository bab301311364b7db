"""Held-out evaluation split: seeded, stratified by `level`, disjoint by prompt text.

The eval side holds distinct prompts, one copy each, and no copy of an eval prompt stays in train (a
generator may repeat itself, and a file may hold duplicates; further copies are dropped). Each level gets
an eval share proportional to its size, so levels in equal shares stay in equal shares on both sides.
"""

from __future__ import annotations

import random
from typing import Any

from ..errors import InputTypeError
from .chat import prompt_identity


def resolve_eval_size(eval_size: int | float, total: int) -> int:
    """An eval size given as a count (int) or as a fraction of `total` (float in [0, 1))."""
    if isinstance(eval_size, bool) or not isinstance(eval_size, (int, float)):
        raise InputTypeError(
            f"eval_size must be an int (a count) or a float in [0, 1) (a fraction), got {eval_size!r}"
        )
    if isinstance(eval_size, float):
        if not 0.0 <= eval_size < 1.0:
            raise ValueError(f"eval_size={eval_size} as a fraction must be in [0, 1); use an int for a count")
        return int(round(eval_size * total))
    if eval_size < 0:
        raise ValueError(f"eval_size={eval_size} is negative; use 0 for no eval split")
    return eval_size


def split_examples(
    examples: list[dict[str, Any]], eval_size: int, seed: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Splits into (train, eval): `eval_size` distinct eval prompts and every example whose prompt is not
    held out; both keep the input order. Train shrinks by the extra copies of eval prompts, if any; eval
    is smaller only when a level has fewer distinct prompts than its share."""
    if eval_size <= 0:
        return list(examples), []
    strata = _groups_by_level(examples)  # level -> list of groups (index lists sharing one prompt)
    distinct = sum(map(len, strata.values()))
    if eval_size >= distinct:
        raise ValueError(
            f"eval_size={eval_size} leaves no training examples: there are {distinct} distinct prompts in "
            f"{len(examples)} examples; lower eval_size or give more examples"
        )
    sizes = {level: sum(map(len, groups)) for level, groups in strata.items()}  # examples per level
    quotas = _proportional_quotas(sizes, eval_size)
    rng = random.Random(seed)
    first_copies, held_out_all = set(), set()
    for level, groups in strata.items():
        for group in rng.sample(groups, min(quotas[level], len(groups))):
            first_copies.add(group[0])
            held_out_all.update(group)
    train = [ex for i, ex in enumerate(examples) if i not in held_out_all]
    held_out = [ex for i, ex in enumerate(examples) if i in first_copies]
    if len(held_out) < eval_size:
        _warn_short_split(eval_size, len(held_out), len(examples), distinct, strata, sizes, quotas)
    return train, held_out


def _warn_short_split(eval_size: int, held: int, total: int, distinct: int, strata: dict[Any, list[list[int]]],
                      sizes: dict[Any, int], quotas: dict[Any, int]) -> None:
    """The held-out split is smaller than asked: a level (a file's copies of one prompt, say) has fewer
    distinct prompts than its share. Said, since held-out figures from 2 prompts are not those from 5."""
    import warnings

    def prompts(n: int) -> str:
        return f"{n} distinct prompt{'s' if n != 1 else ''}"

    short = [f"level {level} ({sizes[level]} examples) has {prompts(len(groups))} for its share of {quotas[level]}"
             for level, groups in strata.items() if len(groups) < quotas[level]]
    warnings.warn(f"eval_size={eval_size}, but the held-out split holds {held} prompts: the {total} examples hold "
                  f"{prompts(distinct)}, and {', '.join(short)} (each level keeps its share, and a prompt is held "
                  "out once); give more distinct prompts, or lower eval_size", UserWarning, stacklevel=3)


def _groups_by_level(examples: list[dict[str, Any]]) -> dict[Any, list[list[int]]]:
    # A prompt's group lives in the level of its first occurrence, so duplicates never straddle strata.
    group_of: dict[str, list[int]] = {}
    strata: dict[Any, list[list[int]]] = {}
    for i, example in enumerate(examples):
        key = prompt_identity(example["prompt"])
        if key in group_of:
            group_of[key].append(i)
            continue
        group_of[key] = [i]
        strata.setdefault(example.get("level"), []).append(group_of[key])
    return strata


def _proportional_quotas(sizes: dict[Any, int], total: int) -> dict[Any, int]:
    """Largest-remainder apportionment of `total` over strata of the given sizes (ties: first stratum)."""
    n = sum(sizes.values())
    exact = {k: total * size / n for k, size in sizes.items()}
    quotas = {k: int(v) for k, v in exact.items()}
    by_remainder = sorted(sizes, key=lambda k: quotas[k] - exact[k])  # stable: equal remainders keep order
    for k in by_remainder[: total - sum(quotas.values())]:
        quotas[k] += 1
    return quotas
