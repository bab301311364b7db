"""Checkpoints: what they hold, atomic writing, rotation, verification, refusing code, resuming with other
options, and NaN/inf updates that are skipped, counted and stop the run after max_bad_steps."""

from __future__ import annotations

import json
import pickle
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from test_trainer import DATA, read_lines, text_length, tiny_config
from typer.testing import CliRunner

from grposcope import GRPOTrainer
from grposcope import manifest as manifest_module
from grposcope.cli import app
from grposcope.core import losses
from grposcope.trainer import checkpoint, run_folder
from grposcope.trainer.checkpoint import CheckpointError


def make_trainer(tmp_path, tiny_llama, tiny_tokenizer, **overrides):
    args = tiny_config(tmp_path, **({"save_steps": 2, "max_steps": 2} | overrides))
    return GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                       train_dataset=DATA, args=args)


def test_a_checkpoint_holds_weights_optimizer_scheduler_rngs_and_run_state(tmp_path, tiny_llama, tiny_tokenizer):
    trainer = make_trainer(tmp_path, tiny_llama, tiny_tokenizer, use_avspo=True)
    trainer.train()
    folder = tmp_path / "run" / "checkpoint-2"
    names = {p.name for p in folder.iterdir()}
    assert {"model.safetensors", "config.json", "optimizer.pt", "scheduler.pt", "trainer_state.pt",
            "trainer_state.json", "manifest.json", "tokenizer.json"} <= names
    assert run_folder.verify(folder) is None
    state = torch.load(folder / "trainer_state.pt", weights_only=True)
    assert state["global_step"] == 2 and state["bad_steps"] == 0
    assert state["stream"] == {"epoch": 0, "position": 4}  # 2 steps x 2 prompts of the 6
    assert state["estimator"]["tau"] == trainer.estimator.tau  # AVSPO's adaptive threshold
    assert state["monitor"]["groups_seen"] == 4 and state["monitor"]["step"] == 2  # the ACR history
    assert torch.equal(state["sampler"]["generator"], trainer.sampler.generator.get_state())  # its draws
    assert {"python", "numpy", "torch"} <= state["rng"].keys()
    info = json.loads((folder / "trainer_state.json").read_text())
    metrics_file = tmp_path / "run" / "metrics.jsonl"
    assert info["metrics_offset"] == metrics_file.stat().st_size  # two lines when it was written
    assert info["global_step"] == 2 and info["config"]["seed"] == 0
    optimizer = torch.load(folder / "optimizer.pt", weights_only=True)
    assert len(optimizer["state"]) == len(list(tiny_llama.parameters()))  # AdamW moments of every weight


def test_only_the_newest_save_total_limit_checkpoints_are_kept(tmp_path, tiny_llama, tiny_tokenizer):
    make_trainer(tmp_path, tiny_llama, tiny_tokenizer, save_steps=1, max_steps=3, save_total_limit=2).train()
    assert sorted(p.name for p in (tmp_path / "run").glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]


def test_a_failed_save_leaves_no_checkpoint_and_no_temporary_folder(tmp_path, tiny_llama, tiny_tokenizer,
                                                                    monkeypatch):
    trainer = make_trainer(tmp_path, tiny_llama, tiny_tokenizer)
    real_save = torch.save

    def disk_full(obj, path, *a, **k):
        if str(path).endswith("scheduler.pt"):
            raise OSError(28, "No space left on device")
        return real_save(obj, path, *a, **k)

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(OSError, match="No space left"):
        trainer.train()
    run = tmp_path / "run"
    assert not list(run.glob("checkpoint-*")) and not list(run.glob(".tmp-*"))
    assert [r["step"] for r in read_lines(run / "metrics.jsonl")] == [1, 2]  # the steps done are kept


def corrupt(folder: Path, how: str) -> None:
    weights = folder / "model.safetensors"
    if how == "truncated":
        weights.write_bytes(weights.read_bytes()[:1000])
    elif how == "bit flip":
        data = bytearray(weights.read_bytes())
        data[-7] ^= 0x01  # inside a tensor: safetensors itself would load it
        weights.write_bytes(bytes(data))
    elif how == "no manifest":
        (folder / "manifest.json").unlink()


@pytest.mark.parametrize("how, said", [("truncated", "truncated"), ("bit flip", "checksum"),
                                       ("no manifest", "no manifest")])
