"""Components from outside the package, named by dotted path (grposcope.components.plugins): docs/architecture.md's
worked example, run in grposcope's trainer, the TRL subclass and the simulator, and the errors of a bad one."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from grposcope import GRPOConfig, GRPOTrainer
from grposcope.core.advantages import ESTIMATORS
from grposcope.core.loss_registry import POLICY_LOSSES
from grposcope.sampling import SAMPLERS

DOCS = Path(__file__).parents[1] / "docs" / "architecture.md"
MARK = "<!-- plugin-example: mypkg/estimators.py -->"
RANGE = "mypkg.estimators:RangeNormalised"
DATA = [{"prompt": [{"role": "user", "content": f"What is {a} + {b} ?"}], "answer": str(a + b)}
        for a, b in [(1, 2), (3, 4), (2, 2), (5, 1), (4, 3), (6, 2)]]

# a sampler and a policy loss of a user's package, beside the docs' estimator
SAMPLER = '''
from grposcope.sampling.fixed import Fixed


class EveryOther(Fixed):
    """fixed, which trains on every other prompt of the batch only."""

    def __init__(self, offset: int = 0, success_threshold: float = 0.5, seed: int = 0) -> None:
        super().__init__(success_threshold=success_threshold, seed=seed)
        self.offset = offset

    def sample(self, prompts, draw, more, g):
        return super().sample(prompts[self.offset::2], draw, more, g)
'''
LOSS = '''
import torch

from grposcope.core.losses import aggregate


class Reinforce:
    """-A * log pi: the on-policy gradient without a ratio or a clip."""

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale

    def __call__(self, logp, old_logp, advantages, mask, **aggregation):
        per_token = -self.scale * advantages.unsqueeze(1) * logp  # (N, T)
        loss = aggregate(per_token, mask, **aggregation)
        return loss, {"loss/policy": loss.item(), "reinforce/scale": self.scale}
'''
BROKEN = "raise RuntimeError('mypkg.broken must never be imported: nobody named it')\n"


def docs_example() -> str:
    """The python block under MARK in docs/architecture.md."""
    text = DOCS.read_text()
    block = text[text.index(MARK):].split("```python\n", 1)[1]
    return block.split("```", 1)[0]


@pytest.fixture
def mypkg(tmp_path, monkeypatch):
    """mypkg (the docs' estimator, a sampler, a loss, and a module that fails if imported) on sys.path; the
    registries forget its entries afterwards."""
    root = tmp_path / "src"
    (root / "mypkg").mkdir(parents=True)
    for name, code in {"__init__": "", "estimators": docs_example(), "samplers": SAMPLER, "losses": LOSS,
                       "broken": BROKEN}.items():
        (root / "mypkg" / f"{name}.py").write_text(code)
    monkeypatch.syspath_prepend(str(root))
    yield root
    for registry in (ESTIMATORS, SAMPLERS, POLICY_LOSSES):
        for name in [n for n in list(registry._entries) if n.startswith("mypkg.")]:
            registry.unload(name)
    for module in [m for m in sys.modules if m == "mypkg" or m.startswith("mypkg.")]:
        del sys.modules[module]


def text_length(prompts, completions, **columns):
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [len(t) / 50 for t in texts]


def tiny_config(tmp_path, **overrides) -> GRPOConfig:
    options = dict(output_dir=str(tmp_path / "run"), num_generations=4, per_device_train_batch_size=4,
                   max_completion_length=6, learning_rate=1e-3, max_steps=2, logging_steps=1, seed=0)
    return GRPOConfig(**(options | overrides))


def test_the_docs_example_trains_in_grposcopes_trainer(tmp_path, mypkg, tiny_llama, tiny_tokenizer):
    config = tiny_config(tmp_path, advantage_estimator=RANGE, advantage_estimator_kwargs='{"eps": 0.001}',
                         success_threshold=0.3)
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                          train_dataset=DATA, args=config)
    assert type(trainer.estimator).__name__ == "RangeNormalised"
    assert (trainer.estimator.eps, trainer.estimator.success_threshold) == (0.001, 0.3)  # kwargs; config field
    trainer.train()
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2]
    assert all(line["range/spread_mean"] > 0 for line in lines)  # the plug-in's own metric, logged
    assert all(0 <= line["range/solved"] <= 1 for line in lines)


def test_the_config_check_builds_the_plugin_once_and_the_run_uses_that_instance(tmp_path, mypkg, tiny_llama,
                                                                                tiny_tokenizer, monkeypatch):
    import mypkg.estimators as estimators

    built = []
    original = estimators.RangeNormalised.__init__
    monkeypatch.setattr(estimators.RangeNormalised, "__init__",
                        lambda self, *a, **k: (built.append(self), original(self, *a, **k))[1])
    config = tiny_config(tmp_path, advantage_estimator=RANGE, max_steps=1)
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                          train_dataset=DATA, args=config)
    assert built == [trainer.estimator]


def test_a_sampler_and_a_policy_loss_from_outside_run_in_grposcopes_trainer(tmp_path, mypkg, tiny_llama,
                                                                           tiny_tokenizer):
    config = tiny_config(tmp_path, sampler="mypkg.samplers:EveryOther", sampler_kwargs={"offset": 1},
                         policy_loss="mypkg.losses:Reinforce", policy_loss_kwargs={"scale": 0.5}, max_steps=1,
                         per_device_train_batch_size=8, gradient_accumulation_steps=2)  # 4 prompts a step
    trainer = GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length,
                          train_dataset=DATA, args=config)
    assert (type(trainer.sampler).__name__, trainer.sampler.offset) == ("EveryOther", 1)
    trainer.train()
    line = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert line["sampler/samples_generated"] == 8.0  # 2 of the batch's 4 prompts, 4 completions each
    assert line["reinforce/scale"] == 0.5


def test_the_docs_example_runs_in_the_trl_subclass(tmp_path, mypkg):
    pytest.importorskip("trl")
    from conftest import make_tiny_llama, make_tiny_tokenizer

    from grposcope.integrations.trl import GRPOConfig as TRLConfig
    from grposcope.integrations.trl import GRPOTrainer as TRLTrainer

    config = TRLConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=8, num_generations=4,
                       max_completion_length=6, max_steps=1, logging_steps=1, save_strategy="no", report_to="none",
                       use_cpu=True, bf16=False, learning_rate=1e-3, seed=0, disable_tqdm=True,
                       advantage_estimator=RANGE, advantage_estimator_kwargs='{"eps": 0.001}')
    torch.manual_seed(0)
    prompts = [{"prompt": f"What is {i} + {i} ?"} for i in range(8)]
    trainer = TRLTrainer(model=make_tiny_llama(), reward_funcs=lambda prompts, completions, **kw: [
        float(len(c.split()) % 2) for c in completions], args=config, train_dataset=prompts,
        processing_class=make_tiny_tokenizer())
    assert type(trainer.estimator).__name__ == "RangeNormalised" and trainer.estimator.eps == 0.001
    trainer.train()
    logged = [row for row in trainer.state.log_history if "range/spread_mean" in row]
    assert logged and 0 <= logged[0]["range/spread_mean"] <= 1


def test_the_docs_example_runs_in_the_simulator(mypkg):
    from grposcope.sim import SimConfig, simulate

    result = simulate(SimConfig(estimator=RANGE, estimator_options={"eps": 0.001}, steps=5, prompts=64,
                                batch_size=16))
    assert len(result.history["step"]) == 5
    assert all(0 < value <= 1 for value in result.history["range/spread_mean"])


def test_only_the_named_module_is_imported(mypkg):
    """mypkg.broken raises when imported: naming the estimator imports mypkg and mypkg.estimators only."""
    code = textwrap.dedent(f"""
        import sys
        from grposcope import GRPOConfig
        before = set(sys.modules)
        GRPOConfig(output_dir="x", advantage_estimator="{RANGE}")
        print(sorted(m for m in set(sys.modules) - before if m.startswith("mypkg")))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(mypkg), "PATH": "/usr/bin:/bin"})
    assert out.stdout.split("\n")[-2] == "['mypkg', 'mypkg.estimators']"


