"""Every registered estimator through the same generic call the trainer will make."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
import torch

from grposcope.core import advantages
from grposcope.core.advantages import AdvantageEstimator, AdvantageOutput
from grposcope.core.losses import POLICY_LOSSES
from grposcope.sampling import SAMPLERS


@pytest.mark.parametrize("registry", [advantages.ESTIMATORS, SAMPLERS, POLICY_LOSSES], ids=lambda r: r.kind)
def test_every_registered_entry_is_documented_in_algorithms_md(registry):
    """docs/algorithms.md has a section per entry, headed with its name (a new entry fails until it has one)."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "algorithms.md").read_text()
    headed = set(re.findall(r"^### `(\w+)`", text, re.M))
    assert registry.names() and not set(registry.names()) - headed, \
        f"no section in docs/algorithms.md for {sorted(set(registry.names()) - headed)}"


@pytest.mark.parametrize("name", advantages.available())
def test_generic_call_shape_metrics_and_checkpointable_state(name):
    est = advantages.make(name)  # defaults only: every estimator must be usable as is
    assert isinstance(est, AdvantageEstimator)
    batches = [
        torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]]),
        torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]),
    ]
    for rewards in batches:
        pool = [torch.cat([row, torch.tensor([1.0, 0.0])]) for row in rewards]
        out = est(rewards, pool=pool)
        assert isinstance(out, AdvantageOutput)
        assert out.advantages.shape == rewards.shape and out.advantages.dtype == torch.float32
        assert torch.isfinite(out.advantages).all()
        assert all(isinstance(k, str) and isinstance(v, float) for k, v in out.metrics.items())
    # The state goes through torch.save / torch.load(weights_only=True), as a checkpoint will.
    buffer = io.BytesIO()
    torch.save(est.state_dict(), buffer)
    buffer.seek(0)
    twin = advantages.make(name)
    twin.load_state_dict(torch.load(buffer, weights_only=True))
    nxt = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    a, b = est(nxt), twin(nxt)
    assert torch.equal(a.advantages, b.advantages) and a.metrics == b.metrics


# --- policy losses ----------------------------------------------------------------------------------------

from grposcope.core import losses  # noqa: E402


@pytest.mark.parametrize("aggregation", losses.AGGREGATIONS)
@pytest.mark.parametrize("name", losses.POLICY_LOSSES.names())
def test_every_policy_loss_through_the_generic_call(name, aggregation):
    loss_fn = losses.POLICY_LOSSES.make(name)  # defaults only: every loss must be usable as is
    gen = torch.Generator().manual_seed(0)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])  # (3, 3), right-padded
    old = -torch.rand(3, 3, generator=gen) - 0.1  # (3, 3)
    adv = torch.tensor([1.0, -0.5, 2.0])
    kwargs = {"aggregation": aggregation, "max_completion_length": 3, "num_tokens": mask.sum(), "num_sequences": 3}
    logp = old.clone().requires_grad_(True)  # on-policy: ratio 1 everywhere
    loss, metrics = loss_fn(logp, old, adv, mask, **kwargs)
    assert loss.dim() == 0 and torch.isfinite(loss)
    assert "loss/policy" in metrics and all(isinstance(v, float) for v in metrics.values())
    loss.backward()
    real = mask.bool()
    # on-policy, every real token's gradient pushes its log-prob the way its advantage asks; padding gets none
    assert (torch.sign(-logp.grad[real]) == torch.sign(adv.unsqueeze(1).expand(3, 3)[real])).all()
    assert (logp.grad[~real] == 0).all()
    # what padding holds never matters, not even inf
    garbage = torch.where(real, old, torch.full_like(old, float("-inf")))
    again, _ = loss_fn(garbage.clone().requires_grad_(True), torch.where(real, old, torch.zeros_like(old)), adv,
                       mask, **kwargs)
    torch.testing.assert_close(again, loss.detach(), atol=1e-6, rtol=0)
