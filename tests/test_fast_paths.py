"""Each fast path of a step equals the plain computation it replaces (bench/step.py measures the speed)."""

from __future__ import annotations

import math

import pytest
import torch
from test_trainer import DATA, text_length, tiny_config

from grposcope import GRPOTrainer
from grposcope.core import diagnostics, losses
from grposcope.rollout import ROLLOUTS, SamplingParams
from grposcope.trainer import policy
from grposcope.trainer.generation import length_buckets
from grposcope.trainer.policy import TrainBatch, _full_row_logits, completion_logits, completion_logps, length_parts


def grouped_batch(groups: int, g: int, t: int, seed: int = 0) -> TrainBatch:
    """`groups` prompts of different real lengths (left-padded), each repeated g times, random completions."""
    gen = torch.Generator().manual_seed(seed)
    p = 7
    prompt_ids = torch.randint(3, 60, (groups, p), generator=gen)
    prompt_mask = torch.ones(groups, p, dtype=torch.long)
    for j in range(groups):
        prompt_mask[j, : j % 3] = 0  # 0, 1, 2 padding tokens
    prompt_ids[prompt_mask == 0] = 0
    n = groups * g
    return TrainBatch(prompt_ids.repeat_interleave(g, 0), prompt_mask.repeat_interleave(g, 0),
                      torch.randint(3, 60, (n, t), generator=gen), torch.ones(n, t), torch.randn(n, generator=gen))


@pytest.mark.parametrize("rows", [slice(0, 12), slice(2, 9)])  # whole groups; groups cut at both ends
@pytest.mark.parametrize("t", [5, 1])
def test_shared_prompt_forward_equals_full_rows_with_gradients(tiny_llama, rows, t):
    tiny_llama.train()
    full = grouped_batch(3, 4, t)
    batch = full.rows(torch.arange(12)[rows])
    params = [p for p in tiny_llama.parameters()]
    shared = completion_logits(tiny_llama, batch, temperature=1.0)  # (n, T, V)
    plain = _full_row_logits(tiny_llama, batch)  # (n, T, V)
    assert shared.shape == plain.shape == (len(batch), t, tiny_llama.config.vocab_size)
    assert torch.allclose(shared, plain, atol=1e-5)
    weights = torch.randn_like(plain)  # an arbitrary loss, so that every logit's gradient matters
    g_shared = torch.autograd.grad((shared * weights).sum(), params)
    g_plain = torch.autograd.grad((plain * weights).sum(), params)
    for a, b in zip(g_shared, g_plain):
        assert torch.allclose(a, b, atol=1e-5)


def test_length_parts_cut_where_a_pass_costs_less_than_its_padding():
    # lengths 64, 8, 64, 8 (last loss token + 1; row 3 has a masked token inside, which does not shorten it).
    # Two parts compute 2 x 8 + 2 x 64 = 144 positions, one part 4 x 64 = 256: a second pass pays while it
    # costs less than the 112 padding positions it saves (overhead 100: 144 + 200 < 256 + 100; 120: 384 > 376)
    mask = torch.zeros(4, 64)
    mask[0], mask[2], mask[1, :8], mask[3, :8] = 1, 1, 1, 1
    mask[3, 4] = 0
    assert [p.tolist() for p in length_parts(mask, overhead=0)] == [[1, 3], [0, 2]]
    assert [p.tolist() for p in length_parts(mask, overhead=100)] == [[1, 3], [0, 2]]
    assert [p.tolist() for p in length_parts(mask, overhead=120)] == [[1, 3, 0, 2]]
    empty = torch.zeros(2, 5)  # rows with no loss token still land in a part (of width 1)
    assert [p.tolist() for p in length_parts(empty)] == [[0, 1]]


