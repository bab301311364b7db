"""`grposcope train`: YAML config, --name value overrides, presets, and errors without a traceback."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from grposcope.cli import app
from grposcope.presets import preset


def test_train_from_yaml_with_overrides(tmp_path, tiny_model_dir):
    config = tmp_path / "run.yaml"
    config.write_text(
        f"model_name_or_path: {tiny_model_dir}\n"
        f"output_dir: {tmp_path / 'out'}\n"
        "dataset_name: 'arithmetic:easy'\n"
        "dataset_size: 8\n"
        "eval_size: 2\n"
        "num_generations: 2\n"
        "per_device_train_batch_size: 4\n"
        "max_completion_length: 4\n"
        "max_steps: 5\n"
    )
    result = CliRunner().invoke(app, ["train", "--config", str(config), "--max_steps", "2", "--use_avspo"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2]  # the command line's max_steps won over the YAML's 5
    assert "avspo/tau" in lines[0]  # --use_avspo, a bare flag, turned AVSPO on
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert "eval/accuracy before" in summary and "eval/accuracy after" in summary


def test_bad_options_exit_1_with_the_reason():
    runner = CliRunner()
    result = runner.invoke(app, ["train", "--num_generation", "8"])
    assert result.exit_code == 2 and "did you mean num_generations?" in result.output
    result = runner.invoke(app, ["train", "--num_generations", "1"])
    assert result.exit_code == 2 and "num_generations must be a whole number in [2, 1,000,000]" in result.output
    result = runner.invoke(app, ["train", "--preset", "nope"])
    assert result.exit_code == 2 and "unknown preset 'nope'; known: quickstart" in result.output


def test_quickstart_preset_is_a_valid_config():
    from grposcope import GRPOConfig

    config = GRPOConfig.from_dict(preset("quickstart"))
    assert config.advantage_estimator == "avspo" and config.model_name_or_path.startswith("embedded:")
