"""How grposcope answers bad input, through the entry points a user meets: `GRPOConfig(...)`,
`GRPOTrainer(...)` / `.train()` on the tiny in-process Llama, `load_task`, and the reward functions.

Each test checks the exception type, that the message names the problem and the fix (a few key words), and,
where a run had started, that nothing on disk was lost. Cases an older test already covers exactly are not
repeated here: test_config.py (num_generations=1, max_completion_length=0, unknown advantage_estimator,
sampler, loss_type), test_data.py (load_task of an unknown task, lists without a prompt, a .jsonl file
without 'problem' or 'answer'), test_rewards.py (every reward error at the scorer level, the pow tower and
deep braces under math-verify's bound), test_models.py (load_model of missing paths).
"""

from __future__ import annotations

import json
import threading

import pytest

from grposcope import GRPOConfig, GRPOTrainer
from grposcope.data import load_task
from grposcope.rewards import RewardFunctionError, make_box_accuracy_reward

DATA = [{"prompt": [{"role": "user", "content": f"What is {a} + {b} ?"}], "answer": str(a + b)}
        for a, b in [(1, 2), (3, 4), (2, 2), (5, 1)]]
N = 4  # completions a generation: 2 prompts x num_generations 2 (one optimizer step each)


def config(tmp_path, **overrides) -> GRPOConfig:
    """The smallest run: 4 completions of at most 4 tokens a step, one optimizer step per generation."""
    options = dict(output_dir=str(tmp_path / "run"), num_generations=2, per_device_train_batch_size=N,
                   max_completion_length=4, learning_rate=1e-3, max_steps=2, logging_steps=1, seed=0)
    return GRPOConfig(**(options | overrides))


def constant(prompts, completions, **kwargs):
    return [0.5] * len(completions)


def metrics_lines(tmp_path) -> list[dict]:
    path = tmp_path / "run" / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# ---------------------------------------------------------------- 1. datasets


@pytest.mark.parametrize(
    "train, evals, error, pattern",
    [
        ([{"question": "What is 1 + 1 ?", "answer": "2"}], None, ValueError,
         r"train_dataset: example 0 has no 'prompt' column.*seems to be in 'question': rename it"),
        (DATA + [{"prompt": "  ", "answer": "1"}], None, ValueError,
         r"train_dataset: example 4 has an empty prompt; drop the example or give it the question text"),
        ([{"prompt": 7, "answer": "7"}], None, TypeError,
         r"train_dataset: example 0: 'prompt' is a int; it must be a string or a list of chat messages"),
        ([{"prompt": None, "answer": "7"}], None, TypeError,
         r"example 0: 'prompt' is a NoneType; it must be"),
        (DATA, [{"prompt": [{"role": "user", "content": None}]}], TypeError,
         r"eval_dataset: example 0, message 0 has a 'content' of type NoneType; it must be a string"),
    ],
    ids=["no-prompt-column", "empty-prompt", "int-prompt", "none-prompt", "eval-none-content"],
)
def test_a_bad_dataset_stops_the_trainer_before_anything_is_written(tmp_path, tiny_llama, tiny_tokenizer,
                                                                    train, evals, error, pattern):
    with pytest.raises(error, match=pattern):
        GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=constant,
                    train_dataset=train, eval_dataset=evals, args=config(tmp_path))
    assert not (tmp_path / "run").exists()


def test_an_hf_dataset_without_prompt_is_named_as_train_dataset(tmp_path, tiny_llama, tiny_tokenizer):
    datasets = pytest.importorskip("datasets")
    data = datasets.Dataset.from_list([{"problem": "What is 1 + 1 ?", "answer": "2"}])
    expected = r"^train_dataset: example 0 has no 'prompt'.*rename_column\('problem'"
    with pytest.raises(ValueError, match=expected):
        GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=constant,
                    train_dataset=data, args=config(tmp_path))


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


GOOD_ROW = {"problem": "What is 1 + 1?", "answer": "2"}


