"""The one table of option ranges: every numeric option of grposcope's GRPOConfig, the TRL subclass's
grposcope options, verl's `algorithm.grposcope` keys, and `grposcope diagnose`'s options (the command line,
`diagnose.Options`, `DiagnoseCallback`). One row per option name: its interval, what the option means or a usual
value, and what None means where None is allowed; an error repeats them with the value given ("max_grad_norm
must be >= 0 (...), got -1.0"). A name means one thing wherever it is given (`kl_bound` in a training config and
in `grposcope diagnose --kl_bound`), so it has one row.

Component options (those an estimator, sampler or policy loss declares) are not here: each is checked where it
is declared, by its component's `__init__` or by a range in its annotation (`Annotated[float, at_least(0)]`,
core/ranges.py), which every host applies when it builds the entry (`Registry.check_ranges`).
`success_threshold` has no range: rewards are any real numbers (weighted sums, penalties); it must only be finite.

Pure Python: the diagnosis (no torch) reads it too.
"""

from __future__ import annotations

import math
from typing import Any

from ..core.ranges import QUOTE_CHARS, Range, at_least, positive_int, quoted, within  # noqa: F401  (here too)
from ..eval_settings import MAX_SEED

MAX_TORCH_THREADS = 1024  # far above any machine's cores, far below the threads a process may start


