"""One name per option: a config field is also the keyword argument of the component that reads it, so that a
grep for the field lands on that parameter; the keywords used before (core/registry.py, RENAMED) still work,
with a FutureWarning, until the next release."""

from __future__ import annotations

import inspect
import json
import warnings
from types import SimpleNamespace

import pytest
import torch
from typer.testing import CliRunner

from grposcope.cli import app
from grposcope.components.families import FAMILIES
from grposcope.core import advantages
from grposcope.core import registry as registry_module
from grposcope.core.registry import RENAMED, Registry
from grposcope.sim import SimConfig
from grposcope.trainer.config import GRPOConfig

ENTRIES = [(family, name) for family, registry in FAMILIES.items() for name in registry.names()]
RENAMES = [(kind, entry, old, new) for (kind, entry), table in RENAMED.items() for old, new in table.items()]
REGISTRIES = {registry.kind: registry for registry in FAMILIES.values()}


# --- (a) the contract: every declared option is the entry's keyword of the same name --------------------------


@pytest.mark.parametrize("family,name", ENTRIES)
def test_every_declared_option_and_read_field_is_a_keyword_of_that_name(family, name):
    registry = FAMILIES[family]
    parameters = inspect.signature(registry.get(name)).parameters
    fields = [*registry.options(name), *registry.reads(name)]
    assert [f for f in fields if f not in parameters] == []
    config_fields = set(GRPOConfig.field_names())
    assert [f for f in fields if f not in config_fields] == []  # and each is a GRPOConfig field of that name


def test_an_option_is_a_keyword_and_its_line_in_args_with_no_other_declaration():
    assert not hasattr(registry_module, "Option")
    assert "options" not in inspect.signature(Registry.register).parameters
    estimators = FAMILIES["advantage_estimator"]
    assert estimators.options("grpo") == ("scale_rewards", "advantage_std_unbiased", "advantage_eps")
    assert estimators.docs("grpo")["advantage_eps"].startswith("Added to that std before dividing (TRL's 1e-4)")
    assert "seed" not in estimators.options("avspo") and "seed" in estimators.reads("avspo")


def test_build_passes_each_config_field_under_its_own_name():
    toy = Registry("toy")

    @toy.register("a", reads=["seed"])
    def a(width: int = 3, seed: int = 0):
        """Args:
            width: how wide."""
        return {"width": width, "seed": seed}

    assert toy.build("a", SimpleNamespace(width=7, seed=11, depth=2)) == {"width": 7, "seed": 11}

    def b(d: int = 1):
        """Args:
            depth: how deep."""

    with pytest.raises(TypeError, match="documents \\(Args:\\) the option 'depth', which is not one of its keyword"):
        toy.register("b")(b)
    with pytest.raises(TypeError, match="reads the config field 'seed', which is not one of its keyword"):
        toy.register("c", reads=["seed"])(lambda s=0: None)


@pytest.mark.parametrize("kind,entry,old,new", RENAMES)
def test_each_old_keyword_names_a_current_option_of_its_entry_and_is_no_keyword_itself(kind, entry, old, new):
    registry = REGISTRIES[kind]
    fields = [*registry.options(entry), *registry.reads(entry)]
    assert new in fields
    assert old not in inspect.signature(registry.get(entry)).parameters


# --- (b) the old spellings: accepted with a FutureWarning naming the new one ----------------------------------


@pytest.mark.parametrize("kind,entry,old,new", RENAMES)
def test_an_old_keyword_through_make_warns_naming_the_new_one_and_sets_that_option(kind, entry, old, new):
    registry = REGISTRIES[kind]
    default = inspect.signature(registry.get(entry)).parameters[new].default
    with pytest.warns(FutureWarning, match=rf"^'{old}' is deprecated, write '{new}'; the old name goes in the next "
                                           "release$"):
        registry.make(entry, **{old: default})
    with pytest.raises(TypeError, match=rf"'{old}' and '{new}' are one option; write '{new}' only"):
        registry.make(entry, **{old: default, new: default})