@pytest.mark.parametrize("overrides, message", [
    ({"advantage_estimator": "nopkg.estimators:X"},
     "advantage estimator 'nopkg.estimators:X': no module named 'nopkg' on Python's path; install the package"),
    ({"advantage_estimator": "mypkg.estimators:Missing"},
     "advantage estimator 'mypkg.estimators:Missing': mypkg.estimators ("),
    ({"advantage_estimator": "mypkg.estimators:RangeNormalised:x"}, "a plug-in is named by its dotted path"),
    ({"advantage_estimator": RANGE, "advantage_estimator_kwargs": {"epss": 0.1}},
     "advantage_estimator_kwargs: advantage estimator 'mypkg.estimators:RangeNormalised' takes no 'epss'; it "
     "takes (eps: float = 0.0001, success_threshold: float = 0.5)"),
    ({"advantage_estimator": RANGE, "advantage_estimator_kwargs": {"success_threshold": 0.1}},
     "advantage_estimator_kwargs: success_threshold: a config field of its own; set it there"),
    ({"advantage_estimator": RANGE, "advantage_estimator_kwargs": {"eps": -1.0}}, "eps must be > 0, got -1.0"),
    ({"policy_loss": "mypkg.losses:aggregate"},  # a function: refused before it is called (issue 56)
     "policy loss 'mypkg.losses:aggregate' is a function, not a class: a plug-in path names a class of its family"),
    ({"sampler": "mypkg.estimators:RangeNormalised"},
     "sampler 'mypkg.estimators:RangeNormalised' is the class mypkg.estimators.RangeNormalised, not a subclass of "
     "grposcope.sampling.base.Sampler; nothing was called"),
    ({"advantage_estimator": RANGE, "advantage_estimator_kwargs": "[1, 2]"},
     "advantage_estimator_kwargs must be a mapping of the plug-in's keyword arguments"),
])
def test_a_bad_plugin_fails_when_the_config_is_checked(tmp_path, mypkg, overrides, message):
    with pytest.raises(ValueError) as err:
        tiny_config(tmp_path, **overrides)
    assert message in str(err.value)


