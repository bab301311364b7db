"""Every option's valid values (issue 26, point 4): each GRPOConfig option with a bad value, and the numeric
options of the other commands, are refused where the config is built, in one line naming the option.

The table below holds one bad value per GRPOConfig field, but for a component option whose range is declared in
its annotation (core/ranges.py): its bad value is derived from that range (DECLARED). `test_the_table_covers_every_
option` fails when an option is added with neither.
"""

from __future__ import annotations

import json
import math
import re

import pytest
from test_hardening import no_model_loads, one_error_line, run

from grposcope.presets import PRESETS
from grposcope.trainer import GRPOConfig

# option -> (the options given, a pattern the one-line message must hold); the message must name the option
CASES: dict[str, tuple[dict, str]] = {
    # run
    "output_dir": ({"output_dir": ""}, r"output_dir is empty \(''\), so the run would write into the working"),
    "overwrite_output_dir": ({"overwrite_output_dir": "yes"}, r"option overwrite_output_dir: got 'yes' \(str\)"),
    "run_name": ({"run_name": 5}, r"option run_name: got 5 \(int\)"),
    "seed": ({"seed": -1}, r"seed must be in \[0, 4294967295\] .*got -1"),
    # a plug-in's keyword arguments (components/plugins.py)
    "advantage_estimator_kwargs": ({"advantage_estimator_kwargs": "[1]"},
                                   r"advantage_estimator_kwargs must be a mapping of the plug-in's keyword"),
    "sampler_kwargs": ({"sampler_kwargs": 5}, r"option sampler_kwargs: got 5 \(int\); it takes a mapping"),
    "policy_loss_kwargs": ({"policy_loss_kwargs": "{a"}, r"policy_loss_kwargs must be a mapping .*got '\{a'"),
    "report_to": ({"report_to": "tensorbored"}, r"unknown logger\(s\) \['tensorbored'\] in report_to"),
    "logging_steps": ({"logging_steps": 0}, r"logging_steps must be a positive integer .*got 0"),
    "log_completions": ({"log_completions": "no"}, r"option log_completions: got 'no'"),
    "num_completions_to_print": ({"num_completions_to_print": 0},
                                 r"num_completions_to_print must be a positive integer .*got 0; or None"),
    "save_steps": ({"save_steps": 0}, r"save_steps must be a positive integer .*got 0"),
    "save_total_limit": ({"save_total_limit": 0}, r"save_total_limit must be a positive integer .*got 0; or None"),
    "resume_from_checkpoint": ({"resume_from_checkpoint": ""}, r"resume_from_checkpoint is an empty path"),
    "eval_steps": ({"eval_steps": 0}, r"eval_steps must be a positive integer .*got 0"),
    "eval_num_samples": ({"eval_num_samples": -1}, r"eval_num_samples must be >= 0 .*got -1"),
    "eval_limit": ({"eval_limit": 0}, r"eval_limit must be a positive integer .*got 0"),
    # model
    "model_name_or_path": ({"model_name_or_path": " "}, r"model_name_or_path is empty"),
    "trust_remote_code": ({"trust_remote_code": "yes"}, r"option trust_remote_code: got 'yes'"),
    "use_peft": ({"use_peft": 1}, r"option use_peft: got 1 \(int\)"),
    "lora_r": ({"lora_r": 0}, r"lora_r must be a positive integer .*got 0"),
    "lora_alpha": ({"lora_alpha": -32}, r"lora_alpha must be > 0 .*got -32"),
    "lora_dropout": ({"lora_dropout": 1.0}, r"lora_dropout must be in \[0, 1\) .*got 1.0"),
    "lora_target_modules": ({"lora_target_modules": []}, r"lora_target_modules is an empty list"),
    # data
    "dataset_name": ({"dataset_name": "nosuch"}, r"dataset_name: unknown task 'nosuch'"),
    "dataset_size": ({"dataset_size": 0}, r"dataset_size must be a positive integer .*got 0"),
    "eval_size": ({"eval_size": -1}, r"eval_size must be >= 0 .*got -1"),
    "reward_funcs": ({"reward_funcs": []}, r"reward_funcs is an empty list"),
    "reward_weights": ({"reward_weights": [1.0, math.nan]}, r"reward_weights\[1\] is nan"),
    "reward_timeout": ({"reward_timeout": 0}, r"reward_timeout must be > 0 .*got 0"),
    "reward_errors": ({"reward_errors": "ignore"}, r"unknown reward_errors 'ignore'"),
    # batch geometry
    "num_generations": ({"num_generations": 1},
                        r"num_generations must be a whole number in \[2, 1,000,000\] \(.*a group of one has no "
                        r"advantage.*\), got 1"),
    "per_device_train_batch_size": ({"per_device_train_batch_size": -8},
                                    r"per_device_train_batch_size must be a positive integer, got -8"),
    "gradient_accumulation_steps": ({"gradient_accumulation_steps": 0},
                                    r"gradient_accumulation_steps must be a positive integer, got 0"),
    "generation_batch_size": ({"generation_batch_size": 0}, r"generation_batch_size must be a positive integer"),
    "steps_per_generation": ({"steps_per_generation": 0},
                             r"steps_per_generation must be a positive integer .*got 0; or None for"),
    "num_iterations": ({"num_iterations": 0}, r"num_iterations must be a positive integer, got 0"),
    "max_steps": ({"max_steps": -2}, r"max_steps must be a positive integer, or -1 \(.*num_train_epochs "
                                      r"decides\), got -2"),
    "num_train_epochs": ({"num_train_epochs": -1.0}, r"num_train_epochs must be > 0 .*got -1.0"),
    "max_samples": ({"max_samples": 0}, r"max_samples must be > 0 .*got 0"),
    "max_updates": ({"max_updates": 0}, r"max_updates must be a positive integer .*got 0"),
    # generation
    "max_prompt_length": ({"max_prompt_length": 0}, r"max_prompt_length must be a positive integer .*got 0"),
    "max_completion_length": ({"max_completion_length": 0}, r"max_completion_length must be > 0 tokens"),
    "temperature": ({"temperature": 0.0}, r"temperature must be > 0 .*got 0.0"),
    "top_p": ({"top_p": 1.5}, r"top_p must be in \(0, 1\] .*got 1.5"),
    "top_k": ({"top_k": -1}, r"top_k must be >= 0 .*got -1"),
    "use_vllm": ({"use_vllm": True}, r"use_vllm=True: grposcope's own trainer"),
    "generation_kwargs": ({"generation_kwargs": {"suppress_tokens": [-1]}}, r"generation_kwargs: suppress_tokens"),
    "mask_truncated_completions": ({"mask_truncated_completions": "yes"}, r"option mask_truncated_completions"),
    "decode_loop": ({"decode_loop": "vllm"}, r"unknown decode_loop 'vllm'; known: grposcope, generate"),
    "rollout_dtype": ({"rollout_dtype": "float16"}, r"unknown rollout_dtype 'float16'; known: float32, bfloat16"),
    "rollout_importance_sampling_correction": ({"rollout_importance_sampling_correction": "no"},
                                               r"option rollout_importance_sampling_correction"),
    "rollout_importance_sampling_mode": ({"rollout_importance_sampling_mode": "truncate"},
                                         r"unknown rollout_importance_sampling_mode 'truncate'"),
    "rollout_importance_sampling_clip_max": ({"rollout_importance_sampling_clip_max": 0.5},
                                             r"rollout_importance_sampling_clip_max must be >= 1"),
    "overlong_buffer_len": ({"overlong_buffer_len": 300}, r"overlong_buffer_len must be in \[0, max_completion"),
    "overlong_penalty_factor": ({"overlong_penalty_factor": -1.0}, r"overlong_penalty_factor must be >= 0"),
    # optimisation
    "learning_rate": ({"learning_rate": 0.0}, r"learning_rate must be > 0 .*got 0.0"),
    "weight_decay": ({"weight_decay": -0.01}, r"weight_decay must be >= 0 .*got -0.01"),
    "max_grad_norm": ({"max_grad_norm": -1.0}, r"max_grad_norm must be >= 0 \(.*0: no clipping.*\), got -1.0"),
    "max_bad_steps": ({"max_bad_steps": -1}, r"max_bad_steps must be >= 0 .*got -1"),
    "diagnose_every": ({"diagnose_every": -1}, r"diagnose_every must be >= 0 .*got -1"),
    "skip_no_signal_steps": ({"skip_no_signal_steps": "yes"}, r"option skip_no_signal_steps"),
    "lr_scheduler_type": ({"lr_scheduler_type": "warmup_cosine"}, r"unknown lr_scheduler_type 'warmup_cosine'"),
    "warmup_ratio": ({"warmup_ratio": 2.0}, r"warmup_ratio must be in \[0, 1\] .*got 2.0"),
    # loss
    "policy_loss": ({"policy_loss": "ppo"}, r"policy_loss: unknown policy loss 'ppo'; known:"),
    "loss_type": ({"loss_type": "ppo"}, r"unknown loss_type 'ppo'"),
    "beta": ({"beta": -0.04}, r"beta must be >= 0 .*got -0.04"),
    "kl_estimator": ({"kl_estimator": "k4"}, r"unknown kl_estimator 'k4'"),
    "kl_in_reward": ({"kl_in_reward": True}, r"kl_in_reward=True needs beta > 0"),
    "entropy_coef": ({"entropy_coef": -0.01}, r"entropy_coef must be >= 0 .*got -0.01"),
    # advantages and collapse
    "advantage_estimator": ({"advantage_estimator": "gae"}, r"advantage_estimator: unknown advantage estimator"),
    "use_avspo": ({"use_avspo": True, "advantage_estimator": "rloo"}, r"use_avspo=True conflicts"),
    "acr_ema_lambda": ({"acr_ema_lambda": 1.0}, r"acr_ema_lambda must be in \[0, 1\) .*got 1.0"),
    "sampler": ({"sampler": "greedy"}, r"sampler: unknown sampler 'greedy'"),
    "success_threshold": ({"success_threshold": math.nan}, r"option success_threshold: got nan"),
    "kl_bound": ({"kl_bound": 0.0}, r"kl_bound must be > 0 .*got 0.0"),
    "measure_update": ({"measure_update": "yes"}, r"option measure_update"),
    "diagnostics": ({"diagnostics": "yes"}, r"option diagnostics"),
    "torch_threads": ({"torch_threads": 0}, r"torch_threads must be in \[1, 1024\] .*got 0"),
    # the components' options (trainer/options.py)
    "acr_threshold_init": ({"acr_threshold_init": 2.0}, r"acr_threshold_init <= .* got 0.1, 2.0, 0.9"),
    "virtual_sample_alpha": ({"virtual_sample_alpha": 0.0}, r"virtual_sample_alpha must be > 0, got 0.0"),
    "virtual_sample_strategy": ({"virtual_sample_strategy": "random"}, r"unknown virtual_sample_strategy 'random'"),
    "virtual_reward_range": ({"virtual_reward_range": (1.0, 0.0)}, r"virtual_reward_range must be .*got \[1.0, 0.0\]"),
    "virtual_reward_anchor": ({"virtual_reward_anchor": -0.1}, r"virtual_reward_anchor must be > 0 .*got -0.1"),
    "virtual_reward_partial": ({"virtual_sample_strategy": "fixed", "virtual_reward_partial": 2.0},
                               r"virtual_reward_partial must be inside virtual_reward_range \(0, 1\)"),
    "acr_threshold_adaptive": ({"acr_threshold_adaptive": "yes"}, r"option acr_threshold_adaptive"),
    "acr_threshold_eta": ({"acr_threshold_eta": -0.01}, r"acr_threshold_eta must be >= 0 .*got -0.01"),
    "acr_threshold_reward_ema": ({"acr_threshold_reward_ema": 1.0}, r"reward_ema must be in \[0, 1\), got 0.9 and 1.0"),
    "acr_threshold_min": ({"acr_threshold_min": -0.1}, r"need 0 <= acr_threshold_min .*got -0.1, 0.5, 0.9"),
    "acr_threshold_max": ({"acr_threshold_max": 1.5}, r"acr_threshold_max <= 1, got 0.1, 0.5, 1.5"),
    "all_wrong_max_share": ({"all_wrong_max_share": 1.0}, r"all_wrong_max_share must be in \[0, 1\)"),
    "advantage_std_unbiased": ({"advantage_std_unbiased": "yes"}, r"option advantage_std_unbiased"),
    "advantage_eps": ({"advantage_eps": 0.0}, r"advantage_eps must be > 0 .*got 0.0"),
    "scale_rewards": ({"scale_rewards": "per_token"}, r"unknown scale_rewards 'per_token'"),
    "pool_std": ({"pool_std": "yes"}, r"option pool_std"),
    "sample_budget": ({"sample_budget": 0}, r"sample_budget must be an int >= 1 .*got 0"),
    "budget_candidates": ({"budget_candidates": 0.5}, r"budget_candidates must be in \[1, 100\] .*got 0.5"),
    "budget_first_round": ({"budget_first_round": 0.0}, r"budget_first_round <= 1, .*got 4.0, 0.0,"),
    "budget_decay": ({"budget_decay": 1.5}, r"0 < budget_decay <= 1 .*got 4.0, 0.75, 1.5 and 2.0"),
    "budget_prior_strength": ({"budget_prior_strength": 0.0}, r"budget_prior_strength > 0, got .* and 0.0"),
    "budget_min_p_mixed": ({"budget_min_p_mixed": 1.0}, r"budget_min_p_mixed must be in \[0, 1\), got 1.0"),
    "max_gen_batches": ({"max_gen_batches": 0}, r"max_gen_batches must be an int >= 1"),
    "on_shortfall": ({"on_shortfall": "skip"}, r"unknown on_shortfall 'skip'"),
    "greso_p_easy": ({"greso_p_easy": 0.99}, r"greso_p_easy must be in \[0.05, 0.95\]"),
    "greso_p_hard": ({"greso_p_hard": 0.0}, r"greso_p_hard must be in \[0.05, 0.95\]"),
    "greso_target_zero_variance": ({"greso_target_zero_variance": 1.0},
                                   r"greso_target_zero_variance and greso_p_step must be in \(0, 1\)"),
    "greso_p_step": ({"greso_p_step": 0.0}, r"greso_target_zero_variance and greso_p_step must be in"),
    "greso_max_candidates": ({"greso_max_candidates": 0.5}, r"greso_max_candidates must be in \[1, 100\] "
                             r"\(prompts the filter may look at per batch.*got 0.5"),
    "knapsack_max_groups": ({"knapsack_max_groups": 0}, r"knapsack_max_groups must be an int in \[1, 1024\] "
                            r"\(the most groups of G one prompt may get in a step.*got 0"),
    "exit_rule": ({"exit_rule": "first"}, r"unknown exit_rule 'first'"),
    "round_size": ({"round_size": 0}, r"round_size must be an int >= 1"),
    "max_rounds": ({"max_rounds": 0}, r"max_rounds must be an int >= 1"),
    "drop_unresolved": ({"drop_unresolved": "yes"}, r"option drop_unresolved"),
    "cispo_epsilon_low": ({"cispo_epsilon_low": 1.5}, r"cispo_epsilon_low must be in \(0, 1\]"),
    "cispo_epsilon_high": ({"cispo_epsilon_high": 0.0}, r"cispo_epsilon_high > 0"),
    "epsilon": ({"epsilon": 0.0}, r"epsilon and epsilon_high must be > 0"),
    "epsilon_high": ({"epsilon_high": -0.1}, r"epsilon and epsilon_high must be > 0, got 0.2 and -0.1"),
    "dual_clip": ({"dual_clip": 0.5}, r"dual_clip must be > 1"),
    "gspo_epsilon": ({"gspo_epsilon": 1.0}, r"gspo_epsilon must be in \(0, 1\)"),
    "gspo_epsilon_high": ({"gspo_epsilon_high": 0.0}, r"gspo_epsilon_high > 0"),
}


