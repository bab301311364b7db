"""Issue 40 (round 4 of the probe), the trainer's part: model folders as training input (point 18): a chat
template that renders for ever, a tokenizer.json that is no tokenizer, a damaged final model."""

from __future__ import annotations

import pytest
from conftest import flip_a_bit
from test_hardening import one_error_line, run, small_run
from test_trainer_round4 import finished_within, train_argv

# --- 40.18: model folders as training input ---------------------------------------------------------------


LOOPS = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"


def test_a_chat_template_that_renders_for_ever_is_stopped_in_one_line(monkeypatch):
    from conftest import make_tiny_tokenizer

    from grposcope.data import chat

    monkeypatch.setattr(chat, "TEMPLATE_SECONDS", 0.5)
    tokenizer = make_tiny_tokenizer()
    tokenizer.chat_template = LOOPS
    with pytest.raises(ValueError) as caught:
        finished_within(30, lambda: chat.render_prompt([{"role": "user", "content": "hi"}], tokenizer))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("the tokenizer's chat template took more than 0.5 s to render one prompt (a loop "
                              "that never ends, or nested loops over huge ranges?); it was stopped")
    # the next prompt renders as before: nothing of the stopped one is left pending
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    assert chat.render_prompt([{"role": "user", "content": "hi"}], tokenizer) == "hi"


def test_train_names_the_folder_of_a_chat_template_that_renders_for_ever(tmp_path, tiny_model_dir, monkeypatch):
    import shutil

    from grposcope.data import chat

    monkeypatch.setattr(chat, "TEMPLATE_SECONDS", 0.5)
    folder = tmp_path / "loops"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "chat_template.jinja").write_text(LOOPS)
    result = finished_within(60, lambda: run(*train_argv(folder, tmp_path / "out", "--max_steps", "1")))
    line = one_error_line(result)
    assert line.startswith("error: the tokenizer's chat template took more than 0.5 s to render one prompt")
    assert f"(chat_template.jinja or tokenizer_config.json in {folder})" in line


def test_a_tokenizer_json_that_is_no_tokenizer_is_named_in_one_line(tmp_path, tiny_model_dir):
    import shutil

    folder = tmp_path / "badtok"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "tokenizer.json").write_text("{}")
    line = one_error_line(run(*train_argv(folder, tmp_path / "out", "--max_steps", "1")))
    assert line.startswith(f"error: {folder / 'tokenizer.json'} is not a tokenizer transformers can read (")
    assert line.endswith("; copy the model's tokenizer files again, or save them there with "
                         "tokenizer.save_pretrained(path)")


def test_train_refuses_a_damaged_final_model_as_its_model(tmp_path, tiny_model_dir):
    out = small_run(tmp_path, tiny_model_dir)
    flip_a_bit(out / "model" / "model.safetensors")  # one bit of one weight
    line = one_error_line(run(*train_argv(out / "model", tmp_path / "next", "--max_steps", "1")))
    assert line == (f"error: --model_name_or_path {out / 'model'} is damaged: model.safetensors does not match its "
                    "checksum (corrupted); copy it again, or train from the newest good checkpoint beside it, "
                    f"{out / 'checkpoint-2'}")
    from grposcope.trainer import GRPOConfig, GRPOTrainer

    args = GRPOConfig(output_dir=str(tmp_path / "lib"), dataset_name="arithmetic:easy", dataset_size=8, eval_size=0,
                      num_generations=2, per_device_train_batch_size=2, max_completion_length=4, max_steps=1)
    with pytest.raises(ValueError, match=r"model is damaged: model.safetensors does not match its checksum"):
        GRPOTrainer(model=out / "model", args=args)  # the same check for a path given to the trainer itself