def test_an_old_keyword_reaches_the_estimator_as_the_new_one_does():
    rewards = torch.tensor([[0.0] * 4, [1.0, 0.0, 0.0, 0.0], [1.0] * 4])  # ACR 2/3 > 0.2: augmented
    with pytest.warns(FutureWarning) as record:
        old = advantages.make("avspo", tau_init=0.2, alpha=1.0, ema_lambda=0.0)
    assert [str(w.message).split(";")[0] for w in record] == [
        "'tau_init' is deprecated, write 'acr_threshold_init'", "'alpha' is deprecated, write 'virtual_sample_alpha'",
        "'ema_lambda' is deprecated, write 'acr_ema_lambda'"]
    new = advantages.make("avspo", acr_threshold_init=0.2, virtual_sample_alpha=1.0, acr_ema_lambda=0.0)
    assert (old.tau, old.alpha, old.ema_lambda) == (new.tau, new.alpha, new.ema_lambda) == (0.2, 1.0, 0.0)
    out_old, out_new = old(rewards), new(rewards)
    assert torch.equal(out_old.advantages, out_new.advantages) and out_old.metrics == out_new.metrics
    assert out_new.metrics["avspo/frac_groups_augmented"] == pytest.approx(2 / 3)


def test_simconfig_stores_an_old_keyword_under_its_new_name():
    with pytest.warns(FutureWarning, match="'budget' is deprecated, write 'sample_budget'"):
        config = SimConfig(sampler="budgeted", sampler_options={"budget": 64, "budget_decay": 0.9})
    assert config.sampler_options == {"sample_budget": 64, "budget_decay": 0.9}


# --- (b, c) grposcope simulate: the old spellings warn, the new ones are the same run --------------------------

CLI = ["simulate", "--sampler", "fixed,budgeted", "--advantage_estimator", "grpo,avspo", "--prompts", "300",
       "--batch_size", "16", "--num_generations", "4", "--steps", "4"]


def _runs(path) -> list[dict]:
    runs = json.loads(path.read_text())["runs"]
    for run in runs:
        run.pop("seconds")
    return runs


def test_simulate_takes_the_option_names_and_still_the_old_keywords_with_a_warning(tmp_path):
    runner = CliRunner()
    new, old = tmp_path / "new.json", tmp_path / "old.json"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = runner.invoke(app, CLI + ["--acr_threshold_init", "0.2", "--virtual_sample_alpha", "1.0",
                                           "--sample_budget", "32", "--budget_candidates", "2", "--output", str(new)])
    assert result.exit_code == 0, result.output
    assert [str(w.message) for w in caught if issubclass(w.category, FutureWarning)] == []
    runs = _runs(new)
    # an option goes to the runs whose component takes it: avspo and budgeted, not grpo and fixed
    assert [(r["config"]["sampler_options"], r["config"]["estimator_options"]) for r in runs] == [
        ({}, {}), ({}, {"acr_threshold_init": 0.2, "virtual_sample_alpha": 1.0}),
        ({"sample_budget": 32, "budget_candidates": 2}, {}),
        ({"sample_budget": 32, "budget_candidates": 2}, {"acr_threshold_init": 0.2, "virtual_sample_alpha": 1.0})]
    assert runs[1]["summary"]["acr_post"] < runs[0]["summary"]["acr_post"]  # avspo at tau 0.2 augmented groups
    assert max(runs[2]["history"]["sampler/samples_generated"]) <= 32

    # the old keywords, through simulate's old key=value options (tests/test_one_vocabulary.py: their note)
    with pytest.warns(FutureWarning) as record:
        result = runner.invoke(app, CLI + ["--estimator_options", "avspo.tau_init=0.2,alpha=1.0",
                                           "--sampler_options", "budget=32,budgeted.candidates=2",
                                           "--output", str(old)])
    assert result.exit_code == 0, result.output
    said = {str(w.message) for w in record if issubclass(w.category, FutureWarning)}
    assert said == {f"'{o}' is deprecated, write '{n}'; the old name goes in the next release" for o, n in
                    [("tau_init", "acr_threshold_init"), ("alpha", "virtual_sample_alpha"),
                     ("budget", "sample_budget"), ("candidates", "budget_candidates")]}
    assert _runs(old) == runs  # the same configs, as written, and the same numbers, bit for bit
