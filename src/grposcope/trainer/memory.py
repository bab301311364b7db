"""The memory of a training step, estimated from the config before the model loads, and checked against the
machine's: a geometry that cannot fit stops at once with its size, instead of being killed by the system
minutes later (G = batch = 100000 on SmolLM2-135M took 23.5 GB in 47 s and was killed).

Notation: R rows (completions) generated at once, n rows per forward/backward pass (a micro-batch), G the
group, P prompt and T completion tokens, V the vocabulary, h the hidden size, m the MLP's, L layers, c the
width of one token's keys (or values) in one layer. At float32 (4 bytes a value):

    weights and optimizer   params x 4, + trainable x 3 x 4 (gradient, AdamW's two moments), + params x 4 for
                            a frozen reference copy (beta > 0 without LoRA), + params x 2 for a bf16
                            rollout copy (rollout_dtype)
    generation              R x (P + T) x 2 L c x 4  (the KV cache, reserved whole: rollout/kv_cache.py)
                            + 2 x R x V x 4          (the next-token logits, and the probabilities drawn from)
    update                  2 x n x T x V x 4        (the logits (n, T, V), and their gradient)
                            + tokens x L x (8 h + 4 m) x 4  (the activations kept for backward; tokens = n T
                            completion tokens + one prompt of P per group)
                            + n x (P + T) x 2 L c x 4       (each row's copy of its prompt's KV cache)
    a step                  weights and optimizer + max(generation, update)
    an evaluation batch     params x 4 + the generation of its prompts x k samples at once (k sampled
                            completions per prompt; greedy decoding alone: k = 1)

Every term is the least that part takes, so the check refuses only a step that cannot fit. Measured on this
machine (SmolLM2-135M, one step, peak RSS; the estimate in brackets): the quickstart's 16 rows x 24 tokens
2.7 GiB [2.4]; 64 x 64 tokens 10.6 GiB [8.8]; 256 x 32 tokens 21.9 GiB [15.7].
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import RunError
from ..machine import available_memory, gib

CHARS_PER_TOKEN = 4  # English text in BPE vocabularies; digits and symbols take more tokens, so P is not overstated


@dataclass(frozen=True)
class ModelShape:
    """What the estimate reads of a model: its config, and its parameter counts."""

    vocab: int  # V
    hidden: int  # h
    intermediate: int  # m
    layers: int  # L
    kv_width: int  # c: key-value heads x head dim
    params: int
    trainable: int
    value_bytes: int = 4  # float32, as load_model loads
    loaded: bool = False  # the weights are in memory already (a model object): not counted again


@dataclass(frozen=True)
class StepMemory:
    """The bytes of a step's parts; `total` is what the check compares."""

    weights: int  # weights, gradients, optimizer moments, reference copy
    generation: int
    update: int

    @property
    def total(self) -> int:
        return self.weights + max(self.generation, self.update)


def step_memory_bytes(shape: ModelShape, *, generated: int, trained: int, group: int, prompt_tokens: int,
                      completion_tokens: int, reference_copy: bool = False, rollout_copy_bytes: int = 0
                      ) -> StepMemory:
    """The least a step takes (the module docstring has the terms): `generated` rows at once (R), `trained`
    rows a forward/backward pass (n), groups of `group` (G), `prompt_tokens` (P) and `completion_tokens` (T)."""
    b, p, t = shape.value_bytes, prompt_tokens, completion_tokens
    kv_token = 2 * shape.layers * shape.kv_width * b  # keys and values of one token, every layer
    weights = (0 if shape.loaded else shape.params * b) + shape.trainable * 3 * b
    weights += shape.params * b if reference_copy else 0
    weights += shape.params * rollout_copy_bytes  # the rollout copy (rollout_dtype), `rollout_copy_bytes` a value
    generation = generation_bytes(shape, generated, p, t)
    tokens = trained * t + math.ceil(trained / group) * p  # a group's prompt runs once (trainer/policy.py)
    activations = tokens * shape.layers * (8 * shape.hidden + 4 * shape.intermediate) * b
    update = 2 * trained * t * shape.vocab * 4 + activations + trained * (p + t) * kv_token
    return StepMemory(weights, generation, update)


def generation_bytes(shape: ModelShape, rows: int, prompt_tokens: int, completion_tokens: int) -> int:
    """`rows` completions generated at once (R): their KV cache, reserved whole, and the next-token logits and
    the probabilities drawn from."""
    kv_token = 2 * shape.layers * shape.kv_width * shape.value_bytes
    return rows * (prompt_tokens + completion_tokens) * kv_token + 2 * rows * shape.vocab * 4


