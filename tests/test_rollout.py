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


def test_shared_prefix_counts_the_tokens_every_left_padded_prompt_starts_with():
    from grposcope.rollout.hf import shared_prefix

    pad = 0
    ids = torch.tensor([[pad, 5, 6, 7, 8, 9], [5, 6, 7, 3, 4, 2], [pad, pad, 5, 6, 7, 1]])
    mask = (ids != pad).long()
    # real tokens: [5 6 7 8 9], [5 6 7 3 4 2], [5 6 7 1]: 3 in common, but the shortest keeps 2 of its own
    assert shared_prefix(ids, mask) == 2
    assert shared_prefix(ids[:2], mask[:2]) == 3
    assert shared_prefix(torch.tensor([[5, 6], [7, 6]]), torch.ones(2, 2, dtype=torch.long)) == 0
    inner = torch.tensor([[1, 0, 1, 1, 1], [1, 1, 1, 1, 1]])  # padding inside a prompt: nothing is shared
    assert shared_prefix(torch.tensor([[5, 0, 6, 7, 8], [5, 6, 7, 8, 9]]), inner) == 0


@pytest.mark.parametrize("greedy", [True, False])
def test_a_shared_prompt_start_prefilled_once_gives_the_left_padded_passs_tokens(tiny_llama, tiny_tokenizer,
                                                                                  monkeypatch, greedy):
    """The prompts' common start runs once and each prompt's own tokens after it; the decode loop then sees the
    cache as [start | padding | own tokens]. Tokens equal those of the left-padded pass, log-probs to 1e-5,
    and the rollout hands the update the left-padded prompts as before."""
    import grposcope.rollout.hf as hf

    backend = ROLLOUTS.make("transformers", model=tiny_llama, tokenizer=tiny_tokenizer)
    prompts = ["What is 2 + 3 ? What is 4 + 4 ?", "What is 2 + 3 ? What is the answer to 6 + 1 ?",
               "What is 2 + 3 ? 7"]  # 10, 13 and 7 tokens; the first 6 shared
    params = SamplingParams(max_completion_length=6, greedy=greedy, extra=(("min_new_tokens", 6),))
    outs, calls = [], []
    original = hf.TransformersRollout._prefill_shared

    def counted(self, *args):
        calls.append(args[-1])  # the shared tokens
        return original(self, *args)

    monkeypatch.setattr(hf.TransformersRollout, "_prefill_shared", counted)
    for tokens in (10**9, 2):  # off, then on for 3 prompts of any shared length >= 2
        monkeypatch.setattr(hf, "SHARED_PREFIX_TOKENS", tokens)
        monkeypatch.setattr(hf, "SHARED_PREFIX_PROMPTS", 3)
        torch.manual_seed(0)
        outs.append(backend.generate(prompts, 2, params))
    assert calls == [5]  # "What is 2 + 3 ?" and the chat template's start; the third prompt keeps 2 own
    off, on = outs
    assert torch.equal(on.completion_ids, off.completion_ids) and on.texts == off.texts
    torch.testing.assert_close(on.sampling_logp, off.sampling_logp, atol=1e-5, rtol=0)
    assert torch.equal(on.prompt_ids, off.prompt_ids) and torch.equal(on.prompt_mask, off.prompt_mask)


def test_decoding_weight_major_gives_the_row_major_products_and_leaves_the_model_as_it_was(tiny_llama,
                                                                                          tiny_tokenizer):
    from grposcope.rollout import decode as decode_module

    backend = ROLLOUTS.make("transformers", model=tiny_llama, tokenizer=tiny_tokenizer)
    params = SamplingParams(max_completion_length=8)
    prompts = ["What is 2 + 3 ?", "What is the answer to 2 + 3 ?"]  # 2 x 8 = 16 rows: the weight-major route
    runs = {}
    for rows in (decode_module.WEIGHT_MAJOR_ROWS, 10**9):  # on, then off
        patched = []
        real_loop_model = tiny_llama.forward

        def spy(*args, **kwargs):
            patched.append(sum("forward" in m.__dict__ for m in tiny_llama.modules() if type(m) is torch.nn.Linear))
            return real_loop_model(*args, **kwargs)

        tiny_llama.forward = spy
        old, decode_module.WEIGHT_MAJOR_ROWS = decode_module.WEIGHT_MAJOR_ROWS, rows
        try:
            torch.manual_seed(3)
            runs[rows] = (backend.generate(prompts, num_generations=8, params=params), patched)
        finally:
            decode_module.WEIGHT_MAJOR_ROWS = old
            del tiny_llama.forward
    (on, on_patched), (off, off_patched) = runs.values()
    linears = sum(type(m) is torch.nn.Linear and m.bias is None for m in tiny_llama.modules())
    assert on_patched[-1] == linears and off_patched[-1] == 0  # the loop's forwards ran weight-major, or not
    assert not any("forward" in m.__dict__ for m in tiny_llama.modules())  # each Linear's own forward is back
    assert torch.equal(on.completion_ids, off.completion_ids)
    torch.testing.assert_close(on.sampling_logp, off.sampling_logp, rtol=0, atol=1e-5)


def test_weight_major_leaves_few_rows_and_other_dtypes_on_their_own_forward():
    from grposcope.rollout.decode import WEIGHT_MAJOR_ROWS, weight_major_linears

    model = torch.nn.Sequential(torch.nn.Linear(4, 3, bias=False), torch.nn.Linear(3, 2),
                                torch.nn.Linear(2, 2, bias=False).to(torch.float64))
    with weight_major_linears(model, WEIGHT_MAJOR_ROWS - 1):
        assert not any("forward" in m.__dict__ for m in model)
    with weight_major_linears(model, WEIGHT_MAJOR_ROWS):
        assert ["forward" in m.__dict__ for m in model] == [True, False, False]  # bias and float64 stay
        x = torch.randn(WEIGHT_MAJOR_ROWS, 1, 4)
        y = model[0](x)
        assert y.shape == (WEIGHT_MAJOR_ROWS, 1, 3) and y.is_contiguous()
        torch.testing.assert_close(y, x @ model[0].weight.T)
    assert not any("forward" in m.__dict__ for m in model)
