"""generation_kwargs: only plain sampling options reach transformers' `generate` (issue 15, point 1).

transformers 5.23's `generate(custom_generate=<folder>, trust_remote_code=True)` imports and runs
`<folder>/custom_generate/generate.py`, whatever grposcope's own trust_remote_code says. The payload below
writes a marker file when it is imported; every test checks that the marker never appears, and the first one
shows that the payload is live (transformers does run it when called directly).
"""

from __future__ import annotations

import json
import sys

import pytest
from test_trainer import DATA, text_length, tiny_config
from typer.testing import CliRunner

from grposcope import GRPOConfig, GRPOTrainer
from grposcope.cli import app

PAYLOAD = """import pathlib
pathlib.Path({marker!r}).write_text("ran")


def generate(model, **kwargs):
    raise RuntimeError("custom_generate/generate.py ran")
"""

REFUSED = ("generation_kwargs: 'custom_generate' is not allowed (it would run code from a folder); allowed: "
           "min_new_tokens, repetition_penalty, no_repeat_ngram_size, top_k, top_p, min_p, top_h, typical_p, "
           "epsilon_cutoff, eta_cutoff, bad_words_ids, suppress_tokens, begin_suppress_tokens, renormalize_logits, "
           "remove_invalid_values")


@pytest.fixture
def payload(tmp_path):
    """(folder, marker): `folder/custom_generate/generate.py` writes `marker` when imported."""
    folder, marker = tmp_path / "evil", tmp_path / "marker"
    (folder / "custom_generate").mkdir(parents=True)
    (folder / "custom_generate" / "generate.py").write_text(PAYLOAD.format(marker=str(marker)))
    return folder, marker


def only_word_and_eos(tokenizer, word: str = "a") -> list[int]:
    """suppress_tokens that leave the tiny model two choices: `word` and EOS (so it stops early, often)."""
    keep = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids(word)}
    return [i for i in range(len(tokenizer)) if i not in keep]


def test_without_the_check_transformers_runs_the_folder(tiny_llama, tiny_tokenizer, payload, tmp_path, monkeypatch):
    # the control: the payload is live, so its marker's absence in the tests below means something.
    # transformers copies the folder's code into its module cache first: a temporary one here, not ~/.cache
    from transformers import dynamic_module_utils

    monkeypatch.setattr(dynamic_module_utils, "HF_MODULES_CACHE", str(tmp_path / "hf_modules"))
    monkeypatch.setattr(sys, "path", list(sys.path))  # which it adds to sys.path
    folder, marker = payload
    ids = tiny_tokenizer(["What is 2 + 3 ?"], return_tensors="pt")["input_ids"]
    with pytest.raises(RuntimeError, match="custom_generate/generate.py ran"):
        tiny_llama.generate(ids, max_new_tokens=2, custom_generate=str(folder), trust_remote_code=True)
    assert marker.read_text() == "ran"


def test_a_config_asking_generate_to_run_a_folder_is_refused(payload):
    folder, marker = payload
    with pytest.raises(ValueError) as err:
        GRPOConfig(generation_kwargs={"custom_generate": str(folder), "trust_remote_code": True})
    assert str(err.value) == REFUSED
    assert not marker.exists()


