"""LiveDiagnosis with the real detectors: a finding said once, said again only when it worsens, findings.json, and
the state's round trip. (The trainers and the stock TRL callback: tests/test_live_diagnosis.py.)"""

from __future__ import annotations

import json
import logging

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
    saved = json.loads((tmp_path / "findings.json").read_text())["runs"][0]
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
