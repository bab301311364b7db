"""A model folder's generation_config.json (docs/reliability.md, "Bad input"): grposcope draws completions with
the run's own settings, so what the file would change in a rollout is set aside with a note naming the file
and the field, and a value transformers refuses is named with the file. On a tiny Llama saved into tmp_path,
loaded through `load_model` as `grposcope train` and `grposcope eval` load it; nothing is downloaded.

Before: `num_beams: 3` ended in a 394-line traceback (a shape error between the prompt cache and the beams),
`dola_layers` in transformers asking for `trust_remote_code`, `max_new_tokens: -1` in transformers' message
without the file.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

pytest.importorskip("transformers")

from conftest import make_tiny_llama, make_tiny_tokenizer  # noqa: E402

from grposcope.cli import app  # noqa: E402
from grposcope.models import load_model  # noqa: E402
from grposcope.rollout import ROLLOUTS, SamplingParams  # noqa: E402

PROMPTS = ["What is 1 + 1 ?", "What is 2 + 3 ?"]
G = 4


def model_folder(path: Path, **fields) -> Path:
    """The tiny Llama and its tokenizer saved with save_pretrained, `fields` added to generation_config.json."""
    model, tokenizer = make_tiny_llama(), make_tiny_tokenizer()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    file = path / "generation_config.json"
    file.write_text(json.dumps({**json.loads(file.read_text()), **fields}))
    return path


def rollout(folder: Path, greedy: bool):
    """G completions of each prompt (1 when greedy, as evaluation's greedy pass), from a fixed seed."""
    model, tokenizer = load_model(str(folder))
    backend = ROLLOUTS.make("transformers", model=model, tokenizer=tokenizer)
    torch.manual_seed(0)
    return backend.generate(PROMPTS, 1 if greedy else G, SamplingParams(6, greedy=greedy))


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """Completions from a folder whose generation_config.json holds only ids, sampled and greedy."""
    folder = model_folder(tmp_path_factory.mktemp("plain"))
    return {greedy: rollout(folder, greedy).completion_ids for greedy in (False, True)}


# Each changed or broke the rollout before (see the module docstring); `greedy` is evaluation's greedy pass.
SET_ASIDE = [
    ({"num_beams": 3}, False, "num_beams=3", "GRPO samples its completions, it does not search for them"),
    ({"num_beams": 3}, True, "num_beams=3", "GRPO samples its completions, it does not search for them"),
    ({"penalty_alpha": 0.6, "top_k": 4}, True, "penalty_alpha=0.6", "it does not search for them"),
    ({"dola_layers": "high"}, False, "dola_layers='high'", "it does not search for them"),
    ({"num_beams": 4, "num_beam_groups": 2, "diversity_penalty": 1.0}, False, "num_beam_groups=2",
     "it does not search for them"),
    ({"constraints": [1]}, False, "constraints=[1]", "it does not search for them"),
    ({"prompt_lookup_num_tokens": 3}, False, "prompt_lookup_num_tokens=3", "assisted or speculative decoding"),
    ({"num_return_sequences": 2, "do_sample": True}, False, "num_return_sequences=2",
     "grposcope repeats each prompt num_generations times itself"),
    ({"return_dict_in_generate": True}, False, "return_dict_in_generate=True", "reads only the tokens"),
    ({"cache_implementation": "static"}, False, "cache_implementation='static'", "its own KV cache"),
    ({"stop_strings": ["3"]}, False, "stop_strings=['3']", "a completion ends at EOS or at max_completion_length"),
    ({"repetition_penalty": 100.0}, False, "repetition_penalty=100.0", "only the run's own options shape sampling"),
    ({"sequence_bias": [[[5], 30.0]]}, False, "sequence_bias=[[[5], 30.0]]", "another distribution"),
]


@pytest.mark.parametrize("fields, greedy, shown, why", SET_ASIDE,
                         ids=[f"{s.split('=')[0]}-{'greedy' if g else 'sample'}" for _, g, s, _ in SET_ASIDE])
def test_what_the_file_would_change_is_set_aside_and_noted(tmp_path, plain, fields, greedy, shown, why):
    folder = model_folder(tmp_path / "model", **fields)
    file = folder / "generation_config.json"
    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always")
        out = rollout(folder, greedy)
    # the same completions as from a folder without the field: the file changed nothing
    assert torch.equal(out.completion_ids, plain[greedy])
    texts = [str(note.message) for note in notes if note.category is RuntimeWarning]
    field, value = shown.split("=", 1)
    mine = [text for text in texts if text.startswith(f"{file} sets {shown}, ")]
    assert len(mine) == 1, texts  # once, though generate() ran for every chunk of prompts
    note = mine[0]
    assert note.startswith(f"{file} sets {shown}, which grposcope does not apply (") and why in note
    assert f"); the rollout uses {field}=" in note
    if field == "repetition_penalty":
        assert note.endswith(f"To keep it, pass generation_kwargs={{'repetition_penalty': {value}}}.")
    else:
        assert note.endswith(f"Delete the field from {file} to silence this note.")


def test_values_grposcope_sets_itself_are_noted_only_when_they_differ(tmp_path, plain):
    folder = model_folder(tmp_path / "model", do_sample=True, temperature=0.7, top_p=1.0, max_new_tokens=64)
    file = folder / "generation_config.json"
    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always")
        out = rollout(folder, greedy=False)
    assert torch.equal(out.completion_ids, plain[False])
    texts = sorted(str(n.message) for n in notes if str(n.message).startswith(str(file)))
    assert texts == [f"{file} sets max_new_tokens=64; the rollout uses max_new_tokens=6 instead (set by "
                     "max_completion_length)",
                     f"{file} sets temperature=0.7; the rollout uses temperature=1.0 instead (set by the "
                     "temperature option)"]  # do_sample=True and top_p=1.0 are what the rollout uses


@pytest.mark.parametrize("fields, message", [
    ({"max_new_tokens": -1}, "max_new_tokens=-1: `max_new_tokens` must be greater than 0, but is -1"),
    ({"max_new_tokens": "abc"}, "max_new_tokens='abc': '<=' not supported between instances of 'str' and 'int'"),
    ({"early_stopping": "sometimes"}, "early_stopping='sometimes': `early_stopping` must be a boolean or 'never'"),
    ({"num_return_sequences": 3}, "num_return_sequences=3: Greedy methods (do_sample != True) without beam "
                                  "search do not support `num_return_sequences` different than 1 (got 3)"),
    ({"watermarking_config": {"seeding_scheme": "x"}}, "watermarking_config={'seeding_scheme': 'x'}: Some of the "
                                                       "keys in `watermarking_config` are defined incorrectly"),
], ids=["max_new_tokens", "type", "early_stopping", "num_return_sequences", "watermarking"])
def test_a_value_transformers_refuses_is_named_with_the_file(tmp_path, fields, message):
    folder = model_folder(tmp_path / "model", **fields)
    with pytest.raises(ValueError) as caught:
        load_model(str(folder))
    assert str(caught.value).startswith(f"{folder / 'generation_config.json'}: {message}")
    assert str(caught.value).endswith("; fix the value, or delete the field from that file (grposcope draws "
                                      "completions with the run's own settings)")


def test_a_generation_config_that_is_not_json_is_named(tmp_path):
    folder = model_folder(tmp_path / "model")
    (folder / "generation_config.json").write_text('{"num_beams": 3,\n')  # cut short
    with pytest.raises(ValueError) as caught:
        load_model(str(folder))  # before: transformers skipped the file without a word
    assert str(caught.value) == (f"{folder / 'generation_config.json'}: not valid JSON (Expecting property name "
                                 "enclosed in double quotes: line 2 column 1 (char 17)); fix it, or save the model "
                                 "again with model.save_pretrained(path)")


# --- the command line ----------------------------------------------------------------------------------


def run(*argv: str):
    return CliRunner().invoke(app, list(argv))


def command(kind: str, folder: Path, tmp_path: Path) -> list[str]:
    if kind == "train":
        return ["train", "--model_name_or_path", str(folder), "--dataset_name", "arithmetic:easy",
                "--dataset_size", "4", "--eval_size", "0", "--num_generations", "2",
                "--per_device_train_batch_size", "2", "--max_completion_length", "4", "--max_steps", "1",
                "--output_dir", str(tmp_path / "run")]
    return ["eval", "--model", str(folder), "--dataset", "arithmetic:easy", "--limit", "2", "--num_samples", "2",
            "--max_completion_length", "4", "--output", str(tmp_path / "eval.json")]


@pytest.mark.parametrize("kind", ["train", "eval"])
def test_the_cli_runs_a_folder_asking_for_beam_search_with_one_note(tmp_path, kind):
    folder = model_folder(tmp_path / "model", num_beams=3)
    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always")
        result = run(*command(kind, folder, tmp_path))
    assert result.exit_code == 0, result.output
    mine = [str(n.message) for n in notes if "generation_config.json" in str(n.message)]
    assert mine == [f"{folder / 'generation_config.json'} sets num_beams=3, which grposcope does not apply (GRPO "
                    "samples its completions, it does not search for them); the rollout uses num_beams=1. Delete "
                    f"the field from {folder / 'generation_config.json'} to silence this note."]


@pytest.mark.parametrize("kind", ["train", "eval"])
def test_the_cli_names_the_file_of_a_bad_value_in_one_line(tmp_path, kind):
    folder = model_folder(tmp_path / "model", max_new_tokens=-1)
    result = run(*command(kind, folder, tmp_path))
    assert result.exit_code == 2 and "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert lines == [f"error: {folder / 'generation_config.json'}: max_new_tokens=-1: `max_new_tokens` must be "
                     "greater than 0, but is -1; fix the value, or delete the field from that file (grposcope "
                     "draws completions with the run's own settings)"]


