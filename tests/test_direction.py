"""On a real (tiny, randomly initialised) Llama: one SGD step moves a completion's log-prob the way its
advantage asks, for every aggregation; and accumulating 4 micro-batches gives the one-batch gradient."""

from __future__ import annotations

import pytest
import torch

from grposcope.core import losses

PROMPT, COMPLETION = 5, 6


def completion_logp(model, ids: torch.Tensor) -> torch.Tensor:
    """Log-probs of the completion tokens.  ids (N, PROMPT + COMPLETION) -> (N, COMPLETION)."""
    logits = model(input_ids=ids).logits[:, PROMPT - 1 : -1]  # (N, COMPLETION, V): position t predicts t+1
    return losses.selective_log_probs(logits, ids[:, PROMPT:])


def logp_change_after_one_sgd_step(model, loss_fn, sign: float, **aggregation) -> float:
    """One completion with advantage `sign`, one SGD step (lr 0.5) on `loss_fn`'s loss, on-policy; returns how
    far the completion's summed log-prob moved."""
    ids = torch.randint(0, 64, (1, PROMPT + COMPLETION), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(1, COMPLETION)
    before = completion_logp(model, ids)
    loss, _ = loss_fn(before, before.detach(), torch.tensor([sign]), mask, **aggregation)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        return (completion_logp(model, ids) - before.detach()).sum().item()


@pytest.mark.parametrize("aggregation", losses.AGGREGATIONS)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_one_sgd_step_follows_the_advantage(tiny_llama, aggregation, sign):
    change = logp_change_after_one_sgd_step(tiny_llama, losses.policy_loss, sign, aggregation=aggregation,
                                            max_completion_length=COMPLETION)
    assert sign * change > 1e-3, f"log-prob changed by {change:+.5f} for advantage {sign:+}"


@pytest.mark.parametrize("aggregation", losses.AGGREGATIONS)
def test_accumulated_micro_batches_match_one_batch_on_the_model(tiny_llama, aggregation):
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 64, (8, PROMPT + COMPLETION), generator=gen)
    lengths = torch.tensor([6, 1, 4, 6, 2, 5, 3, 6])
    mask = (torch.arange(COMPLETION) < lengths.unsqueeze(1)).float()  # (8, COMPLETION), right-padded
    adv = torch.randn(8, generator=gen)
    with torch.no_grad():  # a slightly different "old" policy, so that some ratios are clipped
        old = completion_logp(tiny_llama, ids) + 0.3 * torch.randn(8, COMPLETION, generator=gen)
    kwargs = {"aggregation": aggregation, "max_completion_length": COMPLETION}

    tiny_llama.zero_grad()
    losses.policy_loss(completion_logp(tiny_llama, ids), old, adv, mask, **kwargs)[0].backward()
    whole = [p.grad.clone() for p in tiny_llama.parameters()]

    tiny_llama.zero_grad()
    for rows in torch.arange(8).chunk(4):
        logp = completion_logp(tiny_llama, ids[rows])
        loss, _ = losses.policy_loss(
            logp, old[rows], adv[rows], mask[rows], num_tokens=mask.sum(), num_sequences=8, **kwargs
        )
        loss.backward()
    for g_whole, p in zip(whole, tiny_llama.parameters()):
        torch.testing.assert_close(p.grad, g_whole, atol=1e-5, rtol=0)
