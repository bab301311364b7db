"""reasoning-gym datasets as tasks: `load_task("rg:leg_counting")`.

reasoning-gym (over a hundred offline procedural generators, each with its own scorer) yields entries
`{"question", "answer", "metadata"}`. Each becomes an example with a chat prompt and the columns
`answer`, `rg_dataset` (the generator's name) and `rg_index` (the entry's index). The reward looks the
entry up by index in the generator it was built from, rather than from a JSON copy in a column, because
some scorers compare metadata that a JSON round trip changes (tuples become lists).

The reply is scored on the text of its last `<answer>...</answer>` pair, the format reasoning-gym's
system prompts ask for; a reply without the tags is scored as a whole, so that a model that answers
bare ("292") is not scored zero for the missing tags.

Some scorers run the reply as code: `eval(answer)` or sympy's `parse_expr(answer)` (which calls `eval`), so a
reply such as `__import__('os').system(...)` would run on this machine (measured with reasoning-gym 0.1.25:
rg:countdown, rg:puzzle24, rg:spiral_matrix, ... all executed it). A policy being trained writes whatever
earns reward, so those scorers only get replies that cannot run code (`safe_for_scorer`); any other reply
scores 0.0 without reaching them. tests/test_security.py fails when a reasoning-gym upgrade adds such a
scorer.
"""

from __future__ import annotations

import ast
import difflib
import re
from typing import Any

from ..errors import InputTypeError
from .chat import completion_text

DEFAULT_SYSTEM_PROMPT = "default"  # a key of reasoning_gym.utils.SYSTEM_PROMPTS, or the text itself

# reasoning-gym generators whose score_answer runs the reply as code (reasoning-gym 0.1.25, found by searching
# every score_answer for eval / exec / parse_expr / sympify; number_sorting evals only its own answer).
EVAL_SCORERS = frozenset({"binary_matrix", "n_queens", "spiral_matrix", "string_insertion"})  # eval(answer)
SYMPY_SCORERS = frozenset(  # sympy.parse_expr(answer): tokens rewritten, then eval
    {"countdown", "intermediate_integration", "polynomial_multiplication", "puzzle24", "simple_integration"}
)
# What the sympy scorers' replies need: numbers, symbols, arithmetic, brackets, `!`, and these functions.
# `Integral` is left out on purpose: `Integral(<integrand>, x) + C` differentiates back to the integrand, so
# it would score 1.0 on every integration task without integrating (some of reasoning-gym's own reference
# answers have that form, where sympy found no closed form; a correct closed form still scores 1.0).
_SYMPY_CHARS = re.compile(r"[0-9A-Za-z\s.+\-*/^()!,]*")
_SYMPY_FUNCTIONS = frozenset(
    "sin cos tan cot sec csc asin acos atan acot sinh cosh tanh asinh acosh atanh exp log ln sqrt Abs abs "
    "sign factorial".split()
)
_SYMPY_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]*|[0-9.]+|\S")  # a name, a number, or one other character
_ATTRIBUTE = re.compile(r"\.\s*[A-Za-z]")  # `.real`, `1..conjugate`
_BEFORE_BRACKET = frozenset("+-*/^(,")  # what may precede a `(` that is not a function call
# eval(reply) in the EVAL_SCORERS is only used to read a Python list: literals and bare names suffice.
_LITERAL_NODES = (ast.Expression, ast.Constant, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Name, ast.Load,
                  ast.UnaryOp, ast.USub, ast.UAdd)


def build_reasoning_gym(
    size: int,
    seed: int,
    variant: str | None = None,
    *,
    system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
    **config: Any,
) -> tuple[list[dict[str, Any]], list[ReasoningGymReward]]:
    """`size` examples of the reasoning-gym generator named `variant` (the spec "rg:<name>"; its config
    fields go in `config`), and the reward that scores them with the generator's own scorer."""
    if not variant:
        raise ValueError(
            "a reasoning-gym task needs a dataset name: use the spec 'rg:<name>', e.g. 'rg:leg_counting'"
        )
    name = variant
    dataset = _create(name, size, seed, config)
    system = _system_text(system_prompt)
    entries, examples = {}, []
    for index in range(size):
        entry = dataset[index]
        entries[index] = entry
        messages = [{"role": "user", "content": str(entry["question"])}]
        if system:
            messages.insert(0, {"role": "system", "content": system})
        answer = entry.get("answer")
        examples.append(
            {
                "prompt": messages,
                "answer": "" if answer is None else str(answer),  # open-ended tasks have no single answer
                "rg_dataset": name,
                "rg_index": index,
            }
        )
    return examples, [ReasoningGymReward(name, dataset, entries)]


