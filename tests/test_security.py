"""Nothing that comes with a model folder or a dataset is run as code.

- A model folder's own Python files run only with trust_remote_code=True (off by default).
- Pickled weights are never unpickled beyond tensors; safetensors is preferred when both are there.
- Dataset fields (prompt, answer, extra columns) and completions are data in every layer: task loading, the
  chat template, the reward functions, math-verify's worker, and reasoning-gym's scorers, some of which call
  eval / sympy's parse_expr on the reply (grposcope.data.gym screens what reaches them).

Every payload writes a sentinel file when run; each test checks that it does not exist afterwards, and,
where cheap, first shows that the payload is live (it does write the sentinel when run on purpose).
"""

from __future__ import annotations

import inspect
import json
import re
import runpy

import pytest
import torch
from conftest import make_tiny_llama

from grposcope import GRPOConfig, GRPOTrainer
from grposcope.data import load_task, render_prompt
from grposcope.models import load_model
from grposcope.rewards import accuracy_reward, box_accuracy_reward, format_reward


def test_trust_remote_code_is_off_by_default():
    assert GRPOConfig().trust_remote_code is False
    assert inspect.signature(load_model).parameters["trust_remote_code"].default is False


# ---------------------------------------------------------------- model folders with code


def code_folder(folder, model_type, sentinel):
    """A model folder whose config.json points at evil.py, which writes `sentinel` when imported."""
    folder.mkdir(exist_ok=True)
    (folder / "evil.py").write_text(f"open({str(sentinel)!r}, 'w').write('ran')\n")
    config = json.loads((folder / "config.json").read_text()) if (folder / "config.json").exists() else {}
    config |= {"model_type": model_type, "architectures": ["EvilModel"],
               "auto_map": {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel",
                            "AutoTokenizer": ["evil.EvilTokenizer", None]}}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_a_folder_that_needs_its_own_code_is_refused_without_running_it(tmp_path):
    sentinel = tmp_path / "SENTINEL"
    folder = code_folder(tmp_path / "evil-model", "evil", sentinel)
    runpy.run_path(str(folder / "evil.py"))  # the payload is live ...
    assert sentinel.exists()
    sentinel.unlink()
    expected = (r"needs its own Python code to load \(config\.json auto_map -> evil\.py\).*"
                r"only with trust_remote_code=True.*only if you have read that code and trust it")
    with pytest.raises(ValueError, match=expected):
        load_model(str(folder))
    args = GRPOConfig(output_dir=str(tmp_path / "run"), model_name_or_path=str(folder), max_steps=1)
    with pytest.raises(ValueError, match=expected):
        GRPOTrainer(args=args, reward_funcs=accuracy_reward, train_dataset=[{"prompt": "q", "answer": "1"}])
    assert not sentinel.exists()  # ... and was never run


def test_a_known_model_type_loads_with_transformers_own_class_and_ignores_the_code(tmp_path, tiny_model_dir):
    sentinel = tmp_path / "SENTINEL"
    code_folder(tiny_model_dir, "llama", sentinel)
    model, _ = load_model(str(tiny_model_dir))
    assert type(model).__name__ == "LlamaForCausalLM"
    assert not sentinel.exists()


# ---------------------------------------------------------------- pickled weights