def test_a_yaml_config_asking_generate_to_run_a_folder_stops_the_cli(tmp_path, tiny_model_dir, payload):
    folder, marker = payload
    config = tmp_path / "run.yaml"
    config.write_text(
        f"model_name_or_path: {tiny_model_dir}\noutput_dir: {tmp_path / 'out'}\ndataset_name: 'arithmetic:easy'\n"
        "dataset_size: 8\neval_size: 2\nnum_generations: 2\nper_device_train_batch_size: 4\n"
        "max_completion_length: 4\nmax_steps: 1\n"
        f"generation_kwargs:\n  custom_generate: {folder}\n  trust_remote_code: true\n"
    )
    result = CliRunner().invoke(app, ["train", "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert f"error: {REFUSED}" in " ".join(result.output.split())  # rich may wrap the line
    assert not marker.exists()
    assert not (tmp_path / "out" / "metrics.jsonl").exists()


def test_generation_kwargs_set_after_the_config_are_refused_by_the_backend(tmp_path, tiny_llama, tiny_tokenizer,
                                                                           payload):
    # SamplingParams is public and a config's field can be reassigned: generation checks again
    folder, marker = payload
    args = tiny_config(tmp_path, max_steps=1)
    args.generation_kwargs = {"custom_generate": str(folder), "trust_remote_code": True}
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                          train_dataset=DATA, args=args)
    with pytest.raises(ValueError) as err:
        trainer.train()
    assert str(err.value) == REFUSED
    assert not marker.exists()


REFUSALS = [
    ({"trust_remote_code": True}, "'trust_remote_code' is not allowed (generate() would run code from a folder or "
                                  "the Hub with it; grposcope's own trust_remote_code covers the model folder only)"),
    ({"assistant_model": "/some/model"}, "'assistant_model' is not allowed (it takes a model object, whose code "
                                         "generate() runs)"),
    ({"logits_processor": []}, "'logits_processor' is not allowed (it takes objects whose code generate() calls)"),
    ({"generation_config": {"do_sample": True}}, "'generation_config' is not allowed (it replaces the whole "
                                                 "generation config, and could carry any refused option)"),
    ({"cache_implementation": "paged"}, "'cache_implementation' is not allowed (it changes how generate() runs"),
    ({"num_beams": 4}, "'num_beams' is not allowed (beam search: GRPO samples its completions"),
    ({"nosuch": 1}, "'nosuch' is not allowed (only plain sampling options reach generate()); allowed: min_new_tokens"),
    ({"max_new_tokens": 64}, "'max_new_tokens' is set by grposcope; set max_completion_length "
                             "(--max_completion_length) instead"),
    ({"temperature": 0.7}, "'temperature' is set by grposcope; set temperature (--temperature) instead: the loss's "
                           "log-probs use the same one"),
    ({"num_return_sequences": 4}, "'num_return_sequences' is set by grposcope; set num_generations "
                                  "(--num_generations) instead"),
    ({"do_sample": False}, "'do_sample' is set by grposcope; training always samples"),
    ({"eos_token_id": 5}, "'eos_token_id' is set by grposcope; it comes from the model folder's "
                          "generation_config.json and the tokenizer"),
    ({"repetition_penalty": "high"}, "repetition_penalty must be a number > 0, got 'high'"),
    ({"top_p": 1.5}, "top_p must be a number in (0, 1], got 1.5"),
    ({"min_new_tokens": True}, "min_new_tokens must be an int >= 0, got True"),
    ({"bad_words_ids": [5, 6]}, "bad_words_ids must be a non-empty list of non-empty lists of token ids"),
    ({"min_new_tokens": 300}, "min_new_tokens=300 is more than max_completion_length=256, so no completion could "
                              "end; lower it or raise max_completion_length"),
]


@pytest.mark.parametrize("options, message", REFUSALS,
                         ids=[",".join(f"{k}={v!r}" for k, v in options.items()) for options, _ in REFUSALS])
def test_what_is_not_a_plain_sampling_option_is_refused_with_the_fix(options, message):
    with pytest.raises(ValueError) as err:
        GRPOConfig(generation_kwargs=options)
    assert str(err.value).startswith(f"generation_kwargs: {message}")


def test_min_new_tokens_and_suppress_tokens_reach_generation(tmp_path, tiny_llama, tiny_tokenizer):
    # with only "a" and EOS to choose from, the tiny model stops after 1-3 tokens; min_new_tokens=4 keeps
    # every completion at 4 tokens or more
    suppress, eos = only_word_and_eos(tiny_tokenizer), tiny_tokenizer.eos_token_id
    a = tiny_tokenizer.convert_tokens_to_ids("a")
    lengths = {}
    for minimum in (None, 4):
        options = {"suppress_tokens": suppress} | ({"min_new_tokens": minimum} if minimum else {})
        trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                              train_dataset=DATA, args=tiny_config(tmp_path / str(minimum), generation_kwargs=options))
        batch = trainer._generate().batch
        lengths[minimum] = batch.loss_mask.sum(dim=1).tolist()
        assert set(batch.completion_ids[batch.loss_mask.bool()].tolist()) <= {a, eos}  # suppress_tokens worked
    assert min(lengths[None]) < 4, lengths  # the constraint below is not met by chance
    assert min(lengths[4]) >= 4, lengths


def test_top_k_in_generation_kwargs_wins_over_the_config_and_numbers_are_made_floats(tmp_path, tiny_llama,
                                                                                       tiny_tokenizer):
    # top_k is also a GRPOConfig field (0 here): generation_kwargs override it, as TRL's do. top_k=1 picks the
    # most likely token, so a group's 4 completions are one and the same. transformers refuses an int
    # repetition_penalty; the check makes it 2.0.
    args = tiny_config(tmp_path, top_k=0, generation_kwargs={"top_k": 1, "repetition_penalty": 2})
    assert args.generation_kwargs == {"top_k": 1, "repetition_penalty": 2.0}
    assert isinstance(args.generation_kwargs["repetition_penalty"], float)
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                          train_dataset=DATA, args=args)
    batch = trainer._generate().batch
    groups = batch.completion_ids.view(-1, 4, batch.completion_ids.shape[1])  # (B, G, T)
    assert all(len({tuple(row.tolist()) for row in group}) == 1 for group in groups)
    plain = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                        train_dataset=DATA, args=tiny_config(tmp_path / "plain")
                        )._generate().batch.completion_ids.view(-1, 4, groups.shape[2])
    assert any(len({tuple(row.tolist()) for row in group}) > 1 for group in plain)  # sampling differs otherwise


def test_the_command_line_takes_generation_kwargs_as_json(tmp_path, tiny_model_dir, tiny_tokenizer):
    suppress = only_word_and_eos(tiny_tokenizer)
    common = ["train", "--model_name_or_path", str(tiny_model_dir), "--dataset_name", "arithmetic:easy",
              "--dataset_size", "8", "--eval_size", "2", "--num_generations", "4", "--per_device_train_batch_size",
              "8", "--max_completion_length", "6", "--max_steps", "1", "--logging_steps", "1"]
    out = tmp_path / "out"
    options = json.dumps({"min_new_tokens": 4, "suppress_tokens": suppress})
    result = CliRunner().invoke(app, [*common, "--output_dir", str(out), "--generation_kwargs", options])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]
    texts = [r["completion"][0]["content"] if isinstance(r["completion"], list) else r["completion"] for r in rows]
    assert len(texts) == 8 and all(set(t.split()) == {"a"} and len(t.split()) >= 4 for t in texts), texts
    bad = CliRunner().invoke(app, [*common, "--output_dir", str(tmp_path / "bad"), "--generation_kwargs",
                                   "min_new_tokens=4"])
    assert bad.exit_code == 2
    assert ("error: --generation_kwargs: cannot read 'min_new_tokens=4' as a mapping; write it as JSON, e.g. "
            "--generation_kwargs '{\"min_new_tokens\": 4}'") in " ".join(bad.output.split())


def test_every_allowed_option_is_a_generation_config_field():
    # a transformers upgrade that drops or renames one fails here, not in a user's run
    from transformers import GenerationConfig

    from grposcope.rollout.options import ALLOWED

    fields = GenerationConfig().to_dict()
    assert [name for name in ALLOWED if name not in fields] == []