def test_a_damaged_checkpoint_is_skipped_or_refused_with_the_reason(tmp_path, tiny_llama, tiny_tokenizer, how,
                                                                    said):
    make_trainer(tmp_path, tiny_llama, tiny_tokenizer, save_steps=1).train()
    run = tmp_path / "run"
    corrupt(run / "checkpoint-2", how)
    with pytest.warns(RuntimeWarning, match=f"skipping .*checkpoint-2: .*{said}"):
        assert run_folder.latest_checkpoint(run) == run / "checkpoint-1"
    with warnings.catch_warnings():  # the one it names is refused in one line, without a "skipping" warning
        warnings.simplefilter("error")
        refused = f"cannot resume from .*checkpoint-2.*{said}.*resume from .*checkpoint-1"
        with pytest.raises(CheckpointError, match=refused):
            checkpoint.resolve(str(run / "checkpoint-2"), run)


def test_a_checkpoint_file_holding_code_is_refused_not_run(tmp_path, tiny_llama, tiny_tokenizer):
    make_trainer(tmp_path, tiny_llama, tiny_tokenizer).train()
    folder, sentinel = tmp_path / "run" / "checkpoint-2", tmp_path / "executed"
    with open(folder / "optimizer.pt", "wb") as f:  # what a tampered file could hold
        pickle.dump(_Payload(str(sentinel)), f)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["optimizer.pt"] = manifest_module.describe(folder)["optimizer.pt"]  # passes verification
    (folder / "manifest.json").write_text(json.dumps(manifest))
    trainer = make_trainer(tmp_path, make_tiny(), tiny_tokenizer, max_steps=3)
    with pytest.raises(CheckpointError, match="optimizer.pt is damaged or not to be trusted: it holds pickled Python "
                                              "objects.*nothing in it was run"):
        trainer.train(resume_from_checkpoint=True)
    assert not sentinel.exists()


class _Payload:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.write_text, (Path(self.path), "code ran"))


def make_tiny():
    from conftest import make_tiny_llama

    return make_tiny_llama()


def test_resuming_with_another_group_size_is_refused_and_more_steps_extend_the_run(tmp_path, tiny_llama,
                                                                                 tiny_tokenizer):
    make_trainer(tmp_path, tiny_llama, tiny_tokenizer).train()
    other = make_trainer(tmp_path, make_tiny(), tiny_tokenizer, num_generations=2)
    with pytest.raises(CheckpointError, match="num_generations=4 \\(now 2\\).*same values"):
        other.train(resume_from_checkpoint=True)
    longer = make_trainer(tmp_path, make_tiny(), tiny_tokenizer, max_steps=4, resume_from_checkpoint=True)
    longer.train()
    assert [r["step"] for r in read_lines(tmp_path / "run" / "metrics.jsonl")] == [1, 2, 3, 4]
    assert longer.global_step == 4


def test_resume_without_a_checkpoint_says_so(tmp_path, tiny_llama, tiny_tokenizer):
    trainer = make_trainer(tmp_path, tiny_llama, tiny_tokenizer)
    with pytest.raises(CheckpointError, match="holds no complete checkpoint.*start without --resume"):
        trainer.train(resume_from_checkpoint=True)
    with pytest.raises(CheckpointError, match="does not exist; give a checkpoint-N folder"):
        trainer.train(resume_from_checkpoint=str(tmp_path / "nowhere"))
    (tmp_path / "notes.txt").write_text("a file, not a checkpoint")
    with pytest.raises(CheckpointError, match="notes.txt is a file, not a checkpoint folder; give a checkpoint-N"):
        trainer.train(resume_from_checkpoint=str(tmp_path / "notes.txt"))


def test_a_new_run_refuses_an_output_dir_with_checkpoints_and_overwrite_removes_them(tmp_path, tiny_llama,
                                                                                    tiny_tokenizer):
    make_trainer(tmp_path, tiny_llama, tiny_tokenizer).train()
    (tmp_path / "run" / "metrics.jsonl").unlink()  # checkpoints alone are a run too
    with pytest.raises(ValueError, match="already holds a run"):
        make_trainer(tmp_path, make_tiny(), tiny_tokenizer).train()
    assert (tmp_path / "run" / "checkpoint-2").is_dir()
    make_trainer(tmp_path, make_tiny(), tiny_tokenizer, overwrite_output_dir=True, save_steps=5).train()
    assert not list((tmp_path / "run").glob("checkpoint-*"))


