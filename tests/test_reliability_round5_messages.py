"""Reliability, round 5 (issue 56), item 14's messages for train, simulate, sweep, eval and audit-rewards, and item
13's JSON answers: each input the probe found with an unclear message (a folder where a file belongs, a default
taken for a given value, a checkpoint missing a file, a tokenizer asking to run its folder's code, an answer that
is a JSON array) now gets one `error:` line naming the real cause and a fix that works. Each test failed before its
change; docs/reliability.md's table has the messages a real run printed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_hardening import one_error_line, run, small_run
from test_trainer_round4 import train_argv

FIXTURES = Path(__file__).parent / "fixtures" / "runs"


def only_line(result) -> str:
    """The one line a refused command printed (asserting exit 2 and no traceback)."""
    line = one_error_line(result)
    assert [x for x in result.output.splitlines() if x.strip()] == [line], result.output
    return line


# --- a: a --config that is a folder ------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["train"], ["sweep", "--output", "SWEEP", "--backend", "simulate"]])
def test_a_config_folder_is_named_as_a_folder_with_a_yaml_file_in_it(tmp_path, command):
    """Before: "config file cfgdir does not exist" (it does: it is a folder)."""
    folder = tmp_path / "cfgdir"
    folder.mkdir()
    argv = [str(tmp_path / "sweep") if arg == "SWEEP" else arg for arg in command]
    assert only_line(run(*argv, "--config", str(folder))) == (
        f"error: --config {folder} is a folder, not a YAML file; it holds no .yaml file: give the path of a YAML "
        "file of options (one `option: value` per line)")
    (folder / "grpo.yaml").write_text("learning_rate: 1.0e-5\n")
    assert only_line(run(*argv, "--config", str(folder))) == (
        f"error: --config {folder} is a folder, not a YAML file; name a YAML file in it, e.g. --config "
        f"{folder / 'grpo.yaml'}")


# --- b: a dataset that is a folder ---------------------------------------------------------------------------


def test_a_dataset_folder_is_named_as_a_folder_with_a_jsonl_file_in_it(tmp_path, tiny_model_dir, monkeypatch):
    """Before: "unknown task 'dsdir'; known: ..." (or, written `dsdir/`, "no such file: 'dsdir/'")."""
    monkeypatch.chdir(tmp_path)
    Path("dsdir").mkdir()
    Path("dsdir", "train.jsonl").write_text('{"problem": "1 + 1 ?", "answer": "2"}\n')
    said = "dsdir is a folder, not a task name or a .jsonl file; give a .jsonl file in it, e.g. dsdir/train.jsonl"
    line = only_line(run("train", "--model_name_or_path", str(tiny_model_dir), "--dataset_name", "dsdir",
                         "--output_dir", "out"))
    assert line == f"error: dataset_name: {said}"
    assert only_line(run("eval", "--model", str(tiny_model_dir), "--dataset", "dsdir")) == f"error: {said}"
    line = only_line(run("eval", "--model", str(tiny_model_dir), "--dataset", "dsdir/"))
    assert line == "error: dsdir/ is a folder, not a task name or a .jsonl file; give a .jsonl file in it, e.g. " \
                   "dsdir/train.jsonl"
    Path("empty").mkdir()
    assert only_line(run("eval", "--model", str(tiny_model_dir), "--dataset", "empty")) == (
        "error: empty is a folder, not a task name or a .jsonl file; it holds no .jsonl file: give a .jsonl file "
        "(one JSON object per line) or a task such as arithmetic:easy")


# --- c: an output file that is a folder ------------------------------------------------------------------------

OUTPUTS = [  # (command before the option, the option, the file it suggests in the folder)
    (["simulate", "--steps", "5"], "--output", "simulation.json"),
    (["simulate", "--steps", "5"], "--plot", "simulation.png"),
    (["forecast", "--from_run", str(FIXTURES / "quickstart")], "--json", "forecast.json"),
    (["forecast", "--from_run", str(FIXTURES / "quickstart")], "--plot", "forecast.png"),
    (["eval", "--model", "MODEL", "--dataset", "arithmetic:easy", "--eval_size", "2"], "--output",
     "eval-tiny-llama-arithmetic_easy.json"),
    (["probe", "--model", "MODEL", "--dataset", "arithmetic:easy", "--prompts", "2", "--k", "2"], "--output",
     "probe.jsonl"),
]


@pytest.mark.parametrize("command, flag, name", OUTPUTS, ids=[f"{c[0]}{f}" for c, f, _ in OUTPUTS])
def test_an_output_folder_is_named_as_a_folder_and_overwrite_is_not_offered(tmp_path, tiny_model_dir, command,
                                                                             flag, name):
    """Before: "simout already exists; pass --overwrite to replace it" and, with --overwrite, "exists and is not
    a file"; probe said "does not exist; make it with grposcope probe"."""
    folder = tmp_path / "outdir"
    folder.mkdir()
    argv = [str(tiny_model_dir) if arg == "MODEL" else arg for arg in command]
    for extra in ([], ["--overwrite"]):  # --overwrite could not replace a folder with a file
        line = only_line(run(*argv, flag, str(folder), *extra))
        assert line == f"error: {flag} {folder} is a folder; name a file in it, e.g. {flag} {folder / name}"
    assert list(folder.iterdir()) == []


