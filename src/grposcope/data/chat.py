"""Prompts and completions as text: chat messages or plain strings.

A prompt is either a string, used as it is, or a list of chat messages `[{"role": "user", "content": ...}]`,
which the tokenizer's chat template turns into text (TRL's convention). A completion is a string or a list
with the assistant's message(s).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InputTypeError
from ..rewards.extract import completion_text  # noqa: F401  (re-exported: one definition)
from .time_limit import TimeLimitExceeded, time_limit

Prompt = str | list[dict[str, str]]
TEMPLATE_SECONDS = 5.0  # one prompt's rendering; a chat template takes well under a millisecond


def is_conversational(example: Mapping[str, Any] | Prompt) -> bool:
    """True when the example's prompt (or the prompt itself) is a list of chat messages."""
    prompt = example.get("prompt") if isinstance(example, Mapping) else example
    return (
        isinstance(prompt, list)
        and len(prompt) > 0
        and all(isinstance(m, Mapping) and "role" in m and "content" in m for m in prompt)
    )


def render_prompt(prompt: Prompt, tokenizer: Any) -> str:
    """The text the model sees: message lists go through the chat template (with the assistant header
    appended, so that generation starts the reply); strings are used as they are."""
    if isinstance(prompt, str):
        return prompt
    if not is_conversational(prompt):
        raise InputTypeError(
            f"a prompt must be a string or a list of {{'role': ..., 'content': ...}} messages, got "
            f"{type(prompt).__name__}: {str(prompt)[:80]!r}; fix the example's 'prompt' column"
        )
    if getattr(tokenizer, "chat_template", "") is None:
        raise ValueError(
            "the tokenizer has no chat template, so chat-message prompts cannot be rendered; set "
            "`tokenizer.chat_template`, use an instruct model's tokenizer, or pass prompts as plain strings"
        )
    try:
        with time_limit(TEMPLATE_SECONDS):  # a template is a program: one that loops for hours is stopped
            return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    except TimeLimitExceeded:
        raise ValueError(f"the tokenizer's chat template took more than {TEMPLATE_SECONDS:g} s to render one "
                         "prompt (a loop that never ends, or nested loops over huge ranges?); it was stopped; fix "
                         f"the template ({_template_source(tokenizer)}) or use another model's tokenizer") from None
    except Exception as err:  # jinja's errors (imported lazily by transformers): a template's, named in one line
        if not type(err).__module__.startswith("jinja2"):
            raise
        raise ValueError(f"the tokenizer's chat template {_template_problem(err)}; fix the template "
                         f"({_template_source(tokenizer)}) or use another model's tokenizer") from None


def _template_problem(err: Exception) -> str:
    kind = type(err).__name__
    detail = " ".join(str(err).split())[:200]
    if kind == "SecurityError":
        return f"was refused by jinja's sandbox ({kind}: {detail}); nothing in it ran"
    if kind == "TemplateSyntaxError":
        return f"has a syntax error ({kind}: {detail}, template line {getattr(err, 'lineno', '?')})"
    return f"failed ({kind}: {detail})"


def _template_source(tokenizer: Any) -> str:
    """Where the template comes from: the model folder's chat_template.jinja or tokenizer_config.json."""
    folder = getattr(tokenizer, "name_or_path", "") or ""
    return f"chat_template.jinja or tokenizer_config.json in {folder}" if folder else "tokenizer.chat_template"


def prompt_identity(prompt: Prompt) -> str:
    """A hashable identity for a prompt, so that a prompt that appears twice counts as one (train/eval
    disjointness is judged on this)."""
    if isinstance(prompt, str):
        return prompt
    return "\x1e".join(f"{m.get('role')}\x1f{m.get('content')}" for m in prompt)
