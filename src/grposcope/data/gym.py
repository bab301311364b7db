"""reasoning-gym datasets as tasks: `load_task("rg:leg_counting")`.

reasoning-gym (over a hundred offline procedural generators, each with its own scorer) yields entries
`{"question", "answer", "metadata"}`. Each becomes an example with a chat prompt and the columns
`answer`, `rg_dataset` (the generator's name) and `rg_index` (the entry's index). The reward looks the
entry up by index in the generator it was built from, rather than from a JSON copy in a column, because
some scorers compare metadata that a JSON round trip changes (tuples become lists).

The reply is scored on the text of its last `<answer>...</answer>` pair, the format reasoning-gym's
system prompts ask for; a reply without the tags is scored as a whole, so that a model that answers
bare ("292") is not scored zero for the missing tags.
"""

from __future__ import annotations

import difflib
from typing import Any

from .chat import completion_text

DEFAULT_SYSTEM_PROMPT = "default"  # a key of reasoning_gym.utils.SYSTEM_PROMPTS, or the text itself


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
        try:
            return float(self.dataset.score_answer(answer, entry))
        except Exception:  # noqa: BLE001 - scorers parse free text and some raise on odd replies
            return 0.0


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
        raise TypeError(f"reasoning-gym dataset {name!r}: {err}; its config fields are: {fields}") from None


def _system_text(system_prompt: str | None) -> str | None:
    if not system_prompt:
        return None
    from reasoning_gym.utils import SYSTEM_PROMPTS

    return SYSTEM_PROMPTS.get(system_prompt, system_prompt)