@pytest.mark.parametrize("groups,g", [(2, 4), (6, 1)])  # a shared prompt per group; distinct prompts
def test_log_probs_in_length_parts_equal_one_pass_with_gradients(tiny_llama, monkeypatch, groups, g):
    monkeypatch.setattr(policy, "PART_OVERHEAD", 0)  # the tiny batch's rows each get a part of their own length
    tiny_llama.train()
    batch = grouped_batch(groups, g, t=9, seed=3)
    lengths = torch.tensor([9, 2, 5, 1, 7, 3, 9, 4])[: len(batch)]  # sorted, not a self-inverse order
    batch.loss_mask = (torch.arange(9) < lengths.unsqueeze(1)).float()  # (n, T)
    assert len(length_parts(batch.loss_mask, overhead=0)) > 1  # the split is at work
    params = list(tiny_llama.parameters())
    weights = torch.randn(len(batch), 9) * batch.loss_mask  # a loss on the real tokens only

    split, split_entropy = completion_logps(tiny_llama, batch, 0.7, with_entropy=True)  # (n, T)
    logits = completion_logits(tiny_llama, batch, 0.7)  # (n, T, V), one pass at full width
    one = losses.selective_log_probs(logits, batch.completion_ids)
    real = batch.loss_mask.bool()
    assert torch.allclose(split[real], one[real], atol=1e-5)
    assert torch.allclose(split_entropy[real], diagnostics.token_entropy(logits)[real], atol=1e-5)
    g_split = torch.autograd.grad((split * weights).sum(), params, allow_unused=True)
    g_one = torch.autograd.grad((one * weights).sum(), params, allow_unused=True)
    for a, b in zip(g_split, g_one):
        assert (a is None) == (b is None) and (a is None or torch.allclose(a, b, atol=1e-5))


def test_distinct_prompts_take_the_plain_path(tiny_llama):
    tiny_llama.eval()
    batch = grouped_batch(4, 1, 3)  # G = 1: nothing to share
    assert torch.equal(completion_logits(tiny_llama, batch, 1.0), _full_row_logits(tiny_llama, batch))


# The own decode loop (rollout/decode.py) draws other tokens than generate() under a seed (inverse-CDF sampling):
# sampled tokens are compared with generate's through the generate route (own_loop=False), greedy ones both ways.
ROUTES = [dict(greedy=True, own_loop=True), dict(greedy=True, own_loop=False), dict(greedy=False, own_loop=False)]


@pytest.mark.parametrize("route", ROUTES)
def test_generation_on_a_shared_prompt_cache_matches_plain_generate(tiny_llama, tiny_tokenizer, route):
    tiny_llama.eval()
    greedy = route["greedy"]
    backend = ROLLOUTS.make("transformers", model=tiny_llama, tokenizer=tiny_tokenizer, own_loop=route["own_loop"])
    prompts = ["What is 2 + 3 ?", "What is the answer to 2 + 3 ?"]  # left padding at work
    params = SamplingParams(max_completion_length=8, greedy=greedy, top_k=0)
    torch.manual_seed(3)
    ours = backend.generate(prompts, 3, params)
    tiny_tokenizer.padding_side = "left"
    enc = tiny_tokenizer([p for p in prompts for _ in range(3)], return_tensors="pt", padding=True,
                         add_special_tokens=False)
    torch.manual_seed(3)
    plain = tiny_llama.generate(**enc, max_new_tokens=8, do_sample=not greedy, top_k=0, top_p=1.0,
                                pad_token_id=tiny_tokenizer.pad_token_id, eos_token_id=backend.eos_ids)
    plain = plain[:, enc["input_ids"].shape[1] :]
    ours_ids = torch.where(ours.completion_mask.bool(), ours.completion_ids, -1)
    plain_ids = torch.where(ours.completion_mask.bool(), plain[:, : ours_ids.shape[1]], -1)
    assert torch.equal(ours_ids, plain_ids)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("sampling", [
    dict(greedy=False, top_k=0), dict(greedy=False, temperature=0.7, top_k=20, top_p=0.9), dict(greedy=True),
    dict(greedy=True, own_loop=True)])