# --- TRL: it passes its own GenerationConfig, and generate() fills what it leaves unset from the folder's ---


def test_trl_does_not_take_beam_search_from_the_folder(tmp_path):
    trl = pytest.importorskip("trl")  # noqa: F841
    import transformers

    from grposcope.integrations.trl import GRPOConfig, GRPOTrainer

    def trained(folder: Path):
        config = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=8, num_generations=G,
                            max_completion_length=6, max_steps=1, save_strategy="no", report_to="none",
                            use_cpu=True, bf16=False, seed=0, disable_tqdm=True)
        model = transformers.AutoModelForCausalLM.from_pretrained(folder)
        trainer = GRPOTrainer(model=model, args=config, processing_class=make_tiny_tokenizer(),
                              reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                              train_dataset=[{"prompt": p} for p in PROMPTS])
        trainer.model.train()
        torch.manual_seed(1)
        return trainer._generate_and_score_completions([{"prompt": p} for p in PROMPTS for _ in range(G)])

    plain = trained(model_folder(tmp_path / "plain"))
    beams = model_folder(tmp_path / "beams", num_beams=3)
    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always")
        out = trained(beams)
    assert torch.equal(out["completion_ids"], plain["completion_ids"])  # before: TRL ran beam sampling
    file = beams / "generation_config.json"
    assert f"{file} sets num_beams=3, which grposcope does not apply (GRPO samples its completions, it does not " \
           f"search for them); the rollout uses num_beams=1. Delete the field from {file} to silence this note." \
           in [str(note.message) for note in notes]
