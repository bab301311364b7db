"""The detectors during a run: LiveDiagnosis on its own, inside grposcope's trainer, and as a TrainerCallback in
a stock TRL GRPOTrainer (whose TensorBoard folder and trainer_state.json `grposcope diagnose` then reads)."""

from __future__ import annotations

import json
import logging
import math

import pytest

from grposcope.diagnose import Options
from grposcope.diagnose.live import LiveDiagnosis


def no_signal_step(step: int) -> dict:
    """A TRL log of a step whose every group collapsed: reward 0, frac_reward_zero_std 1, grad_norm exactly 0."""
    return {"reward": 0.0, "frac_reward_zero_std": 1.0, "grad_norm": 0.0, "loss": 0.0, "learning_rate": 1e-6}


def test_a_finding_is_said_once_and_again_only_when_it_worsens(tmp_path, caplog):
    live = LiveDiagnosis("run", Options(), every=4, output_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="grposcope"):
        said = []
        for step in range(1, 21):
            grad = 0.0 if step in (5, 10, 15) else 1.0 + 0.01 * step  # 1 of 8 at step 8: a warning ...
            said += live.add(step, {"grad_norm": grad, "frac_reward_zero_std": 0.1})
        for step in range(21, 33):  # ... then every step empty: 7 of 24 at step 24, critical
            said += live.add(step, no_signal_step(step))
    kinds = [(f.detector, f.severity) for f in said if f.detector == "no_signal_steps"]
    assert kinds == [("no_signal_steps", "warning"), ("no_signal_steps", "critical")]
    lines = [r.getMessage() for r in caplog.records if "no_signal_steps" in r.getMessage()]
    assert len(lines) == 2 and lines[0].startswith("grposcope diagnose at step 8: [warning] no_signal_steps")
    result = live.finish()
    saved = json.loads((tmp_path / "findings.json").read_text())
    assert [f["detector"] for f in saved["findings"]] == [f.detector for f in result.findings]
    assert saved["cost"]["steps_without_signal"] == 15 and "critical" in {f["severity"] for f in saved["findings"]}


def test_the_live_state_survives_a_round_trip():
    live = LiveDiagnosis("run", every=5)
    for step in range(1, 8):
        live.add(step, no_signal_step(step))
    again = LiveDiagnosis("run", every=5)
    again.load_state_dict(json.loads(json.dumps(live.state_dict())))
    assert again.run().series.keys() == live.run().series.keys() and again.reported == live.reported
    assert again.add(8, no_signal_step(8)) == live.add(8, no_signal_step(8))


def always_zero(prompts, completions, **columns):
    return [0.0] * len(completions)


def test_grposcopes_trainer_writes_its_findings(tmp_path, tiny_llama, tiny_tokenizer):
    from grposcope import GRPOConfig, GRPOTrainer

    data = [{"prompt": f"What is {a} + {b} ?", "answer": str(a + b)} for a, b in [(1, 2), (3, 4), (2, 2), (5, 1)]]
    args = GRPOConfig(output_dir=str(tmp_path / "run"), num_generations=4, per_device_train_batch_size=4,
                      max_completion_length=6, learning_rate=1e-3, max_steps=4, logging_steps=1, seed=0,
                      diagnose_every=2, skip_no_signal_steps=False)
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, args=args, train_dataset=data,
                          reward_funcs=always_zero)
    trainer.train()
    saved = json.loads((tmp_path / "run" / "findings.json").read_text())
    by = {f["detector"]: f for f in saved["findings"]}
    assert by["no_signal_steps"]["severity"] == "critical" and by["no_signal_steps"]["step"] == 1
    assert saved["cost"]["samples_share"] == 1.0


def test_a_stock_trl_run_with_the_callback(tmp_path):
    """A stock trl.GRPOTrainer, callbacks=[DiagnoseCallback()], every reward 0: findings as they fire, findings.json
    and findings.md at the end; its TensorBoard events and trainer_state.json read back by grposcope diagnose."""
    trl = pytest.importorskip("trl")
    pytest.importorskip("tensorboard")
    from conftest import make_tiny_llama, make_tiny_tokenizer
    from datasets import Dataset
    from typer.testing import CliRunner

    from grposcope.cli import app
    from grposcope.integrations.trl_callback import DiagnoseCallback

    out = tmp_path / "trl_out"
    config = trl.GRPOConfig(output_dir=str(out), per_device_train_batch_size=8, num_generations=4,
                            max_completion_length=6, max_steps=6, logging_steps=1, save_strategy="steps",
                            save_steps=6, report_to=["tensorboard"], use_cpu=True, bf16=False, learning_rate=1e-3,
                            seed=0, disable_tqdm=True)
    data = Dataset.from_list([{"prompt": f"What is {i} + {i} ?"} for i in range(12)])
    callback = DiagnoseCallback(every=2)
    trainer = trl.GRPOTrainer(model=make_tiny_llama(), reward_funcs=always_zero,
                              args=config, train_dataset=data, processing_class=make_tiny_tokenizer(),
                              callbacks=[callback])
    trainer.train()
    saved = json.loads((out / "findings.json").read_text())
    by = {f["detector"]: f for f in saved["findings"]}
    assert by["no_signal_steps"]["severity"] == "critical"
    assert "6 of 6 logged steps" in by["no_signal_steps"]["evidence"][0]
    assert by["advantage_collapse"]["severity"] == "critical" and "all-wrong" in by["advantage_collapse"]["title"]
    assert "`no_signal_steps`" in (out / "findings.md").read_text()
    for log in (out / "runs", out / "checkpoint-6" / "trainer_state.json"):  # what the run itself wrote
        result = CliRunner().invoke(app, ["diagnose", str(log), "--json", str(tmp_path / "f.json")])
        assert result.exit_code == 0, result.output
        read = {f["detector"]: f for f in json.loads((tmp_path / "f.json").read_text())}
        assert read["no_signal_steps"]["severity"] == "critical" and read["no_signal_steps"]["step"] == 1
    assert not math.isnan(saved["cost"]["samples_share"])
