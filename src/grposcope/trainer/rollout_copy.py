"""A lower-precision copy of the weights for generation (`rollout_dtype`), refreshed before each generation.

Decoding a small batch reads every weight once per token; a bf16 copy reads half as many bytes, and CPUs with
AVX-512 BF16 or AMX multiply it in hardware: 96.0 -> 62.2 ms a decode step for the embedded model, 16 rows
(docs/performance.md, round 3). The trainer's log-probs, gradients and optimizer stay in float32. The copy's
distribution differs a little from the trained policy's (KL ~1.4e-3 nats a token there), so the tokens it
draws are weighted in the loss by pi_fp32 / pi_copy, truncated (`core.losses.rollout_importance_weights`), as
TRL and verl do for vLLM rollouts. Evaluation runs the float32 weights: held-out accuracy is the trained
policy's.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from ..machine import native_bf16_cpu

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
ROLLOUT_DTYPES = ("float32", "bfloat16", "auto")
DECODE_LOOPS = ("grposcope", "generate")  # the decode_loop option: rollout.decode's loop, or transformers'


def rollout_dtype(choice: str, device: torch.device) -> torch.dtype:
    """The dtype a rollout runs in: `choice`, with "auto" resolved to bfloat16 where the hardware computes it
    natively (a CUDA GPU with bf16, a CPU with AVX-512 BF16 or AMX) and float32 elsewhere."""
    if choice != "auto":
        return DTYPES[choice]
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    return torch.bfloat16 if device.type == "cpu" and native_bf16_cpu() else torch.float32


class RolloutCopy:
    """The model's weights in `dtype`, for generation only (no gradients). `refresh()` copies the trained
    weights in: every weight the first time (a resumed run's too), then only those the optimizer changes."""

    def __init__(self, model: Any, dtype: torch.dtype) -> None:
        self.dtype = dtype
        self.model = copy.deepcopy(model)  # tied weights stay tied (deepcopy's memo)
        for p in self.model.parameters():
            p.requires_grad_(False)
            p.data = p.data.to(dtype)  # buffers (e.g. rotary frequencies) stay float32
        self.model.eval()
        pairs = list(zip(model.parameters(), self.model.parameters()))
        self._all = pairs
        self._trained = [(src, dst) for src, dst in pairs if src.requires_grad]
        self._first = True

    @torch.no_grad()
    def refresh(self) -> None:
        for src, dst in self._all if self._first else self._trained:
            dst.copy_(src)
        self._first = False

    @property
    def nbytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.model.parameters())