@pytest.mark.parametrize(
    "row, pattern",
    [
        ({"problem": 12, "answer": "1"}, r"line 2: 'problem' is a JSON number; it must be a string holding"),
        ({"problem": None, "answer": "1"}, r"line 2: 'problem' is a JSON null; it must be a string"),
        ({"problem": "   ", "answer": "1"}, r"line 2: no 'problem' text .*add a 'problem' string"),
        ({"problem": "2 + 2?", "answer": ""},
         r"line 2: neither 'answer' nor 'solution'; add an 'answer' field"),
        ({"problem": "Roots?", "answer": ["1", "2"]},
         r"line 2: 'answer' is a JSON array; give the final answer as one string"),
    ],
    ids=["int-problem", "null-problem", "blank-problem", "empty-answer", "list-answer"],
)
def test_a_bad_math500_row_names_file_line_and_fix(tmp_path, row, pattern):
    path = write_jsonl(tmp_path / "math.jsonl", [GOOD_ROW, row])
    with pytest.raises(ValueError, match=r"math\.jsonl, " + pattern):
        load_task(path)


def test_a_bad_math500_file_as_dataset_name_stops_the_trainer(tmp_path, tiny_llama, tiny_tokenizer):
    path = write_jsonl(tmp_path / "math.jsonl", [GOOD_ROW, {"question": "2 + 2?", "answer": "4"}])
    with pytest.raises(ValueError, match=r"math\.jsonl, line 2: no 'problem' text \(fields found: question"):
        GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer,
                    args=config(tmp_path, dataset_name=str(path), reward_funcs=["accuracy_reward"]))
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------- 2. reward functions in a real run


def failing_from_second_call(kind: str, release: threading.Event):
    """A reward function that scores the first batch 1.0 and goes wrong (as `kind` says) from then on."""
    calls = []

    def flaky(prompts, completions, **kwargs):
        calls.append(len(completions))
        n = len(completions)
        if len(calls) == 1:
            return [1.0] * n
        if kind == "raises":
            raise ValueError("cannot score this reply")
        if kind == "wrong_length":
            return [1.0]
        if kind == "nan":
            return [1.0] + [float("nan")] + [1.0] * (n - 2)
        if kind == "inf":
            return [1.0, 1.0, float("inf")] + [1.0] * (n - 3)
        release.wait(30)  # "hangs": sleeps 30 s, or until the test is done with it
        return [1.0] * n

    return flaky


# kind, the problem in the message, the sample shown, the fix in the message, samples zero-scored per step
REWARD_FAILURES = [
    ("raises", r"raised ValueError: cannot score this reply \[sample 0\]", 0,
     "Fix: fix the function so it handles this sample", N),
    ("wrong_length", rf"returned 1 values for {N} completions \[the whole call of {N} samples\]", 0,
     "Fix: return one float (or None) per completion", N),
    ("nan", r"returned nan \[sample 1\]", 1, "Fix: return a finite float, or None", 1),
    ("inf", r"returned inf \[sample 2\]", 2, "Fix: return a finite float, or None", 1),
    ("hangs", r"did not return within reward_timeout=0.5 s on a batch of 4 samples", 0,
     "Fix: make the function faster or bound its own work per sample, or raise reward_timeout", N),
]


def flaky_trainer(tmp_path, model, tokenizer, kind: str, release: threading.Event, **options) -> GRPOTrainer:
    """A run whose second reward function fails in the way `kind` says from its second call on."""
    return GRPOTrainer(model=model, processing_class=tokenizer, train_dataset=DATA,
                       reward_funcs=[constant, failing_from_second_call(kind, release)],
                       args=config(tmp_path, reward_timeout=0.5, **options))