class WritesSentinel:
    """Unpickling this object opens (creates) the file `path`: arbitrary code run by pickle."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def save_pickled_checkpoint(folder, sentinel, model=None):
    model = model or make_tiny_llama()
    folder.mkdir(exist_ok=True)
    model.config.save_pretrained(folder)
    torch.save(dict(model.state_dict(), extra=WritesSentinel(sentinel)), folder / "pytorch_model.bin")
    return model


def test_pickled_code_in_pytorch_model_bin_is_not_run(tmp_path, tiny_tokenizer):
    sentinel = tmp_path / "SENTINEL"
    folder = tmp_path / "legacy"
    save_pickled_checkpoint(folder, sentinel)
    torch.load(folder / "pytorch_model.bin", weights_only=False)  # the payload is live ...
    assert sentinel.exists()
    sentinel.unlink()
    with pytest.raises(ValueError, match=r"pytorch_model\.bin weights hold pickled Python objects besides "
                                         r"tensors .*weights_only=True, so nothing in the file was run.*"
                                         r"model\.safetensors") as info:
        load_model(folder, tokenizer=tiny_tokenizer)
    assert "GLOBAL io.open" in str(info.value)  # what the file tried to call, named
    for advice in ("weights_only` set to `False`", "add_safe_globals"):  # torch's ways to run it: dropped
        assert advice not in str(info.value)
    assert not sentinel.exists()  # ... and was never run


def test_safetensors_is_loaded_and_a_pickle_beside_it_is_never_opened(tmp_path, tiny_tokenizer):
    sentinel = tmp_path / "SENTINEL"
    folder = tmp_path / "both"
    original = save_pickled_checkpoint(folder, sentinel)
    original.save_pretrained(folder, safe_serialization=True)  # model.safetensors next to the pickle
    model, _ = load_model(folder, tokenizer=tiny_tokenizer)
    ids = torch.tensor([[3, 4, 5]])
    with torch.no_grad():
        loaded, expected = model(input_ids=ids).logits, original(input_ids=ids).logits
    torch.testing.assert_close(loaded, expected, rtol=0, atol=0)
    assert not sentinel.exists()


# ---------------------------------------------------------------- dataset fields and completions


def payloads(tmp_path) -> list[str]:
    """Strings that create a SENTINEL* file in tmp_path if any layer evaluates them as Python, a Jinja
    template or a shell command."""
    s = [tmp_path / f"SENTINEL{i}" for i in range(5)]
    return [
        f"__import__('os').system('touch {s[0]}')",
        f"open('{s[1]}', 'w')",
        f"{{{{ cycler.__init__.__globals__.os.popen('touch {s[2]}').read() }}}}",  # Jinja
        f"${{{{ github.event.issue.title }}}} $(touch {s[3]}) `touch {s[3]}`",  # CI expression / shell
        f"{{% for c in ().__class__.__base__.__subclasses__() %}}{{{{ c('touch {s[4]}', shell=True) }}}}"
        "{% endfor %}",
    ]


def sentinels(tmp_path) -> list:
    return sorted(tmp_path.glob("SENTINEL*"))


def test_dataset_fields_stay_data_through_tasks_chat_and_rewards(tmp_path, tiny_tokenizer):
    evil = payloads(tmp_path)
    rows = [{"prompt": text, "answer": text, "note": text} for text in evil]
    assert [e["prompt"] for e in load_task(rows, eval_size=0).train] == evil
    path = tmp_path / "math.jsonl"
    path.write_text("".join(json.dumps({"problem": t, "answer": t, "subject": t}) + "\n" for t in evil))
    examples = load_task(path, eval_size=0).train
    assert sorted(e["answer"] for e in examples) == sorted(evil)
    for example in examples:  # the chat template renders the text, it never interprets it
        problem = example["prompt"][0]["content"].split("\n\n")[0]
        assert problem in render_prompt(example["prompt"], tiny_tokenizer)
    completions = [rf"so \boxed{{{t}}}" for t in evil] + [r"\boxed{2}"]
    answers = evil + ["2"]
    assert accuracy_reward(None, completions, answer=answers) == [1.0] * len(completions)  # compared as text
    assert format_reward(None, completions) == [1.0] * len(completions)
    scored = box_accuracy_reward(None, completions, answer=["2"] * len(completions))
    assert scored == [0.0] * len(evil) + [1.0]  # math-verify reads LaTeX; it evaluates nothing
    assert box_accuracy_reward(None, completions, answer=answers)[-1] == 1.0  # the payloads as gold answers
    assert sentinels(tmp_path) == []


def test_a_run_on_hostile_columns_trains_and_runs_nothing(tmp_path, tiny_llama, tiny_tokenizer):
    evil = payloads(tmp_path)
    data = [{"prompt": [{"role": "user", "content": f"What is {t} ?"}], "answer": t, "meta": t} for t in evil]
    args = GRPOConfig(output_dir=str(tmp_path / "run"), num_generations=2, per_device_train_batch_size=4,
                      max_completion_length=4, max_steps=1, learning_rate=1e-3, logging_steps=1, seed=0)
    GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, train_dataset=data, args=args,
                reward_funcs=[accuracy_reward, format_reward, box_accuracy_reward]).train()
    assert (tmp_path / "run" / "metrics.jsonl").read_text().count("\n") == 1
    assert sentinels(tmp_path) == []


# ---------------------------------------------------------------- reasoning-gym scorers that run the reply


@pytest.fixture(scope="module")
def gym():
    pytest.importorskip("reasoning_gym")
    from grposcope.data import gym

    return gym


def rg_score(task, answers: list[str]) -> list[float | None]:
    """The task's own reward on replies `<answer>{a}</answer>`, each for the task's first example."""
    reward, example = task.reward_funcs[0], task.train[0]
    n = len(answers)
    completions = [[{"role": "assistant", "content": f"<answer>{a}</answer>"}] for a in answers]
    return reward([example["prompt"]] * n, completions, rg_dataset=[example["rg_dataset"]] * n,
                  rg_index=[example["rg_index"]] * n)


def code_replies(tmp_path) -> list[str]:
    s = tmp_path / "SENTINEL_rg"
    return [f"__import__('os').system('touch {s}')", f"open('{s}', 'w')", f"[open('{s}', 'w')]",
            f"(open)('{s}', 'w')!", "exec(chr(49))", "(1).conjugate()", "1..real", "[x := 1]", "lambda: 1"]


@pytest.mark.parametrize("name", ["binary_matrix", "countdown", "intermediate_integration", "n_queens",
                                  "polynomial_multiplication", "puzzle24", "simple_integration",
                                  "spiral_matrix", "string_insertion"])
def test_reasoning_gym_scorers_that_run_the_reply_never_get_code(tmp_path, gym, name):
    task = load_task(f"rg:{name}", size=3, eval_size=0, seed=0)
    assert rg_score(task, code_replies(tmp_path)) == [0.0] * len(code_replies(tmp_path))
    assert sentinels(tmp_path) == []
    # the screen lets the right answers through: each example's reference answer still scores 1.0
    reward = task.reward_funcs[0]
    for example in task.train:
        if "Integral" in example["answer"]:
            continue  # see test_an_unevaluated_integral_earns_nothing
        reply = [[{"role": "assistant", "content": f"<answer>{example['answer']}</answer>"}]]
        assert reward([example["prompt"]], reply, rg_dataset=[name], rg_index=[example["rg_index"]]) == [1.0]


def test_without_the_screen_the_reply_would_run(tmp_path, gym, monkeypatch):
    # Shows that the tests above can fail: reasoning-gym 0.1.25 runs these replies when nothing screens them.
    monkeypatch.setattr(gym, "safe_for_scorer", lambda answer, name: True)
    for name, marker in [("countdown", "SENTINEL_a"), ("spiral_matrix", "SENTINEL_b")]:
        rg_score(load_task(f"rg:{name}", size=1, eval_size=0), [f"open('{tmp_path / marker}', 'w')"])
    assert [p.name for p in sentinels(tmp_path)] == ["SENTINEL_a", "SENTINEL_b"]


def test_a_python_list_still_reaches_an_eval_scorer(gym):
    # spiral_matrix reads "[9, 1, ...]" with eval: partial credit (0.1) for the right numbers as a list
    task = load_task("rg:spiral_matrix", size=1, eval_size=0)
    numbers = task.train[0]["answer"].split()
    assert rg_score(task, [f"[{', '.join(numbers)}]", "[0]"]) == [0.1, 0.0]


def test_an_unevaluated_integral_earns_nothing(gym):
    # `Integral(<integrand>, x) + C` differentiates back to the integrand: the scorer alone would give 1.0
    task = load_task("rg:simple_integration", size=1, eval_size=0)
    reward = task.reward_funcs[0]
    entry = reward.entries[task.train[0]["rg_index"]]
    hack = f"Integral({entry['metadata']['integrand']}, {entry['metadata']['variable']}) + C"
    assert reward.dataset.score_answer(hack, entry) == 1.0  # what the generator's scorer says
    assert rg_score(task, [hack]) == [0.0]


def test_every_reasoning_gym_scorer_that_runs_text_is_screened(gym):
    # Fails when a reasoning-gym upgrade adds a scorer that evaluates text: add it to gym.EVAL_SCORERS or
    # gym.SYMPY_SCORERS after reading what it evaluates.
    from reasoning_gym.factory import DATASETS

    runs_text = re.compile(r"\b(eval|exec|parse_expr|sympify)\s*\(")
    found = {name for name, (cls, _) in DATASETS.items()
             if runs_text.search(inspect.getsource(cls.score_answer))}
    evaluates_only_its_own_answer = {"number_sorting"}  # eval(entry["answer"]); the reply goes through json
    assert found - evaluates_only_its_own_answer == gym.EVAL_SCORERS | gym.SYMPY_SCORERS
