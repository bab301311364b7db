"""User mistakes that used to end in a traceback, or be found out after the work: each now gets one line,
`error: <file or option>: <what is wrong>; <the fix>`, and exit 1 (docs/reliability.md, "Bad input")."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import flip_a_bit
from typer.testing import CliRunner

from grposcope.cli import app
from grposcope.trainer import GRPOConfig


def run(*argv: str):
    return CliRunner().invoke(app, [*argv])


def one_error_line(result) -> str:
    """The `error:` line of a failed command, asserting there is no traceback."""
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return next(line for line in result.output.splitlines() if line.startswith("error: "))


def no_model_loads(monkeypatch):
    """Any model load fails the test: the check under test must come first."""
    import grposcope.models.loading as loading

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr(loading, "load_local_model", refuse)
    monkeypatch.setattr(loading, "load_model", refuse)


# --- configs and data files ------------------------------------------------------------------------------


def test_yaml_syntax_error_names_file_line_and_column(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("learning_rate: 1e-5\nseed: [1, 2\n")
    line = one_error_line(run("train", "--config", str(path)))
    assert f"{path}: line 3, column 1: not valid YAML" in line


def test_non_utf8_yaml_and_jsonl_name_the_file_and_line(tmp_path, tiny_model_dir):
    config = tmp_path / "run.yaml"
    config.write_bytes(b"learning_rate: 1e-5\nrun_name: caf\xe9\n")
    assert one_error_line(run("train", "--config", str(config))) == (
        f"error: {config}: line 2, column 14: not UTF-8 text (byte 0xe9); save the file as UTF-8")
    data = tmp_path / "math.jsonl"
    data.write_bytes(b'{"problem": "1 + 1", "answer": "2"}\n{"problem": "\xff", "answer": "3"}\n')
    line = one_error_line(run("train", "--model_name_or_path", str(tiny_model_dir), "--dataset_name", str(data),
                              "--output_dir", str(tmp_path / "out")))
    assert f"{data}: line 2, column 14: not UTF-8 text (byte 0xff)" in line


@pytest.mark.parametrize("text, message", [
    ("learning_rate: [1, 2]\n", "option learning_rate: got [1, 2] (list); it takes float"),
    ("num_generations: 8.5\n", "option num_generations: got 8.5 (float); it takes int"),
    ("use_avspo: maybe\n", "--use_avspo: cannot read 'maybe' as bool"),
    ("reward_weights: [1, x]\n", "option reward_weights: got [1, 'x'] (list); it takes a list of float or None"),
])
def test_wrong_yaml_types_name_the_option_and_the_type(tmp_path, monkeypatch, text, message):
    no_model_loads(monkeypatch)
    path = tmp_path / "run.yaml"
    path.write_text(text)
    assert one_error_line(run("train", "--config", str(path))) == f"error: {message}"


@pytest.mark.parametrize("argv, message", [
    (["--learning_rate", "nan"], "option learning_rate: got nan; give a finite number"),
    (["--beta", "inf"], "option beta: got inf; give a finite number"),
    (["--torch_threads", "0"], "torch_threads must be in [1, 1024] (torch's CPU threads, e.g. the machine's "
                               "cores; more only contend for them), got 0"),
    (["--reward_weights", "abc"], "--reward_weights: cannot read 'abc' as float"),
    (["--model", "x"], "unknown GRPOConfig option(s): model (did you mean model_name_or_path?)"),
    (["--lr", "1e-5"], "unknown GRPOConfig option(s): lr (did you mean learning_rate?)"),
])
def test_bad_command_line_values_are_refused_before_the_model_loads(monkeypatch, argv, message):
    no_model_loads(monkeypatch)
    assert message in one_error_line(run("train", *argv))


def test_the_type_check_keeps_what_is_right():
    config = GRPOConfig(learning_rate=1, reward_weights=[1, 0.5], virtual_reward_range=[0, 1], torch_threads=None)
    assert config.learning_rate == 1 and math.isfinite(config.learning_rate)
    with pytest.raises(TypeError, match="option seed: got True"):
        GRPOConfig(seed=True)  # YAML's `yes` is no seed


# --- model folders ---------------------------------------------------------------------------------------


def broken_copy(src: Path, dst: Path, kind: str) -> Path:
    import shutil

    shutil.copytree(src, dst)
    if kind == "config type":
        config = json.loads((dst / "config.json").read_text())
        config["hidden_size"] = "abc"
        (dst / "config.json").write_text(json.dumps(config))
    elif kind == "truncated weights":
        weights = dst / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return dst


@pytest.mark.parametrize("kind, message", [
    ("config type", "config.json: Validation error for field 'hidden_size'"),
    ("truncated weights", "model.safetensors: damaged or truncated weights"),
])
@pytest.mark.parametrize("command", ["train", "eval"])
def test_a_damaged_model_folder_is_named_with_its_file(tmp_path, tiny_model_dir, kind, message, command):
    folder = broken_copy(tiny_model_dir, tmp_path / "model", kind)
    if command == "train":
        argv = ["train", "--model_name_or_path", str(folder), "--dataset_name", "arithmetic",
                "--output_dir", str(tmp_path / "out")]
    else:
        argv = ["eval", "--model", str(folder), "--dataset", "arithmetic", "--output", str(tmp_path / "e.json")]
    line = one_error_line(run(*argv))
    assert line.startswith(f"error: {folder}/") and message in line


# --- outputs are checked before the work ---------------------------------------------------------------


def test_eval_checks_its_output_before_loading_the_model(tmp_path, monkeypatch):
    no_model_loads(monkeypatch)
    blocker = tmp_path / "file"
    blocker.write_text("")
    line = one_error_line(run("eval", "--model", "embedded:smollm2-135m-instruct", "--dataset", "arithmetic",
                              "--output", str(blocker / "sub" / "out.json")))
    assert line.startswith(f"error: --output {blocker / 'sub' / 'out.json'} cannot be created: {blocker} is a file")


@pytest.mark.parametrize("flag", ["--output", "--plot"])
def test_simulate_checks_its_outputs_before_simulating(tmp_path, monkeypatch, flag):
    import grposcope.sim as sim

    monkeypatch.setattr(sim, "simulate", lambda *a, **k: pytest.fail("simulated before checking the output"))
    blocker = tmp_path / "file"
    blocker.write_text("")
    target = str(blocker / "x")
    argv = ["simulate", "--steps", "2", "--output", str(tmp_path / "ok.json"), flag, target]
    assert one_error_line(run(*argv)).startswith(f"error: {flag} {target} cannot be created")


def test_output_dir_is_checked_before_the_model_loads(tmp_path, monkeypatch):
    no_model_loads(monkeypatch)
    blocker = tmp_path / "file"
    blocker.write_text("")
    line = one_error_line(run("train", "--model_name_or_path", "anything", "--output_dir", str(blocker / "run")))
    assert line == f"error: output_dir {blocker / 'run'} cannot be created: {blocker} is a file, not a folder; " \
                   "choose another output_dir"


# --- checkpoints are verified wherever they are read -----------------------------------------------------


def small_run(tmp_path: Path, model_dir: Path, steps: int = 2, save_steps: int = 1) -> Path:
    out = tmp_path / "run"
    result = run("train", "--model_name_or_path", str(model_dir), "--dataset_name", "arithmetic:easy",
                 "--dataset_size", "8", "--eval_size", "0", "--num_generations", "2",
                 "--per_device_train_batch_size", "2", "--max_completion_length", "4", "--max_steps", str(steps),
                 "--save_steps", str(save_steps), "--output_dir", str(out))
    assert result.exit_code == 0, result.output
    return out


def test_eval_refuses_a_bit_flipped_checkpoint_and_names_the_good_one(tmp_path, tiny_model_dir):
    out = small_run(tmp_path, tiny_model_dir)
    flip_a_bit(out / "checkpoint-2" / "model.safetensors")  # one bit of one weight
    line = one_error_line(run("eval", "--model", str(out / "checkpoint-2"), "--dataset", "arithmetic:easy",
                              "--eval_size", "2", "--output", str(tmp_path / "e.json")))
    assert line == (f"error: {out / 'checkpoint-2'} is damaged: model.safetensors does not match its checksum "
                    f"(corrupted); the newest good checkpoint beside it is {out / 'checkpoint-1'}")
    ok = run("eval", "--model", str(out / "checkpoint-1"), "--dataset", "arithmetic:easy", "--eval_size", "2",
             "--output", str(tmp_path / "e1.json"))
    assert ok.exit_code == 0, ok.output


# --- Ctrl-C -------------------------------------------------------------------------------------------------


def test_ctrl_c_says_where_the_last_checkpoint_is_and_how_to_resume(tmp_path, tiny_model_dir, monkeypatch):
    import grposcope.trainer as trainer_pkg

    out = small_run(tmp_path, tiny_model_dir)

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(trainer_pkg.GRPOTrainer, "train", interrupted)
    monkeypatch.setattr("sys.argv", ["grposcope", "train", "--output_dir", str(out), "--max_steps", "4"])
    result = run("train", "--model_name_or_path", str(tiny_model_dir), "--dataset_name", "arithmetic:easy",
                 "--dataset_size", "8", "--eval_size", "0", "--num_generations", "2",
                 "--per_device_train_batch_size", "2", "--max_completion_length", "4", "--max_steps", "4",
                 "--output_dir", str(out), "--overwrite_output_dir", "true")
    assert result.exit_code == 130
    assert "interrupted (Ctrl-C)" in result.output
    assert (f"the run's last checkpoint is {out / 'checkpoint-2'}; continue it with: grposcope train --output_dir "
            f"{out} --max_steps 4 --resume") in result.output


# --- prompts cut to max_prompt_length ----------------------------------------------------------------------


def test_prompts_cut_to_max_prompt_length_are_counted_and_noted_once(tmp_path, tiny_llama, tiny_tokenizer):
    from grposcope import GRPOTrainer

    def parity(prompts, completions, **kwargs):
        return [float(len(c.split()) % 2) for c in completions]

    long, short = "What is " + "1 + " * 10 + "1 ?", "What is 1 ?"  # 25 words and 4, words are tokens here
    data = [{"prompt": long}, {"prompt": short}, {"prompt": long}, {"prompt": short}]
    args = GRPOConfig(output_dir=str(tmp_path / "out"), num_generations=2, per_device_train_batch_size=4,
                      max_completion_length=4, max_prompt_length=12, max_steps=2, logging_steps=1, eval_size=0,
                      seed=1, save_steps=100)
    trainer = GRPOTrainer(model=tiny_llama, args=args, reward_funcs=parity, train_dataset=data,
                          processing_class=tiny_tokenizer)
    with pytest.warns(RuntimeWarning, match="are longer than max_prompt_length=12") as caught:
        trainer.train()
    assert len([w for w in caught if "max_prompt_length" in str(w.message)]) == 1  # once a run
    lines = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [line["prompt/truncated_frac"] for line in lines] == [0.5, 0.5]  # 1 of the 2 prompts of each step


# --- the embedded model's cache and a checkpoint's listed files ------------------------------------------


@pytest.mark.parametrize("blocked", ["root", "models"])
def test_a_grposcope_cache_that_is_a_file_names_the_variable_and_the_fix(tmp_path, monkeypatch, blocked):
    from grposcope.models import embedded

    monkeypatch.setattr(embedded, "find_embedded_gguf", lambda name: pytest.fail("looked for the model first"))
    cache = tmp_path / "cache"
    if blocked == "root":
        cache.write_text("")
        file = cache
    else:
        cache.mkdir()
        file = cache / "models"
        file.write_text("")
    monkeypatch.setenv("GRPOSCOPE_CACHE", str(cache))
    with pytest.raises(ValueError) as caught:
        embedded.ensure_embedded_checkpoint("smollm2-135m-instruct")
    assert str(caught.value).startswith(f"GRPOSCOPE_CACHE={cache} cannot hold grposcope's cache: {file} is a "
                                        "file, not a folder;")
    assert "Errno" not in str(caught.value)


def test_a_checkpoint_whose_listed_file_goes_while_it_is_checked_is_skipped_as_damaged(tmp_path, tiny_model_dir,
                                                                                      monkeypatch):
    """A listed file removed between the existence check and its checksum (another process rotating or
    cleaning the folder) makes the checkpoint damaged, exactly like a checksum that does not match: skipped,
    never `[Errno 2] No such file or directory`."""
    from grposcope import manifest
    from grposcope.trainer.run_folder import latest_checkpoint

    out = small_run(tmp_path, tiny_model_dir)
    real_sha256 = manifest.sha256

    def gone_in_between(path):
        if path.parent.name == "checkpoint-2" and path.name == "optimizer.pt":
            path.unlink()  # as if removed just after is_file() said it was there
        return real_sha256(path)

    monkeypatch.setattr(manifest, "sha256", gone_in_between)
    with pytest.warns(RuntimeWarning, match=r"skipping .*checkpoint-2: optimizer.pt is missing"):
        assert latest_checkpoint(out) == out / "checkpoint-1"