def test_rows_that_finish_at_different_steps_keep_generates_tokens(tiny_llama, tiny_tokenizer, seed, sampling):
    # a tenth of the vocabulary ends a completion, so rows finish at many different steps (the shared-prompt
    # cache then holds rows that are done); every token must still be the one plain generate samples
    tiny_llama.eval()
    sampling = dict(sampling)
    own_loop = sampling.pop("own_loop", False)
    backend = ROLLOUTS.make("transformers", model=tiny_llama, tokenizer=tiny_tokenizer, own_loop=own_loop)
    backend.eos_ids = [1, *range(40, 46)]  # <eos> and six more ids
    prompts = ["What is 2 + 3 ?", "What is the answer to 2 + 3 ?", "2 * 4 =", "What is 9 - 1 ?"]
    params = SamplingParams(max_completion_length=24, **sampling)
    torch.manual_seed(seed)
    ours = backend.generate(prompts, 4, params)
    lengths = ours.lengths.tolist()
    tiny_tokenizer.padding_side = "left"
    enc = tiny_tokenizer([p for p in prompts for _ in range(4)], return_tensors="pt", padding=True,
                         add_special_tokens=False)
    torch.manual_seed(seed)
    warp = {} if params.greedy else {"temperature": params.temperature, "top_k": params.top_k,
                                     "top_p": params.top_p}
    plain = tiny_llama.generate(**enc, max_new_tokens=24, do_sample=not params.greedy, **warp,
                                pad_token_id=tiny_tokenizer.pad_token_id, eos_token_id=backend.eos_ids)
    plain = plain[:, enc["input_ids"].shape[1] :]
    assert ours.completion_ids.shape[1] == plain.shape[1]  # both stop when the last row ends
    assert torch.equal(ours.completion_ids, torch.where(ours.completion_mask.bool(), plain, 0))
    if not params.greedy:
        assert len(set(lengths)) >= 3  # rows really ended at different steps


@pytest.mark.parametrize("own_loop", [True, False])
def test_min_new_tokens_holds_on_both_routes(tiny_llama, tiny_tokenizer, own_loop):
    backend = ROLLOUTS.make("transformers", model=tiny_llama, tokenizer=tiny_tokenizer, own_loop=own_loop)
    backend.eos_ids = [1, *range(40, 46)]  # a tenth of the vocabulary would end a completion
    params = SamplingParams(max_completion_length=6, extra=(("min_new_tokens", 6),))
    out = backend.generate(["What is 2 + 3 ?"], 4, params)
    assert out.lengths.tolist() == [6, 6, 6, 6]  # EOS suppressed until the 6th token
    assert (out.sampling_logp is not None) == own_loop


def test_generation_kwargs_reach_generate(tiny_llama, tiny_tokenizer):
    backend = ROLLOUTS.make("transformers", model=tiny_llama, tokenizer=tiny_tokenizer)
    params = SamplingParams(max_completion_length=12, extra=(("no_repeat_ngram_size", 1),))
    out = backend.generate(["What is 2 + 3 ?"], 4, params)
    assert out.sampling_logp is None  # generate() ran: the own loop knows no no_repeat_ngram_size
    for row, n in zip(out.completion_ids, out.lengths.tolist()):
        assert len(set(row[:n].tolist())) == n  # no token twice: the option reached generate()


def test_log_probs_with_entropy_in_one_pass_hand_computed():
    # one row over 3 tokens with logits [0, ln 2, ln 3] (probabilities 1/6, 2/6, 3/6), token 2 chosen:
    # log p = ln(1/2) = -0.693147; H = -(1/6 ln 1/6 + 1/3 ln 1/3 + 1/2 ln 1/2) = 1.011404
    z = torch.tensor([[[0.0, math.log(2), math.log(3)]]], requires_grad=True)
    logp, entropy = losses.selective_log_probs(z, torch.tensor([[2]]), with_entropy=True)
    assert logp.item() == pytest.approx(-0.693147, abs=1e-5)
    assert entropy.item() == pytest.approx(1.011404, abs=1e-5)
    logp.sum().backward()  # d log p_2 / dz = onehot(2) - p = [-1/6, -1/3, 1/2]
    assert z.grad.flatten().tolist() == pytest.approx([-1 / 6, -1 / 3, 0.5], abs=1e-6)
    assert not entropy.requires_grad