@pytest.mark.parametrize("kind, problem, shown, fix, _", REWARD_FAILURES, ids=[c[0] for c in REWARD_FAILURES])
def test_a_failing_reward_stops_the_run_and_keeps_the_steps_before(tmp_path, tiny_llama, tiny_tokenizer,
                                                                   kind, problem, shown, fix, _):
    release = threading.Event()
    trainer = flaky_trainer(tmp_path, tiny_llama, tiny_tokenizer, kind, release, max_steps=3)
    try:
        with pytest.raises(RewardFunctionError, match=r"reward function 'flaky' " + problem) as info:
            trainer.train()
    finally:
        release.set()
    message = str(info.value)
    assert info.value.function == "flaky"
    assert f"prompt[{shown}]: " in message and "What is" in message  # the offending sample, shown
    assert f"completion[{shown}]: " in message
    assert fix in message and "or set reward_errors='zero'" in message
    lines = metrics_lines(tmp_path)
    assert [line["step"] for line in lines] == [1]  # the step before the failure is on disk
    assert lines[0]["reward/flaky/mean"] == 1.0
    # ... and a new run into the same output_dir does not overwrite it
    again = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, train_dataset=DATA,
                        reward_funcs=constant, args=config(tmp_path))
    expected = "already holds a run.*choose another output_dir.*overwrite_output_dir"
    with pytest.raises(ValueError, match=expected):
        again.train()
    assert metrics_lines(tmp_path) == lines


@pytest.mark.parametrize("kind, _, __, ___, zeroed", REWARD_FAILURES, ids=[c[0] for c in REWARD_FAILURES])
def test_a_failing_reward_with_reward_errors_zero_scores_0_and_counts(tmp_path, tiny_llama, tiny_tokenizer,
                                                                      kind, _, __, ___, zeroed):
    release = threading.Event()
    trainer = flaky_trainer(tmp_path, tiny_llama, tiny_tokenizer, kind, release, reward_errors="zero")
    try:
        trainer.train()
    finally:
        release.set()
    first, second = metrics_lines(tmp_path)
    assert first["reward/errors"] == 0.0 and first["reward/flaky/mean"] == 1.0
    assert second["reward/errors"] == zeroed
    # zero-scored samples: 0.5 + 0; the others 0.5 + 1.0 (flaky's valid values are 1.0)
    assert second["reward/mean"] == pytest.approx((zeroed * 0.5 + (N - zeroed) * 1.5) / N)


# ---------------------------------------------------------------- 3. LaTeX that makes math-verify slow


def nested(template: str, depth: int, core: str = "2") -> str:
    text = core
    for _ in range(depth):
        text = template.format(text)
    return text


def test_pathological_latex_scores_0_and_the_rest_of_the_batch_is_scored(tmp_path):
    # the gold answer can be the slow one too: a MATH-500 file whose answer is a power tower
    path = write_jsonl(tmp_path / "math.jsonl", [{"problem": "Tower?", "answer": "9^{9^{9^{9^{9}}}}"}])
    tower_gold = load_task(path, eval_size=0).train[0]["answer"]
    # box_accuracy_reward is make_box_accuracy_reward(5.0); 1 s keeps the test short and a loaded machine's
    # normal samples (about 0.1 s in a fresh worker) well inside the bound
    reward = make_box_accuracy_reward(timeout_s=1.0)
    completions = [
        r"so \boxed{\frac{1}{2}}",
        r"\boxed{" + nested(r"\frac{{1}}{{{}}}", 300) + "}",  # 300 nested fractions (= 2; gold 3)
        r"\boxed{" + nested("2^{{{}}}", 60) + "}",  # a 60-storey power tower
        r"\boxed{" + "+".join(["x"] * 20_000) + "}",  # a 20,000-term sum
        r"\boxed{2}",  # against the tower gold
        r"\boxed{3}",  # scored by a new worker: each slow sample's worker was killed
    ]
    answers = ["0.5", "3", "2", "2", tower_gold, "3"]
    assert reward(None, completions, answer=answers) == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]


# ---------------------------------------------------------------- 4. batch geometry


@pytest.mark.parametrize(
    "options, pattern",
    [
        ({"num_generations": 0}, r"num_generations must be a whole number in \[2, 1,000,000\] \(.*\), got 0"),
        ({"max_completion_length": -1},
         r"max_completion_length must be > 0 tokens \(the longest reply.*e.g. 256.*got -1"),
    ],
    ids=["num_generations=0", "max_completion_length=-1"],
)
def test_out_of_range_lengths_are_refused_by_the_config(options, pattern):
    with pytest.raises(ValueError, match=pattern):
        GRPOConfig(**options)


