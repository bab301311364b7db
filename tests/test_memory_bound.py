"""A step that cannot fit in memory is refused with its size before anything is spent (issue 15, point 6).

Available memory is patched to fixed numbers, so that the tests do not depend on this machine's.
"""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from grposcope import GRPOConfig
from grposcope.cli import app
from grposcope.data import load_task
from grposcope.presets import preset
from grposcope.sim import SimConfig, simulate
from grposcope.trainer.geometry import geometry_for

GIB = 2**30

# SmolLM2-135M-Instruct, the embedded model: its config.json and the shapes of its weights
SMOLLM2 = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 49152, "hidden_size": 576,
           "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
           "head_dim": 64, "tie_word_embeddings": True}


def smollm2_folder(path):
    """A folder with SmolLM2-135M's config.json and a model.safetensors that holds only its header (the names and
    shapes of the 134,515,008 weights): all the estimate reads, without 538 MB of weights."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps(SMOLLM2))
    h, m, kv = 576, 1536, 192
    shapes = {"model.embed_tokens.weight": [49152, h], "model.norm.weight": [h]}
    for i in range(30):
        for name, shape in [("self_attn.q_proj", [h, h]), ("self_attn.k_proj", [kv, h]), ("self_attn.v_proj", [kv, h]),
                            ("self_attn.o_proj", [h, h]), ("mlp.gate_proj", [m, h]), ("mlp.up_proj", [m, h]),
                            ("mlp.down_proj", [h, m]), ("input_layernorm", [h]), ("post_attention_layernorm", [h])]:
            shapes[f"model.layers.{i}.{name}.weight"] = shape
    header = json.dumps({name: {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}
                         for name, shape in shapes.items()}).encode()
    (path / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    return path


def test_step_memory_by_hand():
    from grposcope.trainer.memory import ModelShape, step_memory_bytes

    # V=100, h=8, m=16, L=2, c=4, 1000 parameters all trained, float32; R=6 rows generated, n=4 trained, G=2,
    # P=10, T=5:
    #   weights   1000*4 + 1000*3*4 = 16000
    #   kv/token  2*2*4*4 = 64;  generation 6*15*64 + 2*6*100*4 = 5760 + 4800 = 10560
    #   update    logits 2*4*5*100*4 = 16000; tokens 4*5 + 2*10 = 40, activations 40*2*(64+64)*4 = 40960;
    #             kv 4*15*64 = 3840: 60800
    shape = ModelShape(vocab=100, hidden=8, intermediate=16, layers=2, kv_width=4, params=1000, trainable=1000)
    need = step_memory_bytes(shape, generated=6, trained=4, group=2, prompt_tokens=10, completion_tokens=5)
    assert (need.weights, need.generation, need.update, need.total) == (16000, 10560, 60800, 76800)
    copy = step_memory_bytes(shape, generated=6, trained=4, group=2, prompt_tokens=10, completion_tokens=5,
                             reference_copy=True)
    assert copy.weights == 20000  # a frozen reference: one more copy of the weights


def test_a_step_that_cannot_fit_is_refused_before_the_model_loads(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setattr("grposcope.trainer.memory.available_memory", lambda: 8 * GIB)

    def no_loading(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("grposcope.models.load_model", no_loading)
    result = CliRunner().invoke(app, [
        "train", "--model_name_or_path", str(tiny_model_dir), "--output_dir", str(tmp_path / "out"),
        "--dataset_name", "arithmetic:easy", "--dataset_size", "8", "--eval_size", "2",
        "--num_generations", "100000", "--per_device_train_batch_size", "100000"])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())  # rich may wrap the line
    assert re.fullmatch(
        r"error: a step needs ~[\d.]+ GiB \(G=100000, batch=100000, length=\d+\+256 tokens, vocabulary 64: "
        r"generation [\d.]+ GiB, update [\d.]+ GiB, weights and optimizer 0.0 GiB\) but this machine has 8.0 GiB "
        r"available; lower num_generations, per_device_train_batch_size or max_completion_length", message), message
    assert float(re.search(r"needs ~([\d.]+) GiB", message).group(1)) > 8
    assert not (tmp_path / "out" / "metrics.jsonl").exists()


def test_the_quickstart_fits_and_its_estimate_stays_below_what_it_takes(tmp_path):
    # the quickstart (2 prompts x 8 completions generated at once, 8 a pass, 24 tokens) measured 2.7 GiB of
    # peak RSS on this machine; the estimate must stay below that, or it could refuse a run that fits
    from grposcope.trainer.memory import check_memory

    folder = smollm2_folder(tmp_path / "smollm2")
    config = GRPOConfig(**(preset("quickstart") | {"model_name_or_path": str(folder)}))
    examples = [dict(e) for e in load_task("arithmetic", seed=0).train]
    need = check_memory(config, geometry_for(config), str(folder), examples, available=3 * GIB)
    assert need is not None
    assert need.weights == 134_515_008 * 16  # weights, gradients and AdamW's moments, float32
    assert 2.0 * GIB < need.total < 2.7 * GIB
    with pytest.raises(RuntimeError, match=r"a step needs ~2.4 GiB \(G=8, batch=8, 16 completions generated at "
                                           r"once, length=39\+24 tokens, vocabulary 49152"):
        check_memory(config, geometry_for(config), str(folder), examples, available=2 * GIB)


def test_the_test_suites_geometry_fits_in_little(tmp_path, tiny_model_dir):
    from test_trainer import DATA, tiny_config

    from grposcope.trainer.memory import check_memory

    config = tiny_config(tmp_path, model_name_or_path=str(tiny_model_dir))
    need = check_memory(config, geometry_for(config), str(tiny_model_dir), DATA, available=64 * 2**20)
    assert need is not None and need.total < 64 * 2**20


def test_simulate_with_a_huge_group_is_refused_with_its_size(tmp_path, monkeypatch):
    monkeypatch.setattr("grposcope.sim.memory.available_memory", lambda: 16 * GIB)
    out = tmp_path / "sim.json"
    result = CliRunner().invoke(app, ["simulate", "--num_generations", "1000000000", "--steps", "2",
                                      "--output", str(out)])
    assert result.exit_code == 2, result.output
    assert " ".join(result.output.split()) == (
        "error: a simulated step needs ~5722.0 GiB (G=1000000000, batch_size=256: 256,000,000,000 samples a step; "
        "prompts=10000, features=16) but this machine has 16.0 GiB available; lower num_generations or batch_size "
        "(or prompts, features)")
    assert "alloc" not in result.output and not out.exists()
    with pytest.raises(RuntimeError, match="a simulated step needs ~5722.0 GiB"):  # the Python API too
        simulate(SimConfig(num_generations=1_000_000_000, steps=2))


def test_simulate_at_the_default_size_fits_in_little():
    from grposcope.sim.memory import check_memory as check_sim

    check_sim(SimConfig(), available=16 * 2**20)  # 256 x 16 samples and 11,000 prompts: well under 16 MiB
    with pytest.raises(RuntimeError, match=r"G=16, batch_size=256: 4,096 samples a step"):
        check_sim(SimConfig(), available=2**20)
