"""grposcope's own decode loop (rollout/decode.py): inverse-CDF sampling, transformers' warpers, the recorded
sampling log-probs; and the rollout copy (rollout_dtype) with its importance weights."""

from __future__ import annotations

import math

import pytest
import torch

from grposcope.core import losses
from grposcope.rollout import ROLLOUTS
from grposcope.rollout.base import SamplingParams
from grposcope.rollout.decode import BLOCK, inverse_cdf, warp
from grposcope.trainer.policy import TrainBatch, completion_logps


def test_inverse_cdf_hand_computed():
    probs = torch.tensor([[0.1, 0.2, 0.7]] * 6)
    uniform = torch.tensor([0.0, 0.05, 0.15, 0.29, 0.31, 0.999])
    assert inverse_cdf(probs, uniform).tolist() == [0, 0, 1, 1, 2, 2]


def test_inverse_cdf_never_draws_an_entry_without_mass_across_blocks():
    v = 3 * BLOCK + 17  # four blocks, the last one short (padded)
    probs = torch.zeros(5, v)
    probs[:, 5] = 1.0  # first block
    probs[:, 2 * BLOCK + 3] = 3.0  # third block; rows need not sum to 1
    uniform = torch.tensor([0.0, 0.2499, 0.25, 0.9, 1.0 - 1e-12])
    assert inverse_cdf(probs, uniform).tolist() == [5, 5, 2 * BLOCK + 3, 2 * BLOCK + 3, 2 * BLOCK + 3]
    only_last = torch.zeros(1, v)
    only_last[0, v - 1] = 1e-30  # tiny mass at the very end: float64 sums still find it
    assert inverse_cdf(only_last, torch.tensor([0.999999])).tolist() == [v - 1]