def test_an_existing_output_file_still_needs_overwrite(tmp_path):
    target = tmp_path / "sim.json"
    target.write_text("{}")
    line = only_line(run("simulate", "--steps", "5", "--output", str(target)))
    assert line == (f"error: --output {target} already exists; pass --overwrite to replace it, or choose another "
                    "--output")


# --- d: the sweep's default level ------------------------------------------------------------------------------


def test_a_simulated_sweep_without_levels_says_the_default_is_not_a_simulator_level(tmp_path):
    """Before: "... a level is the mean base logit difficulty_mean (...), got 'default'": a value never given."""
    line = only_line(run("sweep", "--output", str(tmp_path / "s"), "--backend", "simulate", "--max_steps", "3"))
    assert line == ("error: with --backend simulate a level is the mean base logit difficulty_mean, and --levels "
                    "defaults to 'default', which names the train backend's dataset and no difficulty_mean: give "
                    "the simulator's levels, e.g. --levels=-2,0,1 (finite numbers: -2 hard, 1 easy)")
    assert not (tmp_path / "s").exists()
    given = run("sweep", "--output", str(tmp_path / "s"), "--backend", "simulate", "--max_steps", "3",
                "--levels=-1")  # the advice works
    assert given.exit_code == 0, given.output


# --- e: a checkpoint missing a file its manifest lists ----------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny CLI run (checkpoint-1, checkpoint-2, model), copied by each test that damages it."""
    from conftest import make_tiny_llama, make_tiny_tokenizer

    root = tmp_path_factory.mktemp("trained")
    model, tokenizer = make_tiny_llama(), make_tiny_tokenizer()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(root / "tiny-llama", safe_serialization=True)
    tokenizer.save_pretrained(root / "tiny-llama")
    small_run(root, root / "tiny-llama")
    return root


def damaged_copy(trained: Path, tmp_path: Path, removed: str, keep_older: bool) -> Path:
    out = tmp_path / "run"
    shutil.copytree(trained / "run", out)
    (out / "checkpoint-2" / removed).unlink()
    if not keep_older:
        shutil.rmtree(out / "checkpoint-1")
    return out


def test_resume_with_every_checkpoint_missing_a_file_names_it_and_no_command_that_fails_again(trained, tmp_path,
                                                                                           recwarn):
    """Before: a "skipping ...; resuming from an older checkpoint" warning (there was none), then "... or point
    resume_from_checkpoint at a checkpoint folder": the one there fails the same way."""
    out = damaged_copy(trained, tmp_path, "optimizer.pt", keep_older=False)
    result = run(*train_argv(trained / "tiny-llama", out, "--max_steps", "3", "--resume"))
    assert one_error_line(result) == (
        f"error: resume_from_checkpoint=True, but no checkpoint in {out} is complete (checkpoint-2: optimizer.pt "
        f"is missing), so --resume has nothing to continue: copy optimizer.pt back into {out / 'checkpoint-2'} if "
        "you have it, or start the run over without --resume and with --overwrite_output_dir "
        "(overwrite_output_dir=True), which keeps its metrics.jsonl as metrics.jsonl.1 and removes its "
        "checkpoint-N folders")
    assert "point resume_from_checkpoint" not in result.output
    assert not [w for w in recwarn if "skipping" in str(w.message)]  # pytest takes the warnings the CLI prints


@pytest.mark.parametrize("keep_older", [False, True], ids=["only-checkpoint", "older-one-good"])
def test_resume_from_a_named_checkpoint_missing_a_file_says_one_line_with_a_way_that_works(trained, tmp_path,
                                                                                            keep_older, recwarn):
    """Before: the same false "skipping ...; resuming from an older checkpoint" warning, then, with no older
    checkpoint, "start a new run" (a used output_dir refuses one without --overwrite_output_dir)."""
    out = damaged_copy(trained, tmp_path, "scheduler.pt", keep_older)
    named = out / "checkpoint-2"
    result = run(*train_argv(trained / "tiny-llama", out, "--max_steps", "3", "--resume_from_checkpoint",
                             str(named)))
    way = f"resume from {out / 'checkpoint-1'} instead" if keep_older else (
        f"copy scheduler.pt back into {named} if you have it, or start the run over without "
        "--resume_from_checkpoint and with --overwrite_output_dir (overwrite_output_dir=True), which keeps its "
        "metrics.jsonl as metrics.jsonl.1 and removes its checkpoint-N folders")
    assert one_error_line(result) == f"error: cannot resume from {named}: scheduler.pt is missing; {way}"
    assert not [w for w in recwarn if "skipping" in str(w.message)]