def check_eval_memory(model: Any, examples: list[dict], *, batch: int, samples: int, max_prompt_length: int | None,
                      completion_tokens: int, fix: str, available: int | None = None) -> int | None:
    """Raises RunError when an evaluation batch cannot fit in `available` bytes (default: as `check_memory`):
    its first `batch` prompts sample `samples` completions each at once (evaluation.py). Returns the estimate,
    or None when the model's config or the memory cannot be read. `fix` names the options to lower."""
    shape = model_shape(model)
    if shape is None or not examples:
        return None
    where, available = ("this machine", available) if available is not None else _available(model)
    if available is None:
        return None
    prompts, p = min(batch, len(examples)), prompt_tokens(examples, max_prompt_length)
    rows = prompts * max(samples, 1)
    weights = 0 if shape.loaded else shape.params * shape.value_bytes
    generation = generation_bytes(shape, rows, p, completion_tokens)
    if weights + generation <= available:
        return weights + generation
    raise RunError(
        f"an evaluation batch needs ~{gib(weights + generation)} ({prompts} prompts x {max(samples, 1):,} "
        f"completions = {rows:,} generated at once, length={p}+{completion_tokens} tokens, vocabulary {shape.vocab}: "
        f"generation {gib(generation)}, weights {gib(weights)}) but {where} has {gib(available)} available; "
        f"lower {fix}"
    )


def check_memory(args: Any, geometry: Any, model: Any, examples: list[dict],
                 available: int | None = None) -> StepMemory | None:
    """Raises RunError when a step of this run cannot fit in `available` bytes (default: what this machine,
    or the GPU the model is on, can give); returns the estimate, or None when the model's config cannot be
    read (then loading the model reports why) or the memory is unknown. `model` is a model object or spec."""
    shape = model_shape(model, args.use_peft)
    if shape is None:
        return None
    where, available = ("this machine", available) if available is not None else _available(model)
    if available is None:
        return None
    p, t = prompt_tokens(examples, args.max_prompt_length), args.max_completion_length
    need = step_memory_bytes(shape, generated=geometry.generation_batch, trained=geometry.micro_batch,
                             group=geometry.num_generations, prompt_tokens=p, completion_tokens=t,
                             reference_copy=args.beta > 0 and not args.use_peft and not _has_adapters(model),
                             rollout_copy_bytes=0 if args.rollout_dtype == "float32" else 2)
    if need.total <= available:
        return need
    at_once = geometry.generation_batch
    # generation_batch_size / steps_per_generation matter only when generation is the bigger part
    more = " (or generation_batch_size / steps_per_generation)" if at_once > geometry.micro_batch \
        and need.generation > need.update else ""
    raise RunError(
        f"a step needs ~{gib(need.total)} (G={geometry.num_generations}, batch={geometry.micro_batch}"
        f"{f', {at_once} completions generated at once' if at_once != geometry.micro_batch else ''}, "
        f"length={p}+{t} tokens, vocabulary {shape.vocab}: generation {gib(need.generation)}, update "
        f"{gib(need.update)}, weights and optimizer {gib(need.weights)}) but {where} has {gib(available)} "
        f"available; lower num_generations, per_device_train_batch_size{more} or max_completion_length"
    )


def prompt_tokens(examples: list[dict], max_prompt_length: int | None) -> int:
    """The longest prompt in tokens, at about CHARS_PER_TOKEN characters a token (the tokenizer is not loaded
    yet), cut at max_prompt_length as generation cuts it."""
    longest = max((_text_length(e.get("prompt")) for e in examples), default=0)
    tokens = math.ceil(longest / CHARS_PER_TOKEN)
    return min(tokens, max_prompt_length) if max_prompt_length is not None else tokens


def _text_length(prompt: Any) -> int:
    if isinstance(prompt, str):
        return len(prompt)
    if isinstance(prompt, list):  # chat messages
        return sum(len(m.get("content") or "") for m in prompt if isinstance(m, dict)
                   and isinstance(m.get("content"), str))
    return 0


