"""Reliability, round 5 (issue 56): each case a probe found, as the smallest input that shows it; each failed before
its change. docs/reliability.md's table has the message a real run printed."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from grposcope.cli import app

FIXTURES = Path(__file__).parent / "fixtures" / "runs"
HOSTILE = "run\x1b]0;pwned\x07\x1b[2J<b>x<i>"  # retitles and clears a terminal that prints it; HTML in a page


def run_stock_callback(output_dir, run_name: str, logs_at) -> None:
    """Drives a DiagnoseCallback (every 2 steps) as a stock TRL run of 6 logged steps would: `logs_at(step)`
    is what step `step` logs."""
    from grposcope.integrations.trl_callback import DiagnoseCallback

    args = SimpleNamespace(output_dir=str(output_dir), run_name=run_name, num_generations=4,
                           max_completion_length=8, report_to=[])
    state = SimpleNamespace(max_steps=6, log_history=[], is_world_process_zero=True, global_step=0)
    callback = DiagnoseCallback(every=2)
    callback.on_train_begin(args, state, None)
    for step in range(1, 7):
        state.global_step = step
        callback.on_log(args, state, None, logs=logs_at(step))
    callback.on_train_end(args, state, None)


def test_escapes_and_html_in_a_run_name_reach_no_file_raw(tmp_path):
    import warnings

    shutil.copytree(FIXTURES / "quickstart", tmp_path / HOSTILE)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        result = CliRunner().invoke(app, ["report", str(tmp_path / HOSTILE), "-o", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    glyphs = [str(w.message) for w in said if "missing from font" in str(w.message)]
    assert not glyphs, glyphs  # the plots' titles and legends show the name escaped too
    for name in ("report.md", "steps.csv", "report.html", "findings.json"):
        text = (tmp_path / "r" / name).read_text(encoding="utf-8")
        assert "\x1b" not in text and "\x07" not in text, name
        if name.endswith((".md", ".html")):  # JSON and CSV hold the name as data; the pages show it as text
            assert "<b>x" not in text, name
    assert "\\x1b" in (tmp_path / "r" / "report.md").read_text()  # shown, not dropped


def test_the_callbacks_findings_md_shows_a_hostile_run_name_as_text(tmp_path):
    pytest.importorskip("transformers")
    run_stock_callback(tmp_path, HOSTILE, lambda step: {"reward": 0.0, "reward_std": 0.0, "grad_norm": 0.0})
    text = (tmp_path / "findings.md").read_text(encoding="utf-8")
    first = text.splitlines()[0]
    assert "\x1b" not in text and "\x07" not in text and "<b>" not in first and "&lt;b>" in first


@pytest.mark.parametrize("args, message", [
    (["--kl_bound", "0"], "--kl_bound must be > 0 (the mean per-token KL above which the KL-drift alarm fires"),
    (["--num_generations", "1"], "--num_generations must be a whole number in [2, 1,000,000] (completions per"),
    (["--num_generations", "1000000000000"], "--num_generations must be a whole number in [2, 1,000,000]"),
    (["--only", ",,"], "names no detector"),
    (["--gpus", "100000000000000000000"], "--gpus must be a whole number in [1, 1,000,000]"),
    (["--entropy_floor", "nan"], "--entropy_floor: got nan; give a finite number (>= 0)"),
    (["--gpus", "8", "--gpu_hour_cost", "inf"], "--gpu_hour_cost: got inf; give a finite number (>= 0)"),
])
def test_diagnose_refuses_what_train_refuses_in_one_line(args, message):
    result = CliRunner().invoke(app, ["diagnose", str(FIXTURES / "quickstart"), *args])
    assert result.exit_code == 2 and message in result.output, result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1


def test_diagnose_says_what_it_did_not_do():
    quickstart = str(FIXTURES / "quickstart")
    result = CliRunner().invoke(app, ["diagnose", quickstart, quickstart, "--gpu_hour_cost", "2"])
    assert result.exit_code == 0
    assert "need --gpus: no money figure" in result.output and "given twice: each is diagnosed once" in result.output
    assert result.output.count("quickstart  (") == 1


def test_a_huge_integer_a_deep_nesting_and_random_bytes_are_lines_not_tracebacks(tmp_path):
    import json
    import os

    huge = tmp_path / "huge.jsonl"  # a value and a step past float's range
    huge.write_text("".join(json.dumps({"step": s, "reward": 0.5}) + "\n" for s in range(1, 6))
                    + '{"step": 6, "reward": ' + str(10**400) + "}\n" + '{"step": ' + str(10**400) + ', "reward": 1}\n')
    result = CliRunner().invoke(app, ["diagnose", str(huge)])
    assert result.exit_code == 0 and "NaN or infinite at 1 step(s)" in result.output, result.output
    assert "without a whole-number step" in result.output
    assert CliRunner().invoke(app, ["report", str(huge), "-o", str(tmp_path / "r")]).exit_code == 0
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "metrics.jsonl").write_text("[" * 150_000 + "]" * 150_000 + "\n")
    (tmp_path / "deep.jsonl").write_text("[" * 150_000 + "]" * 150_000 + "\n")
    (tmp_path / "random.csv").write_bytes(os.urandom(5000))
    for given, says in ((deep, "nests JSON deeper than Python reads"), (tmp_path / "deep.jsonl", "is not a run"),
                        (tmp_path / "random.csv", "is not a run")):
        result = CliRunner().invoke(app, ["diagnose", str(given)])
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1 and says in lines[0], (given, result.output[-600:])


@pytest.mark.parametrize("options", [dict(num_generations=0), dict(kl_bound=-1), dict(entropy_floor=float("nan")),
                                     dict(gpus=-1), dict(num_generations=True)])
def test_the_callback_takes_the_ranges_the_command_line_takes(options):
    pytest.importorskip("transformers")
    from grposcope.diagnose import Options
    from grposcope.integrations.trl_callback import DiagnoseCallback

    with pytest.raises(ValueError, match="must be|give a finite number"):
        Options(**options)
    with pytest.raises((ValueError, TypeError)):
        DiagnoseCallback(options="x")
    with pytest.raises(ValueError):
        DiagnoseCallback(every=True)


def test_nan_in_a_stock_trl_run_is_said_by_the_callback_and_in_its_files(tmp_path, caplog):
    pytest.importorskip("transformers")
    import json
    import logging


    def logs_at(step: int) -> dict:
        bad = float("nan") if step >= 3 else 0.5
        return {"loss": bad, "reward": bad, "reward_std": 0.3, "entropy": bad, "grad_norm": 0.2}

    with caplog.at_level(logging.WARNING, logger="grposcope"):
        run_stock_callback(tmp_path, "nan", logs_at)
    said = [r.getMessage() for r in caplog.records if "NaN" in r.getMessage()]
    assert len(said) == 3 and all("at step 3" in line for line in said), said  # once per metric, where it began
    problems = json.loads((tmp_path / "findings.json").read_text())["runs"][0]["problems"]
    assert "reward/mean is NaN or infinite at 4 step(s) (the first: 3)" in problems, problems
    assert "entropy/mean is NaN or infinite at 4 step(s)" in (tmp_path / "findings.md").read_text()
    assert "non-finite gradient norms or losses" in (tmp_path / "findings.md").read_text()  # the NaN loss


class _RunsCode:  # what a hostile grposcope_state.pt pickles: unpickling it would create the file
    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


def test_a_hostile_grposcope_state_of_a_trl_checkpoint_is_named_damaged_and_nothing_runs(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    import transformers
    from conftest import make_tiny_llama, make_tiny_tokenizer
    from test_integration_trl import settings

    from grposcope.errors import CheckpointError
    from grposcope.integrations.trl import STATE_FILE, GRPOConfig, GRPOTrainer

    checkpoint = tmp_path / "checkpoint-2"
    checkpoint.mkdir()
    torch.save({"estimator": _RunsCode(str(tmp_path / "PWNED"))}, checkpoint / STATE_FILE)
    trainer = GRPOTrainer(model=make_tiny_llama(), reward_funcs=lambda completions, **_: [0.0] * len(completions),
                          args=GRPOConfig(**settings(tmp_path)), train_dataset=[{"prompt": "1 + 1 ="}] * 8,
                          processing_class=make_tiny_tokenizer())
    monkeypatch.setattr(transformers.Trainer, "_load_optimizer_and_scheduler", lambda self, checkpoint: None)
    with pytest.raises(CheckpointError) as caught:
        trainer._load_optimizer_and_scheduler(str(checkpoint))
    said = str(caught.value)
    assert "grposcope_state.pt is damaged or not to be trusted" in said and "nothing in it was run" in said, said
    assert "weights_only=False" not in said and not (tmp_path / "PWNED").exists()
    (checkpoint / STATE_FILE).write_bytes(b"PK\x03\x04 cut short")  # a truncated file: damaged, in one line
    with pytest.raises(CheckpointError, match="grposcope_state.pt is damaged: torch cannot read it"):
        trainer._load_optimizer_and_scheduler(str(checkpoint))


def test_no_command_writes_over_its_own_input_even_with_overwrite(tmp_path):
    probe = tmp_path / "probe.jsonl"
    probe.write_text('{"prompt": "1+1?", "k": 4, "successes": 2}\n{"prompt": "2+2?", "k": 4, "successes": 1}\n')
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"completion": "\\\\boxed{3}", "answer": "3"}\n')
    kept = {path: path.read_bytes() for path in (probe, answers)}
    for command in (["forecast", str(probe), "--json", str(probe), "--overwrite"],
                    ["forecast", str(probe), "--plot", str(probe), "--overwrite"],
                    ["audit-rewards", str(answers), "--json", str(answers), "--overwrite"]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 2 and "is one of the inputs, and writing it would destroy" in result.output, \
            (command, result.output)
    assert {path: path.read_bytes() for path in kept} == kept


def test_an_output_inside_an_input_folder_is_refused_only_where_it_would_replace_a_file(tmp_path):
    from grposcope.files import check_output_file

    model = tmp_path / "checkpoint-2"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    with pytest.raises(ValueError, match="is inside the input .*checkpoint-2, and writing it would destroy"):
        check_output_file(model / "model.safetensors", "--output", True, "eval.json", inputs=(str(model), None))
    check_output_file(model / "eval.json", "--output", False, "eval.json", inputs=(str(model),))  # a new file: fine


def test_diagnose_names_a_folder_given_for_its_json_without_offering_overwrite(tmp_path):
    (tmp_path / "out").mkdir()
    result = CliRunner().invoke(app, ["diagnose", str(FIXTURES / "quickstart"), "--json", str(tmp_path / "out")])
    assert result.exit_code == 2 and "is a folder; name a file in it" in result.output
    assert "--overwrite" not in result.output


def test_one_table_of_ranges_for_the_command_line_the_callback_trl_and_verl():
    """kl_bound=0 is refused alike by grposcope diagnose, diagnose.Options (the callback), the own GRPOConfig,
    and check_options, which the TRL subclass's config and verl's algorithm.grposcope keys call."""
    from grposcope.components.ranges import check_options
    from grposcope.diagnose import Options

    said = set()
    result = CliRunner().invoke(app, ["diagnose", str(FIXTURES / "quickstart"), "--kl_bound", "0"])
    said.add(result.output.strip().removeprefix("error: --"))
    for make in (lambda: Options(kl_bound=0.0), lambda: check_options({"kl_bound": 0.0})):
        with pytest.raises(ValueError) as caught:
            make()
        said.add(str(caught.value))
    pytest.importorskip("torch")
    from grposcope import GRPOConfig

    with pytest.raises(ValueError) as caught:
        GRPOConfig(kl_bound=0.0)
    said.add(str(caught.value))
    assert said == {"kl_bound must be > 0 (the mean per-token KL above which the KL-drift alarm fires, e.g. 0.5), "
                    "got 0.0"}, said


def test_a_trainer_state_saved_with_a_byte_order_mark_is_read(tmp_path):
    # before: "trainer_state.json is not valid JSON (Unexpected UTF-8 BOM ...)"
    state = (Path(__file__).parent / "fixtures" / "trl_tiny_run").rglob("trainer_state.json")
    text = next(iter(state)).read_text(encoding="utf-8")
    (tmp_path / "trainer_state.json").write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    result = CliRunner().invoke(app, ["diagnose", str(tmp_path / "trainer_state.json")])
    assert result.exit_code in (0, 1) and "not valid JSON" not in result.output, result.output


def test_eval_results_saved_to_a_folder_name_it_as_one(tmp_path):
    from grposcope.evaluation import EvalResult

    result = EvalResult.__new__(EvalResult)  # the path is checked before anything of the result is read
    with pytest.raises(IsADirectoryError, match="is a folder; name a file in it, e.g. .*eval.json"):
        result.save(tmp_path, overwrite=True)
