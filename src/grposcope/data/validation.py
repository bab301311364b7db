"""Checks that examples have the shape the trainer and the reward functions rely on.

An example is a dict with a `prompt` (a non-empty string or a non-empty list of chat messages) and any
extra columns, which reach the reward functions as keyword arguments. Nothing in an example is ever
executed: the checks only look at types and emptiness.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InputTypeError

# Columns that usually hold the question under another name: the error suggests the mapping.
_QUESTION_COLUMNS = ("problem", "question", "query", "input", "instruction")


def validate_examples(examples: Sequence[Any], source: str = "dataset") -> list[dict[str, Any]]:
    """Returns the examples as a list of dicts, or raises naming the first problem and its fix.

    `source` names the data in messages (a file path, "dataset", "list").
    """
    if len(examples) == 0:
        raise ValueError(f"{source} is empty; give at least one example with a 'prompt' column")
    checked = []
    for index, example in enumerate(examples):
        if not isinstance(example, Mapping):
            raise InputTypeError(
                f"{source}: example {index} is a {type(example).__name__}, not a dict; every example must "
                "be a dict such as {'prompt': 'What is 2 + 3?', 'answer': '5'}"
            )
        if "prompt" not in example:
            raise ValueError(_missing_prompt_message(example, index, source))
        check_prompt(example["prompt"], where=f"{source}: example {index}")
        checked.append(dict(example))
    return checked


def check_prompt(prompt: Any, where: str = "prompt") -> None:
    """Raises if `prompt` is not a non-empty string or a non-empty list of well-formed chat messages."""
    if isinstance(prompt, str):
        if not prompt.strip():
            raise ValueError(f"{where} has an empty prompt; drop the example or give it the question text")
        return
    if not isinstance(prompt, list):
        raise InputTypeError(
            f"{where}: 'prompt' is a {type(prompt).__name__}; it must be a string or a list of chat messages "
            "like [{'role': 'user', 'content': 'What is 2 + 3?'}]"
        )
    if not prompt:
        raise ValueError(f"{where} has an empty message list as prompt; add at least one user message")
    for position, message in enumerate(prompt):
        _check_message(message, f"{where}, message {position}")


def _check_message(message: Any, where: str) -> None:
    if not isinstance(message, Mapping):
        raise InputTypeError(
            f"{where} is a {type(message).__name__}; each message must be a dict "
            "{'role': 'user', 'content': '...'}"
        )
    role, content = message.get("role"), message.get("content")
    if not isinstance(role, str) or not role:
        raise ValueError(
            f"{where} has no valid 'role' (got {role!r}); set it to 'system', 'user' or 'assistant'"
        )
    if not isinstance(content, str):
        raise InputTypeError(
            f"{where} has a 'content' of type {type(content).__name__}; "
            "it must be a string (the message text)"
        )
    if not content.strip():
        raise ValueError(f"{where} has empty 'content'; give the message its text or drop the message")


def _missing_prompt_message(example: Mapping[str, Any], index: int, source: str) -> str:
    columns = ", ".join(repr(c) for c in example) or "none"
    message = f"{source}: example {index} has no 'prompt' column (columns found: {columns})"
    alias = next((c for c in _QUESTION_COLUMNS if c in example), None)
    if alias is None:
        return message + "; add a 'prompt' column holding the question (a string or chat messages)"
    return (
        f"{message}; the question seems to be in {alias!r}: rename it, e.g. "
        f"`dataset.rename_column({alias!r}, 'prompt')` for an HF Dataset or "
        f"`[{{**ex, 'prompt': ex[{alias!r}]}} for ex in rows]` for a list"
        + ("; a MATH-500-style file can also be loaded by its .jsonl path" if alias == "problem" else "")
    )
