"""Every registered estimator through the same generic call the trainer will make."""

from __future__ import annotations

import io

import pytest
import torch

from grposcope.core import advantages
from grposcope.core.advantages import AdvantageEstimator, AdvantageOutput


def test_the_registry_holds_the_documented_estimators():
    assert advantages.available() == ["avspo", "dr_grpo", "grpo", "pool", "rloo"]


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
