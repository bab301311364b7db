"""Which keyword arguments a config may add to transformers' `generate`: plain sampling options, never code.

`generation_kwargs` comes from a YAML file or the command line, and `generate` takes far more than sampling
options. Some load and run code: `custom_generate` (a folder or Hub repo whose `custom_generate/generate.py`
it imports) together with `trust_remote_code`, which `generate` reads as its own keyword whatever grposcope's
`trust_remote_code` says (transformers 5.23). Others take objects that it calls (`logits_processor`,
`stopping_criteria`, `prefix_allowed_tokens_fn`, `streamer`, `assistant_model`) or replace how generation
runs (`generation_config`, `cache_implementation="paged"`, `synced_gpus`). So only the options below pass,
each with its value checked: they are numbers, flags and token ids, read by transformers' logits processors.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Mapping, cast

from ..errors import InputTypeError


@dataclass(frozen=True)
class Rule:
    """What a value must be (said in the error), and the check: the value as generate() takes it, or None."""

    text: str
    check: Callable[[Any], Any]


def _number(value: Any) -> float | None:
    real = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if real else None  # float: transformers' repetition penalty refuses an int


def _count(low: int) -> Rule:
    return Rule(f"an int >= {low}",
                lambda v: v if isinstance(v, int) and not isinstance(v, bool) and v >= low else None)


def _share(low_open: bool, high_open: bool) -> Rule:
    """A number in [0, 1], with either end left out."""
    def check(v: Any) -> float | None:
        x = _number(v)
        ok = x is not None and (x > 0 if low_open else x >= 0) and (x < 1 if high_open else x <= 1)
        return x if ok else None
    return Rule(f"a number in {'(' if low_open else '['}0, 1{')' if high_open else ']'}", check)


def _ids(value: Any) -> list[int] | None:
    ok = isinstance(value, (list, tuple)) and value and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
    return list(value) if ok else None


def _id_lists(value: Any) -> list[list[int]] | None:
    lists = [_ids(v) for v in value] if isinstance(value, (list, tuple)) and value else [None]
    return None if any(v is None for v in lists) else cast("list[list[int]]", lists)


_POSITIVE = Rule("a number > 0", lambda v: x if (x := _number(v)) is not None and x > 0 else None)
_FLAG = Rule("true or false", lambda v: v if isinstance(v, bool) else None)
_IDS = Rule("a non-empty list of token ids (ints >= 0)", _ids)
_ID_LISTS = Rule("a non-empty list of non-empty lists of token ids, e.g. [[5, 6], [9]]", _id_lists)

# The allow-list: GenerationConfig attributes that only shape the next-token distribution (transformers 5.23's
# logits processors), with the ranges those processors accept; 0 (or 1 for the p's) means "off" where
# transformers reads it so.
ALLOWED: dict[str, Rule] = {
    "min_new_tokens": _count(0),  # no EOS before this many new tokens
    "repetition_penalty": _POSITIVE,
    "no_repeat_ngram_size": _count(0),
    "top_k": _count(0),  # overrides GRPOConfig.top_k (TRL: generation_kwargs win)
    "top_p": _share(low_open=True, high_open=False),  # overrides GRPOConfig.top_p
    "min_p": _share(low_open=False, high_open=False),
    "top_h": _share(low_open=True, high_open=False),
    "typical_p": _share(low_open=True, high_open=False),
    "epsilon_cutoff": _share(low_open=False, high_open=True),
    "eta_cutoff": _share(low_open=False, high_open=True),
    "bad_words_ids": _ID_LISTS,
    "suppress_tokens": _IDS,
    "begin_suppress_tokens": _IDS,
    "renormalize_logits": _FLAG,
    "remove_invalid_values": _FLAG,
}

# What grposcope passes to `generate` itself, and what to do instead.
SET_BY_GRPOSCOPE = {
    "max_new_tokens": "set max_completion_length (--max_completion_length) instead",
    "max_length": "set max_completion_length (--max_completion_length) instead",
    "temperature": "set temperature (--temperature) instead: the loss's log-probs use the same one",
    "do_sample": "training always samples (temperature, top_p and top_k shape it)",
    "num_return_sequences": "set num_generations (--num_generations) instead",
    "pad_token_id": "it is the tokenizer's pad token",
    "eos_token_id": "it comes from the model folder's generation_config.json and the tokenizer; set EOS there",
    "bos_token_id": "it is the tokenizer's",
    "input_ids": "the prompts come from the dataset",
    "attention_mask": "the prompts come from the dataset",
    "past_key_values": "it holds each prompt's KV cache, computed once for its group",
    "use_cache": "generation always uses the KV cache",
}

# Why some keywords are refused: those that run code, take objects or change who runs, and beam search. Any
# other keyword off the allow-list is refused too, with a general reason.
REFUSED_BECAUSE = {
    "custom_generate": "it would run code from a folder",
    "trust_remote_code": "generate() would run code from a folder or the Hub with it; grposcope's own "
                         "trust_remote_code covers the model folder only",
    "assistant_model": "it takes a model object, whose code generate() runs",
    "assistant_tokenizer": "it takes a tokenizer object",
    "tokenizer": "it takes a tokenizer object",
    "logits_processor": "it takes objects whose code generate() calls",
    "stopping_criteria": "it takes objects whose code generate() calls",
    "prefix_allowed_tokens_fn": "it takes a function that generate() calls",
    "streamer": "it takes an object whose code generate() calls",
    "synced_gpus": "it changes how processes share generation",
    "generation_config": "it replaces the whole generation config, and could carry any refused option",
    "cache_implementation": "it changes how generate() runs ('paged' switches to continuous batching)",
    "cache_config": "it changes how generate() runs",
    "compile_config": "it makes generate() compile the model",
    "watermarking_config": "it takes a watermarking config object",
    "num_beams": "beam search: GRPO samples its completions, it does not search for them",
}


def check_generation_kwargs(kwargs: Mapping[str, Any] | None, max_completion_length: int | None = None,
                            vocab_size: int | None = None) -> dict[str, Any] | None:
    """`generation_kwargs` checked against the allow-list; returns them as a new dict (numbers normalised,
    e.g. repetition_penalty 2 -> 2.0), or None for None.

    Raises ValueError naming the first refused key (and the allowed ones) or bad value, InputTypeError when
    `kwargs` is no mapping. With `max_completion_length`, a min_new_tokens above it is refused too; with
    `vocab_size` (the model's, known to the generation backend), a token id outside the vocabulary.
    """
    if kwargs is None:
        return None
    if not isinstance(kwargs, Mapping):
        raise InputTypeError(f"generation_kwargs must be a mapping of generate() options, e.g. "
                             f'{{"min_new_tokens": 4}}, got {type(kwargs).__name__} {kwargs!r}')
    allowed = ", ".join(ALLOWED)
    checked: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key in SET_BY_GRPOSCOPE:
            raise ValueError(f"generation_kwargs: {key!r} is set by grposcope; {SET_BY_GRPOSCOPE[key]}")
        if key not in ALLOWED:
            why = REFUSED_BECAUSE.get(key, "only plain sampling options reach generate()")
            raise ValueError(f"generation_kwargs: {key!r} is not allowed ({why}); allowed: {allowed}")
        normal = ALLOWED[key].check(value)
        if normal is None:
            raise ValueError(f"generation_kwargs: {key} must be {ALLOWED[key].text}, got {value!r}")
        checked[key] = normal
    minimum = checked.get("min_new_tokens")
    if max_completion_length is not None and minimum is not None and minimum > max_completion_length:
        raise ValueError(f"generation_kwargs: min_new_tokens={minimum} is more than max_completion_length="
                         f"{max_completion_length}, so no completion could end; lower it or raise "
                         "max_completion_length")
    if vocab_size is not None:
        _check_token_ids(checked, vocab_size)
    return checked


def _check_token_ids(checked: Mapping[str, Any], vocab_size: int) -> None:
    """Token ids the model does not have: transformers refuses them in bad_words_ids (in words of its own), but
    in suppress_tokens and begin_suppress_tokens it looks the vocabulary up in the list, so that an id past the
    vocabulary suppresses nothing, without a word (transformers 5.23's SuppressTokensLogitsProcessor)."""
    for key in ("bad_words_ids", "suppress_tokens", "begin_suppress_tokens"):
        ids = checked.get(key) or []
        outside = sorted({i for item in ids for i in (item if isinstance(item, list) else [item]) if i >= vocab_size})
        if outside:
            raise ValueError(f"generation_kwargs: {key} holds token id(s) {', '.join(map(str, outside[:5]))}, "
                             f"outside the model's vocabulary of {vocab_size} (ids 0 to {vocab_size - 1}); look "
                             "the ids up with the model's tokenizer, e.g. tokenizer.convert_tokens_to_ids(...)")
