"""Model loading: one call turns a model spec into a trainable `(model, tokenizer)` pair.

    model, tokenizer = load_model("embedded:smollm2-135m-instruct")   # or a local folder, or a model object

`loading.py` resolves a spec and refuses what is unsafe, `embedded.py` holds the embedded models and their
cache, `lora.py` the adapters and the reference policy.
"""

from .embedded import (
    EMBEDDED_PREFIX,
    cache_root,
    embedded_checkpoint_dir,
    embedded_models,
    ensure_embedded_checkpoint,
    find_embedded_gguf,
    strip_quantization,
)
from .loading import (
    DEFAULT_MODEL,
    is_adapter_folder,
    load_adapter_model,
    load_local_model,
    load_local_tokenizer,
    load_model,
    prepare_tokenizer,
    resolve_model_dir,
)
from .lora import apply_lora, is_peft_model, needs_reference_copy, reference_context

__all__ = [
    "DEFAULT_MODEL",
    "EMBEDDED_PREFIX",
    "apply_lora",
    "cache_root",
    "embedded_checkpoint_dir",
    "embedded_models",
    "ensure_embedded_checkpoint",
    "find_embedded_gguf",
    "is_adapter_folder",
    "is_peft_model",
    "load_adapter_model",
    "load_local_model",
    "load_local_tokenizer",
    "load_model",
    "needs_reference_copy",
    "prepare_tokenizer",
    "reference_context",
    "resolve_model_dir",
    "strip_quantization",
]