# Every numeric GRPOConfig option but overlong_buffer_len (bounded by max_completion_length: config_checks) and
# the component options their components check; then the options only `grposcope diagnose` takes.
RANGES: dict[str, Range] = {
    # run
    "seed": within(0, MAX_SEED, hint="seeds Python, torch and the samplers, e.g. 42"),
    "logging_steps": positive_int("steps between two console lines; metrics.jsonl gets every step"),
    "num_completions_to_print": positive_int("completions of a logged step written to completions.jsonl",
                                             none="all of them"),
    "save_steps": positive_int("steps between two checkpoints, e.g. 500"),
    "save_total_limit": positive_int("checkpoints to keep", none="keep all"),
    "eval_steps": positive_int("steps between two held-out evaluations", none="only before and after"),
    "eval_num_samples": at_least(0, "sampled completions per held-out prompt for eval/avg@k; 0: greedy only"),
    "eval_limit": positive_int("held-out prompts evaluated during training", none="the whole split"),
    # model
    "lora_r": positive_int("the LoRA rank, e.g. 16"),
    "lora_alpha": at_least(0, "LoRA's scaling numerator, e.g. 32", strict=True),
    "lora_dropout": within(0, 1, "[)", "a dropout probability, e.g. 0.05"),
    # data
    "dataset_size": positive_int("training prompts to generate", none="the task's own"),
    "eval_size": at_least(0, "held-out prompts; 0: no held-out evaluation", none="the task's own split"),
    "reward_timeout": at_least(0, "seconds a reward function may take on one batch, e.g. 60", strict=True),
    # batch geometry
    "num_generations": Range("a whole number in [2, 1,000,000]", 2, 1_000_000, whole=True,
                             hint="completions per prompt, the group G: GRPO compares completions of the same "
                             "prompt, so a group of one has no advantage; 8 is the usual"),
    "per_device_train_batch_size": positive_int(),
    "gradient_accumulation_steps": positive_int(),
    "generation_batch_size": positive_int("completions generated at once",
                                          none="per_device_train_batch_size x steps_per_generation"),
    "steps_per_generation": positive_int("micro-batches generated at once",
                                         none="gradient_accumulation_steps, one generation per optimizer step"),
    "num_iterations": positive_int(),
    "num_train_epochs": at_least(0, "passes over the training prompts, read when max_steps is -1", strict=True),
    "max_samples": at_least(0, "completions to generate in all", none="no limit", strict=True),
    "max_updates": positive_int("optimizer updates to take in all", none="no limit"),
    "max_steps": Range("a positive integer, or -1", low=1, whole=True, also=(-1,),
                       hint="optimizer steps in all, e.g. 200; -1: num_train_epochs decides"),
    # generation
    "max_prompt_length": positive_int("tokens a prompt keeps at most, e.g. 512", none="no limit"),
    "max_completion_length": at_least(0, "the longest reply to generate, e.g. 256, the default", strict=True,
                                      unit=" tokens"),
    "temperature": at_least(0, "sampling; greedy decoding cannot explore; 1.0 is the usual", strict=True),
    "top_p": within(0, 1, "(]", "the nucleus sampling mass; 1.0 keeps the whole distribution"),
    "top_k": at_least(0, "top-k sampling; 0: off"),
    "rollout_importance_sampling_clip_max": at_least(1, "the largest importance weight a token keeps, e.g. 2.0; "
                                                     "below 1 every token would be weighted down"),
    "overlong_penalty_factor": at_least(0, "the soft overlong penalty's largest penalty, e.g. 1.0; a negative "
                                        "one would reward overlong replies"),
    # optimisation
    "learning_rate": at_least(0, "AdamW's learning rate, e.g. 1e-6", strict=True),
    "weight_decay": at_least(0, "AdamW's weight decay, e.g. 0.0 or 0.01"),
    "max_grad_norm": at_least(0, "the largest global gradient norm an update keeps, e.g. 1.0; 0: no "
                              "clipping; a negative one would turn every update around"),
    "max_bad_steps": at_least(0, "skipped NaN/inf updates before the run stops; 0: stop at the first NaN/inf"),
    "diagnose_every": at_least(0, "steps between two live diagnoses of the run's metrics, e.g. 10; 0: off"),
    "warmup_ratio": within(0, 1, hint="the fraction of the steps that warms the learning rate up, e.g. 0.1"),
    # loss
    "beta": at_least(0, "the KL coefficient, e.g. 0.04; 0: no KL term"),
    "entropy_coef": at_least(0, "the entropy bonus; 0: off"),
    # advantages and collapse
    "acr_ema_lambda": within(0, 1, "[)", "the smoothing of collapse/acr_ema, e.g. 0.9; 0: each step's ACR"),
    "kl_bound": at_least(0, "the mean per-token KL above which the KL-drift alarm fires, e.g. 0.5", strict=True),
    # torch starts them all at once: 100,000 ends in "can't start new thread" and a segfault
    "torch_threads": Range(f"in [1, {MAX_TORCH_THREADS}]", 1, MAX_TORCH_THREADS,
                           hint="torch's CPU threads, e.g. the machine's cores; more only contend for them",
                           none="torch's choice"),
    # grposcope diagnose's (what a log does not say)
    "entropy_floor": at_least(0, "the mean per-token entropy, in nats, below which entropy_collapse fires, e.g. "
                              "0.5"),
    "gpus": positive_int("GPUs the run used, for its cost in GPU-hours", high=1_000_000),
    "gpu_hour_cost": at_least(0, "the price of one GPU-hour, for the cost in money"),
}


def check_options(values: dict[str, Any], prefix: str = "") -> None:
    """The ranges on options given outside grposcope's GRPOConfig (the TRL subclass's config, verl's
    algorithm.grposcope, `grposcope diagnose` and its Options): every number finite and never a bool, a whole
    number where one is asked, and each option's row of RANGES, with the messages grposcope's own config gives.
    `prefix`: "--" for the command line's spelling. None: not given."""
    for name, value in values.items():
        rule = RANGES.get(name)
        if value is None:
            continue
        shown = prefix + name
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(not_finite(name, value, prefix))
        if rule is None or not isinstance(value, (int, float)):
            continue
        if isinstance(value, bool) or (rule.whole and not float(value).is_integer()):
            raise ValueError(rule.message(shown, value))
        if not rule.holds(value):
            raise ValueError(rule.message(shown, value))


def not_finite(name: str, value: float, prefix: str = "") -> str:
    """The one wording for NaN or inf given to an option, by any host (the config's type check too)."""
    rule = RANGES.get(name)
    return (f"{prefix + name if prefix else 'option ' + name}: got {value}; give a finite number"
            + (f" ({rule.rule})" if rule is not None else ""))