def _declared_cases() -> dict[str, tuple[dict, str]]:
    """A bad value for each component option whose range is declared with it and that CASES leaves out: just past
    the range's lower bound (or its upper one)."""
    from grposcope.components.options import declared

    out = {}
    for field, option in declared().items():
        rule = option.range
        if field in CASES or rule is None:
            continue
        if rule.low is not None:
            bad = rule.low if rule.low_open else rule.low - 1
        else:
            bad = rule.high if rule.high_open else rule.high + 1
        out[field] = ({field: bad}, re.escape(f"{field} must be {rule.rule}"))
    return out


DECLARED = _declared_cases()


def test_the_table_covers_every_option():
    assert sorted({**CASES, **DECLARED}) == sorted(GRPOConfig.field_names())


@pytest.mark.parametrize("option", [*CASES, *DECLARED])
def test_a_bad_value_of_each_option_is_refused_naming_it(option):
    options, pattern = {**CASES, **DECLARED}[option]
    with pytest.raises((ValueError, TypeError), match=pattern) as caught:
        GRPOConfig(**options)
    message = str(caught.value)
    assert option in message and "\n" not in message


# values at the edge of each range that stay valid: refusing them would break configs that work today
@pytest.mark.parametrize("options", [
    {}, *PRESETS.values(),
    {"max_grad_norm": 0.0},  # the trainer clips at inf: no clipping
    {"warmup_ratio": 1.0}, {"warmup_ratio": 0.0}, {"eval_size": 0}, {"acr_ema_lambda": 0.0}, {"seed": 0},
    {"seed": 2**32 - 1}, {"steps_per_generation": None, "generation_batch_size": None},
    {"steps_per_generation": 2, "gradient_accumulation_steps": 2}, {"top_k": 0}, {"beta": 0.0},
    {"virtual_sample_strategy": "fixed", "virtual_reward_partial": 0.5}, {"virtual_reward_partial": 2.0},
    {"reward_weights": [1.0, -0.5], "reward_funcs": ["accuracy_reward", "format_reward"]},
    {"greso_max_candidates": 100.0}, {"greso_max_candidates": 1.0}, {"knapsack_max_groups": 1024},
], ids=lambda options: ",".join(f"{k}={v}" for k, v in options.items())[:60] or "defaults")
def test_valid_values_at_the_edges_and_the_presets_are_accepted(options):
    GRPOConfig(**options)