class ReasoningGymReward:
    """TRL-style reward `f(prompts, completions, rg_dataset, rg_index, **columns) -> list[float | None]`.

    Rows of another generator get None (TRL's "not applicable"), so several reasoning-gym tasks can be
    mixed with one reward each. A scorer that raises on a malformed reply scores it 0.0: a bad reply
    must not stop a training run.
    """

    def __init__(self, name: str, dataset: Any, entries: dict[int, dict[str, Any]]) -> None:
        self.name = name
        self.dataset = dataset
        self.entries = entries
        self.__name__ = f"rg_{name}"  # TRL logs a reward under its function's __name__

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float | None]:
        names = columns.get("rg_dataset") or [None] * len(completions)
        indices = columns.get("rg_index") or [None] * len(completions)
        return [self.score(c, n, i) for c, n, i in zip(completions, names, indices)]

    def score(self, completion: Any, name: str | None, index: int | None) -> float | None:
        if name != self.name or index is None:
            return None
        from reasoning_gym.utils import extract_answer

        text = completion_text(completion)
        answer = extract_answer(text)
        if answer is None:
            answer = text.strip()
        entry = self.entries.get(int(index))
        if entry is None:  # an index beyond the built examples: the generator rebuilds it from its seed
            entry = self.dataset[int(index)]
        # a composite dataset forwards each entry to the generator it came from
        source = (entry.get("metadata") or {}).get("source_dataset", self.name)
        if not safe_for_scorer(answer, source):
            return 0.0  # it could run code in the scorer: never handed over
        try:
            return float(self.dataset.score_answer(answer, entry))
        except Exception:  # noqa: BLE001 - scorers parse free text and some raise on odd replies
            return 0.0


def safe_for_scorer(answer: str, dataset_name: str) -> bool:
    """False when the scorer of `dataset_name` could run `answer` as code (see the module docstring).

    eval scorers: what eval runs is what `ast.parse` reads (after eval's own stripping of leading spaces and
    tabs), so a reply that does not parse cannot run, and one that parses must hold only literals and bare
    names (a list such as `[1, 2]`, a word): no call, attribute, subscript, operator or assignment.
    sympy scorers: parse_expr rewrites tokens before its eval (`3!` -> factorial(3)), so the text itself is
    checked: numbers, letters, `+-*/^().,!` and spaces only (no quotes, `_`, `[`, `=`, `:`), no attribute
    (`.name`), and a `(` may follow only an operator, `(`, `,`, the start, or a known math function.
    """
    if dataset_name in EVAL_SCORERS:
        try:
            tree = ast.parse(answer.lstrip(" \t"), mode="eval")
        except (SyntaxError, ValueError):  # eval raises the same: nothing runs
            return True
        return all(isinstance(node, _LITERAL_NODES) for node in ast.walk(tree))
    if dataset_name in SYMPY_SCORERS:
        if not _SYMPY_CHARS.fullmatch(answer) or _ATTRIBUTE.search(answer):
            return False
        previous = ""  # the token before the current one
        for token in _SYMPY_TOKEN.findall(answer):
            # `f(`: only known math functions; `)(`, `!(`, `2(`: a call of something computed
            if token == "(" and previous and previous not in _SYMPY_FUNCTIONS | _BEFORE_BRACKET:
                return False
            previous = token
        return True
    return True


def _create(name: str, size: int, seed: int, config: dict[str, Any]) -> Any:
    import reasoning_gym
    from reasoning_gym.factory import DATASETS

    if name not in DATASETS:
        close = difflib.get_close_matches(name, list(DATASETS), n=5, cutoff=0.5)
        shown = close or sorted(DATASETS)[:8]
        hint = f"{'close' if close else 'some'} names: {', '.join(shown)}"
        raise ValueError(
            f"unknown reasoning-gym dataset {name!r}; {hint} ({len(DATASETS)} in all: "
            "`sorted(reasoning_gym.factory.DATASETS)`); use the spec 'rg:<name>'"
        )
    try:
        return reasoning_gym.create_dataset(name, size=size, seed=seed, **config)
    except TypeError as err:
        fields = ", ".join(f for f in DATASETS[name][1].__dataclass_fields__ if f not in ("size", "seed"))
        raise InputTypeError(f"reasoning-gym dataset {name!r}: {err}; its config fields are: {fields}") from None


def _system_text(system_prompt: str | None) -> str | None:
    if not system_prompt:
        return None
    from reasoning_gym.utils import SYSTEM_PROMPTS

    return SYSTEM_PROMPTS.get(system_prompt, system_prompt)