def test_inverse_cdf_frequencies_follow_the_distribution():
    torch.manual_seed(0)
    p = torch.tensor([0.05, 0.4, 0.0, 0.25, 0.3])
    n = 40_000
    drawn = inverse_cdf(p.expand(n, -1).contiguous(), torch.rand(n))
    counts = torch.bincount(drawn, minlength=5).double()
    assert counts[2] == 0
    expected = p.double() * n
    keep = expected > 0
    chi2 = (((counts - expected)[keep] ** 2) / expected[keep]).sum().item()
    assert chi2 < 16.27  # chi-square, 3 degrees of freedom, p = 0.001


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.7, 20, 0.9), (1.3, 5, 1.0), (1.0, 0, 0.5)])
def test_warp_equals_transformers_warpers(temperature, top_k, top_p):
    from transformers.generation.logits_process import (
        LogitsProcessorList,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    torch.manual_seed(1)
    logits = torch.randn(6, 64) * 3
    chain = LogitsProcessorList([TemperatureLogitsWarper(temperature)]
                                + ([TopKLogitsWarper(top_k)] if top_k else [])
                                + ([TopPLogitsWarper(top_p)] if top_p < 1 else []))
    theirs = chain(torch.zeros(6, 1, dtype=torch.long), logits.clone())
    ours = warp(logits, SamplingParams(8, temperature, top_p, top_k))
    assert torch.equal(torch.isinf(ours), torch.isinf(theirs))
    assert torch.allclose(ours[~torch.isinf(ours)], theirs[~torch.isinf(theirs)])


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_recorded_sampling_log_probs_equal_the_trainers(tiny_llama, tiny_tokenizer, temperature):
    tiny_llama.eval()
    backend = ROLLOUTS.make("transformers", model=tiny_llama, tokenizer=tiny_tokenizer)
    torch.manual_seed(0)
    out = backend.generate(["What is 2 + 3 ?", "What is the answer to 2 + 3 ?"], 3,
                           SamplingParams(10, temperature=temperature))
    assert out.sampling_logp is not None and out.sampling_logp.shape == out.completion_ids.shape
    batch = TrainBatch(out.prompt_ids, out.prompt_mask, out.completion_ids, out.completion_mask,
                       torch.zeros(len(out.texts)))
    with torch.no_grad():
        logp, _ = completion_logps(tiny_llama, batch, temperature, with_entropy=False)
    real = out.completion_mask.bool()
    assert torch.allclose(out.sampling_logp[real], logp[real], atol=1e-5)
    assert (out.sampling_logp[~real] == 0).all()


def test_generate_route_records_no_sampling_log_probs(tiny_llama, tiny_tokenizer):
    backend = ROLLOUTS.make("transformers", model=tiny_llama, tokenizer=tiny_tokenizer, own_loop=False)
    assert backend.generate(["What is 2 + 3 ?"], 2, SamplingParams(4)).sampling_logp is None


# --- importance weights of the rollout correction ---------------------------------------------------------

def test_rollout_importance_weights_hand_computed():
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    logp = torch.zeros(2, 3)
    sampling = torch.log(torch.tensor([[0.25, 1.0, 2.0], [0.5, 4.0, 123.0]]))  # ratio pi/mu: 4, 1, 0.5; 2, 0.25
    weights, m = losses.rollout_importance_weights(logp, sampling, mask, "token_truncate", clip_max=2.0)
    assert torch.allclose(weights[mask.bool()], torch.tensor([2.0, 1.0, 0.5, 2.0, 0.25]))
    assert m["sampling/importance_sampling_clipped_frac"] == pytest.approx(1 / 5)
    assert m["sampling/importance_sampling_ratio/max"] == pytest.approx(2.0)
    assert m["sampling/sampling_logp_difference/max"] == pytest.approx(math.log(4))
    ratios = torch.tensor([4.0, 1.0, 0.5, 2.0, 0.25])
    assert m["sampling/rollout_kl"] == pytest.approx((ratios - 1 - ratios.log()).mean().item(), rel=1e-5)
    weights, _ = losses.rollout_importance_weights(logp, sampling, mask, "token_mask", clip_max=2.0)
    assert torch.allclose(weights[mask.bool()], torch.tensor([0.0, 1.0, 0.5, 2.0, 0.25]))
    weights, m = losses.rollout_importance_weights(logp, sampling, mask, "sequence_truncate", clip_max=2.0)
    assert weights.shape == (2, 1) and torch.allclose(weights.squeeze(1), torch.tensor([2.0, 0.5]))
    weights, _ = losses.rollout_importance_weights(logp, sampling, mask, "sequence_mask", clip_max=1.5)
    assert torch.allclose(weights.squeeze(1), torch.tensor([0.0, 0.5]))
    with pytest.raises(ValueError, match="unknown rollout correction 'tis'"):
        losses.rollout_importance_weights(logp, sampling, mask, "tis")


@pytest.mark.parametrize("name", ["grpo", "gspo", "cispo"])
def test_every_policy_loss_takes_the_weights(name):
    torch.manual_seed(0)
    logp = torch.randn(4, 5, requires_grad=True)
    mask = torch.ones(4, 5)
    mask[2, 3:] = 0
    advantages = torch.tensor([1.0, -0.5, 0.3, -0.8])
    loss_fn = losses.POLICY_LOSSES.make(name)
    plain, _ = loss_fn(logp, logp.detach(), advantages, mask)
    doubled, _ = loss_fn(logp, logp.detach(), advantages, mask, weights=torch.full((4, 5), 2.0))
    assert doubled.item() == pytest.approx(2 * plain.item(), rel=1e-6)
    (grad,) = torch.autograd.grad(doubled, logp)
    (grad_plain,) = torch.autograd.grad(plain, logp)
    assert torch.allclose(grad, 2 * grad_plain)


# --- the rollout copy in the trainer ----------------------------------------------------------------------

def test_rollout_copy_refreshes_every_weight_once_then_the_trained_ones(tiny_llama):
    from grposcope.trainer.rollout_copy import RolloutCopy

    frozen = tiny_llama.model.embed_tokens.weight
    frozen.requires_grad_(False)
    try:
        copy = RolloutCopy(tiny_llama, torch.bfloat16)
        assert all(p.dtype == torch.bfloat16 and not p.requires_grad for p in copy.model.parameters())
        assert copy.model.model.rotary_emb.inv_freq.dtype == torch.float32  # buffers stay float32
        with torch.no_grad():
            frozen.add_(1.0)  # as a resumed run's loaded weights would differ from the copy's
            tiny_llama.lm_head.weight.add_(1.0)
        copy.refresh()  # first: every weight
        assert torch.equal(copy.model.model.embed_tokens.weight, frozen.to(torch.bfloat16))
        with torch.no_grad():
            frozen.add_(1.0)
            tiny_llama.lm_head.weight.add_(1.0)
        copy.refresh()  # then: only what the optimizer trains
        assert torch.equal(copy.model.lm_head.weight, tiny_llama.lm_head.weight.to(torch.bfloat16))
        assert not torch.equal(copy.model.model.embed_tokens.weight, frozen.to(torch.bfloat16))
    finally:
        frozen.requires_grad_(True)


def test_auto_takes_bf16_only_where_the_cpu_computes_it(monkeypatch):
    from grposcope.trainer import rollout_copy

    monkeypatch.setattr(rollout_copy, "native_bf16_cpu", lambda: False)
    assert rollout_copy.rollout_dtype("auto", torch.device("cpu")) == torch.float32
    monkeypatch.setattr(rollout_copy, "native_bf16_cpu", lambda: True)
    assert rollout_copy.rollout_dtype("auto", torch.device("cpu")) == torch.bfloat16
    assert rollout_copy.rollout_dtype("float32", torch.device("cpu")) == torch.float32


def _trainer(tmp_path, tiny_llama, tiny_tokenizer, **options):
    from test_trainer import DATA, text_length, tiny_config

    from grposcope import GRPOTrainer

    return GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                       train_dataset=DATA, eval_dataset=DATA[:2], args=tiny_config(tmp_path, **options))