# --- the real command line: parsed, coerced and checked before any model is loaded -------------------------


@pytest.mark.parametrize("argv, message", [
    (["--max_grad_norm", "-1"], "max_grad_norm must be >= 0"),
    (["--warmup_ratio", "2.0"], "warmup_ratio must be in [0, 1]"),
    (["--warmup_ratio", "-0.5"], "warmup_ratio must be in [0, 1]"),
    (["--steps_per_generation", "0"], "steps_per_generation must be a positive integer"),
    (["--output_dir", ""], "output_dir is empty"),
    (["--advantage_eps", "0"], "advantage_eps must be > 0"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_train_refuses_out_of_range_options_before_the_model_loads(tmp_path, monkeypatch, argv, message):
    no_model_loads(monkeypatch)
    monkeypatch.chdir(tmp_path)  # where output_dir would be
    assert message in one_error_line(run("train", *argv))


@pytest.mark.parametrize("text", ["", "\n\n", "# learning_rate: 1e-5\n"], ids=["empty", "blank", "comments"])
def test_an_empty_yaml_config_is_refused_naming_the_file(tmp_path, monkeypatch, text):
    no_model_loads(monkeypatch)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "run.yaml"
    path.write_text(text)
    line = one_error_line(run("train", "--config", str(path)))
    assert line.startswith(f"error: {path} holds no options (it is empty or only comments); write one `option: "
                           "value` per line")


def test_a_yaml_list_is_no_config(tmp_path, monkeypatch):
    no_model_loads(monkeypatch)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "run.yaml"
    path.write_text("[]\n")  # read as {} before: accepted without a word
    assert "must hold a mapping of GRPOConfig options, got list" in one_error_line(run("train", "--config",
                                                                                        str(path)))


@pytest.fixture
def probe_file(tmp_path):
    path = tmp_path / "pass_rates.jsonl"  # not probe's default --output, which probe would try to continue
    path.write_text(json.dumps({"index": 0, "prompt": "1 + 1", "k": 4, "successes": 2}) + "\n")
    return path


@pytest.mark.parametrize("argv, message", [
    (["eval", "--model", "m", "--dataset", "arithmetic", "--success_threshold", "nan"],
     "success_threshold must be a finite number, got nan"),
    (["eval", "--model", "m", "--dataset", "arithmetic", "--seed", "-1"], "seed must be an int >= 0"),
    (["eval", "--model", "m", "--dataset", "arithmetic", "--dataset_size", "0"], "--dataset_size must be >= 1"),
    (["eval", "--model", "m", "--dataset", "arithmetic", "--eval_size", "-1"], "--eval_size must be >= 0"),
    (["probe", "--success_threshold", "nan"], "--success_threshold must be a finite number"),
    (["probe", "--temperature", "inf"], "--temperature must be > 0 and finite"),
    (["probe", "--dataset_size", "0"], "--dataset_size must be >= 1"),
    (["probe", "--seed", "-1"], "--seed must be in [0, 4294967295]"),
    (["forecast", "PROBE", "--seed", "-1"], "--seed must be in [0, 4294967295]"),
    (["forecast", "PROBE", "--success_threshold", "nan"], "--success_threshold must be a finite number"),
    (["audit-rewards", "PROBE", "--timeout_s", "inf"], "--timeout_s must be > 0 and finite, got inf"),
    (["simulate", "--shared_skill", "nan"], "shared_skill must be a finite number, got nan"),
    (["simulate", "--difficulty_std", "inf"], "difficulty_std must be a finite number, got inf"),
    (["simulate", "--seed", "4294967296"], "seed must be an int in [0, 4294967295]"),
], ids=lambda v: " ".join(v[:1] + v[-2:]) if isinstance(v, list) else None)
def test_the_other_commands_refuse_out_of_range_options(tmp_path, monkeypatch, probe_file, argv, message):
    no_model_loads(monkeypatch)
    monkeypatch.chdir(tmp_path)  # outputs (eval's, probe's, simulate's) would go here
    argv = [str(probe_file) if a == "PROBE" else a for a in argv]
    # a small simulation, in case it is not refused
    extra = ["--steps", "1", "--prompts", "8", "--batch_size", "4", "--features", "2"] if argv[0] == "simulate" else []
    assert message in one_error_line(run(*argv, *extra))


# --- suppress_tokens and the vocabulary -----------------------------------------------------------------------


@pytest.mark.parametrize("key, value", [("suppress_tokens", [3, 999_999]), ("begin_suppress_tokens", [999_999]),
                                        ("bad_words_ids", [[5], [999_999, 6]])])
def test_token_ids_outside_the_vocabulary_are_refused(key, value):
    from grposcope.rollout.options import check_generation_kwargs

    expected = (f"generation_kwargs: {key} holds token id(s) 999999, outside the model's vocabulary of 49152 "
                "(ids 0 to 49151)")
    with pytest.raises(ValueError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        check_generation_kwargs({key: value}, 256, vocab_size=49152)
    assert check_generation_kwargs({key: value}, 256) == {key: value}  # no vocabulary known: not checked


def test_the_generation_backend_checks_suppress_tokens_against_the_model(tiny_llama, tiny_tokenizer):
    # transformers refuses an unknown id in bad_words_ids but takes one in suppress_tokens without a word
    from grposcope.rollout import ROLLOUTS, SamplingParams

    backend = ROLLOUTS.make("transformers", model=tiny_llama, tokenizer=tiny_tokenizer)
    vocab = tiny_llama.get_output_embeddings().weight.shape[0]
    inside = SamplingParams(3, extra=(("suppress_tokens", [vocab - 1]),))
    assert backend.generate(["1 + 1 ="], 2, inside).completion_ids.shape[0] == 2  # an id it has: fine
    outside = SamplingParams(3, extra=(("suppress_tokens", [vocab + 7]),))
    with pytest.raises(ValueError, match=f"suppress_tokens holds token id\\(s\\) {vocab + 7}, outside the model's "
                                         f"vocabulary of {vocab}"):
        backend.generate(["1 + 1 ="], 2, outside)
