"""verl 0.9.1's FSDP actor step with GRPOSCOPE_SKIP_NO_SIGNAL_STEPS=1: no optimizer step on an exactly-zero
gradient (grposcope.integrations.verl_skip). Runs verl's own FSDPEngine.optimizer_step, on a stand-in engine that
holds a plain module (verl's non-FSDP branch: torch's clip_grad_norm_), in .venv-verl (scripts/test_verl.sh)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

transformer_impl = pytest.importorskip("verl.workers.engine.fsdp.transformer_impl",
                                       reason="needs verl 0.9.1: bash scripts/test_verl.sh")

from grposcope.integrations import verl_skip  # noqa: E402

FSDPEngine = transformer_impl.FSDPEngine


def engine() -> SimpleNamespace:
    torch.manual_seed(0)
    module = torch.nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-2)
    torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)  # wraps optimizer.step, as verl's does
    return SimpleNamespace(module=module, optimizer=optimizer, optimizer_config=SimpleNamespace(clip_grad=1.0),
                           _qat_enabled=False)


def real_then_zero(e: SimpleNamespace) -> tuple[dict, dict]:
    """One step on a real gradient, then a zero gradient through verl's optimizer_step; the state in between."""
    e.module(torch.ones(3, 4)).sum().backward()
    FSDPEngine.optimizer_step(e)
    weights, state = copy.deepcopy(e.module.state_dict()), copy.deepcopy(e.optimizer.state_dict())
    e.optimizer.zero_grad(set_to_none=False)  # verl's optimizer_zero_grad, then a loss with no signal
    (0.0 * e.module(torch.ones(3, 4)).sum()).backward()
    grad_norm = FSDPEngine.optimizer_step(e)
    assert grad_norm == 0.0
    return weights, state


def unchanged(e: SimpleNamespace, weights: dict, state: dict) -> bool:
    now = e.optimizer.state_dict()["state"]
    return all(torch.equal(v, weights[k]) for k, v in e.module.state_dict().items()) and all(
        torch.equal(torch.as_tensor(v), torch.as_tensor(state["state"][i][n])) for i in now for n, v in now[i].items())


@pytest.mark.parametrize("on", [True, False])
def test_a_zero_gradient_step_leaves_the_actor_unchanged_only_when_asked(monkeypatch, on):
    assert verl_skip.install()
    monkeypatch.setenv(verl_skip.ENV, "1" if on else "0")
    before = verl_skip.skipped_steps
    e = engine()
    weights, state = real_then_zero(e)
    assert unchanged(e, weights, state) == on  # off: AdamW replays step 1 (verl's stock behaviour)
    assert verl_skip.skipped_steps - before == int(on)
    assert "step" in vars(e.optimizer) and e.optimizer.step.__name__ != "step_with_signal"  # the scheduler's
    # wrapper is back in place, not ours


def test_the_variable_wraps_verl_actor_step_where_verl_loads_the_plugin():
    code = ("import verl\nfrom verl.workers.engine.fsdp.transformer_impl import FSDPEngine\n"
            "print(getattr(FSDPEngine.optimizer_step, '_grposcope', False))")

    def wrapped(value: str) -> str:
        env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "none",
               "VERL_USE_EXTERNAL_MODULES": "grposcope.integrations.verl", verl_skip.ENV: value}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.strip().splitlines()[-1]

    assert wrapped("1") == "True"
    assert wrapped("0") == "False"  # not asked for: verl's method as it ships
