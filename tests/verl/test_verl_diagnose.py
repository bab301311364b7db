"""`grposcope diagnose` on the metrics file that verl 0.9.1's own `Tracking` writes (`trainer.logger=['file']`),
under the names verl gives them: a run whose actor gradient is exactly 0 on a stretch of steps (every group
collapsed) and whose responses hit the length cap. Runs in .venv-verl (scripts/test_verl.sh)."""

from __future__ import annotations

import json
import math

import pytest

tracking = pytest.importorskip("verl.utils.tracking", reason="needs verl 0.9.1: bash scripts/test_verl.sh")

from grposcope.diagnose import diagnose  # noqa: E402
from grposcope.runs import load_run, run_kind  # noqa: E402

STEPS = 40


def verl_metrics(step: int) -> dict[str, float]:
    """What verl's compute_data_metrics and the actor log, for a run that collapses from step 11 to step 30."""
    empty = 11 <= step <= 30
    return {"critic/score/mean": 0.0 if empty else 0.3 + 0.002 * step, "critic/score/max": 0.0 if empty else 1.0,
            "critic/score/min": 0.0, "actor/entropy": 0.9 - 0.002 * step, "actor/grad_norm": 0.0 if empty else
            0.5 + 0.01 * (step % 3), "actor/pg_loss": 0.0 if empty else -0.01, "actor/lr": 1e-6,
            "response_length/mean": 900.0, "response_length/max": 1024.0, "response_length/clip_ratio": 0.35,
            "actor/pg_clipfrac": 0.001, "timing_s/step": 60.0, "critic/advantages/mean": 0.0}


def test_diagnose_reads_verl_trackings_file_logger(tmp_path, monkeypatch):
    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(tmp_path))
    logger = tracking.Tracking(project_name="proj", experiment_name="exp", default_backend=["file"])
    for step in range(1, STEPS + 1):
        data = verl_metrics(step)
        if step % 10 == 0:
            data["val-core/openai/gsm8k/reward/mean@1"] = 0.3
        logger.log(data=data, step=step)
    del logger  # closes the file (Tracking.__del__ finishes its backends)
    path = tmp_path / "proj" / "exp.jsonl"
    first = json.loads(path.read_text().splitlines()[0])
    assert set(first) == {"step", "data"}  # verl's own layout
    assert run_kind(tmp_path / "proj") == "verl-logger"
    run = load_run(tmp_path / "proj")
    assert run.values("grad_norm")[10] == 0.0 and run.values("entropy/mean")[0] == pytest.approx(0.898)
    assert [v for v in run.values("eval/accuracy") if not math.isnan(v)] == [0.3] * 4
    assert run.unknown == {"critic/advantages/mean": STEPS}
    by = {f.detector: f for f in diagnose(run).findings}
    assert by["no_signal_steps"].severity == "critical" and by["no_signal_steps"].step == 11
    assert "steps 11-30" in by["no_signal_steps"].evidence[0]
    assert by["truncation"].severity == "critical"
