"""Issue 40 (round 4 of the probe), the trainer's part: resuming a checkpoint that does not fit the run
(point 5: another model; point 10: a step past max_steps) is refused in one line before anything is written."""

from __future__ import annotations

import pytest
from test_hardening import one_error_line, run, small_run
from test_trainer_round4 import train_argv

# --- 40.5: resuming a checkpoint of another model -----------------------------------------------------------


@pytest.fixture
def other_model_dir(tmp_path, tiny_tokenizer):
    """A Llama of the tiny one's vocabulary with other shapes: hidden_size 16, one layer."""
    import transformers

    config = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    path = tmp_path / "other-llama"
    transformers.LlamaForCausalLM(config).save_pretrained(path, safe_serialization=True)
    tiny_tokenizer.save_pretrained(path)
    return path


@pytest.mark.parametrize("how", ["--resume", "--resume_from_checkpoint"])
def test_resuming_a_checkpoint_of_another_model_names_the_mismatch(tmp_path, tiny_model_dir, other_model_dir, how):
    out = small_run(tmp_path, tiny_model_dir)
    flag = ["--resume"] if how == "--resume" else ["--resume_from_checkpoint", str(out / "checkpoint-2")]
    line = one_error_line(run(*train_argv(other_model_dir, out, "--max_steps", "3", *flag)))
    assert line == (f"error: {out / 'checkpoint-2'} was saved from another model (hidden_size 32 there, 16 here; "
                    "num_hidden_layers 2 there, 1 here; head_dim 8 there, 4 here); resume with the "
                    f"--model_name_or_path it was trained from ({tiny_model_dir}), or choose another output_dir")


def test_weights_that_do_not_fit_are_named_when_the_config_does_not_say(tmp_path, tiny_llama, other_model_dir):
    """A checkpoint whose config.json was lost or edited: the first tensor of another shape is named."""
    from grposcope.models.loading import load_local_model
    from grposcope.trainer.checkpoint import CheckpointError, load_weights

    folder = tmp_path / "ckpt"
    tiny_llama.save_pretrained(folder, safe_serialization=True)
    other = load_local_model(other_model_dir)
    with pytest.raises(CheckpointError) as caught:
        load_weights(folder, other)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{folder}: the weights do not fit the model (")
    assert "lm_head.weight is 64x32 there, 64x16 here" in message  # the first in the file: sorted by name


def test_resume_with_max_steps_below_the_checkpoint_is_refused_before_anything_is_written(tmp_path,
                                                                                          tiny_model_dir):
    out = small_run(tmp_path, tiny_model_dir)  # checkpoint-1, checkpoint-2, model, summary.json
    before = {p: p.stat().st_mtime_ns for p in [out / "summary.json", out / "model" / "model.safetensors",
                                                out / "metrics.jsonl"]}
    line = one_error_line(run(*train_argv(tiny_model_dir, out, "--max_steps", "1", "--resume")))
    assert line == (f"error: {out / 'checkpoint-2'} is at step 2, past --max_steps 1: there is nothing left to "
                    "train; raise --max_steps (above 2) to continue the run, or start a new one in another "
                    "output_dir")
    assert {p: p.stat().st_mtime_ns for p in before} == before