def test_nonfinite_updates_are_skipped_counted_and_stop_the_run_after_max_bad_steps(tmp_path, tiny_llama,
                                                                                     tiny_tokenizer, monkeypatch):
    real = losses.policy_loss
    calls = {"n": 0}

    def poisoned(*args, **kwargs):  # finite at step 1 (2 micro-batches), NaN from step 2 on
        calls["n"] += 1
        loss, metrics = real(*args, **kwargs)
        return (loss * float("nan") if calls["n"] > 2 else loss), metrics

    monkeypatch.setattr(losses, "policy_loss", poisoned)
    weights = []

    class Snapshot:
        def on_step_end(self, trainer, metrics):
            weights.append([p.detach().clone() for p in trainer.model.parameters()])

    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                          train_dataset=DATA, callbacks=[Snapshot()],
                          args=tiny_config(tmp_path, max_steps=5, max_bad_steps=1, save_steps=1))
    with pytest.raises(FloatingPointError, match="2 updates were skipped.*max_bad_steps=1.*resume from .*checkpoint-2"):
        trainer.train()
    lines = read_lines(tmp_path / "run" / "metrics.jsonl")
    assert [r["loss/skipped_updates"] for r in lines] == [0, 1, 2]
    assert all(torch.equal(a, b) for a, b in zip(weights[0], weights[2]))  # skipped: weights unchanged
    assert sorted(p.name for p in (tmp_path / "run").glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]


def test_cli_resume_continues_the_newest_checkpoint(tmp_path, tiny_model_dir):
    options = ["train", "--model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp_path / "out"),
               "--dataset_name", "arithmetic:easy", "--dataset_size", "8", "--eval_size", "2",
               "--num_generations", "2", "--per_device_train_batch_size", "4", "--max_completion_length", "4",
               "--save_steps", "1"]
    runner = CliRunner()
    assert runner.invoke(app, options + ["--max_steps", "2"]).exit_code == 0
    shutil.rmtree(tmp_path / "out" / "checkpoint-2")  # as if killed before saving step 2
    result = runner.invoke(app, options + ["--max_steps", "3", "--resume"])
    assert result.exit_code == 0, result.output
    assert "resumed from" in result.output and "checkpoint-1 at step 1 of 3" in result.output
    lines = read_lines(tmp_path / "out" / "metrics.jsonl")
    assert [r["step"] for r in lines] == [1, 2, 3]
    again = runner.invoke(app, options + ["--max_steps", "3"])  # without --resume: refused, with the way out
    assert again.exit_code == 2 and "--resume" in again.output


def test_a_lora_run_resumes_its_adapters(tmp_path, tiny_llama, tiny_tokenizer):
    pytest.importorskip("peft")
    first = make_trainer(tmp_path, tiny_llama, tiny_tokenizer, use_peft=True, lora_r=4,
                         lora_target_modules=["q_proj", "v_proj"])
    first.train()
    trained = {n: p.detach().clone() for n, p in first.model.named_parameters() if "lora_" in n}
    second = make_trainer(tmp_path, make_tiny(), tiny_tokenizer, use_peft=True, lora_r=4,
                          lora_target_modules=["q_proj", "v_proj"])
    assert (tmp_path / "run" / "checkpoint-2" / "adapter_model.safetensors").is_file()
    second.train(resume_from_checkpoint=True)  # at max_steps already: loads, evaluates, saves
    loaded = {n: p for n, p in second.model.named_parameters() if "lora_" in n}
    assert loaded.keys() == trained.keys() and all(torch.equal(loaded[n], trained[n]) for n in trained)
    assert any(not torch.equal(t, torch.zeros_like(t)) for n, t in trained.items() if "lora_B" in n)


def test_a_lora_checkpoint_loads_as_a_model_for_evaluation(tmp_path, tiny_model_dir):
    pytest.importorskip("peft")
    from grposcope.models import load_model

    args = tiny_config(tmp_path, save_steps=2, use_peft=True, lora_r=4, lora_target_modules=["q_proj", "v_proj"])
    trainer = GRPOTrainer(model=str(tiny_model_dir), reward_funcs=text_length, train_dataset=DATA, args=args)
    trainer.train()
    model, _ = load_model(str(tmp_path / "run" / "checkpoint-2"))
    ids = torch.tensor([[3, 4, 5, 6]])
    trainer.model.eval(), model.eval()
    with torch.no_grad():
        assert torch.equal(model(ids).logits, trainer.model(ids).logits)
        with model.disable_adapter():  # the adapters matter: without them the logits differ
            assert not torch.equal(model(ids).logits, trainer.model(ids).logits)


def test_tied_embeddings_are_saved_once_and_resume_tied(tmp_path, tiny_tokenizer):
    import transformers

    def tied_llama():
        torch.manual_seed(0)
        config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
        return transformers.LlamaForCausalLM(config)

    first = make_trainer(tmp_path, tied_llama(), tiny_tokenizer)
    first.train()
    second = make_trainer(tmp_path, tied_llama(), tiny_tokenizer)
    second.train(resume_from_checkpoint=True)  # SmolLM2, the default model, ties them too
    head, embed = second.model.lm_head.weight, second.model.model.embed_tokens.weight
    assert head is embed  # still one tensor after loading
    assert torch.equal(embed, first.model.model.embed_tokens.weight)
    assert not torch.equal(embed, tied_llama().model.embed_tokens.weight)  # trained values, not the initial
