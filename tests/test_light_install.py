"""A plain `pip install grposcope` (issue 55): the CLI reads, diagnoses and reports every log format without torch,
transformers or the other extras, and an optional dependency a command meets is one line naming the extra that
installs it, never a traceback. Each command runs in a subprocess through tests/light_install.py, which makes
the extras look absent and fails if one is imported anyway. scripts/test_wheel.sh repeats the main cases in a
clean environment built from the wheel alone."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REAL = HERE / "fixtures" / "real_runs"
LIGHT = [sys.executable, str(HERE / "light_install.py")]
EVERY_EXTRA = "tensorboard,wandb,google,matplotlib"  # beside light_install.py's own list (torch, pyarrow, ...)


def light(*args: str, block_more: str = EVERY_EXTRA, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "BLOCK_MORE": block_more, "COLUMNS": "200"}
    return subprocess.run([*LIGHT, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def _verl_logger(folder: Path) -> Path:
    path = folder / "grpo" / "run.jsonl"  # verl's file logger: <project>/<experiment>.jsonl of {"step", "data"}
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps({"step": s, "data": {"critic/score/mean": 0.1, "actor/entropy": 0.5,
                                                            "critic/score/frac_zero_std": 0.8}}) + "\n"
                            for s in range(1, 21)))
    return path.parent


CASES = {  # what a user gives -> what the header line says was read
    "grposcope": (HERE / "fixtures" / "runs" / "quickstart", "a grposcope run"),
    "TRL state beside TensorBoard events": (HERE / "fixtures" / "trl_tiny_run", "TRL"),
    "TRL state beside completions": (HERE.parent / "experiments" / "results" / "stock_report" / "trl_out",
                                     "completions/ not read, it needs torch"),
    "TRL console": (REAL / "xling-openrs-console", "console"),
    "verl console": (REAL / "v-retool-opd-3b-tokkl002", "output.log"),
    "JSON list and eval JSON": (REAL / "gsm8k-grpo-qwen3-g4", "joined on the step"),
    "CSV": (REAL / "incident-ops-grpo", "reward_log.csv"),
    "JSON wrapper": (REAL / "physics-slm-grpo5", "training_metrics.json"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_diagnose_reads_each_format_without_the_extras(case):
    path, header = CASES[case]
    result = light("diagnose", str(path))
    assert result.returncode == 0, result.stderr[-2000:]
    assert header in result.stdout.splitlines()[0], result.stdout[:500]


def test_a_verl_file_logger_reads_without_the_extras(tmp_path):
    result = light("diagnose", str(_verl_logger(tmp_path)))
    assert result.returncode == 0 and "advantage_collapse" in result.stdout, result.stderr[-2000:]


def test_report_without_matplotlib_writes_everything_but_the_plots(tmp_path):
    result = light("report", str(HERE / "fixtures" / "runs" / "quickstart"), "--output", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "pip install 'grposcope[report]'" in result.stdout
    written = sorted(p.name for p in (tmp_path / "r").iterdir())
    assert written == ["findings.json", "report.html", "report.md", "steps.csv"]
    assert "grposcope[report]" in (tmp_path / "r" / "report.md").read_text()


def test_report_with_matplotlib_and_no_torch_draws(tmp_path):
    result = light("report", str(HERE / "fixtures" / "runs" / "quickstart"), "--output", str(tmp_path / "r"),
                   block_more="tensorboard,wandb")
    assert result.returncode == 0 and list((tmp_path / "r").glob("*.png")), result.stderr[-2000:]


def test_forecast_without_torch_costs_the_closed_form_samplers(tmp_path):
    probe = tmp_path / "probe.jsonl"
    probe.write_text("".join(json.dumps({"prompt": str(i), "k": 16, "successes": c}) + "\n"
                             for i, c in enumerate((0, 3, 8, 16, 5, 1))))
    result = light("forecast", str(probe), "--group_sizes", "4,8", "--budget", "64")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "fixed" in result.stdout and "dynamic" in result.stdout and "grposcope[train]" in result.stdout
    result = light("forecast", str(probe), "--samplers", "budgeted")
    assert result.returncode == 2 and "pip install 'grposcope[train]'" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def _one_line(result: subprocess.CompletedProcess, extra: str) -> None:
    assert result.returncode == 2, (result.stdout[-500:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr and f"pip install 'grposcope[{extra}]'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_tensorboard_folder_without_tensorboard_is_one_line_naming_the_extra():
    _one_line(light("diagnose", str(HERE / "fixtures" / "trl_tiny_run" / "runs")), "tensorboard")


def test_a_wandb_run_without_wandb_is_one_line_naming_the_extra(tmp_path):
    run = tmp_path / "wandb" / "offline-run-20261128_000000-abc" / "run-abc.wandb"
    run.parent.mkdir(parents=True)
    payload = b"\x08\x01"
    run.write_bytes(b":W&B" + b"\x00\x00\x00" + struct.pack("<IHB", 0, len(payload), 1) + payload)
    _one_line(light("diagnose", str(tmp_path)), "wandb")


@pytest.mark.parametrize("args", [["train", "--max_steps", "1"], ["simulate", "--steps", "2"],
                                  ["eval", "--model", "x", "--dataset", "arithmetic"]])
def test_commands_that_need_torch_say_the_extra_in_one_line(args, tmp_path):
    _one_line(light(*args, cwd=tmp_path), "train")


def test_version_and_help_need_no_extra():
    for args in (["--version"], ["--help"], ["diagnose", "--help"]):
        result = light(*args)
        assert result.returncode == 0 and "Traceback" not in result.stderr, (args, result.stderr[-1000:])


def test_the_forecasts_record_of_the_closed_form_samplers_agrees_with_their_classes():
    import inspect

    from grposcope.reports.forecast import FORMULA_PROPERTIES, FORMULAS
    from grposcope.sampling import SAMPLERS

    assert set(FORMULA_PROPERTIES) == set(FORMULAS)
    for name, recorded in FORMULA_PROPERTIES.items():
        cls = SAMPLERS.get(name)
        for key, value in recorded.items():
            actual = getattr(cls, key) if key in ("closed_form", "per_prompt") else \
                inspect.signature(cls).parameters[key].default
            assert actual == value, (name, key)


def test_an_optional_dependency_is_named_with_its_extra():
    from grposcope.errors import missing_extra

    assert missing_extra(ModuleNotFoundError("No module named 'peft'", name="peft")) == (
        "this needs peft, which a plain install leaves out: pip install 'grposcope[peft]'")
    assert "grposcope[tasks]" in missing_extra(ModuleNotFoundError("x", name="reasoning_gym.factory"))
    said = ImportError("report_to='tensorboard' needs the tensorboard package: pip install 'grposcope[tensorboard]'",
                       name="tensorboard")
    assert missing_extra(said) == str(said)  # the raiser named the extra: its words stand
    assert missing_extra(ModuleNotFoundError("No module named 'numpyy'", name="numpyy")) is None
    assert missing_extra(ValueError("x")) is None


def test_report_to_tensorboard_without_it_names_the_extra(monkeypatch):
    import builtins

    from grposcope.errors import missing_extra
    from grposcope.logging.backends import TensorBoardBackend

    real = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name.startswith("torch.utils.tensorboard"):
            raise ModuleNotFoundError("No module named 'tensorboard'", name="tensorboard")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    with pytest.raises(ImportError) as caught:
        TensorBoardBackend("/nonexistent-dir")
    assert "pip install 'grposcope[tensorboard]'" in missing_extra(caught.value)
