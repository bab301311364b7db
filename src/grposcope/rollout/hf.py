"""Generation with transformers' `generate`: batched, left-padded, with the KV cache."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from .base import Rollout, RolloutBackend, SamplingParams, completion_mask, concat
from .decode import decode
from .kv_cache import repeat_rows, reserve, reserved_cache
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
        assert extra is not None  # given a dict, it returns one
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
        extra: dict[str, Any] = dict(params.extra)
        own_loop = self.own_loop and set(extra) <= OWN_LOOP_KWARGS
        capacity = ids.shape[1] + params.max_completion_length
        shared = shared_prefix(ids, mask) if own_loop and ids.shape[0] >= SHARED_PREFIX_PROMPTS else 0
        if shared >= SHARED_PREFIX_TOKENS:  # the own loop reads the cache's layout from its own ids and mask
            cache, loop_ids, loop_mask = self._prefill_shared(ids, mask, g, capacity, shared)
        else:
            cache, loop_ids, loop_mask = self._prefill(ids, mask, g, capacity), ids, mask
        ids, mask = ids.repeat_interleave(g, dim=0), mask.repeat_interleave(g, dim=0)  # (B*G, P)
        loop_ids, loop_mask = loop_ids.repeat_interleave(g, dim=0), loop_mask.repeat_interleave(g, dim=0)
        sampling: dict[str, Any] = {"do_sample": False} if params.greedy else {
            "do_sample": True, "temperature": params.temperature, "top_p": params.top_p, "top_k": params.top_k,
        }
        sampling.update(extra)  # generation_kwargs win over top_p / top_k, as in TRL (and its docs say)
        sampling.update(max_new_tokens=params.max_completion_length, pad_token_id=tok.pad_token_id,
                        eos_token_id=self.eos_ids, use_cache=True)
        # the model's own generation_config is set aside either way (its notes come from here); the own loop
        # applies none of it, as generate() does with the neutral values
        overrides = self.model_defaults.overrides(sampling)
        logp = None
        if own_loop:
            completion_ids, logp = decode(self.model, loop_ids, loop_mask, cache, params, self.eos_ids,
                                          tok.pad_token_id, min_new_tokens=int(extra.get("min_new_tokens") or 0))
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


    def _prefill_shared(self, ids: torch.Tensor, mask: torch.Tensor, g: int, capacity: int, shared: int
                        ) -> tuple[Any, torch.Tensor, torch.Tensor]:
        """`_prefill` for prompts that all start with the same `shared` tokens (a system prompt and worked
        examples): that start runs once, for one row, and only each prompt's own tokens after it run per
        prompt. The cache's rows are then laid out [shared start | padding | the prompt's own tokens], and the
        returned ids (B, P') and mask (B, P'), P' <= P, describe that layout for the decode loop: the padding
        is masked and every position counts real tokens only, so attention sees what the left-padded pass
        would. The Rollout keeps the left-padded ids and mask, which the update reads."""
        real = mask.sum(dim=1)  # (B,) each prompt's tokens, right-aligned
        own = real - shared - 1  # (B,) its tokens after the shared start, but its last (>= 1: shared_prefix)
        width, b = int(own.max()), ids.shape[0]
        start = ids[0, ids.shape[1] - int(real[0]):][:shared].unsqueeze(0)  # (1, S0)
        cache = reserved_cache()
        self.model(input_ids=start, position_ids=torch.arange(shared, device=ids.device).unsqueeze(0),
                   past_key_values=cache, use_cache=True, logits_to_keep=1)
        repeat_rows(cache, b)  # (1, ...) -> (B, ...)
        # the prompts' own tokens but the last, left-padded to `width`: ids[:, P - 1 - own : P - 1]
        columns = torch.arange(width, device=ids.device).unsqueeze(0)  # (1, W)
        present = columns >= (width - own).unsqueeze(1)  # (B, W)
        source = (ids.shape[1] - 1 - width + columns).clamp(min=0).expand(b, -1)  # (B, W)
        rest = torch.where(present, ids.gather(1, source), ids.new_full((), self.tokenizer.pad_token_id))
        layout = torch.cat([mask.new_ones(b, shared), present.to(mask.dtype)], dim=1)  # (B, S0 + W)
        positions = shared + (present.cumsum(dim=1) - 1).clamp(min=0)  # (B, W)
        self.model(input_ids=rest, attention_mask=layout, position_ids=positions, past_key_values=cache,
                   use_cache=True, logits_to_keep=1)
        reserve(cache, g, capacity)  # (B, ...) -> (B*G, ...)
        loop_ids = torch.cat([start.expand(b, -1), rest, ids[:, -1:]], dim=1)  # (B, S0 + W + 1)
        loop_mask = torch.cat([layout, mask.new_ones(b, 1)], dim=1)
        return cache, loop_ids, loop_mask


SHARED_PREFIX_TOKENS = 32  # a shared start shorter than this is not worth a pass of its own
# Prompts per call from which a shared start runs once: at 2 (a training step's usual batch) the pass saved is
# one prompt's, and the sampled tokens are left exactly as the left-padded pass gives them; an evaluation's 32
# prompts share the template, system prompt and worked examples (109 of 121 tokens in the quickstart's).
SHARED_PREFIX_PROMPTS = 4


def shared_prefix(ids: torch.Tensor, mask: torch.Tensor) -> int:
    """How many first tokens every left-padded prompt (ids, mask (B, P)) has in common, leaving each at least
    two of its own (one for its own pass, its last for the decode loop's first step)."""
    real = mask.sum(dim=1)  # (B,)
    if not bool((mask.flip(1).cumprod(dim=1).sum(dim=1) == real).all()):
        return 0  # padding inside a prompt: no common layout to share
    limit = int(real.min()) - 2
    if limit <= 0:
        return 0
    width = int(real.max())
    aligned = ids[:, ids.shape[1] - width:]  # (B, W) every prompt within the widest
    offsets = (width - real).unsqueeze(1)  # (B, 1) where each prompt starts
    columns = torch.arange(limit, device=ids.device).unsqueeze(0) + offsets  # (B, limit)
    heads = aligned.gather(1, columns)  # (B, limit) each prompt's first tokens
    differs = (heads != heads[:1]).any(dim=0)  # (limit,)
    return int(differs.int().argmax()) if bool(differs.any()) else limit


def _vocab_size(model) -> int | None:
    """Entries of the model's logits, the token ids generate() can see; None when unknown."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    weight = getattr(head, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.dim() == 2:
        return int(weight.shape[0])  # (V, hidden)
    config: Any = getattr(model, "config", None)
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
