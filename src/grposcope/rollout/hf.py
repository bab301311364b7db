"""Generation with transformers' `generate`: batched, left-padded, with the KV cache."""

from __future__ import annotations

import dataclasses

import torch

from .base import Rollout, RolloutBackend, SamplingParams, completion_mask, concat
from .decode import decode
from .kv_cache import reserve, reserved_cache
from .model_defaults import ModelDefaults
from .options import check_generation_kwargs
from .registry import ROLLOUTS

OWN_LOOP_KWARGS = {"min_new_tokens"}  # the generation_kwargs rollout.decode applies itself


@ROLLOUTS.register("transformers")
class TransformersRollout(RolloutBackend):
    """Samples G completions per prompt with `model.generate`.

    `max_prompt_length` cuts long prompts from the left (their end, where the question and the generation
    prompt are, is kept). `batch_size` bounds how many sequences go through `generate` at once.
    Without `generation_kwargs` (or with `min_new_tokens` alone) the tokens come from grposcope's own decode
    loop (`rollout.decode`: inverse-CDF sampling, the same distribution as `generate`'s, and each token's
    sampling log-probability); `own_loop=False` uses `generate` always (its tokens under a seed are
    `generate`'s).
    """

    def __init__(self, model, tokenizer, max_prompt_length: int | None = None, batch_size: int | None = None,
                 own_loop: bool = True):
        self.model, self.tokenizer, self.own_loop = model, tokenizer, own_loop
        self.max_prompt_length, self.batch_size = max_prompt_length, batch_size
        self.prompts_cut = 0  # prompts longer than max_prompt_length so far (`prompt/truncated_frac`)
        self.eos_ids = _eos_ids(model, tokenizer)
        # what the model folder's generation_config.json would change in generate() is set aside, noted
        self.model_defaults = ModelDefaults(model)
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad token: set tokenizer.pad_token = tokenizer.eos_token")

    @torch.inference_mode()
    def generate(self, prompts: list[str], num_generations: int, params: SamplingParams) -> Rollout:
        """G completions of each prompt; group j is rows j*G .. j*G+G-1."""
        # `params.extra` reaches generate() as keywords: checked here too, whoever built it (a config checks
        # its generation_kwargs when it is made, but SamplingParams is public and a config field can be reset)
        extra = check_generation_kwargs(dict(params.extra), params.max_completion_length, _vocab_size(self.model))
        params = dataclasses.replace(params, extra=tuple(extra.items()))  # as generate() takes them (floats)
        per_call = max(1, (self.batch_size or len(prompts) * num_generations) // num_generations)
        parts = [
            self._generate(prompts[i : i + per_call], num_generations, params)
            for i in range(0, len(prompts), per_call)
        ]
        return concat(parts, self.tokenizer.pad_token_id)

    def _generate(self, prompts: list[str], g: int, params: SamplingParams) -> Rollout:
        tok = self.tokenizer
        tok.padding_side = "left"
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        ids, mask = enc["input_ids"], enc["attention_mask"]  # (B, P)
        if self.max_prompt_length is not None and ids.shape[1] > self.max_prompt_length:
            self.prompts_cut += int((mask.sum(dim=1) > self.max_prompt_length).sum())
            ids, mask = ids[:, -self.max_prompt_length :], mask[:, -self.max_prompt_length :]
        ids, mask = ids.to(self.model.device), mask.to(self.model.device)
        cache = self._prefill(ids, mask, g, ids.shape[1] + params.max_completion_length)
        ids, mask = ids.repeat_interleave(g, dim=0), mask.repeat_interleave(g, dim=0)  # (B*G, P)
        sampling = {"do_sample": False} if params.greedy else {
            "do_sample": True, "temperature": params.temperature, "top_p": params.top_p, "top_k": params.top_k,
        }
        sampling.update(params.extra)  # generation_kwargs win over top_p / top_k, as in TRL (and its docs say)
        sampling.update(max_new_tokens=params.max_completion_length, pad_token_id=tok.pad_token_id,
                        eos_token_id=self.eos_ids, use_cache=True)
        # the model's own generation_config is set aside either way (its notes come from here); the own loop
        # applies none of it, as generate() does with the neutral values
        overrides = self.model_defaults.overrides(sampling)
        logp = None
        extra = dict(params.extra)
        if self.own_loop and set(extra) <= OWN_LOOP_KWARGS:
            completion_ids, logp = decode(self.model, ids, mask, cache, params, self.eos_ids, tok.pad_token_id,
                                          min_new_tokens=int(extra.get("min_new_tokens") or 0))
        else:
            out = self.model.generate(
                input_ids=ids, attention_mask=mask, past_key_values=cache, **overrides, **sampling,
            )  # (B*G, P + T'), T' <= max_completion_length
            completion_ids = out[:, ids.shape[1] :]  # (B*G, T')
        cmask, truncated = completion_mask(completion_ids, self.eos_ids)
        completion_ids = torch.where(cmask.bool(), completion_ids, tok.pad_token_id)
        texts = tok.batch_decode(completion_ids, skip_special_tokens=True)
        if logp is not None:
            logp = (logp * cmask).float().cpu()
        return Rollout(ids.cpu(), mask.cpu(), completion_ids.cpu(), cmask.cpu(), truncated.cpu(), texts, logp)

    def _prefill(self, ids: torch.Tensor, mask: torch.Tensor, g: int, capacity: int):
        """The KV cache of every prompt but its last token, computed once per prompt and copied G times.

        A group's G rows share their prompt, so its forward pass runs once instead of G times; `generate`
        then starts from the last prompt token, and writes new tokens into the room reserved here.
        None (generate does it all) for a prompt of one token.
        """
        if ids.shape[1] < 2:
            return None
        cache = reserved_cache()
        self.model(
            input_ids=ids[:, :-1], attention_mask=mask[:, :-1],
            position_ids=(mask[:, :-1].cumsum(dim=1) - 1).clamp(min=0), past_key_values=cache, use_cache=True,
            logits_to_keep=1,
        )
        reserve(cache, g, capacity)  # (B, ...) -> (B*G, ...)
        return cache


def _vocab_size(model) -> int | None:
    """Entries of the model's logits, the token ids generate() can see; None when unknown."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    weight = getattr(head, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.dim() == 2:
        return int(weight.shape[0])  # (V, hidden)
    config = getattr(model, "config", None)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return getattr(text, "vocab_size", None)


def _eos_ids(model, tokenizer) -> list[int]:
    ids = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = [] if ids is None else ([ids] if isinstance(ids, int) else list(ids))
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    if not ids:
        raise ValueError("neither the model nor the tokenizer names an EOS token: generation could not stop")
    return ids