def test_eval_of_a_checkpoint_reads_no_file_only_a_resume_needs(trained, tmp_path):
    """Before: "checkpoint-2 is damaged: optimizer.pt is missing" and no fix; eval never reads optimizer.pt."""
    out = damaged_copy(trained, tmp_path, "optimizer.pt", keep_older=False)
    result = run("eval", "--model", str(out / "checkpoint-2"), "--dataset", "arithmetic:easy", "--eval_size", "2",
                 "--max_completion_length", "4", "--output", str(tmp_path / "e.json"))
    assert result.exit_code == 0, result.output
    assert len(json.loads((tmp_path / "e.json").read_text())["records"]) == 2


def test_eval_of_a_checkpoint_missing_its_weights_names_the_file_and_a_model_that_works(trained, tmp_path):
    """Before: "checkpoint-2 is damaged: model.safetensors is missing", with no way on."""
    out = damaged_copy(trained, tmp_path, "model.safetensors", keep_older=False)
    named = out / "checkpoint-2"
    line = only_line(run("eval", "--model", str(named), "--dataset", "arithmetic:easy", "--eval_size", "2",
                         "--output", str(tmp_path / "e.json")))
    assert line == (f"error: {named} is damaged: model.safetensors is missing; copy model.safetensors back into "
                    f"{named} if you have it, or evaluate another model, e.g. the run's final model {out / 'model'}")
    ok = run("eval", "--model", str(out / "model"), "--dataset", "arithmetic:easy", "--eval_size", "2",
             "--max_completion_length", "4", "--output", str(tmp_path / "e.json"))
    assert ok.exit_code == 0, ok.output


# --- f: a tokenizer that asks to run its folder's code -----------------------------------------------------------


@pytest.mark.parametrize("command", ["eval", "train"])
def test_a_tokenizer_asking_to_run_its_own_code_is_refused_in_one_line_of_our_own(tmp_path, tiny_model_dir,
                                                                                  command):
    """Before: "no usable tokenizer in ... (The repository ... contains custom code which must be executed to
    correctly load the model. You can inspect the repository content at ...)": transformers' paragraph."""
    folder = tmp_path / "custom"
    shutil.copytree(tiny_model_dir, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.update(tokenizer_class="MyTokenizer", auto_map={"AutoTokenizer": ["my_tokenizer.MyTokenizer", None]})
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    ran = tmp_path / "ran"
    (folder / "my_tokenizer.py").write_text(f"open({str(ran)!r}, 'w').close()\n")
    argv = ["eval", "--model", str(folder), "--dataset", "arithmetic:easy", "--eval_size", "2", "--output",
            str(tmp_path / "e.json")] if command == "eval" else train_argv(folder, tmp_path / "out")
    result = run(*argv)
    assert one_error_line(result) == (
        f"error: {folder} asks to run its own Python code to load its tokenizer (tokenizer_config.json auto_map -> "
        "my_tokenizer.py), and grposcope runs no code from a model folder unless trust_remote_code is set: pass "
        "--trust_remote_code (GRPOConfig: trust_remote_code=True) only if you have read that code and trust it")
    assert "contains custom code" not in result.output and not ran.exists()


# --- g (item 13): answers that are JSON arrays or objects ---------------------------------------------------------


def _audit(tmp_path: Path, rows: list[dict], *extra: str):
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path, run("audit-rewards", str(path), "--verifiers", "boxed_exact,grposcope_default", *extra)


def test_audit_reads_a_one_element_array_answer_as_its_element_and_leaves_out_others_with_a_note(tmp_path):
    """Before: [3] was judged as the text "[3]" (every verifier: wrong) and {"x": 1} as "{'x': 1}", without a
    word."""
    rows = [{"completion": "so \\boxed{3}", "answer": [3]},
            {"completion": "so \\boxed{4}", "answer": "4"},
            {"completion": "so \\boxed{(1, 2)}", "answer": {"x": 1}},
            {"completion": "so \\boxed{2}", "answer": ["1", "2"]}]
    with pytest.warns(RuntimeWarning) as said:  # the CLI prints it as one `warning:` line
        path, result = _audit(tmp_path, rows, "--json", str(tmp_path / "a.json"))
    assert result.exit_code == 0, result.output
    assert [str(w.message) for w in said if w.category is RuntimeWarning] == [
        f"{path}: 1 answer is a one-element JSON array, read as its element (line 1); 2 answers are a JSON array or "
        "object that holds no single answer, left out of the audit (lines 3, 4): give each answer as one string or "
        "number"]
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["pairs"] == 2 and report["verifiers"]["boxed_exact"]["right"] == 2  # [3] matches \boxed{3}


def test_audit_of_answers_that_are_all_json_arrays_says_so_in_one_line(tmp_path):
    path, result = _audit(tmp_path, [{"completion": "\\boxed{1}", "answer": [1, 2]}])
    assert only_line(result) == (f"error: {path}: every 'answer' is a JSON array or object that holds no single "
                                 'answer; give each answer as one string or number (e.g. "3" or "(1, 2)")')
