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
import re
from dataclasses import dataclass
from typing import Any

from .chat import completion_text

SYSTEM_PROMPT = "You are a calculator. Reply with the equation and its result."
# Worked examples shown as earlier chat turns. The reply restates the equation before the result: this
# model computes "3 + 4 = 7" far more often when the equation sits right before the result than when it
# must answer a bare number (measured: 0.8 vs 0.1 probability of a correct one-digit sum).
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


LEVELS: dict[str, Level] = {
    "easy": Level(("+",), (1, 14), (1, 9)),
    "medium": Level(("+",), (10, 99), (1, 9)),
    "hard": Level(("+",), (100, 999), (100, 999)),
}
DEFAULT_LEVELS = ("easy", "medium", "hard")

Problem = tuple[str, int, int]  # (op, a, b)


def build_arithmetic(
    size: int, seed: int, variant: str | None = None, *, levels: str | tuple[str, ...] | list[str] = DEFAULT_LEVELS
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
    return examples, [last_number_reward]


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
        problems += _distinct_problems(level, min(count - len(problems), level.capacity()), rng)
    return problems


def _distinct_problems(level: Level, count: int, rng: random.Random) -> list[Problem]:
    if count > level.capacity() // 2:  # dense: enumerate, then sample
        every = [(op, a, b) for op in level.ops for a in range(level.first[0], level.first[1] + 1)
                 for b in range(level.second[0], level.second[1] + 1)]
        return rng.sample(every, count)
    seen: set[Problem] = set()
    problems = []  # in draw order: iterating `seen` would follow string hashing, which varies per process
    while len(problems) < count:
        problem = (rng.choice(level.ops), rng.randint(*level.first), rng.randint(*level.second))
        if problem not in seen:
            seen.add(problem)
            problems.append(problem)
    return problems


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


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def last_number(text: str) -> str | None:
    """The last number in `text` ("1,234" reads as 1234), or None when there is none."""
    found = _NUMBER.findall(text.replace(",", ""))
    return found[-1] if found else None


def last_number_reward(prompts: list[Any], completions: list[Any], answer: list[str], **_: Any) -> list[float]:
    """1.0 when the last number of the reply equals `answer` (as numbers: "7.0" matches "7"), else 0.0."""
    return [_same_number(last_number(completion_text(c)), str(a)) for c, a in zip(completions, answer)]


def _same_number(found: str | None, expected: str) -> float:
    if found is None:
        return 0.0
    try:
        return float(float(found) == float(expected))
    except ValueError:  # a non-numeric answer column: compare the text
        return float(found == expected.strip())
