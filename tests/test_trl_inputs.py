"""What the TRL integration does with bad `reward_funcs` (docs/reliability.md, "Bad input"), on the tiny
in-process Llama: nothing is downloaded, and no hub is asked.

- a string that is neither a grposcope reward's name nor a reward model folder is refused before TRL, which
  would take it as a hub id, sees it;
- a reward function that raises, or returns something else than one number (or None) per completion, stops
  with `RewardFunctionError` naming the function and the sample, as in grposcope's own trainer.
"""

from __future__ import annotations

import pytest
import torch

trl = pytest.importorskip("trl")
transformers = pytest.importorskip("transformers")

from conftest import make_tiny_llama, make_tiny_tokenizer  # noqa: E402

from grposcope.integrations.trl import GRPOConfig, GRPOTrainer  # noqa: E402
from grposcope.rewards import RewardFunctionError  # noqa: E402

G = 4
PROMPTS = [{"prompt": f"What is {i} + {i} ?", "answer": str(2 * i), "kind": i % 2} for i in range(8)]


@pytest.fixture(autouse=True)
def no_hub(monkeypatch):
    """No model hub: offline, and loading a reward model from anywhere fails the test (TRL loads a string in
    reward_funcs with AutoModelForSequenceClassification.from_pretrained, the hub id included)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    real = transformers.AutoModelForSequenceClassification.from_pretrained

    def only_from_disk(name, *args, **kwargs):
        assert str(name).startswith("/"), f"TRL was asked to load the reward model {name!r}"
        return real(name, *args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForSequenceClassification, "from_pretrained", only_from_disk)


def make(tmp_path, reward):
    config = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=8, num_generations=G,
                        max_completion_length=4, max_steps=1, save_strategy="no", report_to="none", use_cpu=True,
                        bf16=False, seed=0, disable_tqdm=True)
    torch.manual_seed(0)
    trainer = GRPOTrainer(model=make_tiny_llama(), reward_funcs=reward, args=config, train_dataset=list(PROMPTS),
                          processing_class=make_tiny_tokenizer())
    trainer.model.train()
    return trainer


def one_generation(trainer, rows):
    torch.manual_seed(1)
    return trainer._generate_and_score_completions([dict(r) for r in rows for _ in range(G)])


# --- point 6: a string in reward_funcs -----------------------------------------------------------------


@pytest.mark.parametrize("reward_funcs", ["os.system", ["accuracy_reward", "owner/reward-model"]])
def test_a_string_that_is_no_reward_name_nor_folder_is_refused_before_trl_sees_it(tmp_path, reward_funcs):
    name = reward_funcs if isinstance(reward_funcs, str) else reward_funcs[1]
    with pytest.raises(ValueError) as caught:
        make(tmp_path, reward_funcs)
    assert str(caught.value) == (
        f"reward_funcs: {name!r} is neither a registered grposcope reward (accuracy_reward, box_accuracy_reward, "
        "format_reward) nor an existing folder holding a reward model; TRL would take it as a model hub id and "
        "download it, which grposcope never does. Pass a reward function, one of those names, or the folder of "
        "a reward model saved with save_pretrained"
    )


def test_a_registered_name_is_grposcopes_reward(tmp_path):
    trainer = make(tmp_path, "accuracy_reward")
    assert trainer.reward_func_names == ["accuracy_reward"]  # TRL's metric names are the function's
    # one completion per prompt scored by grposcope's accuracy_reward against the "answer" column
    output = one_generation(trainer, PROMPTS[:2])
    assert output["completion_ids"].shape[0] == 2 * G
    assert trainer._metrics["train"]["rewards/accuracy_reward/mean"][-1] == 0.0  # random weights: all wrong


def test_a_reward_model_folder_loads_from_the_disk_and_an_empty_folder_is_refused(tmp_path):
    folder = tmp_path / "reward-model"
    torch.manual_seed(0)
    config = make_tiny_llama().config
    config.num_labels, config.pad_token_id = 1, 0
    transformers.LlamaForSequenceClassification(config).save_pretrained(folder)
    make_tiny_tokenizer().save_pretrained(folder)
    trainer = make(tmp_path, str(folder))
    assert isinstance(trainer.reward_funcs[0], transformers.LlamaForSequenceClassification)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=f"reward_funcs: '{empty}' is a folder without config.json, so it "
                                                "holds no reward model; save one there with model.save_pretrained"):
        make(tmp_path, str(empty))


# --- point 8: a reward function that fails ---------------------------------------------------------------


def fails_on_kind_1(prompts, completions, kind, **kwargs):
    """Raises on the samples of kind 1 only: the error must find the first one (row G of the batch)."""
    return [{0: 1.0}[k] for k in kind]


async def fails_on_kind_1_async(prompts, completions, kind, **kwargs):
    return fails_on_kind_1(prompts, completions, kind)


def returns_none(prompts, completions, **kwargs):
    return None


def returns_one_value(prompts, completions, **kwargs):
    return [1.0]


def returns_inf_on_kind_1(prompts, completions, kind, **kwargs):
    return [float("inf") if k == 1 else 0.5 for k in kind]


def returns_text(prompts, completions, **kwargs):
    return ["1.0"] * len(completions)


def returns_huge_int_on_kind_1(prompts, completions, kind, **kwargs):
    return [10**400 if k == 1 else 1 for k in kind]  # no float holds it: float() raises OverflowError


@pytest.mark.parametrize("reward, problem, index, fix", [
    (fails_on_kind_1, "raised KeyError: 1", G, "fix the function so it handles this sample"),
    (fails_on_kind_1_async, "raised KeyError: 1", G, "fix the function so it handles this sample"),
    (returns_none, f"returned a NoneType, not a list of {2 * G} values", None,
     "return one float (or None) per completion"),
    (returns_one_value, f"returned 1 values for {2 * G} completions", None,
     "return one float (or None) per completion, in the batch's order"),
    (returns_inf_on_kind_1, "returned inf", G, "return a finite float, or None when the function does not apply"),
    (returns_text, "returned a non-number (str '1.0')", 0, "return a finite float, or None"),
    (returns_huge_int_on_kind_1, "returned a number too large for a float (about 10^400)", G,
     "return a finite float, or None"),
], ids=["raises", "raises-async", "returns-None", "wrong-length", "inf", "text", "huge-int"])
def test_a_failing_reward_names_the_function_and_the_sample(tmp_path, reward, problem, index, fix):
    trainer = make(tmp_path, reward)
    assert trainer.reward_func_names == [reward.__name__]  # metrics keep the function's name
    with pytest.raises(RewardFunctionError) as caught:
        one_generation(trainer, PROMPTS[:2])  # kinds 0 and 1: rows 0-3 of kind 0, rows 4-7 of kind 1
    error = caught.value
    shown = 0 if index is None else index
    where = f"sample {shown}" if index is not None else f"the whole call of {2 * G} samples"
    assert (error.function, error.index) == (reward.__name__, index)
    lines = str(error).splitlines()
    assert lines[0] == f"reward function {reward.__name__!r} {problem} [{where}]."
    assert lines[1] == f"  prompt[{shown}]: {PROMPTS[shown // G]['prompt']!r}"
    assert lines[2].startswith(f"  completion[{shown}]: '")
    assert lines[3].startswith(f"Fix: {fix}")


def none_on_kind_1(prompts, completions, kind, **kwargs):
    return [None if k == 1 else 1.0 for k in kind]


def test_a_list_of_none_does_not_apply_but_a_bare_none_is_refused(tmp_path):
    trainer = make(tmp_path, none_on_kind_1)  # TRL's None: "does not apply to this sample"
    one_generation(trainer, PROMPTS[:2])
    assert trainer._metrics["train"]["reward/none_frac"][-1] == 0.5  # the 4 samples of kind 1
    with pytest.raises(RewardFunctionError, match="'returns_none' returned a NoneType, not a list of 8 values"):
        one_generation(make(tmp_path, [none_on_kind_1, returns_none]), PROMPTS[:2])
