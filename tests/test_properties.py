"""Properties that must hold for any input (hypothesis): finiteness, collapse, masking, accumulation."""

from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from grposcope.core import advantages, losses
from grposcope.core.diagnostics import collapse_metrics, post_collapse_rate
from grposcope.core.virtual_samples import STRATEGIES

finite = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False, allow_infinity=False, width=32)


@st.composite
def reward_batches(draw, max_b=5, max_g=8):
    b, g = draw(st.integers(1, max_b)), draw(st.integers(2, max_g))
    values = draw(st.lists(st.lists(finite, min_size=g, max_size=g), min_size=b, max_size=b))
    return torch.tensor(values, dtype=torch.float32)


def generator_tensor(seed: int, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(reward_batches(), min_size=1, max_size=3), name=st.sampled_from(advantages.available()))
def test_every_estimator_is_finite_for_finite_rewards(steps, name):
    est = advantages.make(name)
    for rewards in steps:
        pool = [torch.cat([row, row[:1] * 0.5]) for row in rewards]  # a pool a little larger than the group
        out = est(rewards, pool=pool)
        assert out.advantages.shape == rewards.shape
        assert torch.isfinite(out.advantages).all()
        assert all(isinstance(v, float) and v == v for v in out.metrics.values())


@settings(max_examples=60, deadline=None)
@given(c=st.floats(-100, 100, width=32), b=st.integers(1, 4), g=st.integers(2, 16))
def test_all_equal_groups_give_zero_grpo_family_advantage(c, b, g):
    rewards = torch.full((b, g), c)
    for name in ("grpo", "dr_grpo", "rloo", "pool"):
        assert torch.equal(advantages.make(name)(rewards).advantages, torch.zeros(b, g))


@settings(max_examples=60, deadline=None)
@given(c=finite, b=st.integers(1, 4), g=st.integers(2, 16))
def test_all_equal_groups_are_always_counted_as_collapsed(c, b, g):
    # float32 means and stds of equal values are not exact (6 x 9876.123 has std 1e-3 in float32)
    rewards = torch.full((b, g), c)
    assert collapse_metrics(rewards)["collapse/acr"] == 1.0
    assert post_collapse_rate(advantages.make("grpo")(rewards).advantages) == 1.0


@settings(max_examples=80, deadline=None)
@given(c=st.floats(0.0, 1.0, width=32), g=st.integers(2, 16), strategy=st.sampled_from(STRATEGIES))
def test_triggered_avspo_gives_nonzero_advantage_with_the_right_sign(c, g, strategy):
    assume(not (strategy == "fixed" and c == 0.5))  # a fixed virtual value equal to c adds no spread
    est = advantages.make("avspo", all_wrong_max_share=None, virtual_sample_strategy=strategy,
                          acr_threshold_init=0.1)
    out = est(torch.full((2, g), c))  # every group collapsed: signal 1 > tau 0.1, so both are triggered
    assert out.metrics["avspo/frac_groups_augmented"] == 1.0
    if c >= 0.5:  # correct: every real sample is pushed up
        assert (out.advantages > 0).all()
    else:  # wrong: every real sample is pushed down
        assert (out.advantages < 0).all()


AGGREGATION_KWARGS = [
    {"aggregation": "token_mean"},
    {"aggregation": "seq_mean_token_mean"},
    {"aggregation": "seq_mean_token_sum_norm", "max_completion_length": 6},
    {"aggregation": "token_mean", "dual_clip": 3.0, "eps_high": 0.28},
]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), junk=finite, kwargs=st.sampled_from(AGGREGATION_KWARGS))
def test_masked_tokens_never_change_the_loss_or_its_gradient(seed, junk, kwargs):
    n, t = 4, 6
    logp = generator_tensor(seed, n, t, scale=0.3) - 1.0
    old = logp + generator_tensor(seed + 1, n, t, scale=0.3)
    adv = generator_tensor(seed + 2, n)
    mask = generator_tensor(seed + 3, n, t) > 0
    results = []
    for fill in (None, junk):  # the same batch, then with anything written into the padding
        lp, ol = logp.clone(), old.clone()
        if fill is not None:
            lp[~mask], ol[~mask] = fill, -fill
        lp.requires_grad_(True)
        loss, _ = losses.policy_loss(lp, ol, adv, mask, **kwargs)
        kl, _ = losses.kl_penalty(lp, ol, mask)
        total = loss + 0.1 * losses.aggregate(kl, mask)
        (grad,) = torch.autograd.grad(total, lp)
        results.append((total.detach(), grad))
    torch.testing.assert_close(results[1][0], results[0][0], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(results[1][1], results[0][1], atol=1e-6, rtol=1e-6)
    assert (results[1][1][~mask] == 0).all()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), kwargs=st.sampled_from(AGGREGATION_KWARGS))
def test_gradient_accumulation_over_4_micro_batches_equals_one_batch(seed, kwargs):
    n, t = 8, 6
    base = generator_tensor(seed, n, t, scale=0.5) - 1.0
    old = base + generator_tensor(seed + 1, n, t, scale=0.3)  # off-policy enough to clip some tokens
    adv = generator_tensor(seed + 2, n)
    lengths = torch.randint(0, t + 1, (n,), generator=torch.Generator().manual_seed(seed + 3))
    mask = torch.arange(t) < lengths.unsqueeze(1)  # (N, T), some sequences may be empty
    whole = base.clone().requires_grad_(True)
    losses.policy_loss(whole, old, adv, mask, **kwargs)[0].backward()
    accumulated = base.clone().requires_grad_(True)
    counts = {"num_tokens": mask.sum(), "num_sequences": n}  # of the whole optimizer batch
    for rows in torch.arange(n).chunk(4):
        loss, _ = losses.policy_loss(accumulated[rows], old[rows], adv[rows], mask[rows], **counts, **kwargs)
        loss.backward()
    torch.testing.assert_close(accumulated.grad, whole.grad, atol=1e-5, rtol=0)


def test_accumulation_without_batch_counts_would_differ():
    # The counterpart of the property above: micro-batch-local counts give a different gradient, so the
    # equality there is owed to num_tokens, not to the data.
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    whole = torch.zeros(2, 3, requires_grad=True)
    losses.policy_loss(whole, whole.detach(), torch.ones(2), mask)[0].backward()
    parts = torch.zeros(2, 3, requires_grad=True)
    for rows in ([0], [1]):
        losses.policy_loss(parts[rows], parts[rows].detach(), torch.ones(1), mask[rows])[0].backward()
    assert not torch.allclose(parts.grad, whole.grad)
    assert whole.grad[0, 0].item() == pytest.approx(-0.25)  # -A / 4 tokens of the whole batch
    assert parts.grad[0, 0].item() == pytest.approx(-1 / 3)  # -A / 3 tokens of its own micro-batch
