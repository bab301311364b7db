"""Issue 40 (round 4 of the probe), the trainer's part: each case that ended in a traceback, ran for ever or
went by without a word now gets one line naming the file or option, what is wrong and the fix."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from test_hardening import no_model_loads, one_error_line, run

from grposcope.trainer import GRPOConfig


def finished_within(seconds: float, work):
    """Runs `work()` in a thread; fails the test when it is still running after `seconds` (a hang would
    otherwise stop the whole test run). Returns what it returned, or raises what it raised."""
    out: dict = {}

    def target():
        try:
            out["value"] = work()
        except BaseException as err:  # noqa: BLE001 (handed back to the test)
            out["error"] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    if "error" in out:
        raise out["error"]
    return out["value"]


def train_argv(model_dir: Path, out: Path, *extra: str) -> list[str]:
    return ["train", "--model_name_or_path", str(model_dir), "--dataset_name", "arithmetic:easy", "--dataset_size",
            "8", "--eval_size", "0", "--num_generations", "2", "--per_device_train_batch_size", "2",
            "--max_completion_length", "4", "--output_dir", str(out), *extra]


# --- 40.4: torch_threads and what an error quotes ---------------------------------------------------------


def test_torch_threads_beyond_the_bound_is_refused_in_one_line(monkeypatch):
    with pytest.raises(ValueError, match=r"torch_threads must be in \[1, 1024\] .*got 100000"):
        GRPOConfig(torch_threads=100000)
    GRPOConfig(torch_threads=1024)  # the bound itself is fine
    no_model_loads(monkeypatch)
    line = one_error_line(run("train", "--torch_threads", "100000", "--output_dir", "/tmp/never-written"))
    assert line.startswith("error: torch_threads must be in [1, 1024] (") and "got 100000" in line


def test_an_error_quotes_a_huge_value_in_a_few_hundred_characters():
    nested = [["x"] * 9] * 9
    for _ in range(5):
        nested = [nested] * 9  # 9^7 strings, shared as YAML aliases share them
    with pytest.raises(TypeError) as caught:
        GRPOConfig(reward_funcs=nested)
    message = str(caught.value)
    assert message.startswith("option reward_funcs: got [[[") and len(message) < 400, len(message)
    assert "it takes a list of str or None" in message


def alias_bomb(levels: int) -> str:
    """reward_funcs whose last item expands to 9^levels strings (billion laughs at 9), the anchors inside it."""
    items = ["  - &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        items.append(f"  - &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "reward_funcs:\n" + "\n".join(items) + "\n"


@pytest.mark.parametrize("levels", [6, 9])
def test_a_yaml_alias_bomb_is_refused_in_one_short_line(tmp_path, monkeypatch, levels):
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb(levels))
    no_model_loads(monkeypatch)
    line = one_error_line(run("train", "--config", str(path)))
    assert len(line) < 400, len(line)
    assert line.startswith(f"error: {path}: its aliases (*name) expand to more than 100,000 values")
    assert "write the values out" in line


def test_a_yaml_config_with_a_few_aliases_still_reads(tmp_path, monkeypatch):
    path = tmp_path / "ok.yaml"
    path.write_text("base: &lr 1.0e-5\nlearning_rate: *lr\n")
    from grposcope.cli.options import read_yaml

    assert read_yaml(path)["learning_rate"] == 1.0e-5


# --- 40.10: a key given twice, max_steps below the checkpoint, a held-out split short of distinct prompts ---


def test_a_yaml_key_given_twice_is_refused_naming_both_lines(tmp_path, monkeypatch):
    path = tmp_path / "twice.yaml"
    path.write_text("learning_rate: 1.0e-5\nseed: 3\nlearning_rate: 1.0e-3\n")
    no_model_loads(monkeypatch)
    line = one_error_line(run("train", "--config", str(path)))
    assert line == (f"error: {path}: learning_rate is given twice (lines 1 and 3), and only the last would count; "
                    "keep one of them")


def test_a_nested_key_given_twice_is_named_too(tmp_path):
    from grposcope.cli.options import read_yaml

    path = tmp_path / "nested.yaml"
    path.write_text("generation_kwargs:\n  min_new_tokens: 1\n  min_new_tokens: 2\n")
    with pytest.raises(ValueError, match=r"min_new_tokens is given twice \(lines 2 and 3\)"):
        read_yaml(path)
def test_a_held_out_split_short_of_distinct_prompts_is_noted():
    from grposcope.data.split import split_examples

    same = [{"prompt": "What is 1 + 1 ?", "answer": "2", "level": 1}] * 50
    other = [{"prompt": f"What is {i} + 0 ?", "answer": str(i), "level": 2} for i in range(10)]
    with pytest.warns(UserWarning) as caught:
        train, held_out = split_examples(same + other, 5, seed=0)
    assert len(held_out) == 2  # level 1's share is 4 prompts, and it has 1 distinct one
    messages = [str(w.message) for w in caught]
    assert messages == ["eval_size=5, but the held-out split holds 2 prompts: the 60 examples hold 11 distinct "
                        "prompts, and level 1 (50 examples) has 1 distinct prompt for its share of 4 (each level "
                        "keeps its share, and a prompt is held out once); give more distinct prompts, or lower "
                        "eval_size"]


def test_a_held_out_split_that_holds_its_size_says_nothing(recwarn):
    from grposcope.data.split import split_examples

    examples = [{"prompt": f"What is {i} + 0 ?", "answer": str(i)} for i in range(20)] * 3
    _, held_out = split_examples(examples, 5, seed=0)
    assert len(held_out) == 5 and not [w for w in recwarn if issubclass(w.category, UserWarning)]


