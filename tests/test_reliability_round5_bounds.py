"""Reliability, round 5 (issue 56), item 5 and item 13's eval_size: sizes with no bound are refused in one line
before anything is allocated or loaded (knapsack's groups and budget, greso's candidates, sampled evaluations),
and `eval_size` holds prompts out of a `train_dataset` instead of being ignored (noted beside an eval_dataset).
Each failed before its change: the sizes were taken and ended in a 72-177-line allocator traceback (or, for
greso, ran without a word), and eval_size left the held-out split empty. docs/reliability.md's table has the
messages a real run printed.

Available memory is patched to fixed numbers where a message holds it, and loading a model fails the test: every
refusal comes first, so nothing big is ever allocated.
"""

from __future__ import annotations

import re

import pytest
import torch
from typer.testing import CliRunner

from grposcope import GRPOConfig, GRPOTrainer
from grposcope.cli import app
from grposcope.sampling import make

GIB = 2**30
KNAPSACK_GROUPS = ("knapsack_max_groups must be an int in [1, 1024] (the most groups of G one prompt may get in a "
                   "step, e.g. 4, the default; Knapsack RL's hardest prompts got 93 samples, under 12 groups of 8), "
                   "got ")
GRESO_CANDIDATES = ("greso_max_candidates must be in [1, 100] (prompts the filter may look at per batch, as a "
                    "multiple of the batch, e.g. 8, the default; each prompt is drawn with chance >= 0.01, so 100 x "
                    "the batch fills it on average), got 1e+18")


