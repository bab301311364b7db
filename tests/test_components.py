"""grposcope.components: what every host shares. Each chosen component is built once per run (the config
check's instance is the run's), and the TRL integration loads none of the one-machine trainer's loop."""

from __future__ import annotations

import subprocess
import sys

from conftest import make_tiny_llama, make_tiny_tokenizer

from grposcope.components.build import build
from grposcope.core.registry import Registry
from grposcope.trainer.config import GRPOConfig


def _counting(monkeypatch):
    counts: dict[tuple[str, str], int] = {}
    real = Registry.make

    def make(self, name, **params):
        counts[(self.kind, name)] = counts.get((self.kind, name), 0) + 1
        return real(self, name, **params)

    monkeypatch.setattr(Registry, "make", make)
    return counts


def test_a_run_builds_its_estimator_sampler_and_loss_once(tmp_path, monkeypatch):
    from grposcope import GRPOTrainer

    counts = _counting(monkeypatch)
    config = GRPOConfig(output_dir=str(tmp_path / "run"), per_device_train_batch_size=4, num_generations=4,
                        max_completion_length=4, max_steps=1, use_avspo=True, report_to="none", temperature=1.0)
    trainer = GRPOTrainer(model=make_tiny_llama(), processing_class=make_tiny_tokenizer(), args=config,
                          reward_funcs=lambda completions, **_: [float(len(c) % 2) for c in completions],
                          train_dataset=[{"prompt": f"What is {i} + 1 ?"} for i in range(4)])
    trainer.train()
    assert {key: n for key, n in counts.items() if key[0] != "detector"} == {
        ("advantage estimator", "avspo"): 1, ("sampler", "fixed"): 1, ("policy loss", "grpo"): 1,
        ("rollout backend", "transformers"): 1}


def test_the_checked_instance_is_handed_out_once_and_only_while_its_options_hold(tmp_path):
    config = GRPOConfig(output_dir=str(tmp_path), use_avspo=True)
    first = build(config, "advantage_estimator")
    second = build(config, "advantage_estimator")  # a second run from the same config: its own instance
    assert first is not second and type(first) is type(second)
    changed = GRPOConfig(output_dir=str(tmp_path), use_avspo=True)
    changed.virtual_sample_alpha = 0.9  # changed after its check: built again, with the new value
    assert build(changed, "advantage_estimator").alpha == 0.9


def test_the_trl_integration_loads_no_trainer_loop():
    code = ("import sys, grposcope.integrations.trl\n"
            "print(sorted(m for m in sys.modules if m.startswith('grposcope.trainer')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    loaded = eval(result.stdout.strip().splitlines()[-1])
    assert "grposcope.trainer.trainer" not in loaded and "grposcope.trainer.setup" not in loaded, loaded
    assert "grposcope.trainer.checkpoint" not in loaded and "grposcope.trainer.options" not in loaded, loaded
