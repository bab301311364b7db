"""Every option of every component is reachable from GRPOConfig, YAML and the CLI, and an option that the run
never reads is named at its start with what would read it."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch
import yaml

from grposcope.cli import coerce_all, parse_overrides
from grposcope.components.families import FAMILIES
from grposcope.components.options import declared
from grposcope.core.registry import Registry
from grposcope.trainer.config import GRPOConfig
from grposcope.trainer.options import unused_options
from grposcope.trainer.setup import make_estimator, make_sampler


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_parameter_of_every_registered_component_has_a_config_option(family):
    registry = FAMILIES[family]
    fields = set(GRPOConfig.field_names())
    for name in registry.names():
        params = set(inspect.signature(registry.get(name)).parameters)
        set_by = set(registry.options(name)) | set(registry.reads(name))
        assert params == set_by, f"{registry.kind} {name!r} takes {sorted(params - set_by)}, which no option sets"
        assert set_by <= fields


def test_an_option_takes_its_default_and_type_from_the_signature_and_must_agree_where_shared():
    fields = {f.name: f for f in dataclasses.fields(GRPOConfig)}
    assert fields["virtual_sample_alpha"].default == 0.5 and fields["sample_budget"].default is None
    assert declared()["advantage_eps"].entries == ("avspo", "grpo", "pool")
    toy = Registry("toy")

    @toy.register("a")
    def a(width: int = 3):
        """A toy.

        Args:
            width: how wide,
                in cells.
        """

    original = dict(FAMILIES)
    try:
        FAMILIES["toy"] = toy
        width = declared()["width"]
        assert (width.family, width.entries, width.default, width.hint, width.doc) == ("toy", ("a",), 3, int,
                                                                                        "how wide, in cells.")

        @toy.register("b")
        def b(width: int = 3): ...  # shares a's option: a documents it

        assert declared()["width"].entries == ("a", "b") and declared()["width"].doc == "how wide, in cells."

        @toy.register("c")
        def c(width: int = 4): ...

        with pytest.raises(TypeError, match="option 'width' is declared by .* with another family, default, type, "
                                            "doc or range"):
            declared()
        toy = FAMILIES["toy"] = Registry("toy")

        @toy.register("d")
        def d(depth: int = 1): ...

        with pytest.raises(TypeError, match="option 'depth' of toy d has no doc: add 'depth: what it does' to "
                                            "the Args: section"):
            declared()
    finally:
        FAMILIES.clear()
        FAMILIES.update(original)


AVSPO_CLI = ("--use_avspo true --virtual_reward_range -1,2 --virtual_reward_anchor 0.3 --virtual_reward_partial "
             "0.25 --acr_ema_lambda 0 --acr_threshold_adaptive false --acr_threshold_eta 0.05 "
             "--acr_threshold_reward_ema 0.5 --acr_threshold_min 0.2 --acr_threshold_max 0.8 --acr_threshold_init 0.4 "
             "--advantage_eps 0.001 --advantage_std_unbiased false")
AVSPO_EXPECTED = {"reward_range": (-1.0, 2.0), "r_anchor": 0.3, "r_partial": 0.25, "ema_lambda": 0.0,
                  "adaptive_threshold": False, "eta": 0.05, "reward_ema": 0.5, "tau_min": 0.2, "tau_max": 0.8,
                  "tau": 0.4, "eps": 0.001, "unbiased": False}


@pytest.mark.parametrize("source", ["config", "yaml", "cli"])
def test_avspo_options_reach_the_estimator_from_config_yaml_and_cli(source, tmp_path):
    values = coerce_all(parse_overrides(AVSPO_CLI.split()))
    if source == "yaml":
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump({k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}))
        from grposcope.cli import read_yaml

        values = read_yaml(path)
    args = GRPOConfig.from_dict(values) if source != "config" else GRPOConfig(**values)
    est = make_estimator(args)
    assert {k: getattr(est, k) for k in AVSPO_EXPECTED} == AVSPO_EXPECTED
    # ema_lambda 0: the signal is this step's ACR (1 of 2 groups collapsed), above tau 0.4: augmented
    out = est(torch.tensor([[0.0, 0.0], [0.0, 1.0]]))
    assert out.metrics["avspo/signal"] == 0.5 and out.metrics["avspo/frac_groups_augmented"] == 0.5


def test_pool_std_and_budgeted_options_reach_their_components():
    pool = make_estimator(GRPOConfig(advantage_estimator="pool", pool_std=True))
    adv = pool(torch.tensor([[1.0, 0.0]]), pool=[torch.tensor([1.0, 0.0, 0.0, 0.0])]).advantages
    # pool mean 0.25, std_unb = sqrt(0.25) = 0.5: (1 - 0.25) / (0.5 + 1e-4) = 1.49970
    assert adv[0, 0].item() == pytest.approx(0.75 / 0.5001, abs=1e-5)
    sampler = make_sampler(GRPOConfig(sampler="budgeted", budget_first_round=0.5, budget_prior_strength=4.0))
    assert (sampler.first_round, sampler.prior_strength) == (0.5, 4.0)


def test_an_option_the_run_never_reads_is_named_with_what_would_read_it():
    notes = unused_options(GRPOConfig(sampler="dynamic", exit_rule="pos", use_avspo=True, scale_rewards="batch",
                                      lora_r=8, max_gen_batches=5))
    assert notes == [
        "lora_r=8 is not used: it is read by LoRA (use_peft=True)",
        "scale_rewards='batch' is not used: advantage_estimator='avspo' does not read it (read by "
        "advantage_estimator grpo)",
        "exit_rule='pos' is not used: sampler='dynamic' does not read it (read by sampler reinforce_ada)",
    ]
    assert unused_options(GRPOConfig()) == []  # defaults are never reported
    assert unused_options(GRPOConfig(kl_estimator="k1")) == [
        "kl_estimator='k1' is not used: it is read by the KL term and kl/mean, which need a reference policy "
        "(beta > 0 or use_peft)"]
    assert unused_options(GRPOConfig(kl_estimator="k1", beta=0.1)) == []


def test_the_trainer_says_so_at_the_start(tmp_path, tiny_llama, tiny_tokenizer, capsys):
    from test_trainer import DATA, text_length, tiny_config

    from grposcope import GRPOTrainer

    args = tiny_config(tmp_path, max_steps=1, virtual_sample_alpha=0.7)
    GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length, train_dataset=DATA,
                args=args).train()
    assert ("virtual_sample_alpha=0.7 is not used: advantage_estimator='grpo' does not read it (read by "
            "advantage_estimator avspo)") in capsys.readouterr().out


def test_new_options_are_checked_before_any_model_loads():
    with pytest.raises(ValueError, match="kl_in_reward=True needs beta > 0"):
        GRPOConfig(kl_in_reward=True)
    with pytest.raises(ValueError, match="overlong_buffer_len must be in"):
        GRPOConfig(overlong_buffer_len=300, max_completion_length=256)
    with pytest.raises(ValueError, match="need 0 <= acr_threshold_min <= acr_threshold_init <= acr_threshold_max"):
        GRPOConfig(use_avspo=True, acr_threshold_min=0.6)
    with pytest.raises(ValueError, match="virtual_reward_range must be"):
        GRPOConfig(use_avspo=True, virtual_reward_range=(1.0, 0.0))


def test_soft_overlong_penalty_is_switched_on_by_the_config(tmp_path, tiny_llama, tiny_tokenizer):
    from test_trainer import DATA, read_lines, text_length, tiny_config

    from grposcope import GRPOTrainer
    from grposcope.rewards import make_soft_overlong_penalty

    # free up to 10 - 4 = 6 tokens; 8 tokens: -(8 - 6) / 4 * 0.5 = -0.25; 10 and 12: -0.5
    penalty = make_soft_overlong_penalty(10, 4, factor=0.5)
    assert penalty(completion_ids=[[1] * 6, [1] * 8, [1] * 10, [1] * 12]) == [0.0, -0.25, -0.5, -0.5]
    args = tiny_config(tmp_path, max_steps=1, overlong_buffer_len=3, overlong_penalty_factor=0.5,
                       generation_kwargs={"min_new_tokens": 6})  # every completion max_completion_length = 6 long
    GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length, train_dataset=DATA,
                args=args).train()
    [line] = read_lines(tmp_path / "run" / "metrics.jsonl")
    assert line["reward/soft_overlong_penalty/mean"] == -0.5
    assert line["reward/mean"] == pytest.approx(line["reward/text_length/mean"] - 0.5, abs=1e-6)


def test_kl_in_reward_moves_the_kl_from_the_loss_into_the_reward(tmp_path, tiny_llama, tiny_tokenizer):
    from test_trainer import DATA, read_lines, text_length, tiny_config

    from grposcope import GRPOTrainer

    args = tiny_config(tmp_path, max_steps=3, beta=0.5, kl_in_reward=True, learning_rate=0.05)
    GRPOTrainer(model=tiny_llama, processing_class=tiny_tokenizer, reward_funcs=text_length, train_dataset=DATA,
                args=args).train()
    lines = read_lines(tmp_path / "run" / "metrics.jsonl")
    assert all("loss/kl" not in line for line in lines)  # no KL loss term
    assert lines[0]["kl/reward_penalty"] == 0.0  # the policy is the reference at step 1
    assert lines[2]["kl/reward_penalty"] > 0.0 and lines[2]["kl/mean"] > 0.0


def test_the_pool_std_follows_advantage_std_unbiased_under_reinforce_ada():
    # a pool [1, 0, 0, 0] drawn by the sampler: std_unb = 0.5, std_pop = sqrt(0.1875) = 0.43301
    from grposcope.core.advantages import pool_stats

    pool = pool_stats(torch.tensor([[1.0, 0.0, 0.0, 0.0]]), torch.ones(1, 4, dtype=torch.bool))
    kept = torch.tensor([[1.0, 0.0]])
    for unbiased, std in ((True, 0.5), (False, 0.1875**0.5)):
        est = make_estimator(GRPOConfig(advantage_estimator="pool", pool_std=True, advantage_std_unbiased=unbiased))
        assert est(kept, pool=pool).advantages[0, 0].item() == pytest.approx(0.75 / (std + 1e-4), abs=1e-5)
