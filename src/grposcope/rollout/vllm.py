"""Generation with vLLM, for machines with a GPU and the vllm package.

It cannot run on CPU-only machines, where grposcope is developed and tested: this backend is not tested
there, and on such a machine it fails at construction with the reason. On a GPU machine, the TRL integration
(which drives vLLM itself) is the tested route today.
"""

from __future__ import annotations

import importlib.util

from . import ROLLOUTS
from .base import RolloutBackend


@ROLLOUTS.register("vllm")
class VLLMRollout(RolloutBackend):
    def __init__(self, model, tokenizer, max_prompt_length: int | None = None, batch_size: int | None = None):
        if importlib.util.find_spec("vllm") is None:
            raise RuntimeError(
                "use_vllm=True needs the vllm package and a GPU, and vllm is not installed here. "
                "Install vllm on a GPU machine, or set use_vllm=False to generate with transformers."
            )
        raise NotImplementedError(
            "the vLLM backend of grposcope's own trainer is not implemented yet; set use_vllm=False here"
        )
