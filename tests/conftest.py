"""Shared fixtures. The tiny Llama is built in-process with random weights: no download, a few ms to make."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def tiny_llama():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = transformers.LlamaForCausalLM(config)
    model.eval()  # no dropout: the step's effect must be the gradient's alone
    return model
