"""The built-in arithmetic task: seeded integer problems in difficulty levels.

    examples, rewards = build_arithmetic(size=300, seed=0)          # easy, medium, hard in equal shares
    examples[0] == {"prompt": [...chat messages...], "answer": "12", "level": "easy"}

One run mixes levels on purpose: a weak model (SmolLM2-135M-Instruct, the default) solves easy prompts
often, medium ones sometimes and hard ones almost never, so the same run holds groups that can learn and
groups in advantage collapse (every completion scored the same). The operand ranges and prompts were
calibrated with bench/calibrate_arithmetic.py; the measured pass rates are in the usage docs.

The prompt shows worked examples as earlier chat turns ("What is 2 + 3?" -> "2 + 3 = 5") so that the
model replies with one short equation instead of rambling. The reward is "the last number in the reply
equals the answer".
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

SYSTEM_PROMPT = "You are a calculator. Reply with the equation and its result."
# Worked examples shown as earlier chat turns. The reply restates the equation before the result: this
# model computes "3 + 4 = 7" far more often when the equation sits right before the result than when it
# must answer a bare number (measured by teacher forcing on one-digit sums: probability 0.85 of the whole
# correct reply "a + b = c", against 0.1 for a correct bare "c"). Without worked examples it rambles.
SHOTS = ((2, "+", 3), (14, "+", 21), (3, "*", 4))


@dataclass(frozen=True)
class Level:
    """A difficulty level: problems `a op b`, `op` drawn from `ops`, `a` and `b` from inclusive ranges."""

    ops: tuple[str, ...]  # "+", "-" or "*"
    first: tuple[int, int]
    second: tuple[int, int]

    def capacity(self) -> int:
        """The number of distinct problems in the level."""
        return len(self.ops) * (self.first[1] - self.first[0] + 1) * (self.second[1] - self.second[0] + 1)


# Pass rates measured with bench/calibrate_arithmetic.py (temperature 1, full vocabulary, 24 new tokens,
# 12 prompts x 16 samples; seeds 0 / 1): easy 0.71 / 0.73, medium 0.26 / 0.12, hard 0.01 / 0.02. One-digit
# sums alone scored 0.82 and one-digit products 0.97 (too easy for "easy"); two-digit products 0.08, but
# this model solves products by 10, so the hard level uses three-digit sums.
LEVELS: dict[str, Level] = {
    "easy": Level(("+",), (1, 14), (1, 9)),
    "medium": Level(("+",), (10, 99), (1, 9)),
    "hard": Level(("+",), (100, 999), (100, 999)),
}
DEFAULT_LEVELS = ("easy", "medium", "hard")

Problem = tuple[str, int, int]  # (op, a, b)
_SHOWN: frozenset[Problem] = frozenset((op, x, y) for x, op, y in SHOTS)  # its answer is in the prompt


def build_arithmetic(
    size: int,
    seed: int,
    variant: str | None = None,
    *,
    levels: str | tuple[str, ...] | list[str] = DEFAULT_LEVELS,
) -> tuple[list[dict[str, Any]], list[Any]]:
    """`size` problems in equal shares over `levels` (a tuple, or "easy,medium" as in the spec
    "arithmetic:easy,medium"), shuffled with `seed`, and the recommended reward.

    Within a level a problem appears once until every problem of the level has been used; only then
    does the level repeat (the easy level has few distinct problems).
    """
    names = parse_levels(variant if variant else levels)
    rng = random.Random(seed)
    examples: list[dict[str, Any]] = []
    for position, name in enumerate(names):
        count = size // len(names) + (1 if position < size % len(names) else 0)
        examples += [_example(name, problem) for problem in _problems(LEVELS[name], count, rng)]
    rng.shuffle(examples)
    # accuracy_reward reads the last number of "a + b = c" replies (no box, no "answer is" phrase)
    return examples, ["accuracy_reward"]


def parse_levels(levels: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    names = tuple(s.strip() for s in levels.split(",")) if isinstance(levels, str) else tuple(levels)
    unknown = [n for n in names if n not in LEVELS]
    if not names or unknown:
        raise ValueError(
            f"unknown arithmetic level(s) {unknown or names!r}; known: {', '.join(LEVELS)} "
            "(e.g. 'arithmetic:easy,medium' or levels=('easy', 'medium'))"
        )
    if len(set(names)) != len(names):
        raise ValueError(f"arithmetic levels {names!r} repeat a level; name each level once")
    return names


def _problems(level: Level, count: int, rng: random.Random) -> list[Problem]:
    # Distinct problems, drawn without replacement; a level smaller than `count` is cycled through in
    # fresh random orders. Large levels are sampled by rejection rather than enumerated.
    problems: list[Problem] = []
    while len(problems) < count:
        problems += _distinct_problems(level, min(count - len(problems), distinct_problems(level)), rng)
    return problems


def distinct_problems(level: Level) -> int:
    """How many different problems the level can ask (the worked examples are never asked)."""
    return level.capacity() - sum(_in_level(shot, level) for shot in _SHOWN)


def _distinct_problems(level: Level, count: int, rng: random.Random) -> list[Problem]:
    if count > level.capacity() // 2:  # dense: enumerate, then sample
        every = [(op, a, b) for op in level.ops for a in range(level.first[0], level.first[1] + 1)
                 for b in range(level.second[0], level.second[1] + 1)]
        return rng.sample([p for p in every if p not in _SHOWN], count)
    seen: set[Problem] = set(_SHOWN)
    problems: list[Problem] = []  # in draw order: iterating `seen` would follow string hashing, varying per process
    while len(problems) < count:
        problem = (rng.choice(level.ops), rng.randint(*level.first), rng.randint(*level.second))
        if problem not in seen:
            seen.add(problem)
            problems.append(problem)
    return problems


def _in_level(problem: Problem, level: Level) -> bool:
    op, a, b = problem
    in_ranges = level.first[0] <= a <= level.first[1] and level.second[0] <= b <= level.second[1]
    return op in level.ops and in_ranges


def make_prompt(op: str, a: int, b: int) -> list[dict[str, str]]:
    """The chat messages for `a op b`: system instruction, worked examples, then the question."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    for x, shot_op, y in SHOTS:
        messages += [
            {"role": "user", "content": f"What is {x} {shot_op} {y}?"},
            {"role": "assistant", "content": f"{x} {shot_op} {y} = {_apply(shot_op, x, y)}"},
        ]
    messages.append({"role": "user", "content": f"What is {a} {op} {b}?"})
    return messages


def _example(level_name: str, problem: Problem) -> dict[str, Any]:
    op, a, b = problem
    return {"prompt": make_prompt(op, a, b), "answer": str(_apply(op, a, b)), "level": level_name}


def _apply(op: str, a: int, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    raise ValueError(f"unknown operator {op!r}; use '+', '-' or '*'")
