"""The transformers generation backend on the tiny in-process Llama."""

from __future__ import annotations

import pytest
import torch

from grposcope.rollout import ROLLOUTS, SamplingParams
from grposcope.rollout.base import completion_mask


def test_completion_mask_hand_computed():
    ids = torch.tensor([[5, 1, 0, 0], [5, 6, 7, 8], [1, 0, 0, 0]])  # EOS id 1, pad 0
    mask, truncated = completion_mask(ids, eos_ids=[1])
    # row 0 ends at its EOS (kept: the model must learn to stop); row 1 never stops; row 2 is just EOS
    assert mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]
    assert truncated.tolist() == [False, True, False]


def test_generate_groups_padding_and_truncation(tiny_llama, tiny_tokenizer):
    backend = ROLLOUTS.make("transformers", model=tiny_llama, tokenizer=tiny_tokenizer)
    torch.manual_seed(0)
    prompts = ["What is 2 + 3 ?", "What is the answer to 2 + 3 ?"]  # 5 and 8 tokens: left padding at work
    out = backend.generate(prompts, num_generations=3, params=SamplingParams(max_completion_length=6))
    assert out.completion_ids.shape[0] == 6 and out.prompt_ids.shape[0] == 6 and len(out.texts) == 6
    assert out.completion_ids.shape[1] <= 6
    assert out.prompt_mask[3:, 0].eq(1).all() and out.prompt_mask[:3, 0].eq(0).all()  # shorter prompt padded left
    eos = set(backend.eos_ids)  # the tokenizer's <eos> (1) and the model config's (2)
    assert eos == {1, 2}
    for row, mask, truncated in zip(out.completion_ids, out.completion_mask, out.truncated):
        n = int(mask.sum())
        assert bool(truncated) == (not eos & set(row[:n].tolist()))
        assert mask[:n].all() and not mask[n:].any()


def test_greedy_generation_is_deterministic(tiny_llama, tiny_tokenizer):
    backend = ROLLOUTS.make("transformers", model=tiny_llama, tokenizer=tiny_tokenizer, batch_size=2)
    params = SamplingParams(max_completion_length=5, greedy=True)
    a = backend.generate(["What is 2 + 3 ?"] * 3, 1, params)  # 3 rows in 2 generate calls
    b = backend.generate(["What is 2 + 3 ?"], 1, params)
    assert torch.equal(a.completion_ids[0], a.completion_ids[2]) and a.texts[0] == b.texts[0]


def test_use_vllm_fails_when_the_config_is_built_and_names_the_trl_route():
    from grposcope import GRPOConfig

    assert ROLLOUTS.names() == ["transformers"]  # no registered backend that can only fail
    with pytest.raises(ValueError, match="use_vllm=True.*grposcope.integrations.trl"):
        GRPOConfig(use_vllm=True)
