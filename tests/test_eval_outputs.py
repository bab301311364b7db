"""`grposcope eval` never throws its results away and never evaluates what was not asked: a file that appears
at --output while it runs (a second eval given the same --output) is kept and the results go beside it, and
--eval_size on a .jsonl file evaluates the held-out split it names, not silently the whole file."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import grposcope.evaluation as evaluation
from grposcope.cli import app
from grposcope.evaluation import load_eval_examples


def _file(tmp_path, n=20):
    path = tmp_path / "math.jsonl"
    path.write_text("".join(json.dumps({"problem": f"What is {i} + 1 ?", "answer": str(i + 1)}) + "\n"
                            for i in range(n)))
    return path


def _eval(model_dir, dataset, out, *extra):
    args = ["eval", "--model", str(model_dir), "--dataset", str(dataset), "--reward_funcs", "accuracy_reward",
            "--max_completion_length", "2", "--output", str(out), *map(str, extra)]
    return CliRunner().invoke(app, args)


def test_a_file_written_at_the_output_during_the_eval_is_kept_and_the_results_go_beside_it(
        tmp_path, tiny_model_dir, monkeypatch):
    out = tmp_path / "eval.json"
    real = evaluation.evaluate_model

    def another_eval_finishes_first(*args, **kwargs):
        out.write_text('{"the other eval": true}\n')
        return real(*args, **kwargs)

    monkeypatch.setattr(evaluation, "evaluate_model", another_eval_finishes_first)
    with pytest.warns(RuntimeWarning) as notes:
        result = _eval(tiny_model_dir, _file(tmp_path, 3), out)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text()) == {"the other eval": True}
    beside = tmp_path / "eval-2.json"
    assert len(json.loads(beside.read_text())["records"]) == 3
    text = " ".join(result.output.split())
    assert f"{out} was written by another process while this eval ran; it is kept as it is, and " \
           f"these results are in {beside}" in [str(n.message) for n in notes]
    assert f"results written to {beside}" in text
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_eval_size_on_a_jsonl_file_evaluates_the_held_out_split_with_a_note(tmp_path, tiny_model_dir):
    data = _file(tmp_path)
    with pytest.warns(RuntimeWarning, match="--eval_size 4 without --split: evaluating the eval split"):
        result = _eval(tiny_model_dir, data, tmp_path / "e.json", "--eval_size", "4")
    assert result.exit_code == 0, result.output
    records = json.loads((tmp_path / "e.json").read_text())["records"]
    held_out = load_eval_examples(str(data), "eval", seed=42, eval_size=4)[0]
    assert len(records) == 4 and [r["answer"] for r in records] == [e["answer"] for e in held_out]


def test_eval_size_with_the_whole_file_is_refused(tmp_path, tiny_model_dir):
    result = _eval(tiny_model_dir, _file(tmp_path), tmp_path / "e.json", "--eval_size", "4", "--split", "all")
    assert result.exit_code == 2
    assert "eval_size=4 has no effect on the 'all' split" in " ".join(result.output.split())
    assert not (tmp_path / "e.json").exists()
