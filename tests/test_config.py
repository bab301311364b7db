"""GRPOConfig validation, the batch geometry (TRL 1.16's meaning), and the CLI's option parsing."""

from __future__ import annotations

import pytest

from grposcope.cli import coerce_all, parse_overrides
from grposcope.components.build import build
from grposcope.core.advantages import ESTIMATORS
from grposcope.sampling import SAMPLERS
from grposcope.trainer.config import GRPOConfig
from grposcope.trainer.geometry import geometry_for, total_steps


def test_seed_example_config_is_accepted_and_means_avspo():
    config = GRPOConfig(output_dir="./output", per_device_train_batch_size=1, num_generations=8, temperature=1.0,
                        learning_rate=1e-6, max_completion_length=1024,
                        use_avspo=True, acr_threshold_init=0.5, virtual_sample_alpha=0.5)
    assert config.advantage_estimator == "avspo"
    assert config.aggregation == "token_mean" and (config.epsilon, config.epsilon_high) == (0.2, None)  # as TRL
    loss = build(config, "policy_loss")
    assert (loss.eps_low, loss.eps_high) == (0.2, 0.2)  # epsilon_high None: epsilon


@pytest.mark.parametrize(
    "options, message",
    [
        ({"num_generations": 1}, r"num_generations must be a whole number in \[2, 1,000,000\]"),
        ({"max_completion_length": 0}, "max_completion_length must be > 0"),
        ({"advantage_estimator": "gae"}, f"known: {', '.join(ESTIMATORS.names())}"),
        ({"sampler": "greedy"}, f"unknown sampler 'greedy'; known: {', '.join(SAMPLERS.names())}"),
        ({"loss_type": "ppo"}, "known: grpo, bnpo, dapo, dr_grpo"),
        ({"use_avspo": True, "advantage_estimator": "rloo"}, "conflicts"),
        ({"virtual_sample_strategy": "random"}, "known: stratified"),
        ({"max_steps": 0}, "max_steps must be a positive integer, or -1"),
        ({"per_device_train_batch_size": 0}, "per_device_train_batch_size must be a positive integer"),
    ],
)
def test_bad_options_are_named(options, message):
    with pytest.raises(ValueError, match=message):
        GRPOConfig(**options)


def test_unknown_option_suggests_the_close_name():
    with pytest.raises(ValueError, match="lerning_rate \\(did you mean learning_rate\\?\\)"):
        GRPOConfig.from_dict({"lerning_rate": 1e-6})


def test_scale_rewards_accepts_trl_booleans():
    assert build(GRPOConfig(scale_rewards=True), "advantage_estimator").scale == "group"
    assert build(GRPOConfig(scale_rewards=False), "advantage_estimator").scale == "none"


def test_geometry_of_the_seed_example_accumulates_one_whole_group():
    geo = geometry_for(GRPOConfig(per_device_train_batch_size=1, num_generations=8))
    # 1 completion per micro-batch, 8 micro-batches per step: one prompt with its 8 completions
    assert (geo.micro_batch, geo.accumulation, geo.prompts_per_generation) == (1, 8, 1)
    assert geo.optimizer_batch == 8 and "accumulating 8 micro-batches" in geo.note


def test_geometry_follows_trl_meaning():
    geo = geometry_for(GRPOConfig(per_device_train_batch_size=8, gradient_accumulation_steps=2))
    assert (geo.generation_batch, geo.prompts_per_generation, geo.optimizer_steps_per_generation) == (16, 2, 1)
    assert geo.note is None
    # steps_per_generation 8 with accumulation 2: one generation of 4 x 8 = 32 completions feeds 4 steps
    geo = geometry_for(GRPOConfig(per_device_train_batch_size=4, gradient_accumulation_steps=2, steps_per_generation=8))
    assert (geo.generation_batch, geo.prompts_per_generation, geo.optimizer_steps_per_generation) == (32, 4, 4)


def test_geometry_errors():
    with pytest.raises(ValueError, match="must divide num_generations"):
        geometry_for(GRPOConfig(per_device_train_batch_size=3))
    with pytest.raises(ValueError, match="multiple of num_generations"):
        geometry_for(GRPOConfig(per_device_train_batch_size=12))
    with pytest.raises(ValueError, match="not both"):
        geometry_for(GRPOConfig(generation_batch_size=16, steps_per_generation=2))


def test_total_steps_from_epochs():
    config = GRPOConfig(per_device_train_batch_size=8, gradient_accumulation_steps=2, num_train_epochs=1.5)
    # 2 prompts per generation, 10 prompts x 1.5 epochs = 15 prompts -> ceil(7.5) = 8 generations = 8 steps
    assert total_steps(config, geometry_for(config), num_prompts=10) == 8
    assert total_steps(GRPOConfig(max_steps=3), geometry_for(GRPOConfig()), num_prompts=10) == 3


def test_cli_overrides_are_typed_by_the_config():
    raw = parse_overrides(["--num_generations", "16", "--use_avspo", "--learning_rate=1e-6",
                           "--report_to", "tensorboard,wandb", "--eval_steps", "none", "--scale_rewards", "false",
                           "--lora-target-modules", "q_proj"])
    assert coerce_all(raw) == {
        "num_generations": 16, "use_avspo": True, "learning_rate": 1e-6, "report_to": ["tensorboard", "wandb"],
        "eval_steps": None, "scale_rewards": False, "lora_target_modules": ["q_proj"],
    }
    with pytest.raises(ValueError, match="--num_generations: cannot read 'many'"):
        coerce_all({"num_generations": "many"})
    with pytest.raises(ValueError, match="unexpected argument 'stray'"):
        parse_overrides(["stray"])