def test_a_bf16_rollout_copy_samples_logs_its_mismatch_and_leaves_evaluation_to_float32(
        tmp_path, tiny_llama, tiny_tokenizer):
    from test_trainer import read_lines

    trainer = _trainer(tmp_path, tiny_llama, tiny_tokenizer, rollout_dtype="bfloat16", eval_steps=2)
    assert trainer.rollout_backend.model is trainer.rollout_copy.model
    assert trainer.backend.model is trainer.model  # evaluation: the trained float32 weights
    trainer.train()
    lines = read_lines(tmp_path / "run" / "metrics.jsonl")
    for line in lines:
        assert 0 < line["sampling/sampling_logp_difference/mean"] < 0.1
        assert line["sampling/importance_sampling_ratio/min"] <= 1 <= line["sampling/importance_sampling_ratio/max"]
    assert "eval/accuracy" in lines[-1]
    # the copy holds the weights of the last generation: refreshed again, it takes the last update
    before = trainer.rollout_copy.model.lm_head.weight.clone()
    trainer.rollout_copy.refresh()
    assert torch.equal(trainer.rollout_copy.model.lm_head.weight, trainer.model.lm_head.weight.to(torch.bfloat16))
    assert not torch.equal(before, trainer.rollout_copy.model.lm_head.weight)  # the last step moved them


@pytest.mark.parametrize("correction", [True, False])
def test_the_trainer_weights_the_copys_tokens_by_the_truncated_ratio(tmp_path, tiny_llama, tiny_tokenizer,
                                                                    correction):
    trainer = _trainer(tmp_path, tiny_llama, tiny_tokenizer, rollout_dtype="bfloat16",
                       rollout_importance_sampling_correction=correction)
    torch.manual_seed(0)
    logp = torch.randn(4, 5, requires_grad=True)
    mask = torch.ones(4, 5, dtype=torch.long)
    batch = TrainBatch(torch.ones(4, 2, dtype=torch.long), torch.ones(4, 2, dtype=torch.long),
                       torch.ones(4, 5, dtype=torch.long), mask, torch.tensor([1.0, -1.0, 0.5, -0.5]))
    counts = {"num_tokens": mask.sum(), "num_sequences": 4}
    plain, _ = trainer._loss(batch, logp, None, counts)
    batch.sampling_logp = logp.detach() - math.log(4)  # the copy gave every token a quarter of pi's probability
    weighted, figures = trainer._loss(batch, logp, None, counts)
    assert weighted.item() == pytest.approx((2.0 if correction else 1.0) * plain.item(), rel=1e-6)  # capped at 2
    assert figures.loss_figures["sampling/importance_sampling_clipped_frac"] == 1.0  # logged either way