def test_a_generation_batch_of_partial_groups_fails_before_the_model_loads(tmp_path):
    args = config(tmp_path, per_device_train_batch_size=6, num_generations=4, steps_per_generation=1,
                  model_name_or_path=str(tmp_path / "no-such-model"))  # would fail next, if reached
    expected = (r"generation batch \(6 x 1 = 6 completions\) must be a multiple of num_generations \(4\).*"
                r"change per_device_train_batch_size, gradient_accumulation_steps or num_generations")
    with pytest.raises(ValueError, match=expected):
        GRPOTrainer(args=args, reward_funcs=constant, train_dataset=DATA)
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------- 5. unknown names


def test_unknown_lr_scheduler_lists_the_known_ones():
    expected = r"unknown lr_scheduler_type 'warmup_cosine'; known: linear, constant"
    with pytest.raises(ValueError, match=expected):
        GRPOConfig(lr_scheduler_type="warmup_cosine")


def test_unknown_report_to_backend_fails_before_the_first_step(tmp_path, tiny_llama, tiny_tokenizer):
    # Today GRPOConfig and GRPOTrainer accept the name and train() refuses it, before any step; the test holds
    # wherever the check moves, as long as no step runs.
    expected = r"unknown logger\(s\) \['tensorbored'\] in report_to; known: all, none"
    with pytest.raises(ValueError, match=expected):
        GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=constant,
                    train_dataset=DATA, args=config(tmp_path, report_to="tensorbored")).train()
    assert metrics_lines(tmp_path) == []


def test_unknown_dataset_name_lists_the_tasks_and_the_spec(tmp_path, tiny_llama, tiny_tokenizer):
    with pytest.raises(ValueError, match=r"unknown task 'nosuch'; known: arithmetic, rg \(written .*"
                                         r"'rg:leg_counting'\); or give the path of a \.jsonl file"):
        GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=constant,
                    args=config(tmp_path, dataset_name="nosuch"))


@pytest.mark.parametrize("where", ["config", "trainer"])
def test_unknown_reward_name_lists_the_registered_ones(tmp_path, tiny_llama, tiny_tokenizer, where):
    names = ["accuracy_reward", "nosuch"]
    expected = r"unknown reward function 'nosuch'; known: accuracy_reward, box_accuracy_reward, format_reward"
    with pytest.raises(ValueError, match=expected):  # a name in the config fails in GRPOConfig, at once
        args = config(tmp_path, reward_funcs=names if where == "config" else None)
        GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, train_dataset=DATA, args=args,
                    reward_funcs=names if where == "trainer" else None)


# ---------------------------------------------------------------- 6. model paths


@pytest.mark.parametrize("kind", ["missing", "file", "no-config", "no-weights"])
def test_a_bad_model_path_stops_the_trainer_with_the_fix(tmp_path, tiny_llama, kind):
    if kind == "missing":
        spec, error = "/no/such/dir", FileNotFoundError
        pattern = r"model directory '/no/such/dir' does not exist; check the path, or use 'embedded:"
    elif kind == "file":
        (tmp_path / "model.safetensors").write_bytes(b"")
        spec, error = str(tmp_path / "model.safetensors"), ValueError
        pattern = r"model\.safetensors' is a file; pass the directory that holds config\.json"
    elif kind == "no-config":
        (tmp_path / "weights").mkdir()
        spec, error = str(tmp_path / "weights"), FileNotFoundError
        pattern = r"weights has no config\.json, so it is not a Hugging Face checkpoint; write one with"
    else:
        tiny_llama.config.save_pretrained(tmp_path / "config-only")
        spec, error = str(tmp_path / "config-only"), FileNotFoundError
        pattern = (r"config-only has a config\.json but no weights \(model\.safetensors or "
                   r"pytorch_model\.bin\); save them there with model\.save_pretrained")
    with pytest.raises(error, match=pattern):
        GRPOTrainer(args=config(tmp_path, model_name_or_path=spec), reward_funcs=constant, train_dataset=DATA)
    assert not (tmp_path / "run").exists()
