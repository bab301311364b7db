"""The built-in reward functions and their registry.

Every reward function follows TRL's convention, and is called by keyword only (see `grposcope.rewards.calling`):

    f(prompts=..., completions=..., **columns, trainer_state=..., log_extra=..., log_metric=...)
        -> list[float | None]

`prompts` and `completions` are lists of strings or, for chat data, lists of message lists; `columns` holds
every other dataset column as a list aligned with the batch (`answer=[...]`), plus `completion_ids`. A
function takes the columns it needs by name and ignores the rest through `**kwargs`. `None` means "does not
apply to this sample" (here: the sample has no reference answer).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from grposcope.core.registry import Registry
from grposcope.rewards.extract import (
    answers_match,
    completion_text,
    extract_answer,
    has_nonempty_box,
    last_boxed,
)

RewardFunc = Callable[..., "list[float | None]"]

REWARDS: Registry[list] = Registry("reward function")

# Seconds math-verify may spend on one sample before it scores 0.0 (`box_accuracy_reward`).
VERIFY_TIMEOUT_S = 5.0


def get_reward(name: str) -> RewardFunc:
    """The registered reward function `name`; an unknown name fails with the list of known ones."""
    return REWARDS.get(name)


def _column(values: Sequence[Any] | None, n: int) -> list[Any]:
    """A column as a list of `n` entries; a missing column is all None."""
    return [None] * n if values is None else list(values)


def reference_answer(answer: Any, solution: Any) -> str | None:
    """The reference answer of one sample: `answer` if given, else the last box of `solution`, else None."""
    if answer is not None and str(answer).strip():
        return str(answer).strip()
    if solution is not None:
        boxed = last_boxed(str(solution))
        if boxed is not None and boxed.strip():
            return boxed.strip()
    return None


@REWARDS.register("accuracy_reward")
def accuracy_reward(
    prompts: list, completions: list, answer: list | None = None, solution: list | None = None, **kwargs: Any
) -> list[float | None]:
    """1.0 when the completion's answer equals the reference, else 0.0; None when there is no reference.

    The completion's answer is `extract.extract_answer` (last box, else "the answer is X", else the last
    number); the reference is the `answer` column, or the last box of the `solution` column. Both are compared
    numerically when both parse as numbers (relative tolerance 1e-6), else as normalised strings. Needs no
    third-party library and never hangs (every step is linear in the text length).
    """
    n = len(completions)
    rewards: list[float | None] = []
    for completion, ans, sol in zip(completions, _column(answer, n), _column(solution, n)):
        reference = reference_answer(ans, sol)
        if reference is None:
            rewards.append(None)
            continue
        predicted = extract_answer(completion_text(completion))
        rewards.append(1.0 if predicted is not None and answers_match(predicted, reference) else 0.0)
    return rewards


@REWARDS.register("format_reward")
def format_reward(prompts: list, completions: list, **kwargs: Any) -> list[float | None]:
    """1.0 when the completion contains a `\\boxed{...}` (or `\\fbox{...}`) whose braces close and whose
    content is not blank, else 0.0. It rewards the format only, not the answer."""
    return [1.0 if has_nonempty_box(completion_text(c)) else 0.0 for c in completions]


def gold_latex(answer: Any, solution: Any) -> str | None:
    """The gold answer as math-verify parses it: a bare answer is boxed; LaTeX with `$` or a box is kept."""
    if answer is not None and str(answer).strip():
        text = str(answer).strip()
        return text if ("$" in text or "\\boxed" in text) else f"\\boxed{{{text}}}"
    if solution is not None and str(solution).strip():
        boxed = last_boxed(str(solution))
        return f"\\boxed{{{boxed}}}" if boxed is not None and boxed.strip() else str(solution)
    return None


def make_box_accuracy_reward(timeout_s: float = VERIFY_TIMEOUT_S) -> RewardFunc:
    """A `box_accuracy_reward` whose math-verify check of each sample is bounded by `timeout_s` seconds."""
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}; the default is {VERIFY_TIMEOUT_S}")

    def box_accuracy_reward(
        prompts: list,
        completions: list,
        answer: list | None = None,
        solution: list | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        """Strict accuracy: 1.0 when the content of the completion's last `\\boxed{}` is mathematically
        equivalent (math-verify) to the gold answer, 0.0 otherwise or when there is no box; None when the
        sample has no gold answer (`answer` column, or the `solution` column's last box)."""
        from grposcope.rewards.verifier import default_verifier  # starts a process: only when used

        n = len(completions)
        rewards: list[float | None] = [None] * n
        pairs, slots = [], []
        references = zip(_column(answer, n), _column(solution, n))
        for i, (completion, (ans, sol)) in enumerate(zip(completions, references)):
            gold = gold_latex(ans, sol)
            if gold is None:
                continue
            boxed = last_boxed(completion_text(completion))
            if boxed is None or not boxed.strip():
                rewards[i] = 0.0
                continue
            pairs.append((gold, f"\\boxed{{{boxed}}}"))
            slots.append(i)
        if pairs:
            for i, match in zip(slots, default_verifier().verify_many(pairs, timeout_s)):
                rewards[i] = 1.0 if match else 0.0
        return rewards

    return box_accuracy_reward


box_accuracy_reward = REWARDS.register("box_accuracy_reward")(make_box_accuracy_reward())


def make_soft_overlong_penalty(max_completion_length: int, buffer_len: int, factor: float = 1.0) -> RewardFunc:
    """DAPO's soft overlong punishment ("DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    arXiv 2503.14476, Eq. 13) as a reward function: 0 up to max_completion_length - buffer_len tokens, then
    falling linearly to -factor at max_completion_length. It reads `completion_ids` (each completion's
    generated tokens, its EOS included, as TRL counts them). `GRPOConfig(overlong_buffer_len=...)` adds it."""
    import torch

    from grposcope.core.losses import overlong_penalty

    if not 0 < buffer_len <= max_completion_length or factor < 0:
        raise ValueError(f"need 0 < buffer_len <= max_completion_length and factor >= 0, got buffer_len="
                         f"{buffer_len}, max_completion_length={max_completion_length}, factor={factor}")

    def soft_overlong_penalty(completion_ids: list, **kwargs: Any) -> list[float | None]:
        lengths = torch.tensor([len(ids) for ids in completion_ids])  # (N,)
        return (factor * overlong_penalty(lengths, max_completion_length, buffer_len) + 0.0).tolist()

    return soft_overlong_penalty
