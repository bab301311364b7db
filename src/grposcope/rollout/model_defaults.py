"""What a model folder's `generation_config.json` may change in a rollout: nothing grposcope does not choose.

transformers' `generate` fills every option its caller leaves unset from the model's generation config, which
`from_pretrained` reads from the folder's `generation_config.json`. A model's authors write there how they
want it used in chat (`num_beams: 3`, `repetition_penalty: 1.05`, `stop_strings`, `max_time`, ...), and any of
it would silently change how grposcope draws its completions, or break it: `num_beams: 3` ended in a shape
error 394 lines deep, `dola_layers` in transformers asking for `trust_remote_code`. So, field by field:

- what grposcope passes to every call (`do_sample`, `temperature`, `top_p`, `top_k`, `max_new_tokens`, and
  `generation_kwargs`) overrides the file;
- every other field that would change which tokens are drawn, when a completion ends, or how `generate` runs
  (`RESET`) is passed at its neutral value. A rollout samples from the distribution its loss scores, shaped
  only by the run's own options, so these can only be set aside: refusing them would make the user edit a
  downloaded checkpoint for nothing. The plain sampling options (`repetition_penalty`, `min_p`, ...) can be
  asked for again in `generation_kwargs`, which is what the note says;
- ids (`eos_token_id` is read: completions end there; `pad_token_id`, `bos_token_id` are the tokenizer's),
  the flags of options that are off once the above are neutral (beam search's `length_penalty`, an assistant
  model's settings), and keys transformers does not know are left alone: they change nothing here.

Each field set aside gets one note (a RuntimeWarning) naming the file, the field, its value and what is used
instead, the first time a call would have used it; a value equal to what is used gets none. Values
transformers' own validation refuses (`max_new_tokens: -1`) are named with the file when the model loads
(`grposcope.models.loading`).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Mapping

from .options import ALLOWED

_SEARCH = "GRPO samples its completions, it does not search for them"
_ASSISTED = "assisted or speculative decoding changes how the tokens are drawn"
_LENGTH = "a completion ends at EOS or at max_completion_length"
_RUN = "grposcope runs generate() with its own KV cache and reads only the tokens"
_SHIFT = "the completions would come from another distribution than the one the loss scores"
_SAMPLING = "only the run's own options shape sampling"
_GROUPS = "grposcope repeats each prompt num_generations times itself"

# field -> (its neutral value, why grposcope sets it aside). transformers 5.23's GenerationConfig fields.
RESET: dict[str, tuple[Any, str]] = {
    "num_beams": (1, _SEARCH), "num_beam_groups": (1, _SEARCH), "diversity_penalty": (0.0, _SEARCH),
    "penalty_alpha": (None, _SEARCH), "dola_layers": (None, _SEARCH), "constraints": (None, _SEARCH),
    "force_words_ids": (None, _SEARCH), "low_memory": (None, _SEARCH),
    "prompt_lookup_num_tokens": (None, _ASSISTED), "assistant_early_exit": (None, _ASSISTED),
    "use_mtp": (None, _ASSISTED), "speculation_type": (None, _ASSISTED),
    "num_return_sequences": (1, _GROUPS),
    "min_length": (0, _LENGTH), "stop_strings": (None, _LENGTH), "max_time": (None, _LENGTH),
    "forced_eos_token_id": (None, _LENGTH), "exponential_decay_length_penalty": (None, _LENGTH),
    "forced_bos_token_id": (None, _SHIFT), "sequence_bias": (None, _SHIFT), "guidance_scale": (None, _SHIFT),
    "watermarking_config": (None, _SHIFT), "token_healing": (None, _SHIFT),
    "encoder_repetition_penalty": (1.0, _SHIFT), "encoder_no_repeat_ngram_size": (0, _SHIFT),
    "cache_implementation": (None, _RUN), "cache_config": (None, _RUN), "prefill_chunk_size": (None, _RUN),
    "return_dict_in_generate": (False, _RUN), "output_scores": (False, _RUN), "output_logits": (False, _RUN),
    "output_attentions": (False, _RUN), "output_hidden_states": (False, _RUN),
    # the plain sampling options generation_kwargs may set (grposcope.rollout.options.ALLOWED)
    "min_new_tokens": (None, _SAMPLING), "repetition_penalty": (1.0, _SAMPLING),
    "no_repeat_ngram_size": (0, _SAMPLING), "min_p": (None, _SAMPLING), "top_h": (None, _SAMPLING),
    "typical_p": (1.0, _SAMPLING), "epsilon_cutoff": (0.0, _SAMPLING), "eta_cutoff": (0.0, _SAMPLING),
    "bad_words_ids": (None, _SAMPLING), "suppress_tokens": (None, _SAMPLING),
    "begin_suppress_tokens": (None, _SAMPLING), "renormalize_logits": (False, _SAMPLING),
    "remove_invalid_values": (False, _SAMPLING),
}

# Fields a rollout passes itself, and what sets them (for the note when the file's value differs).
OVERRIDDEN = {
    "do_sample": "the rollout: it samples to train, evaluation's greedy pass does not",
    "temperature": "the temperature option", "top_p": "the top_p option", "top_k": "the top_k option",
    "max_new_tokens": "max_completion_length",
}


class ModelDefaults:
    """The fields of `model`'s generation config a rollout sets aside, noted once each.

    `options` names what sets a field when a caller passes it (OVERRIDDEN's wording by default; anything else
    is taken as set by `generation_kwargs`).
    """

    def __init__(self, model: Any, options: Mapping[str, str] | None = None) -> None:
        self.config = getattr(model, "generation_config", None)
        self.options = {**OVERRIDDEN, **(options or {})}
        folder = getattr(model, "name_or_path", None) or ""
        file = Path(str(folder)) / "generation_config.json"
        self.file = str(file) if folder and file.is_file() else None
        self.source = self.file or "the model's generation_config"
        self.noted: set[str] = set()

    def overrides(self, used: Mapping[str, Any]) -> dict[str, Any]:
        """The keywords to pass to generate() beside `used` (what the caller passes): each RESET field the
        model's config sets, at its neutral value. Notes each field set aside, or overridden by `used` with
        another value, the first time."""
        reset: dict[str, Any] = {}
        for field, value in self._set_fields():
            if field in used:  # the caller's value wins
                by = self.options.get(field, "generation_kwargs")
                self._note(field, f"{self.source} sets {field}={value!r}; the rollout uses {field}={used[field]!r} "
                                  f"instead (set by {by})", used[field] != value)
                continue
            if field in RESET:
                neutral, why = RESET[field]
                reset[field] = neutral
                self._note(field, f"{self.source} sets {field}={value!r}, which grposcope does not apply ({why}); "
                                  f"the rollout uses {field}={neutral!r}. {self._hint(field, value)}", True)
        return reset

    def _set_fields(self):
        """(field, value) for every field of the config that is set, and not to its neutral value."""
        if self.config is None:
            return
        for field in (*OVERRIDDEN, *RESET):
            value = getattr(self.config, field, None)
            if value is not None and not (field in RESET and value == RESET[field][0]):
                yield field, value

    def _hint(self, field: str, value: Any) -> str:
        if field in ALLOWED:
            return f"To keep it, pass generation_kwargs={{{field!r}: {value!r}}}."
        if self.file:
            return f"Delete the field from {self.file} to silence this note."
        return f"Set model.generation_config.{field} = None to silence this note."

    def _note(self, field: str, text: str, differs: bool) -> None:
        if differs and field not in self.noted:
            self.noted.add(field)
            warnings.warn(text, RuntimeWarning, stacklevel=4)


def neutralise(model: Any, generation_config: Any, options: Mapping[str, str]) -> None:
    """For a trainer that passes its own `generation_config` object to generate() (TRL): the RESET fields it
    leaves unset, which generate() would fill from `model`'s, are set to their neutral value in it, noted."""
    used = {field: getattr(generation_config, field) for field in (*OVERRIDDEN, *RESET)
            if getattr(generation_config, field, None) is not None}
    for field, neutral in ModelDefaults(model, options).overrides(used).items():
        setattr(generation_config, field, neutral)