def test_log_probs_with_entropy_match_the_separate_functions_across_chunks():
    gen = torch.Generator().manual_seed(0)
    z = (torch.randn(3, 5, 50, generator=gen) * 4).requires_grad_()
    z.data[0, 0, :10] = float("-inf")  # masked vocabulary: no mass, no NaN
    tokens = torch.randint(10, 50, (3, 5), generator=gen)
    plain = losses.selective_log_probs(z, tokens)
    (g_plain,) = torch.autograd.grad(plain.sum(), z)
    for chunk in (1, 4, 64):
        logp, entropy = losses.selective_log_probs(z, tokens, chunk_rows=chunk, with_entropy=True)
        assert torch.allclose(logp, plain, atol=1e-5)
        assert torch.allclose(entropy, diagnostics.token_entropy(z.detach()), atol=1e-5)
        assert torch.isfinite(entropy).all()
        (g,) = torch.autograd.grad(logp.sum(), z)
        assert torch.allclose(g, g_plain, atol=1e-6)


def test_length_buckets_keep_groups_whole_and_sort_them():
    lengths = [5, 1, 3, 2, 6, 6, 6, 6, 1, 2, 1, 1]  # 3 groups of 4; longest completions 5, 6, 2
    mask = torch.zeros(12, 6)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    batch = TrainBatch(torch.zeros(12, 2), torch.ones(12, 2), torch.zeros(12, 6), mask, torch.zeros(12))
    buckets = length_buckets(batch, size=4, group=4)
    assert [b.tolist() for b in buckets] == [[8, 10, 11, 9], [1, 3, 2, 0], [4, 5, 6, 7]]
    assert sorted(torch.cat(buckets).tolist()) == list(range(12))


def test_phases_callbacks_and_diagnostics_switch(tmp_path, tiny_llama, tiny_tokenizer):
    seen = []

    class Record:
        def on_step_end(self, trainer, metrics):
            seen.append((trainer.global_step, dict(metrics)))

    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                          train_dataset=DATA, callbacks=[Record()],
                          args=tiny_config(tmp_path, generation_kwargs={"min_new_tokens": 6}))
    trainer.train()
    assert [step for step, _ in seen] == [1, 2]
    phases = ("generation", "scoring", "logprobs", "backward", "optimizer", "diagnostics")
    for _, metrics in seen:
        parts = [metrics[f"perf/{p}_s"] for p in phases]
        assert all(s >= 0 for s in parts) and sum(parts) <= metrics["perf/step_s"] + 1e-3
        assert metrics["perf/generation_s"] > 0 and metrics["perf/backward_s"] > 0
        assert metrics["completion/mean_length"] == 6  # generation_kwargs reached generate
        assert metrics["perf/train_tokens"] > 0 and "entropy/mean" in metrics and "collapse/acr_ema" in metrics
    assert trainer.optimizer.defaults["fused"]  # one kernel per AdamW step on CPU

    quiet = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                        train_dataset=DATA, args=tiny_config(tmp_path, diagnostics=False, overwrite_output_dir=True))
    quiet.train()
    assert quiet.monitor.step == 0  # the collapse monitor never ran
    line = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1]
    assert "entropy/mean" not in line and "collapse/acr_ema" not in line and "loss/policy" in line


def test_a_trl_style_callback_is_refused_with_the_reason(tmp_path, tiny_llama, tiny_tokenizer):
    class TrlStyle:
        def on_step_end(self, args, state, control, **kwargs):
            pass

    with pytest.raises(TypeError, match="on_step_end\\(trainer, metrics\\)"):
        GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                    train_dataset=DATA, args=tiny_config(tmp_path), callbacks=[TrlStyle()])
