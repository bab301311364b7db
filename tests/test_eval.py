"""`grposcope.evaluation` and `grposcope eval`: pass@k by hand, the engine on the tiny Llama with rewards whose
outcome is known in advance, the trainer's evaluate(), and the command end to end."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from grposcope.cli import app
from grposcope.evaluation import (
    EvalSettings,
    evaluate,
    evaluate_model,
    load_eval_examples,
    pass_at_k,
    pass_sizes,
)
from grposcope.rewards import REWARDS, RewardScorer
from grposcope.rewards.inputs import reward_inputs
from grposcope.rollout import ROLLOUTS

# --- pass@k -------------------------------------------------------------------------------------------------


def test_pass_at_k_hand_computed():
    assert pass_at_k(4, 1, 2) == 0.5  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7, abs=1e-12)  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6, abs=1e-12)  # 1 - C(2,2)/C(4,2) = 1 - 1/6
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3, abs=1e-12)  # pass@1 = c/n
    assert pass_at_k(8, 0, 4) == 0.0  # no correct sample: never passes
    assert pass_at_k(8, 8, 4) == 1.0  # all correct
    assert pass_at_k(4, 3, 2) == 1.0  # n - c = 1 < k = 2: every pair holds a correct sample
    assert pass_at_k(4, 1, 4) == 1.0  # k = n: "at least one of the n"
    # large n: the product form neither overflows nor loses the value (C(1000, 500) has 300 digits)
    assert pass_at_k(1000, 1, 500) == pytest.approx(0.5, abs=1e-12)  # 1 - C(999,500)/C(1000,500) = 500/1000


@pytest.mark.parametrize(
    "n, c, k, error, message",
    [
        (4, 5, 1, ValueError, "0 <= c <= n"),
        (4, -1, 1, ValueError, "0 <= c <= n"),
        (4, 1, 0, ValueError, "1 <= k <= n"),
        (4, 1, 5, ValueError, "1 <= k <= n"),
        (4.0, 1, 1, TypeError, "n must be an int"),
        (4, True, 1, TypeError, "c must be an int"),
    ],
)
def test_pass_at_k_rejects_bad_arguments(n, c, k, error, message):
    with pytest.raises(error, match=message):
        pass_at_k(n, c, k)


def test_pass_sizes_are_powers_of_two_then_k():
    assert pass_sizes(1) == [1]
    assert pass_sizes(4) == [1, 2, 4]
    assert pass_sizes(6) == [1, 2, 4, 6]


def test_settings_reject_sampling_at_temperature_0():
    with pytest.raises(ValueError, match="temperature must be > 0 when num_samples > 0"):
        EvalSettings(num_samples=4, temperature=0.0)
    EvalSettings(num_samples=0, temperature=0.0)  # greedy only: the temperature is not used


# --- the engine on the tiny model ---------------------------------------------------------------------------


def first_c_of_each_group(prompts, completions, c, **columns):
    """1.0 for the first `c` completions of each prompt, else 0.0: a group is a run of equal consecutive
    prompts (the prompts of one batch are distinct), so a prompt gets exactly min(c, group size) correct."""
    rewards, position = [], 0
    for i, prompt in enumerate(prompts):
        position = position + 1 if i > 0 and prompts[i - 1] == prompt else 0
        rewards.append(1.0 if position < c[i] else 0.0)
    return rewards


def c_examples():
    # c correct of k = 4 samples; greedy (a group of 1) is correct when c >= 1
    rows = [("x", 0), ("y", 1), ("y", 2), ("x", 4)]
    return [{"prompt": f"What is {i} + {i} ?", "level": level, "c": c} for i, (level, c) in enumerate(rows)]


def tiny_backend(model, tokenizer):
    tokenizer.padding_side = "left"
    return ROLLOUTS.make("transformers", model=model, tokenizer=tokenizer)


def test_engine_figures_equal_the_hand_computed_ones(tiny_llama, tiny_tokenizer):
    scorer = RewardScorer(first_c_of_each_group)
    settings = EvalSettings(max_completion_length=3, num_samples=4, batch_size=3)  # batches of 3 and 1
    result = evaluate(c_examples(), tiny_backend(tiny_llama, tiny_tokenizer), scorer, settings)
    # c = 0, 1, 2, 4 of k = 4; pass@2 per prompt = 1 - C(4-c, 2)/C(4, 2) = 0, 1-3/6, 1-1/6, 1
    assert result.metrics == pytest.approx({
        "eval/accuracy": 3 / 4,  # greedy correct for c >= 1
        "eval/avg@4": (0 + 1 / 4 + 2 / 4 + 1) / 4,  # 0.4375
        "eval/pass@1": (0 + 1 / 4 + 2 / 4 + 1) / 4,  # unbiased pass@1 = avg@k
        "eval/pass@2": (0 + 1 / 2 + 5 / 6 + 1) / 4,  # 7/12
        "eval/pass@4": 3 / 4,  # at least one of 4 correct
        "eval/accuracy/x": 1 / 2, "eval/avg@4/x": (0 + 1) / 2, "eval/pass@1/x": 1 / 2,
        "eval/pass@2/x": 1 / 2, "eval/pass@4/x": 1 / 2,
        "eval/accuracy/y": 1.0, "eval/avg@4/y": (1 / 4 + 2 / 4) / 2, "eval/pass@1/y": 3 / 8,
        "eval/pass@2/y": (1 / 2 + 5 / 6) / 2, "eval/pass@4/y": 1.0,
    }, abs=1e-12)
    assert result.overall["prompts"] == 4 and result.levels["x"]["prompts"] == 2
    assert [r["num_correct"] for r in result.records] == [0, 1, 2, 4]
    assert result.records[1]["sample_rewards"] == [1.0, 0.0, 0.0, 0.0]
    assert [r["greedy_reward"] for r in result.records] == [0.0, 1.0, 1.0, 1.0]
    assert [r["index"] for r in result.records] == [0, 1, 2, 3]
    assert result.reward_funcs == ["first_c_of_each_group"]


def test_level_rewards_and_progress(tiny_llama, tiny_tokenizer):
    def by_level(prompts, completions, level, **columns):  # every completion of level "a" right, of "b" wrong
        return [1.0 if lv == "a" else 0.0 for lv in level]

    examples = [{"prompt": f"What is {i} ?", "level": lv, "answer": str(i)} for i, lv in enumerate("aab")]
    calls = []
    result = evaluate_model(tiny_llama, tiny_tokenizer, examples, by_level,
                            EvalSettings(max_completion_length=2, num_samples=2, batch_size=2),
                            progress=lambda done, total: calls.append((done, total)))
    assert calls == [(2, 3), (3, 3)]  # after each batch of prompts
    assert result.overall == pytest.approx({"prompts": 3, "accuracy": 2 / 3, "avg@2": 2 / 3, "pass@1": 2 / 3,
                                            "pass@2": 2 / 3}, abs=1e-12)
    assert result.levels == {"a": {"prompts": 2, "accuracy": 1.0, "avg@2": 1.0, "pass@1": 1.0, "pass@2": 1.0},
                             "b": {"prompts": 1, "accuracy": 0.0, "avg@2": 0.0, "pass@1": 0.0, "pass@2": 0.0}}
    assert result.records[2]["answer"] == "2" and result.records[2]["level"] == "b"


def text_length(prompts, completions, **columns):
    return [len(c) / 10 for c in completions]


def test_greedy_is_reproducible_and_sampling_follows_the_seed(tiny_llama, tiny_tokenizer):
    examples = [{"prompt": f"What is {i} + 1 ?"} for i in range(5)]
    settings = EvalSettings(max_completion_length=5, num_samples=3, batch_size=2, seed=7)
    rng_before = torch.random.get_rng_state()
    first = evaluate_model(tiny_llama, tiny_tokenizer, examples, text_length, settings)
    assert torch.equal(torch.random.get_rng_state(), rng_before)  # the caller's random state is untouched
    second = evaluate_model(tiny_llama, tiny_tokenizer, examples, text_length, settings)
    assert [r["greedy_completion"] for r in first.records] == [r["greedy_completion"] for r in second.records]
    assert first.records == second.records and first.metrics == second.metrics
    other = evaluate_model(tiny_llama, tiny_tokenizer, examples, text_length,
                           EvalSettings(max_completion_length=5, num_samples=3, batch_size=2, seed=8))
    assert [r["greedy_completion"] for r in other.records] == [r["greedy_completion"] for r in first.records]
    assert [r["sample_rewards"] for r in other.records] != [r["sample_rewards"] for r in first.records]


def test_reward_inputs_follow_trls_convention():
    examples = [{"prompt": [{"role": "user", "content": "q1"}], "prompt_text": "t1", "answer": "1", "level": 2},
                {"prompt": "q2", "answer": "2", "level": 3}]
    texts, ids = ["a", "b", "c", "d"], torch.arange(8).view(4, 2)
    mask = torch.tensor([[1, 1], [1, 1], [1, 0], [1, 1]])  # completion 2 stopped after one token
    prompts, completions, columns = reward_inputs(examples, texts, 2, ids, mask)
    assert prompts == [examples[0]["prompt"]] * 2 + ["q2", "q2"]
    assert completions == [[{"role": "assistant", "content": "a"}], [{"role": "assistant", "content": "b"}],
                           "c", "d"]  # chat prompts get message completions, plain ones text
    assert columns == {"answer": ["1", "1", "2", "2"], "level": [2, 2, 3, 3],
                       "completion_ids": [[0, 1], [2, 3], [4], [6, 7]]}  # prompt_text is not a column


def test_results_file_is_written_atomically_and_never_silently_replaced(tiny_llama, tiny_tokenizer, tmp_path):
    examples = [{"prompt": "What is 1 ?", "answer": "1"}]
    result = evaluate_model(tiny_llama, tiny_tokenizer, examples, text_length, EvalSettings(max_completion_length=2))
    path = result.save(tmp_path / "out" / "eval.json", config={"model": "tiny"})
    data = json.loads(path.read_text())
    assert set(data) == {"grposcope_version", "config", "metrics", "overall", "levels", "seconds", "records"}
    assert data["config"]["model"] == "tiny" and data["config"]["num_samples"] == 0
    assert data["config"]["reward_funcs"] == ["text_length"]
    assert data["records"][0]["num_correct"] is None and data["records"][0]["sample_rewards"] == []
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
    with pytest.raises(FileExistsError, match="overwrite=True"):
        result.save(path)
    result.save(path, overwrite=True)


# --- the trainer's evaluate() --------------------------------------------------------------------------------


def test_trainer_evaluate_reports_greedy_accuracy_per_level(tmp_path, tiny_llama, tiny_tokenizer):
    from grposcope import GRPOConfig, GRPOTrainer

    def by_level(prompts, completions, level, **columns):
        return [1.0 if lv == "easy" else 0.0 for lv in level]

    data = [{"prompt": f"What is {i} ?", "level": lv} for i, lv in enumerate(["easy", "easy", "easy", "hard"])]
    config = GRPOConfig(output_dir=str(tmp_path / "run"), num_generations=2, per_device_train_batch_size=2,
                        max_completion_length=3, max_steps=1)
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=by_level,
                          train_dataset=data, eval_dataset=data, args=config)
    metrics = trainer.evaluate()
    assert metrics == {"eval/accuracy": 3 / 4, "eval/accuracy/easy": 1.0, "eval/accuracy/hard": 0.0}


# --- the command --------------------------------------------------------------------------------------------


def level_1_only(prompts, completions, level, **columns):
    return [1.0 if lv == "1" else 0.0 for lv in level]


@pytest.fixture
def math_file(tmp_path):
    path = tmp_path / "math.jsonl"
    rows = [{"problem": "What is 1 + 1 ?", "answer": "2", "level": 1},
            {"problem": "What is 2 + 2 ?", "answer": "4", "level": 1},
            {"problem": "What is 3 * 3 ?", "answer": "9", "level": 2}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_cli_eval_end_to_end(tmp_path, tiny_model_dir, math_file, monkeypatch):
    monkeypatch.setitem(REWARDS._entries, "level_1_only", level_1_only)  # removed again after the test
    out = tmp_path / "results" / "eval.json"
    args = ["eval", "--model", str(tiny_model_dir), "--dataset", str(math_file), "--num_samples", "2",
            "--max_completion_length", "3", "--reward_funcs", "level_1_only", "--output", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["metrics"] == {
        "eval/accuracy": 2 / 3, "eval/avg@2": 2 / 3, "eval/pass@1": 2 / 3, "eval/pass@2": 2 / 3,
        "eval/accuracy/1": 1.0, "eval/avg@2/1": 1.0, "eval/pass@1/1": 1.0, "eval/pass@2/1": 1.0,
        "eval/accuracy/2": 0.0, "eval/avg@2/2": 0.0, "eval/pass@1/2": 0.0, "eval/pass@2/2": 0.0,
    }
    config = data["config"]
    assert config["split"] == "all" and config["reward_funcs"] == ["level_1_only"] and config["seed"] == 42
    assert config["model"] == str(tiny_model_dir) and config["num_samples"] == 2
    assert [r["answer"] for r in data["records"]] == ["2", "4", "9"]  # the whole file, in its order
    assert [r["num_correct"] for r in data["records"]] == [2, 2, 0]
    table = result.stdout
    for header in ("level", "prompts", "pass@1 (greedy)", "avg@2", "pass@2"):
        assert header in table
    rows = {cells[0]: cells[1:] for line in table.splitlines()
            if len(cells := [c.strip() for c in line.split("│")[1:-1]]) == 5}
    assert rows == {"1": ["2", "1.000", "1.000", "1.000"], "2": ["1", "0.000", "0.000", "0.000"],
                    "all": ["3", "0.667", "0.667", "0.667"]}  # body rows (the header uses ┃)
    assert str(out) in result.stdout.replace("\n", "")


def test_cli_eval_errors_name_the_fix(tmp_path, tiny_model_dir, math_file):
    runner = CliRunner()
    base = ["eval", "--model", str(tiny_model_dir), "--reward_funcs", "accuracy_reward"]
    result = runner.invoke(app, [*base, "--dataset", str(math_file), "--num_samples", "4", "--temperature", "0",
                                 "--output", str(tmp_path / "a.json")])
    assert result.exit_code == 2 and "temperature must be > 0 when num_samples > 0" in result.output
    result = runner.invoke(app, [*base, "--dataset", str(tmp_path / "missing.jsonl"),
                                 "--output", str(tmp_path / "b.json")])
    assert result.exit_code == 2 and "error: no such file" in result.output and "missing.jsonl" in result.output
    existing = tmp_path / "c.json"
    existing.write_text("{}")
    result = runner.invoke(app, [*base, "--dataset", str(math_file), "--output", str(existing)])
    assert result.exit_code == 2 and "already exists; pass --overwrite" in result.output
    assert existing.read_text() == "{}"
    result = runner.invoke(app, [*base, "--dataset", str(math_file), "--split", "test",
                                 "--output", str(tmp_path / "d.json")])
    assert result.exit_code == 2 and "unknown split 'test'; choose one of eval, train, all" in result.output
    result = runner.invoke(app, [*base, "--dataset", str(math_file), "--reward_funcs", "nope",
                                 "--output", str(tmp_path / "e.json")])
    assert result.exit_code == 2 and "unknown reward function 'nope'; known:" in result.output
    assert not any(tmp_path.glob("[abde].json"))


def test_cli_overwrite_replaces_the_file(tmp_path, tiny_model_dir, math_file):
    existing = tmp_path / "c.json"
    existing.write_text("{}")
    result = CliRunner().invoke(app, ["eval", "--model", str(tiny_model_dir), "--dataset", str(math_file),
                                      "--reward_funcs", "accuracy_reward", "--max_completion_length", "2",
                                      "--limit", "1", "--output", str(existing), "--overwrite"])
    assert result.exit_code == 0, result.output
    data = json.loads(existing.read_text())
    assert data["config"]["limit"] == 1 and len(data["records"]) == 1


def test_generated_eval_split_is_the_training_runs_held_out_split():
    from grposcope.data.tasks import load_task

    examples, rewards = load_eval_examples("arithmetic:easy", seed=42, dataset_size=20, eval_size=5)
    held_out = load_task("arithmetic:easy", size=20, seed=42, eval_size=5).eval  # what training holds out
    assert examples == held_out and rewards == ["accuracy_reward"]
    assert load_eval_examples("arithmetic:easy", seed=42, dataset_size=20, eval_size=5, limit=2)[0] == held_out[:2]