def test_a_plugins_mapping_beside_a_built_in_entry_is_a_note_not_an_error(tmp_path, mypkg):
    from grposcope.trainer.options import unused_options

    config = tiny_config(tmp_path, advantage_estimator="grpo", advantage_estimator_kwargs={"eps": 0.1})
    assert ("advantage_estimator_kwargs={'eps': 0.1} is not used: it holds a plug-in's keyword arguments, and "
            "advantage_estimator='grpo' is built in (its options are config fields)") in unused_options(config)


def test_an_option_the_plugin_reads_by_name_is_not_called_unused(tmp_path, mypkg):
    from grposcope.trainer.options import unused_options

    config = tiny_config(tmp_path, sampler="mypkg.samplers:EveryOther", budget_decay=0.5)
    assert any(note.startswith("budget_decay=0.5 is not used: sampler='mypkg.samplers:EveryOther'")
               for note in unused_options(config))


def test_the_cli_trains_with_a_plugin_estimator(tmp_path, mypkg, tiny_model_dir, monkeypatch):
    from typer.testing import CliRunner

    from grposcope.cli.app import app

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, [
        "train", "--model_name_or_path", str(tiny_model_dir), "--dataset_name", "arithmetic:easy",
        "--dataset_size", "8", "--eval_size", "2", "--max_steps", "1", "--num_generations", "2",
        "--per_device_train_batch_size", "4",
        "--max_completion_length", "4", "--output_dir", str(tmp_path / "cli"), "--advantage_estimator", RANGE,
        "--advantage_estimator_kwargs", '{"eps": 0.001}'])
    assert result.exit_code == 0, result.output
    line = json.loads((tmp_path / "cli" / "metrics.jsonl").read_text().splitlines()[0])
    assert "range/spread_mean" in line


@pytest.mark.parametrize("field, path", [("advantage_estimator", "os:system"), ("sampler", "subprocess:Popen"),
                                         ("policy_loss", "subprocess:Popen"), ("advantage_estimator", "builtins:eval"),
                                         ("policy_loss", "os.path:join")])
def test_a_dotted_path_to_anything_but_a_class_of_its_family_runs_nothing(tmp_path, field, path, monkeypatch):
    """A config that names `os:system` with `{command: ...}` ran the command while GRPOConfig was built (issue 56):
    a plug-in path must name a class of its family, checked before anything of it is called."""
    import yaml
    from typer.testing import CliRunner

    from grposcope.cli import app

    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "PWNED"
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"use_avspo": False, field: path,
                                      f"{field}_kwargs": {"command": f"touch {marker}", "args": ["touch", str(marker)],
                                                          "source": f"open({str(marker)!r}, 'w')"},
                                      "output_dir": str(tmp_path / "out")}))
    result = CliRunner().invoke(app, ["train", "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert not marker.exists()
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "not a" in lines[0] and "nothing was called" in lines[0], lines
