"""LoRA adapters (peft) and the reference policy: with adapters, the reference is the same model with them
switched off, so no copy is needed.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import Any, ContextManager

logger = logging.getLogger(__name__)


def apply_lora(
    model: Any,
    *,
    r: int = 16,
    alpha: int = 32,
    dropout: float = 0.05,
    target_modules: list[str] | str | None = None,
) -> Any:
    """Wraps `model` with LoRA adapters (LoRA: arXiv:2106.09685); the base weights are frozen.

    `target_modules=None` means every linear layer except the output head (peft's ``"all-linear"``).
    """
    if is_peft_model(model):
        raise ValueError(
            "the model already carries peft adapters; pass use_peft=False to train them as they are"
        )
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=target_modules or "all-linear",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def is_peft_model(model: Any) -> bool:
    # A peft model can only exist once peft has been imported, so there is no need to import it here.
    peft = sys.modules.get("peft")
    return peft is not None and isinstance(model, peft.PeftModel)


def needs_reference_copy(model: Any) -> bool:
    """True when the KL reference policy needs its own frozen weight copy (no adapters to switch off)."""
    return not is_peft_model(model)


def reference_context(model: Any) -> ContextManager[Any] | None:
    """A context manager whose value is the reference policy, or None when a copy is needed instead.

    With LoRA the reference policy is the base model, i.e. the same module with its adapters switched off, so
    it costs no memory: ``with reference_context(model) as ref: ref_logits = ref(**batch).logits``.
    """
    if not is_peft_model(model):
        return None
    return _adapters_disabled(model)


@contextlib.contextmanager
def _adapters_disabled(model: Any):
    with model.disable_adapter():
        yield model