@pytest.fixture
def no_loading(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("grposcope.models.load_model", refuse)


def one_line(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "alloc" not in result.output, result.output
    return " ".join(result.output.split())  # rich may wrap the line


def train(tmp_path, model_dir, *args: str):
    return CliRunner().invoke(app, [
        "train", "--model_name_or_path", str(model_dir), "--output_dir", str(tmp_path / "out"),
        "--dataset_name", "arithmetic:easy", "--dataset_size", "8", "--eval_size", "2", *args])


def simulate(tmp_path, *args: str):
    return CliRunner().invoke(app, ["simulate", "--steps", "2", "--output", str(tmp_path / "sim.json"), *args])


# --- knapsack ----------------------------------------------------------------------------------------------


def test_train_refuses_a_billion_knapsack_groups_in_one_line(tmp_path, tiny_model_dir, no_loading):
    # before: taken, then a table of 1e9 columns a prompt (8 GB under an 8 GB ulimit; ~4 TB asked in the issue)
    result = train(tmp_path, tiny_model_dir, "--sampler", "knapsack", "--knapsack_max_groups", "1000000000")
    assert one_line(result) == f"error: {KNAPSACK_GROUPS}1000000000"
    assert not (tmp_path / "out" / "metrics.jsonl").exists()


def test_simulate_refuses_a_hundred_million_knapsack_groups_in_one_line(tmp_path):
    result = simulate(tmp_path, "--sampler", "knapsack", "--knapsack_max_groups", "100000000")
    assert one_line(result) == f"error: {KNAPSACK_GROUPS}100000000"
    assert not (tmp_path / "sim.json").exists()


def test_train_refuses_a_knapsack_budget_it_could_never_spend(tmp_path, tiny_model_dir, no_loading):
    # the default geometry generates 8 completions at once, groups of 8: one prompt a step, which knapsack may
    # give at most 4 groups: 1 x 4 x 8 = 32 completions. Before: a (10^12 / 8 + 1)-long table, 1 TB asked.
    result = train(tmp_path, tiny_model_dir, "--sampler", "knapsack", "--sample_budget", "1000000000000")
    assert one_line(result) == (
        "error: sample_budget=1,000,000,000,000 is more than knapsack can spend in a step: 1 prompt x "
        "knapsack_max_groups=4 x num_generations=8 = 32 completions; lower sample_budget to at most 32, or raise "
        "knapsack_max_groups")


def test_simulate_refuses_a_knapsack_budget_it_could_never_spend(tmp_path):
    # 256 prompts x 4 groups x 16 = 16,384 completions a step at most
    result = simulate(tmp_path, "--sampler", "knapsack", "--sample_budget", "1000000000000")
    assert one_line(result) == (
        "error: sample_budget=1,000,000,000,000 is more than knapsack can spend in a step: 256 prompts x "
        "knapsack_max_groups=4 x num_generations=16 = 16,384 completions; lower sample_budget to at most 16,384, or "
        "raise knapsack_max_groups")
    assert not (tmp_path / "sim.json").exists()


def test_a_knapsack_table_too_big_for_the_machine_is_refused_with_its_size():
    # B=64 prompts, G=8, knapsack_max_groups=1024 and the most it can spend, 64 x 1024 x 8 = 524,288: C = 65,536
    # groups, M = 1024 a prompt. 8 bytes x (values 64 x 1025 + choices 64 x 65,537 + 3 x 65,537 x 1025 tables)
    # = 8 x (65,600 + 4,194,368 + 201,526,275) = 1,646,289,944 bytes = 1.5 GiB
    sampler = make("knapsack", sample_budget=524_288, knapsack_max_groups=1024)
    with pytest.raises(RuntimeError) as caught:
        sampler.check_step(64, 8, available=GIB)
    assert str(caught.value) == (
        "knapsack's allocation of a step needs ~1.5 GiB (its table over 64 prompts and 65,536 groups of G=8, up to "
        "1,024 a prompt) but this machine has 1.0 GiB available; lower sample_budget or knapsack_max_groups")
    sampler.check_step(64, 8, available=2 * GIB)  # 1.53 GiB fits in 2


def test_the_knapsack_table_as_wide_as_the_budget_gives_the_same_allocation():
    from grposcope.sampling.knapsack import allocate, allocation_units, task_value

    # 5 prompts, G=4, a budget of 3 groups, knapsack_max_groups=1000: the table the options would ask for has
    # 1001 columns a prompt, but no prompt can get more than the 3 groups the budget holds
    p = torch.tensor([0.05, 0.3, 0.5, 0.9, 0.02], dtype=torch.float64)
    capacity, most = allocation_units(5, 12, 4, 1000)
    assert (capacity, most) == (3, 3)
    wide = allocate(task_value(torch.arange(1001) * 4, p), 12 // 4)
    narrow = allocate(task_value(torch.arange(most + 1) * 4, p), capacity)
    assert narrow.tolist() == wide.tolist() and int(narrow.sum()) == 3
    # a budget beyond every prompt at its cap (5 x 2 groups) is cut to it
    assert allocation_units(5, 1000, 4, 2) == (10, 2)


# --- greso -------------------------------------------------------------------------------------------------


def test_train_refuses_greso_candidates_of_1e18(tmp_path, tiny_model_dir, no_loading):
    # before: taken without a word (a step whose prompts were all filtered could look at 1e18 x the batch)
    result = train(tmp_path, tiny_model_dir, "--sampler", "greso", "--greso_max_candidates", "1e18")
    assert one_line(result) == f"error: {GRESO_CANDIDATES}"


def test_simulate_refuses_greso_candidates_of_1e18(tmp_path):
    result = simulate(tmp_path, "--sampler", "greso", "--greso_max_candidates", "1e18")
    assert one_line(result) == f"error: {GRESO_CANDIDATES}"
    assert not (tmp_path / "sim.json").exists()



def test_budgeted_candidates_of_1e18_are_refused_in_one_line(tmp_path, tiny_model_dir, no_loading):
    # before: simulate ran out of memory building the candidate list (a 48-line allocator traceback)
    said = ("error: budget_candidates must be in [1, 100] (prompts a step considers, as a multiple of the batch, "
            "e.g. 4, the default; they are the next prompts of the data stream, so more only holds more of them in "
            "memory), got 1e+18")
    assert one_line(simulate(tmp_path, "--sampler", "budgeted", "--budget_candidates", "1e18")) == said
    assert one_line(train(tmp_path, tiny_model_dir, "--sampler", "budgeted", "--budget_candidates", "1e18")) == said


def test_a_budgeted_simulation_too_big_names_sample_budget_not_the_group_size(tmp_path):
    # before: "lower num_generations or batch_size", neither of which is what asked for 1e12 samples
    line = one_line(simulate(tmp_path, "--sampler", "budgeted", "--sample_budget", "1000000000000"))
    assert "1,000,000,000,000 samples a step (sample_budget)" in line and "; lower sample_budget (" in line, line

# --- sampled evaluations -----------------------------------------------------------------------------------

EVAL_BATCH = (r"an evaluation batch needs ~[\d.]+ GiB \((\d+) prompts x 1,000,000,000 completions = [\d,]+ generated "
              r"at once, length=\d+\+256 tokens, vocabulary 64: generation [\d.]+ GiB, weights 0.0 GiB\) but this "
              r"machine has 16.0 GiB available; lower ")


def test_train_refuses_eval_num_samples_too_big_for_the_machine(tmp_path, tiny_model_dir, no_loading, monkeypatch):
    # before: the evaluation before the first step reserved a KV cache for 2 x 10^9 rows (a 177-line traceback)
    monkeypatch.setattr("grposcope.trainer.memory.available_memory", lambda: 16 * GIB)
    result = train(tmp_path, tiny_model_dir, "--eval_num_samples", "1000000000")
    message = one_line(result)
    assert re.fullmatch(f"error: {EVAL_BATCH}" + re.escape("eval_num_samples (sampled completions per held-out "
                                                           "prompt, e.g. 8)"), message), message
    assert re.search(EVAL_BATCH, message).group(1) == "2"  # the 2 held-out prompts, in one batch of 32 at most


def test_eval_refuses_num_samples_too_big_for_the_machine(tmp_path, tiny_model_dir, no_loading, monkeypatch):
    monkeypatch.setattr("grposcope.trainer.memory.available_memory", lambda: 16 * GIB)
    result = CliRunner().invoke(app, [
        "eval", "--model", str(tiny_model_dir), "--dataset", "arithmetic:easy", "--num_samples", "1000000000",
        "--output", str(tmp_path / "e.json")])
    message = one_line(result)
    assert re.fullmatch(f"error: {EVAL_BATCH}--num_samples or --batch_size", message), message
    assert re.search(EVAL_BATCH, message).group(1) == "16"  # --batch_size's default
    assert not (tmp_path / "e.json").exists()


# --- eval_size with a train_dataset (item 13) --------------------------------------------------------------

DATA = [{"prompt": f"What is {a} + {b} ?", "answer": str(a + b)} for a, b in [(1, 2), (3, 4), (2, 2), (5, 1),
                                                                             (4, 3), (6, 2)]]


def test_eval_size_holds_prompts_out_of_a_train_dataset():
    from grposcope.trainer.setup import load_examples

    # before: eval_size was not read when a train_dataset was given: train 6, held out 0
    train, held_out, _ = load_examples(GRPOConfig(eval_size=2, seed=0), DATA, None)
    assert (len(train), len(held_out)) == (4, 2)
    assert not {e["prompt"] for e in train} & {e["prompt"] for e in held_out}
    assert sorted(e["prompt"] for e in train + held_out) == sorted(e["prompt"] for e in DATA)
    assert load_examples(GRPOConfig(), DATA, None)[:2] == (DATA, [])  # None: trained on whole, as TRL's
    assert load_examples(GRPOConfig(eval_size=0), DATA, None)[:2] == (DATA, [])


def test_a_run_with_eval_size_and_a_train_dataset_evaluates_its_held_out_prompts(tmp_path, tiny_llama,
                                                                                  tiny_tokenizer):
    def length(prompts, completions, **kwargs):
        return [len(c) / 50 for c in completions]

    args = GRPOConfig(output_dir=str(tmp_path / "run"), num_generations=2, per_device_train_batch_size=4,
                      max_completion_length=4, max_steps=1, logging_steps=1, eval_size=2, save_steps=100)
    trainer = GRPOTrainer(model=tiny_llama, args=args, reward_funcs=length, train_dataset=DATA,
                          processing_class=tiny_tokenizer)
    assert len(trainer.eval_examples) == 2
    summary = trainer.train()
    assert "eval/accuracy before" in summary and "eval/accuracy after" in summary  # before: neither


def test_eval_size_beside_an_eval_dataset_is_noted_and_the_eval_dataset_evaluated(tmp_path, tiny_llama,
                                                                                   tiny_tokenizer):
    args = GRPOConfig(output_dir=str(tmp_path / "run"), num_generations=2, per_device_train_batch_size=4,
                      max_completion_length=4, max_steps=1, eval_size=2)
    with pytest.warns(RuntimeWarning) as caught:  # before: not read, without a word
        trainer = GRPOTrainer(model=tiny_llama, args=args, train_dataset=DATA, eval_dataset=DATA[:3],
                              reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                              processing_class=tiny_tokenizer)
    said = [str(w.message) for w in caught if "eval_size" in str(w.message)]
    assert said == ["eval_size=2 is not used: the held-out prompts are eval_dataset's (eval_limit evaluates on the "
                    "first N of them); drop eval_size, or drop eval_dataset to hold eval_size prompts out of "
                    "train_dataset"]
    assert caught[0].filename == __file__  # it points at the GRPOTrainer(...) line
    assert [e["prompt"] for e in trainer.eval_examples] == [e["prompt"] for e in DATA[:3]]
