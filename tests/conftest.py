"""Shared fixtures. The tiny Llama is built in-process with random weights: no download, a few ms to make."""

from __future__ import annotations

import pytest
import torch


def make_tiny_llama(seed: int = 0):
    """A 2-layer Llama of vocabulary 64 with random weights, in eval mode (no dropout: a step's effect is the
    gradient's alone)."""
    import transformers

    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return transformers.LlamaForCausalLM(config).eval()


@pytest.fixture
def tiny_llama():
    pytest.importorskip("transformers")
    return make_tiny_llama()


_WORDS = (
    "<pad> <eos> <unk> 0 1 2 3 4 5 6 7 8 9 + - * = ? . , : What is the answer Answer with only number "
    "user assistant system The boxed { } \\boxed{ a b c"
).split()
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}assistant : {% endif %}"
)


def make_tiny_tokenizer():
    """A word-level tokenizer of 64 entries (matching tiny_llama's vocabulary), with a chat template."""
    import tokenizers
    import transformers

    vocab = {word: i for i, word in enumerate(_WORDS)}
    vocab.update({f"w{i}": i for i in range(len(vocab), 64)})  # fill up to the model's 64 ids
    core = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    core.decoder = tokenizers.decoders.WordPiece(prefix="##")  # joins words with spaces
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    tok.chat_template = CHAT_TEMPLATE
    tok.padding_side = "left"
    return tok


@pytest.fixture
def tiny_tokenizer():
    """make_tiny_tokenizer()"""
    pytest.importorskip("tokenizers")
    pytest.importorskip("transformers")
    return make_tiny_tokenizer()


@pytest.fixture
def tiny_model_dir(tmp_path, tiny_llama, tiny_tokenizer):
    """tiny_llama and tiny_tokenizer saved as a local Hugging Face folder (safetensors)."""
    path = tmp_path / "tiny-llama"
    tiny_llama.generation_config.eos_token_id = tiny_tokenizer.eos_token_id
    tiny_llama.generation_config.pad_token_id = tiny_tokenizer.pad_token_id
    tiny_llama.save_pretrained(path, safe_serialization=True)
    tiny_tokenizer.save_pretrained(path)
    return path


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    """A real wandb, offline and silent, with its config, cache and data kept under tmp_path, not $HOME."""
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))


def flip_a_bit(path) -> None:
    """Flips one bit of one weight near the end of a safetensors file: damage only its checksum can see."""
    data = bytearray(path.read_bytes())
    data[-10] ^= 1
    path.write_bytes(bytes(data))