def model_shape(model: Any, use_peft: bool = False) -> ModelShape | None:
    """The shape of a model object, or of the model a spec names, read from its config.json (no weights are
    loaded, no code runs); None when there is none to read."""
    if isinstance(model, torch.nn.Module):
        params = list(model.parameters())
        if not params:
            return None
        config: Any = getattr(model, "config", None)
        values = config.to_dict() if hasattr(config, "to_dict") else {}
        # LoRA's trainable parameters: negligible
        trainable: int | None = 0 if use_peft else sum(x.numel() for x in params if x.requires_grad)
        return _shape(values, params=sum(x.numel() for x in params), trainable=trainable,
                      value_bytes=params[0].element_size(), loaded=True)
    if not isinstance(model, (str, os.PathLike)):
        return None
    folder = _model_folder(os.fspath(model))
    try:
        values = json.loads((folder / "config.json").read_text()) if folder is not None else None
    except (OSError, ValueError):  # no config.json, or bad JSON: load_model says which, and how to fix it
        return None
    if folder is None or not isinstance(values, dict):
        return None
    stored = _stored_params(folder)
    trainable = None if stored is None else (0 if use_peft else stored)
    return _shape(values, params=stored, trainable=trainable, value_bytes=4, loaded=False, use_peft=use_peft)


def _model_folder(spec: str) -> Path | None:
    """The folder of the model `spec` names (of the base model, for a folder of LoRA adapters), or None."""
    from ..models.loading import is_adapter_folder, resolve_model_dir

    try:
        folder = resolve_model_dir(spec)
        if is_adapter_folder(folder):
            base = json.loads((folder / "adapter_config.json").read_text()).get("base_model_name_or_path")
            return resolve_model_dir(base) if isinstance(base, str) else None
        return folder
    except (OSError, ValueError):  # no such folder, a file: load_model says so, with the fix
        return None


def _stored_params(folder: Path) -> int | None:
    """The parameters in the folder's safetensors files, counted from their headers (a JSON of names, dtypes
    and shapes at the start of each file; no tensor is read). None without safetensors files."""
    total, files = 0, sorted(folder.glob("*.safetensors"))
    for file in files:
        try:
            with open(file, "rb") as f:
                size = int.from_bytes(f.read(8), "little")
                if not 0 < size < 2**27:  # not a safetensors header
                    return None
                header = json.loads(f.read(size))
        except (OSError, ValueError):
            return None
        total += sum(math.prod(v.get("shape", [])) for k, v in header.items() if k != "__metadata__"
                     and isinstance(v, dict))
    return total if files else None


def _shape(values: dict, *, params: int | None, trainable: int | None, value_bytes: int, loaded: bool,
           use_peft: bool = False) -> ModelShape | None:
    """A ModelShape from config values (transformers' names, GPT-2's, or a multimodal model's text_config);
    the parameters counted from the shape when not given. None without a vocabulary or hidden size."""
    text: Any = values.get("text_config") if isinstance(values.get("text_config"), dict) else values

    def first(*names: str) -> int | None:
        found = [text.get(n, values.get(n)) for n in names]
        return next((v for v in found if isinstance(v, int) and not isinstance(v, bool) and v > 0), None)

    vocab, hidden = first("vocab_size"), first("hidden_size", "n_embd", "d_model")
    if vocab is None or hidden is None:
        return None
    layers = first("num_hidden_layers", "n_layer", "num_layers") or 1
    heads = first("num_attention_heads", "n_head") or 1
    head_dim = first("head_dim") or hidden // heads
    kv_width = (first("num_key_value_heads") or heads) * head_dim
    intermediate = first("intermediate_size", "n_inner", "ffn_dim") or 4 * hidden
    if params is None:  # no safetensors to count: the least a transformer of this shape holds
        tied = text.get("tie_word_embeddings", values.get("tie_word_embeddings", True)) is not False
        per_layer = 2 * hidden * heads * head_dim + 2 * hidden * kv_width + 2 * hidden * intermediate
        params = vocab * hidden * (1 if tied else 2) + layers * per_layer
        trainable = 0 if use_peft else params
    return ModelShape(vocab, hidden, intermediate, layers, kv_width, params, trainable or 0, value_bytes, loaded)


def _has_adapters(model: Any) -> bool:
    from ..models.lora import is_peft_model

    return is_peft_model(model)


def _available(model: Any) -> tuple[str, int | None]:
    """Where the step runs, and the bytes it can have there: a GPU's memory for a model already on one
    (the whole of it: the check must never refuse a step that fits), else this machine's."""
    if isinstance(model, torch.nn.Module):
        device = next(model.parameters()).device
        if device.type == "cuda":
            return "this GPU", torch.cuda.get_device_properties(device).total_memory
    return "this machine", available_memory()
